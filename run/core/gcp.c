/* GCP's shared host parts (amp_gcp.h): the tensor in GCP's form, the
 * sample sizes, the start and the finish of the factors. */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_gcp.h"
#include "amp_threads.h"

const char *const amp_gcp_loss_names[AMP_GCP_NLOSSES + 1] = {
    "gaussian", "poisson", "poisson-log", "bernoulli-logit", "bernoulli-odds", "gamma",
    "rayleigh", "huber", NULL};

int amp_gcp_value_ok(amp_gcp_loss loss, double x, const char **what)
{
    switch (loss) {
    case AMP_GCP_GAUSSIAN:
    case AMP_GCP_HUBER:
        *what = "real";
        return isfinite(x);
    case AMP_GCP_BERNOULLI_LOGIT:
    case AMP_GCP_BERNOULLI_ODDS:
        *what = "binary (0 or 1)";
        return x == 0 || x == 1;
    case AMP_GCP_POISSON:
    case AMP_GCP_POISSON_LOG:
        *what = "counts (non-negative integers)";
        return x >= 0 && x == floor(x) && isfinite(x);
    case AMP_GCP_GAMMA:
    case AMP_GCP_RAYLEIGH:
        *what = "non-negative";
        return x >= 0 && isfinite(x);
    }
    *what = "?";
    return 0;
}

/* ---- the tensor in GCP's form ----------------------------------------------- */

typedef struct orig_row {
    uint64_t orig, row;
} orig_row;

static int by_orig(const void *a, const void *b)
{
    const orig_row *x = a, *y = b;
    return x->orig < y->orig ? -1 : x->orig > y->orig;
}

/* keys and values sorted by key: least significant digit first, 16 bits
 * a pass, only the passes the keys' bits need. Each pass counts and
 * scatters in parallel over fixed chunks (one a thread), each chunk's
 * counts placed after the chunks before it: stable, so the order is
 * the one a serial pass gives (keys equal: none, after amped-prep's sum
 * of repeats) whatever the thread count. Serial, rd100m's 68.8 M keys
 * took four passes of random 16-byte scatters on one core. */
static amp_status sort_keys(uint64_t *key, double *val, uint64_t n, uint64_t max_key,
                            int threads, amp_error *err)
{
    unsigned bits = 0;
    while (bits < 64 && (max_key >> bits) != 0)
        bits++;
    if (n < 2 || bits == 0)
        return AMP_OK;
    int64_t T = amp_thread_count(threads);
    if ((uint64_t)T > n / 65536 + 1)
        T = (int64_t)(n / 65536 + 1);   /* a chunk of at least 64 K keys */
    uint64_t *k2 = amp_huge_alloc(n * sizeof *k2 + 1, "GCP's sorted keys", err);
    double *v2 = k2 ? amp_huge_alloc(n * sizeof *v2 + 1, "GCP's sorted values", err) : NULL;
    uint64_t *count = v2 ? amp_calloc((size_t)T * 65536, sizeof *count, "a radix count", err)
                         : NULL;
    if (count == NULL) {
        if (k2)
            amp_huge_free(k2, n * sizeof *k2 + 1);
        if (v2)
            amp_huge_free(v2, n * sizeof *v2 + 1);
        return err->status;
    }
    uint64_t *ks = key, *kd = k2;
    double *vs = val, *vd = v2;
    const uint64_t per = n / (uint64_t)T;
    for (unsigned shift = 0; shift < bits; shift += 16) {
#pragma omp parallel for schedule(static, 1) num_threads(T)
        for (int64_t c = 0; c < T; c++) {
            uint64_t *cc = count + (size_t)c * 65536;
            memset(cc, 0, 65536 * sizeof *cc);
            const uint64_t lo = per * (uint64_t)c, hi = c == T - 1 ? n : lo + per;
            for (uint64_t i = lo; i < hi; i++)
                cc[(ks[i] >> shift) & 0xffff]++;
        }
        uint64_t at = 0;
        for (unsigned d = 0; d < 65536; d++)
            for (int64_t c = 0; c < T; c++) {
                uint64_t *slot = count + (size_t)c * 65536 + d, k = *slot;
                *slot = at;
                at += k;
            }
#pragma omp parallel for schedule(static, 1) num_threads(T)
        for (int64_t c = 0; c < T; c++) {
            uint64_t *cc = count + (size_t)c * 65536;
            const uint64_t lo = per * (uint64_t)c, hi = c == T - 1 ? n : lo + per;
            for (uint64_t i = lo; i < hi; i++) {
                const uint64_t to = cc[(ks[i] >> shift) & 0xffff]++;
                kd[to] = ks[i];
                vd[to] = vs[i];
            }
        }
        uint64_t *kt = ks;
        ks = kd;
        kd = kt;
        double *vt = vs;
        vs = vd;
        vd = vt;
    }
    if (ks != key) {
        memcpy(key, ks, n * sizeof *key);
        memcpy(val, vs, n * sizeof *val);
    }
    amp_free(count);
    amp_huge_free(k2, n * sizeof *k2 + 1);
    amp_huge_free(v2, n * sizeof *v2 + 1);
    return AMP_OK;
}

