/* Helpers shared by the C tests: temporary files and tensor comparison. */
#ifndef AMP_TEST_UTIL_H
#define AMP_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "amp_coo.h"

static char test_dir[256];

/* A private directory removed at exit (files inside it too). */
static void test_dir_cleanup(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "# could not remove %s\n", test_dir);
}

static inline const char *test_path(const char *name)
{
    static char buf[4][512];
    static int next;
    if (test_dir[0] == '\0') {
        const char *tmp = getenv("TMPDIR");
        snprintf(test_dir, sizeof test_dir, "%s/amped-test-XXXXXX", tmp ? tmp : "/tmp");
        if (mkdtemp(test_dir) == NULL) {
            perror("mkdtemp");
            exit(99);
        }
        atexit(test_dir_cleanup);
    }
    char *b = buf[next++ % 4];
    snprintf(b, 512, "%s/%s", test_dir, name);
    return b;
}

static inline const char *write_file(const char *name, const void *data, size_t n)
{
    const char *p = test_path(name);
    FILE *f = fopen(p, "wb");
    if (f == NULL || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        perror(p);
        exit(99);
    }
    return p;
}

static inline void set_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* Same modes, dims, nonzeros, indices and bit-identical values. */
static inline int coo_equal(const amp_coo *a, const amp_coo *b)
{
    if (a->nmodes != b->nmodes || a->nnz != b->nnz)
        return 0;
    for (unsigned m = 0; m < a->nmodes; m++)
        if (a->dims[m] != b->dims[m] ||
            memcmp(a->ind[m], b->ind[m], (size_t)a->nnz * sizeof(uint64_t)) != 0)
            return 0;
    return memcmp(a->val, b->val, (size_t)a->nnz * sizeof(double)) == 0;
}

static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

#endif
