/* One decomposition from its options to its model (session.h): amped-run
 * and libamped both take this path. */
#include <config.h>

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_cli.h"
#include "amp_cpu.h"
#include "amp_parse.h"
#include "amp_timer.h"
#include "session.h"

const struct option amp_run_long_options[] = {
    /* the decomposition */
    {"rank", required_argument, NULL, 'r'},
    {"iters", required_argument, NULL, AMP_OPT_ITERS},
    {"tol", required_argument, NULL, AMP_OPT_TOL},
    {"seed", required_argument, NULL, AMP_OPT_SEED},
    {"init", required_argument, NULL, AMP_OPT_INIT},
    {"precision", required_argument, NULL, AMP_OPT_PRECISION},
    /* constrained methods */
    {"method", required_argument, NULL, AMP_OPT_METHOD},
    {"constraint", required_argument, NULL, AMP_OPT_CONSTRAINT},
    {"l1", required_argument, NULL, AMP_OPT_L1},
    {"l2", required_argument, NULL, AMP_OPT_L2},
    {"admm-inner", required_argument, NULL, AMP_OPT_ADMM_INNER},
    {"admm-tol", required_argument, NULL, AMP_OPT_ADMM_TOL},
    /* Poisson CP */
    {"inner", required_argument, NULL, AMP_OPT_INNER},
    {"kappa", required_argument, NULL, AMP_OPT_KAPPA},
    {"kappa-tol", required_argument, NULL, AMP_OPT_KAPPA_TOL},
    {"eps-div-zero", required_argument, NULL, AMP_OPT_EPS_DIV_ZERO},
    {"allow-noninteger", no_argument, NULL, AMP_OPT_ALLOW_NONINTEGER},
    {"kappa-rule", required_argument, NULL, AMP_OPT_KAPPA_RULE},
    /* missing entries (completion) */
    {"observed", required_argument, NULL, AMP_OPT_OBSERVED},
    {"holdout", required_argument, NULL, AMP_OPT_HOLDOUT},
    {"holdout-file", required_argument, NULL, AMP_OPT_HOLDOUT_FILE},
    /* GCP */
    {"loss", required_argument, NULL, AMP_OPT_LOSS},
    {"samples-grad", required_argument, NULL, AMP_OPT_SAMPLES_GRAD},
    {"samples-loss", required_argument, NULL, AMP_OPT_SAMPLES_LOSS},
    {"epoch-iters", required_argument, NULL, AMP_OPT_EPOCH_ITERS},
    {"rate", required_argument, NULL, AMP_OPT_RATE},
    {"decay", required_argument, NULL, AMP_OPT_DECAY},
    {"max-fails", required_argument, NULL, AMP_OPT_MAX_FAILS},
    {"huber-delta", required_argument, NULL, AMP_OPT_HUBER_DELTA},
    {"adam", required_argument, NULL, AMP_OPT_ADAM},
    /* several models at once (amped-run, run/starts.h) */
    {"starts", required_argument, NULL, AMP_OPT_STARTS},
    {"ranks", required_argument, NULL, AMP_OPT_RANKS},
    {"keep-all", no_argument, NULL, AMP_OPT_KEEP_ALL},
    {"choose", required_argument, NULL, AMP_OPT_CHOOSE},
    /* output */
    {"output", required_argument, NULL, 'o'},
    {"format", required_argument, NULL, AMP_OPT_FORMAT},
    {"rows", required_argument, NULL, AMP_OPT_ROWS},
    {"json", required_argument, NULL, AMP_OPT_JSON},
    {"report", required_argument, NULL, AMP_OPT_REPORT},
    /* actions other than decomposing */
    {"mttkrp-only", no_argument, NULL, AMP_OPT_MTTKRP_ONLY},
    {"check", no_argument, NULL, AMP_OPT_CHECK},
    {"info", no_argument, NULL, AMP_OPT_INFO},
    {"verify", no_argument, NULL, AMP_OPT_VERIFY},
    /* devices and threads */
    {"gpus", required_argument, NULL, AMP_OPT_GPUS},
    {"devices", required_argument, NULL, AMP_OPT_DEVICES},
    {"partition", required_argument, NULL, AMP_OPT_PARTITION},
    {"overlap", no_argument, NULL, AMP_OPT_OVERLAP},
    {"send-parts", required_argument, NULL, AMP_OPT_SEND_PARTS},
    {"exchange", required_argument, NULL, AMP_OPT_EXCHANGE},
    {"memory", required_argument, NULL, AMP_OPT_MEMORY},
    {"device-memory", required_argument, NULL, AMP_OPT_DEVICE_MEMORY},
    {"host-memory", required_argument, NULL, AMP_OPT_HOST_MEMORY},
    {"stream-chunk", required_argument, NULL, AMP_OPT_STREAM_CHUNK},
    {"remap-kernel", no_argument, NULL, AMP_OPT_REMAP_KERNEL},
    {"list-devices", no_argument, NULL, AMP_OPT_LIST_DEVICES},
    /* threads and reporting: -t, -q, -v, -h, -V */
    AMP_CLI_COMMON_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

void amp_run_opts_init(amp_run_opts *r)
{
    memset(r, 0, sizeof *r);
    amp_cpd_opts_init(&r->opts);
    r->gpus = AMP_GPUS_AUTO;
}

/* --devices: distinct GPU numbers. */
static amp_status parse_devices(const char *text, amp_gpu_opts *g, amp_error *err)
{
    uint64_t list[AMP_MAX_GPUS];
    size_t n = 0;
    AMP_CHECK(amp_parse_u64_list(text, AMP_MAX_GPUS, 0, AMP_MAX_GPUS - 1, "--devices", list, &n,
                                 err));
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < i; j++)
            if (list[j] == list[i])
                return AMP_FAIL(err, AMP_ERR_USAGE, "--devices: GPU %" PRIu64 " is listed "
                                "twice", list[i]);
        g->devices[i] = (int)list[i];
    }
    g->ndevices = (unsigned)n;
    return AMP_OK;
}

