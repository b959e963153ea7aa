/* Two copies remapped on one GPU (run/cuda/remap.cu, issue 30), against
 * the copies the file holds, the f64 reference MTTKRP and the run with
 * every copy resident; skipped without CUDA or a device.
 *
 * On random 3- to 6-mode tensors (keyed 5- and 6-mode ones, the 6-mode
 * one in f64 and f32 values) and $AMP_TEST_DATA, each written with and without REMAP
 * sections, per file:
 *   - copy 0 uploaded with every mode's positions; after the load's own
 *     round of remaps (check_resident), copy 0 as the device holds it
 *     equals the file's, word for word and value bit for value bit;
 *   - the remap of mode d for d = 0 .. N-1 in turn: each copy it makes
 *     equals the file's copy of mode d + 1 the same way;
 *   - the positions came from the REMAP sections, or were computed;
 *   - the MTTKRP of every mode over the remapped copies (each call
 *     remapping as far as it needs: modes in order, then backwards)
 *     against the reference: f64 within 1e-12, f32 within 1e-4 (the
 *     kernels' own tolerances, test_gpu);
 *   - CP-ALS (f64, rank 5, tol 1e-6, at most 25 iterations), AO-ADMM
 *     (f64, 6 iterations) and CP-ALS at rank 8, with the MTTKRP writing
 *     the next copy itself (fused) and with the remap kernel, each on a
 *     fresh upload, from the same start as three runs with every copy
 *     resident: every fit within 1e-12 of the nearest of them, or within
 *     20 times their spread among themselves where that is wider (at
 *     most 1e-9), the same iterations (the copies are the same bits and
 *     the kernels the same; only the order of the atomic adds between
 *     warps differs, as between two resident runs, and an ill-conditioned
 *     run can grow that past 1e-12: bench/RESULTS.md, issue 30),
 *     and N copies made an iteration (none with 2 modes, whose two
 *     buffers hold both), all of them fused where the fused kernel
 *     applies (f64 values, 3 to 5 modes, rank 8), else by the kernel.
 * Then amp_gpu_run_open: --memory remap held as planned (the tensor's
 * device bytes equal to the plan's), the positions' phase announced and
 * the upload reported to its end, the fits of every copy resident;
 * --memory auto choosing two copies remapped where --device-memory holds
 * them but not every copy and the file holds the positions, streaming
 * where it does not (the plan saying it skipped the remap for want of
 * them) or where the memory holds neither; and a remapped upload that
 * finds the GPU's memory taken streaming instead under auto, saying so. */
#include <config.h>

#include <inttypes.h>

#include "tap.h"
#include "cpd_util.h"
#ifdef AMP_HAVE_CUDA
#include "amp_cuda.h"
#endif

#ifdef AMP_HAVE_CUDA
#define FILE_CHECKS 9

/* Every mode's positions in 32 bits (freed by the caller); *from_file:
 * the modes read from REMAP sections. */
static int positions32(const amp_file *f, const amp_tensor *t, uint32_t **pos,
                       unsigned *from_file)
{
    amp_error err = {0};
    uint64_t *wide = malloc((t->nnz + 1) * 8);
    int good = wide != NULL;
    *from_file = 0;
    for (unsigned d = 0; d < t->nmodes && good; d++) {
        int ff = 0;
        pos[d] = malloc((t->nnz + 1) * 4);
        good = pos[d] && amp_remap_positions(f, t, d, 0, wide, &ff, &err) == AMP_OK;
        for (uint64_t k = 0; good && k < t->nnz; k++)
            pos[d][k] = (uint32_t)wide[k];
        *from_file += (unsigned)ff;
    }
    if (!good)
        diag("positions: %s", amp_error_message(&err));
    free(wide);
    return good;
}

/* Copy d as g holds it now equals t's, word for word and value bit for
 * value bit. */
static int same_copy(const amp_gpu_tensor *g, const amp_tensor *t, unsigned d)
{
    amp_error err = {0};
    const size_t vsize = amp_value_size(t->value_type);
    uint64_t *w = malloc((t->nnz + 1) * 8);
    void *v = malloc((t->nnz + 1) * vsize);
    int same = w && v && amp_gpu_copy_download(g, d, w, v, &err) == AMP_OK &&
               memcmp(w, t->copies[d].words, t->nnz * 8) == 0 &&
               memcmp(v, t->copies[d].vals, t->nnz * vsize) == 0;
    if (!same && err.status != AMP_OK)
        diag("mode %u's copy: %s", d + 1, amp_error_message(&err));
    free(w);
    free(v);
    return same;
}

