/* powerlaw-counts: the peers' power-law samples (../shared/baselines/
 * powerlaw-gen.c, which makes rd100m and cpu20m) in count form.
 *
 * The baseline keeps each distinct coordinate once with a hash of the
 * coordinate as its value; count data arise the other way: a coordinate's
 * value is how many samples hit it (Reddit's counts are comments). This
 * program draws the same samples by the same law (bounded Zipf per mode,
 * inverted CDF, affine relabelling, the same counter-based hash), so both
 * tensors have the same nonzero pattern, and writes either the counts or the
 * baseline's own values (`--values hash`, for checking the pattern against
 * the baseline's output). Output sorted by coordinate, as FROSTT files are. */
#include <config.h>

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "amp_cli.h"
#include "amp_coo.h"
#include "amp_log.h"
#include "amp_parse.h"
#include "amp_timer.h"

#define PROGRAM "powerlaw-counts"
#define EMPTY UINT64_MAX

/* The baseline's hash and uniform draw: the samples are defined by them. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static double u01(uint64_t h) { return ((double)(h >> 11) + 0.5) * 0x1.0p-53; }

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

typedef struct { uint64_t key, count; } entry;

static int cmp_entry(const void *a, const void *b)
{
    uint64_t x = ((const entry *)a)->key, y = ((const entry *)b)->key;
    return x < y ? -1 : x > y;
}

static void usage(void)
{
    printf("Usage: powerlaw-counts [OPTION]... OUT.tns|OUT.bin SAMPLES S DIM1 DIM2 ...\n"
           "Draw SAMPLES coordinates as ../shared/baselines/powerlaw-gen does (bounded\n"
           "Zipf law of exponent S > 1 per mode) and write each distinct coordinate once.\n\n"
           "      --values=KIND  counts (how many samples hit the coordinate; default)\n"
           "                     or hash (powerlaw-gen's own values)\n"
           "  -h, --help         display this help and exit\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"values", required_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const kinds[] = {"counts", "hash", NULL};
    int hash = 0;
    amp_error err;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'v':
            if (amp_parse_choice(optarg, kinds, "--values", &hash, &err))
                return amp_usage_error(PROGRAM, err.msg);
            break;
        case 'h':
            usage();
            return EXIT_SUCCESS;
        default:
            fprintf(stderr, "Try '" PROGRAM " --help' for more information.\n");
            return EXIT_FAILURE;
        }
    }
    int nargs = argc - optind;
    if (nargs < 5 || nargs - 3 > AMP_MAX_MODES)
        return amp_usage_error(PROGRAM, "give OUT SAMPLES S and 2 or more dimensions");
    const char *out = argv[optind];
    int bin = amp_has_suffix(out, ".bin");
    if (!bin && !amp_has_suffix(out, ".tns"))
        return amp_usage_error(PROGRAM, "name the output .tns or .bin");
    uint64_t ns, dims[AMP_MAX_MODES], mul[AMP_MAX_MODES], add[AMP_MAX_MODES], stride[AMP_MAX_MODES];
    double s;
    if (amp_parse_u64(argv[optind + 1], 1, (uint64_t)1 << 36, "SAMPLES", &ns, &err) ||
        amp_parse_double(argv[optind + 2], 1.0, 8, "S", &s, &err))
        return amp_usage_error(PROGRAM, err.msg);
    if (s == 1.0)
        return amp_usage_error(PROGRAM, "S must be above 1");
    const unsigned nm = (unsigned)(nargs - 3);
    unsigned __int128 prod = 1;
    for (int k = (int)nm - 1; k >= 0; k--) {
        if (amp_parse_u64(argv[optind + 3 + k], 1, AMP_MAX_INDEX, "DIM", &dims[k], &err))
            return amp_usage_error(PROGRAM, err.msg);
        stride[k] = (uint64_t)prod;
        prod *= dims[k];
        mul[k] = (dims[k] / 2 + 12345) | 1;
        while (gcd_u64(mul[k], dims[k]) != 1)
            mul[k] += 2;
        add[k] = mix((uint64_t)k + 99) % dims[k];
    }
    if (prod > (unsigned __int128)EMPTY)
        return amp_usage_error(PROGRAM, "the dimensions' product must fit in 64 bits");
    amp_log_init(PROGRAM, AMP_LOG_INFO);
    double t0 = amp_now();

    /* Open addressing at load <= 1/2: a slot's key is claimed by CAS, its
     * count added atomically, so threads never lock. */
    uint64_t cap = 2;
    while (cap < 2 * ns)
        cap <<= 1;
    uint64_t *keys = malloc(cap * sizeof *keys), *hits = calloc(cap, sizeof *hits);
    if (!keys || !hits) {
        fprintf(stderr, PROGRAM ": out of memory for %" PRIu64 " slots\n", cap);
        return EXIT_FAILURE;
    }
    #pragma omp parallel for schedule(static)
    for (uint64_t i = 0; i < cap; i++)
        keys[i] = EMPTY;
    #pragma omp parallel for schedule(static)
    for (uint64_t t = 0; t < ns; t++) {
        uint64_t h = mix(t * 0x9E3779B97F4A7C15ULL + 7), key = 0;
        for (unsigned k = 0; k < nm; k++) {
            h = mix(h + k);
            double lo = pow((double)dims[k], 1.0 - s);
            double x = pow((lo - 1.0) * u01(h) + 1.0, 1.0 / (1.0 - s));
            uint64_t i = (uint64_t)x - 1;
            if (i >= dims[k])
                i = dims[k] - 1;
            key += (uint64_t)(((unsigned __int128)mul[k] * i + add[k]) % dims[k]) * stride[k];
        }
        for (uint64_t p = mix(key) & (cap - 1);; p = (p + 1) & (cap - 1)) {
            uint64_t cur = __atomic_load_n(&keys[p], __ATOMIC_RELAXED);
            if (cur == EMPTY) {
                uint64_t expect = EMPTY;
                if (__atomic_compare_exchange_n(&keys[p], &expect, key, 0, __ATOMIC_RELAXED,
                                                __ATOMIC_RELAXED))
                    cur = key;
                else
                    cur = expect;
            }
            if (cur == key) {
                __atomic_fetch_add(&hits[p], 1, __ATOMIC_RELAXED);
                break;
            }
        }
    }
    uint64_t n = 0;
    for (uint64_t i = 0; i < cap; i++)
        if (keys[i] != EMPTY) {   /* n <= i: compaction in place */
            keys[n] = keys[i];
            hits[n++] = hits[i];
        }
    entry *e = malloc((n ? n : 1) * sizeof *e);
    if (!e) {
        fprintf(stderr, PROGRAM ": out of memory for %" PRIu64 " nonzeros\n", n);
        return EXIT_FAILURE;
    }
    #pragma omp parallel for schedule(static)
    for (uint64_t i = 0; i < n; i++) {
        e[i].key = keys[i];
        e[i].count = hits[i];
    }
    free(keys);
    free(hits);

    /* Sorted runs per thread, then one merge: qsort alone takes most of a
     * minute at rd100m's 69 M nonzeros. */
    int nt = 1;
