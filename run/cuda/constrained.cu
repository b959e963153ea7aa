/* The constrained methods' update of a factor's rows on the GPU
 * (amp_method in amp_core.h has the formulas): AO-ADMM, MU and HALS, f64,
 * the same arithmetic as the CPU's reference (run/cpu/update.c) up to
 * the order of the sums. Every row depends only on its row of M, itself
 * (and AO-ADMM's dual row U) and an R x R matrix (V, or AO-ADMM's
 * P = (V + rho I)^-1), so a row never waits for another: a mode update
 * reads M, A (and U) once and writes A (and U) once, AO-ADMM's inner
 * iterations included (cuADMM fuses its inner loop the same way).
 *
 * The fused kernel, AO-ADMM and MU at rank up to AMP_GPU_UPDATE_FUSED_RANK
 * (32): a block of 8 warps owns a contiguous range of rows (as the fused
 * solve, als_solve.cu); warp w takes rows w, w + 8, ... of it, ROWS at a
 * time (4; 3 for AO-ADMM, whose registers 4 would spill). Lane j owns
 * column j: entry j of each of its rows (m, a, and for AO-ADMM u) in
 * registers, and column j of P (AO-ADMM) or V (MU) too (32 doubles, zero
 * past R). Lanes at or past R hold zeros and never write.
 *   AO-ADMM: per inner iteration, t_j = m_j + rho (a_j + u_j) is staged
 *     in the warp's shared memory and read back whole as a broadcast, two
 *     entries at a time: at_j = sum_k t_k P[k][j]; then the prox, the
 *     dual step and (admm_tol > 0) the row's four residual sums, each a
 *     butterfly of shuffles that leaves the same bits on every lane, so
 *     the warp agrees on which rows stopped. The rows stay in registers
 *     through every inner iteration; a group of ROWS rows goes on while
 *     any of them has not stopped (the stopped ones keep their values).
 *   MU: the row's old values staged the same way, av_j = sum_k a_k V[k][j],
 *     then lane j's entry.
 * HALS at those ranks has a kernel of its own, a thread a row
 * (update_hals.cu): its column sweep is a chain within the row, which a
 * lane a column ran on one lane at a time.
 *
 * Every kernel reads A (and U) at column scales when given them (the
 * warm start's lambda): a pass over A and U of their own cost more than
 * the kernel's arithmetic on rd100m.
 *
 * The generic kernel, any rank to AMP_GPU_MAX_RANK (512; the launcher
 * takes it above 32): a block of 128 threads owns a contiguous range of
 * rows, GEN_ROWS (4) at a time; thread t owns columns t, t + 128, ...
 * (COLS = 1, 2 or 4 of them, a template argument, by rank) of each, in
 * registers. The products read the row (t, or the old a for MU) staged
 * in shared memory as a broadcast and the R x R matrix from global memory
 * (cached; coalesced across the threads' columns); sums across the row
 * (HALS's s, AO-ADMM's residuals) are each thread's columns in order,
 * then a butterfly in each warp, then the 4 warps in order through
 * shared memory, so every thread has the same bits. HALS takes one
 * __syncthreads a column (the partial sums alternate between two slots).
 *
 * Both launch one wave: as many blocks as the device holds at once
 * (cudaOccupancyMaxActiveBlocksPerMultiprocessor times the SMs), each
 * a contiguous, equal range of rows. Deterministic: no atomics, every
 * sum in a fixed order; a run gives the same bits every time, whatever
 * the grid (a row's arithmetic does not depend on which block has it).
 *
 * Bytes per row (f64): M read 8 R, A read and written 16 R, and for
 * AO-ADMM U read and written 16 R: 24 R (MU, HALS), 40 R (AO-ADMM)
 * whatever the inner iterations. The R x R matrix: once per block in the
 * fused kernel (negligible); in the generic kernel read from the cache
 * hierarchy once per GEN_ROWS rows per product, 8 R^2 / 4 bytes a row
 * per product (L1 up to R ~ 100, L2 above): at R = 512, 512 KB a row per
 * product, far above the 24 R to 40 R of DRAM, so the generic kernel is
 * bound by L2 there and is the slow path (AO-ADMM and MU are products by
 * an R x R matrix and could go through cuBLAS instead at large R).
 * FLOPs per row (an FMA counts 2): AO-ADMM inner x (2 R K + ~8 R, and
 * ~8 R more with admm_tol), MU 2 R K + ~6 R and a division a column,
 * K = 32 in the fused kernel (the products run over 32 entries whatever R
 * is; lanes past R compute zeros) and R in the generic one, where HALS
 * takes 2 R^2 + ~6 R and a division a column. The butterflies add 5
 * shuffles per sum: R per row for the generic HALS, 4 per row per inner
 * iteration for AO-ADMM with admm_tol.
 *
 * AO-ADMM's rho and P are formed on the device: amp_gpu_admm_shift
 * writes rho = trace(V) / R (summed in the CPU's order, so the same bits
 * as amp_cpu_admm_prepare) and W = V + rho I; cuSOLVER's potrf and potri
 * on W and amp_gpu_symmetrize turn W into P (admm_prepare below, which
 * the host-array entry point for the tests uses). */
