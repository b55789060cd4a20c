/* The monotonic clock for timings (internal to the libraries and the
 * tool): one definition instead of a clock_gettime wrapper per file. Not
 * for anything secret-dependent; reads CLOCK_MONOTONIC, never fails on
 * Linux. */
#ifndef TSAFE_CLOCK_H
#define TSAFE_CLOCK_H

#include <time.h>

/* Seconds since an arbitrary fixed point. */
static inline double tsafe_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double tsafe_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static inline double tsafe_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

#endif
