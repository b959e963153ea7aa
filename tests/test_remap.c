/* FLYCOO remapping on the CPU (run/core/remap.c, issue 30): for every mode
 * d, copy d remapped through its positions equals the copy the file holds
 * for mode d + 1, word for word and value for value, and an MTTKRP over it
 * equals the one over the file's copy; on random 3- to 6-mode tensors
 * (keyed layouts among them) and $AMP_TEST_DATA, with positions from the
 * file's REMAP sections and computed at load. A position out of range
 * and copies that hold other nonzeros are refused. */
#include <config.h>

#include "tap.h"
#include "cpd_util.h"

#define RANK 5

/* Copy `next` of t, with room for nonzeros of its own: the remap's target. */
static amp_copy target(const amp_tensor *t, unsigned next)
{
    amp_copy c = t->copies[next];
    c.words = malloc((size_t)(t->nnz ? t->nnz : 1) * 8);
    c.vals = malloc((size_t)(t->nnz ? t->nnz : 1) * amp_value_size(t->value_type));
    if (c.words == NULL || c.vals == NULL)
        exit(99);
    /* Whatever the remap leaves unwritten shows. */
    memset(c.words, 0xa5, (size_t)t->nnz * 8);
    memset(c.vals, 0xa5, (size_t)t->nnz * amp_value_size(t->value_type));
    return c;
}

/* The MTTKRP of mode `next` over copy `next` of t, and over the same with
 * c in its place: bit for bit alike. */
static int same_mttkrp(const amp_tensor *t, unsigned next, const amp_copy *c)
{
    amp_tensor u = *t;
    amp_error err = {0};
    u.copies[next] = *c;
    double *A[AMP_MAX_MODES];
    for (unsigned m = 0; m < t->nmodes; m++)
        A[m] = random_matrix(t->rows[m], RANK, 7 + m);
    size_t n = (size_t)t->rows[next] * RANK;
    double *M0 = malloc((n + 1) * 8), *M1 = malloc((n + 1) * 8);
    int same = amp_mttkrp_reference(t, next, next, (const double *const *)A, RANK, M0,
                                    &err) == AMP_OK &&
               amp_mttkrp_reference(&u, next, next, (const double *const *)A, RANK, M1,
                                    &err) == AMP_OK &&
               memcmp(M0, M1, n * 8) == 0;
    for (unsigned m = 0; m < t->nmodes; m++)
        free(A[m]);
    free(M0);
    free(M1);
    return same;
}

/* Every mode of one file: 3 tests. with_streams: the file has REMAP
 * sections, and the positions read must equal those computed (the inputs
 * have no repeated coordinates, so the pairing is unique). */
static void check_file(const char *name, const amp_file *f, const amp_tensor *t,
                       int with_streams)
{
    amp_error err = {0};
    unsigned keyed = 0;
    for (unsigned d = 0; d < t->nmodes; d++)
        keyed += t->copies[d].layout.key_bits > 0;
    if (keyed)
        diag("%s: %u of %u copies keyed", name, keyed, t->nmodes);
    int equal = 1, mttkrp = 1, sources = 1;
    uint64_t *pos = malloc((size_t)(t->nnz + 1) * 8), *pos2 = malloc((size_t)(t->nnz + 1) * 8);
    for (unsigned d = 0; d < t->nmodes && equal; d++) {
        unsigned next = (d + 1) % t->nmodes;
        int from_file = -1;
        if (amp_remap_positions(f, t, d, 0, pos, &from_file, &err) != AMP_OK) {
            diag("%s mode %u: %s", name, d + 1, amp_error_message(&err));
            equal = 0;
            break;
        }
        sources &= from_file == with_streams;
        if (with_streams) {
            sources &= amp_remap_positions_compute(t, d, 0, pos2, &err) == AMP_OK &&
                       memcmp(pos, pos2, (size_t)t->nnz * 8) == 0;
        }
        amp_copy c = target(t, next);
        const amp_copy *file = &t->copies[next];
        size_t vsize = amp_value_size(t->value_type);
        if (amp_remap_copy(&t->copies[d], pos, t->value_type, &c, &err) != AMP_OK ||
            memcmp(c.words, file->words, (size_t)t->nnz * 8) != 0 ||
            memcmp(c.vals, file->vals, (size_t)t->nnz * vsize) != 0) {
            diag("%s: mode %u remapped to mode %u differs (%s)", name, d + 1, next + 1,
                 amp_error_message(&err));
            equal = 0;
        }
        mttkrp &= equal && same_mttkrp(t, next, &c);
        free(c.words);
        free(c.vals);
    }
    ok(equal, "%s: every copy remapped equals the next copy word for word (%s)", name,
       with_streams ? "file's positions" : "computed positions");
    ok(mttkrp, "%s: MTTKRP over each remapped copy equals the file's", name);
    ok(sources, "%s: positions %s", name,
       with_streams ? "from the REMAP sections, and equal to those computed"
                    : "computed (the file has no REMAP sections)");
    free(pos);
    free(pos2);
}

