/* plugin.c: libwb_cuda.so, the host side of the CUDA backend (see core/abi/wb_cuda_abi.h).
 *
 * One device (0), one non-blocking stream, one cuBLASLt handle with a 32 MiB workspace made once,
 * a caching allocator over cudaMalloc, stream capture into CUDA graphs; the CUPTI activity
 * tracer is plugin_trace.c. Nothing is initialised until cudaGetDeviceCount succeeds with a device: without a
 * driver the plugin loads, says why, and stays inert. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_internal.h"

#define WORKSPACE_BYTES ((size_t)32 << 20)

static __thread char last_error[512];
int wbcu_ready;
cudaStream_t wbcu_stream;
static cublasLtHandle_t lt;
static void *workspace;
static wb_cuda_info dev_info;

static const char *plugin_last_error(void) { return last_error; }

int wbcu_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}

static int cuda_fail(cudaError_t e, const char *what) {
    return wbcu_fail("%s failed: %s (%s, error %d)", what, cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
}

static int lt_fail(cublasStatus_t s, const char *what) {
    return wbcu_fail("%s failed: cuBLASLt status %d (%s)", what, (int)s, cublasLtGetStatusString(s));
}

#define CU(call, what)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) return cuda_fail(e_, what);                                                             \
    } while (0)

/* ---- discovery ------------------------------------------------------------------------ */

static int plugin_init(int *why) {
    *why = WB_CU_INIT_OK;
    if (wbcu_ready) return 0;
    int count = 0; /* not written when the call fails */
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || (e == cudaSuccess && count == 0)) {
        int driver = 0;
        cudaDriverGetVersion(&driver);
        *why = (e == cudaErrorInsufficientDriver || driver == 0) ? WB_CU_INIT_NO_DRIVER : WB_CU_INIT_NO_DEVICE;
        if (*why == WB_CU_INIT_NO_DRIVER)
            return wbcu_fail("no NVIDIA driver: cudaGetDeviceCount returned %s (%d); the plugin needs libcuda.so.1 "
                             "from a driver that supports CUDA 13",
                             cudaGetErrorName(e), (int)e);
        return wbcu_fail("no CUDA device: the driver (version %d) sees no GPU (%s)", driver,
                         e == cudaSuccess ? "0 devices" : cudaGetErrorName(e));
    }
    if (e != cudaSuccess) {
        *why = WB_CU_INIT_ERROR;
        return cuda_fail(e, "cudaGetDeviceCount");
    }
    *why = WB_CU_INIT_ERROR;
    CU(cudaSetDevice(0), "cudaSetDevice(0)");
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    memset(&dev_info, 0, sizeof dev_info);
    snprintf(dev_info.name, sizeof dev_info.name, "%s", prop.name);
    dev_info.device_count = count;
    dev_info.cc_major = prop.major;
    dev_info.cc_minor = prop.minor;
    dev_info.sm_count = prop.multiProcessorCount;
    dev_info.total_mem = prop.totalGlobalMem;
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0);
    dev_info.mem_clock_khz = clock_khz;
    int sm_khz = 0;
    cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, 0);
    dev_info.clock_khz = sm_khz;
    dev_info.bus_width_bits = prop.memoryBusWidth;
    cudaRuntimeGetVersion(&dev_info.runtime_version);
    cudaDriverGetVersion(&dev_info.driver_version);
    dev_info.cublaslt_version = cublasLtGetVersion();
    uint32_t cupti = 0;
    if (cuptiGetVersion(&cupti) == CUPTI_SUCCESS) dev_info.cupti_version = (int)cupti;

    CU(cudaStreamCreateWithFlags(&wbcu_stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cublasStatus_t s = cublasLtCreate(&lt);
    if (s != CUBLAS_STATUS_SUCCESS) return lt_fail(s, "cublasLtCreate");
    CU(cudaMalloc(&workspace, WORKSPACE_BYTES), "cudaMalloc of the 32 MiB cuBLASLt workspace");
    wbcu_ready = 1;
    *why = WB_CU_INIT_OK;
    return 0;
}

static int plugin_info(wb_cuda_info *out) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    *out = dev_info;
    return 0;
}

/* ---- caching allocator ---------------------------------------------------------------- *
 * Blocks are kept by size class (8 per power of two, 512-byte granularity) on host-side free
 * lists; a miss calls cudaMalloc, and on out-of-memory the cache is emptied and the call retried.
 * Freed blocks are reused only by later work on the same stream, so no event is needed. */
