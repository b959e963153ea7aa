/* libamped through amped.h alone, as a user links it: tensors from
 * arrays in every index form and their checks, options, the model against
 * a dense recomputation, stopping from the callback, saving, and the same
 * answer from memory and from the file saved. GPU runs: tests/python's and
 * tests/test_gpu's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amped.h"
#include "tap.h"

/* A small dense-checkable tensor: I x J x K, about a third of the entries
 * nonzero, with the index J - 1 of mode 1 never used (a zero row). */
enum { I = 9, J = 7, K = 5 };

typedef struct coo {
    uint64_t nnz;
    int64_t ind[I * J * K][3];
    double val[I * J * K];
} coo;

static void make_coo(coo *c)
{
    uint64_t s = 12345;
    c->nnz = 0;
    for (int i = 0; i < I; i++)
        for (int j = 0; j < J - 1; j++)
            for (int k = 0; k < K; k++) {
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                if ((s >> 33) % 3 != 0)
                    continue;
                c->ind[c->nnz][0] = i;
                c->ind[c->nnz][1] = j;
                c->ind[c->nnz][2] = k;
                c->val[c->nnz] = 0.5 + (double)((s >> 20) % 1000) / 1000.0;
                c->nnz++;
            }
}

static amped_coo view(const coo *c, const uint64_t *dims)
{
    amped_coo a = {.nmodes = 3, .nnz = c->nnz, .indices = c->ind,
                   .index_type = AMPED_INDEX_INT64, .nnz_stride = 3, .mode_stride = 1,
                   .index_base = 0, .values = c->val, .dims = dims};
    return a;
}

/* |X - M| / |X| recomputed densely from the model the library returns. */
static double dense_fit(const coo *c, amped_result *r)
{
    const unsigned R = amped_result_rank(r);
    double *A = malloc(I * R * sizeof *A), *B = malloc(J * R * sizeof *B),
           *C = malloc(K * R * sizeof *C), *w = malloc(R * sizeof *w);
    static double X[I][J][K];
    memset(X, 0, sizeof X);
    for (uint64_t n = 0; n < c->nnz; n++)
        X[c->ind[n][0]][c->ind[n][1]][c->ind[n][2]] += c->val[n];
    amped_result_factor(r, 0, A);
    amped_result_factor(r, 1, B);
    amped_result_factor(r, 2, C);
    amped_result_weights(r, w);
    double diff = 0, norm = 0;
    for (int i = 0; i < I; i++)
        for (int j = 0; j < J; j++)
            for (int k = 0; k < K; k++) {
                double m = 0;
                for (unsigned q = 0; q < R; q++)
                    m += w[q] * A[i * R + q] * B[j * R + q] * C[k * R + q];
                diff += (X[i][j][k] - m) * (X[i][j][k] - m);
                norm += X[i][j][k] * X[i][j][k];
            }
    free(A);
    free(B);
    free(C);
    free(w);
    return 1 - sqrt(diff) / sqrt(norm);
}

static int stop_at_3(void *ctx, const amped_progress *p)
{
    (void)ctx;
    return p->iter >= 3;
}

static amped_options *options(const char *rank, const char *iters)
{
    amped_options *o = NULL;
    if (amped_options_new(&o) != AMPED_OK)
        return NULL;
    amped_options_set(o, "rank", rank);
    amped_options_set(o, "iters", iters);
    amped_options_set(o, "tol", "0");
    amped_options_set(o, "gpus", "0");
    return o;
}

