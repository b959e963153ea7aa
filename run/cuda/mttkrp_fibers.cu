/* The GPU MTTKRP over fibers (issue 45): a resident mode copy whose rows
 * are in fiber order (amped(5), FIBER: within a row, runs of one index of
 * a middle mode m).
 *
 * Thread mapping: a grid of warps; warp w of W owns the nonzeros
 * [nnz w/W, nnz (w+1)/W) of the copy. Lanes span the rank: lane l holds
 * entries l, l+32, ... (RPL = ceil(R/32), rounded up to 1, 2, 4, 8 or 16
 * registers, three sets: the row sum, the fiber sum and a product). Every
 * lane reads nonzero k's word and value (one broadcast transaction for
 * the warp). Per nonzero the warp gathers its N-2 leaf rows (each one
 * coalesced read of R entries), multiplies them with the value and adds
 * the product to the fiber sum; where (row, index m) changes, it gathers
 * the ended fiber's middle row and adds the fiber sum times it to the row
 * sum; where the row changes, it writes the row sum: a row strictly inside
 * the warp's range is the warp's alone and is stored; its first and last
 * rows may be shared with the neighbouring warps and are added
 * atomically, into the copy's rows zeroed first. A fiber cut by a warp's
 * range is two fibers of one row, summed one after the other.
 *
 * Bytes per nonzero: 8 (word) + 4 or 8 (value) streamed; N-2 leaf rows of
 * R x sizeof(real) gathered per nonzero and one middle row per fiber,
 * against N-1 rows per nonzero in mttkrp.cu's kernel: at rd100m's 2.87
 * nonzeros a fiber, 0.67x the row gathers at 3 modes (the issue's count).
 * FLOPs: (N-1) R a nonzero (N-2 multiplies and an add) and 2 R a fiber.
 *
 * Variants: the factors' type (f32, f64) x the values' (f32, f64) x RPL.
 * Not covered (they take mttkrp.cu's kernel): streamed, remapped and
 * packed copies, the cut ranges, the two groups of a multi-GPU part, and
 * mttkrp.cu's teams of fewer lanes at low ranks.
 *
 * Compiled, never run on a GPU (the development machine has none): used
 * only where amp_gpu_tensor_fibers turned it on, until tests/test_gpu_fibers
 * has passed on a GPU and bench/ has measured it against mttkrp.cu's. */
#include <config.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>

#include "amp_cuda.h"
#include "blco_decode.cuh"
#include "gpu_internal.h"

/* What one launch needs, by value (kernel parameter space). */
struct fiber_args {
    const uint64_t *words;
    const void *vals;
    const uint64_t *block_start, *block_key;
    uint32_t nblocks;
    uint64_t nnz;
    unsigned R, nleaf;
    unsigned out_shift, out_width, mid_shift, mid_width;
    unsigned shift[AMP_MAX_MODES], width[AMP_MAX_MODES];   /* the leaves' fields */
    const void *F[AMP_MAX_MODES];                           /* the leaves' factors */
    const void *Fmid;
    void *M;
};

/* The row sum into M's row: stored, or added atomically where a
 * neighbouring warp may add to the same row. */
template <typename real, int RPL>
__device__ __forceinline__ void put_row(real *M, uint64_t row, unsigned R, unsigned lane,
                                        const real (&acc)[RPL], bool shared)
{
    real *dst = M + row * R;
#pragma unroll
    for (int j = 0; j < RPL; j++) {
        const unsigned c = lane + 32u * (unsigned)j;
        if (c < R) {
            if (shared)
                atomicAdd(dst + c, acc[j]);
            else
                dst[c] = acc[j];
        }
    }
}

template <typename real, typename vtype, int RPL>
__global__ void __launch_bounds__(256) fiber_kernel(const fiber_args a)
{
    const unsigned lane = threadIdx.x & 31u, R = a.R;
    const uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    const uint64_t extra = a.nnz % nwarps;
    const uint64_t lo = a.nnz / nwarps * warp + (warp < extra ? warp : extra);
    const uint64_t hi = lo + a.nnz / nwarps + (warp < extra);
    if (lo >= hi)
        return;
    const real *Fm = (const real *)a.Fmid;
    const vtype *vals = (const vtype *)a.vals;
    real *M = (real *)a.M;
    uint32_t blk = a.nblocks > 1 ? block_of(a.block_start, a.nblocks, lo) : 0;
    real acc[RPL], fac[RPL];
#pragma unroll
    for (int j = 0; j < RPL; j++)
        acc[j] = fac[j] = (real)0;
    uint64_t cur = UINT64_MAX, curm = 0;
    bool first = true;
    for (uint64_t k = lo; k < hi; k++) {
        while (blk + 1 < a.nblocks && a.block_start[blk + 1] <= k)
            blk++;
        const uint64_t key = a.block_key[blk], w = a.words[k];
        const uint64_t row = amp_blco_field(key, w, a.out_shift, a.out_width);
        const uint64_t mi = amp_blco_field(key, w, a.mid_shift, a.mid_width);
        if (row != cur || mi != curm) {
            if (cur != UINT64_MAX) {
                const real *rm = Fm + curm * R;
#pragma unroll
                for (int j = 0; j < RPL; j++) {
                    const unsigned c = lane + 32u * (unsigned)j;
                    if (c < R)
                        acc[j] += fac[j] * rm[c];
                }
            }
            if (row != cur) {
                if (cur != UINT64_MAX) {
                    put_row<real, RPL>(M, cur, R, lane, acc, first);
                    first = false;
                }
                cur = row;
#pragma unroll
                for (int j = 0; j < RPL; j++)
                    acc[j] = (real)0;
            }
            curm = mi;
#pragma unroll
            for (int j = 0; j < RPL; j++)
                fac[j] = (real)0;
        }
        const real v = (real)vals[k];
        real t[RPL];
#pragma unroll
        for (int j = 0; j < RPL; j++)
            t[j] = v;
        for (unsigned q = 0; q < a.nleaf; q++) {
            const real *r = (const real *)a.F[q] + amp_blco_field(key, w, a.shift[q], a.width[q]) * R;
#pragma unroll
            for (int j = 0; j < RPL; j++) {
                const unsigned c = lane + 32u * (unsigned)j;
                if (c < R)
                    t[j] *= r[c];
            }
        }
#pragma unroll
        for (int j = 0; j < RPL; j++)
            fac[j] += t[j];
    }
    /* The last fiber, then the last row: shared with the next warp. */
    const real *rm = Fm + curm * R;
#pragma unroll
    for (int j = 0; j < RPL; j++) {
        const unsigned c = lane + 32u * (unsigned)j;
        if (c < R)
            acc[j] += fac[j] * rm[c];
    }
    put_row<real, RPL>(M, cur, R, lane, acc, true);
}

