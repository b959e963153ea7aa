/* The solve of a CP-ALS mode fused with the column statistics that follow
 * it, for ranks up to AMP_GPU_SOLVE_MAX_RANK (32, a warp's lanes): A = M P
 * (P = V^-1 or its pseudo-inverse, R x R, with the factors' column scales
 * folded in: als_kernels.cu)
 * and, per block of rows, each column's sum of squares, max |a| and sum
 * of a .* m, in one pass. The separate path (cublasDgemm, then
 * column_stats reading A and M again, and in f32 a conversion of M to f64
 * first) moves 4 (f64) or 5.5 (f32) row-sized arrays; this one reads M
 * once and writes A once.
 *
 * Thread mapping: a block of 8 warps owns a contiguous range of rows
 * (as column_stats does: amp_gpu_stats_blocks); warp w takes rows w,
 * w + 8, ... of it, ROWS at a time. Lane j owns column j: it keeps column
 * j of P in registers (32 doubles, zero past R), loads entry j of each of
 * its rows (coalesced), and stages the rows in its warp's shared memory,
 * from which the whole row is read back two entries at a time as a
 * broadcast; a_j = sum_k m_k P[k][j] in f64. Lanes at or past R only
 * load. The statistics stay in registers and are combined across the 8
 * warps in shared memory at the end, in a fixed order, so every run gives
 * the same bits.
 *
 * Bytes per row: 8 R read (4 R when M is f32) and 8 R written (12 R
 * with the f32 copy of A that an f32 run's MTTKRP reads). FLOPs per
 * row: 2 x 32 R (the sum runs over 32 entries whatever R is). At rank 32
 * the shared-memory reads (17 per row per warp) and the stream of M and A
 * take about the same time on an H100/H200 SM, so the kernel runs near
 * the memory bound. */
#include <config.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "als_kernels.h"
#include "gpu_internal.h"

enum { SOLVE_WARPS = 8, SOLVE_ROWS = 4 };
static_assert(AMP_GPU_SOLVE_MAX_RANK <= 32, "one lane a column, P's column in 32 registers");

template <typename mreal>
__global__ void __launch_bounds__(256, 2)
    solve_stats_kernel(const mreal *M, const double *P, uint64_t rows, unsigned R, double *A,
                       float *A32, double *partial)
{
    __shared__ double2 s_row[SOLVE_WARPS][SOLVE_ROWS][16];
    __shared__ double s_sq[SOLVE_WARPS][32], s_mx[SOLVE_WARPS][32], s_in[SOLVE_WARPS][32];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool mine = lane < R;
    const uint64_t lo = rows * blockIdx.x / gridDim.x, hi = rows * (blockIdx.x + 1) / gridDim.x;
    double p[32];
#pragma unroll
    for (int k = 0; k < 32; k++)
        p[k] = (unsigned)k < R && mine ? P[(size_t)k * R + lane] : 0.0;
    double sq = 0, mx = 0, in = 0;
    double *srow = (double *)s_row[warp];
    const uint64_t step = SOLVE_WARPS * SOLVE_ROWS;
    /* The next group's rows are loaded before this group is computed, so
     * the memory stays busy while the warp does the arithmetic (it was
     * idle then otherwise: bench/RESULTS.md, "amped-run on one GPU", the
     * fused solve). */
    mreal next[SOLVE_ROWS];
#pragma unroll
    for (int u = 0; u < SOLVE_ROWS; u++) {
        const uint64_t i = lo + warp * SOLVE_ROWS + u;
        next[u] = i < hi && mine ? M[i * R + lane] : (mreal)0;
    }
    for (uint64_t i0 = lo + warp * SOLVE_ROWS; i0 < hi; i0 += step) {
        double m[SOLVE_ROWS];
#pragma unroll
        for (int u = 0; u < SOLVE_ROWS; u++) {
            m[u] = (double)next[u];
            srow[u * 32 + lane] = m[u];
            const uint64_t i = i0 + step + u;
            next[u] = i < hi && mine ? M[i * R + lane] : (mreal)0;
        }
        __syncwarp();
        double a[SOLVE_ROWS];
#pragma unroll
        for (int u = 0; u < SOLVE_ROWS; u++)
            a[u] = 0;
#pragma unroll
        for (int k = 0; k < 16; k++)
#pragma unroll
            for (int u = 0; u < SOLVE_ROWS; u++) {
                const double2 mm = s_row[warp][u][k];
                a[u] = fma(mm.x, p[2 * k], a[u]);
                a[u] = fma(mm.y, p[2 * k + 1], a[u]);
            }
#pragma unroll
        for (int u = 0; u < SOLVE_ROWS; u++) {
            const uint64_t i = i0 + u;
            if (i < hi && mine) {
                A[i * R + lane] = a[u];
                if (A32)
                    A32[i * R + lane] = (float)a[u];
                sq += a[u] * a[u];
                mx = fmax(mx, fabs(a[u]));
                in += a[u] * m[u];
            }
        }
        __syncwarp();   /* the rows are read before the next ones land */
    }
    s_sq[warp][lane] = sq;
    s_mx[warp][lane] = mx;
    s_in[warp][lane] = in;
    __syncthreads();
    if (warp == 0 && mine) {
        for (int y = 1; y < SOLVE_WARPS; y++) {
            sq += s_sq[y][lane];
            mx = fmax(mx, s_mx[y][lane]);
            in += s_in[y][lane];
        }
        double *out = partial + (size_t)blockIdx.x * 3 * R;
        out[lane] = sq;
        out[R + lane] = mx;
        out[2 * R + lane] = in;
    }
}

