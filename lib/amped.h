/* amped.h: the public C interface of libamped.
 *
 * CP decomposition of sparse tensors on the CPU (OpenMP) and on one or
 * several GPUs (CUDA, rows exchanged with NCCL or copy engines), the same
 * code that amped-prep and amped-run run. One header, opaque handles,
 * plain C types; link with `pkg-config --libs amped`.
 *
 *     amped_tensor *t;  amped_options *o;  amped_result *r;
 *     if (amped_tensor_open("x.amp", &t) != AMPED_OK)
 *         fprintf(stderr, "%s\n", amped_last_error());
 *     amped_options_new(&o);
 *     amped_options_set(o, "rank", "16");
 *     amped_options_set(o, "method", "hals");      any amped-run option
 *     amped_cp(t, o, NULL, NULL, &r);
 *     amped_result_factor(r, 0, buffer);            dims[0] x 16, row-major
 *     amped_result_free(r); amped_options_free(o); amped_tensor_free(t);
 *
 * Errors: every function that can fail returns an amped_status (0 is
 * success) and leaves a message, naming the file, line or section where
 * it knows one, in amped_last_error() of the calling thread. The library
 * never prints, never exits and never installs a signal handler.
 *
 * Threads: handles may be used from any thread, one call at a time per
 * handle; amped_cp on different tensors may run at once. A tensor is
 * never modified by amped_cp.
 *
 * Stability: the part marked STABLE keeps its source and binary interface
 * within a major version (libtool -version-info says so to the linker);
 * the part marked EXPERIMENTAL may change in any release. */
#ifndef AMPED_H
#define AMPED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ===================== STABLE ============================================ */

#define AMPED_VERSION_MAJOR 0
#define AMPED_VERSION_MINOR 1
#define AMPED_VERSION_PATCH 0
#define AMPED_VERSION_NUMBER \
    (AMPED_VERSION_MAJOR * 10000 + AMPED_VERSION_MINOR * 100 + AMPED_VERSION_PATCH)

/* The library's version (compare with AMPED_VERSION_NUMBER, the header's). */
unsigned amped_version_number(void);
const char *amped_version_string(void);
/* What this build has, one "key: value" a line: cuda, nccl, openmp, blas,
 * the CUDA runtime's version. Static storage. */
const char *amped_build_info(void);

/* The numbers are amp_status's (common/amp_status.h) and never change. */
typedef enum amped_status {
    AMPED_OK = 0,
    AMPED_ERR_USAGE = 1,        /* an argument or option is invalid */
    AMPED_ERR_NOMEM = 2,        /* host or device memory ran out */
    AMPED_ERR_IO = 3,           /* open, read, write or rename failed */
    AMPED_ERR_PARSE = 4,        /* malformed input text */
    AMPED_ERR_RANGE = 5,        /* a number outside its range (an index beyond its dim) */
    AMPED_ERR_FORMAT = 6,       /* not a format this build reads */
    AMPED_ERR_CORRUPT = 7,      /* a file's structure is inconsistent */
    AMPED_ERR_CHECKSUM = 8,     /* a stored checksum does not match */
    AMPED_ERR_VERSION = 9,      /* a format version this build cannot read */
    AMPED_ERR_DUPLICATE = 10,   /* repeated coordinates where none are allowed */
    AMPED_ERR_EMPTY = 11,       /* no nonzeros */
    AMPED_ERR_CUDA = 12,        /* a CUDA call failed */
    AMPED_ERR_NO_DEVICE = 13,   /* no usable GPU */
    AMPED_ERR_UNSUPPORTED = 14, /* valid, but not in this build or not for this input */
    AMPED_ERR_INTERNAL = 15,    /* a bug in amped */
    AMPED_ERR_TRUNCATED = 16,   /* a file ends before the data it declares */
    AMPED_ERR_PEER = 17         /* another process or GPU of the run failed */
} amped_status;

/* A short static description of a status ("an argument is invalid"). */
const char *amped_strerror(amped_status status);
/* The message of the last call that failed on this thread ("" if none):
 * valid until the next failing call on this thread. */
const char *amped_last_error(void);

/* ---- tensors -------------------------------------------------------------- */

typedef struct amped_tensor amped_tensor;

