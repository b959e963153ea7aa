/* The fiber level (issue 45): amped-prep's fiber order and FIBER
 * sections, the loader's check of them, and the CPU MTTKRP over fibers.
 *
 * The fiber kernels are checked against the plain f64 reference
 * (amp_mttkrp_reference: one pass, one thread, no fibers) with fibers
 * forced on (amp_cpu_mttkrp_ws_fibers 1), every register width this CPU
 * has and the scratch-row kernel, several thread counts, ranks that take
 * every window shape. Tolerances, normwise (largest entry error over
 * largest reference entry): f64 1e-12 (the fiber sum changes the order of
 * the adds, nothing else); f32 1e-4 (24-bit sums). Methods from the same
 * start with fibers and without: fits within 1e-10 (the same arithmetic
 * in another order, over a few iterations). */
#include <config.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_build.h"
#include "amp_cpu.h"
#include "tap.h"
#include "test_util.h"
#include "cpd_util.h"

#define TOL_F64 1e-12
#define TOL_F32 1e-4
#define TOL_FIT 1e-10

static int cmp_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* The distinct (index d, index m) pairs of t's copy d: what its fibers
 * with middle mode m must number when every row is in fiber order. */
static uint64_t distinct_pairs(const amp_tensor *t, unsigned d, unsigned m)
{
    const amp_copy *c = &t->copies[d];
    uint64_t *p = malloc(2 * c->nnz * sizeof *p), n = 0;
    size_t blk = 0;
    for (uint64_t k = 0; k < c->nnz; k++) {
        while (c->block_start[blk + 1] <= k)
            blk++;
        p[2 * k] = amp_blco_field(c->block_key[blk], c->words[k], c->layout.shift[d],
                                  c->layout.width[d]);
        p[2 * k + 1] = amp_blco_field(c->block_key[blk], c->words[k], c->layout.shift[m],
                                      c->layout.width[m]);
    }
    qsort(p, c->nnz, 2 * sizeof *p, cmp_pair);
    for (uint64_t k = 0; k < c->nnz; k++)
        n += k == 0 || cmp_pair(p + 2 * k, p + 2 * (k - 1)) != 0;
    free(p);
    return n;
}

/* Runs of one row and one index m in copy d's order, a run cut where a
 * shard starts: what a fiber kernel walks. */
static uint64_t runs(const amp_tensor *t, unsigned d, unsigned m)
{
    const amp_copy *c = &t->copies[d];
    const amp_mode_layout *l = &c->layout;
    uint64_t n = 0, pr = 0, pm = 0;
    size_t blk = 0;
    uint32_t s = 0;
    for (uint64_t k = 0; k < c->nnz; k++) {
        while (c->block_start[blk + 1] <= k)
            blk++;
        int start = 0;
        while (s < l->nshards && l->shards[s].first_nnz + l->shards[s].nnz <= k)
            s++;
        start = k == l->shards[s].first_nnz;
        uint64_t r = amp_blco_field(c->block_key[blk], c->words[k], l->shift[d], l->width[d]);
        uint64_t i = amp_blco_field(c->block_key[blk], c->words[k], l->shift[m], l->width[m]);
        n += k == 0 || start || r != pr || i != pm;
        pr = r;
        pm = i;
    }
    return n;
}

/* What prep and the loader promise about a file's fibers: every copy has
 * them (3 modes or more), as many as the distinct (row, middle) pairs
 * where no block key cuts a row (never fewer), and the middle mode within
 * the sketches' error of the best (copies after the first prefer mode 1
 * by 2%). 2 tests. */
static void check_fiber_level(const char *name, const amp_tensor *t)
{
    int level_ok = 1, choice_ok = 1;
    for (unsigned d = 0; d < t->nmodes; d++) {
        const amp_copy *c = &t->copies[d];
        if (!c->has_fibers || c->fiber_mode == d || c->fiber_mode >= t->nmodes) {
            level_ok = 0;
            diag("%s: copy %u: no fiber level", name, d + 1);
            continue;
        }
        uint64_t want = distinct_pairs(t, d, c->fiber_mode);
        if (c->layout.key_bits > 0 ? c->nfibers < want : c->nfibers != want) {
            level_ok = 0;
            diag("%s: copy %u: %" PRIu64 " fibers, %" PRIu64 " distinct pairs", name, d + 1,
                 c->nfibers, want);
        }
        uint64_t best = UINT64_MAX;
        for (unsigned m = 0; m < t->nmodes; m++)
            if (m != d) {
                uint64_t n = distinct_pairs(t, d, m);
                best = n < best ? n : best;
            }
        if ((double)want > 1.08 * (double)best) {
            choice_ok = 0;
            diag("%s: copy %u: middle mode %u has %" PRIu64 " pairs, another %" PRIu64, name,
                 d + 1, c->fiber_mode + 1, want, best);
        }
    }
    ok(level_ok, "%s: every copy has fibers, as many as its distinct (row, middle) pairs", name);
    ok(choice_ok, "%s: each middle mode within 8%% of the fewest pairs", name);
}

