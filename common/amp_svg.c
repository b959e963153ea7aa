/* HTML pages and SVG charts for the reports (amp_svg.h). */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_svg.h"

/* The chart's box and its plot area, in SVG user units (pixels at 1:1). */
#define W 720.0
#define H 320.0
#define LEFT 78.0
#define RIGHT 178.0
#define TOP 34.0
#define BOTTOM 50.0
#define PW (W - LEFT - RIGHT)
#define PH (H - TOP - BOTTOM)

/* Distinct colours that stay apart for the common kinds of colour
 * blindness (Okabe and Ito's palette), then greys. */
static const char *const palette[] = {"#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7",
                                      "#56b4e9", "#f0e442", "#000000", "#999999", "#666666"};
#define NCOLORS (sizeof palette / sizeof palette[0])

static const char style[] =
    "body{font-family:sans-serif;margin:1.5em auto;padding:0 1em;max-width:60em;color:#222}"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}"
    "table{border-collapse:collapse;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}"
    "th{background:#f3f3f3}td.l,th.l{text-align:left}"
    "svg{display:block;margin:.5em 0;background:#fff}"
    "svg text{font-family:sans-serif;font-size:12px;fill:#222}"
    "svg .t{font-size:14px;font-weight:bold}"
    "p.note{color:#555;font-size:.9em}";

