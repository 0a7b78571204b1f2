/* wb/kernel.h (floor base): what a kernel is, as data. A launch carries a kernel kind: the
 * op, the ISA (or library), the register tile, the BLAS layout letters and the epilogue as
 * fields. Kinds are interned by a hash of those fields, so a kind is one pointer that events and
 * graph nodes keep for the life of the process; the name is formatted from the fields when it
 * is shown or exported, and nothing ever parses a name back into fields.
 *
 *   name = <prefix>_<op>[_<dtype>][_<isa>][_<tile_m>x<tile_n>][_<layout>][_<epilogue>][_<variant>]
 *   e.g. wb_sgemm_avx2_6x16_tn_bias_gelu_tanh, wb_dual_sgemm_avx512_12x32_tn_geglu,
 *        wb_add_bf16_avx2_strided, wb_geglu_f32x4, cublasLt_sgemm_tn_bias.
 * A device kernel that the device names itself (CUPTI's name for a cuBLASLt kernel) is a kind
 * with `external` set: its name is that string. */
#ifndef WB_KERNEL_H
#define WB_KERNEL_H

#include <stddef.h>

#include <wb/wb.h>

typedef struct wb_kernel_kind {
    const char *prefix;   /* "wb" (NULL means "wb") or the library that runs it ("cublasLt") */
    const char *op;       /* "sgemm", "dual_sgemm", "add", "gelu_erf", "copy_convert", ... */
    const char *dtype;    /* element type when the name carries it ("bf16"), else NULL */
    const char *isa;      /* CPU path ("avx2", "scalar", "generic") or NULL */
    int tile_m, tile_n;   /* register tile, 0 when the kernel has none */
    char layout[3];       /* BLAS layout letters of B and A ("tn"), "" when none */
    int bias;             /* the epilogue adds a bias */
    wb_activation act;    /* the epilogue's activation (WB_ACT_NONE: none) */
    const char *variant;  /* trailing qualifier ("contig", "strided", "f32x4"), or NULL */
    const char *external; /* the device's own name for the kernel, or NULL */
    const char *ops;      /* a generated kernel's fused ops ("gelu_tanh mul"), or NULL; not in the name */
} wb_kernel_kind;

/* The interned kind with the same fields as *key (strings compared by content). Never NULL:
 * when memory runs out, a shared kind named "wb_unknown_kernel" stands in. */
const wb_kernel_kind *wb_kernel_kind_intern(const wb_kernel_kind *key);
/* The kind's name, formatted on first use and kept. */
const char *wb_kernel_kind_name(const wb_kernel_kind *k);
/* The epilogue as a word list: "bias", "gelu_tanh", "bias_geglu"; "none" when there is none. A GEMM
 * kind (one with a register tile) that carries `ops` runs a generated epilogue: its ops but the
 * first (the GEMM itself) follow, "bias_sigmoid_mul_add" for "linear sigmoid mul add". A trace's
 * reader gives the same string back from the same fields. Longer than WB_EPILOGUE_MAX - 1 bytes
 * it is cut there (alike on every side, so kinds still compare). */
#define WB_EPILOGUE_MAX 96
const char *wb_kernel_kind_epilogue(const wb_kernel_kind *k, char *buf, size_t len);
/* The fields users see for a kernel with a register tile or a layout (the GEMMs): isa ("" for a
 * library's), tile ("6x16", "" when none), layout, and the epilogue ("none" when none). */
typedef struct wb_kernel_fields {
    const char *isa, *layout;
    char tile[24], epilogue[WB_EPILOGUE_MAX];
} wb_kernel_fields;
/* Fills *out and returns 1 for such kernels; returns 0 for the others. */
int wb_kernel_kind_fields(const wb_kernel_kind *k, wb_kernel_fields *out);
/* Distinct kinds so far (for tests). */
size_t wb_kernel_kind_count(void);

/* What a kernel launch carries: the profiler records it on the device lane. */
typedef struct wb_kernel_desc {
    const wb_kernel_kind *kind; /* interned (above): op, isa, tile, layout, epilogue */
    double flops;
    double bytes; /* the fewest bytes that must move */
    int threads;
} wb_kernel_desc;

#endif
