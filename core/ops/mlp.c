/* mlp.c: the gated MLP as one op, geglu_mlp / swiglu_mlp: act(x Wg^T) * (x Wu^T) Wd^T [+ b].
 * On the CPU one kernel (kernels/cpu/mlp.c, launched by core/cpu/launch_mlp.c); on cuda the existing
 * kernels (the dual GEMM, then the down linear), through their own ops. Shape rule, work counts,
 * entry points. */
#include <inttypes.h>
#include <string.h>

#include "linear.h"
#include "mlp.h"
#include "storage.h"
#include "views.h"

/* The argument names the messages use, in input order. */
static const char *const ARG[] = {"x", "w_gate", "w_up", "w_down", "b_down"};

wb_status wb_shape_mlp(wb_op_call *c) {
    const wb_tensor *x = c->in[0], *wg = c->in[1], *wu = c->in[2], *wd = c->in[3], *b = c->in[4];
    char b1[256], b2[256];
    for (int i = 1; i < 5; i++)
        if (c->in[i] && c->in[i]->dtype != x->dtype)
            return wb_error(WB_ERR_DTYPE, "%s is %s but x is %s (convert one with :to{dtype=...})", ARG[i],
                            wb_dtype_name(c->in[i]->dtype), wb_dtype_name(x->dtype));
    wb_status st = wb_dtype_check_supported(x->dtype, c->def->name);
    if (st) return st;
    if (x->ndim < 1) return wb_error(WB_ERR_SHAPE, "x must have at least 1 dimension, got a scalar");
    if (wg->ndim != 2)
        return wb_error(WB_ERR_SHAPE, "w_gate must be 2-D [hidden, in_features], got shape %s",
                        wb_shape_format(wg->ndim, wg->shape, b1, sizeof b1));
    if (wu->ndim != 2 || wu->shape[0] != wg->shape[0] || wu->shape[1] != wg->shape[1])
        return wb_error(WB_ERR_SHAPE, "w_gate is %s but w_up is %s: both must be [hidden, in_features]",
                        wb_shape_format(2, wg->shape, b1, sizeof b1),
                        wb_shape_format(wu->ndim, wu->shape, b2, sizeof b2));
    if (x->shape[x->ndim - 1] != wg->shape[1])
        return wb_error(WB_ERR_SHAPE, "x has %" PRId64 " features but w_gate and w_up expect %" PRId64,
                        x->shape[x->ndim - 1], wg->shape[1]);
    if (wd->ndim != 2 || wd->shape[1] != wg->shape[0])
        return wb_error(WB_ERR_SHAPE, "w_down is %s but must be [out_features, %" PRId64 "] (the hidden size of w_gate %s)",
                        wb_shape_format(wd->ndim, wd->shape, b1, sizeof b1), wg->shape[0],
                        wb_shape_format(2, wg->shape, b2, sizeof b2));
    if (b && (b->ndim != 1 || b->shape[0] != wd->shape[0]))
        return wb_error(WB_ERR_SHAPE, "b_down has shape %s but w_down has %" PRId64 " output features",
                        wb_shape_format(b->ndim, b->shape, b1, sizeof b1), wd->shape[0]);
    c->out_dtype = x->dtype;
    c->out_ndim = x->ndim;
    memcpy(c->out_shape, x->shape, sizeof c->out_shape);
    c->out_shape[x->ndim - 1] = wd->shape[0];
    return WB_OK;
}

double wb_flops_mlp(const wb_op_call *c) {
    double h = (double)c->in[1]->shape[0], k = (double)c->in[1]->shape[1], n = (double)c->in[3]->shape[0];
    return 2.0 * wb_out_rows(c) * h * (2 * k + n);
}

/* The fewest bytes: x, the three weights, the output (and bias); the hidden never moves. */
double wb_bytes_mlp(const wb_op_call *c) {
    double m = wb_out_rows(c), h = (double)c->in[1]->shape[0], k = (double)c->in[1]->shape[1], n = (double)c->in[3]->shape[0];
    return (double)wb_dtype_size(c->in[0]->dtype) * (m * k + 2 * h * k + h * n + m * n + (c->in[4] ? n : 0));
}

/* ---- cuda: the existing kernels ------------------------------------------------------------- */

static wb_status composed_mlp(wb_op_call *c) {
    wb_tensor *hidden = NULL;
    wb_status st = c->def->id == WB_OP_SWIGLU_MLP
                       ? wb_swiglu_linear(c->in[0], c->in[1], c->in[2], NULL, NULL, &hidden)
                       : wb_geglu_linear(c->in[0], c->in[1], c->in[2], NULL, NULL, &hidden);
    if (st) return st;
    st = wb_linear(hidden, c->in[3], c->in[4], WB_ACT_NONE, &c->out);
    wb_tensor_free(hidden);
    return st;
}

wb_status wb_cuda_mlp_impl(wb_op_call *c) { return composed_mlp(c); }

/* ---- public entry points ---------------------------------------------------------------------- */

static wb_status mlp(wb_op_id id, wb_tensor *x, wb_tensor *w_gate, wb_tensor *w_up, wb_tensor *w_down,
                     wb_tensor *b_down, wb_tensor **out) {
    wb_op_call c = {0};
    c.in[0] = x, c.in[1] = w_gate, c.in[2] = w_up, c.in[3] = w_down, c.in[4] = b_down, c.nin = 5;
    return wb_dispatch_out(id, &c, out);
}

wb_status wb_geglu_mlp(wb_tensor *x, wb_tensor *w_gate, wb_tensor *w_up, wb_tensor *w_down, wb_tensor *b_down,
                       wb_tensor **out) {
    return mlp(WB_OP_GEGLU_MLP, x, w_gate, w_up, w_down, b_down, out);
}

wb_status wb_swiglu_mlp(wb_tensor *x, wb_tensor *w_gate, wb_tensor *w_up, wb_tensor *w_down, wb_tensor *b_down,
                        wb_tensor **out) {
    return mlp(WB_OP_SWIGLU_MLP, x, w_gate, w_up, w_down, b_down, out);
}
