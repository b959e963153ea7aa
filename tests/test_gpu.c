/* GPU presence, a kernel round trip, and the MTTKRP kernel against the
 * CPU's f64 reference, with the tensor resident and streamed in odd-sized
 * chunks; skipped without CUDA or a device.
 *
 * Tolerances (normwise: largest entry error over largest entry): f64
 * 1e-12; f32 1e-4 (every product and sum rounds to 24 bits).
 *
 * CP-ALS on the GPU against the CPU backend from the same starting
 * factors: after 10 iterations in f64, where only the order of the sums
 * differs, the fit within 1e-6 and the factors within 1e-6 (normwise;
 * only finite where the solve took a pseudo-inverse, whose factors are not
 * unique, and the fit only finite where that pseudo-inverse came from a
 * numerically singular V rather than a rank above a dimension); after 1 in f32 the fit within 1e-2 (the Gram products of these
 * small tensors are ill-conditioned: f32 rounding moves their fits by
 * ~1e-3); the pseudo-inverse taken in the same runs.
 *
 * Random tensors of 3 to 5 modes take the team and lane kernels, of 6 and
 * 8 modes the generic one.
 *
 * The constrained methods' row updates (AO-ADMM, MU, HALS: constrained.cu)
 * against the CPU's amp_cpu_update_rows on the same rows: A, U and
 * AO-ADMM's P within 1e-10 normwise, rho the same bits (test_update_rows
 * says more). */
#include <config.h>

#include <inttypes.h>

#include "tap.h"
#include "cpd_util.h"
#ifdef AMP_HAVE_CUDA
#include "amp_cuda.h"
#endif

#ifdef AMP_HAVE_CUDA
/* g's MTTKRP of every mode, f64 and f32, each rank, against
 * amp_mttkrp_reference on t. */
static void check_mttkrp_of(const char *name, const amp_tensor *t, const amp_gpu_tensor *g,
                            const unsigned *ranks, int nranks)
{
    amp_error err = {0};
    uint64_t maxr = 1;
    for (unsigned m = 0; m < t->nmodes; m++)
        maxr = t->rows[m] > maxr ? t->rows[m] : maxr;
    for (int i = 0; i < nranks; i++) {
        unsigned R = ranks[i];
        double *A[AMP_MAX_MODES];
        for (unsigned m = 0; m < t->nmodes; m++)
            A[m] = random_matrix(t->rows[m], R, 31 + m + R);
        double *ref = malloc(maxr * R * sizeof *ref), *M = malloc(maxr * R * sizeof *M);
        double worst[2] = {0, 0};
        int fails = 0;
        for (int f32 = 0; f32 < 2; f32++)
            for (unsigned d = 0; d < t->nmodes; d++) {
                if (amp_mttkrp_reference(t, d, d, (const double *const *)A, R, ref, &err) !=
                        AMP_OK ||
                    amp_gpu_mttkrp_host(g, (const double *const *)A, R, f32, d, M, 0, NULL,
                                        &err) != AMP_OK) {
                    diag("%s", amp_error_message(&err));
                    fails++;
                    continue;
                }
                double e = rel_diff(M, ref, t->rows[d] * R);
                worst[f32] = e > worst[f32] || isnan(e) ? e : worst[f32];
            }
        ok(!fails && worst[0] <= 1e-12, "%s: GPU MTTKRP f64, every mode, rank %u (%.2e)", name,
           R, worst[0]);
        ok(!fails && worst[1] <= 1e-4, "%s: GPU MTTKRP f32, every mode, rank %u (%.2e)", name,
           R, worst[1]);
        for (unsigned m = 0; m < t->nmodes; m++)
            free(A[m]);
        free(ref);
        free(M);
    }
}

/* The MTTKRP in cut ranges, as several GPUs run it to send a mode's rows
 * range by range: 3 and 8 ranges, on grids that fit and on 3 times that,
 * ranks 7 and 32, against the reference (f64 within 1e-12, f32 1e-4);
 * and the cuts: on every resident copy with a nonzero, rows in order from
 * the copy's first to its end. M starts as NaN (mttkrp_host), so a row
 * no range writes fails. */
#define CUT_CHECKS 4

/* Each of the AMP_GPU_CUTS ranges run alone (f64, rank 7) writes exactly
 * the rows between its cuts, as several GPUs solve a range as soon as it
 * is done: those rows equal the reference's (1e-12), the rest stay NaN,
 * or 0 in a copy that is not gapless (whose first range zeroes its rows
 * before the others add into them). */
static void check_ranges_alone(const char *name, const amp_tensor *t, const amp_gpu_tensor *g,
                               int cut)
{
    const unsigned R = 7;
    amp_error err = {0};
    uint64_t maxr = 1, wrong = 0;
    double worst = 0;
    int fails = !cut;
    for (unsigned m = 0; m < t->nmodes; m++)
        maxr = t->rows[m] > maxr ? t->rows[m] : maxr;
    double *A[AMP_MAX_MODES];
    for (unsigned m = 0; m < t->nmodes; m++)
        A[m] = random_matrix(t->rows[m], R, 91 + m);
    double *ref = malloc(maxr * R * sizeof *ref), *M = malloc(maxr * R * sizeof *M);
    for (unsigned d = 0; d < t->nmodes && !fails; d++) {
        uint64_t row[AMP_GPU_CUTS + 1];
        if (t->copies[d].nnz == 0 || !amp_gpu_tensor_cuts(g, d, row))
            continue;
        if (amp_mttkrp_reference(t, d, d, (const double *const *)A, R, ref, &err) != AMP_OK) {
            fails++;
            break;
        }
        const int zeroes = !amp_gpu_tensor_gapless(g, d);
        for (int j = 0; j < AMP_GPU_CUTS && !fails; j++) {
            if (amp_gpu_mttkrp_cuts_host(g, (const double *const *)A, R, 0, d, AMP_GPU_CUTS, j,
                                         1, M, &err) != AMP_OK) {
                diag("%s", amp_error_message(&err));
                fails++;
                break;
            }
            const uint64_t in = row[j] * R, n = (row[j + 1] - row[j]) * R;
            const double e = n ? rel_diff(M + in, ref + in, n) : 0;
            worst = e > worst || isnan(e) ? e : worst;
            for (uint64_t i = 0; i < t->rows[d] * R; i++)
                if (i < in || i >= in + n)
                    wrong += zeroes ? M[i] != 0 : !isnan(M[i]);
        }
    }
    for (unsigned m = 0; m < t->nmodes; m++)
        free(A[m]);
    free(ref);
    free(M);
    ok(!fails && worst <= 1e-12 && wrong == 0, "%s: each of %d cut ranges alone writes its rows "
       "(%.2e) and no other (%" PRIu64 " values written outside)", name, AMP_GPU_CUTS, worst,
       wrong);
}

static void check_cuts_of(const char *name, const amp_tensor *t, const amp_gpu_tensor *g)
{
    amp_error err = {0};
    unsigned cut_ok = 0, with_nnz = 0;
    for (unsigned m = 0; m < t->nmodes; m++) {
        uint64_t row[AMP_GPU_CUTS + 1];
        if (t->copies[m].nnz == 0)
            continue;
        with_nnz++;
        int sane = amp_gpu_tensor_cuts(g, m, row) && row[0] == t->copies[m].row_begin &&
                   row[AMP_GPU_CUTS] == t->copies[m].row_begin + t->copies[m].row_count;
        for (unsigned j = 1; j <= AMP_GPU_CUTS && sane; j++)
            sane = row[j] >= row[j - 1];
        cut_ok += sane;
    }
    ok(cut_ok == with_nnz, "%s: %u of %u copies cut at rows in order", name, cut_ok, with_nnz);
    uint64_t maxr = 1;
    for (unsigned m = 0; m < t->nmodes; m++)
        maxr = t->rows[m] > maxr ? t->rows[m] : maxr;
    static const unsigned ranks[2] = {7, 32}, parts[2] = {3, 8}, waves[2] = {1, 3};
    for (int f32 = 0; f32 < 2; f32++) {
        double worst = 0;
        int fails = cut_ok != with_nnz;
        for (int i = 0; i < 2 && !fails; i++) {
            const unsigned R = ranks[i];
            double *A[AMP_MAX_MODES];
            for (unsigned m = 0; m < t->nmodes; m++)
                A[m] = random_matrix(t->rows[m], R, 71 + m + R);
            double *ref = malloc(maxr * R * sizeof *ref), *M = malloc(maxr * R * sizeof *M);
            for (unsigned d = 0; d < t->nmodes && !fails; d++) {
                if (t->copies[d].nnz == 0)
                    continue;
                if (amp_mttkrp_reference(t, d, d, (const double *const *)A, R, ref, &err) !=
                    AMP_OK) {
                    fails++;
                    break;
                }
                for (int p = 0; p < 2 && !fails; p++) {
                    if (amp_gpu_mttkrp_cuts_host(g, (const double *const *)A, R, f32, d,
                                                 parts[p], -1, waves[p], M, &err) != AMP_OK) {
                        diag("%s", amp_error_message(&err));
                        fails++;
                        break;
                    }
                    double e = rel_diff(M, ref, t->rows[d] * R);
                    worst = e > worst || isnan(e) ? e : worst;
                }
            }
            for (unsigned m = 0; m < t->nmodes; m++)
                free(A[m]);
            free(ref);
            free(M);
        }
        ok(!fails && worst <= (f32 ? 1e-4 : 1e-12), "%s: GPU MTTKRP in 3 and 8 cut ranges, %s, "
           "ranks 7 and 32 (%.2e)", name, f32 ? "f32" : "f64", worst);
    }
    check_ranges_alone(name, t, g, cut_ok == with_nnz);
}

