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
 * warps and are added atomically, into rows zeroed first (zero_team_rows;
 * the whole range by a memset when a copy has an empty row). Hot rows of
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

#include <algorithm>

#include "amp_cuda.h"
#include "blco_decode.cuh"
#include "gpu_internal.h"

/* What one launch needs, passed by value (kernel parameter space). */
struct mttkrp_args {
    const uint64_t *words;
    const void *vals;
    const uint64_t *block_start, *block_key;
    uint32_t nblocks;
    uint64_t nnz;
    uint64_t offset;   /* position of words[0] in the copy (streamed chunks) */
    /* Nonzero k's word at words[k * stride] and value at vals[k * stride]:
     * 1, or 2 where a remap buffer holds records (remap.cu). */
    unsigned stride;
    /* Fused remap (remap.cu, gpu_remap.fusing): nonzero k of the launch
     * also goes to rout[rpos[k]], its word re-encoded from the layout rf
     * (this copy's, every mode) to rt (the next copy's), its value as it
     * is; rpos NULL: none. */
    const uint32_t *rpos;
    ulonglong2 *rout;
    uint8_t rf_shift[AMP_MAX_MODES], rf_width[AMP_MAX_MODES];
    uint8_t rt_shift[AMP_MAX_MODES], rt_width[AMP_MAX_MODES];
    int packed;        /* the value is inside the word: q / 10^decimals */
    /* A second launch into what the first wrote: every row is added
     * atomically, not only a team's first and last (kept off the store
     * path, which a branch there slowed: bench/RESULTS.md, "amped-run on
     * one GPU"). */
    int add;
    int qsigned;
    unsigned qshift, qbits;
    double p10;
    float p10f;
    unsigned nother, R;
    unsigned out_shift, out_width;
    unsigned shift[AMP_MAX_MODES], width[AMP_MAX_MODES];
    const void *F[AMP_MAX_MODES];
    void *M;
};

/* Nonzero k's value: from the values array, or from the packed word of
 * the stream layout, divided in the values' own type as the host checked. */