void amp_gcp_source_free(amp_gcp_source *s)
{
    if (s->key)
        amp_huge_free(s->key, s->view.nnz * sizeof *s->key + 1);
    if (s->val)
        amp_huge_free(s->val, s->view.nnz * sizeof *s->val + 1);
    for (unsigned m = 0; m < AMP_MAX_MODES; m++)
        amp_free(s->row_of[m]);
    memset(s, 0, sizeof *s);
}

amp_status amp_gcp_source_build(const amp_tensor *t, int threads, amp_gcp_source *s,
                                amp_error *err)
{
    memset(s, 0, sizeof *s);
    const unsigned N = t->nmodes;
    const amp_copy *c = &t->copies[0];
    if (t->layout_only || c->words == NULL)
        return AMP_FAIL(err, AMP_ERR_INTERNAL, "GCP needs the nonzeros in host memory");
    amp_gcp_view *v = &s->view;
    v->nmodes = N;
    v->nnz = t->nnz;
    uint64_t cells = 1;
    for (unsigned m = 0; m < N; m++) {
        v->rows[m] = t->rows[m] ? t->rows[m] : 1;
        if (cells > UINT64_MAX / v->rows[m])
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "--method gcp: the tensor has 2^64 cells "
                            "or more (the product of its nonempty dimensions), and GCP's "
                            "sampler numbers the cells in 64 bits");
        cells *= v->rows[m];
    }
    v->cells = cells;
    amp_status rc = AMP_OK;
    uint64_t *ord[AMP_MAX_MODES] = {0};
    orig_row *pairs = NULL;
    /* Each mode's ordinals: its compact rows in ascending original index. */
    for (unsigned m = 0; m < N; m++) {
        const uint64_t R = v->rows[m];
        s->row_of[m] = amp_calloc(R, sizeof(uint64_t), "GCP's row table", err);
        ord[m] = s->row_of[m] ? amp_calloc(R, sizeof(uint64_t), "GCP's ordinals", err) : NULL;
        pairs = ord[m] ? amp_calloc(R, sizeof *pairs, "GCP's ordinals", err) : NULL;
        if (pairs == NULL) {
            rc = err->status;
            goto fail;
        }
        for (uint64_t r = 0; r < R; r++)
            pairs[r] = (orig_row){t->new_to_orig[m] ? t->new_to_orig[m][r] : r, r};
        if (t->new_to_orig[m])
            qsort(pairs, R, sizeof *pairs, by_orig);
        for (uint64_t o = 0; o < R; o++) {
            s->row_of[m][o] = pairs[o].row;
            ord[m][pairs[o].row] = o;
        }
        amp_free(pairs);
        pairs = NULL;
        v->row_of[m] = s->row_of[m];
        s->bytes += R * sizeof(uint64_t);
    }
    const uint64_t n = t->nnz;
    s->key = amp_huge_alloc(n * sizeof *s->key + 1, "GCP's keys", err);
    s->val = s->key ? amp_huge_alloc(n * sizeof *s->val + 1, "GCP's values", err) : NULL;
    if (s->val == NULL) {
        rc = err->status;
        goto fail;
    }
    s->bytes += n * 16;
    {
        const amp_mode_layout *l = &c->layout;
        const int keyed = l->key_bits > 0, vf32 = t->value_type == AMP_VALUES_F32;
        const int64_t nb = (int64_t)c->nblocks;
        uint64_t *key = s->key;
        double *val = s->val;
#pragma omp parallel for schedule(dynamic, 1) num_threads(amp_thread_count(threads))
        for (int64_t b = 0; b < nb; b++) {
            const uint64_t lo = keyed ? c->block_start[b] : 0;
            const uint64_t hi = keyed ? c->block_start[b + 1] : c->nnz;
            const uint64_t bk = keyed ? c->block_key[b] : 0;
            for (uint64_t k = lo; k < hi; k++) {
                uint64_t kk = 0;
                for (unsigned m = 0; m < N; m++) {
                    uint64_t r = amp_blco_field(bk, c->words[k], l->shift[m], l->width[m]);
                    kk = kk * v->rows[m] + ord[m][r];
                }
                key[k] = kk;
                val[k] = vf32 ? (double)((const float *)c->vals)[k]
                              : ((const double *)c->vals)[k];
            }
        }
    }
    AMP_CHECK_GOTO(sort_keys(s->key, s->val, n, cells - 1, threads, err), rc, fail);
    v->key = s->key;
    v->val = s->val;
    for (unsigned m = 0; m < N; m++)
        amp_free(ord[m]);
    return AMP_OK;