static void check_cuts(const char *name, const amp_tensor *t)
{
    amp_gpu_tensor *g = NULL;
    amp_error err = {0};
    if (amp_gpu_tensor_upload(0, t, 0, &g, &err) != AMP_OK) {
        ok(0, "%s: uploads for the cut ranges (%s)", name, amp_error_message(&err));
        skip(CUT_CHECKS - 1, "no upload");
        return;
    }
    check_cuts_of(name, t, g);
    amp_gpu_tensor_free(g);
}

/* "NAME", or "NAME streamed in chunks of N" when chunk is not 0. */
static const char *label_for(char *buf, size_t n, const char *name, uint64_t chunk)
{
    if (chunk)
        snprintf(buf, n, "%s streamed in chunks of %" PRIu64, name, chunk);
    else
        snprintf(buf, n, "%s", name);
    return buf;
}

/* want_gapless: 1 or 0 to also check the copies' gapless flags (resident
 * only: a streamed copy is never gapless), -1 not to. */
static void check_gpu_mttkrp_as(const char *name, const amp_tensor *t, const unsigned *ranks,
                                int nranks, uint64_t chunk, int want_gapless)
{
    amp_gpu_tensor *g = NULL;
    amp_error err = {0};
    char label[256];
    label_for(label, sizeof label, name, chunk);
    if (!ok(amp_gpu_tensor_upload(0, t, chunk, &g, &err) == AMP_OK, "%s: uploads (%s)", label,
            amp_error_message(&err))) {
        skip(2 * nranks + (want_gapless >= 0), "no upload");
        return;
    }
    if (want_gapless >= 0) {
        unsigned as_wanted = 0;
        for (unsigned m = 0; m < t->nmodes; m++)
            as_wanted += amp_gpu_tensor_gapless(g, m) == (chunk ? 0 : want_gapless);
        ok(as_wanted == t->nmodes, "%s: %u of %u copies %s", label, as_wanted, t->nmodes,
           chunk || !want_gapless ? "zeroed before their MTTKRP"
                                  : "gapless (written without zeroing)");
    }
    check_mttkrp_of(label, t, g, ranks, nranks);
    amp_gpu_tensor_free(g);
}

static void check_gpu_mttkrp(const char *name, const amp_tensor *t, const unsigned *ranks,
                             int nranks, uint64_t chunk)
{
    check_gpu_mttkrp_as(name, t, ranks, nranks, chunk, -1);
}

/* Every row of every mode one past the last nonzero's: the copies have a
 * gap, so M must be zeroed before their MTTKRP (check_mttkrp_of starts
 * from NaN, so a row left unwritten fails). */
#define GAP_RANKS 2
#define GAP_CHECKS (6 + 4 * GAP_RANKS + CUT_CHECKS)
static void check_with_gap(const char *name, amp_tensor *t)
{
    static const unsigned ranks[GAP_RANKS] = {7, 32};
    char label[256];
    snprintf(label, sizeof label, "%s with an empty last row", name);
    check_gpu_mttkrp_as(name, t, ranks, 0, 0, 1);
    for (unsigned m = 0; m < t->nmodes; m++)
        t->rows[m]++, t->copies[m].row_count++;
    check_gpu_mttkrp_as(label, t, ranks, GAP_RANKS, 0, 0);
    for (unsigned m = 0; m < t->nmodes; m++)
        t->rows[m]--, t->copies[m].row_count--;

    /* A gap inside: in mode 1's own copy, its rows from the middle on
     * move up by one, so the middle row is empty (each mode's MTTKRP and
     * its reference read only that mode's copy, so the others stay
     * consistent). Where the row field has no room or lies across block
     * keys, skipped. */
    amp_copy *c = &t->copies[0];
    const unsigned sh = c->layout.shift[0], wd = c->layout.width[0];
    const uint64_t mid = t->rows[0] / 2;
    if (c->nblocks != 1 || wd == 0 || wd >= 64 || sh + wd > 64 || t->rows[0] >= (1ull << wd)) {
        skip(2 + 2 * GAP_RANKS + CUT_CHECKS, "no room for an inner gap in mode 1's row field");
        return;
    }
    const uint64_t mask = (1ull << wd) - 1;
    for (uint64_t k = 0; k < c->nnz; k++)
        if (((c->words[k] >> sh) & mask) >= mid)
            c->words[k] += 1ull << sh;
    t->rows[0]++, c->row_count++;
    snprintf(label, sizeof label, "%s with mode 1's row %" PRIu64 " empty", name, mid);
    amp_gpu_tensor *g = NULL;
    amp_error err = {0};
    if (!ok(amp_gpu_tensor_upload(0, t, 0, &g, &err) == AMP_OK, "%s: uploads (%s)", label,
            amp_error_message(&err))) {
        skip(1 + 2 * GAP_RANKS + CUT_CHECKS, "no upload");
    } else {
        unsigned as_wanted = !amp_gpu_tensor_gapless(g, 0);
        for (unsigned m = 1; m < t->nmodes; m++)
            as_wanted += amp_gpu_tensor_gapless(g, m);
        ok(as_wanted == t->nmodes, "%s: mode 1's copy zeroed first, the others gapless", label);
        check_mttkrp_of(label, t, g, ranks, GAP_RANKS);
        check_cuts_of(label, t, g);
        amp_gpu_tensor_free(g);
    }
    t->rows[0]--, c->row_count--;
    for (uint64_t k = 0; k < c->nnz; k++)
        if (((c->words[k] >> sh) & mask) > mid)
            c->words[k] -= 1ull << sh;
}

/* Straight from the file (its layout only in host memory), on 3 threads
 * so that chunks of every mode interleave: resident, or streamed from its
 * compressed chunks (decoded again for every MTTKRP, through more slots
 * than chunks on some tensors and fewer on others). The same MTTKRP as
 * the reference on the loaded tensor t. */
#define FROM_FILE_RANKS 2
#define FROM_FILE_CHECKS (1 + 2 * FROM_FILE_RANKS)
static void check_from_file(const char *name, const amp_tensor *t, const amp_file *f,
                            int compressed)
{
    static const unsigned ranks[FROM_FILE_RANKS] = {7, 33};
    amp_tensor layout;
    amp_gpu_tensor *g = NULL;
    amp_error err = {0};
    char label[256];
    snprintf(label, sizeof label, "%s %s", name,
             compressed ? "streamed from compressed chunks" : "straight from the file");
    int up = amp_tensor_load_layout(f, &layout, &err) == AMP_OK;
    if (up && !layout.layout_only)
        up = 0, diag("the layout holds nonzeros");
    if (up)
        up = (compressed ? amp_gpu_tensor_upload_compressed(0, f, &layout, 3, NULL, NULL, &g,
                                                            &err)
                         : amp_gpu_tensor_upload_file(0, f, &layout, 3, NULL, NULL, NULL, &g,
                                                      &err)) ==
             AMP_OK;
    if (up && compressed && !(amp_gpu_tensor_streamed(g) && amp_gpu_tensor_compressed(g) &&
                              amp_gpu_tensor_host_bytes(g) > 0))
        up = 0, diag("not streamed from compressed chunks");
    if (!ok(up, "%s: uploads (%s)", label, up ? "ok" : amp_error_message(&err)))
        skip(2 * FROM_FILE_RANKS, "no upload");
    else
        check_mttkrp_of(label, t, g, ranks, FROM_FILE_RANKS);
    amp_gpu_tensor_free(g);
    amp_tensor_free(&layout);   /* zeroed when its load failed */
}

/* Each copy cut in two groups as a GPU's part of a multi-GPU run is (the
 * second launch adds into what the first wrote, every row atomically), at
 * a position no row boundary need fall on: resident and streamed. */
