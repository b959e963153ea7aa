/* CP-ALS on the CPU (Kolda and Bader; the papers' Algorithm 1).
 *
 * Per iteration and mode d: M = MTTKRP(d); V = the Hadamard product of the
 * other modes' Gram matrices; A_d = M V^-1 by Cholesky (LAPACK), or by the
 * pseudo-inverse when V is singular; columns normalized into lambda (2-norm
 * on the first iteration, max-norm after, as SPLATT and the Tensor Toolbox
 * do); the Gram of A_d updated. The fit never forms the model:
 * |X - model|^2 = |X|^2 + |model|^2 - 2 <X, model>, with <X, model> from
 * the last mode's MTTKRP and |model|^2 from the Gram matrices.
 *
 * Every reduction runs over a fixed partition in a fixed order, so a run
 * is the same bit for bit for the same seed and thread count. */
#include <config.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cblas.h>
#include <lapacke.h>

#include "amp_alloc.h"
#include "amp_cpd.h"
#include "amp_timer.h"

#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
void openblas_set_num_threads(int n);
#endif

void amp_cpd_opts_init(amp_cpd_opts *o)
{
    memset(o, 0, sizeof *o);
    o->rank = 16;
    o->max_iters = 50;
    o->tol = 1e-5;
    o->seed = 1;
    o->precision = AMP_PRECISION_F64;
}

static int thread_count(int threads)
{
#ifdef _OPENMP
    return threads > 0 ? threads : omp_get_max_threads();
#else
    (void)threads;
    return 1;
#endif
}

/* ---- factors ------------------------------------------------------------- */

void amp_cpd_free(amp_cpd *c)
{
    for (unsigned m = 0; m < c->nmodes; m++)
        amp_huge_free(c->A[m], (size_t)c->rows[m] * c->rank * sizeof(double) + 1);
    free(c->lambda);
    memset(c, 0, sizeof *c);
}

static amp_status cpd_alloc(const amp_tensor *t, unsigned rank, amp_cpd *c, amp_error *err)
{
    memset(c, 0, sizeof *c);
    c->nmodes = t->nmodes;
    c->rank = rank;
    c->lambda = malloc((size_t)rank * sizeof *c->lambda);
    if (c->lambda == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    for (unsigned r = 0; r < rank; r++)
        c->lambda[r] = 1;
    for (unsigned m = 0; m < t->nmodes; m++) {
        c->rows[m] = t->rows[m];
        size_t bytes;
        if (amp_mul_size((size_t)t->rows[m] * sizeof(double), rank, &bytes, err) != AMP_OK ||
            (c->A[m] = amp_huge_alloc(bytes + 1, "a factor matrix", err)) == NULL) {
            amp_cpd_free(c);
            return err ? err->status : AMP_ERR_NOMEM;
        }
    }
    return AMP_OK;
}

/* A counter-based generator: entry (m, i, r) depends on nothing else, so
 * the factors are the same however the rows are split among threads. */
static inline uint64_t mix64(uint64_t z)
{
    z += UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

amp_status amp_cpd_init_random(const amp_tensor *t, unsigned rank, uint64_t seed, amp_cpd *c,
                               amp_error *err)
{
    AMP_CHECK(cpd_alloc(t, rank, c, err));
    for (unsigned m = 0; m < t->nmodes; m++) {
        double *A = c->A[m];
        uint64_t base = mix64(seed ^ mix64(m + 1));
        int64_t n = (int64_t)(c->rows[m] * rank);
#pragma omp parallel for schedule(static)
        for (int64_t k = 0; k < n; k++)
            A[k] = (double)(mix64(base + (uint64_t)k) >> 11) * 0x1.0p-53;
    }
    return AMP_OK;
}

/* ---- the small dense algebra ------------------------------------------- */

static void gram(const double *A, uint64_t rows, unsigned R, double *G)
{
    if (rows == 0) {
        memset(G, 0, (size_t)R * R * sizeof *G);
        return;
    }
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)R, (int)rows, 1.0, A, (int)R, 0.0,
                G, (int)R);
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = 0; j < i; j++)
            G[i * R + j] = G[j * R + i];
}

/* A = M V^+ by the eigendecomposition of V (symmetric), with eigenvalues
 * below R eps max|w| taken as zero. */