/* The MTTKRP of every mode, f64 then f32 (the f32 pass backwards, so that
 * a call remaps several modes ahead), against the reference. */
static void check_mttkrp(const char *name, const amp_tensor *t, const amp_gpu_tensor *g)
{
    const unsigned R = 16;
    amp_error err = {0};
    uint64_t maxr = 1;
    for (unsigned m = 0; m < t->nmodes; m++)
        maxr = t->rows[m] > maxr ? t->rows[m] : maxr;
    double *A[AMP_MAX_MODES];
    for (unsigned m = 0; m < t->nmodes; m++)
        A[m] = random_matrix(t->rows[m], R, 17 + m);
    double *ref = malloc(maxr * R * sizeof *ref), *M = malloc(maxr * R * sizeof *M);
    for (int f32 = 0; f32 < 2; f32++) {
        double worst = 0;
        int fails = 0;
        for (unsigned i = 0; i < t->nmodes; i++) {
            const unsigned d = f32 ? t->nmodes - 1 - i : i;
            if (amp_mttkrp_reference(t, d, d, (const double *const *)A, R, ref, &err) !=
                    AMP_OK ||
                amp_gpu_mttkrp_host(g, (const double *const *)A, R, f32, d, M, 0, NULL, &err) !=
                    AMP_OK) {
                diag("%s", amp_error_message(&err));
                fails++;
                continue;
            }
            double e = rel_diff(M, ref, t->rows[d] * R);
            worst = e > worst || isnan(e) ? e : worst;
        }
        ok(!fails && worst <= (f32 ? 1e-4 : 1e-12), "%s: MTTKRP of every mode over the "
           "remapped copies, %s, modes %s (%.2e)", name, f32 ? "f32" : "f64",
           f32 ? "backwards" : "in order", worst);
    }
    for (unsigned m = 0; m < t->nmodes; m++)
        free(A[m]);
    free(ref);
    free(M);
}

/* o from seed 3 on t remapped afresh (positions pos; fuse: the MTTKRPs
 * may write the next copy themselves) and on the resident h: every fit
 * within 1e-12 (or 20 times the resident run's spread against itself,
 * where that is wider), the same iterations, and N copies made an iteration
 * (after the load, copy 0 is the copy made last, so the first iteration
 * makes all N too), fused or by the remap kernel (timed) as expected. */
