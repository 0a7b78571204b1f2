/* mlp.h: shape rule, work counts and device implementations of geglu_mlp and swiglu_mlp
 * (for op_table.c; see core/ops/mlp.c). */
#ifndef WB_OPS_MLP_H
#define WB_OPS_MLP_H

#include "op.h"

wb_status wb_shape_mlp(wb_op_call *c);
double wb_flops_mlp(const wb_op_call *c);
double wb_bytes_mlp(const wb_op_call *c);
wb_status wb_cpu_mlp_impl(wb_op_call *c);  /* one kernel */
wb_status wb_cuda_mlp_impl(wb_op_call *c); /* the dual GEMM, then the down linear */

#endif
