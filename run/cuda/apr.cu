/* CP-APR (Poisson CP by multiplicative updates, Chi and Kolda 2012,
 * Algorithm 3) on one GPU or several: run/cpu/apr.c's algorithm, the
 * reference, step for step and in the same order (the kappa shift and B
 * = A diag(lambda), inner iterations of Phi and the KKT violation, B = B
 * .* Phi, the column normalization, the log-likelihood after each outer
 * iteration, the stop when no mode needed an update), with every step on
 * the device. Only scalars cross to the host: the KKT violation after
 * each inner iteration (the host decides whether to update or leave the
 * mode, as the CPU does) and the log-likelihood's sum and lambda after
 * each outer iteration.
 *
 * Several GPUs (of one process, or of several under MPI: as the CPU's
 * processes in apr.c, one host thread a GPU as CP-ALS's als_gpu.cu, the
 * same communicators, amp_comm; the threads' shared handling, gpu_team.h,
 * is completion.cu's too): each GPU holds its part of the tensor,
 * the shards AMPED's owner-computes partition dealt it, which own disjoint
 * rows of every mode (one contiguous range a GPU in the run's row order),
 * and a whole copy of every factor. For mode n:
 *   - the shift and B = A diag(lambda), each inner iteration's Phi pass,
 *     its KKT violation and B = B .* Phi run on the GPU's own rows only:
 *     a row's Phi comes from that row's nonzeros, all on its owner, and
 *     the other modes' factors do not change during mode n's inner
 *     iterations, so an inner iteration needs nothing from another GPU;
 *   - after each inner iteration, the KKT violation's max over every GPU
 *     (amp_comm_allreduce, max: order-free), so all GPUs update or stop
 *     together;
 *   - after the inner iterations, the mode's rows to every GPU as CP-ALS
 *     sends them (amp_comm_allgatherv: NCCL, or copies between the GPUs
 *     of one process), then the column sums and normalization over every
 *     row on each GPU: each GPU then holds the same factor and lambda, bit
 *     for bit, with no sum across GPUs (apr.c's processes do the same);
 *   - the log-likelihood: each GPU's partial over its nonzeros of the last
 *     mode's copy into its own slot of a vector of one slot a GPU (the
 *     others zero), summed across GPUs (each slot gets one nonzero term:
 *     exact), then added on the host in GPU order 0, 1, ...: a fixed
 *     order, the same bits on every GPU and every run.
 * So a run on several GPUs takes the decisions of one GPU's and differs
 * from it only in the order of sums: the rows' column sums in the run's
 * row order, the log-likelihood's partials by GPU (about 1e-15 relative
 * an outer iteration; tests/test_multi_gpu.c bounds the sequence at
 * 1e-9, as against the CPU). Only the owner-computes partition: equal-nnz
 * cuts rows between GPUs, whose Phi would need a sum every inner
 * iteration (refused).
 *
 * apr_pass, the fused inner iteration (LL false). Thread mapping as
 * mttkrp.cu's mttkrp_lanes: a persistent grid of warps, warp w of W owning
 * the nonzeros [nnz w/W, nnz (w+1)/W) of mode d's copy (ordered by row d);
 * lane l holds entries l, l+32, ... of a row (RPL = ceil(R/32) registers a
 * lane). The warp loads 32 words and values at a time, coalesced; each
 * lane finds its nonzero's block key, and word, key and value go lane to
 * lane by shuffles. Per nonzero k: the other modes' rows gathered (one
 * coalesced read of R entries each) into pi, their Hadamard product in
 * mode order as the CPU forms it; the row's B_i read (from L1/L2: it
 * repeats along the row); the model's value m = B_i . pi, a per-lane
 * partial then a butterfly over the warp (every lane ends with the same
 * bits: each step adds a pair in either order, and IEEE addition
 * commutes); w = x / max(m, eps); Phi_i += w pi summed in registers while
 * the row repeats, and written once when it changes: rows strictly inside
 * the warp's range are stored, its first and last rows (which neighbouring
 * warps, and streamed chunks, may share) added atomically into a Phi
 * zeroed before the pass. U nonzeros are gathered together (4 at rank <=
 * 32, 2 at <= 64, else 1): their row reads are in flight at once and their
 * warp reductions interleave, as the gathers are latency-bound.
 *   Bytes per nonzero and inner iteration: 8 (word) + 4 or 8 (value; 0 in
 *   the stream layout) streamed, plus N - 1 gathered factor rows and the
 *   row of B, R sizeof(real) each (from L2 where rows repeat), plus Phi's
 *   rows written once (rows x R x sizeof(real), and its zeroing).
 *   FLOPs per nonzero: (N - 2) R (pi) + 2 R (dot) + 2 R (Phi) + 1 division.
 * Variants: f64 and f32 (--precision f32: the gathered rows, B, the dot,
 * w and Phi in f32, the factors kept in f64 and shadowed in f32 after each
 * change; the dot's R products summed in f32 lose about log2(R) bits of
 * 24 against the CPU's f64, and Phi, summed over a row's nonzeros in
 * f32, as many more as the row is long, so an f32 run's log-likelihood
 * drifts from the f64 one at ~1e-7 relative per outer iteration (the
 * tests bound it); every element-wise step and the log-likelihood stay
 * f64); 3 and 4 modes with the other modes' rows read ahead (NOC 2, 3),
 * any other count looping over the modes (NOC 0).
 *
 * apr_pass with LL true: the log-likelihood's pass over the last mode's
 * copy, f64 whatever the precision: per nonzero m = sum_r lambda_r A_ir
 * pi_r (the same gather and butterfly), and x log m (x != 0) summed by the
 * warp's lane 0 along its range; a block's warps summed in order into its
 * partial, the partials of a launch summed in order by apr_fold into one
 * total on the device (stream order: chunk by chunk), then minus
 * sum(lambda) on the host. The same bits for any run on the same device
 * and chunking; not the CPU's bits (its sums run over rows).
 *   Bytes per nonzero: as one inner pass, no Phi. FLOPs: (N + 2) R + log.
 *
 * Element-wise kernels over the R x rows entries of one factor (the GPU's
 * own rows but for the normalization's, which takes every row; grid
 * stride; 8 + sizeof(Phi) bytes read and 8 written an entry, f32 shadow
 * 4 more): apr_shift_scale (kappa where the entry is inactive and the rule
 * lifts it, from the second outer iteration, then times lambda), apr_kkt
 * (max |min(B, 1 - Phi)|: a warp's max then one atomicMax on the bits of a
 * non-negative double, which order as unsigned integers; max is
 * order-free, so deterministic), apr_update (B .* Phi), and the
 * normalization: apr_col_partial sums |A| over fixed blocks of
 * APR_SUM_ROWS rows (one thread a column, in row order), apr_col_final
 * sums the blocks in order (lambda *= the sums), apr_normalize scales by
 * the reciprocal as the CPU does. Deterministic: the same bits every run.
 *
 * Streamed copies (--memory stream, or from compressed chunks) feed
 * apr_pass chunk by chunk through the tensor's ring (gpu_queue_chunk,
 * gpu_zstream_run), as an MTTKRP does: each inner pass and the
 * log-likelihood stream the copy once; a row cut by a chunk boundary is a
 * warp's last in one chunk and first in the next, so it is added
 * atomically from both. Two copies remapped are not taken (the remap
 * between modes would run once per mode, but is not wired here). Several
 * GPUs stream each its own part, as one GPU streams the whole. */
