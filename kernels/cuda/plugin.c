/* plugin.c: libwb_cuda.so, the host side of the CUDA backend (see core/include/wb/abi/cuda.h).
 *
 * One device (0), one non-blocking stream, one cuBLASLt handle with a 32 MiB workspace made once,
 * a caching allocator over cudaMalloc, stream capture into CUDA graphs; the CUPTI activity
 * tracer is plugin_trace.c, generated kernels (NVRTC) plugin_codegen.c. Nothing is initialised until cudaGetDeviceCount
 * succeeds with a device: without a driver the plugin loads, says why, and stays inert. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_internal.h"

#define WORKSPACE_BYTES ((size_t)32 << 20)

int wbcu_ready;
cudaStream_t wbcu_stream;
static cublasLtHandle_t lt;
static void *workspace;
wb_cuda_info wbcu_dev_info;

/* Consumes the pending error (plugin_common.c), so the next launch's check is its own. */
static int cuda_fail(cudaError_t e, const char *what) { return wbcu_device_fail((int)e, what); }

static int lt_fail(cublasStatus_t s, const char *what) {
    cudaGetLastError(); /* cuBLASLt may have left a runtime error behind */
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
    memset(&wbcu_dev_info, 0, sizeof wbcu_dev_info);
    snprintf(wbcu_dev_info.name, sizeof wbcu_dev_info.name, "%s", prop.name);
    wbcu_dev_info.device_count = count;
    wbcu_dev_info.cc_major = prop.major;
    wbcu_dev_info.cc_minor = prop.minor;
    wbcu_dev_info.sm_count = prop.multiProcessorCount;
    wbcu_dev_info.total_mem = prop.totalGlobalMem;
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0);
    wbcu_dev_info.mem_clock_khz = clock_khz;
    int sm_khz = 0;
    cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, 0);
    wbcu_dev_info.clock_khz = sm_khz;
    wbcu_dev_info.bus_width_bits = prop.memoryBusWidth;
    cudaRuntimeGetVersion(&wbcu_dev_info.runtime_version);
    cudaDriverGetVersion(&wbcu_dev_info.driver_version);
    wbcu_dev_info.cublaslt_version = cublasLtGetVersion();
    uint32_t cupti = 0;
    if (cuptiGetVersion(&cupti) == CUPTI_SUCCESS) wbcu_dev_info.cupti_version = (int)cupti;

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
    *out = wbcu_dev_info;
    return 0;
}

/* ---- the device under the shared policy (plugin_common.c) ------------------------------ */

static int dev_malloc(void **ptr, size_t bytes) { return (int)cudaMalloc(ptr, bytes); }
static void dev_free(void *ptr) { cudaFree(ptr); }
static void dev_mem_info(size_t *free_bytes, size_t *total_bytes) {
    if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) cudaGetLastError();
}
static int dev_synchronize(void) { return (int)cudaStreamSynchronize(wbcu_stream); }
static int dev_capturing(void) {
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (!wbcu_ready || cudaStreamIsCapturing(wbcu_stream, &st) != cudaSuccess) return 0;
    return st == cudaStreamCaptureStatusActive;
}
/* The thread's own mode comes back as it was (Global by default, not the capture's ThreadLocal). */
static int dev_relax(void) {
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&m);
    return (int)m;
}
static void dev_restore_mode(int previous) {
    enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)previous;
    cudaThreadExchangeStreamCaptureMode(&m);
}
static int dev_consume_error(void) { return (int)cudaGetLastError(); }
static const char *dev_error_name(int code) { return cudaGetErrorName((cudaError_t)code); }
static const char *dev_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }

static int plugin_alloc(void **ptr, size_t nbytes) {
    *ptr = NULL;
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    return wbcu_alloc(ptr, nbytes);
}

static int plugin_empty_cache(void) { return wbcu_ready ? wbcu_empty_cache() : 0; }

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

/* ---- cuBLASLt: the device's half of a plan (the cache and its key are plugin_common.c) ---- */
typedef struct lt_plan {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} lt_plan;

static void dev_plan_destroy(wbcu_plan *pl) {
    lt_plan *p = pl->impl;
    if (!p) return;
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->ld) cublasLtMatrixLayoutDestroy(p->ld);
    free(p);
    pl->impl = NULL;
}

/* The preference: workspace, the operands' real alignment (uint32_t, default 256; C is D) and
 * which split-K reductions the heuristic may offer. */
