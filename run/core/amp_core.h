/* The core of amped-run that both backends share: an .amp file's mode
 * copies as loaded, the decomposition's options and factors (allocation,
 * random start, files), the partition of shards over GPUs, and the plain
 * f64 reference MTTKRP every kernel is checked against.
 *
 * It knows no backend: the CPU (run/cpu) and CUDA (run/cuda) backends
 * build on it and never on each other. Every index is in the file's
 * relabelled (compact) space until the factors are written, when the
 * relabelling is undone. Nothing here prints or exits. */
#ifndef AMP_CORE_H
#define AMP_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "amp_outfile.h"
#include "amped_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the tensor ---------------------------------------------------------- */

/* One mode copy as the file holds it, decompressed: BLCO words and values
 * in file order (by output row), plus the block keys when the indices need
 * more than 64 bits. */
typedef struct amp_copy {
    amp_mode_layout layout;    /* shards points into the open file's tables: not owned */
    uint64_t nnz;
    uint64_t *words;
    void *vals;                /* f32 or f64 as the tensor's value_type */
    size_t nblocks;            /* runs of one key: 1 when key_bits is 0 */
    uint64_t *block_start;     /* nblocks + 1 positions */
    uint64_t *block_key;
    /* The output rows the nonzeros fall in: every row of the mode for a
     * loaded file; the rows one GPU owns for a part (amp_partition_tensor). */
    uint64_t row_begin, row_count;
    /* A part's copy holds first the nonzeros whose row of the mode updated
     * just before this one its GPU owns (early_nnz of them, by output
     * row), then the rest (by output row): the first group needs no row
     * from another GPU. nnz for a loaded file. */
    uint64_t early_nnz;
    /* The fiber level (issue 45): has_fibers when the MTTKRP may walk
     * fibers of middle mode fiber_mode (runs of one row and one index of
     * that mode; amped_format.h), nfibers of them. A copy without (zeroed,
     * or fewer than 3 modes) is taken nonzero by nonzero. */
    int has_fibers;
    unsigned fiber_mode;
    uint64_t nfibers;
} amp_copy;

typedef struct amp_tensor {
    unsigned nmodes;
    uint64_t nnz;
    uint64_t dims[AMP_MAX_MODES];          /* original */
    uint64_t rows[AMP_MAX_MODES];          /* compact: factor matrix rows */
    amp_value_type value_type;
    double norm_sq;
    amp_copy copies[AMP_MAX_MODES];
    uint64_t *new_to_orig[AMP_MAX_MODES];
    uint64_t bytes;                        /* held in memory */
    /* Only what the file's tables say (amp_tensor_load_layout): every
     * copy's words and vals are NULL. */
    int layout_only;
} amp_tensor;

