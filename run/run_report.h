/* What amped-run tells its user: the per-iteration record and the JSON
 * document (--json) that carries the same figures as the text report. */
#ifndef AMP_RUN_REPORT_H
#define AMP_RUN_REPORT_H

#include <stdint.h>

#include "amp_core.h"
#include "amp_gcp.h"

typedef struct amp_iter_record {
    unsigned iter;
    double fit, delta, seconds;
    /* CP-APR (whose fit and delta are the log-likelihood and its change):
     * the log-likelihood, the KKT violation, the inner iterations. */
    double loglik, kkt;
    unsigned inner;
    /* --observed nonzeros: the RMSEs on the training and test entries
     * (rmse_test NAN without test entries). */
    double rmse_train, rmse_test;
    /* GCP, per epoch (fit: gcp_loss): amp_cpd's gcp_* after it. */
    double gcp_loss, gcp_stderr, gcp_exact, gcp_rate;
    int gcp_failed;
    double phase[AMP_NPHASES];   /* this iteration's time in each phase */
} amp_iter_record;

/* One GPU of a run, summed over the iterations (seconds). */
typedef struct amp_report_gpu {
    int device;
    const char *name;
    int streamed, compressed;
    double memory_bytes;
    /* How it held its part and what was asked (--memory's words), the
     * sizes the plan compared (remap_bytes 0: not possible there), whether
     * the file holds every mode's remap positions (auto remaps only then),
     * and the tensor's device bytes as they came and as planned. */
    const char *memory, *asked;
    double avail_bytes, resident_bytes, remap_bytes, tensor_bytes, tensor_plan_bytes;
    int remap_in_file, remap_skipped;   /* skipped: auto streamed for want of them */
    /* Two copies remapped: modes whose positions came from the file, the
     * seconds they took at load, the remap kernels' GPU time and count. */
    unsigned remap_from_file, remaps, remaps_fused;
    double remap_positions_seconds, remap_seconds;
    uint64_t nnz[AMP_MAX_MODES], rows[AMP_MAX_MODES];
    double mttkrp[AMP_MAX_MODES], busy[AMP_MAX_MODES], comm[AMP_MAX_MODES], idle[AMP_MAX_MODES];
    double exchange[AMP_MAX_MODES];
    double phase[AMP_NPHASES];
} amp_report_gpu;

/* One process of a run over several (MPI), or one GPU of one, summed
 * over the iterations. */
typedef struct amp_report_process {
    unsigned process;
    const char *host;
    int gpu;                           /* its CUDA device; -1: the CPU backend */
    int threads;                       /* the process's CPU threads */
    uint32_t shards[AMP_MAX_MODES];    /* the shards dealt to it, per mode */
    uint64_t nnz[AMP_MAX_MODES], rows[AMP_MAX_MODES];   /* it computes, it owns */
    double mttkrp, exchange, wait;     /* seconds */
} amp_report_process;

typedef struct amp_run_report {
    const char *path;
    const amp_tensor *t;
    const amp_cpd_opts *opts;
    const amp_mode_rule *rule;   /* each mode's constraint and penalties, or NULL */
    const char *backend;       /* "cpu" or "gpu" */
    const char *device;        /* the GPU's name, or NULL */
    double stream_bytes_per_nnz;   /* streamed GPU runs: host-to-device bytes per nonzero per mode */
    int direct_upload;         /* the nonzeros went from the file straight to the GPU */
    int threads;
    amp_iter_record *iters;
    unsigned niters, cap;
    double phase_so_far[AMP_NPHASES];   /* amp_report_add_iter's last */
    int converged;
    double final_fit;
    double seconds_load, seconds_upload, seconds_output, seconds_total;
    /* The starting factors: drawn from the seed or read (--init). */
    double seconds_start;
    const double *phase_seconds;   /* AMP_NPHASES, or NULL */
    /* GPU runs: each GPU, how the work was split and its balance. */
    const amp_report_gpu *gpus;
    unsigned ngpus;
    const char *partition;
    double imbalance[AMP_MAX_MODES], imbalance_bound[AMP_MAX_MODES];
    uint64_t send_parts[AMP_MAX_MODES];   /* amp_gpu_run_parts */
    const char *row_exchange;   /* how rows go between GPUs: "nccl", "copy"; NULL: one GPU */
    /* Runs over several processes: each process, or each GPU of each
     * (nprocesses 0 otherwise). */
    const amp_report_process *processes;
    unsigned nprocesses;
    /* --mttkrp-only */
    const double *mttkrp_mode_seconds;   /* nmodes, or NULL */
    unsigned mttkrp_rounds;
    /* --check */
    const double *check_rel_err;         /* nmodes, or NULL */
    /* -o: the prefix and the run identifier its manifest holds (NULL for
     * a ktensor, which has none), or NULL */
    const char *factors_prefix, *factors_run;
    /* --observed nonzeros: the run's counts (NULL otherwise) and
     * --holdout-file's path (or NULL). */
    const amp_cpd *completion;
    const char *holdout_file;
    /* --method gcp: the sample sizes and weights the run took, or NULL */
    const amp_gcp_plan *gcp_plan;
    /* --method gcp on a GPU: "resident" or "stream"; NULL on the CPU */
    const char *gcp_memory;
} amp_run_report;

/* One iteration; phase_so_far: each phase's time from the start of the
 * run to the end of this iteration (amp_cpd.seconds as on_iter finds
 * it), of which the record keeps what this iteration added. */
amp_status amp_report_add_iter(amp_run_report *r, unsigned iter, double fit, double delta,
                               double seconds, const double *phase_so_far, amp_error *err);

/* Write the report as JSON into of (opened by the caller before the run,
 * so that a path it cannot write fails before any work) and finish it
 * (amp_outfile_finish): the caller places it with the run's other
 * outputs. On failure of is aborted. */
amp_status amp_report_write_json(const amp_run_report *r, amp_outfile *of, amp_error *err);

/* The same figures as a page of charts (report_html.c), the same way. */
amp_status amp_report_write_html(const amp_run_report *r, amp_outfile *of, amp_error *err);

/* The phases' names, as the JSON and the page give them. */
extern const char *const amp_report_phase_names[AMP_NPHASES];

#endif
