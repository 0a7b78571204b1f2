/* gemm_avx512.c: the AVX-512 path: a 12x32 register tile (24 zmm accumulators) and the
 * activations. Compiled with -mavx512f -mavx512bw -mavx512vl -mfma only; chosen at run time. */
#include <immintrin.h>
#include <math.h>

#include "gemm.h"

typedef __m512 vf;
#define VEC 16
#define MR  12

static inline vf v_set1(float x) { return _mm512_set1_ps(x); }
static inline vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf v_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline vf v_abs(vf a) { return _mm512_abs_ps(a); }
static inline vf v_round(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vf v_floor(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
/* vminps/vmaxps return the second operand when either is NaN: x second keeps NaN. */
static inline vf v_min_nan(vf k, vf x) { return _mm512_min_ps(k, x); }
static inline vf v_max_nan(vf k, vf x) { return _mm512_max_ps(k, x); }
static inline vf v_pow2i(vf n) {
    __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}
static inline vf v_gt_select(vf a, vf b, vf x, vf y) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), y, x);
}
static inline vf v_ge0_select(vf a, vf x, vf y) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_GE_OQ), y, x);
}
static inline vf v_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf v_bcast(const float *p) { return _mm512_set1_ps(*p); }
static inline vf v_zero(void) { return _mm512_setzero_ps(); }

#include "vecmath.inc"
#include "ukernel.inc"
#include "pack_avx2.inc"

const wb_cpu_isa wb_cpu_isa_avx512 = {
    .name = "avx512",
    .mr = MR,
    .nr = NR,
    .kc = 384,
    .mc = 192,
    .nc = 3072,
    .ukernel = ukernel,
    .gelu = gelu_contig,
    .geglu = geglu_contig,
    .pack_rows = pack_rows,
    .fma_loop = fma_loop,
    .lanes = VEC,
};
