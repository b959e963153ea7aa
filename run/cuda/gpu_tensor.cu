/* A tensor on one GPU: its mode copies uploaded and kept resident, or
 * two of them remapped mode by mode (remap.cu), or set up to stream (from
 * page-locked host memory, or from the file's compressed chunks through
 * zstream.cu), and what a resident copy is checked for once at load. The
 * MTTKRP over it is mttkrp.cu's. */
#include <config.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>

#include "amp_cuda.h"
#include "blco_decode.cuh"
#include "gpu_internal.h"

/* Whether a resident copy's rows run without a gap: nonzero 0 in row
 * first, each next nonzero in the same row or the one after, the last in
 * row last. Then the MTTKRP writes every row of [first, last] and M needs
 * no zeroing before it (a pass of stores over M each time:
 * bench/RESULTS.md, "amped-run on one GPU"): only the rows a team shares
 * with its neighbours take atomic adds, and zero_team_rows clears those.
 * The format promises it (every row nonempty: amped(5)); a file that
 * breaks the promise gets the memset. */
__global__ void rows_gapless(const uint64_t *words, unsigned wstride, const uint64_t *block_start,
                             const uint64_t *block_key, uint32_t nblocks, uint64_t nnz,
                             unsigned shift, unsigned width, uint64_t first, uint64_t last,
                             unsigned *gaps)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < nnz; k += stride) {
        uint64_t r = row_at(words, wstride, block_start, block_key, nblocks, shift, width, k);
        bool gap = k == 0 && r != first;
        if (k + 1 < nnz) {
            uint64_t next =
                row_at(words, wstride, block_start, block_key, nblocks, shift, width, k + 1);
            gap |= next != r && next != r + 1;
        } else {
            gap |= r != last;
        }
        if (gap)
            atomicOr(gaps, 1u);
    }
}

/* Cut j of AMP_GPU_CUTS for thread j - 1: the row of nonzero nnz j / CUTS,
 * and the first nonzero of that row (the copy is ordered by row). */
__global__ void cut_kernel(const uint64_t *words, unsigned wstride, const uint64_t *block_start,
                          const uint64_t *block_key, uint32_t nblocks, uint64_t nnz,
                          unsigned shift, unsigned width, uint64_t *cut_nnz, uint64_t *cut_row)
{
    const unsigned j = threadIdx.x + 1;
    if (j >= AMP_GPU_CUTS)
        return;
    const uint64_t at = nnz * j / AMP_GPU_CUTS;
    const uint64_t row =
        row_at(words, wstride, block_start, block_key, nblocks, shift, width, at);
    uint64_t lo = 0, hi = at;   /* the first position whose row is row lies in [lo, hi] */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (row_at(words, wstride, block_start, block_key, nblocks, shift, width, mid) < row)
            lo = mid + 1;
        else
            hi = mid;
    }
    cut_nnz[j] = lo;
    cut_row[j] = row;
}

static void gpu_copy_free(gpu_copy *c)
{
    if (c->host_words == NULL) {
        cudaFree(c->words);
        cudaFree(c->vals);
    }
    if (c->packed)
        amp_stream_copy_free(&c->stream);
    cudaFree(c->block_start);
    cudaFree(c->block_key);
    memset(c, 0, sizeof *c);
}

extern "C" void amp_gpu_tensor_free(amp_gpu_tensor *g)
{
    if (g == NULL)
        return;
    cudaSetDevice(g->device);
    if (g->copy_stream)
        cudaStreamSynchronize(g->copy_stream);
    gpu_zstream_free(g->zstream);
    g->zstream = NULL;
    for (unsigned k = 0; k < g->nregistered; k++)
        cudaHostUnregister(g->registered[k]);
    g->nregistered = 0;
    gpu_remap_free(g->remap, g->nmodes);
    g->remap = NULL;
    for (unsigned m = 0; m < g->nmodes; m++)
        gpu_copy_free(&g->copies[m]);
    for (int b = 0; b < AMP_GPU_RING; b++) {
        cudaFree(g->ring_words[b]);
        cudaFree(g->ring_vals[b]);
        destroy_event(g->copied[b]);
        destroy_event(g->consumed[b]);
    }
    destroy_stream(g->copy_stream);
    free(g);
}

