/* Sparse tensors in coordinate form, and their readers and writers.
 *
 * This is amped-prep's input side: FROSTT .tns text (plain, gzip or
 * Zstandard compressed, or on standard input) and FROSTT binary v1 .bin are
 * read in parallel into an amp_coo, duplicates are found and summed, kept or
 * refused, and the tensor can be written back as .tns or .bin.
 * Nothing here prints: failures come back as amp_status plus an amp_error
 * whose message names the file and the line (or byte offset). */
#ifndef AMP_TENSOR_H
#define AMP_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "amp_error.h"
#include "amp_limits.h"
#include "amp_outfile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* No real nonzero line is longer: 32 modes of 20 digits plus a value. A
 * longer line means a wrong or binary file, and is refused before it can
 * exhaust memory. Comment lines are held to the same limit. */
#define AMP_TNS_MAX_LINE (64u * 1024u)

typedef struct amp_coo {
    unsigned nmodes;
    uint64_t nnz;
    uint64_t dims[AMP_MAX_MODES];
    uint64_t *ind[AMP_MAX_MODES];   /* ind[m][k]: 0-based index of nonzero k in mode m */
    double *val;                    /* val[k] */
    uint64_t cap;                   /* capacity in nonzeros of ind[] and val */
    /* 1 when no coordinate repeats (amp_coo_dedup found none, or summed or
     * refused them); 0 when not known or when repeats were kept. */
    int unique;
} amp_coo;

typedef enum amp_input_format {
    AMP_INPUT_AUTO = 0,   /* .bin by name, else text; compression by magic bytes */
    AMP_INPUT_TNS,
    AMP_INPUT_BIN
} amp_input_format;

typedef enum amp_dup_policy {
    AMP_DUP_SUM = 0,      /* add the values of repeated coordinates (default) */
    AMP_DUP_KEEP,         /* leave them as separate nonzeros */
    AMP_DUP_ERROR         /* fail, naming the first repeated coordinate */
} amp_dup_policy;

typedef enum amp_compression {
    AMP_COMPRESSION_NONE = 0,
    AMP_COMPRESSION_GZIP,
    AMP_COMPRESSION_ZSTD
} amp_compression;

typedef struct amp_read_opts {
    amp_input_format format;
    int index_base;              /* -1: detect (1 unless an index 0 appears); 0 or 1: forced */
    unsigned ndims;              /* 0, or the number of dims given: must match the data */
    uint64_t dims[AMP_MAX_MODES];/* given dimensions; indices beyond them are errors */
    amp_dup_policy duplicates;
    size_t block_bytes;          /* text read per parallel step when streaming; 0: 64 MiB */
    /* Optional progress report (bytes done, bytes total or 0 if unknown). */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
} amp_read_opts;

typedef struct amp_read_info {
    amp_input_format format;
    amp_compression compression;
    int index_base;              /* the base the file used */
    uint64_t bytes;              /* bytes of (decompressed) input parsed */
    uint64_t lines;              /* text lines, comments and blank ones included */
    uint64_t entries;            /* nonzero entries read, duplicates included */
    uint64_t duplicates;         /* entries whose coordinates appeared before */
    double seconds_read;         /* reading and parsing */
    double seconds_dedup;        /* duplicate detection and merging */
} amp_read_info;

void amp_read_opts_init(amp_read_opts *opts);

/* Read path ("-" for standard input) into t, which the caller later frees
 * with amp_coo_free. On failure t is left empty. */
amp_status amp_read_tensor(const char *path, const amp_read_opts *opts, amp_coo *t,
                           amp_read_info *info, amp_error *err);

/* Parse text already in memory (no comment, same rules as a file); name is
 * used in messages. Exposed for tests and for callers holding a buffer. */
amp_status amp_parse_tns_buffer(const char *name, const char *buf, size_t len,
                                const amp_read_opts *opts, amp_coo *t,
                                amp_read_info *info, amp_error *err);

/* Find coordinates that repeat and apply policy; *count gets how many
 * entries repeated an earlier one. With AMP_DUP_SUM the first occurrence
 * keeps the sum and order is otherwise preserved. Deterministic for any
 * thread count. name and display_base (0 or 1) shape the error message. */
amp_status amp_coo_dedup(amp_coo *t, amp_dup_policy policy, const char *name,
                         int display_base, uint64_t *count, amp_error *err);