#include <config.h>

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <new>

#include "als_kernels.h"
#include "amp_comm.h"
#include "amp_cuda.h"
#include "blco_decode.cuh"
#include "gpu_internal.h"
#include "gpu_team.h"

#define APR_THREADS 256
#define APR_FULL 0xffffffffu
#define APR_NO_ROW (~0ull)
/* Rows per block of the column sums: small enough that a factor of a
 * million rows gives thousands of blocks a column to run at once. */
#define APR_SUM_ROWS 256

/* What one launch of apr_pass needs, passed by value. */
struct apr_args {
    const uint64_t *words;
    const void *vals;
    const uint64_t *block_start, *block_key;
    uint32_t nblocks;
    uint64_t nnz;
    uint64_t offset;   /* position of words[0] in the copy (streamed chunks) */
    int packed;        /* the stream layout: the value is q / 10^decimals inside the word */
    int qsigned;
    unsigned qshift, qbits;
    double p10;
    float p10f;
    /* Every row added atomically: a copy in two groups (amp_copy.early_nnz),
     * whose rows repeat across them. */
    int add;
    unsigned nother, R;
    unsigned out_shift, out_width;
    unsigned shift[AMP_MAX_MODES], width[AMP_MAX_MODES];
    const void *F[AMP_MAX_MODES];   /* the other modes' factors, real */
    const void *B;                  /* mode d's: B (Phi pass), A normalized (LL) */
    void *Phi;                      /* the Phi pass's output, real */
    double eps;
    const double *lambda;           /* LL */
    double *part;                   /* LL: one partial a block */
};

/* Nonzero k's value, as mttkrp.cu's value_of reads it: from the values
 * array, or from the packed word, divided in the values' own type. */
template <typename real, typename vtype>
__device__ __forceinline__ real apr_value(const apr_args &a, uint64_t k, uint64_t w, bool valid)
{
    if (!valid)
        return (real)0;
    if (!a.packed)
        return (real)((const vtype *)a.vals)[k];
    uint64_t raw = a.qshift < 64 ? w >> a.qshift : 0;
    int64_t q = a.qbits >= 64 || !a.qsigned
                    ? (int64_t)raw
                    : (int64_t)(raw << (64 - a.qbits)) >> (64 - a.qbits);
    if (sizeof(vtype) == 4)
        return (real)((float)q / a.p10f);
    return (real)((double)q / a.p10);
}

template <typename real, int RPL>
__device__ __forceinline__ void apr_flush(real *Phi, unsigned R, uint64_t row, const real *acc,
                                          int shared, unsigned lane)
{
    real *dst = Phi + row * R;
#pragma unroll
    for (int j = 0; j < RPL; j++) {
        unsigned r = lane + 32 * j;
        if (r < R) {
            if (shared)
                atomicAdd(dst + r, acc[j]);
            else
                dst[r] = acc[j];
        }
    }
}

/* The Phi pass (LL false) or the log-likelihood's (LL true, real double);
 * NOC: the other modes, 0 for any number (a.nother). */
template <typename real, typename vtype, int RPL, int NOC, bool LL>
__global__ void __launch_bounds__(APR_THREADS) apr_pass(const apr_args a)
{
    constexpr int U = RPL <= 1 ? 4 : RPL <= 2 ? 2 : 1;
    constexpr int NX = NOC > 0 ? NOC : 1;
    const unsigned lane = threadIdx.x & 31;
    const unsigned R = a.R;
    const unsigned nother = NOC > 0 ? (unsigned)NOC : a.nother;
    const uint64_t team = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5;
    const uint64_t nteams = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    const uint64_t lo = a.nnz * team / nteams, hi = a.nnz * (team + 1) / nteams;
    const real *B = (const real *)a.B;
    real *Phi = (real *)a.Phi;
    const real eps = (real)a.eps;
    real lam[RPL], acc[RPL];
#pragma unroll
    for (int j = 0; j < RPL; j++) {
        const unsigned r = lane + 32 * j;
        lam[j] = LL && r < R ? (real)a.lambda[r] : (real)0;
        acc[j] = 0;
    }
    uint64_t cur = APR_NO_ROW;
    int first = 1;
    double ll = 0;
    if (lo < hi) {
        uint32_t blk = a.nblocks > 1 ? block_of(a.block_start, a.nblocks, lo + a.offset) : 0;
        for (uint64_t base = lo; base < hi; base += 32) {
            const uint64_t k = base + lane;
            const bool valid = k < hi;
            const uint64_t w = valid ? a.words[k] : 0;
            const real v = apr_value<real, vtype>(a, k, w, valid);
            uint32_t myblk = blk;
            if (a.nblocks > 1 && valid)
                while (a.block_start[myblk + 1] <= k + a.offset)
                    myblk++;
            const uint64_t key = a.block_key[myblk];
            blk = __shfl_sync(APR_FULL, myblk, 31);
            const unsigned n = hi - base < 32 ? (unsigned)(hi - base) : 32;
            /* 32 is a multiple of U, so t + u < 32: every shuffle names a
             * lane; lanes at or past n hold no nonzero (row APR_NO_ROW). */
            for (unsigned t = 0; t < n; t += U) {
                uint64_t rows[U];
                real x[U], p[U][RPL], b[U][RPL];
                real g[NX][U][RPL];   /* NOC > 0: the rows read ahead */
                (void)g;
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const unsigned src = t + u;
                    const bool vu = src < n;
                    const uint64_t wu = __shfl_sync(APR_FULL, w, src);
                    const uint64_t ku = __shfl_sync(APR_FULL, key, src);
                    x[u] = __shfl_sync(APR_FULL, v, src);
                    rows[u] = vu ? amp_blco_field(ku, wu, a.out_shift, a.out_width) : APR_NO_ROW;
                    const real *brow = B + (vu ? rows[u] : 0) * R;
#pragma unroll
                    for (int j = 0; j < RPL; j++) {
                        const unsigned r = lane + 32 * j;
                        b[u][j] = r < R ? __ldg(brow + r) : (real)0;
                        p[u][j] = 1;
                    }
                    if constexpr (NOC > 0) {
                        /* Every row of the U nonzeros requested before any
                         * product: the reads overlap. */
#pragma unroll
                        for (int m = 0; m < NOC; m++) {
                            const uint64_t i =
                                vu ? amp_blco_field(ku, wu, a.shift[m], a.width[m]) : 0;
                            const real *src_row = (const real *)a.F[m] + i * R;
#pragma unroll
                            for (int j = 0; j < RPL; j++) {
                                const unsigned r = lane + 32 * j;
                                g[m][u][j] = r < R ? __ldg(src_row + r) : (real)0;
                            }
                        }
                    } else {
                        for (unsigned m = 0; m < nother; m++) {
                            const uint64_t i =
                                vu ? amp_blco_field(ku, wu, a.shift[m], a.width[m]) : 0;
                            const real *src_row = (const real *)a.F[m] + i * R;
#pragma unroll
                            for (int j = 0; j < RPL; j++) {
                                const unsigned r = lane + 32 * j;
                                p[u][j] *= r < R ? __ldg(src_row + r) : (real)0;
                            }
                        }
                    }
                }
                if constexpr (NOC > 0) {
                    /* pi = row 0 .* row 1 .* ..., the CPU's order (1 x
                     * row 0 is row 0 exactly). */
#pragma unroll
                    for (int m = 0; m < NOC; m++)
#pragma unroll
                        for (int u = 0; u < U; u++)
#pragma unroll
                            for (int j = 0; j < RPL; j++)
                                p[u][j] *= g[m][u][j];
                }
                real dot[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    dot[u] = 0;
#pragma unroll
                    for (int j = 0; j < RPL; j++)
                        dot[u] += (LL ? lam[j] * b[u][j] : b[u][j]) * p[u][j];
                }
#pragma unroll
                for (int off = 16; off > 0; off >>= 1)
#pragma unroll
                    for (int u = 0; u < U; u++)
                        dot[u] += __shfl_xor_sync(APR_FULL, dot[u], off);
#pragma unroll
                for (int u = 0; u < U; u++) {
                    if (rows[u] == APR_NO_ROW)
                        continue;
                    if constexpr (LL) {
                        if (x[u] != 0)
                            ll += (double)x[u] * log((double)dot[u]);
                    } else {
                        const real wgt = x[u] / (dot[u] > eps ? dot[u] : eps);
                        if (rows[u] != cur) {
                            if (cur != APR_NO_ROW) {
                                apr_flush<real, RPL>(Phi, R, cur, acc, first, lane);
                                first = a.add;
                            }
                            cur = rows[u];
#pragma unroll
                            for (int j = 0; j < RPL; j++)
                                acc[j] = 0;
                        }
#pragma unroll
                        for (int j = 0; j < RPL; j++)
                            acc[j] += wgt * p[u][j];
                    }
                }
            }
        }
    }
    if constexpr (!LL) {
        if (cur != APR_NO_ROW)
            apr_flush<real, RPL>(Phi, R, cur, acc, 1, lane);
    } else {
        /* The block's warps in order: one partial a block. */
        __shared__ double warp_ll[APR_THREADS / 32];
        if (lane == 0)
            warp_ll[threadIdx.x >> 5] = ll;
        __syncthreads();
        if (threadIdx.x == 0) {
            double s = 0;
            for (unsigned k = 0; k < blockDim.x / 32; k++)
                s += warp_ll[k];
            a.part[blockIdx.x] = s;
        }
    }
}

