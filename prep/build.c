/* amp_build_write: tensor in memory -> .amp file. See amp_build.h.
 *
 * Memory beyond the tensor itself: at most two mode copies at a time (copy
 * 1, kept as the source of the others, and the one being written),
 * per-mode slice tables, and the writer's per-thread buffers; amped-prep(1)
 * has the formula. From a caller's arrays (amp_build_write_arrays, read in
 * place) one copy and 4 bytes a nonzero: the later copies are gathered
 * from copy 1 chunk by chunk (see gathered). Every result is independent of the thread count: the
 * shard dealing is sequential over slices, the other passes over slices
 * and the copy order are stable counting sorts, sums are taken in fixed
 * blocks. */
#include <config.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_build.h"
#include "amp_timer.h"
#include "tensor_internal.h"

void amp_build_opts_init(amp_build_opts *o)
{
    memset(o, 0, sizeof *o);
    o->shards = AMP_DEFAULT_SHARDS;
    o->chunk_nnz = AMP_DEFAULT_CHUNK_NNZ;
    o->values = AMP_VALUE_AUTO;
    amp_write_opts_init(&o->write);
}

void amp_build_params(char *buf, size_t size, const amp_build_opts *opts, int duplicates)
{
    static const char *const value_names[] = {"auto", "f32", "f64"};
    static const char *const dup_names[] = {"sum", "keep", "error"};
    snprintf(buf, size, "shards=%lu\nchunk-nnz=%llu\nvalues=%s\nlevel=%d\n"
             "duplicates=%s\nremap-streams=%s\n", (unsigned long)opts->shards,
             (unsigned long long)opts->chunk_nnz, value_names[opts->values], opts->write.level,
             dup_names[duplicates], opts->remap_streams ? "yes" : "no");
}

/* Positions of nonzeros (in a mode copy, by their position in copy 0; in
 * a caller's arrays): 4 or 8 bytes each (the remap streams' width). */
typedef struct positions {
    void *p;
    unsigned width;
} positions;

static inline void pos_set(positions *P, uint64_t i, uint64_t v)
{
    if (P->width == 4)
        ((uint32_t *)P->p)[i] = (uint32_t)v;
    else
        ((uint64_t *)P->p)[i] = v;
}

static inline uint64_t pos_get(const positions *P, uint64_t i)
{
    return P->width == 4 ? ((const uint32_t *)P->p)[i] : ((const uint64_t *)P->p)[i];
}

/* ---- the input: a tensor's own arrays, or a caller's read in place ------- */

/* What the build reads: amped-prep's amp_coo (relabelled in place as the
 * modes are planned, released once copy 0 holds it), or a caller's arrays
 * (amp_build_write_arrays), read where they lie through each mode's labels
 * (kept from planning until copy 0 is built), its repeats skipped and
 * their sums read in their first occurrence's place. Either way the
 * nonzeros are taken in the same order, so the files are the same. */
typedef struct build_input {
    amp_coo *t;                      /* or NULL */
    const amp_coo_arrays *a;         /* when t is NULL */
    const amp_coo_repeats *rep;      /* a's repeats (NULL or none: every nonzero) */
    unsigned nmodes;
    uint64_t nnz;                    /* the nonzeros built */
    uint64_t span;                   /* positions read: nnz, and the repeats skipped */
    uint64_t *dims;                  /* t->dims, or own_dims; compact once planned */
    uint64_t own_dims[AMP_MAX_MODES];
    /* a's labels: table[m][i] for a dense mode, else uniq[m] searched for i
     * and the label at the same place in newlab[m]. */
    uint64_t *table[AMP_MAX_MODES], *uniq[AMP_MAX_MODES], *newlab[AMP_MAX_MODES];
    uint64_t nuniq[AMP_MAX_MODES];
    /* a's later copies gathered (see gathered): each copy-0 nonzero's
     * position in a, so that copy 0's values can go once its chunks are
     * written and the later copies read theirs from a. NULL p: none. */
    positions orig;
    /* Each copy's middle mode (see choose_middles), from copy 0's build on. */
    unsigned middle[AMP_MAX_MODES];
} build_input;

static inline int in_dropped(const build_input *in, uint64_t k)
{
    return in->rep != NULL && in->rep->drop != NULL && ((in->rep->drop[k >> 6] >> (k & 63)) & 1);
}

/* Nonzero k's original (0-based) index in mode m. */
static inline uint64_t in_orig(const build_input *in, unsigned m, uint64_t k)
{
    return in->t ? in->t->ind[m][k] : amp_coo_arrays_index(in->a, k, m);
}

