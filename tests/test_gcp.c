/* GCP's pieces on the CPU (run/core/amp_gcp.h, run/core/gcp.c,
 * run/cpu/gcp.c) against references written here.
 *
 *  - Each loss's value against pyttb's formula (pyttb/gcp/handles.py,
 *    written out again here) to 1e-13 relative, and its derivative
 *    against a central difference (step 1e-6 relative; the difference's
 *    own error is about h^2 f''' + eps f / h, below 1e-6 relative at these
 *    points), on both sides of huber's threshold.
 *  - The tensor in GCP's form: keys ascending, the same keys and values
 *    for a file in 1 shard and in 3; a sample's nonzeros are stored cells,
 *    its zeros absent ones, the same cells for the same key.
 *  - The sampled gradient's expectation: the mean of 4000 batches' (8
 *    nonzeros and 8 zeros each, on a 6 x 5 x 4 tensor of 30 nonzeros)
 *    against the full gradient enumerated over every cell, each entry
 *    within 5 standard errors of the mean (the errors measured from the
 *    batches themselves; 45 entries, so a false failure has odds below
 *    1e-4, and the draws are fixed by their keys, so it either always
 *    passes or always fails), for gaussian, poisson and bernoulli-logit.
 *    A wrong stratum weight biases the mean by a third of the zeros'
 *    share, tens of standard errors.
 *  - The loss estimate: its mean over 4000 batches within 5 standard
 *    errors of the exact loss, and the standard error it reports within
 *    15% of the estimates' spread.
 *  - The exact loss: enumerated over the cells against a plain sum here
 *    (1e-12), and the closed forms (gaussian, poisson) against the
 *    enumeration (1e-10 relative).
 *  - Adam's step: the projection onto the lower bound, and the first
 *    step's size (rate times the gradient's sign).
 *  - The same bits on 1 and 3 threads (gradient, estimate, a whole run of
 *    3 epochs) and for the file in 1 and 3 shards (gradient, in ordinal
 *    order).
 *  - Lazy Adam (SparseAdam; its steps against NumPy's are in
 *    tests/run_gcp.sh): where a step's samples touch every row it is the
 *    dense step, bit for bit; steps of 2 + 2 samples leave every row they
 *    do not touch (found here from the samples) as it was, factors and
 *    both moments, and move every row they touch; 1 and 3 threads give
 *    the same bits. */
#include <config.h>

#include <math.h>

#include "cpd_util.h"
#include "amp_gcp.h"
#include "amp_threads.h"

#define EPS AMP_GCP_EPS

/* pyttb's handles, as pyttb writes them. */
static double pyttb_f(int loss, double x, double m, double t)
{
    switch (loss) {
    case AMP_GCP_GAUSSIAN: return (m - x) * (m - x);
    case AMP_GCP_POISSON: return m - x * log(m + EPS);
    case AMP_GCP_POISSON_LOG: return exp(m) - x * m;
    case AMP_GCP_BERNOULLI_LOGIT: return log(exp(m) + 1) - x * m;
    case AMP_GCP_BERNOULLI_ODDS: return log(m + 1) - x * log(m + EPS);
    case AMP_GCP_GAMMA: return x / (m + EPS) + log(m + EPS);
    case AMP_GCP_RAYLEIGH:
        return 2 * log(m + EPS) + (M_PI / 4) * (x / (m + EPS)) * (x / (m + EPS));
    case AMP_GCP_HUBER: {
        double d = fabs(x - m);
        return d < t ? d * d : 2 * t * d - t * t;
    }
    }
    return NAN;
}

