/* CP completion on the CPU (--observed nonzeros): CP-ALS fitted to the
 * stored entries only, the reference of the GPU's (run/cuda/completion.cu).
 *
 * Least squares over the training entries O (the stored ones, less those
 * --holdout keeps out): with the other modes fixed, row i of mode n
 * minimizes sum over its entries of (x - h . k)^2 + l2 |h|^2, k the
 * Hadamard product of the other modes' rows at the entry, so it solves
 *     (sum_k k k^T + l2 I) h = sum_k x k,
 * a different R x R system for every row (CP-ALS has one V for all).
 *
 * Per mode n, one pass over mode n's copy (ordered by row n), threads
 * owning whole rows (dynamic chunks of rows, amp_cpu_row_starts): a row's
 * k vectors are gathered into batches of CMP_BATCH, each added into the
 * row's system with one dsyrk and its x k with one dgemv; then the system
 * (the ridge on its diagonal) is factored and solved while it is in cache
 * (by hand up to rank CMP_SOLVE_R, else dpotrf and dpotrs), and h written
 * over the row. Rows longer than 2 CMP_PIECE nonzeros are built in pieces
 * by all threads (cmp_pieces), their systems summed in piece order. Rows are
 * independent, so no atomics, and a row's arithmetic does not depend on
 * the thread count: the same bits for any -t. A row with no training
 * entry, or whose system is singular (a pivot at or below R eps times its
 * largest diagonal entry: fewer entries than R and no ridge), keeps its
 * value in the model (its row times lambda); both are counted.
 *
 * Then lambda as CP-ALS takes it: the columns' 2-norms on the first
 * iteration, their max-norms (at least 1) after, summed over fixed blocks
 * of rows. The last mode's pass also sweeps each row's entries again
 * right after its solve (the row's words and gathered rows are in cache):
 * the model's value h . k there, the squared residuals of the training
 * and test entries, summed per block of rows in order.
 *
 * Bytes per nonzero and mode: 8 (word) + 4 or 8 (value), N - 1 gathered
 * factor rows of 8 R, and on the last mode the same again for the
 * residuals (from cache). FLOPs per nonzero: (N - 2) R for k, R (R + 1)
 * for k k^T's upper triangle and x k: the R (R + 1) / 2 accumulation is
 * what CP-ALS does not have; per row R^3 / 3 for the factorization and
 * 2 R^2 for the solves. */
#include <config.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "amp_alloc.h"
#include "amp_completion.h"
#include "amp_cpu.h"
#include "amp_threads.h"
#include "amp_timer.h"

#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
void openblas_set_num_threads(int n);
#endif

/* k vectors per dsyrk: enough to make it a matrix product, few enough
 * that the batch (CMP_BATCH x R doubles) stays in L1 at rank 16. */
#define CMP_BATCH 32
/* The passes over the nonzeros also as AVX2 and FMA code where the CPU has
 * them (picked at load time; the binary stays portable). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define CMP_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CMP_CLONES
#endif

/* Rows per block of the sums over rows: fixed, so the sums do not depend
 * on the thread count; a thread takes whole blocks. */
#define CMP_BLOCK 64
/* Up to this rank a row's system is factored and solved by hand (a
 * LAPACK call costs more than the arithmetic there), above by dpotrf and
 * dpotrs. */
#define CMP_SOLVE_R 64
/* Nonzeros a piece of a long row (cmp_pieces), at the least. */
#define CMP_PIECE 4096
/* The most the pieces' systems of one mode take together (bytes). */
#define CMP_PIECE_BYTES ((uint64_t)256 << 20)

/* What one pass over mode d's copy needs. */
typedef struct cmp_mode {
    const amp_copy *c;
    unsigned d, N, R, nother;
    unsigned sh[AMP_MAX_MODES], wd[AMP_MAX_MODES];   /* the other modes' fields */
    const double *F[AMP_MAX_MODES];                  /* the other modes' factors */
    const uint64_t *start;                           /* amp_cpu_row_starts */
    const uint64_t *held;                            /* test entries' bits, or NULL */
    int vf32;
} cmp_mode;

