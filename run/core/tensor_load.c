/* Every mode copy of an .amp file, checked: into host memory, or handed
 * chunk by chunk to a sink (the GPU's upload reads the file this way).
 *
 * Chunks are independent, so all chunks of all modes go to the threads at
 * once (dynamic schedule: sizes vary by shard). Each thread reads into its
 * own buffer, checks the chunk (indices address factor rows later, so none
 * is trusted unchecked) and gives words and values to the sink. */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_core.h"
#include "amp_threads.h"

typedef struct load_job {
    const amp_section *sec;
    unsigned mode;
    uint64_t at;      /* position of the chunk's first nonzero in its copy */
} load_job;

/* Every copy's words and values freed, and t back to its layout alone. */
static void free_nonzeros(amp_tensor *t)
{
    size_t vsize = amp_value_size(t->value_type);
    for (unsigned d = 0; d < t->nmodes; d++) {
        amp_copy *c = &t->copies[d];
        amp_huge_free(c->words, (size_t)c->nnz * 8);
        amp_huge_free(c->vals, (size_t)c->nnz * vsize);
        c->words = NULL;
        c->vals = NULL;
    }
    t->bytes = 0;
}

double amp_tensor_max_abs(const amp_tensor *t, int threads)
{
    /* Every mode's copy holds the same values in another order (a part
     * of several processes: each mode's copies of all parts together
     * hold them all), so the first copy in memory is read, not all N. */
    double top = 0;
    for (unsigned d = 0; d < t->nmodes; d++) {
        const amp_copy *c = &t->copies[d];
        if (c->vals == NULL || c->nnz == 0)
            continue;
        const int64_t n = (int64_t)c->nnz;
        if (t->value_type == AMP_VALUES_F32) {
            const float *v = c->vals;
#pragma omp parallel for num_threads(amp_thread_count(threads)) reduction(max : top)
            for (int64_t k = 0; k < n; k++)
                top = fabs((double)v[k]) > top ? fabs((double)v[k]) : top;
        } else {
            const double *v = c->vals;
#pragma omp parallel for num_threads(amp_thread_count(threads)) reduction(max : top)
            for (int64_t k = 0; k < n; k++)
                top = fabs(v[k]) > top ? fabs(v[k]) : top;
        }
        break;
    }
    return top;
}

int amp_value_scale_exp(double max)
{
    if (!(max > 0) || !isfinite(max) ||
        (max >= ldexp(1, -AMP_VALUE_EXP_MAX) && max <= ldexp(1, AMP_VALUE_EXP_MAX)))
        return 0;
    int e;
    (void)frexp(max, &e);   /* max = f 2^e, f in [0.5, 1) */
    return -e;
}

void amp_tensor_scale(amp_tensor *t, int k, int threads, double *sum_sq)
{
    for (unsigned d = 0; d < t->nmodes; d++) {
        amp_copy *c = &t->copies[d];
        if (c->vals == NULL)
            continue;
        const int64_t n = (int64_t)c->nnz;
        if (t->value_type == AMP_VALUES_F32) {
            float *v = c->vals;
#pragma omp parallel for num_threads(amp_thread_count(threads)) schedule(static)
            for (int64_t j = 0; j < n; j++)
                v[j] = ldexpf(v[j], k);
        } else {
            double *v = c->vals;
#pragma omp parallel for num_threads(amp_thread_count(threads)) schedule(static)
            for (int64_t j = 0; j < n; j++)
                v[j] = ldexp(v[j], k);
        }
    }
    /* In one thread, in order: the same sum for any thread count, as the
     * file's own |X|^2 is. One pass, once a run. */
    double sum = 0;
    const amp_copy *c = &t->copies[0];
    for (uint64_t j = 0; c->vals != NULL && j < c->nnz; j++) {
        double v = t->value_type == AMP_VALUES_F32 ? ((const float *)c->vals)[j]
                                                   : ((const double *)c->vals)[j];
        sum += v * v;
    }
    *sum_sq = sum;
}

void amp_tensor_free(amp_tensor *t)
{
    free_nonzeros(t);
    for (unsigned d = 0; d < t->nmodes; d++) {
        amp_copy *c = &t->copies[d];
        free(c->block_start);
        free(c->block_key);
        free(t->new_to_orig[d]);
    }
    memset(t, 0, sizeof *t);
}

/* Whether shard s of mode d is read: every shard, or (p not NULL) those
 * p deals to part. */
