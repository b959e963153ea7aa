/* Reading sections of an open file: checksum first, then decompression
 * straight into the caller's buffer, then (for chunks and relabellings)
 * the content checks a consumer needs before indices address memory. */
#include <config.h>

#include <math.h>
#include <stdlib.h>

#include <xxhash.h>
#include <zstd.h>

#include "amp_threads.h"
#include "reader_internal.h"

struct amp_section_reader {
    const amp_file *f;
    ZSTD_DCtx *dctx;
    void *buf;            /* stored bytes */
    size_t cap;
    unsigned char *planar;/* decompressed planar chunks, before the words are rebuilt */
    size_t planar_cap;
};

amp_status amp_section_reader_new(const amp_file *f, amp_section_reader **rp, amp_error *err)
{
    amp_section_reader *r = calloc(1, sizeof *r);
    if (r == NULL || (r->dctx = ZSTD_createDCtx()) == NULL) {
        free(r);
        *rp = NULL;
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for a decompression context");
    }
    r->f = f;
    *rp = r;
    return AMP_OK;
}

void amp_section_reader_free(amp_section_reader *r)
{
    if (r == NULL)
        return;
    ZSTD_freeDCtx(r->dctx);
    free(r->buf);
    free(r->planar);
    free(r);
}

static amp_status check_hash(const amp_file *f, const amp_section *s, const void *p,
                             amp_error *err)
{
    char name[96];
    uint64_t h = XXH3_64bits(p, (size_t)s->stored_size);
    if (!amp_hash_matches(s->hash, h))
        return AMP_FAIL(err, AMP_ERR_CHECKSUM, "%s: %s: checksum mismatch (stored %016llx, "
                        "computed %016llx): the section is damaged", f->path,
                        AMP_SECTION_NAME(s, name),
                        (unsigned long long)s->hash, (unsigned long long)h);
    return AMP_OK;
}

/* s's stored bytes into buf; a failed read is tried again with s named
 * for the message (a truncated file fails the same way twice). */
static amp_status pread_section(const amp_file *f, const amp_section *s, void *buf,
                                amp_error *err)
{
    amp_error quiet = {0};
    char name[96];
    if (amp_pread_full(f, buf, (size_t)s->stored_size, s->offset, "section", &quiet) == AMP_OK)
        return AMP_OK;
    return amp_pread_full(f, buf, (size_t)s->stored_size, s->offset,
                          AMP_SECTION_NAME(s, name), err);
}

/* The stored bytes of s into the reader's buffer, checksum verified. */
static amp_status load_stored(amp_section_reader *r, const amp_section *s, amp_error *err)
{
    const amp_file *f = r->f;
    if (r->cap < s->stored_size) {
        void *p = realloc(r->buf, (size_t)s->stored_size);
        if (p == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for a %llu-byte section",
                            (unsigned long long)s->stored_size);
        r->buf = p;
        r->cap = (size_t)s->stored_size;
    }
    AMP_CHECK(pread_section(f, s, r->buf, err));
    return check_hash(f, s, r->buf, err);
}