/* Page-lock a host range for asynchronous copies at the link's speed
 * (pageable memory copies at a fraction of it: upload.cu). */
static amp_status pin(amp_gpu_tensor *g, const void *p, size_t bytes, amp_error *err)
{
    if (bytes == 0)
        return AMP_OK;
    CUDA_TRY(cudaHostRegister((void *)p, bytes, cudaHostRegisterDefault), err);
    g->registered[g->nregistered++] = (void *)p;
    return AMP_OK;
}

extern "C" size_t amp_gpu_ring_bytes(const amp_tensor *t, uint64_t chunk_nnz)
{
    return (size_t)AMP_GPU_RING * (size_t)chunk_nnz * (8 + amp_value_size(t->value_type));
}

struct file_sink {
    amp_gpu_tensor *g;
    amp_gpu_uploader *up;
    size_t vsize;
};

/* amp_tensor_read_chunks' sink of a resident tensor read from the file:
 * each reading thread stages its chunks to the device through its own
 * upload worker. */
static amp_status to_device(void *ctx, int thread, const amp_chunk_data *c, amp_error *err)
{
    const file_sink *k = (const file_sink *)ctx;
    gpu_copy *d = &k->g->copies[c->mode];
    AMP_CHECK(amp_gpu_upload_async(k->up, thread, d->words + c->at, c->words,
                                   (size_t)c->count * 8, err));
    return amp_gpu_upload_async(k->up, thread, (char *)d->vals + c->at * k->vsize, c->vals,
                                (size_t)c->count * k->vsize, err);
}

/* Sets copy m's gapless flag (rows_gapless) from its words on the
 * device: one read of them, once, at load. */
static amp_status find_gapless(amp_gpu_tensor *g, unsigned m, const uint64_t *words,
                               unsigned stride, amp_error *err)
{
    amp_status rc = AMP_OK;
    gpu_copy *c = &g->copies[m];
    unsigned *gaps = NULL, host = 1;
    c->gapless = 0;
    if (c->nnz == 0)
        return AMP_OK;
    CUDA_TRY(cudaMalloc((void **)&gaps, sizeof host), err);
    CUDA_TRY_GOTO(cudaMemset(gaps, 0, sizeof host), err, rc, done);
    rows_gapless<<<(unsigned)std::min<uint64_t>((c->nnz + 255) / 256, 8u * g->sm_count), 256>>>(
        words, stride, c->block_start, c->block_key, c->nblocks, c->nnz, c->shift[m],
        c->width[m], c->row_begin, c->row_begin + c->row_count - 1, gaps);
    CUDA_TRY_GOTO(cudaGetLastError(), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpy(&host, gaps, sizeof host, cudaMemcpyDeviceToHost), err, rc, done);
    c->gapless = host == 0;
done:
    cudaFree(gaps);
    return rc;
}

/* Copy m, in one group with a nonzero, cut (gpu_copy.cut_nnz). */
static amp_status find_cuts(amp_gpu_tensor *g, unsigned m, const uint64_t *words,
                            unsigned stride, amp_error *err)
{
    amp_status rc = AMP_OK;
    gpu_copy *c = &g->copies[m];
    uint64_t *dev = NULL, host[2 * (AMP_GPU_CUTS + 1)];
    if (c->nnz == 0 || c->early_nnz != c->nnz || c->row_count == 0)
        return AMP_OK;
    CUDA_TRY(cudaMalloc((void **)&dev, sizeof host), err);
    cut_kernel<<<1, AMP_GPU_CUTS>>>(words, stride, c->block_start, c->block_key, c->nblocks,
                                    c->nnz, c->shift[m], c->width[m], dev,
                                    dev + AMP_GPU_CUTS + 1);
    CUDA_TRY_GOTO(cudaGetLastError(), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost), err, rc, done);
    {
        const uint64_t *cn = host, *cr = host + AMP_GPU_CUTS + 1;
        c->cut_nnz[0] = 0;
        c->cut_row[0] = c->row_begin;
        c->cut_nnz[AMP_GPU_CUTS] = c->nnz;
        c->cut_row[AMP_GPU_CUTS] = c->row_begin + c->row_count;
        int sane = 1;
        for (unsigned j = 1; j < AMP_GPU_CUTS; j++) {
            c->cut_nnz[j] = cn[j];
            c->cut_row[j] = cr[j];
        }
        /* A copy whose rows break the ordering or leave the range stays
         * uncut (one part), rather than trusted. */
        for (unsigned j = 1; j <= AMP_GPU_CUTS; j++)
            sane &= c->cut_nnz[j] >= c->cut_nnz[j - 1] && c->cut_row[j] >= c->cut_row[j - 1];
        c->has_cuts = sane;
    }