template <typename real, typename vtype>
__device__ __forceinline__ real value_of(const mttkrp_args &a, const vtype *vals, uint64_t k,
                                         uint64_t w, bool valid)
{
    if (!valid)
        return (real)0;
    if (!a.packed)
        return (real)vals[k * a.stride];
    uint64_t raw = a.qshift < 64 ? w >> a.qshift : 0;
    int64_t q = a.qbits >= 64 || !a.qsigned
                    ? (int64_t)raw
                    : (int64_t)(raw << (64 - a.qbits)) >> (64 - a.qbits);
    if (sizeof(vtype) == 4)
        return (real)((float)q / a.p10f);
    return (real)((double)q / a.p10);
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

__device__ __forceinline__ uint32_t block_of(const mttkrp_args &a, uint64_t k)
{
    return block_of(a.block_start, a.nblocks, k);
}

/* The prologue of every MTTKRP kernel: in a persistent grid of teams of L
 * lanes (a warp: L = 32), team t of T owns the nonzeros [nnz t / T,
 * nnz (t + 1) / T). Sets the range [lo, hi) of this thread's team; false
 * where it is empty (the thread has nothing to do). */
template <int L>
__device__ __forceinline__ bool team_range(const mttkrp_args &a, uint64_t &lo, uint64_t &hi)
{
    const uint64_t team = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / L;
    const uint64_t nteams = (uint64_t)gridDim.x * blockDim.x / L;
    lo = a.nnz * team / nteams;
    hi = a.nnz * (team + 1) / nteams;
    return lo < hi;
}

/* The block of a team's first nonzero, lo. */
__device__ __forceinline__ uint32_t first_block(const mttkrp_args &a, uint64_t lo)
{
    return a.nblocks > 1 ? block_of(a, lo + a.offset) : 0;
}

/* The factors of the NOC input modes, typed. */
template <typename real, int NOC>
__device__ __forceinline__ void input_factors(const mttkrp_args &a, const real *(&F)[NOC])
{
#pragma unroll
    for (int m = 0; m < NOC; m++)
        F[m] = (const real *)a.F[m];
}

/* Adds the product rows of nonzero u of a group into the running row sum:
 * a row sums in registers while the output index repeats and is flushed
 * when it changes. */
template <typename real, int RPL>
__device__ __forceinline__ void accumulate(real *M, unsigned R, unsigned lane, uint64_t row,
                                           const real *p, uint64_t &cur, real *acc, int &first,
                                           int add)
{
    if (row != cur) {
        if (cur != ~0ull) {
            flush<real, RPL>(M, R, cur, acc, first, lane);
            first = add;
        }
        cur = row;
#pragma unroll
        for (int j = 0; j < RPL; j++)
            acc[j] = 0;
    }
#pragma unroll
    for (int j = 0; j < RPL; j++)
        acc[j] += p[j];
}

/* The kernel for 2 to 5 modes (NOC = N - 1 input modes, a compile-time
 * constant) and factors under 2^32 rows. Each lane decodes the nonzero it
 * loaded, so a nonzero costs the warp NOC + 2 shuffles of 32-bit row
 * numbers and its value rather than a 64-bit decode per lane. U nonzeros
 * have their factor rows loaded together: the gathers are latency-bound,
 * and U x NOC row reads in flight per warp instead of NOC is what made
 * this kernel fast (bench/RESULTS.md, "amped-run on one GPU"); the
 * products are then added in order, so a row still sums in registers. */
template <typename real, typename vtype, int RPL, int U, int NOC>
__global__ void __launch_bounds__(256) mttkrp_lanes(const mttkrp_args a)
{
    const unsigned lane = threadIdx.x & 31;
    uint64_t lo, hi;
    if (!team_range<32>(a, lo, hi))
        return;
    const unsigned R = a.R;
    const vtype *vals = (const vtype *)a.vals;
    const real *F[NOC];
    input_factors<real, NOC>(a, F);
    real *M = (real *)a.M;
    real acc[RPL];
#pragma unroll
    for (int j = 0; j < RPL; j++)
        acc[j] = 0;
    uint64_t cur = ~0ull;
    int first = 1;
    uint32_t blk = first_block(a, lo);

    for (uint64_t base = lo; base < hi; base += 32) {
        const uint64_t k = base + lane;
        const bool valid = k < hi;
        uint64_t w = valid ? a.words[k * a.stride] : 0;
        real v = value_of<real, vtype>(a, vals, k, w, valid);
        uint32_t myblk = blk;
        if (a.nblocks > 1 && valid)
            while (a.block_start[myblk + 1] <= k + a.offset)
                myblk++;
        uint64_t key = a.block_key[myblk];
        blk = __shfl_sync(0xffffffffu, myblk, 31);
        uint32_t row =
            valid ? (uint32_t)amp_blco_field(key, w, a.out_shift, a.out_width) : 0xffffffffu;
        uint32_t ix[NOC];
#pragma unroll
        for (int m = 0; m < NOC; m++)
            ix[m] = valid ? (uint32_t)amp_blco_field(key, w, a.shift[m], a.width[m]) : 0;
        const unsigned n = hi - base < 32 ? (unsigned)(hi - base) : 32;
        for (unsigned t = 0; t < n; t += U) {
            uint32_t rows[U];
            real p[U][RPL];
            real x[NOC][U][RPL];
#pragma unroll
            for (int u = 0; u < U; u++) {
                rows[u] = __shfl_sync(0xffffffffu, row, t + u);
                real vu = __shfl_sync(0xffffffffu, v, t + u);
#pragma unroll
                for (int j = 0; j < RPL; j++)
                    p[u][j] = vu;
#pragma unroll
                for (int m = 0; m < NOC; m++) {
                    /* Past the end the index is 0 and the value 0: a
                     * harmless read of row 0, never added. */
                    const real *src = F[m] + (size_t)__shfl_sync(0xffffffffu, ix[m], t + u) * R;
#pragma unroll
                    for (int j = 0; j < RPL; j++) {
                        unsigned r = lane + 32 * j;
                        x[m][u][j] = r < R ? __ldg(src + r) : (real)0;
                    }
                }
            }
#pragma unroll
            for (int m = 0; m < NOC; m++)
#pragma unroll
                for (int u = 0; u < U; u++)
#pragma unroll
                    for (int j = 0; j < RPL; j++)
                        p[u][j] *= x[m][u][j];
#pragma unroll
            for (int u = 0; u < U; u++)
                if (rows[u] != 0xffffffffu)
                    accumulate<real, RPL>(M, R, lane, rows[u], p[u], cur, acc, first, a.add);
        }
    }
    if (cur != ~0ull)
        flush<real, RPL>(M, R, cur, acc, 1, lane);
}

/* 16-byte vectors of factor entries: the widest load a lane can issue. */
template <typename real> struct vec16;
template <> struct vec16<double> {
    typedef double2 type;
    enum { n = 2 };
};
template <> struct vec16<float> {
    typedef float4 type;
    enum { n = 4 };
};

template <typename V> __device__ __forceinline__ V vzero();
template <> __device__ __forceinline__ double2 vzero<double2>() { return make_double2(0, 0); }
template <> __device__ __forceinline__ float4 vzero<float4>() { return make_float4(0, 0, 0, 0); }
__device__ __forceinline__ double2 vsplat(double v) { return make_double2(v, v); }
__device__ __forceinline__ float4 vsplat(float v) { return make_float4(v, v, v, v); }
__device__ __forceinline__ void vmul(double2 &a, double2 b) { a.x *= b.x; a.y *= b.y; }
__device__ __forceinline__ void vmul(float4 &a, float4 b)
{
    a.x *= b.x; a.y *= b.y; a.z *= b.z; a.w *= b.w;
}
__device__ __forceinline__ void vadd(double2 &a, double2 b) { a.x += b.x; a.y += b.y; }
__device__ __forceinline__ void vadd(float4 &a, float4 b)
{
    a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
}
__device__ __forceinline__ void vatomic(double *p, double2 v)
{
    atomicAdd(p, v.x);
    atomicAdd(p + 1, v.y);
}
__device__ __forceinline__ void vatomic(float *p, float4 v)
{
    atomicAdd(p, v.x);
    atomicAdd(p + 1, v.y);
    atomicAdd(p + 2, v.z);
    atomicAdd(p + 3, v.w);
}

/* The kernel for ranks that are a multiple of the vector width (2 in
 * f64, 4 in f32) up to 32 x RPT vectors, 2 to 5 modes, factors under 2^32
 * rows. A team of L lanes owns a nonzero range and works like the warp of
 * mttkrp_lanes, but each lane loads RPT 16-byte vectors of a row (lane l
 * takes vectors l, l + L, ...: each load instruction of the team is
 * coalesced): rank 32 is 8 lanes x 2 vectors in f64 and 8 x 1 in f32, so
 * a warp works on 4 nonzeros per instruction. The one-warp-per-nonzero
 * kernel was issue-bound, far from the memory's bandwidth (Nsight Compute:
 * bench/RESULTS.md, "amped-run on one GPU"), so the instructions per
 * nonzero are what this divides. */
template <typename real, typename vtype, int L, int RPT, int U, int NOC, int MINB,
          bool FUSE = false>
__global__ void __launch_bounds__(256, MINB) mttkrp_teams(const mttkrp_args a)
{
    typedef typename vec16<real>::type vec;
    const int VN = vec16<real>::n;
    const unsigned lane = threadIdx.x % L;
    const unsigned tmask = L == 32 ? 0xffffffffu
                                   : ((1u << L) - 1) << ((threadIdx.x & 31) / L * L);
    uint64_t lo, hi;
    if (!team_range<L>(a, lo, hi))
        return;
    const unsigned R = a.R;
    bool active[RPT];
#pragma unroll
    for (int j = 0; j < RPT; j++)
        active[j] = (lane + j * L) * VN < R;
    const vtype *vals = (const vtype *)a.vals;
    const real *F[NOC];
    input_factors<real, NOC>(a, F);
    real *M = (real *)a.M;
    vec acc[RPT];
#pragma unroll
    for (int j = 0; j < RPT; j++)
        acc[j] = vzero<vec>();
    uint64_t cur = ~0ull;
    int first = 1;
    uint32_t blk = first_block(a, lo);

    for (uint64_t base = lo; base < hi; base += L) {
        const uint64_t k = base + lane;
        const bool valid = k < hi;
        uint64_t w = valid ? a.words[k * a.stride] : 0;
        real v = value_of<real, vtype>(a, vals, k, w, valid);
        uint32_t myblk = blk;
        if (a.nblocks > 1 && valid)
            while (a.block_start[myblk + 1] <= k + a.offset)
                myblk++;
        uint64_t key = a.block_key[myblk];
        blk = __shfl_sync(tmask, myblk, L - 1, L);
        if (FUSE && valid) {
            /* The next copy's record of this nonzero, stored while the
             * team waits on its gathers (records: vtype is 64-bit). */
            uint64_t to_key = 0, to_word = 0;
#pragma unroll
            for (int m = 0; m <= NOC; m++)
                amp_blco_put(amp_blco_field(key, w, a.rf_shift[m], a.rf_width[m]), a.rt_shift[m],
                             a.rt_width[m], &to_key, &to_word);
            const ulonglong2 rec = {to_word,
                                    ((const unsigned long long *)a.vals)[k * a.stride]};
            a.rout[a.rpos[k]] = rec;
        }
        uint32_t row =
            valid ? (uint32_t)amp_blco_field(key, w, a.out_shift, a.out_width) : 0xffffffffu;
        uint32_t ix[NOC];
#pragma unroll
        for (int m = 0; m < NOC; m++)
            ix[m] = valid ? (uint32_t)amp_blco_field(key, w, a.shift[m], a.width[m]) : 0;
        const unsigned n = hi - base < L ? (unsigned)(hi - base) : L;
        for (unsigned t = 0; t < n; t += U) {
            uint32_t rows[U];
            vec p[U][RPT];
            vec x[NOC][U][RPT];
#pragma unroll
            for (int u = 0; u < U; u++) {
                rows[u] = __shfl_sync(tmask, row, t + u, L);
                real vu = __shfl_sync(tmask, v, t + u, L);
#pragma unroll
                for (int j = 0; j < RPT; j++)
                    p[u][j] = vsplat(vu);
#pragma unroll
                for (int m = 0; m < NOC; m++) {
                    const vec *src = (const vec *)(F[m] + (size_t)__shfl_sync(tmask, ix[m], t + u,
                                                                              L) * R) + lane;
#pragma unroll
                    for (int j = 0; j < RPT; j++)
                        x[m][u][j] = active[j] ? __ldg(src + j * L) : vzero<vec>();
                }
            }
#pragma unroll
            for (int m = 0; m < NOC; m++)
#pragma unroll
                for (int u = 0; u < U; u++)
#pragma unroll
                    for (int j = 0; j < RPT; j++)
                        vmul(p[u][j], x[m][u][j]);
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (rows[u] == 0xffffffffu)
                    continue;
                if (rows[u] != cur) {
                    if (cur != ~0ull) {
                        real *dst = M + cur * R + lane * VN;
#pragma unroll
                        for (int j = 0; j < RPT; j++)
                            if (active[j]) {
                                if (first)
                                    vatomic(dst + j * L * VN, acc[j]);
                                else
                                    *(vec *)(dst + j * L * VN) = acc[j];
                            }
                    }
                    first = cur == ~0ull || a.add;
                    cur = rows[u];
#pragma unroll
                    for (int j = 0; j < RPT; j++)
                        acc[j] = vzero<vec>();
                }
#pragma unroll
                for (int j = 0; j < RPT; j++)
                    vadd(acc[j], p[u][j]);
            }
        }
    }
    if (cur != ~0ull) {
        real *dst = M + cur * R + lane * VN;
#pragma unroll
        for (int j = 0; j < RPT; j++)
            if (active[j])
                vatomic(dst + j * L * VN, acc[j]);
    }
}

