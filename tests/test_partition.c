/* Work dealt to several GPUs (run/partition.c), checked on the CPU: every
 * nonzero lands in exactly one GPU's part per mode, owned rows tile each
 * mode, and the parts' MTTKRPs (the f64 reference on each part, factors in
 * the run's row order) add up to the whole tensor's, with each GPU writing
 * only its own rows when it owns them. Tolerance 1e-12 normwise: the parts
 * sum the same products in another order. */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_build.h"
#include "amp_core.h"
#include "tap.h"
#include "test_util.h"
#include "cpd_util.h"

#define TOL 1e-12

/* Rows of each part's copy d ascend in each of its two groups and stay
 * inside its declared range; the first group's rows of mode prev are the
 * GPU's own ([pb, pe)), the second group's are not. */
static int rows_in_range(const amp_copy *c, unsigned d, unsigned prev, uint64_t pb,
                         uint64_t pe)
{
    uint64_t last = 0;
    for (size_t b = 0; b < c->nblocks; b++)
        for (uint64_t k = c->block_start[b]; k < c->block_start[b + 1]; k++) {
            uint64_t row = amp_blco_field(c->block_key[b], c->words[k], c->layout.shift[d],
                                          c->layout.width[d]);
            uint64_t x = amp_blco_field(c->block_key[b], c->words[k], c->layout.shift[prev],
                                        c->layout.width[prev]);
            if (k == c->early_nnz)
                last = 0;
            if (row < last || row < c->row_begin || row >= c->row_begin + c->row_count)
                return 0;
            if (prev != d && (k < c->early_nnz) != (x >= pb && x < pe))
                return 0;
            last = row;
        }
    return 1;
}

/* All the checks of one partition of t; returns how many failed. */
static int same_copy(const amp_copy *a, const amp_copy *b, size_t vsize)
{
    return a->nnz == b->nnz && a->early_nnz == b->early_nnz && a->row_begin == b->row_begin &&
           a->row_count == b->row_count && a->nblocks == b->nblocks &&
           (a->nnz == 0 || (memcmp(a->words, b->words, a->nnz * 8) == 0 &&
                            memcmp(a->vals, b->vals, a->nnz * vsize) == 0)) &&
           memcmp(a->block_start, b->block_start, (a->nblocks + 1) * 8) == 0 &&
           memcmp(a->block_key, b->block_key, a->nblocks * 8) == 0;
}

