/* CP-APR on one GPU (run/cuda/apr.cu) against the CPU backend's
 * (run/cpu/apr.c, itself checked against pyttb's cp_apr by
 * tests/run_apr.sh), from the same starting factors, before any timing;
 * skipped without CUDA or a device.
 *
 * Random count tensors (values 1 to 5): 3 modes with power-law rows (the
 * kernel that reads 2 other rows ahead), 4 modes (3 ahead), and 5 modes
 * of 10^6 slices whose indices take more than 64 bits (a keyed copy, and
 * the kernel that loops over the other modes); ranks 5 (one register a
 * lane) and 40 (two). Each on the GPU resident, streamed in chunks of 997
 * nonzeros (rows cut between chunks; counts take the stream layout, the
 * value inside the word), and streamed from the file's compressed chunks
 * of 997. tol 0, so every inner iteration runs on both backends (a KKT
 * violation next to the tolerance cannot part their paths).
 *
 * Tolerances. f64: each of the 4 outer iterations' log-likelihood within
 * 1e-9 relative of the CPU's and the same inner iterations (the backends
 * differ only in the order of the sums: the model's value is a warp's
 * butterfly, not a loop over the rank; Phi's rows are added across warps;
 * the log-likelihood is summed over warps, not rows); lambda and the
 * factors within 1e-6 normwise (entries that the updates drive towards 0
 * are where rounding differences grow, and the log-likelihood hardly
 * sees them). f32 (Phi, the gathered rows and the model's value in f32,
 * the factors f64): each log-likelihood within 1e-4 relative, a bound set
 * before the first GPU run (an f32 sum of R products loses ~log2(R) of
 * 24 bits, and each update multiplies such errors into the factors); the
 * factors finite. The pyttb shift rule once, resident in f64; and
 * amp_cpd_opts.stop after the first outer iteration. */
#include <config.h>

#include <inttypes.h>

#include "tap.h"
#include "cpd_util.h"
#ifdef AMP_HAVE_CUDA
#include "amp_cuda.h"
#endif

#ifdef AMP_HAVE_CUDA
#define ITERS 4
#define CHUNK 997
#define F64_TOL 1e-9
#define F64_FACTOR_TOL 1e-6
#define F32_TOL 1e-4

/* Every outer iteration's log-likelihood, KKT violation and inner
 * iterations, as on_iter's caller reads them (c: the run's amp_cpd). */
typedef struct apr_log {
    unsigned n;
    double ll[ITERS], kkt[ITERS];
    unsigned inner[ITERS];
    const amp_cpd *c;
} apr_log;

static void log_iter(void *ctx, unsigned iter, double fit, double delta, double seconds)
{
    apr_log *l = ctx;
    (void)delta, (void)seconds;
    if (iter == l->n + 1 && l->n < ITERS) {
        l->ll[l->n] = fit;
        l->kkt[l->n] = l->c->kkt;
        l->inner[l->n] = l->c->inner_iters;
        l->n++;
        if (fit != l->c->loglik)
            l->n = ITERS + 1;   /* fit must be the log-likelihood: fails the count */
    }
}

static amp_cpd_opts apr_opts(unsigned R, int f32, int pyttb)
{
    amp_cpd_opts o;
    amp_cpd_opts_init(&o);
    o.method = AMP_METHOD_APR;
    o.rank = R;
    o.max_iters = ITERS;
    o.tol = 0;
    o.precision = f32 ? AMP_PRECISION_F32 : AMP_PRECISION_F64;
    o.apr.shift_rule = pyttb ? AMP_APR_SHIFT_PYTTB : AMP_APR_SHIFT_KKT;
    return o;
}

/* A run from amped's random start (seed), on the CPU (g NULL) or g. */
static int run_apr(const amp_tensor *t, const amp_gpu_tensor *g, const amp_cpd_opts *base,
                   uint64_t seed, amp_cpd *c, apr_log *log)
{
    amp_error err = {0};
    amp_cpd_opts o = *base;
    memset(log, 0, sizeof *log);
    log->c = c;
    o.on_iter = log_iter;
    o.ctx = log;
    if (amp_cpd_init_random(t, o.rank, seed, c, &err) != AMP_OK ||
        (g ? amp_gpu_cpd_apr(g, &o, c, NULL, &err) : amp_cpu_apr(t, &o, c, &err)) != AMP_OK) {
        diag("%s", amp_error_message(&err));
        return 0;
    }
    if (log->n != ITERS || c->iters != ITERS) {
        diag("%u outer iterations logged, %u run, of %u", log->n, c->iters, ITERS);
        return 0;
    }
    return 1;
}

/* The largest relative difference of the log-likelihoods; NaN if any. */
static double ll_gap(const apr_log *a, const apr_log *b)
{
    double gap = 0;
    for (unsigned k = 0; k < ITERS; k++) {
        /* -inf on both: a model value of 0 at a nonzero, on both backends
         * (factor entries that underflow as MU shrinks them: the 5-mode
         * tensor of a nonzero or two a slice does that by iteration 4);
         * its factors are compared beside. */
        if (a->ll[k] == b->ll[k])
            continue;
        double e = fabs(a->ll[k] - b->ll[k]) / fabs(b->ll[k]);
        gap = e > gap || isnan(e) ? e : gap;
    }
    return gap;
}

