/* compare.c: moving values between tensors and host doubles, and the comparisons tests and
 * benchmarks use (max_abs_diff, rel_error, allclose). These run on the host in double
 * precision; they are checks, not device ops, so they do not go through the dispatcher. */
#include <math.h>
#include <string.h>

#include "convert.h"
#include "storage.h"
#include <wb/wb.h>

/* Odometer over a shape with per-operand strides: calls visit(i, offsets) for each element. */
typedef struct walker {
    int ndim;
    int64_t shape[WB_MAX_DIMS];
    int64_t index[WB_MAX_DIMS];
} walker;

static int walker_next(walker *w, int nops, int64_t (*stride)[WB_MAX_DIMS], int64_t *off) {
    for (int d = w->ndim - 1; d >= 0; d--) {
        if (++w->index[d] < w->shape[d]) {
            for (int k = 0; k < nops; k++)
                off[k] += stride[k][d];
            return 1;
        }
        for (int k = 0; k < nops; k++)
            off[k] -= (w->shape[d] - 1) * stride[k][d];
        w->index[d] = 0;
    }
    return 0;
}

/* A host-readable version of x: x itself on the cpu, else a copy brought to the cpu (*staged
 * is set and must be freed). */
static wb_status host_readable(wb_tensor *x, const char *context, wb_tensor **staged) {
    *staged = NULL;
    wb_status st = wb_dtype_check_supported(x->dtype, context);
    if (st || x->device == WB_DEVICE_CPU) return st;
    st = wb_to(x, x->dtype, WB_DEVICE_CPU, staged);
    return st ? wb_error_prefix(st, context) : WB_OK;
}

wb_status wb_to_doubles(wb_tensor *x, double *values) {
    wb_tensor *staged;
    wb_status st = host_readable(x, "to_doubles", &staged);
    if (st) return st;
    if (staged) {
        st = wb_to_doubles(staged, values);
        wb_tensor_free(staged);
        return st;
    }
    if (wb_tensor_numel(x) == 0) return WB_OK;
    walker w = {.ndim = x->ndim};
    memcpy(w.shape, x->shape, sizeof w.shape);
    int64_t stride[1][WB_MAX_DIMS], off[1] = {0};
    memcpy(stride[0], x->stride, sizeof stride[0]);
    const void *data = wb_tensor_data(x);
    int64_t i = 0;
    do
        values[i++] = wb_load_as_double(data, x->dtype, off[0]);
    while (walker_next(&w, 1, stride, off));
    return WB_OK;
}

wb_status wb_from_doubles(wb_dtype dtype, wb_device device, int ndim, const int64_t *shape, const double *values,
                          wb_tensor **out) {
    *out = NULL;
    wb_status st = wb_dtype_check_supported(dtype, "tensor");
    if (st) return st;
    if (device != WB_DEVICE_CPU && (st = wb_device_check_available(device))) return wb_error_prefix(st, "tensor");
    wb_tensor *t;
    if ((st = wb_tensor_empty(dtype, WB_DEVICE_CPU, ndim, shape, &t))) return wb_error_prefix(st, "tensor");
    void *data = wb_tensor_data(t);
    int64_t n = wb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        wb_store_from_double(data, dtype, i, values[i]);
    if (device != WB_DEVICE_CPU) { /* built on the host, then moved */
        wb_tensor *moved;
        st = wb_to(t, dtype, device, &moved);
        wb_tensor_free(t);
        if (st) return wb_error_prefix(st, "tensor");
        t = moved;
    }
    *out = t;
    return WB_OK;
}

/* Visits every pair (a, b) of the broadcast of two tensors. */
typedef void (*pair_fn)(void *acc, double a, double b);

static wb_status for_each_pair_host(wb_tensor *a, wb_tensor *b, const char *context, pair_fn fn, void *acc);

static wb_status for_each_pair(wb_tensor *a, wb_tensor *b, const char *context, pair_fn fn, void *acc) {
    wb_tensor *sa = NULL, *sb = NULL;
    wb_status st = host_readable(a, context, &sa);
    if (!st) st = host_readable(b, context, &sb);
    if (!st) st = for_each_pair_host(sa ? sa : a, sb ? sb : b, context, fn, acc);
    wb_tensor_free(sa);
    wb_tensor_free(sb);
    return st;
}

static wb_status for_each_pair_host(wb_tensor *a, wb_tensor *b, const char *context, pair_fn fn, void *acc) {
    wb_status st;
    walker w = {0};
    if ((st = wb_shape_broadcast(a->ndim, a->shape, b->ndim, b->shape, &w.ndim, w.shape, context))) return st;
    for (int d = 0; d < w.ndim; d++)
        if (w.shape[d] == 0) return WB_OK;
    int64_t stride[2][WB_MAX_DIMS], off[2] = {0, 0};
    wb_broadcast_strides(a, w.ndim, w.shape, stride[0]);
    wb_broadcast_strides(b, w.ndim, w.shape, stride[1]);
    const void *pa = wb_tensor_data(a), *pb = wb_tensor_data(b);
    do
        fn(acc, wb_load_as_double(pa, a->dtype, off[0]), wb_load_as_double(pb, b->dtype, off[1]));
    while (walker_next(&w, 2, stride, off));
    return WB_OK;
}

static void max_abs_acc(void *v, double a, double b) {
    double *m = v, d = fabs(a - b);
    if (isnan(d) || d > *m) *m = isnan(*m) ? *m : d;
}

wb_status wb_max_abs_diff(wb_tensor *a, wb_tensor *b, double *out) {
    *out = 0.0;
    return for_each_pair(a, b, "max_abs_diff", max_abs_acc, out);
}

typedef struct norms {
    double diff2, ref2;
} norms;

static void rel_acc(void *v, double out, double ref) {
    norms *n = v;
    n->diff2 += (out - ref) * (out - ref);
    n->ref2 += ref * ref;
}

wb_status wb_rel_error(wb_tensor *out, wb_tensor *ref, double *result) {
    norms n = {0, 0};
    wb_status st = for_each_pair(out, ref, "rel_error", rel_acc, &n);
    if (st) return st;
    *result = n.ref2 > 0 ? sqrt(n.diff2) / sqrt(n.ref2) : sqrt(n.diff2);
    return WB_OK;
}

typedef struct close_acc {
    double rtol, atol;
    int all;
} close_acc;

static void close_fn(void *v, double a, double b) {
    close_acc *c = v;
    if (a == b) return; /* equal infinities are close */
    if (!(fabs(a - b) <= c->atol + c->rtol * fabs(b))) c->all = 0;
}

wb_status wb_allclose(wb_tensor *a, wb_tensor *b, double rtol, double atol, int *result) {
    if (!(rtol >= 0) || !(atol >= 0))
        return wb_error(WB_ERR_ARGUMENT, "allclose: rtol and atol must be >= 0 (got rtol=%g, atol=%g)", rtol, atol);
    close_acc c = {rtol, atol, 1};
    wb_status st = for_each_pair(a, b, "allclose", close_fn, &c);
    *result = c.all;
    return st;
}
