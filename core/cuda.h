/* cuda.h: the core's side of the CUDA backend (internal to libwb). core/cuda.c loads the plugin
 * (kernels/cuda/, see wb_cuda_api.h) with dlopen at first use and implements the ops on device
 * "cuda" in terms of it; storage.c, graph.c and profiler.c call in here. */
#ifndef WB_CUDA_H
#define WB_CUDA_H

#include "../kernels/cuda/wb_cuda_api.h"
#include "op.h"

/* The plugin, loaded and initialised, or NULL with the reason in the error message. */
const wb_cuda_api *wb_cuda_api_get(void);
/* WB_OK when device "cuda" can run ops; otherwise why not (plugin not built / cannot load,
 * no driver, no device). Tries once; the answer is cached. */
wb_status wb_cuda_check(void);
/* The device description (NULL unless available). */
const wb_cuda_info *wb_cuda_info_get(void);

wb_status wb_cuda_alloc(size_t nbytes, void **ptr);
void wb_cuda_free(void *ptr, size_t nbytes);

/* Op implementations on device cuda (op_table.c). */
wb_status wb_cuda_copy_impl(wb_op_call *c);
wb_status wb_cuda_fill_impl(wb_op_call *c);
wb_status wb_cuda_creation_impl(wb_op_call *c);
wb_status wb_cuda_binary_impl(wb_op_call *c);
wb_status wb_cuda_neg_impl(wb_op_call *c);
wb_status wb_cuda_gelu_impl(wb_op_call *c);
wb_status wb_cuda_geglu_impl(wb_op_call *c);
wb_status wb_cuda_mm_impl(wb_op_call *c);
wb_status wb_cuda_geglu_linear_impl(wb_op_call *c);
/* `to` for every pair of devices (and dtype changes). */
wb_status wb_to_impl(wb_op_call *c);
wb_status wb_shape_to(wb_op_call *c);

/* Profiler glue: CUPTI on while a session records device activity on cuda. */
int wb_cuda_trace_start(void); /* 1 when tracing, 0 when not (the message says why) */
void wb_cuda_trace_stop(void);
void wb_cuda_trace_push(uint32_t op_id);
void wb_cuda_trace_pop(void);
int wb_cuda_tracing(void);
/* CUPTI clock minus CLOCK_MONOTONIC, in ns (measured when tracing starts). */
int64_t wb_cuda_clock_offset(void);

#endif
