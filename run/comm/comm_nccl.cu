/* amp_comm over NCCL (the CUDA toolkit's nccl.h), one process, two
 * communicators per GPU. Factor rows go point to point in one group (every
 * GPU sends its rows to every other at once, both directions of each
 * link busy), which an all-gather cannot do for GPUs of unequal shares.
 * They travel on a communicator of their own: NCCL runs one
 * communicator's operations in the order they were issued, so on a shared
 * one the small all-reduces issued while rows are in flight would wait for
 * the whole transfer. Two communicators' kernels must then be able to run
 * at once on a GPU (NCCL's condition for several communicators): they are
 * small grids, and every GPU issues both kinds in the same order. */
#include <config.h>

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "amp_comm.h"
#ifdef AMP_HAVE_NCCL
#include <nccl.h>
#endif

#define AMP_COMM_MAX_LOCAL 64   /* GPUs of one process: AMP_MAX_GPUS */

/* gpu_internal.h's, which the collectives' library may not include. */
#define CUDA_TRY(call, err)                                                                 \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess)                                                              \
            return AMP_FAIL((err), AMP_ERR_CUDA, "%s: %s", #call, cudaGetErrorString(e_));  \
    } while (0)

/* The GPUs of one process that send rows by copies (amp_comm_init_all's
 * rows): each GPU's copy engines pull the others' rows over the link
 * (cudaMemcpyPeerAsync), no kernel and so no SM taken from the MTTKRP.
 * The GPUs' threads meet twice a call: once every GPU has marked its rows
 * ready (its event recorded, its buffer named), and once every GPU has
 * marked its pulls issued, so that each GPU's stream then waits for the
 * pulls from its own rows too, as NCCL's send would. */
struct copy_group {
    unsigned n;
    std::mutex mu;
    std::condition_variable cv;
    unsigned arrived = 0, refs = 0;
    uint64_t generation = 0;
    bool aborted = false;
    int device[AMP_COMM_MAX_LOCAL];
    void *buf[AMP_COMM_MAX_LOCAL];
    cudaEvent_t ready[AMP_COMM_MAX_LOCAL], pulled[AMP_COMM_MAX_LOCAL];
};

struct amp_comm {
    unsigned gpu, ngpus;   /* this GPU's index in the run (its NCCL rank), the run's GPUs */
    int device;
    copy_group *copies;    /* rows by copies; NULL: by NCCL */
#ifdef AMP_HAVE_NCCL
    ncclComm_t nccl;   /* NULL for a run of one GPU */
    ncclComm_t rows;   /* amp_comm_allgatherv's */
    int aborted;
#endif
};

