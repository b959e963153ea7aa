/* Byte-level encoding of the .amp fixed structures, and the consistency
 * checks that the reader applies to every file and the writer applies to
 * its own output before it renames it into place. */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <xxhash.h>

#include "format_internal.h"

/* ---- directory entries, header, trailer ------------------------------ */

void amp_encode_entry(unsigned char *p, const amp_section *s)
{
    amp_put16(p + 0, s->type);
    amp_put16(p + 2, s->flags);
    amp_put32(p + 4, s->mode);
    amp_put32(p + 8, s->shard);
    amp_put32(p + 12, s->seq);
    amp_put64(p + 16, s->offset);
    amp_put64(p + 24, s->stored_size);
    amp_put64(p + 32, s->raw_size);
    amp_put64(p + 40, s->hash);
    amp_put64(p + 48, s->count);
    amp_put64(p + 56, s->aux);
}

void amp_decode_entry(const unsigned char *p, amp_section *s)
{
    s->type = amp_get16(p + 0);
    s->flags = amp_get16(p + 2);
    s->mode = amp_get32(p + 4);
    s->shard = amp_get32(p + 8);
    s->seq = amp_get32(p + 12);
    s->offset = amp_get64(p + 16);
    s->stored_size = amp_get64(p + 24);
    s->raw_size = amp_get64(p + 32);
    s->hash = amp_get64(p + 40);
    s->count = amp_get64(p + 48);
    s->aux = amp_get64(p + 56);
}

void amp_encode_header(unsigned char *h, uint64_t file_size, uint64_t dir_offset,
                       uint64_t dir_size, uint64_t dir_hash)
{
    memset(h, 0, AMP_HEADER_SIZE);
    memcpy(h + AMP_H_MAGIC, AMP_MAGIC, AMP_MAGIC_LEN);
    amp_put16(h + AMP_H_MAJOR, AMP_FORMAT_MAJOR);
    amp_put16(h + AMP_H_MINOR, AMP_FORMAT_MINOR);
    amp_put32(h + AMP_H_FLAGS, 0);
    amp_put64(h + AMP_H_FILE_SIZE, file_size);
    amp_put64(h + AMP_H_DIR_OFFSET, dir_offset);
    amp_put64(h + AMP_H_DIR_SIZE, dir_size);
    amp_put64(h + AMP_H_DIR_HASH, dir_hash);
    amp_put64(h + AMP_H_HASH, XXH3_64bits(h, AMP_H_HASH));
}

void amp_encode_trailer(unsigned char *t, uint64_t dir_offset, uint64_t dir_size,
                        uint64_t dir_hash)
{
    amp_put64(t + AMP_T_DIR_OFFSET, dir_offset);
    amp_put64(t + AMP_T_DIR_SIZE, dir_size);
    amp_put64(t + AMP_T_DIR_HASH, dir_hash);
    memcpy(t + AMP_T_MAGIC, AMP_TRAILER_MAGIC, AMP_MAGIC_LEN);
}

int amp_section_type_known(uint16_t type)
{
    return type >= AMP_SECTION_META && type <= AMP_SECTION_FIBER;
}

const char *amp_section_name(const amp_section *s, char *buf, size_t n)
{
    switch (s->type) {
    case AMP_SECTION_META:
        snprintf(buf, n, "metadata section (META)");
        break;
    case AMP_SECTION_MODE:
        snprintf(buf, n, "mode %lu layout (MODE)", (unsigned long)s->mode + 1);
        break;
    case AMP_SECTION_RELABEL:
        snprintf(buf, n, "mode %lu relabelling (RELABEL)", (unsigned long)s->mode + 1);
        break;
    case AMP_SECTION_CHUNK:
        snprintf(buf, n, "mode %lu shard %lu chunk %lu", (unsigned long)s->mode + 1,
                 (unsigned long)s->shard, (unsigned long)s->seq);
        break;
    case AMP_SECTION_REMAP:
        snprintf(buf, n, "mode %lu shard %lu chunk %lu remap stream (REMAP)",
                 (unsigned long)s->mode + 1, (unsigned long)s->shard, (unsigned long)s->seq);
        break;
    case AMP_SECTION_FIBER:
        snprintf(buf, n, "mode %lu fiber counts (FIBER)", (unsigned long)s->mode + 1);
        break;
    default:
        snprintf(buf, n, "section of type %u", (unsigned)s->type);
    }
    return buf;
}

