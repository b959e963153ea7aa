/* CP-ALS on the CPU (Kolda and Bader; the papers' Algorithm 1), and the
 * same outer loop for the constrained methods, whose row updates replace
 * the solve (update.c).
 *
 * Per iteration and mode d: M = MTTKRP(d); V = the Hadamard product of the
 * other modes' Gram matrices; A_d = M V^-1, V inverted through Cholesky
 * (LAPACK dpotrf, dpotri), or its pseudo-inverse (dsyevd) when V is singular;
 * columns normalized into lambda (2-norm on the first iteration, max-norm
 * after, as SPLATT and the Tensor Toolbox do); the Gram of A_d updated. The fit never forms the model:
 * |X - model|^2 = |X|^2 + |model|^2 - 2 <X, model>, with <X, model> from
 * the last mode's MTTKRP and |model|^2 from the Gram matrices.
 *
 * Every reduction runs over a fixed partition in a fixed order, so a run
 * is the same bit for bit for the same seed and thread count. */
#include <config.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "amp_alloc.h"
#include "amp_cpu.h"
#include "amp_timer.h"
#include "amp_threads.h"

#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
void openblas_set_num_threads(int n);
#endif
#ifdef HAVE_OPENBLAS_GET_CONFIG
char *openblas_get_config(void);
#endif

/* ---- the small dense algebra ------------------------------------------- */

/* Rows per block of the update pass: a block of M and A (and AO-ADMM's
 * U and two scratch arrays, 5 x 256 x R doubles) stays in L2 while it is
 * solved or updated, summed and fed to dsyrk. */
#define UPDATE_BLOCK 256

/* P = V^-1 through Cholesky (dpotrf, dpotri) when V is positive definite,
 * else the pseudo-inverse by the eigendecomposition of V (dsyevd), with
 * eigenvalues below R eps max|w| taken as zero (*use_pinv set): with Q's
 * kept columns scaled by 1/sqrt(w), P = Q Q^T is one dsyrk. Cholesky
 * stays first: it is several times faster than the eigendecomposition
 * where it succeeds, and fails early where it does not (bench/RESULTS.md,
 * "The CPU solve at high rank"). L is scratch. */
static amp_status factor_gram(const double *V, unsigned R, double *L, double *P, int *use_pinv,
                              amp_error *err)
{
    memcpy(L, V, (size_t)R * R * sizeof *L);
    lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)R, L, (lapack_int)R);
    *use_pinv = 0;
    if (info == 0) {
        /* V^-1 from its Cholesky factor: then the update is one dgemm per
         * block, half the flops of two triangular solves (and on 2048-row
         * blocks with OpenBLAS, half the time). */
        info = LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)R, L, (lapack_int)R);
        if (info != 0)
            return AMP_FAIL(err, AMP_ERR_INTERNAL, "dpotri failed on the %ux%u Gram product "
                            "(info %d)", R, R, (int)info);
        for (unsigned j = 0; j < R; j++)          /* column-major lower = row-major upper */
            for (unsigned i = j; i < R; i++)
                P[j * R + i] = P[i * R + j] = L[j * R + i];
        return AMP_OK;
    }
    if (info < 0)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "dpotrf rejected argument %d", (int)-info);
    *use_pinv = 1;
    double *w = malloc((size_t)R * sizeof *w);
    if (w == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    double *Q = L;   /* L is free again: the eigenvectors go there */
    memcpy(Q, V, (size_t)R * R * sizeof *Q);
    info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)R, Q, (lapack_int)R, w);
    if (info != 0) {
        free(w);
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "the eigensolver (dsyevd) failed on the %ux%u "
                        "Gram product (info %d)", R, R, (int)info);
    }
    double wmax = 0;
    for (unsigned i = 0; i < R; i++)
        wmax = fabs(w[i]) > wmax ? fabs(w[i]) : wmax;
    double cut = (double)R * DBL_EPSILON * wmax;
    for (unsigned k = 0; k < R; k++)
        w[k] = w[k] > cut ? 1 / sqrt(w[k]) : 0;
    for (unsigned i = 0; i < R; i++)
        for (unsigned k = 0; k < R; k++)
            Q[i * R + k] *= w[k];
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)R, (int)R, 1.0, Q, (int)R, 0.0,
                P, (int)R);
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = 0; j < i; j++)
            P[i * R + j] = P[j * R + i];
    free(w);
    return AMP_OK;
}

/* Per-thread partial sums of the update pass. */
typedef struct partials {
    double *G;      /* R x R, upper triangle (row-major) */
    double *sq;     /* column sums of squares */
    double *mx;     /* column max |a| */
    double *in;     /* column sums of a .* m */
} partials;

static partials thread_partials(double *scratch, int t, unsigned R)
{
    double *base = scratch + (size_t)t * ((size_t)R * R + 3 * (size_t)R + 8);
    return (partials){base, base + (size_t)R * R, base + (size_t)R * R + R,
                      base + (size_t)R * R + 2 * (size_t)R};
}

/* The Gram matrix of rows [a, b) of A added into G (upper triangle). */
static void gram_rows(const double *A, uint64_t a, uint64_t b, unsigned R, double *G)
{
    if (b > a)
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)R, (int)(b - a), 1.0,
                    A + a * R, (int)R, 1.0, G, (int)R);
}

/* S's upper triangle = the sum of the threads' partial Gram matrices, in
 * thread order; its lower triangle 0 (S goes to other processes whole). */
static void sum_gram(double *scratch, int T, unsigned R, double *S)
{
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = 0; j < R; j++) {
            double sum = 0;
            for (int t = 0; t < T && j >= i; t++)
                sum += thread_partials(scratch, t, R).G[i * R + j];
            S[i * R + j] = sum;
        }
}

