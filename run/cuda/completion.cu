/* CP completion (--observed nonzeros) on one GPU or several: run/cpu/
 * completion.c's algorithm, the reference, step for step (each row's
 * normal equations of its training entries plus the ridge, solved by
 * Cholesky; rows with no training entry or a singular system kept at
 * their value in the model; lambda as CP-ALS takes it; the fit and RMSEs
 * after each iteration). Only scalars cross to the host: after each
 * iteration the residual sums and each mode's counts of kept rows.
 *
 * Several GPUs of one process (as CP-APR's, apr.cu: one host thread a GPU,
 * the same communicators, amp_comm, and gpu_team.h's polled waits, stop
 * and failure handling): each GPU holds its part of the tensor, the shards
 * AMPED's owner-computes partition dealt it, which own disjoint rows of
 * every mode (one contiguous range a GPU in the run's row order), and a
 * whole copy of every factor. For mode n:
 *   - each GPU builds and solves the systems of its own rows only (a row's
 *     nonzeros are all on its owner, so its system is whole there; the
 *     launch covers only the owner's rows, which the others' parts do not
 *     hold);
 *   - then the mode's rows go to every GPU as CP-ALS sends them
 *     (amp_comm_allgatherv: NCCL, or copies between the GPUs), and the
 *     column norms and lambda are taken over every row on each GPU alike:
 *     each GPU then holds the same factor and lambda, bit for bit, with no
 *     sum across GPUs;
 *   - after the last mode, each GPU's residual sums over its nonzeros of
 *     the last mode's copy, its count of the draw's test entries and its
 *     counts of kept rows go into its own slot of a vector of one slot a
 *     GPU (4 + 2 N doubles; the others zero), summed across GPUs
 *     (amp_comm_allreduce: one nonzero term a place, exact) and added on
 *     the host in GPU order 0, 1, ...: the same bits on every GPU and
 *     every run. --holdout-file's entries are the run's GPU 0's alone.
 * What crosses GPUs an iteration: every mode's rows, 8 R bytes a row
 * (each GPU receives the rows it does not own: (G - 1) / G of 8 R
 * sum(rows) on average, G GPUs), and the slots, 8 G (4 + 2 N) bytes
 * each GPU. So a run on several GPUs takes the decisions of one GPU's
 * (each row's system is built from the same nonzeros in the same order)
 * and differs from it only in the order of the residual sums, by GPU
 * (about 1e-16 relative; tests/test_multi_gpu.c bounds the sequence of
 * fits and RMSEs at 1e-9). Only the owner-computes partition: equal-nnz
 * cuts rows between GPUs, whose systems would need a sum of R (R + 1) / 2
 * + R + 1 doubles a cut row, and --overlap's two groups part a row's
 * nonzeros (both refused); one process (the training count and the
 * holdout's relabelling come from the whole tensor).
 *
 * cmp_rows, the fused pass (build and solve). Thread mapping: a warp owns
 * whole rows of mode d (rows w, w + W, ... of the rows the launch covers,
 * W warps in the grid), found through the copy's row starts (cmp_starts,
 * computed once at the start, from the copy itself). For each of its
 * row's nonzeros the warp reads the word and value (the same address on
 * every lane: one transaction), tests the holdout draw from the original
 * coordinates (amp_holdout_draw; the relabelling uploaded), gathers the
 * other modes' rows (lane l holds entries l, l + 32, ...), forms k (their
 * Hadamard product, in mode order, as the CPU does) into the warp's
 * shared memory, and each lane adds its entries of the packed system:
 * the upper triangle of k k^T (entry e of row p at p R - p (p - 1) / 2 +
 * q - p), then x k, then the count, W = R (R + 1) / 2 + R + 1 doubles a
 * warp in shared memory, no atomics (a row is one warp's). Then the same
 * warp factors the system in place (right-looking Cholesky, lanes over a
 * pivot row's columns, then over the trailing rows' columns), checks each
 * pivot against AMP_COMPLETION_PIVOT R eps times the largest diagonal
 * entry (ridge included) as the CPU does, and solves by a forward and a
 * back substitution, lanes over the columns; h goes over the row.
 *   Bytes per nonzero: 8 (word) + 4 or 8 (value; 0 in the stream layout)
 *   streamed once (every lane reads the same address), N - 1 gathered
 *   factor rows of R sizeof(real), and with a holdout N relabelling
 *   entries (8 each). Per row: its factor row written once (8 R); the
 *   system never leaves shared memory. So the bytes floor is CP-ALS's
 *   MTTKRP's, and what the per-row systems add is arithmetic:
 *   FLOPs per nonzero (N - 2) R (k) + R (R + 1) (k k^T's upper triangle
 *   and x k, one multiply and one add each: the R (R + 1) / 2
 *   accumulation), per row R^3 / 3 + 2 R^2 (factor and solves).
 *   Shared memory per warp: (W + R) doubles (17.7 KB at R = 64).
 * Variants: f64, and f32 (--precision f32: the gathered rows and k in
 * f32, each product k_p k_q formed in f32 and summed in f64; the factor,
 * the solve and every sum f64). Ranks 1 to AMP_GPU_COMPLETION_MAX_RANK
 * (the shared memory above).
 *
 * Streamed copies (--memory stream, or from compressed chunks): the same
 * pass per chunk, a warp per row that meets the chunk. A row cut by the
 * chunk's end is not solved there: its partial system goes to a carry
 * buffer, which the next chunk's first row (the same row) adds before
 * solving or carrying on; two carry buffers alternate by chunk parity so
 * that a launch's first row reads one while its last row writes the other.
 * A row without a training nonzero goes to the chunk its start falls in,
 * so that it is kept and counted once. Several GPUs stream each its own
 * part, as one GPU streams the whole.
 *
 * cmp_resid: the residuals after each iteration over the last mode's copy
 * (f64 whatever the precision), a thread a nonzero: m = sum_r lambda_r
 * A_ir k_r, the squared residual into the training or the test sum (the
 * holdout draw again) and x^2 into the training values' sum; a block's
 * sums in fixed order into its partial, the partials folded in order
 * (cmp_fold) into three totals on the device, chunk after chunk. The
 * same bits for any run on one device and chunking; not the CPU's bits
 * (its sums run over rows). cmp_test does the same over --holdout-file's
 * entries. Bytes per nonzero: the word and value, N factor rows of 8 R.
 *
 * Normalization (cmp_col_partial, cmp_col_final, cmp_scale): column sums
 * of squares and max |a| over fixed blocks of CMP_SUM_ROWS rows, summed in
 * block order, over every row (on several GPUs after the exchange);
 * lambda = 2-norm (first iteration) or max(max |a|, 1); A scaled by the
 * reciprocal and its f32 shadow rewritten. */
#include <config.h>

#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <new>

#include "als_kernels.h"
#include "amp_comm.h"
#include "amp_completion.h"
#include "amp_cuda.h"
#include "blco_decode.cuh"
#include "gpu_internal.h"
#include "gpu_team.h"

#define CMP_FULL 0xffffffffu
#define CMP_SUM_ROWS 256
#define CMP_RESID_THREADS 256

