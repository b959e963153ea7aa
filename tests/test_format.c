/* The .amp writer and reader on random tensors: every nonzero comes back
 * exactly once in every mode copy with its value, shards own disjoint row
 * ranges, relabellings round-trip, BLCO fields decode to what was encoded
 * (also past 64 bits), and the same input gives the same bytes on any
 * number of threads. */
#include <config.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>

#include "amp_build.h"
#include "amped_format.h"
#include "format_internal.h"
#include "tap.h"
#include "test_util.h"

/* ---- byte planes against a byte-by-byte reference --------------------------- */

/* The writer's SSE2 transform (16 words a step, then a scalar tail) on
 * lengths around the step, every pair of planes the writer asks for, and
 * the un-transform back. */
static void test_planes(void)
{
    static const size_t lens[] = {0, 1, 15, 16, 17, 31, 32, 33, 1000, 4099};
    uint64_t seed = 77;
    int bad64 = 0, bad32 = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t n = lens[li];
        uint64_t *w = malloc((n ? n : 1) * 8), *back = malloc((n ? n : 1) * 8);
        uint32_t *v = malloc((n ? n : 1) * 4), *back32 = malloc((n ? n : 1) * 4);
        unsigned char *pl = malloc(8 * n + 1), *all = malloc(8 * n + 1);
        for (size_t i = 0; i < n; i++) {
            w[i] = rng_next(&seed);
            v[i] = (uint32_t)rng_next(&seed);
        }
        for (unsigned first = 0; first < 8; first += 2) {
            amp_word_planes(w, n, first, 2, pl);
            for (size_t i = 0; i < n; i++)
                for (unsigned b = 0; b < 2; b++)
                    bad64 += pl[b * n + i] != (unsigned char)(w[i] >> (8 * (first + b)));
            memcpy(all + first * n, pl, 2 * n);
        }
        amp_planes_to_words(all, n, back);
        bad64 += n > 0 && memcmp(back, w, n * 8) != 0;
        for (unsigned first = 0; first < 4; first += 2) {
            amp_u32_planes(v, n, first, 2, pl);
            for (size_t i = 0; i < n; i++)
                for (unsigned b = 0; b < 2; b++)
                    bad32 += pl[b * n + i] != (unsigned char)(v[i] >> (8 * (first + b)));
            memcpy(all + first * n, pl, 2 * n);
        }
        amp_planes_to_u32(all, n, back32);
        bad32 += n > 0 && memcmp(back32, v, n * 4) != 0;
        free(w);
        free(back);
        free(v);
        free(back32);
        free(pl);
        free(all);
    }
    ok(bad64 == 0, "64-bit word planes match byte by byte and transform back (%d wrong)", bad64);
    ok(bad32 == 0, "32-bit value planes match byte by byte and transform back (%d wrong)", bad32);
}

/* ---- BLCO fields against 128-bit arithmetic -------------------------------- */

static void test_blco_fields(void)
{
    uint64_t seed = 7;
    int all_ok = 1, layouts_ok = 1;
    for (int trial = 0; trial < 200; trial++) {
        unsigned nmodes = 1 + (unsigned)(rng_next(&seed) % 8);
        uint64_t dims[AMP_MAX_MODES];
        for (unsigned m = 0; m < nmodes; m++)
            dims[m] = 1 + rng_next(&seed) % (UINT64_C(1) << (rng_next(&seed) % 17));
        unsigned mode = (unsigned)(rng_next(&seed) % nmodes);
        amp_mode_layout l;
        amp_error err = {0};
        if (amp_blco_layout(&l, nmodes, dims, mode, &err) != AMP_OK) {
            layouts_ok = 0;
            continue;
        }
        /* The output mode is on top. */
        for (unsigned m = 0; m < nmodes; m++)
            if (l.width[m] && l.width[mode] && l.shift[m] > l.shift[mode])
                layouts_ok = 0;
        for (int k = 0; k < 50; k++) {
            uint64_t idx[AMP_MAX_MODES];
            unsigned __int128 L = 0;
            for (unsigned m = 0; m < nmodes; m++) {
                idx[m] = rng_next(&seed) % dims[m];
                L |= (unsigned __int128)idx[m] << l.shift[m];
            }
            uint64_t word = (uint64_t)L, key = (uint64_t)(L >> 64);
            if (l.key_bits == 0 && key != 0)
                all_ok = 0;
            for (unsigned m = 0; m < nmodes; m++)
                all_ok &= amp_blco_field(key, word, l.shift[m], l.width[m]) == idx[m];
        }
    }
    ok(layouts_ok, "BLCO layouts for 200 random shapes: output mode on top");
    ok(all_ok, "BLCO fields decode to the encoded indices (10000 nonzeros, keys included)");

    /* A field straddling bit 64, and one wholly in the key. */
    amp_mode_layout l;
    uint64_t dims[3] = {UINT64_C(1) << 40, UINT64_C(1) << 40, UINT64_C(1) << 40};
    amp_error err = {0};
    is_int(amp_blco_layout(&l, 3, dims, 0, &err), AMP_OK, "120-bit layout accepted");
    is_int(l.index_bits, 120, "index bits = 3 x 40");
    is_int(l.key_bits, 56, "block key = the 56 bits above 64");
    uint64_t a = (UINT64_C(1) << 40) - 3, b = 0x123456789aULL, c = 0xfedcba987ULL;
    unsigned __int128 L = ((unsigned __int128)a << l.shift[0]) |
                          ((unsigned __int128)b << l.shift[1]) |
                          ((unsigned __int128)c << l.shift[2]);
    ok(amp_blco_field((uint64_t)(L >> 64), (uint64_t)L, l.shift[0], l.width[0]) == a &&
       amp_blco_field((uint64_t)(L >> 64), (uint64_t)L, l.shift[1], l.width[1]) == b &&
       amp_blco_field((uint64_t)(L >> 64), (uint64_t)L, l.shift[2], l.width[2]) == c,
       "straddling and key-only fields decode");
    uint64_t big[4] = {UINT64_C(1) << 40, UINT64_C(1) << 40, UINT64_C(1) << 40,
                       UINT64_C(1) << 20};
    amp_error e2 = {0};
    is_int(amp_blco_layout(&l, 4, big, 0, &e2), AMP_ERR_UNSUPPORTED,
           "more than 128 index bits is refused");
}

/* ---- inter-shard partitions ------------------------------------------------ */

static void test_isp(void)
{
    uint64_t seed = 5;
    int tiles = 1, even = 1;
    for (int trial = 0; trial < 2000; trial++) {
        uint64_t n = rng_next(&seed) % 100000;
        uint32_t p = 1 + (uint32_t)(rng_next(&seed) % 300);
        uint64_t next = 0, lo = UINT64_MAX, hi = 0;
        for (uint32_t q = 0; q < p; q++) {
            uint64_t b, e;
            amp_isp_range(n, p, q, &b, &e);
            tiles &= b == next && e >= b;
            next = e;
            lo = e - b < lo ? e - b : lo;
            hi = e - b > hi ? e - b : hi;
        }
        tiles &= next == n;
        even &= hi - lo <= 1;
    }
    ok(tiles, "ISPs tile each shard in order (2000 random shard sizes and SM counts)");
    ok(even, "ISP sizes differ by at most one");
}

