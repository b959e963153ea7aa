/* Byte sources for the readers: files, pipes, gzip and Zstandard. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amped_format.h"
#include "tensor_internal.h"

#define SOURCE_IN_BYTES ((size_t)1 << 20)

static amp_status fill_input(amp_source *s, amp_error *err)
{
    if (s->in_pos < s->in_len || s->in_eof)
        return AMP_OK;
    s->in_pos = s->in_len = 0;
    for (;;) {
        ssize_t n = read(s->fd, s->in, s->in_cap);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return AMP_FAIL(err, AMP_ERR_IO, "%s: read failed: %s", s->name, strerror(errno));
        if (n == 0)
            s->in_eof = 1;
        s->in_len = (size_t)n;
        s->raw_consumed += (uint64_t)n;
        return AMP_OK;
    }
}

amp_status amp_source_open(amp_source *s, const char *name, amp_error *err)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    int is_stdin = strcmp(name, "-") == 0;
    s->name = is_stdin ? "(standard input)" : name;
    if (is_stdin) {
        s->fd = STDIN_FILENO;
    } else {
        s->fd = open(name, O_RDONLY | O_CLOEXEC);
        if (s->fd < 0)
            return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot open: %s", name, strerror(errno));
        s->own_fd = 1;
    }
    struct stat st;
    if (fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode))
        s->file_size = (uint64_t)st.st_size;
    else if (!is_stdin && fstat(s->fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        amp_source_close(s);
        return AMP_FAIL(err, AMP_ERR_IO, "%s: is a directory", name);
    }
    s->in_cap = SOURCE_IN_BYTES;
    s->in = malloc(s->in_cap);
    if (s->in == NULL) {
        amp_source_close(s);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    /* Peek at the magic bytes: keep reading until 8 bytes or the end. */
    while (s->in_len < AMP_FILE_MAGIC_LEN && !s->in_eof) {
        ssize_t n = read(s->fd, s->in + s->in_len, s->in_cap - s->in_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            amp_status rc = AMP_FAIL(err, AMP_ERR_IO, "%s: read failed: %s", s->name,
                                     strerror(errno));
            amp_source_close(s);
            return rc;
        }
        if (n == 0)
            s->in_eof = 1;
        s->in_len += (size_t)n;
        s->raw_consumed += (uint64_t)n;
    }
    const unsigned char *b = s->in;
    if (s->in_len >= AMP_FILE_MAGIC_LEN && memcmp(b, AMP_FILE_MAGIC, AMP_FILE_MAGIC_LEN) == 0) {
        /* Read as text it would fail on its first line for no clear
         * reason. */
        amp_status rc = AMP_FAIL(err, AMP_ERR_FORMAT, "%s: this is an .amp file, which "
                                 "amped-prep writes and amped-run reads (amped-run --info %s "
                                 "describes it); amped-prep reads tensors in FROSTT text "
                                 "(.tns) or binary (.bin)", s->name,
                                 is_stdin ? "FILE" : s->name);
        amp_source_close(s);
        return rc;
    }
    if (s->in_len >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
        s->compression = AMP_COMPRESSION_GZIP;
        /* 15 + 32: any window size, gzip or zlib header detected. */
        if (inflateInit2(&s->z, 15 + 32) != Z_OK) {
            amp_source_close(s);
            return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: cannot start gzip decoder", s->name);
        }
        s->z_live = 1;
    } else if (s->in_len >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) {
        s->compression = AMP_COMPRESSION_ZSTD;
        s->zd = ZSTD_createDCtx();
        if (s->zd == NULL) {
            amp_source_close(s);
            return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: cannot start zstd decoder", s->name);
        }
    } else if (s->file_size > 0) {
        /* Plain regular file: callers may map it; rewind for readers. */
        if (lseek(s->fd, 0, SEEK_SET) == 0) {
            s->in_pos = s->in_len = 0;
            s->in_eof = 0;
            s->raw_consumed = 0;
        }
    }
    return AMP_OK;
}

static amp_status read_gzip(amp_source *s, unsigned char *dst, size_t n, size_t *got,
                            amp_error *err)
{
    z_stream *z = &s->z;
    z->next_out = dst;
    z->avail_out = n > UINT32_MAX ? UINT32_MAX : (uInt)n;
    while (z->avail_out > 0) {
        AMP_CHECK(fill_input(s, err));
        if (s->in_pos == s->in_len) {
            if (!s->z_ended)
                return AMP_FAIL(err, AMP_ERR_CORRUPT,
                                "%s: gzip stream is truncated (ends inside a member)", s->name);
            break;
        }
        if (s->z_ended) {
            /* Concatenated members are one stream, as gzip -d treats them. */
            inflateReset(z);
            s->z_ended = 0;
        }
        z->next_in = s->in + s->in_pos;
        z->avail_in = (uInt)(s->in_len - s->in_pos);
        int zr = inflate(z, Z_NO_FLUSH);
        s->in_pos = s->in_len - z->avail_in;
        if (zr == Z_STREAM_END)
            s->z_ended = 1;
        else if (zr != Z_OK && zr != Z_BUF_ERROR)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: corrupt gzip data near byte %" PRIu64 ": %s",
                            s->name, s->raw_consumed - (s->in_len - s->in_pos),
                            z->msg ? z->msg : "inflate failed");
    }
    *got = n - z->avail_out;
    return AMP_OK;
}

