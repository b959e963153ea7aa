/* Helpers shared by the tests of the solver backends (CPU and GPU):
 * random tensors, an .amp file built and loaded back, error measures. */
#ifndef AMP_CPD_UTIL_H
#define AMP_CPD_UTIL_H

#include <dirent.h>
#include <math.h>

#include "amp_build.h"
#include "amp_cpu.h"
#include "cp_ref.h"
#include "tap.h"
#include "test_util.h"

typedef struct shape {
    const char *name;
    unsigned nmodes;
    uint64_t dims[8];
    uint64_t nnz;
    int skew;
} shape;

static inline void random_tensor(const shape *s, uint64_t seed, amp_coo *t)
{
    amp_error err = {0};
    if (amp_coo_init(t, s->nmodes, &err) || amp_coo_reserve(t, s->nnz, &err))
        exit(99);
    for (unsigned m = 0; m < s->nmodes; m++)
        t->dims[m] = s->dims[m];
    for (uint64_t k = 0; k < s->nnz; k++) {
        for (unsigned m = 0; m < s->nmodes; m++) {
            uint64_t r = rng_next(&seed);
            if (s->skew) {
                double u = (double)(r >> 11) / 9007199254740992.0;
                t->ind[m][k] = (uint64_t)((double)s->dims[m] * u * u * u * u);
                if (t->ind[m][k] >= s->dims[m])
                    t->ind[m][k] = s->dims[m] - 1;
            } else {
                t->ind[m][k] = r % s->dims[m];
            }
        }
        t->val[k] = (double)(rng_next(&seed) >> 11) / 9007199254740992.0 - 0.25;
    }
    t->nnz = s->nnz;
}

static inline void copy_tensor(const amp_coo *a, amp_coo *b)
{
    amp_error err = {0};
    if (amp_coo_init(b, a->nmodes, &err) || amp_coo_reserve(b, a->nnz ? a->nnz : 1, &err))
        exit(99);
    for (unsigned m = 0; m < a->nmodes; m++) {
        b->dims[m] = a->dims[m];
        memcpy(b->ind[m], a->ind[m], a->nnz * 8);
    }
    memcpy(b->val, a->val, a->nnz * 8);
    b->nnz = a->nnz;
}

/* Write t (kept) as an .amp file built with o and load it back; with
 * keep, the file stays open there (the copies' shard tables point into
 * it). */
static inline int prepare_with(const amp_coo *t, const char *name, const amp_build_opts *o,
                               amp_tensor *out, amp_file **keep)
{
    amp_coo work;
    amp_error err = {0};
    amp_file *f = NULL;
    copy_tensor(t, &work);
    const char *path = test_path(name);
    amp_status rc = amp_build_write(&work, path, o, NULL, &err);
    amp_coo_free(&work);
    if (rc == AMP_OK)
        rc = amp_file_open(path, &f, &err);
    if (rc == AMP_OK)
        rc = amp_tensor_load(f, 0, NULL, NULL, out, &err);
    if (keep && rc == AMP_OK)
        *keep = f;
    else
        amp_file_close(f);
    if (rc != AMP_OK)
        diag("%s: %s", name, amp_error_message(&err));
    return rc == AMP_OK;
}

/* prepare_with the default options but for shards and chunk_nnz. */
static inline int prepare_open(const amp_coo *t, const char *name, uint32_t shards,
                               uint64_t chunk_nnz, amp_tensor *out, amp_file **keep)
{
    amp_build_opts o;
    amp_build_opts_init(&o);
    o.shards = shards;
    o.chunk_nnz = chunk_nnz;
    return prepare_with(t, name, &o, out, keep);
}

static inline int prepare(const amp_coo *t, const char *name, uint32_t shards, uint64_t chunk_nnz,
                          amp_tensor *out)
{
    return prepare_open(t, name, shards, chunk_nnz, out, NULL);
}

/* What amp_gpu_run_open announced and reported (amp_gpu_opts.phase and
 * .progress, ctx an open_log): the phases in order, and the last
 * progress of the last one. */
typedef struct open_log {
    char phases[256];
    uint64_t done, total;
} open_log;

static inline void open_log_phase(void *ctx, const char *phase, const char *unit, uint64_t total)
{
    open_log *l = ctx;
    (void)unit;
    size_t at = strlen(l->phases);
    snprintf(l->phases + at, sizeof l->phases - at, "%s%s", at ? "," : "", phase);
    l->done = 0;
    l->total = total;
}

static inline void open_log_progress(void *ctx, uint64_t done, uint64_t total)
{
    open_log *l = ctx;
    l->done = done;
    l->total = total ? total : l->total;
}

