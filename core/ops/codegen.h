/* codegen.h: what the core's own files share about generated kernels beyond their public face
 * (<wb/codegen.h>): the launch arguments of a call and the op table's entries. */
#ifndef WB_CODEGEN_H
#define WB_CODEGEN_H

#include <wb_kernels/generated.h>
#include <wb/codegen.h>

#include "op.h"

/* The launch arguments of a generated kernel for the call (shared by the devices); inputs that the
 * source reads with stride 1 along the last dimension but are laid out otherwise are made
 * contiguous into tmp[i] (freed by the caller). */
wb_status wb_codegen_args(const wb_op_call *c, wb_poi_args *a, wb_tensor **tmp);

/* For op_table.c */
wb_status wb_shape_generated_gemm(wb_op_call *c);
double wb_flops_generated_gemm(const wb_op_call *c);
double wb_bytes_generated_gemm(const wb_op_call *c);
wb_status wb_cpu_generated_gemm_impl(wb_op_call *c);
wb_status wb_shape_generated(wb_op_call *c);
double wb_bytes_generated(const wb_op_call *c);
wb_status wb_cpu_generated_impl(wb_op_call *c);

#endif
