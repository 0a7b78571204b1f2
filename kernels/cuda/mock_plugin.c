/* mock_plugin.c: libwb_cuda_mock.so, a stand-in for the CUDA plugin that implements the same
 * ABI (kernels/cuda/include/wb_cuda_abi.h) on the host, for tests only. Loaded with WB_CUDA_PLUGIN=<path>, it lets
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
 * fails with an NVRTC-style log; WB_MOCK_NO_NVRTC=1: no NVRTC library to load. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <wb_kernels/bf16.h>
#include "plugin_common.h"

/* CUDA's error numbers for the rules kept here. */
enum {
    ERR_MEMORY = 2,
    ERR_MISALIGNED = 716,
    ERR_CAPTURE_UNSUPPORTED = 900,
    ERR_CAPTURE_INVALIDATED = 901,
};
static const char *err_name(int e) {
    return e == ERR_MEMORY                ? "cudaErrorMemoryAllocation"
           : e == ERR_MISALIGNED          ? "cudaErrorMisalignedAddress"
           : e == ERR_CAPTURE_UNSUPPORTED ? "cudaErrorStreamCaptureUnsupported"
           : e == ERR_CAPTURE_INVALIDATED ? "cudaErrorStreamCaptureInvalidated"
                                          : "cudaErrorUnknown";
}
static const char *err_string(int e) {
    return e == ERR_MISALIGNED            ? "misaligned address"
           : e == ERR_CAPTURE_UNSUPPORTED ? "operation not permitted when stream is capturing"
           : e == ERR_CAPTURE_INVALIDATED ? "operation failed due to a previous error during capture"
                                          : err_name(e);
}

static int pending, sticky; /* cudaGetLastError's error; a fault that ends every later call */
static int capturing, relaxed, invalidated;
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return wbcu_fail("%s", buf);
}

/* A call CUDA refuses while capturing in thread-local mode: it fails and invalidates the capture. */
static int refused_in_capture(const char *what) {
    if (!capturing || relaxed) return 0;
    invalidated = 1;
    pending = ERR_CAPTURE_UNSUPPORTED;
    wbcu_device_fail(ERR_CAPTURE_UNSUPPORTED, what);
    return ERR_CAPTURE_UNSUPPORTED;
}

static int stuck(const char *what) { return sticky ? wbcu_device_fail(sticky, what) : 0; }

static uint64_t now_ns(void) { /* CLOCK_MONOTONIC, as CUPTI stamps with the plugin's timestamp callback */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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
    if (refused_in_capture("cudaMalloc")) return ERR_CAPTURE_UNSUPPORTED;
    *ptr = aligned_alloc(256, nbytes ? (nbytes + 255) / 256 * 256 : 256); /* cudaMalloc's alignment */
    if (!*ptr) return pending = ERR_MEMORY;
    memset(*ptr, 0xa5, nbytes); /* poison: reads before writes show */
    return 0;
}

static void dev_free(void *ptr) {
    if (!refused_in_capture("cudaFree")) free(ptr);
}

static void dev_mem_info(size_t *f, size_t *t) { *f = *t = (size_t)1 << 30; }
static int dev_capturing(void) { return capturing; }
static int dev_relax(void) {
    int was = relaxed;
    relaxed = 1;
    return was;
}
static void dev_restore_mode(int previous) { relaxed = previous; }
static int dev_consume_error(void) {
    int e = pending;
    pending = 0;
    return e ? e : sticky;
}

static int mock_alloc(void **ptr, size_t nbytes) { return stuck("cudaMalloc") ? -1 : wbcu_alloc(ptr, nbytes); }

/* ---- values ------------------------------------------------------------------------------------ */

static float ld(const void *p, int dtype, int64_t i) {
    return dtype == WB_CU_BF16 ? wb_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static void st(void *p, int dtype, int64_t i, float v) {
    if (dtype == WB_CU_BF16)
        ((uint16_t *)p)[i] = wb_f32_to_bf16(v);
    else
        ((float *)p)[i] = v;
}

static float gelu_tanh(float x) {
    float y = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * y));
}

/* ---- the stream: ops run now, or are recorded while capturing ---------------------------------- */

