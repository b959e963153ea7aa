/* GCP by stochastic gradients and Adam (GCP-Adam: Kolda and Hong,
 * "Stochastic gradients for large-scale tensor decomposition", SIMODS
 * 2020, Algorithm 2 with stratified sampling; pyttb's gcp_opt with its
 * Adam and the Tensor Toolbox's gcp_opt) on the CPU: the reference of the
 * GPU's kernels (run/cuda/gcp.cu).
 *
 * Per step: a stratified sample (amp_gcp.h) drawn under the step's key;
 * per sample j the model's value m_j = sum_r prod_n A_n(i_n, r) and
 * y_j = w_j f'(x_j, m_j); the gradient of mode n, G_n(i, :) = sum over the
 * samples in row i of y_j times the Hadamard product of the other modes'
 * rows (the sampled MTTKRP); then Adam on every entry of every factor
 * (beta1 0.9, beta2 0.999, eps 1e-8; step = rate decay^fails), each entry
 * projected onto the loss's lower bound. After each epoch (epoch_iters
 * steps) the loss is estimated on the fixed sample (step 0's draws, the
 * same cells every epoch); an epoch whose estimate rose fails: the
 * factors and Adam's moments go back to the epoch's start (as the Tensor
 * Toolbox's gcp_opt and GenTen do; pyttb 1.8 keeps its moments of the
 * step before and counts Adam's steps epoch_iters at a time, which this
 * does not copy), and the rate is multiplied by decay. The run stops after
 * max_fails + 1 failures, or the epochs (--iters), or where --tol asks.
 *
 * Determinism: every sum is over fixed blocks or in a fixed order, and a
 * gradient row is summed by the one thread that owns it, in sample order
 * (each thread scans every sample's row of that mode and takes its own):
 * the same bits for any thread count, and (the draws keyed on ordinals,
 * every sum over rows in ordinal order) for any layout of the file.
 *
 * Lazy Adam (--adam lazy, PyTorch's SparseAdam): per step and mode, the
 * rows the samples touch are listed in the order of their first sample,
 * each given a slot in a compact gradient (a table of rows[n] slots, all
 * empty between steps: the step empties only the slots it filled), and
 * only those rows' entries and moments are updated, with the bias
 * correction of the global step count. A row's gradient is summed in
 * sample order by the thread that owns its slot: the same bits as the
 * dense gradient's row, for any thread count.
 *
 * Per sample and step: N rows of R read (8 N R bytes), (N + 1) R FLOPs
 * for the value, N (N - 1) R for the N gradients' products; per step,
 * dense Adam reads and writes 4 arrays of sum(rows) R (64 bytes an
 * entry), lazy Adam the same 64 bytes for the touched rows' entries
 * only (at most N s R of them for s samples) and 16 bytes a touched row
 * for its slot and list entry. */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_cpu.h"
#include "amp_threads.h"
#include "amp_timer.h"

/* Samples, cells or rows per block of the sums: fixed, so the sums do not
 * depend on the thread count. */
#define BLOCK 4096

#define ADAM_BETA1 0.9
#define ADAM_BETA2 0.999
#define ADAM_EPS 1e-8

typedef struct gcp_ws {
    const amp_gcp_view *v;
    unsigned N, R;
    amp_gcp_loss loss;
    double delta;
    uint64_t cap;          /* samples */
    uint64_t *rows;        /* cap x N */
    double *x, *y;         /* cap */
    double *part;          /* block sums */
    uint64_t nparts;
    double *scratch;       /* R a thread */
    /* Lazy Adam's, per mode: each row's slot in the compact gradient
     * (-1: untouched this step), the touched rows by slot, their count,
     * the compact gradient (cap x R). */
    int lazy;
    int64_t *slot[AMP_MAX_MODES];
    uint64_t *touched[AMP_MAX_MODES];
    uint64_t ntouched[AMP_MAX_MODES];
    double *gc[AMP_MAX_MODES];
} gcp_ws;

