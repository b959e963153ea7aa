/* The decomposition's options, its factors (allocation and the random
 * start), and the one check of its rank. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_core.h"

amp_status amp_rank_check(unsigned rank, unsigned max, const char *what, amp_error *err)
{
    if (rank >= 1 && rank <= max)
        return AMP_OK;
    return AMP_FAIL(err, AMP_ERR_USAGE, "%s takes rank 1 to %u, not %u", what, max, rank);
}

void amp_cpd_opts_init(amp_cpd_opts *o)
{
    memset(o, 0, sizeof *o);
    o->rank = 16;
    o->max_iters = 50;
    o->tol = 1e-5;
    o->seed = 1;
    o->precision = AMP_PRECISION_F64;
    o->method = AMP_METHOD_ALS;
    o->admm_inner = AMP_ADMM_INNER_DEFAULT;
    o->apr.inner = AMP_APR_INNER_DEFAULT;
    o->apr.kappa = AMP_APR_KAPPA_DEFAULT;
    o->apr.kappa_tol = AMP_APR_KAPPA_TOL_DEFAULT;
    o->apr.eps_div_zero = AMP_APR_EPS_DEFAULT;
    o->gcp.loss = AMP_GCP_GAUSSIAN;
    o->gcp.epoch_iters = AMP_GCP_EPOCH_ITERS_DEFAULT;
    o->gcp.rate = AMP_GCP_RATE_DEFAULT;
    o->gcp.decay = AMP_GCP_DECAY_DEFAULT;
    o->gcp.max_fails = AMP_GCP_MAX_FAILS_DEFAULT;
    o->gcp.huber_delta = AMP_GCP_HUBER_DELTA_DEFAULT;
    o->gcp.adam = AMP_GCP_ADAM_DENSE;
    o->gcp.scale_start = 1;
}

/* ---- factors ------------------------------------------------------------- */

void amp_cpd_free(amp_cpd *c)
{
    for (unsigned m = 0; m < c->nmodes; m++) {
        amp_huge_free(c->A[m], (size_t)c->rows[m] * c->rank * sizeof(double) + 1);
        free(c->start_gram[m]);
    }
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

/* A counter-based generator keyed on the original coordinates: entry
 * (m, i, r) of the start depends on the seed, the rank and the original
 * index of row i alone, so it is the same however amped-prep relabelled
 * and sharded the file and however the rows are split among threads,
 * processes or GPUs. */
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
        const uint64_t *orig = t->new_to_orig[m];
        uint64_t base = mix64(seed ^ mix64(m + 1));
        int64_t n = (int64_t)c->rows[m];
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            /* A tensor built in memory without a relabelling keeps its
             * original indices. */
            uint64_t row = orig ? orig[i] : (uint64_t)i;
            for (unsigned r = 0; r < rank; r++)
                A[(uint64_t)i * rank + r] =
                    (double)(mix64(base + row * rank + r) >> 11) * 0x1.0p-53;
        }
    }
    return AMP_OK;
}
