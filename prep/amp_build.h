/* From a tensor in memory to an .amp file: per mode, compact the nonempty
 * slices, deal them to shards (FLYCOO greedy: heaviest first to the least
 * loaded shard), relabel so each shard owns one contiguous row range with
 * its heaviest rows first, order a copy of the nonzeros by output row and
 * write it as BLCO-encoded chunks. */
#ifndef AMP_BUILD_H
#define AMP_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "amp_coo.h"
#include "amped_format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum amp_value_choice {
    AMP_VALUE_AUTO = 0,    /* f32 when every value is exactly a float, else f64 */
    AMP_VALUE_F32,
    AMP_VALUE_F64
} amp_value_choice;

#define AMP_DEFAULT_SHARDS 64
#define AMP_DEFAULT_CHUNK_NNZ (UINT64_C(1) << 20)

typedef struct amp_build_opts {
    uint32_t shards;           /* per mode, capped by the mode's nonempty slices */
    uint64_t chunk_nnz;        /* most nonzeros per chunk */
    amp_value_choice values;
    amp_write_opts write;      /* compression level and threads */
    const char *source_name;   /* for the metadata */
    uint64_t source_size;
    uint64_t source_hash;
    const char *params;        /* "key=value" lines recorded in the file */
    int remap_streams;         /* also write REMAP sections (FLYCOO remap IDs) */
    /* Optional, NULL for none: how far the build is, for a caller that
     * shows it (the library prints nothing). Never called by two threads at
     * once: on the calling thread, except "chunks", which comes from the
     * writer thread that places each chunk, one at a time. Within a phase,
     * total is fixed and done never decreases. The phases, in this order:
     *   "values"   0, then 1 of 1 (value type and norm)
     *   "relabel"  modes relabelled of nmodes
     *   "order"    mode copies ordered of nmodes    } once per mode copy,
     *   "chunks"   nonzeros written of nnz x nmodes } taking turns
     *   "commit"   0, then 1 of 1 (directory, check, flush, rename)
     * "chunks" counts every copy, so it runs on across its turns. A build
     * that fails stops reporting where it failed. write.progress, if set,
     * is still called. */
    void (*progress)(void *ctx, const char *phase, uint64_t done, uint64_t total);
    void *progress_ctx;
    /* Optional, NULL for none: room for nmodes x shards counts, where mode
     * d's shard s gets its nonzeros at [d * shards + s] (for the shards
     * the mode has; amp_build_mode_report.nshards says how many). */
    uint64_t *shard_nnz;
} amp_build_opts;

typedef struct amp_build_mode_report {
    uint64_t compact_dim;
    uint32_t nshards;
    uint64_t max_shard_nnz;    /* the fullest shard */
    uint64_t max_degree;       /* the fullest slice: no shard can hold less */
    uint64_t nchunks;
} amp_build_mode_report;

typedef struct amp_build_report {
    amp_value_type value_type;
    uint64_t values_changed;   /* values f32 could not hold exactly */
    uint64_t file_bytes;
    amp_build_mode_report modes[AMP_MAX_MODES];
    double seconds_values;     /* value type and norm */
    double seconds_relabel;    /* degrees, shard dealing, relabelling */
    double seconds_sort;       /* ordering the mode copies */
    double seconds_chunks;     /* encoding, compressing and writing chunks */
    double seconds_commit;     /* directory, flush to disk, rename */
    double seconds_write;      /* everything after relabelling */
} amp_build_report;

void amp_build_opts_init(amp_build_opts *opts);

/* The "key=value" lines amped-prep records as the file's parameters
 * (amp_build_opts.params) for opts and the duplicates policy, into buf
 * (512 bytes hold them): so that a tensor built in memory (libamped)
 * records, and so writes, what amped-prep would. */
void amp_build_params(char *buf, size_t size, const amp_build_opts *opts, int duplicates);

/* Write t to path as an .amp file, consuming t's nonzeros: its index and
 * value arrays are freed once the first mode copy holds them (every later
 * copy is built from that one), so the peak is the tensor plus one copy.
 * nmodes, nnz and dims stay for the caller's report; amp_coo_free(t) is
 * still needed. */
amp_status amp_build_write(amp_coo *t, const char *path, const amp_build_opts *opts,
                           amp_build_report *report, amp_error *err);

/* The same file from a caller's arrays, read in place (no copy of them is
 * made: their labels are kept per mode until copy 0 holds the nonzeros),
 * checked by amp_coo_arrays_check (dims its dimensions) and with their
 * repeats found by amp_coo_arrays_dedup (NULL: none): the bytes
 * amp_build_write writes for the amp_coo that amp_coo_from_arrays and
 * amp_coo_dedup would make of them. The arrays must not change during
 * the call. */
amp_status amp_build_write_arrays(const amp_coo_arrays *a, const uint64_t *dims,
                                  const amp_coo_repeats *repeats, const char *path,
                                  const amp_build_opts *opts, amp_build_report *report,
                                  amp_error *err);

#ifdef __cplusplus
}
#endif
#endif
