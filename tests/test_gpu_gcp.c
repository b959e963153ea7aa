/* GCP on one GPU (run/cuda/gcp.cu) against the CPU backend's pieces
 * (run/cpu/gcp.c, themselves checked by tests/test_gcp against sums
 * written there), on the same samples: the same keys draw the same cells
 * on both (amp_gcp.h's counter-based draws and binary search). Skipped
 * without CUDA or a device.
 *
 * Tensors: 3 modes of 200 x 150 x 100 with 6000 nonzeros, power-law
 * rows (many samples share a row, so the GPU's atomics add many terms
 * into one row); 4 modes of 30 x 20 x 12 x 9 (64,800 cells: the exact
 * loss enumerated); ranks 5 (a lane's one entry) and 40 (two). Every
 * value 1, which every loss takes. For each loss: a batch of 3000
 * nonzeros and 3000 zeros, the gradient (largest entry difference over
 * the largest entry) and the estimate and its standard error within
 * 1e-10 relative in f64 (the backends differ only in the order of sums:
 * the model's value is a warp's butterfly, a row's samples are added by
 * atomics in any order, a block's samples by warps); the exact loss
 * (enumerated, and the closed forms on the 3-mode tensor) within 1e-10.
 * Then whole runs from the same start, 3 epochs of 40 steps: each epoch's
 * estimated loss within 1e-6 relative of the CPU's and the same failed
 * epochs (Adam divides by sqrt(v), which amplifies rounding where v is
 * small; the bound was set before any GPU run).
 *
 * Lazy Adam (SparseAdam: only the rows a step's samples touch move): 5
 * steps of 300 + 300 samples from the same factors and zero moments, the
 * GPU's factors and both moments after them within 1e-8 of the CPU's
 * (largest difference over largest entry; the gradients agree to 1e-10
 * and a step divides by sqrt(v), so 5 steps leave rounding far below it,
 * while a row the GPU moved and the CPU held, or the reverse, is off by
 * about the rate, 1e-2), and the dense steps alike; then whole runs of 3
 * epochs with lazy Adam and 100 + 100 samples a step (most rows
 * untouched by a step), checked as the dense ones. */
#include <config.h>

#include <inttypes.h>

#include "tap.h"
#include "cpd_util.h"
#include "amp_gcp.h"
#ifdef AMP_HAVE_CUDA
#include "amp_cuda.h"
#endif

#ifdef AMP_HAVE_CUDA
#define TOL 1e-10
#define RUN_TOL 1e-6
#define EPOCHS 3

static const shape shapes[] = {
    {"3 modes, power-law rows", 3, {200, 150, 100}, 6000, 1},
    {"4 modes", 4, {30, 20, 12, 9}, 3000, 0},
    /* 24 M cells: no exact loss for bernoulli-logit, so a streamed run
     * holds no nonzero on the GPU */
    {"3 modes, 24 M cells", 3, {400, 300, 200}, 6000, 0},
};
#define NSHAPES (sizeof shapes / sizeof *shapes)
static const unsigned ranks[] = {5, 40};
#define NRANKS 2
/* Per shape and rank: per loss gradient, estimate; exact (every loss
 * in one), closed forms; then the run. */
#define PER_RANK (2 * AMP_GCP_NLOSSES + 2 + 1 + 3 + 2)
#define STEP_TOL 1e-8
#define STEPS 5

static double *rand_factor(uint64_t rows, unsigned R, uint64_t seed)
{
    double *a = calloc(rows * R + 1, sizeof *a);
    for (uint64_t i = 0; i < rows * R; i++)
        a[i] = 0.05 + 0.5 * (double)(rng_next(&seed) >> 11) / 9007199254740992.0;
    return a;
}

