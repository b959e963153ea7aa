#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_cli.h"
#include "amp_parse.h"

int amp_usage_error(const char *program, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", program);
    va_end(ap);
    return AMP_EXIT_USAGE;
}

int amp_has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && strcmp(name + n - k, suffix) == 0;
}

void amp_cli_common_init(amp_cli_common *cli, const char *program, void (*usage)(void),
                         void (*version)(void))
{
    cli->program = program;
    cli->usage = usage;
    cli->version = version;
    cli->threads = 0;
    cli->level = AMP_LOG_INFO;
}

int amp_cli_common_option(amp_cli_common *cli, int c, const char *arg)
{
    amp_error err = {0};
    switch (c) {
    case 't':
        if (amp_parse_u64(arg, 1, AMP_CLI_MAX_THREADS, "--threads", &cli->threads, &err))
            return amp_usage_error(cli->program, "%s", amp_error_message(&err));
        return AMP_CLI_CONTINUE;
    case 'q':
        cli->level = AMP_LOG_WARN;
        return AMP_CLI_CONTINUE;
    case 'v':
        cli->level = AMP_LOG_DEBUG;
        return AMP_CLI_CONTINUE;
    case 'h':
        cli->usage();
        return EXIT_SUCCESS;
    case 'V':
        cli->version();
        return EXIT_SUCCESS;
    default:
        fprintf(stderr, "Try '%s --help' for more information.\n", cli->program);
        return AMP_EXIT_USAGE;
    }
}
