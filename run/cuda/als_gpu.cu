/* CP-ALS on one GPU or several: the same algorithm, stopping rule and
 * outputs as the CPU backend (als.c), with every step on the devices.
 * Per mode d, on every GPU, for the rows it owns (all of them on one GPU):
 *
 *   V = Hadamard product of the other Grams    als_kernels.cu
 *   V's Cholesky factor (cuSOLVER potrf). V depends only on the other
 *       modes' Grams, so it is factored before the MTTKRP: the host
 *       reads potrf's status while the MTTKRP runs, and the GPU does not
 *       wait for the host
 *   M = MTTKRP(d)                          mttkrp.cu (f32 or f64 factors)
 *   two copies remapped: copy d + 1 written from copy d    remap.cu
 *       on a stream of its own, behind the steps below; the next
 *       MTTKRP waits for it (that wait counts as MTTKRP time)
 *     (equal-nnz ablation: partial M over every row, reduce-scattered)
 *   P = V^-1 (potri); if V is not positive definite, the pseudo-inverse
 *       from syevd (eigenvalues under R eps max|w| dropped)
 *   P scaled: rows by the other modes' column scales (the MTTKRP read
 *       unnormalized factors), columns by the scale A_d is stored at
 *   A_d = M P                              cublasDgemm
 *   several GPUs: A_d's rows sent to every other GPU (amp_comm, NCCL, on
 *       a stream and communicator of their own), while the steps below
 *       run; from the second iteration on
 *   column sums of squares, of A .* M, max |A|; summed (max) across GPUs
 *     (rank <= AMP_GPU_SOLVE_MAX_RANK: A_d, its f32 shadow and the column
 *     sums in one pass, als_solve.cu)
 *   lambda, and A_d's new column scale (A_d is rescaled in place only
 *       on the first iteration or where its scale moved more than
 *       2^(40/(N-1)), 2^20 on 3 modes: that pass over its rows was a
 *       sizeable share of an iteration, bench/RESULTS.md, "amped-run on
 *       one GPU")
 *   G_d = A_d^T A_d                        batched cublasDgemm, row chunks,
 *                                          summed across GPUs, scaled
 *   several GPUs, first iteration or --overlap: A_d's rows sent now
 *   several GPUs, sent early: a rescale lambda asked for is applied by
 *       every GPU to all of A_d's rows it holds once they are in, before
 *       the next mode's MTTKRP
 *
 * Several GPUs run one host thread each; the R x R work is repeated on
 * every GPU from the same summed inputs, so every GPU takes the same
 * decisions (pseudo-inverse, stopping) without asking the others.
 *
 * The R x R algebra and the factors are f64 whatever the MTTKRP precision,
 * as on the CPU. Only scalars cross to the host: the Cholesky status of
 * each mode (to choose the pseudo-inverse) and the two fit terms of each
 * iteration. Phase times are GPU time between events, read once an
 * iteration. The MTTKRP adds the few rows shared between warps with
 * atomics, so runs agree to rounding, not bit for bit.
 *
 * Several models on one GPU (amped-run --starts, --ranks;
 * amp_gpu_cpd_als_batch): each model has the state of a run alone and
 * its own stream, and goes through the same steps; only the MTTKRP is
 * shared, one a mode over every live model's columns side by side, its
 * output's columns copied to each model's M, and each model's updated
 * rows copied back beside the others' (pitched copies, rows x R a model
 * and mode, against the MTTKRP's pass over every nonzero). */
#include <config.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "als_kernels.h"
#include "amp_comm.h"
#include "amp_cuda.h"
#include "gpu_internal.h"

/* Events of one mode's update, in stream order. */
enum {
    EV_START, EV_FACTOR, EV_READY, EV_EARLY, EV_WAITED, EV_MTTKRP, EV_REDUCE, EV_INVERT, EV_SOLVE,
    EV_STATS, EV_STATS_COMM, EV_NORMALIZE, EV_GRAM, EV_GRAM_COMM, EV_PER_MODE
};

/* What the GPUs' threads share. Under several processes (group) the run's
 * ngpus GPUs are every process's; this one drives nlocal of them, GPUs
 * first .. first + nlocal - 1 of the run, and g, comms and every array
 * below indexed by GPU hold only those (by their local number). */
struct als_run {
    unsigned ngpus, nlocal, first;
    const amp_group *group;
    amp_gpu_tensor *const *g;
    amp_comm *const *comms;
    const amp_partition *p;
    const amp_tensor *t;
    const amp_cpd_opts *o;
    amp_gpu_als_opts go;   /* the GPU settings, defaults filled in */
    amp_cpd *c;
    std::atomic<int> failed{0};
    /* o->stop as the first GPU read it after iteration stop_iter (from 1):
     * the others wait for that answer, so that all stop together. */
    std::atomic<unsigned> stop_iter{0};
    std::atomic<int> stop_now{0};
    /* This process's GPUs past their last collective (or failed and
     * their communicator aborted): settle()'s count. */
    std::atomic<unsigned> quiet{0};
    std::mutex lock;
    int first_failed = -1;
    amp_status rc[AMP_MAX_GPUS];
    amp_error err[AMP_MAX_GPUS];
    /* Per GPU, per iteration and mode: seconds from the mode's start to
     * its first collective. */
    std::vector<double> reach[AMP_MAX_GPUS];
    double seconds[AMP_MAX_GPUS][AMP_NPHASES];
    amp_gpu_run_stats *stats;
    /* Several GPUs solving in parts: each mode's parts (1: whole), and
     * cuts[gpu][m], GPU gpu's row cuts of mode m (amp_gpu_tensor_cuts)
     * for every GPU of the run (plan_parts); NULL when no mode has parts. */
    unsigned parts[AMP_MAX_MODES];
    uint64_t (*cuts)[AMP_MAX_MODES][AMP_GPU_CUTS + 1] = nullptr;
};

typedef struct gpu_als {
    unsigned N, R;
    int f32;
    /* A constrained method (amp_method): its update replaces the solve,
     * on every factor kept normalized in place (scale_bound 1, so every
     * sig stays 1 and the MTTKRP's M is at the model's scale); U[m] is
     * AO-ADMM's dual of mode m (its owned rows used), rule[m] each mode's
     * constraint and penalties. */
    amp_method method;
    amp_mode_rule rule[AMP_MAX_MODES];
    double *U[AMP_MAX_MODES];
    double *rho;               /* AO-ADMM: rho of the mode being updated (device) */
    uint64_t max_rows;
    /* Multi-GPU: this GPU's index in the run (its place in the partition
     * and its NCCL rank) and among this process's GPUs (local: its place
     * in the run's arrays), the run's GPUs, its rows of each mode, and
     * how every GPU's rows sit in a factor (for the exchange, in
     * doubles). */
    als_run *run;
    amp_comm *comm;
    unsigned gpu, local, ngpus;
    int reduce;                /* equal-nnz: M is summed across GPUs */
    int overlap;               /* the parts' copies are in two groups */
    uint64_t own_begin[AMP_MAX_MODES], own_rows[AMP_MAX_MODES];
    uint64_t reduce_block[AMP_MAX_MODES];   /* rows of M each GPU receives */
    uint64_t *gather_offset[AMP_MAX_MODES], *gather_count[AMP_MAX_MODES];
    cudaStream_t s;
    /* Several GPUs: the updated rows of a mode go out on xs while s goes
     * on with the mode's statistics and Gram product (or, with overlap,
     * with the next mode's MTTKRP over the nonzeros that need none of
     * them: the part's first group). ex1[m] marks mode m's rows all in. */
    cudaStream_t xs;
    cudaEvent_t own_ready[AMP_MAX_MODES], ex0[AMP_MAX_MODES], ex1[AMP_MAX_MODES];
    /* Several GPUs, from the second iteration: mode m's MTTKRP runs in
     * parts[m] ranges of rows (1: whole); each range is solved on ps as
     * soon as it is done and sent on xs, while s goes on with the next
     * range. cuts: the run's (als_run); part k of K spans cuts k CUTS / K
     * to (k + 1) CUTS / K. */
    unsigned parts[AMP_MAX_MODES];
    /* How mode m's rows went out at its last update: in parts[m] parts,
     * 1 whole once solved, 0 at the end of the update (first iteration,
     * --overlap, one GPU). */
    unsigned sent_in[AMP_MAX_MODES];
    unsigned waves;            /* the ranges' MTTKRP blocks per block that fits */
    const uint64_t (*cuts)[AMP_MAX_MODES][AMP_GPU_CUTS + 1];
    cudaStream_t ps;
    cudaEvent_t part_done[AMP_GPU_CUTS], part_solved[AMP_GPU_CUTS];
    int ex_pending[AMP_MAX_MODES];   /* ex0..ex1 not yet added to the statistics */
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    double *A[AMP_MAX_MODES];
    float *A32[AMP_MAX_MODES];
    double *G[AMP_MAX_MODES];
    double *M;
    float *M32;
    double *V, *L, *P, *Qs, *w, *lambda, *inner, *partial, *totals, *fit_terms;
    /* The factors are stored unnormalized (als_kernels.cu, lambda_kernel):
     * mode m's normalized factor is A[m] sig[m] (column-wise), and pre[m]
     * is the scale its next update writes at; c the other modes' sig
     * product of the mode being updated. All in `scales`. */
    double *scales, *sig[AMP_MAX_MODES], *pre[AMP_MAX_MODES], *c;
    int *rescale;              /* per mode: its factor is normalized in place */
    /* Several GPUs, per mode: its rows went out before lambda_kernel
     * decided on a rescale, which each GPU then applies to all it holds
     * once they are in. */
    int sent_early[AMP_MAX_MODES];
    double scale_bound;        /* ... where a column's sig leaves [1/bound, bound] */
    double *work;
    int lwork;
    double *gram_partial;      /* gram_chunks + 1 matrices R x R */
    unsigned gram_chunks;
    int *info;
    /* Page-locked: a copy to pageable memory would block the thread until
     * the stream drains, where it could not see that a peer failed. */
    struct host_scratch {
        int info;
        int potri[AMP_MAX_MODES];
        double terms[2];
    } *host;
    cudaEvent_t ev[AMP_MAX_MODES][EV_PER_MODE], fit0, fit1;
    cudaEvent_t factored;      /* potrf's status is on the host */
} gpu_als;

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Row chunks of the Gram product: enough to fill the GPU, each at least
 * 4096 rows, their R x R partials within 32 MiB. */
static unsigned gram_chunks_max(unsigned R)
{
    size_t fit = ((size_t)1 << 25) / ((size_t)R * R * sizeof(double));
    return fit < 1 ? 1 : fit > 64 ? 64 : (unsigned)fit;
}

static void gpu_als_free(gpu_als *w)
{
    for (unsigned m = 0; m < w->N; m++) {
        free(w->gather_offset[m]);
        free(w->gather_count[m]);
        cudaFree(w->A[m]);
        cudaFree(w->A32[m]);
        cudaFree(w->U[m]);
        cudaFree(w->G[m]);
        for (int e = 0; e < EV_PER_MODE; e++)
            destroy_event(w->ev[m][e]);
        destroy_event(w->own_ready[m]);
        destroy_event(w->ex0[m]);
        destroy_event(w->ex1[m]);
    }
    for (int k = 0; k < AMP_GPU_CUTS; k++) {
        destroy_event(w->part_done[k]);
        destroy_event(w->part_solved[k]);
    }
    destroy_stream(w->ps);
    destroy_stream(w->xs);
    destroy_event(w->fit0);
    destroy_event(w->fit1);
    destroy_event(w->factored);
    void *p[] = {w->gram_partial, w->M, w->M32, w->V, w->L, w->P, w->Qs, w->w, w->lambda,
                 w->scales, w->inner, w->partial, w->totals, w->fit_terms, w->work, w->info,
                 w->rescale, w->rho};
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++)
        cudaFree(p[k]);
    if (w->host)
        cudaFreeHost(w->host);
    if (w->blas)
        cublasDestroy(w->blas);
    if (w->solver)
        cusolverDnDestroy(w->solver);
    destroy_stream(w->s);
}

/* Wait until query() stops answering cudaErrorNotReady (sync(), named
 * `what` in errors, waits for the same thing on one GPU). On several
 * GPUs, never block for good: a peer that failed leaves our collectives
 * waiting, so poll and give up when any GPU has failed or NCCL reports an
 * error. */
