/* The CPU backend of amped-run: an .amp file's mode copies in memory,
 * MTTKRP on them, CP-ALS, and the factor files.
 *
 * This backend is the reference the GPU paths are checked against and the
 * fallback without a GPU. Every index is in the file's relabelled (compact)
 * space until the factors are written, when the relabelling is undone.
 * Nothing here prints or exits. */
#ifndef AMP_CPD_H
#define AMP_CPD_H

#include <stdint.h>

#include "amped_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the tensor ---------------------------------------------------------- */

/* One mode copy as the file holds it, decompressed: BLCO words and values
 * in file order (by output row), plus the block keys when the indices need
 * more than 64 bits. */
typedef struct amp_copy {
    amp_mode_layout layout;    /* shards points into the open file's tables: not owned */
    uint64_t nnz;
    uint64_t *words;
    void *vals;                /* f32 or f64 as the tensor's value_type */
    size_t nblocks;            /* runs of one key: 1 when key_bits is 0 */
    uint64_t *block_start;     /* nblocks + 1 positions */
    uint64_t *block_key;
    /* The output rows the nonzeros fall in: every row of the mode for a
     * loaded file; the rows one GPU owns for a part (amp_partition.h). */
    uint64_t row_begin, row_count;
    /* A part's copy holds first the nonzeros whose row of the mode updated
     * just before this one its GPU owns (early_nnz of them, by output
     * row), then the rest (by output row): the first group needs no row
     * from another GPU. nnz for a loaded file. */
    uint64_t early_nnz;
} amp_copy;

typedef struct amp_tensor {
    unsigned nmodes;
    uint64_t nnz;
    uint64_t dims[AMP_MAX_MODES];          /* original */
    uint64_t rows[AMP_MAX_MODES];          /* compact: factor matrix rows */
    amp_value_type value_type;
    double norm_sq;
    amp_copy copies[AMP_MAX_MODES];
    uint64_t *new_to_orig[AMP_MAX_MODES];
    uint64_t bytes;                        /* held in memory */
    /* Only what the file's tables say (amp_tensor_load_layout): every
     * copy's words and vals are NULL. */
    int layout_only;
} amp_tensor;