done:
    cudaFree(dev);
    return rc;
}

/* Every resident copy checked once (find_gapless, find_cuts). Two copies
 * remapped: each copy made in turn for its checks, and copy 0 once more
 * for the first MTTKRP (N remaps in all; one for two modes). */
static amp_status check_resident(amp_gpu_tensor *g, amp_error *err)
{
    for (unsigned m = 0; m < g->nmodes; m++) {
        const uint64_t *words = g->copies[m].words;
        const void *vals = NULL;
        unsigned stride = 1;
        if (g->remap) {
            AMP_CHECK(gpu_remap_bring(g, m, 0, err));
            gpu_remap_arrays(g->remap, m, &words, &vals, &stride);
        }
        AMP_CHECK(find_gapless(g, m, words, stride, err));
        AMP_CHECK(find_cuts(g, m, words, stride, err));
    }
    if (g->remap) {
        /* The load's remaps are not the run's: their time is left out. */
        double seconds;
        unsigned count;
        AMP_CHECK(gpu_remap_bring(g, 0, 0, err));
        AMP_CHECK(amp_gpu_remap_seconds(g, &seconds, &count, err));
        g->remap->seconds = 0;
        g->remap->count = 0;
    }
    return AMP_OK;
}

/* ---- uploading: one function per source, and the steps they share ---- */

/* A tensor of t's shape on device, streamed in chunks of chunk_nnz
 * nonzeros (0: resident); its copies' layout set, nothing on the device
 * yet. */
static amp_status gpu_tensor_new(int device, const amp_tensor *t, uint64_t chunk_nnz,
                                 amp_gpu_tensor **out, amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_gpu_tensor *g = (amp_gpu_tensor *)calloc(1, sizeof *g);
    if (g == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    g->device = device;
    g->nmodes = t->nmodes;
    g->vals_f32 = t->value_type == AMP_VALUES_F32;
    g->narrow_rows = 1;
    g->streamed = chunk_nnz > 0;
    g->chunk_nnz = chunk_nnz;
    for (unsigned m = 0; m < t->nmodes; m++)
        if (t->rows[m] >= UINT32_MAX)
            g->narrow_rows = 0;
    for (unsigned m = 0; m < t->nmodes; m++) {
        const amp_copy *c = &t->copies[m];
        gpu_copy *d = &g->copies[m];
        g->rows[m] = t->rows[m];
        d->nnz = c->nnz;
        d->nblocks = (uint32_t)c->nblocks;
        d->row_begin = c->row_begin;
        d->row_count = c->row_count;
        d->early_nnz = c->early_nnz;
        d->has_fibers = c->has_fibers;
        d->fiber_mode = c->fiber_mode;
        for (unsigned k = 0; k < t->nmodes; k++) {
            d->shift[k] = c->layout.shift[k];
            d->width[k] = c->layout.width[k];
        }
    }
    CUDA_TRY_GOTO(cudaSetDevice(device), err, rc, fail);
    CUDA_TRY_GOTO(cudaDeviceGetAttribute(&g->sm_count, cudaDevAttrMultiProcessorCount, device),
                  err, rc, fail);
    *out = g;
    return AMP_OK;
fail:
    amp_gpu_tensor_free(g);
    return rc;
}

/* cudaMalloc of one of the tensor's arrays. A GPU whose memory is taken
 * (by another process since the plan, say) is told apart from one that
 * fails: AMP_ERR_NOMEM and uo->device_full, so that the caller can free
 * the rest and stream instead. inject: the tests' stand-in for that. */
static amp_status tensor_alloc(void **p, size_t bytes, const char *what, unsigned m,
                               amp_gpu_upload_opts *uo, int inject, amp_error *err)
{
    cudaError_t e = inject ? cudaErrorMemoryAllocation : cudaMalloc(p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        /* Not sticky: clear it so that the next check does not find it. */
        (void)cudaGetLastError();
        if (uo)
            uo->device_full = 1;
        return AMP_FAIL(err, AMP_ERR_NOMEM, "cudaMalloc of %zu bytes for mode %u's %s: out of "
                        "GPU memory%s", bytes, m + 1, what,
                        inject ? " (amp_gpu_upload_opts.fail_alloc)" : "");
    }
    if (e != cudaSuccess)
        return CUDA_FAIL(err, e, "cudaMalloc");
    return AMP_OK;
}

/* Copy m's block tables (nblocks runs of one key) to the device through
 * up (NULL: plain copies). */
static amp_status upload_blocks(amp_gpu_tensor *g, unsigned m, amp_gpu_uploader *up,
                                const uint64_t *bstart, const uint64_t *bkey, size_t nblocks,
                                amp_gpu_upload_opts *uo, amp_error *err)
{
    gpu_copy *d = &g->copies[m];
    if (nblocks >= UINT32_MAX)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "mode %u has %zu blocks of one key, more "
                        "than the GPU kernels index", m + 1, nblocks);
    AMP_CHECK(tensor_alloc((void **)&d->block_start, (nblocks + 1) * 8, "block table", m, uo, 0,
                           err));
    AMP_CHECK(tensor_alloc((void **)&d->block_key, nblocks * 8 + 8, "block keys", m, uo, 0,
                           err));
    AMP_CHECK(amp_gpu_upload(up, d->block_start, bstart, (nblocks + 1) * 8, err));
    AMP_CHECK(amp_gpu_upload(up, d->block_key, bkey, nblocks * 8, err));
    g->bytes += (nblocks * 2 + 1) * 8;
    return AMP_OK;
}

