/* op_table.c: every op, declared once. The table is indexed by wb_op_id; the static_assert
 * and wb_op_table_check (run by the C tests) make a missing or misplaced entry a failure. */
#include "op.h"
#include "pointwise.h"
#include "views.h"
#include "linear.h"
#include "cuda_ops.h"
#include "mlp.h"
#include "codegen.h"
#include "reduce.h"

/* Views are device-independent: the same implementation serves every device. */
#define ALL_DEVICES(fn)                                                                                                \
    { [WB_DEVICE_CPU] = fn, [WB_DEVICE_CUDA] = fn }
#define CPU_CUDA(cpu, cuda)                                                                                            \
    { [WB_DEVICE_CPU] = cpu, [WB_DEVICE_CUDA] = cuda }

/* Rows of one family differ only in id, name and shape rule; each macro spells its fields out. */
#define VIEW_ROW(ID, NAME, SHAPE)                                                                                      \
    [ID] = {.id = ID,                                                                                                  \
            .name = NAME,                                                                                              \
            .kind = WB_OP_KIND_VIEW,                                                                                   \
            .arity = 1,                                                                                                \
            .shape = SHAPE,                                                                                            \
            .impl = ALL_DEVICES(wb_view_impl)}
#define COMPOSITE_ROW(ID, NAME, ARITY, OPTIONAL, SHAPE, IMPL)                                                          \
    [ID] = {.id = ID,                                                                                                  \
            .name = NAME,                                                                                              \
            .kind = WB_OP_KIND_COMPOSITE,                                                                              \
            .arity = ARITY,                                                                                            \
            .optional = OPTIONAL,                                                                                      \
            .shape = SHAPE,                                                                                            \
            .impl = ALL_DEVICES(IMPL)}
#define CREATION_ROW(ID, NAME)                                                                                         \
    [ID] = {.id = ID,                                                                                                  \
            .name = NAME,                                                                                              \
            .kind = WB_OP_KIND_KERNEL,                                                                                 \
            .arity = 0,                                                                                                \
            .allocates_output = 1,                                                                                     \
            .shape = wb_shape_creation,                                                                                \
            .bytes = wb_bytes_creation,                                                                                \
            .impl = CPU_CUDA(wb_cpu_creation_impl, wb_cuda_creation_impl)}
#define ACTIVATION_ROW(ID, NAME)                                                                                       \
    [ID] = {.id = ID,                                                                                                  \
            .name = NAME,                                                                                              \
            .kind = WB_OP_KIND_KERNEL,                                                                                 \
            .arity = 1,                                                                                                \
            .allocates_output = 1,                                                                                     \
            .shape = wb_shape_unary,                                                                                   \
            .bytes = wb_bytes_unary,                                                                                   \
            .impl = CPU_CUDA(wb_cpu_activation_impl, wb_cuda_unary_impl)}
#define REDUCE_ROW(ID, NAME)                                                                                           \
    [ID] = {.id = ID,                                                                                                  \
            .name = NAME,                                                                                              \
            .kind = WB_OP_KIND_KERNEL,                                                                                 \
            .arity = 1,                                                                                                \
            .allocates_output = 1,                                                                                     \
            .shape = wb_shape_reduce,                                                                                  \
            .flops = wb_flops_reduce,                                                                                  \
            .bytes = wb_bytes_reduce,                                                                                  \
            .impl = CPU_CUDA(wb_cpu_reduce_impl, wb_cuda_reduce_impl)}
#define BINARY_ROW(ID, NAME)                                                                                           \
    [ID] = {.id = ID,                                                                                                  \
            .name = NAME,                                                                                              \
            .kind = WB_OP_KIND_KERNEL,                                                                                 \
            .arity = 2,                                                                                                \
            .allocates_output = 1,                                                                                     \
            .shape = wb_shape_binary,                                                                                  \
            .flops = wb_flops_elementwise,                                                                             \
            .bytes = wb_bytes_binary,                                                                                  \
            .impl = CPU_CUDA(wb_cpu_binary_impl, wb_cuda_binary_impl)}

#define ARITH_UNARY_ROW(ID, NAME)                                                                                      \
    [ID] = {.id = ID,                                                                                                  \
            .name = NAME,                                                                                              \
            .kind = WB_OP_KIND_KERNEL,                                                                                 \
            .arity = 1,                                                                                                \
            .allocates_output = 1,                                                                                     \
            .shape = wb_shape_unary,                                                                                   \
            .flops = wb_flops_elementwise,                                                                             \
            .bytes = wb_bytes_unary,                                                                                   \
            .impl = CPU_CUDA(wb_cpu_unary_impl, wb_cuda_unary_impl)}

