/* The constrained methods (AO-ADMM, MU, HALS) of the CPU backend.
 *
 * The row updates against what they must converge to, row by row on
 * random problems: the least-squares solution where nothing constrains
 * (AO-ADMM and HALS; 1e-8 normwise), the ridge solution with l2, and the
 * KKT conditions of the non-negative (and l1) least squares where
 * non-negative (AO-ADMM and HALS 1e-8, MU 1e-4 relative: it converges
 * slowly). Then whole runs: every non-negative factor non-negative after
 * every iteration (MU and HALS: positive, their floor) while an
 * unconstrained mode may go negative; the reported fit equal to the one
 * the factors and lambda give (1e-10, cp_ref.h); the same fits on 1 and 2
 * threads (1e-10); a planted non-negative rank-3 tensor recovered to fit
 * > 0.99 by every method; aminoacid.tns at rank 3 to fit >= 0.97.
 *
 * Issue 40: every method with every setting it accepts (no constraint or
 * non-negative, l1, l2) against an independent update written here
 * (one application, from starts of both signs), the lasso's KKT point
 * without a constraint (AO-ADMM, with and without --admm-tol, and HALS),
 * and the whole loop (warm start, AO-ADMM's dual and start scale, lambda)
 * against a reference of it on a tensor of both signs. */
#include <config.h>

#include "tap.h"
#include "cpd_util.h"

#define NMETHODS 3
static const amp_method methods[NMETHODS] = {AMP_METHOD_ADMM, AMP_METHOD_MU, AMP_METHOD_HALS};

/* A random symmetric positive definite R x R V (a product of Grams, as in
 * CP) and n rows of M. */
static void random_problem(unsigned R, uint64_t n, uint64_t seed, double *V, double *M,
                           int nonneg)
{
    double *B = random_matrix(3 * R, R, seed), *C = random_matrix(2 * R, R, seed + 1);
    for (unsigned k = 0; nonneg && k < 3 * R * R; k++) {
        B[k] = fabs(B[k]);
        C[k % (2 * R * R)] = fabs(C[k % (2 * R * R)]);
    }
    double G1[64 * 64], G2[64 * 64];
    cp_ref_gram(B, 3 * R, R, G1);
    cp_ref_gram(C, 2 * R, R, G2);
    for (unsigned k = 0; k < R * R; k++)
        V[k] = G1[k] * G2[k];
    double *m = random_matrix(n, R, seed + 2);
    memcpy(M, m, n * R * sizeof *M);
    free(m);
    free(B);
    free(C);
}

/* n rows M = A* V - Z whose non-negative least squares solution is A*:
 * A* uniform in [0.2, 1.2) with a third of its entries 0, Z 0.1 where
 * A* is 0 (the gradient there) and 0 elsewhere (V non-negative, so that
 * M is too where A* is not 0). */
static double *planted_rows(const double *V, unsigned R, uint64_t n, uint64_t seed)
{
    double *M = malloc(n * R * sizeof *M), a[64];
    for (uint64_t i = 0; i < n; i++) {
        for (unsigned r = 0; r < R; r++) {
            uint64_t z = rng_next(&seed);
            a[r] = z % 3 == 0 ? 0 : 0.2 + (double)(z >> 11) / 9007199254740992.0;
        }
        for (unsigned r = 0; r < R; r++) {
            double s = a[r] == 0 ? -0.1 : 0;
            for (unsigned q = 0; q < R; q++)
                s += a[q] * V[q * R + r];
            M[i * R + r] = s;
        }
    }
    return M;
}

/* Largest violation, over the rows, of the KKT conditions of
 * min (1/2) a V a' - m a' + l1 sum a + (l2/2) |a|^2 subject to a >= 0,
 * with g = a V - m + l2 a + l1: a >= 0, g >= 0 and a g = 0 measured as
 * |min(a, g)|, relative to the largest |m|. floor: entries at most floor
 * count as 0 (MU and HALS keep eps). */
static double kkt_nonneg(const double *A, const double *M, const double *V, unsigned R,
                         uint64_t n, double l1, double l2, double floor)
{
    double worst = 0, scale = 0;
    for (uint64_t i = 0; i < n * R; i++)
        scale = fmax(scale, fabs(M[i]));
    for (uint64_t i = 0; i < n; i++)
        for (unsigned r = 0; r < R; r++) {
            double g = -M[i * R + r] + l2 * A[i * R + r] + l1;
            for (unsigned q = 0; q < R; q++)
                g += A[i * R + q] * V[q * R + r];
            double a = A[i * R + r] <= floor ? 0 : A[i * R + r];
            double v = fabs(fmin(a, g));
            if (A[i * R + r] < 0 || isnan(v))
                return INFINITY;
            worst = fmax(worst, v);
        }
    return worst / scale;
}

/* The rows A = M (V + l2 I)^-1, for the unconstrained case. */
static void ridge(const double *V, const double *M, unsigned R, uint64_t n, double l2,
                  double *A)
{
    double W[64 * 64];
    memcpy(W, V, (size_t)R * R * sizeof *W);
    for (unsigned r = 0; r < R; r++)
        W[r * R + r] += l2;
    memcpy(A, M, n * R * sizeof *A);
    if (!cp_ref_solve(W, R, A, n))
        exit(99);
}

/* sweeps applications of the method's update to rows starting at 1. */
static void run_update(amp_method method, amp_mode_rule rule, unsigned R, const double *V,
                       const double *M, uint64_t n, unsigned inner, unsigned sweeps, double *A)
{
    amp_update_args ua = {.method = method, .rule = rule, .rank = R, .inner = inner, .V = V};
    double P[64 * 64];
    amp_error err = {0};
    double *U = calloc(n * R, sizeof *U);
    double *scratch = malloc(amp_cpu_update_scratch(&ua, n) + 8);
    if (method == AMP_METHOD_ADMM && amp_cpu_admm_prepare(&ua, P, &err) != AMP_OK)
        exit(99);
    for (uint64_t k = 0; k < n * R; k++)
        A[k] = 1;
    for (unsigned s = 0; s < sweeps; s++)
        amp_cpu_update_rows(&ua, M, A, U, n, scratch);
    free(U);
    free(scratch);
}