/* ---- random tensors --------------------------------------------------------- */

typedef struct shape {
    const char *name;
    unsigned nmodes;
    uint64_t dims[8];
    uint64_t nnz;
    int skew;          /* power-law indices: a few heavy slices */
    int f64;           /* values not exact in f32 */
} shape;

static void random_tensor(const shape *s, uint64_t seed, amp_coo *t)
{
    amp_error err = {0};
    if (amp_coo_init(t, s->nmodes, &err) || amp_coo_reserve(t, s->nnz, &err))
        exit(99);
    for (unsigned m = 0; m < s->nmodes; m++)
        t->dims[m] = s->dims[m];
    for (uint64_t k = 0; k < s->nnz; k++) {
        for (unsigned m = 0; m < s->nmodes; m++) {
            uint64_t r = rng_next(&seed);
            if (s->skew) {
                double u = (double)(r >> 11) / 9007199254740992.0;
                t->ind[m][k] = (uint64_t)((double)s->dims[m] * u * u * u * u);
                if (t->ind[m][k] >= s->dims[m])
                    t->ind[m][k] = s->dims[m] - 1;
            } else {
                t->ind[m][k] = r % s->dims[m];
            }
        }
        uint64_t r = rng_next(&seed);
        t->val[k] = s->f64 ? (double)(r >> 11) / 9007199254740992.0 - 0.5
                           : (double)(1 + r % 9);
    }
    t->nnz = s->nnz;
}

static void copy_tensor(const amp_coo *a, amp_coo *b)
{
    amp_error err = {0};
    if (amp_coo_init(b, a->nmodes, &err) || amp_coo_reserve(b, a->nnz, &err))
        exit(99);
    for (unsigned m = 0; m < a->nmodes; m++) {
        b->dims[m] = a->dims[m];
        memcpy(b->ind[m], a->ind[m], a->nnz * 8);
    }
    memcpy(b->val, a->val, a->nnz * 8);
    b->nnz = a->nnz;
}

/* Rows of (coordinates..., value bits), sorted, for multiset comparison. */
static unsigned row_words;