/* Every mode's MTTKRP over fibers against the reference, f64 and f32,
 * threads 1, 2, 3 and 7, every kernel. 2 tests. */
static void check_mttkrp(const char *name, const amp_tensor *t, unsigned R)
{
    double *A[AMP_MAX_MODES];
    float *A32[AMP_MAX_MODES];
    uint64_t maxr = 1;
    for (unsigned m = 0; m < t->nmodes; m++) {
        A[m] = random_matrix(t->rows[m], R, 51 + m);
        A32[m] = malloc((t->rows[m] * R + 1) * sizeof **A32);
        for (uint64_t i = 0; i < t->rows[m] * R; i++)
            A32[m][i] = (float)A[m][i];
        maxr = t->rows[m] > maxr ? t->rows[m] : maxr;
    }
    double *ref = malloc(maxr * R * sizeof *ref), *M = malloc(maxr * R * sizeof *M);
    float *M32 = malloc(maxr * R * sizeof *M32);
    static const int threads[] = {1, 2, 3, 7};
    double worst64 = 0, worst32 = 0;
    for (unsigned d = 0; d < t->nmodes; d++) {
        amp_error err = {0};
        if (amp_mttkrp_reference(t, (d + 1) % t->nmodes, d, (const double *const *)A, R, ref,
                                 &err) != AMP_OK)
            exit(99);
        for (size_t i = 0; i < sizeof threads / sizeof *threads; i++) {
            amp_cpu_mttkrp_ws *ws;
            if (amp_cpu_mttkrp_ws_new(threads[i], R, &ws, &err) != AMP_OK)
                exit(99);
            amp_cpu_mttkrp_ws_fibers(ws, 1);
            int done[5] = {0};
            for (int want = 4; want >= 0; want--) {
                int isa = amp_cpu_mttkrp_ws_limit_isa(ws, want);
                if (done[isa]++)
                    continue;
                memset(M, 0xff, t->rows[d] * R * sizeof *M);   /* NaN: every row written */
                amp_cpu_mttkrp_f64(t, d, (const double *const *)A, R, M, ws);
                worst64 = max_or_nan(worst64, rel_diff(M, ref, t->rows[d] * R));
                memset(M32, 0xff, t->rows[d] * R * sizeof *M32);
                amp_cpu_mttkrp_f32(t, d, (const float *const *)A32, R, M32, ws);
                for (uint64_t k = 0; k < t->rows[d] * R; k++)
                    M[k] = M32[k];
                worst32 = max_or_nan(worst32, rel_diff(M, ref, t->rows[d] * R));
            }
            amp_cpu_mttkrp_ws_free(ws);
        }
    }
    ok(worst64 <= TOL_F64, "%s: f64 MTTKRP over fibers, rank %u, every mode, kernel and "
       "thread count, against the reference (%.2e)", name, R, worst64);
    ok(worst32 <= TOL_F32, "%s: f32 MTTKRP over fibers, rank %u (%.2e)", name, R, worst32);
    for (unsigned m = 0; m < t->nmodes; m++) {
        free(A[m]);
        free(A32[m]);
    }
    free(ref);
    free(M);
    free(M32);
}

/* ---- random and constructed tensors -------------------------------------- */

static void coo_new(amp_coo *x, unsigned nmodes, const uint64_t *dims, uint64_t nnz)
{
    amp_error err = {0};
    if (amp_coo_init(x, nmodes, &err) || amp_coo_reserve(x, nnz, &err))
        exit(99);
    for (unsigned m = 0; m < nmodes; m++)
        x->dims[m] = dims[m];
    x->nnz = nnz;
}

