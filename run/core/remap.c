/* FLYCOO's dynamic remapping (flycoo-gpu-cf24, sections 3.1 and 4.2) on the
 * CPU: where each nonzero of mode copy d sits in copy d + 1, and copy d
 * rewritten into copy d + 1 through those positions. This is the reference
 * a GPU kernel that holds two copies instead of N is checked against
 * (issue 30); nothing here runs on a GPU.
 *
 * Positions come from the file's REMAP sections (amped-prep
 * --remap-streams) or are computed at load. Computing them matches, row by
 * row of mode d + 1, copy d's nonzeros to copy d + 1's by (index, value):
 * amped-prep orders a row of copy e >= 1 by a stable scatter from copy 0,
 * whose rows follow the input's order, so no rule on indices alone gives
 * a row's order, and relying on the scatter would tie the reader to the
 * writer's internals. Its cost (time and memory, cpu20m) is in
 * bench/RESULTS.md, "Remap positions"; memory beyond pos is 8 bytes a
 * nonzero (the bucketed order), 16 bytes a row of mode d + 1, and 64
 * bytes per nonzero of the longest row per thread (the two sides sorted).
 *
 * ---- For the GPU part (not built yet) ----
 *
 * The fused kernel of mode d keeps today's row ownership and warp mapping
 * for the MTTKRP and, for every nonzero k it reads (word w, value v, block
 * key of its block), also writes:
 *   out_words[pos_d[k]] = low 64 bits of the index re-encoded with copy
 *                         d + 1's shifts and widths (amp_blco_field per
 *                         mode, amp_blco_put), and
 *   out_vals[pos_d[k]]  = v, unchanged.
 * The key bits are not written: copy d + 1's block table (from the file's
 * layout, uploaded once, as for resident copies) already says the key of
 * every position, which amp_remap_copy checks here. Positions are a
 * permutation, so the writes need no atomics; their coalescing is as good
 * as the order of pos_d within a warp's nonzeros allows (to be measured).
 *
 * pos_d is indexed by copy d's positions, so each mode needs its own
 * array and they do not move: with 32-bit positions (nnz < 2^32) that is
 * 4 bytes a nonzero a mode. Per nonzero, with c = 8 + value size (12 for
 * f32, 16 for f64):
 *   all copies resident:            N c
 *   two copies, every pos resident: 2 c + 4 N
 *   two copies, pos_d streamed in:  2 c + 2 x 4 (double-buffered; the link
 *                                   carries 4 bytes a nonzero a mode
 *                                   instead of the c of a streamed copy)
 * e.g. f64: N = 3 is 48 / 44 / 40, N = 5 is 80 / 52 / 40; f32: N = 3 is
 * 36 / 36 / 32. So the two-copy mode with resident positions saves little
 * at 3 modes; it pays from 4 modes, or with the positions streamed.
 * --memory auto would then decide per GPU, in order: every copy resident
 * if N c nnz (plus factors and scratch) fits; else two copies with
 * resident positions if 2 c + 4 N fits; else two copies with streamed
 * positions if 2 c + 8 fits; else stream the copies as today. The report
 * would name the choice and the sizes it compared. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_core.h"
#include "amp_threads.h"

/* A nonzero as the next copy will hold it: its index in that copy's
 * layout (key:word) and its value's bits; at is its position. */
typedef struct remap_item {
    uint64_t key, word, vbits, at;
} remap_item;

static void reencode(const amp_mode_layout *from, uint64_t key, uint64_t word,
                     const amp_mode_layout *to, uint64_t *to_key, uint64_t *to_word)
{
    uint64_t k = 0, w = 0;
    for (unsigned m = 0; m < from->nmodes; m++)
        amp_blco_put(amp_blco_field(key, word, from->shift[m], from->width[m]), to->shift[m],
                     to->width[m], &k, &w);
    *to_key = k;
    *to_word = w;
}

static uint64_t value_bits(const void *vals, amp_value_type vt, uint64_t k)
{
    if (vt == AMP_VALUES_F32) {
        uint32_t b;
        memcpy(&b, (const char *)vals + 4 * k, 4);
        return b;
    }
    uint64_t b;
    memcpy(&b, (const char *)vals + 8 * k, 8);
    return b;
}

