/* The GPU MTTKRP kernel on a prepared tensor: checked against the CPU's f64
 * reference (mode by mode), then timed, f64 and f32, resident.
 *
 * Usage: bench/gpu-mttkrp FILE.amp [RANK (32)] [ROUNDS (20)]
 * Env:   AMP_BENCH_CHECK=0 skips the CPU reference (errors print as nan)
 *        AMP_BENCH_ORDER=next reorders each row's nonzeros (which the format
 *        leaves free) by the next mode's index, then the one after: issue
 *        28's order lever, for copies of one BLCO block (64 index bits at most)
 *        AMP_BENCH_FIBERS=1 runs the kernel over fibers (mttkrp_fibers.cu,
 *        issue 45) on the copies that have a fiber level: run it beside a
 *        run without, in one job, for the before and after
 * Prints one line per precision: seconds per MTTKRP of each mode, all
 * modes, and the bandwidth over the bytes each MTTKRP must move at the
 * least (the copy once, every factor once). */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_core.h"
#include "amp_timer.h"
#include "amp_cuda.h"

/* A nonzero while its row is sorted: its order key, word and value bits. */
typedef struct {
    uint64_t key, word, val;
} order_item;

static int order_cmp(const void *a, const void *b)
{
    const order_item *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* The copy's nonzeros as a multiset, word with value (vs bytes): the
 * reference MTTKRP runs on the reordered copy too, so it would not see a
 * pair torn. */
static uint64_t pairs_hash(const amp_copy *c, size_t vs)
{
    uint64_t h = 0;
    for (uint64_t k = 0; k < c->nnz; k++) {
        uint64_t v = 0;
        memcpy(&v, (const char *)c->vals + k * vs, vs);
        h += (c->words[k] * 0x9e3779b97f4a7c15ull) ^ (v * 0xc2b2ae3d27d4eb4full);
    }
    return h;
}

/* Copy d's nonzeros of each row sorted by the next mode's index, then the
 * next after it (a row's order is free: amped(5)); 0, or 1 where the copy
 * has more than one block (its fields need a key per nonzero), memory ran
 * out or the nonzeros are not the same set after. */
static int order_rows(amp_tensor *t, unsigned d)
{
    amp_copy *c = &t->copies[d];
    const amp_mode_layout *l = &c->layout;
    if (c->nblocks > 1)
        return 1;
    const uint64_t key = c->nblocks ? c->block_key[0] : 0;
    const size_t vs = amp_value_size(t->value_type);
    const uint64_t before = pairs_hash(c, vs);
    uint64_t begin = 0;
    while (begin < c->nnz) {
        const uint64_t row = amp_blco_field(key, c->words[begin], l->shift[d], l->width[d]);
        uint64_t end = begin + 1;
        while (end < c->nnz &&
               amp_blco_field(key, c->words[end], l->shift[d], l->width[d]) == row)
            end++;
        if (end - begin > 1) {
            order_item *it = malloc((end - begin) * sizeof *it);
            if (it == NULL)
                return 1;
            for (uint64_t k = begin; k < end; k++) {
                uint64_t o = 0;
                for (unsigned j = 1; j < t->nmodes; j++) {
                    const unsigned m = (d + j) % t->nmodes;
                    o = (o << l->width[m]) | amp_blco_field(key, c->words[k], l->shift[m],
                                                            l->width[m]);
                }
                it[k - begin].key = o;
                it[k - begin].word = c->words[k];
                it[k - begin].val = 0;
                memcpy(&it[k - begin].val, (char *)c->vals + k * vs, vs);
            }
            qsort(it, end - begin, sizeof *it, order_cmp);
            for (uint64_t k = begin; k < end; k++) {
                c->words[k] = it[k - begin].word;
                memcpy((char *)c->vals + k * vs, &it[k - begin].val, vs);
            }
            free(it);
        }
        begin = end;
    }
    return pairs_hash(c, vs) != before;
}

static double rel_diff(const double *a, const double *b, uint64_t n)
{
    double diff = 0, scale = 0;
    for (uint64_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]);
        diff = e > diff || isnan(e) ? e : diff;
        scale = fabs(b[i]) > scale ? fabs(b[i]) : scale;
    }
    return scale > 0 ? diff / scale : diff;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gpu-mttkrp FILE.amp [RANK] [ROUNDS]\n");
        return 2;
    }
    unsigned R = argc > 2 ? (unsigned)atoi(argv[2]) : 32;
    unsigned rounds = argc > 3 ? (unsigned)atoi(argv[3]) : 20;
    amp_error err = {0};
    amp_file *f = NULL;
    amp_tensor t;
    amp_cpd c;
    amp_gpu_tensor *g = NULL;
    if (amp_file_open(argv[1], &f, &err) != AMP_OK ||
        amp_tensor_load(f, 0, NULL, NULL, &t, &err) != AMP_OK) {
        fprintf(stderr, "gpu-mttkrp: %s\n", amp_error_message(&err));
        return 1;
    }
    const char *order_env = getenv("AMP_BENCH_ORDER");
    if (order_env && strcmp(order_env, "next") == 0) {
        double t0 = amp_now();
        for (unsigned d = 0; d < t.nmodes; d++)
            if (order_rows(&t, d)) {
                fprintf(stderr, "gpu-mttkrp: AMP_BENCH_ORDER: mode %u's copy has several "
                                "blocks, or no memory, or its nonzeros changed\n", d + 1);
                return 1;
            }
        printf("rows ordered by the next modes' indices: %.1f s\n", amp_now() - t0);
    }
    if (amp_cpd_init_random(&t, R, 1, &c, &err) != AMP_OK ||
        amp_gpu_tensor_upload(0, &t, 0, &g, &err) != AMP_OK) {
        fprintf(stderr, "gpu-mttkrp: %s\n", amp_error_message(&err));
        return 1;
    }
    /* The first upload paid for the CUDA context: time a second one. */
    amp_gpu_tensor_free(g);
    g = NULL;
    double t0 = amp_now();
    if (amp_gpu_tensor_upload(0, &t, 0, &g, &err) != AMP_OK) {
        fprintf(stderr, "gpu-mttkrp: %s\n", amp_error_message(&err));
        return 1;
    }
    double up = amp_now() - t0;
    printf("upload of the resident tensor: %.3f s, %.1f GB/s (from pageable memory)\n", up,
           (double)amp_gpu_tensor_bytes(g) / up / 1e9);
    const char *fibers_env = getenv("AMP_BENCH_FIBERS");
    if (fibers_env && strcmp(fibers_env, "1") == 0) {
        int any = amp_gpu_tensor_fibers(g, 1);
        printf("the MTTKRP over fibers: %s", any ? "on, middle modes" : "no copy has fibers");
        for (unsigned d = 0; d < t.nmodes && any; d++)
            printf(" %s", t.copies[d].has_fibers ? (char[8]){(char)('1' + t.copies[d].fiber_mode), 0}
                                                 : "-");
        printf("\n");
    }
    uint64_t maxr = 1;
    for (unsigned m = 0; m < t.nmodes; m++)
        maxr = t.rows[m] > maxr ? t.rows[m] : maxr;
    /* The CPU reference is single-threaded and, on rd100m, longer than
     * everything else here (bench/RESULTS.md, issue 28): one per mode,
     * shared by both precisions; AMP_BENCH_CHECK=0 skips it (under a
     * profiler, on a build an earlier run checked: errors print as nan). */
    double *ref[AMP_MAX_MODES] = {0}, *M = malloc(maxr * R * sizeof *M);
    const char *check_env = getenv("AMP_BENCH_CHECK");
    const int check = !(check_env && strcmp(check_env, "0") == 0);
    int status = M == NULL;
    t0 = amp_now();
    for (unsigned d = 0; d < t.nmodes && !status && check; d++) {
        ref[d] = malloc(t.rows[d] * R * sizeof *ref[d]);
        status = ref[d] == NULL ||
                 amp_mttkrp_reference(&t, d, d, (const double *const *)c.A, R, ref[d], &err) !=
                     AMP_OK;
    }
    if (status) {
        fprintf(stderr, "gpu-mttkrp: %s\n", err.status != AMP_OK ? amp_error_message(&err)
                                                                 : "out of memory");
        return 1;
    }
    if (check)
        printf("CPU reference, every mode: %.1f s\n", amp_now() - t0);
    printf("%s: %llu nonzeros, rank %u, %zu bytes resident; copies gapless:", argv[1],
           (unsigned long long)t.nnz, R, amp_gpu_tensor_bytes(g));
    /* A copy that is not gapless pays a memset of its rows in every
     * timed MTTKRP. */
    for (unsigned d = 0; d < t.nmodes; d++)
        printf(" %s", amp_gpu_tensor_gapless(g, d) ? "yes" : "no");
    printf("\n");
    for (int f32 = 0; f32 < 2; f32++) {
        double worst = 0, sec[AMP_MAX_MODES], total = 0;
        for (unsigned d = 0; d < t.nmodes; d++) {
            if (amp_gpu_mttkrp_host(g, (const double *const *)c.A, R, f32, d, M, 0, NULL,
                                    &err) != AMP_OK) {
                fprintf(stderr, "gpu-mttkrp: %s\n", amp_error_message(&err));
                return 1;
            }
            double e = check ? rel_diff(M, ref[d], t.rows[d] * R) : NAN;
            worst = e > worst || isnan(e) ? e : worst;
        }
        if (amp_gpu_mttkrp_host(g, (const double *const *)c.A, R, f32, 0, NULL, rounds, sec,
                                &err) != AMP_OK) {
            fprintf(stderr, "gpu-mttkrp: %s\n", amp_error_message(&err));
            return 1;
        }
        double bytes = amp_mttkrp_min_bytes(&t, R, f32 ? 4 : 8);
        printf("%s: max rel err %.2e (tolerance %.0e);", f32 ? "f32" : "f64", worst,
               f32 ? 1e-4 : 1e-12);
        for (unsigned d = 0; d < t.nmodes; d++) {
            printf(" mode %u %.3f ms (%.0f GB/s)", d + 1, sec[d] * 1e3, bytes / sec[d] / 1e9);
            total += sec[d];
        }
        printf("; all modes %.3f ms\n", total * 1e3);
        if (check && !(worst <= (f32 ? 1e-4 : 1e-12)))
            status = 1;
    }
    for (unsigned d = 0; d < t.nmodes; d++)
        free(ref[d]);
    free(M);
    amp_gpu_tensor_free(g);
    amp_cpd_free(&c);
    amp_tensor_free(&t);
    amp_file_close(f);
    return status;
}
