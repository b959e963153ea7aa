/* FLYCOO's dynamic remapping on one GPU (flycoo-gpu-cf24, sections 3.1
 * and 4.2; issue 30): two buffers hold two mode copies, and after mode d's
 * MTTKRP has read copy d, copy d + 1 is written into the other buffer
 * through the positions pos_d (run/core/remap.c has the design, the CPU
 * reference amp_remap_copy and the memory per nonzero). The buffers swap
 * roles each mode; gpu_remap (gpu_internal.h) keeps which copy each holds.
 *
 * Thread mapping: a grid-stride loop, one thread a nonzero k of copy d
 * (consecutive threads, consecutive k: the reads are coalesced). A thread
 * finds k's block key (a binary search over the block starts where the
 * copy has several blocks), takes each mode's index out of the word with
 * copy d's shifts and widths and puts it in with copy d + 1's
 * (amp_blco_field, amp_blco_put), and writes the low 64 bits and the
 * value, unchanged, at pos_d[k]: with f64 values one 16-byte record (one
 * store), with f32 values a word and a value in two arrays (two stores,
 * at the same index of each). The key bits are not written: copy
 * d + 1's block table, on the device for good, says the key of every
 * position. Positions are a permutation, so no write needs an atomic; the
 * writes coalesce only as far as neighbouring nonzeros of copy d land
 * near each other in copy d + 1 (to be measured: bench/bench-gpu.sh).
 *
 * Bytes per nonzero, c = 8 + value size (12 f32, 16 f64): read c (word
 * and value) + 4 (its position), write c (scattered). No flops. What a
 * remap costs is the scattered stores: each fills part of a 32-byte
 * sector far from the others', and 2 stores a nonzero took as long with
 * 4-byte values as with 8 (bench/RESULTS.md); records halve them.
 *
 * Variants: the value's width (4 or 8 bytes, copied as bits). The MTTKRP
 * kernels are not changed: the remap is a kernel of its own on a stream
 * of its own, overlapping the mode's solve, normalization and Gram; or,
 * with f64 values, fused into the MTTKRP instead (mttkrp.cu's team
 * kernel, gpu_remap_fuse_next), whose stores go out while it waits for
 * the rows it gathers, and copy d is read once, not twice. */
#include <config.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>

#include "amp_cuda.h"
#include "blco_decode.cuh"
#include "gpu_internal.h"

/* One remap, passed by value (kernel parameter space). */
struct remap_args {
    const uint64_t *words;
    const void *vals;
    const uint64_t *block_start, *block_key;
    uint32_t nblocks;
    const uint32_t *pos;
    uint64_t nnz;
    uint64_t *out_words;
    void *out_vals;
    unsigned stride;   /* 2: words and vals are one array of records (V 64-bit) */
    unsigned nmodes;
    uint8_t from_shift[AMP_MAX_MODES], from_width[AMP_MAX_MODES];
    uint8_t to_shift[AMP_MAX_MODES], to_width[AMP_MAX_MODES];
};

/* V: the value's bits (uint32_t for f32, uint64_t for f64). */
template <typename V>
__global__ void __launch_bounds__(256) remap_copy(const remap_args a)
{
    const V *vals = (const V *)a.vals;
    V *out_vals = (V *)a.out_vals;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < a.nnz; k += stride) {
        const uint64_t w = a.words[k * a.stride];
        const uint64_t key = a.block_key[a.nblocks > 1 ? block_of(a.block_start, a.nblocks, k) : 0];
        uint64_t to_key = 0, to_word = 0;
        for (unsigned m = 0; m < a.nmodes; m++)
            amp_blco_put(amp_blco_field(key, w, a.from_shift[m], a.from_width[m]), a.to_shift[m],
                         a.to_width[m], &to_key, &to_word);
        const uint32_t p = a.pos[k];
        if (sizeof(V) == 8 && a.stride == 2) {
            const ulonglong2 rec = {to_word, (unsigned long long)vals[2 * k]};
            ((ulonglong2 *)a.out_words)[p] = rec;
        } else {
            a.out_words[p] = to_word;
            out_vals[p] = vals[k];
        }
    }
}

