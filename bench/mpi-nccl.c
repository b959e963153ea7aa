/* NCCL across processes, bootstrapped over MPI as amped-run's GPUs of
 * several processes will be: process 0 makes NCCL's id, MPI_Bcast takes
 * it to the others (amp_group's bcast), each process joins with its
 * GPUs (amp_comm_init_ranks). Then the collectives of CP-ALS across all
 * of them, checked, and the rows' exchange timed.
 *
 * Usage: mpirun -np P bench/mpi-nccl [GPUS (1)] [ROWS (4194304)] [RANK (32)] [ROUNDS (10)]
 * Each process takes GPUS GPUs of its host, from its node-local number
 * (local rank l: GPUs l GPUS .. l GPUS + GPUS - 1, modulo the host's
 * count). ROWS rows of RANK doubles are spread evenly over the GPUs (a
 * factor of that size); each round every GPU sends its rows to all
 * others (amp_comm_allgatherv). Process 0 prints the checks and, per
 * round, the time and the bytes each GPU received, and their rate.
 * Exit status 0 when every check passed. */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "amp_comm.h"
#include "amp_mpi.h"
#include "amp_timer.h"

#define MAX_LOCAL 16
#define MAX_GPUS 64   /* of the run: as many as amped-run joins (AMP_MAX_GPUS) */

typedef struct gpu {
    int device;
    amp_comm *comm;
    cudaStream_t stream;
    double *rows, *sum;
} gpu;

static int fail(amp_mpi *m, const char *what, const amp_error *err)
{
    fprintf(stderr, "mpi-nccl: process %u (host %s): %s: %s\n",
            amp_mpi_group(m)->rank, amp_mpi_host(m, amp_mpi_group(m)->rank), what,
            amp_error_message(err));
    amp_mpi_abort(m, 1);
}

static int cuda_ok(cudaError_t e, amp_error *err)
{
    if (e == cudaSuccess)
        return 1;
    AMP_FAIL(err, AMP_ERR_CUDA, "%s", cudaGetErrorString(e));
    return 0;
}

/* Every local GPU's stream finished. */
static int sync_all(gpu *g, unsigned n, amp_error *err)
{
    for (unsigned i = 0; i < n; i++)
        if (!cuda_ok(cudaSetDevice(g[i].device), err) ||
            !cuda_ok(cudaStreamSynchronize(g[i].stream), err))
            return 0;
    return 1;
}

/* Every local GPU's rows to every other GPU, and every stream finished. */
static int exchange(gpu *g, unsigned n, const uint64_t *offset, const uint64_t *cnt,
                    amp_error *err)
{
    for (unsigned i = 0; i < n; i++)
        if (!cuda_ok(cudaSetDevice(g[i].device), err) ||
            amp_comm_allgatherv(g[i].comm, g[i].rows, 0, offset, cnt, g[i].stream, err) != AMP_OK)
            return 0;
    return sync_all(g, n, err);
}

