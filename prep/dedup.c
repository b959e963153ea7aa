/* Duplicate coordinates: found by hashing, without sorting the tensor.
 *
 * Every nonzero gets a 64-bit hash of its coordinates. A stable radix
 * partition on the hash's top bits scatters nonzero numbers into buckets
 * of a few thousand (hash and nonzero number travel together, so a bucket
 * is read sequentially), each small enough that an open-addressing table
 * over it stays in cache; buckets are independent, so threads take them
 * dynamically. Coordinates are compared only when hashes match. Equal coordinates always share a bucket and, inside it,
 * appear in their original order, so the first occurrence is found first
 * and sums are added in file order whatever the thread count.
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

static inline int same_coords(const amp_coo *t, uint64_t a, uint64_t b)
{
    for (unsigned m = 0; m < t->nmodes; m++)
        if (t->ind[m][a] != t->ind[m][b])
            return 0;
    return 1;
}

static inline uint64_t coord_hash(const amp_coo *t, uint64_t k)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (unsigned m = 0; m < t->nmodes; m++)
        h = fmix64(h ^ t->ind[m][k]) + m;
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

amp_status amp_coo_dedup(amp_coo *t, amp_dup_policy policy, const char *name,
                         int display_base, uint64_t *count, amp_error *err)
{
    const uint64_t nnz = t->nnz;
    const unsigned nmodes = t->nmodes;
    *count = 0;
    if (nnz < 2)
        return AMP_OK;
    amp_status rc = AMP_OK;
    unsigned bits = 0;
    while (bits < 20 && (nnz >> bits) > TARGET_BUCKET)
        bits++;
    const uint64_t nbuckets = (uint64_t)1 << bits;
    const int threads = amp_max_threads();
    entries pairs = {NULL, nnz <= UINT32_MAX};
    size_t entry_bytes = pairs.packed ? 8 : sizeof(wide_entry);
    pairs.p = amp_huge_alloc((size_t)nnz * entry_bytes, "duplicate detection", err);
    uint64_t *offs = amp_calloc((size_t)(nbuckets * (uint64_t)threads + 1), 8,
                                "duplicate detection", err);
    dup_list *found = calloc((size_t)threads, sizeof *found);
    uint64_t *isdup = NULL, *kept = NULL;
    dup_pair *all = NULL;
    int table_failed = 0;
    if (!pairs.p || !offs || !found) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory in duplicate detection");
        goto done;
    }
    const unsigned shift = 64 - bits;

    #pragma omp parallel num_threads(threads)
    {
        int tid, nt;
        uint64_t lo, hi;
        amp_thread_range(nnz, &tid, &nt, &lo, &hi);
        uint64_t *mine = offs + (uint64_t)tid * nbuckets;
        /* The hash is computed twice (count, then scatter) rather than
         * stored: recomputing is cheaper than 8 more bytes per nonzero. */
        for (uint64_t k = lo; k < hi; k++) {
            uint64_t h = coord_hash(t, k);
            mine[bits ? h >> shift : 0]++;
        }
        #pragma omp barrier
        #pragma omp single
        amp_bucket_offsets(offs, nt, nbuckets);
        for (uint64_t k = lo; k < hi; k++) {
            uint64_t h = coord_hash(t, k);
            entry_set(pairs, mine[bits ? h >> shift : 0]++, pairs.packed ? h & 0xffffffffu : h,
                      k);
        }
        #pragma omp barrier
        /* After the scatter, mine[b] of the last thread is the end of bucket
         * b; bucket b starts where the last thread's bucket b-1 ended. */
        const uint64_t *ends = offs + (uint64_t)(nt - 1) * nbuckets;
        uint32_t *table = NULL;
        size_t table_cap = 0;
        dup_list *list = &found[tid];
        #pragma omp for schedule(dynamic, 16)
        for (uint64_t b = 0; b < nbuckets; b++) {
            const uint64_t base = b ? ends[b - 1] : 0;
            const uint64_t n = ends[b] - base;
            size_t cap = 16;
            while (cap < 2 * n) cap *= 2;
            if (cap > table_cap) {
                free(table);
                table = malloc(cap * sizeof *table);
                table_cap = table ? cap : 0;
                if (table == NULL) {
                    #pragma omp atomic write
                    table_failed = 1;
                    continue;
                }
            }
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
        }
        free(table);
    }
    uint64_t dups = 0;
    for (int th = 0; th < threads; th++) {
        table_failed |= found[th].failed;
        dups += found[th].n;
    }
    if (table_failed) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory in duplicate detection");
        goto done;
    }
    *count = dups;
    if (dups == 0 || policy == AMP_DUP_KEEP)
        goto done;
    /* All duplicates in file order: what the sums and the message follow,
     * whatever thread found them. */
    all = malloc((size_t)dups * sizeof *all);
    if (all == NULL) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for %" PRIu64 " duplicates", dups);
        goto done;
    }
    size_t at = 0;
    for (int th = 0; th < threads; th++) {
        if (found[th].n == 0)
            continue;   /* v may be NULL, which memcpy must not see */
        memcpy(all + at, found[th].v, found[th].n * sizeof *all);
        at += found[th].n;
    }
    qsort(all, (size_t)dups, sizeof *all, by_k);

    if (policy == AMP_DUP_ERROR) {
        uint64_t k = all[0].k;
        char coords[512];
        size_t used = 0;
        for (unsigned m = 0; m < nmodes && used < sizeof coords; m++) {
            int w = snprintf(coords + used, sizeof coords - used, "%s%" PRIu64, m ? ", " : "",
                             t->ind[m][k] + (uint64_t)display_base);
            if (w > 0) used += (size_t)w;
        }
        rc = AMP_FAIL(err, AMP_ERR_DUPLICATE,
                      "%s: %" PRIu64 " duplicate coordinate%s; the first is (%s) at nonzeros %"
                      PRIu64 " and %" PRIu64 " (use --duplicates sum or keep)",
                      name, dups, dups == 1 ? "" : "s", coords, all[0].first + 1, k + 1);
        goto done;
    }

    /* Sum in file order: every duplicate into its first occurrence. */
    isdup = calloc((size_t)(nnz / 64 + 1), sizeof *isdup);
    if (isdup == NULL) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory in duplicate detection");
        goto done;
    }
    for (uint64_t i = 0; i < dups; i++) {
        t->val[all[i].first] += t->val[all[i].k];
        isdup[all[i].k >> 6] |= UINT64_C(1) << (all[i].k & 63);
    }

    /* Stable compaction: each thread packs its range to the range's front,
     * then the packed runs move down in order (destinations never pass
     * sources, so memmove in increasing order is safe). */
    kept = calloc(2 * (size_t)threads, sizeof *kept);   /* where each range's survivors are */
    if (kept == NULL) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory in duplicate detection");
        goto done;
    }
    {
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
    }
done:
    amp_huge_free(pairs.p, (size_t)nnz * entry_bytes);
    amp_free(offs);
    if (found != NULL)
        for (int th = 0; th < threads; th++)
            free(found[th].v);
    free(found);
    free(all);
    free(isdup);
    free(kept);
    return rc;
}