/* Records {words[k], vals[k]} into out[k]: copy 0 made records at load. */
__global__ void __launch_bounds__(256) interleave(const uint64_t *words, const uint64_t *vals,
                                                  uint64_t nnz, ulonglong2 *out)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < nnz; k += stride) {
        const ulonglong2 rec = {(unsigned long long)words[k], (unsigned long long)vals[k]};
        out[k] = rec;
    }
}

amp_status gpu_remap_interleave(gpu_remap *r, int b, const uint64_t *words, const uint64_t *vals,
                                int sm_count, amp_error *err)
{
    if (r->stride != 2)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "records of a remap buffer of stride %u",
                        r->stride);
    if (r->nnz > 0) {
        const unsigned grid =
            (unsigned)std::min<uint64_t>((r->nnz + 255) / 256, 8u * (unsigned)sm_count);
        interleave<<<grid, 256>>>(words, vals, r->nnz, (ulonglong2 *)r->words[b]);
        CUDA_TRY(cudaGetLastError(), err);
    }
    CUDA_TRY(cudaDeviceSynchronize(), err);
    return AMP_OK;
}

amp_status gpu_remap_new(int device, unsigned nmodes, gpu_remap **out, amp_error *err)
{
    amp_status rc = AMP_OK;
    gpu_remap *r = (gpu_remap *)calloc(1, sizeof *r);
    if (r == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    r->holds[0] = r->holds[1] = -1;
    r->stride = 1;
    r->fuse = 1;
    r->fusing = -1;
    CUDA_TRY_GOTO(cudaSetDevice(device), err, rc, fail);
    CUDA_TRY_GOTO(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking), err, rc, fail);
    CUDA_TRY_GOTO(cudaEventCreateWithFlags(&r->queued, cudaEventDisableTiming), err, rc, fail);
    for (int b = 0; b < 2; b++)
        CUDA_TRY_GOTO(cudaEventCreateWithFlags(&r->written[b], cudaEventDisableTiming), err, rc,
                      fail);
    for (unsigned m = 0; m < nmodes; m++) {
        CUDA_TRY_GOTO(cudaEventCreate(&r->t0[m]), err, rc, fail);
        CUDA_TRY_GOTO(cudaEventCreate(&r->t1[m]), err, rc, fail);
    }
    *out = r;
    return AMP_OK;
fail:
    gpu_remap_free(r, nmodes);
    return rc;
}

void gpu_remap_free(gpu_remap *r, unsigned nmodes)
{
    if (r == NULL)
        return;
    if (r->stream)
        cudaStreamSynchronize(r->stream);
    for (int b = 0; b < 2; b++) {
        cudaFree(r->words[b]);
        if (r->stride == 1)   /* else inside words[b] */
            cudaFree(r->vals[b]);
        destroy_event(r->written[b]);
    }
    for (unsigned m = 0; m < nmodes; m++) {
        cudaFree(r->pos[m]);
        destroy_event(r->t0[m]);
        destroy_event(r->t1[m]);
    }
    destroy_event(r->queued);
    destroy_stream(r->stream);
    free(r);
}

/* The buffer holding copy d, or -1. */
static int held(const gpu_remap *r, unsigned d)
{
    return r->holds[0] == (int)d ? 0 : r->holds[1] == (int)d ? 1 : -1;
}

int gpu_remap_arrays(const gpu_remap *r, unsigned d, const uint64_t **words, const void **vals,
                     unsigned *stride)
{
    const int b = held(r, d);
    if (b < 0)
        return 0;
    *words = r->words[b];
    *vals = r->vals[b];
    *stride = r->stride;
    return 1;
}

/* Mode d's last remap into the total, once done. It was queued a whole
 * iteration ago or more, and the MTTKRP of the copy it wrote waited for
 * it, so the wait costs nothing in a run. */
static amp_status settle(gpu_remap *r, unsigned d, amp_error *err)
{
    if (!r->timed[d])
        return AMP_OK;
    float ms = 0;
    CUDA_TRY(cudaEventSynchronize(r->t1[d]), err);
    CUDA_TRY(cudaEventElapsedTime(&ms, r->t0[d], r->t1[d]), err);
    r->seconds += ms / 1e3;
    r->count++;
    r->timed[d] = 0;
    return AMP_OK;
}

