/* mlp_ops.c: the gated MLP as one op, geglu_mlp / swiglu_mlp: act(x Wg^T) * (x Wu^T) Wd^T [+ b].
 * On the CPU one kernel (kernels/cpu/mlp.c) launched here; on cuda the existing kernels (the dual
 * GEMM, then the down linear), through their own ops. Shape rule, work counts, entry points. */
#include <inttypes.h>
#include <string.h>

#include <wb_kernels/mlp.h>

#include "linear_ops.h"
#include "mlp_ops.h"
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

static double rows_of(const wb_op_call *c) {
    double m = 1;
    for (int i = 0; i < c->out_ndim - 1; i++) m *= (double)c->out_shape[i];
    return m;
}

double wb_flops_mlp(const wb_op_call *c) {
    double h = (double)c->in[1]->shape[0], k = (double)c->in[1]->shape[1], n = (double)c->in[3]->shape[0];
    return 2.0 * rows_of(c) * h * (2 * k + n);
}

/* The fewest bytes: x, the three weights, the output (and bias); the hidden never moves. */
double wb_bytes_mlp(const wb_op_call *c) {
    double m = rows_of(c), h = (double)c->in[1]->shape[0], k = (double)c->in[1]->shape[1], n = (double)c->in[3]->shape[0];
    return (double)wb_dtype_size(c->in[0]->dtype) * (m * k + 2 * h * k + h * n + m * n + (c->in[4] ? n : 0));
}

/* ---- the CPU kernel ------------------------------------------------------------------------- */

typedef struct mlp_launch {
    const wb_cpu_isa *isa;
    wb_mlp_problem p;
    int result;
    /* packed weights, re-resolved before a graph replay (a write to a weight re-packs it) */
    wb_storage *gate, *up, *down;
    int64_t gate_offset, up_offset, down_offset;
    int64_t gate_rsb, gate_csb, down_rsb, down_csb;
} mlp_launch;

static void run_mlp(void *v) {
    mlp_launch *l = v;
    l->result = wb_mlp_run(l->isa, &l->p); /* (refuses a non-empty problem without its packed weights) */
}

static void pack_weights(mlp_launch *l) {
    const wb_mlp_problem *p = &l->p;
    l->p.packed_gate_up = wb_prepack_get(l->isa, l->gate, l->gate_offset, p->k, p->h, l->gate_rsb, l->gate_csb, l->up,
                                         l->up_offset, p->x_bf16);
    l->p.packed_down =
        wb_prepack_get(l->isa, l->down, l->down_offset, p->h, p->n, l->down_rsb, l->down_csb, NULL, 0, p->x_bf16);
}

static void refresh_mlp(void *v) { pack_weights(v); }

/* packed weights are not listed: refresh re-resolves them from the storages */
static const wb_launch_layout mlp_layout = {
    .size = sizeof(mlp_launch),
    .refresh = refresh_mlp,
    .npointers = 3,
    .pointers = {offsetof(mlp_launch, p.x), offsetof(mlp_launch, p.bias), offsetof(mlp_launch, p.out)}};

static wb_status cpu_mlp(wb_op_call *c) {
    wb_tensor *x = c->in[0], *wg = c->in[1], *wu = c->in[2], *wd = c->in[3], *b = c->in[4];
    wb_tensor *xc = NULL, *wgc = NULL, *wuc = NULL, *bc = NULL;
    wb_status st = wb_tensor_empty(c->out_dtype, c->device, c->out_ndim, c->out_shape, &c->out);
    if (st) return st;
    int64_t k = wg->shape[1], h = wg->shape[0], n = wd->shape[0], m = 1;
    for (int i = 0; i < x->ndim - 1; i++) m *= x->shape[i];
    int64_t shape2[2] = {m, k}, stride2[2] = {k, 1};
    if (x->ndim == 2) {
        stride2[0] = x->stride[0], stride2[1] = x->stride[1];
    } else if (!wb_view_strides(x, 2, shape2, stride2)) {
        if ((st = wb_contiguous(x, &xc))) goto done;
        x = xc, stride2[0] = k, stride2[1] = 1;
    }
    if (wg->stride[0] != wu->stride[0] || wg->stride[1] != wu->stride[1]) { /* one packer walks both */
        if ((st = wb_contiguous(wg, &wgc)) || (st = wb_contiguous(wu, &wuc))) goto done;
        wg = wgc, wu = wuc;
    }
    if (b && n > 1 && b->stride[0] != 1) { /* the kernel reads the bias contiguously */
        if ((st = wb_contiguous(b, &bc))) goto done;
        b = bc;
    }
    int bf16 = x->dtype == WB_BF16;
    mlp_launch l = {
        .isa = wb_cpu_isa_active(), /* bf16: the f32 path, weights widened once when packed */
        .p = {.m = m,
              .k = k,
              .h = h,
              .n = n,
              .x = wb_tensor_data(x),
              .rsx = stride2[0],
              .csx = stride2[1],
              .x_bf16 = bf16,
              .bias = b ? wb_tensor_data(b) : NULL,
              .bias_bf16 = bf16,
              .out = wb_tensor_data(c->out),
              .ldo = n,
              .out_bf16 = bf16,
              .act = c->def->id == WB_OP_SWIGLU_MLP ? WB_STORE_SWIGLU : WB_STORE_GEGLU,
              .threads = wb_get_num_threads()},
        .gate = wg->storage,
        .up = wu->storage,
        .down = wd->storage,
        .gate_offset = wg->offset,
        .up_offset = wu->offset,
        .down_offset = wd->offset,
        .gate_rsb = wg->stride[1], /* B = W^T */
        .gate_csb = wg->stride[0],
        .down_rsb = wd->stride[1],
        .down_csb = wd->stride[0],
    };
    if (k > 0 && h > 0 && n > 0) pack_weights(&l);
    int threads;
    wb_mlp_plan(l.isa, &l.p, &threads);
    wb_kernel_kind key = {.op = "mlp",
                          .dtype = bf16 ? "bf16" : NULL,
                          .isa = l.isa->name,
                          .tile_m = l.isa->mr,
                          .tile_n = l.isa->nr,
                          .layout = "tn",
                          .bias = b != NULL,
                          .act = c->def->id == WB_OP_SWIGLU_MLP ? WB_ACT_SWIGLU : WB_ACT_GEGLU};
    wb_kernel_desc d = wb_kernel_desc_for(c, &key, threads);
    if (k > 0 && h > 0 && n > 0 && (!l.p.packed_gate_up || !l.p.packed_down)) {
        st = wb_error(WB_ERR_MEMORY, "the weights could not be packed (out of memory, or over half of the packing cache)");
        goto done;
    }
    wb_kernel_launch(&d, run_mlp, &l, &mlp_layout);
    wb_storage_bump_version(c->out->storage);
    if (l.result)
        st = wb_error(WB_ERR_MEMORY, "out of memory for the fused MLP's buffers");
done:
    wb_tensor_free(xc), wb_tensor_free(wgc), wb_tensor_free(wuc), wb_tensor_free(bc);
    if (st) wb_tensor_free(c->out), c->out = NULL;
    return st;
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

wb_status wb_cpu_mlp_impl(wb_op_call *c) { return cpu_mlp(c); }
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