static void ws_free(gcp_ws *w)
{
    amp_free(w->rows);
    amp_free(w->x);
    amp_free(w->y);
    amp_free(w->part);
    amp_free(w->scratch);
    for (unsigned m = 0; m < AMP_MAX_MODES; m++) {
        amp_free(w->slot[m]);
        amp_free(w->touched[m]);
        amp_free(w->gc[m]);
    }
    memset(w, 0, sizeof *w);
}

static amp_status ws_init(gcp_ws *w, const amp_gcp_view *v, unsigned R, amp_gcp_loss loss,
                          double delta, uint64_t cap, uint64_t nparts, amp_error *err)
{
    memset(w, 0, sizeof *w);
    w->v = v;
    w->N = v->nmodes;
    w->R = R;
    w->loss = loss;
    w->delta = delta;
    w->cap = cap;
    w->nparts = nparts;
    const int T = amp_max_threads();
    w->rows = amp_calloc(cap * w->N + 1, sizeof *w->rows, "GCP's sampled rows", err);
    w->x = w->rows ? amp_calloc(cap + 1, sizeof *w->x, "GCP's sampled values", err) : NULL;
    w->y = w->x ? amp_calloc(cap + 1, sizeof *w->y, "GCP's sampled derivatives", err) : NULL;
    w->part = w->y ? amp_calloc(nparts + 1, sizeof *w->part, "GCP's block sums", err) : NULL;
    w->scratch = w->part ? amp_calloc((size_t)T * R + 1, sizeof *w->scratch, "GCP's rows",
                                      err)
                         : NULL;
    if (w->scratch == NULL) {
        ws_free(w);
        return err->status;
    }
    return AMP_OK;
}

/* Lazy Adam's tables for the factors' rows (every slot empty). */
static amp_status ws_lazy(gcp_ws *w, amp_error *err)
{
    const amp_gcp_view *v = w->v;
    w->lazy = 1;
    for (unsigned m = 0; m < w->N; m++) {
        w->slot[m] = amp_alloc((v->rows[m] + 1) * sizeof(int64_t), "lazy Adam's row slots", err);
        w->touched[m] = w->slot[m] ? amp_calloc(w->cap + 1, sizeof(uint64_t),
                                                "lazy Adam's touched rows", err)
                                   : NULL;
        w->gc[m] = w->touched[m] ? amp_calloc(w->cap * w->R + 1, sizeof(double),
                                              "lazy Adam's gradient", err)
                                 : NULL;
        if (w->gc[m] == NULL)
            return err->status;
        for (uint64_t i = 0; i < v->rows[m]; i++)
            w->slot[m][i] = -1;
    }
    return AMP_OK;
}

/* Batch b's samples into w->rows and w->x. */
static amp_status draw(gcp_ws *w, const amp_gcp_batch *b, amp_error *err)
{
    const uint64_t s = b->snz + b->sz;
    if (s > w->cap)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "GCP: %llu samples, room for %llu",
                        (unsigned long long)s, (unsigned long long)w->cap);
    return amp_gcp_draw_batch(w->v, b, w->rows, w->x, err);
}

/* The model's value at a cell given by its rows. */
static inline double model_at(const double *const *A, unsigned N, unsigned R,
                              const uint64_t *rows)
{
    double s = 0;
    for (unsigned r = 0; r < R; r++) {
        double p = 1;
        for (unsigned m = 0; m < N; m++)
            p *= A[m][rows[m] * R + r];
        s += p;
    }
    return s;
}