/* total += the n partials of one launch, in a fixed order (lane l takes
 * l, l + 32, ..., then the butterfly); one warp. */
__global__ void apr_fold(const double *part, unsigned n, double *total)
{
    const unsigned lane = threadIdx.x & 31;
    double s = 0;
    for (unsigned i = lane; i < n; i += 32)
        s += part[i];
    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_xor_sync(APR_FULL, s, off);
    if (lane == 0)
        *total += s;
}

#define GRID_STRIDE(i, n)                                                                  \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n);           \
         i += (uint64_t)gridDim.x * blockDim.x)

/* The inactive entries the rule lifts shifted up by kappa (shift: after
 * the first outer iteration), then B = A diag(lambda). */
template <typename P>
__global__ void apr_shift_scale(double *A, float *A32, const P *Phi, uint64_t n, unsigned R,
                                const double *lam, int shift, double above, double kappa,
                                double kappa_tol)
{
    GRID_STRIDE(i, n)
    {
        double v = A[i];
        if (shift && (double)Phi[i] > above && v < kappa_tol)
            v += kappa;
        v *= lam[i % R];
        A[i] = v;
        if (A32)
            A32[i] = (float)v;
    }
}

/* *out = max(*out, max |min(B, 1 - Phi)|), as the bits of a non-negative
 * double. Every thread reaches the shuffles (blocks of whole warps). */
template <typename P>
__global__ void apr_kkt(const double *A, const P *Phi, uint64_t n, unsigned long long *out)
{
    double m = 0;
    GRID_STRIDE(i, n)
    {
        const double v = fabs(fmin(A[i], 1.0 - (double)Phi[i]));
        m = v > m ? v : m;
    }
    for (int off = 16; off > 0; off >>= 1) {
        const double o = __shfl_xor_sync(APR_FULL, m, off);
        m = o > m ? o : m;
    }
    if ((threadIdx.x & 31) == 0 && m > 0)
        atomicMax(out, (unsigned long long)__double_as_longlong(m));
}

template <typename P>
__global__ void apr_update(double *A, float *A32, const P *Phi, uint64_t n)
{
    GRID_STRIDE(i, n)
    {
        const double v = A[i] * (double)Phi[i];
        A[i] = v;
        if (A32)
            A32[i] = (float)v;
    }
}

/* part[b R + r] = sum of |A_ir| over block b's rows, in row order. */
__global__ void apr_col_partial(const double *A, uint64_t rows, unsigned R, double *part)
{
    const unsigned r = blockIdx.y * blockDim.x + threadIdx.x;
    if (r >= R)
        return;
    const uint64_t lo = (uint64_t)blockIdx.x * APR_SUM_ROWS;
    const uint64_t hi = lo + APR_SUM_ROWS < rows ? lo + APR_SUM_ROWS : rows;
    double s = 0;
    for (uint64_t i = lo; i < hi; i++)
        s += fabs(A[i * R + r]);
    part[(uint64_t)blockIdx.x * R + r] = s;
}

/* norm[r] = the blocks' sums in order; lambda[r] *= norm[r]. */
__global__ void apr_col_final(const double *part, uint64_t nb, unsigned R, double *norm,
                              double *lambda)
{
    const unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R)
        return;
    double s = 0;
    for (uint64_t b = 0; b < nb; b++)
        s += part[b * R + r];
    norm[r] = s;
    lambda[r] *= s;
}

/* A's columns to unit 1-norm (times the reciprocal, as the CPU); a zero
 * column stays. */
__global__ void apr_normalize(double *A, float *A32, uint64_t n, unsigned R, const double *norm)
{
    GRID_STRIDE(i, n)
    {
        const double nr = norm[i % R];
        double v = A[i];
        if (nr > 0)
            v *= 1.0 / nr;
        A[i] = v;
        if (A32)
            A32[i] = (float)v;
    }
}

