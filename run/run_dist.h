/* amped-run as one process of several, started by an MPI launcher
 * (mpirun, srun): the shards of every mode dealt over the processes with
 * the dealing of several GPUs (amp_partition_new), each process reading
 * and decompressing only its own shards' chunks, computing their MTTKRP,
 * owning their rows and sending them to the others (the CPU backend's
 * amp_cpu_als_share). With GPUs, the shards are dealt over every GPU of
 * every process instead (gpu_run.h, amp_gpu_opts.group): this module
 * only chooses the backend and hands the GPU backend the group. A build
 * without MPI, or a process no launcher started, runs alone:
 * amp_dist_start gives NULL and nothing changes. */
#ifndef AMP_RUN_DIST_H
#define AMP_RUN_DIST_H

#include <stdio.h>

#include "amp_core.h"
#include "gpu_run.h"
#include "run_report.h"

typedef struct amp_dist amp_dist;

/* *d NULL when this process runs alone. */
amp_status amp_dist_start(amp_dist **d, amp_error *err);
/* MPI ended: every process calls it once its run is over. */
void amp_dist_end(amp_dist *d);

unsigned amp_dist_rank(const amp_dist *d);
unsigned amp_dist_size(const amp_dist *d);

/* err's message prefixed with this process's number and host, so the
 * user learns which of many processes failed. */
void amp_dist_label(const amp_dist *d, amp_error *err);

/* After a step every process takes (loading): AMP_OK when every process
 * succeeded; else this process's own status (mine, err untouched), or
 * AMP_ERR_PEER with a message naming the first process that failed and
 * its host. Every process then stops without waiting on another. */
amp_status amp_dist_agree(amp_dist *d, amp_status mine, amp_error *err);

/* Stop every process now (a failure the others cannot be told of: they
 * may be inside a collective). Does not return. */
void amp_dist_abort(amp_dist *d, int status) __attribute__((noreturn));

/* The threads this process should start where the user chose none
 * (collective over the processes of each host): the CPUs it may run on
 * divided among the processes of its host that may run on the same ones
 * (amp_mpi_cpu_share), at least 1; *cpus gets the CPUs and *sharers
 * the processes. Without
 * this, N processes of a host that the launcher left unbound would each
 * start a thread a CPU, N times too many. */
amp_status amp_dist_threads(amp_dist *d, int *threads, unsigned *cpus, unsigned *sharers,
                            amp_error *err);
/* The thread count this process runs with, for its row of the report. */
void amp_dist_set_threads(amp_dist *d, int threads);

/* The backend of every process, before any loads (collective): *gpus
 * AMP_GPUS_AUTO (without --devices) becomes one GPU a process where every
 * process sees a GPU and the rank is within the GPU kernels', else 0, the
 * CPU for all. With GPUs, g gets the group and this process's place
 * among those of its host. */
amp_status amp_dist_gpus(amp_dist *d, unsigned rank, int *gpus, amp_gpu_opts *g,
                         amp_error *err);

/* The CPU backend: this process's part of the tensor of f (t: its
 * layout), the shards dealt to it, read from the file alone. */
amp_status amp_dist_load(amp_dist *d, const amp_file *f, const amp_tensor *t, int threads,
                         amp_load_progress_fn progress, void *progress_ctx, amp_error *err);
/* Values far from 1 (amp_value_scale_exp): every process's part times
 * 2^k, k from the largest |value| of all processes, and its |X|^2 the sum
 * over all of them (collective; *k 0 where none needs it). */
amp_status amp_dist_scale(amp_dist *d, int *k, amp_error *err);
/* Bytes of this process's part in memory. */
uint64_t amp_dist_bytes(const amp_dist *d);

/* The decomposition (amp_cpu_als_share) from c's factors, in the file's
 * row order before and after, the same on every process. */
amp_status amp_dist_als(amp_dist *d, const amp_cpd_opts *o, amp_cpd *c, amp_error *err);

/* Every process's rows of the report, on every process (collective; the
 * rows stay d's): one a process, or with GPUs (gr not NULL) one a GPU of
 * each; *n gets how many. */
amp_status amp_dist_report(amp_dist *d, unsigned nmodes, const amp_gpu_run *gr,
                           const amp_report_process **rows, unsigned *n, amp_error *err);
/* The rows as text, one a process or GPU. */
void amp_dist_print(FILE *out, const amp_report_process *rows, unsigned n, unsigned nmodes);

#endif
