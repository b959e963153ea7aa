/* Internals shared by the tensor readers; not part of amp_coo.h. */
#ifndef AMP_TENSOR_INTERNAL_H
#define AMP_TENSOR_INTERNAL_H

#include <zlib.h>
#include <zstd.h>

#include "amp_coo.h"
#include "amp_threads.h"


/* A sequential byte source: a file descriptor (file or pipe), optionally
 * through a gzip or Zstandard decoder. Compression is recognised by magic
 * bytes, never by name, so "cat x.tns.gz | amped-prep -" works. */
typedef struct amp_source {
    const char *name;
    int fd, own_fd;
    amp_compression compression;
    uint64_t file_size;          /* 0 when unknown (pipe) */
    uint64_t raw_consumed;       /* bytes taken from fd, for progress */
    uint64_t out_produced;       /* bytes handed to the caller */
    unsigned char *in;           /* raw (compressed) input buffer */
    size_t in_cap, in_pos, in_len;
    int in_eof;
    z_stream z;
    int z_live, z_ended;
    ZSTD_DCtx *zd;
    size_t zstd_pending;         /* ZSTD_decompressStream's hint; 0 at frame end */
} amp_source;

/* fd < 0: open name ("-": standard input). Peeks at the first bytes. */
amp_status amp_source_open(amp_source *s, const char *name, amp_error *err);
/* Up to n bytes into dst; *got == 0 only at the end of the data. */
amp_status amp_source_read(amp_source *s, void *dst, size_t n, size_t *got, amp_error *err);
/* Exactly n bytes or an error saying what was truncated. */
amp_status amp_source_read_exact(amp_source *s, void *dst, size_t n, const char *what,
                                 amp_error *err);
/* Exactly n bytes like amp_source_read_exact, but for a plain regular file
 * the read is split over the OpenMP threads (pread at offsets): a single
 * read() from the page cache tops out near one core's copy bandwidth. */
amp_status amp_source_read_exact_parallel(amp_source *s, void *dst, size_t n, const char *what,
                                          amp_error *err);
void amp_source_close(amp_source *s);

amp_status amp_read_bin(amp_source *s, const amp_read_opts *opts, amp_coo *t,
                        amp_read_info *info, amp_error *err);

#endif