#ifdef AMP_HAVE_NCCL
#define NCCL_TRY(call, err)                                                                 \
    do {                                                                                    \
        ncclResult_t r_ = (call);                                                           \
        if (r_ != ncclSuccess)                                                              \
            return AMP_FAIL((err), AMP_ERR_CUDA, "%s: %s", #call, ncclGetErrorString(r_));  \
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

extern "C" int amp_comm_peers(unsigned n, const int *devices)
{
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++) {
            int can = 0;
            if (devices[i] == devices[j])
                continue;
            if (cudaDeviceCanAccessPeer(&can, devices[i], devices[j]) != cudaSuccess || !can) {
                cudaGetLastError();
                return 0;
            }
        }
    return 1;
}

#ifdef AMP_HAVE_NCCL
/* NCCL connects peers on their first collective and first send: time
 * that belongs to setting up, not to the first iteration. comms: this
 * process's nlocal GPUs of the run's comms[0]->ngpus. */
static amp_status warm_up(amp_comm **comms, unsigned nlocal, int rows, amp_error *err)
{
    const unsigned ngpus = comms[0]->ngpus;
    amp_status rc = AMP_OK;
    double *buf[AMP_COMM_MAX_LOCAL] = {0};
    cudaStream_t st[AMP_COMM_MAX_LOCAL] = {0};
    for (unsigned r = 0; r < nlocal && r < AMP_COMM_MAX_LOCAL && rc == AMP_OK; r++) {
        cudaError_t e = cudaSetDevice(comms[r]->device);
        if (e == cudaSuccess)
            e = cudaMalloc((void **)&buf[r], 2 * ngpus * sizeof(double));
        if (e == cudaSuccess)
            e = cudaMemset(buf[r], 0, 2 * ngpus * sizeof(double));
        if (e == cudaSuccess)
            e = cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking);
        if (e != cudaSuccess)
            rc = AMP_FAIL(err, AMP_ERR_CUDA, "setting up NCCL on GPU %d: %s", comms[r]->device,
                          cudaGetErrorString(e));
    }
    ncclResult_t nr = ncclSuccess;
    if (rc == AMP_OK && (nr = ncclGroupStart()) == ncclSuccess) {
        for (unsigned r = 0; r < nlocal && nr == ncclSuccess; r++) {
            ncclComm_t c = rows ? comms[r]->rows : comms[r]->nccl;
            const unsigned me = comms[r]->gpu;
            nr = ncclAllReduce(buf[r], buf[r], 1, ncclDouble, ncclSum, c, st[r]);
            for (unsigned q = 0; q < ngpus && nr == ncclSuccess; q++)
                if (q != me) {
                    nr = ncclSend(buf[r] + me, 1, ncclDouble, (int)q, c, st[r]);
                    if (nr == ncclSuccess)
                        nr = ncclRecv(buf[r] + ngpus + q, 1, ncclDouble, (int)q, c, st[r]);
                }
        }
        ncclResult_t end = ncclGroupEnd();
        nr = nr == ncclSuccess ? end : nr;
        if (nr != ncclSuccess)
            rc = AMP_FAIL(err, AMP_ERR_CUDA, "NCCL's first collective failed: %s",
                          ncclGetErrorString(nr));
    }
    for (unsigned r = 0; r < nlocal && r < AMP_COMM_MAX_LOCAL; r++) {
        if (st[r]) {
            cudaSetDevice(comms[r]->device);
            cudaError_t e = cudaStreamSynchronize(st[r]);
            if (e != cudaSuccess && rc == AMP_OK)
                rc = AMP_FAIL(err, AMP_ERR_CUDA, "NCCL's first collective on GPU %d: %s",
                              comms[r]->device, cudaGetErrorString(e));
            cudaStreamDestroy(st[r]);
        }
        cudaFree(buf[r]);
    }
    return rc;
}
#endif

/* comms[0 .. nlocal): GPUs first .. first + nlocal - 1 of a run of ngpus,
 * on CUDA devices devices[0 .. nlocal), no communicator yet. */
static amp_status comms_new(amp_comm **comms, unsigned nlocal, unsigned first, unsigned ngpus,
                            const int *devices, amp_error *err)
{
    for (unsigned i = 0; i < nlocal; i++) {
        comms[i] = (amp_comm *)calloc(1, sizeof **comms);
        if (comms[i] == NULL) {
            for (unsigned q = 0; q < i; q++) {
                free(comms[q]);
                comms[q] = NULL;   /* the caller may free what it holds */
            }
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        }
        comms[i]->gpu = first + i;
        comms[i]->ngpus = ngpus;
        comms[i]->device = devices[i];
    }
    return AMP_OK;
}

#ifdef AMP_HAVE_NCCL
/* The communicators NCCL made (nc: nlocal for the collectives, then
 * nlocal for the rows; r its result) given to comms and warmed up; on
 * any failure every comm is gone. */