/* A loaded generated kernel: its name and the host build that runs it. */
typedef struct gen_kernel {
    char name[128];
    void (*host_fn)(const void *args);
} gen_kernel;

typedef enum { OP_GEMM, OP_EW, OP_GEGLU, OP_GEN } op_kind;
typedef struct op {
    op_kind kind;
    union {
        wb_cuda_gemm g;
        wb_cuda_ew e;
        wb_cuda_geglu q;
        struct {
            const gen_kernel *k;
            wb_cuda_poi_args a; /* by value, as cuLaunchKernel copies its parameters */
        } p;
    } u;
} op;

typedef struct graph {
    op *ops;
    int n;
} graph;

static graph capture;

/* tracing */
static int tracing;
static uint32_t next_corr = 1;
#define MAX_EXT 64
static uint64_t ext_stack[MAX_EXT];
static int ext_depth;
#define MAX_RECORDS 65536
static wb_cuda_record records[MAX_RECORDS];
static int nrecords;
static uint64_t dropped;

static void record(const wb_cuda_record *r) {
    if (!tracing) return;
    if (nrecords == MAX_RECORDS) {
        dropped++;
        return;
    }
    records[nrecords++] = *r;
}

/* An API call: its runtime record, and the external id of the op that made it. */
static uint32_t api_call(int kind, const char *name, int cbid, int api_kind, uint64_t t0) {
    uint32_t corr = next_corr++;
    wb_cuda_record r = {0};
    r.kind = kind;
    r.name = name;
    r.cbid = cbid;
    r.api_kind = api_kind;
    r.start_ns = t0;
    r.end_ns = now_ns();
    r.correlation = corr;
    record(&r);
    if (ext_depth > 0 && ext_depth <= MAX_EXT) {
        wb_cuda_record x = {0};
        x.kind = WB_CU_REC_EXTERNAL;
        x.correlation = corr;
        x.external_id = ext_stack[ext_depth - 1];
        record(&x);
    }
    return corr;
}

#define MAX_NAMES 1024
static char names[MAX_NAMES][128];
static int nnames;
static const char *intern(const char *s) {
    for (int i = 0; i < nnames; i++)
        if (!strcmp(names[i], s)) return names[i];
    if (nnames == MAX_NAMES) return "mock_kernel";
    snprintf(names[nnames], sizeof names[nnames], "%s", s);
    return names[nnames++];
}

static const char *op_name(const op *o) {
    char buf[48];
    if (o->kind == OP_GEMM) {
        static const char *const epi[] = {"", "_bias", "_gelu", "_gelu_bias"};
        snprintf(buf, sizeof buf, "mock_gemm_%c%c%s", o->u.g.transa ? 't' : 'n', o->u.g.transb ? 't' : 'n',
                 epi[(o->u.g.activation == WB_CU_ACT_GELU_TANH) * 2 + (o->u.g.bias != NULL)]);
    } else if (o->kind == OP_GEGLU) {
        snprintf(buf, sizeof buf, "mock_geglu");
    } else if (o->kind == OP_GEN) {
        return intern(o->u.p.k->name); /* extern "C": CUPTI reports the name as written */
    } else {
        static const char *const ew[] = {"copy", "neg", "gelu_tanh", "gelu_erf", "add", "sub", "mul", "div", "fill"};
        snprintf(buf, sizeof buf, "mock_%s", ew[o->u.e.op]);
    }
    return intern(buf);
}

static void run_gemm(const wb_cuda_gemm *g) {
    for (int64_t j = 0; j < g->n; j++)
        for (int64_t i = 0; i < g->m; i++) {
            double acc = 0;
            for (int64_t p = 0; p < g->k; p++) {
                float a = ld(g->a, g->dtype, g->transa ? p + i * g->lda : i + p * g->lda);
                float b = ld(g->b, g->dtype, g->transb ? j + p * g->ldb : p + j * g->ldb);
                acc += (double)a * b;
            }
            float v = (float)acc;
            if (g->bias) v += ld(g->bias, g->dtype, i);
            if (g->activation == WB_CU_ACT_GELU_TANH) v = gelu_tanh(v);
            st(g->d, g->dtype, i + j * g->ldd, v);
        }
}