#include <config.h>

#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "als_kernels.h"
#include "gpu_internal.h"
#include "update_internal.h"

enum { UPD_WARPS = 8 };
enum { GEN_THREADS = 128, GEN_WARPS = GEN_THREADS / 32, GEN_ROWS = 4 };
static_assert(AMP_GPU_UPDATE_FUSED_RANK <= 32, "one lane a column, a column in 32 registers");
static_assert(AMP_GPU_MAX_RANK <= 4 * GEN_THREADS, "the generic kernel: 4 columns a thread");

#define FULL_MASK 0xffffffffu

/* What the kernels take, by value. */
struct upd_params {
    unsigned R, inner;
    int nonneg;
    double l1, l2, tol;
    const double *X;     /* V (MU, HALS) or P (AO-ADMM), R x R */
    const double *rho;   /* AO-ADMM */
    const double *scale; /* R column scales A (and U) are read at, or NULL */
};

/* ---- one entry of each method, shared by both kernels ------------------ */

/* prox of the rule for a step 1 / rho: t = l1 / rho, sc = rho / (rho + l2). */
__device__ __forceinline__ double prox(double z, double t, double sc, int nonneg)
{
    if (nonneg)
        return z > t ? (z - t) * sc : 0;
    return z > t ? (z - t) * sc : z < -t ? (z + t) * sc : 0;
}

__device__ __forceinline__ double mu_entry(double a, double m, double av, double l1, double l2)
{
    const double num = m - l1;
    const double v = a * (num > 0 ? num : 0) / (av + l2 * a + AMP_UPDATE_EPS);
    return v > AMP_UPDATE_EPS ? v : AMP_UPDATE_EPS;
}

/* s = sum_q a_q V[r][q] with the current a (a_r included), vrr = V[r][r]. */
__device__ __forceinline__ double hals_entry(double m, double s, double a, double vrr,
                                             double l1, double l2, int nonneg)
{
    const double den = vrr + l2;
    const double num = m - (s - a * vrr);
    if (nonneg) {
        const double y = den > 0 ? (num - l1) / den : 0;
        return y > AMP_UPDATE_EPS ? y : AMP_UPDATE_EPS;
    }
    const double t = num > l1 ? num - l1 : num < -l1 ? num + l1 : 0;
    return den > 0 ? t / den : 0;
}

/* The warp's sum on every lane, the same bits on each (a butterfly: at
 * every level the two lanes of a pair add the same two values). */
__device__ __forceinline__ double warp_sum(double x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(FULL_MASK, x, o);
    return x;
}

/* ---- the fused kernel: a warp a row, a lane a column (R <= 32) ---------- */

/* out[r] = sum_k row_r[k] x[k] on each lane (x: its column of the R x R
 * matrix), the warp's ROWS staged rows read whole as broadcasts, two
 * entries at a time; the sums in k's order. */
template <int ROWS>
__device__ __forceinline__ void fused_product(const double2 (*rows)[16], const double *x,
                                              double *out)
{
#pragma unroll
    for (int r = 0; r < ROWS; r++)
        out[r] = 0;
#pragma unroll
    for (int k = 0; k < 16; k++)
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const double2 v = rows[r][k];
            out[r] = fma(v.x, x[2 * k], out[r]);
            out[r] = fma(v.y, x[2 * k + 1], out[r]);
        }
}

/* Rows a warp takes at a time: independent sums the warp interleaves.
 * AO-ADMM keeps P's column (64 registers) and four values a row in
 * registers through the inner iterations; 4 rows spill past the 128
 * registers that 2 blocks an SM leave, 3 do not (ptxas, sm_90). */
template <int METHOD>
struct fused_rows {
    static const int n = METHOD == AMP_METHOD_ADMM ? 3 : 4;
};

