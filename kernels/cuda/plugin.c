/* plugin.c: libwb_cuda.so, the host side of the CUDA backend (see wb_cuda_api.h).
 *
 * One device (0), one non-blocking stream, one cuBLASLt handle with a 32 MiB workspace made once,
 * a caching allocator over cudaMalloc, stream capture into CUDA graphs, and a CUPTI activity
 * tracer. Nothing is initialised until cudaGetDeviceCount succeeds with a device: without a
 * driver the plugin loads, says why, and stays inert. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wb_cuda_abi.h"

/* In kernels.cu. */
int wbcu_launch_elementwise(const wb_cuda_ew *w, cudaStream_t stream, int sm_count);
int wbcu_launch_geglu(const wb_cuda_geglu *g, cudaStream_t stream, int sm_count);
const char *wbcu_demangle(const char *name);

#define WORKSPACE_BYTES ((size_t)32 << 20)

static __thread char last_error[512];
static int ready;
static cudaStream_t stream;
static cublasLtHandle_t lt;
static void *workspace;
static wb_cuda_info dev_info;

static const char *plugin_last_error(void) { return last_error; }

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}

static int cuda_fail(cudaError_t e, const char *what) {
    return fail("%s failed: %s (%s, error %d)", what, cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
}

static int lt_fail(cublasStatus_t s, const char *what) {
    return fail("%s failed: cuBLASLt status %d (%s)", what, (int)s, cublasLtGetStatusString(s));
}

#define CU(call, what)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) return cuda_fail(e_, what);                                                             \
    } while (0)

/* ---- discovery ------------------------------------------------------------------------ */