/* ---- kernel choice --------------------------------------------------------- */

typedef void (*apr_fn)(const apr_args);

/* 3 and 4 modes read the other rows ahead; any other count loops. */
template <typename real, typename vtype, int RPL, bool LL>
static apr_fn pick_noc(unsigned nother)
{
    if (!LL) {
        if (nother == 2)
            return apr_pass<real, vtype, RPL, 2, LL>;
        if (nother == 3)
            return apr_pass<real, vtype, RPL, 3, LL>;
    }
    return apr_pass<real, vtype, RPL, 0, LL>;
}

/* The largest kernel holds 16 registers a lane, 16 x 32 entries of a row. */
static_assert(AMP_GPU_MAX_RANK <= 16 * 32, "a row of the largest rank fits apr_pass");

template <typename real, typename vtype, bool LL>
static apr_fn pick_rpl(unsigned R, unsigned nother)
{
    const unsigned rpl = (R + 31) / 32;
    if (rpl <= 1)
        return pick_noc<real, vtype, 1, LL>(nother);
    if (rpl <= 2)
        return pick_noc<real, vtype, 2, LL>(nother);
    if (rpl <= 4)
        return pick_noc<real, vtype, 4, LL>(nother);
    if (rpl <= 8)
        return pick_noc<real, vtype, 8, LL>(nother);
    return pick_noc<real, vtype, 16, LL>(nother);
}

static apr_fn pick_phi(int f32, int vals_f32, unsigned R, unsigned nother)
{
    if (f32)
        return vals_f32 ? pick_rpl<float, float, false>(R, nother)
                        : pick_rpl<float, double, false>(R, nother);
    return vals_f32 ? pick_rpl<double, float, false>(R, nother)
                    : pick_rpl<double, double, false>(R, nother);
}

static apr_fn pick_ll(int vals_f32, unsigned R, unsigned nother)
{
    return vals_f32 ? pick_rpl<double, float, true>(R, nother)
                    : pick_rpl<double, double, true>(R, nother);
}

/* A persistent grid over nnz nonzeros: as many blocks as fit at once,
 * never fewer than ~64 nonzeros a warp (each pays for two shared rows). */
static unsigned pass_grid(uint64_t nnz, int sm_count, int per_sm)
{
    uint64_t warps = (uint64_t)sm_count * (per_sm > 0 ? per_sm : 1) * (APR_THREADS / 32);
    if (warps > nnz / 64 + 1)
        warps = nnz / 64 + 1;
    return (unsigned)((warps + APR_THREADS / 32 - 1) / (APR_THREADS / 32));
}

/* Blocks of an element-wise kernel over n entries (grid stride). */
static unsigned ew_grid(uint64_t n, int sm_count)
{
    uint64_t blocks = (n + 255) / 256, most = (uint64_t)sm_count * 16;
    blocks = blocks > most ? most : blocks;
    return blocks > 0 ? (unsigned)blocks : 1;
}

/* ---- the run ---------------------------------------------------------------- */

/* Phase times: pairs of events around each step, read (and summed into
 * seconds, and per mode into stats) whenever the host waits anyway.
 * APR_EXCHANGE marks a mode's rows sent to the other GPUs: COMM time,
 * counted in the statistics' exchange as well. */
#define APR_TIMED 32
#define APR_EXCHANGE (-1)
struct apr_timer {
    cudaEvent_t b[APR_TIMED], e[APR_TIMED];
    int phase[APR_TIMED], mode[APR_TIMED];
    unsigned n;
};

/* What the GPUs' threads of one run share (als_gpu.cu's als_run, less the
 * ALS-only parts): the team (gpu_team.h), and g indexed by local number. */
struct apr_run {
    gpu_team team;
    const amp_group *group;
    const amp_gpu_tensor *const *g;
    const amp_partition *p;
    const amp_cpd_opts *o;
    amp_gpu_als_opts go;
    amp_cpd *c;
    amp_gpu_run_stats *stats;
};

struct gpu_apr {
    const amp_gpu_tensor *g;
    unsigned N, R;
    int f32;
    cudaStream_t s;
    double *A[AMP_MAX_MODES];
    float *A32[AMP_MAX_MODES];   /* f32: A's shadow, what the passes read */
    void *Phi[AMP_MAX_MODES];    /* real; kept per mode for the next shift */
    double *lambda, *colpart, *norm, *ll_part, *ll_total;
    unsigned long long *kkt;
    /* Several GPUs: one log-likelihood partial a GPU of the run, each
     * GPU's in its own slot (the others' zero) before the sum across
     * GPUs, which then only fills the slots in: exact, whatever order
     * the collective adds in. */
    double *ll_slots;
    /* Page-locked: [0] the KKT violation's bits, [1] the log-likelihood's
     * sum, [2 .. 2 + R) lambda, [2 + R .. 2 + R + ngpus) the slots. */
    double *host;
    apr_args args[AMP_MAX_MODES];   /* each mode's Phi pass, but the chunk */
    apr_fn phi_fn[AMP_MAX_MODES];
    int phi_per_sm[AMP_MAX_MODES];
    apr_args ll_args;
    apr_fn ll_fn;
    int ll_per_sm;
    apr_timer tm;
    double seconds[AMP_NPHASES];
    amp_gpu_run_stats *stats;
    /* The run, this GPU's number in it (its slot, its place in the
     * partition, its NCCL rank) and among this process's GPUs, its
     * communicator (NULL on one GPU); its rows (gpu_team.h). */
    apr_run *run;
    amp_comm *comm;
    unsigned gpu, local, ngpus;
    gpu_rows rows;
};

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void gpu_apr_free(gpu_apr *w)
{
    for (unsigned m = 0; m < w->N; m++) {
        cudaFree(w->A[m]);
        cudaFree(w->A32[m]);
        cudaFree(w->Phi[m]);
    }
    void *p[] = {w->lambda, w->colpart, w->norm, w->ll_part, w->ll_total, w->kkt, w->ll_slots};
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++)
        cudaFree(p[k]);
    if (w->host)
        cudaFreeHost(w->host);
    for (unsigned k = 0; k < APR_TIMED; k++) {
        destroy_event(w->tm.b[k]);
        destroy_event(w->tm.e[k]);
    }
    destroy_stream(w->s);
}

/* The timed steps so far into seconds (and stats); their events are done
 * (the caller waited for the stream). */
static amp_status tm_collect(gpu_apr *w, amp_error *err)
{
    for (unsigned k = 0; k < w->tm.n; k++) {
        float ms = 0;
        CUDA_TRY(cudaEventSynchronize(w->tm.e[k]), err);
        CUDA_TRY(cudaEventElapsedTime(&ms, w->tm.b[k], w->tm.e[k]), err);
        const double sec = ms / 1e3;
        const int m = w->tm.mode[k];
        const int ph = w->tm.phase[k] == APR_EXCHANGE ? AMP_PHASE_COMM : w->tm.phase[k];
        w->seconds[ph] += sec;
        if (w->stats && m >= 0) {
            const unsigned i = w->local;
            if (ph == AMP_PHASE_COMM)
                w->stats->comm[i][m] += sec;
            else
                w->stats->busy[i][m] += sec;
            if (ph == AMP_PHASE_MTTKRP)
                w->stats->mttkrp[i][m] += sec;
            if (w->tm.phase[k] == APR_EXCHANGE)
                w->stats->exchange[i][m] += sec;
        }
    }
    w->tm.n = 0;
    return AMP_OK;
}

