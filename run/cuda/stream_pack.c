/* The stream layout: one 64-bit word per nonzero for the host-to-device
 * link, where the file's layout moves a word and a value (12 or 16 bytes).
 *
 * A mode-d copy is ordered by its output row, so the row is stored once
 * per run of equal rows (run_start, run_row: they stay resident on the
 * GPU, as the block keys of a keyed copy do) and the word keeps only the
 * other modes' indices, packed from bit 0. The value goes into the bits
 * above them as an integer q with value = q / 10^decimals, which holds
 * exactly for counts (decimals 0) and for values written with a few
 * decimals, as most FROSTT tensors are. A value is taken only when that
 * division, in the value's own type (f32 or f64, correctly rounded as on
 * the GPU), gives back the very same number; if one value is not, or the
 * bits do not fit in 64, the copy is not packed and streams as stored. */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "stream_pack.h"
#include "amp_threads.h"

#define MAX_DECIMALS 9

static const double p10[MAX_DECIMALS + 1] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};

/* Whether q / 10^k in the value's type is exactly v. */
static int decodes_to(int64_t q, unsigned k, double v, int f32)
{
    if (f32)
        return (float)q / (float)p10[k] == (float)v;
    return (double)q / p10[k] == v;
}

/* The integer for v at k decimals, or 0 with *ok cleared. The product
 * v 10^k may round to a neighbour of the integer meant: try those too. */
static int64_t quantize(double v, unsigned k, int f32, int *ok)
{
    double x = v * p10[k];
    *ok = 0;
    if (!(fabs(x) < 0x1p62))
        return 0;
    int64_t q = llrint(x);
    for (int64_t dq = 0; dq <= 1; dq++) {
        if (decodes_to(q + dq, k, v, f32)) {
            *ok = 1;
            return q + dq;
        }
        if (dq && decodes_to(q - dq, k, v, f32)) {
            *ok = 1;
            return q - dq;
        }
    }
    return 0;
}

static double value_at(const amp_copy *c, int f32, uint64_t k)
{
    return f32 ? (double)((const float *)c->vals)[k] : ((const double *)c->vals)[k];
}