static void test_losses(void)
{
    const double xs[] = {0, 1, 3}, ms[] = {-1.3, 0.02, 0.3, 1.7, 4.2};
    const double delta = 0.25;
    for (int loss = 0; loss < AMP_GCP_NLOSSES; loss++) {
        double worst_f = 0, worst_d = 0;
        const int bounded = isfinite(amp_gcp_lower_bound(loss));
        for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
            for (size_t j = 0; j < sizeof ms / sizeof *ms; j++) {
                double x = xs[i], m = ms[j];
                const char *what;
                if (!amp_gcp_value_ok((amp_gcp_loss)loss, x, &what) || (bounded && m < 0))
                    continue;
                if (loss == AMP_GCP_HUBER)   /* both sides of the threshold, not on it */
                    m = x + (j % 2 ? 0.1 : 0.7) * (j < 2 ? -1 : 1);
                double f = amp_gcp_f(loss, x, m, delta), r = pyttb_f(loss, x, m, delta);
                worst_f = fmax(worst_f, fabs(f - r) / fmax(1, fabs(r)));
                double h = 1e-6 * fmax(1e-2, fabs(m));
                double fd = (amp_gcp_f(loss, x, m + h, delta) - amp_gcp_f(loss, x, m - h, delta)) /
                            (2 * h);
                double d = amp_gcp_df(loss, x, m, delta);
                worst_d = fmax(worst_d, fabs(d - fd) / fmax(1, fabs(d)));
            }
        ok(worst_f < 1e-13, "%s: the value is pyttb's formula (worst %.1e)",
           amp_gcp_loss_names[loss], worst_f);
        ok(worst_d < 1e-6, "%s: the derivative is the central difference's (worst %.1e)",
           amp_gcp_loss_names[loss], worst_d);
    }
    ok(amp_gcp_lower_bound(AMP_GCP_POISSON) == 0 && amp_gcp_lower_bound(AMP_GCP_GAMMA) == 0 &&
           amp_gcp_lower_bound(AMP_GCP_RAYLEIGH) == 0 &&
           amp_gcp_lower_bound(AMP_GCP_BERNOULLI_ODDS) == 0 &&
           isinf(amp_gcp_lower_bound(AMP_GCP_GAUSSIAN)) &&
           isinf(amp_gcp_lower_bound(AMP_GCP_BERNOULLI_LOGIT)),
       "the lower bounds: 0 for poisson, bernoulli-odds, gamma, rayleigh; none else");
}

/* A 6 x 5 x 4 tensor of 30 distinct cells of value 1 or 2 (loss-dependent
 * values set after loading). */
static void tiny(amp_coo *x, uint64_t seed)
{
    const shape s = {"tiny", 3, {6, 5, 4}, 0, 0};
    amp_error err = {0};
    if (amp_coo_init(x, 3, &err) || amp_coo_reserve(x, 30, &err))
        exit(99);
    for (unsigned m = 0; m < 3; m++)
        x->dims[m] = s.dims[m];
    int used[120] = {0};
    uint64_t n = 0;
    /* Every slice nonempty first (a diagonal), then random cells. */
    for (uint64_t k = 0; k < 6; k++) {
        uint64_t c = (k * 5 + k % 5) * 4 + k % 4;
        used[c] = 1;
        x->ind[0][n] = k, x->ind[1][n] = k % 5, x->ind[2][n] = k % 4;
        x->val[n++] = 1;
    }
    while (n < 30) {
        uint64_t c = rng_next(&seed) % 120;
        if (used[c])
            continue;
        used[c] = 1;
        x->ind[0][n] = c / 20, x->ind[1][n] = c / 4 % 5, x->ind[2][n] = c % 4;
        x->val[n++] = 1 + (double)(rng_next(&seed) % 2);
    }
    x->nnz = n;
}

typedef struct setup {
    amp_tensor t;
    amp_gcp_source s;
    double *A[3];
    unsigned R;
} setup;

static int setup_open(setup *u, const amp_coo *x, const char *name, uint32_t shards)
{
    amp_error err = {0};
    memset(u, 0, sizeof *u);
    if (!prepare(x, name, shards, 7, &u->t))
        return 0;
    if (amp_gcp_source_build(&u->t, 0, &u->s, &err) != AMP_OK) {
        diag("%s", amp_error_message(&err));
        return 0;
    }
    u->R = 3;
    /* Factors keyed on the original index, so the same model in any layout. */
    for (unsigned m = 0; m < 3; m++) {
        u->A[m] = calloc(u->t.rows[m] * u->R, sizeof(double));
        for (uint64_t o = 0; o < u->s.view.rows[m]; o++) {
            uint64_t row = u->s.view.row_of[m][o];
            for (unsigned r = 0; r < u->R; r++)
                u->A[m][row * u->R + r] = 0.2 + 0.6 * (double)((o * 7 + r * 3 + m) % 5) / 4;
        }
    }
    return 1;
}

static void setup_close(setup *u)
{
    for (unsigned m = 0; m < 3; m++)
        free(u->A[m]);
    amp_gcp_source_free(&u->s);
    amp_tensor_free(&u->t);
}

static double model(const setup *u, const uint64_t *rows)
{
    double s = 0;
    for (unsigned r = 0; r < u->R; r++)
        s += u->A[0][rows[0] * u->R + r] * u->A[1][rows[1] * u->R + r] *
             u->A[2][rows[2] * u->R + r];
    return s;
}

/* The stored value of a cell, 0 if absent: a plain scan. */
static double stored(const amp_gcp_view *v, uint64_t key)
{
    for (uint64_t k = 0; k < v->nnz; k++)
        if (v->key[k] == key)
            return v->val[k];
    return 0;
}

