/* amped-run --info and --verify. See inspect.h. */
#include <config.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_log.h"
#include "amp_timer.h"
#include "amped_format.h"
#include "inspect.h"

static const char *const type_names[] = {"?", "META", "MODE", "RELABEL", "CHUNK", "REMAP",
                                         "FIBER"};

typedef struct size_sum {
    uint64_t count, stored, raw;
} size_sum;

static void add(size_sum *s, const amp_section *sec)
{
    s->count++;
    s->stored += sec->stored_size;
    s->raw += sec->raw_size;
}

static double ratio(const size_sum *s)
{
    return s->stored ? (double)s->raw / (double)s->stored : 1.0;
}

static void print_params(const char *params)
{
    printf("parameters: ");
    int first = 1;
    for (const char *p = params; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n)
            printf("%s%.*s", first ? "" : " ", (int)n, p);
        first = first && n == 0;
        p += n + (nl != NULL);
    }
    printf("%s\n", first ? "(none recorded)" : "");
}

int amp_inspect_info(const char *path)
{
    amp_error err = {0};
    amp_file *f;
    if (amp_file_open(path, &f, &err) != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    const amp_file_info *in = amp_file_info_get(f);
    const amp_meta *m = amp_file_meta(f);
    char a[32], b[32];
    /* The FIBER sections read (and their counts checked) before anything
     * is printed: a bad one leaves only the error. */
    uint64_t fibers[AMP_MAX_MODES] = {0};
    unsigned middle[AMP_MAX_MODES] = {0};
    for (unsigned d = 0; d < m->nmodes; d++) {
        const amp_mode_layout *l = amp_file_mode(f, d);
        if (amp_file_fiber(f, d) == NULL)
            continue;
        uint64_t *counts = malloc(l->nshards * sizeof *counts);
        if (counts == NULL || amp_file_read_fibers(f, d, &middle[d], counts, &err) != AMP_OK) {
            if (counts == NULL)
                amp_log(AMP_LOG_ERROR, "out of memory");
            else
                amp_log_error(&err);
            free(counts);
            amp_file_close(f);
            return EXIT_FAILURE;
        }
        for (uint32_t s = 0; s < l->nshards; s++)
            fibers[d] += counts[s];
        free(counts);
    }
    printf("file:       %s\n", path);
    printf("format:     %u.%u, %s, %zu sections%s, written by %s\n", in->major, in->minor,
           amp_format_bytes(a, sizeof a, in->file_size), in->nsections,
           in->nskipped ? " (some of a newer minor version, skipped)" : "",
           *m->writer ? m->writer : "(unknown)");
    printf("source:     %s", *m->source_name ? m->source_name : "(unknown)");
    if (m->source_hash)
        printf(" (%s, XXH3 %016" PRIx64 ")", amp_format_bytes(a, sizeof a, m->source_size),
               m->source_hash);
    printf("\n");
    print_params(m->params);
    printf("tensor:     %u modes, %" PRIu64 " nonzeros, values %s, norm %.6g\n", m->nmodes,
           m->nnz, m->value_type == AMP_VALUES_F32 ? "f32" : "f64", sqrt(m->norm_sq));
    printf("dims:       ");
    for (unsigned d = 0; d < m->nmodes; d++)
        printf("%s%" PRIu64, d ? " x " : "", m->dims[d]);
    printf("\ncompacted:  ");
    for (unsigned d = 0; d < m->nmodes; d++)
        printf("%s%" PRIu64, d ? " x " : "", m->compact_dims[d]);
    printf(" (empty slices dropped)\n");

    size_sum by_type[AMP_SECTION_FIBER + 1] = {{0}}, other = {0}, total = {0};
    size_sum *by_mode = calloc(m->nmodes, sizeof *by_mode);
    if (by_mode == NULL) {
        amp_file_close(f);
        amp_log(AMP_LOG_ERROR, "out of memory");
        return EXIT_FAILURE;
    }
    for (size_t i = 0; i < in->nsections; i++) {
        const amp_section *s = amp_file_section(f, i);
        add(s->type >= 1 && s->type <= AMP_SECTION_FIBER ? &by_type[s->type] : &other, s);
        add(&total, s);
        if (s->type == AMP_SECTION_CHUNK)
            add(&by_mode[s->mode], s);
    }
    for (unsigned d = 0; d < m->nmodes; d++) {
        const amp_mode_layout *l = amp_file_mode(f, d);
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint32_t s = 0; s < l->nshards; s++) {
            if (l->shards[s].nnz < lo)
                lo = l->shards[s].nnz;
            if (l->shards[s].nnz > hi)
                hi = l->shards[s].nnz;
        }
        double mean = (double)m->nnz / l->nshards;
        printf("mode %-2u     %lu shards, nonzeros per shard %" PRIu64 " to %" PRIu64
               " (largest/mean %.3f), %" PRIu64 " chunks, index %u bits (block key %u), "
               "chunks %s of %s (%.2fx)\n", d + 1, (unsigned long)l->nshards, lo, hi,
               (double)hi / mean, by_mode[d].count, l->index_bits, l->key_bits,
               amp_format_bytes(a, sizeof a, by_mode[d].stored),
               amp_format_bytes(b, sizeof b, by_mode[d].raw), ratio(&by_mode[d]));
    }
    /* The fiber level (format 1.1): what the fiber MTTKRP saves is the
     * nonzeros a fiber, so say it per copy. */
    for (unsigned d = 0; d < m->nmodes; d++)
        if (amp_file_fiber(f, d) != NULL)
            printf("fibers %-2u   %" PRIu64 " (middle mode %u), %.2f nonzeros a fiber\n", d + 1,
                   fibers[d], middle[d] + 1, (double)m->nnz / (double)(fibers[d] ? fibers[d] : 1));
    printf("sections:  ");
    for (int t = 1; t <= AMP_SECTION_FIBER; t++)
        if (t < AMP_SECTION_REMAP || by_type[t].count)
            printf(" %s %" PRIu64 " (%s),", type_names[t], by_type[t].count,
                   amp_format_bytes(a, sizeof a, by_type[t].stored));
    if (other.count)
        printf(" unknown %" PRIu64 " (%s),", other.count,
               amp_format_bytes(a, sizeof a, other.stored));
    printf(" directory %s\n", amp_format_bytes(a, sizeof a, in->dir_size));
    printf("compressed: %s of %s (%.2fx), %.2f bytes per nonzero per mode copy\n",
           amp_format_bytes(a, sizeof a, total.stored), amp_format_bytes(b, sizeof b, total.raw),
           ratio(&total), (double)in->file_size / (double)m->nnz / m->nmodes);
    free(by_mode);
    amp_file_close(f);
    return EXIT_SUCCESS;
}

