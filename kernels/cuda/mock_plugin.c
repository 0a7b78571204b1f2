/* mock_plugin.c: libwb_cuda_mock.so, a stand-in for the CUDA plugin that implements the same
 * ABI (<wb/abi/cuda.h>) on the host, for tests only. Loaded with WB_CUDA_PLUGIN=<path>, it lets
 * machines without a GPU run everything the core does for device "cuda": transfers, views,
 * the translation of row-major GEMMs into column-major cuBLASLt calls (a reference GEMM that
 * honours transa/transb, leading dimensions and epilogues exactly as documented), elementwise
 * and GeGLU launches, stream capture (recorded, not executed, until the graph is launched, as
 * CUDA does) and the trace (CUPTI-like records with correlation and external ids).
 * Its kernel records are named mock_<what>[_<layout>] so tests can check what was asked for.
 * Nothing here measures a GPU: timings are host timings of reference loops.
 *
 * It keeps CUDA's rules where the real plugin could break them, under the same policy code
 * (plugin_common.c): cuBLASLt refuses operands less aligned than the plan's MIN_ALIGNMENT
 * preferences (default 256) and faults, stickily, on an under-aligned bias; cudaMalloc, cudaFree and
 * heuristic queries are refused while capturing unless the thread's capture mode is relaxed, and
 * a refused call invalidates the capture; a failed call leaves a pending error that the next
 * launch's check reports unless it was consumed; cuBLASLt launches through the driver API (with
 * internal driver calls around them). Environment: WB_MOCK_TRACE_START_FAIL=1 (trace start fails
 * as CUPTI can), WB_MOCK_ZERO_TIMESTAMPS=1 (kernel records without times, CUPTI's "could not
 * collect"), WB_MOCK_ABI_SKEW (see the end).
 *
 * Generated kernels: it plays NVRTC and the driver's module loader without compiling CUDA C. Its
 * "image" is the source behind a header; a load takes the host build of the same kernel that the
 * core hands over (codegen_info.host_kernels), and a launch runs it, on the stream like every
 * kernel (captured, traced under the kernel's name, launched through cuLaunchKernel as the real
 * plugin does). So tests check real numbers on this device. WB_MOCK_NVRTC_FAIL=1: every compile
 * fails with an NVRTC-style log; WB_MOCK_NO_NVRTC=1: no NVRTC library to load.
 *
 * One file per concern (mock_internal.h): CUDA's state and rules of failure (mock_state.c),
 * CUPTI (mock_trace.c), the stream and the reference kernels with cuBLASLt's rules
 * (mock_stream.c), graphs (mock_graph.c), NVRTC and modules (mock_codegen.c). This one has the
 * device's memory, copies and synchronize, and the ABI's table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock_internal.h"

static int mock_init(int *why) {
    *why = WB_CU_INIT_OK;
    return 0;
}

static int mock_info(wb_cuda_info *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "mock device (host memory, tests only)");
    out->device_count = 1;
    out->cc_major = 9;
    out->sm_count = 4;
    out->total_mem = (size_t)1 << 30;
    out->runtime_version = out->driver_version = 13000;
    out->cublaslt_version = 130100;
    out->cupti_version = 0;
    out->mem_clock_khz = 1e6;
    out->bus_width_bits = 64;
    out->clock_khz = 1e6;
    return 0;
}

/* ---- memory ---------------------------------------------------------------------------------- */

static int dev_malloc(void **ptr, size_t nbytes) {
    *ptr = NULL;
    if (mock_refused_in_capture("cudaMalloc")) return MOCK_ERR_CAPTURE_UNSUPPORTED;
    *ptr = aligned_alloc(256, nbytes ? (nbytes + 255) / 256 * 256 : 256); /* cudaMalloc's alignment */
    if (!*ptr) return mock_pending = MOCK_ERR_MEMORY;
    memset(*ptr, 0xa5, nbytes); /* poison: reads before writes show */
    return 0;
}

static void dev_free(void *ptr) {
    if (!mock_refused_in_capture("cudaFree")) free(ptr);
}

static void dev_mem_info(size_t *f, size_t *t) { *f = *t = (size_t)1 << 30; }
static int dev_capturing(void) { return mock_capturing; }
static int dev_relax(void) {
    int was = mock_relaxed;
    mock_relaxed = 1;
    return was;
}
static void dev_restore_mode(int previous) { mock_relaxed = previous; }
static int dev_consume_error(void) {
    int e = mock_pending;
    mock_pending = 0;
    return e ? e : mock_sticky;
}

