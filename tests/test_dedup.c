/* Duplicate coordinates: counts and sums against a sort-based reference,
 * independent of thread count, and each policy's behaviour. */
#include <config.h>

#include "tap.h"
#include "test_util.h"

static unsigned ref_modes;
static const amp_coo *ref_t;

/* Order by coordinates, then by position, so the first occurrence leads. */
static int cmp_pos(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    for (unsigned m = 0; m < ref_modes; m++) {
        uint64_t p = ref_t->ind[m][x], q = ref_t->ind[m][y];
        if (p != q) return p < q ? -1 : 1;
    }
    return x < y ? -1 : x > y;
}

/* Reference: the expected deduplicated tensor, in first-occurrence order,
 * with sums added in file order. */
static uint64_t reference(const amp_coo *t, amp_coo *out)
{
    uint64_t n = t->nnz, *pos = malloc(n * 8), *first = malloc(n * 8);
    for (uint64_t k = 0; k < n; k++) pos[k] = k;
    ref_modes = t->nmodes;
    ref_t = t;
    qsort(pos, n, 8, cmp_pos);
    uint64_t dups = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = pos[i];
        if (i > 0 && cmp_pos(&pos[i - 1], &k) < 0) {
            int same = 1;
            for (unsigned m = 0; m < t->nmodes; m++) same &= t->ind[m][pos[i - 1]] == t->ind[m][k];
            if (same) { first[k] = first[pos[i - 1]]; dups++; continue; }
        }
        first[k] = k;
    }
    amp_error err;
    amp_coo_init(out, t->nmodes, &err);
    amp_coo_reserve(out, n, &err);
    memcpy(out->dims, t->dims, sizeof t->dims);
    uint64_t *slot = malloc(n * 8), w = 0;
    for (uint64_t k = 0; k < n; k++) {
        if (first[k] == k) {
            slot[k] = w;
            for (unsigned m = 0; m < t->nmodes; m++) out->ind[m][w] = t->ind[m][k];
            out->val[w++] = t->val[k];
        } else {
            out->val[slot[first[k]]] += t->val[k];
        }
    }
    out->nnz = w;
    free(pos); free(first); free(slot);
    return dups;
}

static void random_tensor(amp_coo *t, uint64_t nnz, unsigned modes, uint64_t dim, uint64_t seed)
{
    amp_error err;
    amp_coo_init(t, modes, &err);
    amp_coo_reserve(t, nnz, &err);
    for (unsigned m = 0; m < modes; m++) t->dims[m] = dim;
    for (uint64_t k = 0; k < nnz; k++) {
        for (unsigned m = 0; m < modes; m++) t->ind[m][k] = rng_next(&seed) % dim;
        t->val[k] = (double)(rng_next(&seed) % 1000) / 7.0;
    }
    t->nnz = nnz;
}

static void copy_tensor(const amp_coo *a, amp_coo *b)
{
    amp_error err;
    amp_coo_init(b, a->nmodes, &err);
    amp_coo_reserve(b, a->nnz, &err);
    memcpy(b->dims, a->dims, sizeof a->dims);
    for (unsigned m = 0; m < a->nmodes; m++) memcpy(b->ind[m], a->ind[m], a->nnz * 8);
    memcpy(b->val, a->val, a->nnz * 8);
    b->nnz = a->nnz;
}

int main(void)
{
    amp_error err = {0};
    /* Small dims force many repeats; a large case spans many buckets. */
    struct { uint64_t nnz; unsigned modes; uint64_t dim; } cases[] = {
        {1, 3, 5}, {2, 2, 1}, {5000, 3, 12}, {300000, 3, 90}, {200000, 5, 14}, {100000, 2, 1000000}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        amp_coo t, want;
        random_tensor(&t, cases[c].nnz, cases[c].modes, cases[c].dim, 1000 + c);
        uint64_t want_dups = reference(&t, &want);
        for (int th = 1; th <= 4; th *= 2) {
            amp_coo x;
            copy_tensor(&t, &x);
            set_threads(th);
            uint64_t dups = 0;
            amp_error_clear(&err);
            amp_status rc = amp_coo_dedup(&x, AMP_DUP_SUM, "t", 1, &dups, &err);
            ok(rc == AMP_OK && dups == want_dups && coo_equal(&x, &want),
               "nnz %llu, %u modes, dim %llu, %d thread%s: %llu duplicates summed as the reference",
               (unsigned long long)cases[c].nnz, cases[c].modes, (unsigned long long)cases[c].dim,
               th, th > 1 ? "s" : "", (unsigned long long)want_dups);
            if (dups != want_dups) diag("found %llu duplicates", (unsigned long long)dups);
            amp_coo_free(&x);
        }
        amp_coo x;
        copy_tensor(&t, &x);
        uint64_t dups = 0;
        ok(amp_coo_dedup(&x, AMP_DUP_KEEP, "t", 1, &dups, &err) == AMP_OK && dups == want_dups &&
           coo_equal(&x, &t), "keep: counted, tensor unchanged");
        amp_coo_free(&x);
        amp_coo_free(&want);
        amp_coo_free(&t);
    }

    amp_coo t;
    amp_read_opts o;
    amp_read_opts_init(&o);
    o.duplicates = AMP_DUP_ERROR;
    const char *text = "1 1 1\n2 3 1\n4 4 1\n2 3 5\n2 3 6\n";
    amp_error_clear(&err);
    ok(amp_parse_tns_buffer("d.tns", text, strlen(text), &o, &t, NULL, &err) == AMP_OK,
       "the buffer parser leaves duplicates to the caller");
    uint64_t dups;
    amp_error_clear(&err);
    is_int(amp_coo_dedup(&t, AMP_DUP_ERROR, "d.tns", 1, &dups, &err), AMP_ERR_DUPLICATE,
           "policy error fails");
    is_str(err.msg, "d.tns: 2 duplicate coordinates; the first is (2, 3) at nonzeros 2 and 4 "
           "(use --duplicates sum or keep)", "message gives count, coordinates and positions");
    amp_coo_free(&t);

    const char *p = write_file("d.tns", text, strlen(text));
    amp_read_info info;
    o.duplicates = AMP_DUP_SUM;
    amp_error_clear(&err);
    ok(amp_read_tensor(p, &o, &t, &info, &err) == AMP_OK && t.nnz == 3 && info.duplicates == 2 &&
       info.entries == 5 && t.val[1] == 12, "read with sum: 3 nonzeros, (2,3) holds 1+5+6");
    amp_coo_free(&t);
    return done_testing();
}
