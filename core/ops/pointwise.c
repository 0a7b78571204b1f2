/* pointwise.c: the elementwise and creation ops (copy_, fill_, arange, rand, randn, and the
 * arithmetic ops of <wb/abi/arith_list.h>: add, sub, mul, div, neg): shape rules, work counts,
 * CPU launchers and the public entry points. Each CPU launcher poses a pointer-and-stride problem
 * for the kernels (wb_kernels/pointwise.h, wb_kernels/bf16.h) and launches one kernel through
 * wb_kernel_launch. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <wb_kernels/bf16.h>
#include <wb_kernels/pointwise.h>

#include "convert.h"
#include "op.h"
#include "pointwise.h"
#include "storage.h"

/* The portable kernels are named wb_<op>_generic[_contig|_strided]. */
static wb_kernel_desc generic_desc(const wb_op_call *c, const char *op, const char *variant, int64_t n) {
    return wb_kernel_desc_for(c, &(wb_kernel_kind){.op = op, .isa = "generic", .variant = variant},
                              n >= WB_CPU_PARALLEL_MIN ? wb_get_num_threads() : 1);
}

/* The kernels' names and ops for the list's binary ops (the op ids and the kernels' enum come from
 * one list, <wb/abi/arith_list.h>, in one order). */
static const char *const binary_ops[WB_CPU_BINARY_COUNT] = {
#define BINARY_NAME(ID, name, ...) [WB_CPU_##ID] = #name,
    WB_BINARY_LIST(BINARY_NAME)
#undef BINARY_NAME
};

static wb_cpu_binary_op binary_op_of(wb_op_id id) {
    switch (id) {
#define BINARY_OP_CASE(ID, ...)                                                                                        \
    case WB_OP_##ID: return WB_CPU_##ID;
        WB_BINARY_LIST(BINARY_OP_CASE)
#undef BINARY_OP_CASE
    default: return WB_CPU_BINARY_COUNT; /* not a binary op: its row names another impl */
    }
}

static wb_cpu_unary_op unary_op_of(wb_op_id id) {
    switch (id) {
#define UNARY_OP_CASE(ID, ...)                                                                                         \
    case WB_OP_##ID: return WB_CPU_##ID;
        WB_ARITH_UNARY_LIST(UNARY_OP_CASE)
#undef UNARY_OP_CASE
    default: return WB_CPU_COPY; /* not an arithmetic unary op: its row names another impl */
    }
}

static double numel_of_out(const wb_op_call *c) {
    double n = 1;
    for (int i = 0; i < c->out_ndim; i++)
        n *= (double)c->out_shape[i];
    return n;
}

static double tensor_bytes(const wb_tensor *t) { return (double)wb_tensor_numel(t) * (double)wb_dtype_size(t->dtype); }

/* ---- binary ----------------------------------------------------------------------------- */

wb_status wb_shape_binary(wb_op_call *c) {
    wb_tensor *a = c->in[0], *b = c->in[1];
    if (a->dtype != b->dtype)
        return wb_error(WB_ERR_DTYPE, "dtypes %s and %s differ", wb_dtype_name(a->dtype), wb_dtype_name(b->dtype));
    wb_status st = wb_dtype_check_supported(a->dtype, c->def->name);
    if (st) return st;
    c->out_dtype = a->dtype;
    return wb_shape_broadcast(a->ndim, a->shape, b->ndim, b->shape, &c->out_ndim, c->out_shape, c->def->name);
}

double wb_flops_elementwise(const wb_op_call *c) { return numel_of_out(c); }

double wb_bytes_binary(const wb_op_call *c) {
    return tensor_bytes(c->in[0]) + tensor_bytes(c->in[1]) + numel_of_out(c) * (double)wb_dtype_size(c->out_dtype);
}

