/* GCP-Adam on one GPU: run/cpu/gcp.c's algorithm, the reference, step for
 * step (the same counter-based draws of the same cells from amp_gcp.h,
 * the same losses, Adam, the epoch's estimate on the fixed sample, the
 * failed epoch's return to its start), with everything but the plan on
 * the device. Only scalars cross to the host: the estimate's block sums
 * and the exact loss's after each epoch, and a flag set where a zero
 * sample found no absent cell.
 *
 * The tensor on the device is GCP's form of it (amp_gcp_source): the
 * nonzeros' keys (ascending) and values, 16 bytes a nonzero, and each
 * mode's table from ordinal to row, 8 bytes a row. Drawing an absent cell
 * looks it up by binary search among the keys, so every key must be at
 * hand: the form is resident (--memory resident).
 *
 * Streamed (--memory stream, or auto where the form does not fit): the
 * samples are drawn on the host instead (amp_gcp_draw_batch, the CPU
 * backend's draws, on every core) and only they cross to the device,
 * 8 N + 8 bytes a sample (compact rows and value), into one of two
 * device buffers while the device runs the step before: a step's draws
 * depend on its key alone, so the host draws step i + 1 while the GPU
 * takes step i. The device holds the factors, Adam's state and the row
 * tables, no nonzero: the tensor's size no longer bounds the run, and a
 * step moves the same bytes on the device as resident. The fixed sample
 * of the estimate is drawn once and kept on the device. The exact loss,
 * taken only where the tensor has at most 2^24 cells or 2^24 nonzeros
 * (amp_gcp_exact_kind), still needs the nonzeros on the device: there
 * they are uploaded (at most 256 MB). The same cells as resident, so the
 * same run up to the atomics' order of sums.
 *
 * gcp_grad (one step's sample and gradient). Thread mapping: a warp a
 * sample, grid-stride over the samples; lane 0 draws the sample (its
 * key, the binary search of a zero's draws, log2(nnz) dependent 8-byte
 * reads) and hands its rows and value to the warp by shuffles; lane l
 * holds entries l, l + 32, ... of the rank. Per sample: the N rows read
 * (8 N R bytes, coalesced per row), the model's value a per-lane partial
 * then a butterfly (every lane the same bits), y = w f'(x, m), and for
 * each mode n the product of the other modes' entries times y added
 * atomically into G_n's row (8 N R bytes of f64 atomics, which L2
 * resolves). FLOPs per sample: N R (value) + N (N - 1) R (gradients).
 * Not the CPU's bits: the atomics add a row's samples in any order.
 *
 * gcp_adam (dense Adam), element-wise over one factor (grid stride):
 * reads A, G, M, V and writes A, M, V and G = 0 (the next step's, so no
 * memset): 64 bytes an entry, sum(rows) R entries a step, whatever the
 * samples.
 *
 * Lazy Adam (--adam lazy, PyTorch's SparseAdam: only the rows a step's
 * samples touch move, with the global step count's bias correction).
 * gcp_grad also lists the touched rows: per mode a slot of 4 bytes a row
 * (0 between steps), and lane n of the sample's warp claims its mode-n
 * row's slot with atomicCAS (after a plain read, so a hot row costs one
 * read, not an atomic), the winner appending the row to the mode's list
 * by an atomicAdd on its count. The gradient still goes into G's full
 * rows by the same atomics (G is zero between steps, and only touched
 * rows are ever written, so no compact copy is needed). gcp_adam_lazy,
 * over the list (thread mapping: entry i of the list's rows, entry i % R
 * of row list[i / R], grid stride up to the count read on the device, so
 * no host round trip), does gcp_adam's update on those rows, zeroes their
 * G and empties their slots; the counts are reset by a memset. Bytes a
 * step, for s samples touching u_n distinct rows of mode n (u_n at most
 * min(s, rows[n])): the samples' 8 N R s of gathers and as many of
 * atomics, as the dense step; N s slot reads (a 32-byte sector each);
 * then 64 R + 12 bytes a touched row (A, M, V read and written, G read
 * and zeroed; the list entry and the slot), 64 R sum(u_n) in all against
 * the dense 64 R sum(rows): the step's cost follows its samples, not the
 * factors. bench/bench-gcp.sh prints both floors for its tensor. The
 * order of a row's atomics differs from the CPU's sample order, as the
 * dense gradient's; which rows move does not (a row is touched or not).
 *
 * gcp_est (the estimate, or a batch's loss for the tests): block b sums
 * the samples [4096 b, 4096 (b + 1)) (its warps strided over them, the
 * warps' sums added in order by thread 0) into four partials (each
 * stratum's sum and sum of squares); the host adds the blocks in order:
 * the same bits every run on any device, as the CPU's blocks of 4096 are
 * summed in the same order (the values within a block are summed in
 * another order). gcp_exact the same over every cell (in key order,
 * merged with the stored ones) or, for the closed forms, over the
 * nonzeros; the closed forms' sum over every cell from gcp_gram (a thread
 * an entry of the R x R Gram or of the R column sums, over the rows in
 * ordinal order). */
#include <config.h>

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "amp_timer.h"
}
#include "gpu_internal.h"

#define GCP_BLOCK 4096
#define GCP_THREADS 256
#define ADAM_BETA1 0.9
#define ADAM_BETA2 0.999
#define ADAM_EPS 1e-8

typedef struct gcp_factors {
    double *A[AMP_MAX_MODES];
    double *G[AMP_MAX_MODES];
} gcp_factors;

/* Lazy Adam's per-mode tables (device): each row's slot (1: touched this
 * step), the touched rows, their counts. */
typedef struct gcp_touch {
    uint32_t *slot[AMP_MAX_MODES];
    uint64_t *list[AMP_MAX_MODES];
    unsigned long long *count;     /* nmodes */
} gcp_touch;

