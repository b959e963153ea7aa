/* The JSON form of amped-run's report; amped-run(1) documents its keys. */
#include <config.h>

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_outfile.h"
#include "amp_strbuf.h"
#include "run_report.h"

const char *const amp_report_phase_names[AMP_NPHASES] = {"mttkrp", "gram", "solve",
                                                         "normalize", "fit", "comm",
                                                         "update"};

amp_status amp_report_add_iter(amp_run_report *r, unsigned iter, double fit, double delta,
                               double seconds, const double *phase_so_far, amp_error *err)
{
    if (r->niters == r->cap) {
        unsigned cap = r->cap ? 2 * r->cap : 64;
        amp_iter_record *p = realloc(r->iters, cap * sizeof *p);
        if (p == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        r->iters = p;
        r->cap = cap;
    }
    amp_iter_record *it = &r->iters[r->niters++];
    *it = (amp_iter_record){.iter = iter, .fit = fit, .delta = delta, .seconds = seconds};
    for (int p = 0; p < AMP_NPHASES; p++) {
        it->phase[p] = phase_so_far[p] - r->phase_so_far[p];
        r->phase_so_far[p] = phase_so_far[p];
    }
    return AMP_OK;
}

/* The document is small, so it is built whole and then written in one
 * go. */
typedef amp_strbuf sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    amp_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

static void put_string(sbuf *b, const char *s)
{
    put(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            put(b, "\\%c", *c);
        else if (*c < 0x20)
            put(b, "\\u%04x", *c);
        else
            put(b, "%c", *c);
    }
    put(b, "\"");
}

/* JSON has no NaN or infinity. */
static void put_number(sbuf *b, double v)
{
    if (isfinite(v))
        put(b, "%.17g", v);
    else
        put(b, "null");
}

static void put_u64_array(sbuf *b, const uint64_t *v, unsigned n)
{
    put(b, "[");
    for (unsigned i = 0; i < n; i++)
        put(b, "%s%" PRIu64, i ? ", " : "", v[i]);
    put(b, "]");
}

static void put_double_array(sbuf *b, const double *v, unsigned n)
{
    put(b, "[");
    for (unsigned i = 0; i < n; i++) {
        put(b, "%s", i ? ", " : "");
        put_number(b, v[i]);
    }
    put(b, "]");
}

/* --observed nonzeros: what was fitted and tested, and the rows kept. */
static void put_completion(sbuf *b, const amp_run_report *r)
{
    const amp_cpd *c = r->completion;
    const unsigned N = r->t->nmodes;
    put(b, ",\n  \"completion\": {\"observed\": \"nonzeros\", \"holdout\": ");
    put_number(b, r->opts->completion.holdout);
    put(b, ", \"holdout_file\": ");
    if (r->holdout_file)
        put_string(b, r->holdout_file);
    else
        put(b, "null");
    put(b, ", \"n_train\": %" PRIu64 ", \"n_test\": %" PRIu64 ", \"rmse_train\": ",
        c->completion.n_train, c->completion.n_test);
    put_number(b, c->completion.rmse_train);
    put(b, ", \"rmse_test\": ");
    put_number(b, c->completion.rmse_test);
    put(b, ",\n                 \"unobserved_rows\": ");
    put_u64_array(b, c->completion.unobserved, N);
    put(b, ", \"singular_rows\": ");
    put_u64_array(b, c->completion.singular, N);
    put(b, "}");
}

amp_status amp_report_write_json(const amp_run_report *r, amp_outfile *of, amp_error *err)
{
    const char *const *phase_names = amp_report_phase_names;
    const amp_tensor *t = r->t;
    sbuf b = {0};
    put(&b, "{\n  \"tensor\": {\"path\": ");
    put_string(&b, r->path);
    put(&b, ", \"modes\": %u, \"nnz\": %" PRIu64 ", \"dims\": ", t->nmodes, t->nnz);
    put_u64_array(&b, t->dims, t->nmodes);
    put(&b, ", \"compact_dims\": ");
    put_u64_array(&b, t->rows, t->nmodes);
    put(&b, ", \"norm\": ");
    put_number(&b, sqrt(t->norm_sq));
    put(&b, ", \"values\": \"%s\"},\n", t->value_type == AMP_VALUES_F32 ? "f32" : "f64");
    put(&b, "  \"rank\": %u,\n  \"backend\": ", r->opts->rank);
    put_string(&b, r->backend);
    if (r->device) {
        put(&b, ",\n  \"device\": ");
        put_string(&b, r->device);
    }
    if (r->stream_bytes_per_nnz > 0) {
        put(&b, ",\n  \"stream_bytes_per_nnz\": ");
        put_number(&b, r->stream_bytes_per_nnz);
    }
    put(&b, ",\n  \"threads\": %d,\n  \"precision\": \"%s\",\n  \"seed\": %" PRIu64
        ",\n  \"tol\": ", r->threads,
        r->opts->precision == AMP_PRECISION_F32 ? "f32" : "f64", r->opts->seed);
    put_number(&b, r->opts->tol);
    put(&b, ",\n  \"max_iters\": %u,\n", r->opts->max_iters);
    put(&b, "  \"method\": \"%s\"", amp_method_name(r->opts->method));
    if (r->rule) {
        put(&b, ",\n  \"constraints\": [");
        for (unsigned m = 0; m < t->nmodes; m++)
            put(&b, "%s\"%s\"", m ? ", " : "", amp_constraint_name(r->rule[m].constraint));
        double l1[AMP_MAX_MODES], l2[AMP_MAX_MODES];
        for (unsigned m = 0; m < t->nmodes; m++) {
            l1[m] = r->rule[m].l1;
            l2[m] = r->rule[m].l2;
        }
        put(&b, "],\n  \"l1\": ");
        put_double_array(&b, l1, t->nmodes);
        put(&b, ",\n  \"l2\": ");
        put_double_array(&b, l2, t->nmodes);
    }
    if (r->opts->method == AMP_METHOD_ADMM) {
        put(&b, ",\n  \"admm_inner\": %u,\n  \"admm_tol\": ", r->opts->admm_inner);
        put_number(&b, r->opts->admm_tol);
    }
    if (r->opts->method == AMP_METHOD_APR) {
        put(&b, ",\n  \"inner\": %u,\n  \"kappa\": ", r->opts->apr.inner);
        put_number(&b, r->opts->apr.kappa);
        put(&b, ",\n  \"kappa_tol\": ");
        put_number(&b, r->opts->apr.kappa_tol);
        put(&b, ",\n  \"eps_div_zero\": ");
        put_number(&b, r->opts->apr.eps_div_zero);
        put(&b, ",\n  \"kappa_rule\": \"%s\"",
            r->opts->apr.shift_rule == AMP_APR_SHIFT_PYTTB ? "pyttb" : "kkt");
    }
    if (r->completion)
        put_completion(&b, r);
    const int gcp = r->opts->method == AMP_METHOD_GCP;
    if (gcp) {
        const amp_gcp_opts *g = &r->opts->gcp;
        put(&b, ",\n  \"loss\": \"%s\"", amp_gcp_loss_names[g->loss]);
        if (r->gcp_memory)
            put(&b, ", \"memory\": \"%s\"", r->gcp_memory);
        if (g->loss == AMP_GCP_HUBER) {
            put(&b, ",\n  \"huber_delta\": ");
            put_number(&b, g->huber_delta);
        }
        if (r->gcp_plan) {
            const amp_gcp_plan *p = r->gcp_plan;
            put(&b, ",\n  \"samples_grad\": [%" PRIu64 ", %" PRIu64 "], \"samples_loss\": [%"
                PRIu64 ", %" PRIu64 "], \"exact\": \"%s\"", p->grad_nz, p->grad_z, p->loss_nz,
                p->loss_z, p->exact == AMP_GCP_EXACT_ENUMERATE ? "enumerated"
                           : p->exact == AMP_GCP_EXACT_CLOSED  ? "closed"
                                                               : "none");
            put(&b, ",\n  \"lower_bound\": ");
            if (isfinite(p->lower))
                put_number(&b, p->lower);
            else
                put(&b, "null");
        }
        put(&b, ",\n  \"epoch_iters\": %u, \"rate\": ", g->epoch_iters);
        put_number(&b, g->rate);
        put(&b, ", \"decay\": ");
        put_number(&b, g->decay);
        put(&b, ", \"max_fails\": %u, \"adam\": \"%s\"", g->max_fails,
            g->adam == AMP_GCP_ADAM_LAZY ? "lazy" : "dense");
    }
    put(&b, ",\n");
    if (r->mttkrp_mode_seconds) {
        double total = 0;
        for (unsigned m = 0; m < t->nmodes; m++)
            total += r->mttkrp_mode_seconds[m];
        put(&b, "  \"mttkrp\": {\"rounds\": %u, \"mode_seconds\": ", r->mttkrp_rounds);
        put_double_array(&b, r->mttkrp_mode_seconds, t->nmodes);
        put(&b, ", \"seconds\": ");
        put_number(&b, total);
        put(&b, "},\n");
    }
    if (r->check_rel_err) {
        put(&b, "  \"check\": {\"max_rel_err\": ");
        put_double_array(&b, r->check_rel_err, t->nmodes);
        put(&b, "},\n");
    }
    put(&b, "  \"iterations\": [");
    for (unsigned i = 0; i < r->niters; i++) {
        const amp_iter_record *it = &r->iters[i];
        if (gcp) {
            put(&b, "%s\n    {\"iter\": %u, \"loss\": ", i ? "," : "", it->iter);
            put_number(&b, it->gcp_loss);
            put(&b, ", \"loss_stderr\": ");
            put_number(&b, it->gcp_stderr);
            put(&b, ", \"loss_exact\": ");
            put_number(&b, it->gcp_exact);
            put(&b, ", \"rate\": ");
            put_number(&b, it->gcp_rate);
            put(&b, ", \"failed\": %s", it->gcp_failed ? "true" : "false");
        } else if (r->opts->method == AMP_METHOD_APR) {
            put(&b, "%s\n    {\"iter\": %u, \"loglik\": ", i ? "," : "", it->iter);
            put_number(&b, it->loglik);
            put(&b, ", \"kkt\": ");
            put_number(&b, it->kkt);
            put(&b, ", \"inner\": %u", it->inner);
        } else {
            put(&b, "%s\n    {\"iter\": %u, \"fit\": ", i ? "," : "", it->iter);
            put_number(&b, it->fit);
            put(&b, ", \"delta\": ");
            put_number(&b, it->delta);
            if (r->completion) {
                put(&b, ", \"rmse_train\": ");
                put_number(&b, it->rmse_train);
                put(&b, ", \"rmse_test\": ");
                put_number(&b, it->rmse_test);
            }
        }
        put(&b, ", \"seconds\": ");
        put_number(&b, it->seconds);
        put(&b, ",\n     \"phases\": {");
        for (int p = 0; p < AMP_NPHASES; p++) {
            put(&b, "%s\"%s\": ", p ? ", " : "", phase_names[p]);
            put_number(&b, it->phase[p]);
        }
        put(&b, "}}");
    }
    put(&b, "%s],\n  \"%s\": ", r->niters ? "\n  " : "",
        r->opts->method == AMP_METHOD_APR ? "final_loglik" : gcp ? "final_loss" : "final_fit");
    if (r->niters)
        put_number(&b, r->final_fit);
    else
        put(&b, "null");
    put(&b, ",\n  \"converged\": %s,\n  \"timings\": {\"load\": ",
        r->converged ? "true" : "false");
    put_number(&b, r->seconds_load);
    put(&b, ", \"upload\": ");
    put_number(&b, r->seconds_upload);
    put(&b, ", \"start\": ");
    put_number(&b, r->seconds_start);
    for (int p = 0; p < AMP_NPHASES; p++) {
        put(&b, ", \"%s\": ", phase_names[p]);
        put_number(&b, r->phase_seconds ? r->phase_seconds[p] : 0);
    }
    put(&b, ", \"output\": ");
    put_number(&b, r->seconds_output);
    put(&b, ", \"total\": ");
    put_number(&b, r->seconds_total);
    put(&b, "}");
    if (r->factors_prefix) {
        put(&b, ",\n  \"factors\": {\"prefix\": ");
        put_string(&b, r->factors_prefix);
        put(&b, ", \"run\": ");
        if (r->factors_run)
            put_string(&b, r->factors_run);
        else
            put(&b, "null");
        put(&b, "}");
    }
    if (r->ngpus > 0) {
        put(&b, ",\n  \"direct_upload\": %s", r->direct_upload ? "true" : "false");
        put(&b, ",\n  \"partition\": ");
        put_string(&b, r->partition);
        put(&b, ",\n  \"imbalance\": ");
        put_double_array(&b, r->imbalance, t->nmodes);
        put(&b, ",\n  \"imbalance_bound\": ");
        put_double_array(&b, r->imbalance_bound, t->nmodes);
        put(&b, ",\n  \"send_parts\": ");
        put_u64_array(&b, r->send_parts, t->nmodes);
        if (r->row_exchange) {
            put(&b, ",\n  \"row_exchange\": ");
            put_string(&b, r->row_exchange);
        }
        put(&b, ",\n  \"gpus\": [");
        for (unsigned k = 0; k < r->ngpus; k++) {
            const amp_report_gpu *g = &r->gpus[k];
            put(&b, "%s\n    {\"device\": %d, \"name\": ", k ? "," : "", g->device);
            put_string(&b, g->name);
            put(&b, ", \"memory\": \"%s\", \"device_bytes\": ", g->memory);
            put_number(&b, g->memory_bytes);
            put(&b, ",\n     \"plan\": {\"asked\": \"%s\", \"available\": ", g->asked);
            put_number(&b, g->avail_bytes);
            put(&b, ", \"resident\": ");
            put_number(&b, g->resident_bytes);
            put(&b, ", \"remap\": ");
            if (g->remap_bytes > 0)
                put_number(&b, g->remap_bytes);
            else
                put(&b, "null");
            put(&b, ", \"remap_in_file\": %s, \"tensor_planned\": ",
                g->remap_in_file ? "true" : "false");
            put_number(&b, g->tensor_plan_bytes);
            put(&b, "}, \"tensor_bytes\": ");
            put_number(&b, g->tensor_bytes);
            if (strcmp(g->memory, "remap") == 0) {
                put(&b, ",\n     \"remap\": {\"positions_from_file\": %u, "
                    "\"positions_seconds\": ", g->remap_from_file);
                put_number(&b, g->remap_positions_seconds);
                put(&b, ", \"kernel_seconds\": ");
                put_number(&b, g->remap_seconds);
                put(&b, ", \"kernels\": %u, \"fused\": %u}", g->remaps, g->remaps_fused);
            }
            put(&b, ",\n     \"nnz\": ");
            put_u64_array(&b, g->nnz, t->nmodes);
            put(&b, ", \"rows\": ");
            put_u64_array(&b, g->rows, t->nmodes);
            put(&b, ",\n     \"mttkrp\": ");
            put_double_array(&b, g->mttkrp, t->nmodes);
            put(&b, ", \"busy\": ");
            put_double_array(&b, g->busy, t->nmodes);
            put(&b, ", \"comm\": ");
            put_double_array(&b, g->comm, t->nmodes);
            put(&b, ", \"exchange\": ");
            put_double_array(&b, g->exchange, t->nmodes);
            put(&b, ", \"idle\": ");
            put_double_array(&b, g->idle, t->nmodes);
            put(&b, ",\n     \"timings\": {");
            for (int p = 0; p < AMP_NPHASES; p++) {
                put(&b, "%s\"%s\": ", p ? ", " : "", phase_names[p]);
                put_number(&b, g->phase[p]);
            }
            put(&b, "}}");
        }
        put(&b, "\n  ]");
    }
    if (r->nprocesses > 0) {
        put(&b, ",\n  \"processes\": [");
        for (unsigned k = 0; k < r->nprocesses; k++) {
            const amp_report_process *q = &r->processes[k];
            uint64_t shards[AMP_MAX_MODES];
            for (unsigned m = 0; m < t->nmodes; m++)
                shards[m] = q->shards[m];
            put(&b, "%s\n    {\"process\": %u, \"host\": ", k ? "," : "", q->process);
            put_string(&b, q->host);
            if (q->gpu >= 0)
                put(&b, ", \"gpu\": %d", q->gpu);
            put(&b, ", \"threads\": %d", q->threads);
            put(&b, ", \"shards\": ");
            put_u64_array(&b, shards, t->nmodes);
            put(&b, ", \"nnz\": ");
            put_u64_array(&b, q->nnz, t->nmodes);
            put(&b, ", \"rows\": ");
            put_u64_array(&b, q->rows, t->nmodes);
            put(&b, ",\n     \"mttkrp\": ");
            put_number(&b, q->mttkrp);
            put(&b, ", \"exchange\": ");
            put_number(&b, q->exchange);
            put(&b, ", \"wait\": ");
            put_number(&b, q->wait);
            put(&b, "}");
        }
        put(&b, "\n  ]");
    }
    put(&b, "\n}\n");
    if (b.failed) {
        free(b.p);
        amp_outfile_abort(of);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the JSON report");
    }
    amp_status rc = amp_outfile_write(of, b.p, b.n, err);
    if (rc == AMP_OK)
        rc = amp_outfile_finish(of, err);
    else
        amp_outfile_abort(of);
    free(b.p);
    return rc;
}