/* The block of c that holds position p. */
static size_t block_of(const amp_copy *c, uint64_t p)
{
    size_t lo = 0, hi = c->nblocks;   /* block_start[lo] <= p < block_start[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->block_start[mid] <= p)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int amp_remap_in_file(const amp_file *f, unsigned d)
{
    const amp_mode_layout *l = f ? amp_file_mode(f, d) : NULL;
    if (l == NULL)
        return 0;
    /* A mode has streams for every chunk or none (checked at open). */
    for (uint32_t s = 0; s < l->nshards; s++)
        if (l->shards[s].nchunks > 0)
            return amp_file_remap(f, d, s, 0) != NULL;
    return 0;
}

/* ---- positions from the file ------------------------------------------- */

typedef struct stream_job {
    const amp_section *sec;
    uint64_t at;   /* the chunk's first position in copy d */
} stream_job;

static amp_status read_stream(amp_section_reader *r, const stream_job *j, void **buf,
                              size_t *cap, uint64_t nnz, uint64_t *seen, uint64_t *pos,
                              amp_error *err)
{
    const amp_section *s = j->sec;
    char name[96];
    if (s->raw_size > *cap) {
        amp_free(*buf);
        *cap = 0;
        if ((*buf = amp_alloc(s->raw_size, "a remap stream", err)) == NULL)
            return AMP_ERR_NOMEM;
        *cap = s->raw_size;
    }
    AMP_CHECK(amp_section_read(r, s, *buf, *cap, err));
    const unsigned char *p = *buf;
    for (uint64_t i = 0; i < s->count; i++) {
        uint64_t v;
        if (s->aux == 4) {
            uint32_t x;
            memcpy(&x, p + 4 * i, 4);
            v = x;
        } else {
            memcpy(&v, p + 8 * i, 8);
        }
        /* amp_file_open checked the directory, not the payloads, and a
         * stray position would make the remap write out of bounds. */
        uint64_t bit = UINT64_C(1) << (v & 63);
        if (v >= nnz || (__atomic_fetch_or(&seen[v >> 6], bit, __ATOMIC_RELAXED) & bit))
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: entry %llu is %llu: %s",
                            amp_section_name(s, name, sizeof name), (unsigned long long)i,
                            (unsigned long long)v,
                            v >= nnz ? "beyond the nonzeros" : "a position named twice");
        pos[j->at + i] = v;
    }
    return AMP_OK;
}

amp_status amp_remap_positions_read(const amp_file *f, const amp_tensor *t, unsigned d,
                                    int threads, uint64_t *pos, amp_error *err)
{
    if (d >= t->nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "no mode %u in a tensor of %u modes", d + 1,
                        t->nmodes);
    if (!amp_remap_in_file(f, d))
        return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: no remap streams for mode %u (amped-prep "
                        "--remap-streams writes them)", amp_file_path(f), d + 1);
    const amp_mode_layout *l = amp_file_mode(f, d);
    size_t n = 0, j = 0;
    for (uint32_t s = 0; s < l->nshards; s++)
        n += l->shards[s].nchunks;
    stream_job *jobs = malloc(n * sizeof *jobs);
    uint64_t *seen = calloc((size_t)(t->nnz / 64 + 1), 8);
    amp_status rc = AMP_OK;
    if (jobs == NULL || seen == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
    uint64_t at = 0;
    for (uint32_t s = 0; s < l->nshards; s++)
        for (uint32_t q = 0; q < l->shards[s].nchunks; q++) {
            const amp_section *sec = amp_file_remap(f, d, s, q);
            if (sec == NULL)
                AMP_RAISE_GOTO(err, rc, done, AMP_ERR_CORRUPT, "%s: mode %u shard %lu chunk "
                               "%lu has no remap stream", amp_file_path(f), d + 1,
                               (unsigned long)s, (unsigned long)q);
            jobs[j++] = (stream_job){sec, at};
            at += sec->count;
        }
    if (at != t->nnz)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_CORRUPT, "%s: mode %u's remap streams hold %llu "
                       "entries, not %llu", amp_file_path(f), d + 1, (unsigned long long)at,
                       (unsigned long long)t->nnz);
    int failed = 0;
    const int nt = amp_thread_count(threads);
    (void)nt;   /* read only by the pragma, which a build without OpenMP drops */
#pragma omp parallel num_threads(nt)
    {
        amp_error my = {0};
        amp_section_reader *r = NULL;
        void *buf = NULL;
        size_t cap = 0;
        amp_status mrc = amp_section_reader_new(f, &r, &my);
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < n; i++)
            if (mrc == AMP_OK)
                mrc = read_stream(r, &jobs[i], &buf, &cap, t->nnz, seen, pos, &my);
        if (mrc != AMP_OK)
            amp_error_first(err, &failed, mrc, &my);
        amp_free(buf);
        amp_section_reader_free(r);
    }
    if (failed)
        rc = err ? err->status : AMP_ERR_CORRUPT;