void amp_html_begin(amp_strbuf *b, const char *title)
{
    amp_strbuf_printf(b, "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" "
                      "lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>");
    amp_strbuf_xml(b, title);
    amp_strbuf_printf(b, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", style);
    amp_strbuf_xml(b, title);
    amp_strbuf_printf(b, "</h1>\n");
}

void amp_html_end(amp_strbuf *b)
{
    amp_strbuf_printf(b, "</body>\n</html>\n");
}

amp_status amp_html_finish(amp_strbuf *b, amp_status rc, amp_outfile *of, amp_error *err)
{
    if (rc == AMP_OK) {
        amp_strbuf_printf(b, "<p class=\"note\">Written by %s %s.</p>\n", PACKAGE_NAME,
                          PACKAGE_VERSION);
        amp_html_end(b);
        rc = b->failed ? AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the HTML report")
                       : amp_outfile_write(of, b->p, b->n, err);
    }
    if (rc == AMP_OK)
        rc = amp_outfile_finish(of, err);
    if (rc != AMP_OK)
        amp_outfile_abort(of);
    amp_strbuf_free(b);
    return rc;
}

amp_status amp_bar_room_new(amp_bar_room *r, size_t ny, size_t ncat, size_t width,
                            amp_error *err)
{
    r->width = width;
    r->y = malloc(ny * sizeof *r->y + 1);
    r->names = malloc(ncat * width + 1);
    r->cat = malloc(ncat * sizeof *r->cat + 1);
    if (r->y == NULL || r->names == NULL || r->cat == NULL) {
        amp_bar_room_free(r);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the HTML report");
    }
    for (size_t i = 0; i < ncat; i++)
        r->cat[i] = r->names + width * i;
    return AMP_OK;
}

void amp_bar_room_free(amp_bar_room *r)
{
    free(r->y);
    free(r->names);
    free(r->cat);
    r->y = NULL;
    r->names = NULL;
    r->cat = NULL;
}

typedef struct axis {
    double lo, hi, step;   /* log: in decades (log10 of the values) */
    int log;
} axis;

static double nice_step(double raw)
{
    double p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* The axis over [lo, hi] (values, finite, positive for log): round ends
 * at decades or at about 5 steps, and never empty. */
static axis make_axis(double lo, double hi, int log, int from_zero)
{
    axis a = {0, 1, 1, log};
    if (!(lo <= hi))   /* nothing to show */
        return a;
    if (log) {
        a.lo = floor(log10(lo));
        a.hi = ceil(log10(hi));
        if (a.hi <= a.lo)
            a.hi = a.lo + 1;
        a.step = a.hi - a.lo > 8 ? ceil((a.hi - a.lo) / 8) : 1;
        return a;
    }
    if (from_zero) {
        lo = lo < 0 ? lo : 0;
        hi = hi > 0 ? hi : 0;
    }
    if (hi == lo) {
        double d = lo == 0 ? 1 : fabs(lo) / 2;
        lo -= from_zero && lo == 0 ? 0 : d;
        hi += d;
    }
    a.step = nice_step((hi - lo) / 5);
    a.lo = floor(lo / a.step) * a.step;
    a.hi = ceil(hi / a.step) * a.step;
    return a;
}

/* v's place along [0, len] of the axis; NAN where it cannot be shown. */
static double place(const axis *a, double v, double len)
{
    if (!isfinite(v) || (a->log && v <= 0))
        return NAN;
    double u = a->log ? log10(v) : v;
    return (u - a->lo) / (a->hi - a->lo) * len;
}

static double px(const axis *a, double v)
{
    return LEFT + place(a, v, PW);
}

static double py(const axis *a, double v)
{
    return TOP + PH - place(a, v, PH);
}

static void tick_label(amp_strbuf *b, const axis *a, double u)
{
    if (a->log)
        amp_strbuf_printf(b, "%g", pow(10, u));
    else
        amp_strbuf_printf(b, "%g", fabs(u) < a->step * 1e-9 ? 0.0 : u);
}

static void open_chart(amp_strbuf *b, const amp_chart *c)
{
    amp_strbuf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"%s\" width=\"%g\" "
                      "height=\"%g\" viewBox=\"0 0 %g %g\" role=\"img\" aria-label=\"", c->id, W,
                      H, W, H);
    amp_strbuf_xml(b, c->title);
    amp_strbuf_printf(b, "\">\n<text class=\"t\" x=\"%g\" y=\"20\">", LEFT);
    amp_strbuf_xml(b, c->title);
    amp_strbuf_printf(b, "</text>\n");
}

/* The frame, grid, ticks and axis titles; x ticks only when xa is set
 * (bars label their categories instead). */
static void draw_axes(amp_strbuf *b, const amp_chart *c, const axis *xa, const axis *ya)
{
    amp_strbuf_printf(b, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
                      "stroke=\"#888\"/>\n", LEFT, TOP, PW, PH);
    for (double u = ya->lo; u <= ya->hi + ya->step * 1e-9; u += ya->step) {
        double y = TOP + PH - (u - ya->lo) / (ya->hi - ya->lo) * PH;
        amp_strbuf_printf(b, "<line x1=\"%g\" x2=\"%g\" y1=\"%.2f\" y2=\"%.2f\" stroke=\"#e4e4e4\"/>"
                          "<text x=\"%g\" y=\"%.2f\" text-anchor=\"end\">", LEFT, LEFT + PW, y, y,
                          LEFT - 6, y + 4);
        tick_label(b, ya, u);
        amp_strbuf_printf(b, "</text>\n");
    }
    if (xa)
        for (double u = xa->lo; u <= xa->hi + xa->step * 1e-9; u += xa->step) {
            double x = LEFT + (u - xa->lo) / (xa->hi - xa->lo) * PW;
            amp_strbuf_printf(b, "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%g\" y2=\"%g\" "
                              "stroke=\"#e4e4e4\"/><text x=\"%.2f\" y=\"%g\" "
                              "text-anchor=\"middle\">", x, x, TOP, TOP + PH, x, TOP + PH + 16);
            tick_label(b, xa, u);
            amp_strbuf_printf(b, "</text>\n");
        }
    amp_strbuf_printf(b, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">", LEFT + PW / 2,
                      H - 10);
    amp_strbuf_xml(b, c->xlabel);
    amp_strbuf_printf(b, "</text>\n<text transform=\"translate(16 %g) rotate(-90)\" "
                      "text-anchor=\"middle\">", TOP + PH / 2);
    amp_strbuf_xml(b, c->ylabel);
    amp_strbuf_printf(b, "</text>\n");
}

static void legend_entry(amp_strbuf *b, unsigned k, const char *color, const char *name,
                         int line)
{
    double y = TOP + 8 + 18 * k;
    if (line)
        amp_strbuf_printf(b, "<line x1=\"%g\" x2=\"%g\" y1=\"%g\" y2=\"%g\" stroke=\"%s\" "
                          "stroke-width=\"2\" stroke-dasharray=\"5 3\"/>", W - RIGHT + 14,
                          W - RIGHT + 28, y, y, color);
    else
        amp_strbuf_printf(b, "<rect x=\"%g\" y=\"%g\" width=\"12\" height=\"12\" fill=\"%s\"/>",
                          W - RIGHT + 16, y - 6, color);
    amp_strbuf_printf(b, "<text x=\"%g\" y=\"%g\">", W - RIGHT + 34, y + 4);
    amp_strbuf_xml(b, name);
    amp_strbuf_printf(b, "</text>\n");
}

static int shown(double v, int log)
{
    return isfinite(v) && (!log || v > 0);
}

void amp_svg_lines(amp_strbuf *b, const amp_chart *c, const amp_series *s, unsigned ns)
{
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (unsigned k = 0; k < ns; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!shown(x, c->xlog) || !shown(y, c->ylog))
                continue;
            xlo = fmin(xlo, x);
            xhi = fmax(xhi, x);
            ylo = fmin(ylo, y);
            yhi = fmax(yhi, y);
        }
    axis xa = make_axis(xlo, xhi, c->xlog, 0), ya = make_axis(ylo, yhi, c->ylog, c->ymin_zero);
    open_chart(b, c);
    draw_axes(b, c, &xa, &ya);
    for (unsigned k = 0; k < ns; k++) {
        const char *color = palette[k % NCOLORS];
        amp_strbuf_printf(b, "<g class=\"series\" data-name=\"");
        amp_strbuf_xml(b, s[k].name);
        amp_strbuf_printf(b, "\">\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                          "points=\"", color);
        for (size_t i = 0; i < s[k].n; i++)
            if (shown(s[k].x[i], c->xlog) && shown(s[k].y[i], c->ylog))
                amp_strbuf_printf(b, "%.2f,%.2f ", px(&xa, s[k].x[i]), py(&ya, s[k].y[i]));
        amp_strbuf_printf(b, "\"/>\n");
        for (size_t i = 0; i < s[k].n; i++) {
            if (!shown(s[k].x[i], c->xlog) || !shown(s[k].y[i], c->ylog))
                continue;
            amp_strbuf_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" fill=\"%s\" "
                              "data-x=\"%.17g\" data-y=\"%.17g\"><title>%s: %.6g, %.6g</title>"
                              "</circle>\n", px(&xa, s[k].x[i]), py(&ya, s[k].y[i]), color,
                              s[k].x[i], s[k].y[i], c->xlabel, s[k].x[i], s[k].y[i]);
        }
        amp_strbuf_printf(b, "</g>\n");
        if (ns > 1)
            legend_entry(b, k, color, s[k].name, 0);
    }
    amp_strbuf_printf(b, "</svg>\n");
}