static void check_same_run(const char *name, const char *what, const amp_tensor *t,
                           uint32_t *const *pos, const amp_gpu_tensor *h, amp_cpd_opts o,
                           int fuse)
{
    amp_error err = {0};
    amp_gpu_tensor *g = NULL;
    amp_cpd c[4];
    fit_log log[4];
    double sec = 0;
    unsigned remaps = 0;
    int fails = amp_gpu_tensor_upload_remap(0, t, (const uint32_t *const *)pos, NULL, &g,
                                            &err) != AMP_OK;
    if (!fails)
        amp_gpu_remap_set_fuse(g, fuse);
    memset(c, 0, sizeof c);
    memset(log, 0, sizeof log);
    /* Remapped, then resident three times: the resident run's own spread
     * (its MTTKRP's atomics add in no fixed order, and an ill-conditioned
     * run can grow that; bench/RESULTS.md, issue 30). */
    for (int k = 0; k < 4 && !fails; k++) {
        o.on_iter = fit_log_add;
        o.ctx = &log[k];
        fails += amp_cpd_init_random(t, o.rank, 3, &c[k], &err) != AMP_OK ||
                 amp_gpu_cpd_als(k ? h : g, t, &o, &c[k], &err) != AMP_OK;
    }
    fails += !fails && amp_gpu_remap_seconds(g, &sec, &remaps, &err) != AMP_OK;
    if (fails)
        diag("%s", amp_error_message(&err));
    /* Fused wherever the team kernel has a fused variant: f64 values (in
     * records), 3 to 5 modes, a rank it takes (even, f64 factors); else,
     * or with fuse off, every copy by the remap kernel. Two modes: both
     * copies stay in the two buffers, and none is made. */
    const unsigned all = fails || t->nmodes < 3 ? 0 : c[0].iters * t->nmodes;
    const unsigned fused = fails ? 0 : amp_gpu_remap_fused(g);
    const int can = fuse && t->value_type == AMP_VALUES_F64 && o.rank % 2 == 0 &&
                    o.rank <= 128 && t->nmodes >= 3 && t->nmodes <= 5;
    /* The nearest resident run of the same length, and the residents'
     * spread among themselves (runs of different lengths: as wide as it
     * may be). */
    double gap = NAN, self = 0;
    int near = 0;
    for (int a = 1; a < 4 && !fails; a++) {
        double e = log[a].n == log[0].n ? fits_gap(&log[0], &log[a], log[0].n) : NAN;
        if (!isnan(e) && (isnan(gap) || e < gap))
            gap = e, near = a;
        for (int b = a + 1; b < 4; b++) {
            double p = log[a].n == log[b].n ? fits_gap(&log[a], &log[b], log[a].n) : 1;
            self = p > self || isnan(p) ? p : self;
        }
    }
    /* 1e-12 where the resident run repeats to that; else within 20 times
     * its own spread, and never beyond 1e-9 (a wrong copy is far off). */
    double bound = 20 * self;
    bound = bound < 1e-12 ? 1e-12 : bound > 1e-9 ? 1e-9 : bound;
    ok(!fails && near > 0 && c[0].iters == c[near].iters && log[0].n == c[0].iters &&
           gap <= bound &&
           fused == (can ? all : 0) && remaps == all - fused && (remaps == 0 || sec > 0),
       "%s: %s remapped against every copy resident: %u and %u iterations, fits within %.1e "
       "(at most %.0e: resident against itself %.1e; last %.12f), %u copies written by the "
       "MTTKRPs (%s), %u remaps in %.2e s of GPU time", name, what, c[0].iters,
       c[near].iters, gap, bound, self, c[0].fit, fused,
       can ? "all expected" : "none expected", remaps, sec);
    for (int k = 0; k < 4; k++)
        amp_cpd_free(&c[k]);
    amp_gpu_tensor_free(g);
}

/* One file: FILE_CHECKS tests. */
static void check_file(const char *name, const amp_file *f, const amp_tensor *t,
                       int with_streams)
{
    amp_error err = {0};
    uint32_t *pos[AMP_MAX_MODES] = {0};
    unsigned from_file = 0;
    amp_gpu_tensor *g = NULL, *h = NULL;
    int up = positions32(f, t, pos, &from_file) &&
             amp_gpu_tensor_upload_remap(0, t, (const uint32_t *const *)pos, NULL, &g, &err) ==
                 AMP_OK;
    if (!ok(up && amp_gpu_tensor_remapped(g) && same_copy(g, t, 0), "%s: uploaded as two "
            "copies; after the load's remaps copy 0 equals the file's", name)) {
        diag("%s", amp_error_message(&err));
        skip(FILE_CHECKS - 1, "no remapped tensor");
        amp_gpu_tensor_free(g);
        for (unsigned d = 0; d < t->nmodes; d++)
            free(pos[d]);
        return;
    }
    unsigned equal = 0;
    for (unsigned d = 0; d < t->nmodes; d++) {
        const unsigned next = (d + 1) % t->nmodes;
        if (amp_gpu_remap_next(g, d, NULL, &err) != AMP_OK) {
            diag("mode %u: %s", d + 1, amp_error_message(&err));
            break;
        }
        if (!same_copy(g, t, next)) {
            diag("mode %u remapped into mode %u's copy differs from the file's", d + 1,
                 next + 1);
            break;
        }
        equal++;
    }
    ok(equal == t->nmodes, "%s: the remap of mode d makes the file's copy of d + 1, word for "
       "word and value bit for value bit, for %u of %u modes", name, equal, t->nmodes);
    ok(from_file == (with_streams ? t->nmodes : 0), "%s: %u modes' positions from REMAP "
       "sections", name, from_file);
    check_mttkrp(name, t, g);
    amp_cpd_opts o;
    amp_cpd_opts_init(&o);
    o.rank = 5;
    o.max_iters = 25;
    o.tol = 1e-6;
    if (amp_gpu_tensor_upload(0, t, 0, &h, &err) != AMP_OK) {
        diag("%s", amp_error_message(&err));
        ok(0, "%s: CP-ALS: the resident upload", name);
        ok(0, "%s: AO-ADMM: the resident upload", name);
        ok(0, "%s: CP-ALS rank 8: the resident upload", name);
        ok(0, "%s: CP-ALS rank 8, remap kernel: the resident upload", name);
    } else {
        check_same_run(name, "CP-ALS f64", t, pos, h, o, 1);
        check_same_run(name, "AO-ADMM f64", t, pos, h,
                       constrained_opts(AMP_METHOD_ADMM, t->nmodes, 5, 6, 0), 1);
        /* Rank 8: the fused MTTKRP where the values are f64, and the remap
         * kernel instead when asked. */
        o.rank = 8;
        check_same_run(name, "CP-ALS f64 rank 8", t, pos, h, o, 1);
        check_same_run(name, "CP-ALS f64 rank 8, remap kernel", t, pos, h, o, 0);
    }
    amp_gpu_tensor_free(h);
    amp_gpu_tensor_free(g);
    for (unsigned d = 0; d < t->nmodes; d++)
        free(pos[d]);
}

