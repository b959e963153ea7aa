/* The register-sum MTTKRP kernel for one factor precision and one vector
 * width: mttkrp_cpu_impl.h includes this once per instruction set, with
 * REAL and SFX (the precision), VB (vector bytes: the set's register
 * width), VSFX (the instance's name suffix) and VTARGET (its target
 * attribute). Thread mapping, slots and the bytes model are as in
 * mttkrp_cpu_impl.h's header. */

/* Every layout without block keys: the row's sum lives in NV vector
 * registers of VB bytes instead of the scratch row (the unrolled loops over
 * u are what let GCC keep acc[] in registers). Summing into memory chains
 * the nonzeros of a row through a load, an add and a store of the same
 * lines, a round trip per nonzero that no prefetch hides. It gains most
 * where the factors stay in L2, least in f64 where gathers from beyond L2
 * set the pace (bench/RESULTS.md has the rounds).
 *
 * One call sums the columns [c0, c0 + lanes) of the rows, lanes at most
 * 8 vectors (with VB 64: 64 f64 or 128 f32 columns); a wider rank takes
 * several calls,
 * each a pass over the thread's nonzeros (8 or 12 more bytes streamed a
 * nonzero against 1 KiB of rows gathered). When lanes is not a multiple of
 * a vector the last vector reads past the window, into the next row: the
 * rows too near a matrix's end for that (idx >= nsafe[j]) are copied into
 * a buffer first, and only the window's lanes are stored. */
typedef REAL CAT(vec, VSFX) __attribute__((vector_size(VB)));
typedef REAL CAT(uvec, VSFX) __attribute__((vector_size(VB), aligned(sizeof(REAL)), may_alias));

