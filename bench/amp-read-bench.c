/* How fast chunks come out of an .amp file: every chunk read, checksummed
 * and decompressed into a per-thread buffer (what amped-run's loader does
 * before a copy to the GPU), on 1, 2, 4 ... threads. Prints raw GB/s in
 * total and per thread, and the compression ratio. The page cache should
 * be warm: this measures the CPU side, not the disk.
 *
 * Usage: amp-read-bench [--planes | --check] FILE.amp [THREADS...]
 * --planes leaves byte planes as stored (amp_section_read_planes): the rate
 * a loader that rebuilds words on the GPU would see. --check also checks
 * every chunk (amp_chunk_check), as amped-run's loader does. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_log.h"
#include "amp_threads.h"
#include "amp_timer.h"
#include "amped_format.h"

static int keep_planes, check;

static double read_all(const amp_file *f, int threads, int *failed)
{
    const amp_file_info *in = amp_file_info_get(f);
    size_t n = in->nsections;
    uint64_t max_raw = 0;
    for (size_t i = 0; i < n; i++)
        if (amp_file_section(f, i)->raw_size > max_raw)
            max_raw = amp_file_section(f, i)->raw_size;
    double t0 = amp_now();
    (void)threads;   /* without OpenMP */
#pragma omp parallel num_threads(threads)
    {
        amp_error err = {0};
        amp_section_reader *r = NULL;
        void *buf = malloc(max_raw ? max_raw : 1);
        if (buf == NULL || amp_section_reader_new(f, &r, &err) != AMP_OK)
            *failed = 1;
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < n; i++) {
            const amp_section *s = amp_file_section(f, i);
            if (s->type != AMP_SECTION_CHUNK || r == NULL || buf == NULL)
                continue;
            amp_status rc = keep_planes ? amp_section_read_planes(r, s, buf, max_raw, &err)
                                        : amp_section_read(r, s, buf, max_raw, &err);
            if (rc == AMP_OK && check)
                rc = amp_chunk_check(f, s, buf, &err);
            if (rc != AMP_OK) {
                amp_log_error(&err);
                *failed = 1;
            }
        }
        amp_section_reader_free(r);
        free(buf);
    }
    return amp_now() - t0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--planes") == 0 || strcmp(argv[1], "--check") == 0)) {
        keep_planes = argv[1][2] == 'p';
        check = !keep_planes;
        argv++;
        argc--;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: amp-read-bench [--planes | --check] FILE.amp [THREADS...]\n");
        return 2;
    }
    amp_log_init("amp-read-bench", AMP_LOG_INFO);
    amp_error err = {0};
    amp_file *f;
    if (amp_file_open(argv[1], &f, &err) != AMP_OK) {
        amp_log_error(&err);
        return 1;
    }
    uint64_t raw = 0, stored = 0, chunks = 0;
    for (size_t i = 0; i < amp_file_info_get(f)->nsections; i++) {
        const amp_section *s = amp_file_section(f, i);
        if (s->type == AMP_SECTION_CHUNK) {
            raw += s->raw_size;
            stored += s->stored_size;
            chunks++;
        }
    }
    printf("%s%s%s: %llu chunks, raw %.3f GB, stored %.3f GB, ratio %.2fx\n",
           keep_planes ? "(planes kept) " : "", check ? "(chunks checked) " : "", argv[1],
           (unsigned long long)chunks, raw / 1e9, stored / 1e9, (double)raw / (double)stored);
    int failed = 0;
    read_all(f, 1, &failed);   /* warm the page cache */
    int max_threads = amp_max_threads();
    int list[64], nlist = 0;
    for (int a = 2; a < argc && nlist < 64; a++)
        list[nlist++] = atoi(argv[a]);
    if (nlist == 0)
        for (int t = 1; nlist < 64; t *= 2) {
            list[nlist++] = t < max_threads ? t : max_threads;
            if (t >= max_threads)
                break;
        }
    printf("| threads | seconds | raw GB/s | per thread GB/s | stored GB/s |\n"
           "|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < nlist && !failed; k++) {
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double s = read_all(f, list[k], &failed);
            if (s < best)
                best = s;
        }
        printf("| %d | %.3f | %.2f | %.2f | %.2f |\n", list[k], best, raw / best / 1e9,
               raw / best / 1e9 / list[k], stored / best / 1e9);
    }
    amp_file_close(f);
    return failed;
}
