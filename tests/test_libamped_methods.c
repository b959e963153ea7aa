/* libamped's methods beyond CP-ALS through amped.h alone: CP-APR,
 * completion (observed nonzeros), GCP and the starts/ranks sweep, each
 * figure the library reports recomputed here from the model it returns
 * and a dense copy of the tensor (the log-likelihood, the training and
 * test RMSE, GCP's exact Gaussian loss, every model's fit, the per-rank
 * table and the rule's rank); the options' errors naming the option; a
 * callback that stops each method. tests/python.sh compares the same
 * runs with amped-run's output (python/tests/test_methods.py). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amped.h"
#include "tap.h"

/* I x J x K, about a third of the cells stored, counts 1 to 6; index
 * J - 1 of mode 1 never used. */
enum { I = 9, J = 7, K = 5, MAXR = 4 };

static int64_t ind[I * J * K][3];
static double val[I * J * K];
static uint64_t nnz;
static double X[I][J][K];

static void make_tensor(void)
{
    uint64_t s = 2026;
    for (int i = 0; i < I; i++)
        for (int j = 0; j < J - 1; j++)
            for (int k = 0; k < K; k++) {
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                if ((s >> 33) % 3 != 0)
                    continue;
                ind[nnz][0] = i;
                ind[nnz][1] = j;
                ind[nnz][2] = k;
                val[nnz] = (double)(1 + (s >> 20) % 6);
                X[i][j][k] = val[nnz];
                nnz++;
            }
}

/* The model's dense values M[i][j][k] from r. */
static void model_of(const amped_result *r, double M[I][J][K])
{
    const unsigned R = amped_result_rank(r);
    double A[I * MAXR], B[J * MAXR], C[K * MAXR], w[MAXR];
    amped_result_factor(r, 0, A);
    amped_result_factor(r, 1, B);
    amped_result_factor(r, 2, C);
    amped_result_weights(r, w);
    for (int i = 0; i < I; i++)
        for (int j = 0; j < J; j++)
            for (int k = 0; k < K; k++) {
                double m = 0;
                for (unsigned q = 0; q < R; q++)
                    m += w[q] * A[i * R + q] * B[j * R + q] * C[k * R + q];
                M[i][j][k] = m;
            }
}

static double rel(double a, double b)
{
    return fabs(a - b) / (fabs(b) > 1 ? fabs(b) : 1);
}

static double last_of(const amped_result *r, const char *name)
{
    double v[256];
    if (amped_result_iters(r) == 0 || amped_result_iters(r) > 256 ||
        amped_result_series(r, name, v) != AMPED_OK)
        return NAN;
    return v[amped_result_iters(r) - 1];
}

static amped_options *opts(const char *const *kv)
{
    amped_options *o = NULL;
    amped_options_new(&o);
    amped_options_set(o, "gpus", "0");
    amped_options_set(o, "threads", "2");
    for (; kv[0]; kv += 2)
        if (amped_options_set(o, kv[0], kv[1]) != AMPED_OK)
            diag("option %s %s: %s", kv[0], kv[1] ? kv[1] : "", amped_last_error());
    return o;
}

static amped_result *run(const amped_tensor *t, const char *const *kv, amped_progress_fn fn)
{
    amped_options *o = opts(kv);
    amped_result *r = NULL;
    if (amped_cp(t, o, fn, NULL, &r) != AMPED_OK)
        diag("amped_cp: %s", amped_last_error());
    amped_options_free(o);
    return r;
}

static int stop_at_2(void *ctx, const amped_progress *p)
{
    (void)ctx;
    return strcmp(p->phase, "iteration") == 0 && p->iter >= 2;
}

