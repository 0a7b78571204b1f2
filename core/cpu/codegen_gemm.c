/* codegen_gemm.c: the op "generated_gemm": out = x W^T [+ bias] (f32, cpu) as one GEMM whose
 * epilogue is a generated function (wb.compile's code generation, core/ops/codegen.h) that the
 * driver calls on each block of the output while the block is in L2 (wb_kernels/gemm.h). The
 * bias is the GEMM's own (added in its store); the epilogue's inputs are broadcast to the output's
 * shape, as a generated pointwise kernel's. */
#include <inttypes.h>
#include <string.h>

#include <wb_kernels/gemm.h>
#include <wb_kernels/pointwise.h>

#include "codegen.h"
#include "linear.h"
#include "storage.h"
#include "views.h"

wb_status wb_shape_generated_gemm(wb_op_call *c) {
    const wb_codegen_kernel *k = c->p.generated.kernel;
    const wb_tensor *x = c->in[0], *w = c->in[1];
    char b1[256], b2[256];
    if (!k || !k->fn || !k->gemm_epilogue) return wb_error(WB_ERR_ARGUMENT, "generated_gemm: no GEMM epilogue given");
    if (w->ndim != 2)
        return wb_error(WB_ERR_SHAPE, "generated_gemm: weight must be 2-D [out_features, in_features], got shape %s",
                        wb_shape_format(w->ndim, w->shape, b1, sizeof b1));
    if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
        return wb_error(WB_ERR_SHAPE, "generated_gemm: input of shape %s does not match the weight's %s",
                        wb_shape_format(x->ndim, x->shape, b1, sizeof b1),
                        wb_shape_format(w->ndim, w->shape, b2, sizeof b2));
    int nin = 0;
    while (nin < WB_OP_MAX_INPUTS - 2 && c->in[2 + nin])
        nin++;
    if (nin != k->nin + k->gemm_bias)
        return wb_error(WB_ERR_ARGUMENT, "%s takes %d inputs%s, got %d", wb_kernel_kind_name(k->kind),
                        k->nin + k->gemm_bias, k->gemm_bias ? " (the epilogue's, then the GEMM's bias)" : "", nin);
    c->out_dtype = WB_F32;
    c->out_ndim = x->ndim;
    memcpy(c->out_shape, x->shape, sizeof c->out_shape);
    c->out_shape[x->ndim - 1] = w->shape[0];
    for (int i = 0; i < 2 + nin; i++) {
        const wb_tensor *t = c->in[i];
        if (t->dtype != WB_F32)
            return wb_error(WB_ERR_DTYPE, "generated_gemm: input %d is %s (a generated epilogue runs on f32)", i + 1,
                            wb_dtype_name(t->dtype));
        if (i < 2) continue;
        if (k->gemm_bias && i == 2 + k->nin) { /* the GEMM's bias: one value per output column */
            if (wb_tensor_numel(t) != w->shape[0] || t->shape[t->ndim - 1] != w->shape[0])
                return wb_error(WB_ERR_SHAPE, "generated_gemm: the bias of shape %s does not fit the %" PRId64
                                " output columns (expected {%" PRId64 "})", wb_shape_format(t->ndim, t->shape, b1, sizeof b1),
                                w->shape[0], w->shape[0]);
            continue;
        }
        int n;
        int64_t shape[WB_MAX_DIMS];
        wb_status st = wb_shape_broadcast(t->ndim, t->shape, c->out_ndim, c->out_shape, &n, shape, "generated_gemm");
        if (st) return st;
        if (n != c->out_ndim || memcmp(shape, c->out_shape, sizeof(int64_t) * (size_t)n))
            return wb_error(WB_ERR_SHAPE, "generated_gemm: epilogue input %d of shape %s does not broadcast to the "
                            "output's shape %s", i - 1, wb_shape_format(t->ndim, t->shape, b1, sizeof b1),
                            wb_shape_format(c->out_ndim, c->out_shape, b2, sizeof b2));
    }
    return WB_OK;
}

