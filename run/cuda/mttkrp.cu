/* MTTKRP on one GPU, straight from the BLCO words of a resident mode copy.
 *
 * Thread mapping: a persistent grid of warps; warp w of W owns the nonzeros
 * [nnz w/W, nnz (w+1)/W) of the copy, which is ordered by output row. Lanes
 * span the rank: lane l holds entries l, l+32, ... of the row being summed
 * (RPL = ceil(R/32) registers per lane). The warp reads 32 words and values
 * at a time, coalesced, and passes them lane to lane with shuffles; each
 * input factor row is one coalesced read of R entries. A row is summed in
 * registers while the output index repeats and written once when it
 * changes: rows strictly inside the warp's range are the warp's alone and
 * are stored; its first and last rows may be shared with neighbouring
 * warps and are added atomically into the zeroed output. Hot rows of
 * power-law data therefore cost one store per warp, never an atomic per
 * nonzero.
 *
 * Bytes per nonzero: 8 (word) + 4 or 8 (value) streamed, plus (N-1) factor
 * rows of R * sizeof(real) gathered (from L2 when rows repeat). FLOPs: N R
 * per nonzero. */
#include <config.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amp_cuda.h"

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

struct gpu_copy {
    uint64_t nnz;
    uint64_t *words;
    void *vals;
    uint32_t nblocks;
    uint64_t *block_start;   /* nblocks + 1 */
    uint64_t *block_key;
    uint8_t shift[AMP_MAX_MODES], width[AMP_MAX_MODES];
};

struct amp_gpu_tensor {
    int device, sm_count;
    unsigned nmodes;
    int vals_f32;
    uint64_t rows[AMP_MAX_MODES];
    gpu_copy copies[AMP_MAX_MODES];
    size_t bytes;
};

/* What one launch needs, passed by value (kernel parameter space). */
struct mttkrp_args {
    const uint64_t *words;
    const void *vals;
    const uint64_t *block_start, *block_key;
    uint32_t nblocks;
    uint64_t nnz;
    unsigned nother, R;
    unsigned out_shift, out_width;
    unsigned shift[AMP_MAX_MODES], width[AMP_MAX_MODES];
    const void *F[AMP_MAX_MODES];
    void *M;
};

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