extern "C" cudaError_t amp_gpu_solve_stats(const void *M, int m_f32, const double *P,
                                           uint64_t rows, unsigned R, unsigned blocks,
                                           double *A, float *A32, double *partial,
                                           cudaStream_t s)
{
    if (R < 1 || R > AMP_GPU_SOLVE_MAX_RANK || blocks < 1)
        return cudaErrorInvalidValue;
    if (m_f32)
        solve_stats_kernel<float><<<blocks, 256, 0, s>>>((const float *)M, P, rows, R, A, A32,
                                                         partial);
    else
        solve_stats_kernel<double><<<blocks, 256, 0, s>>>((const double *)M, P, rows, R, A,
                                                          A32, partial);
    return cudaGetLastError();
}

extern "C" amp_status amp_gpu_solve_stats_host(int device, const double *M, int m_f32,
                                               const double *P, uint64_t rows, unsigned R,
                                               double *A, float *A32, double *stats,
                                               amp_error *err)
{
    amp_status rc = AMP_OK;
    void *dM = NULL;
    double *dP = NULL, *dA = NULL, *partial = NULL, *totals = NULL;
    float *M32 = NULL, *dA32 = NULL;
    int sms = 0;
    if (R < 1 || R > AMP_GPU_SOLVE_MAX_RANK)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the fused solve takes rank 1 to %d, not %u",
                        AMP_GPU_SOLVE_MAX_RANK, R);
    const size_t n = (size_t)rows * R, msize = m_f32 ? 4 : 8;
    CUDA_TRY(cudaSetDevice(device), err);
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), err);
    const unsigned blocks = amp_gpu_stats_blocks(rows, sms);
    if (m_f32) {
        M32 = (float *)malloc(n * sizeof *M32 + 1);
        if (M32 == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < n; k++)
            M32[k] = (float)M[k];
    }
    CUDA_TRY_GOTO(cudaMalloc(&dM, n * msize + 8), err, rc, done);
    CUDA_TRY_GOTO(cudaMalloc((void **)&dP, (size_t)R * R * 8), err, rc, done);
    CUDA_TRY_GOTO(cudaMalloc((void **)&dA, n * 8 + 8), err, rc, done);
    if (A32)
        CUDA_TRY_GOTO(cudaMalloc((void **)&dA32, n * 4 + 8), err, rc, done);
    CUDA_TRY_GOTO(cudaMalloc((void **)&partial, (size_t)blocks * 3 * R * 8), err, rc, done);
    CUDA_TRY_GOTO(cudaMalloc((void **)&totals, (size_t)3 * R * 8), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpy(dM, m_f32 ? (const void *)M32 : (const void *)M, n * msize,
                             cudaMemcpyHostToDevice), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpy(dP, P, (size_t)R * R * 8, cudaMemcpyHostToDevice), err, rc, done);
    /* NaN first: a row the kernel skipped shows. */
    CUDA_TRY_GOTO(cudaMemset(dA, 0xff, n * 8), err, rc, done);
    if (A32)
        CUDA_TRY_GOTO(cudaMemset(dA32, 0xff, n * 4), err, rc, done);
    CUDA_TRY_GOTO(amp_gpu_solve_stats(dM, m_f32, dP, rows, R, blocks, dA, dA32, partial, NULL),
                  err, rc, done);
    CUDA_TRY_GOTO(amp_gpu_column_totals(partial, blocks, R, totals, NULL), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpy(A, dA, n * 8, cudaMemcpyDeviceToHost), err, rc, done);
    if (A32)
        CUDA_TRY_GOTO(cudaMemcpy(A32, dA32, n * 4, cudaMemcpyDeviceToHost), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpy(stats, totals, (size_t)3 * R * 8, cudaMemcpyDeviceToHost), err,
                  rc, done);
done:
    cudaFree(dM);
    cudaFree(dP);
    cudaFree(dA);
    cudaFree(dA32);
    cudaFree(partial);
    cudaFree(totals);
    free(M32);
    return rc;
}