typedef struct binary_launch {
    wb_cpu_binary_op op;
    int ndim;
    int64_t shape[WB_MAX_DIMS];
    float *out;
    const float *a, *b;
    int64_t os[WB_MAX_DIMS], as[WB_MAX_DIMS], bs[WB_MAX_DIMS];
} binary_launch;
static const wb_launch_layout binary_layout = {
    .size = sizeof(binary_launch),
    .npointers = 3,
    .pointers = {offsetof(binary_launch, out), offsetof(binary_launch, a), offsetof(binary_launch, b)}};

static void run_binary(void *v) {
    binary_launch *k = v;
    wb_cpu_binary_f32(k->op, k->ndim, k->shape, k->out, k->os, k->a, k->as, k->b, k->bs);
}

/* Same-shape contiguous operands below the threading threshold (the eager 1-element op of the
 * dispatch benchmark, most small ops): a flat loop and a small context, nothing else. */
typedef struct binary_flat {
    wb_cpu_binary_op op;
    int64_t n;
    float *out;
    const float *a, *b;
} binary_flat;
static const wb_launch_layout binary_flat_layout = {
    .size = sizeof(binary_flat),
    .npointers = 3,
    .pointers = {offsetof(binary_flat, out), offsetof(binary_flat, a), offsetof(binary_flat, b)}};

static void run_binary_flat(void *v) {
    const binary_flat *k = v;
    wb_cpu_binary_flat_f32(k->op, k->n, k->out, k->a, k->b);
}

wb_status wb_cpu_binary_impl(wb_op_call *c) {
    if (c->out->dtype == WB_BF16) return wb_cpu_bf16_pointwise(c);
    wb_cpu_binary_op op = binary_op_of(c->def->id);
    wb_tensor *out = c->out;
    int contig = wb_same_geometry_contiguous(c->in[0], out) && wb_same_geometry_contiguous(c->in[1], out);
    int64_t n = wb_tensor_numel(out);
    if (contig && n < WB_CPU_PARALLEL_MIN) {
        binary_flat k = {op, n, wb_tensor_data(out), wb_tensor_data(c->in[0]), wb_tensor_data(c->in[1])};
        /* the kind is looked up once per op: this is the path of the 1-element dispatch benchmark */
        static const wb_kernel_kind *flat[WB_CPU_BINARY_COUNT];
        if (!flat[op])
            flat[op] =
                wb_kernel_kind_intern(&(wb_kernel_kind){.op = binary_ops[op], .isa = "generic", .variant = "contig"});
        wb_kernel_desc d = {.kind = flat[op], .flops = (double)n, .bytes = c->def->bytes(c), .threads = 1};
        wb_kernel_launch(&d, run_binary_flat, &k, &binary_flat_layout);
        wb_storage_bump_version(out->storage);
        return WB_OK;
    }
    binary_launch k = {op,  out->ndim, {0}, wb_tensor_data(out), wb_tensor_data(c->in[0]), wb_tensor_data(c->in[1]),
                       {0}, {0},       {0}};
    memcpy(k.shape, out->shape, sizeof k.shape);
    memcpy(k.os, out->stride, sizeof k.os);
    wb_broadcast_strides(c->in[0], out->ndim, out->shape, k.as);
    wb_broadcast_strides(c->in[1], out->ndim, out->shape, k.bs);
    wb_kernel_desc d = generic_desc(c, binary_ops[op], contig ? "contig" : "strided", n);
    wb_kernel_launch(&d, run_binary, &k, &binary_layout);
    wb_storage_bump_version(out->storage);
    return WB_OK;
}

/* ---- neg, copy_, fill_ ---------------------------------------------------------------------- */

wb_status wb_shape_unary(wb_op_call *c) {
    wb_status st = wb_dtype_check_supported(c->in[0]->dtype, c->def->name);
    if (st) return st;
    c->out_dtype = c->in[0]->dtype;
    c->out_ndim = c->in[0]->ndim;
    memcpy(c->out_shape, c->in[0]->shape, sizeof c->out_shape);
    return WB_OK;
}

double wb_bytes_unary(const wb_op_call *c) { return 2.0 * tensor_bytes(c->in[0]); }

