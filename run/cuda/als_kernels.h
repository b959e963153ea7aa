/* Launchers of the small CP-ALS kernels (als_kernels.cu, als_solve.cu)
 * and of the constrained methods' row updates (constrained.cu), for
 * als_gpu.cu. Every one launches on stream s and returns the launch
 * status. */
#ifndef AMP_ALS_KERNELS_H
#define AMP_ALS_KERNELS_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "amp_core.h"
#include "amped_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One R x R or R-vector device array per mode (the Gram matrices, the
 * column scales), passed by value. */
typedef struct amp_mode_set {
    unsigned n;
    const double *a[AMP_MAX_MODES];
} amp_mode_set;

/* Blocks column_stats uses for `rows` rows: the partial array holds
 * blocks x 3 x R doubles. */
unsigned amp_gpu_stats_blocks(uint64_t rows, int sm_count);
/* Per block: column sums of squares, max |a| and sums of a .* m. */
cudaError_t amp_gpu_column_stats(const double *A, const double *M, uint64_t rows, unsigned R,
                                 unsigned blocks, double *partial, cudaStream_t s);
/* The partials summed in block order: totals[0..R) sums of squares,
 * [R..2R) sums of a .* m, [2R..3R) max |a| (sums first, so that GPUs add
 * theirs with one all-reduce and take the max with another). */
cudaError_t amp_gpu_column_totals(const double *partial, unsigned blocks, unsigned R,
                                  double *totals, cudaStream_t s);
/* The largest decomposition rank the fused solve (amp_gpu_solve_stats,
 * als_solve.cu) takes: one lane of a warp per column, P's column in 32
 * registers. Above it CP-ALS solves with cuBLAS instead (als_gpu.cu). A
 * limit of that kernel only, below the GPU backend's own rank limit
 * (AMP_GPU_MAX_RANK, amp_core.h). */
#define AMP_GPU_SOLVE_MAX_RANK 32
/* A = M P (rows x R, row-major; P R x R, row-major) and the partials of
 * amp_gpu_column_stats for A and M, in one pass (als_solve.cu); M is f32
 * when m_f32 is set; A32, when not NULL, gets A in f32 too. R 1 to
 * AMP_GPU_SOLVE_MAX_RANK, else cudaErrorInvalidValue. */
cudaError_t amp_gpu_solve_stats(const void *M, int m_f32, const double *P, uint64_t rows,
                                unsigned R, unsigned blocks, double *A, float *A32,
                                double *partial, cudaStream_t s);
/* lambda, the stored factor's scale sig (normalized = S sig) and the
 * next pre (1/lambda), and the column sums of a .* m (true scale), from
 * the totals of S_d = A_d pre and the M that lacks c (lambda_kernel);
 * *rescale (device) set where S_d must be normalized in place: on the
 * first iteration, or where a sig leaves [1/bound, bound]. */
cudaError_t amp_gpu_lambda(const double *totals, unsigned R, int first, const double *c,
                           double *pre, double *lambda, double *sig, double *inner,
                           int *rescale, double bound, cudaStream_t s);
/* AO-ADMM's starting model scaled by its best fit: lambda *= <X, model> /
 * |model|^2 when that is positive and finite; in: the column sums of
 * A_0 .* M_0 (lambda 1), G0: A_0's Gram, V: the other Grams' product. */
cudaError_t amp_gpu_start_scale(const double *in, const double *G0, const double *V,
                                unsigned R, double *lambda, cudaStream_t s);
/* If *rescale: A (rows x R, and A32 when not NULL) *= sig column-wise,
 * then sig = 1, on every GPU alike (they share *rescale's inputs). */
cudaError_t amp_gpu_rescale(double *A, float *A32, uint64_t rows, unsigned R, double *sig,
                            const int *rescale, cudaStream_t s);
/* The same once the rows went to the other GPUs unrescaled (each GPU
 * rescales what it holds): if *rescale, A (rows x R, f64) *= sig and,
 * when not NULL, the f32 shadow A32 (rows32 x R) *= sig on its own bits,
 * then sig = 1. */
cudaError_t amp_gpu_rescale_sent(double *A, uint64_t rows, float *A32, uint64_t rows32,
                                 unsigned R, double *sig, const int *rescale, cudaStream_t s);
/* c = the product of every sig but skip's; P[k][j] *= c[k] pre[j]. */
cudaError_t amp_gpu_fold_scales(const amp_mode_set *sig, unsigned skip, unsigned R,
                                const double *pre, double *P, double *c, cudaStream_t s);
/* G[i][j] *= sig[i] sig[j]. */
cudaError_t amp_gpu_scale_gram(double *G, const double *sig, unsigned R, cudaStream_t s);
/* A[:, r] *= sig[r]. */
cudaError_t amp_gpu_scale_columns(double *A, uint64_t rows, unsigned R, const double *sig,
                                  cudaStream_t s);
