/* mock_plugin.c: libwb_cuda_mock.so, a stand-in for the CUDA plugin that implements the same
 * ABI (core/abi/wb_cuda_abi.h) on the host, for tests only. Loaded with WB_CUDA_PLUGIN=<path>, it lets
 * machines without a GPU run everything the core does for device "cuda": transfers, views,
 * the translation of row-major GEMMs into column-major cuBLASLt calls (a reference GEMM that
 * honours transa/transb, leading dimensions and epilogues exactly as documented), elementwise
 * and GeGLU launches, stream capture (recorded, not executed, until the graph is launched, as
 * CUDA does) and the trace (CUPTI-like records with correlation and external ids).
 * Its kernel records are named mock_<what>[_<layout>] so tests can check what was asked for.
 * Nothing here measures a GPU: timings are host timings of reference loops. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <wb_kernels/bf16.h>
#include "wb_cuda_abi.h"

static char last_error[512];
static const char *mock_last_error(void) { return last_error; }
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}

static uint64_t now_ns(void) { /* CUPTI stamps CLOCK_REALTIME */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
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

static size_t allocated, peak;

static int mock_alloc(void **ptr, size_t nbytes) {
    size_t n = (nbytes + 255) / 256 * 256;
    *ptr = aligned_alloc(256, n ? n : 256);
    if (!*ptr) return fail("mock: out of memory for %zu bytes", nbytes);
    memset(*ptr, 0xa5, n ? n : 256); /* poison: reads before writes show */
    allocated += nbytes;
    if (allocated > peak) peak = allocated;
    return 0;
}

static void mock_free(void *ptr, size_t nbytes) {
    free(ptr);
    allocated -= nbytes;
}

static int mock_empty_cache(void) { return 0; }

static void mock_memory_stats(size_t *a, size_t *r, size_t *p) {
    *a = allocated;
    *r = allocated;
    *p = peak;
}

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

typedef enum { OP_GEMM, OP_EW, OP_GEGLU } op_kind;
typedef struct op {
    op_kind kind;
    union {
        wb_cuda_gemm g;
        wb_cuda_ew e;
        wb_cuda_geglu q;
    } u;
} op;

typedef struct graph {
    op *ops;
    int n;
} graph;

static int capturing;
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
static uint32_t api_call(const char *name, int cbid, int api_kind, uint64_t t0) {
    uint32_t corr = next_corr++;
    wb_cuda_record r = {0};
    r.kind = WB_CU_REC_RUNTIME;
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

static char names[64][48];
static int nnames;
static const char *intern(const char *s) {
    for (int i = 0; i < nnames; i++)
        if (!strcmp(names[i], s)) return names[i];
    if (nnames == 64) return "mock_kernel";
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
    if (o->kind == OP_GEMM)
        run_gemm(&o->u.g);
    else if (o->kind == OP_EW)
        run_ew(&o->u.e);
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
    uint32_t corr = api_call(o->kind == OP_GEMM ? "cuLaunchKernelEx" : "cudaLaunchKernel",
                             o->kind == OP_GEMM ? 652 : 211, WB_CU_API_LAUNCH, t0);
    execute(o, corr, 0);
    return 0;
}

static int mock_gemm(const wb_cuda_gemm *g) {
    if (g->m <= 0 || g->n <= 0 || g->k <= 0)
        return fail("mock: cuBLASLt rejects m=%lld n=%lld k=%lld", (long long)g->m, (long long)g->n, (long long)g->k);
    /* cuBLASLt's rules: ld >= rows of the stored matrix */
    int64_t ar = g->transa ? g->k : g->m, br = g->transb ? g->n : g->k;
    if (g->lda < ar || g->ldb < br || g->ldd < g->m)
        return fail("mock: invalid leading dimension (lda %lld < %lld, ldb %lld < %lld or ldd %lld < %lld)",
                    (long long)g->lda, (long long)ar, (long long)g->ldb, (long long)br, (long long)g->ldd,
                    (long long)g->m);
    if (g->activation != WB_CU_ACT_NONE && g->activation != WB_CU_ACT_GELU_TANH)
        return fail("mock: cuBLASLt has no epilogue for activation %d (only the tanh GELU)", g->activation);
    op o = {.kind = OP_GEMM, .u.g = *g};
    return submit(&o);
}

static int mock_elementwise(const wb_cuda_ew *e) {
    op o = {.kind = OP_EW, .u.e = *e};
    return submit(&o);
}

static int mock_geglu(const wb_cuda_geglu *q) {
    op o = {.kind = OP_GEGLU, .u.q = *q};
    return submit(&o);
}

static int mock_copy(void *dst, const void *src, size_t nbytes, int kind) {
    if (capturing && kind != WB_CU_COPY_D2D) return fail("mock: a synchronous copy while capturing (CUDA refuses it)");
    uint64_t t0 = now_ns();
    memmove(dst, src, nbytes);
    uint32_t corr = api_call("cudaMemcpyAsync", 41, WB_CU_API_OTHER, t0);
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
    if (capturing) return fail("mock: synchronize while capturing (CUDA refuses it)");
    uint64_t t0 = now_ns();
    uint32_t corr = api_call("cudaStreamSynchronize", 131, WB_CU_API_SYNC, t0);
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
    if (capturing) return fail("mock: a capture is already running");
    capturing = 1;
    capture.ops = NULL;
    capture.n = 0;
    return 0;
}

static int graph_ids;

static int mock_graph_end(void **exec) {
    if (!capturing) return fail("mock: no capture to end");
    capturing = 0;
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
    uint32_t corr = api_call("cudaGraphLaunch", 311, WB_CU_API_GRAPH_LAUNCH, now_ns());
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

static int mock_trace_clock(void) { return WB_CU_CLOCK_REALTIME; }

static wb_cuda_api api = {
    .abi_version = WB_CUDA_ABI_VERSION,
    .layout = WB_CUDA_ABI_LAYOUT,
    .last_error = mock_last_error,
    .init = mock_init,
    .info = mock_info,
    .alloc = mock_alloc,
    .free = mock_free,
    .empty_cache = mock_empty_cache,
    .memory_stats = mock_memory_stats,
    .copy = mock_copy,
    .synchronize = mock_synchronize,
    .gemm = mock_gemm,
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
};

/* WB_MOCK_ABI_SKEW=version|gemm|record|enums plays a plugin built from another version of the
 * ABI header, so the core's handshake can be tested. */
__attribute__((visibility("default"))) const wb_cuda_api *wb_cuda_plugin(int abi_version) {
    const char *skew = getenv("WB_MOCK_ABI_SKEW");
    if (skew && !strcmp(skew, "version")) abi_version++;
    if (skew && !strcmp(skew, "gemm")) api.layout.gemm += 8;
    if (skew && !strcmp(skew, "record")) api.layout.record -= 8;
    if (skew && !strcmp(skew, "enums")) api.layout.enums ^= 1;
    return abi_version == WB_CUDA_ABI_VERSION ? &api : NULL;
}