template <int METHOD>
__global__ void __launch_bounds__(UPD_WARPS * 32, 2)
    update_fused_kernel(upd_params p, const double *M, double *A, double *U, uint64_t rows)
{
    enum { ROWS = fused_rows<METHOD>::n };
    __shared__ double2 s_row[UPD_WARPS][ROWS][16];
    const unsigned R = p.R, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool mine = lane < R;
    const uint64_t lo = rows * blockIdx.x / gridDim.x, hi = rows * (blockIdx.x + 1) / gridDim.x;
    /* Column `lane` of P (AO-ADMM) or V (MU) in registers. */
    double x[32];
#pragma unroll
    for (int k = 0; k < 32; k++)
        x[k] = (unsigned)k < R && mine ? p.X[(size_t)k * R + lane] : 0.0;
    double rho = 0, t = 0, sc = 0;
    if (METHOD == AMP_METHOD_ADMM) {
        rho = *p.rho;
        t = p.l1 / rho;
        sc = rho / (rho + p.l2);
    }
    const double colscale = p.scale && mine ? p.scale[lane] : 1.0;
    const double tol2 = p.tol * p.tol;
    double *srow = (double *)s_row[warp];
    const uint64_t step = UPD_WARPS * ROWS;
    for (uint64_t i0 = lo + warp * ROWS; i0 < hi; i0 += step) {
        double m[ROWS], a[ROWS], u[ROWS];
        bool live[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const uint64_t i = i0 + r;
            live[r] = i < hi;
            const bool ld = live[r] && mine;
            m[r] = ld ? M[i * R + lane] : 0.0;
            a[r] = ld ? A[i * R + lane] * colscale : 0.0;
            u[r] = ld && METHOD == AMP_METHOD_ADMM ? U[i * R + lane] * colscale : 0.0;
        }
        if (METHOD == AMP_METHOD_ADMM) {
            for (unsigned it = 0; it < p.inner; it++) {
                bool any = false;
#pragma unroll
                for (int r = 0; r < ROWS; r++)
                    any |= live[r];
                if (!any)   /* the same on every lane */
                    break;
#pragma unroll
                for (int r = 0; r < ROWS; r++)
                    srow[r * 32 + lane] = m[r] + rho * (a[r] + u[r]);
                __syncwarp();
                double at[ROWS];
                fused_product<ROWS>(s_row[warp], x, at);
                __syncwarp();   /* read before the next iteration's t lands */
#pragma unroll
                for (int r = 0; r < ROWS; r++) {
                    if (!live[r])
                        continue;
                    const double old = a[r];
                    const double v = mine ? prox(at[r] - u[r], t, sc, p.nonneg) : 0.0;
                    a[r] = v;
                    u[r] += v - at[r];
                    if (p.tol > 0) {
                        const double primal = warp_sum((v - at[r]) * (v - at[r]));
                        const double dual = warp_sum((v - old) * (v - old));
                        const double xn = warp_sum(v * v);
                        const double un = warp_sum(u[r] * u[r]);
                        if (primal <= tol2 * xn && dual <= tol2 * un)
                            live[r] = false;
                    }
                }
            }
        } else {   /* MU */
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                srow[r * 32 + lane] = a[r];
            __syncwarp();
            double av[ROWS];
            fused_product<ROWS>(s_row[warp], x, av);
            __syncwarp();   /* read before the next rows land */
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                a[r] = mu_entry(a[r], m[r], av[r], p.l1, p.l2);
        }
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const uint64_t i = i0 + r;
            if (i < hi && mine) {
                A[i * R + lane] = a[r];
                if (METHOD == AMP_METHOD_ADMM)
                    U[i * R + lane] = u[r];
            }
        }
    }
}

/* ---- the generic kernel: a block a group of rows, COLS columns a thread - */

/* v[row][q], NS sums a row (each thread's part: its columns summed in
 * order), replaced by the block's sums, the same bits on every thread:
 * butterflies, then the warps in order through red (GEN_WARPS x GEN_ROWS
 * x NS doubles of shared memory). Has one __syncthreads, after which red
 * is read: it may be written again only past another. */
template <int NS>
__device__ __forceinline__ void block_sums(double (*v)[NS], double (*red)[GEN_ROWS][NS],
                                           unsigned warp, unsigned lane)
{
#pragma unroll
    for (int r = 0; r < GEN_ROWS; r++)
#pragma unroll
        for (int q = 0; q < NS; q++)
            v[r][q] = warp_sum(v[r][q]);
    if (lane == 0)
#pragma unroll
        for (int r = 0; r < GEN_ROWS; r++)
#pragma unroll
            for (int q = 0; q < NS; q++)
                red[warp][r][q] = v[r][q];
    __syncthreads();
#pragma unroll
    for (int r = 0; r < GEN_ROWS; r++)
#pragma unroll
        for (int q = 0; q < NS; q++) {
            double s = red[0][r][q];
#pragma unroll
            for (int w = 1; w < GEN_WARPS; w++)
                s += red[w][r][q];
            v[r][q] = s;
        }
}

