#include <config.h>

#include <stdarg.h>
#include <stdio.h>

#include "amp_log.h"

static const char *log_program = "amped";
static amp_log_level log_level = AMP_LOG_INFO;

void amp_log_init(const char *program, amp_log_level level)
{
    log_program = program;
    log_level = level;
}

void amp_log(amp_log_level level, const char *fmt, ...)
{
    if (level > log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    /* One buffered write per message keeps lines from threads intact. */
    char line[2048];
    int n = snprintf(line, sizeof line, "%s: %s", log_program,
                     level == AMP_LOG_WARN ? "warning: " : "");
    if (n >= 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

void amp_log_error(const amp_error *err)
{
    amp_log(AMP_LOG_ERROR, "%s", amp_error_message(err));
    if (err != NULL && err->src_file != NULL)
        amp_log(AMP_LOG_DEBUG, "(%s, raised at %s:%d)", amp_strerror(err->status),
                err->src_file, err->src_line);
}