/* Everything queued on the stream done (polled on several GPUs:
 * team_wait_stream), then the timed steps collected. */
static amp_status wait_all(gpu_apr *w, amp_error *err)
{
    AMP_CHECK(team_wait_stream(&w->run->team, w->comm, w->gpu, w->s, err));
    return tm_collect(w, err);
}

static amp_status tm_begin(gpu_apr *w, int phase, int mode, amp_error *err)
{
    if (w->tm.n == APR_TIMED)
        AMP_CHECK(wait_all(w, err));
    w->tm.phase[w->tm.n] = phase;
    w->tm.mode[w->tm.n] = mode;
    CUDA_TRY(cudaEventRecord(w->tm.b[w->tm.n], w->s), err);
    return AMP_OK;
}

static amp_status tm_end(gpu_apr *w, amp_error *err)
{
    CUDA_TRY(cudaEventRecord(w->tm.e[w->tm.n], w->s), err);
    w->tm.n++;
    return AMP_OK;
}


/* What every chunk of a pass over copy d shares: the copy's decoding, the
 * other modes' factors (f64 for the log-likelihood, else the run's
 * precision), mode d's B or A. */
static void pass_args(gpu_apr *w, unsigned d, int ll, apr_args *a)
{
    const amp_gpu_tensor *g = w->g;
    const gpu_copy *c = &g->copies[d];
    const int real32 = w->f32 && !ll;
    memset(a, 0, sizeof *a);
    a->block_start = c->block_start;
    a->block_key = c->block_key;
    a->nblocks = c->nblocks;
    a->R = w->R;
    if (c->packed) {
        static const double p10[10] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
        a->packed = 1;
        a->qshift = c->stream.qshift;
        a->qbits = c->stream.qbits;
        a->qsigned = c->stream.qsigned;
        a->p10 = p10[c->stream.decimals];
        a->p10f = (float)p10[c->stream.decimals];
    }
    a->add = c->early_nnz != c->nnz;
    a->out_shift = c->shift[d];
    a->out_width = c->width[d];
    for (unsigned m = 0; m < w->N; m++) {
        if (m == d)
            continue;
        a->shift[a->nother] = c->shift[m];
        a->width[a->nother] = c->width[m];
        a->F[a->nother++] = real32 ? (const void *)w->A32[m] : (const void *)w->A[m];
    }
    a->B = real32 ? (const void *)w->A32[d] : (const void *)w->A[d];
    a->Phi = ll ? NULL : w->Phi[d];
    a->lambda = ll ? w->lambda : NULL;
    a->part = ll ? w->ll_part : NULL;
}

/* One launch of fn over the a.nnz nonzeros a points at; the
 * log-likelihood's partials then folded into its total. */
static amp_status launch_pass(gpu_apr *w, const apr_args &a, apr_fn fn, int per_sm, int ll,
                              amp_error *err)
{
    if (a.nnz == 0)
        return AMP_OK;
    const unsigned grid = pass_grid(a.nnz, w->g->sm_count, per_sm);
    fn<<<grid, APR_THREADS, 0, w->s>>>(a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return CUDA_FAIL(err, e, ll ? "CP-APR log-likelihood kernel launch"
                                    : "CP-APR Phi kernel launch");
    if (ll) {
        apr_fold<<<1, 32, 0, w->s>>>(w->ll_part, grid, w->ll_total);
        CUDA_TRY(cudaGetLastError(), err);
    }
    return AMP_OK;
}

/* A chunk streamed from compressed chunks (gpu_zstream_run's launch). */
struct apr_zlaunch {
    gpu_apr *w;
    apr_args a;
    apr_fn fn;
    int per_sm, ll;
};

static amp_status apr_zchunk(void *ctx, int b, uint64_t at, uint64_t count, amp_error *err)
{
    apr_zlaunch *z = (apr_zlaunch *)ctx;
    z->a.words = z->w->g->ring_words[b];
    z->a.vals = z->w->g->ring_vals[b];
    z->a.nnz = count;
    z->a.offset = at;
    return launch_pass(z->w, z->a, z->fn, z->per_sm, z->ll, err);
}

/* One pass of fn over the whole of copy d: one launch when resident; when
 * streamed, chunk i copied into ring buffer i mod RING (unless
 * amp_gpu_prefetch queued it already, as mttkrp.cu's run_range takes
 * them) and its launch waiting for the copy. */
static amp_status over_copy(gpu_apr *w, unsigned d, apr_args a, apr_fn fn, int per_sm, int ll,
                            amp_error *err)
{
    const amp_gpu_tensor *g = w->g;
    const gpu_copy *c = &g->copies[d];
    if (c->nnz == 0)
        return AMP_OK;
    if (g->zstream) {
        apr_zlaunch z = {w, a, fn, per_sm, ll};
        return gpu_zstream_run(g, d, apr_zchunk, &z, w->s, err);
    }
    if (!g->streamed) {
        a.words = c->words;
        a.vals = c->vals;
        a.nnz = c->nnz;
        a.offset = 0;
        return launch_pass(w, a, fn, per_sm, ll, err);
    }
    amp_gpu_tensor *gw = const_cast<amp_gpu_tensor *>(g);
    const uint64_t queued = c->nnz == g->pf_end && g->pf_copy == (int)d ? g->pf_count : 0;
    gw->pf_count = 0;
    for (uint64_t c0 = 0, i = 0; c0 < c->nnz; c0 += g->chunk_nnz, i++) {
        const int b = (int)(i % AMP_GPU_RING);
        const uint64_t n = c->nnz - c0 < g->chunk_nnz ? c->nnz - c0 : g->chunk_nnz;
        if (i >= queued)
            AMP_CHECK(gpu_queue_chunk(g, c, b, c0, n, err));
        CUDA_TRY(cudaStreamWaitEvent(w->s, g->copied[b], 0), err);
        a.words = g->ring_words[b];
        a.vals = g->ring_vals[b];
        a.nnz = n;
        a.offset = c0;
        AMP_CHECK(launch_pass(w, a, fn, per_sm, ll, err));
        CUDA_TRY(cudaEventRecord(g->consumed[b], w->s), err);
    }
    return AMP_OK;
}

/* The device state of one GPU (w's run, numbers, communicator and
 * precision set by the caller); on failure what was made stays for
 * gpu_apr_free. */
static amp_status gpu_apr_new(const amp_gpu_tensor *g, const amp_cpd_opts *o,
                              const amp_partition *p, gpu_apr *w, amp_error *err)
{
    const unsigned N = g->nmodes, R = o->rank;
    const size_t psize = w->f32 ? sizeof(float) : sizeof(double);
    uint64_t max_rows = 1;
    w->g = g;
    w->N = N;
    w->R = R;
    team_plan_rows(g, p, w->gpu, w->ngpus, R, &w->rows);
    CUDA_TRY(cudaSetDevice(g->device), err);
    CUDA_TRY(cudaStreamCreateWithFlags(&w->s, cudaStreamNonBlocking), err);
    for (unsigned k = 0; k < APR_TIMED; k++) {
        CUDA_TRY(cudaEventCreate(&w->tm.b[k]), err);
        CUDA_TRY(cudaEventCreate(&w->tm.e[k]), err);
    }
    for (unsigned m = 0; m < N; m++) {
        const size_t n = (size_t)g->rows[m] * R;
        max_rows = g->rows[m] > max_rows ? g->rows[m] : max_rows;
        CUDA_TRY(cudaMalloc(&w->A[m], n * sizeof(double) + 8), err);
        if (w->f32)
            CUDA_TRY(cudaMalloc(&w->A32[m], n * sizeof(float) + 8), err);
        CUDA_TRY(cudaMalloc(&w->Phi[m], n * psize + 8), err);
        /* Read by the first shift only where it applies (never), but
         * never left undefined. */
        CUDA_TRY(cudaMemsetAsync(w->Phi[m], 0, n * psize + 8, w->s), err);
    }
    const uint64_t nb = (max_rows + APR_SUM_ROWS - 1) / APR_SUM_ROWS;
    CUDA_TRY(cudaMalloc(&w->lambda, R * sizeof(double)), err);
    CUDA_TRY(cudaMalloc(&w->norm, R * sizeof(double)), err);
    CUDA_TRY(cudaMalloc(&w->colpart, nb * R * sizeof(double)), err);
    CUDA_TRY(cudaMalloc(&w->ll_total, sizeof(double)), err);
    CUDA_TRY(cudaMalloc(&w->kkt, sizeof(unsigned long long)), err);
    if (w->ngpus > 1)
        CUDA_TRY(cudaMalloc(&w->ll_slots, w->ngpus * sizeof(double)), err);
    CUDA_TRY(cudaMallocHost(&w->host, (2 + (size_t)R + w->ngpus) * sizeof(double)), err);
    for (unsigned d = 0; d < N; d++) {
        w->phi_fn[d] = pick_phi(w->f32, g->vals_f32, R, N - 1);
        CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&w->phi_per_sm[d], w->phi_fn[d],
                                                               APR_THREADS, 0), err);
        pass_args(w, d, 0, &w->args[d]);
        w->args[d].eps = o->apr.eps_div_zero;
    }
    w->ll_fn = pick_ll(g->vals_f32, R, N - 1);
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&w->ll_per_sm, w->ll_fn, APR_THREADS,
                                                           0), err);
    /* pass_grid never launches more blocks than this. */
    const size_t ll_blocks = (size_t)g->sm_count * (w->ll_per_sm > 0 ? w->ll_per_sm : 1) + 1;
    CUDA_TRY(cudaMalloc(&w->ll_part, ll_blocks * sizeof(double)), err);
    pass_args(w, N - 1, 1, &w->ll_args);
    return AMP_OK;
}

