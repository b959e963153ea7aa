/* The factor match score of two CP models (amped-run --starts): how far a
 * model repeats another, as the Tensor Toolbox's score. */
#ifndef AMP_SCORE_H
#define AMP_SCORE_H

#include "amp_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FMS of b against a (the same modes, rows and rank R): every column of
 * every factor to unit 2-norm, its norms into lambda; the congruence of
 * component i of a with j of b is the product over modes of |a_i . b_j|,
 * times 1 - |la_i - lb_j| / max(la_i, lb_j) (1 where both are 0); the
 * components matched one to one for the largest sum (the Hungarian
 * method), which divided by R is the score, in [0, 1]. match (R, or
 * NULL): b's component matched to each of a's. AMP_ERR_USAGE where the
 * shapes differ, AMP_ERR_NOMEM. */
amp_status amp_fms(const amp_cpd *a, const amp_cpd *b, double *score, unsigned *match,
                   amp_error *err);

/* The assignment of largest sum of an n x n matrix C (row-major): col[i]
 * the column given to row i; returns the sum. scratch: amp_assign_scratch
 * doubles. */
size_t amp_assign_scratch(unsigned n);
double amp_assign_max(const double *C, unsigned n, unsigned *col, double *scratch);

#ifdef __cplusplus
}
#endif
#endif