static amp_status comms_attach(amp_comm **comms, unsigned nlocal, ncclComm_t *nc,
                               ncclResult_t r, amp_error *err)
{
    if (r != ncclSuccess) {
        AMP_FAIL(err, AMP_ERR_CUDA, "NCCL could not join GPUs %u to %u of %u: %s",
                 comms[0]->gpu, comms[0]->gpu + nlocal - 1, comms[0]->ngpus,
                 ncclGetErrorString(r));
        free(nc);
        for (unsigned q = 0; q < nlocal; q++) {
            free(comms[q]);
            comms[q] = NULL;
        }
        return err ? err->status : AMP_ERR_CUDA;
    }
    for (unsigned q = 0; q < nlocal; q++) {
        comms[q]->nccl = nc[q];
        comms[q]->rows = nc[nlocal + q];
    }
    free(nc);
    amp_status rc = warm_up(comms, nlocal, 0, err);
    if (rc == AMP_OK)
        rc = warm_up(comms, nlocal, 1, err);
    if (rc != AMP_OK)
        for (unsigned q = 0; q < nlocal; q++) {
            /* Its collectives may still be queued: abort, not destroy. */
            amp_comm_abort(comms[q]);
            amp_comm_free(comms[q]);
            comms[q] = NULL;
        }
    return rc;
}
#endif

/* Waits until every GPU of G has called it this round; false where the
 * exchange was cancelled (amp_comm_abort on any of them) first. */
static bool group_meet(copy_group *G)
{
    std::unique_lock<std::mutex> hold(G->mu);
    if (G->aborted)
        return false;
    const uint64_t round = G->generation;
    if (++G->arrived == G->n) {
        G->arrived = 0;
        G->generation++;
        G->cv.notify_all();
        return true;
    }
    G->cv.wait(hold, [&] { return G->generation != round || G->aborted; });
    return G->generation != round;
}

/* Leaves G: the last GPU out frees it. Its own events go with it. */
static void group_leave(amp_comm *c)
{
    copy_group *G = c->copies;
    if (G == NULL)
        return;
    c->copies = NULL;
    cudaSetDevice(c->device);
    if (G->ready[c->gpu])
        cudaEventDestroy(G->ready[c->gpu]);
    if (G->pulled[c->gpu])
        cudaEventDestroy(G->pulled[c->gpu]);
    bool last;
    {
        std::lock_guard<std::mutex> hold(G->mu);
        last = --G->refs == 0;
    }
    if (last)
        delete G;
}

#ifdef AMP_HAVE_NCCL
/* comms[0 .. n), every GPU of the run in this process, joined to send
 * rows by copies: peer access each way where the GPUs allow it (else, or
 * where enabling it fails, as past 8 peers on PCIe, the copies go through
 * the host, slower but the same), two events each. need_peers: where some
 * pair has no peer access, join none (rows then go by NCCL, which finds
 * its own way), since copies through the host lose to NCCL's. */
