/* The small kernels of CP-ALS on the GPU: everything around the MTTKRP
 * and the cuBLAS/cuSOLVER calls (als_gpu.cu drives them).
 *
 * Factor matrices are rows x R, row-major, f64 (the f32 MTTKRP reads an
 * f32 shadow), stored unnormalized: S_d with a column scale sig_d (see
 * lambda_kernel), so no pass over the rows normalizes them after the
 * first iteration unless a scale moved far (rescale_kernel). R x R
 * matrices are symmetric, so row- and column-major are the same, except
 * P once fold_scales has scaled it.
 *
 * Bytes: column_stats reads A and M once (16 R bytes a row in f64);
 * amp_gpu_scale_columns (the output, once a run) reads and writes A
 * (16 R), and so does rescale_kernel where it runs (plus 4 R for the f32
 * copy); to_f64 reads 4 R and writes 8 R. The R x R kernels are negligible for
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

/* One block per column: thread t sums the block partials t, t + 128, ...,
 * then a fixed tree combines the threads, so the result has the same bits
 * on every run. (One thread per column, walking all the partials in
 * turn, waited on one round of memory latency per partial:
 * bench/RESULTS.md, "amped-run on one GPU", column totals.)
 * Totals are laid out [sum of squares | sum of a .* m | max |a|] so that
 * a multi-GPU run sums the first 2R across GPUs in one call. */
enum { TOTALS_THREADS = 128 };
__global__ void __launch_bounds__(TOTALS_THREADS)
    column_totals_kernel(const double *partial, unsigned blocks, unsigned R, double *totals)
{
    __shared__ double s_sq[TOTALS_THREADS], s_mx[TOTALS_THREADS], s_in[TOTALS_THREADS];
    const unsigned r = blockIdx.x, t = threadIdx.x;
    double sq = 0, mx = 0, in = 0;
    for (unsigned b = t; b < blocks; b += TOTALS_THREADS) {
        const double *p = partial + (size_t)b * 3 * R;
        sq += p[r];
        mx = fmax(mx, p[R + r]);
        in += p[2 * R + r];
    }
    s_sq[t] = sq;
    s_mx[t] = mx;
    s_in[t] = in;
    __syncthreads();
    for (unsigned h = TOTALS_THREADS / 2; h > 0; h /= 2) {
        if (t < h) {
            s_sq[t] += s_sq[t + h];
            s_mx[t] = fmax(s_mx[t], s_mx[t + h]);
            s_in[t] += s_in[t + h];
        }
        __syncthreads();
    }
    if (t == 0) {
        totals[r] = s_sq[0];
        totals[R + r] = s_in[0];
        totals[2 * R + r] = s_mx[0];
    }
}

/* The stored factor S_d is the solve's A_d times pre_d (column-wise: the
 * 1/lambda of its last update, so S_d stays near unit scale and an f32
 * shadow cannot overflow), and the solve's M had the other modes' scales
 * c left out; the totals came from S_d and that M. Undone here: the
 * statistics of A_d = S_d / pre_d against the true M = M c. Then lambda
 * (as the CPU backend: 2-norm on the first iteration, then the max-norm
 * never below 1; an all-zero column keeps 1), sig_d = 1 / (lambda pre_d)
 * so that the normalized factor is S_d sig_d, and pre_d = 1 / lambda for
 * the next update. */
__global__ void lambda_kernel(const double *totals, unsigned R, int first, const double *c,
                              double *pre, double *lambda, double *sig, double *inner,
                              int *rescale, double bound)
{
    const unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R)
        return;
    const double p = pre[r];
    double l = first ? sqrt(totals[r]) / p : fmax(totals[2 * R + r] / p, 1.0);
    if (l == 0)
        l = 1;
    lambda[r] = l;
    const double g = 1 / (l * p);
    sig[r] = g;
    pre[r] = 1 / l;
    inner[r] = totals[R + r] * c[r] / p;
    /* The other modes' M carries 1 / sig of this mode: far from 1, as on
     * the first iteration (pre = 1, S_d = A_d at lambda's scale, from
     * 1e-40 to 1e12 and more) or where lambda jumps, a product over the
     * modes could underflow or overflow an f32 M. Then S_d is rescaled in
     * place (rescale_kernel) and sig_d set back to 1. NaN rescales too.
     * Every GPU decides alike: the totals are all-reduced, so the same
     * bits everywhere (a flag that differed would mix scales in the
     * Gram's all-reduce). */
    if (first || !(g >= 1 / bound && g <= bound))
        atomicOr(rescale, 1);
}

