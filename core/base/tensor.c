/* tensor.c: tensor headers over storages: creation, geometry checks, shape helpers.
 * Every header that points into a storage goes through check_bounds, so no view can reach
 * outside the buffer it shares. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "storage.h"
#include <wb/wb.h>

char *wb_shape_format(int ndim, const int64_t *shape, char *buf, size_t len) {
    size_t pos = 0;
    pos += (size_t)snprintf(buf + pos, len - pos, "{");
    for (int i = 0; i < ndim && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    if (pos < len) snprintf(buf + pos, len - pos, "}");
    return buf;
}

static wb_status shape_check(int ndim, const int64_t *shape, wb_dtype dtype);

wb_status wb_shape_check(int ndim, const int64_t *shape, wb_dtype dtype, const char *context) {
    wb_status st = shape_check(ndim, shape, dtype);
    return st && context ? wb_error_prefix(st, context) : st;
}

static wb_status shape_check(int ndim, const int64_t *shape, wb_dtype dtype) {
    if (ndim < 0 || ndim > WB_MAX_DIMS)
        return wb_error(WB_ERR_SHAPE, "%d dimensions requested, at most %d are supported", ndim, WB_MAX_DIMS);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            char buf[256];
            return wb_error(WB_ERR_SHAPE, "negative size %" PRId64 " in dimension %d of shape %s", shape[i], i + 1,
                            wb_shape_format(ndim, shape, buf, sizeof buf));
        }
        if (shape[i] != 0 && __builtin_mul_overflow(numel, (uint64_t)shape[i], &numel)) goto huge;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) return WB_OK;
    uint64_t bytes;
    if (__builtin_mul_overflow(numel, (uint64_t)wb_dtype_size(dtype), &bytes) || bytes > (uint64_t)INT64_MAX) goto huge;
    return WB_OK;
huge : {
    char buf[256];
    return wb_error(WB_ERR_MEMORY, "shape %s has more elements than can be addressed",
                    wb_shape_format(ndim, shape, buf, sizeof buf));
}
}

wb_status wb_shape_broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out,
                             const char *context) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa == sb || sb == 1)
            out[i] = sa;
        else if (sa == 1)
            out[i] = sb;
        else {
            char ba[256], bb[256];
            return wb_error(
                WB_ERR_SHAPE,
                "%s: shapes %s and %s do not broadcast (size %" PRId64 " vs %" PRId64 " in dimension %d from the end)",
                context, wb_shape_format(na, a, ba, sizeof ba), wb_shape_format(nb, b, bb, sizeof bb), sa, sb, n - i);
        }
    }
    *nout = n;
    return WB_OK;
}

void wb_broadcast_strides(const wb_tensor *x, int ndim, const int64_t *shape, int64_t *stride) {
    for (int i = 0; i < ndim; i++) {
        int xi = i - (ndim - x->ndim);
        stride[i] = (xi < 0 || (x->shape[xi] == 1 && shape[i] != 1)) ? 0 : x->stride[xi];
    }
}

int64_t wb_tensor_numel(const wb_tensor *t) {
    for (int i = 0; i < t->ndim; i++) /* a zero dimension first: {2^63-1, 2, 0} must not overflow */
        if (t->shape[i] == 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

int wb_tensor_is_contiguous(const wb_tensor *t) {
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 0) return 1;
        if (t->shape[i] != 1 && t->stride[i] != expected) return 0;
        expected *= t->shape[i];
    }
    return 1;
}

int wb_same_geometry_contiguous(const wb_tensor *a, const wb_tensor *b) {
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) &&
           wb_tensor_is_contiguous(a) && wb_tensor_is_contiguous(b);
}

void *wb_tensor_data(const wb_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)wb_dtype_size(t->dtype);
}