template <typename Sync, typename Query>
static amp_status wait_until(gpu_als *w, const char *what, Sync sync, Query query,
                             amp_error *err)
{
    if (w->ngpus == 1) {
        cudaError_t e = sync();
        if (e != cudaSuccess)
            return CUDA_FAIL(err, e, what);
        return AMP_OK;
    }
    for (;;) {
        cudaError_t e = query();
        if (e == cudaSuccess)
            return AMP_OK;
        if (e != cudaErrorNotReady)
            return AMP_FAIL(err, AMP_ERR_CUDA, "GPU %u: %s", w->gpu, cudaGetErrorString(e));
        if (w->run->failed.load())
            return AMP_FAIL(err, AMP_ERR_CUDA, "GPU %u stopped: another GPU failed", w->gpu);
        AMP_CHECK(amp_comm_check(w->comm, err));
        std::this_thread::yield();
    }
}

static amp_status wait_on(gpu_als *w, cudaStream_t s, amp_error *err)
{
    return wait_until(w, "cudaStreamSynchronize", [s] { return cudaStreamSynchronize(s); },
                      [s] { return cudaStreamQuery(s); }, err);
}

static amp_status wait_stream(gpu_als *w, amp_error *err)
{
    return wait_on(w, w->s, err);
}

static amp_status wait_event(gpu_als *w, cudaEvent_t e, amp_error *err)
{
    return wait_until(w, "cudaEventSynchronize", [e] { return cudaEventSynchronize(e); },
                      [e] { return cudaEventQuery(e); }, err);
}

static_assert(AMP_SEND_PARTS_MAX == AMP_GPU_CUTS, "a part is a range between cuts");

/* A part's MTTKRP runs on a grid that fits on the GPU at once. Grids of
 * 3 or 4 times that, whose blocks would free SMs for the transfer as they
 * finish, made the iterations slower, not faster (bench/RESULTS.md,
 * "amped-run on several GPUs", --send-parts). */
#define PART_WAVES 1

/* run->parts and run->cuts: every GPU must decide the same from the same
 * tables, since their sends pair. A process knows only its own GPUs'
 * cuts: under several, each fills its GPUs' slots of a table (zeros
 * elsewhere) that a sum over the processes completes. */
static amp_status plan_parts(als_run *run, amp_error *err)
{
    const amp_partition *p = run->p;
    const unsigned N = run->t->nmodes, G = run->ngpus;
    /* By default 2 parts where rows go by copies, which then take no
     * SMs from the next part's MTTKRP; by NCCL parts lose (bench/RESULTS.md,
     * issue 28). Every GPU of a run sends the same way, so all decide alike. */
    unsigned want = run->go.send_parts;
    if (want == 0)
        want = G > 1 && run->comms && amp_comm_by_copies(run->comms[0]) ? 2 : 1;
    want = want > AMP_GPU_CUTS ? AMP_GPU_CUTS : want < 1 ? 1 : want;
    for (unsigned m = 0; m < N; m++)
        run->parts[m] = 1;
    if (G < 2 || want < 2 || p == NULL || p->kind == AMP_PARTITION_EQUAL_NNZ || p->overlap ||
        run->o->rank > AMP_GPU_SOLVE_MAX_RANK || run->o->method != AMP_METHOD_ALS)
        return AMP_OK;
    /* Per GPU and mode: 1 where its copy is cut along its own rows, then
     * the cuts (row numbers, exact as doubles below 2^53). */
    const size_t per = AMP_GPU_CUTS + 2, n = (size_t)G * N * per;
    double *table = (double *)calloc(n, sizeof *table);
    run->cuts = (uint64_t(*)[AMP_MAX_MODES][AMP_GPU_CUTS + 1])calloc(G, sizeof *run->cuts);
    if (table == NULL || run->cuts == NULL) {
        free(table);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    for (unsigned k = 0; k < run->nlocal; k++) {
        const unsigned gpu = run->first + k;
        for (unsigned m = 0; m < N; m++) {
            uint64_t c[AMP_GPU_CUTS + 1];
            double *slot = table + ((size_t)gpu * N + m) * per;
            if (!amp_gpu_tensor_cuts(run->g[k], m, c) || c[0] != p->modes[m].row_begin[gpu] ||
                c[AMP_GPU_CUTS] != p->modes[m].row_begin[gpu] + p->modes[m].row_count[gpu])
                continue;
            slot[0] = 1;
            for (unsigned j = 0; j <= AMP_GPU_CUTS; j++)
                slot[1 + j] = (double)c[j];
        }
    }
    amp_status rc = AMP_OK;
    if (run->group && run->group->size > 1)
        rc = run->group->ops->allreduce(run->group->ctx, table, n, 0, err);
    for (unsigned m = 0; m < N && rc == AMP_OK; m++) {
        int able = 1;
        for (unsigned gpu = 0; gpu < G; gpu++) {
            const double *slot = table + ((size_t)gpu * N + m) * per;
            able &= slot[0] == 1;
            for (unsigned j = 0; j <= AMP_GPU_CUTS; j++)
                run->cuts[gpu][m][j] = (uint64_t)slot[1 + j];
        }
        if (able)
            run->parts[m] = want;
    }
    free(table);
    return rc;
}

/* Which rows of each mode this GPU owns, and where every GPU's rows sit
 * in a factor (gather_offset, gather_count, in values); *m_rows: the rows
 * of M (a reduce-scatter wants ngpus equal blocks). */
static amp_status plan_rows(const amp_gpu_tensor *g, const als_run *run, gpu_als *w,
                            uint64_t *m_rows, amp_error *err)
{
    const amp_partition *p = run->p;
    const unsigned R = w->R, gpu = w->gpu;
    for (unsigned m = 0; m < w->N; m++) {
        w->max_rows = g->rows[m] > w->max_rows ? g->rows[m] : w->max_rows;
        w->own_begin[m] = p ? p->modes[m].row_begin[gpu] : 0;
        w->own_rows[m] = p ? p->modes[m].row_count[gpu] : g->rows[m];
        w->reduce_block[m] = (g->rows[m] + run->ngpus - 1) / run->ngpus;
        uint64_t mr = w->reduce ? w->reduce_block[m] * run->ngpus : g->rows[m];
        *m_rows = mr > *m_rows ? mr : *m_rows;
        w->gather_offset[m] = (uint64_t *)malloc(run->ngpus * sizeof(uint64_t));
        w->gather_count[m] = (uint64_t *)malloc(run->ngpus * sizeof(uint64_t));
        if (w->gather_offset[m] == NULL || w->gather_count[m] == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        for (unsigned q = 0; q < run->ngpus; q++) {   /* every GPU's rows */
            w->gather_offset[m][q] = (p ? p->modes[m].row_begin[q] : 0) * R;
            w->gather_count[m][q] = (p ? p->modes[m].row_count[q] : g->rows[m]) * R;
        }
    }
    return AMP_OK;
}

/* The work stream, with cuBLAS and cuSOLVER on it. */
static amp_status create_handles(gpu_als *w, amp_error *err)
{
    amp_status rc = AMP_OK;
    CUDA_TRY_GOTO(cudaStreamCreateWithFlags(&w->s, cudaStreamNonBlocking), err, rc, done);
    CUBLAS_TRY_GOTO(cublasCreate(&w->blas), err, rc, done);
    CUBLAS_TRY_GOTO(cublasSetStream(w->blas, w->s), err, rc, done);
    CUSOLVER_TRY_GOTO(cusolverDnCreate(&w->solver), err, rc, done);
    CUSOLVER_TRY_GOTO(cusolverDnSetStream(w->solver, w->s), err, rc, done);
done:
    return rc;
}

/* Per mode: the factor (f64, and its f32 shadow in an f32 run), its Gram
 * and its events. */
static amp_status alloc_modes(const amp_gpu_tensor *g, gpu_als *w, amp_error *err)
{
    const unsigned R = w->R;
    for (unsigned m = 0; m < w->N; m++) {
        size_t n = (size_t)g->rows[m] * R;
        CUDA_TRY(cudaMalloc((void **)&w->A[m], n * sizeof(double) + 8), err);
        if (w->f32)
            CUDA_TRY(cudaMalloc((void **)&w->A32[m], n * sizeof(float) + 8), err);
        CUDA_TRY(cudaMalloc((void **)&w->G[m], (size_t)R * R * sizeof(double)), err);
        if (w->method == AMP_METHOD_ADMM) {   /* the dual starts at 0 */
            CUDA_TRY(cudaMalloc((void **)&w->U[m], n * sizeof(double) + 8), err);
            CUDA_TRY(cudaMemsetAsync(w->U[m], 0, n * sizeof(double), w->s), err);
        }
        for (int e = 0; e < EV_PER_MODE; e++)
            CUDA_TRY(cudaEventCreate(&w->ev[m][e]), err);
        CUDA_TRY(cudaEventCreateWithFlags(&w->own_ready[m], cudaEventDisableTiming), err);
        CUDA_TRY(cudaEventCreate(&w->ex0[m]), err);
        CUDA_TRY(cudaEventCreate(&w->ex1[m]), err);
    }
    return AMP_OK;
}

/* The streams of the rows' transfer (xs) and of the parts' solves (ps),
 * and the parts' events. */
static amp_status create_exchange(gpu_als *w, amp_error *err)
{
    /* The rows' transfer and the parts' solves go first where they and an
     * MTTKRP both wait for SMs. */
    int least = 0, greatest = 0;
    CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest), err);
    CUDA_TRY(cudaStreamCreateWithPriority(&w->xs, cudaStreamNonBlocking, greatest), err);
    CUDA_TRY(cudaStreamCreateWithPriority(&w->ps, cudaStreamNonBlocking, greatest), err);
    for (int k = 0; k < AMP_GPU_CUTS; k++) {
        CUDA_TRY(cudaEventCreateWithFlags(&w->part_done[k], cudaEventDisableTiming), err);
        CUDA_TRY(cudaEventCreateWithFlags(&w->part_solved[k], cudaEventDisableTiming), err);
    }
    return AMP_OK;
}

/* M (f64, f32 or both) of m_rows rows, the R x R and R-long scratch, the
 * column scales (all 1: the starting factors are taken as they are) and
 * the statistics' partials. */
static amp_status alloc_scratch(const amp_gpu_tensor *g, gpu_als *w, uint64_t m_rows,
                                amp_error *err)
{
    const unsigned R = w->R;
    const size_t rr = (size_t)R * R * sizeof(double);
    /* The f64 M: the MTTKRP's output in f64, and in f32 the solve's
     * input where the fused solve does not take the f32 M as it is. */
    if (!w->f32 || R > AMP_GPU_SOLVE_MAX_RANK || w->method != AMP_METHOD_ALS) {
        CUDA_TRY(cudaMalloc((void **)&w->M, (size_t)m_rows * R * sizeof(double) + 8), err);
        /* Rows past the tensor's (padding of the reduce-scatter) stay zero. */
        CUDA_TRY(cudaMemset(w->M, 0, (size_t)m_rows * R * sizeof(double)), err);
    }
    if (w->f32) {
        CUDA_TRY(cudaMalloc((void **)&w->M32, (size_t)m_rows * R * sizeof(float) + 8), err);
        CUDA_TRY(cudaMemset(w->M32, 0, (size_t)m_rows * R * sizeof(float)), err);
    }
    w->gram_chunks = gram_chunks_max(R);
    CUDA_TRY(cudaMalloc((void **)&w->gram_partial, (w->gram_chunks + 1) * rr), err);
    CUDA_TRY(cudaMalloc((void **)&w->V, rr), err);
    CUDA_TRY(cudaMalloc((void **)&w->L, rr), err);
    CUDA_TRY(cudaMalloc((void **)&w->P, rr), err);
    CUDA_TRY(cudaMalloc((void **)&w->Qs, rr), err);
    CUDA_TRY(cudaMalloc((void **)&w->w, R * sizeof(double)), err);
    CUDA_TRY(cudaMalloc((void **)&w->lambda, R * sizeof(double)), err);
    CUDA_TRY(cudaMalloc((void **)&w->scales, (2 * w->N + 1) * R * sizeof(double)), err);
    CUDA_TRY(cudaMalloc((void **)&w->rescale, AMP_MAX_MODES * sizeof(int)), err);
    for (unsigned m = 0; m < w->N; m++) {
        w->sig[m] = w->scales + (size_t)m * R;
        w->pre[m] = w->scales + (size_t)(w->N + m) * R;
    }
    w->c = w->scales + (size_t)2 * w->N * R;
    /* The other N - 1 modes' scales multiply an MTTKRP input by at most
     * 2^40 (an f32 M then overflows only for values past 1e26). */
    w->scale_bound = w->method != AMP_METHOD_ALS    ? 1
                     : w->run->go.rescale_bound > 0 ? w->run->go.rescale_bound
                                                    : exp2(40.0 / (w->N > 1 ? w->N - 1 : 1));
    /* lambda starts at 1: the constrained methods' first warm start. */
    CUDA_TRY(amp_gpu_fill(w->lambda, R, 1.0, w->s), err);
    CUDA_TRY(cudaMalloc((void **)&w->rho, sizeof(double)), err);
    /* The starting factors are taken as they are. */
    CUDA_TRY(amp_gpu_fill(w->scales, (size_t)2 * w->N * R, 1.0, w->s), err);
    CUDA_TRY(cudaMalloc((void **)&w->inner, R * sizeof(double)), err);
    CUDA_TRY(cudaMalloc((void **)&w->totals, 3 * R * sizeof(double)), err);
    /* (the parts' blocks add up to at most AMP_GPU_CUTS more) */
    CUDA_TRY(cudaMalloc((void **)&w->partial, ((size_t)amp_gpu_stats_blocks(w->max_rows,
                                               g->sm_count) + AMP_GPU_CUTS) * 3 * R *
                                              sizeof(double)),
             err);
    CUDA_TRY(cudaMalloc((void **)&w->fit_terms, 2 * sizeof(double)), err);
    return AMP_OK;
}

