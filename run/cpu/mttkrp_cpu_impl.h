/* The CPU MTTKRP kernels for one factor precision; mttkrp_cpu.c includes
 * this twice, with REAL = double and float and SFX naming the instance.
 * Two kernels: the register sum (mttkrp_cpu_reg.h, one per vector width)
 * where the CPU and rank allow it, and the scratch-row sum (range_kernel)
 * for the rest.
 *
 * Thread mapping: thread t of T owns the nonzeros [nnz t/T, nnz (t+1)/T)
 * of the mode-d copy, which is ordered by output row. A row is summed
 * while the output index repeats and written once when it changes, so
 * the hot rows of power-law data cost one store, not one per nonzero. A
 * thread's first and last rows may be shared with its neighbours: those
 * two go to per-thread slots that are added in thread order afterwards;
 * every other row is the thread's alone and is stored directly. No atomics,
 * and the sum order depends only on T.
 *
 * Bytes per nonzero: 8 (word) + 4 or 8 (value) streamed, plus N-1 factor
 * rows of R * sizeof(REAL) gathered (cached when rows repeat, as the
 * heavy ones of power-law data do). FLOPs: N R per nonzero. The gathers
 * are latency-bound, so the rows of the nonzero PREFETCH_AHEAD places on
 * are prefetched (32 ahead measured best of 8, 32 and 64). But when the
 * factors read are small enough to stay in a core's L2 the prefetches are
 * only instructions, and slower, so the caller turns them off there (pf).
 * Their loop over a row's cache lines is unrolled, and every line of the
 * row is prefetched: fewer lost on cpu20m. The timings are in
 * bench/RESULTS.md.
 *
 * Fibers (issue 45): where the copy has a fiber level (amp_copy's
 * fiber_mode, the middle mode m: each row's nonzeros grouped by index m),
 * every kernel here has a fiber form (fib): per nonzero, the product of
 * its leaf rows (the N-2 modes other than d and m; one row at 3 modes)
 * times its value is added to a fiber sum; where (row, index m) changes,
 * the fiber sum times row m of A[m] is added to the row's sum. So per
 * nonzero N-2 rows are gathered instead of N-1, and per fiber one more:
 * at 3 modes one multiply-add a nonzero and one a fiber, against two
 * multiplies and an add. A fiber sum is R values (a scratch row or
 * registers), reset at every fiber, whatever the row's length. Thread
 * ranges and block keys cut fibers wherever they fall: a fiber cut in two
 * is two fibers of the same row, summed into it one after the other, so
 * nothing relies on fibers being whole, only the sum order changes. */

#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 32
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

static inline __attribute__((always_inline)) void CAT(flush_row, SFX)(
    REAL *restrict dst, const REAL *restrict acc, unsigned R)
{
#pragma omp simd
    for (unsigned r = 0; r < R; r++)
        dst[r] = acc[r];
}

/* The kernel for block keys and for the ranks reg_kernel does not take.
 * vf32: the values are f32; three: the tensor has three modes; keyed: the
 * indices need the block keys. Called with literals so each combination
 * compiles to its own loop. */