/* The same for copy m's block tables as t holds them. */
static amp_status upload_tensor_blocks(amp_gpu_tensor *g, const amp_tensor *t, unsigned m,
                                       amp_gpu_uploader *up, amp_gpu_upload_opts *uo,
                                       amp_error *err)
{
    const amp_copy *c = &t->copies[m];
    return upload_blocks(g, m, up, c->block_start, c->block_key, c->nblocks, uo, err);
}

/* Device memory for resident copy m's words and values. uo->fail_alloc
 * fails the last mode's values, the last allocation, so that everything
 * before it has to be freed. */
static amp_status alloc_resident(amp_gpu_tensor *g, unsigned m, size_t vsize,
                                 amp_gpu_upload_opts *uo, amp_error *err)
{
    gpu_copy *d = &g->copies[m];
    size_t nw = (size_t)d->nnz * 8 + 8, nv = (size_t)d->nnz * vsize + 8;
    const int inject = uo && uo->fail_alloc && m + 1 == g->nmodes;
    AMP_CHECK(tensor_alloc((void **)&d->words, nw, "words", m, uo, 0, err));
    AMP_CHECK(tensor_alloc(&d->vals, nv, "values", m, uo, inject, err));
    g->bytes += nw + nv;
    return AMP_OK;
}

/* A streamed tensor's ring: AMP_GPU_RING device buffers of chunk_nnz
 * nonzeros, the copy stream and its events. */
static amp_status make_ring(amp_gpu_tensor *g, size_t vsize, amp_error *err)
{
    const uint64_t chunk_nnz = g->chunk_nnz;
    int any_plain = 0;
    for (unsigned m = 0; m < g->nmodes; m++)
        any_plain |= !g->copies[m].packed;
    CUDA_TRY(cudaStreamCreateWithFlags(&g->copy_stream, cudaStreamNonBlocking), err);
    for (int b = 0; b < AMP_GPU_RING; b++) {
        CUDA_TRY(cudaMalloc((void **)&g->ring_words[b], chunk_nnz * 8 + 8), err);
        if (any_plain)   /* packed copies carry their values in the words */
            CUDA_TRY(cudaMalloc(&g->ring_vals[b], chunk_nnz * vsize + 8), err);
        CUDA_TRY(cudaEventCreateWithFlags(&g->copied[b], cudaEventDisableTiming), err);
        CUDA_TRY(cudaEventCreateWithFlags(&g->consumed[b], cudaEventDisableTiming), err);
    }
    g->bytes += (size_t)AMP_GPU_RING * chunk_nnz * (any_plain ? 8 + vsize : 8);
    return AMP_OK;
}