#define ROW_CHECKS 10
static void test_rows(void)
{
    enum { R = 6, N = 40 };
    double V[R * R], M[N * R], A[N * R], want[N * R];
    random_problem(R, N, 5, V, M, 0);
    const amp_mode_rule none = {AMP_CONSTRAINT_NONE, 0, 0}, nonneg = {AMP_CONSTRAINT_NONNEG, 0, 0};
    const amp_mode_rule ridged = {AMP_CONSTRAINT_NONE, 0, 0.7};
    const amp_mode_rule sparse = {AMP_CONSTRAINT_NONNEG, 0.05, 0.2};

    ridge(V, M, R, N, 0, want);
    run_update(AMP_METHOD_ADMM, none, R, V, M, N, 1000, 1, A);
    double e = rel_diff(A, want, N * R);
    ok(e <= 1e-8, "AO-ADMM, no constraint, 1000 inner iterations: the least-squares rows "
       "(%.1e)", e);
    run_update(AMP_METHOD_HALS, none, R, V, M, N, 0, 2000, A);
    e = rel_diff(A, want, N * R);
    ok(e <= 1e-8, "HALS, no constraint, 2000 sweeps: the least-squares rows (%.1e)", e);

    ridge(V, M, R, N, 0.7, want);
    run_update(AMP_METHOD_ADMM, ridged, R, V, M, N, 1000, 1, A);
    e = rel_diff(A, want, N * R);
    ok(e <= 1e-8, "AO-ADMM, l2 0.7: the ridge rows M (V + 0.7 I)^-1 (%.1e)", e);
    run_update(AMP_METHOD_HALS, ridged, R, V, M, N, 0, 2000, A);
    e = rel_diff(A, want, N * R);
    ok(e <= 1e-8, "HALS, l2 0.7: the ridge rows (%.1e)", e);

    run_update(AMP_METHOD_ADMM, nonneg, R, V, M, N, 1000, 1, A);
    e = kkt_nonneg(A, M, V, R, N, 0, 0, 0);
    ok(e <= 1e-8, "AO-ADMM, non-negative: KKT residual of the NNLS rows %.1e", e);
    run_update(AMP_METHOD_HALS, nonneg, R, V, M, N, 0, 2000, A);
    e = kkt_nonneg(A, M, V, R, N, 0, 0, AMP_UPDATE_EPS);
    ok(e <= 1e-8, "HALS, non-negative: KKT residual %.1e", e);
    /* MU converges slowly where a random M puts the solution on the
     * boundary at a sharp angle: its rows get a known solution instead,
     * a third of its entries 0 with a gradient of 0.1 pushing them there. */
    /* MU is for non-negative data: its V is the Grams' product of
     * non-negative factors, non-negative itself. */
    double Vmu[R * R], Mjunk[N * R];
    random_problem(R, N, 15, Vmu, Mjunk, 1);
    double *Mmu = planted_rows(Vmu, R, N, 9);
    run_update(AMP_METHOD_MU, nonneg, R, Vmu, Mmu, N, 0, 20000, A);
    e = kkt_nonneg(A, Mmu, Vmu, R, N, 0, 0, 1e-6);
    ok(e <= 1e-4, "MU, non-negative, 20000 sweeps: KKT residual %.1e", e);

    for (int k = 0; k < NMETHODS; k++) {
        amp_method m = methods[k];
        const double *Mk = m == AMP_METHOD_MU ? Mmu : M, *Vk = m == AMP_METHOD_MU ? Vmu : V;
        run_update(m, sparse, R, Vk, Mk, N, 1000, m == AMP_METHOD_ADMM ? 1 : m == AMP_METHOD_MU
                   ? 20000 : 2000, A);
        e = kkt_nonneg(A, Mk, Vk, R, N, 0.05, 0.2, m == AMP_METHOD_MU ? 1e-6 : AMP_UPDATE_EPS);
        ok(e <= (m == AMP_METHOD_MU ? 1e-4 : 1e-8), "%s, non-negative, l1 0.05, l2 0.2: KKT "
           "residual %.1e", amp_method_name(m), e);
    }
    free(Mmu);
}

/* A non-negative rank-3 tensor with sparse factors: each column nonzero
 * on a few indices, the tensor every nonzero of the model on their
 * blocks (so it is exactly rank 3 and sparse). */
static void planted(amp_coo *x)
{
    enum { R = 3, K = 6 };
    static const uint64_t dims[3] = {40, 30, 20};
    double f[3][R][K];
    uint64_t at[3][R][K];
    uint64_t seed = 77;
    for (unsigned m = 0; m < 3; m++)
        for (unsigned r = 0; r < R; r++)
            for (unsigned k = 0; k < K; k++) {
                at[m][r][k] = (r * K + k * 2) % dims[m];   /* blocks overlap a little */
                f[m][r][k] = 0.5 + (double)(rng_next(&seed) >> 11) / 9007199254740992.0;
            }
    amp_error err = {0};
    if (amp_coo_init(x, 3, &err) || amp_coo_reserve(x, R * K * K * K, &err))
        exit(99);
    for (unsigned m = 0; m < 3; m++)
        x->dims[m] = dims[m];
    for (unsigned r = 0; r < R; r++)
        for (unsigned i = 0; i < K; i++)
            for (unsigned j = 0; j < K; j++)
                for (unsigned k = 0; k < K; k++) {
                    uint64_t n = x->nnz++;
                    x->ind[0][n] = at[0][r][i];
                    x->ind[1][n] = at[1][r][j];
                    x->ind[2][n] = at[2][r][k];
                    x->val[n] = f[0][r][i] * f[1][r][j] * f[2][r][k];
                }
}

/* o with the method and one rule for every mode. */
static amp_cpd_opts method_opts(amp_method m, unsigned R, unsigned iters, double tol)
{
    amp_cpd_opts o;
    amp_cpd_opts_init(&o);
    o.rank = R;
    o.max_iters = iters;
    o.tol = tol;
    o.method = m;
    o.rules.n_constraint = 1;
    o.rules.constraint[0] = AMP_CONSTRAINT_NONNEG;
    return o;
}

