/* amped-run --starts and --ranks (starts.h): the models, their batches
 * within the kernel's rank limit, the per-rank table, FMS, the choice of
 * rank and the files. */
#include <config.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_cpu.h"
#include "amp_parse.h"
#include "amp_score.h"
#include "amp_strbuf.h"
#include "amp_svg.h"
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

/* ---- the run ------------------------------------------------------------ */

typedef struct model {
    amp_cpd c;
    unsigned rank;
    uint64_t seed;
    double *fits;          /* per iteration */
    unsigned nfits, cap;
    double fms;            /* against its rank's best start */
} model;

typedef struct batch_ctx {
    model *m;              /* the batch's first model */
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
    (void)delta;
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
    model *m = &b->m[k];
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
}

typedef struct rank_row {
    unsigned rank, best;   /* best: the model index of the best start */
    double best_fit, worst_fit, fms_min, fms_median;
} rank_row;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The rule's rank (index into rows), or -1 with why. */
static int choose_rank(const amp_starts_opts *s, const rank_row *rows, unsigned n, char *why,
                       size_t why_size)
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

/* JSON's number: finite or null. */
static void jnum(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.17g", x);
    else
        fputs("null", f);
}

static amp_status write_json(const amp_starts_opts *s, const amp_cpd_opts *o, const model *ms,
                             unsigned nm, const rank_row *rows, unsigned nr, int pick,
                             const char *why, unsigned passes, double seconds,
                             double iterate_s, double mttkrp_s, int gpu, amp_outfile *of,
                             amp_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    fprintf(f, "{\n  \"program\": \"amped-run\",\n  \"batch\": {\"starts\": %u, \"seed\": %llu, "
            "\"method\": \"%s\", \"backend\": \"%s\", \"tol\": ", s->starts,
            (unsigned long long)o->seed, amp_method_name(o->method), gpu ? "gpu" : "cpu");
    jnum(f, o->tol);
    fprintf(f, ", \"max_iters\": %u, \"models\": %u, \"passes\": %u, \"seconds\": ",
            o->max_iters, nm, passes);
    jnum(f, seconds);
    fprintf(f, ", \"iterate_seconds\": ");
    jnum(f, iterate_s);
    fprintf(f, ", \"mttkrp_seconds\": ");
    jnum(f, mttkrp_s);
    fprintf(f, "},\n  \"models\": [\n");
    for (unsigned k = 0; k < nm; k++) {
        const model *m = &ms[k];
        fprintf(f, "    {\"rank\": %u, \"seed\": %llu, \"iters\": %u, \"converged\": %s, "
                "\"final_fit\": ", m->rank, (unsigned long long)m->seed, m->c.iters,
                m->c.converged ? "true" : "false");
        jnum(f, m->c.fit);
        fprintf(f, ", \"fms\": ");
        jnum(f, m->fms);
        fprintf(f, ", \"fits\": [");
        for (unsigned i = 0; i < m->nfits; i++) {
            if (i)
                fputs(", ", f);
            jnum(f, m->fits[i]);
        }
        fprintf(f, "]}%s\n", k + 1 < nm ? "," : "");
    }
    fprintf(f, "  ],\n  \"ranks\": [\n");
    for (unsigned i = 0; i < nr; i++) {
        const rank_row *r = &rows[i];
        fprintf(f, "    {\"rank\": %u, \"best_seed\": %llu, \"best_fit\": ", r->rank,
                (unsigned long long)ms[r->best].seed);
        jnum(f, r->best_fit);
        fprintf(f, ", \"worst_fit\": ");
        jnum(f, r->worst_fit);
        fprintf(f, ", \"fit_spread\": ");
        jnum(f, r->best_fit - r->worst_fit);
        fprintf(f, ", \"fms_min\": ");
        jnum(f, r->fms_min);
        fprintf(f, ", \"fms_median\": ");
        jnum(f, r->fms_median);
        fprintf(f, ", \"fms\": [");
        for (unsigned k = 0, first = 1; k < nm; k++)
            if (ms[k].rank == r->rank) {
                fputs(first ? "" : ", ", f);
                jnum(f, ms[k].fms);
                first = 0;
            }
        fprintf(f, "]}%s\n", i + 1 < nr ? "," : "");
    }
    fprintf(f, "  ],\n  \"choose\": ");
    if (s->choose == AMP_CHOOSE_NONE)
        fprintf(f, "null\n");
    else {
        fprintf(f, "{\"rule\": \"%s\", ", s->choose == AMP_CHOOSE_FMS ? "fms" : "fit-elbow");
        if (s->choose == AMP_CHOOSE_FMS) {
            fprintf(f, "\"threshold\": ");
            jnum(f, s->choose_fms);
            fprintf(f, ", ");
        }
        if (pick >= 0)
            fprintf(f, "\"rank\": %u, ", rows[pick].rank);
        else
            fprintf(f, "\"rank\": null, ");
        fprintf(f, "\"reason\": \"");
        for (const char *p = why; *p; p++)
            fputc(*p == '"' || *p == '\\' ? '\'' : *p, f);
        fprintf(f, "\"}\n");
    }
    fprintf(f, "}\n");
    if (fclose(f) != 0) {
        free(buf);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    amp_status rc = amp_outfile_write(of, buf, len, err);
    free(buf);
    if (rc == AMP_OK)
        rc = amp_outfile_finish(of, err);
    if (rc == AMP_OK)
        rc = amp_outfile_place_all(&of, 1, err);
    return rc;
}

/* --report: the per-rank table and a chart of fit and FMS against rank
 * (every plotted value also in its mark's data-x / data-y, as in the
 * single run's page: tests/report_check.py reads them back). */
static amp_status write_html(const amp_starts_opts *s, const amp_cpd_opts *o, const model *ms,
                             const rank_row *rows, unsigned nr, int gpu, amp_outfile *of,
                             amp_error *err)
{
    const unsigned K = s->starts ? s->starts : 1;
    amp_strbuf b = {0};
    char title[96];
    snprintf(title, sizeof title, "amped-run: %u start%s at %u rank%s, %s", K,
             K == 1 ? "" : "s", nr, nr == 1 ? "" : "s",
             o->method == AMP_METHOD_ALS ? "CP-ALS" : amp_method_name(o->method));
    amp_html_begin(&b, title);
    amp_strbuf_printf(&b, "<h2>Ranks</h2>\n<table id=\"ranks\">\n<tr><th>rank</th><th>best "
                      "fit</th><th>seed</th><th>worst fit</th><th>FMS min</th><th>FMS median"
                      "</th></tr>\n");
    double *v = malloc(5 * (size_t)nr * sizeof *v + 1);
    if (v == NULL)
        return amp_html_finish(&b, AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the HTML "
                                            "report"), of, err);
    double *best = v + nr, *worst = best + nr, *fmin = worst + nr, *fmed = fmin + nr;
    for (unsigned i = 0; i < nr; i++) {
        const rank_row *r = &rows[i];
        v[i] = r->rank;
        best[i] = r->best_fit;
        worst[i] = r->worst_fit;
        fmin[i] = r->fms_min;
        fmed[i] = r->fms_median;
        amp_strbuf_printf(&b, "<tr><td data-value=\"%u\">%u</td><td data-value=\"%.17g\">"
                          "%.10f</td><td>%llu</td><td data-value=\"%.17g\">%.10f</td>",
                          r->rank, r->rank, r->best_fit, r->best_fit,
                          (unsigned long long)ms[r->best].seed, r->worst_fit, r->worst_fit);
        if (K > 1)
            amp_strbuf_printf(&b, "<td data-value=\"%.17g\">%.4f</td><td data-value=\"%.17g"
                              "\">%.4f</td></tr>\n", r->fms_min, r->fms_min, r->fms_median,
                              r->fms_median);
        else
            amp_strbuf_printf(&b, "<td>-</td><td>-</td></tr>\n");
    }
    amp_strbuf_printf(&b, "</table>\n<p class=\"note\">FMS: each start's factor match score "
                      "against its rank's best start (1: the same components); the median "
                      "and lowest over the other starts. Fitted on %s.</p>\n",
                      gpu ? "one GPU" : "the CPU");
    /* FMS is there only with two starts or more. */
    amp_series sr[4] = {{"best fit", v, best, nr}, {"worst fit", v, worst, nr},
                        {"FMS median", v, fmed, nr}, {"FMS min", v, fmin, nr}};
    amp_chart c = {"starts-rank", K > 1 ? "Fit and FMS against rank" : "Fit against rank",
                   "rank", K > 1 ? "fit, FMS" : "fit", 0, 0, 0};
    amp_strbuf_printf(&b, "<h2>Fit and FMS</h2>\n");
    amp_svg_lines(&b, &c, sr, K > 1 ? 4 : 2);
    free(v);
    amp_status rc = amp_html_finish(&b, AMP_OK, of, err);
    if (rc == AMP_OK)
        rc = amp_outfile_place_all(&of, 1, err);
    return rc;
}