/* The copies to the device were from pageable memory: make them complete
 * before kernels on any (non-blocking) stream read the tensor. Then a
 * resident tensor's copies are checked once (check_resident). */
static amp_status make_ready(amp_gpu_tensor *g, amp_error *err)
{
    CUDA_TRY(cudaDeviceSynchronize(), err);
    if (!g->streamed)
        AMP_CHECK(check_resident(g, err));
    return AMP_OK;
}

/* The cleanup block of every upload below, with rc what it came to: g
 * made ready if all went well, the uploader up (if any) freed, and g into
 * *out, or freed if anything failed. */
static amp_status end_upload(amp_status rc, amp_gpu_tensor *g, amp_gpu_uploader *up,
                             amp_gpu_tensor **out, amp_error *err)
{
    if (rc == AMP_OK)
        rc = make_ready(g, err);
    amp_gpu_uploader_free(up);
    if (rc != AMP_OK) {
        amp_gpu_tensor_free(g);
        return rc;
    }
    *out = g;
    return AMP_OK;
}

/* Progress is reported a piece at a time: each amp_gpu_upload starts its
 * staging threads anew, and 1 GiB pieces (some 50 ms on the link) keep
 * that under 1% while the bar still moves several times a second. */
#define REPORT_PIECE (size_t(1) << 30)

/* bytes to the device through up, reported to uo piece by piece. */
static amp_status upload_reported(amp_gpu_uploader *up, void *dst, const void *src,
                                  size_t bytes, amp_gpu_upload_opts *uo, amp_error *err)
{
    const int report = uo && uo->progress;
    const size_t piece = report ? REPORT_PIECE : std::max<size_t>(bytes, 1);
    for (size_t at = 0; at < bytes; at += piece) {
        size_t n = std::min(piece, bytes - at);
        AMP_CHECK(amp_gpu_upload(up, (char *)dst + at, (const char *)src + at, n, err));
        if (report)
            uo->progress(uo->progress_ctx, n);
    }
    return AMP_OK;
}

/* Staging through page-locked memory; without it to be had, NULL (plain
 * copies), and the failed call's error is not left for the next check to
 * find. */
static amp_gpu_uploader *staging(int device, amp_error *err)
{
    amp_gpu_uploader *up = NULL;
    if (amp_gpu_uploader_new(device, 0, &up, err) == AMP_OK)
        return up;
    amp_error_clear(err);
    (void)cudaGetLastError();
    return NULL;
}

/* Resident, from t's host memory. */
static amp_status upload_resident(int device, const amp_tensor *t, amp_gpu_upload_opts *uo,
                                  amp_gpu_tensor **out, amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_gpu_uploader *up = NULL;
    amp_gpu_tensor *g = NULL;
    const size_t vsize = amp_value_size(t->value_type);
    AMP_CHECK(gpu_tensor_new(device, t, 0, &g, err));
    up = staging(device, err);
    for (unsigned m = 0; m < t->nmodes; m++) {
        const amp_copy *c = &t->copies[m];
        gpu_copy *d = &g->copies[m];
        AMP_CHECK_GOTO(upload_tensor_blocks(g, t, m, up, uo, err), rc, done);
        AMP_CHECK_GOTO(alloc_resident(g, m, vsize, uo, err), rc, done);
        AMP_CHECK_GOTO(upload_reported(up, d->words, c->words, (size_t)c->nnz * 8, uo, err), rc,
                       done);
        AMP_CHECK_GOTO(upload_reported(up, d->vals, c->vals, (size_t)c->nnz * vsize, uo, err),
                       rc, done);
    }
done:
    return end_upload(rc, g, up, out, err);
}

/* Streamed copy m from t's host memory: one word per nonzero in the
 * stream layout where its values allow (stream_pack.c), its row runs
 * then the block keys; else its words and values as t holds them. Either
 * is page-locked for the ring's copies. */
