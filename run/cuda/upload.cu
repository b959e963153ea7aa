/* Host-to-device copies of pageable memory at link speed.
 *
 * cudaMemcpy from pageable memory goes through a driver staging buffer one
 * piece at a time, at a fraction of the link's speed (bench/RESULTS.md,
 * "the resident upload through page-locked staging"). Here W worker
 * threads each own two page-locked buffers and a stream: a worker copies
 * the next piece of its share into one buffer while the other buffer's
 * piece is on the link, so the rate is the smaller of the link's and W
 * memcpy streams'.
 *
 * Bytes moved: each byte is read from pageable memory once, written to and
 * read from a pinned buffer once (by the CPU, then the DMA engine), and
 * written to the device once.
 *
 * amp_gpu_upload_async lets the threads that read the file stage their
 * own chunks (worker = thread), so reading, decompressing and the link
 * overlap and the tensor is never whole in host memory. */
#include <config.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <thread>

#include "amp_cuda.h"
#include "gpu_internal.h"

/* 16 workers with 2 MiB buffers: of the counts and sizes tried, the
 * fastest copies and the least time spent page-locking the buffers
 * (bench/RESULTS.md, "the resident upload through page-locked
 * staging"). */
enum {
    UPLOAD_WORKERS_DEFAULT = 16,   /* memcpy streams to fill one link */
    UPLOAD_WORKERS_MAX = 256,      /* one per thread reading the file */
    UPLOAD_PIECE = 2 << 20,        /* bytes per pinned buffer */
    UPLOAD_DIRECT_BELOW = 4 << 20  /* smaller copies go through cudaMemcpy */
};

struct upload_worker {
    void *pin[2];
    cudaEvent_t free_again[2];  /* the link has finished reading pin[b] */
    cudaStream_t stream;
    int next;                   /* the buffer amp_gpu_upload_async fills next */
};

struct amp_gpu_uploader {
    int device;
    int nworkers;
    upload_worker w[UPLOAD_WORKERS_MAX];
};

extern "C" void amp_gpu_uploader_free(amp_gpu_uploader *u)
{
    if (u == NULL)
        return;
    cudaSetDevice(u->device);
    for (int i = 0; i < u->nworkers; i++) {
        upload_worker *w = &u->w[i];
        if (w->stream)
            cudaStreamSynchronize(w->stream);
        for (int b = 0; b < 2; b++) {
            if (w->pin[b])
                cudaFreeHost(w->pin[b]);
            destroy_event(w->free_again[b]);
        }
        destroy_stream(w->stream);
    }
    free(u);
}

extern "C" amp_status amp_gpu_uploader_new(int device, int workers, amp_gpu_uploader **out,
                                           amp_error *err)
{
    amp_status rc = AMP_OK;
    if (workers > UPLOAD_WORKERS_MAX)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%d upload workers: at most %d", workers,
                        (int)UPLOAD_WORKERS_MAX);
    amp_gpu_uploader *u = (amp_gpu_uploader *)calloc(1, sizeof *u);
    if (u == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    u->device = device;
    unsigned hw = std::thread::hardware_concurrency();
    u->nworkers = workers > 0 ? workers
                              : (int)std::min<unsigned>(UPLOAD_WORKERS_DEFAULT, hw > 0 ? hw : 1);
    CUDA_TRY_GOTO(cudaSetDevice(device), err, rc, fail);
    for (int i = 0; i < u->nworkers; i++) {
        upload_worker *w = &u->w[i];
        CUDA_TRY_GOTO(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking), err, rc,
                      fail);
        for (int b = 0; b < 2; b++) {
            CUDA_TRY_GOTO(cudaMallocHost(&w->pin[b], UPLOAD_PIECE), err, rc, fail);
            CUDA_TRY_GOTO(cudaEventCreateWithFlags(&w->free_again[b], cudaEventDisableTiming),
                          err, rc, fail);
        }
    }
    *out = u;
    return AMP_OK;
fail:
    amp_gpu_uploader_free(u);
    return rc;
}

/* One piece (at most UPLOAD_PIECE bytes) through worker w's next buffer,
 * once the link is done with what that buffer held before. */
static amp_status stage_piece(upload_worker *w, char *dst, const char *src, size_t n,
                              amp_error *err)
{
    int b = w->next;
    CUDA_TRY(cudaEventSynchronize(w->free_again[b]), err);
    memcpy(w->pin[b], src, n);
    CUDA_TRY(cudaMemcpyAsync(dst, w->pin[b], n, cudaMemcpyHostToDevice, w->stream), err);
    CUDA_TRY(cudaEventRecord(w->free_again[b], w->stream), err);
    w->next ^= 1;
    return AMP_OK;
}

/* Worker i's share among nshares: pieces i, i + nshares, i + 2 nshares,
 * ... of the copy. Interleaved pieces keep every worker busy to the end,
 * whatever the size. */
