/* The CPU backend of amped-run: the OpenMP MTTKRP kernels and CP-ALS on
 * them. It is the reference the GPU paths are checked against and the
 * fallback without a GPU. Built on run/core alone. Nothing here prints or
 * exits. */
#ifndef AMP_CPU_H
#define AMP_CPU_H

#include "amp_core.h"
#include "amp_gcp.h"
#include "amp_group.h"

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
/* Whether the kernels walk the fibers of copies that have them: -1 (the
 * default) in f64 where a copy's fibers are long enough not to lose
 * (AMP_CPU_FIBER_MIN_NNZ), never in f32; 1 wherever a copy has them, 0
 * never (every nonzero on its own, as before fibers). Returns the
 * setting. For tests and benchmarks. */
int amp_cpu_mttkrp_ws_fibers(amp_cpu_mttkrp_ws *ws, int mode);

/* M = X_(d) (A_{N-1} kr ... kr A_0, mode d left out): rows[d] x rank,
 * row-major, every row written. A[m] is rows[m] x rank, row-major. The
 * work is split into equal nonzero ranges, one per thread, so the result
 * is the same bit for bit for the same thread count. */
void amp_cpu_mttkrp_f64(const amp_tensor *t, unsigned d, const double *const *A, unsigned rank,
                    double *M, amp_cpu_mttkrp_ws *ws);
void amp_cpu_mttkrp_f32(const amp_tensor *t, unsigned d, const float *const *A, unsigned rank,
                    float *M, amp_cpu_mttkrp_ws *ws);

/* ---- the constrained methods' update (amp_method) ----------------------- */

/* What one mode's update needs besides its rows: the method, the mode's
 * rule, V (R x R, row-major, symmetric: the Hadamard product of the other
 * modes' Grams) and, for AO-ADMM, rho and P = (V + rho I)^-1
 * (amp_cpu_admm_prepare). */
typedef struct amp_update_args {
    amp_method method;
    amp_mode_rule rule;
    unsigned rank;
    unsigned inner;       /* AO-ADMM: inner iterations, the most */
    double admm_tol;      /* AO-ADMM: a row's stopping tolerance; 0: none */
    double rho;
    const double *V, *P;
} amp_update_args;

/* AO-ADMM: rho = trace(V) / R and P = (V + rho I)^-1 (R x R, caller's),
 * set in a. */
amp_status amp_cpu_admm_prepare(amp_update_args *a, double *P, amp_error *err);
/* Bytes of scratch amp_cpu_update_rows needs for n rows. */
size_t amp_cpu_update_scratch(const amp_update_args *a, uint64_t n);
/* Rows [0, n) of a factor A (n x R, row-major) updated in place by a's
 * method from their MTTKRP M (n x R); U (n x R) is AO-ADMM's dual
 * (updated; NULL for the others). One thread, f64: the reference of
 * every GPU update kernel. */
void amp_cpu_update_rows(const amp_update_args *a, const double *M, double *A, double *U,
                         uint64_t n, double *scratch);

/* ---- CP-ALS -------------------------------------------------------------- */

/* Run CP-ALS, or the constrained method o->method, from the factors in c
 * (random or read). */
amp_status amp_cpu_als(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c,
                       amp_error *err);

/* CP-ALS as one process of a group (several processes, MPI): part is
 * this process's part of the tensor (amp_partition_tensor of p for
 * process group->rank: its shards, in the run's row numbering); p deals
 * the shards to the group's processes (AMP_PARTITION_OWNER, p->ngpus =
 * group->size). c holds every row of every factor in the run's order,
 * the same on every process; each process updates the rows it owns, the
 * row sums (Grams, norms, fit terms) are added over the processes and the
 * updated rows sent to all, so c ends the same on every process. */
typedef struct amp_cpu_share {
    const amp_group *group;
    const amp_partition *p;
    double wait;       /* out: seconds waiting for the slowest process */
    double exchange;   /* out: seconds in the collectives themselves */
} amp_cpu_share;

amp_status amp_cpu_als_share(const amp_tensor *part, const amp_cpd_opts *o, amp_cpu_share *sh,
                             amp_cpd *c, amp_error *err);

/* Several models fitted together (amped-run --starts, --ranks): K models,
 * cs[k] holding model k's start at its own rank, one MTTKRP a mode an
 * iteration over all live models' columns side by side (their sum within
 * AMP_CPU_MAX_RANK); each model keeps its own lambda, Grams, solve, fit
 * and stop, and computes what it would alone (CP-ALS or o->method's
 * update; not CP-APR, GCP or completion: AMP_ERR_UNSUPPORTED). A model
 * whose fit changes by less than o->tol drops out of the passes that
 * follow. on_iter(ctx, k, ...) after each model's iteration; the MTTKRP's
 * seconds added to *mttkrp_seconds (NULL: none). One process. */
typedef void (*amp_cpu_batch_fn)(void *ctx, unsigned model, unsigned iter, double fit,
                                 double delta, double seconds);
amp_status amp_cpu_als_batch(const amp_tensor *t, const amp_cpd_opts *o, unsigned K,
                             amp_cpd *const *cs, amp_cpu_batch_fn on_iter, void *ctx,
                             double *mttkrp_seconds, amp_error *err);

/* Where each row of mode d's copy c starts (rows + 1 positions, the last
 * c->nnz; a row with no nonzero starts where the next does), malloc'd into
 * *out: the copy is ordered by its output row (AMP_ERR_INTERNAL if not).
 * Threads that own rows walk their own nonzeros with it, no atomics. */