/* ---- files with and without REMAP sections (the remap tests) ---------- */

/* x with each coordinate once (repeats summed): computed positions then
 * pair nonzeros as the file's REMAP sections do. */
static inline void coo_unique(amp_coo *x, const char *name)
{
    amp_error err = {0};
    uint64_t dup;
    if (amp_coo_dedup(x, AMP_DUP_SUM, name, 1, &dup, &err) != AMP_OK)
        exit(99);
}

/* The tensor of $AMP_TEST_DATA at path read, each coordinate once; where
 * it does not read, a failed test and skip(skips), and 0. */
static inline int read_unique(const char *path, const char *name, amp_coo *x, int skips)
{
    amp_read_opts ro;
    amp_read_opts_init(&ro);
    amp_error err = {0};
    if (amp_read_tensor(path, &ro, x, NULL, &err) != AMP_OK) {
        ok(0, "%s: read (%s)", name, amp_error_message(&err));
        skip(skips, "not read");
        return 0;
    }
    coo_unique(x, name);
    return 1;
}

/* Called on one file of each_remap_file: label names it, with_streams
 * says whether it has REMAP sections. */
typedef void (*remap_file_fn)(const char *label, const amp_file *f, const amp_tensor *t,
                              int with_streams);

/* x (kept) written in `shards` shards and chunks of chunk_nnz, values f64
 * or f32, without REMAP sections and then with them (--remap-streams),
 * each loaded back and given to fn, which runs `checks` tests; a file
 * that does not prepare is a failed test and skip(checks - 1). */
static inline void each_remap_file(const amp_coo *x, const char *name, uint32_t shards,
                                   uint64_t chunk_nnz, int f32, int checks, remap_file_fn fn)
{
    for (int streams = 0; streams < 2; streams++) {
        amp_build_opts o;
        amp_file *f = NULL;
        amp_tensor t;
        char label[256];
        amp_build_opts_init(&o);
        o.shards = shards;
        o.chunk_nnz = chunk_nnz;
        o.remap_streams = streams;
        o.values = f32 ? AMP_VALUE_F32 : AMP_VALUE_F64;
        snprintf(label, sizeof label, "%s%s, %s", name, f32 ? " (f32 values)" : "",
                 streams ? "with REMAP" : "without REMAP");
        if (!prepare_with(x, "remap.amp", &o, &t, &f)) {
            ok(0, "%s: prepared and loaded", label);
            skip(checks - 1, "no file");
            continue;
        }
        fn(label, f, &t, streams);
        amp_tensor_free(&t);
        amp_file_close(f);
    }
}

/* The remap tests' random tensors, each with and without REMAP sections
 * (each_remap_file; fn runs `checks` tests a file): 3 to 6 modes, skewed
 * and not, in small shards and chunks (rows cross chunks, keyed copies
 * get many blocks); the 5 and 6 fields of up to 13 bits (their
 * nonempty indices) of two make keyed copies, over 64 index bits, and the
 * 6-mode one is written again with f32 values. REMAP_RANDOM_FILES files
 * in all. */
#define REMAP_RANDOM_FILES 16
static inline void each_remap_random(int checks, remap_file_fn fn)
{
    static const shape shapes[] = {
        {"3 modes", 3, {300, 200, 100}, 5000, 0},
        {"3 modes, skewed", 3, {2000, 500, 40}, 8000, 1},
        {"4 modes", 4, {60, 50, 40, 30}, 6000, 0},
        {"5 modes, skewed", 5, {500, 400, 300, 200, 100}, 7000, 1},
        /* 5 x 13 bits of compact indices: keyed, and within the fused
         * MTTKRP's modes (test_gpu_remap). */
        {"5 modes, keyed", 5, {1000000, 1000000, 1000000, 1000000, 1000000}, 5000, 0},
        {"6 modes, keyed", 6, {1000000, 1000000, 1000000, 1000000, 1000000, 1000000}, 5000,
         0},
        {"6 modes, skewed", 6, {90, 80, 70, 60, 50, 40}, 9000, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        amp_coo x;
        random_tensor(&shapes[i], 300 + i, &x);
        coo_unique(&x, shapes[i].name);
        each_remap_file(&x, shapes[i].name, 5, 97, 0, checks, fn);
        if (i == 5)   /* the 6-mode keyed one, f32 values too */
            each_remap_file(&x, shapes[i].name, 7, 500, 1, checks, fn);
        amp_coo_free(&x);
    }
}

/* A tensor of $AMP_TEST_DATA read from path and prepared as amp_name in
 * 16 shards and chunks of 4096 (rows cross chunk boundaries); with keep,
 * the file stays open there. x and t are the caller's to free on success;
 * on failure nothing is left and a diag line says why. */
static inline int read_prepared(const char *path, const char *amp_name, amp_coo *x,
                                amp_tensor *t, amp_file **keep)
{
    amp_read_opts ro;
    amp_read_opts_init(&ro);
    amp_error err = {0};
    if (amp_read_tensor(path, &ro, x, NULL, &err) != AMP_OK) {
        diag("%s: %s", path, amp_error_message(&err));
        return 0;
    }
    if (!prepare_open(x, amp_name, 16, 4096, t, keep)) {
        amp_coo_free(x);
        return 0;
    }
    return 1;
}

/* Largest entry error over largest reference entry; NaN when any entry of
 * a or b is NaN (a plain max would skip it: every comparison with NaN is
 * false). */
static inline double rel_diff(const double *a, const double *b, uint64_t n)
{
    double diff = 0, scale = 0;
    for (uint64_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]);
        if (isnan(e))
            return NAN;
        diff = e > diff ? e : diff;
        scale = fabs(b[i]) > scale ? fabs(b[i]) : scale;
    }
    return scale > 0 ? diff / scale : diff;
}

