/* Streaming from compressed chunks: for a tensor the host cannot hold
 * decompressed, each mode copy's chunks stay in host memory as the file
 * stores them (Zstandard, checksum verified and content checked once, at
 * load), and every MTTKRP decodes them again on CPU threads into
 * page-locked slots that the copy stream carries to the device ring.
 *
 * Pipeline, per MTTKRP of one mode: W worker threads take chunks in
 * order; chunk i goes to slot i mod S (S = W + 2), once the copy of chunk
 * i - S out of that slot has been queued and has finished (an event). The
 * calling thread takes the chunks in order as their slots fill: it queues
 * the copy into device buffer i mod RING (once the kernel that read that
 * buffer last is done), records the slot's event, and launches the kernel.
 *
 * Bytes moved per nonzero: the stored bytes read once by a worker
 * (stored_size / count, 1/ratio of the raw form), the raw form (8 + value
 * size) written into a slot, read by the copy engine and written to the
 * device. The rate is the smaller of W decoders' and the link's
 * (bench/RESULTS.md, "streaming from compressed chunks"). */
#include <config.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>

#include "amp_cuda.h"
#include "gpu_internal.h"

enum { ZSTREAM_WORKERS_MAX = 64 };

struct zchunk {
    const amp_section *section;
    uint64_t at, count;
    size_t stored_at;   /* in its copy's store */
};

struct zcopy {
    zchunk *chunks;
    size_t nchunks;
    unsigned char *store;
    size_t store_bytes;
};

struct gpu_zstream {
    int device;
    size_t vsize;
    zcopy copies[AMP_MAX_MODES];
    int nworkers, nslots;
    amp_section_reader *reader[ZSTREAM_WORKERS_MAX];
    void *slot[ZSTREAM_WORKERS_MAX + 2];
    cudaEvent_t slot_free[ZSTREAM_WORKERS_MAX + 2];
    size_t slot_bytes;
};

void gpu_zstream_free(gpu_zstream *z)
{
    if (z == NULL)
        return;
    cudaSetDevice(z->device);
    for (int k = 0; k < z->nslots; k++) {
        if (z->slot_free[k]) {
            cudaEventSynchronize(z->slot_free[k]);
            cudaEventDestroy(z->slot_free[k]);
        }
        if (z->slot[k])
            cudaFreeHost(z->slot[k]);
    }
    for (int w = 0; w < z->nworkers; w++)
        amp_section_reader_free(z->reader[w]);
    for (unsigned m = 0; m < AMP_MAX_MODES; m++) {
        free(z->copies[m].chunks);
        free(z->copies[m].store);
    }
    free(z);
}

size_t gpu_zstream_host_bytes(const gpu_zstream *z)
{
    size_t bytes = (size_t)z->nslots * z->slot_bytes;
    for (unsigned m = 0; m < AMP_MAX_MODES; m++)
        bytes += z->copies[m].store_bytes;
    return bytes;
}

/* Load: every chunk decoded and checked once; its stored bytes kept. */
static amp_status keep_stored(void *ctx, int thread, const amp_chunk_data *c, amp_error *err)
{
    gpu_zstream *z = (gpu_zstream *)ctx;
    zcopy *zc = &z->copies[c->mode];
    const zchunk *k = &zc->chunks[c->index];
    (void)thread, (void)err;
    memcpy(zc->store + k->stored_at, c->stored, (size_t)c->section->stored_size);
    return AMP_OK;
}