/* The position (from 1) of the first empty item of a comma-separated
 * list ("a,,b", ",a", "a,"), or 0. strtok_r would skip it and count one
 * value fewer than the user wrote. An empty list is no list of empty
 * items: its callers say that it needs a value. */
static unsigned empty_item(const char *text)
{
    if (*text == '\0')
        return 0;
    unsigned k = 1;
    for (const char *p = text;; p++) {
        if ((*p == ',' || *p == '\0') && (p == text || p[-1] == ','))
            return k;
        if (*p == '\0')
            return 0;
        if (*p == ',')
            k++;
    }
}

/* --constraint: none or nonneg, once or per mode. */
static amp_status parse_constraints(const char *text, amp_rules *r, amp_error *err)
{
    static const char *const names[] = {"none", "nonneg", NULL};
    char buf[1024];
    if (strlen(text) >= sizeof buf)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--constraint: the list is too long");
    strcpy(buf, text);
    if (empty_item(text))
        return AMP_FAIL(err, AMP_ERR_USAGE, "--constraint %s: value %u is empty: give none or "
                        "nonneg for each mode", text, empty_item(text));
    unsigned n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int choice;
        if (n == AMP_MAX_MODES)
            return AMP_FAIL(err, AMP_ERR_USAGE, "--constraint: more than %d values",
                            AMP_MAX_MODES);
        AMP_CHECK(amp_parse_choice(tok, names, "--constraint", &choice, err));
        r->constraint[n++] = choice == 1 ? AMP_CONSTRAINT_NONNEG : AMP_CONSTRAINT_NONE;
    }
    if (n == 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--constraint needs none or nonneg");
    r->n_constraint = n;
    return AMP_OK;
}

/* --l1, --l2: a penalty, once or per mode. */
static amp_status parse_penalties(const char *text, const char *what, double *v,
                                  unsigned *count, amp_error *err)
{
    char buf[1024];
    if (strlen(text) >= sizeof buf)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: the list is too long", what);
    strcpy(buf, text);
    if (empty_item(text))
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s %s: value %u is empty: give a number for each "
                        "mode", what, text, empty_item(text));
    unsigned n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == AMP_MAX_MODES)
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s: more than %d values", what, AMP_MAX_MODES);
        AMP_CHECK(amp_parse_double(tok, 0, 1e300, what, &v[n++], err));
    }
    if (n == 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s needs a value", what);
    *count = n;
    return AMP_OK;
}

/* The parsers say AMP_ERR_RANGE or AMP_ERR_PARSE of a bad number: to the
 * caller, every bad option value is a usage error. */
static amp_status usage(amp_status rc, amp_error *err)
{
    if (rc != AMP_OK)
        err->status = AMP_ERR_USAGE;
    return rc == AMP_OK ? AMP_OK : AMP_ERR_USAGE;
}

/* --samples-grad, --samples-loss: N (N nonzeros and N zeros, as pyttb's
 * integer) or NONZEROS,ZEROS. */
