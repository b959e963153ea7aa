/* amped-run's GPU backend (gpu_run.h). */
#include <config.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amp_alloc.h"
#include "amp_cli.h"
#include "amp_threads.h"
#include "amp_timer.h"
#include "gpu_run.h"
#ifdef AMP_HAVE_CUDA
#include "amp_comm.h"
#include "amp_cuda.h"
#endif

#ifndef AMP_HAVE_CUDA

amp_status amp_gpu_run_open(const amp_gpu_opts *o, const amp_cpd_opts *cpd,
                            const amp_tensor *t, amp_gpu_run **run, amp_error *err)
{
    (void)cpd, (void)t;
    *run = NULL;
    if (o->gpus == AMP_GPUS_AUTO && o->ndevices == 0)
        return AMP_OK;
    return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "this build has no CUDA backend (configure "
                    "--with-cuda); --gpus 0 runs on the CPU");
}

unsigned amp_gpu_visible(void)
{
    return 0;
}

amp_status amp_gpu_gcp_pick(const amp_gpu_opts *o, int *ordinal, char *name, size_t name_size,
                            amp_error *err)
{
    *ordinal = -1;
    if (name_size)
        name[0] = '\0';
    if (o->gpus == AMP_GPUS_AUTO && o->ndevices == 0)
        return AMP_OK;
    return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "this build has no CUDA backend (configure "
                    "--with-cuda); --gpus 0 runs on the CPU");
}

amp_status amp_gpu_gcp_memory(int ordinal, const amp_tensor *t, unsigned R, int memory,
                              int *stream, amp_error *err)
{
    (void)ordinal, (void)t, (void)R, (void)memory;
    *stream = 0;
    return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "this build has no CUDA backend");
}

amp_status amp_gpu_gcp_run(int ordinal, const amp_tensor *t, const amp_cpd_opts *o, int stream,
                           amp_cpd *c, amp_error *err)
{
    (void)ordinal, (void)t, (void)o, (void)stream, (void)c;
    return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "this build has no CUDA backend");
}

/* Without CUDA no run is ever opened: the rest is never called. */
amp_status amp_gpu_run_join(amp_gpu_run *run, amp_error *err)
{
    (void)run, (void)err;
    return AMP_OK;
}

void amp_gpu_run_close(amp_gpu_run *run)
{
    (void)run;
}

unsigned amp_gpu_run_count(const amp_gpu_run *run)
{
    (void)run;
    return 0;
}

const char *amp_gpu_run_note(const amp_gpu_run *run, unsigned gpu)
{
    (void)run, (void)gpu;
    return NULL;
}

unsigned amp_gpu_run_total(const amp_gpu_run *run)
{
    (void)run;
    return 0;
}

double amp_gpu_run_upload_seconds(const amp_gpu_run *run)
{
    (void)run;
    return 0;
}

double amp_gpu_run_load_seconds(const amp_gpu_run *run)
{
    (void)run;
    return 0;
}

int amp_gpu_run_direct(const amp_gpu_run *run)
{
    (void)run;
    return 0;
}

double amp_gpu_run_stream_bytes_per_nnz(const amp_gpu_run *run, const amp_tensor *t)
{
    (void)run, (void)t;
    return 0;
}

void amp_gpu_run_info(const amp_gpu_run *run, unsigned gpu, amp_gpu_info *info)
{
    (void)run, (void)gpu;
    memset(info, 0, sizeof *info);
}

double amp_gpu_run_imbalance(const amp_gpu_run *run, unsigned m, double *best)
{
    (void)run, (void)m;
    if (best)
        *best = 1;
    return 1;
}

unsigned amp_gpu_run_parts(const amp_gpu_run *run, unsigned m)
{
    (void)run, (void)m;
    return 0;
}

int amp_gpu_run_by_copies(const amp_gpu_run *run)
{
    (void)run;
    return 0;
}

static amp_status no_cuda(amp_error *err)
{
    return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "this build has no CUDA backend");
}

amp_status amp_gpu_run_als(amp_gpu_run *run, const amp_tensor *t, const amp_cpd_opts *o,
                           const amp_gpu_als_opts *go, amp_cpd *c, amp_error *err)
{
    (void)run, (void)t, (void)o, (void)go, (void)c;
    return no_cuda(err);
}

amp_status amp_gpu_run_als_batch(amp_gpu_run *run, const amp_tensor *t, const amp_cpd_opts *o,
                                 unsigned K, amp_cpd *const *cs, amp_gpu_batch_fn on_iter,
                                 void *ctx, double *mttkrp_seconds, amp_error *err)
{
    (void)run, (void)t, (void)o, (void)K, (void)cs, (void)on_iter, (void)ctx,
        (void)mttkrp_seconds;
    return no_cuda(err);
}

void amp_gpu_run_times(const amp_gpu_run *run, unsigned gpu, double *mttkrp, double *busy,
                       double *comm, double *exchange, double *idle, double *phase)
{
    (void)run, (void)gpu, (void)mttkrp, (void)busy, (void)comm, (void)exchange, (void)idle,
        (void)phase;
}

amp_status amp_gpu_run_time_mttkrp(amp_gpu_run *run, const amp_tensor *t, const amp_cpd *c,
                                   unsigned rounds, double *sec, amp_error *err)
{
    (void)run, (void)t, (void)c, (void)rounds, (void)sec;
    return no_cuda(err);
}

amp_status amp_gpu_run_check(amp_gpu_run *run, const amp_tensor *t, const amp_cpd *c,
                             double *rel, amp_error *err)
{
    (void)run, (void)t, (void)c, (void)rel;
    return no_cuda(err);
}

#else

struct amp_gpu_run {
    unsigned n;                       /* this process's GPUs */
    /* Under several processes (group not NULL), the GPUs of every one:
     * this process's are GPUs first .. first + n - 1 of total. Alone,
     * first 0 and total n. */
    const amp_group *group;
    unsigned first, total;
    amp_cuda_device dev[AMP_MAX_GPUS];
    amp_partition part;
    int have_part;
    amp_tensor parts[AMP_MAX_GPUS];   /* have_part: each of this process's GPUs' part */
    amp_gpu_tensor *g[AMP_MAX_GPUS];
    amp_comm *comm[AMP_MAX_GPUS];
    int f32;                          /* the MTTKRP's precision */
    unsigned rank;                    /* the decomposition's */
    amp_method method;                /* its method: what the device must hold */
    int completion;                   /* --observed nonzeros (completion.cu) */
    int threads;                      /* CPU threads for the host's work */
    unsigned nmodes;
    uint64_t nnz[AMP_MAX_GPUS][AMP_MAX_MODES], rows[AMP_MAX_GPUS][AMP_MAX_MODES];
    uint64_t chunk[AMP_MAX_GPUS];     /* 0: resident (every copy, or two remapped) */
    size_t need[AMP_MAX_GPUS];
    int asked;                        /* --memory, AMP_MEMORY_* */
    int memory[AMP_MAX_GPUS];         /* how each holds its part: AMP_MEMORY_*, not AUTO */
    amp_memory_sizes sizes[AMP_MAX_GPUS];   /* what the plan compared */
    size_t tensor_plan[AMP_MAX_GPUS];  /* the part's device bytes as planned; 0: streamed */
    /* Two copies remapped (one GPU): modes whose positions came from the
     * file's REMAP sections, and the seconds they took, read or computed
     * (in load_seconds too). */
    unsigned remap_from_file;
    double remap_positions_seconds;
    double upload_seconds, load_seconds;
    int direct;                       /* from the file straight to the GPU */
    uint32_t nshards[AMP_MAX_MODES];  /* the file's shards per mode */
    int compressed;                   /* streamed from compressed chunks */
    char note[AMP_MAX_GPUS][320];     /* amp_gpu_run_note; "" for none */
    amp_gpu_run_stats stats;
};

