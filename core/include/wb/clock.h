/* wb/clock.h (floor base): the workbench's one clock, CLOCK_MONOTONIC in nanoseconds, for every timestamp and
 * duration the core and the bindings take (events, runtime calls, timers, thread adaptation).
 * Inline: the profiler reads it twice per op. The kernels, below the core, stamp their spans and
 * the CUDA plugin its records on the same CLOCK_MONOTONIC, so all of them share one time axis. */
#ifndef WB_CLOCK_H
#define WB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t wb_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
