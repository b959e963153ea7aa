/* amped-run --report: the run's report as one HTML page of SVG charts,
 * drawn from the same amp_run_report as the JSON, so the two agree
 * (tests/run_report.sh compares them number by number). */
#include <config.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "amp_alloc.h"
#include "amp_outfile.h"
#include "amp_strbuf.h"
#include "amp_svg.h"
#include "run_report.h"

static void row_text(amp_strbuf *b, const char *key, const char *value)
{
    amp_strbuf_printf(b, "<tr><th class=\"l\">%s</th><td class=\"l\">", key);
    amp_strbuf_xml(b, value);
    amp_strbuf_printf(b, "</td></tr>\n");
}

static void row_dims(amp_strbuf *b, const char *key, const uint64_t *v, unsigned n)
{
    amp_strbuf_printf(b, "<tr><th class=\"l\">%s</th><td class=\"l\">", key);
    for (unsigned m = 0; m < n; m++)
        amp_strbuf_printf(b, "%s%" PRIu64, m ? " &#215; " : "", v[m]);
    amp_strbuf_printf(b, "</td></tr>\n");
}

/* One GPU: how it held the tensor, and the sizes the plan compared. */
static void row_memory(amp_strbuf *b, const amp_report_gpu *g)
{
    char s[400], tb[32], pb[32], rb[32], mb[32], ab[32];
    amp_format_bytes(tb, sizeof tb, (uint64_t)g->tensor_bytes);
    amp_format_bytes(pb, sizeof pb, (uint64_t)g->tensor_plan_bytes);
    amp_format_bytes(rb, sizeof rb, (uint64_t)g->resident_bytes);
    amp_format_bytes(mb, sizeof mb, (uint64_t)g->remap_bytes);
    amp_format_bytes(ab, sizeof ab, (uint64_t)g->avail_bytes);
    snprintf(s, sizeof s, "%s (--memory %s): tensor %s on the device, %s planned; every copy "
             "resident needs %s, two copies remapped %s%s, %s offered", g->memory, g->asked, tb,
             pb, rb, g->remap_bytes > 0 ? mb : "(not possible)",
             g->remap_skipped ? " (fits, but the file has no REMAP sections)" : "",
             ab);
    row_text(b, "memory", s);
}

