/* HALS's update of a factor's rows on the GPU at rank up to 32
 * (AMP_GPU_UPDATE_FUSED_RANK): a thread a row. The method's columns
 * depend on each other within a row (column c sees columns 0 to c - 1
 * already updated), so a row is a chain of R steps; with a warp a row
 * (lane c owning column c) every step ran on one lane while 31 waited,
 * and the f64 pipes and the shuffle latency, not the bytes, set the time.
 * A thread a row runs the chain on each of 32 rows at once, and the rest
 * of every step (R multiply-adds) is independent work the scheduler
 * overlaps.
 *
 * Per row, with g = m - a V kept for the columns not yet updated
 * (g_c = m_c - (s_c - a_c V_cc) + a_c V_cc, s the CPU's sum):
 *   g = m - a V                        R^2 multiply-adds
 *   for c < R:  num = g_c + a_c V_cc,  y = rule(num) / (V_cc + l2),
 *               g_q -= (y - a_c) V_cq for q > c      R (R - 1) / 2 in all
 * the CPU's hals_rows (run/cpu/update.c) up to the order of the sums.
 *
 * Thread mapping: a block of HT_WARPS warps owns a contiguous range of
 * rows (one wave of blocks, as the other update kernels); each warp
 * takes tiles of 32 consecutive rows, one row a lane. A tile's rows of A
 * and M are one contiguous stretch of 32 R doubles, read coalesced into
 * the warp's shared tile and read back a row a lane (rows padded to RP + 1
 * doubles, so the 32 lanes hit distinct banks); A goes back the same way.
 * V (zero past R), 1 / (V_cc + l2) and the column scales live in shared
 * memory and are read as broadcasts with offsets fixed at compile time
 * (the loops over RP columns are unrolled: a and g stay in registers).
 *
 * Bytes per row (f64): A read and written, M read: 24 R, the floor of
 * any HALS. FLOPs per row: 2 R^2 + R (R - 1) + ~6 R (an FMA counts 2).
 * At R = 32, 3.2 kFLOP against 768 bytes: 4.2 FLOP/byte, under the f64
 * ridge of an H100 or H200 (about 14), so the bytes bound it once the
 * chain's latency is hidden by the 32 rows of a warp and the warps of an
 * SM. */
#include <config.h>

#include <cuda_runtime.h>
#include <stdint.h>

#include "update_internal.h"

enum { HT_WARPS = 4 };