#define GROUP_RANKS 2
#define GROUP_CHECKS (2 * (1 + 2 * GROUP_RANKS))
static void check_two_groups(const char *name, amp_tensor *t)
{
    static const unsigned ranks[GROUP_RANKS] = {7, 32};
    char label[256];
    snprintf(label, sizeof label, "%s in two groups", name);
    for (unsigned m = 0; m < t->nmodes; m++)
        t->copies[m].early_nnz = t->nnz / 2 + 1;
    check_gpu_mttkrp(label, t, ranks, GROUP_RANKS, 0);
    check_gpu_mttkrp(label, t, ranks, GROUP_RANKS, 997);
    for (unsigned m = 0; m < t->nmodes; m++)
        t->copies[m].early_nnz = t->nnz;
}

#define ALS_CHECKS 4

/* Returns whether the GPU run took the pseudo-inverse (f64). With a rank
 * above a mode's dimension (unique, false) the factors are not unique:
 * two exact fits may differ in them, so only their finiteness is asked. */
static int check_gpu_als_as(const char *name, const amp_tensor *t, unsigned R, uint64_t chunk,
                            int unique)
{
    amp_gpu_tensor *g = NULL;
    amp_error err = {0};
    char label[256];
    name = label_for(label, sizeof label, name, chunk);
    if (amp_gpu_tensor_upload(0, t, chunk, &g, &err) != AMP_OK) {
        diag("%s", amp_error_message(&err));
        for (int i = 0; i < ALS_CHECKS; i++)
            ok(0, "%s: CP-ALS rank %u: upload", name, R);
        return 0;
    }
    double fit[2][2] = {{0}}, fdiff = INFINITY;   /* [f32][gpu] */
    int pinv[2] = {0, 0}, fails = 0;
    uint64_t zero_cols = 0;   /* f32: columns zero on one backend only */
    for (int f32 = 0; f32 < 2; f32++) {
        amp_cpd c[2];
        memset(c, 0, sizeof c);   /* amp_cpd_free is safe on a failed init */
        amp_cpd_opts o;
        amp_cpd_opts_init(&o);
        o.rank = R;
        /* f32 rounding differs between the backends (sum order) and
         * grows fast on ill-conditioned, low-fit data: jf17k at rank 32
         * drifted from 0.080 to 0.056 in 10 iterations, and by 4e-3
         * in 3. One iteration shows the f32 path computes the same
         * thing; on rd100m 10 f32 and f64 iterations agree to 3e-7. */
        o.max_iters = f32 ? 1 : 10;
        o.tol = 0;
        o.precision = f32 ? AMP_PRECISION_F32 : AMP_PRECISION_F64;
        for (int gpu = 0; gpu < 2; gpu++) {
            if (amp_cpd_init_random(t, R, 5, &c[gpu], &err) != AMP_OK ||
                (gpu ? amp_gpu_cpd_als(g, t, &o, &c[gpu], &err)
                     : amp_cpu_als(t, &o, &c[gpu], &err)) != AMP_OK) {
                diag("%s", amp_error_message(&err));
                fails++;
            }
            fit[f32][gpu] = c[gpu].fit;
            if (!f32)
                pinv[gpu] = c[gpu].pinv_used;
        }
        /* A collapsed f32 run (its M flushed to zero or overflowed)
         * leaves zero or non-finite columns and a fit near 0, which the
         * fits' absolute tolerance alone would pass on low-fit data. */
        if (f32 && !fails && unique)   /* not unique: a column may be 0 on one side */
            for (unsigned m = 0; m < t->nmodes; m++)
                for (unsigned r = 0; r < R; r++) {
                    int live[2] = {0, 0};
                    for (int b = 0; b < 2; b++)
                        for (uint64_t i = 0; i < t->rows[m]; i++) {
                            double a = c[b].A[m][i * R + r];
                            if (!isfinite(a)) {
                                live[b] = -1;
                                break;
                            }
                            if (a != 0)
                                live[b] = 1;
                        }
                    zero_cols += live[0] != live[1] || live[1] < 0;
                }
        if (!f32 && !fails) {
            fdiff = 0;
            for (unsigned m = 0; m < t->nmodes; m++) {
                double e = rel_diff(c[1].A[m], c[0].A[m], t->rows[m] * R);
                fdiff = e > fdiff || isnan(e) ? e : fdiff;
            }
            double e = rel_diff(c[1].lambda, c[0].lambda, R);
            fdiff = e > fdiff || isnan(e) ? e : fdiff;
        }
        amp_cpd_free(&c[0]);
        amp_cpd_free(&c[1]);
    }
    /* A pseudo-inverse forced by structure (unique false: a rank above a
     * dimension) has a clear gap between the eigenvalues kept and dropped,
     * so both backends follow one path. One that a random tensor runs into
     * inverts eigenvalues next to the cut, which amplifies rounding by up
     * to 1e14: the GPU's sum order (atomic adds) varies from run to run,
     * and so does its path, so only finiteness is asked of its fits. */
    if (unique && (pinv[0] || pinv[1]))
        ok(!fails && isfinite(fit[0][1]) && isfinite(fit[0][0]), "%s: CP-ALS rank %u f64: GPU "
           "fit %.10f, CPU %.10f, finite (a numerically singular V)", name, R, fit[0][1],
           fit[0][0]);
    else
        ok(!fails && fabs(fit[0][1] - fit[0][0]) <= 1e-6, "%s: CP-ALS rank %u f64: GPU fit "
           "%.10f, CPU %.10f", name, R, fit[0][1], fit[0][0]);
    /* A pseudo-inverse solve (V numerically singular) drops the
     * eigenvalues under a cut that rounding moves, so its factors are not
     * unique either. */
    if (unique && !pinv[0] && !pinv[1])
        ok(!fails && fdiff <= 1e-6, "%s: CP-ALS rank %u f64: factors and lambda agree (%.2e)",
           name, R, fdiff);
    else
        ok(!fails && isfinite(fdiff), "%s: CP-ALS rank %u f64: factors and lambda finite (not "
           "unique%s; they differ by %.2e)", name, R,
           pinv[0] || pinv[1] ? ": a pseudo-inverse solve" : "", fdiff);
    /* f32: the Gram products of these tensors are ill-conditioned enough
     * that one iteration moves the fit by up to ~3e-3 between two
     * summation orders (jf17k-5mode rank 32: 0.01818 vs 0.01830;
     * jf17k-4mode rank 7 streamed: 0.0269 vs 0.0245), while rd100m's f32
     * and f64 fits agree to 3e-7 over 10 iterations. This catches a
     * broken f32 path; the f64 checks above are the exact ones. */
    /* A singular V in f32 (a pseudo-inverse, forced or not): f32's
     * rounding puts the eigenvalues that should be 0 far above the cut
     * (R eps max|w| in f64), so which are inverted depends on the sum
     * order, and the run's path on that (an H200 run reached 0.245 where
     * the CPU reached 1.0): only finiteness, as for f64 above. */
    if (pinv[0] || pinv[1])
        ok(!fails && isfinite(fit[1][1]) && zero_cols == 0, "%s: CP-ALS rank %u f32: GPU fit "
           "%.8f, CPU %.8f, finite (a singular V)", name, R, fit[1][1], fit[1][0]);
    else
        ok(!fails && fabs(fit[1][1] - fit[1][0]) <= 1e-2 && zero_cols == 0, "%s: CP-ALS rank "
           "%u f32: GPU fit %.8f, CPU %.8f (tolerance 1e-2), the same columns nonzero and "
           "finite", name, R, fit[1][1], fit[1][0]);
    if (zero_cols)
        diag("%" PRIu64 " factor columns zero on one backend only, or not finite", zero_cols);
    ok(pinv[0] == pinv[1], "%s: CP-ALS rank %u: pseudo-inverse used on both or neither (%d)",
       name, R, pinv[1]);
    amp_gpu_tensor_free(g);
    return pinv[1];
}

static int check_gpu_als(const char *name, const amp_tensor *t, unsigned R, uint64_t chunk)
{
    return check_gpu_als_as(name, t, R, chunk, 1);
}

/* The GPU's f64 fit sequence against the textbook CP-ALS (cp_ref.h) from
 * the same starting factors, resident and streamed: every iteration's fit
 * within 1e-10, lambda and the factors after the last within 1e-8
 * (normwise). Two starts: amped's random one (no rows for the slices the
 * file dropped as empty), and one read by --init (full_start) with a
 * value in every row and a lambda, where the dropped slices' rows count
 * as in the textbook until their mode is first updated (issue 27). */