typedef struct verify_ctx {
    const char *path;
} verify_ctx;

static void report_bad(void *ctx, const amp_section *s, const amp_error *e)
{
    (void)ctx;
    (void)s;
    amp_log_error(e);
}

int amp_inspect_verify(const char *path, int threads, int quiet)
{
    amp_error err = {0};
    amp_file *f;
    double t0 = amp_now();
    if (amp_file_open(path, &f, &err) != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    const amp_file_info *in = amp_file_info_get(f);
    size_t bad = 0;
    verify_ctx ctx = {path};
    amp_status rc = amp_file_verify(f, threads, report_bad, &ctx, &bad, &err);
    double secs = amp_now() - t0;
    char a[32];
    if (rc == AMP_OK && !quiet)
        printf("%s: OK: header, directory and all %zu sections verified (%s in %.3f s)\n",
               path, in->nsections, amp_format_bytes(a, sizeof a, in->file_size), secs);
    if (rc != AMP_OK && bad > 0)
        amp_log(AMP_LOG_ERROR, "%s: FAILED: %zu of %zu section%s %s damaged or inconsistent",
                path, bad, in->nsections, in->nsections == 1 ? "" : "s",
                bad == 1 ? "is" : "are");
    else if (rc != AMP_OK)
        amp_log_error(&err);
    amp_file_close(f);
    return rc == AMP_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}
