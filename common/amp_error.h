/* Error details and the macros that carry them to one cleanup block.
 *
 * A status code says what kind of failure happened; an amp_error says where
 * and why in words a user can act on ("x.tns:12: expected 4 fields, found 3").
 * Libraries fill an amp_error supplied by the caller and never print; the
 * program's main decides what to show and which exit status to use.
 * The first failure recorded wins, because later ones are usually fallout. */
#ifndef AMP_ERROR_H
#define AMP_ERROR_H

#include <stdarg.h>
#include "amp_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMP_ERROR_MSG_MAX 1024

typedef struct amp_error {
    amp_status status;             /* AMP_OK while nothing has failed */
    char msg[AMP_ERROR_MSG_MAX];   /* the user-facing message, no trailing newline */
    const char *src_file;          /* amped source location that raised it, */
    int src_line;                  /* shown with -v to help bug reports */
} amp_error;

/* Record a failure in err (may be NULL) unless one is already recorded,
 * and return status so that callers can write "return AMP_FAIL(...)". */
amp_status amp_error_set(amp_error *err, amp_status status, const char *src_file,
                         int src_line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
amp_status amp_error_vset(amp_error *err, amp_status status, const char *src_file,
                          int src_line, const char *fmt, va_list ap);

/* Forget a recorded failure (for callers that retry or fall back). */
void amp_error_clear(amp_error *err);

/* A thread's failure (its status, and mine where it recorded one) into err
 * unless another thread's came first (*failed says so, and is set here):
 * the threads of a parallel loop report the first failure whole, file and
 * line included. */
void amp_error_first(amp_error *err, int *failed, amp_status status, const amp_error *mine);

/* "s" unless n is 1: "1 byte", "2 bytes" in messages. */
static inline const char *amp_plural(unsigned long long n)
{
    return n == 1 ? "" : "s";
}

/* The message if one was recorded, else amp_strerror() of the status. */
const char *amp_error_message(const amp_error *err);

#define AMP_FAIL(err, status, ...) \
    amp_error_set((err), (status), __FILE__, __LINE__, __VA_ARGS__)

/* Evaluate call (an amp_status expression); on failure store it in rc and
 * jump to label, where the function releases what it owns. */
#define AMP_CHECK_GOTO(call, rc, label)        \
    do {                                       \
        (rc) = (call);                         \
        if ((rc) != AMP_OK) goto label;        \
    } while (0)

/* Record a failure with a message, store its status in rc and jump. */
#define AMP_RAISE_GOTO(err, rc, label, status, ...)                  \
    do {                                                             \
        (rc) = amp_error_set((err), (status), __FILE__, __LINE__,     \
                             __VA_ARGS__);                           \
        goto label;                                                  \
    } while (0)

/* Return early from a function that owns nothing. */
#define AMP_CHECK(call)                        \
    do {                                       \
        amp_status amp_check_rc_ = (call);     \
        if (amp_check_rc_ != AMP_OK) return amp_check_rc_; \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
