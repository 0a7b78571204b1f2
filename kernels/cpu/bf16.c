/* bf16.c: the loops that move bf16 data on the CPU (see wb_kernels/bf16.h): strided
 * conversion, widening, rounding, k-pair packing, the bf16 GEMM driver around the f32 and
 * k-pair engines, and the chunked bf16 pointwise kernels. */
#include <stdlib.h>

#include "wb_kernels/bf16.h"
#include "wb_kernels/pointwise.h"
#include "wb_kernels/spans.h"

void wb_cpu_convert(void *dst, wb_cpu_dtype dst_dtype, const int64_t *dst_stride, const void *src,
                    wb_cpu_dtype src_dtype, const int64_t *src_stride, int ndim, const int64_t *shape) {
    int64_t index[WB_CPU_MAX_DIMS] = {0}, od = 0, os = 0;
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) return;
    for (;;) {
        if (dst_dtype == WB_CPU_BF16 && src_dtype == WB_CPU_BF16)
            ((uint16_t *)dst)[od] = ((const uint16_t *)src)[os]; /* bit copy: NaN payloads kept */
        else if (dst_dtype == WB_CPU_BF16)
            ((uint16_t *)dst)[od] = wb_f32_to_bf16(((const float *)src)[os]);
        else if (src_dtype == WB_CPU_BF16)
            ((float *)dst)[od] = wb_bf16_to_f32(((const uint16_t *)src)[os]);
        else
            ((float *)dst)[od] = ((const float *)src)[os];
        int d = ndim - 1;
        for (; d >= 0; d--) {
            od += dst_stride[d];
            os += src_stride[d];
            if (++index[d] < shape[d]) break;
            od -= shape[d] * dst_stride[d];
            os -= shape[d] * src_stride[d];
            index[d] = 0;
        }
        if (d < 0) return;
    }
}

void wb_bf16_round_rows(uint16_t *out, int64_t ldo, const float *src, int64_t m, int64_t n) {
    WB_CPU_PARALLEL(wb_cpu_threads_for(m * n), {
        int64_t lo, hi;
        wb_cpu_share(m, &lo, &hi);
        for (int64_t i = lo; i < hi; i++)
            for (int64_t j = 0; j < n; j++)
                out[i * ldo + j] = wb_f32_to_bf16(src[i * n + j]);
    });
}

float *wb_bf16_widen(const uint16_t *src, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    float *dst = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof(float));
    if (!dst) return NULL;
    WB_CPU_PARALLEL(wb_cpu_threads_for(rows * cols), {
        int64_t lo, hi;
        wb_cpu_share(rows, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            uint32_t *d = (uint32_t *)(dst + i * cols);
            const uint16_t *r = src + i * rs;
            if (cs == 1)
                for (int64_t j = 0; j < cols; j++)
                    d[j] = (uint32_t)r[j] << 16;
            else
                for (int64_t j = 0; j < cols; j++)
                    d[j] = (uint32_t)r[j * cs] << 16;
        }
    });
    return dst;
}

/* The f32 output of wb_gemm_run_bf16, reused across calls (wb_cpu_reserve): a fresh one per call
 * cost the 2-thread n = 1024 bf16 GEMM ~10% in page faults. Like the GEMM's packing buffers, it
 * assumes one GEMM at a time. */
static float *scratch_c;
static size_t scratch_c_cap;

const uint32_t *wb_bf16_pair_words(const uint16_t *src, int64_t rows, int64_t k, int64_t rs, int64_t cs, int force_copy,
                                   int64_t *ld_words, uint16_t **copy) {
    *copy = NULL;
    int64_t k2 = (k + 1) / 2;
    if (!force_copy && (cs == 1 || k <= 1) && k % 2 == 0 && (rs % 2 == 0 || rows <= 1) && ((uintptr_t)src & 3u) == 0) {
        *ld_words = rows <= 1 ? k2 : rs / 2;
        return (const uint32_t *)src;
    }
    uint16_t *buf = calloc((size_t)(rows > 0 ? rows : 1) * (size_t)(k2 > 0 ? k2 : 1) * 2, sizeof(uint16_t));
    if (!buf) return NULL;
    WB_CPU_PARALLEL(wb_cpu_threads_for(rows * k), {
        int64_t lo, hi;
        wb_cpu_share(rows, &lo, &hi);
        for (int64_t r = lo; r < hi; r++)
            for (int64_t p = 0; p < k; p++)
                buf[r * 2 * k2 + p] = src[r * rs + p * cs];
    });
    *copy = buf;
    *ld_words = k2;
    return (const uint32_t *)buf;
}