static amp_status parse_samples(const char *text, const char *what, uint64_t *nz, uint64_t *z,
                                amp_error *err)
{
    uint64_t v[2];
    size_t n = 0;
    if (empty_item(text))
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s %s: value %u is empty: give N, or "
                        "NONZEROS,ZEROS", what, text, empty_item(text));
    AMP_CHECK(amp_parse_u64_list(text, 2, 0, UINT64_C(1) << 40, what, v, &n, err));
    if (n == 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s needs N, or NONZEROS,ZEROS", what);
    *nz = v[0];
    *z = n == 2 ? v[1] : v[0];
    if (*nz + *z == 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s %s: no samples at all", what, text);
    return AMP_OK;
}

static void gcp_only(amp_run_opts *r, const char *name)
{
    if (r->gcp_only == NULL)
        r->gcp_only = name;
}

static void gpu_only(amp_run_opts *r, const char *name)
{
    if (r->gpu_only == NULL)
        r->gpu_only = name;
}

static amp_status take_option(amp_run_opts *r, int code, const char *arg, int *taken,
                              amp_error *err)
{
    static const char *const precisions[] = {"f64", "f32", NULL};
    /* In AMP_MEMORY_* order (amp_memory_name). */
    static const char *const memories[] = {"auto", "resident", "stream", "compressed", "remap",
                                           NULL};
    static const char *const partitions[] = {"shards", "equal-nnz", NULL};
    /* In AMP_EXCHANGE_* order: the choice's index is the value. */
    static const char *const exchanges[] = {"auto", "nccl", "copy", NULL};
    _Static_assert(AMP_EXCHANGE_AUTO == 0 && AMP_EXCHANGE_NCCL == 1 && AMP_EXCHANGE_COPY == 2,
                   "exchanges[] follows AMP_EXCHANGE_*");
    static const char *const methods[] = {"als", "ao-admm", "mu", "hals", "cp-apr", "gcp",
                                          NULL};
    uint64_t u;
    int choice;
    *taken = 1;
    switch (code) {
    case 'r':
        AMP_CHECK(amp_parse_u64(arg, 1, AMP_CPU_MAX_RANK, "--rank", &u, err));
        r->opts.rank = (unsigned)u;
        return AMP_OK;
    case AMP_OPT_ITERS:
        AMP_CHECK(amp_parse_u64(arg, 1, AMP_RUN_MAX_ITERS, "--iters", &u, err));
        r->opts.max_iters = (unsigned)u;
        r->iters_given = 1;
        return AMP_OK;
    case AMP_OPT_TOL:
        r->tol_given = 1;
        return amp_parse_double(arg, 0, 1, "--tol", &r->opts.tol, err);
    case AMP_OPT_INNER:
        AMP_CHECK(amp_parse_u64(arg, 1, AMP_APR_INNER_MAX, "--inner", &u, err));
        r->opts.apr.inner = (unsigned)u;
        return AMP_OK;
    case AMP_OPT_KAPPA:
        return amp_parse_double(arg, 0, 1e300, "--kappa", &r->opts.apr.kappa, err);
    case AMP_OPT_KAPPA_TOL:
        return amp_parse_double(arg, 0, 1e300, "--kappa-tol", &r->opts.apr.kappa_tol, err);
    case AMP_OPT_EPS_DIV_ZERO:
        AMP_CHECK(amp_parse_double(arg, 0, 1, "--eps-div-zero", &r->opts.apr.eps_div_zero,
                                   err));
        if (!(r->opts.apr.eps_div_zero > 0))
            return AMP_FAIL(err, AMP_ERR_USAGE, "--eps-div-zero %s: give a positive number "
                            "(the model's value is divided by)", arg);
        return AMP_OK;
    case AMP_OPT_ALLOW_NONINTEGER:
        r->opts.apr.allow_noninteger = 1;
        return AMP_OK;
    case AMP_OPT_KAPPA_RULE: {
        static const char *const rules[] = {"kkt", "pyttb", NULL};
        AMP_CHECK(amp_parse_choice(arg, rules, "--kappa-rule", &choice, err));
        r->opts.apr.shift_rule = choice == 1 ? AMP_APR_SHIFT_PYTTB : AMP_APR_SHIFT_KKT;
        return AMP_OK;
    }
    case AMP_OPT_OBSERVED: {
        static const char *const observed[] = {"all", "nonzeros", NULL};
        AMP_CHECK(amp_parse_choice(arg, observed, "--observed", &choice, err));
        r->opts.completion.observed = choice == 1 ? AMP_OBSERVED_NONZEROS : AMP_OBSERVED_ALL;
        return AMP_OK;
    }
    case AMP_OPT_HOLDOUT:
        r->holdout_given = 1;
        AMP_CHECK(amp_parse_double(arg, 0, 1, "--holdout", &r->opts.completion.holdout, err));
        if (r->opts.completion.holdout >= 1)
            return AMP_FAIL(err, AMP_ERR_USAGE, "invalid value '%s' for --holdout: expected a "
                            "fraction of the stored entries, at least 0 and below 1", arg);
        return AMP_OK;
    case AMP_OPT_HOLDOUT_FILE:
        r->holdout_file = arg;
        return AMP_OK;
    case AMP_OPT_LOSS:
        gcp_only(r, "--loss");
        AMP_CHECK(amp_parse_choice(arg, amp_gcp_loss_names, "--loss", &choice, err));
        r->opts.gcp.loss = (amp_gcp_loss)choice;
        return AMP_OK;
    case AMP_OPT_SAMPLES_GRAD:
        gcp_only(r, "--samples-grad");
        r->opts.gcp.grad_given = 1;
        return parse_samples(arg, "--samples-grad", &r->opts.gcp.grad_nz, &r->opts.gcp.grad_z,
                             err);
    case AMP_OPT_SAMPLES_LOSS:
        gcp_only(r, "--samples-loss");
        r->opts.gcp.loss_given = 1;
        return parse_samples(arg, "--samples-loss", &r->opts.gcp.loss_nz, &r->opts.gcp.loss_z,
                             err);
    case AMP_OPT_EPOCH_ITERS:
        gcp_only(r, "--epoch-iters");
        AMP_CHECK(amp_parse_u64(arg, 1, AMP_RUN_MAX_ITERS, "--epoch-iters", &u, err));
        r->opts.gcp.epoch_iters = (unsigned)u;
        return AMP_OK;
    case AMP_OPT_RATE:
        gcp_only(r, "--rate");
        AMP_CHECK(amp_parse_double(arg, 0, 1e300, "--rate", &r->opts.gcp.rate, err));
        if (!(r->opts.gcp.rate > 0))
            return AMP_FAIL(err, AMP_ERR_USAGE, "--rate %s: give a positive step size", arg);
        return AMP_OK;
    case AMP_OPT_DECAY:
        gcp_only(r, "--decay");
        AMP_CHECK(amp_parse_double(arg, 0, 1, "--decay", &r->opts.gcp.decay, err));
        if (!(r->opts.gcp.decay > 0))
            return AMP_FAIL(err, AMP_ERR_USAGE, "--decay %s: give a factor above 0 and at most "
                            "1 (the rate's after a failed epoch)", arg);
        return AMP_OK;
    case AMP_OPT_MAX_FAILS:
        gcp_only(r, "--max-fails");
        AMP_CHECK(amp_parse_u64(arg, 0, AMP_RUN_MAX_ITERS, "--max-fails", &u, err));
        r->opts.gcp.max_fails = (unsigned)u;
        return AMP_OK;
    case AMP_OPT_HUBER_DELTA:
        gcp_only(r, "--huber-delta");
        r->huber_delta_given = 1;
        AMP_CHECK(amp_parse_double(arg, 0, 1e300, "--huber-delta", &r->opts.gcp.huber_delta,
                                   err));
        if (!(r->opts.gcp.huber_delta > 0))
            return AMP_FAIL(err, AMP_ERR_USAGE, "--huber-delta %s: give a positive threshold",
                            arg);
        return AMP_OK;
    case AMP_OPT_ADAM: {
        static const char *const kinds[] = {"dense", "lazy", NULL};
        gcp_only(r, "--adam");
        AMP_CHECK(amp_parse_choice(arg, kinds, "--adam", &choice, err));
        r->opts.gcp.adam = choice == 1 ? AMP_GCP_ADAM_LAZY : AMP_GCP_ADAM_DENSE;
        return AMP_OK;
    }
    case AMP_OPT_SEED:
        return amp_parse_u64(arg, 0, UINT64_MAX, "--seed", &r->opts.seed, err);
    case AMP_OPT_INIT:
        r->init = arg;
        return AMP_OK;
    case AMP_OPT_PRECISION:
        AMP_CHECK(amp_parse_choice(arg, precisions, "--precision", &choice, err));
        r->opts.precision = choice == 1 ? AMP_PRECISION_F32 : AMP_PRECISION_F64;
        return AMP_OK;
    case AMP_OPT_METHOD:
        AMP_CHECK(amp_parse_choice(arg, methods, "--method", &choice, err));
        r->opts.method = (amp_method)choice;
        return AMP_OK;
    case AMP_OPT_CONSTRAINT:
        return parse_constraints(arg, &r->opts.rules, err);
    case AMP_OPT_L1:
        return parse_penalties(arg, "--l1", r->opts.rules.l1, &r->opts.rules.n_l1, err);
    case AMP_OPT_L2:
        return parse_penalties(arg, "--l2", r->opts.rules.l2, &r->opts.rules.n_l2, err);
    case AMP_OPT_ADMM_INNER:
        AMP_CHECK(amp_parse_u64(arg, 1, AMP_ADMM_INNER_MAX, "--admm-inner", &u, err));
        r->opts.admm_inner = (unsigned)u;
        return AMP_OK;
    case AMP_OPT_ADMM_TOL:
        return amp_parse_double(arg, 0, 1, "--admm-tol", &r->opts.admm_tol, err);
    case AMP_OPT_GPUS:
        AMP_CHECK(amp_parse_u64(arg, 0, AMP_MAX_GPUS, "--gpus", &u, err));
        r->gpus = (int)u;
        r->gpus_given = 1;
        return AMP_OK;
    case AMP_OPT_DEVICES:
        return parse_devices(arg, &r->gpu, err);
    case AMP_OPT_OVERLAP:
        gpu_only(r, "--overlap");
        r->gpu.overlap = 1;
        return AMP_OK;
    case AMP_OPT_REMAP_KERNEL:
        gpu_only(r, "--remap-kernel");
        r->gpu.remap_kernel = 1;
        return AMP_OK;
    case AMP_OPT_EXCHANGE:
        gpu_only(r, "--exchange");
        AMP_CHECK(amp_parse_choice(arg, exchanges, "--exchange", &choice, err));
        r->gpu.exchange = choice;
        return AMP_OK;
    case AMP_OPT_SEND_PARTS: {
        amp_error ignored = {0};   /* the message below names auto too */
        gpu_only(r, "--send-parts");
        if (strcmp(arg, "auto") == 0)
            u = 0;
        else if (amp_parse_u64(arg, 1, AMP_SEND_PARTS_MAX, "--send-parts", &u, &ignored))
            return AMP_FAIL(err, AMP_ERR_USAGE, "invalid value '%s' for --send-parts: expected "
                            "auto or an integer from 1 to %d", arg, AMP_SEND_PARTS_MAX);
        r->gpu_als.send_parts = (unsigned)u;
        return AMP_OK;
    }
    case AMP_OPT_PARTITION:
        gpu_only(r, "--partition");
        AMP_CHECK(amp_parse_choice(arg, partitions, "--partition", &choice, err));
        r->gpu.partition = choice == 1 ? AMP_PARTITION_EQUAL_NNZ : AMP_PARTITION_OWNER;
        return AMP_OK;
    case AMP_OPT_MEMORY:
        gpu_only(r, "--memory");
        AMP_CHECK(amp_parse_choice(arg, memories, "--memory", &choice, err));
        r->gpu.memory = choice;
        return AMP_OK;
    case AMP_OPT_STREAM_CHUNK:
        gpu_only(r, "--stream-chunk");
        return amp_parse_u64(arg, AMP_STREAM_CHUNK_MIN, UINT64_C(1) << 40, "--stream-chunk",
                             &r->gpu.stream_chunk, err);
    case AMP_OPT_DEVICE_MEMORY:
        gpu_only(r, "--device-memory");
        return amp_parse_size(arg, 1, UINT64_MAX, "--device-memory", &r->gpu.device_memory,
                              err);
    case AMP_OPT_HOST_MEMORY:
        gpu_only(r, "--host-memory");
        return amp_parse_size(arg, 1, UINT64_MAX, "--host-memory", &r->gpu.host_memory, err);
    }
    *taken = 0;
    return AMP_OK;
}

amp_status amp_run_option(amp_run_opts *r, int code, const char *arg, int *taken,
                          amp_error *err)
{
    return usage(take_option(r, code, arg, taken, err), err);
}

amp_status amp_run_opts_check(amp_run_opts *r, amp_error *err)
{
    if (r->gpu.ndevices > 0 && r->gpus_given && r->gpus != (int)r->gpu.ndevices)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--gpus %d and --devices with %u GPU%s disagree: "
                        "give one", r->gpus, r->gpu.ndevices, amp_plural(r->gpu.ndevices));
    if (r->gpu.ndevices > 0)
        r->gpus = (int)r->gpu.ndevices;
    if (r->gpus == 0 && r->gpu_only)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s applies to the GPU backend, and --gpus 0 asks "
                        "for the CPU: give one", r->gpu_only);
    if (r->gpu.memory == AMP_MEMORY_REMAP && r->gpus > 1)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--memory remap runs on one GPU for now, and --%s "
                        "asks for %d: give --gpus 1, or --memory resident or stream for "
                        "several", r->gpu.ndevices > 0 ? "devices" : "gpus", r->gpus);
    if (r->gpu.overlap && r->gpu_als.send_parts > 1)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--overlap sends a mode's rows during the next "
                        "MTTKRP, --send-parts=%u during its own: give one",
                        r->gpu_als.send_parts);
    if (r->opts.method == AMP_METHOD_APR) {
        /* The Tensor Toolbox's stop: a KKT tolerance, many outer
         * iterations (each is cheap, and many are needed). */
        if (!r->tol_given)
            r->opts.tol = AMP_APR_TOL_DEFAULT;
        if (!r->iters_given)
            r->opts.max_iters = AMP_APR_ITERS_DEFAULT;
    }
    if (r->opts.completion.observed != AMP_OBSERVED_NONZEROS &&
        (r->holdout_given || r->holdout_file))
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s holds entries out of a fit to the stored "
                        "entries: give --observed nonzeros too (--observed all fits every "
                        "cell, an absent one as a zero)",
                        r->holdout_given ? "--holdout" : "--holdout-file");
    if (r->holdout_given && r->holdout_file)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--holdout draws the test entries from the stored "
                        "ones, --holdout-file reads them: give one");
    if (r->gcp_only && r->opts.method != AMP_METHOD_GCP)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s applies to --method gcp, and the method is %s",
                        r->gcp_only, amp_method_name(r->opts.method));
    if (r->opts.method == AMP_METHOD_GCP) {
        if (r->huber_delta_given && r->opts.gcp.loss != AMP_GCP_HUBER)
            return AMP_FAIL(err, AMP_ERR_USAGE, "--huber-delta is the threshold of --loss "
                            "huber, and the loss is %s", amp_gcp_loss_names[r->opts.gcp.loss]);
        /* pyttb's stop: epochs (1000) and failed epochs, no tolerance. */
        if (!r->tol_given)
            r->opts.tol = 0;
        if (!r->iters_given)
            r->opts.max_iters = AMP_GCP_EPOCHS_DEFAULT;
        r->opts.gcp.scale_start = r->init == NULL;
    }
    if (r->opts.method == AMP_METHOD_MU && r->opts.rules.n_constraint == 0) {
        /* MU keeps factors non-negative whatever it is told: say so. */
        r->opts.rules.n_constraint = 1;
        r->opts.rules.constraint[0] = AMP_CONSTRAINT_NONNEG;
    }
    return AMP_OK;
}

