/* roofline.c: the ceilings of each device's roofline (see roofline.h). */
#include <wb/peer.h>
#include <wb/roofline.h>

#include "backend.h"

void wb_roofline_cpu(int threads, wb_roofline *out) {
    static struct {
        int threads;
        double gflops, gbs;
    } cache[16];
    int slot = -1;
    for (int i = 0; i < 16 && slot < 0; i++)
        if (cache[i].threads == threads || cache[i].threads == 0) slot = i;
    if (slot < 0) slot = 0;
    if (cache[slot].threads != threads) {
        cache[slot].threads = threads;
        cache[slot].gflops = wb_cpu_measure_peak_gflops(threads, 50);
        cache[slot].gbs = wb_cpu_measure_bandwidth_gbs(threads);
    }
    *out = (wb_roofline){.gflops = cache[slot].gflops,
                         .gbs = cache[slot].gbs,
                         .how = "measured at first use by a short calibration (FMA chains; a 64 MiB read) and cached"};
}

void wb_roofline_from_info(const wb_cuda_info *ci, wb_roofline *out) {
    double ghz = ci->clock_khz / 1e6;
    *out = (wb_roofline){
        .gflops = ci->sm_count * 128.0 * 2.0 * ghz,                                /* fp32 FMA lanes per SM: 128 */
        .gflops_bf16 = ci->sm_count * (ci->cc_major >= 9 ? 4096.0 : 2048.0) * ghz, /* dense bf16 tensor cores */
        .gbs = 2.0 * ci->mem_clock_khz * 1e3 * ci->bus_width_bits / 8.0 / 1e9,
        .how = "not measured: peaks are SM count x clock x the architecture's rate per SM; bandwidth from the memory "
               "clock and bus width"};
}

const wb_cuda_info *wb_device_accelerator_info(wb_device device) {
    if ((unsigned)device >= WB_DEVICE_COUNT) return NULL;
    const wb_backend *b = wb_backend_get(device);
    return b->info ? b->info() : NULL;
}