__device__ __forceinline__ void atomic_add(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(float *p, float v) { atomicAdd(p, v); }

template <typename real, int RPL>
__device__ __forceinline__ void flush(real *M, unsigned R, uint64_t row, const real *acc,
                                      int shared, unsigned lane)
{
    real *dst = M + row * R;
#pragma unroll
    for (int j = 0; j < RPL; j++) {
        unsigned r = lane + 32 * j;
        if (r < R) {
            if (shared)
                atomic_add(dst + r, acc[j]);
            else
                dst[r] = acc[j];
        }
    }
}

template <typename real, typename vtype, int RPL>
__global__ void __launch_bounds__(256) mttkrp_kernel(const mttkrp_args a)
{
    const unsigned lane = threadIdx.x & 31;
    const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5;
    const uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    const uint64_t lo = a.nnz * warp / nwarps, hi = a.nnz * (warp + 1) / nwarps;
    if (lo >= hi)
        return;
    const unsigned R = a.R;
    const vtype *vals = (const vtype *)a.vals;
    real *M = (real *)a.M;
    real acc[RPL];
#pragma unroll
    for (int j = 0; j < RPL; j++)
        acc[j] = 0;
    uint64_t cur = ~0ull;
    int first = 1;

    uint32_t blk = 0;
    if (a.nblocks > 1) {   /* the block holding lo: binary search */
        uint32_t b0 = 0, b1 = a.nblocks;
        while (b1 - b0 > 1) {
            uint32_t mid = (b0 + b1) / 2;
            if (a.block_start[mid] <= lo)
                b0 = mid;
            else
                b1 = mid;
        }
        blk = b0;
    }
    uint64_t key = a.block_key[blk], block_end = a.block_start[blk + 1];

    for (uint64_t base = lo; base < hi; base += 32) {
        uint64_t k = base + lane;
        uint64_t myw = k < hi ? a.words[k] : 0;
        real myv = k < hi ? (real)vals[k] : (real)0;
        unsigned n = hi - base < 32 ? (unsigned)(hi - base) : 32;
        for (unsigned t = 0; t < n; t++) {
            uint64_t w = __shfl_sync(0xffffffffu, myw, t);
            real v = __shfl_sync(0xffffffffu, myv, t);
            if (base + t >= block_end) {   /* uniform across the warp */
                blk++;
                key = a.block_key[blk];
                block_end = a.block_start[blk + 1];
            }
            uint64_t row = field(key, w, a.out_shift, a.out_width);
            if (row != cur) {
                if (cur != ~0ull) {
                    flush<real, RPL>(M, R, cur, acc, first, lane);
                    first = 0;
                }
                cur = row;
#pragma unroll
                for (int j = 0; j < RPL; j++)
                    acc[j] = 0;
            }
            real p[RPL];
#pragma unroll
            for (int j = 0; j < RPL; j++)
                p[j] = v;
            for (unsigned m = 0; m < a.nother; m++) {
                const real *rowp = (const real *)a.F[m] + field(key, w, a.shift[m], a.width[m]) * R;
#pragma unroll
                for (int j = 0; j < RPL; j++) {
                    unsigned r = lane + 32 * j;
                    if (r < R)
                        p[j] *= __ldg(rowp + r);
                }
            }
#pragma unroll
            for (int j = 0; j < RPL; j++)
                acc[j] += p[j];
        }
    }
    flush<real, RPL>(M, R, cur, acc, 1, lane);
}

template <typename real, typename vtype>
static cudaError_t launch_rpl(const mttkrp_args &a, int grid, cudaStream_t s)
{
    unsigned rpl = (a.R + 31) / 32;
    if (rpl <= 1)
        mttkrp_kernel<real, vtype, 1><<<grid, 256, 0, s>>>(a);
    else if (rpl <= 2)
        mttkrp_kernel<real, vtype, 2><<<grid, 256, 0, s>>>(a);
    else if (rpl <= 4)
        mttkrp_kernel<real, vtype, 4><<<grid, 256, 0, s>>>(a);
    else if (rpl <= 8)
        mttkrp_kernel<real, vtype, 8><<<grid, 256, 0, s>>>(a);
    else
        mttkrp_kernel<real, vtype, 16><<<grid, 256, 0, s>>>(a);
    return cudaGetLastError();
}

static void gpu_copy_free(gpu_copy *c)
{
    cudaFree(c->words);
    cudaFree(c->vals);
    cudaFree(c->block_start);
    cudaFree(c->block_key);
    memset(c, 0, sizeof *c);
}

extern "C" void amp_gpu_tensor_free(amp_gpu_tensor *g)
{
    if (g == NULL)
        return;
    cudaSetDevice(g->device);
    for (unsigned m = 0; m < g->nmodes; m++)
        gpu_copy_free(&g->copies[m]);
    free(g);
}

extern "C" amp_status amp_gpu_tensor_upload(int device, const amp_tensor *t, amp_gpu_tensor **out,
                                            amp_error *err)
{
    amp_status rc = AMP_OK;
    amp_gpu_tensor *g = (amp_gpu_tensor *)calloc(1, sizeof *g);
    if (g == NULL)
        return amp_error_set(err, AMP_ERR_NOMEM, __FILE__, __LINE__, "out of memory");
    g->device = device;
    g->nmodes = t->nmodes;
    g->vals_f32 = t->value_type == AMP_VALUES_F32;
    size_t vsize = amp_value_size(t->value_type);
    CUDA_TRY_GOTO(cudaSetDevice(device), err, rc, fail);
    CUDA_TRY_GOTO(cudaDeviceGetAttribute(&g->sm_count, cudaDevAttrMultiProcessorCount, device),
                  err, rc, fail);
    for (unsigned m = 0; m < t->nmodes; m++) {
        const amp_copy *c = &t->copies[m];
        gpu_copy *d = &g->copies[m];
        g->rows[m] = t->rows[m];
        d->nnz = c->nnz;
        d->nblocks = (uint32_t)c->nblocks;
        for (unsigned k = 0; k < t->nmodes; k++) {
            d->shift[k] = c->layout.shift[k];
            d->width[k] = c->layout.width[k];
        }
        size_t nw = (size_t)c->nnz * 8 + 8, nv = (size_t)c->nnz * vsize + 8;
        CUDA_TRY_GOTO(cudaMalloc((void **)&d->words, nw), err, rc, fail);
        CUDA_TRY_GOTO(cudaMalloc(&d->vals, nv), err, rc, fail);
        CUDA_TRY_GOTO(cudaMalloc((void **)&d->block_start, (c->nblocks + 1) * 8), err, rc, fail);
        CUDA_TRY_GOTO(cudaMalloc((void **)&d->block_key, c->nblocks * 8 + 8), err, rc, fail);
        CUDA_TRY_GOTO(cudaMemcpy(d->words, c->words, (size_t)c->nnz * 8, cudaMemcpyHostToDevice),
                      err, rc, fail);
        CUDA_TRY_GOTO(cudaMemcpy(d->vals, c->vals, (size_t)c->nnz * vsize, cudaMemcpyHostToDevice),
                      err, rc, fail);
        CUDA_TRY_GOTO(cudaMemcpy(d->block_start, c->block_start, (c->nblocks + 1) * 8,
                                 cudaMemcpyHostToDevice), err, rc, fail);
        CUDA_TRY_GOTO(cudaMemcpy(d->block_key, c->block_key, c->nblocks * 8,
                                 cudaMemcpyHostToDevice), err, rc, fail);
        g->bytes += nw + nv + (c->nblocks * 2 + 1) * 8;
    }
    *out = g;
    return AMP_OK;
fail:
    amp_gpu_tensor_free(g);
    return rc;
}

extern "C" size_t amp_gpu_tensor_bytes(const amp_gpu_tensor *g)
{
    return g->bytes;
}

/* M = MTTKRP(d) on device pointers (A[m]: rows[m] x R, M: rows[d] x R,
 * row-major, f32 or f64). */
extern "C" amp_status amp_gpu_mttkrp(const amp_gpu_tensor *g, unsigned d, void *const *A,
                                     unsigned R, int f32, void *M, void *stream, amp_error *err)
{
    const gpu_copy *c = &g->copies[d];
    cudaStream_t s = (cudaStream_t)stream;
    if (R == 0 || R > 512)
        return amp_error_set(err, AMP_ERR_USAGE, __FILE__, __LINE__,
                             "the GPU MTTKRP takes rank 1 to 512, not %u", R);
    mttkrp_args a;
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
    a.M = M;
    for (unsigned m = 0; m < g->nmodes; m++) {
        if (m == d)
            continue;
        a.shift[a.nother] = c->shift[m];
        a.width[a.nother] = c->width[m];
        a.F[a.nother++] = A[m];
    }
    size_t real_size = f32 ? 4 : 8;
    CUDA_TRY(cudaMemsetAsync(M, 0, (size_t)g->rows[d] * R * real_size, s), err);
    if (c->nnz == 0)
        return AMP_OK;
    /* Enough warps to fill every SM several times over, but never fewer
     * than ~64 nonzeros a warp (each warp pays for two shared rows). */
    uint64_t warps = (uint64_t)g->sm_count * 8 * 8;
    if (warps > c->nnz / 64 + 1)
        warps = c->nnz / 64 + 1;
    int grid = (int)((warps + 7) / 8);
    cudaError_t e;
    if (f32)
        e = g->vals_f32 ? launch_rpl<float, float>(a, grid, s) : launch_rpl<float, double>(a, grid, s);
    else
        e = g->vals_f32 ? launch_rpl<double, float>(a, grid, s) : launch_rpl<double, double>(a, grid, s);
    if (e != cudaSuccess)
        return amp_error_set(err, AMP_ERR_CUDA, __FILE__, __LINE__, "MTTKRP kernel launch: %s",
                             cudaGetErrorString(e));
    return AMP_OK;
}

/* Host factors in, host result out (f64 both ways), for checking the kernel
 * and for --check; with rounds > 0 also the mean seconds of one MTTKRP of
 * each mode over that many rounds (events around the launches only). */
extern "C" amp_status amp_gpu_mttkrp_host(const amp_gpu_tensor *g, const double *const *A,
                                          unsigned R, int f32, unsigned d, double *M_host,
                                          unsigned rounds, double *mode_seconds, amp_error *err)
{
    amp_status rc = AMP_OK;
    void *dA[AMP_MAX_MODES] = {0}, *dM = NULL;
    void *stage = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    size_t rs = f32 ? 4 : 8;
    uint64_t maxr = 1;
    CUDA_TRY(cudaSetDevice(g->device), err);
    for (unsigned m = 0; m < g->nmodes; m++)
        maxr = g->rows[m] > maxr ? g->rows[m] : maxr;
    stage = malloc((size_t)maxr * R * rs);
    if (stage == NULL)
        return amp_error_set(err, AMP_ERR_NOMEM, __FILE__, __LINE__, "out of memory");
    for (unsigned m = 0; m < g->nmodes; m++) {
        size_t n = (size_t)g->rows[m] * R;
        CUDA_TRY_GOTO(cudaMalloc(&dA[m], n * rs + 8), err, rc, done);
        if (f32)
            for (size_t i = 0; i < n; i++)
                ((float *)stage)[i] = (float)A[m][i];
        else
            memcpy(stage, A[m], n * 8);
        CUDA_TRY_GOTO(cudaMemcpy(dA[m], stage, n * rs, cudaMemcpyHostToDevice), err, rc, done);
    }
    CUDA_TRY_GOTO(cudaMalloc(&dM, (size_t)maxr * R * rs + 8), err, rc, done);
    if (M_host != NULL) {
        rc = amp_gpu_mttkrp(g, d, dA, R, f32, dM, NULL, err);
        if (rc != AMP_OK)
            goto done;
        CUDA_TRY_GOTO(cudaDeviceSynchronize(), err, rc, done);
        size_t n = (size_t)g->rows[d] * R;
        CUDA_TRY_GOTO(cudaMemcpy(stage, dM, n * rs, cudaMemcpyDeviceToHost), err, rc, done);
        for (size_t i = 0; i < n; i++)
            M_host[i] = f32 ? (double)((float *)stage)[i] : ((double *)stage)[i];
    }
    if (rounds > 0) {
        CUDA_TRY_GOTO(cudaEventCreate(&e0), err, rc, done);
        CUDA_TRY_GOTO(cudaEventCreate(&e1), err, rc, done);
        for (unsigned m = 0; m < g->nmodes; m++) {
            /* One warm-up launch, then the timed rounds. */
            rc = amp_gpu_mttkrp(g, m, dA, R, f32, dM, NULL, err);
            if (rc != AMP_OK)
                goto done;
            CUDA_TRY_GOTO(cudaEventRecord(e0), err, rc, done);
            for (unsigned k = 0; k < rounds && rc == AMP_OK; k++)
                rc = amp_gpu_mttkrp(g, m, dA, R, f32, dM, NULL, err);
            if (rc != AMP_OK)
                goto done;
            CUDA_TRY_GOTO(cudaEventRecord(e1), err, rc, done);
            CUDA_TRY_GOTO(cudaEventSynchronize(e1), err, rc, done);
            float ms = 0;
            CUDA_TRY_GOTO(cudaEventElapsedTime(&ms, e0, e1), err, rc, done);
            mode_seconds[m] = ms / 1e3 / rounds;
        }
    }
done:
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    for (unsigned m = 0; m < g->nmodes; m++)
        cudaFree(dA[m]);
    cudaFree(dM);
    free(stage);
    return rc;
}