static amp_status estimate(gcp_ws *w, const double *const *A, const amp_gcp_batch *b,
                           double *est, double *se, amp_error *err)
{
    AMP_CHECK(draw(w, b, err));
    const uint64_t s = b->snz + b->sz;
    const int64_t nb = (int64_t)((s + BLOCK - 1) / BLOCK);
    if ((uint64_t)nb * 4 > w->nparts)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "GCP: too few block sums");
    const unsigned N = w->N, R = w->R;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < nb; k++) {
        double s1 = 0, q1 = 0, s0 = 0, q0 = 0;
        const uint64_t hi = ((uint64_t)k + 1) * BLOCK < s ? ((uint64_t)k + 1) * BLOCK : s;
        for (uint64_t j = (uint64_t)k * BLOCK; j < hi; j++) {
            const double f = amp_gcp_f(w->loss, w->x[j], model_at(A, N, R, w->rows + j * N),
                                       w->delta);
            if (j < b->snz) {
                s1 += f;
                q1 += f * f;
            } else {
                s0 += f;
                q0 += f * f;
            }
        }
        double *p = w->part + (uint64_t)k * 4;
        p[0] = s1, p[1] = q1, p[2] = s0, p[3] = q0;
    }
    double S1 = 0, Q1 = 0, S0 = 0, Q0 = 0;
    for (int64_t k = 0; k < nb; k++) {
        const double *p = w->part + (uint64_t)k * 4;
        S1 += p[0], Q1 += p[1], S0 += p[2], Q0 += p[3];
    }
    *est = b->wnz * S1 + b->wz * S0;
    /* Each stratum's sample variance; the estimate's variance is
     * sum over strata of w^2 s var. */
    const double n1 = (double)b->snz, n0 = (double)b->sz;
    const double v1 = b->snz > 1 ? fmax(0, (Q1 - S1 * S1 / n1) / (n1 - 1)) : 0;
    const double v0 = b->sz > 1 ? fmax(0, (Q0 - S0 * S0 / n0) / (n0 - 1)) : 0;
    *se = sqrt(b->wnz * b->wnz * n1 * v1 + b->wz * b->wz * n0 * v0);
    return AMP_OK;
}

/* Batch b's gradient: into G (every row written) or, where w->lazy, into
 * w->gc, the touched rows only (w->slot, w->touched, w->ntouched filled;
 * the slots are emptied by lazy_adam). */
static amp_status gradient(gcp_ws *w, const double *const *A, const amp_gcp_batch *b,
                           double *const *G, amp_error *err)
{
    AMP_CHECK(draw(w, b, err));
    const unsigned N = w->N, R = w->R;
    const int64_t s = (int64_t)(b->snz + b->sz);
    const uint64_t snz = b->snz;
    double *y = w->y;
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < s; j++) {
        const double m = model_at(A, N, R, w->rows + (uint64_t)j * N);
        y[j] = ((uint64_t)j < snz ? b->wnz : b->wz) * amp_gcp_df(w->loss, w->x[j], m, w->delta);
    }
    for (unsigned n = 0; n < N; n++) {
        const int64_t *slot = w->lazy ? w->slot[n] : NULL;
        double *Gn = w->lazy ? w->gc[n] : G[n];
        uint64_t nrows = w->v->rows[n];
        if (w->lazy) {
            /* Slots in the order of first touch: one pass over the
             * samples, cheaper than the gradient it numbers. */
            uint64_t k = 0;
            for (int64_t j = 0; j < s; j++) {
                const uint64_t i = w->rows[(uint64_t)j * N + n];
                if (slot[i] < 0) {
                    w->slot[n][i] = (int64_t)k;
                    w->touched[n][k++] = i;
                }
            }
            w->ntouched[n] = nrows = k;
        }
#pragma omp parallel
        {
            int tid, nt;
            uint64_t lo, hi;
            amp_thread_range(nrows, &tid, &nt, &lo, &hi);
            double *z = w->scratch + (size_t)tid * R;
            memset(Gn + lo * R, 0, (hi - lo) * R * sizeof *Gn);
            for (int64_t j = 0; j < s; j++) {
                const uint64_t *rows = w->rows + (uint64_t)j * N;
                const uint64_t i = slot ? (uint64_t)slot[rows[n]] : rows[n];
                if (i < lo || i >= hi)
                    continue;
                for (unsigned r = 0; r < R; r++)
                    z[r] = y[j];
                for (unsigned m = 0; m < N; m++) {
                    if (m == n)
                        continue;
                    const double *a = A[m] + rows[m] * R;
                    for (unsigned r = 0; r < R; r++)
                        z[r] *= a[r];
                }
                double *g = Gn + i * R;
                for (unsigned r = 0; r < R; r++)
                    g[r] += z[r];
            }
        }
    }
    return AMP_OK;
}