/* The larger (smaller) of a and b, NaN when either is: fmax and fmin
 * return the other argument for a NaN, so a running fmax or fmin skips
 * NaN entries, and a check of the result passes on them. */
static inline double max_or_nan(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : fmax(a, b);
}

static inline double min_or_nan(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : fmin(a, b);
}

/* path gets $AMP_TEST_DATA/name. 0 where no such file is there, after the
 * n tests of it said SKIP with the reason, or, under CI (CI=true, where the
 * data always is), one of them failed and the rest said SKIP. A file that
 * is there but does not read is the caller's failure, never a skip. */
static inline int shared_tensor(const char *name, char *path, size_t size, int n)
{
    const char *dir = getenv("AMP_TEST_DATA"), *ci = getenv("CI");
    snprintf(path, size, "%s/%s", dir ? dir : ".", name);
    if (access(path, F_OK) == 0)
        return 1;
    char why[600];
    snprintf(why, sizeof why, "no %s in AMP_TEST_DATA=%s", name, dir ? dir : "(unset)");
    if (ci != NULL && strcmp(ci, "true") == 0) {
        tap_ok(0, __FILE__, __LINE__, "%s (CI=true needs ../shared/data)", why);
        n--;
    }
    skip(n, why);
    return 0;
}

static inline double *random_matrix(uint64_t rows, unsigned R, uint64_t seed)
{
    double *A = malloc((rows * R + 1) * sizeof *A);
    for (uint64_t i = 0; i < rows * R; i++)
        A[i] = (double)(rng_next(&seed) >> 11) / 9007199254740992.0 - 0.3;
    return A;
}

/* fn(path, file name, ctx) for every .tns in $AMP_TEST_DATA (fn NULL:
 * only count them); returns how many there are. */
static inline int for_each_shared_tensor(void (*fn)(const char *path, const char *name, void *ctx),
                                         void *ctx)
{
    const char *dir = getenv("AMP_TEST_DATA");
    DIR *dp = dir ? opendir(dir) : NULL;
    struct dirent *e;
    int n = 0;
    while (dp && (e = readdir(dp)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".tns") != 0)
            continue;
        n++;
        if (fn) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            fn(path, e->d_name, ctx);
        }
    }
    if (dp)
        closedir(dp);
    return n;
}

/* The largest normwise difference of lambda and every factor of a from
 * b's (a's rank); NaN when any entry is. */
static inline double cpd_diff(const amp_tensor *t, const amp_cpd *a, const amp_cpd *b)
{
    const unsigned R = a->rank;
    double worst = rel_diff(a->lambda, b->lambda, R);
    for (unsigned m = 0; m < t->nmodes; m++) {
        double e = rel_diff(a->A[m], b->A[m], t->rows[m] * R);
        worst = e > worst || isnan(e) ? e : worst;
    }
    return worst;
}

/* ---- fit sequences against the textbook CP-ALS (cp_ref.h) -------------- */

#define FIT_LOG_MAX 64
typedef struct fit_log {
    unsigned n;
    double fit[FIT_LOG_MAX];
} fit_log;

/* The largest |a - b| over the first n fits of two logs (NaN if any is). */
static inline double fits_gap(const fit_log *a, const fit_log *b, unsigned n)
{
    double gap = 0;
    for (unsigned i = 0; i < n; i++) {
        double e = fabs(a->fit[i] - b->fit[i]);
        gap = e > gap || isnan(e) ? e : gap;
    }
    return gap;
}