#define RUN_CHECKS (NMETHODS * 4 + 2 + 2)
static void test_runs(void)
{
    static const shape sh = {"random", 3, {30, 25, 20}, 2500, 0};
    amp_coo x;
    amp_tensor t;
    random_tensor(&sh, 3, &x);   /* values from -0.25: negative entries too */
    if (!prepare(&x, "constrained.amp", 4, 997, &t)) {
        ok(0, "random: prepares");
        skip(RUN_CHECKS - 1, "no file");
        amp_coo_free(&x);
        return;
    }
    cp_ref_tensor rx;
    if (!cp_ref_tensor_from(&x, &rx))
        exit(99);
    for (int k = 0; k < NMETHODS; k++) {
        const amp_method m = methods[k];
        const char *name = amp_method_name(m);
        /* After every iteration: runs of 1 to 4 from one start (each is
         * the longer one's prefix). */
        double lowest = INFINITY, neg_free = INFINITY;
        int fine = 1;
        for (unsigned iters = 1; iters <= 4; iters++) {
            amp_cpd_opts o = method_opts(m, 4, iters, 0);
            if (m != AMP_METHOD_MU) {   /* mode 2 free: it may go negative */
                o.rules.n_constraint = 3;
                o.rules.constraint[0] = o.rules.constraint[2] = AMP_CONSTRAINT_NONNEG;
                o.rules.constraint[1] = AMP_CONSTRAINT_NONE;
            }
            amp_cpd c;
            amp_error err = {0};
            fine &= amp_cpd_init_random(&t, 4, 2, &c, &err) == AMP_OK &&
                    amp_cpu_als(&t, &o, &c, &err) == AMP_OK;
            /* min_or_nan: fmin would skip a NaN entry, and all NaN
             * would leave INFINITY, "> 0". */
            for (unsigned d = 0; fine && d < 3; d++)
                for (uint64_t i = 0; i < t.rows[d] * 4; i++) {
                    if (d == 1 && m != AMP_METHOD_MU)
                        neg_free = min_or_nan(neg_free, c.A[d][i]);
                    else
                        lowest = min_or_nan(lowest, c.A[d][i]);
                }
            if (fine && iters == 4) {
                double A0[3][30 * 4];
                double *Ao[3] = {A0[0], A0[1], A0[2]};
                for (unsigned d = 0; d < 3; d++) {
                    memset(A0[d], 0, sizeof A0[d]);
                    for (uint64_t i = 0; i < t.rows[d]; i++)
                        memcpy(Ao[d] + t.new_to_orig[d][i] * 4, c.A[d] + i * 4, 32);
                }
                double mine = cp_ref_fit(&rx, Ao, c.lambda, 4);
                ok(fabs(mine - c.fit) <= 1e-10, "%s: the fit %.12f is what the factors and "
                   "lambda give (%.12f)", name, c.fit, mine);
            }
            amp_cpd_free(&c);
        }
        if (!fine)
            skip(1, "a run failed");
        ok(fine && (m == AMP_METHOD_ADMM ? lowest >= 0 : lowest > 0), "%s: non-negative modes' "
           "smallest entry after each of 4 iterations %.3g (%s)", name, lowest,
           m == AMP_METHOD_ADMM ? ">= 0" : "> 0: the floor");
        if (m != AMP_METHOD_MU)
            ok(fine && neg_free < 0, "%s: the unconstrained mode goes negative (%.3g)", name,
               neg_free);
        /* 1 and 2 threads. */
        double fit[2] = {NAN, NAN};
        for (int th = 1; th <= 2; th++) {
            amp_cpd_opts o = method_opts(m, 4, 6, 0);
            o.threads = th;
            amp_cpd c;
            amp_error err = {0};
            if (amp_cpd_init_random(&t, 4, 2, &c, &err) == AMP_OK &&
                amp_cpu_als(&t, &o, &c, &err) == AMP_OK)
                fit[th - 1] = c.fit;
            amp_cpd_free(&c);
        }
        ok(fabs(fit[0] - fit[1]) <= 1e-10, "%s: 6 iterations on 1 and 2 threads: fits %.12f "
           "and %.12f", name, fit[0], fit[1]);
    }
    /* f32 MTTKRP: the same path with the f32 kernel; its fits within
     * 1e-4 of the f64 run's after 6 iterations (f32 sums). */
    for (int k = 0; k < NMETHODS; k++) {
        double f[2] = {NAN, NAN};
        for (int p = 0; p < 2; p++) {
            amp_cpd_opts o = method_opts(methods[k], 4, 6, 0);
            o.precision = p ? AMP_PRECISION_F32 : AMP_PRECISION_F64;
            amp_cpd c;
            amp_error err = {0};
            if (amp_cpd_init_random(&t, 4, 2, &c, &err) == AMP_OK &&
                amp_cpu_als(&t, &o, &c, &err) == AMP_OK)
                f[p] = c.fit;
            amp_cpd_free(&c);
        }
        ok(fabs(f[1] - f[0]) <= 1e-4, "%s: f32 MTTKRP, 6 iterations: fit %.8f (f64 %.8f)",
           amp_method_name(methods[k]), f[1], f[0]);
    }
    /* AO-ADMM's stopping tolerance: tiny, it runs every inner iteration;
     * loose, it stops sooner and still converges. */
    double fit[3] = {NAN, NAN, NAN};
    for (int k = 0; k < 3; k++) {
        amp_cpd_opts o = method_opts(AMP_METHOD_ADMM, 4, 8, 0);
        o.admm_inner = 20;
        o.admm_tol = k == 0 ? 0 : k == 1 ? 1e-300 : 1e-2;
        amp_cpd c;
        amp_error err = {0};
        if (amp_cpd_init_random(&t, 4, 2, &c, &err) == AMP_OK &&
            amp_cpu_als(&t, &o, &c, &err) == AMP_OK)
            fit[k] = c.fit;
        amp_cpd_free(&c);
    }
    ok(fit[0] == fit[1], "AO-ADMM: --admm-tol 1e-300 runs every inner iteration (fit %.12f, "
       "%.12f)", fit[0], fit[1]);
    ok(fabs(fit[2] - fit[0]) <= 1e-2 && fit[2] != fit[0], "AO-ADMM: --admm-tol 1e-2 stops "
       "rows early: fit %.6f (every iteration: %.6f)", fit[2], fit[0]);
    cp_ref_tensor_free(&rx);
    amp_tensor_free(&t);
    amp_coo_free(&x);
}