/* What repeated coordinates add to the sum of the squared values to make
 * it the squared norm of the tensor they sum to: over every coordinate
 * that repeats, (the sum of its values)^2 minus the sum of their squares
 * (each value first rounded to f32 when f32 is set). 0 when none repeats.
 * Deterministic for any thread count. */
amp_status amp_coo_repeat_norm_sq(const amp_coo *t, int f32, double *delta, amp_error *err);

/* Write t as FROSTT text (1-based, values printed to round-trip exactly)
 * or FROSTT binary v1; through a temporary file put in place when
 * complete (amp_outfile.h), failing if path exists by then when
 * no_clobber is set. */
amp_status amp_write_tns(const amp_coo *t, const char *path, int no_clobber, amp_error *err);
amp_status amp_write_bin(const amp_coo *t, const char *path, int no_clobber, amp_error *err);
/* The same into of, opened by the caller (before the input was read),
 * finished but not placed (amp_outfile_finish); of aborted on failure. */
amp_status amp_write_tns_to(const amp_coo *t, amp_outfile *of, amp_error *err);
amp_status amp_write_bin_to(const amp_coo *t, amp_outfile *of, amp_error *err);

/* Size and XXH3-64 of a regular file's bytes on disk (what `xxhsum -H3`
 * prints), on a thread of its own so that it overlaps other work: start,
 * then finish for the result (which waits for it). Anything that is not a
 * regular file (a pipe, a device, a path that does not exist: the reader
 * reports those) starts nothing (*job NULL), and finish of a NULL job
 * gives 0 and 0. finish with size and hash NULL gives up early. */
typedef struct amp_digest_job amp_digest_job;
amp_status amp_file_digest_start(const char *path, amp_digest_job **job, amp_error *err);
amp_status amp_file_digest_finish(amp_digest_job *job, uint64_t *size, uint64_t *hash,
                                  amp_error *err);

/* Coordinate arrays as a caller holds them in memory: nonzero k's index
 * in mode m at indices[k * nnz_stride + m * mode_stride] (elements of
 * index_type), its value at values[k * value_stride] (0: 1); indices
 * from index_base (0 or 1); dims NULL for each mode's largest index. */
typedef enum amp_index_type {
    AMP_INDEX_INT32 = 0, AMP_INDEX_INT64, AMP_INDEX_UINT32, AMP_INDEX_UINT64
} amp_index_type;

typedef struct amp_coo_arrays {
    unsigned nmodes;
    uint64_t nnz;
    const void *indices;
    amp_index_type index_type;
    int64_t nnz_stride, mode_stride;
    int index_base;
    const double *values;
    int64_t value_stride;
    const uint64_t *dims;
} amp_coo_arrays;

/* The arrays into t (0-based, each index within its dimension, every
 * value finite, at least one nonzero; AMP_ERR_RANGE naming the first
 * nonzero that is not, AMP_ERR_EMPTY for none), in parallel. Repeated
 * coordinates are left for amp_coo_dedup. On failure t is left empty. */
amp_status amp_coo_from_arrays(const amp_coo_arrays *a, amp_coo *t, amp_error *err);

/* amp_coo_from_arrays' checks alone, the arrays read in place, in
 * parallel; dims gets each mode's dimension (a->dims, or the largest
 * index + 1). */
amp_status amp_coo_arrays_check(const amp_coo_arrays *a, uint64_t *dims, amp_error *err);

/* Nonzero k's 0-based index in mode m, of arrays that passed the check. */
static inline uint64_t amp_coo_arrays_index(const amp_coo_arrays *a, uint64_t k, unsigned m)
{
    const int64_t at = (int64_t)k * a->nnz_stride + (int64_t)m * a->mode_stride;
    switch (a->index_type) {
    case AMP_INDEX_INT32:
        return (uint64_t)((const int32_t *)a->indices)[at] - (uint64_t)a->index_base;
    case AMP_INDEX_UINT32:
        return (uint64_t)((const uint32_t *)a->indices)[at] - (uint64_t)a->index_base;
    case AMP_INDEX_INT64:
        return (uint64_t)((const int64_t *)a->indices)[at] - (uint64_t)a->index_base;
    default:
        return ((const uint64_t *)a->indices)[at] - (uint64_t)a->index_base;
    }
}