/* The Gram (kind 0: R x R, A'A) or column sums (kind 1: R) of mode m's
 * factor, summed over fixed blocks of ordinals, the blocks in order. */
static amp_status ordinal_sums(const gcp_ws *w, const double *A, unsigned m, int kind,
                               double *out, amp_error *err)
{
    const amp_gcp_view *v = w->v;
    const unsigned R = w->R;
    const size_t per = kind == 0 ? (size_t)R * R : R;
    const int64_t nb = (int64_t)((v->rows[m] + BLOCK - 1) / BLOCK);
    double *part = amp_calloc((size_t)nb * per + 1, sizeof *part, "GCP's row sums", err);
    if (part == NULL)
        return err->status;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < nb; k++) {
        double *p = part + (size_t)k * per;
        const uint64_t hi =
            ((uint64_t)k + 1) * BLOCK < v->rows[m] ? ((uint64_t)k + 1) * BLOCK : v->rows[m];
        for (uint64_t o = (uint64_t)k * BLOCK; o < hi; o++) {
            const double *a = A + v->row_of[m][o] * R;
            if (kind == 0)
                for (unsigned r = 0; r < R; r++)
                    for (unsigned q = 0; q < R; q++)
                        p[r * R + q] += a[r] * a[q];
            else
                for (unsigned r = 0; r < R; r++)
                    p[r] += a[r];
        }
    }
    for (size_t i = 0; i < per; i++) {
        double s = 0;
        for (int64_t k = 0; k < nb; k++)
            s += part[(size_t)k * per + i];
        out[i] = s;
    }
    amp_free(part);
    return AMP_OK;
}

static amp_status exact(gcp_ws *w, const double *const *A, int kind, double *out,
                        amp_error *err)
{
    const amp_gcp_view *v = w->v;
    const unsigned N = w->N, R = w->R;
    *out = NAN;
    if (kind == AMP_GCP_EXACT_NONE)
        return AMP_OK;
    const uint64_t n = kind == AMP_GCP_EXACT_ENUMERATE ? v->cells : v->nnz;
    const int64_t nb = (int64_t)((n + BLOCK - 1) / BLOCK);
    double *part = amp_calloc((size_t)nb + 1, sizeof *part, "GCP's exact loss", err);
    if (part == NULL)
        return err->status;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < nb; k++) {
        uint64_t rows[AMP_MAX_MODES];
        const uint64_t lo = (uint64_t)k * BLOCK, hi = lo + BLOCK < n ? lo + BLOCK : n;
        double s = 0;
        if (kind == AMP_GCP_EXACT_ENUMERATE) {
            /* Every cell in key order, merged with the stored ones. */
            uint64_t a = 0, z = v->nnz;
            while (a < z) {
                uint64_t mid = a + (z - a) / 2;
                if (v->key[mid] < lo)
                    a = mid + 1;
                else
                    z = mid;
            }
            for (uint64_t cell = lo; cell < hi; cell++) {
                double x = 0;
                while (a < v->nnz && v->key[a] == cell)
                    x += v->val[a++];
                amp_gcp_rows_of(v, cell, rows);
                s += amp_gcp_f(w->loss, x, model_at(A, N, R, rows), w->delta);
            }
        } else {
            /* The stored cells' loss, less what the closed form counts
             * for them as zeros. */
            for (uint64_t j = lo; j < hi; j++) {
                amp_gcp_rows_of(v, v->key[j], rows);
                const double m = model_at(A, N, R, rows);
                s += amp_gcp_f(w->loss, v->val[j], m, w->delta) -
                     amp_gcp_f(w->loss, 0, m, w->delta);
            }
        }
        part[k] = s;
    }
    double total = 0;
    for (int64_t k = 0; k < nb; k++)
        total += part[k];
    amp_free(part);
    if (kind == AMP_GCP_EXACT_CLOSED) {
        /* Every cell's f(0, m): gaussian m^2, |M|^2 = sum_rs prod_n
         * (A_n'A_n)_rs; poisson m, sum(M) = sum_r prod_n colsum_n(r). */
        const int gauss = w->loss == AMP_GCP_GAUSSIAN;
        const size_t per = gauss ? (size_t)R * R : R;
        double *acc = amp_calloc(per, sizeof *acc, "GCP's closed form", err);
        double *one = acc ? amp_calloc(per, sizeof *one, "GCP's closed form", err) : NULL;
        if (one == NULL) {
            amp_free(acc);
            return err->status;
        }
        for (size_t i = 0; i < per; i++)
            acc[i] = 1;
        amp_status rc = AMP_OK;
        for (unsigned m = 0; m < N && rc == AMP_OK; m++) {
            rc = ordinal_sums(w, A[m], m, gauss ? 0 : 1, one, err);
            for (size_t i = 0; i < per; i++)
                acc[i] *= one[i];
        }
        double all = 0;
        for (size_t i = 0; i < per; i++)
            all += acc[i];
        amp_free(acc);
        amp_free(one);
        AMP_CHECK(rc);
        total += all;
    }
    *out = total;
    return AMP_OK;
}

