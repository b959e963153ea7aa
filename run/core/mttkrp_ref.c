/* The plain f64 reference MTTKRP every kernel is checked against, and the
 * bytes floor of any MTTKRP. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "amp_core.h"

/* Every index decoded the general way (amp_blco_field, key included), one
 * nonzero at a time, summed in f64 in file order. */
amp_status amp_mttkrp_reference(const amp_tensor *t, unsigned src, unsigned d,
                                const double *const *A, unsigned rank, double *M,
                                amp_error *err)
{
    const amp_copy *c = &t->copies[src];
    const amp_mode_layout *l = &c->layout;
    memset(M, 0, (size_t)t->rows[d] * rank * sizeof *M);
    double *row = malloc((size_t)rank * sizeof *row);
    if (row == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    for (size_t b = 0; b < c->nblocks; b++) {
        for (uint64_t k = c->block_start[b]; k < c->block_start[b + 1]; k++) {
            double v = t->value_type == AMP_VALUES_F32 ? ((const float *)c->vals)[k]
                                                       : ((const double *)c->vals)[k];
            for (unsigned r = 0; r < rank; r++)
                row[r] = v;
            uint64_t out = 0;
            for (unsigned m = 0; m < t->nmodes; m++) {
                uint64_t i = amp_blco_field(c->block_key[b], c->words[k], l->shift[m],
                                            l->width[m]);
                if (m == d) {
                    out = i;
                    continue;
                }
                for (unsigned r = 0; r < rank; r++)
                    row[r] *= A[m][i * rank + r];
            }
            for (unsigned r = 0; r < rank; r++)
                M[out * rank + r] += row[r];
        }
    }
    free(row);
    return AMP_OK;
}

double amp_mttkrp_min_bytes(const amp_tensor *t, unsigned rank, size_t factor_size)
{
    double bytes = (double)t->nnz * (8.0 + (double)amp_value_size(t->value_type));
    for (unsigned m = 0; m < t->nmodes; m++)
        bytes += (double)t->rows[m] * rank * (double)factor_size;   /* inputs and output */
    return bytes;
}
