/* GCP, generalized CP (Hong, Kolda and Duersch, SIAM Review 2020), fitted
 * by stochastic gradients (Kolda and Hong, SIMODS 2020): what both
 * backends share. The losses and their derivatives in the model's value,
 * the counter-based random draws, and the stratified sampler over the
 * tensor in GCP's own form (amp_gcp_source), as inline functions that
 * nvcc compiles for the device too, so that the CPU (run/cpu/gcp.c) and
 * the GPU (run/cuda/gcp.cu) draw the same cells from the same seed.
 *
 * The model is M = sum_r a_r(1) o ... o a_r(N), lambda = 1 (the factors
 * carry the scale, as pyttb's gcp_opt). The loss of the whole tensor is
 * F = sum over every cell of f(x, m): x the stored value, 0 for an
 * absent cell. The cells are those of the nonempty slices, prod(rows)
 * of them: a slice with no nonzero has no factor row (amped-prep drops
 * it; its rows are written as zeros).
 *
 * Stratified sampling: s_nz nonzeros drawn uniformly (with replacement)
 * from the nnz stored entries, each weighted nnz / s_nz, and s_z absent
 * cells drawn uniformly (with replacement) by rejection, each weighted
 * (cells - nnz) / s_z; sum_j w_j f(x_j, m_j) is then an unbiased estimate
 * of F, and the gradient of the same sum an unbiased estimate of F's.
 *
 * Every draw is a function of (seed, step, sample index, lane) alone
 * (amp_gcp_draw): no generator state, so any thread or GPU thread draws
 * any sample; and cells are drawn by their ordinals, a nonzero by its
 * rank in the ascending order of the original coordinates, an absent
 * cell by its ordinal index in each mode among that mode's nonempty
 * indices (ascending in the original index), so the draws do not depend
 * on how amped-prep laid the file out (shards, chunks). Nothing here
 * prints or exits. */
#ifndef AMP_GCP_H
#define AMP_GCP_H

#include <math.h>
#include <stdint.h>

#include "amp_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define AMP_GCP_HD static __host__ __device__ __forceinline__
#else
#define AMP_GCP_HD static inline
#endif

/* pyttb's EPS (pyttb/gcp/handles.py): added to the model's value where
 * a loss divides by it or takes its logarithm. */
#define AMP_GCP_EPS 1e-10

/* ---- the losses ----------------------------------------------------------- */

/* f(x, m) and df/dm, as pyttb's gcp handles define them:
 *   gaussian         (x - m)^2                         2 (m - x)
 *   poisson          m - x log(m + eps)                1 - x / (m + eps)
 *   poisson-log      exp(m) - x m                      exp(m) - x
 *   bernoulli-logit  log(1 + exp(m)) - x m             exp(m) / (1 + exp(m)) - x
 *   bernoulli-odds   log(m + 1) - x log(m + eps)       1 / (m + 1) - x / (m + eps)
 *   gamma            x / (m + eps) + log(m + eps)      -x / (m + eps)^2 + 1 / (m + eps)
 *   rayleigh         2 log(m + eps) + (pi/4) (x / (m + eps))^2
 *                                                      2 / (m + eps) - (pi/2) x^2 / (m + eps)^3
 *   huber (delta)    d^2 where |d| < delta, else 2 delta |d| - delta^2, d = x - m
 *                                                      -2 d, else -2 delta sign(d)
 * bernoulli-logit is computed as max(m, 0) + log1p(exp(-|m|)) - x m and
 * its derivative as 1 / (1 + exp(-m)): the same functions, without
 * pyttb's overflow above m = 709. delta: huber's only. */
