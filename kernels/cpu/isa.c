/* isa.c: picks the GEMM/activation path at run time: the best one the CPU supports
 * (__builtin_cpu_supports), or the one WB_CPU_ISA names when the CPU can run it; and reads cpu0's
 * cache sizes from sysfs (wb_cpu_cache_bytes, wb_cpu_cache_shared_by: the GEMM driver's blocking
 * and prefetch rules, the roofline's calibration). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wb_kernels/gemm.h"
#include "wb_kernels/spans.h" /* wb_cpu_clock_ns */

extern const wb_cpu_isa wb_cpu_isa_scalar, wb_cpu_isa_avx2, wb_cpu_isa_avx512, wb_cpu_isa_avx512bf16,
    wb_cpu_isa_avx2bf16, wb_cpu_isa_bf16emu;

static const wb_cpu_isa *active;

static int supported(const wb_cpu_isa *isa) {
    __builtin_cpu_init();
    if (isa == &wb_cpu_isa_avx512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
    if (isa == &wb_cpu_isa_avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == &wb_cpu_isa_avx512bf16) return supported(&wb_cpu_isa_avx512) && __builtin_cpu_supports("avx512bf16");
    if (isa == &wb_cpu_isa_avx2bf16) return supported(&wb_cpu_isa_avx2);
    return 1;
}

int wb_cpu_vectors_split(void) {
    __builtin_cpu_init();
    return __builtin_cpu_is("znver1"); /* family 17h below model 30h: Zen 1 and Zen+ */
}

const wb_cpu_isa *wb_cpu_isa_get(const char *name) {
    const wb_cpu_isa *all[] = {&wb_cpu_isa_avx512, &wb_cpu_isa_avx2, &wb_cpu_isa_scalar};
    for (int i = 0; i < 3; i++)
        if (!strcmp(all[i]->name, name)) return supported(all[i]) ? all[i] : NULL;
    return NULL;
}

const wb_cpu_isa *wb_cpu_isa_active(void) {
    if (active) return active;
    const char *env = getenv("WB_CPU_ISA");
    if (env && *env) active = wb_cpu_isa_get(env); /* (an unknown or unsupported name: wb_cpu_env_error) */
    if (!active)
        active = supported(&wb_cpu_isa_avx512) ? &wb_cpu_isa_avx512
                 : supported(&wb_cpu_isa_avx2) ? &wb_cpu_isa_avx2
                                               : &wb_cpu_isa_scalar;
    return active;
}

int wb_cpu_isa_set(const char *name) {
    const wb_cpu_isa *isa = wb_cpu_isa_get(name);
    if (!isa) return 0;
    active = isa;
    return 1;
}

static const wb_cpu_isa *bf16_active;
static int bf16_chosen, bf16_forced;

static const wb_cpu_isa *bf16_named(const char *name) {
    if (!strcmp(name, "avx512bf16")) return supported(&wb_cpu_isa_avx512bf16) ? &wb_cpu_isa_avx512bf16 : NULL;
    if (!strcmp(name, "avx2bf16")) return supported(&wb_cpu_isa_avx2bf16) ? &wb_cpu_isa_avx2bf16 : NULL;
    if (!strcmp(name, "emulated")) return &wb_cpu_isa_bf16emu;
    return NULL;
}

static void bf16_init(void) {
    if (bf16_chosen) return;
    bf16_chosen = 1;
    const char *env = getenv("WB_CPU_BF16");
    if (env && *env && strcmp(env, "auto")) {
        bf16_forced = 1;
        bf16_active = bf16_named(env); /* "widen" (or an unsupported name): no pair path */
    }
}

/* Up to this many rows the pair path wins wherever it exists: reading the weights dominates and
 * pairs halve their bytes. Measured (linear 768 -> 3072, 1 thread, bf16 pairs vs f32): on an
 * AVX2 core (k-pairs widened in registers) 2.0-2.1x at 1 token, 1.2-1.7x at 4, 0.95-1.06x at
 * 8, 0.76-0.79x at 128; on the AVX512_BF16 Xeon (vdpbf16ps at half the FMA rate) 2.1-2.2x at
 * 1-2 tokens, 1.65x at 4, 1.19x at 6, 0.92x at 8, 0.56-0.67x from 16 up, where widening once
 * while packing and running the f32 kernels reaches 0.87-1.02x. */
#define PAIRS_MAX_ROWS 6

/* Multiply-adds per second of one ISA's calibration loop: the best of three short runs (~0.25 ms
 * of f32 FMAs on a 2.6 GHz AVX-512 core; the whole comparison costs a few ms, once). */
static double mac_rate(const wb_cpu_isa *isa) {
    const int64_t iters = 100000;
    double best = 0;
    volatile double sink = 0;
    for (int r = 0; r < 3; r++) {
        int64_t t0 = wb_cpu_clock_ns();
        sink += isa->fma_loop(iters);
        double dt = (double)(wb_cpu_clock_ns() - t0) * 1e-9, rate = (double)iters * 12 * isa->lanes * (isa->bf16_pairs ? 2 : 1) / dt;
        if (dt > 0 && rate > best) best = rate;
    }
    (void)sink;
    return best;
}

const wb_cpu_isa *wb_cpu_isa_bf16_pairs(void) {
    /* on the AVX-512 path only: WB_CPU_ISA=avx2 stands for an AVX2 CPU, bf16 included */
    if (wb_cpu_isa_active() == &wb_cpu_isa_avx512 && supported(&wb_cpu_isa_avx512bf16)) return &wb_cpu_isa_avx512bf16;
    if (supported(&wb_cpu_isa_avx2bf16)) return &wb_cpu_isa_avx2bf16;
    return NULL;
}

double wb_cpu_isa_bf16_pair_speed(void) {
    static double speed = -1;
    static const wb_cpu_isa *measured_for; /* the active ISA it was measured against */
    const wb_cpu_isa *pairs = wb_cpu_isa_bf16_pairs(), *f32 = wb_cpu_isa_active();
    /* avx2bf16's pair product is two f32 FMAs after widening: no instruction of its own to time */
    if (pairs != &wb_cpu_isa_avx512bf16) return 0;
    if (speed < 0 || measured_for != f32) {
        double fr = mac_rate(f32);
        speed = fr > 0 ? mac_rate(pairs) / fr : 0;
        measured_for = f32;
    }
    return speed;
}

const wb_cpu_isa *wb_cpu_isa_bf16(int64_t rows) {
    bf16_init();
    if (bf16_forced) return bf16_active;
    const wb_cpu_isa *pairs = wb_cpu_isa_bf16_pairs();
    if (!pairs) return NULL;
    /* above the memory-bound rows, pairs only where they also multiply faster (with a margin
     * for the measurement's noise) */
    return rows <= PAIRS_MAX_ROWS || wb_cpu_isa_bf16_pair_speed() > 1.1 ? pairs : NULL;
}

const char *wb_cpu_isa_bf16_name(void) {
    bf16_init();
    if (bf16_forced) return bf16_active ? bf16_active->name : "widen";
    return wb_cpu_isa_bf16_pairs() ? "auto" : "widen";
}

int wb_cpu_isa_bf16_set(const char *name) {
    bf16_init();
    if (!strcmp(name, "auto")) {
        bf16_forced = 0;
        return 1;
    }
    const wb_cpu_isa *isa = bf16_named(name);
    if (!isa && strcmp(name, "widen")) return 0;
    bf16_forced = 1;
    bf16_active = isa;
    return 1;
}

const char *wb_cpu_env_error(const char *var, int *fatal) {
    static char line[256];
    const int bf16 = !strcmp(var, "WB_CPU_BF16");
    const char *env = getenv(var);
    *fatal = 0;
    if (!env || !*env) return NULL;
    /* the names the paths carry (bf16: "auto" and "widen" besides), listed in the message as known */
    const char *names[5] = {"auto", "widen", wb_cpu_isa_bf16emu.name, wb_cpu_isa_avx2bf16.name,
                            wb_cpu_isa_avx512bf16.name};
    if (!bf16) names[0] = wb_cpu_isa_scalar.name, names[1] = wb_cpu_isa_avx2.name, names[2] = wb_cpu_isa_avx512.name;
    const int count = bf16 ? 5 : 3;
    int known = 0;
    char list[128] = "";
    for (int i = 0; i < count; i++) {
        known |= !strcmp(env, names[i]);
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%s", i == 0 ? "" : i == count - 1 ? " or " : ", ", names[i]);
    }
    if (!known) {
        *fatal = 1;
        snprintf(line, sizeof line, "%s=%.64s: not a %s (%s)", var, env, bf16 ? "bf16 path" : "CPU path", list);
        return line;
    }
    if (bf16) bf16_init();
    if (bf16 ? !strcmp(env, "auto") || !strcmp(env, "widen") || bf16_active : wb_cpu_isa_get(env) != NULL) return NULL;
    snprintf(line, sizeof line, "%s=%s: this CPU cannot run it; running %s", var, env,
             bf16 ? wb_cpu_isa_bf16_name() : wb_cpu_isa_active()->name);
    return line;
}

/* One line of cpu0's cache `index` file `name`, or NULL. */
static char *cache_file(int index, const char *name, char *buf, int size) {
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index, name);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *line = fgets(buf, size, f);
    fclose(f);
    return line;
}

