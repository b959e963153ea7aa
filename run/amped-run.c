/* amped-run: CP decomposition of a prepared (.amp) tensor.
 *
 * CP-ALS on one or several GPUs (gpu_run.c; each GPU's part resident or
 * streamed) or on the CPU backend (OpenMP), factor output in the original
 * index space, MTTKRP timing (--mttkrp-only) and checking (--check);
 * --info and --verify inspect a file; --list-devices shows the GPUs this
 * build sees. */
#include <config.h>

#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amp_alloc.h"
#include "amp_cli.h"
#include "amp_comm.h"
#include "amp_cpu.h"
#include "gpu_run.h"
#include "amp_log.h"
#include "amp_outfile.h"
#include "amp_parse.h"
#include "amp_progress.h"
#include "amp_threads.h"
#include "amp_timer.h"
#include "amped_format.h"
#include "inspect.h"
#include "run_dist.h"
#include "run_report.h"
#include "session.h"
#include "starts.h"
#ifdef AMP_HAVE_CUDA
#include "amp_cuda.h"
#endif

#define PROGRAM "amped-run"

static void usage(void)
{
    amp_cpd_opts d;
    amp_cpd_opts_init(&d);
    printf("Usage: amped-run [OPTION]... FILE.amp\n"
           "Compute a CP decomposition (CP-ALS, or non-negative and regularized CP) of\n"
           "the tensor that amped-prep prepared in FILE.amp.\n"
           "\n"
           "Decomposition:\n"
           "  -r, --rank=R         rank of the decomposition, 1 to %u (default %u)\n"
           "      --iters=N        at most N iterations (default %u)\n"
           "      --tol=T          stop when the fit changes by less than T; 0 runs every\n"
           "                       iteration (default %g)\n"
           "      --seed=S         seed of the random starting factors (default %" PRIu64 ")\n"
           "      --init=PREFIX    start from the factors -o PREFIX wrote, in any --format\n"
           "                       and --rows: PREFIX.mode1.mat ..., PREFIX.mode1.npy ...\n"
           "                       or PREFIX.ktn, whichever exists (where several do,\n"
           "                       the set PREFIX.manifest lists)\n"
           "      --precision=P    f64 or f32: the MTTKRP's arithmetic; the rank-by-rank\n"
           "                       algebra is f64 either way (default f64)\n"
           "\n"
           "Several models (see amped-run(1), STARTS AND RANKS; the CPU, or --gpus 1):\n"
           "      --starts=K       K random starts, seeds S, S+1, ..., fitted together:\n"
           "                       one MTTKRP a mode an iteration for all (default 1)\n"
           "      --ranks=R1,R2,.. these ranks (instead of --rank), K starts each; a\n"
           "                       table per rank: best fit, spread, FMS against the best\n"
           "      --keep-all       -o writes every start (PREFIX.r8.s3.*), not only each\n"
           "                       rank's best (PREFIX.r8.*)\n"
           "      --choose=RULE    name a rank: fit-elbow, or fms F (the largest rank\n"
           "                       whose starts' median FMS is at least F)\n"
           "\n"
           "Constraints (see amped-run(1), METHODS):\n"
           "      --method=M       als (unconstrained), ao-admm, mu (multiplicative\n"
           "                       updates), hals, cp-apr (Poisson CP for counts), or\n"
           "                       gcp (generalized CP: --loss)\n"
           "                       (default als)\n"
           "      --constraint=C   none or nonneg, for every mode or as a list, one per\n"
           "                       mode: nonneg,none,nonneg (default none; mu: nonneg)\n"
           "      --l1=L           sparsity penalty L sum|a| per factor, one value or a\n"
           "                       list per mode (default 0)\n"
           "      --l2=L           ridge penalty (L/2) |A|^2, one value or a list\n"
           "                       (default 0)\n"
           "      --admm-inner=N   AO-ADMM inner iterations, 1 to %u (default %u)\n"
           "      --admm-tol=T     AO-ADMM: a row stops its inner iterations once its\n"
           "                       residuals are below T relative (default 0: never)\n"
           "\n"
           "Poisson CP, --method cp-apr (counts; --tol is the KKT tolerance, default\n"
           "1e-4, and --iters the outer iterations, default %u; on the CPU, one GPU or\n"
           "several, also under MPI; not --memory remap, nor --partition equal-nnz):\n"
           "      --inner=N        inner iterations per mode, the most (default %u)\n"
           "      --kappa=K        the shift that lifts inactive entries (default %g)\n"
           "      --kappa-tol=T    entries below T are inactive (default %g)\n"
           "      --kappa-rule=R   kkt: lift where Phi > 1; pyttb: where Phi > 0, as\n"
           "                       pyttb's cp_apr (default kkt)\n"
           "      --eps-div-zero=E the model's value is at least E where divided by\n"
           "                       (default %g)\n"
           "      --allow-noninteger  take non-negative values that are not counts\n"
           "\n"
           "Missing entries (see amped-run(1), MISSING ENTRIES):\n"
           "      --observed=WHICH all: every cell is data, an absent one a zero (CP-ALS);\n"
           "                       nonzeros: fit the stored entries only (completion);\n"
           "                       --l2 is then each row's ridge (default all)\n"
           "      --holdout=F      completion: keep a share F in [0, 1) of the stored\n"
           "                       entries out of the fit, drawn by --seed, and report\n"
           "                       their RMSE each iteration (default 0)\n"
           "      --holdout-file=FILE  completion: the test entries from a .tns file\n"
           "                       (1-based, within the tensor's dimensions) instead\n"
           "\n"
           "Generalized CP, --method gcp (stochastic gradients and Adam; --iters is the\n"
           "epochs, default %u; --tol 0, the default, stops only on failed epochs):\n"
           "      --loss=L         gaussian, poisson, poisson-log, bernoulli-logit,\n"
           "                       bernoulli-odds, gamma, rayleigh or huber (default\n"
           "                       gaussian)\n"
           "      --samples-grad=N or NONZEROS,ZEROS  cells sampled a step (default\n"
           "                       max(1000, 3 nnz/1000) of each, at most nnz)\n"
           "      --samples-loss=N or NONZEROS,ZEROS  the fixed sample of the loss\n"
           "                       estimate (default max(100000, nnz/100), at most nnz)\n"
           "      --epoch-iters=N  Adam steps an epoch (default %u)\n"
           "      --rate=R         Adam's step size (default %g)\n"
           "      --decay=D        the rate's factor after a failed epoch (default %g)\n"
           "      --max-fails=N    failed epochs allowed; one more stops (default %u)\n"
           "      --huber-delta=D  the huber loss's threshold (default %g)\n"
           "      --adam=KIND      dense (every factor entry every step) or lazy (only\n"
           "                       the rows the step's samples touch; default dense)\n"
           "\n"
           "Output:\n"
           "  -o, --output=PREFIX  write the factors as PREFIX.mode1.mat ... PREFIX.modeN.mat\n"
           "                       and PREFIX.lambda.mat, in the original index space,\n"
           "                       with PREFIX.manifest (each file's size and checksum)\n"
           "                       (default: not written)\n"
           "      --format=F       text (SPLATT's layout), npy (NumPy), or ktensor: the\n"
           "                       model in one file, PREFIX.ktn, for the Tensor\n"
           "                       Toolbox, pyttb and GenTen (default text)\n"
           "      --rows=WHICH     all: a row per index of each mode; nonempty: only the\n"
           "                       rows of indices that occur, each with its index (text:\n"
           "                       first on its line; npy: PREFIX.modeN.index.npy), for\n"
           "                       huge dimensions (default all)\n"
           "      --json=FILE      also write the report (fit per iteration, timings) as\n"
           "                       JSON ('-': standard output, without the summary)\n"
           "      --report=FILE    also write the report as a self-contained HTML page\n"
           "                       of charts (fit, time per phase, GPUs' balance)\n"
           "                       ('-' as for --json)\n"
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
           "      --gpus=N         0: the CPU backend; N: the first N GPUs, joined with\n"
           "                       NCCL (default: every GPU found, else the CPU)\n"
           "      --devices=LIST   the GPUs to use by number, e.g. 0,2 (default: the first\n"
           "                       --gpus)\n"
           "      --partition=P    shards: each GPU computes whole shards and owns their\n"
           "                       factor rows; equal-nnz: equal nonzero ranges, rows\n"
           "                       summed across GPUs, for comparison; not with\n"
           "                       cp-apr (default shards)\n"
           "      --overlap        several GPUs: send each mode's rows while the next\n"
           "                       mode's MTTKRP runs on the nonzeros that need none of\n"
           "                       them (default: send, then compute; see amped-run(1))\n"
           "      --send-parts=N   several GPUs: solve and send each mode's rows in N\n"
           "                       parts (auto, or 1 to %d), each as soon as the MTTKRP\n"
           "                       has written it (default auto: 2 by copies, else 1)\n"
           "      --exchange=HOW   several GPUs of one process: nccl sends the rows\n"
           "                       with NCCL's kernels, copy with the GPUs' copy\n"
           "                       engines, which leave the SMs to the MTTKRP (default\n"
           "                       auto: copy where the GPUs have peer access, else nccl)\n"
           "      --memory=MODE    auto: keep each GPU's part of the tensor in its memory\n"
           "                       when it fits, else (one GPU) two mode copies remapped\n"
           "                       each mode when they fit and the file has REMAP\n"
           "                       sections (amped-prep --remap-streams), else stream it\n"
           "                       from host memory every iteration (on one GPU from\n"
           "                       the file's compressed chunks when host memory is\n"
           "                       short too);\n"
           "                       resident; remap; stream; compressed (default auto)\n"
           "      --device-memory=BYTES  use at most BYTES of each GPU's memory (K, M, G\n"
           "                       suffixes; default: all that is free)\n"
           "      --host-memory=BYTES  host memory a streamed tensor may take before one\n"
           "                       GPU streams compressed chunks instead (default: what\n"
           "                       the system reports available)\n"
           "      --stream-chunk=N nonzeros per host-to-device copy when streaming\n"
           "                       (default: what fits, at most %" PRIu64 ")\n"
           "      --remap-kernel   two copies remapped: write the next copy with a kernel\n"
           "                       of its own after each MTTKRP, not inside it (default:\n"
           "                       inside, where the kernel allows; for comparing)\n"
           "      --list-devices   list the CUDA devices this build can use, run a\n"
           "                       self-test kernel on each, and exit\n"
           "  -t, --threads=N      CPU threads (default: the CPUs this process may run on)\n"
           "\n"
           "Reporting:\n"
           "  -q, --quiet          print only warnings and errors\n"
           "  -v, --verbose        print more detail\n"
           "  -h, --help           display this help and exit\n"
           "  -V, --version        output version and build information and exit\n"
           "\n"
           "Exit status: 0 on success, 1 on a failure, 2 on a usage error.\n"
           "Report bugs: see %s.\n", AMP_CPU_MAX_RANK, d.rank, d.max_iters, d.tol, d.seed,
           AMP_ADMM_INNER_MAX, d.admm_inner, AMP_APR_ITERS_DEFAULT, d.apr.inner, d.apr.kappa,
           d.apr.kappa_tol, d.apr.eps_div_zero, AMP_GCP_EPOCHS_DEFAULT, d.gcp.epoch_iters,
           d.gcp.rate, d.gcp.decay, d.gcp.max_fails, d.gcp.huber_delta, AMP_SEND_PARTS_MAX,
           AMP_STREAM_CHUNK_DEFAULT, PACKAGE_BUGREPORT);
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
#ifdef AMP_HAVE_MPI
    printf("MPI: yes (runs as several processes under mpirun or srun)\n");
#else
    printf("MPI: no\n");
#endif
}