#define CLASS_STEPS 8
#define CLASS_COUNT (64 * CLASS_STEPS)
typedef struct block {
    void *ptr;
    size_t bytes;
    struct block *next;
} block;
static block *free_lists[CLASS_COUNT];
static size_t bytes_allocated, bytes_reserved, bytes_peak;

static int size_class(size_t bytes, size_t *class_bytes) {
    if (bytes <= 512) {
        *class_bytes = 512;
        return 0;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(bytes - 1));
    size_t base = (size_t)1 << e, step = base / CLASS_STEPS;
    size_t k = (bytes - base + step - 1) / step;
    *class_bytes = (base + k * step + 511) / 512 * 512;
    return e * CLASS_STEPS + (int)k - 1;
}

static int plugin_empty_cache(void) {
    if (!wbcu_ready) return 0;
    cudaStreamSynchronize(wbcu_stream);
    for (int c = 0; c < CLASS_COUNT; c++) {
        while (free_lists[c]) {
            block *b = free_lists[c];
            free_lists[c] = b->next;
            cudaFree(b->ptr);
            bytes_reserved -= b->bytes;
            free(b);
        }
    }
    return 0;
}

static int plugin_alloc(void **ptr, size_t nbytes) {
    *ptr = NULL;
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    size_t class_bytes;
    int c = size_class(nbytes ? nbytes : 1, &class_bytes);
    if (c < CLASS_COUNT && free_lists[c]) {
        block *b = free_lists[c];
        free_lists[c] = b->next;
        *ptr = b->ptr;
        free(b);
    } else {
        cudaError_t e = cudaMalloc(ptr, class_bytes);
        if (e == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            plugin_empty_cache();
            e = cudaMalloc(ptr, class_bytes);
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            return wbcu_fail("cudaMalloc of %zu bytes failed: %s (device has %zu of %zu bytes free)", class_bytes,
                             cudaGetErrorString(e), free_b, total_b);
        }
        bytes_reserved += class_bytes;
    }
    bytes_allocated += class_bytes;
    if (bytes_allocated > bytes_peak) bytes_peak = bytes_allocated;
    return 0;
}

static void plugin_free(void *ptr, size_t nbytes) {
    if (!ptr) return;
    size_t class_bytes;
    int c = size_class(nbytes ? nbytes : 1, &class_bytes);
    bytes_allocated -= class_bytes;
    block *b = malloc(sizeof *b);
    if (!b || c >= CLASS_COUNT) {
        free(b);
        cudaFree(ptr);
        bytes_reserved -= class_bytes;
        return;
    }
    b->ptr = ptr;
    b->bytes = class_bytes;
    b->next = free_lists[c];
    free_lists[c] = b;
}

static void plugin_memory_stats(size_t *allocated, size_t *reserved, size_t *peak) {
    *allocated = bytes_allocated;
    *reserved = bytes_reserved;
    *peak = bytes_peak;
}

/* ---- copies ----------------------------------------------------------------------------- */

static int plugin_copy(void *dst, const void *src, size_t nbytes, int kind) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    if (nbytes == 0) return 0;
    enum cudaMemcpyKind k = kind == WB_CU_COPY_H2D   ? cudaMemcpyHostToDevice
                            : kind == WB_CU_COPY_D2H ? cudaMemcpyDeviceToHost
                                                     : cudaMemcpyDeviceToDevice;
    CU(cudaMemcpyAsync(dst, src, nbytes, k, wbcu_stream), "cudaMemcpyAsync");
    /* Host buffers may be freed or read as soon as we return. */
    if (kind != WB_CU_COPY_D2D) CU(cudaStreamSynchronize(wbcu_stream), "cudaStreamSynchronize after a copy");
    return 0;
}

static int plugin_synchronize(void) {
    if (!wbcu_ready) return 0;
    CU(cudaStreamSynchronize(wbcu_stream), "cudaStreamSynchronize");
    return 0;
}

/* ---- cuBLASLt ------------------------------------------------------------------------- *
 * Descriptors and the heuristic's first choice are cached per (dtype, shape, transposes, leading
 * dimensions, epilogue, 16-byte alignment of the operands): a graph capture must find everything
 * ready, and descriptor creation plus a heuristic query cost more host time than the launch. */
typedef struct gemm_key {
    int dtype, transa, transb, activation, bias, aligned;
    int64_t m, n, k, lda, ldb, ldd;
} gemm_key;