/* Its label, once mode m is planned. */
static inline uint64_t in_label(const build_input *in, unsigned m, uint64_t k)
{
    if (in->t)
        return in->t->ind[m][k];
    uint64_t i = amp_coo_arrays_index(in->a, k, m);
    if (in->table[m] != NULL)
        return in->table[m][i];
    const uint64_t *u = in->uniq[m];
    uint64_t lo = 0, hi = in->nuniq[m];
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (u[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return in->newlab[m][lo];
}

/* Where nonzero k's value lies in the input (also for a prefetch); NULL
 * where it is a repeat's sum, held apart. */
static inline const double *in_val_at(const build_input *in, uint64_t k)
{
    if (in->t)
        return &in->t->val[k];
    if (in->rep != NULL && in->rep->has_sum != NULL && ((in->rep->has_sum[k >> 6] >> (k & 63)) & 1))
        return NULL;
    return amp_coo_arrays_value_at(in->a, k);
}

static inline double in_val(const build_input *in, uint64_t k)
{
    const double *at = in_val_at(in, k);
    return at != NULL ? *at : amp_coo_repeats_value(in->rep, k);
}

/* The position of the c-th nonzero built (from 0): c itself unless
 * repeats are skipped. */
static uint64_t in_position(const build_input *in, uint64_t c)
{
    if (in->rep == NULL || in->rep->drop == NULL)
        return c;
    const uint64_t *before = in->rep->kept_before;
    uint64_t lo = 0, hi = in->span / 64 + 1;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (before[mid] <= c)
            lo = mid;
        else
            hi = mid;
    }
    uint64_t k = 64 * lo, left = c - before[lo];
    for (;; k++)
        if (!in_dropped(in, k) && left-- == 0)
            return k;
}

static void in_free_labels(build_input *in)
{
    for (unsigned m = 0; m < AMP_MAX_MODES; m++) {
        free(in->table[m]);
        free(in->uniq[m]);
        free(in->newlab[m]);
        in->table[m] = in->uniq[m] = in->newlab[m] = NULL;
    }
}

/* ---- compaction, shard dealing, relabelling ------------------------------ */

typedef struct slice {
    uint64_t degree;
    uint64_t id;       /* compact index: rank of the original index */
} slice;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Below this many slices a pass over them stays on one thread: it is
 * short, and a team that must wait for every member was measured to lose
 * more than it saved on the 2-core VM (cpu20m's modes, bench/RESULTS.md). */
#define SLICE_PASS_PARALLEL (UINT64_C(1) << 20)

/* Threads for a pass over n items that keeps a table of `per` counters
 * per thread: one thread for fewer than SLICE_PASS_PARALLEL, and no more
 * than keep the tables within the items' own size. */
static int pass_threads(uint64_t n, uint64_t per)
{
    int T = amp_max_threads();
    if (n < SLICE_PASS_PARALLEL)
        return 1;
    while (T > 1 && (uint64_t)T * per > n + (UINT64_C(1) << 16))
        T /= 2;
    return T;
}

/* The per-thread histogram of a stable counting pass (the radix sorts'
 * passes, the labelling by shard), called by every thread of a parallel
 * region: the thread counts the buckets of its share [*lo, *hi) of n items
 * (amp_thread_range) into its own row of counts, nb counters a row; once
 * the whole team has counted, the rows become where each thread's items of
 * each bucket go (amp_bucket_offsets). Returns the thread's row, its
 * cursors for the scatter, which must take the same share in the same
 * order: the pass is then stable for any thread count. bucket(ctx, i) is
 * item i's bucket; a constant function here, so it is inlined. */
typedef uint64_t (*bucket_fn)(const void *ctx, uint64_t i);
static inline uint64_t *count_share(uint64_t *counts, uint64_t nb, uint64_t n, bucket_fn bucket,
                                    const void *ctx, uint64_t *lo, uint64_t *hi)
{
    int tid, nt;
    amp_thread_range(n, &tid, &nt, lo, hi);
    uint64_t *mine = counts + (size_t)tid * nb;
    memset(mine, 0, nb * sizeof *mine);
    for (uint64_t i = *lo; i < *hi; i++)
        mine[bucket(ctx, i)]++;
#pragma omp barrier
#pragma omp single
    amp_bucket_offsets(counts, nt, nb);
    return mine;
}

/* Slices ordered by degree, descending, ties by id ascending: an LSD radix
 * sort on the complemented degree, 16 bits a pass, over only the passes
 * the largest degree needs, each pass a count per thread over fixed slices
 * and a stable scatter. order arrives sorted by id, and each pass is
 * stable, so ties keep ascending ids, for any thread count. Measured far
 * faster than qsort on rd100m's millions of slices (bench/RESULTS.md). */
#define DEGREE_DIGITS 65536
typedef struct slice_digit {
    const slice *s;
    unsigned shift;
} slice_digit;

static inline uint64_t degree_digit(const void *ctx, uint64_t i)
{
    const slice_digit *d = ctx;
    return (~d->s[i].degree >> d->shift) & (DEGREE_DIGITS - 1);
}

static amp_status sort_heaviest_first(slice *order, uint64_t c, amp_error *err)
{
    uint64_t top = 0;
#pragma omp parallel for schedule(static) reduction(max : top) if (c >= SLICE_PASS_PARALLEL)
    for (uint64_t i = 0; i < c; i++)
        if (order[i].degree > top)
            top = order[i].degree;
    int T = pass_threads(c, DEGREE_DIGITS);
    slice *tmp = malloc((size_t)(c ? c : 1) * sizeof *tmp);
    uint64_t *count = malloc((size_t)T * DEGREE_DIGITS * sizeof *count);
    if (tmp == NULL || count == NULL) {
        free(tmp);
        free(count);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for sorting %llu slices",
                        (unsigned long long)c);
    }
    slice *src = order, *dst = tmp;
    for (unsigned shift = 0; shift < 64 && (top >> shift) != 0; shift += 16) {
        const slice_digit digit = {src, shift};
#pragma omp parallel num_threads(T)
        {
            uint64_t lo, hi;
            uint64_t *mine = count_share(count, DEGREE_DIGITS, c, degree_digit, &digit, &lo, &hi);
            for (uint64_t i = lo; i < hi; i++)
                dst[mine[degree_digit(&digit, i)]++] = src[i];
        }
        slice *t = src;
        src = dst;
        dst = t;
    }
    if (src != order)
        memcpy(order, src, (size_t)c * sizeof *order);
    free(tmp);
    free(count);
    return AMP_OK;
}

/* Indices below 2^bits in ascending order: an LSD radix sort, 11 bits a
 * pass, each pass a count per thread over fixed slices and a stable
 * scatter, the buckets laid out digit by digit and thread by thread. tmp
 * holds n more. For hypersparse modes, where a table over the dimension
 * would not fit and qsort was measured far slower (bench/RESULTS.md). */
#define RADIX_BITS 11
typedef struct index_digit {
    const uint64_t *a;
    unsigned shift;
} index_digit;

static inline uint64_t radix_digit(const void *ctx, uint64_t k)
{
    const index_digit *d = ctx;
    return (d->a[k] >> d->shift) & ((UINT64_C(1) << RADIX_BITS) - 1);
}

static amp_status radix_sort_u64(uint64_t *a, uint64_t *tmp, uint64_t n, unsigned bits,
                                 amp_error *err)
{
    const uint64_t B = UINT64_C(1) << RADIX_BITS;
    int T = amp_max_threads();
    if ((uint64_t)T > n / 65536 + 1)
        T = (int)(n / 65536 + 1);
    uint64_t *count = calloc((size_t)T * B, sizeof *count);
    if (count == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for sorting indices");
    uint64_t *src = a, *dst = tmp;
    for (unsigned shift = 0; shift < bits; shift += RADIX_BITS) {
        const index_digit digit = {src, shift};
#pragma omp parallel num_threads(T)
        {
            uint64_t lo, hi;
            uint64_t *mine = count_share(count, B, n, radix_digit, &digit, &lo, &hi);
            for (uint64_t k = lo; k < hi; k++)
                dst[mine[radix_digit(&digit, k)]++] = src[k];
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
    free(count);
    return AMP_OK;
}

/* A hypersparse mode's indices are sorted in SORT_PIECES runs, each with
 * a scratch array of its size, not one of n: the runs' scratch was what
 * set the peak (a second 8 bytes per nonzero beside the tensor and the
 * copy being sorted). The distinct indices and their degrees then come
 * from a merge walk over the runs, once to count them and once to list
 * them. */
#define SORT_PIECES 4

/* The distinct values of the sorted runs [at[r], at[r + 1]) and how often
 * each appears, ascending; uniq and order NULL: only their number. */
static uint64_t merge_distinct(const uint64_t *a, const uint64_t *at, unsigned runs,
                               uint64_t *uniq, slice *order)
{
    uint64_t head[SORT_PIECES], c = 0, last = 0;
    for (unsigned r = 0; r < runs; r++)
        head[r] = at[r];
    for (;;) {
        unsigned best = runs;
        for (unsigned r = 0; r < runs; r++)
            if (head[r] < at[r + 1] && (best == runs || a[head[r]] < a[head[best]]))
                best = r;
        if (best == runs)
            return c;
        uint64_t v = a[head[best]++];
        if (c == 0 || v != last) {
            if (uniq != NULL) {
                uniq[c] = v;
                order[c] = (slice){0, c};
            }
            c++;
            last = v;
        }
        if (order != NULL)
            order[c - 1].degree++;
    }
}

/* Nonzeros per slice. Power-law modes put millions of nonzeros on one
 * slice, where atomic increments from every thread would serialize, so
 * threads count into private tables when the tables are affordable (4-byte
 * counters, at most half the bytes of the index array), and use atomics
 * only for modes with very many slices (where contention is rarer). */
static void degree_histogram(const build_input *in, unsigned d, uint64_t dim, uint64_t *table)
{
    const uint64_t n = in->span;
    int nt = amp_max_threads();
    uint64_t afford = n * 4 / (dim * 4 > 0 ? dim * 4 : 1);
    if (n > UINT32_MAX || nt < 2 || afford < 2) {
#pragma omp parallel for schedule(static)
        for (uint64_t k = 0; k < n; k++) {
            if (in_dropped(in, k))
                continue;
#pragma omp atomic
            table[in_orig(in, d, k)]++;
        }
        return;
    }
    if ((uint64_t)nt > afford)
        nt = (int)afford;
    uint32_t *priv = calloc((size_t)nt * dim, sizeof *priv);
    if (priv == NULL) {
        for (uint64_t k = 0; k < n; k++)
            if (!in_dropped(in, k))
                table[in_orig(in, d, k)]++;
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int tid, T;
        uint64_t lo, hi;
        amp_thread_range(n, &tid, &T, &lo, &hi);
        uint32_t *mine = priv + (size_t)tid * dim;
        if (in->t != NULL) {
            const uint64_t *ind = in->t->ind[d];
            for (uint64_t k = lo; k < hi; k++)
                mine[ind[k]]++;
        } else {
            for (uint64_t k = lo; k < hi; k++)
                if (!in_dropped(in, k))
                    mine[in_orig(in, d, k)]++;
        }
#pragma omp barrier
#pragma omp for schedule(static)
        for (uint64_t i = 0; i < dim; i++) {
            uint64_t s = 0;
            for (int q = 0; q < T; q++)
                s += priv[(size_t)q * dim + i];
            table[i] = s;
        }
    }
    free(priv);
}

/* A dense mode's nonempty slices in ascending original order, from the
 * degree table: their degrees and ids in *order, original indices in
 * *uniq, and table[i] turned into slice i's compact index. Each thread
 * counts its share of the table, then fills from its offset: the result of
 * one pass in order, for any thread count. */
static amp_status compact_slices(uint64_t *table, uint64_t dim, slice **orderp, uint64_t **uniqp,
                                 uint64_t *cp, amp_error *err)
{
    int T = pass_threads(dim, 1);
    uint64_t *start = calloc((size_t)T, sizeof *start);
    slice *order = NULL;
    uint64_t *uniq = NULL, c = 0;
    int failed = 0;
    if (start == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
#pragma omp parallel num_threads(T)
    {
        int tid, nt;
        uint64_t lo, hi, mine = 0;
        amp_thread_range(dim, &tid, &nt, &lo, &hi);
        for (uint64_t i = lo; i < hi; i++)
            mine += table[i] != 0;
        start[tid] = mine;
#pragma omp barrier
#pragma omp single
        {
            for (int q = 0; q < nt; q++) {
                uint64_t k = start[q];
                start[q] = c;
                c += k;
            }
            order = malloc((size_t)(c ? c : 1) * sizeof *order);
            uniq = malloc((size_t)(c ? c : 1) * sizeof *uniq);
            failed = order == NULL || uniq == NULL;
        }
        if (!failed) {
            uint64_t j = start[tid];
            for (uint64_t i = lo; i < hi; i++)
                if (table[i] != 0) {
                    order[j] = (slice){table[i], j};
                    uniq[j] = i;
                    table[i] = j++;
                }
        }
    }
    free(start);
    if (failed) {
        free(order);
        free(uniq);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for %llu slices",
                        (unsigned long long)c);
    }
    *orderp = order;
    *uniqp = uniq;
    *cp = c;
    return AMP_OK;
}

/* The FLYCOO dealing: slices heaviest first, each to the shard with the
 * fewest nonzeros so far, ties to the lower number (so the dealing is
 * deterministic). Each step needs the one before, so it runs on one
 * thread; two things keep it fast (a binary heap, whose sift-down branched
 * unpredictably at every level, was measured slower on rd100m's modes of
 * millions of slices, bench/RESULTS.md).
 *
 * A winner tree: leaves are shards (padded to a power of two with loads
 * that never win), each inner node the winner of its two children, the
 * root the next shard. After a deal only the dealt shard's path is
 * replayed, its load carried in a register and the siblings read from
 * memory: a chain of branch-free picks.
 *
 * Runs of slices of one degree (power-law tails are mostly such runs)
 * dealt at once, see deal_run. */
typedef struct deal_key {
    uint64_t q, r;     /* load = q * degree + r */
    uint32_t shard;
} deal_key;

typedef struct shard_dealer {
    uint64_t *load;    /* leaves: P loads */
    uint32_t *node;    /* 2 P entries: node[P + s] = s, node[1] the root */
    uint64_t P;
    uint32_t S;
    deal_key *by_q, *eligible;   /* deal_run's scratch, S entries each */
} shard_dealer;

/* Runs dealt at once: at least DEAL_RUN_PER_SHARD slices per shard and
 * S^2 / 16, so that deal_run's insertion sort (up to S^2 / 2 moves a run)
 * costs at most 8 moves a slice, and at most DEAL_RUN_MAX_SHARDS shards
 * (its scratch). */
#define DEAL_RUN_PER_SHARD 4
#define DEAL_RUN_MAX_SHARDS 256

static int deal_as_run(const shard_dealer *t, uint64_t n)
{
    uint64_t S = t->S;
    return t->by_q != NULL && n >= DEAL_RUN_PER_SHARD * S && n >= S * S / 16;
}

/* a comes from the left subtree, so a < b: ties go to a. */
static inline uint32_t lighter_of(const uint64_t *load, uint32_t a, uint32_t b)
{
    return load[b] < load[a] ? b : a;
}

static void dealer_rebuild(shard_dealer *t)
{
    for (uint64_t s = 0; s < t->P; s++)
        t->node[t->P + s] = (uint32_t)s;
    for (uint64_t i = t->P - 1; i >= 1; i--)
        t->node[i] = lighter_of(t->load, t->node[2 * i], t->node[2 * i + 1]);
}

static void dealer_free(shard_dealer *t)
{
    free(t->load);
    free(t->node);
    free(t->by_q);
    free(t->eligible);
    memset(t, 0, sizeof *t);
}

static amp_status dealer_init(shard_dealer *t, uint32_t S, amp_error *err)
{
    memset(t, 0, sizeof *t);
    t->S = S;
    t->P = 1;
    while (t->P < S)
        t->P <<= 1;
    t->load = malloc((size_t)t->P * sizeof *t->load);
    t->node = malloc((size_t)(2 * t->P) * sizeof *t->node);
    if (t->load == NULL || t->node == NULL) {
        dealer_free(t);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for %lu shards", (unsigned long)S);
    }
    if (S <= DEAL_RUN_MAX_SHARDS) {
        /* Optional: without them every slice is dealt on its own. */
        t->by_q = malloc((size_t)S * sizeof *t->by_q);
        t->eligible = malloc((size_t)S * sizeof *t->eligible);
        if (t->by_q == NULL || t->eligible == NULL) {
            free(t->by_q);
            free(t->eligible);
            t->by_q = t->eligible = NULL;
        }
    }
    for (uint64_t s = 0; s < t->P; s++)
        t->load[s] = s < S ? 0 : UINT64_MAX;
    dealer_rebuild(t);
    return AMP_OK;
}

/* Deal one slice of `degree` to the root; returns the new root. */
static inline uint32_t dealer_add(shard_dealer *t, uint32_t s, uint64_t degree)
{
    uint64_t wl = (t->load[s] += degree);
    uint32_t w = s;
    for (uint64_t i = t->P + s; i > 1; i >>= 1) {
        uint32_t sib = t->node[i ^ 1];
        uint64_t sl = t->load[sib];
        /* A left sibling (i odd) wins ties. */
        uint64_t take = -(uint64_t)((sl < wl) | ((sl == wl) & (i & 1)));
        w = (uint32_t)((sib & take) | (w & ~take));
        wl = (sl & take) | (wl & ~take);
        t->node[i >> 1] = w;
    }
    return w;
}

static int by_level(const void *a, const void *b)
{
    const deal_key *x = a, *y = b;
    return x->q < y->q ? -1 : x->q > y->q;
}

/* n slices of one degree d, dealt exactly as one at a time would. Shard
 * s's successive candidates are load_s + k d, k = 0, 1, ..., and the
 * greedy takes the smallest (value, shard) among all candidates each
 * step: the merge of those progressions. With load_s = q_s d + r_s a
 * candidate is (q_s + k) d + r_s, so the merge goes level by level
 * (q_s + k = 0, 1, ...); a level holds every shard with q_s at most the
 * level, in order of (r_s, shard). */
static void deal_run(shard_dealer *t, uint64_t d, uint64_t n, uint32_t *shard_of)
{
    uint32_t S = t->S, nx = 0, ne = 0;
    for (uint32_t s = 0; s < S; s++)
        t->by_q[s] = (deal_key){t->load[s] / d, t->load[s] % d, s};
    qsort(t->by_q, S, sizeof *t->by_q, by_level);
    uint64_t done = 0;
    for (uint64_t level = t->by_q[0].q; done < n; level++) {
        /* Shards reaching this level join the eligible list, kept sorted
         * by (r, shard). */
        while (nx < S && t->by_q[nx].q <= level) {
            deal_key x = t->by_q[nx++];
            uint32_t k = ne++;
            while (k > 0 && (t->eligible[k - 1].r > x.r ||
                             (t->eligible[k - 1].r == x.r && t->eligible[k - 1].shard > x.shard))) {
                t->eligible[k] = t->eligible[k - 1];
                k--;
            }
            t->eligible[k] = x;
        }
        for (uint32_t e = 0; e < ne && done < n; e++) {
            shard_of[done++] = t->eligible[e].shard;
            t->load[t->eligible[e].shard] += d;
        }
    }
    dealer_rebuild(t);
}

typedef struct mode_plan {
    uint64_t compact_dim;
    uint64_t *new_to_orig;   /* compact_dim entries */
    uint64_t *row_nnz;       /* per new label */
    uint32_t nshards;
    amp_shard *shards;
} mode_plan;

static void plan_free(mode_plan *p)
{
    free(p->new_to_orig);
    free(p->row_nnz);
    free(p->shards);
    memset(p, 0, sizeof *p);
}

/* Bytes of a lookup table indexed by original index, worth it unless the
 * mode is hypersparse (far more slices than nonzeros). */
static int dense_mode(uint64_t dim, uint64_t nnz)
{
    return dim <= 4 * nnz + (UINT64_C(1) << 20);
}

static inline uint64_t shard_bucket(const void *shard_of, uint64_t j)
{
    return ((const uint32_t *)shard_of)[j];
}

static amp_status plan_mode(build_input *in, unsigned d, uint32_t want_shards, mode_plan *p,
                            amp_error *err)
{
    uint64_t n = in->nnz, dim = in->dims[d];
    uint64_t *table = NULL, *uniq = NULL, *newlab = NULL, *fill = NULL;
    slice *order = NULL;
    shard_dealer dealer;
    memset(&dealer, 0, sizeof dealer);
    uint32_t *shard_of = NULL;
    amp_status rc = AMP_OK;
    uint64_t c = 0;
    memset(p, 0, sizeof *p);

    /* Nonempty slices in ascending original order, with their degrees. */
    if (dense_mode(dim, n)) {
        table = calloc((size_t)dim, sizeof *table);
        if (table == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for mode %u slices",
                           d + 1);
        degree_histogram(in, d, dim, table);
        AMP_CHECK_GOTO(compact_slices(table, dim, &order, &uniq, &c, err), rc, fail);
    } else {
        uint64_t *sorted = amp_huge_alloc(n * sizeof *sorted, "sorted indices", err);
        if (sorted == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
        if (in->t != NULL) {
            memcpy(sorted, in->t->ind[d], n * sizeof *sorted);
        } else {
            for (uint64_t k = 0, j = 0; k < in->span; k++)
                if (!in_dropped(in, k))
                    sorted[j++] = in_orig(in, d, k);
        }
        uint64_t at[SORT_PIECES + 1], piece = (n + SORT_PIECES - 1) / SORT_PIECES;
        unsigned runs = SORT_PIECES;
        for (unsigned r = 0; r <= SORT_PIECES; r++)
            at[r] = (uint64_t)r * piece < n ? (uint64_t)r * piece : n;
        /* The radix sort's scratch when there is memory for it. */
        uint64_t *tmp = amp_huge_alloc(piece * sizeof *tmp, "sorting indices", err);
        if (tmp != NULL) {
            unsigned bits = 1;
            while (bits < 64 && ((dim - 1) >> bits) != 0)
                bits++;
            for (unsigned r = 0; r < SORT_PIECES && rc == AMP_OK; r++)
                rc = radix_sort_u64(sorted + at[r], tmp, at[r + 1] - at[r], bits, err);
            amp_huge_free(tmp, piece * sizeof *tmp);
            if (rc != AMP_OK) {
                amp_huge_free(sorted, n * sizeof *sorted);
                goto fail;
            }
        } else {
            amp_error_clear(err);
            qsort(sorted, (size_t)n, sizeof *sorted, cmp_u64);
            runs = 1;
            at[1] = n;
        }
        c = merge_distinct(sorted, at, runs, NULL, NULL);
        order = malloc((size_t)c * sizeof *order);
        uniq = malloc((size_t)c * sizeof *uniq);
        if (order == NULL || uniq == NULL) {
            amp_huge_free(sorted, n * sizeof *sorted);
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
        }
        merge_distinct(sorted, at, runs, uniq, order);
        amp_huge_free(sorted, n * sizeof *sorted);
    }

    /* FLYCOO dealing: heaviest slice first, each to the least loaded shard
     * (the greedy with the 4/3 bound). One thread: each step needs the one
     * before. */
    AMP_CHECK_GOTO(sort_heaviest_first(order, c, err), rc, fail);
    uint32_t S = want_shards < c ? want_shards : (uint32_t)c;
    AMP_CHECK_GOTO(dealer_init(&dealer, S, err), rc, fail);
    shard_of = malloc((size_t)c * sizeof *shard_of);
    p->shards = calloc(S, sizeof *p->shards);
    p->new_to_orig = malloc((size_t)c * sizeof *p->new_to_orig);
    p->row_nnz = malloc((size_t)c * sizeof *p->row_nnz);
    newlab = malloc((size_t)c * sizeof *newlab);
    if (!shard_of || !p->shards || !p->new_to_orig || !p->row_nnz || !newlab)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for mode %u shards",
                       d + 1);
    uint32_t next_shard = dealer.node[1];
    for (uint64_t j = 0; j < c;) {
        uint64_t e = j + 1, degree = order[j].degree;
        while (e < c && order[e].degree == degree)
            e++;
        if (deal_as_run(&dealer, e - j)) {
            deal_run(&dealer, degree, e - j, shard_of + j);
            next_shard = dealer.node[1];
            j = e;
            continue;
        }
        for (; j < e; j++) {
            shard_of[j] = next_shard;
            next_shard = dealer_add(&dealer, next_shard, degree);
        }
    }
    for (uint32_t s = 0; s < S; s++)
        p->shards[s].nnz = dealer.load[s];
    /* Labels in dealing order within each shard, so heaviest first: a
     * stable counting pass by shard, each thread's share of the dealt
     * slices after the shares of the threads before it. Shard s owns the
     * rows [begin, end) its labels fill. */
    int T = pass_threads(c, S);
    fill = calloc((size_t)T * S, sizeof *fill);
    if (fill == NULL)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for mode %u shards",
                       d + 1);
#pragma omp parallel num_threads(T)
    {
        uint64_t lo, hi;
        uint64_t *mine = count_share(fill, S, c, shard_bucket, shard_of, &lo, &hi);
        /* Shards' rows are consecutive from 0, so bucket offsets are labels:
         * thread 0's are where the shards begin, read before its scatter
         * moves them (no thread passes the single until it is done). */
#pragma omp single
        for (uint32_t s = 0; s < S; s++) {
            p->shards[s].index_begin = fill[s];
            p->shards[s].index_end = s + 1 < S ? fill[s + 1] : c;
        }
        for (uint64_t j = lo; j < hi; j++) {
            uint64_t label = mine[shard_of[j]]++;
            newlab[order[j].id] = label;
            p->new_to_orig[label] = uniq[order[j].id];
            p->row_nnz[label] = order[j].degree;
        }
    }
    /* Relabel the tensor's mode d in place; a caller's arrays keep the
     * labels instead, read through them until copy 0 is built. */
    if (table != NULL) {
#pragma omp parallel for schedule(static) if (c >= SLICE_PASS_PARALLEL)
        for (uint64_t i = 0; i < c; i++)
            table[uniq[i]] = newlab[i];
    }
    if (in->t == NULL) {
        if (table != NULL) {
            in->table[d] = table;
            table = NULL;
        } else {
            in->uniq[d] = uniq;
            in->newlab[d] = newlab;
            in->nuniq[d] = c;
            uniq = newlab = NULL;
        }
    } else if (table != NULL) {
        uint64_t *ind = in->t->ind[d];
#pragma omp parallel for schedule(static)
        for (uint64_t k = 0; k < n; k++)
            ind[k] = table[ind[k]];
    } else {
        uint64_t *ind = in->t->ind[d];
#pragma omp parallel for schedule(static)
        for (uint64_t k = 0; k < n; k++) {
            uint64_t lo = 0, hi = c;
            while (hi - lo > 1) {
                uint64_t mid = lo + (hi - lo) / 2;
                if (uniq[mid] <= ind[k])
                    lo = mid;
                else
                    hi = mid;
            }
            ind[k] = newlab[lo];
        }
    }
    p->compact_dim = c;
    p->nshards = S;
fail:
    free(table);
    free(uniq);
    free(newlab);
    free(fill);
    free(order);
    dealer_free(&dealer);
    free(shard_of);
    if (rc != AMP_OK)
        plan_free(p);
    return rc;
}

/* ---- progress ------------------------------------------------------------ */

typedef struct build_progress {
    void (*fn)(void *ctx, const char *phase, uint64_t done, uint64_t total);
    void *ctx;
    void (*chunk_fn)(void *ctx, uint64_t chunk_nnz);   /* the caller's write.progress */
    void *chunk_ctx;
    uint64_t written, total;     /* chunk nonzeros, over every mode copy */
} build_progress;

static void progress_at(const build_progress *bp, const char *phase, uint64_t done,
                        uint64_t total)
{
    if (bp->fn != NULL)
        bp->fn(bp->ctx, phase, done, total);
}

/* The writer's per-chunk hook: it counts within one copy's chunks, the
 * caller wants a count over all the copies. */
static void chunk_written(void *ctx, uint64_t chunk_nnz)
{
    build_progress *bp = ctx;
    bp->written += chunk_nnz;
    progress_at(bp, "chunks", bp->written, bp->total);
    if (bp->chunk_fn != NULL)
        bp->chunk_fn(bp->chunk_ctx, chunk_nnz);
}

/* ---- one mode copy ------------------------------------------------------- */

/* The copy is built by one stable counting-sort pass that reads the
 * tensor in order (sequential reads of every index array) and scatters
 * each nonzero's encoded word and value to its place: two random writes per
 * nonzero, where gathering through a permutation later would cost a random
 * read per mode plus one for the value. Chunks are then plain slices. */
typedef struct mode_copy {
    uint64_t *words;      /* n linearized indices, low 64 bits */
    uint64_t *keys;       /* n block keys, only when the index exceeds 64 bits */
    unsigned char *vals;  /* n values, f32 or f64 */
    size_t vsize;
    uint64_t n;
    uint64_t rows_reordered; /* rows sort_rows_by_key had to reorder */
} mode_copy;

static void copy_free(mode_copy *c)
{
    amp_huge_free(c->words, c->n * 8);
    amp_huge_free(c->keys, c->n * 8);
    amp_huge_free(c->vals, c->n * c->vsize);
    memset(c, 0, sizeof *c);
}

typedef struct copy_ctx {
    const mode_copy *c;
    const uint64_t *start;     /* per job: its first position */
    const amp_chunk_job *jobs;
} copy_ctx;

/* A chunk's words and values, read in place from the copy. */
static amp_status view_chunk(void *ctxp, size_t job, const uint64_t **words, const void **vals,
                             amp_error *err)
{
    const copy_ctx *ctx = ctxp;
    uint64_t at = ctx->start[job];
    (void)err;
    *words = ctx->c->words + at;
    *vals = ctx->c->vals + ctx->c->vsize * at;
    return AMP_OK;
}

/* Within a row, nonzeros of one block key together: needed only when the
 * key holds bits of input modes (more key bits than the output field's). */
typedef struct keyed {
    uint64_t key, word;
    double val;
    uint64_t pos;
} keyed;

static int by_key(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* A row's nonzeros must be in block-key order when the key holds bits of
 * other modes than the row's (key_bits > the row mode's width). Copy 0 is
 * scattered from the tensor in input order, so its rows are sorted here,
 * stably. That leaves copy 0 ordered by the top max(width, key_bits) bits
 * of the sequence of fields mode 1, mode 2, ... . The key of copy d is
 * mode d, then the top bits of the same sequence without d; within a row
 * of mode d those bits are a prefix of copy 0's order with d held fixed,
 * so the stable scatter from copy 0 leaves every later copy's rows in key
 * order already (write_copy checks it when remap streams depend on it).
 * Rows already in order are found in parallel and left alone. */
static int row_in_key_order(const mode_copy *c, uint64_t a, uint64_t len)
{
    for (uint64_t i = 1; i < len; i++)
        if (c->keys[a + i] < c->keys[a + i - 1])
            return 0;
    return 1;
}

static amp_status sort_rows_by_key(mode_copy *c, const uint64_t *rowptr, uint64_t rows,
                                   amp_error *err)
{
    uint64_t longest = 0, unsorted = 0;
    unsigned char *out_of_order = calloc(rows ? rows : 1, 1);
    if (out_of_order == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
#pragma omp parallel for schedule(dynamic, 4096) reduction(max : longest) \
    reduction(+ : unsorted)
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t len = rowptr[r + 1] - rowptr[r];
        if (len > 1 && !row_in_key_order(c, rowptr[r], len)) {
            out_of_order[r] = 1;
            unsorted++;
            if (len > longest)
                longest = len;
        }
    }
    keyed *tmp = unsorted ? malloc((size_t)longest * sizeof *tmp) : NULL;
    if (unsorted && tmp == NULL) {
        free(out_of_order);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    c->rows_reordered = unsorted;
    for (uint64_t r = 0; unsorted > 0 && r < rows; r++) {
        if (!out_of_order[r])
            continue;
        uint64_t a = rowptr[r], len = rowptr[r + 1] - a;
        for (uint64_t i = 0; i < len; i++) {
            tmp[i] = (keyed){c->keys[a + i], c->words[a + i], 0, i};
            memcpy(&tmp[i].val, c->vals + c->vsize * (a + i), c->vsize);
        }
        qsort(tmp, (size_t)len, sizeof *tmp, by_key);
        for (uint64_t i = 0; i < len; i++) {
            c->keys[a + i] = tmp[i].key;
            c->words[a + i] = tmp[i].word;
            memcpy(c->vals + c->vsize * (a + i), &tmp[i].val, c->vsize);
        }
    }
    free(tmp);
    free(out_of_order);
    return AMP_OK;
}

/* ---- fibers (issue 45) --------------------------------------------------- */

/* Copy d's fibers with middle mode m are the distinct pairs (index d,
 * index m), so the middle mode is chosen by counting those pairs for every
 * two modes. They are counted as copy 0 is scattered from the tensor (the
 * one pass that reads every index of every nonzero), in HyperLogLog
 * sketches: 2^12 one-byte registers a pair of modes a thread, merged by
 * maximum (so the same for any thread count), 1.6% standard error, far
 * below the gaps between candidates that matter (rd100m: 24.0 M against
 * 29.2 M fibers). Exact counts would need a sort per pair. */
#define HLL_BITS 12
#define HLL_REGS (1u << HLL_BITS)

typedef struct fiber_sketch {
    unsigned nmodes, npairs;
    int threads;
    uint8_t *regs;            /* threads x npairs x HLL_REGS */
} fiber_sketch;

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

static inline unsigned pair_of(unsigned nmodes, unsigned a, unsigned b)
{
    if (a > b) {
        unsigned t = a;
        a = b;
        b = t;
    }
    return a * nmodes - a * (a + 1) / 2 + (b - a - 1);
}

/* One nonzero of copy layout l (its key and word) into thread tid's
 * sketches. */
static inline void sketch_add(const fiber_sketch *sk, int tid, const amp_mode_layout *l,
                              uint64_t key, uint64_t word)
{
    uint64_t h[AMP_MAX_MODES], x[AMP_MAX_MODES];
    const unsigned n = sk->nmodes;
    for (unsigned m = 0; m < n; m++) {
        x[m] = amp_blco_field(key, word, l->shift[m], l->width[m]);
        h[m] = mix64(x[m] + UINT64_C(0x9e3779b97f4a7c15));
    }
    uint8_t *regs = sk->regs + (size_t)tid * sk->npairs * HLL_REGS;
    unsigned p = 0;
    for (unsigned a = 0; a < n; a++)
        for (unsigned b = a + 1; b < n; b++, p++) {
            uint64_t v = mix64(x[a] ^ h[b]);
            uint64_t rest = v << HLL_BITS;
            unsigned rank = rest ? (unsigned)__builtin_clzll(rest) + 1 : 64 - HLL_BITS + 1;
            uint8_t *r = regs + (size_t)p * HLL_REGS + (v >> (64 - HLL_BITS));
            if (rank > *r)
                *r = (uint8_t)rank;
        }
}

static double sketch_estimate(const fiber_sketch *sk, unsigned p)
{
    double z = 0, m = HLL_REGS;
    unsigned zeros = 0;
    for (unsigned j = 0; j < HLL_REGS; j++) {
        uint8_t r = 0;
        for (int t = 0; t < sk->threads; t++) {
            uint8_t v = sk->regs[((size_t)t * sk->npairs + p) * HLL_REGS + j];
            r = v > r ? v : r;
        }
        z += ldexp(1.0, -(int)r);
        zeros += r == 0;
    }
    double e = 0.7213 / (1 + 1.079 / m) * m * m / z;
    if (e <= 2.5 * m && zeros > 0)
        e = m * log(m / zeros);   /* linear counting: few pairs */
    return e;
}

/* The middle mode of each copy from the sketches: the other mode with the
 * fewest pairs; for copies after the first, mode 1 (index 0) unless
 * another has 2% fewer, since the scatter from copy 0 leaves their rows
 * in mode 1's order already and any other order costs a sort. */
static void choose_middles(const fiber_sketch *sk, unsigned *middle)
{
    const unsigned n = sk->nmodes;
    for (unsigned d = 0; d < n; d++) {
        double best = INFINITY;
        for (unsigned m = 0; m < n; m++) {
            if (m == d)
                continue;
            double e = sketch_estimate(sk, pair_of(n, d, m));
            if (d > 0 && m == 0)
                e *= 0.98;
            if (e < best) {
                best = e;
                middle[d] = m;
            }
        }
    }
}

/* A nonzero of a row being put in fiber order. */
typedef struct fiber_item {
    uint64_t key, mid, word, pos, orig;
    unsigned char val[8];
} fiber_item;

static int by_fiber(const void *a, const void *b)
{
    const fiber_item *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->mid != y->mid)
        return x->mid < y->mid ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static inline uint64_t copy_key(const mode_copy *c, uint64_t k)
{
    return c->keys ? c->keys[k] : 0;
}

/* a[0 .. n) stably by their bits [low, low + bits): insertion for short
 * runs, else an LSD radix sort of 8 bits a pass through tmp. Most rows
 * are short; the heavy rows of power-law data are long, and qsort of the
 * rows' records was 4x the whole order step on cpu20m. */
static void sort_high(uint64_t *a, uint64_t *tmp, uint64_t n, unsigned low, unsigned bits)
{
    if (n <= 64) {
        for (uint64_t i = 1; i < n; i++) {
            uint64_t v = a[i], key = v >> low;
            uint64_t j = i;
            while (j > 0 && (a[j - 1] >> low) > key) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = v;
        }
        return;
    }
    uint64_t *from = a, *to = tmp;
    for (unsigned at = low; at < low + bits; at += 8) {
        uint64_t count[257] = {0};
        for (uint64_t i = 0; i < n; i++)
            count[((from[i] >> at) & 255) + 1]++;
        for (unsigned b = 0; b < 256; b++)
            count[b + 1] += count[b];
        for (uint64_t i = 0; i < n; i++)
            to[count[(from[i] >> at) & 255]++] = from[i];
        uint64_t *t = from;
        from = to;
        to = t;
    }
    if (from != a)
        memcpy(a, from, n * sizeof *a);
}

/* The bits a row position below len takes (at least 1). */
static inline unsigned bits_of(uint64_t len)
{
    unsigned b = 1;
    while (b < 64 && (len >> b) != 0)
        b++;
    return b;
}

/* A fiber ordering's per-thread scratch, 3 words a nonzero of the longest
 * row so far (packed keys, the sort's other buffer, the row saved): grown
 * to len. 0: out of memory (*pk NULL, *cap 0). */
static int row_scratch(uint64_t **pk, uint64_t *cap, uint64_t len)
{
    if (len <= *cap)
        return 1;
    free(*pk);
    *cap = len;
    *pk = malloc(3 * (size_t)len * sizeof **pk);
    if (*pk == NULL)
        *cap = 0;
    return *pk != NULL;
}

/* Rows of copy c (layout l) in fiber order for middle mode m: within a row
 * by block key (as sort_rows_by_key leaves it) then index m, stably; only
 * the rows not in that order already are sorted (with the caller's
 * positions in orig, when given, moved along), and only when `sort`
 * (otherwise the order is taken as it is). Counts each row's fibers, the
 * runs of one index m, into fibers[r]. */
static amp_status order_fibers(mode_copy *c, const amp_mode_layout *l, unsigned m,
                               const uint64_t *rowptr, uint64_t rows, int sort, positions *orig,
                               uint64_t *fibers, amp_error *err)
{
    const unsigned sh = l->shift[m], wd = l->width[m];
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        fiber_item *tmp = NULL;
        uint64_t *pk = NULL, cap = 0, pcap = 0;
#pragma omp for schedule(dynamic, 1024)
        for (uint64_t r = 0; r < rows; r++) {
            const uint64_t a = rowptr[r], len = rowptr[r + 1] - a;
            int in_order = 1;
            for (uint64_t i = a + 1; i < a + len && in_order; i++) {
                uint64_t k0 = copy_key(c, i - 1), k1 = copy_key(c, i);
                in_order = k0 < k1 ||
                           (k0 == k1 && amp_blco_field(k0, c->words[i - 1], sh, wd) <=
                                            amp_blco_field(k1, c->words[i], sh, wd));
            }
            unsigned lbits = bits_of(len);
            const int packed = c->keys == NULL && wd + lbits <= 64;
            if (!in_order && sort && !failed && packed) {
                if (!row_scratch(&pk, &pcap, len)) {
                    failed = 1;
                    continue;
                }
                uint64_t *tmp2 = pk + len, *save = pk + 2 * len;
                for (uint64_t i = 0; i < len; i++)
                    pk[i] = amp_blco_field(0, c->words[a + i], sh, wd) << lbits | i;
                sort_high(pk, tmp2, len, lbits, wd);
                /* The row's words, values and positions through the order. */
                memcpy(save, c->words + a, len * 8);
                for (uint64_t i = 0; i < len; i++)
                    c->words[a + i] = save[pk[i] & ((UINT64_C(1) << lbits) - 1)];
                memcpy(save, c->vals + c->vsize * a, len * c->vsize);
                for (uint64_t i = 0; i < len; i++)
                    memcpy(c->vals + c->vsize * (a + i),
                           (unsigned char *)save + c->vsize * (pk[i] & ((UINT64_C(1) << lbits) - 1)),
                           c->vsize);
                if (orig) {
                    for (uint64_t i = 0; i < len; i++)
                        save[i] = pos_get(orig, a + i);
                    for (uint64_t i = 0; i < len; i++)
                        pos_set(orig, a + i, save[pk[i] & ((UINT64_C(1) << lbits) - 1)]);
                }
            } else if (!in_order && sort && !failed) {
                if (len > cap) {
                    free(tmp);
                    cap = len;
                    tmp = malloc((size_t)cap * sizeof *tmp);
                    if (tmp == NULL) {
                        cap = 0;
                        failed = 1;
                        continue;
                    }
                }
                for (uint64_t i = 0; i < len; i++) {
                    uint64_t k = copy_key(c, a + i), w = c->words[a + i];
                    tmp[i] = (fiber_item){k, amp_blco_field(k, w, sh, wd), w, i,
                                          orig ? pos_get(orig, a + i) : 0, {0}};
                    memcpy(tmp[i].val, c->vals + c->vsize * (a + i), c->vsize);
                }
                qsort(tmp, (size_t)len, sizeof *tmp, by_fiber);
                for (uint64_t i = 0; i < len; i++) {
                    c->words[a + i] = tmp[i].word;
                    if (c->keys)
                        c->keys[a + i] = tmp[i].key;
                    if (orig)
                        pos_set(orig, a + i, tmp[i].orig);
                    memcpy(c->vals + c->vsize * (a + i), tmp[i].val, c->vsize);
                }
            }
            uint64_t n = len > 0;
            for (uint64_t i = a + 1; i < a + len; i++)
                n += amp_blco_field(copy_key(c, i - 1), c->words[i - 1], sh, wd) !=
                     amp_blco_field(copy_key(c, i), c->words[i], sh, wd);
            fibers[r] = n;
        }
        free(tmp);
        free(pk);
    }
    if (failed)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for ordering the mode %u copy's "
                        "fibers", l->mode + 1);
    return AMP_OK;
}

/* Where a copy's nonzeros come from: the tensor itself (copy 0), or copy 0
 * (every later copy: its words hold every index, so the tensor's own
 * arrays can be freed once copy 0 exists, which caps the peak memory). */
typedef struct copy_source {
    const build_input *in;         /* or NULL */
    const mode_copy *c;            /* when in is NULL */
    const amp_mode_layout *cl;     /* c's layout */
    unsigned nmodes;
    uint64_t n;
} copy_source;

/* Put index idx into its BLCO field (shift, width) of the linearized index
 * whose low 64 bits are *word and high bits *key: the inverse of
 * amp_blco_field. */
static inline void blco_place(uint64_t idx, unsigned shift, unsigned width, uint64_t *key,
                              uint64_t *word)
{
    if (width == 0)
        return;
    if (shift >= 64) {
        *key |= idx << (shift - 64);
    } else {
        *word |= idx << shift;
        if (shift > 0 && shift + width > 64)
            *key |= idx >> (64 - shift);
    }
}

/* Nonzero k of the source: its row in mode d, and its key and word in
 * layout l; its value (in the copy's value type) goes to val. */
static inline uint64_t source_encode(const copy_source *s, uint64_t k, unsigned d,
                                     const amp_mode_layout *l, amp_value_type vt, uint64_t *key,
                                     uint64_t *word, unsigned char *val)
{
    uint64_t row = 0;
    *key = *word = 0;
    for (unsigned m = 0; m < s->nmodes; m++) {
        uint64_t idx = s->in ? in_label(s->in, m, k)
                             : amp_blco_field(s->c->keys ? s->c->keys[k] : 0, s->c->words[k],
                                              s->cl->shift[m], s->cl->width[m]);
        if (m == d)
            row = idx;
        blco_place(idx, l->shift[m], l->width[m], key, word);
    }
    if (s->in == NULL) {
        memcpy(val, s->c->vals + s->c->vsize * k, s->c->vsize);
    } else if (vt == AMP_VALUES_F32) {
        float v = (float)in_val(s->in, k);
        memcpy(val, &v, 4);
    } else {
        double v = in_val(s->in, k);
        memcpy(val, &v, 8);
    }
    return row;
}

static inline uint64_t source_row(const copy_source *s, uint64_t k, unsigned d)
{
    if (s->in)
        return in_label(s->in, d, k);
    return amp_blco_field(s->c->keys ? s->c->keys[k] : 0, s->c->words[k], s->cl->shift[d],
                          s->cl->width[d]);
}

/* Copy 0's word to a later copy's, when both layouts fit 64 bits: each
 * field moved from its place in one to its place in the other, without
 * the general decode's per-field branches (which stood out in the
 * profile of the later copies, bench/RESULTS.md). */
typedef struct recoder {
    int ok;
    unsigned nmodes;
    uint8_t from[AMP_MAX_MODES], to[AMP_MAX_MODES];
    uint64_t mask[AMP_MAX_MODES];
} recoder;

static void recode_init(recoder *r, const copy_source *src, const amp_mode_layout *l)
{
    memset(r, 0, sizeof *r);
    if (src->in != NULL || src->cl->key_bits > 0 || l->key_bits > 0)
        return;
    /* Fields move, they are not resized: every copy's widths come from the
     * same dimensions. */
    for (unsigned m = 0; m < src->nmodes; m++)
        if (src->cl->width[m] != l->width[m])
            return;
    r->ok = 1;
    r->nmodes = src->nmodes;
    for (unsigned m = 0; m < src->nmodes; m++) {
        if (src->cl->width[m] == 0)
            continue;   /* mask 0: the field contributes nothing */
        r->from[m] = src->cl->shift[m];
        r->to[m] = l->shift[m];
        r->mask[m] = src->cl->width[m] >= 64 ? UINT64_MAX
                                              : (UINT64_C(1) << src->cl->width[m]) - 1;
    }
}

static inline uint64_t recode_row(const recoder *r, uint64_t w, unsigned d)
{
    return (w >> r->from[d]) & r->mask[d];
}

static inline uint64_t recode64(const recoder *r, uint64_t w)
{
    uint64_t out = 0;
    for (unsigned m = 0; m < r->nmodes; m++)
        out |= ((w >> r->from[m]) & r->mask[m]) << r->to[m];
    return out;
}

/* The scatter's destinations (see build_copy): bucket b is rows
 * [first[b], first[b + 1]); with `of` NULL every row is a bucket. */
typedef struct row_buckets {
    uint32_t *of;      /* rows entries: each row's bucket */
    uint64_t *first;   /* n + 1 entries */
    uint64_t n;
} row_buckets;

/* Most nonzeros in a bucket of several rows: its words, values and the
 * copy of them that ordering it takes (0.5 MiB at f64 without keys) stay
 * in a core's L2. Larger tensors get larger buckets, so that a thread's
 * cursors of the first step (two cache lines a bucket) stay in L2 too. */
#define BUCKET_NNZ 16384
#define BUCKETS_MAX 8192

static uint64_t bucket_nnz(uint64_t n)
{
    return n / BUCKETS_MAX > BUCKET_NNZ ? n / BUCKETS_MAX : BUCKET_NNZ;
}

static void buckets_free(row_buckets *b)
{
    free(b->of);
    free(b->first);
    b->of = NULL;
    b->first = NULL;
}

/* Consecutive rows into buckets of at most `most` nonzeros (and rows), a
 * heavier row alone. */
static amp_status group_rows(const uint64_t *rowptr, uint64_t rows, uint64_t most,
                             row_buckets *b, amp_error *err)
{
    b->n = 0;
    b->of = malloc((size_t)(rows ? rows : 1) * sizeof *b->of);
    b->first = malloc((size_t)(rows + 1) * sizeof *b->first);
    if (b->of == NULL || b->first == NULL) {
        buckets_free(b);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    for (uint64_t r = 0; r < rows;) {
        uint64_t e = r + 1;
        while (e < rows && e - r < most && rowptr[e + 1] - rowptr[r] <= most)
            e++;
        b->first[b->n] = r;
        for (uint64_t q = r; q < e; q++)
            b->of[q] = (uint32_t)b->n;
        b->n++;
        r = e;
    }
    b->first[b->n] = rows;
    /* Sized for one bucket per row; give back what the grouping saved. */
    uint64_t *fit = realloc(b->first, (size_t)(b->n + 1) * sizeof *fit);
    if (fit != NULL)
        b->first = fit;
    return AMP_OK;
}

/* The second step: each bucket of several rows, in place by row, stably.
 * Its nonzeros are copied to a per-thread buffer first; both stay cached. */
static amp_status order_buckets(mode_copy *c, const amp_mode_layout *l, unsigned d,
                                const uint64_t *rowptr, const row_buckets *B, uint64_t most,
                                positions *orig, amp_error *err)
{
    int T = amp_max_threads();
    size_t vs = c->vsize, kb = c->keys != NULL ? 8 : 0, ob = orig != NULL ? 8 : 0;
    /* Words, row cursors, keys, positions, values; whole cache lines a
     * thread, so the 8-byte arrays stay aligned and threads share no line. */
    size_t per_thread = ((size_t)most * (8 + 8 + kb + ob + vs) + 63) & ~(size_t)63;
    unsigned char *scratch = aligned_alloc(64, (size_t)T * per_thread);
    if (scratch == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the mode %u copy", d + 1);
    unsigned sh = l->shift[d], w = l->width[d];
    uint64_t *dw = c->words, *dk = c->keys;
    unsigned char *dv = c->vals;
#pragma omp parallel num_threads(T)
    {
        unsigned char *buf = scratch + (size_t)amp_thread_id() * per_thread;
        uint64_t *bw = (uint64_t *)buf, *at = bw + most, *bk = at + most;
        uint64_t *bo = bk + (kb ? most : 0);
        unsigned char *bv = (unsigned char *)(bo + (ob ? most : 0));
#pragma omp for schedule(dynamic, 4)
        for (uint64_t b = 0; b < B->n; b++) {
            uint64_t r0 = B->first[b], r1 = B->first[b + 1];
            if (r1 - r0 < 2)
                continue;
            uint64_t a = rowptr[r0], len = rowptr[r1] - a;
            memcpy(bw, dw + a, len * 8);
            if (dk != NULL)
                memcpy(bk, dk + a, len * 8);
            if (orig != NULL)
                for (uint64_t i = 0; i < len; i++)
                    bo[i] = pos_get(orig, a + i);
            memcpy(bv, dv + vs * a, len * vs);
            for (uint64_t r = r0; r < r1; r++)
                at[r - r0] = rowptr[r];
            for (uint64_t i = 0; i < len; i++) {
                uint64_t key = dk != NULL ? bk[i] : 0;
                uint64_t p = at[amp_blco_field(key, bw[i], sh, w) - r0]++;
                dw[p] = bw[i];
                if (dk != NULL)
                    dk[p] = key;
                if (orig != NULL)
                    pos_set(orig, p, bo[i]);
                if (vs == 8)
                    memcpy(dv + 8 * p, bv + 8 * i, 8);
                else
                    memcpy(dv + 4 * p, bv + 4 * i, 4);
            }
        }
    }
    free(scratch);
    return AMP_OK;
}

/* Build the mode-d copy from src into c. With release (the tensor src
 * reads), the tensor's arrays are freed on the way (see below). With c
 * NULL, only record in P where each nonzero of src (copy 0) lands.
 *
 * A stable counting scatter in two steps. A one-step scatter keeps a
 * cursor per row and thread: at 16 threads and 100 k rows that is
 * millions of cache lines being filled at once, and nearly every store
 * missed (measured on the later copies of cpu20m, bench/RESULTS.md).
 * So the copy is first scattered to buckets of consecutive rows (a few
 * thousand cursors a thread), then each bucket is ordered by row inside
 * the cache: the same bytes. The positions for remap streams still come
 * from one step, each row its own bucket. */
static amp_status build_copy(const copy_source *src, unsigned d, const amp_mode_layout *l,
                             const uint64_t *rowptr, uint64_t rows, amp_value_type vt,
                             amp_coo *release, mode_copy *c, positions *P,
                             const fiber_sketch *sk, amp_error *err)
{
    uint64_t n = src->n;
    mode_copy none = {0};
    if (c == NULL) {
        c = &none;
        (void)none;
    } else if (c->words != NULL && c->n == n && c->vsize == amp_value_size(vt) &&
               (c->keys != NULL) == (l->key_bits > 0)) {
        /* The arrays of the copy before, reused: every entry is written
         * below, and fresh pages would cost the kernel a zeroing each. */
        c->rows_reordered = 0;
    } else {
        copy_free(c);
        c->n = n;
        c->vsize = amp_value_size(vt);
        c->words = amp_huge_alloc(n * 8, "the mode copy's indices", err);
        c->vals = amp_huge_alloc(n * c->vsize, "the mode copy's values", err);
        if (l->key_bits > 0)
            c->keys = amp_huge_alloc(n * 8, "the mode copy's block keys", err);
    }
    int write = c != &none;
    size_t vs = c->vsize;
    uint64_t most = bucket_nnz(n);
    row_buckets B = {NULL, NULL, rows};
    uint64_t *pos = NULL;
    amp_status rc = AMP_OK;
    if (write && (c->words == NULL || c->vals == NULL || (l->key_bits > 0 && c->keys == NULL)))
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for the mode %u copy",
                       d + 1);
    if (write && rows <= UINT32_MAX)   /* bucket numbers below rows fit 32 bits */
        AMP_CHECK_GOTO(group_rows(rowptr, rows, most, &B, err), rc, fail);
    /* Each thread scatters a contiguous, in-order share of the nonzeros
     * with its own cursor per bucket, the cursors placed so thread t's
     * entries of a bucket follow those of threads before it: the same
     * stable order for any thread count. The cursors cost threads x
     * buckets words; beyond a budget (very many rows, each its own
     * bucket), fewer threads share the work. */
    int nt = amp_max_threads();
    uint64_t nb = B.n ? B.n : 1;
    uint64_t budget = n * 8 > (UINT64_C(64) << 20) ? n * 8 : (UINT64_C(64) << 20);
    while (nt > 1 && (uint64_t)nt * nb * 8 > budget)
        nt /= 2;
    pos = calloc((size_t)nt * nb, sizeof *pos);
    if (pos == NULL)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for the mode %u copy",
                       d + 1);
    recoder rc64;
    recode_init(&rc64, src, l);
    const uint32_t *of = B.of;
    /* A caller's arrays are read with their repeats, which are skipped. */
    const build_input *skip = src->in != NULL && src->in->t == NULL ? src->in : NULL;
    const uint64_t span = skip != NULL ? skip->span : n;
    positions *orig = skip != NULL && skip->orig.p != NULL ? (positions *)&skip->orig : NULL;
#define BUCKET(row) (of != NULL ? (uint64_t)of[row] : (row))
#pragma omp parallel num_threads(nt)
    {
        /* Contiguous shares in thread order: what keeps the scatter stable. */
        int tid, T;
        uint64_t lo, hi;
        amp_thread_range(span, &tid, &T, &lo, &hi);
        uint64_t *mine = pos + (size_t)tid * B.n;
        if (rc64.ok) {
            const uint64_t *sw = src->c->words;
            for (uint64_t k = lo; k < hi; k++)
                mine[BUCKET(recode_row(&rc64, sw[k], d))]++;
        } else {
            for (uint64_t k = lo; k < hi; k++)
                if (skip == NULL || !in_dropped(skip, k))
                    mine[BUCKET(source_row(src, k, d))]++;
        }
#pragma omp barrier
#pragma omp for schedule(static)
        for (uint64_t b = 0; b < B.n; b++) {
            uint64_t at = rowptr[of != NULL ? B.first[b] : b];
            for (int q = 0; q < T; q++) {
                uint64_t cnt = pos[(size_t)q * B.n + b];
                pos[(size_t)q * B.n + b] = at;
                at += cnt;
            }
        }
        if (!write) {
            for (uint64_t k = lo; k < hi; k++)
                pos_set(P, k, mine[source_row(src, k, d)]++);
        } else if (rc64.ok) {
            const uint64_t *sw = src->c->words;
            const unsigned char *sv = src->c->vals;
            uint64_t *dw = c->words;
            unsigned char *dv = c->vals;
            for (uint64_t k = lo; k < hi; k++) {
                uint64_t w = sw[k];
                uint64_t p = mine[BUCKET(recode_row(&rc64, w, d))]++;
                dw[p] = recode64(&rc64, w);
                if (vs == 8)
                    memcpy(dv + 8 * p, sv + 8 * k, 8);
                else
                    memcpy(dv + 4 * p, sv + 4 * k, 4);
            }
        } else if (release == NULL) {
            for (uint64_t k = lo; k < hi; k++) {
                if (skip != NULL && in_dropped(skip, k))
                    continue;
                uint64_t key, word;
                unsigned char val[8];
                uint64_t row = source_encode(src, k, d, l, vt, &key, &word, val);
                if (sk != NULL)
                    sketch_add(sk, tid, l, key, word);
                uint64_t p = mine[BUCKET(row)]++;
                if (orig != NULL)
                    pos_set(orig, p, k);
                c->words[p] = word;
                if (c->keys != NULL)
                    c->keys[p] = key;
                memcpy(c->vals + vs * p, val, vs);
            }
        } else {
            /* From the tensor, in two passes over the same cursors, so that
             * its values are freed before the words are written: the peak
             * is the tensor plus half a copy, not plus a whole one. */
            const amp_coo *t = src->in->t;
            for (uint64_t k = lo; k < hi; k++) {
                uint64_t p = mine[BUCKET(t->ind[d][k])]++;
                if (vt == AMP_VALUES_F32) {
                    float v = (float)t->val[k];
                    memcpy(c->vals + 4 * p, &v, 4);
                } else {
                    memcpy(c->vals + 8 * p, &t->val[k], 8);
                }
            }
            for (uint64_t k = lo; k < hi; k++)
                mine[BUCKET(t->ind[d][k])]--;
#pragma omp barrier
#pragma omp single
            {
                amp_huge_free(release->val, (size_t)release->cap * 8);
                release->val = NULL;
            }
            for (uint64_t k = lo; k < hi; k++) {
                uint64_t key = 0, word = 0;
                for (unsigned m = 0; m < t->nmodes; m++)
                    blco_place(t->ind[m][k], l->shift[m], l->width[m], &key, &word);
                if (sk != NULL)
                    sketch_add(sk, tid, l, key, word);
                uint64_t p = mine[BUCKET(t->ind[d][k])]++;
                c->words[p] = word;
                if (c->keys != NULL)
                    c->keys[p] = key;
            }
        }
    }
#undef BUCKET
    free(pos);
    pos = NULL;
    if (release != NULL)
        amp_coo_release(release);
    if (B.of != NULL && B.n < rows)
        AMP_CHECK_GOTO(order_buckets(c, l, d, rowptr, &B, most, orig, err), rc, fail);
    if (write && l->key_bits > l->width[d])
        AMP_CHECK_GOTO(sort_rows_by_key(c, rowptr, rows, err), rc, fail);
    buckets_free(&B);
    return AMP_OK;
fail:
    free(pos);
    buckets_free(&B);
    copy_free(c);
    return rc;
}

/* Build the mode-d copy, from t (d = 0; t's arrays are released as soon as
 * the copy exists, and the copy is kept in *keep with its layout) or from
 * copy 0, then cut it into chunks and write them. */
static uint64_t *row_starts(const mode_plan *p)
{
    uint64_t *rowptr = malloc((size_t)(p->compact_dim + 1) * sizeof *rowptr);
    if (rowptr == NULL)
        return NULL;
    rowptr[0] = 0;
    for (uint64_t r = 0; r < p->compact_dim; r++)
        rowptr[r + 1] = rowptr[r] + p->row_nnz[r];
    return rowptr;
}

/* Where every nonzero of copy 0 lands in each later copy: what the remap
 * streams are made of. */
static amp_status remap_positions(const build_input *t, const mode_copy *copy0,
                                  const amp_mode_layout *l0, const mode_plan *plans,
                                  amp_value_type vt, positions *P, amp_error *err)
{
    copy_source src = {NULL, copy0, l0, t->nmodes, t->nnz};
    for (unsigned dd = 1; dd < t->nmodes; dd++) {
        amp_mode_layout l;
        AMP_CHECK(amp_blco_layout(&l, t->nmodes, t->dims, dd, err));
        uint64_t *rowptr = row_starts(&plans[dd]);
        if (rowptr == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        amp_status rc = build_copy(&src, dd, &l, rowptr, plans[dd].compact_dim, vt, NULL, NULL,
                                   &P[dd], NULL, err);
        free(rowptr);
        AMP_CHECK(rc);
    }
    return AMP_OK;
}

/* The remap streams of copy d, one section beside each chunk: for each
 * nonzero, its position in the copy of mode (d + 1) % nmodes. */
static amp_status write_remap(amp_writer *w, const build_input *t, unsigned d, const positions *P,
                              const amp_chunk_job *jobs, const uint64_t *start, size_t njobs,
                              amp_error *err)
{
    uint64_t n = t->nnz;
    unsigned next = (d + 1) % t->nmodes, width = P[1].width;
    positions R = {amp_huge_alloc(n * width, "a remap stream", err), width};
    if (R.p == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for a remap stream");
#pragma omp parallel for schedule(static)
    for (uint64_t k = 0; k < n; k++)
        pos_set(&R, d == 0 ? k : pos_get(&P[d], k), next == 0 ? k : pos_get(&P[next], k));
    amp_status rc = AMP_OK;
    for (size_t j = 0; j < njobs && rc == AMP_OK; j++) {
        amp_section desc = {.type = AMP_SECTION_REMAP,
                            .flags = AMP_SECTION_OPTIONAL | AMP_SECTION_ZSTD, .mode = d,
                            .shard = jobs[j].shard, .seq = jobs[j].seq, .count = jobs[j].count,
                            .aux = width};
        rc = amp_writer_section(w, &desc, (unsigned char *)R.p + start[j] * width,
                                (size_t)jobs[j].count * width, err);
    }
    amp_huge_free(R.p, n * width);
    return rc;
}

/* ---- relabellings packed beside the copies ------------------------------- */

/* The relabel sections, compressed on a thread of their own while the
 * copies are ordered and written: a mode of millions of slices otherwise
 * spent a measurable time in zstd on one thread between its copy's order
 * and its chunks, with every other core idle (rd100m, bench/RESULTS.md).
 * Packed in mode order; write_copy takes each when its turn comes. */
typedef struct relabel_packer {
    const amp_writer *w;
    const mode_plan *plans;
    unsigned nmodes;
    int running;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t ready;
    unsigned tried;                   /* modes [0, tried) packed or failed */
    int stop;
    amp_packed *packed[AMP_MAX_MODES];
    amp_error err;                    /* the failure, when one ended the packing */
} relabel_packer;

static void *pack_relabels(void *arg)
{
    relabel_packer *pk = arg;
    for (unsigned d = 0; d < pk->nmodes; d++) {
        pthread_mutex_lock(&pk->mu);
        int stop = pk->stop;
        pthread_mutex_unlock(&pk->mu);
        if (stop)
            break;
        amp_packed *p = NULL;
        amp_error e = {0};
        amp_status rc = amp_writer_pack_relabel(pk->w, d, pk->plans[d].new_to_orig, &p, &e);
        pthread_mutex_lock(&pk->mu);
        pk->packed[d] = p;
        if (rc != AMP_OK)
            pk->err = e;
        pk->tried = rc == AMP_OK ? d + 1 : pk->nmodes;
        pthread_cond_broadcast(&pk->ready);
        pthread_mutex_unlock(&pk->mu);
        if (rc != AMP_OK)
            break;
    }
    return NULL;
}

/* Start packing; without a thread write_copy packs each itself. */
static void packer_start(relabel_packer *pk, const amp_writer *w, const mode_plan *plans,
                         unsigned nmodes)
{
    memset(pk, 0, sizeof *pk);
    pk->w = w;
    pk->plans = plans;
    pk->nmodes = nmodes;
    /* One thread asked for: no second one doing the work. */
    if (amp_max_threads() < 2 || pthread_mutex_init(&pk->mu, NULL) != 0)
        return;
    if (pthread_cond_init(&pk->ready, NULL) != 0) {
        pthread_mutex_destroy(&pk->mu);
        return;
    }
    pk->running = pthread_create(&pk->thread, NULL, pack_relabels, pk) == 0;
    if (!pk->running) {
        pthread_cond_destroy(&pk->ready);
        pthread_mutex_destroy(&pk->mu);
    }
}

/* Mode d's relabel section into the file, packed ahead or now. */
static amp_status put_relabel(relabel_packer *pk, amp_writer *w, unsigned d,
                              const uint64_t *new_to_orig, amp_error *err)
{
    if (!pk->running)
        return amp_writer_relabel(w, d, new_to_orig, err);
    pthread_mutex_lock(&pk->mu);
    while (pk->tried <= d)
        pthread_cond_wait(&pk->ready, &pk->mu);
    amp_packed *p = pk->packed[d];
    pk->packed[d] = NULL;
    amp_error e = pk->err;
    pthread_mutex_unlock(&pk->mu);
    if (p == NULL)
        return amp_error_set(err, e.status, e.src_file, e.src_line, "%s", e.msg);
    return amp_writer_put(w, p, err);
}

/* Stop and join the thread (before the writer goes), and free what was
 * packed and not taken. */
static void packer_finish(relabel_packer *pk)
{
    if (!pk->running)
        return;
    pthread_mutex_lock(&pk->mu);
    pk->stop = 1;
    pthread_mutex_unlock(&pk->mu);
    pthread_join(pk->thread, NULL);
    for (unsigned d = 0; d < pk->nmodes; d++)
        amp_packed_free(pk->packed[d]);
    pthread_cond_destroy(&pk->ready);
    pthread_mutex_destroy(&pk->mu);
    pk->running = 0;
}

/* ---- later copies of a caller's arrays, gathered ------------------------- */

/* A later copy of a caller's arrays is not built beside copy 0: only each
 * of its nonzeros' position in copy 0, in the copy's order (4 bytes a
 * nonzero, 8 beyond 2^32), and each chunk's words and values gathered
 * from copy 0 as the writer's threads compress it. The bytes are the
 * built copy's (the same stable order); the peak is copy 0 and the
 * positions, not two copies: the caller's arrays stay beside the build
 * (from_coo), so the second copy is what would have pushed the peak past
 * one copy of the coordinates. Random reads of copy 0 cost some of the
 * time amped-prep's sequential scatter saves (bench/RESULTS.md). */
typedef struct gathered {
    const mode_copy *c0;
    const build_input *in;       /* the values from its arrays, at in->orig (c0's gone) */
    recoder rc;
    positions q;                 /* n positions in copy 0, in the copy's order */
    unsigned char *buf;          /* nbuf x per_thread: a chunk's words, then its values */
    size_t per_thread, vsize;
    uint64_t chunk_nnz;
    int nbuf;
    const uint64_t *start;       /* per job: its first position */
    const amp_chunk_job *jobs;
} gathered;

static void gathered_free(gathered *g)
{
    amp_huge_free(g->q.p, (size_t)(g->c0 ? g->c0->n : 0) * g->q.width);
    free(g->buf);
    memset(g, 0, sizeof *g);
}

/* The order of mode d's copy as positions in copy 0: a stable counting
 * scatter over copy 0 by row, one cursor a row and thread. */
static amp_status gather_order(gathered *g, const mode_copy *c0, const amp_mode_layout *l0,
                               const amp_mode_layout *l, unsigned d, const uint64_t *rowptr,
                               uint64_t rows, uint64_t chunk_nnz, amp_error *err)
{
    const uint64_t n = c0->n;
    memset(g, 0, sizeof *g);
    g->c0 = c0;
    copy_source src = {NULL, c0, l0, l0->nmodes, n};
    recode_init(&g->rc, &src, l);
    if (!g->rc.ok)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "mode %u: no gathered copy of this layout", d + 1);
    g->q.width = n <= UINT32_MAX ? 4 : 8;
    g->q.p = amp_huge_alloc(n * g->q.width, "the mode copy's order", err);
    g->vsize = c0->vsize;
    g->chunk_nnz = chunk_nnz < n ? chunk_nnz : n;
    g->per_thread = ((size_t)g->chunk_nnz * (8 + g->vsize) + 63) & ~(size_t)63;
    g->nbuf = amp_max_threads();
    g->buf = malloc((size_t)g->nbuf * g->per_thread);
    int nt = amp_max_threads();
    uint64_t budget = n * 8 > (UINT64_C(64) << 20) ? n * 8 : (UINT64_C(64) << 20);
    while (nt > 1 && (uint64_t)nt * (rows ? rows : 1) * 8 > budget)
        nt /= 2;
    uint64_t *pos = calloc((size_t)nt * (rows ? rows : 1), sizeof *pos);
    if (g->q.p == NULL || g->buf == NULL || pos == NULL) {
        free(pos);
        gathered_free(g);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the mode %u copy", d + 1);
    }
    const uint64_t *sw = c0->words;
    const recoder *rc = &g->rc;
    positions *q = &g->q;
#pragma omp parallel num_threads(nt)
    {
        int tid, T;
        uint64_t lo, hi;
        amp_thread_range(n, &tid, &T, &lo, &hi);
        uint64_t *mine = pos + (size_t)tid * rows;
        for (uint64_t k = lo; k < hi; k++)
            mine[recode_row(rc, sw[k], d)]++;
#pragma omp barrier
#pragma omp for schedule(static)
        for (uint64_t r = 0; r < rows; r++) {
            uint64_t at = rowptr[r];
            for (int t = 0; t < T; t++) {
                uint64_t cnt = pos[(size_t)t * rows + r];
                pos[(size_t)t * rows + r] = at;
                at += cnt;
            }
        }
        for (uint64_t k = lo; k < hi; k++)
            pos_set(q, mine[recode_row(rc, sw[k], d)]++, k);
    }
    free(pos);
    return AMP_OK;
}

/* A nonzero of a gathered row: its index in the middle mode and its place
 * in the row; by index, then place (stable). */
typedef struct mid_place {
    uint64_t mid, place;
} mid_place;

static int by_mid_place(const void *a, const void *b)
{
    const mid_place *x = a, *y = b;
    if (x->mid != y->mid)
        return x->mid < y->mid ? -1 : 1;
    return x->place < y->place ? -1 : x->place > y->place;
}

/* order_fibers for a gathered copy: its rows, as positions in copy 0
 * (g->q), put in fiber order by copy 0's words, the same stable order
 * order_fibers gives a copy held whole; each row's fibers into fibers[r]. */
static amp_status order_gathered_fibers(gathered *g, const amp_mode_layout *l0, unsigned m,
                                        const uint64_t *rowptr, uint64_t rows, int sort,
                                        uint64_t *fibers, amp_error *err)
{
    const unsigned sh = l0->shift[m], wd = l0->width[m];
    const uint64_t *sw = g->c0->words;
    positions *q = &g->q;
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        uint64_t *pk = NULL, pcap = 0;
#pragma omp for schedule(dynamic, 1024)
        for (uint64_t r = 0; r < rows; r++) {
            const uint64_t a = rowptr[r], len = rowptr[r + 1] - a;
            int in_order = 1;
            for (uint64_t i = a + 1; i < a + len && in_order; i++)
                in_order = amp_blco_field(0, sw[pos_get(q, i - 1)], sh, wd) <=
                           amp_blco_field(0, sw[pos_get(q, i)], sh, wd);
            if (!in_order && sort && !failed) {
                unsigned lbits = bits_of(len);
                if (!row_scratch(&pk, &pcap, len)) {
                    failed = 1;
                    continue;
                }
                uint64_t *tmp2 = pk + len, *save = pk + 2 * len;
                if (wd + lbits <= 64) {
                    for (uint64_t i = 0; i < len; i++)
                        pk[i] = amp_blco_field(0, sw[pos_get(q, a + i)], sh, wd) << lbits | i;
                    sort_high(pk, tmp2, len, lbits, wd);
                } else {
                    /* Too wide to pack (index m's bits and the row's
                     * length over 64): (index, place) pairs in pk and tmp2,
                     * sorted, the places then read out into pk (pair i
                     * lies at 2 i and after, so pk[i] overwrites none not
                     * yet read). Not an insertion sort: a long row of a
                     * wide mode would take its length squared. */
                    mid_place *fi = (mid_place *)pk;
                    for (uint64_t i = 0; i < len; i++)
                        fi[i] = (mid_place){amp_blco_field(0, sw[pos_get(q, a + i)], sh, wd), i};
                    qsort(fi, len, sizeof *fi, by_mid_place);
                    for (uint64_t i = 0; i < len; i++)
                        pk[i] = fi[i].place;
                    lbits = 64;
                }
                const uint64_t low = lbits >= 64 ? UINT64_MAX : (UINT64_C(1) << lbits) - 1;
                for (uint64_t i = 0; i < len; i++)
                    save[i] = pos_get(q, a + i);
                for (uint64_t i = 0; i < len; i++)
                    pos_set(q, a + i, save[pk[i] & low]);
            }
            uint64_t runs = len > 0;
            for (uint64_t i = a + 1; i < a + len; i++)
                runs += amp_blco_field(0, sw[pos_get(q, i - 1)], sh, wd) !=
                        amp_blco_field(0, sw[pos_get(q, i)], sh, wd);
            fibers[r] = runs;
        }
        free(pk);
    }
    if (failed)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for ordering a mode copy's fibers");
    return AMP_OK;
}

/* A chunk of a gathered copy, into the calling writer thread's buffer
 * (each thread views one chunk at a time, and compresses it before the
 * next). */
/* The gathers are random reads: copy 0's word and value of each nonzero
 * (or its value in the caller's arrays, through its position there, a
 * read that depends on another). Each nonzero's lines are asked for
 * GATHER_AHEAD nonzeros before it is taken (its position's line twice as
 * far), so that the loop has many misses in flight instead of one at a
 * time. */
#define GATHER_AHEAD 16

static amp_status view_gathered(void *ctxp, size_t job, const uint64_t **words,
                                const void **vals, amp_error *err)
{
    const gathered *g = ctxp;
    int id = amp_thread_id();
    uint64_t at = g->start[job], count = g->jobs[job].count;
    if (id >= g->nbuf || count > g->chunk_nnz)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "writer thread %d of %d, chunk of %llu", id,
                        g->nbuf, (unsigned long long)count);
    uint64_t *w = (uint64_t *)(g->buf + (size_t)id * g->per_thread);
    unsigned char *v = (unsigned char *)(w + g->chunk_nnz);
    const uint64_t *sw = g->c0->words;
    const unsigned char *sv = g->c0->vals;
    const size_t vs = g->vsize;
    if (sv != NULL) {
        for (uint64_t i = 0; i < count; i++) {
            if (i + GATHER_AHEAD < count) {
                const uint64_t kp = pos_get(&g->q, at + i + GATHER_AHEAD);
                __builtin_prefetch(sw + kp);
                __builtin_prefetch(sv + vs * kp);
            }
            uint64_t k = pos_get(&g->q, at + i);
            w[i] = recode64(&g->rc, sw[k]);
            memcpy(v + vs * i, sv + vs * k, vs);
        }
    } else {
        const build_input *in = g->in;
        const unsigned char *op = in->orig.p;
        const size_t ow = in->orig.width;
        for (uint64_t i = 0; i < count; i++) {
            if (i + 2 * GATHER_AHEAD < count) {
                const uint64_t kp = pos_get(&g->q, at + i + 2 * GATHER_AHEAD);
                __builtin_prefetch(sw + kp);
                __builtin_prefetch(op + ow * kp);
            }
            if (i + GATHER_AHEAD < count) {
                const double *va =
                    in_val_at(in, pos_get(&in->orig, pos_get(&g->q, at + i + GATHER_AHEAD)));
                if (va != NULL)
                    __builtin_prefetch(va);
            }
            uint64_t k = pos_get(&g->q, at + i);
            w[i] = recode64(&g->rc, sw[k]);
            double x = in_val(in, pos_get(&in->orig, k));
            if (vs == 8) {
                memcpy(v + 8 * i, &x, 8);
            } else {
                float f = (float)x;
                memcpy(v + 4 * i, &f, 4);
            }
        }
    }
    *words = w;
    *vals = v;
    return AMP_OK;
}

static amp_status write_copy(amp_writer *w, relabel_packer *pk, build_input *t, mode_copy *copy0,
                             amp_mode_layout *l0, mode_copy *later, unsigned d, mode_plan *p,
                             const mode_plan *plans, positions *P,
                             uint64_t chunk_nnz, amp_value_type vt, amp_build_mode_report *rep,
                             uint64_t *shard_nnz, amp_build_report *times, build_progress *bp,
                             amp_error *err)
{
    double t0 = amp_now();
    progress_at(bp, "order", d, t->nmodes);
    uint64_t c = p->compact_dim;
    amp_mode_layout l;
    uint64_t *rowptr = NULL, *start = NULL;
    amp_chunk_job *jobs = NULL;
    mode_copy *copy = d == 0 ? copy0 : later;   /* later copies share one set of arrays */
    gathered g;
    memset(&g, 0, sizeof g);
    amp_status rc = AMP_OK;
    /* Fibers need 3 modes (at 2, every (row, other index) pair is one
     * nonzero); per row, then per shard. */
    uint64_t *fibers = NULL, *shard_fibers = NULL;
    fiber_sketch sk = {t->nmodes, t->nmodes * (t->nmodes - 1) / 2, amp_max_threads(), NULL};
    size_t sk_bytes = (size_t)sk.threads * sk.npairs * HLL_REGS;
    if (t->nmodes >= 3) {
        fibers = malloc((size_t)(c + 1) * sizeof *fibers);
        shard_fibers = malloc((size_t)p->nshards * sizeof *shard_fibers);
        if (fibers == NULL || shard_fibers == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for the mode %u "
                           "copy's fibers", d + 1);
        if (d == 0) {
            sk.regs = amp_huge_alloc(sk_bytes, "fiber sketches", err);
            if (sk.regs == NULL)
                AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for fiber sketches");
            memset(sk.regs, 0, sk_bytes);
        }
    }
    /* t->dims are the compact dimensions while the copies are written. */
    AMP_CHECK(amp_blco_layout(&l, t->nmodes, t->dims, d, err));
    l.chunk_nnz = chunk_nnz;
    l.nshards = p->nshards;
    l.shards = p->shards;

    rowptr = malloc((size_t)(c + 1) * sizeof *rowptr);
    if (rowptr == NULL)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for the mode %u copy",
                       d + 1);
    rowptr[0] = 0;
    for (uint64_t r = 0; r < c; r++)
        rowptr[r + 1] = rowptr[r] + p->row_nnz[r];
    /* A caller's arrays: later copies gathered from copy 0 (see gathered),
     * their values from the arrays (copy 0 keeps each nonzero's position in
     * them, and drops its values once its own chunks are written). */
    const int gather = d > 0 && t->t == NULL && P == NULL && l.key_bits == 0 &&
                       l0->key_bits == 0;
    if (d == 0 && t->t == NULL && P == NULL && l.key_bits == 0 && t->nmodes > 1) {
        t->orig.width = t->span <= UINT32_MAX ? 4 : 8;
        t->orig.p = amp_huge_alloc(t->nnz * t->orig.width, "the nonzeros' positions", err);
        if (t->orig.p == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for the mode 1 copy");
    }
    copy_source src = {d == 0 ? t : NULL, copy0, l0, t->nmodes, t->nnz};
    if (gather) {
        AMP_CHECK_GOTO(gather_order(&g, copy0, l0, &l, d, rowptr, c, chunk_nnz, err), rc, fail);
        g.in = t;
    }
    else
        AMP_CHECK_GOTO(build_copy(&src, d, &l, rowptr, c, vt, d == 0 ? t->t : NULL, copy, NULL,
                                  d == 0 && sk.regs != NULL ? &sk : NULL, err), rc, fail);
    if (d == 0 && sk.regs != NULL) {
        choose_middles(&sk, t->middle);
        amp_huge_free(sk.regs, sk_bytes);
        sk.regs = NULL;
    }
    /* The fiber order: copy 0's rows sorted by their middle mode; a later
     * copy's rows come from copy 0 in mode 1's order, and are sorted only
     * for another middle mode, where nothing depends on the scatter's
     * order (remap streams do). A gathered copy's order (its positions in
     * copy 0) is sorted the same way, so that a caller's arrays give
     * amped-prep's bytes. */
    if (fibers != NULL) {
        if (d > 0 && P != NULL)
            t->middle[d] = 0;
        const int sort = d == 0 || t->middle[d] != 0;
        if (gather)
            AMP_CHECK_GOTO(order_gathered_fibers(&g, l0, t->middle[d], rowptr, c, sort, fibers,
                                                 err), rc, fail);
        else
            AMP_CHECK_GOTO(order_fibers(copy, &l, t->middle[d], rowptr, c, sort,
                                        d == 0 && t->orig.p != NULL ? &t->orig : NULL,
                                        fibers, err), rc, fail);
        for (uint32_t s = 0; s < p->nshards; s++) {
            shard_fibers[s] = 0;
            for (uint64_t r = p->shards[s].index_begin; r < p->shards[s].index_end; r++)
                shard_fibers[s] += fibers[r];
        }
    }
    /* The remap positions come from the scatter alone (see
     * sort_rows_by_key): a later copy that needed reordering is a bug. */
    if (d > 0 && P != NULL && copy->rows_reordered > 0)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_INTERNAL, "mode %u copy: %llu rows were not in "
                       "block-key order after the scatter; the remap streams would not follow "
                       "them", d + 1, (unsigned long long)copy->rows_reordered);
    if (d == 0)
        *l0 = l;
    if (d == 0 && P != NULL)
        AMP_CHECK_GOTO(remap_positions(t, copy0, l0, plans, vt, P, err), rc, fail);
    /* The last copy is the last one built from copy 0: without it the
     * chunks of that copy are written beside one copy, not two (with 16
     * compressing threads this was where the peak was). */
    if (d > 0 && d + 1 == t->nmodes && !gather)
        copy_free(copy0);

    /* Chunks: at most chunk_nnz nonzeros, never across shards or keys. */
    size_t njobs = 0, cap = 0;
    uint64_t max_nnz = 0;
    for (uint32_t s = 0; s < p->nshards; s++) {
        uint64_t a = rowptr[p->shards[s].index_begin], end = rowptr[p->shards[s].index_end];
        uint32_t seq = 0;
        if (p->shards[s].nnz > max_nnz)
            max_nnz = p->shards[s].nnz;
        while (a < end) {
            uint64_t key = copy->keys ? copy->keys[a] : 0;
            uint64_t b = end - a < chunk_nnz ? end : a + chunk_nnz;
            if (copy->keys != NULL) {
                uint64_t e = a + 1;
                while (e < b && copy->keys[e] == key)
                    e++;
                b = e;
            }
            if (njobs == cap) {
                cap = cap ? 2 * cap : 256;
                amp_chunk_job *nj = realloc(jobs, cap * sizeof *nj);
                uint64_t *ns = realloc(start, cap * sizeof *ns);
                if (nj)
                    jobs = nj;
                if (ns)
                    start = ns;
                if (nj == NULL || ns == NULL)
                    AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
            }
            jobs[njobs] = (amp_chunk_job){d, s, seq++, b - a, key};
            start[njobs++] = a;
            a = b;
        }
        p->shards[s].nchunks = seq;
    }
    times->seconds_sort += amp_now() - t0;
    progress_at(bp, "order", d + 1, t->nmodes);
    /* At once, not at the first chunk: that one waits for a whole round of
     * compression on every thread. */
    progress_at(bp, "chunks", bp->written, bp->total);
    t0 = amp_now();
    AMP_CHECK_GOTO(amp_writer_mode(w, &l, err), rc, fail);
    if (fibers != NULL)
        AMP_CHECK_GOTO(amp_writer_fibers(w, d, t->middle[d], shard_fibers, err), rc, fail);
    AMP_CHECK_GOTO(put_relabel(pk, w, d, p->new_to_orig, err), rc, fail);
    copy_ctx ctx = {copy, start, jobs};
    g.start = start;
    g.jobs = jobs;
    AMP_CHECK_GOTO(amp_writer_chunks(w, jobs, njobs, gather ? view_gathered : view_chunk,
                                     gather ? (void *)&g : (void *)&ctx, err), rc, fail);
    if (gather) {
        gathered_free(&g);
        if (d + 1 == t->nmodes)
            copy_free(copy0);
    }
    if (d == 0 && t->orig.p != NULL) {
        amp_huge_free(copy0->vals, copy0->n * copy0->vsize);
        copy0->vals = NULL;
    }
    if (P != NULL)
        AMP_CHECK_GOTO(write_remap(w, t, d, P, jobs, start, njobs, err), rc, fail);
    times->seconds_chunks += amp_now() - t0;
    if (shard_nnz != NULL)
        for (uint32_t s = 0; s < p->nshards; s++)
            shard_nnz[s] = p->shards[s].nnz;
    rep->compact_dim = c;
    rep->nshards = p->nshards;
    rep->max_shard_nnz = max_nnz;
    rep->nchunks = njobs;
    rep->max_degree = 0;
    for (uint64_t r = 0; r < c; r++)
        if (p->row_nnz[r] > rep->max_degree)
            rep->max_degree = p->row_nnz[r];
fail:
    gathered_free(&g);
    free(rowptr);
    free(jobs);
    free(start);
    free(fibers);
    free(shard_fibers);
    amp_huge_free(sk.regs, sk_bytes);
    return rc;
}