/* ---- META --------------------------------------------------------------- */

static size_t text_len(const char *s)
{
    return s == NULL ? 0 : strlen(s);
}

size_t amp_meta_size(const amp_meta *m)
{
    return AMP_META_FIXED + 16 * (size_t)m->nmodes + 12 + text_len(m->source_name) +
           text_len(m->writer) + text_len(m->params);
}

static unsigned char *put_text(unsigned char *p, const char *s)
{
    size_t n = text_len(s);
    amp_put32(p, (uint32_t)n);
    if (n > 0)
        memcpy(p + 4, s, n);
    return p + 4 + n;
}

void amp_encode_meta(unsigned char *p, const amp_meta *m)
{
    amp_put32(p + 0, m->nmodes);
    amp_put32(p + 4, (uint32_t)m->value_type);
    amp_put64(p + 8, m->nnz);
    uint64_t bits;
    memcpy(&bits, &m->norm_sq, sizeof bits);
    amp_put64(p + 16, bits);
    amp_put64(p + 24, m->source_size);
    amp_put64(p + 32, m->source_hash);
    unsigned char *q = p + AMP_META_FIXED;
    for (unsigned i = 0; i < m->nmodes; i++, q += 8)
        amp_put64(q, m->dims[i]);
    for (unsigned i = 0; i < m->nmodes; i++, q += 8)
        amp_put64(q, m->compact_dims[i]);
    q = put_text(q, m->source_name);
    q = put_text(q, m->writer);
    put_text(q, m->params);
}

static amp_status get_text(const char *path, const unsigned char **p, const unsigned char *end,
                           const char *what, char *out, amp_error *err)
{
    if (end - *p < 4)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: metadata section (META): ends inside the "
                        "%s", path, what);
    uint32_t n = amp_get32(*p);
    *p += 4;
    if (n > AMP_META_TEXT_MAX || (uint64_t)(end - *p) < n)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: metadata section (META): %s of %lu bytes "
                        "does not fit", path, what, (unsigned long)n);
    if (memchr(*p, '\0', n) != NULL)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: metadata section (META): %s holds a NUL "
                        "byte", path, what);
    memcpy(out, *p, n);
    out[n] = '\0';
    *p += n;
    return AMP_OK;
}

amp_status amp_decode_meta(const char *path, const unsigned char *p, size_t n, amp_meta *m,
                           char *text, amp_error *err)
{
    memset(m, 0, sizeof *m);
    if (n < AMP_META_FIXED)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: metadata section (META) is %zu bytes, "
                        "shorter than its fixed part", path, n);
    uint32_t nmodes = amp_get32(p);
    if (nmodes < 1 || nmodes > AMP_MAX_MODES)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: metadata section (META): %lu modes "
                        "(allowed: 1 to %d)", path, (unsigned long)nmodes, AMP_MAX_MODES);
    m->nmodes = nmodes;
    m->value_type = (amp_value_type)amp_get32(p + 4);
    m->nnz = amp_get64(p + 8);
    uint64_t bits = amp_get64(p + 16);
    memcpy(&m->norm_sq, &bits, sizeof bits);
    m->source_size = amp_get64(p + 24);
    m->source_hash = amp_get64(p + 32);
    if (n < AMP_META_FIXED + 16 * (size_t)nmodes)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: metadata section (META) ends inside the "
                        "dimensions", path);
    const unsigned char *q = p + AMP_META_FIXED;
    for (unsigned i = 0; i < nmodes; i++, q += 8)
        m->dims[i] = amp_get64(q);
    for (unsigned i = 0; i < nmodes; i++, q += 8)
        m->compact_dims[i] = amp_get64(q);
    const unsigned char *end = p + n;
    char *name = text, *writer = text + AMP_META_TEXT_MAX + 1,
         *params = text + 2 * (AMP_META_TEXT_MAX + 1);
    AMP_CHECK(get_text(path, &q, end, "source name", name, err));
    AMP_CHECK(get_text(path, &q, end, "writer name", writer, err));
    AMP_CHECK(get_text(path, &q, end, "parameters", params, err));
    if (q != end)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: metadata section (META) has %zu bytes "
                        "after its last field", path, (size_t)(end - q));
    m->source_name = name;
    m->writer = writer;
    m->params = params;
    return amp_check_meta(path, m, err);
}

