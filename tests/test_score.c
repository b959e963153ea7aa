/* The factor match score (run/core/score.c) against references here:
 *
 *  - The Hungarian method's assignment sum equals the largest over every
 *    permutation (enumerated) for n = 1..7, 30 random matrices each, to
 *    1e-12; on a matrix where the greedy matching is wrong, the optimum.
 *  - FMS of a model against itself, its components permuted and every
 *    column scaled (the scales moved into lambda, so the same model), is 1
 *    to 1e-12, and the match found is the permutation.
 *  - One component's weight doubled: (R - 1 + 1/2) / R, the penalty.
 *  - Against an unrelated random model, below 0.9; ranks that differ are
 *    refused. */
#include <config.h>

#include <math.h>

#include "amp_score.h"
#include "tap.h"

static uint64_t state = 88172645463325252ull;
static double uniform(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (double)(state >> 11) * 0x1.0p-53;
}

static double brute(const double *C, unsigned n, unsigned *p, unsigned k, int *used)
{
    if (k == n) {
        double s = 0;
        for (unsigned i = 0; i < n; i++)
            s += C[i * n + p[i]];
        return s;
    }
    double best = -INFINITY;
    for (unsigned j = 0; j < n; j++)
        if (!used[j]) {
            used[j] = 1;
            p[k] = j;
            double s = brute(C, n, p, k + 1, used);
            best = s > best ? s : best;
            used[j] = 0;
        }
    return best;
}

static void model(amp_cpd *c, unsigned R)
{
    static const uint64_t rows[3] = {7, 6, 5};
    memset(c, 0, sizeof *c);
    c->nmodes = 3;
    c->rank = R;
    c->lambda = malloc(R * sizeof(double));
    for (unsigned r = 0; r < R; r++)
        c->lambda[r] = 0.5 + uniform();
    for (unsigned m = 0; m < 3; m++) {
        c->rows[m] = rows[m];
        c->A[m] = malloc(rows[m] * R * sizeof(double));
        for (uint64_t k = 0; k < rows[m] * R; k++)
            c->A[m][k] = uniform() - 0.3;
    }
}

static void model_free(amp_cpd *c)
{
    for (unsigned m = 0; m < c->nmodes; m++)
        free(c->A[m]);
    free(c->lambda);
}

int main(void)
{
    plan(9);
    double C[49], scratch[64];
    unsigned col[7], p[7];
    int used[7];
    double worst = 0;
    for (unsigned n = 1; n <= 7; n++)
        for (int rep = 0; rep < 30; rep++) {
            for (unsigned k = 0; k < n * n; k++)
                C[k] = uniform();
            memset(used, 0, sizeof used);
            double want = brute(C, n, p, 0, used);
            double got = amp_assign_max(C, n, col, scratch);
            double again = 0;
            for (unsigned i = 0; i < n; i++)
                again += C[i * n + col[i]];
            double d = fabs(got - want) + fabs(again - got);
            worst = d > worst ? d : worst;
        }
    ok(worst < 1e-12, "Hungarian = exhaustive, n 1..7 (largest difference %.1e)", worst);
    const double trap[4] = {0.9, 0.8, 0.85, 0.1};
    double got = amp_assign_max(trap, 2, col, scratch);
    ok(fabs(got - 1.65) < 1e-15 && col[0] == 1 && col[1] == 0,
       "where greedy takes 0.9 + 0.1, the optimum 0.8 + 0.85 (%g)", got);

    const unsigned R = 5;
    amp_cpd a, b, d;
    model(&a, R);
    model(&b, R);
    const unsigned perm[5] = {3, 0, 4, 1, 2};
    for (unsigned r = 0; r < R; r++) {
        double scale = 1;
        for (unsigned m = 0; m < 3; m++) {
            double s = 0.25 + 3 * uniform();
            for (uint64_t i = 0; i < a.rows[m]; i++)
                b.A[m][i * R + r] = a.A[m][i * R + perm[r]] * s;
            scale *= s;
        }
        b.lambda[r] = a.lambda[perm[r]] / scale;
    }
    double score = 0;
    unsigned match[5];
    amp_error err = {0};
    ok(amp_fms(&a, &b, &score, match, &err) == AMP_OK, "FMS runs");
    ok(fabs(score - 1) < 1e-12, "itself permuted and scaled: 1 (%.17g)", score);
    int same = 1;
    for (unsigned r = 0; r < R; r++)
        same &= perm[match[r]] == r;
    ok(same, "the match found undoes the permutation");
    b.lambda[0] *= 2;
    amp_fms(&a, &b, &score, NULL, &err);
    ok(fabs(score - (R - 0.5) / R) < 1e-12, "one weight doubled: (R - 1/2) / R (%.17g)", score);
    model(&d, R);
    amp_fms(&a, &d, &score, NULL, &err);
    ok(score < 0.9, "an unrelated model: %.3f", score);
    amp_fms(&a, &a, &score, NULL, &err);
    ok(fabs(score - 1) < 1e-15, "itself: 1");
    amp_cpd e;
    model(&e, R - 1);
    ok(amp_fms(&a, &e, &score, NULL, &err) == AMP_ERR_USAGE, "ranks 5 and 4 refused: %s",
       err.msg);
    model_free(&a);
    model_free(&b);
    model_free(&d);
    model_free(&e);
    return done_testing();
}