static amp_status write_model(const amp_tensor *t, const model *m, const amp_starts_out *out,
                              int with_seed, const amp_cpd_opts *o, amp_error *err)
{
    size_t n = strlen(out->prefix) + 64;
    char *name = malloc(n);
    if (name == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    if (with_seed)
        snprintf(name, n, "%s.r%u.s%llu", out->prefix, m->rank, (unsigned long long)m->seed);
    else
        snprintf(name, n, "%s.r%u", out->prefix, m->rank);
    amp_status rc = amp_factors_write(t, &m->c, name, out->format, o->precision, err);
    free(name);
    return rc;
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

amp_status amp_starts_run(const amp_starts_opts *s, const amp_tensor *t, const amp_cpd_opts *o,
                          amp_gpu_run *gr, const amp_starts_out *out, amp_error *err)
{
    const unsigned K = s->starts ? s->starts : 1;
    unsigned ranks[AMP_STARTS_MAX_RANKS];
    const unsigned nr = run_ranks(s, o->rank, ranks);
    const unsigned limit = gr ? AMP_GPU_MAX_RANK : AMP_CPU_MAX_RANK;
    for (unsigned i = 0; i < nr; i++)
        if (ranks[i] > limit)
            return AMP_FAIL(err, AMP_ERR_USAGE, "rank %u passes the %s's limit %u", ranks[i],
                            gr ? "GPU kernels" : "CPU", limit);
    const unsigned nm = nr * K;
    model *ms = calloc(nm, sizeof *ms);
    rank_row *rows = calloc(nr, sizeof *rows);
    amp_cpd **cs = calloc(nm, sizeof *cs);
    unsigned *rank_of = calloc(nm, sizeof *rank_of);
    double *tmp = calloc(K, sizeof *tmp);
    amp_status rc = AMP_OK;
    unsigned made = 0, passes = 0;
    char why[512] = "";
    int pick = -1;
    if (ms == NULL || rows == NULL || cs == NULL || rank_of == NULL || tmp == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
    /* Model k = rank i's start j: seed + j, the start a run alone at that
     * rank and seed takes (amp_cpd_init_random). */
    for (unsigned i = 0; i < nr; i++)
        for (unsigned j = 0; j < K; j++, made++) {
            model *m = &ms[made];
            m->rank = ranks[i];
            m->seed = o->seed + j;
            m->fms = NAN;
            AMP_CHECK_GOTO(amp_cpd_init_random(t, m->rank, m->seed, &m->c, err), rc, done);
            cs[made] = &m->c;
            rank_of[made] = m->rank;
        }
    if (!out->quiet) {
        unsigned cols = 0;
        for (unsigned i = 0; i < nr; i++)
            cols += K * ranks[i];
        printf("%-10s %u model%s (%u start%s, seed %llu on; rank%s", "starts:", nm,
               nm == 1 ? "" : "s", K, K == 1 ? "" : "s", (unsigned long long)o->seed,
               nr == 1 ? "" : "s");
        for (unsigned i = 0; i < nr; i++)
            printf("%s%u", i ? "," : " ", ranks[i]);
        printf("), %s, %u columns side by side in one MTTKRP a mode, at most %u iteration%s, "
               "tol %g, on %s\n", o->method == AMP_METHOD_ALS ? "cp-als"
                                                              : amp_method_name(o->method),
               cols, o->max_iters, o->max_iters == 1 ? "" : "s", o->tol,
               gr ? "one GPU" : "the CPU");
        fflush(stdout);
    }
    /* Batches of models whose columns fit the kernel's rank limit, in order. */
    double t0 = amp_now(), mttkrp_s = 0, iterate_s = 0;
    for (unsigned first = 0, last; first < nm; first = last) {
        batch_end(rank_of, nm, first, limit, &last);
        batch_ctx b = {&ms[first], 0, NULL, 0, 0};
        amp_status brc =
            gr ? amp_gpu_run_als_batch(gr, t, o, last - first, cs + first, on_model_iter, &b,
                                       &mttkrp_s, err)
               : amp_cpu_als_batch(t, o, last - first, cs + first, on_model_iter, &b, &mttkrp_s,
                                   err);
        for (unsigned i = 0; i < b.niter; i++)
            iterate_s += b.iter_s[i];
        free(b.iter_s);
        AMP_CHECK_GOTO(brc, rc, done);
        if (b.oom)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory for the fits");
        passes++;
    }
    const double seconds = amp_now() - t0;
    for (unsigned k = 0; k < nm; k++)
        if (out->value_exp != 0)
            for (unsigned r = 0; r < ms[k].rank; r++)
                ms[k].c.lambda[r] = ldexp(ms[k].c.lambda[r], -out->value_exp);
    /* Per rank: the best start, the spread, FMS of each against the best. */
    for (unsigned i = 0; i < nr; i++) {
        rank_row *r = &rows[i];
        model *g = &ms[i * K];
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
        pick = choose_rank(s, rows, nr, why, sizeof why);
    if (!out->quiet) {
        printf("  rank  best fit      seed  worst fit     spread     FMS min  FMS median  "
               "iters (best)\n");
        for (unsigned i = 0; i < nr; i++) {
            const rank_row *r = &rows[i];
            printf("%6u  %.10f  %4llu  %.10f  %.3e  ", r->rank, r->best_fit,
                   (unsigned long long)ms[r->best].seed, r->worst_fit,
                   r->best_fit - r->worst_fit);
            if (K > 1)
                printf("%7.4f  %10.4f", r->fms_min, r->fms_median);
            else
                printf("%7s  %10s", "-", "-");
            printf("  %5u%s\n", ms[r->best].c.iters, ms[r->best].c.converged ? "" : " (limit)");
        }
        printf("%u model%s in %u pass%s of batched MTTKRPs: %.3f s (MTTKRP %.3f s)\n", nm,
               nm == 1 ? "" : "s", passes, passes == 1 ? "" : "es", seconds, mttkrp_s);
        if (s->choose != AMP_CHOOSE_NONE) {
            if (pick >= 0)
                printf("recommended rank: %u (%s)\n", rows[pick].rank, why);
            else
                printf("recommended rank: none (%s)\n", why);
        }
        fflush(stdout);
    }
    if (out->prefix) {
        for (unsigned i = 0; i < nr; i++)
            AMP_CHECK_GOTO(write_model(t, &ms[rows[i].best], out, 0, o, err), rc, done);
        for (unsigned k = 0; k < nm && s->keep_all; k++)
            AMP_CHECK_GOTO(write_model(t, &ms[k], out, 1, o, err), rc, done);
    }
    if (out->html)
        AMP_CHECK_GOTO(write_html(s, o, ms, rows, nr, gr != NULL, out->html, err), rc, done);
    if (out->json)
        AMP_CHECK_GOTO(write_json(s, o, ms, nm, rows, nr, pick, why, passes, seconds,
                                  iterate_s, mttkrp_s, gr != NULL, out->json, err), rc, done);
done:
    for (unsigned k = 0; k < made; k++) {
        amp_cpd_free(&ms[k].c);
        free(ms[k].fits);
    }
    free(ms);
    free(rows);
    free(cs);
    free(rank_of);
    free(tmp);
    return rc;
}