static void run_ew(const wb_cuda_ew *e) {
    int64_t n = 1, idx[WB_CUDA_MAX_DIMS] = {0};
    for (int d = 0; d < e->ndim; d++)
        n *= e->shape[d];
    for (int64_t i = 0; i < n; i++) {
        int64_t oo = 0, oa = 0, ob = 0, rem = i;
        for (int d = e->ndim - 1; d >= 0; d--) {
            idx[d] = rem % e->shape[d];
            rem /= e->shape[d];
            oo += idx[d] * e->out_stride[d];
            oa += idx[d] * e->a_stride[d];
            ob += idx[d] * e->b_stride[d];
        }
        float a = e->op == WB_CU_EW_FILL ? 0 : ld(e->a, e->a_dtype, oa);
        float b = e->op >= WB_CU_EW_ADD && e->op <= WB_CU_EW_DIV ? ld(e->b, e->b_dtype, ob) : 0, v;
        switch (e->op) {
        case WB_CU_EW_COPY: v = a; break;
        case WB_CU_EW_NEG: v = -a; break;
        case WB_CU_EW_GELU_TANH: v = gelu_tanh(a); break;
        case WB_CU_EW_GELU_ERF: v = 0.5f * a * (1.0f + erff(a * 0.7071067811865476f)); break;
        case WB_CU_EW_ADD: v = a + b; break;
        case WB_CU_EW_SUB: v = a - b; break;
        case WB_CU_EW_MUL: v = a * b; break;
        case WB_CU_EW_DIV: v = a / b; break;
        default: v = (float)e->value; break;
        }
        st(e->out, e->out_dtype, oo, v);
    }
}

static void run_geglu(const wb_cuda_geglu *q) {
    for (int64_t r = 0; r < q->rows; r++)
        for (int64_t c = 0; c < q->cols; c++)
            st(q->out, q->dtype, r * q->cols + c,
               gelu_tanh(ld(q->gate, q->dtype, r * q->ld_gate + c)) * ld(q->up, q->dtype, r * q->ld_up + c));
}

/* Runs an op as the "device" would, with its kernel record (correlated to `corr`). */
static void execute(const op *o, uint32_t corr, uint32_t graph_id) {
    uint64_t t0 = now_ns();
    if (o->kind == OP_GEMM && getenv("WB_MOCK_GEMM_MEMSET")) { /* as cuBLASLt's split-K algorithms zero a
                                                                  workspace before their kernel */
        wb_cuda_record m = {.kind = WB_CU_REC_MEMSET, .name = "Memset", .start_ns = t0, .end_ns = t0 + 1000,
                            .correlation = corr, .stream = 13, .bytes = 4096, .graph_id = graph_id};
        record(&m);
        t0 += 1000;
    }
    if (o->kind == OP_GEMM)
        run_gemm(&o->u.g);
    else if (o->kind == OP_EW)
        run_ew(&o->u.e);
    else if (o->kind == OP_GEN)
        o->u.p.k->host_fn(&o->u.p.a);
    else
        run_geglu(&o->u.q);
    wb_cuda_record r = {0};
    r.kind = WB_CU_REC_KERNEL;
    r.name = op_name(o);
    r.start_ns = t0;
    r.end_ns = now_ns();
    r.correlation = corr;
    r.stream = 13;
    r.graph_id = graph_id;
    if (getenv("WB_MOCK_ZERO_TIMESTAMPS")) r.start_ns = r.end_ns = 0;
    r.grid[0] = r.grid[1] = r.grid[2] = r.block[1] = r.block[2] = 1;
    r.block[0] = 256;
    record(&r);
}

