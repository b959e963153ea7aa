/* amped-run: CP decomposition of a prepared (.amp) tensor.
 *
 * CP-ALS on one GPU (the tensor resident) or on the CPU backend (OpenMP),
 * factor output in the original index space, MTTKRP timing (--mttkrp-only) and checking (--check); --info and
 * --verify inspect a file; --list-devices shows the GPUs this build sees. */
#include <config.h>

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "amp_alloc.h"
#include "amp_cli.h"
#include "amp_cpd.h"
#include "amp_log.h"
#include "amp_outfile.h"
#include "amp_parse.h"
#include "amp_progress.h"
#include "amp_timer.h"
#include "amped_format.h"
#include "inspect.h"
#include "run_report.h"
#ifdef AMP_HAVE_CUDA
#include "cuda/amp_cuda.h"
#endif

#define PROGRAM "amped-run"

#define MAX_RANK 4096
#define MAX_ITERS 1000000

enum {
    OPT_LIST_DEVICES = 256, OPT_INFO, OPT_VERIFY, OPT_ITERS, OPT_TOL, OPT_SEED, OPT_INIT,
    OPT_PRECISION, OPT_FORMAT, OPT_JSON, OPT_MTTKRP_ONLY, OPT_CHECK, OPT_GPUS, OPT_DEVICE_MEMORY,
    OPT_MEMORY, OPT_STREAM_CHUNK
};

enum { MEMORY_AUTO, MEMORY_RESIDENT, MEMORY_STREAM };

/* Streaming: the largest chunk by default, and the smallest worth a copy. */
#define STREAM_CHUNK_DEFAULT (UINT64_C(16) << 20)
#define STREAM_CHUNK_MIN 1024

/* --gpus when not given: one GPU if there is one, else the CPU. */
#define GPUS_AUTO (-1)

static const struct option long_options[] = {
    /* the decomposition */
    {"rank", required_argument, NULL, 'r'},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"tol", required_argument, NULL, OPT_TOL},
    {"seed", required_argument, NULL, OPT_SEED},
    {"init", required_argument, NULL, OPT_INIT},
    {"precision", required_argument, NULL, OPT_PRECISION},
    /* output */
    {"output", required_argument, NULL, 'o'},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"json", required_argument, NULL, OPT_JSON},
    /* actions other than decomposing */
    {"mttkrp-only", no_argument, NULL, OPT_MTTKRP_ONLY},
    {"check", no_argument, NULL, OPT_CHECK},
    {"info", no_argument, NULL, OPT_INFO},
    {"verify", no_argument, NULL, OPT_VERIFY},
    /* devices and threads */
    {"gpus", required_argument, NULL, OPT_GPUS},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"device-memory", required_argument, NULL, OPT_DEVICE_MEMORY},
    {"stream-chunk", required_argument, NULL, OPT_STREAM_CHUNK},
    {"list-devices", no_argument, NULL, OPT_LIST_DEVICES},
    {"threads", required_argument, NULL, 't'},
    /* reporting */
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void usage(void)
{
    amp_cpd_opts d;
    amp_cpd_opts_init(&d);
    printf("Usage: amped-run [OPTION]... FILE.amp\n"
           "Compute a CP decomposition (CP-ALS) of the tensor that amped-prep prepared\n"
           "in FILE.amp.\n"
           "\n"
           "Decomposition:\n"
           "  -r, --rank=R         rank of the decomposition, 1 to %d (default %u)\n"
           "      --iters=N        at most N iterations (default %u)\n"
           "      --tol=T          stop when the fit changes by less than T; 0 runs every\n"
           "                       iteration (default %g)\n"
           "      --seed=S         seed of the random starting factors (default %" PRIu64 ")\n"
           "      --init=PREFIX    start from PREFIX.mode1.mat ... (text, as -o writes)\n"
           "      --precision=P    f64 or f32: the MTTKRP's arithmetic; the rank-by-rank\n"
           "                       algebra is f64 either way (default f64)\n"
           "\n"
           "Output:\n"
           "  -o, --output=PREFIX  write the factors as PREFIX.mode1.mat ... PREFIX.modeN.mat\n"
           "                       and PREFIX.lambda.mat, in the original index space\n"
           "                       (default: not written)\n"
           "      --format=F       text (SPLATT's layout) or npy (NumPy) (default text)\n"
           "      --json=FILE      also write the report (fit per iteration, timings) as\n"
           "                       JSON\n"
           "\n"
           "Other actions:\n"
           "      --mttkrp-only    time --iters rounds of MTTKRP over every mode, no ALS\n"
           "      --check          compare every mode's MTTKRP with a plain f64 reference\n"
           "                       and print the largest relative error\n"
           "      --info           print what FILE.amp holds (modes, dimensions, nonzeros,\n"
           "                       shards and their balance, sizes, compression) and exit\n"
           "      --verify         read every section of FILE.amp and check every\n"
           "                       checksum and index; exit status 0 only if all hold\n"
           "\n"
           "Devices and threads:\n"
           "      --gpus=N         0: the CPU backend; 1: one GPU (default: 1 when a GPU\n"
           "                       is found, else 0)\n"
           "      --memory=MODE    auto: keep the tensor in GPU memory when it fits, else\n"
           "                       stream it from host memory every iteration; resident;\n"
           "                       stream (default auto)\n"
           "      --device-memory=BYTES  use at most BYTES of GPU memory (K, M, G suffixes;\n"
           "                       default: all that is free)\n"
           "      --stream-chunk=N nonzeros per host-to-device copy when streaming\n"
           "                       (default: what fits, at most %" PRIu64 ")\n"
           "      --list-devices   list the CUDA devices this build can use, run a\n"
           "                       self-test kernel on each, and exit\n"
           "  -t, --threads=N      CPU threads (default: all available)\n"
           "\n"
           "Reporting:\n"
           "  -q, --quiet          print only warnings and errors\n"
           "  -v, --verbose        print more detail\n"
           "  -h, --help           display this help and exit\n"
           "  -V, --version        output version and build information and exit\n"
           "\n"
           "Exit status: 0 on success, 1 on a failure, 2 on a usage error.\n"
           "Report bugs to: %s\n", MAX_RANK, d.rank, d.max_iters, d.tol, d.seed,
           STREAM_CHUNK_DEFAULT, PACKAGE_BUGREPORT);
}

