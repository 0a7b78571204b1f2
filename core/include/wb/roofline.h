/* wb/roofline.h (floor cpu): the two ceilings of a device's roofline, compute (GFLOP/s) and memory bandwidth
 * (GB/s), and where they come from. */
#ifndef WB_ROOFLINE_H
#define WB_ROOFLINE_H

#include <wb/abi/cuda.h>
#include <wb/wb.h>

typedef struct wb_roofline {
    double gflops;      /* fp32 */
    double gflops_bf16; /* 0 when not known */
    double gbs;
    const char *how; /* "measured ..." or "not measured: ..." */
} wb_roofline;

/* The cpu's ceilings for `threads` threads: measured by a short calibration (FMA chains, a
 * 64 MiB read) the first time for each thread count, then cached for the process. */
void wb_roofline_cpu(int threads, wb_roofline *out);
/* An accelerator's ceilings from its description: SM count x clock x the architecture's rate per
 * SM, bandwidth from the memory clock and bus width (datasheet figures, not measurements). */
void wb_roofline_from_info(const wb_cuda_info *info, wb_roofline *out);
/* An accelerator's description as its plugin reports it (name, SMs, clocks, versions), or NULL:
 * the cpu, or a device not in use yet. */
const wb_cuda_info *wb_device_accelerator_info(wb_device device);

#endif
