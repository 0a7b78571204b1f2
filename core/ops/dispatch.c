/* dispatch.c: the one dispatcher every op goes through, and the kernel launch point.
 * Both report to the installed hooks, which is where the profiler and graph capture attach. */
#include <stdio.h>

#include "op.h"
#include "storage.h"

static const wb_dispatch_hooks *hooks;
static const wb_capture_hooks *capture;

void wb_capture_set_hooks(const wb_capture_hooks *h) { capture = h; }
const wb_capture_hooks *wb_capture_hooks_active(void) { return capture; }

const wb_dispatch_hooks *wb_dispatch_set_hooks(const wb_dispatch_hooks *h) {
    const wb_dispatch_hooks *old = hooks;
    hooks = h;
    return old;
}

wb_status wb_dispatch(wb_op_id id, wb_op_call *call) {
    const wb_op_def *def = wb_op_get(id);
    if (!def) return wb_error(WB_ERR_ARGUMENT, "unknown op id %d", (int)id);
    call->def = def;
    call->out = call->out_indices = NULL;
    if (call->nin != def->arity)
        return wb_error(WB_ERR_ARGUMENT, "%s: expects %d tensor inputs, got %d", def->name, def->arity, call->nin);
    for (int i = 0; i < call->nin; i++) {
        if (!call->in[i]) {
            if (i >= def->arity - def->optional) continue;
            return wb_error(WB_ERR_ARGUMENT, "%s: input %d is missing", def->name, i + 1);
        }
        if (i == 0) call->device = call->in[0]->device;
        if (call->in[i]->device != call->device)
            return wb_error(WB_ERR_DEVICE, "%s: input %d is on %s but input 1 is on %s", def->name, i + 1,
                            wb_device_name(call->in[i]->device), wb_device_name(call->device));
    }
    wb_status st = wb_device_check_available(call->device);
    if (st) return wb_error_prefix(st, def->name);

    if (capture && capture->op_inputs) capture->op_inputs(capture->user, call);
    if (hooks && hooks->op_begin) hooks->op_begin(hooks->user, call);
    st = def->shape(call);
    if (!st && def->allocates_output)
        st = wb_tensor_empty(call->out_dtype, call->device, call->out_ndim, call->out_shape, &call->out);
    if (!st) {
        wb_op_impl_fn impl = def->impl[call->device];
        if (impl)
            st = impl(call);
        else
            st = wb_error(WB_ERR_UNSUPPORTED, "not implemented on device %s", wb_device_name(call->device));
    }
    if (st) {
        wb_tensor_free(call->out), wb_tensor_free(call->out_indices);
        call->out = call->out_indices = NULL;
        wb_error_prefix(st, def->name);
    }
    if (hooks && hooks->op_end) hooks->op_end(hooks->user, call, st);
    return st;
}

void wb_kernel_launch(const wb_kernel_desc *desc, void (*fn)(void *ctx), void *ctx, const wb_launch_layout *layout) {
    if (capture && capture->launch) capture->launch(capture->user, desc, fn, ctx, layout);
    wb_threads_adapt();
    const wb_dispatch_hooks *h = hooks;
    if (h && h->kernel_begin) h->kernel_begin(h->user, desc);
    fn(ctx);
    if (h && h->kernel_end) h->kernel_end(h->user, desc);
}

wb_kernel_desc wb_kernel_desc_for(const wb_op_call *c, const wb_kernel_kind *key, int threads) {
    return (wb_kernel_desc){.kind = wb_kernel_kind_intern(key),
                            .flops = c && c->def->flops ? c->def->flops(c) : 0,
                            .bytes = c && c->def->bytes ? c->def->bytes(c) : 0,
                            .threads = threads};
}

wb_status wb_dispatch_out(wb_op_id id, wb_op_call *call, wb_tensor **out) {
    *out = NULL;
    wb_status st = wb_dispatch(id, call);
    if (!st) *out = call->out;
    return st;
}