void amp_svg_bars(amp_strbuf *b, const amp_chart *c, const char *const *cat, size_t ncat,
                  const amp_series *s, unsigned ns, int stacked, double ref,
                  const char *ref_label)
{
    double hi = isfinite(ref) ? ref : 0;
    for (size_t i = 0; i < ncat; i++) {
        double sum = 0;
        for (unsigned k = 0; k < ns; k++) {
            double v = isfinite(s[k].y[i]) && s[k].y[i] > 0 ? s[k].y[i] : 0;
            sum = stacked ? sum + v : fmax(sum, v);
        }
        hi = fmax(hi, sum);
    }
    axis ya = make_axis(0, hi, 0, 1);
    open_chart(b, c);
    draw_axes(b, c, NULL, &ya);
    const double band = ncat ? PW / (double)ncat : PW;
    const double width = stacked ? band * 0.7 : band * 0.8 / (ns ? ns : 1);
    /* Category names at most every 36 units, so they never overlap. */
    size_t every = (size_t)ceil(36.0 / band);
    for (size_t i = 0; i < ncat; i++) {
        double base = 0, x0 = LEFT + band * (double)i + (stacked ? band * 0.15 : band * 0.1);
        amp_strbuf_printf(b, "<g class=\"category\" data-category=\"");
        amp_strbuf_xml(b, cat[i]);
        amp_strbuf_printf(b, "\">\n");
        for (unsigned k = 0; k < ns; k++) {
            double v = s[k].y[i], h = isfinite(v) && v > 0 ? v : 0;
            double x = stacked ? x0 : x0 + width * k;
            double y1 = py(&ya, base + h), y0 = py(&ya, base);
            amp_strbuf_printf(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                              "fill=\"%s\" data-series=\"", x, y1, width, y0 - y1,
                              palette[k % NCOLORS]);
            amp_strbuf_xml(b, s[k].name);
            amp_strbuf_printf(b, "\" data-value=\"%.17g\"><title>", v);
            amp_strbuf_xml(b, cat[i]);
            amp_strbuf_printf(b, ", ");
            amp_strbuf_xml(b, s[k].name);
            amp_strbuf_printf(b, ": %.6g</title></rect>\n", v);
            if (stacked)
                base += h;
        }
        amp_strbuf_printf(b, "</g>\n");
        if (i % every == 0) {
            amp_strbuf_printf(b, "<text x=\"%.2f\" y=\"%g\" text-anchor=\"middle\">",
                              LEFT + band * ((double)i + 0.5), TOP + PH + 16);
            amp_strbuf_xml(b, cat[i]);
            amp_strbuf_printf(b, "</text>\n");
        }
    }
    unsigned k = 0;
    if (ns > 1)
        for (; k < ns; k++)
            legend_entry(b, k, palette[k % NCOLORS], s[k].name, 0);
    if (isfinite(ref)) {
        double y = py(&ya, ref);
        amp_strbuf_printf(b, "<line class=\"ref\" x1=\"%g\" x2=\"%g\" y1=\"%.2f\" y2=\"%.2f\" "
                          "stroke=\"#d55e00\" stroke-width=\"2\" stroke-dasharray=\"5 3\" "
                          "data-value=\"%.17g\"/>\n", LEFT, LEFT + PW, y, y, ref);
        legend_entry(b, k, "#d55e00", ref_label, 1);
    }
    amp_strbuf_printf(b, "</svg>\n");
}