static double rows_of(const wb_tensor *x) {
    double m = 1;
    for (int i = 0; i < x->ndim - 1; i++)
        m *= (double)x->shape[i];
    return m;
}

double wb_flops_generated_gemm(const wb_op_call *c) {
    return 2.0 * rows_of(c->in[0]) * (double)c->in[1]->shape[0] * (double)c->in[1]->shape[1];
}

/* x and W once, each epilogue input once, the output once */
double wb_bytes_generated_gemm(const wb_op_call *c) {
    double bytes = 4.0 * rows_of(c->in[0]) * (double)c->in[1]->shape[0];
    for (int i = 0; i < WB_OP_MAX_INPUTS && c->in[i]; i++)
        bytes += 4.0 * (double)wb_tensor_numel(c->in[i]);
    return bytes;
}

typedef struct epilogue_launch {
    const wb_cpu_isa *isa;
    wb_gemm_problem p;
    wb_poi_args epi;
    int result;
    wb_storage *b_storage; /* the weight, whose packing a replay re-checks */
    int64_t b_offset;
} epilogue_launch;

static void run_epilogue_gemm(void *v) {
    epilogue_launch *g = v;
    g->p.epilogue_ctx = &g->epi; /* this copy's own (a captured launch is a copy) */
    g->result = wb_gemm_run(g->isa, &g->p);
}

static void refresh_epilogue_gemm(void *v) {
    epilogue_launch *g = v;
    g->p.packed_b = wb_prepack_get(g->isa, g->b_storage, g->b_offset, g->p.k, g->p.n, g->p.rsb, g->p.csb, NULL, 0, 0);
}

#define EPI_IN(i) offsetof(epilogue_launch, epi.in[i])
static const wb_launch_layout epilogue_layout = {
    .size = sizeof(epilogue_launch),
    .refresh = refresh_epilogue_gemm,
    .npointers = 8,
    .pointers = {offsetof(epilogue_launch, p.a), offsetof(epilogue_launch, p.b), offsetof(epilogue_launch, p.c),
                 offsetof(epilogue_launch, p.bias), EPI_IN(0), EPI_IN(1), EPI_IN(2), offsetof(epilogue_launch, epi.out)},
    .nstorages = 1,
    .storages = {{offsetof(epilogue_launch, b_storage), offsetof(epilogue_launch, b_offset)}}};
#undef EPI_IN

static char layout_letter(int64_t rows_stride, int64_t cols_stride, int64_t rows, int64_t cols) {
    if (cols_stride == 1 || cols <= 1) return rows_stride == 1 && cols > 1 && rows > 1 ? 't' : 'n';
    if (rows_stride == 1 || rows <= 1) return 't';
    return 'g';
}