static int submit(const op *o) {
    if (capturing) {
        op *q = realloc(capture.ops, sizeof *q * (size_t)(capture.n + 1));
        if (!q) return fail("mock: out of memory recording a capture");
        capture.ops = q;
        capture.ops[capture.n++] = *o;
        return 0;
    }
    uint64_t t0 = now_ns();
    uint32_t corr;
    if (o->kind == OP_GEMM) { /* cuBLASLt: driver calls of its own, then a driver launch */
        api_call(WB_CU_REC_DRIVER, "cuCtxGetCurrent", 9, WB_CU_API_OTHER, t0);
        corr = api_call(WB_CU_REC_DRIVER, "cuLaunchKernelEx", 652, WB_CU_API_LAUNCH, now_ns());
    } else if (o->kind == OP_GEN) { /* a module's kernel: the driver API */
        corr = api_call(WB_CU_REC_DRIVER, "cuLaunchKernel", 307, WB_CU_API_LAUNCH, t0);
    } else {
        corr = api_call(WB_CU_REC_RUNTIME, "cudaLaunchKernel", 211, WB_CU_API_LAUNCH, t0);
    }
    execute(o, corr, 0);
    return 0;
}

/* `kernel<<<...>>>; return cudaGetLastError();`: an error nobody consumed is reported here. */
static int launch(const op *o, const char *what) {
    if (stuck(what) || submit(o)) return -1;
    int e = pending;
    pending = 0;
    return e ? wbcu_device_fail(e, what) : 0;
}

/* cuBLASLt's side of a plan: the heuristic is a host call CUDA refuses while capturing. */
static char plan_marker;
static int dev_plan_build(wbcu_plan *pl) {
    if (refused_in_capture("cublasLtMatmulAlgoGetHeuristic")) return -1;
    if (pl->key.activation != WB_CU_ACT_NONE && pl->key.activation != WB_CU_ACT_GELU_TANH)
        return fail("mock: cuBLASLt has no epilogue for activation %d (only the tanh GELU)", pl->key.activation);
    pl->impl = &plan_marker;
    return 0;
}
static void dev_plan_destroy(wbcu_plan *pl) { pl->impl = NULL; }

/* An operand below the plan's alignment preference (cuBLASLt's default: 256 bytes). */
static int under_aligned(const void *p, uint32_t pref, char which) {
    uint32_t need = pref ? pref : 256;
    if (((uintptr_t)p & (need - 1)) == 0) return 0;
    return fail("mock cuBLASLt: cublasLtMatmul failed: CUBLAS_STATUS_NOT_SUPPORTED (%c at %p is not %u-byte aligned, as "
                "its plan's CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES assumes)",
                which, p, need, which);
}

static int dev_matmul(const wbcu_plan *pl, const wb_cuda_gemm *g) {
    if (stuck("cublasLtMatmul")) return -1;
    /* cuBLASLt's rules: ld >= rows of the stored matrix */
    int64_t ar = g->transa ? g->k : g->m, br = g->transb ? g->n : g->k;
    if (g->m <= 0 || g->n <= 0 || g->k <= 0)
        return fail("mock: cuBLASLt rejects m=%lld n=%lld k=%lld", (long long)g->m, (long long)g->n, (long long)g->k);
    if (g->lda < ar || g->ldb < br || g->ldd < g->m)
        return fail("mock: invalid leading dimension (lda %lld < %lld, ldb %lld < %lld or ldd %lld < %lld)",
                    (long long)g->lda, (long long)ar, (long long)g->ldb, (long long)br, (long long)g->ldd,
                    (long long)g->m);
    if (under_aligned(g->a, pl->min_align[0], 'A') || under_aligned(g->b, pl->min_align[1], 'B') ||
        under_aligned(g->d, pl->min_align[2], 'D'))
        return -1;
    if (g->bias && ((uintptr_t)g->bias & 15u)) { /* the epilogue's vector loads fault: sticky */
        sticky = ERR_MISALIGNED;
        return wbcu_device_fail(sticky, "cublasLtMatmul (the bias epilogue)");
    }
    op o = {.kind = OP_GEMM, .u.g = *g};
    return submit(&o);
}

static int mock_elementwise(const wb_cuda_ew *e) {
    op o = {.kind = OP_EW, .u.e = *e};
    return launch(&o, "launching an elementwise kernel");
}

static int mock_geglu(const wb_cuda_geglu *q) {
    op o = {.kind = OP_GEGLU, .u.q = *q};
    return launch(&o, "launching the GeGLU kernel");
}

/* ---- generated kernels -------------------------------------------------------------------------- */

static const char image_magic[] = "wb mock image\n";