amp_status amp_check_meta(const char *path, const amp_meta *m, amp_error *err)
{
    const char *sec = "metadata section (META)";
    if (m->nmodes < 1 || m->nmodes > AMP_MAX_MODES)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: %u modes (allowed: 1 to %d)", path,
                        sec, m->nmodes, AMP_MAX_MODES);
    if (m->value_type != AMP_VALUES_F32 && m->value_type != AMP_VALUES_F64)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: value type %d is neither 1 (f32) nor "
                        "2 (f64)", path, sec, (int)m->value_type);
    if (m->nnz == 0)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: no nonzeros", path, sec);
    if (!isfinite(m->norm_sq) || m->norm_sq < 0)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: squared norm %g is not a finite "
                        "non-negative number", path, sec, m->norm_sq);
    for (unsigned i = 0; i < m->nmodes; i++) {
        if (m->dims[i] == 0 || m->dims[i] - 1 > AMP_MAX_INDEX)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: mode %u dimension %llu out of "
                            "range", path, sec, i + 1, (unsigned long long)m->dims[i]);
        if (m->compact_dims[i] == 0 || m->compact_dims[i] > m->dims[i] ||
            m->compact_dims[i] > m->nnz)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: mode %u has %llu nonempty slices, "
                            "not between 1 and min(dimension %llu, nonzeros %llu)", path, sec,
                            i + 1, (unsigned long long)m->compact_dims[i],
                            (unsigned long long)m->dims[i], (unsigned long long)m->nnz);
    }
    const char *texts[3] = {m->source_name, m->writer, m->params};
    for (int i = 0; i < 3; i++)
        if (text_len(texts[i]) > AMP_META_TEXT_MAX)
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s: %s: a text field is longer than %d "
                            "bytes", path, sec, AMP_META_TEXT_MAX);
    return AMP_OK;
}

/* ---- MODE --------------------------------------------------------------- */

size_t amp_mode_size(unsigned nmodes, uint32_t nshards)
{
    return AMP_MODE_FIXED + AMP_MODE_FIELD_SIZE * (size_t)nmodes +
           AMP_MODE_SHARD_SIZE * (size_t)nshards;
}

void amp_encode_mode(unsigned char *p, const amp_mode_layout *l)
{
    memset(p, 0, amp_mode_size(l->nmodes, l->nshards));
    amp_put32(p + 0, l->mode);
    amp_put32(p + 4, l->encoding);
    amp_put32(p + 8, l->nshards);
    amp_put32(p + 12, l->nmodes);
    amp_put64(p + 16, l->chunk_nnz);
    unsigned char *q = p + AMP_MODE_FIXED;
    for (unsigned i = 0; i < l->nmodes; i++, q += AMP_MODE_FIELD_SIZE) {
        q[0] = l->shift[i];
        q[1] = l->width[i];
    }
    for (uint32_t s = 0; s < l->nshards; s++, q += AMP_MODE_SHARD_SIZE) {
        amp_put64(q + 0, l->shards[s].index_begin);
        amp_put64(q + 8, l->shards[s].index_end);
        amp_put64(q + 16, l->shards[s].nnz);
        amp_put32(q + 24, l->shards[s].nchunks);
    }
}

