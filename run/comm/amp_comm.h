/* Collectives between the GPUs of a run, behind a small C interface so
 * the CP-ALS code never names NCCL and another bootstrap (NCCL over MPI,
 * several hosts) can hand it the same objects.
 *
 * One amp_comm per GPU of this process (a run over several processes
 * has one NCCL communicator across all of them). Every call enqueues on the caller's
 * CUDA stream and returns at once; buffers are device memory, in place.
 * A run of one GPU needs no NCCL: its collectives do nothing.
 *
 * Rows by copies (amp_comm_init_all's rows) change two of these rules for
 * amp_comm_allgatherv: it returns only once every GPU of the process has
 * called it (twice over: ready, then pulled), so each GPU's calls must
 * come from a thread of its own; and amp_comm_abort wakes the threads
 * waiting there but cannot take back copies already queued, so a GPU whose
 * run stops must finish its own queued work before any GPU frees a buffer
 * a peer may still read (als_gpu.cu does). amp_comm_free of one GPU's comm
 * only once no thread uses any of them. */
#ifndef AMP_COMM_H
#define AMP_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "amp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amp_comm amp_comm;

/* Whether this build can join more than one GPU (it has NCCL). */
int amp_comm_available(void);

/* How amp_comm_allgatherv's rows go between the GPUs of one process: by
 * NCCL's kernels, or by the GPUs' copy engines (peer copies), through the
 * host where a pair has no peer access, or (COPY_IF_PEERS) only where
 * every pair has it, else by NCCL. */
typedef enum amp_comm_rows {
    AMP_COMM_ROWS_NCCL = 0,
    AMP_COMM_ROWS_COPY,
    AMP_COMM_ROWS_COPY_IF_PEERS
} amp_comm_rows;

/* Communicators for ngpus GPUs of this process: comms[i] is GPU i of
 * the run, on CUDA device devices[i]; rows: as above. */
amp_status amp_comm_init_all(unsigned ngpus, const int *devices, amp_comm_rows rows,
                             amp_comm **comms, amp_error *err);
/* Communicators for the GPUs of several processes (hosts): first NCCL's
 * id of the whole run, made by one process (AMP_COMM_ID_BYTES into id),
 * which every other must receive (MPI_Bcast) before all of them call
 * amp_comm_init_ranks: this process's nlocal GPUs (CUDA devices[i]) are
 * GPUs first .. first + nlocal - 1 of the run's ngpus, comms[i] GPU
 * first + i. Every process calls it at once, with the same id and ngpus;
 * it returns once all GPUs of all processes have joined. */
#define AMP_COMM_ID_BYTES 256   /* two NCCL ids: the rows travel on a communicator of their own */
amp_status amp_comm_unique_id(void *id, amp_error *err);
amp_status amp_comm_init_ranks(const void *id, unsigned ngpus, unsigned first, unsigned nlocal,
                               const int *devices, amp_comm **comms, amp_error *err);
/* Whether each of the n CUDA devices can read every other's memory
 * directly (peer access, as NVLink gives): where rows by copies go
 * device to device, not through the host. */
int amp_comm_peers(unsigned n, const int *devices);
void amp_comm_free(amp_comm *c);
/* Cancel what this GPU has queued (after a failure on any GPU) so no
 * GPU waits forever on a collective a peer will never join. Only the
 * thread that drives c's GPU may call it. */
void amp_comm_abort(amp_comm *c);

/* buf[0..n) summed (or, with max, the largest) over every GPU. */
amp_status amp_comm_allreduce(amp_comm *c, double *buf, size_t n, int max, void *stream,
                              amp_error *err);
/* GPU i's values buf[offset[i] .. offset[i] + count[i]) (f32 or f64,
 * counted in values) to every other GPU, point to point, all at once.
 * Rows travel apart from the other collectives: one all-gather may be in
 * flight on one stream while the others run on another (each GPU
 * issuing both kinds in the same order). */
amp_status amp_comm_allgatherv(amp_comm *c, void *buf, int f32, const uint64_t *offset,
                               const uint64_t *count, void *stream, amp_error *err);
/* buf holds ngpus x block values (f32 or f64); GPU i ends with block i
 * summed over every GPU, in place. */
amp_status amp_comm_reduce_scatter(amp_comm *c, void *buf, size_t block, int f32, void *stream,
                                   amp_error *err);
/* Whether c's rows go by copies (as amp_comm_init_all's rows chose). */
int amp_comm_by_copies(const amp_comm *c);
/* An error the library met asynchronously (a peer gone). */
amp_status amp_comm_check(amp_comm *c, amp_error *err);

#ifdef __cplusplus
}
#endif
#endif
