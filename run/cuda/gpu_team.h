/* The GPUs of one run, one host thread a GPU, as CP-APR (apr.cu) and
 * completion (completion.cu) drive them: what their threads share, and
 * the pieces both take alike (CP-ALS's als_gpu.cu has its own, with
 * its per-mode overlap): the rows each GPU owns and where every GPU's sit
 * for amp_comm_allgatherv, polled waits that give up when a peer failed,
 * the first GPU's answer to o->stop published to the others, a failed
 * GPU's abort of its collectives, the wait before freeing, and the
 * threads started and their outcome put together. C++ (nvcc) only. */
#ifndef AMP_GPU_TEAM_H
#define AMP_GPU_TEAM_H

#include <cuda_runtime.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "amp_comm.h"
#include "amp_cuda.h"
#include "gpu_internal.h"

/* Under several processes the run's ngpus GPUs are every process's; this
 * one drives nlocal of them, GPUs first .. first + nlocal - 1 of the run,
 * comms indexed by their local number (NULL on one GPU). */
struct gpu_team {
    unsigned ngpus, nlocal, first;
    amp_comm *const *comms;
    std::atomic<int> failed{0};
    /* o->stop as the first GPU read it after iteration stop_iter (from
     * 1): the others wait for that answer, so all stop together. */
    std::atomic<unsigned> stop_iter{0};
    std::atomic<int> stop_now{0};
    /* This process's GPUs past their last collective (team_settle). */
    std::atomic<unsigned> quiet{0};
    std::mutex lock;
    int first_failed = -1;
    amp_status rc[AMP_MAX_GPUS];
    amp_error err[AMP_MAX_GPUS];
    double seconds[AMP_MAX_GPUS][AMP_NPHASES];
};

/* What one GPU knows of the run's rows: per mode the rows it owns (every
 * row on one GPU) and where every GPU's sit in the factor, in values
 * (amp_comm_allgatherv's offsets and counts). */
struct gpu_rows {
    uint64_t own_begin[AMP_MAX_MODES], own_rows[AMP_MAX_MODES];
    uint64_t gather_offset[AMP_MAX_MODES][AMP_MAX_GPUS], gather_count[AMP_MAX_MODES][AMP_MAX_GPUS];
};

/* GPU gpu's rows of each of g's modes at rank R (p NULL: one GPU). */
static inline void team_plan_rows(const amp_gpu_tensor *g, const amp_partition *p, unsigned gpu,
                                  unsigned ngpus, unsigned R, gpu_rows *r)
{
    for (unsigned m = 0; m < g->nmodes; m++) {
        r->own_begin[m] = p ? p->modes[m].row_begin[gpu] : 0;
        r->own_rows[m] = p ? p->modes[m].row_count[gpu] : g->rows[m];
        for (unsigned q = 0; q < ngpus; q++) {
            r->gather_offset[m][q] = (p ? p->modes[m].row_begin[q] : 0) * R;
            r->gather_count[m][q] = (p ? p->modes[m].row_count[q] : g->rows[m]) * R;
        }
    }
}

/* Until query() stops answering cudaErrorNotReady. On several GPUs never
 * blocked for good: a peer that failed leaves our collectives waiting, so
 * poll, and give up when any GPU of the process has failed or the
 * collectives' library reports an error (a GPU of another process gone). */
template <typename Q>
static amp_status team_poll(gpu_team *team, amp_comm *comm, unsigned gpu, Q query, amp_error *err)
{
    for (;;) {
        cudaError_t e = query();
        if (e == cudaSuccess)
            return AMP_OK;
        if (e != cudaErrorNotReady)
            return AMP_FAIL(err, AMP_ERR_CUDA, "GPU %u: %s", gpu, cudaGetErrorString(e));
        if (team->failed.load())
            return AMP_FAIL(err, AMP_ERR_CUDA, "GPU %u stopped: another GPU failed", gpu);
        AMP_CHECK(amp_comm_check(comm, err));
        std::this_thread::yield();
    }
}

/* Everything queued on s done (one GPU: simply waited for). */
static inline amp_status team_wait_stream(gpu_team *team, amp_comm *comm, unsigned gpu,
                                          cudaStream_t s, amp_error *err)
{
    if (team->ngpus == 1) {
        CUDA_TRY(cudaStreamSynchronize(s), err);
        return AMP_OK;
    }
    return team_poll(team, comm, gpu, [s] { return cudaStreamQuery(s); }, err);
}

static inline amp_status team_wait_event(gpu_team *team, amp_comm *comm, unsigned gpu,
                                         cudaEvent_t ev, amp_error *err)
{
    if (team->ngpus == 1) {
        CUDA_TRY(cudaEventSynchronize(ev), err);
        return AMP_OK;
    }
    return team_poll(team, comm, gpu, [ev] { return cudaEventQuery(ev); }, err);
}

/* Whether to stop after iteration iter, as *stop says to this process's
 * first GPU: it reads the flag and publishes its answer, and every other
 * GPU of the process waits for that (or for a failure), so that none goes
 * on into a collective the others left. */
static inline amp_status team_agree_stop(gpu_team *team, unsigned local, unsigned gpu,
                                         const volatile int *stop, unsigned iter, int *stop_now,
                                         amp_error *err)
{
    if (team->nlocal == 1) {
        *stop_now = *stop != 0;
        return AMP_OK;
    }
    if (local == 0) {
        team->stop_now.store(*stop != 0);
        team->stop_iter.store(iter);
    }
    while (team->stop_iter.load() < iter) {
        if (team->failed.load())
            return AMP_FAIL(err, AMP_ERR_CUDA, "GPU %u stopped: another GPU failed", gpu);
        std::this_thread::yield();
    }
    *stop_now = team->stop_now.load();
    return AMP_OK;
}