/* ---- values -------------------------------------------------------------- */

/* Sums over fixed blocks, added in block order: the same bits for any
 * thread count. */
#define SUM_BLOCK 65536

static amp_status value_summary(const build_input *in, amp_value_choice choice,
                                amp_value_type *vt, uint64_t *changed, double *norm_sq,
                                amp_error *err)
{
    uint64_t n = in->nnz, nblocks = (n + SUM_BLOCK - 1) / SUM_BLOCK, inexact = 0, huge = 0;
    double *part = malloc((size_t)(nblocks ? nblocks : 1) * sizeof *part);
    if (part == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    /* Blocks of the nonzeros built (repeats skipped), so that the sums are
     * those of the tensor amped-prep builds from the same nonzeros. */
#pragma omp parallel for schedule(static) reduction(+ : inexact, huge)
    for (uint64_t b = 0; b < nblocks; b++) {
        uint64_t left = (b + 1) * SUM_BLOCK < n ? SUM_BLOCK : n - b * SUM_BLOCK;
        for (uint64_t k = in_position(in, b * SUM_BLOCK); left > 0; k++) {
            if (in_dropped(in, k))
                continue;
            double x = in_val(in, k);
            float f = (float)x;
            inexact += (double)f != x;
            huge += !isfinite(f);
            left--;
        }
    }
    *vt = choice == AMP_VALUE_F64 || (choice == AMP_VALUE_AUTO && inexact > 0) ? AMP_VALUES_F64
                                                                               : AMP_VALUES_F32;
    *changed = *vt == AMP_VALUES_F32 ? inexact : 0;
    if (*vt == AMP_VALUES_F32 && huge > 0) {
        free(part);
        return AMP_FAIL(err, AMP_ERR_RANGE, "%llu values are beyond the range of f32; store "
                        "them as f64", (unsigned long long)huge);
    }
    int f32 = *vt == AMP_VALUES_F32;
#pragma omp parallel for schedule(static)
    for (uint64_t b = 0; b < nblocks; b++) {
        uint64_t left = (b + 1) * SUM_BLOCK < n ? SUM_BLOCK : n - b * SUM_BLOCK;
        double s = 0;
        for (uint64_t k = in_position(in, b * SUM_BLOCK); left > 0; k++) {
            if (in_dropped(in, k))
                continue;
            double x = in_val(in, k);
            double v = f32 ? (double)(float)x : x;
            s += v * v;
            left--;
        }
        part[b] = s;
    }
    double total = 0;
    for (uint64_t b = 0; b < nblocks; b++)
        total += part[b];
    free(part);
    /* Kept repeats are one entry of the tensor the MTTKRP sees (their
     * values add), so its norm squares their sum. */
    if (in->t != NULL && !in->t->unique) {
        double delta;
        AMP_CHECK(amp_coo_repeat_norm_sq(in->t, f32, &delta, err));
        total += delta;
    }
    if (!isfinite(total))
        return AMP_FAIL(err, AMP_ERR_RANGE, "the sum of the squared values overflows double "
                        "precision (values near 1e154 or larger); scale the tensor down");
    *norm_sq = total;
    return AMP_OK;
}

static amp_status build_write(build_input *t, const char *path, const amp_build_opts *opts,
                              amp_build_report *report, amp_error *err)
{
    amp_build_opts o;
    if (opts == NULL)
        amp_build_opts_init(&o);
    else
        o = *opts;
    amp_build_report rep;
    memset(&rep, 0, sizeof rep);
    mode_plan plans[AMP_MAX_MODES];
    memset(plans, 0, sizeof plans);
    mode_copy copy0 = {0}, later = {0};
    positions remap_pos[AMP_MAX_MODES];
    memset(remap_pos, 0, sizeof remap_pos);
    amp_mode_layout layout0;
    memset(&layout0, 0, sizeof layout0);
    amp_writer *w = NULL;
    relabel_packer packer;
    memset(&packer, 0, sizeof packer);
    amp_status rc = AMP_OK;
    if (t->nnz == 0)
        return AMP_FAIL(err, AMP_ERR_EMPTY, "%s: the tensor has no nonzeros", path);
    if (o.shards < 1 || o.chunk_nnz < 1 || o.chunk_nnz > AMP_CHUNK_NNZ_MAX)
        return AMP_FAIL(err, AMP_ERR_USAGE, "shards must be at least 1 and chunks hold 1 to "
                        "%llu nonzeros", (unsigned long long)AMP_CHUNK_NNZ_MAX);

    amp_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.nmodes = t->nmodes;
    meta.nnz = t->nnz;
    build_progress bp = {o.progress, o.progress_ctx, o.write.progress, o.write.progress_ctx,
                         0, t->nnz * t->nmodes};
    if (o.progress != NULL) {
        o.write.progress = chunk_written;
        o.write.progress_ctx = &bp;
    }
    double t0 = amp_now();
    progress_at(&bp, "values", 0, 1);
    AMP_CHECK(value_summary(t, o.values, &meta.value_type, &rep.values_changed, &meta.norm_sq,
                            err));
    rep.value_type = meta.value_type;
    rep.seconds_values = amp_now() - t0;
    progress_at(&bp, "values", 1, 1);

    t0 = amp_now();
    progress_at(&bp, "relabel", 0, t->nmodes);
    for (unsigned d = 0; d < t->nmodes; d++) {
        AMP_CHECK_GOTO(plan_mode(t, d, o.shards, &plans[d], err), rc, fail);
        meta.dims[d] = t->dims[d];
        meta.compact_dims[d] = plans[d].compact_dim;
        progress_at(&bp, "relabel", d + 1, t->nmodes);
    }
    /* From here on the tensor's indices are compact: dims follow. */
    for (unsigned d = 0; d < t->nmodes; d++)
        t->dims[d] = plans[d].compact_dim;
    rep.seconds_relabel = amp_now() - t0;

    t0 = amp_now();
    meta.source_name = o.source_name ? o.source_name : "";
    meta.source_size = o.source_size;
    meta.source_hash = o.source_hash;
    meta.writer = "amped-prep " PACKAGE_VERSION;
    meta.params = o.params ? o.params : "";
    AMP_CHECK_GOTO(amp_writer_open(&w, path, &o.write, err), rc, fail);
    AMP_CHECK_GOTO(amp_writer_meta(w, &meta, err), rc, fail);
    packer_start(&packer, w, plans, t->nmodes);
    if (o.remap_streams) {
        /* Positions in each later copy, 4 bytes each below 2^32 nonzeros. */
        unsigned width = t->nnz <= UINT32_MAX ? 4 : 8;
        for (unsigned d = 1; d < t->nmodes; d++) {
            remap_pos[d].width = width;
            remap_pos[d].p = amp_huge_alloc(t->nnz * width, "remap positions", err);
            if (remap_pos[d].p == NULL)
                AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for remap streams");
        }
        remap_pos[0].width = width;
    }
    for (unsigned d = 0; d < t->nmodes; d++) {
        AMP_CHECK_GOTO(write_copy(w, &packer, t, &copy0, &layout0, &later, d, &plans[d], plans,
                                  o.remap_streams && t->nmodes > 1 ? remap_pos : NULL,
                                  o.chunk_nnz, meta.value_type, &rep.modes[d],
                                  o.shard_nnz ? o.shard_nnz + (size_t)d * o.shards : NULL,
                                  &rep, &bp, err),
                       rc, fail);
        /* Copy 0 holds every label now: a caller's arrays are not read again. */
        in_free_labels(t);
    }
    packer_finish(&packer);
    amp_writer *done = w;
    w = NULL;
    double tc = amp_now();
    progress_at(&bp, "commit", 0, 1);
    AMP_CHECK_GOTO(amp_writer_commit(done, &rep.file_bytes, err), rc, fail);
    progress_at(&bp, "commit", 1, 1);
    rep.seconds_commit = amp_now() - tc;
    rep.seconds_write = amp_now() - t0;
fail:
    in_free_labels(t);
    amp_huge_free(t->orig.p, (size_t)t->nnz * t->orig.width);
    t->orig.p = NULL;
    packer_finish(&packer);
    for (unsigned d = 0; d < AMP_MAX_MODES; d++)
        amp_huge_free(remap_pos[d].p, meta.nnz * remap_pos[d].width);
    copy_free(&copy0);
    copy_free(&later);
    amp_writer_abort(w);
    /* Put the original dimensions back for the caller's reports. */
    for (unsigned d = 0; d < t->nmodes; d++) {
        if (meta.dims[d])
            t->dims[d] = meta.dims[d];
        plan_free(&plans[d]);
    }
    if (report != NULL)
        *report = rep;
    return rc;
}

amp_status amp_build_write(amp_coo *t, const char *path, const amp_build_opts *opts,
                           amp_build_report *report, amp_error *err)
{
    build_input in;
    memset(&in, 0, sizeof in);
    in.t = t;
    in.nmodes = t->nmodes;
    in.nnz = in.span = t->nnz;
    in.dims = t->dims;
    return build_write(&in, path, opts, report, err);
}

amp_status amp_build_write_arrays(const amp_coo_arrays *a, const uint64_t *dims,
                                  const amp_coo_repeats *repeats, const char *path,
                                  const amp_build_opts *opts, amp_build_report *report,
                                  amp_error *err)
{
    build_input in;
    memset(&in, 0, sizeof in);
    in.a = a;
    in.rep = repeats;
    in.nmodes = a->nmodes;
    in.span = a->nnz;
    in.nnz = a->nnz - (repeats != NULL ? repeats->count : 0);
    memcpy(in.own_dims, dims, a->nmodes * sizeof *dims);
    in.dims = in.own_dims;
    return build_write(&in, path, opts, report, err);
}
