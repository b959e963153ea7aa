/* CP completion on one GPU (run/cuda/completion.cu) against the CPU
 * backend's (run/cpu/completion.c, itself checked against a dense masked
 * NumPy reference by tests/run_completion.sh), from the same starting
 * factors; skipped without CUDA or a device.
 *
 * Random tensors, values uniform in [-1, 1): 3 modes with power-law rows
 * (long rows, many rows of one nonzero), 4 modes, and 5 modes of 10^6
 * slices whose indices take more than 64 bits (keyed copies); ranks 5 and
 * 40 (one and two entries of k a lane; 40 also leaves lanes idle in the
 * packed system's last sweep); a ridge of 0.01 and a holdout of 0.2 (the
 * draw on the device from the uploaded relabelling). Each on the GPU
 * resident, streamed in chunks of 997 nonzeros (rows cut between chunks:
 * the carry), and streamed from the file's compressed chunks of 997.
 *
 * Tolerances. f64: each of the 4 iterations' fit and training and test
 * RMSEs within 1e-10 relative of the CPU's, the same counts (training and
 * test entries, rows kept), lambda and the factors within 1e-9 normwise:
 * the backends differ only in the order of the sums (a warp's lanes add
 * a row's systems in nonzero order as the CPU's dsyrk does in batches of
 * 32; the residuals are summed over blocks of nonzeros, not rows), and the
 * systems are well conditioned with the ridge. f32 (the gathered rows and
 * each product k_p k_q in f32, summed in f64): each fit and RMSE within
 * 1e-4 relative of the CPU's f64 (24-bit products, bound set before any
 * GPU run), the factors finite. Then rank 3 without a ridge and a holdout
 * of 0.9 on the 4-mode tensor (rows with no training entry, singular
 * systems): the same counts as the CPU; the stop flag; the path through
 * amp_gpu_cpd_als; rank 65 refused. */
#include <config.h>

#include <inttypes.h>

#include "tap.h"
#include "cpd_util.h"
#include "cmp_util.h"
#ifdef AMP_HAVE_CUDA
#include "amp_cuda.h"
#endif

#ifdef AMP_HAVE_CUDA
#define ITERS CMP_ITERS
#define CHUNK 997
#define F64_TOL 1e-10
#define F64_FACTOR_TOL 1e-9
#define F32_TOL 1e-4

