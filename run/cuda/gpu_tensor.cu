/* A tensor on one GPU: its mode copies uploaded and kept resident, or
 * set up to stream (from page-locked host memory, or from the file's
 * compressed chunks through zstream.cu), and what a resident copy is
 * checked for once at load. The MTTKRP over it is mttkrp.cu's. */
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
 * no zeroing before it (about 0.8 GB of stores a round on rd100m in f32,
 * 3% of its MTTKRP): only the rows a team shares with its neighbours
 * take atomic adds, and zero_team_rows clears those. The format promises
 * it (every row nonempty: amped(5)); a file that breaks the promise gets
 * the memset. */
__global__ void rows_gapless(const uint64_t *words, const uint64_t *block_start,
                             const uint64_t *block_key, uint32_t nblocks, uint64_t nnz,
                             unsigned shift, unsigned width, uint64_t first, uint64_t last,
                             unsigned *gaps)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < nnz; k += stride) {
        uint64_t r = row_at(words, block_start, block_key, nblocks, shift, width, k);
        bool gap = k == 0 && r != first;
        if (k + 1 < nnz) {
            uint64_t next = row_at(words, block_start, block_key, nblocks, shift, width, k + 1);
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
__global__ void cut_kernel(const uint64_t *words, const uint64_t *block_start,
                          const uint64_t *block_key, uint32_t nblocks, uint64_t nnz,
                          unsigned shift, unsigned width, uint64_t *cut_nnz, uint64_t *cut_row)
{
    const unsigned j = threadIdx.x + 1;
    if (j >= AMP_GPU_CUTS)
        return;
    const uint64_t at = nnz * j / AMP_GPU_CUTS;
    const uint64_t row = row_at(words, block_start, block_key, nblocks, shift, width, at);
    uint64_t lo = 0, hi = at;   /* the first position whose row is row lies in [lo, hi] */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (row_at(words, block_start, block_key, nblocks, shift, width, mid) < row)
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
    for (unsigned m = 0; m < g->nmodes; m++)
        gpu_copy_free(&g->copies[m]);
    for (int b = 0; b < AMP_GPU_RING; b++) {
        cudaFree(g->ring_words[b]);
        cudaFree(g->ring_vals[b]);
        if (g->copied[b])
            cudaEventDestroy(g->copied[b]);
        if (g->consumed[b])
            cudaEventDestroy(g->consumed[b]);
    }
    if (g->copy_stream)
        cudaStreamDestroy(g->copy_stream);
    free(g);
}

/* Page-lock a host range for asynchronous copies at the link's speed
 * (pageable memory copies at about 8 GB/s, pinned at about 55). */
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

/* Where a resident tensor's nonzeros come from when t holds none: the
 * file, read by `threads` threads that each stage their own chunks. */
struct file_source {
    const amp_file *f;
    int threads;
    amp_load_progress_fn progress;
    void *progress_ctx;
    int compressed;   /* streamed from its compressed chunks, not resident */
};

struct file_sink {
    amp_gpu_tensor *g;
    amp_gpu_uploader *up;
    size_t vsize;
};

static amp_status to_device(void *ctx, int thread, const amp_chunk_data *c, amp_error *err)
{
    const file_sink *k = (const file_sink *)ctx;
    gpu_copy *d = &k->g->copies[c->mode];
    AMP_CHECK(amp_gpu_upload_async(k->up, thread, d->words + c->at, c->words,
                                   (size_t)c->count * 8, err));
    return amp_gpu_upload_async(k->up, thread, (char *)d->vals + c->at * k->vsize, c->vals,
                                (size_t)c->count * k->vsize, err);
}

/* Sets each resident copy's gapless flag (rows_gapless): one read of its
 * words, once, at load. */
static amp_status find_gapless(amp_gpu_tensor *g, amp_error *err)
{
    amp_status rc = AMP_OK;
    unsigned *gaps = NULL, host[AMP_MAX_MODES];
    CUDA_TRY(cudaMalloc((void **)&gaps, sizeof host), err);
    CUDA_TRY_GOTO(cudaMemset(gaps, 0, sizeof host), err, rc, done);
    for (unsigned m = 0; m < g->nmodes; m++) {
        const gpu_copy *c = &g->copies[m];
        if (c->nnz == 0)
            continue;
        rows_gapless<<<(unsigned)std::min<uint64_t>((c->nnz + 255) / 256, 8u * g->sm_count),
                       256>>>(c->words, c->block_start, c->block_key, c->nblocks, c->nnz,
                              c->shift[m], c->width[m], c->row_begin,
                              c->row_begin + c->row_count - 1, gaps + m);
        CUDA_TRY_GOTO(cudaGetLastError(), err, rc, done);
    }
    CUDA_TRY_GOTO(cudaMemcpy(host, gaps, sizeof host, cudaMemcpyDeviceToHost), err, rc, done);
    for (unsigned m = 0; m < g->nmodes; m++)
        g->copies[m].gapless = g->copies[m].nnz > 0 && host[m] == 0;
done:
    cudaFree(gaps);
    return rc;
}

/* Each resident copy in one group with a nonzero, cut (gpu_copy.cut_nnz). */
static amp_status find_cuts(amp_gpu_tensor *g, amp_error *err)
{
    amp_status rc = AMP_OK;
    uint64_t *dev = NULL, host[2 * (AMP_GPU_CUTS + 1)];
    CUDA_TRY(cudaMalloc((void **)&dev, sizeof host), err);
    for (unsigned m = 0; m < g->nmodes; m++) {
        gpu_copy *c = &g->copies[m];
        if (c->nnz == 0 || c->early_nnz != c->nnz || c->row_count == 0)
            continue;
        cut_kernel<<<1, AMP_GPU_CUTS>>>(c->words, c->block_start, c->block_key, c->nblocks,
                                        c->nnz, c->shift[m], c->width[m], dev,
                                        dev + AMP_GPU_CUTS + 1);
        CUDA_TRY_GOTO(cudaGetLastError(), err, rc, done);
        CUDA_TRY_GOTO(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost), err, rc, done);
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

static amp_status tensor_upload(int device, const amp_tensor *t, uint64_t chunk_nnz,
                                const file_source *src, amp_gpu_tensor **out, amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_gpu_uploader *up = NULL;
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
    size_t vsize = amp_value_size(t->value_type);
    CUDA_TRY_GOTO(cudaSetDevice(device), err, rc, fail);
    CUDA_TRY_GOTO(cudaDeviceGetAttribute(&g->sm_count, cudaDevAttrMultiProcessorCount, device),
                  err, rc, fail);
    /* Staging for the resident copies (a streamed tensor uploads only its
     * block tables); without page-locked memory to be had, plain copies,
     * and the failed call's error is not left for the next check to find. */
    if (src != NULL && !src->compressed)   /* no fallback: every reader needs its buffers */
        AMP_CHECK_GOTO(amp_gpu_uploader_new(device, src->threads, &up, err), rc, fail);
    else if (!g->streamed && amp_gpu_uploader_new(device, 0, &up, err) != AMP_OK) {
        up = NULL;
        amp_error_clear(err);
        (void)cudaGetLastError();
    }
    for (unsigned m = 0; m < t->nmodes; m++) {
        const amp_copy *c = &t->copies[m];
        gpu_copy *d = &g->copies[m];
        g->rows[m] = t->rows[m];
        d->nnz = c->nnz;
        d->nblocks = (uint32_t)c->nblocks;
        d->row_begin = c->row_begin;
        d->row_count = c->row_count;
        d->early_nnz = c->early_nnz;
        for (unsigned k = 0; k < t->nmodes; k++) {
            d->shift[k] = c->layout.shift[k];
            d->width[k] = c->layout.width[k];
        }
        /* Streamed, a copy goes as one word per nonzero when its values
         * allow (stream_pack.c); its row runs become the block keys. */
        const uint64_t *bstart = c->block_start, *bkey = c->block_key;
        size_t nblocks = c->nblocks;
        if (g->streamed && src == NULL) {
            int packed = 0;
            AMP_CHECK_GOTO(amp_stream_pack(t, m, 0, &d->stream, &packed, err), rc, fail);
            /* Runs are indexed in 32 bits by the kernels; a copy with more
             * (hypersparse outputs, 2^32 rows or more) streams as stored. */
            if (packed && d->stream.nruns >= UINT32_MAX) {
                amp_stream_copy_free(&d->stream);
                packed = 0;
            }
            if (packed) {
                d->packed = 1;
                bstart = d->stream.run_start;
                bkey = d->stream.run_row;
                nblocks = d->stream.nruns;
                d->nblocks = (uint32_t)nblocks;
                for (unsigned k = 0; k < t->nmodes; k++) {
                    d->shift[k] = d->stream.shift[k];
                    d->width[k] = d->stream.width[k];
                }
            }
        }
        if (nblocks >= UINT32_MAX)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_UNSUPPORTED, "mode %u has %zu blocks of one "
                           "key, more than the GPU kernels index", m + 1, nblocks);
        CUDA_TRY_GOTO(cudaMalloc((void **)&d->block_start, (nblocks + 1) * 8), err, rc, fail);
        CUDA_TRY_GOTO(cudaMalloc((void **)&d->block_key, nblocks * 8 + 8), err, rc, fail);
        AMP_CHECK_GOTO(amp_gpu_upload(up, d->block_start, bstart, (nblocks + 1) * 8, err), rc,
                       fail);
        AMP_CHECK_GOTO(amp_gpu_upload(up, d->block_key, bkey, nblocks * 8, err), rc, fail);
        g->bytes += (nblocks * 2 + 1) * 8;
        if (g->streamed && src != NULL) {   /* compressed chunks, decoded as it streams */
            g->stream_bytes += (double)c->nnz * (8 + vsize);
            continue;
        }
        if (g->streamed && d->packed) {
            d->host_words = d->stream.words;
            AMP_CHECK_GOTO(pin(g, d->stream.words, (size_t)c->nnz * 8, err), rc, fail);
            g->stream_bytes += (double)c->nnz * 8;
            continue;
        }
        if (g->streamed) {
            d->host_words = c->words;
            d->host_vals = c->vals;
            AMP_CHECK_GOTO(pin(g, c->words, (size_t)c->nnz * 8, err), rc, fail);
            AMP_CHECK_GOTO(pin(g, c->vals, (size_t)c->nnz * vsize, err), rc, fail);
            g->stream_bytes += (double)c->nnz * (8 + vsize);
            continue;
        }
        size_t nw = (size_t)c->nnz * 8 + 8, nv = (size_t)c->nnz * vsize + 8;
        CUDA_TRY_GOTO(cudaMalloc((void **)&d->words, nw), err, rc, fail);
        CUDA_TRY_GOTO(cudaMalloc(&d->vals, nv), err, rc, fail);
        g->bytes += nw + nv;
        if (src != NULL)
            continue;
        AMP_CHECK_GOTO(amp_gpu_upload(up, d->words, c->words, (size_t)c->nnz * 8, err), rc,
                       fail);
        AMP_CHECK_GOTO(amp_gpu_upload(up, d->vals, c->vals, (size_t)c->nnz * vsize, err), rc,
                       fail);
    }
    if (src != NULL && !src->compressed) {
        file_sink sink = {g, up, vsize};
        AMP_CHECK_GOTO(amp_tensor_read_chunks(src->f, t, src->threads, 0, to_device, &sink,
                                              src->progress, src->progress_ctx, err),
                       rc, fail);
        AMP_CHECK_GOTO(amp_gpu_uploader_wait(up, err), rc, fail);
    }
    if (g->streamed) {
        int any_plain = 0;
        for (unsigned m = 0; m < t->nmodes; m++)
            any_plain |= !g->copies[m].packed;
        CUDA_TRY_GOTO(cudaStreamCreateWithFlags(&g->copy_stream, cudaStreamNonBlocking), err, rc,
                      fail);
        for (int b = 0; b < AMP_GPU_RING; b++) {
            CUDA_TRY_GOTO(cudaMalloc((void **)&g->ring_words[b], chunk_nnz * 8 + 8), err, rc,
                          fail);
            if (any_plain)   /* packed copies carry their values in the words */
                CUDA_TRY_GOTO(cudaMalloc(&g->ring_vals[b], chunk_nnz * vsize + 8), err, rc,
                              fail);
            CUDA_TRY_GOTO(cudaEventCreateWithFlags(&g->copied[b], cudaEventDisableTiming), err,
                          rc, fail);
            CUDA_TRY_GOTO(cudaEventCreateWithFlags(&g->consumed[b], cudaEventDisableTiming), err,
                          rc, fail);
        }
        g->bytes += (size_t)AMP_GPU_RING * chunk_nnz * (any_plain ? 8 + vsize : 8);
        if (src != NULL)
            AMP_CHECK_GOTO(gpu_zstream_new(device, src->f, t, src->threads, src->progress,
                                           src->progress_ctx, &g->zstream, err), rc, fail);
    }
    /* The copies above are from pageable memory: make them complete
     * before kernels on any (non-blocking) stream read the tensor. */
    CUDA_TRY_GOTO(cudaDeviceSynchronize(), err, rc, fail);
    if (!g->streamed) {
        AMP_CHECK_GOTO(find_gapless(g, err), rc, fail);
        AMP_CHECK_GOTO(find_cuts(g, err), rc, fail);
    }
    amp_gpu_uploader_free(up);
    *out = g;
    return AMP_OK;
fail:
    amp_gpu_uploader_free(up);
    amp_gpu_tensor_free(g);
    return rc;
}

extern "C" amp_status amp_gpu_tensor_upload(int device, const amp_tensor *t, uint64_t chunk_nnz,
                                            amp_gpu_tensor **out, amp_error *err)
{
    if (t->layout_only)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "a tensor without its nonzeros to upload");
    return tensor_upload(device, t, chunk_nnz, NULL, out, err);
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

/* From the file: resident, or streamed from its compressed chunks. At
 * most 64 reading threads: each page-locks its staging (4 MiB resident, a
 * slot of the largest chunk compressed), and 64 feed the link many times
 * over. */
static amp_status upload_from_file(int device, const amp_file *f, const amp_tensor *t,
                                   int threads, amp_load_progress_fn progress,
                                   void *progress_ctx, int compressed, amp_gpu_tensor **out,
                                   amp_error *err)
{
    if (threads < 1)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "%d threads", threads);
    file_source src = {f, std::min(threads, 64), progress, progress_ctx, compressed};
    return tensor_upload(device, t, compressed ? amp_gpu_file_chunk_nnz(f) : 0, &src, out, err);
}

extern "C" amp_status amp_gpu_tensor_upload_file(int device, const amp_file *f,
                                                 const amp_tensor *t, int threads,
                                                 amp_load_progress_fn progress,
                                                 void *progress_ctx, amp_gpu_tensor **out,
                                                 amp_error *err)
{
    return upload_from_file(device, f, t, threads, progress, progress_ctx, 0, out, err);
}

extern "C" amp_status amp_gpu_tensor_upload_compressed(int device, const amp_file *f,
                                                       const amp_tensor *t, int threads,
                                                       amp_load_progress_fn progress,
                                                       void *progress_ctx, amp_gpu_tensor **out,
                                                       amp_error *err)
{
    return upload_from_file(device, f, t, threads, progress, progress_ctx, 1, out, err);
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
