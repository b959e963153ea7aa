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
 * a pass, only the passes the keys' bits need. Stable, so keys that are
 * equal (none, after amped-prep's sum of repeats) keep their order. */
static amp_status sort_keys(uint64_t *key, double *val, uint64_t n, uint64_t max_key,
                            amp_error *err)
{
    unsigned bits = 0;
    while (bits < 64 && (max_key >> bits) != 0)
        bits++;
    if (n < 2 || bits == 0)
        return AMP_OK;
    uint64_t *k2 = amp_huge_alloc(n * sizeof *k2 + 1, "GCP's sorted keys", err);
    double *v2 = k2 ? amp_huge_alloc(n * sizeof *v2 + 1, "GCP's sorted values", err) : NULL;
    uint64_t *count = v2 ? amp_calloc(65536, sizeof *count, "a radix count", err) : NULL;
    if (count == NULL) {
        if (k2)
            amp_huge_free(k2, n * sizeof *k2 + 1);
        if (v2)
            amp_huge_free(v2, n * sizeof *v2 + 1);
        return err->status;
    }
    uint64_t *ks = key, *kd = k2;
    double *vs = val, *vd = v2;
    for (unsigned shift = 0; shift < bits; shift += 16) {
        memset(count, 0, 65536 * sizeof *count);
        for (uint64_t i = 0; i < n; i++)
            count[(ks[i] >> shift) & 0xffff]++;
        uint64_t at = 0;
        for (unsigned d = 0; d < 65536; d++) {
            uint64_t c = count[d];
            count[d] = at;
            at += c;
        }
        for (uint64_t i = 0; i < n; i++) {
            uint64_t to = count[(ks[i] >> shift) & 0xffff]++;
            kd[to] = ks[i];
            vd[to] = vs[i];
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
    AMP_CHECK_GOTO(sort_keys(s->key, s->val, n, cells - 1, err), rc, fail);
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

/* Column r's 2-norm of mode m's factor, summed in ordinal order. */
static double col_norm(const amp_gcp_view *v, unsigned m, unsigned R, const double *A,
                       unsigned r)
{
    double s = 0;
    for (uint64_t o = 0; o < v->rows[m]; o++) {
        double a = A[v->row_of[m][o] * R + r];
        s += a * a;
    }
    return sqrt(s);
}

void amp_gcp_start(const amp_gcp_view *v, double norm_sq, unsigned R, double *const *A)
{
    const unsigned N = v->nmodes;
    double scale = 1;
    if (norm_sq >= 0) {
        /* |M|^2 = sum_rs prod_m (A_m' A_m)_rs, the Grams in ordinal order. */
        double *V = calloc((size_t)R * R + 1, sizeof *V);
        if (V != NULL) {
            for (size_t i = 0; i < (size_t)R * R; i++)
                V[i] = 1;
            for (unsigned m = 0; m < N; m++)
                for (unsigned r = 0; r < R; r++)
                    for (unsigned q = 0; q < R; q++) {
                        double s = 0;
                        for (uint64_t o = 0; o < v->rows[m]; o++) {
                            const double *a = A[m] + v->row_of[m][o] * R;
                            s += a[r] * a[q];
                        }
                        V[r * R + q] *= s;
                    }
            double msq = 0;
            for (size_t i = 0; i < (size_t)R * R; i++)
                msq += V[i];
            free(V);
            if (msq > 0 && norm_sq > 0)
                scale = sqrt(norm_sq / msq);
        }
    }
    for (unsigned r = 0; r < R; r++) {
        double w = scale, nrm[AMP_MAX_MODES];
        for (unsigned m = 0; m < N; m++) {
            nrm[m] = col_norm(v, m, R, A[m], r);
            w *= nrm[m];
        }
        const double share = pow(w, 1.0 / N);
        for (unsigned m = 0; m < N; m++) {
            const double f = nrm[m] > 0 ? share / nrm[m] : share;
            for (uint64_t i = 0; i < v->rows[m]; i++)
                A[m][i * R + r] *= f;
        }
    }
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

void amp_gcp_finish(const amp_gcp_view *v, unsigned R, double *const *A, double *lambda)
{
    for (unsigned r = 0; r < R; r++) {
        lambda[r] = 1;
        for (unsigned m = 0; m < v->nmodes; m++) {
            const double nrm = col_norm(v, m, R, A[m], r);
            if (nrm > 0)
                for (uint64_t i = 0; i < v->rows[m]; i++)
                    A[m][i * R + r] /= nrm;
            lambda[r] *= nrm;
        }
    }
}
