/* amped-run's GPU backend: which GPUs, each GPU's part of the tensor,
 * resident or streamed on each, and the runs on them (CP-ALS, MTTKRP
 * timing and checking). Plain C over run/cuda's interface; built without
 * CUDA, amp_gpu_run_open only says so. Nothing here prints or exits. */
#ifndef AMP_GPU_RUN_H
#define AMP_GPU_RUN_H

#include <stdint.h>

#include "amp_core.h"
#include "amp_group.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMP_GPUS_AUTO (-1)   /* every visible GPU, or the CPU when there is none */

/* How a GPU holds its part (--memory). AMP_MEMORY_COMPRESSED: streamed
 * from the file's compressed chunks kept in host memory, decoded as they
 * stream (one GPU). AMP_MEMORY_REMAP: two mode copies resident, each
 * mode's written from the one before through the remap positions (FLYCOO,
 * run/core/remap.c; one GPU of one process for now). */
enum {
    AMP_MEMORY_AUTO, AMP_MEMORY_RESIDENT, AMP_MEMORY_STREAM, AMP_MEMORY_COMPRESSED,
    AMP_MEMORY_REMAP
};

/* --memory's word for an AMP_MEMORY_*: "auto", "resident", "stream",
 * "compressed", "remap". */
const char *amp_memory_name(int memory);

/* Device bytes of the nonzeros of nmodes copies of nnz each, values of
 * value_size bytes (c = 8 + value_size a nonzero), as memory holds them:
 * AMP_MEMORY_RESIDENT every copy, N (c nnz + 16); AMP_MEMORY_REMAP two
 * copies and every mode's 32-bit positions, 2 (c nnz + 16) + N (4 nnz +
 * 8). So 44 against 48 bytes a nonzero at 3 modes in f64, 52 against 80
 * at 5; 36 against 36 at 3 modes in f32. The block tables, the same
 * either way, are not counted; 0 for the other modes. */
uint64_t amp_memory_tensor_bytes(int memory, unsigned nmodes, uint64_t nnz, size_t value_size);

/* What --memory auto compares for one GPU, in device bytes: what the run
 * may take of it (--device-memory, or what is free), and what the run
 * needs there with every copy resident and with two copies remapped (0:
 * not possible for this part: several GPUs, or 2^32 nonzeros or more). */
typedef struct amp_memory_sizes {
    uint64_t avail, resident, remap;
    int remap_in_file;   /* every mode's remap positions are in the file */
} amp_memory_sizes;

/* How a GPU holds its part when `asked` (AMP_MEMORY_*) was asked for:
 * auto takes every copy resident where that fits, else two copies
 * remapped where that fits and the file holds every mode's remap
 * positions (computing them at load costs more than remapping saves over
 * streaming: bench/RESULTS.md, "Remap positions"), else streaming
 * (whether even that fits, and whether from compressed chunks, the plan
 * says next); any other stays as asked. */
int amp_memory_choose(int asked, const amp_memory_sizes *s);

/* Whether auto streams only because the file lacks the remap positions
 * (two copies remapped would fit where every copy does not): what the
 * report then tells the user. */
int amp_memory_remap_skipped(int asked, const amp_memory_sizes *s);

/* A phase of amp_gpu_run_open beginning: its name, and the unit (NULL:
 * none) and total (0: unknown) of the progress calls that follow. */
typedef void (*amp_gpu_phase_fn)(void *ctx, const char *phase, const char *unit,
                                 uint64_t total);

/* Streaming: the largest chunk by default, and the smallest worth a copy. */
#define AMP_STREAM_CHUNK_DEFAULT (UINT64_C(16) << 20)
#define AMP_STREAM_CHUNK_MIN 1024

/* How the GPUs of one process send each other rows (--exchange). AUTO:
 * by copies where every pair of them has peer access, else by NCCL; a run
 * of several processes always goes by NCCL. */
enum { AMP_EXCHANGE_AUTO = 0, AMP_EXCHANGE_NCCL, AMP_EXCHANGE_COPY };