amp_status amp_decode_mode(const char *path, const unsigned char *p, size_t n, unsigned nmodes,
                           amp_mode_layout *l, amp_error *err)
{
    memset(l, 0, sizeof *l);
    if (n < AMP_MODE_FIXED)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: a layout section (MODE) is %zu bytes, "
                        "shorter than its fixed part", path, n);
    l->mode = amp_get32(p + 0);
    l->encoding = amp_get32(p + 4);
    l->nshards = amp_get32(p + 8);
    uint32_t stored_nmodes = amp_get32(p + 12);
    l->chunk_nnz = amp_get64(p + 16);
    l->nmodes = nmodes;
    char sec[64];
    snprintf(sec, sizeof sec, "mode %lu layout (MODE)", (unsigned long)l->mode + 1);
    if (stored_nmodes != nmodes)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: says %lu modes, the metadata %u",
                        path, sec, (unsigned long)stored_nmodes, nmodes);
    if (l->nshards < 1 || l->nshards > AMP_MAX_SHARDS)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: %lu shards (allowed: 1 to %lu)", path,
                        sec, (unsigned long)l->nshards, (unsigned long)AMP_MAX_SHARDS);
    if (n != amp_mode_size(nmodes, l->nshards))
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s is %zu bytes; %u modes and %lu shards "
                        "need %zu", path, sec, n, nmodes, (unsigned long)l->nshards,
                        amp_mode_size(nmodes, l->nshards));
    const unsigned char *q = p + AMP_MODE_FIXED;
    for (unsigned i = 0; i < nmodes; i++, q += AMP_MODE_FIELD_SIZE) {
        l->shift[i] = q[0];
        l->width[i] = q[1];
        if (amp_get16(q + 2) != 0)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: reserved bytes of field %u are "
                            "not zero", path, sec, i + 1);
    }
    l->shards = calloc(l->nshards, sizeof *l->shards);
    if (l->shards == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for %lu shards",
                        (unsigned long)l->nshards);
    for (uint32_t s = 0; s < l->nshards; s++, q += AMP_MODE_SHARD_SIZE) {
        l->shards[s].index_begin = amp_get64(q + 0);
        l->shards[s].index_end = amp_get64(q + 8);
        l->shards[s].nnz = amp_get64(q + 16);
        l->shards[s].nchunks = amp_get32(q + 24);
        if (amp_get32(q + 28) != 0)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: reserved bytes of shard %lu are "
                            "not zero", path, sec, (unsigned long)s);
    }
    return AMP_OK;
}

static unsigned bits_for(uint64_t max_value)
{
    unsigned b = 0;
    while (b < 64 && (max_value >> b) != 0)
        b++;
    return b;
}

amp_status amp_blco_layout(amp_mode_layout *l, unsigned nmodes, const uint64_t *compact_dims,
                           unsigned mode, amp_error *err)
{
    memset(l, 0, sizeof *l);
    if (nmodes < 1 || nmodes > AMP_MAX_MODES || mode >= nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "mode %u of %u modes", mode + 1, nmodes);
    l->mode = mode;
    l->nmodes = nmodes;
    l->encoding = AMP_ENCODING_BLCO64;
    unsigned cursor = 0;
    for (unsigned i = nmodes; i-- > 0;) {
        if (i == mode)
            continue;
        l->width[i] = (uint8_t)bits_for(compact_dims[i] - 1);
        l->shift[i] = l->width[i] ? (uint8_t)cursor : 0;
        cursor += l->width[i];
        if (cursor > AMP_MAX_INDEX_BITS)
            break;
    }
    l->width[mode] = (uint8_t)bits_for(compact_dims[mode] - 1);
    l->shift[mode] = l->width[mode] ? (uint8_t)cursor : 0;
    cursor += l->width[mode];
    if (cursor > AMP_MAX_INDEX_BITS)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "the indices of the %u modes need more than "
                        "%u bits together; the .amp format holds at most %u", nmodes,
                        AMP_MAX_INDEX_BITS, AMP_MAX_INDEX_BITS);
    l->index_bits = cursor;
    l->key_bits = cursor > 64 ? cursor - 64 : 0;
    return AMP_OK;
}

uint64_t amp_mode_nchunks(const amp_mode_layout *l)
{
    uint64_t n = 0;
    for (uint32_t s = 0; s < l->nshards; s++)
        n += l->shards[s].nchunks;
    return n;
}