/* One thread's scratch. */
typedef struct cmp_scratch {
    double *Z, *zx, *K, *b, *k;
} cmp_scratch;

static size_t scratch_doubles(unsigned R)
{
    return (size_t)CMP_BATCH * R + CMP_BATCH + (size_t)R * R + 2 * (size_t)R + 8;
}

static cmp_scratch scratch_of(double *base, int t, unsigned R)
{
    double *p = base + (size_t)t * scratch_doubles(R);
    cmp_scratch s;
    s.Z = p;
    s.zx = s.Z + (size_t)CMP_BATCH * R;
    s.K = s.zx + CMP_BATCH;
    s.b = s.K + (size_t)R * R;
    s.k = s.b + R;
    return s;
}

static inline int is_held(const uint64_t *held, uint64_t k)
{
    return held != NULL && (held[k >> 6] >> (k & 63) & 1);
}

static inline double value_at(const cmp_mode *cm, uint64_t k)
{
    return cm->vf32 ? (double)((const float *)cm->c->vals)[k]
                    : ((const double *)cm->c->vals)[k];
}

/* The block of nonzero k in a keyed copy. */
static size_t block_of(const amp_copy *c, uint64_t k)
{
    size_t lo = 0, hi = c->nblocks - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        if (c->block_start[mid] <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* k of nonzero at (word w, block key key) into out: the other modes' rows
 * multiplied in mode order, the first two as they are read (a copy into
 * out first would make every load of out wait on the copy's stores). */
static inline __attribute__((always_inline)) void gather_k(const cmp_mode *cm, uint64_t w,
                                                           uint64_t key, double *restrict out)
{
    const unsigned R = cm->R;
    if (cm->nother == 0) {
        for (unsigned r = 0; r < R; r++)
            out[r] = 1;
        return;
    }
    const double *restrict r0 = cm->F[0] + amp_blco_field(key, w, cm->sh[0], cm->wd[0]) * R;
    if (cm->nother == 1) {
        for (unsigned r = 0; r < R; r++)
            out[r] = r0[r];
        return;
    }
    const double *restrict r1 = cm->F[1] + amp_blco_field(key, w, cm->sh[1], cm->wd[1]) * R;
#pragma omp simd
    for (unsigned r = 0; r < R; r++)
        out[r] = r0[r] * r1[r];
    for (unsigned j = 2; j < cm->nother; j++) {
        const double *restrict rj = cm->F[j] + amp_blco_field(key, w, cm->sh[j], cm->wd[j]) * R;
#pragma omp simd
        for (unsigned r = 0; r < R; r++)
            out[r] *= rj[r];
    }
}

/* The batch's n k vectors and values added into K (upper) and b. */
static void flush_batch(cmp_scratch *s, unsigned n, unsigned R, double *K, double *b)
{
    if (n == 0)
        return;
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)R, (int)n, 1.0, s->Z, (int)R, 1.0,
                K, (int)R);
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)n, (int)R, 1.0, s->Z, (int)R, s->zx, 1, 1.0,
                b, 1);
}

/* The training entries among nonzeros [a, e) of the copy (one row's, or
 * a piece of one) added into K (R x R, upper), b and *count, in batches
 * of CMP_BATCH k vectors through dsyrk and dgemv. (Entry by entry by hand
 * took 40% longer at rank 16 on cpu20m: bench/RESULTS.md.) */
CMP_CLONES static void accumulate(const cmp_mode *cm, uint64_t a, uint64_t e, cmp_scratch *s,
                                  double *K, double *b, uint64_t *count)
{
    const unsigned R = cm->R;
    const amp_copy *c = cm->c;
    const int keyed = c->layout.key_bits > 0;
    size_t blk = keyed && a < e ? block_of(c, a) : 0;
    unsigned n = 0;
    for (uint64_t j = a; j < e; j++) {
        if (keyed)
            while (c->block_start[blk + 1] <= j)
                blk++;
        if (is_held(cm->held, j))
            continue;
        ++*count;
        gather_k(cm, c->words[j], keyed ? c->block_key[blk] : 0, s->Z + (size_t)n * R);
        s->zx[n++] = value_at(cm, j);
        if (n == CMP_BATCH) {
            flush_batch(s, n, R, K, b);
            n = 0;
        }
    }
    flush_batch(s, n, R, K, b);
}