#ifdef _OPENMP
    nt = omp_get_max_threads();
#endif
    uint64_t per = (n + (uint64_t)nt - 1) / (uint64_t)nt;
    #pragma omp parallel for schedule(static, 1)
    for (int r = 0; r < nt; r++) {
        uint64_t b = (uint64_t)r * per, end = b + per > n ? n : b + per;
        if (b < end)
            qsort(e + b, end - b, sizeof *e, cmp_entry);
    }
    amp_coo t;
    if (amp_coo_init(&t, nm, &err) || amp_coo_reserve(&t, n, &err)) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    uint64_t head[1024], sum = 0;
    if (nt > 1024)
        nt = 1024;
    for (int r = 0; r < nt; r++)
        head[r] = (uint64_t)r * per;
    for (uint64_t j = 0; j < n; j++) {
        int best = -1;
        for (int r = 0; r < nt; r++) {
            uint64_t end = (uint64_t)(r + 1) * per > n ? n : (uint64_t)(r + 1) * per;
            if (head[r] < end && (best < 0 || e[head[r]].key < e[head[best]].key))
                best = r;
        }
        const entry *x = &e[head[best]++];
        for (unsigned k = 0; k < nm; k++)
            t.ind[k][j] = x->key / stride[k] % dims[k];
        t.val[j] = hash ? 1.0 - u01(mix(x->key ^ 0x5bd1e995ULL)) : (double)x->count;
        sum += x->count;
    }
    free(e);
    t.nnz = n;
    memcpy(t.dims, dims, nm * sizeof *dims);
    if (sum != ns) {
        fprintf(stderr, PROGRAM ": internal error: %" PRIu64 " hits for %" PRIu64 " samples\n", sum, ns);
        return EXIT_FAILURE;
    }
    amp_status rc = bin ? amp_write_bin(&t, out, 0, &err) : amp_write_tns(&t, out, 0, &err);
    amp_coo_free(&t);
    if (rc != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    amp_log(AMP_LOG_INFO, "wrote %s: %" PRIu64 " samples -> %" PRIu64 " distinct nonzeros (%.2f s)",
            out, ns, n, amp_now() - t0);
    return EXIT_SUCCESS;
}