typedef struct gcp_args {
    amp_gcp_view v;        /* device pointers */
    gcp_factors f;
    unsigned R;
    int loss;
    double delta;
    amp_gcp_batch b;
    int lazy;              /* list the touched rows in t */
    gcp_touch t;
    /* Streamed: the batch's samples drawn on the host (rows, N a sample;
     * values), read instead of drawn; NULL: drawn here. */
    const uint64_t *srows;
    const double *sx;
} gcp_args;

__device__ __forceinline__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sample j drawn by lane 0 and given to the warp: rows and value; 1 where
 * it is a zero that found no absent cell. */
__device__ __forceinline__ int warp_sample(const gcp_args &a, uint64_t j, uint64_t *rows,
                                          double *x, int lane)
{
    if (a.srows != NULL) {
        for (unsigned m = 0; m < a.v.nmodes; m++)
            rows[m] = a.srows[j * a.v.nmodes + m];
        *x = a.sx[j];
        return 0;
    }
    int bad = 0;
    if (lane == 0)
        bad = amp_gcp_sample(&a.v, a.b.key, j, a.b.snz, rows, x);
    bad = __shfl_sync(0xffffffffu, bad, 0);
    *x = __shfl_sync(0xffffffffu, *x, 0);
    for (unsigned m = 0; m < a.v.nmodes; m++)
        rows[m] = __shfl_sync(0xffffffffu, rows[m], 0);
    return bad;
}

/* The model's value at rows, every lane the same. */
__device__ __forceinline__ double warp_model(const gcp_args &a, const uint64_t *rows, int lane)
{
    const unsigned N = a.v.nmodes, R = a.R;
    double s = 0;
    for (unsigned r = lane; r < R; r += 32) {
        double p = 1;
        for (unsigned m = 0; m < N; m++)
            p *= a.f.A[m][rows[m] * R + r];
        s += p;
    }
    return warp_sum(s);
}

__global__ void gcp_grad(gcp_args a, int *bad)
{
    const int lane = threadIdx.x & 31;
    const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
    const uint64_t s = a.b.snz + a.b.sz;
    const unsigned N = a.v.nmodes, R = a.R;
    uint64_t rows[AMP_MAX_MODES];
    for (uint64_t j = (uint64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; j < s;
         j += warps) {
        double x = 0;
        if (warp_sample(a, j, rows, &x, lane)) {
            if (lane == 0)
                atomicExch(bad, 1);
            continue;
        }
        if (a.lazy && lane < (int)N) {
            const uint64_t i = rows[lane];
            uint32_t *slot = a.t.slot[lane] + i;
            if (*slot == 0 && atomicCAS(slot, 0u, 1u) == 0u)
                a.t.list[lane][atomicAdd(&a.t.count[lane], 1ull)] = i;
        }
        const double m = warp_model(a, rows, lane);
        const double y = (j < a.b.snz ? a.b.wnz : a.b.wz) * amp_gcp_df(a.loss, x, m, a.delta);
        for (unsigned r = lane; r < R; r += 32)
            for (unsigned n = 0; n < N; n++) {
                double z = y;
                for (unsigned q = 0; q < N; q++)
                    if (q != n)
                        z *= a.f.A[q][rows[q] * R + r];
                atomicAdd(&a.f.G[n][rows[n] * R + r], z);
            }
    }
}

/* One entry's Adam step, run/cpu/gcp.c's adam_entry. */
__device__ __forceinline__ void adam_entry(double *A, double *G, double *M, double *V,
                                           uint64_t i, double step, double b1t, double b2t,
                                           double lower)
{
    const double g = G[i];
    const double m = ADAM_BETA1 * M[i] + (1 - ADAM_BETA1) * g;
    const double v = ADAM_BETA2 * V[i] + (1 - ADAM_BETA2) * g * g;
    M[i] = m;
    V[i] = v;
    G[i] = 0;
    const double x = A[i] - step * (m / b1t) / (sqrt(v / b2t) + ADAM_EPS);
    A[i] = x > lower ? x : lower;
}

__global__ void gcp_adam(double *A, double *G, double *M, double *V, uint64_t n, double step,
                         double b1t, double b2t, double lower)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        adam_entry(A, G, M, V, i, step, b1t, b2t, lower);
}

__global__ void gcp_adam_lazy(double *A, double *G, double *M, double *V, uint32_t *slot,
                              const uint64_t *list, const unsigned long long *count, unsigned R,
                              double step, double b1t, double b2t, double lower)
{
    const uint64_t n = (uint64_t)*count * R;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t q = i / R;
        const unsigned r = (unsigned)(i - q * R);
        const uint64_t row = list[q];
        adam_entry(A, G, M, V, row * R + r, step, b1t, b2t, lower);
        if (r == 0)
            slot[row] = 0;
    }
}

/* Block b's four partials of the batch's loss: sum and sum of squares of
 * f over its nonzeros, then over its zeros. */
__global__ void gcp_est(gcp_args a, double *part, int *bad)
{
    __shared__ double ws[GCP_THREADS / 32][4];
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32, nw = blockDim.x / 32;
    const uint64_t s = a.b.snz + a.b.sz;
    const uint64_t lo = (uint64_t)blockIdx.x * GCP_BLOCK;
    const uint64_t hi = lo + GCP_BLOCK < s ? lo + GCP_BLOCK : s;
    uint64_t rows[AMP_MAX_MODES];
    double acc[4] = {0, 0, 0, 0};
    for (uint64_t j = lo + w; j < hi; j += nw) {
        double x = 0;
        if (warp_sample(a, j, rows, &x, lane)) {
            if (lane == 0)
                atomicExch(bad, 1);
            continue;
        }
        const double f = amp_gcp_f(a.loss, x, warp_model(a, rows, lane), a.delta);
        const int k = j < a.b.snz ? 0 : 2;
        acc[k] += f;
        acc[k + 1] += f * f;
    }
    if (lane == 0)
        for (int k = 0; k < 4; k++)
            ws[w][k] = acc[k];
    __syncthreads();
    if (threadIdx.x == 0)
        for (int k = 0; k < 4; k++) {
            double t = 0;
            for (int q = 0; q < nw; q++)
                t += ws[q][k];
            part[(uint64_t)blockIdx.x * 4 + k] = t;
        }
}