static int wanted(const amp_partition *p, unsigned part, unsigned d, uint32_t s)
{
    return p == NULL || p->modes[d].owner[s] == part;
}

/* Every chunk of every mode (of the shards wanted), in file order (so a
 * mode's jobs double as its block list), mode_first[d] the first of mode
 * d's, each job's position counting only the chunks wanted; *max_raw the
 * largest decompressed chunk and *total the stored bytes. */
static amp_status list_jobs(const amp_file *f, const amp_partition *p, unsigned part,
                            load_job **out, size_t *njobs_out, size_t *mode_first,
                            size_t *max_raw, uint64_t *total, amp_error *err)
{
    const amp_meta *meta = amp_file_meta(f);
    size_t njobs = 0, j = 0;
    *max_raw = 1;
    *total = 0;
    for (unsigned d = 0; d < meta->nmodes; d++) {
        const amp_mode_layout *l = amp_file_mode(f, d);
        for (uint32_t q = 0; q < l->nshards; q++)
            njobs += wanted(p, part, d, q) ? l->shards[q].nchunks : 0;
    }
    load_job *jobs = malloc((njobs ? njobs : 1) * sizeof *jobs);
    if (jobs == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    for (unsigned d = 0; d < meta->nmodes; d++) {
        const amp_mode_layout *l = amp_file_mode(f, d);
        uint64_t at = 0, all = 0;
        mode_first[d] = j;
        for (uint32_t s = 0; s < l->nshards; s++)
            for (uint32_t q = 0; q < l->shards[s].nchunks; q++) {
                const amp_section *sec = amp_file_chunk(f, d, s, q);
                all += sec->count;
                if (!wanted(p, part, d, s))
                    continue;
                jobs[j++] = (load_job){sec, d, at};
                at += sec->count;
                *total += sec->stored_size;
                if (sec->raw_size > *max_raw)
                    *max_raw = sec->raw_size;
            }
        if (all != meta->nnz) {
            free(jobs);
            return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: mode %u's chunks hold %llu nonzeros, "
                            "not %llu", amp_file_path(f), d + 1, (unsigned long long)all,
                            (unsigned long long)meta->nnz);
        }
    }
    mode_first[meta->nmodes] = j;
    *out = jobs;
    *njobs_out = njobs;
    return AMP_OK;
}

