/* How long amped-run takes to build the GPUs' parts of a tensor on the
 * host (amp_partition_new, then amp_partition_tensors: every nonzero of
 * every mode copy re-encoded in the run's row numbering), for a number of
 * GPUs that need not be present. Prints each round's time and the time per
 * nonzero of each mode copy. The file is loaded once, first.
 *
 * Usage: part-bench FILE.amp [GPUS [THREADS [ROUNDS [LOOKUP]]]]
 * defaults: 2 GPUs, every OpenMP thread (0), 3 rounds, LOOKUP auto (map
 * or table: how a row's run number is found, amp_partition.row_lookup). */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_core.h"
#include "amp_parse.h"
#include "amp_timer.h"
#include "amped_format.h"

static void usage_error(const char *msg)
{
    fprintf(stderr, "part-bench: %s\nUsage: part-bench FILE.amp [GPUS [THREADS [ROUNDS "
            "[auto|map|table]]]]\n", msg);
    exit(2);
}

int main(int argc, char **argv)
{
    amp_error err = {0};
    uint64_t gpus = 2, threads = 0, rounds = 3;
    int lookup = 0;
    if (argc < 2 || argc > 6)
        usage_error("wrong number of arguments");
    if (argc > 5) {
        if (strcmp(argv[5], "map") == 0)
            lookup = 1;
        else if (strcmp(argv[5], "table") == 0)
            lookup = -1;
        else if (strcmp(argv[5], "auto") != 0)
            usage_error("LOOKUP is auto, map or table");
    }
    if ((argc > 2 && amp_parse_u64(argv[2], 1, AMP_MAX_GPUS, "GPUS", &gpus, &err) != AMP_OK) ||
        (argc > 3 && amp_parse_u64(argv[3], 0, 4096, "THREADS", &threads, &err) != AMP_OK) ||
        (argc > 4 && amp_parse_u64(argv[4], 1, 1000, "ROUNDS", &rounds, &err) != AMP_OK))
        usage_error(amp_error_message(&err));
    amp_file *f = NULL;
    amp_tensor t;
    if (amp_file_open(argv[1], &f, &err) != AMP_OK ||
        amp_tensor_load(f, (int)threads, NULL, NULL, &t, &err) != AMP_OK) {
        fprintf(stderr, "part-bench: %s\n", amp_error_message(&err));
        amp_file_close(f);
        return 1;
    }
    printf("%s: %u modes, %" PRIu64 " nonzeros, %" PRIu64 " GPUs, %" PRIu64 " threads (0: all)\n",
           argv[1], t.nmodes, t.nnz, gpus, threads);
    int rc = 0;
    for (uint64_t r = 0; r < rounds && rc == 0; r++) {
        amp_partition p;
        amp_tensor parts[AMP_MAX_GPUS];
        double t0 = amp_now();
        if (amp_partition_new(&t, (unsigned)gpus, AMP_PARTITION_OWNER, &p, &err) != AMP_OK) {
            rc = 1;
            break;
        }
        p.row_lookup = lookup;
        double t1 = amp_now();
        if (amp_partition_tensors(&t, &p, (int)threads, NULL, NULL, NULL, parts, &err) != AMP_OK) {
            amp_partition_free(&p);
            rc = 1;
            break;
        }
        double t2 = amp_now();
        const double copies = (double)t.nnz * t.nmodes;
        printf("round %" PRIu64 ": dealing %.3f s, parts %.3f s (%.1f ns per nonzero per copy)\n",
               r + 1, t1 - t0, t2 - t1, copies > 0 ? (t2 - t1) * 1e9 / copies : 0.0);
        for (uint64_t g = 0; g < gpus; g++)
            amp_tensor_free(&parts[g]);
        amp_partition_free(&p);
    }
    if (rc)
        fprintf(stderr, "part-bench: %s\n", amp_error_message(&err));
    amp_tensor_free(&t);
    amp_file_close(f);
    return rc;
}