amp_status amp_session_open(amp_session *s, amp_run_opts *r, const char *path, amp_error *err)
{
    AMP_CHECK(amp_file_open(path, &s->f, err));
    AMP_CHECK(amp_tensor_load_layout(s->f, &s->t, err));
    s->have_t = 1;
    /* A constraint list's length is checked against the modes before the
     * nonzeros are read. */
    amp_status rc = amp_rules_resolve(&r->opts, s->t.nmodes, r->rule, err);
    if (rc != AMP_OK) {
        s->late_usage = 1;
        return rc;
    }
    if (r->holdout_file) {
        AMP_CHECK(amp_test_set_read(&s->t, r->holdout_file, &s->test, err));
        r->opts.completion.test = &s->test;
    }
    return AMP_OK;
}

static amp_status load_host(amp_session *s, const amp_session_progress *p, amp_error *err)
{
    if (p && p->phase)
        p->phase(p->ctx, "loading", "B", 0);
    return amp_tensor_load_nonzeros(s->f, s->threads, p ? p->progress : NULL,
                                    p ? p->ctx : NULL, &s->t, err);
}

/* A resident GPU run reads the nonzeros from the file straight to the
 * GPU; the CPU backend (asked for, or for want of a GPU) into host
 * memory. Only keep_host (--check's reference) needs them in host memory
 * whatever the backend. */
