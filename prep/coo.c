/* Storage of coordinate tensors and their summary statistics. */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "tensor_internal.h"

amp_status amp_coo_init(amp_coo *t, unsigned nmodes, amp_error *err)
{
    memset(t, 0, sizeof *t);
    if (nmodes < 1 || nmodes > AMP_MAX_MODES)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%u modes; amped supports 1 to %d", nmodes,
                        AMP_MAX_MODES);
    t->nmodes = nmodes;
    return AMP_OK;
}

amp_status amp_coo_reserve(amp_coo *t, uint64_t cap, amp_error *err)
{
    if (cap <= t->cap)
        return AMP_OK;
    /* Grow by half again at least, so streaming many blocks stays linear. */
    uint64_t want = t->cap + t->cap / 2;
    if (want < cap)
        want = cap;
    size_t old_bytes = (size_t)t->cap * 8, new_bytes;
    AMP_CHECK(amp_mul_size((size_t)want, 8, &new_bytes, err));
    for (unsigned m = 0; m < t->nmodes; m++) {
        void *p = amp_huge_realloc(t->ind[m], t->ind[m] ? old_bytes : 0, new_bytes,
                                   "the nonzero indices", err);
        if (p == NULL)
            return AMP_ERR_NOMEM;
        t->ind[m] = p;
    }
    void *p = amp_huge_realloc(t->val, t->val ? old_bytes : 0, new_bytes, "the nonzero values",
                               err);
    if (p == NULL)
        return AMP_ERR_NOMEM;
    t->val = p;
    t->cap = want;
    return AMP_OK;
}

void amp_coo_release(amp_coo *t)
{
    size_t bytes = (size_t)t->cap * 8;
    for (unsigned m = 0; m < AMP_MAX_MODES; m++) {
        amp_huge_free(t->ind[m], bytes);
        t->ind[m] = NULL;
    }
    amp_huge_free(t->val, bytes);
    t->val = NULL;
    t->cap = 0;
}

