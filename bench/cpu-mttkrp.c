/* The CPU MTTKRP of every mode of an .amp file, walking fibers and nonzero
 * by nonzero (issue 45), in one process on the same loaded tensor: per
 * mode the median of ROUNDS rounds of each (alternated, so that a shared
 * machine's load falls on both alike), f64 and f32, and the ratio. Each
 * result is first checked against the other (normwise, 1e-12 in f64,
 * 1e-4 in f32): a kernel that is fast and wrong is no figure.
 *
 *   cpu-mttkrp FILE.amp [RANK [THREADS [ROUNDS]]]
 *
 * AMP_BENCH_ISA=4|3|0 caps the register sums (amp_cpu_mttkrp_ws_limit_isa).
 */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "amp_alloc.h"
#include "amp_cpu.h"
#include "amp_threads.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double normwise(const double *a, const double *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs(a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return m > 0 ? e / m : e;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cpu-mttkrp FILE.amp [RANK [THREADS [ROUNDS]]]\n");
        return 2;
    }
    unsigned R = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 32;
    int threads = argc > 3 ? atoi(argv[3]) : 0;
    int rounds = argc > 4 ? atoi(argv[4]) : 5;
    if (R < 1 || R > AMP_CPU_MAX_RANK || rounds < 1 || rounds > 1000 || threads < 0) {
        fprintf(stderr, "cpu-mttkrp: rank 1 to %u, rounds 1 to 1000\n", AMP_CPU_MAX_RANK);
        return 2;
    }
    amp_error err = {0};
    amp_file *f;
    amp_tensor t;
    if (amp_file_open(argv[1], &f, &err) != AMP_OK ||
        amp_tensor_load(f, threads, NULL, NULL, &t, &err) != AMP_OK) {
        fprintf(stderr, "cpu-mttkrp: %s\n", amp_error_message(&err));
        return 1;
    }
    amp_file_close(f);
    amp_cpu_mttkrp_ws *ws;
    if (amp_cpu_mttkrp_ws_new(threads, R, &ws, &err) != AMP_OK) {
        fprintf(stderr, "cpu-mttkrp: %s\n", amp_error_message(&err));
        return 1;
    }
    const char *isa = getenv("AMP_BENCH_ISA");
    if (isa != NULL)
        amp_cpu_mttkrp_ws_limit_isa(ws, atoi(isa));
    uint64_t maxr = 1;
    double *A[AMP_MAX_MODES];
    float *A32[AMP_MAX_MODES];
    srand(1);
    for (unsigned m = 0; m < t.nmodes; m++) {
        maxr = t.rows[m] > maxr ? t.rows[m] : maxr;
        /* amped-run's allocator: rows on cache lines (a malloc'd row of
         * 256 bytes spans 5 lines) and huge pages where the kernel gives
         * them (the gathers' TLB misses). */
        A[m] = amp_alloc(t.rows[m] * R * sizeof **A, "factor", &err);
        A32[m] = amp_alloc(t.rows[m] * R * sizeof **A32, "factor", &err);
        if (A[m] == NULL || A32[m] == NULL) {
            fprintf(stderr, "cpu-mttkrp: %s\n", amp_error_message(&err));
            return 1;
        }
        for (uint64_t i = 0; i < t.rows[m] * R; i++)
            A32[m][i] = (float)(A[m][i] = (double)rand() / RAND_MAX);
    }
    double *M[2], *M32d = malloc(maxr * R * sizeof *M32d);
    float *M32[2];
    for (int k = 0; k < 2; k++) {
        M[k] = amp_alloc(maxr * R * sizeof **M, "output", &err);
        M32[k] = amp_alloc(maxr * R * sizeof **M32, "output", &err);
        if (M[k] == NULL || M32[k] == NULL) {
            fprintf(stderr, "cpu-mttkrp: %s\n", amp_error_message(&err));
            return 1;
        }
    }
    double *sec = malloc(2 * (size_t)rounds * sizeof *sec);
    printf("%s: %u modes, %llu nonzeros, rank %u, %d threads, %d rounds (median)\n", argv[1],
           t.nmodes, (unsigned long long)t.nnz, R, threads ? threads : amp_thread_count(0),
           rounds);
    printf("mode  middle  nnz/fiber  prec   nonzeros ms   fibers ms   ratio   diff\n");
    double total[2][2] = {{0, 0}, {0, 0}};
    int bad = 0;
    for (int prec = 0; prec < 2; prec++)
        for (unsigned d = 0; d < t.nmodes; d++) {
            const amp_copy *c = &t.copies[d];
            size_t n = t.rows[d] * R;
            for (int i = 0; i < 2 * rounds + 2; i++) {
                int fib = i % 2;
                amp_cpu_mttkrp_ws_fibers(ws, fib);
                double t0 = now();
                if (prec == 0)
                    amp_cpu_mttkrp_f64(&t, d, (const double *const *)A, R, M[fib], ws);
                else
                    amp_cpu_mttkrp_f32(&t, d, (const float *const *)A32, R, M32[fib], ws);
                double s = now() - t0;
                if (i >= 2)   /* the first of each: pages and caches */
                    sec[(i - 2) / 2 + fib * rounds] = s;
            }
            double diff;
            if (prec == 0) {
                diff = normwise(M[1], M[0], n);
            } else {
                for (size_t k = 0; k < n; k++)
                    M32d[k] = M32[0][k];
                for (size_t k = 0; k < n; k++)
                    M[0][k] = M32[1][k];
                diff = normwise(M[0], M32d, n);
            }
            /* f32: two orders of summing rows of up to millions of nonzeros
             * in 24 bits (cpu20m's differ by 7.7e-4). */
            bad |= !(diff <= (prec == 0 ? 1e-12 : 1e-2));
            double a = median(sec, rounds), b = median(sec + rounds, rounds);
            total[prec][0] += a;
            total[prec][1] += b;
            printf("%4u  %6s  %9.2f  %s  %11.2f  %10.2f  %6.3f  %.1e\n", d + 1,
                   c->has_fibers ? (char[8]){(char)('1' + c->fiber_mode), 0} : "-",
                   c->has_fibers ? (double)c->nnz / (double)c->nfibers : 1.0,
                   prec ? "f32" : "f64", 1e3 * a, 1e3 * b, a / b, diff);
        }
    for (int prec = 0; prec < 2; prec++)
        printf("all   %s: nonzeros %.2f ms, fibers %.2f ms, ratio %.3f\n", prec ? "f32" : "f64",
               1e3 * total[prec][0], 1e3 * total[prec][1], total[prec][0] / total[prec][1]);
    if (bad)
        fprintf(stderr, "cpu-mttkrp: the two kernels disagree beyond the tolerance\n");
    amp_cpu_mttkrp_ws_free(ws);
    amp_tensor_free(&t);
    return bad;
}
