/* Duplicate coordinates: found by hashing, without sorting the tensor.
 *
 * Every nonzero gets a 64-bit hash of its coordinates. A stable radix
 * partition on the hash's top bits scatters nonzero numbers into buckets
 * of a few thousand (hash and nonzero number travel together, so a bucket
 * is read sequentially), each small enough that an open-addressing table
 * over it stays in cache; buckets are independent, so threads take them
 * dynamically. Coordinates are compared only when hashes match. Equal
 * coordinates always share a bucket and, inside it, appear in their
 * original order, so the first occurrence is found first and sums are
 * added in file order whatever the thread count.
 * Cost: two streaming passes over the indices, one scatter, one pass over
 * each cache-sized bucket; 8 bytes of scratch per nonzero (16 beyond 2^32
 * nonzeros), plus 16 per duplicate found. */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "tensor_internal.h"

#define TARGET_BUCKET 4096

static inline uint64_t fmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* Where the coordinates are: a tensor's own arrays, or a caller's read in
 * place (amp_coo_arrays_dedup). */
typedef struct dd_src {
    const amp_coo *t;            /* or NULL */
    const amp_coo_arrays *a;     /* when t is NULL */
    unsigned nmodes;
    uint64_t nnz;
} dd_src;

static inline uint64_t dd_ind(const dd_src *t, unsigned m, uint64_t k)
{
    return t->t ? t->t->ind[m][k] : amp_coo_arrays_index(t->a, k, m);
}

static inline int same_coords(const dd_src *t, uint64_t a, uint64_t b)
{
    for (unsigned m = 0; m < t->nmodes; m++)
        if (dd_ind(t, m, a) != dd_ind(t, m, b))
            return 0;
    return 1;
}

static inline uint64_t coord_hash(const dd_src *t, uint64_t k)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (unsigned m = 0; m < t->nmodes; m++)
        h = fmix64(h ^ dd_ind(t, m, k)) + m;
    return h;
}

/* Bucket entries: hash and nonzero number. Below 2^32 nonzeros they pack
 * into 8 bytes (the hash's low 32 bits beside the number), which halves
 * the scratch; a 32-bit hash only means a few more coordinate compares. */
typedef struct wide_entry {
    uint64_t hash, k;
} wide_entry;

typedef struct entries {
    void *p;
    int packed;
} entries;

static inline void entry_set(entries e, uint64_t i, uint64_t h, uint64_t k)
{
    if (e.packed)
        ((uint64_t *)e.p)[i] = (h << 32) | k;
    else
        ((wide_entry *)e.p)[i] = (wide_entry){h, k};
}

static inline uint64_t entry_k(entries e, uint64_t i)
{
    return e.packed ? ((uint64_t *)e.p)[i] & 0xffffffffu : ((wide_entry *)e.p)[i].k;
}

static inline uint64_t entry_hash(entries e, uint64_t i)
{
    return e.packed ? ((uint64_t *)e.p)[i] >> 32 : ((wide_entry *)e.p)[i].hash;
}

/* A duplicate: nonzero k repeats the coordinates of nonzero first. */
typedef struct dup_pair {
    uint64_t k, first;
} dup_pair;

typedef struct dup_list {
    dup_pair *v;
    size_t n, cap;
    int failed;
} dup_list;

static void dup_push(dup_list *l, uint64_t k, uint64_t first)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        dup_pair *v = realloc(l->v, cap * sizeof *v);
        if (v == NULL) {
            l->failed = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (dup_pair){k, first};
}

static int by_k(const void *a, const void *b)
{
    const dup_pair *x = a, *y = b;
    return x->k < y->k ? -1 : x->k > y->k;
}

/* What one detection works in: the bucket entries, the per-thread bucket
 * cursors and the per-thread lists of duplicates found. */
typedef struct dedup_scratch {
    entries pairs;       /* nnz entries, bucket after bucket */
    size_t entry_bytes;
    uint64_t *offs;      /* threads x nbuckets counts, then cursors */
    dup_list *found;     /* one list per thread */
    int threads;
    unsigned bits;       /* buckets by the hash's top bits */
    uint64_t nbuckets;
} dedup_scratch;