/* Each constructed case: fibers of one nonzero everywhere, rows of one
 * nonzero, one row holding most nonzeros in a few long fibers, and only
 * every third index used (empty slices). */
enum { CASE_FIBER1, CASE_ROW1, CASE_LONG_ROW, CASE_EMPTY, NCASES };

static void constructed(int which, amp_coo *x, const char **name)
{
    uint64_t seed = 4242 + (uint64_t)which;
    static const uint64_t dims3[] = {3000, 3000, 3000};
    switch (which) {
    case CASE_FIBER1:
        /* Every two modes' pair distinct: index 1 and 2 both k. */
        *name = "fibers of one nonzero";
        coo_new(x, 3, dims3, 2500);
        for (uint64_t k = 0; k < x->nnz; k++) {
            x->ind[0][k] = rng_next(&seed) % 40;
            x->ind[1][k] = x->ind[2][k] = k;
        }
        break;
    case CASE_ROW1:
        /* Mode 1 a permutation: every row of copy 1 one nonzero. */
        *name = "rows of one nonzero";
        coo_new(x, 4, (const uint64_t[]){2000, 30, 20, 10}, 2000);
        for (uint64_t k = 0; k < x->nnz; k++) {
            x->ind[0][k] = (k * 7919) % 2000;
            for (unsigned m = 1; m < 4; m++)
                x->ind[m][k] = rng_next(&seed) % x->dims[m];
        }
        break;
    case CASE_LONG_ROW:
        /* Nine in ten nonzeros in mode 1's row 5, in fibers of mode 2
         * thousands long. */
        *name = "one long row of long fibers";
        coo_new(x, 3, (const uint64_t[]){50, 4, 60000}, 60000);
        for (uint64_t k = 0; k < x->nnz; k++) {
            x->ind[0][k] = k % 10 ? 5 : rng_next(&seed) % 50;
            x->ind[1][k] = rng_next(&seed) % 4;
            x->ind[2][k] = k;
        }
        break;
    default:
        *name = "5 modes, every third index";
        coo_new(x, 5, (const uint64_t[]){300, 240, 180, 120, 90}, 6000);
        for (uint64_t k = 0; k < x->nnz; k++)
            for (unsigned m = 0; m < 5; m++)
                x->ind[m][k] = 3 * (rng_next(&seed) % (x->dims[m] / 3));
        break;
    }
    for (uint64_t k = 0; k < x->nnz; k++)
        x->val[k] = (double)(rng_next(&seed) >> 11) / 9007199254740992.0 - 0.4;
    coo_unique(x, *name);
}

static void check_default(const char *name, const amp_tensor *t, int want_fibers);

#define RANDOM_SHAPES 7
static const shape random_shapes[RANDOM_SHAPES] = {
    {"3 modes, power-law", 3, {4000, 2000, 300}, 40000, 1},
    {"4 modes", 4, {80, 60, 50, 40}, 12000, 0},
    {"5 modes, power-law", 5, {300, 200, 150, 100, 50}, 10000, 1},
    {"6 modes", 6, {20, 18, 16, 14, 12, 10}, 8000, 0},
    {"7 modes, power-law", 7, {40, 35, 30, 25, 20, 15, 10}, 8000, 1},
    {"8 modes", 8, {12, 11, 10, 9, 8, 7, 6, 5}, 6000, 0},
    /* 5 x 16 bits of compact indices: block keys cut rows and fibers. */
    {"5 modes, keyed", 5, {1000000, 1000000, 1000000, 1000000, 1000000}, 30000, 0},
};
/* Ranks a shape: a vector's part (5), whole vectors (16, 32), a part-filled
 * last vector (33) and several windows (72, 130). */
static const unsigned shape_ranks[RANDOM_SHAPES][2] = {
    {32, 130}, {16, 33}, {5, 72}, {32, 1}, {16, 33}, {8, 65}, {16, 32}};