static int check_partition(const char *name, const amp_tensor *t, unsigned N,
                           amp_partition_kind kind, int overlap, unsigned R)
{
    char kn[64];
    snprintf(kn, sizeof kn, "%s%s", kind == AMP_PARTITION_OWNER ? "owner" : "equal-nnz",
             overlap ? ", two groups" : "");
    amp_partition p;
    amp_error err = {0};
    int bad = 0;
    if (!ok(amp_partition_new(t, N, kind, &p, &err) == AMP_OK, "%s, %u GPUs, %s: deals (%s)",
            name, N, kn, amp_error_message(&err))) {
        skip(5, "no partition");
        return 1;
    }
    p.overlap = overlap;
    /* Owned rows tile every mode in GPU order; run_row is a bijection. */
    int tiles = 1, bijective = 1, balanced = 1;
    for (unsigned m = 0; m < t->nmodes; m++) {
        uint64_t next = 0, nnz = 0;
        for (unsigned g = 0; g < N; g++) {
            tiles &= p.modes[m].row_begin[g] == next;
            next += p.modes[m].row_count[g];
            nnz += p.modes[m].nnz[g];
        }
        tiles &= next == t->rows[m] && nnz == t->nnz;
        if (p.modes[m].run_row) {
            char *seen = calloc(t->rows[m] + 1, 1);
            for (uint64_t i = 0; i < t->rows[m]; i++) {
                uint64_t r = p.modes[m].run_row[i];
                bijective &= r < t->rows[m] && !seen[r];
                if (r < t->rows[m])
                    seen[r] = 1;
            }
            free(seen);
        }
        double best, imb = amp_partition_imbalance(&p, m, &best);
        /* Dealing each shard to the least-loaded GPU leaves the fullest
         * GPU at most one shard above the mean: Graham's bound, mean +
         * (1 - 1/N) largest (4/3 of the optimum holds, but the optimum is
         * not at hand). */
        double mean = (double)t->nnz / N;
        double largest = mean > 0 ? (double)p.modes[m].largest_shard / mean : 0;
        if (kind == AMP_PARTITION_OWNER)
            balanced &= imb >= 1 - 1e-12 && imb >= best - 1e-12 &&
                        imb <= 1 + (1 - 1.0 / N) * largest + 1e-12;
        else
            balanced &= imb <= 1 + (double)N / (double)(t->nnz > 0 ? t->nnz : 1);
    }
    ok(tiles && bijective && balanced, "%s, %u GPUs, %s: rows tile every mode, nonzeros add "
       "up, renumbering is a bijection, imbalance within the bound", name, N, kn);
    bad += !(tiles && bijective && balanced);

    /* Factors in run order (and back). */
    double *A[AMP_MAX_MODES], *Ar[AMP_MAX_MODES];
    int round_trip = 1;
    for (unsigned m = 0; m < t->nmodes; m++) {
        A[m] = random_matrix(t->rows[m], R, 77 + m);
        Ar[m] = malloc((t->rows[m] * R + 1) * sizeof(double));
        double *back = malloc((t->rows[m] * R + 1) * sizeof(double));
        amp_partition_rows_to_run(&p, m, R, A[m], Ar[m]);
        amp_partition_rows_to_file(&p, m, R, Ar[m], back);
        round_trip &= memcmp(back, A[m], t->rows[m] * R * sizeof(double)) == 0;
        free(back);
    }
    ok(round_trip, "%s, %u GPUs, %s: factor rows go to the run's order and back", name, N, kn);
    bad += !round_trip;

    int parts_ok = 1, sorted = 1, own_only = 1;
    double worst = 0;
    amp_tensor part[AMP_MAX_GPUS];
    for (unsigned g = 0; g < N; g++)
        if (amp_partition_tensor(t, &p, g, g % 3, &part[g], &err) != AMP_OK) {
            diag("part %u: %s", g, amp_error_message(&err));
            parts_ok = 0;
            for (unsigned h = 0; h < g; h++)
                amp_tensor_free(&part[h]);
            break;
        }
    if (parts_ok) {
        for (unsigned d = 0; d < t->nmodes; d++) {
            size_t n = t->rows[d] * R;
            double *ref = malloc((n + 1) * sizeof *ref), *sum = calloc(n + 1, sizeof *sum);
            double *Mg = malloc((n + 1) * sizeof *Mg), *ref_run = malloc((n + 1) * sizeof *ref);
            amp_mttkrp_reference(t, d, d, (const double *const *)A, R, ref, &err);
            amp_partition_rows_to_run(&p, d, R, ref, ref_run);
            for (unsigned g = 0; g < N; g++) {
                const amp_copy *c = &part[g].copies[d];
                parts_ok &= c->nnz == p.modes[d].nnz[g];
                unsigned pm = overlap ? (d + t->nmodes - 1) % t->nmodes : d;
                uint64_t pb = N > 1 ? p.modes[pm].row_begin[g] : 0;
                uint64_t pe = N > 1 ? pb + p.modes[pm].row_count[g] : t->rows[pm];
                sorted &= rows_in_range(c, d, pm, pb, pe);
                if (amp_mttkrp_reference(&part[g], d, d, (const double *const *)Ar, R, Mg,
                                         &err) != AMP_OK) {
                    parts_ok = 0;
                    continue;
                }
                uint64_t b = p.modes[d].row_begin[g], e = b + p.modes[d].row_count[g];
                for (uint64_t i = 0; i < t->rows[d]; i++)
                    for (unsigned r = 0; r < R; r++) {
                        double v = Mg[i * R + r];
                        if (kind == AMP_PARTITION_OWNER && (i < b || i >= e) && v != 0)
                            own_only = 0;
                        sum[i * R + r] += v;
                    }
            }
            double e = rel_diff(sum, ref_run, n);
            worst = e > worst || isnan(e) ? e : worst;
            free(ref);
            free(sum);
            free(Mg);
            free(ref_run);
        }
        /* The per-shard map (with the default table and with 4 buckets,
         * whose binary searches cross many shards) and the run_row table
         * give the same parts. */
        int same = 1;
        const size_t vsize = amp_value_size(t->value_type);
        for (int way = 0; way < 3; way++) {
            p.row_lookup = way == 0 ? -1 : 1;
            p.map_buckets = way == 2 ? 4 : 0;
            for (unsigned g = 0; g < N && same; g++) {
                amp_tensor other;
                if (amp_partition_tensor(t, &p, g, 2, &other, &err) != AMP_OK) {
                    same = 0;
                    break;
                }
                for (unsigned d = 0; same && d < t->nmodes; d++)
                    same = same_copy(&part[g].copies[d], &other.copies[d], vsize);
                amp_tensor_free(&other);
            }
        }
        p.row_lookup = 0;
        p.map_buckets = 0;
        ok(same, "%s, %u GPUs, %s: the same parts from the per-shard row map (65536 and 4 "
           "buckets) and from the table", name, N, kn);
        bad += !same;
        for (unsigned g = 0; g < N; g++)
            amp_tensor_free(&part[g]);
    } else {
        skip(1, "no parts");
    }
    ok(parts_ok && sorted, "%s, %u GPUs, %s: every part holds its nonzeros, rows ascending "
       "inside its range in each group, those needing only own rows of the previous mode "
       "first", name, N, kn);
    ok(parts_ok && own_only && worst <= TOL, "%s, %u GPUs, %s: the parts' MTTKRPs add up to "
       "the tensor's (%.1e)%s", name, N, kn, worst,
       kind == AMP_PARTITION_OWNER ? ", each GPU writing only its own rows" : "");
    bad += !(parts_ok && sorted) + !(parts_ok && own_only && worst <= TOL);
    for (unsigned m = 0; m < t->nmodes; m++) {
        free(A[m]);
        free(Ar[m]);
    }
    amp_partition_free(&p);
    return bad;
}