/* What a launch of cmp_rows or cmp_resid needs, by value. */
struct cmp_args {
    const uint64_t *words;
    const void *vals;
    const uint64_t *block_start, *block_key;
    uint32_t nblocks;
    uint64_t c0, n;          /* the chunk: nonzeros [c0, c0 + n) of the copy */
    int packed, qsigned;
    unsigned qshift, qbits;
    double p10;
    unsigned N, R, d;
    unsigned shift[AMP_MAX_MODES], width[AMP_MAX_MODES];   /* every mode's field */
    const void *F[AMP_MAX_MODES];   /* every mode's factor, real (d's: not read) */
    const uint64_t *n2o[AMP_MAX_MODES];   /* relabelling, or NULL */
    double holdout;
    uint64_t seed;
    const uint64_t *start;   /* row starts of copy d (rows + 1) */
    uint64_t row_lo, row_hi; /* the rows that meet the chunk */
    double *A;               /* mode d's factor (f64), written */
    const double *lambda;
    double l2;
    const double *carry_in;  /* a row continued from the chunk before, or NULL */
    double *carry_out;
    unsigned long long *unobserved, *singular;
    double *part;            /* cmp_resid: 4 partials a block */
};

template <typename vtype>
__device__ __forceinline__ double cmp_value(const cmp_args &a, uint64_t k, uint64_t w)
{
    if (!a.packed)
        return (double)((const vtype *)a.vals)[k];
    uint64_t raw = a.qshift < 64 ? w >> a.qshift : 0;
    int64_t q = a.qbits >= 64 || !a.qsigned ? (int64_t)raw
                                            : (int64_t)(raw << (64 - a.qbits)) >> (64 - a.qbits);
    if (sizeof(vtype) == 4)
        return (double)((float)q / (float)a.p10);
    return (double)q / a.p10;
}

/* Whether the nonzero (word w, key) is a test entry: every mode's index,
 * relabelled to the file's, drawn as the CPU draws it. */
__device__ __forceinline__ bool cmp_held(const cmp_args &a, uint64_t key, uint64_t w)
{
    if (!(a.holdout > 0))
        return false;
    uint64_t orig[AMP_MAX_MODES];
    for (unsigned m = 0; m < a.N; m++) {
        const uint64_t v = amp_blco_field(key, w, a.shift[m], a.width[m]);
        orig[m] = a.n2o[m] ? a.n2o[m][v] : v;
    }
    return amp_holdout_draw(orig, a.N, a.seed) < a.holdout;
}

/* The fused pass: each warp builds and solves whole rows (header). */
template <typename real, typename vtype>
__global__ void cmp_rows(const cmp_args a)
{
    extern __shared__ double cmp_sh[];
    const unsigned lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const unsigned R = a.R, T = R * (R + 1) / 2, W = T + R + 1;
    double *sys = cmp_sh + (size_t)wib * (W + R);
    double *ks = sys + W;
    const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5;
    const uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    const uint64_t c1 = a.c0 + a.n;
    for (uint64_t r = a.row_lo + warp; r < a.row_hi; r += nwarps) {
        const uint64_t s0 = a.start[r], s1 = a.start[r + 1];
        const uint64_t lo = s0 > a.c0 ? s0 : a.c0, hi = s1 < c1 ? s1 : c1;
        for (unsigned e = lane; e < W; e += 32)
            sys[e] = 0;
        __syncwarp();
        uint32_t blk = a.nblocks > 1 && lo < hi ? block_of(a.block_start, a.nblocks, lo) : 0;
        for (uint64_t k = lo; k < hi; k++) {
            if (a.nblocks > 1)
                while (a.block_start[blk + 1] <= k)
                    blk++;
            const uint64_t key = a.block_key[blk];
            const uint64_t w = a.words[k - a.c0];
            if (cmp_held(a, key, w))
                continue;
            const double x = cmp_value<vtype>(a, k - a.c0, w);
            for (unsigned q = lane; q < R; q += 32) {
                real p = 1;
                for (unsigned m = 0; m < a.N; m++) {
                    if (m == a.d)
                        continue;
                    const uint64_t i = amp_blco_field(key, w, a.shift[m], a.width[m]);
                    p *= ((const real *)a.F[m])[i * R + q];
                }
                ks[q] = (double)p;
            }
            __syncwarp();
            unsigned p = 0, offp = 0;
            for (unsigned e = lane; e < W; e += 32) {
                if (e < T) {
                    while (e >= offp + (R - p)) {
                        offp += R - p;
                        p++;
                    }
                    const unsigned q = p + (e - offp);
                    sys[e] += (double)((real)ks[p] * (real)ks[q]);
                } else if (e < T + R) {
                    sys[e] += x * ks[e - T];
                } else {
                    sys[e] += 1;
                }
            }
            __syncwarp();
        }
        if (s0 < a.c0 && a.carry_in)
            for (unsigned e = lane; e < W; e += 32)
                sys[e] += a.carry_in[e];
        if (s1 > c1) {   /* the row goes on in the next chunk */
            for (unsigned e = lane; e < W; e += 32)
                a.carry_out[e] = sys[e];
            __syncwarp();
            continue;
        }
        __syncwarp();
        double *h = a.A + r * R;
        int how = 0;   /* 0 solved, 1 unobserved, 2 singular */
        if (sys[T + R] == 0) {
            how = 1;
        } else {
            double md = 0;
            for (unsigned j = lane; j < R; j += 32) {
                const unsigned o = j * R - j * (j - 1) / 2;
                md = sys[o] > md ? sys[o] : md;
            }
            for (int off = 16; off > 0; off >>= 1) {
                const double v = __shfl_xor_sync(CMP_FULL, md, off);
                md = v > md ? v : md;
            }
            const double tiny = AMP_COMPLETION_PIVOT * (double)R * DBL_EPSILON * (md + a.l2);
            __syncwarp();
            for (unsigned j = lane; j < R; j += 32)
                sys[j * R - j * (j - 1) / 2] += a.l2;
            __syncwarp();
            /* U^T U = K, U upper, in place. */
            for (unsigned j = 0; j < R && how == 0; j++) {
                const unsigned oj = j * R - j * (j - 1) / 2;
                const double piv = sys[oj];
                if (!(piv > tiny)) {
                    how = 2;
                    break;
                }
                const double dj = sqrt(piv);
                __syncwarp();
                for (unsigned q = j + 1 + lane; q < R; q += 32)
                    sys[oj + q - j] /= dj;
                __syncwarp();
                if (lane == 0)
                    sys[oj] = dj;
                for (unsigned p = j + 1; p < R; p++) {
                    const unsigned op = p * R - p * (p - 1) / 2;
                    const double up = sys[oj + p - j];
                    for (unsigned q = p + lane; q < R; q += 32)
                        sys[op + q - p] -= up * sys[oj + q - j];
                }
                __syncwarp();
            }
            if (how == 0) {
                double *b = sys + T;
                /* U^T y = b, then U h = y, in b. */
                for (unsigned j = 0; j < R; j++) {
                    const unsigned oj = j * R - j * (j - 1) / 2;
                    const double yj = b[j] / sys[oj];
                    __syncwarp();
                    for (unsigned q = j + 1 + lane; q < R; q += 32)
                        b[q] -= sys[oj + q - j] * yj;
                    __syncwarp();
                    if (lane == 0)
                        b[j] = yj;
                    __syncwarp();
                }
                for (unsigned jj = R; jj-- > 0;) {
                    const unsigned oj = jj * R - jj * (jj - 1) / 2;
                    const double hj = b[jj] / sys[oj];
                    __syncwarp();
                    for (unsigned q = lane; q < jj; q += 32)
                        b[q] -= sys[q * R - q * (q - 1) / 2 + jj - q] * hj;
                    __syncwarp();
                    if (lane == 0)
                        b[jj] = hj;
                    __syncwarp();
                }
                for (unsigned q = lane; q < R; q += 32)
                    h[q] = b[q];
            }
        }
        if (how != 0) {
            for (unsigned q = lane; q < R; q += 32)
                h[q] *= a.lambda[q];
            if (lane == 0)
                atomicAdd(how == 1 ? a.unobserved : a.singular, 1ull);
        }
        __syncwarp();
    }
}

