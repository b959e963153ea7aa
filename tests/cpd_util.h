/* Helpers shared by the tests of the solver backends (CPU and GPU):
 * random tensors, an .amp file built and loaded back, error measures. */
#ifndef AMP_CPD_UTIL_H
#define AMP_CPD_UTIL_H

#include <dirent.h>
#include <math.h>

#include "amp_build.h"
#include "amp_cpu.h"
#include "test_util.h"

typedef struct shape {
    const char *name;
    unsigned nmodes;
    uint64_t dims[8];
    uint64_t nnz;
    int skew;
} shape;

static inline void random_tensor(const shape *s, uint64_t seed, amp_coo *t)
{
    amp_error err = {0};
    if (amp_coo_init(t, s->nmodes, &err) || amp_coo_reserve(t, s->nnz, &err))
        exit(99);
    for (unsigned m = 0; m < s->nmodes; m++)
        t->dims[m] = s->dims[m];
    for (uint64_t k = 0; k < s->nnz; k++) {
        for (unsigned m = 0; m < s->nmodes; m++) {
            uint64_t r = rng_next(&seed);
            if (s->skew) {
                double u = (double)(r >> 11) / 9007199254740992.0;
                t->ind[m][k] = (uint64_t)((double)s->dims[m] * u * u * u * u);
                if (t->ind[m][k] >= s->dims[m])
                    t->ind[m][k] = s->dims[m] - 1;
            } else {
                t->ind[m][k] = r % s->dims[m];
            }
        }
        t->val[k] = (double)(rng_next(&seed) >> 11) / 9007199254740992.0 - 0.25;
    }
    t->nnz = s->nnz;
}

static inline void copy_tensor(const amp_coo *a, amp_coo *b)
{
    amp_error err = {0};
    if (amp_coo_init(b, a->nmodes, &err) || amp_coo_reserve(b, a->nnz ? a->nnz : 1, &err))
        exit(99);
    for (unsigned m = 0; m < a->nmodes; m++) {
        b->dims[m] = a->dims[m];
        memcpy(b->ind[m], a->ind[m], a->nnz * 8);
    }
    memcpy(b->val, a->val, a->nnz * 8);
    b->nnz = a->nnz;
}

/* Write t (kept) as an .amp file and load it back; with keep, the file
 * stays open there (the copies' shard tables point into it). */
static inline int prepare_open(const amp_coo *t, const char *name, uint32_t shards,
                               uint64_t chunk_nnz, amp_tensor *out, amp_file **keep)
{
    amp_coo work;
    amp_build_opts o;
    amp_error err = {0};
    amp_file *f = NULL;
    copy_tensor(t, &work);
    amp_build_opts_init(&o);
    o.shards = shards;
    o.chunk_nnz = chunk_nnz;
    const char *path = test_path(name);
    amp_status rc = amp_build_write(&work, path, &o, NULL, &err);
    amp_coo_free(&work);
    if (rc == AMP_OK)
        rc = amp_file_open(path, &f, &err);
    if (rc == AMP_OK)
        rc = amp_tensor_load(f, 0, NULL, NULL, out, &err);
    if (keep && rc == AMP_OK)
        *keep = f;
    else
        amp_file_close(f);
    if (rc != AMP_OK)
        diag("%s: %s", name, amp_error_message(&err));
    return rc == AMP_OK;
}

static inline int prepare(const amp_coo *t, const char *name, uint32_t shards, uint64_t chunk_nnz,
                          amp_tensor *out)
{
    return prepare_open(t, name, shards, chunk_nnz, out, NULL);
}

/* A tensor of $AMP_TEST_DATA read from path and prepared as amp_name in
 * 16 shards and chunks of 4096 (rows cross chunk boundaries); with keep,
 * the file stays open there. x and t are the caller's to free on success;
 * on failure nothing is left and a diag line says why. */
static inline int read_prepared(const char *path, const char *amp_name, amp_coo *x,
                                amp_tensor *t, amp_file **keep)
{
    amp_read_opts ro;
    amp_read_opts_init(&ro);
    amp_error err = {0};
    if (amp_read_tensor(path, &ro, x, NULL, &err) != AMP_OK) {
        diag("%s: %s", path, amp_error_message(&err));
        return 0;
    }
    if (!prepare_open(x, amp_name, 16, 4096, t, keep)) {
        amp_coo_free(x);
        return 0;
    }
    return 1;
}

/* Largest entry error over largest reference entry; NaN when any entry of
 * a or b is NaN (a plain max would skip it: every comparison with NaN is
 * false). */
static inline double rel_diff(const double *a, const double *b, uint64_t n)
{
    double diff = 0, scale = 0;
    for (uint64_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]);
        if (isnan(e))
            return NAN;
        diff = e > diff ? e : diff;
        scale = fabs(b[i]) > scale ? fabs(b[i]) : scale;
    }
    return scale > 0 ? diff / scale : diff;
}

static inline double *random_matrix(uint64_t rows, unsigned R, uint64_t seed)
{
    double *A = malloc((rows * R + 1) * sizeof *A);
    for (uint64_t i = 0; i < rows * R; i++)
        A[i] = (double)(rng_next(&seed) >> 11) / 9007199254740992.0 - 0.3;
    return A;
}

/* fn(path, file name, ctx) for every .tns in $AMP_TEST_DATA (fn NULL:
 * only count them); returns how many there are. */
static inline int for_each_shared_tensor(void (*fn)(const char *path, const char *name, void *ctx),
                                         void *ctx)
{
    const char *dir = getenv("AMP_TEST_DATA");
    DIR *dp = dir ? opendir(dir) : NULL;
    struct dirent *e;
    int n = 0;
    while (dp && (e = readdir(dp)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".tns") != 0)
            continue;
        n++;
        if (fn) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            fn(path, e->d_name, ctx);
        }
    }
    if (dp)
        closedir(dp);
    return n;
}

#endif
