/* pointwise.h: CPU elementwise kernels over strided fp32 data (no tensors, no profiler).
 * Each takes the loop shape and one stride array per operand (in elements); a stride of 0
 * broadcasts. Large problems are split across OpenMP threads. */
#ifndef WB_CPU_POINTWISE_H
#define WB_CPU_POINTWISE_H

#include <stdint.h>

#include <wb/abi/arith_list.h>
#include "wb_kernels/spans.h" /* WB_CPU_PARALLEL_MIN */

/* The ops of arith_list.h, in its order (WB_CPU_ADD, ...; WB_CPU_NEG, ...). */
typedef enum wb_cpu_binary_op {
#define WB_CPU_BINARY_ID(ID, ...) WB_CPU_##ID,
    WB_BINARY_LIST(WB_CPU_BINARY_ID)
#undef WB_CPU_BINARY_ID
        WB_CPU_BINARY_COUNT
} wb_cpu_binary_op;
typedef enum wb_cpu_unary_op {
    WB_CPU_COPY,
#define WB_CPU_UNARY_ID(ID, ...) WB_CPU_##ID,
    WB_ARITH_UNARY_LIST(WB_CPU_UNARY_ID)
#undef WB_CPU_UNARY_ID
} wb_cpu_unary_op;

/* The list's scalar math: binary op `op` on a and b, unary op `op` on x (not COPY). With a
 * constant op the switch folds away (the loops instantiate one per op). */
static inline __attribute__((always_inline)) float wb_cpu_binary_scalar(wb_cpu_binary_op op, float a, float b) {
    switch (op) {
#define WB_CPU_BINARY_CASE(ID, name, SCALAR, ...)                                                                      \
    case WB_CPU_##ID: return SCALAR;
        WB_BINARY_LIST(WB_CPU_BINARY_CASE)
#undef WB_CPU_BINARY_CASE
    default: return 0.0f;
    }
}
static inline __attribute__((always_inline)) float wb_cpu_unary_scalar(wb_cpu_unary_op op, float x) {
    switch (op) {
#define WB_CPU_UNARY_CASE(ID, name, SCALAR, ...)                                                                       \
    case WB_CPU_##ID: return SCALAR;
        WB_ARITH_UNARY_LIST(WB_CPU_UNARY_CASE)
#undef WB_CPU_UNARY_CASE
    default: return x;
    }
}


void wb_cpu_binary_f32(wb_cpu_binary_op op, int ndim, const int64_t *shape, float *out, const int64_t *out_stride,
                       const float *a, const int64_t *a_stride, const float *b, const int64_t *b_stride);
/* Same-shape contiguous operands: one flat loop on the calling thread (small problems). */
void wb_cpu_binary_flat_f32(wb_cpu_binary_op op, int64_t n, float *out, const float *a, const float *b);
void wb_cpu_unary_f32(wb_cpu_unary_op op, int ndim, const int64_t *shape, float *out, const int64_t *out_stride,
                      const float *a, const int64_t *a_stride);
void wb_cpu_fill_f32(int ndim, const int64_t *shape, float *out, const int64_t *out_stride, float value);
void wb_cpu_arange_f32(float *out, int64_t n);
/* Philox4x32-10 draws: element i depends only on (seed, offset, i). */
void wb_cpu_rand_f32(float *out, int64_t n, uint64_t seed, uint64_t offset);
void wb_cpu_randn_f32(float *out, int64_t n, uint64_t seed, uint64_t offset);
/* The raw generator, for tests: four 32-bit words for counter (ctr_lo, ctr_hi, 0, 0). */
void wb_philox4x32_10(uint64_t seed, uint64_t counter, uint32_t out[4]);

#endif
