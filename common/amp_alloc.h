/* Allocations that say what failed and how big it was.
 *
 * amp_alloc: cache-line aligned, for ordinary buffers.
 * amp_huge_*: anonymous mappings advised to use transparent huge pages, for
 * the nonzero arrays (gigabytes): fewer TLB misses and page faults, and a
 * growing array is remapped instead of copied. */
#ifndef AMP_ALLOC_H
#define AMP_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "amp_error.h"

#define AMP_CACHE_LINE 64

void *amp_alloc(size_t bytes, const char *what, amp_error *err);
void *amp_calloc(size_t count, size_t size, const char *what, amp_error *err);
void amp_free(void *p);

void *amp_huge_alloc(size_t bytes, const char *what, amp_error *err);
/* Grow or shrink keeping the contents; on failure p stays valid. */
void *amp_huge_realloc(void *p, size_t old_bytes, size_t new_bytes, const char *what,
                       amp_error *err);
void amp_huge_free(void *p, size_t bytes);

/* a * b, or AMP_ERR_RANGE if it does not fit in size_t. */
amp_status amp_mul_size(size_t a, size_t b, size_t *out, amp_error *err);

/* Bytes of host memory available: MemAvailable (free plus what the page
 * cache would give back), or the free pages where there is no /proc;
 * UINT64_MAX when neither says. */
uint64_t amp_host_memory_available(void);

/* "1.50 GiB": binary units, three significant digits. */
const char *amp_format_bytes(char *buf, size_t n, uint64_t bytes);

#endif