static void announce(const amp_gpu_opts *o, const char *phase, const char *unit,
                     uint64_t total)
{
    if (o->phase != NULL)
        o->phase(o->progress_ctx, phase, unit, total);
}

static const amp_tensor *part_of(const amp_gpu_run *r, const amp_tensor *t, unsigned k)
{
    return r->have_part ? &r->parts[k] : t;
}

/* The nonzeros of a tensor given with its layout only into host memory
 * (o->release is that tensor). Never for a process of several: it reads
 * its GPUs' parts alone (split_dist). */
static amp_status load_nonzeros(const amp_gpu_opts *o, amp_gpu_run *r, amp_error *err)
{
    if (o->release == NULL || !o->release->layout_only || r->group)
        return AMP_OK;
    announce(o, "loading", "B", 0);
    double t0 = amp_now();
    amp_status rc = amp_tensor_load_nonzeros(o->file, r->threads, o->progress, o->progress_ctx,
                                             o->release, err);
    r->load_seconds += amp_now() - t0;
    return rc;
}

void amp_gpu_run_close(amp_gpu_run *r)
{
    if (r == NULL)
        return;
    for (unsigned k = 0; k < r->n; k++) {
        amp_gpu_tensor_free(r->g[k]);
        amp_comm_free(r->comm[k]);
        if (r->have_part)
            amp_tensor_free(&r->parts[k]);
    }
    if (r->have_part)
        amp_partition_free(&r->part);
    free(r);
}

/* "0 (NVIDIA H200), 1 (NVIDIA H200)" */
static void list_names(const amp_cuda_device *dev, int count, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < count && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%d (%s)", i ? ", " : "", dev[i].ordinal,
                               dev[i].name);
}

/* What the run may take of GPU d's memory: what is free, or less with
 * --device-memory. */
static size_t device_budget(const amp_gpu_opts *o, const amp_cuda_device *d)
{
    size_t avail = d->free_memory;
    if (o->device_memory && o->device_memory < avail)
        avail = (size_t)o->device_memory;
    return avail;
}

/* NULL where a GPU's part can be held as two copies remapped (a whole
 * tensor on one GPU of one process, positions in 32 bits), else why not. */
static const char *no_remap(const amp_gpu_run *r, const amp_tensor *part)
{
    if (r->method == AMP_METHOD_APR)   /* apr.cu: not wired to the remap between modes */
        return "--method cp-apr";
    if (r->completion)                 /* completion.cu: likewise */
        return "--observed nonzeros";
    if (r->n > 1 || r->group || r->have_part)
        return "several GPUs";
    if (part->nnz > UINT32_MAX)
        return "2^32 nonzeros or more (its positions are 32-bit)";
    return NULL;
}

/* amp_gpu_als_bytes at the run's rank; for a batch of models
 * (amp_gpu_run_als_batch, the rank their columns' sum) their columns side
 * by side once more besides each model's own: every mode's factor as the
 * MTTKRP reads it, and its output. */
static size_t run_bytes(const amp_gpu_opts *o, const amp_gpu_run *r, const amp_tensor *part,
                        uint64_t chunk_nnz)
{
    size_t bytes = amp_gpu_als_bytes(part, r->rank, r->f32, r->method, chunk_nnz);
    if (o->batch) {
        const size_t word = r->f32 ? sizeof(float) : sizeof(double);
        uint64_t max_rows = 0;
        for (unsigned m = 0; m < part->nmodes; m++) {
            bytes += (size_t)part->rows[m] * r->rank * word;
            max_rows = part->rows[m] > max_rows ? part->rows[m] : max_rows;
        }
        bytes += (size_t)max_rows * r->rank * word;
    }
    return bytes;
}

/* The run's device bytes for part: with every copy resident, and with two
 * remapped where that is possible (else 0). */
static amp_memory_sizes sizes_of(const amp_gpu_opts *o, const amp_gpu_run *r,
                                 const amp_tensor *part, size_t avail)
{
    amp_memory_sizes s = {avail, run_bytes(o, r, part, 0), 0, 0};
    s.remap_in_file = o->file != NULL;
    for (unsigned d = 0; d < part->nmodes && s.remap_in_file; d++)
        s.remap_in_file = amp_remap_in_file(o->file, d);
    const size_t vsize = amp_value_size(part->value_type);
    /* One GPU's whole tensor: every copy part->nnz long, so the copies in
     * amp_gpu_als_bytes are amp_memory_tensor_bytes' to the byte. */
    if (no_remap(r, part) == NULL)
        s.remap = s.resident -
                  amp_memory_tensor_bytes(AMP_MEMORY_RESIDENT, part->nmodes, part->nnz, vsize) +
                  amp_memory_tensor_bytes(AMP_MEMORY_REMAP, part->nmodes, part->nnz, vsize);
    return s;
}

/* Every copy resident when it fits, else two remapped when that fits and
 * the file holds the positions (amp_memory_choose), else streamed in
 * chunks of what the memory left allows, or as forced: the decision for
 * one GPU and its part, with the sizes it compared. */
static amp_status plan(const amp_gpu_opts *o, const amp_gpu_run *r, const amp_tensor *part,
                       const amp_cuda_device *d, uint64_t *chunk_out, size_t *need_out,
                       int *memory_out, amp_memory_sizes *sizes_out, amp_error *err)
{
    size_t avail = device_budget(o, d);
    const amp_memory_sizes sizes = sizes_of(o, r, part, avail);
    const int memory = amp_memory_choose(o->memory, &sizes);
    size_t need = sizes.resident;
    uint64_t chunk = 0, max_nnz = 1;
    char nb[32], ab[32];
    amp_format_bytes(ab, sizeof ab, avail);
    for (unsigned m = 0; m < part->nmodes; m++)
        max_nnz = part->copies[m].nnz > max_nnz ? part->copies[m].nnz : max_nnz;
    *memory_out = memory;
    *sizes_out = sizes;
    if (memory == AMP_MEMORY_STREAM || memory == AMP_MEMORY_COMPRESSED) {
        /* What is left after the factors and work space goes to the ring
         * of chunk buffers. */
        size_t base = run_bytes(o, r, part, 1) - amp_gpu_ring_bytes(part, 1);
        size_t per = amp_gpu_ring_bytes(part, 1);
        chunk = o->stream_chunk;
        if (chunk == 0) {
            chunk = avail > base ? (avail - base) / per : 0;
            chunk = chunk > AMP_STREAM_CHUNK_DEFAULT ? AMP_STREAM_CHUNK_DEFAULT : chunk;
            chunk = chunk > max_nnz ? max_nnz : chunk;
        }
        need = base + amp_gpu_ring_bytes(part, chunk);
        amp_format_bytes(nb, sizeof nb, need);
        if (chunk < (max_nnz < AMP_STREAM_CHUNK_MIN ? max_nnz : AMP_STREAM_CHUNK_MIN) ||
            need > avail)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: rank %u needs %s of GPU memory even with "
                            "the tensor streamed%s, and GPU %d (%s) offers %s%s; --gpus 0 runs "
                            "on the CPU", o->path, r->rank, nb,
                            o->stream_chunk ? " in chunks of --stream-chunk" : "", d->ordinal,
                            d->name, ab, o->device_memory ? " (--device-memory)" : " free");
        if (chunk == 0)   /* an empty part: a ring of one nonzero */
            chunk = 1;
    } else if (memory == AMP_MEMORY_REMAP) {
        if (no_remap(r, part))
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%s: --memory remap: not with %s; "
                            "--memory resident or stream", o->path, no_remap(r, part));
        need = sizes.remap;
        amp_format_bytes(nb, sizeof nb, need);
        if (need > avail)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: rank %u needs %s of GPU memory with two "
                            "copies of the tensor remapped, and GPU %d (%s) offers %s%s; "
                            "--memory auto streams it instead", o->path, r->rank, nb,
                            d->ordinal, d->name, ab,
                            o->device_memory ? " (--device-memory)" : " free");
    } else {
        amp_format_bytes(nb, sizeof nb, need);
        if (need > avail)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: rank %u needs %s of GPU memory with the "
                            "tensor resident, and GPU %d (%s) offers %s%s; --memory auto "
                            "streams it instead", o->path, r->rank, nb, d->ordinal, d->name, ab,
                            o->device_memory ? " (--device-memory)" : " free");
    }
    *chunk_out = chunk;
    *need_out = need;
    return AMP_OK;
}