static inline __attribute__((always_inline)) void CAT(reg_kernel, VSFX)(
    const amp_copy *c, unsigned d, unsigned nmodes, const uint64_t *nrows,
    const REAL *const *A, unsigned R_run, REAL *restrict M, uint64_t a, uint64_t b,
    REAL *restrict slots, uint64_t *slot_rows, const int pf, const int vf32, const int three,
    const unsigned NV, const int part, const int exact, unsigned c0, const int fib)
{
    typedef CAT(vec, VSFX) vec;
    typedef CAT(uvec, VSFX) uvec;
    enum { VL = VB / sizeof(REAL) };
    /* part: the window's last vector is only partly the window's; exact:
     * the rank is the one window (a constant, so row addresses are shifts:
     * a multiply would sit on every gather's latency). */
    const unsigned W = NV * VL, R = exact ? W : R_run, lanes = part ? R - c0 : W;
    const amp_mode_layout *l = &c->layout;
    const unsigned osh = l->shift[d];
    const uint64_t omask = l->width[d] >= 64 ? UINT64_MAX : (UINT64_C(1) << l->width[d]) - 1;
    unsigned nother = 0, sh[AMP_MAX_MODES];
    uint64_t mask[AMP_MAX_MODES], nsafe[AMP_MAX_MODES];
    const REAL *F[AMP_MAX_MODES];
    /* With fibers the middle mode goes last (mttkrp_cpu_impl.h). */
    const unsigned mid = fib ? c->fiber_mode : d;
    for (unsigned i = 0; i <= nmodes; i++) {
        const unsigned m = i < nmodes ? i : mid;
        if (m == d || (i < nmodes && m == mid))
            continue;
        sh[nother] = l->shift[m];
        mask[nother] = l->width[m] >= 64 ? UINT64_MAX : (UINT64_C(1) << l->width[m]) - 1;
        /* Row idx reads [idx R + c0, idx R + c0 + W) of the matrix: the
         * rows below nsafe can read a whole window in place. */
        const uint64_t total = nrows[m] * R;
        nsafe[nother] = total >= c0 + W ? (total - c0 - W) / R + 1 : 0;
        F[nother++] = A[m] + c0;
    }
    /* Rows near a factor's end, copied; the lanes past the window are
     * computed but never stored: zero keeps them ordinary numbers. */
    REAL pad[AMP_MAX_MODES][8 * VL];
    for (unsigned j = 0; j < nother; j++)
        for (unsigned r = lanes; r < W; r++)
            pad[j][r] = 0;
    const uint64_t *restrict words = c->words;
    const float *restrict v32 = c->vals;
    const double *restrict v64 = c->vals;
    /* Constants where three is: the compiler then drops the leaf loop. */
    const unsigned jm = three ? 1 : nother - 1;
    const unsigned nleaf = three ? (fib ? 1 : 2) : fib ? nother - 1 : nother;
    uint64_t cur = UINT64_MAX, curm = 0;
    int first = 1;
    vec acc[8], fac[8];
#pragma GCC unroll 8
    for (unsigned u = 0; u < NV; u++)
        acc[u] = fac[u] = (vec){0};

/* The window's lanes of acc to dst: whole vectors, the last one lane by
 * lane when it is only partly the window's. */
#define STORE(dst)                                                                         \
    do {                                                                                   \
        _Pragma("GCC unroll 8") for (unsigned u = 0; u + 1 < NV; u++)                      \
            *(uvec *)((dst) + u * VL) = acc[u];                                            \
        if (!part)                                                                         \
            *(uvec *)((dst) + (NV - 1) * VL) = acc[NV - 1];                                \
        else                                                                               \
            for (unsigned r = (NV - 1) * VL; r < lanes; r++)                               \
                (dst)[r] = acc[NV - 1][r - (NV - 1) * VL];                                 \
    } while (0)
/* Row idx of input j, through pad where its window would run past the
 * matrix's end. */
#define ROW(j, idx)                                                                        \
    (part && __builtin_expect((idx) >= nsafe[j], 0)                                        \
         ? (const REAL *)memcpy(pad[j], F[j] + (idx) * R, lanes * sizeof(REAL))            \
         : F[j] + (idx) * R)

    for (uint64_t k = a; k < b; k++) {
        const uint64_t w = words[k];
        const uint64_t row = (w >> osh) & omask;
        const uint64_t mi = fib ? (w >> sh[jm]) & mask[jm] : 0;
        if (fib && (row != cur || mi != curm)) {
            /* A fiber ends: its sum times its middle row into the row. */
            if (cur != UINT64_MAX) {
                const REAL *rm = ROW(jm, curm);
#pragma GCC unroll 8
                for (unsigned u = 0; u < NV; u++)
                    acc[u] += fac[u] * *(const uvec *)(rm + u * VL);
            }
            curm = mi;
#pragma GCC unroll 8
            for (unsigned u = 0; u < NV; u++)
                fac[u] = (vec){0};
        }
        if (row != cur) {
            if (cur != UINT64_MAX) {
                REAL *dst = M + cur * R + c0;
                if (first) {
                    dst = slots + c0;
                    slot_rows[0] = cur;
                    first = 0;
                }
                STORE(dst);
            }
            cur = row;
#pragma GCC unroll 8
            for (unsigned u = 0; u < NV; u++)
                acc[u] = (vec){0};
        }
        if (pf && k + PREFETCH_AHEAD < b) {
            const uint64_t wa = words[k + PREFETCH_AHEAD];
            const unsigned np = three ? 2 : nother;
            for (unsigned j = 0; j < np; j++) {
                const char *pj = (const char *)(F[j] + ((wa >> sh[j]) & mask[j]) * R);
#pragma GCC unroll 8
                for (unsigned off = 0; off < NV * VB; off += 64)
                    __builtin_prefetch(pj + off);
            }
        }
        const REAL v = vf32 ? (REAL)v32[k] : (REAL)v64[k];
        const REAL *r0 = ROW(0, (w >> sh[0]) & mask[0]);
        if (fib && nleaf == 1) {
#pragma GCC unroll 8
            for (unsigned u = 0; u < NV; u++)
                fac[u] += v * *(const uvec *)(r0 + u * VL);
        } else if (three && !fib) {
            const REAL *r1 = ROW(1, (w >> sh[1]) & mask[1]);
#pragma GCC unroll 8
            for (unsigned u = 0; u < NV; u++)
                acc[u] += v * *(const uvec *)(r0 + u * VL) * *(const uvec *)(r1 + u * VL);
        } else {
            vec t[8];
#pragma GCC unroll 8
            for (unsigned u = 0; u < NV; u++)
                t[u] = v * *(const uvec *)(r0 + u * VL);
            for (unsigned j = 1; j < nleaf; j++) {
                const REAL *rj = ROW(j, (w >> sh[j]) & mask[j]);
#pragma GCC unroll 8
                for (unsigned u = 0; u < NV; u++)
                    t[u] *= *(const uvec *)(rj + u * VL);
            }
            if (fib) {
#pragma GCC unroll 8
                for (unsigned u = 0; u < NV; u++)
                    fac[u] += t[u];
            } else {
#pragma GCC unroll 8
                for (unsigned u = 0; u < NV; u++)
                    acc[u] += t[u];
            }
        }
    }
    if (fib && cur != UINT64_MAX) {   /* the last fiber */
        const REAL *last = ROW(jm, curm);
#pragma GCC unroll 8
        for (unsigned u = 0; u < NV; u++)
            acc[u] += fac[u] * *(const uvec *)(last + u * VL);
    }
#undef ROW
    if (cur != UINT64_MAX) {
        STORE(slots + (size_t)(first ? 0 : 1) * R + c0);
        slot_rows[first ? 0 : 1] = cur;
    }
#undef STORE
}