template <int RP>
__global__ void __launch_bounds__(HT_WARPS * 32)
    hals_tile_kernel(hals_tile_params p, const double *M, double *A, uint64_t rows)
{
    __shared__ double s_v[RP][RP];
    __shared__ double s_inv[RP], s_scale[RP];
    __shared__ double s_tile[HT_WARPS][32][RP + 1];
    const unsigned R = p.R, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (unsigned k = threadIdx.x; k < RP * RP; k += blockDim.x) {
        const unsigned i = k / RP, j = k % RP;
        s_v[i][j] = i < R && j < R ? p.V[(size_t)i * R + j] : 0.0;
    }
    for (unsigned k = threadIdx.x; k < RP; k += blockDim.x) {
        const double den = k < R ? p.V[(size_t)k * R + k] + p.l2 : 0.0;
        /* 0 where the denominator is not positive: the CPU's y = 0 */
        s_inv[k] = den > 0 ? 1 / den : 0.0;
        s_scale[k] = k < R && p.scale ? p.scale[k] : 1.0;
    }
    __syncthreads();
    const uint64_t lo = rows * blockIdx.x / gridDim.x, hi = rows * (blockIdx.x + 1) / gridDim.x;
    double(*tile)[RP + 1] = s_tile[warp];
    /* A lane's element k of a tile, k = lane + 32 it: row k / R, column
     * k % R, stepped without a division (R <= 32). */
    const unsigned row0 = lane / R, col0 = lane % R, drow = 32 / R, dcol = 32 % R;
    for (uint64_t i0 = lo + (uint64_t)warp * 32; i0 < hi; i0 += HT_WARPS * 32) {
        const unsigned n = hi - i0 < 32 ? (unsigned)(hi - i0) : 32, total = n * R;
        const double *Mt = M + i0 * R;
        double *At = A + i0 * R;
        /* Both tiles' loads in flight at once, then through shared memory. */
        double va[RP], vm[RP];
        {
            unsigned row = row0, col = col0;
#pragma unroll
            for (int it = 0; it < RP; it++) {
                const unsigned k = lane + 32 * it;
                va[it] = k < total ? At[k] * s_scale[col] : 0.0;
                vm[it] = k < total ? Mt[k] : 0.0;
                row += drow;
                col += dcol;
                if (col >= R) {
                    col -= R;
                    row++;
                }
            }
        }
        double a[RP], g[RP];
#pragma unroll
        for (int pass = 0; pass < 2; pass++) {
            unsigned row = row0, col = col0;
#pragma unroll
            for (int it = 0; it < RP; it++) {
                if (lane + 32 * it < total)
                    tile[row][col] = pass == 0 ? va[it] : vm[it];
                row += drow;
                col += dcol;
                if (col >= R) {
                    col -= R;
                    row++;
                }
            }
            __syncwarp();
#pragma unroll
            for (int c = 0; c < RP; c++) {
                const double x = (unsigned)c < R && lane < n ? tile[lane][c] : 0.0;
                if (pass == 0)
                    a[c] = x;
                else
                    g[c] = x;
            }
            __syncwarp();   /* read before the next tile lands */
        }
        /* g = m - a V */
#pragma unroll
        for (int k = 0; k < RP; k++)
            if ((unsigned)k < R)
#pragma unroll
                for (int q = 0; q < RP; q++)
                    g[q] = fma(-a[k], s_v[k][q], g[q]);
        /* Column after column; columns at or past R are zero in V and
         * in a, and stay so. */
#pragma unroll
        for (int c = 0; c < RP; c++) {
            if ((unsigned)c >= R)
                break;
            const double num = g[c] + a[c] * s_v[c][c];
            double y;
            if (p.nonneg) {
                y = (num - p.l1) * s_inv[c];
                y = y > AMP_UPDATE_EPS ? y : AMP_UPDATE_EPS;
            } else {
                const double t = num > p.l1 ? num - p.l1 : num < -p.l1 ? num + p.l1 : 0.0;
                y = t * s_inv[c];
            }
            const double d = y - a[c];
            a[c] = y;
#pragma unroll
            for (int q = c + 1; q < RP; q++)
                g[q] = fma(-d, s_v[c][q], g[q]);
        }
#pragma unroll
        for (int c = 0; c < RP; c++)
            if ((unsigned)c < R)
                tile[lane][c] = a[c];
        __syncwarp();
        {
            unsigned row = row0, col = col0;
#pragma unroll
            for (int it = 0; it < RP; it++) {
                const unsigned k = lane + 32 * it;
                if (k < total)
                    At[k] = tile[row][col];
                row += drow;
                col += dcol;
                if (col >= R) {
                    col -= R;
                    row++;
                }
            }
        }
        __syncwarp();   /* read before the next tile lands */
    }
}

template <int RP>
static cudaError_t launch(const hals_tile_params &p, const double *M, double *A, uint64_t rows,
                          int sms, cudaStream_t s)
{
    unsigned blocks = 0;
    cudaError_t e = amp_gpu_wave(hals_tile_kernel<RP>, HT_WARPS * 32, sms, rows, HT_WARPS * 32,
                                 &blocks);
    if (e != cudaSuccess)
        return e;
    hals_tile_kernel<RP><<<blocks, HT_WARPS * 32, 0, s>>>(p, M, A, rows);
    return cudaGetLastError();
}

cudaError_t amp_gpu_hals_tiles(const hals_tile_params *p, const double *M, double *A,
                               uint64_t rows, int sms, cudaStream_t s)
{
    if (p->R < 1 || p->R > AMP_GPU_UPDATE_FUSED_RANK)
        return cudaErrorInvalidValue;
    if (rows == 0)
        return cudaSuccess;
    if (p->R <= 8)
        return launch<8>(*p, M, A, rows, sms, s);
    if (p->R <= 16)
        return launch<16>(*p, M, A, rows, sms, s);
    return launch<32>(*p, M, A, rows, sms, s);
}