amp_status amp_session_load(amp_session *s, amp_run_opts *r, const char *path,
                            const amp_session_progress *p, amp_error *err)
{
    double t0 = amp_now();
    const int completion = r->opts.completion.observed == AMP_OBSERVED_NONZEROS;
    if (r->gpus != 0) {
        /* Refused before any GPU is looked for; the GPU layer asks again
         * for the count it finds where --gpus was not given. */
        amp_status rc = amp_rules_gpu_layout(r->opts.method, completion, r->gpus,
                                             r->gpu.partition == AMP_PARTITION_EQUAL_NNZ,
                                             r->gpu.overlap, err);
        if (rc != AMP_OK)
            return rc;
    }
    if (r->opts.method == AMP_METHOD_APR && r->gpus != 0) {
        /* One GPU or several (run/cuda/apr.cu), their parts resident or
         * streamed; without --gpus, every GPU found, else the CPU. */
        if (r->gpu.memory == AMP_MEMORY_REMAP)
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--memory remap: not with --method "
                            "cp-apr for now; --memory resident, stream or compressed");
    }
    if (completion && r->gpus != 0) {
        /* One GPU or several (run/cuda/completion.cu), their parts
         * resident or streamed. */
        if (r->gpu.memory == AMP_MEMORY_REMAP)
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--memory remap: not with --observed "
                            "nonzeros for now; --memory resident, stream or compressed");
    }
    s->gcp_gpu = 0;
    if (r->opts.method == AMP_METHOD_GCP) {
        /* The CPU reads the nonzeros (the sampler's form is built from
         * them); one GPU, where asked or found, takes that form. */
        if (r->gpus > 1)
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--method gcp runs on one GPU for now, "
                            "and --%s asks for %d: give --gpus 1, or --gpus 0 for the CPU",
                            r->gpu.ndevices > 0 ? "devices" : "gpus", r->gpus);
        if (r->gpus != 0 && r->gpu.memory != AMP_MEMORY_AUTO &&
            r->gpu.memory != AMP_MEMORY_RESIDENT && r->gpu.memory != AMP_MEMORY_STREAM)
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--memory %s: --method gcp reads no chunk "
                            "of the tensor on the GPU, it keeps the sampler's form there "
                            "(resident) or draws each step's samples on the host and sends "
                            "them (stream); --memory resident, stream or auto",
                            amp_memory_name(r->gpu.memory));
        if (r->gpus != 0) {
            int dev = -1;
            AMP_CHECK(amp_gpu_gcp_pick(&r->gpu, &dev, s->gcp_device_name,
                                       sizeof s->gcp_device_name, err));
            s->gcp_gpu = dev + 1;
        }
        if (!s->external_load)
            AMP_CHECK(load_host(s, p, err));
        s->seconds_load = amp_now() - t0;
        s->gcp_stream = 0;
        if (s->gcp_gpu > 0 && !s->external_load)
            AMP_CHECK(amp_gpu_gcp_memory(s->gcp_gpu - 1, &s->t, r->opts.rank, r->gpu.memory,
                                         &s->gcp_stream, err));
        return s->external_load ? AMP_OK : amp_session_check_counts(s, r, path, err);
    }
    if (r->keep_host)
        AMP_CHECK(load_host(s, p, err));
    s->seconds_load = amp_now() - t0;
    if (r->gpus != 0) {
        r->gpu.path = path;
        r->gpu.gpus = r->gpus;
        r->gpu.release = r->keep_host ? NULL : &s->t;
        r->gpu.file = s->f;
        r->gpu.progress = p ? p->progress : NULL;
        r->gpu.phase = p ? p->phase : NULL;
        r->gpu.progress_ctx = p ? p->ctx : NULL;
        if (p && p->phase)
            p->phase(p->ctx, "loading", "B", 0);
        amp_status rc = amp_gpu_run_open(&r->gpu, &r->opts, &s->t, &s->gr, err);
        r->gpu.progress_ctx = NULL;
        r->gpu.progress = NULL;
        r->gpu.phase = NULL;
        AMP_CHECK(rc);
    }
    /* The GPUs' open reads and uploads: its own clocks tell the two apart. */
    if (s->gr) {
        s->seconds_load += amp_gpu_run_load_seconds(s->gr);
        s->seconds_upload = amp_gpu_run_upload_seconds(s->gr);
    } else if (s->t.layout_only && !s->external_load) {
        double t1 = amp_now();
        AMP_CHECK(load_host(s, p, err));
        s->seconds_load += amp_now() - t1;
    }
    return s->external_load ? AMP_OK : amp_session_check_counts(s, r, path, err);
}

