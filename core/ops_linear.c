/* ops_linear.c: the GEMM family (mm, addmm, matmul, linear, geglu_linear) and the GELU
 * activations (gelu, geglu): shape rules, work counts, CPU implementations and the public entry
 * points. linear is a composite, as in PyTorch: the op event "linear" contains "t" (a view, no
 * kernel) and "addmm" or "mm", whose one kernel carries the bias and activation in its epilogue. */
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "../kernels/cpu/gemm.h"
#include "../kernels/cpu/pointwise.h"
#include "convert.h"
#include "linear_ops.h"
#include "pointwise_ops.h"
#include "storage.h"
#include "views.h"

static const char *act_suffix(wb_activation a) {
    return a == WB_ACT_GELU_TANH ? "_gelu_tanh" : a == WB_ACT_GELU_ERF ? "_gelu_erf" : "";
}

/* BLAS (column-major) layout letter of a row-major operand viewed by cuBLAS-style naming:
 * 'n' when unit-stride along its second dim, 't' when along its first, 'g' otherwise. */
static char layout_letter(int64_t rows_stride, int64_t cols_stride, int64_t rows, int64_t cols) {
    if (cols_stride == 1 || cols <= 1) return rows_stride == 1 && cols > 1 && rows > 1 ? 't' : 'n';
    if (rows_stride == 1 || rows <= 1) return 't';
    return 'g';
}

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

/* A [rows, cols] bf16 matrix read through strides, as a contiguous f32 copy (a shift per
 * element: bf16 is the top half of an f32). */
static float *widen(const void *src, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    float *dst = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof(float));
    if (!dst) return NULL;
    const uint16_t *h = src;
#pragma omp parallel for schedule(static) if (rows * cols >= 65536)
    for (int64_t i = 0; i < rows; i++) {
        uint32_t *d = (uint32_t *)(dst + i * cols);
        const uint16_t *r = h + i * rs;
        if (cs == 1)
            for (int64_t j = 0; j < cols; j++)
                d[j] = (uint32_t)r[j] << 16;
        else
            for (int64_t j = 0; j < cols; j++)
                d[j] = (uint32_t)r[j * cs] << 16;
    }
    return dst;
}

/* The B operand(s) as k-pair words: B[p][j] = b[p*rsb + j*csb] is row j of a [n, k] matrix
 * read along k. Gate and up must end up with one layout (the packer walks both alike). */
static int pair_b(const gemm_launch *g, const uint32_t **b, const uint32_t **bu, int64_t *ld, uint16_t **cb,
                  uint16_t **cu) {
    const wb_gemm_problem *p = &g->p;
    int64_t ld_up = 0;
    *b = wb_bf16_pair_words((const uint16_t *)p->b, p->n, p->k, p->csb, p->rsb, 0, ld, cb);
    *bu = p->b_up ? wb_bf16_pair_words((const uint16_t *)p->b_up, p->n, p->k, p->csb, p->rsb, 0, &ld_up, cu) : NULL;
    if (p->b_up && *b && *bu && (ld_up != *ld || (*cb == NULL) != (*cu == NULL))) {
        free(*cb), free(*cu);
        *b = wb_bf16_pair_words((const uint16_t *)p->b, p->n, p->k, p->csb, p->rsb, 1, ld, cb);
        *bu = wb_bf16_pair_words((const uint16_t *)p->b_up, p->n, p->k, p->csb, p->rsb, 1, &ld_up, cu);
    }
    return *b && (!p->b_up || *bu) ? 0 : -1;
}

/* bf16 on the cpu, f32 accumulation, the output rounded once at the end. Two paths: with a
 * k-pair ISA (AVX512_BF16's vdpbf16ps, or its portable emulation in tests) the operands stay
 * bf16 and are packed in k-pairs, the weights once per version; without one, the activations
 * are widened to f32 and the f32 kernels run on weights packed (widened) once. */