static amp_status scratch_init(dedup_scratch *s, uint64_t nnz, amp_error *err)
{
    s->bits = 0;
    while (s->bits < 20 && (nnz >> s->bits) > TARGET_BUCKET)
        s->bits++;
    s->nbuckets = (uint64_t)1 << s->bits;
    s->threads = amp_max_threads();
    s->pairs = (entries){NULL, nnz <= UINT32_MAX};
    s->entry_bytes = s->pairs.packed ? 8 : sizeof(wide_entry);
    s->pairs.p = amp_huge_alloc((size_t)nnz * s->entry_bytes, "duplicate detection", err);
    s->offs = amp_calloc((size_t)(s->nbuckets * (uint64_t)s->threads + 1), 8,
                         "duplicate detection", err);
    s->found = calloc((size_t)s->threads, sizeof *s->found);
    if (!s->pairs.p || !s->offs || !s->found)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory in duplicate detection");
    return AMP_OK;
}

static void scratch_free(dedup_scratch *s, uint64_t nnz)
{
    amp_huge_free(s->pairs.p, (size_t)nnz * s->entry_bytes);
    amp_free(s->offs);
    if (s->found != NULL)
        for (int th = 0; th < s->threads; th++)
            free(s->found[th].v);
    free(s->found);
}

/* The stable radix partition on the hash's top bits, by every thread of a
 * parallel region over its amp_thread_range share. Returns the team's
 * size: afterwards the cursors of its last thread are where the buckets
 * end. The hash is computed twice (count, then scatter) rather than
 * stored: recomputing is cheaper than 8 more bytes per nonzero. */
static int partition_by_hash(const dd_src *t, const dedup_scratch *s)
{
    int tid, nt;
    uint64_t lo, hi;
    amp_thread_range(t->nnz, &tid, &nt, &lo, &hi);
    const unsigned bits = s->bits, shift = 64 - bits;
    uint64_t *mine = s->offs + (uint64_t)tid * s->nbuckets;
    for (uint64_t k = lo; k < hi; k++) {
        uint64_t h = coord_hash(t, k);
        mine[bits ? h >> shift : 0]++;
    }
    #pragma omp barrier
    #pragma omp single
    amp_bucket_offsets(s->offs, nt, s->nbuckets);
    for (uint64_t k = lo; k < hi; k++) {
        uint64_t h = coord_hash(t, k);
        entry_set(s->pairs, mine[bits ? h >> shift : 0]++, s->pairs.packed ? h & 0xffffffffu : h,
                  k);
    }
    #pragma omp barrier
    return nt;
}

/* A thread's open-addressing table, reused from bucket to bucket. */
typedef struct bucket_table {
    uint32_t *slot;   /* entry number + 1; 0: empty */
    size_t cap;
} bucket_table;

/* The duplicates among the n entries of the bucket at base, into list: the
 * entries go into the table in order, so a repeat meets its first
 * occurrence there. 0 when the table cannot grow to the bucket. */
static int scan_bucket(const dd_src *t, entries pairs, uint64_t base, uint64_t n,
                       bucket_table *tab, dup_list *list)
{
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > tab->cap) {
        free(tab->slot);
        tab->slot = malloc(cap * sizeof *tab->slot);
        tab->cap = tab->slot ? cap : 0;
        if (tab->slot == NULL)
            return 0;
    }
    uint32_t *table = tab->slot;
    memset(table, 0, cap * sizeof *table);
    const size_t mask = cap - 1;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t h = entry_hash(pairs, base + i), k = entry_k(pairs, base + i);
        size_t slot = (size_t)h & mask;
        for (;;) {
            uint32_t e = table[slot];
            if (e == 0) {
                table[slot] = (uint32_t)(i + 1);
                break;
            }
            const uint64_t o = base + e - 1;
            if (entry_hash(pairs, o) == h && same_coords(t, entry_k(pairs, o), k)) {
                dup_push(list, k, entry_k(pairs, o));
                break;
            }
            slot = (slot + 1) & mask;
        }
    }
    return 1;
}

