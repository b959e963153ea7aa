/* The processes of a run that spans several (started by mpirun or srun),
 * as the backends see them: a size, this process's number and the few
 * collectives CP-ALS needs, behind function pointers so that no library
 * but run/mpi names MPI and a build without it compiles the same code.
 *
 * Every call is collective: each process of the group makes the same calls
 * in the same order, and a call returns when this process's part is done.
 * A failure is this process's; the caller stops the run (the processes
 * still inside a collective cannot be told otherwise). */
#ifndef AMP_GROUP_H
#define AMP_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "amp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amp_group_ops {
    /* buf[0..n) summed (max: the largest) over every process, in place. */
    amp_status (*allreduce)(void *ctx, double *buf, size_t n, int max, amp_error *err);
    /* Process i's values buf[offset[i] .. offset[i] + count[i]) to every
     * other process, in place. */
    amp_status (*allgatherv)(void *ctx, double *buf, const uint64_t *offset,
                             const uint64_t *count, amp_error *err);
    /* bytes of buf from process 0 to every other. */
    amp_status (*bcast)(void *ctx, void *buf, size_t bytes, amp_error *err);
    /* Returns once every process has called it. */
    amp_status (*barrier)(void *ctx, amp_error *err);
} amp_group_ops;

typedef struct amp_group {
    unsigned size, rank;       /* processes, and this one's number (0 .. size - 1) */
    const amp_group_ops *ops;
    void *ctx;
} amp_group;

#ifdef __cplusplus
}
#endif
#endif
