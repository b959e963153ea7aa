/* What the CUDA files of run/cuda share: the resident tensor and the
 * error macros that turn a failed CUDA, cuBLAS or cuSOLVER call into an
 * amp_status carrying file, line and the call's text. C++ (nvcc) only. */
#ifndef AMP_GPU_INTERNAL_H
#define AMP_GPU_INTERNAL_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "amp_cuda.h"

/* Record a CUDA error already in hand, e, as AMP_ERR_CUDA: "what: the
 * runtime's words for e". Evaluates to the status, like AMP_FAIL. */
#define CUDA_FAIL(err, e, what) \
    AMP_FAIL((err), AMP_ERR_CUDA, "%s: %s", (what), cudaGetErrorString(e))

/* cuBLAS and cuSOLVER report a status number; the call's text says which. */
#define LIB_TRY_GOTO(call, ok, what, err, rc, label)                                      \
    do {                                                                                  \
        int s_ = (int)(call);                                                             \
        if (s_ != (ok))                                                                   \
            AMP_RAISE_GOTO((err), (rc), label, AMP_ERR_CUDA, "%s: %s status %d", #call,   \
                           (what), s_);                                                   \
    } while (0)
#define CUBLAS_TRY_GOTO(call, err, rc, label) \
    LIB_TRY_GOTO(call, CUBLAS_STATUS_SUCCESS, "cuBLAS", err, rc, label)
#define CUSOLVER_TRY_GOTO(call, err, rc, label) \
    LIB_TRY_GOTO(call, CUSOLVER_STATUS_SUCCESS, "cuSOLVER", err, rc, label)

#define CUDA_TRY(call, err)                                                               \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess)                                                            \
            return CUDA_FAIL((err), e_, #call);                                           \
    } while (0)

#define CUDA_TRY_GOTO(call, err, rc, label)                                               \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            (rc) = CUDA_FAIL((err), e_, #call);                                           \
            goto label;                                                                   \
        }                                                                                 \
    } while (0)

/* For cleanup blocks: destroy an event or a stream if it was made. */
static inline void destroy_event(cudaEvent_t e)
{
    if (e)
        cudaEventDestroy(e);
}
static inline void destroy_stream(cudaStream_t s)
{
    if (s)
        cudaStreamDestroy(s);
}

/* Device buffers a streamed tensor cycles through: one being filled, one
 * being read, one spare so a copy never waits for the kernel before. */
#define AMP_GPU_RING 3

/* One mode copy: BLCO words and values in device memory (resident) or in
 * pinned host memory (streamed); the block keys always on the device. */
struct gpu_copy {
    uint64_t nnz;
    uint64_t *words;
    void *vals;
    const uint64_t *host_words;   /* streamed: registered (pinned) host memory */
    const void *host_vals;        /* NULL when packed */
    int packed;                   /* the stream layout: values inside the words */
    amp_stream_copy stream;       /* its host arrays, owned */
    uint32_t nblocks;
    uint64_t *block_start;   /* nblocks + 1 */
    uint64_t *block_key;
    uint8_t shift[AMP_MAX_MODES], width[AMP_MAX_MODES];
    uint64_t row_begin, row_count;   /* the output rows its nonzeros fall in */
    uint64_t early_nnz;              /* the first group (see amp_copy) */
    int gapless;   /* resident, and every row of its range holds a nonzero */
    /* Resident, one group, nonzeros: cut j (0 < j < AMP_GPU_CUTS) is the
     * first nonzero of row cut_row[j]; cut 0 and the last bound the copy
     * and its rows [row_begin, row_begin + row_count). Rows never span a
     * cut; equal cuts leave an empty range. has_cuts 0: not cut. */
    int has_cuts;
    uint64_t cut_nnz[AMP_GPU_CUTS + 1], cut_row[AMP_GPU_CUTS + 1];
    /* The fiber level, as the host copy has it (amp_copy). */
    int has_fibers;
    unsigned fiber_mode;
};

struct gpu_zstream;
struct gpu_remap;

/* Two copies remapped (FLYCOO, remap.cu): two buffers of the largest
 * copy's nonzeros, each holding one mode's copy at a time, and every
 * mode's remap positions, all on the device. After mode d's MTTKRP has
 * read copy d, copy d + 1 is written into the other buffer through pos[d]
 * on a stream of its own, while the mode's update runs; the next MTTKRP
 * waits for it. The copies' own words and vals stay NULL: gpu_remap_arrays
 * says where a copy is. The tensor is const to the MTTKRP and CP-ALS,
 * which move copies through this state, hence a pointer from it. */
