/* The GPU transfer format: a mode copy packed one 64-bit word per nonzero
 * for streaming to a GPU over the host link. Plain C, so the CPU-only
 * tests check it too. Nothing here prints or exits. */
#ifndef AMP_STREAM_PACK_H
#define AMP_STREAM_PACK_H

#include "amp_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A mode copy packed one 64-bit word per nonzero for streaming to a GPU:
 * the other modes' indices from bit 0 (shift, width as in a layout; the
 * output mode's shift is 64: the row is the key of its run), and above
 * them the value as an integer q (two's complement when a value is
 * negative), value = q / 10^decimals
 * in the value's type. Runs of equal output rows: run_start (nruns + 1)
 * and run_row. */
typedef struct amp_stream_copy {
    uint64_t nnz;
    uint64_t *words;
    size_t nruns;
    uint64_t *run_start, *run_row;
    uint8_t shift[AMP_MAX_MODES], width[AMP_MAX_MODES];
    unsigned qshift, qbits, decimals;
    int qsigned;               /* q is two's complement; else unsigned */
} amp_stream_copy;

/* Pack copy d on `threads` threads (0: the OpenMP default); *packed is 0 (and s empty) when a
 * value is not q / 10^k exactly for k <= 9 or the bits exceed 64. */
amp_status amp_stream_pack(const amp_tensor *t, unsigned d, int threads, amp_stream_copy *s,
                           int *packed, amp_error *err);
void amp_stream_copy_free(amp_stream_copy *s);
/* The value a packed word holds (f32 values when f32 is set). */
double amp_stream_value(const amp_stream_copy *s, uint64_t word, int f32);

#ifdef __cplusplus
}
#endif
#endif