/* The solver's status words (device and page-locked host) and its work
 * space, the largest that potrf, potri and syevd ask for at R. */
static amp_status alloc_solver_work(gpu_als *w, amp_error *err)
{
    amp_status rc = AMP_OK;
    const unsigned R = w->R;
    int l1 = 0, l2 = 0, l3 = 0;
    /* [0]: potrf's status, read during the MTTKRP; [1 + m]: potri's for mode m,
     * read with the fit terms at the end of the iteration. */
    CUDA_TRY_GOTO(cudaMalloc((void **)&w->info, (1 + AMP_MAX_MODES) * sizeof(int)), err, rc,
                  done);
    CUDA_TRY_GOTO(cudaMemset(w->info, 0, (1 + AMP_MAX_MODES) * sizeof(int)), err, rc, done);
    CUDA_TRY_GOTO(cudaMallocHost((void **)&w->host, sizeof *w->host), err, rc, done);
    CUSOLVER_TRY_GOTO(cusolverDnDpotrf_bufferSize(w->solver, CUBLAS_FILL_MODE_LOWER, (int)R,
                                                  w->L, (int)R, &l1), err, rc, done);
    CUSOLVER_TRY_GOTO(cusolverDnDpotri_bufferSize(w->solver, CUBLAS_FILL_MODE_LOWER, (int)R,
                                                  w->L, (int)R, &l2), err, rc, done);
    CUSOLVER_TRY_GOTO(cusolverDnDsyevd_bufferSize(w->solver, CUSOLVER_EIG_MODE_VECTOR,
                                                  CUBLAS_FILL_MODE_LOWER, (int)R, w->L, (int)R,
                                                  w->w, &l3), err, rc, done);
    w->lwork = l1 > l2 ? l1 : l2;
    w->lwork = l3 > w->lwork ? l3 : w->lwork;
    CUDA_TRY_GOTO(cudaMalloc((void **)&w->work, ((size_t)w->lwork + 1) * sizeof(double)), err,
                  rc, done);
done:
    return rc;
}

/* The state of this process's GPU local for a run, all of it on g's
 * device; on failure what was made stays in w for gpu_als_free, which
 * the caller runs once the peers know of the failure. */
static amp_status gpu_als_new(const amp_gpu_tensor *g, const amp_cpd_opts *o, als_run *run,
                              unsigned local, gpu_als *w, amp_error *err)
{
    amp_status rc = AMP_OK;
    const amp_partition *p = run->p;
    uint64_t m_rows = 0;
    memset(w, 0, sizeof *w);
    w->N = g->nmodes;
    w->R = o->rank;
    w->f32 = o->precision == AMP_PRECISION_F32;
    w->method = o->method;
    AMP_CHECK_GOTO(amp_rules_resolve(o, w->N, w->rule, err), rc, done);
    w->run = run;
    w->local = local;
    w->gpu = run->first + local;
    w->ngpus = run->ngpus;
    w->comm = run->comms ? run->comms[local] : NULL;
    w->reduce = p && p->kind == AMP_PARTITION_EQUAL_NNZ && run->ngpus > 1;
    w->overlap = p && p->overlap && run->ngpus > 1;
    AMP_CHECK_GOTO(plan_rows(g, run, w, &m_rows, err), rc, done);
    CUDA_TRY_GOTO(cudaSetDevice(g->device), err, rc, done);
    AMP_CHECK_GOTO(create_handles(w, err), rc, done);
    AMP_CHECK_GOTO(alloc_modes(g, w, err), rc, done);
    AMP_CHECK_GOTO(create_exchange(w, err), rc, done);
    w->waves = PART_WAVES;
    w->cuts = run->cuts;
    memcpy(w->parts, run->parts, sizeof w->parts);
    CUDA_TRY_GOTO(cudaEventCreate(&w->fit0), err, rc, done);
    CUDA_TRY_GOTO(cudaEventCreate(&w->fit1), err, rc, done);
    CUDA_TRY_GOTO(cudaEventCreateWithFlags(&w->factored, cudaEventDisableTiming), err, rc, done);
    AMP_CHECK_GOTO(alloc_scratch(g, w, m_rows, err), rc, done);
    AMP_CHECK_GOTO(alloc_solver_work(w, err), rc, done);
    /* The scratch's memsets ran on the legacy stream, which w->s
     * (non-blocking) does not wait for: landed before any kernel. */
    CUDA_TRY_GOTO(cudaDeviceSynchronize(), err, rc, done);
done:   /* on failure the caller frees what was made (gpu_als_free) */
    return rc;
}

/* One array of each mode, for the kernels that take them all. */
static amp_mode_set mode_set(const gpu_als *w, double *const *arrays)
{
    amp_mode_set set;
    memset(&set, 0, sizeof set);
    set.n = w->N;
    for (unsigned m = 0; m < w->N; m++)
        set.a[m] = arrays[m];
    return set;
}

/* G = A^T A over rows [begin, begin + rows) of A[m]. With A row-major
 * rows x R, cuBLAS (column-major) sees A^T. One syrk or gemm over
 * millions of rows and a handful of columns ran at a few percent of the
 * memory bandwidth (cublasDsyrk: bench/RESULTS.md, "amped-run on one
 * GPU"); a strided batch of gemms over row chunks, summed in chunk order,
 * spreads the rows over the whole GPU. */
static amp_status gram(gpu_als *w, unsigned m, uint64_t begin, uint64_t rows, amp_error *err)
{
    amp_status rc = AMP_OK;
    const double one = 1, zero = 0;
    const unsigned R = w->R;
    if (rows == 0) {   /* a GPU that owns no row of this mode */
        CUDA_TRY(cudaMemsetAsync(w->G[m], 0, (size_t)R * R * sizeof(double), w->s), err);
        return AMP_OK;
    }
    const double *A = w->A[m] + begin * R;
    uint64_t S = rows / 4096;
    S = S < 1 ? 1 : S > w->gram_chunks ? w->gram_chunks : S;
    const uint64_t c = rows / S, tail = rows - c * S;
    const long long stride = (long long)(c * R), out_stride = (long long)R * R;
    CUBLAS_TRY_GOTO(cublasDgemmStridedBatched_64(w->blas, CUBLAS_OP_N, CUBLAS_OP_T, R, R,
                                                 (int64_t)c, &one, A, R, stride, A, R, stride,
                                                 &zero, w->gram_partial, R, out_stride,
                                                 (int64_t)S), err, rc, done);
    if (tail > 0) {
        const double *At = A + c * S * R;
        CUBLAS_TRY_GOTO(cublasDgemm_64(w->blas, CUBLAS_OP_N, CUBLAS_OP_T, R, R, (int64_t)tail,
                                       &one, At, R, At, R, &zero,
                                       w->gram_partial + S * R * R, R), err, rc, done);
    }
    CUDA_TRY_GOTO(amp_gpu_sum_matrices(w->gram_partial, (unsigned)(S + (tail > 0)), R, w->G[m],
                                       w->s), err, rc, done);
done:
    return rc;
}

/* V's Cholesky factor into L; its status is copied to the host, and
 * w->factored marks it there. */
static amp_status factor(gpu_als *w, amp_error *err)
{
    amp_status rc = AMP_OK;
    const unsigned R = w->R;
    const size_t rr = (size_t)R * R * sizeof(double);
    CUDA_TRY_GOTO(cudaMemcpyAsync(w->L, w->V, rr, cudaMemcpyDeviceToDevice, w->s), err, rc, done);
    CUSOLVER_TRY_GOTO(cusolverDnDpotrf(w->solver, CUBLAS_FILL_MODE_LOWER, (int)R, w->L, (int)R,
                                       w->work, w->lwork, w->info), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpyAsync(&w->host->info, w->info, sizeof(int), cudaMemcpyDeviceToHost,
                                  w->s), err, rc, done);
    CUDA_TRY_GOTO(cudaEventRecord(w->factored, w->s), err, rc, done);
done:
    return rc;
}

/* P = V^-1 from the factor (potri), or V's pseudo-inverse where the
 * factorization failed; *pinv says which. (potrs against the identity
 * instead of potri was no faster, and where V is singular to rounding but
 * potrf passes, as on a rank-deficient thin tensor, its inverse is other
 * noise than the CPU's potri and the runs part.) */
static amp_status invert(gpu_als *w, unsigned mode, int *pinv, amp_error *err)
{
    amp_status rc = AMP_OK;
    const unsigned R = w->R;
    const size_t rr = (size_t)R * R * sizeof(double);
    const double one = 1, zero = 0;
    int info = 0;
    AMP_CHECK_GOTO(wait_event(w, w->factored, err), rc, done);
    info = w->host->info;
    if (info < 0)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_INTERNAL, "cusolverDnDpotrf rejected argument %d",
                       -info);
    *pinv = info > 0;
    if (!*pinv) {
        CUSOLVER_TRY_GOTO(cusolverDnDpotri(w->solver, CUBLAS_FILL_MODE_LOWER, (int)R, w->L,
                                           (int)R, w->work, w->lwork, w->info + 1 + mode), err,
                          rc, done);
        CUDA_TRY_GOTO(amp_gpu_symmetrize(w->L, R, w->s), err, rc, done);
        CUDA_TRY_GOTO(cudaMemcpyAsync(w->P, w->L, rr, cudaMemcpyDeviceToDevice, w->s), err, rc,
                      done);
        return AMP_OK;
    }
    CUDA_TRY_GOTO(cudaMemcpyAsync(w->L, w->V, rr, cudaMemcpyDeviceToDevice, w->s), err, rc, done);
    CUSOLVER_TRY_GOTO(cusolverDnDsyevd(w->solver, CUSOLVER_EIG_MODE_VECTOR,
                                       CUBLAS_FILL_MODE_LOWER, (int)R, w->L, (int)R, w->w,
                                       w->work, w->lwork, w->info), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpyAsync(&w->host->info, w->info, sizeof info, cudaMemcpyDeviceToHost,
                                  w->s), err, rc, done);
    AMP_CHECK_GOTO(wait_stream(w, err), rc, done);
    info = w->host->info;
    if (info != 0)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_INTERNAL, "the eigensolver (cusolverDnDsyevd) "
                       "failed on the %ux%u Gram product (info %d)", R, R, info);
    /* P = Q diag(1/w) Q^T over the eigenvalues kept. */
    CUDA_TRY_GOTO(amp_gpu_pinv_scale(w->L, w->w, R, w->Qs, w->s), err, rc, done);
    CUBLAS_TRY_GOTO(cublasDgemm(w->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)R, (int)R, (int)R, &one,
                                w->Qs, (int)R, w->L, (int)R, &zero, w->P, (int)R),
                    err, rc, done);
done:
    return rc;
}

/* Mode m's last exchange time into the statistics once it is over
 * (block: wait for it). */
static amp_status settle_exchange(gpu_als *w, unsigned m, amp_error *err)
{
    if (!w->ex_pending[m])
        return AMP_OK;
    cudaError_t e = cudaEventQuery(w->ex1[m]);
    if (e == cudaErrorNotReady) {
        AMP_CHECK(wait_on(w, w->xs, err));
        e = cudaEventQuery(w->ex1[m]);
    }
    CUDA_TRY(e, err);
    float ms = 0;
    CUDA_TRY(cudaEventElapsedTime(&ms, w->ex0[m], w->ex1[m]), err);
    if (w->run->stats)
        w->run->stats->exchange[w->local][m] += ms / 1e3;
    w->ex_pending[m] = 0;
    return AMP_OK;
}