/* The B operand(s) as k-pair words: B[p][j] = b[p*rsb + j*csb] is row j of a [n, k] matrix
 * read along k. Gate and up must end up with one layout (the packer walks both alike). */
static int pair_b(const wb_gemm_problem *p, const uint32_t **b, const uint32_t **bu, int64_t *ld, uint16_t **cb,
                  uint16_t **cu) {
    int64_t ld_up = 0;
    *b = wb_bf16_pair_words((const uint16_t *)p->b, p->n, p->k, p->csb, p->rsb, 0, ld, cb);
    *bu = p->b_up ? wb_bf16_pair_words((const uint16_t *)p->b_up, p->n, p->k, p->csb, p->rsb, 0, &ld_up, cu) : NULL;
    if (p->b_up && *b && *bu && (ld_up != *ld || (*cb == NULL) != (*cu == NULL))) {
        free(*cb), free(*cu);
        *b = wb_bf16_pair_words((const uint16_t *)p->b, p->n, p->k, p->csb, p->rsb, 1, ld, cb);
        *bu = wb_bf16_pair_words((const uint16_t *)p->b_up, p->n, p->k, p->csb, p->rsb, 1, &ld_up, cu);
    }
    return *b && (!p->b_up || *bu) ? 0 : -1;
}

int wb_gemm_run_bf16(const wb_cpu_isa *isa, const wb_gemm_problem *p) {
    wb_gemm_problem q = *p;
    int64_t m = q.m, n = q.n, k = q.k;
    float *b = NULL, *bu = NULL, *bias = NULL, *bias_up = NULL, *c = NULL; /* c: scratch */
    uint16_t *ca = NULL, *cb = NULL, *cu = NULL;
    int rc = -1;
    if (isa->bf16_pairs) { /* k-pair path: operands stay bf16, posed in pair space */
        int64_t la, lb = 0;
        const uint32_t *aw = wb_bf16_pair_words((const uint16_t *)p->a, m, k, q.rsa, q.csa, 0, &la, &ca), *bw = NULL,
                       *buw = NULL;
        if (!aw) goto done;
        q.a = (const float *)aw, q.rsa = la, q.csa = 1;
        if (!q.packed_b) {
            if (pair_b(p, &bw, &buw, &lb, &cb, &cu)) goto done;
            q.b = (const float *)bw, q.b_up = (const float *)buw, q.rsb = 1, q.csb = lb;
        }
        q.k = (k + 1) / 2;
    } else { /* widening path: the packer widens A; B comes packed (widened once) or is widened here */
        q.a_bf16 = 1; /* the packer widens A */
        if (!q.packed_b) {
            if (!(b = wb_bf16_widen((const uint16_t *)p->b, k, n, q.rsb, q.csb))) goto done;
            if (q.b_up && !(bu = wb_bf16_widen((const uint16_t *)p->b_up, k, n, q.rsb, q.csb))) goto done;
            q.b = b, q.b_up = bu, q.rsb = n, q.csb = 1;
        }
    }
    if (q.bias && !(bias = wb_bf16_widen((const uint16_t *)p->bias, 1, n, n, 1))) goto done;
    if (q.bias_up && !(bias_up = wb_bf16_widen((const uint16_t *)p->bias_up, 1, n, n, 1))) goto done;
    q.bias = bias, q.bias_up = bias_up;
    if (!(c = wb_cpu_reserve(&scratch_c, &scratch_c_cap, (size_t)(m * n > 0 ? m * n : 1)))) goto done;
    q.c = c, q.ldc = n;
    if (wb_gemm_run(isa, &q)) goto done;
    wb_bf16_round_rows((uint16_t *)p->c, p->ldc, c, m, n);
    rc = 0;
done:
    free(b), free(bu), free(bias), free(bias_up), free(ca), free(cb), free(cu);
    return rc;
}