/* Stored bytes (checksum verified) to the raw form in dst. */
static amp_status decode(amp_section_reader *r, const amp_section *s, const void *stored,
                         void *dst, size_t dst_size, int keep_planes, amp_error *err)
{
    const amp_file *f = r->f;
    char name[96];
    if (dst_size < s->raw_size)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: %s: %llu bytes do not fit a %zu-byte buffer",
                        f->path, AMP_SECTION_NAME(s, name), (unsigned long long)s->raw_size,
                        dst_size);
    if (!(s->flags & AMP_SECTION_ZSTD)) {
        memcpy(dst, stored, (size_t)s->stored_size);
        return AMP_OK;
    }
    int planar = !keep_planes &&
                 (s->flags & (AMP_SECTION_PLANAR_WORDS | AMP_SECTION_PLANAR_VALUES)) != 0;
    if (planar && r->planar_cap < s->raw_size) {
        free(r->planar);
        r->planar_cap = 0;
        r->planar = malloc((size_t)s->raw_size);
        if (r->planar == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for a %llu-byte chunk",
                            (unsigned long long)s->raw_size);
        r->planar_cap = (size_t)s->raw_size;
    }
    void *out = planar ? (void *)r->planar : dst;
    size_t got = ZSTD_decompressDCtx(r->dctx, out, (size_t)s->raw_size, stored,
                                     (size_t)s->stored_size);
    if (ZSTD_isError(got))
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: cannot be decompressed (%s) although "
                        "its checksum holds", f->path, AMP_SECTION_NAME(s, name),
                        ZSTD_getErrorName(got));
    if (got != s->raw_size)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: decompresses to %zu bytes, the "
                        "directory says %llu", f->path, AMP_SECTION_NAME(s, name), got,
                        (unsigned long long)s->raw_size);
    if (planar) {
        /* The directory check guarantees raw_size = count * (8 + value size). */
        size_t n = (size_t)s->count, vsize = (size_t)s->raw_size / n - 8;
        unsigned char *vals = (unsigned char *)dst + 8 * n;
        if (s->flags & AMP_SECTION_PLANAR_WORDS)
            amp_planes_to_words(r->planar, n, dst);
        else
            memcpy(dst, r->planar, 8 * n);
        if (!(s->flags & AMP_SECTION_PLANAR_VALUES))
            memcpy(vals, r->planar + 8 * n, vsize * n);
        else if (vsize == 8)
            amp_planes_to_words(r->planar + 8 * n, n, (uint64_t *)(void *)vals);
        else
            amp_planes_to_u32(r->planar + 8 * n, n, (uint32_t *)(void *)vals);
    }
    return AMP_OK;
}

static amp_status read_section(amp_section_reader *r, const amp_section *s, void *dst,
                               size_t dst_size, int keep_planes, amp_error *err)
{
    const amp_file *f = r->f;
    char name[96];
    if (dst_size < s->raw_size)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: %s: %llu bytes do not fit a %zu-byte buffer",
                        f->path, AMP_SECTION_NAME(s, name), (unsigned long long)s->raw_size,
                        dst_size);
    if (!(s->flags & AMP_SECTION_ZSTD)) {   /* straight into dst */
        AMP_CHECK(pread_section(f, s, dst, err));
        return check_hash(f, s, dst, err);
    }
    AMP_CHECK(load_stored(r, s, err));
    return decode(r, s, r->buf, dst, dst_size, keep_planes, err);
}

amp_status amp_section_read_stored(amp_section_reader *r, const amp_section *s,
                                   const void **stored, amp_error *err)
{
    AMP_CHECK(load_stored(r, s, err));
    *stored = r->buf;
    return AMP_OK;
}

amp_status amp_section_decode(amp_section_reader *r, const amp_section *s, const void *stored,
                              void *dst, size_t dst_size, amp_error *err)
{
    return decode(r, s, stored, dst, dst_size, 0, err);
}

amp_status amp_section_read(amp_section_reader *r, const amp_section *s, void *dst,
                            size_t dst_size, amp_error *err)
{
    return read_section(r, s, dst, dst_size, 0, err);
}

amp_status amp_section_read_planes(amp_section_reader *r, const amp_section *s, void *dst,
                                   size_t dst_size, amp_error *err)
{
    return read_section(r, s, dst, dst_size, 1, err);
}

/* The check below at memory speed for the common chunk: every field in
 * the word or in the block key alone, all tests folded into one flag and
 * the values in a loop of their own. 0 when anything is wrong (or the
 * layout is not one this handles): the exact loop then names the first
 * bad nonzero. */
