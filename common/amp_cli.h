/* Small pieces shared by the programs' command-line handling. */
#ifndef AMP_CLI_H
#define AMP_CLI_H

/* Exit status of a usage error, as GNU programs use it. */
#define AMP_EXIT_USAGE 2

/* "PROGRAM: message" and "Try 'PROGRAM --help' for more information."
 * on stderr; returns AMP_EXIT_USAGE for "return amp_usage_error(...)". */
int amp_usage_error(const char *program, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Whether name ends in suffix. */
int amp_has_suffix(const char *name, const char *suffix);

#endif
