/* Monotonic wall-clock time for phase timings and rates. */
#ifndef AMP_TIMER_H
#define AMP_TIMER_H

/* Seconds since an arbitrary fixed point; never goes backwards. */
double amp_now(void);

#endif
