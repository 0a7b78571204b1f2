/* gemm_avx2bf16.c: bf16 GEMMs on AVX2 CPUs (see avx2.inc): packed operands stay bf16 in
 * k-pairs and are widened in registers, so the weights cost half the memory traffic of f32. */
#define WB_PAIRS 1
#include "avx2.inc"