/* G from the upper triangle of S (G may be S), each entry divided by
 * scale[i] scale[j] (NULL: by 1), then symmetric. */
static void finish_gram(const double *S, unsigned R, const double *scale, double *G)
{
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = i; j < R; j++) {
            double sum = S[i * R + j];
            if (scale)
                sum /= scale[i] * scale[j];
            G[i * R + j] = G[j * R + i] = sum;
        }
}

/* G = A^T A on T threads, over a fixed split of the rows. */
static void gram(const double *A, uint64_t rows, unsigned R, int T, double *scratch, double *G)
{
#pragma omp parallel num_threads(T)
    {
        int me = amp_thread_id();
        partials p = thread_partials(scratch, me, R);
        memset(p.G, 0, (size_t)R * R * sizeof *p.G);
        gram_rows(A, amp_part_start(rows, me, T), amp_part_start(rows, me + 1, T), R, p.G);
    }
    sum_gram(scratch, T, R, G);
    finish_gram(G, R, NULL, G);
}

/* One mode's update after its MTTKRP, in one pass over the rows, block by
 * block while the block is in cache: A = M P (P = V^-1 by Cholesky, or
 * the pseudo-inverse), then the partial column norms, <A, M> per
 * column (for the fit: lambda .* A_normalized = A) and A's Gram matrix.
 * Then lambda (2-norm on the first iteration, max-norm never below 1
 * after), A scaled by 1/lambda, and G = the Gram of the scaled A without
 * another pass: G_ij / (lambda_i lambda_j). Every thread calls BLAS and
 * LAPACK on its own blocks, one-threaded, so no BLAS thread pool competes
 * with the OpenMP threads (it did: normalize took 2.5 times longer on 16
 * threads than on 2). */
typedef struct update_out {
    double *lambda;
    double *G;
    double *inner;   /* R: column sums of A .* M before scaling */
    /* The sums over rows (every thread's, then every process's): A's
     * Gram (R x R, upper), its column sums of squares, of A .* M, and
     * (R more) column max |a|. */
    double *sums;
    amp_cpu_share *sh;   /* the processes that sum them, or NULL */
} update_out;

/* The row sums of every process, added (max |a| the largest), so each
 * process scales its rows by the same lambda. The barrier first: the
 * time spent there is waiting for the slowest process, apart from the
 * time the exchange itself takes. */
static amp_status share_sums(amp_cpu_share *sh, double *sums, unsigned R, double *seconds,
                             amp_error *err)
{
    const amp_group *g = sh->group;
    double t0 = amp_now();
    AMP_CHECK(g->ops->barrier(g->ctx, err));
    double t1 = amp_now();
    AMP_CHECK(g->ops->allreduce(g->ctx, sums, (size_t)R * R + 2 * (size_t)R, 0, err));
    AMP_CHECK(g->ops->allreduce(g->ctx, sums + (size_t)R * R + 2 * (size_t)R, R, 1, err));
    double t2 = amp_now();
    sh->wait += t1 - t0;
    sh->exchange += t2 - t1;
    seconds[AMP_PHASE_COMM] += t2 - t0;
    return AMP_OK;
}

/* The method's update of one mode (AMP_METHOD_ALS: a solve). ua: the
 * constrained methods' arguments, U AO-ADMM's dual of this mode (NULL
 * otherwise), uscratch per-thread scratch of uscratch_bytes each. */
typedef struct method_work {
    amp_update_args ua;
    double *U;
    char *uscratch;
    size_t uscratch_bytes;
} method_work;

/* Where the update's rows also go once normalized, ld values a row
 * apart: the f32 kernel's shadow (f), or a batch's factor of every
 * model side by side (d or f), written in the pass that normalizes them
 * rather than in a pass of its own. */
typedef struct row_copy {
    double *d;
    float *f;
    size_t ld;
} row_copy;

/* M's rows are ldm values apart (a batch's output of every model side by
 * side: R of them are this model's). */