/* A usage error from amped_options_set or from the run, naming name. */
static void refused(const amped_tensor *t, const char *const *kv, const char *name)
{
    amped_options *o = NULL;
    amped_options_new(&o);
    amped_options_set(o, "gpus", "0");
    amped_status st = AMPED_OK;
    for (; kv[0] && st == AMPED_OK; kv += 2)
        st = amped_options_set(o, kv[0], kv[1]);
    amped_result *r = NULL;
    if (st == AMPED_OK)
        st = amped_cp(t, o, NULL, NULL, &r);
    ok(st == AMPED_ERR_USAGE && strstr(amped_last_error(), name) != NULL && r == NULL,
       "refused naming %s: %s", name, amped_last_error());
    amped_result_free(r);
    amped_options_free(o);
}

static void test_apr(const amped_tensor *t)
{
    static double M[I][J][K];
    amped_result *r = run(t, (const char *const[]){"rank", "3", "method", "cp-apr", "seed", "4",
                                                   "iters", "40", NULL}, NULL);
    ok(r != NULL, "cp-apr, rank 3");
    if (r == NULL) {
        skip(7, "no cp-apr result");
        return;
    }
    is_str(amped_result_method(r), "cp-apr", "the method is named");
    model_of(r, M);
    double ll = 0;
    for (int i = 0; i < I; i++)
        for (int j = 0; j < J; j++)
            for (int k = 0; k < K; k++)
                ll += (X[i][j][k] != 0 ? X[i][j][k] * log(M[i][j][k]) : 0) - M[i][j][k];
    double got = last_of(r, "loglik");
    ok(rel(got, ll) <= 1e-9, "the last log-likelihood %.12g is the model's, recomputed "
       "densely, %.12g", got, ll);
    ok(amped_result_fit(r) == got, "the fit is the log-likelihood");
    double lls[256], kkt[256], inner[256];
    unsigned n = amped_result_iters(r);
    amped_result_series(r, "loglik", lls);
    amped_result_series(r, "kkt", kkt);
    amped_result_series(r, "inner", inner);
    int rising = 1, counted = 1;
    for (unsigned k = 1; k < n; k++)
        rising &= lls[k] >= lls[k - 1] - 1e-9 * fabs(lls[k - 1]);
    for (unsigned k = 0; k < n; k++)
        counted &= inner[k] >= 1 && inner[k] == floor(inner[k]) && kkt[k] >= 0;
    ok(rising, "the log-likelihood never falls over %u outer iterations", n);
    ok(counted, "inner iterations counted, KKT violations non-negative");
    is_int(amped_result_series(r, "rmse_train", NULL), AMPED_ERR_UNSUPPORTED,
           "no RMSE series for cp-apr");
    is_int(amped_result_completion(r, NULL, NULL, NULL, NULL), AMPED_ERR_UNSUPPORTED,
           "nor completion's counts");
    amped_result_free(r);
}

