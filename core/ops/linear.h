/* linear.h: shape rules, work counts and CPU implementations of the GEMM family and the
 * GELU activations (for op_table.c). */
#ifndef WB_OPS_LINEAR_H
#define WB_OPS_LINEAR_H

#include "op.h"

wb_status wb_shape_mm(wb_op_call *c);
wb_status wb_shape_addmm(wb_op_call *c);
wb_status wb_shape_matmul(wb_op_call *c);
wb_status wb_shape_linear(wb_op_call *c);
wb_status wb_shape_geglu_linear(wb_op_call *c);
wb_status wb_shape_geglu(wb_op_call *c);
/* The output's rows: the product of every dimension but the last (the GEMM family's m). */
double wb_out_rows(const wb_op_call *c);
double wb_flops_mm(const wb_op_call *c);
double wb_bytes_mm(const wb_op_call *c);
double wb_flops_geglu_linear(const wb_op_call *c);
double wb_bytes_geglu_linear(const wb_op_call *c);
double wb_flops_gelu(const wb_op_call *c);
double wb_flops_geglu(const wb_op_call *c);
wb_status wb_cpu_mm_impl(wb_op_call *c);
wb_status wb_cpu_geglu_linear_impl(wb_op_call *c);
wb_status wb_cpu_gelu_impl(wb_op_call *c);
wb_status wb_cpu_geglu_impl(wb_op_call *c);
wb_status wb_matmul_impl(wb_op_call *c);
wb_status wb_linear_impl(wb_op_call *c);

/* Weights packed once for the active ISA, keyed by storage identity and version (see
 * core/cpu/prepack.c). bf16: the storage holds bf16 and is widened to f32 while packing. Returns
 * NULL when the packing does not fit the cache: pack per call then. */
const float *wb_prepack_get(const void *isa, wb_storage *b, int64_t b_offset, int64_t k, int64_t n, int64_t rsb,
                            int64_t csb, wb_storage *b_up, int64_t up_offset, int bf16);
/* Drops the entries made from a storage that is being freed. */
void wb_prepack_forget(uint64_t storage_id);
/* Bytes held by the cache and entries in it (for tests). */
size_t wb_prepack_bytes(int *entries);

/* A stable copy of a kernel name built at run time ("wb_sgemm_avx2_6x16_tn_bias"). */
const char *wb_intern(const char *name);

#endif
