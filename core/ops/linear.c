/* linear.c: the GEMM family (mm, addmm, matmul, linear, geglu_linear) and the GELU
 * activations (gelu, geglu) as ops: shape rules, work counts, the composites and the public
 * entry points (the CPU launchers are in launch_linear.c, the cuda ones in cuda_ops.c). linear is a
 * composite, as in PyTorch: the op event "linear" contains "t" (a view, no kernel) and "addmm"
 * or "mm", whose one kernel carries the bias and activation in its epilogue. */
#include <inttypes.h>
#include <string.h>

#include "linear.h"
#include "pointwise.h"
#include "storage.h"
#include "views.h"

/* The first operand's dtype rules; others must match it (no silent promotion). */
static wb_status check_dtype(const wb_op_call *c, const wb_tensor *t, const char *what) {
    const wb_tensor *first = t;
    for (int i = c->nin - 1; i >= 0; i--)
        if (c->in[i]) first = c->in[i];
    if (t->dtype != first->dtype)
        return wb_error(WB_ERR_DTYPE, "%s: mixed dtypes %s and %s (convert one with :to{dtype=...})", what,
                        wb_dtype_name(first->dtype), wb_dtype_name(t->dtype));
    return wb_dtype_check_supported(t->dtype, what);
}

/* ---- mm / addmm ------------------------------------------------------------------------------ */

static wb_status shape_mm_common(wb_op_call *c, const wb_tensor *a, const wb_tensor *b) {
    char ba[256], bb[256];
    wb_status st;
    if ((st = check_dtype(c, a, c->def->name)) || (st = check_dtype(c, b, c->def->name))) return st;
    if (a->ndim != 2 || b->ndim != 2)
        return wb_error(WB_ERR_SHAPE, "expects 2-D matrices, got shapes %s and %s",
                        wb_shape_format(a->ndim, a->shape, ba, sizeof ba),
                        wb_shape_format(b->ndim, b->shape, bb, sizeof bb));
    if (a->shape[1] != b->shape[0])
        return wb_error(WB_ERR_SHAPE, "shapes %s and %s cannot be multiplied (%" PRId64 " columns vs %" PRId64 " rows)",
                        wb_shape_format(2, a->shape, ba, sizeof ba), wb_shape_format(2, b->shape, bb, sizeof bb),
                        a->shape[1], b->shape[0]);
    c->out_dtype = a->dtype;
    c->out_ndim = 2;
    c->out_shape[0] = a->shape[0];
    c->out_shape[1] = b->shape[1];
    return WB_OK;
}

wb_status wb_shape_mm(wb_op_call *c) { return shape_mm_common(c, c->in[0], c->in[1]); }

wb_status wb_shape_addmm(wb_op_call *c) {
    wb_status st = shape_mm_common(c, c->in[1], c->in[2]);
    if (st) return st;
    const wb_tensor *bias = c->in[0];
    int64_t n = c->out_shape[1];
    char b[256];
    if ((st = check_dtype(c, bias, "addmm"))) return st;
    if (!((bias->ndim == 1 && bias->shape[0] == n) || (bias->ndim == 2 && bias->shape[0] == 1 && bias->shape[1] == n)))
        return wb_error(WB_ERR_SHAPE,
                        "bias of shape %s does not fit the %" PRId64 " output columns (expected {%" PRId64 "})",
                        wb_shape_format(bias->ndim, bias->shape, b, sizeof b), n, n);
    return WB_OK;
}

double wb_flops_mm(const wb_op_call *c) {
    const wb_tensor *a = c->in[c->def->id == WB_OP_ADDMM];
    return 2.0 * (double)c->out_shape[0] * (double)c->out_shape[1] * (double)a->shape[1];
}

double wb_bytes_mm(const wb_op_call *c) {
    int off = c->def->id == WB_OP_ADDMM;
    double m = (double)c->out_shape[0], n = (double)c->out_shape[1], k = (double)c->in[off]->shape[1];
    return (double)wb_dtype_size(c->in[off]->dtype) * (m * k + k * n + m * n + (off ? n : 0));
}

/* ---- geglu_linear: the dual GEMM ------------------------------------------------------------ */