static void test_planted(void)
{
    amp_coo x;
    amp_tensor t;
    planted(&x);
    if (!prepare(&x, "planted.amp", 4, 997, &t)) {
        ok(0, "planted non-negative rank 3: prepares");
        skip(NMETHODS - 1, "no file");
        amp_coo_free(&x);
        return;
    }
    for (int k = 0; k < NMETHODS; k++) {
        amp_cpd_opts o = method_opts(methods[k], 3, 2000, 1e-10);
        amp_cpd c;
        amp_error err = {0};
        int okay = amp_cpd_init_random(&t, 3, 1, &c, &err) == AMP_OK &&
                   amp_cpu_als(&t, &o, &c, &err) == AMP_OK;
        ok(okay && c.fit > 0.99, "planted non-negative rank 3: %s reaches fit %.6f > 0.99 in %u "
           "iterations", amp_method_name(methods[k]), okay ? c.fit : NAN, okay ? c.iters : 0);
        amp_cpd_free(&c);
    }
    amp_tensor_free(&t);
    amp_coo_free(&x);
}

static void test_aminoacid(void)
{
    char path[4096];
    if (!shared_tensor("aminoacid.tns", path, sizeof path, NMETHODS))
        return;
    amp_coo x;
    amp_tensor t;
    if (!read_prepared(path, "amino_c.amp", &x, &t, NULL)) {
        ok(0, "aminoacid.tns reads and prepares");
        skip(NMETHODS - 1, "not read");
        return;
    }
    for (int k = 0; k < NMETHODS; k++) {
        amp_cpd_opts o = method_opts(methods[k], 3, 3000, 1e-9);
        amp_cpd c;
        amp_error err = {0};
        int okay = amp_cpd_init_random(&t, 3, 1, &c, &err) == AMP_OK &&
                   amp_cpu_als(&t, &o, &c, &err) == AMP_OK;
        ok(okay && c.fit >= 0.97, "aminoacid.tns, rank 3, non-negative: %s reaches fit %.6f "
           ">= 0.97 in %u iterations", amp_method_name(methods[k]), okay ? c.fit : NAN,
           okay ? c.iters : 0);
        amp_cpd_free(&c);
    }
    amp_tensor_free(&t);
    amp_coo_free(&x);
}

/* The rules as amp_rules_resolve checks them. */
#define RULE_CHECKS 7
static void test_rules(void)
{
    amp_mode_rule rule[AMP_MAX_MODES];
    amp_error err = {0};
    amp_cpd_opts o = method_opts(AMP_METHOD_HALS, 4, 1, 0);
    o.rules.n_constraint = 2;
    amp_status rc = amp_rules_resolve(&o, 3, rule, &err);
    ok(rc == AMP_ERR_USAGE && strstr(amp_error_message(&err), "2 values") != NULL,
       "a list of 2 constraints for 3 modes is refused: %s", amp_error_message(&err));
    err = (amp_error){0};
    o = method_opts(AMP_METHOD_MU, 4, 1, 0);
    o.rules.n_constraint = 3;
    o.rules.constraint[0] = o.rules.constraint[2] = AMP_CONSTRAINT_NONNEG;
    o.rules.constraint[1] = AMP_CONSTRAINT_NONE;
    rc = amp_rules_resolve(&o, 3, rule, &err);
    ok(rc == AMP_ERR_USAGE && strstr(amp_error_message(&err), "mode 2") != NULL,
       "MU with an unconstrained mode is refused: %s", amp_error_message(&err));
    err = (amp_error){0};
    o = method_opts(AMP_METHOD_ALS, 4, 1, 0);
    rc = amp_rules_resolve(&o, 3, rule, &err);
    ok(rc == AMP_ERR_USAGE, "ALS with a constraint is refused: %s", amp_error_message(&err));
    /* ALS solves unpenalized least squares: a penalty alone is refused
     * too, not ignored. */
    for (int k = 0; k < 2; k++) {
        err = (amp_error){0};
        o = method_opts(AMP_METHOD_ALS, 4, 1, 0);
        o.rules.n_constraint = 0;
        if (k == 0)
            o.rules.n_l1 = 1, o.rules.l1[0] = 0.1;
        else
            o.rules.n_l2 = 1, o.rules.l2[0] = 0.1;
        rc = amp_rules_resolve(&o, 3, rule, &err);
        ok(rc == AMP_ERR_USAGE, "ALS with --%s 0.1 and no constraint is refused: %s",
           k == 0 ? "l1" : "l2", amp_error_message(&err));
    }
    err = (amp_error){0};
    o = method_opts(AMP_METHOD_ADMM, 4, 1, 0);
    o.rules.n_l1 = 3;
    o.rules.l1[0] = 0.1;
    o.rules.l1[1] = 0;
    o.rules.l1[2] = 0.3;
    o.rules.n_l2 = 1;
    o.rules.l2[0] = 2;
    int fine = amp_rules_resolve(&o, 3, rule, &err) == AMP_OK;
    ok(fine && rule[0].l1 == 0.1 && rule[1].l1 == 0 && rule[2].l1 == 0.3 && rule[0].l2 == 2 &&
       rule[2].l2 == 2 && rule[1].constraint == AMP_CONSTRAINT_NONNEG,
       "per-mode l1, one l2 for all, one constraint for all");
    o.rules.l1[1] = -1;
    ok(amp_rules_resolve(&o, 3, rule, &err) == AMP_ERR_USAGE, "a negative penalty is refused");
}

/* ---- Issue 40: every rule against an independent update ------------------
 *
 * The formulas of amp_method (amp_core.h) written again here in plain
 * loops, f64, row by row: no BLAS, no blocks of four rows, no fused
 * passes. One application of amp_cpu_update_rows must give what they give
 * for every method and every setting it accepts (no constraint or
 * non-negative; l1, l2, both, neither; AO-ADMM with and without
 * --admm-tol), from starts and MTTKRP rows with negative entries so that
 * the projection and the shrinkage both bind. The sums are the same but
 * in another order (BLAS's dgemm against a loop): 1e-10 of the largest
 * entry for AO-ADMM and HALS, 1e-12 of each entry for MU (its entries are
 * products and quotients of positive numbers, no cancellation), and MU's
 * and HALS's floor entry for entry: where the reference is at the floor,
 * so must the update be. */

/* The inverse of the symmetric positive definite R x R W, by Gauss-Jordan
 * with partial pivoting (independent of the LAPACK Cholesky used inside). */
