/* One decomposition from its options to its model: the path that
 * amped-run and libamped (lib/amped.c) both take, so that no step of it
 * exists twice. The options by their amped-run names, checked; the file
 * opened; the nonzeros where the backend wants them (host memory, or one
 * or several GPUs); the values scaled where they are far from 1; the
 * starting factors; the backend's iterations; lambda unscaled.
 *
 * What either caller adds stays with it: amped-run its printing, reports,
 * output files and the runs of several processes (run_dist.c); libamped
 * its handles and tensors built in memory. Nothing here prints or exits. */
#ifndef AMP_SESSION_H
#define AMP_SESSION_H

#include "amp_completion.h"
#include "amp_core.h"
#include "gpu_run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* amped-run's long options, the decomposition's and the program's alike,
 * in one table (getopt_long's). The codes of those without a short form: */
enum {
    AMP_OPT_LIST_DEVICES = 256, AMP_OPT_INFO, AMP_OPT_VERIFY, AMP_OPT_ITERS, AMP_OPT_TOL,
    AMP_OPT_SEED, AMP_OPT_INIT, AMP_OPT_PRECISION, AMP_OPT_FORMAT, AMP_OPT_JSON,
    AMP_OPT_MTTKRP_ONLY, AMP_OPT_CHECK, AMP_OPT_GPUS, AMP_OPT_DEVICE_MEMORY, AMP_OPT_MEMORY,
    AMP_OPT_STREAM_CHUNK, AMP_OPT_DEVICES, AMP_OPT_PARTITION, AMP_OPT_OVERLAP,
    AMP_OPT_HOST_MEMORY, AMP_OPT_SEND_PARTS, AMP_OPT_METHOD, AMP_OPT_CONSTRAINT, AMP_OPT_L1,
    AMP_OPT_L2, AMP_OPT_ADMM_INNER, AMP_OPT_ADMM_TOL, AMP_OPT_ROWS, AMP_OPT_REPORT,
    AMP_OPT_REMAP_KERNEL, AMP_OPT_EXCHANGE, AMP_OPT_INNER, AMP_OPT_KAPPA, AMP_OPT_KAPPA_TOL,
    AMP_OPT_EPS_DIV_ZERO, AMP_OPT_ALLOW_NONINTEGER, AMP_OPT_KAPPA_RULE,
    AMP_OPT_OBSERVED, AMP_OPT_HOLDOUT, AMP_OPT_HOLDOUT_FILE,
    /* GCP's, numbered apart so that other options can join the list above */
    AMP_OPT_LOSS = 400, AMP_OPT_SAMPLES_GRAD, AMP_OPT_SAMPLES_LOSS, AMP_OPT_EPOCH_ITERS,
    AMP_OPT_RATE, AMP_OPT_DECAY, AMP_OPT_MAX_FAILS, AMP_OPT_HUBER_DELTA, AMP_OPT_ADAM,
    /* amped-run's several models (run/starts.h) */
    AMP_OPT_STARTS = 600, AMP_OPT_RANKS, AMP_OPT_KEEP_ALL, AMP_OPT_CHOOSE
};
struct option;
extern const struct option amp_run_long_options[];

/* The most iterations --iters takes. */
#define AMP_RUN_MAX_ITERS 1000000

/* A decomposition's options. */
typedef struct amp_run_opts {
    amp_cpd_opts opts;
    const char *init;                  /* --init PREFIX, or NULL */
    amp_factor_format init_format;     /* what --init found */
    int gpus;                          /* AMP_GPUS_AUTO, 0 (the CPU) or a count */
    int gpus_given;
    int tol_given, iters_given;        /* else CP-APR and GCP take their own defaults */
    const char *gcp_only;              /* the first option of GCP's given */
    int huber_delta_given;
    amp_gpu_opts gpu;
    amp_gpu_als_opts gpu_als;
    const char *gpu_only;              /* the first option of the GPU backend given */
    /* The nonzeros stay in host memory whatever the backend (--check's
     * reference needs them). */
    int keep_host;
    amp_mode_rule rule[AMP_MAX_MODES]; /* each mode's, from opts.rules */
    int value_exp;                     /* the run is of 2^value_exp X */
    /* Completion: --holdout given (even 0), --holdout-file's path. */
    int holdout_given;
    const char *holdout_file;
} amp_run_opts;

void amp_run_opts_init(amp_run_opts *r);

/* Take option `code` (a short option's letter or an AMP_OPT_*) with its
 * argument arg (NULL for a flag): *taken is 1 where it is a decomposition
 * option, which is then checked (AMP_ERR_USAGE naming it, as --name), 0
 * where it is the program's (-o, --json, --info ...), left alone. The
 * strings are kept, not copied. */
amp_status amp_run_option(amp_run_opts *r, int code, const char *arg, int *taken,
                          amp_error *err);
/* The options that exclude or imply each other, once all are given. */
amp_status amp_run_opts_check(amp_run_opts *r, amp_error *err);

/* What one decomposition holds, released by amp_session_close. */
typedef struct amp_session {
    amp_file *f;
    amp_tensor t;
    int have_t;
    amp_cpd c;
    amp_gpu_run *gr;
    int threads;
    /* The caller loads this process's part itself (several processes):
     * the CPU backend's nonzeros are then not read here. */
    int external_load;
    int late_usage;          /* the options disagree with the file (a usage error) */
    double file_norm_sq;     /* t's |X|^2 before scaling */
    double seconds_load, seconds_upload, seconds_start;
    amp_test_set test;       /* --holdout-file's entries (test.idx NULL: none) */
    /* GCP on a GPU (gpu_run.h, amp_gpu_gcp_run): its CUDA device + 1,
     * and its name; 0: GCP runs on the CPU (or the method is another). */
    int gcp_gpu;
    int gcp_stream;   /* on the GPU, samples drawn on the host and streamed */
    char gcp_device_name[256];
} amp_session;

/* Progress as the session loads: a phase beginning (its name, unit and
 * total, as amp_gpu_phase_fn), then progress within it. Either may be
 * NULL. */
typedef struct amp_session_progress {
    amp_gpu_phase_fn phase;
    amp_load_progress_fn progress;
    void *ctx;
} amp_session_progress;

/* Open path and read its layout, and resolve the per-mode rules against
 * its modes (a list of the wrong length: AMP_ERR_USAGE and late_usage);
 * --holdout-file's entries read and checked against its dimensions
 * (AMP_ERR_PARSE or AMP_ERR_RANGE naming the file and line) into s->test,
 * which r->opts.completion.test then points at. */
amp_status amp_session_open(amp_session *s, amp_run_opts *r, const char *path, amp_error *err);
/* The nonzeros where the backend wants them: the GPUs' parts (r->gpus
 * not 0; s->gr stays NULL where the CPU runs instead), else host memory.
 * The time it took goes to seconds_load and seconds_upload. */
amp_status amp_session_load(amp_session *s, amp_run_opts *r, const char *path,
                            const amp_session_progress *p, amp_error *err);
/* CP-APR only: every value a count (AMP_ERR_RANGE naming the first that
 * is not, by its coordinates), or a non-negative real with
 * opts.apr.allow_noninteger; read from host memory, or from the file's
 * chunks where the nonzeros went to the GPUs straight. */
amp_status amp_session_check_counts(amp_session *s, const amp_run_opts *r, const char *path,
                                    amp_error *err);
/* Values far from 1 scaled by a power of 2 (r->value_exp; the GPU
 * backend refuses what it cannot run), unscaled by amp_session_unscale. */
amp_status amp_session_scale(amp_session *s, amp_run_opts *r, amp_error *err);
/* The starting factors: --init's, or random from the seed. */
amp_status amp_session_start(amp_session *s, amp_run_opts *r, amp_error *err);
/* The iterations on the backend loaded, r->opts.on_iter called after each. */
amp_status amp_session_als(amp_session *s, amp_run_opts *r, amp_error *err);
/* Lambda and |X|^2 back to the file's scale. */
void amp_session_unscale(amp_session *s, amp_run_opts *r);
void amp_session_close(amp_session *s);

#ifdef __cplusplus
}
#endif
#endif