static int run_gemm_bf16(gemm_launch *g) {
    wb_gemm_problem q = g->p;
    int64_t m = q.m, n = q.n, k = q.k;
    float *a = NULL, *b = NULL, *bu = NULL, *bias = NULL, *bias_up = NULL, *c = NULL;
    uint16_t *ca = NULL, *cb = NULL, *cu = NULL;
    int rc = -1;
    if (g->isa->bf16_pairs) { /* k-pair path: operands stay bf16, posed in pair space */
        int64_t la, lb = 0;
        const uint32_t *aw = wb_bf16_pair_words((const uint16_t *)g->p.a, m, k, q.rsa, q.csa, 0, &la, &ca), *bw = NULL,
                       *buw = NULL;
        if (!aw) goto done;
        q.a = (const float *)aw, q.rsa = la, q.csa = 1;
        if (!q.packed_b) {
            if (pair_b(g, &bw, &buw, &lb, &cb, &cu)) goto done;
            q.b = (const float *)bw, q.b_up = (const float *)buw, q.rsb = 1, q.csb = lb;
        }
        q.k = (k + 1) / 2;
    } else { /* widening path: f32 copies of the activations (weights come packed) */
        if (!(a = widen(g->p.a, m, k, q.rsa, q.csa))) goto done;
        q.a = a, q.rsa = k, q.csa = 1;
        if (!q.packed_b) {
            if (!(b = widen(g->p.b, k, n, q.rsb, q.csb))) goto done;
            if (q.b_up && !(bu = widen(g->p.b_up, k, n, q.rsb, q.csb))) goto done;
            q.b = b, q.b_up = bu, q.rsb = n, q.csb = 1;
        }
    }
    if (q.bias && !(bias = widen(g->p.bias, 1, n, n, 1))) goto done;
    if (q.bias_up && !(bias_up = widen(g->p.bias_up, 1, n, n, 1))) goto done;
    q.bias = bias, q.bias_up = bias_up;
    if (!(c = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof(float)))) goto done;
    q.c = c, q.ldc = n;
    if (wb_gemm_run(g->isa, &q)) goto done;
    uint16_t *out = (uint16_t *)g->p.c;
#pragma omp parallel for schedule(static) if (m * n >= 65536)
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            out[i * g->p.ldc + j] = wb_f32_to_bf16(c[i * n + j]);
    rc = 0;
done:
    free(a), free(b), free(bu), free(bias), free(bias_up), free(c), free(ca), free(cb), free(cu);
    return rc;
}

static void run_gemm(void *v) {
    gemm_launch *g = v;
    g->result = g->bf16 ? run_gemm_bf16(g) : wb_gemm_run(g->isa, &g->p);
}

static void refresh_gemm(void *v) {
    gemm_launch *g = v;
    if (g->b_storage)
        g->p.packed_b = wb_prepack_get(g->isa, g->b_storage, g->b_offset, g->p.k, g->p.n, g->p.rsb, g->p.csb,
                                       g->up_storage, g->up_offset, g->bf16);
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
    const float *packed = prepack ? wb_prepack_get(isa, b->storage, b->offset, k, n, rsb, csb, NULL, 0, bf16) : NULL;
    char name[128];
    snprintf(name, sizeof name, "wb_%s_%s_%dx%d_%c%c%s%s", bf16 ? "bf16gemm" : "sgemm", isa->name, isa->mr, isa->nr,
             layout_letter(rsb, csb, k, n), layout_letter(a->stride[0], a->stride[1], m, k), bias ? "_bias" : "",
             act_suffix(act));
    gemm_launch g = {isa,
                     {m, n, k, wb_tensor_data(a), a->stride[0], a->stride[1], wb_tensor_data(b), rsb, csb, NULL,
                      wb_tensor_data(c->out), n, bias ? wb_tensor_data(bias) : NULL,
                      act == WB_ACT_GELU_TANH  ? WB_STORE_GELU_TANH
                      : act == WB_ACT_GELU_ERF ? WB_STORE_GELU_ERF
                                               : WB_STORE_PLAIN,
                      packed, wb_get_num_threads(), NULL, NULL},
                     0,
                     NULL,
                     NULL,
                     0,
                     0,
                     bf16};
    wb_kernel_desc d = {wb_intern(name), c->def->flops(c), c->def->bytes(c), g.p.threads};
    if (packed) g.b_storage = b->storage, g.b_offset = b->offset;
    wb_kernel_launch(&d, run_gemm, &g, sizeof g, refresh_gemm);
    wb_tensor_free(tmp);
    wb_storage_bump_version(c->out->storage);
    if (g.result) return wb_error(WB_ERR_MEMORY, "out of memory for the GEMM's packing buffers");
    return WB_OK;
}