/* out[r][c] = sum_k s_row[r][k] X[k][j], j = tid + c GEN_THREADS (0 past
 * R), for the GEN_ROWS rows staged in s_row; X's row k read once for all
 * of them (from the cache), the sums in k's order. */
template <int COLS>
__device__ __forceinline__ void generic_product(const double (*s_row)[AMP_GPU_MAX_RANK],
                                                const double *X, unsigned R, unsigned tid,
                                                double (*out)[COLS])
{
#pragma unroll
    for (int r = 0; r < GEN_ROWS; r++)
#pragma unroll
        for (int c = 0; c < COLS; c++)
            out[r][c] = 0;
    for (unsigned k = 0; k < R; k++) {
        double xk[COLS];
#pragma unroll
        for (int c = 0; c < COLS; c++) {
            const unsigned j = tid + c * GEN_THREADS;
            xk[c] = j < R ? __ldg(X + (size_t)k * R + j) : 0.0;
        }
#pragma unroll
        for (int r = 0; r < GEN_ROWS; r++) {
            const double sk = s_row[r][k];
#pragma unroll
            for (int c = 0; c < COLS; c++)
                out[r][c] = fma(sk, xk[c], out[r][c]);
        }
    }
}

template <int METHOD, int COLS>
__global__ void __launch_bounds__(GEN_THREADS)
    update_generic_kernel(upd_params p, const double *M, double *A, double *U, uint64_t rows)
{
    __shared__ double s_row[GEN_ROWS][AMP_GPU_MAX_RANK];
    __shared__ double s_red[GEN_WARPS][GEN_ROWS][4];       /* AO-ADMM's residuals */
    __shared__ double s_sum[2][GEN_WARPS][GEN_ROWS][1];    /* HALS's sums, two slots */
    const unsigned R = p.R, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint64_t lo = rows * blockIdx.x / gridDim.x, hi = rows * (blockIdx.x + 1) / gridDim.x;
    const double *X = p.X;
    double rho = 0, t = 0, sc = 0;
    if (METHOD == AMP_METHOD_ADMM) {
        rho = *p.rho;
        t = p.l1 / rho;
        sc = rho / (rho + p.l2);
    }
    const double tol2 = p.tol * p.tol;
    /* HALS: which of s_sum's two slots the next column's sums take. They
     * alternate across the groups of rows too: a thread still reading the
     * last column's sums is past the barrier of the column before it. */
    unsigned turn = 0;
    for (uint64_t i0 = lo; i0 < hi; i0 += GEN_ROWS) {
        double m[GEN_ROWS][COLS], a[GEN_ROWS][COLS], u[GEN_ROWS][COLS];
        bool live[GEN_ROWS];
#pragma unroll
        for (int r = 0; r < GEN_ROWS; r++) {
            const uint64_t i = i0 + r;
            live[r] = i < hi;
#pragma unroll
            for (int c = 0; c < COLS; c++) {
                const unsigned j = tid + c * GEN_THREADS;
                const bool ld = live[r] && j < R;
                const double cs = ld && p.scale ? p.scale[j] : 1.0;
                m[r][c] = ld ? M[i * R + j] : 0.0;
                a[r][c] = ld ? A[i * R + j] * cs : 0.0;
                u[r][c] = ld && METHOD == AMP_METHOD_ADMM ? U[i * R + j] * cs : 0.0;
            }
        }
        if (METHOD == AMP_METHOD_ADMM) {
            for (unsigned it = 0; it < p.inner; it++) {
                bool any = false;
#pragma unroll
                for (int r = 0; r < GEN_ROWS; r++)
                    any |= live[r];
                if (!any)   /* the same on every thread */
                    break;
#pragma unroll
                for (int r = 0; r < GEN_ROWS; r++)
#pragma unroll
                    for (int c = 0; c < COLS; c++) {
                        const unsigned j = tid + c * GEN_THREADS;
                        if (j < R)
                            s_row[r][j] = m[r][c] + rho * (a[r][c] + u[r][c]);
                    }
                __syncthreads();
                double at[GEN_ROWS][COLS];
                generic_product<COLS>(s_row, X, R, tid, at);
                __syncthreads();   /* read before the next iteration's t lands */
                /* This thread's part of each row's |A - At|^2,
                 * |A - A_before|^2, |A|^2 and |U|^2. */
                double sums[GEN_ROWS][4];
#pragma unroll
                for (int r = 0; r < GEN_ROWS; r++) {
#pragma unroll
                    for (int q = 0; q < 4; q++)
                        sums[r][q] = 0;
                    if (!live[r])
                        continue;
#pragma unroll
                    for (int c = 0; c < COLS; c++) {
                        const unsigned j = tid + c * GEN_THREADS;
                        if (j >= R)
                            continue;
                        const double old = a[r][c];
                        const double v = prox(at[r][c] - u[r][c], t, sc, p.nonneg);
                        a[r][c] = v;
                        u[r][c] += v - at[r][c];
                        if (p.tol > 0) {
                            sums[r][0] += (v - at[r][c]) * (v - at[r][c]);
                            sums[r][1] += (v - old) * (v - old);
                            sums[r][2] += v * v;
                            sums[r][3] += u[r][c] * u[r][c];
                        }
                    }
                }
                if (p.tol > 0) {
                    /* s_red is written again only past the next
                     * iteration's two barriers. */
                    block_sums<4>(sums, s_red, warp, lane);
#pragma unroll
                    for (int r = 0; r < GEN_ROWS; r++)
                        if (live[r] && sums[r][0] <= tol2 * sums[r][2] &&
                            sums[r][1] <= tol2 * sums[r][3])
                            live[r] = false;
                }
            }
        } else if (METHOD == AMP_METHOD_MU) {
#pragma unroll
            for (int r = 0; r < GEN_ROWS; r++)
#pragma unroll
                for (int c = 0; c < COLS; c++) {
                    const unsigned j = tid + c * GEN_THREADS;
                    if (j < R)
                        s_row[r][j] = a[r][c];
                }
            __syncthreads();
            double av[GEN_ROWS][COLS];
            generic_product<COLS>(s_row, X, R, tid, av);
            __syncthreads();   /* read before the next rows land */
#pragma unroll
            for (int r = 0; r < GEN_ROWS; r++)
#pragma unroll
                for (int c = 0; c < COLS; c++)
                    a[r][c] = mu_entry(a[r][c], m[r][c], av[r][c], p.l1, p.l2);
        } else {   /* HALS */
            /* Column k = kc GEN_THREADS + kk, owned by thread kk as its
             * column kc (kc unrolled, so a[.][kc] stays a register). */
#pragma unroll
            for (int kc = 0; kc < COLS; kc++)
                for (unsigned kk = 0; kk < GEN_THREADS; kk++) {
                    const unsigned k = kc * GEN_THREADS + kk;
                    if (k >= R)
                        break;
                    const double *vk = X + (size_t)k * R;   /* V's row k = column k */
                    double s[GEN_ROWS][1];
#pragma unroll
                    for (int r = 0; r < GEN_ROWS; r++)
                        s[r][0] = 0;
#pragma unroll
                    for (int c = 0; c < COLS; c++) {
                        const unsigned j = tid + c * GEN_THREADS;
                        const double v = j < R ? __ldg(vk + j) : 0.0;
#pragma unroll
                        for (int r = 0; r < GEN_ROWS; r++)
                            s[r][0] = fma(a[r][c], v, s[r][0]);
                    }
                    block_sums<1>(s, s_sum[turn & 1], warp, lane);
                    turn++;
                    if (tid == kk) {
                        const double vkk = __ldg(vk + k);
#pragma unroll
                        for (int r = 0; r < GEN_ROWS; r++)
                            a[r][kc] = hals_entry(m[r][kc], s[r][0], a[r][kc], vkk, p.l1,
                                                  p.l2, p.nonneg);
                    }
                }
        }
#pragma unroll
        for (int r = 0; r < GEN_ROWS; r++) {
            const uint64_t i = i0 + r;
#pragma unroll
            for (int c = 0; c < COLS; c++) {
                const unsigned j = tid + c * GEN_THREADS;
                if (i < hi && j < R) {
                    A[i * R + j] = a[r][c];
                    if (METHOD == AMP_METHOD_ADMM)
                        U[i * R + j] = u[r][c];
                }
            }
        }
    }
}