static inline const double *amp_coo_arrays_value_at(const amp_coo_arrays *a, uint64_t k)
{
    return &a->values[(int64_t)k * (a->value_stride ? a->value_stride : 1)];
}

static inline double amp_coo_arrays_value(const amp_coo_arrays *a, uint64_t k)
{
    return *amp_coo_arrays_value_at(a, k);
}

/* The repeated coordinates of arrays read in place (amp_coo_arrays_dedup),
 * as the builder reads them: drop marks every repeat, one bit a nonzero;
 * each first occurrence that repeats has its bit in has_sum and its value,
 * its repeats added in order, in sums (by position). kept_before[w]: the
 * nonzeros not dropped before nonzero 64 w. All NULL when none repeats. */
typedef struct amp_coo_sum {
    uint64_t k;
    double v;
} amp_coo_sum;

typedef struct amp_coo_repeats {
    uint64_t *drop, *has_sum, *kept_before;
    amp_coo_sum *sums;
    uint64_t nsums, count;    /* count: the repeats dropped */
} amp_coo_repeats;

/* amp_coo_dedup's detection on the arrays, without a copy of them: with
 * AMP_DUP_ERROR the first repeat is refused as amp_coo_dedup refuses it
 * (its coordinates shown from display_base); with AMP_DUP_SUM the repeats
 * into *r (zeroed first; freed by amp_coo_repeats_free). */
amp_status amp_coo_arrays_dedup(const amp_coo_arrays *a, amp_dup_policy policy, const char *name,
                                int display_base, amp_coo_repeats *r, amp_error *err);
void amp_coo_repeats_free(amp_coo_repeats *r);
/* The value a repeated first occurrence k takes (its bit set in has_sum). */
double amp_coo_repeats_value(const amp_coo_repeats *r, uint64_t k);

/* Storage management. amp_coo_reserve keeps contents and nmodes. */
amp_status amp_coo_init(amp_coo *t, unsigned nmodes, amp_error *err);
amp_status amp_coo_reserve(amp_coo *t, uint64_t cap, amp_error *err);
void amp_coo_free(amp_coo *t);
/* Free the index and value arrays but keep nmodes, nnz and dims, for a
 * caller that has moved the nonzeros elsewhere and still reports on them.
 * amp_coo_free is still safe afterwards. */
void amp_coo_release(amp_coo *t);

/* Summary of a tensor, for reports. */
typedef struct amp_coo_stats {
    uint64_t nonempty[AMP_MAX_MODES];   /* slices with at least one nonzero */
    uint64_t max_degree[AMP_MAX_MODES]; /* nonzeros in the fullest slice */
    double density;                     /* nnz / prod(dims) */
    double val_min, val_max, norm;      /* norm: Frobenius */
    uint64_t zeros;                     /* explicit zero values */
    int all_f32_exact;                  /* every value is exactly a float */
} amp_coo_stats;

amp_status amp_coo_stats_compute(const amp_coo *t, amp_coo_stats *s, amp_error *err);

/* A mode's nonempty slices by degree (their nonzeros), in logarithmic
 * bins: degrees 1 to 7 a bin each, then 4 bins to each doubling (8-9,
 * 10-11, 12-13, 14-15, 16-19, ...), which keeps a power-law tail of
 * billions of nonzeros to a few hundred points. */
#define AMP_DEGREE_BINS 256
typedef struct amp_degree_hist {
    uint64_t slices[AMP_DEGREE_BINS];
    uint64_t nnz[AMP_DEGREE_BINS];     /* the nonzeros of those slices */
} amp_degree_hist;

/* The bin of degree d (d >= 1), and the degrees [*lo, *hi] bin b holds. */
unsigned amp_degree_bin(uint64_t d);
void amp_degree_bin_range(unsigned b, uint64_t *lo, uint64_t *hi);
/* Mode m's histogram into h. */
amp_status amp_coo_degree_hist(const amp_coo *t, unsigned m, amp_degree_hist *h,
                               amp_error *err);
/* The same, with the per-mode degree figures (nonempty, max_degree) left 0
 * unless degrees is set: a caller that computes them anyway saves a pass. */
amp_status amp_coo_stats_compute_opt(const amp_coo *t, int degrees, amp_coo_stats *s,
                                     amp_error *err);

#ifdef __cplusplus
}
#endif
#endif