static void summary(amp_strbuf *b, const amp_run_report *r)
{
    const amp_tensor *t = r->t;
    char s[64];
    amp_strbuf_printf(b, "<h2>Run</h2>\n<table id=\"summary\">\n");
    row_text(b, "tensor", r->path);
    amp_strbuf_printf(b, "<tr><th class=\"l\">modes</th><td class=\"l\">%u</td></tr>\n"
                      "<tr><th class=\"l\">nonzeros</th><td class=\"l\">%" PRIu64 "</td></tr>\n",
                      t->nmodes, t->nnz);
    row_dims(b, "dimensions", t->dims, t->nmodes);
    row_dims(b, "nonempty", t->rows, t->nmodes);
    amp_strbuf_printf(b, "<tr><th class=\"l\">norm</th><td class=\"l\">%.10g</td></tr>\n",
                      sqrt(t->norm_sq));
    row_text(b, "values", t->value_type == AMP_VALUES_F32 ? "f32" : "f64");
    row_text(b, "method", amp_method_name(r->opts->method));
    amp_strbuf_printf(b, "<tr><th class=\"l\">rank</th><td class=\"l\">%u</td></tr>\n",
                      r->opts->rank);
    snprintf(s, sizeof s, "%s%s%s", r->backend, r->device ? ", " : "",
             r->device ? r->device : "");
    row_text(b, "backend", s);
    if (r->ngpus == 1 && r->gpus[0].memory)
        row_memory(b, &r->gpus[0]);
    if (r->ngpus > 1 || r->nprocesses > 0) {
        snprintf(s, sizeof s, "%u GPU%s, %u process%s", r->ngpus, r->ngpus == 1 ? "" : "s",
                 r->nprocesses ? r->nprocesses : 1, r->nprocesses > 1 ? "es" : "");
        row_text(b, "spread over", s);
    }
    amp_strbuf_printf(b, "<tr><th class=\"l\">threads</th><td class=\"l\">%d</td></tr>\n",
                      r->threads);
    row_text(b, "precision", r->opts->precision == AMP_PRECISION_F32 ? "f32" : "f64");
    amp_strbuf_printf(b, "<tr><th class=\"l\">iterations</th><td class=\"l\">%u (%s)</td></tr>\n",
                      r->niters, r->converged ? "converged" : "iteration limit");
    if (r->niters)
        amp_strbuf_printf(b, "<tr><th class=\"l\">final fit</th><td class=\"l\" "
                          "data-value=\"%.17g\">%.10f</td></tr>\n", r->final_fit, r->final_fit);
    amp_strbuf_printf(b, "</table>\n<h2>Time</h2>\n<table id=\"timings\">\n<tr>");
    const double *ph = r->phase_seconds;
    amp_strbuf_printf(b, "<th>load</th><th>upload</th><th>start</th>");
    for (int p = 0; p < AMP_NPHASES; p++)
        amp_strbuf_printf(b, "<th>%s</th>", amp_report_phase_names[p]);
    amp_strbuf_printf(b, "<th>output</th><th>total</th></tr>\n<tr>");
    double v[AMP_NPHASES + 5];
    unsigned n = 0;
    v[n++] = r->seconds_load;
    v[n++] = r->seconds_upload;
    v[n++] = r->seconds_start;
    for (int p = 0; p < AMP_NPHASES; p++)
        v[n++] = ph ? ph[p] : 0;
    v[n++] = r->seconds_output;
    v[n++] = r->seconds_total;
    for (unsigned i = 0; i < n; i++)
        amp_strbuf_printf(b, "<td data-value=\"%.17g\">%.3f</td>", v[i], v[i]);
    amp_strbuf_printf(b, "</tr>\n</table>\n<p class=\"note\">Seconds. On a GPU the phases are "
                      "GPU time from CUDA events; on several, the slowest GPU's.</p>\n");
}