/* ---- AO-ADMM's rho and V + rho I ---------------------------------------- */

/* One block: rho = trace(V) / R, summed by one thread in the CPU's order
 * (1 where the trace is not positive and finite), W = V + rho I. */
__global__ void admm_shift_kernel(const double *V, unsigned R, double *rho_out, double *W)
{
    __shared__ double s_rho;
    if (threadIdx.x == 0) {
        double tr = 0;
        for (unsigned r = 0; r < R; r++)
            tr += V[(size_t)r * R + r];
        const double rho = tr > 0 && isfinite(tr) ? tr / R : 1;
        s_rho = rho;
        *rho_out = rho;
    }
    __syncthreads();
    const double rho = s_rho;
    for (unsigned k = threadIdx.x; k < R * R; k += blockDim.x)
        W[k] = k / R == k % R ? V[k] + rho : V[k];
}

/* ---- launchers ------------------------------------------------------------ */

extern "C" cudaError_t amp_gpu_admm_shift(const double *V, unsigned R, double *rho, double *W,
                                          cudaStream_t s)
{
    if (R < 1 || R > AMP_GPU_MAX_RANK || V == NULL || rho == NULL || W == NULL)
        return cudaErrorInvalidValue;
    admm_shift_kernel<<<1, 256, 0, s>>>(V, R, rho, W);
    return cudaGetLastError();
}

