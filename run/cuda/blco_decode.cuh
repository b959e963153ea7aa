/* Decoding a resident copy's BLCO words on the device (shift and mask:
 * the format's own amp_blco_field, which compiles for the device too),
 * shared by the MTTKRP kernels (mttkrp.cu) and the load-time checks
 * (gpu_tensor.cu). C++ (nvcc) only. */
#ifndef AMP_BLCO_DECODE_CUH
#define AMP_BLCO_DECODE_CUH

#include <stdint.h>

#include "amped_format.h"

/* The block holding nonzero k: binary search over the block starts. */
__device__ __forceinline__ uint32_t block_of(const uint64_t *block_start, uint32_t nblocks,
                                             uint64_t k)
{
    uint32_t b0 = 0, b1 = nblocks;
    while (b1 - b0 > 1) {
        uint32_t mid = b0 + (b1 - b0) / 2;
        if (block_start[mid] <= k)
            b0 = mid;
        else
            b1 = mid;
    }
    return b0;
}

/* The output row of resident nonzero k, whose word is words[k * stride]
 * (stride 2: records of word and value, remap.cu). */
__device__ __forceinline__ uint64_t row_at(const uint64_t *words, unsigned stride,
                                           const uint64_t *block_start,
                                           const uint64_t *block_key, uint32_t nblocks,
                                           unsigned shift, unsigned width, uint64_t k)
{
    uint64_t key = block_key[nblocks > 1 ? block_of(block_start, nblocks, k) : 0];
    return amp_blco_field(key, words[k * stride], shift, width);
}

#endif