/* Any number of modes and rows: each nonzero decoded by every lane after a
 * shuffle of its word. */
template <typename real, typename vtype, int RPL>
__global__ void __launch_bounds__(256) mttkrp_generic(const mttkrp_args a)
{
    const unsigned lane = threadIdx.x & 31;
    uint64_t lo, hi;
    if (!team_range<32>(a, lo, hi))
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
    uint32_t blk = first_block(a, lo);
    uint64_t key = a.block_key[blk], block_end = a.block_start[blk + 1];

    for (uint64_t base = lo; base < hi; base += 32) {
        uint64_t k = base + lane;
        uint64_t myw = k < hi ? a.words[k * a.stride] : 0;
        real myv = value_of<real, vtype>(a, vals, k, myw, k < hi);
        unsigned n = hi - base < 32 ? (unsigned)(hi - base) : 32;
        for (unsigned t = 0; t < n; t++) {
            uint64_t w = __shfl_sync(0xffffffffu, myw, t);
            real p[RPL];
            real v = __shfl_sync(0xffffffffu, myv, t);
            while (base + t + a.offset >= block_end) {   /* uniform across the warp */
                blk++;
                key = a.block_key[blk];
                block_end = a.block_start[blk + 1];
            }
#pragma unroll
            for (int j = 0; j < RPL; j++)
                p[j] = v;
            for (unsigned m = 0; m < a.nother; m++) {
                const real *rowp =
                    (const real *)a.F[m] + amp_blco_field(key, w, a.shift[m], a.width[m]) * R;
#pragma unroll
                for (int j = 0; j < RPL; j++) {
                    unsigned r = lane + 32 * j;
                    if (r < R)
                        p[j] *= __ldg(rowp + r);
                }
            }
            accumulate<real, RPL>(M, R, lane, amp_blco_field(key, w, a.out_shift, a.out_width), p,
                                  cur, acc, first, a.add);
        }
    }
    flush<real, RPL>(M, R, cur, acc, 1, lane);
}