/* A streamed run on one GPU takes the tensor into host memory (and its
 * copies repacked for the link, 8 bytes a nonzero each) unless host
 * memory cannot hold that: then the compressed chunks stream instead. */
static int want_compressed(const amp_gpu_opts *o, const amp_tensor *t)
{
    if (o->memory == AMP_MEMORY_COMPRESSED)
        return 1;
    if (o->memory == AMP_MEMORY_RESIDENT || o->file == NULL)
        return 0;
    double need = (double)t->nnz * t->nmodes * (16 + amp_value_size(t->value_type));
    double have = (double)(o->host_memory ? o->host_memory : amp_host_memory_available());
    return need > have;
}

/* A process of several without --devices: n GPUs (AMP_GPUS_AUTO: one) of
 * its host by its number there, local rank l taking GPUs l n .. l n +
 * n - 1; or all it sees when it sees exactly n (a launcher gave each
 * process its own: srun --gpus-per-task, CUDA_VISIBLE_DEVICES set per
 * process). Only those are described (a context made on each). */
static amp_status pick_local_gpus(const amp_gpu_opts *o, int count, amp_gpu_run *r,
                                  amp_error *err)
{
    r->n = o->gpus == AMP_GPUS_AUTO ? 1 : (unsigned)o->gpus;
    unsigned from = o->local_rank * r->n;
    if (r->n == (unsigned)count)
        from = 0;
    else if ((uint64_t)o->local_size * r->n > (unsigned)count)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%u processes on this host with %u GPU%s each "
                        "need %u GPUs, and it has %d; start fewer processes a host (mpirun "
                        "--map-by ppr:N:node) or give fewer --gpus", o->local_size, r->n,
                        r->n == 1 ? "" : "s", o->local_size * r->n, count);
    for (unsigned k = 0; k < r->n; k++)
        AMP_CHECK(amp_cuda_describe_device((int)(from + k), &r->dev[k], err));
    return AMP_OK;
}

/* The GPUs of this process: --devices, or the first --gpus (every one for
 * AMP_GPUS_AUTO) of the count found, or under several processes its share
 * of its host's (pick_local_gpus). */
static amp_status pick_gpus(const amp_gpu_opts *o, const amp_cuda_device *dev, int count,
                            amp_gpu_run *r, amp_error *err)
{
    char names[4096];
    if (o->group && o->ndevices == 0)   /* dev is not filled in */
        return pick_local_gpus(o, count, r, err);
    list_names(dev, count, names, sizeof names);
    if (o->ndevices > 0) {
        r->n = o->ndevices;
        for (unsigned k = 0; k < r->n; k++) {
            if (o->devices[k] < 0 || o->devices[k] >= count)
                return AMP_FAIL(err, AMP_ERR_USAGE, "--devices: there is no GPU %d; this "
                                "machine has %d: %s", o->devices[k], count, names);
            r->dev[k] = dev[o->devices[k]];
        }
        return AMP_OK;
    }
    r->n = o->gpus == AMP_GPUS_AUTO ? (unsigned)count : (unsigned)o->gpus;
    if (r->n > (unsigned)count)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--gpus %u: this machine has %d GPU%s: %s", r->n,
                        count, count == 1 ? "" : "s", names);
    for (unsigned k = 0; k < r->n; k++)
        r->dev[k] = dev[k];
    return AMP_OK;
}

/* Several GPUs: the shards dealt and each GPU's part built (the tensor's
 * nonzeros read into host memory first when they are not there). */
static amp_status split(const amp_gpu_opts *o, const amp_tensor *t, amp_gpu_run *r,
                        amp_error *err)
{
    AMP_CHECK(load_nonzeros(o, r, err));
    AMP_CHECK(amp_partition_new(t, r->n, o->partition, &r->part, err));
    r->have_part = 1;
    r->part.overlap = o->overlap;
    announce(o, "splitting", "nz", 0);
    return amp_partition_tensors(t, &r->part, r->threads, o->release, o->progress,
                                 o->progress_ctx, r->parts, err);
}

/* A process of several: the shards dealt over every GPU of every process
 * (each the same number), and its own GPUs' parts read from the file
 * alone, chunk by chunk, never the whole tensor. */
static amp_status split_dist(const amp_gpu_opts *o, const amp_tensor *t, amp_gpu_run *r,
                             amp_error *err)
{
    const amp_group *g = o->group;
    if ((uint64_t)r->n * g->size > AMP_MAX_GPUS)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%u processes of %u GPU%s: a run joins at "
                        "most %d GPUs", g->size, r->n, r->n == 1 ? "" : "s", AMP_MAX_GPUS);
    r->total = r->n * g->size;
    r->first = r->n * g->rank;
    AMP_CHECK(amp_partition_new(t, r->total, AMP_PARTITION_OWNER, &r->part, err));
    r->have_part = 1;
    r->part.overlap = o->overlap;
    double t0 = amp_now();
    amp_status rc = AMP_OK;
    for (unsigned k = 0; k < r->n && rc == AMP_OK; k++)
        rc = amp_partition_load(o->file, t, &r->part, r->first + k, r->threads, o->progress,
                                o->progress_ctx, &r->parts[k], err);
    r->load_seconds += amp_now() - t0;
    return rc;
}

/* One GPU streams the file's chunks as they are, compressed: the ring
 * holds the largest. */
static amp_status plan_compressed(const amp_gpu_opts *o, const amp_tensor *t, amp_gpu_run *r,
                                  amp_error *err)
{
    r->compressed = 1;
    r->memory[0] = AMP_MEMORY_COMPRESSED;
    r->chunk[0] = amp_gpu_file_chunk_nnz(o->file);
    r->need[0] = run_bytes(o, r, t, r->chunk[0]);
    size_t avail = device_budget(o, &r->dev[0]);
    if (r->need[0] > avail) {
        char nb[32], ab[32];
        return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: rank %u needs %s of GPU memory streamed "
                        "from compressed chunks (the file's chunks hold up to %" PRIu64
                        " nonzeros), and GPU %d (%s) offers %s", o->path, r->rank,
                        amp_format_bytes(nb, sizeof nb, r->need[0]), r->chunk[0],
                        r->dev[0].ordinal, r->dev[0].name,
                        amp_format_bytes(ab, sizeof ab, avail));
    }
    return AMP_OK;
}

/* The device bytes of part's tensor as `memory` holds it: the copies (or
 * two and the positions) and every block table, as the upload allocates
 * them; 0 when streamed. */
static size_t tensor_plan_bytes(const amp_tensor *part, int memory)
{
    const size_t vsize = amp_value_size(part->value_type);
    size_t bytes = 0;
    if (memory != AMP_MEMORY_RESIDENT && memory != AMP_MEMORY_REMAP)
        return 0;
    for (unsigned m = 0; m < part->nmodes; m++) {
        bytes += (part->copies[m].nblocks * 2 + 1) * 8;
        if (memory == AMP_MEMORY_RESIDENT)
            bytes += amp_memory_tensor_bytes(memory, 1, part->copies[m].nnz, vsize);
    }
    if (memory == AMP_MEMORY_REMAP)
        bytes += amp_memory_tensor_bytes(memory, part->nmodes, part->nnz, vsize);
    return bytes;
}