static amp_status solve_pinv(const double *V, unsigned R, const double *M, uint64_t rows,
                             double *A, amp_error *err)
{
    double *Q = malloc((size_t)R * R * sizeof *Q), *w = malloc((size_t)R * sizeof *w);
    double *P = malloc((size_t)R * R * sizeof *P);
    amp_status rc = AMP_OK;
    if (Q == NULL || w == NULL || P == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
    memcpy(Q, V, (size_t)R * R * sizeof *Q);
    lapack_int info = LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)R, Q, (lapack_int)R, w);
    if (info != 0)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_INTERNAL, "the eigensolver (dsyev) failed on "
                       "the %ux%u Gram product (info %d)", R, R, (int)info);
    double wmax = 0;
    for (unsigned i = 0; i < R; i++)
        if (fabs(w[i]) > wmax)
            wmax = fabs(w[i]);
    double cut = (double)R * DBL_EPSILON * wmax;
    /* P = Q diag(1/w) Q^T over the eigenvalues kept; Q's columns are the
     * eigenvectors. */
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = 0; j < R; j++) {
            double s = 0;
            for (unsigned k = 0; k < R; k++)
                if (w[k] > cut)
                    s += Q[i * R + k] * Q[j * R + k] / w[k];
            P[i * R + j] = s;
        }
    if (rows > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)R, (int)R, 1.0,
                    M, (int)R, P, (int)R, 0.0, A, (int)R);
done:
    free(Q);
    free(w);
    free(P);
    return rc;
}

/* A = M V^-1. In column-major terms the row-major M is M^T (R x rows), so
 * one Cholesky solve with rows right-hand sides gives A^T = V^-1 M^T in
 * place, which is the row-major A. */
static amp_status solve(const double *V, unsigned R, const double *M, uint64_t rows, double *A,
                        double *L, int *pinv_used, amp_error *err)
{
    memcpy(L, V, (size_t)R * R * sizeof *L);
    lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)R, L, (lapack_int)R);
    if (info == 0) {
        memcpy(A, M, (size_t)rows * R * sizeof *A);
        if (rows == 0)
            return AMP_OK;
        info = LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)R, (lapack_int)rows, L,
                              (lapack_int)R, A, (lapack_int)R);
        if (info != 0)
            return AMP_FAIL(err, AMP_ERR_INTERNAL, "the Cholesky solve (dpotrs) failed "
                            "(info %d)", (int)info);
        return AMP_OK;
    }
    if (info < 0)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "dpotrf rejected argument %d", (int)-info);
    *pinv_used = 1;
    return solve_pinv(V, R, M, rows, A, err);
}

/* Column sums over a fixed split of the rows: thread t sums its rows into
 * part[t], and the parts are added in order. op 0: sum of squares of A;
 * 1: max |A|; 2: sum of A .* B. */
static void column_reduce(const double *A, const double *B, uint64_t rows, unsigned R, int T,
                          int op, double *part, double *out)
{
#pragma omp parallel num_threads(T)
    {
        int me = 0;
#ifdef _OPENMP
        me = omp_get_thread_num();
#endif
        double *p = part + (size_t)me * R;
        for (unsigned r = 0; r < R; r++)
            p[r] = 0;
        uint64_t a = rows * (uint64_t)me / (uint64_t)T, b = rows * (uint64_t)(me + 1) / (uint64_t)T;
        for (uint64_t i = a; i < b; i++) {
            const double *x = A + i * R;
            if (op == 0) {
#pragma omp simd
                for (unsigned r = 0; r < R; r++)
                    p[r] += x[r] * x[r];
            } else if (op == 1) {
                for (unsigned r = 0; r < R; r++)
                    p[r] = fabs(x[r]) > p[r] ? fabs(x[r]) : p[r];
            } else {
                const double *y = B + i * R;
#pragma omp simd
                for (unsigned r = 0; r < R; r++)
                    p[r] += x[r] * y[r];
            }
        }
    }
    for (unsigned r = 0; r < R; r++) {
        double s = 0;
        for (int t = 0; t < T; t++) {
            double v = part[(size_t)t * R + r];
            s = op == 1 ? (v > s ? v : s) : s + v;
        }
        out[r] = s;
    }
}

static void normalize(double *A, uint64_t rows, unsigned R, int first, int T, double *part,
                      double *lambda)
{
    column_reduce(A, NULL, rows, R, T, first ? 0 : 1, part, lambda);
    for (unsigned r = 0; r < R; r++) {
        if (first)
            lambda[r] = sqrt(lambda[r]);
        else if (lambda[r] < 1)
            lambda[r] = 1;   /* max-norm never scales a column up */
    }
    double *inv = part;   /* free again */
    for (unsigned r = 0; r < R; r++)
        inv[r] = lambda[r] > 0 ? 1 / lambda[r] : 1;
    int64_t n = (int64_t)rows;
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t i = 0; i < n; i++) {
        double *x = A + (uint64_t)i * R;
#pragma omp simd
        for (unsigned r = 0; r < R; r++)
            x[r] *= inv[r];
    }
}

/* |model|^2 = lambda^T (G_0 .* ... .* G_{N-1}) lambda. */
static double model_norm_sq(double *const *G, unsigned N, unsigned R, const double *lambda)
{
    double s = 0;
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = 0; j < R; j++) {
            double h = lambda[i] * lambda[j];
            for (unsigned m = 0; m < N; m++)
                h *= G[m][i * R + j];
            s += h;
        }
    return s;
}