/* Before a launch of nteams teams over nnz gapless nonzeros: zeroes the
 * rows of each team's first and last nonzero, the only rows it adds
 * atomically (one warp a team; a row is row_words 4-byte words). words[0]
 * is nonzero `offset` of the copy, whose block table this is. */
__global__ void zero_team_rows(const uint64_t *words, unsigned wstride,
                               const uint64_t *block_start,
                               const uint64_t *block_key, uint32_t nblocks, uint64_t offset,
                               uint64_t nnz, unsigned shift, unsigned width, uint64_t nteams,
                               unsigned row_words, uint32_t *M)
{
    const unsigned lane = threadIdx.x & 31;
    const uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    for (uint64_t t = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5; t < nteams;
         t += nwarps) {
        const uint64_t lo = nnz * t / nteams, hi = nnz * (t + 1) / nteams;
        if (lo >= hi)
            continue;
        const uint64_t k0 = block_key[nblocks > 1 ? block_of(block_start, nblocks, lo + offset)
                                                  : 0];
        const uint64_t k1 = block_key[nblocks > 1 ? block_of(block_start, nblocks,
                                                             hi - 1 + offset)
                                                  : 0];
        uint64_t r0 = amp_blco_field(k0, words[lo * wstride], shift, width);
        uint64_t r1 = amp_blco_field(k1, words[(hi - 1) * wstride], shift, width);
        for (unsigned c = lane; c < row_words; c += 32) {
            M[r0 * row_words + c] = 0;
            M[r1 * row_words + c] = 0;
        }
    }
}

typedef void (*mttkrp_fn)(const mttkrp_args);

template <typename real, typename vtype, int RPL, int U>
static mttkrp_fn pick_noc(unsigned nother, int narrow)
{
    if (narrow)
        switch (nother) {
        case 1:
            return mttkrp_lanes<real, vtype, RPL, U, 1>;
        case 2:
            return mttkrp_lanes<real, vtype, RPL, U, 2>;
        case 3:
            return mttkrp_lanes<real, vtype, RPL, U, 3>;
        case 4:
            return mttkrp_lanes<real, vtype, RPL, U, 4>;
        }
    return mttkrp_generic<real, vtype, RPL>;
}

/* The largest kernel below holds 16 registers a lane, 16 x 32 entries of
 * a row: the GPU backend's rank limit (AMP_GPU_MAX_RANK, amp_core.h) may
 * not pass it. */
static_assert(AMP_GPU_MAX_RANK <= 16 * 32, "a row of the largest rank fits pick_rpl's kernels");

/* U shrinks as the rank grows so the rows in flight fit in registers. */
template <typename real, typename vtype>
static mttkrp_fn pick_rpl(unsigned R, unsigned nother, int narrow)
{
    unsigned rpl = (R + 31) / 32;
    /* U = 8 at rank <= 32 in f32 (4 in f64, where 8 cost occupancy and
     * was slower): measured on rd100m, bench/RESULTS.md, "amped-run on
     * one GPU". */
    if (rpl <= 1)
        return sizeof(real) == 4 ? pick_noc<real, vtype, 1, 8>(nother, narrow)
                                 : pick_noc<real, vtype, 1, 4>(nother, narrow);
    if (rpl <= 2)
        return pick_noc<real, vtype, 2, 4>(nother, narrow);
    if (rpl <= 4)
        return pick_noc<real, vtype, 4, 2>(nother, narrow);
    if (rpl <= 8)
        return pick_noc<real, vtype, 8, 1>(nother, narrow);
    return pick_noc<real, vtype, 16, 1>(nother, narrow);
}

/* U: nonzeros whose rows are loaded together, 2 in f64 and 4 in f32,
 * the faster of the two in each on rd100m (bench/RESULTS.md, "amped-run
 * on one GPU"). */
template <typename real, typename vtype, int L, int RPT, bool FUSE = false>
static mttkrp_fn pick_team_noc(unsigned nother)
{
    const int U2 = sizeof(real) == 8 || RPT > 1 ? 2 : 4;
    /* Blocks of 256 an SM must hold: the kernel waits on its gathers
     * (long scoreboard stalls most of the time), so occupancy is worth a
     * few spilled registers, up to the point where the spills cost more:
     * 4 blocks were the fastest in f64, and 3 as fast as 4 in f32
     * (bench/RESULTS.md, "amped-run on one GPU", launch bounds). */
    const int MB = sizeof(real) == 8 ? 4 : 3;
    /* 4 and 5 modes hold more rows in flight: bounding them as tightly
     * made them spill far more, so they keep 2 blocks. */
    switch (nother) {
    case 1:
        return mttkrp_teams<real, vtype, L, RPT, 4, 1, MB, FUSE>;
    case 2:
        return mttkrp_teams<real, vtype, L, RPT, U2, 2, MB, FUSE>;
    case 3:
        return mttkrp_teams<real, vtype, L, RPT, 2, 3, 2, FUSE>;
    default:
        return mttkrp_teams<real, vtype, L, RPT, 2, 4, 2, FUSE>;
    }
}

template <typename real, typename vtype, int RPT, bool FUSE = false>
static mttkrp_fn pick_team_lanes(unsigned L, unsigned nother)
{
    switch (L) {
    case 4:
        return pick_team_noc<real, vtype, 4, RPT, FUSE>(nother);
    case 8:
        return pick_team_noc<real, vtype, 8, RPT, FUSE>(nother);
    case 16:
        return pick_team_noc<real, vtype, 16, RPT, FUSE>(nother);
    default:
        return pick_team_noc<real, vtype, 32, RPT, FUSE>(nother);
    }
}