/* A[:, r] *= sig[r] (and its f32 copy rewritten): where lambda_kernel
 * asked for it (rescale), S_d made the normalized factor; always
 * (rescale NULL) for the output. */
__global__ void rescale_kernel(double *A, float *A32, uint64_t n, unsigned R, const double *sig,
                               const int *rescale)
{
    if (rescale && !*rescale)
        return;
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n;
         k += (uint64_t)gridDim.x * blockDim.x) {
        const double a = A[k] * sig[k % R];
        A[k] = a;
        if (A32)
            A32[k] = (float)a;
    }
}

/* The same on an f32 shadow alone (rows other GPUs sent, which came
 * without their f64 rows): every GPU scales the same shadow bits alike. */
__global__ void rescale_shadow_kernel(float *A32, uint64_t n, unsigned R, const double *sig,
                                      const int *rescale)
{
    if (!*rescale)
        return;
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n;
         k += (uint64_t)gridDim.x * blockDim.x)
        A32[k] = (float)((double)A32[k] * sig[k % R]);
}

/* After rescale_kernel: sig_d = 1 (pre_d = 1 / lambda already holds). */
__global__ void settle_scale_kernel(double *sig, unsigned R, const int *rescale)
{
    const unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < R && *rescale)
        sig[r] = 1;
}

/* c = the product of every other mode's sig (the scales the MTTKRP's
 * inputs left out), and P[k][j] *= c[k] pre[j], so that M P is the solve
 * of the true M, already times pre. Each thread forms its row's c[k]
 * itself (N - 1 products), so any rank spreads over the whole grid. */
__global__ void fold_scales_kernel(amp_mode_set sig, unsigned skip, unsigned R,
                                   const double *pre, double *P, double *c)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < (size_t)R * R;
         k += (size_t)gridDim.x * blockDim.x) {
        const unsigned i = (unsigned)(k / R), j = (unsigned)(k % R);
        double ci = 1;
        for (unsigned m = 0; m < sig.n; m++)
            if (m != skip)
                ci *= sig.a[m][i];
        P[k] *= ci * pre[j];
        if (j == 0)
            c[i] = ci;
    }
}

/* G[i][j] *= sig[i] sig[j]: the Gram of S_d made the normalized factor's. */
__global__ void scale_gram_kernel(double *G, const double *sig, unsigned R)
{
    for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k < R * R;
         k += gridDim.x * blockDim.x)
        G[k] *= sig[k / R] * sig[k % R];
}

__global__ void fill_kernel(double *x, uint64_t n, double v)
{
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n;
         k += (uint64_t)gridDim.x * blockDim.x)
        x[k] = v;
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

/* AO-ADMM's start (the CPU's start_scale, als.c): lambda *= <X, model> /
 * |model|^2 where positive and finite, inner = sum of in[0 .. R), model =
 * lambda^T (G0 .* V) lambda (the CPU takes the same sums with the
 * products in mode order: they differ in the last bits). One thread:
 * once a run. */
__global__ void start_scale_kernel(const double *in, const double *G0, const double *V,
                                   unsigned R, double *lambda)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    double inner = 0, model = 0;
    for (unsigned r = 0; r < R; r++)
        inner += in[r];
    for (unsigned r = 0; r < R; r++)
        for (unsigned q = 0; q < R; q++)
            model += lambda[r] * lambda[q] * G0[r * R + q] * V[r * R + q];
    const double alpha = model > 0 ? inner / model : 0;
    if (alpha > 0 && isfinite(alpha))
        for (unsigned r = 0; r < R; r++)
            lambda[r] *= alpha;
}

