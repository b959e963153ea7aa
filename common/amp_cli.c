#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "amp_cli.h"

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