/* The residuals over a chunk of the last mode's copy (header). F: f64. */
template <typename vtype>
__global__ void __launch_bounds__(CMP_RESID_THREADS) cmp_resid(const cmp_args a)
{
    __shared__ double s[4][CMP_RESID_THREADS];
    const uint64_t k = a.c0 + blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    double tr = 0, xs = 0, te = 0, nte = 0;
    if (k < a.c0 + a.n) {
        const uint32_t blk = a.nblocks > 1 ? block_of(a.block_start, a.nblocks, k) : 0;
        const uint64_t key = a.block_key[blk], w = a.words[k - a.c0];
        const double x = cmp_value<vtype>(a, k - a.c0, w);
        uint64_t idx[AMP_MAX_MODES];
        for (unsigned m = 0; m < a.N; m++)
            idx[m] = amp_blco_field(key, w, a.shift[m], a.width[m]);
        double mdl = 0;
        for (unsigned r = 0; r < a.R; r++) {
            double p = a.lambda[r];
            for (unsigned m = 0; m < a.N; m++)
                p *= ((const double *)a.F[m])[idx[m] * a.R + r];
            mdl += p;
        }
        const double dd = x - mdl;
        if (cmp_held(a, key, w)) {
            te = dd * dd;
            nte = 1;
        } else {
            tr = dd * dd;
            xs = x * x;
        }
    }
    s[0][threadIdx.x] = tr;
    s[1][threadIdx.x] = xs;
    s[2][threadIdx.x] = te;
    s[3][threadIdx.x] = nte;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h)
            for (int q = 0; q < 4; q++)
                s[q][threadIdx.x] += s[q][threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        for (int q = 0; q < 4; q++)
            a.part[(uint64_t)blockIdx.x * 4 + q] = s[q][0];
}

/* --holdout-file's entries: idx (n x N compact, AMP_TEST_NO_ROW where the
 * tensor has no such slice: the model is 0 there) and values; the test
 * sum's partial per block into part[3 b + 2]. */
__global__ void __launch_bounds__(CMP_RESID_THREADS) cmp_test(
    const uint64_t *idx, const double *val, uint64_t n, unsigned N, unsigned R,
    const double *const *A, const double *lambda, double *part)
{
    __shared__ double s[CMP_RESID_THREADS];
    const uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    double te = 0;
    if (k < n) {
        bool none = false;
        for (unsigned m = 0; m < N; m++)
            none |= idx[k * N + m] == AMP_TEST_NO_ROW;
        double mdl = 0;
        if (!none)
            for (unsigned r = 0; r < R; r++) {
                double p = lambda[r];
                for (unsigned m = 0; m < N; m++)
                    p *= A[m][idx[k * N + m] * R + r];
                mdl += p;
            }
        const double dd = val[k] - mdl;
        te = dd * dd;
    }
    s[threadIdx.x] = te;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h)
            s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        part[(uint64_t)blockIdx.x * 4] = 0;
        part[(uint64_t)blockIdx.x * 4 + 1] = 0;
        part[(uint64_t)blockIdx.x * 4 + 2] = s[0];
        part[(uint64_t)blockIdx.x * 4 + 3] = 0;
    }
}

/* total[q] += the n blocks' partials q (4 a block), in a fixed order;
 * one warp. */
__global__ void cmp_fold(const double *part, unsigned n, double *total)
{
    const unsigned lane = threadIdx.x & 31;
    for (int q = 0; q < 4; q++) {
        double s = 0;
        for (unsigned i = lane; i < n; i += 32)
            s += part[(uint64_t)i * 4 + q];
        for (int off = 16; off > 0; off >>= 1)
            s += __shfl_xor_sync(CMP_FULL, s, off);
        if (lane == 0)
            total[q] += s;
    }
}

/* Row starts of a chunk of a copy: start[r] for every r in (the row
 * before the chunk's k, row(k)], and past the copy's last row up to rows.
 * prev_in: the last row of the chunk before (UINT64_MAX: none);
 * last_out: this chunk's last row. */
__global__ void cmp_starts(const uint64_t *words, const uint64_t *block_start,
                           const uint64_t *block_key, uint32_t nblocks, uint64_t c0, uint64_t n,
                           uint64_t nnz, uint64_t rows, unsigned shift, unsigned width,
                           const unsigned long long *prev_in, unsigned long long *last_out,
                           uint64_t *start)
{
    const uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const uint64_t k = c0 + j;
    const uint64_t key = block_key[nblocks > 1 ? block_of(block_start, nblocks, k) : 0];
    const uint64_t row = amp_blco_field(key, words[j], shift, width);
    uint64_t prev;
    if (j > 0) {
        const uint64_t pk = block_key[nblocks > 1 ? block_of(block_start, nblocks, k - 1) : 0];
        prev = amp_blco_field(pk, words[j - 1], shift, width);
    } else {
        prev = *prev_in;
    }
    const uint64_t from = prev == UINT64_MAX ? 0 : prev + 1;
    for (uint64_t r = from; r <= row && r < rows; r++)
        start[r] = k;
    if (j == n - 1) {
        *last_out = row;
        if (k == nnz - 1)
            for (uint64_t r = row + 1; r <= rows; r++)
                start[r] = nnz;
    }
}

__global__ void cmp_col_partial(const double *A, uint64_t rows, unsigned R, double *part)
{
    const unsigned r = blockIdx.y * blockDim.x + threadIdx.x;
    if (r >= R)
        return;
    const uint64_t lo = (uint64_t)blockIdx.x * CMP_SUM_ROWS;
    const uint64_t hi = lo + CMP_SUM_ROWS < rows ? lo + CMP_SUM_ROWS : rows;
    double sq = 0, mx = 0;
    for (uint64_t i = lo; i < hi; i++) {
        const double x = A[i * R + r];
        sq += x * x;
        mx = fabs(x) > mx ? fabs(x) : mx;
    }
    part[((uint64_t)blockIdx.x * R + r) * 2] = sq;
    part[((uint64_t)blockIdx.x * R + r) * 2 + 1] = mx;
}

__global__ void cmp_col_final(const double *part, uint64_t nb, unsigned R, int first,
                              double *lambda)
{
    const unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R)
        return;
    double sq = 0, mx = 0;
    for (uint64_t b = 0; b < nb; b++) {
        sq += part[(b * R + r) * 2];
        const double m = part[(b * R + r) * 2 + 1];
        mx = m > mx ? m : mx;
    }
    double l = first ? sqrt(sq) : (mx > 1 ? mx : 1);
    lambda[r] = l == 0 ? 1 : l;
}

__global__ void cmp_scale(double *A, float *A32, uint64_t n, unsigned R, const double *lambda)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const double v = A[i] * (1 / lambda[i % R]);
        A[i] = v;
        if (A32)
            A32[i] = (float)v;
    }
}