static int chunk_clean(const amp_meta *m, const amp_mode_layout *l, const amp_shard *sh,
                       const amp_section *s, const unsigned char *raw, uint64_t used,
                       uint64_t *first, uint64_t *last)
{
    unsigned nw = 0, out = l->mode;
    unsigned shift[AMP_MAX_MODES];
    uint64_t mask[AMP_MAX_MODES], top[AMP_MAX_MODES];
    uint64_t out_fixed = UINT64_MAX, out_mask = 0;
    unsigned out_shift = 0;
    int out_in_word = 0;
    for (unsigned i = 0; i < m->nmodes; i++) {
        unsigned sh_i = l->shift[i], w_i = l->width[i];
        if (w_i == 0 || sh_i >= 64) {   /* one value for the whole chunk */
            uint64_t v = amp_blco_field(s->aux, 0, sh_i, w_i);
            if (v >= m->compact_dims[i])
                return 0;
            if (i == out)
                out_fixed = v;
            continue;
        }
        if (sh_i + w_i > 64 || w_i >= 64)
            return 0;
        uint64_t mk = (UINT64_C(1) << w_i) - 1;
        if (i == out) {   /* ascending from the shard's first row: bounded below */
            out_in_word = 1;
            out_shift = sh_i;
            out_mask = mk;
            continue;
        }
        if (m->compact_dims[i] == 0)
            return 0;
        shift[nw] = sh_i;
        mask[nw] = mk;
        /* The largest index allowed, as a signed number: a field is below
         * 2^63 (width 63 at most), so both fit. */
        top[nw++] = m->compact_dims[i] - 1 > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX
                                                                  : m->compact_dims[i] - 1;
    }
    uint64_t bad = 0, end = sh->index_end, n = s->count;
    if (end > m->compact_dims[out])
        return 0;
    if (!out_in_word)
        bad |= out_fixed < sh->index_begin || out_fixed >= end;
    const uint64_t *words = (const uint64_t *)(const void *)raw;
    /* Blocks that stay in L1 while each test sweeps them in a loop the
     * compiler vectorizes. Comparisons are written as the sign of a
     * difference of numbers below 2^63: SSE2, the x86-64 baseline, has no
     * 64-bit compare. */
    enum { BLOCK = 2048 };
    for (uint64_t b = 0; b < n; b += BLOCK) {
        const uint64_t *w = words + b;
        uint64_t len = n - b < BLOCK ? n - b : BLOCK;
        uint64_t stray = 0;
#pragma omp simd reduction(|:stray)
        for (uint64_t k = 0; k < len; k++)
            stray |= w[k] & ~used;
        bad |= stray;
        for (unsigned j = 0; j < nw; j++) {
            uint64_t sj = shift[j], mj = mask[j], tj = top[j], over = 0;
#pragma omp simd reduction(|:over)
            for (uint64_t k = 0; k < len; k++)
                over |= (tj - ((w[k] >> sj) & mj)) >> 63;
            bad |= over;
        }
        if (out_in_word) {   /* ascending, so only the last can pass the end */
            uint64_t prev = b == 0 ? sh->index_begin : (w[-1] >> out_shift) & out_mask;
            uint64_t down = ((w[0] >> out_shift) & out_mask) < prev;
#pragma omp simd reduction(|:down)
            for (uint64_t k = 1; k < len; k++)
                down |= (((w[k] >> out_shift) & out_mask) -
                         ((w[k - 1] >> out_shift) & out_mask)) >> 63;
            bad |= down;
        }
    }
    if (out_in_word && n > 0)
        bad |= ((words[n - 1] >> out_shift) & out_mask) >= end;
    if (m->value_type == AMP_VALUES_F32) {
        const uint32_t *v = (const uint32_t *)(const void *)(raw + 8 * n);
        uint32_t inf = 0;
#pragma omp simd reduction(|:inf)
        for (uint64_t k = 0; k < n; k++)
            inf |= (((v[k] >> 23) & 0xffu) + 1) >> 8;   /* exponent all ones */
        bad |= inf;
    } else {
        const uint64_t *v = (const uint64_t *)(const void *)(raw + 8 * n);
        uint64_t inf = 0;
#pragma omp simd reduction(|:inf)
        for (uint64_t k = 0; k < n; k++)
            inf |= (((v[k] >> 52) & 0x7ff) + 1) >> 11;
        bad |= inf;
    }
    if (bad)
        return 0;
    if (n == 0) {
        *last = sh->index_begin;
        return 1;
    }
    *first = out_in_word ? (words[0] >> out_shift) & out_mask : out_fixed;
    *last = out_in_word ? (words[n - 1] >> out_shift) & out_mask : out_fixed;
    return 1;
}

/* The output index of every nonzero, so that chunk order can be checked
 * across chunks too: first and last come back through the pointers. */