typedef struct unary_launch {
    wb_cpu_unary_op op;
    int ndim;
    int64_t shape[WB_MAX_DIMS];
    float *out;
    const float *a;
    int64_t os[WB_MAX_DIMS], as[WB_MAX_DIMS];
    float value;
} unary_launch;
static const wb_launch_layout unary_layout = {
    .size = sizeof(unary_launch), .npointers = 2, .pointers = {offsetof(unary_launch, out), offsetof(unary_launch, a)}};

static void run_unary(void *v) {
    unary_launch *k = v;
    wb_cpu_unary_f32(k->op, k->ndim, k->shape, k->out, k->os, k->a, k->as);
}

static void run_fill(void *v) {
    unary_launch *k = v;
    wb_cpu_fill_f32(k->ndim, k->shape, k->out, k->os, k->value);
}

wb_status wb_cpu_unary_impl(wb_op_call *c) {
    if (c->out->dtype == WB_BF16) return wb_cpu_bf16_pointwise(c);
    wb_tensor *out = c->out, *a = c->in[0];
    unary_launch k = {unary_op_of(c->def->id), out->ndim, {0}, wb_tensor_data(out), wb_tensor_data(a), {0}, {0}, 0};
    memcpy(k.shape, out->shape, sizeof k.shape);
    memcpy(k.os, out->stride, sizeof k.os);
    memcpy(k.as, a->stride, sizeof k.as);
    wb_kernel_desc d = generic_desc(c, c->def->name, wb_tensor_is_contiguous(a) ? "contig" : "strided", wb_tensor_numel(out));
    wb_kernel_launch(&d, run_unary, &k, &unary_layout);
    wb_storage_bump_version(out->storage);
    return WB_OK;
}

/* A destination where two indices reach the same element cannot be written elementwise. */
static wb_status check_writable(const wb_tensor *dst) {
    for (int i = 0; i < dst->ndim; i++)
        if (dst->stride[i] == 0 && dst->shape[i] > 1) {
            char b[256];
            return wb_error(WB_ERR_ARGUMENT,
                            "the destination has several elements in one memory location (stride 0 in dimension "
                            "%d, strides %s); write into a contiguous tensor instead",
                            i + 1, wb_shape_format(dst->ndim, dst->stride, b, sizeof b));
        }
    return WB_OK;
}

wb_status wb_shape_copy_(wb_op_call *c) {
    wb_tensor *dst = c->in[0], *src = c->in[1];
    wb_status st;
    if ((st = wb_dtype_check_supported(dst->dtype, "copy_")) || (st = wb_dtype_check_supported(src->dtype, "copy_")))
        return st;
    int n;
    int64_t shape[WB_MAX_DIMS];
    st = wb_shape_broadcast(dst->ndim, dst->shape, src->ndim, src->shape, &n, shape, "copy_");
    if (st) return st;
    if (n != dst->ndim || memcmp(shape, dst->shape, sizeof(int64_t) * (size_t)n)) {
        char bd[256], bs[256];
        return wb_error(WB_ERR_SHAPE, "source of shape %s does not broadcast to the destination's shape %s",
                        wb_shape_format(src->ndim, src->shape, bs, sizeof bs),
                        wb_shape_format(dst->ndim, dst->shape, bd, sizeof bd));
    }
    return check_writable(dst);
}

double wb_bytes_copy_(const wb_op_call *c) { return tensor_bytes(c->in[0]) + tensor_bytes(c->in[1]); }

/* Copies and fills where either side is not f32: one strided loop that converts per element
 * (bf16 storage on the CPU). The fill value lives in the context so a capture can replay it. */
typedef struct convert_launch {
    void *dst;
    const void *src; /* NULL: fill with value */
    wb_dtype dst_dtype, src_dtype;
    int ndim;
    int64_t shape[WB_MAX_DIMS], ds[WB_MAX_DIMS], ss[WB_MAX_DIMS];
    float value;
} convert_launch;
static const wb_launch_layout convert_layout = {.size = sizeof(convert_launch),
                                                .npointers = 2,
                                                .pointers = {offsetof(convert_launch, dst), offsetof(convert_launch, src)}};

