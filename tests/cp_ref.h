/* A plain CP-ALS in f64 that the backends' fit sequences are checked
 * against, written from the textbook (Kolda and Bader 2009, Algorithm 1,
 * with the Tensor Toolbox's cp_als normalization: column 2-norms on the
 * first iteration, max(max |a|, 1) after) and sharing no code with run/:
 * nonzeros as coordinates in the original index space, factors of every
 * index (dims[m] x R, row-major), the MTTKRP a loop over the nonzeros, the
 * Gram matrices recomputed from the factors each time, the normal
 * equations solved by Gaussian elimination with partial pivoting, and the
 * fit from the residual's three terms, the inner product summed over the
 * nonzeros directly (amped takes it from the last MTTKRP).
 *
 * Slow on purpose (O(nnz N R) per mode, every Gram from scratch): for the
 * tests' small tensors only. */
#ifndef AMP_CP_REF_H
#define AMP_CP_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amp_coo.h"

#define CP_REF_MAX_MODES 16

/* The nonzeros with duplicates summed (the textbook tensor amped-prep
 * stores). */
typedef struct cp_ref_tensor {
    unsigned N;
    uint64_t dims[CP_REF_MAX_MODES];
    uint64_t nnz;
    uint64_t *ind;   /* nnz x N */
    double *val;
    double norm_sq;
} cp_ref_tensor;

static const amp_coo *cp_ref_sort_x;

static int cp_ref_cmp(const void *a, const void *b)
{
    uint64_t i = *(const uint64_t *)a, j = *(const uint64_t *)b;
    for (unsigned m = 0; m < cp_ref_sort_x->nmodes; m++)
        if (cp_ref_sort_x->ind[m][i] != cp_ref_sort_x->ind[m][j])
            return cp_ref_sort_x->ind[m][i] < cp_ref_sort_x->ind[m][j] ? -1 : 1;
    return 0;
}

/* x, indices from 0, summed where they repeat. 0 on failure (memory). */
static inline int cp_ref_tensor_from(const amp_coo *x, cp_ref_tensor *t)
{
    const unsigned N = x->nmodes;
    memset(t, 0, sizeof *t);
    t->N = N;
    for (unsigned m = 0; m < N; m++)
        t->dims[m] = x->dims[m];
    uint64_t *order = malloc((x->nnz + 1) * sizeof *order);
    t->ind = malloc((x->nnz * N + 1) * sizeof *t->ind);
    t->val = malloc((x->nnz + 1) * sizeof *t->val);
    if (!order || !t->ind || !t->val) {
        free(order);
        free(t->ind);
        free(t->val);
        return 0;
    }
    for (uint64_t k = 0; k < x->nnz; k++)
        order[k] = k;
    cp_ref_sort_x = x;
    qsort(order, x->nnz, sizeof *order, cp_ref_cmp);
    for (uint64_t k = 0; k < x->nnz; k++) {
        uint64_t i = order[k];
        if (t->nnz > 0 && cp_ref_cmp(&order[k - 1], &i) == 0) {
            t->val[t->nnz - 1] += x->val[i];
            continue;
        }
        for (unsigned m = 0; m < N; m++)
            t->ind[t->nnz * N + m] = x->ind[m][i];
        t->val[t->nnz++] = x->val[i];
    }
    for (uint64_t k = 0; k < t->nnz; k++)
        t->norm_sq += t->val[k] * t->val[k];
    free(order);
    return 1;
}

static inline void cp_ref_tensor_free(cp_ref_tensor *t)
{
    free(t->ind);
    free(t->val);
    memset(t, 0, sizeof *t);
}

/* G = A^T A, R x R. */
static inline void cp_ref_gram(const double *A, uint64_t rows, unsigned R, double *G)
{
    for (unsigned p = 0; p < R; p++)
        for (unsigned q = 0; q < R; q++) {
            double s = 0;
            for (uint64_t i = 0; i < rows; i++)
                s += A[i * R + p] * A[i * R + q];
            G[p * R + q] = s;
        }
}

/* Solve X V = B for X (n x R) in place of B, V R x R (not changed):
 * Gaussian elimination with partial pivoting on V^T, then every row.
 * 0 when a pivot is zero or not finite (V singular). */