/* An amp_cpd_opts.on_iter that keeps every fit (ctx: a fit_log). */
static inline void fit_log_add(void *ctx, unsigned iter, double fit, double delta,
                               double seconds)
{
    fit_log *l = ctx;
    (void)delta, (void)seconds;
    if (iter == l->n + 1 && l->n < FIT_LOG_MAX)
        l->fit[l->n++] = fit;
}

/* How far a backend's run strays from the textbook CP-ALS on x from the
 * start A (dims[m] x R each, in the original index space; changed, and
 * freed with the rest): *fit_gap the largest |fit - reference| over the
 * `log`'s iterations (it must hold `iters`), *factor_gap the largest
 * normwise difference of lambda and the factors (the nonempty rows, in
 * the original index space) after the last. 0 when the reference fails
 * (a singular V) or the log is short. */
static inline int compare_from_start(const cp_ref_tensor *x, const amp_tensor *t, unsigned R,
                                     unsigned iters, const fit_log *log, const amp_cpd *end,
                                     double **A, double *fit_gap, double *factor_gap)
{
    const unsigned N = t->nmodes;
    double lambda[AMP_GPU_MAX_RANK], fits[FIT_LOG_MAX];
    *fit_gap = *factor_gap = NAN;
    int good = log->n == iters && iters <= FIT_LOG_MAX && R <= AMP_GPU_MAX_RANK;
    for (unsigned m = 0; m < N; m++)
        good = good && A[m] != NULL;
    good = good && cp_ref_als(x, R, iters, A, lambda, fits);
    if (good) {
        *fit_gap = 0;
        for (unsigned i = 0; i < iters; i++) {
            double e = fabs(log->fit[i] - fits[i]);
            *fit_gap = e > *fit_gap || isnan(e) ? e : *fit_gap;
        }
        *factor_gap = rel_diff(end->lambda, lambda, R);
        for (unsigned m = 0; m < N; m++) {
            double diff = 0, scale = 0;
            for (uint64_t i = 0; i < t->rows[m]; i++)
                for (unsigned r = 0; r < R; r++) {
                    double want = A[m][t->new_to_orig[m][i] * R + r];
                    double e = fabs(end->A[m][i * R + r] - want);
                    diff = e > diff || isnan(e) ? e : diff;
                    scale = fmax(scale, fabs(want));
                }
            double e = scale > 0 ? diff / scale : diff;
            *factor_gap = e > *factor_gap || isnan(e) ? e : *factor_gap;
        }
        if (isnan(*factor_gap) || isnan(*fit_gap))
            good = 0;
    }
    for (unsigned m = 0; m < N; m++)
        free(A[m]);
    return good;
}

/* compare_from_start from amp_cpd_init_random(t, R, seed): its rows in
 * the original index space, those of slices the file dropped as empty
 * zero (amped has none for them). */
static inline int compare_with_ref(const cp_ref_tensor *x, const amp_tensor *t, unsigned R,
                                   uint64_t seed, unsigned iters, const fit_log *log,
                                   const amp_cpd *end, double *fit_gap, double *factor_gap)
{
    const unsigned N = t->nmodes;
    amp_cpd start;
    amp_error err = {0};
    double *A[CP_REF_MAX_MODES] = {0};
    *fit_gap = *factor_gap = NAN;
    if (amp_cpd_init_random(t, R, seed, &start, &err) != AMP_OK)
        return 0;
    for (unsigned m = 0; m < N; m++) {
        A[m] = calloc(t->dims[m] * R + 1, sizeof *A[m]);
        for (uint64_t i = 0; A[m] && i < t->rows[m]; i++)
            memcpy(A[m] + t->new_to_orig[m][i] * R, start.A[m] + i * R, R * sizeof *A[m]);
    }
    amp_cpd_free(&start);
    return compare_from_start(x, t, R, iters, log, end, A, fit_gap, factor_gap);
}

/* After a run from A (init: a start with a value in every row) or from
 * amp_cpd_init_random(t, R, seed) (A unused): compare_from_start or
 * compare_with_ref; where the run failed (okay 0), A is only freed. */
