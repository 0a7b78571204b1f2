/* views.c: ops that return views (t, transpose, permute, view, narrow, select, as_strided,
 * expand, alias) and the composites built on them (reshape, flatten, contiguous, clone).
 * A view's shape rule computes its whole geometry; the one view implementation then makes a
 * bounds-checked header over the same storage. Nothing here touches element data. */
#include <inttypes.h>
#include <string.h>

#include "op.h"
#include "views.h"

static wb_status check_dim(const wb_tensor *x, int dim, const char *what) {
    if (dim < 0 || dim >= x->ndim)
        return wb_error(WB_ERR_RANGE, "%s %d is out of range for a tensor with %d dimension%s", what, dim + 1, x->ndim,
                        x->ndim == 1 ? "" : "s");
    return WB_OK;
}

static void copy_geometry(wb_op_call *c, const wb_tensor *x) {
    c->out_dtype = x->dtype;
    c->out_ndim = x->ndim;
    memcpy(c->out_shape, x->shape, sizeof x->shape);
    memcpy(c->out_stride, x->stride, sizeof x->stride);
    c->out_offset = x->offset;
}

wb_status wb_view_impl(wb_op_call *c) {
    return wb_tensor_new_view(c->in[0], c->out_ndim, c->out_shape, c->out_stride, c->out_offset, &c->out);
}

wb_status wb_shape_alias(wb_op_call *c) {
    copy_geometry(c, c->in[0]);
    return WB_OK;
}

wb_status wb_shape_t(wb_op_call *c) {
    const wb_tensor *x = c->in[0];
    if (x->ndim > 2) {
        char b[256];
        return wb_error(WB_ERR_SHAPE,
                        "expects a tensor with at most 2 dimensions, got %d (shape %s); use transpose(d1, d2)", x->ndim,
                        wb_shape_format(x->ndim, x->shape, b, sizeof b));
    }
    copy_geometry(c, x);
    if (x->ndim == 2) {
        c->out_shape[0] = x->shape[1], c->out_shape[1] = x->shape[0];
        c->out_stride[0] = x->stride[1], c->out_stride[1] = x->stride[0];
    }
    return WB_OK;
}

wb_status wb_shape_transpose(wb_op_call *c) {
    const wb_tensor *x = c->in[0];
    int d1 = c->p.transpose.d1, d2 = c->p.transpose.d2;
    wb_status st;
    if ((st = check_dim(x, d1, "dimension")) || (st = check_dim(x, d2, "dimension"))) return st;
    copy_geometry(c, x);
    c->out_shape[d1] = x->shape[d2], c->out_shape[d2] = x->shape[d1];
    c->out_stride[d1] = x->stride[d2], c->out_stride[d2] = x->stride[d1];
    return WB_OK;
}

wb_status wb_shape_permute(wb_op_call *c) {
    const wb_tensor *x = c->in[0];
    int n = c->p.permute.ndim;
    if (n != x->ndim)
        return wb_error(WB_ERR_SHAPE, "got %d dimensions in the order, but the tensor has %d", n, x->ndim);
    int seen[WB_MAX_DIMS] = {0};
    copy_geometry(c, x);
    for (int i = 0; i < n; i++) {
        int d = c->p.permute.perm[i];
        wb_status st = check_dim(x, d, "dimension");
        if (st) return st;
        if (seen[d]++) return wb_error(WB_ERR_ARGUMENT, "dimension %d appears twice in the order", d + 1);
        c->out_shape[i] = x->shape[d];
        c->out_stride[i] = x->stride[d];
    }
    return WB_OK;
}