static inline __attribute__((always_inline)) void CAT(range_kernel, SFX)(
    const amp_copy *c, unsigned d, unsigned nmodes, const REAL *const *A, unsigned R,
    REAL *restrict M, uint64_t a, uint64_t b, REAL *restrict acc, REAL *restrict tmp,
    REAL *restrict slots, uint64_t *slot_rows, REAL *restrict fac, const int pf, const int vf32,
    const int three, const int keyed, const int fib)
{
    const amp_mode_layout *l = &c->layout;
    const unsigned osh = l->shift[d], owidth = l->width[d];
    const uint64_t omask = owidth >= 64 ? UINT64_MAX : (UINT64_C(1) << owidth) - 1;
    unsigned nother = 0, sh[AMP_MAX_MODES], wd[AMP_MAX_MODES];
    uint64_t mask[AMP_MAX_MODES];
    const REAL *F[AMP_MAX_MODES];
    /* With fibers the middle mode goes last: the leaves are 0 .. nother-2. */
    const unsigned mid = fib ? c->fiber_mode : d;
    for (unsigned i = 0; i <= nmodes; i++) {
        const unsigned m = i < nmodes ? i : mid;
        if (m == d || (i < nmodes && m == mid))
            continue;
        sh[nother] = l->shift[m];
        wd[nother] = l->width[m];
        mask[nother] = wd[nother] >= 64 ? UINT64_MAX : (UINT64_C(1) << wd[nother]) - 1;
        F[nother++] = A[m];
    }
    /* Constants where three is: the compiler then drops the leaf loop. */
    const unsigned jm = three ? 1 : nother - 1;
    const unsigned nleaf = three ? (fib ? 1 : 2) : fib ? nother - 1 : nother;
    const uint64_t *restrict words = c->words;
    const float *restrict v32 = c->vals;
    const double *restrict v64 = c->vals;
    uint64_t cur = UINT64_MAX, curm = 0;
    int first = 1;

    size_t blk = 0;
    if (keyed)
        while (c->block_start[blk + 1] <= a)
            blk++;
    for (uint64_t lo = a; lo < b; blk++) {
        uint64_t hi = keyed && c->block_start[blk + 1] < b ? c->block_start[blk + 1] : b;
        const uint64_t key = keyed ? c->block_key[blk] : 0;
        for (uint64_t k = lo; k < hi; k++) {
            const uint64_t w = words[k];
            const uint64_t row = keyed ? amp_blco_field(key, w, osh, owidth) : (w >> osh) & omask;
            const uint64_t mi = !fib ? 0
                                : keyed ? amp_blco_field(key, w, sh[jm], wd[jm])
                                        : (w >> sh[jm]) & mask[jm];
            if (fib && (row != cur || mi != curm)) {
                /* A fiber ends: its sum times its middle row into the row. */
                if (cur != UINT64_MAX) {
                    const REAL *restrict rm = F[jm] + curm * R;
#pragma omp simd
                    for (unsigned r = 0; r < R; r++)
                        acc[r] += fac[r] * rm[r];
                }
                curm = mi;
#pragma omp simd
                for (unsigned r = 0; r < R; r++)
                    fac[r] = 0;
            }
            if (row != cur) {
                if (cur != UINT64_MAX) {
                    if (first) {
                        CAT(flush_row, SFX)(slots, acc, R);
                        slot_rows[0] = cur;
                        first = 0;
                    } else {
                        CAT(flush_row, SFX)(M + cur * R, acc, R);
                    }
                }
                cur = row;
#pragma omp simd
                for (unsigned r = 0; r < R; r++)
                    acc[r] = 0;
            }
            const REAL v = vf32 ? (REAL)v32[k] : (REAL)v64[k];
            if (!keyed && pf && k + PREFETCH_AHEAD < hi) {
                /* The factor rows of a nonzero further on: the gathers are
                 * latency-bound, and the words say where they will be. */
                const uint64_t wa = words[k + PREFETCH_AHEAD];
                const unsigned np = three ? 2 : nother;
                for (unsigned j = 0; j < np; j++) {
                    const char *pj = (const char *)(F[j] + ((wa >> sh[j]) & mask[j]) * R);
#pragma GCC unroll 16
                    for (size_t off = 0; off < R * sizeof(REAL); off += 64)
                        __builtin_prefetch(pj + off);
                }
            }
            if (fib && nleaf == 1) {
                const uint64_t i0 = keyed ? amp_blco_field(key, w, sh[0], wd[0]) : (w >> sh[0]) & mask[0];
                const REAL *restrict r0 = F[0] + i0 * R;
#pragma omp simd
                for (unsigned r = 0; r < R; r++)
                    fac[r] += v * r0[r];
            } else if (three && !fib) {
                const uint64_t i0 = keyed ? amp_blco_field(key, w, sh[0], wd[0]) : (w >> sh[0]) & mask[0];
                const uint64_t i1 = keyed ? amp_blco_field(key, w, sh[1], wd[1]) : (w >> sh[1]) & mask[1];
                const REAL *restrict r0 = F[0] + i0 * R;
                const REAL *restrict r1 = F[1] + i1 * R;
#pragma omp simd
                for (unsigned r = 0; r < R; r++)
                    acc[r] += v * r0[r] * r1[r];
            } else {
                const uint64_t i0 = keyed ? amp_blco_field(key, w, sh[0], wd[0]) : (w >> sh[0]) & mask[0];
                const REAL *restrict r0 = F[0] + i0 * R;
#pragma omp simd
                for (unsigned r = 0; r < R; r++)
                    tmp[r] = v * r0[r];
                for (unsigned j = 1; j < nleaf; j++) {
                    const uint64_t ij = keyed ? amp_blco_field(key, w, sh[j], wd[j]) : (w >> sh[j]) & mask[j];
                    const REAL *restrict rj = F[j] + ij * R;
#pragma omp simd
                    for (unsigned r = 0; r < R; r++)
                        tmp[r] *= rj[r];
                }
                REAL *restrict sum = fib ? fac : acc;
#pragma omp simd
                for (unsigned r = 0; r < R; r++)
                    sum[r] += tmp[r];
            }
        }
        lo = hi;
    }
    if (fib && cur != UINT64_MAX) {   /* the last fiber */
        const REAL *restrict last = F[jm] + curm * R;
#pragma omp simd
        for (unsigned r = 0; r < R; r++)
            acc[r] += fac[r] * last[r];
    }
    if (cur != UINT64_MAX) {
        unsigned s = first ? 0 : 1;
        CAT(flush_row, SFX)(slots + (size_t)s * R, acc, R);
        slot_rows[s] = cur;
    }
}

