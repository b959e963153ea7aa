/* libamped: amped.h over amped's own libraries. A tensor is an .amp file:
 * one on disk, or one built in memory into a memfd (Linux's anonymous
 * file), so that every tensor, whatever its source, is read by the same
 * reader and run by the same session (run/session.h) as amped-run's. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amp_build.h"
#include "amp_coo.h"
#include "amp_cpu.h"
#include "amp_outfile.h"
#include "amp_parse.h"
#include "amp_threads.h"
#include "amp_timer.h"
#include "amped.h"
#include "session.h"
#include "starts.h"
#ifdef AMP_HAVE_CUDA
#include "amp_cuda.h"
#endif

_Static_assert((int)AMPED_ERR_PEER == (int)AMP_ERR_PEER, "amped_status follows amp_status");
_Static_assert((int)AMPED_INDEX_UINT64 == (int)AMP_INDEX_UINT64,
               "amped_index_type follows amp_index_type");

/* ---- errors ----------------------------------------------------------------- */

static _Thread_local char last_error[AMP_ERROR_MSG_MAX];

static amped_status fail(const amp_error *err)
{
    snprintf(last_error, sizeof last_error, "%s", amp_error_message(err));
    return err->status == AMP_OK ? AMPED_ERR_INTERNAL : (amped_status)err->status;
}

static amped_status fail_msg(amped_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

const char *amped_last_error(void)
{
    return last_error;
}

const char *amped_strerror(amped_status status)
{
    return amp_strerror((amp_status)status);
}

/* ---- version and build ---------------------------------------------------- */

unsigned amped_version_number(void)
{
    return AMPED_VERSION_NUMBER;
}

const char *amped_version_string(void)
{
    return PACKAGE_VERSION;
}

static char build_info[512];

/* Once: the first calls may come from several threads at once. */
static void make_build_info(void)
{
    char *info = build_info;
    {
        char blas[64], cuda[64] = "none";
        unsigned limit = amp_cpu_blas_thread_limit(blas, sizeof blas);
        (void)limit;
#ifdef AMP_HAVE_CUDA
        amp_cuda_version_string(cuda, sizeof cuda);
#endif
        snprintf(info, sizeof build_info, "version: %s\ncuda: %s\ncuda runtime: %s\nnccl: %s\n"
                 "openmp: %s\nblas: %s\n", PACKAGE_VERSION,
#ifdef AMP_HAVE_CUDA
                 "yes",
#else
                 "no",
#endif
                 cuda,
#ifdef AMP_HAVE_NCCL
                 "yes",
#else
                 "no",
#endif
#ifdef _OPENMP
                 "yes",
#else
                 "no",
#endif
                 blas);
    }
}

const char *amped_build_info(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_build_info);
    return build_info;
}

void amped_set_threads(int threads)
{
    amp_set_threads(threads);
}

/* ---- tensors ---------------------------------------------------------------- */

struct amped_tensor {
    char *path;          /* the .amp file's path, or /proc/self/fd/N of the memfd */
    int memfd;           /* -1 for a file on disk */
    unsigned nmodes;
    uint64_t nnz, dims[AMP_MAX_MODES];
    double norm_sq;
    amp_value_type value_type;
};

/* The handle of the .amp file at path, described from its tables. */
static amped_status tensor_open(const char *path, int memfd, amped_tensor **out)
{
    amp_error err = {0};
    amp_file *f = NULL;
    amped_tensor *t = calloc(1, sizeof *t);
    if (t == NULL || (t->path = strdup(path)) == NULL) {
        free(t);
        if (memfd >= 0)
            close(memfd);
        return fail_msg(AMPED_ERR_NOMEM, "out of memory");
    }
    t->memfd = memfd;
    if (amp_file_open(path, &f, &err) != AMP_OK) {
        amped_tensor_free(t);
        return fail(&err);
    }
    const amp_meta *meta = amp_file_meta(f);
    t->nmodes = meta->nmodes;
    t->nnz = meta->nnz;
    memcpy(t->dims, meta->dims, sizeof t->dims);
    t->norm_sq = meta->norm_sq;
    t->value_type = meta->value_type;
    amp_file_close(f);
    *out = t;
    return AMPED_OK;
}