static cublasStatus_t set_preferences(cublasLtMatmulPreference_t pref, const wbcu_plan *pl, uint32_t reductions) {
    uint64_t ws = WORKSPACE_BYTES;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    static const cublasLtMatmulPreferenceAttributes_t attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    static const int operand[4] = {0, 1, 2, 2};
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++) {
        uint32_t al = pl->min_align[operand[i]];
        if (al) s = cublasLtMatmulPreferenceSetAttribute(pref, attr[i], &al, sizeof al);
    }
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
                                                 sizeof reductions);
    return s;
}

static int32_t algo_config(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoConfigAttributes_t attr, int32_t dflt) {
    int32_t v = dflt; /* every attribute read here is a 32-bit integer (int32_t or uint32_t) */
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(a, attr, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS) return dflt;
    return v;
}

/* A linear is meant to be one kernel with its epilogue. A split-K algorithm whose partial sums
 * are reduced out of place adds a kernel (seen on an H200, f32 m=96 n=64 k=256: a CUTLASS SIMT
 * GEMM then cublasLt::splitKreduce_kernel, which applies the bias). So the heuristic is asked
 * three times at most, each time allowing more: no split-K; split-K reduced in place (one kernel,
 * its counters zeroed in the workspace); then any algorithm, so a shape never goes without one.
 * In each answer, fastest first, the first usable algorithm that does not split K wins, else
 * (past the first ask) the first usable one. */
static const struct {
    uint32_t mask;
    const char *what;
} reduction_passes[] = {
    {CUBLASLT_REDUCTION_SCHEME_NONE, "no split-K"},
    {CUBLASLT_REDUCTION_SCHEME_INPLACE, "split-K in place"},
    {CUBLASLT_REDUCTION_SCHEME_MASK, "any reduction"},
};

static cublasStatus_t choose_algo(lt_plan *p, const wbcu_plan *pl, int *pass_out, int *found_out) {
    cublasStatus_t last = CUBLAS_STATUS_SUCCESS;
    for (int pass = 0; pass < (int)(sizeof reduction_passes / sizeof *reduction_passes); pass++) {
        cublasLtMatmulPreference_t pref;
        cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
        if (s) return s;
        s = set_preferences(pref, pl, reduction_passes[pass].mask);
        cublasLtMatmulHeuristicResult_t res[8];
        int found = 0;
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->la, p->lb, p->ld, p->ld, pref, 8, res, &found);
        cublasLtMatmulPreferenceDestroy(pref);
        /* a mask this cuBLASLt refuses, or no algorithm under it: ask with the next one */
        if (s != CUBLAS_STATUS_SUCCESS) {
            last = s;
            continue;
        }
        int first = -1;
        for (int i = 0; i < found; i++) {
            if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
            if (first < 0) first = i;
            if (algo_config(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 1) <= 1) {
                first = i;
                break;
            }
        }
        if (first < 0 || (pass == 0 && algo_config(&res[first].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 1) > 1))
            continue;
        p->algo = res[first].algo;
        *pass_out = pass;
        *found_out = found;
        return CUBLAS_STATUS_SUCCESS;
    }
    *pass_out = -1;
    return last;
}

