/* pointwise.c: strided elementwise loops (binary ops with broadcasting, copy, neg, fill).
 * Dimensions are coalesced first, so contiguous and simply-broadcast cases reach a unit-stride
 * inner loop the compiler vectorises; everything else falls to a generic strided loop. */
#include <string.h>

#include "wb_kernels/pointwise.h"
#include "wb_kernels/spans.h"

#define MAX_DIMS 8
#define MAX_OPS  3

typedef struct loop {
    int ndim; /* >= 1 after coalescing; the last dim is the inner loop */
    int64_t shape[MAX_DIMS];
    int64_t stride[MAX_OPS][MAX_DIMS];
    int nops;
} loop;

/* Drops size-1 dims and merges neighbours that are contiguous for every operand. */
static void loop_init(loop *l, int ndim, const int64_t *shape, int nops, const int64_t *const *strides) {
    l->nops = nops;
    l->ndim = 0;
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) { /* nothing to do; and an empty view's other sizes may be anything (2^63-1) */
            l->ndim = 1;
            l->shape[0] = 0;
            for (int k = 0; k < nops; k++)
                l->stride[k][0] = 0;
            return;
        }
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        int n = l->ndim;
        if (n > 0) {
            int merge = 1;
            for (int k = 0; k < nops; k++) {
                int64_t span; /* an empty view may carry any stride: the product can overflow */
                if (__builtin_mul_overflow(strides[k][d], shape[d], &span) || l->stride[k][n - 1] != span) merge = 0;
            }
            if (merge) {
                l->shape[n - 1] *= shape[d];
                for (int k = 0; k < nops; k++)
                    l->stride[k][n - 1] = strides[k][d];
                continue;
            }
        }
        l->shape[n] = shape[d];
        for (int k = 0; k < nops; k++)
            l->stride[k][n] = strides[k][d];
        l->ndim++;
    }
    if (l->ndim == 0) {
        l->ndim = 1;
        l->shape[0] = 1;
        for (int k = 0; k < nops; k++)
            l->stride[k][0] = 0;
    }
}

static int64_t loop_numel(const loop *l) {
    int64_t n = 1;
    for (int d = 0; d < l->ndim; d++)
        n *= l->shape[d];
    return n;
}

/* Element offsets of each operand at the start of outer row `row`. */
static void loop_row_offsets(const loop *l, int64_t row, int64_t *off) {
    for (int k = 0; k < l->nops; k++)
        off[k] = 0;
    for (int d = l->ndim - 2; d >= 0; d--) {
        int64_t i = row % l->shape[d];
        row /= l->shape[d];
        for (int k = 0; k < l->nops; k++)
            off[k] += i * l->stride[k][d];
    }
}

typedef void (*row_fn)(const void *ctx, int64_t n, const int64_t *off, const int64_t *inner_stride, int64_t start);

