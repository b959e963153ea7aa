/* The small kernels of CP-ALS on the GPU: everything around the MTTKRP
 * and the cuBLAS/cuSOLVER calls (als_gpu.cu drives them).
 *
 * Factor matrices are rows x R, row-major, f64 (the f32 MTTKRP reads an
 * f32 shadow written by scale_columns). R x R matrices are symmetric, so
 * row- and column-major are the same.
 *
 * Bytes: column_stats reads A and M once (16 R bytes a row in f64);
 * scale_columns reads and writes A (16 R, plus 4 R for the f32 shadow);
 * to_f64 reads 4 R and writes 8 R. The R x R kernels are negligible for
 * any tensor worth a GPU. Every reduction is over a fixed split in a fixed
 * order, so these kernels give the same bits on every run. */
#include <config.h>

#include <cuda_runtime.h>
#include <float.h>
#include <stdint.h>

#include "als_kernels.h"

/* ---- column statistics: sum of squares, max |a|, sum of a .* m --------- */

/* Thread mapping: a block of 32 x 8 threads owns a fixed range of rows;
 * threadIdx.x walks columns 32 at a time (coalesced row segments),
 * threadIdx.y strides over the rows; the 8 partials are combined in shared
 * memory and written to the block's slot, which amp_gpu_column_totals reads in
 * block order. */
__global__ void column_stats_kernel(const double *A, const double *M, uint64_t rows, unsigned R,
                                    double *partial)
{
    __shared__ double s_sq[8][32], s_mx[8][32], s_in[8][32];
    const uint64_t lo = rows * blockIdx.x / gridDim.x, hi = rows * (blockIdx.x + 1) / gridDim.x;
    double *out = partial + (size_t)blockIdx.x * 3 * R;
    for (unsigned r0 = 0; r0 < R; r0 += 32) {
        const unsigned r = r0 + threadIdx.x;
        double sq = 0, mx = 0, in = 0;
        if (r < R)
            for (uint64_t i = lo + threadIdx.y; i < hi; i += 8) {
                double a = A[i * R + r];
                sq += a * a;
                mx = fmax(mx, fabs(a));
                in += a * M[i * R + r];
            }
        s_sq[threadIdx.y][threadIdx.x] = sq;
        s_mx[threadIdx.y][threadIdx.x] = mx;
        s_in[threadIdx.y][threadIdx.x] = in;
        __syncthreads();
        if (threadIdx.y == 0 && r < R) {
            for (int y = 1; y < 8; y++) {
                sq += s_sq[y][threadIdx.x];
                mx = fmax(mx, s_mx[y][threadIdx.x]);
                in += s_in[y][threadIdx.x];
            }
            out[r] = sq;
            out[R + r] = mx;
            out[2 * R + r] = in;
        }
        __syncthreads();
    }
}

/* One thread per column: the block partials summed in block order, into
 * totals laid out [sum of squares | sum of a .* m | max |a|] so that a
 * multi-GPU run sums the first 2R across GPUs in one call. */
__global__ void column_totals_kernel(const double *partial, unsigned blocks, unsigned R,
                                     double *totals)
{
    const unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R)
        return;
    double sq = 0, mx = 0, in = 0;
    for (unsigned b = 0; b < blocks; b++) {
        const double *p = partial + (size_t)b * 3 * R;
        sq += p[r];
        mx = fmax(mx, p[R + r]);
        in += p[2 * R + r];
    }
    totals[r] = sq;
    totals[R + r] = in;
    totals[2 * R + r] = mx;
}

__global__ void lambda_kernel(const double *totals, unsigned R, int first, double *lambda,
                              double *inv, double *inner)
{
    const unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R)
        return;
    /* As the CPU backend: 2-norm first, then the max-norm never below 1;
     * an all-zero column stays as it is. */
    double l = first ? sqrt(totals[r]) : fmax(totals[2 * R + r], 1.0);
    if (l == 0)
        l = 1;
    lambda[r] = l;
    inv[r] = 1 / l;
    inner[r] = totals[R + r];
}

__global__ void scale_columns_kernel(double *A, float *A32, uint64_t n, unsigned R,
                                     const double *inv)
{
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n;
         k += (uint64_t)gridDim.x * blockDim.x) {
        double a = A[k] * inv[k % R];
        A[k] = a;
        if (A32)
            A32[k] = (float)a;
    }
}

__global__ void to_f64_kernel(const float *src, double *dst, uint64_t n)
{
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n;
         k += (uint64_t)gridDim.x * blockDim.x)
        dst[k] = src[k];
}

__global__ void to_f32_kernel(const double *src, float *dst, uint64_t n)
{
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n;
         k += (uint64_t)gridDim.x * blockDim.x)
        dst[k] = (float)src[k];
}

/* ---- R x R ---------------------------------------------------------------- */

__global__ void hadamard_kernel(amp_gram_set gs, unsigned skip, unsigned R, double *V)
{
    for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k < R * R;
         k += gridDim.x * blockDim.x) {
        double h = 1;
        for (unsigned m = 0; m < gs.n; m++)
            if (m != skip)
                h *= gs.G[m][k];
        V[k] = h;
    }
}

/* G = the sum of count R x R matrices, in order. */
__global__ void sum_matrices_kernel(const double *parts, unsigned count, unsigned R, double *G)
{
    const size_t rr = (size_t)R * R;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < rr;
         k += (size_t)gridDim.x * blockDim.x) {
        double sum = 0;
        for (unsigned b = 0; b < count; b++)
            sum += parts[b * rr + k];
        G[k] = sum;
    }
}