static int factors_finite(const amp_tensor *t, const amp_cpd *c)
{
    for (unsigned r = 0; r < c->rank; r++)
        if (!isfinite(c->lambda[r]))
            return 0;
    for (unsigned m = 0; m < t->nmodes; m++)
        for (uint64_t i = 0; i < t->rows[m] * c->rank; i++)
            if (!isfinite(c->A[m][i]))
                return 0;
    return 1;
}

enum { RESIDENT, STREAMED, COMPRESSED, NMEMORY };
static const char *const memory_name[NMEMORY] = {"resident", "streamed in chunks of 997",
                                                 "streamed from compressed chunks"};

/* Tensor t (and its file f, open) on the GPU as `memory` says. */
static amp_gpu_tensor *upload(const amp_tensor *t, const amp_file *f, int memory,
                              amp_tensor *layout)
{
    amp_gpu_tensor *g = NULL;
    amp_error err = {0};
    amp_status rc;
    if (memory == COMPRESSED) {
        rc = amp_tensor_load_layout(f, layout, &err);
        if (rc == AMP_OK)
            rc = amp_gpu_tensor_upload_compressed(0, f, layout, 3, NULL, NULL, &g, &err);
        if (rc == AMP_OK && !amp_gpu_tensor_compressed(g))
            rc = AMP_FAIL(&err, AMP_ERR_INTERNAL, "not streamed from compressed chunks");
    } else {
        rc = amp_gpu_tensor_upload(0, t, memory == STREAMED ? CHUNK : 0, &g, &err);
        if (rc == AMP_OK && amp_gpu_tensor_streamed(g) != (memory == STREAMED))
            rc = AMP_FAIL(&err, AMP_ERR_INTERNAL, "streamed is %d", amp_gpu_tensor_streamed(g));
    }
    if (rc != AMP_OK) {
        diag("%s: %s", memory_name[memory], amp_error_message(&err));
        amp_gpu_tensor_free(g);
        return NULL;
    }
    return g;
}

#define NRANKS 2
static const unsigned ranks[NRANKS] = {5, 40};
/* Per rank and memory: f64 (log-likelihoods, factors), f32. */
#define SHAPE_CHECKS (NRANKS * NMEMORY * 3)

static void check_shape(const char *name, const amp_tensor *t, const amp_file *f)
{
    for (unsigned ri = 0; ri < NRANKS; ri++) {
        const unsigned R = ranks[ri];
        amp_cpd cpu = {0};
        apr_log cpu_log;
        const amp_cpd_opts o64 = apr_opts(R, 0, 0), o32 = apr_opts(R, 1, 0);
        const int base = run_apr(t, NULL, &o64, 7 + R, &cpu, &cpu_log);
        for (int mem = 0; mem < NMEMORY; mem++) {
            amp_tensor layout;
            memset(&layout, 0, sizeof layout);
            amp_gpu_tensor *g = base ? upload(t, f, mem, &layout) : NULL;
            const char *how = memory_name[mem];
            amp_cpd gpu = {0};
            apr_log log;
            int okay = g && run_apr(t, g, &o64, 7 + R, &gpu, &log);
            double gap = okay ? ll_gap(&log, &cpu_log) : NAN;
            int same_inner = okay && memcmp(log.inner, cpu_log.inner, sizeof log.inner) == 0;
            ok(okay && gap <= F64_TOL && same_inner, "%s, rank %u, %s, f64: %u log-likelihoods "
               "within %.1e of the CPU's (last %.12e, CPU %.12e), the same inner iterations",
               name, R, how, ITERS, gap, okay ? log.ll[ITERS - 1] : NAN, cpu_log.ll[ITERS - 1]);
            double fd = okay ? cpd_diff(t, &gpu, &cpu) : NAN;
            ok(okay && fd <= F64_FACTOR_TOL, "%s, rank %u, %s, f64: lambda and factors within "
               "%.1e of the CPU's", name, R, how, fd);
            amp_cpd_free(&gpu);
            okay = g && run_apr(t, g, &o32, 7 + R, &gpu, &log);
            gap = okay ? ll_gap(&log, &cpu_log) : NAN;
            ok(okay && gap <= F32_TOL && factors_finite(t, &gpu), "%s, rank %u, %s, f32: %u "
               "log-likelihoods within %.1e of the CPU's f64 (tolerance %.0e), factors finite",
               name, R, how, ITERS, gap, F32_TOL);
            amp_cpd_free(&gpu);
            amp_gpu_tensor_free(g);
            amp_tensor_free(&layout);   /* zeroed where never loaded */
        }
        amp_cpd_free(&cpu);
    }
}