#define REF_RANK 5
#define REF_ITERS 12
#define REF_CHECKS 8
static void check_gpu_ref(const char *name, const amp_coo *x, const amp_tensor *t,
                          uint64_t chunk)
{
    cp_ref_tensor rx;
    if (!cp_ref_tensor_from(x, &rx)) {
        skip(REF_CHECKS, "out of memory for the reference");
        return;
    }
    for (int k = 0; k < 4; k++) {
        const int streamed = k & 1, init = k >> 1;
        amp_gpu_tensor *g = NULL;
        amp_error err = {0};
        amp_cpd c = {0};
        amp_cpd_opts o;
        amp_cpd_opts_init(&o);
        o.rank = REF_RANK;
        o.max_iters = REF_ITERS;
        o.tol = 0;
        fit_log log = {0};
        o.on_iter = fit_log_add;
        o.ctx = &log;
        double fit_gap = NAN, factor_gap = NAN, *A[CP_REF_MAX_MODES] = {0};
        uint64_t dropped = 0;
        int started = init ? full_start(t, REF_RANK, 13, "gpu_start", &c, A, &dropped)
                           : amp_cpd_init_random(t, REF_RANK, 11, &c, &err) == AMP_OK;
        int okay = started &&
                   amp_gpu_tensor_upload(0, t, streamed ? chunk : 0, &g, &err) == AMP_OK &&
                   amp_gpu_cpd_als(g, t, &o, &c, &err) == AMP_OK;
        if (started && !okay)
            diag("%s", amp_error_message(&err));
        int compared = compare_after_run(&rx, t, REF_RANK, 11, REF_ITERS, okay, init, &log, &c,
                                         A, &fit_gap, &factor_gap);
        char how[96];
        snprintf(how, sizeof how, "%s, %s", streamed ? "streamed" : "resident",
                 init ? "--init start in every row" : "random start");
        if (init)
            snprintf(how + strlen(how), sizeof how - strlen(how), ", %" PRIu64 " rows of "
                     "dropped slices", dropped);
        ok(compared && fit_gap <= 1e-10, "%s, %s: %u f64 fits within %.1e of the textbook "
           "CP-ALS's (last %.12f)", name, how, REF_ITERS, fit_gap, okay ? c.fit : NAN);
        ok(compared && factor_gap <= 1e-8, "%s, %s: lambda and factors within %.1e of the "
           "textbook's", name, how, factor_gap);
        if (started)
            amp_cpd_free(&c);
        amp_gpu_tensor_free(g);
    }
    cp_ref_tensor_free(&rx);
}

/* The constrained methods on the GPU against the CPU backend from the same
 * start, resident and streamed (chunk): every iteration's fit within
 * 1e-9, lambda and the factors after the last within 1e-8 (normwise).
 * f64, rank 5, 10 iterations; AO-ADMM non-negative with an l1 penalty on
 * the first mode, MU non-negative, HALS non-negative but on the second
 * mode (free, and with a ridge). */
#define METHOD_CHECKS (3 * 2 * 2)
static void check_gpu_methods(const char *name, const amp_tensor *t, uint64_t chunk)
{
    static const amp_method methods[3] = {AMP_METHOD_ADMM, AMP_METHOD_MU, AMP_METHOD_HALS};
    const unsigned R = 5, iters = 10;
    for (int k = 0; k < 3; k++) {
        amp_cpd_opts o = constrained_opts(methods[k], t->nmodes, R, iters, 0.1);
        fit_log cpu_log = {0};
        o.on_iter = fit_log_add;
        o.ctx = &cpu_log;
        amp_cpd cpu = {0};
        amp_error err = {0};
        int base = amp_cpd_init_random(t, R, 3, &cpu, &err) == AMP_OK &&
                   amp_cpu_als(t, &o, &cpu, &err) == AMP_OK && cpu_log.n == iters;
        for (int streamed = 0; streamed < 2; streamed++) {
            amp_gpu_tensor *g = NULL;
            amp_cpd gpu = {0};
            fit_log log = {0};
            o.ctx = &log;
            int okay = base && amp_gpu_tensor_upload(0, t, streamed ? chunk : 0, &g, &err) ==
                                   AMP_OK &&
                       amp_cpd_init_random(t, R, 3, &gpu, &err) == AMP_OK &&
                       amp_gpu_cpd_als(g, t, &o, &gpu, &err) == AMP_OK && log.n == iters;
            if (!okay)
                diag("%s", amp_error_message(&err));
            double gap = okay ? fits_gap(&log, &cpu_log, iters) : NAN;
            double fd = okay ? cpd_diff(t, &gpu, &cpu) : NAN;
            const char *how = streamed ? "streamed" : "resident";
            ok(okay && gap <= 1e-9, "%s, %s, %s: %u fits within %.1e of the CPU's (last %.10f)",
               name, amp_method_name(methods[k]), how, iters, gap, okay ? gpu.fit : NAN);
            ok(okay && fd <= 1e-8, "%s, %s, %s: lambda and factors within %.1e of the CPU's",
               name, amp_method_name(methods[k]), how, fd);
            amp_cpd_free(&gpu);
            amp_gpu_tensor_free(g);
            o.ctx = &cpu_log;
        }
        amp_cpd_free(&cpu);
    }
}

static const unsigned all_ranks[] = {1, 7, 16, 32, 33, 64, 200};
#define NRANKS 7
/* Streamed: chunks of an odd size, so rows and key blocks are cut. */
static const unsigned stream_ranks[] = {7, 32};
#define STREAM_RANKS 2
#define STREAM_CHUNK 997
#define STREAM_CHECKS (1 + 2 * STREAM_RANKS + ALS_CHECKS)

/* 3 to 5 modes take the team and lane kernels, 6 and more the generic
 * one (every nonzero decoded by the whole warp); dimensions above rank 64
 * keep the rank-64 factors unique. */
#define NSHAPES 5
static void test_random(void)
{
    static const shape shapes[NSHAPES] = {
        {"3 modes, power-law", 3, {5000, 3000, 800}, 60000, 1},
        {"4 modes", 4, {60, 50, 40, 30}, 9000, 0},
        {"5 modes, 80 index bits", 5, {1000000, 1000000, 1000000, 1000000, 1000000}, 70000, 0},
        {"6 modes", 6, {100, 90, 80, 75, 70, 70}, 20000, 1},
        {"8 modes", 8, {90, 80, 80, 75, 72, 70, 70, 70}, 20000, 0},
    };
    for (size_t i = 0; i < NSHAPES; i++) {
        amp_coo x;
        amp_tensor t;
        random_tensor(&shapes[i], 500 + i, &x);
        /* The first with three decimals, negatives among them: its
         * streamed copies take the stream layout (value inside the word). */
        if (i == 0)
            for (uint64_t k = 0; k < x.nnz; k++)
                x.val[k] = round(x.val[k] * 1000) / 1000;
        amp_file *f = NULL;
        if (!prepare_open(&x, "gpu.amp", 8, 997, &t, &f)) {
            ok(0, "%s: prepares", shapes[i].name);
            skip(1 + 2 * NRANKS + CUT_CHECKS + 2 * ALS_CHECKS + STREAM_CHECKS +
                     2 * FROM_FILE_CHECKS + GROUP_CHECKS + GAP_CHECKS + REF_CHECKS +
                     METHOD_CHECKS, "no file");
            amp_coo_free(&x);
            continue;
        }
        check_gpu_mttkrp(shapes[i].name, &t, all_ranks, NRANKS, 0);
        check_cuts(shapes[i].name, &t);
        check_from_file(shapes[i].name, &t, f, 0);
        check_from_file(shapes[i].name, &t, f, 1);
        amp_file_close(f);
        check_gpu_als(shapes[i].name, &t, 7, 0);
        /* Rank 64 is above the 4-mode one's dims. On 8 modes it is more
         * than 20000 nonzeros support: ALS degenerates (lambda grows
         * without bound, V becomes singular to rounding), and any two
         * sum orders part: the GPU's atomics gave fits of 0.00368 and
         * 0.00478 on two H100 runs of one build, and one H200 run ended
         * with V no longer finite (syevd failed). Nothing there to
         * compare; the 6-mode tensor takes rank 64 on the same kernel. */
        if (shapes[i].nmodes == 8)
            skip(ALS_CHECKS, "8 modes: rank 64 degenerates on this tensor");
        else
            check_gpu_als(shapes[i].name, &t, 64, 0);
        amp_gpu_tensor *g = NULL;
        amp_error e = {0};
        double want = i == 0 ? 8.0 * (double)t.nnz * t.nmodes : 0;
        int up = amp_gpu_tensor_upload(0, &t, STREAM_CHUNK, &g, &e) == AMP_OK;
        double moved = up ? amp_gpu_stream_bytes(g) : 0;
        ok(up && (i != 0 || moved == want), "%s: streamed, %.0f bytes a round%s", shapes[i].name,
           moved, i == 0 ? " (8 a nonzero: the stream layout)" : "");
        amp_gpu_tensor_free(g);
        check_gpu_mttkrp(shapes[i].name, &t, stream_ranks, STREAM_RANKS, STREAM_CHUNK);
        check_gpu_als(shapes[i].name, &t, 7, STREAM_CHUNK);
        check_two_groups(shapes[i].name, &t);
        check_with_gap(shapes[i].name, &t);
        /* 10^6 rows a mode: the reference's dense factors (every index's
         * row) would take seconds a Gram. */
        if (shapes[i].dims[0] >= 1000000)
            skip(REF_CHECKS, "dimensions of 10^6: too large for the textbook reference");
        else
            check_gpu_ref(shapes[i].name, &x, &t, STREAM_CHUNK);
        check_gpu_methods(shapes[i].name, &t, STREAM_CHUNK);
        amp_tensor_free(&t);
        amp_coo_free(&x);
    }
}