static amp_status upload_share(amp_gpu_uploader *u, int i, int nshares, char *dst,
                               const char *src, size_t bytes, amp_error *err)
{
    upload_worker *w = &u->w[i];
    CUDA_TRY(cudaSetDevice(u->device), err);
    size_t npieces = (bytes + UPLOAD_PIECE - 1) / UPLOAD_PIECE;
    for (size_t p = (size_t)i; p < npieces; p += (size_t)nshares) {
        size_t at = p * UPLOAD_PIECE, n = std::min<size_t>(UPLOAD_PIECE, bytes - at);
        AMP_CHECK(stage_piece(w, dst + at, src + at, n, err));
    }
    CUDA_TRY(cudaStreamSynchronize(w->stream), err);
    return AMP_OK;
}

extern "C" amp_status amp_gpu_upload_async(amp_gpu_uploader *u, int worker, void *dst,
                                           const void *src, size_t bytes, amp_error *err)
{
    upload_worker *w = &u->w[worker];
    CUDA_TRY(cudaSetDevice(u->device), err);
    for (size_t at = 0; at < bytes; at += UPLOAD_PIECE)
        AMP_CHECK(stage_piece(w, (char *)dst + at, (const char *)src + at,
                              std::min<size_t>(UPLOAD_PIECE, bytes - at), err));
    return AMP_OK;
}

extern "C" amp_status amp_gpu_uploader_wait(amp_gpu_uploader *u, amp_error *err)
{
    CUDA_TRY(cudaSetDevice(u->device), err);
    for (int i = 0; i < u->nworkers; i++)
        CUDA_TRY(cudaStreamSynchronize(u->w[i].stream), err);
    return AMP_OK;
}

extern "C" amp_status amp_gpu_upload(amp_gpu_uploader *u, void *dst, const void *src,
                                     size_t bytes, amp_error *err)
{
    if (u == NULL || bytes < UPLOAD_DIRECT_BELOW) {
        CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), err);
        return AMP_OK;
    }
    /* 16 workers fill the link (more, made for amp_gpu_upload_async, idle). */
    int n = std::min<int>(u->nworkers, UPLOAD_WORKERS_DEFAULT);
    amp_status rcs[UPLOAD_WORKERS_DEFAULT];
    amp_error errs[UPLOAD_WORKERS_DEFAULT];
    std::thread threads[UPLOAD_WORKERS_DEFAULT];
    memset(errs, 0, sizeof errs);
    int started = 1;
    try {
        for (; started < n; started++) {
            int i = started;
            threads[i] = std::thread([=, &rcs, &errs] {
                rcs[i] = upload_share(u, i, n, (char *)dst, (const char *)src, bytes, &errs[i]);
            });
        }
    } catch (...) {
        /* No thread to be had: the shares not started run here. */
    }
    for (int i = started; i < n; i++)
        rcs[i] = upload_share(u, i, n, (char *)dst, (const char *)src, bytes, &errs[i]);
    rcs[0] = upload_share(u, 0, n, (char *)dst, (const char *)src, bytes, &errs[0]);
    for (int i = 1; i < started; i++)
        threads[i].join();
    for (int i = 0; i < n; i++)
        if (rcs[i] != AMP_OK) {
            *err = errs[i];
            return rcs[i];
        }
    return AMP_OK;
}

/* For the tests: bytes of a pattern through the uploader and back. */
extern "C" amp_status amp_gpu_upload_check(int device, size_t bytes, amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_gpu_uploader *u = NULL;
    unsigned char *host = (unsigned char *)malloc(bytes ? bytes : 1);
    unsigned char *back = (unsigned char *)malloc(bytes ? bytes : 1);
    void *dev = NULL;
    if (host == NULL || back == NULL)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < bytes; i++)
        host[i] = (unsigned char)((i * UINT64_C(0x9E3779B97F4A7C15)) >> 56);
    memset(back, 0, bytes);
    AMP_CHECK_GOTO(amp_gpu_uploader_new(device, 0, &u, err), rc, fail);
    CUDA_TRY_GOTO(cudaMalloc(&dev, bytes ? bytes : 1), err, rc, fail);
    CUDA_TRY_GOTO(cudaMemset(dev, 0, bytes), err, rc, fail);
    /* The workers' streams do not wait for the legacy stream's memset. */
    CUDA_TRY_GOTO(cudaDeviceSynchronize(), err, rc, fail);
    AMP_CHECK_GOTO(amp_gpu_upload(u, dev, host, bytes, err), rc, fail);
    CUDA_TRY_GOTO(cudaMemcpy(back, dev, bytes, cudaMemcpyDeviceToHost), err, rc, fail);
    for (size_t i = 0; i < bytes; i++)
        if (back[i] != host[i]) {
            rc = AMP_FAIL(err, AMP_ERR_INTERNAL, "byte %zu of %zu arrived as %u, not %u", i,
                          bytes, back[i], host[i]);
            break;
        }
fail:
    if (dev)
        cudaFree(dev);
    amp_gpu_uploader_free(u);
    free(host);
    free(back);
    return rc;
}