__global__ void cmp_to_f32(const double *A, float *A32, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        A32[i] = (float)A[i];
}

/* This GPU's slot: the 4 totals, then each mode's kept-row counts (exact
 * as doubles below 2^53). */
__global__ void cmp_slot(const double *total, const unsigned long long *counts, unsigned nc,
                         double *slot)
{
    for (unsigned q = threadIdx.x; q < 4 + nc; q += blockDim.x)
        slot[q] = q < 4 ? total[q] : (double)counts[q - 4];
}

/* ---- the run ---------------------------------------------------------------- */

typedef void (*cmp_fn)(const cmp_args);

/* What the GPUs' threads of one run share (apr.cu's apr_run). */
struct cmp_run {
    gpu_team team;
    const amp_gpu_tensor *const *g;
    const amp_tensor *t;
    const amp_partition *p;
    const amp_cpd_opts *o;
    amp_gpu_als_opts go;
    amp_mode_rule rule[AMP_MAX_MODES];
    amp_cpd *c;
    amp_gpu_run_stats *stats;
};

struct gpu_cmp {
    const amp_gpu_tensor *g;
    const amp_tensor *t;
    unsigned N, R;
    int f32;
    cudaStream_t s;
    double *A[AMP_MAX_MODES];
    float *A32[AMP_MAX_MODES];
    uint64_t *start[AMP_MAX_MODES];
    uint64_t *host_start[AMP_MAX_MODES];   /* streamed: the chunks' rows */
    uint64_t *n2o[AMP_MAX_MODES];
    double *lambda, *colpart, *carry[2], *part, *total;
    double **Aptr;                    /* device: A[0 .. N) for cmp_test */
    uint64_t *tidx;                   /* the run's GPU 0 only: the test file's entries */
    double *tval;
    /* Each mode's unobserved and singular rows (2 N), then 2 prev/last
     * rows for cmp_starts. */
    unsigned long long *counts;
    /* One slot of CMP_SLOT(N) doubles a GPU of the run (cmp_slot), this
     * GPU's filled in, the others zero until summed across GPUs; and
     * their page-locked copy. */
    double *slots;
    double *host;
    size_t part_blocks;
    cmp_fn rows_fn, resid_fn;
    size_t shmem;
    unsigned wpb;                     /* warps per block of cmp_rows */
    int rows_per_sm;
    cudaEvent_t ev[2 * AMP_NPHASES];
    double seconds[AMP_NPHASES];
    amp_gpu_run_stats *stats;
    /* The run, this GPU's number in it and among this process's GPUs,
     * its communicator (NULL on one GPU), its rows (gpu_team.h). */
    cmp_run *run;
    amp_comm *comm;
    unsigned gpu, local, ngpus;
    gpu_rows rows;
};

/* A GPU's slot: the training and test sums, the values' squares, the
 * draw's test entries, and 2 counts a mode. */
#define CMP_SLOT(N) (4 + 2 * (size_t)(N))

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void gpu_cmp_free(gpu_cmp *w)
{
    for (unsigned m = 0; m < w->N; m++) {
        cudaFree(w->A[m]);
        cudaFree(w->A32[m]);
        cudaFree(w->start[m]);
        cudaFree(w->n2o[m]);
        free(w->host_start[m]);
    }
    void *p[] = {w->lambda, w->colpart, w->carry[0], w->carry[1], w->part, w->total,
                 w->Aptr, w->tidx, w->tval, w->counts, w->slots};
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++)
        cudaFree(p[k]);
    if (w->host)
        cudaFreeHost(w->host);
    for (unsigned k = 0; k < 2 * AMP_NPHASES; k++)
        destroy_event(w->ev[k]);
    destroy_stream(w->s);
}

/* Time one step (phase ph) of work queued on w->s, waiting for it (polled
 * on several GPUs: team_wait_event); *sec (if not NULL) gets its time. */
static amp_status tm_begin(gpu_cmp *w, int ph, amp_error *err)
{
    CUDA_TRY(cudaEventRecord(w->ev[2 * ph], w->s), err);
    return AMP_OK;
}

static amp_status tm_end(gpu_cmp *w, int ph, double *sec, amp_error *err)
{
    float ms = 0;
    CUDA_TRY(cudaEventRecord(w->ev[2 * ph + 1], w->s), err);
    AMP_CHECK(team_wait_event(&w->run->team, w->comm, w->gpu, w->ev[2 * ph + 1], err));
    CUDA_TRY(cudaEventElapsedTime(&ms, w->ev[2 * ph], w->ev[2 * ph + 1]), err);
    w->seconds[ph] += ms / 1e3;
    if (sec)
        *sec = ms / 1e3;
    return AMP_OK;
}

/* What every chunk of a pass over copy d shares. */
static void base_args(gpu_cmp *w, unsigned d, int f64_factors, const amp_cpd_opts *o,
                      cmp_args *a)
{
    const gpu_copy *c = &w->g->copies[d];
    memset(a, 0, sizeof *a);
    a->block_start = c->block_start;
    a->block_key = c->block_key;
    a->nblocks = c->nblocks;
    if (c->packed) {
        static const double p10[10] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
        a->packed = 1;
        a->qshift = c->stream.qshift;
        a->qbits = c->stream.qbits;
        a->qsigned = c->stream.qsigned;
        a->p10 = p10[c->stream.decimals];
    }
    a->N = w->N;
    a->R = w->R;
    a->d = d;
    for (unsigned m = 0; m < w->N; m++) {
        a->shift[m] = c->shift[m];
        a->width[m] = c->width[m];
        a->F[m] = w->f32 && !f64_factors ? (const void *)w->A32[m] : (const void *)w->A[m];
        a->n2o[m] = w->n2o[m];
    }
    a->holdout = o->completion.holdout;
    a->seed = o->seed;
    a->start = w->start[d];
    a->A = w->A[d];
    a->lambda = w->lambda;
    a->unobserved = w->counts + 2 * d;
    a->singular = w->counts + 2 * d + 1;
    a->part = w->part;
}

/* A pass of one kind over copy d, chunk by chunk as the tensor is held. */
struct cmp_pass {
    gpu_cmp *w;
    cmp_args a;
    int kind;         /* 0 rows, 1 residuals, 2 row starts */
    unsigned chunk;   /* chunks launched so far */
};