static void real_one(const char *path, const char *name, void *ctx)
{
    amp_coo x;
    (void)ctx;
    if (!read_unique(path, name, &x, 2 * FILE_CHECKS - 1))
        return;
    each_remap_file(&x, name, 16, 4096, 0, FILE_CHECKS, check_file);
    amp_coo_free(&x);
}

/* ---- through amp_gpu_run_open ------------------------------------------ */

/* A run of t (from f) on GPU 0 held as memory asks, within cap bytes (0:
 * what is free); *in its GPU's description. */
static amp_gpu_run *open_run(const amp_tensor *t, const amp_file *f, int memory, uint64_t cap,
                             int fail, open_log *log, amp_gpu_info *in, amp_error *err)
{
    amp_cpd_opts cpd;
    amp_cpd_opts_init(&cpd);
    cpd.rank = 8;
    amp_gpu_opts o;
    memset(&o, 0, sizeof o);
    o.path = "run_remap.amp";
    o.gpus = 1;
    o.memory = memory;
    o.device_memory = cap;
    o.file = f;
    o.fail_resident = fail;
    o.phase = open_log_phase;
    o.progress = open_log_progress;
    o.progress_ctx = log;
    amp_gpu_run *run = NULL;
    memset(in, 0, sizeof *in);
    if (amp_gpu_run_open(&o, &cpd, t, &run, err) == AMP_OK && run)
        amp_gpu_run_info(run, 0, in);
    return run;
}

/* CP-ALS of 12 iterations from seed 5 on run: its fit log. */
static int run_als(const amp_tensor *t, amp_gpu_run *run, fit_log *log, amp_error *err)
{
    amp_cpd_opts o;
    amp_cpd_opts_init(&o);
    o.rank = 8;
    o.max_iters = 12;
    o.tol = 0;
    o.on_iter = fit_log_add;
    o.ctx = log;
    amp_gpu_als_opts go = {0};
    amp_cpd c = {0};
    int good = run && amp_cpd_init_random(t, o.rank, 5, &c, err) == AMP_OK &&
               amp_gpu_run_als(run, t, &o, &go, &c, err) == AMP_OK && log->n == 12;
    amp_cpd_free(&c);
    return good;
}