static void ref_inverse(const double *W, unsigned R, double *P)
{
    double a[32][64];
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = 0; j < 2 * R; j++)
            a[i][j] = j < R ? W[i * R + j] : (j - R == i);
    for (unsigned c = 0; c < R; c++) {
        unsigned p = c;
        for (unsigned i = c + 1; i < R; i++)
            if (fabs(a[i][c]) > fabs(a[p][c]))
                p = i;
        for (unsigned j = 0; j < 2 * R; j++) {
            double s = a[c][j];
            a[c][j] = a[p][j];
            a[p][j] = s;
        }
        double d = a[c][c];
        for (unsigned j = 0; j < 2 * R; j++)
            a[c][j] /= d;
        for (unsigned i = 0; i < R; i++)
            if (i != c) {
                double f = a[i][c];
                for (unsigned j = 0; j < 2 * R; j++)
                    a[i][j] -= f * a[c][j];
            }
    }
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = 0; j < R; j++)
            P[i * R + j] = a[i][j + R];
}

/* Soft-thresholding by t, then the projection where non-negative, then
 * the scaling by sc: the prox of l1 |a| + (l2/2) a^2 (+ the orthant). */
static double ref_prox(double z, double t, double sc, int nonneg)
{
    double s = z > t ? z - t : z < -t ? z + t : 0;
    if (nonneg && s < 0)
        s = 0;
    return s * sc;
}

/* One application of the method's update to n rows of A (U: AO-ADMM's
 * dual), as amp_core.h writes the formulas. */
static void ref_update(amp_method method, amp_mode_rule rule, unsigned R, const double *V,
                       const double *M, uint64_t n, unsigned inner, double admm_tol,
                       double *A, double *U)
{
    const double l1 = rule.l1, l2 = rule.l2;
    const int nonneg = rule.constraint == AMP_CONSTRAINT_NONNEG;
    if (method == AMP_METHOD_MU) {
        double *Av = malloc(n * R * sizeof *Av);
        for (uint64_t i = 0; i < n; i++)
            for (unsigned r = 0; r < R; r++) {
                double s = 0;
                for (unsigned q = 0; q < R; q++)
                    s += A[i * R + q] * V[q * R + r];
                Av[i * R + r] = s;
            }
        for (uint64_t k = 0; k < n * R; k++) {
            double num = fmax(M[k] - l1, 0);
            double v = A[k] * num / (Av[k] + l2 * A[k] + AMP_UPDATE_EPS);
            A[k] = fmax(v, AMP_UPDATE_EPS);
        }
        free(Av);
        return;
    }
    if (method == AMP_METHOD_HALS) {
        for (uint64_t i = 0; i < n; i++) {
            double *a = A + i * R;
            for (unsigned r = 0; r < R; r++) {
                double s = 0;
                for (unsigned q = 0; q < R; q++)
                    if (q != r)
                        s += a[q] * V[q * R + r];
                double num = M[i * R + r] - s, den = V[r * R + r] + l2;
                if (nonneg)
                    a[r] = fmax((num - l1) / den, AMP_UPDATE_EPS);
                else
                    a[r] = ref_prox(num, l1, 1, 0) / den;
            }
        }
        return;
    }
    /* AO-ADMM */
    double tr = 0, W[32 * 32], P[32 * 32], T[32], At[32];
    for (unsigned r = 0; r < R; r++)
        tr += V[r * R + r];
    const double rho = tr > 0 ? tr / R : 1;
    memcpy(W, V, (size_t)R * R * sizeof *W);
    for (unsigned r = 0; r < R; r++)
        W[r * R + r] += rho;
    ref_inverse(W, R, P);
    for (uint64_t i = 0; i < n; i++) {
        double *a = A + i * R, *u = U + i * R;
        const double *m = M + i * R;
        for (unsigned it = 0; it < inner; it++) {
            for (unsigned r = 0; r < R; r++)
                T[r] = m[r] + rho * (a[r] + u[r]);
            for (unsigned r = 0; r < R; r++) {
                At[r] = 0;
                for (unsigned q = 0; q < R; q++)
                    At[r] += T[q] * P[q * R + r];
            }
            double primal = 0, dual = 0, an = 0, un = 0;
            for (unsigned r = 0; r < R; r++) {
                double v = ref_prox(At[r] - u[r], l1 / rho, rho / (rho + l2), nonneg);
                dual += (v - a[r]) * (v - a[r]);
                a[r] = v;
                u[r] += v - At[r];
                primal += (v - At[r]) * (v - At[r]);
                an += v * v;
                un += u[r] * u[r];
            }
            /* --admm-tol: a row stops once both residuals are small. */
            if (admm_tol > 0 && primal <= admm_tol * admm_tol * an &&
                dual <= admm_tol * admm_tol * un)
                break;
        }
    }
}

/* amp_cpu_update_rows once, from the start A (and U). */
static void lib_update(amp_method method, amp_mode_rule rule, unsigned R, const double *V,
                       const double *M, uint64_t n, unsigned inner, double admm_tol, double *A,
                       double *U)
{
    amp_update_args ua = {.method = method, .rule = rule, .rank = R, .inner = inner,
                          .admm_tol = admm_tol, .V = V};
    double P[64 * 64];
    amp_error err = {0};
    double *scratch = malloc(amp_cpu_update_scratch(&ua, n) + 8);
    if (method == AMP_METHOD_ADMM && amp_cpu_admm_prepare(&ua, P, &err) != AMP_OK)
        exit(99);
    amp_cpu_update_rows(&ua, M, A, method == AMP_METHOD_ADMM ? U : NULL, n, scratch);
    free(scratch);
}

/* Largest violation of the KKT conditions of the row problems
 * min (1/2) a V a' - m a' + l1 |a|_1 + (l2/2) |a|^2 without a constraint
 * (the lasso, ridge-penalized), g = a V - m + l2 a: g + l1 sign(a) = 0
 * where a != 0 and |g| <= l1 where a = 0, relative to the largest |m|. */
static double kkt_lasso(const double *A, const double *M, const double *V, unsigned R,
                        uint64_t n, double l1, double l2)
{
    double worst = 0, scale = 0;
    for (uint64_t i = 0; i < n * R; i++)
        scale = fmax(scale, fabs(M[i]));
    for (uint64_t i = 0; i < n; i++)
        for (unsigned r = 0; r < R; r++) {
            double a = A[i * R + r], g = -M[i * R + r] + l2 * a;
            for (unsigned q = 0; q < R; q++)
                g += A[i * R + q] * V[q * R + r];
            double v = a > 0 ? fabs(g + l1) : a < 0 ? fabs(g - l1) : fmax(fabs(g) - l1, 0);
            if (isnan(v))
                return INFINITY;
            worst = fmax(worst, v);
        }
    return worst / scale;
}