/* Per GPU, how it holds its part and in what chunks (plan); then whether
 * one GPU streams the file's compressed chunks instead. */
static amp_status plan_all(const amp_gpu_opts *o, const amp_tensor *t, amp_gpu_run *r,
                           amp_error *err)
{
    r->nmodes = t->nmodes;
    for (unsigned m = 0; m < t->nmodes; m++)
        r->nshards[m] = t->copies[m].layout.nshards;
    for (unsigned k = 0; k < r->n; k++) {
        const amp_tensor *pt = part_of(r, t, k);
        for (unsigned m = 0; m < t->nmodes; m++) {
            r->nnz[k][m] = pt->copies[m].nnz;
            r->rows[k][m] = pt->copies[m].row_count;
        }
        AMP_CHECK(plan(o, r, pt, &r->dev[k], &r->chunk[k], &r->need[k], &r->memory[k],
                       &r->sizes[k], err));
    }
    if (r->n == 1 && !r->have_part && r->chunk[0] != 0 && want_compressed(o, t))
        AMP_CHECK(plan_compressed(o, t, r, err));
    for (unsigned k = 0; k < r->n; k++)
        r->tensor_plan[k] = tensor_plan_bytes(part_of(r, t, k), r->memory[k]);
    r->direct = r->n == 1 && !r->have_part && r->memory[0] == AMP_MEMORY_RESIDENT &&
                t->layout_only;
    return AMP_OK;
}

/* The uploads' progress: bytes of every GPU's part, summed over the
 * GPUs that upload at once, passed on to the caller's callback. */
typedef struct upload_progress {
    const amp_gpu_opts *o;
    uint64_t done, total;
} upload_progress;

static void upload_progressed(void *ctx, uint64_t bytes)
{
    upload_progress *u = ctx;
    uint64_t done;
#pragma omp atomic capture
    done = u->done += bytes;
    /* The caller's callback runs on one thread at a time. */
#pragma omp critical(amp_gpu_upload_progress)
    u->o->progress(u->o->progress_ctx, done, u->total);
}

/* Bytes of words and values an upload of part moves (as reported). */
static uint64_t part_bytes(const amp_tensor *part)
{
    uint64_t bytes = 0;
    for (unsigned m = 0; m < part->nmodes; m++)
        bytes += part->copies[m].nnz * (8 + amp_value_size(part->value_type));
    return bytes;
}

/* GPU k's resident upload found its memory taken (by another process
 * since the plan, say), and freed what it had. Forced resident: the run
 * stops, saying what it needs and what is free now. Under --memory auto
 * the part is planned again from what is free now and streamed (from
 * the file's compressed chunks where the plan would have chosen them:
 * one GPU, nonzeros not yet in host memory, too many for it), and the
 * note says so. why: the failed upload's error. */
static amp_status stream_instead(const amp_gpu_opts *o, const amp_tensor *t, amp_gpu_run *r,
                                 unsigned k, const amp_error *why, amp_error *err)
{
    amp_cuda_device *d = &r->dev[k];
    const size_t planned_free = device_budget(o, d), resident_need = r->need[k];
    /* How the plan meant to hold it, as the messages say it. */
    const char *held = r->memory[k] == AMP_MEMORY_REMAP ? "as two remapped copies" : "resident";
    char nb[32], fb[32], pb[32];
    AMP_CHECK(amp_cuda_describe_device(d->ordinal, d, err));
    amp_format_bytes(nb, sizeof nb, resident_need);
    amp_format_bytes(fb, sizeof fb, d->free_memory);
    amp_format_bytes(pb, sizeof pb, planned_free);
    if (o->memory != AMP_MEMORY_AUTO)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: GPU %d (%s) ran out of memory taking the "
                        "tensor %s (%s): rank %u needs %s of GPU memory with the tensor %s, "
                        "%s was %s when planned and %s is free now (another process may have "
                        "taken it); --memory auto streams it instead", o->path, d->ordinal,
                        d->name, held, amp_error_message(why), r->rank, nb, held, pb,
                        o->device_memory ? "offered (--device-memory)" : "free", fb);
    amp_gpu_opts so = *o;
    so.memory = AMP_MEMORY_STREAM;
    const amp_tensor *part = part_of(r, t, k);
    amp_memory_sizes unused;
    AMP_CHECK(plan(&so, r, part, d, &r->chunk[k], &r->need[k], &r->memory[k], &unused, err));
    r->tensor_plan[k] = 0;
    if (r->direct) {
        r->direct = 0;
        if (want_compressed(&so, t))
            AMP_CHECK(plan_compressed(&so, t, r, err));
        else
            AMP_CHECK(load_nonzeros(o, r, err));
    }
    /* Through a buffer of its own: d->name lies in r too. */
    char note[sizeof r->note[k]];
    snprintf(note, sizeof note, "GPU %d (%s) ran out of memory taking the tensor %s: %s "
             "needed, %s free now (another process may have taken it); streamed %s instead",
             d->ordinal, d->name, held, nb, fb,
             r->compressed ? "from its compressed chunks" : "from host memory");
    memcpy(r->note[k], note, sizeof note);
    if (r->compressed)
        return amp_gpu_tensor_upload_compressed(d->ordinal, o->file, t,
                                                amp_thread_count(r->threads), o->progress,
                                                o->progress_ctx, &r->g[k], err);
    upload_progress up = {o, 0, part_bytes(part)};
    amp_gpu_upload_opts uo = {0};
    amp_error e = {0};
    if (o->progress) {
        announce(o, "uploading", "B", up.total);
        uo.progress = upload_progressed;
        uo.progress_ctx = &up;
    }
    if (amp_gpu_tensor_upload_with(d->ordinal, part, r->chunk[k], &uo, &r->g[k], &e) != AMP_OK)
        return amp_error_set(err, e.status, e.src_file, e.src_line, "GPU %d: %s", d->ordinal,
                             amp_error_message(&e));
    return AMP_OK;
}

/* Every mode's remap positions for two copies remapped on one GPU, in 32
 * bits (the plan checked the count): from the file's REMAP sections where
 * it has them, else computed from the copies in host memory, which takes
 * far longer (bench/RESULTS.md, "Remap positions"). Load time. */
static amp_status remap_positions(const amp_gpu_opts *o, const amp_tensor *t, amp_gpu_run *r,
                                  uint32_t **pos, amp_error *err)
{
    const uint64_t nnz = t->nnz;
    const size_t wide_bytes = (size_t)(nnz ? nnz : 1) * 8, bytes = (size_t)(nnz ? nnz : 1) * 4;
    amp_status rc = AMP_OK;
    const double t0 = amp_now();
    announce(o, "remap positions", NULL, 0);
    uint64_t *wide = amp_huge_alloc(wide_bytes, "remap positions", err);
    if (wide == NULL)
        return AMP_ERR_NOMEM;
    for (unsigned d = 0; d < t->nmodes && rc == AMP_OK; d++) {
        int from_file = 0;
        if ((pos[d] = amp_huge_alloc(bytes, "remap positions", err)) == NULL) {
            rc = AMP_ERR_NOMEM;
            break;
        }
        rc = amp_remap_positions(o->file, t, d, r->threads, wide, &from_file, err);
        if (rc != AMP_OK)
            break;
        uint32_t *p = pos[d];
#pragma omp parallel for num_threads(amp_thread_count(r->threads)) schedule(static)
        for (uint64_t k = 0; k < nnz; k++)
            p[k] = (uint32_t)wide[k];
        r->remap_from_file += (unsigned)from_file;
    }
    amp_huge_free(wide, wide_bytes);
    r->remap_positions_seconds = amp_now() - t0;
    r->load_seconds += r->remap_positions_seconds;
    return rc;
}