amp_status amp_check_mode(const char *path, const amp_meta *m, amp_mode_layout *l,
                          amp_error *err)
{
    char sec[64];
    snprintf(sec, sizeof sec, "mode %lu layout (MODE)", (unsigned long)l->mode + 1);
    if (l->mode >= m->nmodes)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: the tensor has %u modes", path, sec,
                        m->nmodes);
    if (l->encoding != AMP_ENCODING_BLCO64)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%s: %s: chunk encoding %lu is unknown to "
                        "this reader (it knows 1, BLCO64)", path, sec,
                        (unsigned long)l->encoding);
    if (l->chunk_nnz < 1 || l->chunk_nnz > AMP_CHUNK_NNZ_MAX)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: chunk size %llu nonzeros (allowed: 1 "
                        "to %llu)", path, sec, (unsigned long long)l->chunk_nnz,
                        (unsigned long long)AMP_CHUNK_NNZ_MAX);
    uint64_t used[2] = {0, 0};
    unsigned top = 0;
    for (unsigned i = 0; i < m->nmodes; i++) {
        unsigned w = l->width[i], s = l->shift[i];
        if (w > 64 || s + w > AMP_MAX_INDEX_BITS || (w == 0 && s != 0))
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: mode %u field at bit %u, %u bits "
                            "wide, is outside the %u-bit index", path, sec, i + 1, s, w,
                            AMP_MAX_INDEX_BITS);
        if (w < bits_for(m->compact_dims[i] - 1))
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: mode %u field of %u bits cannot "
                            "hold %llu indices", path, sec, i + 1, w,
                            (unsigned long long)m->compact_dims[i]);
        for (unsigned b = s; b < s + w; b++) {
            uint64_t bit = UINT64_C(1) << (b & 63);
            if (used[b >> 6] & bit)
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: mode %u field overlaps "
                                "another at bit %u", path, sec, i + 1, b);
            used[b >> 6] |= bit;
        }
        if (s + w > top)
            top = s + w;
    }
    l->index_bits = top;
    l->key_bits = top > 64 ? top - 64 : 0;
    uint64_t dim = m->compact_dims[l->mode], total = 0, next = 0;
    for (uint32_t s = 0; s < l->nshards; s++) {
        amp_shard *sh = &l->shards[s];
        if (sh->index_begin != next || sh->index_end < sh->index_begin || sh->index_end > dim)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: shard %lu rows [%llu, %llu) do not "
                            "continue from %llu within %llu rows", path, sec, (unsigned long)s,
                            (unsigned long long)sh->index_begin,
                            (unsigned long long)sh->index_end, (unsigned long long)next,
                            (unsigned long long)dim);
        next = sh->index_end;
        uint64_t rows = sh->index_end - sh->index_begin;
        uint64_t min_chunks = sh->nnz / l->chunk_nnz + (sh->nnz % l->chunk_nnz != 0);
        if (sh->nnz < rows || (rows == 0 && sh->nnz != 0) || sh->nnz > m->nnz - total ||
            sh->nchunks < min_chunks ||
            sh->nchunks > sh->nnz)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: shard %lu has %llu nonzeros in %lu "
                            "chunks for %llu rows: inconsistent", path, sec, (unsigned long)s,
                            (unsigned long long)sh->nnz, (unsigned long)sh->nchunks,
                            (unsigned long long)rows);
        sh->first_nnz = total;
        total += sh->nnz;
    }
    if (next != dim || total != m->nnz)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: shards cover %llu of %llu rows and "
                        "%llu of %llu nonzeros", path, sec, (unsigned long long)next,
                        (unsigned long long)dim, (unsigned long long)total,
                        (unsigned long long)m->nnz);
    return AMP_OK;
}

amp_status amp_check_fibers(const char *path, const amp_section *secs, size_t n,
                            const amp_meta *m, amp_mode_layout *const *layouts, size_t *fiber_at,
                            amp_error *err)
{
    char name[96];
    for (size_t i = 0; i < n; i++) {
        const amp_section *s = &secs[i];
        if (s->type != AMP_SECTION_FIBER)
            continue;
        if (s->mode >= m->nmodes || m->nmodes < 3)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (%s): the tensor "
                            "has %u modes", path, i, AMP_SECTION_NAME(s, name), m->nmodes);
        if (!(s->flags & AMP_SECTION_OPTIONAL) || s->shard != AMP_NO_INDEX || s->seq != 0)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (%s): not marked "
                            "optional, or names a shard or chunk", path, i,
                            AMP_SECTION_NAME(s, name));
        const amp_mode_layout *l = layouts[s->mode];
        if (s->aux >= m->nmodes || s->aux == s->mode)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: middle mode %llu is not another "
                            "mode of the %u", path, AMP_SECTION_NAME(s, name),
                            (unsigned long long)s->aux + 1, m->nmodes);
        if (s->count != l->nshards || s->raw_size != 8 * s->count)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: %llu counts in %llu bytes for %lu "
                            "shards", path, AMP_SECTION_NAME(s, name),
                            (unsigned long long)s->count, (unsigned long long)s->raw_size,
                            (unsigned long)l->nshards);
    }
    for (unsigned d = 0; d < m->nmodes; d++)
        AMP_CHECK(amp_find_unique(path, secs, n, AMP_SECTION_FIBER, d, &fiber_at[d], err));
    return AMP_OK;
}