#define RUN_CHECKS 5
static void check_runs(const char *name, const amp_file *f, const amp_tensor *t,
                       int with_streams)
{
    amp_error err = {0};
    open_log log = {"", 0, 0};
    amp_gpu_info in, res;
    fit_log fits[2];
    memset(fits, 0, sizeof fits);
    amp_gpu_run *run = open_run(t, f, AMP_MEMORY_RESIDENT, 0, 0, &log, &res, &err);
    int base = run_als(t, run, &fits[1], &err);
    amp_gpu_run_close(run);
    memset(&log, 0, sizeof log);
    run = open_run(t, f, AMP_MEMORY_REMAP, 0, 0, &log, &in, &err);
    ok(run && in.memory == AMP_MEMORY_REMAP && in.tensor_bytes == in.tensor_plan_bytes &&
           in.remap_from_file == (with_streams ? t->nmodes : 0) &&
           strcmp(log.phases, "remap positions,uploading") == 0 && log.total > 0 &&
           log.done == log.total && in.sizes.remap > 0 && in.need_bytes == in.sizes.remap,
       "%s: --memory remap: held so, %zu device bytes for the tensor as planned (%zu), %u "
       "modes' positions from the file, phases %s, the upload reported to its end (%" PRIu64
       " of %" PRIu64 " bytes) (%s)", name, in.tensor_bytes, in.tensor_plan_bytes,
       in.remap_from_file, log.phases, log.done, log.total,
       run ? "opened" : amp_error_message(&err));
    int same = base && run_als(t, run, &fits[0], &err);
    if (!same)
        diag("%s", amp_error_message(&err));
    double gap = same ? fits_gap(&fits[0], &fits[1], 12) : NAN;
    ok(same && gap <= 1e-12, "%s: --memory remap: 12 fits within %.1e of every copy "
       "resident's", name, gap);
    amp_gpu_run_close(run);
    /* Between the two sizes, auto takes two copies remapped where the file
     * holds every mode's positions, else streams; below both, it streams. */
    const uint64_t between = (res.sizes.resident + res.sizes.remap) / 2;
    const int want = with_streams ? AMP_MEMORY_REMAP : AMP_MEMORY_STREAM;
    run = open_run(t, f, AMP_MEMORY_AUTO, between, 0, &log, &in, &err);
    ok(run && res.sizes.remap < res.sizes.resident && in.memory == want &&
           in.sizes.remap_in_file == with_streams,
       "%s: --memory auto in %" PRIu64 " bytes (every copy %" PRIu64 ", two remapped %" PRIu64
       "), positions %sin the file: %s", name, between, res.sizes.resident, res.sizes.remap,
       in.sizes.remap_in_file ? "" : "not ", run ? amp_memory_name(in.memory)
                                                  : amp_error_message(&err));
    amp_gpu_run_close(run);
    run = open_run(t, f, AMP_MEMORY_AUTO, res.sizes.remap - 1, 0, &log, &in, &err);
    ok(run && in.memory == AMP_MEMORY_STREAM, "%s: --memory auto a byte short of two copies "
       "remapped: %s", name, run ? amp_memory_name(in.memory) : amp_error_message(&err));
    amp_gpu_run_close(run);
    /* The memory taken between plan and upload: where auto planned two
     * copies remapped it streams instead and says so; where it planned to
     * stream (no positions in the file) there is nothing to fall back from. */
    run = open_run(t, f, AMP_MEMORY_AUTO, between, 1, &log, &in, &err);
    const char *note = run ? amp_gpu_run_note(run, 0) : NULL;
    if (with_streams)
        ok(run && in.memory == AMP_MEMORY_STREAM && note &&
               strstr(note, "ran out of memory taking the tensor as two remapped copies") &&
               strstr(note, "streamed from host memory instead"),
           "%s: remapped, the GPU's memory taken (fail_resident): streamed instead, saying so "
           "('%s')", name, note ? note : amp_error_message(&err));
    else
        ok(run && in.memory == AMP_MEMORY_STREAM && note == NULL &&
               amp_memory_remap_skipped(in.asked, &in.sizes),
           "%s: streamed, the plan saying it skipped two copies remapped for want of the "
           "positions; no fallback note ('%s')", name,
           note ? note : run ? "none" : amp_error_message(&err));
    amp_gpu_run_close(run);
}

/* 5 modes in f64: every copy resident (80 bytes a nonzero) is well above
 * two remapped (52), so auto has room to choose. */
static void test_runs(void)
{
    static const shape sh = {"run, 5 modes", 5, {90, 80, 70, 60, 50}, 30000, 1};
    amp_coo x;
    random_tensor(&sh, 41, &x);
    coo_unique(&x, sh.name);
    each_remap_file(&x, sh.name, 6, 1001, 0, RUN_CHECKS, check_runs);
    amp_coo_free(&x);
}
#endif

int main(void)
{
#ifndef AMP_HAVE_CUDA
    plan_skip_all("built without CUDA");
#else
    if (amp_gpu_visible() == 0)
        plan_skip_all("no CUDA device");
    const int nreal = for_each_shared_tensor(NULL, NULL);
    plan(REMAP_RANDOM_FILES * FILE_CHECKS + nreal * 2 * FILE_CHECKS + 2 * RUN_CHECKS +
         (nreal == 0));
    tap_real_data(nreal, getenv("AMP_TEST_DATA"));
    each_remap_random(FILE_CHECKS, check_file);
    for_each_shared_tensor(real_one, NULL);
    test_runs();
    return done_testing();
#endif
}