/* Block b's share of the exact loss: cells [4096 b, 4096 (b + 1)) in key
 * order (enumerate), or nonzeros (closed: f(x, m) - f(0, m)). */
__global__ void gcp_exact(gcp_args a, int enumerate, uint64_t n, double *part)
{
    __shared__ double ws[GCP_THREADS / 32];
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32, nw = blockDim.x / 32;
    const uint64_t lo = (uint64_t)blockIdx.x * GCP_BLOCK;
    const uint64_t hi = lo + GCP_BLOCK < n ? lo + GCP_BLOCK : n;
    uint64_t rows[AMP_MAX_MODES];
    double acc = 0;
    for (uint64_t j = lo + w; j < hi; j += nw) {
        double x = 0, f0 = 0;
        if (enumerate) {
            /* The stored value of cell j, if any (binary search). */
            uint64_t l = 0, h = a.v.nnz;
            while (l < h) {
                uint64_t mid = l + (h - l) / 2;
                if (a.v.key[mid] < j)
                    l = mid + 1;
                else
                    h = mid;
            }
            for (; l < a.v.nnz && a.v.key[l] == j; l++)
                x += a.v.val[l];
            amp_gcp_rows_of(&a.v, j, rows);
        } else {
            amp_gcp_rows_of(&a.v, a.v.key[j], rows);
            x = a.v.val[j];
        }
        const double m = warp_model(a, rows, lane);
        if (!enumerate)
            f0 = amp_gcp_f(a.loss, 0, m, a.delta);
        acc += amp_gcp_f(a.loss, x, m, a.delta) - f0;
    }
    if (lane == 0)
        ws[w] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int q = 0; q < nw; q++)
            t += ws[q];
        part[blockIdx.x] = t;
    }
}

/* Entry (r, q) of mode m's Gram (gram 1, R x R) or column r's sum
 * (gram 0), over the rows in ordinal order. */
__global__ void gcp_gram(const double *A, const uint64_t *row_of, uint64_t rows, unsigned R,
                         int gram, double *out)
{
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned r = gram ? k / R : k, q = gram ? k % R : 0;
    if (k >= (gram ? R * R : R))
        return;
    double s = 0;
    for (uint64_t o = 0; o < rows; o++) {
        const double *a = A + row_of[o] * R;
        s += gram ? a[r] * a[q] : a[r];
    }
    out[k] = s;
}

/* ---- device state ----------------------------------------------------- */

typedef struct gcp_dev {
    int sm_count;
    cudaStream_t s;
    amp_gcp_view v;                 /* device pointers */
    uint64_t *key;
    double *val;
    uint64_t *row_of[AMP_MAX_MODES];
    unsigned R;
    double *A[AMP_MAX_MODES], *G[AMP_MAX_MODES], *M[AMP_MAX_MODES], *V[AMP_MAX_MODES];
    double *A0[AMP_MAX_MODES], *M0[AMP_MAX_MODES], *V0[AMP_MAX_MODES];
    double *part, *hpart;           /* block sums: device, pinned host */
    uint64_t nparts;
    int *bad;
    double *gram;                   /* R x R */
    int lazy;
    gcp_touch t;                    /* lazy Adam's, where lazy */
    /* Streamed: the host's view to draw from; two pinned host buffers of
     * samples and their device twins (rows, values; cap samples each),
     * each buffer's event (its upload done, so the host may refill it);
     * the fixed sample of the estimate on the device; the samples the
     * next launch reads (NULL: drawn on the device). */
    const amp_gcp_view *hv;
    uint64_t cap;
    uint64_t *hrows[2], *drows[2], *lrows;
    double *hx[2], *dx[2], *lx;
    cudaEvent_t ev[2];
    int next;
    const uint64_t *srows;
    const double *sx;
} gcp_dev;

static void dev_free(gcp_dev *d)
{
    if (d->s)
        cudaStreamSynchronize(d->s);
    cudaFree(d->key);
    cudaFree(d->val);
    for (unsigned m = 0; m < AMP_MAX_MODES; m++) {
        cudaFree(d->row_of[m]);
        cudaFree(d->A[m]);
        cudaFree(d->G[m]);
        cudaFree(d->M[m]);
        cudaFree(d->V[m]);
        cudaFree(d->A0[m]);
        cudaFree(d->M0[m]);
        cudaFree(d->V0[m]);
    }
    cudaFree(d->part);
    cudaFreeHost(d->hpart);
    cudaFree(d->bad);
    cudaFree(d->gram);
    for (unsigned m = 0; m < AMP_MAX_MODES; m++) {
        cudaFree(d->t.slot[m]);
        cudaFree(d->t.list[m]);
    }
    cudaFree(d->t.count);
    for (int k = 0; k < 2; k++) {
        cudaFreeHost(d->hrows[k]);
        cudaFreeHost(d->hx[k]);
        cudaFree(d->drows[k]);
        cudaFree(d->dx[k]);
        if (d->ev[k])
            cudaEventDestroy(d->ev[k]);
    }
    cudaFree(d->lrows);
    cudaFree(d->lx);
    if (d->s)
        cudaStreamDestroy(d->s);
    memset(d, 0, sizeof *d);
}

/* The view's arrays on device `device` (the nonzeros only where
 * nonzeros; the row tables always), room for the factors (with Adam's
 * state where adam) and nparts block sums. */
