/* Streaming .amp writer.
 *
 * Sections go to the temporary file as they are produced, through a
 * thread that writes while the callers compute (write_queue.h), so memory
 * holds what the caller is producing plus the compressed bytes on their
 * way to the file (capped); the directory is kept in memory (64 bytes per
 * section) and written last. The header is written as zeros first and filled in at
 * commit, when the directory's place and checksum are known: a file that
 * is cut short therefore has no valid header, and never a final name. */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include <xxhash.h>
/* For ZSTD_c_literalCompressionMode, stable in practice since 1.5.1; the
 * parameter only shapes the output, any reader decodes it. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "amp_outfile.h"
#include "amp_threads.h"
#include "format_internal.h"
#include "write_queue.h"

/* Per-thread state of the parallel chunk writer, kept for the writer's
 * life: each mode copy reuses the buffers instead of faulting in fresh
 * ones (64 MiB a thread at the default chunk size). */
typedef struct chunk_worker {
    void *raw;            /* a chunk as stored uncompressed: words, then values */
    size_t raw_cap;
    unsigned char *planar;   /* two byte planes of a chunk at a time */
    size_t planar_cap;
    void *out, *out2;     /* compressed forms; out2 only while both are tried */
    size_t out_cap, out2_cap;
    ZSTD_CCtx *cctx;
    amp_error err;
    amp_status rc;
} chunk_worker;

struct amp_writer {
    amp_outfile own;        /* the output, unless the caller's (opts.out) */
    amp_outfile *out;
    amp_write_queue *wq;    /* every section after the blank header goes through it */
    amp_write_opts opts;
    amp_section *secs;
    size_t nsecs, cap;
    int have_meta;
    amp_meta meta;
    char text[3 * (AMP_META_TEXT_MAX + 1)];
    amp_mode_layout *layouts[AMP_MAX_MODES];
    ZSTD_CCtx *cctx;
    chunk_worker *workers;
    int nworkers;
};

void amp_write_opts_init(amp_write_opts *opts)
{
    opts->level = AMP_DEFAULT_LEVEL;
    opts->threads = 0;
    opts->no_sync = 0;
    opts->no_clobber = 0;
    opts->out = NULL;
    opts->queue_bytes = 0;
    opts->progress = NULL;
    opts->progress_ctx = NULL;
}

static amp_status grow_dir(amp_writer *w, size_t more, amp_error *err)
{
    if (w->nsecs + more <= w->cap)
        return AMP_OK;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < w->nsecs + more)
        cap *= 2;
    amp_section *s = realloc(w->secs, cap * sizeof *s);
    if (s == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for a directory of %zu sections",
                        cap);
    w->secs = s;
    w->cap = cap;
    return AMP_OK;
}

amp_status amp_writer_open(amp_writer **wp, const char *path, const amp_write_opts *opts,
                           amp_error *err)
{
    *wp = NULL;
    amp_write_opts o;
    if (opts == NULL)
        amp_write_opts_init(&o);
    else
        o = *opts;
    if (o.level < -7 || o.level > ZSTD_maxCLevel())
        return AMP_FAIL(err, AMP_ERR_USAGE, "compression level %d out of range (-7 to %d, or "
                        "0 to store uncompressed)", o.level, ZSTD_maxCLevel());
    amp_writer *w = calloc(1, sizeof *w);
    if (w == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    w->opts = o;
    w->own.fd = -1;
    w->cctx = ZSTD_createCCtx();
    if (w->cctx == NULL) {
        free(w);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for a compression context");
    }
    amp_status rc = AMP_OK;
    if (o.out != NULL) {
        w->out = o.out;
    } else {
        w->out = &w->own;
        rc = amp_outfile_open(w->out, path, err);
        w->out->no_sync = w->opts.no_sync;
        w->out->no_clobber = w->opts.no_clobber;
    }
    /* The header is written last, at offset 0: a pipe cannot take that. */
    if (rc == AMP_OK && amp_outfile_direct(w->out) && lseek(w->out->fd, 0, SEEK_CUR) != 0)
        rc = AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%s: an .amp file is written out of order, "
                      "which a pipe, FIFO or terminal cannot take: write it to a file",
                      w->out->final_path);
    if (rc == AMP_OK) {
        unsigned char zero[AMP_HEADER_SIZE] = {0};
        rc = amp_outfile_write(w->out, zero, sizeof zero, err);
    }
    if (rc == AMP_OK)
        rc = amp_wq_start(&w->wq, w->out, err);
    if (rc != AMP_OK) {
        amp_writer_abort(w);
        return rc;
    }
    *wp = w;
    return AMP_OK;
}

