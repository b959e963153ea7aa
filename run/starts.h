/* amped-run --starts K and --ranks R1,R2,...: K random starts at each
 * rank fitted together on the CPU (amp_cpu_als_batch) or one GPU
 * (amp_gpu_run_als_batch), one MTTKRP pass a mode an iteration for all;
 * per rank the best start's fit, the spread
 * over the starts, each start's factor match score against the best
 * (amp_fms), a recommended rank where --choose asks.
 *
 * The options, their checks and the fit (amp_starts_fit) are the
 * session's (run/libampsession.a: amped-run and libamped's amped_cp_sweep
 * both call them); printing and files are amped-run's (amp_starts_run,
 * run/starts_out.c). */
#ifndef AMP_STARTS_H
#define AMP_STARTS_H

#include "amp_core.h"
#include "amp_outfile.h"
#include "gpu_run.h"
#include "session.h"

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

/* --starts, --ranks and --choose against the decomposition's options
 * (rank_given: --rank was given), before amp_run_opts_check: AMP_ERR_USAGE
 * naming what disagrees. Where they agree and the run is a batch, r->gpus
 * is set to 0 (the CPU; --gpus auto means the CPU here) or to 1 where
 * --gpus 1 or one --devices asks for one GPU (several are refused, as is
 * a rank past the GPU kernels' limit). */
amp_status amp_starts_check(const amp_starts_opts *s, amp_run_opts *r, int rank_given,
                            amp_error *err);

/* One model of the batch: its rank, seed (--seed + its start), fit after
 * each iteration, and factor match score against its rank's best start. */
typedef struct amp_starts_model {
    amp_cpd c;
    unsigned rank;
    uint64_t seed;
    double *fits;
    unsigned nfits, cap;
    double fms;
} amp_starts_model;

/* One rank's row of the table: the best start (a model's index), the
 * best and worst final fits, the smallest and the median FMS of the
 * other starts against the best (NAN with one start). */
typedef struct amp_starts_rank {
    unsigned rank, best;
    double best_fit, worst_fit, fms_min, fms_median;
} amp_starts_rank;

/* The batch's models (rank i's start j is model i * starts + j), the
 * per-rank table, the rule's choice. */
typedef struct amp_starts_result {
    amp_starts_model *models;
    unsigned nmodels, made;        /* made: models with starting factors (to free) */
    amp_starts_rank *rows;
    unsigned nranks, starts;
    int pick;                      /* index into rows, or -1 (no rule, or none chosen) */
    char why[512];                 /* the rule's reason ("" without one) */
    unsigned passes;               /* batches of models within the kernel's rank limit */
    int stopped;                   /* o->stop asked: later batches were not run */
    int gpu;                       /* fitted on one GPU (else the CPU) */
    double seconds, mttkrp_seconds;
    /* The batches' iterations alone, without their set-up (on a GPU, each
     * model's handles and arrays): per iteration of a batch, the last
     * model's seconds since the iteration began, summed. */
    double iterate_seconds;
} amp_starts_result;

/* Called after each model's iteration, as amp_cpu_batch_fn, with the
 * model's index in the result. */
typedef void (*amp_starts_iter_fn)(void *ctx, unsigned model, unsigned iter, double fit,
                                   double delta, double seconds);

/* Fit every model of s on t (options o: method, tol, iterations, seed,
 * threads, stop) on the CPU (gr NULL) or gr's one GPU (opened for
 * amp_starts_width's columns, gpu.batch set), in batches of models within
 * the backend's rank limit, lambda scaled back by 2^-value_exp
 * (the tensor is 2^value_exp X: amp_session_scale), then the per-rank
 * table and the rule's choice, into *res (freed by amp_starts_free, also
 * on failure). Where o->stop stops a batch, the batches after it are not
 * run: their models keep their starting factors and no iteration. */
amp_status amp_starts_fit(const amp_starts_opts *s, const amp_tensor *t, const amp_cpd_opts *o,
                          amp_gpu_run *gr, int value_exp, amp_starts_iter_fn on_iter, void *ctx,
                          amp_starts_result *res, amp_error *err);
void amp_starts_free(amp_starts_result *res);

/* What amped-run writes and prints. */
typedef struct amp_starts_out {
    const char *prefix;        /* -o, or NULL */
    amp_factor_format format;
    amp_outfile *json;         /* opened, or NULL */
    amp_outfile *html;         /* --report: opened, or NULL */
    int quiet;
    int value_exp;             /* the tensor is 2^value_exp X: lambda scaled back */
} amp_starts_out;

/* amped-run's batch (run/starts_out.c): the header, amp_starts_fit on
 * the CPU (gr NULL) or gr's one GPU, the per-rank table (unless quiet)
 * and the rule's choice, -o's, --json's and --report's files. */
amp_status amp_starts_run(const amp_starts_opts *s, const amp_tensor *t, const amp_cpd_opts *o,
                          amp_gpu_run *gr, const amp_starts_out *out, amp_error *err);

/* The columns of s's widest batch at --rank `rank` under a kernel limit
 * of `limit` (0: a rank passes it): the rank a GPU run must be opened
 * for. */
unsigned amp_starts_width(const amp_starts_opts *s, unsigned rank, unsigned limit);

#endif
