/* Parallel reader for FROSTT .tns text.
 *
 * The input is handled in blocks cut at line boundaries: a block is either
 * a window of the memory-mapped file or a buffer filled from a pipe or a
 * decompressor. Each block is cut into chunks, one OpenMP task each, in two
 * passes: count the lines of every chunk (an upper bound on its nonzeros,
 * which gives every chunk its own slots in the shared arrays), then parse
 * every chunk into its slots without locks. Comment and blank lines leave
 * gaps that a cheap serial move closes afterwards.
 *
 * Indices are stored as (value - 1) while parsing, the common 1-based case,
 * so no second pass is needed for it; a 0-based file is detected by the
 * zero it contains and shifted back once at the end (the subtraction wraps
 * and the addition unwraps). Numbers are parsed by hand: integers with an
 * overflow check only past 18 digits, and values on Clinger's exact fast
 * path (<= 19 significant digits, |exponent| <= 22 gives a correctly
 * rounded double from one multiplication or division), falling back to
 * strtod only for the rare rest. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amp_alloc.h"
#include "amp_cli.h"
#include "amp_timer.h"
#include "tensor_internal.h"

#define DEFAULT_BLOCK_BYTES ((size_t)64 << 20)
/* Windows of a mapped file parsed per step: large enough that the parallel
 * region overhead vanishes, small enough that the second pass finds the
 * text still in memory and the next window can be prefetched. */
#define MAP_WINDOW_BYTES ((size_t)256 << 20)
#define MIN_CHUNK_BYTES ((size_t)256 << 10)
#define MSG_MAX 320
#define LONG_LINE_MSG "line is longer than 65536 bytes (is this a text tensor?)"
_Static_assert(AMP_TNS_MAX_LINE == 65536, "LONG_LINE_MSG states the limit");

enum { REC_OK, REC_SKIP, REC_ERR };

typedef struct chunk {
    size_t begin, end;            /* byte range in the block */
    uint64_t lines;               /* lines starting in the range */
    uint64_t slot;                /* first record slot */
    uint64_t written;
    uint64_t max_raw[AMP_MAX_MODES];
    uint64_t max_line[AMP_MAX_MODES]; /* chunk-local line of the first maximum */
    uint64_t zero_line;           /* chunk-local line of the first index 0 */
    int zero_mode;
    /* With --dims, the chunk-local line of the first index beyond them if
     * the file is 0-based ([0]) or 1-based ([1]), its mode and value: the
     * base may be known only at the end. */
    uint64_t over_line[2], over_raw[2];
    unsigned over_mode[2];
    int failed;
    uint64_t err_line;
    amp_status err_status;
    char err_msg[MSG_MAX];
} chunk;

typedef struct tns_reader {
    const char *name;
    const amp_read_opts *opts;
    amp_coo *t;
    unsigned nmodes;              /* 0 until the first data line is seen */
    uint64_t store_bias;          /* subtracted from every index while parsing */
    uint64_t lines;               /* lines in all earlier blocks */
    uint64_t max_raw[AMP_MAX_MODES];
    uint64_t max_line[AMP_MAX_MODES];
    uint64_t zero_line;           /* global 1-based line, 0: none */
    int zero_mode;
    uint64_t over_line[2], over_raw[2];   /* global 1-based line, 0: none */
    unsigned over_mode[2];
    chunk *chunks;
    size_t nchunks_cap;
} tns_reader;