static int mock_alloc(void **ptr, size_t nbytes) { return mock_stuck("cudaMalloc") ? -1 : wbcu_alloc(ptr, nbytes); }

static int mock_copy(void *dst, const void *src, size_t nbytes, int kind) {
    if (mock_stuck("cudaMemcpyAsync")) return -1;
    if (kind != WB_CU_COPY_D2D && mock_refused_in_capture("cudaMemcpyAsync (a synchronous copy)")) return -1;
    uint64_t t0 = mock_now_ns();
    memmove(dst, src, nbytes);
    uint32_t corr = mock_api_call(WB_CU_REC_RUNTIME, "cudaMemcpyAsync", 41, WB_CU_API_OTHER, t0);
    wb_cuda_record r = {0};
    r.kind = WB_CU_REC_MEMCPY;
    r.name = kind == WB_CU_COPY_H2D ? "Memcpy HtoD" : kind == WB_CU_COPY_D2H ? "Memcpy DtoH" : "Memcpy DtoD";
    r.start_ns = t0;
    r.end_ns = mock_now_ns();
    r.correlation = corr;
    r.stream = 13;
    r.bytes = nbytes;
    mock_record(&r);
    return 0;
}

static int mock_synchronize(void) {
    if (mock_stuck("cudaStreamSynchronize") || mock_refused_in_capture("cudaStreamSynchronize")) return -1;
    uint64_t t0 = mock_now_ns();
    uint32_t corr = mock_api_call(WB_CU_REC_RUNTIME, "cudaStreamSynchronize", 131, WB_CU_API_SYNC, t0);
    wb_cuda_record r = {0}; /* the wait itself, as CUPTI's synchronization records give it */
    r.kind = WB_CU_REC_SYNC;
    r.name = "sync wait: stream";
    r.start_ns = t0;
    r.end_ns = mock_now_ns();
    r.correlation = corr;
    r.stream = 13;
    mock_record(&r);
    return 0;
}

static const wbcu_device mock_device = {
    .malloc = dev_malloc,
    .free = dev_free,
    .mem_info = dev_mem_info,
    .synchronize = mock_synchronize,
    .capturing = dev_capturing,
    .relax = dev_relax,
    .restore_mode = dev_restore_mode,
    .consume_error = dev_consume_error,
    .error_name = mock_err_name,
    .error_string = mock_err_string,
    .plan_build = dev_plan_build,
    .plan_destroy = dev_plan_destroy,
    .matmul = dev_matmul,
};

static wb_cuda_api api = {
    .abi_version = WB_CUDA_ABI_VERSION,
    .layout = WB_CUDA_ABI_LAYOUT,
    .last_error = wbcu_last_error,
    .init = mock_init,
    .info = mock_info,
    .alloc = mock_alloc,
    .free = wbcu_free,
    .empty_cache = wbcu_empty_cache,
    .memory_stats = wbcu_memory_stats,
    .copy = mock_copy,
    .synchronize = mock_synchronize,
    .gemm = wbcu_gemm,
    .elementwise = mock_elementwise,
    .geglu = mock_geglu,
    .graph_begin = mock_graph_begin,
    .graph_end = mock_graph_end,
    .graph_launch = mock_graph_launch,
    .graph_destroy = mock_graph_destroy,
    .trace_start = mock_trace_start,
    .trace_flush = mock_trace_flush,
    .trace_stop = mock_trace_stop,
    .trace_push_correlation = mock_push,
    .trace_pop_correlation = mock_pop,
    .timestamp = mock_timestamp,
    .trace_clock = mock_trace_clock,
    .codegen_init = mock_codegen_init,
    .codegen_compile = mock_codegen_compile,
    .codegen_image_free = mock_codegen_image_free,
    .codegen_load = mock_codegen_load,
    .codegen_launch = mock_codegen_launch,
};

/* WB_MOCK_ABI_SKEW=version|gemm|record|poi|enums plays a plugin built from another version of the
 * ABI header, so the core's handshake can be tested. */
__attribute__((visibility("default"))) const wb_cuda_api *wb_cuda_plugin(int abi_version) {
    wbcu_set_device(&mock_device);
    const char *skew = getenv("WB_MOCK_ABI_SKEW");
    if (skew && !strcmp(skew, "version")) abi_version++;
    if (skew && !strcmp(skew, "gemm")) api.layout.gemm += 8;
    if (skew && !strcmp(skew, "record")) api.layout.record -= 8;
    if (skew && !strcmp(skew, "poi")) api.layout.poi += 8;
    if (skew && !strcmp(skew, "enums")) api.layout.enums ^= 1;
    return abi_version == WB_CUDA_ABI_VERSION ? &api : NULL;
}