#define RANGE(VF, THREE, KEYED)                                                           \
    do {                                                                                  \
        if (fib)                                                                          \
            CAT(range_kernel, SFX)(c, d, nmodes, A, R, M, a, b, acc, tmp, slots, slot_rows, \
                                   fac, pf, VF, THREE, KEYED, 1);                         \
        else                                                                              \
            CAT(range_kernel, SFX)(c, d, nmodes, A, R, M, a, b, acc, tmp, slots, slot_rows, \
                                   fac, pf, VF, THREE, KEYED, 0);                         \
    } while (0)

/* One thread's range, compiled for several instruction sets (the widest
 * the CPU has is picked at load time); the OpenMP region that calls it is
 * outlined by the compiler and would not carry the attribute itself. */
AMP_KERNEL_CLONES static void CAT(thread_range, SFX)(
    const amp_copy *c, unsigned d, unsigned nmodes, const REAL *const *A, unsigned R,
    REAL *M, uint64_t a, uint64_t b, REAL *acc, REAL *tmp, REAL *slots, uint64_t *slot_rows,
    REAL *fac, int f32, int pf, int fib)
{
    if (c->layout.key_bits > 0) {
        if (f32)
            RANGE(1, 0, 1);
        else
            RANGE(0, 0, 1);
    } else if (nmodes == 3) {
        if (f32)
            RANGE(1, 1, 0);
        else
            RANGE(0, 1, 0);
    } else {
        if (f32)
            RANGE(1, 0, 0);
        else
            RANGE(0, 0, 0);
    }
}

#ifdef AMP_REG_KERNELS
/* The register-sum kernel for each instruction set, its vectors as wide as
 * that set's registers: GCC keeps wider generic vectors in memory, which
 * on an AVX2 build made the register sum slower than summing in the
 * scratch row (found in review: a third of the AVX2 copy's instructions
 * of a 64-byte-vector version were stack accesses). */
#define VB 64
#define VSFX CAT(SFX, _v4)
#define VTARGET __attribute__((target("arch=x86-64-v4")))
#include "mttkrp_cpu_reg.h"
#undef VB
#undef VSFX
#undef VTARGET
#define VB 32
#define VSFX CAT(SFX, _v3)
#define VTARGET __attribute__((target("arch=x86-64-v3")))
#include "mttkrp_cpu_reg.h"
#undef VB
#undef VSFX
#undef VTARGET
#endif