/* The full loss and gradient, every cell enumerated. */
static double full(const setup *u, int loss, double *const *G)
{
    const amp_gcp_view *v = &u->s.view;
    const unsigned R = u->R;
    double F = 0;
    for (unsigned m = 0; m < 3; m++)
        memset(G[m], 0, u->t.rows[m] * R * sizeof(double));
    for (uint64_t c = 0; c < v->cells; c++) {
        uint64_t rows[3];
        amp_gcp_rows_of(v, c, rows);
        const double x = stored(v, c), m = model(u, rows);
        F += amp_gcp_f(loss, x, m, 0.25);
        const double g = amp_gcp_df(loss, x, m, 0.25);
        for (unsigned n = 0; n < 3; n++)
            for (unsigned r = 0; r < R; r++) {
                double z = g;
                for (unsigned q = 0; q < 3; q++)
                    if (q != n)
                        z *= u->A[q][rows[q] * R + r];
                G[n][rows[n] * R + r] += z;
            }
    }
    return F;
}

static double *const *alloc_g(const setup *u, double **G)
{
    for (unsigned m = 0; m < 3; m++)
        G[m] = calloc(u->t.rows[m] * u->R + 1, sizeof(double));
    return G;
}

static void test_source(const setup *u, const setup *u3)
{
    const amp_gcp_view *v = &u->s.view, *w = &u3->s.view;
    int asc = 1;
    for (uint64_t k = 1; k < v->nnz; k++)
        asc &= v->key[k - 1] < v->key[k];
    ok(asc && v->nnz == 30 && v->cells == 120, "the keys ascend, 30 of them, of 120 cells");
    ok(w->nnz == v->nnz && memcmp(w->key, v->key, 30 * 8) == 0 &&
           memcmp(w->val, v->val, 30 * 8) == 0,
       "1 shard and 3: the same keys and values");
    const amp_gcp_batch b = {amp_gcp_step_key(5, 7), 500, 500, 0, 0};
    int nz_ok = 1, z_ok = 1, same = 1;
    for (uint64_t j = 0; j < 1000; j++) {
        uint64_t rows[3], rows2[3], o[3];
        double x, x2;
        if (amp_gcp_sample(v, b.key, j, b.snz, rows, &x) ||
            amp_gcp_sample(v, b.key, j, b.snz, rows2, &x2)) {
            nz_ok = 0;
            break;
        }
        same &= x == x2 && memcmp(rows, rows2, sizeof rows) == 0;
        /* The cell's key from its rows, through the ordinals. */
        for (unsigned m = 0; m < 3; m++)
            for (o[m] = 0; v->row_of[m][o[m]] != rows[m]; o[m]++)
                ;
        uint64_t key = (o[0] * v->rows[1] + o[1]) * v->rows[2] + o[2];
        if (j < b.snz)
            nz_ok &= x != 0 && stored(v, key) == x;
        else
            z_ok &= x == 0 && !amp_gcp_stored(v, key);
    }
    ok(nz_ok, "the nonzero stratum draws stored cells, with their values");
    ok(z_ok, "the zero stratum draws absent cells");
    ok(same, "the same key draws the same cells");
}

static void test_expectation(const setup *u, int loss)
{
    const amp_gcp_view *v = &u->s.view;
    const unsigned R = u->R, K = 4000;
    double *Gf[3], *G[3], *S[3], *Q[3];
    alloc_g(u, Gf), alloc_g(u, G), alloc_g(u, S), alloc_g(u, Q);
    const double F = full(u, loss, Gf);
    amp_error err = {0};
    int rc_ok = 1;
    double es = 0, eq = 0, se_sum = 0;
    const uint64_t snz = 8, sz = 8;
    for (unsigned k = 0; k < K && rc_ok; k++) {
        const amp_gcp_batch b = {amp_gcp_step_key(11, 1 + k), snz, sz,
                                 (double)v->nnz / snz, (double)(v->cells - v->nnz) / sz};
        double est, se;
        rc_ok = amp_cpu_gcp_gradient(v, (const double *const *)u->A, R, loss, 0.25, &b, G,
                                     &err) == AMP_OK &&
                amp_cpu_gcp_estimate(v, (const double *const *)u->A, R, loss, 0.25, &b, &est,
                                     &se, &err) == AMP_OK;
        es += est, eq += est * est, se_sum += se;
        for (unsigned m = 0; m < 3; m++)
            for (uint64_t i = 0; i < u->t.rows[m] * R; i++)
                S[m][i] += G[m][i], Q[m][i] += G[m][i] * G[m][i];
    }
    if (!rc_ok)
        diag("%s", amp_error_message(&err));
    double worst = 0;
    for (unsigned m = 0; m < 3; m++)
        for (uint64_t i = 0; i < u->t.rows[m] * R; i++) {
            double mean = S[m][i] / K, var = (Q[m][i] / K - mean * mean) * K / (K - 1);
            double z = fabs(mean - Gf[m][i]) / (sqrt(fmax(var, 0) / K) + 1e-12);
            worst = fmax(worst, z);
        }
    ok(rc_ok && worst < 5, "%s: the sampled gradient's mean over %u batches is the full "
       "gradient (worst entry %.2f standard errors off)", amp_gcp_loss_names[loss], K, worst);
    double mean = es / K, sd = sqrt(fmax(0, (eq / K - mean * mean) * K / (K - 1)));
    double z = fabs(mean - F) / (sd / sqrt(K));
    ok(rc_ok && z < 5, "%s: the loss estimate's mean is the exact loss %.6g (%.2f standard "
       "errors off)", amp_gcp_loss_names[loss], F, z);
    double ratio = se_sum / K / sd;
    ok(rc_ok && fabs(ratio - 1) < 0.15, "%s: the reported standard error is the estimates' "
       "spread (ratio %.3f)", amp_gcp_loss_names[loss], ratio);
    for (unsigned m = 0; m < 3; m++)
        free(Gf[m]), free(G[m]), free(S[m]), free(Q[m]);
}

