/* Opening an .amp file: everything but the bulk data is read and checked
 * here, in an order that gives each kind of damage its own diagnosis
 * (wrong file, newer version, truncation, bit flips) before any size or
 * offset from the file is trusted. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "reader_internal.h"

amp_status amp_pread_full(const amp_file *f, void *buf, size_t n, uint64_t offset,
                          const char *what, amp_error *err)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = pread(f->fd, p, n, (off_t)offset);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot read the %s: %s", f->path, what,
                            strerror(errno));
        }
        if (r == 0)
            return AMP_FAIL(err, AMP_ERR_TRUNCATED, "%s: the file ends inside the %s (at "
                            "byte %llu); was it truncated while open?", f->path, what,
                            (unsigned long long)offset);
        p += r;
        n -= (size_t)r;
        offset += (uint64_t)r;
    }
    return AMP_OK;
}

/* Name the damage when the magic bytes are wrong: PNG's signature was
 * designed so that each common mangling leaves a recognisable trace. */
static amp_status bad_magic(const char *path, const unsigned char *h, size_t n,
                            amp_error *err)
{
    static const unsigned char crlf_to_lf[] = {0x89, 'A', 'M', 'P', '\n', 0x1a, '\n'};
    static const unsigned char lf_to_crlf[] = {0x89, 'A', 'M', 'P', '\r', '\r', '\n', 0x1a};
    if (n >= sizeof crlf_to_lf && memcmp(h, crlf_to_lf, sizeof crlf_to_lf) == 0)
        return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: not a valid .amp file: its CR LF was turned "
                        "into LF (copied in text mode?)", path);
    if (n >= sizeof lf_to_crlf && memcmp(h, lf_to_crlf, sizeof lf_to_crlf) == 0)
        return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: not a valid .amp file: its LF was turned "
                        "into CR LF (copied in text mode?)", path);
    if (n >= 4 && h[0] == 0x09 && memcmp(h + 1, "AMP", 3) == 0)
        return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: not a valid .amp file: the high bit of its "
                        "bytes was stripped (sent over a 7-bit channel?)", path);
    int text = n > 0;
    for (size_t i = 0; i < n; i++)
        if (!(h[i] == '\n' || h[i] == '\r' || h[i] == '\t' || (h[i] >= 32 && h[i] < 127)))
            text = 0;
    if (text)
        return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: not an .amp file: it starts with text (a "
                        ".tns tensor? convert it with amped-prep first)", path);
    return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: not an .amp file (wrong magic bytes)", path);
}