typedef struct rule_case {
    amp_method method;
    amp_mode_rule rule;
    double admm_tol;
} rule_case;

/* Every method with every setting it accepts (amp_rules_resolve: ALS
 * none, AO-ADMM and HALS either constraint, MU non-negative only; l1 and
 * l2 on any of them but ALS). */
static const rule_case rule_cases[] = {
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONE, 0, 0}, 0},
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONE, 0.3, 0}, 0},
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONE, 0, 0.5}, 0},
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONE, 0.3, 0.5}, 0},
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONNEG, 0, 0}, 0},
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONNEG, 0.3, 0.5}, 0},
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONE, 0, 0}, 1e-3},
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONE, 0.3, 0.5}, 1e-3},
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONNEG, 0, 0}, 1e-3},
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONNEG, 0.3, 0.5}, 1e-3},
    {AMP_METHOD_HALS, {AMP_CONSTRAINT_NONE, 0, 0}, 0},
    {AMP_METHOD_HALS, {AMP_CONSTRAINT_NONE, 0.3, 0}, 0},
    {AMP_METHOD_HALS, {AMP_CONSTRAINT_NONE, 0, 0.5}, 0},
    {AMP_METHOD_HALS, {AMP_CONSTRAINT_NONE, 0.3, 0.5}, 0},
    {AMP_METHOD_HALS, {AMP_CONSTRAINT_NONNEG, 0, 0}, 0},
    {AMP_METHOD_HALS, {AMP_CONSTRAINT_NONNEG, 0.3, 0.5}, 0},
    {AMP_METHOD_MU, {AMP_CONSTRAINT_NONNEG, 0, 0}, 0},
    {AMP_METHOD_MU, {AMP_CONSTRAINT_NONNEG, 0.3, 0}, 0},
    {AMP_METHOD_MU, {AMP_CONSTRAINT_NONNEG, 0, 0.5}, 0},
    {AMP_METHOD_MU, {AMP_CONSTRAINT_NONNEG, 0.3, 0.5}, 0},
};
#define NRULE_CASES (sizeof rule_cases / sizeof rule_cases[0])

static void case_name(const rule_case *c, char *buf, size_t size)
{
    snprintf(buf, size, "%s, %s, l1 %g, l2 %g%s", amp_method_name(c->method),
             amp_constraint_name(c->rule.constraint), c->rule.l1, c->rule.l2,
             c->admm_tol > 0 ? ", --admm-tol 1e-3" : "");
}

/* One update of each case against the reference; then, for each case, the
 * starting and the updated A and U must differ (the test must see the
 * update do something). */
#define ONE_STEP_CHECKS (2 * NRULE_CASES)
static void test_one_step(void)
{
    /* 11 rows: two blocks of four and three alone (HALS's two paths). */
    enum { R = 5, N = 11 };
    double V[R * R], M[N * R], Vmu[R * R], Mjunk[N * R];
    random_problem(R, N, 41, V, M, 0);
    random_problem(R, N, 43, Vmu, Mjunk, 1);
    double *A0 = random_matrix(N, R, 47), *U0 = random_matrix(N, R, 53);
    double *Mmu = random_matrix(N, R, 59);   /* from -0.3: some below l1 and 0 */
    for (size_t k = 0; k < NRULE_CASES; k++) {
        const rule_case *c = &rule_cases[k];
        char name[96];
        case_name(c, name, sizeof name);
        const int mu = c->method == AMP_METHOD_MU;
        const double *Vk = mu ? Vmu : V, *Mk = mu ? Mmu : M;
        double A[N * R], U[N * R], Ar[N * R], Ur[N * R];
        for (unsigned i = 0; i < N * R; i++) {
            A[i] = Ar[i] = mu ? fabs(A0[i]) + 0.05 : A0[i];
            U[i] = Ur[i] = U0[i] * 0.1;
        }
        lib_update(c->method, c->rule, R, Vk, Mk, N, 7, c->admm_tol, A, U);
        ref_update(c->method, c->rule, R, Vk, Mk, N, 7, c->admm_tol, Ar, Ur);
        double worst = 0, big = 0, floors = 0, moved = 0;
        int below = 0;
        for (unsigned i = 0; i < N * R; i++) {
            big = fmax(big, fabs(Ar[i]));
            moved = fmax(moved, fabs(Ar[i] - (mu ? fabs(A0[i]) + 0.05 : A0[i])));
            if (mu)
                worst = fmax(worst, fabs(A[i] - Ar[i]) / Ar[i]);
            else
                worst = fmax(worst, fabs(A[i] - Ar[i]));
            if (c->method == AMP_METHOD_ADMM)
                worst = fmax(worst, fabs(U[i] - Ur[i]));
            if (Ar[i] == AMP_UPDATE_EPS && c->rule.constraint == AMP_CONSTRAINT_NONNEG &&
                c->method != AMP_METHOD_ADMM) {
                floors++;
                below |= A[i] != AMP_UPDATE_EPS;
            }
            if (c->rule.constraint == AMP_CONSTRAINT_NONNEG)
                below |= !(A[i] >= 0);
            below |= isnan(A[i]);
        }
        if (!mu)
            worst /= big;
        ok(worst <= (mu ? 1e-12 : 1e-10) && !below, "one update, %s: the reference's rows "
           "within %.1e (%s)%s", name, worst, mu ? "each entry" : "of the largest",
           floors > 0 ? ", floor entries at the floor" : "");
        ok(moved > 1e-3,
           "one update, %s: the update moves the rows (%.3g)", name, moved);
    }
    free(A0);
    free(U0);
    free(Mmu);
}

/* Converged row problems without a constraint and with l1 (the lasso):
 * AO-ADMM (every inner iteration, and stopping by --admm-tol 1e-12) and
 * HALS reach the KKT point (1e-8 relative to the largest |m|); AO-ADMM
 * with --admm-tol 1e-12 also the least-squares rows (1e-8) and the
 * non-negative KKT point with l1. */