/* One GPU, two copies remapped: the nonzeros into host memory, every
 * mode's positions, then copy 0, the spare buffer and the positions onto
 * the GPU. A GPU whose memory another process took meanwhile streams
 * instead, as a resident one does (stream_instead). */
static amp_status upload_remap(const amp_gpu_opts *o, const amp_tensor *t, amp_gpu_run *r,
                               amp_error *err)
{
    uint32_t *pos[AMP_MAX_MODES] = {0};
    const size_t bytes = (size_t)(t->nnz ? t->nnz : 1) * 4;
    amp_gpu_upload_opts uo = {0};
    amp_error e = {0};
    AMP_CHECK(load_nonzeros(o, r, err));
    amp_status rc = remap_positions(o, t, r, pos, err);
    /* What amp_gpu_tensor_upload_remap reports: copy 0 and the positions. */
    upload_progress up = {o, 0, t->nnz * (8 + amp_value_size(t->value_type) + 4 * t->nmodes)};
    uo.fail_alloc = o->fail_resident == 1;
    if (o->progress) {
        uo.progress = upload_progressed;
        uo.progress_ctx = &up;
    }
    if (rc == AMP_OK) {
        announce(o, "uploading", "B", up.total);
        rc = amp_gpu_tensor_upload_remap(r->dev[0].ordinal, t, (const uint32_t *const *)pos,
                                         &uo, &r->g[0], &e);
        if (rc == AMP_OK && o->remap_kernel)
            amp_gpu_remap_set_fuse(r->g[0], 0);
    }
    for (unsigned d = 0; d < t->nmodes; d++)
        amp_huge_free(pos[d], bytes);
    if (rc == AMP_OK || e.status == AMP_OK)   /* done, or failed before the upload */
        return rc;
    if (uo.device_full)
        return stream_instead(o, t, r, 0, &e, err);
    return amp_error_set(err, e.status, e.src_file, e.src_line, "GPU %d: %s",
                         r->dev[0].ordinal, amp_error_message(&e));
}

/* Every GPU's part onto its GPU, from where the plan says: the file
 * (compressed chunks kept, or straight to a resident copy) or host
 * memory. */
static amp_status upload(const amp_gpu_opts *o, const amp_tensor *t, amp_gpu_run *r,
                         amp_error *err)
{
    int threads = amp_thread_count(r->threads);
    amp_gpu_upload_opts uo[AMP_MAX_GPUS];
    amp_status rcs[AMP_MAX_GPUS];
    amp_error errs[AMP_MAX_GPUS];
    memset(uo, 0, sizeof uo);
    memset(errs, 0, sizeof errs);
    for (unsigned k = 0; k < r->n; k++)
        uo[k].fail_alloc = o->fail_resident == k + 1;
    if (r->compressed)
        return amp_gpu_tensor_upload_compressed(r->dev[0].ordinal, o->file, t, threads,
                                                o->progress, o->progress_ctx, &r->g[0], err);
    if (r->direct) {
        rcs[0] = amp_gpu_tensor_upload_file(r->dev[0].ordinal, o->file, t, threads, o->progress,
                                            o->progress_ctx, &uo[0], &r->g[0], &errs[0]);
        if (rcs[0] == AMP_OK)
            return AMP_OK;
        if (uo[0].device_full)
            return stream_instead(o, t, r, 0, &errs[0], err);
        *err = errs[0];
        return rcs[0];
    }
    if (r->memory[0] == AMP_MEMORY_REMAP)   /* one GPU (no_remap) */
        return upload_remap(o, t, r, err);
    /* Streamed: its host memory is the source. */
    AMP_CHECK(load_nonzeros(o, r, err));
    upload_progress up = {o, 0, 0};
    for (unsigned k = 0; k < r->n; k++) {
        up.total += part_bytes(part_of(r, t, k));
        if (o->progress) {
            uo[k].progress = upload_progressed;
            uo[k].progress_ctx = &up;
        }
    }
    announce(o, "uploading", "B", up.total);
    /* Resident parts go to their GPUs at once (a copy from pageable
     * memory is bound by one CPU thread); streamed ones one after the
     * other, since packing them takes every thread already. */
    int all_resident = 1;
    for (unsigned k = 0; k < r->n; k++)
        all_resident &= r->chunk[k] == 0;
#pragma omp parallel for num_threads(all_resident ? (int)r->n : 1) schedule(static, 1)
    for (int k = 0; k < (int)r->n; k++)
        rcs[k] = amp_gpu_tensor_upload_with(r->dev[k].ordinal, part_of(r, t, (unsigned)k),
                                            r->chunk[k], &uo[k], &r->g[k], &errs[k]);
    for (unsigned k = 0; k < r->n; k++) {
        if (rcs[k] != AMP_OK && uo[k].device_full && r->chunk[k] == 0)
            AMP_CHECK(stream_instead(o, t, r, k, &errs[k], err));
        else if (rcs[k] != AMP_OK)   /* the GPU's own failure, where it happened */
            return amp_error_set(err, errs[k].status, errs[k].src_file, errs[k].src_line,
                                 "GPU %d: %s", r->dev[k].ordinal, amp_error_message(&errs[k]));
    }
    return AMP_OK;
}

