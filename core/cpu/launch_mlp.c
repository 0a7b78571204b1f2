/* launch_mlp.c: the CPU launcher of geglu_mlp / swiglu_mlp (core/ops/mlp.c defines the op): packs
 * the three weights once (core/cpu/prepack.c), plans the threads and launches the one kernel of
 * kernels/cpu/mlp.c, re-resolving the packed weights before a graph replay. */
#include <stddef.h>
#include <stdint.h>

#include <wb_kernels/mlp.h>

#include "linear.h"
#include "mlp.h"
#include "storage.h"
#include "views.h"

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

/* packed weights are not listed: refresh re-resolves them from the storages, which a rebound
 * weight moves to its own */
static const wb_launch_layout mlp_layout = {
    .size = sizeof(mlp_launch),
    .refresh = refresh_mlp,
    .npointers = 3,
    .pointers = {offsetof(mlp_launch, p.x), offsetof(mlp_launch, p.bias), offsetof(mlp_launch, p.out)},
    .nstorages = 3,
    .storages = {{offsetof(mlp_launch, gate), offsetof(mlp_launch, gate_offset)},
                 {offsetof(mlp_launch, up), offsetof(mlp_launch, up_offset)},
                 {offsetof(mlp_launch, down), offsetof(mlp_launch, down_offset)}}};

wb_status wb_cpu_mlp_impl(wb_op_call *c) {
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
    /* bf16 on few rows: the k-pair kernels, as the linears pick them (wb_cpu_isa_bf16: where the
     * weights' bytes dominate), which read the packed weights as bf16, half the bytes of widened
     * ones; x is read as pair words in place: its rows must be contiguous and of even length
     * (else the f32 path; scripts/wb/compile_mlp.lua's model asks the same) */
    const wb_cpu_isa *pairs = bf16 ? wb_cpu_isa_bf16(m) : NULL;
    if (pairs && !(stride2[1] == 1 && k % 2 == 0)) pairs = NULL;
    mlp_launch l = {
        .isa = pairs ? pairs : wb_cpu_isa_active(), /* else bf16: the f32 path, weights widened once when packed */
        .p = {.m = m,
              .k = k,
              .h = h,
              .n = n,
              .x = wb_tensor_data(x),
              .rsx = stride2[0],
              .csx = stride2[1],
              .x_bf16 = bf16,
              .pairs = pairs != NULL,
              .bias = b ? wb_tensor_data(b) : NULL,
              .bias_bf16 = bf16,
              .out = wb_tensor_data(c->out),
              .ldo = n,
              .out_bf16 = bf16,
              .act = c->def->id == WB_OP_SWIGLU_MLP ? WB_STORE_SWIGLU : WB_STORE_GEGLU,
              .threads = wb_threads_requested()}, /* lowered by the kernel while the cores are busy */
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
    if (l.result == -2)
        st = wb_error(WB_ERR_UNSUPPORTED,
                      "the fused MLP's kernel path %s cannot read this x (a pair path needs bf16 rows of even "
                      "length, contiguous)",
                      l.isa->name);
    else if (l.result)
        st = wb_error(WB_ERR_MEMORY, "out of memory for the fused MLP's buffers");
done:
    wb_tensor_free(xc), wb_tensor_free(wgc), wb_tensor_free(wuc), wb_tensor_free(bc);
    if (st) wb_tensor_free(c->out), c->out = NULL;
    return st;
}
