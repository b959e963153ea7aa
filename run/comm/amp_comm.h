/* Collectives between the GPUs of a run, behind a small C interface so
 * the CP-ALS code never names NCCL and another bootstrap (NCCL over MPI,
 * several hosts) can hand it the same objects.
 *
 * One amp_comm per GPU (rank). Every call enqueues on the caller's CUDA
 * stream and returns at once; buffers are device memory, in place. A run
 * of one GPU needs no NCCL: its collectives do nothing. */
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

/* Communicators for n GPUs of this process: comms[r] is rank r on CUDA
 * device devices[r]. */
amp_status amp_comm_init_all(unsigned n, const int *devices, amp_comm **comms, amp_error *err);
void amp_comm_free(amp_comm *c);
/* Cancel what this rank has queued (after a failure on any rank) so no
 * rank waits forever on a collective a peer will never join. */
void amp_comm_abort(amp_comm *c);
unsigned amp_comm_rank(const amp_comm *c);
unsigned amp_comm_size(const amp_comm *c);

/* buf[0..n) summed (or, with max, the largest) over every rank. */
amp_status amp_comm_allreduce(amp_comm *c, double *buf, size_t n, int max, void *stream,
                              amp_error *err);
/* Rank r's values buf[offset[r] .. offset[r] + count[r]) (f32 or f64,
 * counted in values) to every other rank, point to point, all at once.
 * Rows travel apart from the other collectives: one all-gather may be in
 * flight on one stream while the others run on another (each rank
 * issuing both kinds in the same order). */
amp_status amp_comm_allgatherv(amp_comm *c, void *buf, int f32, const uint64_t *offset,
                               const uint64_t *count, void *stream, amp_error *err);
/* buf holds size x block values (f32 or f64); rank r ends with block r
 * summed over every rank, in place. */
amp_status amp_comm_reduce_scatter(amp_comm *c, void *buf, size_t block, int f32, void *stream,
                                   amp_error *err);
/* An error the library met asynchronously (a peer gone). */
amp_status amp_comm_check(amp_comm *c, amp_error *err);

#ifdef __cplusplus
}
#endif
#endif