amp_status amp_gpu_run_open(const amp_gpu_opts *o, const amp_cpd_opts *cpd,
                            const amp_tensor *t, amp_gpu_run **out, amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_cuda_device dev[AMP_MAX_GPUS];
    int count = 0;
    amp_error e = {0};
    /* A process of several never falls back on the CPU by itself: the
     * others would wait for its GPUs. It looks only at its own. */
    const int asked = o->group || !(o->gpus == AMP_GPUS_AUTO && o->ndevices == 0);
    const int own_only = o->group && o->ndevices == 0;
    *out = NULL;
    if ((own_only ? amp_cuda_device_count(&count, &e)
                  : amp_cuda_list_devices(dev, AMP_MAX_GPUS, &count, &e)) != AMP_OK ||
        count == 0) {
        if (!asked)
            return AMP_OK;
        /* The option the user gave, as given. */
        char given[16 + 4 * AMP_MAX_GPUS] = "--devices ";
        size_t at = strlen(given);
        for (unsigned k = 0; k < o->ndevices && at < sizeof given; k++)
            at += (size_t)snprintf(given + at, sizeof given - at, "%s%d", k ? "," : "",
                                   o->devices[k]);
        if (o->ndevices == 0 && o->gpus == AMP_GPUS_AUTO)   /* a process of several */
            snprintf(given, sizeof given, "one GPU a process (mpirun's default)");
        else if (o->ndevices == 0)
            snprintf(given, sizeof given, "--gpus %d", o->gpus);
        return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "%s: %s; --gpus 0 runs on the CPU", given,
                        amp_error_message(&e));
    }
    count = count > AMP_MAX_GPUS ? AMP_MAX_GPUS : count;
    if (amp_rank_check(cpd->rank, AMP_GPU_MAX_RANK, "the GPU backend", &e) != AMP_OK) {
        if (!asked)
            return AMP_OK;
        return AMP_FAIL(err, e.status, "%s; --gpus 0 runs any rank on the CPU",
                        amp_error_message(&e));
    }
    amp_gpu_run *r = calloc(1, sizeof *r);
    if (r == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    r->group = o->group;
    r->asked = o->memory;
    AMP_CHECK_GOTO(pick_gpus(o, dev, count, r, err), rc, fail);
    r->total = r->n;
    r->f32 = cpd->precision == AMP_PRECISION_F32;
    r->rank = cpd->rank;
    r->method = cpd->method;
    r->completion = cpd->completion.observed == AMP_OBSERVED_NONZEROS;
    r->threads = cpd->threads;
    if (r->n > 1 && !amp_comm_available() && !asked && !r->group)
        r->n = 1;   /* every GPU, as far as a build without NCCL can join them */
    /* Completion runs in one process (completion.cu: amped-run refuses
     * it under mpirun before any GPU starts). */
    if (r->completion && r->group)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_UNSUPPORTED, "--observed nonzeros runs in one "
                       "process for now, not under mpirun; --gpus N runs it on N GPUs of one");
    /* CP-APR and completion on several GPUs (apr.cu, completion.cu) need
     * each row's nonzeros on one GPU (under MPI refused below for every
     * method). */
    rc = amp_rules_gpu_layout(r->method, r->completion, r->group ? 1 : (long)r->n,
                              o->partition == AMP_PARTITION_EQUAL_NNZ, o->overlap, err);
    if (rc != AMP_OK)
        goto fail;
    if (r->group && r->group->size > 1 && !amp_comm_available())
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_UNSUPPORTED, "the GPUs of %u processes need "
                       "NCCL, and this build has none (configure --with-nccl); --gpus 0 runs "
                       "on their CPUs", r->group->size);
    if (r->n > 1 && !amp_comm_available())
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_UNSUPPORTED, "%u GPUs need NCCL, and this build "
                       "has none (configure --with-nccl); --gpus 1 runs on one", r->n);
    if (o->memory == AMP_MEMORY_COMPRESSED && (r->n > 1 || r->group || o->file == NULL))
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_USAGE, "--memory compressed streams to one GPU "
                       "of one process, not %u%s", r->n, r->group ? " of each process" : "");
    if (o->memory == AMP_MEMORY_REMAP && (r->n > 1 || r->group))
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_UNSUPPORTED, "--memory remap runs on one GPU of "
                       "one process for now, not %u%s (a GPU's nonzeros of the next mode are "
                       "not all its own, and moving them between GPUs is not built yet); "
                       "--gpus 1 runs it on one GPU, --memory resident or stream on several",
                       r->n, r->group ? " GPUs of each of several processes" : " GPUs");
    if (r->group && o->exchange == AMP_EXCHANGE_COPY)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_UNSUPPORTED, "--exchange copy joins the GPUs "
                       "of one process, and this run is under MPI, where rows go with NCCL "
                       "(--exchange nccl)");
    /* Only whole shards can be read apart from the rest of the file. */
    if (r->group && o->partition == AMP_PARTITION_EQUAL_NNZ)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_UNSUPPORTED, "--partition equal-nnz splits "
                       "the tensor of one process; a run of several processes deals shards "
                       "(--partition shards)");
    if (t->layout_only && (o->file == NULL || o->release != t))
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_INTERNAL, "a tensor without its nonzeros, and "
                       "no file to read them from");
    /* Reading the nonzeros into host memory, where it happens here, is
     * load time, not upload time. */
    double t0 = amp_now();
    if (r->group)
        AMP_CHECK_GOTO(split_dist(o, t, r, err), rc, fail);
    else if (r->n > 1)
        AMP_CHECK_GOTO(split(o, t, r, err), rc, fail);
    AMP_CHECK_GOTO(plan_all(o, t, r, err), rc, fail);
    AMP_CHECK_GOTO(upload(o, t, r, err), rc, fail);
    if (r->n > 1 && !r->group) {
        int ordinals[AMP_MAX_GPUS];
        for (unsigned k = 0; k < r->n; k++)
            ordinals[k] = r->dev[k].ordinal;
        /* auto: copies only where every pair of GPUs has peer access, as
         * the copy group is all or nothing and copies through the host lose
         * to NCCL. */
        const amp_comm_rows rows = o->exchange == AMP_EXCHANGE_COPY ? AMP_COMM_ROWS_COPY
                                   : o->exchange == AMP_EXCHANGE_AUTO && !o->test_no_peers
                                       ? AMP_COMM_ROWS_COPY_IF_PEERS
                                       : AMP_COMM_ROWS_NCCL;
        announce(o, "NCCL init", NULL, 0);
        AMP_CHECK_GOTO(amp_comm_init_all(r->n, ordinals, rows, r->comm, err), rc, fail);
    }
    r->upload_seconds = amp_now() - t0 - r->load_seconds;
    *out = r;
    return AMP_OK;
fail:
    amp_gpu_run_close(r);
    return rc;
}

/* No GPU taken by two processes (or twice by one): every process's GPUs'
 * UUIDs to every process, 32 bits a double, and the same verdict on each.
 * NCCL would stop such a run too, later and naming neither process. */
static amp_status check_own_gpus(const amp_gpu_run *r, amp_error *err)
{
    const amp_group *g = r->group;
    const unsigned words = 4;   /* a UUID's 16 bytes as 4 x 32 bits */
    double *buf = calloc((size_t)r->total * words, sizeof *buf);
    unsigned char(*uuid)[16] = calloc(r->total, sizeof *uuid);
    uint64_t *offset = calloc(2 * (size_t)g->size, sizeof *offset);
    amp_status rc = AMP_OK;
    if (buf == NULL || uuid == NULL || offset == NULL) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (unsigned k = 0; k < r->n; k++)
        for (unsigned w = 0; w < words; w++) {
            uint32_t v;
            memcpy(&v, r->dev[k].uuid + 4 * w, 4);
            buf[(size_t)(r->first + k) * words + w] = (double)v;
        }
    uint64_t *count = offset + g->size;   /* one allocation for both */
    for (unsigned q = 0; q < g->size; q++) {
        offset[q] = (uint64_t)q * r->n * words;
        count[q] = (uint64_t)r->n * words;
    }
    AMP_CHECK_GOTO(g->ops->allgatherv(g->ctx, buf, offset, count, err), rc, done);
    for (unsigned k = 0; k < r->total; k++)
        for (unsigned w = 0; w < words; w++) {
            uint32_t v = (uint32_t)buf[(size_t)k * words + w];
            memcpy(uuid[k] + 4 * w, &v, 4);
        }
    unsigned a, b;
    if (amp_gpu_same_device((const unsigned char(*)[16])uuid, r->total, &a, &b)) {
        const unsigned char *u = uuid[a];
        rc = AMP_FAIL(err, AMP_ERR_USAGE, "process %u and process %u both take the GPU "
                      "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x"
                      ": give each process GPUs of its own (by default one a process, by its "
                      "number on its host; or CUDA_VISIBLE_DEVICES, --devices or srun "
                      "--gpus-per-task per process)", a / r->n, b / r->n, u[0], u[1], u[2], u[3],
                      u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                      u[15]);
    }
done:
    free(buf);
    free(uuid);
    free(offset);
    return rc;
}

amp_status amp_gpu_run_join(amp_gpu_run *r, amp_error *err)
{
    const amp_group *g = r->group;
    if (g == NULL)
        return AMP_OK;
    /* The partition took every process's GPUs to be as many as this
     * one's: a process given other options must not join. */
    double n[2] = {(double)r->n, -(double)r->n};
    AMP_CHECK(g->ops->allreduce(g->ctx, n, 2, 1, err));
    if (n[0] != -n[1])
        return AMP_FAIL(err, AMP_ERR_USAGE, "the processes take from %.0f to %.0f GPUs each: "
                        "give every one the same --gpus or --devices", -n[1], n[0]);
    AMP_CHECK(check_own_gpus(r, err));
    unsigned char id[AMP_COMM_ID_BYTES];
    int ordinals[AMP_MAX_GPUS];
    memset(id, 0, sizeof id);
    for (unsigned k = 0; k < r->n; k++)
        ordinals[k] = r->dev[k].ordinal;
    double t0 = amp_now();
    if (g->rank == 0 && r->total > 1)
        AMP_CHECK(amp_comm_unique_id(id, err));
    AMP_CHECK(g->ops->bcast(g->ctx, id, sizeof id, err));
    AMP_CHECK(amp_comm_init_ranks(id, r->total, r->first, r->n, ordinals, r->comm, err));
    r->upload_seconds += amp_now() - t0;
    return AMP_OK;
}