static amp_status group_join(amp_comm **comms, unsigned n, int need_peers, amp_error *err)
{
    if (n > AMP_COMM_MAX_LOCAL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "rows by copies join at most %d GPUs, not %u",
                        AMP_COMM_MAX_LOCAL, n);
    copy_group *G = new (std::nothrow) copy_group;
    if (G == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    G->n = n;
    G->refs = n;
    for (unsigned i = 0; i < n; i++) {
        G->device[i] = comms[i]->device;
        G->buf[i] = NULL;
        G->ready[i] = G->pulled[i] = NULL;
        comms[i]->copies = G;
    }
    amp_status rc = AMP_OK;
    int peers = 1;
    for (unsigned i = 0; i < n && rc == AMP_OK; i++) {
        cudaError_t e = cudaSetDevice(G->device[i]);
        for (unsigned j = 0; j < n && e == cudaSuccess; j++) {
            int can = 0;
            if (j == i || G->device[j] == G->device[i])
                continue;
            e = cudaDeviceCanAccessPeer(&can, G->device[i], G->device[j]);
            if (e != cudaSuccess)
                break;
            cudaError_t on = can ? cudaDeviceEnablePeerAccess(G->device[j], 0)
                                 : cudaErrorPeerAccessUnsupported;
            if (on != cudaSuccess && on != cudaErrorPeerAccessAlreadyEnabled)
                peers = 0;   /* the copies would take the host's way */
            if (on != cudaSuccess)
                cudaGetLastError();   /* not sticky */
        }
        if (e == cudaSuccess)
            e = cudaEventCreateWithFlags(&G->ready[i], cudaEventDisableTiming);
        if (e == cudaSuccess)
            e = cudaEventCreateWithFlags(&G->pulled[i], cudaEventDisableTiming);
        if (e != cudaSuccess)
            rc = AMP_FAIL(err, AMP_ERR_CUDA, "rows by copies on GPU %d: %s", G->device[i],
                          cudaGetErrorString(e));
    }
    if (rc != AMP_OK || (need_peers && !peers))
        for (unsigned i = 0; i < n; i++)
            group_leave(comms[i]);
    return rc;
}
#endif

extern "C" amp_status amp_comm_init_all(unsigned ngpus, const int *devices, amp_comm_rows rows,
                                        amp_comm **comms, amp_error *err)
{
    if (ngpus == 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "a communicator needs at least one GPU");
#ifndef AMP_HAVE_NCCL
    if (ngpus > 1)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%u GPUs need NCCL, and this build has none "
                        "(configure --with-nccl)", ngpus);
#endif
    AMP_CHECK(comms_new(comms, ngpus, 0, ngpus, devices, err));
#ifdef AMP_HAVE_NCCL
    if (ngpus > 1) {
        ncclComm_t *nc = (ncclComm_t *)calloc(2 * (size_t)ngpus, sizeof *nc);
        ncclResult_t r = nc ? ncclCommInitAll(nc, (int)ngpus, devices) : ncclSystemError;
        if (r == ncclSuccess) {
            r = ncclCommInitAll(nc + ngpus, (int)ngpus, devices);
            if (r != ncclSuccess)
                for (unsigned q = 0; q < ngpus; q++)
                    ncclCommDestroy(nc[q]);
        }
        AMP_CHECK(comms_attach(comms, ngpus, nc, r, err));
        amp_status rc = rows == AMP_COMM_ROWS_NCCL
                            ? AMP_OK
                            : group_join(comms, ngpus, rows == AMP_COMM_ROWS_COPY_IF_PEERS, err);
        if (rc != AMP_OK)
            for (unsigned q = 0; q < ngpus; q++) {
                amp_comm_free(comms[q]);
                comms[q] = NULL;
            }
        return rc;
    }
#endif
    (void)rows;
    return AMP_OK;
}

extern "C" amp_status amp_comm_unique_id(void *id, amp_error *err)
{
#ifdef AMP_HAVE_NCCL
    static_assert(2 * sizeof(ncclUniqueId) <= AMP_COMM_ID_BYTES, "AMP_COMM_ID_BYTES");
    ncclUniqueId u[2];
    NCCL_TRY(ncclGetUniqueId(&u[0]), err);
    NCCL_TRY(ncclGetUniqueId(&u[1]), err);
    memset(id, 0, AMP_COMM_ID_BYTES);
    memcpy(id, u, sizeof u);
    return AMP_OK;
#else
    (void)id;
    return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "GPUs of several processes need NCCL, and this "
                    "build has none (configure --with-nccl)");
#endif
}

#ifdef AMP_HAVE_NCCL
/* This process's GPUs' ranks in one communicator of ngpus, in one group
 * (NCCL's rule when a process holds several GPUs of the communicator). */
static ncclResult_t init_ranks(const ncclUniqueId *u, unsigned ngpus, unsigned first,
                               unsigned nlocal, const int *devices, ncclComm_t *nc)
{
    ncclResult_t r = ncclGroupStart();
    for (unsigned i = 0; i < nlocal && r == ncclSuccess; i++) {
        if (cudaSetDevice(devices[i]) != cudaSuccess)
            r = ncclInvalidArgument;
        else
            r = ncclCommInitRank(&nc[i], (int)ngpus, *u, (int)(first + i));
    }
    ncclResult_t end = ncclGroupEnd();
    return r == ncclSuccess ? end : r;
}
#endif

extern "C" amp_status amp_comm_init_ranks(const void *id, unsigned ngpus, unsigned first,
                                          unsigned nlocal, const int *devices,
                                          amp_comm **comms, amp_error *err)
{
    if (nlocal == 0 || first + nlocal > ngpus)
        return AMP_FAIL(err, AMP_ERR_USAGE, "GPUs %u to %u of a run of %u", first,
                        first + nlocal, ngpus);
#ifndef AMP_HAVE_NCCL
    (void)id, (void)devices, (void)comms;
    return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "GPUs of several processes need NCCL, and this "
                    "build has none (configure --with-nccl)");