#define CHUNK 1024

static void compute(const wb_cpu_bf16_launch *k, const float *a, const float *b, float *y, int64_t len) {
    switch (k->op) {
#define BF16_BINARY_CASE(ID, ...)                                                                                      \
    case WB_BF16_##ID:                                                                                                 \
        for (int64_t i = 0; i < len; i++)                                                                              \
            y[i] = wb_cpu_binary_scalar(WB_CPU_##ID, a[i], b[i]);                                                      \
        break;
        WB_BINARY_LIST(BF16_BINARY_CASE)
#undef BF16_BINARY_CASE
#define BF16_UNARY_CASE(ID, ...)                                                                                       \
    case WB_BF16_##ID:                                                                                                 \
        for (int64_t i = 0; i < len; i++)                                                                              \
            y[i] = wb_cpu_unary_scalar(WB_CPU_##ID, a[i]);                                                             \
        break;
        WB_ARITH_UNARY_LIST(BF16_UNARY_CASE)
#undef BF16_UNARY_CASE
    case WB_BF16_GELU_TANH:
    case WB_BF16_GELU_ERF: k->isa->gelu(a, y, len, k->op == WB_BF16_GELU_ERF); break;
    case WB_BF16_GEGLU: k->isa->geglu(a, b, y, len); break;
    case WB_BF16_ACT: k->isa->activation(k->act, a, k->act == WB_CPU_SWIGLU ? b : NULL, y, len); break;
    }
}

void wb_cpu_bf16_pointwise_run(const wb_cpu_bf16_launch *k) {
    int64_t chunks = (k->n + CHUNK - 1) / CHUNK;
    int binary = wb_cpu_bf16_op_binary(k->op, k->act);
    if (k->contiguous) {
        wb_cpu_spans *spans = wb_cpu_spans_open("elements");
        WB_CPU_PARALLEL(wb_cpu_threads_for(k->n), {
            int64_t t0 = wb_cpu_span_start(spans), done = 0, lo, hi;
            wb_cpu_share(chunks, &lo, &hi);
            for (int64_t c = lo; c < hi; c++) {
                float a[CHUNK], b[CHUNK], y[CHUNK];
                int64_t s = c * CHUNK, len = k->n - s < CHUNK ? k->n - s : CHUNK;
                for (int64_t i = 0; i < len; i++)
                    a[i] = wb_bf16_to_f32(k->a[s + i]);
                if (binary)
                    for (int64_t i = 0; i < len; i++)
                        b[i] = wb_bf16_to_f32(k->b[s + i]);
                compute(k, a, b, y, len);
                for (int64_t i = 0; i < len; i++)
                    k->out[s + i] = wb_f32_to_bf16(y[i]);
                done += len;
            }
            wb_cpu_span_done(spans, t0, done);
        });
        return;
    }
    /* Broadcast or strided inputs: gather a chunk through the strides (the output is contiguous
     * in row-major order, so its index is the running count). */
    int64_t index[WB_CPU_MAX_DIMS] = {0}, oa = 0, ob = 0;
    for (int64_t c = 0; c < chunks; c++) {
        float a[CHUNK], b[CHUNK], y[CHUNK];
        int64_t s = c * CHUNK, len = k->n - s < CHUNK ? k->n - s : CHUNK;
        for (int64_t i = 0; i < len; i++) {
            a[i] = wb_bf16_to_f32(k->a[oa]);
            if (binary) b[i] = wb_bf16_to_f32(k->b[ob]);
            for (int d = k->ndim - 1; d >= 0; d--) {
                oa += k->as[d], ob += k->bs[d];
                if (++index[d] < k->shape[d]) break;
                oa -= k->shape[d] * k->as[d], ob -= k->shape[d] * k->bs[d];
                index[d] = 0;
            }
        }
        compute(k, a, b, y, len);
        for (int64_t i = 0; i < len; i++)
            k->out[s + i] = wb_f32_to_bf16(y[i]);
    }
}