static amp_status stream_copy(amp_gpu_tensor *g, const amp_tensor *t, unsigned m, amp_error *err)
{
    const amp_copy *c = &t->copies[m];
    gpu_copy *d = &g->copies[m];
    const size_t vsize = amp_value_size(t->value_type);
    int packed = 0;
    AMP_CHECK(amp_stream_pack(t, m, 0, &d->stream, &packed, err));
    /* Runs are indexed in 32 bits by the kernels; a copy with more
     * (hypersparse outputs, 2^32 rows or more) streams as stored. */
    if (packed && d->stream.nruns >= UINT32_MAX) {
        amp_stream_copy_free(&d->stream);
        packed = 0;
    }
    if (!packed) {
        AMP_CHECK(upload_tensor_blocks(g, t, m, NULL, NULL, err));
        d->host_words = c->words;
        d->host_vals = c->vals;
        AMP_CHECK(pin(g, c->words, (size_t)c->nnz * 8, err));
        AMP_CHECK(pin(g, c->vals, (size_t)c->nnz * vsize, err));
        g->stream_bytes += (double)c->nnz * (8 + vsize);
        return AMP_OK;
    }
    d->packed = 1;
    d->nblocks = (uint32_t)d->stream.nruns;
    for (unsigned k = 0; k < t->nmodes; k++) {
        d->shift[k] = d->stream.shift[k];
        d->width[k] = d->stream.width[k];
    }
    AMP_CHECK(upload_blocks(g, m, NULL, d->stream.run_start, d->stream.run_row,
                            d->stream.nruns, NULL, err));
    d->host_words = d->stream.words;
    AMP_CHECK(pin(g, d->stream.words, (size_t)c->nnz * 8, err));
    g->stream_bytes += (double)c->nnz * 8;
    return AMP_OK;
}

/* Streamed from t's host memory in chunks of chunk_nnz nonzeros; a copy
 * is reported to uo once packed and page-locked. */
static amp_status upload_streamed(int device, const amp_tensor *t, uint64_t chunk_nnz,
                                  amp_gpu_upload_opts *uo, amp_gpu_tensor **out,
                                  amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_gpu_tensor *g = NULL;
    const size_t vsize = amp_value_size(t->value_type);
    AMP_CHECK(gpu_tensor_new(device, t, chunk_nnz, &g, err));
    for (unsigned m = 0; m < t->nmodes; m++) {
        AMP_CHECK_GOTO(stream_copy(g, t, m, err), rc, done);
        if (uo && uo->progress)
            uo->progress(uo->progress_ctx, t->copies[m].nnz * (8 + vsize));
    }
    AMP_CHECK_GOTO(make_ring(g, amp_value_size(t->value_type), err), rc, done);
done:
    return end_upload(rc, g, NULL, out, err);
}

/* Two copies remapped (remap.cu), from t's host memory: every copy's
 * block table, copy 0 into the first buffer, a spare buffer as large, and
 * every mode's positions. make_ready then makes each copy once, in turn,
 * for the checks a resident copy gets (check_resident). uo->fail_alloc
 * fails the spare buffer (its values, or its records with f64 values). */