/* Mode d's rows, as s has them now, to every other GPU on xs: whole, or
 * (pieces > 1) in the calls parts_solve makes, so that a GPU that solved
 * whole still pairs its sends with those of GPUs that solved in parts. */
static amp_status send_rows(gpu_als *w, unsigned d, unsigned pieces, amp_error *err)
{
    amp_status rc = AMP_OK;
    uint64_t off[AMP_MAX_GPUS], cnt[AMP_MAX_GPUS];
    /* ex0/ex1 of the last round were read by now unless still pending */
    AMP_CHECK_GOTO(settle_exchange(w, d, err), rc, done);
    CUDA_TRY_GOTO(cudaEventRecord(w->own_ready[d], w->s), err, rc, done);
    CUDA_TRY_GOTO(cudaStreamWaitEvent(w->xs, w->own_ready[d], 0), err, rc, done);
    CUDA_TRY_GOTO(cudaEventRecord(w->ex0[d], w->xs), err, rc, done);
    /* f32: the MTTKRP reads only the f32 shadow of other GPUs' rows, so
     * only that travels (half the bytes); the f64 rows are gathered once,
     * at the end. */
    for (unsigned k = 0; k < pieces; k++) {
        const unsigned a = k * AMP_GPU_CUTS / pieces, b = (k + 1) * AMP_GPU_CUTS / pieces;
        for (unsigned gpu = 0; gpu < w->ngpus && pieces > 1; gpu++) {
            off[gpu] = w->cuts[gpu][d][a] * w->R;
            cnt[gpu] = (w->cuts[gpu][d][b] - w->cuts[gpu][d][a]) * w->R;
        }
        AMP_CHECK_GOTO(amp_comm_allgatherv(w->comm, w->f32 ? (void *)w->A32[d]
                                                           : (void *)w->A[d],
                                           w->f32, pieces > 1 ? off : w->gather_offset[d],
                                           pieces > 1 ? cnt : w->gather_count[d], w->xs, err),
                       rc, done);
    }
    CUDA_TRY_GOTO(cudaEventRecord(w->ex1[d], w->xs), err, rc, done);
    w->ex_pending[d] = 1;
done:
    return rc;
}

/* After mode d's MTTKRP was queued on s in w->parts[d] ranges, each
 * ending in part_done[k] (P ready before the first): each range solved on
 * ps once it is done, with its column statistics into blocks of its own
 * in w->partial, and sent on xs once solved; s then waits for the last
 * solve. *blocks gets the statistics' blocks. */
static amp_status parts_solve(const amp_gpu_tensor *g, gpu_als *w, unsigned d, unsigned *blocks,
                              amp_error *err)
{
    amp_status rc = AMP_OK;
    const unsigned R = w->R, K = w->parts[d];
    uint64_t off[AMP_MAX_GPUS], cnt[AMP_MAX_GPUS];
    unsigned total = 0;
    const unsigned most = (4u * (unsigned)g->sm_count + K - 1) / K;
    AMP_CHECK_GOTO(settle_exchange(w, d, err), rc, done);
    for (unsigned k = 0; k < K; k++) {
        const unsigned a = k * AMP_GPU_CUTS / K, b = (k + 1) * AMP_GPU_CUTS / K;
        const uint64_t r0 = w->cuts[w->gpu][d][a], rows = w->cuts[w->gpu][d][b] - r0;
        CUDA_TRY_GOTO(cudaStreamWaitEvent(w->ps, w->part_done[k], 0), err, rc, done);
        if (rows > 0) {
            uint64_t most_rows = rows / 64 + 1;
            const unsigned nb = (unsigned)(most_rows < most ? most_rows : most);
            const void *Mr = w->f32 ? (const void *)(w->M32 + r0 * R)
                                    : (const void *)(w->M + r0 * R);
            CUDA_TRY_GOTO(amp_gpu_solve_stats(Mr, w->f32, w->P, rows, R, nb, w->A[d] + r0 * R,
                                              w->f32 ? w->A32[d] + r0 * R : NULL,
                                              w->partial + (size_t)total * 3 * R, w->ps), err,
                          rc, done);
            total += nb;
        }
        CUDA_TRY_GOTO(cudaEventRecord(w->part_solved[k], w->ps), err, rc, done);
        CUDA_TRY_GOTO(cudaStreamWaitEvent(w->xs, w->part_solved[k], 0), err, rc, done);
        if (k == 0)
            CUDA_TRY_GOTO(cudaEventRecord(w->ex0[d], w->xs), err, rc, done);
        for (unsigned gpu = 0; gpu < w->ngpus; gpu++) {
            off[gpu] = w->cuts[gpu][d][a] * R;
            cnt[gpu] = (w->cuts[gpu][d][b] - w->cuts[gpu][d][a]) * R;
        }
        AMP_CHECK_GOTO(amp_comm_allgatherv(w->comm, w->f32 ? (void *)w->A32[d]
                                                           : (void *)w->A[d],
                                           w->f32, off, cnt, w->xs, err), rc, done);
    }
    CUDA_TRY_GOTO(cudaEventRecord(w->ex1[d], w->xs), err, rc, done);
    w->ex_pending[d] = 1;
    CUDA_TRY_GOTO(cudaStreamWaitEvent(w->s, w->part_solved[K - 1], 0), err, rc, done);
    if (total == 0) {   /* no row here: one block of zero statistics */
        CUDA_TRY_GOTO(cudaMemsetAsync(w->partial, 0, 3 * R * sizeof(double), w->s), err, rc,
                      done);
        total = 1;
    }
    *blocks = total;
done:
    return rc;
}

/* What the update of one mode decides before it starts, for its steps
 * (update_mode). */
struct mode_update {
    unsigned d, prev;          /* the mode, and the one updated before it */
    int first;                 /* the first iteration */
    uint64_t rb, nown;         /* the rows of mode d this GPU owns */
    cudaEvent_t *ev;           /* ev[EV_...] of mode d */
    void *F[AMP_MAX_MODES];    /* the MTTKRP's factors: f32 shadows or f64 */
    void *Mk;                  /* the MTTKRP's output, f32 or f64 */
    /* Ranks up to AMP_GPU_SOLVE_MAX_RANK solve and take the column
     * statistics in one pass, from the f32 M as it is (als_solve.cu). */
    int fused;
    /* Several GPUs send a mode's rows as soon as they are solved, while
     * the column statistics and the Gram are taken; where lambda_kernel
     * then asks for a rescale (rarely), every GPU applies it to all the
     * rows it holds once they are in, before the next MTTKRP. Not on the
     * first iteration, which always rescales (before sending), nor where
     * the next MTTKRP starts on local rows before the others' are in
     * (overlap): those must not change under it. */
    int early_send;
    /* ... and, where the mode is cut into parts, range by range as its
     * MTTKRP finishes each (parts_solve). That needs P before the
     * MTTKRP: V^-1 is taken from the factor before the host knows whether
     * the factorization held; where it did not (rarely), the mode is
     * solved whole from the pseudo-inverse after the MTTKRP instead
     * (fell_back). */
    int in_parts, fell_back;
    unsigned blocks;           /* of the column statistics in w->partial */
};

static void plan_update(const amp_gpu_tensor *g, gpu_als *w, unsigned d, int first,
                        mode_update *u)
{
    u->d = d;
    u->prev = (d + w->N - 1) % w->N;
    u->first = first;
    u->rb = w->own_begin[d];
    u->nown = w->own_rows[d];
    u->ev = w->ev[d];
    for (unsigned m = 0; m < w->N; m++)
        u->F[m] = w->f32 ? (void *)w->A32[m] : (void *)w->A[m];
    u->Mk = w->f32 ? (void *)w->M32 : (void *)w->M;
    u->fused = w->R <= AMP_GPU_SOLVE_MAX_RANK && w->method == AMP_METHOD_ALS;
    u->early_send = w->ngpus > 1 && !first && !w->overlap;
    u->in_parts = u->early_send && u->fused && w->parts[d] > 1;
    u->fell_back = 0;
    u->blocks = amp_gpu_stats_blocks(u->nown, g->sm_count);
}

/* V, the Hadamard product of the other modes' Grams, and its Cholesky
 * factor; solving in parts, P = V^-1 from it already. */
static amp_status factor_mode(gpu_als *w, const mode_update *u, amp_error *err)
{
    amp_status rc = AMP_OK;
    const unsigned R = w->R;
    const amp_mode_set gs = mode_set(w, w->G);
    CUDA_TRY_GOTO(cudaEventRecord(u->ev[EV_START], w->s), err, rc, done);
    CUDA_TRY_GOTO(amp_gpu_hadamard(&gs, u->d, R, w->V, w->s), err, rc, done);
    if (w->method == AMP_METHOD_ALS)
        AMP_CHECK_GOTO(factor(w, err), rc, done);
    if (u->in_parts) {
        CUSOLVER_TRY_GOTO(cusolverDnDpotri(w->solver, CUBLAS_FILL_MODE_LOWER, (int)R, w->L,
                                           (int)R, w->work, w->lwork, w->info + 1 + u->d), err,
                          rc, done);
        CUDA_TRY_GOTO(amp_gpu_symmetrize(w->L, R, w->s), err, rc, done);
        CUDA_TRY_GOTO(cudaMemcpyAsync(w->P, w->L, (size_t)R * R * sizeof(double),
                                      cudaMemcpyDeviceToDevice, w->s), err, rc, done);
    }
    CUDA_TRY_GOTO(cudaEventRecord(u->ev[EV_FACTOR], w->s), err, rc, done);
done:
    return rc;
}

/* The MTTKRP's inputs ready: the rows of the mode before, and where they
 * were sent early, the rescale lambda_kernel asked of them; solving in
 * parts, the scales folded into P (after that rescale, which may change
 * them). */
static amp_status inputs_ready(const amp_gpu_tensor *g, gpu_als *w, const mode_update *u,
                               amp_error *err)
{
    const unsigned R = w->R, prev = u->prev;
    if (w->ngpus > 1 && !w->overlap)   /* every nonzero may need the rows in transit */
        CUDA_TRY(cudaStreamWaitEvent(w->s, w->ex1[prev], 0), err);
    if (w->sent_early[prev]) {   /* counted with the wait for them */
        const uint64_t pr = g->rows[prev];
        /* f32: the other GPUs' f64 rows are not current here, only the shadows */
        CUDA_TRY(amp_gpu_rescale_sent(w->f32 ? w->A[prev] + w->own_begin[prev] * R
                                             : w->A[prev],
                                      w->f32 ? w->own_rows[prev] : pr,
                                      w->f32 ? w->A32[prev] : NULL, pr, R, w->sig[prev],
                                      w->rescale + prev, w->s), err);
        w->sent_early[prev] = 0;
    }
    if (u->in_parts) {
        const amp_mode_set ss = mode_set(w, w->sig);
        CUDA_TRY(amp_gpu_fold_scales(&ss, u->d, R, w->pre[u->d], w->P, w->c, w->s), err);
    }
    CUDA_TRY(cudaEventRecord(u->ev[EV_READY], w->s), err);
    return AMP_OK;
}

/* M = MTTKRP(d): in parts, range by range, while the host learns whether
 * potrf held (if not, u->in_parts goes to 0 and u->fell_back to 1); else
 * the nonzeros that need no other GPU's rows first, then, once those rows
 * are in, the rest. */
static amp_status mode_mttkrp(const amp_gpu_tensor *g, gpu_als *w, mode_update *u,
                              amp_error *err)
{
    const unsigned R = w->R, d = u->d;
    if (u->in_parts) {
        for (unsigned k = 0; k < w->parts[d]; k++) {
            const unsigned a = k * AMP_GPU_CUTS / w->parts[d];
            const unsigned b = (k + 1) * AMP_GPU_CUTS / w->parts[d];
            AMP_CHECK(amp_gpu_mttkrp_cuts(g, d, u->F, R, w->f32, u->Mk, a, b, w->waves, w->s,
                                          err));
            CUDA_TRY(cudaEventRecord(w->part_done[k], w->s), err);
        }
        AMP_CHECK(wait_event(w, w->factored, err));
        if (w->host->info < 0)
            return AMP_FAIL(err, AMP_ERR_INTERNAL, "cusolverDnDpotrf rejected argument %d",
                            -w->host->info);
        if (w->host->info > 0) {   /* the whole mode from the pseudo-inverse, below */
            u->in_parts = 0;
            u->fell_back = 1;
            CUDA_TRY(cudaMemsetAsync(w->info + 1 + d, 0, sizeof(int), w->s), err);
        }
    } else {
        AMP_CHECK(amp_gpu_mttkrp_group(g, d, u->F, R, w->f32, u->Mk, AMP_GPU_EARLY, w->s, err));
    }
    CUDA_TRY(cudaEventRecord(u->ev[EV_EARLY], w->s), err);
    if (w->ngpus > 1)   /* the other GPUs' rows of the mode before */
        CUDA_TRY(cudaStreamWaitEvent(w->s, w->ex1[u->prev], 0), err);
    CUDA_TRY(cudaEventRecord(u->ev[EV_WAITED], w->s), err);
    if (!u->in_parts && !(u->early_send && u->fused && w->parts[d] > 1))
        AMP_CHECK(amp_gpu_mttkrp_group(g, d, u->F, R, w->f32, u->Mk, AMP_GPU_LATE, w->s, err));
    return AMP_OK;
}

