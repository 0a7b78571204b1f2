/* gemm_scalar.c: the portable path (plain C, no ISA flags): a 4x8 tile, the same activation
 * algorithm as the vector paths, and the double-precision references the tests trust. It runs
 * on any x86-64 (or other) CPU, and is forced in tests with WB_CPU_ISA=scalar. */
#include <math.h>
#include <string.h>

#include "wb_kernels/gemm.h"

#include "scalar_vf.inc"
#include "vecmath.inc"

#define MR 4
#define NR 8

static void start_tile(const wb_gemm_tile *t, int m, float c[MR][NR]) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < NR; j++)
            c[i][j] = t->c_in ? t->c_in[i * t->ldc_in + j] : t->bias ? t->bias[j] : 0.0f;
}

static void store_tile(const wb_gemm_tile *t, int m, float c[MR][NR]);

static void ukernel(const wb_gemm_tile *t, int m) {
    float c[MR][NR];
    start_tile(t, m, c);
    const float *a = t->a, *b = t->b;
    for (int64_t k = 0; k < t->kc; k++, a += MR, b += NR)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < NR; j++)
                c[i][j] = fmaf(a[i], b[j], c[i][j]);
    store_tile(t, m, c);
}

/* The k-pair bf16 kernel in portable C, with vdpbf16ps's arithmetic: each 32-bit slot holds
 * two bf16 (the lower k in the low half); per lane, acc += a_hi * b_hi, then acc += a_lo * b_lo
 * (bf16 products are exact in f32; each sum rounds). It lets the tests drive the k-pair packing
 * and the whole bf16 path on any CPU (WB_CPU_BF16=emulated). */
static inline float bf16_lo(uint32_t w) {
    uint32_t u = w << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline float bf16_hi(uint32_t w) {
    uint32_t u = w & 0xffff0000u;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void ukernel_pairs(const wb_gemm_tile *t, int m) {
    float c[MR][NR];
    start_tile(t, m, c);
    const uint32_t *a = (const uint32_t *)t->a, *b = (const uint32_t *)t->b;
    for (int64_t k = 0; k < t->kc; k++, a += MR, b += NR)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < NR; j++) {
                c[i][j] += bf16_hi(a[i]) * bf16_hi(b[j]);
                c[i][j] += bf16_lo(a[i]) * bf16_lo(b[j]);
            }
    store_tile(t, m, c);
}

static void store_tile(const wb_gemm_tile *t, int m, float c[MR][NR]) {
    for (int i = 0; i < m; i++) {
        float *out = t->c_out + i * t->ldc_out;
        switch (t->store) {
        case WB_STORE_PLAIN:
            for (int j = 0; j < NR; j++)
                out[j] = c[i][j];
            break;
        case WB_STORE_GELU_TANH:
            for (int j = 0; j < NR; j++)
                out[j] = v_gelu_tanh(c[i][j]);
            break;
        case WB_STORE_GELU_ERF:
            for (int j = 0; j < NR; j++)
                out[j] = v_gelu_erf(c[i][j]);
            break;
        case WB_STORE_GEGLU: /* (into a packed-A sliver: column j at j*MR + i) */
            for (int j = 0; j < NR / 2; j++)
                *(t->c_out_panel ? t->c_out + j * MR + i : out + j) = v_gelu_tanh(c[i][j]) * c[i][j + NR / 2];
            break;
        case WB_STORE_SILU:
            for (int j = 0; j < NR; j++)
                out[j] = v_silu(c[i][j]);
            break;
        case WB_STORE_SWIGLU:
            for (int j = 0; j < NR / 2; j++)
                *(t->c_out_panel ? t->c_out + j * MR + i : out + j) = v_silu(c[i][j]) * c[i][j + NR / 2];
            break;
        }
    }
}

static void gelu_contig(const float *x, float *y, int64_t n, int erf_form) {
    for (int64_t i = 0; i < n; i++)
        y[i] = erf_form ? v_gelu_erf(x[i]) : v_gelu_tanh(x[i]);
}

static void geglu_contig(const float *g, const float *u, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = v_gelu_tanh(g[i]) * u[i];
}

static void act_contig(wb_cpu_act act, const float *x, const float *u, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = v_activation(act, x[i], u ? u[i] : 0.0f);
}

static double fma_loop(int64_t iters) {
    float acc[12], x = 0.999999f, y = 1e-7f, s = 0;
    for (int i = 0; i < 12; i++)
        acc[i] = (float)i;
    for (int64_t it = 0; it < iters; it++)
        for (int i = 0; i < 12; i++)
            acc[i] = acc[i] * x + y;
    for (int i = 0; i < 12; i++)
        s += acc[i];
    return s;
}

/* The portable path and its k-pair twin (bf16 pairs, for tests) share everything but the
 * microkernel; the pair path's kc counts pairs. */
#define PORTABLE_ISA(NAME, UKERNEL, PAIRS)                                                                             \
    {                                                                                                                  \
        .name = NAME, .mr = MR, .nr = NR, .kc = 256, .mc = 128, .nc = 1024, .ukernel = UKERNEL, .gelu = gelu_contig,   \
        .geglu = geglu_contig, .activation = act_contig, .fma_loop = fma_loop, .lanes = 1, .bf16_pairs = PAIRS         \
    }

const wb_cpu_isa wb_cpu_isa_scalar = PORTABLE_ISA("scalar", ukernel, 0);
double wb_gelu_tanh_ref(double x) {
    double y = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * y));
}

double wb_gelu_erf_ref(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }

double wb_act_ref(wb_cpu_act act, double x, double u) {
    switch (act) {
#define ACT_REF_CASE(ID, name, VEC, REF, ...)                                                                          \
    case WB_CPU_##ID: return REF;
        WB_ACT_LIST(ACT_REF_CASE)
#undef ACT_REF_CASE
    case WB_CPU_SWIGLU: return x / (1.0 + exp(-x)) * u;
    default: return x;
    }
}

const wb_cpu_isa wb_cpu_isa_bf16emu = PORTABLE_ISA("emulated", ukernel_pairs, 1);