typedef struct amp_gpu_opts {
    const char *path;            /* the file, for messages */
    int gpus;                    /* AMP_GPUS_AUTO or 1 to AMP_MAX_GPUS */
    int devices[AMP_MAX_GPUS];   /* --devices; ndevices 0: the first gpus */
    unsigned ndevices;
    amp_partition_kind partition;
    int overlap;                 /* send rows behind the next MTTKRP (amp_partition) */
    /* Several GPUs of this process: how rows travel, AMP_EXCHANGE_*.
     * test_no_peers (tests only): auto acts as where a pair of GPUs has no
     * peer access, so that its NCCL branch runs on NVLink machines too. */
    int exchange;
    int test_no_peers;
    int memory;                  /* AMP_MEMORY_* */
    uint64_t device_memory;      /* cap per GPU in bytes; 0: what is free */
    /* Host memory a streamed tensor may take: above it, one GPU streams
     * from compressed chunks. 0: what the system reports available. */
    uint64_t host_memory;
    uint64_t stream_chunk;       /* 0: chosen from the memory left */
    /* Two copies remapped: a remap kernel after each MTTKRP, not the
     * MTTKRP writing the next copy itself (amp_gpu_remap_set_fuse). */
    int remap_kernel;
    /* NULL, or the tensor given to amp_gpu_run_open itself: then, on
     * several GPUs, each mode copy's nonzeros are freed once every GPU's
     * part of it is built (amp_partition_tensors), so the host holds the
     * tensor plus one mode's parts at most. Only for callers that read
     * nothing of the tensor's nonzeros afterward (not --check). */
    amp_tensor *release;
    /* The open file the tensor comes from. A tensor given with its layout
     * only (amp_tensor_load_layout; release must then be that tensor)
     * goes from the file straight to one GPU when it is resident there;
     * otherwise its nonzeros are read into host memory first, with
     * progress (may be NULL) called as amp_tensor_load does. */
    const amp_file *file;
    amp_load_progress_fn progress;
    void *progress_ctx;
    /* NULL, or called (with progress_ctx) as each phase after the first
     * begins: "loading" (the nonzeros into host memory), "splitting" (the
     * GPUs' parts built, in nonzeros), "uploading" (in bytes), "NCCL
     * init" (no progress of its own); progress then reports on it. The
     * first phase, reading the file, is the caller's to name. Both are
     * called from one thread at a time. */
    amp_gpu_phase_fn phase;
    /* NULL, or the processes of a run over several (MPI), each opening
     * its run with the same options: the shards are dealt over every GPU
     * of every process, this process taking `gpus` GPUs (AMP_GPUS_AUTO:
     * one) of its host by its number among the processes there
     * (local_rank of local_size) and reading only its GPUs' shards from
     * file (release must be the tensor, file its file); amp_gpu_run_join
     * then joins the GPUs of all. */
    const amp_group *group;
    unsigned local_rank, local_size;
    /* Tests: the resident upload to this process's GPU fail_resident - 1
     * (0: none) finds its memory taken, as when another process took it
     * after the plan (amp_gpu_upload_opts.fail_alloc), so that the
     * fallback to streaming (or, forced resident, the failure) can be
     * checked on a GPU that nothing else uses. */
    unsigned fail_resident;
    /* The run will fit a batch of models (amp_gpu_run_als_batch), the
     * rank it is opened for their columns' sum: the plan counts their
     * columns side by side besides each model's own. */
    int batch;
} amp_gpu_opts;

/* The GPU CP-ALS's own settings beyond amp_cpd_opts; zero: the default. */
#define AMP_SEND_PARTS_MAX 8
typedef struct amp_gpu_als_opts {
    /* A stored factor is rescaled in place where a column's scale leaves
     * [1/bound, bound]; 0: 2^(40/(N-1)). 1 rescales at every update
     * (tests take that path on purpose). */
    double rescale_bound;
    /* Several GPUs: a mode's rows are solved and sent in this many parts
     * as its MTTKRP finishes each (1 to AMP_SEND_PARTS_MAX; 1: whole, once
     * solved). 0, the default: 2 where the rows go by copies, else whole
     * (bench/RESULTS.md has the measurements). */
    unsigned send_parts;
    /* Tests: GPU fail_gpu - 1 of the run (0: none) fails as a device
     * would (AMP_ERR_CUDA) before mode 2's update of iteration fail_iter
     * (1-based), while the others are inside that iteration, so that
     * their stop (every collective cancelled, the failed GPU named) can
     * be checked on a machine whose GPUs do not fail on demand. */
    unsigned fail_gpu, fail_iter;
} amp_gpu_als_opts;

typedef struct amp_gpu_run amp_gpu_run;

/* Pick the GPUs, split t among them and put each part on its GPU. *run is
 * NULL (and the status AMP_OK) when the CPU should run instead: no GPU
 * found or a rank above the kernels', with opts->gpus AMP_GPUS_AUTO.
 * A resident part whose device allocation finds the GPU's memory taken
 * (by another process since the plan) is streamed instead under
 * AMP_MEMORY_AUTO (amp_gpu_run_note says so) and fails the open under
 * AMP_MEMORY_RESIDENT, naming the GPU, what it needs and what is free. */
amp_status amp_gpu_run_open(const amp_gpu_opts *opts, const amp_cpd_opts *cpd,
                            const amp_tensor *t, amp_gpu_run **run, amp_error *err);
