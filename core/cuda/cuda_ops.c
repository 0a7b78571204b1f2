/* cuda_ops.c: the ops on device "cuda", each a thin translation from tensors (shapes, strides,
 * views) into the plugin's raw calls: elementwise kernels, the fused GeGLU kernel, cuBLASLt GEMMs
 * with their epilogues, and the dual GEMM as one GEMM against concatenated weights. Kernel events
 * come from CUPTI, not from here: a launch only tells graph capture and the profiler which kernel
 * it queued (device_launch). */
#include <stdlib.h>
#include <string.h>

#include <wb_kernels/bf16.h>

#include "backend.h"
#include "codegen.h"
#include "convert.h"
#include "cuda_plugin.h"
#include "linear.h"
#include "storage.h"

/* ---- launches -------------------------------------------------------------------------------- */

/* Tells graph capture and the profiler what was queued (CUPTI's record brings the times). */
static void device_launch(const wb_op_call *c, const wb_kernel_kind *key) {
    wb_kernel_desc d = wb_kernel_desc_for(c, key, 0);
    const wb_capture_hooks *cap = wb_capture_hooks_active();
    if (cap && cap->launch) cap->launch(cap->user, &d, NULL, NULL, NULL);
    const wb_device_hooks *h = wb_device_hooks_active();
    if (h && h->device_launch) h->device_launch(h->user, &d);
}

static void fill_strides(int64_t *dst, const wb_tensor *t) {
    memset(dst, 0, sizeof(int64_t) * WB_CUDA_MAX_DIMS);
    memcpy(dst, t->stride, sizeof(int64_t) * (size_t)t->ndim);
}

/* Our strided elementwise kernel, wb_<op>_kernel. c: the op that asked (NULL: a helper launch
 * whose work is counted by the GEMM it finishes). */
static wb_status run_ew(int op, wb_tensor *out, wb_tensor *a, wb_tensor *b, double value, const char *name,
                        const wb_op_call *c) {
    wb_cuda_ew e;
    memset(&e, 0, sizeof e);
    e.op = op;
    e.ndim = out->ndim;
    memcpy(e.shape, out->shape, sizeof(int64_t) * (size_t)out->ndim);
    e.out = wb_tensor_data(out);
    e.out_dtype = out->dtype;
    fill_strides(e.out_stride, out);
    if (a) {
        e.a = wb_tensor_data(a);
        e.a_dtype = a->dtype;
        wb_broadcast_strides(a, out->ndim, out->shape, e.a_stride);
    }
    if (b) {
        e.b = wb_tensor_data(b);
        e.b_dtype = b->dtype;
        wb_broadcast_strides(b, out->ndim, out->shape, e.b_stride);
    }
    e.value = value;
    if (wb_cuda_api_get()->elementwise(&e)) return wb_cuda_plugin_error(name);
    device_launch(c, &(wb_kernel_kind){.op = name, .variant = "kernel"});
    wb_storage_bump_version(out->storage);
    return WB_OK;
}

/* ---- copies, fills, creation ---------------------------------------------------------------- */

wb_status wb_cuda_copy_impl(wb_op_call *c) {
    wb_tensor *dst = c->in[0], *src = c->in[1], *tmp = NULL;
    if (wb_tensor_numel(dst) == 0) return WB_OK;
    if (src->storage == dst->storage) { /* overlapping: through a private copy */
        wb_status st = wb_clone(src, &tmp);
        if (st) return st;
        src = tmp;
    }
    wb_status st = run_ew(WB_CU_EW_COPY, dst, src, NULL, 0, "copy", c);
    wb_tensor_free(tmp);
    return st;
}

wb_status wb_cuda_fill_impl(wb_op_call *c) {
    return run_ew(WB_CU_EW_FILL, c->in[0], NULL, NULL, c->p.fill.value, "fill", c);
}

/* Random numbers and arange are drawn on the host (the same Philox stream as the cpu, so a seed
 * gives the same values on both devices) and copied over. */
void wb_cpu_creation_f32(wb_op_id op, float *out, int64_t n, uint64_t seed, uint64_t offset);

wb_status wb_cuda_creation_impl(wb_op_call *c) {
    int64_t n = wb_tensor_numel(c->out);
    size_t es = wb_dtype_size(c->out->dtype);
    float *host = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!host) return wb_error(WB_ERR_MEMORY, "out of host memory staging %lld values", (long long)n);
    wb_cpu_creation_f32(c->def->id, host, n, c->p.random.seed, c->p.random.offset);
    if (c->out->dtype == WB_BF16) /* in place: element i is written after it is read */
        wb_bf16_round_rows((uint16_t *)host, n, host, 1, n);
    int r = wb_cuda_api_get()->copy(wb_tensor_data(c->out), host, (size_t)n * es, WB_CU_COPY_H2D);
    free(host);
    if (r) return wb_cuda_plugin_error("copying to the device");
    wb_storage_bump_version(c->out->storage);
    return WB_OK;
}