extern "C" amp_status amp_gpu_tensor_upload_remap(int device, const amp_tensor *t,
                                                  const uint32_t *const *pos,
                                                  amp_gpu_upload_opts *uo, amp_gpu_tensor **out,
                                                  amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_gpu_uploader *up = NULL;
    amp_gpu_tensor *g = NULL;
    gpu_remap *r = NULL;
    const size_t vsize = amp_value_size(t->value_type);
    const uint64_t nnz = t->nnz;
    const size_t nw = (size_t)nnz * 8 + 8, nv = (size_t)nnz * vsize + 8, np = (size_t)nnz * 4 + 8;
    if (t->layout_only)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "a tensor without its nonzeros to upload");
    if (nnz > UINT32_MAX)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "two copies remapped hold their positions in "
                        "32 bits: at most %lu nonzeros, not %llu", (unsigned long)UINT32_MAX,
                        (unsigned long long)nnz);
    for (unsigned m = 0; m < t->nmodes; m++)
        if (t->copies[m].nnz != nnz || t->copies[m].row_begin != 0)
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "two copies remapped take a whole "
                            "tensor's copies, not a GPU's part of several");
    AMP_CHECK(gpu_tensor_new(device, t, 0, &g, err));
    AMP_CHECK_GOTO(gpu_remap_new(device, t->nmodes, &g->remap, err), rc, done);
    r = g->remap;
    r->nnz = nnz;
    up = staging(device, err);
    for (unsigned m = 0; m < t->nmodes; m++)
        AMP_CHECK_GOTO(upload_tensor_blocks(g, t, m, up, uo, err), rc, done);
    /* f64 values: one array of records a buffer (gpu_remap.stride). */
    r->stride = vsize == 8 ? 2 : 1;
    for (int b = 0; b < 2; b++) {
        const int inject = uo && uo->fail_alloc && b == 1;
        if (r->stride == 2) {
            AMP_CHECK_GOTO(tensor_alloc((void **)&r->words[b], nw + nv, b ? "spare records"
                                        : "records", 0, uo, inject, err), rc, done);
            r->vals[b] = r->words[b] + 1;
        } else {
            AMP_CHECK_GOTO(tensor_alloc((void **)&r->words[b], nw, b ? "spare words" : "words",
                                        0, uo, 0, err), rc, done);
            AMP_CHECK_GOTO(tensor_alloc(&r->vals[b], nv, b ? "spare values" : "values", 0, uo,
                                        inject, err), rc, done);
        }
        g->bytes += nw + nv;
    }
    for (unsigned m = 0; m < t->nmodes; m++) {
        AMP_CHECK_GOTO(tensor_alloc((void **)&r->pos[m], np, "remap positions", m, uo, 0, err),
                       rc, done);
        g->bytes += np;
        AMP_CHECK_GOTO(upload_reported(up, r->pos[m], pos[m], (size_t)nnz * 4, uo, err), rc,
                       done);
    }
    if (r->stride == 2) {
        /* Records: copy 0's two arrays into the spare buffer, one after the
         * other, then made records in the first. */
        uint64_t *w1 = r->words[1], *v1 = r->words[1] + nnz;
        AMP_CHECK_GOTO(upload_reported(up, w1, t->copies[0].words, (size_t)nnz * 8, uo, err),
                       rc, done);
        AMP_CHECK_GOTO(upload_reported(up, v1, t->copies[0].vals, (size_t)nnz * 8, uo, err), rc,
                       done);
        AMP_CHECK_GOTO(gpu_remap_interleave(r, 0, w1, v1, g->sm_count, err), rc, done);
    } else {
        AMP_CHECK_GOTO(upload_reported(up, r->words[0], t->copies[0].words, (size_t)nnz * 8,
                                       uo, err), rc, done);
        AMP_CHECK_GOTO(upload_reported(up, r->vals[0], t->copies[0].vals, (size_t)nnz * vsize,
                                       uo, err), rc, done);
    }
    r->holds[0] = 0;
    r->latest = 0;
done:
    return end_upload(rc, g, up, out, err);
}

extern "C" amp_status amp_gpu_tensor_upload_with(int device, const amp_tensor *t,
                                                 uint64_t chunk_nnz, amp_gpu_upload_opts *uo,
                                                 amp_gpu_tensor **out, amp_error *err)
{
    if (t->layout_only)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "a tensor without its nonzeros to upload");
    return chunk_nnz > 0 ? upload_streamed(device, t, chunk_nnz, uo, out, err)
                         : upload_resident(device, t, uo, out, err);
}

extern "C" amp_status amp_gpu_tensor_upload(int device, const amp_tensor *t, uint64_t chunk_nnz,
                                            amp_gpu_tensor **out, amp_error *err)
{
    return amp_gpu_tensor_upload_with(device, t, chunk_nnz, NULL, out, err);
}

extern "C" uint64_t amp_gpu_file_chunk_nnz(const amp_file *f)
{
    uint64_t most = 1;
    const amp_meta *m = amp_file_meta(f);
    for (unsigned d = 0; d < m->nmodes; d++) {
        const amp_mode_layout *l = amp_file_mode(f, d);
        for (uint32_t s = 0; s < l->nshards; s++)
            for (uint32_t q = 0; q < l->shards[s].nchunks; q++)
                most = std::max<uint64_t>(most, amp_file_chunk(f, d, s, q)->count);
    }
    return most;
}

/* The threads that read the file, at most 64: each page-locks its
 * staging (4 MiB resident, a slot of the largest chunk compressed), and 64
 * feed the link many times over. */