#define LASSO_CHECKS 6
static void test_lasso(void)
{
    enum { R = 6, N = 40 };
    double V[R * R], M[N * R], A[N * R], want[N * R];
    random_problem(R, N, 5, V, M, 0);
    const amp_mode_rule lasso = {AMP_CONSTRAINT_NONE, 0.2, 0}, both = {AMP_CONSTRAINT_NONE, 0.2, 0.4};
    const amp_mode_rule none = {AMP_CONSTRAINT_NONE, 0, 0};
    const amp_mode_rule nn = {AMP_CONSTRAINT_NONNEG, 0.1, 0.3};
    run_update(AMP_METHOD_ADMM, lasso, R, V, M, N, 1000, 1, A);
    double e = kkt_lasso(A, M, V, R, N, 0.2, 0);
    int zeros = 0;
    for (unsigned i = 0; i < N * R; i++)
        zeros += A[i] == 0;
    ok(e <= 1e-8 && zeros > 0, "AO-ADMM, no constraint, l1 0.2, 1000 inner iterations: lasso "
       "KKT residual %.1e, %d entries exactly 0", e, zeros);
    run_update(AMP_METHOD_HALS, both, R, V, M, N, 0, 2000, A);
    e = kkt_lasso(A, M, V, R, N, 0.2, 0.4);
    ok(e <= 1e-8, "HALS, no constraint, l1 0.2, l2 0.4, 2000 sweeps: KKT residual %.1e", e);
    /* With --admm-tol: one update of 1000 inner iterations at most. */
    double Aw[N * R], U[N * R];
    for (unsigned i = 0; i < N * R; i++)
        Aw[i] = 1, U[i] = 0;
    lib_update(AMP_METHOD_ADMM, none, R, V, M, N, 1000, 1e-12, Aw, U);
    ridge(V, M, R, N, 0, want);
    e = rel_diff(Aw, want, N * R);
    ok(e <= 1e-8, "AO-ADMM, no constraint, --admm-tol 1e-12: the least-squares rows (%.1e)", e);
    for (unsigned i = 0; i < N * R; i++)
        Aw[i] = 1, U[i] = 0;
    lib_update(AMP_METHOD_ADMM, both, R, V, M, N, 1000, 1e-12, Aw, U);
    e = kkt_lasso(Aw, M, V, R, N, 0.2, 0.4);
    ok(e <= 1e-8, "AO-ADMM, no constraint, l1 0.2, l2 0.4, --admm-tol 1e-12: KKT residual "
       "%.1e", e);
    for (unsigned i = 0; i < N * R; i++)
        Aw[i] = 1, U[i] = 0;
    lib_update(AMP_METHOD_ADMM, nn, R, V, M, N, 1000, 1e-12, Aw, U);
    e = kkt_nonneg(Aw, M, V, R, N, 0.1, 0.3, 0);
    ok(e <= 1e-8, "AO-ADMM, non-negative, l1 0.1, l2 0.3, --admm-tol 1e-12: KKT residual "
       "%.1e", e);
    run_update(AMP_METHOD_ADMM, both, R, V, M, N, 1000, 1, A);
    e = kkt_lasso(A, M, V, R, N, 0.2, 0.4);
    ok(e <= 1e-8, "AO-ADMM, no constraint, l1 0.2, l2 0.4, 1000 inner iterations: KKT "
       "residual %.1e", e);
}

/* The whole loop against a reference of it (amp_cpu_als's contract, als.c
 * and amp_core.h): per mode, the MTTKRP (here from the coordinates
 * themselves), V the Hadamard product of the other Grams, AO-ADMM's
 * start scale on the first mode of the first iteration, the warm start
 * (the factor and AO-ADMM's dual times lambda), the method's update, the
 * new lambda (2-norms on the first iteration, max(1, max |a|) after), the
 * factor and the dual divided by it, and the factor's Gram. A tensor
 * with as many negative entries as positive ones, every method with a
 * setting of each kind on its modes, 3 iterations from one random start:
 * the factors and lambda within 1e-9 (relative, normwise; the same sums
 * in other orders, compounded over 9 updates). */
typedef struct loop_case {
    amp_method method;
    amp_constraint c[3];
    double l1[3], l2[3];
    double admm_tol;
} loop_case;

static const loop_case loop_cases[] = {
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONNEG, AMP_CONSTRAINT_NONE, AMP_CONSTRAINT_NONE},
     {0.05, 0.1, 0}, {0, 0.2, 0.1}, 0},
    {AMP_METHOD_ADMM, {AMP_CONSTRAINT_NONE, AMP_CONSTRAINT_NONNEG, AMP_CONSTRAINT_NONE},
     {0.1, 0, 0.05}, {0.1, 0.1, 0}, 1e-3},
    {AMP_METHOD_HALS, {AMP_CONSTRAINT_NONNEG, AMP_CONSTRAINT_NONE, AMP_CONSTRAINT_NONE},
     {0.05, 0.1, 0}, {0, 0.2, 0.1}, 0},
    {AMP_METHOD_MU, {AMP_CONSTRAINT_NONNEG, AMP_CONSTRAINT_NONNEG, AMP_CONSTRAINT_NONNEG},
     {0.05, 0, 0.02}, {0, 0.2, 0.1}, 0},
};
#define NLOOP_CASES (sizeof loop_cases / sizeof loop_cases[0])
#define LOOP_CHECKS NLOOP_CASES

static void ref_mttkrp(const amp_coo *x, uint64_t *const *inv, const amp_tensor *t,
                       double *const *A, unsigned R, unsigned d, double *M)
{
    memset(M, 0, t->rows[d] * R * sizeof *M);
    for (uint64_t k = 0; k < x->nnz; k++) {
        double row[32];
        for (unsigned r = 0; r < R; r++)
            row[r] = x->val[k];
        for (unsigned m = 0; m < t->nmodes; m++)
            if (m != d)
                for (unsigned r = 0; r < R; r++)
                    row[r] *= A[m][inv[m][x->ind[m][k]] * R + r];
        for (unsigned r = 0; r < R; r++)
            M[inv[d][x->ind[d][k]] * R + r] += row[r];
    }
}