#else
    AMP_CHECK(comms_new(comms, nlocal, first, ngpus, devices, err));
    if (ngpus == 1)
        return AMP_OK;
    ncclUniqueId u[2];
    memcpy(u, id, sizeof u);
    ncclComm_t *nc = (ncclComm_t *)calloc(2 * (size_t)nlocal, sizeof *nc);
    ncclResult_t r = nc ? init_ranks(&u[0], ngpus, first, nlocal, devices, nc) : ncclSystemError;
    if (r == ncclSuccess) {
        r = init_ranks(&u[1], ngpus, first, nlocal, devices, nc + nlocal);
        if (r != ncclSuccess)
            for (unsigned q = 0; q < nlocal; q++)
                ncclCommAbort(nc[q]);
    }
    return comms_attach(comms, nlocal, nc, r, err);
#endif
}

extern "C" void amp_comm_free(amp_comm *c)
{
    if (c == NULL)
        return;
    group_leave(c);
#ifdef AMP_HAVE_NCCL
    if (c->nccl && !c->aborted) {
        cudaSetDevice(c->device);
        ncclCommDestroy(c->nccl);
        ncclCommDestroy(c->rows);
    }
#endif
    free(c);
}

extern "C" void amp_comm_abort(amp_comm *c)
{
    if (c && c->copies) {
        /* The peers' threads waiting in group_meet stop waiting. */
        std::lock_guard<std::mutex> hold(c->copies->mu);
        c->copies->aborted = true;
        c->copies->cv.notify_all();
    }
#ifdef AMP_HAVE_NCCL
    if (c == NULL || c->nccl == NULL || c->aborted)
        return;
    c->aborted = 1;
    /* Both at once: an abort frees host memory, which waits for the device
     * to go idle, and it would not while a kernel of the other
     * communicator still waits for a peer that has stopped (seen on 2
     * H200s: the collectives' abort held in cuMemFreeHost, the rows'
     * kernel never told). One after the other only where no thread can
     * be started. */
    std::thread rows;
    try {
        rows = std::thread(ncclCommAbort, c->rows);
    } catch (...) {
    }
    ncclCommAbort(c->nccl);
    if (rows.joinable())
        rows.join();
    else
        ncclCommAbort(c->rows);
#else
    (void)c;
#endif
}

/* A run of one GPU (or no communicator): its collectives do nothing. */
static inline int one_gpu(const amp_comm *c)
{
    return c == NULL || c->ngpus == 1;
}

