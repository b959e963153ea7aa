/* amped-run --starts and --ranks (starts.h): the options and their checks,
 * the models fitted on the CPU or one GPU in batches within the kernel's
 * rank limit, the per-rank table, FMS and the choice of rank; nothing
 * printed (run/starts_out.c). */
#include <config.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_cpu.h"
#include "amp_parse.h"
#include "amp_score.h"
#include "amp_timer.h"
#include "session.h"
#include "starts.h"

int amp_starts_active(const amp_starts_opts *s)
{
    return s->starts_given || s->nranks > 0;
}

amp_status amp_starts_option(amp_starts_opts *s, int code, const char *arg, int *taken,
                             amp_error *err)
{
    uint64_t u, list[AMP_STARTS_MAX_RANKS];
    size_t n;
    *taken = 1;
    switch (code) {
    case AMP_OPT_STARTS:
        AMP_CHECK(amp_parse_u64(arg, 1, AMP_STARTS_MAX, "--starts", &u, err));
        s->starts = (unsigned)u;
        s->starts_given = 1;
        return AMP_OK;
    case AMP_OPT_RANKS:
        AMP_CHECK(amp_parse_u64_list(arg, AMP_STARTS_MAX_RANKS, 1, AMP_CPU_MAX_RANK, "--ranks",
                                     list, &n, err));
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (list[i] == list[j])
                    return AMP_FAIL(err, AMP_ERR_USAGE, "--ranks names rank %u twice",
                                    (unsigned)list[i]);
        /* ascending, whatever the order given: the table and the rules read them so */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && list[j - 1] > list[j]; j--) {
                uint64_t x = list[j];
                list[j] = list[j - 1];
                list[j - 1] = x;
            }
        for (size_t i = 0; i < n; i++)
            s->ranks[i] = (unsigned)list[i];
        s->nranks = (unsigned)n;
        return AMP_OK;
    case AMP_OPT_KEEP_ALL:
        s->keep_all = 1;
        return AMP_OK;
    case AMP_OPT_CHOOSE:
        if (strcmp(arg, "fit-elbow") == 0) {
            s->choose = AMP_CHOOSE_FIT_ELBOW;
            return AMP_OK;
        }
        if (strncmp(arg, "fms", 3) == 0 && (arg[3] == '=' || arg[3] == ':' || arg[3] == ' ')) {
            AMP_CHECK(amp_parse_double(arg + 4, 0, 1, "--choose fms", &s->choose_fms, err));
            s->choose = AMP_CHOOSE_FMS;
            return AMP_OK;
        }
        return AMP_FAIL(err, AMP_ERR_USAGE, "--choose takes fit-elbow or fms F (F in [0, 1]), "
                        "not '%s'", arg);
    }
    *taken = 0;
    return AMP_OK;
}