wb_status wb_shape_geglu_linear(wb_op_call *c) {
    const wb_tensor *x = c->in[0], *wg = c->in[1], *wu = c->in[2];
    char b1[256], b2[256];
    wb_status st;
    if ((st = check_dtype(c, x, c->def->name)) || (st = check_dtype(c, wg, c->def->name)) ||
        (st = check_dtype(c, wu, c->def->name)))
        return st;
    if (wg->ndim != 2)
        return wb_error(WB_ERR_SHAPE, "w_gate must be 2-D [hidden, in_features], got shape %s",
                        wb_shape_format(wg->ndim, wg->shape, b1, sizeof b1));
    if (wu->ndim != 2 || wu->shape[0] != wg->shape[0] || wu->shape[1] != wg->shape[1])
        return wb_error(WB_ERR_SHAPE, "w_gate is %s but w_up is %s: both must be [hidden, in_features]",
                        wb_shape_format(2, wg->shape, b1, sizeof b1),
                        wb_shape_format(wu->ndim, wu->shape, b2, sizeof b2));
    if (x->ndim < 1) return wb_error(WB_ERR_SHAPE, "input must have at least 1 dimension, got a scalar");
    if (x->shape[x->ndim - 1] != wg->shape[1])
        return wb_error(WB_ERR_SHAPE, "input has %" PRId64 " features but the weights expect %" PRId64,
                        x->shape[x->ndim - 1], wg->shape[1]);
    for (int i = 3; i < 5; i++) {
        const wb_tensor *b = c->in[i];
        if (b && ((st = check_dtype(c, b, c->def->name)) || b->ndim != 1 || b->shape[0] != wg->shape[0]))
            return st ? st
                      : wb_error(WB_ERR_SHAPE, "%s has shape %s but the weights have %" PRId64 " output features",
                                 i == 3 ? "b_gate" : "b_up", wb_shape_format(b->ndim, b->shape, b1, sizeof b1),
                                 wg->shape[0]);
    }
    c->out_dtype = x->dtype;
    c->out_ndim = x->ndim;
    memcpy(c->out_shape, x->shape, sizeof c->out_shape);
    c->out_shape[x->ndim - 1] = wg->shape[0];
    return WB_OK;
}

double wb_out_rows(const wb_op_call *c) {
    double m = 1;
    for (int i = 0; i < c->out_ndim - 1; i++)
        m *= (double)c->out_shape[i];
    return m;
}

double wb_flops_geglu_linear(const wb_op_call *c) {
    return 4.0 * wb_out_rows(c) * (double)c->in[1]->shape[0] * (double)c->in[1]->shape[1];
}

double wb_bytes_geglu_linear(const wb_op_call *c) {
    double m = wb_out_rows(c), h = (double)c->in[1]->shape[0], k = (double)c->in[1]->shape[1];
    return (double)wb_dtype_size(c->in[0]->dtype) *
           (m * k + 2 * h * k + m * h + (c->in[3] ? h : 0) + (c->in[4] ? h : 0));
}

/* ---- gelu, geglu ------------------------------------------------------------------------------ */

/* Transcendental work has no agreed FLOP count: gelu reports none, geglu its multiply. */
double wb_flops_gelu(const wb_op_call *c) {
    (void)c;
    return 0;
}

double wb_flops_geglu(const wb_op_call *c) { /* a 0-d geglu is one element */
    return wb_out_rows(c) * (c->out_ndim ? (double)c->out_shape[c->out_ndim - 1] : 1.0);
}

wb_status wb_shape_geglu(wb_op_call *c) {
    const wb_tensor *g = c->in[0], *u = c->in[1];
    wb_status st;
    if ((st = check_dtype(c, g, c->def->name)) || (st = check_dtype(c, u, c->def->name))) return st;
    if (g->ndim != u->ndim || memcmp(g->shape, u->shape, sizeof(int64_t) * (size_t)g->ndim)) {
        char b1[256], b2[256];
        return wb_error(WB_ERR_SHAPE, "gate %s and up %s must have the same shape",
                        wb_shape_format(g->ndim, g->shape, b1, sizeof b1),
                        wb_shape_format(u->ndim, u->shape, b2, sizeof b2));
    }
    c->out_dtype = g->dtype;
    c->out_ndim = g->ndim;
    memcpy(c->out_shape, g->shape, sizeof c->out_shape);
    return WB_OK;
}

