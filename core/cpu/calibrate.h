/* calibrate.h: raw inputs of the roofline's ceilings (see calibrate.c). */
#ifndef WB_CALIBRATE_H
#define WB_CALIBRATE_H
#include <stdint.h>

#include <wb_kernels/gemm.h> /* wb_cpu_cache_bytes: the GEMM driver reads the cache sizes too */
/* The CPU's maximum clock in MHz (cpufreq), else /proc/cpuinfo's current one; 0 when unknown. */
double wb_cpu_clock_mhz(void);
/* f32 lanes of one FMA instruction on the active CPU path. */
int wb_cpu_fma_lanes(void);
/* Read bandwidth in GB/s over a `bytes` working set split over `threads` threads: the best of
 * `passes` passes after one warming pass. 0 when the buffer cannot be allocated. */
double wb_cpu_measure_read_gbs(int threads, int64_t bytes, int passes);

#endif