amp_status amp_tensor_load_layout(const amp_file *f, amp_tensor *t, amp_error *err)
{
    const amp_meta *meta = amp_file_meta(f);
    amp_status rc = AMP_OK;
    load_job *jobs = NULL;
    size_t njobs, max_raw, mode_first[AMP_MAX_MODES + 1];
    uint64_t total;
    memset(t, 0, sizeof *t);
    t->nmodes = meta->nmodes;
    t->nnz = meta->nnz;
    t->value_type = meta->value_type;
    t->norm_sq = meta->norm_sq;
    t->layout_only = 1;
    AMP_CHECK_GOTO(list_jobs(f, NULL, 0, &jobs, &njobs, mode_first, &max_raw, &total, err), rc,
                   fail);
    for (unsigned d = 0; d < t->nmodes; d++) {
        amp_copy *c = &t->copies[d];
        t->dims[d] = meta->dims[d];
        t->rows[d] = meta->compact_dims[d];
        c->layout = *amp_file_mode(f, d);
        c->nnz = t->nnz;
        c->row_begin = 0;
        c->row_count = t->rows[d];
        c->early_nnz = t->nnz;
        t->new_to_orig[d] = malloc((size_t)(t->rows[d] ? t->rows[d] : 1) * 8);
        if (t->new_to_orig[d] == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
        /* A keyed copy has one block per chunk (a chunk never spans two
         * keys), so the block table is known before any chunk is read. */
        size_t first = mode_first[d], n = mode_first[d + 1] - first;
        int keyed = c->layout.key_bits > 0;
        c->nblocks = keyed ? n : 1;
        c->block_start = malloc((c->nblocks + 1) * sizeof *c->block_start);
        c->block_key = malloc(c->nblocks * sizeof *c->block_key);
        if (c->block_start == NULL || c->block_key == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
        for (size_t b = 0; b < c->nblocks; b++) {
            c->block_start[b] = keyed ? jobs[first + b].at : 0;
            c->block_key[b] = keyed ? jobs[first + b].sec->aux : 0;
        }
        c->block_start[c->nblocks] = c->nnz;
        /* The fiber level as the file states it, for consumers that never
         * hold the nonzeros on the host (a GPU's upload); the loader checks
         * it against them when it does (amp_tensor_fibers). A kernel over
         * fibers is right for any order, so an unchecked statement can
         * cost speed, never correctness. */
        const amp_section *fs = amp_file_fiber(f, d);
        if (fs != NULL && t->nmodes >= 3) {
            uint64_t *counts = malloc((size_t)c->layout.nshards * sizeof *counts);
            unsigned middle = 0;
            if (counts == NULL)
                AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
            rc = amp_file_read_fibers(f, d, &middle, counts, err);
            if (rc == AMP_OK) {
                c->has_fibers = 1;
                c->fiber_mode = middle;
                for (uint32_t s = 0; s < c->layout.nshards; s++)
                    c->nfibers += counts[s];
            }
            free(counts);
            if (rc != AMP_OK)
                goto fail;
        }
    }
    {
        /* The relabellings, one mode a thread: each is read and checked
         * one-to-one in one pass that would otherwise run mode after mode. */
        amp_status rcs[AMP_MAX_MODES];
        amp_error errs[AMP_MAX_MODES];
        memset(errs, 0, sizeof errs);
#pragma omp parallel for schedule(dynamic, 1)
        for (int d = 0; d < (int)t->nmodes; d++)
            rcs[d] = amp_file_read_relabel(f, (unsigned)d, t->new_to_orig[d], &errs[d]);
        for (unsigned d = 0; d < t->nmodes; d++)
            if (rcs[d] != AMP_OK) {
                rc = amp_error_set(err, rcs[d], errs[d].src_file, errs[d].src_line, "%s",
                                   amp_error_message(&errs[d]));
                goto fail;
            }
    }
    free(jobs);
    return AMP_OK;
fail:
    free(jobs);
    amp_tensor_free(t);
    return rc;
}

/* The output row of a chunk's word (key: the chunk's block key, or 0). */
static uint64_t word_row(const amp_mode_layout *l, uint64_t key, uint64_t word)
{
    return amp_blco_field(key, word, l->shift[l->mode], l->width[l->mode]);
}

/* Chunks are checked one by one; the kernels also rely on rows ascending
 * across chunk boundaries (a row may continue in the next chunk), which
 * the first and last row of every chunk are enough to check. */
static amp_status check_order(const amp_file *f, const load_job *jobs, const uint64_t *edge,
                              size_t n, amp_error *err)
{
    size_t prev = SIZE_MAX;
    for (size_t b = 0; b < n; b++) {
        if (jobs[b].sec->count == 0)
            continue;
        if (prev != SIZE_MAX && edge[2 * prev + 1] > edge[2 * b]) {
            char name[96];
            return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: %s: its rows go back below the "
                            "previous chunk's", amp_file_path(f),
                            amp_section_name(jobs[b].sec, name, sizeof name));
        }
        prev = b;
    }
    return AMP_OK;
}

static amp_status read_chunks(const amp_file *f, const amp_tensor *t, const amp_partition *p,
                              unsigned part, int threads, int with_stored,
                              amp_chunk_sink_fn sink, void *sink_ctx,
                              amp_load_progress_fn progress, void *progress_ctx, amp_error *err)
{
    amp_status rc = AMP_OK;
    load_job *jobs = NULL;
    uint64_t *edge = NULL;
    size_t njobs, max_raw, mode_first[AMP_MAX_MODES + 1];
    uint64_t total;
    AMP_CHECK_GOTO(list_jobs(f, p, part, &jobs, &njobs, mode_first, &max_raw, &total, err), rc,
                   done);
    edge = malloc((njobs ? njobs : 1) * 2 * sizeof *edge);
    if (edge == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");

    const int nt = threads > 0 ? threads : 1;
#ifndef _OPENMP
    (void)nt;   /* one thread: the parallel region below is the caller's */
#endif
    uint64_t progressed = 0;
    int failed = 0;
#pragma omp parallel num_threads(nt)
    {
        int me = amp_thread_id();
        amp_error my = {0};
        amp_section_reader *r = NULL;
        amp_status mrc = amp_section_reader_new(f, &r, &my);
        void *buf = mrc == AMP_OK ? amp_alloc(max_raw, "a chunk buffer", &my) : NULL;
        if (mrc == AMP_OK && buf == NULL)
            mrc = AMP_ERR_NOMEM;
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < njobs; i++) {
            int stop;
#pragma omp atomic read
            stop = failed;
            if (stop || mrc != AMP_OK)
                continue;
            const load_job *jb = &jobs[i];
            const amp_section *s = jb->sec;
            const void *stored = NULL;
            if (with_stored) {
                mrc = amp_section_read_stored(r, s, &stored, &my);
                if (mrc == AMP_OK)
                    mrc = amp_section_decode(r, s, stored, buf, max_raw, &my);
            } else {
                mrc = amp_section_read(r, s, buf, max_raw, &my);
            }
            if (mrc == AMP_OK)
                mrc = amp_chunk_check(f, s, buf, &my);
            if (mrc == AMP_OK && s->count > 0) {
                const amp_mode_layout *l = &t->copies[jb->mode].layout;
                uint64_t key = l->key_bits > 0 ? s->aux : 0;
                const uint64_t *w = buf;
                edge[2 * i] = word_row(l, key, w[0]);
                edge[2 * i + 1] = word_row(l, key, w[s->count - 1]);
                amp_chunk_data c = {s, jb->mode, i - mode_first[jb->mode], jb->at, s->count,
                                    buf, (const char *)buf + s->count * 8, stored};
                mrc = sink(sink_ctx, me, &c, &my);
            }
            uint64_t now;
#pragma omp atomic capture
            now = progressed += s->stored_size;
            if (progress != NULL && me == 0)
                progress(progress_ctx, now, total);
        }
        if (mrc != AMP_OK)
            amp_error_first(err, &failed, mrc, &my);
        amp_free(buf);
        amp_section_reader_free(r);
    }
    if (failed) {
        rc = err ? err->status : AMP_ERR_FORMAT;
        goto done;
    }
    for (unsigned d = 0; d < t->nmodes; d++)
        AMP_CHECK_GOTO(check_order(f, jobs + mode_first[d], edge + 2 * mode_first[d],
                                   mode_first[d + 1] - mode_first[d], err), rc, done);
done:
    free(edge);
    free(jobs);
    return rc;
}

amp_status amp_tensor_read_chunks(const amp_file *f, const amp_tensor *t, int threads,
                                  int with_stored, amp_chunk_sink_fn sink, void *sink_ctx,
                                  amp_load_progress_fn progress, void *progress_ctx,
                                  amp_error *err)
{
    return read_chunks(f, t, NULL, 0, threads, with_stored, sink, sink_ctx, progress,
                       progress_ctx, err);
}

amp_status amp_tensor_read_part_chunks(const amp_file *f, const amp_tensor *t,
                                       const amp_partition *p, unsigned part, int threads,
                                       amp_chunk_sink_fn sink, void *sink_ctx,
                                       amp_load_progress_fn progress, void *progress_ctx,
                                       amp_error *err)
{
    if (p->kind != AMP_PARTITION_OWNER || part >= p->ngpus || p->nmodes != t->nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the chunks of part %u of a partition into %u",
                        part, p->ngpus);
    return read_chunks(f, t, p, part, threads, 0, sink, sink_ctx, progress, progress_ctx, err);
}

/* The host's sink: each chunk's words and values to their place. */
static amp_status to_host(void *ctx, int thread, const amp_chunk_data *k, amp_error *err)
{
    amp_tensor *t = ctx;
    amp_copy *c = &t->copies[k->mode];
    size_t vsize = amp_value_size(t->value_type);
    (void)thread, (void)err;
    memcpy(c->words + k->at, k->words, (size_t)k->count * 8);
    memcpy((char *)c->vals + k->at * vsize, k->vals, (size_t)k->count * vsize);
    return AMP_OK;
}

/* ---- fibers -------------------------------------------------------------- */

/* The fibers of middle mode m among positions [a, b) of copy c: runs of
 * one output row and one index m, a run cut at a. Decoded as the MTTKRP
 * decodes them (block keys included), so the count is what it walks. */
static uint64_t count_fibers(const amp_copy *c, unsigned m, uint64_t a, uint64_t b)
{
    const amp_mode_layout *l = &c->layout;
    const unsigned d = l->mode;
    size_t blk = 0;
    while (c->block_start[blk + 1] <= a && blk + 1 < c->nblocks)
        blk++;
    uint64_t n = 0, row = UINT64_MAX, mi = 0;
    for (uint64_t k = a; k < b; k++) {
        while (k >= c->block_start[blk + 1])
            blk++;
        const uint64_t key = c->block_key[blk], w = c->words[k];
        const uint64_t r = amp_blco_field(key, w, l->shift[d], l->width[d]);
        const uint64_t i = amp_blco_field(key, w, l->shift[m], l->width[m]);
        n += r != row || i != mi;   /* row starts as no row: k = a counts */
        row = r;
        mi = i;
    }
    return n;
}

/* Per shard, so that a stored count can be checked against its shard. */
static void count_shard_fibers(const amp_copy *c, unsigned m, int threads, uint64_t *counts)
{
    const amp_mode_layout *l = &c->layout;
    (void)threads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (uint32_t s = 0; s < l->nshards; s++)
        counts[s] = count_fibers(c, m, l->shards[s].first_nnz,
                                 l->shards[s].first_nnz + l->shards[s].nnz);
}

amp_status amp_tensor_fibers(const amp_file *f, amp_tensor *t, int threads, amp_error *err)
{
    if (t->nmodes < 3 || t->layout_only)
        return AMP_OK;
    threads = amp_thread_count(threads);
    for (unsigned d = 0; d < t->nmodes; d++) {
        amp_copy *c = &t->copies[d];
        const amp_mode_layout *l = &c->layout;
        uint64_t *stored = malloc(2 * (size_t)l->nshards * sizeof *stored);
        if (stored == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        uint64_t *have = stored + l->nshards, best = UINT64_MAX;
        unsigned middle = 0;
        c->has_fibers = 0;
        if (amp_file_fiber(f, d) != NULL) {
            amp_status rc = amp_file_read_fibers(f, d, &middle, stored, err);
            if (rc == AMP_OK) {
                count_shard_fibers(c, middle, threads, have);
                best = 0;
                for (uint32_t s = 0; s < l->nshards && rc == AMP_OK; s++) {
                    char name[96];
                    if (have[s] != stored[s])
                        rc = AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: shard %lu has %llu fibers "
                                      "of middle mode %u in its nonzeros, the section says "
                                      "%llu", amp_file_path(f),
                                      amp_section_name(amp_file_fiber(f, d), name, sizeof name),
                                      (unsigned long)s, (unsigned long long)have[s],
                                      middle + 1, (unsigned long long)stored[s]);
                    best += have[s];
                }
            }
            if (rc != AMP_OK) {
                free(stored);
                return rc;
            }
        } else {
            /* A file of format 1.0: its rows are in the order they were
             * written, so the fibers are whatever runs that order has; the
             * middle mode is the one with the fewest. */
            for (unsigned m = 0; m < t->nmodes; m++) {
                if (m == d)
                    continue;
                count_shard_fibers(c, m, threads, have);
                uint64_t n = 0;
                for (uint32_t s = 0; s < l->nshards; s++)
                    n += have[s];
                if (n < best) {
                    best = n;
                    middle = m;
                }
            }
        }
        free(stored);
        c->has_fibers = 1;
        c->fiber_mode = middle;
        c->nfibers = best;
    }
    return AMP_OK;
}

amp_status amp_tensor_load_nonzeros(const amp_file *f, int threads,
                                    amp_load_progress_fn progress, void *progress_ctx,
                                    amp_tensor *t, amp_error *err)
{
    size_t vsize = amp_value_size(t->value_type);
    if (!t->layout_only)
        return AMP_OK;
    threads = amp_thread_count(threads);
    amp_status rc = AMP_OK;
    for (unsigned d = 0; d < t->nmodes && rc == AMP_OK; d++) {
        amp_copy *c = &t->copies[d];
        c->words = amp_huge_alloc((size_t)t->nnz * 8, "a mode copy's indices", err);
        c->vals = c->words ? amp_huge_alloc((size_t)t->nnz * vsize, "a mode copy's values",
                                            err) : NULL;
        if (c->vals == NULL)
            rc = AMP_ERR_NOMEM;
        else
            t->bytes += t->nnz * (8 + vsize);
    }
    if (rc == AMP_OK)
        rc = amp_tensor_read_chunks(f, t, threads, 0, to_host, t, progress, progress_ctx, err);
    if (rc == AMP_OK) {
        t->layout_only = 0;
        rc = amp_tensor_fibers(f, t, threads, err);
        if (rc == AMP_OK)
            return AMP_OK;
    }
    free_nonzeros(t);   /* back to the layout alone, so a later call starts afresh */
    return rc;
}

amp_status amp_tensor_load(const amp_file *f, int threads, amp_load_progress_fn progress,
                           void *progress_ctx, amp_tensor *t, amp_error *err)
{
    AMP_CHECK(amp_tensor_load_layout(f, t, err));
    amp_status rc = amp_tensor_load_nonzeros(f, threads, progress, progress_ctx, t, err);
    if (rc != AMP_OK)
        amp_tensor_free(t);
    return rc;
}