typedef void (*amp_load_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* Read, check (checksums and every index) and decompress every mode copy
 * of an open file on `threads` threads (0: OpenMP default). */
amp_status amp_tensor_load(const amp_file *f, int threads, amp_load_progress_fn progress,
                           void *progress_ctx, amp_tensor *t, amp_error *err);
void amp_tensor_free(amp_tensor *t);

/* amp_tensor_load in two steps. The layout: sizes, relabelling, each
 * copy's layout and block table, no nonzeros (t->layout_only). Then the
 * nonzeros into host memory (nothing to do when t has them already). */
amp_status amp_tensor_load_layout(const amp_file *f, amp_tensor *t, amp_error *err);
amp_status amp_tensor_load_nonzeros(const amp_file *f, int threads,
                                    amp_load_progress_fn progress, void *progress_ctx,
                                    amp_tensor *t, amp_error *err);

/* A checked chunk as amp_tensor_read_chunks hands it over: count
 * nonzeros of copy `mode` from position `at`, the chunk `index`-th of its
 * mode in file order; words and values (the tensor's value type) in a
 * buffer of the calling thread that is reused once the sink returns; and,
 * when asked for, its stored (compressed, checksum-verified) bytes. */
typedef struct amp_chunk_data {
    const amp_section *section;
    unsigned mode;
    size_t index;
    uint64_t at, count;
    const uint64_t *words;
    const void *vals;
    const void *stored;   /* NULL unless asked for */
} amp_chunk_data;
/* Called from several threads at once; thread: 0 to threads - 1. */
typedef amp_status (*amp_chunk_sink_fn)(void *ctx, int thread, const amp_chunk_data *c,
                                        amp_error *err);
/* Every chunk of f, read, checked and decompressed on exactly `threads`
 * threads (at least 1), to sink (with the stored bytes when with_stored);
 * then the rows are checked to ascend across chunks. t: f's layout
 * (amp_tensor_load_layout) or more. */
amp_status amp_tensor_read_chunks(const amp_file *f, const amp_tensor *t, int threads,
                                  int with_stored, amp_chunk_sink_fn sink, void *sink_ctx,
                                  amp_load_progress_fn progress, void *progress_ctx,
                                  amp_error *err);

/* ---- MTTKRP -------------------------------------------------------------- */

/* Per-thread scratch for one rank: boundary rows shared between threads. */
typedef struct amp_mttkrp_ws amp_mttkrp_ws;

amp_status amp_mttkrp_ws_new(int threads, unsigned rank, amp_mttkrp_ws **ws, amp_error *err);
void amp_mttkrp_ws_free(amp_mttkrp_ws *ws);
/* The widest register sums the kernel may use: 4 (AVX-512), 3 (AVX2) or 0
 * (none: the row is summed in memory); the CPU's own widest is the default
 * and the most a cap can give. Returns the level in use. For tests and
 * benchmarks, which compare the kernels on one machine. */
int amp_mttkrp_ws_limit_isa(amp_mttkrp_ws *ws, int level);

/* M = X_(d) (A_{N-1} kr ... kr A_0, mode d left out): rows[d] x rank,
 * row-major, every row written. A[m] is rows[m] x rank, row-major. The
 * work is split into equal nonzero ranges, one per thread, so the result
 * is the same bit for bit for the same thread count. */
void amp_mttkrp_f64(const amp_tensor *t, unsigned d, const double *const *A, unsigned rank,
                    double *M, amp_mttkrp_ws *ws);
void amp_mttkrp_f32(const amp_tensor *t, unsigned d, const float *const *A, unsigned rank,
                    float *M, amp_mttkrp_ws *ws);

/* The plain reference: one pass over copy `src` (any mode's copy), f64,
 * one thread. For tests and --check. */
amp_status amp_mttkrp_reference(const amp_tensor *t, unsigned src, unsigned d,
                                const double *const *A, unsigned rank, double *M,
                                amp_error *err);

/* Bytes one MTTKRP (any mode) must move at the least: the copy once, each
 * input factor once, the output once. */
double amp_mttkrp_min_bytes(const amp_tensor *t, unsigned rank, size_t factor_size);

/* ---- the stream layout (stream_pack.c) ---------------------------------- */

/* A mode copy packed one 64-bit word per nonzero for streaming to a GPU:
 * the other modes' indices from bit 0 (shift, width as in a layout; the
 * output mode's shift is 64: the row is the key of its run), and above
 * them the value as an integer q (two's complement when a value is
 * negative), value = q / 10^decimals
 * in the value's type. Runs of equal output rows: run_start (nruns + 1)
 * and run_row. */
typedef struct amp_stream_copy {
    uint64_t nnz;
    uint64_t *words;
    size_t nruns;
    uint64_t *run_start, *run_row;
    uint8_t shift[AMP_MAX_MODES], width[AMP_MAX_MODES];
    unsigned qshift, qbits, decimals;
    int qsigned;               /* q is two's complement; else unsigned */
} amp_stream_copy;

/* Pack copy d on `threads` threads (0: the OpenMP default); *packed is 0 (and s empty) when a
 * value is not q / 10^k exactly for k <= 9 or the bits exceed 64. */
amp_status amp_stream_pack(const amp_tensor *t, unsigned d, int threads, amp_stream_copy *s,
                           int *packed, amp_error *err);
void amp_stream_copy_free(amp_stream_copy *s);
/* The value a packed word holds (f32 values when f32 is set). */
double amp_stream_value(const amp_stream_copy *s, uint64_t word, int f32);

/* ---- CP-ALS -------------------------------------------------------------- */

typedef enum amp_precision { AMP_PRECISION_F64 = 0, AMP_PRECISION_F32 } amp_precision;

/* The most parts amp_cpd_opts.gpu_parts may ask for. */
#define AMP_SEND_PARTS_MAX 8

typedef struct amp_cpd_opts {
    unsigned rank;
    unsigned max_iters;
    double tol;                /* stop when the fit changes by less; 0: never */
    uint64_t seed;
    amp_precision precision;   /* of the MTTKRP; the R x R algebra is f64 */
    int threads;               /* 0: OpenMP default */
    /* GPU backend: a stored factor is rescaled in place where a column's
     * scale leaves [1/bound, bound]; 0: 2^(40/(N-1)). 1 rescales at every
     * update (tests take that path on purpose). */
    double gpu_rescale_bound;
    /* Several GPUs: a mode's rows are solved and sent in this many parts
     * as its MTTKRP finishes each (1 to AMP_SEND_PARTS_MAX; 0 or 1:
     * whole, once solved, the default: on rd100m parts gained at most 1%
     * and lost from 4 parts on, bench/RESULTS.md). */
    unsigned gpu_parts;
    /* Called after every iteration, from the calling thread. */
    void (*on_iter)(void *ctx, unsigned iter, double fit, double delta, double seconds);
    void *ctx;
} amp_cpd_opts;

enum {
    AMP_PHASE_MTTKRP, AMP_PHASE_GRAM, AMP_PHASE_SOLVE, AMP_PHASE_NORMALIZE, AMP_PHASE_FIT,
    AMP_PHASE_COMM,   /* collectives between GPUs (multi-GPU runs only) */
    AMP_NPHASES
};

typedef struct amp_cpd {
    unsigned nmodes, rank;
    uint64_t rows[AMP_MAX_MODES];
    double *A[AMP_MAX_MODES];  /* rows[m] x rank, row-major, columns normalized */
    double *lambda;
    unsigned iters;
    double fit;
    int converged;             /* stopped because the fit changed by less than tol */
    int pinv_used;             /* a Gram product was singular: pseudo-inverse solve */
    double seconds[AMP_NPHASES];
} amp_cpd;

void amp_cpd_opts_init(amp_cpd_opts *o);

/* Factors of a fresh decomposition of t: uniform [0, 1) from the seed,
 * the same for any thread count. */
amp_status amp_cpd_init_random(const amp_tensor *t, unsigned rank, uint64_t seed, amp_cpd *c,
                               amp_error *err);
void amp_cpd_free(amp_cpd *c);

/* Run CP-ALS from the factors in c (random or read). */
amp_status amp_cpd_als(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c,
                       amp_error *err);

/* Time opts->max_iters rounds of MTTKRP over every mode (the papers'
 * measure): seconds[d] summed over rounds. */
amp_status amp_cpd_time_mttkrp(const amp_tensor *t, const amp_cpd_opts *o, const amp_cpd *c,
                               double *seconds, amp_error *err);

/* Largest normwise relative difference, per mode, between the kernel of
 * opts->precision and the f64 reference on c's factors. */
amp_status amp_cpd_check_mttkrp(const amp_tensor *t, const amp_cpd_opts *o, const amp_cpd *c,
                                double *rel_err, amp_error *err);

/* ---- factor files -------------------------------------------------------- */

typedef enum amp_factor_format { AMP_FACTORS_TEXT = 0, AMP_FACTORS_NPY } amp_factor_format;

/* PREFIX.mode1.mat ... PREFIX.modeN.mat and PREFIX.lambda.mat (text), or
 * .npy; rows in the original index space (slices the file dropped as empty
 * are zero rows). All are written to temporary names and renamed only once
 * every one is complete. */
amp_status amp_factors_write(const amp_tensor *t, const amp_cpd *c, const char *prefix,
                             amp_factor_format format, amp_precision precision,
                             amp_error *err);

/* Read PREFIX.modeN.mat (text, original index space) into c's factors and
 * PREFIX.lambda.mat, when present, folded into the last mode's columns. */
amp_status amp_factors_read(const amp_tensor *t, const char *prefix, unsigned rank,
                            amp_cpd *c, amp_error *err);

#ifdef __cplusplus
}
#endif
#endif
