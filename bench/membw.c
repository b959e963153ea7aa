/* STREAM-style triad (a = b + s c) on every thread: the memory bandwidth
 * the MTTKRP's bytes floor is measured against. Bytes counted as STREAM
 * does: two arrays read, one written, 24 bytes per element.
 *
 * Usage: bench/membw [MiB per array, default 256] */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "amp_timer.h"

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    size_t n = mib * 1024 * 1024 / sizeof(double);
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (a == NULL || b == NULL || c == NULL || n == 0) {
        fprintf(stderr, "membw: cannot allocate 3 x %zu MiB\n", mib);
        return 1;
    }
    long long nn = (long long)n;
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < nn; i++) {
        a[i] = 0;
        b[i] = 1;
        c[i] = 2;
    }
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = amp_now();
#pragma omp parallel for schedule(static)
        for (long long i = 0; i < nn; i++)
            a[i] = b[i] + 3.0 * c[i];
        double t = amp_now() - t0;
        best = t < best ? t : best;
    }
    printf("%.2f\n", 24.0 * (double)n / best / 1e9);
    free(a);
    free(b);
    free(c);
    return 0;
}
