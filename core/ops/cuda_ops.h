/* cuda_ops.h: the op table's column for device "cuda" (op_table.c), implemented one floor up in
 * core/cuda/cuda_ops.c. Declared here, in the table's floor, so the table names them without an
 * include running up: the table's row is how the dispatcher reaches them (a registration). */
#ifndef WB_CUDA_OPS_H
#define WB_CUDA_OPS_H

#include "op.h"

wb_status wb_cuda_copy_impl(wb_op_call *c);
wb_status wb_cuda_fill_impl(wb_op_call *c);
wb_status wb_cuda_creation_impl(wb_op_call *c);
wb_status wb_cuda_binary_impl(wb_op_call *c);
wb_status wb_cuda_unary_impl(wb_op_call *c); /* neg and the activations */
wb_status wb_cuda_gelu_impl(wb_op_call *c);
wb_status wb_cuda_geglu_impl(wb_op_call *c);
wb_status wb_cuda_mm_impl(wb_op_call *c);
wb_status wb_cuda_geglu_linear_impl(wb_op_call *c);
wb_status wb_cuda_generated_impl(wb_op_call *c);
wb_status wb_cuda_reduce_impl(wb_op_call *c); /* no kernel yet: says so */

#endif