static const double pow10_exact[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static inline int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static inline int at_eol(const char *p, const char *end)
{
    return p == end || *p == '\n';
}

static void amp_quote_token(char *dst, size_t dstlen, const char *p, const char *end, size_t max)
{
    size_t n = 0;
    while (p < end && !is_blank(*p) && *p != '\n' && n + 4 < dstlen && n < max) {
        unsigned char c = (unsigned char)*p++;
        dst[n++] = (c >= 32 && c < 127) ? (char)c : '?';
    }
    if (p < end && !is_blank(*p) && *p != '\n' && n + 4 < dstlen) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = '\0';
}

/* Fields of a line, up to a trailing '#' comment. */
static unsigned count_fields(const char *p, const char *end)
{
    unsigned n = 0;
    while (!at_eol(p, end)) {
        while (!at_eol(p, end) && is_blank(*p)) p++;
        if (at_eol(p, end) || *p == '#') break;
        n++;
        while (!at_eol(p, end) && !is_blank(*p)) p++;
    }
    return n;
}

/* Parse a decimal value token. Returns 0 on success, 1 not a number,
 * 2 NaN or infinite, 3 out of double range. */
static int parse_value(const char **pp, const char *end, double *out)
{
    const char *p = *pp, *tok = p;
    int neg = 0;
    if (p < end && (*p == '-' || *p == '+')) {
        neg = *p == '-';
        p++;
    }
    uint64_t mant = 0;
    int ndig = 0, e10 = 0, any = 0, inexact = 0;
    unsigned d;
    while (p < end && *p == '0') {
        p++;
        any = 1;
    }
    while (p < end && (d = (unsigned)(*p - '0')) <= 9) {
        if (ndig < 19) {
            mant = mant * 10 + d;
            ndig++;
        } else {
            e10++;
            inexact |= d != 0;
        }
        p++;
        any = 1;
    }
    if (p < end && *p == '.') {
        p++;
        if (ndig == 0)
            while (p < end && *p == '0') {
                p++;
                e10--;
                any = 1;
            }
        while (p < end && (d = (unsigned)(*p - '0')) <= 9) {
            if (ndig < 19) {
                mant = mant * 10 + d;
                ndig++;
                e10--;
            } else {
                inexact |= d != 0;
            }
            p++;
            any = 1;
        }
    }
    if (any && p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < end && (*p == '-' || *p == '+')) {
            eneg = *p == '-';
            p++;
        }
        if (p == end || (unsigned)(*p - '0') > 9)
            return 1;
        int ex = 0;
        while (p < end && (d = (unsigned)(*p - '0')) <= 9) {
            if (ex < 100000)
                ex = ex * 10 + (int)d;
            p++;
        }
        e10 += eneg ? -ex : ex;
    }
    if (!any || (!at_eol(p, end) && !is_blank(*p))) {
        /* Not a plain decimal: say whether it is NaN or infinity, which
         * strtod would accept but a tensor must not hold. */
        const char *q = tok;
        if (q < end && (*q == '-' || *q == '+')) q++;
        if (end - q >= 3 && (!strncasecmp(q, "nan", 3) || !strncasecmp(q, "inf", 3)))
            return 2;
        return 1;
    }
    *pp = p;
    if (!inexact && mant <= ((uint64_t)1 << 53) && e10 >= -22 && e10 <= 22) {
        double r = (double)mant;
        r = e10 < 0 ? r / pow10_exact[-e10] : r * pow10_exact[e10];
        *out = neg ? -r : r;
        return 0;
    }
    if (mant == 0 && !inexact) {
        *out = neg ? -0.0 : 0.0;
        return 0;
    }
    char buf[512];
    size_t n = (size_t)(p - tok);
    if (n >= sizeof buf)
        return 3;
    memcpy(buf, tok, n);
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    if (!isfinite(v))
        return 3;
    *out = v;
    return 0;
}

/* Parse one line starting at p. On REC_OK idx[] and *val are set; on
 * REC_ERR msg holds the reason. *next is the line's end ('\n' or end). */
