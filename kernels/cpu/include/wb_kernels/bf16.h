/* bf16.h: bf16 <-> f32 conversion and the loops that move bf16 data on the CPU: strided copies
 * between dtypes, widening to f32, rounding back, k-pair packing for the bf16 GEMM paths, and
 * the bf16 pointwise kernels (widen a chunk, run the f32 math, round once). Pointers and
 * strides only (in elements): no tensors, no profiler. */
#ifndef WB_KERNELS_BF16_H
#define WB_KERNELS_BF16_H

#include <stdint.h>
#include <string.h>

#include "wb_kernels/gemm.h"
#include "wb_kernels/pointwise.h"

/* f32 -> bf16, round to nearest, ties to even; NaN stays NaN (quiet, sign kept); infinities
 * and signed zeros are exact; values past the largest bf16 round to infinity as IEEE says. */
static inline uint16_t wb_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    /* branch-free (a select), so loops of it vectorise */
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x0040u; /* NaN: keep it a NaN */
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

static inline float wb_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element types of the CPU kernels (the values equal the core's wb_dtype). */
#define WB_CPU_MAX_DIMS 8 /* = the core's WB_MAX_DIMS (checked there) */

typedef enum wb_cpu_dtype { WB_CPU_F32 = 0, WB_CPU_BF16 = 1 } wb_cpu_dtype;

/* dst (its own strides) = src read through `src_stride` (broadcast strides allowed), converting
 * between f32 and bf16 (f32 -> bf16 rounds once, to nearest even; bf16 -> bf16 copies bits). */
void wb_cpu_convert(void *dst, wb_cpu_dtype dst_dtype, const int64_t *dst_stride, const void *src,
                    wb_cpu_dtype src_dtype, const int64_t *src_stride, int ndim, const int64_t *shape);

/* out[i * ldo + j] = round(src[i * n + j]) for a [m, n] f32 block. */
void wb_bf16_round_rows(uint16_t *out, int64_t ldo, const float *src, int64_t m, int64_t n);

/* A [rows, cols] bf16 matrix read through strides, as a new contiguous f32 copy (a shift per
 * element: bf16 is the top half of an f32). NULL when it cannot be allocated; free it. */
float *wb_bf16_widen(const uint16_t *src, int64_t rows, int64_t cols, int64_t rs, int64_t cs);

/* A bf16 matrix M[r][p] = src[r * rs + p * cs] (r < rows, p < k) as 32-bit k-pair words:
 * W[r][q] holds (M[r][2q], M[r][2q+1]) (low half first), W[r][q] = words[r * *ld_words + q] for
 * q < (k + 1) / 2. When the rows are contiguous along k with an even stride, k is even and the
 * data is 4-byte aligned (and force_copy is 0), the words are the source itself; otherwise a
 * zero-padded copy is made into *copy (free it). Returns NULL when that copy cannot be allocated. */
const uint32_t *wb_bf16_pair_words(const uint16_t *src, int64_t rows, int64_t k, int64_t rs, int64_t cs, int force_copy,
                                   int64_t *ld_words, uint16_t **copy);

/* A GEMM whose operands and output are bf16 (the problem's float pointers point at bf16 data,
 * strides in elements), f32 accumulation, the output rounded once. With a k-pair ISA the
 * operands stay bf16 and are packed in k-pairs (packed_b, when given, is already in pair
 * space); otherwise the activations are widened to f32 and the f32 kernels run (packed_b, when
 * given, holds the widened weights). Returns 0, or -1 when a buffer could not be allocated. */
int wb_gemm_run_bf16(const wb_cpu_isa *isa, const wb_gemm_problem *p);

/* The pointwise ops on bf16 data: each chunk of inputs is widened into f32 buffers, the f32
 * arithmetic (for the GELUs, the ISA's vectorised routines, the same as the f32 kernels) runs
 * on it, and the chunk is rounded back into a contiguous output. */
typedef enum wb_cpu_bf16_op {
#define WB_BF16_ARITH_ID(ID, ...) WB_BF16_##ID,
    WB_BINARY_LIST(WB_BF16_ARITH_ID) /* the binary ops of arith_list.h, then its unary ones */
    WB_ARITH_UNARY_LIST(WB_BF16_ARITH_ID)
#undef WB_BF16_ARITH_ID
    WB_BF16_GELU_TANH,
    WB_BF16_GELU_ERF,
    WB_BF16_GEGLU,
    WB_BF16_ACT, /* the activation in the launch's act (wb_cpu_act) */
} wb_cpu_bf16_op;

typedef struct wb_cpu_bf16_launch {
    wb_cpu_bf16_op op;
    const wb_cpu_isa *isa;
    int ndim, contiguous; /* contiguous: a, b and out share one contiguous geometry */
    int64_t n;
    int64_t shape[WB_CPU_MAX_DIMS], as[WB_CPU_MAX_DIMS],
        bs[WB_CPU_MAX_DIMS]; /* the output's shape; the inputs' broadcast strides */
    uint16_t *out;           /* contiguous, n elements */
    const uint16_t *a, *b;   /* b: binary ops and the gated activations only */
    wb_cpu_act act;          /* WB_BF16_ACT only */
} wb_cpu_bf16_launch;

/* 1 for the ops that read b. */
static inline int wb_cpu_bf16_op_binary(wb_cpu_bf16_op op, wb_cpu_act act) {
    return op < (wb_cpu_bf16_op)WB_CPU_BINARY_COUNT || op == WB_BF16_GEGLU ||
           (op == WB_BF16_ACT && act == WB_CPU_SWIGLU);
}
void wb_cpu_bf16_pointwise_run(const wb_cpu_bf16_launch *k);

#endif