void amp_writer_abort(amp_writer *w)
{
    if (w == NULL)
        return;
    /* The thread stops before the file it writes to goes. */
    amp_wq_abandon(w->wq);
    w->wq = NULL;
    /* The caller's output is the caller's to drop (or place). */
    if (w->out == &w->own)
        amp_outfile_abort(w->out);
    for (unsigned d = 0; d < AMP_MAX_MODES; d++) {
        if (w->layouts[d] != NULL)
            free(w->layouts[d]->shards);
        free(w->layouts[d]);
    }
    ZSTD_freeCCtx(w->cctx);
    for (int i = 0; i < w->nworkers; i++) {
        free(w->workers[i].raw);
        free(w->workers[i].planar);
        free(w->workers[i].out);
        free(w->workers[i].out2);
        ZSTD_freeCCtx(w->workers[i].cctx);
    }
    free(w->workers);
    free(w->secs);
    free(w);
}

/* Grow a buffer to at least n bytes (its contents are not kept). */
static amp_status reserve(void **buf, size_t *cap, size_t n, const char *what, amp_error *err)
{
    if (*cap >= n)
        return AMP_OK;
    free(*buf);
    *buf = malloc(n ? n : 1);
    *cap = 0;
    if (*buf == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for a %zu-byte %s", n, what);
    *cap = n;
    return AMP_OK;
}

/* A fresh frame at this level. Raw literals at the fast levels: chunk
 * bytes are mostly indices and values whose low bytes Huffman coding
 * barely shrinks, and skipping it was measured to make decompression much
 * faster (bench/RESULTS.md). An old library that lacks the parameter just keeps
 * Huffman coding. */
static void set_level(ZSTD_CCtx *cctx, int level)
{
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
    if (level <= 1)
        (void)ZSTD_CCtx_setParameter(cctx, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
}

/* Compress raw into *out (a buffer of *out_cap bytes, grown as needed);
 * *stored is what goes to the file: the frame, or raw itself when
 * compression is off or gains nothing. */
static amp_status compress(ZSTD_CCtx *cctx, int level, const void *raw, size_t n,
                           void **out, size_t *out_cap, const void **stored,
                           size_t *stored_size, uint16_t *flags, amp_error *err)
{
    *stored = raw;
    *stored_size = n;
    *flags &= (uint16_t)~AMP_SECTION_ZSTD;
    if (level == 0 || n == 0)
        return AMP_OK;
    AMP_CHECK(reserve(out, out_cap, ZSTD_compressBound(n), "compression buffer", err));
    set_level(cctx, level);
    size_t z = ZSTD_compress2(cctx, *out, *out_cap, raw, n);
    if (ZSTD_isError(z))
        return AMP_FAIL(err, ZSTD_getErrorCode(z) == ZSTD_error_memory_allocation
                                 ? AMP_ERR_NOMEM : AMP_ERR_INTERNAL,
                        "compression failed: %s", ZSTD_getErrorName(z));
    if (z < n) {
        *stored = *out;
        *stored_size = z;
        *flags |= AMP_SECTION_ZSTD;
    }
    return AMP_OK;
}

/* Append stored bytes and their directory entry (desc gives the fields
 * other than the place, sizes and hash). */
/* Take the file's next stored_size bytes for a section and list it in the
 * directory (which the caller has grown); returns where the bytes go. */
static uint64_t place(amp_writer *w, const amp_section *desc, size_t stored_size,
                      size_t raw_size, uint16_t flags, uint64_t hash)
{
    amp_section s = *desc;
    s.flags = flags;
    s.offset = w->out->written;
    s.stored_size = stored_size;
    s.raw_size = raw_size;
    s.hash = hash;
    w->secs[w->nsecs++] = s;
    w->out->written += stored_size;
    return s.offset;
}

static amp_status append(amp_writer *w, const amp_section *desc, const void *stored,
                         size_t stored_size, size_t raw_size, uint16_t flags, uint64_t hash,
                         amp_error *err)
{
    AMP_CHECK(grow_dir(w, 1, err));
    amp_write_item *it = amp_wq_item(w->wq, stored_size);
    if (it == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for a %zu-byte section",
                        stored_size);
    memcpy(amp_wq_data(it), stored, stored_size);
    uint64_t at = place(w, desc, stored_size, raw_size, flags, hash);
    return amp_wq_submit(w->wq, it, at, err);
}

amp_status amp_writer_section(amp_writer *w, const amp_section *desc, const void *raw,
                              size_t raw_size, amp_error *err)
{
    void *buf = NULL;
    size_t cap = 0, stored_size;
    const void *stored;
    uint16_t flags = desc->flags;
    int level = (desc->flags & AMP_SECTION_ZSTD) ? w->opts.level : 0;
    amp_status rc = compress(w->cctx, level, raw, raw_size, &buf, &cap, &stored, &stored_size,
                             &flags, err);
    if (rc == AMP_OK)
        rc = append(w, desc, stored, stored_size, raw_size, flags,
                    XXH3_64bits(stored, stored_size), err);
    free(buf);
    return rc;
}

amp_status amp_writer_meta(amp_writer *w, const amp_meta *meta, amp_error *err)
{
    const char *path = w->out->final_path;
    if (w->have_meta)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: metadata written twice", path);
    AMP_CHECK(amp_check_meta(path, meta, err));
    size_t n = amp_meta_size(meta);
    unsigned char *p = malloc(n);
    if (p == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    amp_encode_meta(p, meta);
    /* Keep a decoded copy (with our own strings) for the checks at commit. */
    amp_status rc = amp_decode_meta(path, p, n, &w->meta, w->text, err);
    amp_section desc = {.type = AMP_SECTION_META, .mode = AMP_NO_INDEX,
                        .shard = AMP_NO_INDEX};
    if (rc == AMP_OK)
        rc = amp_writer_section(w, &desc, p, n, err);
    free(p);
    if (rc == AMP_OK)
        w->have_meta = 1;
    return rc;
}

amp_status amp_writer_fibers(amp_writer *w, unsigned mode, unsigned middle,
                             const uint64_t *counts, amp_error *err)
{
    const char *path = w->out->final_path;
    if (mode >= w->meta.nmodes || w->layouts[mode] == NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: mode %u fibers before its layout", path,
                        mode + 1);
    const amp_mode_layout *l = w->layouts[mode];
    amp_section desc = {.type = AMP_SECTION_FIBER,
                        .flags = AMP_SECTION_OPTIONAL | AMP_SECTION_ZSTD, .mode = mode,
                        .shard = AMP_NO_INDEX, .count = l->nshards, .aux = middle,
                        .raw_size = 8 * (uint64_t)l->nshards};
    AMP_CHECK(amp_check_fiber_counts(path, &desc, l, counts, err));
    unsigned char *p = malloc(8 * (size_t)l->nshards);
    if (p == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    for (uint32_t q = 0; q < l->nshards; q++)
        amp_put64(p + 8 * (size_t)q, counts[q]);
    amp_status rc = amp_writer_section(w, &desc, p, 8 * (size_t)l->nshards, err);
    free(p);
    return rc;
}

amp_status amp_writer_mode(amp_writer *w, const amp_mode_layout *layout, amp_error *err)
{
    const char *path = w->out->final_path;
    if (!w->have_meta)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: a mode layout before the metadata", path);
    if (layout->mode >= w->meta.nmodes || layout->nmodes != w->meta.nmodes ||
        w->layouts[layout->mode] != NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: mode %u layout is out of range or repeated",
                        path, layout->mode + 1);
    if (layout->nshards < 1 || layout->nshards > AMP_MAX_SHARDS)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: mode %u: %lu shards (allowed: 1 to %lu)",
                        path, layout->mode + 1, (unsigned long)layout->nshards,
                        (unsigned long)AMP_MAX_SHARDS);
    amp_mode_layout *copy = malloc(sizeof *copy);
    amp_shard *shards = malloc(layout->nshards * sizeof *shards);
    size_t n = amp_mode_size(layout->nmodes, layout->nshards);
    unsigned char *p = malloc(n);
    amp_status rc = AMP_OK;
    if (copy == NULL || shards == NULL || p == NULL) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        goto fail;
    }
    *copy = *layout;
    memcpy(shards, layout->shards, layout->nshards * sizeof *shards);
    copy->shards = shards;
    AMP_CHECK_GOTO(amp_check_mode(path, &w->meta, copy, err), rc, fail);
    amp_encode_mode(p, copy);
    amp_section desc = {.type = AMP_SECTION_MODE, .mode = layout->mode,
                        .shard = AMP_NO_INDEX};
    AMP_CHECK_GOTO(amp_writer_section(w, &desc, p, n, err), rc, fail);
    w->layouts[layout->mode] = copy;
    free(p);
    return AMP_OK;
fail:
    free(p);
    free(shards);
    free(copy);
    return rc;
}

struct amp_packed {
    const amp_writer *owner;
    amp_section desc;
    void *stored;        /* owned */
    size_t stored_size, raw_size;
    uint16_t flags;
    uint64_t hash;
};

void amp_packed_free(amp_packed *packed)
{
    if (packed != NULL)
        free(packed->stored);
    free(packed);
}

/* Reads only w's metadata, options and name, which no call changes after
 * amp_writer_meta: safe beside the writer's own thread. cctx is the
 * caller's, or NULL for one of the call's own (none at level 0). */
static amp_status pack_relabel(const amp_writer *w, ZSTD_CCtx *cctx, unsigned mode,
                               const uint64_t *new_to_orig, amp_packed **packed, amp_error *err)
{
    const char *path = w->out->final_path;
    *packed = NULL;
    if (!w->have_meta || mode >= w->meta.nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: relabelling of mode %u before the "
                        "metadata or out of range", path, mode + 1);
    uint64_t n = w->meta.compact_dims[mode];
    for (uint64_t k = 0; k < n; k++)
        if (new_to_orig[k] >= w->meta.dims[mode])
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s: mode %u relabelling maps %llu to %llu, "
                            "beyond the dimension", path, mode + 1, (unsigned long long)k,
                            (unsigned long long)new_to_orig[k]);
    ZSTD_CCtx *own = NULL;
    amp_packed *p = calloc(1, sizeof *p);
    void *buf = NULL;
    size_t cap = 0;
    const void *stored = NULL;
    amp_status rc = AMP_OK;
    if (cctx == NULL && w->opts.level != 0)
        cctx = own = ZSTD_createCCtx();
    if (p == NULL || (cctx == NULL && w->opts.level != 0))
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "%s: out of memory for mode %u's "
                       "relabelling", path, mode + 1);
    p->owner = w;
    p->desc = (amp_section){.type = AMP_SECTION_RELABEL, .flags = AMP_SECTION_ZSTD,
                            .mode = mode, .shard = AMP_NO_INDEX, .count = n};
    p->raw_size = n * sizeof *new_to_orig;
    p->flags = p->desc.flags;
    AMP_CHECK_GOTO(compress(cctx, w->opts.level, new_to_orig, p->raw_size, &buf, &cap,
                            &stored, &p->stored_size, &p->flags, err),
                   rc, fail);
    if (stored == buf) {
        p->stored = buf;
        buf = NULL;
    } else {
        /* Stored as it is: the caller's array need not outlive the call. */
        p->stored = malloc(p->stored_size ? p->stored_size : 1);
        if (p->stored == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "%s: out of memory for mode %u's "
                           "relabelling", path, mode + 1);
        memcpy(p->stored, stored, p->stored_size);
    }
    p->hash = XXH3_64bits(p->stored, p->stored_size);
    *packed = p;
    p = NULL;
fail:
    free(buf);
    ZSTD_freeCCtx(own);
    amp_packed_free(p);
    return rc;
}