/* Runs fn over [start, start+n) of every row, rows and long rows split across threads. */
static void loop_run(const loop *l, row_fn fn, const void *ctx) {
    int64_t inner = l->shape[l->ndim - 1];
    int64_t rows = loop_numel(l) / (inner ? inner : 1);
    int64_t total = rows * inner;
    int64_t inner_stride[MAX_OPS];
    for (int k = 0; k < l->nops; k++)
        inner_stride[k] = l->stride[k][l->ndim - 1];
    if (total == 0) return;
    int threads = wb_cpu_threads_for(total);
    if (threads == 1) {
        int64_t off[MAX_OPS];
        for (int64_t r = 0; r < rows; r++) {
            loop_row_offsets(l, r, off);
            fn(ctx, inner, off, inner_stride, 0);
        }
        return;
    }
    wb_cpu_spans *spans = wb_cpu_spans_open("elements");
    if (rows >= 4 * threads) {
        WB_CPU_PARALLEL(threads, {
            int64_t t0 = wb_cpu_span_start(spans), done = 0, lo, hi;
            wb_cpu_share(rows, &lo, &hi);
            for (int64_t r = lo; r < hi; r++) {
                int64_t off[MAX_OPS];
                loop_row_offsets(l, r, off);
                fn(ctx, inner, off, inner_stride, 0);
                done += inner;
            }
            wb_cpu_span_done(spans, t0, done);
        });
        return;
    }
    /* Few long rows: split each row into one chunk per thread (64-element aligned). */
    for (int64_t r = 0; r < rows; r++) {
        int64_t base[MAX_OPS];
        loop_row_offsets(l, r, base);
        int64_t chunk = ((inner + threads - 1) / threads + 63) / 64 * 64;
        WB_CPU_PARALLEL(threads, {
            int64_t t0 = wb_cpu_span_start(spans), done = 0, lo, hi;
            wb_cpu_share(threads, &lo, &hi);
            for (int64_t t = lo; t < hi; t++) {
                int64_t s = t * chunk, e = s + chunk < inner ? s + chunk : inner;
                if (s >= e) continue;
                int64_t off[MAX_OPS];
                for (int k = 0; k < l->nops; k++)
                    off[k] = base[k] + s * inner_stride[k];
                fn(ctx, e - s, off, inner_stride, s);
                done += e - s;
            }
            wb_cpu_span_done(spans, t0, done);
        });
    }
}

/* ---- binary --------------------------------------------------------------------------- */

typedef struct binary_ctx {
    wb_cpu_binary_op op;
    float *out;
    const float *a, *b;
} binary_ctx;