wb_status wb_cpu_generated_gemm_impl(wb_op_call *c) {
    const wb_codegen_kernel *k = c->p.generated.kernel;
    wb_tensor *x = c->in[0], *w = c->in[1], *out = c->out, *xc = NULL, *tmp[WB_OP_MAX_INPUTS] = {0};
    wb_tensor *bias = k->gemm_bias ? c->in[2 + k->nin] : NULL;
    wb_status st = WB_OK;
    int64_t kk = w->shape[1], n = w->shape[0], m = (int64_t)rows_of(x);
    int64_t shape2[2] = {m, kk}, stride2[2];
    if (x->ndim == 2) {
        stride2[0] = x->stride[0], stride2[1] = x->stride[1];
    } else if (!wb_view_strides(x, 2, shape2, stride2)) {
        if ((st = wb_contiguous(x, &xc))) return st;
        x = xc;
        stride2[0] = kk, stride2[1] = 1;
    }
    if (bias && n > 1 && bias->stride[bias->ndim - 1] != 1) { /* the GEMM's store reads the bias contiguously */
        if ((st = wb_contiguous(bias, &tmp[k->nin]))) goto done;
        bias = tmp[k->nin];
    }
    const wb_cpu_isa *isa = wb_cpu_isa_active();
    int64_t rsb = w->stride[1], csb = w->stride[0]; /* B = W^T */
    epilogue_launch g = {.isa = isa, .b_storage = w->storage, .b_offset = w->offset};
    g.p = (wb_gemm_problem){
        .m = m, .n = n, .k = kk,
        .a = wb_tensor_data(x), .rsa = stride2[0], .csa = stride2[1],
        .b = wb_tensor_data(w), .rsb = rsb, .csb = csb,
        .c = wb_tensor_data(out), .ldc = n,
        .bias = bias ? wb_tensor_data(bias) : NULL,
        .store = WB_STORE_PLAIN,
        .packed_b = kk > 0 && n > 0 ? wb_prepack_get(isa, w->storage, w->offset, kk, n, rsb, csb, NULL, 0, 0) : NULL,
        .threads = wb_threads_requested(), /* lowered by the kernel while the cores are busy */
        .epilogue = (wb_gemm_epilogue_fn)(void (*)(void))k->fn,
    };
    /* the epilogue's inputs, as a generated pointwise kernel sees them over the output */
    int nd = out->ndim;
    g.epi.cols = n;
    g.epi.outer = nd - 1;
    g.epi.rows = 1;
    for (int d = 0; d < nd - 1; d++)
        g.epi.shape[d] = out->shape[d], g.epi.rows *= out->shape[d];
    g.epi.out = wb_tensor_data(out);
    for (int i = 0; i < k->nin; i++) {
        wb_tensor *t = c->in[2 + i];
        int64_t s[WB_MAX_DIMS] = {0};
        wb_broadcast_strides(t, nd, out->shape, s);
        if (n > 1 && !((k->inner_broadcast >> i) & 1) && s[nd - 1] != 1) { /* the source reads stride 1 there */
            if ((st = wb_contiguous(t, &tmp[i]))) goto done;
            t = tmp[i];
            wb_broadcast_strides(t, nd, out->shape, s);
        }
        for (int d = 0; d < nd - 1; d++)
            g.epi.stride[i][d] = s[d];
        g.epi.in[i] = wb_tensor_data(t);
    }
    wb_kernel_kind key = {.op = "sgemm",
                          .isa = isa->name,
                          .tile_m = isa->mr,
                          .tile_n = isa->nr,
                          .layout = {layout_letter(rsb, csb, kk, n), layout_letter(stride2[0], stride2[1], m, kk)},
                          .bias = bias != NULL,
                          .variant = k->kind->op, /* epi_<ops>_<n>: the generated epilogue */
                          .ops = k->kind->ops};
    wb_kernel_desc d = wb_kernel_desc_for(c, &key, g.p.threads);
    wb_kernel_launch(&d, run_epilogue_gemm, &g, &epilogue_layout);
    wb_storage_bump_version(out->storage);
    if (g.result) st = wb_error(WB_ERR_MEMORY, "out of memory for the GEMM's packing buffers");
done:
    wb_tensor_free(xc);
    for (int i = 0; i < WB_OP_MAX_INPUTS; i++)
        wb_tensor_free(tmp[i]);
    return st;
}

wb_status wb_codegen_gemm_launch(const wb_codegen_kernel *k, wb_tensor *x, wb_tensor *w, int nin, wb_tensor **in,
                                 wb_tensor **out) {
    *out = NULL;
    if (nin < 0 || nin > WB_OP_MAX_INPUTS - 2)
        return wb_error(WB_ERR_ARGUMENT, "generated_gemm: %d epilogue inputs (at most %d)", nin, WB_OP_MAX_INPUTS - 2);
    wb_op_call c = {.nin = WB_OP_MAX_INPUTS};
    c.in[0] = x, c.in[1] = w;
    for (int i = 0; i < nin; i++)
        c.in[2 + i] = in[i];
    c.p.generated.kernel = k;
    return wb_dispatch_out(WB_OP_GENERATED_GEMM, &c, out);
}