typedef void (*amp_load_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* Each copy's fiber level, once its nonzeros are in host memory (the
 * loaders call it): from the file's FIBER section, whose counts are
 * checked against the nonzeros (a count that differs is AMP_ERR_CORRUPT,
 * naming the section), or, in a file of format 1.0, the middle mode with
 * the fewest fibers, counted (N-1 reads of each copy's words). */
amp_status amp_tensor_fibers(const amp_file *f, amp_tensor *t, int threads, amp_error *err);

/* Read, check (checksums and every index) and decompress every mode copy
 * of an open file on `threads` threads (0: OpenMP default). */
amp_status amp_tensor_load(const amp_file *f, int threads, amp_load_progress_fn progress,
                           void *progress_ctx, amp_tensor *t, amp_error *err);
void amp_tensor_free(amp_tensor *t);

/* Values far from 1. The Gram matrix of a factor of values near 1e-160
 * underflows, and so does |X|^2 (a LAPACK failure, or a fit of 0); and
 * the decomposition of 2^k X is that of X with lambda 2^k times larger.
 * So a backend runs on 2^k X, k bringing the largest |value| to [0.5, 1),
 * where that value lies outside [2^-AMP_VALUE_EXP_MAX, 2^AMP_VALUE_EXP_MAX]
 * (whose squares, summed over 2^64 nonzeros, stay within double's range),
 * and the caller divides lambda by 2^k. f32 values never need it. */
#define AMP_VALUE_EXP_MAX 400
/* The largest |value| t holds in host memory, from one copy (0 for none). */
double amp_tensor_max_abs(const amp_tensor *t, int threads);
/* The k above for a largest |value| max: 0 where max is within range, or
 * 0 (no value, or all zero). */
int amp_value_scale_exp(double max);
/* Every value t holds in host memory times 2^k (exact: a power of 2 that
 * keeps them in range); *sum_sq: the sum of the squares of copy 0's new
 * values (|2^k X|^2 for a whole tensor, this part's share for a part). */
void amp_tensor_scale(amp_tensor *t, int k, int threads, double *sum_sq);

/* amp_tensor_load in two steps. The layout: sizes, relabelling, each
 * copy's layout and block table, no nonzeros (t->layout_only). Then the
 * nonzeros into host memory (nothing to do when t has them already). */
amp_status amp_tensor_load_layout(const amp_file *f, amp_tensor *t, amp_error *err);
amp_status amp_tensor_load_nonzeros(const amp_file *f, int threads,
                                    amp_load_progress_fn progress, void *progress_ctx,
                                    amp_tensor *t, amp_error *err);

/* A checked chunk as amp_tensor_read_chunks hands it over: count
 * nonzeros of copy `mode` from position `at`, the chunk `index`-th of its
 * mode in file order; words and values (the tensor's value type) in a
 * buffer of the calling thread that is reused once the sink returns; and,
 * when asked for, its stored (compressed, checksum-verified) bytes. */
typedef struct amp_chunk_data {
    const amp_section *section;
    unsigned mode;
    size_t index;
    uint64_t at, count;
    const uint64_t *words;
    const void *vals;
    const void *stored;   /* NULL unless asked for */
} amp_chunk_data;
/* Called from several threads at once; thread: 0 to threads - 1. */
typedef amp_status (*amp_chunk_sink_fn)(void *ctx, int thread, const amp_chunk_data *c,
                                        amp_error *err);
/* Every chunk of f, read, checked and decompressed on exactly `threads`
 * threads (at least 1), to sink (with the stored bytes when with_stored);
 * then the rows are checked to ascend across chunks. t: f's layout
 * (amp_tensor_load_layout) or more. */
amp_status amp_tensor_read_chunks(const amp_file *f, const amp_tensor *t, int threads,
                                  int with_stored, amp_chunk_sink_fn sink, void *sink_ctx,
                                  amp_load_progress_fn progress, void *progress_ctx,
                                  amp_error *err);

/* ---- remapping a mode copy into the next (FLYCOO) ----------------------- */

/* pos[k] (t->nnz entries): the position in copy (d + 1) % nmodes of copy
 * d's nonzero k, for a whole loaded tensor t (not a part).
 *
 * amp_remap_positions_read takes them from f's REMAP sections of mode d
 * and checks them (each below nnz, none twice); AMP_ERR_FORMAT when f has
 * none for mode d (amp_remap_in_file says beforehand). t needs only f's
 * layout (amp_tensor_load_layout).
 *
 * amp_remap_positions_compute finds them from the copies themselves
 * (t's nonzeros loaded): it matches each row of mode d + 1 of copy d to
 * that row of copy d + 1 by index and value, so it assumes nothing about
 * how amped-prep ordered a row. Nonzeros with equal indices and values
 * are interchangeable, so it may pair them otherwise than the file's
 * streams do; the copy remapped with either is the same, word for word.
 * AMP_ERR_CORRUPT when the two copies do not hold the same nonzeros.
 *
 * amp_remap_positions: the file's when it has them (*from_file 1), else
 * computed (*from_file 0); f may be NULL. */
int amp_remap_in_file(const amp_file *f, unsigned d);
amp_status amp_remap_positions_read(const amp_file *f, const amp_tensor *t, unsigned d,
                                    int threads, uint64_t *pos, amp_error *err);
amp_status amp_remap_positions_compute(const amp_tensor *t, unsigned d, int threads,
                                       uint64_t *pos, amp_error *err);
amp_status amp_remap_positions(const amp_file *f, const amp_tensor *t, unsigned d, int threads,
                               uint64_t *pos, int *from_file, amp_error *err);

/* The remap step itself, the reference the GPU's fused kernel is checked
 * against: every nonzero k of `from` (words and values as stored, in
 * from's layout and block table) re-encoded for to's layout and written
 * to to->words[pos[k]] and to->vals[pos[k]]. to's layout, nnz and block
 * table say where it goes (a copy of the file's next mode, or its
 * layout_only twin with words and vals allocated); the key bits of each
 * re-encoded index must equal the block key at pos[k], else
 * AMP_ERR_CORRUPT. pos must be a permutation (as amp_remap_positions
 * gives); from and to must not overlap. */
amp_status amp_remap_copy(const amp_copy *from, const uint64_t *pos, amp_value_type vt,
                          amp_copy *to, amp_error *err);

/* ---- the decomposition rank --------------------------------------------- */

/* The largest rank each backend takes: the CPU's is what its per-thread
 * scratch and the R x R algebra stay sensible at; the GPU's is what its
 * kernels hold in registers and shared memory. */
#define AMP_CPU_MAX_RANK 4096u
#define AMP_GPU_MAX_RANK 512u

/* The check of a rank against a backend's limit (max: one of the above):
 * "WHAT takes rank 1 to MAX, not RANK" when it fails. */
amp_status amp_rank_check(unsigned rank, unsigned max, const char *what, amp_error *err);

/* ---- the reference MTTKRP ---------------------------------------------- */

/* M = X_(d) (A_{N-1} kr ... kr A_0, mode d left out): rows[d] x rank,
 * row-major, every row written; A[m] is rows[m] x rank, row-major. The
 * plain reference: one pass over copy `src` (any mode's copy), f64, one
 * thread. For tests and --check. */
amp_status amp_mttkrp_reference(const amp_tensor *t, unsigned src, unsigned d,
                                const double *const *A, unsigned rank, double *M,
                                amp_error *err);

/* Bytes one MTTKRP (any mode) must move at the least: the copy once, each
 * input factor once, the output once. */
double amp_mttkrp_min_bytes(const amp_tensor *t, unsigned rank, size_t factor_size);

/* ---- the decomposition: options, phases, factors ------------------------ */

typedef enum amp_precision { AMP_PRECISION_F64 = 0, AMP_PRECISION_F32 } amp_precision;

/* How a factor is updated from its MTTKRP M and V, the Hadamard product
 * of the other modes' Grams (every method reads a row of M, the row
 * itself and V alone, so rows update independently):
 *   ALS      A = M V^-1 (unconstrained least squares)
 *   AO-ADMM  rho = trace(V)/R; inner iterations
 *            At = (M + rho (A + U)) (V + rho I)^-1, A = prox(At - U),
 *            U = U + A - At, the dual U kept per mode across iterations
 *   MU       A = max(eps, A .* (M - l1)+ ./ (A V + l2 A + eps))
 *   HALS     per row, column by column r:
 *            a_r = [m_r - l1 - sum_{q != r} a_q V_qr] / (V_rr + l2),
 *            floored at eps where non-negative
 * The penalties of a mode are l1 sum |a| + (l2 / 2) |A|_F^2 on the
 * factor as it is updated (the others normalized); prox is the
 * projection and shrinkage they give: max(0, .) where non-negative,
 * soft-thresholding by l1 / rho, scaling by rho / (rho + l2). */
typedef enum amp_method {
    AMP_METHOD_ALS = 0, AMP_METHOD_ADMM, AMP_METHOD_MU, AMP_METHOD_HALS, AMP_METHOD_APR,
    AMP_METHOD_GCP
} amp_method;
#define AMP_NMETHODS 6

/* CP-APR (Poisson CP, run/cpu/apr.c): its options, with the Tensor
 * Toolbox's and pyttb's defaults but one. Its tol is the KKT violation's,
 * and its iterations the outer ones. The floor of the model's value where
 * it is divided by is 1e-30, not their 1e-10: wherever a model value at a
 * nonzero is below the floor, w = x / floor credits only m / floor of
 * that count to the row's update, so the value falls further at every
 * inner iteration until it underflows to 0 and the log-likelihood is
 * -inf (rd100m-counts at rank 32, and tests/run_apr.sh's sparse 4-mode
 * tensor, at outer iteration 2; pyttb does the same with 1e-10). Model
 * values at nonzeros of 1e-12 and below are an ordinary fit on a large
 * sparse tensor; 1e-30 is still a normal number in f32, where x / 1e-30
 * stays finite for counts below 3e8. */
#define AMP_APR_INNER_DEFAULT 10u
#define AMP_APR_INNER_MAX 100000u
#define AMP_APR_KAPPA_DEFAULT 1e-2
#define AMP_APR_KAPPA_TOL_DEFAULT 1e-10
#define AMP_APR_EPS_DEFAULT 1e-30
#define AMP_APR_TOL_DEFAULT 1e-4
#define AMP_APR_ITERS_DEFAULT 1000u
typedef struct amp_apr_opts {
    unsigned inner;            /* inner iterations per mode, the most */
    double kappa, kappa_tol;   /* the inactive-entry shift, and below what it applies */
    double eps_div_zero;       /* the model's value is taken as at least this */
    int allow_noninteger;      /* non-negative reals, not only counts */
    /* Which inactive entries the shift lifts: AMP_APR_SHIFT_KKT those whose
     * Phi is above 1 (the KKT conditions' violators: Chi and Kolda's
     * rule), AMP_APR_SHIFT_PYTTB every one whose Phi is positive (pyttb
     * 1.8's cp_apr; it keeps lifting entries that belong at 0, so its runs
     * rarely meet the KKT tolerance: bench/RESULTS.md). */
    int shift_rule;
} amp_apr_opts;
enum { AMP_APR_SHIFT_KKT = 0, AMP_APR_SHIFT_PYTTB };

/* CP completion (--observed nonzeros; run/cpu/completion.c, amp_completion.h):
 * least squares on the stored entries only, an absent cell being no
 * observation rather than a zero. Every other field of amp_cpd_opts keeps
 * its meaning; rules' l2 is each mode's ridge. */
typedef enum amp_observed { AMP_OBSERVED_ALL = 0, AMP_OBSERVED_NONZEROS } amp_observed;
/* Test entries kept apart from the tensor (--holdout-file): n entries,
 * idx[k * nmodes + m] the compact index of entry k in mode m, or
 * AMP_TEST_NO_ROW where the tensor has no nonzero in that slice (the
 * model is 0 there, as the factor files written say). */
#define AMP_TEST_NO_ROW UINT64_MAX
typedef struct amp_test_set {
    uint64_t n;
    unsigned nmodes;
    uint64_t *idx;
    double *val;
} amp_test_set;
typedef struct amp_completion_opts {
    amp_observed observed;
    double holdout;              /* share of the stored entries kept out of the fit, [0, 1) */
    const amp_test_set *test;    /* --holdout-file's entries, or NULL */
} amp_completion_opts;
/* GCP (generalized CP by stochastic gradients and Adam, Kolda and Hong
 * 2020; run/core/amp_gcp.h, run/cpu/gcp.c): the loss, the stratified
 * samples, Adam's step. The losses are pyttb's (amp_gcp.h). */
typedef enum amp_gcp_loss {
    AMP_GCP_GAUSSIAN = 0, AMP_GCP_POISSON, AMP_GCP_POISSON_LOG, AMP_GCP_BERNOULLI_LOGIT,
    AMP_GCP_BERNOULLI_ODDS, AMP_GCP_GAMMA, AMP_GCP_RAYLEIGH, AMP_GCP_HUBER
} amp_gcp_loss;
#define AMP_GCP_NLOSSES 8
/* The defaults of pyttb's gcp_opt with its Adam (and the Tensor
 * Toolbox's); the sample sizes' defaults depend on the tensor
 * (amp_gcp_resolve). */
#define AMP_GCP_EPOCH_ITERS_DEFAULT 1000u
#define AMP_GCP_EPOCHS_DEFAULT 1000u
#define AMP_GCP_RATE_DEFAULT 1e-3
#define AMP_GCP_DECAY_DEFAULT 0.1
#define AMP_GCP_MAX_FAILS_DEFAULT 1u
#define AMP_GCP_HUBER_DELTA_DEFAULT 0.25
/* Adam's update: every factor entry every step (the papers', pyttb's), or
 * only the rows the step's samples touch (PyTorch's SparseAdam: a step
 * costs its samples, not the factors' size; another algorithm, as an
 * untouched row's moments do not decay and it does not move). */
typedef enum amp_gcp_adam { AMP_GCP_ADAM_DENSE = 0, AMP_GCP_ADAM_LAZY } amp_gcp_adam;
typedef struct amp_gcp_opts {
    amp_gcp_loss loss;
    /* Samples per gradient step and in the fixed sample of the loss
     * estimate: nonzeros and absent cells (zeros); *_given 0: the
     * defaults. */
    uint64_t grad_nz, grad_z, loss_nz, loss_z;
    int grad_given, loss_given;
    unsigned epoch_iters;      /* Adam steps an epoch */
    double rate, decay;        /* step size; its factor after a failed epoch */
    unsigned max_fails;        /* failed epochs allowed: the run stops at one more */
    double huber_delta;        /* the Huber loss's threshold */
    amp_gcp_adam adam;
    /* 1: the starting factors are random and scaled as pyttb scales its
     * random start (amp_gcp_start); 0: taken as given (--init), only
     * their columns' norms spread evenly over the modes. */
    int scale_start;
} amp_gcp_opts;

typedef enum amp_constraint { AMP_CONSTRAINT_NONE = 0, AMP_CONSTRAINT_NONNEG } amp_constraint;

/* The floor of MU and HALS: an entry at 0 could never grow again. */
#define AMP_UPDATE_EPS 1e-12
/* AO-ADMM's inner iterations: the default and the most. */
#define AMP_ADMM_INNER_DEFAULT 5u
#define AMP_ADMM_INNER_MAX 1000u

/* One mode's rule, as the backends apply it. */
typedef struct amp_mode_rule {
    amp_constraint constraint;
    double l1, l2;
} amp_mode_rule;

/* The rules as given: n_* values, 1 meaning every mode. */
typedef struct amp_rules {
    unsigned n_constraint, n_l1, n_l2;
    amp_constraint constraint[AMP_MAX_MODES];
    double l1[AMP_MAX_MODES], l2[AMP_MAX_MODES];
} amp_rules;

/* "als", "ao-admm", "mu", "hals"; "none", "nonneg". */
const char *amp_method_name(amp_method m);
const char *amp_constraint_name(amp_constraint c);

typedef struct amp_cpd_opts {
    unsigned rank;             /* the decomposition rank: amp_rank_check */
    unsigned max_iters;
    double tol;                /* stop when the fit changes by less; 0: never */
    uint64_t seed;
    amp_precision precision;   /* of the MTTKRP; the R x R algebra is f64 */
    int threads;               /* 0: OpenMP default */
    amp_method method;
    amp_rules rules;           /* constraints and penalties; none for ALS */
    unsigned admm_inner;       /* AO-ADMM inner iterations (the most, with admm_tol) */
    /* AO-ADMM: a row stops its inner iterations once its primal and dual
     * residuals |A - At| and |A - A_before| are both below admm_tol times
     * |A|; 0: always admm_inner. Per row, so no reduction across rows or
     * GPUs, and the result does not depend on how rows are split. */
    double admm_tol;
    /* Called after every iteration, from the calling thread. The amp_cpd
     * being computed then holds in seconds[] each phase's time so far
     * (this process's, on several GPUs GPU 0's), so the caller can tell
     * each iteration's phases apart. */
    void (*on_iter)(void *ctx, unsigned iter, double fit, double delta, double seconds);
    void *ctx;
    /* NULL, or read once on_iter has returned: nonzero stops the run after
     * that iteration (amp_cpd.stopped), the model being that iteration's.
     * One process's run only: its GPUs agree on it (the first GPU reads
     * it, the others wait for its answer), processes do not. */
    const volatile int *stop;
    amp_apr_opts apr;          /* AMP_METHOD_APR's */
    amp_completion_opts completion;
    amp_gcp_opts gcp;          /* AMP_METHOD_GCP's */
} amp_cpd_opts;

/* Each of nmodes modes' rule from o (checked: a list has one value or
 * nmodes; ALS takes no constraint or penalty; MU takes non-negativity on
 * every mode). */
amp_status amp_rules_resolve(const amp_cpd_opts *o, unsigned nmodes, amp_mode_rule *rule,
                             amp_error *err);

/* Whether ngpus GPUs in this layout can take the method: CP-APR's inner
 * iterations and completion's row systems need every nonzero of a row on
 * one GPU, so several GPUs take the shards, not equal-nnz's cut rows, and
 * completion refuses --overlap, which parts a row's nonzeros. One check,
 * asked by the session before any GPU is found and by the GPU layer for
 * the count it found. */
amp_status amp_rules_gpu_layout(amp_method method, int completion, long ngpus, int equal_nnz,
                                int overlap, amp_error *err);

enum {
    AMP_PHASE_MTTKRP, AMP_PHASE_GRAM, AMP_PHASE_SOLVE, AMP_PHASE_NORMALIZE, AMP_PHASE_FIT,
    AMP_PHASE_COMM,   /* collectives between GPUs (multi-GPU runs only) */
    AMP_PHASE_UPDATE, /* a constrained method's update (ALS: the solve) */
    AMP_NPHASES
};

typedef struct amp_cpd {
    unsigned nmodes, rank;
    uint64_t rows[AMP_MAX_MODES];
    double *A[AMP_MAX_MODES];  /* rows[m] x rank, row-major, columns normalized */
    double *lambda;
    unsigned iters;
    double fit;
    int converged;             /* stopped because the fit changed by less than tol */
    int stopped;               /* stopped because opts.stop asked */
    /* CP-APR, after each outer iteration (on_iter's caller reads them):
     * the Poisson log-likelihood, the KKT violation (the largest of the
     * modes') and the inner iterations taken; fit is loglik for it. */
    double loglik, kkt;
    unsigned inner_iters;
    /* GCP, after each epoch (fit is gcp_loss): the loss estimated on the
     * fixed sample and that estimate's standard error, the exact loss (NAN
     * where it is not computed: amp_gcp.h), the epoch's step size, whether
     * it failed (the estimate rose: its factors dropped), failures so far. */
    double gcp_loss, gcp_stderr, gcp_exact, gcp_rate;
    int gcp_failed;
    unsigned gcp_fails;
    int pinv_used;             /* a Gram product was singular: pseudo-inverse solve */
    double seconds[AMP_NPHASES];
    /* Per mode, NULL or R x R (row-major): the Gram matrix of starting
     * rows that A has no room for, those of slices the file dropped as
     * empty (amp_factors_read). The textbook algorithm carries them, so a
     * backend adds this to mode m's Gram until it first updates mode m;
     * their MTTKRP rows are zero, so the update makes them zero. */
    double *start_gram[AMP_MAX_MODES];
    /* --observed nonzeros, after each iteration (on_iter's caller reads
     * them): fit is 1 - |x - m| / |x| over the training entries. */
    struct {
        double rmse_train, rmse_test;    /* rmse_test NAN without test entries */
        uint64_t n_train, n_test;
        uint64_t unobserved[AMP_MAX_MODES];   /* rows with no training entry: kept */
        uint64_t singular[AMP_MAX_MODES];     /* rows whose system was singular: kept */
    } completion;
} amp_cpd;

void amp_cpd_opts_init(amp_cpd_opts *o);

/* Factors of a fresh decomposition of t: uniform [0, 1), each entry a
 * function of the seed, the rank, its mode, column and original index
 * (t->new_to_orig; the compact index where that is NULL), so the same for
 * any layout of the file and any thread count. */
amp_status amp_cpd_init_random(const amp_tensor *t, unsigned rank, uint64_t seed, amp_cpd *c,
                               amp_error *err);
void amp_cpd_free(amp_cpd *c);

/* ---- factor files -------------------------------------------------------- */

/* text: PREFIX.modeN.mat and PREFIX.lambda.mat (SPLATT); npy: the same as
 * PREFIX.*.npy; ktensor: the whole model in PREFIX.ktn (Tensor Toolbox,
 * pyttb, GenTen), every row of every mode. */
typedef enum amp_factor_format {
    AMP_FACTORS_TEXT = 0, AMP_FACTORS_NPY, AMP_FACTORS_KTENSOR
} amp_factor_format;

/* Which rows a factor file holds: every index of the mode in the original
 * index space (slices the file dropped as empty are zero rows), or only
 * the nonempty ones, in ascending original index, each with its index:
 * first on its line in text (1-based, the line it has in the full layout),
 * in PREFIX.modeN.index.npy (<u8, 0-based, its row in the full array)
 * beside npy. */
typedef enum amp_factor_rows { AMP_ROWS_ALL = 0, AMP_ROWS_NONEMPTY } amp_factor_rows;

/* The output files of a decomposition, created before it runs (so that a
 * missing or read-only directory fails at once) and written after.
 *
 * A set of several files (text or npy) comes with PREFIX.manifest: a
 * random identifier of the run and each file's name, size and XXH3-64, so
 * that a reader can tell a set whose files come from different runs (a
 * run killed while renaming its files into place over an earlier one's):
 *
 *     amped factor set 1
 *     run 32-HEX-DIGITS
 *     file SIZE XXH3-HEX NAME     (one a file; NAME without directory,
 *                                  SIZE and XXH3 "-" where the file is a
 *                                  device or FIFO, written directly)
 *
 * The manifest is placed last, so that a set stopped part way disagrees
 * with the manifest in place. A ktensor is one file and needs none. */
typedef struct amp_factor_files {
    amp_outfile out[2 * AMP_MAX_MODES + 2];   /* factors, lambda, index files, manifest */
    unsigned nfiles;                          /* open */
    unsigned nmodes;
    amp_factor_format format;
    amp_factor_rows rows;
    int manifest;                             /* out[nfiles - 1] is the manifest */
    char run_id[33];                          /* 128 random bits in hex */
} amp_factor_files;

/* The k-th file of the set -o PREFIX writes (malloc'd; the manifest last),
 * or NULL past the last (*more set to 0) or for want of memory (*more 1):
 * the names to compare with the run's other paths before any is opened. */
char *amp_factors_file_name(const char *prefix, unsigned nmodes, amp_factor_format format,
                            amp_factor_rows rows, unsigned k, int *more);

/* AMP_ERR_NOMEM, with the sizes and what to do, when writing rows in the
 * original index space would need a row map (8 bytes an index of the
 * largest mode) of mem_available bytes or more, or factor files larger
 * than the free space of the file system that holds dir (text counts 2
 * bytes a value, npy 8). AMP_OK for AMP_ROWS_NONEMPTY. */
amp_status amp_factors_check_room(const amp_tensor *t, unsigned rank, amp_factor_format format,
                                  amp_factor_rows rows, uint64_t mem_available,
                                  const char *dir, amp_error *err);
/* Create PREFIX.mode1.mat ... PREFIX.modeN.mat and PREFIX.lambda.mat
 * (text), or .npy (and, for nonempty rows, PREFIX.modeN.index.npy);
 * nothing takes its name yet. On failure nothing is left open. */
amp_status amp_factors_create(amp_factor_files *ff, const amp_tensor *t, const char *prefix,
                              amp_factor_format format, amp_factor_rows rows,
                              amp_error *err);
/* Write c's factors and the manifest into ff's files and finish them
 * (amp_outfile_finish: on disk, closed, nameless yet); on failure every
 * file is gone. */
amp_status amp_factors_finish(amp_factor_files *ff, const amp_tensor *t, const amp_cpd *c,
                              amp_precision precision, amp_error *err);
/* ff's outfiles in the order to place them (the manifest last), into list
 * (room for 2 AMP_MAX_MODES + 2); their number. */
size_t amp_factors_outfiles(amp_factor_files *ff, amp_outfile **list);
/* Close ff's files, leaving none (or, once placed, only freeing them). */
void amp_factors_abort(amp_factor_files *ff);
/* Create, finish and place: every row, in the original index space. */
amp_status amp_factors_write(const amp_tensor *t, const amp_cpd *c, const char *prefix,
                             amp_factor_format format, amp_precision precision,
                             amp_error *err);

/* Read starting factors in any form amped-run -o writes, found under
 * PREFIX (amp_factors_find): PREFIX.modeN.mat (text) or PREFIX.modeN.npy
 * (f64 or f32), each with every row of the original index space or only
 * the nonempty ones after their index (text: first on the line, 1-based;
 * npy: PREFIX.modeN.index.npy, 0-based), the indices ascending and each
 * once, rows left out zero; or PREFIX.ktn, checked against the tensor's
 * modes and dimensions and the rank. Lambda (PREFIX.lambda.mat or .npy
 * when present, a ktensor's weights) is folded into the last mode's
 * columns. Rows of slices the file dropped as empty go into
 * c->start_gram (left NULL where they are all zero, as in the files
 * amped-run writes). Where PREFIX.manifest exists, each file of a text or
 * npy set read must be the one it lists (name, size, XXH3-64), else
 * AMP_ERR_CORRUPT naming the file: a set that mixes two runs. A set
 * without one (SPLATT's, or amped's before the manifest) is read
 * unchecked. */
amp_status amp_factors_read(const amp_tensor *t, const char *prefix, unsigned rank,
                            amp_cpd *c, amp_error *err);
/* Which form amp_factors_read takes from PREFIX: the only one of text
 * (PREFIX.modeN.mat, PREFIX.lambda.mat), npy (PREFIX.modeN.npy,
 * PREFIX.lambda.npy, PREFIX.modeN.index.npy) and ktensor (PREFIX.ktn) of
 * which a file exists; where several do, the text or npy set that
 * PREFIX.manifest lists; otherwise AMP_ERR_FORMAT (an ambiguous prefix),
 * as where none does (AMP_ERR_IO). */
amp_status amp_factors_find(const char *prefix, unsigned nmodes, amp_factor_format *format,
                            amp_error *err);

/* Work for several GPUs: which GPU computes which nonzeros and owns which
 * factor rows, and each GPU's part of the tensor.
 *
 * Owner computes (the default, AMPED's sharding): per mode, the file's
 * shards are dealt largest first to the GPU with the fewest nonzeros so
 * far. A GPU writes only the output rows of its shards, so no two GPUs
 * ever add into the same row. The run renumbers each mode's rows so that
 * every GPU's rows are one contiguous range (its shards one after the
 * other, GPU 0 first); a part's BLCO words are re-encoded in that order.
 * Then solving, normalizing and exchanging a GPU's rows each touch one
 * range, and the exchange lands rows in place.
 *
 * Equal nonzeros (the ablation): each mode copy cut into equal ranges of
 * nonzeros whatever their rows; every GPU's partial MTTKRP covers every
 * row and is summed across GPUs (reduce-scatter), after which GPU g owns
 * row block g of ceil(rows / N) rows. Rows keep the file's order.
 *
 * Nothing here needs a GPU: the parts are ordinary amp_tensors. */
/* ---- the partition of shards over GPUs --------------------------------- */

#define AMP_MAX_GPUS 64

typedef enum amp_partition_kind {
    AMP_PARTITION_OWNER = 0,      /* shards dealt to GPUs, rows owned */
    AMP_PARTITION_EQUAL_NNZ       /* equal nonzero ranges, rows reduced */
} amp_partition_kind;

typedef struct amp_part_mode {
    uint32_t nshards;
    uint32_t *owner;                      /* GPU of each shard (owner computes) */
    uint64_t nnz[AMP_MAX_GPUS];           /* nonzeros each GPU computes */
    uint32_t nshards_of[AMP_MAX_GPUS];    /* shards each GPU holds */
    /* Rows each GPU solves and sends to the others, in run order. */
    uint64_t row_begin[AMP_MAX_GPUS], row_count[AMP_MAX_GPUS];
    uint64_t *run_row;                    /* file row -> run row; NULL: the same */
    uint64_t largest_shard;               /* nonzeros of the largest shard */
} amp_part_mode;

typedef struct amp_partition {
    amp_partition_kind kind;
    unsigned ngpus, nmodes;
    /* Set before amp_partition_tensor to order each part's copies in two
     * groups (see amp_copy.early_nnz) so that a mode's rows can travel
     * while the next mode's MTTKRP runs on the first group. */
    int overlap;
    /* How the parts find a row's run number: 0 by size (a per-shard map
     * where a mode's run_row table exceeds twice a core's L2, else the
     * table), 1 the map always, -1 the table always (tests compare). */
    int row_lookup;
    unsigned map_buckets;      /* the map's coarse table; 0: 65536 (tests: a few) */
    uint64_t rows[AMP_MAX_MODES];
    amp_part_mode modes[AMP_MAX_MODES];
} amp_partition;

/* Deal t's modes to ngpus GPUs (1 to AMP_MAX_GPUS). */
amp_status amp_partition_new(const amp_tensor *t, unsigned ngpus, amp_partition_kind kind,
                             amp_partition *p, amp_error *err);
void amp_partition_free(amp_partition *p);

/* Largest GPU's nonzeros over the mean, for mode m; *best (if not NULL)
 * gets a bound no dealing of the file's shards can beat: a shard is not
 * split, so the largest one over the mean when it exceeds it. */
double amp_partition_imbalance(const amp_partition *p, unsigned m, double *best);

/* GPU gpu's part of t as a tensor of its own (t is not changed and may be
 * freed after): per mode, the nonzeros that GPU computes, in the run's row
 * numbering, still ordered by output row; copies[d].row_begin/row_count
 * say which rows its MTTKRP writes. rows[], norm_sq and the value type are
 * t's; new_to_orig is not set. Free with amp_tensor_free. */
amp_status amp_partition_tensor(const amp_tensor *t, const amp_partition *p, unsigned gpu,
                                int threads, amp_tensor *part, amp_error *err);

/* Every GPU's part at once (parts[0 .. p->ngpus - 1]), built mode by mode;
 * the parts equal amp_partition_tensor's. release is NULL or t itself:
 * then each mode copy's words and values are freed (set NULL) as soon as
 * every part of that mode exists, so the peak is t plus one mode's parts;
 * t keeps its dimensions, rows, block tables and relabellings but can no
 * longer be read for nonzeros (t->bytes counts what is left). On failure
 * no part is left, and the modes released before it stay released.
 * progress (may be NULL) gets the nonzeros put into parts so far, as each
 * GPU's part of a mode is built, of every mode's nonzeros in all. */
amp_status amp_partition_tensors(const amp_tensor *t, const amp_partition *p, int threads,
                                 amp_tensor *release, amp_load_progress_fn progress,
                                 void *progress_ctx, amp_tensor *parts, amp_error *err);

/* Part `part` of an owner-computes partition p of f's tensor (t: its
 * layout, amp_tensor_load_layout, or more), read from the file alone:
 * only the chunks of the part's shards are read, checked and
 * decompressed. The same part as amp_partition_tensor of the loaded
 * tensor; the most held at once is about twice the part. */
amp_status amp_partition_load(const amp_file *f, const amp_tensor *t, const amp_partition *p,
                              unsigned part, int threads, amp_load_progress_fn progress,
                              void *progress_ctx, amp_tensor *out, amp_error *err);

/* amp_tensor_read_chunks for the chunks of the shards an owner-computes
 * partition p deals to part alone; c->index and c->at count only those
 * chunks and their nonzeros (a mode's in file order). */
amp_status amp_tensor_read_part_chunks(const amp_file *f, const amp_tensor *t,
                                       const amp_partition *p, unsigned part, int threads,
                                       amp_chunk_sink_fn sink, void *sink_ctx,
                                       amp_load_progress_fn progress, void *progress_ctx,
                                       amp_error *err);

/* Factor rows (rows[m] x rank, row-major) from the file's order to the
 * run's and back; src and dst must not overlap. */
void amp_partition_rows_to_run(const amp_partition *p, unsigned m, unsigned rank,
                               const double *src, double *dst);
void amp_partition_rows_to_file(const amp_partition *p, unsigned m, unsigned rank,
                                const double *src, double *dst);

#ifdef __cplusplus
}
#endif
#endif