/* Solved in parts (parts_solve): the MTTKRP ends at the last range, and
 * the solve's share is what runs after it. */
static amp_status solve_in_parts(const amp_gpu_tensor *g, gpu_als *w, mode_update *u,
                                 amp_error *err)
{
    CUDA_TRY(cudaEventRecord(u->ev[EV_MTTKRP], w->s), err);
    CUDA_TRY(cudaEventRecord(u->ev[EV_REDUCE], w->s), err);
    CUDA_TRY(cudaEventRecord(u->ev[EV_INVERT], w->s), err);
    AMP_CHECK(parts_solve(g, w, u->d, &u->blocks, err));
    CUDA_TRY(cudaEventRecord(u->ev[EV_SOLVE], w->s), err);
    return AMP_OK;
}

/* After mode d's MTTKRP: its rows this GPU owns, summed across GPUs
 * (equal-nnz) and, where the next step reads f64 from an f32 MTTKRP (not
 * the fused solve), converted; between EV_MTTKRP, EV_REDUCE and on. */
static amp_status own_m(gpu_als *w, const mode_update *u, amp_error *err)
{
    const unsigned R = w->R, d = u->d;
    const uint64_t rb = u->rb, nown = u->nown;
    CUDA_TRY(cudaEventRecord(u->ev[EV_MTTKRP], w->s), err);
    if (w->reduce)   /* equal-nnz: every GPU's partial rows, summed */
        AMP_CHECK(amp_comm_reduce_scatter(w->comm, w->f32 ? (void *)w->M32 : (void *)w->M,
                                          w->reduce_block[d] * R, w->f32, w->s, err));
    CUDA_TRY(cudaEventRecord(u->ev[EV_REDUCE], w->s), err);
    if (w->f32 && nown > 0 && !u->fused)
        CUDA_TRY(amp_gpu_to_f64(w->M32 + rb * R, w->M + rb * R, nown * R, w->s), err);
    return AMP_OK;
}

/* Solved whole: M summed across GPUs (equal-nnz), P = V^-1 or the
 * pseudo-inverse with the scales folded in, A_d = M P and the column
 * statistics (fused, or cuBLAS and column_stats), and the rows sent when
 * they go early. */
static amp_status solve_whole(gpu_als *w, const mode_update *u, int *pinv_used, amp_error *err)
{
    amp_status rc = AMP_OK;
    const unsigned R = w->R, d = u->d;
    const uint64_t rb = u->rb, nown = u->nown;
    const double one = 1, zero = 0;
    const amp_mode_set ss = mode_set(w, w->sig);
    double *Mown = w->M ? w->M + rb * R : NULL, *Aown = w->A[d] + rb * R;
    const void *Mk_own = w->f32 ? (const void *)(w->M32 + rb * R) : (const void *)Mown;
    int pinv = 0;
    AMP_CHECK_GOTO(own_m(w, u, err), rc, done);

    AMP_CHECK_GOTO(invert(w, d, &pinv, err), rc, done);
    if (pinv)
        *pinv_used = 1;
    /* The MTTKRP's inputs lacked their scales and the stored factor is
     * to be written at pre: both go into P, so no pass over rows does
     * it. */
    CUDA_TRY_GOTO(amp_gpu_fold_scales(&ss, d, R, w->pre[d], w->P, w->c, w->s), err, rc, done);
    CUDA_TRY_GOTO(cudaEventRecord(u->ev[EV_INVERT], w->s), err, rc, done);
    if (u->fused) {
        CUDA_TRY_GOTO(amp_gpu_solve_stats(Mk_own, w->f32, w->P, nown, R, u->blocks, Aown,
                                          w->f32 ? w->A32[d] + rb * R : NULL, w->partial,
                                          w->s), err, rc, done);
        CUDA_TRY_GOTO(cudaEventRecord(u->ev[EV_SOLVE], w->s), err, rc, done);
        if (u->early_send)
            AMP_CHECK_GOTO(send_rows(w, d, u->fell_back ? w->parts[d] : 1, err), rc, done);
    } else {
        /* Row-major A = M P is, column-major, A^T = P^T M^T, and cuBLAS
         * reads the row-major P as P^T. */
        if (nown > 0)
            CUBLAS_TRY_GOTO(cublasDgemm_64(w->blas, CUBLAS_OP_N, CUBLAS_OP_N, R, (int64_t)nown,
                                           R, &one, w->P, R, Mown, R, &zero, Aown, R), err, rc,
                            done);
        CUDA_TRY_GOTO(cudaEventRecord(u->ev[EV_SOLVE], w->s), err, rc, done);
        CUDA_TRY_GOTO(amp_gpu_column_stats(Aown, Mown, nown, R, u->blocks, w->partial, w->s),
                      err, rc, done);
        if (w->f32 && nown > 0)
            CUDA_TRY_GOTO(amp_gpu_to_f32(Aown, w->A32[d] + rb * R, nown * R, w->s), err, rc,
                          done);
        if (u->early_send)
            AMP_CHECK_GOTO(send_rows(w, d, 1, err), rc, done);
    }
done:
    return rc;
}

/* A constrained method's update of the rows this GPU owns, in place of
 * the solve. Every factor is kept normalized in place (scale_bound 1), so
 * every sig is 1 and M is the true MTTKRP; the rows start at the model's
 * scale (lambda, which the last update set, into their columns and their
 * dual's, as the update kernel reads them); AO-ADMM factors V + rho I (potrf's and potri's status read
 * with the fit terms); then the method's kernel (constrained.cu), the
 * column statistics of the new rows, and their f32 shadow. pre_d is 1:
 * the rows are at the true scale, not at 1 / lambda as a solve writes. */
static amp_status update_constrained(const amp_gpu_tensor *g, gpu_als *w, const mode_update *u,
                                     amp_error *err)
{
    amp_status rc = AMP_OK;
    const unsigned R = w->R, d = u->d;
    const uint64_t rb = u->rb, nown = u->nown;
    double *Mown = w->M + rb * R, *Aown = w->A[d] + rb * R;
    double *Uown = w->U[d] ? w->U[d] + rb * R : NULL;
    AMP_CHECK_GOTO(own_m(w, u, err), rc, done);
    if (w->method == AMP_METHOD_ADMM && u->first && d == 0) {
        /* the CPU's start_scale (als.c): <X, model> from this first M,
         * summed across GPUs */
        CUDA_TRY_GOTO(amp_gpu_column_stats(Aown, Mown, nown, R, u->blocks, w->partial, w->s),
                      err, rc, done);
        CUDA_TRY_GOTO(amp_gpu_column_totals(w->partial, u->blocks, R, w->totals, w->s), err,
                      rc, done);
        AMP_CHECK_GOTO(amp_comm_allreduce(w->comm, w->totals, 2 * R, 0, w->s, err), rc, done);
        CUDA_TRY_GOTO(amp_gpu_start_scale(w->totals + R, w->G[0], w->V, R, w->lambda, w->s),
                      err, rc, done);
    }
    if (w->method == AMP_METHOD_ADMM) {
        CUDA_TRY_GOTO(amp_gpu_admm_shift(w->V, R, w->rho, w->L, w->s), err, rc, done);
        CUSOLVER_TRY_GOTO(cusolverDnDpotrf(w->solver, CUBLAS_FILL_MODE_LOWER, (int)R, w->L,
                                           (int)R, w->work, w->lwork, w->info + 1 + d), err,
                          rc, done);
        /* potri's status where it cannot hide potrf's */
        CUSOLVER_TRY_GOTO(cusolverDnDpotri(w->solver, CUBLAS_FILL_MODE_LOWER, (int)R, w->L,
                                           (int)R, w->work, w->lwork, w->info), err, rc, done);
        CUDA_TRY_GOTO(amp_gpu_symmetrize(w->L, R, w->s), err, rc, done);
    }
    CUDA_TRY_GOTO(amp_gpu_fill(w->pre[d], R, 1.0, w->s), err, rc, done);
    CUDA_TRY_GOTO(amp_gpu_fill(w->c, R, 1.0, w->s), err, rc, done);
    CUDA_TRY_GOTO(cudaEventRecord(u->ev[EV_INVERT], w->s), err, rc, done);
    {
        amp_gpu_update up;
        memset(&up, 0, sizeof up);
        up.method = w->method;
        up.rule = w->rule[d];
        up.rank = R;
        up.inner = w->run->o->admm_inner;
        up.admm_tol = w->run->o->admm_tol;
        up.V = w->V;
        up.P = w->L;
        up.rho = w->rho;
        /* the warm start: the rows (and U) at lambda's scale, read so */
        up.scale = w->lambda;
        up.sm_count = g->sm_count;
        CUDA_TRY_GOTO(amp_gpu_update_rows(&up, Mown, Aown, Uown, nown, w->s), err, rc, done);
    }
    CUDA_TRY_GOTO(cudaEventRecord(u->ev[EV_SOLVE], w->s), err, rc, done);
    CUDA_TRY_GOTO(amp_gpu_column_stats(Aown, Mown, nown, R, u->blocks, w->partial, w->s), err,
                  rc, done);
    if (w->f32 && nown > 0)
        CUDA_TRY_GOTO(amp_gpu_to_f32(Aown, w->A32[d] + rb * R, nown * R, w->s), err, rc, done);
    if (u->early_send)
        AMP_CHECK_GOTO(send_rows(w, d, 1, err), rc, done);
done:
    return rc;
}

/* The column statistics summed across GPUs, lambda and the new column
 * scale; A_d rescaled in place where lambda_kernel asks (or, sent early,
 * later, by every GPU on all the rows it holds). */
static amp_status normalize_mode(gpu_als *w, const mode_update *u, amp_error *err)
{
    const unsigned R = w->R, d = u->d;
    CUDA_TRY(amp_gpu_column_totals(w->partial, u->blocks, R, w->totals, w->s), err);
    CUDA_TRY(cudaEventRecord(u->ev[EV_STATS], w->s), err);
    AMP_CHECK(amp_comm_allreduce(w->comm, w->totals, 2 * R, 0, w->s, err));
    AMP_CHECK(amp_comm_allreduce(w->comm, w->totals + 2 * R, R, 1, w->s, err));
    CUDA_TRY(cudaEventRecord(u->ev[EV_STATS_COMM], w->s), err);
    CUDA_TRY(amp_gpu_lambda(w->totals, R, u->first, w->c, w->pre[d], w->lambda, w->sig[d],
                            w->inner, w->rescale + d, w->scale_bound, w->s), err);
    /* AO-ADMM's dual is in its factor's units: it takes the factor's new
     * scale (every constrained update is normalized in place). */
    if (w->U[d] && u->nown > 0)
        CUDA_TRY(amp_gpu_scale_columns(w->U[d] + u->rb * R, u->nown, R, w->sig[d], w->s), err);
    /* Sent early: the Gram below is of the rows as they are, scaled by
     * sig_d as it is, the same product as after a rescale. */
    if (u->early_send)
        w->sent_early[d] = 1;
    else
        CUDA_TRY(amp_gpu_rescale(w->A[d] + u->rb * R, w->f32 ? w->A32[d] + u->rb * R : NULL,
                                 u->nown, R, w->sig[d], w->rescale + d, w->s), err);
    CUDA_TRY(cudaEventRecord(u->ev[EV_NORMALIZE], w->s), err);
    return AMP_OK;
}

/* G_d, summed across GPUs and made the normalized factor's; then the rows
 * to the other GPUs, where they did not go early. */