static double rel_max(double *const *a, double *const *b, const amp_gcp_view *v, unsigned R)
{
    double d = 0, s = 0;
    for (unsigned m = 0; m < v->nmodes; m++)
        for (uint64_t i = 0; i < v->rows[m] * R; i++) {
            d = fmax(d, fabs(a[m][i] - b[m][i]));
            s = fmax(s, fabs(b[m][i]));
        }
    return s > 0 ? d / s : d;
}

typedef struct epoch_log {
    unsigned n;
    double loss[EPOCHS];
    int failed[EPOCHS];
    const amp_cpd *c;
} epoch_log;

static void log_epoch(void *ctx, unsigned iter, double fit, double delta, double seconds)
{
    epoch_log *l = ctx;
    (void)delta, (void)seconds, (void)fit;
    if (iter == l->n + 1 && l->n < EPOCHS) {
        l->loss[l->n] = l->c->gcp_loss;
        l->failed[l->n] = l->c->gcp_failed;
        l->n++;
    }
}

static int whole(const amp_tensor *t, unsigned R, int gpu, amp_gcp_adam adam, epoch_log *l,
                 amp_error *err)
{
    amp_cpd_opts o;
    amp_cpd_opts_init(&o);
    o.method = AMP_METHOD_GCP;
    o.rank = R;
    o.max_iters = EPOCHS;
    o.tol = 0;
    o.seed = 8;
    o.gcp.loss = AMP_GCP_BERNOULLI_LOGIT;
    o.gcp.epoch_iters = 40;
    o.gcp.rate = 1e-2;
    o.gcp.adam = adam;
    if (adam == AMP_GCP_ADAM_LAZY) {
        o.gcp.grad_given = 1;
        o.gcp.grad_nz = o.gcp.grad_z = 100;
    }
    o.on_iter = log_epoch;
    o.ctx = l;
    amp_cpd c;
    memset(&c, 0, sizeof c);
    memset(l, 0, sizeof *l);
    l->c = &c;
    if (amp_cpd_init_random(t, R, 8, &c, err) != AMP_OK)
        return 0;
    amp_status rc = gpu ? amp_gpu_gcp(0, t, &o, gpu == 2, &c, err) : amp_cpu_als(t, &o, &c, err);
    amp_cpd_free(&c);
    return rc == AMP_OK;
}

/* STEPS Adam steps (bernoulli-logit) on the CPU and the GPU from factors A
 * and zero moments: the factors and moments after them. */
static void steps_vs_cpu(const shape *s, const amp_gcp_view *v, unsigned R, amp_gcp_adam adam,
                         uint64_t seed, const double *const *A)
{
    double *Ac[AMP_MAX_MODES], *Mc[AMP_MAX_MODES], *Vc[AMP_MAX_MODES];
    double *Ag[AMP_MAX_MODES], *Mg[AMP_MAX_MODES], *Vg[AMP_MAX_MODES];
    for (unsigned m = 0; m < v->nmodes; m++) {
        const size_t n = v->rows[m] * R + 1;
        Ac[m] = calloc(n, sizeof(double)), Mc[m] = calloc(n, sizeof(double));
        Vc[m] = calloc(n, sizeof(double)), Ag[m] = calloc(n, sizeof(double));
        Mg[m] = calloc(n, sizeof(double)), Vg[m] = calloc(n, sizeof(double));
        memcpy(Ac[m], A[m], (n - 1) * sizeof(double));
        memcpy(Ag[m], A[m], (n - 1) * sizeof(double));
    }
    amp_gcp_batch b[STEPS];
    for (unsigned k = 0; k < STEPS; k++)
        b[k] = (amp_gcp_batch){amp_gcp_step_key(seed, 40 + k), 300, 300,
                               (double)v->nnz / 300, (double)(v->cells - v->nnz) / 300};
    amp_error err = {0};
    const int loss = AMP_GCP_BERNOULLI_LOGIT;
    int good = amp_cpu_gcp_steps(v, Ac, Mc, Vc, R, loss, 0.25, adam, b, STEPS, 0, 1e-2,
                                 -INFINITY, &err) == AMP_OK &&
               amp_gpu_gcp_steps_host(0, v, Ag, Mg, Vg, R, loss, 0.25, adam, b, STEPS, 0, 1e-2,
                                      -INFINITY, &err) == AMP_OK;
    if (!good)
        diag("%s", amp_error_message(&err));
    double d = good ? fmax(rel_max(Ag, Ac, v, R), fmax(rel_max(Mg, Mc, v, R),
                                                        rel_max(Vg, Vc, v, R)))
                    : NAN;
    ok(good && d <= STEP_TOL, "%s, rank %u: %u %s Adam steps of 300 + 300 samples, the factors "
       "and moments are the CPU's (%.1e)", s->name, R, STEPS,
       adam == AMP_GCP_ADAM_LAZY ? "lazy" : "dense", d);
    for (unsigned m = 0; m < v->nmodes; m++)
        free(Ac[m]), free(Mc[m]), free(Vc[m]), free(Ag[m]), free(Mg[m]), free(Vg[m]);
}

