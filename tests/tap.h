/* A tiny TAP producer for C tests (read by automake's tap-driver.sh).
 *
 *   plan(3); ok(x == 1, "x is one"); is_int(a, b, "..."); done_testing();
 *   plan_skip_all("no CUDA device");
 *
 * Failures print the source line and the values compared as TAP comments. */
#ifndef AMP_TAP_H
#define AMP_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_planned = -1, tap_run = 0, tap_failed = 0;

static inline void plan(int n)
{
    tap_planned = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

static inline void plan_skip_all(const char *why)
{
    printf("1..0 # SKIP %s\n", why);
    fflush(stdout);
    exit(0);
}

static inline void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

/* For tests/mutants.sh, which only asks whether a planted bug makes a
 * test fail: with AMP_TAP_BAIL set, the program stops at its first
 * failure, unless that test's number is in AMP_TAP_KNOWN (numbers
 * separated by commas: failures the unmutated program has too). */
static inline int tap_known_failure(int n)
{
    const char *p = getenv("AMP_TAP_KNOWN");
    while (p != NULL && *p != '\0') {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p)
            break;
        if (k == n)
            return 1;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static inline int tap_ok(int pass, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tap_run++;
    if (!pass)
        tap_failed++;
    printf("%sok %d - ", pass ? "" : "not ", tap_run);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!pass)
        printf("#   failed at %s:%d\n", file, line);
    fflush(stdout);
    if (!pass && getenv("AMP_TAP_BAIL") != NULL && !tap_known_failure(tap_run)) {
        printf("Bail out! the first failure (AMP_TAP_BAIL)\n");
        fflush(stdout);
        exit(1);
    }
    return pass;
}

static inline void skip(int n, const char *why)
{
    for (int i = 0; i < n; i++) {
        tap_run++;
        printf("ok %d # SKIP %s\n", tap_run, why);
    }
    fflush(stdout);
}

/* One test for the real tensors of AMP_TEST_DATA (../shared/data) when
 * there are none (n == 0), so that their tests do not vanish unseen: a
 * SKIP with the reason, or, under CI (CI=true, where the data is always
 * there), a failure. Returns the tests it ran (0 or 1) for the plan. */
static inline int tap_real_data(int n, const char *dir)
{
    if (n > 0)
        return 0;
    const char *ci = getenv("CI");
    char why[600];
    snprintf(why, sizeof why, "no real tensors in AMP_TEST_DATA=%s: their tests do not run",
             dir ? dir : "(unset)");
    if (ci != NULL && strcmp(ci, "true") == 0)
        tap_ok(0, __FILE__, __LINE__, "real tensors in AMP_TEST_DATA=%s (CI=true needs "
               "../shared/data)", dir ? dir : "(unset)");
    else
        skip(1, why);
    return 1;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...)                                                          \
    do {                                                                                \
        long long g_ = (long long)(got), w_ = (long long)(want);                        \
        if (!tap_ok(g_ == w_, __FILE__, __LINE__, __VA_ARGS__))                          \
            printf("#   got %lld, expected %lld\n", g_, w_);                             \
    } while (0)

#define is_u64(got, want, ...)                                                          \
    do {                                                                                \
        uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want);                           \
        if (!tap_ok(g_ == w_, __FILE__, __LINE__, __VA_ARGS__))                          \
            printf("#   got %" PRIu64 ", expected %" PRIu64 "\n", g_, w_);               \
    } while (0)

#define is_str(got, want, ...)                                                          \
    do {                                                                                \
        const char *g_ = (got), *w_ = (want);                                           \
        if (!tap_ok(g_ && w_ && strcmp(g_, w_) == 0, __FILE__, __LINE__, __VA_ARGS__))   \
            printf("#   got '%s', expected '%s'\n", g_ ? g_ : "(null)", w_ ? w_ : "(null)"); \
    } while (0)

/* got contains needle; an empty needle (a sidecar's empty line) fails:
 * every string contains it. */
#define like(got, needle, ...)                                                          \
    do {                                                                                \
        const char *g_ = (got), *n_ = (needle);                                         \
        int hit_ = g_ && *n_ && strstr(g_, n_) != NULL;                                 \
        if (!tap_ok(hit_, __FILE__, __LINE__, __VA_ARGS__))                              \
            printf("#   '%s' does not contain '%s'\n", g_ ? g_ : "(null)", n_);          \
    } while (0)

/* Exit status: failures, or a plan that was not followed. */
static inline int done_testing(void)
{
    if (tap_planned < 0)
        printf("1..%d\n", tap_run);
    else if (tap_planned != tap_run)
        printf("# planned %d tests but ran %d\n", tap_planned, tap_run);
    fflush(stdout);
    return tap_failed != 0 || (tap_planned >= 0 && tap_planned != tap_run);
}

#endif