fail:
    amp_free(pairs);
    for (unsigned m = 0; m < N; m++)
        amp_free(ord[m]);
    amp_gcp_source_free(s);
    return rc;
}

/* ---- the run's settings ------------------------------------------------- */

static uint64_t min3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a < b ? a : b;
    return m < c ? m : c;
}

amp_status amp_gcp_draw_batch(const amp_gcp_view *v, const amp_gcp_batch *b, uint64_t *rows,
                              double *x, amp_error *err)
{
    const unsigned N = v->nmodes;
    const int64_t s = (int64_t)(b->snz + b->sz);
    uint64_t bad = UINT64_MAX;
#pragma omp parallel for schedule(static) reduction(min : bad)
    for (int64_t j = 0; j < s; j++)
        if (amp_gcp_sample(v, b->key, (uint64_t)j, b->snz, rows + (uint64_t)j * N, x + j))
            bad = (uint64_t)j < bad ? (uint64_t)j : bad;
    if (bad != UINT64_MAX)
        return AMP_FAIL(err, AMP_ERR_RANGE, "GCP's sampler drew %d stored cells in a row for "
                        "one zero: the tensor (%llu of %llu cells stored) is too dense for "
                        "stratified sampling; give --samples-grad and --samples-loss with 0 "
                        "zeros", AMP_GCP_ZERO_ATTEMPTS, (unsigned long long)v->nnz,
                        (unsigned long long)v->cells);
    return AMP_OK;
}

amp_status amp_gcp_resolve(const amp_gcp_opts *o, const amp_gcp_view *v, amp_gcp_plan *p,
                           amp_error *err)
{
    memset(p, 0, sizeof *p);
    const uint64_t nnz = v->nnz, zeros = v->cells - v->nnz;
    const uint64_t g = nnz / 1000 * 3 + (nnz % 1000 * 3 + 999) / 1000;   /* ceil(3 nnz/1000) */
    const uint64_t gs = g > 1000 ? g : 1000;
    const uint64_t f0 = nnz / 100 + (nnz % 100 != 0), fs = f0 > 100000 ? f0 : 100000;
    p->grad_nz = o->grad_given ? o->grad_nz : (gs < nnz ? gs : nnz);
    p->grad_z = o->grad_given ? o->grad_z : min3(gs, nnz, zeros);
    p->loss_nz = o->loss_given ? o->loss_nz : (fs < nnz ? fs : nnz);
    p->loss_z = o->loss_given ? o->loss_z : min3(fs, nnz, zeros);
    const char *which[2] = {"--samples-grad", "--samples-loss"};
    const uint64_t snz[2] = {p->grad_nz, p->loss_nz}, sz[2] = {p->grad_z, p->loss_z};
    for (int i = 0; i < 2; i++) {
        if (snz[i] > 0 && nnz == 0)
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s asks for %llu nonzeros, and the tensor "
                            "has none", which[i], (unsigned long long)snz[i]);
        if (sz[i] > 0 && zeros == 0)
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s asks for %llu zeros, and every cell of the "
                            "tensor is stored: give NONZEROS,0", which[i],
                            (unsigned long long)sz[i]);
        if (snz[i] + sz[i] == 0)
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s: no samples at all (the tensor has %llu "
                            "nonzeros and %llu absent cells)", which[i],
                            (unsigned long long)nnz, (unsigned long long)zeros);
    }
    p->grad_wnz = p->grad_nz ? (double)nnz / (double)p->grad_nz : 0;
    p->grad_wz = p->grad_z ? (double)zeros / (double)p->grad_z : 0;
    p->loss_wnz = p->loss_nz ? (double)nnz / (double)p->loss_nz : 0;
    p->loss_wz = p->loss_z ? (double)zeros / (double)p->loss_z : 0;
    p->lower = amp_gcp_lower_bound(o->loss);
    p->exact = amp_gcp_exact_kind(o->loss, v);
    return AMP_OK;
}

