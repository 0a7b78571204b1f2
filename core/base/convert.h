/* convert.h: reading and writing single tensor elements as doubles on the host, for the checks
 * and transfers of the core (internal). The bf16 conversions and the loops that move bf16 data
 * are CPU kernels (wb_kernels/bf16.h). */
#ifndef WB_CONVERT_H
#define WB_CONVERT_H

#include <stdint.h>

#include <wb_kernels/bf16.h>

#include <wb/wb.h>

_Static_assert(WB_CPU_MAX_DIMS == WB_MAX_DIMS, "the kernels' dimension limit is the core's");
_Static_assert((int)WB_CPU_F32 == (int)WB_F32 && (int)WB_CPU_BF16 == (int)WB_BF16, "kernel dtypes are wb_dtype's");

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

#endif
