/* The constrained methods' update of a factor's rows (amp_method in
 * amp_core.h has the formulas), on the CPU: blocks of rows through BLAS
 * where the method multiplies by an R x R matrix (AO-ADMM, MU), HALS row
 * by row (its columns depend on each other within a row). This is the f64
 * reference the GPU's update kernels are checked against. */
#include <config.h>

#include <math.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "amp_cpu.h"

size_t amp_cpu_update_scratch(const amp_update_args *a, uint64_t n)
{
    /* AO-ADMM: At, M + rho (A + U), and a flag per row; MU: A V. */
    size_t R = a->rank;
    return a->method == AMP_METHOD_ADMM ? (2 * n * R + n) * sizeof(double)
         : a->method == AMP_METHOD_MU   ? n * R * sizeof(double)
                                        : 0;
}

amp_status amp_cpu_admm_prepare(amp_update_args *a, double *P, amp_error *err)
{
    const unsigned R = a->rank;
    double tr = 0;
    for (unsigned r = 0; r < R; r++)
        tr += a->V[r * R + r];
    /* V is a product of Grams: positive semi-definite, so rho > 0 makes
     * V + rho I definite. A zero trace (every other factor zero) leaves
     * nothing to fit; any rho will do. */
    a->rho = tr > 0 && isfinite(tr) ? tr / R : 1;
    memcpy(P, a->V, (size_t)R * R * sizeof *P);
    for (unsigned r = 0; r < R; r++)
        P[r * R + r] += a->rho;
    lapack_int info = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', (lapack_int)R, P, (lapack_int)R);
    if (info == 0)
        info = LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'U', (lapack_int)R, P, (lapack_int)R);
    if (info != 0)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "V + rho I (rho %g) is not positive definite "
                        "(LAPACK info %d): V is not a product of Gram matrices", a->rho,
                        (int)info);
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = 0; j < i; j++)
            P[i * R + j] = P[j * R + i];
    a->P = P;
    return AMP_OK;
}

/* max(x, 0), exact for finite x below DBL_MAX / 2 (x + x and the halving
 * are exact; NaN and -inf give NaN, where a comparison gave 0: only
 * factors already broken meet them); a comparison here kept GCC 12 at -O2
 * from vectorizing the loops over a block (0.03-0.05 s of an update, a
 * third of it). */
static inline double relu(double x)
{
    return (x + fabs(x)) * 0.5;
}

/* prox of the mode's rule for a step 1 / rho: shrink by t = l1 / rho,
 * project, scale by s = rho / (rho + l2). For finite z below DBL_MAX / 2,
 * the same values as z > t ? (z - t) s : z < -t ? (z + t) s : 0 (and 0
 * below t when non-negative). */
static inline double prox(double z, double t, double s, int nonneg)
{
    const double up = relu(z - t);
    if (nonneg)
        return up * s;
    return (up - relu(-(z + t))) * s;
}

static void admm_rows(const amp_update_args *a, const double *M, double *A, double *U,
                      uint64_t n, double *scratch)
{
    const unsigned R = a->rank;
    const double rho = a->rho, t = a->rule.l1 / rho, sc = rho / (rho + a->rule.l2);
    const int nonneg = a->rule.constraint == AMP_CONSTRAINT_NONNEG;
    const uint64_t nr = n * R;
    double *At = scratch, *T = At + nr, *active = T + nr;
    if (a->admm_tol <= 0) {
        /* Every row every inner iteration, no residuals: one pass a
         * product, which also forms the next one's M + rho (A + U). */
#pragma omp simd
        for (uint64_t k = 0; k < nr; k++)
            T[k] = M[k] + rho * (A[k] + U[k]);
        for (unsigned it = 0; it < a->inner; it++) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)R, (int)R, 1.0,
                        T, (int)R, a->P, (int)R, 0.0, At, (int)R);
            if (nonneg) {
#pragma omp simd
                for (uint64_t k = 0; k < nr; k++) {
                    const double v = relu(At[k] - U[k] - t) * sc, u = U[k] + (v - At[k]);
                    A[k] = v;
                    U[k] = u;
                    T[k] = M[k] + rho * (v + u);
                }
            } else {
#pragma omp simd
                for (uint64_t k = 0; k < nr; k++) {
                    const double v = prox(At[k] - U[k], t, sc, 0), u = U[k] + (v - At[k]);
                    A[k] = v;
                    U[k] = u;
                    T[k] = M[k] + rho * (v + u);
                }
            }
        }
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        active[i] = 1;
    uint64_t live = n;
    const double tol2 = a->admm_tol * a->admm_tol;
    for (unsigned it = 0; it < a->inner && live > 0; it++) {
        /* At = (M + rho (A + U)) P, all rows (BLAS does a block at the
         * cost of a few rows); rows that stopped keep their values. */
#pragma omp simd
        for (uint64_t k = 0; k < nr; k++)
            T[k] = M[k] + rho * (A[k] + U[k]);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)R, (int)R, 1.0,
                    T, (int)R, a->P, (int)R, 0.0, At, (int)R);
        for (uint64_t i = 0; i < n; i++) {
            if (active[i] == 0)
                continue;
            double *x = A + i * R, *u = U + i * R;
            const double *xt = At + i * R;
            double primal = 0, dual = 0, xn = 0, un = 0;
            for (unsigned r = 0; r < R; r++) {
                double old = x[r];
                double v = prox(xt[r] - u[r], t, sc, nonneg);
                x[r] = v;
                u[r] += v - xt[r];
                primal += (v - xt[r]) * (v - xt[r]);
                dual += (v - old) * (v - old);
                xn += v * v;
                un += u[r] * u[r];
            }
            if (primal <= tol2 * xn && dual <= tol2 * un) {
                active[i] = 0;
                live--;
            }
        }
    }
}