static amp_status check_header(amp_file *f, const unsigned char *h, uint64_t actual,
                               amp_error *err)
{
    const char *path = f->path;
    amp_file_info *in = &f->info;
    size_t have = actual < AMP_HEADER_SIZE ? (size_t)actual : AMP_HEADER_SIZE;
    if (actual == 0)
        return AMP_FAIL(err, AMP_ERR_TRUNCATED, "%s: empty file (0 bytes), not an .amp file",
                        path);
    size_t cmp = have < AMP_MAGIC_LEN ? have : AMP_MAGIC_LEN;
    if (memcmp(h, AMP_MAGIC, cmp) != 0)
        return bad_magic(path, h, have, err);
    if (have < AMP_HEADER_SIZE)
        return AMP_FAIL(err, AMP_ERR_TRUNCATED, "%s: truncated: %llu byte%s, shorter than the "
                        "%d-byte header", path, (unsigned long long)actual,
                        amp_plural((unsigned long long)actual), AMP_HEADER_SIZE);
    in->major = amp_get16(h + AMP_H_MAJOR);
    in->minor = amp_get16(h + AMP_H_MINOR);
    /* The version comes before the checksum: a later major version may lay
     * out (and check) its header differently. */
    if (in->major != AMP_FORMAT_MAJOR)
        return AMP_FAIL(err, AMP_ERR_VERSION, "%s: format version %u.%u; this amped reads "
                        "versions %d.0 to %d.x%s", path, in->major, in->minor,
                        AMP_FORMAT_MAJOR, AMP_FORMAT_MAJOR,
                        in->major > AMP_FORMAT_MAJOR ? " (the file is newer: upgrade amped)"
                                                     : "");
    uint64_t stored = amp_get64(h + AMP_H_HASH), computed = XXH3_64bits(h, AMP_H_HASH);
    if (!amp_hash_matches(stored, computed))
        return AMP_FAIL(err, AMP_ERR_CHECKSUM, "%s: header checksum mismatch (stored "
                        "%016llx, computed %016llx): the header is damaged", path,
                        (unsigned long long)stored, (unsigned long long)computed);
    in->flags = amp_get32(h + AMP_H_FLAGS);
    in->file_size = amp_get64(h + AMP_H_FILE_SIZE);
    in->dir_offset = amp_get64(h + AMP_H_DIR_OFFSET);
    in->dir_size = amp_get64(h + AMP_H_DIR_SIZE);
    f->dir_hash = amp_get64(h + AMP_H_DIR_HASH);
    if (in->flags != 0)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%s: header: flags 0x%lx name features "
                        "this amped does not know", path, (unsigned long)in->flags);
    if (amp_get64(h + AMP_H_RESERVED) != 0)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: header: reserved field is not zero", path);
    if (actual < in->file_size)
        return AMP_FAIL(err, AMP_ERR_TRUNCATED, "%s: truncated: %llu of %llu bytes are there%s",
                        path, (unsigned long long)actual, (unsigned long long)in->file_size,
                        actual <= in->dir_offset ? "; the directory and trailer are missing"
                        : actual - in->dir_offset < in->dir_size
                            ? "; the directory is cut short and the trailer is missing"
                            : "; the trailer is missing");
    if (actual > in->file_size)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: %llu byte%s follow%s the end of the file "
                        "(header says %llu bytes)", path,
                        (unsigned long long)(actual - in->file_size),
                        amp_plural(actual - in->file_size),
                        actual - in->file_size == 1 ? "s" : "",
                        (unsigned long long)in->file_size);
    if (in->file_size < AMP_HEADER_SIZE + AMP_DIR_HEADER_SIZE + AMP_TRAILER_SIZE ||
        in->dir_offset < AMP_HEADER_SIZE ||
        in->dir_offset > in->file_size - AMP_TRAILER_SIZE - AMP_DIR_HEADER_SIZE ||
        in->dir_size < AMP_DIR_HEADER_SIZE ||
        in->dir_size != in->file_size - AMP_TRAILER_SIZE - in->dir_offset)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: header: directory at byte %llu, %llu bytes "
                        "long, does not end where the %llu-byte file's trailer starts", path,
                        (unsigned long long)in->dir_offset, (unsigned long long)in->dir_size,
                        (unsigned long long)in->file_size);
    return AMP_OK;
}

static amp_status check_trailer(amp_file *f, amp_error *err)
{
    unsigned char t[AMP_TRAILER_SIZE];
    AMP_CHECK(amp_pread_full(f, t, sizeof t, f->info.file_size - AMP_TRAILER_SIZE, "trailer",
                             err));
    if (memcmp(t + AMP_T_MAGIC, AMP_TRAILER_MAGIC, AMP_MAGIC_LEN) != 0 ||
        amp_get64(t + AMP_T_DIR_OFFSET) != f->info.dir_offset ||
        amp_get64(t + AMP_T_DIR_SIZE) != f->info.dir_size ||
        amp_get64(t + AMP_T_DIR_HASH) != f->dir_hash)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: trailer is damaged or disagrees with the "
                        "header", f->path);
    return AMP_OK;
}

static amp_status read_directory(amp_file *f, amp_error *err)
{
    const char *path = f->path;
    amp_status rc = AMP_OK;
    unsigned char *dir = malloc(f->info.dir_size);
    if (dir == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: out of memory for a %llu-byte directory",
                        path, (unsigned long long)f->info.dir_size);
    AMP_CHECK_GOTO(amp_pread_full(f, dir, f->info.dir_size, f->info.dir_offset, "directory",
                                  err), rc, done);
    uint64_t computed = XXH3_64bits(dir, f->info.dir_size);
    if (!amp_hash_matches(f->dir_hash, computed))
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_CHECKSUM, "%s: directory checksum mismatch "
                       "(stored %016llx, computed %016llx): the directory is damaged", path,
                       (unsigned long long)f->dir_hash, (unsigned long long)computed);
    uint32_t entry_size = amp_get32(dir + 8);
    uint64_t count = amp_get64(dir + 16);
    if (memcmp(dir, AMP_DIR_MAGIC, AMP_MAGIC_LEN) != 0 || amp_get32(dir + 12) != 0 ||
        entry_size < AMP_DIR_ENTRY_SIZE || entry_size % 8 != 0 ||
        count > (f->info.dir_size - AMP_DIR_HEADER_SIZE) / entry_size ||
        AMP_DIR_HEADER_SIZE + count * entry_size != f->info.dir_size || count > UINT32_MAX)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_CORRUPT, "%s: directory: bad magic, entry size "
                       "%lu or entry count %llu for %llu bytes", path,
                       (unsigned long)entry_size, (unsigned long long)count,
                       (unsigned long long)f->info.dir_size);
    f->secs = malloc((count ? count : 1) * sizeof *f->secs);
    if (f->secs == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory for %llu sections",
                       (unsigned long long)count);
    /* Entries may grow in a later minor version: read the fields we know. */
    for (uint64_t i = 0; i < count; i++)
        amp_decode_entry(dir + AMP_DIR_HEADER_SIZE + i * entry_size, &f->secs[i]);
    f->info.nsections = (size_t)count;
    for (size_t i = 0; i < f->info.nsections; i++)
        f->info.nskipped += !amp_section_type_known(f->secs[i].type);
    rc = amp_check_entries(path, f->secs, f->info.nsections, f->info.dir_offset, err);
