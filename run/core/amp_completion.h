/* CP completion's pieces that every backend shares (amp_core.h has its
 * options): which stored entries --holdout keeps out of the fit, and the
 * test entries of --holdout-file in the run's (compact) numbering.
 * Nothing here prints or exits. */
#ifndef AMP_COMPLETION_H
#define AMP_COMPLETION_H

#include <stdint.h>

#include "amp_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define AMP_COMPLETION_INLINE __host__ __device__ __forceinline__
#else
#define AMP_COMPLETION_INLINE inline
#endif

/* A row's system counts as singular where a squared Cholesky pivot is at
 * or below AMP_COMPLETION_PIVOT R eps times its largest diagonal entry
 * (ridge included): rounding alone leaves pivots near R eps there when
 * the row has fewer entries than the rank, and the solve would be noise. */
#define AMP_COMPLETION_PIVOT 1000.0

/* SplitMix64's finalizer: every input bit moves every output bit. */
static AMP_COMPLETION_INLINE uint64_t amp_completion_mix(uint64_t z)
{
    z += UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* The holdout draw of one entry: a number in [0, 1) from its ORIGINAL
 * coordinates (0-based, the file's own, whatever amped-prep's relabelling
 * and shards) and the seed, folded mode by mode. The entry is a test
 * entry where the draw is below the holdout fraction, so the selection is
 * the same whatever the layout, the thread count or the backend, and a
 * smaller fraction selects a subset of a larger one's. */
static AMP_COMPLETION_INLINE double amp_holdout_draw(const uint64_t *orig, unsigned nmodes,
                                                     uint64_t seed)
{
    uint64_t h = amp_completion_mix(seed ^ UINT64_C(0x6a09e667f3bcc909));
    for (unsigned m = 0; m < nmodes; m++)
        h = amp_completion_mix(h ^ orig[m]);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

/* The test set of n entries given by their original 0-based coordinates
 * (ind[m][k], each below t->dims[m]: checked by the caller) and values,
 * in t's compact numbering (AMP_TEST_NO_ROW for a slice t has no nonzero
 * in). t: a layout at least (amp_tensor_load_layout). Free with
 * amp_test_set_free. */
amp_status amp_test_set_build(const amp_tensor *t, uint64_t n, uint64_t *const *ind,
                              const double *val, amp_test_set *out, amp_error *err);
void amp_test_set_free(amp_test_set *s);

/* --holdout-file: FROSTT text (a line an entry: t->nmodes 1-based indices
 * and a value; blank lines and '#' comments skipped), each index checked
 * against t's dimensions, into *out as amp_test_set_build gives it. A bad
 * line fails naming the file and the line (AMP_ERR_PARSE, or
 * AMP_ERR_RANGE for an index outside the tensor); no entry at all is
 * AMP_ERR_PARSE; repeated coordinates are separate entries. Written here
 * rather than taken from amped-prep's reader (prep/) because run/ may not
 * include prep (tests/layout.sh); its rules are the same for these
 * files. */
amp_status amp_test_set_read(const amp_tensor *t, const char *path, amp_test_set *out,
                             amp_error *err);

#ifdef __cplusplus
}
#endif
#endif