int main(void)
{
    static coo c;
    make_coo(&c);
    const uint64_t dims[3] = {I, J, K};

    is_int(amped_version_number(), AMPED_VERSION_NUMBER, "the library is the header's version");
    like(amped_build_info(), "cuda: ", "build_info says whether CUDA is in");

    /* ---- tensors from arrays ---- */
    amped_tensor *t = NULL;
    amped_coo a = view(&c, dims);
    is_int(amped_tensor_from_coo(&a, NULL, &t), AMPED_OK, "from_coo: nnz x 3 int64, 0-based");
    is_int(amped_tensor_nmodes(t), 3, "three modes");
    is_u64(amped_tensor_nnz(t), c.nnz, "every nonzero");
    uint64_t got[3];
    amped_tensor_dims(t, got);
    ok(got[0] == I && got[1] == J && got[2] == K, "the dims given, the unused index kept");
    double nsq = 0;
    for (uint64_t n = 0; n < c.nnz; n++)
        nsq += c.val[n] * c.val[n];
    ok(fabs(amped_tensor_norm_sq(t) - nsq) <= 1e-12 * nsq, "|X|^2");

    /* The same tensor as 3 x nnz uint32, 1-based, with every nonzero
     * given twice at half its value: duplicates summed, no dims given
     * (so mode 1 is J - 1 long). */
    uint64_t n2 = 2 * c.nnz;
    uint32_t *tr = malloc(3 * n2 * sizeof *tr);
    double *v2 = malloc(n2 * sizeof *v2);
    for (uint64_t n = 0; n < n2; n++) {
        for (int m = 0; m < 3; m++)
            tr[m * n2 + n] = (uint32_t)c.ind[n % c.nnz][m] + 1;
        v2[n] = c.val[n % c.nnz] / 2;
    }
    amped_coo b = {.nmodes = 3, .nnz = n2, .indices = tr, .index_type = AMPED_INDEX_UINT32,
                   .nnz_stride = 1, .mode_stride = (int64_t)n2, .index_base = 1, .values = v2};
    amped_tensor *t2 = NULL;
    is_int(amped_tensor_from_coo(&b, NULL, &t2), AMPED_OK, "from_coo: 3 x nnz uint32, 1-based");
    is_u64(t2 ? amped_tensor_nnz(t2) : 0, c.nnz, "repeated coordinates summed");
    if (t2)
        amped_tensor_dims(t2, got);
    ok(t2 && got[1] == J - 1, "dims from the largest index: %llu", (unsigned long long)got[1]);
    ok(t2 && fabs(amped_tensor_norm_sq(t2) - nsq) <= 1e-12 * nsq, "|X|^2 of the sums");
    amped_build_options refuse = {.duplicates = 1};
    amped_tensor *t3 = NULL;
    is_int(amped_tensor_from_coo(&b, &refuse, &t3), AMPED_ERR_DUPLICATE,
           "duplicates = 1 refuses repeats");
    like(amped_last_error(), "duplicate coordinates", "with a message: %s", amped_last_error());
    amped_tensor_free(t2);
    free(tr);
    free(v2);

    /* ---- bad arrays ---- */
    int64_t bad_ind[2][3] = {{0, 0, 0}, {1, -1, 0}};
    double bad_val[2] = {1, 2};
    amped_coo e = {.nmodes = 3, .nnz = 2, .indices = bad_ind, .index_type = AMPED_INDEX_INT64,
                   .nnz_stride = 3, .mode_stride = 1, .values = bad_val};
    is_int(amped_tensor_from_coo(&e, NULL, &t3), AMPED_ERR_RANGE, "a negative index");
    like(amped_last_error(), "nonzero 1 (from 0), mode 1", "names the nonzero and mode: %s",
         amped_last_error());
    ok(t3 == NULL, "and gives no tensor");
    bad_ind[1][1] = J;
    e.dims = dims;
    is_int(amped_tensor_from_coo(&e, NULL, &t3), AMPED_ERR_RANGE, "an index beyond its dim");
    like(amped_last_error(), "beyond the dimension 7", "says so: %s", amped_last_error());
    bad_ind[1][1] = 0;
    e.index_base = 1;
    is_int(amped_tensor_from_coo(&e, NULL, &t3), AMPED_ERR_RANGE, "an index below base 1");
    e.index_base = 0;
    bad_val[1] = NAN;
    is_int(amped_tensor_from_coo(&e, NULL, &t3), AMPED_ERR_RANGE, "a NaN value");
    like(amped_last_error(), "finite", "says values must be finite: %s", amped_last_error());
    bad_val[1] = 2;
    e.nnz = 0;
    is_int(amped_tensor_from_coo(&e, NULL, &t3), AMPED_ERR_EMPTY, "no nonzeros");
    e.nnz = 2;
    e.nmodes = 0;
    is_int(amped_tensor_from_coo(&e, NULL, &t3), AMPED_ERR_USAGE, "no modes");
    e.nmodes = 3;
    amped_build_options lv = {.level = 99};
    is_int(amped_tensor_from_coo(&e, &lv, &t3), AMPED_ERR_USAGE, "a compression level of 99");

    /* ---- options ---- */
    amped_options *o = NULL;
    is_int(amped_options_new(&o), AMPED_OK, "options");
    is_int(amped_options_set(o, "rnk", "3"), AMPED_ERR_USAGE, "an unknown option");
    is_int(amped_options_set(o, "output", "x"), AMPED_ERR_USAGE, "amped-run's -o is not one");
    like(amped_last_error(), "amped-run's", "says whose: %s", amped_last_error());
    is_int(amped_options_set(o, "rank", "0"), AMPED_ERR_USAGE, "rank 0");
    like(amped_last_error(), "--rank", "names --rank: %s", amped_last_error());
    is_int(amped_options_set(o, "rank", NULL), AMPED_ERR_USAGE, "rank with no value");
    is_int(amped_options_set(o, "overlap", "2"), AMPED_ERR_USAGE, "a flag given a value");
    is_int(amped_options_set(o, "method", "hals"), AMPED_OK, "method hals");
    is_int(amped_options_set(o, "constraint", "nonneg,none"), AMPED_OK,
           "a list of two (checked against the modes at the run)");
    amped_result *r = NULL;
    is_int(amped_cp(t, o, NULL, NULL, &r), AMPED_ERR_USAGE, "two constraints for three modes");
    like(amped_last_error(), "constraint", "says which option: %s", amped_last_error());
    ok(r == NULL, "and gives no result");
    amped_options_free(o);

    /* ---- a decomposition and its model ---- */
    o = options("3", "25");
    is_int(amped_cp(t, o, NULL, NULL, &r), AMPED_OK, "cp-als, rank 3, on the CPU");
    is_str(amped_result_backend(r), "cpu", "on the CPU backend");
    is_int(amped_result_iters(r), 25, "every iteration (tol 0)");
    double fit = amped_result_fit(r), dense = dense_fit(&c, r);
    ok(fabs(fit - dense) <= 1e-10, "its fit %.12f is the dense recomputation's %.12f", fit,
       dense);
    double fits[25];
    amped_result_fits(r, fits);
    ok(fits[24] == fit, "the last of the fits is the fit");
    double *B = malloc(J * 3 * sizeof *B);
    amped_result_factor(r, 1, B);
    ok(B[(J - 1) * 3] == 0 && B[(J - 1) * 3 + 1] == 0 && B[(J - 1) * 3 + 2] == 0,
       "the row of an index with no nonzero is zero");
    /* After the first iteration lambda takes each column's largest
     * magnitude where it is above 1 (as amped-run writes them). */
    double most = 0;
    for (int j = 0; j < J * 3; j++)
        most = fabs(B[j]) > most ? fabs(B[j]) : most;
    ok(most <= 1 + 1e-15, "no entry above 1 in magnitude (%.15f)", most);
    is_int(amped_result_factor(r, 3, B), AMPED_ERR_USAGE, "mode 3 of a 3-mode model");
    double times[AMPED_NTIMES];
    amped_result_times(r, times);
    ok(times[AMPED_TIME_TOTAL] > 0 && times[AMPED_TIME_MTTKRP] > 0 &&
       times[AMPED_TIME_MTTKRP] <= times[AMPED_TIME_TOTAL], "phase times within the total");
    is_str(amped_time_name(AMPED_TIME_MTTKRP), "mttkrp", "time names");

    /* ---- saved and opened: the same answer ---- */
    char dir[] = "/tmp/amped-lib-XXXXXX";
    ok(mkdtemp(dir) != NULL, "a directory");
    char path[256], missing[256];
    snprintf(path, sizeof path, "%s/t.amp", dir);
    snprintf(missing, sizeof missing, "%s/no/t.amp", dir);
    is_int(amped_tensor_save(t, path), AMPED_OK, "save");
    is_int(amped_tensor_save(t, missing), AMPED_ERR_IO, "save into a missing directory");
    amped_tensor *tf = NULL;
    is_int(amped_tensor_open(path, &tf), AMPED_OK, "open what was saved");
    amped_result *rf = NULL;
    is_int(amped_cp(tf, o, NULL, NULL, &rf), AMPED_OK, "the same decomposition of it");
    double *Bf = malloc(J * 3 * sizeof *Bf);
    if (rf)
        amped_result_factor(rf, 1, Bf);
    ok(rf && amped_result_fit(rf) == fit && memcmp(B, Bf, J * 3 * sizeof *B) == 0,
       "bit for bit the same fit and factors");
    amped_tensor *tl = NULL;
    is_int(amped_tensor_load(path, NULL, &tl), AMPED_OK, "load takes an .amp by its bytes");
    amped_tensor_free(tl);
    unlink(path);
    rmdir(dir);
    amped_result_free(rf);
    amped_tensor_free(tf);
    free(B);
    free(Bf);
    amped_result_free(r);

    /* ---- stopping ---- */
    r = NULL;
    is_int(amped_cp(t, o, stop_at_3, NULL, &r), AMPED_OK, "a callback that stops");
    ok(r && amped_result_stopped(r) && amped_result_iters(r) == 3 && !amped_result_converged(r),
       "stopped after iteration 3");
    amped_result_free(r);
    r = NULL;
    is_int(amped_cp(t, o, NULL, NULL, &r), AMPED_OK, "and the next run goes on");
    ok(r && !amped_result_stopped(r) && amped_result_iters(r) == 25, "to its end");
    amped_result_free(r);
    amped_options_free(o);

    /* ---- a constrained method through the options ---- */
    o = options("2", "30");
    amped_options_set(o, "method", "hals");
    amped_options_set(o, "constraint", "nonneg");
    r = NULL;
    is_int(amped_cp(t, o, NULL, NULL, &r), AMPED_OK, "hals");
    double *A0 = malloc(I * 2 * sizeof *A0);
    int neg = 0;
    if (r) {
        amped_result_factor(r, 0, A0);
        for (int k = 0; k < I * 2; k++)
            neg |= A0[k] < 0;
    }
    ok(r && !neg, "non-negative factors");
    ok(r && fabs(amped_result_fit(r) - dense_fit(&c, r)) <= 1e-10, "and its fit recomputed");
    free(A0);
    amped_result_free(r);
    amped_options_free(o);

    /* ---- one GPU: the CPU's answer, and the same stop ---- */
    if (amped_device_count() == 0) {
        skip(4, "no GPU (or a build without CUDA)");
    } else {
        amped_result *rc = NULL, *rg = NULL;
        o = options("3", "10");
        amped_cp(t, o, NULL, NULL, &rc);
        amped_options_set(o, "gpus", "1");
        is_int(amped_cp(t, o, NULL, NULL, &rg), AMPED_OK, "the same run on one GPU");
        ok(rg && rc && strcmp(amped_result_backend(rg), "gpu") == 0 &&
           fabs(amped_result_fit(rg) - amped_result_fit(rc)) <= 1e-10,
           "on the GPU backend, with the CPU's fit to 1e-10");
        amped_result_free(rg);
        rg = NULL;
        is_int(amped_cp(t, o, stop_at_3, NULL, &rg), AMPED_OK, "a callback that stops it");
        ok(rg && amped_result_stopped(rg) && amped_result_iters(rg) == 3,
           "stopped after iteration 3 on the GPU");
        amped_result_free(rg);
        amped_result_free(rc);
        amped_options_free(o);
    }
    amped_tensor_free(t);
    return done_testing();
}