/* Mode m's columns to unit 1-norm, the norms multiplied into lambda: over
 * every row of the factor, which every GPU holds whole and alike by now
 * (its rows sent to all first), so every GPU makes the same lambda and
 * factor, bit for bit, without a sum across GPUs. */
static amp_status normalize(gpu_apr *w, unsigned m, amp_error *err)
{
    const uint64_t rows = w->g->rows[m], n = rows * w->R;
    const uint64_t nb = (rows + APR_SUM_ROWS - 1) / APR_SUM_ROWS;
    const unsigned R = w->R, bx = R >= 256 ? 256 : (R + 31) / 32 * 32;
    if (nb > 0) {
        apr_col_partial<<<dim3((unsigned)nb, (R + bx - 1) / bx), bx, 0, w->s>>>(w->A[m], rows, R,
                                                                                w->colpart);
        CUDA_TRY(cudaGetLastError(), err);
    }
    apr_col_final<<<(R + 255) / 256, 256, 0, w->s>>>(w->colpart, nb, R, w->norm, w->lambda);
    CUDA_TRY(cudaGetLastError(), err);
    if (n > 0) {
        apr_normalize<<<ew_grid(n, w->g->sm_count), 256, 0, w->s>>>(w->A[m], w->A32[m], n, R,
                                                                     w->norm);
        CUDA_TRY(cudaGetLastError(), err);
    }
    return AMP_OK;
}

/* The inactive-entry shift (from the second outer iteration) and B = A
 * diag(lambda) over the rows of mode d this GPU owns; lambda = 1. The
 * other GPUs' rows are not read before theirs arrive. */
template <typename P>
static amp_status shift_scale(gpu_apr *w, unsigned d, int shift, const amp_cpd_opts *o,
                              amp_error *err)
{
    const uint64_t at = w->rows.own_begin[d] * w->R, n = w->rows.own_rows[d] * w->R;
    const double above = o->apr.shift_rule == AMP_APR_SHIFT_PYTTB ? 0 : 1;
    if (n > 0) {
        apr_shift_scale<P><<<ew_grid(n, w->g->sm_count), 256, 0, w->s>>>(
            w->A[d] + at, w->A32[d] ? w->A32[d] + at : NULL, (const P *)w->Phi[d] + at, n, w->R,
            w->lambda, shift, above, o->apr.kappa, o->apr.kappa_tol);
        CUDA_TRY(cudaGetLastError(), err);
    }
    CUDA_TRY(amp_gpu_fill(w->lambda, w->R, 1.0, w->s), err);
    return AMP_OK;
}

/* One inner iteration's Phi of mode d over this GPU's nonzeros (they fall
 * in its own rows only: the shards own disjoint rows), and its KKT
 * violation over its rows into w->kkt (queued only). */
template <typename P>
static amp_status phi_pass(gpu_apr *w, unsigned d, amp_error *err)
{
    const uint64_t at = w->rows.own_begin[d] * w->R, n = w->rows.own_rows[d] * w->R;
    CUDA_TRY(cudaMemsetAsync((P *)w->Phi[d] + at, 0, n * sizeof(P), w->s), err);
    AMP_CHECK(over_copy(w, d, w->args[d], w->phi_fn[d], w->phi_per_sm[d], 0, err));
    CUDA_TRY(cudaMemsetAsync(w->kkt, 0, sizeof *w->kkt, w->s), err);
    if (n > 0) {
        apr_kkt<P><<<ew_grid(n, w->g->sm_count), 256, 0, w->s>>>(w->A[d] + at,
                                                                  (const P *)w->Phi[d] + at, n,
                                                                  w->kkt);
        CUDA_TRY(cudaGetLastError(), err);
    }
    return AMP_OK;
}