static void test_completion(const amped_tensor *t, const char *dir)
{
    static double M[I][J][K];
    /* Test entries: every fourth stored one, and a cell of the unused
     * index J - 1 (predicted 0: its row was dropped with its slice). */
    char path[512];
    snprintf(path, sizeof path, "%s/test.tns", dir);
    FILE *f = fopen(path, "w");
    uint64_t ntest = 0;
    double sse_test = 0;
    int64_t tests[I * J * K][3];
    double tval[I * J * K];
    for (uint64_t n = 0; n < nnz; n += 4, ntest++) {
        memcpy(tests[ntest], ind[n], sizeof tests[ntest]);
        tval[ntest] = val[n] + 0.5;
    }
    tests[ntest][0] = 0;
    tests[ntest][1] = J - 1;
    tests[ntest][2] = 0;
    tval[ntest++] = 2;
    for (uint64_t n = 0; f && n < ntest; n++)
        fprintf(f, "%lld %lld %lld %.17g\n", (long long)tests[n][0] + 1,
                (long long)tests[n][1] + 1, (long long)tests[n][2] + 1, tval[n]);
    if (f)
        fclose(f);
    amped_result *r = run(t, (const char *const[]){"rank", "2", "observed", "nonzeros",
                                                   "holdout-file", path, "l2", "0.05",
                                                   "iters", "8", "tol", "0", NULL}, NULL);
    ok(r != NULL, "observed nonzeros, a test file, a ridge");
    if (r == NULL) {
        skip(6, "no completion result");
        return;
    }
    model_of(r, M);
    double sse = 0;
    for (uint64_t n = 0; n < nnz; n++) {
        double d = val[n] - M[ind[n][0]][ind[n][1]][ind[n][2]];
        sse += d * d;
    }
    for (uint64_t n = 0; n < ntest; n++) {
        double d = tval[n] - M[tests[n][0]][tests[n][1]][tests[n][2]];
        sse_test += d * d;
    }
    uint64_t ntr = 0, nte = 0, unobs[3], sing[3];
    is_int(amped_result_completion(r, &ntr, &nte, unobs, sing), AMPED_OK, "its counts");
    ok(ntr == nnz && nte == ntest, "%llu training entries (every stored one), %llu test",
       (unsigned long long)ntr, (unsigned long long)nte);
    double tr = last_of(r, "rmse_train"), te = last_of(r, "rmse_test");
    ok(rel(tr, sqrt(sse / (double)nnz)) <= 1e-10, "training RMSE %.12g recomputed %.12g", tr,
       sqrt(sse / (double)nnz));
    ok(rel(te, sqrt(sse_test / (double)ntest)) <= 1e-10, "test RMSE %.12g recomputed %.12g",
       te, sqrt(sse_test / (double)ntest));
    ok(unobs[0] + unobs[1] + unobs[2] == 0 && sing[0] + sing[1] + sing[2] == 0,
       "no row kept: every stored row has entries, and the ridge makes every system solvable");
    is_str(amped_result_method(r), "als", "completion is an ALS method");
    amped_result_free(r);
}

static void test_gcp(const amped_tensor *t)
{
    static double M[I][J][K];
    amped_result *r = run(t, (const char *const[]){"rank", "2", "method", "gcp", "loss",
                                                   "gaussian", "iters", "6",
                                                   "epoch-iters", "50", "rate", "0.01",
                                                   "seed", "3", NULL}, NULL);
    ok(r != NULL, "gcp, gaussian loss");
    if (r == NULL) {
        skip(4, "no gcp result");
        return;
    }
    double failed[256];
    unsigned n = amped_result_iters(r);
    amped_result_series(r, "failed", failed);
    model_of(r, M);
    double loss = 0;
    for (int i = 0; i < I; i++)
        for (int j = 0; j < J; j++)
            for (int k = 0; k < K; k++)
                loss += (X[i][j][k] - M[i][j][k]) * (X[i][j][k] - M[i][j][k]);
    double exact = last_of(r, "loss_exact");
    if (n > 0 && failed[n - 1] == 0)
        ok(rel(exact, loss) <= 1e-9, "the last exact loss %.12g is the model's sum of squares "
           "over every cell, %.12g", exact, loss);
    else
        skip(1, "the last epoch failed: its factors are the epoch's start");
    ok(amped_result_fit(r) == last_of(r, "loss"), "the fit is the loss estimate");
    ok(last_of(r, "rate") > 0 && last_of(r, "loss_stderr") >= 0, "rate and standard error");
    is_int(amped_result_series(r, "loglik", NULL), AMPED_ERR_UNSUPPORTED,
           "no log-likelihood for gcp");
    amped_result_free(r);
}

static int count_calls(void *ctx, const amped_progress *p)
{
    unsigned *seen = ctx;
    if (strcmp(p->phase, "iteration") == 0 && p->model < 16)
        seen[p->model] = p->rank;
    return 0;
}

