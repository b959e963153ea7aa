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
 * each cache-sized bucket; 24 bytes of scratch per nonzero. */
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

typedef struct entry {
    uint64_t hash, k;
} entry;

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
    entry *pairs = amp_huge_alloc((size_t)nnz * sizeof(entry), "duplicate detection", err);
    uint64_t *first = amp_huge_alloc((size_t)nnz * 8, "duplicate detection", err);
    uint64_t *offs = amp_calloc((size_t)(nbuckets * (uint64_t)threads + 1), 8,
                                "duplicate detection", err);
    int table_failed = 0;
    if (!pairs || !first || !offs) {
        rc = AMP_ERR_NOMEM;
        goto done;
    }
    const unsigned shift = 64 - bits;

    uint64_t dups = 0;
    #pragma omp parallel num_threads(threads) reduction(+ : dups)
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
            first[k] = k;
        }
        #pragma omp barrier
        #pragma omp single
        {
            /* Bucket-major, thread-minor: the scatter stays stable. */
            uint64_t sum = 0;
            for (uint64_t b = 0; b < nbuckets; b++)
                for (int th = 0; th < nt; th++) {
                    uint64_t c = offs[(uint64_t)th * nbuckets + b];
                    offs[(uint64_t)th * nbuckets + b] = sum;
                    sum += c;
                }
        }
        for (uint64_t k = lo; k < hi; k++) {
            uint64_t h = coord_hash(t, k);
            entry *e = &pairs[mine[bits ? h >> shift : 0]++];
            e->hash = h;
            e->k = k;
        }
        #pragma omp barrier
        /* After the scatter, mine[b] of the last thread is the end of bucket
         * b; bucket b starts where the last thread's bucket b-1 ended. */
        const uint64_t *ends = offs + (uint64_t)(nt - 1) * nbuckets;
        uint32_t *table = NULL;
        size_t table_cap = 0;
        #pragma omp for schedule(dynamic, 16)
        for (uint64_t b = 0; b < nbuckets; b++) {
            const entry *bucket = pairs + (b ? ends[b - 1] : 0);
            const uint64_t n = ends[b] - (b ? ends[b - 1] : 0);
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
                const uint64_t h = bucket[i].hash;
                size_t slot = (size_t)h & mask;
                for (;;) {
                    uint32_t e = table[slot];
                    if (e == 0) {
                        table[slot] = (uint32_t)(i + 1);
                        break;
                    }
                    const entry *o = &bucket[e - 1];
                    if (o->hash == h && same_coords(t, o->k, bucket[i].k)) {
                        first[bucket[i].k] = o->k;
                        dups++;
                        break;
                    }
                    slot = (slot + 1) & mask;
                }
            }
        }
        free(table);
    }
    if (table_failed) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory in duplicate detection");
        goto done;
    }
    *count = dups;
    if (dups == 0 || policy == AMP_DUP_KEEP)
        goto done;

    if (policy == AMP_DUP_ERROR) {
        uint64_t k = 0;
        while (first[k] == k) k++;
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
                      name, dups, dups == 1 ? "" : "s", coords, first[k] + 1, k + 1);
        goto done;
    }

    /* Sum in file order: serial over each group, but groups are disjoint
     * and a group's members are visited in increasing k. */
    for (uint64_t k = 0; k < nnz; k++)
        if (first[k] != k)
            t->val[first[k]] += t->val[k];

    /* Stable compaction: each thread packs its range to the range's front,
     * then the packed runs move down in order (destinations never pass
     * sources, so memmove in increasing order is safe). */
    {
        uint64_t *kept = (uint64_t *)pairs;   /* reuse: where each range's survivors are */
        #pragma omp parallel num_threads(threads)
        {
            int tid, nt;
            uint64_t lo, hi;
            amp_thread_range(nnz, &tid, &nt, &lo, &hi);
            uint64_t w = lo;
            for (uint64_t k = lo; k < hi; k++) {
                if (first[k] != k)
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
    amp_huge_free(pairs, (size_t)nnz * sizeof(entry));
    amp_huge_free(first, (size_t)nnz * 8);
    amp_free(offs);
    return rc;
}
