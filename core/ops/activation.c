/* activation.c: the elementwise activations of <wb/abi/act_list.h> (silu, sigmoid, relu,
 * tanh, exp, ...) and the fused swiglu (silu(gate) * up) on the cpu: one kernel each, run by the
 * active ISA's vectorised routine (wb_cpu_act_run, the same math as the GEMM's silu epilogue), and
 * their public entry points, wb_<name>(), made by the list. bf16 goes through bf16.c (f32 math,
 * one rounding). On cuda the activations run the plugin's kernels of the same list (cuda_ops.c);
 * swiglu has none yet. */
#include <wb_kernels/gemm.h>
#include <wb_kernels/pointwise.h>

#include "op.h"
#include "pointwise.h"
#include "storage.h"

typedef struct act_launch {
    const wb_cpu_isa *isa;
    wb_cpu_act act;
    const float *x, *u;
    float *y;
    int64_t n;
} act_launch;
static const wb_launch_layout act_layout = {
    .size = sizeof(act_launch),
    .npointers = 3,
    .pointers = {offsetof(act_launch, x), offsetof(act_launch, u), offsetof(act_launch, y)}};

static void run_act(void *v) {
    const act_launch *k = v;
    wb_cpu_act_run(k->isa, k->act, k->x, k->u, k->y, k->n);
}

wb_status wb_cpu_activation_impl(wb_op_call *c) {
    if (c->out->dtype == WB_BF16) return wb_cpu_bf16_pointwise(c);
    wb_cpu_act act = (wb_cpu_act)wb_cpu_act_of(c->def->id);
    wb_tensor *x = c->in[0], *u = act == WB_CPU_SWIGLU ? c->in[1] : NULL, *xc = NULL, *uc = NULL;
    wb_status st = WB_OK;
    /* strided inputs are gathered first (the vector routines read contiguous runs) */
    if (!wb_tensor_is_contiguous(x) && (st = wb_contiguous(x, &xc))) return st;
    if (u && !wb_tensor_is_contiguous(u) && (st = wb_contiguous(u, &uc))) {
        wb_tensor_free(xc);
        return st;
    }
    act_launch k = {.isa = wb_cpu_isa_active(),
                    .act = act,
                    .x = wb_tensor_data(xc ? xc : x),
                    .u = u ? wb_tensor_data(uc ? uc : u) : NULL,
                    .y = wb_tensor_data(c->out),
                    .n = wb_tensor_numel(c->out)};
    wb_kernel_desc d = wb_kernel_desc_for(c, &(wb_kernel_kind){.op = c->def->name, .isa = k.isa->name},
                                          k.n >= WB_CPU_PARALLEL_MIN ? wb_get_num_threads() : 1);
    wb_kernel_launch(&d, run_act, &k, &act_layout);
    wb_storage_bump_version(c->out->storage);
    wb_tensor_free(xc), wb_tensor_free(uc);
    return WB_OK;
}

static wb_status unary(wb_op_id id, wb_tensor *x, wb_tensor **out) {
    wb_op_call c = {.in = {x}, .nin = 1};
    return wb_dispatch_out(id, &c, out);
}

/* wb_silu, wb_sigmoid, ..., wb_softplus: one per line of the list (declared in wb.h the same way) */
#define ACT_ENTRY(ID, NAME, ...)                                                                                       \
    wb_status wb_##NAME(wb_tensor *x, wb_tensor **out) { return unary(WB_OP_##ID, x, out); }
WB_ACT_LIST(ACT_ENTRY)
#undef ACT_ENTRY

/* The list as data, for the bindings (wb.<name>, t:<name>(), wb._ops()); the expressions are
 * the list's own text. */
#define ACT_INFO_ROW(ID, NAME, VEC, REF, CUDA, FORMULA)                                                                \
    {.name = #NAME, .formula = FORMULA, .expr_c = #VEC, .expr_cuda = #CUDA},
static const wb_unary_info unary_info[] = {WB_ACT_LIST(ACT_INFO_ROW)};
#undef ACT_INFO_ROW
#define ACT_ID_ROW(ID, ...) WB_OP_##ID,
static const wb_op_id unary_ids[] = {WB_ACT_LIST(ACT_ID_ROW)};
#undef ACT_ID_ROW
enum { UNARY_COUNT = sizeof unary_ids / sizeof unary_ids[0] };

int wb_unary_count(void) { return UNARY_COUNT; }

const wb_unary_info *wb_unary_get(int i) { return i >= 0 && i < UNARY_COUNT ? &unary_info[i] : NULL; }

wb_status wb_unary(int i, wb_tensor *x, wb_tensor **out) {
    if (i < 0 || i >= UNARY_COUNT) {
        *out = NULL;
        return wb_error(WB_ERR_ARGUMENT, "unary op %d: no such activation (0..%d)", i, UNARY_COUNT - 1);
    }
    return unary(unary_ids[i], x, out);
}

wb_status wb_swiglu(wb_tensor *gate, wb_tensor *up, wb_tensor **out) {
    wb_op_call c = {.in = {gate, up}, .nin = 2};
    return wb_dispatch_out(WB_OP_SWIGLU, &c, out);
}