/* The strict upper triangle (column-major) from the lower one. */
__global__ void symmetrize_kernel(double *X, unsigned R)
{
    for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k < R * R;
         k += gridDim.x * blockDim.x) {
        unsigned i = k % R, j = k / R;
        if (i < j)
            X[k] = X[(size_t)i * R + j];
    }
}

/* Qs = Q diag(1/w) over the eigenvalues above R eps max|w|, zero columns
 * for the rest (the pseudo-inverse, as the CPU backend cuts it). One
 * block. */
__global__ void pinv_scale_kernel(const double *Q, const double *w, unsigned R, double *Qs)
{
    __shared__ double s_max[256];
    double mx = 0;
    for (unsigned k = threadIdx.x; k < R; k += blockDim.x)
        mx = fmax(mx, fabs(w[k]));
    s_max[threadIdx.x] = mx;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s)
            s_max[threadIdx.x] = fmax(s_max[threadIdx.x], s_max[threadIdx.x + s]);
        __syncthreads();
    }
    const double cut = (double)R * DBL_EPSILON * s_max[0];
    for (unsigned k = threadIdx.x; k < R * R; k += blockDim.x) {
        double wk = w[k / R];
        Qs[k] = wk > cut ? Q[k] / wk : 0;
    }
}

/* out[0] = lambda^T (G_0 .* ... .* G_{N-1}) lambda, out[1] = sum(inner).
 * One block of 256 threads, a fixed-order tree. */
__global__ void fit_terms_kernel(amp_gram_set gs, unsigned R, const double *lambda,
                                 const double *inner, double *out)
{
    __shared__ double s_model[256], s_inner[256];
    double model = 0, in = 0;
    for (unsigned k = threadIdx.x; k < R * R; k += blockDim.x) {
        double h = lambda[k / R] * lambda[k % R];
        for (unsigned m = 0; m < gs.n; m++)
            h *= gs.G[m][k];
        model += h;
    }
    for (unsigned r = threadIdx.x; r < R; r += blockDim.x)
        in += inner[r];
    s_model[threadIdx.x] = model;
    s_inner[threadIdx.x] = in;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) {
            s_model[threadIdx.x] += s_model[threadIdx.x + s];
            s_inner[threadIdx.x] += s_inner[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = s_model[0];
        out[1] = s_inner[0];
    }
}

/* ---- launchers ------------------------------------------------------------ */

static unsigned stream_grid(uint64_t n)
{
    uint64_t g = (n + 255) / 256;
    return (unsigned)(g < 4096 ? (g > 0 ? g : 1) : 4096);
}

extern "C" unsigned amp_gpu_stats_blocks(uint64_t rows, int sm_count)
{
    uint64_t b = (uint64_t)sm_count * 4;
    uint64_t most = rows / 64 + 1;   /* at least ~64 rows a block */
    return (unsigned)(b < most ? b : most);
}

extern "C" cudaError_t amp_gpu_column_stats(const double *A, const double *M, uint64_t rows,
                                            unsigned R, unsigned blocks, double *partial,
                                            cudaStream_t s)
{
    column_stats_kernel<<<blocks, dim3(32, 8), 0, s>>>(A, M, rows, R, partial);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_column_totals(const double *partial, unsigned blocks, unsigned R,
                                             double *totals, cudaStream_t s)
{
    column_totals_kernel<<<(R + 127) / 128, 128, 0, s>>>(partial, blocks, R, totals);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_lambda(const double *totals, unsigned R, int first,
                                      double *lambda, double *inv, double *inner,
                                      cudaStream_t s)
{
    lambda_kernel<<<(R + 127) / 128, 128, 0, s>>>(totals, R, first, lambda, inv, inner);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_scale_columns(double *A, float *A32, uint64_t rows, unsigned R,
                                             const double *inv, cudaStream_t s)
{
    uint64_t n = rows * R;
    scale_columns_kernel<<<stream_grid(n), 256, 0, s>>>(A, A32, n, R, inv);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_to_f64(const float *src, double *dst, uint64_t n, cudaStream_t s)
{
    to_f64_kernel<<<stream_grid(n), 256, 0, s>>>(src, dst, n);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_to_f32(const double *src, float *dst, uint64_t n, cudaStream_t s)
{
    to_f32_kernel<<<stream_grid(n), 256, 0, s>>>(src, dst, n);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_hadamard(const amp_gram_set *gs, unsigned skip, unsigned R,
                                        double *V, cudaStream_t s)
{
    hadamard_kernel<<<stream_grid((uint64_t)R * R), 256, 0, s>>>(*gs, skip, R, V);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_sum_matrices(const double *parts, unsigned count, unsigned R,
                                            double *G, cudaStream_t s)
{
    sum_matrices_kernel<<<stream_grid((uint64_t)R * R), 256, 0, s>>>(parts, count, R, G);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_symmetrize(double *X, unsigned R, cudaStream_t s)
{
    symmetrize_kernel<<<stream_grid((uint64_t)R * R), 256, 0, s>>>(X, R);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_pinv_scale(const double *Q, const double *w, unsigned R,
                                          double *Qs, cudaStream_t s)
{
    pinv_scale_kernel<<<1, 256, 0, s>>>(Q, w, R, Qs);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_fit_terms(const amp_gram_set *gs, unsigned R,
                                         const double *lambda, const double *inner,
                                         double *out, cudaStream_t s)
{
    fit_terms_kernel<<<1, 256, 0, s>>>(*gs, R, lambda, inner, out);
    return cudaGetLastError();
}