static int parse_record(const char *p, const char *end, unsigned nmodes, uint64_t *idx,
                        double *val, const char **next, char *msg, amp_status *st)
{
    const char *line = p;
    while (p < end && is_blank(*p)) p++;
    if (at_eol(p, end) || *p == '#') {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        *next = nl ? nl : end;
        if ((size_t)(*next - line) <= AMP_TNS_MAX_LINE)
            return REC_SKIP;
        goto fail;   /* reported as an over-long line */
    }
    for (unsigned m = 0; m <= nmodes; m++) {
        if (m > 0) {
            if (!at_eol(p, end) && !is_blank(*p))
                goto bad_token;
            while (!at_eol(p, end) && is_blank(*p)) p++;
            if (at_eol(p, end) || *p == '#')
                goto field_count;
        }
        if (m == nmodes)
            break;
        unsigned d = (unsigned)(*p - '0');
        if (d > 9)
            goto bad_token;
        const char *tok = p;
        uint64_t v = 0;
        const char *safe = (end - p > 18) ? p + 18 : end;
        while (p < safe && (d = (unsigned)(*p - '0')) <= 9) {
            v = v * 10 + d;
            p++;
        }
        while (p < end && (d = (unsigned)(*p - '0')) <= 9) {
            if (v > (AMP_MAX_INDEX - d) / 10) {
                char q[64];
                amp_quote_token(q, sizeof q, tok, end, 40);
                snprintf(msg, MSG_MAX, "field %u: index '%s' is larger than %" PRIu64, m + 1, q,
                         AMP_MAX_INDEX);
                *st = AMP_ERR_RANGE;
                goto fail;
            }
            v = v * 10 + d;
            p++;
        }
        idx[m] = v;
    }
    const char *vtok = p;
    int vrc = parse_value(&p, end, val);
    if (vrc != 0) {
        static const char *const why[] = {
            NULL, "is not a number", "is not finite (NaN and infinity are not allowed)",
            "is out of the range of a double"};
        char q[64];
        amp_quote_token(q, sizeof q, vtok, end, 40);
        snprintf(msg, MSG_MAX, "field %u: value '%s' %s", nmodes + 1, q, why[vrc]);
        *st = vrc == 3 ? AMP_ERR_RANGE : AMP_ERR_PARSE;
        goto fail;
    }
    while (!at_eol(p, end) && is_blank(*p)) p++;
    if (!at_eol(p, end) && *p != '#')
        goto field_count;
    if (p < end && *p == '#') {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl : end;
    }
    if ((size_t)(p - line) > AMP_TNS_MAX_LINE)
        goto fail;   /* reported as an over-long line */
    *next = p;
    return REC_OK;

bad_token: {
        /* p is inside or at the start of a field that is not an index. */
        const char *t = p;
        while (t > line && !is_blank(t[-1])) t--;
        unsigned field = count_fields(line, t) + 1;
        char q[64];
        amp_quote_token(q, sizeof q, t, end, 40);
        if (*t == '-' && t + 1 < end && (unsigned)(t[1] - '0') <= 9)
            snprintf(msg, MSG_MAX, "field %u: negative index '%s'", field, q);
        else
            snprintf(msg, MSG_MAX, "field %u: '%s' is not a non-negative integer index", field, q);
        *st = AMP_ERR_PARSE;
        goto fail;
    }
field_count:
    snprintf(msg, MSG_MAX, "expected %u fields (%u indices and a value), found %u", nmodes + 1,
             nmodes, count_fields(line, end));
    *st = AMP_ERR_PARSE;
fail: {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        *next = nl ? nl : end;
        if ((size_t)(*next - line) > AMP_TNS_MAX_LINE) {
            snprintf(msg, MSG_MAX, "%s", LONG_LINE_MSG);
            *st = AMP_ERR_PARSE;
        }
        return REC_ERR;
    }
}

static amp_status reader_fail(tns_reader *r, amp_error *err, amp_status st, uint64_t line,
                              const char *msg)
{
    return AMP_FAIL(err, st, "%s:%" PRIu64 ": %s", r->name, line, msg);
}

/* Find the first data line of a block and set the number of modes from it. */
static amp_status detect_modes(tns_reader *r, const char *buf, size_t len, amp_error *err)
{
    const char *p = buf, *end = buf + len;
    uint64_t line = r->lines;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        line++;
        const char *q = p;
        while (q < le && is_blank(*q)) q++;
        if ((size_t)(le - p) > AMP_TNS_MAX_LINE)
            return reader_fail(r, err, AMP_ERR_PARSE, line,
                               LONG_LINE_MSG);
        if (q < le && *q != '#') {
            unsigned f = count_fields(q, le);
            if (f < 3)
                return AMP_FAIL(err, AMP_ERR_PARSE,
                                "%s:%" PRIu64 ": a nonzero needs at least 2 indices and a value, "
                                "found %u field%s", r->name, line, f, f == 1 ? "" : "s");
            if (f - 1 > AMP_MAX_MODES)
                return AMP_FAIL(err, AMP_ERR_UNSUPPORTED,
                                "%s:%" PRIu64 ": %u modes; amped supports at most %d", r->name,
                                line, f - 1, AMP_MAX_MODES);
            if (r->opts->ndims && r->opts->ndims != f - 1)
                return AMP_FAIL(err, AMP_ERR_USAGE,
                                "%s:%" PRIu64 ": the data has %u modes but %u dimensions were given",
                                r->name, line, f - 1, r->opts->ndims);
            r->nmodes = f - 1;
            return amp_coo_init(r->t, r->nmodes, err);
        }
        p = nl ? nl + 1 : end;
    }
    return AMP_OK;
}

