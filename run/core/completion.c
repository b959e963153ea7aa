/* The test entries of --holdout-file, read and put in the run's
 * numbering (amp_completion.h). */
#include <config.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "amp_completion.h"

typedef struct orig_pair {
    uint64_t orig, compact;
} orig_pair;

static int by_orig(const void *a, const void *b)
{
    const orig_pair *x = a, *y = b;
    return x->orig < y->orig ? -1 : x->orig > y->orig;
}

void amp_test_set_free(amp_test_set *s)
{
    free(s->idx);
    free(s->val);
    memset(s, 0, sizeof *s);
}

amp_status amp_test_set_build(const amp_tensor *t, uint64_t n, uint64_t *const *ind,
                              const double *val, amp_test_set *out, amp_error *err)
{
    const unsigned N = t->nmodes;
    memset(out, 0, sizeof *out);
    out->nmodes = N;
    out->n = n;
    out->idx = malloc((n > 0 ? n : 1) * N * sizeof *out->idx);
    out->val = malloc((n > 0 ? n : 1) * sizeof *out->val);
    if (out->idx == NULL || out->val == NULL) {
        amp_test_set_free(out);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for %llu test entries",
                        (unsigned long long)n);
    }
    if (n > 0)
        memcpy(out->val, val, n * sizeof *val);
    for (unsigned m = 0; m < N; m++) {
        /* The relabelling need not ascend: a table sorted by original
         * index, searched per entry (test sets are small beside t). */
        const uint64_t rows = t->rows[m];
        orig_pair *pairs = NULL;
        if (t->new_to_orig[m] != NULL) {
            pairs = malloc((rows > 0 ? rows : 1) * sizeof *pairs);
            if (pairs == NULL) {
                amp_test_set_free(out);
                return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for mode %u's relabelling",
                                m + 1);
            }
            for (uint64_t i = 0; i < rows; i++)
                pairs[i] = (orig_pair){t->new_to_orig[m][i], i};
            qsort(pairs, rows, sizeof *pairs, by_orig);
        }
        for (uint64_t k = 0; k < n; k++) {
            const uint64_t o = ind[m][k];
            uint64_t c = AMP_TEST_NO_ROW;
            if (pairs == NULL) {
                c = o < rows ? o : AMP_TEST_NO_ROW;
            } else {
                uint64_t lo = 0, hi = rows;
                while (lo < hi) {
                    uint64_t mid = lo + (hi - lo) / 2;
                    if (pairs[mid].orig < o)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                if (lo < rows && pairs[lo].orig == o)
                    c = pairs[lo].compact;
            }
            out->idx[k * N + m] = c;
        }
        free(pairs);
    }
    return AMP_OK;
}

/* Whether text is a whole decimal integer (digits only). */
static int all_digits(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

amp_status amp_test_set_read(const amp_tensor *t, const char *path, amp_test_set *out,
                             amp_error *err)
{
    const unsigned N = t->nmodes;
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    amp_status rc = AMP_OK;
    uint64_t *ind[AMP_MAX_MODES] = {0};
    double *val = NULL;
    uint64_t n = 0, cap = 0, line = 0;
    char *buf = NULL;
    size_t bufcap = 0;
    ssize_t len;
    while ((len = getline(&buf, &bufcap, f)) >= 0) {
        line++;
        char *save = NULL, *tok[AMP_MAX_MODES + 2];
        unsigned nt = 0;
        char *hash = strchr(buf, '#');
        if (hash != NULL)
            *hash = '\0';
        for (char *p = strtok_r(buf, " \t\r\n", &save); p != NULL;
             p = strtok_r(NULL, " \t\r\n", &save)) {
            if (nt < AMP_MAX_MODES + 2)
                tok[nt] = p;
            nt++;
        }
        if (nt == 0)
            continue;   /* a blank or comment line */
        if (nt != N + 1) {
            rc = AMP_FAIL(err, AMP_ERR_PARSE, "%s:%llu: expected %u fields (%u indices and a "
                          "value, as the tensor has %u modes), found %u", path,
                          (unsigned long long)line, N + 1, N, N, nt);
            goto done;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            for (unsigned m = 0; m < N; m++) {
                uint64_t *p = realloc(ind[m], cap * sizeof *p);
                if (p == NULL) {
                    rc = AMP_FAIL(err, AMP_ERR_NOMEM, "%s: out of memory at line %llu", path,
                                  (unsigned long long)line);
                    goto done;
                }
                ind[m] = p;
            }
            double *v = realloc(val, cap * sizeof *v);
            if (v == NULL) {
                rc = AMP_FAIL(err, AMP_ERR_NOMEM, "%s: out of memory at line %llu", path,
                              (unsigned long long)line);
                goto done;
            }
            val = v;
        }
        for (unsigned m = 0; m < N; m++) {
            errno = 0;
            unsigned long long i = all_digits(tok[m]) ? strtoull(tok[m], NULL, 10) : 0;
            if (!all_digits(tok[m]) || errno != 0) {
                rc = AMP_FAIL(err, AMP_ERR_PARSE, "%s:%llu: field %u: '%.40s' is not an index",
                              path, (unsigned long long)line, m + 1, tok[m]);
                goto done;
            }
            if (i < 1 || i > t->dims[m]) {
                rc = AMP_FAIL(err, AMP_ERR_RANGE, "%s:%llu: index %llu of mode %u is outside "
                              "the tensor's 1 to %llu (indices are 1-based)", path,
                              (unsigned long long)line, i, m + 1,
                              (unsigned long long)t->dims[m]);
                goto done;
            }
            ind[m][n] = i - 1;
        }
        char *end = NULL;
        errno = 0;
        const double v = strtod(tok[N], &end);
        if (end == tok[N] || *end != '\0' || errno == ERANGE || !isfinite(v)) {
            rc = AMP_FAIL(err, AMP_ERR_PARSE, "%s:%llu: field %u: '%.40s' is not a finite "
                          "number", path, (unsigned long long)line, N + 1, tok[N]);
            goto done;
        }
        val[n++] = v;
    }
    if (ferror(f)) {
        rc = AMP_FAIL(err, AMP_ERR_IO, "%s: read error after line %llu", path,
                      (unsigned long long)line);
        goto done;
    }
    if (n == 0) {
        rc = AMP_FAIL(err, AMP_ERR_PARSE, "%s: no test entry (only comments and blank lines)",
                      path);
        goto done;
    }
    rc = amp_test_set_build(t, n, ind, val, out, err);
done:
    free(buf);
    fclose(f);
    for (unsigned m = 0; m < N; m++)
        free(ind[m]);
    free(val);
    return rc;
}
