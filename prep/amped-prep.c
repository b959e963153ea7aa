/* amped-prep: read a sparse tensor and prepare it for amped-run.
 *
 * It reads FROSTT text or binary (plain, gzip, zstd, stdin), reports the
 * tensor's statistics, converts between .tns and .bin, and writes the .amp
 * shard file that amped-run reads. */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "amp_alloc.h"
#include "amp_build.h"
#include "amp_cli.h"
#include "amp_log.h"
#include "amp_outfile.h"
#include "amp_parse.h"
#include "amp_progress.h"
#include "amp_coo.h"
#include "amp_threads.h"
#include "prep_report.h"
#include "amp_timer.h"

#define PROGRAM "amped-prep"


enum {
    OPT_INPUT_FORMAT = 256,
    OPT_INDEX_BASE,
    OPT_DIMS,
    OPT_DUPLICATES,
    OPT_SHARDS,
    OPT_VALUES,
    OPT_LEVEL,
    OPT_CHUNK_NNZ,
    OPT_STATS,
    OPT_REMAP_STREAMS,
    OPT_NO_SYNC,
    OPT_REPORT,
};

static const struct option long_options[] = {
    /* input */
    {"input-format", required_argument, NULL, OPT_INPUT_FORMAT},
    {"index-base", required_argument, NULL, OPT_INDEX_BASE},
    {"dims", required_argument, NULL, OPT_DIMS},
    {"duplicates", required_argument, NULL, OPT_DUPLICATES},
    /* output */
    {"output", required_argument, NULL, 'o'},
    {"stats", no_argument, NULL, OPT_STATS},
    {"force", no_argument, NULL, 'f'},
    {"no-sync", no_argument, NULL, OPT_NO_SYNC},
    {"report", required_argument, NULL, OPT_REPORT},
    /* .amp layout */
    {"shards", required_argument, NULL, OPT_SHARDS},
    {"values", required_argument, NULL, OPT_VALUES},
    {"level", required_argument, NULL, OPT_LEVEL},
    {"chunk-nnz", required_argument, NULL, OPT_CHUNK_NNZ},
    {"remap-streams", no_argument, NULL, OPT_REMAP_STREAMS},
    /* execution and reporting: -t, -q, -v, -h, -V */
    AMP_CLI_COMMON_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

static void usage(void)
{
    printf("Usage: amped-prep [OPTION]... INPUT\n"
           "Read the sparse tensor INPUT ('-' for standard input), report its statistics\n"
           "and write it as the .amp shard file that amped-run reads (or, with -o, as\n"
           "FROSTT text or binary).\n"
           "\n"
           "Input:\n"
           "      --input-format=FMT   auto, tns or bin (default: auto: FROSTT binary if the\n"
           "                           name ends in .bin, .bin.gz or .bin.zst, else text;\n"
           "                           gzip and Zstandard are recognised by content)\n"
           "      --index-base=BASE    auto, 0 or 1 (default: auto: 1 unless an index 0 is seen)\n"
           "      --dims=D1,D2,...     dimensions (default: the largest index of each mode)\n"
           "      --duplicates=POLICY  sum, keep or error for repeated coordinates\n"
           "                           (default: sum)\n"
           "\n"
           "Output:\n"
           "  -o, --output=FILE        write the tensor to FILE: the .amp shard file for\n"
           "                           amped-run if it ends in .amp, FROSTT text if .tns,\n"
           "                           FROSTT binary v1 if .bin; written to a temporary file\n"
           "                           and renamed when complete (default: INPUT with its\n"
           "                           .tns/.bin and .gz/.zst suffixes replaced by .amp)\n"
           "      --stats              only read INPUT and report; write nothing\n"
           "      --report=FILE        also write a self-contained HTML page of charts:\n"
           "                           each mode's slice degrees and, for .amp output,\n"
           "                           the nonzeros of every shard against the mean\n"
           "                           ('-': standard output, without the statistics)\n"
           "  -f, --force              overwrite an existing output file\n"
           "      --no-sync            .amp output: finish without waiting for the file to\n"
           "                           reach the disk (no fsync): faster, but a system crash\n"
           "                           soon after may leave it damaged, which\n"
           "                           amped-run --verify detects (default: sync)\n"
           "\n"
           ".amp layout:\n"
           "      --shards=N           shards per mode, each owning a disjoint set of output\n"
           "                           rows (default: %d, fewer when a mode has fewer\n"
           "                           nonempty slices)\n"
           "      --chunk-nnz=N        most nonzeros per compressed chunk (default: %llu)\n"
           "      --values=TYPE        auto, f32 or f64 (default: auto: f32 when every value\n"
           "                           is exactly a float, else f64)\n"
           "      --level=N            Zstandard level, -7 to 22; 0 stores sections\n"
           "                           uncompressed (default: %d)\n"
           "      --remap-streams      also store, for each nonzero of each mode copy, its\n"
           "                           position in the next mode's copy (FLYCOO remap IDs;\n"
           "                           4 bytes per nonzero per mode before compression, 8\n"
           "                           from 2^32 nonzeros)\n"
           "\n"
           "Execution:\n"
           "  -t, --threads=N          OpenMP threads (default: %d, all available)\n"
           "  -q, --quiet              no report: print only warnings and errors\n"
           "  -v, --verbose            also print timings and internal details\n"
           "  -h, --help               display this help and exit\n"
           "  -V, --version            output version information and exit\n"
           "\n"
           "Exit status: 0 on success, 1 on a failure, 2 on a usage error.\n"
           "Report bugs: see %s.\n",
           AMP_DEFAULT_SHARDS, (unsigned long long)AMP_DEFAULT_CHUNK_NNZ, AMP_DEFAULT_LEVEL,
           amp_max_threads(), PACKAGE_BUGREPORT);
}

static void version(void)
{
    printf("amped-prep (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
}

/* What the command line asks for. */
typedef struct prep_args {
    amp_cli_common cli;      /* -t, -q, -v, -h, -V */
    amp_read_opts read;
    amp_build_opts build;
    const char *input;       /* as given: "-" is standard input */
    const char *shown;       /* the input as messages name it */
    const char *output;      /* NULL only with --stats */
    const char *report;      /* --report: the HTML page, or NULL */
    const char *amp_only;    /* an option that means something only for .amp output */
    int stats_only, force;
} prep_args;

static const char *const format_names[] = {"auto", "tns", "bin", NULL};
static const char *const base_names[] = {"auto", "0", "1", NULL};
static const char *const dup_names[] = {"sum", "keep", "error", NULL};
static const char *const value_names[] = {"auto", "f32", "f64", NULL};
static const char *const compression_names[] = {"", ", gzip", ", zstd"};

static void print_mode_line(unsigned m, uint64_t dim, uint64_t nonempty, uint64_t max_degree,
                            uint64_t nnz)
{
    printf("mode %-2u     %" PRIu64 " slices, %" PRIu64 " non-empty, largest holds %" PRIu64
           " nonzeros (%.2f%%)\n", m + 1, dim, nonempty, max_degree,
           100.0 * (double)max_degree / (double)nnz);
}

/* The report; the per-mode lines only when s has them (see report_input). */
static void print_stats(const char *path, const amp_coo *t, const amp_coo_stats *s,
                        const amp_read_info *info, int mode_lines)
{
    printf("input:      %s (%s%s, %" PRIu64 " byte%s, %d-based)\n", path,
           info->format == AMP_INPUT_BIN ? "FROSTT binary" : "FROSTT text",
           compression_names[info->compression], info->bytes, amp_plural(info->bytes),
           info->index_base);
    printf("modes:      %u\n", t->nmodes);
    printf("dims:       ");
    for (unsigned m = 0; m < t->nmodes; m++)
        printf("%s%" PRIu64, m ? " x " : "", t->dims[m]);
    printf("\nnonzeros:   %" PRIu64 "\n", t->nnz);
    printf("duplicates: %" PRIu64 "\n", info->duplicates);
    printf("density:    %.4g\n", s->density);
    printf("values:     min %.6g, max %.6g, norm %.6g, explicit zeros %" PRIu64
           ", exact in f32: %s\n", s->val_min, s->val_max, s->norm, s->zeros,
           s->all_f32_exact ? "yes" : "no");
    for (unsigned m = 0; m < t->nmodes && mode_lines; m++)
        print_mode_line(m, t->dims[m], s->nonempty[m], s->max_degree[m], t->nnz);
}

static double program_start;

/* The build's phases as the bar names them (see amp_build_opts.progress).
 * Ordering and writing take turns, once per mode copy, so each phase keeps
 * its own bar: coming back to one goes on where it stopped, its rate and
 * ETA taken over all its turns, which is what the rest of it will take. */
static const struct build_phase {
    const char *phase, *label, *unit;
} build_phases[] = {
    {"values", "values", NULL},
    {"relabel", "relabelling", NULL},
    {"order", "ordering", NULL},
    {"chunks", "writing", "nz"},
    {"commit", "finishing", NULL},
};
#define NPHASES (sizeof build_phases / sizeof build_phases[0])

typedef struct build_bars {
    amp_progress bar[NPHASES];
    int begun[NPHASES];
    int shown;     /* the phase on screen, or -1 */
    int enabled;
} build_bars;

static void build_bars_progress(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
    build_bars *b = ctx;
    size_t i = 0;
    while (i < NPHASES && strcmp(build_phases[i].phase, phase) != 0)
        i++;
    if (i == NPHASES)
        return;   /* a phase added to the library since: no name for it here */
    if ((int)i != b->shown) {
        if (b->shown >= 0)
            amp_progress_end(&b->bar[b->shown]);
        if (!b->begun[i])
            amp_progress_begin(&b->bar[i], build_phases[i].label, build_phases[i].unit, total,
                               b->enabled);
        b->begun[i] = 1;
        b->shown = (int)i;
    }
    amp_progress_update(&b->bar[i], done);
}

/* Erase the bar before anything else is printed. */
static void build_bars_end(build_bars *b)
{
    if (b->shown >= 0)
        amp_progress_end(&b->bar[b->shown]);
    b->shown = -1;
}

/* The report on the .amp file written (without -q). */
static void report_amp(const char *output, const amp_coo *t, const amp_read_info *info,
                       const amp_build_report *r)
{
    char sz[32];
    /* The slice figures come from the build, which computes them anyway. */
    for (unsigned d = 0; d < t->nmodes; d++)
        print_mode_line(d, t->dims[d], r->modes[d].compact_dim, r->modes[d].max_degree,
                        t->nnz);
    printf("output:     %s (%s, %.2f bytes per nonzero per mode copy, values %s)\n", output,
           amp_format_bytes(sz, sizeof sz, r->file_bytes),
           (double)r->file_bytes / (double)t->nnz / t->nmodes,
           r->value_type == AMP_VALUES_F32 ? "f32" : "f64");
    printf("compacted:  ");
    for (unsigned d = 0; d < t->nmodes; d++)
        printf("%s%" PRIu64, d ? " x " : "", r->modes[d].compact_dim);
    printf(" (empty slices dropped)\n");
    for (unsigned d = 0; d < t->nmodes; d++) {
        const amp_build_mode_report *m = &r->modes[d];
        double mean = (double)t->nnz / m->nshards;
        double best = (double)m->max_degree > mean ? (double)m->max_degree / mean : 1.0;
        printf("mode %-2u     %lu shards, largest/mean %.3f, best possible %.3f, %" PRIu64
               " chunks", d + 1, (unsigned long)m->nshards, (double)m->max_shard_nnz / mean, best,
               m->nchunks);
        /* A slice is never split across shards: say when one alone is more
         * than a fair share, since no dealing can then do better. */
        if (best > 1.0)
            printf(" (one slice holds %.2f%% of the nonzeros, more than a shard's fair share "
                   "of %.2f%%)", 100.0 * (double)m->max_degree / (double)t->nnz,
                   100.0 / m->nshards);
        printf("\n");
    }
    double total = amp_now() - program_start;
    printf("time:       read %.2f s, duplicates %.2f s, relabel %.2f s, order %.2f s, "
           "chunks %.2f s, flush %.2f s; %.2f s in all\n", info->seconds_read,
           info->seconds_dedup, r->seconds_relabel, r->seconds_sort, r->seconds_chunks,
           r->seconds_commit, total);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        printf("memory:     peak %s resident (%.1f bytes per nonzero)\n",
               amp_format_bytes(sz, sizeof sz, (uint64_t)ru.ru_maxrss * 1024),
               (double)ru.ru_maxrss * 1024.0 / (double)t->nnz);
}

/* digest: the input's fingerprint, started before the read (finished
 * here whatever happens). */
static amp_status write_amp(amp_digest_job *digest, prep_args *a, amp_coo *t,
                            const amp_read_info *info, amp_build_report *rep, amp_error *err)
{
    amp_build_opts *build = &a->build;
    double t0 = amp_now();
    AMP_CHECK(amp_file_digest_finish(digest, &build->source_size, &build->source_hash, err));
    double digest_wait = amp_now() - t0;
    char params[512];
    amp_build_params(params, sizeof params, build, a->read.duplicates);
    build->params = params;
    const char *base = strrchr(a->shown, '/');
    build->source_name = base ? base + 1 : a->shown;
    build_bars bars = {.shown = -1, .enabled = a->cli.level >= AMP_LOG_INFO};
    build->progress = build_bars_progress;
    build->progress_ctx = &bars;
    amp_status rc = amp_build_write(t, a->output, build, rep, err);
    build_bars_end(&bars);
    build->progress = NULL;   /* bars and params live no longer than this call */
    build->progress_ctx = NULL;
    build->params = NULL;
    if (rc != AMP_OK)
        return rc;
    if (rep->values_changed)
        amp_log(AMP_LOG_WARN, "%" PRIu64 " of %" PRIu64 " values %s not exact in f32 and %s "
                "rounded (--values=f32)", rep->values_changed, t->nnz,
                rep->values_changed == 1 ? "is" : "are",
                rep->values_changed == 1 ? "was" : "were");
    if (a->cli.level < AMP_LOG_INFO)
        return AMP_OK;
    report_amp(a->output, t, info, rep);
    amp_log(AMP_LOG_DEBUG, "waited %.3f s for the source checksum; values %.3f s, build %.3f s",
            digest_wait, rep->seconds_values, amp_now() - t0);
    return AMP_OK;
}

/* Cut the first of the two suffixes that s ends with (and is longer than). */
static void cut_suffix(char *s, const char *a, const char *b)
{
    const char *both[2] = {a, b};
    for (int i = 0; i < 2; i++)
        if (amp_has_suffix(s, both[i]) && strlen(s) > strlen(both[i])) {
            s[strlen(s) - strlen(both[i])] = '\0';
            return;
        }
}

/* INPUT's name with its compression and tensor suffixes replaced by .amp,
 * in the same directory: x.tns.zst -> x.amp. NULL if the name is too long. */
static char *amp_output_name(const char *input)
{
    static char out[4096 + 8];
    size_t n = strlen(input);
    if (n > 4096)
        return NULL;
    memcpy(out, input, n + 1);
    cut_suffix(out, ".gz", ".zst");
    cut_suffix(out, ".tns", ".bin");
    strcat(out, ".amp");
    return out;
}

/* One of amped-prep's own options into a, the shared ones through
 * amp_cli_common_option: AMP_CLI_CONTINUE, or the exit status for main. */
static int prep_option(prep_args *a, int c, const char *arg)
{
    amp_error err = {0};
    uint64_t u;
    int choice;
    switch (c) {
    case OPT_INPUT_FORMAT:
        if (amp_parse_choice(arg, format_names, "--input-format", &choice, &err))
            goto bad;
        a->read.format = (amp_input_format)choice;
        break;
    case OPT_INDEX_BASE:
        if (amp_parse_choice(arg, base_names, "--index-base", &choice, &err))
            goto bad;
        a->read.index_base = choice - 1;
        break;
    case OPT_DIMS: {
        size_t n = 0;
        if (amp_parse_u64_list(arg, AMP_MAX_MODES, 1, AMP_MAX_INDEX, "--dims", a->read.dims, &n,
                               &err))
            goto bad;
        a->read.ndims = (unsigned)n;
        break;
    }
    case OPT_DUPLICATES:
        if (amp_parse_choice(arg, dup_names, "--duplicates", &choice, &err))
            goto bad;
        a->read.duplicates = (amp_dup_policy)choice;
        break;
    case 'o':
        a->output = arg;
        break;
    case OPT_REPORT:
        a->report = arg;
        break;
    case OPT_STATS:
        a->stats_only = 1;
        break;
    case OPT_REMAP_STREAMS:
        a->build.remap_streams = 1;
        a->amp_only = "--remap-streams";
        break;
    case 'f':
        a->force = 1;
        break;
    case OPT_NO_SYNC:
        a->build.write.no_sync = 1;
        a->amp_only = "--no-sync";
        break;
    case OPT_SHARDS:
        if (amp_parse_u64(arg, 1, UINT32_C(1) << 20, "--shards", &u, &err))
            goto bad;
        a->build.shards = (uint32_t)u;
        a->amp_only = "--shards";
        break;
    case OPT_CHUNK_NNZ:
        if (amp_parse_u64(arg, 1, AMP_CHUNK_NNZ_MAX, "--chunk-nnz", &a->build.chunk_nnz, &err))
            goto bad;
        a->amp_only = "--chunk-nnz";
        break;
    case OPT_VALUES:
        if (amp_parse_choice(arg, value_names, "--values", &choice, &err))
            goto bad;
        a->build.values = (amp_value_choice)choice;
        a->amp_only = "--values";
        break;
    case OPT_LEVEL: {
        /* strtol also takes leading blanks and '+', which no other
         * integer option does: an optional minus, then digits only. */
        char *end;
        errno = 0;
        const char *digits = arg[0] == '-' ? arg + 1 : arg;
        long lv = isdigit((unsigned char)digits[0]) ? strtol(arg, &end, 10) : 0;
        if (!isdigit((unsigned char)digits[0]) || errno || *end || lv < -7 ||
            lv > ZSTD_maxCLevel())
            return amp_usage_error(PROGRAM, "--level: '%s' is not an integer from -7 to %d", arg,
                                   ZSTD_maxCLevel());
        a->build.write.level = (int)lv;
        a->amp_only = "--level";
        break;
    }
    default:
        return amp_cli_common_option(&a->cli, c, arg);
    }
    return AMP_CLI_CONTINUE;
bad:
    return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
}

/* INPUT, and what the options make of the output: named by -o, derived
 * from INPUT, or none with --stats. AMP_CLI_CONTINUE, or the exit status
 * for main. */
static int check_operands(int argc, char **argv, prep_args *a)
{
    if (optind == argc)
        return amp_usage_error(PROGRAM, "missing INPUT (a .tns or .bin file, or '-' for "
                               "standard input)");
    if (optind + 1 < argc)
        return amp_usage_error(PROGRAM, "one INPUT only; extra operand '%s'", argv[optind + 1]);
    a->input = argv[optind];
    a->shown = strcmp(a->input, "-") ? a->input : "(standard input)";
    if (a->stats_only && a->output)
        return amp_usage_error(PROGRAM, "--stats writes nothing; drop -o %s or --stats",
                               a->output);
    if (!a->stats_only && a->output == NULL) {
        if (strcmp(a->input, "-") == 0)
            return amp_usage_error(PROGRAM, "reading standard input: name the output with -o "
                                   "(or report only, with --stats)");
        a->output = amp_output_name(a->input);
        if (a->output == NULL)
            return amp_usage_error(PROGRAM, "the input name is too long to derive an output "
                                   "name from; give -o");
    }
    if (a->output && strcmp(a->output, "-") == 0)
        return amp_usage_error(PROGRAM, "-o -: the output's name gives its format (.amp, .tns "
                               "or .bin), which standard output has not; name a file, or a "
                               "FIFO named so (--report - writes the page to standard "
                               "output)");
    struct stat st;
    if (a->output && stat(a->output, &st) == 0 && S_ISDIR(st.st_mode))
        return amp_usage_error(PROGRAM, "-o %s: is a directory; name the output file (in it, "
                               "for example %s/x.amp)", a->output, a->output);
    /* Checked now, before the input is read, and again as the file takes
     * its name (no_clobber), in case one appeared meanwhile. A device or
     * FIFO is written, not replaced: no --force for that. */
    if (a->output && !a->force && stat(a->output, &st) == 0 && S_ISREG(st.st_mode)) {
        fprintf(stderr, "amped-prep: %s: already exists; use --force to overwrite it\n",
                a->output);
        return EXIT_FAILURE;
    }
    if (a->output && !amp_has_suffix(a->output, ".tns") && !amp_has_suffix(a->output, ".bin") &&
        !amp_has_suffix(a->output, ".amp"))
        return amp_usage_error(PROGRAM, "cannot tell the output format of '%s': name it .amp, "
                               ".tns or .bin", a->output);
    if (a->report && a->output && strcmp(a->report, a->output) == 0)
        return amp_usage_error(PROGRAM, "--report %s: the same file as -o; name the page "
                               "apart (for example %s.html)", a->report, a->output);
    if (a->report && stat(a->report, &st) == 0 && S_ISDIR(st.st_mode))
        return amp_usage_error(PROGRAM, "--report %s: is a directory; name the file (in it, "
                               "for example %s/prep.html)", a->report, a->report);
    if (a->report && !a->force && stat(a->report, &st) == 0 && S_ISREG(st.st_mode)) {
        fprintf(stderr, "amped-prep: %s: already exists; use --force to overwrite it\n",
                a->report);
        return EXIT_FAILURE;
    }
    if (a->amp_only && !(a->output && amp_has_suffix(a->output, ".amp")))
        return amp_usage_error(PROGRAM, "%s applies to .amp output only (-o FILE.amp)",
                               a->amp_only);
    const char *paths[3] = {a->input}, *what[3] = {"the input"};
    int input[3] = {1};
    size_t n = 1;
    if (a->output) {
        paths[n] = a->output;
        what[n++] = "-o";
    }
    if (a->report) {
        paths[n] = a->report;
        what[n++] = "--report";
    }
    amp_error err = {0};
    if (amp_outfile_check_distinct(paths, what, input, n, &err) != AMP_OK)
        return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
    /* A page on standard output is read by a program: the statistics
     * would corrupt it. */
    if (a->report && strcmp(a->report, "-") == 0 && a->cli.level == AMP_LOG_INFO)
        a->cli.level = AMP_LOG_WARN;
    return AMP_CLI_CONTINUE;
}

/* The command line into a: AMP_CLI_CONTINUE, or the exit status for main. */
static int parse_args(int argc, char **argv, prep_args *a)
{
    memset(a, 0, sizeof *a);
    amp_cli_common_init(&a->cli, PROGRAM, usage, version);
    amp_read_opts_init(&a->read);
    amp_build_opts_init(&a->build);
    argv[0] = (char *)PROGRAM;   /* getopt's own messages use it */
    int c;
    while ((c = getopt_long(argc, argv, "o:ft:qvhV", long_options, NULL)) != -1) {
        int status = prep_option(a, c, optarg);
        if (status != AMP_CLI_CONTINUE)
            return status;
    }
    return check_operands(argc, argv, a);
}

/* INPUT into t, with a progress bar; for .amp output the input's
 * fingerprint is started first, hashed beside the parse from the page
 * cache (*digest; see write_amp). */
static amp_status read_input(prep_args *a, int amp_out, amp_digest_job **digest, amp_coo *t,
                             amp_read_info *info, amp_error *err)
{
    amp_progress bar;
    amp_progress_begin(&bar, "reading", "B", 0, a->cli.level >= AMP_LOG_INFO);
    a->read.progress = amp_progress_callback;
    a->read.progress_ctx = &bar;
    amp_status rc = AMP_OK;
    if (amp_out && strcmp(a->input, "-") != 0)
        rc = amp_file_digest_start(a->input, digest, err);
    if (rc == AMP_OK)
        rc = amp_read_tensor(a->input, &a->read, t, info, err);
    amp_progress_end(&bar);
    a->read.progress = NULL;   /* bar lives no longer than this call */
    a->read.progress_ctx = NULL;
    if (rc != AMP_OK)
        return rc;
    if (info->duplicates)
        amp_log(AMP_LOG_WARN, "%s: %" PRIu64 " duplicate coordinate%s %s", a->shown,
                info->duplicates, info->duplicates == 1 ? "" : "s",
                a->read.duplicates == AMP_DUP_SUM ? "summed" : "kept as separate nonzeros");
    amp_log(AMP_LOG_DEBUG, "read %.3f s (%.1f MB/s on %d threads), duplicates %.3f s",
            info->seconds_read, (double)info->bytes / 1e6 / info->seconds_read,
            amp_max_threads(), info->seconds_dedup);
    return AMP_OK;
}

/* The statistics report (without -q). The per-mode slice lines only when
 * no .amp is written: the build reports them then, from figures it
 * computes anyway. */
static amp_status report_input(const prep_args *a, const amp_coo *t, const amp_read_info *info,
                               int amp_out, amp_error *err)
{
    amp_coo_stats s;
    double ts = amp_now();
    amp_status rc = amp_coo_stats_compute_opt(t, !amp_out, &s, err);
    amp_log(AMP_LOG_DEBUG, "statistics %.3f s", amp_now() - ts);
    if (rc != AMP_OK)
        return rc;
    print_stats(a->shown, t, &s, info, !amp_out);
    return AMP_OK;
}

/* FROSTT binary for .bin, else text, into out (finished, not placed). */
static amp_status write_frostt(const amp_coo *t, const char *output, amp_outfile *out,
                               amp_error *err)
{
    double t0 = amp_now();
    amp_status rc = amp_has_suffix(output, ".bin") ? amp_write_bin_to(t, out, err)
                                                   : amp_write_tns_to(t, out, err);
    if (rc == AMP_OK)
        amp_log(AMP_LOG_DEBUG, "wrote %s in %.3f s", output, amp_now() - t0);
    return rc;
}

/* Every output opened before the input is read, so that a path that
 * cannot be written fails before any work (and a FIFO has its reader). */
static amp_status open_outputs(prep_args *a, int amp_out, amp_outfile *out, amp_outfile *html,
                               amp_error *err)
{
    if (a->output) {
        AMP_CHECK(amp_outfile_open(out, a->output, err));
        /* after the open, which starts the struct afresh: a file that
         * appears while the input is read is not replaced either */
        out->no_clobber = !a->force;
        out->no_sync = a->build.write.no_sync;
        if (amp_out && amp_outfile_direct(out) && lseek(out->fd, 0, SEEK_CUR) != 0)
            return AMP_FAIL(err, AMP_ERR_UNSUPPORTED, "%s: an .amp file is written out of "
                            "order, which a pipe, FIFO or terminal cannot take: write it to a "
                            "file", a->output);
        if (amp_out)
            a->build.write.out = out;
    }
    if (a->report) {
        AMP_CHECK(amp_outfile_open(html, a->report, err));
        html->no_clobber = !a->force;
    }
    return AMP_OK;
}

/* The outputs, complete, made to appear together (amped-run's
 * write_outputs says why a direct one comes last). */
static amp_status place_outputs(prep_args *a, amp_outfile *out, amp_outfile *html,
                                amp_prep_report *pr, amp_error *err)
{
    amp_outfile *list[2];
    size_t n = 0;
    if (a->output)
        list[n++] = out;
    if (a->report && !amp_outfile_direct(html)) {
        AMP_CHECK(amp_prep_report_write(pr, html, err));
        list[n++] = html;
    }
    AMP_CHECK(amp_outfile_place_all(list, n, err));
    if (a->report && amp_outfile_direct(html))
        AMP_CHECK(amp_prep_report_write(pr, html, err));
    return AMP_OK;
}

/* Read, report, write: EXIT_SUCCESS, or EXIT_FAILURE with the error
 * logged. */
/* What --report needs from the tensor before the build consumes it:
 * each mode's slice degrees, and room for the shards' counts. */
static amp_status report_prepare(prep_args *a, const amp_coo *t, int amp_out,
                                 amp_prep_report *pr, amp_error *err)
{
    amp_degree_hist *hist = calloc(t->nmodes, sizeof *hist);
    if (hist == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the report");
    pr->hist = hist;
    for (unsigned m = 0; m < t->nmodes; m++)
        AMP_CHECK(amp_coo_degree_hist(t, m, &hist[m], err));
    pr->input = a->shown;
    pr->nmodes = t->nmodes;
    pr->nnz = t->nnz;
    memcpy(pr->dims, t->dims, sizeof pr->dims);
    if (amp_out) {
        a->build.shard_nnz = calloc((size_t)t->nmodes * a->build.shards, sizeof(uint64_t));
        if (a->build.shard_nnz == NULL)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for the report");
        pr->shard_nnz = a->build.shard_nnz;
        pr->shards = a->build.shards;
    }
    return AMP_OK;
}

static int prep(prep_args *a)
{
    amp_error err = {0};
    amp_coo t;
    amp_read_info info;
    amp_digest_job *digest = NULL;   /* until write_amp takes it */
    int amp_out = a->output && amp_has_suffix(a->output, ".amp"), have_t = 0;
    amp_status rc;
    amp_build_report build;
    amp_prep_report pr;
    memset(&pr, 0, sizeof pr);
    amp_outfile out = {.fd = -1}, html = {.fd = -1};
    AMP_CHECK_GOTO(open_outputs(a, amp_out, &out, &html, &err), rc, fail);
    AMP_CHECK_GOTO(read_input(a, amp_out, &digest, &t, &info, &err), rc, fail);
    have_t = 1;
    if (a->cli.level >= AMP_LOG_INFO)
        AMP_CHECK_GOTO(report_input(a, &t, &info, amp_out, &err), rc, fail);
    if (a->report)
        AMP_CHECK_GOTO(report_prepare(a, &t, amp_out, &pr, &err), rc, fail);
    if (amp_out) {
        rc = write_amp(digest, a, &t, &info, &build, &err);
        digest = NULL;   /* finished there */
        if (rc != AMP_OK)
            goto fail;
        pr.output = a->output;
        pr.build = &build;
    } else if (a->output) {
        AMP_CHECK_GOTO(write_frostt(&t, a->output, &out, &err), rc, fail);
    }
    AMP_CHECK_GOTO(place_outputs(a, &out, &html, &pr, &err), rc, fail);
    amp_outfile_abort(&out);
    amp_outfile_abort(&html);
    amp_coo_free(&t);
    free((void *)pr.hist);
    free(a->build.shard_nnz);
    return EXIT_SUCCESS;
fail:
    (void)amp_file_digest_finish(digest, NULL, NULL, NULL);
    amp_log_error(&err);
    amp_outfile_abort(&out);
    amp_outfile_abort(&html);
    if (have_t)
        amp_coo_free(&t);
    free((void *)pr.hist);
    free(a->build.shard_nnz);
    return EXIT_FAILURE;
}

/* Buffers of 128 KiB and more straight from mmap, so that a freed one
 * goes back to the system at once. glibc otherwise raises the threshold
 * as big blocks are freed and keeps them in its per-thread arenas: on many
 * threads that held chunk buffers above the parse's peak, where a fixed
 * threshold keeps the peak what it is on 2 threads at no measurable cost
 * in time (cpu20m, bench/RESULTS.md). */
static void fix_mmap_threshold(void)
{
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

int main(int argc, char **argv)
{
    fix_mmap_threshold();
    program_start = amp_now();
    prep_args a;
    int status = parse_args(argc, argv, &a);
    if (status != AMP_CLI_CONTINUE)
        return status;
    amp_log_init(PROGRAM, a.cli.level);
    amp_outfile_cleanup_on_signals();
    amp_set_threads((int)a.cli.threads);
    return prep(&a);
}