static void test_shape(const shape *s, uint64_t seed)
{
    amp_coo x;
    random_tensor(s, seed, &x);
    coo_unique(&x, s->name);
    for (uint64_t k = 0; k < x.nnz; k++)
        x.val[k] = 1;
    amp_tensor t;
    amp_gcp_source src;
    amp_error err = {0};
    char name[64];
    snprintf(name, sizeof name, "gpu-gcp-%u-%llu.amp", s->nmodes, (unsigned long long)seed);
    if (!prepare(&x, name, 2, 997, &t) || amp_gcp_source_build(&t, 0, &src, &err) != AMP_OK) {
        diag("%s: %s", s->name, amp_error_message(&err));
        skip(NRANKS * PER_RANK, "the tensor did not prepare");
        amp_coo_free(&x);
        return;
    }
    const amp_gcp_view *v = &src.view;
    for (unsigned ri = 0; ri < NRANKS; ri++) {
        const unsigned R = ranks[ri];
        double *A[AMP_MAX_MODES], *Gc[AMP_MAX_MODES], *Gg[AMP_MAX_MODES];
        for (unsigned m = 0; m < v->nmodes; m++) {
            A[m] = rand_factor(v->rows[m], R, seed + 31 * m + R);
            Gc[m] = calloc(v->rows[m] * R + 1, sizeof(double));
            Gg[m] = calloc(v->rows[m] * R + 1, sizeof(double));
        }
        const amp_gcp_batch b = {amp_gcp_step_key(seed, 3), 3000, 3000,
                                 (double)v->nnz / 3000, (double)(v->cells - v->nnz) / 3000};
        for (int loss = 0; loss < AMP_GCP_NLOSSES; loss++) {
            int good = amp_cpu_gcp_gradient(v, (const double *const *)A, R, loss, 0.25, &b, Gc,
                                            &err) == AMP_OK &&
                       amp_gpu_gcp_gradient_host(0, v, (const double *const *)A, R, loss, 0.25,
                                                 &b, Gg, &err) == AMP_OK;
            if (!good)
                diag("%s", amp_error_message(&err));
            double d = good ? rel_max(Gg, Gc, v, R) : NAN;
            ok(good && d <= TOL, "%s, rank %u, %s: the gradient is the CPU's (%.1e)", s->name, R,
               amp_gcp_loss_names[loss], d);
            double ec, sc, eg, sg;
            good = amp_cpu_gcp_estimate(v, (const double *const *)A, R, loss, 0.25, &b, &ec, &sc,
                                        &err) == AMP_OK &&
                   amp_gpu_gcp_estimate_host(0, v, (const double *const *)A, R, loss, 0.25, &b,
                                             &eg, &sg, &err) == AMP_OK;
            if (!good)
                diag("%s", amp_error_message(&err));
            d = good ? fmax(fabs(eg - ec) / fabs(ec), fabs(sg - sc) / fmax(fabs(sc), 1e-300))
                     : NAN;
            ok(good && d <= TOL, "%s, rank %u, %s: the estimate and its error are the CPU's "
               "(%.1e)", s->name, R, amp_gcp_loss_names[loss], d);
        }
        double worst = 0;
        int good = 1;
        const int enumerate = v->cells <= AMP_GCP_EXACT_CELLS;
        for (int loss = 0; loss < AMP_GCP_NLOSSES && enumerate; loss++) {
            double ec = NAN, eg = NAN;
            good &= amp_cpu_gcp_exact(v, (const double *const *)A, R, loss, 0.25,
                                      AMP_GCP_EXACT_ENUMERATE, &ec, &err) == AMP_OK &&
                    amp_gpu_gcp_exact_host(0, v, (const double *const *)A, R, loss, 0.25,
                                           AMP_GCP_EXACT_ENUMERATE, &eg, &err) == AMP_OK;
            worst = fmax(worst, fabs(eg - ec) / fabs(ec));
        }
        ok(good && worst <= TOL, "%s, rank %u: the exact loss over every cell is the CPU's, "
           "each loss (%.1e)", s->name, R, worst);
        worst = 0;
        for (int loss = 0; loss <= AMP_GCP_POISSON; loss++) {
            double ec = NAN, eg = NAN;
            good &= amp_cpu_gcp_exact(v, (const double *const *)A, R, loss, 0.25,
                                      AMP_GCP_EXACT_CLOSED, &ec, &err) == AMP_OK &&
                    amp_gpu_gcp_exact_host(0, v, (const double *const *)A, R, loss, 0.25,
                                           AMP_GCP_EXACT_CLOSED, &eg, &err) == AMP_OK;
            worst = fmax(worst, fabs(eg - ec) / fabs(ec));
        }
        ok(good && worst <= TOL, "%s, rank %u: the closed forms are the CPU's (%.1e)", s->name,
           R, worst);
        for (int adam = 0; adam < 2; adam++)
            steps_vs_cpu(s, v, R, (amp_gcp_adam)adam, seed, (const double *const *)A);
        /* gpu 1: the sampler's form resident; 2: the samples drawn on the
         * host and streamed (the same cells, so the same bound). */
        for (int gpu = 1; gpu <= 2; gpu++)
            for (int adam = 0; adam < 2; adam++) {
                epoch_log lc, lg;
                good = whole(&t, R, 0, (amp_gcp_adam)adam, &lc, &err) &&
                       whole(&t, R, gpu, (amp_gcp_adam)adam, &lg, &err);
                if (!good)
                    diag("%s", amp_error_message(&err));
                worst = 0;
                int same_fails = good && lc.n == lg.n && lc.n == EPOCHS;
                for (unsigned e = 0; same_fails && e < lc.n; e++) {
                    worst = fmax(worst, fabs(lg.loss[e] - lc.loss[e]) / fabs(lc.loss[e]));
                    same_fails &= lg.failed[e] == lc.failed[e];
                }
                ok(same_fails && worst <= RUN_TOL, "%s, rank %u: %u epochs of bernoulli-logit, "
                   "%s Adam, %s, each estimate within %.0e of the CPU's (%.1e), the same failed "
                   "epochs", s->name, R, EPOCHS, adam ? "lazy" : "dense",
                   gpu == 2 ? "samples streamed" : "resident", RUN_TOL, worst);
            }
        for (unsigned m = 0; m < v->nmodes; m++)
            free(A[m]), free(Gc[m]), free(Gg[m]);
    }
    amp_gcp_source_free(&src);
    amp_tensor_free(&t);
    amp_coo_free(&x);
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
    plan((int)(NSHAPES * NRANKS * PER_RANK));
    for (size_t i = 0; i < NSHAPES; i++)
        test_shape(&shapes[i], 100 + i);
    return done_testing();
#endif
}