static void test_exact(const setup *u)
{
    const amp_gcp_view *v = &u->s.view;
    amp_error err = {0};
    double *G[3];
    alloc_g(u, G);
    double worst = 0, worst_closed = 0;
    int rc_ok = 1;
    for (int loss = 0; loss < AMP_GCP_NLOSSES; loss++) {
        double ref = full(u, loss, G), got = NAN, closed = NAN;
        rc_ok &= amp_cpu_gcp_exact(v, (const double *const *)u->A, u->R, loss, 0.25,
                                   AMP_GCP_EXACT_ENUMERATE, &got, &err) == AMP_OK;
        worst = fmax(worst, fabs(got - ref) / fabs(ref));
        if (loss == AMP_GCP_GAUSSIAN || loss == AMP_GCP_POISSON) {
            rc_ok &= amp_cpu_gcp_exact(v, (const double *const *)u->A, u->R, loss, 0.25,
                                       AMP_GCP_EXACT_CLOSED, &closed, &err) == AMP_OK;
            worst_closed = fmax(worst_closed, fabs(closed - ref) / fabs(ref));
        }
    }
    ok(rc_ok && worst < 1e-12, "the exact loss over every cell, each loss (worst %.1e)", worst);
    ok(rc_ok && worst_closed < 1e-10, "the closed forms (gaussian, poisson) (worst %.1e)",
       worst_closed);
    for (unsigned m = 0; m < 3; m++)
        free(G[m]);
}

static void test_adam(void)
{
    double A[4] = {0.01, 0.5, -0.2, 2}, G[4] = {100, -3, 5, 0}, M[4] = {0}, V[4] = {0};
    amp_cpu_gcp_adam(A, G, M, V, 4, 0.1, 1 - 0.9, 1 - 0.999, 0);
    ok(A[0] == 0 && A[2] == 0, "Adam projects onto the lower bound 0");
    ok(fabs(A[1] - 0.6) < 1e-6 && A[3] == 2, "the first step moves by the rate against the "
       "gradient's sign (%.9f), not at all where it is 0", A[1]);
    double B[1] = {0.01}, H[1] = {100}, P[1] = {0}, W[1] = {0};
    amp_cpu_gcp_adam(B, H, P, W, 1, 0.1, 1 - 0.9, 1 - 0.999, -INFINITY);
    ok(fabs(B[0] + 0.09) < 1e-6, "without a bound it goes below 0 (%.9f)", B[0]);
}

/* Whether batch b's samples touch row i of mode m. */
static int touches(const amp_gcp_view *v, const amp_gcp_batch *b, unsigned m, uint64_t i)
{
    for (uint64_t j = 0; j < b->snz + b->sz; j++) {
        uint64_t rows[3];
        double x;
        if (amp_gcp_sample(v, b->key, j, b->snz, rows, &x) == 0 && rows[m] == i)
            return 1;
    }
    return 0;
}

/* Copies of u's factors and zero moments, or the steps' results. */
typedef struct adam_state {
    double *A[3], *M[3], *V[3];
} adam_state;

static void state_init(const setup *u, adam_state *s)
{
    alloc_g(u, s->A), alloc_g(u, s->M), alloc_g(u, s->V);
    for (unsigned m = 0; m < 3; m++)
        memcpy(s->A[m], u->A[m], u->t.rows[m] * u->R * sizeof(double));
}

static void state_free(adam_state *s)
{
    for (unsigned m = 0; m < 3; m++)
        free(s->A[m]), free(s->M[m]), free(s->V[m]);
}