amp_status gpu_zstream_new(int device, const amp_file *f, const amp_tensor *t, int threads,
                           amp_load_progress_fn progress, void *progress_ctx, gpu_zstream **out,
                           amp_error *err)
{
    amp_status rc = AMP_OK;
    gpu_zstream *z = (gpu_zstream *)calloc(1, sizeof *z);
    if (z == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    z->device = device;
    z->vsize = amp_value_size(t->value_type);
    z->nworkers = std::max(1, std::min(threads, (int)ZSTREAM_WORKERS_MAX));
    z->nslots = z->nworkers + 2;
    for (unsigned m = 0; m < t->nmodes; m++) {
        const amp_mode_layout *l = amp_file_mode(f, m);
        zcopy *zc = &z->copies[m];
        for (uint32_t s = 0; s < l->nshards; s++)
            zc->nchunks += l->shards[s].nchunks;
        zc->chunks = (zchunk *)calloc(zc->nchunks ? zc->nchunks : 1, sizeof *zc->chunks);
        if (zc->chunks == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
        size_t i = 0;
        uint64_t at = 0;
        for (uint32_t s = 0; s < l->nshards; s++)
            for (uint32_t q = 0; q < l->shards[s].nchunks; q++, i++) {
                const amp_section *sec = amp_file_chunk(f, m, s, q);
                zc->chunks[i] = zchunk{sec, at, sec->count, zc->store_bytes};
                at += sec->count;
                zc->store_bytes += (size_t)sec->stored_size;
                z->slot_bytes = std::max(z->slot_bytes, (size_t)sec->raw_size);
            }
        zc->store = (unsigned char *)malloc(zc->store_bytes ? zc->store_bytes : 1);
        if (zc->store == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory for mode %u's "
                           "compressed chunks (%zu bytes)", m + 1, zc->store_bytes);
    }
    for (int w = 0; w < z->nworkers; w++)
        AMP_CHECK_GOTO(amp_section_reader_new(f, &z->reader[w], err), rc, fail);
    CUDA_TRY_GOTO(cudaSetDevice(device), err, rc, fail);
    for (int k = 0; k < z->nslots; k++) {
        CUDA_TRY_GOTO(cudaMallocHost(&z->slot[k], std::max<size_t>(z->slot_bytes, 8)), err, rc,
                      fail);
        CUDA_TRY_GOTO(cudaEventCreateWithFlags(&z->slot_free[k], cudaEventDisableTiming), err,
                      rc, fail);
    }
    AMP_CHECK_GOTO(amp_tensor_read_chunks(f, t, z->nworkers, 1, keep_stored, z, progress,
                                          progress_ctx, err), rc, fail);
    *out = z;
    return AMP_OK;
fail:
    gpu_zstream_free(z);
    return rc;
}

namespace {

/* What the workers and the launcher of one MTTKRP share. */
struct pipeline {
    const gpu_zstream *z;
    const zcopy *zc;
    std::mutex mu;
    std::condition_variable changed;
    std::atomic<size_t> next{0};
    int64_t ready[ZSTREAM_WORKERS_MAX + 2];    /* chunk decoded in each slot */
    int64_t queued[ZSTREAM_WORKERS_MAX + 2];   /* chunk whose copy out of each slot is queued */
    bool abort = false;
    amp_status rc = AMP_OK;
    amp_error err = {};

    void fail(amp_status s, const amp_error &e)
    {
        std::lock_guard<std::mutex> lock(mu);
        if (rc == AMP_OK) {
            rc = s;
            err = e;
        }
        abort = true;
        changed.notify_all();
    }
};

void decode_chunks(pipeline *p, int w)
{
    const gpu_zstream *z = p->z;
    amp_error e = {};
    cudaError_t ce = cudaSetDevice(z->device);
    if (ce != cudaSuccess) {
        CUDA_FAIL(&e, ce, "cudaSetDevice");
        p->fail(AMP_ERR_CUDA, e);
        return;
    }
    const int64_t S = z->nslots;
    for (;;) {
        size_t i = p->next.fetch_add(1);
        if (i >= p->zc->nchunks)
            return;
        const int slot = (int)(i % (size_t)S);
        {
            std::unique_lock<std::mutex> lock(p->mu);
            p->changed.wait(lock, [&] { return p->abort || p->queued[slot] >= (int64_t)i - S; });
            if (p->abort)
                return;
        }
        /* The copy out of this slot of chunk i - S, queued: wait for it. */
        ce = cudaEventSynchronize(z->slot_free[slot]);
        if (ce != cudaSuccess) {
            CUDA_FAIL(&e, ce, "cudaEventSynchronize");
            p->fail(AMP_ERR_CUDA, e);
            return;
        }
        const zchunk *k = &p->zc->chunks[i];
        amp_status rc = amp_section_decode(z->reader[w], k->section, p->zc->store + k->stored_at,
                                           z->slot[slot], z->slot_bytes, &e);
        if (rc != AMP_OK) {
            p->fail(rc, e);
            return;
        }
        std::lock_guard<std::mutex> lock(p->mu);
        p->ready[slot] = (int64_t)i;
        p->changed.notify_all();
    }
}

}  // namespace

amp_status gpu_zstream_run(const amp_gpu_tensor *g, unsigned d, gpu_zstream_launch_fn launch,
                           void *launch_ctx, cudaStream_t s, amp_error *err)
{
    const gpu_zstream *z = g->zstream;
    pipeline *p = new (std::nothrow) pipeline;
    if (p == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    p->z = z;
    p->zc = &z->copies[d];
    for (int k = 0; k < z->nslots; k++)
        p->ready[k] = p->queued[k] = -1;
    const int64_t nchunks = (int64_t)p->zc->nchunks;
    const int nw = (int)std::min<int64_t>(z->nworkers, nchunks);
    std::thread workers[ZSTREAM_WORKERS_MAX];
    int started = 0;
    try {
        for (; started < nw; started++)
            workers[started] = std::thread(decode_chunks, p, started);
    } catch (...) {
        amp_error e = {};
        AMP_FAIL(&e, AMP_ERR_NOMEM, "no thread to decode chunks");
        p->fail(AMP_ERR_NOMEM, e);
    }
    amp_error e = {};
    for (int64_t i = 0; i < nchunks && started == nw; i++) {
        const int slot = (int)(i % z->nslots), b = (int)(i % AMP_GPU_RING);
        {
            std::unique_lock<std::mutex> lock(p->mu);
            p->changed.wait(lock, [&] { return p->abort || p->ready[slot] == i; });
            if (p->abort)
                break;
        }
        const zchunk *k = &p->zc->chunks[i];
        const unsigned char *src = (const unsigned char *)z->slot[slot];
        cudaError_t ce = cudaStreamWaitEvent(g->copy_stream, g->consumed[b], 0);
        if (ce == cudaSuccess)
            ce = cudaMemcpyAsync(g->ring_words[b], src, k->count * 8, cudaMemcpyHostToDevice,
                                 g->copy_stream);
        if (ce == cudaSuccess)
            ce = cudaMemcpyAsync(g->ring_vals[b], src + k->count * 8, k->count * z->vsize,
                                 cudaMemcpyHostToDevice, g->copy_stream);
        if (ce == cudaSuccess)
            ce = cudaEventRecord(z->slot_free[slot], g->copy_stream);
        if (ce == cudaSuccess)
            ce = cudaEventRecord(g->copied[b], g->copy_stream);
        if (ce == cudaSuccess)
            ce = cudaStreamWaitEvent(s, g->copied[b], 0);
        if (ce != cudaSuccess) {
            AMP_FAIL(&e, AMP_ERR_CUDA, "queueing chunk %lld of mode %u: %s", (long long)i, d + 1,
                     cudaGetErrorString(ce));
            p->fail(AMP_ERR_CUDA, e);
            break;
        }
        {
            std::lock_guard<std::mutex> lock(p->mu);
            p->queued[slot] = i;
            p->changed.notify_all();
        }
        amp_status rc = launch(launch_ctx, b, k->at, k->count, &e);
        if (rc == AMP_OK && (ce = cudaEventRecord(g->consumed[b], s)) != cudaSuccess)
            rc = CUDA_FAIL(&e, ce, "cudaEventRecord");
        if (rc != AMP_OK) {
            p->fail(rc, e);
            break;
        }
    }
    for (int w = 0; w < started; w++)
        workers[w].join();
    amp_status rc = p->rc;
    if (rc != AMP_OK)
        *err = p->err;
    delete p;
    return rc;
}