/* ---- pointwise ------------------------------------------------------------------------------ */

/* The ops of the lists (<wb/abi/arith_list.h>: add, sub, mul, div, neg; act_list.h: the
 * activations) run the plugin's kernel of the same list line: its op code is made from the line,
 * as the op id is, so every listed op has one. */
static int listed_code(wb_op_id id) {
    switch (id) {
#define LISTED_CODE(ID, ...)                                                                                           \
    case WB_OP_##ID: return WB_CU_EW_##ID;
        WB_BINARY_LIST(LISTED_CODE)
        WB_ARITH_UNARY_LIST(LISTED_CODE)
        WB_ACT_LIST(LISTED_CODE)
#undef LISTED_CODE
    default: return -1;
    }
}

static wb_status run_listed(wb_op_call *c, wb_tensor *b) {
    int k = listed_code(c->def->id);
    if (k < 0) return wb_error(WB_ERR_UNSUPPORTED, "no cuda kernel for %s (not an op of the lists)", c->def->name);
    return run_ew(k, c->out, c->in[0], b, 0, c->def->name, c);
}

wb_status wb_cuda_binary_impl(wb_op_call *c) { return run_listed(c, c->in[1]); }

/* neg and the activations */
wb_status wb_cuda_unary_impl(wb_op_call *c) { return run_listed(c, NULL); }

/* sum, mean, max: no cuda kernel yet. The error says what to do rather than copying to the host
 * behind the user's back (a profile would show a device op that ran on the cpu). */
wb_status wb_cuda_reduce_impl(wb_op_call *c) {
    (void)c;
    return wb_error(WB_ERR_UNSUPPORTED, "not on cuda yet (no cuda kernel for the reductions); reduce a cpu copy: "
                                        "x:to{device=\"cpu\"}");
}

wb_status wb_cuda_gelu_impl(wb_op_call *c) {
    int erf = c->p.gemm.activation == WB_ACT_GELU_ERF;
    return run_ew(erf ? WB_CU_EW_GELU_ERF : WB_CU_EW_GELU_TANH, c->out, c->in[0], NULL, 0,
                  erf ? "gelu_erf" : "gelu_tanh", c);
}

/* gate/up as rows with a leading dimension: the last dim must be unit-stride and the leading
 * dims must fold into one row index; otherwise a contiguous copy is made. */
static wb_status as_rows(wb_tensor *t, wb_tensor **tmp, const void **ptr, int64_t *rows, int64_t *ld) {
    *tmp = NULL;
    int nd = t->ndim;
    int64_t cols = nd ? t->shape[nd - 1] : 1;
    int ok = nd == 0 || t->stride[nd - 1] == 1 || cols == 1;
    int64_t r = 1;
    for (int d = 0; d < nd - 1; d++)
        r *= t->shape[d];
    int64_t row_stride = nd >= 2 ? t->stride[nd - 2] : cols;
    for (int d = nd - 3; d >= 0 && ok; d--) /* folding needs stride[d] = stride[d+1] * shape[d+1] */
        if (t->shape[d] > 1 && t->stride[d] != t->stride[d + 1] * t->shape[d + 1]) ok = 0;
    if (!ok) {
        wb_status st = wb_contiguous(t, tmp);
        if (st) return st;
        t = *tmp;
        row_stride = cols;
    }
    *ptr = wb_tensor_data(t);
    *rows = r;
    *ld = row_stride < cols ? cols : row_stride;
    return WB_OK;
}

wb_status wb_cuda_geglu_impl(wb_op_call *c) {
    wb_tensor *g = c->in[0], *u = c->in[1], *tg, *tu;
    wb_cuda_geglu k = {c->out->dtype,         0, c->out->ndim ? c->out->shape[c->out->ndim - 1] : 1, NULL, 0, NULL, 0,
                       wb_tensor_data(c->out)};
    int64_t rows_u;
    wb_status st = as_rows(g, &tg, &k.gate, &k.rows, &k.ld_gate);
    if (!st)
        st = as_rows(u, &tu, &k.up, &rows_u, &k.ld_up);
    else
        tu = NULL;
    if (!st && wb_cuda_api_get()->geglu(&k)) st = wb_cuda_plugin_error("geglu");
    if (!st) {
        device_launch(c, &(wb_kernel_kind){.op = "geglu", .variant = wb_cuda_geglu_variant(&k)});
        wb_storage_bump_version(c->out->storage);
    }
    wb_tensor_free(tg);
    wb_tensor_free(tu);
    return st;
}