/* The team kernel when it applies (else NULL); *lanes gets L. */
template <typename real, typename vtype, bool FUSE = false>
static mttkrp_fn pick_team(unsigned R, unsigned nother, int narrow, unsigned *lanes)
{
    const unsigned vn = 16 / sizeof(real);
    if (!narrow || nother < 1 || nother > 4 || R % vn != 0 || R > 64 * vn)
        return NULL;
    unsigned need = R / vn;
    /* Two vectors a lane in f64 from rank 16, one in f32, the faster
     * choice in each on rd100m (bench/RESULTS.md, "amped-run on one
     * GPU"); two wherever 32 lanes x 1 is too few. */
    const int two = need > 32 || (sizeof(real) == 8 && need >= 8);
    unsigned L = 4;
    while (L * (two ? 2 : 1) < need)
        L *= 2;
    *lanes = L;
    return two ? pick_team_lanes<real, vtype, 2, FUSE>(L, nother)
               : pick_team_lanes<real, vtype, 1, FUSE>(L, nother);
}

/* The kernel for this launch; *lanes: the lanes that share one nonzero.
 * fuse: the team kernel that also writes the next copy (f64 values, in
 * records), or NULL where it does not apply. */
static mttkrp_fn pick_kernel(int f32, int vals_f32, unsigned R, unsigned nother, int narrow,
                             int fuse, unsigned *lanes)
{
    mttkrp_fn fn;
    *lanes = 32;
    if (fuse)
        return vals_f32 ? NULL
               : f32    ? pick_team<float, double, true>(R, nother, narrow, lanes)
                        : pick_team<double, double, true>(R, nother, narrow, lanes);
    if (f32) {
        fn = vals_f32 ? pick_team<float, float>(R, nother, narrow, lanes)
                      : pick_team<float, double>(R, nother, narrow, lanes);
        if (fn)
            return fn;
        return vals_f32 ? pick_rpl<float, float>(R, nother, narrow)
                        : pick_rpl<float, double>(R, nother, narrow);
    }
    fn = vals_f32 ? pick_team<double, float>(R, nother, narrow, lanes)
                  : pick_team<double, double>(R, nother, narrow, lanes);
    if (fn)
        return fn;
    return vals_f32 ? pick_rpl<double, float>(R, nother, narrow)
                    : pick_rpl<double, double>(R, nother, narrow);
}

/* A persistent grid over a.nnz nonzeros: as many blocks as fit on the
 * device at once, but never fewer than ~64 nonzeros a team (each pays for
 * two shared rows). */
static int team_grid(uint64_t nnz, int sm_count, int per_sm, unsigned lanes)
{
    uint64_t warps = (uint64_t)sm_count * (per_sm > 0 ? per_sm : 1) * 8;
    if (warps > nnz * lanes / (64 * 32) + 1)
        warps = nnz * lanes / (64 * 32) + 1;
    return (int)((warps + 7) / 8);
}

