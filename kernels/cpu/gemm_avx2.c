/* gemm_avx2.c: the AVX2+FMA path: a 6x16 register tile (12 ymm accumulators) and the
 * activations. Compiled with -mavx2 -mfma only; chosen at run time (see isa.c). */
#include <immintrin.h>
#include <math.h>

#include "gemm.h"

typedef __m256 vf;
#define VEC 8
#define MR  6

static inline vf v_set1(float x) { return _mm256_set1_ps(x); }
static inline vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf v_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf v_abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline vf v_round(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vf v_floor(vf a) { return _mm256_floor_ps(a); }
/* min/max return their second operand when either is NaN: x second keeps NaN. */
static inline vf v_min_nan(vf k, vf x) { return _mm256_min_ps(k, x); }
static inline vf v_max_nan(vf k, vf x) { return _mm256_max_ps(k, x); }
static inline vf v_pow2i(vf n) {
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
static inline vf v_gt_select(vf a, vf b, vf x, vf y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_GT_OQ)); }
static inline vf v_ge0_select(vf a, vf x, vf y) {
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_GE_OQ));
}
static inline vf v_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf v_bcast(const float *p) { return _mm256_broadcast_ss(p); }
static inline vf v_zero(void) { return _mm256_setzero_ps(); }

#include "vecmath.inc"
#include "ukernel.inc"
#include "pack_avx2.inc"

const wb_cpu_isa wb_cpu_isa_avx2 = {
    .name = "avx2",
    .mr = MR,
    .nr = NR,
    .kc = 256,
    .mc = 144,
    .nc = 4080,
    .ukernel = ukernel,
    .gelu = gelu_contig,
    .geglu = geglu_contig,
    .pack_rows = pack_rows,
    .fma_loop = fma_loop,
    .lanes = VEC,
};