/* What amp_partition_tensors reported: every call's numbers in order. */
typedef struct progress_log {
    unsigned calls, rising;   /* rising: calls whose done exceeded the last's */
    uint64_t done, total;     /* the last call's */
    int total_changed;
} progress_log;

static void log_progress(void *ctx, uint64_t done, uint64_t total)
{
    progress_log *l = ctx;
    l->rising += l->calls == 0 || done > l->done;
    l->total_changed |= l->calls > 0 && total != l->total;
    l->calls++;
    l->done = done;
    l->total = total;
}

/* Every part at once, releasing the tensor's copies mode by mode: the same
 * parts as one at a time from an untouched tensor, and the copies gone;
 * progress reported once a part and mode, rising to every mode's
 * nonzeros. */
static void check_release(const char *name, amp_file *f, const amp_tensor *t, unsigned N,
                          amp_partition_kind kind, int overlap)
{
    amp_partition p;
    amp_tensor t2, ref[AMP_MAX_GPUS], all[AMP_MAX_GPUS];
    amp_error err = {0};
    int good = amp_partition_new(t, N, kind, &p, &err) == AMP_OK;
    p.overlap = overlap;
    unsigned built = 0;   /* reference parts that exist */
    while (good && built < N) {
        good = amp_partition_tensor(t, &p, built, 2, &ref[built], &err) == AMP_OK;
        built += good;
    }
    int loaded = good && amp_tensor_load(f, 2, NULL, NULL, &t2, &err) == AMP_OK;
    progress_log log = {0};
    int have_all = loaded && amp_partition_tensors(&t2, &p, 3, &t2, log_progress, &log, all,
                                                   &err) == AMP_OK;
    good = have_all;
    uint64_t nnz_all = 0;
    for (unsigned d = 0; d < t->nmodes; d++)
        nnz_all += t->copies[d].nnz;
    /* A part with no nonzeros of a mode reports no rise. */
    int reported = log.calls == N * t->nmodes && log.rising >= t->nmodes &&
                   log.done == nnz_all && log.total == nnz_all && !log.total_changed;
    size_t vsize = amp_value_size(t->value_type);
    for (unsigned g = 0; good && g < N; g++) {
        for (unsigned d = 0; d < t->nmodes; d++)
            good &= same_copy(&ref[g].copies[d], &all[g].copies[d], vsize);
        good &= all[g].nnz == ref[g].nnz && all[g].bytes == ref[g].bytes;
    }
    for (unsigned d = 0; good && d < t->nmodes; d++)
        good &= t2.copies[d].words == NULL && t2.copies[d].vals == NULL &&
                t2.copies[d].nnz == t->copies[d].nnz;
    good = good && t2.bytes == 0;   /* what the copies held, all released */
    if (good) {
        amp_partition part2;
        /* A second split of the released tensor is refused, not a crash. */
        good = amp_partition_new(&t2, N, kind, &part2, &err) == AMP_OK;
        amp_tensor again[AMP_MAX_GPUS];
        amp_error e2 = {0};
        good = good && amp_partition_tensors(&t2, &part2, 1, &t2, NULL, NULL, again, &e2) == AMP_ERR_USAGE;
        amp_partition_free(&part2);
    }
    ok(good, "%s, %u GPUs, %s%s: all parts at once, each mode's copy released after its "
       "parts, equal the parts one at a time (%s)", name, N,
       kind == AMP_PARTITION_OWNER ? "owner" : "equal-nnz", overlap ? ", two groups" : "",
       amp_error_message(&err));
    ok(have_all && reported, "%s, %u GPUs, %s%s: progress reported %u times (a part and "
       "mode: %u), %u rising, to %" PRIu64 " of %" PRIu64 " (every mode's nonzeros: %" PRIu64
       ")", name, N, kind == AMP_PARTITION_OWNER ? "owner" : "equal-nnz",
       overlap ? ", two groups" : "", log.calls, N * t->nmodes, log.rising, log.done, log.total,
       nnz_all);
    for (unsigned g = 0; g < built; g++)
        amp_tensor_free(&ref[g]);
    if (have_all)
        for (unsigned g = 0; g < N; g++)
            amp_tensor_free(&all[g]);
    if (loaded)
        amp_tensor_free(&t2);
    amp_partition_free(&p);
}