static void test_tensors(void)
{
    for (int i = 0; i < RANDOM_SHAPES + NCASES; i++) {
        amp_coo x;
        amp_tensor t;
        const char *name;
        unsigned ranks[2] = {16, 40};
        if (i < RANDOM_SHAPES) {
            name = random_shapes[i].name;
            random_tensor(&random_shapes[i], 700 + (uint64_t)i, &x);
            coo_unique(&x, name);
            ranks[0] = shape_ranks[i][0];
            ranks[1] = shape_ranks[i][1];
        } else {
            constructed(i - RANDOM_SHAPES, &x, &name);
        }
        /* Small shards and chunks: rows and fibers cross chunks. */
        if (!ok(prepare(&x, "fibers.amp", 7, 613, &t), "%s: prepares and loads", name)) {
            skip(6 + (i == RANDOM_SHAPES + CASE_FIBER1), "no file");
            amp_coo_free(&x);
            continue;
        }
        check_fiber_level(name, &t);
        check_mttkrp(name, &t, ranks[0]);
        check_mttkrp(name, &t, ranks[1]);
        if (i == RANDOM_SHAPES + CASE_FIBER1)
            check_default(name, &t, 0);
        if (i == RANDOM_SHAPES + CASE_FIBER1) {
            uint64_t most = 0;
            for (unsigned d = 0; d < t.nmodes; d++)
                most = t.copies[d].nfibers > most ? t.copies[d].nfibers : most;
            diag("%s: %" PRIu64 " fibers in the fullest copy of %" PRIu64 " nonzeros", name,
                 most, t.nnz);
        }
        amp_tensor_free(&t);
        amp_coo_free(&x);
    }
}

/* ---- the shared tensors ------------------------------------------------- */

static void real_fibers(const char *path, const char *name, void *ctx)
{
    amp_coo x;
    amp_tensor t;
    (void)ctx;
    if (!ok(read_prepared(path, "real-fibers.amp", &x, &t, NULL), "%s: prepares and loads",
            name)) {
        skip(6, "not prepared");
        return;
    }
    check_fiber_level(name, &t);
    check_mttkrp(name, &t, 16);
    check_mttkrp(name, &t, 32);
    amp_tensor_free(&t);
    amp_coo_free(&x);
}

/* ---- files of format 1.0: fibers counted at load ------------------------ */

static void test_old_files(void)
{
    static const char *const names[] = {"amp-good-3mode.amp", "amp-good-4mode-key.amp"};
    for (size_t i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/files/%s", getenv("top_srcdir") ?
                 getenv("top_srcdir") : "..", names[i]);
        amp_error err = {0};
        amp_file *f = NULL;
        amp_tensor t;
        int loaded = amp_file_open(path, &f, &err) == AMP_OK &&
                     amp_tensor_load(f, 0, NULL, NULL, &t, &err) == AMP_OK;
        if (!ok(loaded, "%s (format 1.0) loads (%s)", names[i], amp_error_message(&err))) {
            amp_file_close(f);
            skip(3, "not loaded");
            continue;
        }
        const amp_file_info *in = amp_file_info_get(f);
        int counted = in->minor == 0;
        for (unsigned d = 0; d < t.nmodes; d++) {
            const amp_copy *c = &t.copies[d];
            counted &= amp_file_fiber(f, d) == NULL && c->has_fibers && c->fiber_mode != d;
            /* The middle mode with the fewest runs in the file's order. */
            uint64_t fewest = UINT64_MAX;
            for (unsigned m = 0; m < t.nmodes; m++)
                if (m != d && runs(&t, d, m) < fewest)
                    fewest = runs(&t, d, m);
            counted &= c->nfibers == fewest && runs(&t, d, c->fiber_mode) == fewest;
        }
        ok(counted, "%s: no FIBER section; each copy's middle mode the one of fewest runs, "
           "counted at load", names[i]);
        check_mttkrp(names[i], &t, 7);
        amp_tensor_free(&t);
        amp_file_close(f);
    }
}

/* ---- FIBER sections that do not hold ----------------------------------- */

typedef struct rewrite_ctx {
    const amp_tensor *t;
    const amp_chunk_job *jobs;
    const uint64_t *at;
} rewrite_ctx;

static amp_status rewrite_view(void *ctxp, size_t job, const uint64_t **words,
                               const void **vals, amp_error *err)
{
    const rewrite_ctx *ctx = ctxp;
    const amp_copy *c = &ctx->t->copies[ctx->jobs[job].mode];
    (void)err;
    *words = c->words + ctx->at[job];
    *vals = (const char *)c->vals + ctx->at[job] * amp_value_size(ctx->t->value_type);
    return AMP_OK;
}

/* f's tensor t written again to path, chunk for chunk, with mode 1's
 * FIBER section naming `middle` and counts shifted by `delta` in shard
 * `shard`; the writer's own refusal, if any, in *rc. */