/* The original coordinates of copy 0's nonzero at `at`, word w under
 * block key `key`, "(i, j, k)" from 1, into buf. */
static void coordinates(const amp_tensor *t, uint64_t w, uint64_t key, char *buf, size_t n)
{
    const amp_mode_layout *l = &t->copies[0].layout;
    size_t at = 0;
    for (unsigned m = 0; m < t->nmodes && at < n; m++) {
        uint64_t i = amp_blco_field(key, w, l->shift[m], l->width[m]);
        if (t->new_to_orig[m] != NULL && i < t->rows[m])
            i = t->new_to_orig[m][i];
        at += (size_t)snprintf(buf + at, n - at, "%s%" PRIu64, m ? ", " : "(", i + 1);
    }
    if (at < n)
        snprintf(buf + at, n - at, ")");
}

/* The first value of copy 0 that CP-APR cannot take, as a file scan finds it. */
typedef struct count_scan {
    const amp_tensor *t;
    int allow_noninteger;
    pthread_mutex_t lock;
    uint64_t at;              /* UINT64_MAX: none yet */
    uint64_t word, key;
    double value;
} count_scan;

static int not_count(double v, int allow_noninteger)
{
    return !(v >= 0) || (!allow_noninteger && v != floor(v));
}

static amp_status scan_chunk(void *ctx, int thread, const amp_chunk_data *c, amp_error *err)
{
    count_scan *cs = ctx;
    (void)thread;
    (void)err;
    if (c->mode != 0)
        return AMP_OK;
    const int vf32 = cs->t->value_type == AMP_VALUES_F32;
    for (uint64_t j = 0; j < c->count; j++) {
        double v = vf32 ? (double)((const float *)c->vals)[j] : ((const double *)c->vals)[j];
        if (not_count(v, cs->allow_noninteger)) {
            pthread_mutex_lock(&cs->lock);
            if (c->at + j < cs->at) {
                cs->at = c->at + j;
                cs->word = c->words[j];
                cs->key = cs->t->copies[0].layout.key_bits > 0 ? c->section->aux : 0;
                cs->value = v;
            }
            pthread_mutex_unlock(&cs->lock);
            break;
        }
    }
    return AMP_OK;
}

