/* wb/abi/types.h: the values the core and every plugin or peer agree on, declared once: element
 * types and the GEMM epilogue's activations. The core's wb_dtype and wb_activation (wb.h), the
 * CUDA plugin's ABI (wb/abi/cuda.h) and the oneDNN peer's (wb/abi/dnnl_peer.h) take their values
 * from here, so a value crossing a dlopen'ed boundary means the same on both sides. */
#ifndef WB_ABI_TYPES_H
#define WB_ABI_TYPES_H

/* Element types: f32, and bf16 storage (every kernel computes in f32 and rounds once). */
enum { WB_ABI_F32 = 0, WB_ABI_BF16 = 1 };

/* Activations a GEMM's epilogue applies after the bias (the first of the core's wb_activation). */
enum { WB_ABI_ACT_NONE = 0, WB_ABI_ACT_GELU_TANH = 1, WB_ABI_ACT_GELU_ERF = 2 };

#endif