static int state_same(const setup *u, const adam_state *a, const adam_state *b)
{
    for (unsigned m = 0; m < 3; m++) {
        const size_t n = u->t.rows[m] * u->R * sizeof(double);
        if (memcmp(a->A[m], b->A[m], n) || memcmp(a->M[m], b->M[m], n) ||
            memcmp(a->V[m], b->V[m], n))
            return 0;
    }
    return 1;
}

static int steps(const setup *u, adam_state *s, amp_gcp_adam adam, const amp_gcp_batch *b,
                 unsigned n, uint64_t t0)
{
    amp_error err = {0};
    if (amp_cpu_gcp_steps(&u->s.view, s->A, s->M, s->V, u->R, AMP_GCP_POISSON, 0.25, adam, b, n,
                          t0, 0.05, 0, &err) == AMP_OK)
        return 1;
    diag("%s", amp_error_message(&err));
    return 0;
}

static void test_lazy(const setup *u)
{
    const amp_gcp_view *v = &u->s.view;
    const unsigned R = u->R;
    adam_state d, l;
    /* Every row touched: 300 + 300 samples on 6 x 5 x 4 rows. */
    amp_gcp_batch full[2];
    int all = 1;
    for (unsigned k = 0; k < 2; k++) {
        full[k] = (amp_gcp_batch){amp_gcp_step_key(21, 1 + k), 300, 300, 0.1, 0.3};
        for (unsigned m = 0; m < 3; m++)
            for (uint64_t i = 0; i < v->rows[m]; i++)
                all &= touches(v, &full[k], m, i);
    }
    state_init(u, &d), state_init(u, &l);
    int good = all && steps(u, &d, AMP_GCP_ADAM_DENSE, full, 2, 0) &&
               steps(u, &l, AMP_GCP_ADAM_LAZY, full, 2, 0);
    ok(good && state_same(u, &d, &l), "lazy Adam: 2 steps that touch every row are the dense "
       "steps, bit for bit");
    state_free(&d), state_free(&l);

    /* Small steps: the untouched rows held, the touched ones moved. */
    state_init(u, &l);
    adam_state before;
    state_init(u, &before);
    int held = 1, moved = 1, nheld = 0;
    good = 1;
    for (unsigned k = 0; k < 6 && good; k++) {
        const amp_gcp_batch b = {amp_gcp_step_key(22, 1 + k), 2, 2, 15, 45};
        for (unsigned m = 0; m < 3; m++) {
            const size_t n = u->t.rows[m] * R * sizeof(double);
            memcpy(before.A[m], l.A[m], n), memcpy(before.M[m], l.M[m], n);
            memcpy(before.V[m], l.V[m], n);
        }
        good = steps(u, &l, AMP_GCP_ADAM_LAZY, &b, 1, k);
        for (unsigned m = 0; m < 3; m++)
            for (uint64_t i = 0; i < v->rows[m]; i++) {
                const size_t e = i * R, n = R * sizeof(double);
                const int same = !memcmp(l.A[m] + e, before.A[m] + e, n) &&
                                 !memcmp(l.M[m] + e, before.M[m] + e, n) &&
                                 !memcmp(l.V[m] + e, before.V[m] + e, n);
                if (touches(v, &b, m, i))
                    moved &= memcmp(l.M[m] + e, before.M[m] + e, n) != 0;
                else {
                    held &= same;
                    nheld += before.V[m][e] != 0;
                }
            }
    }
    ok(good && held && moved && nheld > 0, "lazy Adam: 6 steps of 2 + 2 samples leave the rows "
       "they do not touch as they were (%d held after an earlier move) and update the moments "
       "of those they touch", nheld);
    state_free(&l), state_free(&before);

    /* Threads. */
    amp_gcp_batch b[8];
    for (unsigned k = 0; k < 8; k++)
        b[k] = (amp_gcp_batch){amp_gcp_step_key(23, 1 + k), 7, 9, 30.0 / 7, 90.0 / 9};
    state_init(u, &d), state_init(u, &l);
    amp_set_threads(1);
    good = steps(u, &d, AMP_GCP_ADAM_LAZY, b, 8, 0);
    amp_set_threads(3);
    good &= steps(u, &l, AMP_GCP_ADAM_LAZY, b, 8, 0);
    ok(good && state_same(u, &d, &l), "lazy Adam: 8 steps on 1 and 3 threads, bit for bit");
    state_free(&d), state_free(&l);
}

static int same_g(const setup *a, const setup *b, double *const *Ga, double *const *Gb)
{
    /* In ordinal order: the two files may number their rows apart. */
    for (unsigned m = 0; m < 3; m++)
        for (uint64_t o = 0; o < a->s.view.rows[m]; o++)
            if (memcmp(Ga[m] + a->s.view.row_of[m][o] * a->R,
                       Gb[m] + b->s.view.row_of[m][o] * b->R, a->R * sizeof(double)) != 0)
                return 0;
    return 1;
}