__global__ void hadamard_kernel(amp_mode_set gs, unsigned skip, unsigned R, double *V)
{
    for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k < R * R;
         k += gridDim.x * blockDim.x) {
        double h = 1;
        for (unsigned m = 0; m < gs.n; m++)
            if (m != skip)
                h *= gs.a[m][k];
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
__global__ void fit_terms_kernel(amp_mode_set gs, unsigned R, const double *lambda,
                                 const double *inner, double *out)
{
    __shared__ double s_model[256], s_inner[256];
    double model = 0, in = 0;
    for (unsigned k = threadIdx.x; k < R * R; k += blockDim.x) {
        double h = lambda[k / R] * lambda[k % R];
        for (unsigned m = 0; m < gs.n; m++)
            h *= gs.a[m][k];
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
    column_totals_kernel<<<R, TOTALS_THREADS, 0, s>>>(partial, blocks, R, totals);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_lambda(const double *totals, unsigned R, int first,
                                      const double *c, double *pre, double *lambda, double *sig,
                                      double *inner, int *rescale, double bound,
                                      cudaStream_t s)
{
    cudaError_t e = cudaMemsetAsync(rescale, 0, sizeof *rescale, s);
    if (e != cudaSuccess)
        return e;
    lambda_kernel<<<(R + 127) / 128, 128, 0, s>>>(totals, R, first, c, pre, lambda, sig, inner,
                                                  rescale, bound);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_start_scale(const double *in, const double *G0, const double *V,
                                           unsigned R, double *lambda, cudaStream_t s)
{
    start_scale_kernel<<<1, 1, 0, s>>>(in, G0, V, R, lambda);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_rescale(double *A, float *A32, uint64_t rows, unsigned R,
                                       double *sig, const int *rescale, cudaStream_t s)
{
    const uint64_t n = rows * R;
    rescale_kernel<<<stream_grid(n), 256, 0, s>>>(A, A32, n, R, sig, rescale);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    settle_scale_kernel<<<(R + 127) / 128, 128, 0, s>>>(sig, R, rescale);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_rescale_sent(double *A, uint64_t rows, float *A32,
                                            uint64_t rows32, unsigned R, double *sig,
                                            const int *rescale, cudaStream_t s)
{
    const uint64_t n = rows * R, n32 = rows32 * R;
    cudaError_t e = cudaSuccess;
    if (n > 0) {
        rescale_kernel<<<stream_grid(n), 256, 0, s>>>(A, NULL, n, R, sig, rescale);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess && A32 != NULL && n32 > 0) {
        rescale_shadow_kernel<<<stream_grid(n32), 256, 0, s>>>(A32, n32, R, sig, rescale);
        e = cudaGetLastError();
    }
    if (e != cudaSuccess)
        return e;
    settle_scale_kernel<<<(R + 127) / 128, 128, 0, s>>>(sig, R, rescale);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_fold_scales(const amp_mode_set *sig, unsigned skip, unsigned R,
                                           const double *pre, double *P, double *c,
                                           cudaStream_t s)
{
    fold_scales_kernel<<<stream_grid((uint64_t)R * R), 256, 0, s>>>(*sig, skip, R, pre, P, c);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_scale_gram(double *G, const double *sig, unsigned R,
                                          cudaStream_t s)
{
    scale_gram_kernel<<<stream_grid((uint64_t)R * R), 256, 0, s>>>(G, sig, R);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_scale_columns(double *A, uint64_t rows, unsigned R,
                                             const double *sig, cudaStream_t s)
{
    uint64_t n = rows * R;
    rescale_kernel<<<stream_grid(n), 256, 0, s>>>(A, NULL, n, R, sig, NULL);
    return cudaGetLastError();
}

extern "C" cudaError_t amp_gpu_fill(double *x, uint64_t n, double v, cudaStream_t s)
{
    fill_kernel<<<stream_grid(n), 256, 0, s>>>(x, n, v);
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

extern "C" cudaError_t amp_gpu_hadamard(const amp_mode_set *gs, unsigned skip, unsigned R,
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

extern "C" cudaError_t amp_gpu_fit_terms(const amp_mode_set *gs, unsigned R,
                                         const double *lambda, const double *inner,
                                         double *out, cudaStream_t s)
{
    fit_terms_kernel<<<1, 256, 0, s>>>(*gs, R, lambda, inner, out);
    return cudaGetLastError();
}