/* CP-ALS of 10 iterations from seed 5 on run (NULL: the CPU). */
static amp_status full_decompose(const amp_tensor *t, amp_gpu_run *run, amp_cpd *c,
                                 amp_error *err)
{
    amp_cpd_opts o;
    amp_cpd_opts_init(&o);
    o.rank = 7;
    o.max_iters = 10;
    o.tol = 0;
    amp_gpu_als_opts go = {0};
    amp_status rc = amp_cpd_init_random(t, o.rank, 5, c, err);
    if (rc == AMP_OK)
        rc = run ? amp_gpu_run_als(run, t, &o, &go, c, err) : amp_cpu_als(t, &o, c, err);
    return rc;
}

/* A resident tensor whose device allocation finds the GPU's memory taken
 * after the plan (issue 27; amp_gpu_opts.fail_resident stands in for the
 * other process): --memory auto streams it instead, from the file (the
 * nonzeros read into host memory first) or from host memory, says so in
 * the run's note and reaches the CPU's fit (1e-6); forced resident fails
 * with AMP_ERR_NOMEM naming the GPU, what it needs and what is free.
 * Without the hook the same open is resident with no note. */
#define FULL_CHECKS 7   /* from the file 3, from host memory 2, resident 1, no hook 1 */
static void test_resident_full(void)
{
    static const shape sh = {"4 modes", 4, {60, 50, 40, 30}, 9000, 0};
    amp_coo x;
    amp_tensor t, layout;
    amp_file *f = NULL;
    amp_cpd cpu = {0};
    amp_error err = {0};
    random_tensor(&sh, 77, &x);
    if (!prepare_open(&x, "full.amp", 8, 997, &t, &f)) {
        ok(0, "%s: prepares", sh.name);
        skip(FULL_CHECKS - 1, "no file");
        amp_coo_free(&x);
        return;
    }
    if (full_decompose(&t, NULL, &cpu, &err) != AMP_OK)
        diag("the CPU: %s", amp_error_message(&err));
    amp_cpd_opts cpd;
    amp_cpd_opts_init(&cpd);
    cpd.rank = 7;
    for (int from_file = 1; from_file >= 0; from_file--) {
        open_log log = {"", 0, 0};
        amp_gpu_opts o;
        memset(&o, 0, sizeof o);
        o.path = "full.amp";
        o.gpus = 1;
        o.memory = AMP_MEMORY_AUTO;
        o.fail_resident = 1;
        o.progress = open_log_progress;
        o.phase = open_log_phase;
        o.progress_ctx = &log;
        const amp_tensor *use = &t;
        int have_layout = 0;
        if (from_file) {
            have_layout = amp_tensor_load_layout(f, &layout, &err) == AMP_OK;
            o.file = f;
            o.release = &layout;
            use = &layout;
        }
        amp_gpu_run *run = NULL;
        amp_status rc = from_file && !have_layout ? err.status
                                                  : amp_gpu_run_open(&o, &cpd, use, &run, &err);
        const char *note = rc == AMP_OK && run ? amp_gpu_run_note(run, 0) : NULL;
        amp_gpu_info in = {0};
        if (run)
            amp_gpu_run_info(run, 0, &in);
        const char *how = from_file ? "from the file" : "from host memory";
        ok(rc == AMP_OK && run && in.streamed && !amp_gpu_run_direct(run) && note &&
               strstr(note, "GPU 0 (") && strstr(note, "ran out of memory taking the tensor "
                                                      "resident") &&
               strstr(note, "streamed from host memory instead"),
           "memory taken, --memory auto, %s: streamed instead, and the note says so ('%s'%s)",
           how, note ? note : "", rc == AMP_OK ? "" : amp_error_message(&err));
        amp_cpd gpu = {0};
        if (run && (rc = full_decompose(use, run, &gpu, &err)) != AMP_OK)
            diag("%s", amp_error_message(&err));
        if (from_file) {
            ok(rc == AMP_OK && run && fabs(gpu.fit - cpu.fit) <= 1e-6, "... %s: the CPU's fit "
               "(%.10f against %.10f)", how, run ? gpu.fit : NAN, cpu.fit);
            /* The first phase, reading the file straight to the GPU, is
             * the caller's: announced are the reading into host memory
             * and the streamed upload, which ends at its total. */
            ok(strcmp(log.phases, "loading,uploading") == 0 && log.total > 0 &&
                   log.done == log.total, "... %s: the phases announced (%s), the upload "
               "reported to its end (%" PRIu64 " of %" PRIu64 " bytes)", how, log.phases,
               log.done, log.total);
        } else {
            ok(rc == AMP_OK && run && fabs(gpu.fit - cpu.fit) <= 1e-6, "... %s: the CPU's fit "
               "(%.10f against %.10f)", how, run ? gpu.fit : NAN, cpu.fit);
        }
        amp_cpd_free(&gpu);
        amp_gpu_run_close(run);
        if (have_layout)
            amp_tensor_free(&layout);
    }
    amp_gpu_opts o;
    memset(&o, 0, sizeof o);
    o.path = "full.amp";
    o.gpus = 1;
    o.memory = AMP_MEMORY_RESIDENT;
    o.fail_resident = 1;
    amp_gpu_run *run = NULL;
    amp_error e = {0};
    amp_status rc = amp_gpu_run_open(&o, &cpd, &t, &run, &e);
    const char *msg = amp_error_message(&e);
    ok(rc == AMP_ERR_NOMEM && run == NULL && strstr(msg, "GPU 0 (") && strstr(msg, "needs") &&
           strstr(msg, "is free now") && strstr(msg, "--memory auto streams it instead"),
       "memory taken, --memory resident: AMP_ERR_NOMEM (%d), naming the GPU, what it needs "
       "and what is free ('%s')", (int)rc, msg);
    amp_gpu_run_close(run);
    run = NULL;
    o.memory = AMP_MEMORY_AUTO;
    o.fail_resident = 0;
    rc = amp_gpu_run_open(&o, &cpd, &t, &run, &e);
    amp_gpu_info in = {0};
    if (run)
        amp_gpu_run_info(run, 0, &in);
    ok(rc == AMP_OK && run && !in.streamed && amp_gpu_run_note(run, 0) == NULL,
       "the same open without the hook: resident, no note");
    amp_gpu_run_close(run);
    amp_cpd_free(&cpu);
    amp_tensor_free(&t);
    amp_file_close(f);
    amp_coo_free(&x);
}

/* The fused solve and column statistics against a plain f64 product on
 * the host: random M and P (not symmetric: the run folds the factors'
 * column scales into it), ranks 1 to 32, row counts that end
 * mid-warp and mid-block, M in f64 and rounded to f32 (the reference
 * rounds it the same way). Tolerance 1e-12 normwise (the same f64 sums,
 * in another order). Rank 33 is refused. */