unsigned amp_gpu_visible(void)
{
    int count = 0;
    amp_error e = {0};
    return amp_cuda_device_count(&count, &e) == AMP_OK && count > 0 ? (unsigned)count : 0;
}

amp_status amp_gpu_gcp_pick(const amp_gpu_opts *o, int *ordinal, char *name, size_t name_size,
                            amp_error *err)
{
    amp_cuda_device dev[AMP_MAX_GPUS];
    int count = 0;
    amp_error e = {0};
    *ordinal = -1;
    if (name_size)
        name[0] = '\0';
    const int asked = o->gpus != AMP_GPUS_AUTO || o->ndevices > 0;
    if (amp_cuda_list_devices(dev, AMP_MAX_GPUS, &count, &e) != AMP_OK || count == 0) {
        if (!asked)
            return AMP_OK;
        return AMP_FAIL(err, e.status ? e.status : AMP_ERR_NO_DEVICE, "%s; --gpus 0 runs GCP on "
                        "the CPU", e.status ? amp_error_message(&e) : "no CUDA device");
    }
    if (o->ndevices > 1)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--method gcp runs on one GPU for now, and "
                        "--devices lists %u", o->ndevices);
    const int k = o->ndevices == 1 ? o->devices[0] : 0;
    if (k < 0 || k >= count || k >= AMP_MAX_GPUS)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--devices: there is no GPU %d; this machine has %d",
                        k, count);
    *ordinal = dev[k].ordinal;
    snprintf(name, name_size, "%s", dev[k].name);
    return AMP_OK;
}

amp_status amp_gpu_gcp_memory(int ordinal, const amp_tensor *t, unsigned R, int memory,
                              int *stream, amp_error *err)
{
    *stream = memory == AMP_MEMORY_STREAM;
    if (memory != AMP_MEMORY_AUTO)
        return AMP_OK;
    int fits = 1;
    AMP_CHECK(amp_gpu_gcp_fits(ordinal, t, R, &fits, err));
    *stream = !fits;
    return AMP_OK;
}

amp_status amp_gpu_gcp_run(int ordinal, const amp_tensor *t, const amp_cpd_opts *o, int stream,
                           amp_cpd *c, amp_error *err)
{
    return amp_gpu_gcp(ordinal, t, o, stream, c, err);
}

unsigned amp_gpu_run_count(const amp_gpu_run *r)
{
    return r->n;
}

const char *amp_gpu_run_note(const amp_gpu_run *r, unsigned k)
{
    return k < r->n && r->note[k][0] ? r->note[k] : NULL;
}

unsigned amp_gpu_run_total(const amp_gpu_run *r)
{
    return r->total;
}

double amp_gpu_run_upload_seconds(const amp_gpu_run *r)
{
    return r->upload_seconds;
}

double amp_gpu_run_load_seconds(const amp_gpu_run *r)
{
    return r->load_seconds;
}

int amp_gpu_run_direct(const amp_gpu_run *r)
{
    return r->direct;
}

double amp_gpu_run_stream_bytes_per_nnz(const amp_gpu_run *r, const amp_tensor *t)
{
    /* Over this process's nonzeros: every one's, but under several
     * processes. */
    double bytes = 0, nnz = 0;
    for (unsigned k = 0; k < r->n; k++) {
        if (amp_gpu_tensor_streamed(r->g[k]))
            bytes += amp_gpu_stream_bytes(r->g[k]);
        for (unsigned m = 0; m < t->nmodes; m++)
            nnz += (double)r->nnz[k][m];
    }
    return nnz > 0 ? bytes / nnz : 0;
}

int amp_gpu_run_by_copies(const amp_gpu_run *r)
{
    return amp_comm_by_copies(r->comm[0]);   /* one GPU's comm never joins copies */
}

void amp_gpu_run_info(const amp_gpu_run *r, unsigned k, amp_gpu_info *info)
{
    memset(info, 0, sizeof *info);
    info->device = r->dev[k].ordinal;
    info->sm_count = r->dev[k].sm_count;
    info->name = r->dev[k].name;
    info->streamed = amp_gpu_tensor_streamed(r->g[k]);
    info->compressed = amp_gpu_tensor_compressed(r->g[k]);
    info->host_bytes = amp_gpu_tensor_host_bytes(r->g[k]);
    info->chunk_nnz = r->chunk[k];
    info->tensor_bytes = amp_gpu_tensor_bytes(r->g[k]);
    info->need_bytes = r->need[k];
    info->memory = r->memory[k];
    info->asked = r->asked;
    info->sizes = r->sizes[k];
    info->tensor_plan_bytes = r->tensor_plan[k];
    if (r->memory[k] == AMP_MEMORY_REMAP) {
        amp_error e = {0};
        info->remap_from_file = r->remap_from_file;
        info->remap_positions_seconds = r->remap_positions_seconds;
        /* A report's figure: a failure to read it leaves 0 and 0, and the
         * next CUDA call of the run reports the device's trouble. */
        if (amp_gpu_remap_seconds(r->g[k], &info->remap_seconds, &info->remaps, &e) != AMP_OK)
            info->remap_seconds = 0, info->remaps = 0;
        info->remaps_fused = amp_gpu_remap_fused(r->g[k]);
    }
    info->index = r->first + k;
    for (unsigned m = 0; m < r->nmodes; m++) {
        info->nnz[m] = r->nnz[k][m];
        info->rows[m] = r->have_part ? r->part.modes[m].row_count[r->first + k]
                                     : r->rows[k][m];
        info->shards[m] = r->have_part ? r->part.modes[m].nshards_of[r->first + k]
                                       : r->nshards[m];
    }
    if (info->streamed) {
        uint64_t nnz = 0;
        for (unsigned m = 0; m < r->nmodes; m++)
            nnz += info->nnz[m];
        info->stream_bytes_per_nnz = nnz ? amp_gpu_stream_bytes(r->g[k]) / (double)nnz : 0;
    }
}

double amp_gpu_run_imbalance(const amp_gpu_run *r, unsigned m, double *best)
{
    if (!r->have_part) {
        if (best)
            *best = 1;
        return 1;
    }
    return amp_partition_imbalance(&r->part, m, best);
}

/* c's factors from file order to the run's (to_run) or back, in place. */
static amp_status reorder(const amp_gpu_run *r, amp_cpd *c, int to_run, amp_error *err)
{
    if (!r->have_part)
        return AMP_OK;
    for (unsigned m = 0; m < c->nmodes; m++) {
        if (r->part.modes[m].run_row == NULL)
            continue;
        size_t bytes = (size_t)c->rows[m] * c->rank * sizeof(double) + 1;
        double *tmp = amp_huge_alloc(bytes, "a factor in the run's row order", err);
        if (tmp == NULL)
            return AMP_ERR_NOMEM;
        if (to_run)
            amp_partition_rows_to_run(&r->part, m, c->rank, c->A[m], tmp);
        else
            amp_partition_rows_to_file(&r->part, m, c->rank, c->A[m], tmp);
        memcpy(c->A[m], tmp, bytes - 1);
        amp_huge_free(tmp, bytes);
    }
    return AMP_OK;
}