typedef struct gemm_plan {
    gemm_key key;
    int used;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} gemm_plan;

#define PLAN_SLOTS 512
static gemm_plan plans[PLAN_SLOTS];

static uint64_t key_hash(const gemm_key *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static int plan_build(gemm_plan *pl, const gemm_key *k) {
    if (k->activation != WB_CU_ACT_NONE && k->activation != WB_CU_ACT_GELU_TANH)
        return wbcu_fail("cuBLASLt has no epilogue for activation %d (only the tanh GELU)", k->activation);
    cudaDataType_t t = k->dtype == WB_CU_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasStatus_t s = cublasLtMatmulDescCreate(&pl->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s) return lt_fail(s, "cublasLtMatmulDescCreate");
    cublasOperation_t ta = k->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = k->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    cublasLtEpilogue_t epi = k->activation == WB_CU_ACT_GELU_TANH
                                 ? (k->bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                                 : (k->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    s = cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (s) return lt_fail(s, "setting the cuBLASLt epilogue");
    /* Stored as op(A) before the transpose: rows x cols of the matrix in memory. */
    uint64_t ar = k->transa ? (uint64_t)k->k : (uint64_t)k->m, ac = k->transa ? (uint64_t)k->m : (uint64_t)k->k;
    uint64_t br = k->transb ? (uint64_t)k->n : (uint64_t)k->k, bc = k->transb ? (uint64_t)k->k : (uint64_t)k->n;
    if ((s = cublasLtMatrixLayoutCreate(&pl->la, t, ar, ac, k->lda)) ||
        (s = cublasLtMatrixLayoutCreate(&pl->lb, t, br, bc, k->ldb)) ||
        (s = cublasLtMatrixLayoutCreate(&pl->ld, t, (uint64_t)k->m, (uint64_t)k->n, k->ldd)))
        return lt_fail(s, "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t pref;
    if ((s = cublasLtMatmulPreferenceCreate(&pref))) return lt_fail(s, "cublasLtMatmulPreferenceCreate");
    uint64_t ws = WORKSPACE_BYTES;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t res[8];
    int found = 0;
    s = cublasLtMatmulAlgoGetHeuristic(lt, pl->desc, pl->la, pl->lb, pl->ld, pl->ld, pref, 8, res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s) return lt_fail(s, "cublasLtMatmulAlgoGetHeuristic");
    /* Fastest first; the first without split-K is preferred: a split-K algorithm may add a
     * reduction kernel (or a memset), and a linear is meant to be one kernel with its epilogue. */
    int first = -1;
    for (int i = 0; i < found; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        if (first < 0) first = i;
        int32_t splitk = 1;
        size_t written = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk,
                                                 &written) == CUBLAS_STATUS_SUCCESS &&
            splitk <= 1) {
            pl->algo = res[i].algo;
            return 0;
        }
    }
    if (first >= 0) {
        pl->algo = res[first].algo;
        return 0;
    }
    return wbcu_fail("cuBLASLt has no algorithm for %s GEMM m=%lld n=%lld k=%lld (%s%s, activation %d)",
                     k->dtype == WB_CU_BF16 ? "bf16" : "f32", (long long)k->m, (long long)k->n, (long long)k->k,
                     k->transa ? "t" : "n", k->transb ? "t" : "n", k->activation);
}

static void plan_destroy(gemm_plan *pl) {
    if (pl->desc) cublasLtMatmulDescDestroy(pl->desc);
    if (pl->la) cublasLtMatrixLayoutDestroy(pl->la);
    if (pl->lb) cublasLtMatrixLayoutDestroy(pl->lb);
    if (pl->ld) cublasLtMatrixLayoutDestroy(pl->ld);
    memset(pl, 0, sizeof *pl);
}

static int plugin_gemm(const wb_cuda_gemm *g) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    gemm_key k;
    memset(&k, 0, sizeof k); /* the hash reads the padding */
    k.dtype = g->dtype;
    k.transa = g->transa;
    k.transb = g->transb;
    k.activation = g->activation;
    k.bias = g->bias != NULL;
    k.aligned = aligned16(g->a) && aligned16(g->b) && aligned16(g->d) && (!g->bias || aligned16(g->bias));
    k.m = g->m;
    k.n = g->n;
    k.k = g->k;
    k.lda = g->lda;
    k.ldb = g->ldb;
    k.ldd = g->ldd;
    uint64_t h = key_hash(&k);
    gemm_plan *pl = NULL;
    for (int probe = 0; probe < 8; probe++) {
        gemm_plan *c = &plans[(h + (uint64_t)probe) % PLAN_SLOTS];
        if (c->used && !memcmp(&c->key, &k, sizeof k)) {
            pl = c;
            break;
        }
        if (!c->used) {
            pl = c;
            break;
        }
    }
    if (!pl) { /* every probed slot holds another plan: evict the home slot */
        pl = &plans[h % PLAN_SLOTS];
        plan_destroy(pl);
    }
    if (!pl->used) {
        memset(pl, 0, sizeof *pl);
        if (plan_build(pl, &k)) {
            plan_destroy(pl);
            return -1;
        }
        pl->key = k;
        pl->used = 1;
    }
    if (g->bias) {
        cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof(void *));
    }
    float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s = cublasLtMatmul(lt, pl->desc, &alpha, g->a, pl->la, g->b, pl->lb, &beta, g->d, pl->ld, g->d,
                                      pl->ld, &pl->algo, workspace, WORKSPACE_BYTES, wbcu_stream);
    if (s) return lt_fail(s, "cublasLtMatmul");
    return 0;
}