/* A run from amped's random start (seed), on the CPU (g NULL) or g. */
static int run_cmp(const amp_tensor *t, const amp_gpu_tensor *g, const amp_cpd_opts *base,
                   uint64_t seed, amp_cpd *c, cmp_log *log)
{
    amp_error err = {0};
    amp_cpd_opts o = *base;
    memset(log, 0, sizeof *log);
    log->c = c;
    o.on_iter = cmp_log_iter;
    o.ctx = log;
    if (amp_cpd_init_random(t, o.rank, seed, c, &err) != AMP_OK ||
        (g ? amp_gpu_cpd_completion(g, t, &o, c, NULL, &err)
           : amp_cpu_completion(t, &o, c, &err)) != AMP_OK) {
        diag("%s", amp_error_message(&err));
        return 0;
    }
    if (log->n != o.max_iters || c->iters != o.max_iters) {
        diag("%u iterations logged, %u run, of %u", log->n, c->iters, o.max_iters);
        return 0;
    }
    return 1;
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
#define SHAPE_CHECKS (NRANKS * NMEMORY * 3)

static void check_shape(const char *name, const amp_tensor *t, const amp_file *f)
{
    for (unsigned ri = 0; ri < NRANKS; ri++) {
        const unsigned R = ranks[ri];
        amp_cpd cpu = {0};
        cmp_log cpu_log;
        const amp_cpd_opts o64 = cmp_opts(R, 0, 0.01, 0.2), o32 = cmp_opts(R, 1, 0.01, 0.2);
        const int base = run_cmp(t, NULL, &o64, 7 + R, &cpu, &cpu_log);
        for (int mem = 0; mem < NMEMORY; mem++) {
            amp_tensor layout;
            memset(&layout, 0, sizeof layout);
            amp_gpu_tensor *g = base ? upload(t, f, mem, &layout) : NULL;
            const char *how = memory_name[mem];
            amp_cpd gpu = {0};
            cmp_log log;
            int okay = g && run_cmp(t, g, &o64, 7 + R, &gpu, &log);
            double gap = okay ? cmp_gap(&log, &cpu_log) : NAN;
            ok(okay && gap <= F64_TOL && cmp_same_counts(&gpu, &cpu, t->nmodes),
               "%s, rank %u, %s, f64: %u iterations' fits and RMSEs within %.1e of the CPU's "
               "(last test RMSE %.12e, CPU %.12e), the same counts", name, R, how, ITERS, gap,
               okay ? log.test[ITERS - 1] : NAN, cpu_log.test[ITERS - 1]);
            double fd = okay ? cpd_diff(t, &gpu, &cpu) : NAN;
            ok(okay && fd <= F64_FACTOR_TOL, "%s, rank %u, %s, f64: lambda and factors within "
               "%.1e of the CPU's", name, R, how, fd);
            amp_cpd_free(&gpu);
            okay = g && run_cmp(t, g, &o32, 7 + R, &gpu, &log);
            gap = okay ? cmp_gap(&log, &cpu_log) : NAN;
            ok(okay && gap <= F32_TOL && factors_finite(t, &gpu), "%s, rank %u, %s, f32: %u "
               "iterations' fits and RMSEs within %.1e of the CPU's f64 (tolerance %.0e), "
               "factors finite", name, R, how, ITERS, gap, F32_TOL);
            amp_cpd_free(&gpu);
            amp_gpu_tensor_free(g);
            amp_tensor_free(&layout);
        }
        amp_cpd_free(&cpu);
    }
}

#define EXTRA_CHECKS 4
static void check_extras(const char *name, const amp_tensor *t)
{
    amp_cpd cpu = {0}, gpu = {0};
    cmp_log cpu_log, log;
    amp_gpu_tensor *g = upload(t, NULL, RESIDENT, NULL);
    /* No ridge, most entries held out: rows kept both ways. The share
     * that leaves some row without enough training entries depends on
     * the tensor: the CPU finds it (0.9, then 0.99, then 0.999). One
     * iteration: from the same start the two sides' systems differ by
     * rounding alone, so each verdict of singular (a pivot against 1000 R
     * eps of the diagonal) is clear-cut; later iterations build on rows
     * fitted exactly from R entries without a ridge, whose ill-conditioned
     * solves carry rounding far enough to move a pivot across the line
     * (seen on an H100 after 4 iterations: 24 singular rows of a mode
     * against the CPU's 23). */
    double holdout = 0.9;
    uint64_t kept = 0;
    int okay = g != NULL;
    amp_cpd_opts os = cmp_opts(3, 0, 0, holdout);
    for (int k = 0; okay && k < 3; k++, holdout = 1 - (1 - holdout) / 10) {
        os = cmp_opts(3, 0, 0, holdout);
        os.max_iters = 1;
        amp_cpd_free(&cpu);
        okay = run_cmp(t, NULL, &os, 3, &cpu, &cpu_log);
        kept = 0;
        for (unsigned m = 0; okay && m < t->nmodes; m++)
            kept += cpu.completion.unobserved[m] + cpu.completion.singular[m];
        if (kept > 0)
            break;
    }
    okay = okay && kept > 0 && run_cmp(t, g, &os, 3, &gpu, &log);
    ok(okay && cmp_same_counts(&gpu, &cpu, t->nmodes), "%s, rank 3, no ridge, holdout %g: %" PRIu64
       " rows kept, as on the CPU", name, os.completion.holdout, kept);
    amp_cpd_free(&gpu);
    amp_cpd_free(&cpu);

    amp_error err = {0};
    volatile int stop = 1;
    amp_cpd_opts ostop = cmp_opts(5, 0, 0.01, 0.2);
    ostop.stop = &stop;
    ostop.max_iters = 50;
    okay = g && amp_cpd_init_random(t, 5, 3, &gpu, &err) == AMP_OK &&
           amp_gpu_cpd_completion(g, t, &ostop, &gpu, NULL, &err) == AMP_OK;
    if (g && !okay)
        diag("%s", amp_error_message(&err));
    ok(okay && gpu.iters == 1 && gpu.stopped && !gpu.converged, "%s: stop asked: %u "
       "iteration, stopped %d", name, gpu.iters, gpu.stopped);
    amp_cpd_free(&gpu);

    amp_cpd_opts oa = cmp_opts(5, 0, 0.01, 0.2);
    double gap = NAN;
    okay = g && run_cmp(t, NULL, &oa, 4, &cpu, &cpu_log);
    if (okay) {
        cmp_log l2;
        memset(&l2, 0, sizeof l2);
        l2.c = &gpu;
        oa.on_iter = cmp_log_iter;
        oa.ctx = &l2;
        okay = amp_cpd_init_random(t, 5, 4, &gpu, &err) == AMP_OK &&
               amp_gpu_cpd_als(g, t, &oa, &gpu, &err) == AMP_OK && l2.n == ITERS;
        if (!okay)
            diag("%s", amp_error_message(&err));
        gap = okay ? cmp_gap(&l2, &cpu_log) : NAN;
    }
    ok(okay && gap <= F64_TOL, "%s: amp_gpu_cpd_als runs completion (%.1e of the CPU's)", name,
       gap);
    amp_cpd_free(&gpu);
    amp_cpd_free(&cpu);

    amp_cpd_opts big = cmp_opts(AMP_GPU_COMPLETION_MAX_RANK + 1, 0, 0.01, 0);
    amp_error e2 = {0};
    okay = g && amp_cpd_init_random(t, big.rank, 4, &gpu, &e2) == AMP_OK;
    amp_status rc = okay ? amp_gpu_cpd_completion(g, t, &big, &gpu, NULL, &e2) : AMP_OK;
    ok(okay && rc == AMP_ERR_USAGE && strstr(amp_error_message(&e2), "rank") != NULL,
       "%s: rank %u refused: %s", name, big.rank, amp_error_message(&e2));
    amp_cpd_free(&gpu);
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
        uint64_t seed = 700 + i;
        random_tensor(&shapes[i], seed, &x);
        for (uint64_t k = 0; k < x.nnz; k++)
            x.val[k] = 2.0 * (double)(rng_next(&seed) >> 11) / 9007199254740992.0 - 1.0;
        if (!prepare_open(&x, "gpu_completion.amp", 8, CHUNK, &t, &f)) {
            ok(0, "%s: prepares", shapes[i].name);
            skip(SHAPE_CHECKS + (i == 1 ? EXTRA_CHECKS : 0), "no file");
            amp_coo_free(&x);
            continue;
        }
        const int keyed = t.copies[0].layout.key_bits > 0;
        ok(i < 2 || keyed, "%s: prepares%s", shapes[i].name,
           keyed ? " (keyed copies: the indices take more than 64 bits)" : "");
        check_shape(shapes[i].name, &t, f);
        if (i == 1)
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