/* ---- composites: matmul, linear ------------------------------------------------------------- */

wb_status wb_shape_matmul(wb_op_call *c) {
    const wb_tensor *a = c->in[0], *b = c->in[1];
    char ba[256], bb[256];
    if ((a->ndim != 2 && a->ndim != 3) || b->ndim != 2)
        return wb_error(WB_ERR_SHAPE, "supports 2-D x 2-D and 3-D x 2-D, got shapes %s and %s",
                        wb_shape_format(a->ndim, a->shape, ba, sizeof ba),
                        wb_shape_format(b->ndim, b->shape, bb, sizeof bb));
    if (a->shape[a->ndim - 1] != b->shape[0])
        return wb_error(WB_ERR_SHAPE, "shapes %s and %s cannot be multiplied (%" PRId64 " columns vs %" PRId64 " rows)",
                        wb_shape_format(a->ndim, a->shape, ba, sizeof ba), wb_shape_format(2, b->shape, bb, sizeof bb),
                        a->shape[a->ndim - 1], b->shape[0]);
    c->out_dtype = a->dtype;
    c->out_ndim = a->ndim;
    memcpy(c->out_shape, a->shape, sizeof c->out_shape);
    c->out_shape[a->ndim - 1] = b->shape[1];
    return WB_OK;
}

/* mm or addmm with the internal options (activation in the epilogue, prepacked weights). */
static wb_status gemm_ex(wb_tensor *bias, wb_tensor *a, wb_tensor *b, wb_activation act, int prepack, wb_tensor **out) {
    wb_op_call c = {0};
    *out = NULL;
    if (bias)
        c.in[0] = bias, c.in[1] = a, c.in[2] = b, c.nin = 3;
    else
        c.in[0] = a, c.in[1] = b, c.nin = 2;
    c.p.gemm.activation = act;
    c.p.gemm.prepack = prepack;
    return wb_dispatch_out(bias ? WB_OP_ADDMM : WB_OP_MM, &c, out);
}

/* mm or addmm of x folded to 2-D [rows, last], the result unfolded to c's output shape. */
static wb_status fold_rows(wb_op_call *c, wb_tensor *x, wb_tensor *bias, wb_tensor *b, wb_activation act, int prepack) {
    wb_tensor *x2 = NULL, *y2 = NULL;
    wb_status st = WB_OK;
    if (x->ndim != 2) {
        int64_t shape[2] = {-1, x->shape[x->ndim - 1]};
        if ((st = wb_reshape(x, 2, shape, &x2))) return st;
    }
    st = gemm_ex(bias, x2 ? x2 : x, b, act, prepack, &y2);
    wb_tensor_free(x2);
    if (st) return st;
    if (c->out_ndim == 2) {
        c->out = y2;
        return WB_OK;
    }
    st = wb_view(y2, c->out_ndim, c->out_shape, &c->out);
    wb_tensor_free(y2);
    return st;
}

wb_status wb_matmul_impl(wb_op_call *c) { return fold_rows(c, c->in[0], NULL, c->in[1], WB_ACT_NONE, 0); }

wb_status wb_shape_linear(wb_op_call *c) {
    const wb_tensor *x = c->in[0], *w = c->in[1], *bias = c->in[2];
    char b1[256];
    if (w->ndim != 2)
        return wb_error(WB_ERR_SHAPE, "weight must be 2-D [out_features, in_features], got shape %s",
                        wb_shape_format(w->ndim, w->shape, b1, sizeof b1));
    if (x->ndim < 1) return wb_error(WB_ERR_SHAPE, "input must have at least 1 dimension, got a scalar");
    if (x->shape[x->ndim - 1] != w->shape[1])
        return wb_error(WB_ERR_SHAPE, "input has %" PRId64 " features but weight expects %" PRId64,
                        x->shape[x->ndim - 1], w->shape[1]);
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0]))
        return wb_error(WB_ERR_SHAPE, "bias has shape %s but the weight has %" PRId64 " output features",
                        wb_shape_format(bias->ndim, bias->shape, b1, sizeof b1), w->shape[0]);
    if (x->dtype != w->dtype || (bias && bias->dtype != w->dtype))
        return wb_error(WB_ERR_DTYPE, "mixed dtypes: input %s, weight %s%s%s (convert one with :to{dtype=...})",
                        wb_dtype_name(x->dtype), wb_dtype_name(w->dtype), bias ? ", bias " : "",
                        bias ? wb_dtype_name(bias->dtype) : "");
    c->out_dtype = x->dtype;
    c->out_ndim = x->ndim == 1 ? 1 : x->ndim;
    memcpy(c->out_shape, x->shape, sizeof c->out_shape);
    c->out_shape[x->ndim - 1] = w->shape[0];
    return WB_OK;
}

