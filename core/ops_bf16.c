/* ops_bf16.c: the pointwise ops on bf16 tensors on the cpu (add, sub, mul, div, neg, gelu,
 * geglu). Storage is bf16, the math is f32, the result is rounded once: a chunk of inputs is
 * widened into f32 buffers, the f32 arithmetic (for the GELUs, the ISA's vectorised routines,
 * the same as the f32 kernels) runs on it, and the chunk is rounded back. One kernel per op, as
 * in f32, so kernel counts and graphs read the same in both dtypes. (The GEMMs are in
 * ops_linear.c.) */
#include <stdio.h>
#include <string.h>

#include "../kernels/cpu/gemm.h"
#include "../kernels/cpu/pointwise.h"
#include "convert.h"
#include "linear_ops.h"
#include "op.h"
#include "pointwise_ops.h"

#define CHUNK 1024

typedef enum bf_op { BF_ADD, BF_SUB, BF_MUL, BF_DIV, BF_NEG, BF_GELU_TANH, BF_GELU_ERF, BF_GEGLU } bf_op;

typedef struct bf_launch {
    bf_op op;
    const wb_cpu_isa *isa;
    int ndim, contiguous;
    int64_t n;
    int64_t shape[WB_MAX_DIMS], as[WB_MAX_DIMS], bs[WB_MAX_DIMS];
    uint16_t *out; /* a new contiguous tensor */
    const uint16_t *a, *b;
} bf_launch;

static void compute(const bf_launch *k, const float *a, const float *b, float *y, int64_t len) {
    switch (k->op) {
    case BF_ADD:
        for (int64_t i = 0; i < len; i++)
            y[i] = a[i] + b[i];
        break;
    case BF_SUB:
        for (int64_t i = 0; i < len; i++)
            y[i] = a[i] - b[i];
        break;
    case BF_MUL:
        for (int64_t i = 0; i < len; i++)
            y[i] = a[i] * b[i];
        break;
    case BF_DIV:
        for (int64_t i = 0; i < len; i++)
            y[i] = a[i] / b[i];
        break;
    case BF_NEG:
        for (int64_t i = 0; i < len; i++)
            y[i] = -a[i];
        break;
    case BF_GELU_TANH:
    case BF_GELU_ERF: k->isa->gelu(a, y, len, k->op == BF_GELU_ERF); break;
    case BF_GEGLU: k->isa->geglu(a, b, y, len); break;
    }
}

static int binary(bf_op op) { return op <= BF_DIV || op == BF_GEGLU; }

static void run_bf16(void *v) {
    const bf_launch *k = v;
    int64_t chunks = (k->n + CHUNK - 1) / CHUNK;
    if (k->contiguous) {
#pragma omp parallel for schedule(static) if (k->n >= WB_CPU_PARALLEL_MIN)
        for (int64_t c = 0; c < chunks; c++) {
            float a[CHUNK], b[CHUNK], y[CHUNK];
            int64_t s = c * CHUNK, len = k->n - s < CHUNK ? k->n - s : CHUNK;
            for (int64_t i = 0; i < len; i++)
                a[i] = wb_bf16_to_f32(k->a[s + i]);
            if (binary(k->op))
                for (int64_t i = 0; i < len; i++)
                    b[i] = wb_bf16_to_f32(k->b[s + i]);
            compute(k, a, b, y, len);
            for (int64_t i = 0; i < len; i++)
                k->out[s + i] = wb_f32_to_bf16(y[i]);
        }
        return;
    }
    /* Broadcast or strided inputs: gather a chunk through the strides (the output is contiguous
     * in row-major order, so its index is the running count). */
    int64_t index[WB_MAX_DIMS] = {0}, oa = 0, ob = 0;
    for (int64_t c = 0; c < chunks; c++) {
        float a[CHUNK], b[CHUNK], y[CHUNK];
        int64_t s = c * CHUNK, len = k->n - s < CHUNK ? k->n - s : CHUNK;
        for (int64_t i = 0; i < len; i++) {
            a[i] = wb_bf16_to_f32(k->a[oa]);
            if (binary(k->op)) b[i] = wb_bf16_to_f32(k->b[ob]);
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

wb_status wb_cpu_bf16_pointwise(wb_op_call *c) {
    static const char *const names[] = {"add", "sub", "mul", "div", "neg", "gelu_tanh", "gelu_erf", "geglu"};
    bf_op op;
    switch (c->def->id) {
    case WB_OP_ADD: op = BF_ADD; break;
    case WB_OP_SUB: op = BF_SUB; break;
    case WB_OP_MUL: op = BF_MUL; break;
    case WB_OP_DIV: op = BF_DIV; break;
    case WB_OP_NEG: op = BF_NEG; break;
    case WB_OP_GELU: op = c->p.gemm.activation == WB_ACT_GELU_ERF ? BF_GELU_ERF : BF_GELU_TANH; break;
    case WB_OP_GEGLU: op = BF_GEGLU; break;
    default: return wb_error(WB_ERR_UNSUPPORTED, "no bf16 cpu kernel for this op");
    }
    wb_tensor *out = c->out, *a = c->in[0], *b = binary(op) ? c->in[1] : NULL;
    bf_launch k = {op,
                   wb_cpu_isa_active(),
                   out->ndim,
                   0,
                   wb_tensor_numel(out),
                   {0},
                   {0},
                   {0},
                   wb_tensor_data(out),
                   wb_tensor_data(a),
                   b ? wb_tensor_data(b) : NULL};
    memcpy(k.shape, out->shape, sizeof k.shape);
    wb_broadcast_strides(a, out->ndim, out->shape, k.as);
    if (b) wb_broadcast_strides(b, out->ndim, out->shape, k.bs);
    k.contiguous = wb_same_geometry_contiguous(a, out) && (!b || wb_same_geometry_contiguous(b, out));
    char name[64];
    snprintf(name, sizeof name, "wb_%s_bf16_%s%s", names[op], k.isa->name, k.contiguous ? "" : "_strided");
    wb_kernel_desc d = {wb_intern(name), c->def->flops ? c->def->flops(c) : 0, c->def->bytes ? c->def->bytes(c) : 0,
                        k.contiguous && k.n >= WB_CPU_PARALLEL_MIN ? wb_get_num_threads() : 1};
    wb_kernel_launch(&d, run_bf16, &k, sizeof k, NULL);
    wb_storage_bump_version(out->storage);
    return WB_OK;
}