void amp_coo_free(amp_coo *t)
{
    amp_coo_release(t);
    memset(t, 0, sizeof *t);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

unsigned amp_degree_bin(uint64_t d)
{
    if (d < 8)
        return (unsigned)d - 1;
    unsigned e = 63u - (unsigned)__builtin_clzll(d);
    return 7 + 4 * (e - 3) + (unsigned)((d >> (e - 2)) & 3);
}

void amp_degree_bin_range(unsigned b, uint64_t *lo, uint64_t *hi)
{
    if (b < 7) {
        *lo = *hi = b + 1;
        return;
    }
    unsigned e = 3 + (b - 7) / 4, q = (b - 7) % 4;
    *lo = (uint64_t)(4 + q) << (e - 2);
    *hi = *lo + ((uint64_t)1 << (e - 2)) - 1;
}

/* Slice counts of one mode: a dense histogram when the dimension is
 * comparable to the nonzero count, a sorted copy when it is not (a huge
 * sparse dimension would make the histogram larger than the tensor).
 * h, if not NULL, gets the slices by degree. */
static amp_status mode_degrees(const amp_coo *t, unsigned m, uint64_t *nonempty,
                               uint64_t *max_degree, amp_degree_hist *h, amp_error *err)
{
    if (h)
        memset(h, 0, sizeof *h);
    const uint64_t nnz = t->nnz, dim = t->dims[m];
    const uint64_t *x = t->ind[m];
    uint64_t ne = 0, mx = 0;
    if (dim <= 4 * nnz + (1u << 20)) {
        uint64_t *hist = amp_huge_alloc((size_t)dim * 8, "a slice histogram", err);
        if (hist == NULL)
            return AMP_ERR_NOMEM;
        #pragma omp parallel for schedule(static)
        for (uint64_t k = 0; k < nnz; k++)
            __atomic_fetch_add(&hist[x[k]], 1, __ATOMIC_RELAXED);
        #pragma omp parallel reduction(+ : ne) reduction(max : mx)
        {
            /* Each thread's bins, added into h once at its end. */
            amp_degree_hist mine;
            if (h)
                memset(&mine, 0, sizeof mine);
            #pragma omp for schedule(static)
            for (uint64_t i = 0; i < dim; i++) {
                ne += hist[i] != 0;
                if (hist[i] > mx)
                    mx = hist[i];
                if (h && hist[i]) {
                    unsigned b = amp_degree_bin(hist[i]);
                    mine.slices[b]++;
                    mine.nnz[b] += hist[i];
                }
            }
            if (h) {
                #pragma omp critical
                for (unsigned b = 0; b < AMP_DEGREE_BINS; b++) {
                    h->slices[b] += mine.slices[b];
                    h->nnz[b] += mine.nnz[b];
                }
            }
        }
        amp_huge_free(hist, (size_t)dim * 8);
    } else {
        uint64_t *c = amp_huge_alloc((size_t)nnz * 8, "a sorted index copy", err);
        if (c == NULL)
            return AMP_ERR_NOMEM;
        memcpy(c, x, (size_t)nnz * 8);
        qsort(c, (size_t)nnz, 8, cmp_u64);
        for (uint64_t k = 0, run = 0; k < nnz; k++) {
            run = (k > 0 && c[k] == c[k - 1]) ? run + 1 : 1;
            ne += run == 1;
            if (run > mx)
                mx = run;
            /* The end of a slice's run: its degree is known. */
            if (h && (k + 1 == nnz || c[k + 1] != c[k])) {
                unsigned b = amp_degree_bin(run);
                h->slices[b]++;
                h->nnz[b] += run;
            }
        }
        amp_huge_free(c, (size_t)nnz * 8);
    }
    *nonempty = ne;
    *max_degree = mx;
    return AMP_OK;
}

amp_status amp_coo_stats_compute(const amp_coo *t, amp_coo_stats *s, amp_error *err)
{
    return amp_coo_stats_compute_opt(t, 1, s, err);
}

amp_status amp_coo_stats_compute_opt(const amp_coo *t, int degrees, amp_coo_stats *s,
                                     amp_error *err)
{
    memset(s, 0, sizeof *s);
    double lo = INFINITY, hi = -INFINITY, sq = 0;
    uint64_t zeros = 0, inexact = 0;
    const double *v = t->val;
    const uint64_t nnz = t->nnz;
    #pragma omp parallel for schedule(static) reduction(min : lo) reduction(max : hi) \
        reduction(+ : zeros, inexact)
    for (uint64_t k = 0; k < nnz; k++) {
        double x = v[k];
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
        zeros += x == 0;
        inexact += (double)(float)x != x;
    }
    /* Scale by the largest magnitude so squares of values near the
     * double range neither overflow nor vanish (as dnrm2 does). */
    double scale = fmax(fabs(lo), fabs(hi));
    if (scale > 0) {
        #pragma omp parallel for schedule(static) reduction(+ : sq)
        for (uint64_t k = 0; k < nnz; k++) {
            double x = v[k] / scale;   /* not * (1/scale): that overflows for subnormals */
            sq += x * x;
        }
    }
    s->val_min = lo;
    s->val_max = hi;
    s->norm = scale * sqrt(sq);
    s->zeros = zeros;
    s->all_f32_exact = inexact == 0;
    double cells = 1;
    for (unsigned m = 0; m < t->nmodes; m++) {
        cells *= (double)t->dims[m];
        if (degrees)
            AMP_CHECK(mode_degrees(t, m, &s->nonempty[m], &s->max_degree[m], NULL, err));
    }
    s->density = cells > 0 ? (double)nnz / cells : 0;
    return AMP_OK;
}

amp_status amp_coo_degree_hist(const amp_coo *t, unsigned m, amp_degree_hist *h,
                               amp_error *err)
{
    uint64_t nonempty, max_degree;
    return mode_degrees(t, m, &nonempty, &max_degree, h, err);
}
