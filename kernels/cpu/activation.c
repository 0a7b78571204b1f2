/* activation.c: the contiguous GELU and GeGLU kernels, in chunks over threads, each chunk run
 * by the active ISA's vectorised routine (the same math as the GEMM epilogues). */
#include "wb_kernels/gemm.h"
#include "wb_kernels/pointwise.h"

#define CHUNK 16384

void wb_cpu_activation_run(const wb_cpu_isa *isa, const float *x, const float *u, float *y, int64_t n, int erf_form) {
    int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n >= WB_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < chunks; i++) {
        int64_t s = i * CHUNK, len = n - s < CHUNK ? n - s : CHUNK;
        if (u)
            isa->geglu(x + s, u + s, y + s, len);
        else
            isa->gelu(x + s, y + s, len, erf_form);
    }
}
