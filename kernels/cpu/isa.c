/* isa.c: picks the GEMM/activation path at run time: the best one the CPU supports
 * (__builtin_cpu_supports), or the one WB_CPU_ISA names when the CPU can run it. */
#include <stdlib.h>
#include <string.h>

#include "gemm.h"

extern const wb_cpu_isa wb_cpu_isa_scalar, wb_cpu_isa_avx2, wb_cpu_isa_avx512;

static const wb_cpu_isa *active;
static const char *refused;

static int supported(const wb_cpu_isa *isa) {
    __builtin_cpu_init();
    if (isa == &wb_cpu_isa_avx512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
    if (isa == &wb_cpu_isa_avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
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

const char *wb_cpu_isa_refused(void) {
    wb_cpu_isa_active();
    return refused;
}
