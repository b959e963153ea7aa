/* What the CUDA files of run/cuda share: the resident tensor and the
 * error macros that turn a failed CUDA, cuBLAS or cuSOLVER call into an
 * amp_status carrying file, line and the call's text. C++ (nvcc) only. */
#ifndef AMP_GPU_INTERNAL_H
#define AMP_GPU_INTERNAL_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "amp_cuda.h"

/* cuBLAS and cuSOLVER report a status number; the call's text says which. */
#define LIB_TRY_GOTO(call, ok, what, err, rc, label)                                      \
    do {                                                                                  \
        int s_ = (int)(call);                                                             \
        if (s_ != (ok)) {                                                                 \
            (rc) = amp_error_set((err), AMP_ERR_CUDA, __FILE__, __LINE__,                  \
                                 "%s: %s status %d", #call, (what), s_);                  \
            goto label;                                                                   \
        }                                                                                 \
    } while (0)
#define CUBLAS_TRY_GOTO(call, err, rc, label) \
    LIB_TRY_GOTO(call, CUBLAS_STATUS_SUCCESS, "cuBLAS", err, rc, label)
#define CUSOLVER_TRY_GOTO(call, err, rc, label) \
    LIB_TRY_GOTO(call, CUSOLVER_STATUS_SUCCESS, "cuSOLVER", err, rc, label)

#define CUDA_TRY(call, err)                                                               \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess)                                                            \
            return amp_error_set((err), AMP_ERR_CUDA, __FILE__, __LINE__, "%s: %s", #call,  \
                                 cudaGetErrorString(e_));                                 \
    } while (0)

#define CUDA_TRY_GOTO(call, err, rc, label)                                               \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            (rc) = amp_error_set((err), AMP_ERR_CUDA, __FILE__, __LINE__, "%s: %s", #call,  \
                                 cudaGetErrorString(e_));                                 \
            goto label;                                                                   \
        }                                                                                 \
    } while (0)

/* One mode copy in device memory: BLCO words, values, block keys. */
struct gpu_copy {
    uint64_t nnz;
    uint64_t *words;
    void *vals;
    uint32_t nblocks;
    uint64_t *block_start;   /* nblocks + 1 */
    uint64_t *block_key;
    uint8_t shift[AMP_MAX_MODES], width[AMP_MAX_MODES];
};

/* Every mode copy of a tensor, resident on one device. */
struct amp_gpu_tensor {
    int device, sm_count;
    unsigned nmodes;
    int vals_f32;
    uint64_t rows[AMP_MAX_MODES];
    int narrow_rows;   /* every factor has fewer than 2^32 rows */
    gpu_copy copies[AMP_MAX_MODES];
    size_t bytes;
};

#endif