int amp_gcp_exact_kind(amp_gcp_loss loss, const amp_gcp_view *v)
{
    if (v->cells <= AMP_GCP_EXACT_CELLS)
        return AMP_GCP_EXACT_ENUMERATE;
    if ((loss == AMP_GCP_GAUSSIAN || loss == AMP_GCP_POISSON) && v->nnz <= AMP_GCP_EXACT_NNZ)
        return AMP_GCP_EXACT_CLOSED;
    return AMP_GCP_EXACT_NONE;
}

/* ---- the start and the finish -------------------------------------------- */

/* The start's and the finish's sums over a mode's rows, in ordinal order
 * within blocks of ordinals fixed by the row count alone (at least 4096,
 * at most 64 blocks, fewer where their sums would take more than 256 MB),
 * the blocks' sums added in block order: the same
 * bits on any number of threads, and one pass over the factor, not one a
 * column (a column at a time through row_of gathered R times the rows, R^2
 * times for the Gram: minutes on rd100m's 6.5 M rows at rank 32). */
#define START_BLOCKS_MOST 64
#define START_BLOCK_LEAST 4096

/* G (R x R, full) = mode m's A' A where gram, else only its diagonal (the
 * columns' squared norms; the rest of G left as it is). 0: out of memory. */
static int ordinal_sums(const amp_gcp_view *v, unsigned m, unsigned R, const double *A,
                        int gram, double *G)
{
    const uint64_t n = v->rows[m];
    const size_t per = gram ? (size_t)R * R : R;
    /* At most 256 MB of block sums (two blocks at rank 4096's Gram). */
    uint64_t most = ((uint64_t)256 << 20) / (per * sizeof(double));
    most = most < 1 ? 1 : most > START_BLOCKS_MOST ? START_BLOCKS_MOST : most;
    uint64_t bs = (n + most - 1) / most;
    bs = bs > START_BLOCK_LEAST ? bs : START_BLOCK_LEAST;
    const int64_t nb = (int64_t)((n + bs - 1) / bs);
    double *part = calloc((size_t)nb * per + 1, sizeof *part);
    if (part == NULL)
        return 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < nb; b++) {
        double *g = part + (size_t)b * per;
        const uint64_t lo = (uint64_t)b * bs, hi = lo + bs < n ? lo + bs : n;
        for (uint64_t o = lo; o < hi; o++) {
            const double *a = A + v->row_of[m][o] * R;
            if (gram) {
                for (unsigned r = 0; r < R; r++)
                    for (unsigned q = r; q < R; q++)
                        g[(size_t)r * R + q] += a[r] * a[q];
            } else {
                for (unsigned r = 0; r < R; r++)
                    g[r] += a[r] * a[r];
            }
        }
    }
    /* The blocks' sums in block order, into block 0's. */
    for (size_t e = 0; e < per; e++) {
        double sum = 0;
        for (int64_t b = 0; b < nb; b++)
            sum += part[(size_t)b * per + e];
        part[e] = sum;
    }
    for (unsigned r = 0; r < R; r++) {
        if (!gram)
            G[(size_t)r * R + r] = part[r];
        for (unsigned q = r; gram && q < R; q++)
            G[(size_t)r * R + q] = G[(size_t)q * R + r] = part[(size_t)r * R + q];
    }
    free(part);
    return 1;
}