amp_status amp_cpu_row_starts(const amp_copy *c, unsigned d, uint64_t rows, uint64_t **out,
                              amp_error *err);

/* ---- CP completion (--observed nonzeros, completion.c) ------------------ */

/* CP-ALS fitted to the stored entries only (o->completion): per mode and
 * row, the normal equations of the row's training entries plus the
 * mode's ridge (o->rules' l2) built in one pass over the mode's copy and
 * solved by Cholesky; rows with no training entry or a singular system
 * keep their value; lambda as CP-ALS takes it. c->completion (RMSEs,
 * counts) and c->fit (over the training entries) before each on_iter.
 * f64 whatever o->precision. One process (several: AMP_ERR_UNSUPPORTED). */
amp_status amp_cpu_completion(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c,
                              amp_error *err);

/* ---- CP-APR (Poisson CP, apr.c) ----------------------------------------- */

/* CP-APR's multiplicative updates from the factors in c (random or read;
 * normalized here as pyttb does), o->apr's options, o->tol the KKT
 * tolerance; c->loglik, c->kkt and c->inner_iters after each outer
 * iteration. */
amp_status amp_cpu_apr(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c, amp_error *err);
/* The same as one process of several (amp_cpu_als_share's arguments): its
 * rows of every mode updated here, the KKT violation's maximum and the
 * log-likelihood's sum taken over the group, each mode's rows sent to all. */
amp_status amp_cpu_apr_share(const amp_tensor *part, const amp_cpd_opts *o, amp_cpu_share *sh,
                             amp_cpd *c, amp_error *err);
/* AMP_ERR_RANGE, with the position in copy 0 (*bad) and the value, where
 * a value held in host memory is negative, or not an integer unless
 * allow_noninteger; AMP_OK where every one is a count. No message. */
amp_status amp_cpu_apr_check_values(const amp_tensor *t, int allow_noninteger,
                                    uint64_t *bad, double *value);

/* ---- GCP (generalized CP by stochastic gradients and Adam, gcp.c) ------- */

/* GCP-Adam from the factors in c (random, scaled as pyttb's start, or
 * read: o->gcp.scale_start), o->gcp's options, o->max_iters epochs, o->tol
 * (0: none) the relative decrease of the estimated loss below which an
 * epoch ends the run; c->gcp_* before each on_iter (fit: the estimate),
 * the factors written with unit columns and lambda at the end. One
 * process (AMP_ERR_UNSUPPORTED from amp_cpu_als_share). */
amp_status amp_cpu_gcp(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c, amp_error *err);
/* The pieces, the reference of the GPU's (tests): the gradient of batch
 * b's estimate of the loss into G (rows[m] x R each, every row written),
 * the estimate itself and its standard error, the exact loss (kind:
 * amp_gcp_exact_kind's; NAN for none), from factors A (lambda 1). */
amp_status amp_cpu_gcp_gradient(const amp_gcp_view *v, const double *const *A, unsigned R,
                                amp_gcp_loss loss, double delta, const amp_gcp_batch *b,
                                double *const *G, amp_error *err);
amp_status amp_cpu_gcp_estimate(const amp_gcp_view *v, const double *const *A, unsigned R,
                                amp_gcp_loss loss, double delta, const amp_gcp_batch *b,
                                double *est, double *se, amp_error *err);
amp_status amp_cpu_gcp_exact(const amp_gcp_view *v, const double *const *A, unsigned R,
                             amp_gcp_loss loss, double delta, int kind, double *loss_out,
                             amp_error *err);
/* One Adam step on n entries (step: the rate now; b1t, b2t: 1 - beta^t
 * for the step count t), each entry at least lower. */
void amp_cpu_gcp_adam(double *A, const double *G, double *M, double *V, uint64_t n,
                      double step, double b1t, double b2t, double lower);
/* Steps of GCP-Adam as amp_cpu_gcp takes them, for the tests: batch b[i]
 * the gradient of step i, Adam's count before the first t0, the rate
 * `rate` throughout; A, M, V: the factors and Adam's moments (rows[m] x R
 * each), updated in place, every entry (AMP_GCP_ADAM_DENSE) or the rows
 * each step's samples touch (AMP_GCP_ADAM_LAZY), each kept at least
 * lower. */
amp_status amp_cpu_gcp_steps(const amp_gcp_view *v, double *const *A, double *const *M,
                             double *const *V, unsigned R, amp_gcp_loss loss, double delta,
                             amp_gcp_adam adam, const amp_gcp_batch *b, unsigned steps,
                             uint64_t t0, double rate, double lower, amp_error *err);
/* AMP_ERR_RANGE with the first value (its position in key order, *bad)
 * that the loss does not model; *what: the data it models. No message. */
amp_status amp_cpu_gcp_check_values(const amp_gcp_view *v, amp_gcp_loss loss, uint64_t *bad,
                                    const char **what);

/* The most threads that may call BLAS at once, as the linked BLAS was
 * built for; 0 where it says nothing (a BLAS without such a limit).
 * name: the BLAS and its build limit, for a message. */
unsigned amp_cpu_blas_thread_limit(char *name, size_t name_size);

/* *seconds: how long one iteration's dense algebra (every mode's
 * A = M V^-1, its Gram, and V^-1) should take at o->rank on o->threads
 * threads, from a rate timed here (one block of the solve a thread: some
 * 0.1 s at rank 4096, far less below). A singular V adds an
 * eigendecomposition, several times V^-1's time. */
amp_status amp_cpu_solve_estimate(const amp_tensor *t, const amp_cpd_opts *o, double *seconds,
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