wb_status wb_infer_shape(int64_t numel, int ndim, const int64_t *shape, int64_t *out) {
    char b[256];
    int infer = -1;
    int64_t known = 1;
    if (ndim < 0 || ndim > WB_MAX_DIMS)
        return wb_error(WB_ERR_SHAPE, "%d dimensions requested, at most %d are supported", ndim, WB_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0)
                return wb_error(WB_ERR_SHAPE, "only one dimension can be -1, shape %s has more",
                                wb_shape_format(ndim, shape, b, sizeof b));
            infer = i;
        } else if (shape[i] < 0) {
            return wb_error(WB_ERR_SHAPE, "invalid size %" PRId64 " in dimension %d of shape %s", shape[i], i + 1,
                            wb_shape_format(ndim, shape, b, sizeof b));
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {
            return wb_error(WB_ERR_SHAPE, "shape %s has too many elements", wb_shape_format(ndim, shape, b, sizeof b));
        }
    }
    if (infer >= 0) {
        if (known == 0)
            return wb_error(WB_ERR_SHAPE,
                            "cannot infer the -1 in shape %s: with a zero-size dimension it could be anything",
                            wb_shape_format(ndim, shape, b, sizeof b));
        if (numel % known != 0)
            return wb_error(WB_ERR_SHAPE, "shape %s is invalid for a tensor of %" PRId64 " elements",
                            wb_shape_format(ndim, shape, b, sizeof b), numel);
        out[infer] = numel / known;
        known = numel;
    }
    if (known != numel)
        return wb_error(WB_ERR_SHAPE, "shape %s (%" PRId64 " elements) is invalid for a tensor of %" PRId64 " elements",
                        wb_shape_format(ndim, shape, b, sizeof b), known, numel);
    return WB_OK;
}

/* Strides that let `x` be seen with `shape` without copying (the algorithm PyTorch's view
 * uses: each run of dimensions that is contiguous in memory may be regrouped freely).
 * Returns 0 when no such strides exist. */