AMP_GCP_HD double amp_gcp_f(int loss, double x, double m, double delta)
{
    const double eps = AMP_GCP_EPS;
    switch (loss) {
    case AMP_GCP_GAUSSIAN:
        return (x - m) * (x - m);
    case AMP_GCP_POISSON:
        return m - x * log(m + eps);
    case AMP_GCP_POISSON_LOG:
        return exp(m) - x * m;
    case AMP_GCP_BERNOULLI_LOGIT:
        return (m > 0 ? m : 0) + log1p(exp(-fabs(m))) - x * m;
    case AMP_GCP_BERNOULLI_ODDS:
        return log(m + 1) - x * log(m + eps);
    case AMP_GCP_GAMMA:
        return x / (m + eps) + log(m + eps);
    case AMP_GCP_RAYLEIGH: {
        const double q = x / (m + eps);
        return 2 * log(m + eps) + (M_PI / 4) * q * q;
    }
    case AMP_GCP_HUBER: {
        const double d = fabs(x - m);
        return d < delta ? d * d : 2 * delta * d - delta * delta;
    }
    }
    return NAN;
}

AMP_GCP_HD double amp_gcp_df(int loss, double x, double m, double delta)
{
    const double eps = AMP_GCP_EPS;
    switch (loss) {
    case AMP_GCP_GAUSSIAN:
        return 2 * (m - x);
    case AMP_GCP_POISSON:
        return 1 - x / (m + eps);
    case AMP_GCP_POISSON_LOG:
        return exp(m) - x;
    case AMP_GCP_BERNOULLI_LOGIT:
        return 1 / (1 + exp(-m)) - x;
    case AMP_GCP_BERNOULLI_ODDS:
        return 1 / (m + 1) - x / (m + eps);
    case AMP_GCP_GAMMA:
        return -x / ((m + eps) * (m + eps)) + 1 / (m + eps);
    case AMP_GCP_RAYLEIGH: {
        const double me = m + eps;
        return 2 / me - (M_PI / 2) * x * x / (me * me * me);
    }
    case AMP_GCP_HUBER: {
        const double d = x - m;
        if (fabs(d) < delta)
            return -2 * d;
        return d > 0 ? -2 * delta : d < 0 ? 2 * delta : 0;
    }
    }
    return NAN;
}

/* The factors' lower bound for a loss: 0 where the loss is defined for a
 * non-negative model only (poisson, bernoulli-odds, gamma, rayleigh),
 * else -infinity. Every Adam step ends with the projection onto it. */
AMP_GCP_HD double amp_gcp_lower_bound(int loss)
{
    switch (loss) {
    case AMP_GCP_POISSON:
    case AMP_GCP_BERNOULLI_ODDS:
    case AMP_GCP_GAMMA:
    case AMP_GCP_RAYLEIGH:
        return 0;
    }
    return -INFINITY;
}

/* "gaussian", "poisson", "poisson-log", "bernoulli-logit",
 * "bernoulli-odds", "gamma", "rayleigh", "huber"; NULL-terminated. */
extern const char *const amp_gcp_loss_names[AMP_GCP_NLOSSES + 1];

/* Whether x is a value the loss models: any for gaussian and huber; 0 or
 * 1 for the Bernoulli losses; a non-negative integer for the Poisson
 * ones; non-negative for gamma and rayleigh. what: the data it needs,
 * for a message ("binary (0 or 1)", ...). */
int amp_gcp_value_ok(amp_gcp_loss loss, double x, const char **what);

/* ---- counter-based draws ------------------------------------------------ */

/* SplitMix64's finalizer: a bijection of 64 bits whose outputs pass
 * BigCrush when fed a counter. */