static amp_status rewrite(const amp_file *f, const amp_tensor *t, const char *path,
                          unsigned middle, uint32_t shard, int64_t delta, amp_error *err)
{
    amp_write_opts wo;
    amp_write_opts_init(&wo);
    wo.no_sync = 1;
    amp_writer *w = NULL;
    const amp_meta *m = amp_file_meta(f);
    AMP_CHECK(amp_writer_open(&w, path, &wo, err));
    amp_status rc = amp_writer_meta(w, m, err);
    size_t njobs = 0;
    amp_chunk_job *jobs = NULL;
    uint64_t *at = NULL;
    for (unsigned d = 0; d < m->nmodes && rc == AMP_OK; d++) {
        const amp_mode_layout *l = amp_file_mode(f, d);
        rc = amp_writer_mode(w, l, err);
        if (rc == AMP_OK)
            rc = amp_writer_relabel(w, d, t->new_to_orig[d], err);
        uint64_t *counts = calloc(l->nshards, sizeof *counts);
        unsigned mid = t->copies[d].fiber_mode;
        if (rc == AMP_OK && amp_file_fiber(f, d) != NULL)
            rc = amp_file_read_fibers(f, d, &mid, counts, err);
        if (d == 0) {
            mid = middle;
            counts[shard] = (uint64_t)((int64_t)counts[shard] + delta);
        }
        if (rc == AMP_OK)
            rc = amp_writer_fibers(w, d, mid, counts, err);
        free(counts);
        for (uint32_t s = 0; s < l->nshards && rc == AMP_OK; s++)
            for (uint32_t q = 0; q < l->shards[s].nchunks; q++) {
                const amp_section *sec = amp_file_chunk(f, d, s, q);
                jobs = realloc(jobs, (njobs + 1) * sizeof *jobs);
                at = realloc(at, (njobs + 1) * sizeof *at);
                uint64_t first = njobs && jobs[njobs - 1].mode == d
                                     ? at[njobs - 1] + jobs[njobs - 1].count
                                     : 0;
                jobs[njobs] = (amp_chunk_job){d, s, q, sec->count, sec->aux};
                at[njobs++] = first;
            }
    }
    rewrite_ctx ctx = {t, jobs, at};
    if (rc == AMP_OK)
        rc = amp_writer_chunks(w, jobs, njobs, rewrite_view, &ctx, err);
    free(jobs);
    free(at);
    if (rc == AMP_OK)
        return amp_writer_commit(w, NULL, err);
    amp_writer_abort(w);
    return rc;
}

