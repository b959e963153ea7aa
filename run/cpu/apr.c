/* Poisson CP by alternating Poisson regression, multiplicative updates
 * (Chi and Kolda 2012, Algorithm 3; the Tensor Toolbox's and pyttb's
 * cp_apr(algorithm="mu")) on the CPU: the reference of the GPU kernels.
 *
 * The factors are kept with columns of unit 1-norm and the weights in
 * lambda. Per outer iteration and mode n: where a factor entry is below
 * kappa_tol and its last Phi is above 1 (the KKT conditions say it should
 * grow) it is shifted up by kappa (the inactive-entry fix: an entry at 0
 * could never grow again); with the pyttb rule, wherever Phi is positive,
 * as pyttb's cp_apr does, so that runs compare with it iteration by
 * iteration (amp_apr_opts.shift_rule). B
 * = A_n diag(lambda); then inner iterations: per nonzero k of row i, the
 * other modes' rows gathered into pi_k (their Hadamard product), the
 * model's value m_k = B_i . pi_k, and Phi_i += x_k / max(m_k, eps) pi_k.
 * The KKT violation max |min(B, 1 - Phi)| over the mode stops them below
 * tol; else B = B .* Phi. Then lambda = the column sums of B, A_n = B /
 * lambda. The run stops when no mode needed an update (every mode met the
 * tolerance at its first inner iteration).
 *
 * Rows are independent within a mode, and the other modes' rows do not
 * change in it, so a row runs all its inner iterations at once (row_inner):
 * its pi gathered once into a thread's scratch, each iteration then one
 * pass over that scratch, with no gather. The mode-wide stop is decided
 * after, from each iteration's largest violation over the rows, and a stop
 * before the last iteration undone from a copy of B (apr_run). Per nonzero
 * and mode: one gather of N - 1 factor rows and 8 (word) + 4 or 8 (value)
 * bytes; per inner iteration R doubles of scratch read and about 4 R
 * FLOPs. Threads take rows (dynamic chunks; no atomics), and every sum
 * over rows runs over fixed blocks in a fixed order: the same bits for any
 * thread count.
 *
 * The log-likelihood after each outer iteration, sum x log m - sum of the
 * model's entries (= sum lambda, the factors' columns summing to 1), as
 * pyttb's tt_loglikelihood (the log x! term left out), comes from the
 * last mode's rows as their last pass leaves them (the rows of pi are
 * there), or where that pass does not end the mode, one more pass over
 * the last mode's copy. */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_cpu.h"
#include "amp_threads.h"
#include "amp_timer.h"

/* Rows per block of the sums over rows (column sums, log-likelihood,
 * KKT): fixed, so the sums do not depend on the thread count. */
#define SUM_BLOCK 4096

/* How many nonzeros ahead a row's gather asks for the other modes' rows:
 * they are read at random, and the loads of one nonzero alone do not keep
 * enough of them in flight (4, 8 and 16 measured: bench/RESULTS.md). */
#define PREFETCH_AHEAD 16

amp_status amp_cpu_row_starts(const amp_copy *c, unsigned d, uint64_t rows, uint64_t **out,
                              amp_error *err)
{
    uint64_t *p = amp_calloc(rows + 1, sizeof *p, "a row table", err);
    if (p == NULL)
        return err->status;
    const amp_mode_layout *l = &c->layout;
    const unsigned sh = l->shift[d], wd = l->width[d];
    const uint64_t mask = wd >= 64 ? UINT64_MAX : (UINT64_C(1) << wd) - 1;
    const int keyed = l->key_bits > 0;
    for (uint64_t r = 0; r <= rows; r++)
        p[r] = c->nnz;
    size_t blk = 0;
    uint64_t prev = UINT64_MAX;
    for (uint64_t k = 0; k < c->nnz; k++) {
        if (keyed)
            while (c->block_start[blk + 1] <= k)
                blk++;
        uint64_t row = keyed ? amp_blco_field(c->block_key[blk], c->words[k], sh, wd)
                             : (c->words[k] >> sh) & mask;
        if (row != prev) {
            if (row >= rows || (prev != UINT64_MAX && row < prev)) {
                amp_free(p);
                return AMP_FAIL(err, AMP_ERR_INTERNAL, "mode %u's copy is not ordered by its "
                                "rows at nonzero %llu", d + 1, (unsigned long long)k);
            }
            for (uint64_t r = prev == UINT64_MAX ? 0 : prev + 1; r <= row; r++)
                p[r] = k;
            prev = row;
        }
    }
    *out = p;
    return AMP_OK;
}

/* What one pass over a row needs. */
typedef struct apr_mode {
    const amp_copy *c;
    unsigned d, N, R, nother;
    unsigned sh[AMP_MAX_MODES], wd[AMP_MAX_MODES];
    uint64_t mask[AMP_MAX_MODES];
    const double *F[AMP_MAX_MODES];   /* the other modes' factors */
    const uint64_t *start;            /* row_starts */
    int vf32;
} apr_mode;