/* A generated kernel (wb.compile's code generation), compiled by NVRTC in the plugin: one launch
 * with the arguments the host kernels get, under the kernel's own name. */
wb_status wb_cuda_generated_impl(wb_op_call *c) {
    const wb_codegen_kernel *k = c->p.generated.kernel;
    if (!k->device_kernel) return wb_error(WB_ERR_DEVICE, "%s was not built for cuda", wb_kernel_kind_name(k->kind));
    if (wb_tensor_numel(c->out) == 0) return WB_OK;
    wb_tensor *tmp[WB_OP_MAX_INPUTS] = {0};
    wb_poi_args a;
    wb_status st = wb_codegen_args(c, &a, tmp);
    if (!st) {
        wb_cuda_poi_args ca;
        memcpy(&ca, &a, sizeof ca);
        if (wb_cuda_api_get()->codegen_launch(k->device_kernel, &ca))
            st = wb_cuda_plugin_error(wb_kernel_kind_name(k->kind));
    }
    if (!st) {
        device_launch(c, k->kind);
        wb_storage_bump_version(c->out->storage);
    }
    for (int i = 0; i < WB_OP_MAX_INPUTS; i++)
        wb_tensor_free(tmp[i]);
    return st;
}

/* ---- GEMM through cuBLASLt -------------------------------------------------------------------- */

/* A row-major operand as a column-major cuBLASLt matrix: (rows x cols) with strides
 * (rs, cs) reads as its transpose with ld rs when cs == 1 ('n'), or as itself with ld cs when
 * rs == 1 ('t'). Any other stride pattern needs a contiguous copy. */
static int lt_operand(const wb_tensor *t, int *trans, int64_t *ld) {
    int64_t rows = t->shape[0], cols = t->shape[1], rs = t->stride[0], cs = t->stride[1];
    if (cs == 1 || cols == 1) {
        *trans = 0;
        *ld = rs > cols ? rs : (cols > 0 ? cols : 1);
        if (rows <= 1) *ld = cols > 0 ? cols : 1;
        return rows <= 1 || rs >= cols;
    }
    if (rs == 1 || rows == 1) {
        *trans = 1;
        *ld = cs > rows ? cs : (rows > 0 ? rows : 1);
        return cs >= rows;
    }
    return 0;
}

