#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "amp_strbuf.h"

void amp_strbuf_vprintf(amp_strbuf *b, const char *fmt, va_list ap)
{
    if (b->failed)
        return;
    for (;;) {
        va_list aq;
        va_copy(aq, ap);
        int n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, aq);
        va_end(aq);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->p && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? 2 * b->cap : 4096) + (size_t)n;
        char *q = realloc(b->p, cap);
        if (q == NULL) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

void amp_strbuf_printf(amp_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    amp_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void amp_strbuf_xml(amp_strbuf *b, const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        switch (*c) {
        case '&':
            amp_strbuf_printf(b, "&amp;");
            break;
        case '<':
            amp_strbuf_printf(b, "&lt;");
            break;
        case '>':
            amp_strbuf_printf(b, "&gt;");
            break;
        case '"':
            amp_strbuf_printf(b, "&quot;");
            break;
        case '\'':
            amp_strbuf_printf(b, "&#39;");
            break;
        default:
            if (*c < 0x20 && *c != '\t' && *c != '\n')
                amp_strbuf_printf(b, "&#xfffd;");
            else
                amp_strbuf_printf(b, "%c", *c);
        }
    }
}

void amp_strbuf_free(amp_strbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