#define SOLVE_CHECKS (2 * 2 * 5 * 4 + 1)
static void test_solve_stats(void)
{
    static const unsigned ranks[] = {1, 7, 16, 31, 32};
    static const uint64_t row_counts[] = {1, 37, 5003, 200001};
    for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++)
        for (size_t ni = 0; ni < sizeof row_counts / sizeof *row_counts; ni++)
            for (int f32 = 0; f32 < 2; f32++) {
                const unsigned R = ranks[ri];
                const uint64_t rows = row_counts[ni];
                double *M = random_matrix(rows, R, 77 + R + rows);
                /* Not symmetric: the run's P has the factors' scales
                 * folded into its rows and columns. */
                double *P = random_matrix(R, R, 5 + R);
                if (f32)
                    for (uint64_t k = 0; k < rows * R; k++)
                        M[k] = (float)M[k];
                double *A = malloc(rows * R * sizeof *A), *ref = calloc(rows * R, sizeof *ref);
                float *A32 = f32 ? malloc(rows * R * sizeof *A32) : NULL;
                double stats[96], want[96] = {0};
                for (uint64_t i = 0; i < rows; i++)
                    for (unsigned j = 0; j < R; j++) {
                        double a = 0;
                        for (unsigned k = 0; k < R; k++)
                            a += M[i * R + k] * P[k * R + j];
                        ref[i * R + j] = a;
                        want[j] += a * a;
                        want[R + j] += a * M[i * R + j];
                        want[2 * R + j] = fmax(want[2 * R + j], fabs(a));
                    }
                amp_error err = {0};
                int up = amp_gpu_solve_stats_host(0, M, f32, P, rows, R, A, A32, stats, &err) ==
                         AMP_OK;
                if (!up)
                    diag("%s", amp_error_message(&err));
                double e = up ? rel_diff(A, ref, rows * R) : NAN;
                uint64_t off32 = 0;   /* f32: A's shadow is A rounded, entry by entry */
                for (uint64_t k = 0; up && f32 && k < rows * R; k++)
                    off32 += A32[k] != (float)A[k];
                ok(up && e <= 1e-12 && off32 == 0, "fused solve, rank %u, %" PRIu64 " rows, M "
                   "%s: A (%.2e)%s", R, rows, f32 ? "f32" : "f64", e,
                   f32 ? ", its f32 copy" : "");
                if (off32)
                    diag("%" PRIu64 " f32 entries are not A rounded", off32);
                double es = 0;
                for (int part = 0; part < 3 && up; part++) {
                    double d = rel_diff(stats + part * R, want + part * R, R);
                    es = d > es || isnan(d) ? d : es;
                }
                ok(up && es <= 1e-12, "fused solve, rank %u, %" PRIu64 " rows, M %s: column "
                   "sums of squares, of a .* m, max |a| (%.2e)", R, rows, f32 ? "f32" : "f64",
                   up ? es : NAN);
                free(M);
                free(P);
                free(A);
                free(A32);
                free(ref);
            }
    double one = 1, a, st[3];
    amp_error err = {0};
    double big[33 * 33] = {0};
    ok(amp_gpu_solve_stats_host(0, &one, 0, big, 1, 33, &a, NULL, st, &err) == AMP_ERR_USAGE,
       "fused solve refuses rank 33");
}

/* The constrained methods' row updates (constrained.cu) against the
 * CPU's amp_cpu_update_rows (run/cpu/update.c, the f64 reference) on the
 * same inputs: every method (AO-ADMM, MU, HALS), constraints none and
 * non-negative (MU: non-negative only), without and with l1 and l2,
 * AO-ADMM with 1 and 5 inner iterations and with 50 and a row tolerance
 * (rows stop on their own); ranks 1, 7, 16, 32 (the fused kernel, and
 * the generic one forced, on the same inputs), 33, 200 and 512 (the
 * generic kernel: 1, 2 and 4 columns a thread); 1, 37 and 5003 rows
 * (1001 above rank 32, 301 at rank 512: the CPU's reference takes
 * seconds there). V is the Hadamard product of the Grams of random
 * 3R x R and 2R x R matrices (of their absolute values for MU), as
 * test_constrained.c builds it; M random at V's scale (trace(V) / R),
 * l1 0.1 and l2 0.5 times it, A and U random (A positive for MU). The
 * GPU forms AO-ADMM's rho (the same bits as the CPU's) and P on the
 * device. Tolerance 1e-10 normwise on A, U and P (the same f64
 * arithmetic, the sums in another order; V + rho I has a condition
 * number below R + 1; a host emulation of the kernels' order of sums
 * differed from the CPU by 5e-15 at most on these inputs); U against
 * the larger of U's and A's scales. From 37 rows on, the GPU reads A and U
 * at column scales (the warm start's lambda) and the CPU gets them scaled
 * first. The device rows sit between guard rows the
 * kernel must not touch (amp_gpu_update_rows_host checks). Then: a
 * second run gives the same bits (fused, rank 32, and generic, rank 200,
 * per method), and rank 513 and ALS are refused. */
#define UPDATE_CASES 12
#define UPDATE_RANKS 7
#define UPDATE_CHECKS (UPDATE_CASES * UPDATE_RANKS + 3 + 2)

typedef struct update_case {
    amp_method method;
    amp_constraint constraint;
    double l1, l2;   /* times trace(V) / R */
    unsigned inner;
    double tol;
} update_case;

static const update_case update_cases[UPDATE_CASES] = {
    {AMP_METHOD_ADMM, AMP_CONSTRAINT_NONE, 0, 0, 1, 0},
    {AMP_METHOD_ADMM, AMP_CONSTRAINT_NONE, 0.1, 0.5, 5, 0},
    {AMP_METHOD_ADMM, AMP_CONSTRAINT_NONNEG, 0, 0, 5, 0},
    {AMP_METHOD_ADMM, AMP_CONSTRAINT_NONNEG, 0.1, 0.5, 5, 0},
    {AMP_METHOD_ADMM, AMP_CONSTRAINT_NONE, 0.1, 0.5, 50, 1e-3},
    {AMP_METHOD_ADMM, AMP_CONSTRAINT_NONNEG, 0, 0, 50, 1e-3},
    {AMP_METHOD_MU, AMP_CONSTRAINT_NONNEG, 0, 0, 0, 0},
    {AMP_METHOD_MU, AMP_CONSTRAINT_NONNEG, 0.1, 0.5, 0, 0},
    {AMP_METHOD_HALS, AMP_CONSTRAINT_NONE, 0, 0, 0, 0},
    {AMP_METHOD_HALS, AMP_CONSTRAINT_NONE, 0.1, 0.5, 0, 0},
    {AMP_METHOD_HALS, AMP_CONSTRAINT_NONNEG, 0, 0, 0, 0},
    {AMP_METHOD_HALS, AMP_CONSTRAINT_NONNEG, 0.1, 0.5, 0, 0},
};

/* The larger of two differences, NaN if either is. */
static double worse(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
}

/* G = B^T B (B n x R), row by row (cp_ref_gram's column walk takes
 * seconds at rank 512). */
static void update_gram(const double *B, uint64_t n, unsigned R, double *G)
{
    memset(G, 0, (size_t)R * R * sizeof *G);
    for (uint64_t i = 0; i < n; i++)
        for (unsigned p = 0; p < R; p++)
            for (unsigned q = 0; q < R; q++)
                G[(size_t)p * R + q] += B[i * R + p] * B[i * R + q];
}

/* V (R x R) as test_constrained.c's random_problem builds it. */
static double *update_v(unsigned R, uint64_t seed, int nonneg)
{
    double *B = random_matrix(3 * R, R, seed), *C = random_matrix(2 * R, R, seed + 1);
    double *G1 = malloc((size_t)R * R * sizeof *G1), *G2 = malloc((size_t)R * R * sizeof *G2);
    for (uint64_t k = 0; nonneg && k < 3 * (uint64_t)R * R; k++)
        B[k] = fabs(B[k]);
    for (uint64_t k = 0; nonneg && k < 2 * (uint64_t)R * R; k++)
        C[k] = fabs(C[k]);
    update_gram(B, 3 * R, R, G1);
    update_gram(C, 2 * R, R, G2);
    for (size_t k = 0; k < (size_t)R * R; k++)
        G1[k] *= G2[k];
    free(B);
    free(C);
    free(G2);
    return G1;
}

/* The inputs of one comparison: M, A and U (rows x R). */
static void update_inputs(const update_case *k, unsigned R, uint64_t rows, double scale,
                          uint64_t seed, double **M, double **A, double **U)
{
    *M = random_matrix(rows, R, seed);
    *A = random_matrix(rows, R, seed + 1);
    *U = random_matrix(rows, R, seed + 2);
    for (uint64_t i = 0; i < rows * R; i++) {
        (*M)[i] *= scale;
        (*U)[i] *= 0.1;
        if (k->method == AMP_METHOD_MU)
            (*A)[i] = fabs((*A)[i]) + 0.01;
    }
}

static amp_gpu_update_opts update_opts(const update_case *k, unsigned R, double scale,
                                       int generic)
{
    amp_gpu_update_opts o;
    memset(&o, 0, sizeof o);
    o.method = k->method;
    o.rule.constraint = k->constraint;
    o.rule.l1 = k->l1 * scale;
    o.rule.l2 = k->l2 * scale;
    o.rank = R;
    o.inner = k->inner;
    o.admm_tol = k->tol;
    o.generic = generic;
    return o;
}