/* The fit per iteration and against the time since the iterations began. */
static amp_status fit_charts(amp_strbuf *b, const amp_run_report *r, amp_error *err)
{
    double *x = malloc(3 * (size_t)r->niters * sizeof *x + 1);
    if (x == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the HTML report");
    double *fit = x + r->niters, *clock = fit + r->niters, sum = 0;
    for (unsigned i = 0; i < r->niters; i++) {
        x[i] = r->iters[i].iter;
        fit[i] = r->iters[i].fit;
        sum += r->iters[i].seconds;
        clock[i] = sum;
    }
    amp_strbuf_printf(b, "<h2>Fit</h2>\n");
    amp_series s = {"fit", x, fit, r->niters};
    amp_chart c = {"fit-iteration", "Fit per iteration", "iteration", "fit", 0, 0, 0};
    amp_svg_lines(b, &c, &s, 1);
    s.x = clock;
    amp_chart ct = {"fit-time", "Fit against time", "seconds since the first iteration began",
                    "fit", 0, 0, 0};
    amp_svg_lines(b, &ct, &s, 1);
    free(x);
    return AMP_OK;
}

/* Each iteration's time, stacked by phase; phases that took no time in
 * any iteration (collectives on one GPU, the solve of a constrained
 * method) are left out. */
static amp_status phase_chart(amp_strbuf *b, const amp_run_report *r, amp_error *err)
{
    const size_t n = r->niters;
    amp_bar_room br;
    AMP_CHECK(amp_bar_room_new(&br, (size_t)AMP_NPHASES * n, n, 12, err));
    double *y = br.y;
    amp_series s[AMP_NPHASES];
    unsigned ns = 0;
    for (int p = 0; p < AMP_NPHASES; p++) {
        int any = 0;
        for (size_t i = 0; i < n; i++) {
            y[ns * n + i] = r->iters[i].phase[p];
            any |= r->iters[i].phase[p] != 0;
        }
        if (any)
            s[ns] = (amp_series){amp_report_phase_names[p], NULL, y + ns * n, n}, ns++;
    }
    for (size_t i = 0; i < n; i++)
        snprintf(br.names + br.width * i, br.width, "%u", r->iters[i].iter);
    amp_strbuf_printf(b, "<h2>Time per phase</h2>\n");
    amp_chart c = {"phases", "Time per phase per iteration", "iteration", "seconds", 0, 0, 1};
    amp_svg_bars(b, &c, br.cat, n, s, ns, 1, NAN, NULL);
    amp_strbuf_printf(b, "<p class=\"note\">%s</p>\n", r->ngpus > 1
                      ? "GPU 0's phases in each iteration (GPU time from CUDA events)."
                      : r->ngpus == 1 ? "GPU time from CUDA events."
                                      : "Wall-clock time of each phase.");
    amp_bar_room_free(&br);
    return AMP_OK;
}

/* Per mode and GPU: where the time went, and each GPU's nonzeros against
 * the mode's mean. */
static amp_status gpu_charts(amp_strbuf *b, const amp_run_report *r, amp_error *err)
{
    const unsigned N = r->t->nmodes, G = r->ngpus;
    const size_t n = (size_t)N * G;
    amp_bar_room br;
    AMP_CHECK(amp_bar_room_new(&br, 5 * n, n, 32, err));
    double *y = br.y;
    for (unsigned m = 0; m < N; m++) {
        double mean = 0;
        for (unsigned k = 0; k < G; k++)
            mean += (double)r->gpus[k].nnz[m] / G;
        for (unsigned k = 0; k < G; k++) {
            const amp_report_gpu *g = &r->gpus[k];
            size_t i = (size_t)m * G + k;
            snprintf(br.names + br.width * i, br.width, "m%u g%d", m + 1, g->device);
            y[i] = g->mttkrp[m];
            y[n + i] = g->comm[m];
            y[2 * n + i] = g->exchange[m];
            y[3 * n + i] = g->idle[m];
            y[4 * n + i] = mean > 0 ? (double)g->nnz[m] / mean : 0;
        }
    }
    amp_series s[4] = {{"mttkrp", NULL, y, n}, {"nccl", NULL, y + n, n},
                       {"exchange", NULL, y + 2 * n, n}, {"idle", NULL, y + 3 * n, n}};
    amp_strbuf_printf(b, "<h2>GPUs</h2>\n");
    amp_chart c = {"gpu-times", "Per mode (m) and GPU (g): seconds over the iterations",
                   "mode and GPU", "seconds", 0, 0, 1};
    amp_svg_bars(b, &c, br.cat, n, s, 4, 0, NAN, NULL);
    amp_series bal = {"nonzeros / mean", NULL, y + 4 * n, n};
    amp_chart cb = {"gpu-balance", "Nonzeros of each GPU over the mode's mean", "mode and GPU",
                    "nonzeros / mean", 0, 0, 1};
    amp_svg_bars(b, &cb, br.cat, n, &bal, 1, 0, 1.0, "mean");
    amp_strbuf_printf(b, "<p class=\"note\">nccl: in collectives or waiting for rows; "
                      "exchange: sending the mode's rows behind the next MTTKRP; idle: waiting "
                      "for the slowest GPU. Partition %s.</p>\n<table id=\"gpus\">\n<tr><th>"
                      "mode</th><th>gpu</th><th>nonzeros</th><th>rows</th><th>mttkrp</th><th>"
                      "busy</th><th>nccl</th><th>exchange</th><th>idle</th></tr>\n",
                      r->partition ? r->partition : "");
    for (unsigned m = 0; m < N; m++)
        for (unsigned k = 0; k < G; k++) {
            const amp_report_gpu *g = &r->gpus[k];
            amp_strbuf_printf(b, "<tr><td>%u</td><td>%d</td><td>%" PRIu64 "</td><td>%" PRIu64
                              "</td><td>%.4f</td><td>%.4f</td><td>%.4f</td><td>%.4f</td><td>"
                              "%.4f</td></tr>\n", m + 1, g->device, g->nnz[m], g->rows[m],
                              g->mttkrp[m], g->busy[m], g->comm[m], g->exchange[m],
                              g->idle[m]);
        }
    amp_strbuf_printf(b, "</table>\n");
    amp_bar_room_free(&br);
    return AMP_OK;
}

/* A run over several processes: a row each, and where its time went. */
static amp_status process_table(amp_strbuf *b, const amp_run_report *r, amp_error *err)
{
    const unsigned P = r->nprocesses, N = r->t->nmodes;
    amp_bar_room br;
    AMP_CHECK(amp_bar_room_new(&br, 3 * (size_t)P, P, 16, err));
    double *y = br.y;
    amp_strbuf_printf(b, "<h2>Processes</h2>\n<table id=\"processes\">\n<tr><th>process</th>"
                      "<th class=\"l\">host</th><th>shards</th><th>nonzeros</th><th>rows</th>"
                      "<th>mttkrp</th><th>exchange</th><th>wait</th></tr>\n");
    for (unsigned k = 0; k < P; k++) {
        const amp_report_process *q = &r->processes[k];
        amp_strbuf_printf(b, "<tr><td>%u</td><td class=\"l\">", k);
        amp_strbuf_xml(b, q->host ? q->host : "");
        amp_strbuf_printf(b, "</td><td>");
        for (unsigned m = 0; m < N; m++)
            amp_strbuf_printf(b, "%s%" PRIu32, m ? " " : "", q->shards[m]);
        amp_strbuf_printf(b, "</td><td>");
        for (unsigned m = 0; m < N; m++)
            amp_strbuf_printf(b, "%s%" PRIu64, m ? " " : "", q->nnz[m]);
        amp_strbuf_printf(b, "</td><td>");
        for (unsigned m = 0; m < N; m++)
            amp_strbuf_printf(b, "%s%" PRIu64, m ? " " : "", q->rows[m]);
        amp_strbuf_printf(b, "</td><td data-value=\"%.17g\">%.4f</td><td data-value=\"%.17g\">"
                          "%.4f</td><td data-value=\"%.17g\">%.4f</td></tr>\n", q->mttkrp,
                          q->mttkrp, q->exchange, q->exchange, q->wait, q->wait);
        snprintf(br.names + br.width * k, br.width, "%u", k);
        y[k] = q->mttkrp;
        y[P + k] = q->exchange;
        y[2 * P + k] = q->wait;
    }
    amp_strbuf_printf(b, "</table>\n<p class=\"note\">Per mode: shards, nonzeros computed, "
                      "rows owned. Seconds over the iterations: mttkrp; exchange of rows; "
                      "wait for the other processes.</p>\n");
    amp_series s[3] = {{"mttkrp", NULL, y, P}, {"exchange", NULL, y + P, P},
                       {"wait", NULL, y + 2 * P, P}};
    amp_chart c = {"process-times", "Per process: seconds over the iterations", "process",
                   "seconds", 0, 0, 1};
    amp_svg_bars(b, &c, br.cat, P, s, 3, 0, NAN, NULL);
    amp_bar_room_free(&br);
    return AMP_OK;
}

amp_status amp_report_write_html(const amp_run_report *r, amp_outfile *of, amp_error *err)
{
    amp_strbuf b = {0};
    amp_status rc = AMP_OK;
    char title[64];
    snprintf(title, sizeof title, "amped-run: rank %u %s", r->opts->rank,
             r->opts->method == AMP_METHOD_ALS ? "CP-ALS" : amp_method_name(r->opts->method));
    amp_html_begin(&b, title);
    summary(&b, r);
    AMP_CHECK_GOTO(fit_charts(&b, r, err), rc, done);
    AMP_CHECK_GOTO(phase_chart(&b, r, err), rc, done);
    if (r->ngpus > 1)
        AMP_CHECK_GOTO(gpu_charts(&b, r, err), rc, done);
    if (r->nprocesses > 0)
        AMP_CHECK_GOTO(process_table(&b, r, err), rc, done);
done:
    return amp_html_finish(&b, rc, of, err);
}