done:
    free(dir);
    return rc;
}

/* META and MODE are small: read, verify and decode them at open. */
static amp_status read_small(amp_file *f, const amp_section *s, unsigned char **out,
                             amp_error *err)
{
    amp_section_reader *r = NULL;
    *out = malloc(s->raw_size ? s->raw_size : 1);
    if (*out == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    amp_status rc = amp_section_reader_new(f, &r, err);
    if (rc == AMP_OK)
        rc = amp_section_read(r, s, *out, s->raw_size, err);
    amp_section_reader_free(r);
    if (rc != AMP_OK) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

static amp_status read_layouts(amp_file *f, amp_error *err)
{
    const char *path = f->path;
    size_t n = f->info.nsections, at;
    unsigned char *raw = NULL;
    AMP_CHECK(amp_find_unique(path, f->secs, n, AMP_SECTION_META, AMP_NO_INDEX, &at, err));
    if (at == n) {
        /* A META entry whose mode is not none is not found above: name
         * its field rather than call the section missing. */
        for (size_t i = 0; i < n; i++)
            if (f->secs[i].type == AMP_SECTION_META)
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (metadata "
                                "section (META)): mode, shard, seq, count and aux must be "
                                "unused", path, i);
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory has no metadata section (META)",
                        path);
    }
    AMP_CHECK(read_small(f, &f->secs[at], &raw, err));
    amp_status rc = amp_decode_meta(path, raw, f->secs[at].raw_size, &f->meta, f->text, err);
    free(raw);
    AMP_CHECK(rc);
    uint64_t total_chunks = 0;
    for (unsigned d = 0; d < f->meta.nmodes; d++) {
        AMP_CHECK(amp_find_unique(path, f->secs, n, AMP_SECTION_MODE, d, &at, err));
        if (at == n) {
            /* Its entry may name a mode the tensor does not have. */
            for (size_t i = 0; i < n; i++)
                if (f->secs[i].type == AMP_SECTION_MODE && f->secs[i].mode >= f->meta.nmodes)
                    return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory entry %zu (layout "
                                    "section (MODE)): mode %lu, and the tensor has %u modes",
                                    path, i, (unsigned long)f->secs[i].mode + 1,
                                    f->meta.nmodes);
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory has no layout section (MODE) "
                            "for mode %u", path, d + 1);
        }
        AMP_CHECK(read_small(f, &f->secs[at], &raw, err));
        rc = amp_decode_mode(path, raw, f->secs[at].raw_size, f->meta.nmodes, &f->layouts[d],
                             err);
        free(raw);
        AMP_CHECK(rc);
        if (f->layouts[d].mode != d)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: the mode %u layout section describes "
                            "mode %u", path, d + 1, f->layouts[d].mode + 1);
        AMP_CHECK(amp_check_mode(path, &f->meta, &f->layouts[d], err));
        f->layout_ptrs[d] = &f->layouts[d];
        AMP_CHECK(amp_find_unique(path, f->secs, n, AMP_SECTION_RELABEL, d, &f->relabel_at[d],
                                  err));
        if (f->relabel_at[d] == n)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: directory has no relabelling section "
                            "(RELABEL) for mode %u", path, d + 1);
        uint64_t nc = amp_mode_nchunks(&f->layouts[d]);
        total_chunks += nc;
        /* Bound the allocation by what the directory actually lists. */
        if (total_chunks > n)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: the layouts name %llu chunks, the "
                            "directory lists %zu sections", path,
                            (unsigned long long)total_chunks, n);
        f->chunk_index[d] = malloc((nc ? nc : 1) * sizeof **f->chunk_index);
        f->remap_index[d] = malloc((nc ? nc : 1) * sizeof **f->remap_index);
        if (f->chunk_index[d] == NULL || f->remap_index[d] == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    AMP_CHECK(amp_check_directory(path, f->secs, n, &f->meta, f->layout_ptrs, f->chunk_index,
                                  f->remap_index, err));
    return amp_check_fibers(path, f->secs, n, &f->meta, f->layout_ptrs, f->fiber_at, err);
}

