/* Shards dealt to GPUs and each GPU's part of a tensor (amp_core.h). */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amp_alloc.h"
#include "amp_core.h"
#include "amp_threads.h"

void amp_partition_free(amp_partition *p)
{
    for (unsigned m = 0; m < p->nmodes; m++) {
        free(p->modes[m].owner);
        free(p->modes[m].run_row);
    }
    memset(p, 0, sizeof *p);
}

typedef struct shard_ref {
    uint64_t nnz;
    uint32_t index;
} shard_ref;

static int by_nnz_desc(const void *a, const void *b)
{
    const shard_ref *x = a, *y = b;
    if (x->nnz != y->nnz)
        return x->nnz < y->nnz ? 1 : -1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Largest shard first, each to the GPU with the fewest nonzeros so far
 * (the lowest-numbered on a tie): Graham's rule, within 4/3 of the best
 * dealing, which the FLYCOO and AMPED papers use for the same problem. */
static amp_status deal_owner(const amp_tensor *t, unsigned m, unsigned N, amp_part_mode *pm,
                             amp_error *err)
{
    const amp_mode_layout *l = &t->copies[m].layout;
    const uint32_t S = l->nshards;
    shard_ref *order = malloc((S ? S : 1) * sizeof *order);
    uint64_t *run_begin = malloc((S ? S : 1) * sizeof *run_begin);
    pm->owner = malloc((S ? S : 1) * sizeof *pm->owner);
    pm->run_row = malloc((t->rows[m] ? t->rows[m] : 1) * sizeof *pm->run_row);
    if (order == NULL || run_begin == NULL || pm->owner == NULL || pm->run_row == NULL) {
        free(order);
        free(run_begin);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory dealing mode %u's shards", m + 1);
    }
    pm->nshards = S;
    for (uint32_t s = 0; s < S; s++) {
        order[s] = (shard_ref){l->shards[s].nnz, s};
        pm->largest_shard = l->shards[s].nnz > pm->largest_shard ? l->shards[s].nnz
                                                                  : pm->largest_shard;
    }
    qsort(order, S, sizeof *order, by_nnz_desc);
    for (uint32_t k = 0; k < S; k++) {
        unsigned best = 0;
        for (unsigned g = 1; g < N; g++)
            if (pm->nnz[g] < pm->nnz[best])
                best = g;
        pm->owner[order[k].index] = best;
        pm->nnz[best] += order[k].nnz;
        pm->nshards_of[best]++;
    }
    /* Run order: GPU 0's shards in file order, then GPU 1's, ... */
    uint64_t next = 0;
    int identity = 1;
    for (unsigned g = 0; g < N; g++) {
        pm->row_begin[g] = next;
        for (uint32_t s = 0; s < S; s++)
            if (pm->owner[s] == g) {
                run_begin[s] = next;
                identity &= next == l->shards[s].index_begin;
                next += l->shards[s].index_end - l->shards[s].index_begin;
            }
        pm->row_count[g] = next - pm->row_begin[g];
    }
    free(order);
    if (next != t->rows[m]) {
        free(run_begin);
        return AMP_FAIL(err, AMP_ERR_FORMAT, "mode %u's shards cover %llu rows, not %llu", m + 1,
                        (unsigned long long)next, (unsigned long long)t->rows[m]);
    }
    if (identity) {
        free(pm->run_row);
        pm->run_row = NULL;
    } else {
        for (uint32_t s = 0; s < S; s++)
            for (uint64_t x = l->shards[s].index_begin; x < l->shards[s].index_end; x++)
                pm->run_row[x] = x - l->shards[s].index_begin + run_begin[s];
    }
    free(run_begin);
    return AMP_OK;
}

static void deal_equal(const amp_tensor *t, unsigned m, unsigned N, amp_part_mode *pm)
{
    const uint64_t nnz = t->copies[m].nnz, rows = t->rows[m];
    const uint64_t block = (rows + N - 1) / N;
    for (unsigned g = 0; g < N; g++) {
        pm->nnz[g] = nnz * (g + 1) / N - nnz * g / N;
        uint64_t b = block * g < rows ? block * g : rows;
        uint64_t e = block * (g + 1) < rows ? block * (g + 1) : rows;
        pm->row_begin[g] = b;
        pm->row_count[g] = e - b;
    }
    pm->largest_shard = 0;
}

amp_status amp_partition_new(const amp_tensor *t, unsigned ngpus, amp_partition_kind kind,
                             amp_partition *p, amp_error *err)
{
    memset(p, 0, sizeof *p);
    if (ngpus < 1 || ngpus > AMP_MAX_GPUS)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%u GPUs: a run takes 1 to %d", ngpus, AMP_MAX_GPUS);
    p->kind = kind;
    p->ngpus = ngpus;
    p->nmodes = t->nmodes;
    for (unsigned m = 0; m < t->nmodes; m++) {
        p->rows[m] = t->rows[m];
        if (kind == AMP_PARTITION_EQUAL_NNZ) {
            deal_equal(t, m, ngpus, &p->modes[m]);
            continue;
        }
        amp_status rc = deal_owner(t, m, ngpus, &p->modes[m], err);
        if (rc != AMP_OK) {
            amp_partition_free(p);
            return rc;
        }
    }
    return AMP_OK;
}

double amp_partition_imbalance(const amp_partition *p, unsigned m, double *best)
{
    const amp_part_mode *pm = &p->modes[m];
    uint64_t total = 0, most = 0;
    for (unsigned g = 0; g < p->ngpus; g++) {
        total += pm->nnz[g];
        most = pm->nnz[g] > most ? pm->nnz[g] : most;
    }
    double mean = (double)total / p->ngpus;
    if (best)
        *best = mean > 0 && (double)pm->largest_shard > mean ? (double)pm->largest_shard / mean
                                                              : 1.0;
    return mean > 0 ? (double)most / mean : 1.0;
}

/* A stretch of the source copy and where it lands in the part. */
typedef struct range {
    uint64_t src, nnz, dst;
} range;

static size_t find_block(const amp_copy *c, uint64_t k)
{
    size_t lo = 0, hi = c->nblocks;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->block_start[mid] <= k)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static inline void put_field(uint64_t v, unsigned shift, unsigned width, uint64_t *key,
                             uint64_t *word)
{
    if (width == 0)
        return;
    if (shift >= 64) {
        *key |= v << (shift - 64);
        return;
    }
    *word |= v << shift;
    if (shift + width > 64)
        *key |= v >> (64 - shift);
}

/* How a part's copy is ordered: its nonzeros whose row of mode `prev`
 * (the mode updated just before this copy's) this GPU owns come first,
 * the rest after, each group in the copy's order. The first group can be
 * computed while the other GPUs' rows of mode prev are still arriving. */
typedef struct split_rule {
    int on;
    unsigned prev;
    uint64_t begin, end;   /* owned run rows of mode prev */
} split_rule;

/* A mode's run numbering as the dealing makes it: each shard's rows are
 * one range of file rows moved as a block, so a row's run row is its own
 * plus its shard's shift. A coarse table (row >> shift: the shards that
 * can hold it) and a binary search among those find the shard from
 * arrays that stay in a core's L2. The run_row table (8 bytes a row) read
 * at random for every nonzero was most of the part builder's time on an
 * Amazon-shaped tensor (bench/RESULTS.md, part-bench). */
#define SHARD_MAP_BUCKETS 65536

typedef struct shard_map {
    uint32_t nshards;    /* 0: no map (rows keep their numbering, or run_row) */
    unsigned shift;
    uint64_t *end;       /* each shard's last file row + 1 */
    uint64_t *delta;     /* run row - file row, per shard, modulo 2^64 */
    uint32_t *bucket;    /* row >> shift -> the first shard ending past it */
} shard_map;

static void shard_map_free(shard_map *sm)
{
    free(sm->end);
    free(sm->delta);
    free(sm->bucket);
    memset(sm, 0, sizeof *sm);
}

/* The map of mode m, or none (nshards 0) where m keeps its numbering,
 * where its shards are not one run of ranges in row order, or where its
 * run_row table fits twice a core's L2 (sysconf; 1 MiB if unknown): there
 * the table is faster, the binary search in the few buckets that hold the
 * heavy rows of many shards costing more than an L2 hit (bench/RESULTS.md,
 * part-bench). */
static amp_status shard_map_new(const amp_tensor *t, const amp_partition *p, unsigned m,
                                uint64_t l2, shard_map *sm, amp_error *err)
{
    memset(sm, 0, sizeof *sm);
    const amp_part_mode *pm = &p->modes[m];
    const amp_mode_layout *l = &t->copies[m].layout;
    const uint32_t S = l->nshards;
    const uint64_t rows = t->rows[m];
    if (p->row_lookup < 0 || (p->row_lookup == 0 && rows * sizeof(uint64_t) <= 2 * l2))
        return AMP_OK;
    if (pm->run_row == NULL || S == 0 || rows == 0)
        return AMP_OK;
    for (uint32_t s = 0; s < S; s++)
        if (l->shards[s].index_begin != (s ? l->shards[s - 1].index_end : 0) ||
            l->shards[s].index_end < l->shards[s].index_begin)
            return AMP_OK;
    if (l->shards[S - 1].index_end != rows)
        return AMP_OK;
    const uint64_t buckets = p->map_buckets ? p->map_buckets : SHARD_MAP_BUCKETS;
    unsigned shift = 0;
    while ((rows >> shift) >= buckets)
        shift++;
    const uint64_t nb = (rows >> shift) + 2;   /* one past the last row's bucket */
    sm->end = malloc(S * sizeof *sm->end);
    sm->delta = malloc(S * sizeof *sm->delta);
    sm->bucket = malloc(nb * sizeof *sm->bucket);
    if (sm->end == NULL || sm->delta == NULL || sm->bucket == NULL) {
        shard_map_free(sm);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    for (uint32_t s = 0; s < S; s++) {
        const uint64_t b = l->shards[s].index_begin;
        sm->end[s] = l->shards[s].index_end;
        sm->delta[s] = sm->end[s] > b ? pm->run_row[b] - b : 0;   /* modulo 2^64 */
    }
    uint32_t s = 0;
    for (uint64_t k = 0; k < nb; k++) {
        while (s + 1 < S && sm->end[s] <= k << shift)
            s++;
        sm->bucket[k] = s;
    }
    sm->shift = shift;
    sm->nshards = S;
    return AMP_OK;
}

/* Every mode's map (maps[0 .. t->nmodes)), built once for all the parts
 * made from t and p. */
static amp_status shard_maps_new(const amp_tensor *t, const amp_partition *p, shard_map *maps,
                                 amp_error *err)
{
    long l2 = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    memset(maps, 0, t->nmodes * sizeof *maps);
    for (unsigned m = 0; m < t->nmodes; m++) {
        amp_status rc = shard_map_new(t, p, m, l2 > 0 ? (uint64_t)l2 : (uint64_t)1 << 20,
                                      &maps[m], err);
        if (rc != AMP_OK) {
            for (unsigned q = 0; q < m; q++)
                shard_map_free(&maps[q]);
            return rc;
        }
    }
    return AMP_OK;
}

static void shard_maps_free(shard_map *maps, unsigned n)
{
    for (unsigned m = 0; m < n; m++)
        shard_map_free(&maps[m]);
}

static inline uint64_t shard_map_row(const shard_map *sm, uint64_t x)
{
    const uint64_t k = x >> sm->shift;
    /* the shard is in [bucket[k], bucket[k + 1]]: many where a bucket
     * holds the few heavy rows of many shards, which most nonzeros have */
    uint32_t lo = sm->bucket[k], hi = sm->bucket[k + 1];
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (x >= sm->end[mid])
            lo = mid + 1;
        else
            hi = mid;
    }
    return x + sm->delta[lo];
}

/* Part positions [lo, hi) of the ranges' concatenation: each word
 * re-encoded with every mode's run rows (or copied), its value and key
 * kept. count_only: *early gets how many are in the first group. Else
 * they land at early_at, early_at + 1, ... and late_at, ... */
static void walk(const amp_tensor *t, const amp_partition *p, unsigned d, const range *rg,
                 size_t nranges, uint64_t lo, uint64_t hi, const split_rule *sr, int count_only,
                 const shard_map *maps, uint64_t *early, uint64_t early_at, uint64_t late_at,
                 amp_copy *out, uint64_t *keys)
{
    const amp_copy *c = &t->copies[d];
    const amp_mode_layout *l = &c->layout;
    const size_t vsize = amp_value_size(t->value_type);
    const unsigned N = t->nmodes;
    int remap = 0;
    /* per mode: the run_row table to read, or else the map, or neither */
    const uint64_t *table[AMP_MAX_MODES];
    const shard_map *map[AMP_MAX_MODES];
    for (unsigned m = 0; m < N; m++) {
        remap |= p->modes[m].run_row != NULL;
        map[m] = maps[m].nshards ? &maps[m] : NULL;
        table[m] = map[m] ? NULL : p->modes[m].run_row;
    }
    size_t r = 0, a = 0, b = nranges;
    while (b - a > 1) {   /* the last range starting at or before lo */
        size_t mid = a + (b - a) / 2;
        if (rg[mid].dst <= lo)
            a = mid;
        else
            b = mid;
    }
    r = a;
    uint64_t k = lo, n_early = 0;
    while (k < hi) {
        while (k >= rg[r].dst + rg[r].nnz)
            r++;
        uint64_t src = rg[r].src + (k - rg[r].dst);
        uint64_t end = rg[r].dst + rg[r].nnz < hi ? rg[r].dst + rg[r].nnz : hi;
        size_t blk = c->nblocks > 1 ? find_block(c, src) : 0;
        for (; k < end; k++, src++) {
            while (c->nblocks > 1 && c->block_start[blk + 1] <= src)
                blk++;
            uint64_t key = c->block_key[blk], word = c->words[src], nk = 0, nw = 0;
            int first_group = 1;
            for (unsigned m = 0; m < N && (remap || sr->on); m++) {
                uint64_t x = amp_blco_field(key, word, l->shift[m], l->width[m]);
                if (table[m])
                    x = table[m][x];
                else if (map[m])
                    x = shard_map_row(map[m], x);
                if (sr->on && m == sr->prev)
                    first_group = x >= sr->begin && x < sr->end;
                put_field(x, l->shift[m], l->width[m], &nk, &nw);
            }
            if (count_only) {
                n_early += first_group;
                continue;
            }
            if (remap) {
                key = nk;
                word = nw;
            }
            uint64_t at = first_group ? early_at++ : late_at++;
            out->words[at] = word;
            memcpy((char *)out->vals + at * vsize, (const char *)c->vals + src * vsize, vsize);
            if (keys)
                keys[at] = key;
        }
    }
    if (count_only)
        *early = n_early;
}

static amp_status part_copy(const amp_tensor *t, const amp_partition *p, const shard_map *maps,
                            unsigned gpu, unsigned d, int threads, amp_copy *out,
                            amp_error *err)
{
    const amp_copy *c = &t->copies[d];
    const amp_part_mode *pm = &p->modes[d];
    const size_t vsize = amp_value_size(t->value_type);
    amp_status rc = AMP_OK;
    range *rg = NULL;
    size_t nranges = 0;
    uint64_t n = 0, *keys = NULL;
    memset(out, 0, sizeof *out);
    out->layout = c->layout;
    out->layout.shards = NULL;
    out->layout.nshards = 0;
    if (p->kind == AMP_PARTITION_EQUAL_NNZ) {
        rg = malloc(sizeof *rg);
        if (rg == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        rg[0] = (range){c->nnz * gpu / p->ngpus, pm->nnz[gpu], 0};
        nranges = 1;
        n = pm->nnz[gpu];
        out->row_begin = 0;
        out->row_count = t->rows[d];
    } else {
        rg = malloc((pm->nshards ? pm->nshards : 1) * sizeof *rg);
        if (rg == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        for (uint32_t s = 0; s < pm->nshards; s++)
            if (pm->owner[s] == gpu && c->layout.shards[s].nnz > 0) {
                rg[nranges++] = (range){c->layout.shards[s].first_nnz, c->layout.shards[s].nnz, n};
                n += c->layout.shards[s].nnz;
            }
        out->row_begin = pm->row_begin[gpu];
        out->row_count = pm->row_count[gpu];
    }
    out->nnz = n;
    out->words = amp_huge_alloc((size_t)n * 8, "a GPU's part of a mode copy", err);
    out->vals = amp_huge_alloc((size_t)n * vsize, "a GPU's part of a mode copy", err);
    if ((n > 0 && (out->words == NULL || out->vals == NULL)))
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for GPU %u's part of mode %u",
                       gpu, d + 1);
    const int keyed = c->nblocks > 1 || c->layout.key_bits > 0;
    if (keyed && n > 0) {
        keys = malloc((size_t)n * sizeof *keys);
        if (keys == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
    }
    split_rule sr = {0, 0, 0, 0};
    if (p->overlap && p->ngpus > 1 && t->nmodes > 1) {
        sr.on = 1;
        sr.prev = (d + t->nmodes - 1) % t->nmodes;
        sr.begin = p->modes[sr.prev].row_begin[gpu];
        sr.end = sr.begin + p->modes[sr.prev].row_count[gpu];
    }
    out->early_nnz = n;
    if (n > 0) {
        int T = amp_thread_count(threads);
        uint64_t *early = calloc(3 * ((size_t)T + 1), sizeof *early);
        if (early == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
        uint64_t *e_at = early + T + 1, *l_at = e_at + T + 1;
        /* Two passes over fixed slices: count each slice's first group,
         * then place both groups, so the result is the same for any T. */
        /* Without two groups every nonzero is in the first: no counting. */
        for (int i = 0; !sr.on && i < T; i++)
            early[i] = n * (uint64_t)(i + 1) / T - n * (uint64_t)i / T;
        for (int pass = sr.on ? 0 : 1; pass < 2; pass++) {
            uint64_t total_early = 0;
            if (pass == 1)
                for (int i = 0; i < T; i++)
                    total_early += early[i];
            if (pass == 1) {
                e_at[0] = 0;
                l_at[0] = total_early;
                for (int i = 0; i < T; i++) {
                    uint64_t slice = n * (uint64_t)(i + 1) / T - n * (uint64_t)i / T;
                    e_at[i + 1] = e_at[i] + early[i];
                    l_at[i + 1] = l_at[i] + (slice - early[i]);
                }
                out->early_nnz = total_early;
            }
#pragma omp parallel for num_threads(T) schedule(static, 1)
            for (int i = 0; i < T; i++)
                walk(t, p, d, rg, nranges, n * (uint64_t)i / T, n * (uint64_t)(i + 1) / T, &sr,
                     pass == 0, maps, &early[i], pass ? e_at[i] : 0, pass ? l_at[i] : 0, out,
                     keys);
        }
        free(early);
    }
    /* Blocks: runs of one key, recounted, since a renumbered row may move
     * a nonzero's high bits into another key: counted per slice, then
     * placed, on the same fixed slices. */
    size_t nb = 1;
    int T = amp_thread_count(threads);
    uint64_t *starts = keys ? calloc((size_t)T + 1, sizeof *starts) : NULL;
    if (keys && starts == NULL)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
    if (keys) {
#pragma omp parallel for num_threads(T) schedule(static, 1)
        for (int i = 0; i < T; i++) {
            uint64_t lo = n * (uint64_t)i / T, hi = n * (uint64_t)(i + 1) / T, changes = 0;
            for (uint64_t k = lo > 0 ? lo : 1; k < hi; k++)
                changes += keys[k] != keys[k - 1];
            starts[i + 1] = changes;
        }
        for (int i = 0; i < T; i++)
            starts[i + 1] += starts[i];
        nb += starts[T];
    }
    out->nblocks = nb;
    out->block_start = malloc((nb + 1) * sizeof *out->block_start);
    out->block_key = malloc(nb * sizeof *out->block_key);
    if (out->block_start == NULL || out->block_key == NULL) {
        free(starts);
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
    }
    out->block_start[0] = 0;
    out->block_key[0] = keys ? keys[0] : 0;
    if (keys) {
#pragma omp parallel for num_threads(T) schedule(static, 1)
        for (int i = 0; i < T; i++) {
            uint64_t lo = n * (uint64_t)i / T, hi = n * (uint64_t)(i + 1) / T, b = starts[i];
            for (uint64_t k = lo > 0 ? lo : 1; k < hi; k++)
                if (keys[k] != keys[k - 1]) {
                    out->block_start[++b] = k;
                    out->block_key[b] = keys[k];
                }
        }
    }
    free(starts);
    out->block_start[nb] = n;
    free(keys);
    free(rg);
    return AMP_OK;
fail:
    free(keys);
    free(rg);
    return rc;
}

/* An empty part with t's shape; part_add fills it mode by mode. */
static void part_begin(const amp_tensor *t, amp_tensor *part)
{
    memset(part, 0, sizeof *part);
    part->nmodes = t->nmodes;
    part->value_type = t->value_type;
    part->norm_sq = t->norm_sq;
    for (unsigned m = 0; m < t->nmodes; m++) {
        part->dims[m] = t->dims[m];
        part->rows[m] = t->rows[m];
    }
}

static amp_status part_add(const amp_tensor *t, const amp_partition *p, const shard_map *maps,
                           unsigned gpu, unsigned d, int threads, amp_tensor *part,
                           amp_error *err)
{
    AMP_CHECK(part_copy(t, p, maps, gpu, d, threads, &part->copies[d], err));
    part->nnz = part->copies[d].nnz > part->nnz ? part->copies[d].nnz : part->nnz;
    part->bytes += part->copies[d].nnz * (8 + amp_value_size(t->value_type));
    return AMP_OK;
}

amp_status amp_partition_tensor(const amp_tensor *t, const amp_partition *p, unsigned gpu,
                                int threads, amp_tensor *part, amp_error *err)
{
    memset(part, 0, sizeof *part);
    if (gpu >= p->ngpus || p->nmodes != t->nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "GPU %u of a partition for %u", gpu, p->ngpus);
    part_begin(t, part);
    shard_map maps[AMP_MAX_MODES];
    amp_status rc = shard_maps_new(t, p, maps, err);   /* frees its own on failure */
    if (rc != AMP_OK)
        return rc;
    for (unsigned d = 0; d < t->nmodes && rc == AMP_OK; d++)
        rc = part_add(t, p, maps, gpu, d, threads, part, err);
    shard_maps_free(maps, t->nmodes);
    if (rc != AMP_OK)
        amp_tensor_free(part);
    return rc;
}

amp_status amp_partition_tensors(const amp_tensor *t, const amp_partition *p, int threads,
                                 amp_tensor *release, amp_load_progress_fn progress,
                                 void *progress_ctx, amp_tensor *parts, amp_error *err)
{
    if (p->nmodes != t->nmodes || p->ngpus < 1 || p->ngpus > AMP_MAX_GPUS)
        return AMP_FAIL(err, AMP_ERR_USAGE, "a partition for %u GPUs and %u modes", p->ngpus,
                        p->nmodes);
    if (release != NULL && release != t)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the tensor to release is not the one split");
    for (unsigned g = 0; g < p->ngpus; g++)
        part_begin(t, &parts[g]);
    shard_map maps[AMP_MAX_MODES];
    AMP_CHECK(shard_maps_new(t, p, maps, err));
    /* Mode by mode, every GPU's part, then (release) the mode's words and
     * values: the peak is t plus one mode's parts, not t plus all, and
     * the pages freed are the next mode's to fill. */
    const size_t vsize = amp_value_size(t->value_type);
    uint64_t done = 0, total = 0;
    for (unsigned d = 0; d < t->nmodes; d++)
        total += t->copies[d].nnz;
    for (unsigned d = 0; d < t->nmodes; d++) {
        const amp_copy *c = &t->copies[d];
        amp_status rc = AMP_OK;
        if (c->nnz > 0 && (c->words == NULL || c->vals == NULL))
            rc = AMP_FAIL(err, AMP_ERR_USAGE, "mode %u's copy was released already", d + 1);
        for (unsigned g = 0; g < p->ngpus && rc == AMP_OK; g++) {
            rc = part_add(t, p, maps, g, d, threads, &parts[g], err);
            done += rc == AMP_OK ? parts[g].copies[d].nnz : 0;
            if (rc == AMP_OK && progress != NULL)
                progress(progress_ctx, done, total);
        }
        if (rc != AMP_OK) {
            for (unsigned g = 0; g < p->ngpus; g++)
                amp_tensor_free(&parts[g]);
            shard_maps_free(maps, t->nmodes);
            return rc;
        }
        if (release != NULL) {
            amp_copy *r = &release->copies[d];
            amp_huge_free(r->words, (size_t)r->nnz * 8);
            amp_huge_free(r->vals, (size_t)r->nnz * vsize);
            r->words = NULL;
            r->vals = NULL;
            uint64_t freed = r->nnz * (8 + vsize);
            release->bytes = release->bytes > freed ? release->bytes - freed : 0;
        }
    }
    shard_maps_free(maps, t->nmodes);
    return AMP_OK;
}

/* Row i of the file's order is row run[i] of the run's. */
static void move_rows(const amp_partition *p, unsigned m, unsigned rank, const double *src,
                      double *dst, int to_run)
{
    const uint64_t *run = p->modes[m].run_row;
    const int64_t rows = (int64_t)p->rows[m];
    if (run == NULL) {
        memcpy(dst, src, (size_t)rows * rank * sizeof *dst);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; i++) {
        const uint64_t file = (uint64_t)i * rank, there = run[i] * rank;
        memcpy(dst + (to_run ? there : file), src + (to_run ? file : there), rank * sizeof *dst);
    }
}

void amp_partition_rows_to_run(const amp_partition *p, unsigned m, unsigned rank,
                               const double *src, double *dst)
{
    move_rows(p, m, rank, src, dst, 1);
}

void amp_partition_rows_to_file(const amp_partition *p, unsigned m, unsigned rank,
                                const double *src, double *dst)
{
    move_rows(p, m, rank, src, dst, 0);
}