void gpu_remap_fuse_next(const amp_gpu_tensor *g, unsigned d)
{
    gpu_remap *r = g->remap;
    const unsigned next = (d + 1) % g->nmodes;
    const int from = held(r, d);
    r->fusing = -1;
    r->launched = 0;
    if (r->fuse && r->stride == 2 && from >= 0 && held(r, next) < 0 && next != d) {
        r->fusing = (int)d;
        r->fuse_to = 1 - from;
    }
}

void gpu_remap_fuse_abort(const amp_gpu_tensor *g)
{
    gpu_remap *r = g->remap;
    if (r->fusing >= 0 && r->launched)   /* fuse_to was being written: it holds no copy */
        r->holds[r->fuse_to] = -1;
    r->fusing = -1;
    r->launched = 0;
}

amp_status gpu_remap_ahead(const amp_gpu_tensor *g, unsigned d, cudaStream_t s, amp_error *err)
{
    gpu_remap *r = g->remap;
    const unsigned next = (d + 1) % g->nmodes;
    const int from = held(r, d);
    if (r->fusing == (int)d && !r->launched)   /* asked, but no MTTKRP wrote it */
        r->fusing = -1;
    if (r->fusing == (int)d) {
        /* The MTTKRP queued on s wrote copy next into fuse_to: booked. */
        const int to = r->fuse_to;
        r->fusing = -1;
        r->launched = 0;
        CUDA_TRY(cudaEventRecord(r->written[to], s), err);
        r->holds[to] = (int)next;
        r->latest = to;
        r->fused++;
        return AMP_OK;
    }
    if (held(r, next) >= 0)
        return AMP_OK;
    if (from < 0)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "mode %u's copy is not on the device to remap "
                        "from (the buffers hold copies %d and %d, from 0)", d + 1, r->holds[0],
                        r->holds[1]);
    const int to = 1 - from;
    const gpu_copy *a = &g->copies[d], *b = &g->copies[next];
    remap_args x;
    memset(&x, 0, sizeof x);
    x.words = r->words[from];
    x.vals = r->vals[from];
    x.block_start = a->block_start;
    x.block_key = a->block_key;
    x.nblocks = a->nblocks;
    x.pos = r->pos[d];
    x.nnz = r->nnz;
    x.out_words = r->words[to];
    x.out_vals = r->vals[to];
    x.stride = r->stride;
    x.nmodes = g->nmodes;
    for (unsigned m = 0; m < g->nmodes; m++) {
        x.from_shift[m] = a->shift[m];
        x.from_width[m] = a->width[m];
        x.to_shift[m] = b->shift[m];
        x.to_width[m] = b->width[m];
    }
    /* Buffer `to` was last read by work on s (the MTTKRP before), and
     * copy d is still being read there: the remap starts after both, and
     * after copy d was written, on whichever stream that was (a fused
     * MTTKRP's, maybe not s). */
    CUDA_TRY(cudaEventRecord(r->queued, s), err);
    CUDA_TRY(cudaStreamWaitEvent(r->stream, r->queued, 0), err);
    CUDA_TRY(cudaStreamWaitEvent(r->stream, r->written[from], 0), err);
    AMP_CHECK(settle(r, d, err));
    CUDA_TRY(cudaEventRecord(r->t0[d], r->stream), err);
    if (r->nnz > 0) {
        const unsigned grid =
            (unsigned)std::min<uint64_t>((r->nnz + 255) / 256, 8u * (unsigned)g->sm_count);
        if (g->vals_f32)
            remap_copy<uint32_t><<<grid, 256, 0, r->stream>>>(x);
        else
            remap_copy<uint64_t><<<grid, 256, 0, r->stream>>>(x);
        CUDA_TRY(cudaGetLastError(), err);
    }
    CUDA_TRY(cudaEventRecord(r->t1[d], r->stream), err);
    CUDA_TRY(cudaEventRecord(r->written[to], r->stream), err);
    r->timed[d] = 1;
    r->holds[to] = (int)next;
    r->latest = to;
    return AMP_OK;
}