/* Open an .amp file (amped-prep's), checking its tables; the nonzeros are
 * read, and their checksums checked, when a decomposition needs them. */
amped_status amped_tensor_open(const char *path, amped_tensor **out);

/* Index arrays as the caller holds them. */
typedef enum amped_index_type {
    AMPED_INDEX_INT32 = 0, AMPED_INDEX_INT64, AMPED_INDEX_UINT32, AMPED_INDEX_UINT64
} amped_index_type;

/* A tensor in coordinate form: nonzero k's index in mode m is
 * indices[k * nnz_stride + m * mode_stride] (in elements of index_type),
 * so nnz x N arrays (nnz_stride N, mode_stride 1), N x nnz (1, nnz) and
 * any strided view are read where they lie. values[k * value_stride]. */
typedef struct amped_coo {
    unsigned nmodes;             /* 1 to 32 */
    uint64_t nnz;                /* 1 or more */
    const void *indices;
    amped_index_type index_type;
    int64_t nnz_stride, mode_stride;
    int index_base;              /* 0 or 1: the smallest index */
    const double *values;        /* finite */
    int64_t value_stride;        /* 0 means 1 */
    const uint64_t *dims;        /* NULL: each mode's largest index + 1 */
} amped_coo;

/* Build options: NULL takes amped-prep's defaults for each. */
typedef struct amped_build_options {
    uint32_t shards;             /* per mode; 0: amped-prep's default (64) */
    int level;                   /* Zstandard level, -7 to 22, 0 stores; default 1 */
    int duplicates;              /* 0 sums repeated coordinates, 1 refuses them */
    int remap_streams;           /* also store the remap positions (--remap-streams) */
    int threads;                 /* 0: every CPU */
    /* Provenance recorded in the file (what amped-prep records of its
     * input): a name ("" or NULL: none), its size and XXH3-64 (0: unknown). */
    const char *source_name;
    uint64_t source_size, source_hash;
} amped_build_options;

/* Check (every index within its dimension and the index base, values
 * finite, at least one nonzero), sum repeated coordinates and build the
 * tensor's mode copies exactly as amped-prep does, in parallel, in memory:
 * no file is written. The caller's arrays are only read, and may be freed
 * once this returns. */
amped_status amped_tensor_from_coo(const amped_coo *coo, const amped_build_options *opts,
                                   amped_tensor **out);

/* Read a .tns (plain, .gz or .zst) or .bin file as amped-prep does, or
 * open an .amp file (by its first bytes, whatever its name). */
amped_status amped_tensor_load(const char *path, const amped_build_options *opts,
                               amped_tensor **out);

/* Write the tensor as an .amp file: the bytes amped-prep writes for the
 * same nonzeros, options and provenance. The file appears complete or not
 * at all (a temporary file renamed into place). */
amped_status amped_tensor_save(const amped_tensor *t, const char *path);

void amped_tensor_free(amped_tensor *t);

unsigned amped_tensor_nmodes(const amped_tensor *t);
uint64_t amped_tensor_nnz(const amped_tensor *t);
/* dims[m]: mode m's dimension (the original index space). */
void amped_tensor_dims(const amped_tensor *t, uint64_t *dims);
/* |X|^2, repeated coordinates summed. */
double amped_tensor_norm_sq(const amped_tensor *t);
/* 4 where the tensor holds f32 values, 8 for f64. */
int amped_tensor_value_bytes(const amped_tensor *t);

/* ---- options ---------------------------------------------------------------- */

typedef struct amped_options amped_options;

amped_status amped_options_new(amped_options **out);
void amped_options_free(amped_options *o);
/* One of amped-run's long options by name, without the dashes, and its
 * value as on the command line (NULL for a flag such as "overlap"):
 * rank, iters, tol, seed, init, precision, method (als, ao-admm, mu,
 * hals, cp-apr, gcp), constraint, l1, l2, admm-inner, admm-tol; CP-APR's
 * inner, kappa, kappa-tol, eps-div-zero, allow-noninteger, kappa-rule;
 * completion's observed (all, nonzeros), holdout, holdout-file (with l2
 * its ridge); GCP's loss, samples-grad, samples-loss, epoch-iters, rate,
 * decay, max-fails, huber-delta; several models' starts, ranks, choose
 * (amped_cp_sweep only); threads, gpus, devices, partition, overlap,
 * send-parts, exchange, memory, device-memory, host-memory, stream-chunk,
 * remap-kernel. Checked as amped-run checks it (AMPED_ERR_USAGE naming
 * the option); the checks that need the tensor run in amped_cp. */
