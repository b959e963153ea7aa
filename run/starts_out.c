/* amped-run --starts and --ranks (starts.h): what amped-run prints of the
 * batch that amp_starts_fit runs, and the files it writes (-o, --json,
 * --report). */
#include <config.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_strbuf.h"
#include "amp_svg.h"
#include "session.h"
#include "starts.h"

/* JSON's number: finite or null. */
static void jnum(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.17g", x);
    else
        fputs("null", f);
}

static amp_status write_json(const amp_starts_opts *s, const amp_cpd_opts *o,
                             const amp_starts_result *res, amp_outfile *of, amp_error *err)
{
    const amp_starts_model *ms = res->models;
    const amp_starts_rank *rows = res->rows;
    const unsigned nm = res->nmodels, nr = res->nranks;
    const int pick = res->pick;
    const char *why = res->why;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    fprintf(f, "{\n  \"program\": \"amped-run\",\n  \"batch\": {\"starts\": %u, \"seed\": %llu, "
            "\"method\": \"%s\", \"backend\": \"%s\", \"tol\": ", s->starts,
            (unsigned long long)o->seed, amp_method_name(o->method), res->gpu ? "gpu" : "cpu");
    jnum(f, o->tol);
    fprintf(f, ", \"max_iters\": %u, \"models\": %u, \"passes\": %u, \"seconds\": ",
            o->max_iters, nm, res->passes);
    jnum(f, res->seconds);
    fprintf(f, ", \"iterate_seconds\": ");
    jnum(f, res->iterate_seconds);
    fprintf(f, ", \"mttkrp_seconds\": ");
    jnum(f, res->mttkrp_seconds);
    fprintf(f, "},\n  \"models\": [\n");
    for (unsigned k = 0; k < nm; k++) {
        const amp_starts_model *m = &ms[k];
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
        const amp_starts_rank *r = &rows[i];
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
static amp_status write_html(const amp_starts_opts *s, const amp_cpd_opts *o,
                             const amp_starts_result *res, amp_outfile *of, amp_error *err)
{
    const amp_starts_model *ms = res->models;
    const amp_starts_rank *rows = res->rows;
    const unsigned nr = res->nranks;
    const int gpu = res->gpu;
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
        const amp_starts_rank *r = &rows[i];
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

static amp_status write_model(const amp_tensor *t, const amp_starts_model *m,
                              const amp_starts_out *out,
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

amp_status amp_starts_run(const amp_starts_opts *s, const amp_tensor *t, const amp_cpd_opts *o,
                          amp_gpu_run *gr, const amp_starts_out *out, amp_error *err)
{
    const unsigned K = s->starts ? s->starts : 1;
    const unsigned nr = s->nranks ? s->nranks : 1;
    if (!out->quiet) {
        unsigned cols = 0;
        for (unsigned i = 0; i < nr; i++)
            cols += K * (s->nranks ? s->ranks[i] : o->rank);
        printf("%-10s %u model%s (%u start%s, seed %llu on; rank%s", "starts:", nr * K,
               nr * K == 1 ? "" : "s", K, K == 1 ? "" : "s", (unsigned long long)o->seed,
               nr == 1 ? "" : "s");
        for (unsigned i = 0; i < nr; i++)
            printf("%s%u", i ? "," : " ", s->nranks ? s->ranks[i] : o->rank);
        printf("), %s, %u columns side by side in one MTTKRP a mode, at most %u iteration%s, "
               "tol %g, on %s\n", o->method == AMP_METHOD_ALS ? "cp-als"
                                                              : amp_method_name(o->method),
               cols, o->max_iters, o->max_iters == 1 ? "" : "s", o->tol,
               gr ? "one GPU" : "the CPU");
        fflush(stdout);
    }
    amp_starts_result res;
    AMP_CHECK(amp_starts_fit(s, t, o, gr, out->value_exp, NULL, NULL, &res, err));
    const amp_starts_model *ms = res.models;
    const amp_starts_rank *rows = res.rows;
    const unsigned nm = res.nmodels;
    amp_status rc = AMP_OK;
    if (!out->quiet) {
        printf("  rank  best fit      seed  worst fit     spread     FMS min  FMS median  "
               "iters (best)\n");
        for (unsigned i = 0; i < nr; i++) {
            const amp_starts_rank *r = &rows[i];
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
               nm == 1 ? "" : "s", res.passes, res.passes == 1 ? "" : "es", res.seconds,
               res.mttkrp_seconds);
        if (s->choose != AMP_CHOOSE_NONE) {
            if (res.pick >= 0)
                printf("recommended rank: %u (%s)\n", rows[res.pick].rank, res.why);
            else
                printf("recommended rank: none (%s)\n", res.why);
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
        AMP_CHECK_GOTO(write_html(s, o, &res, out->html, err), rc, done);
    if (out->json)
        AMP_CHECK_GOTO(write_json(s, o, &res, out->json, err), rc, done);
done:
    amp_starts_free(&res);
    return rc;
}