static void test_corrupt(void)
{
    static const shape s = {"3 modes", 3, {200, 150, 100}, 6000, 1};
    amp_coo x;
    amp_tensor t;
    amp_file *f = NULL;
    random_tensor(&s, 99, &x);
    coo_unique(&x, s.name);
    if (!ok(prepare_open(&x, "fiber-src.amp", 4, 700, &t, &f), "a file to rewrite")) {
        skip(7, "no file");
        amp_coo_free(&x);
        return;
    }
    const amp_mode_layout *l = amp_file_mode(f, 0);
    unsigned mid = t.copies[0].fiber_mode;
    amp_error err = {0};
    const char *path = test_path("fiber-bad.amp");
    /* The same counts written again: a file that loads, so the rewrite
     * itself is sound. */
    amp_status rc = rewrite(f, &t, path, mid, 0, 0, &err);
    amp_file *g = NULL;
    amp_tensor u;
    int loads = rc == AMP_OK && amp_file_open(path, &g, &err) == AMP_OK &&
                amp_tensor_load(g, 0, NULL, NULL, &u, &err) == AMP_OK;
    ok(loads, "rewritten with its own counts, the file loads (%s)", amp_error_message(&err));
    if (loads)
        amp_tensor_free(&u);
    amp_file_close(g);
    g = NULL;
    /* One fiber more in shard 1 than its nonzeros hold: found at load. */
    amp_error_clear(&err);
    rc = rewrite(f, &t, path, mid, 1, 1, &err);
    ok(rc == AMP_OK, "a count one too high is written (within its shard's bounds): %s",
       amp_error_message(&err));
    amp_status lrc = AMP_ERR_INTERNAL;
    if (rc == AMP_OK && amp_file_open(path, &g, &err) == AMP_OK) {
        lrc = amp_tensor_load(g, 0, NULL, NULL, &u, &err);
        if (lrc == AMP_OK)
            amp_tensor_free(&u);
    }
    amp_file_close(g);
    g = NULL;
    ok(lrc == AMP_ERR_CORRUPT && strstr(amp_error_message(&err), "fiber-bad.amp: mode 1 "
                                        "fiber counts (FIBER): shard 1 has ") != NULL,
       "... and refused at load, naming file, section and shard: %s", amp_error_message(&err));
    /* Another middle mode than the order's: its runs are not the counts. */
    amp_error_clear(&err);
    unsigned other = mid == 1 ? 2 : 1;
    rc = rewrite(f, &t, path, other, 0, 0, &err);
    lrc = AMP_ERR_INTERNAL;
    if (rc == AMP_OK && amp_file_open(path, &g, &err) == AMP_OK) {
        lrc = amp_tensor_load(g, 0, NULL, NULL, &u, &err);
        if (lrc == AMP_OK)
            amp_tensor_free(&u);
    }
    amp_file_close(g);
    g = NULL;
    ok(lrc == AMP_ERR_CORRUPT && strstr(amp_error_message(&err), "fiber counts (FIBER)"),
       "a FIBER section naming another middle mode is refused at load: %s",
       amp_error_message(&err));
    /* What the writer refuses: a count outside [rows, nnz] of its shard,
     * and the copy's own mode as its middle. */
    amp_error_clear(&err);
    rc = rewrite(f, &t, path, mid, 0, (int64_t)(l->shards[0].nnz + 1), &err);
    ok(rc == AMP_ERR_CORRUPT && strstr(amp_error_message(&err), "shard 0 has "),
       "the writer refuses a count beyond its shard's nonzeros: %s", amp_error_message(&err));
    amp_error_clear(&err);
    rc = rewrite(f, &t, path, 0, 0, 0, &err);
    ok(rc != AMP_OK && strstr(amp_error_message(&err), "middle mode 1 is not another mode"),
       "the writer refuses a copy's own mode as its middle: %s", amp_error_message(&err));
    /* --verify reads the section's counts too (an open-time check of the
     * entry, a content check of each count). */
    size_t bad = 99;
    ok(amp_file_verify(f, 0, NULL, NULL, &bad, &err) == AMP_OK && bad == 0,
       "the source file verifies, FIBER sections included");
    amp_tensor_free(&t);
    amp_file_close(f);
    amp_coo_free(&x);
}

/* ---- the default's choice ------------------------------------------------ */

/* Mode d's f64 MTTKRP with the fibers setting `mode`, 2 threads. */
static void mttkrp_with(const amp_tensor *t, unsigned d, double *const *A, unsigned R,
                        int mode, double *M)
{
    amp_cpu_mttkrp_ws *ws;
    amp_error err = {0};
    if (amp_cpu_mttkrp_ws_new(2, R, &ws, &err) != AMP_OK)
        exit(99);
    amp_cpu_mttkrp_ws_fibers(ws, mode);
    amp_cpu_mttkrp_f64(t, d, (const double *const *)A, R, M, ws);
    amp_cpu_mttkrp_ws_free(ws);
}

/* The default (f64) walks the fibers of a copy that averages 16 nonzeros
 * a fiber or more and not otherwise: its result is the bits of the forced kernel,
 * which the other kernel's are not (the sums' order differs). 1 test. */
static void check_default(const char *name, const amp_tensor *t, int want_fibers)
{
    const unsigned R = 16;
    double *A[AMP_MAX_MODES];
    uint64_t maxr = 1;
    for (unsigned m = 0; m < t->nmodes; m++) {
        A[m] = random_matrix(t->rows[m], R, 5 + m);
        maxr = t->rows[m] > maxr ? t->rows[m] : maxr;
    }
    double *M[3];
    for (int k = 0; k < 3; k++)
        M[k] = malloc(maxr * R * sizeof *M[k]);
    int same = 1, apart = 0;
    for (unsigned d = 0; d < t->nmodes; d++) {
        size_t n = t->rows[d] * R * sizeof *M[0];
        mttkrp_with(t, d, A, R, -1, M[0]);
        mttkrp_with(t, d, A, R, want_fibers, M[1]);
        mttkrp_with(t, d, A, R, !want_fibers, M[2]);
        same &= memcmp(M[0], M[1], n) == 0;
        apart |= memcmp(M[1], M[2], n) != 0;
    }
    ok(same && apart, "%s: the default MTTKRP is the %s kernel's, bit for bit (and the two "
       "differ)", name, want_fibers ? "fiber" : "nonzero");
    for (unsigned m = 0; m < t->nmodes; m++)
        free(A[m]);
    for (int k = 0; k < 3; k++)
        free(M[k]);
}