static void count_lines(const char *buf, chunk *c)
{
    const char *p = buf + c->begin, *end = buf + c->end;
    uint64_t n = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        n++;
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    c->lines = n;
}

static void parse_chunk(const tns_reader *r, const char *buf, chunk *c)
{
    const unsigned nmodes = r->nmodes;
    const uint64_t bias = r->store_bias;
    const char *p = buf + c->begin, *end = buf + c->end;
    uint64_t *ind[AMP_MAX_MODES];
    uint64_t maxv[AMP_MAX_MODES], maxl[AMP_MAX_MODES];
    for (unsigned m = 0; m < nmodes; m++) {
        ind[m] = r->t->ind[m];
        maxv[m] = 0;
        maxl[m] = 0;
    }
    double *val = r->t->val;
    uint64_t k = c->slot, line = 0;
    const uint64_t *dims = r->opts->ndims ? r->opts->dims : NULL;
    c->zero_line = UINT64_MAX;
    c->over_line[0] = c->over_line[1] = UINT64_MAX;
    while (p < end) {
        uint64_t idx[AMP_MAX_MODES];
        double v;
        const char *next;
        int rc = parse_record(p, end, nmodes, idx, &v, &next, c->err_msg, &c->err_status);
        if (rc == REC_OK) {
            for (unsigned m = 0; m < nmodes; m++) {
                uint64_t x = idx[m];
                ind[m][k] = x - bias;
                if (x > maxv[m]) {
                    maxv[m] = x;
                    maxl[m] = line;
                }
                if (x == 0 && c->zero_line == UINT64_MAX) {
                    c->zero_line = line;
                    c->zero_mode = (int)m;
                }
                for (int b = 0; dims && b < 2 && x >= dims[m] + (uint64_t)b; b++)
                    if (c->over_line[b] == UINT64_MAX) {
                        c->over_line[b] = line;
                        c->over_raw[b] = x;
                        c->over_mode[b] = m;
                    }
            }
            val[k++] = v;
        } else if (rc == REC_ERR) {
            c->failed = 1;
            c->err_line = line;
            break;
        }
        line++;
        p = next < end ? next + 1 : end;
    }
    c->written = k - c->slot;
    memcpy(c->max_raw, maxv, nmodes * sizeof *maxv);
    memcpy(c->max_line, maxl, nmodes * sizeof *maxl);
}