static int plugin_elementwise(const wb_cuda_ew *e) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    int r = wbcu_launch_elementwise(e, wbcu_stream, dev_info.sm_count);
    if (r) return cuda_fail((cudaError_t)r, "launching an elementwise kernel");
    return 0;
}

static int plugin_geglu(const wb_cuda_geglu *g) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    int r = wbcu_launch_geglu(g, wbcu_stream, dev_info.sm_count);
    if (r) return cuda_fail((cudaError_t)r, "launching the GeGLU kernel");
    return 0;
}

/* ---- graphs ------------------------------------------------------------------------------ */

static int plugin_graph_begin(void) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    CU(cudaStreamBeginCapture(wbcu_stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    return 0;
}

static int plugin_graph_end(void **exec) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    cudaGraph_t graph = NULL;
    CU(cudaStreamEndCapture(wbcu_stream, &graph),
       "cudaStreamEndCapture (was an unsupported call made while capturing?)");
    cudaError_t e;
    if (*exec) {
        cudaGraphExecUpdateResultInfo info;
        e = cudaGraphExecUpdate((cudaGraphExec_t)*exec, graph, &info);
        if (e != cudaSuccess) { /* topology changed: a fresh instantiation */
            cudaGetLastError();
            cudaGraphExecDestroy((cudaGraphExec_t)*exec);
            *exec = NULL;
        }
    }
    if (!*exec) {
        cudaGraphExec_t ge = NULL;
        e = cudaGraphInstantiate(&ge, graph, 0);
        if (e != cudaSuccess) {
            cudaGraphDestroy(graph);
            return cuda_fail(e, "cudaGraphInstantiate");
        }
        *exec = ge;
    }
    cudaGraphDestroy(graph);
    return 0;
}

static int plugin_graph_launch(void *exec) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    CU(cudaGraphLaunch((cudaGraphExec_t)exec, wbcu_stream), "cudaGraphLaunch");
    return 0;
}

static void plugin_graph_destroy(void *exec) {
    if (exec) cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

static const wb_cuda_api api = {
    .abi_version = WB_CUDA_ABI_VERSION,
    .layout = WB_CUDA_ABI_LAYOUT,
    .last_error = plugin_last_error,
    .init = plugin_init,
    .info = plugin_info,
    .alloc = plugin_alloc,
    .free = plugin_free,
    .empty_cache = plugin_empty_cache,
    .memory_stats = plugin_memory_stats,
    .copy = plugin_copy,
    .synchronize = plugin_synchronize,
    .gemm = plugin_gemm,
    .elementwise = plugin_elementwise,
    .geglu = plugin_geglu,
    .graph_begin = plugin_graph_begin,
    .graph_end = plugin_graph_end,
    .graph_launch = plugin_graph_launch,
    .graph_destroy = plugin_graph_destroy,
    .trace_start = wbcu_trace_start,
    .trace_flush = wbcu_trace_flush,
    .trace_stop = wbcu_trace_stop,
    .trace_push_correlation = wbcu_push_correlation,
    .trace_pop_correlation = wbcu_pop_correlation,
    .timestamp = wbcu_timestamp,
    .trace_clock = wbcu_trace_clock,
};

__attribute__((visibility("default"))) const wb_cuda_api *wb_cuda_plugin(int abi_version) {
    return abi_version == WB_CUDA_ABI_VERSION ? &api : NULL;
}