static amp_status dev_init(gcp_dev *d, int device, const amp_gcp_view *v, unsigned R, int adam,
                           uint64_t nparts, int nonzeros, amp_error *err)
{
    memset(d, 0, sizeof *d);
    CUDA_TRY(cudaSetDevice(device), err);
    CUDA_TRY(cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount, device), err);
    CUDA_TRY(cudaStreamCreateWithFlags(&d->s, cudaStreamNonBlocking), err);
    d->R = R;
    d->v = *v;
    d->v.key = NULL;
    d->v.val = NULL;
    if (nonzeros) {
        const size_t nb = v->nnz * sizeof(uint64_t) + 8;
        CUDA_TRY(cudaMalloc(&d->key, nb), err);
        CUDA_TRY(cudaMalloc(&d->val, v->nnz * sizeof(double) + 8), err);
        CUDA_TRY(cudaMemcpy(d->key, v->key, v->nnz * sizeof(uint64_t), cudaMemcpyHostToDevice),
                 err);
        CUDA_TRY(cudaMemcpy(d->val, v->val, v->nnz * sizeof(double), cudaMemcpyHostToDevice),
                 err);
        d->v.key = d->key;
        d->v.val = d->val;
    }
    for (unsigned m = 0; m < v->nmodes; m++) {
        const size_t rb = v->rows[m] * sizeof(uint64_t);
        CUDA_TRY(cudaMalloc(&d->row_of[m], rb), err);
        CUDA_TRY(cudaMemcpy(d->row_of[m], v->row_of[m], rb, cudaMemcpyHostToDevice), err);
        d->v.row_of[m] = d->row_of[m];
        const size_t fb = v->rows[m] * R * sizeof(double) + 8;
        CUDA_TRY(cudaMalloc(&d->A[m], fb), err);
        CUDA_TRY(cudaMalloc(&d->G[m], fb), err);
        CUDA_TRY(cudaMemset(d->G[m], 0, fb), err);
        if (adam) {
            double **arr[5] = {d->M, d->V, d->A0, d->M0, d->V0};
            for (int k = 0; k < 5; k++) {
                CUDA_TRY(cudaMalloc(&arr[k][m], fb), err);
                CUDA_TRY(cudaMemset(arr[k][m], 0, fb), err);
            }
        }
    }
    d->nparts = nparts;
    CUDA_TRY(cudaMalloc(&d->part, nparts * sizeof(double) + 8), err);
    CUDA_TRY(cudaMallocHost(&d->hpart, nparts * sizeof(double) + 8), err);
    CUDA_TRY(cudaMalloc(&d->bad, sizeof(int)), err);
    CUDA_TRY(cudaMemset(d->bad, 0, sizeof(int)), err);
    CUDA_TRY(cudaMalloc(&d->gram, (size_t)R * R * sizeof(double) + 8), err);
    return AMP_OK;
}

/* Lazy Adam's tables for steps of at most cap samples: every slot empty,
 * every count 0. */
static amp_status dev_lazy(gcp_dev *d, uint64_t cap, amp_error *err)
{
    d->lazy = 1;
    for (unsigned m = 0; m < d->v.nmodes; m++) {
        const uint64_t most = cap < d->v.rows[m] ? cap : d->v.rows[m];
        CUDA_TRY(cudaMalloc(&d->t.slot[m], d->v.rows[m] * sizeof(uint32_t) + 8), err);
        CUDA_TRY(cudaMemset(d->t.slot[m], 0, d->v.rows[m] * sizeof(uint32_t) + 8), err);
        CUDA_TRY(cudaMalloc(&d->t.list[m], most * sizeof(uint64_t) + 8), err);
    }
    CUDA_TRY(cudaMalloc(&d->t.count, AMP_MAX_MODES * sizeof(unsigned long long)), err);
    CUDA_TRY(cudaMemset(d->t.count, 0, AMP_MAX_MODES * sizeof(unsigned long long)), err);
    /* The memsets ran on the legacy stream, which d->s (non-blocking)
     * does not wait for. */
    CUDA_TRY(cudaDeviceSynchronize(), err);
    return AMP_OK;
}

/* Streamed samples: two buffers of cap samples (host, pinned, and
 * device) for the steps, and the estimate's fixed sample (lb) drawn on
 * the host and kept on the device. hv: the host's view. */
static amp_status dev_stream(gcp_dev *d, const amp_gcp_view *hv, uint64_t cap,
                             const amp_gcp_batch *lb, amp_error *err)
{
    const unsigned N = hv->nmodes;
    d->hv = hv;
    d->cap = cap;
    for (int k = 0; k < 2; k++) {
        CUDA_TRY(cudaMallocHost(&d->hrows[k], cap * N * sizeof(uint64_t) + 8), err);
        CUDA_TRY(cudaMallocHost(&d->hx[k], cap * sizeof(double) + 8), err);
        CUDA_TRY(cudaMalloc(&d->drows[k], cap * N * sizeof(uint64_t) + 8), err);
        CUDA_TRY(cudaMalloc(&d->dx[k], cap * sizeof(double) + 8), err);
        CUDA_TRY(cudaEventCreateWithFlags(&d->ev[k], cudaEventDisableTiming), err);
    }
    const uint64_t s = lb->snz + lb->sz;
    uint64_t *rows = (uint64_t *)malloc(s * N * sizeof(uint64_t) + 8);
    double *x = (double *)malloc(s * sizeof(double) + 8);
    amp_status rc = rows && x ? AMP_OK : AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    if (rc == AMP_OK)
        rc = amp_gcp_draw_batch(hv, lb, rows, x, err);
    cudaError_t e = cudaSuccess;
    if (rc == AMP_OK)
        e = cudaMalloc(&d->lrows, s * N * sizeof(uint64_t) + 8);
    if (rc == AMP_OK && e == cudaSuccess)
        e = cudaMalloc(&d->lx, s * sizeof(double) + 8);
    if (rc == AMP_OK && e == cudaSuccess)
        e = cudaMemcpy(d->lrows, rows, s * N * sizeof(uint64_t), cudaMemcpyHostToDevice);
    if (rc == AMP_OK && e == cudaSuccess)
        e = cudaMemcpy(d->lx, x, s * sizeof(double), cudaMemcpyHostToDevice);
    /* Landed before d->s reads it (see upload_factors). */
    if (rc == AMP_OK && e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (rc == AMP_OK && e != cudaSuccess)
        rc = CUDA_FAIL(err, e, "the estimate's sample to the device");
    free(rows);
    free(x);
    return rc;
}

/* Streamed: batch b drawn on the host into the next buffer (once that
 * buffer's last upload is done) and uploaded on the stream, behind the
 * steps queued before; the next launch reads it. */
static amp_status stream_batch(gcp_dev *d, const amp_gcp_batch *b, amp_error *err)
{
    const unsigned N = d->hv->nmodes;
    const uint64_t s = b->snz + b->sz;
    const int k = d->next;
    d->next ^= 1;
    if (s > d->cap)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "GCP: %llu samples, room for %llu",
                        (unsigned long long)s, (unsigned long long)d->cap);
    CUDA_TRY(cudaEventSynchronize(d->ev[k]), err);
    AMP_CHECK(amp_gcp_draw_batch(d->hv, b, d->hrows[k], d->hx[k], err));
    CUDA_TRY(cudaMemcpyAsync(d->drows[k], d->hrows[k], s * N * sizeof(uint64_t),
                             cudaMemcpyHostToDevice, d->s), err);
    CUDA_TRY(cudaMemcpyAsync(d->dx[k], d->hx[k], s * sizeof(double), cudaMemcpyHostToDevice,
                             d->s), err);
    CUDA_TRY(cudaEventRecord(d->ev[k], d->s), err);
    d->srows = d->drows[k];
    d->sx = d->dx[k];
    return AMP_OK;
}

