/* The methods' names and the check of their constraints and penalties
 * against the tensor's modes. */
#include <config.h>

#include <math.h>

#include "amp_core.h"

const char *amp_method_name(amp_method m)
{
    static const char *const names[AMP_NMETHODS] = {"als", "ao-admm", "mu", "hals", "cp-apr",
                                                         "gcp"};
    return (unsigned)m < AMP_NMETHODS ? names[m] : "?";
}

const char *amp_constraint_name(amp_constraint c)
{
    return c == AMP_CONSTRAINT_NONNEG ? "nonneg" : "none";
}

/* Value i of a list of n (1: the same for every mode). */
static unsigned pick(unsigned n, unsigned i)
{
    return n <= 1 ? 0 : i;
}

amp_status amp_rules_resolve(const amp_cpd_opts *o, unsigned nmodes, amp_mode_rule *rule,
                             amp_error *err)
{
    const amp_rules *r = &o->rules;
    static const char *const what[3] = {"--constraint", "--l1", "--l2"};
    const unsigned n[3] = {r->n_constraint, r->n_l1, r->n_l2};
    for (int k = 0; k < 3; k++)
        if (n[k] > 1 && n[k] != nmodes)
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s lists %u values and the tensor has %u "
                            "modes: give one value, or one per mode", what[k], n[k], nmodes);
    int any = 0;
    for (unsigned m = 0; m < nmodes; m++) {
        rule[m].constraint = r->n_constraint ? r->constraint[pick(r->n_constraint, m)]
                                             : AMP_CONSTRAINT_NONE;
        rule[m].l1 = r->n_l1 ? r->l1[pick(r->n_l1, m)] : 0;
        rule[m].l2 = r->n_l2 ? r->l2[pick(r->n_l2, m)] : 0;
        if (!(rule[m].l1 >= 0 && rule[m].l2 >= 0 && isfinite(rule[m].l1) &&
              isfinite(rule[m].l2)))
            return AMP_FAIL(err, AMP_ERR_USAGE, "mode %u: penalties must be finite and not "
                            "negative", m + 1);
        any |= rule[m].constraint != AMP_CONSTRAINT_NONE || rule[m].l1 > 0 || rule[m].l2 > 0;
        /* MU multiplies: it cannot leave the non-negative orthant, and
         * cannot reach a factor that needs negative entries. */
        if (o->method == AMP_METHOD_MU && rule[m].constraint != AMP_CONSTRAINT_NONNEG)
            return AMP_FAIL(err, AMP_ERR_USAGE, "--method mu keeps factors non-negative and "
                            "needs --constraint nonneg on every mode (mode %u has none); "
                            "ao-admm and hals take other constraints", m + 1);
    }
    /* Completion's normal equations take a ridge, row by row. */
    const int completion = o->completion.observed == AMP_OBSERVED_NONZEROS;
    if (completion && o->method != AMP_METHOD_ALS)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--observed nonzeros fits by least squares "
                        "(--method als), not --method %s", amp_method_name(o->method));
    if (completion && (r->n_constraint || r->n_l1))
        return AMP_FAIL(err, AMP_ERR_USAGE, "--observed nonzeros takes --l2 (its ridge), "
                        "not --constraint or --l1");
    if (completion)
        any = 0;
    if (o->method == AMP_METHOD_ALS && any)
        return AMP_FAIL(err, AMP_ERR_USAGE, "--method als takes no constraint or penalty: "
                        "use --method ao-admm, hals or mu");
    /* Poisson CP's factors are non-negative by its model: no list to give. */
    if (o->method == AMP_METHOD_APR && (r->n_constraint || r->n_l1 || r->n_l2))
        return AMP_FAIL(err, AMP_ERR_USAGE, "--method cp-apr takes no --constraint, --l1 or "
                        "--l2: its factors are non-negative by its model");
    /* GCP's bound comes with its loss (amp_gcp_lower_bound). */
    if (o->method == AMP_METHOD_GCP && (r->n_constraint || r->n_l1 || r->n_l2))
        return AMP_FAIL(err, AMP_ERR_USAGE, "--method gcp takes no --constraint, --l1 or "
                        "--l2: its loss sets its bound (non-negative factors for poisson, "
                        "bernoulli-odds, gamma and rayleigh)");
    if (o->method == AMP_METHOD_ADMM && (o->admm_inner < 1 || o->admm_inner > AMP_ADMM_INNER_MAX))
        return AMP_FAIL(err, AMP_ERR_USAGE, "AO-ADMM takes 1 to %u inner iterations, not %u",
                        AMP_ADMM_INNER_MAX, o->admm_inner);
    return AMP_OK;
}

amp_status amp_rules_gpu_layout(amp_method method, int completion, long ngpus, int equal_nnz,
                                int overlap, amp_error *err)
{
    if (ngpus > 1 && equal_nnz && (completion || method == AMP_METHOD_APR))
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%s on %ld GPUs takes the file's shards "
                        "(--partition shards), not --partition equal-nnz: %s",
                        completion ? "--observed nonzeros" : "--method cp-apr", ngpus,
                        completion ? "a row's system needs every nonzero of the row on one GPU"
                                   : "an inner iteration needs every nonzero of a row on one "
                                     "GPU");
    if (completion && overlap)
        return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--overlap: not with --observed nonzeros, "
                        "whose pass solves each row as it meets the row's nonzeros, which "
                        "--overlap's two groups part");
    return AMP_OK;
}
