/* amped-gen: deterministic synthetic power-law tensors for tests and benchmarks.
 *
 * Each mode's indices follow a bounded power law: rank r in [0, D) drawn
 * by inverting the CDF of the continuous density x^-s on [1, D+1), which
 * is the bounded Zipf law up to discretisation; ranks are then spread over
 * the index space by an affine permutation (a*r + b mod D, gcd(a, D) = 1),
 * so hot slices are not all at the start. Every draw comes from a counter
 * based generator keyed by (seed, nonzero, mode), so the output is the same
 * for any number of threads. Coordinates may repeat, as in real data;
 * amped-prep sums repeats by default. */
#include <config.h>

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_cli.h"
#include "amp_log.h"
#include "amp_parse.h"
#include "amp_coo.h"
#include "amp_timer.h"

#define PROGRAM "amped-gen"

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Uniform in (0, 1]: 53 random bits, never 0 (the inverse CDF needs u > 0). */
static double uniform01(uint64_t key)
{
    return (double)((splitmix64(key) >> 11) + 1) * 0x1.0p-53;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

typedef struct mode_law {
    uint64_t dim, mul, add;
    double s, span;   /* span = (D+1)^(1-s) - 1 for s != 1, log(D+1) for s == 1 */
} mode_law;

static uint64_t draw(const mode_law *law, double u)
{
    double x = law->s == 1.0 ? exp(u * law->span) : pow(1.0 + u * law->span, 1.0 / (1.0 - law->s));
    uint64_t r = (uint64_t)x - 1;     /* x in [1, D+1) -> rank in [0, D) */
    if (r >= law->dim)
        r = law->dim - 1;
    return (uint64_t)(((unsigned __int128)r * law->mul + law->add) % law->dim);
}

static void usage(void)
{
    printf("Usage: amped-gen [OPTION]... -o OUT.tns|OUT.bin --nnz N --dims D1,D2,...\n"
           "Write a synthetic sparse tensor whose indices follow a bounded power law.\n"
           "\n"
           "  -o, --output=FILE     .tns (FROSTT text) or .bin (FROSTT binary v1)\n"
           "  -n, --nnz=N           nonzero entries to draw (repeats are possible)\n"
           "  -d, --dims=D1,D2,...  dimensions, 2 to %d modes\n"
           "  -s, --exponent=S      power-law exponent, 0 (uniform) to 4 (default: 1.2)\n"
           "      --seed=N          random seed (default: 1)\n"
           "      --values=KIND     real (uniform in (0,1], 6 decimals), counts\n"
           "                        (integers 1 to 10) or ones (1 a draw: amped-prep's\n"
           "                        sum of repeats makes each value the number of\n"
           "                        draws that hit it, as count data arise) (default: real)\n"
           "  -h, --help            display this help and exit\n"
           "  -V, --version         output version information and exit\n",
           AMP_MAX_MODES);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"nnz", required_argument, NULL, 'n'},
        {"dims", required_argument, NULL, 'd'},
        {"exponent", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'S'},
        {"values", required_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    static const char *const value_kinds[] = {"real", "counts", "ones", NULL};
    const char *output = NULL;
    uint64_t nnz = 0, seed = 1, dims[AMP_MAX_MODES];
    size_t nmodes = 0;
    double s = 1.2;
    int values = 0, c;   /* index in value_kinds */
    amp_error err = {0};
    argv[0] = (char *)PROGRAM;   /* getopt's own messages use it */
    while ((c = getopt_long(argc, argv, "o:n:d:s:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case 'n':
            if (amp_parse_u64(optarg, 1, (uint64_t)1 << 40, "--nnz", &nnz, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case 'd':
            if (amp_parse_u64_list(optarg, AMP_MAX_MODES, 1, AMP_MAX_INDEX, "--dims", dims,
                                   &nmodes, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case 's':
            if (amp_parse_double(optarg, 0, 4, "--exponent", &s, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case 'S':
            if (amp_parse_u64(optarg, 0, UINT64_MAX, "--seed", &seed, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case 'v':
            if (amp_parse_choice(optarg, value_kinds, "--values", &values, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case 'h': usage(); return EXIT_SUCCESS;
        case 'V': printf("amped-gen (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return 0;
        default:
            fprintf(stderr, "Try 'amped-gen --help' for more information.\n");
            return AMP_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return amp_usage_error(PROGRAM, "unexpected operand '%s'", argv[optind]);
    if (!output || !nnz || nmodes < 2)
        return amp_usage_error(PROGRAM, "-o, --nnz and --dims (at least 2 modes) are required");
    int bin = amp_has_suffix(output, ".bin");
    if (!bin && !amp_has_suffix(output, ".tns"))
        return amp_usage_error(PROGRAM, "name the output .tns or .bin");
    amp_log_init("amped-gen", AMP_LOG_INFO);

    mode_law law[AMP_MAX_MODES];
    for (size_t m = 0; m < nmodes; m++) {
        law[m].dim = dims[m];
        law[m].s = s;
        law[m].span = s == 1.0 ? log((double)dims[m] + 1)
                               : pow((double)dims[m] + 1, 1.0 - s) - 1.0;
        /* A multiplier near the golden ratio of D scatters neighbours far apart. */
        uint64_t a = (uint64_t)((double)dims[m] * 0.6180339887) | 1;
        a += splitmix64(seed ^ (m * 0x5851f42d4c957f2dULL)) % 1024 * 2;
        if (a == 0) a = 1;
        while (gcd_u64(a % dims[m] ? a % dims[m] : 1, dims[m]) != 1) a += 2;
        law[m].mul = dims[m] == 1 ? 1 : a % dims[m];
        law[m].add = splitmix64(seed + m + 17) % dims[m];
    }

    amp_coo t;
    if (amp_coo_init(&t, (unsigned)nmodes, &err) || amp_coo_reserve(&t, nnz, &err)) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    double t0 = amp_now();
    const uint64_t key0 = splitmix64(seed);
    #pragma omp parallel for schedule(static)
    for (uint64_t k = 0; k < nnz; k++) {
        uint64_t key = key0 + k * (uint64_t)(nmodes + 1) * 0x9e3779b97f4a7c15ULL;
        for (size_t m = 0; m < nmodes; m++)
            t.ind[m][k] = draw(&law[m], uniform01(key + m));
        double u = uniform01(key + nmodes);
        t.val[k] = values == 2 ? 1.0
                 : values == 1 ? (double)(1 + (uint64_t)(u * 10 - 1e-12))
                               : fmax(1e-6, round(u * 1e6) / 1e6);
    }
    t.nnz = nnz;
    memcpy(t.dims, dims, nmodes * sizeof *dims);
    amp_status rc = bin ? amp_write_bin(&t, output, 0, &err) : amp_write_tns(&t, output, 0, &err);
    amp_coo_free(&t);
    if (rc != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    amp_log(AMP_LOG_INFO, "wrote %s: %" PRIu64 " nonzeros, %zu modes, exponent %g, seed %" PRIu64
            " (%.2f s)", output, nnz, nmodes, s, seed, amp_now() - t0);
    return EXIT_SUCCESS;
}