/* Every repeat of a coordinate, paired with its first occurrence, into the
 * threads' lists; *dups: how many. Buckets are independent, so threads
 * take them dynamically. */
static amp_status find_duplicates(const dd_src *t, dedup_scratch *s, uint64_t *dups,
                                  amp_error *err)
{
    int table_failed = 0;
    #pragma omp parallel num_threads(s->threads)
    {
        int nt = partition_by_hash(t, s);
        /* After the scatter, the last thread's cursor b is the end of bucket
         * b; bucket b starts where the last thread's bucket b-1 ended. */
        const uint64_t *ends = s->offs + (uint64_t)(nt - 1) * s->nbuckets;
        bucket_table tab = {NULL, 0};
        dup_list *list = &s->found[amp_thread_id()];
        #pragma omp for schedule(dynamic, 16)
        for (uint64_t b = 0; b < s->nbuckets; b++) {
            const uint64_t base = b ? ends[b - 1] : 0;
            if (!scan_bucket(t, s->pairs, base, ends[b] - base, &tab, list)) {
                #pragma omp atomic write
                table_failed = 1;
            }
        }
        free(tab.slot);
    }
    uint64_t n = 0;
    for (int th = 0; th < s->threads; th++) {
        table_failed |= s->found[th].failed;
        n += s->found[th].n;
    }
    if (table_failed)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory in duplicate detection");
    *dups = n;
    return AMP_OK;
}

/* All duplicates in file order: what the sums and the message follow,
 * whatever thread found them. */