amped_status amped_options_set(amped_options *o, const char *name, const char *value);

/* ---- the decomposition ------------------------------------------------------ */

typedef struct amped_result amped_result;

/* What amped_cp reports as it goes. */
typedef struct amped_progress {
    const char *phase;           /* "loading", "splitting", "uploading", "NCCL init",
                                    "iteration" */
    uint64_t done, total;        /* the phase's progress (total 0: unknown) */
    unsigned iter;               /* "iteration": which (from 1), and its */
    double fit, delta, seconds;  /* fit, change of fit, wall time (the fit is the
                                    method's objective: the log-likelihood for
                                    cp-apr, the loss estimate for gcp, the fit to
                                    the training entries for observed nonzeros) */
    /* Added after 0.1.0 (the library fills the struct, so callers that
     * do not read them are unaffected): */
    unsigned model;              /* amped_cp_sweep: which model (from 0); else 0 */
    unsigned rank;               /* that model's rank */
} amped_progress;

/* Called from the thread that called amped_cp. Returning nonzero at an
 * iteration stops the run there: amped_cp then returns AMPED_OK with a
 * result whose amped_result_stopped is 1. */
typedef int (*amped_progress_fn)(void *ctx, const amped_progress *p);

/* CP decomposition of t with o (NULL: every default) on the backend o
 * asks for ("gpus": 0 the CPU; by default every GPU found, else the CPU).
 * Every host and device buffer of the run is freed before it returns,
 * whether it succeeded or not; *out holds the model. */
amped_status amped_cp(const amped_tensor *t, const amped_options *o,
                      amped_progress_fn progress, void *ctx, amped_result **out);

unsigned amped_result_nmodes(const amped_result *r);
unsigned amped_result_rank(const amped_result *r);
unsigned amped_result_iters(const amped_result *r);
double amped_result_fit(const amped_result *r);
int amped_result_converged(const amped_result *r);   /* the fit changed by less than tol */
int amped_result_stopped(const amped_result *r);     /* the progress callback stopped it */
/* lambda: rank values. */
void amped_result_weights(const amped_result *r, double *lambda);
/* Mode m's factor, dims[m] x rank, row-major, in the original index
 * space (rows of indices that never occur are zero), written into the
 * caller's buffer: what amped-run -o writes. Its columns are scaled into
 * lambda as the run left them (2-norm after the first iteration, then the
 * largest magnitude where above 1). */
amped_status amped_result_factor(const amped_result *r, unsigned m, double *out);
/* The fit after each iteration: amped_result_iters values (for cp-apr
 * the log-likelihood, for gcp the loss estimate: the "fit" series). */
void amped_result_fits(const amped_result *r, double *fits);
/* The method that ran: "als", "ao-admm", "mu", "hals", "cp-apr", "gcp". */
const char *amped_result_method(const amped_result *r);
/* A quantity after each iteration (amped_result_iters values into out;
 * out NULL only asks whether the run has it), by its name in amped-run's
 * --json "iterations":
 *   every run:           fit, delta, seconds
 *   method cp-apr:       loglik, kkt (the KKT violation), inner (inner
 *                        iterations taken)
 *   observed nonzeros:   rmse_train, rmse_test (NAN without test entries)
 *   method gcp:          loss (the estimate), loss_stderr, loss_exact (NAN
 *                        where not computed), rate, failed (1 or 0)
 * AMPED_ERR_USAGE for a name not listed, AMPED_ERR_UNSUPPORTED for one
 * that is another method's. */
amped_status amped_result_series(const amped_result *r, const char *name, double *out);
/* Completion (observed nonzeros): the training and test entries, and per
 * mode (nmodes values each; either may be NULL) the rows with no training
 * entry and those whose system was singular, which kept their starting
 * value. AMPED_ERR_UNSUPPORTED for a run that fitted every cell. */