static void version(void)
{
    printf("amped-run (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
#ifdef AMP_HAVE_CUDA
    char v[64];
    amp_cuda_version_string(v, sizeof v);
    printf("CUDA backend: yes, runtime %s\n", v);
#else
    printf("CUDA backend: no (built without CUDA)\n");
#endif
#ifdef AMP_HAVE_NCCL
    printf("NCCL: yes\n");
#else
    printf("NCCL: no\n");
#endif
}

static int list_devices(void)
{
#ifdef AMP_HAVE_CUDA
    amp_cuda_device dev[64];
    int count = 0;
    amp_error err = {0};
    if (amp_cuda_list_devices(dev, 64, &count, &err) != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    int failed = 0;
    for (int i = 0; i < count && i < 64; i++) {
        char tot[32], fr[32];
        amp_error e = {0};
        amp_status rc = amp_cuda_selftest(i, &e);
        printf("GPU %d: %s, compute capability %d.%d, %d SMs, %s memory (%s free), "
               "PCI %02x:%02x, self-test %s\n", dev[i].ordinal, dev[i].name, dev[i].cc_major,
               dev[i].cc_minor, dev[i].sm_count,
               amp_format_bytes(tot, sizeof tot, dev[i].total_memory),
               amp_format_bytes(fr, sizeof fr, dev[i].free_memory), (unsigned)dev[i].pci_bus,
               (unsigned)dev[i].pci_device, rc == AMP_OK ? "passed" : "FAILED");
        if (rc != AMP_OK) {
            amp_log_error(&e);
            failed = 1;
        }
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
#else
    amp_log(AMP_LOG_ERROR, "this build has no CUDA backend (configure --with-cuda)");
    return EXIT_FAILURE;
#endif
}

/* ---- the decomposition ----------------------------------------------- */

typedef struct run_args {
    const char *path;
    amp_cpd_opts opts;
    const char *init, *output, *json;
    int gpus;                  /* GPUS_AUTO, 0 or 1 */
    uint64_t device_memory;    /* cap in bytes; 0: what is free */
    int memory;                /* MEMORY_* */
    uint64_t stream_chunk;     /* 0: chosen from the memory left */
    amp_factor_format format;
    int mttkrp_only, check, quiet;
    amp_run_report report;
} run_args;

static void on_iter(void *ctx, unsigned iter, double fit, double delta, double seconds)
{
    run_args *a = ctx;
    amp_error err = {0};
    if (amp_report_add_iter(&a->report, iter, fit, delta, seconds, &err) != AMP_OK)
        amp_log_error(&err);
    if (!a->quiet) {
        printf("%6u  %.10f  %.3e  %8.3f\n", iter, fit, delta, seconds);
        fflush(stdout);
    }
}

static void print_tensor(const run_args *a, const amp_tensor *t, int threads,
                         const char *gpu_line)
{
    char mem[32];
    printf("tensor:    %s: %u modes, %" PRIu64 " nonzeros, dims ", a->path, t->nmodes, t->nnz);
    for (unsigned m = 0; m < t->nmodes; m++)
        printf("%s%" PRIu64, m ? "x" : "", t->dims[m]);
    printf(" (nonempty ");
    for (unsigned m = 0; m < t->nmodes; m++)
        printf("%s%" PRIu64, m ? "x" : "", t->rows[m]);
    printf("), values %s, %s in memory\n", t->value_type == AMP_VALUES_F32 ? "f32" : "f64",
           amp_format_bytes(mem, sizeof mem, t->bytes));
    if (gpu_line)
        printf("backend:   %s, precision %s\n", gpu_line,
               a->opts.precision == AMP_PRECISION_F32 ? "f32" : "f64");
    else
        printf("backend:   cpu, %d thread%s, precision %s\n", threads, threads == 1 ? "" : "s",
               a->opts.precision == AMP_PRECISION_F32 ? "f32" : "f64");
}

/* A rank above a mode's dimension makes that factor rank-deficient: the
 * solve falls back to the pseudo-inverse, and the user should know why. */
static void warn_rank(const amp_tensor *t, unsigned rank)
{
    for (unsigned m = 0; m < t->nmodes; m++)
        if (rank > t->rows[m])
            amp_log(AMP_LOG_WARN, "rank %u is larger than mode %u's %" PRIu64 " nonempty "
                    "indices: its factor cannot have full column rank", rank, m + 1,
                    t->rows[m]);
}

/* ---- the GPU backend ------------------------------------------------- */

typedef struct gpu_ctx {
    int on;
    char line[512];      /* "gpu 0 (name, SMs), ..." for the report */
    char name[256];
    double upload_seconds;
#ifdef AMP_HAVE_CUDA
    amp_gpu_tensor *g;
#endif
} gpu_ctx;

static void gpu_close(gpu_ctx *gc)
{
#ifdef AMP_HAVE_CUDA
    amp_gpu_tensor_free(gc->g);
    gc->g = NULL;
#endif
    gc->on = 0;
}

/* Decide the backend from --gpus and what the machine has; on a GPU, check
 * that the tensor and the work space fit and upload the tensor. */
static amp_status gpu_open(const run_args *a, const amp_tensor *t, gpu_ctx *gc, amp_error *err)
{
    memset(gc, 0, sizeof *gc);
    if (a->gpus == 0)
        return AMP_OK;
#ifndef AMP_HAVE_CUDA
    (void)t;
    if (a->gpus > 0)
        return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "--gpus %d: this build has no CUDA backend "
                        "(configure --with-cuda); --gpus 0 runs on the CPU", a->gpus);
    return AMP_OK;
#else
    amp_cuda_device dev[64];
    int count = 0;
    amp_error e = {0};
    if (amp_cuda_list_devices(dev, 64, &count, &e) != AMP_OK || count == 0) {
        if (a->gpus == GPUS_AUTO) {
            amp_log(AMP_LOG_DEBUG, "no GPU (%s): the CPU backend runs", amp_error_message(&e));
            return AMP_OK;
        }
        return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "--gpus %d: %s; "
                        "--gpus 0 runs on the CPU", a->gpus, amp_error_message(&e));
    }
    const amp_cuda_device *d = &dev[0];
    int f32 = a->opts.precision == AMP_PRECISION_F32;
    if (a->opts.rank > AMP_GPU_MAX_RANK) {
        if (a->gpus == GPUS_AUTO) {
            amp_log(AMP_LOG_DEBUG, "rank %u is above the GPU kernels' %d: the CPU backend runs",
                    a->opts.rank, AMP_GPU_MAX_RANK);
            return AMP_OK;
        }
        return AMP_FAIL(err, AMP_ERR_USAGE, "--gpus %d: the GPU backend takes rank 1 to %d, not "
                        "%u; --gpus 0 runs any rank on the CPU", a->gpus, AMP_GPU_MAX_RANK,
                        a->opts.rank);
    }
    size_t avail = d->free_memory;
    if (a->device_memory && a->device_memory < avail)
        avail = (size_t)a->device_memory;
    size_t need = amp_gpu_als_bytes(t, a->opts.rank, f32, 0);
    uint64_t chunk = 0, max_nnz = 1;
    char nb[32], ab[32], cb[32];
    amp_format_bytes(ab, sizeof ab, avail);
    for (unsigned m = 0; m < t->nmodes; m++)
        max_nnz = t->copies[m].nnz > max_nnz ? t->copies[m].nnz : max_nnz;
    if (a->memory == MEMORY_STREAM || (a->memory == MEMORY_AUTO && need > avail)) {
        /* What is left after the factors and work space goes to the ring
         * of chunk buffers. */
        size_t base = amp_gpu_als_bytes(t, a->opts.rank, f32, 1) - amp_gpu_ring_bytes(t, 1);
        size_t per = amp_gpu_ring_bytes(t, 1);
        chunk = a->stream_chunk;
        if (chunk == 0) {
            chunk = avail > base ? (avail - base) / per : 0;
            chunk = chunk > STREAM_CHUNK_DEFAULT ? STREAM_CHUNK_DEFAULT : chunk;
            chunk = chunk > max_nnz ? max_nnz : chunk;
        }
        need = base + amp_gpu_ring_bytes(t, chunk);
        amp_format_bytes(nb, sizeof nb, need);
        if (chunk < (max_nnz < STREAM_CHUNK_MIN ? max_nnz : STREAM_CHUNK_MIN) || need > avail)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: rank %u needs %s of GPU memory even with "
                            "the tensor streamed%s, and GPU %d (%s) offers %s%s; --gpus 0 runs "
                            "on the CPU", a->path, a->opts.rank, nb,
                            a->stream_chunk ? " in chunks of --stream-chunk" : "", d->ordinal,
                            d->name, ab, a->device_memory ? " (--device-memory)" : " free");
    } else {
        amp_format_bytes(nb, sizeof nb, need);
        if (need > avail)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: rank %u needs %s of GPU memory with the "
                            "tensor resident, and GPU %d (%s) offers %s%s; --memory auto "
                            "streams it instead", a->path, a->opts.rank, nb, d->ordinal,
                            d->name, ab, a->device_memory ? " (--device-memory)" : " free");
    }
    double t0 = amp_now();
    AMP_CHECK(amp_gpu_tensor_upload(d->ordinal, t, chunk, &gc->g, err));
    gc->upload_seconds = amp_now() - t0;
    gc->on = 1;
    snprintf(gc->name, sizeof gc->name, "%s", d->name);
    char tb[32];
    amp_format_bytes(tb, sizeof tb, amp_gpu_tensor_bytes(gc->g));
    if (chunk) {
        amp_format_bytes(cb, sizeof cb, amp_gpu_ring_bytes(t, chunk));
        snprintf(gc->line, sizeof gc->line, "gpu %d (%s, %d SMs), tensor streamed from pinned "
                 "host memory in chunks of %" PRIu64 " nonzeros (ring of %s), %.1f bytes per "
                 "nonzero on the link, %s of device memory in all", d->ordinal, d->name,
                 d->sm_count, chunk, cb, amp_gpu_stream_bytes(gc->g) / (double)t->nnz /
                 (double)t->nmodes, nb);
    } else {
        snprintf(gc->line, sizeof gc->line, "gpu %d (%s, %d SMs), tensor resident (%s), "
                 "%s of device memory in all", d->ordinal, d->name, d->sm_count, tb, nb);
    }
    return AMP_OK;
