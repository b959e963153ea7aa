/* Decoding a resident copy's BLCO words on the device (shift and mask),
 * shared by the MTTKRP kernels (mttkrp.cu) and the load-time checks
 * (gpu_tensor.cu). C++ (nvcc) only. */
#ifndef AMP_BLCO_DECODE_CUH
#define AMP_BLCO_DECODE_CUH

#include <stdint.h>

/* A field of width bits at bit shift of the index bits key:w (the block
 * key above the 64-bit word). */
__device__ __forceinline__ uint64_t field(uint64_t key, uint64_t w, unsigned shift, unsigned width)
{
    if (width == 0)
        return 0;
    uint64_t mask = width >= 64 ? ~0ull : (1ull << width) - 1;
    if (shift >= 64)
        return (key >> (shift - 64)) & mask;
    uint64_t v = w >> shift;
    if (shift > 0 && shift + width > 64)
        v |= key << (64 - shift);
    return v & mask;
}

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

/* The output row of resident nonzero k. */
__device__ __forceinline__ uint64_t row_at(const uint64_t *words, const uint64_t *block_start,
                                           const uint64_t *block_key, uint32_t nblocks,
                                           unsigned shift, unsigned width, uint64_t k)
{
    uint64_t key = block_key[nblocks > 1 ? block_of(block_start, nblocks, k) : 0];
    return field(key, words[k], shift, width);
}

#endif
