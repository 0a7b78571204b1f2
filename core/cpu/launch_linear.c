/* launch_linear.c: the CPU launchers of the GEMM family and the GELU activations: each turns the
 * op's tensors into a pointer-and-stride problem for the CPU kernels (wb_kernels/gemm.h,
 * wb_kernels/bf16.h), describes the launch (kernel kind, work counts, threads) and launches it
 * through wb_kernel_launch, so the profiler and graph capture see it. */
#include <string.h>

#include <wb_kernels/bf16.h>
#include <wb_kernels/gemm.h>
#include <wb_kernels/pointwise.h>

#include "linear.h"
#include "pointwise.h"
#include "storage.h"
#include "views.h"

/* BLAS (column-major) layout letter of a row-major operand viewed by cuBLAS-style naming:
 * 'n' when unit-stride along its second dim, 't' when along its first, 'g' otherwise. */
static char layout_letter(int64_t rows_stride, int64_t cols_stride, int64_t rows, int64_t cols) {
    if (cols_stride == 1 || cols <= 1) return rows_stride == 1 && cols > 1 && rows > 1 ? 't' : 'n';
    if (rows_stride == 1 || rows <= 1) return 't';
    return 'g';
}

typedef struct gemm_launch {
    const wb_cpu_isa *isa;
    wb_gemm_problem p;
    int result;
    /* packed weights, re-resolved before a graph replay (a write to the weight re-packs it) */
    wb_storage *b_storage, *up_storage;
    int64_t b_offset, up_offset;
    /* bf16: p's a, b, b_up, bias, bias_up and c point at bf16 data (same strides, in elements) */
    int bf16;
} gemm_launch;

static void run_gemm(void *v) {
    gemm_launch *g = v;
    g->result = g->bf16 ? wb_gemm_run_bf16(g->isa, &g->p) : wb_gemm_run(g->isa, &g->p);
}

static void refresh_gemm(void *v) {
    gemm_launch *g = v;
    if (g->b_storage)
        g->p.packed_b = wb_prepack_get(g->isa, g->b_storage, g->b_offset, g->p.k, g->p.n, g->p.rsb, g->p.csb,
                                       g->up_storage, g->up_offset, g->bf16);
}

/* packed_b is not listed: refresh re-resolves it from b_storage and up_storage, which a rebound
 * weight moves to its own storage (core/observe/graph_inputs.c) */
static const wb_launch_layout gemm_layout = {
    .size = sizeof(gemm_launch),
    .refresh = refresh_gemm,
    .npointers = 6,
    .pointers = {offsetof(gemm_launch, p.a), offsetof(gemm_launch, p.b), offsetof(gemm_launch, p.b_up),
                 offsetof(gemm_launch, p.c), offsetof(gemm_launch, p.bias), offsetof(gemm_launch, p.bias_up)},
    .nstorages = 2,
    .storages = {{offsetof(gemm_launch, b_storage), offsetof(gemm_launch, b_offset)},
                 {offsetof(gemm_launch, up_storage), offsetof(gemm_launch, up_offset)}}};

static wb_gemm_store store_for(wb_activation act) {
    return act == WB_ACT_GELU_TANH  ? WB_STORE_GELU_TANH
           : act == WB_ACT_GELU_ERF ? WB_STORE_GELU_ERF
           : act == WB_ACT_GEGLU    ? WB_STORE_GEGLU
           : act == WB_ACT_SILU     ? WB_STORE_SILU
           : act == WB_ACT_SWIGLU   ? WB_STORE_SWIGLU
                                    : WB_STORE_PLAIN;
}

/* Launches a GEMM problem whose kind is described by the fields given; b (and up) name the
 * weight storages whose packing a replay must re-check. */
static wb_status launch_gemm(const wb_op_call *c, const wb_cpu_isa *isa, int bf16, const wb_gemm_problem *p,
                             wb_kernel_kind key, wb_tensor *b, wb_tensor *up) {
    gemm_launch g = {.isa = isa, .p = *p, .bf16 = bf16};
    /* the count asked for: the kernel lowers it to what the cores allow when it runs, so a graph
     * captured while they were busy (the pool on one thread) replays on all of them once they
     * are free, and one captured on all gives way when they are busy */
    g.p.threads = wb_threads_requested();
    if (g.p.packed_b) {
        g.b_storage = b->storage, g.b_offset = b->offset;
        if (up) g.up_storage = up->storage, g.up_offset = up->offset;
    }
    key.dtype = NULL;
    key.op = up ? (bf16 ? "dual_bf16gemm" : "dual_sgemm") : (bf16 ? "bf16gemm" : "sgemm");
    key.isa = isa->name;
    key.tile_m = isa->mr, key.tile_n = isa->nr;
    wb_kernel_desc d = wb_kernel_desc_for(c, &key, g.p.threads);
    wb_kernel_launch(&d, run_gemm, &g, &gemm_layout);
    wb_storage_bump_version(c->out->storage);
    if (g.result) return wb_error(WB_ERR_MEMORY, "out of memory for the GEMM's packing buffers");
    return WB_OK;
}