static inline int compare_after_run(const cp_ref_tensor *x, const amp_tensor *t, unsigned R,
                                    uint64_t seed, unsigned iters, int okay, int init,
                                    const fit_log *log, const amp_cpd *end, double **A,
                                    double *fit_gap, double *factor_gap)
{
    if (okay && init)
        return compare_from_start(x, t, R, iters, log, end, A, fit_gap, factor_gap);
    if (okay)
        return compare_with_ref(x, t, R, seed, iters, log, end, fit_gap, factor_gap);
    for (unsigned m = 0; m < CP_REF_MAX_MODES; m++) {
        free(A[m]);
        A[m] = NULL;
    }
    return 0;
}

/* A start as a user brings one from another program (--init): a value in
 * every row of every mode, those of slices the file dropped as empty
 * included, uniform in [0, 1) from seed, and lambda 1 + r / R; written to
 * test_path(name).modeN.mat and .lambda.mat (%.17g, which reads back
 * exactly) and read into *c by amp_factors_read. A[m] gets the same start
 * for compare_from_start (dims[m] x R, lambda folded into the last mode
 * as amped folds it); *dropped the rows of dropped slices that are in it.
 * 0 on failure (a diag line says why), with nothing left. */
static inline int full_start(const amp_tensor *t, unsigned R, uint64_t seed, const char *name,
                             amp_cpd *c, double **A, uint64_t *dropped)
{
    const unsigned N = t->nmodes;
    char prefix[600], path[700];
    snprintf(prefix, sizeof prefix, "%s", test_path(name));
    *dropped = 0;
    for (unsigned m = 0; m < N; m++)
        A[m] = NULL;
    int good = R <= AMP_GPU_MAX_RANK;
    for (unsigned m = 0; m < N && good; m++) {
        *dropped += t->dims[m] - t->rows[m];
        A[m] = malloc((t->dims[m] * R + 1) * sizeof *A[m]);
        snprintf(path, sizeof path, "%s.mode%u.mat", prefix, m + 1);
        FILE *fp = A[m] ? fopen(path, "w") : NULL;
        good = fp != NULL;
        for (uint64_t k = 0; good && k < t->dims[m] * R; k++) {
            A[m][k] = (double)(rng_next(&seed) >> 11) * 0x1.0p-53;
            fprintf(fp, "%.17g%c", A[m][k], (k + 1) % R ? ' ' : '\n');
        }
        if (fp && fclose(fp) != 0)
            good = 0;
    }
    double lambda[AMP_GPU_MAX_RANK];
    snprintf(path, sizeof path, "%s.lambda.mat", prefix);
    FILE *fp = good ? fopen(path, "w") : NULL;
    good = fp != NULL;
    for (unsigned r = 0; good && r < R; r++) {
        lambda[r] = 1 + (double)r / R;
        fprintf(fp, "%.17g\n", lambda[r]);
    }
    if (fp && fclose(fp) != 0)
        good = 0;
    for (uint64_t k = 0; good && k < t->dims[N - 1] * R; k++)
        A[N - 1][k] *= lambda[k % R];
    amp_error err = {0};
    if (good && amp_factors_read(t, prefix, R, c, &err) != AMP_OK) {
        diag("%s", amp_error_message(&err));
        good = 0;
    }
    if (!good)
        for (unsigned m = 0; m < N; m++) {
            free(A[m]);
            A[m] = NULL;
        }
    return good;
}

/* The constrained runs the backends' tests compare with the CPU's: rank
 * R, iters iterations, every mode non-negative but for AO-ADMM an l1 of
 * 0.01 on mode 1 and for HALS mode 2 free (with a ridge of hals_l2). */
static inline amp_cpd_opts constrained_opts(amp_method method, unsigned nmodes, unsigned R,
                                            unsigned iters, double hals_l2)
{
    amp_cpd_opts o;
    amp_cpd_opts_init(&o);
    o.rank = R;
    o.max_iters = iters;
    o.tol = 0;
    o.method = method;
    o.rules.n_constraint = 1;
    o.rules.constraint[0] = AMP_CONSTRAINT_NONNEG;
    if (method == AMP_METHOD_ADMM) {
        o.rules.n_l1 = nmodes;
        for (unsigned m = 0; m < nmodes; m++)
            o.rules.l1[m] = m == 0 ? 0.01 : 0;
    }
    if (method == AMP_METHOD_HALS) {
        o.rules.n_constraint = nmodes;
        for (unsigned m = 0; m < nmodes; m++)
            o.rules.constraint[m] = m == 1 ? AMP_CONSTRAINT_NONE : AMP_CONSTRAINT_NONNEG;
        if (hals_l2 > 0) {
            o.rules.n_l2 = nmodes;
            for (unsigned m = 0; m < nmodes; m++)
                o.rules.l2[m] = m == 1 ? hals_l2 : 0;
        }
    }
    return o;
}

#endif