/* sysfs's index of cpu0's data or unified cache at `level`, -1 when it has none. */
static int cache_index(int level) {
    char buf[64];
    for (int i = 0; i < 16; i++) {
        if (!cache_file(i, "level", buf, sizeof buf)) break;
        if (atoi(buf) != level) continue;
        if (cache_file(i, "type", buf, sizeof buf) && strncmp(buf, "Instruction", 11)) return i;
    }
    return -1;
}

int64_t wb_cpu_cache_bytes(int level) {
    char buf[64];
    int i = cache_index(level);
    if (i < 0 || !cache_file(i, "size", buf, sizeof buf)) return 0;
    long long size = 0;
    char unit = 0;
    if (sscanf(buf, "%lld%c", &size, &unit) < 1 || size < 0) return 0;
    if (unit == 'K') size <<= 10;
    else if (unit == 'M') size <<= 20;
    else if (unit == 'G') size <<= 30;
    return size;
}

int wb_cpu_list_count(const char *list) {
    int count = 0;
    for (const char *s = list; *s && *s != '\n';) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s || lo < 0) return 0;
        if (*end == '-') {
            s = end + 1;
            hi = strtol(s, &end, 10);
            if (end == s || hi < lo) return 0;
        }
        if (*end && *end != ',' && *end != '\n') return 0;
        if (hi - lo >= 1 << 20) return 0;
        count += (int)(hi - lo + 1);
        s = *end == ',' ? end + 1 : end;
    }
    return count;
}

int wb_cpu_cache_shared_by(int level) {
    char buf[1024];
    int i = cache_index(level);
    if (i < 0 || !cache_file(i, "shared_cpu_list", buf, sizeof buf)) return 1;
    int count = wb_cpu_list_count(buf);
    return count > 0 ? count : 1;
}