static inline __attribute__((always_inline)) void binary_row_op(wb_cpu_binary_op op, int64_t n, float *restrict o,
                                                                int64_t os, const float *a, int64_t as, const float *b,
                                                                int64_t bs) {
    if (os == 1 && as == 1 && bs == 1) {
        for (int64_t i = 0; i < n; i++)
            o[i] = wb_cpu_binary_scalar(op, a[i], b[i]);
    } else if (os == 1 && as == 1 && bs == 0) {
        const float y = b[0];
        for (int64_t i = 0; i < n; i++)
            o[i] = wb_cpu_binary_scalar(op, a[i], y);
    } else if (os == 1 && as == 0 && bs == 1) {
        const float x = a[0];
        for (int64_t i = 0; i < n; i++)
            o[i] = wb_cpu_binary_scalar(op, x, b[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i * os] = wb_cpu_binary_scalar(op, a[i * as], b[i * bs]);
    }
}

/* One clone per ISA (AVX-512, AVX2, baseline), picked by the loader for this CPU: the loops are
 * exact IEEE operations, so every clone gives the same bits and only the vector width differs. */
#define WB_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

WB_ISA_CLONES
static void binary_row(const void *vctx, int64_t n, const int64_t *off, const int64_t *st, int64_t start) {
    (void)start;
    const binary_ctx *c = vctx;
    float *o = c->out + off[0];
    const float *a = c->a + off[1], *b = c->b + off[2];
    switch (c->op) { /* one loop per op of the list, its math inlined */
#define BINARY_ROW_CASE(ID, ...)                                                                                       \
    case WB_CPU_##ID: binary_row_op(WB_CPU_##ID, n, o, st[0], a, st[1], b, st[2]); break;
        WB_BINARY_LIST(BINARY_ROW_CASE)
#undef BINARY_ROW_CASE
    default: break;
    }
}

void wb_cpu_binary_f32(wb_cpu_binary_op op, int ndim, const int64_t *shape, float *out, const int64_t *out_stride,
                       const float *a, const int64_t *a_stride, const float *b, const int64_t *b_stride) {
    const int64_t *strides[3] = {out_stride, a_stride, b_stride};
    loop l;
    loop_init(&l, ndim, shape, 3, strides);
    binary_ctx c = {op, out, a, b};
    loop_run(&l, binary_row, &c);
}

/* ---- unary and fill --------------------------------------------------------------------- */

typedef struct unary_ctx {
    wb_cpu_unary_op op;
    float *out;
    const float *a;
    float value;
} unary_ctx;

static inline __attribute__((always_inline)) void unary_row_op(wb_cpu_unary_op op, int64_t n, float *restrict o,
                                                               int64_t os, const float *a, int64_t as) {
    if (os == 1 && as == 1)
        for (int64_t i = 0; i < n; i++)
            o[i] = wb_cpu_unary_scalar(op, a[i]);
    else
        for (int64_t i = 0; i < n; i++)
            o[i * os] = wb_cpu_unary_scalar(op, a[i * as]);
}

WB_ISA_CLONES
static void unary_row(const void *vctx, int64_t n, const int64_t *off, const int64_t *st, int64_t start) {
    (void)start;
    const unary_ctx *c = vctx;
    float *restrict o = c->out + off[0];
    const float *a = c->a + off[1];
    int64_t os = st[0], as = st[1];
    if (c->op == WB_CPU_COPY) {
        if (os == 1 && as == 1)
            memmove(o, a, (size_t)n * sizeof(float));
        else if (os == 1 && as == 0)
            for (int64_t i = 0; i < n; i++)
                o[i] = a[0];
        else
            for (int64_t i = 0; i < n; i++)
                o[i * os] = a[i * as];
    } else {
        switch (c->op) {
#define UNARY_ROW_CASE(ID, ...)                                                                                        \
    case WB_CPU_##ID: unary_row_op(WB_CPU_##ID, n, o, os, a, as); break;
            WB_ARITH_UNARY_LIST(UNARY_ROW_CASE)
#undef UNARY_ROW_CASE
        default: break;
        }
    }
}

void wb_cpu_binary_flat_f32(wb_cpu_binary_op op, int64_t n, float *out, const float *a, const float *b) {
    switch (op) {
#define BINARY_FLAT_CASE(ID, ...)                                                                                      \
    case WB_CPU_##ID:                                                                                                  \
        for (int64_t i = 0; i < n; i++)                                                                                \
            out[i] = wb_cpu_binary_scalar(WB_CPU_##ID, a[i], b[i]);                                                    \
        break;
        WB_BINARY_LIST(BINARY_FLAT_CASE)
#undef BINARY_FLAT_CASE
    default: break;
    }
}

void wb_cpu_unary_f32(wb_cpu_unary_op op, int ndim, const int64_t *shape, float *out, const int64_t *out_stride,
                      const float *a, const int64_t *a_stride) {
    const int64_t *strides[2] = {out_stride, a_stride};
    loop l;
    loop_init(&l, ndim, shape, 2, strides);
    unary_ctx c = {op, out, a, 0};
    loop_run(&l, unary_row, &c);
}

WB_ISA_CLONES
static void fill_row(const void *vctx, int64_t n, const int64_t *off, const int64_t *st, int64_t start) {
    (void)start;
    const unary_ctx *c = vctx;
    float *restrict o = c->out + off[0];
    const float v = c->value;
    if (st[0] == 1)
        for (int64_t i = 0; i < n; i++)
            o[i] = v;
    else
        for (int64_t i = 0; i < n; i++)
            o[i * st[0]] = v;
}

void wb_cpu_fill_f32(int ndim, const int64_t *shape, float *out, const int64_t *out_stride, float value) {
    const int64_t *strides[1] = {out_stride};
    loop l;
    loop_init(&l, ndim, shape, 1, strides);
    unary_ctx c = {WB_CPU_COPY, out, NULL, value};
    loop_run(&l, fill_row, &c);
}

void wb_cpu_arange_f32(float *out, int64_t n) {
    WB_CPU_PARALLEL(wb_cpu_threads_for(n), {
        int64_t lo, hi;
        wb_cpu_share(n, &lo, &hi);
        for (int64_t i = lo; i < hi; i++)
            out[i] = (float)i;
    });
}