AMP_GCP_HD uint64_t amp_gcp_mix(uint64_t z)
{
    z += UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* The key of one step's draws. Step 0 is the fixed sample of the loss
 * estimate; gradient step i of epoch e (both from 0, failed epochs
 * counted) is 1 + e * epoch_iters + i. */
AMP_GCP_HD uint64_t amp_gcp_step_key(uint64_t seed, uint64_t step)
{
    return amp_gcp_mix(amp_gcp_mix(seed ^ UINT64_C(0x6763702d73656564)) ^ step);
}

/* Draw `lane` of sample `index` under a step's key. */
AMP_GCP_HD uint64_t amp_gcp_draw(uint64_t key, uint64_t index, uint64_t lane)
{
    return amp_gcp_mix(amp_gcp_mix(key ^ index) + lane);
}

/* floor(r n / 2^64): r's share of [0, n) (a bias of n / 2^64 at most). */
AMP_GCP_HD uint64_t amp_gcp_below(uint64_t r, uint64_t n)
{
#ifdef __CUDA_ARCH__
    return __umul64hi(r, n);
#else
    return (uint64_t)(((unsigned __int128)r * n) >> 64);
#endif
}

/* ---- the tensor in GCP's form --------------------------------------------- */

/* Each nonzero as its key, the mixed-radix number of its ordinals
 * (o_0 rows_1 + o_1) rows_2 + ..., ascending, so a binary search tells
 * whether a cell is stored; values in f64 beside; per mode, the compact
 * row of each ordinal. A view: plain pointers (host or device). */
typedef struct amp_gcp_view {
    unsigned nmodes;
    uint64_t nnz;
    uint64_t cells;                              /* prod(rows): below 2^64 */
    uint64_t rows[AMP_MAX_MODES];
    const uint64_t *key;                         /* nnz, ascending */
    const double *val;                           /* nnz */
    const uint64_t *row_of[AMP_MAX_MODES];       /* rows[m] each */
} amp_gcp_view;

/* An absent cell is looked for in this many draws at most: a tensor in
 * which so many draws find only stored cells is too dense for the
 * stratified sampler (a cell is stored with probability nnz / cells, so
 * that takes nnz / cells near 1). */
#define AMP_GCP_ZERO_ATTEMPTS 1000

/* Whether the cell with this key is stored. */
AMP_GCP_HD int amp_gcp_stored(const amp_gcp_view *v, uint64_t key)
{
    uint64_t lo = 0, hi = v->nnz;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (v->key[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->nnz && v->key[lo] == key;
}

/* The compact rows of the cell with this key. */
AMP_GCP_HD void amp_gcp_rows_of(const amp_gcp_view *v, uint64_t key, uint64_t *rows)
{
    for (unsigned m = v->nmodes; m-- > 0;) {
        const uint64_t o = key % v->rows[m];
        key /= v->rows[m];
        rows[m] = v->row_of[m][o];
    }
}

/* Sample j of the stratified sample drawn under key (amp_gcp_step_key)
 * with snz nonzeros first: its compact rows and value. 0, or 1 where j is
 * a zero and AMP_GCP_ZERO_ATTEMPTS draws found only stored cells. */
AMP_GCP_HD int amp_gcp_sample(const amp_gcp_view *v, uint64_t key, uint64_t j, uint64_t snz,
                              uint64_t *rows, double *x)
{
    if (j < snz) {
        const uint64_t k = amp_gcp_below(amp_gcp_draw(key, j, 0), v->nnz);
        amp_gcp_rows_of(v, v->key[k], rows);
        *x = v->val[k];
        return 0;
    }
    for (uint64_t a = 0; a < AMP_GCP_ZERO_ATTEMPTS; a++) {
        uint64_t cell = 0;
        for (unsigned m = 0; m < v->nmodes; m++) {
            const uint64_t o =
                amp_gcp_below(amp_gcp_draw(key, j, 1 + a * AMP_MAX_MODES + m), v->rows[m]);
            cell = cell * v->rows[m] + o;
            rows[m] = v->row_of[m][o];
        }
        if (!amp_gcp_stored(v, cell)) {
            *x = 0;
            return 0;
        }
    }
    return 1;
}

/* One stratified sample: its step's key, its strata's sizes (nonzeros
 * first) and weights. */
typedef struct amp_gcp_batch {
    uint64_t key;
    uint64_t snz, sz;
    double wnz, wz;
} amp_gcp_batch;

/* Every sample of batch b (v in host memory), on the process's OpenMP
 * threads: sample j's compact rows at rows + j N, its value at x[j].
 * AMP_ERR_RANGE where a zero found no absent cell (amp_gcp_sample). The
 * CPU backend draws its batches so, and a GPU run streaming its samples
 * (--memory stream) draws them so on the host: the same cells. */
amp_status amp_gcp_draw_batch(const amp_gcp_view *v, const amp_gcp_batch *b, uint64_t *rows,
                              double *x, amp_error *err);

/* The host's copy of the tensor in GCP's form (amp_gcp_view's arrays). */
typedef struct amp_gcp_source {
    amp_gcp_view view;
    uint64_t *key;
    double *val;
    uint64_t *row_of[AMP_MAX_MODES];
    uint64_t bytes;                              /* held */
} amp_gcp_source;

/* t's nonzeros (in host memory, copy 0) in GCP's form, sorted by key on
 * `threads` threads (0: OpenMP default). AMP_ERR_UNSUPPORTED where the
 * cells number 2^64 or more (their keys would not fit). */
amp_status amp_gcp_source_build(const amp_tensor *t, int threads, amp_gcp_source *s,
                                amp_error *err);
void amp_gcp_source_free(amp_gcp_source *s);

/* ---- the run's settings ------------------------------------------------- */

/* The sample sizes a run takes: o's where given, else pyttb's defaults
 * (GCPSampler, stratified): per gradient step g = max(1000, ceil(3 nnz /
 * 1000)) nonzeros, min(g, nnz) of them, and min(g, nnz, zeros) zeros;
 * for the loss estimate f = max(ceil(nnz / 100), 100000), min(f, nnz)
 * nonzeros and min(f, nnz, zeros) zeros. AMP_ERR_USAGE where a stratum
 * asks for samples that cannot be drawn (nonzeros of a tensor without
 * any; zeros of one without an absent cell), or neither stratum has any. */
typedef struct amp_gcp_plan {
    uint64_t grad_nz, grad_z, loss_nz, loss_z;
    double grad_wnz, grad_wz, loss_wnz, loss_wz;   /* each stratum's weight */
    double lower;                                  /* amp_gcp_lower_bound */
    int exact;                                     /* amp_gcp_exact_kind */
} amp_gcp_plan;
amp_status amp_gcp_resolve(const amp_gcp_opts *o, const amp_gcp_view *v, amp_gcp_plan *p,
                           amp_error *err);

/* The exact loss is computed after each epoch where it is cheap: over
 * every cell where there are at most AMP_GCP_EXACT_CELLS of them; for
 * gaussian and poisson, whose sum over the absent cells has a closed form
 * (|M|^2 and sum(M) from the factors, less the stored cells' share), where
 * there are at most AMP_GCP_EXACT_NNZ nonzeros. */
#define AMP_GCP_EXACT_CELLS (UINT64_C(1) << 24)
#define AMP_GCP_EXACT_NNZ (UINT64_C(1) << 24)
enum { AMP_GCP_EXACT_NONE = 0, AMP_GCP_EXACT_ENUMERATE, AMP_GCP_EXACT_CLOSED };
int amp_gcp_exact_kind(amp_gcp_loss loss, const amp_gcp_view *v);

/* The starting factors as pyttb's gcp_opt makes them from random ones:
 * scaled so that |M| = |X| (norm_sq: |X|^2; skipped where either is 0),
 * then each column's norm spread evenly over the modes (ktensor
 * normalize("all")). For --init factors, norm_sq < 0: the spreading
 * alone. Sums in ordinal order (v) within fixed blocks of ordinals, so
 * the same bits for any layout and thread count. */
amp_status amp_gcp_start(const amp_gcp_view *v, double norm_sq, unsigned R, double *const *A,
                         amp_error *err);

/* The model's factors as amped-run writes every method's: columns of
 * unit 2-norm, the norms in lambda (the model unchanged). */
amp_status amp_gcp_finish(const amp_gcp_view *v, unsigned R, double *const *A, double *lambda,
                          amp_error *err);

/* The end of epoch e, the same on every backend: c's fails and fit (the
 * last good estimate f_prev), o->on_iter with this epoch's estimate f
 * against the one before it, then whether the run stops (the stop flag,
 * one failed epoch more than allowed, or the relative decrease below
 * o->tol after a good epoch; c->stopped or c->converged set). */
int amp_gcp_epoch_end(const amp_cpd_opts *o, amp_cpd *c, unsigned e, double f, double before,
                      double f_prev, int failed, unsigned fails, double seconds);

#ifdef __cplusplus
}
#endif
#endif