typedef void (*fiber_fn)(fiber_args);

template <typename real, typename vtype>
static fiber_fn pick_rpl(unsigned R)
{
    if (R <= 32)
        return fiber_kernel<real, vtype, 1>;
    if (R <= 64)
        return fiber_kernel<real, vtype, 2>;
    if (R <= 128)
        return fiber_kernel<real, vtype, 4>;
    if (R <= 256)
        return fiber_kernel<real, vtype, 8>;
    return fiber_kernel<real, vtype, 16>;
}

int gpu_fibers_apply(const amp_gpu_tensor *g, unsigned d, int group)
{
    const gpu_copy *c = &g->copies[d];
    return g->fibers && c->has_fibers && g->nmodes >= 3 && group == AMP_GPU_ALL &&
           !g->streamed && g->zstream == NULL && g->remap == NULL && !c->packed &&
           c->words != NULL && c->fiber_mode < g->nmodes && c->fiber_mode != d;
}

amp_status gpu_mttkrp_fibers(const amp_gpu_tensor *g, unsigned d, void *const *A, unsigned R,
                             int f32, void *M, cudaStream_t s, amp_error *err)
{
    const gpu_copy *c = &g->copies[d];
    if (R == 0 || R > AMP_GPU_MAX_RANK)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the GPU MTTKRP takes rank 1 to %u, not %u",
                        AMP_GPU_MAX_RANK, R);
    const size_t real_size = f32 ? 4 : 8;
    /* The first and last rows of each warp are added atomically, into
     * zeros; the rest are stored, so zeroing the copy's rows is enough. */
    CUDA_TRY(cudaMemsetAsync((char *)M + (size_t)c->row_begin * R * real_size, 0,
                             (size_t)c->row_count * R * real_size, s), err);
    if (c->nnz == 0)
        return AMP_OK;
    fiber_args a;
    memset(&a, 0, sizeof a);
    a.words = c->words;
    a.vals = c->vals;
    a.block_start = c->block_start;
    a.block_key = c->block_key;
    a.nblocks = c->nblocks;
    a.nnz = c->nnz;
    a.R = R;
    a.out_shift = c->shift[d];
    a.out_width = c->width[d];
    a.mid_shift = c->shift[c->fiber_mode];
    a.mid_width = c->width[c->fiber_mode];
    a.Fmid = A[c->fiber_mode];
    a.M = M;
    for (unsigned m = 0; m < g->nmodes; m++) {
        if (m == d || m == c->fiber_mode)
            continue;
        a.shift[a.nleaf] = c->shift[m];
        a.width[a.nleaf] = c->width[m];
        a.F[a.nleaf++] = A[m];
    }
    fiber_fn fn = f32 ? (g->vals_f32 ? pick_rpl<float, float>(R) : pick_rpl<float, double>(R))
                      : (g->vals_f32 ? pick_rpl<double, float>(R) : pick_rpl<double, double>(R));
    int per_sm = 0;
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, 256, 0), err);
    /* A warp per 32 nonzeros at the least, as many as fit at once at the
     * most: a persistent grid. */
    const uint64_t fit = (uint64_t)g->sm_count * (uint64_t)(per_sm > 0 ? per_sm : 1);
    const uint64_t want = (c->nnz + 8 * 32 - 1) / (8 * 32);
    const unsigned grid = (unsigned)std::max<uint64_t>(1, std::min<uint64_t>(fit, want));
    fn<<<grid, 256, 0, s>>>(a);
    CUDA_TRY(cudaGetLastError(), err);
    return AMP_OK;
}

extern "C" int amp_gpu_tensor_fibers(amp_gpu_tensor *g, int on)
{
    g->fibers = on != 0;
    int any = 0;
    for (unsigned d = 0; d < g->nmodes; d++)
        any |= gpu_fibers_apply(g, d, AMP_GPU_ALL);
    return any;
}