/* Under several processes (opts->group), once every process has opened
 * its run: one communicator over every GPU of every process, NCCL's id
 * made by process 0 and sent through the group (collective: every
 * process calls it at once; a failure on one leaves the others waiting,
 * so the caller must stop them all). Alone: nothing to do. */
amp_status amp_gpu_run_join(amp_gpu_run *run, amp_error *err);
void amp_gpu_run_close(amp_gpu_run *run);

/* The CUDA devices this process sees: 0 without CUDA or a driver. */
unsigned amp_gpu_visible(void);

/* GCP (--method gcp) on one GPU: the device o asks for (--devices, one;
 * else the first), its number in *ordinal and its name; *ordinal -1 (and
 * AMP_OK) where o asks for none in particular (AMP_GPUS_AUTO) and there
 * is none, or the build has no CUDA. */
amp_status amp_gpu_gcp_pick(const amp_gpu_opts *o, int *ordinal, char *name, size_t name_size,
                            amp_error *err);
/* How GCP runs on that GPU for --memory `memory` (AMP_MEMORY_AUTO,
 * _RESIDENT or _STREAM): *stream 1 where its samples are drawn on the
 * host and streamed (stream; auto where the resident form of t at rank R
 * does not fit in the GPU's free memory), 0 where the tensor's form is
 * resident. */
amp_status amp_gpu_gcp_memory(int ordinal, const amp_tensor *t, unsigned R, int memory,
                              int *stream, amp_error *err);
/* GCP-Adam on that GPU (run/cuda/gcp.cu) from t in host memory: as
 * amp_cpu_gcp, with the same draws; c->seconds the GPU's phases. */
amp_status amp_gpu_gcp_run(int ordinal, const amp_tensor *t, const amp_cpd_opts *o, int stream,
                           amp_cpd *c, amp_error *err);

/* The GPUs this process would see, counted without starting CUDA:
 * CUDA_VISIBLE_DEVICES's entries where it is set, else the driver's
 * /proc/driver/nvidia/gpus; 0 when neither says. */
unsigned amp_gpu_count_unstarted(void);

/* Call before anything starts CUDA in a process that will drive `gpus`
 * GPUs at once. With two or more, CUDA's lazy loading of kernels (its
 * default) can deadlock their threads: loading a kernel on one GPU may
 * wait for that device, whose NCCL kernel waits for another GPU, whose
 * thread waits for the loader's lock. So ask for every kernel at start-up
 * (CUDA_MODULE_LOADING=EAGER: about 2 s on an H200 pair, bench/RESULTS.md)
 * unless the environment already says. 1 when it asked. */
int amp_gpu_prepare_process(unsigned gpus);

/* GPUs i < j of a run's uuid[0 .. n) (16 bytes each) that are the same
 * device, the first such pair: 1 and *i, *j set, or 0 when all differ.
 * Two processes that each see one GPU under the same CUDA_VISIBLE_DEVICES
 * both take it; the run must say so before NCCL meets it. */
int amp_gpu_same_device(const unsigned char (*uuid)[16], unsigned n, unsigned *i, unsigned *j);

/* NULL, or what the caller should tell the user of this process's GPU
 * gpu: its part streamed where the plan said resident, and why. */
const char *amp_gpu_run_note(const amp_gpu_run *run, unsigned gpu);

/* This process's GPUs, and the run's over every process (the same alone). */
unsigned amp_gpu_run_count(const amp_gpu_run *run);
unsigned amp_gpu_run_total(const amp_gpu_run *run);
double amp_gpu_run_upload_seconds(const amp_gpu_run *run);   /* split and upload */
/* Seconds spent reading the file's nonzeros into host memory inside
 * amp_gpu_run_open (not in the upload's), and whether the tensor went
 * from the file straight to the GPU (then the upload's seconds include
 * reading it). */
double amp_gpu_run_load_seconds(const amp_gpu_run *run);
int amp_gpu_run_direct(const amp_gpu_run *run);
/* Host-to-device bytes per nonzero per mode of an iteration; 0 when
 * every GPU holds its part resident. */
double amp_gpu_run_stream_bytes_per_nnz(const amp_gpu_run *run, const amp_tensor *t);

/* What one GPU of the run is and holds, for reports: gpu is one of this
 * process's, 0 .. amp_gpu_run_count - 1, here and in amp_gpu_run_times. */