amp_status amp_writer_pack_relabel(const amp_writer *w, unsigned mode,
                                   const uint64_t *new_to_orig, amp_packed **packed,
                                   amp_error *err)
{
    return pack_relabel(w, NULL, mode, new_to_orig, packed, err);
}

amp_status amp_writer_put(amp_writer *w, amp_packed *packed, amp_error *err)
{
    if (packed == NULL || packed->owner != w) {
        amp_packed_free(packed);
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: no section, or one packed for another "
                        "file", w->out->final_path);
    }
    amp_status rc = append(w, &packed->desc, packed->stored, packed->stored_size,
                           packed->raw_size, packed->flags, packed->hash, err);
    amp_packed_free(packed);
    return rc;
}

amp_status amp_writer_relabel(amp_writer *w, unsigned mode, const uint64_t *new_to_orig,
                              amp_error *err)
{
    amp_packed *p;
    AMP_CHECK(pack_relabel(w, w->cctx, mode, new_to_orig, &p, err));
    return amp_writer_put(w, p, err);
}


/* The two forms a compressed chunk may take: words and values both in
 * byte planes (the usual winner, and the faster to decompress), or only the
 * words (better when whole values repeat). */
enum { FORM_ALL_PLANES = 1, FORM_WORD_PLANES = 2 };