static int plugin_init(int *why) {
    *why = WB_CU_INIT_OK;
    if (ready) return 0;
    int count = 0; /* not written when the call fails */
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || (e == cudaSuccess && count == 0)) {
        int driver = 0;
        cudaDriverGetVersion(&driver);
        *why = (e == cudaErrorInsufficientDriver || driver == 0) ? WB_CU_INIT_NO_DRIVER : WB_CU_INIT_NO_DEVICE;
        if (*why == WB_CU_INIT_NO_DRIVER)
            return fail("no NVIDIA driver: cudaGetDeviceCount returned %s (%d); the plugin needs libcuda.so.1 "
                        "from a driver that supports CUDA 13",
                        cudaGetErrorName(e), (int)e);
        return fail("no CUDA device: the driver (version %d) sees no GPU (%s)", driver,
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

    CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cublasStatus_t s = cublasLtCreate(&lt);
    if (s != CUBLAS_STATUS_SUCCESS) return lt_fail(s, "cublasLtCreate");
    CU(cudaMalloc(&workspace, WORKSPACE_BYTES), "cudaMalloc of the 32 MiB cuBLASLt workspace");
    ready = 1;
    *why = WB_CU_INIT_OK;
    return 0;
}

static int plugin_info(wb_cuda_info *out) {
    if (!ready) return fail("the CUDA plugin is not initialised");
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
    if (!ready) return 0;
    cudaStreamSynchronize(stream);
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
    if (!ready) return fail("the CUDA plugin is not initialised");
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
            return fail("cudaMalloc of %zu bytes failed: %s (device has %zu of %zu bytes free)", class_bytes,
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
    if (!ready) return fail("the CUDA plugin is not initialised");
    if (nbytes == 0) return 0;
    enum cudaMemcpyKind k = kind == WB_CU_COPY_H2D   ? cudaMemcpyHostToDevice
                            : kind == WB_CU_COPY_D2H ? cudaMemcpyDeviceToHost
                                                     : cudaMemcpyDeviceToDevice;
    CU(cudaMemcpyAsync(dst, src, nbytes, k, stream), "cudaMemcpyAsync");
    /* Host buffers may be freed or read as soon as we return. */
    if (kind != WB_CU_COPY_D2D) CU(cudaStreamSynchronize(stream), "cudaStreamSynchronize after a copy");
    return 0;
}

static int plugin_synchronize(void) {
    if (!ready) return 0;
    CU(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
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
        return fail("cuBLASLt has no epilogue for activation %d (only the tanh GELU)", k->activation);
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
    return fail("cuBLASLt has no algorithm for %s GEMM m=%lld n=%lld k=%lld (%s%s, activation %d)",
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
    if (!ready) return fail("the CUDA plugin is not initialised");
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
                                      pl->ld, &pl->algo, workspace, WORKSPACE_BYTES, stream);
    if (s) return lt_fail(s, "cublasLtMatmul");
    return 0;
}

static int plugin_elementwise(const wb_cuda_ew *e) {
    if (!ready) return fail("the CUDA plugin is not initialised");
    int r = wbcu_launch_elementwise(e, stream, dev_info.sm_count);
    if (r) return cuda_fail((cudaError_t)r, "launching an elementwise kernel");
    return 0;
}

static int plugin_geglu(const wb_cuda_geglu *g) {
    if (!ready) return fail("the CUDA plugin is not initialised");
    int r = wbcu_launch_geglu(g, stream, dev_info.sm_count);
    if (r) return cuda_fail((cudaError_t)r, "launching the GeGLU kernel");
    return 0;
}

/* ---- graphs ------------------------------------------------------------------------------ */

static int plugin_graph_begin(void) {
    if (!ready) return fail("the CUDA plugin is not initialised");
    CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    return 0;
}

static int plugin_graph_end(void **exec) {
    if (!ready) return fail("the CUDA plugin is not initialised");
    cudaGraph_t graph = NULL;
    CU(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture (was an unsupported call made while capturing?)");
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
    if (!ready) return fail("the CUDA plugin is not initialised");
    CU(cudaGraphLaunch((cudaGraphExec_t)exec, stream), "cudaGraphLaunch");
    return 0;
}

static void plugin_graph_destroy(void *exec) {
    if (exec) cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

/* ---- CUPTI --------------------------------------------------------------------------------- *
 * Buffers of 4 MiB are handed to CUPTI; completed ones (filled on CUPTI's thread) are queued
 * under a mutex and parsed by trace_flush on the caller's thread after a forced flush. */
#define TRACE_BUFFER (4u << 20)
typedef struct done_buffer {
    uint8_t *data;
    size_t valid;
    struct done_buffer *next;
} done_buffer;
static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static done_buffer *done_head, *done_tail;
static uint64_t dropped_total;
static int callbacks_registered, tracing;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, TRACE_BUFFER);
    *size = *buffer ? TRACE_BUFFER : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid) {
    (void)size;
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped) {
        pthread_mutex_lock(&trace_mu);
        dropped_total += dropped;
        pthread_mutex_unlock(&trace_mu);
    }
    done_buffer *d = malloc(sizeof *d);
    if (!d) {
        free(buffer);
        return;
    }
    d->data = buffer;
    d->valid = valid;
    d->next = NULL;
    pthread_mutex_lock(&trace_mu);
    if (done_tail)
        done_tail->next = d;
    else
        done_head = d;
    done_tail = d;
    pthread_mutex_unlock(&trace_mu);
}

/* Kernels, the API calls that launch them and the external correlation that ties them to our
 * ops are required; copies, memsets and synchronisation are best effort. */
static const CUpti_ActivityKind trace_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};
#define NKINDS    (int)(sizeof trace_kinds / sizeof trace_kinds[0])
#define NREQUIRED 4
static int kind_on[NKINDS];

static int cupti_fail(CUptiResult r, const char *what) {
    const char *s = NULL;
    cuptiGetResultString(r, &s);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        return fail("%s: another profiler (Nsight Systems or Nsight Compute?) already holds CUPTI; device "
                    "kernels are not traced in this run (%s)",
                    what, s ? s : "?");
    return fail("%s failed: CUPTI error %d (%s)", what, (int)r, s ? s : "?");
}

static int plugin_trace_start(void) {
    if (!ready) return fail("the CUDA plugin is not initialised");
    if (tracing) return 0;
    CUptiResult r;
    if (!callbacks_registered) {
        r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        if (r != CUPTI_SUCCESS) return cupti_fail(r, "cuptiActivityRegisterCallbacks");
        callbacks_registered = 1;
    }
    for (int i = 0; i < NKINDS; i++) {
        r = cuptiActivityEnable(trace_kinds[i]);
        kind_on[i] = r == CUPTI_SUCCESS;
        if (!kind_on[i] && i < NREQUIRED) {
            for (int j = 0; j < i; j++)
                if (kind_on[j]) cuptiActivityDisable(trace_kinds[j]), kind_on[j] = 0;
            return cupti_fail(r, "cuptiActivityEnable");
        }
    }
    tracing = 1;
    return 0;
}

static void plugin_trace_stop(void) {
    if (!tracing) return;
    for (int i = 0; i < NKINDS; i++)
        if (kind_on[i]) cuptiActivityDisable(trace_kinds[i]), kind_on[i] = 0;
    tracing = 0;
}

static int api_kind_of(const char *name) {
    if (!name) return WB_CU_API_OTHER;
    if (strstr(name, "GraphLaunch")) return WB_CU_API_GRAPH_LAUNCH;
    if (strstr(name, "LaunchKernel") || strstr(name, "LaunchCooperativeKernel")) return WB_CU_API_LAUNCH;
    if (strstr(name, "Occupancy")) return WB_CU_API_OCCUPANCY;
    if (strstr(name, "Synchronize")) return WB_CU_API_SYNC;
    return WB_CU_API_OTHER;
}

static const char *copy_kind_name(int k) {
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD";
    default: return "Memcpy";
    }
}