static int mock_codegen_init(wb_cuda_codegen_info *out) {
    memset(out, 0, sizeof *out);
    if (getenv("WB_MOCK_NO_NVRTC"))
        return fail("NVRTC is not available: libnvrtc.so.13: cannot open shared object file (mock: WB_MOCK_NO_NVRTC)");
    snprintf(out->compiler, sizeof out->compiler, "mock NVRTC (host kernels)");
    snprintf(out->arch, sizeof out->arch, "sm_90");
    out->host_kernels = 1;
    return 0;
}

static int mock_codegen_compile(const char *source, const char *name, const char *options, void **image, size_t *size,
                                char *log, size_t loglen) {
    (void)options;
    *image = NULL;
    *size = 0;
    if (loglen) log[0] = 0;
    char decl[192];
    snprintf(decl, sizeof decl, "extern \"C\" __global__ void %s(", name);
    if (getenv("WB_MOCK_NVRTC_FAIL") || !strstr(source, decl)) {
        snprintf(log, loglen, "%s(1): error: %s\n1 error detected in the compilation of \"%s.cu\".\n", name,
                 getenv("WB_MOCK_NVRTC_FAIL")
                     ? "identifier \"wb_mock_undefined\" is undefined (mock: WB_MOCK_NVRTC_FAIL)"
                     : "the kernel is not declared extern \"C\" __global__",
                 name);
        return fail("nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION (6)");
    }
    size_t n = strlen(image_magic) + strlen(name) + 1 + strlen(source);
    char *img = malloc(n + 1);
    if (!img) return fail("mock: out of memory for an image");
    snprintf(img, n + 1, "%s%s\n%s", image_magic, name, source);
    *image = img;
    *size = n;
    return 0;
}

static void mock_codegen_image_free(void *image) { free(image); }

/* cuModuleLoadData + cuModuleGetFunction: the image must be the mock's and name its kernel. */
static int mock_codegen_load(const void *image, size_t size, const char *name, void (*host_fn)(const void *),
                             void **kernel) {
    *kernel = NULL;
    size_t m = strlen(image_magic), n = strlen(name);
    const char *img = image;
    if (size < m + n + 1 || memcmp(img, image_magic, m))
        return fail("cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (200)");
    if (memcmp(img + m, name, n) || img[m + n] != '\n')
        return fail("cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND (500): no kernel %s in the image", name);
    if (!host_fn) return fail("mock: a generated kernel needs its host build (codegen_info.host_kernels)");
    gen_kernel *k = wbcu_loaded_find(image, size, name); /* the same image: the same module */
    if (k && k->host_fn == host_fn) {
        *kernel = k;
        return 0;
    }
    if (!(k = calloc(1, sizeof *k))) return fail("mock: out of memory loading a kernel");
    snprintf(k->name, sizeof k->name, "%s", name);
    k->host_fn = host_fn;
    if (wbcu_loaded_add(image, size, name, k)) {
        free(k);
        return fail("mock: out of memory loading a kernel");
    }
    *kernel = k; /* modules stay loaded (and listed) for the process's life */
    return 0;
}

static int mock_codegen_launch(void *kernel, const wb_cuda_poi_args *args) {
    op o = {.kind = OP_GEN, .u.p = {.k = kernel, .a = *args}};
    return launch(&o, "cuLaunchKernel");
}

static int mock_copy(void *dst, const void *src, size_t nbytes, int kind) {
    if (stuck("cudaMemcpyAsync")) return -1;
    if (kind != WB_CU_COPY_D2D && refused_in_capture("cudaMemcpyAsync (a synchronous copy)")) return -1;
    uint64_t t0 = now_ns();
    memmove(dst, src, nbytes);
    uint32_t corr = api_call(WB_CU_REC_RUNTIME, "cudaMemcpyAsync", 41, WB_CU_API_OTHER, t0);
    wb_cuda_record r = {0};
    r.kind = WB_CU_REC_MEMCPY;
    r.name = kind == WB_CU_COPY_H2D ? "Memcpy HtoD" : kind == WB_CU_COPY_D2H ? "Memcpy DtoH" : "Memcpy DtoD";
    r.start_ns = t0;
    r.end_ns = now_ns();
    r.correlation = corr;
    r.stream = 13;
    r.bytes = nbytes;
    record(&r);
    return 0;
}