static amp_status update_mode(const double *M, size_t ldm, uint64_t rows, unsigned R,
                              const double *V, int first, int T, double *L, double *P,
                              double *scratch, double *A, const row_copy *copy,
                              update_out *out, int *pinv_used, method_work *mw,
                              double *seconds, amp_error *err)
{
    double t0 = amp_now();
    const int als = mw->ua.method == AMP_METHOD_ALS;
    if (als) {
        int use_pinv;
        AMP_CHECK(factor_gram(V, R, L, P, &use_pinv, err));
        if (use_pinv)
            *pinv_used = 1;
    } else {
        mw->ua.V = V;
        if (mw->ua.method == AMP_METHOD_ADMM)
            AMP_CHECK(amp_cpu_admm_prepare(&mw->ua, P, err));
    }
#pragma omp parallel num_threads(T)
    {
        int me = amp_thread_id();
        partials p = thread_partials(scratch, me, R);
        memset(p.G, 0, ((size_t)R * R + 3 * (size_t)R) * sizeof *p.G);
        uint64_t a = amp_part_start(rows, me, T), b = amp_part_start(rows, me + 1, T);
        double *us = (double *)(mw->uscratch + (size_t)me * mw->uscratch_bytes);
        for (uint64_t lo = a; lo < b; lo += UPDATE_BLOCK) {
            uint64_t hi = b - lo < UPDATE_BLOCK ? b : lo + UPDATE_BLOCK, n = hi - lo;
            double *Ab = A + lo * R;
            const double *Mb = M + lo * ldm;
            if (als)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)R, (int)R,
                            1.0, Mb, (int)ldm, P, (int)R, 0.0, Ab, (int)R);
            else   /* (rows of R: a batch gives the constrained methods their own M) */
                amp_cpu_update_rows(&mw->ua, Mb, Ab, mw->U ? mw->U + lo * R : NULL, n, us);
            for (uint64_t i = 0; i < n; i++) {
                const double *x = Ab + i * R, *m = Mb + i * ldm;
#pragma omp simd
                for (unsigned r = 0; r < R; r++) {
                    p.sq[r] += x[r] * x[r];
                    p.in[r] += x[r] * m[r];
                    p.mx[r] = fabs(x[r]) > p.mx[r] ? fabs(x[r]) : p.mx[r];
                }
            }
            gram_rows(A, lo, hi, R, p.G);
        }
    }
    seconds[als ? AMP_PHASE_SOLVE : AMP_PHASE_UPDATE] += amp_now() - t0;

    t0 = amp_now();
    double *sum_sq = out->sums + (size_t)R * R, *sum_in = sum_sq + R, *max_abs = sum_in + R;
    sum_gram(scratch, T, R, out->sums);
    for (unsigned r = 0; r < R; r++) {
        double sq = 0, mx = 0, in = 0;
        for (int t = 0; t < T; t++) {
            partials p = thread_partials(scratch, t, R);
            sq += p.sq[r];
            in += p.in[r];
            mx = p.mx[r] > mx ? p.mx[r] : mx;
        }
        sum_sq[r] = sq;
        sum_in[r] = in;
        max_abs[r] = mx;
    }
    seconds[AMP_PHASE_NORMALIZE] += amp_now() - t0;
    if (out->sh != NULL)
        AMP_CHECK(share_sums(out->sh, out->sums, R, seconds, err));

    t0 = amp_now();
    double *lambda = out->lambda;
    for (unsigned r = 0; r < R; r++) {
        double sq = sum_sq[r], mx = max_abs[r], in = sum_in[r];
        lambda[r] = first ? sqrt(sq) : (mx > 1 ? mx : 1);
        if (lambda[r] == 0)
            lambda[r] = 1;   /* an all-zero column stays as it is */
        out->inner[r] = in;
    }
    double *inv = L;   /* free again */
    for (unsigned r = 0; r < R; r++)
        inv[r] = 1 / lambda[r];
    int64_t n = (int64_t)rows;
    double *U = mw->U;
    double *Cd = copy ? copy->d : NULL;
    float *Cf = copy ? copy->f : NULL;
    const size_t ld = copy ? copy->ld : 0;
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t i = 0; i < n; i++) {
        double *x = A + (uint64_t)i * R;
#pragma omp simd
        for (unsigned r = 0; r < R; r++)
            x[r] *= inv[r];
        /* The dual is in the factor's units: it keeps pace. */
        if (U != NULL)
            for (unsigned r = 0; r < R; r++)
                U[(uint64_t)i * R + r] *= inv[r];
        if (Cf != NULL)
            for (unsigned r = 0; r < R; r++)
                Cf[(uint64_t)i * ld + r] = (float)x[r];
        if (Cd != NULL)
            for (unsigned r = 0; r < R; r++)
                Cd[(uint64_t)i * ld + r] = x[r];
    }
    seconds[AMP_PHASE_NORMALIZE] += amp_now() - t0;

    t0 = amp_now();
    finish_gram(out->sums, R, lambda, out->G);
    seconds[AMP_PHASE_GRAM] += amp_now() - t0;
    return AMP_OK;
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
    double *V, *L, *P, *inner, *scratch, *sums;
    amp_cpu_mttkrp_ws *ws;
    /* The constrained methods: AO-ADMM's duals, the threads' scratch. */
    double *U[AMP_MAX_MODES];
    size_t u_bytes[AMP_MAX_MODES];
    method_work mw;
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
    free(w->P);
    free(w->inner);
    free(w->scratch);
    free(w->sums);
    for (unsigned m = 0; m < N; m++)
        amp_huge_free(w->U[m], w->u_bytes[m]);
    free(w->mw.uscratch);
    amp_cpu_mttkrp_ws_free(w->ws);
}

static amp_status work_new(const amp_tensor *t, const amp_cpd_opts *o, als_work *w,
                           amp_error *err)
{
    unsigned N = t->nmodes, R = o->rank;
    memset(w, 0, sizeof *w);
    w->T = amp_thread_count(o->threads);
    w->R = R;
    for (unsigned m = 0; m < N; m++)
        if (t->rows[m] > w->max_rows)
            w->max_rows = t->rows[m];
    size_t rr = (size_t)R * R * sizeof(double);
    w->m_bytes = (size_t)w->max_rows * R * sizeof(double) + 1;
    w->M = amp_huge_alloc(w->m_bytes, "the MTTKRP output", err);
    w->V = malloc(rr);
    w->L = malloc(rr);
    w->P = malloc(rr + (size_t)R * sizeof(double));
    w->inner = malloc((size_t)R * sizeof(double));
    w->scratch = malloc((size_t)w->T * ((size_t)R * R + 3 * (size_t)R + 8) * sizeof(double));
    w->sums = malloc(rr + 3 * (size_t)R * sizeof(double));
    int ok = w->M && w->V && w->L && w->P && w->inner && w->scratch && w->sums;
    for (unsigned m = 0; m < N && ok; m++)
        ok = (w->G[m] = malloc(rr)) != NULL;
    if (ok && o->precision == AMP_PRECISION_F32) {
        w->M32 = amp_huge_alloc(w->m_bytes, "the MTTKRP output", err);
        ok = w->M32 != NULL;
        for (unsigned m = 0; m < N && ok; m++)
            ok = (w->A32[m] = malloc((size_t)t->rows[m] * R * sizeof(float) + 1)) != NULL;
    }
    if (ok && amp_cpu_mttkrp_ws_new(w->T, R, &w->ws, err) != AMP_OK)
        ok = 0;
    amp_update_args *ua = &w->mw.ua;
    ua->method = o->method;
    ua->rank = R;
    ua->inner = o->admm_inner;
    ua->admm_tol = o->admm_tol;
    if (ok && o->method != AMP_METHOD_ALS) {
        /* Cache lines apart, so the threads' scratch never shares one. */
        w->mw.uscratch_bytes = (amp_cpu_update_scratch(ua, UPDATE_BLOCK) + 63) / 64 * 64;
        if (w->mw.uscratch_bytes > 0)
            ok = (w->mw.uscratch = malloc((size_t)w->T * w->mw.uscratch_bytes)) != NULL;
    }
    for (unsigned m = 0; m < N && ok && o->method == AMP_METHOD_ADMM; m++) {
        w->u_bytes[m] = (size_t)t->rows[m] * R * sizeof(double) + 1;
        ok = (w->U[m] = amp_huge_alloc(w->u_bytes[m], "AO-ADMM's dual", err)) != NULL;
        if (ok)
            memset(w->U[m], 0, w->u_bytes[m]);
    }
    if (!ok) {
        work_free(w, N);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the CP-ALS work space");
    }
    return AMP_OK;
}