amped_status amped_result_completion(const amped_result *r, uint64_t *n_train,
                                     uint64_t *n_test, uint64_t *unobserved,
                                     uint64_t *singular);

/* Wall seconds of the run's phases (amped-run's "time:" line). */
enum {
    AMPED_TIME_LOAD, AMPED_TIME_UPLOAD, AMPED_TIME_START, AMPED_TIME_MTTKRP, AMPED_TIME_GRAM,
    AMPED_TIME_SOLVE, AMPED_TIME_UPDATE, AMPED_TIME_NORMALIZE, AMPED_TIME_FIT, AMPED_TIME_COMM,
    AMPED_TIME_TOTAL, AMPED_NTIMES
};
/* AMPED_NTIMES values; and each one's name ("load", ..., "total"). */
void amped_result_times(const amped_result *r, double *seconds);
const char *amped_time_name(int which);
/* "cpu" or "gpu"; the first GPU's name ("" on the CPU); GPUs used. */
const char *amped_result_backend(const amped_result *r);
const char *amped_result_device(const amped_result *r);
unsigned amped_result_gpus(const amped_result *r);
void amped_result_free(amped_result *r);

/* ---- devices ------------------------------------------------------------------ */

typedef struct amped_device {
    char name[256];
    int ordinal, cc_major, cc_minor, sm_count;
    uint64_t total_memory, free_memory;
} amped_device;

/* The GPUs this build sees (0 without CUDA or without a GPU). */
int amped_device_count(void);
amped_status amped_device_get(int ordinal, amped_device *out);

/* ===================== EXPERIMENTAL ======================================= */

/* ---- several models: starts and ranks (amped-run --starts, --ranks) ------ */

typedef struct amped_sweep amped_sweep;

/* One rank's row of the table amped-run prints: the best start (the
 * index of its model), the best and worst final fits, and the smallest
 * and median factor match score of the other starts against the best
 * (NAN with one start). */
typedef struct amped_rank_summary {
    unsigned rank, best_model;
    double best_fit, worst_fit, fms_min, fms_median;
} amped_rank_summary;

/* amped-run --starts K --ranks R1,R2,.. [--choose RULE]: options
 * "starts", "ranks" (or "rank") and "choose" ("fit-elbow", "fms F") with
 * the rest (method als, ao-admm, mu or hals; the CPU, or one GPU where
 * "gpus" is 1 or "devices" names one: "gpus" left out means the CPU
 * here), checked as
 * amped-run checks them. Every model (rank i's start j is model
 * i * starts + j, from seed + j) fitted together as amped-run fits them;
 * the progress callback's model and rank say whose iteration it is, and
 * returning nonzero stops every model there (models of later batches then
 * have no iteration). Every buffer of the run is freed before it returns. */
amped_status amped_cp_sweep(const amped_tensor *t, const amped_options *o,
                            amped_progress_fn progress, void *ctx, amped_sweep **out);
unsigned amped_sweep_models(const amped_sweep *w);
/* Model k as a result (owned by w: not freed by the caller); its seed and
 * its FMS against its rank's best start. */
const amped_result *amped_sweep_model(const amped_sweep *w, unsigned k);
uint64_t amped_sweep_seed(const amped_sweep *w, unsigned k);
double amped_sweep_fms(const amped_sweep *w, unsigned k);
/* The ranks, ascending, and each one's row. */
unsigned amped_sweep_ranks(const amped_sweep *w);
amped_status amped_sweep_rank(const amped_sweep *w, unsigned i, amped_rank_summary *out);
/* The rank "choose" recommends, 0 where it chose none or none was asked;
 * *reason (NULL: not wanted) the rule's words, "" without a rule. */
unsigned amped_sweep_chosen(const amped_sweep *w, const char **reason);
int amped_sweep_stopped(const amped_sweep *w);
double amped_sweep_seconds(const amped_sweep *w);
void amped_sweep_free(amped_sweep *w);

/* Threads the CPU backend and the builders use when an option says 0
 * (default: every CPU). Process-wide, as OpenMP's setting is. */
void amped_set_threads(int threads);

#ifdef __cplusplus
}
#endif
#endif