wb_status wb_cpu_mm_impl(wb_op_call *c) {
    int addmm = c->def->id == WB_OP_ADDMM;
    wb_tensor *bias = addmm ? c->in[0] : NULL, *a = c->in[addmm], *b = c->in[addmm + 1], *tmp = NULL;
    wb_activation act = c->p.gemm.activation;
    int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    if (bias && n > 1 && bias->stride[bias->ndim - 1] != 1) { /* the epilogue reads the bias contiguously */
        wb_status st = wb_contiguous(bias, &tmp);
        if (st) return st;
        bias = tmp;
    }
    int bf16 = a->dtype == WB_BF16;
    const wb_cpu_isa *pairs = bf16 ? wb_cpu_isa_bf16(m) : NULL, *isa = pairs ? pairs : wb_cpu_isa_active();
    int64_t rsb = b->stride[0], csb = b->stride[1];
    int prepack = c->p.gemm.prepack && k > 0 && n > 0;
    wb_gemm_problem p = {
        .m = m,
        .n = n,
        .k = k,
        .a = wb_tensor_data(a),
        .rsa = a->stride[0],
        .csa = a->stride[1],
        .b = wb_tensor_data(b),
        .rsb = rsb,
        .csb = csb,
        .c = wb_tensor_data(c->out),
        .ldc = n,
        .bias = bias ? wb_tensor_data(bias) : NULL,
        .store = store_for(act),
        .packed_b = prepack ? wb_prepack_get(isa, b->storage, b->offset, k, n, rsb, csb, NULL, 0, bf16) : NULL,
    };
    wb_kernel_kind key = {.layout = {layout_letter(rsb, csb, k, n), layout_letter(a->stride[0], a->stride[1], m, k)},
                          .bias = bias != NULL,
                          .act = act};
    wb_status st = launch_gemm(c, isa, bf16, &p, key, b, NULL);
    wb_tensor_free(tmp);
    return st;
}

/* The dual GEMM: gelu_tanh(x W_gate^T + b_gate) * (x W_up^T + b_up) (geglu_linear) or
 * silu(...) * (...) (swiglu_linear), the two products kept in registers (one kernel). */
wb_status wb_cpu_geglu_linear_impl(wb_op_call *c) {
    wb_tensor *x = c->in[0], *wg = c->in[1], *wu = c->in[2], *bg = c->in[3], *bu = c->in[4];
    wb_tensor *xc = NULL, *wgc = NULL, *wuc = NULL, *bgc = NULL, *buc = NULL;
    wb_status st = WB_OK;
    int64_t k = wg->shape[1], h = wg->shape[0], m = 1;
    for (int i = 0; i < x->ndim - 1; i++) /* the rows: x's leading dims folded */
        m *= x->shape[i];
    /* x as a 2-D [m, k] geometry without copying when its strides allow */
    int64_t shape2[2] = {m, k}, stride2[2];
    if (x->ndim == 2) {
        stride2[0] = x->stride[0], stride2[1] = x->stride[1];
    } else if (!wb_view_strides(x, 2, shape2, stride2)) {
        if ((st = wb_contiguous(x, &xc))) return st;
        x = xc;
        stride2[0] = k, stride2[1] = 1;
    }
    if (wg->stride[0] != wu->stride[0] || wg->stride[1] != wu->stride[1]) { /* one packer walks both */
        if ((st = wb_contiguous(wg, &wgc)) || (st = wb_contiguous(wu, &wuc))) goto done;
        wg = wgc, wu = wuc;
    }
    /* the epilogue reads biases contiguously */
    if (bg && h > 1 && bg->stride[0] != 1 && (st = wb_contiguous(bg, &bgc))) goto done;
    if (bu && h > 1 && bu->stride[0] != 1 && (st = wb_contiguous(bu, &buc))) goto done;
    if (bgc) bg = bgc;
    if (buc) bu = buc;
    int bf16 = x->dtype == WB_BF16, swiglu = c->def->id == WB_OP_SWIGLU_LINEAR;
    const wb_cpu_isa *pairs = bf16 ? wb_cpu_isa_bf16(m) : NULL, *isa = pairs ? pairs : wb_cpu_isa_active();
    int64_t rsb = wg->stride[1], csb = wg->stride[0]; /* B = W^T */
    wb_gemm_problem p = {
        .m = m,
        .n = h,
        .k = k,
        .a = wb_tensor_data(x),
        .rsa = stride2[0],
        .csa = stride2[1],
        .b = wb_tensor_data(wg),
        .rsb = rsb,
        .csb = csb,
        .b_up = wb_tensor_data(wu),
        .c = wb_tensor_data(c->out),
        .ldc = h,
        .bias = bg ? wb_tensor_data(bg) : NULL,
        .bias_up = bu ? wb_tensor_data(bu) : NULL,
        .store = swiglu ? WB_STORE_SWIGLU : WB_STORE_GEGLU,
        .packed_b = k > 0 && h > 0
                        ? wb_prepack_get(isa, wg->storage, wg->offset, k, h, rsb, csb, wu->storage, wu->offset, bf16)
                        : NULL,
    };
    wb_kernel_kind key = {.layout = {layout_letter(rsb, csb, k, h), layout_letter(stride2[0], stride2[1], m, k)},
                          .bias = bg || bu,
                          .act = swiglu ? WB_ACT_SWIGLU : WB_ACT_GEGLU};
    st = launch_gemm(c, isa, bf16, &p, key, wg, wu);
done:
    wb_tensor_free(xc), wb_tensor_free(wgc), wb_tensor_free(wuc), wb_tensor_free(bgc), wb_tensor_free(buc);
    return st;
}