/* Compressed bytes handed to the Zstandard decoder per call. On an error
 * it does not say how much input it took, so the error is placed at the
 * end of the slice it was given: within this many bytes of where the
 * decoder stopped (the end of the damaged block, or of the frame for a
 * checksum). The calls cost nothing measurable at this size. */
#define ZSTD_SLICE ((size_t)4096)

static amp_status read_zstd(amp_source *s, unsigned char *dst, size_t n, size_t *got,
                            amp_error *err)
{
    ZSTD_outBuffer out = {dst, n, 0};
    while (out.pos < out.size) {
        AMP_CHECK(fill_input(s, err));
        size_t avail = s->in_len - s->in_pos;
        ZSTD_inBuffer in = {s->in + s->in_pos, avail < ZSTD_SLICE ? avail : ZSTD_SLICE, 0};
        if (in.size == 0 && s->in_eof) {
            if (s->zstd_pending != 0)
                return AMP_FAIL(err, AMP_ERR_CORRUPT,
                                "%s: zstd stream is truncated (ends inside a frame)", s->name);
            /* Data still buffered in the decoder comes out with empty input. */
            size_t before = out.pos;
            size_t r = ZSTD_decompressStream(s->zd, &out, &in);
            if (ZSTD_isError(r))
                return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: corrupt zstd data: %s", s->name,
                                ZSTD_getErrorName(r));
            if (out.pos == before)
                break;
            continue;
        }
        size_t r = ZSTD_decompressStream(s->zd, &out, &in);
        if (ZSTD_isError(r))
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: corrupt zstd data, detected by byte %"
                            PRIu64 " (the damage is there or before): %s",
                            s->name, s->raw_consumed - (s->in_len - s->in_pos) + in.size,
                            ZSTD_getErrorName(r));
        s->in_pos += in.pos;
        s->zstd_pending = r;
    }
    *got = out.pos;
    return AMP_OK;
}

amp_status amp_source_read(amp_source *s, void *dst, size_t n, size_t *got, amp_error *err)
{
    *got = 0;
    if (n == 0)
        return AMP_OK;
    amp_status rc;
    switch (s->compression) {
    case AMP_COMPRESSION_GZIP:
        rc = read_gzip(s, dst, n, got, err);
        break;
    case AMP_COMPRESSION_ZSTD:
        rc = read_zstd(s, dst, n, got, err);
        break;
    default:
        if (s->in_pos < s->in_len) {     /* bytes peeked from a pipe */
            size_t k = s->in_len - s->in_pos < n ? s->in_len - s->in_pos : n;
            memcpy(dst, s->in + s->in_pos, k);
            s->in_pos += k;
            *got = k;
            rc = AMP_OK;
            break;
        }
        for (;;) {
            /* Large reads go straight into the caller's buffer. */
            ssize_t r = read(s->fd, dst, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return AMP_FAIL(err, AMP_ERR_IO, "%s: read failed: %s", s->name, strerror(errno));
            s->raw_consumed += (uint64_t)r;
            *got = (size_t)r;
            rc = AMP_OK;
            break;
        }
    }
    s->out_produced += *got;
    return rc;
}

amp_status amp_source_read_exact(amp_source *s, void *dst, size_t n, const char *what,
                                 amp_error *err)
{
    unsigned char *p = dst;
    uint64_t start = s->out_produced;
    while (n > 0) {
        size_t got;
        AMP_CHECK(amp_source_read(s, p, n, &got, err));
        if (got == 0)
            return AMP_FAIL(err, AMP_ERR_CORRUPT,
                            "%s: truncated at byte %" PRIu64 " while reading %s (%zu more "
                            "bytes expected from byte %" PRIu64 ")",
                            s->name, s->out_produced, what, n, start);
        p += got;
        n -= got;
    }
    return AMP_OK;
}

amp_status amp_source_read_exact_parallel(amp_source *s, void *dst, size_t n, const char *what,
                                          amp_error *err)
{
    const size_t piece = (size_t)8 << 20;
    if (s->compression != AMP_COMPRESSION_NONE || s->file_size == 0 || s->in_pos < s->in_len ||
        n < 2 * piece)
        return amp_source_read_exact(s, dst, n, what, err);
    const uint64_t off = s->out_produced;
    if (off + n > s->file_size)
        return amp_source_read_exact(s, dst, n, what, err);   /* reports the truncation */
    const size_t npieces = (n + piece - 1) / piece;
    int failed_errno = 0;
    #pragma omp parallel for schedule(dynamic, 1)
    for (size_t i = 0; i < npieces; i++) {
        size_t lo = i * piece, len = n - lo < piece ? n - lo : piece;
        while (len > 0) {
            ssize_t r = pread(s->fd, (char *)dst + lo, len, (off_t)(off + lo));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                #pragma omp atomic write
                failed_errno = r < 0 ? errno : EIO;
                break;
            }
            lo += (size_t)r;
            len -= (size_t)r;
        }
    }
    if (failed_errno)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: read failed in %s: %s", s->name, what,
                        strerror(failed_errno));
    if (lseek(s->fd, (off_t)(off + n), SEEK_SET) < 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: seek failed: %s", s->name, strerror(errno));
    s->out_produced += n;
    s->raw_consumed += n;
    return AMP_OK;
}

void amp_source_close(amp_source *s)
{
    if (s->z_live)
        inflateEnd(&s->z);
    if (s->zd)
        ZSTD_freeDCtx(s->zd);
    if (s->own_fd && s->fd >= 0)
        close(s->fd);
    free(s->in);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}
