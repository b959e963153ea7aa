/* The cost of FLYCOO remap positions at load (issue 30): for each mode of
 * an .amp file, the positions computed from the copies, read from the
 * file's REMAP sections when it has them, and the CPU remap step through
 * them; seconds each, and the process's peak memory after loading and at
 * the end. The remapped copy is compared with the file's next copy.
 *
 * And what the GPU remap kernel's scattered writes cost (run/cuda's
 * remap.cu: a thread a nonzero k of copy d, consecutive threads
 * consecutive k, each writing its word (8 bytes) and value at pos[k]):
 * the 32-byte sectors a warp's 32 writes touch against the fewest they
 * could (8 for the words, 8 or 4 for the values), and the sectors DRAM
 * would be written if L2 merges the writes to a sector whose sources lie
 * within W nonzeros of one another (the writes in flight while a dirty
 * sector stays in L2: about its size over 64 bytes a nonzero, some 0.8 M
 * nonzeros for 50 MB), for W of 256 K, 1 M and 4 M.
 *
 *   remap-bench FILE.amp [THREADS]
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "amp_core.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sectors of 32 bytes touched by 32 consecutive k writing `size` bytes
 * at pos[k], summed over the copy. */
static uint64_t warp_sectors(const uint64_t *pos, uint64_t nnz, unsigned size)
{
    uint64_t total = 0;
    for (uint64_t w = 0; w < nnz; w += 32) {
        uint64_t s[32];
        unsigned n = 0;
        for (uint64_t k = w; k < nnz && k < w + 32; k++) {
            uint64_t sec = pos[k] * size / 32;
            unsigned j = 0;
            while (j < n && s[j] != sec)
                j++;
            if (j == n)
                s[n++] = sec;
        }
        total += n;
    }
    return total;
}

/* DRAM sector writes when L2 merges a sector's writes whose sources
 * (inv[p], the k writing position p) lie within `window` of the previous
 * one of that sector: a sector of `per` positions is written once per
 * cluster of its sorted sources. */
static uint64_t merged_sectors(const uint64_t *inv, uint64_t nnz, unsigned per, uint64_t window)
{
    uint64_t total = 0;
    for (uint64_t p = 0; p < nnz; p += per) {
        uint64_t k[8];
        unsigned n = 0;
        for (uint64_t q = p; q < nnz && q < p + per; q++) {
            unsigned j = n++;
            while (j > 0 && k[j - 1] > inv[q]) {
                k[j] = k[j - 1];
                j--;
            }
            k[j] = inv[q];
        }
        total += 1;
        for (unsigned j = 1; j < n; j++)
            total += k[j] - k[j - 1] > window;
    }
    return total;
}

static void write_costs(const uint64_t *pos, uint64_t *inv, uint64_t nnz, unsigned vsize)
{
    for (uint64_t k = 0; k < nnz; k++)
        inv[pos[k]] = k;
    const double least_w = (double)(nnz * 8 + 31) / 32, least_v = (double)(nnz * vsize + 31) / 32;
    printf("    warp writes: words %.2fx, values %.2fx the fewest sectors;",
           (double)warp_sectors(pos, nnz, 8) / least_w,
           (double)warp_sectors(pos, nnz, vsize) / least_v);
    printf(" DRAM sectors with L2 merging over W = 256K / 1M / 4M: words");
    static const uint64_t W[] = {1u << 18, 1u << 20, 1u << 22};
    for (int i = 0; i < 3; i++)
        printf(" %.2fx", (double)merged_sectors(inv, nnz, 4, W[i]) / least_w);
    printf(", values");
    for (int i = 0; i < 3; i++)
        printf(" %.2fx", (double)merged_sectors(inv, nnz, 32 / vsize, W[i]) / least_v);
    printf("\n");
}

static double peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: remap-bench FILE.amp [THREADS]\n");
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    amp_error err = {0};
    amp_file *f = NULL;
    amp_tensor t;
    double t0 = now();
    if (amp_file_open(argv[1], &f, &err) != AMP_OK ||
        amp_tensor_load(f, threads, NULL, NULL, &t, &err) != AMP_OK) {
        fprintf(stderr, "remap-bench: %s\n", amp_error_message(&err));
        return 1;
    }
    printf("%s: %u modes, %llu nonzeros; loaded in %.2f s, peak %.0f MiB\n", argv[1],
           t.nmodes, (unsigned long long)t.nnz, now() - t0, peak_mib());
    size_t vsize = amp_value_size(t.value_type);
    uint64_t *pos = malloc(t.nnz * 8), *pos2 = malloc(t.nnz * 8);
    uint64_t *words = malloc(t.nnz * 8);
    void *vals = malloc(t.nnz * vsize);
    if (pos == NULL || pos2 == NULL || words == NULL || vals == NULL)
        return 1;
    /* Touched now (with zeros the compiler may make it a calloc, whose
     * pages stay untouched), so a later rise of the peak is the work's. */
    memset(pos, 0xff, t.nnz * 8);
    memset(pos2, 0xff, t.nnz * 8);
    memset(words, 0xff, t.nnz * 8);
    memset(vals, 0xff, t.nnz * vsize);
    printf("with pos, pos2 and a target copy allocated: peak %.0f MiB\n", peak_mib());
    int bad = 0;
    for (unsigned d = 0; d < t.nmodes; d++) {
        unsigned next = (d + 1) % t.nmodes;
        double a = now();
        if (amp_remap_positions_compute(&t, d, threads, pos, &err) != AMP_OK) {
            fprintf(stderr, "remap-bench: %s\n", amp_error_message(&err));
            return 1;
        }
        double computed = now() - a, read = -1;
        if (amp_remap_in_file(f, d)) {
            a = now();
            if (amp_remap_positions_read(f, &t, d, threads, pos2, &err) != AMP_OK) {
                fprintf(stderr, "remap-bench: %s\n", amp_error_message(&err));
                return 1;
            }
            read = now() - a;
            bad |= memcmp(pos, pos2, t.nnz * 8) != 0;
        }
        amp_copy c = t.copies[next];
        c.words = words;
        c.vals = vals;
        a = now();
        if (amp_remap_copy(&t.copies[d], pos, t.value_type, &c, &err) != AMP_OK) {
            fprintf(stderr, "remap-bench: %s\n", amp_error_message(&err));
            return 1;
        }
        double step = now() - a;
        int same = memcmp(words, t.copies[next].words, t.nnz * 8) == 0 &&
                   memcmp(vals, t.copies[next].vals, t.nnz * vsize) == 0;
        bad |= !same;
        printf("mode %u -> %u: computed %.2f s, read %s%.2f s, remap step %.2f s, %s; "
               "peak %.0f MiB\n", d + 1, next + 1, computed, read < 0 ? "(no streams) " : "",
               read < 0 ? 0.0 : read, step, same ? "equal" : "DIFFERENT", peak_mib());
        write_costs(pos, pos2, t.nnz, (unsigned)vsize);
    }
    free(pos);
    free(pos2);
    free(words);
    free(vals);
    amp_tensor_free(&t);
    amp_file_close(f);
    return bad;
}