/* The most samples of a plan's batches, and the block sums they need. */
static void plan_sizes(const amp_gcp_plan *p, uint64_t *cap, uint64_t *parts)
{
    uint64_t g = p->grad_nz + p->grad_z, l = p->loss_nz + p->loss_z;
    *cap = g > l ? g : l;
    *parts = (*cap + BLOCK - 1) / BLOCK * 4;
}

amp_status amp_cpu_gcp_gradient(const amp_gcp_view *v, const double *const *A, unsigned R,
                                amp_gcp_loss loss, double delta, const amp_gcp_batch *b,
                                double *const *G, amp_error *err)
{
    gcp_ws w;
    const uint64_t s = b->snz + b->sz;
    AMP_CHECK(ws_init(&w, v, R, loss, delta, s, (s + BLOCK - 1) / BLOCK * 4, err));
    amp_status rc = gradient(&w, A, b, G, err);
    ws_free(&w);
    return rc;
}

amp_status amp_cpu_gcp_estimate(const amp_gcp_view *v, const double *const *A, unsigned R,
                                amp_gcp_loss loss, double delta, const amp_gcp_batch *b,
                                double *est, double *se, amp_error *err)
{
    gcp_ws w;
    const uint64_t s = b->snz + b->sz;
    AMP_CHECK(ws_init(&w, v, R, loss, delta, s, (s + BLOCK - 1) / BLOCK * 4, err));
    amp_status rc = estimate(&w, A, b, est, se, err);
    ws_free(&w);
    return rc;
}

amp_status amp_cpu_gcp_exact(const amp_gcp_view *v, const double *const *A, unsigned R,
                             amp_gcp_loss loss, double delta, int kind, double *loss_out,
                             amp_error *err)
{
    gcp_ws w;
    AMP_CHECK(ws_init(&w, v, R, loss, delta, 1, 4, err));
    amp_status rc = exact(&w, A, kind, loss_out, err);
    ws_free(&w);
    return rc;
}