int wb_view_strides(const wb_tensor *x, int ndim, const int64_t *shape, int64_t *stride) {
    int64_t numel = wb_tensor_numel(x);
    if (numel == 0 || x->ndim == 0) { /* any strides work: use contiguous ones */
        int64_t s = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            stride[i] = s;
            s *= shape[i] > 1 ? shape[i] : 1;
        }
        return 1;
    }
    int view_d = ndim - 1;
    int64_t chunk_base_stride = x->stride[x->ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        tensor_numel *= x->shape[d];
        if (d == 0 || (x->shape[d - 1] != 1 && x->stride[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                stride[view_d] = view_numel * chunk_base_stride;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return 0;
            if (d > 0) {
                chunk_base_stride = x->stride[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

wb_status wb_shape_view(wb_op_call *c) {
    const wb_tensor *x = c->in[0];
    wb_status st = wb_infer_shape(wb_tensor_numel(x), c->p.shape.ndim, c->p.shape.shape, c->out_shape);
    if (st) return st;
    c->out_dtype = x->dtype;
    c->out_ndim = c->p.shape.ndim;
    c->out_offset = x->offset;
    if (!wb_view_strides(x, c->out_ndim, c->out_shape, c->out_stride)) {
        char bs[256], bt[256], bn[256];
        return wb_error(WB_ERR_SHAPE,
                        "shape %s cannot be a view of a tensor of shape %s with strides %s: its elements "
                        "are not laid out in that order in memory; use reshape() or contiguous() first",
                        wb_shape_format(c->out_ndim, c->out_shape, bn, sizeof bn),
                        wb_shape_format(x->ndim, x->shape, bs, sizeof bs),
                        wb_shape_format(x->ndim, x->stride, bt, sizeof bt));
    }
    return WB_OK;
}

wb_status wb_shape_narrow(wb_op_call *c) {
    const wb_tensor *x = c->in[0];
    int dim = c->p.narrow.dim;
    int64_t start = c->p.narrow.start, len = c->p.narrow.length;
    wb_status st = check_dim(x, dim, "dimension");
    if (st) return st;
    if (start < 0 || len < 0 || start > x->shape[dim] || len > x->shape[dim] - start)
        return wb_error(WB_ERR_RANGE,
                        "elements %" PRId64 "..%" PRId64 " (start %" PRId64 ", length %" PRId64
                        ") are past the end of dimension %d of size %" PRId64,
                        start + 1, start > INT64_MAX - len ? INT64_MAX : start + len, start + 1, len, dim + 1,
                        x->shape[dim]);
    copy_geometry(c, x);
    c->out_shape[dim] = len;
    c->out_offset = x->offset + start * x->stride[dim];
    return WB_OK;
}

wb_status wb_shape_select(wb_op_call *c) {
    const wb_tensor *x = c->in[0];
    int dim = c->p.select.dim;
    int64_t index = c->p.select.index;
    wb_status st = check_dim(x, dim, "dimension");
    if (st) return st;
    if (index < 0 || index >= x->shape[dim])
        return wb_error(WB_ERR_RANGE, "index %" PRId64 " is out of range for dimension %d of size %" PRId64, index + 1,
                        dim + 1, x->shape[dim]);
    c->out_dtype = x->dtype;
    c->out_ndim = x->ndim - 1;
    for (int i = 0, j = 0; i < x->ndim; i++) {
        if (i == dim) continue;
        c->out_shape[j] = x->shape[i];
        c->out_stride[j++] = x->stride[i];
    }
    c->out_offset = x->offset + index * x->stride[dim];
    return WB_OK;
}

wb_status wb_shape_as_strided(wb_op_call *c) {
    int n = c->p.strided.ndim;
    wb_status st = wb_shape_check(n, c->p.strided.shape, c->in[0]->dtype, "as_strided");
    if (st) return st;
    c->out_dtype = c->in[0]->dtype;
    c->out_ndim = n;
    memcpy(c->out_shape, c->p.strided.shape, sizeof c->out_shape);
    memcpy(c->out_stride, c->p.strided.stride, sizeof c->out_stride);
    c->out_offset = c->p.strided.offset;
    return WB_OK; /* wb_tensor_new_view checks the reach against the storage */
}

wb_status wb_shape_expand(wb_op_call *c) {
    const wb_tensor *x = c->in[0];
    int n = c->p.shape.ndim;
    char bs[256], bn[256];
    if (n < x->ndim || n > WB_MAX_DIMS)
        return wb_error(WB_ERR_SHAPE, "the target shape %s has fewer dimensions than the tensor's %s",
                        wb_shape_format(n, c->p.shape.shape, bn, sizeof bn),
                        wb_shape_format(x->ndim, x->shape, bs, sizeof bs));
    c->out_dtype = x->dtype;
    c->out_ndim = n;
    c->out_offset = x->offset;
    for (int i = n - 1; i >= 0; i--) {
        int xi = i - (n - x->ndim);
        int64_t want = c->p.shape.shape[i];
        if (xi < 0) { /* new leading dimension */
            if (want < 0)
                return wb_error(WB_ERR_SHAPE, "size %" PRId64 " is not allowed in new leading dimension %d", want,
                                i + 1);
            c->out_shape[i] = want;
            c->out_stride[i] = 0;
            continue;
        }
        if (want == -1 || want == x->shape[xi]) {
            c->out_shape[i] = x->shape[xi];
            c->out_stride[i] = x->stride[xi];
        } else if (x->shape[xi] == 1 && want >= 0) {
            c->out_shape[i] = want;
            c->out_stride[i] = 0;
        } else {
            return wb_error(WB_ERR_SHAPE,
                            "dimension %d has size %" PRId64 " and cannot be expanded to %" PRId64
                            " (tensor %s, target %s); only size-1 dimensions expand",
                            i + 1, x->shape[xi], want, wb_shape_format(x->ndim, x->shape, bs, sizeof bs),
                            wb_shape_format(n, c->p.shape.shape, bn, sizeof bn));
        }
    }
    return WB_OK;
}

/* ---- composites ---------------------------------------------------------------------- */

wb_status wb_shape_reshape(wb_op_call *c) {
    c->out_dtype = c->in[0]->dtype;
    c->out_ndim = c->p.shape.ndim;
    return wb_infer_shape(wb_tensor_numel(c->in[0]), c->p.shape.ndim, c->p.shape.shape, c->out_shape);
}

wb_status wb_reshape_impl(wb_op_call *c) {
    int64_t stride[WB_MAX_DIMS];
    if (wb_view_strides(c->in[0], c->out_ndim, c->out_shape, stride))
        return wb_view(c->in[0], c->out_ndim, c->out_shape, &c->out);
    wb_tensor *tmp;
    wb_status st = wb_contiguous(c->in[0], &tmp);
    if (st) return st;
    st = wb_view(tmp, c->out_ndim, c->out_shape, &c->out);
    wb_tensor_free(tmp);
    return st;
}

wb_status wb_shape_flatten(wb_op_call *c) {
    const wb_tensor *x = c->in[0];
    int s = c->p.flatten.start_dim, e = c->p.flatten.end_dim;
    c->out_dtype = x->dtype;
    if (x->ndim == 0) {
        c->out_ndim = 1;
        c->out_shape[0] = 1;
        return WB_OK;
    }
    wb_status st;
    if ((st = check_dim(x, s, "start dimension")) || (st = check_dim(x, e, "end dimension"))) return st;
    if (s > e) return wb_error(WB_ERR_ARGUMENT, "start dimension %d comes after end dimension %d", s + 1, e + 1);
    int n = 0;
    for (int i = 0; i < s; i++)
        c->out_shape[n++] = x->shape[i];
    int64_t merged = 1;
    for (int i = s; i <= e; i++)
        merged *= x->shape[i];
    c->out_shape[n++] = merged;
    for (int i = e + 1; i < x->ndim; i++)
        c->out_shape[n++] = x->shape[i];
    c->out_ndim = n;
    return WB_OK;
}

wb_status wb_flatten_impl(wb_op_call *c) { return wb_reshape(c->in[0], c->out_ndim, c->out_shape, &c->out); }

wb_status wb_contiguous_impl(wb_op_call *c) {
    if (wb_tensor_is_contiguous(c->in[0])) return wb_alias(c->in[0], &c->out);
    return wb_clone(c->in[0], &c->out);
}

wb_status wb_shape_same(wb_op_call *c) {
    const wb_tensor *x = c->in[0];
    c->out_dtype = x->dtype;
    c->out_ndim = x->ndim;
    memcpy(c->out_shape, x->shape, sizeof x->shape);
    return WB_OK;
}

wb_status wb_clone_impl(wb_op_call *c) {
    wb_tensor *out;
    wb_status st = wb_tensor_empty(c->in[0]->dtype, c->in[0]->device, c->in[0]->ndim, c->in[0]->shape, &out);
    if (st) return st;
    st = wb_copy_(out, c->in[0]);
    if (st) {
        wb_tensor_free(out);
        return st;
    }
    c->out = out;
    return WB_OK;
}

/* ---- public wrappers -------------------------------------------------------------------- */

/* A view op on x with the parameters already in c. */
static wb_status run1(wb_op_id id, wb_op_call *c, wb_tensor *x, wb_tensor **out) {
    c->in[0] = x;
    c->nin = 1;
    return wb_dispatch_out(id, c, out);
}

wb_status wb_t(wb_tensor *x, wb_tensor **out) { return run1(WB_OP_T, &(wb_op_call){0}, x, out); }

wb_status wb_alias(wb_tensor *x, wb_tensor **out) { return run1(WB_OP_ALIAS, &(wb_op_call){0}, x, out); }

wb_status wb_transpose(wb_tensor *x, int d1, int d2, wb_tensor **out) {
    wb_op_call c = {0};
    c.p.transpose.d1 = d1, c.p.transpose.d2 = d2;
    return run1(WB_OP_TRANSPOSE, &c, x, out);
}

wb_status wb_permute(wb_tensor *x, int ndim, const int *perm, wb_tensor **out) {
    wb_op_call c = {0};
    if (ndim < 0 || ndim > WB_MAX_DIMS) return wb_error(WB_ERR_SHAPE, "permute: %d dimensions is too many", ndim);
    c.p.permute.ndim = ndim;
    memcpy(c.p.permute.perm, perm, sizeof(int) * (size_t)ndim);
    return run1(WB_OP_PERMUTE, &c, x, out);
}

static wb_status set_shape_param(wb_op_call *c, int ndim, const int64_t *shape, const char *name) {
    if (ndim < 0 || ndim > WB_MAX_DIMS)
        return wb_error(WB_ERR_SHAPE, "%s: %d dimensions requested, at most %d are supported", name, ndim, WB_MAX_DIMS);
    c->p.shape.ndim = ndim;
    memcpy(c->p.shape.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return WB_OK;
}

wb_status wb_view(wb_tensor *x, int ndim, const int64_t *shape, wb_tensor **out) {
    wb_op_call c = {0};
    wb_status st = set_shape_param(&c, ndim, shape, "view");
    return st ? st : run1(WB_OP_VIEW, &c, x, out);
}

wb_status wb_reshape(wb_tensor *x, int ndim, const int64_t *shape, wb_tensor **out) {
    wb_op_call c = {0};
    wb_status st = set_shape_param(&c, ndim, shape, "reshape");
    return st ? st : run1(WB_OP_RESHAPE, &c, x, out);
}

wb_status wb_expand(wb_tensor *x, int ndim, const int64_t *shape, wb_tensor **out) {
    wb_op_call c = {0};
    wb_status st = set_shape_param(&c, ndim, shape, "expand");
    return st ? st : run1(WB_OP_EXPAND, &c, x, out);
}

wb_status wb_narrow(wb_tensor *x, int dim, int64_t start, int64_t length, wb_tensor **out) {
    wb_op_call c = {0};
    c.p.narrow.dim = dim, c.p.narrow.start = start, c.p.narrow.length = length;
    return run1(WB_OP_NARROW, &c, x, out);
}

wb_status wb_select(wb_tensor *x, int dim, int64_t index, wb_tensor **out) {
    wb_op_call c = {0};
    c.p.select.dim = dim, c.p.select.index = index;
    return run1(WB_OP_SELECT, &c, x, out);
}

wb_status wb_as_strided(wb_tensor *x, int ndim, const int64_t *shape, const int64_t *stride, int64_t offset,
                        wb_tensor **out) {
    wb_op_call c = {0};
    if (ndim < 0 || ndim > WB_MAX_DIMS)
        return wb_error(WB_ERR_SHAPE, "as_strided: %d dimensions requested, at most %d are supported", ndim,
                        WB_MAX_DIMS);
    c.p.strided.ndim = ndim;
    memcpy(c.p.strided.shape, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(c.p.strided.stride, stride, sizeof(int64_t) * (size_t)ndim);
    c.p.strided.offset = offset;
    return run1(WB_OP_AS_STRIDED, &c, x, out);
}

wb_status wb_flatten(wb_tensor *x, int start_dim, int end_dim, wb_tensor **out) {
    wb_op_call c = {0};
    c.p.flatten.start_dim = start_dim, c.p.flatten.end_dim = end_dim;
    return run1(WB_OP_FLATTEN, &c, x, out);
}

wb_status wb_contiguous(wb_tensor *x, wb_tensor **out) { return run1(WB_OP_CONTIGUOUS, &(wb_op_call){0}, x, out); }

wb_status wb_clone(wb_tensor *x, wb_tensor **out) { return run1(WB_OP_CLONE, &(wb_op_call){0}, x, out); }