/* The kernel over one wave of blocks (amp_gpu_wave). */
template <typename K>
static cudaError_t launch_one(K kernel, int threads, int sms, uint64_t rows, uint64_t per_block,
                              const upd_params &p, const double *M, double *A, double *U,
                              cudaStream_t s)
{
    unsigned blocks = 0;
    cudaError_t e = amp_gpu_wave(kernel, threads, sms, rows, per_block, &blocks);
    if (e != cudaSuccess)
        return e;
    kernel<<<blocks, threads, 0, s>>>(p, M, A, U, rows);
    return cudaGetLastError();
}

template <int METHOD>
static cudaError_t launch(const upd_params &p, int fused, int sms, const double *M, double *A,
                          double *U, uint64_t rows, cudaStream_t s)
{
    if (fused && METHOD == AMP_METHOD_HALS) {
        hals_tile_params h;
        h.R = p.R;
        h.nonneg = p.nonneg;
        h.l1 = p.l1;
        h.l2 = p.l2;
        h.V = p.X;
        h.scale = p.scale;
        return amp_gpu_hals_tiles(&h, M, A, rows, sms, s);
    }
    if (fused)
        return launch_one(update_fused_kernel<METHOD>, UPD_WARPS * 32, sms, rows,
                          (uint64_t)UPD_WARPS * fused_rows<METHOD>::n, p, M, A, U, s);
    if (p.R <= GEN_THREADS)
        return launch_one(update_generic_kernel<METHOD, 1>, GEN_THREADS, sms, rows, GEN_ROWS, p,
                          M, A, U, s);
    if (p.R <= 2 * GEN_THREADS)
        return launch_one(update_generic_kernel<METHOD, 2>, GEN_THREADS, sms, rows, GEN_ROWS, p,
                          M, A, U, s);
    return launch_one(update_generic_kernel<METHOD, 4>, GEN_THREADS, sms, rows, GEN_ROWS, p, M,
                      A, U, s);
}

extern "C" cudaError_t amp_gpu_update_rows(const amp_gpu_update *u, const double *M, double *A,
                                           double *U, uint64_t rows, cudaStream_t s)
{
    if (u == NULL || u->rank < 1 || u->rank > AMP_GPU_MAX_RANK)
        return cudaErrorInvalidValue;
    const int admm = u->method == AMP_METHOD_ADMM;
    if (u->method != AMP_METHOD_ADMM && u->method != AMP_METHOD_MU &&
        u->method != AMP_METHOD_HALS)
        return cudaErrorInvalidValue;
    if (u->rule.constraint != AMP_CONSTRAINT_NONE && u->rule.constraint != AMP_CONSTRAINT_NONNEG)
        return cudaErrorInvalidValue;
    if (admm ? u->P == NULL || u->rho == NULL || U == NULL : u->V == NULL)
        return cudaErrorInvalidValue;
    if (rows == 0)
        return cudaSuccess;
    if (M == NULL || A == NULL)
        return cudaErrorInvalidValue;
    if (admm && u->inner == 0) {   /* no kernel to read them at the scales */
        if (u->scale == NULL)
            return cudaSuccess;
        cudaError_t e = amp_gpu_scale_columns(A, rows, u->rank, u->scale, s);
        return e == cudaSuccess ? amp_gpu_scale_columns(U, rows, u->rank, u->scale, s) : e;
    }
    int sms = u->sm_count;
    if (sms < 1) {
        int dev = 0;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (e != cudaSuccess)
            return e;
        if (sms < 1)
            sms = 1;
    }
    upd_params p;
    p.R = u->rank;
    p.inner = u->inner;
    p.nonneg = u->rule.constraint == AMP_CONSTRAINT_NONNEG;
    p.l1 = u->rule.l1;
    p.l2 = u->rule.l2;
    p.tol = u->admm_tol;
    p.X = admm ? u->P : u->V;
    p.rho = u->rho;
    p.scale = u->scale;
    const int fused = u->rank <= AMP_GPU_UPDATE_FUSED_RANK && !u->generic;
    if (u->method == AMP_METHOD_ADMM)
        return launch<AMP_METHOD_ADMM>(p, fused, sms, M, A, U, rows, s);
    if (u->method == AMP_METHOD_MU)
        return launch<AMP_METHOD_MU>(p, fused, sms, M, A, U, rows, s);
    return launch<AMP_METHOD_HALS>(p, fused, sms, M, A, U, rows, s);
}