static void run_convert(void *v) {
    convert_launch *k = v;
    int64_t zero[WB_MAX_DIMS] = {0};
    if (k->src)
        wb_cpu_convert(k->dst, (wb_cpu_dtype)k->dst_dtype, k->ds, k->src, (wb_cpu_dtype)k->src_dtype, k->ss, k->ndim,
                       k->shape);
    else
        wb_cpu_convert(k->dst, (wb_cpu_dtype)k->dst_dtype, k->ds, &k->value, WB_CPU_F32, zero, k->ndim, k->shape);
}

static void launch_convert(const wb_op_call *c, const char *op, wb_tensor *dst, wb_tensor *src, float value) {
    convert_launch k = {wb_tensor_data(dst),
                        src ? wb_tensor_data(src) : NULL,
                        dst->dtype,
                        src ? src->dtype : WB_F32,
                        dst->ndim,
                        {0},
                        {0},
                        {0},
                        value};
    memcpy(k.shape, dst->shape, sizeof k.shape);
    memcpy(k.ds, dst->stride, sizeof k.ds);
    if (src) wb_broadcast_strides(src, dst->ndim, dst->shape, k.ss);
    wb_kernel_desc d = generic_desc(c, op, NULL, 1);
    wb_kernel_launch(&d, run_convert, &k, &convert_layout);
}

wb_status wb_cpu_copy_impl(wb_op_call *c) {
    wb_tensor *dst = c->in[0], *src = c->in[1], *tmp = NULL;
    if (wb_tensor_numel(dst) == 0) return WB_OK;
    if (src->storage == dst->storage) {
        /* Overlapping source and destination: go through a private copy of the source. */
        wb_status st = wb_tensor_empty(src->dtype, src->device, src->ndim, src->shape, &tmp);
        if (st) return st;
        st = wb_copy_(tmp, src);
        if (st) {
            wb_tensor_free(tmp);
            return st;
        }
        src = tmp;
    }
    if (dst->dtype != WB_F32 || src->dtype != WB_F32) {
        launch_convert(c, "copy_convert", dst, src, 0);
        wb_storage_bump_version(dst->storage);
        wb_tensor_free(tmp);
        return WB_OK;
    }
    unary_launch k = {WB_CPU_COPY, dst->ndim, {0}, wb_tensor_data(dst), wb_tensor_data(src), {0}, {0}, 0};
    memcpy(k.shape, dst->shape, sizeof k.shape);
    memcpy(k.os, dst->stride, sizeof k.os);
    wb_broadcast_strides(src, dst->ndim, dst->shape, k.as);
    int contig = wb_same_geometry_contiguous(dst, src);
    wb_kernel_desc d = generic_desc(c, "copy", contig ? "contig" : "strided", wb_tensor_numel(dst));
    wb_kernel_launch(&d, run_unary, &k, &unary_layout);
    wb_storage_bump_version(dst->storage);
    wb_tensor_free(tmp);
    return WB_OK;
}

/* like copy_: an expanded destination would write one element many times (an extent of 2^40
 * over one float ran for minutes) */
wb_status wb_shape_fill_(wb_op_call *c) {
    wb_status st = wb_dtype_check_supported(c->in[0]->dtype, "fill_");
    return st ? st : check_writable(c->in[0]);
}

double wb_bytes_fill_(const wb_op_call *c) { return tensor_bytes(c->in[0]); }

