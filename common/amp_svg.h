/* Self-contained HTML report pages with SVG charts, drawn here so that a
 * page needs nothing outside its file (no script, font or style fetched)
 * and opens in any browser. The page is well-formed XML (XHTML syntax in
 * an HTML5 document), so tests read it with an XML parser.
 *
 * Every plotted value is also written exactly (%.17g) as a data-x, data-y
 * or data-value attribute of its mark, and every chart is an <svg> with an
 * id, so a test finds each chart and compares its numbers with the run's
 * JSON rather than with pixels. */
#ifndef AMP_SVG_H
#define AMP_SVG_H

#include <stddef.h>

#include "amp_error.h"
#include "amp_outfile.h"
#include "amp_strbuf.h"

/* The document up to and including <body> and an <h1> of title. */
void amp_html_begin(amp_strbuf *b, const char *title);
void amp_html_end(amp_strbuf *b);
/* The page's end: where rc (what drawing it came to) is AMP_OK, its last
 * line (which program wrote it), its end, and the whole of b into of,
 * finished (amp_outfile_finish: the caller places it); of aborted on any
 * failure, rc's or the write's (AMP_ERR_NOMEM
 * where b ran out of memory on the way). b freed either way; the first
 * failure returned. */
amp_status amp_html_finish(amp_strbuf *b, amp_status rc, amp_outfile *of, amp_error *err);

/* Room for a bar chart's numbers and category names: y of ny values and
 * ncat names of up to width bytes each, name(i) at names + width i and
 * cat[i] pointing at it. */
typedef struct amp_bar_room {
    double *y;
    char *names;
    const char **cat;
    size_t width;
} amp_bar_room;
/* AMP_ERR_NOMEM, the room all NULL (for amp_bar_room_free), where memory
 * runs out. */
amp_status amp_bar_room_new(amp_bar_room *r, size_t ny, size_t ncat, size_t width,
                            amp_error *err);
void amp_bar_room_free(amp_bar_room *r);

typedef struct amp_chart {
    const char *id;        /* the <svg>'s id: unique in the page */
    const char *title;
    const char *xlabel, *ylabel;
    int xlog, ylog;        /* logarithmic axes; non-positive values are left out */
    int ymin_zero;         /* linear y from 0 rather than from the smallest value */
} amp_chart;

/* One series: n points (x[i], y[i]); for bars, y[i] is category i's value
 * (x unused). */
typedef struct amp_series {
    const char *name;
    const double *x, *y;
    size_t n;
} amp_series;

/* Lines through each series' points, with a dot at each point. */
void amp_svg_lines(amp_strbuf *b, const amp_chart *c, const amp_series *s, unsigned ns);

/* Bars of ns series over ncat categories named cat: side by side, or
 * stacked (values below zero are drawn as zero). ref, when finite, is a
 * horizontal line labelled ref_label (for example the mean). */
void amp_svg_bars(amp_strbuf *b, const amp_chart *c, const char *const *cat, size_t ncat,
                  const amp_series *s, unsigned ns, int stacked, double ref,
                  const char *ref_label);

#endif