static amp_status gram_mode(gpu_als *w, const mode_update *u, amp_error *err)
{
    const unsigned R = w->R, d = u->d;
    AMP_CHECK(gram(w, d, u->rb, u->nown, err));
    CUDA_TRY(cudaEventRecord(u->ev[EV_GRAM], w->s), err);
    AMP_CHECK(amp_comm_allreduce(w->comm, w->G[d], (size_t)R * R, 0, w->s, err));
    /* The Gram of the stored rows, made the normalized factor's. */
    CUDA_TRY(amp_gpu_scale_gram(w->G[d], w->sig[d], R, w->s), err);
    CUDA_TRY(cudaEventRecord(u->ev[EV_GRAM_COMM], w->s), err);
    if (w->ngpus > 1 && !u->early_send)
        AMP_CHECK(send_rows(w, d, 1, err));
    return AMP_OK;
}

/* Mode u->d's update once its MTTKRP is queued: the solve (or the
 * constrained update), lambda and the column scales, the Gram. A batch
 * of models (amp_gpu_cpd_als_batch) runs this for each after their shared
 * MTTKRP. */
static amp_status update_after_mttkrp(const amp_gpu_tensor *g, gpu_als *w, mode_update *u,
                                      int *pinv_used, amp_error *err)
{
    if (w->method != AMP_METHOD_ALS)
        AMP_CHECK(update_constrained(g, w, u, err));
    else if (u->in_parts)
        AMP_CHECK(solve_in_parts(g, w, u, err));
    else
        AMP_CHECK(solve_whole(w, u, pinv_used, err));
    AMP_CHECK(normalize_mode(w, u, err));
    AMP_CHECK(gram_mode(w, u, err));
    w->sent_in[u->d] = u->in_parts ? w->parts[u->d] : u->early_send ? 1 : 0;
    return AMP_OK;
}

/* Mode d's update, queued on w->s (and xs, ps): the steps in the file's
 * opening comment, each between events of ev[d]. */
static amp_status update_mode(const amp_gpu_tensor *g, gpu_als *w, unsigned d, int first,
                              int *pinv_used, amp_error *err)
{
    mode_update u;
    plan_update(g, w, d, first, &u);
    AMP_CHECK(factor_mode(w, &u, err));
    AMP_CHECK(inputs_ready(g, w, &u, err));
    if (g->remap)   /* the MTTKRP writes the next copy, where it can */
        gpu_remap_fuse_next(g, d);
    amp_status rc = mode_mttkrp(g, w, &u, err);
    if (rc != AMP_OK) {
        if (g->remap)
            gpu_remap_fuse_abort(g);
        return rc;
    }
    if (g->remap)
        AMP_CHECK(gpu_remap_ahead(g, d, w->s, err));
    return update_after_mttkrp(g, w, &u, pinv_used, err);
}

/* GPU time of each phase of the last iteration into seconds; per mode
 * into the run's statistics of this GPU. */
static amp_status add_phase_times(gpu_als *w, double *seconds, amp_error *err)
{
    amp_status rc = AMP_OK;
    float ms;
    static const int phase_of[EV_PER_MODE] = {
        0, AMP_PHASE_SOLVE, AMP_PHASE_COMM, AMP_PHASE_MTTKRP, AMP_PHASE_COMM, AMP_PHASE_MTTKRP,
        AMP_PHASE_COMM, AMP_PHASE_SOLVE, AMP_PHASE_SOLVE, AMP_PHASE_NORMALIZE, AMP_PHASE_COMM,
        AMP_PHASE_NORMALIZE, AMP_PHASE_GRAM, AMP_PHASE_COMM};
    amp_gpu_run_stats *st = w->run->stats;
    for (unsigned m = 0; m < w->N; m++) {
        double reach = 0;
        for (int e = EV_START + 1; e < EV_PER_MODE; e++) {
            CUDA_TRY_GOTO(cudaEventElapsedTime(&ms, w->ev[m][e - 1], w->ev[m][e]), err, rc, done);
            const double sec = ms / 1e3;
            int ph = phase_of[e];
            if (ph == AMP_PHASE_SOLVE && w->method != AMP_METHOD_ALS)
                ph = AMP_PHASE_UPDATE;
            seconds[ph] += sec;
            /* Computing until the first collective (the reduce-scatter,
             * else the norms); waiting for rows is not computing. */
            if (e <= (w->reduce ? EV_MTTKRP : EV_STATS) && e != EV_WAITED && e != EV_READY)
                reach += sec;
            if (st) {
                if (phase_of[e] == AMP_PHASE_MTTKRP)
                    st->mttkrp[w->local][m] += sec;
                if (phase_of[e] == AMP_PHASE_COMM)
                    st->comm[w->local][m] += sec;
                else
                    st->busy[w->local][m] += sec;
            }
        }
        w->run->reach[w->local].push_back(reach);
        if (w->ngpus > 1 && w->ex_pending[m] && cudaEventQuery(w->ex1[m]) == cudaSuccess)
            AMP_CHECK_GOTO(settle_exchange(w, m, err), rc, done);
    }
    CUDA_TRY_GOTO(cudaEventElapsedTime(&ms, w->fit0, w->fit1), err, rc, done);
    seconds[AMP_PHASE_FIT] += ms / 1e3;
done:
    return rc;
}

/* This GPU failed: say so first (so the report names it, not a peer that
 * stopped because of it), then cancel its collectives so that no peer
 * waits for it forever; the peers' threads see `failed` as they wait and
 * cancel theirs. */
static void fail_gpu(als_run *run, unsigned local)
{
    {
        std::lock_guard<std::mutex> hold(run->lock);
        if (run->first_failed < 0)
            run->first_failed = (int)local;
    }
    if (run->ngpus > 1) {
        run->failed.store(1);
        amp_comm_abort(run->comms[local]);
    }
}

/* This GPU is past its collectives. One that failed waits for the rest of
 * the process's GPUs before it frees anything: cudaFree and cudaFreeHost
 * wait for devices whose queues may still hold collectives that wait for
 * this one, and the peers' threads cancel them only once they have seen
 * the failure. */
static void settle(als_run *run, int failed)
{
    run->quiet.fetch_add(1);
    while (failed && run->quiet.load() < run->nlocal)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
}

/* The starting factors c->A onto the device and their Grams. */
static amp_status load_factors(const amp_gpu_tensor *g, gpu_als *w, const amp_cpd *c,
                               amp_error *err)
{
    const unsigned R = c->rank;
    for (unsigned m = 0; m < w->N; m++) {
        size_t n = (size_t)g->rows[m] * R;
        /* On w->s itself: a pageable cudaMemcpy may return before its data
         * lands, and w->s does not wait for the legacy stream. Every GPU
         * starts from all of every factor, so each takes its Gram whole. */
        CUDA_TRY(cudaMemcpyAsync(w->A[m], c->A[m], n * sizeof(double), cudaMemcpyHostToDevice,
                                 w->s), err);
        if (w->f32)
            CUDA_TRY(amp_gpu_to_f32(w->A[m], w->A32[m], n, w->s), err);
        AMP_CHECK(gram(w, m, 0, g->rows[m], err));
        /* The start's rows beyond A (amp_cpd.start_gram), on every GPU,
         * as each takes the Gram whole. */
        if (c->start_gram[m] != NULL) {
            const size_t rr = (size_t)R * R;
            CUDA_TRY(cudaMemcpyAsync(w->gram_partial, c->start_gram[m], rr * sizeof(double),
                                     cudaMemcpyHostToDevice, w->s), err);
            CUDA_TRY(cudaMemcpyAsync(w->gram_partial + rr, w->G[m], rr * sizeof(double),
                                     cudaMemcpyDeviceToDevice, w->s), err);
            CUDA_TRY(amp_gpu_sum_matrices(w->gram_partial, 2, R, w->G[m], w->s), err);
        }
        /* Every row is in: the first mode's waits pass at once. */
        CUDA_TRY(cudaEventRecord(w->ex1[m], w->xs), err);
    }
    return AMP_OK;
}

/* load_factors, its GPU time added to the gram phase (seconds): the
 * start's Gram matrices count in the first iteration's, as on the CPU,
 * since at a large rank they cost as much as an iteration's (issue 40:
 * otherwise in no phase). The upload of the factors is in it too. */
static amp_status load_factors_timed(const amp_gpu_tensor *g, gpu_als *w, const amp_cpd *c,
                                     double *seconds, amp_error *err)
{
    cudaEvent_t e0, e1;
    CUDA_TRY(cudaEventCreate(&e0), err);
    amp_status rc = AMP_OK;
    float ms = 0;
    cudaError_t made = cudaEventCreate(&e1);
    if (made != cudaSuccess) {
        cudaEventDestroy(e0);
        return CUDA_FAIL(err, made, "cudaEventCreate(&e1)");
    }
    CUDA_TRY_GOTO(cudaEventRecord(e0, w->s), err, rc, done);
    AMP_CHECK_GOTO(load_factors(g, w, c, err), rc, done);
    CUDA_TRY_GOTO(cudaEventRecord(e1, w->s), err, rc, done);
    CUDA_TRY_GOTO(cudaEventSynchronize(e1), err, rc, done);
    CUDA_TRY_GOTO(cudaEventElapsedTime(&ms, e0, e1), err, rc, done);
    seconds[AMP_PHASE_GRAM] += ms / 1e3;
done:
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return rc;
}

/* The end of an iteration: the two fit terms (into w->host->terms) and
 * potri's statuses on the host, and the iteration's phase times added to
 * seconds. */
static amp_status end_iteration(gpu_als *w, double *seconds, amp_error *err)
{
    const unsigned N = w->N, R = w->R;
    /* <X, model> from the last mode's update: lambda_kernel made the
     * column sums of its stored rows .* M into those of lambda .*
     * A_normalized .* M_true (inner). */
    CUDA_TRY(cudaEventRecord(w->fit0, w->s), err);
    amp_mode_set gs = mode_set(w, w->G);
    CUDA_TRY(amp_gpu_fit_terms(&gs, R, w->lambda, w->inner, w->fit_terms, w->s), err);
    const int *potri = w->host->potri;
    CUDA_TRY(cudaMemcpyAsync(w->host->terms, w->fit_terms, sizeof w->host->terms,
                             cudaMemcpyDeviceToHost, w->s), err);
    CUDA_TRY(cudaMemcpyAsync(w->host->potri, w->info + 1, N * sizeof(int),
                             cudaMemcpyDeviceToHost, w->s), err);
    CUDA_TRY(cudaEventRecord(w->fit1, w->s), err);
    AMP_CHECK(wait_stream(w, err));
    for (unsigned m = 0; m < N; m++)   /* 0 where the Cholesky path was not taken */
        if (potri[m] != 0)
            return AMP_FAIL(err, AMP_ERR_INTERNAL, "cusolverDnDpotri failed on mode %u's %ux%u "
                            "Gram product (info %d)", m + 1, R, R, potri[m]);
    return add_phase_times(w, seconds, err);
}

/* Whether to stop after iteration iter, as o->stop says to this
 * process's first GPU: it reads the flag and publishes its answer, and
 * every other GPU waits for that (or for a peer's failure), so that no
 * GPU goes on into a collective that the others left. */
static amp_status agree_stop(als_run *run, gpu_als *w, unsigned iter, int *stop_now,
                             amp_error *err)
{
    if (run->nlocal == 1) {
        *stop_now = *run->o->stop != 0;
        return AMP_OK;
    }
    if (w->local == 0) {
        run->stop_now.store(*run->o->stop != 0);
        run->stop_iter.store(iter);
    }
    while (run->stop_iter.load() < iter) {
        if (run->failed.load())
            return AMP_FAIL(err, AMP_ERR_CUDA, "GPU %u stopped: another GPU failed", w->gpu);
        std::this_thread::yield();
    }
    *stop_now = run->stop_now.load();
    return AMP_OK;
}

/* The fit from end_iteration's two terms: 1 - |X - model| / |X|. */
static double fit_of(const amp_tensor *t, const double *terms)
{
    const double norm_x = sqrt(t->norm_sq), resid = t->norm_sq + terms[0] - 2 * terms[1];
    return norm_x > 0 ? 1 - sqrt(resid > 0 ? resid : 0) / norm_x : 0;
}

/* The iterations, until the fit changes by less than o->tol or
 * o->max_iters; this process's first GPU reports each (o->on_iter) and
 * writes the outcome into c. The first iteration's time runs from
 * t_start, before the start's Gram matrices, which its gram phase counts:
 * an iteration's phases never sum to more than its time. */