static void test_bits(const setup *u, const setup *u3)
{
    amp_error err = {0};
    double *G1[3], *G2[3], *G3[3];
    alloc_g(u, G1), alloc_g(u, G2), alloc_g(u3, G3);
    const amp_gcp_batch b = {amp_gcp_step_key(3, 9), 20, 40, 1.5, 2.25};
    double e1, s1, e2, s2;
    amp_set_threads(1);
    int rc_ok = amp_cpu_gcp_gradient(&u->s.view, (const double *const *)u->A, u->R,
                                     AMP_GCP_BERNOULLI_LOGIT, 0, &b, G1, &err) == AMP_OK &&
                amp_cpu_gcp_estimate(&u->s.view, (const double *const *)u->A, u->R,
                                     AMP_GCP_BERNOULLI_LOGIT, 0, &b, &e1, &s1, &err) == AMP_OK;
    amp_set_threads(3);
    rc_ok &= amp_cpu_gcp_gradient(&u->s.view, (const double *const *)u->A, u->R,
                                  AMP_GCP_BERNOULLI_LOGIT, 0, &b, G2, &err) == AMP_OK &&
             amp_cpu_gcp_estimate(&u->s.view, (const double *const *)u->A, u->R,
                                  AMP_GCP_BERNOULLI_LOGIT, 0, &b, &e2, &s2, &err) == AMP_OK;
    rc_ok &= amp_cpu_gcp_gradient(&u3->s.view, (const double *const *)u3->A, u3->R,
                                  AMP_GCP_BERNOULLI_LOGIT, 0, &b, G3, &err) == AMP_OK;
    ok(rc_ok && same_g(u, u, G1, G2) && e1 == e2 && s1 == s2,
       "1 and 3 threads: the same gradient and estimate, bit for bit");
    ok(rc_ok && same_g(u, u3, G1, G3), "1 shard and 3: the same gradient, bit for bit");
    for (unsigned m = 0; m < 3; m++)
        free(G1[m]), free(G2[m]), free(G3[m]);
}

/* Three epochs of a whole run on t threads: the final factors. */
static int whole_run(const amp_tensor *t, int threads, double *out, amp_error *err)
{
    amp_cpd_opts o;
    amp_cpd_opts_init(&o);
    o.method = AMP_METHOD_GCP;
    o.rank = 3;
    o.max_iters = 3;
    o.tol = 0;
    o.seed = 4;
    o.threads = threads;
    o.gcp.loss = AMP_GCP_POISSON;
    o.gcp.epoch_iters = 50;
    amp_set_threads(threads);
    amp_cpd c;
    memset(&c, 0, sizeof c);
    if (amp_cpd_init_random(t, 3, 4, &c, err) != AMP_OK)
        return 0;
    int good = amp_cpu_als(t, &o, &c, err) == AMP_OK && c.iters >= 1 && isfinite(c.fit);
    size_t at = 0;
    for (unsigned m = 0; good && m < 3; m++)
        for (uint64_t i = 0; i < t->rows[m] * 3; i++) {
            good &= c.A[m][i] >= 0;
            out[at++] = c.A[m][i];
        }
    amp_cpd_free(&c);
    return good;
}

/* The start (scaled to |X|, each column's norm spread evenly over the
 * modes) and the finish (unit columns, the norms in lambda) on a view
 * whose modes have more rows than one of the sums' blocks (4096) and a
 * row order (row_of) that is not the identity: against plain serial sums
 * in the test, and the same bits on 1 and 3 threads. Only rows and row_of
 * are read. */