/* ---- methods from one start, with fibers and without --------------------- */

typedef struct fit_trace {
    double fit[64];
    unsigned n;
} fit_trace;

static void trace_add(void *ctx, unsigned iter, double fit, double delta, double seconds)
{
    fit_trace *tr = ctx;
    (void)iter;
    (void)delta;
    (void)seconds;
    if (tr->n < 64)
        tr->fit[tr->n++] = fit;
}

static void test_methods(void)
{
    /* Long fibers (small dimensions, nearly every cell), so that the
     * default walks them: 27 to 37 nonzeros a fiber. */
    static const shape s = {"3 modes, long fibers", 3, {40, 30, 20}, 60000, 0};
    static const amp_method methods[] = {AMP_METHOD_ALS, AMP_METHOD_ADMM, AMP_METHOD_MU,
                                         AMP_METHOD_HALS};
    amp_coo x;
    amp_tensor t;
    random_tensor(&s, 12, &x);
    coo_unique(&x, s.name);
    for (uint64_t k = 0; k < x.nnz; k++)
        x.val[k] = fabs(x.val[k]) + 0.1;   /* non-negative, for MU and HALS */
    if (!ok(prepare(&x, "fiber-methods.amp", 5, 1000, &t), "%s: prepares", s.name)) {
        skip(5, "no file");
        amp_coo_free(&x);
        return;
    }
    int longer = 1;
    for (unsigned d = 0; d < t.nmodes; d++)
        longer &= t.copies[d].has_fibers && t.copies[d].nnz >= 16 * t.copies[d].nfibers;
    check_default(s.name, &t, 1);
    for (size_t i = 0; i < sizeof methods / sizeof *methods; i++) {
        double gap = NAN;
        fit_trace tr[2] = {{{0}, 0}, {{0}, 0}};
        int okay = longer;
        for (int fib = 0; fib < 2 && okay; fib++) {
            amp_cpd_opts o;
            amp_cpd_opts_init(&o);
            o.rank = 6;
            o.max_iters = 12;
            o.tol = 0;
            o.threads = 2;
            o.method = methods[i];
            if (methods[i] != AMP_METHOD_ALS) {
                o.rules.n_constraint = 1;
                o.rules.constraint[0] = AMP_CONSTRAINT_NONNEG;
            }
            o.on_iter = trace_add;
            o.ctx = &tr[fib];
            /* Without fibers: the loaded copies' level hidden. */
            for (unsigned d = 0; d < t.nmodes; d++)
                t.copies[d].has_fibers = fib;
            amp_cpd c;
            amp_error err = {0};
            okay = amp_cpd_init_random(&t, o.rank, 3, &c, &err) == AMP_OK &&
                   amp_cpu_als(&t, &o, &c, &err) == AMP_OK;
            if (okay)
                amp_cpd_free(&c);
            else
                diag("%s: %s", amp_method_name(methods[i]), amp_error_message(&err));
        }
        if (okay && tr[0].n == tr[1].n && tr[0].n == 12) {
            gap = 0;
            for (unsigned k = 0; k < tr[0].n; k++)
                gap = max_or_nan(gap, fabs(tr[0].fit[k] - tr[1].fit[k]));
        }
        ok(gap <= TOL_FIT, "%s: 12 fits from one start over fibers and without within "
           "%.1e (%.2e)", amp_method_name(methods[i]), TOL_FIT, gap);
    }
    amp_tensor_free(&t);
    amp_coo_free(&x);
}

int main(void)
{
    int nreal = for_each_shared_tensor(NULL, NULL);
    plan((RANDOM_SHAPES + NCASES) * 7 + 1 + nreal * 7 + (nreal == 0) + 2 * 4 + 8 + 6);
    tap_real_data(nreal, getenv("AMP_TEST_DATA"));
    test_tensors();
    for_each_shared_tensor(real_fibers, NULL);
    test_old_files();
    test_corrupt();
    test_methods();
    return done_testing();
}