static amp_status launch_chunk(cmp_pass *p, const uint64_t *words, const void *vals,
                               uint64_t c0, uint64_t n, amp_error *err)
{
    gpu_cmp *w = p->w;
    const amp_gpu_tensor *g = w->g;
    cmp_args a = p->a;
    a.words = words;
    a.vals = vals;
    a.c0 = c0;
    a.n = n;
    if (n == 0)
        return AMP_OK;
    const unsigned d = a.d;
    const gpu_copy *c = &g->copies[d];
    if (p->kind == 2) {
        unsigned long long *prev = w->counts + 2 * w->N + (p->chunk & 1);
        unsigned long long *last = w->counts + 2 * w->N + ((p->chunk + 1) & 1);
        cmp_starts<<<(unsigned)((n + 255) / 256), 256, 0, w->s>>>(
            words, c->block_start, c->block_key, c->nblocks, c0, n, c->nnz, g->rows[d],
            c->shift[d], c->width[d], prev, last, w->start[d]);
        CUDA_TRY(cudaGetLastError(), err);
    } else if (p->kind == 1) {
        const unsigned blocks = (unsigned)((n + CMP_RESID_THREADS - 1) / CMP_RESID_THREADS);
        w->resid_fn<<<blocks, CMP_RESID_THREADS, 0, w->s>>>(a);
        CUDA_TRY(cudaGetLastError(), err);
        cmp_fold<<<1, 32, 0, w->s>>>(w->part, blocks, w->total);
        CUDA_TRY(cudaGetLastError(), err);
    } else {
        /* This GPU's rows (every row on one GPU: the others' are not in
         * its part, and their starts say they are empty) that meet
         * [c0, c0 + n): from the row starts. A row without a nonzero
         * goes to the chunk its start falls in (the last one where that
         * is the copy's end), so that it is kept and counted once. */
        const uint64_t own_lo = w->rows.own_begin[d];
        const uint64_t own_hi = own_lo + w->rows.own_rows[d];
        a.row_lo = own_lo;
        a.row_hi = own_hi;
        if (w->host_start[d] != NULL) {
            const uint64_t *hs = w->host_start[d], rows = g->rows[d], c1 = c0 + n;
            uint64_t lo = 0, hi = rows;
            while (lo < hi) {   /* the first row cut by c0 or starting at or after it */
                const uint64_t mid = lo + (hi - lo) / 2;
                if (hs[mid] >= c0 || hs[mid + 1] > c0)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            const uint64_t first = lo;
            lo = first, hi = rows;
            while (c1 < c->nnz && lo < hi) {   /* the first row starting at or after c1 */
                const uint64_t mid = lo + (hi - lo) / 2;
                if (hs[mid] >= c1)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            const uint64_t end = c1 < c->nnz ? lo : rows;
            a.row_lo = first > own_lo ? first : own_lo;
            a.row_hi = end < own_hi ? end : own_hi;
            a.row_hi = a.row_hi > a.row_lo ? a.row_hi : a.row_lo;
            a.carry_in = p->chunk > 0 ? w->carry[p->chunk & 1] : NULL;
            a.carry_out = w->carry[(p->chunk + 1) & 1];
        }
        const uint64_t nrows = a.row_hi - a.row_lo;
        uint64_t blocks = (nrows + w->wpb - 1) / w->wpb;
        const uint64_t most = (uint64_t)g->sm_count * (w->rows_per_sm > 0 ? w->rows_per_sm : 1);
        blocks = blocks > most ? most : blocks;
        if (blocks > 0) {
            w->rows_fn<<<(unsigned)blocks, 32 * w->wpb, w->shmem, w->s>>>(a);
            CUDA_TRY(cudaGetLastError(), err);
        }
    }
    p->chunk++;
    return AMP_OK;
}

static amp_status cmp_zchunk(void *ctx, int b, uint64_t at, uint64_t count, amp_error *err)
{
    cmp_pass *p = (cmp_pass *)ctx;
    return launch_chunk(p, p->w->g->ring_words[b], p->w->g->ring_vals[b], at, count, err);
}

/* One pass over the whole of copy d: one launch when resident; when
 * streamed, chunk i through ring buffer i mod AMP_GPU_RING, as apr.cu's
 * over_copy takes them. */
static amp_status over_copy(cmp_pass *p, amp_error *err)
{
    gpu_cmp *w = p->w;
    const amp_gpu_tensor *g = w->g;
    const unsigned d = p->a.d;
    const gpu_copy *c = &g->copies[d];
    p->chunk = 0;
    if (c->nnz == 0)
        return AMP_OK;
    if (g->zstream)
        return gpu_zstream_run(g, d, cmp_zchunk, p, w->s, err);
    if (!g->streamed)
        return launch_chunk(p, c->words, c->vals, 0, c->nnz, err);
    amp_gpu_tensor *gw = const_cast<amp_gpu_tensor *>(g);
    const uint64_t queued = c->nnz == g->pf_end && g->pf_copy == (int)d ? g->pf_count : 0;
    gw->pf_count = 0;
    for (uint64_t c0 = 0, i = 0; c0 < c->nnz; c0 += g->chunk_nnz, i++) {
        const int b = (int)(i % AMP_GPU_RING);
        const uint64_t n = c->nnz - c0 < g->chunk_nnz ? c->nnz - c0 : g->chunk_nnz;
        if (i >= queued)
            AMP_CHECK(gpu_queue_chunk(g, c, b, c0, n, err));
        CUDA_TRY(cudaStreamWaitEvent(w->s, g->copied[b], 0), err);
        AMP_CHECK(launch_chunk(p, g->ring_words[b], g->ring_vals[b], c0, n, err));
        CUDA_TRY(cudaEventRecord(g->consumed[b], w->s), err);
    }
    return AMP_OK;
}

template <typename real>
static cmp_fn pick_rows(int vals_f32)
{
    return vals_f32 ? cmp_rows<real, float> : cmp_rows<real, double>;
}

/* What tab (n values) holds, to the device at *dst (allocated), from
 * pageable memory: a plain copy, so that tab may go when it returns (its
 * DMA may still be in flight: the caller synchronizes the device). */
static amp_status upload_table(uint64_t **dst, const uint64_t *tab, uint64_t n, amp_error *err)
{
    CUDA_TRY(cudaMalloc(dst, n * sizeof(uint64_t) + 8), err);
    CUDA_TRY(cudaMemcpy(*dst, tab, n * sizeof(uint64_t), cudaMemcpyHostToDevice), err);
    return AMP_OK;
}

/* Mode m's relabelling for the holdout draw, from the copies' rows to the
 * file's: t's (new_to_orig), after the run's order where the partition
 * moved rows (run_row: t's row to the run's). */
static amp_status upload_n2o(gpu_cmp *w, const amp_partition *p, unsigned m, amp_error *err)
{
    const amp_tensor *t = w->t;
    const uint64_t *run_row = p ? p->modes[m].run_row : NULL;
    if (run_row == NULL)
        return t->new_to_orig[m] ? upload_table(&w->n2o[m], t->new_to_orig[m], t->rows[m], err)
                                 : AMP_OK;
    uint64_t *tab = (uint64_t *)malloc((t->rows[m] ? t->rows[m] : 1) * sizeof(uint64_t));
    if (tab == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for mode %u's relabelling", m + 1);
    for (uint64_t x = 0; x < t->rows[m]; x++)
        tab[run_row[x]] = t->new_to_orig[m] ? t->new_to_orig[m][x] : x;
    const amp_status rc = upload_table(&w->n2o[m], tab, t->rows[m], err);
    free(tab);
    return rc;
}

/* --holdout-file's entries to the device, their rows in the run's order. */
static amp_status upload_test(gpu_cmp *w, const amp_test_set *ts, const amp_partition *p,
                              amp_error *err)
{
    const unsigned N = w->N;
    const size_t n = ts->n * N;
    int moved = 0;
    for (unsigned m = 0; m < N; m++)
        moved |= p != NULL && p->modes[m].run_row != NULL;
    CUDA_TRY(cudaMalloc(&w->tval, ts->n * sizeof(double) + 8), err);
    CUDA_TRY(cudaMemcpy(w->tval, ts->val, ts->n * sizeof(double), cudaMemcpyHostToDevice), err);
    if (!moved)
        return upload_table(&w->tidx, ts->idx, n, err);
    uint64_t *idx = (uint64_t *)malloc((n ? n : 1) * sizeof(uint64_t));
    if (idx == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the test entries");
    for (size_t k = 0; k < n; k++) {
        const uint64_t *run_row = p->modes[k % N].run_row;
        idx[k] = ts->idx[k] == AMP_TEST_NO_ROW || run_row == NULL ? ts->idx[k]
                                                                  : run_row[ts->idx[k]];
    }
    const amp_status rc = upload_table(&w->tidx, idx, n, err);
    free(idx);
    return rc;
}

static amp_status gpu_cmp_new(const amp_gpu_tensor *g, const amp_tensor *t,
                              const amp_cpd_opts *o, const amp_partition *p, gpu_cmp *w,
                              amp_error *err)
{
    const unsigned N = g->nmodes, R = o->rank;
    uint64_t max_rows = 1;
    w->g = g;
    w->t = t;
    w->N = N;
    w->R = R;
    team_plan_rows(g, p, w->gpu, w->ngpus, R, &w->rows);
    CUDA_TRY(cudaSetDevice(g->device), err);
    CUDA_TRY(cudaStreamCreateWithFlags(&w->s, cudaStreamNonBlocking), err);
    for (unsigned k = 0; k < 2 * AMP_NPHASES; k++)
        CUDA_TRY(cudaEventCreate(&w->ev[k]), err);
    const unsigned Wd = R * (R + 1) / 2 + R + 1;
    for (unsigned m = 0; m < N; m++) {
        const size_t n = (size_t)g->rows[m] * R;
        max_rows = g->rows[m] > max_rows ? g->rows[m] : max_rows;
        CUDA_TRY(cudaMalloc(&w->A[m], n * sizeof(double) + 8), err);
        if (w->f32)
            CUDA_TRY(cudaMalloc(&w->A32[m], n * sizeof(float) + 8), err);
        CUDA_TRY(cudaMalloc(&w->start[m], ((size_t)g->rows[m] + 1) * sizeof(uint64_t)), err);
        if (o->completion.holdout > 0)
            AMP_CHECK(upload_n2o(w, p, m, err));
    }
    const uint64_t nb = (max_rows + CMP_SUM_ROWS - 1) / CMP_SUM_ROWS;
    CUDA_TRY(cudaMalloc(&w->lambda, R * sizeof(double)), err);
    CUDA_TRY(cudaMalloc(&w->colpart, nb * R * 2 * sizeof(double)), err);
    CUDA_TRY(cudaMalloc(&w->carry[0], Wd * sizeof(double)), err);
    CUDA_TRY(cudaMalloc(&w->carry[1], Wd * sizeof(double)), err);
    CUDA_TRY(cudaMalloc(&w->total, 4 * sizeof(double)), err);
    CUDA_TRY(cudaMalloc(&w->counts, (2 * (size_t)N + 2) * sizeof(unsigned long long)), err);
    CUDA_TRY(cudaMalloc(&w->slots, CMP_SLOT(N) * w->ngpus * sizeof(double)), err);
    CUDA_TRY(cudaMallocHost(&w->host, CMP_SLOT(N) * w->ngpus * sizeof(double)), err);
    /* The residual pass's partials: its largest launch, or the test set's. */
    uint64_t most = 1;
    for (unsigned m = 0; m < N; m++) {
        const uint64_t n = g->streamed || g->zstream ? g->chunk_nnz : g->copies[m].nnz;
        most = n > most ? n : most;
    }
    /* The test file's entries: on the run's GPU 0 alone (every GPU holds
     * every row of the factors by then), which thus sums them as one GPU
     * does; the others' test sums stay 0. */
    const amp_test_set *ts = w->gpu == 0 ? o->completion.test : NULL;
    if (ts && ts->n > most)
        most = ts->n;
    w->part_blocks = (most + CMP_RESID_THREADS - 1) / CMP_RESID_THREADS + 1;
    CUDA_TRY(cudaMalloc(&w->part, w->part_blocks * 4 * sizeof(double)), err);
    if (ts) {
        AMP_CHECK(upload_test(w, ts, p, err));
        CUDA_TRY(cudaMalloc(&w->Aptr, N * sizeof(double *)), err);
        CUDA_TRY(cudaMemcpy(w->Aptr, w->A, N * sizeof(double *), cudaMemcpyHostToDevice), err);
        /* Copies from pageable memory return once staged, before their
         * DMA lands, and w->s (non-blocking) does not wait for the legacy
         * stream that carries them. */
        CUDA_TRY(cudaDeviceSynchronize(), err);
    }
    w->rows_fn = w->f32 ? pick_rows<float>(g->vals_f32) : pick_rows<double>(g->vals_f32);
    w->resid_fn = g->vals_f32 ? cmp_resid<float> : cmp_resid<double>;
    /* Warps a block: as many as 40 KB of shared memory holds, 1 to 8. */
    const size_t per_warp = ((size_t)Wd + R) * sizeof(double);
    w->wpb = (unsigned)(40960 / per_warp);
    w->wpb = w->wpb < 1 ? 1 : w->wpb > 8 ? 8 : w->wpb;
    w->shmem = per_warp * w->wpb;
    if (w->shmem > 48 * 1024)
        CUDA_TRY(cudaFuncSetAttribute(w->rows_fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)w->shmem), err);
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&w->rows_per_sm, w->rows_fn,
                                                           32 * (int)w->wpb, w->shmem), err);
    /* The row starts of every copy, from the copy itself (one pass). */
    for (unsigned d = 0; d < N; d++) {
        cmp_pass p;
        memset(&p, 0, sizeof p);
        p.w = w;
        base_args(w, d, 0, o, &p.a);
        p.kind = 2;
        const unsigned long long none = ~0ull;
        CUDA_TRY(cudaMemcpyAsync(w->counts + 2 * N, &none, sizeof none, cudaMemcpyHostToDevice,
                                 w->s), err);
        CUDA_TRY(cudaStreamSynchronize(w->s), err);
        AMP_CHECK(over_copy(&p, err));
        if (g->streamed || g->zstream) {
            const size_t bytes = ((size_t)g->rows[d] + 1) * sizeof(uint64_t);
            w->host_start[d] = (uint64_t *)malloc(bytes);
            if (w->host_start[d] == NULL)
                return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for mode %u's row starts",
                                d + 1);
            CUDA_TRY(cudaMemcpyAsync(w->host_start[d], w->start[d], bytes,
                                     cudaMemcpyDeviceToHost, w->s), err);
        }
        CUDA_TRY(cudaStreamSynchronize(w->s), err);
    }
    return AMP_OK;
}

