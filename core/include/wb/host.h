/* wb/host.h (floor cpu): the CPU the core runs on, as the bindings and the executable see it: the
 * raw inputs of the roofline's ceilings (clock, FMA lanes, read bandwidth, caches), the GEMM's
 * cache blocking (shown, forced, refused from the environment) and the one-kernel MLP's phase
 * counts. The CPU kernels' own headers stay inside the core; these are their public face
 * (core/cpu/calibrate.c). */
#ifndef WB_HOST_H
#define WB_HOST_H

#include <stddef.h>
#include <stdint.h>

/* The CPU's maximum clock in MHz (cpufreq), else /proc/cpuinfo's current one; 0 when unknown. */
double wb_cpu_clock_mhz(void);
/* f32 lanes of one FMA instruction on the active CPU path. */
int wb_cpu_fma_lanes(void);
/* Read bandwidth in GB/s over a `bytes` working set split over `threads` threads: the best of
 * `passes` passes after one warming pass. 0 when the buffer cannot be allocated. */
double wb_cpu_measure_read_gbs(int threads, int64_t bytes, int passes);
/* Bytes of the level-1 (data), 2 or 3 cache as the GEMM driver reads them (sysfs); 0 when unknown. */
int64_t wb_host_cache_bytes(int level);

/* The GEMM's register tile and cache blocking on the active CPU path, and the cache sizes the rule
 * used. fixed: the path's own constants (the portable path); forced: how it was forced. */
typedef enum wb_host_blocking_forced {
    WB_HOST_BLOCKING_RULE = 0,
    WB_HOST_BLOCKING_SIZES,
    WB_HOST_BLOCKING_CACHES
} wb_host_blocking_forced;
typedef struct wb_host_blocking {
    const char *isa; /* "avx512", "avx2", "scalar" */
    int mr, nr;
    int64_t kc, mc, nc;
    int64_t l1, l2, l3_share;
    int fixed;
    int split; /* the CPU splits 256-bit vectors in halves: the deep-K regime (kernels' blocking.c) */
    wb_host_blocking_forced forced;
    int first_pass_packs; /* a row-major A (at most 32 slivers over it) and B packed by the tiles' first passes */
} wb_host_blocking;
wb_host_blocking wb_host_blocking_active(void);
/* 0 when the folder (created with mode 0700 where missing) is this user's and no one else's to
 * use, as the generated code's cache requires; else -1 with the reason (wb_error_message). */
int wb_host_private_dir(const char *dir);
/* What to force: kc, mc and nc, or the caches l1, l2 and l3_share the rule then reads (the others 0). */
typedef struct wb_host_blocking_spec {
    int64_t kc, mc, nc;
    int64_t l1, l2, l3_share;
} wb_host_blocking_spec;
/* Parses "kc,mc,nc" or "caches:L1,L2,L3SHARE" (as WB_GEMM_BLOCKING); 0, or -1 with the reason. */
int wb_host_blocking_parse(const char *text, wb_host_blocking_spec *spec, char *why, size_t why_len);
/* Forces spec on every later GEMM (NULL: back to the rule); 0, or -1 with the reason. */
int wb_host_blocking_force(const wb_host_blocking_spec *spec, char *why, size_t why_len);
/* "WB_GEMM_BLOCKING=...: <reason>" when the environment's value was refused, else NULL: a program
 * must then refuse to start (the GEMM would fall back to the rule silently). */
const char *wb_host_blocking_env_error(void);
/* WB_CPU_ISA's or WB_CPU_BF16's (`var`) value when it cannot be had, in one line, else NULL:
 * *fatal 1 for a name that is no path (refuse to start), 0 for one this CPU cannot run (say it). */
const char *wb_host_cpu_env_error(const char *var, int *fatal);

/* The one-kernel MLP's phase times, counted only when asked (the clock is read per phase of a
 * block): packing x, the gated GEMM, the down GEMM, and the threads' whole time in the kernel. */
typedef struct wb_host_mlp_phases {
    int64_t runs;
    int64_t pack_x_ns, gated_ns, down_ns, total_ns;
} wb_host_mlp_phases;
/* on: zero the counts and count the runs that follow; off: stop counting (the counts stay). */
void wb_host_mlp_phases_count(int on);
wb_host_mlp_phases wb_host_mlp_phases_read(void);

/* The CPU GEMM's phase times, counted only when asked: each thread's CPU time packing A, packing
 * B (none for prepacked weights), in the register tiles and in a generated epilogue, its whole
 * time in the GEMM, the calling thread's wall time from fork to join, and that times the team.
 * Sums over threads and runs; the bf16 driver's own work around the GEMM is in none. */
typedef struct wb_host_gemm_phases {
    int64_t runs;
    int64_t pack_a_ns, pack_b_ns, tiles_ns, epilogue_ns, total_ns, wall_ns, wall_team_ns;
} wb_host_gemm_phases;
void wb_host_gemm_phases_count(int on);
wb_host_gemm_phases wb_host_gemm_phases_read(void);
/* The active path's register tile alone at depth kc (`iters` calls on operands kept in cache),
 * stored plain or, as a dual tile, through the GeGLU or SwiGLU activation: GFLOP/s of one thread
 * (the multiply-adds only), or -1 when out of memory. */
typedef enum wb_host_tile_store { WB_HOST_TILE_PLAIN, WB_HOST_TILE_GEGLU, WB_HOST_TILE_SWIGLU } wb_host_tile_store;
double wb_host_gemm_tile_gflops(int64_t kc, int64_t iters, wb_host_tile_store store);

#endif