wb_status wb_linear_impl(wb_op_call *c) {
    wb_tensor *wt;
    wb_status st = wb_t(c->in[1], &wt); /* a view: no data moves, no kernel */
    if (st) return st;
    st = fold_rows(c, c->in[0], c->in[2], wt, c->p.gemm.activation, 1);
    wb_tensor_free(wt);
    return st;
}

/* ---- public entry points ---------------------------------------------------------------------- */

wb_status wb_mm(wb_tensor *a, wb_tensor *b, wb_tensor **out) { return gemm_ex(NULL, a, b, WB_ACT_NONE, 0, out); }

wb_status wb_addmm(wb_tensor *bias, wb_tensor *a, wb_tensor *b, wb_tensor **out) {
    if (!bias) return wb_error(WB_ERR_ARGUMENT, "addmm: bias is missing");
    return gemm_ex(bias, a, b, WB_ACT_NONE, 0, out);
}

wb_status wb_matmul(wb_tensor *a, wb_tensor *b, wb_tensor **out) {
    wb_op_call c = {0};
    c.in[0] = a, c.in[1] = b, c.nin = 2;
    return wb_dispatch_out(WB_OP_MATMUL, &c, out);
}

wb_status wb_linear(wb_tensor *x, wb_tensor *w, wb_tensor *bias, wb_activation act, wb_tensor **out) {
    wb_op_call c = {0};
    c.in[0] = x, c.in[1] = w, c.in[2] = bias, c.nin = 3;
    c.p.gemm.activation = act;
    return wb_dispatch_out(WB_OP_LINEAR, &c, out);
}

wb_status wb_geglu_linear(wb_tensor *x, wb_tensor *w_gate, wb_tensor *w_up, wb_tensor *b_gate, wb_tensor *b_up,
                          wb_tensor **out) {
    wb_op_call c = {0};
    c.in[0] = x, c.in[1] = w_gate, c.in[2] = w_up, c.in[3] = b_gate, c.in[4] = b_up, c.nin = 5;
    return wb_dispatch_out(WB_OP_GEGLU_LINEAR, &c, out);
}

wb_status wb_swiglu_linear(wb_tensor *x, wb_tensor *w_gate, wb_tensor *w_up, wb_tensor *b_gate, wb_tensor *b_up,
                           wb_tensor **out) {
    wb_op_call c = {0};
    c.in[0] = x, c.in[1] = w_gate, c.in[2] = w_up, c.in[3] = b_gate, c.in[4] = b_up, c.nin = 5;
    return wb_dispatch_out(WB_OP_SWIGLU_LINEAR, &c, out);
}

wb_status wb_gelu(wb_tensor *x, wb_activation form, wb_tensor **out) {
    wb_op_call c = {0};
    if (form != WB_ACT_GELU_TANH && form != WB_ACT_GELU_ERF)
        return wb_error(WB_ERR_ARGUMENT, "gelu: form must be tanh or erf");
    c.in[0] = x, c.nin = 1;
    c.p.gemm.activation = form;
    return wb_dispatch_out(WB_OP_GELU, &c, out);
}

wb_status wb_geglu(wb_tensor *gate, wb_tensor *up, wb_tensor **out) {
    wb_op_call c = {0};
    c.in[0] = gate, c.in[1] = up, c.nin = 2;
    return wb_dispatch_out(WB_OP_GEGLU, &c, out);
}