static gcp_args args_of(const gcp_dev *d, int loss, double delta, const amp_gcp_batch *b)
{
    gcp_args a;
    memset(&a, 0, sizeof a);
    a.v = d->v;
    for (unsigned m = 0; m < d->v.nmodes; m++) {
        a.f.A[m] = d->A[m];
        a.f.G[m] = d->G[m];
    }
    a.R = d->R;
    a.loss = loss;
    a.delta = delta;
    if (b)
        a.b = *b;
    a.lazy = d->lazy;
    a.t = d->t;
    a.srows = d->srows;
    a.sx = d->sx;
    return a;
}

static amp_status launched(amp_error *err)
{
    CUDA_TRY(cudaGetLastError(), err);
    return AMP_OK;
}

static amp_status check_bad(gcp_dev *d, amp_error *err)
{
    int bad = 0;
    CUDA_TRY(cudaMemcpyAsync(&bad, d->bad, sizeof bad, cudaMemcpyDeviceToHost, d->s), err);
    CUDA_TRY(cudaStreamSynchronize(d->s), err);
    if (bad)
        return AMP_FAIL(err, AMP_ERR_RANGE, "GCP's sampler drew %d stored cells in a row for "
                        "one zero: the tensor (%llu of %llu cells stored) is too dense for "
                        "stratified sampling; give --samples-grad and --samples-loss with 0 "
                        "zeros", AMP_GCP_ZERO_ATTEMPTS, (unsigned long long)d->v.nnz,
                        (unsigned long long)d->v.cells);
    return AMP_OK;
}

static amp_status grad_launch(gcp_dev *d, int loss, double delta, const amp_gcp_batch *b,
                              amp_error *err)
{
    const uint64_t s = b->snz + b->sz, per = GCP_THREADS / 32;
    uint64_t blocks = (s + per - 1) / per, most = (uint64_t)d->sm_count * 16;
    blocks = blocks < most ? blocks : most;
    gcp_grad<<<(unsigned)(blocks ? blocks : 1), GCP_THREADS, 0, d->s>>>(
        args_of(d, loss, delta, b), d->bad);
    return launched(err);
}

/* One Adam step (t: its count, from 1) of batch b: the gradient, then
 * every entry's update (dense) or the touched rows' (d->lazy). */
static amp_status adam_step(gcp_dev *d, int loss, double delta, const amp_gcp_batch *b,
                            uint64_t t, double step, double lower, amp_error *err)
{
    AMP_CHECK(grad_launch(d, loss, delta, b, err));
    const double b1t = 1 - pow(ADAM_BETA1, (double)t);
    const double b2t = 1 - pow(ADAM_BETA2, (double)t);
    const uint64_t most = (uint64_t)d->sm_count * 16;
    for (unsigned m = 0; m < d->v.nmodes; m++) {
        uint64_t n = d->v.rows[m] * d->R;
        if (d->lazy) {
            const uint64_t s = b->snz + b->sz;
            n = (s < d->v.rows[m] ? s : d->v.rows[m]) * d->R;
        }
        uint64_t blocks = (n + 255) / 256;
        blocks = blocks < most ? blocks : most;
        if (d->lazy)
            gcp_adam_lazy<<<(unsigned)(blocks ? blocks : 1), 256, 0, d->s>>>(
                d->A[m], d->G[m], d->M[m], d->V[m], d->t.slot[m], d->t.list[m], d->t.count + m,
                d->R, step, b1t, b2t, lower);
        else
            gcp_adam<<<(unsigned)(blocks ? blocks : 1), 256, 0, d->s>>>(
                d->A[m], d->G[m], d->M[m], d->V[m], n, step, b1t, b2t, lower);
        AMP_CHECK(launched(err));
    }
    if (d->lazy)
        CUDA_TRY(cudaMemsetAsync(d->t.count, 0, d->v.nmodes * sizeof(unsigned long long), d->s),
                 err);
    return AMP_OK;
}