static size_t block_of(const amp_copy *c, uint64_t k)
{
    size_t lo = 0, hi = c->nblocks;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (c->block_start[mid] <= k)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The output row of nonzero k - 1, or UINT64_MAX before the first: where
 * a thread's slice starts, whether its first nonzero begins a run. */
static uint64_t row_before(const amp_copy *c, uint64_t k, unsigned shift, unsigned width)
{
    if (k == 0)
        return UINT64_MAX;
    return amp_blco_field(c->block_key[block_of(c, k - 1)], c->words[k - 1], shift, width);
}

void amp_stream_copy_free(amp_stream_copy *s)
{
    amp_huge_free(s->words, (size_t)s->nnz * 8 + 8);
    free(s->run_start);
    free(s->run_row);
    memset(s, 0, sizeof *s);
}

amp_status amp_stream_pack(const amp_tensor *t, unsigned d, int threads, amp_stream_copy *s,
                           int *packed, amp_error *err)
{
    const amp_copy *c = &t->copies[d];
    const amp_mode_layout *l = &c->layout;
    const int f32 = t->value_type == AMP_VALUES_F32;
    const uint64_t nnz = c->nnz;
    const int T = amp_thread_count(threads);
    memset(s, 0, sizeof *s);
    *packed = 0;

    /* A word must keep the other modes' indices and at least one bit. */
    unsigned other_bits = 0;
    for (unsigned m = 0; m < t->nmodes; m++)
        if (m != d)
            other_bits += l->width[m];
    if (nnz == 0 || other_bits >= 64 || l->width[d] > 64)
        return AMP_OK;

    /* The fewest decimals that hold every value: the largest of each
     * value's fewest. A value that decodes at the most seen so far needs
     * no more, so most values cost one try, not one per decimal. */
    unsigned decimals = 0;
    int fails = 0;
#pragma omp parallel num_threads(T) reduction(max : decimals) reduction(| : fails)
    {
        unsigned most = 0;
#pragma omp for schedule(static)
        for (int64_t k = 0; k < (int64_t)nnz; k++) {
            double v = value_at(c, f32, (uint64_t)k);
            int ok = 0;
            quantize(v, most, f32, &ok);
            if (ok)
                continue;
            unsigned dk = 0;
            for (; dk <= MAX_DECIMALS; dk++) {
                quantize(v, dk, f32, &ok);
                if (ok)
                    break;
            }
            if (!ok)
                fails = 1;
            else if (dk > most)
                most = dk;
        }
        decimals = most;
    }
    if (fails)
        return AMP_OK;
    /* Each value's integer at those decimals, kept in the words until the
     * indices join it below; the largest |q| decides the bits. */
    s->words = amp_huge_alloc((size_t)nnz * 8 + 8, "the stream layout", err);
    if (s->words == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the stream layout");
    s->nnz = nnz;   /* what amp_stream_copy_free frees by */
    uint64_t qmax = 0;
    int negative = 0;
#pragma omp parallel for num_threads(T) reduction(max : qmax) reduction(| : fails, negative)
    for (int64_t k = 0; k < (int64_t)nnz; k++) {
        int ok;
        int64_t q = quantize(value_at(c, f32, (uint64_t)k), decimals, f32, &ok);
        if (!ok)
            fails = 1;
        negative |= q < 0;
        uint64_t a = q < 0 ? (uint64_t)(-q) : (uint64_t)q;
        if (a > qmax)
            qmax = a;
        s->words[k] = (uint64_t)q;
    }
    /* A sign bit only when a value is negative: every bit spared here is
     * room for the other modes' indices. */
    unsigned qneed = 1;
    while (qneed < 64 && (qmax >> qneed) != 0)
        qneed++;
    if (negative)
        qneed++;
    if (fails || other_bits + qneed > 64) {
        amp_stream_copy_free(s);
        return AMP_OK;
    }

    s->decimals = decimals;
    s->qshift = other_bits;
    s->qbits = 64 - other_bits;
    s->qsigned = negative;
    for (unsigned m = 0, at = 0; m < t->nmodes; m++) {
        if (m == d) {
            s->shift[m] = 64;   /* the run's key */
            s->width[m] = l->width[m];
            continue;
        }
        s->shift[m] = (uint8_t)at;
        s->width[m] = l->width[m];
        at += l->width[m];
    }
    uint64_t *counts = calloc((size_t)T + 1, sizeof *counts);
    if (counts == NULL) {
        amp_stream_copy_free(s);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the stream layout");
    }

    /* Pack the words and count the runs, on fixed thread ranges. */
    const unsigned dshift = l->shift[d], dwidth = l->width[d];
    const uint64_t qmask = s->qbits >= 64 ? UINT64_MAX : (UINT64_C(1) << s->qbits) - 1;
    /* T fixed slices, each run by one thread whatever team OpenMP gives. */
#pragma omp parallel for num_threads(T) schedule(static, 1)
    for (int me = 0; me < T; me++) {
        uint64_t a = nnz * (uint64_t)me / (uint64_t)T, b = nnz * (uint64_t)(me + 1) / (uint64_t)T;
        uint64_t runs = 0;
        if (a < b) {
            size_t blk = block_of(c, a);
            uint64_t prev = row_before(c, a, dshift, dwidth);
            for (uint64_t k = a; k < b; k++) {
                while (c->block_start[blk + 1] <= k)
                    blk++;
                const uint64_t key = c->block_key[blk], w = c->words[k];
                uint64_t out = 0;
                for (unsigned m = 0; m < t->nmodes; m++)
                    if (m != d)
                        out |= amp_blco_field(key, w, l->shift[m], l->width[m]) << s->shift[m];
                out |= (s->words[k] & qmask) << s->qshift;   /* q, from above */
                s->words[k] = out;
                uint64_t row = amp_blco_field(key, w, dshift, dwidth);
                runs += row != prev;
                prev = row;
            }
        }
        counts[me + 1] = runs;
    }
    for (int i = 0; i < T; i++)
        counts[i + 1] += counts[i];
    s->nruns = counts[T];
    s->run_start = malloc((s->nruns + 1) * sizeof *s->run_start);
    s->run_row = malloc((s->nruns + 1) * sizeof *s->run_row);
    if (s->run_start == NULL || s->run_row == NULL) {
        free(counts);
        amp_stream_copy_free(s);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the stream layout's runs");
    }
#pragma omp parallel for num_threads(T) schedule(static, 1)
    for (int me = 0; me < T; me++) {
        uint64_t a = nnz * (uint64_t)me / (uint64_t)T, b = nnz * (uint64_t)(me + 1) / (uint64_t)T;
        uint64_t r = counts[me];
        if (a < b) {
            size_t blk = block_of(c, a);
            uint64_t prev = row_before(c, a, dshift, dwidth);
            for (uint64_t k = a; k < b; k++) {
                while (c->block_start[blk + 1] <= k)
                    blk++;
                uint64_t row = amp_blco_field(c->block_key[blk], c->words[k], dshift, dwidth);
                if (row != prev) {
                    s->run_start[r] = k;
                    s->run_row[r++] = row;
                }
                prev = row;
            }
        }
    }
    s->run_start[s->nruns] = nnz;
    s->run_row[s->nruns] = 0;
    free(counts);
    *packed = 1;
    return AMP_OK;
}

double amp_stream_value(const amp_stream_copy *s, uint64_t word, int f32)
{
    uint64_t raw = s->qshift < 64 ? word >> s->qshift : 0;
    int64_t q = s->qbits >= 64 || !s->qsigned
                    ? (int64_t)raw
                    : (int64_t)(raw << (64 - s->qbits)) >> (64 - s->qbits);
    if (f32)
        return (double)((float)q / (float)p10[s->decimals]);
    return (double)q / p10[s->decimals];
}