struct gpu_remap {
    uint64_t nnz;                    /* of every copy (a whole tensor) */
    /* Buffer b: words[b] and vals[b]. With f64 values (stride 2) one array
     * of 16-byte records, word then value, so that the remap writes each
     * nonzero with one store, not two at two scattered places (the stores
     * are what a remap costs: bench/RESULTS.md); vals[b] is then
     * words[b] + 1, and both advance 2 words a nonzero. f32 values (stride
     * 1) stay two arrays: a 12-byte record would take 16. */
    uint64_t *words[2];
    void *vals[2];
    unsigned stride;
    int holds[2];                    /* the copy in each buffer; -1: none */
    int latest;                      /* the buffer written last */
    /* Fused (FLYCOO's own design): mode d's MTTKRP writes copy d + 1
     * itself as it reads copy d, its stores issued while it waits for the
     * rows it gathers, instead of a remap kernel after it. fuse: allowed
     * (records only, stride 2); fusing: the mode whose MTTKRP writes the
     * next copy now (-1: none), into buffer fuse_to, and whether a fused
     * kernel has been queued for it (launched); fused: how many. */
    int fuse, fusing, fuse_to, launched;
    unsigned fused;
    uint32_t *pos[AMP_MAX_MODES];    /* copy d's nonzero k goes to pos[d][k] of copy d + 1 */
    cudaStream_t stream;
    cudaEvent_t queued;              /* the caller's work so far, for the stream to wait on */
    cudaEvent_t written[2];          /* buffer b's copy is complete */
    /* Each mode's last remap, timed; added to seconds once read. */
    cudaEvent_t t0[AMP_MAX_MODES], t1[AMP_MAX_MODES];
    int timed[AMP_MAX_MODES];
    double seconds;
    unsigned count;
};

/* A remap state for nmodes modes on device (current): its stream and
 * events, buffers and positions left for the caller to allocate. */
amp_status gpu_remap_new(int device, unsigned nmodes, gpu_remap **out, amp_error *err);
void gpu_remap_free(gpu_remap *r, unsigned nmodes);
/* Buffer b's records (stride 2) from a copy's words and f64 values, both
 * on the device (not in buffer b); waits for them. */
amp_status gpu_remap_interleave(gpu_remap *r, int b, const uint64_t *words, const uint64_t *vals,
                                int sm_count, amp_error *err);
/* Copy d's arrays and their stride in 8-byte words (gpu_remap.stride),
 * when a buffer holds it (1), else 0. */
int gpu_remap_arrays(const gpu_remap *r, unsigned d, const uint64_t **words, const void **vals,
                     unsigned *stride);
/* After the work queued on s (an MTTKRP) is done with copy d: copy
 * (d + 1) mod N written from it on the remap stream, unless a buffer
 * holds that copy already. Copy d must be held. */
amp_status gpu_remap_ahead(const amp_gpu_tensor *g, unsigned d, cudaStream_t s, amp_error *err);
/* Before mode d's MTTKRP in CP-ALS: where copy d + 1 is not held and
 * fusing is allowed, that MTTKRP (amp_gpu_mttkrp_group, mttkrp.cu) will
 * write it into the other buffer; gpu_remap_ahead after it then only
 * books it. Where its kernel has no fused variant the MTTKRP says so
 * (fusing back to -1) and gpu_remap_ahead remaps as without. */
void gpu_remap_fuse_next(const amp_gpu_tensor *g, unsigned d);
/* The MTTKRP asked to write the next copy failed: its buffer holds no
 * copy, and nothing is being fused. */
void gpu_remap_fuse_abort(const amp_gpu_tensor *g);
/* Copy d ready for the work queued on s next: remapped forward from the
 * last copy made as often as it takes (at most N - 1 times), and s made
 * to wait for the remap that wrote it. Every reader of a remapped tensor
 * must call it on its own stream first. */
amp_status gpu_remap_bring(const amp_gpu_tensor *g, unsigned d, cudaStream_t s, amp_error *err);