static amp_status launch(mttkrp_fn fn, const mttkrp_args &a, int sm_count, int per_sm,
                         unsigned lanes, cudaStream_t s, amp_error *err)
{
    fn<<<team_grid(a.nnz, sm_count, per_sm, lanes), 256, 0, s>>>(a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return CUDA_FAIL(err, e, "MTTKRP kernel launch");
    return AMP_OK;
}

/* One chunk streamed from compressed chunks (gpu_zstream_run's launch). */
struct zlaunch {
    const amp_gpu_tensor *g;
    mttkrp_args a;
    mttkrp_fn fn = NULL;
    int per_sm = 0;
    unsigned lanes = 32;
    cudaStream_t s;
};

static amp_status launch_zchunk(void *ctx, int b, uint64_t at, uint64_t count, amp_error *err)
{
    zlaunch *z = (zlaunch *)ctx;
    z->a.words = z->g->ring_words[b];
    z->a.vals = z->g->ring_vals[b];
    z->a.nnz = count;
    z->a.offset = at;
    return launch(z->fn, z->a, z->g->sm_count, z->per_sm, z->lanes, z->s, err);
}

amp_status gpu_queue_chunk(const amp_gpu_tensor *g, const gpu_copy *c, int b, uint64_t c0,
                           uint64_t n, amp_error *err)
{
    const size_t vsize = g->vals_f32 ? 4 : 8;
    CUDA_TRY(cudaStreamWaitEvent(g->copy_stream, g->consumed[b], 0), err);
    CUDA_TRY(cudaMemcpyAsync(g->ring_words[b], c->host_words + c0, n * 8,
                             cudaMemcpyHostToDevice, g->copy_stream), err);
    if (c->host_vals)
        CUDA_TRY(cudaMemcpyAsync(g->ring_vals[b], (const char *)c->host_vals + c0 * vsize,
                                 n * vsize, cudaMemcpyHostToDevice, g->copy_stream), err);
    CUDA_TRY(cudaEventRecord(g->copied[b], g->copy_stream), err);
    return AMP_OK;
}

extern "C" amp_status amp_gpu_prefetch(const amp_gpu_tensor *g, unsigned d, amp_error *err)
{
    if (!g->streamed || g->zstream || d >= g->nmodes)
        return AMP_OK;
    amp_gpu_tensor *w = const_cast<amp_gpu_tensor *>(g);
    const gpu_copy *c = &g->copies[d];
    const uint64_t end = c->early_nnz;
    unsigned i = 0;
    for (uint64_t c0 = 0; c0 < end && i < AMP_GPU_RING; c0 += g->chunk_nnz, i++)
        AMP_CHECK(gpu_queue_chunk(g, c, (int)i, c0,
                                  end - c0 < g->chunk_nnz ? end - c0 : g->chunk_nnz, err));
    w->pf_copy = (int)d;
    w->pf_count = i;
    w->pf_end = end;
    return AMP_OK;
}

/* Nonzeros [begin, end) of copy c into M: one launch when resident; when
 * streamed, chunk i is copied into ring buffer i mod RING on the copy
 * stream once the kernel that read that buffer last is done (unless
 * amp_gpu_prefetch queued it already), and its kernel waits for the
 * copy. Rows cut by a chunk boundary are a team's first or last and are
 * added atomically, as between teams. */
static amp_status run_range(const amp_gpu_tensor *g, const gpu_copy *c, mttkrp_args a,
                            mttkrp_fn fn, int per_sm, unsigned lanes, uint64_t begin,
                            uint64_t end, int add, unsigned zero_row_words, cudaStream_t s,
                            amp_error *err)
{
    const size_t vsize = g->vals_f32 ? 4 : 8;
    a.add = add;
    if (end <= begin)
        return AMP_OK;
    if (g->zstream) {   /* one GPU: the whole copy */
        if (begin != 0 || end != c->nnz)
            return AMP_FAIL(err, AMP_ERR_INTERNAL, "part of a copy streamed from compressed "
                            "chunks");
        zlaunch z = {g, a, fn, per_sm, lanes, s};
        return gpu_zstream_run(g, (unsigned)(c - g->copies), launch_zchunk, &z, s, err);
    }
    if (!g->streamed) {
        const uint64_t *words = c->words;
        const void *vals = c->vals;
        unsigned stride = 1;
        if (g->remap &&
            !gpu_remap_arrays(g->remap, (unsigned)(c - g->copies), &words, &vals, &stride))
            return AMP_FAIL(err, AMP_ERR_INTERNAL, "mode %u's copy is in neither remap buffer",
                            (unsigned)(c - g->copies) + 1);
        a.stride = stride;
        if (a.rpos)
            a.rpos += begin;
        a.words = words + begin * stride;
        a.vals = vals ? (const char *)vals + begin * vsize * stride : NULL;
        a.offset = begin;
        a.nnz = end - begin;
        /* A gapless range, M not zeroed: the rows teams share. */
        if (zero_row_words) {
            const int grid = team_grid(a.nnz, g->sm_count, per_sm, lanes);
            const uint64_t nteams = (uint64_t)grid * 256 / lanes;
            zero_team_rows<<<(unsigned)std::min<uint64_t>((nteams + 7) / 8, 65535), 256, 0, s>>>(
                a.words, a.stride, a.block_start, a.block_key, a.nblocks, a.offset, a.nnz,
                a.out_shift, a.out_width, nteams, zero_row_words, (uint32_t *)a.M);
            CUDA_TRY(cudaGetLastError(), err);
        }
        return launch(fn, a, g->sm_count, per_sm, lanes, s, err);
    }
    /* Prefetched chunks count only for the very range they were cut from
     * (the same first nonzero and end, so the same chunks); any run takes
     * the prefetch off the books. */
    amp_gpu_tensor *gw = const_cast<amp_gpu_tensor *>(g);
    const uint64_t queued = begin == 0 && end == g->pf_end && g->pf_copy == (int)(c - g->copies)
                                ? g->pf_count : 0;
    gw->pf_count = 0;
    for (uint64_t c0 = begin, i = 0; c0 < end; c0 += g->chunk_nnz, i++) {
        const int b = (int)(i % AMP_GPU_RING);
        const uint64_t n = end - c0 < g->chunk_nnz ? end - c0 : g->chunk_nnz;
        if (i >= queued)
            AMP_CHECK(gpu_queue_chunk(g, c, b, c0, n, err));
        CUDA_TRY(cudaStreamWaitEvent(s, g->copied[b], 0), err);
        a.words = g->ring_words[b];
        a.vals = g->ring_vals[b];
        a.nnz = n;
        a.offset = c0;
        AMP_CHECK(launch(fn, a, g->sm_count, per_sm, lanes, s, err));
        CUDA_TRY(cudaEventRecord(g->consumed[b], s), err);
    }
    return AMP_OK;
}

/* What every launch over copy d on stream s shares: the arguments, the
 * kernel, its blocks per SM and lanes per nonzero; two copies remapped,
 * copy d in a buffer and s waiting for it. */
static amp_status setup(const amp_gpu_tensor *g, unsigned d, void *const *A, unsigned R,
                        int f32, void *M, cudaStream_t s, mttkrp_args *a, mttkrp_fn *fn,
                        int *per_sm, unsigned *lanes, amp_error *err)
{
    const gpu_copy *c = &g->copies[d];
    if (R == 0 || R > AMP_GPU_MAX_RANK)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the GPU MTTKRP takes rank 1 to %u, not %u",
                        AMP_GPU_MAX_RANK, R);
    if (g->remap)
        AMP_CHECK(gpu_remap_bring(g, d, s, err));
    memset(a, 0, sizeof *a);
    a->stride = 1;
    a->block_start = c->block_start;
    a->block_key = c->block_key;
    a->nblocks = c->nblocks;
    a->R = R;
    if (c->packed) {
        static const double p10[10] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
        a->packed = 1;
        a->qshift = c->stream.qshift;
        a->qbits = c->stream.qbits;
        a->qsigned = c->stream.qsigned;
        a->p10 = p10[c->stream.decimals];
        a->p10f = (float)p10[c->stream.decimals];
    }
    a->out_shift = c->shift[d];
    a->out_width = c->width[d];
    a->M = M;
    for (unsigned m = 0; m < g->nmodes; m++) {
        if (m == d)
            continue;
        a->shift[a->nother] = c->shift[m];
        a->width[a->nother] = c->width[m];
        a->F[a->nother++] = A[m];
    }
    /* CP-ALS asked this MTTKRP to write the next copy (gpu_remap_fuse_next):
     * the fused kernel where there is one, else gpu_remap_ahead remaps
     * after it as without. */
    gpu_remap *r = g->remap;
    *fn = NULL;
    if (r && r->fusing == (int)d) {
        *fn = pick_kernel(f32, g->vals_f32, R, a->nother, g->narrow_rows, 1, lanes);
        if (*fn == NULL) {
            r->fusing = -1;
        } else {
            const gpu_copy *n = &g->copies[(d + 1) % g->nmodes];
            r->launched = 1;
            a->rpos = r->pos[d];
            a->rout = (ulonglong2 *)r->words[r->fuse_to];
            for (unsigned m = 0; m < g->nmodes; m++) {
                a->rf_shift[m] = (uint8_t)c->shift[m];
                a->rf_width[m] = (uint8_t)c->width[m];
                a->rt_shift[m] = (uint8_t)n->shift[m];
                a->rt_width[m] = (uint8_t)n->width[m];
            }
        }
    }
    if (*fn == NULL)
        *fn = pick_kernel(f32, g->vals_f32, R, a->nother, g->narrow_rows, 0, lanes);
    *per_sm = 0;
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, *fn, 256, 0), err);
    return AMP_OK;
}