static amp_status check_chunk(const amp_file *f, const amp_section *s, const void *raw,
                              uint64_t *first, uint64_t *last, amp_error *err)
{
    char name[96];
    if (s->type != AMP_SECTION_CHUNK)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: %s is not a chunk", f->path,
                        AMP_SECTION_NAME(s, name));
    const amp_meta *m = &f->meta;
    const amp_mode_layout *l = &f->layouts[s->mode];
    const amp_shard *sh = &l->shards[s->shard];
    const unsigned char *words = raw;
    const unsigned char *vals = words + 8 * s->count;
    unsigned out = l->mode;
    uint64_t prev = sh->index_begin;
    /* Bits that belong to some field; the rest must be zero. */
    uint64_t used[2] = {0, 0};
    for (unsigned i = 0; i < m->nmodes; i++)
        for (unsigned b = l->shift[i]; b < (unsigned)l->shift[i] + l->width[i]; b++)
            used[b >> 6] |= UINT64_C(1) << (b & 63);
    if (s->aux & ~used[1])
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: block key 0x%llx sets bits outside the "
                        "index fields", f->path, AMP_SECTION_NAME(s, name),
                        (unsigned long long)s->aux);
    if (((uintptr_t)raw & 7) == 0 && chunk_clean(m, l, sh, s, raw, used[0], first, last))
        return AMP_OK;
    for (uint64_t k = 0; k < s->count; k++) {
        uint64_t word;
        memcpy(&word, words + 8 * k, 8);
        if (word & ~used[0])
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: nonzero %llu sets bits outside the "
                            "index fields", f->path, AMP_SECTION_NAME(s, name),
                            (unsigned long long)k);
        for (unsigned i = 0; i < m->nmodes; i++) {
            uint64_t idx = amp_blco_field(s->aux, word, l->shift[i], l->width[i]);
            if (idx >= m->compact_dims[i])
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: nonzero %llu has mode %u index "
                                "%llu, beyond %llu", f->path, AMP_SECTION_NAME(s, name),
                                (unsigned long long)k,
                                i + 1, (unsigned long long)idx,
                                (unsigned long long)m->compact_dims[i]);
            if (i != out)
                continue;
            if (idx < prev || idx >= sh->index_end)
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: nonzero %llu has output row "
                                "%llu, out of order or outside the shard's rows [%llu, %llu)",
                                f->path, AMP_SECTION_NAME(s, name), (unsigned long long)k,
                                (unsigned long long)idx,
                                (unsigned long long)sh->index_begin,
                                (unsigned long long)sh->index_end);
            if (k == 0)
                *first = idx;
            prev = idx;
        }
        double v;
        if (m->value_type == AMP_VALUES_F32) {
            float x;
            memcpy(&x, vals + 4 * k, 4);
            v = x;
        } else {
            memcpy(&v, vals + 8 * k, 8);
        }
        if (!isfinite(v))
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: nonzero %llu has a value that is "
                            "not a finite number", f->path, AMP_SECTION_NAME(s, name),
                            (unsigned long long)k);
    }
    *last = prev;
    return AMP_OK;
}

