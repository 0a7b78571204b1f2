/* activation.c: the contiguous GELU and GeGLU kernels, in chunks over threads, each chunk run
 * by the active ISA's vectorised routine (the same math as the GEMM epilogues). */
#include "wb_kernels/gemm.h"
#include "wb_kernels/pointwise.h"
#include "wb_kernels/spans.h"

#define CHUNK 16384

void wb_cpu_activation_run(const wb_cpu_isa *isa, const float *x, const float *u, float *y, int64_t n, int erf_form) {
    int64_t chunks = (n + CHUNK - 1) / CHUNK;
    wb_cpu_spans *spans = wb_cpu_spans_open("elements");
    WB_CPU_PARALLEL(wb_cpu_threads_for(n), {
        int64_t t0 = wb_cpu_span_start(spans), done = 0, lo, hi;
        wb_cpu_share(chunks, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            int64_t s = i * CHUNK, len = n - s < CHUNK ? n - s : CHUNK;
            if (u)
                isa->geglu(x + s, u + s, y + s, len);
            else
                isa->gelu(x + s, y + s, len, erf_form);
            done += len;
        }
        wb_cpu_span_done(spans, t0, done);
    });
}

void wb_cpu_act_run(const wb_cpu_isa *isa, wb_cpu_act act, const float *x, const float *u, float *y, int64_t n) {
    int64_t chunks = (n + CHUNK - 1) / CHUNK;
    WB_CPU_PARALLEL(wb_cpu_threads_for(n), {
        int64_t lo, hi;
        wb_cpu_share(chunks, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            int64_t s = i * CHUNK, len = n - s < CHUNK ? n - s : CHUNK;
            isa->activation(act, x + s, u ? u + s : NULL, y + s, len);
        }
    });
}
