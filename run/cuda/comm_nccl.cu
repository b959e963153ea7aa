/* amp_comm over NCCL (the CUDA toolkit's nccl.h), one process, one
 * communicator per GPU. Factor rows go point to point in one group (every
 * rank sends its rows to every other at once, both directions of each
 * link busy), which an all-gather cannot do for ranks of unequal size. */
#include <config.h>

#include <cuda_runtime.h>
#include <stdlib.h>

#include "amp_comm.h"
#ifdef AMP_HAVE_NCCL
#include <nccl.h>
#endif

struct amp_comm {
    unsigned rank, size;
    int device;
#ifdef AMP_HAVE_NCCL
    ncclComm_t nccl;   /* NULL for a run of one GPU */
    int aborted;
#endif
};

#ifdef AMP_HAVE_NCCL
#define NCCL_TRY(call, err)                                                                 \
    do {                                                                                    \
        ncclResult_t r_ = (call);                                                           \
        if (r_ != ncclSuccess)                                                              \
            return amp_error_set((err), AMP_ERR_CUDA, __FILE__, __LINE__, "%s: %s", #call,    \
                                 ncclGetErrorString(r_));                                   \
    } while (0)
#endif

extern "C" int amp_comm_available(void)
{
#ifdef AMP_HAVE_NCCL
    return 1;
#else
    return 0;
#endif
}

extern "C" amp_status amp_comm_init_all(unsigned n, const int *devices, amp_comm **comms,
                                        amp_error *err)
{
    if (n == 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "a communicator needs at least one GPU");
#ifndef AMP_HAVE_NCCL
    if (n > 1)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%u GPUs need NCCL, and this build has none "
                        "(configure --with-nccl)", n);
#endif
    for (unsigned r = 0; r < n; r++) {
        comms[r] = (amp_comm *)calloc(1, sizeof **comms);
        if (comms[r] == NULL) {
            for (unsigned q = 0; q < r; q++)
                free(comms[q]);
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        }
        comms[r]->rank = r;
        comms[r]->size = n;
        comms[r]->device = devices[r];
    }
#ifdef AMP_HAVE_NCCL
    if (n > 1) {
        ncclComm_t *nc = (ncclComm_t *)calloc(n, sizeof *nc);
        ncclResult_t r = nc ? ncclCommInitAll(nc, (int)n, devices) : ncclSystemError;
        if (r != ncclSuccess) {
            free(nc);
            for (unsigned q = 0; q < n; q++)
                free(comms[q]);
            return AMP_FAIL(err, AMP_ERR_CUDA, "NCCL could not join %u GPUs: %s", n,
                            ncclGetErrorString(r));
        }
        for (unsigned q = 0; q < n; q++)
            comms[q]->nccl = nc[q];
        free(nc);
    }
#endif
    return AMP_OK;
}

extern "C" void amp_comm_free(amp_comm *c)
{
    if (c == NULL)
        return;
#ifdef AMP_HAVE_NCCL
    if (c->nccl && !c->aborted) {
        cudaSetDevice(c->device);
        ncclCommDestroy(c->nccl);
    }
#endif
    free(c);
}

extern "C" void amp_comm_abort(amp_comm *c)
{
#ifdef AMP_HAVE_NCCL
    if (c && c->nccl && !c->aborted) {
        ncclCommAbort(c->nccl);
        c->aborted = 1;
    }
#else
    (void)c;
#endif
}

extern "C" unsigned amp_comm_rank(const amp_comm *c)
{
    return c->rank;
}

extern "C" unsigned amp_comm_size(const amp_comm *c)
{
    return c->size;
}

extern "C" amp_status amp_comm_allreduce(amp_comm *c, double *buf, size_t n, int max,
                                         void *stream, amp_error *err)
{
    if (c == NULL || c->size == 1 || n == 0)
        return AMP_OK;
#ifdef AMP_HAVE_NCCL
    NCCL_TRY(ncclAllReduce(buf, buf, n, ncclDouble, max ? ncclMax : ncclSum, c->nccl,
                           (cudaStream_t)stream), err);
    return AMP_OK;
#else
    (void)buf, (void)max, (void)stream;
    return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "no NCCL");
#endif
}

extern "C" amp_status amp_comm_allgatherv(amp_comm *c, double *buf, const uint64_t *offset,
                                          const uint64_t *count, void *stream, amp_error *err)
{
    if (c == NULL || c->size == 1)
        return AMP_OK;
#ifdef AMP_HAVE_NCCL
    cudaStream_t s = (cudaStream_t)stream;
    NCCL_TRY(ncclGroupStart(), err);
    for (unsigned peer = 0; peer < c->size; peer++) {
        if (peer == c->rank)
            continue;
        if (count[c->rank] > 0)
            NCCL_TRY(ncclSend(buf + offset[c->rank], count[c->rank], ncclDouble, (int)peer,
                              c->nccl, s), err);
        if (count[peer] > 0)
            NCCL_TRY(ncclRecv(buf + offset[peer], count[peer], ncclDouble, (int)peer, c->nccl,
                              s), err);
    }
    NCCL_TRY(ncclGroupEnd(), err);
    return AMP_OK;
#else
    (void)buf, (void)offset, (void)count, (void)stream;
    return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "no NCCL");
#endif
}

extern "C" amp_status amp_comm_reduce_scatter(amp_comm *c, void *buf, size_t block, int f32,
                                              void *stream, amp_error *err)
{
    if (c == NULL || c->size == 1 || block == 0)
        return AMP_OK;
#ifdef AMP_HAVE_NCCL
    size_t es = f32 ? 4 : 8;
    NCCL_TRY(ncclReduceScatter(buf, (char *)buf + (size_t)c->rank * block * es, block,
                               f32 ? ncclFloat : ncclDouble, ncclSum, c->nccl,
                               (cudaStream_t)stream), err);
    return AMP_OK;
#else
    (void)buf, (void)f32, (void)stream;
    return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "no NCCL");
#endif
}

extern "C" amp_status amp_comm_check(amp_comm *c, amp_error *err)
{
#ifdef AMP_HAVE_NCCL
    if (c == NULL || c->nccl == NULL || c->aborted)
        return AMP_OK;
    ncclResult_t async = ncclSuccess;
    NCCL_TRY(ncclCommGetAsyncError(c->nccl, &async), err);
    if (async != ncclSuccess && async != ncclInProgress)
        return AMP_FAIL(err, AMP_ERR_CUDA, "NCCL (GPU %u of %u): %s", c->rank, c->size,
                        ncclGetErrorString(async));
#else
    (void)c, (void)err;
#endif
    return AMP_OK;
}
