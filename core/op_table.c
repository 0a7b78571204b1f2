/* op_table.c: every op, declared once. The table is indexed by wb_op_id; the static_assert
 * and wb_op_table_check (run by the C tests) make a missing or misplaced entry a failure. */
#include "op.h"
#include "pointwise_ops.h"
#include "views.h"
#include "linear_ops.h"
#include "cuda.h"

/* Views are device-independent: the same implementation serves every device. */
#define ALL_DEVICES(fn)                                                                                                \
    { [WB_DEVICE_CPU] = fn, [WB_DEVICE_CUDA] = fn }
#define CPU_CUDA(cpu, cuda)                                                                                            \
    { [WB_DEVICE_CPU] = cpu, [WB_DEVICE_CUDA] = cuda }

static const wb_op_def op_table[] = {
    [WB_OP_T] = {WB_OP_T, "t", WB_OP_KIND_VIEW, 1, 0, 0, wb_shape_t, NULL, NULL, ALL_DEVICES(wb_view_impl)},
    [WB_OP_TRANSPOSE] = {WB_OP_TRANSPOSE, "transpose", WB_OP_KIND_VIEW, 1, 0, 0, wb_shape_transpose, NULL, NULL,
                         ALL_DEVICES(wb_view_impl)},
    [WB_OP_PERMUTE] = {WB_OP_PERMUTE, "permute", WB_OP_KIND_VIEW, 1, 0, 0, wb_shape_permute, NULL, NULL,
                       ALL_DEVICES(wb_view_impl)},
    [WB_OP_VIEW] = {WB_OP_VIEW, "view", WB_OP_KIND_VIEW, 1, 0, 0, wb_shape_view, NULL, NULL, ALL_DEVICES(wb_view_impl)},
    [WB_OP_NARROW] = {WB_OP_NARROW, "narrow", WB_OP_KIND_VIEW, 1, 0, 0, wb_shape_narrow, NULL, NULL,
                      ALL_DEVICES(wb_view_impl)},
    [WB_OP_SELECT] = {WB_OP_SELECT, "select", WB_OP_KIND_VIEW, 1, 0, 0, wb_shape_select, NULL, NULL,
                      ALL_DEVICES(wb_view_impl)},
    [WB_OP_AS_STRIDED] = {WB_OP_AS_STRIDED, "as_strided", WB_OP_KIND_VIEW, 1, 0, 0, wb_shape_as_strided, NULL, NULL,
                          ALL_DEVICES(wb_view_impl)},
    [WB_OP_EXPAND] = {WB_OP_EXPAND, "expand", WB_OP_KIND_VIEW, 1, 0, 0, wb_shape_expand, NULL, NULL,
                      ALL_DEVICES(wb_view_impl)},
    [WB_OP_ALIAS] = {WB_OP_ALIAS, "alias", WB_OP_KIND_VIEW, 1, 0, 0, wb_shape_alias, NULL, NULL,
                     ALL_DEVICES(wb_view_impl)},

    [WB_OP_RESHAPE] = {WB_OP_RESHAPE, "reshape", WB_OP_KIND_COMPOSITE, 1, 0, 0, wb_shape_reshape, NULL, NULL,
                       ALL_DEVICES(wb_reshape_impl)},
    [WB_OP_FLATTEN] = {WB_OP_FLATTEN, "flatten", WB_OP_KIND_COMPOSITE, 1, 0, 0, wb_shape_flatten, NULL, NULL,
                       ALL_DEVICES(wb_flatten_impl)},
    [WB_OP_CONTIGUOUS] = {WB_OP_CONTIGUOUS, "contiguous", WB_OP_KIND_COMPOSITE, 1, 0, 0, wb_shape_same, NULL, NULL,
                          ALL_DEVICES(wb_contiguous_impl)},
    [WB_OP_CLONE] = {WB_OP_CLONE, "clone", WB_OP_KIND_COMPOSITE, 1, 0, 0, wb_shape_same, NULL, NULL,
                     ALL_DEVICES(wb_clone_impl)},

    [WB_OP_COPY_] = {WB_OP_COPY_, "copy_", WB_OP_KIND_KERNEL, 2, 0, 0, wb_shape_copy_, NULL, wb_bytes_copy_,
                     CPU_CUDA(wb_cpu_copy_impl, wb_cuda_copy_impl)},
    [WB_OP_FILL_] = {WB_OP_FILL_, "fill_", WB_OP_KIND_KERNEL, 1, 0, 0, wb_shape_fill_, NULL, wb_bytes_fill_,
                     CPU_CUDA(wb_cpu_fill_impl, wb_cuda_fill_impl)},
    [WB_OP_ARANGE] = {WB_OP_ARANGE, "arange", WB_OP_KIND_KERNEL, 0, 0, 1, wb_shape_creation, NULL, wb_bytes_creation,
                      CPU_CUDA(wb_cpu_creation_impl, wb_cuda_creation_impl)},
    [WB_OP_RAND] = {WB_OP_RAND, "rand", WB_OP_KIND_KERNEL, 0, 0, 1, wb_shape_creation, NULL, wb_bytes_creation,
                    CPU_CUDA(wb_cpu_creation_impl, wb_cuda_creation_impl)},
    [WB_OP_RANDN] = {WB_OP_RANDN, "randn", WB_OP_KIND_KERNEL, 0, 0, 1, wb_shape_creation, NULL, wb_bytes_creation,
                     CPU_CUDA(wb_cpu_creation_impl, wb_cuda_creation_impl)},
    [WB_OP_ADD] = {WB_OP_ADD, "add", WB_OP_KIND_KERNEL, 2, 0, 1, wb_shape_binary, wb_flops_elementwise, wb_bytes_binary,
                   CPU_CUDA(wb_cpu_binary_impl, wb_cuda_binary_impl)},
    [WB_OP_SUB] = {WB_OP_SUB, "sub", WB_OP_KIND_KERNEL, 2, 0, 1, wb_shape_binary, wb_flops_elementwise, wb_bytes_binary,
                   CPU_CUDA(wb_cpu_binary_impl, wb_cuda_binary_impl)},
    [WB_OP_MUL] = {WB_OP_MUL, "mul", WB_OP_KIND_KERNEL, 2, 0, 1, wb_shape_binary, wb_flops_elementwise, wb_bytes_binary,
                   CPU_CUDA(wb_cpu_binary_impl, wb_cuda_binary_impl)},
    [WB_OP_DIV] = {WB_OP_DIV, "div", WB_OP_KIND_KERNEL, 2, 0, 1, wb_shape_binary, wb_flops_elementwise, wb_bytes_binary,
                   CPU_CUDA(wb_cpu_binary_impl, wb_cuda_binary_impl)},
    [WB_OP_NEG] = {WB_OP_NEG, "neg", WB_OP_KIND_KERNEL, 1, 0, 1, wb_shape_unary, wb_flops_elementwise, wb_bytes_unary,
                   CPU_CUDA(wb_cpu_neg_impl, wb_cuda_neg_impl)},
    [WB_OP_GELU] = {WB_OP_GELU, "gelu", WB_OP_KIND_KERNEL, 1, 0, 1, wb_shape_unary, wb_flops_gelu, wb_bytes_unary,
                    CPU_CUDA(wb_cpu_gelu_impl, wb_cuda_gelu_impl)},
    [WB_OP_GEGLU] = {WB_OP_GEGLU, "geglu", WB_OP_KIND_KERNEL, 2, 0, 1, wb_shape_geglu, wb_flops_geglu, wb_bytes_binary,
                     CPU_CUDA(wb_cpu_geglu_impl, wb_cuda_geglu_impl)},
    [WB_OP_MM] = {WB_OP_MM, "mm", WB_OP_KIND_KERNEL, 2, 0, 1, wb_shape_mm, wb_flops_mm, wb_bytes_mm,
                  CPU_CUDA(wb_cpu_mm_impl, wb_cuda_mm_impl)},
    [WB_OP_ADDMM] = {WB_OP_ADDMM, "addmm", WB_OP_KIND_KERNEL, 3, 0, 1, wb_shape_addmm, wb_flops_mm, wb_bytes_mm,
                     CPU_CUDA(wb_cpu_mm_impl, wb_cuda_mm_impl)},
    [WB_OP_GEGLU_LINEAR] = {WB_OP_GEGLU_LINEAR, "geglu_linear", WB_OP_KIND_KERNEL, 5, 2, 1, wb_shape_geglu_linear,
                            wb_flops_geglu_linear, wb_bytes_geglu_linear,
                            CPU_CUDA(wb_cpu_geglu_linear_impl, wb_cuda_geglu_linear_impl)},
    [WB_OP_TO] = {WB_OP_TO, "to", WB_OP_KIND_KERNEL, 1, 0, 1, wb_shape_to, NULL, wb_bytes_unary,
                  ALL_DEVICES(wb_to_impl)},
    [WB_OP_MATMUL] = {WB_OP_MATMUL, "matmul", WB_OP_KIND_COMPOSITE, 2, 0, 0, wb_shape_matmul, NULL, NULL,
                      ALL_DEVICES(wb_matmul_impl)},
    [WB_OP_LINEAR] = {WB_OP_LINEAR, "linear", WB_OP_KIND_COMPOSITE, 3, 1, 0, wb_shape_linear, NULL, NULL,
                      ALL_DEVICES(wb_linear_impl)},
};
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
