/* The CPU backend of amped-run: the OpenMP MTTKRP kernels and CP-ALS on
 * them. It is the reference the GPU paths are checked against and the
 * fallback without a GPU. Built on run/core alone. Nothing here prints or
 * exits. */
#ifndef AMP_CPU_H
#define AMP_CPU_H

#include "amp_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- MTTKRP -------------------------------------------------------------- */

/* Per-thread scratch for one rank: boundary rows shared between threads. */
typedef struct amp_cpu_mttkrp_ws amp_cpu_mttkrp_ws;

amp_status amp_cpu_mttkrp_ws_new(int threads, unsigned rank, amp_cpu_mttkrp_ws **ws, amp_error *err);
void amp_cpu_mttkrp_ws_free(amp_cpu_mttkrp_ws *ws);
/* The widest register sums the kernel may use: 4 (AVX-512), 3 (AVX2) or 0
 * (none: the row is summed in memory); the CPU's own widest is the default
 * and the most a cap can give. Returns the level in use. For tests and
 * benchmarks, which compare the kernels on one machine. */
int amp_cpu_mttkrp_ws_limit_isa(amp_cpu_mttkrp_ws *ws, int level);

/* M = X_(d) (A_{N-1} kr ... kr A_0, mode d left out): rows[d] x rank,
 * row-major, every row written. A[m] is rows[m] x rank, row-major. The
 * work is split into equal nonzero ranges, one per thread, so the result
 * is the same bit for bit for the same thread count. */
void amp_cpu_mttkrp_f64(const amp_tensor *t, unsigned d, const double *const *A, unsigned rank,
                    double *M, amp_cpu_mttkrp_ws *ws);
void amp_cpu_mttkrp_f32(const amp_tensor *t, unsigned d, const float *const *A, unsigned rank,
                    float *M, amp_cpu_mttkrp_ws *ws);

/* ---- CP-ALS -------------------------------------------------------------- */

/* Run CP-ALS from the factors in c (random or read). */
amp_status amp_cpu_als(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c,
                       amp_error *err);

/* Time opts->max_iters rounds of MTTKRP over every mode (the papers'
 * measure): seconds[d] summed over rounds. */
amp_status amp_cpu_time_mttkrp(const amp_tensor *t, const amp_cpd_opts *o, const amp_cpd *c,
                               double *seconds, amp_error *err);

/* Largest normwise relative difference, per mode, between the kernel of
 * opts->precision and the f64 reference on c's factors. */
amp_status amp_cpu_check_mttkrp(const amp_tensor *t, const amp_cpd_opts *o, const amp_cpd *c,
                                double *rel_err, amp_error *err);

#ifdef __cplusplus
}
#endif
#endif