/* GCP: the first value of copy 0 (in host memory) that the loss does
 * not model, named by its coordinates. */
static amp_status check_gcp_values(const amp_session *s, const amp_run_opts *r,
                                   const char *path, amp_error *err)
{
    const amp_tensor *t = &s->t;
    const amp_copy *c = &t->copies[0];
    if (t->layout_only || c->vals == NULL)
        return AMP_OK;
    const int vf32 = t->value_type == AMP_VALUES_F32;
    const amp_gcp_loss loss = r->opts.gcp.loss;
    size_t b = 0;
    for (uint64_t k = 0; k < c->nnz; k++) {
        const double v = vf32 ? (double)((const float *)c->vals)[k] : ((const double *)c->vals)[k];
        const char *what;
        if (amp_gcp_value_ok(loss, v, &what))
            continue;
        uint64_t key = 0;
        if (c->layout.key_bits > 0) {
            while (c->block_start[b + 1] <= k)
                b++;
            key = c->block_key[b];
        }
        char where[AMP_MAX_MODES * 22 + 4];
        coordinates(t, c->words[k], key, where, sizeof where);
        return AMP_FAIL(err, AMP_ERR_RANGE, "%s: the nonzero at %s has the value %.17g: --loss "
                        "%s models %s data", path, where, v, amp_gcp_loss_names[loss], what);
    }
    return AMP_OK;
}