amp_status amp_check_fiber_counts(const char *path, const amp_section *s,
                                  const amp_mode_layout *l, const uint64_t *counts,
                                  amp_error *err)
{
    char name[96];
    for (uint32_t q = 0; q < l->nshards; q++) {
        const amp_shard *sh = &l->shards[q];
        if (counts[q] < sh->index_end - sh->index_begin || counts[q] > sh->nnz)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: shard %lu has %llu fibers, outside "
                            "its %llu rows to %llu nonzeros", path, AMP_SECTION_NAME(s, name),
                            (unsigned long)q, (unsigned long long)counts[q],
                            (unsigned long long)(sh->index_end - sh->index_begin),
                            (unsigned long long)sh->nnz);
    }
    return AMP_OK;
}

/* ---- directory ------------------------------------------------------------ */

typedef struct span {
    uint64_t offset, size;
    size_t index;
} span;

static int by_offset(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

amp_status amp_check_entries(const char *path, const amp_section *secs, size_t n,
                             uint64_t data_end, amp_error *err)
{
    char name[96];
    for (size_t i = 0; i < n; i++) {
        const amp_section *s = &secs[i];
        if (!amp_section_type_known(s->type) && !(s->flags & AMP_SECTION_OPTIONAL))
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%s: directory entry %zu: required "
                            "section type %u is unknown to this reader (format %d.%d); the "
                            "file needs a newer amped", path, i, (unsigned)s->type,
                            AMP_FORMAT_MAJOR, AMP_FORMAT_MINOR);
        if (s->flags & ~(AMP_SECTION_ZSTD | AMP_SECTION_OPTIONAL | AMP_SECTION_PLANAR_WORDS |
                         AMP_SECTION_PLANAR_VALUES))
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%s: directory entry %zu (%s): flags 0x%x "
                            "name features this amped does not know", path, i,
                            AMP_SECTION_NAME(s, name),
                            (unsigned)s->flags);
        if ((s->flags & (AMP_SECTION_PLANAR_WORDS | AMP_SECTION_PLANAR_VALUES)) &&
            (s->type != AMP_SECTION_CHUNK || !(s->flags & AMP_SECTION_ZSTD)))
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (%s): byte planes "
                            "on a section that is not a compressed chunk", path, i,
                            AMP_SECTION_NAME(s, name));
        if (s->offset < AMP_HEADER_SIZE || s->offset > data_end ||
            s->stored_size > data_end - s->offset)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (%s): bytes "
                            "[%llu, +%llu) lie outside the data area [%d, %llu)", path, i,
                            AMP_SECTION_NAME(s, name),
                            (unsigned long long)s->offset, (unsigned long long)s->stored_size,
                            AMP_HEADER_SIZE, (unsigned long long)data_end);
        if (!(s->flags & AMP_SECTION_ZSTD) && s->raw_size != s->stored_size)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (%s): stored "
                            "uncompressed, yet sizes differ (%llu, %llu)", path, i,
                            AMP_SECTION_NAME(s, name),
                            (unsigned long long)s->stored_size,
                            (unsigned long long)s->raw_size);
        if ((s->flags & AMP_SECTION_ZSTD) && s->stored_size == 0)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (%s): compressed "
                            "section of 0 bytes", path, i, AMP_SECTION_NAME(s, name));
        /* Zstandard's densest form is a 128 KiB run in a 4-byte block: no
         * frame expands more than that, so a larger claim is corrupt (and
         * must not become an allocation). */
        if ((s->flags & AMP_SECTION_ZSTD) &&
            s->raw_size / 131072 > s->stored_size / 3 + 1)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (%s): %llu stored "
                            "bytes cannot decompress to %llu", path, i, AMP_SECTION_NAME(s, name),
                            (unsigned long long)s->stored_size,
                            (unsigned long long)s->raw_size);
        if ((s->type == AMP_SECTION_META || s->type == AMP_SECTION_MODE) &&
            s->raw_size > AMP_SMALL_SECTION_MAX)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (%s): %llu bytes is "
                            "implausibly large", path, i, AMP_SECTION_NAME(s, name),
                            (unsigned long long)s->raw_size);
    }
    span *order = malloc((n ? n : 1) * sizeof *order);
    if (order == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for %zu directory entries", n);
    for (size_t i = 0; i < n; i++)
        order[i] = (span){secs[i].offset, secs[i].stored_size, i};
    qsort(order, n, sizeof *order, by_offset);
    amp_status rc = AMP_OK;
    uint64_t end = AMP_HEADER_SIZE;
    size_t prev = n;
    for (size_t k = 0; k < n; k++) {
        if (order[k].size == 0)
            continue;
        if (order[k].offset < end) {
            char other[96];
            rc = AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory: %s overlaps %s", path,
                          amp_section_name(&secs[order[k].index], name, sizeof name),
                          amp_section_name(&secs[prev], other, sizeof other));
            break;
        }
        end = order[k].offset + order[k].size;
        prev = order[k].index;
    }
    free(order);
    return rc;
}