/* One entry's Adam step, the same for the dense and the lazy update. */
static inline void adam_entry(double *a, double g, double *m, double *v, double step,
                              double b1t, double b2t, double lower)
{
    const double mm = ADAM_BETA1 * *m + (1 - ADAM_BETA1) * g;
    const double vv = ADAM_BETA2 * *v + (1 - ADAM_BETA2) * g * g;
    *m = mm;
    *v = vv;
    const double x = *a - step * (mm / b1t) / (sqrt(vv / b2t) + ADAM_EPS);
    *a = x > lower ? x : lower;
}

void amp_cpu_gcp_adam(double *A, const double *G, double *M, double *V, uint64_t n,
                      double step, double b1t, double b2t, double lower)
{
    const int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < nn; i++)
        adam_entry(A + i, G[i], M + i, V + i, step, b1t, b2t, lower);
}

/* Lazy Adam on the rows of mode n that the last gradient touched, their
 * slots emptied for the next step. */
static void lazy_adam(gcp_ws *w, unsigned n, double *A, double *M, double *V, double step,
                      double b1t, double b2t, double lower)
{
    const unsigned R = w->R;
    const int64_t k = (int64_t)w->ntouched[n];
    const uint64_t *touched = w->touched[n];
    const double *gc = w->gc[n];
    int64_t *slot = w->slot[n];
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < k; q++) {
        const uint64_t e = touched[q] * R;
        for (unsigned r = 0; r < R; r++)
            adam_entry(A + e + r, gc[(uint64_t)q * R + r], M + e + r, V + e + r, step, b1t, b2t,
                       lower);
        slot[touched[q]] = -1;
    }
    w->ntouched[n] = 0;
}

/* One Adam step (t: its count, from 1) of batch b on the factors, dense
 * (G: the gradient's room) or lazy (w->lazy). */
static amp_status adam_step(gcp_ws *w, double *const *A, double *const *G, double *const *M,
                            double *const *V, const amp_gcp_batch *b, uint64_t t, double step,
                            double lower, double *grad_seconds, amp_error *err)
{
    const double t0 = amp_now();
    AMP_CHECK(gradient(w, (const double *const *)A, b, G, err));
    *grad_seconds += amp_now() - t0;
    const double b1t = 1 - pow(ADAM_BETA1, (double)t);
    const double b2t = 1 - pow(ADAM_BETA2, (double)t);
    for (unsigned m = 0; m < w->N; m++) {
        if (w->lazy)
            lazy_adam(w, m, A[m], M[m], V[m], step, b1t, b2t, lower);
        else
            amp_cpu_gcp_adam(A[m], G[m], M[m], V[m], w->v->rows[m] * w->R, step, b1t, b2t,
                             lower);
    }
    return AMP_OK;
}

amp_status amp_cpu_gcp_steps(const amp_gcp_view *v, double *const *A, double *const *M,
                             double *const *V, unsigned R, amp_gcp_loss loss, double delta,
                             amp_gcp_adam adam, const amp_gcp_batch *b, unsigned steps,
                             uint64_t t0, double rate, double lower, amp_error *err)
{
    uint64_t cap = 1;
    for (unsigned i = 0; i < steps; i++)
        cap = b[i].snz + b[i].sz > cap ? b[i].snz + b[i].sz : cap;
    gcp_ws w;
    double *G[AMP_MAX_MODES] = {0};
    amp_status rc = ws_init(&w, v, R, loss, delta, cap, 4, err);
    if (rc != AMP_OK)
        return rc;
    if (adam == AMP_GCP_ADAM_LAZY)
        AMP_CHECK_GOTO(ws_lazy(&w, err), rc, done);
    for (unsigned m = 0; m < v->nmodes && adam == AMP_GCP_ADAM_DENSE; m++) {
        G[m] = amp_calloc(v->rows[m] * R + 1, sizeof(double), "GCP's gradient", err);
        if (G[m] == NULL) {
            rc = err->status;
            goto done;
        }
    }
    double seconds = 0;
    for (unsigned i = 0; i < steps; i++)
        AMP_CHECK_GOTO(adam_step(&w, A, G, M, V, &b[i], t0 + 1 + i, rate, lower, &seconds, err),
                       rc, done);
done:
    for (unsigned m = 0; m < AMP_MAX_MODES; m++)
        amp_free(G[m]);
    ws_free(&w);
    return rc;
}