static void test_random(void)
{
    static const shape shapes[] = {
        {"3 modes, power-law", 3, {5000, 3000, 800}, 30000, 1},
        {"2 modes", 2, {400, 500}, 6000, 1},
        {"4 modes", 4, {60, 50, 40, 30}, 9000, 0},
        {"5 modes", 5, {30, 20, 25, 10, 15}, 7000, 1},
        /* > 64 index bits: renumbered rows change block keys. */
        {"5 modes, 80 index bits", 5, {1000000, 1000000, 1000000, 1000000, 1000000}, 20000, 0},
    };
    static const unsigned gpus[] = {1, 2, 3, 5};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        amp_coo x;
        amp_tensor t;
        amp_file *f = NULL;
        random_tensor(&shapes[i], 500 + i, &x);
        if (!ok(prepare_open(&x, "partition.amp", 16, 997, &t, &f), "%s: prepares",
                shapes[i].name)) {
            amp_coo_free(&x);
            continue;
        }
        for (size_t k = 0; k < sizeof gpus / sizeof *gpus; k++) {
            check_partition(shapes[i].name, &t, gpus[k], AMP_PARTITION_OWNER, 0, 5);
            if (gpus[k] > 1) {
                check_partition(shapes[i].name, &t, gpus[k], AMP_PARTITION_OWNER, 1, 5);
                check_partition(shapes[i].name, &t, gpus[k], AMP_PARTITION_EQUAL_NNZ, 0, 5);
                check_partition(shapes[i].name, &t, gpus[k], AMP_PARTITION_EQUAL_NNZ, 1, 5);
            }
        }
        check_release(shapes[i].name, f, &t, 2, AMP_PARTITION_OWNER, 0);
        check_release(shapes[i].name, f, &t, 3, AMP_PARTITION_OWNER, 1);
        check_release(shapes[i].name, f, &t, 2, AMP_PARTITION_EQUAL_NNZ, 0);
        amp_tensor_free(&t);
        amp_file_close(f);
        amp_coo_free(&x);
    }
}

/* One shard a mode: a second GPU gets nothing and must still be valid. */
static void test_one_shard(void)
{
    static const shape s = {"one shard", 3, {200, 100, 50}, 3000, 1};
    amp_coo x;
    amp_tensor t;
    amp_partition p;
    amp_error err = {0};
    amp_file *f = NULL;
    random_tensor(&s, 9, &x);
    if (!ok(prepare_open(&x, "partition1.amp", 1, 997, &t, &f), "one shard a mode: prepares")) {
        amp_coo_free(&x);
        return;
    }
    check_partition(s.name, &t, 2, AMP_PARTITION_OWNER, 0, 3);
    check_partition(s.name, &t, 2, AMP_PARTITION_OWNER, 1, 3);
    int idle = amp_partition_new(&t, 2, AMP_PARTITION_OWNER, &p, &err) == AMP_OK;
    for (unsigned m = 0; idle && m < t.nmodes; m++)
        idle &= p.modes[m].nnz[1] == 0 && p.modes[m].row_count[1] == 0 &&
                p.modes[m].nnz[0] == t.nnz;
    ok(idle, "one shard a mode: GPU 1 holds nothing, GPU 0 everything");
    amp_partition_free(&p);
    amp_tensor_free(&t);
    amp_file_close(f);
    amp_coo_free(&x);
}

static void one_real(const char *path, const char *name, void *ctx)
{
    (void)ctx;
    amp_coo x;
    amp_tensor t;
    amp_file *f = NULL;
    if (ok(read_prepared(path, "partition_real.amp", &x, &t, &f), "%s: prepares", name)) {
        check_partition(name, &t, 2, AMP_PARTITION_OWNER, 0, 8);
        check_partition(name, &t, 2, AMP_PARTITION_OWNER, 1, 8);
        check_partition(name, &t, 2, AMP_PARTITION_EQUAL_NNZ, 0, 8);
        amp_tensor_free(&t);
        amp_file_close(f);
        amp_coo_free(&x);
    }
}

int main(void)
{
    amp_error err = {0};
    amp_partition p;
    amp_tensor empty;
    memset(&empty, 0, sizeof empty);
    ok(amp_partition_new(&empty, 0, AMP_PARTITION_OWNER, &p, &err) == AMP_ERR_USAGE &&
       amp_partition_new(&empty, AMP_MAX_GPUS + 1, AMP_PARTITION_OWNER, &p, &err) ==
       AMP_ERR_USAGE, "0 GPUs and more than %d are refused", AMP_MAX_GPUS);
    test_random();
    test_one_shard();
    tap_real_data(for_each_shared_tensor(one_real, NULL), getenv("AMP_TEST_DATA"));
    return done_testing();
}