/* Column j's scale when a test reads A and U at scales (the warm start's
 * lambda): 0.5 to 2, none equal to 1. */
static double update_col_scale(unsigned j)
{
    return 0.5 + (j % 5) * 0.375;
}

/* Case k at rank R on `rows` rows, the GPU kernel (generic: forced) and
 * the CPU's reference from the same inputs (scaled: the GPU reads A and
 * U at update_col_scale, the CPU gets them scaled first): the worst normwise
 * difference of A and U, and of P in *p_diff (AO-ADMM; rho must be the
 * CPU's to the bit, else *p_diff is NaN); NaN where a side fails. */
static double update_diff(const update_case *k, unsigned R, const double *V, double scale,
                          uint64_t rows, int generic, int scaled, uint64_t seed, double *p_diff)
{
    const int admm = k->method == AMP_METHOD_ADMM;
    const size_t n = (size_t)rows * R;
    double *M, *A, *U;
    update_inputs(k, R, rows, scale, seed, &M, &A, &U);
    double *A2 = malloc(n * sizeof *A2 + 8), *U2 = malloc(n * sizeof *U2 + 8);
    memcpy(A2, A, n * sizeof *A2);
    memcpy(U2, U, n * sizeof *U2);
    double *P = malloc((size_t)R * R * sizeof *P), *P2 = malloc((size_t)R * R * sizeof *P2);
    double rho2 = 0, e = NAN;
    amp_gpu_update_opts o = update_opts(k, R, scale, generic);
    double *cs = malloc(R * sizeof *cs);
    for (unsigned j = 0; j < R; j++)
        cs[j] = update_col_scale(j);
    if (scaled) {
        o.scale = cs;
        for (size_t i = 0; i < n; i++) {
            A[i] *= cs[i % R];
            U[i] *= cs[i % R];
        }
    }
    amp_update_args ua = {.method = k->method, .rule = o.rule, .rank = R, .inner = k->inner,
                          .admm_tol = k->tol, .V = V};
    amp_error err = {0};
    double *scratch = NULL;
    *p_diff = 0;
    if (admm && amp_cpu_admm_prepare(&ua, P, &err) != AMP_OK) {
        diag("CPU: %s", amp_error_message(&err));
        goto done;
    }
    scratch = malloc(amp_cpu_update_scratch(&ua, rows) + 8);
    amp_cpu_update_rows(&ua, M, A, admm ? U : NULL, rows, scratch);
    if (amp_gpu_update_rows_host(0, &o, V, M, A2, admm ? U2 : NULL, rows, &rho2, P2, &err) !=
        AMP_OK) {
        diag("GPU: %s", amp_error_message(&err));
        goto done;
    }
    e = rel_diff(A2, A, n);
    if (admm) {
        /* U against the larger of U's and A's scales: with no constraint
         * and no penalty U = U + (At - U) - At is rounding noise. */
        double du = 0, scale_u = 0;
        for (size_t i = 0; i < n; i++) {
            /* A NaN on either side counts (the CPU's too: it would drop
             * out of fabs(U2 - U) > du and of scale_u's fmax). */
            du = isnan(U2[i] - U[i]) || fabs(U2[i] - U[i]) > du ? fabs(U2[i] - U[i]) : du;
            scale_u = fmax(scale_u, fmax(fabs(U[i]), fabs(A[i])));
        }
        e = worse(e, scale_u > 0 ? du / scale_u : du);
        *p_diff = rho2 == ua.rho ? rel_diff(P2, P, (uint64_t)R * R) : NAN;
        if (rho2 != ua.rho)
            diag("rho: GPU %.17g, CPU %.17g", rho2, ua.rho);
    }
done:
    free(M);
    free(A);
    free(U);
    free(A2);
    free(U2);
    free(P);
    free(P2);
    free(scratch);
    free(cs);
    return e;
}

/* The GPU twice on the same inputs: whether A and U came back the same,
 * bit for bit. */
static int update_repeats(const update_case *k, unsigned R, const double *V, double scale,
                          uint64_t rows, uint64_t seed)
{
    const int admm = k->method == AMP_METHOD_ADMM;
    const size_t n = (size_t)rows * R;
    double *M, *A, *U;
    update_inputs(k, R, rows, scale, seed, &M, &A, &U);
    double *A2 = malloc(n * sizeof *A2 + 8), *U2 = malloc(n * sizeof *U2 + 8);
    memcpy(A2, A, n * sizeof *A2);
    memcpy(U2, U, n * sizeof *U2);
    amp_gpu_update_opts o = update_opts(k, R, scale, 0);
    amp_error err = {0};
    int same = amp_gpu_update_rows_host(0, &o, V, M, A, admm ? U : NULL, rows, NULL, NULL,
                                        &err) == AMP_OK &&
               amp_gpu_update_rows_host(0, &o, V, M, A2, admm ? U2 : NULL, rows, NULL, NULL,
                                        &err) == AMP_OK;
    if (!same)
        diag("%s", amp_error_message(&err));
    same = same && memcmp(A, A2, n * sizeof *A) == 0 && memcmp(U, U2, n * sizeof *U) == 0;
    free(M);
    free(A);
    free(U);
    free(A2);
    free(U2);
    return same;
}

static void test_update_rows(void)
{
    static const unsigned ranks[UPDATE_RANKS] = {1, 7, 16, 32, 33, 200, 512};
    double *Vs[UPDATE_RANKS][2], scales[UPDATE_RANKS][2];
    for (int ri = 0; ri < UPDATE_RANKS; ri++)
        for (int nn = 0; nn < 2; nn++) {
            const unsigned R = ranks[ri];
            Vs[ri][nn] = update_v(R, 1000 + 10 * R + nn, nn);
            double tr = 0;
            for (unsigned r = 0; r < R; r++)
                tr += Vs[ri][nn][r * R + r];
            scales[ri][nn] = tr / R;
        }
    for (int ci = 0; ci < UPDATE_CASES; ci++) {
        const update_case *k = &update_cases[ci];
        const int nn = k->method == AMP_METHOD_MU;   /* MU: a non-negative V */
        char what[160];
        if (k->l1 > 0 || k->l2 > 0)
            snprintf(what, sizeof what, "%s, %s, l1 %g, l2 %g (of trace(V)/R)",
                     amp_method_name(k->method), amp_constraint_name(k->constraint), k->l1,
                     k->l2);
        else
            snprintf(what, sizeof what, "%s, %s, no penalty", amp_method_name(k->method),
                     amp_constraint_name(k->constraint));
        if (k->method == AMP_METHOD_ADMM)
            snprintf(what + strlen(what), sizeof what - strlen(what), ", inner %u%s", k->inner,
                     k->tol > 0 ? ", tol 1e-3" : "");
        for (int ri = 0; ri < UPDATE_RANKS; ri++) {
            const unsigned R = ranks[ri];
            const uint64_t row_counts[3] = {1, 37, R <= 32 ? 5003 : R <= 200 ? 1001 : 301};
            double e = 0, pe = 0;
            for (int ni = 0; ni < 3; ni++)
                for (int generic = 0; generic < 1 + (R <= 32); generic++) {
                    double p = 0;
                    double d = update_diff(k, R, Vs[ri][nn], scales[ri][nn], row_counts[ni],
                                           generic, ni > 0, 7 * ci + 1000 * R + row_counts[ni],
                                           &p);
                    if (!(d <= 1e-10) || !(p <= 1e-10))
                        diag("%s, rank %u, %" PRIu64 " rows, %s kernel: A, U %.2e, P %.2e",
                             what, R, row_counts[ni], generic || R > 32 ? "generic" : "fused",
                             d, p);
                    e = worse(e, d);
                    pe = worse(pe, p);
                }
            if (k->method == AMP_METHOD_ADMM)
                ok(e <= 1e-10 && pe <= 1e-10, "GPU update %s, rank %u, 1/37/%" PRIu64 " rows "
                   "(37 and up at column scales)%s: as the CPU's (A, U %.2e; rho the same, "
                   "P %.2e)", what, R, row_counts[2], R <= 32 ? ", fused and generic kernels" : "", e, pe);
            else
                ok(e <= 1e-10, "GPU update %s, rank %u, 1/37/%" PRIu64 " rows (37 and up "
                   "at column scales)%s: as the CPU's (A %.2e)", what, R, row_counts[2],
                   R <= 32 ? ", fused and generic kernels" : "", e);
        }
    }
    /* ao-admm with the row tolerance, mu and hals with penalties. */
    static const int again[3] = {5, 7, 11};
    for (int i = 0; i < 3; i++) {
        const update_case *k = &update_cases[again[i]];
        const int nn = k->method == AMP_METHOD_MU;
        int same = update_repeats(k, 32, Vs[3][nn], scales[3][nn], 5003, 77 + i) &&
                   update_repeats(k, 200, Vs[5][nn], scales[5][nn], 1001, 88 + i);
        ok(same, "GPU update %s: a second run gives the same bits (rank 32, 5003 rows; rank "
           "200, 1001 rows)", amp_method_name(k->method));
    }
    for (int ri = 0; ri < UPDATE_RANKS; ri++) {
        free(Vs[ri][0]);
        free(Vs[ri][1]);
    }
    double one = 1, a = 1, u = 0;
    amp_error err = {0};
    amp_gpu_update_opts o = update_opts(&update_cases[8], 513, 1, 0);
    ok(amp_gpu_update_rows_host(0, &o, &one, &one, &a, NULL, 1, NULL, NULL, &err) ==
       AMP_ERR_USAGE, "GPU update refuses rank 513");
    o = update_opts(&update_cases[8], 1, 1, 0);
    o.method = AMP_METHOD_ALS;
    ok(amp_gpu_update_rows_host(0, &o, &one, &one, &a, &u, 1, NULL, NULL, &err) ==
       AMP_ERR_USAGE, "GPU update refuses ALS (no update of its own)");
}

