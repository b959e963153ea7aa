/* What constrained.cu's launcher hands the kernels of the constrained
 * updates kept in files of their own (C++, nvcc only). */
#ifndef AMP_UPDATE_INTERNAL_H
#define AMP_UPDATE_INTERNAL_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "als_kernels.h"

/* HALS at rank 1 to AMP_GPU_UPDATE_FUSED_RANK (update_hals.cu). */
typedef struct hals_tile_params {
    unsigned R;
    int nonneg;
    double l1, l2;
    const double *V;       /* R x R, symmetric, device */
    const double *scale;   /* R column scales A is read at (device), or NULL */
} hals_tile_params;

/* Rows [0, rows) of A updated in place from M, as amp_gpu_update_rows
 * says; sms sizes the grid. cudaErrorInvalidValue for a rank past
 * AMP_GPU_UPDATE_FUSED_RANK. */
cudaError_t amp_gpu_hals_tiles(const hals_tile_params *p, const double *M, double *A,
                               uint64_t rows, int sms, cudaStream_t s);

#endif