/* out[M,N] = a[M,K] b[K,N] (+ bias[N]) (act): D^T = B^T A^T in cuBLASLt's column-major terms. */
static wb_status lt_gemm(wb_tensor *a, wb_tensor *b, wb_tensor *bias, wb_activation act, wb_tensor *out,
                         const wb_op_call *c) {
    wb_tensor *ta = NULL, *tb = NULL, *tbias = NULL;
    wb_cuda_gemm g = {0};
    wb_status st = WB_OK;
    if (!lt_operand(b, &g.transa, &g.lda)) {
        if ((st = wb_contiguous(b, &tb))) goto done;
        b = tb;
        lt_operand(b, &g.transa, &g.lda);
    }
    if (!lt_operand(a, &g.transb, &g.ldb)) {
        if ((st = wb_contiguous(a, &ta))) goto done;
        a = ta;
        lt_operand(a, &g.transb, &g.ldb);
    }
    if (bias && !wb_tensor_is_contiguous(bias)) {
        if ((st = wb_contiguous(bias, &tbias))) goto done;
        bias = tbias;
    }
    g.dtype = out->dtype;
    g.m = b->shape[1];
    g.n = a->shape[0];
    g.k = a->shape[1];
    g.a = wb_tensor_data(b);
    g.b = wb_tensor_data(a);
    g.d = wb_tensor_data(out);
    g.ldd = g.m > 0 ? g.m : 1;
    g.bias = bias ? wb_tensor_data(bias) : NULL;
    /* cuBLASLt's GELU epilogue is the tanh form; erf runs as a second kernel. */
    g.activation = act == WB_ACT_GELU_TANH ? WB_CU_ACT_GELU_TANH : WB_CU_ACT_NONE;
    if (g.m == 0 || g.n == 0) goto done;
    if (g.k == 0) { /* cuBLASLt rejects k = 0: the product is zeros (+ bias) */
        st = bias ? wb_copy_(out, bias) : wb_fill_(out, 0.0);
        if (!st && act != WB_ACT_NONE) {
            wb_tensor *tmp;
            if (!(st = wb_gelu(out, act, &tmp))) {
                st = wb_copy_(out, tmp);
                wb_tensor_free(tmp);
            }
        }
        goto done;
    }
    /* an under-aligned bias (a view into a larger vector) cannot go into the epilogue: plain
     * GEMM, then our kernels, decided before the call (a fault there would be sticky) */
    int fallback = g.bias && !wb_cuda_bias_fusable(g.bias);
    if (fallback) g.activation = WB_CU_ACT_NONE, g.bias = NULL;
    if (wb_cuda_api_get()->gemm(&g)) {
        if (g.activation == WB_CU_ACT_NONE && !g.bias) {
            st = wb_cuda_plugin_error("cublasLt");
            goto done;
        }
        /* cuBLASLt has no algorithm with this epilogue here: plain GEMM, then our kernels */
        g.activation = WB_CU_ACT_NONE;
        g.bias = NULL;
        if (wb_cuda_api_get()->gemm(&g)) {
            st = wb_cuda_plugin_error("cublasLt");
            goto done;
        }
        fallback = 1;
    }
    device_launch(c, &(wb_kernel_kind){.prefix = "cublasLt",
                                       .op = out->dtype == WB_BF16 ? "bf16gemm" : "sgemm",
                                       .layout = {g.transa ? 't' : 'n', g.transb ? 't' : 'n'},
                                       .bias = g.bias != NULL,
                                       .act = g.activation == WB_CU_ACT_GELU_TANH ? WB_ACT_GELU_TANH : WB_ACT_NONE});
    wb_storage_bump_version(out->storage);
    if (fallback && bias) st = run_ew(WB_CU_EW_ADD, out, out, bias, 0, "add", NULL);
    if (!st && fallback && act == WB_ACT_GELU_TANH)
        st = run_ew(WB_CU_EW_GELU_TANH, out, out, NULL, 0, "gelu_tanh", NULL);
    if (!st && act == WB_ACT_GELU_ERF) st = run_ew(WB_CU_EW_GELU_ERF, out, out, NULL, 0, "gelu_erf", NULL);
done:
    wb_tensor_free(ta);
    wb_tensor_free(tb);
    wb_tensor_free(tbias);
    return st;
}

wb_status wb_cuda_mm_impl(wb_op_call *c) {
    int addmm = c->def->id == WB_OP_ADDMM;
    if (c->p.gemm.activation == WB_ACT_SILU)
        return wb_error(WB_ERR_UNSUPPORTED, "the silu epilogue runs on the cpu only (no cuda kernel yet)");
    wb_tensor *bias = addmm ? c->in[0] : NULL;
    return lt_gemm(c->in[addmm], c->in[addmm + 1], bias, c->p.gemm.activation, c->out, c);
}

/* geglu_linear on cuda: one GEMM against [W_gate; W_up] (concatenated once per weight version
 * and cached) into [M, 2H], then the fused GeGLU kernel reading the two halves. cuBLASLt has no
 * dual-GEMM epilogue, so the [M, 2H] product does reach memory here (the cpu kernel keeps it in
 * registers). */
typedef struct concat_entry {
    uint64_t gid, gver, uid, uver, bgid, bgver, buid, bver;
    int64_t goff, uoff, rows, cols, gstride[2], ustride[2];
    wb_dtype dtype;
    wb_tensor *w, *b;
} concat_entry;
#define CONCAT_SLOTS 8
static concat_entry concat_cache[CONCAT_SLOTS];
static int concat_next;

static wb_status concat_rows(wb_tensor *top, wb_tensor *bottom, int64_t rows_top, wb_dtype dtype, int ndim,
                             const int64_t *shape, wb_tensor **out) {
    wb_tensor *w, *part;
    wb_status st = wb_tensor_empty(dtype, WB_DEVICE_CUDA, ndim, shape, &w);
    if (st) return st;
    for (int half = 0; half < 2 && !st; half++) {
        wb_tensor *src = half ? bottom : top;
        if ((st = wb_narrow(w, 0, half ? rows_top : 0, rows_top, &part))) break;
        st = src ? wb_copy_(part, src) : wb_fill_(part, 0.0);
        wb_tensor_free(part);
    }
    if (st) {
        wb_tensor_free(w);
        return st;
    }
    *out = w;
    return WB_OK;
}

