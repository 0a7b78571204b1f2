/* gemm_avx512.c: the AVX-512 f32 path (see avx512.inc). Compiled with -mavx512f -mavx512bw
 * -mavx512vl -mfma only; chosen at run time. */
#define WB_PAIRS 0
#include "avx512.inc"
