/* amped-run: CP decomposition of a prepared (.amp) tensor.
 *
 * This version knows its build (CUDA, NCCL) and the GPUs it can see, and
 * inspects (--info) and verifies (--verify) .amp files; the CP-ALS
 * backends arrive with the solver. */
#include <config.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "amp_alloc.h"
#include "amp_cli.h"
#include "amp_log.h"
#include "amp_parse.h"
#include "amped_format.h"
#include "inspect.h"
#ifdef AMP_HAVE_CUDA
#include "cuda/amp_cuda.h"
#endif

#define PROGRAM "amped-run"

enum { OPT_LIST_DEVICES = 256, OPT_INFO, OPT_VERIFY };

static const struct option long_options[] = {
    /* actions other than decomposing */
    {"info", no_argument, NULL, OPT_INFO},
    {"verify", no_argument, NULL, OPT_VERIFY},
    /* devices and threads */
    {"list-devices", no_argument, NULL, OPT_LIST_DEVICES},
    {"threads", required_argument, NULL, 't'},
    /* reporting */
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void usage(void)
{
    printf("Usage: amped-run [OPTION]... FILE.amp\n"
           "Compute a CP decomposition of the tensor that amped-prep prepared in FILE.amp.\n"
           "\n"
           "Inspection:\n"
           "      --info           print what FILE.amp holds (modes, dimensions, nonzeros,\n"
           "                       shards and their balance, sizes, compression) and exit\n"
           "      --verify         read every section of FILE.amp and check every\n"
           "                       checksum and index; exit status 0 only if all hold\n"
           "\n"
           "Devices and threads:\n"
           "      --list-devices   list the CUDA devices this build can use, run a\n"
           "                       self-test kernel on each, and exit\n"
           "  -t, --threads=N      CPU threads (default: all available)\n"
           "\n"
           "Reporting:\n"
           "  -q, --quiet          print only warnings and errors\n"
           "  -v, --verbose        print more detail\n"
           "  -h, --help           display this help and exit\n"
           "  -V, --version        output version and build information and exit\n"
           "\n"
           "Exit status: 0 on success, 1 on a failure, 2 on a usage error.\n"
           "Report bugs to: %s\n", PACKAGE_BUGREPORT);
}

static void version(void)
{
    printf("amped-run (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
#ifdef AMP_HAVE_CUDA
    char v[64];
    amp_cuda_version_string(v, sizeof v);
    printf("CUDA backend: yes, runtime %s\n", v);
#else
    printf("CUDA backend: no (built without CUDA)\n");
#endif
#ifdef AMP_HAVE_NCCL
    printf("NCCL: yes\n");
#else
    printf("NCCL: no\n");
#endif
}

static int list_devices(void)
{
#ifdef AMP_HAVE_CUDA
    amp_cuda_device dev[64];
    int count = 0;
    amp_error err = {0};
    if (amp_cuda_list_devices(dev, 64, &count, &err) != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    int failed = 0;
    for (int i = 0; i < count && i < 64; i++) {
        char tot[32], fr[32];
        amp_error e = {0};
        amp_status rc = amp_cuda_selftest(i, &e);
        printf("GPU %d: %s, compute capability %d.%d, %d SMs, %s memory (%s free), "
               "PCI %02x:%02x, self-test %s\n", dev[i].ordinal, dev[i].name, dev[i].cc_major,
               dev[i].cc_minor, dev[i].sm_count,
               amp_format_bytes(tot, sizeof tot, dev[i].total_memory),
               amp_format_bytes(fr, sizeof fr, dev[i].free_memory), (unsigned)dev[i].pci_bus,
               (unsigned)dev[i].pci_device, rc == AMP_OK ? "passed" : "FAILED");
        if (rc != AMP_OK) {
            amp_log_error(&e);
            failed = 1;
        }
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
#else
    amp_log(AMP_LOG_ERROR, "this build has no CUDA backend (configure --with-cuda)");
    return EXIT_FAILURE;
#endif
}

int main(int argc, char **argv)
{
    amp_log_level level = AMP_LOG_INFO;
    int c, want_list = 0, want_info = 0, want_verify = 0;
    uint64_t threads = 0;
    amp_error err = {0};
    argv[0] = (char *)PROGRAM;   /* getopt's own messages use it */
    while ((c = getopt_long(argc, argv, "t:qvhV", long_options, NULL)) != -1) {
        switch (c) {
        case OPT_LIST_DEVICES:
            want_list = 1;
            break;
        case OPT_INFO:
            want_info = 1;
            break;
        case OPT_VERIFY:
            want_verify = 1;
            break;
        case 't':
            if (amp_parse_u64(optarg, 1, 4096, "--threads", &threads, &err))
                return amp_usage_error(PROGRAM, "%s", amp_error_message(&err));
            break;
        case 'q':
            level = AMP_LOG_WARN;
            break;
        case 'v':
            level = AMP_LOG_DEBUG;
            break;
        case 'h':
            usage();
            return EXIT_SUCCESS;
        case 'V':
            version();
            return EXIT_SUCCESS;
        default:
            fprintf(stderr, "Try 'amped-run --help' for more information.\n");
            return AMP_EXIT_USAGE;
        }
    }
    amp_log_init("amped-run", level);
    if (want_list) {
        if (optind < argc)
            return amp_usage_error(PROGRAM, "--list-devices takes no FILE; extra operand '%s'", argv[optind]);
        return list_devices();
    }
    if (optind == argc)
        return amp_usage_error(PROGRAM, "missing FILE.amp (prepare one with amped-prep)");
    if (optind + 1 < argc)
        return amp_usage_error(PROGRAM, "one FILE only; extra operand '%s'", argv[optind + 1]);
    const char *path = argv[optind];
    if (want_info || want_verify) {
        int status = EXIT_SUCCESS;
        if (want_info)
            status = amp_inspect_info(path);
        if (want_verify && status == EXIT_SUCCESS)
            status = amp_inspect_verify(path, (int)threads, level < AMP_LOG_INFO);
        return status;
    }
    amp_file *f;
    if (amp_file_open(path, &f, &err) != AMP_OK) {
        amp_log_error(&err);
        return EXIT_FAILURE;
    }
    amp_file_close(f);
    amp_log(AMP_LOG_ERROR, "%s: this version of amped-run reads and verifies .amp files "
            "(--info, --verify) but cannot decompose them yet; see amped-run(1)", path);
    return EXIT_FAILURE;
}