/* pyttb's shift rule (every inactive entry whose Phi is positive), and
 * the stop flag: one outer iteration, stopped, its log-likelihood the
 * CPU's first. */
#define EXTRA_CHECKS 3
static void check_extras(const char *name, const amp_tensor *t)
{
    const unsigned R = 5;
    amp_cpd cpu = {0}, gpu = {0};
    apr_log cpu_log, log;
    const amp_cpd_opts o = apr_opts(R, 0, 1);
    amp_gpu_tensor *g = upload(t, NULL, RESIDENT, NULL);
    int okay = g && run_apr(t, NULL, &o, 3, &cpu, &cpu_log) && run_apr(t, g, &o, 3, &gpu, &log);
    double gap = okay ? ll_gap(&log, &cpu_log) : NAN;
    ok(okay && gap <= F64_TOL && memcmp(log.inner, cpu_log.inner, sizeof log.inner) == 0,
       "%s, rank %u, pyttb's shift rule: %u log-likelihoods within %.1e of the CPU's", name, R,
       ITERS, gap);
    amp_cpd_free(&gpu);

    amp_error err = {0};
    volatile int stop = 1;
    amp_cpd_opts os = apr_opts(R, 0, 0);
    os.stop = &stop;
    os.max_iters = 50;
    okay = g && amp_cpd_init_random(t, R, 3, &gpu, &err) == AMP_OK &&
           amp_gpu_cpd_apr(g, &os, &gpu, NULL, &err) == AMP_OK;
    if (g && !okay)
        diag("%s", amp_error_message(&err));
    ok(okay && gpu.iters == 1 && gpu.stopped && !gpu.converged, "%s: stop asked: %u outer "
       "iteration, stopped %d", name, gpu.iters, gpu.stopped);
    amp_cpd_free(&gpu);
    amp_cpd_free(&cpu);

    /* Through amp_gpu_cpd_als, as amped-run's one-GPU run calls it. */
    amp_cpd_opts oa = apr_opts(R, 0, 0);
    okay = g && run_apr(t, NULL, &oa, 4, &cpu, &cpu_log);
    if (okay) {
        apr_log l2;
        memset(&l2, 0, sizeof l2);
        l2.c = &gpu;
        oa.on_iter = log_iter;
        oa.ctx = &l2;
        okay = amp_cpd_init_random(t, R, 4, &gpu, &err) == AMP_OK &&
               amp_gpu_cpd_als(g, t, &oa, &gpu, &err) == AMP_OK && l2.n == ITERS;
        if (!okay)
            diag("%s", amp_error_message(&err));
        gap = okay ? ll_gap(&l2, &cpu_log) : NAN;
    }
    ok(okay && gap <= F64_TOL, "%s: amp_gpu_cpd_als runs CP-APR (%.1e of the CPU's)", name, gap);
    amp_cpd_free(&gpu);
    amp_cpd_free(&cpu);
    amp_gpu_tensor_free(g);
}

#define NSHAPES 3
static void test_random(void)
{
    static const shape shapes[NSHAPES] = {
        {"3 modes, power-law", 3, {3000, 2000, 500}, 40000, 1},
        {"4 modes", 4, {60, 50, 40, 30}, 9000, 0},
        {"5 modes, 10^6 slices", 5, {1000000, 1000000, 1000000, 1000000, 1000000}, 30000, 0},
    };
    for (size_t i = 0; i < NSHAPES; i++) {
        amp_coo x;
        amp_tensor t;
        amp_file *f = NULL;
        uint64_t seed = 900 + i;
        random_tensor(&shapes[i], seed, &x);
        for (uint64_t k = 0; k < x.nnz; k++)   /* counts */
            x.val[k] = (double)(1 + rng_next(&seed) % 5);
        if (!prepare_open(&x, "gpu_apr.amp", 8, CHUNK, &t, &f)) {
            ok(0, "%s: prepares", shapes[i].name);
            skip(SHAPE_CHECKS + (i == 0 ? EXTRA_CHECKS : 0), "no file");
            amp_coo_free(&x);
            continue;
        }
        const int keyed = t.copies[0].layout.key_bits > 0;
        ok(i < 2 || keyed, "%s: prepares%s", shapes[i].name,
           keyed ? " (keyed copies: the indices take more than 64 bits)" : "");
        check_shape(shapes[i].name, &t, f);
        if (i == 0)
            check_extras(shapes[i].name, &t);
        amp_file_close(f);
        amp_tensor_free(&t);
        amp_coo_free(&x);
    }
}
#endif

int main(void)
{
#ifndef AMP_HAVE_CUDA
    plan_skip_all("built without CUDA");
#else
    amp_cuda_device dev[1];
    int count = 0;
    amp_error err = {0};
    amp_status rc = amp_cuda_list_devices(dev, 1, &count, &err);
    if (rc == AMP_ERR_NO_DEVICE || count == 0)
        plan_skip_all("no CUDA device");
    plan(NSHAPES * (1 + SHAPE_CHECKS) + EXTRA_CHECKS);
    test_random();
    return done_testing();
#endif
}