/* n bytes into the frame; *full when the output buffer filled first (the
 * stream takes no more input then, and would never end). */
static amp_status feed(ZSTD_CCtx *cctx, ZSTD_outBuffer *out, const void *p, size_t n,
                       int *full, amp_error *err)
{
    ZSTD_inBuffer in = {p, n, 0};
    while (in.pos < in.size && !*full) {
        size_t r = ZSTD_compressStream2(cctx, out, &in, ZSTD_e_continue);
        if (ZSTD_isError(r))
            return AMP_FAIL(err, AMP_ERR_INTERNAL, "compression failed: %s",
                            ZSTD_getErrorName(r));
        *full = out->pos == out->size && in.pos < in.size;
    }
    return AMP_OK;
}

/* One chunk in planar form, compressed as one frame without the whole
 * planar chunk in memory: its byte planes are made two at a time (2 n
 * bytes) and fed to the compressor, which keeps only its window. The
 * words go in planes; the values too when values_planar, else as they
 * are. A whole planar copy per compressing thread (16 MiB at the default
 * chunk size with f64 values) was the largest part of the peak memory at
 * 16 threads. *size is SIZE_MAX when the frame gains nothing. */
static amp_status compress_planar(chunk_worker *wk, int level, size_t n, size_t vsize,
                                  const uint64_t *words, const void *vals, int values_planar,
                                  void **out, size_t *out_cap, size_t *size)
{
    size_t raw_size = n * (8 + vsize);
    *size = SIZE_MAX;
    AMP_CHECK(reserve((void **)&wk->planar, &wk->planar_cap, 2 * n, "chunk buffer",
                      &wk->err));
    AMP_CHECK(reserve(out, out_cap, ZSTD_compressBound(raw_size), "compression buffer",
                      &wk->err));
    set_level(wk->cctx, level);
    ZSTD_CCtx_setPledgedSrcSize(wk->cctx, raw_size);
    ZSTD_outBuffer o = {*out, *out_cap, 0};
    int full = 0;
    for (unsigned b = 0; b < 8 && !full; b += 2) {
        amp_word_planes(words, n, b, 2, wk->planar);
        AMP_CHECK(feed(wk->cctx, &o, wk->planar, 2 * n, &full, &wk->err));
    }
    if (!values_planar) {
        AMP_CHECK(feed(wk->cctx, &o, vals, vsize * n, &full, &wk->err));
    } else {
        for (unsigned b = 0; b < vsize && !full; b += 2) {
            if (vsize == 8)
                amp_word_planes((const uint64_t *)vals, n, b, 2, wk->planar);
            else
                amp_u32_planes((const uint32_t *)vals, n, b, 2, wk->planar);
            AMP_CHECK(feed(wk->cctx, &o, wk->planar, 2 * n, &full, &wk->err));
        }
    }
    ZSTD_inBuffer none = {NULL, 0, 0};
    size_t left = 1;   /* until the frame has ended */
    while (left != 0 && !full) {
        left = ZSTD_compressStream2(wk->cctx, &o, &none, ZSTD_e_end);
        if (ZSTD_isError(left))
            return AMP_FAIL(&wk->err, AMP_ERR_INTERNAL, "compression failed: %s",
                            ZSTD_getErrorName(left));
        full = left != 0 && o.pos == o.size;
    }
    if (!full && o.pos < raw_size)
        *size = o.pos;
    return AMP_OK;
}

