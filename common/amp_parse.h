/* Range-checked parsing of command-line numbers.
 *
 * Each function accepts the whole string or nothing: "12x", "", " 3" and
 * values outside [min, max] fail with AMP_ERR_USAGE and a message naming
 * the option, e.g. "invalid value '0' for --rank: expected 1 to 512". */
#ifndef AMP_PARSE_H
#define AMP_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "amp_error.h"

amp_status amp_parse_u64(const char *text, uint64_t min, uint64_t max,
                         const char *option, uint64_t *out, amp_error *err);

/* Like amp_parse_u64 with an optional binary suffix: K, M, G, T (also KiB,
 * MiB, ...), so "--device-memory 8G" means 8 * 2^30 bytes. */
amp_status amp_parse_size(const char *text, uint64_t min, uint64_t max,
                          const char *option, uint64_t *out, amp_error *err);

/* Finite doubles only; NaN and infinities are refused. */
amp_status amp_parse_double(const char *text, double min, double max,
                            const char *option, double *out, amp_error *err);

/* A comma-separated list of 1..max_count integers, each in [min, max]. */
amp_status amp_parse_u64_list(const char *text, size_t max_count, uint64_t min,
                              uint64_t max, const char *option, uint64_t *out,
                              size_t *count, amp_error *err);

/* Index of text in the NULL-terminated choices, or AMP_ERR_USAGE with a
 * message listing them. */
amp_status amp_parse_choice(const char *text, const char *const *choices,
                            const char *option, int *out, amp_error *err);

#endif