/* ---- the host-array entry point, for tests -------------------------------- */

/* P = (V + rho I)^-1 and rho on the device, as the integration is to form
 * them: the shift, potrf and potri on W (lower, column-major: V is
 * symmetric, so either order), W mirrored into P. info (device, 2 ints)
 * gets potrf's and potri's statuses; work holds lwork doubles. */
static amp_status admm_prepare(cusolverDnHandle_t h, const double *V, unsigned R, double *rho,
                               double *P, double *work, int lwork, int *info, cudaStream_t s,
                               amp_error *err)
{
    amp_status rc = AMP_OK;
    CUDA_TRY_GOTO(amp_gpu_admm_shift(V, R, rho, P, s), err, rc, done);
    CUSOLVER_TRY_GOTO(cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, (int)R, P, (int)R, work, lwork,
                                       info), err, rc, done);
    CUSOLVER_TRY_GOTO(cusolverDnDpotri(h, CUBLAS_FILL_MODE_LOWER, (int)R, P, (int)R, work, lwork,
                                       info + 1), err, rc, done);
    CUDA_TRY_GOTO(amp_gpu_symmetrize(P, R, s), err, rc, done);
done:
    return rc;
}

/* Whether n bytes are all 0xff (the guard rows' fill). */
static int untouched(const unsigned char *b, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (b[k] != 0xff)
            return 0;
    return 1;
}

