/* convert.c: host-side strided copies between dtypes (bf16 storage on the CPU, staging for
 * transfers to and from devices). f32 -> bf16 rounds once, to nearest even. */
#include <stdlib.h>

#include "convert.h"

void wb_host_convert(void *dst, wb_dtype dst_dtype, const int64_t *dst_stride, const void *src, wb_dtype src_dtype,
                     const int64_t *src_stride, int ndim, const int64_t *shape) {
    int64_t index[WB_MAX_DIMS] = {0}, od = 0, os = 0;
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) return;
    for (;;) {
        if (dst_dtype == src_dtype && dst_dtype == WB_BF16)
            ((uint16_t *)dst)[od] = ((const uint16_t *)src)[os]; /* bit copy: NaN payloads kept */
        else if (dst_dtype == WB_BF16 && src_dtype == WB_F32)
            ((uint16_t *)dst)[od] = wb_f32_to_bf16(((const float *)src)[os]);
        else if (dst_dtype == WB_F32 && src_dtype == WB_BF16)
            ((float *)dst)[od] = wb_bf16_to_f32(((const uint16_t *)src)[os]);
        else
            wb_store_from_double(dst, dst_dtype, od, wb_load_as_double(src, src_dtype, os));
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
#pragma omp parallel for schedule(static) if (rows * k >= 65536)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t p = 0; p < k; p++)
            buf[r * 2 * k2 + p] = src[r * rs + p * cs];
    *copy = buf;
    *ld_words = k2;
    return (const uint32_t *)buf;
}