amp_status amp_gcp_start(const amp_gcp_view *v, double norm_sq, unsigned R, double *const *A,
                         amp_error *err)
{
    const unsigned N = v->nmodes;
    double scale = 1;
    double *G = calloc((size_t)R * R + 1, sizeof *G);
    double *V = calloc((size_t)R * R + 1, sizeof *V);
    double *nrm = calloc((size_t)N * R + 1, sizeof *nrm);   /* mode-major */
    amp_status rc = AMP_OK;
    if (G == NULL || V == NULL || nrm == NULL) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for GCP's start");
        goto done;
    }
    /* |M|^2 = sum_rs prod_m (A_m' A_m)_rs; the columns' norms from the
     * Grams' diagonals. */
    for (size_t i = 0; i < (size_t)R * R; i++)
        V[i] = 1;
    for (unsigned m = 0; m < N; m++) {
        if (!ordinal_sums(v, m, R, A[m], norm_sq >= 0, G)) {
            rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for GCP's start");
            goto done;
        }
        for (unsigned r = 0; r < R; r++)
            nrm[(size_t)m * R + r] = sqrt(G[(size_t)r * R + r]);
        if (norm_sq >= 0)
            for (size_t i = 0; i < (size_t)R * R; i++)
                V[i] *= G[i];
    }
    if (norm_sq >= 0) {
        double msq = 0;
        for (size_t i = 0; i < (size_t)R * R; i++)
            msq += V[i];
        if (msq > 0 && norm_sq > 0)
            scale = sqrt(norm_sq / msq);
    }
    /* nrm becomes each column's factor. */
    for (unsigned r = 0; r < R; r++) {
        double w = scale;
        for (unsigned m = 0; m < N; m++)
            w *= nrm[(size_t)m * R + r];
        const double share = pow(w, 1.0 / N);
        for (unsigned m = 0; m < N; m++) {
            double *f = &nrm[(size_t)m * R + r];
            *f = *f > 0 ? share / *f : share;
        }
    }
    for (unsigned m = 0; m < N; m++) {
        const int64_t rows = (int64_t)v->rows[m];
        double *a = A[m];
        const double *fm = nrm + (size_t)m * R;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < rows; i++)
            for (unsigned r = 0; r < R; r++)
                a[(size_t)i * R + r] *= fm[r];
    }
done:
    free(G);
    free(V);
    free(nrm);
    return rc;
}

int amp_gcp_epoch_end(const amp_cpd_opts *o, amp_cpd *c, unsigned e, double f, double before,
                      double f_prev, int failed, unsigned fails, double seconds)
{
    c->gcp_fails = fails;
    c->fit = f_prev;
    if (o->on_iter)
        o->on_iter(o->ctx, e + 1, f, before - f, seconds);
    if (o->stop && *o->stop) {
        c->stopped = 1;
        return 1;
    }
    if (fails > o->gcp.max_fails)
        return 1;
    if (!failed && o->tol > 0 && before - f < o->tol * fabs(before)) {
        c->converged = 1;
        return 1;
    }
    return 0;
}

amp_status amp_gcp_finish(const amp_gcp_view *v, unsigned R, double *const *A, double *lambda,
                          amp_error *err)
{
    double *G = calloc((size_t)R * R + 1, sizeof *G);
    double *nrm = calloc((size_t)R + 1, sizeof *nrm);
    amp_status rc = AMP_OK;
    if (G == NULL || nrm == NULL) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for GCP's finish");
        goto done;
    }
    for (unsigned r = 0; r < R; r++)
        lambda[r] = 1;
    for (unsigned m = 0; m < v->nmodes; m++) {
        if (!ordinal_sums(v, m, R, A[m], 0, G)) {
            rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for GCP's finish");
            goto done;
        }
        for (unsigned r = 0; r < R; r++) {
            nrm[r] = sqrt(G[(size_t)r * R + r]);
            lambda[r] *= nrm[r];
            nrm[r] = nrm[r] > 0 ? nrm[r] : 1;   /* a zero column left as it is */
        }
        const int64_t rows = (int64_t)v->rows[m];
        double *a = A[m];
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < rows; i++)
            for (unsigned r = 0; r < R; r++)
                a[(size_t)i * R + r] /= nrm[r];
    }
done:
    free(G);
    free(nrm);
    return rc;
}
