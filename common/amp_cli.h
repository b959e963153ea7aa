/* Small pieces shared by the programs' command-line handling. */
#ifndef AMP_CLI_H
#define AMP_CLI_H

#include <stdint.h>

#include "amp_log.h"

/* Exit status of a usage error, as GNU programs use it. */
#define AMP_EXIT_USAGE 2

/* "PROGRAM: message" and "Try 'PROGRAM --help' for more information."
 * on stderr; returns AMP_EXIT_USAGE for "return amp_usage_error(...)". */
int amp_usage_error(const char *program, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Whether name ends in suffix. */
int amp_has_suffix(const char *name, const char *suffix);

/* The options every amped program takes, with the same letters and
 * meaning: -t/--threads N, -q/--quiet, -v/--verbose, -h/--help and
 * -V/--version. Each program keeps them in its own getopt_long table and
 * option string ("t:qvhV") and hands them, with anything getopt refused,
 * to amp_cli_common_option from its switch's default case. */
typedef struct amp_cli_common {
    const char *program;     /* the name in messages, e.g. "amped-prep" */
    void (*usage)(void);     /* prints --help's text on stdout */
    void (*version)(void);   /* prints --version's text on stdout */
    uint64_t threads;        /* -t: 1 to AMP_CLI_MAX_THREADS; 0 when not given */
    amp_log_level level;     /* AMP_LOG_INFO; -q: AMP_LOG_WARN; -v: AMP_LOG_DEBUG */
} amp_cli_common;

#define AMP_CLI_MAX_THREADS 4096

/* Their entries in a getopt_long table, last before the terminator: a
 * program's table ends with these in this order (getopt lists an
 * ambiguous abbreviation's candidates in table order). */
#define AMP_CLI_COMMON_LONG_OPTIONS                      \
    {"threads", required_argument, NULL, 't'},          \
    {"quiet", no_argument, NULL, 'q'},                  \
    {"verbose", no_argument, NULL, 'v'},                \
    {"help", no_argument, NULL, 'h'},                   \
    {"version", no_argument, NULL, 'V'}

/* amp_cli_common_option's answer when parsing goes on. */
#define AMP_CLI_CONTINUE (-1)

void amp_cli_common_init(amp_cli_common *cli, const char *program, void (*usage)(void),
                         void (*version)(void));

/* getopt_long's answer c (and optarg) for an option that is not the
 * program's own. -t, -q and -v are recorded in cli and give
 * AMP_CLI_CONTINUE; otherwise the exit status main is to return at once:
 * EXIT_SUCCESS after printing -h's or -V's text, AMP_EXIT_USAGE after a
 * bad -t value or an option getopt refused (getopt has said why; this
 * adds "Try 'PROGRAM --help' for more information."). */
int amp_cli_common_option(amp_cli_common *cli, int c, const char *arg);

#endif