static int mock_synchronize(void) {
    if (stuck("cudaStreamSynchronize") || refused_in_capture("cudaStreamSynchronize")) return -1;
    uint64_t t0 = now_ns();
    uint32_t corr = api_call(WB_CU_REC_RUNTIME, "cudaStreamSynchronize", 131, WB_CU_API_SYNC, t0);
    wb_cuda_record r = {0}; /* the wait itself, as CUPTI's synchronization records give it */
    r.kind = WB_CU_REC_SYNC;
    r.name = "sync wait: stream";
    r.start_ns = t0;
    r.end_ns = now_ns();
    r.correlation = corr;
    r.stream = 13;
    record(&r);
    return 0;
}

/* ---- graphs ------------------------------------------------------------------------------------ */

static int mock_graph_begin(void) {
    if (stuck("cudaStreamBeginCapture")) return -1;
    if (capturing) return fail("mock: a capture is already running");
    capturing = 1;
    invalidated = 0;
    capture.ops = NULL;
    capture.n = 0;
    return 0;
}

static int graph_ids;

static int mock_graph_end(void **exec) {
    if (!capturing) return fail("mock: no capture to end");
    capturing = 0;
    if (invalidated) {
        free(capture.ops);
        pending = ERR_CAPTURE_INVALIDATED;
        return wbcu_device_fail(pending, "cudaStreamEndCapture (was an unsupported call made while capturing?)");
    }
    graph *g = *exec;
    if (g) { /* update in place: the mock's topology check is the op count and kinds */
        int same = g->n == capture.n;
        for (int i = 0; same && i < g->n; i++)
            same = g->ops[i].kind == capture.ops[i].kind;
        if (same) {
            free(g->ops);
            g->ops = capture.ops;
            return 0;
        }
        free(g->ops);
        free(g);
    }
    g = malloc(sizeof *g);
    if (!g) return fail("mock: out of memory instantiating a graph");
    *g = capture;
    *exec = g;
    graph_ids++;
    return 0;
}

static int mock_graph_launch(void *exec) {
    graph *g = exec;
    if (stuck("cudaGraphLaunch")) return -1;
    uint32_t corr = api_call(WB_CU_REC_RUNTIME, "cudaGraphLaunch", 311, WB_CU_API_GRAPH_LAUNCH, now_ns());
    for (int i = 0; i < g->n; i++)
        execute(&g->ops[i], corr, (uint32_t)graph_ids);
    return 0;
}

static void mock_graph_destroy(void *exec) {
    graph *g = exec;
    if (!g) return;
    free(g->ops);
    free(g);
}

/* ---- trace ------------------------------------------------------------------------------------ */

static int mock_trace_start(void) {
    if (getenv("WB_MOCK_TRACE_START_FAIL"))
        return fail("mock: cuptiActivityEnable failed: CUPTI error 999 (CUPTI_ERROR_UNKNOWN)");
    tracing = 1;
    return 0;
}

static int mock_trace_flush(wb_cuda_record_fn fn, void *user, uint64_t *d) {
    for (int i = 0; i < nrecords; i++)
        fn(user, &records[i]);
    nrecords = 0;
    *d = dropped;
    dropped = 0;
    return 0;
}

static void mock_trace_stop(void) { tracing = 0; }

static void mock_push(uint64_t id) {
    if (ext_depth < MAX_EXT) ext_stack[ext_depth] = id;
    ext_depth++;
}

static void mock_pop(void) {
    if (ext_depth > 0) ext_depth--;
}

static int mock_timestamp(uint64_t *ns) {
    *ns = now_ns();
    return 0;
}

static int mock_trace_clock(void) { return WB_CU_CLOCK_MONOTONIC; }

static const wbcu_device mock_device = {
    .malloc = dev_malloc,
    .free = dev_free,
    .mem_info = dev_mem_info,
    .synchronize = mock_synchronize,
    .capturing = dev_capturing,
    .relax = dev_relax,
    .restore_mode = dev_restore_mode,
    .consume_error = dev_consume_error,
    .error_name = err_name,
    .error_string = err_string,
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