/* Mode m's columns normalized into lambda (first: 2-norms). */
static amp_status normalize(gpu_cmp *w, unsigned m, int first, amp_error *err)
{
    const uint64_t rows = w->g->rows[m], n = rows * w->R;
    const uint64_t nb = (rows + CMP_SUM_ROWS - 1) / CMP_SUM_ROWS;
    const unsigned R = w->R, bx = R >= 256 ? 256 : (R + 31) / 32 * 32;
    if (nb > 0) {
        cmp_col_partial<<<dim3((unsigned)nb, (R + bx - 1) / bx), bx, 0, w->s>>>(w->A[m], rows, R,
                                                                                w->colpart);
        CUDA_TRY(cudaGetLastError(), err);
    }
    cmp_col_final<<<(R + 255) / 256, 256, 0, w->s>>>(w->colpart, nb, R, first, w->lambda);
    CUDA_TRY(cudaGetLastError(), err);
    if (n > 0) {
        uint64_t blocks = (n + 255) / 256, most = (uint64_t)w->g->sm_count * 16;
        blocks = blocks > most ? most : blocks;
        cmp_scale<<<(unsigned)blocks, 256, 0, w->s>>>(w->A[m], w->A32[m], n, R, w->lambda);
        CUDA_TRY(cudaGetLastError(), err);
    }
    return AMP_OK;
}

