/* cuda_plugin.h: what the cuda backend's own files share (internal to libwb): the loaded plugin
 * (the op implementations on device "cuda" are declared for op_table.c in cuda_ops.h). Everything
 * else reaches the device through its backend table (backend.h). */
#ifndef WB_CUDA_PLUGIN_H
#define WB_CUDA_PLUGIN_H

#include <stddef.h>

#include <wb_kernels/generated.h>

#include <wb/abi/cuda.h>
#include "cuda_ops.h"
#include "op.h"

_Static_assert(WB_CUDA_MAX_DIMS == WB_MAX_DIMS, "the plugin's dimension limit is the core's");
_Static_assert((int)WB_CU_F32 == (int)WB_F32 && (int)WB_CU_BF16 == (int)WB_BF16, "plugin dtypes are wb_dtype's");
_Static_assert((int)WB_CU_ACT_NONE == (int)WB_ACT_NONE && (int)WB_CU_ACT_GELU_TANH == (int)WB_ACT_GELU_TANH &&
                   (int)WB_CU_ACT_GELU_ERF == (int)WB_ACT_GELU_ERF,
               "plugin activations are wb_activation's");
/* A generated kernel's arguments cross the ABI as the host kernels' own struct. */
_Static_assert(sizeof(wb_cuda_poi_args) == sizeof(wb_poi_args) && WB_CUDA_POI_MAX_INPUTS == WB_POI_MAX_INPUTS &&
                   offsetof(wb_cuda_poi_args, stride) == offsetof(wb_poi_args, stride) &&
                   offsetof(wb_cuda_poi_args, in) == offsetof(wb_poi_args, in) &&
                   offsetof(wb_cuda_poi_args, parallel_min) == offsetof(wb_poi_args, parallel_min),
               "wb_cuda_poi_args is wb_poi_args");

/* The plugin, loaded and initialised, or NULL with the reason in the error message. */
const wb_cuda_api *wb_cuda_api_get(void);
/* WB_OK when device "cuda" can run ops; otherwise why not (plugin not built / cannot load,
 * no driver, no device). Tries once; the answer is cached. */
wb_status wb_cuda_check(void);
/* The plugin's last error as the core's error: "<what>: <reason>". */
wb_status wb_cuda_plugin_error(const char *what);

#endif