static amp_status reading_threads(int *threads, amp_error *err)
{
    if (*threads < 1)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "%d threads", *threads);
    *threads = std::min(*threads, 64);
    return AMP_OK;
}

/* Resident, from the file: its chunks staged to the device by the threads
 * that read them (to_device); t holds only the layout. */
extern "C" amp_status amp_gpu_tensor_upload_file(int device, const amp_file *f,
                                                 const amp_tensor *t, int threads,
                                                 amp_load_progress_fn progress,
                                                 void *progress_ctx, amp_gpu_upload_opts *uo,
                                                 amp_gpu_tensor **out, amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_gpu_uploader *up = NULL;
    amp_gpu_tensor *g = NULL;
    const size_t vsize = amp_value_size(t->value_type);
    file_sink sink = {NULL, NULL, vsize};
    AMP_CHECK(reading_threads(&threads, err));
    AMP_CHECK(gpu_tensor_new(device, t, 0, &g, err));
    /* No fallback to plain copies: every reader needs its buffers. */
    AMP_CHECK_GOTO(amp_gpu_uploader_new(device, threads, &up, err), rc, done);
    for (unsigned m = 0; m < t->nmodes; m++) {
        AMP_CHECK_GOTO(upload_tensor_blocks(g, t, m, up, uo, err), rc, done);
        AMP_CHECK_GOTO(alloc_resident(g, m, vsize, uo, err), rc, done);
    }
    sink.g = g;
    sink.up = up;
    AMP_CHECK_GOTO(amp_tensor_read_chunks(f, t, threads, 0, to_device, &sink, progress,
                                          progress_ctx, err), rc, done);
    AMP_CHECK_GOTO(amp_gpu_uploader_wait(up, err), rc, done);
done:
    return end_upload(rc, g, up, out, err);
}

/* Streamed from the file's compressed chunks (zstream.cu), decoded on
 * their way to the ring; t holds only the layout. */
extern "C" amp_status amp_gpu_tensor_upload_compressed(int device, const amp_file *f,
                                                       const amp_tensor *t, int threads,
                                                       amp_load_progress_fn progress,
                                                       void *progress_ctx, amp_gpu_tensor **out,
                                                       amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_gpu_tensor *g = NULL;
    const size_t vsize = amp_value_size(t->value_type);
    AMP_CHECK(reading_threads(&threads, err));
    AMP_CHECK(gpu_tensor_new(device, t, amp_gpu_file_chunk_nnz(f), &g, err));
    for (unsigned m = 0; m < t->nmodes; m++) {   /* decoded as they stream */
        AMP_CHECK_GOTO(upload_tensor_blocks(g, t, m, NULL, NULL, err), rc, done);
        g->stream_bytes += (double)t->copies[m].nnz * (8 + vsize);
    }
    AMP_CHECK_GOTO(make_ring(g, vsize, err), rc, done);
    AMP_CHECK_GOTO(gpu_zstream_new(device, f, t, threads, progress, progress_ctx, &g->zstream,
                                   err), rc, done);
done:
    return end_upload(rc, g, NULL, out, err);
}

extern "C" int amp_gpu_tensor_compressed(const amp_gpu_tensor *g)
{
    return g->zstream != NULL;
}

extern "C" size_t amp_gpu_tensor_host_bytes(const amp_gpu_tensor *g)
{
    return g->zstream ? gpu_zstream_host_bytes(g->zstream) : 0;
}

extern "C" int amp_gpu_tensor_streamed(const amp_gpu_tensor *g)
{
    return g->streamed;
}

extern "C" double amp_gpu_stream_bytes(const amp_gpu_tensor *g)
{
    return g->stream_bytes;
}

extern "C" size_t amp_gpu_tensor_bytes(const amp_gpu_tensor *g)
{
    return g->bytes;
}

extern "C" int amp_gpu_tensor_cuts(const amp_gpu_tensor *g, unsigned d, uint64_t *row_cut)
{
    if (d >= g->nmodes || !g->copies[d].has_cuts)
        return 0;
    memcpy(row_cut, g->copies[d].cut_row, sizeof g->copies[d].cut_row);
    return 1;
}

extern "C" int amp_gpu_tensor_gapless(const amp_gpu_tensor *g, unsigned d)
{
    return d < g->nmodes && g->copies[d].gapless;
}