/* Several GPUs: this GPU's rows of mode d (f64; the f32 shadows follow
 * from the normalization) to every other GPU, and theirs in, as CP-ALS
 * sends a mode's rows (amp_comm_allgatherv: NCCL, or copies). */
static amp_status exchange(gpu_cmp *w, unsigned d, amp_error *err)
{
    if (w->ngpus == 1)
        return AMP_OK;
    double sec = 0;
    AMP_CHECK(tm_begin(w, AMP_PHASE_COMM, err));
    AMP_CHECK(amp_comm_allgatherv(w->comm, w->A[d], 0, w->rows.gather_offset[d],
                                  w->rows.gather_count[d], w->s, err));
    AMP_CHECK(tm_end(w, AMP_PHASE_COMM, &sec, err));
    if (w->stats) {
        w->stats->comm[w->local][d] += sec;
        w->stats->exchange[w->local][d] += sec;
    }
    return AMP_OK;
}

/* Every GPU's slot (cmp_slot) to the host: on several GPUs each GPU's in
 * its own place of a vector zero elsewhere, summed across GPUs (each
 * place gets one nonzero term: exact, whatever order the collective adds
 * in), so every GPU holds every slot; the caller adds them in GPU order. */
static amp_status share_slots(gpu_cmp *w, amp_error *err)
{
    const size_t S = CMP_SLOT(w->N);
    if (w->ngpus > 1) {
        AMP_CHECK(tm_begin(w, AMP_PHASE_COMM, err));
        CUDA_TRY(cudaMemsetAsync(w->slots, 0, S * w->ngpus * sizeof(double), w->s), err);
    }
    cmp_slot<<<1, 32, 0, w->s>>>(w->total, w->counts, 2 * w->N, w->slots + S * w->gpu);
    CUDA_TRY(cudaGetLastError(), err);
    if (w->ngpus > 1)
        AMP_CHECK(amp_comm_allreduce(w->comm, w->slots, S * w->ngpus, 0, w->s, err));
    CUDA_TRY(cudaMemcpyAsync(w->host, w->slots, S * w->ngpus * sizeof(double),
                             cudaMemcpyDeviceToHost, w->s), err);
    if (w->ngpus > 1)
        return tm_end(w, AMP_PHASE_COMM, NULL, err);
    return team_wait_stream(&w->run->team, w->comm, w->gpu, w->s, err);
}

/* The iterations, as amp_cpu_completion's; on several GPUs every GPU
 * decides alike (the fit is the run's, the same bits on each), and this
 * process's first GPU writes c and calls o->on_iter. */
static amp_status iterate(gpu_cmp *w, const amp_cpd_opts *o, const amp_mode_rule *rule,
                          amp_cpd *c, double t_start, amp_error *err)
{
    const unsigned N = w->N, R = w->R;
    const size_t S = CMP_SLOT(N);
    const amp_test_set *ts = o->completion.test;
    const amp_gpu_als_opts *go = &w->run->go;
    const int lead = w->local == 0;
    double old_fit = 0;
    if (lead) {
        c->iters = 0;
        c->converged = 0;
        c->stopped = 0;
    }
    for (unsigned it = 0; it < o->max_iters; it++) {
        const double t_iter = it == 0 ? t_start : wall_now();
        CUDA_TRY(cudaMemsetAsync(w->counts, 0, 2 * N * sizeof(unsigned long long), w->s), err);
        for (unsigned d = 0; d < N; d++) {
            if (go->fail_gpu == w->gpu + 1 && go->fail_iter == it + 1 && d == 1)
                return AMP_FAIL(err, AMP_ERR_CUDA, "a device failure injected at iteration %u "
                                "(amp_gpu_als_opts.fail_gpu)", it + 1);
            cmp_pass p;
            memset(&p, 0, sizeof p);
            p.w = w;
            base_args(w, d, 0, o, &p.a);
            p.a.l2 = rule[d].l2;
            p.kind = 0;
            double sec = 0;
            AMP_CHECK(tm_begin(w, AMP_PHASE_MTTKRP, err));
            AMP_CHECK(over_copy(&p, err));
            AMP_CHECK(tm_end(w, AMP_PHASE_MTTKRP, &sec, err));
            if (w->stats) {
                w->stats->mttkrp[w->local][d] += sec;
                w->stats->busy[w->local][d] += sec;
            }
            AMP_CHECK(exchange(w, d, err));
            AMP_CHECK(tm_begin(w, AMP_PHASE_NORMALIZE, err));
            AMP_CHECK(normalize(w, d, it == 0, err));
            AMP_CHECK(tm_end(w, AMP_PHASE_NORMALIZE, NULL, err));
        }
        /* The residuals over this GPU's part of the last copy; the test
         * file's entries (the run's GPU 0). */
        AMP_CHECK(tm_begin(w, AMP_PHASE_FIT, err));
        CUDA_TRY(cudaMemsetAsync(w->total, 0, 4 * sizeof(double), w->s), err);
        cmp_pass p;
        memset(&p, 0, sizeof p);
        p.w = w;
        base_args(w, N - 1, 1, o, &p.a);
        p.kind = 1;
        AMP_CHECK(over_copy(&p, err));
        if (w->tidx != NULL && ts->n > 0) {
            const unsigned blocks = (unsigned)((ts->n + CMP_RESID_THREADS - 1) /
                                               CMP_RESID_THREADS);
            cmp_test<<<blocks, CMP_RESID_THREADS, 0, w->s>>>(w->tidx, w->tval, ts->n, N, R,
                                                              w->Aptr, w->lambda, w->part);
            CUDA_TRY(cudaGetLastError(), err);
            CUDA_TRY(cudaMemsetAsync(w->total + 2, 0, sizeof(double), w->s), err);
            cmp_fold<<<1, 32, 0, w->s>>>(w->part, blocks, w->total);
            CUDA_TRY(cudaGetLastError(), err);
        }
        AMP_CHECK(tm_end(w, AMP_PHASE_FIT, NULL, err));
        AMP_CHECK(share_slots(w, err));
        /* The GPUs' slots added in the run's GPU order, 0 first: the same
         * bits on every GPU and every run of the same GPUs (one GPU's
         * own). */
        double tot[CMP_SLOT(AMP_MAX_MODES)];
        for (size_t q = 0; q < S; q++) {
            tot[q] = w->host[q];
            for (unsigned k = 1; k < w->ngpus; k++)
                tot[q] += w->host[k * S + q];
        }
        const double sse = tot[0], sq = tot[1], sse_test = tot[2];
        /* The draw's test entries, counted by the pass (exact in a double
         * below 2^53 nonzeros). */
        const uint64_t n_held = (uint64_t)tot[3];
        const double fit = sq > 0 ? 1 - sqrt(sse) / sqrt(sq) : 0;
        const double delta = fabs(fit - old_fit);
        if (lead) {
            for (unsigned d = 0; d < N; d++) {
                c->completion.unobserved[d] = (uint64_t)tot[4 + 2 * d];
                c->completion.singular[d] = (uint64_t)tot[5 + 2 * d];
            }
            c->completion.n_test = ts ? ts->n : n_held;
            c->completion.n_train = w->t->nnz - n_held;
            const uint64_t ntr = c->completion.n_train, nte = c->completion.n_test;
            c->completion.rmse_train = ntr > 0 ? sqrt(sse / (double)ntr) : NAN;
            c->completion.rmse_test = nte > 0 ? sqrt(sse_test / (double)nte) : NAN;
            c->fit = fit;
            c->iters = it + 1;
            memcpy(c->seconds, w->seconds, sizeof c->seconds);
            if (o->on_iter)
                o->on_iter(o->ctx, it + 1, fit, delta, wall_now() - t_iter);
        }
        if (o->stop) {
            int stop_now = 0;
            AMP_CHECK(team_agree_stop(&w->run->team, w->local, w->gpu, o->stop, it + 1,
                                      &stop_now, err));
            if (stop_now) {
                if (lead)
                    c->stopped = 1;
                break;
            }
        }
        if (it > 0 && delta < o->tol) {
            if (lead)
                c->converged = 1;
            break;
        }
        old_fit = fit;
    }
    return AMP_OK;
}