/* Values of 1e12 on 8 modes: the first iteration's factors are stored at
 * lambda's scale (about 1e12 a mode) until they are rescaled, so an f32
 * MTTKRP that read them as they are would overflow (1e12 x 1e84). Every
 * fit must be finite and the CPU's; and 5 f32 iterations, which reach the
 * rescale taken where a column's scale moves far (from the second
 * iteration, where lambda turns from the 2-norm to the max-norm), must
 * leave every factor column finite and nonzero. */
static void test_large_values(void)
{
    static const shape s = {"8 modes, values near 1e12", 8, {30, 28, 26, 24, 22, 20, 18, 16},
                            4000, 0};
    amp_coo x;
    amp_tensor t;
    random_tensor(&s, 13, &x);
    for (uint64_t k = 0; k < x.nnz; k++)
        x.val[k] = 1e12 * (1 + x.val[k]);
    if (!prepare(&x, "large.amp", 4, 1 << 20, &t)) {
        ok(0, "%s: prepares", s.name);
        skip(ALS_CHECKS, "no file");
        amp_coo_free(&x);
        return;
    }
    check_gpu_als(s.name, &t, 7, 0);
    amp_gpu_tensor *g = NULL;
    amp_error err = {0};
    amp_cpd c;
    memset(&c, 0, sizeof c);
    amp_cpd_opts o;
    amp_cpd_opts_init(&o);
    o.rank = 7;
    o.max_iters = 5;
    o.tol = 0;
    o.precision = AMP_PRECISION_F32;
    int up = amp_gpu_tensor_upload(0, &t, 0, &g, &err) == AMP_OK &&
             amp_cpd_init_random(&t, 7, 5, &c, &err) == AMP_OK &&
             amp_gpu_cpd_als(g, &t, &o, &c, &err) == AMP_OK;
    if (!up)
        diag("%s", amp_error_message(&err));
    uint64_t bad = 0;
    for (unsigned m = 0; up && m < t.nmodes; m++)
        for (unsigned r = 0; r < 7; r++) {
            int live = 0;
            for (uint64_t i = 0; i < t.rows[m]; i++) {
                double a = c.A[m][i * 7 + r];
                live |= a != 0;
                bad += !isfinite(a);
            }
            bad += !live;
        }
    ok(up && isfinite(c.fit) && bad == 0, "%s: 5 f32 iterations on the GPU: fit %.8f, every "
       "factor column finite and nonzero (%" PRIu64 " bad)", s.name, c.fit, bad);
    amp_cpd_free(&c);
    amp_gpu_tensor_free(g);
    amp_tensor_free(&t);
    amp_coo_free(&x);
}

/* A rank above a mode's dimension on a 2-mode tensor: the other mode's
 * Gram matrix is singular, so both backends take the pseudo-inverse, and
 * must still reach the same fit. */
static void test_rank_deficient(void)
{
    static const shape s = {"thin, rank 6 over a mode of 3", 2, {40, 3}, 100, 0};
    amp_coo x;
    amp_tensor t;
    random_tensor(&s, 11, &x);
    if (!prepare(&x, "thin.amp", 4, 1 << 20, &t)) {
        ok(0, "%s: prepares", s.name);
        skip(ALS_CHECKS, "no file");
        amp_coo_free(&x);
        return;
    }
    ok(check_gpu_als_as(s.name, &t, 6, 0, 0), "%s: the GPU took the pseudo-inverse", s.name);
    amp_tensor_free(&t);
    amp_coo_free(&x);
}

static void one_real(const char *path, const char *name, void *ctx)
{
    (void)ctx;
    amp_coo x;
    amp_tensor t;
    amp_file *f = NULL;
    if (!read_prepared(path, "real.amp", &x, &t, &f)) {
        ok(0, "%s: reads and prepares", name);
        skip(1 + 2 * NRANKS + CUT_CHECKS + 2 * ALS_CHECKS + STREAM_CHECKS +
                 2 * FROM_FILE_CHECKS + REF_CHECKS + METHOD_CHECKS, "does not read or prepare");
        return;
    }
    check_gpu_mttkrp_as(name, &t, all_ranks, NRANKS, 0, 1);
    check_cuts(name, &t);
    check_from_file(name, &t, f, 0);
    check_from_file(name, &t, f, 1);
    amp_file_close(f);
    check_gpu_als(name, &t, 7, 0);
    check_gpu_als(name, &t, 32, 0);
    check_gpu_mttkrp(name, &t, stream_ranks, STREAM_RANKS, STREAM_CHUNK * 8);
    check_gpu_als(name, &t, 7, STREAM_CHUNK * 8);
    check_gpu_ref(name, &x, &t, STREAM_CHUNK * 8);
    check_gpu_methods(name, &t, STREAM_CHUNK * 8);
    amp_tensor_free(&t);
    amp_coo_free(&x);
}
#endif

int main(void)
{
#ifndef AMP_HAVE_CUDA
    plan_skip_all("built without CUDA");
#else
    amp_cuda_device dev[16];
    int count = 0;
    amp_error err = {0};
    amp_status rc = amp_cuda_list_devices(dev, 16, &count, &err);
    if (rc == AMP_ERR_NO_DEVICE)
        plan_skip_all("no CUDA device");
    plan(2 + 2 * (count < 16 ? count : 16) + 3 + SOLVE_CHECKS + UPDATE_CHECKS + FULL_CHECKS +
         NSHAPES * (2 + 2 * NRANKS + CUT_CHECKS + 2 * ALS_CHECKS + STREAM_CHECKS +
                    2 * FROM_FILE_CHECKS + GROUP_CHECKS + GAP_CHECKS + REF_CHECKS +
                    METHOD_CHECKS) +
         2 * ALS_CHECKS + 1 + 1 +
         for_each_shared_tensor(NULL, NULL) * (2 + 2 * NRANKS + CUT_CHECKS + 2 * ALS_CHECKS +
                                               STREAM_CHECKS + 2 * FROM_FILE_CHECKS +
                                               REF_CHECKS + METHOD_CHECKS));
    is_int(rc, AMP_OK, "device query succeeds");
    ok(count > 0, "%d device%s found", count, count == 1 ? "" : "s");
    for (int i = 0; i < count && i < 16; i++) {
        ok(dev[i].sm_count > 0 && dev[i].total_memory > 0 && dev[i].free_memory <= dev[i].total_memory,
           "GPU %d (%s): %d SMs, sane memory figures", i, dev[i].name, dev[i].sm_count);
        amp_error e = {0};
        rc = amp_cuda_selftest(i, &e);
        if (!ok(rc == AMP_OK, "GPU %d runs this build's kernel image", i))
            diag("%s", e.msg);
    }
    /* Staged uploads: below the staging size, one piece and a bit, and
     * several rounds of every worker ending in a partial piece. */
    static const size_t upload_sizes[] = {(4 << 20) - 1, (4 << 20) + 4099,
                                          (200 << 20) + 12345};
    for (int i = 0; i < 3; i++) {
        amp_error e = {0};
        if (!ok(amp_gpu_upload_check(0, upload_sizes[i], &e) == AMP_OK,
                "%zu bytes through the staged upload arrive intact", upload_sizes[i]))
            diag("%s", amp_error_message(&e));
    }
    test_solve_stats();
    test_resident_full();
    test_update_rows();
    test_random();
    test_large_values();
    test_rank_deficient();
    for_each_shared_tensor(one_real, NULL);
    return done_testing();
#endif
}