#define REG_NV(THREE, NV, PART, EXACT, C0)                                                 \
    CAT(reg_kernel, VSFX)(c, d, nmodes, nrows, A, R, M, a, b, slots, slot_rows, pf, f32, THREE, \
                         NV, PART, EXACT, C0, FIB)
#define REG_LAST(THREE, NV, C0)                                                             \
    do {                                                                                    \
        if ((C0) == 0 && R == (NV) * VL_)                                                   \
            REG_NV(THREE, NV, 0, 1, 0);                                                     \
        else if ((R - (C0)) % VL_ == 0)                                                     \
            REG_NV(THREE, NV, 0, 0, C0);                                                    \
        else                                                                                \
            REG_NV(THREE, NV, 1, 0, C0);                                                    \
    } while (0)
/* Full windows of 8 vectors, then one of as many as the rest needs. */
#define REG(THREE)                                                                          \
    do {                                                                                    \
        const unsigned VL_ = VB / sizeof(REAL);                                             \
        unsigned c0 = 0;                                                                    \
        for (; R - c0 > WMAX * VL_; c0 += WMAX * VL_)                                       \
            REG_NV(THREE, WMAX, 0, 0, c0);                                                     \
        switch ((R - c0 + VL_ - 1) / VL_) {                                                 \
        case 1: REG_LAST(THREE, 1, c0); break;                                              \
        case 2: REG_LAST(THREE, 2, c0); break;                                              \
        case 3: REG_LAST(THREE, 3, c0); break;                                              \
        case 4: REG_LAST(THREE, 4, c0); break;                                              \
        case 5: REG_LAST(THREE, 5, c0); break;                                              \
        case 6: REG_LAST(THREE, 6, c0); break;                                              \
        case 7: REG_LAST(THREE, 7, c0); break;                                              \
        default: REG_LAST(THREE, 8, c0); break;                                             \
        }                                                                                   \
    } while (0)

/* One thread's range [a, b) of the mode-d copy, summed in registers:
 * full windows of WMAX vectors, then one of as many as the rest needs.
 * WMAX is 8 but for fibers with 16 registers (AVX2), where the row's and
 * the fiber's sums of 8 vectors each would fill all 16. */
static VTARGET void CAT(reg_range, VSFX)(const amp_copy *c, unsigned d, unsigned nmodes,
                                         const uint64_t *nrows, const REAL *const *A,
                                         unsigned R, REAL *M, uint64_t a, uint64_t b,
                                         REAL *slots, uint64_t *slot_rows, int f32, int pf,
                                         int fib)
{
    if (fib) {
#define FIB 1
#define WMAX (VB == 32 ? 4 : 8)
        if (nmodes == 3)
            REG(1);
        else
            REG(0);
#undef WMAX
#undef FIB
    } else {
#define FIB 0
#define WMAX 8
        if (nmodes == 3)
            REG(1);
        else
            REG(0);
#undef WMAX
#undef FIB
    }
}

#undef REG_NV
#undef REG_LAST
#undef REG