static void test_sweep(const amped_tensor *t)
{
    static double M[I][J][K];
    amped_options *o = opts((const char *const[]){"ranks", "3,1,2", "starts", "3", "choose",
                                                  "fms 0.5", "iters", "30", "seed", "11",
                                                  NULL});
    amped_sweep *w = NULL;
    unsigned seen[16] = {0};
    is_int(amped_cp_sweep(t, o, count_calls, seen, &w), AMPED_OK, "a sweep: ranks 1-3, 3 starts");
    if (w == NULL) {
        skip(8, "no sweep");
        amped_options_free(o);
        return;
    }
    is_int(amped_sweep_models(w), 9, "nine models");
    is_int(amped_sweep_ranks(w), 3, "three ranks");
    double xx = 0;
    for (uint64_t n = 0; n < nnz; n++)
        xx += val[n] * val[n];
    int fits_ok = 1, seeds_ok = 1, calls_ok = 1;
    for (unsigned k = 0; k < 9; k++) {
        const amped_result *r = amped_sweep_model(w, k);
        model_of(r, M);
        double d = 0;
        for (int i = 0; i < I; i++)
            for (int j = 0; j < J; j++)
                for (int kk = 0; kk < K; kk++)
                    d += (X[i][j][kk] - M[i][j][kk]) * (X[i][j][kk] - M[i][j][kk]);
        double fit = 1 - sqrt(d) / sqrt(xx);
        if (fabs(amped_result_fit(r) - fit) > 1e-10) {
            diag("model %u: fit %.12f, recomputed %.12f", k, amped_result_fit(r), fit);
            fits_ok = 0;
        }
        seeds_ok &= amped_sweep_seed(w, k) == 11 + k % 3 && amped_result_rank(r) == 1 + k / 3;
        calls_ok &= seen[k] == amped_result_rank(r);
    }
    ok(fits_ok, "every model's fit is its model's, recomputed densely");
    ok(seeds_ok, "rank i's start j: seed 11 + j, ranks ascending");
    ok(calls_ok, "the callback names each model and its rank");
    int table_ok = 1;
    int want = -1;
    for (unsigned i = 0; i < 3; i++) {
        amped_rank_summary row;
        amped_sweep_rank(w, i, &row);
        double best = -INFINITY, worst = INFINITY, fms[2];
        unsigned nf = 0;
        for (unsigned j = 0; j < 3; j++) {
            double f = amped_result_fit(amped_sweep_model(w, i * 3 + j));
            best = f > best ? f : best;
            worst = f < worst ? f : worst;
            if (i * 3 + j != row.best_model)
                fms[nf++] = amped_sweep_fms(w, i * 3 + j);
        }
        table_ok &= row.rank == i + 1 && row.best_fit == best && row.worst_fit == worst &&
                    amped_result_fit(amped_sweep_model(w, row.best_model)) == best &&
                    fabs(amped_sweep_fms(w, row.best_model) - 1) <= 1e-12 &&
                    row.fms_min == (fms[0] < fms[1] ? fms[0] : fms[1]) &&
                    fabs(row.fms_median - (fms[0] + fms[1]) / 2) <= 1e-15;
        if (row.fms_median >= 0.5)
            want = (int)row.rank;
    }
    ok(table_ok, "each rank's row: best and worst fits, the best's FMS 1, min and median FMS");
    const char *why = NULL;
    unsigned chosen = amped_sweep_chosen(w, &why);
    ok(chosen == (want < 0 ? 0u : (unsigned)want), "the rule's rank %u: the largest whose "
       "median FMS is at least 0.5 (%s)", chosen, why);
    amped_sweep_free(w);
    w = NULL;
    is_int(amped_cp_sweep(t, o, stop_at_2, NULL, &w), AMPED_OK, "a sweep the callback stops");
    int stopped = w != NULL && amped_sweep_stopped(w);
    for (unsigned k = 0; w && k < amped_sweep_models(w); k++)
        stopped &= amped_result_iters(amped_sweep_model(w, k)) <= 2 &&
                   amped_result_stopped(amped_sweep_model(w, k));
    ok(stopped, "every model stopped by its second iteration");
    amped_sweep_free(w);
    amped_result *r = NULL;
    is_int(amped_cp(t, o, NULL, NULL, &r), AMPED_ERR_USAGE, "amped_cp refuses ranks");
    like(amped_last_error(), "amped_cp_sweep", "and says which call runs them: %s",
         amped_last_error());
    amped_options_free(o);
    o = opts((const char *const[]){"ranks", "2", "choose", "fit-elbow", NULL});
    is_int(amped_cp_sweep(t, o, NULL, NULL, &w), AMPED_ERR_USAGE, "fit-elbow of one rank");
    like(amped_last_error(), "--choose fit-elbow", "names the option: %s", amped_last_error());
    amped_options_free(o);
    o = opts((const char *const[]){"ranks", "2", "method", "gcp", NULL});
    is_int(amped_cp_sweep(t, o, NULL, NULL, &w), AMPED_ERR_USAGE, "a sweep of gcp");
    like(amped_last_error(), "--method gcp", "says what: %s", amped_last_error());
    amped_options_free(o);
    amped_options_new(&o);
    is_int(amped_options_set(o, "starts", "0"), AMPED_ERR_USAGE, "starts 0");
    like(amped_last_error(), "--starts", "names --starts: %s", amped_last_error());
    is_int(amped_options_set(o, "choose", "best"), AMPED_ERR_USAGE, "choose best");
    is_int(amped_options_set(o, "keep-all", NULL), AMPED_ERR_USAGE,
           "keep-all is amped-run's (it says which files -o writes)");
    amped_options_free(o);
}