int main(int argc, char **argv)
{
    unsigned nlocal = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
    uint64_t rows = argc > 2 ? strtoull(argv[2], NULL, 10) : UINT64_C(4194304);
    unsigned R = argc > 3 ? (unsigned)atoi(argv[3]) : 32;
    unsigned rounds = argc > 4 ? (unsigned)atoi(argv[4]) : 10;
    amp_error err = {0};
    amp_mpi *m;
    if (nlocal < 1 || nlocal > MAX_LOCAL || rows < 1 || R < 1 || rounds < 1) {
        fprintf(stderr, "usage: mpirun -np P mpi-nccl [GPUS 1-%d] [ROWS] [RANK] [ROUNDS]\n",
                MAX_LOCAL);
        return 2;
    }
    if (amp_mpi_start(&m, &err) != AMP_OK) {
        fprintf(stderr, "mpi-nccl: %s\n", amp_error_message(&err));
        return 1;
    }
    const amp_group *grp = amp_mpi_group(m);
    const unsigned P = grp->size, me = grp->rank, N = P * nlocal, first = me * nlocal;
    int count = 0;
    if (!cuda_ok(cudaGetDeviceCount(&count), &err) || count == 0)
        return fail(m, "no GPU", &err);
    gpu g[MAX_LOCAL];
    int devices[MAX_LOCAL];
    memset(g, 0, sizeof g);
    for (unsigned i = 0; i < nlocal; i++)
        devices[i] = g[i].device = (int)((amp_mpi_local_rank(m) * nlocal + i) % (unsigned)count);

    /* The bootstrap under test. */
    unsigned char id[AMP_COMM_ID_BYTES];
    amp_comm *comms[MAX_LOCAL];
    double t0 = amp_now();
    if (me == 0 && amp_comm_unique_id(id, &err) != AMP_OK)
        return fail(m, "ncclGetUniqueId", &err);
    if (grp->ops->bcast(grp->ctx, id, sizeof id, &err) != AMP_OK)
        return fail(m, "broadcasting NCCL's id", &err);
    if (amp_comm_init_ranks(id, N, first, nlocal, devices, comms, &err) != AMP_OK)
        return fail(m, "joining NCCL", &err);
    double t_init = amp_now() - t0;

    /* GPU k owns rows [rows k / N, rows (k + 1) / N), each entry k + 1. */
    uint64_t offset[MAX_GPUS], cnt[MAX_GPUS];
    if (N > MAX_GPUS) {
        AMP_FAIL(&err, AMP_ERR_USAGE, "%u GPUs, more than %d", N, MAX_GPUS);
        return fail(m, "the run", &err);
    }
    for (unsigned k = 0; k < N; k++) {
        offset[k] = rows * k / N * R;
        cnt[k] = rows * (k + 1) / N * R - offset[k];
    }
    const size_t bytes = (size_t)rows * R * sizeof(double);
    double *host = malloc(bytes);
    if (host == NULL) {
        AMP_FAIL(&err, AMP_ERR_NOMEM, "out of memory");
        return fail(m, "host buffer", &err);
    }
    for (unsigned i = 0; i < nlocal; i++) {
        g[i].comm = comms[i];
        const unsigned k = first + i;
        for (uint64_t v = 0; v < rows * R; v++)
            host[v] = v >= offset[k] && v < offset[k] + cnt[k] ? (double)(k + 1) : -1.0;
        if (!cuda_ok(cudaSetDevice(g[i].device), &err) ||
            !cuda_ok(cudaStreamCreateWithFlags(&g[i].stream, cudaStreamNonBlocking), &err) ||
            !cuda_ok(cudaMalloc((void **)&g[i].rows, bytes), &err) ||
            !cuda_ok(cudaMalloc((void **)&g[i].sum, (size_t)R * R * sizeof(double)), &err) ||
            !cuda_ok(cudaMemcpy(g[i].rows, host, bytes, cudaMemcpyHostToDevice), &err))
            return fail(m, "GPU buffers", &err);
        for (size_t v = 0; v < (size_t)R * R; v++)
            host[v] = k + 1;
        if (!cuda_ok(cudaMemcpy(g[i].sum, host, (size_t)R * R * sizeof(double),
                                cudaMemcpyHostToDevice), &err))
            return fail(m, "GPU buffers", &err);
    }

    /* Checks: a Gram-sized all-reduce sums 1 + ... + N; after one
     * exchange every GPU holds every GPU's rows. */
    for (unsigned i = 0; i < nlocal; i++) {
        cudaSetDevice(g[i].device);
        if (amp_comm_allreduce(g[i].comm, g[i].sum, (size_t)R * R, 0, g[i].stream, &err) !=
            AMP_OK)
            return fail(m, "amp_comm_allreduce", &err);
    }
    if (!sync_all(g, nlocal, &err))
        return fail(m, "the all-reduce", &err);
    if (!exchange(g, nlocal, offset, cnt, &err))
        return fail(m, "the exchange", &err);
    double bad = 0;
    for (unsigned i = 0; i < nlocal; i++) {
        cudaSetDevice(g[i].device);
        if (!cuda_ok(cudaMemcpy(host, g[i].rows, bytes, cudaMemcpyDeviceToHost), &err))
            return fail(m, "reading back", &err);
        for (unsigned k = 0; k < N; k++)
            for (uint64_t v = offset[k]; v < offset[k] + cnt[k]; v++)
                bad += host[v] != k + 1;
        if (!cuda_ok(cudaMemcpy(host, g[i].sum, (size_t)R * R * sizeof(double),
                                cudaMemcpyDeviceToHost), &err))
            return fail(m, "reading back", &err);
        for (size_t v = 0; v < (size_t)R * R; v++)
            bad += host[v] != (double)N * (N + 1) / 2;
    }
    if (grp->ops->allreduce(grp->ctx, &bad, 1, 0, &err) != AMP_OK)
        return fail(m, "MPI_Allreduce", &err);

    /* The exchange, timed: the slowest process's time of each round. */
    double total = 0;
    for (unsigned k = 0; k < rounds; k++) {
        if (grp->ops->barrier(grp->ctx, &err) != AMP_OK)
            return fail(m, "MPI_Barrier", &err);
        double s = amp_now();
        if (!exchange(g, nlocal, offset, cnt, &err))
            return fail(m, "the exchange", &err);
        double dt = amp_now() - s;
        if (grp->ops->allreduce(grp->ctx, &dt, 1, 1, &err) != AMP_OK)
            return fail(m, "MPI_Allreduce", &err);
        total += dt;
    }
    if (me == 0) {
        double per = total / rounds;
        /* Each GPU receives every row but its own share. */
        double recv = (double)bytes * (N - 1) / N;
        printf("processes %u, GPUs per process %u, GPUs %u; NCCL joined in %.3f s\n", P,
               nlocal, N, t_init);
        printf("check: all-reduce of %ux%u and all-gather of %" PRIu64 " rows: %s\n", R, R,
               rows, bad == 0 ? "ok" : "WRONG");
        printf("exchange: %" PRIu64 " rows x %u f64 (%.1f MiB), %.3f ms a round (mean of %u), "
               "%.1f MiB received per GPU, %.1f GB/s per GPU\n", rows, R, bytes / 1048576.0,
               per * 1e3, rounds, recv / 1048576.0, recv / per / 1e9);
    }
    for (unsigned i = 0; i < nlocal; i++) {
        cudaSetDevice(g[i].device);
        cudaFree(g[i].rows);
        cudaFree(g[i].sum);
        cudaStreamDestroy(g[i].stream);
        amp_comm_free(g[i].comm);
    }
    free(host);
    amp_mpi_end(m);
    return bad == 0 ? 0 : 1;
}
