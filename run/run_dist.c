/* amped-run over several processes (run_dist.h). */
#include <config.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_cpu.h"
#include "amp_log.h"
#include "run_dist.h"
#ifdef AMP_HAVE_MPI
#include "amp_mpi.h"
#endif

struct amp_dist {
#ifdef AMP_HAVE_MPI
    amp_mpi *mpi;
#endif
    const amp_group *group;
    amp_partition p;
    int have_p, have_part;
    amp_tensor part;
    amp_cpu_share share;
    double mttkrp;
    int threads;
    amp_report_process *rows;
};

amp_status amp_dist_start(amp_dist **out, amp_error *err)
{
    *out = NULL;
#ifdef AMP_HAVE_MPI
    if (!amp_mpi_launched())
        return AMP_OK;
    amp_dist *d = calloc(1, sizeof *d);
    if (d == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    amp_status rc = amp_mpi_start(&d->mpi, err);
    if (rc != AMP_OK) {
        free(d);
        return rc;
    }
    d->group = amp_mpi_group(d->mpi);
    if (d->group->size > AMP_MAX_GPUS) {
        /* Every process finds the same: all stop, none waits. */
        amp_dist_end(d);
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "a run takes at most %d processes",
                        AMP_MAX_GPUS);
    }
    *out = d;
#else
    (void)err;
#endif
    return AMP_OK;
}

void amp_dist_end(amp_dist *d)
{
    if (d == NULL)
        return;
    if (d->have_part)
        amp_tensor_free(&d->part);
    if (d->have_p)
        amp_partition_free(&d->p);
    free(d->rows);
#ifdef AMP_HAVE_MPI
    amp_mpi_end(d->mpi);
#endif
    free(d);
}

amp_status amp_dist_threads(amp_dist *d, int *threads, unsigned *cpus, unsigned *sharers,
                            amp_error *err)
{
    unsigned c = 1, n = 1;
#ifdef AMP_HAVE_MPI
    AMP_CHECK(amp_mpi_cpu_share(d->mpi, &c, &n, err));
#else
    (void)d, (void)err;
#endif
    *threads = c / n > 0 ? (int)(c / n) : 1;
    *cpus = c;
    *sharers = n;
    return AMP_OK;
}

void amp_dist_set_threads(amp_dist *d, int threads)
{
    d->threads = threads;
}

unsigned amp_dist_rank(const amp_dist *d)
{
    return d ? d->group->rank : 0;
}

unsigned amp_dist_size(const amp_dist *d)
{
    return d ? d->group->size : 1;
}

static const char *host_of(const amp_dist *d, unsigned rank)
{
#ifdef AMP_HAVE_MPI
    return amp_mpi_host(d->mpi, rank);
#else
    (void)d, (void)rank;
    return "?";
#endif
}

void amp_dist_label(const amp_dist *d, amp_error *err)
{
    if (d == NULL || err == NULL)
        return;
    char msg[AMP_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "process %u of %u (host %s): %s", d->group->rank, d->group->size,
             host_of(d, d->group->rank), amp_error_message(err));
    memcpy(err->msg, msg, sizeof msg);
}

void amp_dist_abort(amp_dist *d, int status)
{
#ifdef AMP_HAVE_MPI
    amp_mpi_abort(d->mpi, status);
#else
    (void)d;
    exit(status);
#endif
}

amp_status amp_dist_agree(amp_dist *d, amp_status mine, amp_error *err)
{
    const amp_group *g = d->group;
    /* The largest of size - rank over the failed: the first of them. */
    double first = mine != AMP_OK ? (double)(g->size - g->rank) : 0;
    amp_error e = {0};
    if (g->ops->allreduce(g->ctx, &first, 1, 1, &e) != AMP_OK) {
        /* The processes no longer agree on anything: stop them all. */
        amp_dist_label(d, &e);
        amp_log_error(&e);
        amp_dist_abort(d, EXIT_FAILURE);
    }
    if (first == 0 || mine != AMP_OK)
        return mine;
    unsigned who = g->size - (unsigned)first;
    return AMP_FAIL(err, AMP_ERR_PEER, "process %u (host %s) failed: every process stops", who,
                    host_of(d, who));
}