/* Parse buf[0, len), which ends at a line boundary (or the input's end). */
static amp_status parse_block(tns_reader *r, const char *buf, size_t len, amp_error *err)
{
    if (len == 0)
        return AMP_OK;
    if (r->nmodes == 0) {
        AMP_CHECK(detect_modes(r, buf, len, err));
        if (r->nmodes == 0) {       /* only comments so far */
            const char *p = buf, *end = buf + len;
            while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                r->lines++;
                p = nl ? nl + 1 : end;
            }
            return AMP_OK;
        }
    }
    int threads = amp_max_threads();
    size_t want = (size_t)threads * 4;
    size_t nchunks = len / MIN_CHUNK_BYTES;
    if (nchunks > want) nchunks = want;
    if (nchunks < 1) nchunks = 1;
    if (nchunks > r->nchunks_cap) {
        chunk *c = realloc(r->chunks, nchunks * sizeof *c);
        if (c == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        r->chunks = c;
        r->nchunks_cap = nchunks;
    }
    chunk *ch = r->chunks;
    memset(ch, 0, nchunks * sizeof *ch);
    size_t pos = 0;
    for (size_t i = 0; i < nchunks; i++) {
        ch[i].begin = pos;
        size_t cut = (i + 1 == nchunks) ? len : len / nchunks * (i + 1);
        if (cut < pos) cut = pos;
        if (cut < len) {
            const char *nl = memchr(buf + cut, '\n', len - cut);
            cut = nl ? (size_t)(nl - buf) + 1 : len;
        }
        ch[i].end = cut;
        pos = cut;
    }

    #pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t i = 0; i < nchunks; i++)
        count_lines(buf, &ch[i]);

    uint64_t total = 0;
    for (size_t i = 0; i < nchunks; i++) {
        ch[i].slot = r->t->nnz + total;
        total += ch[i].lines;
    }
    AMP_CHECK(amp_coo_reserve(r->t, r->t->nnz + total, err));

    #pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t i = 0; i < nchunks; i++)
        parse_chunk(r, buf, &ch[i]);

    uint64_t line0 = r->lines;   /* lines before this block */
    uint64_t k = r->t->nnz;
    for (size_t i = 0; i < nchunks; i++) {
        chunk *c = &ch[i];
        if (c->failed)
            return reader_fail(r, err, c->err_status, line0 + c->err_line + 1, c->err_msg);
        for (unsigned m = 0; m < r->nmodes; m++) {
            if (c->max_raw[m] > r->max_raw[m]) {
                r->max_raw[m] = c->max_raw[m];
                r->max_line[m] = line0 + c->max_line[m] + 1;
            }
        }
        for (int b = 0; b < 2; b++)
            if (c->over_line[b] != UINT64_MAX && r->over_line[b] == 0) {
                r->over_line[b] = line0 + c->over_line[b] + 1;
                r->over_raw[b] = c->over_raw[b];
                r->over_mode[b] = c->over_mode[b];
            }
        if (c->zero_line != UINT64_MAX && r->zero_line == 0) {
            r->zero_line = line0 + c->zero_line + 1;
            r->zero_mode = c->zero_mode;
        }
        if (c->written && c->slot != k) {
            /* Close the gap left by comment and blank lines. */
            for (unsigned m = 0; m < r->nmodes; m++)
                memmove(r->t->ind[m] + k, r->t->ind[m] + c->slot, c->written * sizeof(uint64_t));
            memmove(r->t->val + k, r->t->val + c->slot, c->written * sizeof(double));
        }
        k += c->written;
        line0 += c->lines;
    }
    r->t->nnz = k;
    r->lines = line0;
    return AMP_OK;
}

/* Settle the index base and the dimensions once all indices are known. */
static amp_status finish_indices(tns_reader *r, amp_read_info *info, amp_error *err)
{
    amp_coo *t = r->t;
    const amp_read_opts *o = r->opts;
    int base = o->index_base;
    if (base == 1 && r->zero_line)
        return AMP_FAIL(err, AMP_ERR_RANGE,
                        "%s:%" PRIu64 ": index 0 in mode %d, but the file is 1-based "
                        "(use --index-base 0 if it is 0-based)",
                        r->name, r->zero_line, r->zero_mode + 1);
    if (base < 0)
        base = r->zero_line ? 0 : 1;
    if (base == 0 && r->store_bias == 1) {
        const unsigned nmodes = t->nmodes;
        const uint64_t nnz = t->nnz;
        for (unsigned m = 0; m < nmodes; m++) {
            uint64_t *x = t->ind[m];
            #pragma omp parallel for schedule(static)
            for (uint64_t k = 0; k < nnz; k++)
                x[k] += 1;
        }
    }
    for (unsigned m = 0; m < t->nmodes; m++) {
        if (base == 0 && r->max_raw[m] == AMP_MAX_INDEX)
            return AMP_FAIL(err, AMP_ERR_RANGE,
                            "%s:%" PRIu64 ": index %" PRIu64 " in mode %u of a 0-based file "
                            "makes the dimension larger than %" PRIu64, r->name,
                            r->max_line[m], r->max_raw[m], m + 1, AMP_MAX_INDEX);
        uint64_t need = r->max_raw[m] + 1 - (uint64_t)base;   /* largest index + 1, 0-based */
        if (base == 1 && r->max_raw[m] == 0)
            need = 0;
        if (o->ndims) {
            /* The first line beyond the dimensions, of whatever mode:
             * where the user looks first. */
            if (need > o->dims[m] && r->over_line[base] != 0)
                return AMP_FAIL(err, AMP_ERR_RANGE,
                                "%s:%" PRIu64 ": index %" PRIu64 " in mode %u exceeds the "
                                "given dimension %" PRIu64, r->name, r->over_line[base],
                                r->over_raw[base], r->over_mode[base] + 1,
                                o->dims[r->over_mode[base]]);
            if (need > o->dims[m])
                return AMP_FAIL(err, AMP_ERR_INTERNAL, "%s: mode %u exceeds the given "
                                "dimension, yet no line was found doing so", r->name, m + 1);
            t->dims[m] = o->dims[m];
        } else {
            t->dims[m] = need;
        }
    }
    if (info)
        info->index_base = base;
    return AMP_OK;
}

