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

/* t (consumed) built into a memfd, as amped-prep would write it. */
static amped_status build_memfd(amp_coo *t, const amp_build_opts *b, amp_dup_policy dup,
                                int threads, amped_tensor **out)
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
    if (amp_build_write(t, path, &o, &rep, &err) != AMP_OK) {
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
    amp_error err = {0};
    amp_coo t;
    int prev = amp_max_threads();
    amp_set_threads(d.threads);
    amp_status rc = amp_coo_from_arrays(&a, &t, &err);
    uint64_t repeats = 0;
    if (rc == AMP_OK)
        rc = amp_coo_dedup(&t, dup, "the arrays", coo->index_base, &repeats, &err);
    if (rc != AMP_OK) {
        amp_coo_free(&t);
        amp_set_threads(prev);
        return fail(&err);
    }
    st = build_memfd(&t, &b, dup, d.threads, out);
    amp_coo_free(&t);
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
    st = build_memfd(&t, &b, dup, d.threads, out);
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
    case AMP_OPT_LIST_DEVICES:
    case AMP_OPT_STARTS: case AMP_OPT_RANKS: case AMP_OPT_KEEP_ALL: case AMP_OPT_CHOOSE:
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
    if (amp_run_option(&o->r, opt->val, copy, &taken, &err) != AMP_OK)
        return fail(&err);
    if (!taken)
        return fail_msg(AMPED_ERR_INTERNAL, "option '%s' was not taken", name);
    return AMPED_OK;
}

/* ---- the decomposition ------------------------------------------------------ */

struct amped_result {
    unsigned nmodes, rank, iters, ngpus;
    int converged, stopped;
    double fit;
    uint64_t dims[AMP_MAX_MODES], rows[AMP_MAX_MODES];
    double *A[AMP_MAX_MODES];          /* rows[m] x rank, compact rows */
    uint64_t *new_to_orig[AMP_MAX_MODES];
    double *lambda, *fits;
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
    free(r->fits);
    free(r);
}

/* What the session's callbacks need: the caller's callback, and the fits. */
typedef struct run_ctx {
    amped_progress_fn fn;
    void *ctx;
    const char *phase;
    volatile int stop;
    double *fits;
    unsigned nfits, cap;
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

static void on_iter(void *ctx, unsigned iter, double fit, double delta, double seconds)
{
    run_ctx *x = ctx;
    if (x->nfits == x->cap) {
        unsigned cap = x->cap ? 2 * x->cap : 64;
        double *f = realloc(x->fits, cap * sizeof *f);
        if (f == NULL) {
            x->nomem = 1;
            x->stop = 1;
            return;
        }
        x->fits = f;
        x->cap = cap;
    }
    x->fits[x->nfits++] = fit;
    if (x->fn) {
        amped_progress p = {.phase = "iteration", .done = iter, .iter = iter, .fit = fit,
                            .delta = delta, .seconds = seconds};
        if (x->fn(x->ctx, &p))
            x->stop = 1;
    }
}

/* The model of s, with its rows' original indices, into a new result. */
static amped_status take_model(const amp_session *s, run_ctx *x, double t_start,
                               amped_result **out)
{
    const amp_cpd *c = &s->c;
    const amp_tensor *t = &s->t;
    amped_result *res = calloc(1, sizeof *res);
    if (res == NULL)
        return fail_msg(AMPED_ERR_NOMEM, "out of memory");
    res->nmodes = c->nmodes;
    res->rank = c->rank;
    res->iters = c->iters;
    res->fit = c->fit;
    res->converged = c->converged;
    res->stopped = c->stopped;
    res->lambda = malloc(c->rank * sizeof *res->lambda);
    res->fits = x->fits;
    x->fits = NULL;
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
    } else {
        snprintf(res->backend, sizeof res->backend, "cpu");
    }
    *out = res;
    return AMPED_OK;
}

amped_status amped_cp(const amped_tensor *t, const amped_options *o,
                      amped_progress_fn progress, void *ctx, amped_result **out)
{
    if (t == NULL || out == NULL)
        return fail_msg(AMPED_ERR_USAGE, "amped_cp: a NULL argument");
    *out = NULL;
    double t_start = amp_now();
    amp_run_opts r;
    if (o != NULL)
        r = o->r;
    else
        amp_run_opts_init(&r);
    int threads = o ? o->threads : 0;
    amp_error err = {0};
    if (amp_run_opts_check(&r, &err) != AMP_OK)
        return fail(&err);
    run_ctx x = {.fn = progress, .ctx = ctx};
    r.opts.threads = threads;
    r.opts.on_iter = on_iter;
    r.opts.ctx = &x;
    r.opts.stop = &x.stop;
    amp_session s;
    memset(&s, 0, sizeof s);
    s.threads = amp_thread_count(threads);
    int prev = amp_max_threads();
    amp_set_threads(threads);
    /* Several GPUs in one process need CUDA's kernels loaded eagerly
     * (amp_gpu_prepare_process); once CUDA has started in this process,
     * that is as it is. */
    amp_gpu_prepare_process(r.gpus != AMP_GPUS_AUTO ? (unsigned)r.gpus
                                                    : amp_gpu_count_unstarted());
    amp_session_progress p = {on_phase, on_progress, &x};
    amped_status st = AMPED_OK;
    double t_open = amp_now();
    amp_status rc = amp_session_open(&s, &r, t->path, &err);
    double seconds_open = amp_now() - t_open;
    if (rc == AMP_OK)
        rc = amp_session_load(&s, &r, t->path, &p, &err);
    if (rc == AMP_OK)
        rc = amp_session_scale(&s, &r, &err);
    if (rc == AMP_OK)
        rc = amp_session_start(&s, &r, &err);
    if (rc == AMP_OK)
        rc = amp_session_als(&s, &r, &err);
    if (rc == AMP_OK && x.nomem)
        rc = AMP_FAIL(&err, AMP_ERR_NOMEM, "out of memory for the fits");
    if (rc == AMP_OK) {
        amp_session_unscale(&s, &r);
        s.seconds_load += seconds_open;   /* as amped-run counts it: the file's tables too */
        st = take_model(&s, &x, t_start, out);
    } else {
        st = fail(&err);
    }
    free(x.fits);
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
    if (r->iters > 0 && r->fits != NULL)
        memcpy(fits, r->fits, r->iters * sizeof *fits);
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
