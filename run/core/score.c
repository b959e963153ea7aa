/* The factor match score (amp_score.h): congruences of every pair of
 * components, then the matching of largest sum by the Hungarian method
 * (potentials, O(R^3)), exact at any rank where a greedy matching is not. */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_score.h"

size_t amp_assign_scratch(unsigned n)
{
    return 4 * ((size_t)n + 1) + (size_t)n + 1;
}

/* Minimizes the cost -C over permutations: u, v the potentials, p[j] the
 * row given column j (1-based, 0 none), way the augmenting path. */
double amp_assign_max(const double *C, unsigned n, unsigned *col, double *scratch)
{
    double *u = scratch, *v = u + n + 1, *minv = v + n + 1;
    double *pw = minv + n + 1;   /* p and way as doubles' room: n + 1 each */
    unsigned *p = (unsigned *)pw, *way = p + n + 1;
    char *used = (char *)(way + n + 1);
    for (unsigned j = 0; j <= n; j++) {
        u[j] = v[j] = 0;
        p[j] = way[j] = 0;
    }
    for (unsigned i = 1; i <= n; i++) {
        p[0] = i;
        unsigned j0 = 0;
        for (unsigned j = 0; j <= n; j++) {
            minv[j] = INFINITY;
            used[j] = 0;
        }
        do {
            used[j0] = 1;
            unsigned i0 = p[j0], j1 = 0;
            double delta = INFINITY;
            for (unsigned j = 1; j <= n; j++)
                if (!used[j]) {
                    double cur = -C[(size_t)(i0 - 1) * n + (j - 1)] - u[i0] - v[j];
                    if (cur < minv[j]) {
                        minv[j] = cur;
                        way[j] = j0;
                    }
                    if (minv[j] < delta) {
                        delta = minv[j];
                        j1 = j;
                    }
                }
            for (unsigned j = 0; j <= n; j++)
                if (used[j]) {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else
                    minv[j] -= delta;
            j0 = j1;
        } while (p[j0] != 0);
        do {
            unsigned j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
        } while (j0 != 0);
    }
    double sum = 0;
    for (unsigned j = 1; j <= n; j++)
        col[p[j] - 1] = j - 1;
    for (unsigned i = 0; i < n; i++)
        sum += C[(size_t)i * n + col[i]];
    return sum;
}

/* Column 2-norms of an n x R row-major matrix. */
static void col_norms(const double *A, uint64_t n, unsigned R, double *out)
{
    for (unsigned r = 0; r < R; r++)
        out[r] = 0;
    for (uint64_t i = 0; i < n; i++)
        for (unsigned r = 0; r < R; r++)
            out[r] += A[i * R + r] * A[i * R + r];
    for (unsigned r = 0; r < R; r++)
        out[r] = sqrt(out[r]);
}

amp_status amp_fms(const amp_cpd *a, const amp_cpd *b, double *score, unsigned *match,
                   amp_error *err)
{
    const unsigned R = a->rank, N = a->nmodes;
    if (b->rank != R || b->nmodes != N)
        return AMP_FAIL(err, AMP_ERR_USAGE, "FMS of a rank-%u model against a rank-%u one",
                        b->rank, R);
    for (unsigned m = 0; m < N; m++)
        if (a->rows[m] != b->rows[m])
            return AMP_FAIL(err, AMP_ERR_USAGE, "FMS of models of different shapes");
    const size_t RR = (size_t)R * R;
    double *C = malloc((RR + 4 * (size_t)R) * sizeof *C);
    double *scr = malloc(amp_assign_scratch(R) * sizeof *scr + 8 * ((size_t)R + 1));
    unsigned *col = malloc((size_t)R * sizeof *col);
    if (C == NULL || scr == NULL || col == NULL) {
        free(C);
        free(scr);
        free(col);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    double *na = C + RR, *nb = na + R, *la = nb + R, *lb = la + R;
    for (unsigned r = 0; r < R; r++) {
        la[r] = fabs(a->lambda[r]);
        lb[r] = fabs(b->lambda[r]);
    }
    for (size_t q = 0; q < RR; q++)
        C[q] = 1;
    for (unsigned m = 0; m < N; m++) {
        const double *A = a->A[m], *B = b->A[m];
        col_norms(A, a->rows[m], R, na);
        col_norms(B, b->rows[m], R, nb);
        for (unsigned r = 0; r < R; r++) {
            la[r] *= na[r];
            lb[r] *= nb[r];
        }
        for (unsigned i = 0; i < R; i++)
            for (unsigned j = 0; j < R; j++) {
                double dot = 0;
                for (uint64_t row = 0; row < a->rows[m]; row++)
                    dot += A[row * R + i] * B[row * R + j];
                double den = na[i] * nb[j];
                C[(size_t)i * R + j] *= den > 0 ? fabs(dot) / den : 0;
            }
    }
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = 0; j < R; j++) {
            double mx = la[i] > lb[j] ? la[i] : lb[j];
            C[(size_t)i * R + j] *= mx > 0 ? 1 - fabs(la[i] - lb[j]) / mx : 1;
        }
    double sum = amp_assign_max(C, R, col, scr);
    *score = sum / R;
    if (match)
        memcpy(match, col, (size_t)R * sizeof *col);
    free(C);
    free(scr);
    free(col);
    return AMP_OK;
}