static amp_status iterate(const amp_gpu_tensor *g, als_run *run, gpu_als *w, double t_start,
                          amp_error *err)
{
    const amp_cpd_opts *o = run->o;
    amp_cpd *c = run->c;
    const unsigned N = g->nmodes;
    double *seconds = run->seconds[w->local];
    const double *terms = w->host->terms;
    double old_fit = 0, fit = 0;
    unsigned iters = 0;
    int converged = 0, stopped = 0, pinv_used = 0;
    for (unsigned it = 0; it < o->max_iters; it++) {
        double t_iter = it == 0 ? t_start : wall_now();
        for (unsigned d = 0; d < N; d++) {
            if (run->go.fail_gpu == w->gpu + 1 && run->go.fail_iter == it + 1 && d == 1)
                return AMP_FAIL(err, AMP_ERR_CUDA, "a device failure injected at iteration %u "
                                "(amp_gpu_als_opts.fail_gpu)", it + 1);
            AMP_CHECK(update_mode(g, w, d, it == 0, &pinv_used, err));
        }
        /* Streamed: the next iteration's first chunks over the link while
         * the last update and the fit run, not after the host has seen
         * the fit (wasted if this iteration converges). */
        if (it + 1 < o->max_iters)
            AMP_CHECK(amp_gpu_prefetch(g, 0, err));
        AMP_CHECK(end_iteration(w, seconds, err));
        /* The phases so far where on_iter's caller finds them (amp_core.h);
         * c->seconds gets the slowest GPU's at the end. */
        if (w->local == 0)
            memcpy(c->seconds, seconds, sizeof c->seconds);
        fit = fit_of(run->t, terms);
        double delta = fabs(fit - old_fit);
        iters = it + 1;
        if (w->local == 0 && o->on_iter)
            o->on_iter(o->ctx, it + 1, fit, delta, wall_now() - t_iter);
        if (o->stop) {
            int stop_now = 0;
            AMP_CHECK(agree_stop(run, w, it + 1, &stop_now, err));
            if (stop_now) {
                stopped = 1;
                break;
            }
        }
        /* Every GPU computes the same fit from the same summed terms, so
         * all stop together. */
        if (it > 0 && delta < o->tol) {
            converged = 1;
            break;
        }
        old_fit = fit;
    }
    if (w->local == 0) {
        c->fit = fit;
        c->iters = iters;
        c->converged = converged;
        c->stopped = stopped;
        c->pinv_used = pinv_used;
        if (run->stats)
            for (unsigned m = 0; m < N; m++)
                run->stats->parts[m] = w->sent_in[m];
    }
    return AMP_OK;
}

/* The last rows sent and received; in f32, the f64 rows, which only the
 * shadows left. */
static amp_status finish_exchange(gpu_als *w, amp_error *err)
{
    const unsigned N = w->N;
    for (unsigned m = 0; m < N; m++)
        AMP_CHECK(settle_exchange(w, m, err));
    if (w->f32 && w->ngpus > 1) {
        CUDA_TRY(cudaStreamWaitEvent(w->s, w->ex1[N - 1], 0), err);
        for (unsigned m = 0; m < N; m++)
            AMP_CHECK(amp_comm_allgatherv(w->comm, w->A[m], 0, w->gather_offset[m],
                                          w->gather_count[m], w->s, err));
        AMP_CHECK(wait_stream(w, err));
    }
    return AMP_OK;
}

/* The factors, normalized, and lambda into c (GPU 0). */
static amp_status write_output(const amp_gpu_tensor *g, gpu_als *w, amp_cpd *c, amp_error *err)
{
    const unsigned R = c->rank;
    for (unsigned m = 0; m < w->N; m++) {
        CUDA_TRY(amp_gpu_scale_columns(w->A[m], g->rows[m], R, w->sig[m], w->s), err);
        CUDA_TRY(cudaMemcpyAsync(c->A[m], w->A[m], (size_t)g->rows[m] * R * sizeof(double),
                                 cudaMemcpyDeviceToHost, w->s), err);
    }
    if (c->iters > 0)
        CUDA_TRY(cudaMemcpyAsync(c->lambda, w->lambda, R * sizeof(double),
                                 cudaMemcpyDeviceToHost, w->s), err);
    return wait_stream(w, err);
}

/* The whole run of this process's GPU local (every process's factors
 * end the same; the first GPU's go into c). */
static amp_status als_one_gpu(als_run *run, unsigned local, amp_error *err)
{
    gpu_als w;
    const amp_gpu_tensor *g = run->g[local];
    /* On failure w holds what gpu_als_new made, freed below like the rest:
     * only after the peers have been told. */
    amp_status rc = gpu_als_new(g, run->o, run, local, &w, err);
    double t_start = wall_now();
    if (rc == AMP_OK)
        rc = load_factors_timed(g, &w, run->c, run->seconds[local], err);
    if (rc == AMP_OK)
        rc = iterate(g, run, &w, t_start, err);
    if (rc == AMP_OK)
        rc = finish_exchange(&w, err);
    if (rc == AMP_OK && local == 0)
        rc = write_output(g, &w, run->c, err);
    if (rc != AMP_OK)   /* before freeing: cudaFree waits for the device */
        fail_gpu(run, local);
    /* Rows by copies: this GPU's queued pulls read the peers' buffers, and
     * no abort takes them back; they end (every event they wait on is
     * recorded, NCCL's kernels cancelled) before any peer, released by
     * settle, frees what they read. */
    if (rc != AMP_OK && run->ngpus > 1 && amp_comm_by_copies(run->comms[local]))
        cudaDeviceSynchronize();
    settle(run, rc != AMP_OK);
    gpu_als_free(&w);
    return rc;
}

static void gpu_main(als_run *run, unsigned local)
{
    run->rc[local] = als_one_gpu(run, local, &run->err[local]);
}

/* stats->idle: per GPU and mode, behind the last GPU of the run to reach
 * each collective; the latest of each reach is the largest over the
 * processes too. */
static amp_status add_idle(als_run *run, amp_error *err)
{
    const size_t K = run->reach[0].size();
    double *last = (double *)calloc(K + 1, sizeof *last);
    if (last == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < K; k++)
        for (unsigned i = 0; i < run->nlocal; i++)
            last[k] = run->reach[i][k] > last[k] ? run->reach[i][k] : last[k];
    amp_status rc = AMP_OK;
    if (run->group && run->group->size > 1)
        rc = run->group->ops->allreduce(run->group->ctx, last, K, 1, err);
    for (size_t k = 0; k < K && rc == AMP_OK; k++)
        for (unsigned i = 0; i < run->nlocal; i++)
            run->stats->idle[i][k % run->t->nmodes] += last[k] - run->reach[i][k];
    free(last);
    return rc;
}

extern "C" amp_status amp_gpu_cpd_als_multi(amp_gpu_tensor *const *g, amp_comm *const *comms,
                                            const amp_partition *p, const amp_group *group,
                                            const amp_tensor *t, const amp_cpd_opts *o,
                                            const amp_gpu_als_opts *go, amp_cpd *c,
                                            amp_gpu_run_stats *stats, amp_error *err)
{
    const unsigned ngpus = p ? p->ngpus : 1, procs = group ? group->size : 1;
    if (o->method == AMP_METHOD_APR)   /* apr.cu, on the same parts and communicators */
        return amp_gpu_cpd_apr_multi((const amp_gpu_tensor *const *)g, comms, p, group, o, go, c,
                                     stats, err);
    if (o->completion.observed == AMP_OBSERVED_NONZEROS)   /* completion.cu, likewise */
        return amp_gpu_cpd_completion_multi((const amp_gpu_tensor *const *)g, comms, p, group,
                                            t, o, go, c, stats, err);
    if (c->rank != o->rank)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have rank %u, not %u", c->rank, o->rank);
    if (ngpus > 1 && comms == NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%u GPUs need their communicators", ngpus);
    if (ngpus % procs != 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%u GPUs are not the same number on each of %u "
                        "processes", ngpus, procs);
    als_run *run = new (std::nothrow) als_run;
    if (run == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    run->ngpus = ngpus;
    run->nlocal = ngpus / procs;
    run->first = group ? group->rank * run->nlocal : 0;
    run->group = group;
    run->g = g;
    run->comms = comms;
    run->p = p;
    run->t = t;
    run->o = o;
    run->go = go ? *go : amp_gpu_als_opts{};
    run->c = c;
    run->stats = stats;
    memset(run->rc, 0, sizeof run->rc);
    memset(run->err, 0, sizeof run->err);
    memset(run->seconds, 0, sizeof run->seconds);
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->ngpus = run->nlocal;
        stats->nmodes = t->nmodes;
    }
    std::vector<std::thread> threads;
    /* Collective over the processes, so before any GPU starts: a process
     * that fails here stops the others through its caller. */
    amp_status rc = plan_parts(run, err);
    try {
        for (unsigned i = 1; i < run->nlocal && rc == AMP_OK; i++)
            threads.emplace_back(gpu_main, run, i);
    } catch (...) {
        run->failed.store(1);
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "could not start a thread for each of %u GPUs",
                      run->nlocal);
    }
    if (rc == AMP_OK)
        gpu_main(run, 0);
    else {
        if (comms)
            amp_comm_abort(comms[0]);
        /* GPU 0 and those whose threads did not start are past their
         * collectives too: the started ones' settle must not wait for them. */
        run->quiet.fetch_add(run->nlocal - (unsigned)threads.size());
    }
    for (auto &th : threads)
        th.join();
    if (rc == AMP_OK && run->first_failed >= 0) {
        const int i = run->first_failed;
        const amp_error *e = &run->err[i];
        if (ngpus > 1)
            rc = amp_error_set(err, e->status, e->src_file, e->src_line, "GPU %u of the run "
                               "(device %d): %s", run->first + (unsigned)i, g[i]->device,
                               amp_error_message(e));
        else
            rc = amp_error_set(err, e->status, e->src_file, e->src_line, "%s",
                               amp_error_message(e));
    }
    if (rc == AMP_OK) {
        memset(c->seconds, 0, sizeof c->seconds);
        for (unsigned i = 0; i < run->nlocal; i++)
            for (int ph = 0; ph < AMP_NPHASES; ph++) {
                c->seconds[ph] = run->seconds[i][ph] > c->seconds[ph] ? run->seconds[i][ph]
                                                                       : c->seconds[ph];
                if (stats)
                    stats->phase[i][ph] = run->seconds[i][ph];
            }
        if (stats)
            rc = add_idle(run, err);
    }
    free(run->cuts);
    delete run;
    return rc;
}

/* ---- several models in one pass (amped-run --starts, --ranks) ----------- */

/* One model of a batch: what a run alone on this GPU has (its run state,
 * factors, Grams, solve, scales, lambda and stream: the same code updates
 * it), and where its columns start in the concatenation. */
struct batch_model {
    als_run run;
    amp_cpd_opts o;            /* the batch's, at this model's rank */
    gpu_als w;
    mode_update u;
    cudaEvent_t put;           /* its columns are in the concatenation */
    double old_fit;
    unsigned off;
    int live, made, pinv_used;
};

/* Every live model's columns side by side (Rlive in all, in model order):
 * each mode's factor as the MTTKRP reads it (the f32 shadows or f64) and
 * the MTTKRP's output, on a stream of their own; t0[d], t1[d] around
 * mode d's MTTKRP. Every solve kernel takes rows of R values, so the
 * models keep their own rows and columns are copied across (two pitched
 * copies a model and mode, against the MTTKRP's pass over the nonzeros). */
struct batch_cat {
    unsigned Rlive;
    size_t word;
    void *A[AMP_MAX_MODES];
    void *M;
    cudaStream_t s;
    cudaEvent_t t0[AMP_MAX_MODES], t1[AMP_MAX_MODES];
};

/* Model b's rows of mode m into its columns of the concatenation, on its
 * own stream. */
static amp_status batch_put(const amp_gpu_tensor *g, batch_model *b, unsigned m,
                            batch_cat *cat, amp_error *err)
{
    gpu_als *w = &b->w;
    const size_t word = cat->word, width = (size_t)w->R * word;
    const void *src = w->f32 ? (const void *)w->A32[m] : (const void *)w->A[m];
    if (g->rows[m] > 0)
        CUDA_TRY(cudaMemcpy2DAsync((char *)cat->A[m] + b->off * word, cat->Rlive * word, src,
                                   width, width, g->rows[m], cudaMemcpyDeviceToDevice, w->s),
                 err);
    return AMP_OK;
}

/* Offsets of the live models and every mode's concatenation rebuilt, on
 * the models' streams (after all they queued before). */
static amp_status batch_pack(const amp_gpu_tensor *g, batch_model *bm, unsigned K,
                             batch_cat *cat, amp_error *err)
{
    unsigned R = 0;
    for (unsigned k = 0; k < K; k++)
        if (bm[k].live) {
            bm[k].off = R;
            R += bm[k].w.R;
        }
    cat->Rlive = R;
    for (unsigned k = 0; k < K; k++)
        for (unsigned m = 0; m < g->nmodes && bm[k].live; m++)
            AMP_CHECK(batch_put(g, &bm[k], m, cat, err));
    return AMP_OK;
}