/* ---- gelu, geglu ------------------------------------------------------------------------------ */

typedef struct act_launch {
    const wb_cpu_isa *isa;
    const float *x, *u;
    float *y;
    int64_t n;
    int erf_form;
} act_launch;
static const wb_launch_layout act_layout = {
    .size = sizeof(act_launch),
    .npointers = 3,
    .pointers = {offsetof(act_launch, x), offsetof(act_launch, u), offsetof(act_launch, y)}};

static void run_activation(void *v) {
    const act_launch *k = v;
    wb_cpu_activation_run(k->isa, k->x, k->u, k->y, k->n, k->erf_form);
}

static void launch_activation(const wb_op_call *c, const char *op, act_launch k) {
    wb_kernel_desc d = wb_kernel_desc_for(c, &(wb_kernel_kind){.op = op, .isa = k.isa->name},
                                          k.n >= WB_CPU_PARALLEL_MIN ? wb_get_num_threads() : 1);
    wb_kernel_launch(&d, run_activation, &k, &act_layout);
    wb_storage_bump_version(c->out->storage);
}

wb_status wb_cpu_gelu_impl(wb_op_call *c) {
    if (c->out->dtype == WB_BF16) return wb_cpu_bf16_pointwise(c);
    wb_tensor *x = c->in[0], *out = c->out;
    const float *src = wb_tensor_data(x);
    if (!wb_tensor_is_contiguous(x)) { /* gather into the output, then run in place */
        wb_status st = wb_copy_(out, x);
        if (st) return st;
        src = wb_tensor_data(out);
    }
    int erf_form = c->p.gemm.activation == WB_ACT_GELU_ERF;
    launch_activation(c, erf_form ? "gelu_erf" : "gelu_tanh",
                      (act_launch){.isa = wb_cpu_isa_active(),
                                   .x = src,
                                   .y = wb_tensor_data(out),
                                   .n = wb_tensor_numel(out),
                                   .erf_form = erf_form});
    return WB_OK;
}

wb_status wb_cpu_geglu_impl(wb_op_call *c) {
    if (c->out->dtype == WB_BF16) return wb_cpu_bf16_pointwise(c);
    wb_tensor *g = c->in[0], *u = c->in[1], *gc = NULL, *uc = NULL;
    wb_status st = WB_OK;
    if (!wb_tensor_is_contiguous(g) && (st = wb_contiguous(g, &gc))) return st;
    if (!wb_tensor_is_contiguous(u) && (st = wb_contiguous(u, &uc))) {
        wb_tensor_free(gc);
        return st;
    }
    launch_activation(c, "geglu",
                      (act_launch){.isa = wb_cpu_isa_active(),
                                   .x = wb_tensor_data(gc ? gc : g),
                                   .u = wb_tensor_data(uc ? uc : u),
                                   .y = wb_tensor_data(c->out),
                                   .n = wb_tensor_numel(c->out)});
    wb_tensor_free(gc), wb_tensor_free(uc);
    return WB_OK;
}

/* ---- the CPU paths ---------------------------------------------------------------------------- */

const char *wb_cpu_isa_name(void) { return wb_cpu_isa_active()->name; }

wb_status wb_cpu_isa_select(const char *name) {
    if (wb_cpu_isa_set(name)) return WB_OK;
    return wb_error(WB_ERR_UNSUPPORTED, "cpu isa '%s' is not available on this CPU (expected avx512, avx2 or scalar)",
                    name);
}

const char *wb_cpu_bf16_name(void) { return wb_cpu_isa_bf16_name(); }

double wb_cpu_bf16_pair_speed(void) { return wb_cpu_isa_bf16_pair_speed(); }

wb_status wb_cpu_bf16_select(const char *name) {
    if (wb_cpu_isa_bf16_set(name)) return WB_OK;
    return wb_error(WB_ERR_UNSUPPORTED,
                    "bf16 gemm path '%s' is not available on this CPU (expected auto, avx512bf16 (needs "
                    "AVX512_BF16), avx2bf16 (needs AVX2), emulated or widen)",
                    name);
}