/* ---- the iteration ------------------------------------------------------ */

typedef struct als_work {
    int T;
    unsigned R;
    uint64_t max_rows;
    size_t m_bytes;             /* of M and M32 alike */
    double *M;                  /* MTTKRP result, f64 */
    float *M32;                 /* its f32 form, when the kernel is f32 */
    float *A32[AMP_MAX_MODES];  /* f32 factors for the f32 kernel */
    double *G[AMP_MAX_MODES];
    double *V, *L, *part;
    amp_mttkrp_ws *ws;
} als_work;

static void work_free(als_work *w, unsigned N)
{
    amp_huge_free(w->M, w->m_bytes);
    amp_huge_free(w->M32, w->m_bytes);
    for (unsigned m = 0; m < N; m++) {
        free(w->A32[m]);
        free(w->G[m]);
    }
    free(w->V);
    free(w->L);
    free(w->part);
    amp_mttkrp_ws_free(w->ws);
}

static amp_status work_new(const amp_tensor *t, const amp_cpd_opts *o, als_work *w,
                           amp_error *err)
{
    unsigned N = t->nmodes, R = o->rank;
    memset(w, 0, sizeof *w);
    w->T = thread_count(o->threads);
    w->R = R;
    for (unsigned m = 0; m < N; m++)
        if (t->rows[m] > w->max_rows)
            w->max_rows = t->rows[m];
    size_t rr = (size_t)R * R * sizeof(double);
    w->m_bytes = (size_t)w->max_rows * R * sizeof(double) + 1;
    w->M = amp_huge_alloc(w->m_bytes, "the MTTKRP output", err);
    w->V = malloc(rr);
    w->L = malloc(rr);
    w->part = malloc((size_t)(w->T + 1) * R * sizeof(double));
    int ok = w->M && w->V && w->L && w->part;
    for (unsigned m = 0; m < N && ok; m++)
        ok = (w->G[m] = malloc(rr)) != NULL;
    if (ok && o->precision == AMP_PRECISION_F32) {
        w->M32 = amp_huge_alloc(w->m_bytes, "the MTTKRP output", err);
        ok = w->M32 != NULL;
        for (unsigned m = 0; m < N && ok; m++)
            ok = (w->A32[m] = malloc((size_t)t->rows[m] * R * sizeof(float) + 1)) != NULL;
    }
    if (ok && amp_mttkrp_ws_new(w->T, R, &w->ws, err) != AMP_OK)
        ok = 0;
    if (!ok) {
        work_free(w, N);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the CP-ALS work space");
    }
    return AMP_OK;
}

static void to_f32(const double *src, float *dst, uint64_t n, int T)
{
    int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t i = 0; i < nn; i++)
        dst[i] = (float)src[i];
}

static void to_f64(const float *src, double *dst, uint64_t n, int T)
{
    int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t i = 0; i < nn; i++)
        dst[i] = src[i];
}

/* M = MTTKRP(d) in the precision asked for, delivered in f64. */
static void mttkrp(const amp_tensor *t, unsigned d, const amp_cpd *c, als_work *w, int f32)
{
    if (f32) {
        amp_mttkrp_f32(t, d, (const float *const *)w->A32, c->rank, w->M32, w->ws);
        to_f64(w->M32, w->M, t->rows[d] * c->rank, w->T);
    } else {
        amp_mttkrp_f64(t, d, (const double *const *)c->A, c->rank, w->M, w->ws);
    }
}

static void set_blas_threads(int T)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(T);
#else
    (void)T;
#endif
}