wb_status wb_cpu_fill_impl(wb_op_call *c) {
    wb_tensor *dst = c->in[0];
    if (dst->dtype != WB_F32) {
        launch_convert(c, "fill_convert", dst, NULL, (float)c->p.fill.value);
        wb_storage_bump_version(dst->storage);
        return WB_OK;
    }
    unary_launch k = {WB_CPU_COPY, dst->ndim, {0}, wb_tensor_data(dst), NULL, {0}, {0}, (float)c->p.fill.value};
    memcpy(k.shape, dst->shape, sizeof k.shape);
    memcpy(k.os, dst->stride, sizeof k.os);
    wb_kernel_desc d = generic_desc(c, "fill", NULL, wb_tensor_numel(dst));
    wb_kernel_launch(&d, run_fill, &k, &unary_layout);
    wb_storage_bump_version(dst->storage);
    return WB_OK;
}

/* ---- creation: arange, rand, randn ----------------------------------------------------------- */

wb_status wb_shape_creation(wb_op_call *c) {
    wb_status st = wb_dtype_check_supported(c->out_dtype, c->def->name);
    if (st) return st;
    return wb_shape_check(c->out_ndim, c->out_shape, c->out_dtype, c->def->name);
}

double wb_bytes_creation(const wb_op_call *c) { return numel_of_out(c) * (double)wb_dtype_size(c->out_dtype); }

typedef struct creation_launch {
    wb_op_id op;
    void *out;
    int64_t n;
    uint64_t seed, offset;
    wb_dtype dtype;
} creation_launch;
static const wb_launch_layout creation_layout = {
    .size = sizeof(creation_launch), .npointers = 1, .pointers = {offsetof(creation_launch, out)}};

/* Values are drawn in f32 (so a seed gives the same numbers in every dtype and on every
 * device, up to the final rounding) and rounded once for bf16. */
void wb_cpu_creation_f32(wb_op_id op, float *out, int64_t n, uint64_t seed, uint64_t offset) {
    if (op == WB_OP_ARANGE)
        wb_cpu_arange_f32(out, n);
    else if (op == WB_OP_RAND)
        wb_cpu_rand_f32(out, n, seed, offset);
    else
        wb_cpu_randn_f32(out, n, seed, offset);
}

static void run_creation(void *v) {
    creation_launch *k = v;
    if (k->dtype == WB_F32) {
        wb_cpu_creation_f32(k->op, k->out, k->n, k->seed, k->offset);
        return;
    }
    float *tmp = malloc((size_t)(k->n ? k->n : 1) * sizeof(float));
    if (!tmp) return; /* checked by the impl before launching: cannot happen for a sane n */
    wb_cpu_creation_f32(k->op, tmp, k->n, k->seed, k->offset);
    wb_bf16_round_rows(k->out, k->n, tmp, 1, k->n);
    free(tmp);
}

wb_status wb_cpu_creation_impl(wb_op_call *c) {
    static const char *const ops[] = {"arange", "rand_philox", "randn_philox"};
    wb_op_id id = c->def->id;
    creation_launch k = {
        id, wb_tensor_data(c->out), wb_tensor_numel(c->out), c->p.random.seed, c->p.random.offset, c->out->dtype};
    wb_kernel_desc d = generic_desc(c, ops[id == WB_OP_ARANGE ? 0 : id == WB_OP_RAND ? 1 : 2], NULL, k.n);
    wb_kernel_launch(&d, run_creation, &k, &creation_layout);
    wb_storage_bump_version(c->out->storage);
    return WB_OK;
}

/* ---- public entry points ------------------------------------------------------------------- */

/* The global generator: a seed and a running offset in Philox blocks. */
static uint64_t generator_seed = 0x2545F4914F6CDD1Dull, generator_offset;

void wb_manual_seed(uint64_t seed) {
    generator_seed = seed;
    generator_offset = 0;
}

uint64_t wb_initial_seed(void) { return generator_seed; }

static wb_status binary(wb_op_id id, wb_tensor *a, wb_tensor *b, wb_tensor **out) {
    wb_op_call c = {.in = {a, b}, .nin = 2};
    return wb_dispatch_out(id, &c, out);
}