amp_status gpu_remap_bring(const amp_gpu_tensor *g, unsigned d, cudaStream_t s, amp_error *err)
{
    gpu_remap *r = g->remap;
    if (d >= g->nmodes)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "no mode %u of %u", d + 1, g->nmodes);
    /* The other buffer holds the copy before the latest one (each remap
     * writes the copy after its source), so each step makes progress. */
    for (unsigned step = 0; held(r, d) < 0; step++) {
        if (step >= g->nmodes || r->holds[r->latest] < 0)
            return AMP_FAIL(err, AMP_ERR_INTERNAL, "mode %u's copy not reached by remapping "
                            "(the buffers hold copies %d and %d, from 0)", d + 1, r->holds[0],
                            r->holds[1]);
        AMP_CHECK(gpu_remap_ahead(g, (unsigned)r->holds[r->latest], s, err));
    }
    CUDA_TRY(cudaStreamWaitEvent(s, r->written[held(r, d)], 0), err);
    return AMP_OK;
}

extern "C" int amp_gpu_tensor_remapped(const amp_gpu_tensor *g)
{
    return g->remap != NULL;
}

extern "C" amp_status amp_gpu_remap_next(const amp_gpu_tensor *g, unsigned d, void *stream,
                                         amp_error *err)
{
    if (g->remap == NULL || d >= g->nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "a remap of mode %u: the tensor %s", d + 1,
                        g->remap ? "has fewer modes" : "holds every copy, not two remapped");
    CUDA_TRY(cudaSetDevice(g->device), err);
    return gpu_remap_ahead(g, d, (cudaStream_t)stream, err);
}

extern "C" void amp_gpu_remap_set_fuse(amp_gpu_tensor *g, int on)
{
    if (g->remap)
        g->remap->fuse = on != 0;
}

extern "C" unsigned amp_gpu_remap_fused(const amp_gpu_tensor *g)
{
    return g->remap ? g->remap->fused : 0;
}

extern "C" amp_status amp_gpu_remap_seconds(const amp_gpu_tensor *g, double *seconds,
                                            unsigned *count, amp_error *err)
{
    *seconds = 0;
    *count = 0;
    if (g->remap == NULL)
        return AMP_OK;
    CUDA_TRY(cudaSetDevice(g->device), err);
    for (unsigned m = 0; m < g->nmodes; m++)
        AMP_CHECK(settle(g->remap, m, err));
    *seconds = g->remap->seconds;
    *count = g->remap->count;
    return AMP_OK;
}

extern "C" amp_status amp_gpu_copy_download(const amp_gpu_tensor *g, unsigned d, uint64_t *words,
                                            void *vals, amp_error *err)
{
    if (d >= g->nmodes || g->streamed)
        return AMP_FAIL(err, AMP_ERR_USAGE, "mode %u's copy is not resident", d + 1);
    const gpu_copy *c = &g->copies[d];
    const uint64_t *dw = c->words;
    const void *dv = c->vals;
    unsigned stride = 1;
    if (g->remap && !gpu_remap_arrays(g->remap, d, &dw, &dv, &stride))
        return AMP_FAIL(err, AMP_ERR_USAGE, "mode %u's copy is not in either buffer (they hold "
                        "copies %d and %d, from 0)", d + 1, g->remap->holds[0],
                        g->remap->holds[1]);
    CUDA_TRY(cudaSetDevice(g->device), err);
    if (g->remap) {   /* whichever stream wrote it: a remap's, or a fused MTTKRP's */
        CUDA_TRY(cudaStreamSynchronize(g->remap->stream), err);
        CUDA_TRY(cudaEventSynchronize(g->remap->written[held(g->remap, d)]), err);
    }
    if (c->nnz == 0)
        return AMP_OK;
    const size_t vsize = g->vals_f32 ? 4 : 8;
    /* Records: every other word is a value; the 2-D copies take them apart. */
    CUDA_TRY(cudaMemcpy2D(words, 8, dw, 8 * stride, 8, (size_t)c->nnz, cudaMemcpyDeviceToHost),
             err);
    CUDA_TRY(cudaMemcpy2D(vals, vsize, dv, vsize * stride, vsize, (size_t)c->nnz,
                          cudaMemcpyDeviceToHost), err);
    return AMP_OK;
}
