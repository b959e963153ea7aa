/* The test entries of --holdout-file in the run's numbering
 * (amp_completion.h). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

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