amp_status amp_dist_gpus(amp_dist *d, unsigned rank, int *gpus, amp_gpu_opts *g,
                         amp_error *err)
{
    const amp_group *grp = d->group;
    if (*gpus == 0)
        return AMP_OK;
    if (*gpus == AMP_GPUS_AUTO && g->ndevices == 0) {
        /* The fewest GPUs any process sees, as the largest negation. */
        double fewest = -(double)amp_gpu_visible();
        AMP_CHECK(grp->ops->allreduce(grp->ctx, &fewest, 1, 1, err));
        *gpus = fewest < 0 && rank <= AMP_GPU_MAX_RANK ? 1 : 0;
        if (*gpus == 0)
            return AMP_OK;
    }
    g->group = grp;
#ifdef AMP_HAVE_MPI
    g->local_rank = amp_mpi_local_rank(d->mpi);
    g->local_size = amp_mpi_local_size(d->mpi);
#endif
    return AMP_OK;
}

amp_status amp_dist_load(amp_dist *d, const amp_file *f, const amp_tensor *t, int threads,
                         amp_load_progress_fn progress, void *progress_ctx, amp_error *err)
{
    AMP_CHECK(amp_partition_new(t, d->group->size, AMP_PARTITION_OWNER, &d->p, err));
    d->have_p = 1;
    AMP_CHECK(amp_partition_load(f, t, &d->p, d->group->rank, threads, progress, progress_ctx,
                                 &d->part, err));
    d->have_part = 1;
    return AMP_OK;
}

amp_status amp_dist_scale(amp_dist *d, int *k, amp_error *err)
{
    const amp_group *g = d->group;
    double max = amp_tensor_max_abs(&d->part, d->threads);
    AMP_CHECK(g->ops->allreduce(g->ctx, &max, 1, 1, err));
    *k = amp_value_scale_exp(max);
    if (*k == 0)
        return AMP_OK;
    double sum;
    amp_tensor_scale(&d->part, *k, d->threads, &sum);
    AMP_CHECK(g->ops->allreduce(g->ctx, &sum, 1, 0, err));
    d->part.norm_sq = sum;
    return AMP_OK;
}

uint64_t amp_dist_bytes(const amp_dist *d)
{
    return d->have_part ? d->part.bytes : 0;
}

/* Every factor from one row order to the other (the file's and the run's). */
static amp_status reorder(const amp_partition *p, amp_cpd *c, int to_run, amp_error *err)
{
    for (unsigned m = 0; m < c->nmodes; m++) {
        if (p->modes[m].run_row == NULL)
            continue;
        size_t bytes = (size_t)c->rows[m] * c->rank * sizeof(double) + 1;
        double *moved = amp_huge_alloc(bytes, "a factor matrix", err);
        if (moved == NULL)
            return AMP_ERR_NOMEM;
        if (to_run)
            amp_partition_rows_to_run(p, m, c->rank, c->A[m], moved);
        else
            amp_partition_rows_to_file(p, m, c->rank, c->A[m], moved);
        amp_huge_free(c->A[m], bytes);
        c->A[m] = moved;
    }
    return AMP_OK;
}

amp_status amp_dist_als(amp_dist *d, const amp_cpd_opts *o, amp_cpd *c, amp_error *err)
{
    d->share = (amp_cpu_share){d->group, &d->p, 0, 0};
    AMP_CHECK(reorder(&d->p, c, 1, err));
    AMP_CHECK(amp_cpu_als_share(&d->part, o, &d->share, c, err));
    d->mttkrp = c->seconds[AMP_PHASE_MTTKRP];
    return reorder(&d->p, c, 0, err);
}

/* A row as doubles: shards, nonzeros and rows per mode (exact below
 * 2^53), its three times, its GPU and its process's threads. */
#define ROW_VALUES(N) (3 * (size_t)(N) + 5)

