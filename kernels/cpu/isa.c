/* isa.c: picks the GEMM/activation path at run time: the best one the CPU supports
 * (__builtin_cpu_supports), or the one WB_CPU_ISA names when the CPU can run it. */
#include <stdlib.h>
#include <string.h>

#include "wb_kernels/gemm.h"

extern const wb_cpu_isa wb_cpu_isa_scalar, wb_cpu_isa_avx2, wb_cpu_isa_avx512, wb_cpu_isa_avx512bf16,
    wb_cpu_isa_avx2bf16, wb_cpu_isa_bf16emu;

static const wb_cpu_isa *active;
static const char *refused;

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

const wb_cpu_isa *wb_cpu_isa_get(const char *name) {
    const wb_cpu_isa *all[] = {&wb_cpu_isa_avx512, &wb_cpu_isa_avx2, &wb_cpu_isa_scalar};
    for (int i = 0; i < 3; i++)
        if (!strcmp(all[i]->name, name)) return supported(all[i]) ? all[i] : NULL;
    return NULL;
}

const wb_cpu_isa *wb_cpu_isa_active(void) {
    if (active) return active;
    const char *env = getenv("WB_CPU_ISA");
    if (env && *env) {
        active = wb_cpu_isa_get(env);
        if (!active) refused = env;
    }
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
        if (!bf16_active && strcmp(env, "widen")) refused = env;
    }
}

/* Measured on an AVX2 core (GeGLU MLP, dim 768, hidden 3072, bf16 vs f32 weights): widening
 * the k-pairs in registers costs compute, halving the weight bytes saves memory time; the
 * second wins while one row tile covers A (2.0-2.1x at 1 token, 1.2-1.7x at 4) and no longer
 * once the f32 kernels prefetch their weights (0.95-1.06x at 8, 0.85-0.98x at 16, 0.76-0.79x
 * at 128), where widening once while packing is better. */
#define AVX2_PAIRS_MAX_ROWS 6

const wb_cpu_isa *wb_cpu_isa_bf16(int64_t rows) {
    bf16_init();
    if (bf16_forced) return bf16_active;
    if (supported(&wb_cpu_isa_avx512bf16)) return &wb_cpu_isa_avx512bf16;
    if (rows <= AVX2_PAIRS_MAX_ROWS && supported(&wb_cpu_isa_avx2bf16)) return &wb_cpu_isa_avx2bf16;
    return NULL;
}

const char *wb_cpu_isa_bf16_name(void) {
    bf16_init();
    if (bf16_forced) return bf16_active ? bf16_active->name : "widen";
    if (supported(&wb_cpu_isa_avx512bf16)) return "avx512bf16";
    return supported(&wb_cpu_isa_avx2bf16) ? "auto" : "widen";
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

const char *wb_cpu_isa_refused(void) {
    wb_cpu_isa_active();
    return refused;
}