typedef struct amp_gpu_info {
    int device, sm_count;
    const char *name;
    int streamed;
    int compressed;              /* streamed from compressed chunks */
    size_t host_bytes;           /* compressed: the chunks and page-locked slots */
    uint64_t chunk_nnz;          /* streamed: nonzeros a copy */
    size_t tensor_bytes, ring_bytes, need_bytes;
    double stream_bytes_per_nnz;
    /* How it holds its part (AMP_MEMORY_RESIDENT, _REMAP, _STREAM or
     * _COMPRESSED), what was asked (AMP_MEMORY_*), and the sizes the plan
     * compared; tensor_plan_bytes: the tensor's device bytes as planned
     * for a part held on the device (copies, positions, block tables), to
     * set beside tensor_bytes, as it came. */
    int memory, asked;
    amp_memory_sizes sizes;
    size_t tensor_plan_bytes;
    /* Two copies remapped: modes whose positions came from the file's
     * REMAP sections (the rest computed at load), the seconds that took
     * (load time), and the remap kernels' GPU time so far and count. */
    unsigned remap_from_file;
    double remap_positions_seconds, remap_seconds;
    unsigned remaps, remaps_fused;   /* copies a remap kernel wrote; an MTTKRP wrote */
    unsigned index;                  /* its number among every GPU of the run */
    uint32_t shards[AMP_MAX_MODES];  /* the shards dealt to it, per mode */
    uint64_t nnz[AMP_MAX_MODES], rows[AMP_MAX_MODES];
} amp_gpu_info;
void amp_gpu_run_info(const amp_gpu_run *run, unsigned gpu, amp_gpu_info *info);
/* Largest GPU's nonzeros over the mean in mode m (1 on one GPU); *best
 * the bound the file's shards allow (see amp_partition_imbalance). */
double amp_gpu_run_imbalance(const amp_gpu_run *run, unsigned m, double *best);

/* Whether the run's GPUs send each other rows by copies (what
 * AMP_EXCHANGE_AUTO chose, or AMP_EXCHANGE_COPY); 0 on one GPU. */
int amp_gpu_run_by_copies(const amp_gpu_run *run);

/* After amp_gpu_run_als: the parts mode m's rows went out in at its last
 * update (1: whole, once solved; 0: at the end of the update, as on one
 * GPU, on the first iteration or with overlap). */
unsigned amp_gpu_run_parts(const amp_gpu_run *run, unsigned m);

/* CP-ALS on the run's GPUs from c's factors (file order in and out). */
amp_status amp_gpu_run_als(amp_gpu_run *run, const amp_tensor *t, const amp_cpd_opts *o,
                           const amp_gpu_als_opts *go, amp_cpd *c, amp_error *err);
/* Several models fitted together on the run's GPU (amped-run --starts,
 * --ranks; one GPU of one process, resident, streamed or remapped: else
 * AMP_ERR_UNSUPPORTED): cs[k] model k's start at its own rank, the sum of
 * their ranks within AMP_GPU_MAX_RANK and the rank the run was opened
 * for; one MTTKRP a mode an iteration over every live model's columns
 * side by side, each model updated by the same code as a run alone
 * (amp_gpu_run_als) on its own stream, with its own Grams, solve,
 * lambda, fit and stop: a model whose fit changes by less than o->tol
 * drops out of the passes that follow. CP-ALS and the constrained
 * methods (not CP-APR, GCP or completion). on_iter(ctx, k, ...) after each
 * model's iteration; the MTTKRPs' GPU seconds added to *mttkrp_seconds
 * (NULL: not counted). Factors in file order in and out, normalized. */
typedef void (*amp_gpu_batch_fn)(void *ctx, unsigned model, unsigned iter, double fit,
                                 double delta, double seconds);
amp_status amp_gpu_run_als_batch(amp_gpu_run *run, const amp_tensor *t, const amp_cpd_opts *o,
                                 unsigned K, amp_cpd *const *cs, amp_gpu_batch_fn on_iter,
                                 void *ctx, double *mttkrp_seconds, amp_error *err);
/* After amp_gpu_run_als: per GPU, per mode and per phase, in seconds (see
 * amp_gpu_run_stats). */
void amp_gpu_run_times(const amp_gpu_run *run, unsigned gpu, double *mttkrp, double *busy,
                       double *comm, double *exchange, double *idle, double *phase);

/* rounds MTTKRPs of every mode on every GPU at once: sec[m] the mean
 * time of one, the slowest GPU's. */
amp_status amp_gpu_run_time_mttkrp(amp_gpu_run *run, const amp_tensor *t, const amp_cpd *c,
                                   unsigned rounds, double *sec, amp_error *err);
/* Every mode's MTTKRP, the GPUs' parts put together, against the f64
 * reference: the largest normwise relative difference per mode. */
amp_status amp_gpu_run_check(amp_gpu_run *run, const amp_tensor *t, const amp_cpd *c,
                             double *rel, amp_error *err);

#ifdef __cplusplus
}
#endif
#endif