amp_status amp_gpu_run_als(amp_gpu_run *r, const amp_tensor *t, const amp_cpd_opts *o,
                           const amp_gpu_als_opts *go, amp_cpd *c, amp_error *err)
{
    AMP_CHECK(reorder(r, c, 1, err));
    amp_status rc = amp_gpu_cpd_als_multi(r->g, r->total > 1 ? r->comm : NULL,
                                          r->have_part ? &r->part : NULL, r->group, t, o, go, c,
                                          &r->stats, err);
    amp_error e2 = {0};
    amp_status back = reorder(r, c, 0, rc == AMP_OK ? err : &e2);
    return rc != AMP_OK ? rc : back;
}

amp_status amp_gpu_run_als_batch(amp_gpu_run *r, const amp_tensor *t, const amp_cpd_opts *o,
                                 unsigned K, amp_cpd *const *cs, amp_gpu_batch_fn on_iter,
                                 void *ctx, double *mttkrp_seconds, amp_error *err)
{
    /* Several GPUs would pair each model's sends and sums with the
     * others' on every GPU: not written yet. */
    if (r->total > 1)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "several models in one pass run on one GPU "
                        "for now, not %u", r->total);
    unsigned cols = 0;
    for (unsigned k = 0; k < K; k++)
        cols += cs[k]->rank;
    if (cols > r->rank)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the models' columns (%u) pass the rank the GPU's "
                        "run was opened for (%u)", cols, r->rank);
    unsigned k = 0;
    amp_status rc = AMP_OK;
    for (; k < K && rc == AMP_OK; k++)
        rc = reorder(r, cs[k], 1, err);
    if (rc == AMP_OK)
        rc = amp_gpu_cpd_als_batch(r->g[0], t, o, K, cs, on_iter, ctx, mttkrp_seconds, err);
    amp_error e2 = {0};
    for (unsigned j = 0; j < k; j++) {
        amp_status back = reorder(r, cs[j], 0, rc == AMP_OK ? err : &e2);
        rc = rc != AMP_OK ? rc : back;
    }
    return rc;
}

unsigned amp_gpu_run_parts(const amp_gpu_run *r, unsigned m)
{
    return m < AMP_MAX_MODES ? r->stats.parts[m] : 0;
}

void amp_gpu_run_times(const amp_gpu_run *r, unsigned k, double *mttkrp, double *busy,
                       double *comm, double *exchange, double *idle, double *phase)
{
    const amp_gpu_run_stats *s = &r->stats;
    for (unsigned m = 0; m < s->nmodes; m++) {
        mttkrp[m] = s->mttkrp[k][m];
        busy[m] = s->busy[k][m];
        comm[m] = s->comm[k][m];
        exchange[m] = s->exchange[k][m];
        idle[m] = s->idle[k][m];
    }
    for (int p = 0; p < AMP_NPHASES; p++)
        phase[p] = s->phase[k][p];
}

/* c's factors in the run's row order (a copy; c is not changed). */
static amp_status run_order_factors(const amp_gpu_run *r, const amp_cpd *c, double **A,
                                    amp_error *err)
{
    for (unsigned m = 0; m < c->nmodes; m++) {
        size_t bytes = (size_t)c->rows[m] * c->rank * sizeof(double) + 1;
        A[m] = amp_huge_alloc(bytes, "a factor in the run's row order", err);
        if (A[m] == NULL)
            return AMP_ERR_NOMEM;
        if (r->have_part)
            amp_partition_rows_to_run(&r->part, m, c->rank, c->A[m], A[m]);
        else
            memcpy(A[m], c->A[m], bytes - 1);
    }
    return AMP_OK;
}

static void free_factors(const amp_cpd *c, double **A)
{
    for (unsigned m = 0; m < c->nmodes; m++)
        if (A[m])
            amp_huge_free(A[m], (size_t)c->rows[m] * c->rank * sizeof(double) + 1);
}

amp_status amp_gpu_run_time_mttkrp(amp_gpu_run *r, const amp_tensor *t, const amp_cpd *c,
                                   unsigned rounds, double *sec, amp_error *err)
{
    double *A[AMP_MAX_MODES] = {0};
    double per[AMP_MAX_GPUS][AMP_MAX_MODES];
    amp_status rcs[AMP_MAX_GPUS];
    amp_error errs[AMP_MAX_GPUS];
    amp_status rc = run_order_factors(r, c, A, err);
    if (rc == AMP_OK) {
        memset(errs, 0, sizeof errs);
        /* Every GPU at once, as in a run: the slowest one sets the pace. */
#pragma omp parallel for num_threads(r->n) schedule(static, 1)
        for (int k = 0; k < (int)r->n; k++)
            rcs[k] = amp_gpu_mttkrp_host(r->g[k], (const double *const *)A, c->rank, r->f32, 0,
                                         NULL, rounds, per[k], &errs[k]);
        for (unsigned k = 0; k < r->n && rc == AMP_OK; k++)
            if (rcs[k] != AMP_OK)
                rc = amp_error_set(err, errs[k].status, errs[k].src_file, errs[k].src_line,
                                   "GPU %d: %s", r->dev[k].ordinal, amp_error_message(&errs[k]));
        for (unsigned m = 0; m < t->nmodes && rc == AMP_OK; m++) {
            sec[m] = 0;
            for (unsigned k = 0; k < r->n; k++)
                sec[m] = per[k][m] > sec[m] ? per[k][m] : sec[m];
        }
    }
    free_factors(c, A);
    return rc;
}

amp_status amp_gpu_run_check(amp_gpu_run *r, const amp_tensor *t, const amp_cpd *c,
                             double *rel, amp_error *err)
{
    double *A[AMP_MAX_MODES] = {0};
    uint64_t max_rows = 0;
    for (unsigned m = 0; m < t->nmodes; m++)
        max_rows = t->rows[m] > max_rows ? t->rows[m] : max_rows;
    const size_t bytes = (size_t)max_rows * c->rank * sizeof(double) + 1;
    double *M = amp_huge_alloc(bytes, "a GPU's MTTKRP", err);
    double *sum = M ? amp_huge_alloc(bytes, "the GPUs' MTTKRP", err) : NULL;
    double *ref = sum ? amp_huge_alloc(bytes, "the reference MTTKRP", err) : NULL;
    amp_status rc = ref ? run_order_factors(r, c, A, err) : AMP_ERR_NOMEM;
    for (unsigned d = 0; d < t->nmodes && rc == AMP_OK; d++) {
        const size_t n = (size_t)t->rows[d] * c->rank;
        memset(sum, 0, n * sizeof *sum);
        /* A part writes its own rows (the rest read back zero) or, with
         * equal-nnz, partial rows: adding the parts covers both. */
        for (unsigned k = 0; k < r->n && rc == AMP_OK; k++) {
            rc = amp_gpu_mttkrp_host(r->g[k], (const double *const *)A, c->rank, r->f32, d, M,
                                     0, NULL, err);
            for (size_t i = 0; rc == AMP_OK && i < n; i++)
                sum[i] += M[i];
        }
        if (rc != AMP_OK)
            break;
        if (r->have_part)
            amp_partition_rows_to_file(&r->part, d, c->rank, sum, M);
        else
            memcpy(M, sum, n * sizeof *M);
        rc = amp_mttkrp_reference(t, (d + 1) % t->nmodes, d, (const double *const *)c->A,
                                  c->rank, ref, err);
        double diff = 0, scale = 0;
        for (size_t i = 0; rc == AMP_OK && i < n; i++) {
            double e = fabs(M[i] - ref[i]);
            diff = e > diff ? e : diff;
            scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
        }
        rel[d] = scale > 0 ? diff / scale : diff;
    }
    free_factors(c, A);
    amp_huge_free(M, bytes);
    amp_huge_free(sum, bytes);
    amp_huge_free(ref, bytes);
    return rc;
}

#endif
