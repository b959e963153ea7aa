/* One part of a tensor read from the file alone: a process of a run over
 * several (MPI) reads and decompresses only the chunks of the shards
 * dealt to it, never the whole tensor.
 *
 * The chunks land in a source tensor that holds only those shards, one
 * after the other in file order, with its own shard table (each wanted
 * shard's first_nnz moved to where it now starts) and block table (a
 * keyed copy has one block per chunk); amp_partition_tensor then builds
 * the part from it exactly as from the whole tensor, since it reads only
 * the part's own shards. The peak is twice the part, not the tensor. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_core.h"
#include "amp_threads.h"

typedef struct source {
    amp_tensor t;                       /* the wanted shards' nonzeros */
    amp_shard *shards[AMP_MAX_MODES];   /* t's shard tables, owned */
} source;

static void source_free(source *s)
{
    for (unsigned d = 0; d < s->t.nmodes; d++)
        free(s->shards[d]);
    amp_tensor_free(&s->t);   /* never frees layout.shards: it owns none */
}

/* Copy d of the source: its shard table, block table and room for its
 * nonzeros. */
static amp_status source_copy(const amp_file *f, const amp_tensor *t, const amp_partition *p,
                              unsigned part, unsigned d, source *s, amp_error *err)
{
    const amp_copy *c = &t->copies[d];
    const amp_mode_layout *l = &c->layout;
    amp_copy *o = &s->t.copies[d];
    const int keyed = l->key_bits > 0;
    const size_t vsize = amp_value_size(t->value_type);
    o->layout = *l;
    s->shards[d] = malloc((l->nshards ? l->nshards : 1) * sizeof *s->shards[d]);
    if (s->shards[d] == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    o->layout.shards = s->shards[d];
    uint64_t at = 0;
    size_t nchunks = 0;
    for (uint32_t q = 0; q < l->nshards; q++) {
        amp_shard sh = l->shards[q];
        if (p->modes[d].owner[q] == part) {
            sh.first_nnz = at;
            at += sh.nnz;
            nchunks += sh.nchunks;
        }
        s->shards[d][q] = sh;
    }
    o->nnz = at;
    o->row_begin = 0;
    o->row_count = t->rows[d];
    o->early_nnz = at;
    o->nblocks = keyed ? nchunks : 1;
    o->block_start = malloc((o->nblocks + 1) * sizeof *o->block_start);
    o->block_key = malloc((o->nblocks ? o->nblocks : 1) * sizeof *o->block_key);
    o->words = amp_huge_alloc((size_t)at * 8 + 1, "a process's share of a mode copy", err);
    o->vals = amp_huge_alloc((size_t)at * vsize + 1, "a process's share of a mode copy", err);
    if (o->block_start == NULL || o->block_key == NULL || o->words == NULL || o->vals == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for mode %u's %llu nonzeros of "
                        "part %u", d + 1, (unsigned long long)at, part);
    s->t.bytes += at * (8 + vsize);
    o->block_start[0] = 0;
    o->block_key[0] = 0;
    if (keyed) {   /* one block per chunk, as amp_tensor_load_layout makes them */
        size_t b = 0;
        uint64_t pos = 0;
        for (uint32_t q = 0; q < l->nshards; q++)
            for (uint32_t k = 0; k < l->shards[q].nchunks && p->modes[d].owner[q] == part; k++) {
                const amp_section *sec = amp_file_chunk(f, d, q, k);
                o->block_start[b] = pos;
                o->block_key[b++] = sec->aux;
                pos += sec->count;
            }
    }
    o->block_start[o->nblocks] = at;
    return AMP_OK;
}

/* Each chunk's words and values to their place in the source. */
static amp_status to_source(void *ctx, int thread, const amp_chunk_data *k, amp_error *err)
{
    source *s = ctx;
    amp_copy *c = &s->t.copies[k->mode];
    size_t vsize = amp_value_size(s->t.value_type);
    (void)thread, (void)err;
    memcpy(c->words + k->at, k->words, (size_t)k->count * 8);
    memcpy((char *)c->vals + k->at * vsize, k->vals, (size_t)k->count * vsize);
    return AMP_OK;
}

amp_status amp_partition_load(const amp_file *f, const amp_tensor *t, const amp_partition *p,
                              unsigned part, int threads, amp_load_progress_fn progress,
                              void *progress_ctx, amp_tensor *out, amp_error *err)
{
    source s;
    memset(&s, 0, sizeof s);
    memset(out, 0, sizeof *out);
    if (p->kind != AMP_PARTITION_OWNER || part >= p->ngpus || p->nmodes != t->nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "part %u of a partition into %u", part, p->ngpus);
    s.t.nmodes = t->nmodes;
    s.t.value_type = t->value_type;
    s.t.norm_sq = t->norm_sq;
    for (unsigned d = 0; d < t->nmodes; d++) {
        s.t.dims[d] = t->dims[d];
        s.t.rows[d] = t->rows[d];
    }
    threads = amp_thread_count(threads);
    amp_status rc = AMP_OK;
    for (unsigned d = 0; d < t->nmodes; d++)
        AMP_CHECK_GOTO(source_copy(f, t, p, part, d, &s, err), rc, done);
    for (unsigned d = 0; d < t->nmodes; d++)
        s.t.nnz = s.t.copies[d].nnz > s.t.nnz ? s.t.copies[d].nnz : s.t.nnz;
    AMP_CHECK_GOTO(amp_tensor_read_part_chunks(f, t, p, part, threads, to_source, &s, progress,
                                               progress_ctx, err), rc, done);
    rc = amp_partition_tensor(&s.t, p, part, threads, out, err);
done:
    source_free(&s);
    return rc;
}