static void test_loop(void)
{
    enum { R = 4, ITERS = 3 };
    static const shape sh = {"random", 3, {14, 11, 9}, 400, 0};
    amp_coo x;
    amp_tensor t;
    random_tensor(&sh, 21, &x);
    for (uint64_t k = 0; k < x.nnz; k++)
        x.val[k] -= 0.25;   /* uniform in [-0.5, 0.5) */
    if (!prepare(&x, "loop.amp", 3, 997, &t)) {
        ok(0, "the loop's tensor prepares");
        skip(LOOP_CHECKS - 1, "no file");
        amp_coo_free(&x);
        return;
    }
    /* The original index of each of the tensor's rows, inverted. */
    uint64_t *inv[3];
    for (unsigned m = 0; m < 3; m++) {
        inv[m] = calloc(t.dims[m], sizeof *inv[m]);
        for (uint64_t k = 0; k < t.rows[m]; k++)
            inv[m][t.new_to_orig[m][k]] = k;
    }
    for (size_t k = 0; k < NLOOP_CASES; k++) {
        const loop_case *lc = &loop_cases[k];
        amp_cpd_opts o;
        amp_cpd_opts_init(&o);
        o.rank = R;
        o.max_iters = ITERS;
        o.tol = 0;
        o.method = lc->method;
        o.admm_tol = lc->admm_tol;
        o.rules.n_constraint = o.rules.n_l1 = o.rules.n_l2 = 3;
        for (unsigned m = 0; m < 3; m++) {
            o.rules.constraint[m] = lc->c[m];
            o.rules.l1[m] = lc->l1[m];
            o.rules.l2[m] = lc->l2[m];
        }
        amp_cpd c;
        amp_error err = {0};
        if (amp_cpd_init_random(&t, R, 5, &c, &err) != AMP_OK)
            exit(99);
        /* The reference's state from the same start. */
        double *A[3], *U[3], G[3][R * R], lambda[R], V[R * R];
        for (unsigned m = 0; m < 3; m++) {
            A[m] = malloc(t.rows[m] * R * sizeof *A[m]);
            U[m] = calloc(t.rows[m] * R, sizeof *U[m]);
            memcpy(A[m], c.A[m], t.rows[m] * R * sizeof *A[m]);
            cp_ref_gram(A[m], t.rows[m], R, G[m]);
        }
        memcpy(lambda, c.lambda, sizeof lambda);
        int fine = amp_cpu_als(&t, &o, &c, &err) == AMP_OK;
        double *M = malloc(30 * R * sizeof *M);
        for (unsigned it = 0; it < ITERS; it++)
            for (unsigned d = 0; d < 3; d++) {
                const uint64_t n = t.rows[d];
                ref_mttkrp(&x, inv, &t, A, R, d, M);
                for (unsigned q = 0; q < R * R; q++)
                    V[q] = (d == 0 ? 1 : G[0][q]) * (d == 1 ? 1 : G[1][q]) *
                           (d == 2 ? 1 : G[2][q]);
                if (lc->method == AMP_METHOD_ADMM && it == 0 && d == 0) {
                    double in = 0, model = 0;
                    for (uint64_t i = 0; i < n; i++)
                        for (unsigned r = 0; r < R; r++)
                            in += lambda[r] * A[0][i * R + r] * M[i * R + r];
                    for (unsigned p = 0; p < R; p++)
                        for (unsigned q = 0; q < R; q++)
                            model += lambda[p] * lambda[q] * G[0][p * R + q] *
                                     G[1][p * R + q] * G[2][p * R + q];
                    if (model > 0 && in / model > 0)
                        for (unsigned r = 0; r < R; r++)
                            lambda[r] *= in / model;
                }
                for (uint64_t i = 0; i < n; i++)
                    for (unsigned r = 0; r < R; r++) {
                        A[d][i * R + r] *= lambda[r];
                        U[d][i * R + r] *= lambda[r];
                    }
                amp_mode_rule rule = {lc->c[d], lc->l1[d], lc->l2[d]};
                ref_update(lc->method, rule, R, V, M, n, o.admm_inner, lc->admm_tol, A[d], U[d]);
                for (unsigned r = 0; r < R; r++) {
                    double sq = 0, mx = 0;
                    for (uint64_t i = 0; i < n; i++) {
                        sq += A[d][i * R + r] * A[d][i * R + r];
                        mx = fmax(mx, fabs(A[d][i * R + r]));
                    }
                    lambda[r] = it == 0 ? sqrt(sq) : fmax(mx, 1);
                    if (lambda[r] == 0)
                        lambda[r] = 1;
                    for (uint64_t i = 0; i < n; i++) {
                        A[d][i * R + r] /= lambda[r];
                        U[d][i * R + r] /= lambda[r];
                    }
                }
                cp_ref_gram(A[d], n, R, G[d]);
            }
        double e = fine ? rel_diff(c.lambda, lambda, R) : INFINITY;
        for (unsigned m = 0; fine && m < 3; m++)
            e = fmax(e, rel_diff(c.A[m], A[m], t.rows[m] * R));
        char name[64];
        snprintf(name, sizeof name, "%s%s", amp_method_name(lc->method),
                 lc->admm_tol > 0 ? " --admm-tol 1e-3" : "");
        ok(e <= 1e-9, "%s, modes (%s l1 %g l2 %g; %s l1 %g l2 %g; %s l1 %g l2 %g), 3 iterations "
           "on a tensor of both signs: factors and lambda as the loop's reference gives them "
           "(%.1e)", name, amp_constraint_name(lc->c[0]), lc->l1[0], lc->l2[0],
           amp_constraint_name(lc->c[1]), lc->l1[1], lc->l2[1], amp_constraint_name(lc->c[2]),
           lc->l1[2], lc->l2[2], e);
        for (unsigned m = 0; m < 3; m++) {
            free(A[m]);
            free(U[m]);
        }
        free(M);
        amp_cpd_free(&c);
    }
    for (unsigned m = 0; m < 3; m++)
        free(inv[m]);
    amp_tensor_free(&t);
    amp_coo_free(&x);
}

int main(void)
{
    int nreal = for_each_shared_tensor(NULL, NULL);
    plan(ROW_CHECKS + RUN_CHECKS + NMETHODS + NMETHODS + RULE_CHECKS + ONE_STEP_CHECKS +
         LASSO_CHECKS + LOOP_CHECKS + (nreal == 0));
    tap_real_data(nreal, getenv("AMP_TEST_DATA"));
    test_rules();
    test_rows();
    test_one_step();
    test_lasso();
    test_loop();
    test_runs();
    test_planted();
    test_aminoacid();
    return done_testing();
}
