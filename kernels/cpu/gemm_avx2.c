/* gemm_avx2.c: the AVX2+FMA f32 path (see avx2.inc). Compiled with -mavx2 -mfma only; chosen at
 * run time (see isa.c). */
#define WB_PAIRS 0
#include "avx2.inc"
