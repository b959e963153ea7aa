/* The cost of FLYCOO remap positions at load (issue 30): for each mode of
 * an .amp file, the positions computed from the copies, read from the
 * file's REMAP sections when it has them, and the CPU remap step through
 * them; seconds each, and the process's peak memory after loading and at
 * the end. The remapped copy is compared with the file's next copy.
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
    }
    free(pos);
    free(pos2);
    free(words);
    free(vals);
    amp_tensor_free(&t);
    amp_file_close(f);
    return bad;
}
