/* amped-run --starts K and --ranks R1,R2,...: K random starts at each
 * rank fitted together on the CPU (amp_cpu_als_batch) or one GPU
 * (amp_gpu_run_als_batch), one MTTKRP pass a mode an iteration for all;
 * per rank the best start's fit, the spread
 * over the starts, each start's factor match score against the best
 * (amp_fms), a recommended rank where --choose asks. */
#ifndef AMP_STARTS_H
#define AMP_STARTS_H

#include "amp_core.h"
#include "amp_outfile.h"
#include "gpu_run.h"

#define AMP_STARTS_MAX 1024u
#define AMP_STARTS_MAX_RANKS 64u

typedef enum { AMP_CHOOSE_NONE, AMP_CHOOSE_FIT_ELBOW, AMP_CHOOSE_FMS } amp_choose_rule;

typedef struct amp_starts_opts {
    unsigned starts;                        /* K (1 unless --starts) */
    unsigned nranks;                        /* 0: --rank's */
    unsigned ranks[AMP_STARTS_MAX_RANKS];
    int starts_given, keep_all;
    amp_choose_rule choose;
    double choose_fms;                      /* --choose fms F */
} amp_starts_opts;

/* Take --starts, --ranks, --keep-all or --choose (*taken 1), else leave
 * the option alone (*taken 0); AMP_ERR_USAGE naming the option. */
amp_status amp_starts_option(amp_starts_opts *s, int code, const char *arg, int *taken,
                             amp_error *err);
/* 1 where the run is a batch of models (--starts or --ranks given). */
int amp_starts_active(const amp_starts_opts *s);

/* What the run writes and prints. */
typedef struct amp_starts_out {
    const char *prefix;        /* -o, or NULL */
    amp_factor_format format;
    amp_outfile *json;         /* opened, or NULL */
    amp_outfile *html;         /* --report: opened, or NULL */
    int quiet;
    int value_exp;             /* the tensor is 2^value_exp X: lambda scaled back */
} amp_starts_out;

/* Fit every model of s on t (options o: method, tol, iterations, seed,
 * threads) on the CPU (gr NULL) or gr's one GPU, in batches of models
 * within the backend's rank limit; print the per-rank table (unless
 * quiet) and the rule's choice, write -o's and --json's files. */
amp_status amp_starts_run(const amp_starts_opts *s, const amp_tensor *t, const amp_cpd_opts *o,
                          amp_gpu_run *gr, const amp_starts_out *out, amp_error *err);

/* The columns of s's widest batch at --rank `rank` under a kernel limit
 * of `limit` (0: a rank passes it): the rank a GPU run must be opened
 * for. */
unsigned amp_starts_width(const amp_starts_opts *s, unsigned rank, unsigned limit);

#endif
