#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_parse.h"

/* strtoull accepts leading blanks and a minus sign (and wraps negatives);
 * an option value must be digits only. */
static int parse_digits(const char *text, const char **end, uint64_t *out)
{
    if (!isdigit((unsigned char)text[0]))
        return 0;
    errno = 0;
    char *e;
    unsigned long long v = strtoull(text, &e, 10);
    if (errno == ERANGE)
        return -1;
    *end = e;
    *out = v;
    return 1;
}

amp_status amp_parse_u64(const char *text, uint64_t min, uint64_t max,
                         const char *option, uint64_t *out, amp_error *err)
{
    const char *end = NULL;
    uint64_t v = 0;
    int ok = parse_digits(text, &end, &v);
    if (ok <= 0 || *end != '\0' || v < min || v > max)
        return AMP_FAIL(err, AMP_ERR_USAGE,
                        "invalid value '%s' for %s: expected an integer from %" PRIu64
                        " to %" PRIu64, text, option, min, max);
    *out = v;
    return AMP_OK;
}

amp_status amp_parse_size(const char *text, uint64_t min, uint64_t max,
                          const char *option, uint64_t *out, amp_error *err)
{
    const char *end = NULL;
    uint64_t v = 0;
    int ok = parse_digits(text, &end, &v);
    unsigned shift = 0;
    if (ok > 0 && *end != '\0') {
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        default: ok = 0;
        }
        end++;
        if (ok > 0 && *end != '\0' && strcmp(end, "iB") != 0 && strcmp(end, "B") != 0)
            ok = 0;
    }
    if (ok > 0 && shift && v > (UINT64_MAX >> shift))
        ok = 0;
    if (ok > 0)
        v <<= shift;
    if (ok <= 0 || v < min || v > max)
        return AMP_FAIL(err, AMP_ERR_USAGE,
                        "invalid value '%s' for %s: expected a size from %" PRIu64
                        " to %" PRIu64 " bytes (suffixes K, M, G, T allowed)",
                        text, option, min, max);
    *out = v;
    return AMP_OK;
}

amp_status amp_parse_double(const char *text, double min, double max,
                            const char *option, double *out, amp_error *err)
{
    char *end = NULL;
    errno = 0;
    double v = text[0] != '\0' && !isspace((unsigned char)text[0]) ? strtod(text, &end) : NAN;
    /* A number that parses but has no double: "from 0 to 1" would not say
     * what is wrong with 1e-400. */
    if (end != NULL && end != text && *end == '\0' && errno == ERANGE)
        return AMP_FAIL(err, AMP_ERR_USAGE,
                        "invalid value '%s' for %s: too %s for a double (whose magnitudes "
                        "run from %g to %g, and 0); expected a number from %g to %g", text,
                        option, fabs(v) < 1 ? "small" : "large", DBL_MIN, DBL_MAX, min, max);
    if (end == NULL || end == text || *end != '\0' || errno == ERANGE || !isfinite(v) ||
        v < min || v > max)
        return AMP_FAIL(err, AMP_ERR_USAGE,
                        "invalid value '%s' for %s: expected a number from %g to %g",
                        text, option, min, max);
    *out = v;
    return AMP_OK;
}

amp_status amp_parse_u64_list(const char *text, size_t max_count, uint64_t min,
                              uint64_t max, const char *option, uint64_t *out,
                              size_t *count, amp_error *err)
{
    size_t n = 0;
    const char *p = text;
    for (;;) {
        const char *end = NULL;
        uint64_t v = 0;
        if (n == max_count || parse_digits(p, &end, &v) <= 0 || v < min || v > max ||
            (*end != ',' && *end != '\0'))
            return AMP_FAIL(err, AMP_ERR_USAGE,
                            "invalid value '%s' for %s: expected up to %zu comma-separated "
                            "integers from %" PRIu64 " to %" PRIu64,
                            text, option, max_count, min, max);
        out[n++] = v;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    *count = n;
    return AMP_OK;
}

amp_status amp_parse_choice(const char *text, const char *const *choices,
                            const char *option, int *out, amp_error *err)
{
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; choices[i] != NULL; i++) {
        if (strcmp(text, choices[i]) == 0) {
            *out = i;
            return AMP_OK;
        }
        int w = snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "", choices[i]);
        if (w > 0 && (size_t)w < sizeof list - used)
            used += (size_t)w;
    }
    return AMP_FAIL(err, AMP_ERR_USAGE, "invalid value '%s' for %s: expected one of %s",
                    text, option, list);
}