/* wb_add, wb_sub, wb_mul, wb_div, ...: one per binary op of the list */
#define BINARY_ENTRY(ID, name, ...)                                                                                    \
    wb_status wb_##name(wb_tensor *a, wb_tensor *b, wb_tensor **out) { return binary(WB_OP_##ID, a, b, out); }
WB_BINARY_LIST(BINARY_ENTRY)
#undef BINARY_ENTRY

/* wb_neg, ...: one per unary op of the list */
#define UNARY_ENTRY(ID, name, ...)                                                                                     \
    wb_status wb_##name(wb_tensor *a, wb_tensor **out) {                                                               \
        wb_op_call c = {.in = {a}, .nin = 1};                                                                          \
        return wb_dispatch_out(WB_OP_##ID, &c, out);                                                                   \
    }
WB_ARITH_UNARY_LIST(UNARY_ENTRY)
#undef UNARY_ENTRY

wb_status wb_copy_(wb_tensor *dst, wb_tensor *src) {
    wb_op_call c = {0};
    c.in[0] = dst, c.in[1] = src, c.nin = 2;
    return wb_dispatch(WB_OP_COPY_, &c);
}

wb_status wb_fill_(wb_tensor *dst, double value) {
    wb_op_call c = {0};
    c.in[0] = dst, c.nin = 1;
    c.p.fill.value = value;
    return wb_dispatch(WB_OP_FILL_, &c);
}

static wb_status creation(wb_op_id id, wb_dtype dtype, wb_device device, int ndim, const int64_t *shape,
                          wb_tensor **out) {
    wb_op_call c = {0};
    *out = NULL;
    if (ndim < 0 || ndim > WB_MAX_DIMS)
        return wb_error(WB_ERR_SHAPE, "%s: %d dimensions requested, at most %d are supported", wb_op_name(id), ndim,
                        WB_MAX_DIMS);
    c.device = device;
    c.out_dtype = dtype;
    c.out_ndim = ndim;
    memcpy(c.out_shape, shape, sizeof(int64_t) * (size_t)ndim);
    int64_t numel = 1; /* saturates: the shape check in dispatch names the overflow */
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(numel, shape[i] > 0 ? shape[i] : 0, &numel)) numel = INT64_MAX;
    if (id != WB_OP_ARANGE) {
        c.p.random.seed = generator_seed;
        c.p.random.offset = generator_offset;
    }
    wb_status st = wb_dispatch(id, &c);
    if (st) return st;
    /* Advance past the blocks this draw used, so the next draw is independent. */
    if (id == WB_OP_RAND) generator_offset += (uint64_t)(numel + 3) / 4;
    if (id == WB_OP_RANDN) generator_offset += (uint64_t)(numel + 1) / 2;
    *out = c.out;
    return WB_OK;
}

wb_status wb_rand(wb_dtype dtype, wb_device device, int ndim, const int64_t *shape, wb_tensor **out) {
    return creation(WB_OP_RAND, dtype, device, ndim, shape, out);
}

wb_status wb_randn(wb_dtype dtype, wb_device device, int ndim, const int64_t *shape, wb_tensor **out) {
    return creation(WB_OP_RANDN, dtype, device, ndim, shape, out);
}

wb_status wb_arange(wb_dtype dtype, wb_device device, int64_t n, wb_tensor **out) {
    *out = NULL;
    if (n < 0) return wb_error(WB_ERR_ARGUMENT, "arange: n must be >= 0, got %" PRId64, n);
    return creation(WB_OP_ARANGE, dtype, device, 1, &n, out);
}

wb_status wb_full(wb_dtype dtype, wb_device device, int ndim, const int64_t *shape, double value, wb_tensor **out) {
    *out = NULL;
    wb_status st = wb_dtype_check_supported(dtype, "full");
    if (st) return st;
    wb_tensor *t;
    st = wb_tensor_empty(dtype, device, ndim, shape, &t);
    if (st) return st;
    st = wb_fill_(t, value);
    if (st) {
        wb_tensor_free(t);
        return st;
    }
    *out = t;
    return WB_OK;
}