/* clang-format off: one op per row reads better than one field per line */
static const wb_op_def op_table[] = {
#define VIEW_LIST_ROW(ID, name) VIEW_ROW(WB_OP_##ID, #name, wb_shape_##name),
    WB_VIEW_LIST(VIEW_LIST_ROW)
#undef VIEW_LIST_ROW

    COMPOSITE_ROW(WB_OP_RESHAPE, "reshape", 1, 0, wb_shape_reshape, wb_reshape_impl),
    COMPOSITE_ROW(WB_OP_FLATTEN, "flatten", 1, 0, wb_shape_flatten, wb_flatten_impl),
    COMPOSITE_ROW(WB_OP_CONTIGUOUS, "contiguous", 1, 0, wb_shape_same, wb_contiguous_impl),
    COMPOSITE_ROW(WB_OP_CLONE, "clone", 1, 0, wb_shape_same, wb_clone_impl),

    [WB_OP_COPY_] = {.id = WB_OP_COPY_,
                     .name = "copy_",
                     .kind = WB_OP_KIND_KERNEL,
                     .arity = 2,
                     .shape = wb_shape_copy_,
                     .bytes = wb_bytes_copy_,
                     .impl = CPU_CUDA(wb_cpu_copy_impl, wb_cuda_copy_impl)},
    [WB_OP_FILL_] = {.id = WB_OP_FILL_,
                     .name = "fill_",
                     .kind = WB_OP_KIND_KERNEL,
                     .arity = 1,
                     .shape = wb_shape_fill_,
                     .bytes = wb_bytes_fill_,
                     .impl = CPU_CUDA(wb_cpu_fill_impl, wb_cuda_fill_impl)},
#define CREATION_LIST_ROW(ID, name) CREATION_ROW(WB_OP_##ID, #name),
    WB_CREATION_LIST(CREATION_LIST_ROW)
#undef CREATION_LIST_ROW
#define BINARY_LIST_ROW(ID, name, ...) BINARY_ROW(WB_OP_##ID, #name),
    WB_BINARY_LIST(BINARY_LIST_ROW)
#undef BINARY_LIST_ROW
#define UNARY_LIST_ROW(ID, name, ...) ARITH_UNARY_ROW(WB_OP_##ID, #name),
    WB_ARITH_UNARY_LIST(UNARY_LIST_ROW)
#undef UNARY_LIST_ROW
    [WB_OP_GELU] = {.id = WB_OP_GELU,
                    .name = "gelu",
                    .kind = WB_OP_KIND_KERNEL,
                    .arity = 1,
                    .allocates_output = 1,
                    .shape = wb_shape_unary,
                    .flops = wb_flops_gelu,
                    .bytes = wb_bytes_unary,
                    .impl = CPU_CUDA(wb_cpu_gelu_impl, wb_cuda_gelu_impl)},
    [WB_OP_GEGLU] = {.id = WB_OP_GEGLU,
                     .name = "geglu",
                     .kind = WB_OP_KIND_KERNEL,
                     .arity = 2,
                     .allocates_output = 1,
                     .shape = wb_shape_geglu,
                     .flops = wb_flops_geglu,
                     .bytes = wb_bytes_binary,
                     .impl = CPU_CUDA(wb_cpu_geglu_impl, wb_cuda_geglu_impl)},
    [WB_OP_MM] = {.id = WB_OP_MM,
                  .name = "mm",
                  .kind = WB_OP_KIND_KERNEL,
                  .arity = 2,
                  .allocates_output = 1,
                  .shape = wb_shape_mm,
                  .flops = wb_flops_mm,
                  .bytes = wb_bytes_mm,
                  .impl = CPU_CUDA(wb_cpu_mm_impl, wb_cuda_mm_impl)},
    [WB_OP_ADDMM] = {.id = WB_OP_ADDMM,
                     .name = "addmm",
                     .kind = WB_OP_KIND_KERNEL,
                     .arity = 3,
                     .allocates_output = 1,
                     .shape = wb_shape_addmm,
                     .flops = wb_flops_mm,
                     .bytes = wb_bytes_mm,
                     .impl = CPU_CUDA(wb_cpu_mm_impl, wb_cuda_mm_impl)},
    [WB_OP_GEGLU_LINEAR] = {.id = WB_OP_GEGLU_LINEAR,
                            .name = "geglu_linear",
                            .kind = WB_OP_KIND_KERNEL,
                            .arity = 5,
                            .optional = 2,
                            .allocates_output = 1,
                            .shape = wb_shape_geglu_linear,
                            .flops = wb_flops_geglu_linear,
                            .bytes = wb_bytes_geglu_linear,
                            .impl = CPU_CUDA(wb_cpu_geglu_linear_impl, wb_cuda_geglu_linear_impl)},
#define ACT_LIST_ROW(ID, name, ...) ACTIVATION_ROW(WB_OP_##ID, #name),
    WB_ACT_LIST(ACT_LIST_ROW)
#undef ACT_LIST_ROW
    [WB_OP_SWIGLU] = {.id = WB_OP_SWIGLU,
                      .name = "swiglu",
                      .kind = WB_OP_KIND_KERNEL,
                      .arity = 2,
                      .allocates_output = 1,
                      .shape = wb_shape_geglu,
                      .flops = wb_flops_geglu,
                      .bytes = wb_bytes_binary,
                      .impl = {[WB_DEVICE_CPU] = wb_cpu_activation_impl}},
    [WB_OP_SWIGLU_LINEAR] = {.id = WB_OP_SWIGLU_LINEAR,
                             .name = "swiglu_linear",
                             .kind = WB_OP_KIND_KERNEL,
                             .arity = 5,
                             .optional = 2,
                             .allocates_output = 1,
                             .shape = wb_shape_geglu_linear,
                             .flops = wb_flops_geglu_linear,
                             .bytes = wb_bytes_geglu_linear,
                             .impl = {[WB_DEVICE_CPU] = wb_cpu_geglu_linear_impl}},
    [WB_OP_GEGLU_MLP] = {.id = WB_OP_GEGLU_MLP,
                          .name = "geglu_mlp",
                          .kind = WB_OP_KIND_KERNEL,
                          .arity = 5,
                          .optional = 1,
                          .allocates_output = 0, /* cpu: the kernel's output; cuda: the down linear's */
                          .shape = wb_shape_mlp,
                          .flops = wb_flops_mlp,
                          .bytes = wb_bytes_mlp,
                          .impl = CPU_CUDA(wb_cpu_mlp_impl, wb_cuda_mlp_impl)},
    [WB_OP_SWIGLU_MLP] = {.id = WB_OP_SWIGLU_MLP,
                          .name = "swiglu_mlp",
                          .kind = WB_OP_KIND_KERNEL,
                          .arity = 5,
                          .optional = 1,
                          .allocates_output = 0, /* cpu: the kernel's output; cuda: the down linear's */
                          .shape = wb_shape_mlp,
                          .flops = wb_flops_mlp,
                          .bytes = wb_bytes_mlp,
                          .impl = CPU_CUDA(wb_cpu_mlp_impl, wb_cuda_mlp_impl)},
    [WB_OP_GENERATED] = {.id = WB_OP_GENERATED,
                         .name = "generated",
                         .kind = WB_OP_KIND_KERNEL,
                         .arity = WB_OP_MAX_INPUTS,
                         .optional = WB_OP_MAX_INPUTS - 1,
                         .allocates_output = 1,
                         .shape = wb_shape_generated,
                         .bytes = wb_bytes_generated,
                         .impl = CPU_CUDA(wb_cpu_generated_impl, wb_cuda_generated_impl)},
    [WB_OP_GENERATED_GEMM] = {.id = WB_OP_GENERATED_GEMM,
                              .name = "generated_gemm",
                              .kind = WB_OP_KIND_KERNEL,
                              .arity = WB_OP_MAX_INPUTS, /* x, w, then the epilogue's inputs */
                              .optional = WB_OP_MAX_INPUTS - 2,
                              .allocates_output = 1,
                              .shape = wb_shape_generated_gemm,
                              .flops = wb_flops_generated_gemm,
                              .bytes = wb_bytes_generated_gemm,
                              .impl = CPU_CUDA(wb_cpu_generated_gemm_impl, NULL)},
    [WB_OP_TO] = {.id = WB_OP_TO,
                  .name = "to",
                  .kind = WB_OP_KIND_KERNEL,
                  .arity = 1,
                  .allocates_output = 1,
                  .shape = wb_shape_to,
                  .bytes = wb_bytes_unary,
                  .impl = ALL_DEVICES(wb_to_impl)},
    REDUCE_ROW(WB_OP_SUM, "sum"),
    REDUCE_ROW(WB_OP_MEAN, "mean"),
    REDUCE_ROW(WB_OP_MAX, "max"),

    COMPOSITE_ROW(WB_OP_MATMUL, "matmul", 2, 0, wb_shape_matmul, wb_matmul_impl),
    COMPOSITE_ROW(WB_OP_LINEAR, "linear", 3, 1, wb_shape_linear, wb_linear_impl),
};
/* clang-format on */
_Static_assert(sizeof op_table / sizeof op_table[0] == WB_OP_COUNT, "every wb_op_id needs an op_table entry");

const wb_op_def *wb_op_get(wb_op_id id) { return (unsigned)id < WB_OP_COUNT ? &op_table[id] : NULL; }

const char *wb_op_name(wb_op_id id) { return (unsigned)id < WB_OP_COUNT ? op_table[id].name : "?"; }

/* Returns the first op whose entry is incomplete or out of place, or -1 when all are sound. */
int wb_op_table_check(void) {
    for (int i = 0; i < WB_OP_COUNT; i++) {
        const wb_op_def *d = &op_table[i];
        if ((int)d->id != i || !d->name || !d->shape || !d->impl[WB_DEVICE_CPU]) return i;
    }
    return -1;
}