/* The KKT violation, the largest of every GPU's (the same on all, so that
 * all take the same decision; a max is order-free: the same bits however
 * reduced), into host[0] (queued only: the caller waits). */
static amp_status kkt_out(gpu_apr *w, amp_error *err)
{
    /* The bits of a non-negative double (apr_kkt), so a max of doubles. */
    AMP_CHECK(amp_comm_allreduce(w->comm, (double *)w->kkt, 1, 1, w->s, err));
    CUDA_TRY(cudaMemcpyAsync(w->host, w->kkt, sizeof(double), cudaMemcpyDeviceToHost, w->s), err);
    return AMP_OK;
}

template <typename P>
static amp_status update(gpu_apr *w, unsigned d, amp_error *err)
{
    const uint64_t at = w->rows.own_begin[d] * w->R, n = w->rows.own_rows[d] * w->R;
    if (n > 0) {
        apr_update<P><<<ew_grid(n, w->g->sm_count), 256, 0, w->s>>>(
            w->A[d] + at, w->A32[d] ? w->A32[d] + at : NULL, (const P *)w->Phi[d] + at, n);
        CUDA_TRY(cudaGetLastError(), err);
    }
    return AMP_OK;
}

/* Several GPUs: this GPU's rows of mode d (f64; the f32 shadows follow
 * from the normalization) to every other GPU, and theirs in, as CP-ALS
 * sends a mode's rows (amp_comm_allgatherv: NCCL, or copies). */
static amp_status exchange(gpu_apr *w, unsigned d, amp_error *err)
{
    if (w->ngpus == 1)
        return AMP_OK;
    AMP_CHECK(tm_begin(w, APR_EXCHANGE, (int)d, err));
    AMP_CHECK(amp_comm_allgatherv(w->comm, w->A[d], 0, w->rows.gather_offset[d],
                                  w->rows.gather_count[d], w->s, err));
    return tm_end(w, err);
}

/* The log-likelihood's sum of x log m over this GPU's nonzeros of the
 * last mode's copy (on one GPU into host[1]), and lambda, queued to the
 * host. */
static amp_status log_terms(gpu_apr *w, amp_error *err)
{
    const unsigned N = w->N, R = w->R;
    CUDA_TRY(cudaMemsetAsync(w->ll_total, 0, sizeof(double), w->s), err);
    AMP_CHECK(over_copy(w, N - 1, w->ll_args, w->ll_fn, w->ll_per_sm, 1, err));
    if (w->ngpus == 1)
        CUDA_TRY(cudaMemcpyAsync(w->host + 1, w->ll_total, sizeof(double),
                                 cudaMemcpyDeviceToHost, w->s), err);
    CUDA_TRY(cudaMemcpyAsync(w->host + 2, w->lambda, R * sizeof(double), cudaMemcpyDeviceToHost,
                             w->s), err);
    return AMP_OK;
}

/* Several GPUs: every GPU's partial into its slot, the slots filled in
 * across GPUs (one nonzero term a slot: exact) and queued to the host
 * for log_sum to add in GPU order. */
static amp_status log_share(gpu_apr *w, amp_error *err)
{
    CUDA_TRY(cudaMemsetAsync(w->ll_slots, 0, w->ngpus * sizeof(double), w->s), err);
    CUDA_TRY(cudaMemcpyAsync(w->ll_slots + w->gpu, w->ll_total, sizeof(double),
                             cudaMemcpyDeviceToDevice, w->s), err);
    AMP_CHECK(amp_comm_allreduce(w->comm, w->ll_slots, w->ngpus, 0, w->s, err));
    CUDA_TRY(cudaMemcpyAsync(w->host + 2 + w->R, w->ll_slots, w->ngpus * sizeof(double),
                             cudaMemcpyDeviceToHost, w->s), err);
    return AMP_OK;
}

/* Once log_terms' copies are in: the log-likelihood, sum x log m (the
 * GPUs' partials added in the run's GPU order, 0 first, so every GPU and
 * every run of the same GPUs gets the same bits) minus sum(lambda). */
static double log_sum(const gpu_apr *w)
{
    double sum = w->host[1], total = 0;
    if (w->ngpus > 1) {
        sum = 0;
        for (unsigned q = 0; q < w->ngpus; q++)
            sum += w->host[2 + w->R + q];
    }
    for (unsigned r = 0; r < w->R; r++)
        total += w->host[2 + r];
    return sum - total;
}

/* The outer iterations, as amp_cpu_apr's (apr.c; several GPUs as its
 * processes): the same steps in the same order, the same stop. Every GPU
 * decides alike (the KKT violation's max and the log-likelihood are the
 * run's); this process's first GPU writes c and calls o->on_iter. P:
 * Phi's type (the run's precision). */