/* K = U^T U in place (U upper, row-major), right-looking, and K h = b
 * solved into b; 0 where a pivot is not above tiny (the system is
 * singular). The small ranks' factorization: LAPACK's call costs more
 * than the arithmetic there. The same steps as the GPU kernel's. */
static int small_solve(unsigned R, double *restrict K, double *restrict b, double tiny)
{
    for (unsigned j = 0; j < R; j++) {
        double *restrict Kj = K + (size_t)j * R;
        const double piv = Kj[j];
        if (!(piv > tiny))
            return 0;
        const double dj = sqrt(piv);
        Kj[j] = dj;
        for (unsigned q = j + 1; q < R; q++)
            Kj[q] /= dj;
        for (unsigned p = j + 1; p < R; p++) {
            const double up = Kj[p];
            double *restrict Kp = K + (size_t)p * R;
#pragma omp simd
            for (unsigned q = p; q < R; q++)
                Kp[q] -= up * Kj[q];
        }
    }
    for (unsigned j = 0; j < R; j++) {   /* U^T y = b */
        const double yj = b[j] / K[(size_t)j * R + j];
        for (unsigned q = j + 1; q < R; q++)
            b[q] -= K[(size_t)j * R + q] * yj;
        b[j] = yj;
    }
    for (unsigned j = R; j-- > 0;) {     /* U h = y */
        const double hj = b[j] / K[(size_t)j * R + j];
        for (unsigned q = 0; q < j; q++)
            b[q] -= K[(size_t)q * R + j] * hj;
        b[j] = hj;
    }
    return 1;
}

enum { ROW_SOLVED = 0, ROW_UNOBSERVED, ROW_SINGULAR };

/* A row's system (K upper, b; count training entries) with the ridge,
 * solved into h (R values; on entry its kept value, left there when the
 * row is unobserved or singular). K and b are overwritten. */
static int finish_row(unsigned R, double *K, double *b, uint64_t count, double l2, double *h)
{
    if (count == 0)
        return ROW_UNOBSERVED;
    double maxdiag = 0;
    for (unsigned j = 0; j < R; j++) {
        maxdiag = K[(size_t)j * R + j] > maxdiag ? K[(size_t)j * R + j] : maxdiag;
        K[(size_t)j * R + j] += l2;
    }
    const double tiny = AMP_COMPLETION_PIVOT * (double)R * DBL_EPSILON * (maxdiag + l2);
    if (R <= CMP_SOLVE_R) {
        if (!small_solve(R, K, b, tiny))
            return ROW_SINGULAR;
        memcpy(h, b, (size_t)R * sizeof *h);
        return ROW_SOLVED;
    }
    /* Row-major upper is column-major lower. */
    lapack_int info = LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)R, K, (lapack_int)R);
    if (info != 0)
        return ROW_SINGULAR;
    for (unsigned j = 0; j < R; j++) {
        const double p = K[(size_t)j * R + j];
        if (!(p * p > tiny))
            return ROW_SINGULAR;
    }
    LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, 'L', (lapack_int)R, 1, K, (lapack_int)R, b,
                        (lapack_int)R);
    memcpy(h, b, (size_t)R * sizeof *h);
    return ROW_SOLVED;
}

/* The squared residuals of nonzeros [a, e) of the copy (one row's, or a
 * piece of one) with the row's h: training ones into sums[0], their
 * values' squares into sums[1], test ones into sums[2]. */