amp_status amp_starts_check(const amp_starts_opts *s, amp_run_opts *r, int rank_given,
                            amp_error *err)
{
    if (!amp_starts_active(s)) {
        if (s->choose != AMP_CHOOSE_NONE)
            return AMP_FAIL(err, AMP_ERR_USAGE, "--choose picks a rank among --ranks (or the "
                            "starts of --starts): give them");
        return AMP_OK;
    }
    if (rank_given && s->nranks > 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--rank and --ranks: give one (--ranks 8 is one "
                        "rank)");
    if (s->choose == AMP_CHOOSE_FIT_ELBOW && s->nranks < 2)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--choose fit-elbow compares ranks: give --ranks "
                        "with two or more");
    if (s->choose == AMP_CHOOSE_FMS && s->starts < 2)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--choose fms compares starts: give --starts 2 or "
                        "more");
    if (r->init)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--starts and --ranks start from random factors "
                        "(seed, seed + 1, ...), not --init");
    const amp_cpd_opts *o = &r->opts;
    if (o->method == AMP_METHOD_APR || o->method == AMP_METHOD_GCP ||
        o->completion.observed == AMP_OBSERVED_NONZEROS)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--starts and --ranks batch --method als, ao-admm, "
                        "mu and hals; not %s", o->completion.observed == AMP_OBSERVED_NONZEROS
                                                   ? "--observed nonzeros"
                                               : o->method == AMP_METHOD_APR ? "--method cp-apr"
                                                                             : "--method gcp");
    /* One GPU when asked for; several would pair each model's sums and
     * sends across GPUs, not written yet. */
    const int gpus = r->gpu.ndevices > 0 ? (int)r->gpu.ndevices
                     : r->gpus_given     ? r->gpus
                                         : 0;
    if (gpus > 1)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--starts and --ranks run on the CPU or one GPU for "
                        "now, and --%s asks for %d: give --gpus 1, or --gpus 0 for the CPU",
                        r->gpu.ndevices > 0 ? "devices" : "gpus", gpus);
    if (gpus == 0 && r->gpu_only)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--starts and --ranks run on the CPU unless --gpus 1 "
                        "asks for the GPU: %s is the GPU's", r->gpu_only);
    if (gpus == 1 && amp_starts_width(s, o->rank, AMP_GPU_MAX_RANK) == 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--starts and --ranks on the GPU: every rank within "
                        "the GPU kernels' %u (--gpus 0 runs any on the CPU)", AMP_GPU_MAX_RANK);
    r->gpus = gpus;
    return AMP_OK;
}

/* The ranks of the run: --ranks', or --rank's alone. */
static unsigned run_ranks(const amp_starts_opts *s, unsigned rank, unsigned *ranks)
{
    if (s->nranks == 0) {
        ranks[0] = rank;
        return 1;
    }
    memcpy(ranks, s->ranks, s->nranks * sizeof *ranks);
    return s->nranks;
}

/* Models first .. *last - 1: as many as fit `limit` columns, in order. */
static unsigned batch_end(const unsigned *rank_of, unsigned nm, unsigned first, unsigned limit,
                          unsigned *last)
{
    unsigned cols = 0, k = first;
    while (k < nm && cols + rank_of[k] <= limit)
        cols += rank_of[k++];
    *last = k;
    return cols;
}

unsigned amp_starts_width(const amp_starts_opts *s, unsigned rank, unsigned limit)
{
    const unsigned K = s->starts ? s->starts : 1;
    unsigned ranks[AMP_STARTS_MAX_RANKS], widest = 0;
    const unsigned nr = run_ranks(s, rank, ranks);
    for (unsigned i = 0; i < nr; i++)
        if (ranks[i] > limit)
            return 0;
    unsigned *rank_of = malloc((size_t)nr * K * sizeof *rank_of);
    if (rank_of == NULL)   /* the widest a batch can be */
        return limit;
    for (unsigned i = 0; i < nr * K; i++)
        rank_of[i] = ranks[i / K];
    for (unsigned first = 0, last; first < nr * K; first = last) {
        unsigned cols = batch_end(rank_of, nr * K, first, limit, &last);
        widest = cols > widest ? cols : widest;
    }
    free(rank_of);
    return widest;
}

/* ---- the fit ------------------------------------------------------------ */

typedef struct batch_ctx {
    amp_starts_model *m;   /* the batch's first model */
    unsigned first;        /* its index */
    amp_starts_iter_fn on_iter;
    void *ctx;
    int oom;
    /* Per iteration of the batch, the last model's seconds since the
     * iteration began: its time, without the batch's set-up (on a GPU,
     * each model's handles and arrays). */
    double *iter_s;
    unsigned niter, cap;
} batch_ctx;

