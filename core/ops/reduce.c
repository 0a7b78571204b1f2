/* reduce.c: the reductions sum, mean and max, over one dim or every element: shape rules, work
 * counts, the CPU launcher (one kernel, <wb_kernels/reduce.h>: pairwise f64 sums, any strides,
 * f32 and bf16) and the public entry points. No cuda kernels yet (core/cuda/cuda_ops.c says so). */
#include <string.h>

#include <wb_kernels/reduce.h>

#include "op.h"
#include "reduce.h"
#include "storage.h"

/* Indices are f32: exact up to 2^24. */
#define MAX_INDEXED ((int64_t)1 << 24)

wb_status wb_shape_reduce(wb_op_call *c) {
    wb_tensor *x = c->in[0];
    wb_status st = wb_dtype_check_supported(x->dtype, c->def->name);
    if (st) return st;
    int dim = c->p.reduce.dim;
    char shape[256];
    wb_shape_format(x->ndim, x->shape, shape, sizeof shape);
    if (dim < -1 || dim >= x->ndim)
        return wb_error(WB_ERR_ARGUMENT, "dimension %d is out of range for a tensor of shape %s", dim + 1, shape);
    int64_t reduced = dim < 0 ? wb_tensor_numel(x) : x->shape[dim];
    if (reduced == 0 && c->def->id != WB_OP_SUM) {
        if (dim < 0) return wb_error(WB_ERR_SHAPE, "the tensor of shape %s is empty: no %s", shape, c->def->name);
        return wb_error(WB_ERR_SHAPE, "dimension %d of the tensor of shape %s is empty (size 0): no %s", dim + 1, shape,
                        c->def->name);
    }
    if (c->p.reduce.indices && (dim < 0 || c->def->id != WB_OP_MAX))
        return wb_error(WB_ERR_ARGUMENT, "indices come from max over one dimension only");
    if (c->p.reduce.indices && reduced > MAX_INDEXED)
        return wb_error(WB_ERR_RANGE,
                        "dimension %d of the tensor of shape %s has %lld elements: its indices are f32, exact up to "
                        "2^24 (16777216)",
                        dim + 1, shape, (long long)reduced);
    c->out_dtype = x->dtype;
    c->out_ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        int kept = dim >= 0 && d != dim;
        if (kept || c->p.reduce.keepdim) c->out_shape[c->out_ndim++] = kept ? x->shape[d] : 1;
    }
    return WB_OK;
}

/* One add or compare per element. */
double wb_flops_reduce(const wb_op_call *c) { return (double)wb_tensor_numel(c->in[0]); }

double wb_bytes_reduce(const wb_op_call *c) {
    double out = 1;
    for (int d = 0; d < c->out_ndim; d++)
        out *= (double)c->out_shape[d];
    double size = (double)wb_dtype_size(c->in[0]->dtype);
    return (double)wb_tensor_numel(c->in[0]) * size + out * size + (c->p.reduce.indices ? out * sizeof(float) : 0);
}

typedef struct reduce_launch {
    wb_cpu_reduce_problem p;
} reduce_launch;
static const wb_launch_layout reduce_layout = {
    .size = sizeof(reduce_launch),
    .npointers = 3,
    .pointers = {offsetof(reduce_launch, p.x), offsetof(reduce_launch, p.out), offsetof(reduce_launch, p.indices)}};

static void run_reduce(void *v) { wb_cpu_reduce(&((reduce_launch *)v)->p); }

wb_status wb_cpu_reduce_impl(wb_op_call *c) {
    wb_tensor *x = c->in[0];
    int dim = c->p.reduce.dim;
    reduce_launch k = {.p = {.op = c->def->id == WB_OP_SUM    ? WB_CPU_REDUCE_SUM
                                   : c->def->id == WB_OP_MEAN ? WB_CPU_REDUCE_MEAN
                                                              : WB_CPU_REDUCE_MAX,
                             .dtype = (wb_cpu_dtype)x->dtype,
                             .x = wb_tensor_data(x),
                             .out = wb_tensor_data(c->out),
                             .index_base = c->p.reduce.index_base}};
    for (int d = 0; d < x->ndim; d++) {
        if (dim < 0 || d == dim) {
            k.p.inner_shape[k.p.inner_ndim] = x->shape[d], k.p.inner_stride[k.p.inner_ndim++] = x->stride[d];
        } else {
            k.p.outer_shape[k.p.outer_ndim] = x->shape[d], k.p.outer_stride[k.p.outer_ndim++] = x->stride[d];
        }
    }
    if (c->p.reduce.indices) {
        wb_status st = wb_tensor_empty(WB_F32, c->device, c->out->ndim, c->out->shape, &c->out_indices);
        if (st) return st;
        k.p.indices = wb_tensor_data(c->out_indices);
    }
    int contiguous = wb_tensor_is_contiguous(x) && (dim < 0 || dim == x->ndim - 1);
    wb_kernel_desc d = wb_kernel_desc_for(c,
                                          &(wb_kernel_kind){.op = c->def->name,
                                                            .dtype = x->dtype == WB_BF16 ? "bf16" : NULL,
                                                            .isa = "generic",
                                                            .variant = contiguous ? "contig" : "strided"},
                                          wb_cpu_reduce_parallel(&k.p) ? wb_get_num_threads() : 1);
    wb_kernel_launch(&d, run_reduce, &k, &reduce_layout);
    wb_storage_bump_version(c->out->storage);
    if (c->out_indices) wb_storage_bump_version(c->out_indices->storage);
    return WB_OK;
}

static wb_status reduce(wb_op_id id, wb_tensor *x, int dim, int keepdim, wb_tensor **out) {
    wb_op_call c = {.in = {x}, .nin = 1, .p.reduce = {.dim = dim, .keepdim = keepdim}};
    return wb_dispatch_out(id, &c, out);
}

wb_status wb_sum(wb_tensor *x, int dim, int keepdim, wb_tensor **out) {
    return reduce(WB_OP_SUM, x, dim, keepdim, out);
}

wb_status wb_mean(wb_tensor *x, int dim, int keepdim, wb_tensor **out) {
    return reduce(WB_OP_MEAN, x, dim, keepdim, out);
}

wb_status wb_max(wb_tensor *x, int dim, int keepdim, int64_t index_base, wb_tensor **values, wb_tensor **indices) {
    wb_op_call c = {.in = {x},
                    .nin = 1,
                    .p.reduce = {.dim = dim, .keepdim = keepdim, .indices = indices != NULL, .index_base = index_base}};
    if (indices) *indices = NULL;
    wb_status st = wb_dispatch_out(WB_OP_MAX, &c, values);
    if (!st && indices) *indices = c.out_indices;
    return st;
}