extern "C" amp_status amp_gpu_mttkrp_group(const amp_gpu_tensor *g, unsigned d, void *const *A,
                                           unsigned R, int f32, void *M, int group, void *stream,
                                           amp_error *err)
{
    const gpu_copy *c = &g->copies[d];
    cudaStream_t s = (cudaStream_t)stream;
    if (gpu_fibers_apply(g, d, group))
        return gpu_mttkrp_fibers(g, d, A, R, f32, M, s, err);
    mttkrp_args a;
    mttkrp_fn fn = NULL;
    int per_sm = 0;
    unsigned lanes = 32;
    AMP_CHECK(setup(g, d, A, R, f32, M, s, &a, &fn, &per_sm, &lanes, err));
    size_t real_size = f32 ? 4 : 8;
    /* A resident gapless copy in one group writes every row of its range
     * (rows_gapless, gpu_tensor.cu); else the range is zeroed first: only
     * the rows this copy's nonzeros fall in, as a GPU's part of a
     * multi-GPU run owns a range, and the rest of M is not its to touch. */
    const int writes_all = c->gapless && c->early_nnz == c->nnz && group != AMP_GPU_LATE;
    if (group != AMP_GPU_LATE && !writes_all)
        CUDA_TRY(cudaMemsetAsync((char *)M + (size_t)c->row_begin * R * real_size, 0,
                                 (size_t)c->row_count * R * real_size, s), err);
    if (c->nnz == 0)
        return AMP_OK;
    /* The two groups are each ordered by row, not together: the second
     * adds into what the first wrote. */
    if (group != AMP_GPU_LATE)
        AMP_CHECK(run_range(g, c, a, fn, per_sm, lanes, 0, c->early_nnz, 0,
                            writes_all ? (unsigned)(R * real_size / 4) : 0, s, err));
    if (group != AMP_GPU_EARLY)
        AMP_CHECK(run_range(g, c, a, fn, per_sm, lanes, c->early_nnz, c->nnz, 1, 0, s, err));
    return AMP_OK;
}

extern "C" amp_status amp_gpu_mttkrp_cuts(const amp_gpu_tensor *g, unsigned d, void *const *A,
                                          unsigned R, int f32, void *M, unsigned first,
                                          unsigned last, unsigned waves, void *stream,
                                          amp_error *err)
{
    const gpu_copy *c = &g->copies[d];
    cudaStream_t s = (cudaStream_t)stream;
    if (!c->has_cuts || first > last || last > AMP_GPU_CUTS)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "cuts %u to %u of mode %u's copy, which has %s",
                        first, last, d + 1, c->has_cuts ? "fewer" : "none");
    mttkrp_args a;
    mttkrp_fn fn = NULL;
    int per_sm = 0;
    unsigned lanes = 32;
    AMP_CHECK(setup(g, d, A, R, f32, M, s, &a, &fn, &per_sm, &lanes, err));
    const size_t real_size = f32 ? 4 : 8;
    if (first == 0 && !c->gapless)   /* the empty rows too, once */
        CUDA_TRY(cudaMemsetAsync((char *)M + (size_t)c->row_begin * R * real_size, 0,
                                 (size_t)c->row_count * R * real_size, s), err);
    /* No row spans a cut, so the ranges write disjoint rows. More blocks
     * than fit at once (waves > 1) free SMs as they finish, for the
     * kernels of other streams that the ranges are cut for. */
    return run_range(g, c, a, fn, per_sm * (int)(waves < 1 ? 1 : waves), lanes,
                     c->cut_nnz[first], c->cut_nnz[last], 0,
                     c->gapless ? (unsigned)(R * real_size / 4) : 0, s, err);
}

extern "C" amp_status amp_gpu_mttkrp(const amp_gpu_tensor *g, unsigned d, void *const *A,
                                     unsigned R, int f32, void *M, void *stream, amp_error *err)
{
    return amp_gpu_mttkrp_group(g, d, A, R, f32, M, AMP_GPU_ALL, stream, err);
}

/* dM = MTTKRP(d) in `parts` cut ranges (amp_gpu_mttkrp_cuts) on two
 * streams taken in turn, each range after the one before; only >= 0:
 * range `only` of them alone. */
static amp_status mttkrp_in_parts(const amp_gpu_tensor *g, unsigned d, void *const *dA,
                                  unsigned R, int f32, void *dM, unsigned parts, int only,
                                  unsigned waves, amp_error *err)
{
    amp_status rc = AMP_OK;
    cudaStream_t st[2] = {NULL, NULL};
    cudaEvent_t ev = NULL;
    /* cudaMemset may return before it is done, and non-blocking streams
     * do not wait for the legacy stream it ran on: without this, a range
     * could be written before the NaN lands on it. */
    CUDA_TRY(cudaDeviceSynchronize(), err);
    for (int k = 0; k < 2; k++)
        CUDA_TRY_GOTO(cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking), err, rc, done);
    CUDA_TRY_GOTO(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), err, rc, done);
    /* A range alone after what the first does before its own nonzeros
     * (zeroing a copy that is not gapless; the ranges after add into
     * that), as in a run of them all. */
    if (only > 0)
        rc = amp_gpu_mttkrp_cuts(g, d, dA, R, f32, dM, 0, 0, waves, st[only % 2], err);
    for (unsigned k = 0; k < parts && rc == AMP_OK; k++) {
        if (only >= 0 && k != (unsigned)only)
            continue;
        cudaStream_t s = st[k % 2];
        if (k > 0)
            CUDA_TRY_GOTO(cudaStreamWaitEvent(s, ev, 0), err, rc, done);
        rc = amp_gpu_mttkrp_cuts(g, d, dA, R, f32, dM, k * AMP_GPU_CUTS / parts,
                                 (k + 1) * AMP_GPU_CUTS / parts, waves, s, err);
        if (rc == AMP_OK)
            CUDA_TRY_GOTO(cudaEventRecord(ev, s), err, rc, done);
    }