static uint64_t sid(const wb_tensor *t) { return t ? wb_storage_id(t->storage) : 0; }
static uint64_t sver(const wb_tensor *t) { return t ? wb_storage_version(t->storage) : 0; }

static wb_status concat_get(wb_tensor *wg, wb_tensor *wu, wb_tensor *bg, wb_tensor *bu, concat_entry **out) {
    for (int i = 0; i < CONCAT_SLOTS; i++) {
        concat_entry *e = &concat_cache[i];
        if (e->w && e->gid == sid(wg) && e->gver == sver(wg) && e->uid == sid(wu) && e->uver == sver(wu) &&
            e->goff == wg->offset && e->uoff == wu->offset && e->bgid == sid(bg) && e->bgver == sver(bg) &&
            e->buid == sid(bu) && e->bver == sver(bu) && e->rows == wg->shape[0] && e->cols == wg->shape[1] &&
            e->gstride[0] == wg->stride[0] && e->gstride[1] == wg->stride[1] && e->ustride[0] == wu->stride[0] &&
            e->ustride[1] == wu->stride[1] && e->dtype == wg->dtype) {
            *out = e;
            return WB_OK;
        }
    }
    concat_entry *e = &concat_cache[concat_next];
    concat_next = (concat_next + 1) % CONCAT_SLOTS;
    wb_tensor_free(e->w);
    wb_tensor_free(e->b);
    memset(e, 0, sizeof *e);
    int64_t h = wg->shape[0], shape_w[2] = {2 * h, wg->shape[1]}, shape_b[1] = {2 * h};
    wb_status st = concat_rows(wg, wu, h, wg->dtype, 2, shape_w, &e->w);
    if (!st && (bg || bu)) st = concat_rows(bg, bu, h, wg->dtype, 1, shape_b, &e->b);
    if (st) {
        wb_tensor_free(e->w);
        memset(e, 0, sizeof *e);
        return st;
    }
    e->gid = sid(wg), e->gver = sver(wg), e->uid = sid(wu), e->uver = sver(wu);
    e->bgid = sid(bg), e->bgver = sver(bg), e->buid = sid(bu), e->bver = sver(bu);
    e->goff = wg->offset, e->uoff = wu->offset;
    e->rows = wg->shape[0], e->cols = wg->shape[1], e->dtype = wg->dtype;
    e->gstride[0] = wg->stride[0], e->gstride[1] = wg->stride[1];
    e->ustride[0] = wu->stride[0], e->ustride[1] = wu->stride[1];
    *out = e;
    return WB_OK;
}

wb_status wb_cuda_geglu_linear_impl(wb_op_call *c) {
    wb_tensor *x = c->in[0], *wg = c->in[1], *wu = c->in[2], *bg = c->in[3], *bu = c->in[4];
    concat_entry *e;
    wb_status st = concat_get(wg, wu, bg, bu, &e);
    if (st) return st;
    /* The graph being captured (if any) must keep the concatenated weights alive. */
    const wb_storage_hooks *cap = wb_storage_capture_active();
    if (cap && cap->hold) {
        cap->hold(cap->user, e->w->storage);
        if (e->b) cap->hold(cap->user, e->b->storage);
    }
    int64_t h = wg->shape[0], k = x->shape[x->ndim - 1], m = wb_tensor_numel(x) / (k ? k : 1);
    wb_tensor *x2 = NULL, *wt = NULL, *prod = NULL;
    int64_t shape_x[2] = {m, k}, shape_p[2] = {m, 2 * h};
    if ((st = wb_reshape(x, 2, shape_x, &x2)) || (st = wb_t(e->w, &wt)) ||
        (st = wb_tensor_empty(x->dtype, WB_DEVICE_CUDA, 2, shape_p, &prod)))
        goto done;
    if ((st = lt_gemm(x2, wt, e->b, WB_ACT_NONE, prod, c))) goto done;
    wb_cuda_geglu k2 = {x->dtype, m,
                        h,        wb_tensor_data(prod),
                        2 * h,    (const char *)wb_tensor_data(prod) + (size_t)h * wb_dtype_size(x->dtype),
                        2 * h,    wb_tensor_data(c->out)};
    if (wb_cuda_api_get()->geglu(&k2)) {
        st = wb_cuda_plugin_error("geglu");
        goto done;
    }
    device_launch(NULL, &(wb_kernel_kind){.op = "geglu", .variant = wb_cuda_geglu_variant(&k2)});
    wb_storage_bump_version(c->out->storage);
done:
    wb_tensor_free(x2);
    wb_tensor_free(wt);
    wb_tensor_free(prod);
    return st;
}