template <typename P>
static amp_status iterate(gpu_apr *w, const amp_cpd_opts *o, amp_cpd *c, double t_start,
                          amp_error *err)
{
    const unsigned N = w->N;
    const unsigned inner = o->apr.inner ? o->apr.inner : AMP_APR_INNER_DEFAULT;
    const int lead = w->local == 0;
    const amp_gpu_als_opts *go = &w->run->go;
    double old_ll = 0;
    if (lead) {
        c->iters = 0;
        c->converged = 0;
        c->stopped = 0;
        c->inner_iters = 0;
    }
    for (unsigned it = 0; it < o->max_iters; it++) {
        const double t_iter = it == 0 ? t_start : wall_now();
        int converged = 1;
        double kkt_max = 0;
        unsigned inner_total = 0;
        for (unsigned d = 0; d < N; d++) {
            if (go->fail_gpu == w->gpu + 1 && go->fail_iter == it + 1 && d == 1)
                return AMP_FAIL(err, AMP_ERR_CUDA, "a device failure injected at iteration %u "
                                "(amp_gpu_als_opts.fail_gpu)", it + 1);
            AMP_CHECK(tm_begin(w, AMP_PHASE_UPDATE, (int)d, err));
            AMP_CHECK(shift_scale<P>(w, d, it > 0, o, err));
            AMP_CHECK(tm_end(w, err));
            double kkt = 0;
            for (unsigned in = 0; in < inner; in++) {
                inner_total++;
                AMP_CHECK(tm_begin(w, AMP_PHASE_MTTKRP, (int)d, err));
                AMP_CHECK(phi_pass<P>(w, d, err));
                if (w->ngpus == 1)
                    AMP_CHECK(kkt_out(w, err));
                AMP_CHECK(tm_end(w, err));
                if (w->ngpus > 1) {   /* the run's max: collective time */
                    AMP_CHECK(tm_begin(w, AMP_PHASE_COMM, (int)d, err));
                    AMP_CHECK(kkt_out(w, err));
                    AMP_CHECK(tm_end(w, err));
                }
                AMP_CHECK(wait_all(w, err));
                kkt = w->host[0];   /* the bits apr_kkt's atomicMax left, the run's max */
                if (kkt < o->tol)
                    break;
                converged = 0;
                AMP_CHECK(tm_begin(w, AMP_PHASE_UPDATE, (int)d, err));
                AMP_CHECK(update<P>(w, d, err));
                AMP_CHECK(tm_end(w, err));
            }
            kkt_max = kkt > kkt_max ? kkt : kkt_max;
            AMP_CHECK(exchange(w, d, err));
            AMP_CHECK(tm_begin(w, AMP_PHASE_NORMALIZE, (int)d, err));
            AMP_CHECK(normalize(w, d, err));
            AMP_CHECK(tm_end(w, err));
        }
        /* The log-likelihood, over the last mode's copy. */
        AMP_CHECK(tm_begin(w, AMP_PHASE_FIT, -1, err));
        AMP_CHECK(log_terms(w, err));
        AMP_CHECK(tm_end(w, err));
        if (w->ngpus > 1) {
            AMP_CHECK(tm_begin(w, AMP_PHASE_COMM, -1, err));
            AMP_CHECK(log_share(w, err));
            AMP_CHECK(tm_end(w, err));
        }
        AMP_CHECK(wait_all(w, err));
        const double loglik = log_sum(w);
        const double delta = it == 0 ? fabs(loglik) : fabs(loglik - old_ll);
        old_ll = loglik;
        if (lead) {
            c->loglik = loglik;
            c->kkt = kkt_max;
            c->inner_iters = inner_total;
            c->iters = it + 1;
            c->fit = c->loglik;
            memcpy(c->seconds, w->seconds, sizeof c->seconds);
            if (o->on_iter)
                o->on_iter(o->ctx, it + 1, c->loglik, delta, wall_now() - t_iter);
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
        if (converged) {
            if (lead)
                c->converged = 1;
            break;
        }
    }
    return AMP_OK;
}

/* One GPU's run from c's factors (every GPU takes all of them); the
 * process's first GPU writes the outcome into c. */
static amp_status run_apr(gpu_apr *w, const amp_cpd_opts *o, amp_cpd *c, amp_error *err)
{
    const unsigned N = w->N, R = w->R;
    const double t_start = wall_now();
    /* The start, as pyttb's and the CPU's: every factor's columns to unit
     * 1-norm, the norms into lambda (which starts at 1); on every GPU
     * alike. */
    for (unsigned m = 0; m < N; m++)
        CUDA_TRY(cudaMemcpyAsync(w->A[m], c->A[m], (size_t)w->g->rows[m] * R * sizeof(double),
                                 cudaMemcpyHostToDevice, w->s), err);
    AMP_CHECK(tm_begin(w, AMP_PHASE_NORMALIZE, -1, err));
    CUDA_TRY(amp_gpu_fill(w->lambda, R, 1.0, w->s), err);
    for (unsigned m = 0; m < N; m++)
        AMP_CHECK(normalize(w, m, err));
    AMP_CHECK(tm_end(w, err));
    AMP_CHECK(w->f32 ? iterate<float>(w, o, c, t_start, err)
                     : iterate<double>(w, o, c, t_start, err));
    if (w->local == 0) {
        /* Every GPU holds every row of every factor by now. */
        for (unsigned m = 0; m < N; m++)
            CUDA_TRY(cudaMemcpyAsync(c->A[m], w->A[m], (size_t)w->g->rows[m] * R * sizeof(double),
                                     cudaMemcpyDeviceToHost, w->s), err);
        CUDA_TRY(cudaMemcpyAsync(c->lambda, w->lambda, R * sizeof(double),
                                 cudaMemcpyDeviceToHost, w->s), err);
    }
    return wait_all(w, err);
}

/* The whole run of this process's GPU local. */
static amp_status apr_one_gpu(apr_run *run, unsigned local, amp_error *err)
{
    return team_one_gpu<gpu_apr>(&run->team, local, run, run->o->precision == AMP_PRECISION_F32,
                                 run->stats, [&](gpu_apr *w) {
        amp_status rc = gpu_apr_new(run->g[local], run->o, run->p, w, err);
        return rc == AMP_OK ? run_apr(w, run->o, run->c, err) : rc;
    }, gpu_apr_free, err);
}

extern "C" amp_status amp_gpu_cpd_apr_multi(const amp_gpu_tensor *const *g,
                                            amp_comm *const *comms, const amp_partition *p,
                                            const amp_group *group, const amp_cpd_opts *o,
                                            const amp_gpu_als_opts *go, amp_cpd *c,
                                            amp_gpu_run_stats *stats, amp_error *err)
{
    const unsigned ngpus = p ? p->ngpus : 1, procs = group ? group->size : 1;
    if (c->rank != o->rank)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have rank %u, not %u", c->rank, o->rank);
    AMP_CHECK(amp_rank_check(o->rank, AMP_GPU_MAX_RANK, "CP-APR on the GPU", err));
    if (ngpus > 1 && comms == NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%u GPUs need their communicators", ngpus);
    if (ngpus % procs != 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%u GPUs are not the same number on each of %u "
                        "processes", ngpus, procs);
    if (ngpus > 1 && p->kind != AMP_PARTITION_OWNER)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--method cp-apr on several GPUs takes the "
                        "file's shards (--partition shards), not equal-nnz: its inner "
                        "iterations need every row's nonzeros on one GPU");
    const unsigned nlocal = ngpus / procs;
    for (unsigned i = 0; i < nlocal; i++) {
        if (c->nmodes != g[i]->nmodes)
            return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have %u modes, the tensor %u",
                            c->nmodes, g[i]->nmodes);
        if (g[i]->remap)
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--method cp-apr does not run on two "
                            "copies remapped (--memory remap) for now: --memory resident or "
                            "stream");
    }
    apr_run *run = new (std::nothrow) apr_run;
    if (run == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    run->team.ngpus = ngpus;
    run->team.nlocal = nlocal;
    run->team.first = group ? group->rank * nlocal : 0;
    run->team.comms = comms;
    run->group = group;
    run->g = g;
    run->p = p;
    run->o = o;
    run->go = go ? *go : amp_gpu_als_opts{};
    run->c = c;
    run->stats = stats;
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->ngpus = nlocal;
        stats->nmodes = c->nmodes;
    }
    memset(c->seconds, 0, sizeof c->seconds);
    const amp_status rc = team_run(&run->team, g, [run](unsigned local) {
        run->team.rc[local] = apr_one_gpu(run, local, &run->team.err[local]);
    }, c, stats, err);
    delete run;
    return rc;
}

extern "C" amp_status amp_gpu_cpd_apr(const amp_gpu_tensor *g, const amp_cpd_opts *o,
                                      amp_cpd *c, amp_gpu_run_stats *stats, amp_error *err)
{
    return amp_gpu_cpd_apr_multi(&g, NULL, NULL, NULL, o, NULL, c, stats, err);
}
