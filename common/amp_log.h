/* Program-side logging with verbosity levels. Only programs (prep/, run/,
 * bench/) log; libraries report through amp_error instead. */
#ifndef AMP_LOG_H
#define AMP_LOG_H

#include "amp_error.h"

typedef enum amp_log_level {
    AMP_LOG_ERROR = 0,   /* always shown */
    AMP_LOG_WARN = 1,    /* shown unless -q */
    AMP_LOG_INFO = 2,    /* the normal report; hidden by -q */
    AMP_LOG_DEBUG = 3    /* -v: timings, internals, source locations */
} amp_log_level;

/* Set once by main: the program name used as prefix and the verbosity. */
void amp_log_init(const char *program, amp_log_level level);

/* "PROGRAM: message" on stderr (warnings get "warning: "). */
void amp_log(amp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print a failure from a library: its message, and at debug level the
 * amped source location that raised it. */
void amp_log_error(const amp_error *err);

#endif
