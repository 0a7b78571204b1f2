/* generated.h: what a generated pointwise kernel (wb.compile's code generation, core/ops/codegen.c)
 * receives: the output as [rows, cols] with cols the innermost dimension, and per input the
 * strides of the outer dimensions (row r's offset) and the stride along cols (0: broadcast, or
 * 1). A generated kernel is `void wb_poi_<name>(const wb_poi_args *a)`; this text is compiled into
 * each generated source, so the two sides cannot disagree. */
#ifndef WB_KERNELS_GENERATED_H
#define WB_KERNELS_GENERATED_H

#include <stdint.h>

#define WB_POI_MAX_INPUTS 5
#define WB_POI_MAX_DIMS 8

typedef struct wb_poi_args {
    int64_t rows, cols;
    int outer;                                      /* outer dimensions, rows = their product */
    int64_t shape[WB_POI_MAX_DIMS];                 /* sizes of the outer dimensions */
    int64_t stride[WB_POI_MAX_INPUTS][WB_POI_MAX_DIMS]; /* per input, along each outer dimension */
    const void *in[WB_POI_MAX_INPUTS];              /* f32 or bf16 (uint16_t), the kernel knows which */
    void *out;                                      /* contiguous [rows, cols] */
    int64_t parallel_min;                           /* threads only from this many elements */
} wb_poi_args;

/* A generated GEMM epilogue: applied in place to the block C[row0 + i][col0 + j] = c[i * ldc + j],
 * i < rows, j < cols, of a GEMM's f32 output, right after the driver stored it (wb_kernels/gemm.h);
 * ctx is a wb_poi_args describing the output ([rows, cols] of the whole C, out = C) and the
 * epilogue's other inputs, so that input i of row r is at in[i] + wb_poi_offset(a, i, r). */
typedef void (*wb_gemm_epilogue_fn)(const void *ctx, float *c, int64_t ldc, int64_t row0, int64_t col0, int64_t rows,
                                    int64_t cols);

/* Element offset of input i at row r (the outer index unravelled, last dimension fastest). */
static inline int64_t wb_poi_offset(const wb_poi_args *a, int i, int64_t r) {
    int64_t off = 0;
    for (int d = a->outer - 1; d >= 0; d--) {
        off += (r % a->shape[d]) * a->stride[i][d];
        r /= a->shape[d];
    }
    return off;
}

#endif
