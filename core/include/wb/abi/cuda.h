/* wb/abi/cuda.h: the C interface between libwb (core/cuda/cuda_backend.c) and the CUDA plugin
 * libwb_cuda.so. A contract the core owns (core/include/wb/abi/, the only folder of the core a
 * kernel or plugin includes): the plugin includes it, and the core includes no header of the
 * plugin's.
 *
 * The plugin is a CMake MODULE that libwb dlopens at the first use of device "cuda", so the
 * workbench executable links no CUDA library and starts on machines without a driver or GPU.
 * The plugin knows nothing of tensors, Lua or the profiler: it moves bytes, runs cuBLASLt GEMMs
 * and our own kernels on raw device pointers (all on one non-blocking stream), captures that
 * stream into CUDA graphs, and hands CUPTI's activity records back in a plain form. The core
 * owns shapes, views, op semantics, error prefixes and the trace.
 *
 * Every function returning int returns 0 on success; on failure, last_error() says why. */
#ifndef WB_CUDA_ABI_H
#define WB_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

#include <wb/abi/act_list.h>
#include <wb/abi/types.h>
#include <wb/abi/arith_list.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WB_CUDA_ABI_VERSION 5
#define WB_CUDA_MAX_DIMS    8 /* = WB_MAX_DIMS */

/* Element types (wb/abi/types.h, as wb_dtype's). */
enum { WB_CU_F32 = WB_ABI_F32, WB_CU_BF16 = WB_ABI_BF16 };

/* Why init failed (so the core can say "no driver" / "no device"). */
enum { WB_CU_INIT_OK = 0, WB_CU_INIT_NO_DRIVER, WB_CU_INIT_NO_DEVICE, WB_CU_INIT_ERROR };

enum { WB_CU_COPY_H2D = 0, WB_CU_COPY_D2H, WB_CU_COPY_D2D };

/* Activations in a GEMM's epilogue (wb/abi/types.h, as the core's wb_activation; one vocabulary:
 * "gelu_tanh" is cuBLASLt's GELU epilogue; the erf form has no cuBLASLt epilogue). */
enum {
    WB_CU_ACT_NONE = WB_ABI_ACT_NONE,
    WB_CU_ACT_GELU_TANH = WB_ABI_ACT_GELU_TANH,
    WB_CU_ACT_GELU_ERF = WB_ABI_ACT_GELU_ERF
};

/* Elementwise ops of the generic strided kernel: four of the plugin's own, then one per op of the
 * lists (<wb/abi/arith_list.h>: a op b, then op a; <wb/abi/act_list.h>: the activations),
 * whose math is the list's CUDA column and whose kernel is wb_<name>_kernel. */
#define WB_CU_EW_LISTED(ID, ...) WB_CU_EW_##ID,
enum {
    WB_CU_EW_COPY = 0, /* out = a (also converts dtype) */
    WB_CU_EW_FILL,     /* out = value */
    WB_CU_EW_GELU_TANH,
    WB_CU_EW_GELU_ERF,
    WB_BINARY_LIST(WB_CU_EW_LISTED) WB_ARITH_UNARY_LIST(WB_CU_EW_LISTED) WB_ACT_LIST(WB_CU_EW_LISTED) WB_CU_EW_COUNT
};
#undef WB_CU_EW_LISTED
/* The binary ops' codes are the run after GELU_ERF: whether an op reads b. */
#define WB_CU_EW_ONE(...) +1
enum { WB_CU_EW_FIRST_BINARY = WB_CU_EW_GELU_ERF + 1, WB_CU_EW_BINARY_COUNT = 0 WB_BINARY_LIST(WB_CU_EW_ONE) };
#undef WB_CU_EW_ONE
#define WB_CU_EW_IS_BINARY(op) ((op) >= WB_CU_EW_FIRST_BINARY && (op) < WB_CU_EW_FIRST_BINARY + WB_CU_EW_BINARY_COUNT)

typedef struct wb_cuda_info {
    char name[256];
    int device_count;
    int cc_major, cc_minor;
    int sm_count;
    size_t total_mem;
    int runtime_version, driver_version; /* 13000 = 13.0 */
    size_t cublaslt_version;
    int cupti_version;
    double mem_clock_khz, bus_width_bits; /* peak bandwidth = 2 * clock * width / 8 */
    double clock_khz;                     /* SM clock */
} wb_cuda_info;

/* One GEMM in cuBLASLt's column-major terms:
 *   D[m, n] = op(A)[m, k] * op(B)[k, n] (+ bias[m]) (then GELU),  ld in elements.
 * All operands share `dtype`; accumulation and alpha/beta are f32. */
