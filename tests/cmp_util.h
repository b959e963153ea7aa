/* What the completion tests on the GPU share (test_gpu_completion,
 * test_multi_gpu): the options of a run, each iteration's fit and RMSEs
 * logged through on_iter, their largest relative difference, and the
 * counts of entries and kept rows compared. */
#ifndef AMP_TEST_CMP_UTIL_H
#define AMP_TEST_CMP_UTIL_H

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "amp_core.h"
#include "tap.h"

#define CMP_ITERS 4

typedef struct cmp_log {
    unsigned n;
    double fit[CMP_ITERS], train[CMP_ITERS], test[CMP_ITERS];
    const amp_cpd *c;
} cmp_log;

static inline void cmp_log_iter(void *ctx, unsigned iter, double fit, double delta,
                                double seconds)
{
    cmp_log *l = ctx;
    (void)delta, (void)seconds;
    if (iter == l->n + 1 && l->n < CMP_ITERS) {
        l->fit[l->n] = fit;
        l->train[l->n] = l->c->completion.rmse_train;
        l->test[l->n] = l->c->completion.rmse_test;
        l->n++;
    }
}

/* CMP_ITERS iterations, tol 0, seed 5 (the holdout's draw). */
static inline amp_cpd_opts cmp_opts(unsigned R, int f32, double l2, double holdout)
{
    amp_cpd_opts o;
    amp_cpd_opts_init(&o);
    o.rank = R;
    o.max_iters = CMP_ITERS;
    o.tol = 0;
    o.precision = f32 ? AMP_PRECISION_F32 : AMP_PRECISION_F64;
    o.completion.observed = AMP_OBSERVED_NONZEROS;
    o.completion.holdout = holdout;
    o.seed = 5;
    if (l2 > 0) {
        o.rules.n_l2 = 1;
        o.rules.l2[0] = l2;
    }
    return o;
}

static inline double cmp_rel(double a, double b)
{
    if (a == b || (isnan(a) && isnan(b)))
        return 0;
    return fabs(a - b) / fabs(b);
}

/* The largest relative difference of the fits and RMSEs (NaN if any,
 * INFINITY when the logs' lengths differ). */
static inline double cmp_gap(const cmp_log *a, const cmp_log *b)
{
    if (a->n != b->n)
        return INFINITY;
    double gap = 0;
    for (unsigned k = 0; k < a->n; k++) {
        const double e[3] = {cmp_rel(a->fit[k], b->fit[k]), cmp_rel(a->train[k], b->train[k]),
                             cmp_rel(a->test[k], b->test[k])};
        for (int q = 0; q < 3; q++)
            gap = e[q] > gap || isnan(e[q]) ? e[q] : gap;
    }
    return gap;
}

static inline int cmp_same_counts(const amp_cpd *a, const amp_cpd *b, unsigned N)
{
    if (a->completion.n_train != b->completion.n_train ||
        a->completion.n_test != b->completion.n_test) {
        diag("training %" PRIu64 " and %" PRIu64 ", test %" PRIu64 " and %" PRIu64,
             a->completion.n_train, b->completion.n_train, a->completion.n_test,
             b->completion.n_test);
        return 0;
    }
    for (unsigned m = 0; m < N; m++)
        if (a->completion.unobserved[m] != b->completion.unobserved[m] ||
            a->completion.singular[m] != b->completion.singular[m]) {
            diag("mode %u: kept %" PRIu64 "/%" PRIu64 " against %" PRIu64 "/%" PRIu64, m + 1,
                 a->completion.unobserved[m], a->completion.singular[m],
                 b->completion.unobserved[m], b->completion.singular[m]);
            return 0;
        }
    return 1;
}

#endif