amped_status amped_tensor_open(const char *path, amped_tensor **out)
{
    if (path == NULL || out == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_tensor_open: a NULL argument");
    *out = NULL;
    return tensor_open(path, -1, out);
}

void amped_tensor_free(amped_tensor *t)
{
    if (t == NULL)
        return;
    if (t->memfd >= 0)
        close(t->memfd);
    free(t->path);
    free(t);
}

unsigned amped_tensor_nmodes(const amped_tensor *t)
{
    return t->nmodes;
}

uint64_t amped_tensor_nnz(const amped_tensor *t)
{
    return t->nnz;
}

void amped_tensor_dims(const amped_tensor *t, uint64_t *dims)
{
    memcpy(dims, t->dims, t->nmodes * sizeof *dims);
}

double amped_tensor_norm_sq(const amped_tensor *t)
{
    return t->norm_sq;
}

int amped_tensor_value_bytes(const amped_tensor *t)
{
    return t->value_type == AMP_VALUES_F32 ? 4 : 8;
}

/* amped-prep's build options from the caller's (NULL: its defaults). */
static amped_status build_options(const amped_build_options *o, amp_build_opts *b,
                                  amp_dup_policy *dup)
{
    amp_build_opts_init(b);
    *dup = AMP_DUP_SUM;
    if (o == NULL)
        return AMPED_OK;
    if (o->shards > 0)
        b->shards = o->shards;
    if (o->level < -7 || o->level > 22)
        return fail_msg(AMPED_ERR_USAGE, "compression level %d out of range (-7 to 22, or 0 "
                        "to store uncompressed)", o->level);
    b->write.level = o->level;
    if (o->duplicates != 0 && o->duplicates != 1)
        return fail_msg(AMPED_ERR_USAGE, "duplicates %d: give 0 (sum them) or 1 (refuse "
                        "them)", o->duplicates);
    *dup = o->duplicates ? AMP_DUP_ERROR : AMP_DUP_SUM;
    b->remap_streams = o->remap_streams != 0;
    b->source_name = o->source_name;
    b->source_size = o->source_size;
    b->source_hash = o->source_hash;
    return AMPED_OK;
}

/* amped_build_options' zero means amped-prep's level (1), not 0 (store):
 * a caller who zeroes the struct gets the default. */
static amped_build_options defaults_of(const amped_build_options *o)
{
    amped_build_options d;
    if (o)
        d = *o;
    else
        memset(&d, 0, sizeof d);
    if (o == NULL || o->level == 0)
        d.level = AMP_DEFAULT_LEVEL;
    return d;
}

/* t (consumed), or the arrays a (read in place: dims and repeats r as
 * amp_coo_arrays_check and amp_coo_arrays_dedup found them), built into a
 * memfd, as amped-prep would write it. */
static amped_status build_memfd(amp_coo *t, const amp_coo_arrays *a, const uint64_t *dims,
                                const amp_coo_repeats *r, const amp_build_opts *b,
                                amp_dup_policy dup, int threads, amped_tensor **out)
{
    amp_error err = {0};
    char params[512], path[64];
    amp_build_opts o = *b;
    amp_build_params(params, sizeof params, &o, dup);
    o.params = params;
    o.write.threads = threads;
    int fd = memfd_create("amped-tensor", MFD_CLOEXEC);
    if (fd < 0)
        return fail_msg(AMPED_ERR_IO, "memfd_create: %s", strerror(errno));
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    amp_build_report rep;
    amp_status rc = t != NULL ? amp_build_write(t, path, &o, &rep, &err)
                              : amp_build_write_arrays(a, dims, r, path, &o, &rep, &err);
    if (rc != AMP_OK) {
        close(fd);
        return fail(&err);
    }
    return tensor_open(path, fd, out);
}

amped_status amped_tensor_from_coo(const amped_coo *coo, const amped_build_options *opts,
                                   amped_tensor **out)
{
    if (coo == NULL || out == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_tensor_from_coo: a NULL argument");
    *out = NULL;
    amped_build_options d = defaults_of(opts);
    amp_build_opts b;
    amp_dup_policy dup;
    amped_status st = build_options(&d, &b, &dup);
    if (st != AMPED_OK)
        return st;
    amp_coo_arrays a = {
        .nmodes = coo->nmodes, .nnz = coo->nnz, .indices = coo->indices,
        .index_type = (amp_index_type)coo->index_type, .nnz_stride = coo->nnz_stride,
        .mode_stride = coo->mode_stride, .index_base = coo->index_base, .values = coo->values,
        .value_stride = coo->value_stride, .dims = coo->dims,
    };
    /* Read where they lie, never copied: checked, their repeats found,
     * and the mode copies built from them (amp_build_write_arrays). */
    amp_error err = {0};
    uint64_t dims[AMP_MAX_MODES];
    amp_coo_repeats r;
    memset(&r, 0, sizeof r);
    int prev = amp_max_threads();
    amp_set_threads(d.threads);
    amp_status rc = amp_coo_arrays_check(&a, dims, &err);
    if (rc == AMP_OK)
        rc = amp_coo_arrays_dedup(&a, dup, "the arrays", coo->index_base, &r, &err);
    if (rc != AMP_OK) {
        amp_set_threads(prev);
        return fail(&err);
    }
    st = build_memfd(NULL, &a, dims, &r, &b, dup, d.threads, out);
    amp_coo_repeats_free(&r);
    amp_set_threads(prev);
    return st;
}

static int is_amp_file(const char *path)
{
    char magic[AMP_FILE_MAGIC_LEN];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, magic, sizeof magic);
    close(fd);
    return n == (ssize_t)sizeof magic && memcmp(magic, AMP_FILE_MAGIC, sizeof magic) == 0;
}

amped_status amped_tensor_load(const char *path, const amped_build_options *opts,
                               amped_tensor **out)
{
    if (path == NULL || out == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_tensor_load: a NULL argument");
    *out = NULL;
    if (is_amp_file(path))
        return tensor_open(path, -1, out);
    amped_build_options d = defaults_of(opts);
    amp_build_opts b;
    amp_dup_policy dup;
    amped_status st = build_options(&d, &b, &dup);
    if (st != AMPED_OK)
        return st;
    amp_read_opts ro;
    amp_read_opts_init(&ro);
    ro.duplicates = dup;
    amp_error err = {0};
    amp_coo t;
    memset(&t, 0, sizeof t);
    amp_read_info info;
    amp_digest_job *digest = NULL;
    int prev = amp_max_threads();
    amp_set_threads(d.threads);
    /* Recorded as amped-prep records its input: the name without its
     * directory, the file's size and XXH3-64. */
    amp_status rc = amp_file_digest_start(path, &digest, &err);
    if (rc == AMP_OK)
        rc = amp_read_tensor(path, &ro, &t, &info, &err);
    if (digest != NULL) {
        amp_error derr = {0};
        amp_status drc = amp_file_digest_finish(digest, &b.source_size, &b.source_hash, &derr);
        if (rc == AMP_OK && drc != AMP_OK) {
            rc = drc;
            err = derr;
        }
    }
    if (rc != AMP_OK) {
        amp_coo_free(&t);
        amp_set_threads(prev);
        return fail(&err);
    }
    if (d.source_name == NULL || d.source_name[0] == '\0') {
        const char *base = strrchr(path, '/');
        b.source_name = base ? base + 1 : path;
    }
    st = build_memfd(&t, NULL, NULL, NULL, &b, dup, d.threads, out);
    amp_coo_free(&t);
    amp_set_threads(prev);
    return st;
}

amped_status amped_tensor_save(const amped_tensor *t, const char *path)
{
    if (t == NULL || path == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_tensor_save: a NULL argument");
    amp_error err = {0};
    const char *paths[2] = {t->path, path};
    const char *what[2] = {"the tensor's file", "the output"};
    int input[2] = {1, 0};
    if (t->memfd < 0 && amp_outfile_check_distinct(paths, what, input, 2, &err) != AMP_OK)
        return fail(&err);
    int in = open(t->path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return fail_msg(AMPED_ERR_IO, "%s: %s", t->path, strerror(errno));
    amp_outfile of;
    memset(&of, 0, sizeof of);
    of.fd = -1;
    if (amp_outfile_open(&of, path, &err) != AMP_OK) {
        close(in);
        return fail(&err);
    }
    static char buf[1 << 20];
    amped_status st = AMPED_OK;
    uint64_t at = 0;
    for (;;) {
        ssize_t n = pread(in, buf, sizeof buf, (off_t)at);
        if (n < 0) {
            st = fail_msg(AMPED_ERR_IO, "%s: %s", t->path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        if (amp_outfile_write(&of, buf, (size_t)n, &err) != AMP_OK) {
            st = fail(&err);
            break;
        }
        at += (uint64_t)n;
    }
    close(in);
    if (st == AMPED_OK && amp_outfile_commit(&of, &err) != AMP_OK)
        st = fail(&err);
    amp_outfile_abort(&of);
    return st;
}

/* ---- options ---------------------------------------------------------------- */

#define MAX_KEPT 256

struct amped_options {
    amp_run_opts r;
    amp_starts_opts starts;  /* amped_cp_sweep's models */
    int rank_given;
    int threads;
    char *kept[MAX_KEPT];   /* the values given, which r points into */
    unsigned nkept;
};

amped_status amped_options_new(amped_options **out)
{
    if (out == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_options_new: a NULL argument");
    amped_options *o = calloc(1, sizeof *o);
    if (o == NULL)
        return fail_msg(AMPED_ERR_NOMEM, "out of memory");
    amp_run_opts_init(&o->r);
    *out = o;
    return AMPED_OK;
}

void amped_options_free(amped_options *o)
{
    if (o == NULL)
        return;
    for (unsigned k = 0; k < o->nkept; k++)
        free(o->kept[k]);
    free(o);
}

/* The options of amped-run that are not the decomposition's. */
static int program_only(int code)
{
    switch (code) {
    case 'o': case AMP_OPT_FORMAT: case AMP_OPT_ROWS: case AMP_OPT_JSON: case AMP_OPT_REPORT:
    case AMP_OPT_MTTKRP_ONLY: case AMP_OPT_CHECK: case AMP_OPT_INFO: case AMP_OPT_VERIFY:
    case AMP_OPT_LIST_DEVICES: case AMP_OPT_KEEP_ALL:
        return 1;
    }
    /* -t, -q, -v, -h, -V ("threads" is taken apart); -r is --rank. */
    return code < 256 && code != 'r';
}

amped_status amped_options_set(amped_options *o, const char *name, const char *value)
{
    if (o == NULL || name == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_options_set: a NULL argument");
    amp_error err = {0};
    if (strcmp(name, "threads") == 0) {
        uint64_t u;
        if (value == NULL || amp_parse_u64(value, 0, 4096, "threads", &u, &err) != AMP_OK)
            return value ? fail_msg(AMPED_ERR_USAGE, "%s", amp_error_message(&err))
                         : fail_msg(AMPED_ERR_USAGE, "threads needs a value");
        o->threads = (int)u;
        return AMPED_OK;
    }
    const struct option *opt = NULL;
    for (const struct option *p = amp_run_long_options; p->name; p++)
        if (strcmp(p->name, name) == 0) {
            opt = p;
            break;
        }
    if (opt == NULL || program_only(opt->val))
        return fail_msg(AMPED_ERR_USAGE, "unknown option '%s'%s", name,
                        opt ? ": it is amped-run's, not a decomposition's" : "");
    if (opt->has_arg == no_argument) {
        if (value != NULL && *value && strcmp(value, "1") != 0 && strcmp(value, "true") != 0 &&
            strcmp(value, "yes") != 0)
            return fail_msg(AMPED_ERR_USAGE, "%s is a flag: give no value (or 1) to set it",
                            name);
        value = NULL;
    } else if (value == NULL) {
        return fail_msg(AMPED_ERR_USAGE, "%s needs a value", name);
    }
    char *copy = NULL;
    if (value != NULL) {
        if (o->nkept == MAX_KEPT)
            return fail_msg(AMPED_ERR_USAGE, "more than %d option values set", MAX_KEPT);
        if ((copy = strdup(value)) == NULL)
            return fail_msg(AMPED_ERR_NOMEM, "out of memory");
        o->kept[o->nkept++] = copy;
    }
    int taken = 0;
    if (amp_starts_option(&o->starts, opt->val, copy, &taken, &err) != AMP_OK) {
        err.status = AMP_ERR_USAGE;   /* a bad number too: the option's value is wrong */
        return fail(&err);
    }
    if (taken)
        return AMPED_OK;
    if (amp_run_option(&o->r, opt->val, copy, &taken, &err) != AMP_OK)
        return fail(&err);
    if (opt->val == 'r')
        o->rank_given = 1;
    if (!taken)
        return fail_msg(AMPED_ERR_INTERNAL, "option '%s' was not taken", name);
    return AMPED_OK;
}

/* ---- the decomposition ------------------------------------------------------ */

/* What each iteration reports, whatever the method: the series that
 * amped_result_series names (amped-run's JSON keys), in this order. */
enum {
    S_FIT, S_DELTA, S_SECONDS, S_LOGLIK, S_KKT, S_INNER, S_RMSE_TRAIN, S_RMSE_TEST, S_LOSS,
    S_LOSS_STDERR, S_LOSS_EXACT, S_RATE, S_FAILED, NSERIES
};
static const char *const series_names[NSERIES] = {
    "fit", "delta", "seconds", "loglik", "kkt", "inner", "rmse_train", "rmse_test", "loss",
    "loss_stderr", "loss_exact", "rate", "failed"};

/* Which runs have a series: every run, CP-APR's, completion's, GCP's. */
enum { KIND_ALL, KIND_APR, KIND_COMPLETION, KIND_GCP };
static int series_kind(int which)
{
    switch (which) {
    case S_LOGLIK: case S_KKT: case S_INNER:
        return KIND_APR;
    case S_RMSE_TRAIN: case S_RMSE_TEST:
        return KIND_COMPLETION;
    case S_LOSS: case S_LOSS_STDERR: case S_LOSS_EXACT: case S_RATE: case S_FAILED:
        return KIND_GCP;
    }
    return KIND_ALL;
}

typedef double iter_rec[NSERIES];

struct amped_result {
    unsigned nmodes, rank, iters, ngpus;
    int converged, stopped;
    double fit;
    amp_method method;
    int completion;                    /* --observed nonzeros */
    uint64_t n_train, n_test;
    uint64_t unobserved[AMP_MAX_MODES], singular[AMP_MAX_MODES];
    uint64_t dims[AMP_MAX_MODES], rows[AMP_MAX_MODES];
    double *A[AMP_MAX_MODES];          /* rows[m] x rank, compact rows */
    uint64_t *new_to_orig[AMP_MAX_MODES];
    double *lambda;
    iter_rec *recs;                    /* iters of them */
    double times[AMPED_NTIMES];
    char backend[8], device[256];
};

void amped_result_free(amped_result *r)
{
    if (r == NULL)
        return;
    for (unsigned m = 0; m < r->nmodes; m++) {
        free(r->A[m]);
        free(r->new_to_orig[m]);
    }
    free(r->lambda);
    free(r->recs);
    free(r);
}

/* What the session's callbacks need: the caller's callback, the model
 * being computed (its method's figures after each iteration), and what
 * each iteration reported. */
typedef struct run_ctx {
    amped_progress_fn fn;
    void *ctx;
    const char *phase;
    volatile int stop;
    const amp_cpd *cpd;
    iter_rec *recs;
    unsigned nrecs, cap;
    int nomem;
} run_ctx;

static void on_phase(void *ctx, const char *phase, const char *unit, uint64_t total)
{
    run_ctx *x = ctx;
    (void)unit;
    x->phase = phase;
    if (x->fn) {
        amped_progress p = {.phase = phase, .total = total};
        if (x->fn(x->ctx, &p))
            x->stop = 1;
    }
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    run_ctx *x = ctx;
    if (x->fn) {
        amped_progress p = {.phase = x->phase ? x->phase : "loading", .done = done,
                            .total = total};
        if (x->fn(x->ctx, &p))
            x->stop = 1;
    }
}

static int add_rec(run_ctx *x, double fit, double delta, double seconds)
{
    if (x->nrecs == x->cap) {
        unsigned cap = x->cap ? 2 * x->cap : 64;
        iter_rec *f = realloc(x->recs, cap * sizeof *f);
        if (f == NULL) {
            x->nomem = 1;
            x->stop = 1;
            return 0;
        }
        x->recs = f;
        x->cap = cap;
    }
    double *v = x->recs[x->nrecs++];
    for (int k = 0; k < NSERIES; k++)
        v[k] = NAN;
    v[S_FIT] = fit;
    v[S_DELTA] = delta;
    v[S_SECONDS] = seconds;
    /* The method's own figures, as amped-run's on_iter reads them. */
    const amp_cpd *c = x->cpd;
    if (c != NULL) {
        v[S_LOGLIK] = c->loglik;
        v[S_KKT] = c->kkt;
        v[S_INNER] = c->inner_iters;
        v[S_RMSE_TRAIN] = c->completion.rmse_train;
        v[S_RMSE_TEST] = c->completion.rmse_test;
        v[S_LOSS] = c->gcp_loss;
        v[S_LOSS_STDERR] = c->gcp_stderr;
        v[S_LOSS_EXACT] = c->gcp_exact;
        v[S_RATE] = c->gcp_rate;
        v[S_FAILED] = c->gcp_failed;
    }
    return 1;
}

static void on_iter(void *ctx, unsigned iter, double fit, double delta, double seconds)
{
    run_ctx *x = ctx;
    if (!add_rec(x, fit, delta, seconds))
        return;
    if (x->fn) {
        amped_progress p = {.phase = "iteration", .done = iter, .iter = iter, .fit = fit,
                            .delta = delta, .seconds = seconds,
                            .rank = x->cpd ? x->cpd->rank : 0};
        if (x->fn(x->ctx, &p))
            x->stop = 1;
    }
}

/* A result holding c, with t's dims and rows' original indices, and the
 * records recs (taken). */
static amped_status make_result(const amp_cpd *c, const amp_tensor *t, const amp_cpd_opts *o,
                                iter_rec *recs, amped_result **out)
{
    amped_result *res = calloc(1, sizeof *res);
    if (res == NULL) {
        free(recs);
        return fail_msg(AMPED_ERR_NOMEM, "out of memory");
    }
    res->recs = recs;
    res->nmodes = c->nmodes;
    res->rank = c->rank;
    res->iters = c->iters;
    res->fit = c->fit;
    res->converged = c->converged;
    res->stopped = c->stopped;
    res->method = o->method;
    res->completion = o->completion.observed == AMP_OBSERVED_NONZEROS;
    res->n_train = c->completion.n_train;
    res->n_test = c->completion.n_test;
    memcpy(res->unobserved, c->completion.unobserved, sizeof res->unobserved);
    memcpy(res->singular, c->completion.singular, sizeof res->singular);
    res->lambda = malloc(c->rank * sizeof *res->lambda);
    if (res->lambda == NULL) {
        amped_result_free(res);
        return fail_msg(AMPED_ERR_NOMEM, "out of memory");
    }
    memcpy(res->lambda, c->lambda, c->rank * sizeof *res->lambda);
    for (unsigned m = 0; m < c->nmodes; m++) {
        res->dims[m] = t->dims[m];
        res->rows[m] = c->rows[m];
        res->A[m] = malloc(c->rows[m] * c->rank * sizeof(double) + 1);
        if (res->A[m] == NULL) {
            amped_result_free(res);
            return fail_msg(AMPED_ERR_NOMEM, "out of memory");
        }
        memcpy(res->A[m], c->A[m], c->rows[m] * c->rank * sizeof(double));
        if (t->new_to_orig[m] != NULL) {
            res->new_to_orig[m] = malloc(c->rows[m] * sizeof(uint64_t) + 1);
            if (res->new_to_orig[m] == NULL) {
                amped_result_free(res);
                return fail_msg(AMPED_ERR_NOMEM, "out of memory");
            }
            memcpy(res->new_to_orig[m], t->new_to_orig[m], c->rows[m] * sizeof(uint64_t));
        }
    }
    snprintf(res->backend, sizeof res->backend, "cpu");
    *out = res;
    return AMPED_OK;
}

/* The model of s into a new result, with the run's times and backend. */
static amped_status take_model(const amp_session *s, const amp_run_opts *r, run_ctx *x,
                               double t_start, amped_result **out)
{
    const amp_cpd *c = &s->c;
    amped_result *res;
    iter_rec *recs = x->recs;
    x->recs = NULL;
    amped_status st = make_result(c, &s->t, &r->opts, recs, &res);
    if (st != AMPED_OK)
        return st;
    double *tm = res->times;
    tm[AMPED_TIME_LOAD] = s->seconds_load;
    tm[AMPED_TIME_UPLOAD] = s->seconds_upload;
    tm[AMPED_TIME_START] = s->seconds_start;
    tm[AMPED_TIME_MTTKRP] = c->seconds[AMP_PHASE_MTTKRP];
    tm[AMPED_TIME_GRAM] = c->seconds[AMP_PHASE_GRAM];
    tm[AMPED_TIME_SOLVE] = c->seconds[AMP_PHASE_SOLVE];
    tm[AMPED_TIME_UPDATE] = c->seconds[AMP_PHASE_UPDATE];
    tm[AMPED_TIME_NORMALIZE] = c->seconds[AMP_PHASE_NORMALIZE];
    tm[AMPED_TIME_FIT] = c->seconds[AMP_PHASE_FIT];
    tm[AMPED_TIME_COMM] = c->seconds[AMP_PHASE_COMM];
    tm[AMPED_TIME_TOTAL] = amp_now() - t_start;
    if (s->gr) {
        amp_gpu_info in;
        amp_gpu_run_info(s->gr, 0, &in);
        snprintf(res->backend, sizeof res->backend, "gpu");
        snprintf(res->device, sizeof res->device, "%s", in.name ? in.name : "");
        res->ngpus = amp_gpu_run_count(s->gr);
    } else if (s->gcp_gpu > 0) {
        snprintf(res->backend, sizeof res->backend, "gpu");
        snprintf(res->device, sizeof res->device, "%s", s->gcp_device_name);
        res->ngpus = 1;
    }
    *out = res;
    return AMPED_OK;
}

/* The options of o (NULL: the defaults), checked as amped-run checks
 * them; sweep: for amped_cp_sweep, else amped_cp (which fits one model). */
static amped_status run_options(const amped_options *o, int sweep, amp_run_opts *r)
{
    amp_error err = {0};
    if (o != NULL)
        *r = o->r;
    else
        amp_run_opts_init(r);
    if (o != NULL && amp_starts_active(&o->starts) && !sweep)
        return fail_msg(AMPED_ERR_USAGE, "--%s fits several models: amped_cp_sweep runs them, "
                        "amped_cp one", o->starts.starts_given ? "starts" : "ranks");
    if (o != NULL && sweep &&
        amp_starts_check(&o->starts, r, o->rank_given, &err) != AMP_OK)
        return fail(&err);
    if (o != NULL && !sweep && o->starts.choose != AMP_CHOOSE_NONE)
        return fail_msg(AMPED_ERR_USAGE, "--choose picks a rank among --ranks (or the starts "
                        "of --starts): amped_cp_sweep runs them");
    if (sweep && (o == NULL || !amp_starts_active(&o->starts)))
        r->gpus = 0;   /* else amp_starts_check's: the CPU, or one GPU where gpus 1 asks */
    if (amp_run_opts_check(r, &err) != AMP_OK)
        return fail(&err);
    return AMPED_OK;
}

/* The session of one run, up to its starting factors (without them for
 * a sweep, whose models start from their own seeds). */
static amp_status open_session(amp_session *s, amp_run_opts *r, const char *path, run_ctx *x,
                               int start, double *seconds_open, amp_error *err)
{
    amp_session_progress p = {on_phase, on_progress, x};
    double t_open = amp_now();
    amp_status rc = amp_session_open(s, r, path, err);
    *seconds_open = amp_now() - t_open;
    if (rc == AMP_OK)
        rc = amp_session_load(s, r, path, &p, err);
    if (rc == AMP_OK)
        rc = amp_session_scale(s, r, err);
    if (rc == AMP_OK && start)
        rc = amp_session_start(s, r, err);
    return rc;
}

amped_status amped_cp(const amped_tensor *t, const amped_options *o,
                      amped_progress_fn progress, void *ctx, amped_result **out)
{
    if (t == NULL || out == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_cp: a NULL argument");
    *out = NULL;
    double t_start = amp_now();
    amp_run_opts r;
    amped_status st = run_options(o, 0, &r);
    if (st != AMPED_OK)
        return st;
    int threads = o ? o->threads : 0;
    amp_error err = {0};
    run_ctx x = {.fn = progress, .ctx = ctx};
    r.opts.threads = threads;
    r.opts.on_iter = on_iter;
    r.opts.ctx = &x;
    r.opts.stop = &x.stop;
    amp_session s;
    memset(&s, 0, sizeof s);
    s.threads = amp_thread_count(threads);
    x.cpd = &s.c;
    int prev = amp_max_threads();
    amp_set_threads(threads);
    /* Several GPUs in one process need CUDA's kernels loaded eagerly
     * (amp_gpu_prepare_process); once CUDA has started in this process,
     * that is as it is. */
    amp_gpu_prepare_process(r.gpus != AMP_GPUS_AUTO ? (unsigned)r.gpus
                                                    : amp_gpu_count_unstarted());
    double seconds_open = 0;
    amp_status rc = open_session(&s, &r, t->path, &x, 1, &seconds_open, &err);
    if (rc == AMP_OK)
        rc = amp_session_als(&s, &r, &err);
    if (rc == AMP_OK && x.nomem)
        rc = AMP_FAIL(&err, AMP_ERR_NOMEM, "out of memory for the fits");
    if (rc == AMP_OK) {
        amp_session_unscale(&s, &r);
        s.seconds_load += seconds_open;   /* as amped-run counts it: the file's tables too */
        st = take_model(&s, &r, &x, t_start, out);
    } else {
        st = fail(&err);
    }
    free(x.recs);
    amp_session_close(&s);
    amp_set_threads(prev);
    return st;
}

unsigned amped_result_nmodes(const amped_result *r)
{
    return r->nmodes;
}

unsigned amped_result_rank(const amped_result *r)
{
    return r->rank;
}

unsigned amped_result_iters(const amped_result *r)
{
    return r->iters;
}

double amped_result_fit(const amped_result *r)
{
    return r->fit;
}

int amped_result_converged(const amped_result *r)
{
    return r->converged;
}

int amped_result_stopped(const amped_result *r)
{
    return r->stopped;
}

void amped_result_weights(const amped_result *r, double *lambda)
{
    memcpy(lambda, r->lambda, r->rank * sizeof *lambda);
}

amped_status amped_result_factor(const amped_result *r, unsigned m, double *out)
{
    if (r == NULL || out == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_result_factor: a NULL argument");
    if (m >= r->nmodes)
        return fail_msg(AMPED_ERR_USAGE, "mode %u: the model has modes 0 to %u", m,
                        r->nmodes - 1);
    const uint64_t R = r->rank;
    const uint64_t *orig = r->new_to_orig[m];
    if (orig == NULL && r->rows[m] == r->dims[m]) {
        memcpy(out, r->A[m], r->rows[m] * R * sizeof *out);
        return AMPED_OK;
    }
    memset(out, 0, r->dims[m] * R * sizeof *out);
    const int64_t n = (int64_t)r->rows[m];
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < n; k++) {
        uint64_t i = orig ? orig[k] : (uint64_t)k;
        memcpy(out + i * R, r->A[m] + (uint64_t)k * R, R * sizeof *out);
    }
    return AMPED_OK;
}

void amped_result_fits(const amped_result *r, double *fits)
{
    for (unsigned i = 0; i < r->iters && r->recs != NULL; i++)
        fits[i] = r->recs[i][S_FIT];
}

const char *amped_result_method(const amped_result *r)
{
    return amp_method_name(r->method);
}

/* The kind of run r is, for the series. */
static int result_kind(const amped_result *r)
{
    return r->method == AMP_METHOD_APR ? KIND_APR
           : r->method == AMP_METHOD_GCP ? KIND_GCP
           : r->completion ? KIND_COMPLETION
                           : KIND_ALL;
}

amped_status amped_result_series(const amped_result *r, const char *name, double *out)
{
    if (r == NULL || name == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_result_series: a NULL argument");
    int which = -1;
    for (int k = 0; k < NSERIES; k++)
        if (strcmp(name, series_names[k]) == 0)
            which = k;
    if (which < 0)
        return fail_msg(AMPED_ERR_USAGE, "no series '%s': fit, delta, seconds; loglik, kkt, "
                        "inner (cp-apr); rmse_train, rmse_test (observed nonzeros); loss, "
                        "loss_stderr, loss_exact, rate, failed (gcp)", name);
    int kind = series_kind(which);
    if (kind != KIND_ALL && kind != result_kind(r))
        return fail_msg(AMPED_ERR_UNSUPPORTED, "series '%s' is %s's, and this run was %s%s",
                        name, kind == KIND_APR ? "method cp-apr"
                              : kind == KIND_GCP ? "method gcp" : "observed nonzeros",
                        amp_method_name(r->method), r->completion ? ", observed nonzeros" : "");
    if (out != NULL)
        for (unsigned i = 0; i < r->iters && r->recs != NULL; i++)
            out[i] = r->recs[i][which];
    return AMPED_OK;
}

amped_status amped_result_completion(const amped_result *r, uint64_t *n_train,
                                     uint64_t *n_test, uint64_t *unobserved,
                                     uint64_t *singular)
{
    if (r == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_result_completion: a NULL argument");
    if (!r->completion)
        return fail_msg(AMPED_ERR_UNSUPPORTED, "the run fitted every cell (observed all): "
                        "no training and test entries");
    if (n_train)
        *n_train = r->n_train;
    if (n_test)
        *n_test = r->n_test;
    if (unobserved)
        memcpy(unobserved, r->unobserved, r->nmodes * sizeof *unobserved);
    if (singular)
        memcpy(singular, r->singular, r->nmodes * sizeof *singular);
    return AMPED_OK;
}

void amped_result_times(const amped_result *r, double *seconds)
{
    memcpy(seconds, r->times, sizeof r->times);
}

const char *amped_time_name(int which)
{
    static const char *const names[AMPED_NTIMES] = {
        "load", "upload", "start", "mttkrp", "gram", "solve", "update", "normalize", "fit",
        "comm", "total"};
    return which >= 0 && which < AMPED_NTIMES ? names[which] : "";
}

const char *amped_result_backend(const amped_result *r)
{
    return r->backend;
}

const char *amped_result_device(const amped_result *r)
{
    return r->device;
}

unsigned amped_result_gpus(const amped_result *r)
{
    return r->ngpus;
}

/* ---- several models: starts and ranks ---------------------------------------- */

struct amped_sweep {
    unsigned nmodels, nranks;
    amped_result **models;
    uint64_t *seeds;
    double *fms;
    amped_rank_summary *rows;
    int pick;                  /* index into rows, or -1 */
    char why[512];
    int stopped;
    unsigned passes;
    double seconds, mttkrp_seconds;
};

void amped_sweep_free(amped_sweep *w)
{
    if (w == NULL)
        return;
    for (unsigned k = 0; w->models && k < w->nmodels; k++)
        amped_result_free(w->models[k]);
    free(w->models);
    free(w->seeds);
    free(w->fms);
    free(w->rows);
    free(w);
}

/* What the batch's callback needs: the caller's callback, each model's
 * iterations and its rank. */
typedef struct sweep_ctx {
    run_ctx *x;                /* the caller's callback, the stop */
    run_ctx *models;           /* one a model: its iterations */
    const amp_starts_result *res;
} sweep_ctx;

static void on_model_iter(void *ctx, unsigned model, unsigned iter, double fit, double delta,
                          double seconds)
{
    sweep_ctx *w = ctx;
    run_ctx *m = &w->models[model];
    if (!add_rec(m, fit, delta, seconds)) {
        w->x->nomem = 1;
        w->x->stop = 1;
        return;
    }
    if (w->x->fn) {
        amped_progress p = {.phase = "iteration", .done = iter, .iter = iter, .fit = fit,
                            .delta = delta, .seconds = seconds, .model = model,
                            .rank = w->res->models[model].rank};
        if (w->x->fn(w->x->ctx, &p))
            w->x->stop = 1;
    }
}

/* The batch res into a new sweep, each model a result of its own. */
static amped_status take_sweep(const amp_starts_result *res, const amp_tensor *t,
                               const amp_cpd_opts *o, run_ctx *models, amped_sweep **out)
{
    amped_sweep *w = calloc(1, sizeof *w);
    if (w == NULL)
        return fail_msg(AMPED_ERR_NOMEM, "out of memory");
    w->nmodels = res->nmodels;
    w->nranks = res->nranks;
    w->models = calloc(res->nmodels, sizeof *w->models);
    w->seeds = calloc(res->nmodels, sizeof *w->seeds);
    w->fms = calloc(res->nmodels, sizeof *w->fms);
    w->rows = calloc(res->nranks, sizeof *w->rows);
    if (w->models == NULL || w->seeds == NULL || w->fms == NULL || w->rows == NULL) {
        amped_sweep_free(w);
        return fail_msg(AMPED_ERR_NOMEM, "out of memory");
    }
    for (unsigned k = 0; k < res->nmodels; k++) {
        const amp_starts_model *m = &res->models[k];
        iter_rec *recs = models[k].recs;
        models[k].recs = NULL;
        amped_status st = make_result(&m->c, t, o, recs, &w->models[k]);
        if (st != AMPED_OK) {
            amped_sweep_free(w);
            return st;
        }
        w->models[k]->times[AMPED_TIME_MTTKRP] = m->c.seconds[AMP_PHASE_MTTKRP];
        w->models[k]->times[AMPED_TIME_GRAM] = m->c.seconds[AMP_PHASE_GRAM];
        w->models[k]->times[AMPED_TIME_SOLVE] = m->c.seconds[AMP_PHASE_SOLVE];
        w->models[k]->times[AMPED_TIME_UPDATE] = m->c.seconds[AMP_PHASE_UPDATE];
        w->models[k]->times[AMPED_TIME_NORMALIZE] = m->c.seconds[AMP_PHASE_NORMALIZE];
        w->models[k]->times[AMPED_TIME_FIT] = m->c.seconds[AMP_PHASE_FIT];
        w->seeds[k] = m->seed;
        w->fms[k] = m->fms;
    }
    for (unsigned i = 0; i < res->nranks; i++) {
        const amp_starts_rank *r = &res->rows[i];
        w->rows[i] = (amped_rank_summary){.rank = r->rank, .best_model = r->best,
                                          .best_fit = r->best_fit, .worst_fit = r->worst_fit,
                                          .fms_min = r->fms_min, .fms_median = r->fms_median};
    }
    w->pick = res->pick;
    snprintf(w->why, sizeof w->why, "%s", res->why);
    w->stopped = res->stopped;
    w->passes = res->passes;
    w->seconds = res->seconds;
    w->mttkrp_seconds = res->mttkrp_seconds;
    *out = w;
    return AMPED_OK;
}

amped_status amped_cp_sweep(const amped_tensor *t, const amped_options *o,
                            amped_progress_fn progress, void *ctx, amped_sweep **out)
{
    if (t == NULL || out == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_cp_sweep: a NULL argument");
    *out = NULL;
    amp_run_opts r;
    amped_status st = run_options(o, 1, &r);
    if (st != AMPED_OK)
        return st;
    amp_starts_opts so;
    if (o != NULL)
        so = o->starts;
    else
        memset(&so, 0, sizeof so);
    int threads = o ? o->threads : 0;
    amp_error err = {0};
    run_ctx x = {.fn = progress, .ctx = ctx};
    r.opts.threads = threads;
    r.opts.stop = &x.stop;
    amp_session s;
    memset(&s, 0, sizeof s);
    s.threads = amp_thread_count(threads);
    int prev = amp_max_threads();
    amp_set_threads(threads);
    amp_starts_result res;
    memset(&res, 0, sizeof res);
    const unsigned nm = (so.nranks ? so.nranks : 1) * (so.starts ? so.starts : 1);
    run_ctx *models = calloc(nm, sizeof *models);
    /* gpus 1 (amp_starts_check): the GPU opened (its memory planned) for
     * the widest batch of models, as amped-run opens it; the rank itself
     * is the option's again once loaded. */
    const unsigned rank = r.opts.rank;
    if (r.gpus != 0) {
        amp_gpu_prepare_process((unsigned)r.gpus);
        r.opts.rank = amp_starts_width(&so, rank, AMP_GPU_MAX_RANK);
        r.gpu.batch = 1;
    }
    double seconds_open = 0;
    amp_status rc = models == NULL ? AMP_FAIL(&err, AMP_ERR_NOMEM, "out of memory")
                                   : open_session(&s, &r, t->path, &x, 0, &seconds_open, &err);
    r.opts.rank = rank;
    sweep_ctx w = {&x, models, &res};
    if (rc == AMP_OK)
        rc = amp_starts_fit(&so, &s.t, &r.opts, s.gr, r.value_exp, on_model_iter, &w, &res,
                            &err);
    if (rc == AMP_OK && x.nomem)
        rc = AMP_FAIL(&err, AMP_ERR_NOMEM, "out of memory for the fits");
    st = rc == AMP_OK ? take_sweep(&res, &s.t, &r.opts, models, out) : fail(&err);
    if (st == AMPED_OK && s.gr) {
        amp_gpu_info in;
        amp_gpu_run_info(s.gr, 0, &in);
        for (unsigned k = 0; k < (*out)->nmodels; k++) {
            amped_result *m = (*out)->models[k];
            snprintf(m->backend, sizeof m->backend, "gpu");
            snprintf(m->device, sizeof m->device, "%s", in.name ? in.name : "");
            m->ngpus = 1;
        }
    }
    for (unsigned k = 0; models && k < nm; k++)
        free(models[k].recs);
    free(models);
    amp_starts_free(&res);
    amp_session_close(&s);
    amp_set_threads(prev);
    return st;
}

unsigned amped_sweep_models(const amped_sweep *w)
{
    return w->nmodels;
}

const amped_result *amped_sweep_model(const amped_sweep *w, unsigned k)
{
    return k < w->nmodels ? w->models[k] : NULL;
}

uint64_t amped_sweep_seed(const amped_sweep *w, unsigned k)
{
    return k < w->nmodels ? w->seeds[k] : 0;
}

double amped_sweep_fms(const amped_sweep *w, unsigned k)
{
    return k < w->nmodels ? w->fms[k] : NAN;
}

unsigned amped_sweep_ranks(const amped_sweep *w)
{
    return w->nranks;
}

amped_status amped_sweep_rank(const amped_sweep *w, unsigned i, amped_rank_summary *out)
{
    if (w == NULL || out == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_sweep_rank: a NULL argument");
    if (i >= w->nranks)
        return fail_msg(AMPED_ERR_USAGE, "rank row %u: the sweep has rows 0 to %u", i,
                        w->nranks - 1);
    *out = w->rows[i];
    return AMPED_OK;
}

unsigned amped_sweep_chosen(const amped_sweep *w, const char **reason)
{
    if (reason)
        *reason = w->why;
    return w->pick >= 0 ? w->rows[w->pick].rank : 0;
}

int amped_sweep_stopped(const amped_sweep *w)
{
    return w->stopped;
}

double amped_sweep_seconds(const amped_sweep *w)
{
    return w->seconds;
}

/* ---- devices ------------------------------------------------------------------ */

int amped_device_count(void)
{
#ifdef AMP_HAVE_CUDA
    int count = 0;
    amp_error err = {0};
    if (amp_cuda_device_count(&count, &err) != AMP_OK)
        return 0;
    return count;
#else
    return 0;
#endif
}

amped_status amped_device_get(int ordinal, amped_device *out)
{
    if (out == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_device_get: a NULL argument");
#ifdef AMP_HAVE_CUDA
    amp_cuda_device d;
    amp_error err = {0};
    if (amp_cuda_describe_device(ordinal, &d, &err) != AMP_OK)
        return fail(&err);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", d.name);
    out->ordinal = d.ordinal;
    out->cc_major = d.cc_major;
    out->cc_minor = d.cc_minor;
    out->sm_count = d.sm_count;
    out->total_memory = d.total_memory;
    out->free_memory = d.free_memory;
    return AMPED_OK;
#else
    (void)ordinal;
    return fail_msg(AMPED_ERR_NO_DEVICE, "this build has no CUDA backend");
#endif
}