static void real_one(const char *path, const char *name, void *ctx)
{
    amp_coo x;
    (void)ctx;
    if (!read_unique(path, name, &x, 5))
        return;
    each_remap_file(&x, name, 16, 4096, 0, 3, check_file);
    amp_coo_free(&x);
}

/* Positions that are not a permutation, streams that name a position
 * twice, and a copy that holds another nonzero are each refused: 4 tests. */
static void refusals(void)
{
    static const shape s = {"3 modes", 3, {40, 30, 20}, 600, 0};
    amp_coo x, work;
    amp_build_opts o;
    amp_error err = {0};
    amp_file *f = NULL;
    amp_tensor t;
    random_tensor(&s, 91, &x);
    coo_unique(&x, s.name);
    copy_tensor(&x, &work);
    amp_build_opts_init(&o);
    o.shards = 3;
    o.chunk_nnz = 50;
    const char *path = test_path("refuse.amp");
    if (amp_build_write(&work, path, &o, NULL, &err) != AMP_OK ||
        amp_file_open(path, &f, &err) != AMP_OK ||
        amp_tensor_load(f, 0, NULL, NULL, &t, &err) != AMP_OK)
        exit(99);
    amp_coo_free(&work);
    uint64_t *pos = malloc(t.nnz * 8);
    amp_copy c = target(&t, 1);
    int got = amp_remap_positions_compute(&t, 0, 0, pos, &err) == AMP_OK;
    pos[3] = t.nnz;
    amp_error e1 = {0};
    got = got && amp_remap_copy(&t.copies[0], pos, t.value_type, &c, &e1) == AMP_ERR_CORRUPT;
    ok(got, "a position beyond the nonzeros is refused (%s)", amp_error_message(&e1));
    /* Copy 1 with one index changed no longer holds copy 0's nonzeros. */
    uint64_t saved = t.copies[1].words[5];
    t.copies[1].words[5] ^= 1;
    amp_error e2 = {0};
    got = amp_remap_positions_compute(&t, 0, 0, pos, &e2) == AMP_ERR_CORRUPT;
    ok(got, "a copy holding another nonzero is found (%s)", amp_error_message(&e2));
    t.copies[1].words[5] = saved;
    /* So is another value. */
    ((double *)t.copies[1].vals)[7] += 1;
    amp_error e3 = {0};
    got = amp_remap_positions_compute(&t, 0, 0, pos, &e3) == AMP_ERR_CORRUPT;
    ok(got, "a copy holding another value is found (%s)", amp_error_message(&e3));
    ((double *)t.copies[1].vals)[7] -= 1;
    amp_error e4 = {0};
    got = amp_remap_positions_read(f, &t, 0, 0, pos, &e4) == AMP_ERR_FORMAT;
    ok(got, "reading positions from a file without REMAP sections is refused (%s)",
       amp_error_message(&e4));
    free(pos);
    free(c.words);
    free(c.vals);
    amp_tensor_free(&t);
    amp_file_close(f);
    amp_coo_free(&x);
}

int main(void)
{
    int nreal = for_each_shared_tensor(NULL, NULL);
    plan(REMAP_RANDOM_FILES * 3 + 6 * nreal + 4);
    each_remap_random(3, check_file);
    if (nreal == 0)
        diag("no tensors in $AMP_TEST_DATA: only random ones");
    for_each_shared_tensor(real_one, NULL);
    refusals();
    return done_testing();
}