int main(void)
{
    make_tensor();
    const uint64_t dims[3] = {I, J, K};
    amped_coo a = {.nmodes = 3, .nnz = nnz, .indices = ind, .index_type = AMPED_INDEX_INT64,
                   .nnz_stride = 3, .mode_stride = 1, .values = val, .dims = dims};
    amped_tensor *t = NULL;
    char dir[] = "/tmp/amped-methods-XXXXXX";
    if (amped_tensor_from_coo(&a, NULL, &t) != AMPED_OK || mkdtemp(dir) == NULL) {
        printf("Bail out! from_coo or mkdtemp: %s\n", amped_last_error());
        return 1;
    }

    test_apr(t);
    test_completion(t, dir);
    test_gcp(t);
    test_sweep(t);

    /* ---- the options' errors name the option ---- */
    refused(t, (const char *const[]){"method", "cp-apr", "kappa", "-1", NULL}, "--kappa");
    refused(t, (const char *const[]){"method", "cp-apr", "inner", "0", NULL}, "--inner");
    refused(t, (const char *const[]){"method", "gcp", "loss", "cauchy", NULL}, "--loss");
    refused(t, (const char *const[]){"loss", "poisson", NULL}, "--loss");
    refused(t, (const char *const[]){"method", "gcp", "decay", "0", NULL}, "--decay");
    refused(t, (const char *const[]){"holdout", "0.1", NULL}, "--holdout");
    refused(t, (const char *const[]){"observed", "nonzeros", "holdout", "1", NULL},
            "--holdout");
    refused(t, (const char *const[]){"observed", "missing", NULL}, "--observed");

    /* ---- stopping each method from the callback ---- */
    const char *const *runs[] = {
        (const char *const[]){"rank", "2", "method", "cp-apr", "iters", "9", NULL},
        (const char *const[]){"rank", "2", "method", "gcp", "loss", "poisson", "iters", "9",
                              "epoch-iters", "10", NULL},
        (const char *const[]){"rank", "2", "observed", "nonzeros", "holdout", "0.2", "iters",
                              "9", "tol", "0", NULL},
    };
    const char *names[] = {"cp-apr", "gcp", "observed nonzeros"};
    for (int k = 0; k < 3; k++) {
        amped_result *r = run(t, runs[k], stop_at_2);
        ok(r && amped_result_stopped(r) && amped_result_iters(r) == 2,
           "%s: the callback stops it after iteration 2", names[k]);
        amped_result_free(r);
        r = run(t, runs[k], NULL);
        ok(r && !amped_result_stopped(r) && amped_result_iters(r) == 9,
           "%s: the next run goes to its end", names[k]);
        amped_result_free(r);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/test.tns", dir);
    unlink(path);
    rmdir(dir);
    amped_tensor_free(t);
    return done_testing();
}