static void to_f32(const double *src, float *dst, uint64_t n, int T)
{
    (void)T;   /* without OpenMP */
    int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t i = 0; i < nn; i++)
        dst[i] = (float)src[i];
}

static void to_f64(const float *src, double *dst, uint64_t n, int T)
{
    (void)T;   /* without OpenMP */
    int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t i = 0; i < nn; i++)
        dst[i] = src[i];
}

/* M = MTTKRP(d) in the precision asked for, delivered in f64. */
static void mttkrp(const amp_tensor *t, unsigned d, const amp_cpd *c, als_work *w, int f32)
{
    if (f32) {
        amp_cpu_mttkrp_f32(t, d, (const float *const *)w->A32, c->rank, w->M32, w->ws);
        to_f64(w->M32, w->M, t->rows[d] * c->rank, w->T);
    } else {
        amp_cpu_mttkrp_f64(t, d, (const double *const *)c->A, c->rank, w->M, w->ws);
    }
}

/* The constrained methods improve the factor they start from rather than
 * replace it, so it must start at the model's scale: the scale the last
 * update put into lambda goes into this mode's columns (and its dual's),
 * which leaves the model as it is. ALS needs no start. */
static void warm_start(const amp_cpd *c, unsigned d, uint64_t begin, uint64_t count, double *U,
                       int T)
{
    (void)T;   /* without OpenMP */
    const unsigned R = c->rank;
    const double *lambda = c->lambda;
    int64_t n = (int64_t)(begin + count);
    double *A = c->A[d];
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t i = (int64_t)begin; i < n; i++)
        for (unsigned r = 0; r < R; r++) {
            A[(uint64_t)i * R + r] *= lambda[r];
            if (U != NULL)
                U[(uint64_t)i * R + r] *= lambda[r];
        }
}

/* AO-ADMM's few inner iterations cannot carry a start across orders of
 * magnitude (on cpu20m, random factors in [0, 1) put the model some 1e3
 * times off the data, and 5 inner iterations projected every entry to 0).
 * So before the first update the starting model is scaled by the factor
 * that fits it best, <X, model> / |model|^2 (lambda times it): <X, model>
 * from mode 1's first MTTKRP (each thread's rows into its partials'
 * first slot, summed in thread order; over processes, the rows [begin,
 * begin + n) this one owns, and the processes' sums added), |model|^2
 * from the Grams as the fit takes it. Only a positive, finite factor is
 * taken. */
static amp_status start_scale(amp_cpd *c, const double *M, double *const *G, unsigned N, int T,
                              double *scratch, uint64_t begin, uint64_t n,
                              const amp_cpu_share *sh, amp_error *err)
{
    const unsigned R = c->rank;
    const double *A = c->A[0] + begin * R, *lambda = c->lambda;
    M += begin * R;
#pragma omp parallel num_threads(T)
    {
        const int me = amp_thread_id();
        double sum = 0;
        for (uint64_t i = amp_part_start(n, me, T); i < amp_part_start(n, me + 1, T); i++)
            for (unsigned r = 0; r < R; r++)
                sum += lambda[r] * A[i * R + r] * M[i * R + r];
        thread_partials(scratch, me, R).in[0] = sum;
    }
    double inner = 0;
    for (int t = 0; t < T; t++)
        inner += thread_partials(scratch, t, R).in[0];
    if (sh != NULL)
        AMP_CHECK(sh->group->ops->allreduce(sh->group->ctx, &inner, 1, 0, err));
    double model = model_norm_sq(G, N, R, lambda);
    double alpha = model > 0 ? inner / model : 0;
    if (alpha > 0 && isfinite(alpha))
        for (unsigned r = 0; r < R; r++)
            c->lambda[r] *= alpha;
    return AMP_OK;
}

/* Mode d's rows from the processes that own them, and their f32 copy
 * (A32, or NULL) rebuilt whole: each process wrote only its own. */