static int list_devices(void)
{
#ifdef AMP_HAVE_CUDA
    amp_cuda_device dev[64];
    int count = 0;
    amp_error err = {0};
    if (amp_cuda_list_devices(dev, 64, &count, &err) != AMP_OK) {
        if (err.status == AMP_ERR_NO_DEVICE)
            amp_log(AMP_LOG_ERROR, "%s; --gpus 0 runs on the CPU", amp_error_message(&err));
        else
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
    if (count > 1 && count <= 64) {
        int ordinals[64];
        for (int i = 0; i < count; i++)
            ordinals[i] = dev[i].ordinal;
        const int peers = amp_comm_peers((unsigned)count, ordinals);
        printf("peer access: %s%s\n", peers ? "between every pair" : "not between every pair",
               !amp_comm_available() ? ""
               : peers               ? " (rows go by copies by default)"
                                     : " (rows go by NCCL by default)");
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
    amp_run_opts r;            /* the decomposition's options (session.h) */
    const char *output, *json, *html;
    amp_factor_format format;
    amp_factor_rows rows;
    int mttkrp_only, check, quiet, rows_given;
    amp_run_report report;
    amp_outfile json_out;      /* --json, created before the run */
    amp_outfile html_out;      /* --report, likewise */
    const amp_cpd *cpd;        /* the decomposition on_iter reports on */
    int late_usage;            /* the options disagree with the file: exit 2 */
    unsigned place_stop;       /* test hooks: the signal after this many renames */
    amp_gcp_plan gcp_plan;     /* --method gcp: the samples it takes */
    amp_starts_opts starts;    /* --starts, --ranks: several models (starts.h) */
    int rank_given;
} run_args;

static void on_iter(void *ctx, unsigned iter, double fit, double delta, double seconds)
{
    run_args *a = ctx;
    amp_error err = {0};
    if (amp_report_add_iter(&a->report, iter, fit, delta, seconds, a->cpd->seconds, &err) !=
        AMP_OK)
        amp_log_error(&err);
    const int apr = a->r.opts.method == AMP_METHOD_APR;
    const int gcp = a->r.opts.method == AMP_METHOD_GCP;
    if (apr && a->report.niters > 0) {
        amp_iter_record *rec = &a->report.iters[a->report.niters - 1];
        rec->loglik = a->cpd->loglik;
        rec->kkt = a->cpd->kkt;
        rec->inner = a->cpd->inner_iters;
    }
    const int completion = a->r.opts.completion.observed == AMP_OBSERVED_NONZEROS;
    if (completion && a->report.niters > 0) {
        amp_iter_record *rec = &a->report.iters[a->report.niters - 1];
        rec->rmse_train = a->cpd->completion.rmse_train;
        rec->rmse_test = a->cpd->completion.rmse_test;
    }
    if (gcp && a->report.niters > 0) {
        amp_iter_record *rec = &a->report.iters[a->report.niters - 1];
        rec->gcp_loss = a->cpd->gcp_loss;
        rec->gcp_stderr = a->cpd->gcp_stderr;
        rec->gcp_exact = a->cpd->gcp_exact;
        rec->gcp_rate = a->cpd->gcp_rate;
        rec->gcp_failed = a->cpd->gcp_failed;
    }
    if (!a->quiet) {
        if (gcp) {
            char exact[32] = "-";
            if (!isnan(a->cpd->gcp_exact))
                snprintf(exact, sizeof exact, "%.10e", a->cpd->gcp_exact);
            printf("%6u  %.10e  %.3e  %-17s  %.2e  %8.3f%s\n", iter, a->cpd->gcp_loss,
                   a->cpd->gcp_stderr, exact, a->cpd->gcp_rate, seconds,
                   a->cpd->gcp_failed ? "  failed: back to the epoch's start" : "");
        } else if (apr)
            printf("%6u  %.10e  %.3e  %5u  %8.3f\n", iter, a->cpd->loglik, a->cpd->kkt,
                   a->cpd->inner_iters, seconds);
        else if (completion)
            printf("%6u  %.10f  %.6e  %.6e  %.3e  %8.3f\n", iter, fit,
                   a->cpd->completion.rmse_train, a->cpd->completion.rmse_test, delta, seconds);
        else
            printf("%6u  %.10f  %.3e  %8.3f\n", iter, fit, delta, seconds);
        fflush(stdout);
    }
}

static void print_tensor(const run_args *a, const amp_tensor *t, int threads, int on_gpu)
{
    char mem[32];
    printf("tensor:    %s: %u modes, %" PRIu64 " nonzero%s, dims ", a->path, t->nmodes, t->nnz,
           amp_plural(t->nnz));
    for (unsigned m = 0; m < t->nmodes; m++)
        printf("%s%" PRIu64, m ? "x" : "", t->dims[m]);
    printf(" (nonempty ");
    for (unsigned m = 0; m < t->nmodes; m++)
        printf("%s%" PRIu64, m ? "x" : "", t->rows[m]);
    if (t->layout_only)
        printf("), values %s, not held in host memory\n",
               t->value_type == AMP_VALUES_F32 ? "f32" : "f64");
    else
        printf("), values %s, %s in memory\n", t->value_type == AMP_VALUES_F32 ? "f32" : "f64",
               amp_format_bytes(mem, sizeof mem, t->bytes));
    if (!on_gpu)
        printf("backend:   cpu, %d thread%s, precision %s\n", threads, threads == 1 ? "" : "s",
               a->r.opts.precision == AMP_PRECISION_F32 ? "f32" : "f64");
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

#ifdef AMP_TEST_HOOKS
static int place_signo;   /* AMPED_TEST_PLACE_SIGNAL's signal */

static void place_signal(const amp_outfile *of)
{
    (void)of;
    raise(place_signo);
}
#endif

/* The run's outputs made to appear together: every file (the factor set
 * ff when not NULL, --json, and --report where html) written in full and
 * synced under a temporary name, then all renamed into place in one step;
 * a failure before that leaves none. A device, FIFO or descriptor output
 * cannot be taken back, so it is written last, once the files are in
 * place. */
static amp_status write_outputs(run_args *a, amp_factor_files *ff, int html, amp_error *err)
{
    amp_outfile *list[2 * AMP_MAX_MODES + 4];
    size_t n = ff ? amp_factors_outfiles(ff, list) : 0;
    for (int direct = 0; direct <= 1; direct++) {
        if (a->json && amp_outfile_direct(&a->json_out) == direct)
            AMP_CHECK(amp_report_write_json(&a->report, &a->json_out, err));
        if (html && a->html && amp_outfile_direct(&a->html_out) == direct)
            AMP_CHECK(amp_report_write_html(&a->report, &a->html_out, err));
        if (direct)
            break;
        if (a->json)
            list[n++] = &a->json_out;
        if (html && a->html)
            list[n++] = &a->html_out;
#ifdef AMP_TEST_HOOKS
        if (a->place_stop > 0 && a->place_stop <= n)
            list[a->place_stop - 1]->placed = place_signal;
#endif
        AMP_CHECK(amp_outfile_place_all(list, n, err));
    }
    return AMP_OK;
}

static int run_mttkrp_only(run_args *a, const amp_tensor *t, const amp_cpd *c, int threads,
                           amp_gpu_run *gr)
{
    amp_error err = {0};
    double sec[AMP_MAX_MODES], total = 0;
    amp_status rc;
    if (gr) {
        /* The kernels alone, factors resident: the papers' measure. */
        rc = amp_gpu_run_time_mttkrp(gr, t, c, a->r.opts.max_iters, sec, &err);
        for (unsigned m = 0; m < t->nmodes; m++)
            sec[m] *= a->r.opts.max_iters;
    } else {
        rc = amp_cpu_time_mttkrp(t, &a->r.opts, c, sec, &err);
    }
    if (rc != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    size_t fs = a->r.opts.precision == AMP_PRECISION_F32 ? 4 : 8;
    double bytes = amp_mttkrp_min_bytes(t, c->rank, fs);
    unsigned K = a->r.opts.max_iters;
    if (!a->quiet) {
        if (gr)
            printf("mttkrp:    rank %u, %u round%s over %u modes, on %u GPU%s (the slowest "
                   "GPU's time)\n", c->rank, K, K == 1 ? "" : "s", t->nmodes,
                   amp_gpu_run_count(gr), amp_gpu_run_count(gr) == 1 ? "" : "s");
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
    if (write_outputs(a, NULL, 0, &err) != AMP_OK) {
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

static int run_check(run_args *a, const amp_tensor *t, const amp_cpd *c, amp_gpu_run *gr)
{
    amp_error err = {0};
    double rel[AMP_MAX_MODES], worst = 0;
    if ((gr ? amp_gpu_run_check(gr, t, c, rel, &err)
            : amp_cpu_check_mttkrp(t, &a->r.opts, c, rel, &err)) != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    double tol = a->r.opts.precision == AMP_PRECISION_F32 ? CHECK_TOL_F32 : CHECK_TOL_F64;
    for (unsigned m = 0; m < t->nmodes; m++) {
        if (!a->quiet)
            printf("check:     mode %u: largest relative error %.3e\n", m + 1, rel[m]);
        worst = rel[m] > worst ? rel[m] : worst;
    }
    a->report.check_rel_err = rel;
    if (write_outputs(a, NULL, 0, &err) != AMP_OK) {
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
               a->r.opts.precision == AMP_PRECISION_F32 ? "f32" : "f64", gr ? "gpu" : "cpu");
    return EXIT_SUCCESS;
}

/* ---- the GPU backend's report ---------------------------------------------- */

static const char *partition_name(amp_partition_kind k)
{
    return k == AMP_PARTITION_EQUAL_NNZ ? "equal-nnz" : "shards";
}

/* One GPU holding two copies remapped: the backend line, with the
 * tensor's device bytes as they came and as planned. */
static void print_remap(const amp_gpu_info *in, const amp_tensor *t, const char *prec)
{
    char tb[32], pb[32], nb[32];
    const char *from = in->remap_from_file == t->nmodes ? "read from the file's REMAP sections"
                       : in->remap_from_file == 0   ? "computed at load (the file has no "
                                                      "REMAP sections)"
                                                    : "read from REMAP sections where the "
                                                      "file has them, else computed";
    printf("backend:   gpu %d (%s, %d SMs), tensor as two mode copies remapped each mode (%s "
           "on the device, %s planned: two copies, %u modes' remap positions, block tables), "
           "positions %s in %.3f s, %s of device memory in all, precision %s\n", in->device,
           in->name, in->sm_count, amp_format_bytes(tb, sizeof tb, in->tensor_bytes),
           amp_format_bytes(pb, sizeof pb, in->tensor_plan_bytes), t->nmodes, from,
           in->remap_positions_seconds, amp_format_bytes(nb, sizeof nb, in->need_bytes), prec);
}

/* One GPU, --memory auto or remap: the sizes the plan compared and what
 * it chose. */
static void print_memory_plan(const amp_gpu_info *in)
{
    char ab[32], rb[32], mb[32];
    if (in->asked != AMP_MEMORY_AUTO && in->asked != AMP_MEMORY_REMAP)
        return;
    amp_format_bytes(ab, sizeof ab, in->sizes.avail);
    amp_format_bytes(rb, sizeof rb, in->sizes.resident);
    amp_format_bytes(mb, sizeof mb, in->sizes.remap);
    printf("memory:    --memory %s: every copy resident needs %s, two copies remapped %s%s, "
           "GPU %d offers %s: %s\n", amp_memory_name(in->asked), rb,
           in->sizes.remap ? mb : "(not possible here)",
           amp_memory_remap_skipped(in->asked, &in->sizes)
               ? " (not for auto: the file has no REMAP sections, amped-prep --remap-streams)"
               : "",
           in->device, ab, amp_memory_name(in->memory));
}

/* The backend line, and one line per GPU when there are several. */
static void print_gpus(const run_args *a, const amp_tensor *t, const amp_gpu_run *gr)
{
    /* Under several processes, n is process 0's GPUs of the run's total. */
    const unsigned n = amp_gpu_run_count(gr), total = amp_gpu_run_total(gr);
    const char *prec = a->r.opts.precision == AMP_PRECISION_F32 ? "f32" : "f64";
    char tb[32], nb[32], cb[32];
    for (unsigned k = 0; k < n; k++) {
        amp_gpu_info in;
        amp_gpu_run_info(gr, k, &in);
        amp_format_bytes(tb, sizeof tb, in.tensor_bytes);
        amp_format_bytes(nb, sizeof nb, in.need_bytes);
        amp_format_bytes(cb, sizeof cb, in.streamed ? in.tensor_bytes : 0);
        if (total == 1) {
            char hb[32];
            /* amp_gpu_tensor_upload_compressed decodes on at most 64. */
            int decoders = a->report.threads < 64 ? a->report.threads : 64;
            if (in.compressed)
                printf("backend:   gpu %d (%s, %d SMs), tensor streamed from its compressed "
                       "chunks in host memory (%s with the page-locked slots), decoded on %d "
                       "thread%s, chunks of up to %" PRIu64 " nonzeros (%s on the device), "
                       "%.1f bytes per nonzero on the link, %s of device memory in all, "
                       "precision %s\n", in.device, in.name, in.sm_count,
                       amp_format_bytes(hb, sizeof hb, in.host_bytes), decoders,
                       decoders == 1 ? "" : "s", in.chunk_nnz, cb,
                       in.stream_bytes_per_nnz, nb, prec);
            else if (in.streamed)
                printf("backend:   gpu %d (%s, %d SMs), tensor streamed from pinned host memory "
                       "in chunks of %" PRIu64 " nonzeros (%s on the device), %.1f bytes per "
                       "nonzero on the link, %s of device memory in all, precision %s\n",
                       in.device, in.name, in.sm_count, in.chunk_nnz, cb,
                       in.stream_bytes_per_nnz, nb, prec);
            else if (in.memory == AMP_MEMORY_REMAP)
                print_remap(&in, t, prec);
            else
                printf("backend:   gpu %d (%s, %d SMs), tensor resident (%s), %s of device "
                       "memory in all, precision %s\n", in.device, in.name, in.sm_count, tb, nb,
                       prec);
            print_memory_plan(&in);
            return;
        }
        if (k == 0)
            printf("backend:   %u GPUs%s joined with NCCL, partition %s%s%s, precision %s%s\n",
                   total, total > n ? " of every process" : "", partition_name(a->r.gpu.partition),
                   a->r.gpu.overlap ? ", rows sent behind the next MTTKRP" : "",
                   amp_gpu_run_by_copies(gr) ? ", rows sent by copy engines" : "", prec,
                   total > n ? "; process 0's:" : "");
        printf("  gpu %d:   %s (%d SMs), ", in.device, in.name, in.sm_count);
        if (in.streamed)
            printf("its part streamed in chunks of %" PRIu64 " nonzeros, %.1f bytes per "
                   "nonzero", in.chunk_nnz, in.stream_bytes_per_nnz);
        else
            printf("its part resident (%s)", tb);
        printf(", %s of device memory; nonzeros per mode", nb);
        for (unsigned m = 0; m < t->nmodes; m++)
            printf(" %" PRIu64, in.nnz[m]);
        printf("\n");
    }
    printf("  balance: largest GPU's nonzeros over the mean:");
    for (unsigned m = 0; m < t->nmodes; m++) {
        double best, imb = amp_gpu_run_imbalance(gr, m, &best);
        printf(" mode %u %.3f", m + 1, imb);
        if (best > 1.0005)
            printf(" (a shard holds %.3f of a fair share)", best);
    }
    printf("\n");
    for (unsigned m = 0; m < t->nmodes; m++)
        for (unsigned k = 0; k < n; k++) {
            amp_gpu_info in;
            amp_gpu_run_info(gr, k, &in);
            if (in.nnz[m] == 0)
                printf("  note:    gpu %d has no nonzeros of mode %u (the file has too few "
                       "shards for %u GPUs): it idles during that mode's MTTKRP\n", in.device,
                       m + 1, n);
        }
}

/* Per GPU and mode, after the decomposition: into the report, and printed. */
/* How mode m's rows went to the other GPUs, ending the line. */
static void print_rows_sent(const run_args *a, unsigned m)
{
    const unsigned parts = (unsigned)a->report.send_parts[m];
    if (parts > 1)
        printf("in %u parts, each once solved\n", parts);
    else
        printf("%s\n", parts == 1 ? "once solved" : "after the update");
}

static void gpu_times(run_args *a, const amp_tensor *t, const amp_gpu_run *gr,
                      amp_report_gpu *rg)
{
    const unsigned n = amp_gpu_run_count(gr);
    for (unsigned k = 0; k < n; k++) {
        amp_gpu_info in;
        amp_gpu_run_info(gr, k, &in);
        rg[k].device = in.device;
        rg[k].name = in.name;
        rg[k].streamed = in.streamed;
        rg[k].compressed = in.compressed;
        rg[k].memory_bytes = (double)in.need_bytes;
        rg[k].memory = amp_memory_name(in.memory);
        rg[k].asked = amp_memory_name(in.asked);
        rg[k].avail_bytes = (double)in.sizes.avail;
        rg[k].resident_bytes = (double)in.sizes.resident;
        rg[k].remap_bytes = (double)in.sizes.remap;
        rg[k].remap_in_file = in.sizes.remap_in_file;
        rg[k].remap_skipped = amp_memory_remap_skipped(in.asked, &in.sizes);
        rg[k].tensor_bytes = (double)in.tensor_bytes;
        rg[k].tensor_plan_bytes = (double)in.tensor_plan_bytes;
        rg[k].remap_from_file = in.remap_from_file;
        rg[k].remaps = in.remaps;
        rg[k].remaps_fused = in.remaps_fused;
        rg[k].remap_positions_seconds = in.remap_positions_seconds;
        rg[k].remap_seconds = in.remap_seconds;
        for (unsigned m = 0; m < t->nmodes; m++) {
            rg[k].nnz[m] = in.nnz[m];
            rg[k].rows[m] = in.rows[m];
        }
        amp_gpu_run_times(gr, k, rg[k].mttkrp, rg[k].busy, rg[k].comm, rg[k].exchange,
                          rg[k].idle, rg[k].phase);
    }
    a->report.gpus = rg;
    a->report.ngpus = n;
    a->report.partition = partition_name(a->r.gpu.partition);
    /* Only where rows travel: several GPUs, or GPUs of several processes. */
    a->report.row_exchange = n < 2 && a->report.nprocesses == 0 ? NULL
                             : amp_gpu_run_by_copies(gr)        ? "copy"
                                                                : "nccl";
    for (unsigned m = 0; m < t->nmodes; m++) {
        a->report.imbalance[m] = amp_gpu_run_imbalance(gr, m, &a->report.imbalance_bound[m]);
        a->report.send_parts[m] = amp_gpu_run_parts(gr, m);
    }
    if (a->quiet || n == 1)
        return;
    printf("per GPU:   seconds summed over the iterations; busy: the mode's update but its "
           "collectives;\n           nccl: in collectives or waiting for rows; exchange: "
           "sending the mode's rows, behind\n           the next MTTKRP; idle: waiting for "
           "the slowest GPU\n");
    printf("  mode  gpu      nonzeros     mttkrp       busy       nccl   exchange       idle\n");
    for (unsigned m = 0; m < t->nmodes; m++) {
        double most = 0, sum = 0;
        for (unsigned k = 0; k < n; k++) {
            printf("  %4u  %3d  %12" PRIu64 "  %9.4f  %9.4f  %9.4f  %9.4f  %9.4f\n", m + 1,
                   rg[k].device, rg[k].nnz[m], rg[k].mttkrp[m], rg[k].busy[m], rg[k].comm[m],
                   rg[k].exchange[m], rg[k].idle[m]);
            most = rg[k].mttkrp[m] > most ? rg[k].mttkrp[m] : most;
            sum += rg[k].mttkrp[m];
        }
        printf("  mode %u: MTTKRP time imbalance (max over mean) %.3f, nonzeros %.3f; rows "
               "sent ", m + 1, sum > 0 ? most / (sum / n) : 1.0, a->report.imbalance[m]);
        print_rows_sent(a, m);
    }
}

/* What one run holds, released in run()'s one cleanup. */
typedef struct run_state {
    amp_session ss;            /* the file, tensor, model and GPUs (session.h) */
    amp_report_gpu *rg;
    amp_factor_files factors;   /* -o, created before the run */
    amp_dist *dist;            /* one process of several (MPI), or NULL */
    /* Under MPI: this process's CPUs, the processes of its host that share
     * them, and where its thread count came from (NULL: its share). */
    unsigned cpus, cpu_sharers;
    const char *threads_from;
    double t_start;
} run_state;

/* No output of the run may name the input or another output: checked
 * once the layout gives the factor files' names, before any is opened. */
static amp_status check_distinct(run_args *a, run_state *s, amp_error *err)
{
    const char *paths[2 * AMP_MAX_MODES + 5], *what[2 * AMP_MAX_MODES + 5];
    int input[2 * AMP_MAX_MODES + 5] = {1};
    char *names[2 * AMP_MAX_MODES + 2];
    size_t n = 0, nnames = 0;
    amp_status rc = AMP_OK;
    paths[n] = a->path;
    what[n++] = "the input";
    for (unsigned k = 0; a->output && !amp_starts_active(&a->starts); k++) {
        int more;
        char *name = amp_factors_file_name(a->output, s->ss.t.nmodes, a->format, a->rows, k,
                                           &more);
        if (!more)
            break;
        if (name == NULL)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
        names[nnames++] = name;
        paths[n] = name;
        what[n++] = "-o's file";
    }
    if (a->json) {
        paths[n] = a->json;
        what[n++] = "--json";
    }
    if (a->html) {
        paths[n] = a->html;
        what[n++] = "--report";
    }
    rc = amp_outfile_check_distinct(paths, what, input, n, err);
    if (rc == AMP_ERR_USAGE)
        a->late_usage = 1;
done:
    for (size_t i = 0; i < nnames; i++)
        free(names[i]);
    return rc;
}

/* Every output file, created once the layout gives the modes and before
 * the nonzeros are read: a directory that is missing or read-only, or a
 * factor that cannot be written in the original index space, fails now
 * rather than after the decomposition. */
static amp_status create_outputs(run_args *a, run_state *s, amp_error *err)
{
    AMP_CHECK(check_distinct(a, s, err));
    if (a->output && !amp_starts_active(&a->starts)) {
        char *copy = strdup(a->output);
        if (copy == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        amp_status rc = amp_factors_check_room(&s->ss.t, a->r.opts.rank, a->format, a->rows,
                                               amp_host_memory_available(), dirname(copy),
                                               err);
        free(copy);
        if (rc != AMP_OK) {
            char why[AMP_ERROR_MSG_MAX];
            snprintf(why, sizeof why, "%s", err->msg);
            amp_error_clear(err);
            return AMP_FAIL(err, rc, "-o %s: %s", a->output, why);
        }
    }
    if (a->output && !amp_starts_active(&a->starts))
        AMP_CHECK(amp_factors_create(&s->factors, &s->ss.t, a->output, a->format, a->rows, err));
    if (a->json)
        AMP_CHECK(amp_outfile_open(&a->json_out, a->json, err));
    if (a->html)
        AMP_CHECK(amp_outfile_open(&a->html_out, a->html, err));
    return AMP_OK;
}

/* The tensor's layout, the output files, then its nonzeros where the
 * backend wants them (amp_session_load). */
static amp_status load(run_args *a, run_state *s, amp_error *err)
{
    amp_session *ss = &s->ss;
    ss->external_load = s->dist != NULL;
    if (amp_session_open(ss, &a->r, a->path, err) != AMP_OK) {
        a->late_usage = ss->late_usage;
        return err->status;
    }
    AMP_CHECK(create_outputs(a, s, err));
    if (s->dist && a->r.gpus == 0) {
        amp_progress bar;
        amp_progress_begin(&bar, "loading", "B", 0, !a->quiet);
        amp_status rc = amp_dist_load(s->dist, ss->f, &ss->t, ss->threads,
                                      amp_progress_callback, &bar, err);
        amp_progress_end(&bar);
        AMP_CHECK(rc);
        /* CP-APR's counts, read from the file by each process (its part
         * holds them in the run's numbering, which no message should use). */
        AMP_CHECK(amp_session_check_counts(ss, &a->r, a->path, err));
    }
    a->report.path = a->path;
    a->report.t = &ss->t;
    a->report.opts = &a->r.opts;
    a->report.rule = a->r.rule;
    a->report.backend = "cpu";
    a->report.threads = ss->threads;
    double before = amp_now() - s->t_start;
    amp_progress bar;
    amp_progress_begin(&bar, "loading", "B", 0, !a->quiet);
    amp_session_progress p = {amp_progress_phase_callback, amp_progress_callback, &bar};
    amp_status rc = amp_session_load(ss, &a->r, a->path, &p, err);
    amp_progress_end(&bar);
    AMP_CHECK(rc);
    /* A process of several on its GPUs holds only its GPUs' parts, in the
     * run's numbering: CP-APR's counts, as on the CPU, from the file. */
    if (s->dist && a->r.gpus != 0)
        AMP_CHECK(amp_session_check_counts(ss, &a->r, a->path, err));
    a->report.seconds_load = before + ss->seconds_load;
    for (unsigned k = 0; ss->gr && k < amp_gpu_run_count(ss->gr); k++)
        if (amp_gpu_run_note(ss->gr, k))
            amp_log(AMP_LOG_WARN, "%s", amp_gpu_run_note(ss->gr, k));
    if (a->r.opts.method == AMP_METHOD_GCP) {
        /* The plan the backend will take, for the header and the JSON
         * (its checks fail there too, with the same message). */
        amp_gcp_view v = {.nmodes = ss->t.nmodes, .nnz = ss->t.nnz, .cells = 1};
        for (unsigned m = 0; m < ss->t.nmodes; m++) {
            v.rows[m] = ss->t.rows[m] ? ss->t.rows[m] : 1;
            v.cells = v.cells > UINT64_MAX / v.rows[m] ? UINT64_MAX : v.cells * v.rows[m];
        }
        if (amp_gcp_resolve(&a->r.opts.gcp, &v, &a->gcp_plan, err) != AMP_OK) {
            a->late_usage = err->status == AMP_ERR_USAGE;   /* the samples against the file */
            return err->status;
        }
        a->report.gcp_plan = &a->gcp_plan;
        if (ss->gcp_gpu > 0) {
            a->report.backend = "gpu";
            a->report.device = ss->gcp_device_name;
            a->report.gcp_memory = ss->gcp_stream ? "stream" : "resident";
        }
    }
    if (ss->gr == NULL && ss->gcp_gpu == 0 && a->r.gpus != 0 && a->r.gpu_only)
        amp_log(AMP_LOG_WARN, "%s applies to the GPU backend; this run is on the CPU (no GPU "
                "found, or the rank is above what the GPU backend takes): ignored",
                a->r.gpu_only);
    if (ss->gr) {
        amp_gpu_info in;
        amp_gpu_run_info(ss->gr, 0, &in);
        a->report.backend = "gpu";
        a->report.device = in.name;
        a->report.seconds_upload = ss->seconds_upload;
        a->report.direct_upload = amp_gpu_run_direct(ss->gr);
        a->report.stream_bytes_per_nnz = amp_gpu_run_stream_bytes_per_nnz(ss->gr, &ss->t);
    }
    return AMP_OK;
}

static void print_loaded(const run_args *a, const run_state *s)
{
    print_tensor(a, &s->ss.t, s->ss.threads, s->ss.gr != NULL || s->ss.gcp_gpu > 0);
    if (s->ss.gcp_gpu > 0 && s->ss.gcp_stream)
        printf("backend:   gpu %d (%s), GCP's samples drawn on the host and streamed (%u "
               "bytes a sample; no nonzero on the GPU), precision f64\n", s->ss.gcp_gpu - 1,
               s->ss.gcp_device_name, 8 * s->ss.t.nmodes + 8);
    else if (s->ss.gcp_gpu > 0)
        printf("backend:   gpu %d (%s), GCP's form of the tensor resident (16 bytes a "
               "nonzero), precision f64\n", s->ss.gcp_gpu - 1, s->ss.gcp_device_name);
    if (s->ss.gr)
        print_gpus(a, &s->ss.t, s->ss.gr);
    if (s->dist && s->ss.gr)
        printf("processes: %u (MPI), each reading only its own GPUs' shards\n",
               amp_dist_size(s->dist));
    else if (s->dist) {
        char mem[32];
        printf("processes: %u (MPI), each reading only its own shards; process 0 holds %s\n",
               amp_dist_size(s->dist), amp_format_bytes(mem, sizeof mem,
                                                         amp_dist_bytes(s->dist)));
    }
    if (s->dist)
        printf("threads:   %d in process 0 (%s; its %u CPU%s, shared by %u process%s of its "
               "host)\n", s->ss.threads, s->threads_from ? s->threads_from : "its share", s->cpus,
               amp_plural(s->cpus), s->cpu_sharers, s->cpu_sharers == 1 ? "" : "es");
    printf("loaded:    %.3f s", a->report.seconds_load);
    if (s->ss.gr && a->report.direct_upload)
        printf(" (the tables), the nonzeros from the file straight to the GPU %.3f s",
               a->report.seconds_upload);
    else if (s->ss.gr)
        printf(", to the GPU%s %.3f s", amp_gpu_run_count(s->ss.gr) > 1 ? "s" : "",
               a->report.seconds_upload);
    printf("\n");
}

/* A CPU run whose rank-by-rank algebra will take long says so before it
 * starts: it grows as R^2 a row and R^3 a mode (at rank 4096 on a few
 * cores, minutes an iteration, bench/RESULTS.md), while the fit is
 * printed only after an iteration. Below rank 256 it is never long. ALS
 * only: the estimate is of its solve. */
#define LONG_SOLVE_RANK 256
#define LONG_SOLVE_SECONDS 10.0

static amp_status say_long_solve(const run_args *a, const run_state *s, amp_error *err)
{
    if (a->quiet || s->ss.gr || s->dist || a->r.opts.rank < LONG_SOLVE_RANK ||
        a->r.opts.method != AMP_METHOD_ALS)
        return AMP_OK;
    double sec;
    AMP_CHECK(amp_cpu_solve_estimate(&s->ss.t, &a->r.opts, &sec, err));
    if (sec >= LONG_SOLVE_SECONDS)
        printf("           rank %u on %d thread%s: the solves alone take about %.0f s an "
               "iteration (a rate measured here), more where a Gram product is singular\n",
               a->r.opts.rank, s->ss.threads, amp_plural((uint64_t)s->ss.threads), sec);
    return AMP_OK;
}

/* Values far from 1 run scaled (amp_session_scale); over several
 * processes, by the largest of every process's values. */
static amp_status scale_values(run_args *a, run_state *s, amp_error *err)
{
    /* Poisson CP takes counts as they are (amp_session_scale). */
    if (s->dist && !s->ss.gr && a->r.opts.method != AMP_METHOD_APR)
        return amp_dist_scale(s->dist, &a->r.value_exp, err);
    return amp_session_scale(&s->ss, &a->r, err);
}

/* Whether every entry of mode m's factor is zero, or at most floor
 * (MU and HALS keep entries at AMP_UPDATE_EPS, never 0, so that they may
 * grow again). */
static int factor_is_zero(const amp_cpd *c, unsigned m, double floor)
{
    const uint64_t n = c->rows[m] * c->rank;
    for (uint64_t k = 0; k < n; k++)
        if (fabs(c->A[m][k]) > floor)
            return 0;
    return 1;
}

/* A model with a zero factor is zero, however the run ended: "converged"
 * and a fit of 0 say nothing of why. when: "starting" or "final". */
static void warn_zero_factors(const run_args *a, const amp_cpd *c, const char *when)
{
    char modes[AMP_MAX_MODES * 4 + 1] = "";
    size_t at = 0;
    unsigned nzero = 0;
    double floor = (a->r.opts.method == AMP_METHOD_MU || a->r.opts.method == AMP_METHOD_HALS) &&
                   strcmp(when, "final") == 0 ? AMP_UPDATE_EPS : 0;
    for (unsigned m = 0; m < c->nmodes; m++)
        if (factor_is_zero(c, m, floor)) {
            at += (size_t)snprintf(modes + at, sizeof modes - at, "%s%u", nzero ? ", " : "",
                                   m + 1);
            nzero++;
        }
    if (nzero == 0)
        return;
    int l1 = 0;
    for (unsigned m = 0; m < c->nmodes; m++)
        l1 |= a->r.rule[m].l1 > 0;
    amp_log(AMP_LOG_WARN, "every entry of the %s factor%s of mode%s %s is zero%s: the model "
            "is zero%s", when, nzero == 1 ? "" : "s", nzero == 1 ? "" : "s", modes,
            floor > 0 ? " (or at the update's floor, 1e-12)" : "",
            strcmp(when, "starting") == 0 ? ", and no update can change that (--init reads "
                                            "zero factors)"
            : l1 ? " (--l1 larger than the MTTKRP's entries sets every entry to zero)"
                 : "");
}

/* Completion's header lines: what is fitted, the ridge, the test entries. */
static void say_completion(const run_args *a, const run_state *s)
{
    const amp_completion_opts *co = &a->r.opts.completion;
    printf("           observed: the %" PRIu64 " stored entries only; ridge l2",
           s->ss.t.nnz);
    for (unsigned m = 0; m < s->ss.t.nmodes; m++)
        printf("%s%g", m ? "," : " ", a->r.rule[m].l2);
    if (co->test)
        printf("; test entries from %s (%" PRIu64 ")\n", a->r.holdout_file, co->test->n);
    else if (co->holdout > 0)
        printf("; holdout %g of them (seed %" PRIu64 ")\n", co->holdout, a->r.opts.seed);
    else
        printf("; no test entries\n");
}

/* Completion's rows that kept their value, once the run is over. */
static void say_kept_rows(const run_args *a, const amp_cpd *c)
{
    uint64_t unobserved = 0, singular = 0;
    for (unsigned m = 0; m < c->nmodes; m++) {
        unobserved += c->completion.unobserved[m];
        singular += c->completion.singular[m];
    }
    printf("rows kept: %" PRIu64 " with no training entry, %" PRIu64 " with a singular system "
           "(by mode:", unobserved, singular);
    for (unsigned m = 0; m < c->nmodes; m++)
        printf(" %" PRIu64 "/%" PRIu64, c->completion.unobserved[m], c->completion.singular[m]);
    printf(")\n");
    int ridge = 0;
    for (unsigned m = 0; m < c->nmodes; m++)
        ridge |= a->r.rule[m].l2 > 0;
    if (singular > 0 && !ridge)
        amp_log(AMP_LOG_WARN, "%" PRIu64 " row%s had fewer training entries than the rank "
                "allows and kept their value: --l2 (a ridge) makes every row's system "
                "solvable", singular, amp_plural(singular));
}

/* CP-ALS on the chosen backend, its report filled in and the factors
 * written. */
static amp_status decompose(run_args *a, run_state *s, amp_error *err)
{
    if (!a->quiet) {
        char label[16];
        snprintf(label, sizeof label, "%s:", a->r.opts.method == AMP_METHOD_ALS ? "cp-als"
                                            : amp_method_name(a->r.opts.method));
        printf("%-10s rank %u, at most %u %s%s, tol %g\n", label, a->r.opts.rank,
               a->r.opts.max_iters, a->r.opts.method == AMP_METHOD_GCP ? "epoch" : "iteration",
               amp_plural(a->r.opts.max_iters), a->r.opts.tol);
        if (a->r.opts.method == AMP_METHOD_GCP) {
            const amp_gcp_opts *g = &a->r.opts.gcp;
            const amp_gcp_plan *p = &a->gcp_plan;
            printf("           loss %s", amp_gcp_loss_names[g->loss]);
            if (g->loss == AMP_GCP_HUBER)
                printf(" (delta %g)", g->huber_delta);
            printf(", factors %s; %s Adam, %u steps an epoch, rate %g, decay %g, at most %u "
                   "failed epoch%s\n", isfinite(p->lower) ? "at least 0" : "unbounded",
                   g->adam == AMP_GCP_ADAM_LAZY ? "lazy" : "dense", g->epoch_iters, g->rate, g->decay, g->max_fails, amp_plural(g->max_fails));
            printf("           a step samples %" PRIu64 " nonzeros and %" PRIu64 " zeros; the "
                   "loss estimate %" PRIu64 " and %" PRIu64 " (fixed); exact loss %s\n",
                   p->grad_nz, p->grad_z, p->loss_nz, p->loss_z,
                   p->exact == AMP_GCP_EXACT_ENUMERATE ? "over every cell"
                   : p->exact == AMP_GCP_EXACT_CLOSED  ? "in closed form"
                                                       : "not computed (too many cells)");
        } else if (a->r.opts.method == AMP_METHOD_APR)
            printf("           Poisson; at most %u inner iteration%s a mode; kappa %g "
                   "(%s rule), kappa-tol %g, eps-div-zero %g; tol is the KKT violation's\n",
                   a->r.opts.apr.inner, amp_plural(a->r.opts.apr.inner), a->r.opts.apr.kappa,
                   a->r.opts.apr.shift_rule == AMP_APR_SHIFT_PYTTB ? "pyttb's" : "the KKT",
                   a->r.opts.apr.kappa_tol, a->r.opts.apr.eps_div_zero);
        else if (a->r.opts.method != AMP_METHOD_ALS) {
            printf("           constraints");
            for (unsigned m = 0; m < s->ss.t.nmodes; m++)
                printf("%s%s", m ? "," : " ", amp_constraint_name(a->r.rule[m].constraint));
            printf("; l1");
            for (unsigned m = 0; m < s->ss.t.nmodes; m++)
                printf("%s%g", m ? "," : " ", a->r.rule[m].l1);
            printf("; l2");
            for (unsigned m = 0; m < s->ss.t.nmodes; m++)
                printf("%s%g", m ? "," : " ", a->r.rule[m].l2);
            if (a->r.opts.method == AMP_METHOD_ADMM)
                printf("; %u inner iteration%s, tol %g", a->r.opts.admm_inner,
                       amp_plural(a->r.opts.admm_inner), a->r.opts.admm_tol);
            printf("\n");
        }
        if (a->r.init)
            printf("           starting factors from %s%s\n", a->r.init,
                   a->r.init_format == AMP_FACTORS_KTENSOR ? ".ktn"
                   : a->r.init_format == AMP_FACTORS_NPY   ? ".mode*.npy"
                                                         : ".mode*.mat");
        else
            printf("           random starting factors, seed %" PRIu64 "\n", a->r.opts.seed);
        AMP_CHECK(say_long_solve(a, s, err));
        if (a->r.opts.completion.observed == AMP_OBSERVED_NONZEROS)
            say_completion(a, s);
        if (a->r.opts.method == AMP_METHOD_GCP)
            printf(" epoch  loss (estimate)   stderr     exact loss         rate      "
                   "seconds\n");
        else if (a->r.opts.method == AMP_METHOD_APR)
            printf("  iter  loglik             kkt        inner  seconds\n");
        else if (a->r.opts.completion.observed == AMP_OBSERVED_NONZEROS)
            printf("  iter  fit (train)   rmse train    rmse test     delta      seconds\n");
        else
            printf("  iter  fit           delta      seconds\n");
    }
    a->r.opts.on_iter = on_iter;
    a->r.opts.ctx = a;
    a->cpd = &s->ss.c;
    if (s->dist && a->r.opts.method == AMP_METHOD_GCP)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--method gcp runs in one process for now, "
                        "not under mpirun");
    AMP_CHECK(s->dist && !s->ss.gr ? amp_dist_als(s->dist, &a->r.opts, &s->ss.c, err)
                                   : amp_session_als(&s->ss, &a->r, err));
    if (s->ss.c.pinv_used)
        amp_log(AMP_LOG_WARN, "a Gram product was not positive definite: those solves used "
                "the pseudo-inverse (is the rank above what the data supports?)");
    amp_session_unscale(&s->ss, &a->r);
    warn_zero_factors(a, &s->ss.c, "final");
    a->report.final_fit = s->ss.c.fit;
    a->report.converged = s->ss.c.converged;
    if (a->r.opts.completion.observed == AMP_OBSERVED_NONZEROS) {
        a->report.completion = &s->ss.c;
        a->report.holdout_file = a->r.holdout_file;
    }
    a->report.phase_seconds = s->ss.c.seconds;
    double t_out = amp_now();
    if (a->output) {
        AMP_CHECK(amp_factors_finish(&s->factors, &s->ss.t, &s->ss.c, a->r.opts.precision, err));
        a->report.factors_prefix = a->output;
        a->report.factors_run = s->factors.manifest ? s->factors.run_id : NULL;
    }
    a->report.seconds_output = amp_now() - t_out;
    a->report.seconds_total = amp_now() - s->t_start;
    return AMP_OK;
}

static void print_summary(const run_args *a, const run_state *s)
{
    const amp_cpd *c = &s->ss.c;
    const char *ext = a->format == AMP_FACTORS_NPY ? "npy" : "mat";
    if (s->ss.gr)
        printf("time:      load %.3f, to the GPU%s %.3f, start %.3f; GPU time: mttkrp %.3f, "
               "gram %.3f, solve %.3f, normalize %.3f, fit %.3f; output %.3f, total %.3f s\n",
               a->report.seconds_load, amp_gpu_run_count(s->ss.gr) > 1 ? "s" : "",
               a->report.seconds_upload, a->report.seconds_start, c->seconds[AMP_PHASE_MTTKRP],
               c->seconds[AMP_PHASE_GRAM], c->seconds[AMP_PHASE_SOLVE],
               c->seconds[AMP_PHASE_NORMALIZE], c->seconds[AMP_PHASE_FIT],
               a->report.seconds_output, a->report.seconds_total);
    else
        printf("time:      load %.3f, start %.3f, mttkrp %.3f, gram %.3f, %s %.3f, "
               "normalize %.3f, fit %.3f, output %.3f, total %.3f s\n", a->report.seconds_load,
               a->report.seconds_start,
               c->seconds[AMP_PHASE_MTTKRP], c->seconds[AMP_PHASE_GRAM],
               a->r.opts.method == AMP_METHOD_ALS ? "solve" : "update",
               c->seconds[a->r.opts.method == AMP_METHOD_ALS ? AMP_PHASE_SOLVE
                                                           : AMP_PHASE_UPDATE],
               c->seconds[AMP_PHASE_NORMALIZE], c->seconds[AMP_PHASE_FIT],
               a->report.seconds_output, a->report.seconds_total);
    if (s->ss.gr && amp_gpu_run_total(s->ss.gr) > 1)
        printf("           nccl %.3f (the slowest GPU's time of each phase)\n",
               c->seconds[AMP_PHASE_COMM]);
    if (s->rg && a->report.ngpus == 1 && strcmp(s->rg[0].memory, "remap") == 0)
        printf("remap:     %u copies written by the MTTKRPs as they read the one before; %u "
               "by a remap kernel, %.3f s of GPU time on a stream of its own, behind each "
               "mode's update (an MTTKRP that waited for its copy counts the wait)\n",
               s->rg[0].remaps_fused, s->rg[0].remaps, s->rg[0].remap_seconds);
    if (s->dist)
        amp_dist_print(stdout, a->report.processes, a->report.nprocesses, s->ss.t.nmodes);
    /* A GPU a process: no table of this process's GPUs said it above. */
    if (s->dist && s->ss.gr && amp_gpu_run_total(s->ss.gr) > 1 && amp_gpu_run_count(s->ss.gr) == 1)
        for (unsigned m = 0; m < s->ss.t.nmodes; m++) {
            printf("  mode %u: rows sent ", m + 1);
            print_rows_sent(a, m);
        }
    if (a->output && a->format == AMP_FACTORS_KTENSOR)
        printf("factors:   %s.ktn (ktensor: weights and every mode's factor)\n", a->output);
    else if (a->output)
        printf("factors:   %s.mode1.%s ... %s.mode%u.%s, %s.lambda.%s%s\n", a->output, ext,
               a->output, s->ss.t.nmodes, ext, a->output, ext,
               a->rows == AMP_ROWS_ALL ? ""
               : a->format == AMP_FACTORS_NPY ? " (nonempty rows; their indices in "
                                                "PREFIX.modeN.index.npy)"
                                              : " (nonempty rows, each after its index)");
    else
        printf("factors:   not written (-o PREFIX writes them)\n");
}

/* One process of several when a launcher started this one: only process
 * 0 reports and writes files; GPUs (one a process by default) when every
 * process has one, else the CPU backend; the decomposition alone. */
static amp_status start_dist(run_args *a, run_state *s, amp_error *err)
{
    AMP_CHECK(amp_dist_start(&s->dist, err));
    /* Before anything starts CUDA (amp_dist_gpus may): the GPUs this
     * process drives, by default every one it sees alone, one of several. */
    amp_gpu_prepare_process(a->r.gpus != AMP_GPUS_AUTO ? (unsigned)a->r.gpus
                            : s->dist ? 1 : amp_gpu_count_unstarted());
    if (s->dist == NULL)
        return AMP_OK;
    if (a->mttkrp_only || a->check)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--mttkrp-only and --check run in one "
                        "process, not under mpirun");
    if (a->r.opts.completion.observed == AMP_OBSERVED_NONZEROS)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--observed nonzeros runs in one process "
                        "for now, not under mpirun");
    /* Collective: every process asks, whether or not it keeps the answer. */
    int fair;
    AMP_CHECK(amp_dist_threads(s->dist, &fair, &s->cpus, &s->cpu_sharers, err));
    /* OpenMP ignores an empty OMP_NUM_THREADS, and so does this. */
    const char *omp = getenv("OMP_NUM_THREADS");
    s->threads_from = a->r.opts.threads > 0     ? "-t"
                      : omp != NULL && *omp ? "OMP_NUM_THREADS"
                                            : NULL;
    if (s->threads_from == NULL) {
        amp_set_threads(fair);
        a->r.opts.threads = fair;
    }
    s->ss.threads = amp_thread_count(a->r.opts.threads);
    amp_dist_set_threads(s->dist, s->ss.threads);
    AMP_CHECK(amp_dist_gpus(s->dist, a->r.opts.rank, &a->r.gpus, &a->r.gpu, err));
    if (amp_dist_rank(s->dist) != 0) {
        a->quiet = 1;
        a->output = NULL;
        a->json = NULL;
        a->html = NULL;
    }
    return AMP_OK;
}

static int run(run_args *a)
{
    amp_error err = {0};
    run_state s;
    memset(&s, 0, sizeof s);
    s.t_start = amp_now();
    s.ss.threads = amp_thread_count(a->r.opts.threads);
    /* loaded: every process has its part, so a later failure on one must
     * stop the others, which may be inside a collective. */
    int status = EXIT_FAILURE, peer_failed = 0, loaded = 0;
    if (start_dist(a, &s, &err) != AMP_OK)
        goto fail;
    if (s.dist && amp_starts_active(&a->starts)) {
        AMP_FAIL(&err, AMP_ERR_UNSUPPORTED, "--starts and --ranks run in one process for "
                 "now, not under mpirun");
        goto fail;
    }
    /* The GPU is opened (its memory planned) for the widest batch of
     * models; the rank itself is --rank's again once loaded. */
    const unsigned rank = a->r.opts.rank;
    if (amp_starts_active(&a->starts) && a->r.gpus != 0) {
        a->r.opts.rank = amp_starts_width(&a->starts, rank, AMP_GPU_MAX_RANK);
        a->r.gpu.batch = 1;
    }
    amp_status lrc = load(a, &s, &err);
    a->r.opts.rank = rank;
    if (s.dist) {
        /* Every process learns whether all loaded, so none waits for one
         * that stopped: a failed one reports itself, process 0 the rest. */
        lrc = amp_dist_agree(s.dist, lrc, &err);
        peer_failed = lrc == AMP_ERR_PEER;
    }
    if (lrc != AMP_OK)
        goto fail;
    loaded = 1;
    if (s.ss.gr) {
        /* Joining waits for every process's GPUs: say what it waits on.
         * Alone there is nothing to join. */
        amp_progress bar;
        amp_progress_begin(&bar, "NCCL init", NULL, 0, !a->quiet && s.dist != NULL);
        amp_progress_update(&bar, 0);
        amp_status jrc = amp_gpu_run_join(s.ss.gr, &err);
        amp_progress_end(&bar);
        if (jrc != AMP_OK)
            goto fail;
    }
    if (!a->quiet)
        print_loaded(a, &s);
    warn_rank(&s.ss.t, a->r.opts.rank);
    lrc = scale_values(a, &s, &err);
    if (s.dist)
        lrc = amp_dist_agree(s.dist, lrc, &err);
    if (lrc != AMP_OK)
        goto fail;
    if (amp_starts_active(&a->starts)) {
        amp_starts_out so = {a->output, a->format, a->json ? &a->json_out : NULL,
                             a->html ? &a->html_out : NULL, a->quiet, a->r.value_exp};
        if (amp_starts_run(&a->starts, &s.ss.t, &a->r.opts, s.ss.gr, &so, &err) != AMP_OK)
            goto fail;
        status = EXIT_SUCCESS;
        goto done;
    }
    if (amp_session_start(&s.ss, &a->r, &err) != AMP_OK)
        goto fail;
    a->report.seconds_start = s.ss.seconds_start;
    if (a->r.init)
        warn_zero_factors(a, &s.ss.c, "starting");
    if (a->mttkrp_only) {
        status = run_mttkrp_only(a, &s.ss.t, &s.ss.c, s.ss.threads, s.ss.gr);
        goto done;
    }
    if (a->check) {
        status = run_check(a, &s.ss.t, &s.ss.c, s.ss.gr);
        goto done;
    }
    if (decompose(a, &s, &err) != AMP_OK)
        goto fail;
    if (s.dist) {
        if (amp_dist_report(s.dist, s.ss.t.nmodes, s.ss.gr, &a->report.processes,
                            &a->report.nprocesses, &err) != AMP_OK)
            goto fail;
    }
    if (!a->quiet)
    {
        if (a->r.opts.method == AMP_METHOD_GCP)
            printf("final loss (estimate): %.10e after %u epoch%s (%s), %u failed\n",
                   s.ss.c.fit, s.ss.c.iters, s.ss.c.iters == 1 ? "" : "s",
                   s.ss.c.stopped ? "stopped" : a->report.converged ? "converged"
                   : s.ss.c.gcp_fails > a->r.opts.gcp.max_fails ? "failed epochs"
                                                               : "epoch limit",
                   s.ss.c.gcp_fails);
        else if (a->r.opts.method == AMP_METHOD_APR)
            printf("final log-likelihood: %.10e after %u iteration%s (%s), KKT violation "
                   "%.3e\n", s.ss.c.loglik, s.ss.c.iters, s.ss.c.iters == 1 ? "" : "s",
                   a->report.converged ? "converged" : "iteration limit", s.ss.c.kkt);
        else if (a->r.opts.completion.observed == AMP_OBSERVED_NONZEROS) {
            printf("final fit: %.10f on the %" PRIu64 " training entries after %u iteration%s "
                   "(%s); RMSE train %.6e, test %.6e (%" PRIu64 " entries)\n", s.ss.c.fit,
                   s.ss.c.completion.n_train, s.ss.c.iters, s.ss.c.iters == 1 ? "" : "s",
                   a->report.converged ? "converged" : "iteration limit",
                   s.ss.c.completion.rmse_train, s.ss.c.completion.rmse_test,
                   s.ss.c.completion.n_test);
            say_kept_rows(a, &s.ss.c);
        } else
            printf("final fit: %.10f after %u iteration%s (%s)\n", s.ss.c.fit, s.ss.c.iters,
                   s.ss.c.iters == 1 ? "" : "s",
                   a->report.converged ? "converged" : "iteration limit");
    }
    if (s.ss.gr) {
        s.rg = calloc(amp_gpu_run_count(s.ss.gr), sizeof *s.rg);
        if (s.rg == NULL) {
            AMP_FAIL(&err, AMP_ERR_NOMEM, "out of memory");
            goto fail;
        }
        gpu_times(a, &s.ss.t, s.ss.gr, s.rg);
    }
    if (!a->quiet)
        print_summary(a, &s);
    if (write_outputs(a, &s.factors, 1, &err) != AMP_OK)
        goto fail;
    status = EXIT_SUCCESS;
    goto done;
fail:
    amp_dist_label(s.dist, &err);
    if (!peer_failed || amp_dist_rank(s.dist) == 0)
        amp_log_error(&err);
    if (s.dist && loaded)
        amp_dist_abort(s.dist, EXIT_FAILURE);
    /* A usage error that only the file could reveal (a constraint list
     * of the wrong length): the status of one, with the hint. */
    if (a->late_usage) {
        fprintf(stderr, "Try '%s --help' for more information.\n", PROGRAM);
        status = 2;
    }
done:
    amp_factors_abort(&s.factors);
    amp_outfile_abort(&a->json_out);
    amp_outfile_abort(&a->html_out);
    amp_dist_end(s.dist);
    free(s.rg);
    amp_session_close(&s.ss);
    free(a->report.iters);
    return status;
}

/* What the command line asks for beyond run_args. */
typedef struct cli_args {
    amp_cli_common common;     /* -t, -q, -v, -h, -V */
    int want_list, want_info, want_verify;
} cli_args;

#define USAGE_FAIL(err) amp_usage_error(PROGRAM, "%s", amp_error_message(err))

/* One option of the decomposition or the GPUs (session.c), or of the
 * program's output: -1 when taken, else the exit status (a usage error);
 * 0 when the option is none of these. */
static int parse_run_option(int c, run_args *a, amp_error *err)
{
    static const char *const formats[] = {"text", "npy", "ktensor", NULL};
    static const char *const row_sets[] = {"all", "nonempty", NULL};
    int taken, choice;
    if (c == 'r')
        a->rank_given = 1;
    if (amp_starts_option(&a->starts, c, optarg, &taken, err) != AMP_OK)
        return USAGE_FAIL(err);
    if (taken)
        return -1;
    if (amp_run_option(&a->r, c, optarg, &taken, err) != AMP_OK)
        return USAGE_FAIL(err);
    if (taken)
        return -1;
    switch (c) {
    case 'o':
        a->output = optarg;
        return -1;
    case AMP_OPT_FORMAT:
        if (amp_parse_choice(optarg, formats, "--format", &choice, err))
            return USAGE_FAIL(err);
        a->format = choice == 2 ? AMP_FACTORS_KTENSOR
                    : choice == 1 ? AMP_FACTORS_NPY : AMP_FACTORS_TEXT;
        return -1;
    case AMP_OPT_ROWS:
        if (amp_parse_choice(optarg, row_sets, "--rows", &choice, err))
            return USAGE_FAIL(err);
        a->rows = choice == 1 ? AMP_ROWS_NONEMPTY : AMP_ROWS_ALL;
        a->rows_given = 1;
        return -1;
    case AMP_OPT_JSON:
        a->json = optarg;
        return -1;
    case AMP_OPT_REPORT:
        a->html = optarg;
        return -1;
    case AMP_OPT_MTTKRP_ONLY:
        a->mttkrp_only = 1;
        return -1;
    case AMP_OPT_CHECK:
        a->check = 1;
        a->r.keep_host = 1;
        return -1;
    }
    return 0;
}

/* The options: -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, run_args *a, cli_args *cli)
{
    amp_error err = {0};
    int c;
    char choose[64];
    while ((c = getopt_long(argc, argv, "r:o:t:qvhV", amp_run_long_options, NULL)) != -1) {
        /* --choose fms F: F the next word */
        if (c == AMP_OPT_CHOOSE && strcmp(optarg, "fms") == 0 && optind < argc) {
            snprintf(choose, sizeof choose, "fms %s", argv[optind++]);
            optarg = choose;
        }
        int taken = parse_run_option(c, a, &err);
        if (taken > 0)
            return taken;
        if (taken < 0)
            continue;
        switch (c) {
        case AMP_OPT_LIST_DEVICES:
            cli->want_list = 1;
            break;
        case AMP_OPT_INFO:
            cli->want_info = 1;
            break;
        case AMP_OPT_VERIFY:
            cli->want_verify = 1;
            break;
        default: {
            int status = amp_cli_common_option(&cli->common, c, optarg);
            if (status != AMP_CLI_CONTINUE)
                return status;
            break;
        }
        }
    }
    return -1;
}

/* --starts and --ranks against the rest: -1 when they agree, else the
 * exit status. The program's own options here; those of the decomposition
 * in amp_starts_check (libamped's too), which sends the batch to the CPU,
 * or to one GPU where --gpus 1 (or one --devices) asks: --gpus auto means
 * the CPU here. */
static int check_starts(run_args *a)
{
    const amp_starts_opts *s = &a->starts;
    amp_error err = {0};
    if (!amp_starts_active(s) && s->keep_all)
        return amp_usage_error(PROGRAM, "--keep-all keeps every start of --starts or "
                               "--ranks: give one of them");
    if (amp_starts_active(s)) {
        if (s->keep_all && a->output == NULL)
            return amp_usage_error(PROGRAM, "--keep-all says which models -o writes: give -o "
                                   "PREFIX");
        if (a->mttkrp_only || a->check)
            return amp_usage_error(PROGRAM, "--starts and --ranks fit models; --mttkrp-only "
                                   "and --check fit none");
        if (a->rows_given && a->rows == AMP_ROWS_NONEMPTY)
            return amp_usage_error(PROGRAM, "--starts and --ranks write every row (--rows "
                                   "all)");
    }
    if (amp_starts_check(s, &a->r, a->rank_given, &err) != AMP_OK)
        return USAGE_FAIL(&err);
    return -1;
}

/* The operands and the options that exclude each other: -1 when they
 * agree, else the exit status. */
static int check_args(int argc, char **argv, run_args *a, const cli_args *cli)
{
    if (cli->want_list) {
        if (optind < argc)
            return amp_usage_error(PROGRAM, "--list-devices takes no FILE; extra operand '%s'",
                                   argv[optind]);
        return -1;
    }
    if (optind == argc)
        return amp_usage_error(PROGRAM, "missing FILE.amp (prepare one with amped-prep)");
    if (optind + 1 < argc)
        return amp_usage_error(PROGRAM, "one FILE only; extra operand '%s'", argv[optind + 1]);
    if (a->mttkrp_only + a->check + (cli->want_info || cli->want_verify) > 1)
        return amp_usage_error(PROGRAM, "--mttkrp-only, --check and --info/--verify are "
                               "separate actions: give one");
    if ((a->mttkrp_only || a->check) && a->output)
        return amp_usage_error(PROGRAM, "-o writes factors of a decomposition; --mttkrp-only "
                               "and --check compute none");
    if (a->rows_given && a->output == NULL)
        return amp_usage_error(PROGRAM, "--rows says which rows -o writes: give -o PREFIX");
    if (a->format == AMP_FACTORS_KTENSOR && a->rows == AMP_ROWS_NONEMPTY)
        return amp_usage_error(PROGRAM, "--format ktensor holds every row of every mode; "
                               "--rows nonempty needs --format text or npy");
    if (a->output && strcmp(a->output, "-") == 0)
        return amp_usage_error(PROGRAM, "-o names a set of files (PREFIX.mode1.mat ...), "
                               "which standard output cannot hold: give a prefix (--json - "
                               "and --report - write to standard output)");
    if (a->json && a->html && strcmp(a->json, "-") == 0 && strcmp(a->html, "-") == 0)
        return amp_usage_error(PROGRAM, "--json - and --report -: standard output takes one "
                               "of them");
    struct stat st;
    if (a->output && stat(a->output, &st) == 0 && S_ISDIR(st.st_mode))
        return amp_usage_error(PROGRAM, "-o %s: is a directory; -o takes a prefix of file "
                               "names (-o %s/f writes %s/f.mode1.mat ...)", a->output,
                               a->output, a->output);
    if (a->json && stat(a->json, &st) == 0 && S_ISDIR(st.st_mode))
        return amp_usage_error(PROGRAM, "--json %s: is a directory; name the file (in it, "
                               "for example %s/run.json)", a->json, a->json);
    if (a->html && stat(a->html, &st) == 0 && S_ISDIR(st.st_mode))
        return amp_usage_error(PROGRAM, "--report %s: is a directory; name the file (in it, "
                               "for example %s/run.html)", a->html, a->html);
    if (a->html && (a->mttkrp_only || a->check))
        return amp_usage_error(PROGRAM, "--report draws a decomposition; --mttkrp-only and "
                               "--check compute none (--json reports them)");
    int bad = check_starts(a);
    if (bad >= 0)
        return bad;
    amp_error err = {0};
    if (amp_run_opts_check(&a->r, &err) != AMP_OK)
        return USAGE_FAIL(&err);
    a->path = argv[optind];
    return -1;
}

#ifdef AMP_TEST_HOOKS
/* tests/amped-run-hooks only, a build of this file for make check that is
 * never installed: failures on demand, from the environment, so that what
 * a user meets when a GPU fails or fills up can be checked end to end on
 * GPUs that do neither (tests/gpu_faults.sh). The installed amped-run
 * reads neither variable.
 *   AMPED_TEST_FAIL_GPU=G:I      GPU G of the run (from 0) fails before
 *                                mode 2 of iteration I (1-based)
 *   AMPED_TEST_RESIDENT_FULL=K   the resident upload to this process's GPU
 *                                K (from 0) finds its memory taken
 *   AMPED_TEST_PLACE_SIGNAL=S:K  signal S is raised once K of the run's
 *                                files have their names (the factor files,
 *                                the manifest, --json, --report in that
 *                                order): SIGKILL there leaves a set half
 *                                placed, as a kill in that window does */
static int test_hooks(run_args *a)
{
    const char *v = getenv("AMPED_TEST_FAIL_GPU");
    unsigned g, it, k;
    char extra;
    if (v != NULL) {
        if (sscanf(v, "%u:%u%c", &g, &it, &extra) != 2 || g >= AMP_MAX_GPUS || it == 0)
            return amp_usage_error(PROGRAM, "AMPED_TEST_FAIL_GPU=%s: give GPU:ITERATION, a "
                                   "GPU from 0 and an iteration from 1 (as 1:3)", v);
        a->r.gpu_als.fail_gpu = g + 1;
        a->r.gpu_als.fail_iter = it;
    }
    v = getenv("AMPED_TEST_RESIDENT_FULL");
    if (v != NULL) {
        if (sscanf(v, "%u%c", &k, &extra) != 1 || k >= AMP_MAX_GPUS)
            return amp_usage_error(PROGRAM, "AMPED_TEST_RESIDENT_FULL=%s: give a GPU of this "
                                   "process, from 0", v);
        a->r.gpu.fail_resident = k + 1;
    }
    v = getenv("AMPED_TEST_PLACE_SIGNAL");
    if (v != NULL) {
        int sig;
        if (sscanf(v, "%d:%u%c", &sig, &k, &extra) != 2 || sig <= 0 || sig >= 64 || k == 0)
            return amp_usage_error(PROGRAM, "AMPED_TEST_PLACE_SIGNAL=%s: give SIGNAL:FILES, a "
                                   "signal number and how many files are placed first (as "
                                   "9:2)", v);
        place_signo = sig;
        a->place_stop = k;
    }
    return -1;
}
#endif

/* OpenMP's threads spin while they wait for each other (libgomp: some
 * 300000 turns before they sleep). On a machine whose CPUs other programs
 * use too, a spinning thread takes the CPU from the one it waits for;
 * passive waiting is the fastest setting measured there, and no slower
 * than spinning on them idle (bench/RESULTS.md, "Threads and wait
 * policy", which also says what is still to be measured). The runtime reads its
 * environment as it is loaded, before main, so the policy takes effect
 * only in the program started again with it set. A user's own
 * OMP_WAIT_POLICY or GOMP_SPINCOUNT is left as it is. */
static void wait_passively(char **argv)
{
#ifdef _OPENMP
    if (getenv("OMP_WAIT_POLICY") != NULL || getenv("GOMP_SPINCOUNT") != NULL)
        return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    /* No /proc: run on with the runtime's default policy. */
#else
    (void)argv;
#endif
}

/* The thread count within what the BLAS takes: -t above it is a usage
 * error (2); a larger OpenMP default (OMP_NUM_THREADS, or the CPUs) is
 * lowered to it with a warning. Returns -1 to go on. */
static int limit_threads(cli_args *cli)
{
    char blas[64];
    unsigned limit = amp_cpu_blas_thread_limit(blas, sizeof blas);
    if (limit == 0)
        return -1;
    if (cli->common.threads > limit)
        return amp_usage_error(PROGRAM, "-t %" PRIu64 ": this build's BLAS (%s) takes calls "
                               "from at most %u threads at once: give -t %u or fewer",
                               cli->common.threads, blas, limit, limit);
    if (cli->common.threads == 0 && amp_max_threads() > (int)limit) {
        const char *omp = getenv("OMP_NUM_THREADS");
        if (omp != NULL && *omp)
            amp_log(AMP_LOG_WARN, "OMP_NUM_THREADS=%s asks for %d threads; this build's BLAS "
                    "(%s) takes calls from at most %u at once: using %u", omp,
                    amp_max_threads(), blas, limit, limit);
        else
            amp_log(AMP_LOG_WARN, "%d CPUs; this build's BLAS (%s) takes calls from at most "
                    "%u threads at once: using %u (-t sets fewer)", amp_max_threads(), blas,
                    limit, limit);
        cli->common.threads = limit;
    }
    return -1;
}

int main(int argc, char **argv)
{
    run_args a;
    memset(&a, 0, sizeof a);
    a.json_out.fd = -1;
    a.html_out.fd = -1;
    cli_args cli = {.want_list = 0};
    amp_run_opts_init(&a.r);
    wait_passively(argv);
    /* Each report line reaches a pipe or a log file as it is printed, not
     * when the run ends. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    amp_cli_common_init(&cli.common, PROGRAM, usage, version);
    argv[0] = (char *)PROGRAM;   /* getopt's own messages use it */
    int status = parse_options(argc, argv, &a, &cli);
    if (status >= 0)
        return status;
    amp_log_init("amped-run", cli.common.level);
    if ((status = check_args(argc, argv, &a, &cli)) >= 0)
        return status;
#ifdef AMP_TEST_HOOKS
    if ((status = test_hooks(&a)) >= 0)
        return status;
#endif
    if (cli.want_list)
        return list_devices();
    if (cli.want_info || cli.want_verify) {
        status = EXIT_SUCCESS;
        if (cli.want_info)
            status = amp_inspect_info(a.path);
        if (cli.want_verify && status == EXIT_SUCCESS)
            status = amp_inspect_verify(a.path, (int)cli.common.threads,
                                        cli.common.level < AMP_LOG_INFO);
        return status;
    }
    /* --verify calls no BLAS: only a decomposition's threads are held to
     * its limit. */
    if ((status = limit_threads(&cli)) >= 0)
        return status;
    amp_set_threads((int)cli.common.threads);
    a.r.opts.threads = (int)cli.common.threads;
    /* A report on standard output is read by a program: the summary
     * would corrupt it. */
    a.quiet = cli.common.level < AMP_LOG_INFO || (a.json && strcmp(a.json, "-") == 0) ||
              (a.html && strcmp(a.html, "-") == 0);
    amp_outfile_cleanup_on_signals();
    return run(&a);
}
