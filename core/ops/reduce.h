/* reduce.h: shape rule, work counts and CPU implementation of the reductions sum, mean and max
 * (core/ops/reduce.c), for op_table.c. */
#ifndef WB_OPS_REDUCE_H
#define WB_OPS_REDUCE_H

#include "op.h"

wb_status wb_shape_reduce(wb_op_call *c);
double wb_flops_reduce(const wb_op_call *c);
double wb_bytes_reduce(const wb_op_call *c);
wb_status wb_cpu_reduce_impl(wb_op_call *c);

#endif
