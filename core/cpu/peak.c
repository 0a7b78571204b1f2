/* peak.c: the measured limits benchmarks quote against (GFLOP/s of the active CPU path, read
 * bandwidth), timed with the one clock (clock.h). */
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <wb_kernels/gemm.h>
#include <wb/clock.h>
#include <wb/peer.h>

static volatile double sink;

double wb_cpu_measure_peak_gflops(int threads, double ms) {
    const wb_cpu_isa *isa = wb_cpu_isa_active();
    const double flops_per_iter = 2.0 * 12 * isa->lanes;
    int64_t iters = 1 << 16;
    /* Calibrate on one thread until one run takes ~5 ms, then scale to the requested time. */
    for (;;) {
        int64_t t0 = wb_now_ns();
        sink = isa->fma_loop(iters);
        int64_t dt = wb_now_ns() - t0;
        if (dt > 5000000 || iters > ((int64_t)1 << 40)) {
            iters = (int64_t)((double)iters * (ms * 1e6) / (double)dt) + 1;
            break;
        }
        iters *= 4;
    }
    if (threads < 1) threads = 1;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) { /* best of 3: the peak is a maximum, not a median */
        int64_t t0 = wb_now_ns();
#pragma omp parallel num_threads(threads)
        sink = isa->fma_loop(iters);
        double gflops = flops_per_iter * (double)iters * threads / (double)(wb_now_ns() - t0);
        if (gflops > best) best = gflops;
    }
    return best;
}

/* Read bandwidth from a buffer far larger than the caches (64 MiB), GB/s: `threads` threads
 * each sum their share; best of three. */
double wb_cpu_measure_bandwidth_gbs(int threads) {
    const int64_t n = (int64_t)16 << 20; /* floats */
    static float *buf;
    if (!buf) {
        buf = malloc((size_t)n * sizeof(float));
        if (!buf) return 0;
        for (int64_t i = 0; i < n; i++)
            buf[i] = (float)(i & 7);
    }
    if (threads < 1) threads = 1;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double total = 0;
        int64_t t0 = wb_now_ns();
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
        for (int64_t i = 0; i < n; i += 16) {
            float s = 0;
            for (int k = 0; k < 16; k++)
                s += buf[i + k];
            total += s;
        }
        sink = total;
        double gbs = (double)n * sizeof(float) / (double)(wb_now_ns() - t0);
        if (gbs > best) best = gbs;
    }
    return best;
}
