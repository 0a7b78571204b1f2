/* to.c: the `to` op between every pair of devices and dtypes, and synchronize. A dtype change
 * on one device is a copy_ (which converts); a move stages a contiguous copy in the target
 * dtype on the side that has one, then copies bytes through the device's backend table. */
#include <string.h>

#include "backend.h"
#include "pointwise.h"
#include "storage.h"

wb_status wb_shape_to(wb_op_call *c) {
    wb_tensor *x = c->in[0];
    wb_device target = c->p.to.device;
    wb_status st = wb_dtype_check_supported(c->p.to.dtype, "to");
    if (st) return st;
    if ((st = wb_device_check_available(target))) return st;
    c->device = target; /* the output is allocated there */
    c->out_dtype = c->p.to.dtype;
    c->out_ndim = x->ndim;
    memcpy(c->out_shape, x->shape, sizeof c->out_shape);
    return WB_OK;
}

wb_status wb_to_impl(wb_op_call *c) {
    wb_tensor *x = c->in[0], *out = c->out, *stage = NULL;
    wb_status st = WB_OK;
    if (x->device == out->device) return wb_copy_(out, x); /* a dtype change on one device */
    size_t nbytes = (size_t)wb_tensor_numel(out) * wb_dtype_size(out->dtype);
    /* a contiguous copy in the target dtype, on the source's device */
    if (!wb_tensor_is_contiguous(x) || x->dtype != out->dtype) {
        if ((st = wb_tensor_empty(out->dtype, x->device, x->ndim, x->shape, &stage)) || (st = wb_copy_(stage, x))) {
            wb_tensor_free(stage);
            return st;
        }
    }
    const wb_tensor *src = stage ? stage : x;
    if (x->device == WB_DEVICE_CPU)
        st = wb_backend_get(out->device)->copy_from_host(wb_tensor_data(out), wb_tensor_data(src), nbytes);
    else if (out->device == WB_DEVICE_CPU)
        st = wb_backend_get(x->device)->copy_to_host(wb_tensor_data(out), wb_tensor_data(src), nbytes);
    else
        st = wb_error(WB_ERR_UNSUPPORTED, "no copy from %s to %s", wb_device_name(x->device),
                      wb_device_name(out->device));
    wb_tensor_free(stage);
    if (!st) wb_storage_bump_version(out->storage);
    return st;
}

wb_status wb_to(wb_tensor *x, wb_dtype dtype, wb_device device, wb_tensor **out) {
    *out = NULL;
    if (x->dtype == dtype && x->device == device) return wb_alias(x, out);
    wb_op_call c = {0};
    c.in[0] = x, c.nin = 1;
    c.p.to.dtype = dtype;
    c.p.to.device = device;
    wb_status st = wb_dispatch(WB_OP_TO, &c);
    if (!st) *out = c.out;
    return st;
}

wb_status wb_synchronize(wb_device device) {
    wb_status st = wb_device_check_available(device);
    if (st) return st;
    return wb_backend_get(device)->synchronize();
}
