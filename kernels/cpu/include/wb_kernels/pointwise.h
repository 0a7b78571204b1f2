/* pointwise.h: CPU elementwise kernels over strided fp32 data (no tensors, no profiler).
 * Each takes the loop shape and one stride array per operand (in elements); a stride of 0
 * broadcasts. Large problems are split across OpenMP threads. */
#ifndef WB_CPU_POINTWISE_H
#define WB_CPU_POINTWISE_H

#include <stdint.h>

typedef enum wb_cpu_binary_op { WB_CPU_ADD, WB_CPU_SUB, WB_CPU_MUL, WB_CPU_DIV } wb_cpu_binary_op;
typedef enum wb_cpu_unary_op { WB_CPU_COPY, WB_CPU_NEG } wb_cpu_unary_op;

/* Below this many elements a kernel runs on the calling thread only. */
#define WB_CPU_PARALLEL_MIN 65536

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
