/* wb/codegen.h (floor ops): generated pointwise kernels (wb.compile's code generation). The source is written
 * by the compiler in Lua (scripts/wb/codegen.lua); here it is compiled with the system C compiler
 * (CC, else cc) into a shared object cached on disk by a hash of compiler, flags and source,
 * loaded with dlopen, and launched as the op "generated" through the dispatcher, so the profiler
 * and graph capture see it like any kernel. A device with a compiler of its own (cuda: NVRTC in
 * the plugin, through the backend table) gets its CUDA C source compiled into an image cached
 * the same way. Loaded objects stay loaded for the process's life. */
#ifndef WB_CODEGEN_PUBLIC_H
#define WB_CODEGEN_PUBLIC_H

#include <wb/kernel.h>
#include <wb/wb.h>

struct wb_poi_args; /* what a generated kernel receives (the CPU kernels' generated.h) */

typedef struct wb_codegen_kernel {
    wb_device device;
    void (*fn)(const struct wb_poi_args *a); /* the host build (cpu, and devices with host_kernels), or NULL */
    void *device_kernel;                     /* the device's loaded kernel (not cpu), or NULL */
    const wb_kernel_kind *kind;              /* wb_poi_fused_<ops>_<n>, its ops in kind->ops */
    wb_dtype dtype;
    int nin;
    unsigned inner_broadcast; /* bit i: input i is read with stride 0 along the last dimension */
    char source_path[640];    /* the cached source, for messages */
    int compiled;             /* 1: the compiler ran; 0: the cache had it */
    int gemm_epilogue;        /* 1: fn is a wb_gemm_epilogue_fn, launched by op generated_gemm */
    int gemm_bias;            /* 1 (an epilogue's): the op takes the GEMM's bias after the epilogue's inputs and
                               * the GEMM's store adds it, as an unfused linear's does; the source never reads it */
} wb_codegen_kernel;

/* The text every generated source starts with (wb_kernels/generated.h, the kernels' math). */
const char *wb_codegen_prelude(void);
/* The compiler command and flags used for the active ISA, as one line (for messages and the hash). */
const char *wb_codegen_command(void);
/* Compiles (or finds in the cache) `source`, which defines `void <symbol>(const wb_poi_args *)`,
 * and fills *k's fn, kind (named by symbol, carrying ops), source_path and compiled. Errors: WB_ERR_UNSUPPORTED when no
 * C compiler can be run (the message says why), WB_ERR_ARGUMENT when the compiler rejected the source (its first error
 * line and the source's path), WB_ERR_UNSUPPORTED too when the cache folder is missing or refused (another user's, or
 * open to others: the message says why), WB_ERR_DEVICE when it cannot be written. */
wb_status wb_codegen_build(const char *symbol, const char *ops, const char *source, wb_codegen_kernel *k);
/* The same on a device with a compiler of its own: device_source (the device's language) is
 * compiled into an image cached under a hash of the target (compiler, architecture, options) and
 * the source, and loaded; host_source (the C of the same kernel) is built too when the device
 * runs host kernels (the mock plugin). Errors as wb_codegen_build's, WB_ERR_UNSUPPORTED when the
 * device has no compiler now (no NVRTC: the message says why). */
wb_status wb_codegen_build_device(wb_device device, const char *symbol, const char *ops, const char *device_source,
                                  const char *host_source, wb_codegen_kernel *k);
/* The device's compiler as one line ("NVRTC 13.0 sm_90 --fmad=false"), or NULL with the reason
 * in the error message. */
const char *wb_codegen_device_compiler(wb_device device);
/* Compiler runs and cache hits in this process (for tests and explain): C compiles and the
 * devices' compiles, counted apart. */
void wb_codegen_counts(long *compiles, long *hits);
void wb_codegen_device_counts(long *compiles, long *hits);
/* The cache folder: $WB_CACHE_DIR, else $XDG_CACHE_HOME/workbench, else ~/.cache/workbench (the
 * home folder from $HOME, else the password database); NULL when there is none (no shared
 * default: the code generator is then off). It must be this user's, mode 0700 (codegen_store.h). */
const char *wb_codegen_cache_dir(void);

/* out = the kernel applied to inputs (broadcast to out_shape): one launch of op "generated". */
wb_status wb_codegen_launch(const wb_codegen_kernel *k, int nin, wb_tensor **in, int ndim, const int64_t *shape,
                            wb_tensor **out);

/* out = (x W^T [+ bias]) with the generated epilogue k applied per block of the output, its inputs `in`
 * broadcast to the output's shape, then (k->gemm_bias) the bias, [N]: one launch of op "generated_gemm"
 * (core/cpu/codegen_gemm.c, cpu, f32). */
wb_status wb_codegen_gemm_launch(const wb_codegen_kernel *k, wb_tensor *x, wb_tensor *w, int nin, wb_tensor **in,
                                 wb_tensor **out);

#endif