static inline int cp_ref_solve(const double *V, unsigned R, double *B, uint64_t n)
{
    double *LU = malloc((size_t)R * R * sizeof *LU);
    unsigned *piv = malloc(R * sizeof *piv);
    int good = LU && piv;
    for (unsigned i = 0; good && i < R; i++)
        for (unsigned j = 0; j < R; j++)
            LU[i * R + j] = V[j * R + i];   /* V^T: x^T solves V^T x^T = b^T */
    for (unsigned k = 0; good && k < R; k++) {
        unsigned p = k;
        for (unsigned i = k + 1; i < R; i++)
            if (fabs(LU[i * R + k]) > fabs(LU[p * R + k]))
                p = i;
        piv[k] = p;
        if (p != k)
            for (unsigned j = 0; j < R; j++) {
                double tmp = LU[k * R + j];
                LU[k * R + j] = LU[p * R + j];
                LU[p * R + j] = tmp;
            }
        if (!(fabs(LU[k * R + k]) > 0) || !isfinite(LU[k * R + k])) {
            good = 0;
            break;
        }
        for (unsigned i = k + 1; i < R; i++) {
            double l = LU[i * R + k] /= LU[k * R + k];
            for (unsigned j = k + 1; j < R; j++)
                LU[i * R + j] -= l * LU[k * R + j];
        }
    }
    for (uint64_t r = 0; good && r < n; r++) {
        double *b = B + r * R;
        for (unsigned k = 0; k < R; k++)
            if (piv[k] != k) {
                double tmp = b[k];
                b[k] = b[piv[k]];
                b[piv[k]] = tmp;
            }
        for (unsigned i = 1; i < R; i++)
            for (unsigned j = 0; j < i; j++)
                b[i] -= LU[i * R + j] * b[j];
        for (unsigned i = R; i-- > 0;) {
            for (unsigned j = i + 1; j < R; j++)
                b[i] -= LU[i * R + j] * b[j];
            b[i] /= LU[i * R + i];
        }
    }
    free(LU);
    free(piv);
    return good;
}

/* The fit 1 - |X - model| / |X| of lambda and the factors. */
static inline double cp_ref_fit(const cp_ref_tensor *x, double *const *A, const double *lambda,
                                unsigned R)
{
    const unsigned N = x->N;
    double inner = 0, model = 0;
    for (uint64_t k = 0; k < x->nnz; k++)
        for (unsigned r = 0; r < R; r++) {
            double p = lambda[r] * x->val[k];
            for (unsigned m = 0; m < N; m++)
                p *= A[m][x->ind[k * N + m] * R + r];
            inner += p;
        }
    double *G = malloc((size_t)N * R * R * sizeof *G);
    if (G == NULL)
        return NAN;
    for (unsigned m = 0; m < N; m++)
        cp_ref_gram(A[m], x->dims[m], R, G + (size_t)m * R * R);
    for (unsigned p = 0; p < R; p++)
        for (unsigned q = 0; q < R; q++) {
            double h = lambda[p] * lambda[q];
            for (unsigned m = 0; m < N; m++)
                h *= G[(size_t)m * R * R + p * R + q];
            model += h;
        }
    free(G);
    double resid = x->norm_sq + model - 2 * inner;
    return 1 - sqrt(resid > 0 ? resid : 0) / sqrt(x->norm_sq);
}

/* `iters` iterations of CP-ALS from the factors in A (dims[m] x R each,
 * changed in place); lambda gets R values, fits[i] the fit after
 * iteration i + 1. 0 when a solve met a singular V or memory ran out. */
static inline int cp_ref_als(const cp_ref_tensor *x, unsigned R, unsigned iters, double **A,
                             double *lambda, double *fits)
{
    const unsigned N = x->N;
    uint64_t maxd = 1;
    for (unsigned m = 0; m < N; m++)
        maxd = x->dims[m] > maxd ? x->dims[m] : maxd;
    double *M = malloc(maxd * R * sizeof *M), *V = malloc((size_t)R * R * sizeof *V);
    double *G = malloc((size_t)R * R * sizeof *G), *row = malloc(R * sizeof *row);
    int good = M && V && G && row;
    for (unsigned it = 0; good && it < iters; it++) {
        for (unsigned d = 0; good && d < N; d++) {
            memset(M, 0, x->dims[d] * R * sizeof *M);
            for (uint64_t k = 0; k < x->nnz; k++) {
                const uint64_t *i = x->ind + k * N;
                for (unsigned r = 0; r < R; r++)
                    row[r] = x->val[k];
                for (unsigned m = 0; m < N; m++)
                    if (m != d)
                        for (unsigned r = 0; r < R; r++)
                            row[r] *= A[m][i[m] * R + r];
                for (unsigned r = 0; r < R; r++)
                    M[i[d] * R + r] += row[r];
            }
            for (size_t k = 0; k < (size_t)R * R; k++)
                V[k] = 1;
            for (unsigned m = 0; m < N; m++)
                if (m != d) {
                    cp_ref_gram(A[m], x->dims[m], R, G);
                    for (size_t k = 0; k < (size_t)R * R; k++)
                        V[k] *= G[k];
                }
            if (!cp_ref_solve(V, R, M, x->dims[d])) {
                good = 0;
                break;
            }
            memcpy(A[d], M, x->dims[d] * R * sizeof *M);
            for (unsigned r = 0; r < R; r++) {
                double n = 0;
                for (uint64_t i = 0; i < x->dims[d]; i++) {
                    double a = fabs(A[d][i * R + r]);
                    n = it == 0 ? n + a * a : a > n ? a : n;
                }
                n = it == 0 ? sqrt(n) : n > 1 ? n : 1;
                lambda[r] = n > 0 ? n : 1;
                for (uint64_t i = 0; i < x->dims[d]; i++)
                    A[d][i * R + r] /= lambda[r];
            }
        }
        if (good)
            fits[it] = cp_ref_fit(x, A, lambda, R);
    }
    free(M);
    free(V);
    free(G);
    free(row);
    return good;
}

#endif