typedef struct wb_cuda_gemm {
    int dtype;
    int64_t m, n, k;
    int transa, transb; /* 0: N, 1: T */
    const void *a;
    int64_t lda;
    const void *b;
    int64_t ldb;
    void *d;
    int64_t ldd;
    const void *bias; /* m elements added in the epilogue, or NULL */
    int activation;   /* WB_CU_ACT_NONE or WB_CU_ACT_GELU_TANH, applied after the bias */
} wb_cuda_gemm;

/* A strided elementwise launch: out (ndim, shape, strides) = op(a, b) with each input read
 * through its own strides (0 for broadcast dims). Strides in elements. */
typedef struct wb_cuda_ew {
    int op;
    int ndim;
    int64_t shape[WB_CUDA_MAX_DIMS];
    void *out;
    int out_dtype;
    int64_t out_stride[WB_CUDA_MAX_DIMS];
    const void *a;
    int a_dtype;
    int64_t a_stride[WB_CUDA_MAX_DIMS];
    const void *b; /* binary ops */
    int b_dtype;
    int64_t b_stride[WB_CUDA_MAX_DIMS];
    double value; /* fill */
} wb_cuda_ew;

/* The fused GeGLU pointwise kernel: out[r, c] = gelu_tanh(gate[r, c]) * up[r, c], rows with
 * their own leading dimensions (elements); out is contiguous [rows, cols]. */
typedef struct wb_cuda_geglu {
    int dtype;
    int64_t rows, cols;
    const void *gate;
    int64_t ld_gate;
    const void *up;
    int64_t ld_up;
    void *out;
} wb_cuda_geglu;

/* Which GeGLU kernel a launch runs: the 16-byte one ("bf16x8" / "f32x4": wb_geglu_bf16x8,
 * wb_geglu_f32x4) when every row start is 16-byte aligned and the width divides, else "scalar".
 * One rule for the launcher and for the kernel kinds the core records. */
static inline const char *wb_cuda_geglu_variant(const wb_cuda_geglu *g) {
    int64_t es = g->dtype == WB_CU_BF16 ? 2 : 4, vec = 16 / es;
    int aligned = ((uintptr_t)g->gate & 15u) == 0 && ((uintptr_t)g->up & 15u) == 0 && ((uintptr_t)g->out & 15u) == 0;
    if (g->cols % vec == 0 && aligned && (g->ld_gate * es) % 16 == 0 && (g->ld_up * es) % 16 == 0)
        return g->dtype == WB_CU_BF16 ? "bf16x8" : "f32x4";
    return "scalar";
}

/* cuBLASLt's BIAS epilogue reads the bias with vector loads: an under-aligned bias pointer has
 * faulted (a sticky error that ends every later CUDA call), and no preference tells cuBLASLt about
 * it. So the bias is fused only when 16-byte aligned; otherwise the caller passes no bias and adds
 * it with a kernel of its own. One rule for the core (which decides) and the plugin (which refuses). */
static inline int wb_cuda_bias_fusable(const void *bias) { return ((uintptr_t)bias & 15u) == 0; }

/* The clock of the tracer's timestamps (trace_clock). */
enum { WB_CU_CLOCK_REALTIME = 0, WB_CU_CLOCK_MONOTONIC = 1 };

/* CUPTI activity records, flattened. Times are the tracer's timestamps (ns, on trace_clock());
 * 0 means CUPTI could not collect the time. */
enum {
    WB_CU_REC_KERNEL = 0,
    WB_CU_REC_MEMCPY,
    WB_CU_REC_MEMSET,
    WB_CU_REC_RUNTIME,
    WB_CU_REC_DRIVER,
    WB_CU_REC_SYNC,
    WB_CU_REC_GRAPH,
    WB_CU_REC_EXTERNAL, /* correlation -> external_id (our op's correlation id) */
};

/* What an API record did, from its callback id. */
enum { WB_CU_API_OTHER = 0, WB_CU_API_LAUNCH, WB_CU_API_OCCUPANCY, WB_CU_API_SYNC, WB_CU_API_GRAPH_LAUNCH };

typedef struct wb_cuda_record {
    int kind;
    const char *name; /* kernel name (CUPTI's shared string), API function name, or a copy kind */
    uint64_t start_ns, end_ns;
    uint32_t correlation;
    uint64_t external_id;
    uint32_t device, stream, thread;
    int cbid;     /* API records: the callback id */
    int api_kind; /* API records: WB_CU_API_* */
    int grid[3], block[3];
    uint64_t bytes;
    uint32_t graph_id, graph_node_id;
} wb_cuda_record;

typedef void (*wb_cuda_record_fn)(void *user, const wb_cuda_record *rec);

/* Generated pointwise kernels (wb.compile's code generation). The core writes each kernel as CUDA
 * C: `extern "C" __global__ void <name>(wb_cuda_poi_args a)`, one thread per output element in a
 * grid-stride loop. Its only parameter, passed by value, is the output as [rows, cols] (cols
 * innermost, contiguous) and per input the element strides of the outer dimensions; along cols an
 * input is read with stride 1 or 0 (broadcast), fixed in the source. The layout is the host
 * kernels' wb_poi_args (the core asserts it), so both generators share the index math. */
