/* reduce.h: CPU reductions (sum, mean, max and the position of the max) over strided f32 or bf16
 * data. Pointers and strides only (in elements): no tensors, no profiler. Does not reduce over
 * several separate dims at once (the core asks for one dim, or all of them).
 *
 * Sums are pairwise in f64: the reduced elements, read in row-major order, are cut in blocks of
 * WB_CPU_REDUCE_BLOCK; a block is summed by WB_CPU_REDUCE_LANES interleaved f64 accumulators
 * (element i goes to accumulator i mod LANES), which are then added as a balanced tree; the
 * blocks' sums are added as a balanced tree too (split at a block boundary, the left half taking
 * ceil(blocks / 2)). So an element passes through at most
 *     h(n) = ceil(min(n, BLOCK) / LANES) + log2(LANES) + ceil(log2(ceil(n / BLOCK)))
 * f64 additions and |computed - exact| <= gamma_h(n) * sum |x_i| (u = 2^-53) before the one
 * rounding to the output's dtype (tests/test_reduce.lua checks exactly this bound). The split is
 * the same with one thread or many: the result does not depend on the thread count. */
#ifndef WB_KERNELS_REDUCE_H
#define WB_KERNELS_REDUCE_H

#include <stdint.h>

#include "wb_kernels/bf16.h"

#define WB_CPU_REDUCE_BLOCK 256
#define WB_CPU_REDUCE_LANES 4

typedef enum wb_cpu_reduce_op { WB_CPU_REDUCE_SUM, WB_CPU_REDUCE_MEAN, WB_CPU_REDUCE_MAX } wb_cpu_reduce_op;

typedef struct wb_cpu_reduce_problem {
    wb_cpu_reduce_op op;
    wb_cpu_dtype dtype; /* of x and out */
    const void *x;      /* element (0, ..., 0) of the input */
    /* the kept dims (0 of them: one result) and the reduced ones, with the input's strides */
    int outer_ndim, inner_ndim;
    int64_t outer_shape[WB_CPU_MAX_DIMS], outer_stride[WB_CPU_MAX_DIMS];
    int64_t inner_shape[WB_CPU_MAX_DIMS], inner_stride[WB_CPU_MAX_DIMS];
    void *out;      /* contiguous: one element per index of the kept dims, row-major */
    float *indices; /* (optional, max only) beside each max, its position in the reduced
                       elements' row-major order plus index_base, as f32 (exact below 2^24) */
    int64_t index_base;
} wb_cpu_reduce_problem;

/* Max: the largest value; NaN when any element is NaN (its position: the first NaN's); ties
 * give the first position. A result over no elements: sum 0, mean NaN, max -inf (the core
 * refuses mean and max of empty ranges before launching). */
void wb_cpu_reduce(const wb_cpu_reduce_problem *p);
/* Whether wb_cpu_reduce splits p across threads (the launcher's kernel record says so). */
int wb_cpu_reduce_parallel(const wb_cpu_reduce_problem *p);

#endif