amp_status amp_cpu_gcp_check_values(const amp_gcp_view *v, amp_gcp_loss loss, uint64_t *bad,
                                    const char **what)
{
    for (uint64_t k = 0; k < v->nnz; k++)
        if (!amp_gcp_value_ok(loss, v->val[k], what)) {
            *bad = k;
            return AMP_ERR_RANGE;
        }
    amp_gcp_value_ok(loss, 0, what);
    return AMP_OK;
}

amp_status amp_cpu_gcp(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c, amp_error *err)
{
    const unsigned N = t->nmodes, R = c->rank;
    if (R != o->rank)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have rank %u, not %u", R, o->rank);
    const amp_gcp_opts *go = &o->gcp;
    if (go->epoch_iters == 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "GCP needs at least one step an epoch");
    amp_gcp_source src;
    double t0 = amp_now();
    memset(c->seconds, 0, sizeof c->seconds);
    AMP_CHECK(amp_gcp_source_build(t, o->threads, &src, err));
    const amp_gcp_view *v = &src.view;
    amp_status rc = AMP_OK;
    gcp_ws w;
    memset(&w, 0, sizeof w);
    double *G[AMP_MAX_MODES] = {0}, *Mo[AMP_MAX_MODES] = {0}, *Vo[AMP_MAX_MODES] = {0};
    double *A0[AMP_MAX_MODES] = {0}, *M0[AMP_MAX_MODES] = {0}, *V0[AMP_MAX_MODES] = {0};
    amp_gcp_plan p;
    {
        uint64_t bad;
        const char *what;
        if (amp_cpu_gcp_check_values(v, go->loss, &bad, &what) != AMP_OK) {
            rc = AMP_FAIL(err, AMP_ERR_RANGE, "--loss %s models %s data, and the tensor holds "
                          "the value %.17g", amp_gcp_loss_names[go->loss], what, v->val[bad]);
            goto done;
        }
    }
    AMP_CHECK_GOTO(amp_gcp_resolve(go, v, &p, err), rc, done);
    {
        uint64_t cap, parts;
        plan_sizes(&p, &cap, &parts);
        AMP_CHECK_GOTO(ws_init(&w, v, R, go->loss, go->huber_delta, cap, parts, err), rc, done);
        if (go->adam == AMP_GCP_ADAM_LAZY)
            AMP_CHECK_GOTO(ws_lazy(&w, err), rc, done);
    }
    for (unsigned m = 0; m < N; m++) {
        const size_t n = (size_t)c->rows[m] * R + 1;
        /* Lazy Adam's gradient is compact (the workspace's). */
        if (go->adam == AMP_GCP_ADAM_DENSE &&
            (G[m] = amp_calloc(n, sizeof(double), "GCP's gradient", err)) == NULL) {
            rc = err->status;
            goto done;
        }
        Mo[m] = amp_calloc(n, sizeof(double), "Adam's moments", err);
        Vo[m] = Mo[m] ? amp_calloc(n, sizeof(double), "Adam's moments", err) : NULL;
        A0[m] = Vo[m] ? amp_calloc(n, sizeof(double), "GCP's saved factors", err) : NULL;
        M0[m] = A0[m] ? amp_calloc(n, sizeof(double), "Adam's saved moments", err) : NULL;
        V0[m] = M0[m] ? amp_calloc(n, sizeof(double), "Adam's saved moments", err) : NULL;
        if (V0[m] == NULL) {
            rc = err->status;
            goto done;
        }
    }
    c->seconds[AMP_PHASE_UPDATE] += amp_now() - t0;

    AMP_CHECK_GOTO(amp_gcp_start(v, go->scale_start ? t->norm_sq : -1, R, c->A, err), rc, done);
    const double *const *A = (const double *const *)c->A;
    const amp_gcp_batch lb = {amp_gcp_step_key(o->seed, 0), p.loss_nz, p.loss_z, p.loss_wnz,
                              p.loss_wz};
    double now = amp_now();
    double f_prev, se;
    AMP_CHECK_GOTO(estimate(&w, A, &lb, &f_prev, &se, err), rc, done);
    c->seconds[AMP_PHASE_FIT] += amp_now() - now;
    c->gcp_loss = f_prev;
    c->gcp_stderr = se;
    c->gcp_exact = NAN;
    c->gcp_fails = 0;
    c->gcp_failed = 0;
    c->iters = 0;
    c->converged = 0;
    c->stopped = 0;
    c->fit = f_prev;
    for (unsigned m = 0; m < N; m++) {
        const size_t bytes = (size_t)c->rows[m] * R * sizeof(double);
        memcpy(A0[m], c->A[m], bytes);
    }
    uint64_t adam_t = 0;
    unsigned fails = 0;
    for (unsigned e = 0; e < o->max_iters; e++) {
        const double t_epoch = amp_now();
        const double step = go->rate * pow(go->decay, fails);
        for (unsigned it = 0; it < go->epoch_iters; it++) {
            const uint64_t id = 1 + (uint64_t)e * go->epoch_iters + it;
            const amp_gcp_batch gb = {amp_gcp_step_key(o->seed, id), p.grad_nz, p.grad_z,
                                      p.grad_wnz, p.grad_wz};
            now = amp_now();
            double grad = 0;
            adam_t++;
            AMP_CHECK_GOTO(adam_step(&w, c->A, G, Mo, Vo, &gb, adam_t, step, p.lower, &grad,
                                     err), rc, done);
            c->seconds[AMP_PHASE_MTTKRP] += grad;
            c->seconds[AMP_PHASE_UPDATE] += amp_now() - now - grad;
        }
        now = amp_now();
        double f;
        AMP_CHECK_GOTO(estimate(&w, A, &lb, &f, &se, err), rc, done);
        AMP_CHECK_GOTO(exact(&w, A, p.exact, &c->gcp_exact, err), rc, done);
        c->seconds[AMP_PHASE_FIT] += amp_now() - now;
        const int failed = !(f <= f_prev);
        const double before = f_prev;
        c->gcp_loss = f;
        c->gcp_stderr = se;
        c->gcp_rate = step;
        c->gcp_failed = failed;
        c->iters = e + 1;
        if (failed) {
            /* Back to the epoch's start: factors, moments, Adam's count. */
            fails++;
            for (unsigned m = 0; m < N; m++) {
                const size_t bytes = (size_t)c->rows[m] * R * sizeof(double);
                memcpy(c->A[m], A0[m], bytes);
                memcpy(Mo[m], M0[m], bytes);
                memcpy(Vo[m], V0[m], bytes);
            }
            adam_t -= go->epoch_iters;
        } else {
            for (unsigned m = 0; m < N; m++) {
                const size_t bytes = (size_t)c->rows[m] * R * sizeof(double);
                memcpy(A0[m], c->A[m], bytes);
                memcpy(M0[m], Mo[m], bytes);
                memcpy(V0[m], Vo[m], bytes);
            }
            f_prev = f;
        }
        if (amp_gcp_epoch_end(o, c, e, f, before, f_prev, failed, fails, amp_now() - t_epoch))
            break;
    }
    c->fit = f_prev;
    rc = amp_gcp_finish(v, R, c->A, c->lambda, err);
done:
    for (unsigned m = 0; m < N; m++) {
        amp_free(G[m]);
        amp_free(Mo[m]);
        amp_free(Vo[m]);
        amp_free(A0[m]);
        amp_free(M0[m]);
        amp_free(V0[m]);
    }
    ws_free(&w);
    amp_gcp_source_free(&src);
    return rc;
}
