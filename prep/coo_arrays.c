/* A tensor from coordinate arrays a caller holds in memory (libamped's
 * amped_tensor_from_coo): the checks amped-prep's readers make of a file,
 * made of the arrays, in parallel. */
#include <config.h>

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "amp_coo.h"
#include "amp_threads.h"

/* The index of nonzero k in mode m as a signed value (an unsigned one
 * above INT64_MAX is out of every range, so INT64_MAX stands for it). */
static int64_t index_at(const amp_coo_arrays *a, uint64_t k, unsigned m)
{
    const int64_t at = (int64_t)k * a->nnz_stride + (int64_t)m * a->mode_stride;
    switch (a->index_type) {
    case AMP_INDEX_INT32:
        return ((const int32_t *)a->indices)[at];
    case AMP_INDEX_UINT32:
        return ((const uint32_t *)a->indices)[at];
    case AMP_INDEX_INT64:
        return ((const int64_t *)a->indices)[at];
    default: {
        uint64_t u = ((const uint64_t *)a->indices)[at];
        return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    }
}

static double value_at(const amp_coo_arrays *a, uint64_t k)
{
    return a->values[(int64_t)k * (a->value_stride ? a->value_stride : 1)];
}

/* What is wrong with nonzero k, into err; AMP_OK when nothing is. */
static amp_status check_one(const amp_coo_arrays *a, const uint64_t *dims, uint64_t k,
                            amp_error *err)
{
    for (unsigned m = 0; m < a->nmodes; m++) {
        int64_t i = index_at(a, k, m);
        if (i < a->index_base)
            return AMP_FAIL(err, AMP_ERR_RANGE, "nonzero %" PRIu64 " (from 0), mode %u (from "
                            "0): index %" PRId64 " is below the index base %d", k, m, i,
                            a->index_base);
        if (dims != NULL && (uint64_t)(i - a->index_base) >= dims[m])
            return AMP_FAIL(err, AMP_ERR_RANGE, "nonzero %" PRIu64 " (from 0), mode %u (from "
                            "0): index %" PRId64 " is beyond the dimension %" PRIu64 " (indices "
                            "from %d)", k, m, i, dims[m], a->index_base);
    }
    double v = value_at(a, k);
    if (!isfinite(v))
        return AMP_FAIL(err, AMP_ERR_RANGE, "nonzero %" PRIu64 " (from 0): its value is %g; "
                        "values must be finite", k, v);
    return AMP_OK;
}

amp_status amp_coo_arrays_check(const amp_coo_arrays *a, uint64_t *dims, amp_error *err)
{
    if (a->nmodes < 1 || a->nmodes > AMP_MAX_MODES)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%u modes: a tensor has 1 to %d", a->nmodes,
                        AMP_MAX_MODES);
    if (a->index_base != 0 && a->index_base != 1)
        return AMP_FAIL(err, AMP_ERR_USAGE, "index base %d: give 0 or 1", a->index_base);
    if (a->index_type < AMP_INDEX_INT32 || a->index_type > AMP_INDEX_UINT64)
        return AMP_FAIL(err, AMP_ERR_USAGE, "unknown index type %d", (int)a->index_type);
    if (a->nnz == 0)
        return AMP_FAIL(err, AMP_ERR_EMPTY, "the tensor has no nonzeros");
    if (a->indices == NULL || a->values == NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "no index or value array");
    if (a->dims != NULL)
        for (unsigned m = 0; m < a->nmodes; m++)
            if (a->dims[m] == 0)
                return AMP_FAIL(err, AMP_ERR_USAGE, "mode %u (from 0) has dimension 0", m);
    /* The first bad nonzero, found in parallel; its message made after. */
    uint64_t bad = UINT64_MAX;
    const int64_t n = (int64_t)a->nnz;
#pragma omp parallel for reduction(min : bad) schedule(static)
    for (int64_t k = 0; k < n; k++) {
        if (bad != UINT64_MAX && (uint64_t)k > bad)
            continue;
        amp_error e = {0};
        if (check_one(a, a->dims, (uint64_t)k, &e) != AMP_OK && (uint64_t)k < bad)
            bad = (uint64_t)k;
    }
    if (bad != UINT64_MAX)
        return check_one(a, a->dims, bad, err);
    for (unsigned m = 0; m < a->nmodes; m++) {
        if (a->dims != NULL) {
            dims[m] = a->dims[m];
            continue;
        }
        uint64_t mx = 0;
#pragma omp parallel for reduction(max : mx) schedule(static)
        for (int64_t k = 0; k < n; k++) {
            uint64_t i = amp_coo_arrays_index(a, (uint64_t)k, m);
            mx = i > mx ? i : mx;
        }
        dims[m] = mx + 1;
    }
    return AMP_OK;
}

amp_status amp_coo_from_arrays(const amp_coo_arrays *a, amp_coo *t, amp_error *err)
{
    memset(t, 0, sizeof *t);
    uint64_t dims[AMP_MAX_MODES];
    AMP_CHECK(amp_coo_arrays_check(a, dims, err));
    const int64_t n = (int64_t)a->nnz;
    AMP_CHECK(amp_coo_init(t, a->nmodes, err));
    amp_status rc = amp_coo_reserve(t, a->nnz, err);
    if (rc != AMP_OK) {
        amp_coo_free(t);
        return rc;
    }
    t->nnz = a->nnz;
    for (unsigned m = 0; m < a->nmodes; m++) {
        uint64_t *ind = t->ind[m];
#pragma omp parallel for schedule(static)
        for (int64_t k = 0; k < n; k++)
            ind[k] = amp_coo_arrays_index(a, (uint64_t)k, m);
    }
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < n; k++)
        t->val[k] = value_at(a, (uint64_t)k);
    for (unsigned m = 0; m < a->nmodes; m++)
        t->dims[m] = dims[m];
    return AMP_OK;
}
