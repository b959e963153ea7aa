/* The GPU MTTKRP over fibers (run/cuda/mttkrp_fibers.cu, issue 45)
 * against the plain f64 reference (amp_mttkrp_reference), on resident
 * copies with the fiber kernel turned on (amp_gpu_tensor_fibers): 3 to 6
 * modes, block keys, fibers of one nonzero, one long row of long fibers,
 * every ../shared/data tensor, ranks that take each register count (1,
 * 2, 4, 8 and 16 a lane). Skipped without CUDA or a device.
 *
 * Tolerances, normwise (largest entry error over largest reference
 * entry): f64 1e-12 (the fiber sums and the atomic adds of shared rows
 * change the order of the adds, nothing else); f32 1e-4 (24-bit sums). */
#include <config.h>

#include <inttypes.h>

#include "tap.h"
#include "cpd_util.h"
#ifdef AMP_HAVE_CUDA
#include "amp_cuda.h"
#include "gpu_run.h"
#endif

#ifdef AMP_HAVE_CUDA
#define TOL_F64 1e-12
#define TOL_F32 1e-4

/* Every mode's MTTKRP at ranks R0 and R1, f64 and f32, over fibers,
 * against the reference. 3 tests. */
static void check_tensor(const char *name, const amp_tensor *t, unsigned R0, unsigned R1)
{
    amp_error err = {0};
    amp_gpu_tensor *g = NULL;
    if (!ok(amp_gpu_tensor_upload(0, t, 0, &g, &err) == AMP_OK && amp_gpu_tensor_fibers(g, 1),
            "%s: uploaded, the fiber kernel takes its copies (%s)", name,
            amp_error_message(&err))) {
        skip(2, "not uploaded");
        amp_gpu_tensor_free(g);
        return;
    }
    double worst[2] = {0, 0};
    const unsigned ranks[2] = {R0, R1};
    for (int ri = 0; ri < 2; ri++) {
        const unsigned R = ranks[ri];
        double *A[AMP_MAX_MODES];
        uint64_t maxr = 1;
        for (unsigned m = 0; m < t->nmodes; m++) {
            A[m] = random_matrix(t->rows[m], R, 31 + m);
            maxr = t->rows[m] > maxr ? t->rows[m] : maxr;
        }
        double *ref = malloc(maxr * R * sizeof *ref), *M = malloc(maxr * R * sizeof *M);
        for (unsigned d = 0; d < t->nmodes; d++) {
            if (amp_mttkrp_reference(t, (d + 1) % t->nmodes, d, (const double *const *)A, R,
                                     ref, &err) != AMP_OK)
                exit(99);
            for (int f32 = 0; f32 < 2; f32++) {
                double e = NAN;
                if (amp_gpu_mttkrp_host(g, (const double *const *)A, R, f32, d, M, 0, NULL,
                                        &err) == AMP_OK)
                    e = rel_diff(M, ref, t->rows[d] * R);
                else
                    diag("%s: %s", name, amp_error_message(&err));
                worst[f32] = max_or_nan(worst[f32], e);
            }
        }
        for (unsigned m = 0; m < t->nmodes; m++)
            free(A[m]);
        free(ref);
        free(M);
    }
    ok(worst[0] <= TOL_F64, "%s: f64 MTTKRP over fibers on the GPU, ranks %u and %u, every "
       "mode, against the reference (%.2e)", name, R0, R1, worst[0]);
    ok(worst[1] <= TOL_F32, "%s: f32 (%.2e)", name, worst[1]);
    amp_gpu_tensor_free(g);
}

#define SHAPES 6
static void test_shapes(void)
{
    static const shape shapes[SHAPES] = {
        {"3 modes, power-law", 3, {4000, 2000, 300}, 40000, 1},
        {"3 modes, long fibers", 3, {40, 30, 20}, 60000, 0},
        {"4 modes", 4, {80, 60, 50, 40}, 12000, 0},
        {"5 modes, power-law", 5, {300, 200, 150, 100, 50}, 10000, 1},
        {"6 modes", 6, {20, 18, 16, 14, 12, 10}, 8000, 0},
        {"5 modes, keyed", 5, {1000000, 1000000, 1000000, 1000000, 1000000}, 30000, 0},
    };
    static const unsigned ranks[SHAPES][2] = {{32, 33}, {16, 64}, {1, 100}, {7, 200},
                                              {130, 512}, {16, 40}};
    for (int i = 0; i < SHAPES; i++) {
        amp_coo x;
        amp_tensor t;
        random_tensor(&shapes[i], 500 + (uint64_t)i, &x);
        coo_unique(&x, shapes[i].name);
        if (!ok(prepare(&x, "gpu-fibers.amp", 7, 613, &t), "%s: prepares", shapes[i].name)) {
            skip(3, "no file");
            amp_coo_free(&x);
            continue;
        }
        check_tensor(shapes[i].name, &t, ranks[i][0], ranks[i][1]);
        amp_tensor_free(&t);
        amp_coo_free(&x);
    }
}

static void real_one(const char *path, const char *name, void *ctx)
{
    amp_coo x;
    amp_tensor t;
    (void)ctx;
    if (!ok(read_prepared(path, "gpu-fibers-real.amp", &x, &t, NULL), "%s: prepares", name)) {
        skip(3, "not prepared");
        return;
    }
    check_tensor(name, &t, 16, 32);
    amp_tensor_free(&t);
    amp_coo_free(&x);
}
#endif

int main(void)
{
#ifndef AMP_HAVE_CUDA
    plan_skip_all("built without CUDA");
#else
    if (amp_gpu_visible() == 0)
        plan_skip_all("no CUDA device");
    const int nreal = for_each_shared_tensor(NULL, NULL);
    plan(SHAPES * 4 + nreal * 4 + (nreal == 0));
    tap_real_data(nreal, getenv("AMP_TEST_DATA"));
    test_shapes();
    for_each_shared_tensor(real_one, NULL);
    return done_testing();
#endif
}
