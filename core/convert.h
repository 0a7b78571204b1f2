/* convert.h: bf16 <-> f32 conversion and host-side strided copies between dtypes (internal). */
#ifndef WB_CONVERT_H
#define WB_CONVERT_H

#include <stdint.h>
#include <string.h>

#include "wb.h"

/* f32 -> bf16, round to nearest, ties to even; NaN stays NaN (quiet, sign kept); infinities
 * and signed zeros are exact; values past the largest bf16 round to infinity as IEEE says. */
static inline uint16_t wb_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep it a NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float wb_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline double wb_load_as_double(const void *base, wb_dtype dtype, int64_t i) {
    if (dtype == WB_BF16) return wb_bf16_to_f32(((const uint16_t *)base)[i]);
    return ((const float *)base)[i];
}

static inline void wb_store_from_double(void *base, wb_dtype dtype, int64_t i, double v) {
    if (dtype == WB_BF16)
        ((uint16_t *)base)[i] = wb_f32_to_bf16((float)v);
    else
        ((float *)base)[i] = (float)v;
}

/* dst (its own strides) = src read through `src_stride` (broadcast strides allowed), converting
 * dtypes; both on the host. */
void wb_host_convert(void *dst, wb_dtype dst_dtype, const int64_t *dst_stride, const void *src, wb_dtype src_dtype,
                     const int64_t *src_stride, int ndim, const int64_t *shape);

/* A bf16 matrix M[r][p] = src[r * rs + p * cs] (r < rows, p < k) as 32-bit k-pair words:
 * W[r][q] holds (M[r][2q], M[r][2q+1]) (low half first), W[r][q] = words[r * *ld_words + q] for
 * q < (k + 1) / 2. When the rows are contiguous along k with an even stride, k is even and the
 * data is 4-byte aligned (and force_copy is 0), the words are the source itself; otherwise a zero-padded copy is made
 * into *copy (free it). Returns NULL when that copy cannot be allocated. */
const uint32_t *wb_bf16_pair_words(const uint16_t *src, int64_t rows, int64_t k, int64_t rs, int64_t cs, int force_copy,
                                   int64_t *ld_words, uint16_t **copy);

#endif
