/* The MPI side of a run over several processes (amp_mpi.h). MPI reports
 * errors back (MPI_ERRORS_RETURN) so a failed call becomes an amp_error
 * with MPI's own words; a process that dies is the launcher's to notice,
 * and it ends the job. */
#include <config.h>

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "amp_mpi.h"

#define HOST_MAX 64   /* a host name as shown: longer ones are cut */

struct amp_mpi {
    amp_group group;
    MPI_Comm local;            /* the processes of this host */
    unsigned local_rank, local_size;
    char *hosts;               /* size x HOST_MAX */
};

int amp_mpi_launched(void)
{
    static const char *const vars[] = {
        "OMPI_COMM_WORLD_SIZE",   /* OpenMPI's mpirun */
        "PMIX_RANK",              /* PMIx: OpenMPI 5, Slurm's srun --mpi=pmix */
        "PMI_SIZE",               /* PMI-1 and 2: MPICH's hydra, srun --mpi=pmi2 */
        "MPI_LOCALNRANKS",        /* MPICH's hydra */
        NULL
    };
    for (int i = 0; vars[i] != NULL; i++)
        if (getenv(vars[i]) != NULL)
            return 1;
    return 0;
}

/* An MPI call's failure as an amp_error. */
static amp_status mpi_fail(amp_error *err, int code, const char *what, const char *file,
                           int line)
{
    char text[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(code, text, &n) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", code);
    return amp_error_set(err, AMP_ERR_PEER, file, line, "%s: %s", what, text);
}

#define MPI_CHECK(call, what, err)                                            \
    do {                                                                      \
        int mpi_rc_ = (call);                                                 \
        if (mpi_rc_ != MPI_SUCCESS)                                           \
            return mpi_fail((err), mpi_rc_, (what), __FILE__, __LINE__);      \
    } while (0)

static amp_status group_allreduce(void *ctx, double *buf, size_t n, int max, amp_error *err)
{
    (void)ctx;
    if (n > INT_MAX)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "an all-reduce of %zu values: MPI counts "
                        "stop at %d", n, INT_MAX);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, max ? MPI_MAX : MPI_SUM,
                            MPI_COMM_WORLD), "MPI_Allreduce", err);
    return AMP_OK;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* MPI counts are ints, a factor's values may be more: the values travel
 * in units of the largest number of doubles that divides every offset and
 * count (a factor row, at least, since those are whole rows). */
static amp_status group_allgatherv(void *ctx, double *buf, const uint64_t *offset,
                                   const uint64_t *count, amp_error *err)
{
    amp_mpi *m = ctx;
    const unsigned P = m->group.size;
    uint64_t unit = 0;
    for (unsigned k = 0; k < P; k++)
        unit = gcd(gcd(unit, offset[k]), count[k]);
    if (unit == 0)
        return AMP_OK;   /* nothing to send */
    /* The unit is a datatype's int count too: where one process owns
     * every row, the gcd is the whole factor. A smaller divisor keeps
     * every offset and count whole. */
    while (unit > INT_MAX) {
        uint64_t d = 2;
        while (unit % d != 0 && d * d <= unit)
            d++;
        unit = unit % d == 0 ? unit / d : 1;
    }
    int *counts = malloc(2 * (size_t)P * sizeof *counts);
    if (counts == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    int *displs = counts + P;
    for (unsigned k = 0; k < P; k++) {
        if ((offset[k] + count[k]) / unit > INT_MAX) {
            free(counts);
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "an all-gather of %llu values in units "
                            "of %llu: MPI counts stop at %d",
                            (unsigned long long)(offset[k] + count[k]), (unsigned long long)unit,
                            INT_MAX);
        }
        counts[k] = (int)(count[k] / unit);
        displs[k] = (int)(offset[k] / unit);
    }
    MPI_Datatype type;
    int rc = MPI_Type_contiguous((int)unit, MPI_DOUBLE, &type);
    if (rc == MPI_SUCCESS && (rc = MPI_Type_commit(&type)) == MPI_SUCCESS) {
        rc = MPI_Allgatherv(MPI_IN_PLACE, 0, type, buf, counts, displs, type, MPI_COMM_WORLD);
        MPI_Type_free(&type);
    }
    free(counts);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "MPI_Allgatherv", __FILE__, __LINE__);
    return AMP_OK;
}

