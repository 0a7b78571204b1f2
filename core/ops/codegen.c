/* codegen.c: the op "generated": one launch of a generated pointwise kernel (see codegen.h) over
 * inputs broadcast to the output's shape. The kernel's source is specialised on which inputs are
 * broadcast along the last dimension (stride 0) and reads the others with stride 1 there; an
 * input laid out otherwise (a transposed view) is made contiguous first. */
#include <string.h>

#include <wb_kernels/pointwise.h>

#include "codegen.h"
#include "storage.h"

wb_status wb_shape_generated(wb_op_call *c) {
    const wb_codegen_kernel *k = c->p.generated.kernel;
    if (!k || (!k->fn && !k->device_kernel)) return wb_error(WB_ERR_ARGUMENT, "no generated kernel given");
    if (k->gemm_epilogue)
        return wb_error(WB_ERR_ARGUMENT, "%s is a GEMM epilogue (wb.codegen.gemm runs it)", wb_kernel_kind_name(k->kind));
    int nin = 0;
    while (nin < WB_OP_MAX_INPUTS && c->in[nin])
        nin++;
    if (nin != k->nin) return wb_error(WB_ERR_ARGUMENT, "%s takes %d inputs, got %d", wb_kernel_kind_name(k->kind), k->nin, nin);
    for (int i = 0; i < nin; i++) {
        const wb_tensor *t = c->in[i];
        if (t->device != k->device)
            return wb_error(WB_ERR_DEVICE, "%s was generated for device %s, input %d is on %s",
                            wb_kernel_kind_name(k->kind), wb_device_name(k->device), i + 1, wb_device_name(t->device));
        if (t->dtype != k->dtype)
            return wb_error(WB_ERR_DTYPE, "%s was generated for %s, input %d is %s", wb_kernel_kind_name(k->kind),
                            wb_dtype_name(k->dtype), i + 1, wb_dtype_name(t->dtype));
        int n;
        int64_t shape[WB_MAX_DIMS];
        wb_status st = wb_shape_broadcast(t->ndim, t->shape, c->out_ndim, c->out_shape, &n, shape, "generated");
        if (st) return st;
        if (n != c->out_ndim || memcmp(shape, c->out_shape, sizeof(int64_t) * (size_t)n)) {
            char b1[256], b2[256];
            return wb_error(WB_ERR_SHAPE, "input %d of shape %s does not broadcast to the output's shape %s", i + 1,
                            wb_shape_format(t->ndim, t->shape, b1, sizeof b1),
                            wb_shape_format(c->out_ndim, c->out_shape, b2, sizeof b2));
        }
    }
    c->out_dtype = k->dtype;
    return WB_OK;
}

double wb_bytes_generated(const wb_op_call *c) {
    double bytes = 0, n = 1;
    for (int i = 0; i < c->out_ndim; i++)
        n *= (double)c->out_shape[i];
    for (int i = 0; i < WB_OP_MAX_INPUTS && c->in[i]; i++)
        bytes += (double)wb_tensor_numel(c->in[i]) * (double)wb_dtype_size(c->in[i]->dtype);
    return bytes + n * (double)wb_dtype_size(c->out_dtype);
}

typedef struct generated_launch {
    void (*fn)(const wb_poi_args *);
    wb_poi_args a;
} generated_launch;
#define IN(i) offsetof(generated_launch, a.in[i])
static const wb_launch_layout generated_layout = {.size = sizeof(generated_launch),
                                                  .npointers = 6,
                                                  .pointers = {IN(0), IN(1), IN(2), IN(3), IN(4),
                                                               offsetof(generated_launch, a.out)}};
#undef IN

static void run_generated(void *v) {
    const generated_launch *k = v;
    k->fn(&k->a);
}

wb_status wb_codegen_args(const wb_op_call *c, wb_poi_args *a, wb_tensor **tmp) {
    const wb_codegen_kernel *k = c->p.generated.kernel;
    const wb_tensor *out = c->out;
    int nd = out->ndim;
    memset(a, 0, sizeof *a);
    a->cols = nd ? out->shape[nd - 1] : 1;
    a->outer = nd ? nd - 1 : 0;
    a->rows = 1;
    for (int d = 0; d < a->outer; d++)
        a->shape[d] = out->shape[d], a->rows *= out->shape[d];
    a->out = wb_tensor_data(out);
    a->parallel_min = WB_CPU_PARALLEL_MIN;
    for (int i = 0; i < k->nin; i++) {
        wb_tensor *t = c->in[i];
        int64_t s[WB_MAX_DIMS] = {0};
        wb_broadcast_strides(t, nd, out->shape, s);
        int want0 = (k->inner_broadcast >> i) & 1;
        if (nd && a->cols > 1 && !want0 && s[nd - 1] != 1) { /* the source reads stride 1 there */
            wb_status st = wb_contiguous(t, &tmp[i]);
            if (st) return st;
            t = tmp[i];
            wb_broadcast_strides(t, nd, out->shape, s);
        }
        for (int d = 0; d < a->outer; d++)
            a->stride[i][d] = s[d];
        a->in[i] = wb_tensor_data(t);
    }
    return WB_OK;
}

wb_status wb_cpu_generated_impl(wb_op_call *c) {
    const wb_codegen_kernel *k = c->p.generated.kernel;
    wb_tensor *tmp[WB_OP_MAX_INPUTS] = {0};
    generated_launch launch = {.fn = k->fn};
    wb_status st = wb_codegen_args(c, &launch.a, tmp);
    if (!st) {
        int64_t n = launch.a.rows * launch.a.cols;
        wb_kernel_desc d = wb_kernel_desc_for(c, k->kind, n >= WB_CPU_PARALLEL_MIN ? wb_get_num_threads() : 1);
        wb_kernel_launch(&d, run_generated, &launch, &generated_layout);
        wb_storage_bump_version(c->out->storage);
    }
    for (int i = 0; i < WB_OP_MAX_INPUTS; i++)
        wb_tensor_free(tmp[i]);
    return st;
}

wb_status wb_codegen_launch(const wb_codegen_kernel *k, int nin, wb_tensor **in, int ndim, const int64_t *shape,
                            wb_tensor **out) {
    *out = NULL;
    if (nin < 1 || nin > WB_OP_MAX_INPUTS)
        return wb_error(WB_ERR_ARGUMENT, "generated: %d inputs (a kernel takes 1 to %d)", nin, WB_OP_MAX_INPUTS);
    if (ndim < 0 || ndim > WB_MAX_DIMS) return wb_error(WB_ERR_SHAPE, "generated: %d dimensions", ndim);
    wb_op_call c = {.nin = WB_OP_MAX_INPUTS, .out_ndim = ndim};
    for (int i = 0; i < nin; i++)
        c.in[i] = in[i];
    memcpy(c.out_shape, shape, sizeof(int64_t) * (size_t)ndim);
    c.p.generated.kernel = k;
    return wb_dispatch_out(WB_OP_GENERATED, &c, out);
}