/* Fails unless every element of the geometry lies inside the storage. */
static wb_status check_bounds(const wb_storage *s, wb_dtype dtype, int ndim, const int64_t *shape,
                              const int64_t *stride, int64_t offset) {
    if (offset < 0) return wb_error(WB_ERR_RANGE, "storage offset %" PRId64 " is negative", offset);
    int64_t last = offset; /* index of the furthest element */
    int64_t capacity = (int64_t)(s->nbytes / wb_dtype_size(dtype));
    for (int i = 0; i < ndim; i++) {
        if (stride[i] < 0)
            return wb_error(WB_ERR_RANGE, "negative stride %" PRId64 " in dimension %d is not supported", stride[i],
                            i + 1);
        if (shape[i] == 0) { /* no elements, nothing to reach; the offset must still lie in the storage */
            if (offset > capacity)
                return wb_error(WB_ERR_RANGE, "storage offset %" PRId64 " is past the storage's %" PRId64 " elements",
                                offset, capacity);
            return WB_OK;
        }
        int64_t reach;
        if (__builtin_mul_overflow(shape[i] - 1, stride[i], &reach) || __builtin_add_overflow(last, reach, &last))
            return wb_error(WB_ERR_RANGE, "strides reach past any storage");
    }
    if (last >= capacity) {
        char bs[256], bt[256];
        return wb_error(WB_ERR_RANGE,
                        "shape %s with strides %s at offset %" PRId64 " needs %" PRIu64
                        " elements but the storage has %" PRId64,
                        wb_shape_format(ndim, shape, bs, sizeof bs), wb_shape_format(ndim, stride, bt, sizeof bt),
                        offset, (uint64_t)last + 1, capacity); /* last may be INT64_MAX itself */
    }
    return WB_OK;
}

static wb_pool headers; /* see pool.h */

static wb_tensor *header_new(void) { return wb_pool_take(&headers, sizeof(wb_tensor)); }
/* Under ASan every header is freed, so a use after free stays visible. */
static void header_free(wb_tensor *t) { wb_pool_give(&headers, t, wb_alloc_cache_on()); }

wb_status wb_tensor_empty(wb_dtype dtype, wb_device device, int ndim, const int64_t *shape, wb_tensor **out) {
    *out = NULL;
    if ((unsigned)dtype >= WB_DTYPE_COUNT) return wb_error(WB_ERR_DTYPE, "invalid dtype id %d", (int)dtype);
    wb_status st = wb_shape_check(ndim, shape, dtype, NULL);
    if (st) return st;
    int64_t numel = 1; /* a zero dimension anywhere makes it 0: {2^63-1, 2, 0} must not overflow first */
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) numel = 0;
    for (int i = 0; i < ndim && numel; i++)
        if (__builtin_mul_overflow(numel, shape[i], &numel))
            return wb_error(WB_ERR_RANGE, "a tensor of %d dimensions has more elements than fit in 63 bits", ndim);
    wb_tensor *t = header_new();
    if (!t) return wb_error(WB_ERR_MEMORY, "out of memory allocating a tensor header");
    st = wb_storage_new(device, (size_t)numel * wb_dtype_size(dtype), &t->storage);
    if (st) {
        header_free(t);
        return st;
    }
    t->dtype = dtype;
    t->device = device;
    t->ndim = ndim;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->stride[i] = stride;
        /* saturates: only an empty tensor gets this far with a product past int64 */
        if (__builtin_mul_overflow(stride, shape[i] > 1 ? shape[i] : 1, &stride)) stride = INT64_MAX;
    }
    *out = t;
    return WB_OK;
}

wb_status wb_tensor_new_view(const wb_tensor *src, int ndim, const int64_t *shape, const int64_t *stride,
                             int64_t offset, wb_tensor **out) {
    *out = NULL;
    wb_status st = wb_shape_check(ndim, shape, src->dtype, NULL);
    if (st) return st;
    st = check_bounds(src->storage, src->dtype, ndim, shape, stride, offset);
    if (st) return st;
    wb_tensor *t = header_new();
    if (!t) return wb_error(WB_ERR_MEMORY, "out of memory allocating a tensor header");
    t->dtype = src->dtype;
    t->device = src->device;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(t->stride, stride, sizeof(int64_t) * (size_t)ndim);
    t->offset = offset;
    t->storage = src->storage;
    wb_storage_retain(t->storage);
    *out = t;
    return WB_OK;
}

void wb_tensor_free(wb_tensor *t) {
    if (!t) return;
    wb_storage_release(t->storage);
    header_free(t);
}