static void reader_init(tns_reader *r, const char *name, const amp_read_opts *opts, amp_coo *t)
{
    memset(r, 0, sizeof *r);
    r->name = name;
    r->opts = opts;
    r->t = t;
    r->store_bias = opts->index_base == 0 ? 0 : 1;
}

static amp_status reader_finish(tns_reader *r, amp_read_info *info, amp_error *err)
{
    if (r->nmodes == 0 || r->t->nnz == 0)
        return AMP_FAIL(err, AMP_ERR_EMPTY, "%s: no nonzeros (%s)", r->name,
                        r->lines ? "only comments and blank lines" : "empty input");
    AMP_CHECK(finish_indices(r, info, err));
    if (info) {
        info->lines = r->lines;
        info->entries = r->t->nnz;
    }
    return AMP_OK;
}

amp_status amp_parse_tns_buffer(const char *name, const char *buf, size_t len,
                                const amp_read_opts *opts, amp_coo *t, amp_read_info *info,
                                amp_error *err)
{
    tns_reader r;
    reader_init(&r, name, opts, t);
    amp_status rc = parse_block(&r, buf, len, err);
    if (rc == AMP_OK)
        rc = reader_finish(&r, info, err);
    if (info)
        info->bytes = len;
    free(r.chunks);
    return rc;
}

/* Regular uncompressed file: map it and parse it in windows. */
static amp_status read_mapped(tns_reader *r, amp_source *s, amp_read_info *info, amp_error *err)
{
    amp_status rc = AMP_OK;
    size_t size = (size_t)s->file_size;
    char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, s->fd, 0);
    if (map == MAP_FAILED)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot map file: %s", r->name, strerror(errno));
#ifdef HAVE_MADVISE
    (void)madvise(map, size, MADV_SEQUENTIAL);
#endif
    size_t pos = 0;
    while (pos < size) {
        size_t cut = size - pos > MAP_WINDOW_BYTES ? pos + MAP_WINDOW_BYTES : size;
        if (cut < size) {
            const char *nl = memchr(map + cut, '\n', size - cut);
            cut = nl ? (size_t)(nl - map) + 1 : size;
        }
#ifdef HAVE_MADVISE
        if (cut < size) {
            /* Ask the kernel to read the next window while this one parses. */
            size_t pg = (size_t)sysconf(_SC_PAGESIZE);
            size_t a = cut / pg * pg;
            size_t n = size - a < MAP_WINDOW_BYTES ? size - a : MAP_WINDOW_BYTES;
            (void)madvise(map + a, n, MADV_WILLNEED);
        }
#endif
        AMP_CHECK_GOTO(parse_block(r, map + pos, cut - pos, err), rc, done);
#ifdef HAVE_MADVISE
        {
            /* Parsed text is not needed again: drop its pages from this
             * process (the page cache keeps them), so the text does not add
             * to the peak while the nonzero arrays grow. */
            size_t pg = (size_t)sysconf(_SC_PAGESIZE);
            size_t a = (pos + pg - 1) / pg * pg, b = cut / pg * pg;
            if (b > a)
                (void)madvise(map + a, b - a, MADV_DONTNEED);
        }
#endif
        pos = cut;
        if (r->opts->progress)
            r->opts->progress(r->opts->progress_ctx, pos, size);
    }
    if (info)
        info->bytes = size;