done:
    free(jobs);
    free(seen);
    return rc;
}

/* ---- positions computed from the copies ------------------------------- */

static int item_cmp(const void *pa, const void *pb)
{
    const remap_item *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    if (a->word != b->word)
        return a->word < b->word ? -1 : 1;
    if (a->vbits != b->vbits)
        return a->vbits < b->vbits ? -1 : 1;
    return (a->at > b->at) - (a->at < b->at);
}

static int same_nonzero(const remap_item *a, const remap_item *b)
{
    return a->key == b->key && a->word == b->word && a->vbits == b->vbits;
}

/* One row of mode d + 1: copy d's nonzeros in it (order[0 .. n)) paired
 * with copy d + 1's (positions first .. first + n). Returns 0 when the
 * two sides are not the same nonzeros. */
static int match_row(const amp_tensor *t, const amp_copy *a, const amp_copy *b,
                     const uint64_t *order, uint64_t first, uint64_t n, remap_item *src,
                     remap_item *dst, uint64_t *pos)
{
    size_t blk = block_of(b, first);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = order[i], p = first + i;
        size_t ka = a->nblocks > 1 ? block_of(a, k) : 0;
        reencode(&a->layout, a->block_key[ka], a->words[k], &b->layout, &src[i].key,
                 &src[i].word);
        src[i].vbits = value_bits(a->vals, t->value_type, k);
        src[i].at = k;
        while (b->block_start[blk + 1] <= p)
            blk++;
        dst[i] = (remap_item){b->block_key[blk], b->words[p],
                              value_bits(b->vals, t->value_type, p), p};
    }
    /* Rows whose two orders already agree need no sort. */
    uint64_t i = 0;
    while (i < n && same_nonzero(&src[i], &dst[i]))
        i++;
    if (i < n) {
        qsort(src + i, n - i, sizeof *src, item_cmp);
        qsort(dst + i, n - i, sizeof *dst, item_cmp);
    }
    for (i = 0; i < n; i++) {
        if (!same_nonzero(&src[i], &dst[i]))
            return 0;
        pos[src[i].at] = dst[i].at;
    }
    return 1;
}