amp_status amp_session_check_counts(amp_session *s, const amp_run_opts *r, const char *path,
                                    amp_error *err)
{
    if (r->opts.method == AMP_METHOD_GCP)
        return check_gcp_values(s, r, path, err);
    if (r->opts.method != AMP_METHOD_APR)
        return AMP_OK;
    const amp_tensor *t = &s->t;
    const int allow = r->opts.apr.allow_noninteger;
    uint64_t at = UINT64_MAX, word = 0, key = 0;
    double value = 0;
    if (!t->layout_only && t->copies[0].vals != NULL) {
        if (amp_cpu_apr_check_values(t, allow, &at, &value) != AMP_OK) {
            const amp_copy *c = &t->copies[0];
            word = c->words[at];
            if (c->layout.key_bits > 0) {
                size_t b = 0;
                while (c->block_start[b + 1] <= at)
                    b++;
                key = c->block_key[b];
            }
        } else {
            at = UINT64_MAX;
        }
    } else {
        count_scan cs = {.t = t, .allow_noninteger = allow, .at = UINT64_MAX};
        pthread_mutex_init(&cs.lock, NULL);
        amp_status rc = amp_tensor_read_chunks(s->f, t, s->threads > 0 ? s->threads : 1, 0,
                                               scan_chunk, &cs, NULL, NULL, err);
        pthread_mutex_destroy(&cs.lock);
        AMP_CHECK(rc);
        at = cs.at;
        word = cs.word;
        key = cs.key;
        value = cs.value;
    }
    if (at == UINT64_MAX)
        return AMP_OK;
    char where[AMP_MAX_MODES * 22 + 4];
    coordinates(t, word, key, where, sizeof where);
    if (value < 0 || value != value)
        return AMP_FAIL(err, AMP_ERR_RANGE, "%s: the nonzero at %s has the value %g: Poisson "
                        "CP (--method cp-apr) models non-negative data", path, where, value);
    return AMP_FAIL(err, AMP_ERR_RANGE, "%s: the nonzero at %s has the value %.17g, not a "
                    "count: --method cp-apr models counts (--allow-noninteger takes any "
                    "non-negative value)", path, where, value);
}

/* Values far from 1 run scaled by a power of 2 (amp_value_scale_exp),
 * lambda unscaled after. The GPU backend takes the values as the file
 * holds them, so it refuses those it cannot run, judged from |X|^2 (the
 * file's, so before any upload). */
amp_status amp_session_scale(amp_session *s, amp_run_opts *r, amp_error *err)
{
    const amp_tensor *t = &s->t;
    r->value_exp = 0;
    /* Poisson CP takes counts as they are: its log-likelihood is not that
     * of a scaled tensor. */
    if (r->opts.method == AMP_METHOD_APR || r->opts.method == AMP_METHOD_GCP)
        return AMP_OK;
    /* Completion's residuals, RMSEs and ridge are in the data's units. */
    if (r->opts.completion.observed == AMP_OBSERVED_NONZEROS)
        return AMP_OK;
    if (s->gr) {
        double lo = ldexp(1, -2 * AMP_VALUE_EXP_MAX), hi = ldexp(1, 2 * AMP_VALUE_EXP_MAX);
        if (t->value_type == AMP_VALUES_F64 && t->nnz > 0 &&
            (t->norm_sq < lo || t->norm_sq / (double)t->nnz > hi))
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "the values are too %s for the GPU "
                            "backend (|X| = %g over %" PRIu64 " nonzeros; it takes values of "
                            "magnitude 2^-%d to 2^%d as the file holds them): --gpus 0 runs "
                            "them on the CPU, scaled", t->norm_sq < lo ? "small" : "large",
                            sqrt(t->norm_sq), t->nnz, AMP_VALUE_EXP_MAX, AMP_VALUE_EXP_MAX);
        return AMP_OK;
    }
    r->value_exp = amp_value_scale_exp(amp_tensor_max_abs(t, s->threads));
    if (r->value_exp != 0) {
        s->file_norm_sq = s->t.norm_sq;
        amp_tensor_scale(&s->t, r->value_exp, s->threads, &s->t.norm_sq);
    }
    return AMP_OK;
}

amp_status amp_session_start(amp_session *s, amp_run_opts *r, amp_error *err)
{
    double t0 = amp_now();
    if (r->init)
        AMP_CHECK(amp_factors_find(r->init, s->t.nmodes, &r->init_format, err));
    AMP_CHECK(r->init ? amp_factors_read(&s->t, r->init, r->opts.rank, &s->c, err)
                      : amp_cpd_init_random(&s->t, r->opts.rank, r->opts.seed, &s->c, err));
    s->seconds_start = amp_now() - t0;
    return AMP_OK;
}

amp_status amp_session_als(amp_session *s, amp_run_opts *r, amp_error *err)
{
    if (r->opts.method == AMP_METHOD_GCP && s->gcp_gpu > 0)
        return amp_gpu_gcp_run(s->gcp_gpu - 1, &s->t, &r->opts, s->gcp_stream, &s->c, err);
    return s->gr ? amp_gpu_run_als(s->gr, &s->t, &r->opts, &r->gpu_als, &s->c, err)
                 : amp_cpu_als(&s->t, &r->opts, &s->c, err);
}

void amp_session_unscale(amp_session *s, amp_run_opts *r)
{
    if (r->value_exp == 0)
        return;
    for (unsigned k = 0; k < s->c.rank; k++)
        s->c.lambda[k] = ldexp(s->c.lambda[k], -r->value_exp);
    if (!s->external_load)
        s->t.norm_sq = s->file_norm_sq;
}

void amp_session_close(amp_session *s)
{
    amp_gpu_run_close(s->gr);
    s->gr = NULL;
    amp_cpd_free(&s->c);
    amp_test_set_free(&s->test);
    if (s->have_t)
        amp_tensor_free(&s->t);
    s->have_t = 0;
    amp_file_close(s->f);
    s->f = NULL;
}