cudaError_t amp_gpu_fill(double *x, uint64_t n, double v, cudaStream_t s);
cudaError_t amp_gpu_to_f64(const float *src, double *dst, uint64_t n, cudaStream_t s);
cudaError_t amp_gpu_to_f32(const double *src, float *dst, uint64_t n, cudaStream_t s);
/* V = the Hadamard product of every Gram matrix but skip's. */
cudaError_t amp_gpu_hadamard(const amp_mode_set *gs, unsigned skip, unsigned R, double *V,
                             cudaStream_t s);
/* G = parts[0] + ... + parts[count - 1] (R x R each), summed in order. */
cudaError_t amp_gpu_sum_matrices(const double *parts, unsigned count, unsigned R, double *G,
                                 cudaStream_t s);
/* A column-major lower triangle mirrored into the upper one. */
cudaError_t amp_gpu_symmetrize(double *X, unsigned R, cudaStream_t s);
/* Qs = Q diag(1/w), eigenvalues under R eps max|w| dropped. */
cudaError_t amp_gpu_pinv_scale(const double *Q, const double *w, unsigned R, double *Qs,
                               cudaStream_t s);
/* out[0] = |model|^2 from the Gram matrices and lambda; out[1] = sum(inner). */
cudaError_t amp_gpu_fit_terms(const amp_mode_set *gs, unsigned R, const double *lambda,
                              const double *inner, double *out, cudaStream_t s);

/* ---- the constrained methods' update (constrained.cu) ------------------ */

/* The largest rank the fused update kernel takes (a lane of a warp a
 * column, the R x R matrix's column in 32 registers); above it, to
 * AMP_GPU_MAX_RANK, a generic kernel (a block of 128 threads a group of
 * rows, the R x R matrix read from the cache) does the same arithmetic,
 * slower. */
#define AMP_GPU_UPDATE_FUSED_RANK 32

/* One mode's update (amp_method in amp_core.h has the formulas; the CPU's
 * amp_cpu_update_rows is the reference): the method, the mode's rule and
 * device pointers to what it reads besides the rows. */
typedef struct amp_gpu_update {
    amp_method method;      /* AMP_METHOD_ADMM, _MU or _HALS */
    amp_mode_rule rule;     /* constraint, l1, l2 (MU floors at eps whatever the constraint) */
    unsigned rank;          /* R: 1 to AMP_GPU_MAX_RANK */
    unsigned inner;         /* AO-ADMM: inner iterations, the most (0: nothing to do) */
    double admm_tol;        /* AO-ADMM: a row's stopping tolerance; 0: always inner */
    const double *V;        /* MU, HALS: V (R x R, symmetric, device) */
    const double *P;        /* AO-ADMM: (V + rho I)^-1 (R x R, symmetric, device) */
    const double *rho;      /* AO-ADMM: rho (one double, device) */
    const double *scale;    /* R column scales (device) A, and U, are read at
                             * (written back scaled); NULL: 1 */
    int sm_count;           /* the device's SMs, to size the grid; 0: asked of the runtime */
    int generic;            /* 1: the generic kernel at any rank (tests compare the two) */
} amp_gpu_update;

/* AO-ADMM's rho and the matrix to invert, from V (R x R, device): *rho =
 * trace(V) / R (1 where the trace is not positive and finite; summed in
 * the CPU's order, so amp_cpu_admm_prepare's bits) and W = V + rho I,
 * one small kernel. P = W^-1 is then cuSOLVER's potrf and potri on W
 * (CUBLAS_FILL_MODE_LOWER; W is symmetric, so row- or column-major) and
 * amp_gpu_symmetrize(W); potrf's info > 0 means V was not positive
 * semi-definite (NaN in it, say), the CPU's AMP_ERR_INTERNAL. */
cudaError_t amp_gpu_admm_shift(const double *V, unsigned R, double *rho, double *W,
                               cudaStream_t s);

/* Rows [0, rows) of a factor A (rows x R, row-major, f64, device) updated
 * in place by u's method from their MTTKRP M (rows x R, f64, device) and
 * u's V, or P and rho; U (rows x R, device) is AO-ADMM's dual, read and
 * updated (NULL for MU and HALS). The rows a GPU owns: pass A + begin R,
 * and the kernel touches nothing outside them. The same arithmetic as
 * amp_cpu_update_rows, row by row, up to the order of the sums (AO-ADMM
 * with admm_tol stops each row on its own, after the same test). Every
 * row independent, no atomics: the same bits on every run.
 * cudaErrorInvalidValue for a rank outside 1 to AMP_GPU_MAX_RANK, ALS or
 * an unknown method or constraint, a missing pointer (V; AO-ADMM's P, rho
 * and U); nothing launched for rows 0, and for AO-ADMM with inner 0 only
 * the scaling. */
cudaError_t amp_gpu_update_rows(const amp_gpu_update *u, const double *M, double *A,
                                double *U, uint64_t rows, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
