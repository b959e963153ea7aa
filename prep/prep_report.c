#include <config.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_strbuf.h"
#include "amp_svg.h"
#include "prep_report.h"

/* A chart of more bars than this shows the fullest shards only: a bar
 * narrower than a pixel shows nothing, and a million of them would make
 * a page of a hundred megabytes. */
#define MAX_SHARD_BARS 1024

static void summary(amp_strbuf *b, const amp_prep_report *r)
{
    amp_strbuf_printf(b, "<h2>Tensor</h2>\n<table id=\"summary\">\n<tr><th class=\"l\">input"
                      "</th><td class=\"l\" colspan=\"%u\">", r->nmodes);
    amp_strbuf_xml(b, r->input);
    amp_strbuf_printf(b, "</td></tr>\n<tr><th class=\"l\">nonzeros</th><td class=\"l\" "
                      "colspan=\"%u\">%" PRIu64 "</td></tr>\n<tr><th class=\"l\">mode</th>",
                      r->nmodes, r->nnz);
    for (unsigned m = 0; m < r->nmodes; m++)
        amp_strbuf_printf(b, "<th>%u</th>", m + 1);
    amp_strbuf_printf(b, "</tr>\n<tr><th class=\"l\">slices</th>");
    for (unsigned m = 0; m < r->nmodes; m++)
        amp_strbuf_printf(b, "<td>%" PRIu64 "</td>", r->dims[m]);
    amp_strbuf_printf(b, "</tr>\n<tr><th class=\"l\">nonempty</th>");
    for (unsigned m = 0; m < r->nmodes; m++) {
        uint64_t n = 0;
        for (unsigned k = 0; k < AMP_DEGREE_BINS; k++)
            n += r->hist[m].slices[k];
        amp_strbuf_printf(b, "<td>%" PRIu64 "</td>", n);
    }
    amp_strbuf_printf(b, "</tr>\n");
    if (r->build) {
        amp_strbuf_printf(b, "<tr><th class=\"l\">shards</th>");
        for (unsigned m = 0; m < r->nmodes; m++)
            amp_strbuf_printf(b, "<td>%" PRIu32 "</td>", r->build->modes[m].nshards);
        amp_strbuf_printf(b, "</tr>\n<tr><th class=\"l\">largest shard / mean</th>");
        for (unsigned m = 0; m < r->nmodes; m++) {
            const amp_build_mode_report *bm = &r->build->modes[m];
            double mean = (double)r->nnz / bm->nshards;
            amp_strbuf_printf(b, "<td>%.3f</td>", (double)bm->max_shard_nnz / mean);
        }
        amp_strbuf_printf(b, "</tr>\n");
    }
    amp_strbuf_printf(b, "</table>\n");
}

/* Each mode's degrees, log-log: a point per bin at the mean degree of its
 * slices, at the slices per degree of the bin (its slices over the
 * degrees it spans), so wide bins do not look fuller than narrow ones. */
static void degree_chart(amp_strbuf *b, const amp_prep_report *r)
{
    double x[AMP_MAX_MODES][AMP_DEGREE_BINS], y[AMP_MAX_MODES][AMP_DEGREE_BINS];
    amp_series s[AMP_MAX_MODES];
    char names[AMP_MAX_MODES][16];
    for (unsigned m = 0; m < r->nmodes; m++) {
        size_t n = 0;
        for (unsigned k = 0; k < AMP_DEGREE_BINS; k++) {
            if (r->hist[m].slices[k] == 0)
                continue;
            uint64_t lo, hi;
            amp_degree_bin_range(k, &lo, &hi);
            x[m][n] = (double)r->hist[m].nnz[k] / (double)r->hist[m].slices[k];
            y[m][n] = (double)r->hist[m].slices[k] / (double)(hi - lo + 1);
            n++;
        }
        snprintf(names[m], sizeof names[m], "mode %u", m + 1);
        s[m] = (amp_series){names[m], x[m], y[m], n};
    }
    amp_strbuf_printf(b, "<h2>Slice degrees</h2>\n");
    amp_chart c = {"degrees", "Slices by their nonzeros (log-log)", "nonzeros in a slice",
                   "slices per degree", 1, 1, 0};
    amp_svg_lines(b, &c, s, r->nmodes);
    amp_strbuf_printf(b, "<p class=\"note\">Degrees 1 to 7 one bin each, then four bins to "
                      "each doubling; a point is a bin's mean degree and its slices divided "
                      "by the degrees it spans.</p>\n");
}

static const uint64_t *sort_base;

static int fuller_first(const void *a, const void *b)
{
    uint64_t x = sort_base[*(const uint32_t *)a], y = sort_base[*(const uint32_t *)b];
    return (x < y) - (x > y);
}

/* Mode m's shards against the mean: in shard order, or the fullest
 * MAX_SHARD_BARS in falling order. */
static amp_status shard_chart(amp_strbuf *b, const amp_prep_report *r, unsigned m,
                              amp_error *err)
{
    const uint32_t S = r->build->modes[m].nshards;
    const uint64_t *nnz = r->shard_nnz + (size_t)m * r->shards;
    const uint32_t n = S < MAX_SHARD_BARS ? S : MAX_SHARD_BARS;
    amp_bar_room br;
    AMP_CHECK(amp_bar_room_new(&br, n, n, 12, err));
    uint32_t *order = malloc((size_t)S * sizeof *order);
    if (order == NULL) {
        amp_bar_room_free(&br);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the HTML report");
    }
    double *y = br.y;
    for (uint32_t s = 0; s < S; s++)
        order[s] = s;
    if (S > n) {
        sort_base = nnz;   /* qsort has no context argument; one report at a time */
        qsort(order, S, sizeof *order, fuller_first);
    }
    for (uint32_t i = 0; i < n; i++) {
        y[i] = (double)nnz[order[i]];
        snprintf(br.names + br.width * i, br.width, "%" PRIu32, order[i]);
    }
    char id[32], title[96];
    snprintf(id, sizeof id, "shards-mode%u", m + 1);
    if (S > n)
        snprintf(title, sizeof title, "Mode %u: nonzeros of the %" PRIu32 " fullest of %" PRIu32
                 " shards", m + 1, n, S);
    else
        snprintf(title, sizeof title, "Mode %u: nonzeros per shard", m + 1);
    amp_series s = {"nonzeros", NULL, y, n};
    amp_chart c = {id, title, "shard", "nonzeros", 0, 0, 1};
    amp_svg_bars(b, &c, br.cat, n, &s, 1, 0, (double)r->nnz / S, "mean");
    free(order);
    amp_bar_room_free(&br);
    return AMP_OK;
}

amp_status amp_prep_report_write(const amp_prep_report *r, amp_outfile *of, amp_error *err)
{
    amp_strbuf b = {0};
    amp_status rc = AMP_OK;
    amp_html_begin(&b, "amped-prep: the tensor and its shards");
    summary(&b, r);
    degree_chart(&b, r);
    if (r->build) {
        amp_strbuf_printf(&b, "<h2>Shards of ");
        amp_strbuf_xml(&b, r->output);
        amp_strbuf_printf(&b, "</h2>\n<p class=\"note\">A slice is never split across shards: "
                          "one slice above the mean makes its shard that full whatever the "
                          "dealing.</p>\n");
        for (unsigned m = 0; m < r->nmodes; m++)
            AMP_CHECK_GOTO(shard_chart(&b, r, m, err), rc, done);
    } else {
        amp_strbuf_printf(&b, "<p class=\"note\">No .amp file was written, so there are no "
                          "shards to show.</p>\n");
    }
done:
    return amp_html_finish(&b, rc, of, err);
}