extern "C" amp_status amp_comm_allreduce(amp_comm *c, double *buf, size_t n, int max,
                                         void *stream, amp_error *err)
{
    if (one_gpu(c) || n == 0)
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

/* group_meet for GPU c, or the error of an exchange cancelled. */
static amp_status meet(amp_comm *c, amp_error *err)
{
    if (group_meet(c->copies))
        return AMP_OK;
    return AMP_FAIL(err, AMP_ERR_CUDA, "GPU %u: the rows' exchange was cancelled (another GPU "
                    "stopped)", c->gpu);
}

/* amp_comm_allgatherv by copies: this GPU pulls each peer's rows into
 * its own buffer once the peer's stream has them, then its stream waits
 * until every peer has pulled its rows (values of es bytes). */
static amp_status allgatherv_copies(amp_comm *c, void *buf, size_t es, const uint64_t *offset,
                                    const uint64_t *count, cudaStream_t s, amp_error *err)
{
    copy_group *G = c->copies;
    const unsigned me = c->gpu;
    G->buf[me] = buf;
    CUDA_TRY(cudaEventRecord(G->ready[me], s), err);
    AMP_CHECK(meet(c, err));
    for (unsigned p = 0; p < G->n; p++) {
        if (p == me || count[p] == 0)
            continue;
        CUDA_TRY(cudaStreamWaitEvent(s, G->ready[p], 0), err);
        CUDA_TRY(cudaMemcpyPeerAsync((char *)buf + offset[p] * es, c->device,
                                     (const char *)G->buf[p] + offset[p] * es, G->device[p],
                                     count[p] * es, s), err);
    }
    CUDA_TRY(cudaEventRecord(G->pulled[me], s), err);
    AMP_CHECK(meet(c, err));
    for (unsigned p = 0; p < G->n && count[me] > 0; p++)
        if (p != me)
            CUDA_TRY(cudaStreamWaitEvent(s, G->pulled[p], 0), err);
    return AMP_OK;
}

extern "C" amp_status amp_comm_allgatherv(amp_comm *c, void *buf, int f32,
                                          const uint64_t *offset, const uint64_t *count,
                                          void *stream, amp_error *err)
{
    if (one_gpu(c))
        return AMP_OK;
    if (c->copies)
        return allgatherv_copies(c, buf, f32 ? 4 : 8, offset, count, (cudaStream_t)stream, err);
#ifdef AMP_HAVE_NCCL
    cudaStream_t s = (cudaStream_t)stream;
    const ncclDataType_t type = f32 ? ncclFloat : ncclDouble;
    const size_t es = f32 ? 4 : 8;
    char *b = (char *)buf;
    NCCL_TRY(ncclGroupStart(), err);
    /* Close the group whatever happens inside it, so that the calls
     * after a failure are not swallowed by an open group. */
    ncclResult_t r = ncclSuccess;
    for (unsigned peer = 0; peer < c->ngpus && r == ncclSuccess; peer++) {
        if (peer == c->gpu)
            continue;
        if (count[c->gpu] > 0)
            r = ncclSend(b + offset[c->gpu] * es, count[c->gpu], type, (int)peer, c->rows, s);
        if (r == ncclSuccess && count[peer] > 0)
            r = ncclRecv(b + offset[peer] * es, count[peer], type, (int)peer, c->rows, s);
    }
    ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess)
        r = end;
    if (r != ncclSuccess)
        return AMP_FAIL(err, AMP_ERR_CUDA, "sending rows to the other GPUs (NCCL): %s",
                        ncclGetErrorString(r));
    return AMP_OK;
#else
    (void)buf, (void)f32, (void)offset, (void)count, (void)stream;
    return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "no NCCL");
#endif
}

extern "C" amp_status amp_comm_reduce_scatter(amp_comm *c, void *buf, size_t block, int f32,
                                              void *stream, amp_error *err)
{
    if (one_gpu(c) || block == 0)
        return AMP_OK;
#ifdef AMP_HAVE_NCCL
    size_t es = f32 ? 4 : 8;
    NCCL_TRY(ncclReduceScatter(buf, (char *)buf + (size_t)c->gpu * block * es, block,
                               f32 ? ncclFloat : ncclDouble, ncclSum, c->nccl,
                               (cudaStream_t)stream), err);
    return AMP_OK;
#else
    (void)buf, (void)f32, (void)stream;
    return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "no NCCL");
#endif
}

extern "C" int amp_comm_by_copies(const amp_comm *c)
{
    return c != NULL && c->copies != NULL;
}

extern "C" amp_status amp_comm_check(amp_comm *c, amp_error *err)
{
#ifdef AMP_HAVE_NCCL
    if (c == NULL || c->nccl == NULL || c->aborted)
        return AMP_OK;
    ncclResult_t async = ncclSuccess;
    NCCL_TRY(ncclCommGetAsyncError(c->nccl, &async), err);
    if (async == ncclSuccess || async == ncclInProgress)
        NCCL_TRY(ncclCommGetAsyncError(c->rows, &async), err);
    if (async != ncclSuccess && async != ncclInProgress)
        return AMP_FAIL(err, AMP_ERR_CUDA, "NCCL (GPU %u of %u): %s", c->gpu, c->ngpus,
                        ncclGetErrorString(async));
#else
    (void)c, (void)err;
#endif
    return AMP_OK;
}