#define WB_CUDA_POI_MAX_INPUTS 5
typedef struct wb_cuda_poi_args {
    int64_t rows, cols;
    int outer;                                                /* outer dimensions, rows = their product */
    int64_t shape[WB_CUDA_MAX_DIMS];                          /* sizes of the outer dimensions */
    int64_t stride[WB_CUDA_POI_MAX_INPUTS][WB_CUDA_MAX_DIMS]; /* per input, along each outer dimension */
    const void *in[WB_CUDA_POI_MAX_INPUTS];
    void *out;
    int64_t parallel_min; /* host kernels only: threads from this many elements */
} wb_cuda_poi_args;

/* How the plugin compiles generated kernels (codegen_init). */
typedef struct wb_cuda_codegen_info {
    char compiler[96]; /* "NVRTC 13.0": with arch, part of the core's cache key */
    char arch[16];     /* the device's architecture, "sm_90" */
    int host_kernels;  /* 1: the plugin runs generated kernels on the host (the mock plugin): codegen_load
                          needs the host build of each kernel; 0: the CUDA image is all it runs */
} wb_cuda_codegen_info;

/* The handshake: what the plugin was built with, compared member by member with the core's own
 * (a plugin from another build says which struct or enum differs instead of misreading memory). */
typedef struct wb_cuda_abi_layout {
    uint32_t api, info, gemm, ew, geglu, record, poi, codegen; /* sizeof each struct */
    uint32_t enums;                              /* WB_CUDA_ENUM_FINGERPRINT */
} wb_cuda_abi_layout;

/* The enum values of this header folded into one number (each weighted by its own prime, so a
 * renumbered or swapped value changes it); a constant expression, usable in static initialisers. */
#define WB_CUDA_ENUM_FINGERPRINT                                                                                       \
    ((uint32_t)(2u * WB_CUDA_MAX_DIMS + 3u * WB_CU_F32 + 5u * WB_CU_BF16 + 7u * WB_CU_INIT_NO_DRIVER +                \
                11u * WB_CU_INIT_ERROR + 13u * WB_CU_COPY_D2H + 17u * WB_CU_COPY_D2D + 19u * WB_CU_ACT_GELU_TANH +    \
                23u * WB_CU_ACT_GELU_ERF + 29u * WB_CU_EW_NEG + 31u * WB_CU_EW_GELU_ERF + 37u * WB_CU_EW_ADD +       \
                41u * WB_CU_EW_DIV + 43u * WB_CU_EW_FILL + 47u * WB_CU_EW_COUNT + 53u * WB_CU_REC_MEMCPY +           \
                59u * WB_CU_REC_RUNTIME + 61u * WB_CU_REC_DRIVER + 67u * WB_CU_REC_GRAPH + 71u * WB_CU_REC_EXTERNAL + \
                73u * WB_CU_API_LAUNCH + 79u * WB_CU_API_SYNC + 83u * WB_CU_API_GRAPH_LAUNCH +                      \
                89u * WB_CU_CLOCK_MONOTONIC))

struct wb_cuda_api;
#define WB_CUDA_ABI_LAYOUT                                                                                             \
    {(uint32_t)sizeof(struct wb_cuda_api), (uint32_t)sizeof(wb_cuda_info),   (uint32_t)sizeof(wb_cuda_gemm),          \
     (uint32_t)sizeof(wb_cuda_ew),         (uint32_t)sizeof(wb_cuda_geglu), (uint32_t)sizeof(wb_cuda_record),         \
     (uint32_t)sizeof(wb_cuda_poi_args),   (uint32_t)sizeof(wb_cuda_codegen_info), WB_CUDA_ENUM_FINGERPRINT}

