/* plugin_internal.h: what the plugin's files share (plugin.c, plugin_trace.c, kernels.cu).
 * Hidden inside libwb_cuda.so: the only exported symbol is wb_cuda_plugin. */
#ifndef WB_PLUGIN_INTERNAL_H
#define WB_PLUGIN_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "plugin_common.h"
#include "wb_cuda_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

extern int wbcu_ready;           /* the device is initialised (plugin.c) */
extern cudaStream_t wbcu_stream; /* the one stream every launch goes to */

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