#endif
}

/* MTTKRP of every mode on the GPU against the f64 reference. */
static amp_status gpu_check(const gpu_ctx *gc, const amp_tensor *t, const run_args *a,
                            const amp_cpd *c, double *rel, amp_error *err)
{
#ifdef AMP_HAVE_CUDA
    amp_status rc = AMP_OK;
    uint64_t max_rows = 0;
    for (unsigned m = 0; m < t->nmodes; m++)
        max_rows = t->rows[m] > max_rows ? t->rows[m] : max_rows;
    size_t bytes = (size_t)max_rows * c->rank * sizeof(double) + 1;
    double *M = amp_huge_alloc(bytes, "the GPU MTTKRP result", err);
    double *ref = M ? amp_huge_alloc(bytes, "the reference MTTKRP", err) : NULL;
    if (ref == NULL) {
        amp_huge_free(M, bytes);
        return AMP_ERR_NOMEM;
    }
    for (unsigned d = 0; d < t->nmodes && rc == AMP_OK; d++) {
        rc = amp_gpu_mttkrp_host(gc->g, (const double *const *)c->A, c->rank,
                                 a->opts.precision == AMP_PRECISION_F32, d, M, 0, NULL, err);
        if (rc == AMP_OK)
            rc = amp_mttkrp_reference(t, (d + 1) % t->nmodes, d, (const double *const *)c->A,
                                      c->rank, ref, err);
        double diff = 0, scale = 0;
        for (uint64_t k = 0; rc == AMP_OK && k < t->rows[d] * c->rank; k++) {
            double e = fabs(M[k] - ref[k]);
            diff = e > diff ? e : diff;
            scale = fabs(ref[k]) > scale ? fabs(ref[k]) : scale;
        }
        rel[d] = scale > 0 ? diff / scale : diff;
    }
    amp_huge_free(M, bytes);
    amp_huge_free(ref, bytes);
    return rc;
#else
    (void)gc, (void)t, (void)a, (void)c, (void)rel;
    return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "no CUDA backend");