amp_status amp_chunk_check(const amp_file *f, const amp_section *s, const void *raw,
                           amp_error *err)
{
    uint64_t first, last;
    return check_chunk(f, s, raw, &first, &last, err);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One-to-one into [0, dims): a bitmap when the dimension is small enough
 * to afford one, a sorted copy otherwise (hypersparse modes). */
static amp_status check_relabel(const amp_file *f, unsigned mode, const uint64_t *map,
                                amp_error *err)
{
    uint64_t n = f->meta.compact_dims[mode], dim = f->meta.dims[mode];
    const char *what = "relabelling (RELABEL)";
    for (uint64_t k = 0; k < n; k++)
        if (map[k] >= dim)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: mode %u %s: entry %llu is %llu, beyond "
                            "the dimension %llu", f->path, mode + 1, what,
                            (unsigned long long)k, (unsigned long long)map[k],
                            (unsigned long long)dim);
    uint64_t dup = UINT64_MAX;
    if (dim / 8 <= (n * 8 > (UINT64_C(1) << 20) ? n * 8 : (UINT64_C(1) << 20))) {
        uint64_t *seen = calloc((size_t)(dim / 64 + 1), sizeof *seen);
        if (seen == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        for (uint64_t k = 0; k < n && dup == UINT64_MAX; k++) {
            uint64_t bit = UINT64_C(1) << (map[k] & 63);
            if (seen[map[k] >> 6] & bit)
                dup = map[k];
            seen[map[k] >> 6] |= bit;
        }
        free(seen);
    } else {
        uint64_t *copy = malloc((size_t)n * sizeof *copy);
        if (copy == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        memcpy(copy, map, (size_t)n * sizeof *copy);
        qsort(copy, (size_t)n, sizeof *copy, cmp_u64);
        for (uint64_t k = 1; k < n && dup == UINT64_MAX; k++)
            if (copy[k] == copy[k - 1])
                dup = copy[k];
        free(copy);
    }
    if (dup != UINT64_MAX)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: mode %u %s: original index %llu appears "
                        "twice", f->path, mode + 1, what, (unsigned long long)dup);
    return AMP_OK;
}

amp_status amp_file_read_relabel(const amp_file *f, unsigned mode, uint64_t *new_to_orig,
                                 amp_error *err)
{
    if (mode >= f->meta.nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "mode %u out of range", mode + 1);
    amp_section_reader *r;
    AMP_CHECK(amp_section_reader_new(f, &r, err));
    const amp_section *s = amp_file_relabel(f, mode);
    amp_status rc = amp_section_read(r, s, new_to_orig, (size_t)s->raw_size, err);
    amp_section_reader_free(r);
    if (rc == AMP_OK)
        rc = check_relabel(f, mode, new_to_orig, err);
    return rc;
}

amp_status amp_file_read_fibers(const amp_file *f, unsigned mode, unsigned *middle,
                                uint64_t *counts, amp_error *err)
{
    const amp_section *s = amp_file_fiber(f, mode);
    if (s == NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: mode %u has no fiber section", f->path,
                        mode + 1);
    amp_section_reader *r;
    AMP_CHECK(amp_section_reader_new(f, &r, err));
    amp_status rc = amp_section_read(r, s, counts, (size_t)s->raw_size, err);
    amp_section_reader_free(r);
    if (rc != AMP_OK)
        return rc;
    for (uint64_t q = 0; q < s->count; q++)
        counts[q] = amp_get64((const unsigned char *)&counts[q]);
    *middle = (unsigned)s->aux;
    return amp_check_fiber_counts(f->path, s, &f->layouts[mode], counts, err);
}

typedef struct verify_worker {
    amp_section_reader *r;
    void *raw;
    size_t cap;
    amp_error err;
} verify_worker;

/* A remap stream: every entry a position in the next copy, and (with the
 * other streams of the mode, through the shared bitmap) none twice. */
static amp_status check_remap(const amp_file *f, const amp_section *s, const void *raw,
                              uint64_t *seen, amp_error *err)
{
    char name[96];
    const unsigned char *p = raw;
    for (uint64_t k = 0; k < s->count; k++) {
        uint64_t v;
        if (s->aux == 4) {
            uint32_t x;
            memcpy(&x, p + 4 * k, 4);
            v = x;
        } else {
            memcpy(&v, p + 8 * k, 8);
        }
        if (v >= f->meta.nnz)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: entry %llu is %llu, beyond the %llu "
                            "nonzeros", f->path, AMP_SECTION_NAME(s, name), (unsigned long long)k,
                            (unsigned long long)v, (unsigned long long)f->meta.nnz);
        uint64_t bit = UINT64_C(1) << (v & 63);
        if (__atomic_fetch_or(&seen[v >> 6], bit, __ATOMIC_RELAXED) & bit)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: position %llu of the next copy is "
                            "named twice", f->path, AMP_SECTION_NAME(s, name),
                            (unsigned long long)v);
    }
    return AMP_OK;
}

static amp_status verify_one(const amp_file *f, verify_worker *w, size_t i, uint64_t *first,
                             uint64_t *last, uint64_t *const *seen)
{
    const amp_section *s = &f->secs[i];
    amp_error *err = &w->err;
    if (s->raw_size > SIZE_MAX - 16)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: a section of %llu bytes cannot be held in "
                        "memory", f->path, (unsigned long long)s->raw_size);
    size_t need = s->raw_size ? (size_t)s->raw_size : 1;
    if (w->cap < need) {
        free(w->raw);
        w->cap = 0;
        /* 8-byte alignment: the content is read as u64 and f64 arrays. */
        w->raw = malloc(need + 8);
        if (w->raw == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: out of memory for a %zu-byte section",
                            f->path, need);
        w->cap = need;
    }
    AMP_CHECK(amp_section_read(w->r, s, w->raw, w->cap, err));
    if (s->type == AMP_SECTION_CHUNK)
        return check_chunk(f, s, w->raw, first, last, err);
    if (s->type == AMP_SECTION_RELABEL)
        return check_relabel(f, s->mode, w->raw, err);
    if (s->type == AMP_SECTION_REMAP)
        return check_remap(f, s, w->raw, seen[s->mode], err);
    if (s->type == AMP_SECTION_FIBER) {
        uint64_t *c = w->raw;
        for (uint64_t q = 0; q < s->count; q++)
            c[q] = amp_get64((const unsigned char *)&c[q]);
        return amp_check_fiber_counts(f->path, s, &f->layouts[s->mode], c, err);
    }
    return AMP_OK;
}

