/* gemm_avx512bf16.c: the AVX512_BF16 k-pair path for bf16 GEMMs (see avx512.inc): vdpbf16ps
 * multiplies two bf16 pairs per 32-bit lane into f32 accumulators, twice the f32 FMA rate. The
 * epilogues are the AVX-512 f32 ones. Compiled with -mavx512bf16 on top of the AVX-512 flags;
 * chosen at run time only on CPUs that report avx512bf16. */
#define WB_PAIRS 1
#include "avx512.inc"