CMP_CLONES static void residuals(const cmp_mode *cm, uint64_t a, uint64_t e,
                                 const double *restrict h, double *restrict kbuf, double *sums)
{
    const unsigned R = cm->R;
    const amp_copy *c = cm->c;
    const int keyed = c->layout.key_bits > 0;
    size_t blk = keyed && a < e ? block_of(c, a) : 0;
    for (uint64_t k = a; k < e; k++) {
        if (keyed)
            while (c->block_start[blk + 1] <= k)
                blk++;
        gather_k(cm, c->words[k], keyed ? c->block_key[blk] : 0, kbuf);
        double m = 0;
        for (unsigned r = 0; r < R; r++)
            m += h[r] * kbuf[r];
        const double x = value_at(cm, k), d = x - m;
        if (is_held(cm->held, k)) {
            sums[2] += d * d;
        } else {
            sums[0] += d * d;
            sums[1] += x * x;
        }
    }
}

/* Rows longer than this many nonzeros are built in pieces of `piece` by
 * several threads at once (a power-law row can hold a fifth of a mode's
 * nonzeros, and one thread owning it would leave the others idle), the
 * pieces' systems then summed in piece order: fixed pieces, so the sums
 * do not depend on the thread count. */
typedef struct cmp_pieces {
    uint64_t piece;       /* nonzeros a piece; rows above 2 piece are split */
    uint64_t n;           /* pieces */
    uint64_t *row, *lo;   /* each piece's row and first nonzero, in row order */
} cmp_pieces;

static void pieces_free(cmp_pieces *p)
{
    amp_free(p->row);
    amp_free(p->lo);
    memset(p, 0, sizeof *p);
}

static int is_heavy(const cmp_pieces *p, const uint64_t *start, uint64_t i)
{
    return start[i + 1] - start[i] > 2 * p->piece;
}

static amp_status pieces_new(const uint64_t *start, uint64_t rows, uint64_t piece,
                             cmp_pieces *p, amp_error *err)
{
    memset(p, 0, sizeof *p);
    p->piece = piece;
    for (uint64_t i = 0; i < rows; i++)
        if (is_heavy(p, start, i))
            p->n += (start[i + 1] - start[i] + piece - 1) / piece;
    p->row = amp_calloc(p->n + 1, sizeof *p->row, "the pieces of long rows", err);
    p->lo = p->row ? amp_calloc(p->n + 1, sizeof *p->lo, "the pieces of long rows", err) : NULL;
    if (p->lo == NULL) {
        pieces_free(p);
        return err->status;
    }
    uint64_t k = 0;
    for (uint64_t i = 0; i < rows; i++)
        if (is_heavy(p, start, i))
            for (uint64_t a = start[i]; a < start[i + 1]; a += piece) {
                p->row[k] = i;
                p->lo[k++] = a;
            }
    return AMP_OK;
}

