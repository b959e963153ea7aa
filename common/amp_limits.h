/* Limits shared by the tensor readers, the .amp format and the runner. */
#ifndef AMP_LIMITS_H
#define AMP_LIMITS_H

#include <stdint.h>

/* The most modes a tensor may have. Sixteen is what the papers' data need;
 * 32 leaves room while keeping per-thread state small. */
#define AMP_MAX_MODES 32
/* Indices are stored 0-based in 64 bits; a dimension may be up to 2^63. */
#define AMP_MAX_INDEX ((uint64_t)INT64_MAX)

#endif