/* ---- geglu_linear: the dual GEMM ------------------------------------------------------------ */

wb_status wb_shape_geglu_linear(wb_op_call *c) {
    const wb_tensor *x = c->in[0], *wg = c->in[1], *wu = c->in[2];
    char b1[256], b2[256];
    wb_status st;
    if ((st = check_dtype(c, x, "geglu_linear")) || (st = check_dtype(c, wg, "geglu_linear")) ||
        (st = check_dtype(c, wu, "geglu_linear")))
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
        if (b && ((st = check_dtype(c, b, "geglu_linear")) || b->ndim != 1 || b->shape[0] != wg->shape[0]))
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

static double rows_of(const wb_op_call *c) {
    double m = 1;
    for (int i = 0; i < c->out_ndim - 1; i++)
        m *= (double)c->out_shape[i];
    return m;
}

double wb_flops_geglu_linear(const wb_op_call *c) {
    return 4.0 * rows_of(c) * (double)c->in[1]->shape[0] * (double)c->in[1]->shape[1];
}

double wb_bytes_geglu_linear(const wb_op_call *c) {
    double m = rows_of(c), h = (double)c->in[1]->shape[0], k = (double)c->in[1]->shape[1];
    return (double)wb_dtype_size(c->in[0]->dtype) *
           (m * k + 2 * h * k + m * h + (c->in[3] ? h : 0) + (c->in[4] ? h : 0));
}

wb_status wb_cpu_geglu_linear_impl(wb_op_call *c) {
    wb_tensor *x = c->in[0], *wg = c->in[1], *wu = c->in[2], *bg = c->in[3], *bu = c->in[4];
    wb_tensor *xc = NULL, *wgc = NULL, *wuc = NULL, *bgc = NULL, *buc = NULL;
    wb_status st = WB_OK;
    int64_t k = wg->shape[1], h = wg->shape[0], m = (int64_t)rows_of(c);
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
    int bf16 = x->dtype == WB_BF16;
    const wb_cpu_isa *pairs = bf16 ? wb_cpu_isa_bf16(m) : NULL, *isa = pairs ? pairs : wb_cpu_isa_active();
    int64_t rsb = wg->stride[1], csb = wg->stride[0]; /* B = W^T */
    const float *packed =
        k > 0 && h > 0 ? wb_prepack_get(isa, wg->storage, wg->offset, k, h, rsb, csb, wu->storage, wu->offset, bf16)
                       : NULL;
    char name[128];
    snprintf(name, sizeof name, "wb_dual_%s_%s_%dx%d_%c%c%s_geglu", bf16 ? "bf16gemm" : "sgemm", isa->name, isa->mr,
             isa->nr, layout_letter(rsb, csb, k, h), layout_letter(stride2[0], stride2[1], m, k),
             bg || bu ? "_bias" : "");
    gemm_launch g = {isa,
                     {m, h, k, wb_tensor_data(x), stride2[0], stride2[1], wb_tensor_data(wg), rsb, csb,
                      wb_tensor_data(wu), wb_tensor_data(c->out), h, bg ? wb_tensor_data(bg) : NULL, WB_STORE_GEGLU,
                      packed, wb_get_num_threads(), bu ? wb_tensor_data(bu) : NULL, NULL},
                     0,
                     NULL,
                     NULL,
                     0,
                     0,
                     bf16};
    wb_kernel_desc d = {wb_intern(name), c->def->flops(c), c->def->bytes(c), g.p.threads};
    if (packed)
        g.b_storage = wg->storage, g.b_offset = wg->offset, g.up_storage = wu->storage, g.up_offset = wu->offset;
    wb_kernel_launch(&d, run_gemm, &g, sizeof g, refresh_gemm);
    wb_storage_bump_version(c->out->storage);
    if (g.result) st = wb_error(WB_ERR_MEMORY, "out of memory for the GEMM's packing buffers");
done:
    wb_tensor_free(xc), wb_tensor_free(wgc), wb_tensor_free(wuc), wb_tensor_free(bgc), wb_tensor_free(buc);
    return st;
}

/* ---- gelu, geglu ------------------------------------------------------------------------------ */

/* Transcendental work has no agreed FLOP count: gelu reports none, geglu its multiply. */
double wb_flops_gelu(const wb_op_call *c) {
    (void)c;
    return 0;
}

double wb_flops_geglu(const wb_op_call *c) { return rows_of(c) * (double)c->out_shape[c->out_ndim - 1]; }

wb_status wb_shape_geglu(wb_op_call *c) {
    const wb_tensor *g = c->in[0], *u = c->in[1];
    wb_status st;
    if ((st = check_dtype(c, g, "geglu")) || (st = check_dtype(c, u, "geglu"))) return st;
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

#define POINTWISE_CHUNK 16384

typedef struct act_launch {
    const wb_cpu_isa *isa;
    const float *x, *u;
    float *y;
    int64_t n;
    int erf_form;
} act_launch;

static void run_gelu(void *v) {
    act_launch *k = v;
    int64_t chunks = (k->n + POINTWISE_CHUNK - 1) / POINTWISE_CHUNK;
#pragma omp parallel for schedule(static) if (k->n >= WB_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < chunks; i++) {
        int64_t s = i * POINTWISE_CHUNK, len = k->n - s < POINTWISE_CHUNK ? k->n - s : POINTWISE_CHUNK;
        if (k->u)
            k->isa->geglu(k->x + s, k->u + s, k->y + s, len);
        else
            k->isa->gelu(k->x + s, k->y + s, len, k->erf_form);
    }
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
    const wb_cpu_isa *isa = wb_cpu_isa_active();
    int erf_form = c->p.gemm.activation == WB_ACT_GELU_ERF;
    char name[64];
    snprintf(name, sizeof name, "wb_gelu_%s_%s", erf_form ? "erf" : "tanh", isa->name);
    act_launch k = {isa, src, NULL, wb_tensor_data(out), wb_tensor_numel(out), erf_form};
    wb_kernel_desc d = {wb_intern(name), c->def->flops(c), c->def->bytes(c),
                        k.n >= WB_CPU_PARALLEL_MIN ? wb_get_num_threads() : 1};
    wb_kernel_launch(&d, run_gelu, &k, sizeof k, NULL);
    wb_storage_bump_version(out->storage);
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
    const wb_cpu_isa *isa = wb_cpu_isa_active();
    char name[64];
    snprintf(name, sizeof name, "wb_geglu_%s", isa->name);
    act_launch k = {
        isa, wb_tensor_data(gc ? gc : g), wb_tensor_data(uc ? uc : u), wb_tensor_data(c->out), wb_tensor_numel(c->out),
        0};
    wb_kernel_desc d = {wb_intern(name), c->def->flops(c), c->def->bytes(c),
                        k.n >= WB_CPU_PARALLEL_MIN ? wb_get_num_threads() : 1};
    wb_kernel_launch(&d, run_gelu, &k, sizeof k, NULL);
    wb_storage_bump_version(c->out->storage);
    wb_tensor_free(gc), wb_tensor_free(uc);
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
    wb_status st = wb_dispatch(bias ? WB_OP_ADDMM : WB_OP_MM, &c);
    if (!st) *out = c.out;
    return st;
}

/* Runs fn on x folded to 2-D [rows, last] and unfolds the result to c's output shape. */
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

static wb_status run(wb_op_id id, wb_op_call *c, wb_tensor **out) {
    *out = NULL;
    wb_status st = wb_dispatch(id, c);
    if (!st) *out = c->out;
    return st;
}

wb_status wb_mm(wb_tensor *a, wb_tensor *b, wb_tensor **out) { return gemm_ex(NULL, a, b, WB_ACT_NONE, 0, out); }

wb_status wb_addmm(wb_tensor *bias, wb_tensor *a, wb_tensor *b, wb_tensor **out) {
    if (!bias) return wb_error(WB_ERR_ARGUMENT, "addmm: bias is missing");
    return gemm_ex(bias, a, b, WB_ACT_NONE, 0, out);
}

wb_status wb_matmul(wb_tensor *a, wb_tensor *b, wb_tensor **out) {
    wb_op_call c = {0};
    c.in[0] = a, c.in[1] = b, c.nin = 2;
    return run(WB_OP_MATMUL, &c, out);
}

wb_status wb_linear(wb_tensor *x, wb_tensor *w, wb_tensor *bias, wb_activation act, wb_tensor **out) {
    wb_op_call c = {0};
    c.in[0] = x, c.in[1] = w, c.in[2] = bias, c.nin = 3;
    c.p.gemm.activation = act;
    return run(WB_OP_LINEAR, &c, out);
}

wb_status wb_geglu_linear(wb_tensor *x, wb_tensor *w_gate, wb_tensor *w_up, wb_tensor *b_gate, wb_tensor *b_up,
                          wb_tensor **out) {
    wb_op_call c = {0};
    c.in[0] = x, c.in[1] = w_gate, c.in[2] = w_up, c.in[3] = b_gate, c.in[4] = b_up, c.nin = 5;
    return run(WB_OP_GEGLU_LINEAR, &c, out);
}

wb_status wb_gelu(wb_tensor *x, wb_activation form, wb_tensor **out) {
    wb_op_call c = {0};
    if (form != WB_ACT_GELU_TANH && form != WB_ACT_GELU_ERF)
        return wb_error(WB_ERR_ARGUMENT, "gelu: form must be tanh or erf");
    c.in[0] = x, c.nin = 1;
    c.p.gemm.activation = form;
    return run(WB_OP_GELU, &c, out);
}

wb_status wb_geglu(wb_tensor *gate, wb_tensor *up, wb_tensor **out) {
    wb_op_call c = {0};
    c.in[0] = gate, c.in[1] = up, c.nin = 2;
    return run(WB_OP_GEGLU, &c, out);
}

const char *wb_cpu_isa_name(void) { return wb_cpu_isa_active()->name; }

wb_status wb_cpu_isa_select(const char *name) {
    if (wb_cpu_isa_set(name)) return WB_OK;
    return wb_error(WB_ERR_UNSUPPORTED, "cpu isa '%s' is not available on this CPU (expected avx512, avx2 or scalar)",
                    name);
}

const char *wb_cpu_bf16_name(void) { return wb_cpu_isa_bf16_name(); }

wb_status wb_cpu_bf16_select(const char *name) {
    if (wb_cpu_isa_bf16_set(name)) return WB_OK;
    return wb_error(WB_ERR_UNSUPPORTED,
                    "bf16 gemm path '%s' is not available on this CPU (expected auto, avx512bf16 (needs "
                    "AVX512_BF16), avx2bf16 (needs AVX2), emulated or widen)",
                    name);
}
