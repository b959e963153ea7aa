/* A one-line progress bar on stderr: phase, percent, rate and ETA.
 *
 * It draws only when stderr is a terminal and the program is not quiet, so
 * logs and pipes stay clean. Call amp_progress_update from one thread at a
 * time (it keeps no lock). */
#ifndef AMP_PROGRESS_H
#define AMP_PROGRESS_H

#include <stdint.h>

typedef struct amp_progress {
    const char *phase;
    const char *unit;     /* "B" rates print as MB/s, others as k or M unit/s;
                           * NULL for steps (modes, say): no rate shown */
    uint64_t total;       /* 0 when unknown: then no percent or ETA */
    double start, last_draw;
    int enabled, drawn;
} amp_progress;

/* enabled: the caller's wish (e.g. not -q); the terminal check is added. */
void amp_progress_begin(amp_progress *p, const char *phase, const char *unit,
                        uint64_t total, int enabled);
void amp_progress_update(amp_progress *p, uint64_t done);
/* A new phase on the same line (its name, unit and total, as for
 * amp_progress_begin), drawn at once: a phase that reports no progress of
 * its own (one call that returns when done) still shows what is going
 * on. */
void amp_progress_phase(amp_progress *p, const char *phase, const char *unit, uint64_t total);
/* Erase the line so the next message starts clean. */
void amp_progress_end(amp_progress *p);

/* Adapter for library progress callbacks: ctx is an amp_progress. */
void amp_progress_callback(void *ctx, uint64_t done, uint64_t total);
/* The same for a library's phase callbacks (amp_gpu_opts.phase). */
void amp_progress_phase_callback(void *ctx, const char *phase, const char *unit,
                                 uint64_t total);

#endif