done:
    munmap(map, size);
    return rc;
}

/* Pipes and decompressors: fill a buffer, parse up to its last newline,
 * carry the partial line over. */
static amp_status read_streamed(tns_reader *r, amp_source *s, amp_read_info *info,
                                amp_error *err)
{
    amp_status rc = AMP_OK;
    size_t cap = r->opts->block_bytes ? r->opts->block_bytes : DEFAULT_BLOCK_BYTES;
    size_t len = 0;
    int eof = 0;
    char *buf = malloc(cap);
    if (buf == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for a %zu-byte read buffer", cap);
    while (!eof || len > 0) {
        while (!eof && len < cap) {
            size_t got = 0;
            AMP_CHECK_GOTO(amp_source_read(s, buf + len, cap - len, &got, err), rc, done);
            if (got == 0)
                eof = 1;
            len += got;
        }
        size_t cut = len;
        if (!eof) {
            const char *p = buf + len;
            while (p > buf && p[-1] != '\n') p--;
            cut = (size_t)(p - buf);
            if (cut == 0) {
                /* One line fills the buffer: grow it, up to the line limit. */
                if (len > AMP_TNS_MAX_LINE)
                    AMP_RAISE_GOTO(err, rc, done, AMP_ERR_PARSE,
                                   "%s:%" PRIu64 ": " LONG_LINE_MSG, r->name, r->lines + 1);
                char *nb = realloc(buf, cap * 2);
                if (nb == NULL)
                    AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
                buf = nb;
                cap *= 2;
                continue;
            }
        }
        AMP_CHECK_GOTO(parse_block(r, buf, cut, err), rc, done);
        memmove(buf, buf + cut, len - cut);
        len -= cut;
        if (r->opts->progress)
            r->opts->progress(r->opts->progress_ctx,
                              s->compression == AMP_COMPRESSION_NONE ? s->out_produced
                                                                     : s->raw_consumed,
                              s->file_size);
    }
    if (info)
        info->bytes = s->out_produced;
done:
    free(buf);
    return rc;
}

void amp_read_opts_init(amp_read_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->index_base = -1;
    opts->duplicates = AMP_DUP_SUM;
}

amp_status amp_read_tensor(const char *path, const amp_read_opts *opts, amp_coo *t,
                           amp_read_info *info, amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_source src;
    tns_reader r;
    amp_read_info local;
    if (info == NULL)
        info = &local;
    memset(info, 0, sizeof *info);
    memset(t, 0, sizeof *t);
    double t0 = amp_now();
    AMP_CHECK(amp_source_open(&src, path, err));
    const char *name = src.name;
    amp_input_format fmt = opts->format;
    if (fmt == AMP_INPUT_AUTO)
        fmt = (amp_has_suffix(path, ".bin") || amp_has_suffix(path, ".bin.gz") ||
               amp_has_suffix(path, ".bin.zst")) ? AMP_INPUT_BIN : AMP_INPUT_TNS;
    info->format = fmt;
    info->compression = src.compression;
    if (fmt == AMP_INPUT_BIN) {
        AMP_CHECK_GOTO(amp_read_bin(&src, opts, t, info, err), rc, fail);
    } else {
        reader_init(&r, name, opts, t);
        if (src.compression == AMP_COMPRESSION_NONE && src.file_size > 0)
            rc = read_mapped(&r, &src, info, err);
        else
            rc = read_streamed(&r, &src, info, err);
        if (rc == AMP_OK)
            rc = reader_finish(&r, info, err);
        free(r.chunks);
        if (rc != AMP_OK)
            goto fail;
    }
    info->seconds_read = amp_now() - t0;
    t0 = amp_now();
    AMP_CHECK_GOTO(amp_coo_dedup(t, opts->duplicates, name, info->index_base,
                                 &info->duplicates, err), rc, fail);
    info->seconds_dedup = amp_now() - t0;
    amp_source_close(&src);
    return AMP_OK;
fail:
    amp_source_close(&src);
    amp_coo_free(t);
    return rc;
}