static void mu_rows(const amp_update_args *a, const double *M, double *A, uint64_t n,
                    double *AV)
{
    const unsigned R = a->rank;
    const double l1 = a->rule.l1, l2 = a->rule.l2;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)R, (int)R, 1.0, A,
                (int)R, a->V, (int)R, 0.0, AV, (int)R);
    for (uint64_t k = 0; k < n * R; k++) {
        double num = M[k] - l1;
        double v = A[k] * (num > 0 ? num : 0) / (AV[k] + l2 * A[k] + AMP_UPDATE_EPS);
        A[k] = v > AMP_UPDATE_EPS ? v : AMP_UPDATE_EPS;
    }
}

/* Column r of a row from s = x . V's column r (x_r included). */
static inline double hals_entry(double xr, double mr, double vrr, double s, double l1, double l2,
                                int nonneg)
{
    double den = vrr + l2;
    double num = mr - (s - xr * vrr);
    if (nonneg) {
        double y = den > 0 ? (num - l1) / den : 0;
        return y > AMP_UPDATE_EPS ? y : AMP_UPDATE_EPS;
    }
    double t = num > l1 ? num - l1 : num < -l1 ? num + l1 : 0;
    return den > 0 ? t / den : 0;
}

/* Column after column within a row, each seeing the columns before it
 * updated (Gauss-Seidel). A row's dot products are a chain of R dependent
 * additions each, so four rows go together, their four chains side by
 * side (2-3x faster on one core); every row's sums in the order of a row
 * alone, so the same bits. */
static void hals_rows(const amp_update_args *a, const double *M, double *A, uint64_t n)
{
    const unsigned R = a->rank;
    const double l1 = a->rule.l1, l2 = a->rule.l2;
    const int nonneg = a->rule.constraint == AMP_CONSTRAINT_NONNEG;
    uint64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        double *x0 = A + i * R, *x1 = x0 + R, *x2 = x1 + R, *x3 = x2 + R;
        const double *m = M + i * R;
        for (unsigned r = 0; r < R; r++) {
            const double *v = a->V + (size_t)r * R;   /* V's row r = column r */
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (unsigned q = 0; q < R; q++) {
                const double vq = v[q];
                s0 += x0[q] * vq;
                s1 += x1[q] * vq;
                s2 += x2[q] * vq;
                s3 += x3[q] * vq;
            }
            x0[r] = hals_entry(x0[r], m[r], v[r], s0, l1, l2, nonneg);
            x1[r] = hals_entry(x1[r], m[R + r], v[r], s1, l1, l2, nonneg);
            x2[r] = hals_entry(x2[r], m[2 * R + r], v[r], s2, l1, l2, nonneg);
            x3[r] = hals_entry(x3[r], m[3 * R + r], v[r], s3, l1, l2, nonneg);
        }
    }
    for (; i < n; i++) {
        double *x = A + i * R;
        const double *m = M + i * R;
        for (unsigned r = 0; r < R; r++) {
            const double *v = a->V + (size_t)r * R;
            double s = 0;
            for (unsigned q = 0; q < R; q++)
                s += x[q] * v[q];
            x[r] = hals_entry(x[r], m[r], v[r], s, l1, l2, nonneg);
        }
    }
}

void amp_cpu_update_rows(const amp_update_args *a, const double *M, double *A, double *U,
                         uint64_t n, double *scratch)
{
    if (n == 0)
        return;
    switch (a->method) {
    case AMP_METHOD_ADMM:
        admm_rows(a, M, A, U, n, scratch);
        break;
    case AMP_METHOD_MU:
        mu_rows(a, M, A, n, scratch);
        break;
    case AMP_METHOD_HALS:
        hals_rows(a, M, A, n);
        break;
    case AMP_METHOD_ALS:
    case AMP_METHOD_APR:   /* apr.c: its own updates, not from an MTTKRP */
    case AMP_METHOD_GCP:   /* gcp.c: Adam on sampled gradients */
        break;
    }
}