/* Mode d for every live model: each model's steps before the MTTKRP on
 * its stream, one MTTKRP over all their columns on cat->s once every
 * model's columns are in, then each model's columns of M into its own M
 * and its update after the MTTKRP (update_after_mttkrp), as alone. */
static amp_status batch_mode(const amp_gpu_tensor *g, batch_model *bm, unsigned K,
                             batch_cat *cat, unsigned d, int first, amp_error *err)
{
    for (unsigned k = 0; k < K; k++) {
        if (!bm[k].live)
            continue;
        gpu_als *w = &bm[k].w;
        plan_update(g, w, d, first, &bm[k].u);
        AMP_CHECK(factor_mode(w, &bm[k].u, err));
        AMP_CHECK(inputs_ready(g, w, &bm[k].u, err));
        CUDA_TRY(cudaEventRecord(bm[k].put, w->s), err);
        CUDA_TRY(cudaStreamWaitEvent(cat->s, bm[k].put, 0), err);
    }
    CUDA_TRY(cudaEventRecord(cat->t0[d], cat->s), err);
    if (g->remap)
        gpu_remap_fuse_next(g, d);
    /* The two groups, as a run alone on one GPU queues them. */
    amp_status rc = amp_gpu_mttkrp_group(g, d, cat->A, cat->Rlive, bm[0].w.f32, cat->M,
                                         AMP_GPU_EARLY, cat->s, err);
    if (rc == AMP_OK)
        rc = amp_gpu_mttkrp_group(g, d, cat->A, cat->Rlive, bm[0].w.f32, cat->M, AMP_GPU_LATE,
                                  cat->s, err);
    if (rc != AMP_OK) {
        if (g->remap)
            gpu_remap_fuse_abort(g);
        return rc;
    }
    if (g->remap)
        AMP_CHECK(gpu_remap_ahead(g, d, cat->s, err));
    CUDA_TRY(cudaEventRecord(cat->t1[d], cat->s), err);
    for (unsigned k = 0; k < K; k++) {
        if (!bm[k].live)
            continue;
        batch_model *b = &bm[k];
        gpu_als *w = &b->w;
        const size_t word = cat->word, width = (size_t)w->R * word;
        CUDA_TRY(cudaStreamWaitEvent(w->s, cat->t1[d], 0), err);
        if (g->rows[d] > 0)
            CUDA_TRY(cudaMemcpy2DAsync(w->f32 ? (void *)w->M32 : (void *)w->M, width,
                                       (const char *)cat->M + b->off * word, cat->Rlive * word,
                                       width, g->rows[d], cudaMemcpyDeviceToDevice, w->s), err);
        CUDA_TRY(cudaEventRecord(b->u.ev[EV_EARLY], w->s), err);
        CUDA_TRY(cudaEventRecord(b->u.ev[EV_WAITED], w->s), err);
        AMP_CHECK(update_after_mttkrp(g, w, &b->u, &b->pinv_used, err));
        AMP_CHECK(batch_put(g, b, d, cat, err));
    }
    return AMP_OK;
}

/* Each model's end of iteration it (0-based): its fit, on_iter, and its
 * stop; *dropped set where one converged. */
static amp_status batch_end(const amp_tensor *t, batch_model *bm, unsigned K, unsigned it,
                            double t_iter, amp_gpu_batch_fn on_iter, void *ctx, int *dropped,
                            amp_error *err)
{
    for (unsigned k = 0; k < K; k++) {
        batch_model *b = &bm[k];
        if (!b->live)
            continue;
        amp_cpd *c = b->run.c;
        AMP_CHECK(end_iteration(&b->w, b->run.seconds[0], err));
        memcpy(c->seconds, b->run.seconds[0], sizeof c->seconds);
        const double fit = fit_of(t, b->w.host->terms), delta = fabs(fit - b->old_fit);
        c->fit = fit;
        c->iters = it + 1;
        if (on_iter)
            on_iter(ctx, k, it + 1, fit, delta, wall_now() - t_iter);
        if (it > 0 && delta < b->o.tol) {
            c->converged = 1;
            b->live = 0;
            *dropped = 1;
        }
        b->old_fit = fit;
    }
    return AMP_OK;
}

static void batch_free(batch_model *bm, unsigned K, batch_cat *cat, unsigned N)
{
    for (unsigned k = 0; k < K; k++) {
        if (bm[k].made)
            gpu_als_free(&bm[k].w);
        destroy_event(bm[k].put);
    }
    for (unsigned m = 0; m < N; m++) {
        cudaFree(cat->A[m]);
        destroy_event(cat->t0[m]);
        destroy_event(cat->t1[m]);
    }
    cudaFree(cat->M);
    destroy_stream(cat->s);
}

extern "C" amp_status amp_gpu_cpd_als_batch(const amp_gpu_tensor *g, const amp_tensor *t,
                                            const amp_cpd_opts *o, unsigned K,
                                            amp_cpd *const *cs, amp_gpu_batch_fn on_iter,
                                            void *ctx, double *mttkrp_seconds, amp_error *err)
{
    const unsigned N = g->nmodes;
    if (o->method == AMP_METHOD_APR || o->method == AMP_METHOD_GCP ||
        o->completion.observed == AMP_OBSERVED_NONZEROS)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "several models in one pass run CP-ALS and "
                        "the constrained methods (als, admm, mu, hals), not --method %s%s",
                        amp_method_name(o->method),
                        o->completion.observed == AMP_OBSERVED_NONZEROS
                            ? " or --observed nonzeros" : "");
    if (K == 0)
        return AMP_OK;
    unsigned Rtot = 0;
    for (unsigned k = 0; k < K; k++)
        Rtot += cs[k]->rank;
    if (Rtot > AMP_GPU_MAX_RANK)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the models' columns (%u) pass the GPU kernels' "
                        "rank limit %u", Rtot, AMP_GPU_MAX_RANK);
    batch_model *bm = new (std::nothrow) batch_model[K]();
    if (bm == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    batch_cat cat;
    memset(&cat, 0, sizeof cat);
    amp_status rc = AMP_OK;
    const int f32 = o->precision == AMP_PRECISION_F32;
    cat.word = f32 ? sizeof(float) : sizeof(double);
    CUDA_TRY_GOTO(cudaSetDevice(g->device), err, rc, done);
    for (unsigned k = 0; k < K; k++) {
        batch_model *b = &bm[k];
        b->o = *o;
        b->o.rank = cs[k]->rank;
        b->run.ngpus = b->run.nlocal = 1;
        b->run.g = (amp_gpu_tensor *const *)&g;
        b->run.t = t;
        b->run.o = &b->o;
        b->run.c = cs[k];
        for (unsigned m = 0; m < N; m++)
            b->run.parts[m] = 1;
        b->made = 1;
        AMP_CHECK_GOTO(gpu_als_new(g, &b->o, &b->run, 0, &b->w, err), rc, done);
        CUDA_TRY_GOTO(cudaEventCreateWithFlags(&b->put, cudaEventDisableTiming), err, rc, done);
        memset(cs[k]->seconds, 0, sizeof cs[k]->seconds);
        AMP_CHECK_GOTO(load_factors_timed(g, &b->w, cs[k], b->run.seconds[0], err), rc, done);
        cs[k]->iters = 0;
        cs[k]->converged = cs[k]->stopped = 0;
        b->live = 1;
    }
    CUDA_TRY_GOTO(cudaStreamCreateWithFlags(&cat.s, cudaStreamNonBlocking), err, rc, done);
    for (unsigned m = 0; m < N; m++) {
        CUDA_TRY_GOTO(cudaMalloc(&cat.A[m], (size_t)g->rows[m] * Rtot * cat.word + 8), err, rc,
                      done);
        CUDA_TRY_GOTO(cudaEventCreate(&cat.t0[m]), err, rc, done);
        CUDA_TRY_GOTO(cudaEventCreate(&cat.t1[m]), err, rc, done);
    }
    CUDA_TRY_GOTO(cudaMalloc(&cat.M, (size_t)bm[0].w.max_rows * Rtot * cat.word + 8), err, rc,
                  done);
    AMP_CHECK_GOTO(batch_pack(g, bm, K, &cat, err), rc, done);
    for (unsigned it = 0; it < o->max_iters && cat.Rlive > 0; it++) {
        const double t_iter = wall_now();
        for (unsigned d = 0; d < N; d++)
            AMP_CHECK_GOTO(batch_mode(g, bm, K, &cat, d, it == 0, err), rc, done);
        if (it + 1 < o->max_iters)
            AMP_CHECK_GOTO(amp_gpu_prefetch(g, 0, err), rc, done);
        int dropped = 0;
        AMP_CHECK_GOTO(batch_end(t, bm, K, it, t_iter, on_iter, ctx, &dropped, err), rc, done);
        /* Every live model waited for every MTTKRP of the iteration, and
         * end_iteration for each model's stream. */
        for (unsigned d = 0; d < N && mttkrp_seconds; d++) {
            float ms = 0;
            CUDA_TRY_GOTO(cudaEventElapsedTime(&ms, cat.t0[d], cat.t1[d]), err, rc, done);
            *mttkrp_seconds += ms / 1e3;
        }
        if (o->stop && *o->stop) {
            for (unsigned k = 0; k < K; k++)
                if (bm[k].live)
                    cs[k]->stopped = 1;
            break;
        }
        /* A converged model stops costing its columns. */
        if (dropped)
            AMP_CHECK_GOTO(batch_pack(g, bm, K, &cat, err), rc, done);
    }
    for (unsigned k = 0; k < K; k++) {
        cs[k]->pinv_used = bm[k].pinv_used;
        AMP_CHECK_GOTO(write_output(g, &bm[k].w, cs[k], err), rc, done);
    }
done:
    /* cudaFree waits for the device: nothing queued outlives its arrays. */
    batch_free(bm, K, &cat, N);
    delete[] bm;
    return rc;
}

extern "C" amp_status amp_gpu_cpd_als(const amp_gpu_tensor *g, const amp_tensor *t,
                                      const amp_cpd_opts *o, amp_cpd *c, amp_error *err)
{
    amp_gpu_tensor *one = (amp_gpu_tensor *)g;
    return amp_gpu_cpd_als_multi(&one, NULL, NULL, NULL, t, o, NULL, c, NULL, err);
}

extern "C" size_t amp_gpu_als_bytes(const amp_tensor *t, unsigned rank, int f32,
                                   amp_method method, uint64_t chunk_nnz)
{
    size_t vsize = amp_value_size(t->value_type), bytes = 0;
    /* A factor row: f64, its f32 shadow, AO-ADMM's dual; CP-APR's: f64 and
     * its Phi (f64, or an f32 shadow and f32 Phi). */
    size_t per = method == AMP_METHOD_APR ? 16
                 : (f32 ? 12 : 8) + (method == AMP_METHOD_ADMM ? 8 : 0);
    /* M: f64, f32, or both when the f32 MTTKRP's output is converted for
     * cuBLAS (above the fused solve's ranks) or a constrained update;
     * CP-APR has none (its column sums: one value a column per 256 rows). */
    const size_t per_m = method == AMP_METHOD_APR                                 ? 1
                         : !f32                                                     ? 8
                         : rank > AMP_GPU_SOLVE_MAX_RANK || method != AMP_METHOD_ALS ? 12
                                                                                      : 4;
    uint64_t max_rows = 0;
    for (unsigned m = 0; m < t->nmodes; m++) {
        const amp_copy *c = &t->copies[m];
        if (chunk_nnz == 0)
            bytes += (size_t)c->nnz * (8 + vsize) + 16;
        bytes += (c->nblocks * 2 + 1) * 8;
        bytes += (size_t)t->rows[m] * rank * per + (size_t)rank * rank * 8;
        max_rows = t->rows[m] > max_rows ? t->rows[m] : max_rows;
    }
    if (chunk_nnz > 0)   /* the ring, and run keys of packed copies: one per row */
        for (unsigned m = 0; m < t->nmodes; m++)
            bytes += (size_t)(t->rows[m] + 1) * 16;
    if (chunk_nnz > 0)
        bytes += amp_gpu_ring_bytes(t, chunk_nnz);
    bytes += (size_t)max_rows * rank * per_m;
    /* R x R scratch, Gram partials, column partials, and a reserve for
     * the work spaces cuBLAS and cuSOLVER allocate themselves. */
    bytes += (size_t)rank * rank * 8 * 80 + ((size_t)1 << 26);
    return bytes;
}