static void on_model_iter(void *ctx, unsigned k, unsigned iter, double fit, double delta,
                          double seconds)
{
    batch_ctx *b = ctx;
    if (iter > b->cap) {
        unsigned cap = b->cap ? 2 * b->cap : 64;
        cap = cap < iter ? iter : cap;
        double *p = realloc(b->iter_s, cap * sizeof *p);
        if (p == NULL) {
            b->oom = 1;
            return;
        }
        memset(p + b->cap, 0, (cap - b->cap) * sizeof *p);
        b->iter_s = p;
        b->cap = cap;
    }
    b->iter_s[iter - 1] = seconds > b->iter_s[iter - 1] ? seconds : b->iter_s[iter - 1];
    b->niter = iter > b->niter ? iter : b->niter;
    amp_starts_model *m = &b->m[k];
    if (m->nfits == m->cap) {
        unsigned cap = m->cap ? 2 * m->cap : 64;
        double *p = realloc(m->fits, cap * sizeof *p);
        if (p == NULL) {
            b->oom = 1;
            return;
        }
        m->fits = p;
        m->cap = cap;
    }
    m->fits[m->nfits++] = fit;
    if (b->on_iter)
        b->on_iter(b->ctx, b->first + k, iter, fit, delta, seconds);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The rule's rank (index into rows), or -1 with why. */
static int choose_rank(const amp_starts_opts *s, const amp_starts_rank *rows, unsigned n,
                       char *why, size_t why_size)
{
    if (s->choose == AMP_CHOOSE_FMS) {
        int pick = -1;
        for (unsigned i = 0; i < n; i++)
            if (rows[i].fms_median >= s->choose_fms)
                pick = (int)i;
        if (pick < 0)
            snprintf(why, why_size, "no rank's starts repeat: every median FMS is below %g",
                     s->choose_fms);
        else
            snprintf(why, why_size, "the largest rank whose starts repeat: median FMS "
                     "against the best start %.4f >= %g%s", rows[pick].fms_median,
                     s->choose_fms, (unsigned)pick + 1 < n ? "; above it they do not" : "");
        return pick;
    }
    /* fit-elbow: the rank after which the best fit's gain a rank falls the
     * most (the fit of rank 0 taken as 0). */
    if (n < 2) {
        snprintf(why, why_size, "fit-elbow needs two ranks or more");
        return -1;
    }
    int pick = -1;
    double best = -INFINITY, g_at = 0, g_next = 0;
    for (unsigned i = 0; i + 1 < n; i++) {
        double prev_f = i ? rows[i - 1].best_fit : 0, prev_r = i ? rows[i - 1].rank : 0;
        double g = (rows[i].best_fit - prev_f) / (rows[i].rank - prev_r);
        double g1 = (rows[i + 1].best_fit - rows[i].best_fit) / (rows[i + 1].rank - rows[i].rank);
        if (g - g1 > best) {
            best = g - g1;
            pick = (int)i;
            g_at = g;
            g_next = g1;
        }
    }
    snprintf(why, why_size, "the fit's elbow: it gains %.3g a rank up to rank %u, %.3g a rank "
             "after", g_at, rows[pick].rank, g_next);
    return pick;
}

void amp_starts_free(amp_starts_result *res)
{
    for (unsigned k = 0; res->models && k < res->made; k++) {
        amp_cpd_free(&res->models[k].c);
        free(res->models[k].fits);
    }
    free(res->models);
    free(res->rows);
    memset(res, 0, sizeof *res);
}

amp_status amp_starts_fit(const amp_starts_opts *s, const amp_tensor *t, const amp_cpd_opts *o,
                          amp_gpu_run *gr, int value_exp, amp_starts_iter_fn on_iter, void *ctx,
                          amp_starts_result *res, amp_error *err)
{
    memset(res, 0, sizeof *res);
    res->pick = -1;
    res->gpu = gr != NULL;
    const unsigned K = s->starts ? s->starts : 1;
    unsigned ranks[AMP_STARTS_MAX_RANKS];
    const unsigned nr = run_ranks(s, o->rank, ranks);
    const unsigned limit = gr ? AMP_GPU_MAX_RANK : AMP_CPU_MAX_RANK;
    for (unsigned i = 0; i < nr; i++)
        if (ranks[i] > limit)
            return AMP_FAIL(err, AMP_ERR_USAGE, "rank %u passes the %s's limit %u", ranks[i],
                            gr ? "GPU kernels" : "CPU", limit);
    const unsigned nm = nr * K;
    amp_starts_model *ms = res->models = calloc(nm, sizeof *ms);
    amp_starts_rank *rows = res->rows = calloc(nr, sizeof *rows);
    amp_cpd **cs = calloc(nm, sizeof *cs);
    unsigned *rank_of = calloc(nm, sizeof *rank_of);
    double *tmp = calloc(K, sizeof *tmp);
    amp_status rc = AMP_OK;
    res->nmodels = nm;
    res->nranks = nr;
    res->starts = K;
    if (ms == NULL || rows == NULL || cs == NULL || rank_of == NULL || tmp == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
    /* Model k = rank i's start j: seed + j, the start a run alone at that
     * rank and seed takes (amp_cpd_init_random). */
    for (unsigned i = 0; i < nr; i++)
        for (unsigned j = 0; j < K; j++, res->made++) {
            amp_starts_model *m = &ms[res->made];
            m->rank = ranks[i];
            m->seed = o->seed + j;
            m->fms = NAN;
            AMP_CHECK_GOTO(amp_cpd_init_random(t, m->rank, m->seed, &m->c, err), rc, done);
            cs[res->made] = &m->c;
            rank_of[res->made] = m->rank;
        }
    /* Batches of models whose columns fit the kernel's rank limit, in order. */
    double t0 = amp_now();
    for (unsigned first = 0, last; first < nm; first = last) {
        batch_end(rank_of, nm, first, limit, &last);
        if (o->stop && *o->stop) {
            /* stopped in an earlier batch: these never start */
            for (unsigned k = first; k < nm; k++)
                ms[k].c.stopped = 1;
            res->stopped = 1;
            break;
        }
        batch_ctx b = {&ms[first], first, on_iter, ctx, 0, NULL, 0, 0};
        amp_status brc =
            gr ? amp_gpu_run_als_batch(gr, t, o, last - first, cs + first, on_model_iter, &b,
                                       &res->mttkrp_seconds, err)
               : amp_cpu_als_batch(t, o, last - first, cs + first, on_model_iter, &b,
                                   &res->mttkrp_seconds, err);
        for (unsigned i = 0; i < b.niter; i++)
            res->iterate_seconds += b.iter_s[i];
        free(b.iter_s);
        AMP_CHECK_GOTO(brc, rc, done);
        if (b.oom)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory for the fits");
        res->passes++;
    }
    res->seconds = amp_now() - t0;
    for (unsigned k = 0; k < nm; k++) {
        res->stopped |= ms[k].c.stopped;
        if (value_exp != 0)
            for (unsigned r = 0; r < ms[k].rank; r++)
                ms[k].c.lambda[r] = ldexp(ms[k].c.lambda[r], -value_exp);
    }
    /* Per rank: the best start, the spread, FMS of each against the best. */
    for (unsigned i = 0; i < nr; i++) {
        amp_starts_rank *r = &rows[i];
        amp_starts_model *g = &ms[i * K];
        r->rank = ranks[i];
        r->best = i * K;
        r->worst_fit = INFINITY;
        for (unsigned j = 0; j < K; j++) {
            if (g[j].c.fit > ms[r->best].c.fit)
                r->best = i * K + j;
            r->worst_fit = g[j].c.fit < r->worst_fit ? g[j].c.fit : r->worst_fit;
        }
        r->best_fit = ms[r->best].c.fit;
        unsigned n = 0;
        for (unsigned j = 0; j < K; j++) {
            AMP_CHECK_GOTO(amp_fms(&ms[r->best].c, &g[j].c, &g[j].fms, NULL, err), rc, done);
            if (i * K + j != r->best)
                tmp[n++] = g[j].fms;
        }
        qsort(tmp, n, sizeof *tmp, cmp_double);
        r->fms_min = n ? tmp[0] : NAN;
        r->fms_median = n == 0 ? NAN : n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
    }
    if (s->choose != AMP_CHOOSE_NONE)
        res->pick = choose_rank(s, rows, nr, res->why, sizeof res->why);
done:
    free(cs);
    free(rank_of);
    free(tmp);
    if (rc != AMP_OK)
        amp_starts_free(res);
    return rc;
}