extern "C" amp_status amp_gpu_update_rows_host(int device, const amp_gpu_update_opts *h,
                                               const double *V, const double *M, double *A,
                                               double *U, uint64_t rows, double *rho,
                                               double *P, amp_error *err)
{
    amp_status rc = AMP_OK;
    const unsigned R = h->rank;
    const int admm = h->method == AMP_METHOD_ADMM;
    double *dV = NULL, *dP = NULL, *drho = NULL, *dM = NULL, *dA = NULL, *dU = NULL;
    double *work = NULL, *dscale = NULL;
    int *dinfo = NULL, lw1 = 0, lw2 = 0, lwork = 0, info[2] = {0, 0}, sms = 0;
    cusolverDnHandle_t solver = NULL;
    unsigned char *guard = NULL;
    amp_gpu_update u;
    if (R < 1 || R > AMP_GPU_MAX_RANK)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the GPU update takes rank 1 to %u, not %u",
                        AMP_GPU_MAX_RANK, R);
    if (h->method != AMP_METHOD_ADMM && h->method != AMP_METHOD_MU &&
        h->method != AMP_METHOD_HALS)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the GPU update runs ao-admm, mu or hals, not %s",
                        amp_method_name(h->method));
    if (admm && U == NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "ao-admm updates its dual U: U is NULL");
    const size_t rr = (size_t)R * R * sizeof(double), row = (size_t)R * sizeof(double);
    const size_t n = (size_t)rows * row, whole = n + 2 * row;
    CUDA_TRY(cudaSetDevice(device), err);
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), err);
    guard = (unsigned char *)malloc(2 * row);
    if (guard == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    CUDA_TRY_GOTO(cudaMalloc((void **)&dV, rr), err, rc, done);
    CUDA_TRY_GOTO(cudaMalloc((void **)&dP, rr), err, rc, done);
    CUDA_TRY_GOTO(cudaMalloc((void **)&drho, sizeof(double)), err, rc, done);
    /* One guard row before and after each of M, A and U, filled with
     * 0xff bytes (NaN): the kernel must leave A's and U's as they are. */
    CUDA_TRY_GOTO(cudaMalloc((void **)&dM, whole), err, rc, done);
    CUDA_TRY_GOTO(cudaMalloc((void **)&dA, whole), err, rc, done);
    CUDA_TRY_GOTO(cudaMalloc((void **)&dU, whole), err, rc, done);
    CUDA_TRY_GOTO(cudaMemset(dM, 0xff, whole), err, rc, done);
    CUDA_TRY_GOTO(cudaMemset(dA, 0xff, whole), err, rc, done);
    CUDA_TRY_GOTO(cudaMemset(dU, 0xff, whole), err, rc, done);
    CUDA_TRY_GOTO(cudaMemset(dP, 0xff, rr), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpy(dV, V, rr, cudaMemcpyHostToDevice), err, rc, done);
    if (h->scale) {
        CUDA_TRY_GOTO(cudaMalloc((void **)&dscale, row), err, rc, done);
        CUDA_TRY_GOTO(cudaMemcpy(dscale, h->scale, row, cudaMemcpyHostToDevice), err, rc, done);
    }
    CUDA_TRY_GOTO(cudaMemcpy(dM + R, M, n, cudaMemcpyHostToDevice), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpy(dA + R, A, n, cudaMemcpyHostToDevice), err, rc, done);
    if (admm)
        CUDA_TRY_GOTO(cudaMemcpy(dU + R, U, n, cudaMemcpyHostToDevice), err, rc, done);
    if (admm) {
        CUSOLVER_TRY_GOTO(cusolverDnCreate(&solver), err, rc, done);
        CUSOLVER_TRY_GOTO(cusolverDnDpotrf_bufferSize(solver, CUBLAS_FILL_MODE_LOWER, (int)R, dP,
                                                      (int)R, &lw1), err, rc, done);
        CUSOLVER_TRY_GOTO(cusolverDnDpotri_bufferSize(solver, CUBLAS_FILL_MODE_LOWER, (int)R, dP,
                                                      (int)R, &lw2), err, rc, done);
        lwork = lw1 > lw2 ? lw1 : lw2;
        CUDA_TRY_GOTO(cudaMalloc((void **)&work, ((size_t)lwork + 1) * sizeof(double)), err, rc,
                      done);
        CUDA_TRY_GOTO(cudaMalloc((void **)&dinfo, 2 * sizeof(int)), err, rc, done);
        AMP_CHECK_GOTO(admm_prepare(solver, dV, R, drho, dP, work, lwork, dinfo, NULL, err), rc,
                       done);
        CUDA_TRY_GOTO(cudaMemcpy(info, dinfo, 2 * sizeof(int), cudaMemcpyDeviceToHost), err, rc,
                      done);
        if (info[0] != 0 || info[1] != 0)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_INTERNAL, "V + rho I is not positive definite "
                           "(potrf info %d, potri info %d)", info[0], info[1]);
    }
    memset(&u, 0, sizeof u);
    u.method = h->method;
    u.rule = h->rule;
    u.rank = R;
    u.inner = h->inner;
    u.admm_tol = h->admm_tol;
    u.V = dV;
    u.P = dP;
    u.rho = drho;
    u.sm_count = sms;
    u.generic = h->generic;
    u.scale = dscale;
    CUDA_TRY_GOTO(amp_gpu_update_rows(&u, dM + R, dA + R, admm ? dU + R : NULL, rows, NULL), err,
                  rc, done);
    CUDA_TRY_GOTO(cudaDeviceSynchronize(), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpy(A, dA + R, n, cudaMemcpyDeviceToHost), err, rc, done);
    if (admm)
        CUDA_TRY_GOTO(cudaMemcpy(U, dU + R, n, cudaMemcpyDeviceToHost), err, rc, done);
    for (int k = 0; k < 2 + 2 * admm; k++) {
        const double *src = (k < 2 ? dA : dU) + (k % 2 ? R + (size_t)rows * R : 0);
        CUDA_TRY_GOTO(cudaMemcpy(guard, src, row, cudaMemcpyDeviceToHost), err, rc, done);
        if (!untouched(guard, row))
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_INTERNAL, "the update wrote the row %s %s's",
                           k % 2 ? "after" : "before", k < 2 ? "A" : "U");
    }
    if (admm && rho)
        CUDA_TRY_GOTO(cudaMemcpy(rho, drho, sizeof(double), cudaMemcpyDeviceToHost), err, rc,
                      done);
    if (admm && P)
        CUDA_TRY_GOTO(cudaMemcpy(P, dP, rr, cudaMemcpyDeviceToHost), err, rc, done);
done:
    if (solver)
        cusolverDnDestroy(solver);
    cudaFree(dV);
    cudaFree(dP);
    cudaFree(drho);
    cudaFree(dM);
    cudaFree(dA);
    cudaFree(dU);
    cudaFree(work);
    cudaFree(dinfo);
    cudaFree(dscale);
    free(guard);
    return rc;
}