amp_status amp_file_open(const char *path, amp_file **fp, amp_error *err)
{
    *fp = NULL;
    amp_status rc = AMP_OK;
    amp_file *f = calloc(1, sizeof *f);
    if (f == NULL || (f->path = strdup(path)) == NULL) {
        free(f);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_IO, "%s: cannot open: %s", path,
                       strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) != 0)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_IO, "%s: cannot stat: %s", path,
                       strerror(errno));
    if (!S_ISREG(st.st_mode))
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_FORMAT, "%s: not a regular file (.amp files "
                       "are read with random access)", path);
    uint64_t actual = (uint64_t)st.st_size;
    unsigned char h[AMP_HEADER_SIZE] = {0};
    size_t have = actual < AMP_HEADER_SIZE ? (size_t)actual : AMP_HEADER_SIZE;
    AMP_CHECK_GOTO(amp_pread_full(f, h, have, 0, "header", err), rc, fail);
    AMP_CHECK_GOTO(check_header(f, h, actual, err), rc, fail);
    AMP_CHECK_GOTO(check_trailer(f, err), rc, fail);
    AMP_CHECK_GOTO(read_directory(f, err), rc, fail);
    AMP_CHECK_GOTO(read_layouts(f, err), rc, fail);
    *fp = f;
    return AMP_OK;
fail:
    amp_file_close(f);
    return rc;
}

void amp_file_close(amp_file *f)
{
    if (f == NULL)
        return;
    if (f->fd >= 0)
        close(f->fd);
    for (unsigned d = 0; d < AMP_MAX_MODES; d++) {
        free(f->layouts[d].shards);
        free(f->chunk_index[d]);
        free(f->remap_index[d]);
    }
    free(f->secs);
    free(f->path);
    free(f);
}

const char *amp_file_path(const amp_file *f)
{
    return f->path;
}

const amp_file_info *amp_file_info_get(const amp_file *f)
{
    return &f->info;
}

const amp_meta *amp_file_meta(const amp_file *f)
{
    return &f->meta;
}

const amp_mode_layout *amp_file_mode(const amp_file *f, unsigned mode)
{
    return mode < f->meta.nmodes ? &f->layouts[mode] : NULL;
}

const amp_section *amp_file_section(const amp_file *f, size_t i)
{
    return i < f->info.nsections ? &f->secs[i] : NULL;
}

const amp_section *amp_file_relabel(const amp_file *f, unsigned mode)
{
    return mode < f->meta.nmodes ? &f->secs[f->relabel_at[mode]] : NULL;
}

const amp_section *amp_file_chunk(const amp_file *f, unsigned mode, uint32_t shard,
                                  uint32_t seq)
{
    if (mode >= f->meta.nmodes || shard >= f->layouts[mode].nshards ||
        seq >= f->layouts[mode].shards[shard].nchunks)
        return NULL;
    return &f->secs[f->chunk_index[mode][f->layouts[mode].shards[shard].first_chunk + seq]];
}

const amp_section *amp_file_fiber(const amp_file *f, unsigned mode)
{
    if (mode >= f->meta.nmodes || f->fiber_at[mode] >= f->info.nsections)
        return NULL;
    return &f->secs[f->fiber_at[mode]];
}

const amp_section *amp_file_remap(const amp_file *f, unsigned mode, uint32_t shard,
                                  uint32_t seq)
{
    if (mode >= f->meta.nmodes || shard >= f->layouts[mode].nshards ||
        seq >= f->layouts[mode].shards[shard].nchunks)
        return NULL;
    uint32_t i = f->remap_index[mode][f->layouts[mode].shards[shard].first_chunk + seq];
    return i == UINT32_MAX ? NULL : &f->secs[i];
}
