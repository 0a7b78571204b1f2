/* calibrate.c: the raw measurements and machine facts the roofline's ceilings are built from:
 * the nominal clock and read bandwidth over a working set of a given size (so that L2, L3 and
 * DRAM each get their own ceiling); the cache sizes come from the CPU kernels, whose GEMM driver
 * reads them too (wb_cpu_cache_bytes). Repeating, keeping the best, checking the
 * spread and caching per machine are the Lua side's job (scripts/wb/calibrate.lua). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <wb_kernels/gemm.h>
#include <wb_kernels/mlp.h>
#include <wb/host.h>
#include <wb/clock.h>
#include <wb/peer.h>

#include "codegen_store.h"

double wb_cpu_clock_mhz(void) {
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    if (f) {
        long khz = 0;
        int ok = fscanf(f, "%ld", &khz) == 1;
        fclose(f);
        if (ok && khz > 0) return khz / 1000.0;
    }
    f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[256];
    double mhz = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1 || sscanf(line, "cpu MHz\t: %lf", &mhz) == 1) break;
    fclose(f);
    return mhz;
}

int wb_cpu_fma_lanes(void) { return wb_cpu_isa_active()->lanes; }

static volatile double sink;

/* One timed pass: `sweeps` reads of buf[0, n) split over the threads. It reads only its own
 * buffer, in bounds by construction; left uninstrumented in the sanitizer build, where checking
 * each load would time the sanitizer instead of the memory (and take minutes of its tests). */
__attribute__((no_sanitize("address", "undefined"))) static double read_pass(const float *buf, int64_t n,
                                                                             int64_t sweeps, int threads) {
    double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        /* 32 independent sums: the compiler vectorises them without reassociating anything,
         * so the loop is bound by loads, not by the latency of one chain of adds */
        float acc[32] = {0};
        for (int64_t r = 0; r < sweeps; r++) {
#pragma omp for schedule(static) nowait
            for (int64_t i = 0; i < n - 31; i += 32)
                for (int k = 0; k < 32; k++)
                    acc[k] += buf[i + k];
        }
        for (int k = 0; k < 32; k++)
            total += acc[k];
    }
    return total;
}

double wb_cpu_measure_read_gbs(int threads, int64_t bytes, int passes) {
    static float *buf;
    static int64_t have;
    int64_t n = bytes / (int64_t)sizeof(float);
    n -= n % 32;
    if (n < 32 * threads || passes < 1) return 0;
    if (n > have) {
        free(buf);
        buf = malloc((size_t)n * sizeof(float));
        if (!buf) {
            have = 0;
            return 0;
        }
        have = n;
        for (int64_t i = 0; i < n; i++)
            buf[i] = (float)(i & 7);
    }
    if (threads < 1) threads = 1;
    /* a pass reads at least 256 MiB (a small working set many times over, each thread its own
     * share: it stays in that thread's cache), so fork and join cost nothing in the figure */
    int64_t sweeps = ((int64_t)256 << 20) / (n * (int64_t)sizeof(float)) + 1;
    double best = 0;
    for (int rep = 0; rep <= passes; rep++) { /* pass 0 warms the caches (and the pages) */
        int64_t t0 = wb_now_ns();
        sink = read_pass(buf, n, sweeps, threads);
        double gbs = (double)sweeps * (double)n * sizeof(float) / (double)(wb_now_ns() - t0);
        if (rep > 0 && gbs > best) best = gbs;
    }
    return best;
}

/* ---- the public face of the CPU kernels' facts (wb/host.h) ------------------------------- */

int64_t wb_host_cache_bytes(int level) { return wb_cpu_cache_bytes(level); }

wb_host_blocking wb_host_blocking_active(void) {
    const wb_cpu_isa *isa = wb_cpu_isa_active();
    wb_gemm_blocking b = wb_gemm_blocking_of(isa);
    return (wb_host_blocking){.isa = isa->name,
                              .mr = isa->mr,
                              .nr = isa->nr,
                              .kc = b.kc,
                              .mc = b.mc,
                              .nc = b.nc,
                              .l1 = b.l1,
                              .l2 = b.l2,
                              .l3_share = b.l3_share,
                              .fixed = b.fixed,
                              .split = b.split,
                              .first_pass_packs = isa->first_pass_packs && wb_gemm_first_pass_packs_on(),
                              .forced = b.forced == WB_BLOCKING_FORCED_SIZES    ? WB_HOST_BLOCKING_SIZES
                                        : b.forced == WB_BLOCKING_FORCED_CACHES ? WB_HOST_BLOCKING_CACHES
                                                                                : WB_HOST_BLOCKING_RULE};
}

int wb_host_private_dir(const char *dir) {
    int fd = wb_store_open(dir);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

int wb_host_blocking_parse(const char *text, wb_host_blocking_spec *spec, char *why, size_t why_len) {
    wb_gemm_blocking_spec s = {0};
    if (wb_gemm_blocking_parse(text, &s, why, why_len)) return -1;
    *spec = (wb_host_blocking_spec){.kc = s.kc, .mc = s.mc, .nc = s.nc, .l1 = s.l1, .l2 = s.l2, .l3_share = s.l3_share};
    return 0;
}

int wb_host_blocking_force(const wb_host_blocking_spec *spec, char *why, size_t why_len) {
    if (!spec) return wb_gemm_blocking_force(NULL, why, why_len);
    wb_gemm_blocking_spec s = {
        .kc = spec->kc, .mc = spec->mc, .nc = spec->nc, .l1 = spec->l1, .l2 = spec->l2, .l3_share = spec->l3_share};
    return wb_gemm_blocking_force(&s, why, why_len);
}

const char *wb_host_blocking_env_error(void) { return wb_gemm_blocking_env_error(); }

const char *wb_host_cpu_env_error(const char *var, int *fatal) { return wb_cpu_env_error(var, fatal); }

void wb_host_mlp_phases_count(int on) { wb_mlp_phases_count(on); }

double wb_host_gemm_tile_gflops(int64_t kc, int64_t iters, wb_host_tile_store store) {
    const wb_gemm_store s = store == WB_HOST_TILE_GEGLU    ? WB_STORE_GEGLU
                            : store == WB_HOST_TILE_SWIGLU ? WB_STORE_SWIGLU
                                                           : WB_STORE_PLAIN;
    return wb_gemm_tile_gflops(wb_cpu_isa_active(), kc, iters, s);
}

void wb_host_gemm_phases_count(int on) { wb_gemm_phases_count(on); }

wb_host_gemm_phases wb_host_gemm_phases_read(void) {
    wb_gemm_phases ph = wb_gemm_phases_read();
    return (wb_host_gemm_phases){.runs = ph.runs,
                                 .pack_a_ns = ph.pack_a_ns,
                                 .pack_b_ns = ph.pack_b_ns,
                                 .tiles_ns = ph.tiles_ns,
                                 .epilogue_ns = ph.epilogue_ns,
                                 .total_ns = ph.total_ns,
                                 .wall_ns = ph.wall_ns,
                                 .wall_team_ns = ph.wall_team_ns};
}

wb_host_mlp_phases wb_host_mlp_phases_read(void) {
    wb_mlp_phases ph = wb_mlp_phases_read();
    return (wb_host_mlp_phases){.runs = ph.runs,
                                .pack_x_ns = ph.pack_x_ns,
                                .gated_ns = ph.gated_ns,
                                .down_ns = ph.down_ns,
                                .total_ns = ph.total_ns};
}