amp_status amp_remap_positions_compute(const amp_tensor *t, unsigned d, int threads,
                                       uint64_t *pos, amp_error *err)
{
    if (d >= t->nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "no mode %u in a tensor of %u modes", d + 1,
                        t->nmodes);
    const unsigned next = (d + 1) % t->nmodes;
    const amp_copy *a = &t->copies[d], *b = &t->copies[next];
    if (t->layout_only || a->nnz != t->nnz || b->nnz != t->nnz || b->row_begin != 0 ||
        b->row_count != t->rows[next])
        return AMP_FAIL(err, AMP_ERR_USAGE, "remap positions need a whole tensor's copies "
                        "loaded");
    const uint64_t R = t->rows[next], nnz = t->nnz;
    const amp_mode_layout *la = &a->layout, *lb = &b->layout;
    uint64_t *start = calloc((size_t)R + 2, 8), *fill = malloc(((size_t)R + 1) * 8);
    uint64_t *order = amp_huge_alloc((size_t)(nnz ? nnz : 1) * 8, "the remap order", err);
    amp_status rc = AMP_OK;
    if (start == NULL || fill == NULL || order == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory for remap positions");
    for (size_t q = 0; q < b->nblocks; q++)
        for (uint64_t k = b->block_start[q]; k < b->block_start[q + 1]; k++) {
            uint64_t r = amp_blco_field(b->block_key[q], b->words[k], lb->shift[next],
                                        lb->width[next]);
            if (r >= R)
                AMP_RAISE_GOTO(err, rc, done, AMP_ERR_CORRUPT, "mode %u's copy: row %llu of "
                               "%llu", next + 1, (unsigned long long)r,
                               (unsigned long long)R);
            start[r + 1]++;
        }
    uint64_t longest = 0;
    for (uint64_t r = 0; r < R; r++) {
        longest = start[r + 1] > longest ? start[r + 1] : longest;
        start[r + 1] += start[r];
    }
    memcpy(fill, start, ((size_t)R + 1) * 8);
    /* Copy d bucketed by row of mode d + 1, stably: a row's first pass in
     * match_row then often finds the two orders agree. */
    for (size_t q = 0; q < a->nblocks; q++)
        for (uint64_t k = a->block_start[q]; k < a->block_start[q + 1]; k++) {
            uint64_t r = amp_blco_field(a->block_key[q], a->words[k], la->shift[next],
                                        la->width[next]);
            if (r >= R || fill[r] == start[r + 1])
                AMP_RAISE_GOTO(err, rc, done, AMP_ERR_CORRUPT, "mode %u's copy has more "
                               "nonzeros in row %llu of mode %u than mode %u's copy", d + 1,
                               (unsigned long long)r, next + 1, next + 1);
            order[fill[r]++] = k;
        }
    int failed = 0;
    uint64_t bad_row = 0;
    const int nt = amp_thread_count(threads);
    (void)nt;
#pragma omp parallel num_threads(nt)
    {
        remap_item *items = malloc((size_t)(longest ? longest : 1) * 2 * sizeof *items);
        if (items == NULL) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 256)
        for (uint64_t r = 0; r < R; r++) {
            int stop;
#pragma omp atomic read
            stop = failed;
            if (stop)
                continue;
            uint64_t n = start[r + 1] - start[r];
            if (!match_row(t, a, b, order + start[r], start[r], n, items, items + n, pos)) {
#pragma omp critical(amp_remap_error)
                {
                    if (!failed)
                        bad_row = r + 1;
                    failed = 1;
                }
            }
        }
        free(items);
    }
    if (failed && bad_row == 0)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory for remap positions");
    if (failed)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_CORRUPT, "row %llu of mode %u holds other "
                       "nonzeros in mode %u's copy than in mode %u's",
                       (unsigned long long)bad_row - 1, next + 1, d + 1, next + 1);
done:
    free(start);
    free(fill);
    amp_huge_free(order, (size_t)(nnz ? nnz : 1) * 8);
    return rc;
}

amp_status amp_remap_positions(const amp_file *f, const amp_tensor *t, unsigned d, int threads,
                               uint64_t *pos, int *from_file, amp_error *err)
{
    *from_file = amp_remap_in_file(f, d);
    if (*from_file)
        return amp_remap_positions_read(f, t, d, threads, pos, err);
    return amp_remap_positions_compute(t, d, threads, pos, err);
}

/* ---- the remap step ---------------------------------------------------- */

amp_status amp_remap_copy(const amp_copy *from, const uint64_t *pos, amp_value_type vt,
                          amp_copy *to, amp_error *err)
{
    const amp_mode_layout *lf = &from->layout, *lt = &to->layout;
    if (lf->nmodes != lt->nmodes || from->nnz != to->nnz || to->words == NULL ||
        to->vals == NULL || from->words == NULL || from->vals == NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "a remap needs two copies of one tensor, both "
                        "with room for their nonzeros");
    const size_t vsize = amp_value_size(vt);
    const uint64_t nnz = to->nnz;
    for (size_t q = 0; q < from->nblocks; q++)
        for (uint64_t k = from->block_start[q]; k < from->block_start[q + 1]; k++) {
            uint64_t key, word, p = pos[k];
            reencode(lf, from->block_key[q], from->words[k], lt, &key, &word);
            if (p >= nnz)
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "remap position %llu of nonzero %llu "
                                "is beyond the %llu nonzeros", (unsigned long long)p,
                                (unsigned long long)k, (unsigned long long)nnz);
            size_t blk = to->nblocks > 1 ? block_of(to, p) : 0;
            if (key != to->block_key[blk])
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "nonzero %llu remapped to position "
                                "%llu, in the block of key %llu, has key %llu",
                                (unsigned long long)k, (unsigned long long)p,
                                (unsigned long long)to->block_key[blk],
                                (unsigned long long)key);
            to->words[p] = word;
            memcpy((char *)to->vals + p * vsize, (const char *)from->vals + k * vsize, vsize);
        }
    return AMP_OK;
}