static amp_status share_rows(amp_cpu_share *sh, amp_cpd *c, unsigned d, float *A32, int T,
                             amp_error *err)
{
    const amp_group *g = sh->group;
    const amp_part_mode *pm = &sh->p->modes[d];
    const unsigned R = c->rank;
    uint64_t offset[AMP_MAX_GPUS], count[AMP_MAX_GPUS];
    for (unsigned k = 0; k < g->size; k++) {
        offset[k] = pm->row_begin[k] * R;
        count[k] = pm->row_count[k] * R;
    }
    double t0 = amp_now();
    AMP_CHECK(g->ops->allgatherv(g->ctx, c->A[d], offset, count, err));
    double dt = amp_now() - t0;
    sh->exchange += dt;
    c->seconds[AMP_PHASE_COMM] += dt;
    if (A32 != NULL)
        to_f32(c->A[d], A32, c->rows[d] * R, T);
    return AMP_OK;
}

unsigned amp_cpu_blas_thread_limit(char *name, size_t name_size)
{
    if (name_size > 0)
        name[0] = '\0';
#ifdef HAVE_OPENBLAS_GET_CONFIG
    /* OpenBLAS keeps a fixed table of work buffers, one per call in
     * flight: MAX(50, 2 x MAX_THREADS) of them (memory.c, NUM_BUFFERS).
     * Past it, calls go to its fallbacks, which is where -t 4096 crashed
     * in cblas_dgemm now and then (issue 40). Our threads call it
     * one-threaded, one call each, so staying within the table keeps
     * every call on its main path. */
    const char *config = openblas_get_config();
    const char *at = config ? strstr(config, "MAX_THREADS=") : NULL;
    if (at != NULL) {
        unsigned long built = strtoul(at + strlen("MAX_THREADS="), NULL, 10);
        if (built > 0 && built < 1u << 20) {
            unsigned limit = built * 2 > 50 ? (unsigned)built * 2 : 50;
            snprintf(name, name_size, "OpenBLAS, built for %lu threads", built);
            return limit;
        }
    }
#endif
    return 0;
}

/* BLAS and LAPACK run inside our OpenMP threads, one thread each. */
static void blas_one_thread(void)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(1);
#endif
}

/* CP-ALS on t, alone (sh NULL) or as one process of several (amp_cpu_als_share). */
static amp_status als_run(const amp_tensor *t, const amp_cpd_opts *o, amp_cpu_share *sh,
                          amp_cpd *c, amp_error *err)
{
    const unsigned N = t->nmodes, R = c->rank;
    const int f32 = o->precision == AMP_PRECISION_F32;
    als_work w;
    if (R != o->rank)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have rank %u, not %u", R, o->rank);
    amp_mode_rule rule[AMP_MAX_MODES];
    AMP_CHECK(amp_rules_resolve(o, N, rule, err));
    AMP_CHECK(work_new(t, o, &w, err));
    blas_one_thread();
    amp_status rc = AMP_OK;
    double now;
    memset(c->seconds, 0, sizeof c->seconds);
    /* The start's Gram matrices count in the first iteration's gram
     * phase, and in its time: at a large rank they cost as much as an
     * iteration's. */
    now = amp_now();
    const double t_start = now;
    for (unsigned m = 0; m < N; m++) {
        gram(c->A[m], c->rows[m], R, w.T, w.scratch, w.G[m]);
        /* The start's rows beyond A, until mode m's update replaces G. */
        if (c->start_gram[m] != NULL)
            for (size_t k = 0; k < (size_t)R * R; k++)
                w.G[m][k] += c->start_gram[m][k];
        if (f32)
            to_f32(c->A[m], w.A32[m], c->rows[m] * R, w.T);
    }
    c->seconds[AMP_PHASE_GRAM] += amp_now() - now;
    double old_fit = 0, norm_x = sqrt(t->norm_sq);
    c->iters = 0;
    c->converged = 0;
    c->stopped = 0;
    for (unsigned it = 0; it < o->max_iters; it++) {
        double t_iter = it == 0 ? t_start : amp_now();
        for (unsigned d = 0; d < N; d++) {
            /* The rows this process updates: all of them when alone. */
            uint64_t own = 0, nown = c->rows[d];
            if (sh != NULL) {
                own = sh->p->modes[d].row_begin[sh->group->rank];
                nown = sh->p->modes[d].row_count[sh->group->rank];
            }
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
            c->seconds[AMP_PHASE_GRAM] += amp_now() - now;
            if (o->method == AMP_METHOD_ADMM && it == 0 && d == 0)
                AMP_CHECK_GOTO(start_scale(c, w.M, w.G, N, w.T, w.scratch, own, nown, sh, err),
                               rc, done);
            double *U = w.U[d] ? w.U[d] + own * R : NULL;
            if (o->method != AMP_METHOD_ALS)
                warm_start(c, d, own, nown, w.U[d], w.T);
            update_out out = {c->lambda, w.G[d], w.inner, w.sums, sh};
            w.mw.ua.rule = rule[d];
            w.mw.U = U;
            row_copy shadow = {NULL, f32 ? w.A32[d] + own * R : NULL, R};
            AMP_CHECK_GOTO(update_mode(w.M + own * R, R, nown, R, w.V, it == 0, w.T, w.L, w.P,
                                       w.scratch, c->A[d] + own * R, &shadow, &out,
                                       &c->pinv_used, &w.mw, c->seconds, err),
                           rc, done);
            if (sh != NULL)
                AMP_CHECK_GOTO(share_rows(sh, c, d, f32 ? w.A32[d] : NULL, w.T, err), rc, done);
        }
        /* <X, model> = sum_r lambda_r sum_i A_{N-1}(i, r) M(i, r), M being
         * the last mode's MTTKRP: the update pass summed A .* M before
         * the scaling, which is the same. */
        now = amp_now();
        double inner = 0;
        for (unsigned r = 0; r < R; r++)
            inner += w.inner[r];
        double resid = t->norm_sq + model_norm_sq(w.G, N, R, c->lambda) - 2 * inner;
        double fit = norm_x > 0 ? 1 - sqrt(resid > 0 ? resid : 0) / norm_x : 0;
        /* Process 0's fit for all: MPI need not sum in the same order on
         * every process, and all must stop after the same iteration. */
        if (sh != NULL)
            AMP_CHECK_GOTO(sh->group->ops->bcast(sh->group->ctx, &fit, sizeof fit, err), rc,
                           done);
        double delta = fabs(fit - old_fit);
        c->seconds[AMP_PHASE_FIT] += amp_now() - now;
        c->fit = fit;
        c->iters = it + 1;
        if (o->on_iter)
            o->on_iter(o->ctx, it + 1, fit, delta, amp_now() - t_iter);
        if (o->stop && *o->stop) {
            c->stopped = 1;
            break;
        }
        if (it > 0 && delta < o->tol) {
            c->converged = 1;
            break;
        }
        old_fit = fit;
    }
done:
    work_free(&w, N);
    return rc;
}

