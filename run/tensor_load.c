/* Every mode copy of an .amp file into memory, checked.
 *
 * Chunks are independent, so all chunks of all modes go to the threads at
 * once (dynamic schedule: sizes vary by shard). Each thread reads into its
 * own buffer, checks the chunk (indices address factor rows later, so none
 * is trusted unchecked) and copies words and values to their place. */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "amp_alloc.h"
#include "amp_cpd.h"

typedef struct load_job {
    const amp_section *sec;
    unsigned mode;
    uint64_t at;      /* position of the chunk's first nonzero in its copy */
} load_job;

void amp_tensor_free(amp_tensor *t)
{
    size_t vsize = amp_value_size(t->value_type);
    for (unsigned d = 0; d < t->nmodes; d++) {
        amp_copy *c = &t->copies[d];
        amp_huge_free(c->words, (size_t)c->nnz * 8);
        amp_huge_free(c->vals, (size_t)c->nnz * vsize);
        free(c->block_start);
        free(c->block_key);
        free(t->new_to_orig[d]);
    }
    memset(t, 0, sizeof *t);
}

/* The output row of position k of a copy. */
static uint64_t copy_row(const amp_copy *c, size_t block, uint64_t k)
{
    const amp_mode_layout *l = &c->layout;
    return amp_blco_field(c->block_key[block], c->words[k], l->shift[l->mode],
                          l->width[l->mode]);
}

/* Chunks are checked one by one; the kernels also rely on rows ascending
 * across chunk boundaries (a row may continue in the next chunk). */
static amp_status check_order(const amp_file *f, const amp_copy *c, const load_job *jobs,
                              size_t n, amp_error *err)
{
    int keyed = c->nblocks > 1;
    for (size_t b = 1; b < n; b++) {
        uint64_t k = jobs[b].at;
        if (copy_row(c, keyed ? b - 1 : 0, k - 1) > copy_row(c, keyed ? b : 0, k)) {
            char name[96];
            return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: %s: its rows go back below the "
                            "previous chunk's", amp_file_path(f),
                            amp_section_name(jobs[b].sec, name, sizeof name));
        }
    }
    return AMP_OK;
}

amp_status amp_tensor_load(const amp_file *f, int threads, amp_load_progress_fn progress,
                           void *progress_ctx, amp_tensor *t, amp_error *err)
{
    const amp_meta *meta = amp_file_meta(f);
    const char *path = amp_file_path(f);
    amp_status rc = AMP_OK;
    load_job *jobs = NULL;
    size_t njobs = 0, max_raw = 1;
    uint64_t total = 0;
    memset(t, 0, sizeof *t);
    t->nmodes = meta->nmodes;
    t->nnz = meta->nnz;
    t->value_type = meta->value_type;
    t->norm_sq = meta->norm_sq;
    size_t vsize = amp_value_size(t->value_type);
    for (unsigned d = 0; d < t->nmodes; d++) {
        t->dims[d] = meta->dims[d];
        t->rows[d] = meta->compact_dims[d];
        const amp_mode_layout *l = amp_file_mode(f, d);
        for (uint32_t q = 0; q < l->nshards; q++)
            njobs += l->shards[q].nchunks;
    }
    jobs = malloc((njobs ? njobs : 1) * sizeof *jobs);
    if (jobs == NULL)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");

    /* Jobs of one mode are consecutive and in file order, so a mode's
     * jobs double as its block list. */
    size_t j = 0;
    size_t mode_first[AMP_MAX_MODES + 1];
    for (unsigned d = 0; d < t->nmodes; d++) {
        const amp_mode_layout *l = amp_file_mode(f, d);
        amp_copy *c = &t->copies[d];
        c->layout = *l;
        c->nnz = t->nnz;
        c->row_begin = 0;
        c->row_count = t->rows[d];
        c->early_nnz = t->nnz;
        mode_first[d] = j;
        uint64_t at = 0;
        for (uint32_t s = 0; s < l->nshards; s++)
            for (uint32_t q = 0; q < l->shards[s].nchunks; q++) {
                const amp_section *sec = amp_file_chunk(f, d, s, q);
                jobs[j++] = (load_job){sec, d, at};
                at += sec->count;
                total += sec->stored_size;
                if (sec->raw_size > max_raw)
                    max_raw = sec->raw_size;
            }
        if (at != t->nnz)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_FORMAT, "%s: mode %u's chunks hold %llu "
                           "nonzeros, not %llu", path, d + 1, (unsigned long long)at,
                           (unsigned long long)t->nnz);
        c->words = amp_huge_alloc((size_t)t->nnz * 8, "a mode copy's indices", err);
        c->vals = amp_huge_alloc((size_t)t->nnz * vsize, "a mode copy's values", err);
        if (c->words == NULL || c->vals == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for mode %u", d + 1);
        t->bytes += t->nnz * (8 + vsize);
        t->new_to_orig[d] = malloc((size_t)(t->rows[d] ? t->rows[d] : 1) * 8);
        if (t->new_to_orig[d] == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
        AMP_CHECK_GOTO(amp_file_read_relabel(f, d, t->new_to_orig[d], err), rc, fail);
    }
    mode_first[t->nmodes] = j;

    int nt = 1;
#ifdef _OPENMP
    nt = threads > 0 ? threads : omp_get_max_threads();
#else
    (void)threads;
#endif
    uint64_t done = 0;
    int failed = 0;
#pragma omp parallel num_threads(nt)
    {
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
            mrc = amp_section_read(r, s, buf, max_raw, &my);
            if (mrc == AMP_OK)
                mrc = amp_chunk_check(f, s, buf, &my);
            if (mrc == AMP_OK) {
                amp_copy *c = &t->copies[jb->mode];
                memcpy(c->words + jb->at, buf, (size_t)s->count * 8);
                memcpy((char *)c->vals + jb->at * vsize, (char *)buf + s->count * 8,
                       (size_t)s->count * vsize);
            }
            uint64_t now;
#pragma omp atomic capture
            now = done += s->stored_size;
#ifdef _OPENMP
            if (progress != NULL && omp_get_thread_num() == 0)
#else
            if (progress != NULL)
#endif
                progress(progress_ctx, now, total);
        }
        if (mrc != AMP_OK) {
#pragma omp critical(amp_tensor_load_error)
            {
                if (!failed)
                    amp_error_set(err, mrc, my.src_file, my.src_line, "%s",
                                  amp_error_message(&my));
                failed = 1;
            }
        }
        amp_free(buf);
        amp_section_reader_free(r);
    }
    if (failed) {
        rc = err ? err->status : AMP_ERR_FORMAT;
        goto fail;
    }

    for (unsigned d = 0; d < t->nmodes; d++) {
        amp_copy *c = &t->copies[d];
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
        AMP_CHECK_GOTO(check_order(f, c, jobs + first, n, err), rc, fail);
    }
    free(jobs);
    return AMP_OK;

fail:
    free(jobs);
    amp_tensor_free(t);
    return rc;
}