#endif
}

static int run_mttkrp_only(run_args *a, const amp_tensor *t, const amp_cpd *c, int threads,
                           const gpu_ctx *gc)
{
    amp_error err = {0};
    double sec[AMP_MAX_MODES], total = 0;
    amp_status rc;
#ifdef AMP_HAVE_CUDA
    if (gc->on) {
        /* The kernels alone, factors resident: the papers' measure. */
        rc = amp_gpu_mttkrp_host(gc->g, (const double *const *)c->A, c->rank,
                                 a->opts.precision == AMP_PRECISION_F32, 0, NULL,
                                 a->opts.max_iters, sec, &err);
        for (unsigned m = 0; m < t->nmodes; m++)
            sec[m] *= a->opts.max_iters;
    } else
#endif
        rc = amp_cpd_time_mttkrp(t, &a->opts, c, sec, &err);
    if (rc != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    size_t fs = a->opts.precision == AMP_PRECISION_F32 ? 4 : 8;
    double bytes = amp_mttkrp_min_bytes(t, c->rank, fs);
    unsigned K = a->opts.max_iters;
    if (!a->quiet) {
        if (gc->on)
            printf("mttkrp:    rank %u, %u round%s over %u modes, on the GPU\n", c->rank, K,
                   K == 1 ? "" : "s", t->nmodes);
        else
            printf("mttkrp:    rank %u, %u round%s over %u modes, %d threads\n", c->rank, K,
                   K == 1 ? "" : "s", t->nmodes, threads);
        for (unsigned m = 0; m < t->nmodes; m++) {
            double per = sec[m] / K;
            printf("  mode %u: %.6f s per MTTKRP, %.2f GB/s of the %.1f MB it must move\n",
                   m + 1, per, bytes / per / 1e9, bytes / 1e6);
            total += sec[m];
        }
        printf("  all modes: %.6f s per round, %.3f s in all\n", total / K, total);
    }
    a->report.mttkrp_mode_seconds = sec;
    a->report.mttkrp_rounds = K;
    if (a->json && amp_report_write_json(&a->report, a->json, &err) != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    a->report.mttkrp_mode_seconds = NULL;
    return EXIT_SUCCESS;
}

/* The tolerance --check holds the kernels to: f64 sums in another order
 * than the reference; f32 rounds every product and every sum. */
#define CHECK_TOL_F64 1e-12
#define CHECK_TOL_F32 1e-4

static int run_check(run_args *a, const amp_tensor *t, const amp_cpd *c, const gpu_ctx *gc)
{
    amp_error err = {0};
    double rel[AMP_MAX_MODES], worst = 0;
    if ((gc->on ? gpu_check(gc, t, a, c, rel, &err)
                : amp_cpd_check_mttkrp(t, &a->opts, c, rel, &err)) != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    double tol = a->opts.precision == AMP_PRECISION_F32 ? CHECK_TOL_F32 : CHECK_TOL_F64;
    for (unsigned m = 0; m < t->nmodes; m++) {
        if (!a->quiet)
            printf("check:     mode %u: largest relative error %.3e\n", m + 1, rel[m]);
        worst = rel[m] > worst ? rel[m] : worst;
    }
    a->report.check_rel_err = rel;
    if (a->json && amp_report_write_json(&a->report, a->json, &err) != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    a->report.check_rel_err = NULL;
    if (!(worst <= tol)) {
        amp_log(AMP_LOG_ERROR, "%s: MTTKRP differs from the f64 reference by %.3e "
                "(tolerance %.0e)", a->path, worst, tol);
        return EXIT_FAILURE;
    }
    if (!a->quiet)
        printf("check:     passed (tolerance %.0e, %s, %s)\n", tol,
               a->opts.precision == AMP_PRECISION_F32 ? "f32" : "f64", gc->on ? "gpu" : "cpu");
    return EXIT_SUCCESS;
}

static int run(run_args *a)
{
    amp_error err = {0};
    amp_file *f = NULL;
    amp_tensor t;
    amp_cpd c = {0};
    gpu_ctx gc = {0};
    int status = EXIT_FAILURE, have_t = 0;
    double t_start = amp_now();
    int threads = a->opts.threads;
#ifdef _OPENMP
    if (threads == 0)
        threads = omp_get_max_threads();
#else
    threads = 1;
#endif
    if (amp_file_open(a->path, &f, &err) != AMP_OK)
        goto fail;
    amp_progress bar;
    amp_progress_begin(&bar, "loading", "B", 0, !a->quiet);
    amp_status rc = amp_tensor_load(f, threads, amp_progress_callback, &bar, &t, &err);
    amp_progress_end(&bar);
    if (rc != AMP_OK)
        goto fail;
    have_t = 1;
    a->report.path = a->path;
    a->report.t = &t;
    a->report.opts = &a->opts;
    a->report.backend = "cpu";
    a->report.threads = threads;
    a->report.seconds_load = amp_now() - t_start;
    if (gpu_open(a, &t, &gc, &err) != AMP_OK)
        goto fail;
    if (gc.on) {
        a->report.backend = "gpu";
        a->report.device = gc.name;
        a->report.seconds_upload = gc.upload_seconds;
#ifdef AMP_HAVE_CUDA
        if (amp_gpu_tensor_streamed(gc.g))
            a->report.stream_bytes_per_nnz = amp_gpu_stream_bytes(gc.g) / (double)t.nnz /
                                             (double)t.nmodes;
#endif
    }
    if (!a->quiet) {
        print_tensor(a, &t, threads, gc.on ? gc.line : NULL);
        printf("loaded:    %.3f s", a->report.seconds_load);
        if (gc.on)
            printf(", to the GPU %.3f s", gc.upload_seconds);
        printf("\n");
    }
    warn_rank(&t, a->opts.rank);
    rc = a->init ? amp_factors_read(&t, a->init, a->opts.rank, &c, &err)
                 : amp_cpd_init_random(&t, a->opts.rank, a->opts.seed, &c, &err);
    if (rc != AMP_OK)
        goto fail;
    if (a->mttkrp_only) {
        status = run_mttkrp_only(a, &t, &c, threads, &gc);
        goto done;
    }
    if (a->check) {
        status = run_check(a, &t, &c, &gc);
        goto done;
    }
    if (!a->quiet) {
        printf("cp-als:    rank %u, at most %u iterations, tol %g\n", a->opts.rank,
               a->opts.max_iters, a->opts.tol);
        if (a->init)
            printf("           starting factors from %s.mode*.mat\n", a->init);
        else
            printf("           random starting factors, seed %" PRIu64 "\n", a->opts.seed);
        printf("  iter  fit           delta      seconds\n");
    }
    a->opts.on_iter = on_iter;
    a->opts.ctx = a;
#ifdef AMP_HAVE_CUDA
    if (gc.on)
        rc = amp_gpu_cpd_als(gc.g, &t, &a->opts, &c, &err);
    else
#endif
        rc = amp_cpd_als(&t, &a->opts, &c, &err);
    if (rc != AMP_OK)
        goto fail;
    if (c.pinv_used)
        amp_log(AMP_LOG_WARN, "a Gram product was not positive definite: those solves used "
                "the pseudo-inverse (is the rank above what the data supports?)");
    a->report.final_fit = c.fit;
    a->report.converged = c.converged;
    a->report.phase_seconds = c.seconds;
    double t_out = amp_now();
    if (a->output && amp_factors_write(&t, &c, a->output, a->format, a->opts.precision,
                                       &err) != AMP_OK)
        goto fail;
    a->report.seconds_output = amp_now() - t_out;
    a->report.seconds_total = amp_now() - t_start;
    if (!a->quiet) {
        printf("final fit: %.10f after %u iteration%s (%s)\n", c.fit, c.iters,
               c.iters == 1 ? "" : "s", a->report.converged ? "converged" : "iteration limit");
        if (gc.on)
            printf("time:      load %.3f, to the GPU %.3f; GPU time: mttkrp %.3f, gram %.3f, "
                   "solve %.3f, normalize %.3f, fit %.3f; output %.3f, total %.3f s\n",
                   a->report.seconds_load, gc.upload_seconds, c.seconds[AMP_PHASE_MTTKRP],
                   c.seconds[AMP_PHASE_GRAM], c.seconds[AMP_PHASE_SOLVE],
                   c.seconds[AMP_PHASE_NORMALIZE], c.seconds[AMP_PHASE_FIT],
                   a->report.seconds_output, a->report.seconds_total);
        else
            printf("time:      load %.3f, mttkrp %.3f, gram %.3f, solve %.3f, normalize %.3f, "
                   "fit %.3f, output %.3f, total %.3f s\n", a->report.seconds_load,
                   c.seconds[AMP_PHASE_MTTKRP], c.seconds[AMP_PHASE_GRAM],
                   c.seconds[AMP_PHASE_SOLVE], c.seconds[AMP_PHASE_NORMALIZE],
                   c.seconds[AMP_PHASE_FIT], a->report.seconds_output, a->report.seconds_total);
        if (a->output)
            printf("factors:   %s.mode1.%s ... %s.mode%u.%s, %s.lambda.%s\n", a->output,
                   a->format == AMP_FACTORS_NPY ? "npy" : "mat", a->output, t.nmodes,
                   a->format == AMP_FACTORS_NPY ? "npy" : "mat", a->output,
                   a->format == AMP_FACTORS_NPY ? "npy" : "mat");
        else
            printf("factors:   not written (-o PREFIX writes them)\n");
    }
    if (a->json && amp_report_write_json(&a->report, a->json, &err) != AMP_OK)
        goto fail;
    status = EXIT_SUCCESS;
    goto done;
fail:
    amp_log_error(&err);
done:
    gpu_close(&gc);
    amp_cpd_free(&c);
    if (have_t)
        amp_tensor_free(&t);
    amp_file_close(f);
    free(a->report.iters);
    return status;
}

int main(int argc, char **argv)
{
    amp_log_level level = AMP_LOG_INFO;
    int c, want_list = 0, want_info = 0, want_verify = 0;
    uint64_t threads = 0, u;
    amp_error err = {0};
    run_args a;
    memset(&a, 0, sizeof a);
    a.gpus = GPUS_AUTO;
    amp_cpd_opts_init(&a.opts);
    static const char *const precisions[] = {"f64", "f32", NULL};
    static const char *const formats[] = {"text", "npy", NULL};
    static const char *const memories[] = {"auto", "resident", "stream", NULL};
    int choice;
    argv[0] = (char *)PROGRAM;   /* getopt's own messages use it */
    while ((c = getopt_long(argc, argv, "r:o:t:qvhV", long_options, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (amp_parse_u64(optarg, 1, MAX_RANK, "--rank", &u, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            a.opts.rank = (unsigned)u;
            break;
        case OPT_ITERS:
            if (amp_parse_u64(optarg, 1, MAX_ITERS, "--iters", &u, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            a.opts.max_iters = (unsigned)u;
            break;
        case OPT_TOL:
            if (amp_parse_double(optarg, 0, 1, "--tol", &a.opts.tol, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case OPT_SEED:
            if (amp_parse_u64(optarg, 0, UINT64_MAX, "--seed", &a.opts.seed, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case OPT_INIT:
            a.init = optarg;
            break;
        case OPT_PRECISION:
            if (amp_parse_choice(optarg, precisions, "--precision", &choice, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            a.opts.precision = choice == 1 ? AMP_PRECISION_F32 : AMP_PRECISION_F64;
            break;
        case 'o':
            a.output = optarg;
            break;
        case OPT_FORMAT:
            if (amp_parse_choice(optarg, formats, "--format", &choice, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            a.format = choice == 1 ? AMP_FACTORS_NPY : AMP_FACTORS_TEXT;
            break;
        case OPT_JSON:
            a.json = optarg;
            break;
        case OPT_MTTKRP_ONLY:
            a.mttkrp_only = 1;
            break;
        case OPT_CHECK:
            a.check = 1;
            break;
        case OPT_GPUS:
            if (amp_parse_u64(optarg, 0, 64, "--gpus", &u, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            if (u > 1)
                return amp_usage_error(PROGRAM, "--gpus %" PRIu64 ": this version runs on one "
                                       "GPU or on the CPU (--gpus 0 or 1)", u);
            a.gpus = (int)u;
            break;
        case OPT_MEMORY:
            if (amp_parse_choice(optarg, memories, "--memory", &choice, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            a.memory = choice;
            break;
        case OPT_STREAM_CHUNK:
            if (amp_parse_u64(optarg, STREAM_CHUNK_MIN, UINT64_C(1) << 40, "--stream-chunk",
                              &a.stream_chunk, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case OPT_DEVICE_MEMORY:
            if (amp_parse_size(optarg, 1, UINT64_MAX, "--device-memory", &a.device_memory, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case OPT_LIST_DEVICES:
            want_list = 1;
            break;
        case OPT_INFO:
            want_info = 1;
            break;
        case OPT_VERIFY:
            want_verify = 1;
            break;
        case 't':
            if (amp_parse_u64(optarg, 1, 4096, "--threads", &threads, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case 'q':
            level = AMP_LOG_WARN;
            break;
        case 'v':
            level = AMP_LOG_DEBUG;
            break;
        case 'h':
            usage();
            return EXIT_SUCCESS;
        case 'V':
            version();
            return EXIT_SUCCESS;
        default:
            fprintf(stderr, "Try 'amped-run --help' for more information.\n");
            return AMP_EXIT_USAGE;
        }
    }
    amp_log_init("amped-run", level);
    if (want_list) {
        if (optind < argc)
            return amp_usage_error(PROGRAM, "--list-devices takes no FILE; extra operand '%s'", argv[optind]);
        return list_devices();
    }
    if (optind == argc)
        return amp_usage_error(PROGRAM, "missing FILE.amp (prepare one with amped-prep)");
    if (optind + 1 < argc)
        return amp_usage_error(PROGRAM, "one FILE only; extra operand '%s'", argv[optind + 1]);
    if (a.mttkrp_only + a.check + (want_info || want_verify) > 1)
        return amp_usage_error(PROGRAM, "--mttkrp-only, --check and --info/--verify are "
                               "separate actions: give one");
    if ((a.mttkrp_only || a.check) && a.output)
        return amp_usage_error(PROGRAM, "-o writes factors of a decomposition; --mttkrp-only "
                               "and --check compute none");
    a.path = argv[optind];
    if (want_info || want_verify) {
        int status = EXIT_SUCCESS;
        if (want_info)
            status = amp_inspect_info(a.path);
        if (want_verify && status == EXIT_SUCCESS)
            status = amp_inspect_verify(a.path, (int)threads, level < AMP_LOG_INFO);
        return status;
    }
#ifdef _OPENMP
    if (threads)
        omp_set_num_threads((int)threads);
#endif
    a.opts.threads = (int)threads;
    a.quiet = level < AMP_LOG_INFO;
    amp_outfile_cleanup_on_signals();
    return run(&a);
}
