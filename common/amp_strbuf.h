/* A growing string for documents built whole in memory and then written
 * in one go (the JSON and HTML reports): appending never fails on the
 * spot; the first failure sets `failed` and later appends do nothing, so
 * a writer checks once, at the end. */
#ifndef AMP_STRBUF_H
#define AMP_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct amp_strbuf {
    char *p;
    size_t n, cap;
    int failed;   /* out of memory, or a format error */
} amp_strbuf;

void amp_strbuf_printf(amp_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void amp_strbuf_vprintf(amp_strbuf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* s with &, <, >, " and ' as XML character references, and control
 * characters other than tab and newline (which XML 1.0 cannot hold) as
 * U+FFFD. */
void amp_strbuf_xml(amp_strbuf *b, const char *s);
void amp_strbuf_free(amp_strbuf *b);

#endif