amp_status amp_cpu_als(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c,
                       amp_error *err)
{
    if (o->method == AMP_METHOD_APR)
        return amp_cpu_apr(t, o, c, err);
    if (o->completion.observed == AMP_OBSERVED_NONZEROS)
        return amp_cpu_completion(t, o, c, err);
    if (o->method == AMP_METHOD_GCP)
        return amp_cpu_gcp(t, o, c, err);
    return als_run(t, o, NULL, c, err);
}

amp_status amp_cpu_als_share(const amp_tensor *part, const amp_cpd_opts *o, amp_cpu_share *sh,
                             amp_cpd *c, amp_error *err)
{
    if (o->method == AMP_METHOD_APR)
        return amp_cpu_apr_share(part, o, sh, c, err);
    if (o->completion.observed == AMP_OBSERVED_NONZEROS)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--observed nonzeros runs in one process "
                        "for now, not under mpirun");
    if (o->method == AMP_METHOD_GCP)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--method gcp runs in one process for now, "
                        "not under mpirun");
    const amp_group *g = sh->group;
    if (sh->p->kind != AMP_PARTITION_OWNER || sh->p->ngpus != g->size || g->rank >= g->size ||
        sh->p->nmodes != part->nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "process %u of %u with a partition into %u parts",
                        g->rank, g->size, sh->p->ngpus);
    sh->wait = sh->exchange = 0;
    return als_run(part, o, sh, c, err);
}

/* ---- how long the dense algebra takes ---------------------------------- */

/* The solve's rate on this machine now: one block of UPDATE_BLOCK rows
 * through the dgemm the update runs, on every thread at once, twice (the
 * first touches the pages). Flops from the rows of every mode: 2 R^2 a
 * row for M V^-1, R^2 for the Gram (dsyrk); R^3 a mode for V^-1 (dpotrf
 * and dpotri, on one thread, at one thread's rate). */
amp_status amp_cpu_solve_estimate(const amp_tensor *t, const amp_cpd_opts *o, double *seconds,
                                  amp_error *err)
{
    const unsigned R = o->rank;
    const int T = amp_thread_count(o->threads);
    const size_t block = (size_t)UPDATE_BLOCK * R;
    *seconds = 0;
    double *P = malloc((size_t)R * R * sizeof *P);
    double *MA = malloc(2 * block * (size_t)T * sizeof *MA);
    if (P == NULL || MA == NULL) {
        free(P);
        free(MA);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the solve's estimate");
    }
    for (size_t k = 0; k < (size_t)R * R; k++)
        P[k] = 1.0 / (double)(k % 97 + 1);
    blas_one_thread();
    double took = 0;
    for (int round = 0; round < 2; round++) {
        double t0 = amp_now();
#pragma omp parallel num_threads(T)
        {
            double *M = MA + 2 * block * (size_t)amp_thread_id(), *A = M + block;
            for (size_t k = 0; k < block; k++)
                M[k] = 1.0 / (double)(k % 89 + 1);
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, UPDATE_BLOCK, (int)R, (int)R,
                        1.0, M, (int)R, P, (int)R, 0.0, A, (int)R);
        }
        took = amp_now() - t0;
    }
    free(P);
    free(MA);
    /* flops a second of one thread, and of all */
    const double one = 2.0 * UPDATE_BLOCK * R * R / (took > 0 ? took : 1e-9);
    uint64_t rows = 0;
    for (unsigned m = 0; m < t->nmodes; m++)
        rows += t->rows[m];
    *seconds = 3.0 * (double)rows * R * R / (one * T) + (double)t->nmodes * R * R * R / one;
    return AMP_OK;
}

/* ---- measurement and checking -------------------------------------------- */

