/* pointwise.h: shape rules, work counts and CPU implementations of the elementwise and
 * creation ops (for op_table.c). */
#ifndef WB_OPS_POINTWISE_H
#define WB_OPS_POINTWISE_H

#include "op.h"

wb_status wb_shape_binary(wb_op_call *c);
wb_status wb_shape_unary(wb_op_call *c);
wb_status wb_shape_copy_(wb_op_call *c);
wb_status wb_shape_fill_(wb_op_call *c);
wb_status wb_shape_creation(wb_op_call *c);
double wb_flops_elementwise(const wb_op_call *c);
double wb_bytes_binary(const wb_op_call *c);
double wb_bytes_unary(const wb_op_call *c);
double wb_bytes_copy_(const wb_op_call *c);
double wb_bytes_fill_(const wb_op_call *c);
double wb_bytes_creation(const wb_op_call *c);
wb_status wb_cpu_binary_impl(wb_op_call *c);
wb_status wb_cpu_unary_impl(wb_op_call *c); /* neg and the other unary ops of arith_list.h */
wb_status wb_cpu_copy_impl(wb_op_call *c);
wb_status wb_cpu_fill_impl(wb_op_call *c);
wb_status wb_cpu_creation_impl(wb_op_call *c);
/* silu, sigmoid, relu, tanh, exp, swiglu on the cpu (core/ops/activation.c). */
wb_status wb_cpu_activation_impl(wb_op_call *c);
/* The kernels' wb_cpu_act for one of those ops. */
int wb_cpu_act_of(wb_op_id id);
/* bf16 on the cpu: f32 math, one rounding (core/ops/bf16.c). */
wb_status wb_cpu_bf16_pointwise(wb_op_call *c);

/* `to` between any two devices and dtypes (to.c). */
wb_status wb_shape_to(wb_op_call *c);
wb_status wb_to_impl(wb_op_call *c);

#endif
