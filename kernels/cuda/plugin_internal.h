/* plugin_internal.h: what the plugin's files share (plugin.c, plugin_trace.c,
 * plugin_codegen.c, kernels.cu).
 * Hidden inside libwb_cuda.so: the only exported symbol is wb_cuda_plugin. */
#ifndef WB_PLUGIN_INTERNAL_H
#define WB_PLUGIN_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "plugin_common.h"
#include <wb/abi/cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

extern int wbcu_ready;           /* the device is initialised (plugin.c) */
extern cudaStream_t wbcu_stream; /* the one stream every launch goes to */
extern wb_cuda_info wbcu_dev_info; /* what init found (plugin.c) */

/* Generated kernels through NVRTC (plugin_codegen.c): the ABI's codegen_* members. */
int wbcu_codegen_init(wb_cuda_codegen_info *out);
int wbcu_codegen_compile(const char *source, const char *name, const char *options, void **image, size_t *size,
                         char *log, size_t loglen);
void wbcu_codegen_image_free(void *image);
int wbcu_codegen_load(const void *image, size_t size, const char *name, void (*host_fn)(const void *args),
                      void **kernel);
int wbcu_codegen_launch(void *kernel, const wb_cuda_poi_args *args);

/* CUPTI tracing (plugin_trace.c): the ABI's trace_* members. */
int wbcu_trace_start(void);
void wbcu_trace_stop(void);
int wbcu_trace_flush(wb_cuda_record_fn fn, void *user, uint64_t *dropped);
void wbcu_push_correlation(uint64_t id);
void wbcu_pop_correlation(void);
int wbcu_timestamp(uint64_t *ns);
int wbcu_trace_clock(void);

/* Our kernels (kernels.cu). */
int wbcu_launch_elementwise(const wb_cuda_ew *w, cudaStream_t stream, int sm_count);
int wbcu_launch_geglu(const wb_cuda_geglu *g, cudaStream_t stream, int sm_count);
const char *wbcu_demangle(const char *name);

#ifdef __cplusplus
}
#endif
#endif