/* Compress one chunk, its n words and n values read where they lie, in
 * the forms asked for and keep the smallest; when none gains (or level
 * 0), the words and values are stored as they are, one after the other. */
static amp_status compress_chunk(chunk_worker *wk, int level, size_t n, size_t vsize, int forms,
                                 const uint64_t *words, const void *vals, const void **stored,
                                 size_t *stored_size, uint16_t *flags)
{
    size_t raw_size = n * (8 + vsize);
    *flags = 0;
    if (level != 0) {
        size_t a_size = SIZE_MAX, b_size = SIZE_MAX;
        if (forms & FORM_ALL_PLANES)
            AMP_CHECK(compress_planar(wk, level, n, vsize, words, vals, 1, &wk->out,
                                      &wk->out_cap, &a_size));
        if (forms & FORM_WORD_PLANES) {
            /* The second output buffer only when both forms are kept. */
            int both = forms & FORM_ALL_PLANES;
            AMP_CHECK(compress_planar(wk, level, n, vsize, words, vals, 0,
                                      both ? &wk->out2 : &wk->out,
                                      both ? &wk->out2_cap : &wk->out_cap, &b_size));
        }
        if (a_size != SIZE_MAX && a_size <= b_size) {
            *stored = wk->out;
            *stored_size = a_size;
            *flags = AMP_SECTION_ZSTD | AMP_SECTION_PLANAR_WORDS | AMP_SECTION_PLANAR_VALUES;
            return AMP_OK;
        }
        if (b_size != SIZE_MAX) {
            *stored = (forms & FORM_ALL_PLANES) ? wk->out2 : wk->out;
            *stored_size = b_size;
            *flags = AMP_SECTION_ZSTD | AMP_SECTION_PLANAR_WORDS;
            return AMP_OK;
        }
    }
    *stored_size = raw_size;
    if ((const unsigned char *)vals == (const unsigned char *)words + 8 * n) {
        *stored = words;   /* already one piece */
        return AMP_OK;
    }
    AMP_CHECK(reserve(&wk->raw, &wk->raw_cap, raw_size, "chunk buffer", &wk->err));
    memcpy(wk->raw, words, 8 * n);
    memcpy((unsigned char *)wk->raw + 8 * n, vals, vsize * n);
    *stored = wk->raw;
    return AMP_OK;
}