done:
    cudaDeviceSynchronize();
    for (int k = 0; k < 2; k++)
        destroy_stream(st[k]);
    destroy_event(ev);
    return rc;
}

/* dM (rows[d] x R, f32 or f64) into M_host in f64, through stage; rows
 * outside the copy's range that the MTTKRP left as they were (NaN) read
 * as 0. */
static amp_status read_back(const amp_gpu_tensor *g, unsigned d, unsigned R, int f32,
                            const void *dM, void *stage, double *M_host, amp_error *err)
{
    const size_t rs = f32 ? 4 : 8;
    const gpu_copy *c = &g->copies[d];
    size_t n = (size_t)g->rows[d] * R;
    CUDA_TRY(cudaDeviceSynchronize(), err);
    CUDA_TRY(cudaMemcpy(stage, dM, n * rs, cudaMemcpyDeviceToHost), err);
    for (uint64_t i = 0; i < g->rows[d]; i++) {
        const unsigned char *row = (const unsigned char *)stage + i * R * rs;
        int untouched = i < c->row_begin || i >= c->row_begin + c->row_count;
        for (size_t b = 0; b < R * rs && untouched; b++)
            untouched = row[b] == 0xff;
        for (unsigned r = 0; r < R; r++)
            M_host[i * R + r] = untouched ? 0
                              : f32   ? (double)((const float *)row)[r]
                                      : ((const double *)row)[r];
    }
    return AMP_OK;
}

/* mode_seconds[m]: the mean time of one MTTKRP of each mode over `rounds`
 * launches after one to warm up (events around the launches only). */
static amp_status time_modes(const amp_gpu_tensor *g, void *const *dA, unsigned R, int f32,
                             void *dM, unsigned rounds, double *mode_seconds, amp_error *err)
{
    amp_status rc = AMP_OK;
    cudaEvent_t e0 = NULL, e1 = NULL;
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
done:
    destroy_event(e0);
    destroy_event(e1);
    return rc;
}

/* Host factors in, host result out (f64 both ways), for checking the kernel
 * and for --check: M_host (if not NULL) gets MTTKRP(d), whole or with
 * parts > 0 in that many cut ranges (mttkrp_in_parts); with rounds > 0
 * also the mean seconds of one MTTKRP of each mode (time_modes). */
static amp_status mttkrp_host(const amp_gpu_tensor *g, const double *const *A, unsigned R,
                              int f32, unsigned d, double *M_host, unsigned rounds,
                              double *mode_seconds, unsigned parts, int only, unsigned waves,
                              amp_error *err)
{
    amp_status rc = AMP_OK;
    void *dA[AMP_MAX_MODES] = {0}, *dM = NULL;
    void *stage = NULL;
    size_t rs = f32 ? 4 : 8;
    uint64_t maxr = 1;
    CUDA_TRY(cudaSetDevice(g->device), err);
    for (unsigned m = 0; m < g->nmodes; m++)
        maxr = g->rows[m] > maxr ? g->rows[m] : maxr;
    stage = malloc((size_t)maxr * R * rs);
    if (stage == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
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
    /* NaN everywhere first, so that a row the MTTKRP should have written
     * and did not shows. A part's MTTKRP writes only its rows: the others,
     * left as they were, read back as zero. */
    CUDA_TRY_GOTO(cudaMemset(dM, 0xff, (size_t)maxr * R * rs), err, rc, done);
    if (M_host != NULL) {
        AMP_CHECK_GOTO(parts == 0 ? amp_gpu_mttkrp(g, d, dA, R, f32, dM, NULL, err)
                                  : mttkrp_in_parts(g, d, dA, R, f32, dM, parts, only, waves,
                                                    err),
                       rc, done);
        AMP_CHECK_GOTO(read_back(g, d, R, f32, dM, stage, M_host, err), rc, done);
    }
    if (rounds > 0)
        AMP_CHECK_GOTO(time_modes(g, dA, R, f32, dM, rounds, mode_seconds, err), rc, done);
done:
    for (unsigned m = 0; m < g->nmodes; m++)
        cudaFree(dA[m]);
    cudaFree(dM);
    free(stage);
    return rc;
}

extern "C" amp_status amp_gpu_mttkrp_host(const amp_gpu_tensor *g, const double *const *A,
                                          unsigned R, int f32, unsigned d, double *M_host,
                                          unsigned rounds, double *mode_seconds, amp_error *err)
{
    return mttkrp_host(g, A, R, f32, d, M_host, rounds, mode_seconds, 0, -1, 1, err);
}

extern "C" amp_status amp_gpu_mttkrp_cuts_host(const amp_gpu_tensor *g, const double *const *A,
                                               unsigned R, int f32, unsigned d, unsigned parts,
                                               int only, unsigned waves, double *M_host,
                                               amp_error *err)
{
    if (parts < 1 || parts > AMP_GPU_CUTS || only >= (int)parts)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%u parts: 1 to %d, part %d of them", parts,
                        AMP_GPU_CUTS, only);
    return mttkrp_host(g, A, R, f32, d, M_host, 0, NULL, parts, only, waves, err);
}