amp_status amp_find_unique(const char *path, const amp_section *secs, size_t n, uint16_t type,
                           uint32_t mode, size_t *index, amp_error *err)
{
    *index = n;
    for (size_t i = 0; i < n; i++) {
        if (secs[i].type != type || secs[i].mode != mode)
            continue;
        if (*index != n) {
            char name[96];
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory lists the %s twice", path,
                            amp_section_name(&secs[i], name, sizeof name));
        }
        *index = i;
    }
    return AMP_OK;
}

amp_status amp_check_directory(const char *path, const amp_section *secs, size_t n,
                               const amp_meta *m, amp_mode_layout *const *layouts,
                               uint32_t *const *chunk_index, uint32_t *const *remap_index,
                               amp_error *err)
{
    char name[96];
    size_t vsize = amp_value_size(m->value_type);
    for (unsigned d = 0; d < m->nmodes; d++) {
        uint32_t first = 0;
        amp_mode_layout *l = layouts[d];
        for (uint32_t s = 0; s < l->nshards; s++) {
            l->shards[s].first_chunk = first;
            first += l->shards[s].nchunks;
        }
        for (uint32_t c = 0; c < first; c++)
            chunk_index[d][c] = remap_index[d][c] = UINT32_MAX;
    }
    for (size_t i = 0; i < n; i++) {
        const amp_section *s = &secs[i];
        switch (s->type) {
        case AMP_SECTION_META:
            if (s->mode != AMP_NO_INDEX || s->shard != AMP_NO_INDEX || s->seq != 0 ||
                s->count != 0 || s->aux != 0)
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (%s): mode, "
                                "shard, seq, count and aux must be unused", path, i,
                                AMP_SECTION_NAME(s, name));
            break;
        case AMP_SECTION_MODE:
        case AMP_SECTION_RELABEL: {
            int relabel = s->type == AMP_SECTION_RELABEL;
            if (s->mode >= m->nmodes || s->shard != AMP_NO_INDEX || s->seq != 0 ||
                s->aux != 0 || s->count != (relabel ? m->compact_dims[s->mode] : 0))
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (%s): mode, "
                                "shard, seq, count or aux out of place", path, i,
                                AMP_SECTION_NAME(s, name));
            if (relabel && (s->count > UINT64_MAX / 8 || s->raw_size != s->count * 8))
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: %llu bytes for %llu entries",
                                path, AMP_SECTION_NAME(s, name), (unsigned long long)s->raw_size,
                                (unsigned long long)s->count);
            break;
        }
        case AMP_SECTION_CHUNK: {
            if (s->mode >= m->nmodes || s->shard >= layouts[s->mode]->nshards ||
                s->seq >= layouts[s->mode]->shards[s->shard].nchunks)
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu: %s does not "
                                "exist in the layout", path, i, AMP_SECTION_NAME(s, name));
            const amp_mode_layout *l = layouts[s->mode];
            uint32_t *slot = &chunk_index[s->mode][l->shards[s->shard].first_chunk + s->seq];
            if (*slot != UINT32_MAX)
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory lists %s twice", path,
                                AMP_SECTION_NAME(s, name));
            *slot = (uint32_t)i;
            if (s->count < 1 || s->count > l->chunk_nnz)
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: %llu nonzeros (allowed: 1 to "
                                "%llu)", path, AMP_SECTION_NAME(s, name),
                                (unsigned long long)s->count,
                                (unsigned long long)l->chunk_nnz);
            if (s->raw_size != s->count * (8 + vsize))
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: %llu bytes for %llu nonzeros",
                                path, AMP_SECTION_NAME(s, name), (unsigned long long)s->raw_size,
                                (unsigned long long)s->count);
            if (l->key_bits < 64 && (s->aux >> l->key_bits) != 0)
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: block key 0x%llx wider than "
                                "%u bits", path, AMP_SECTION_NAME(s, name),
                                (unsigned long long)s->aux, l->key_bits);
            break;
        }
        default:
            break;
        }
    }
    for (unsigned d = 0; d < m->nmodes; d++) {
        const amp_mode_layout *l = layouts[d];
        for (uint32_t s = 0; s < l->nshards; s++) {
            const amp_shard *sh = &l->shards[s];
            uint64_t sum = 0;
            for (uint32_t c = 0; c < sh->nchunks; c++) {
                uint32_t k = chunk_index[d][sh->first_chunk + c];
                if (k == UINT32_MAX)
                    return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory: mode %u shard %lu "
                                    "chunk %lu is missing", path, d + 1, (unsigned long)s,
                                    (unsigned long)c);
                sum += secs[k].count;
            }
            if (sum != sh->nnz)
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory: the chunks of mode %u "
                                "shard %lu hold %llu nonzeros, the layout says %llu", path,
                                d + 1, (unsigned long)s, (unsigned long long)sum,
                                (unsigned long long)sh->nnz);
        }
    }
    /* Remap streams: one per chunk, matching it, for all chunks of a mode
     * or none. */
    for (size_t i = 0; i < n; i++) {
        const amp_section *s = &secs[i];
        if (s->type != AMP_SECTION_REMAP)
            continue;
        if (s->mode >= m->nmodes || s->shard >= layouts[s->mode]->nshards ||
            s->seq >= layouts[s->mode]->shards[s->shard].nchunks)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu: %s has no chunk",
                            path, i, AMP_SECTION_NAME(s, name));
        uint32_t at = layouts[s->mode]->shards[s->shard].first_chunk + s->seq;
        const amp_section *c = &secs[chunk_index[s->mode][at]];
        if (remap_index[s->mode][at] != UINT32_MAX)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory lists %s twice", path,
                            AMP_SECTION_NAME(s, name));
        remap_index[s->mode][at] = (uint32_t)i;
        if (s->count != c->count || (s->aux != 4 && s->aux != 8) ||
            s->raw_size != s->count * s->aux || (s->aux == 4 && m->nnz > UINT32_MAX))
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %s: %llu entries of %llu bytes in %llu "
                            "bytes for a chunk of %llu nonzeros", path, AMP_SECTION_NAME(s, name),
                            (unsigned long long)s->count, (unsigned long long)s->aux,
                            (unsigned long long)s->raw_size, (unsigned long long)c->count);
    }
    for (unsigned d = 0; d < m->nmodes; d++) {
        uint64_t nc = amp_mode_nchunks(layouts[d]), have = 0;
        for (uint64_t c = 0; c < nc; c++)
            have += remap_index[d][c] != UINT32_MAX;
        if (have != 0 && have != nc)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory: mode %u has remap streams "
                            "for %llu of its %llu chunks", path, d + 1,
                            (unsigned long long)have, (unsigned long long)nc);
    }
    return AMP_OK;
}