static amp_status group_bcast(void *ctx, void *buf, size_t bytes, amp_error *err)
{
    (void)ctx;
    if (bytes > INT_MAX)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "a broadcast of %zu bytes", bytes);
    MPI_CHECK(MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast", err);
    return AMP_OK;
}

static amp_status group_barrier(void *ctx, amp_error *err)
{
    (void)ctx;
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", err);
    return AMP_OK;
}

static const amp_group_ops mpi_ops = {group_allreduce, group_allgatherv, group_bcast,
                                      group_barrier};

static amp_status start(amp_mpi *m, amp_error *err)
{
    int provided, rank, size, lrank, lsize;
    MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread",
              err);
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
              "MPI_Comm_set_errhandler", err);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank", err);
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size", err);
    m->group = (amp_group){(unsigned)size, (unsigned)rank, &mpi_ops, m};
    m->hosts = calloc((size_t)size, HOST_MAX);
    if (m->hosts == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    char me[HOST_MAX] = "?";
    if (gethostname(me, sizeof me) != 0)
        strcpy(me, "?");
    me[HOST_MAX - 1] = '\0';
    MPI_CHECK(MPI_Allgather(me, HOST_MAX, MPI_CHAR, m->hosts, HOST_MAX, MPI_CHAR,
                            MPI_COMM_WORLD), "MPI_Allgather", err);
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                                  &m->local), "MPI_Comm_split_type", err);
    MPI_CHECK(MPI_Comm_rank(m->local, &lrank), "MPI_Comm_rank", err);
    MPI_CHECK(MPI_Comm_size(m->local, &lsize), "MPI_Comm_size", err);
    m->local_rank = (unsigned)lrank;
    m->local_size = (unsigned)lsize;
    return AMP_OK;
}

amp_status amp_mpi_start(amp_mpi **out, amp_error *err)
{
    *out = NULL;
    amp_mpi *m = calloc(1, sizeof *m);
    if (m == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    m->local = MPI_COMM_NULL;
    amp_status rc = start(m, err);
    if (rc != AMP_OK) {
        /* The others may have started: they must not wait for this one. */
        int inited = 0;
        MPI_Initialized(&inited);
        if (inited)
            MPI_Abort(MPI_COMM_WORLD, 1);
        free(m->hosts);
        free(m);
        return rc;
    }
    *out = m;
    return AMP_OK;
}

void amp_mpi_end(amp_mpi *m)
{
    if (m == NULL)
        return;
    if (m->local != MPI_COMM_NULL)
        MPI_Comm_free(&m->local);
    MPI_Finalize();
    free(m->hosts);
    free(m);
}

const amp_group *amp_mpi_group(const amp_mpi *m)
{
    return &m->group;
}

const char *amp_mpi_host(const amp_mpi *m, unsigned rank)
{
    return rank < m->group.size ? m->hosts + (size_t)rank * HOST_MAX : "?";
}

unsigned amp_mpi_local_rank(const amp_mpi *m)
{
    return m->local_rank;
}

unsigned amp_mpi_local_size(const amp_mpi *m)
{
    return m->local_size;
}

amp_status amp_mpi_cpu_share(const amp_mpi *m, unsigned *cpus, unsigned *sharers,
                             amp_error *err)
{
    cpu_set_t mine, *all;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) {
        /* No mask to read: every CPU of the host, shared by all. */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < n && c < CPU_SETSIZE; c++)
            CPU_SET((int)c, &mine);
    }
    all = malloc((size_t)m->local_size * sizeof *all);
    if (all == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                           m->local);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(err, rc, "MPI_Allgather", __FILE__, __LINE__);
    }
    unsigned n = 0;
    for (unsigned q = 0; q < m->local_size; q++) {
        cpu_set_t both;
        CPU_AND(&both, &mine, &all[q]);
        n += CPU_COUNT(&both) > 0;
    }
    free(all);
    *cpus = (unsigned)CPU_COUNT(&mine);
    *sharers = n > 0 ? n : 1;
    return AMP_OK;
}

void amp_mpi_abort(amp_mpi *m, int status)
{
    (void)m;
    MPI_Abort(MPI_COMM_WORLD, status);
    _exit(status);   /* MPI_Abort does not return; should it, this process still stops */
}