static void mode_init(apr_mode *am, const amp_tensor *t, const amp_cpd *c, unsigned d,
                      const uint64_t *start)
{
    const amp_copy *cp = &t->copies[d];
    memset(am, 0, sizeof *am);
    am->c = cp;
    am->d = d;
    am->N = t->nmodes;
    am->R = c->rank;
    am->start = start;
    am->vf32 = t->value_type == AMP_VALUES_F32;
    for (unsigned m = 0; m < t->nmodes; m++) {
        if (m == d)
            continue;
        unsigned j = am->nother++;
        am->sh[j] = cp->layout.shift[m];
        am->wd[j] = cp->layout.width[m];
        am->mask[j] = am->wd[j] >= 64 ? UINT64_MAX : (UINT64_C(1) << am->wd[j]) - 1;
        am->F[j] = c->A[m];
    }
}

/* The block of nonzero k in a keyed copy, from a block at or before it. */
static size_t block_of(const amp_copy *c, uint64_t k, size_t from)
{
    size_t lo = from, hi = c->nblocks - 1;
    while (lo < hi) {   /* the last block whose start is <= k */
        size_t mid = lo + (hi - lo + 1) / 2;
        if (c->block_start[mid] <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The Hadamard product of the other modes' rows at nonzero k: the one row
 * itself where there is one other mode, else into pi (the first two
 * multiplied as they are read: a copy into pi first would make every load
 * of pi wait on the copy's wider stores). */
static inline __attribute__((always_inline)) const double *gather_pi(
    const apr_mode *am, uint64_t k, size_t blk, double *restrict pi)
{
    const unsigned R = am->R;
    const uint64_t w = am->c->words[k];
    const int keyed = am->c->layout.key_bits > 0;
    const uint64_t key = keyed ? am->c->block_key[blk] : 0;
    const double *row[AMP_MAX_MODES];
    if (am->nother == 0) {   /* a tensor of one mode: the product of none */
        for (unsigned r = 0; r < R; r++)
            pi[r] = 1;
        return pi;
    }
    for (unsigned j = 0; j < am->nother; j++) {
        uint64_t i = keyed ? amp_blco_field(key, w, am->sh[j], am->wd[j])
                           : (w >> am->sh[j]) & am->mask[j];
        row[j] = am->F[j] + i * R;
    }
    if (am->nother == 1)
        return row[0];
    const double *restrict r0 = row[0], *restrict r1 = row[1];
#pragma omp simd
    for (unsigned r = 0; r < R; r++)
        pi[r] = r0[r] * r1[r];
    for (unsigned j = 2; j < am->nother; j++) {
        const double *restrict rj = row[j];
#pragma omp simd
        for (unsigned r = 0; r < R; r++)
            pi[r] *= rj[r];
    }
    return pi;
}

static inline double value_at(const apr_mode *am, uint64_t k)
{
    return am->vf32 ? (double)((const float *)am->c->vals)[k]
                    : ((const double *)am->c->vals)[k];
}

/* Three modes, unkeyed (most tensors): the two rows read where they lie,
 * no product stored, the model's value and Phi's sum in two sweeps. */
static inline __attribute__((always_inline)) void phi_three(
    const apr_mode *am, uint64_t a, uint64_t b, const double *restrict Bi, double eps,
    double *restrict phi)
{
    const unsigned R = am->R;
    const uint64_t *restrict words = am->c->words;
    const double *restrict F0 = am->F[0], *restrict F1 = am->F[1];
    const unsigned s0 = am->sh[0], s1 = am->sh[1];
    const uint64_t m0 = am->mask[0], m1 = am->mask[1];
    uint64_t k = a;
    for (; k < b; k++) {
        const uint64_t w = words[k];
        const double *restrict r0 = F0 + ((w >> s0) & m0) * R;
        const double *restrict r1 = F1 + ((w >> s1) & m1) * R;
        double m = 0;
#pragma omp simd reduction(+ : m)
        for (unsigned r = 0; r < R; r++)
            m += Bi[r] * (r0[r] * r1[r]);
        const double x = value_at(am, k) / (m > eps ? m : eps);
#pragma omp simd
        for (unsigned r = 0; r < R; r++)
            phi[r] += x * (r0[r] * r1[r]);
    }
}

/* Row i's Phi (R values) from B_i, and the row's KKT violation
 * max |min(B, 1 - Phi)|. The CPU's widest vectors where it has them. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("default", "avx2")))
#endif
static double row_phi(const apr_mode *am, uint64_t i, const double *restrict Bi, double eps,
                      double *restrict phi, double *restrict pi)
{
    const unsigned R = am->R;
    const uint64_t a = am->start[i], b = am->start[i + 1];
    for (unsigned r = 0; r < R; r++)
        phi[r] = 0;
    size_t blk = am->c->layout.key_bits > 0 ? block_of(am->c, a, 0) : 0;
    if (am->nother == 2 && am->c->layout.key_bits == 0)
        phi_three(am, a, b, Bi, eps, phi);
    else
    for (uint64_t k = a; k < b; k++) {
        if (am->c->layout.key_bits > 0)
            while (am->c->block_start[blk + 1] <= k)
                blk++;
        const double *restrict p = gather_pi(am, k, blk, pi);
        double m = 0;
#pragma omp simd reduction(+ : m)
        for (unsigned r = 0; r < R; r++)
            m += Bi[r] * p[r];
        const double w = value_at(am, k) / (m > eps ? m : eps);
#pragma omp simd
        for (unsigned r = 0; r < R; r++)
            phi[r] += w * p[r];
    }
    double kkt = 0;
    for (unsigned r = 0; r < R; r++) {
        double d = 1 - phi[r], v = fabs(Bi[r] < d ? Bi[r] : d);
        kkt = v > kkt ? v : kkt;
    }
    return kkt;
}

/* The dot of b and p (R entries) in four lanes added pairwise: an order
 * fixed by the source, which the compiler keeps in one vector. */
static inline __attribute__((always_inline)) double dot_lanes(const double *restrict b,
                                                              const double *restrict p,
                                                              unsigned R)
{
    double l0 = 0, l1 = 0, l2 = 0, l3 = 0;
    unsigned r = 0;
    for (; r + 4 <= R; r += 4) {
        l0 += b[r] * p[r];
        l1 += b[r + 1] * p[r + 1];
        l2 += b[r + 2] * p[r + 2];
        l3 += b[r + 3] * p[r + 3];
    }
    for (; r < R; r++)
        l0 += b[r] * p[r];
    return (l0 + l1) + (l2 + l3);
}

/* Row i's Phi from its rows of pi, stored one after another in P, and its
 * n values in x, summed in f (F entries: R, or where R is a constant, an
 * array of that size, which then stays in registers); the KKT violation
 * returned. Four nonzeros at a time: their four dots are independent, so
 * they overlap, and their four divisions can share one instruction; Phi
 * still takes them in order. */
static inline __attribute__((always_inline)) double phi_stored(
    const double *restrict P, const double *restrict x, uint64_t n, const double *restrict Bi,
    double eps, double *restrict phi, double *restrict f, unsigned R)
{
    for (unsigned r = 0; r < R; r++)
        f[r] = 0;
    uint64_t k = 0;
    for (; k + 4 <= n; k += 4) {
        const double *restrict p0 = P + k * R, *restrict p1 = p0 + R, *restrict p2 = p1 + R,
                     *restrict p3 = p2 + R;
        double m[4] = {dot_lanes(Bi, p0, R), dot_lanes(Bi, p1, R), dot_lanes(Bi, p2, R),
                       dot_lanes(Bi, p3, R)};
        double w[4];
        for (unsigned q = 0; q < 4; q++)
            w[q] = x[k + q] / (m[q] > eps ? m[q] : eps);
        for (unsigned r = 0; r < R; r++)
            f[r] += w[0] * p0[r];
        for (unsigned r = 0; r < R; r++)
            f[r] += w[1] * p1[r];
        for (unsigned r = 0; r < R; r++)
            f[r] += w[2] * p2[r];
        for (unsigned r = 0; r < R; r++)
            f[r] += w[3] * p3[r];
    }
    for (; k < n; k++) {
        const double *restrict p = P + k * R;
        const double mk = dot_lanes(Bi, p, R), w = x[k] / (mk > eps ? mk : eps);
        for (unsigned r = 0; r < R; r++)
            f[r] += w * p[r];
    }
    double kkt = 0;
    for (unsigned r = 0; r < R; r++) {
        phi[r] = f[r];
        double d = 1 - f[r], v = fabs(Bi[r] < d ? Bi[r] : d);
        kkt = v > kkt ? v : kkt;
    }
    return kkt;
}

/* phi_stored for R = 4 nv (nv a constant up to 8), in vectors of 4 that
 * stay in registers: B_i's and Phi's across the row, every sum in
 * phi_stored's order (the dot's four lanes are its l0 .. l3), so the same
 * bits. */
typedef double amp_v4d __attribute__((vector_size(32)));
typedef double amp_v4du __attribute__((vector_size(32), aligned(8)));

static inline __attribute__((always_inline)) double vdot(const amp_v4d *b, const double *p,
                                                         unsigned nv)
{
    amp_v4d acc = b[0] * *(const amp_v4du *)p;
#pragma GCC unroll 8
    for (unsigned v = 1; v < nv; v++)
        acc += b[v] * *(const amp_v4du *)(p + 4 * v);
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static inline __attribute__((always_inline)) void iters_vec(
    const double *restrict P, const double *restrict x, uint64_t n, double *restrict Bi,
    double eps, unsigned first, unsigned last, int update_last, double *restrict phi,
    double *restrict kmax, unsigned nv)
{
    const unsigned R = 4 * nv;
    amp_v4d b[8], f[8];
#pragma GCC unroll 8
    for (unsigned v = 0; v < nv; v++)
        b[v] = *(const amp_v4du *)(Bi + 4 * v);
    for (unsigned j = first; j <= last; j++) {
#pragma GCC unroll 8
        for (unsigned v = 0; v < nv; v++)
            f[v] = (amp_v4d){0, 0, 0, 0};
        uint64_t k = 0;
        for (; k + 4 <= n; k += 4) {
            const double *p0 = P + k * R, *p1 = p0 + R, *p2 = p1 + R, *p3 = p2 + R;
            double m[4] = {vdot(b, p0, nv), vdot(b, p1, nv), vdot(b, p2, nv),
                           vdot(b, p3, nv)};
            double w[4];
            for (unsigned q = 0; q < 4; q++)
                w[q] = x[k + q] / (m[q] > eps ? m[q] : eps);
            /* Each f[v] takes the four nonzeros in order: the bits of one at a time. */
#pragma GCC unroll 8
            for (unsigned v = 0; v < nv; v++) {
                f[v] += w[0] * *(const amp_v4du *)(p0 + 4 * v);
                f[v] += w[1] * *(const amp_v4du *)(p1 + 4 * v);
                f[v] += w[2] * *(const amp_v4du *)(p2 + 4 * v);
                f[v] += w[3] * *(const amp_v4du *)(p3 + 4 * v);
            }
        }
        for (; k < n; k++) {
            const double *p = P + k * R;
            const double mk = vdot(b, p, nv), w = x[k] / (mk > eps ? mk : eps);
#pragma GCC unroll 8
            for (unsigned v = 0; v < nv; v++)
                f[v] += w * *(const amp_v4du *)(p + 4 * v);
        }
        double kkt = 0;
#pragma GCC unroll 8
        for (unsigned v = 0; v < nv; v++)
            for (unsigned q = 0; q < 4; q++) {
                const double d = 1 - f[v][q], e = fabs(b[v][q] < d ? b[v][q] : d);
                kkt = e > kkt ? e : kkt;
            }
        kmax[j] = kkt > kmax[j] ? kkt : kmax[j];
        if (j < last || update_last)
#pragma GCC unroll 8
            for (unsigned v = 0; v < nv; v++)
                b[v] *= f[v];
    }
#pragma GCC unroll 8
    for (unsigned v = 0; v < nv; v++) {
        *(amp_v4du *)(phi + 4 * v) = f[v];
        *(amp_v4du *)(Bi + 4 * v) = b[v];
    }
}

#define ITERS_VEC(NV)                                                                        \
    case NV:                                                                                 \
        iters_vec(P, x, n, Bi, eps, first, last, update_last, phi, kmax, NV);                \
        return 1;

/* Row i's inner iterations from its stored pi in vectors, where R allows
 * (a multiple of 4 up to 32): 1; else 0, for phi_stored's loop. B_i and
 * Phi stay in registers across the row's iterations; every sum is
 * phi_stored's, in its order, so the same bits. */
static inline __attribute__((always_inline)) int iters_stored(
    const double *restrict P, const double *restrict x, uint64_t n, double *restrict Bi,
    double eps, unsigned first, unsigned last, int update_last, double *restrict phi,
    double *restrict kmax, unsigned R)
{
    if (R % 4 == 0)
        switch (R / 4) {
            ITERS_VEC(1)
            ITERS_VEC(2)
            ITERS_VEC(3)
            ITERS_VEC(4)
            ITERS_VEC(5)
            ITERS_VEC(6)
            ITERS_VEC(7)
            ITERS_VEC(8)
        default:
            break;
        }
    return 0;
}

/* Row i's inner iterations first .. last (from 1) on B_i, one row at a
 * time (and where ll is not NULL, the row's part of the log-likelihood
 * from B_i as the last leaves it, into *ll: the last mode's pass has the
 * rows of pi that it needs): a row's update needs only its own nonzeros and the other modes'
 * rows, which do not change within the mode, so its pi are gathered once
 * into P (when it has at most cap nonzeros; else again at each iteration,
 * as row_phi does) and every iteration after reads them from cache. Each
 * iteration leaves Phi_i in phi, raises kmax[j] to the row's KKT
 * violation, and multiplies B_i by Phi_i, except the last when
 * !update_last. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("default", "avx2")))
#endif
static void row_inner(const apr_mode *am, uint64_t i, double *restrict Bi, double eps,
                      unsigned first, unsigned last, int update_last, double *restrict phi,
                      double *restrict kmax, double *restrict P,
                      double *restrict xs, uint64_t cap, double *restrict pi,
                      double *restrict ll)
{
    const unsigned R = am->R;
    const uint64_t a = am->start[i], n = am->start[i + 1] - a;
    const int stored = n <= cap;
    if (stored) {
        const int keyed = am->c->layout.key_bits > 0;
        size_t blk = keyed ? block_of(am->c, a, 0) : 0;
        for (uint64_t k = 0; k < n; k++) {
            if (keyed)
                while (am->c->block_start[blk + 1] <= a + k)
                    blk++;
            double *restrict q = P + k * R;
            xs[k] = value_at(am, a + k);
            if (am->nother == 2 && !keyed) {
                if (a + k + PREFETCH_AHEAD < am->c->nnz) {
                    const uint64_t wn = am->c->words[a + k + PREFETCH_AHEAD];
                    const char *n0 =
                        (const char *)(am->F[0] + ((wn >> am->sh[0]) & am->mask[0]) * R);
                    const char *n1 =
                        (const char *)(am->F[1] + ((wn >> am->sh[1]) & am->mask[1]) * R);
                    for (unsigned off = 0; off < R * sizeof(double); off += 64) {
                        __builtin_prefetch(n0 + off);
                        __builtin_prefetch(n1 + off);
                    }
                }
                const uint64_t w = am->c->words[a + k];
                const double *restrict r0 = am->F[0] + ((w >> am->sh[0]) & am->mask[0]) * R;
                const double *restrict r1 = am->F[1] + ((w >> am->sh[1]) & am->mask[1]) * R;
#pragma omp simd
                for (unsigned r = 0; r < R; r++)
                    q[r] = r0[r] * r1[r];
            } else {
                const double *restrict g = gather_pi(am, a + k, blk, q);
                if (g != q)
                    memcpy(q, g, R * sizeof *q);
            }
        }
    }
    if (stored && last >= first &&
        iters_stored(P, xs, n, Bi, eps, first, last, update_last, phi, kmax, R))
        first = last + 1;   /* done */
    for (unsigned j = first; j <= last; j++) {
        double v = stored ? phi_stored(P, xs, n, Bi, eps, phi, pi, R)
                          : row_phi(am, i, Bi, eps, phi, pi);
        kmax[j] = v > kmax[j] ? v : kmax[j];
        if (j < last || update_last)
#pragma omp simd
            for (unsigned r = 0; r < R; r++)
                Bi[r] *= phi[r];
    }
    if (ll != NULL) {   /* the row's sum of x log m, B_i as it ends (lambda in it) */
        double sum = 0;
        size_t blk = am->c->layout.key_bits > 0 ? block_of(am->c, a, 0) : 0;
        for (uint64_t k = 0; k < n; k++) {
            const double *restrict p;
            if (stored) {
                p = P + k * R;
            } else {
                if (am->c->layout.key_bits > 0)
                    while (am->c->block_start[blk + 1] <= a + k)
                        blk++;
                p = gather_pi(am, a + k, blk, pi);
            }
            const double x = stored ? xs[k] : value_at(am, a + k);
            if (x != 0)
                sum += x * log(dot_lanes(Bi, p, R));
        }
        *ll = sum;
    }
}

/* Row i's part of the log-likelihood: sum of x log m over its nonzeros,
 * with B_i = A_i lambda (lam folded in here). */
static double row_loglik(const apr_mode *am, uint64_t i, const double *restrict Ai,
                         const double *restrict lam, double *restrict pi)
{
    const unsigned R = am->R;
    const uint64_t a = am->start[i], b = am->start[i + 1];
    double s = 0;
    size_t blk = am->c->layout.key_bits > 0 ? block_of(am->c, a, 0) : 0;
    for (uint64_t k = a; k < b; k++) {
        if (am->c->layout.key_bits > 0)
            while (am->c->block_start[blk + 1] <= k)
                blk++;
        const double *restrict p = gather_pi(am, k, blk, pi);
        double m = 0;
        for (unsigned r = 0; r < R; r++)
            m += lam[r] * Ai[r] * p[r];
        const double x = value_at(am, k);
        if (x != 0)
            s += x * log(m);
    }
    return s;
}

/* The sums over the row blocks, in block order. */
static double sum_blocks(const double *part, uint64_t nblocks)
{
    double s = 0;
    for (uint64_t b = 0; b < nblocks; b++)
        s += part[b];
    return s;
}

/* Columns of A (rows x R) to unit 1-norm, their norms multiplied into
 * lambda (pyttb's ktensor.normalize(normtype=1, mode=n)); a zero column
 * stays as it is. colpart: room for nblocks x R partial sums. */
static void normalize_mode(double *A, uint64_t rows, unsigned R, double *lambda,
                           double *colpart)
{
    const uint64_t nb = (rows + SUM_BLOCK - 1) / SUM_BLOCK;
    const int64_t nbi = (int64_t)nb;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nbi; b++) {
        double *s = colpart + (uint64_t)b * R;
        for (unsigned r = 0; r < R; r++)
            s[r] = 0;
        uint64_t hi = ((uint64_t)b + 1) * SUM_BLOCK < rows ? ((uint64_t)b + 1) * SUM_BLOCK : rows;
        for (uint64_t i = (uint64_t)b * SUM_BLOCK; i < hi; i++)
            for (unsigned r = 0; r < R; r++)
                s[r] += fabs(A[i * R + r]);
    }
    double norm[AMP_CPU_MAX_RANK];
    for (unsigned r = 0; r < R; r++) {
        norm[r] = 0;
        for (uint64_t b = 0; b < nb; b++)
            norm[r] += colpart[b * R + r];
    }
    const int64_t n = (int64_t)rows;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        for (unsigned r = 0; r < R; r++)
            if (norm[r] > 0)
                A[(uint64_t)i * R + r] *= 1.0 / norm[r];
    for (unsigned r = 0; r < R; r++)
        lambda[r] *= norm[r];
}

amp_status amp_cpu_apr_check_values(const amp_tensor *t, int allow_noninteger,
                                    uint64_t *bad, double *value)
{
    const amp_copy *c = &t->copies[0];
    const int64_t n = (int64_t)c->nnz;
    const int vf32 = t->value_type == AMP_VALUES_F32;
    uint64_t first = UINT64_MAX;
#pragma omp parallel for reduction(min : first) schedule(static)
    for (int64_t k = 0; k < n; k++) {
        double v = vf32 ? (double)((const float *)c->vals)[k] : ((const double *)c->vals)[k];
        if (v < 0 || (!allow_noninteger && v != floor(v)))
            first = (uint64_t)k < first ? (uint64_t)k : first;
    }
    if (first == UINT64_MAX)
        return AMP_OK;
    *bad = first;
    *value = vf32 ? (double)((const float *)c->vals)[first] : ((const double *)c->vals)[first];
    return AMP_ERR_RANGE;
}

/* The rows of mode d this process updates: every row when alone. */
static void owned(const amp_cpu_share *sh, const amp_cpd *c, unsigned d, uint64_t *own,
                  uint64_t *nown)
{
    *own = 0;
    *nown = c->rows[d];
    if (sh != NULL) {
        *own = sh->p->modes[d].row_begin[sh->group->rank];
        *nown = sh->p->modes[d].row_count[sh->group->rank];
    }
}

/* Several processes: every process's rows of mode d to all (c holds every
 * row in the run's order), so that each normalizes the same factor. */
static amp_status share_mode(amp_cpu_share *sh, amp_cpd *c, unsigned d, amp_error *err)
{
    const amp_group *g = sh->group;
    const amp_part_mode *pm = &sh->p->modes[d];
    uint64_t offset[AMP_MAX_GPUS], count[AMP_MAX_GPUS];
    for (unsigned k = 0; k < g->size; k++) {
        offset[k] = pm->row_begin[k] * c->rank;
        count[k] = pm->row_count[k] * c->rank;
    }
    double t0 = amp_now();
    AMP_CHECK(g->ops->allgatherv(g->ctx, c->A[d], offset, count, err));
    double dt = amp_now() - t0;
    sh->exchange += dt;
    c->seconds[AMP_PHASE_COMM] += dt;
    return AMP_OK;
}

/* A value summed (max: the largest) over every process. */
static amp_status share_value(amp_cpu_share *sh, double *v, int max, double *seconds,
                              amp_error *err)
{
    if (sh == NULL)
        return AMP_OK;
    double t0 = amp_now();
    AMP_CHECK(sh->group->ops->allreduce(sh->group->ctx, v, 1, max, err));
    double dt = amp_now() - t0;
    sh->exchange += dt;
    seconds[AMP_PHASE_COMM] += dt;
    return AMP_OK;
}

/* The largest KKT violation of each inner iteration j (1 .. inner): over
 * the threads' (kthr, T rows of inner + 1), then over every process. */
static amp_status reduce_kkt(amp_cpu_share *sh, const double *kthr, int T, unsigned inner,
                             double *kk, double *seconds, amp_error *err)
{
    for (unsigned j = 0; j <= inner; j++) {
        double v = 0;
        for (int t = 0; t < T; t++)
            v = kthr[(size_t)t * (inner + 1) + j] > v ? kthr[(size_t)t * (inner + 1) + j] : v;
        kk[j] = v;
    }
    if (sh == NULL)
        return AMP_OK;
    double t0 = amp_now();
    AMP_CHECK(sh->group->ops->allreduce(sh->group->ctx, kk, inner + 1, 1, err));
    double dt = amp_now() - t0;
    sh->exchange += dt;
    seconds[AMP_PHASE_COMM] += dt;
    return AMP_OK;
}

/* CP-APR on t, alone (sh NULL) or as one process of several: t is then
 * this process's part (its rows of each mode, in the run's order), it
 * updates those rows, the KKT violation's maximum and the log-likelihood's
 * sum are taken over every process, and each mode's rows go to all before
 * the mode is normalized, so c ends the same on every process. */
static amp_status apr_run(const amp_tensor *t, const amp_cpd_opts *o, amp_cpu_share *sh,
                          amp_cpd *c, amp_error *err)
{
    const unsigned N = t->nmodes, R = c->rank;
    if (R != o->rank)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have rank %u, not %u", R, o->rank);
    if (R > AMP_CPU_MAX_RANK)
        return AMP_FAIL(err, AMP_ERR_USAGE, "rank %u: the most is %u", R, AMP_CPU_MAX_RANK);
    const int T = amp_thread_count(o->threads);
    const unsigned inner = o->apr.inner ? o->apr.inner : AMP_APR_INNER_DEFAULT;
    const double eps = o->apr.eps_div_zero, kappa = o->apr.kappa, kappa_tol = o->apr.kappa_tol;
    amp_status rc = AMP_OK;
    uint64_t *start[AMP_MAX_MODES] = {0};
    double *Phi[AMP_MAX_MODES] = {0};
    double *scratch = NULL, *colpart = NULL, *rowpart = NULL;
    double *kthr = NULL, *kk = NULL, *bak = NULL, *pst = NULL, *pxs = NULL;
    double *llrow = NULL;
    int ll_ok = 0;
    unsigned jstar_last[AMP_MAX_MODES] = {0};
    /* A stop inside the inner iterations (tol above 0) may undo some:
     * bak keeps the B it goes back to. */
    const int keep = o->tol > 0;
    uint64_t maxrows = 0, longest = 0;
    for (unsigned m = 0; m < N; m++)
        maxrows = c->rows[m] > maxrows ? c->rows[m] : maxrows;
    const uint64_t maxblocks = (maxrows + SUM_BLOCK - 1) / SUM_BLOCK;
    for (unsigned m = 0; m < N; m++) {
        AMP_CHECK_GOTO(amp_cpu_row_starts(&t->copies[m], m, c->rows[m], &start[m], err), rc, done);
        Phi[m] = amp_calloc(c->rows[m] * R + 1, sizeof(double), "CP-APR's Phi", err);
        if (Phi[m] == NULL) {
            rc = err->status;
            goto done;
        }
    }
    for (unsigned m = 0; m < N; m++)
        for (uint64_t i = 0; i < c->rows[m]; i++)
            if (start[m][i + 1] - start[m][i] > longest)
                longest = start[m][i + 1] - start[m][i];
    /* Each thread's room for a row's pi: the longest row's, up to 4 MiB;
     * longer rows gather at each inner iteration. */
    const uint64_t pcap = longest < (UINT64_C(1) << 19) / R ? longest : (UINT64_C(1) << 19) / R;
    pst = amp_calloc((size_t)T * pcap * R + 1, sizeof(double), "CP-APR's rows of pi", err);
    pxs = pst ? amp_calloc((size_t)T * pcap + 1, sizeof(double), "CP-APR's values", err) : NULL;
    kthr = pxs ? amp_calloc((size_t)T * (inner + 1), sizeof(double), "KKT violations", err) : NULL;
    kk = kthr ? amp_calloc(inner + 1, sizeof(double), "KKT violations", err) : NULL;
    llrow = kk ? amp_calloc(c->rows[N - 1] + 1, sizeof(double), "log-likelihood", err) : NULL;
    if (llrow == NULL) {
        rc = err->status;
        goto done;
    }
    if (keep) {
        bak = amp_calloc(maxrows * R + 1, sizeof(double), "CP-APR's copy of B", err);
        if (bak == NULL) {
            rc = err->status;
            goto done;
        }
    }
    scratch = amp_calloc((size_t)T * 2 * R + 2, sizeof(double), "CP-APR's rows", err);
    colpart = scratch ? amp_calloc(maxblocks * R + 1, sizeof(double), "column sums", err) : NULL;
    rowpart = colpart ? amp_calloc(maxblocks + 1, sizeof(double), "row sums", err) : NULL;
    if (rowpart == NULL) {
        rc = err->status;
        goto done;
    }

    memset(c->seconds, 0, sizeof c->seconds);
    double now = amp_now();
    const double t_start = now;
    /* The start, as pyttb's: every factor's columns to unit 1-norm, the
     * norms into lambda. */
    for (unsigned r = 0; r < R; r++)
        c->lambda[r] = 1;
    for (unsigned m = 0; m < N; m++)
        normalize_mode(c->A[m], c->rows[m], R, c->lambda, colpart);
    c->seconds[AMP_PHASE_NORMALIZE] += amp_now() - now;
    c->iters = 0;
    c->converged = 0;
    c->stopped = 0;
    c->inner_iters = 0;
    double old_ll = 0;
    for (unsigned it = 0; it < o->max_iters; it++) {
        double t_iter = it == 0 ? t_start : amp_now();
        int converged = 1;
        double kkt_max = 0;
        unsigned inner_total = 0;
        for (unsigned d = 0; d < N; d++) {
            double *A = c->A[d];
            const uint64_t rows = c->rows[d];
            const int64_t nrows = (int64_t)rows;
            uint64_t own, nown;
            owned(sh, c, d, &own, &nown);
            const int64_t lo = (int64_t)own, hi = (int64_t)(own + nown);
            now = amp_now();
            /* The inactive entries that the rule lifts, shifted up; then
             * B = A diag(lambda), lambda = 1. */
            const double *P = Phi[d];
            double *lam = c->lambda;
            const int shift = it > 0;
            const double above = o->apr.shift_rule == AMP_APR_SHIFT_PYTTB ? 0 : 1;
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < nrows; i++)
                for (unsigned r = 0; r < R; r++) {
                    uint64_t at = (uint64_t)i * R + r;
                    if (shift && P[at] > above && A[at] < kappa_tol)
                        A[at] += kappa;
                    A[at] *= lam[r];
                }
            for (unsigned r = 0; r < R; r++)
                lam[r] = 1;
            c->seconds[AMP_PHASE_UPDATE] += amp_now() - now;

            apr_mode am;
            mode_init(&am, t, c, d, start[d]);
            /* Every row runs all its inner iterations at once, its KKT
             * violations kept per iteration; the mode's stop (the first
             * iteration whose largest violation is below tol) is known
             * after, and a stop before the last is undone from the copy
             * in bak (rare: only a tol above 0 can stop). A mode that
             * stopped at its first iteration last time is likely to again,
             * so it runs that one alone first. */
            const int spec = jstar_last[d] != 1;
            double *Ph = Phi[d];
            /* The last mode's passes leave each row's part of the
             * log-likelihood in llrow, where the row's last pass leaves B
             * as it ends (ll_ok, below). */
            double *llr = d == N - 1 ? llrow : NULL;
            if (llr != NULL)
                memset(llrow, 0, rows * sizeof *llrow);
            now = amp_now();
            for (size_t z = 0; z < (size_t)T * (inner + 1); z++)
                kthr[z] = 0;
#pragma omp parallel for schedule(dynamic, 64)
            for (int64_t i = lo; i < hi; i++) {
                const size_t tid = (size_t)amp_thread_id();
                double *Bi = A + (uint64_t)i * R;
                if (spec && keep)
                    memcpy(bak + (uint64_t)i * R, Bi, R * sizeof *Bi);
                row_inner(&am, (uint64_t)i, Bi, eps, 1, spec ? inner : 1, spec,
                          Ph + (uint64_t)i * R, kthr + tid * (inner + 1), pst + tid * pcap * R,
                          pxs + tid * pcap, pcap, scratch + tid * 2 * R, llr ? llr + i : NULL);
            }
            AMP_CHECK_GOTO(reduce_kkt(sh, kthr, T, inner, kk, c->seconds, err), rc, done);
            unsigned ran = spec ? inner : 1, jstar = 0;
            for (unsigned j = 1; j <= ran && jstar == 0; j++)
                if (kk[j] < o->tol)
                    jstar = j;
            if (!spec && jstar == 0) {   /* iteration 1 did not stop it: the rest */
                for (size_t z = 0; z < (size_t)T * (inner + 1); z++)
                    kthr[z] = 0;
#pragma omp parallel for schedule(dynamic, 64)
                for (int64_t i = lo; i < hi; i++) {
                    const size_t tid = (size_t)amp_thread_id();
                    double *Bi = A + (uint64_t)i * R;
                    const double *P1 = Ph + (uint64_t)i * R;
                    for (unsigned r = 0; r < R; r++)
                        Bi[r] *= P1[r];
                    if (keep)
                        memcpy(bak + (uint64_t)i * R, Bi, R * sizeof *Bi);
                    if (inner >= 2)
                        row_inner(&am, (uint64_t)i, Bi, eps, 2, inner, 1,
                                  Ph + (uint64_t)i * R, kthr + tid * (inner + 1),
                                  pst + tid * pcap * R, pxs + tid * pcap, pcap,
                                  scratch + tid * 2 * R, llr ? llr + i : NULL);
                }
                double k1 = kk[1];
                AMP_CHECK_GOTO(reduce_kkt(sh, kthr, T, inner, kk, c->seconds, err), rc, done);
                kk[1] = k1;
                ran = inner;
                for (unsigned j = 2; j <= ran && jstar == 0; j++)
                    if (kk[j] < o->tol)
                        jstar = j;
            }
            double kkt = kk[jstar ? jstar : inner];
            inner_total += jstar ? jstar : inner;
            if (jstar != 1)
                converged = 0;
            if (jstar >= 2 || (jstar == 1 && spec)) {   /* again from bak, to Phi of jstar */
                const unsigned from = spec ? 1 : 2;
#pragma omp parallel for schedule(dynamic, 64)
                for (int64_t i = lo; i < hi; i++) {
                    const size_t tid = (size_t)amp_thread_id();
                    double *Bi = A + (uint64_t)i * R;
                    memcpy(Bi, bak + (uint64_t)i * R, R * sizeof *Bi);
                    row_inner(&am, (uint64_t)i, Bi, eps, from, jstar, 0, Ph + (uint64_t)i * R,
                              kthr + tid * (inner + 1), pst + tid * pcap * R,
                              pxs + tid * pcap, pcap, scratch + tid * 2 * R,
                              llr ? llr + i : NULL);
                }
            }
            jstar_last[d] = jstar;
            /* Not where one inner iteration's update was the last (no
             * pass after it). */
            ll_ok = !(jstar == 0 && !spec && inner < 2);
            c->seconds[AMP_PHASE_MTTKRP] += amp_now() - now;
            kkt_max = kkt > kkt_max ? kkt : kkt_max;
            if (sh != NULL)
                AMP_CHECK_GOTO(share_mode(sh, c, d, err), rc, done);
            now = amp_now();
            normalize_mode(A, rows, R, c->lambda, colpart);
            c->seconds[AMP_PHASE_NORMALIZE] += amp_now() - now;
        }
        /* The log-likelihood, over the last mode's copy. */
        now = amp_now();
        {
            const unsigned d = N - 1;
            apr_mode am;
            mode_init(&am, t, c, d, start[d]);
            const uint64_t rows = c->rows[d];
            const int64_t nb = (int64_t)((rows + SUM_BLOCK - 1) / SUM_BLOCK);
            const double *A = c->A[d], *lam = c->lambda;
#pragma omp parallel for schedule(dynamic, 1)
            for (int64_t b = 0; b < nb; b++) {
                double *pi = scratch + (size_t)amp_thread_id() * 2 * R;
                uint64_t lo = (uint64_t)b * SUM_BLOCK;
                uint64_t hi = lo + SUM_BLOCK < rows ? lo + SUM_BLOCK : rows;
                double s = 0;
                for (uint64_t i = lo; i < hi; i++)
                    s += ll_ok ? llrow[i] : row_loglik(&am, i, A + i * R, lam, pi);
                rowpart[b] = s;
            }
            double total = 0, sum = sum_blocks(rowpart, (uint64_t)nb);
            AMP_CHECK_GOTO(share_value(sh, &sum, 0, c->seconds, err), rc, done);
            for (unsigned r = 0; r < R; r++)
                total += c->lambda[r];
            c->loglik = sum - total;
        }
        c->seconds[AMP_PHASE_FIT] += amp_now() - now;
        c->kkt = kkt_max;
        c->inner_iters = inner_total;
        c->iters = it + 1;
        c->fit = c->loglik;
        double delta = it == 0 ? fabs(c->loglik) : fabs(c->loglik - old_ll);
        old_ll = c->loglik;
        if (o->on_iter)
            o->on_iter(o->ctx, it + 1, c->loglik, delta, amp_now() - t_iter);
        if (o->stop && *o->stop) {
            c->stopped = 1;
            break;
        }
        if (converged) {
            c->converged = 1;
            break;
        }
    }
done:
    for (unsigned m = 0; m < N; m++) {
        amp_free(start[m]);
        amp_free(Phi[m]);
    }
    amp_free(scratch);
    amp_free(colpart);
    amp_free(rowpart);
    amp_free(kthr);
    amp_free(kk);
    amp_free(bak);
    amp_free(pst);
    amp_free(pxs);
    amp_free(llrow);
    return rc;
}

amp_status amp_cpu_apr(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c, amp_error *err)
{
    return apr_run(t, o, NULL, c, err);
}

amp_status amp_cpu_apr_share(const amp_tensor *part, const amp_cpd_opts *o, amp_cpu_share *sh,
                             amp_cpd *c, amp_error *err)
{
    return apr_run(part, o, sh, c, err);
}