/* This GPU failed: say so first (so the report names it, not a peer that
 * stopped because of it), then cancel its collectives so that no peer
 * waits for it forever; the peers' threads see `failed` as they wait and
 * cancel theirs (als_gpu.cu's fail_gpu). */
static inline void team_fail(gpu_team *team, unsigned local)
{
    {
        std::lock_guard<std::mutex> hold(team->lock);
        if (team->first_failed < 0)
            team->first_failed = (int)local;
    }
    if (team->ngpus > 1) {
        team->failed.store(1);
        amp_comm_abort(team->comms[local]);
    }
}

/* After a failure, before this GPU's buffers go: on one GPU what was
 * queued ends first; rows by copies are this GPU's queued pulls of the
 * peers' buffers, which no abort takes back, so they end before any peer
 * frees. */
static inline void team_drain(gpu_team *team, unsigned local, cudaStream_t s)
{
    if (team->ngpus == 1 && s)
        cudaStreamSynchronize(s);
    if (team->ngpus > 1 && amp_comm_by_copies(team->comms[local]))
        cudaDeviceSynchronize();
}

/* This GPU is past its collectives; one that failed waits for the rest of
 * the process's GPUs before it frees anything (als_gpu.cu's settle). */
static inline void team_settle(gpu_team *team, int failed)
{
    team->quiet.fetch_add(1);
    while (failed && team->quiet.load() < team->nlocal)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
}

/* The whole run of this process's GPU local: its state W (calloc'ed; the
 * fields below set, the rest zero) made and run by go(w), then on failure
 * the run told and the device drained, this GPU settled, its phase times
 * kept in team->seconds, and w freed by release (which frees what go
 * made, whatever it reached). */
template <typename W, typename R, typename G>
static amp_status team_one_gpu(gpu_team *team, unsigned local, R *run, int f32,
                               amp_gpu_run_stats *stats, G go, void (*release)(W *),
                               amp_error *err)
{
    W *w = (W *)calloc(1, sizeof *w);
    if (w == NULL) {
        team_fail(team, local);
        team_settle(team, 1);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    w->run = run;
    w->local = local;
    w->gpu = team->first + local;
    w->ngpus = team->ngpus;
    w->comm = team->comms ? team->comms[local] : NULL;
    w->f32 = f32;
    w->stats = stats;
    const amp_status rc = go(w);
    if (rc != AMP_OK) {   /* before freeing: cudaFree waits for the device */
        team_fail(team, local);
        team_drain(team, local, w->s);
    }
    team_settle(team, rc != AMP_OK);
    memcpy(team->seconds[local], w->seconds, sizeof w->seconds);
    release(w);
    free(w);
    return rc;
}

/* one(local) on each of this process's GPUs, the caller's thread GPU 0's,
 * each leaving its outcome in team->rc and team->err (and failing through
 * team_fail); then the first failure as the run's, naming the GPU where
 * several ran (g: each local GPU's part), and c->seconds and
 * stats->phase from each GPU's team->seconds (the slowest GPU's time of
 * each phase). */
template <typename F>
static amp_status team_run(gpu_team *team, const amp_gpu_tensor *const *g, F one, amp_cpd *c,
                           amp_gpu_run_stats *stats, amp_error *err)
{
    const unsigned nlocal = team->nlocal;
    memset(team->rc, 0, sizeof team->rc);
    memset(team->err, 0, sizeof team->err);
    memset(team->seconds, 0, sizeof team->seconds);
    amp_status rc = AMP_OK;
    std::vector<std::thread> threads;
    try {
        for (unsigned i = 1; i < nlocal; i++)
            threads.emplace_back(one, i);
    } catch (...) {
        team->failed.store(1);
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "could not start a thread for each of %u GPUs",
                      nlocal);
    }
    if (rc == AMP_OK)
        one(0u);
    else {
        if (team->comms)
            amp_comm_abort(team->comms[0]);
        /* GPU 0 and those whose threads did not start are past their
         * collectives too: the started ones' settle must not wait. */
        team->quiet.fetch_add(nlocal - (unsigned)threads.size());
    }
    for (auto &th : threads)
        th.join();
    if (rc == AMP_OK && team->first_failed >= 0) {
        const int i = team->first_failed;
        const amp_error *e = &team->err[i];
        if (team->ngpus > 1)
            rc = amp_error_set(err, e->status, e->src_file, e->src_line, "GPU %u of the run "
                               "(device %d): %s", team->first + (unsigned)i, g[i]->device,
                               amp_error_message(e));
        else
            rc = amp_error_set(err, e->status, e->src_file, e->src_line, "%s",
                               amp_error_message(e));
    }
    if (rc == AMP_OK)
        for (unsigned i = 0; i < nlocal; i++)
            for (int ph = 0; ph < AMP_NPHASES; ph++) {
                c->seconds[ph] = team->seconds[i][ph] > c->seconds[ph] ? team->seconds[i][ph]
                                                                         : c->seconds[ph];
                if (stats)
                    stats->phase[i][ph] = team->seconds[i][ph];
            }
    return rc;
}

#endif