amp_status amp_file_verify(const amp_file *f, int threads, amp_verify_report_fn report,
                           void *ctx, size_t *nbad, amp_error *err)
{
    size_t n = f->info.nsections, bad = 0;
    uint64_t *first = malloc((n ? n : 1) * sizeof *first);
    uint64_t *last = malloc((n ? n : 1) * sizeof *last);
    unsigned char *ok = calloc(n ? n : 1, 1);
    uint64_t *seen[AMP_MAX_MODES] = {0};
    amp_status rc = AMP_OK;
    if (first == NULL || last == NULL || ok == NULL) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (unsigned d = 0; d < f->meta.nmodes; d++) {
        /* A mode has streams for all its chunks or none (checked at open). */
        uint64_t nc = amp_mode_nchunks(&f->layouts[d]);
        if (nc == 0 || f->remap_index[d][0] == UINT32_MAX)
            continue;
        if ((seen[d] = calloc((size_t)(f->meta.nnz / 64 + 1), 8)) == NULL) {
            rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    int nthreads = amp_thread_count(threads);
    (void)nthreads;   /* read only by the pragma, which a build without OpenMP drops */
#pragma omp parallel num_threads(nthreads) reduction(+ : bad)
    {
        verify_worker w = {0};
        amp_status wrc = amp_section_reader_new(f, &w.r, &w.err);
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < n; i++) {
            amp_status src = wrc;
            if (src == AMP_OK)
                src = verify_one(f, &w, i, &first[i], &last[i], seen);
            ok[i] = src == AMP_OK;
            if (src != AMP_OK) {
                bad++;
#pragma omp critical(amp_verify_report)
                {
                    if (rc == AMP_OK)
                        rc = amp_error_set(err, w.err.status, w.err.src_file, w.err.src_line,
                                           "%s", w.err.msg);
                    if (report != NULL)
                        report(ctx, &f->secs[i], &w.err);
                }
                if (wrc == AMP_OK)
                    amp_error_clear(&w.err);
            }
        }
        amp_section_reader_free(w.r);
        free(w.raw);
    }
    /* Order across chunks: each chunk of a shard starts at or after the row
     * where the previous one ended. */
    for (unsigned d = 0; d < f->meta.nmodes; d++) {
        const amp_mode_layout *l = &f->layouts[d];
        for (uint32_t s = 0; s < l->nshards; s++)
            for (uint32_t c = 1; c < l->shards[s].nchunks; c++) {
                uint32_t a = f->chunk_index[d][l->shards[s].first_chunk + c - 1];
                uint32_t b = f->chunk_index[d][l->shards[s].first_chunk + c];
                if (!ok[a] || !ok[b] || last[a] <= first[b])
                    continue;
                amp_error e = {0};
                char name[96];
                AMP_FAIL(&e, AMP_ERR_CORRUPT, "%s: %s starts at row %llu, before the previous "
                         "chunk's last row %llu", f->path,
                         amp_section_name(&f->secs[b], name, sizeof name),
                         (unsigned long long)first[b], (unsigned long long)last[a]);
                bad++;
                if (rc == AMP_OK)
                    rc = amp_error_set(err, e.status, e.src_file, e.src_line, "%s", e.msg);
                if (report != NULL)
                    report(ctx, &f->secs[b], &e);
            }
    }
done:
    for (unsigned d = 0; d < AMP_MAX_MODES; d++)
        free(seen[d]);
    free(first);
    free(last);
    free(ok);
    if (nbad != NULL)
        *nbad = bad;
    return rc;
}
