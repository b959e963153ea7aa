/* What constrained.cu's launcher hands the kernels of the constrained
 * updates kept in files of their own (C++, nvcc only). */
#ifndef AMP_UPDATE_INTERNAL_H
#define AMP_UPDATE_INTERNAL_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "als_kernels.h"

/* The update kernels' grid, one wave: as many blocks of `threads` as the
 * device holds at once (the kernel's occupancy times sms), no more than
 * there are groups of per_block rows; each block then takes a contiguous,
 * equal range of rows. */
template <typename K>
static inline cudaError_t amp_gpu_wave(K kernel, int threads, int sms, uint64_t rows,
                                       uint64_t per_block, unsigned *blocks)
{
    int per_sm = 0;
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0);
    if (e != cudaSuccess)
        return e;
    const uint64_t want = (uint64_t)sms * (uint64_t)(per_sm > 0 ? per_sm : 1);
    const uint64_t most = (rows + per_block - 1) / per_block;
    *blocks = (unsigned)(want < most ? want : most);
    return cudaSuccess;
}

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