/* Workers for n threads, each with a compression context; their buffers
 * grow when first needed (chunks are read where they lie). */
static amp_status ensure_workers(amp_writer *w, int n, amp_error *err)
{
    if (w->nworkers < n) {
        chunk_worker *p = realloc(w->workers, (size_t)n * sizeof *p);
        if (p == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        memset(p + w->nworkers, 0, (size_t)(n - w->nworkers) * sizeof *p);
        w->workers = p;
        w->nworkers = n;
    }
    for (int i = 0; i < n; i++) {
        chunk_worker *wk = &w->workers[i];
        if (wk->cctx == NULL && (wk->cctx = ZSTD_createCCtx()) == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for a compression context");
    }
    return AMP_OK;
}

/* A compressed chunk waiting for its place in the file. */
typedef struct pending_chunk {
    amp_write_item *item;   /* its stored bytes, copied for the writing thread */
    size_t stored_size, raw_size;
    uint16_t flags;
    uint64_t hash;
    int done;
} pending_chunk;

/* When a thread may start compressing chunk i: while the compressed bytes
 * not yet written are under the cap, or when i is the next chunk to be
 * placed (the bytes ahead of it cannot leave before it does), or after a
 * failure. */
typedef struct chunk_turn {
    size_t i;
    const size_t *next;
    const int *failed;
    uint64_t cap;
} chunk_turn;

static int may_compress(void *ctx, uint64_t held)
{
    const chunk_turn *t = ctx;
    return held <= t->cap || __atomic_load_n(t->next, __ATOMIC_ACQUIRE) == t->i ||
           __atomic_load_n(t->failed, __ATOMIC_ACQUIRE);
}

/* Record a chunk's failure (the first one wins) and stop the others,
 * waking any held back at the cap. */
static void chunk_failed(amp_writer *w, amp_status *rc, amp_error *err, int *failed,
                         const amp_error *e)
{
#pragma omp critical(amp_writer_error)
    {
        if (*rc == AMP_OK)
            *rc = amp_error_set(err, e->status, e->src_file, e->src_line, "%s", e->msg);
    }
    __atomic_store_n(failed, 1, __ATOMIC_RELEASE);
    amp_wq_wake(w->wq);
}


amp_status amp_writer_chunks(amp_writer *w, const amp_chunk_job *jobs, size_t njobs,
                             amp_chunk_view_fn view, void *ctx, amp_error *err)
{
    const char *path = w->out->final_path;
    if (!w->have_meta)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: chunks before the metadata", path);
    if (view == NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: no function to find the chunks", path);
    size_t vsize = amp_value_size(w->meta.value_type), max_raw = 0;
    for (size_t i = 0; i < njobs; i++) {
        if (jobs[i].count < 1 || jobs[i].count > AMP_CHUNK_NNZ_MAX ||
            jobs[i].mode >= w->meta.nmodes)
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s: chunk %zu: %llu nonzeros in mode %lu",
                            path, i, (unsigned long long)jobs[i].count,
                            (unsigned long)jobs[i].mode + 1);
        size_t raw = (size_t)jobs[i].count * (8 + vsize);
        if (raw > max_raw)
            max_raw = raw;
    }
    AMP_CHECK(grow_dir(w, njobs, err));
    int nthreads = amp_thread_count(w->opts.threads);
    if ((size_t)nthreads > njobs)
        nthreads = njobs > 0 ? (int)njobs : 1;
    amp_status rc = ensure_workers(w, nthreads, err);
    if (rc != AMP_OK)
        return rc;
    int failed = 0;
    /* One form for the whole batch (a mode copy), chosen on its largest
     * chunk: the values, which decide it, are alike across chunks, and
     * trying both on every chunk would double the compression time. */
    int forms = FORM_ALL_PLANES;
    if (w->opts.level != 0 && njobs > 1) {
        size_t big = 0;
        for (size_t i = 1; i < njobs; i++)
            if (jobs[i].count > jobs[big].count)
                big = i;
        chunk_worker *probe = &w->workers[0];
        const void *st, *vals = NULL;
        const uint64_t *words = NULL;
        size_t st_size;
        uint16_t fl = 0;
        amp_error_clear(&probe->err);
        size_t count = (size_t)jobs[big].count, sample = count < 65536 ? count : 65536;
        rc = view(ctx, big, &words, &vals, err);
        /* A sample decides as well as the whole chunk and costs a sixteenth
         * of the time (this runs on one thread while the others wait): its
         * first 2^16 nonzeros. */
        if (rc == AMP_OK)
            rc = compress_chunk(probe, w->opts.level, sample, vsize,
                                FORM_ALL_PLANES | FORM_WORD_PLANES, words, vals, &st, &st_size,
                                &fl);
        if (rc != AMP_OK && probe->err.status != AMP_OK)
            amp_error_set(err, probe->err.status, probe->err.src_file, probe->err.src_line,
                          "%s", probe->err.msg);
        if ((fl & AMP_SECTION_ZSTD) && !(fl & AMP_SECTION_PLANAR_VALUES))
            forms = FORM_WORD_PLANES;
        if (rc != AMP_OK)
            return rc;
    }
    /* Chunks are compressed out of order and placed in the file in order,
     * so the file is the same for any thread count. Each compressed chunk
     * is copied out of its thread's buffer; whoever completes the chunk at
     * the head places it and every waiting chunk after it, and hands them
     * to the writing thread. No thread waits for another's chunk or for
     * the disk unless the bytes not yet written pass the cap. */
    pending_chunk *pend = calloc(njobs ? njobs : 1, sizeof *pend);
    if (pend == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: out of memory", path);
    size_t next = 0;
    const uint64_t held_cap = w->opts.queue_bytes
                                  ? w->opts.queue_bytes
                                  : (uint64_t)nthreads * max_raw + (UINT64_C(64) << 20);
#pragma omp parallel num_threads(nthreads)
    {
        chunk_worker *wk = &w->workers[amp_thread_id()];
        wk->rc = AMP_OK;
        amp_error_clear(&wk->err);
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < njobs; i++) {
            chunk_turn turn = {i, &next, &failed, held_cap};
            amp_wq_wait(w->wq, may_compress, &turn);
            if (__atomic_load_n(&failed, __ATOMIC_ACQUIRE) || wk->rc != AMP_OK)
                continue;
            const void *stored = NULL;
            size_t stored_size = 0, raw_size = (size_t)jobs[i].count * (8 + vsize);
            uint16_t flags = 0;
            const uint64_t *words = NULL;
            const void *vals = NULL;
            wk->rc = view(ctx, i, &words, &vals, &wk->err);
            if (wk->rc == AMP_OK)
                wk->rc = compress_chunk(wk, w->opts.level, (size_t)jobs[i].count, vsize, forms,
                                        words, vals, &stored, &stored_size, &flags);
            amp_write_item *item = NULL;
            if (wk->rc == AMP_OK && (item = amp_wq_item(w->wq, stored_size)) == NULL)
                wk->rc = AMP_FAIL(&wk->err, AMP_ERR_NOMEM, "%s: out of memory for a "
                                  "%zu-byte chunk", path, stored_size);
            if (wk->rc != AMP_OK) {
                chunk_failed(w, &rc, err, &failed, &wk->err);
                continue;
            }
            memcpy(amp_wq_data(item), stored, stored_size);
            uint64_t hash = XXH3_64bits(amp_wq_data(item), stored_size);
            int placed = 0;
#pragma omp critical(amp_writer_place)
            {
                pend[i] = (pending_chunk){item, stored_size, raw_size, flags, hash, 1};
                while (!__atomic_load_n(&failed, __ATOMIC_ACQUIRE) && next < njobs &&
                       pend[next].done) {
                    amp_section desc = {.type = AMP_SECTION_CHUNK, .mode = jobs[next].mode,
                                        .shard = jobs[next].shard, .seq = jobs[next].seq,
                                        .count = jobs[next].count, .aux = jobs[next].key};
                    pending_chunk *pc = &pend[next];
                    uint64_t at = place(w, &desc, pc->stored_size, pc->raw_size, pc->flags,
                                        pc->hash);
                    if (w->opts.progress != NULL)
                        w->opts.progress(w->opts.progress_ctx, jobs[next].count);
                    amp_write_item *it = pc->item;
                    pc->item = NULL;
                    if (amp_wq_submit(w->wq, it, at, &wk->err) != AMP_OK)
                        chunk_failed(w, &rc, err, &failed, &wk->err);
                    __atomic_store_n(&next, next + 1, __ATOMIC_RELEASE);
                    placed = 1;
                }
            }
            /* Threads held back at the cap may go once the head moves. */
            if (placed)
                amp_wq_wake(w->wq);
        }
    }
    /* After a failure, chunks that never reached the head. */
    for (size_t i = 0; i < njobs; i++)
        amp_wq_discard(w->wq, pend[i].item);
    free(pend);
    return rc;
}


/* The checks a reader will make, run on what was written, so that a bug in
 * a producer shows up here and not as a file that cannot be opened. */
static amp_status check_written(amp_writer *w, amp_error *err)
{
    const char *path = w->out->final_path;
    size_t n = w->nsecs, meta_at;
    uint32_t *chunk_index[AMP_MAX_MODES] = {0}, *remap_index[AMP_MAX_MODES] = {0};
    amp_status rc = AMP_OK;
    if (!w->have_meta)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: no metadata was written", path);
    AMP_CHECK(amp_check_entries(path, w->secs, n, w->out->written, err));
    AMP_CHECK(amp_find_unique(path, w->secs, n, AMP_SECTION_META, AMP_NO_INDEX, &meta_at,
                              err));
    for (unsigned d = 0; d < w->meta.nmodes; d++) {
        size_t at;
        if (w->layouts[d] == NULL)
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s: mode %u has no layout", path, d + 1);
        AMP_CHECK(amp_find_unique(path, w->secs, n, AMP_SECTION_RELABEL, d, &at, err));
        if (at == n)
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s: mode %u has no relabelling", path, d + 1);
    }
    for (unsigned d = 0; d < w->meta.nmodes && rc == AMP_OK; d++) {
        uint64_t nc = amp_mode_nchunks(w->layouts[d]);
        chunk_index[d] = malloc((nc ? nc : 1) * sizeof **chunk_index);
        remap_index[d] = malloc((nc ? nc : 1) * sizeof **remap_index);
        if (chunk_index[d] == NULL || remap_index[d] == NULL)
            rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    if (rc == AMP_OK)
        rc = amp_check_directory(path, w->secs, n, &w->meta, w->layouts, chunk_index,
                                 remap_index, err);
    size_t fiber_at[AMP_MAX_MODES];
    if (rc == AMP_OK)
        rc = amp_check_fibers(path, w->secs, n, &w->meta, w->layouts, fiber_at, err);
    for (unsigned d = 0; d < AMP_MAX_MODES; d++) {
        free(chunk_index[d]);
        free(remap_index[d]);
    }
    return rc;
}

amp_status amp_writer_commit(amp_writer *w, uint64_t *file_size, amp_error *err)
{
    amp_status rc = AMP_OK;
    unsigned char *dir = NULL;
    amp_error check = {0};
    amp_write_queue *wq = w->wq;
    w->wq = NULL;
    AMP_CHECK_GOTO(amp_wq_finish(wq, err), rc, fail);
    if (check_written(w, &check) != AMP_OK) {
        rc = AMP_FAIL(err, check.status == AMP_ERR_NOMEM ? AMP_ERR_NOMEM : AMP_ERR_INTERNAL,
                      "refusing to finish an inconsistent file: %s", check.msg);
        goto fail;
    }
    size_t dir_size = AMP_DIR_HEADER_SIZE + w->nsecs * (size_t)AMP_DIR_ENTRY_SIZE;
    dir = malloc(dir_size);
    if (dir == NULL) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the directory");
        goto fail;
    }
    memcpy(dir, AMP_DIR_MAGIC, AMP_MAGIC_LEN);
    amp_put32(dir + 8, AMP_DIR_ENTRY_SIZE);
    amp_put32(dir + 12, 0);
    amp_put64(dir + 16, w->nsecs);
    for (size_t i = 0; i < w->nsecs; i++)
        amp_encode_entry(dir + AMP_DIR_HEADER_SIZE + i * AMP_DIR_ENTRY_SIZE, &w->secs[i]);
    uint64_t dir_offset = w->out->written, dir_hash = XXH3_64bits(dir, dir_size);
    AMP_CHECK_GOTO(amp_outfile_write(w->out, dir, dir_size, err), rc, fail);
    unsigned char trailer[AMP_TRAILER_SIZE], header[AMP_HEADER_SIZE];
    amp_encode_trailer(trailer, dir_offset, dir_size, dir_hash);
    AMP_CHECK_GOTO(amp_outfile_write(w->out, trailer, sizeof trailer, err), rc, fail);
    amp_encode_header(header, w->out->written, dir_offset, dir_size, dir_hash);
    if (pwrite(w->out->fd, header, sizeof header, 0) != (ssize_t)sizeof header) {
        rc = AMP_FAIL(err, AMP_ERR_IO, "%s: cannot write the header: %s", w->out->final_path,
                      strerror(errno));
        goto fail;
    }
    uint64_t size = w->out->written;
    AMP_CHECK_GOTO(w->out == &w->own ? amp_outfile_commit(w->out, err)
                                     : amp_outfile_finish(w->out, err), rc, fail);
    if (file_size != NULL)
        *file_size = size;
fail:
    free(dir);
    amp_writer_abort(w);
    return rc;
}