static void deliver(CUpti_Activity *a, wb_cuda_record_fn fn, void *user) {
    wb_cuda_record r;
    memset(&r, 0, sizeof r);
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)a;
        r.kind = WB_CU_REC_KERNEL;
        r.name = wbcu_demangle(k->name);
        r.start_ns = k->start;
        r.end_ns = k->end;
        r.correlation = k->correlationId;
        r.device = k->deviceId;
        r.stream = k->streamId;
        r.grid[0] = k->gridX, r.grid[1] = k->gridY, r.grid[2] = k->gridZ;
        r.block[0] = k->blockX, r.block[1] = k->blockY, r.block[2] = k->blockZ;
        r.graph_id = k->graphId;
        r.graph_node_id = (uint32_t)k->graphNodeId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *api = (const CUpti_ActivityAPI *)a;
        r.kind = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? WB_CU_REC_RUNTIME : WB_CU_REC_DRIVER;
        const char *name = NULL;
        cuptiGetCallbackName(a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                                    : CUPTI_CB_DOMAIN_DRIVER_API,
                             api->cbid, &name);
        r.name = name ? name : "cuda api";
        r.cbid = (int)api->cbid;
        r.api_kind = api_kind_of(name);
        r.start_ns = api->start;
        r.end_ns = api->end;
        r.correlation = api->correlationId;
        r.thread = api->threadId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)a;
        r.kind = WB_CU_REC_MEMCPY;
        r.name = copy_kind_name(m->copyKind);
        r.start_ns = m->start;
        r.end_ns = m->end;
        r.correlation = m->correlationId;
        r.device = m->deviceId;
        r.stream = m->streamId;
        r.bytes = m->bytes;
        r.graph_id = m->graphId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)a;
        r.kind = WB_CU_REC_MEMSET;
        r.name = "Memset";
        r.start_ns = m->start;
        r.end_ns = m->end;
        r.correlation = m->correlationId;
        r.device = m->deviceId;
        r.stream = m->streamId;
        r.bytes = m->bytes;
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)a;
        r.kind = WB_CU_REC_SYNC;
        r.name = s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE    ? "sync wait: stream"
                 : s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE ? "sync wait: context"
                 : s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE   ? "sync wait: event"
                 : s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT   ? "sync wait: stream wait event"
                                                                                      : "sync wait";
        r.start_ns = s->start;
        r.end_ns = s->end;
        r.correlation = s->correlationId;
        r.stream = s->streamId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)a;
        r.kind = WB_CU_REC_EXTERNAL;
        r.correlation = x->correlationId;
        r.external_id = x->externalId;
        break;
    }
    default: return;
    }
    fn(user, &r);
}

static int plugin_trace_flush(wb_cuda_record_fn fn, void *user, uint64_t *dropped) {
    if (!ready) return fail("the CUDA plugin is not initialised");
    cudaStreamSynchronize(stream);
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS) return cupti_fail(r, "cuptiActivityFlushAll");
    pthread_mutex_lock(&trace_mu);
    done_buffer *list = done_head;
    done_head = done_tail = NULL;
    *dropped = dropped_total;
    dropped_total = 0;
    pthread_mutex_unlock(&trace_mu);
    while (list) {
        CUpti_Activity *rec = NULL;
        while (cuptiActivityGetNextRecord(list->data, list->valid, &rec) == CUPTI_SUCCESS)
            deliver(rec, fn, user);
        done_buffer *next = list->next;
        free(list->data);
        free(list);
        list = next;
    }
    return 0;
}

static void plugin_push_correlation(uint64_t id) {
    if (tracing) cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

static void plugin_pop_correlation(void) {
    uint64_t id;
    if (tracing) cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
}

static int plugin_timestamp(uint64_t *ns) {
    CUptiResult r = cuptiGetTimestamp(ns);
    if (r != CUPTI_SUCCESS) return cupti_fail(r, "cuptiGetTimestamp");
    return 0;
}

static const wb_cuda_api api = {
    .abi_version = WB_CUDA_ABI_VERSION,
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
    .trace_start = plugin_trace_start,
    .trace_flush = plugin_trace_flush,
    .trace_stop = plugin_trace_stop,
    .trace_push_correlation = plugin_push_correlation,
    .trace_pop_correlation = plugin_pop_correlation,
    .timestamp = plugin_timestamp,
};

__attribute__((visibility("default"))) const wb_cuda_api *wb_cuda_plugin(int abi_version) {
    return abi_version == WB_CUDA_ABI_VERSION ? &api : NULL;
}