static void test_start_finish(void)
{
    enum { N = 3, R = 4 };
    const uint64_t rows[N] = {10007, 4096, 300};
    amp_gcp_view v;
    memset(&v, 0, sizeof v);
    v.nmodes = N;
    uint64_t *row_of[N];
    double *A[N], *B[N];
    uint64_t seed = 99;
    for (unsigned m = 0; m < N; m++) {
        v.rows[m] = rows[m];
        row_of[m] = malloc(rows[m] * sizeof(uint64_t));
        A[m] = malloc(rows[m] * R * sizeof(double));
        B[m] = malloc(rows[m] * R * sizeof(double));
        for (uint64_t o = 0; o < rows[m]; o++)   /* a permutation: 7919 is prime to these */
            row_of[m][o] = o * 7919 % rows[m];
        for (uint64_t i = 0; i < rows[m] * R; i++)
            A[m][i] = 0.1 + (double)(rng_next(&seed) >> 11) / 9007199254740992.0;
        memcpy(B[m], A[m], rows[m] * R * sizeof(double));
        v.row_of[m] = row_of[m];
    }
    const double norm_sq = 12345.0;
    amp_error err = {0};
    const int threads_before = amp_max_threads();
    amp_set_threads(1);
    int good = amp_gcp_start(&v, norm_sq, R, A, &err) == AMP_OK;
    amp_set_threads(3);
    good &= amp_gcp_start(&v, norm_sq, R, B, &err) == AMP_OK;
    int same = 1;
    for (unsigned m = 0; m < N; m++)
        same &= memcmp(A[m], B[m], rows[m] * R * sizeof(double)) == 0;
    /* |M|^2 by the Grams, summed plainly; the columns' norms. */
    double msq = 0, spread = 0;
    for (unsigned r = 0; r < R; r++)
        for (unsigned q = 0; q < R; q++) {
            double p = 1;
            for (unsigned m = 0; m < N; m++) {
                double g = 0;
                for (uint64_t i = 0; i < rows[m]; i++)
                    g += A[m][i * R + r] * A[m][i * R + q];
                p *= g;
            }
            msq += p;
        }
    for (unsigned r = 0; r < R; r++) {
        double n0 = 0;
        for (unsigned m = 0; m < N; m++) {
            double c = 0;
            for (uint64_t i = 0; i < rows[m]; i++)
                c += A[m][i * R + r] * A[m][i * R + r];
            c = sqrt(c);
            if (m == 0)
                n0 = c;
            spread = fmax(spread, fabs(c - n0) / n0);
        }
    }
    ok(good && same && fabs(msq - norm_sq) <= 1e-12 * norm_sq && spread <= 1e-12,
       "the start on modes of 10007, 4096 and 300 rows: |M|^2 %.15g (|X|^2 %.15g), the "
       "columns' norms equal across modes (%.1e), the same bits on 1 and 3 threads",
       msq, norm_sq, spread);

    /* The finish: lambda the product of the columns' norms, unit columns,
     * the model (lambda times the columns) unchanged. */
    double lambda[R], lambda3[R], want[R];
    for (unsigned r = 0; r < R; r++) {
        want[r] = 1;
        for (unsigned m = 0; m < N; m++) {
            double c = 0;
            for (uint64_t i = 0; i < rows[m]; i++)
                c += A[m][i * R + r] * A[m][i * R + r];
            want[r] *= sqrt(c);
        }
    }
    for (unsigned m = 0; m < N; m++)
        memcpy(B[m], A[m], rows[m] * R * sizeof(double));
    amp_set_threads(1);
    good = amp_gcp_finish(&v, R, A, lambda, &err) == AMP_OK;
    amp_set_threads(3);
    good &= amp_gcp_finish(&v, R, B, lambda3, &err) == AMP_OK;
    same = memcmp(lambda, lambda3, sizeof lambda) == 0;
    double gap = 0, unit = 0;
    for (unsigned r = 0; r < R; r++) {
        gap = fmax(gap, fabs(lambda[r] - want[r]) / want[r]);
        for (unsigned m = 0; m < N; m++) {
            double c = 0;
            for (uint64_t i = 0; i < rows[m]; i++)
                c += A[m][i * R + r] * A[m][i * R + r];
            unit = fmax(unit, fabs(sqrt(c) - 1));
        }
    }
    for (unsigned m = 0; m < N; m++)
        same &= memcmp(A[m], B[m], rows[m] * R * sizeof(double)) == 0;
    ok(good && same && gap <= 1e-12 && unit <= 1e-12,
       "the finish: lambda the product of the columns' norms (%.1e), unit columns (%.1e), "
       "the same bits on 1 and 3 threads", gap, unit);
    amp_set_threads(threads_before);
    for (unsigned m = 0; m < N; m++)
        free(row_of[m]), free(A[m]), free(B[m]);
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* GCP's form of a tensor of 300,000 nonzeros (more than one chunk of the
 * parallel radix sort a thread) built on 1 thread and on 3: the same keys
 * and values, bit for bit, and the keys those a plain computation gives
 * (each index's ordinal among its mode's nonempty indices, mixed radix,
 * sorted by qsort), each with its nonzero's value. */