/* The first piece of heavy row i. */
static uint64_t first_piece(const cmp_pieces *p, uint64_t i)
{
    uint64_t lo = 0, hi = p->n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (p->row[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint64_t piece_end(const cmp_pieces *p, const uint64_t *start, uint64_t k)
{
    const uint64_t e = p->lo[k] + p->piece, end = start[p->row[k] + 1];
    return e < end ? e : end;
}

static void mode_init(cmp_mode *cm, const amp_tensor *t, const amp_cpd *c, unsigned d,
                      const uint64_t *start, const uint64_t *held)
{
    const amp_copy *cp = &t->copies[d];
    memset(cm, 0, sizeof *cm);
    cm->c = cp;
    cm->d = d;
    cm->N = t->nmodes;
    cm->R = c->rank;
    cm->start = start;
    cm->held = held;
    cm->vf32 = t->value_type == AMP_VALUES_F32;
    for (unsigned m = 0; m < t->nmodes; m++) {
        if (m == d)
            continue;
        cm->sh[cm->nother] = cp->layout.shift[m];
        cm->wd[cm->nother] = cp->layout.width[m];
        cm->F[cm->nother++] = c->A[m];
    }
}

/* The test entries' bits of copy d: bit k set where nonzero k's draw
 * (amp_holdout_draw, from its original coordinates) is below the
 * fraction. Whole 64-bit words a thread. *held_count: how many. */
static void mark_held(const amp_tensor *t, unsigned d, double frac, uint64_t seed,
                      uint64_t *bits, uint64_t *held_count)
{
    const amp_copy *c = &t->copies[d];
    const unsigned N = t->nmodes;
    const int64_t nwords = (int64_t)((c->nnz + 63) / 64);
    const int keyed = c->layout.key_bits > 0;
    uint64_t total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (int64_t wi = 0; wi < nwords; wi++) {
        const uint64_t a = (uint64_t)wi * 64, e = a + 64 < c->nnz ? a + 64 : c->nnz;
        size_t blk = keyed ? block_of(c, a) : 0;
        uint64_t word = 0;
        for (uint64_t k = a; k < e; k++) {
            if (keyed)
                while (c->block_start[blk + 1] <= k)
                    blk++;
            const uint64_t key = keyed ? c->block_key[blk] : 0;
            uint64_t orig[AMP_MAX_MODES];
            for (unsigned m = 0; m < N; m++) {
                uint64_t v = amp_blco_field(key, c->words[k], c->layout.shift[m],
                                            c->layout.width[m]);
                orig[m] = t->new_to_orig[m] != NULL ? t->new_to_orig[m][v] : v;
            }
            if (amp_holdout_draw(orig, N, seed) < frac) {
                word |= UINT64_C(1) << (k - a);
                total++;
            }
        }
        bits[wi] = word;
    }
    *held_count = total;
}

/* Mode d's columns normalized into lambda, as CP-ALS does (2-norm on the
 * first iteration, max-norm never below 1 after; a zero column keeps
 * lambda 1), over fixed blocks of rows. part: nblocks x 2R. */
static void normalize(double *A, uint64_t rows, unsigned R, int first, double *lambda,
                      double *part)
{
    const int64_t nb = (int64_t)((rows + CMP_BLOCK - 1) / CMP_BLOCK);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        double *sq = part + (uint64_t)b * 2 * R, *mx = sq + R;
        for (unsigned r = 0; r < R; r++)
            sq[r] = mx[r] = 0;
        const uint64_t lo = (uint64_t)b * CMP_BLOCK;
        const uint64_t hi = lo + CMP_BLOCK < rows ? lo + CMP_BLOCK : rows;
        for (uint64_t i = lo; i < hi; i++)
            for (unsigned r = 0; r < R; r++) {
                const double x = A[i * R + r];
                sq[r] += x * x;
                mx[r] = fabs(x) > mx[r] ? fabs(x) : mx[r];
            }
    }
    double inv[AMP_CPU_MAX_RANK];
    for (unsigned r = 0; r < R; r++) {
        double sq = 0, mx = 0;
        for (int64_t b = 0; b < nb; b++) {
            sq += part[(uint64_t)b * 2 * R + r];
            mx = part[(uint64_t)b * 2 * R + R + r] > mx ? part[(uint64_t)b * 2 * R + R + r] : mx;
        }
        lambda[r] = first ? sqrt(sq) : (mx > 1 ? mx : 1);
        if (lambda[r] == 0)
            lambda[r] = 1;
        inv[r] = 1 / lambda[r];
    }
    const int64_t n = (int64_t)rows;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        for (unsigned r = 0; r < R; r++)
            A[(uint64_t)i * R + r] *= inv[r];
}

/* The squared residuals of --holdout-file's entries under the model
 * (lambda, normalized factors), over fixed blocks of entries. */
static double test_set_sse(const amp_test_set *ts, const amp_cpd *c, double *part)
{
    const unsigned N = c->nmodes, R = c->rank;
    const int64_t nb = (int64_t)((ts->n + 1023) / 1024);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        const uint64_t lo = (uint64_t)b * 1024, hi = lo + 1024 < ts->n ? lo + 1024 : ts->n;
        double s = 0;
        for (uint64_t k = lo; k < hi; k++) {
            const uint64_t *idx = ts->idx + k * N;
            int none = 0;
            for (unsigned m = 0; m < N; m++)
                none |= idx[m] == AMP_TEST_NO_ROW;
            double mdl = 0;
            if (!none)
                for (unsigned r = 0; r < R; r++) {
                    double p = c->lambda[r];
                    for (unsigned m = 0; m < N; m++)
                        p *= c->A[m][idx[m] * R + r];
                    mdl += p;
                }
            const double d = ts->val[k] - mdl;
            s += d * d;
        }
        part[b] = s;
    }
    double sse = 0;
    for (int64_t b = 0; b < nb; b++)
        sse += part[b];
    return sse;
}

amp_status amp_cpu_completion(const amp_tensor *t, const amp_cpd_opts *o, amp_cpd *c,
                              amp_error *err)
{
    const unsigned N = t->nmodes, R = c->rank;
    const amp_completion_opts *co = &o->completion;
    if (R != o->rank)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the factors have rank %u, not %u", R, o->rank);
    AMP_CHECK(amp_rank_check(R, AMP_CPU_MAX_RANK, "completion on the CPU", err));
    if (!(co->holdout >= 0 && co->holdout < 1))
        return AMP_FAIL(err, AMP_ERR_USAGE, "the holdout fraction must be in [0, 1), not %g",
                        co->holdout);
    if (co->holdout > 0 && co->test != NULL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "a holdout fraction and a test set: give one");
    if (co->test != NULL && co->test->nmodes != N)
        return AMP_FAIL(err, AMP_ERR_USAGE, "the test set has %u modes, the tensor %u",
                        co->test->nmodes, N);
    amp_mode_rule rule[AMP_MAX_MODES];
    AMP_CHECK(amp_rules_resolve(o, N, rule, err));
    const int T = amp_thread_count(o->threads);
    amp_status rc = AMP_OK;
    uint64_t *start[AMP_MAX_MODES] = {0}, *held[AMP_MAX_MODES] = {0};
    double *scratch = NULL, *part = NULL, *tpart = NULL, *pbuf = NULL;
    cmp_pieces pieces[AMP_MAX_MODES];
    memset(pieces, 0, sizeof pieces);
    /* A piece's system, count and residual sums. */
    const size_t pstride = (size_t)R * R + R + 4;
    uint64_t maxrows = 1, n_held = 0;
    for (unsigned m = 0; m < N; m++)
        maxrows = c->rows[m] > maxrows ? c->rows[m] : maxrows;
    const uint64_t maxblocks = (maxrows + CMP_BLOCK - 1) / CMP_BLOCK;
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(1);   /* BLAS inside our threads, one thread each */
#endif
    memset(c->seconds, 0, sizeof c->seconds);
    memset(&c->completion, 0, sizeof c->completion);
    double now = amp_now();
    const double t_start = now;
    for (unsigned m = 0; m < N; m++) {
        AMP_CHECK_GOTO(amp_cpu_row_starts(&t->copies[m], m, c->rows[m], &start[m], err), rc,
                       done);
        if (co->holdout > 0) {
            held[m] = amp_calloc((t->copies[m].nnz + 63) / 64 + 1, sizeof(uint64_t),
                                 "the test entries' bits", err);
            if (held[m] == NULL) {
                rc = err->status;
                goto done;
            }
            uint64_t n;
            mark_held(t, m, co->holdout, o->seed, held[m], &n);
            if (m == 0)
                n_held = n;
            else if (n != n_held) {
                rc = AMP_FAIL(err, AMP_ERR_CORRUPT, "mode %u's copy holds %llu test entries "
                              "and mode 1's %llu: the copies do not hold the same nonzeros",
                              m + 1, (unsigned long long)n, (unsigned long long)n_held);
                goto done;
            }
        }
    }
    scratch = amp_calloc((size_t)T * scratch_doubles(R), sizeof(double), "completion's rows",
                         err);
    part = scratch ? amp_calloc(maxblocks * 2 * R + 3 * maxblocks + 1, sizeof(double),
                                "completion's sums", err)
                   : NULL;
    tpart = part ? amp_calloc((co->test ? (co->test->n + 1023) / 1024 : 0) + 1, sizeof(double),
                              "the test set's sums", err)
                 : NULL;
    if (tpart == NULL) {
        rc = err->status;
        goto done;
    }
    /* Long rows' pieces: CMP_PIECE nonzeros, or more where their systems
     * would take more than CMP_PIECE_BYTES (high ranks); a function of
     * the tensor and the rank alone, never of the thread count. */
    {
        uint64_t piece = CMP_PIECE, most = 0;
        const uint64_t need = (uint64_t)t->nnz * pstride * sizeof(double) / CMP_PIECE_BYTES + 1;
        piece = need > piece ? need : piece;
        for (unsigned m = 0; m < N; m++) {
            AMP_CHECK_GOTO(pieces_new(start[m], c->rows[m], piece, &pieces[m], err), rc, done);
            most = pieces[m].n > most ? pieces[m].n : most;
        }
        pbuf = amp_calloc(most * pstride + 1, sizeof(double), "the long rows' systems", err);
        if (pbuf == NULL) {
            rc = err->status;
            goto done;
        }
    }
    c->completion.n_train = t->nnz - n_held;
    c->completion.n_test = co->test ? co->test->n : n_held;
    c->seconds[AMP_PHASE_MTTKRP] += amp_now() - now;

    double old_fit = 0;
    c->iters = 0;
    c->converged = 0;
    c->stopped = 0;
    for (unsigned it = 0; it < o->max_iters; it++) {
        const double t_iter = it == 0 ? t_start : amp_now();
        double sse_train = 0, sq_train = 0, sse_test = 0;
        for (unsigned d = 0; d < N; d++) {
            const int last = d == N - 1;
            cmp_mode cm;
            mode_init(&cm, t, c, d, start[d], held[d]);
            double *A = c->A[d];
            const double *lam = c->lambda, l2 = rule[d].l2;
            const uint64_t rows = c->rows[d], *st = start[d];
            const int64_t nb = (int64_t)((rows + CMP_BLOCK - 1) / CMP_BLOCK);
            double *bsum = part + maxblocks * 2 * R;   /* 3 a block: residual sums */
            const cmp_pieces *pc = &pieces[d];
            const int64_t np = (int64_t)pc->n;
            uint64_t unobserved = 0, singular = 0;
            now = amp_now();
            /* The long rows' pieces first, every thread at once. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(T)
            for (int64_t k = 0; k < np; k++) {
                cmp_scratch s = scratch_of(scratch, amp_thread_id(), R);
                double *K = pbuf + (uint64_t)k * pstride, *bb = K + (size_t)R * R;
                memset(K, 0, ((size_t)R * R + R) * sizeof *K);
                uint64_t cnt = 0;
                accumulate(&cm, pc->lo[k], piece_end(pc, st, (uint64_t)k), &s, K, bb, &cnt);
                bb[R] = (double)cnt;
            }
#pragma omp parallel for schedule(dynamic, 1) num_threads(T) \
    reduction(+ : unobserved, singular)
            for (int64_t b = 0; b < nb; b++) {
                cmp_scratch s = scratch_of(scratch, amp_thread_id(), R);
                double sums[3] = {0, 0, 0};
                const uint64_t lo = (uint64_t)b * CMP_BLOCK;
                const uint64_t hi = lo + CMP_BLOCK < rows ? lo + CMP_BLOCK : rows;
                for (uint64_t i = lo; i < hi; i++) {
                    double *h = A + i * R;
                    /* The kept value: the row as the model has it. */
                    for (unsigned r = 0; r < R; r++)
                        h[r] *= lam[r];
                    memset(s.K, 0, (size_t)R * R * sizeof *s.K);
                    memset(s.b, 0, (size_t)R * sizeof *s.b);
                    uint64_t cnt = 0;
                    const int heavy = is_heavy(pc, st, i);
                    if (heavy) {
                        /* Its pieces' systems, in piece order. */
                        for (uint64_t k = first_piece(pc, i); k < pc->n && pc->row[k] == i;
                             k++) {
                            const double *K = pbuf + k * pstride, *bb = K + (size_t)R * R;
                            for (size_t q = 0; q < (size_t)R * R; q++)
                                s.K[q] += K[q];
                            for (unsigned r = 0; r < R; r++)
                                s.b[r] += bb[r];
                            cnt += (uint64_t)bb[R];
                        }
                    } else {
                        accumulate(&cm, st[i], st[i + 1], &s, s.K, s.b, &cnt);
                    }
                    const int how = finish_row(R, s.K, s.b, cnt, l2, h);
                    unobserved += how == ROW_UNOBSERVED;
                    singular += how == ROW_SINGULAR;
                    if (last && !heavy)
                        residuals(&cm, st[i], st[i + 1], h, s.k, sums);
                }
                for (int q = 0; q < 3; q++)
                    bsum[(uint64_t)b * 3 + (uint64_t)q] = sums[q];
            }
            /* The long rows' residuals, by pieces again. */
            if (last) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(T)
                for (int64_t k = 0; k < np; k++) {
                    cmp_scratch s = scratch_of(scratch, amp_thread_id(), R);
                    double *sums = pbuf + (uint64_t)k * pstride + (size_t)R * R + R + 1;
                    sums[0] = sums[1] = sums[2] = 0;
                    residuals(&cm, pc->lo[k], piece_end(pc, st, (uint64_t)k),
                              A + pc->row[k] * R, s.k, sums);
                }
            }
            c->seconds[AMP_PHASE_MTTKRP] += amp_now() - now;
            c->completion.unobserved[d] = unobserved;
            c->completion.singular[d] = singular;
            if (last) {
                for (int64_t b = 0; b < nb; b++) {
                    sse_train += bsum[b * 3];
                    sq_train += bsum[b * 3 + 1];
                    sse_test += bsum[b * 3 + 2];
                }
                for (int64_t k = 0; k < np; k++) {
                    const double *sums = pbuf + (uint64_t)k * pstride + (size_t)R * R + R + 1;
                    sse_train += sums[0];
                    sq_train += sums[1];
                    sse_test += sums[2];
                }
            }
            now = amp_now();
            normalize(A, rows, R, it == 0, c->lambda, part);
            c->seconds[AMP_PHASE_NORMALIZE] += amp_now() - now;
        }
        now = amp_now();
        if (co->test != NULL)
            sse_test = test_set_sse(co->test, c, tpart);
        const uint64_t ntr = c->completion.n_train, nte = c->completion.n_test;
        c->completion.rmse_train = ntr > 0 ? sqrt(sse_train / (double)ntr) : NAN;
        c->completion.rmse_test = nte > 0 ? sqrt(sse_test / (double)nte) : NAN;
        const double fit = sq_train > 0 ? 1 - sqrt(sse_train) / sqrt(sq_train) : 0;
        const double delta = fabs(fit - old_fit);
        c->seconds[AMP_PHASE_FIT] += amp_now() - now;
        c->fit = fit;
        c->iters = it + 1;
        if (o->on_iter)
            o->on_iter(o->ctx, it + 1, fit, delta, amp_now() - t_iter);
        if (o->stop && *o->stop) {
            c->stopped = 1;
            break;
        }
        if (it > 0 && delta < o->tol) {
            c->converged = 1;
            break;
        }
        old_fit = fit;
    }
done:
    for (unsigned m = 0; m < N; m++) {
        amp_free(start[m]);
        amp_free(held[m]);
        pieces_free(&pieces[m]);
    }
    amp_free(pbuf);
    amp_free(scratch);
    amp_free(part);
    amp_free(tpart);
    return rc;
}
