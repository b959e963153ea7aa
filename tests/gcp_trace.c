/* GCP-Adam's steps with their samples written out, for an independent
 * reference (tests/gcp_check.py adam, run by tests/run_gcp.sh): amped's
 * sampler draws each step's cells, and this writes them beside the start
 * and the end of amp_cpu_gcp_steps (the steps amp_cpu_gcp takes), so that
 * NumPy recomputes every gradient and Adam step (dense or lazy) from the
 * same cells alone.
 *
 *     gcp_trace TENSOR.amp RANK LOSS SEED STEPS NONZEROS ZEROS RATE dense|lazy DIR
 *
 * writes in DIR (text, %.17g): start.modeN.txt, the random start (values
 * in [0.1, 0.6), rows in amped's compact order); samples.txt, one line a
 * sample: step (from 1), its compact row in each mode, the value and the
 * stratum's weight; end.modeN.txt, m.modeN.txt and v.modeN.txt, the
 * factors and Adam's moments after the last step. LOSS by name; the
 * factors kept at least the loss's lower bound. Exit 0, or 1 with a line
 * on stderr. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_cpu.h"
#include "amped_format.h"

static int write_matrix(const char *dir, const char *name, unsigned m, const double *a,
                        uint64_t rows, unsigned R)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.mode%u.txt", dir, name, m + 1);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return 0;
    for (uint64_t i = 0; i < rows; i++)
        for (unsigned r = 0; r < R; r++)
            fprintf(f, "%.17g%c", a[i * R + r], r + 1 < R ? ' ' : '\n');
    return fclose(f) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 11) {
        fprintf(stderr, "usage: gcp_trace TENSOR.amp RANK LOSS SEED STEPS NONZEROS ZEROS RATE "
                        "dense|lazy DIR\n");
        return 1;
    }
    const unsigned R = (unsigned)strtoul(argv[2], NULL, 10);
    const uint64_t seed = strtoull(argv[4], NULL, 10);
    const unsigned steps = (unsigned)strtoul(argv[5], NULL, 10);
    const uint64_t snz = strtoull(argv[6], NULL, 10), sz = strtoull(argv[7], NULL, 10);
    const double rate = strtod(argv[8], NULL);
    const amp_gcp_adam adam = strcmp(argv[9], "lazy") == 0 ? AMP_GCP_ADAM_LAZY
                                                           : AMP_GCP_ADAM_DENSE;
    const char *dir = argv[10];
    int loss = -1;
    for (int k = 0; k < AMP_GCP_NLOSSES; k++)
        if (strcmp(argv[3], amp_gcp_loss_names[k]) == 0)
            loss = k;
    if (R == 0 || steps == 0 || loss < 0 || !(rate > 0)) {
        fprintf(stderr, "gcp_trace: bad arguments\n");
        return 1;
    }
    amp_error err = {0};
    amp_file *f = NULL;
    amp_tensor t;
    amp_gcp_source src;
    memset(&t, 0, sizeof t);
    memset(&src, 0, sizeof src);
    if (amp_file_open(argv[1], &f, &err) != AMP_OK || amp_tensor_load(f, 0, NULL, NULL, &t, &err) ||
        amp_gcp_source_build(&t, 0, &src, &err) != AMP_OK) {
        fprintf(stderr, "gcp_trace: %s\n", amp_error_message(&err));
        return 1;
    }
    const amp_gcp_view *v = &src.view;
    const unsigned N = v->nmodes;
    double *A[AMP_MAX_MODES], *M[AMP_MAX_MODES], *V[AMP_MAX_MODES];
    uint64_t state = seed ^ 0x5eed;
    for (unsigned m = 0; m < N; m++) {
        A[m] = calloc(v->rows[m] * R + 1, sizeof(double));
        M[m] = calloc(v->rows[m] * R + 1, sizeof(double));
        V[m] = calloc(v->rows[m] * R + 1, sizeof(double));
        if (A[m] == NULL || M[m] == NULL || V[m] == NULL)
            return 1;
        for (uint64_t i = 0; i < v->rows[m] * R; i++)
            A[m][i] = 0.1 + 0.5 * (double)(amp_gcp_mix(state++) >> 11) / 9007199254740992.0;
        if (!write_matrix(dir, "start", m, A[m], v->rows[m], R)) {
            fprintf(stderr, "gcp_trace: %s: %s\n", dir, strerror(errno));
            return 1;
        }
    }
    amp_gcp_batch *b = calloc(steps, sizeof *b);
    char path[4096];
    snprintf(path, sizeof path, "%s/samples.txt", dir);
    FILE *out = fopen(path, "w");
    if (b == NULL || out == NULL)
        return 1;
    for (unsigned s = 0; s < steps; s++) {
        b[s] = (amp_gcp_batch){amp_gcp_step_key(seed, 1 + s), snz, sz,
                               (double)v->nnz / (double)(snz ? snz : 1),
                               (double)(v->cells - v->nnz) / (double)(sz ? sz : 1)};
        for (uint64_t j = 0; j < snz + sz; j++) {
            uint64_t rows[AMP_MAX_MODES];
            double x;
            if (amp_gcp_sample(v, b[s].key, j, snz, rows, &x)) {
                fprintf(stderr, "gcp_trace: no absent cell found\n");
                return 1;
            }
            fprintf(out, "%u", s + 1);
            for (unsigned m = 0; m < N; m++)
                fprintf(out, " %llu", (unsigned long long)rows[m]);
            fprintf(out, " %.17g %.17g\n", x, j < snz ? b[s].wnz : b[s].wz);
        }
    }
    if (fclose(out) != 0)
        return 1;
    if (amp_cpu_gcp_steps(v, A, M, V, R, (amp_gcp_loss)loss, AMP_GCP_HUBER_DELTA_DEFAULT, adam, b,
                          steps, 0, rate, amp_gcp_lower_bound(loss), &err) != AMP_OK) {
        fprintf(stderr, "gcp_trace: %s\n", amp_error_message(&err));
        return 1;
    }
    for (unsigned m = 0; m < N; m++)
        if (!write_matrix(dir, "end", m, A[m], v->rows[m], R) ||
            !write_matrix(dir, "m", m, M[m], v->rows[m], R) ||
            !write_matrix(dir, "v", m, V[m], v->rows[m], R))
            return 1;
    for (unsigned m = 0; m < N; m++)
        free(A[m]), free(M[m]), free(V[m]);
    free(b);
    amp_gcp_source_free(&src);
    amp_tensor_free(&t);
    amp_file_close(f);
    return 0;
}