static void test_source_big(void)
{
    const shape sh = {"big", 3, {3000, 200, 2500}, 330000, 1};
    amp_coo x;
    random_tensor(&sh, 41, &x);
    coo_unique(&x, "big");
    amp_tensor t;
    amp_gcp_source s1, s3;
    amp_error err = {0};
    memset(&s1, 0, sizeof s1), memset(&s3, 0, sizeof s3);
    int good = prepare(&x, "gcp-big.amp", 3, 20011, &t) &&
               amp_gcp_source_build(&t, 1, &s1, &err) == AMP_OK &&
               amp_gcp_source_build(&t, 3, &s3, &err) == AMP_OK;
    if (!good)
        diag("%s", amp_error_message(&err));
    const uint64_t n = x.nnz;
    int same = good && s1.view.nnz == n && s3.view.nnz == n &&
               memcmp(s1.view.key, s3.view.key, n * 8) == 0 &&
               memcmp(s1.view.val, s3.view.val, n * 8) == 0;
    /* The plain keys, and each key's value through a sorted (key, index). */
    uint64_t *ord[3], rows[3];
    for (unsigned m = 0; m < 3; m++) {
        ord[m] = calloc(sh.dims[m] + 1, sizeof(uint64_t));
        for (uint64_t k = 0; k < n; k++)
            ord[m][x.ind[m][k]] = 1;
        rows[m] = 0;
        for (uint64_t i = 0; i < sh.dims[m]; i++) {
            const uint64_t here = ord[m][i];
            ord[m][i] = rows[m];
            rows[m] += here;
        }
    }
    uint64_t *pair = malloc(2 * n * sizeof(uint64_t) + 8);
    for (uint64_t k = 0; k < n; k++) {
        pair[2 * k] = (ord[0][x.ind[0][k]] * rows[1] + ord[1][x.ind[1][k]]) * rows[2] +
                      ord[2][x.ind[2][k]];
        pair[2 * k + 1] = k;
    }
    qsort(pair, n, 2 * sizeof(uint64_t), cmp_u64);
    int plain = good && s1.view.cells == rows[0] * rows[1] * rows[2];
    double vgap = 0;
    for (uint64_t k = 0; plain && k < n; k++) {
        plain &= s1.view.key[k] == pair[2 * k];
        const double want = x.val[pair[2 * k + 1]];
        vgap = fmax(vgap, fabs(s1.view.val[k] - want) / fmax(fabs(want), 1e-300));
    }
    ok(same && plain && vgap <= 1e-7,
       "GCP's form of %" PRIu64 " nonzeros: 1 thread and 3 the same bits, the keys a plain "
       "sort's, the values the nonzeros' (%.1e: f32 where the file keeps them so)", n, vgap);
    for (unsigned m = 0; m < 3; m++)
        free(ord[m]);
    free(pair);
    amp_gcp_source_free(&s1);
    amp_gcp_source_free(&s3);
    amp_tensor_free(&t);
    amp_coo_free(&x);
}

int main(void)
{
    plan(2 * AMP_GCP_NLOSSES + 1 + 5 + 9 + 2 + 3 + 2 + 1 + 1 + 3 + 2 + 1);
    test_losses();
    test_start_finish();
    test_source_big();
    amp_coo x;
    tiny(&x, 17);
    setup u, u3;
    if (!setup_open(&u, &x, "gcp1.amp", 1) || !setup_open(&u3, &x, "gcp3.amp", 3)) {
        printf("Bail out! the tiny tensor did not prepare\n");
        return 1;
    }
    test_source(&u, &u3);
    test_expectation(&u, AMP_GCP_GAUSSIAN);
    test_expectation(&u, AMP_GCP_POISSON);
    test_expectation(&u, AMP_GCP_BERNOULLI_LOGIT);
    test_exact(&u);
    test_adam();
    test_bits(&u, &u3);
    test_lazy(&u);
    {
        /* The plan's weights: nnz / s_nz and (cells - nnz) / s_z, the
         * pyttb defaults where not given. */
        amp_gcp_opts go = {0};
        amp_gcp_plan p;
        amp_error e = {0};
        go.grad_given = 1, go.grad_nz = 8, go.grad_z = 6;
        int good = amp_gcp_resolve(&go, &u.s.view, &p, &e) == AMP_OK;
        ok(good && p.grad_wnz == 30.0 / 8 && p.grad_wz == 90.0 / 6 && p.loss_nz == 30 &&
               p.loss_z == 30 && p.loss_wnz == 1 && p.loss_wz == 3,
           "the strata's weights: nnz / s_nz and (cells - nnz) / s_z (%g, %g; the fixed "
           "sample's %g, %g)", p.grad_wnz, p.grad_wz, p.loss_wnz, p.loss_wz);
    }
    double r1[64], r3[64];
    amp_error err = {0};
    int a = whole_run(&u.t, 1, r1, &err), b = a && whole_run(&u.t, 3, r3, &err);
    if (!b)
        diag("%s", amp_error_message(&err));
    ok(b && memcmp(r1, r3, sizeof(double) * 3 * (6 + 5 + 4)) == 0,
       "a run of 3 epochs: the same factors on 1 and 3 threads, bit for bit, none negative "
       "(poisson)");
    setup_close(&u);
    setup_close(&u3);
    amp_coo_free(&x);
    return 0;
}
