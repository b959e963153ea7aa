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
 * > 0.99 by every method; aminoacid.tns at rank 3 to fit >= 0.97. */
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
#define RULE_CHECKS 5
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

int main(void)
{
    int nreal = for_each_shared_tensor(NULL, NULL);
    plan(ROW_CHECKS + RUN_CHECKS + NMETHODS + NMETHODS + RULE_CHECKS + (nreal == 0));
    tap_real_data(nreal, getenv("AMP_TEST_DATA"));
    test_rules();
    test_rows();
    test_runs();
    test_planted();
    test_aminoacid();
    return done_testing();
}
