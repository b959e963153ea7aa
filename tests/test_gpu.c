/* GPU presence, a kernel round trip, and the MTTKRP kernel against the
 * CPU's f64 reference; skipped without CUDA or a device.
 *
 * Tolerances (normwise: largest entry error over largest entry): f64
 * 1e-12; f32 1e-4 (every product and sum rounds to 24 bits). */
#include <config.h>

#include <dirent.h>

#include "tap.h"
#include "cpd_util.h"
#ifdef AMP_HAVE_CUDA
#include "cuda/amp_cuda.h"
#endif

#ifdef AMP_HAVE_CUDA
/* Every mode, f64 and f32, each rank, against amp_mttkrp_reference. */
static void check_gpu_mttkrp(const char *name, const amp_tensor *t, const unsigned *ranks,
                             int nranks)
{
    amp_gpu_tensor *g = NULL;
    amp_error err = {0};
    if (!ok(amp_gpu_tensor_upload(0, t, &g, &err) == AMP_OK, "%s: uploads (%s)", name,
            amp_error_message(&err))) {
        skip(2 * nranks, "no upload");
        return;
    }
    uint64_t maxr = 1;
    for (unsigned m = 0; m < t->nmodes; m++)
        maxr = t->rows[m] > maxr ? t->rows[m] : maxr;
    for (int i = 0; i < nranks; i++) {
        unsigned R = ranks[i];
        double *A[AMP_MAX_MODES];
        for (unsigned m = 0; m < t->nmodes; m++)
            A[m] = random_matrix(t->rows[m], R, 31 + m + R);
        double *ref = malloc(maxr * R * sizeof *ref), *M = malloc(maxr * R * sizeof *M);
        double worst[2] = {0, 0};
        int fails = 0;
        for (int f32 = 0; f32 < 2; f32++)
            for (unsigned d = 0; d < t->nmodes; d++) {
                amp_mttkrp_reference(t, d, d, (const double *const *)A, R, ref, &err);
                if (amp_gpu_mttkrp_host(g, (const double *const *)A, R, f32, d, M, 0, NULL,
                                        &err) != AMP_OK) {
                    diag("%s", amp_error_message(&err));
                    fails++;
                    continue;
                }
                double e = rel_diff(M, ref, t->rows[d] * R);
                worst[f32] = e > worst[f32] || isnan(e) ? e : worst[f32];
            }
        ok(!fails && worst[0] <= 1e-12, "%s: GPU MTTKRP f64, every mode, rank %u (%.2e)", name,
           R, worst[0]);
        ok(!fails && worst[1] <= 1e-4, "%s: GPU MTTKRP f32, every mode, rank %u (%.2e)", name,
           R, worst[1]);
        for (unsigned m = 0; m < t->nmodes; m++)
            free(A[m]);
        free(ref);
        free(M);
    }
    amp_gpu_tensor_free(g);
}

static const unsigned all_ranks[] = {1, 7, 32, 33, 64, 200};
#define NRANKS 6

static void test_random(void)
{
    static const shape shapes[] = {
        {"3 modes, power-law", 3, {5000, 3000, 800}, 60000, 1},
        {"4 modes", 4, {60, 50, 40, 30}, 9000, 0},
        {"5 modes, 80 index bits", 5, {1000000, 1000000, 1000000, 1000000, 1000000}, 70000, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        amp_coo x;
        amp_tensor t;
        random_tensor(&shapes[i], 500 + i, &x);
        if (!prepare(&x, "gpu.amp", 8, 997, &t)) {
            skip(1 + 2 * NRANKS, "no file");
            amp_coo_free(&x);
            continue;
        }
        check_gpu_mttkrp(shapes[i].name, &t, all_ranks, NRANKS);
        amp_tensor_free(&t);
        amp_coo_free(&x);
    }
}

static int test_real(int run)
{
    const char *dir = getenv("AMP_TEST_DATA");
    DIR *dp = dir ? opendir(dir) : NULL;
    int n = 0;
    struct dirent *e;
    static const unsigned ranks[] = {7, 32, 33};
    while (dp && (e = readdir(dp)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".tns") != 0)
            continue;
        n++;
        if (!run)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        amp_read_opts ro;
        amp_read_opts_init(&ro);
        amp_coo x;
        amp_tensor t;
        amp_error err = {0};
        if (amp_read_tensor(path, &ro, &x, NULL, &err) != AMP_OK ||
            !prepare(&x, "real.amp", 16, 4096, &t)) {
            skip(1 + 2 * 3, "unreadable");
            continue;
        }
        check_gpu_mttkrp(e->d_name, &t, ranks, 3);
        amp_tensor_free(&t);
        amp_coo_free(&x);
    }
    if (dp)
        closedir(dp);
    return n;
}
#endif

int main(void)
{
#ifndef AMP_HAVE_CUDA
    plan_skip_all("built without CUDA");
#else
    amp_cuda_device dev[16];
    int count = 0;
    amp_error err = {0};
    amp_status rc = amp_cuda_list_devices(dev, 16, &count, &err);
    if (rc == AMP_ERR_NO_DEVICE)
        plan_skip_all("no CUDA device");
    plan(2 + 2 * (count < 16 ? count : 16) + 3 * (1 + 2 * NRANKS) + test_real(0) * 7);
    is_int(rc, AMP_OK, "device query succeeds");
    ok(count > 0, "%d device%s found", count, count == 1 ? "" : "s");
    for (int i = 0; i < count && i < 16; i++) {
        ok(dev[i].sm_count > 0 && dev[i].total_memory > 0 && dev[i].free_memory <= dev[i].total_memory,
           "GPU %d (%s): %d SMs, sane memory figures", i, dev[i].name, dev[i].sm_count);
        amp_error e = {0};
        rc = amp_cuda_selftest(i, &e);
        if (!ok(rc == AMP_OK, "GPU %d runs this build's kernel image", i))
            diag("%s", e.msg);
    }
    test_random();
    test_real(1);
    return done_testing();
#endif
}