static int cmp_rows(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    for (unsigned i = 0; i < row_words; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

static uint64_t *tensor_rows(const amp_coo *t)
{
    row_words = t->nmodes + 1;
    uint64_t *rows = malloc(t->nnz * row_words * 8);
    for (uint64_t k = 0; k < t->nnz; k++) {
        for (unsigned m = 0; m < t->nmodes; m++)
            rows[k * row_words + m] = t->ind[m][k];
        memcpy(&rows[k * row_words + t->nmodes], &t->val[k], 8);
    }
    qsort(rows, t->nnz, row_words * 8, cmp_rows);
    return rows;
}

static int read_file_bytes(const char *path, unsigned char **buf, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    struct stat st;
    fstat(fileno(f), &st);
    *n = (size_t)st.st_size;
    *buf = malloc(*n ? *n : 1);
    size_t got = fread(*buf, 1, *n, f);
    fclose(f);
    return got == *n ? 0 : -1;
}

/* Value i of a chunk's raw form (count words, then the values), as a
 * double. */
static double chunk_value(amp_value_type vt, const unsigned char *raw, uint64_t count,
                          uint64_t i)
{
    double v;
    if (vt == AMP_VALUES_F32) {
        float x;
        memcpy(&x, raw + 8 * count + 4 * i, 4);
        v = x;
    } else {
        memcpy(&v, raw + 8 * count + 8 * i, 8);
    }
    return v;
}

/* Rebuild a chunk read with amp_section_read_planes, plainly, byte by
 * byte, as a GPU kernel would: the reference for the SSE2 path. */
static void rebuild_planes(const amp_section *s, const unsigned char *in, unsigned char *out)
{
    size_t n = s->count, vs = s->raw_size / n - 8;
    for (size_t i = 0; i < n; i++) {
        for (size_t b = 0; b < 8; b++)
            out[8 * i + b] = (s->flags & AMP_SECTION_PLANAR_WORDS) ? in[b * n + i]
                                                                    : in[8 * i + b];
        for (size_t b = 0; b < vs; b++)
            out[8 * n + vs * i + b] = (s->flags & AMP_SECTION_PLANAR_VALUES)
                                          ? in[8 * n + b * n + i]
                                          : in[8 * n + vs * i + b];
    }
}

/* The FLYCOO dealing replayed plainly from what the file says: slices by
 * degree descending, then original index ascending, each to the shard
 * with the fewest nonzeros so far (the lowest numbered on ties, found by
 * a scan), labelled in dealing order inside its shard. */
typedef struct dealt_slice {
    uint64_t degree, orig;
} dealt_slice;

static int heavier_first(const void *a, const void *b)
{
    const dealt_slice *x = a, *y = b;
    if (x->degree != y->degree)
        return x->degree > y->degree ? -1 : 1;
    return x->orig < y->orig ? -1 : x->orig > y->orig;
}

static int dealing_replays(const amp_mode_layout *l, const uint64_t *degree,
                           const uint64_t *new_to_orig, uint64_t c)
{
    uint32_t S = l->nshards;
    dealt_slice *v = malloc((c ? c : 1) * sizeof *v);
    uint64_t *load = calloc(S ? S : 1, 8), *fill = calloc(S ? S : 1, 8);
    int good = v != NULL && load != NULL && fill != NULL && S > 0;
    for (uint64_t k = 0; good && k < c; k++)
        v[k] = (dealt_slice){degree[k], new_to_orig[k]};
    if (good)
        qsort(v, c, sizeof *v, heavier_first);
    for (uint64_t j = 0; good && j < c; j++) {
        uint32_t s = 0;
        for (uint32_t q = 1; q < S; q++)
            if (load[q] < load[s])
                s = q;
        load[s] += v[j].degree;
        uint64_t at = l->shards[s].index_begin + fill[s]++;
        good = at < l->shards[s].index_end && new_to_orig[at] == v[j].orig;
    }
    for (uint32_t s = 0; good && s < S; s++)
        good = load[s] == l->shards[s].nnz &&
               fill[s] == l->shards[s].index_end - l->shards[s].index_begin;
    free(v);
    free(load);
    free(fill);
    return good;
}

/* Coordinates of copy 1's nonzeros with their positions there, sorted by
 * coordinates: where a later copy's nonzero came from. */
static int cmp_coords(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    for (unsigned i = 0; i + 1 < row_words; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* Decode every mode copy back to original coordinates and compare with the
 * source tensor; check the shard and ordering properties on the way. */
static void check_file(const char *path, const amp_coo *orig, const char *name)
{
    amp_error err = {0};
    amp_file *f;
    if (!ok(amp_file_open(path, &f, &err) == AMP_OK, "%s: opens (%s)", name,
            amp_error_message(&err))) {
        skip(9, "cannot open");
        return;
    }
    const amp_meta *m = amp_file_meta(f);
    unsigned nm = m->nmodes;
    uint64_t *relabel[AMP_MAX_MODES];
    int relabel_ok = 1;
    for (unsigned d = 0; d < nm; d++) {
        relabel[d] = malloc(m->compact_dims[d] * 8);
        relabel_ok &= amp_file_read_relabel(f, d, relabel[d], &err) == AMP_OK;
    }
    ok(relabel_ok, "%s: relabellings read and are one-to-one", name);
    uint64_t *want = tensor_rows(orig);
    int copies_ok = 1, shards_ok = 1, heavy_first = 1, planes_ok = 1, planar_seen = 0;
    int dealt_ok = 1, stable_ok = 1, fiber_ok = 1;
    uint64_t *from0 = NULL;   /* copy 1: coordinates and position, by coordinates */
    amp_section_reader *r;
    amp_section_reader_new(f, &r, &err);
    for (unsigned d = 0; d < nm; d++) {
        const amp_mode_layout *l = amp_file_mode(f, d);
        uint64_t *got = malloc(m->nnz * row_words * 8), k = 0;
        uint64_t *row_count = calloc(m->compact_dims[d], 8);
        uint64_t *row_of = malloc(m->nnz * 8);
        /* Fibers (format 1.1): each nonzero's block key and middle index. */
        uint64_t *key_of = malloc(m->nnz * 8), *mid_of = calloc(m->nnz, 8);
        uint64_t *fib_counts = calloc(l->nshards, 8), *fib_runs = calloc(l->nshards, 8);
        unsigned middle = d;
        if (nm >= 3) {
            fiber_ok &= amp_file_fiber(f, d) != NULL &&
                        amp_file_read_fibers(f, d, &middle, fib_counts, &err) == AMP_OK &&
                        middle != d;
        }
        for (uint32_t s = 0; s < l->nshards; s++) {
            const amp_shard *sh = &l->shards[s];
            for (uint32_t c = 0; c < sh->nchunks; c++) {
                const amp_section *sec = amp_file_chunk(f, d, s, c);
                void *raw = malloc(sec->raw_size);
                if (amp_section_read(r, sec, raw, sec->raw_size, &err) != AMP_OK ||
                    amp_chunk_check(f, sec, raw, &err) != AMP_OK) {
                    copies_ok = 0;
                    free(raw);
                    continue;
                }
                unsigned char *pl = malloc(sec->raw_size), *back = malloc(sec->raw_size);
                planes_ok &= amp_section_read_planes(r, sec, pl, sec->raw_size, &err) == AMP_OK;
                rebuild_planes(sec, pl, back);
                planes_ok &= memcmp(back, raw, sec->raw_size) == 0;
                planar_seen |= (sec->flags & AMP_SECTION_PLANAR_WORDS) != 0;
                free(pl);
                free(back);
                const uint64_t *words = raw;
                for (uint64_t i = 0; i < sec->count && k < m->nnz; i++, k++) {
                    for (unsigned mm = 0; mm < nm; mm++) {
                        uint64_t idx = amp_blco_field(sec->aux, words[i], l->shift[mm],
                                                      l->width[mm]);
                        if (mm == d) {
                            shards_ok &= idx >= sh->index_begin && idx < sh->index_end;
                            row_count[idx]++;
                            row_of[k] = idx;
                        }
                        if (mm == middle)
                            mid_of[k] = idx;
                        got[k * row_words + mm] = relabel[mm][idx];
                    }
                    key_of[k] = sec->aux;
                    /* A fiber starts at a shard's first nonzero or where
                     * the row or the middle index changes. */
                    fib_runs[s] += k == sh->first_nnz || row_of[k] != row_of[k - 1] ||
                                   mid_of[k] != mid_of[k - 1];
                    if (nm >= 3 && k > sh->first_nnz && row_of[k] == row_of[k - 1])
                        fiber_ok &= key_of[k] > key_of[k - 1] ||
                                    (key_of[k] == key_of[k - 1] && mid_of[k] >= mid_of[k - 1]);
                    double v = chunk_value(m->value_type, raw, sec->count, i);
                    memcpy(&got[k * row_words + nm], &v, 8);
                }
                free(raw);
            }
            for (uint64_t i = sh->index_begin + 1; i < sh->index_end; i++)
                heavy_first &= row_count[i] <= row_count[i - 1];
        }
        for (uint64_t i = 0; i < m->compact_dims[d]; i++)
            shards_ok &= row_count[i] > 0;   /* compact: no empty row */
        dealt_ok &= dealing_replays(l, row_count, relabel[d], m->compact_dims[d]);
        if (k != m->nnz) {
            copies_ok = 0;
        } else if (d == 0) {
            /* The value word becomes the position in copy 1. */
            from0 = malloc(m->nnz * row_words * 8);
            memcpy(from0, got, m->nnz * row_words * 8);
            for (uint64_t i = 0; i < m->nnz; i++)
                from0[i * row_words + nm] = i;
            qsort(from0, m->nnz, row_words * 8, cmp_coords);
        } else if (from0 != NULL) {
            /* Later copies are stable scatters of copy 1, their rows then
             * ordered by block key and middle index stably: inside a row,
             * nonzeros of one key and middle index in copy 1's order. */
            uint64_t *last = calloc(m->compact_dims[d], 8);
            for (uint64_t i = 0; i < m->nnz && stable_ok; i++) {
                const uint64_t *hit =
                    bsearch(&got[i * row_words], from0, m->nnz, row_words * 8, cmp_coords);
                int same = i > 0 && row_of[i] == row_of[i - 1] && key_of[i] == key_of[i - 1] &&
                           mid_of[i] == mid_of[i - 1];
                stable_ok = hit != NULL && (!same || hit[nm] + 1 > last[row_of[i]]);
                if (stable_ok)
                    last[row_of[i]] = hit[nm] + 1;
            }
            free(last);
        }
        if (nm >= 3)
            for (uint32_t s = 0; s < l->nshards; s++)
                fiber_ok &= fib_runs[s] == fib_counts[s];
        free(key_of);
        free(mid_of);
        free(fib_counts);
        free(fib_runs);
        if (k == m->nnz) {
            qsort(got, m->nnz, row_words * 8, cmp_rows);
            copies_ok &= memcmp(got, want, m->nnz * row_words * 8) == 0;
        }
        free(got);
        free(row_count);
        free(row_of);
    }
    free(from0);
    amp_section_reader_free(r);
    ok(copies_ok, "%s: each of the %u mode copies holds every nonzero once, value exact", name,
       nm);
    ok(shards_ok, "%s: every output row is nonempty and inside its chunk's shard", name);
    ok(heavy_first, "%s: inside a shard, heavier rows come first", name);
    ok(dealt_ok, "%s: shards and labels are the greedy dealing, replayed", name);
    ok(stable_ok, "%s: inside a row of a later copy, nonzeros of one fiber keep copy 1's order",
       name);
    ok(fiber_ok, "%s: every copy's rows in fiber order, FIBER's counts those of the nonzeros",
       name);
    ok(planes_ok, "%s: chunks read as byte planes rebuild to the same bytes%s", name,
       planar_seen ? "" : " (none planar)");
    size_t bad = 99;
    ok(amp_file_verify(f, 0, NULL, NULL, &bad, &err) == AMP_OK && bad == 0,
       "%s: --verify holds", name);
    for (unsigned d = 0; d < nm; d++)
        free(relabel[d]);
    free(want);
    amp_file_close(f);
}

/* Write t (freed here) on 1 and 4 threads with shards shards and chunks of
 * chunk_nnz, check the file against t, and the two files against each
 * other; then on 4 threads that wait whenever any compressed bytes are
 * still unwritten (a 1-byte cap), which must change nothing. 14 tests. */
static void test_tensor(const char *name, amp_coo *tp, int want_f64, uint32_t shards,
                        uint64_t chunk_nnz)
{
    amp_coo t = *tp, work;
    amp_error err = {0};
    copy_tensor(&t, &work);
    amp_build_opts o;
    amp_build_opts_init(&o);
    o.shards = shards;
    o.chunk_nnz = chunk_nnz;
    o.source_name = name;
    o.params = "test=1\n";
    o.write.threads = 1;
    set_threads(1);
    const char *p1 = test_path("one.amp");
    amp_build_report rep;
    amp_status rc = amp_build_write(&work, p1, &o, &rep, &err);
    if (!ok(rc == AMP_OK, "%s: written on 1 thread (%s)", name, amp_error_message(&err))) {
        amp_coo_free(&t);
        amp_coo_free(&work);
        return;
    }
    is_int(rep.value_type, want_f64 ? AMP_VALUES_F64 : AMP_VALUES_F32,
           "%s: value type chosen by exactness", name);
    /* Greedy (LPT) bound: no shard exceeds the mean by more than one slice. */
    int greedy_ok = 1;
    for (unsigned d = 0; d < t.nmodes; d++)
        greedy_ok &= rep.modes[d].max_shard_nnz <=
                     t.nnz / rep.modes[d].nshards + 1 + rep.modes[d].max_degree;
    ok(greedy_ok, "%s: largest shard within one slice of the mean", name);
    check_file(p1, &t, name);

    amp_coo_free(&work);
    copy_tensor(&t, &work);
    o.write.threads = 4;
    set_threads(4);
    const char *p4 = test_path("four.amp");
    rc = amp_build_write(&work, p4, &o, NULL, &err);
    unsigned char *b1 = NULL, *b4 = NULL;
    size_t n1 = 0, n4 = 0;
    int same = rc == AMP_OK && read_file_bytes(p1, &b1, &n1) == 0 &&
               read_file_bytes(p4, &b4, &n4) == 0 && n1 == n4 && memcmp(b1, b4, n1) == 0;
    ok(same, "%s: 1 and 4 threads write byte-identical files (%zu bytes)", name, n1);
    free(b4);
    b4 = NULL;
    amp_coo_free(&work);
    copy_tensor(&t, &work);
    o.write.queue_bytes = 1;
    rc = amp_build_write(&work, p4, &o, NULL, &err);
    same = rc == AMP_OK && b1 != NULL && read_file_bytes(p4, &b4, &n4) == 0 && n1 == n4 &&
           memcmp(b1, b4, n1) == 0;
    ok(same, "%s: 4 threads held back at a 1-byte queue cap write the same bytes", name);
    free(b1);
    free(b4);
    amp_coo_free(&t);
    amp_coo_free(&work);
}

static void test_shape(const shape *s, uint64_t seed)
{
    amp_coo t;
    amp_error err = {0};
    random_tensor(s, seed, &t);
    uint64_t dup = 0;
    /* Duplicates would be legal in a file but make the multiset compare
     * ambiguous only in order, so sum them as amped-prep does by default. */
    amp_coo_dedup(&t, AMP_DUP_SUM, s->name, 1, &dup, &err);
    test_tensor(s->name, &t, s->f64, 5, 97);   /* several chunks per shard */
}

/* Every tensor of the test data (../shared/data): 3, 4 and 5 modes. */
static int test_real_tensors(int run)
{
    const char *dir = getenv("AMP_TEST_DATA");
    DIR *dp = dir ? opendir(dir) : NULL;
    int n = 0;
    struct dirent *e;
    while (dp && (e = readdir(dp)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".tns") != 0)
            continue;
        n++;
        if (!run)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        amp_read_opts ro;
        amp_read_opts_init(&ro);
        amp_coo t;
        amp_error err = {0};
        if (amp_read_tensor(path, &ro, &t, NULL, &err) != AMP_OK) {
            ok(0, "%s: reads (%s)", e->d_name, amp_error_message(&err));
            skip(10, "unreadable");
            continue;
        }
        amp_coo_stats st;
        amp_coo_stats_compute(&t, &st, &err);
        test_tensor(e->d_name, &t, !st.all_f32_exact, 16, 1000);
    }
    if (dp)
        closedir(dp);
    return n;
}

/* Every mode copy decoded to (original coordinates, value bits) by
 * position, for following remap streams. */
static uint64_t *decode_copy(amp_file *f, unsigned d, uint64_t *const *relabel)
{
    const amp_meta *m = amp_file_meta(f);
    const amp_mode_layout *l = amp_file_mode(f, d);
    unsigned w = m->nmodes + 1;
    uint64_t *rows = malloc(m->nnz * w * 8), g = 0;
    amp_section_reader *r;
    amp_error err = {0};
    amp_section_reader_new(f, &r, &err);
    for (uint32_t s = 0; s < l->nshards; s++)
        for (uint32_t c = 0; c < l->shards[s].nchunks; c++) {
            const amp_section *sec = amp_file_chunk(f, d, s, c);
            unsigned char *raw = malloc(sec->raw_size);
            amp_section_read(r, sec, raw, sec->raw_size, &err);
            for (uint64_t i = 0; i < sec->count; i++, g++) {
                uint64_t word;
                memcpy(&word, raw + 8 * i, 8);
                for (unsigned mm = 0; mm < m->nmodes; mm++)
                    rows[g * w + mm] =
                        relabel[mm][amp_blco_field(sec->aux, word, l->shift[mm], l->width[mm])];
                double v = chunk_value(m->value_type, raw, sec->count, i);
                memcpy(&rows[g * w + m->nmodes], &v, 8);
            }
            free(raw);
        }
    amp_section_reader_free(r);
    return rows;
}

/* --remap-streams: for every nonzero of every copy, the stream names the
 * position of the same nonzero in the next copy. 3 tests. */
static void test_remap_streams(const shape *s, uint64_t seed)
{
    amp_coo t;
    amp_error err = {0};
    random_tensor(s, seed, &t);
    uint64_t dup;
    amp_coo_dedup(&t, AMP_DUP_SUM, s->name, 1, &dup, &err);
    amp_build_opts o;
    amp_build_opts_init(&o);
    o.shards = 4;
    o.chunk_nnz = 113;
    o.remap_streams = 1;
    const char *p = test_path("remap.amp");
    amp_file *f = NULL;
    int written = amp_build_write(&t, p, &o, NULL, &err) == AMP_OK &&
                  amp_file_open(p, &f, &err) == AMP_OK;
    if (!ok(written, "%s: written with remap streams", s->name)) {
        diag("%s", amp_error_message(&err));
        skip(2, "no file");
        amp_coo_free(&t);
        return;
    }
    const amp_meta *m = amp_file_meta(f);
    uint64_t *relabel[AMP_MAX_MODES], *rows[AMP_MAX_MODES];
    for (unsigned d = 0; d < m->nmodes; d++) {
        relabel[d] = malloc(m->compact_dims[d] * 8);
        amp_file_read_relabel(f, d, relabel[d], &err);
    }
    for (unsigned d = 0; d < m->nmodes; d++)
        rows[d] = decode_copy(f, d, relabel);
    int follows = 1;
    unsigned w = m->nmodes + 1;
    amp_section_reader *r;
    amp_section_reader_new(f, &r, &err);
    for (unsigned d = 0; d < m->nmodes; d++) {
        const amp_mode_layout *l = amp_file_mode(f, d);
        unsigned next = (d + 1) % m->nmodes;
        uint64_t g = 0;
        for (uint32_t sh = 0; sh < l->nshards; sh++)
            for (uint32_t c = 0; c < l->shards[sh].nchunks; c++) {
                const amp_section *rs = amp_file_remap(f, d, sh, c);
                if (rs == NULL) {
                    follows = 0;
                    continue;
                }
                unsigned char *raw = malloc(rs->raw_size);
                follows &= amp_section_read(r, rs, raw, rs->raw_size, &err) == AMP_OK;
                for (uint64_t i = 0; i < rs->count; i++, g++) {
                    uint64_t to;
                    if (rs->aux == 4) {
                        uint32_t x;
                        memcpy(&x, raw + 4 * i, 4);
                        to = x;
                    } else {
                        memcpy(&to, raw + 8 * i, 8);
                    }
                    follows &= to < m->nnz &&
                               memcmp(&rows[d][g * w], &rows[next][to * w], w * 8) == 0;
                }
                free(raw);
            }
    }
    amp_section_reader_free(r);
    ok(follows, "%s: each remap entry names the same nonzero in the next copy", s->name);
    size_t bad = 0;
    ok(amp_file_verify(f, 0, NULL, NULL, &bad, &err) == AMP_OK,
       "%s: the file with remap streams verifies (%s)", s->name, amp_error_message(&err));
    for (unsigned d = 0; d < m->nmodes; d++) {
        free(relabel[d]);
        free(rows[d]);
    }
    amp_file_close(f);
    amp_coo_free(&t);
}

/* ---- writer misuse and reader limits --------------------------------------- */

static amp_status view_zero(void *ctx, size_t job, const uint64_t **words, const void **vals,
                           amp_error *err)
{
    static const uint64_t zero[2];
    (void)ctx;
    (void)job;
    (void)err;
    *words = zero;
    *vals = zero;
    return AMP_OK;
}

/* ---- relabel sections packed on other threads ------------------------------ */

typedef struct two_nonzeros {
    uint64_t words[2];
    float vals[2];
} two_nonzeros;

static amp_status view_two(void *ctx, size_t job, const uint64_t **words, const void **vals,
                           amp_error *err)
{
    const two_nonzeros *c = ctx;
    (void)job;
    (void)err;
    *words = c->words;
    *vals = c->vals;
    return AMP_OK;
}

typedef struct pack_job {
    const amp_writer *w;
    unsigned mode;
    const uint64_t *new_to_orig;
    amp_packed *packed;
    amp_status rc;
} pack_job;

static void *pack_on_thread(void *arg)
{
    pack_job *j = arg;
    amp_error e = {0};
    j->rc = amp_writer_pack_relabel(j->w, j->mode, j->new_to_orig, &j->packed, &e);
    return NULL;
}

/* A 2-mode file of the nonzeros (0, 1) and (1, 0), its relabel sections
 * written by amp_writer_relabel, or packed on two threads (mode 2's
 * started first) and put in file order. */
static amp_status write_two(const char *path, int packed, amp_error *err)
{
    static const uint64_t new_to_orig[2][2] = {{3, 7}, {8, 1}};
    amp_meta m = {0};
    m.nmodes = 2;
    m.value_type = AMP_VALUES_F32;
    m.nnz = 2;
    m.dims[0] = m.dims[1] = 9;
    m.compact_dims[0] = m.compact_dims[1] = 2;
    amp_writer *w;
    AMP_CHECK(amp_writer_open(&w, path, NULL, err));
    amp_status rc = amp_writer_meta(w, &m, err);
    pack_job jobs[2] = {{w, 1, new_to_orig[1], NULL, AMP_OK},
                        {w, 0, new_to_orig[0], NULL, AMP_OK}};
    if (rc == AMP_OK && packed) {
        pthread_t th[2];
        int started[2];
        for (int i = 0; i < 2; i++)
            started[i] = pthread_create(&th[i], NULL, pack_on_thread, &jobs[i]) == 0;
        for (int i = 0; i < 2; i++) {
            if (started[i])
                pthread_join(th[i], NULL);
            else
                jobs[i].rc = AMP_ERR_INTERNAL;
            if (jobs[i].rc != AMP_OK)
                rc = AMP_FAIL(err, jobs[i].rc, "packing mode %u failed", jobs[i].mode + 1);
        }
    }
    for (unsigned d = 0; d < 2 && rc == AMP_OK; d++) {
        amp_mode_layout l;
        amp_shard sh = {0, 2, 2, 1, 0, 0};
        rc = amp_blco_layout(&l, 2, m.compact_dims, d, err);
        l.chunk_nnz = 2;
        l.nshards = 1;
        l.shards = &sh;
        /* Rows in order: (0, 1) then (1, 0) in mode 1, the other way in 2. */
        uint64_t a = (UINT64_C(0) << l.shift[0]) | (UINT64_C(1) << l.shift[1]);
        uint64_t b = (UINT64_C(1) << l.shift[0]) | (UINT64_C(0) << l.shift[1]);
        two_nonzeros c = {{d == 0 ? a : b, d == 0 ? b : a}, {d == 0 ? 1.5f : 2.5f,
                                                            d == 0 ? 2.5f : 1.5f}};
        amp_chunk_job job = {d, 0, 0, 2, 0};
        if (rc == AMP_OK)
            rc = amp_writer_mode(w, &l, err);
        if (rc == AMP_OK && packed) {
            rc = amp_writer_put(w, jobs[1 - d].packed, err);
            jobs[1 - d].packed = NULL;
        } else if (rc == AMP_OK) {
            rc = amp_writer_relabel(w, d, new_to_orig[d], err);
        }
        if (rc == AMP_OK)
            rc = amp_writer_chunks(w, &job, 1, view_two, &c, err);
    }
    for (int i = 0; i < 2; i++)
        amp_packed_free(jobs[i].packed);
    if (rc != AMP_OK) {
        amp_writer_abort(w);
        return rc;
    }
    return amp_writer_commit(w, NULL, err);
}

static void test_packed_relabel(void)
{
    amp_error err = {0};
    const char *p1 = test_path("direct.amp"), *p2 = test_path("packed.amp");
    amp_status r1 = write_two(p1, 0, &err), r2 = write_two(p2, 1, &err);
    unsigned char *b1 = NULL, *b2 = NULL;
    size_t n1 = 0, n2 = 0;
    ok(r1 == AMP_OK && r2 == AMP_OK && read_file_bytes(p1, &b1, &n1) == 0 &&
           read_file_bytes(p2, &b2, &n2) == 0 && n1 == n2 && memcmp(b1, b2, n1) == 0,
       "relabel sections packed on two threads, out of order, write the bytes "
       "amp_writer_relabel does (%s)", amp_error_message(&err));
    free(b1);
    free(b2);

    amp_writer *w, *other;
    amp_meta m = {0};
    m.nmodes = 1;
    m.value_type = AMP_VALUES_F32;
    m.nnz = 1;
    m.dims[0] = 4;
    m.compact_dims[0] = 1;
    static const uint64_t map[1] = {2};
    amp_packed *pk = NULL, *unused = NULL;
    int opened = amp_writer_open(&w, test_path("put.amp"), NULL, &err) == AMP_OK &&
                 amp_writer_open(&other, test_path("other.amp"), NULL, &err) == AMP_OK &&
                 amp_writer_meta(w, &m, &err) == AMP_OK &&
                 amp_writer_meta(other, &m, &err) == AMP_OK &&
                 amp_writer_pack_relabel(other, 0, map, &pk, &err) == AMP_OK &&
                 amp_writer_pack_relabel(w, 0, map, &unused, &err) == AMP_OK;
    amp_error e1 = {0}, e2 = {0};
    ok(opened && amp_writer_put(w, NULL, &e1) == AMP_ERR_USAGE,
       "putting no section is refused");
    ok(opened && amp_writer_put(w, pk, &e2) == AMP_ERR_USAGE && strstr(e2.msg, "another"),
       "a section packed for another file is refused (%s)", e2.msg);
    /* Packed and never put: freed without a trace (ASan checks the leak). */
    amp_packed_free(unused);
    amp_writer_abort(w);
    amp_writer_abort(other);
}

static void test_writer_misuse(void)
{
    amp_error err = {0};
    amp_writer *w;
    const char *p = test_path("misuse.amp");
    is_int(amp_writer_open(&w, p, NULL, &err), AMP_OK, "writer opens");
    amp_chunk_job job = {0, 0, 0, 1, 0};
    amp_error e1 = {0};
    is_int(amp_writer_chunks(w, &job, 1, view_zero, NULL, &e1), AMP_ERR_USAGE,
           "chunks before the metadata are refused");
    amp_meta m = {0};
    m.nmodes = 2;
    m.value_type = AMP_VALUES_F32;
    m.nnz = 2;
    m.dims[0] = m.dims[1] = 4;
    m.compact_dims[0] = m.compact_dims[1] = 2;
    is_int(amp_writer_meta(w, &m, &err), AMP_OK, "metadata written");
    amp_error e2 = {0};
    is_int(amp_writer_commit(w, NULL, &e2), AMP_ERR_INTERNAL,
           "commit of an incomplete file is refused");
    like(e2.msg, "inconsistent", "and says why");
    struct stat st;
    ok(stat(p, &st) != 0, "no file appears under the final name");

    amp_write_opts o;
    amp_write_opts_init(&o);
    o.level = 99;
    amp_error e3 = {0};
    is_int(amp_writer_open(&w, p, &o, &e3), AMP_ERR_USAGE, "level 99 is refused");
}

static void test_small_buffer(void)
{
    shape s = {"small", 3, {30, 40, 50}, 300, 0, 0};
    amp_coo t;
    random_tensor(&s, 3, &t);
    amp_error err = {0};
    const char *p = test_path("small.amp");
    amp_build_opts o;
    amp_build_opts_init(&o);
    o.write.level = 0;  /* stored: sections read straight into the buffer */
    ok(amp_build_write(&t, p, &o, NULL, &err) == AMP_OK, "level 0 (stored) writes");
    amp_file *f;
    if (amp_file_open(p, &f, &err) != AMP_OK) {
        ok(0, "level 0 (stored): the file opens (%s)", amp_error_message(&err));
        skip(2, "cannot open");
        amp_coo_free(&t);
        return;
    }
    const amp_section *c = amp_file_chunk(f, 0, 0, 0);
    ok(c != NULL && !(c->flags & AMP_SECTION_ZSTD), "level 0 chunks are stored uncompressed");
    amp_section_reader *r;
    amp_section_reader_new(f, &r, &err);
    char tiny[8];
    amp_error e = {0};
    is_int(amp_section_read(r, c, tiny, sizeof tiny, &e), AMP_ERR_USAGE,
           "a buffer smaller than the section is refused");
    ok(amp_file_chunk(f, 0, 999, 0) == NULL && amp_file_chunk(f, 7, 0, 0) == NULL,
       "out-of-range chunk lookups give NULL");
    amp_section_reader_free(r);
    amp_file_close(f);
    amp_coo_free(&t);
}

/* ---- progress ------------------------------------------------------------- */

typedef struct progress_event {
    const char *phase;
    uint64_t done, total;
} progress_event;

typedef struct progress_log {
    progress_event *ev;
    size_t n, cap;
    uint64_t chunk_nnz;     /* summed by the write.progress hook */
} progress_log;

static void log_progress(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
    progress_log *lg = ctx;
    if (lg->n == lg->cap) {
        lg->cap = lg->cap ? 2 * lg->cap : 256;
        lg->ev = realloc(lg->ev, lg->cap * sizeof *lg->ev);
        if (lg->ev == NULL)
            exit(99);
    }
    lg->ev[lg->n++] = (progress_event){phase, done, total};
}

static void log_chunk(void *ctx, uint64_t chunk_nnz)
{
    ((progress_log *)ctx)->chunk_nnz += chunk_nnz;
}

/* The build's progress hook, on 4 threads so that the chunk reports come
 * from the writer's ordered block on several threads. 6 tests. */
static void test_progress(void)
{
    shape s = {"progress", 4, {40, 1000, 30, 20}, 2500, 1, 0};
    amp_coo t;
    random_tensor(&s, 5, &t);
    uint64_t nnz = t.nnz;
    unsigned nm = t.nmodes;
    progress_log lg = {0};
    amp_build_opts o;
    amp_build_opts_init(&o);
    ok(o.progress == NULL && o.progress_ctx == NULL && o.write.progress == NULL &&
       o.write.progress_ctx == NULL, "progress: no hooks by default");
    o.shards = 5;
    o.chunk_nnz = 97;   /* dozens of chunks per copy */
    o.progress = log_progress;
    o.progress_ctx = &lg;
    o.write.progress = log_chunk;   /* the caller's own, passed on */
    o.write.progress_ctx = &lg;
    o.write.threads = 4;
    set_threads(4);
    amp_error err = {0};
    amp_status rc = amp_build_write(&t, test_path("progress.amp"), &o, NULL, &err);
    ok(rc == AMP_OK && lg.n > 0, "progress: the hook is called (%zu times)%s%s", lg.n,
       rc == AMP_OK ? "" : ": ", rc == AMP_OK ? "" : amp_error_message(&err));

    /* The phases as they take turns: values, relabel, then order and
     * chunks per mode copy, then commit. */
    const char *want[3 + 2 * AMP_MAX_MODES];
    size_t nwant = 0, nturns = 0;
    want[nwant++] = "values";
    want[nwant++] = "relabel";
    for (unsigned d = 0; d < nm; d++) {
        want[nwant++] = "order";
        want[nwant++] = "chunks";
    }
    want[nwant++] = "commit";
    int order_ok = 1;
    for (size_t i = 0; i < lg.n; i++) {
        if (i > 0 && strcmp(lg.ev[i].phase, lg.ev[i - 1].phase) == 0)
            continue;
        order_ok &= nturns < nwant && strcmp(lg.ev[i].phase, want[nturns]) == 0;
        nturns++;
    }
    ok(order_ok && nturns == nwant, "progress: %zu turns of phases in order (want %zu)", nturns,
       nwant);

    /* Within a phase, over all its turns: a fixed total, done rising to it. */
    int steady = 1;
    for (size_t i = 0; i < lg.n; i++) {
        steady &= lg.ev[i].done <= lg.ev[i].total;
        for (size_t j = i + 1; j < lg.n; j++)
            if (strcmp(lg.ev[i].phase, lg.ev[j].phase) == 0) {
                steady &= lg.ev[j].done >= lg.ev[i].done && lg.ev[j].total == lg.ev[i].total;
                break;
            }
    }
    ok(steady, "progress: within a phase done never decreases and total is fixed");

    const progress_event *last_chunks = NULL, *last_relabel = NULL, *last = NULL;
    for (size_t i = 0; i < lg.n; i++) {
        if (strcmp(lg.ev[i].phase, "chunks") == 0)
            last_chunks = &lg.ev[i];
        if (strcmp(lg.ev[i].phase, "relabel") == 0)
            last_relabel = &lg.ev[i];
        last = &lg.ev[i];
    }
    ok(last_chunks != NULL && last_chunks->done == nnz * nm && last_chunks->total == nnz * nm &&
       lg.chunk_nnz == nnz * nm, "progress: chunks end at done = total = nnz x modes = %llu, "
       "and write.progress still sees every chunk", (unsigned long long)(nnz * nm));
    ok(last_relabel != NULL && last_relabel->done == nm && last_relabel->total == nm &&
       last != NULL && strcmp(last->phase, "commit") == 0 && last->done == 1 && last->total == 1,
       "progress: relabel ends at %u of %u modes, commit at 1 of 1", nm, nm);
    free(lg.ev);
    amp_coo_free(&t);
}

/* Many threads reading one open file at once, each with its own reader,
 * each walking the chunks in a different order, see the same bytes as a
 * sequential pass. */
static void test_concurrent_reads(void)
{
    shape s = {"concurrent", 3, {400, 300, 200}, 20000, 1, 0};
    amp_coo t;
    random_tensor(&s, 11, &t);
    amp_error err = {0};
    const char *p = test_path("concurrent.amp");
    amp_build_opts o;
    amp_build_opts_init(&o);
    o.chunk_nnz = 300;
    amp_file *f = NULL;
    if (amp_build_write(&t, p, &o, NULL, &err) != AMP_OK || amp_file_open(p, &f, &err)) {
        ok(0, "concurrent reads: the file writes and opens (%s)", amp_error_message(&err));
        amp_coo_free(&t);
        return;
    }
    size_t n = amp_file_info_get(f)->nsections;
    uint64_t *sums = calloc(n, sizeof *sums);
    amp_section_reader *r;
    amp_section_reader_new(f, &r, &err);
    unsigned char *buf = malloc(300 * 16);
    for (size_t i = 0; i < n; i++) {
        const amp_section *sec = amp_file_section(f, i);
        if (sec->type != AMP_SECTION_CHUNK)
            continue;
        amp_section_read(r, sec, buf, 300 * 16, &err);
        for (uint64_t k = 0; k < sec->raw_size; k++)
            sums[i] = sums[i] * 1099511628211ULL + buf[k];
    }
    amp_section_reader_free(r);
    free(buf);
    int same = 1;
    set_threads(4);
#pragma omp parallel reduction(&& : same)
    {
        amp_section_reader *tr;
        amp_error e = {0};
        unsigned char *tb = malloc(300 * 16);
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        same = amp_section_reader_new(f, &tr, &e) == AMP_OK;
        for (size_t j = 0; j < n && same; j++) {
            size_t i = (j * (2 * (size_t)tid + 1) + (size_t)tid) % n;  /* per-thread order */
            const amp_section *sec = amp_file_section(f, i);
            if (sec->type != AMP_SECTION_CHUNK)
                continue;
            if (amp_section_read(tr, sec, tb, 300 * 16, &e) != AMP_OK) {
                same = 0;
                break;
            }
            uint64_t h = 0;
            for (uint64_t k = 0; k < sec->raw_size; k++)
                h = h * 1099511628211ULL + tb[k];
            same = same && h == sums[i];
        }
        amp_section_reader_free(tr);
        free(tb);
    }
    ok(same, "4 threads reading every chunk concurrently, in different orders, get the "
       "sequential bytes (%zu sections)", n);
    free(sums);
    amp_file_close(f);
    amp_coo_free(&t);
}

/* amp_chunk_check's fast path folds every test of a block into one flag:
 * a single bad nonzero anywhere, at the edges of its blocks of 2048 too,
 * must still fail the chunk, with the exact message naming it. */
static void test_chunk_check(int f64)
{
    static const shape sh = {"chunk check", 3, {3000, 200, 100}, 12000, 0, 0};
    shape s = sh;
    s.f64 = f64;
    amp_coo t;
    amp_error err = {0};
    random_tensor(&s, 77 + f64, &t);
    uint64_t dup = 0;
    amp_coo_dedup(&t, AMP_DUP_SUM, s.name, 1, &dup, &err);
    amp_build_opts o;
    amp_build_opts_init(&o);
    o.shards = 1;
    o.chunk_nnz = 7000;
    const char *path = test_path("check.amp");
    amp_file *f = NULL;
    amp_section_reader *r = NULL;
    if (!ok(amp_build_write(&t, path, &o, NULL, &err) == AMP_OK &&
                amp_file_open(path, &f, &err) == AMP_OK &&
                amp_section_reader_new(f, &r, &err) == AMP_OK,
            "chunk check (%s): a file to mutate (%s)", f64 ? "f64" : "f32",
            amp_error_message(&err))) {
        skip(2, "no file");
        amp_coo_free(&t);
        return;
    }
    const amp_meta *m = amp_file_meta(f);
    const amp_mode_layout *l = amp_file_mode(f, 0);
    const amp_section *sec = amp_file_chunk(f, 0, 0, 0);
    const uint64_t n = sec->count;
    size_t vsize = amp_value_size(m->value_type);
    unsigned char *raw = malloc(sec->raw_size), *bad = malloc(sec->raw_size);
    int pristine = amp_section_read(r, sec, raw, sec->raw_size, &err) == AMP_OK &&
                   amp_chunk_check(f, sec, raw, &err) == AMP_OK && n > 2100;
    /* The two halves of amp_section_read give the same bytes. */
    const void *stored = NULL;
    int halves = pristine && amp_section_read_stored(r, sec, &stored, &err) == AMP_OK &&
                 amp_section_decode(r, sec, stored, bad, sec->raw_size, &err) == AMP_OK &&
                 memcmp(bad, raw, sec->raw_size) == 0;
    ok(halves, "chunk check (%s): read_stored then decode equals amp_section_read (%s, %s)",
       f64 ? "f64" : "f32", sec->flags & AMP_SECTION_ZSTD ? "compressed" : "stored",
       halves ? "ok" : amp_error_message(&err));
    const uint64_t at[] = {0, 1, 2047, 2048, 2049, n / 2, n - 2, n - 1};
    int tried = 0, caught = 0, named = 0;
    for (size_t i = 0; pristine && i < sizeof at / sizeof at[0]; i++) {
        uint64_t p = at[i];
        for (int kind = 0; kind < 6; kind++) {
            memcpy(bad, raw, sec->raw_size);
            uint64_t *w = (uint64_t *)(void *)bad;
            unsigned char *v = bad + 8 * n + vsize * p;
            unsigned so = l->shift[0], s1 = l->shift[1];
            uint64_t expect = p;   /* the nonzero the message names */
            if (kind == 0) {        /* a bit above every field */
                w[p] |= UINT64_C(1) << 63;
            } else if (kind == 1) { /* mode 2's index one past its end */
                w[p] = (w[p] & ~(((UINT64_C(1) << l->width[1]) - 1) << s1)) |
                       (m->compact_dims[1] << s1);
            } else if (kind == 2) { /* a row above the next one's */
                if (p == n - 1)
                    continue;
                uint64_t next = (w[p + 1] >> so) & ((UINT64_C(1) << l->width[0]) - 1);
                if (next + 1 >= m->compact_dims[0])
                    continue;
                w[p] = (w[p] & ~(((UINT64_C(1) << l->width[0]) - 1) << so)) | ((next + 1) << so);
                expect = p + 1;
                if (p > 0 && ((w[p - 1] >> so) & ((UINT64_C(1) << l->width[0]) - 1)) > next + 1)
                    expect = p;
            } else if (kind == 3) { /* the last row one past the shard's */
                if (p != n - 1)
                    continue;
                w[p] = (w[p] & ~(((UINT64_C(1) << l->width[0]) - 1) << so)) |
                       (l->shards[0].index_end << so);
            } else {                /* NaN, infinity */
                if (f64) {
                    double x = kind == 4 ? NAN : INFINITY;
                    memcpy(v, &x, 8);
                } else {
                    float x = kind == 4 ? NAN : INFINITY;
                    memcpy(v, &x, 4);
                }
            }
            tried++;
            amp_error_clear(&err);
            if (amp_chunk_check(f, sec, bad, &err) != AMP_OK) {
                caught++;
                char want[64];
                snprintf(want, sizeof want, "nonzero %llu ", (unsigned long long)expect);
                if (strstr(amp_error_message(&err), want))
                    named++;
                else
                    diag("kind %d at %llu: %s", kind, (unsigned long long)p,
                         amp_error_message(&err));
            } else {
                diag("kind %d at %llu: not caught", kind, (unsigned long long)p);
            }
        }
    }
    ok(pristine && tried > 30 && caught == tried && named == tried,
       "chunk check (%s): %d of %d single bad nonzeros caught, %d named, in a chunk of %llu",
       f64 ? "f64" : "f32", caught, tried, named, (unsigned long long)n);
    free(raw);
    free(bad);
    amp_section_reader_free(r);
    amp_file_close(f);
    amp_coo_free(&t);
}

int main(void)
{
    static const shape shapes[] = {
        {"3 modes uniform", 3, {50, 60, 70}, 2000, 0, 0},
        {"3 modes skewed f64", 3, {300, 200, 100}, 3000, 1, 1},
        {"4 modes skewed", 4, {40, 1000, 30, 20}, 2500, 1, 0},
        {"5 modes", 5, {10, 20, 30, 40, 50}, 1500, 0, 0},
        {"2 modes", 2, {1000, 3}, 800, 1, 1},
        {"hypersparse mode", 3, {UINT64_C(1) << 40, 50, 60}, 1200, 0, 0},
        /* Enough nonzeros for the hypersparse mode's radix sort to split
         * among threads (one per 65536). */
        {"hypersparse mode, 200k nonzeros", 3, {UINT64_C(1) << 44, 300, 200}, 200000, 1, 1},
        /* Over a million nonempty slices in the first mode: the
         * relabelling's passes over slices go parallel (SLICE_PASS_PARALLEL
         * in prep/build.c), and 1 and 4 threads must agree. */
        {"2 modes, 1.3 M slices", 2, {UINT64_C(1) << 22, 7}, 1500000, 0, 0},
        {"6 modes, 78 index bits", 6, {1000000, 1000000, 1000000, 1000000, 1000000, 1000000},
         5000, 0, 1},
    };
    size_t nshapes = sizeof shapes / sizeof shapes[0];
    int nreal = test_real_tensors(0);
    plan(2 + 3 + 7 + 2 + 15 * (int)nshapes + 15 * nreal + 3 * 7 + 7 + 4 + 1 + 6 + 6 +
         (nreal == 0));
    tap_real_data(nreal, getenv("AMP_TEST_DATA"));
    test_planes();
    test_packed_relabel();
    test_blco_fields();
    test_isp();
    for (size_t i = 0; i < nshapes; i++)
        test_shape(&shapes[i], 100 + i);
    test_real_tensors(1);
    for (size_t i = 0; i < 4; i++)
        test_remap_streams(&shapes[i], 200 + i);
    /* Block keys holding input modes (78 and 120 index bits): copy 1's
     * rows are reordered by key, and the later copies must not need it. */
    static const shape wide = {"8 modes, 120 index bits", 8,
                               {UINT64_C(1) << 30, UINT64_C(1) << 30, UINT64_C(1) << 30,
                                UINT64_C(1) << 30, UINT64_C(1) << 30, UINT64_C(1) << 30,
                                UINT64_C(1) << 30, UINT64_C(1) << 30},
                               20000, 1, 0};
    /* A first mode of one index (field width 0): its key is all other
     * modes, and copy 1 must still be sorted by it. */
    static const shape thin_first = {"8 modes, first of one index", 8,
                                     {1, UINT64_C(1) << 30, UINT64_C(1) << 30,
                                      UINT64_C(1) << 30, UINT64_C(1) << 30, UINT64_C(1) << 30,
                                      UINT64_C(1) << 30, UINT64_C(1) << 30},
                                     20000, 0, 0};
    test_remap_streams(&shapes[nshapes - 1], 210);
    test_remap_streams(&wide, 211);
    test_remap_streams(&thin_first, 212);
    test_writer_misuse();
    test_small_buffer();
    test_concurrent_reads();
    test_progress();
    test_chunk_check(0);
    test_chunk_check(1);
    return done_testing();
}