#undef RANGE

static void CAT(mttkrp, SFX)(const amp_tensor *t, unsigned d, const REAL *const *A,
                             unsigned R, REAL *M, amp_cpu_mttkrp_ws *ws)
{
    const amp_copy *c = &t->copies[d];
    const int T = ws->nthreads;
    const unsigned nmodes = t->nmodes;
    const uint64_t nnz = c->nnz;
    const size_t stride = ws->stride;
    size_t gathered = 0;   /* bytes of the factors the nonzeros read */
    for (unsigned m = 0; m < nmodes; m++)
        if (m != d)
            gathered += (size_t)t->rows[m] * R * sizeof(REAL);
    const int pf = gathered > ws->l2_bytes / 2;
    /* The register sum where the CPU has one and the rank fills a vector
     * (below that it gathers a whole vector a row, and lost at ranks 1 and
     * 8, bench/RESULTS.md); block keys take the scratch-row kernel. */
    int reg = c->layout.key_bits > 0 ? 0 : ws->isa;
    if (reg && R < (reg == 4 ? 64 : 32) / sizeof(REAL))
        reg = 0;
    /* Fibers where the copy has them (a middle mode, at least 3 modes)
     * and, by default, only where they were measured to pay: in f64 and
     * long. A fiber's end costs a branch the CPU mispredicts, against a
     * multiply saved a nonzero, and the middle rows the nonzero kernel
     * gathers again are L1 hits, so fibers save no cache miss here; in
     * f32 the fiber kernels were slower in 11 of 13 runs (bench/RESULTS.md,
     * issue 45). */
    const int fib = ws->fibers != 0 && c->has_fibers && nmodes >= 3 &&
                    (ws->fibers > 0 ||
                     (sizeof(REAL) == 8 &&
                      (double)c->nnz >= AMP_CPU_FIBER_MIN_NNZ * (double)c->nfibers));
#pragma omp parallel num_threads(T)
    {
        int me = amp_thread_id();
        REAL *base = (REAL *)((char *)ws->scratch + (size_t)me * ws->thread_bytes);
        uint64_t *rows = ws->slot_rows + 2 * (size_t)me;
        rows[0] = rows[1] = UINT64_MAX;
        uint64_t a = amp_part_start(nnz, me, T), b = amp_part_start(nnz, me + 1, T);
        const int f32 = t->value_type == AMP_VALUES_F32;
        if (a >= b)
            ;
#ifdef AMP_REG_KERNELS
        else if (reg == 4)
            CAT(reg_range, CAT(SFX, _v4))(c, d, nmodes, t->rows, A, R, M, a, b,
                                           base + 2 * stride, rows, f32, pf, fib);
        else if (reg == 3)
            CAT(reg_range, CAT(SFX, _v3))(c, d, nmodes, t->rows, A, R, M, a, b,
                                           base + 2 * stride, rows, f32, pf, fib);
#endif
        else
            CAT(thread_range, SFX)(c, d, nmodes, A, R, M, a, b, base, base + stride,
                                   base + 2 * stride, rows, base + 4 * stride, f32, pf, fib);
    }
    /* The shared rows, in thread order: the first time a row is seen it is
     * stored, after that added to. */
    uint64_t last = UINT64_MAX;
    for (int th = 0; th < T; th++) {
        const REAL *slots = (const REAL *)((const char *)ws->scratch +
                                           (size_t)th * ws->thread_bytes) + 2 * stride;
        for (int s = 0; s < 2; s++) {
            uint64_t row = ws->slot_rows[2 * (size_t)th + s];
            if (row == UINT64_MAX)
                continue;
            REAL *dst = M + row * R;
            const REAL *src = slots + (size_t)s * R;
            if (row == last)
                for (unsigned r = 0; r < R; r++)
                    dst[r] += src[r];
            else
                for (unsigned r = 0; r < R; r++)
                    dst[r] = src[r];
            last = row;
        }
    }
}

#undef CAT
#undef CAT_
