/* mock_stream.c: the mock plugin's stream (see mock_plugin.c): each op runs now on the host, or
 * is recorded while the stream is captured; the reference kernels it runs (a column-major GEMM
 * with cuBLASLt's transposes, leading dimensions and epilogues, the strided elementwise ops and
 * GeGLU), their record names (mock_<what>[_<layout>]), and cuBLASLt's rules on plans and operands. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wb_kernels/bf16.h>
#include "mock_internal.h"

mock_graph mock_capture; /* the ops recorded by the capture running now */

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

static const char *op_name(const op *o) {
    char buf[48];
    if (o->kind == OP_GEMM) {
        static const char *const epi[] = {"", "_bias", "_gelu", "_gelu_bias"};
        snprintf(buf, sizeof buf, "mock_gemm_%c%c%s", o->u.g.transa ? 't' : 'n', o->u.g.transb ? 't' : 'n',
                 epi[(o->u.g.activation == WB_CU_ACT_GELU_TANH) * 2 + (o->u.g.bias != NULL)]);
    } else if (o->kind == OP_GEGLU) {
        snprintf(buf, sizeof buf, "mock_geglu");
    } else if (o->kind == OP_GEN) {
        return mock_intern(o->u.p.k->name); /* extern "C": CUPTI reports the name as written */
    } else {
#define EW_NAME(ID, NAME, ...) [WB_CU_EW_##ID] = #NAME,
        static const char *const ew[WB_CU_EW_COUNT] = {[WB_CU_EW_COPY] = "copy",
                                                       [WB_CU_EW_FILL] = "fill",
                                                       [WB_CU_EW_GELU_TANH] = "gelu_tanh",
                                                       [WB_CU_EW_GELU_ERF] = "gelu_erf",
                                                       WB_BINARY_LIST(EW_NAME) WB_ARITH_UNARY_LIST(EW_NAME)
                                                           WB_ACT_LIST(EW_NAME)};
#undef EW_NAME
        snprintf(buf, sizeof buf, "mock_%s", ew[o->u.e.op]);
    }
    return mock_intern(buf);
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
        float b = WB_CU_EW_IS_BINARY(e->op) ? ld(e->b, e->b_dtype, ob) : 0, x = a, v;
        switch (e->op) { /* the listed ops: the lists' CUDA column, compiled as C (as the plugin's kernels) */
        case WB_CU_EW_COPY: v = a; break;
        case WB_CU_EW_GELU_TANH: v = gelu_tanh(a); break;
        case WB_CU_EW_GELU_ERF: v = 0.5f * a * (1.0f + erff(a * 0.7071067811865476f)); break;
#define EW_ARITH_CASE(ID, NAME, SCALAR, VEC, CUDA, ...)                                                                \
    case WB_CU_EW_##ID: v = CUDA; break;
            WB_BINARY_LIST(EW_ARITH_CASE)
            WB_ARITH_UNARY_LIST(EW_ARITH_CASE)
#undef EW_ARITH_CASE
#define EW_ACT_CASE(ID, NAME, VEC, REF, CUDA, ...)                                                                     \
    case WB_CU_EW_##ID: v = CUDA; break;
            WB_ACT_LIST(EW_ACT_CASE)
#undef EW_ACT_CASE
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
void mock_execute(const op *o, uint32_t corr, uint32_t graph_id) {
    uint64_t t0 = mock_now_ns();
    if (o->kind == OP_GEMM && getenv("WB_MOCK_GEMM_MEMSET")) { /* as cuBLASLt's split-K algorithms zero a
                                                                  workspace before their kernel */
        wb_cuda_record m = {.kind = WB_CU_REC_MEMSET,
                            .name = "Memset",
                            .start_ns = t0,
                            .end_ns = t0 + 1000,
                            .correlation = corr,
                            .stream = 13,
                            .bytes = 4096,
                            .graph_id = graph_id};
        mock_record(&m);
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
    r.end_ns = mock_now_ns();
    r.correlation = corr;
    r.stream = 13;
    r.graph_id = graph_id;
    if (getenv("WB_MOCK_ZERO_TIMESTAMPS")) r.start_ns = r.end_ns = 0;
    r.grid[0] = r.grid[1] = r.grid[2] = r.block[1] = r.block[2] = 1;
    r.block[0] = 256;
    mock_record(&r);
}

int mock_submit(const op *o) {
    if (mock_capturing) {
        op *q = realloc(mock_capture.ops, sizeof *q * (size_t)(mock_capture.n + 1));
        if (!q) return mock_fail("mock: out of memory recording a capture");
        mock_capture.ops = q;
        mock_capture.ops[mock_capture.n++] = *o;
        return 0;
    }
    uint64_t t0 = mock_now_ns();
    uint32_t corr;
    if (o->kind == OP_GEMM) { /* cuBLASLt: a runtime query and driver calls of its own, then a driver launch */
        mock_api_call(WB_CU_REC_RUNTIME, "cudaGetDevice_v3020", 17, WB_CU_API_OTHER, t0);
        mock_api_call(WB_CU_REC_DRIVER, "cuCtxGetCurrent", 9, WB_CU_API_OTHER, t0);
        corr = mock_api_call(WB_CU_REC_DRIVER, "cuLaunchKernelEx", 652, WB_CU_API_LAUNCH, mock_now_ns());
    } else if (o->kind == OP_GEN) { /* a module's kernel: the driver API */
        corr = mock_api_call(WB_CU_REC_DRIVER, "cuLaunchKernel", 307, WB_CU_API_LAUNCH, t0);
    } else {
        corr = mock_api_call(WB_CU_REC_RUNTIME, "cudaLaunchKernel", 211, WB_CU_API_LAUNCH, t0);
    }
    mock_execute(o, corr, 0);
    return 0;
}

/* `kernel<<<...>>>; return cudaGetLastError();`: an error nobody consumed is reported here. */
int mock_launch(const op *o, const char *what) {
    if (mock_stuck(what) || mock_submit(o)) return -1;
    int e = mock_pending;
    mock_pending = 0;
    return e ? wbcu_device_fail(e, what) : 0;
}

/* cuBLASLt's side of a plan: the heuristic is a host call CUDA refuses while capturing. */
static char plan_marker;
int dev_plan_build(wbcu_plan *pl) {
    if (mock_refused_in_capture("cublasLtMatmulAlgoGetHeuristic")) return -1;
    if (pl->key.activation != WB_CU_ACT_NONE && pl->key.activation != WB_CU_ACT_GELU_TANH)
        return mock_fail("mock: cuBLASLt has no epilogue for activation %d (only the tanh GELU)", pl->key.activation);
    pl->impl = &plan_marker;
    return 0;
}
void dev_plan_destroy(wbcu_plan *pl) { pl->impl = NULL; }

/* An operand below the plan's alignment preference (cuBLASLt's default: 256 bytes). */
static int under_aligned(const void *p, uint32_t pref, char which) {
    uint32_t need = pref ? pref : 256;
    if (((uintptr_t)p & (need - 1)) == 0) return 0;
    return mock_fail(
        "mock cuBLASLt: cublasLtMatmul failed: CUBLAS_STATUS_NOT_SUPPORTED (%c at %p is not %u-byte aligned, as "
        "its plan's CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES assumes)",
        which, p, need, which);
}

int dev_matmul(const wbcu_plan *pl, const wb_cuda_gemm *g) {
    if (mock_stuck("cublasLtMatmul")) return -1;
    /* cuBLASLt's rules: ld >= rows of the stored matrix */
    int64_t ar = g->transa ? g->k : g->m, br = g->transb ? g->n : g->k;
    if (g->m <= 0 || g->n <= 0 || g->k <= 0)
        return mock_fail("mock: cuBLASLt rejects m=%lld n=%lld k=%lld", (long long)g->m, (long long)g->n,
                         (long long)g->k);
    if (g->lda < ar || g->ldb < br || g->ldd < g->m)
        return mock_fail("mock: invalid leading dimension (lda %lld < %lld, ldb %lld < %lld or ldd %lld < %lld)",
                         (long long)g->lda, (long long)ar, (long long)g->ldb, (long long)br, (long long)g->ldd,
                         (long long)g->m);
    if (under_aligned(g->a, pl->min_align[0], 'A') || under_aligned(g->b, pl->min_align[1], 'B') ||
        under_aligned(g->d, pl->min_align[2], 'D'))
        return -1;
    if (g->bias && ((uintptr_t)g->bias & 15u)) { /* the epilogue's vector loads fault: sticky */
        mock_sticky = MOCK_ERR_MISALIGNED;
        return wbcu_device_fail(mock_sticky, "cublasLtMatmul (the bias epilogue)");
    }
    op o = {.kind = OP_GEMM, .u.g = *g};
    return mock_submit(&o);
}

int mock_elementwise(const wb_cuda_ew *e) {
    op o = {.kind = OP_EW, .u.e = *e};
    return mock_launch(&o, "launching an elementwise kernel");
}

int mock_geglu(const wb_cuda_geglu *q) {
    op o = {.kind = OP_GEGLU, .u.q = *q};
    return mock_launch(&o, "launching the GeGLU kernel");
}