/* One GPU's run from c's factors (every GPU takes all of them); the
 * process's first GPU writes the outcome into c. */
static amp_status run_cmp(gpu_cmp *w, const amp_cpd_opts *o, const amp_mode_rule *rule,
                          amp_cpd *c, amp_error *err)
{
    const unsigned N = w->N, R = w->R;
    const double t_start = wall_now();
    CUDA_TRY(cudaMemcpyAsync(w->lambda, c->lambda, R * sizeof(double), cudaMemcpyHostToDevice,
                             w->s), err);
    for (unsigned m = 0; m < N; m++) {
        const uint64_t n = (uint64_t)w->g->rows[m] * R;
        CUDA_TRY(cudaMemcpyAsync(w->A[m], c->A[m], n * sizeof(double), cudaMemcpyHostToDevice,
                                 w->s), err);
        if (w->f32 && n > 0) {
            cmp_to_f32<<<64, 256, 0, w->s>>>(w->A[m], w->A32[m], n);
            CUDA_TRY(cudaGetLastError(), err);
        }
    }
    AMP_CHECK(iterate(w, o, rule, c, t_start, err));
    if (w->local == 0) {
        /* Every GPU holds every row of every factor by now. */
        for (unsigned m = 0; m < N; m++)
            CUDA_TRY(cudaMemcpyAsync(c->A[m], w->A[m], (size_t)w->g->rows[m] * R * sizeof(double),
                                     cudaMemcpyDeviceToHost, w->s), err);
        CUDA_TRY(cudaMemcpyAsync(c->lambda, w->lambda, R * sizeof(double),
                                 cudaMemcpyDeviceToHost, w->s), err);
    }
    AMP_CHECK(team_wait_stream(&w->run->team, w->comm, w->gpu, w->s, err));
    if (w->local == 0)
        memcpy(c->seconds, w->seconds, sizeof c->seconds);
    return AMP_OK;
}

/* The whole run of this process's GPU local (apr.cu's apr_one_gpu). */
static amp_status cmp_one_gpu(cmp_run *run, unsigned local, amp_error *err)
{
    return team_one_gpu<gpu_cmp>(&run->team, local, run, run->o->precision == AMP_PRECISION_F32,
                                 run->stats, [&](gpu_cmp *w) {
        amp_status rc = gpu_cmp_new(run->g[local], run->t, run->o, run->p, w, err);
        return rc == AMP_OK ? run_cmp(w, run->o, run->rule, run->c, err) : rc;
    }, gpu_cmp_free, err);
}

extern "C" amp_status amp_gpu_cpd_completion_multi(const amp_gpu_tensor *const *g,
                                                   amp_comm *const *comms,
                                                   const amp_partition *p,
                                                   const amp_group *group, const amp_tensor *t,
                                                   const amp_cpd_opts *o,
                                                   const amp_gpu_als_opts *go, amp_cpd *c,
                                                   amp_gpu_run_stats *stats, amp_error *err)
{
    const unsigned ngpus = p ? p->ngpus : 1;
    if (c->rank != o->rank)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have rank %u, not %u", c->rank, o->rank);
    AMP_CHECK(amp_rank_check(o->rank, AMP_GPU_COMPLETION_MAX_RANK, "completion on the GPU",
                             err));
    /* The training count and the holdout's relabelling come from t, the
     * whole tensor, which only one process holds. */
    if (group && group->size > 1)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--observed nonzeros runs in one process for "
                        "now, not %u", group->size);
    if (ngpus > 1 && comms == NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%u GPUs need their communicators", ngpus);
    if (ngpus > 1 && p->kind != AMP_PARTITION_OWNER)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--observed nonzeros on several GPUs takes "
                        "the file's shards (--partition shards), not equal-nnz: a row's system "
                        "needs every nonzero of the row on one GPU");
    if (t->nmodes != g[0]->nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the host's tensor has %u modes, the GPU's %u",
                        t->nmodes, g[0]->nmodes);
    for (unsigned i = 0; i < ngpus; i++) {
        if (c->nmodes != g[i]->nmodes)
            return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have %u modes, the tensor %u",
                            c->nmodes, g[i]->nmodes);
        if (g[i]->remap)
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--observed nonzeros does not run on two "
                            "copies remapped (--memory remap) for now: --memory resident or "
                            "stream");
        /* The row starts need each row's nonzeros together. */
        for (unsigned m = 0; m < g[i]->nmodes && ngpus > 1; m++)
            if (g[i]->copies[m].early_nnz != g[i]->copies[m].nnz)
                return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--observed nonzeros does not take "
                                "copies in two groups (--overlap)");
    }
    cmp_run *run = new (std::nothrow) cmp_run;
    if (run == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    amp_status rc = amp_rules_resolve(o, g[0]->nmodes, run->rule, err);
    if (rc != AMP_OK) {
        delete run;
        return rc;
    }
    run->team.ngpus = ngpus;
    run->team.nlocal = ngpus;
    run->team.first = 0;
    run->team.comms = comms;
    run->g = g;
    run->t = t;
    run->p = p;
    run->o = o;
    run->go = go ? *go : amp_gpu_als_opts{};
    run->c = c;
    run->stats = stats;
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->ngpus = ngpus;
        stats->nmodes = g[0]->nmodes;
    }
    memset(c->seconds, 0, sizeof c->seconds);
    memset(&c->completion, 0, sizeof c->completion);
    rc = team_run(&run->team, g, [run](unsigned local) {
        run->team.rc[local] = cmp_one_gpu(run, local, &run->team.err[local]);
    }, c, stats, err);
    delete run;
    return rc;
}

extern "C" amp_status amp_gpu_cpd_completion(const amp_gpu_tensor *g, const amp_tensor *t,
                                             const amp_cpd_opts *o, amp_cpd *c,
                                             amp_gpu_run_stats *stats, amp_error *err)
{
    return amp_gpu_cpd_completion_multi(&g, NULL, NULL, NULL, t, o, NULL, c, stats, err);
}
