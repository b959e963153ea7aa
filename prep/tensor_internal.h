/* Internals shared by the tensor readers; not part of amp_tensor.h. */
#ifndef AMP_TENSOR_INTERNAL_H
#define AMP_TENSOR_INTERNAL_H

#include <zlib.h>
#include <zstd.h>

#include "amp_tensor.h"

#ifdef _OPENMP
#include <omp.h>
static inline int amp_max_threads(void) { return omp_get_max_threads(); }
#else
static inline int amp_max_threads(void) { return 1; }
#endif

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

/* This thread's share [*lo, *hi) of n items in a parallel region, in
 * thread order, so per-thread results can be combined deterministically. */
static inline void amp_thread_range(uint64_t n, int *tid, int *nt, uint64_t *lo, uint64_t *hi)
{
#ifdef _OPENMP
    *tid = omp_get_thread_num();
    *nt = omp_get_num_threads();
#else
    *tid = 0;
    *nt = 1;
#endif
    *lo = n * (uint64_t)*tid / (uint64_t)*nt;
    *hi = n * (uint64_t)(*tid + 1) / (uint64_t)*nt;
}

/* Per-thread counts, counts[q * nbuckets + b] for thread q of nt, turned
 * into where each thread's entries of each bucket start: bucket by bucket,
 * threads in order within a bucket, so that a scatter over the threads'
 * amp_thread_range slices is stable. */
static inline void amp_bucket_offsets(uint64_t *counts, int nt, uint64_t nbuckets)
{
    uint64_t at = 0;
    for (uint64_t b = 0; b < nbuckets; b++)
        for (int q = 0; q < nt; q++) {
            uint64_t c = counts[(uint64_t)q * nbuckets + b];
            counts[(uint64_t)q * nbuckets + b] = at;
            at += c;
        }
}

#endif