/* Every mode copy of a tensor, resident on one device. */
struct amp_gpu_tensor {
    int device, sm_count;
    unsigned nmodes;
    int vals_f32;
    uint64_t rows[AMP_MAX_MODES];
    int narrow_rows;   /* every factor has fewer than 2^32 rows */
    gpu_copy copies[AMP_MAX_MODES];
    size_t bytes;
    /* Streaming: chunks of chunk_nnz nonzeros go through a ring of NBUF
     * device buffers, copied on copy_stream while the kernel of the chunk
     * before runs on the caller's stream. */
    int streamed;
    uint64_t chunk_nnz;
    double stream_bytes;   /* host to device per round of every mode */
    uint64_t *ring_words[AMP_GPU_RING];
    void *ring_vals[AMP_GPU_RING];
    cudaStream_t copy_stream;
    cudaEvent_t copied[AMP_GPU_RING], consumed[AMP_GPU_RING];
    void *registered[2 * AMP_MAX_MODES];   /* host ranges to unregister */
    unsigned nregistered;
    /* Streamed from compressed chunks in host memory (zstream.cu), not
     * from host_words and host_vals; NULL otherwise. */
    gpu_zstream *zstream;
    /* Chunks of copy pf_copy, from its first nonzero to pf_end, already
     * queued into the ring by amp_gpu_prefetch (the next iteration's
     * first ones, queued before the host waits for the fit): the run of
     * that range takes them instead of queueing them again. The only
     * state a run changes in the tensor. */
    int pf_copy;
    unsigned pf_count;
    uint64_t pf_end;
    gpu_remap *remap;   /* NULL unless two copies remapped */
    int fibers;         /* amp_gpu_tensor_fibers: the fiber kernel where it applies */
};

/* Whether mode d's MTTKRP of `group` runs over fibers (mttkrp_fibers.cu):
 * turned on, a resident copy with a fiber level, neither streamed,
 * remapped nor packed, the whole copy. */
int gpu_fibers_apply(const amp_gpu_tensor *g, unsigned d, int group);
/* M = MTTKRP(d) over copy d's fibers, as amp_gpu_mttkrp (the copy's rows
 * of M zeroed first). */
amp_status gpu_mttkrp_fibers(const amp_gpu_tensor *g, unsigned d, void *const *A, unsigned R,
                             int f32, void *M, cudaStream_t s, amp_error *err);

/* Nonzeros [c0, c0 + n) of streamed copy c (not from compressed chunks)
 * into ring buffer b, on g->copy_stream once the kernel that read that
 * buffer last is done (g->consumed[b]); g->copied[b] is recorded after
 * it. A kernel of the chunk waits for copied[b] on its own stream and
 * records consumed[b] there after it (mttkrp.cu's run_range, apr.cu). */
amp_status gpu_queue_chunk(const amp_gpu_tensor *g, const gpu_copy *c, int b, uint64_t c0,
                           uint64_t n, amp_error *err);

/* Streaming from compressed chunks (zstream.cu). gpu_zstream_new reads
 * every chunk of f on `threads` threads, checks it and keeps its stored
 * bytes; gpu_zstream_run feeds copy d's chunks through g's ring: for each,
 * once its copy into ring buffer b is queued on g->copy_stream and stream
 * s waits for it, launch(ctx, b, at, count) queues its kernel on s. */
typedef amp_status (*gpu_zstream_launch_fn)(void *ctx, int b, uint64_t at, uint64_t count,
                                            amp_error *err);
amp_status gpu_zstream_new(int device, const amp_file *f, const amp_tensor *t, int threads,
                           amp_load_progress_fn progress, void *progress_ctx, gpu_zstream **z,
                           amp_error *err);
amp_status gpu_zstream_run(const amp_gpu_tensor *g, unsigned d, gpu_zstream_launch_fn launch,
                           void *launch_ctx, cudaStream_t s, amp_error *err);
size_t gpu_zstream_host_bytes(const gpu_zstream *z);
void gpu_zstream_free(gpu_zstream *z);

/* Host-to-device copies from pageable memory through page-locked buffers
 * filled by several threads (upload.cu): `workers` of them, each with two
 * buffers and a stream (0: up to 16, one per core). A NULL uploader, or a
 * small copy, goes through cudaMemcpy. amp_gpu_upload returns when the
 * bytes are on the device. amp_gpu_upload_async, called by the caller's
 * thread number `worker` (one thread per worker at a time), returns once
 * src may be reused; amp_gpu_uploader_wait returns when every such copy
 * is on the device. */
struct amp_gpu_uploader;
extern "C" amp_status amp_gpu_uploader_new(int device, int workers, amp_gpu_uploader **u,
                                           amp_error *err);
extern "C" amp_status amp_gpu_upload(amp_gpu_uploader *u, void *dst, const void *src,
                                     size_t bytes, amp_error *err);
extern "C" amp_status amp_gpu_upload_async(amp_gpu_uploader *u, int worker, void *dst,
                                           const void *src, size_t bytes, amp_error *err);
extern "C" amp_status amp_gpu_uploader_wait(amp_gpu_uploader *u, amp_error *err);
extern "C" void amp_gpu_uploader_free(amp_gpu_uploader *u);

#endif