static amp_status est_run(gcp_dev *d, int loss, double delta, const amp_gcp_batch *b,
                          double *est, double *se, amp_error *err)
{
    const uint64_t s = b->snz + b->sz, nb = (s + GCP_BLOCK - 1) / GCP_BLOCK;
    if (nb * 4 > d->nparts)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "GCP: too few block sums");
    if (nb > 0) {
        gcp_est<<<(unsigned)nb, GCP_THREADS, 0, d->s>>>(args_of(d, loss, delta, b), d->part,
                                                         d->bad);
        AMP_CHECK(launched(err));
        CUDA_TRY(cudaMemcpyAsync(d->hpart, d->part, nb * 4 * sizeof(double),
                                 cudaMemcpyDeviceToHost, d->s), err);
    }
    AMP_CHECK(check_bad(d, err));
    double S1 = 0, Q1 = 0, S0 = 0, Q0 = 0;
    for (uint64_t k = 0; k < nb; k++) {
        const double *p = d->hpart + k * 4;
        S1 += p[0], Q1 += p[1], S0 += p[2], Q0 += p[3];
    }
    *est = b->wnz * S1 + b->wz * S0;
    const double n1 = (double)b->snz, n0 = (double)b->sz;
    const double v1 = b->snz > 1 ? fmax(0, (Q1 - S1 * S1 / n1) / (n1 - 1)) : 0;
    const double v0 = b->sz > 1 ? fmax(0, (Q0 - S0 * S0 / n0) / (n0 - 1)) : 0;
    *se = sqrt(b->wnz * b->wnz * n1 * v1 + b->wz * b->wz * n0 * v0);
    return AMP_OK;
}

static amp_status exact_run(gcp_dev *d, int loss, double delta, int kind, double *out,
                            amp_error *err)
{
    *out = NAN;
    if (kind == AMP_GCP_EXACT_NONE)
        return AMP_OK;
    const int enumerate = kind == AMP_GCP_EXACT_ENUMERATE;
    const uint64_t n = enumerate ? d->v.cells : d->v.nnz;
    const uint64_t nb = (n + GCP_BLOCK - 1) / GCP_BLOCK;
    double *part = NULL, *hp = NULL;
    amp_status rc = AMP_OK;
    double total = 0;
    if (nb > 0) {
        CUDA_TRY_GOTO(cudaMalloc(&part, nb * sizeof(double)), err, rc, done);
        hp = (double *)malloc(nb * sizeof(double));
        if (hp == NULL)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
        gcp_exact<<<(unsigned)nb, GCP_THREADS, 0, d->s>>>(args_of(d, loss, delta, NULL),
                                                           enumerate, n, part);
        AMP_CHECK_GOTO(launched(err), rc, done);
        CUDA_TRY_GOTO(cudaMemcpyAsync(hp, part, nb * sizeof(double), cudaMemcpyDeviceToHost,
                                      d->s), err, rc, done);
        CUDA_TRY_GOTO(cudaStreamSynchronize(d->s), err, rc, done);
        for (uint64_t k = 0; k < nb; k++)
            total += hp[k];
    }
    if (!enumerate) {
        const unsigned R = d->R;
        const int gram = loss == AMP_GCP_GAUSSIAN;
        const unsigned per = gram ? R * R : R;
        double acc[AMP_GPU_MAX_RANK], one[AMP_GPU_MAX_RANK];
        double *big = NULL;
        if (gram) {
            big = (double *)malloc(2 * (size_t)per * sizeof(double));
            if (big == NULL)
                AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
        }
        double *pa = gram ? big : acc, *po = gram ? big + per : one;
        for (unsigned i = 0; i < per; i++)
            pa[i] = 1;
        for (unsigned m = 0; m < d->v.nmodes && rc == AMP_OK; m++) {
            gcp_gram<<<(per + 255) / 256, 256, 0, d->s>>>(d->A[m], d->row_of[m], d->v.rows[m],
                                                          R, gram, d->gram);
            rc = launched(err);
            cudaError_t e = rc == AMP_OK ? cudaMemcpyAsync(po, d->gram, per * sizeof(double),
                                                           cudaMemcpyDeviceToHost, d->s)
                                         : cudaSuccess;
            if (e == cudaSuccess && rc == AMP_OK)
                e = cudaStreamSynchronize(d->s);
            if (e != cudaSuccess)
                rc = CUDA_FAIL(err, e, "the closed form's sums");
            for (unsigned i = 0; rc == AMP_OK && i < per; i++)
                pa[i] *= po[i];
        }
        for (unsigned i = 0; rc == AMP_OK && i < per; i++)
            total += pa[i];
        free(big);
    }
done:
    cudaFree(part);
    free(hp);
    if (rc == AMP_OK)
        *out = total;
    return rc;
}

static amp_status upload_factors(gcp_dev *d, const double *const *A, amp_error *err)
{
    for (unsigned m = 0; m < d->v.nmodes; m++)
        CUDA_TRY(cudaMemcpy(d->A[m], A[m], d->v.rows[m] * d->R * sizeof(double),
                            cudaMemcpyHostToDevice), err);
    /* A copy from pageable memory returns once staged, before its DMA
     * lands, and d->s (non-blocking) does not wait for the legacy stream:
     * without this the first kernel may read part of the old factors. */
    CUDA_TRY(cudaDeviceSynchronize(), err);
    return AMP_OK;
}

/* ---- the pieces, for the tests ----------------------------------------------- */