amp_status amp_cpu_time_mttkrp(const amp_tensor *t, const amp_cpd_opts *o, const amp_cpd *c,
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

amp_status amp_cpu_check_mttkrp(const amp_tensor *t, const amp_cpd_opts *o, const amp_cpd *c,
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

/* ---- several models in one pass (amped-run --starts, --ranks) ----------- */

/* One model of a batch: its own factors, work space (its M, Grams, V,
 * solve, lambda) and fit; off its first column in the concatenation. */
typedef struct batch_model {
    amp_cpd *c;
    als_work w;
    double old_fit;
    unsigned off;
    int live;
} batch_model;

/* The concatenation: each live model's columns side by side, in model
 * order, Rlive in all; Acat f64 (A64) or f32 (A32). */
typedef struct batch_cat {
    unsigned Rlive;
    double *A64[AMP_MAX_MODES];
    float *A32[AMP_MAX_MODES];
    double *M64;
    float *M32;
    size_t a_bytes[AMP_MAX_MODES], m_bytes;
    amp_cpu_mttkrp_ws *ws;
} batch_cat;

/* Model b's columns of mode m into the concatenation (f32: cast as the
 * solo run's to_f32 casts). */
static void batch_put(const batch_model *b, unsigned m, batch_cat *cat, int T)
{
    (void)T;
    const unsigned R = b->c->rank, Rc = cat->Rlive, off = b->off;
    const double *A = b->c->A[m];
    int64_t n = (int64_t)b->c->rows[m];
    double *D = cat->A64[m];
    float *F = cat->A32[m];
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t i = 0; i < n; i++)
        for (unsigned r = 0; r < R; r++) {
            if (F != NULL)
                F[(uint64_t)i * Rc + off + r] = (float)A[(uint64_t)i * R + r];
            else
                D[(uint64_t)i * Rc + off + r] = A[(uint64_t)i * R + r];
        }
}

/* Model b's columns of the MTTKRP's output (rows of mode d) into its M. */
static void batch_get(const batch_model *b, uint64_t rows, const batch_cat *cat, double *M,
                      int T)
{
    (void)T;
    const unsigned R = b->c->rank, Rc = cat->Rlive, off = b->off;
    int64_t n = (int64_t)rows;
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t i = 0; i < n; i++)
        for (unsigned r = 0; r < R; r++)
            M[(uint64_t)i * R + r] = cat->M32 ? (double)cat->M32[(uint64_t)i * Rc + off + r]
                                              : cat->M64[(uint64_t)i * Rc + off + r];
}

/* The live models' offsets and every mode's concatenation rebuilt; the
 * MTTKRP's work space for the new width. */
static amp_status batch_pack(batch_model *bm, unsigned K, const amp_tensor *t, batch_cat *cat,
                             int T, amp_error *err)
{
    unsigned R = 0;
    for (unsigned k = 0; k < K; k++)
        if (bm[k].live) {
            bm[k].off = R;
            R += bm[k].c->rank;
        }
    cat->Rlive = R;
    amp_cpu_mttkrp_ws_free(cat->ws);
    cat->ws = NULL;
    if (R == 0)
        return AMP_OK;
    AMP_CHECK(amp_cpu_mttkrp_ws_new(T, R, &cat->ws, err));
    for (unsigned m = 0; m < t->nmodes; m++)
        for (unsigned k = 0; k < K; k++)
            if (bm[k].live)
                batch_put(&bm[k], m, cat, T);
    return AMP_OK;
}