static amp_status duplicates_in_order(const dedup_scratch *s, uint64_t dups, dup_pair **allp,
                                      amp_error *err)
{
    dup_pair *all = malloc((size_t)dups * sizeof *all);
    if (all == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for %" PRIu64 " duplicates", dups);
    size_t at = 0;
    for (int th = 0; th < s->threads; th++) {
        if (s->found[th].n == 0)
            continue;   /* v may be NULL, which memcpy must not see */
        memcpy(all + at, s->found[th].v, s->found[th].n * sizeof *all);
        at += s->found[th].n;
    }
    qsort(all, (size_t)dups, sizeof *all, by_k);
    *allp = all;
    return AMP_OK;
}

/* --duplicates error: how many, and the first one, where and at what
 * coordinates (in the file's index base). */
static amp_status duplicate_error(const dd_src *t, const dup_pair *first, uint64_t dups,
                                  const char *name, int display_base, amp_error *err)
{
    uint64_t k = first->k;
    char coords[512];
    size_t used = 0;
    for (unsigned m = 0; m < t->nmodes && used < sizeof coords; m++) {
        int w = snprintf(coords + used, sizeof coords - used, "%s%" PRIu64, m ? ", " : "",
                         dd_ind(t, m, k) + (uint64_t)display_base);
        if (w > 0) used += (size_t)w;
    }
    return AMP_FAIL(err, AMP_ERR_DUPLICATE,
                    "%s: %" PRIu64 " duplicate coordinate%s; the first is (%s) at nonzeros %"
                    PRIu64 " and %" PRIu64 " (use --duplicates sum or keep)",
                    name, dups, dups == 1 ? "" : "s", coords, first->first + 1, k + 1);
}

/* Sum in file order: every duplicate into its first occurrence; *isdupp
 * marks the duplicates, one bit a nonzero. */
static amp_status sum_into_first(amp_coo *t, const dup_pair *all, uint64_t dups,
                                 uint64_t **isdupp, amp_error *err)
{
    uint64_t *isdup = calloc((size_t)(t->nnz / 64 + 1), sizeof *isdup);
    if (isdup == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory in duplicate detection");
    for (uint64_t i = 0; i < dups; i++) {
        t->val[all[i].first] += t->val[all[i].k];
        isdup[all[i].k >> 6] |= UINT64_C(1) << (all[i].k & 63);
    }
    *isdupp = isdup;
    return AMP_OK;
}

/* Drop the marked nonzeros, keeping the others in order. Stable
 * compaction: each thread packs its range to the range's front, then the
 * packed runs move down in order (destinations never pass sources, so
 * memmove in increasing order is safe). */
static amp_status drop_marked(amp_coo *t, const uint64_t *isdup, int threads, amp_error *err)
{
    const uint64_t nnz = t->nnz;
    const unsigned nmodes = t->nmodes;
    /* Where each range's survivors are: start and count. */
    uint64_t *kept = calloc(2 * (size_t)threads, sizeof *kept);
    if (kept == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory in duplicate detection");
    #pragma omp parallel num_threads(threads)
    {
        int tid, nt;
        uint64_t lo, hi;
        amp_thread_range(nnz, &tid, &nt, &lo, &hi);
        uint64_t w = lo;
        for (uint64_t k = lo; k < hi; k++) {
            if (isdup[k >> 6] & (UINT64_C(1) << (k & 63)))
                continue;
            if (w != k) {
                for (unsigned m = 0; m < nmodes; m++)
                    t->ind[m][w] = t->ind[m][k];
                t->val[w] = t->val[k];
            }
            w++;
        }
        kept[2 * tid] = lo;
        kept[2 * tid + 1] = w - lo;
        #pragma omp barrier
        #pragma omp single
        {
            uint64_t dst = 0;
            for (int th = 0; th < nt; th++) {
                uint64_t src = kept[2 * th], n = kept[2 * th + 1];
                if (n && src != dst) {
                    for (unsigned m = 0; m < nmodes; m++)
                        memmove(t->ind[m] + dst, t->ind[m] + src, n * 8);
                    memmove(t->val + dst, t->val + src, n * 8);
                }
                dst += n;
            }
            t->nnz = dst;
        }
    }
    free(kept);
    return AMP_OK;
}

amp_status amp_coo_dedup(amp_coo *t, amp_dup_policy policy, const char *name,
                         int display_base, uint64_t *count, amp_error *err)
{
    const uint64_t nnz = t->nnz;
    *count = 0;
    if (nnz < 2) {
        t->unique = 1;
        return AMP_OK;
    }
    dedup_scratch s;
    dup_pair *all = NULL;
    uint64_t *isdup = NULL;
    amp_status rc;
    const dd_src src = {t, NULL, t->nmodes, t->nnz};
    AMP_CHECK_GOTO(scratch_init(&s, nnz, err), rc, done);
    AMP_CHECK_GOTO(find_duplicates(&src, &s, count, err), rc, done);
    t->unique = *count == 0 || policy != AMP_DUP_KEEP;
    if (*count == 0 || policy == AMP_DUP_KEEP)
        goto done;
    AMP_CHECK_GOTO(duplicates_in_order(&s, *count, &all, err), rc, done);
    if (policy == AMP_DUP_ERROR) {
        rc = duplicate_error(&src, &all[0], *count, name, display_base, err);
        goto done;
    }
    AMP_CHECK_GOTO(sum_into_first(t, all, *count, &isdup, err), rc, done);
    rc = drop_marked(t, isdup, s.threads, err);
done:
    scratch_free(&s, nnz);
    free(all);
    free(isdup);
    return rc;
}

static int by_first(const void *a, const void *b)
{
    const dup_pair *x = a, *y = b;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

amp_status amp_coo_repeat_norm_sq(const amp_coo *t, int f32, double *delta, amp_error *err)
{
    const uint64_t nnz = t->nnz;
    uint64_t count = 0;
    *delta = 0;
    if (nnz < 2)
        return AMP_OK;
    dedup_scratch s;
    dup_pair *all = NULL;
    amp_status rc;
    const dd_src src = {t, NULL, t->nmodes, t->nnz};
    AMP_CHECK_GOTO(scratch_init(&s, nnz, err), rc, done);
    AMP_CHECK_GOTO(find_duplicates(&src, &s, &count, err), rc, done);
    if (count == 0)
        goto done;
    AMP_CHECK_GOTO(duplicates_in_order(&s, count, &all, err), rc, done);
    /* Each coordinate's entries together: its first, then the repeats. */
    qsort(all, (size_t)count, sizeof *all, by_first);
    for (uint64_t i = 0; i < count;) {
        uint64_t first = all[i].first;
        double v = f32 ? (double)(float)t->val[first] : t->val[first];
        double sum = v, sq = v * v;
        for (; i < count && all[i].first == first; i++) {
            v = f32 ? (double)(float)t->val[all[i].k] : t->val[all[i].k];
            sum += v;
            sq += v * v;
        }
        *delta += sum * sum - sq;
    }
done:
    scratch_free(&s, nnz);
    free(all);
    return rc;
}

/* ---- a caller's arrays, read in place ---------------------------------- */

void amp_coo_repeats_free(amp_coo_repeats *r)
{
    free(r->drop);
    free(r->has_sum);
    free(r->kept_before);
    free(r->sums);
    memset(r, 0, sizeof *r);
}

double amp_coo_repeats_value(const amp_coo_repeats *r, uint64_t k)
{
    uint64_t lo = 0, hi = r->nsums;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (r->sums[mid].k <= k)
            lo = mid;
        else
            hi = mid;
    }
    return r->sums[lo].v;
}

amp_status amp_coo_arrays_dedup(const amp_coo_arrays *a, amp_dup_policy policy, const char *name,
                                int display_base, amp_coo_repeats *r, amp_error *err)
{
    const uint64_t nnz = a->nnz;
    memset(r, 0, sizeof *r);
    if (nnz < 2)
        return AMP_OK;
    if (policy == AMP_DUP_KEEP)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: repeats kept: not for arrays read in place",
                        name);
    dedup_scratch s;
    dup_pair *all = NULL;
    uint64_t count = 0;
    amp_status rc;
    const dd_src src = {NULL, a, a->nmodes, nnz};
    AMP_CHECK_GOTO(scratch_init(&s, nnz, err), rc, done);
    AMP_CHECK_GOTO(find_duplicates(&src, &s, &count, err), rc, done);
    if (count == 0)
        goto done;
    AMP_CHECK_GOTO(duplicates_in_order(&s, count, &all, err), rc, done);
    if (policy == AMP_DUP_ERROR) {
        rc = duplicate_error(&src, &all[0], count, name, display_base, err);
        goto done;
    }
    /* What sum_into_first and drop_marked do to a tensor's own arrays:
     * each first occurrence's sum, its repeats added in file order. */
    const uint64_t words = nnz / 64 + 1;
    r->count = count;
    r->drop = calloc((size_t)words, sizeof *r->drop);
    r->has_sum = calloc((size_t)words, sizeof *r->has_sum);
    r->kept_before = malloc((size_t)words * sizeof *r->kept_before);
    r->sums = malloc((size_t)count * sizeof *r->sums);
    if (!r->drop || !r->has_sum || !r->kept_before || !r->sums)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory in duplicate detection");
    for (uint64_t i = 0; i < count; i++)
        r->drop[all[i].k >> 6] |= UINT64_C(1) << (all[i].k & 63);
    qsort(all, (size_t)count, sizeof *all, by_first);
    for (uint64_t i = 0; i < count;) {
        uint64_t first = all[i].first;
        double v = amp_coo_arrays_value(a, first);
        for (; i < count && all[i].first == first; i++)
            v += amp_coo_arrays_value(a, all[i].k);
        r->sums[r->nsums++] = (amp_coo_sum){first, v};
        r->has_sum[first >> 6] |= UINT64_C(1) << (first & 63);
    }
    uint64_t kept = 0;
    for (uint64_t w = 0; w < words; w++) {
        r->kept_before[w] = kept;
        uint64_t in_word = w + 1 < words ? 64 : nnz - 64 * w;
        kept += in_word - (uint64_t)__builtin_popcountll(r->drop[w]);
    }
done:
    if (rc != AMP_OK)
        amp_coo_repeats_free(r);
    scratch_free(&s, nnz);
    free(all);
    return rc;
}