extern "C" amp_status amp_gpu_gcp_gradient_host(int device, const amp_gcp_view *v,
                                                const double *const *A, unsigned R,
                                                amp_gcp_loss loss, double delta,
                                                const amp_gcp_batch *b, double *const *G,
                                                amp_error *err)
{
    gcp_dev d;
    amp_status rc = dev_init(&d, device, v, R, 0, 4, 1, err);
    if (rc == AMP_OK)
        rc = upload_factors(&d, A, err);
    if (rc == AMP_OK)
        rc = grad_launch(&d, loss, delta, b, err);
    if (rc == AMP_OK)
        rc = check_bad(&d, err);
    for (unsigned m = 0; rc == AMP_OK && m < v->nmodes; m++) {
        cudaError_t e = cudaMemcpy(G[m], d.G[m], v->rows[m] * R * sizeof(double),
                                   cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            rc = CUDA_FAIL(err, e, "the gradient to the host");
    }
    dev_free(&d);
    return rc;
}

extern "C" amp_status amp_gpu_gcp_estimate_host(int device, const amp_gcp_view *v,
                                                const double *const *A, unsigned R,
                                                amp_gcp_loss loss, double delta,
                                                const amp_gcp_batch *b, double *est,
                                                double *se, amp_error *err)
{
    gcp_dev d;
    const uint64_t s = b->snz + b->sz;
    amp_status rc = dev_init(&d, device, v, R, 0, (s + GCP_BLOCK - 1) / GCP_BLOCK * 4 + 4, 1,
                             err);
    if (rc == AMP_OK)
        rc = upload_factors(&d, A, err);
    if (rc == AMP_OK)
        rc = est_run(&d, loss, delta, b, est, se, err);
    dev_free(&d);
    return rc;
}

extern "C" amp_status amp_gpu_gcp_exact_host(int device, const amp_gcp_view *v,
                                             const double *const *A, unsigned R,
                                             amp_gcp_loss loss, double delta, int kind,
                                             double *loss_out, amp_error *err)
{
    gcp_dev d;
    amp_status rc = dev_init(&d, device, v, R, 0, 4, 1, err);
    if (rc == AMP_OK)
        rc = upload_factors(&d, A, err);
    if (rc == AMP_OK)
        rc = exact_run(&d, loss, delta, kind, loss_out, err);
    dev_free(&d);
    return rc;
}

extern "C" amp_status amp_gpu_gcp_steps_host(int device, const amp_gcp_view *v, double *const *A,
                                             double *const *M, double *const *V, unsigned R,
                                             amp_gcp_loss loss, double delta, amp_gcp_adam adam,
                                             const amp_gcp_batch *b, unsigned steps, uint64_t t0,
                                             double rate, double lower, amp_error *err)
{
    gcp_dev d;
    uint64_t cap = 1;
    for (unsigned i = 0; i < steps; i++)
        cap = b[i].snz + b[i].sz > cap ? b[i].snz + b[i].sz : cap;
    amp_status rc = dev_init(&d, device, v, R, 1, 4, 1, err);
    if (rc == AMP_OK && adam == AMP_GCP_ADAM_LAZY)
        rc = dev_lazy(&d, cap, err);
    if (rc == AMP_OK)
        rc = upload_factors(&d, (const double *const *)A, err);
    for (unsigned m = 0; rc == AMP_OK && m < v->nmodes; m++) {
        const size_t bytes = v->rows[m] * R * sizeof(double);
        cudaError_t e = cudaMemcpy(d.M[m], M[m], bytes, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy(d.V[m], V[m], bytes, cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            rc = CUDA_FAIL(err, e, "Adam's moments to the device");
    }
    if (rc == AMP_OK && cudaDeviceSynchronize() != cudaSuccess)
        rc = CUDA_FAIL(err, cudaGetLastError(), "the uploads");
    for (unsigned i = 0; rc == AMP_OK && i < steps; i++)
        rc = adam_step(&d, loss, delta, &b[i], t0 + 1 + i, rate, lower, err);
    if (rc == AMP_OK)
        rc = check_bad(&d, err);
    for (unsigned m = 0; rc == AMP_OK && m < v->nmodes; m++) {
        const size_t bytes = v->rows[m] * R * sizeof(double);
        cudaError_t e = cudaMemcpy(A[m], d.A[m], bytes, cudaMemcpyDeviceToHost);
        if (e == cudaSuccess)
            e = cudaMemcpy(M[m], d.M[m], bytes, cudaMemcpyDeviceToHost);
        if (e == cudaSuccess)
            e = cudaMemcpy(V[m], d.V[m], bytes, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            rc = CUDA_FAIL(err, e, "the factors to the host");
    }
    dev_free(&d);
    return rc;
}

/* ---- the run ------------------------------------------------------------- */

/* dst[m] = src[m] for every mode (device to device, on the stream). */
static amp_status copy_modes(gcp_dev *d, double **dst, double *const *src, amp_error *err)
{
    for (unsigned m = 0; m < d->v.nmodes; m++)
        CUDA_TRY(cudaMemcpyAsync(dst[m], src[m], d->v.rows[m] * d->R * sizeof(double),
                                 cudaMemcpyDeviceToDevice, d->s), err);
    return AMP_OK;
}

static amp_status run_gcp(gcp_dev *d, const amp_gcp_source *src, const amp_gcp_plan *p,
                          const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c,
                          amp_error *err)
{
    const unsigned N = t->nmodes, R = c->rank;
    const amp_gcp_opts *go = &o->gcp;
    const int loss = go->loss;
    const double delta = go->huber_delta;
    AMP_CHECK(amp_gcp_start(&src->view, go->scale_start ? t->norm_sq : -1, R, c->A, err));
    AMP_CHECK(upload_factors(d, (const double *const *)c->A, err));
    AMP_CHECK(copy_modes(d, d->A0, d->A, err));
    const amp_gcp_batch lb = {amp_gcp_step_key(o->seed, 0), p->loss_nz, p->loss_z, p->loss_wnz,
                              p->loss_wz};
    const int streamed = d->hv != NULL;
    double now = amp_now(), f_prev, se;
    if (streamed)
        d->srows = d->lrows, d->sx = d->lx;
    AMP_CHECK(est_run(d, loss, delta, &lb, &f_prev, &se, err));
    c->seconds[AMP_PHASE_FIT] += amp_now() - now;
    c->gcp_loss = f_prev;
    c->gcp_stderr = se;
    c->gcp_exact = NAN;
    c->gcp_fails = 0;
    c->gcp_failed = 0;
    c->iters = 0;
    c->converged = 0;
    c->stopped = 0;
    c->fit = f_prev;
    uint64_t adam_t = 0;
    unsigned fails = 0;
    for (unsigned e = 0; e < o->max_iters; e++) {
        const double t_epoch = amp_now();
        const double step = go->rate * pow(go->decay, fails);
        for (unsigned it = 0; it < go->epoch_iters; it++) {
            const uint64_t id = 1 + (uint64_t)e * go->epoch_iters + it;
            const amp_gcp_batch gb = {amp_gcp_step_key(o->seed, id), p->grad_nz, p->grad_z,
                                      p->grad_wnz, p->grad_wz};
            adam_t++;
            if (streamed)
                AMP_CHECK(stream_batch(d, &gb, err));
            AMP_CHECK(adam_step(d, loss, delta, &gb, adam_t, step, p->lower, err));
        }
        AMP_CHECK(check_bad(d, err));   /* waits for the epoch's steps */
        double t1 = amp_now();
        c->seconds[AMP_PHASE_MTTKRP] += t1 - t_epoch;
        double f;
        if (streamed)
            d->srows = d->lrows, d->sx = d->lx;
        AMP_CHECK(est_run(d, loss, delta, &lb, &f, &se, err));
        AMP_CHECK(exact_run(d, loss, delta, p->exact, &c->gcp_exact, err));
        c->seconds[AMP_PHASE_FIT] += amp_now() - t1;
        const int failed = !(f <= f_prev);
        const double before = f_prev;
        c->gcp_loss = f;
        c->gcp_stderr = se;
        c->gcp_rate = step;
        c->gcp_failed = failed;
        c->iters = e + 1;
        if (failed) {
            fails++;
            AMP_CHECK(copy_modes(d, d->A, d->A0, err));
            AMP_CHECK(copy_modes(d, d->M, d->M0, err));
            AMP_CHECK(copy_modes(d, d->V, d->V0, err));
            adam_t -= go->epoch_iters;
        } else {
            AMP_CHECK(copy_modes(d, d->A0, d->A, err));
            AMP_CHECK(copy_modes(d, d->M0, d->M, err));
            AMP_CHECK(copy_modes(d, d->V0, d->V, err));
            f_prev = f;
        }
        if (amp_gcp_epoch_end(o, c, e, f, before, f_prev, failed, fails, amp_now() - t_epoch))
            break;
    }
    c->fit = f_prev;
    for (unsigned m = 0; m < N; m++)
        CUDA_TRY(cudaMemcpyAsync(c->A[m], d->A[m], c->rows[m] * R * sizeof(double),
                                 cudaMemcpyDeviceToHost, d->s), err);
    CUDA_TRY(cudaStreamSynchronize(d->s), err);
    return amp_gcp_finish(&src->view, R, c->A, c->lambda, err);
}

/* The bytes a resident run holds on the device: the form (16 a nonzero,
 * 8 a row), the factors with their gradient, Adam's moments and the
 * epoch's saved copies (7 R doubles a row). */
static uint64_t resident_bytes(const amp_tensor *t, unsigned R)
{
    uint64_t rows = 0;
    for (unsigned m = 0; m < t->nmodes; m++)
        rows += t->rows[m];
    return 16 * t->nnz + rows * (8 + 56 * (uint64_t)R);
}

extern "C" amp_status amp_gpu_gcp_fits(int device, const amp_tensor *t, unsigned R, int *fits,
                                       amp_error *err)
{
    size_t free_b = 0, total = 0;
    CUDA_TRY(cudaSetDevice(device), err);
    CUDA_TRY(cudaMemGetInfo(&free_b, &total), err);
    /* a tenth kept for the samples' buffers, the lazy tables and the
     * allocator's rounding */
    *fits = resident_bytes(t, R) <= (uint64_t)(0.9 * (double)free_b);
    return AMP_OK;
}

extern "C" amp_status amp_gpu_gcp(int device, const amp_tensor *t, const amp_cpd_opts *o,
                                  int stream, amp_cpd *c, amp_error *err)
{
    if (c->rank != o->rank)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have rank %u, not %u", c->rank, o->rank);
    AMP_CHECK(amp_rank_check(o->rank, AMP_GPU_MAX_RANK, "GCP on the GPU", err));
    if (o->gcp.epoch_iters == 0)
        return AMP_FAIL(err, AMP_ERR_USAGE, "GCP needs at least one step an epoch");
    memset(c->seconds, 0, sizeof c->seconds);
    amp_gcp_source src;
    AMP_CHECK(amp_gcp_source_build(t, o->threads, &src, err));
    amp_gcp_plan p;
    gcp_dev d;
    memset(&d, 0, sizeof d);
    amp_status rc = amp_gcp_resolve(&o->gcp, &src.view, &p, err);
    for (uint64_t k = 0; rc == AMP_OK && k < src.view.nnz; k++) {
        const char *what;
        if (!amp_gcp_value_ok(o->gcp.loss, src.view.val[k], &what))
            rc = AMP_FAIL(err, AMP_ERR_RANGE, "--loss %s models %s data, and the tensor holds "
                          "the value %.17g", amp_gcp_loss_names[o->gcp.loss], what,
                          src.view.val[k]);
    }
    if (rc == AMP_OK) {
        const uint64_t g = p.grad_nz + p.grad_z, l = p.loss_nz + p.loss_z;
        const uint64_t cap = g > l ? g : l;
        double t0 = amp_now();
        rc = dev_init(&d, device, &src.view, c->rank, 1, (cap + GCP_BLOCK - 1) / GCP_BLOCK * 4 + 4,
                      !stream || p.exact != AMP_GCP_EXACT_NONE, err);
        if (rc == AMP_OK && o->gcp.adam == AMP_GCP_ADAM_LAZY)
            rc = dev_lazy(&d, g, err);
        if (rc == AMP_OK && stream) {
            const amp_gcp_batch lb = {amp_gcp_step_key(o->seed, 0), p.loss_nz, p.loss_z,
                                      p.loss_wnz, p.loss_wz};
            rc = dev_stream(&d, &src.view, g, &lb, err);
        }
        c->seconds[AMP_PHASE_UPDATE] += amp_now() - t0;
    }
    if (rc == AMP_OK)
        rc = run_gcp(&d, &src, &p, t, o, c, err);
    dev_free(&d);
    amp_gcp_source_free(&src);
    return rc;
}
