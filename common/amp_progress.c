#include <config.h>

#include <stdio.h>
#include <unistd.h>

#include "amp_progress.h"
#include "amp_timer.h"

/* Redrawing more often than this costs time and flickers. */
#define PROGRESS_MIN_INTERVAL 0.1

void amp_progress_begin(amp_progress *p, const char *phase, const char *unit,
                        uint64_t total, int enabled)
{
    p->phase = phase;
    p->unit = unit;
    p->total = total;
    p->start = amp_now();
    p->last_draw = 0;
    p->drawn = 0;
    p->enabled = enabled && isatty(STDERR_FILENO);
}

static void format_eta(char *buf, size_t n, double seconds)
{
    if (seconds < 0 || seconds > 360000) {
        snprintf(buf, n, "--:--");
        return;
    }
    unsigned s = (unsigned)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, n, "%u:%02u:%02u", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, n, "%u:%02u", s / 60, s % 60);
}

void amp_progress_update(amp_progress *p, uint64_t done)
{
    if (!p->enabled)
        return;
    double now = amp_now();
    if (p->drawn && now - p->last_draw < PROGRESS_MIN_INTERVAL)
        return;
    p->last_draw = now;
    p->drawn = 1;
    double elapsed = now - p->start;
    double rate = elapsed > 0 ? (double)done / elapsed : 0;
    char pct_s[16] = "", rate_s[32] = "", eta_s[32] = "";
    if (p->unit == NULL) {
        /* Steps of uneven size, a mode each say: a rate of them means little. */
    } else if (p->unit[0] == 'B' && p->unit[1] == '\0') {
        snprintf(rate_s, sizeof rate_s, "  %.1f MB/s", rate / 1e6);
    } else if (rate >= 1e6) {
        snprintf(rate_s, sizeof rate_s, "  %.1f M%s/s", rate / 1e6, p->unit);
    } else {
        snprintf(rate_s, sizeof rate_s, "  %.1f k%s/s", rate / 1e3, p->unit);
    }
    if (p->total > 0) {
        snprintf(pct_s, sizeof pct_s, " %5.1f%%", 100.0 * (double)done / (double)p->total);
        if (rate > 0) {
            char eta[16];
            format_eta(eta, sizeof eta,
                       (double)(p->total - (done < p->total ? done : p->total)) / rate);
            snprintf(eta_s, sizeof eta_s, "  ETA %s", eta);
        }
    }
    fprintf(stderr, "\r%-12s%s%s%s\033[K", p->phase, pct_s, rate_s, eta_s);
    fflush(stderr);
}

void amp_progress_phase(amp_progress *p, const char *phase, const char *unit, uint64_t total)
{
    p->phase = phase;
    p->unit = unit;
    p->total = total;
    p->start = amp_now();
    /* The interval since the last phase's draw must not hide this one. */
    p->drawn = 0;
    amp_progress_update(p, 0);
}

void amp_progress_end(amp_progress *p)
{
    if (p->enabled && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->drawn = 0;
}

void amp_progress_callback(void *ctx, uint64_t done, uint64_t total)
{
    amp_progress *p = ctx;
    if (total != 0)
        p->total = total;
    amp_progress_update(p, done);
}

void amp_progress_phase_callback(void *ctx, const char *phase, const char *unit,
                                 uint64_t total)
{
    amp_progress_phase(ctx, phase, unit, total);
}
