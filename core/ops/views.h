/* views.h: shape rules and implementations of the view and composite ops (for op_table.c). */
#ifndef WB_VIEWS_H
#define WB_VIEWS_H

#include "op.h"

wb_status wb_view_impl(wb_op_call *c);
wb_status wb_shape_alias(wb_op_call *c);
wb_status wb_shape_t(wb_op_call *c);
wb_status wb_shape_transpose(wb_op_call *c);
wb_status wb_shape_permute(wb_op_call *c);
wb_status wb_shape_view(wb_op_call *c);
wb_status wb_shape_narrow(wb_op_call *c);
wb_status wb_shape_select(wb_op_call *c);
wb_status wb_shape_as_strided(wb_op_call *c);
wb_status wb_shape_expand(wb_op_call *c);
wb_status wb_shape_reshape(wb_op_call *c);
wb_status wb_reshape_impl(wb_op_call *c);
wb_status wb_shape_flatten(wb_op_call *c);
wb_status wb_flatten_impl(wb_op_call *c);
wb_status wb_contiguous_impl(wb_op_call *c);
wb_status wb_shape_same(wb_op_call *c);
wb_status wb_clone_impl(wb_op_call *c);

/* Resolves one -1 in `shape` against numel and checks the element count. */
wb_status wb_infer_shape(int64_t numel, int ndim, const int64_t *shape, int64_t *out);
/* Strides that view `x` as `shape` without a copy; 0 when impossible. */
int wb_view_strides(const wb_tensor *x, int ndim, const int64_t *shape, int64_t *stride);

#endif