typedef struct wb_cuda_api {
    int abi_version;
    wb_cuda_abi_layout layout; /* WB_CUDA_ABI_LAYOUT as the plugin was built */
    const char *(*last_error)(void);

    /* Device discovery: call first; nothing else initialises unless it succeeds. */
    int (*init)(int *why); /* *why: WB_CU_INIT_* */
    int (*info)(wb_cuda_info *out);

    /* Memory: a caching allocator over cudaMalloc (never managed memory). */
    int (*alloc)(void **ptr, size_t nbytes);
    void (*free)(void *ptr, size_t nbytes);
    int (*empty_cache)(void);
    void (*memory_stats)(size_t *allocated, size_t *reserved, size_t *peak);
    /* Copies and synchronisation on the plugin's stream; H2D and D2H return when done. */
    int (*copy)(void *dst, const void *src, size_t nbytes, int kind);
    int (*synchronize)(void);

    /* Kernels, queued on the stream. */
    int (*gemm)(const wb_cuda_gemm *g);
    int (*elementwise)(const wb_cuda_ew *e);
    int (*geglu)(const wb_cuda_geglu *g);

    /* Graphs: capture of the stream between begin and end (thread-local mode). */
    int (*graph_begin)(void);
    /* Ends the capture. *exec NULL: instantiates a new executable graph. *exec set: updates it
     * in place (cudaGraphExecUpdate), re-instantiating when the topology changed. */
    int (*graph_end)(void **exec);
    int (*graph_launch)(void *exec);
    void (*graph_destroy)(void *exec);

    /* CUPTI tracing. start enables the activity kinds; flush delivers every buffered record
     * (after a synchronize) through fn; stop disables. dropped counts lost records. */
    int (*trace_start)(void);
    int (*trace_flush)(wb_cuda_record_fn fn, void *user, uint64_t *dropped);
    void (*trace_stop)(void);
    void (*trace_push_correlation)(uint64_t id); /* our op's correlation id for the next launches */
    void (*trace_pop_correlation)(void);
    int (*timestamp)(uint64_t *ns); /* the tracer's clock now */
    int (*trace_clock)(void);       /* WB_CU_CLOCK_*: MONOTONIC when CUPTI stamps with the profiler's clock */

    /* (optional, all or none) Generated kernels. The disk cache is the core's: the plugin turns
     * source into an image and an image into a loaded kernel, and launches it on its stream (so
     * it is captured in graphs and traced under its own name, like the other kernels).
     * init: -1 when the plugin cannot compile (no NVRTC), last_error() says why; ask once.
     * compile: CUDA C defining `name` -> an image for this device (*image from malloc, released
     *   with image_free); on failure -1, the compiler's log in log (NUL-terminated, cut at loglen)
     *   and last_error() saying what failed.
     * load: the image's kernel `name` (loaded for the process's life). host_fn: the same kernel
     *   built for the host, taking a wb_cuda_poi_args; used by plugins with host_kernels only.
     * launch: one launch over args->rows * args->cols elements, queued on the stream. */
    int (*codegen_init)(wb_cuda_codegen_info *out);
    int (*codegen_compile)(const char *source, const char *name, const char *options, void **image, size_t *size,
                           char *log, size_t loglen);
    void (*codegen_image_free)(void *image);
    int (*codegen_load)(const void *image, size_t size, const char *name, void (*host_fn)(const void *args),
                        void **kernel);
    int (*codegen_launch)(void *kernel, const wb_cuda_poi_args *args);
} wb_cuda_api;

/* Sizes as this version lays them out on x86-64 Linux: changing a struct without bumping
 * WB_CUDA_ABI_VERSION fails to compile here, on both sides of the ABI. */
#ifdef __cplusplus
#define WB_CUDA_STATIC_ASSERT static_assert
#else
#define WB_CUDA_STATIC_ASSERT _Static_assert
#endif
#if defined(__x86_64__) || defined(__aarch64__)
WB_CUDA_STATIC_ASSERT(sizeof(wb_cuda_gemm) == 104, "wb_cuda_gemm changed: bump WB_CUDA_ABI_VERSION");
WB_CUDA_STATIC_ASSERT(sizeof(wb_cuda_ew) == 320, "wb_cuda_ew changed: bump WB_CUDA_ABI_VERSION");
WB_CUDA_STATIC_ASSERT(sizeof(wb_cuda_geglu) == 64, "wb_cuda_geglu changed: bump WB_CUDA_ABI_VERSION");
WB_CUDA_STATIC_ASSERT(sizeof(wb_cuda_record) == 112, "wb_cuda_record changed: bump WB_CUDA_ABI_VERSION");
WB_CUDA_STATIC_ASSERT(sizeof(wb_cuda_info) == 328, "wb_cuda_info changed: bump WB_CUDA_ABI_VERSION");
WB_CUDA_STATIC_ASSERT(sizeof(wb_cuda_poi_args) == 464, "wb_cuda_poi_args changed: bump WB_CUDA_ABI_VERSION");
WB_CUDA_STATIC_ASSERT(sizeof(wb_cuda_codegen_info) == 116, "wb_cuda_codegen_info changed: bump WB_CUDA_ABI_VERSION");
WB_CUDA_STATIC_ASSERT(sizeof(wb_cuda_api) == 264, "wb_cuda_api changed: bump WB_CUDA_ABI_VERSION");
#endif

/* The one symbol the plugin exports. Returns NULL when the ABI version differs; the caller then
 * compares `layout` with its own WB_CUDA_ABI_LAYOUT. */
typedef const wb_cuda_api *(*wb_cuda_plugin_fn)(int abi_version);
#define WB_CUDA_PLUGIN_SYMBOL "wb_cuda_plugin"

#ifdef __cplusplus
}
#endif
#endif