static int dev_plan_build(wbcu_plan *pl) {
    const wbcu_gemm_key *k = &pl->key;
    if (k->activation != WB_CU_ACT_NONE && k->activation != WB_CU_ACT_GELU_TANH)
        return wbcu_fail("cuBLASLt has no epilogue for activation %d (only the tanh GELU)", k->activation);
    lt_plan *p = calloc(1, sizeof *p);
    if (!p) return wbcu_fail("out of host memory for a cuBLASLt plan");
    pl->impl = p;
    cudaDataType_t t = k->dtype == WB_CU_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasStatus_t s = cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s) return lt_fail(s, "cublasLtMatmulDescCreate");
    cublasOperation_t ta = k->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = k->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    cublasLtEpilogue_t epi = k->activation == WB_CU_ACT_GELU_TANH
                                 ? (k->bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                                 : (k->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (s) return lt_fail(s, "setting the cuBLASLt epilogue");
    /* Stored as op(A) before the transpose: rows x cols of the matrix in memory. */
    uint64_t ar = k->transa ? (uint64_t)k->k : (uint64_t)k->m, ac = k->transa ? (uint64_t)k->m : (uint64_t)k->k;
    uint64_t br = k->transb ? (uint64_t)k->n : (uint64_t)k->k, bc = k->transb ? (uint64_t)k->k : (uint64_t)k->n;
    if ((s = cublasLtMatrixLayoutCreate(&p->la, t, ar, ac, k->lda)) ||
        (s = cublasLtMatrixLayoutCreate(&p->lb, t, br, bc, k->ldb)) ||
        (s = cublasLtMatrixLayoutCreate(&p->ld, t, (uint64_t)k->m, (uint64_t)k->n, k->ldd)))
        return lt_fail(s, "cublasLtMatrixLayoutCreate");
    int pass = -1, found = 0;
    s = choose_algo(p, pl, &pass, &found);
    if (pass >= 0) {
        /* WB_CUDA_VERBOSE=1: which algorithm cuBLASLt's heuristic gave each plan, and under which ask */
        const char *v = getenv("WB_CUDA_VERBOSE");
        if (v && *v && strcmp(v, "0") != 0)
            fprintf(stderr,
                    "wb cuda: cuBLASLt %s m=%lld n=%lld k=%lld %s%s activation %d bias %d: algo %d tile %d splitK %d "
                    "reduction %d (%s, %d candidates)\n",
                    k->dtype == WB_CU_BF16 ? "bf16" : "f32", (long long)k->m, (long long)k->n, (long long)k->k,
                    k->transa ? "t" : "n", k->transb ? "t" : "n", k->activation, k->bias,
                    algo_config(&p->algo, CUBLASLT_ALGO_CONFIG_ID, -1),
                    algo_config(&p->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, -1),
                    algo_config(&p->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 1),
                    algo_config(&p->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, 0), reduction_passes[pass].what,
                    found);
        return 0;
    }
    if (s) return lt_fail(s, "cublasLtMatmulAlgoGetHeuristic");
    return wbcu_fail("cuBLASLt has no algorithm for %s GEMM m=%lld n=%lld k=%lld (%s%s, activation %d, operands "
                     "aligned to %u/%u/%u bytes)",
                     k->dtype == WB_CU_BF16 ? "bf16" : "f32", (long long)k->m, (long long)k->n, (long long)k->k,
                     k->transa ? "t" : "n", k->transb ? "t" : "n", k->activation, k->align_a, k->align_b, k->align_d);
}

static int dev_matmul(const wbcu_plan *pl, const wb_cuda_gemm *g) {
    const lt_plan *p = pl->impl;
    if (g->bias) {
        cublasStatus_t s =
            cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof(void *));
        if (s) return lt_fail(s, "setting the cuBLASLt bias pointer");
    }
    float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s = cublasLtMatmul(lt, p->desc, &alpha, g->a, p->la, g->b, p->lb, &beta, g->d, p->ld, g->d, p->ld,
                                      &p->algo, workspace, WORKSPACE_BYTES, wbcu_stream);
    if (s) return lt_fail(s, "cublasLtMatmul");
    return 0;
}

static const wbcu_device cuda_device = {
    .malloc = dev_malloc,
    .free = dev_free,
    .mem_info = dev_mem_info,
    .synchronize = dev_synchronize,
    .capturing = dev_capturing,
    .relax = dev_relax,
    .restore_mode = dev_restore_mode,
    .consume_error = dev_consume_error,
    .error_name = dev_error_name,
    .error_string = dev_error_string,
    .plan_build = dev_plan_build,
    .plan_destroy = dev_plan_destroy,
    .matmul = dev_matmul,
};

static int plugin_gemm(const wb_cuda_gemm *g) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    return wbcu_gemm(g);
}

static int plugin_elementwise(const wb_cuda_ew *e) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    int r = wbcu_launch_elementwise(e, wbcu_stream, wbcu_dev_info.sm_count);
    if (r) return cuda_fail((cudaError_t)r, "launching an elementwise kernel");
    return 0;
}

static int plugin_geglu(const wb_cuda_geglu *g) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    int r = wbcu_launch_geglu(g, wbcu_stream, wbcu_dev_info.sm_count);
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
    .last_error = wbcu_last_error,
    .init = plugin_init,
    .info = plugin_info,
    .alloc = plugin_alloc,
    .free = wbcu_free,
    .empty_cache = plugin_empty_cache,
    .memory_stats = wbcu_memory_stats,
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
    .codegen_init = wbcu_codegen_init,
    .codegen_compile = wbcu_codegen_compile,
    .codegen_image_free = wbcu_codegen_image_free,
    .codegen_load = wbcu_codegen_load,
    .codegen_launch = wbcu_codegen_launch,
};

__attribute__((visibility("default"))) const wb_cuda_api *wb_cuda_plugin(int abi_version) {
    wbcu_set_device(&cuda_device);
    return abi_version == WB_CUDA_ABI_VERSION ? &api : NULL;
}