/* This process's rows (one, or one a GPU) into mine. */
static void own_rows(const amp_dist *d, unsigned nmodes, const amp_gpu_run *gr, double *mine)
{
    const size_t K = ROW_VALUES(nmodes);
    const unsigned me = d->group->rank;
    if (gr == NULL) {
        for (unsigned m = 0; m < nmodes; m++) {
            mine[m] = d->p.modes[m].nshards_of[me];
            mine[nmodes + m] = (double)d->part.copies[m].nnz;
            mine[2 * nmodes + m] = (double)d->p.modes[m].row_count[me];
        }
        mine[3 * nmodes] = d->mttkrp;
        mine[3 * nmodes + 1] = d->share.exchange;
        mine[3 * nmodes + 2] = d->share.wait;
        mine[3 * nmodes + 3] = -1;
        mine[3 * nmodes + 4] = d->threads;
        return;
    }
    for (unsigned k = 0; k < amp_gpu_run_count(gr); k++) {
        double *v = mine + k * K;
        double mttkrp[AMP_MAX_MODES], busy[AMP_MAX_MODES], comm[AMP_MAX_MODES];
        double exchange[AMP_MAX_MODES], idle[AMP_MAX_MODES], phase[AMP_NPHASES];
        amp_gpu_info in;
        amp_gpu_run_info(gr, k, &in);
        amp_gpu_run_times(gr, k, mttkrp, busy, comm, exchange, idle, phase);
        for (unsigned m = 0; m < nmodes; m++) {
            v[m] = in.shards[m];
            v[nmodes + m] = (double)in.nnz[m];
            v[2 * nmodes + m] = (double)in.rows[m];
            /* the rows' transfer (GPU time, partly behind the next
             * MTTKRP), and waiting for the slowest GPU of the run */
            v[3 * nmodes] += mttkrp[m];
            v[3 * nmodes + 1] += exchange[m];
            v[3 * nmodes + 2] += idle[m];
        }
        v[3 * nmodes + 3] = in.device;
        v[3 * nmodes + 4] = d->threads;
    }
}

amp_status amp_dist_report(amp_dist *d, unsigned nmodes, const amp_gpu_run *gr,
                           const amp_report_process **rows, unsigned *n, amp_error *err)
{
    const amp_group *g = d->group;
    const size_t K = ROW_VALUES(nmodes);
    /* Every process has as many GPUs (amp_gpu_run_join checked). */
    const unsigned each = gr ? amp_gpu_run_count(gr) : 1, total = g->size * each;
    double *all = calloc((size_t)total * K, sizeof *all);
    free(d->rows);
    d->rows = calloc(total, sizeof *d->rows);
    if (all == NULL || d->rows == NULL) {
        free(all);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    own_rows(d, nmodes, gr, all + (size_t)g->rank * each * K);
    /* Each process fills its own slots, zeros elsewhere: a sum gathers them. */
    amp_status rc = g->ops->allreduce(g->ctx, all, (size_t)total * K, 0, err);
    for (unsigned k = 0; k < total && rc == AMP_OK; k++) {
        const double *v = all + (size_t)k * K;
        amp_report_process *q = &d->rows[k];
        q->process = k / each;
        q->host = host_of(d, q->process);
        for (unsigned m = 0; m < nmodes; m++) {
            q->shards[m] = (uint32_t)v[m];
            q->nnz[m] = (uint64_t)v[nmodes + m];
            q->rows[m] = (uint64_t)v[2 * nmodes + m];
        }
        q->mttkrp = v[3 * nmodes];
        q->exchange = v[3 * nmodes + 1];
        q->wait = v[3 * nmodes + 2];
        q->gpu = (int)v[3 * nmodes + 3];
        q->threads = (int)v[3 * nmodes + 4];
    }
    free(all);
    *rows = d->rows;
    *n = total;
    return rc;
}

void amp_dist_print(FILE *out, const amp_report_process *rows, unsigned n, unsigned nmodes)
{
    const int gpus = n > 0 && rows[0].gpu >= 0;
    fprintf(out, "processes: %u; per %s: shards and nonzeros per mode, seconds of "
            "MTTKRP, exchange, wait\n", gpus ? rows[n - 1].process + 1 : n,
            gpus ? "GPU of each" : "process");
    for (unsigned k = 0; k < n; k++) {
        const amp_report_process *q = &rows[k];
        fprintf(out, "  %3u  %-16s ", q->process, q->host);
        if (gpus)
            fprintf(out, "gpu %-2d  ", q->gpu);
        for (unsigned m = 0; m < nmodes; m++)
            fprintf(out, "%s%" PRIu32, m ? "," : "", q->shards[m]);
        fprintf(out, "  ");
        for (unsigned m = 0; m < nmodes; m++)
            fprintf(out, "%s%" PRIu64, m ? "," : "", q->nnz[m]);
        fprintf(out, "  %.3f %.3f %.3f\n", q->mttkrp, q->exchange, q->wait);
    }
}