amp_status amp_cpu_als_batch(const amp_tensor *t, const amp_cpd_opts *o, unsigned K,
                             amp_cpd *const *cs, amp_cpu_batch_fn on_iter, void *ctx,
                             double *mttkrp_seconds, amp_error *err)
{
    const unsigned N = t->nmodes;
    const int f32 = o->precision == AMP_PRECISION_F32;
    if (o->method == AMP_METHOD_APR || o->method == AMP_METHOD_GCP ||
        o->completion.observed == AMP_OBSERVED_NONZEROS)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "several models in one pass run CP-ALS and "
                        "the constrained methods (als, admm, mu, hals), not --method %s%s",
                        amp_method_name(o->method),
                        o->completion.observed == AMP_OBSERVED_NONZEROS
                            ? " or --observed nonzeros" : "");
    if (K == 0)
        return AMP_OK;
    amp_mode_rule rule[AMP_MAX_MODES];
    AMP_CHECK(amp_rules_resolve(o, N, rule, err));
    batch_model *bm = calloc(K, sizeof *bm);
    batch_cat cat;
    memset(&cat, 0, sizeof cat);
    if (bm == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    amp_status rc = AMP_OK;
    unsigned made = 0, Rtot = 0;
    uint64_t max_rows = 0;
    for (unsigned m = 0; m < N; m++)
        max_rows = t->rows[m] > max_rows ? t->rows[m] : max_rows;
    for (; made < K; made++) {
        amp_cpd_opts ok = *o;
        ok.rank = cs[made]->rank;
        AMP_CHECK_GOTO(work_new(t, &ok, &bm[made].w, err), rc, done);
        bm[made].c = cs[made];
        bm[made].live = 1;
        Rtot += cs[made]->rank;
    }
    const int T = bm[0].w.T;
    if (Rtot > AMP_CPU_MAX_RANK)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_USAGE, "the models' columns (%u) pass the "
                       "kernel's rank limit %u", Rtot, AMP_CPU_MAX_RANK);
    int ok = 1;
    /* Huge pages, as the factors of a run alone: the MTTKRP's gathers
     * miss the TLB less (without them a batch at 32 columns took 1.4
     * times a run at rank 32 on cpu20m). */
    const size_t word = f32 ? sizeof(float) : sizeof(double);
    cat.m_bytes = (size_t)max_rows * Rtot * word + 1;
    for (unsigned m = 0; m < N && ok; m++) {
        cat.a_bytes[m] = (size_t)t->rows[m] * Rtot * word + 1;
        void *p = amp_huge_alloc(cat.a_bytes[m], "the models' factors side by side", err);
        ok = p != NULL;
        if (f32)
            cat.A32[m] = p;
        else
            cat.A64[m] = p;
    }
    if (ok) {
        void *p = amp_huge_alloc(cat.m_bytes, "the models' MTTKRP output", err);
        ok = p != NULL;
        if (f32)
            cat.M32 = p;
        else
            cat.M64 = p;
    }
    if (!ok)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory for %u models' columns "
                       "side by side (%u)", K, Rtot);
    blas_one_thread();
    for (unsigned k = 0; k < K; k++) {
        amp_cpd *c = bm[k].c;
        als_work *w = &bm[k].w;
        const double t0 = amp_now();
        memset(c->seconds, 0, sizeof c->seconds);
        for (unsigned m = 0; m < N; m++) {
            gram(c->A[m], c->rows[m], c->rank, T, w->scratch, w->G[m]);
            if (c->start_gram[m] != NULL)
                for (size_t q = 0; q < (size_t)c->rank * c->rank; q++)
                    w->G[m][q] += c->start_gram[m][q];
        }
        c->seconds[AMP_PHASE_GRAM] += amp_now() - t0;
        c->iters = 0;
        c->converged = c->stopped = 0;
    }
    AMP_CHECK_GOTO(batch_pack(bm, K, t, &cat, T, err), rc, done);
    const double norm_x = sqrt(t->norm_sq);
    for (unsigned it = 0; it < o->max_iters && cat.Rlive > 0; it++) {
        const double t_iter = amp_now();
        for (unsigned d = 0; d < N; d++) {
            double now = amp_now();
            if (f32)
                amp_cpu_mttkrp_f32(t, d, (const float *const *)cat.A32, cat.Rlive, cat.M32,
                                   cat.ws);
            else
                amp_cpu_mttkrp_f64(t, d, (const double *const *)cat.A64, cat.Rlive, cat.M64,
                                   cat.ws);
            if (mttkrp_seconds)
                *mttkrp_seconds += amp_now() - now;
            for (unsigned k = 0; k < K; k++) {
                if (!bm[k].live)
                    continue;
                amp_cpd *c = bm[k].c;
                als_work *w = &bm[k].w;
                const unsigned R = c->rank;
                /* CP-ALS in f64 solves from the batch's output in place;
                 * f32 needs it in f64 and the constrained methods in rows
                 * of R, as a run alone has them. */
                const int in_place = o->method == AMP_METHOD_ALS && !f32;
                const double *M = in_place ? cat.M64 + bm[k].off : w->M;
                now = amp_now();
                if (!in_place)
                    batch_get(&bm[k], t->rows[d], &cat, w->M, T);
                for (size_t q = 0; q < (size_t)R * R; q++)
                    w->V[q] = 1;
                for (unsigned m = 0; m < N; m++)
                    if (m != d)
                        for (size_t q = 0; q < (size_t)R * R; q++)
                            w->V[q] *= w->G[m][q];
                c->seconds[AMP_PHASE_GRAM] += amp_now() - now;
                if (o->method == AMP_METHOD_ADMM && it == 0 && d == 0)
                    AMP_CHECK_GOTO(start_scale(c, w->M, w->G, N, T, w->scratch, 0, c->rows[0],
                                               NULL, err), rc, done);
                if (o->method != AMP_METHOD_ALS)
                    warm_start(c, d, 0, c->rows[d], w->U[d], T);
                update_out out = {c->lambda, w->G[d], w->inner, w->sums, NULL};
                w->mw.ua.rule = rule[d];
                w->mw.U = w->U[d];
                /* The updated rows go beside the other models' as they
                 * are normalized (the next MTTKRPs read them there). */
                row_copy beside = {f32 ? NULL : cat.A64[d] + bm[k].off,
                                   f32 ? cat.A32[d] + bm[k].off : NULL, cat.Rlive};
                AMP_CHECK_GOTO(update_mode(M, in_place ? cat.Rlive : R, c->rows[d], R, w->V,
                                           it == 0, T, w->L, w->P, w->scratch, c->A[d],
                                           &beside, &out, &c->pinv_used, &w->mw, c->seconds,
                                           err), rc, done);
            }
        }
        int dropped = 0;
        for (unsigned k = 0; k < K; k++) {
            if (!bm[k].live)
                continue;
            amp_cpd *c = bm[k].c;
            als_work *w = &bm[k].w;
            const unsigned R = c->rank;
            double now = amp_now();
            double inner = 0;
            for (unsigned r = 0; r < R; r++)
                inner += w->inner[r];
            double resid = t->norm_sq + model_norm_sq(w->G, N, R, c->lambda) - 2 * inner;
            double fit = norm_x > 0 ? 1 - sqrt(resid > 0 ? resid : 0) / norm_x : 0;
            double delta = fabs(fit - bm[k].old_fit);
            c->seconds[AMP_PHASE_FIT] += amp_now() - now;
            c->fit = fit;
            c->iters = it + 1;
            if (on_iter)
                on_iter(ctx, k, it + 1, fit, delta, amp_now() - t_iter);
            if (it > 0 && delta < o->tol) {
                c->converged = 1;
                bm[k].live = 0;
                dropped = 1;
            }
            bm[k].old_fit = fit;
        }
        if (o->stop && *o->stop) {
            for (unsigned k = 0; k < K; k++)
                if (bm[k].live)
                    bm[k].c->stopped = 1;
            break;
        }
        /* A converged model stops costing its columns. */
        if (dropped)
            AMP_CHECK_GOTO(batch_pack(bm, K, t, &cat, T, err), rc, done);
    }
done:
    for (unsigned k = 0; k < made; k++)
        work_free(&bm[k].w, N);
    for (unsigned m = 0; m < N; m++) {
        amp_huge_free(cat.A64[m], cat.a_bytes[m]);
        amp_huge_free(cat.A32[m], cat.a_bytes[m]);
    }
    amp_huge_free(cat.M64, cat.m_bytes);
    amp_huge_free(cat.M32, cat.m_bytes);
    amp_cpu_mttkrp_ws_free(cat.ws);
    free(bm);
    return rc;
}
