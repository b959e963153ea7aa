/* amped-run over several processes started by an MPI launcher (mpirun,
 * mpiexec, srun): MPI itself, the processes' hosts and node-local
 * numbers, the collectives of amp_group.h on every process of the job,
 * and stopping them all. The only module that names MPI; the program
 * calls it, the backends see only the amp_group. */
#ifndef AMP_MPI_H
#define AMP_MPI_H

#include "amp_group.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amp_mpi amp_mpi;

/* Whether a launcher started this process (its environment says so:
 * OpenMPI's, the PMI or PMIx variables of MPICH and Slurm). Without one
 * amped-run runs alone, as in a build without MPI, and never starts MPI. */
int amp_mpi_launched(void);

/* MPI started (threads: only the calling thread calls MPI), the job's
 * host names gathered, and a communicator of the processes of each host. */
amp_status amp_mpi_start(amp_mpi **m, amp_error *err);
/* MPI ended cleanly (every process calls it). */
void amp_mpi_end(amp_mpi *m);

/* The group of every process of the job (owned by m). */
const amp_group *amp_mpi_group(const amp_mpi *m);
/* The host of process rank, as it names itself. */
const char *amp_mpi_host(const amp_mpi *m, unsigned rank);
/* This process's number among the processes of its host, and how many
 * there are: a process takes GPU local_rank (of local_size) by default. */
unsigned amp_mpi_local_rank(const amp_mpi *m);
unsigned amp_mpi_local_size(const amp_mpi *m);

/* The CPUs this process may run on (its affinity mask), into *cpus, and
 * how many processes of its host may run on some of the same CPUs, itself
 * included, into *sharers (collective over the host's processes): 1 where
 * the launcher bound each process to CPUs of its own, the host's process
 * count where it bound none (mpirun --bind-to none). */
amp_status amp_mpi_cpu_share(const amp_mpi *m, unsigned *cpus, unsigned *sharers,
                             amp_error *err);

/* Stop every process of the job at once with exit status status (after a
 * failure on this one that the others cannot learn of any other way: they
 * may be waiting in a collective). Does not return. */
void amp_mpi_abort(amp_mpi *m, int status) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif
#endif