amp_status amp_cpd_als(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c,
                       amp_error *err)
{
    const unsigned N = t->nmodes, R = c->rank;
    const int f32 = o->precision == AMP_PRECISION_F32;
    als_work w;
    if (R != o->rank)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have rank %u, not %u", R, o->rank);
    AMP_CHECK(work_new(t, o, &w, err));
    set_blas_threads(w.T);
    amp_status rc = AMP_OK;
    double now;
    for (unsigned m = 0; m < N; m++) {
        gram(c->A[m], c->rows[m], R, w.G[m]);
        if (f32)
            to_f32(c->A[m], w.A32[m], c->rows[m] * R, w.T);
    }
    memset(c->seconds, 0, sizeof c->seconds);
    double old_fit = 0, norm_x = sqrt(t->norm_sq);
    c->iters = 0;
    for (unsigned it = 0; it < o->max_iters; it++) {
        double t_iter = amp_now();
        for (unsigned d = 0; d < N; d++) {
            now = amp_now();
            mttkrp(t, d, c, &w, f32);
            c->seconds[AMP_PHASE_MTTKRP] += amp_now() - now;

            now = amp_now();
            for (size_t k = 0; k < (size_t)R * R; k++)
                w.V[k] = 1;
            for (unsigned m = 0; m < N; m++)
                if (m != d)
                    for (size_t k = 0; k < (size_t)R * R; k++)
                        w.V[k] *= w.G[m][k];
            AMP_CHECK_GOTO(solve(w.V, R, w.M, c->rows[d], c->A[d], w.L, &c->pinv_used, err),
                           rc, done);
            c->seconds[AMP_PHASE_SOLVE] += amp_now() - now;

            now = amp_now();
            normalize(c->A[d], c->rows[d], R, it == 0, w.T, w.part, c->lambda);
            if (f32)
                to_f32(c->A[d], w.A32[d], c->rows[d] * R, w.T);
            c->seconds[AMP_PHASE_NORMALIZE] += amp_now() - now;

            now = amp_now();
            gram(c->A[d], c->rows[d], R, w.G[d]);
            c->seconds[AMP_PHASE_GRAM] += amp_now() - now;
        }
        /* <X, model> = sum_r lambda_r sum_i A_{N-1}(i, r) M(i, r), M being
         * the last mode's MTTKRP, taken before its factor was solved for. */
        now = amp_now();
        double *colsum = w.part + (size_t)w.T * R;
        column_reduce(c->A[N - 1], w.M, c->rows[N - 1], R, w.T, 2, w.part, colsum);
        double inner = 0;
        for (unsigned r = 0; r < R; r++)
            inner += c->lambda[r] * colsum[r];
        double resid = t->norm_sq + model_norm_sq(w.G, N, R, c->lambda) - 2 * inner;
        double fit = norm_x > 0 ? 1 - sqrt(resid > 0 ? resid : 0) / norm_x : 0;
        double delta = fabs(fit - old_fit);
        c->seconds[AMP_PHASE_FIT] += amp_now() - now;
        c->fit = fit;
        c->iters = it + 1;
        if (o->on_iter)
            o->on_iter(o->ctx, it + 1, fit, delta, amp_now() - t_iter);
        if (it > 0 && delta < o->tol)
            break;
        old_fit = fit;
    }
done:
    work_free(&w, N);
    return rc;
}

/* ---- measurement and checking -------------------------------------------- */

amp_status amp_cpd_time_mttkrp(const amp_tensor *t, const amp_cpd_opts *o, const amp_cpd *c,
                               double *seconds, amp_error *err)
{
    als_work w;
    const int f32 = o->precision == AMP_PRECISION_F32;
    AMP_CHECK(work_new(t, o, &w, err));
    for (unsigned m = 0; m < t->nmodes; m++) {
        seconds[m] = 0;
        if (f32)
            to_f32(c->A[m], w.A32[m], c->rows[m] * c->rank, w.T);
    }
    for (unsigned k = 0; k < o->max_iters; k++)
        for (unsigned d = 0; d < t->nmodes; d++) {
            double now = amp_now();
            mttkrp(t, d, c, &w, f32);
            seconds[d] += amp_now() - now;
        }
    work_free(&w, t->nmodes);
    return AMP_OK;
}

amp_status amp_cpd_check_mttkrp(const amp_tensor *t, const amp_cpd_opts *o, const amp_cpd *c,
                                double *rel_err, amp_error *err)
{
    als_work w;
    const int f32 = o->precision == AMP_PRECISION_F32;
    AMP_CHECK(work_new(t, o, &w, err));
    amp_status rc = AMP_OK;
    double *ref = amp_huge_alloc((size_t)w.max_rows * c->rank * sizeof(double) + 1,
                                 "the reference MTTKRP", err);
    if (ref == NULL) {
        work_free(&w, t->nmodes);
        return AMP_ERR_NOMEM;
    }
    for (unsigned m = 0; m < t->nmodes; m++)
        if (f32)
            to_f32(c->A[m], w.A32[m], c->rows[m] * c->rank, w.T);
    for (unsigned d = 0; d < t->nmodes && rc == AMP_OK; d++) {
        mttkrp(t, d, c, &w, f32);
        /* The reference reads another mode's copy: a different order of
         * the same nonzeros, decoded the general way. */
        rc = amp_mttkrp_reference(t, (d + 1) % t->nmodes, d, (const double *const *)c->A,
                                  c->rank, ref, err);
        double diff = 0, scale = 0;
        for (uint64_t k = 0; k < t->rows[d] * c->rank; k++) {
            double e = fabs(w.M[k] - ref[k]);
            diff = e > diff ? e : diff;
            scale = fabs(ref[k]) > scale ? fabs(ref[k]) : scale;
        }
        rel_err[d] = scale > 0 ? diff / scale : diff;
    }
    amp_huge_free(ref, (size_t)w.max_rows * c->rank * sizeof(double) + 1);
    work_free(&w, t->nmodes);
    return rc;
}
