/* The library's one clock: CLOCK_MONOTONIC, for stats and session metering. */
#include <time.h>

#include "wire.h"

double tsafe_lora_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}
