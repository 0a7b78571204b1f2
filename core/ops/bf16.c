/* bf16.c: the cpu launcher of the pointwise ops on bf16 tensors (the arithmetic ops of
 * <wb/abi/arith_list.h>, gelu, geglu, and the activations of activation.c): storage is bf16,
 * the math is f32, the result is rounded once (the kernel is wb_cpu_bf16_pointwise_run). One
 * kernel per op, as in f32, so kernel counts and graphs read the same in both dtypes. (The GEMMs
 * are in launch_linear.c.) */
#include <string.h>

#include <wb_kernels/bf16.h>
#include <wb_kernels/pointwise.h>

#include "convert.h"
#include "linear.h"
#include "op.h"
#include "pointwise.h"

static void run_bf16(void *v) { wb_cpu_bf16_pointwise_run(v); }
static const wb_launch_layout bf16_layout = {.size = sizeof(wb_cpu_bf16_launch),
                                             .npointers = 3,
                                             .pointers = {offsetof(wb_cpu_bf16_launch, out),
                                                          offsetof(wb_cpu_bf16_launch, a),
                                                          offsetof(wb_cpu_bf16_launch, b)}};

/* Below the activations' launcher (which sends bf16 here), so the op-to-activation map lives here. */
int wb_cpu_act_of(wb_op_id id) {
    switch (id) {
#define ACT_OF_CASE(ID, ...)                                                                                           \
    case WB_OP_##ID: return WB_CPU_##ID;
        WB_ACT_LIST(ACT_OF_CASE)
#undef ACT_OF_CASE
    case WB_OP_SWIGLU: return WB_CPU_SWIGLU;
    default: return WB_CPU_SILU;
    }
}

wb_status wb_cpu_bf16_pointwise(wb_op_call *c) {
    static const char *const ops[] = {
#define ARITH_NAME(ID, name, ...) [WB_BF16_##ID] = #name,
        WB_BINARY_LIST(ARITH_NAME) WB_ARITH_UNARY_LIST(ARITH_NAME)
#undef ARITH_NAME
        [WB_BF16_GELU_TANH] = "gelu_tanh", [WB_BF16_GELU_ERF] = "gelu_erf", [WB_BF16_GEGLU] = "geglu"};
    wb_cpu_bf16_op op;
    switch (c->def->id) {
#define ARITH_CASE(ID, ...)                                                                                            \
    case WB_OP_##ID: op = WB_BF16_##ID; break;
        WB_BINARY_LIST(ARITH_CASE)
        WB_ARITH_UNARY_LIST(ARITH_CASE)
#undef ARITH_CASE
    case WB_OP_GELU: op = c->p.gemm.activation == WB_ACT_GELU_ERF ? WB_BF16_GELU_ERF : WB_BF16_GELU_TANH; break;
    case WB_OP_GEGLU: op = WB_BF16_GEGLU; break;
#define ACT_LIST_CASE(ID, ...) case WB_OP_##ID:
        WB_ACT_LIST(ACT_LIST_CASE)
#undef ACT_LIST_CASE
    case WB_OP_SWIGLU: op = WB_BF16_ACT; break;
    default: return wb_error(WB_ERR_UNSUPPORTED, "no bf16 cpu kernel for this op");
    }
    wb_cpu_act act = op == WB_BF16_ACT ? (wb_cpu_act)wb_cpu_act_of(c->def->id) : WB_CPU_SILU;
    wb_tensor *out = c->out, *a = c->in[0], *b = wb_cpu_bf16_op_binary(op, act) ? c->in[1] : NULL;
    wb_cpu_bf16_launch k = {.op = op,
                            .isa = wb_cpu_isa_active(),
                            .ndim = out->ndim,
                            .n = wb_tensor_numel(out),
                            .out = wb_tensor_data(out),
                            .a = wb_tensor_data(a),
                            .b = b ? wb_tensor_data(b) : NULL,
                            .act = act};
    memcpy(k.shape, out->shape, sizeof k.shape);
    wb_broadcast_strides(a, out->ndim, out->shape, k.as);
    if (b) wb_broadcast_strides(b, out->ndim, out->shape, k.bs);
    k.contiguous = wb_same_geometry_contiguous(a, out) && (!b || wb_same_geometry_contiguous(b, out));
    wb_kernel_kind key = {
        .op = op == WB_BF16_ACT ? wb_op_name(c->def->id) : ops[op], .dtype = "bf16", .isa = k.isa->name, .variant = k.contiguous ? NULL : "strided"};
    wb_kernel_desc d =
        wb_kernel_desc_for(c, &key, k.contiguous && k.n >= WB_CPU_PARALLEL_MIN ? wb_get_num_threads() : 1);
    wb_kernel_launch(&d, run_bf16, &k, &bf16_layout);
    wb_storage_bump_version(out->storage);
    return WB_OK;
}
