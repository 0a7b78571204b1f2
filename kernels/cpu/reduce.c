/* reduce.c: sum, mean and max over strided f32 or bf16 data, one result per index of the kept
 * dims (reduce.h gives the summation order and its error bound). The reduced dims are coalesced;
 * a leaf of the pairwise tree walks its block with a running multi-index, or with one stride
 * when the reduced elements coalesce into one dim. Not vectorised by hand: the contiguous leaf
 * is a plain loop the compiler may vectorise. */
#include <math.h>
#include <string.h>

#include "wb_kernels/pointwise.h"
#include "wb_kernels/reduce.h"

#define BLOCK WB_CPU_REDUCE_BLOCK
#define LANES WB_CPU_REDUCE_LANES
_Static_assert(LANES == 4 && BLOCK % LANES == 0, "leaf_sum adds its 4 accumulators as a tree of depth 2");
/* one result over many elements: the tree's top SPLIT_DEPTH levels give 2^SPLIT_DEPTH subtrees
 * to the threads, which are then added in the same tree (the result is the serial one) */
#define SPLIT_DEPTH 3

/* The reduced elements of one result, in row-major order: element i is at x[offset(i)]. */
typedef struct range {
    const void *x;
    wb_cpu_dtype dtype;
    int ndim; /* >= 1; the last dim is the fastest */
    int64_t shape[WB_CPU_MAX_DIMS], stride[WB_CPU_MAX_DIMS];
    int64_t n;
} range;

static inline float load(const void *x, wb_cpu_dtype dt, int64_t off) {
    return dt == WB_CPU_F32 ? ((const float *)x)[off] : wb_bf16_to_f32(((const uint16_t *)x)[off]);
}

/* Drops size-1 dims and merges neighbours that are contiguous with each other. */
static void range_init(range *r, const wb_cpu_reduce_problem *p) {
    r->x = p->x;
    r->dtype = p->dtype;
    r->ndim = 0;
    r->n = 1;
    for (int d = 0; d < p->inner_ndim; d++)
        r->n *= p->inner_shape[d];
    if (r->n == 0) { /* an empty view's other sizes and strides may be anything */
        r->ndim = 1, r->shape[0] = 0, r->stride[0] = 0;
        return;
    }
    for (int d = 0; d < p->inner_ndim; d++) {
        int64_t size = p->inner_shape[d], stride = p->inner_stride[d], span;
        if (size == 1) continue;
        int k = r->ndim;
        if (k > 0 && !__builtin_mul_overflow(stride, size, &span) && r->stride[k - 1] == span) {
            r->shape[k - 1] *= size;
            r->stride[k - 1] = stride;
            continue;
        }
        r->shape[k] = size, r->stride[k] = stride;
        r->ndim++;
    }
    if (r->ndim == 0) r->ndim = 1, r->shape[0] = 1, r->stride[0] = 0;
}

/* A running position in a range: the multi-index and the element offset of element i. */
typedef struct walker {
    int64_t idx[WB_CPU_MAX_DIMS], off;
} walker;

static void walker_at(const range *r, walker *w, int64_t i) {
    w->off = 0;
    for (int d = r->ndim - 1; d >= 0; d--) {
        w->idx[d] = i % r->shape[d];
        i /= r->shape[d];
        w->off += w->idx[d] * r->stride[d];
    }
}

static inline void walker_next(const range *r, walker *w) {
    for (int d = r->ndim - 1; d >= 0; d--) {
        w->off += r->stride[d];
        if (++w->idx[d] < r->shape[d]) return;
        w->off -= w->idx[d] * r->stride[d];
        w->idx[d] = 0;
    }
}

/* Elements lo..hi-1 (at most one block, lo a multiple of LANES): element i into accumulator
 * i mod LANES, then ((a0 + a1) + (a2 + a3)). A constant dtype folds the load's branch away. */
static inline __attribute__((always_inline)) double leaf_sum(const range *r, wb_cpu_dtype dt, int64_t lo, int64_t hi) {
    double acc[LANES] = {0};
    if (r->ndim == 1) {
        int64_t s = r->stride[0], i = lo;
        if (s == 1) { /* contiguous: the loop the compiler can vectorise */
            for (; i + LANES <= hi; i += LANES)
                for (int k = 0; k < LANES; k++)
                    acc[k] += load(r->x, dt, i + k);
        } else {
            for (; i + LANES <= hi; i += LANES)
                for (int k = 0; k < LANES; k++)
                    acc[k] += load(r->x, dt, (i + k) * s);
        }
        for (int k = 0; i < hi; i++, k++)
            acc[k] += load(r->x, dt, i * s);
    } else {
        walker w;
        walker_at(r, &w, lo);
        for (int64_t i = lo; i < hi; i++) {
            acc[(i - lo) % LANES] += load(r->x, dt, w.off);
            walker_next(r, &w);
        }
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static double leaf(const range *r, int64_t lo, int64_t hi) {
    return r->dtype == WB_CPU_F32 ? leaf_sum(r, WB_CPU_F32, lo, hi) : leaf_sum(r, WB_CPU_BF16, lo, hi);
}

/* The split of lo..hi (more than one block): at a block boundary, the left taking half the
 * blocks, rounded up. */
static int64_t split(int64_t lo, int64_t hi) {
    int64_t blocks = (hi - lo + BLOCK - 1) / BLOCK;
    return lo + (blocks + 1) / 2 * BLOCK;
}

static double tree_sum(const range *r, int64_t lo, int64_t hi) {
    if (hi - lo <= BLOCK) return leaf(r, lo, hi);
    int64_t mid = split(lo, hi);
    return tree_sum(r, lo, mid) + tree_sum(r, mid, hi);
}

/* The subtrees of lo..hi at `depth` levels down (or the leaves above it), in order. */
static void subtrees(int64_t lo, int64_t hi, int depth, int64_t (*bounds)[2], int *count) {
    if (depth == 0 || hi - lo <= BLOCK) {
        bounds[*count][0] = lo, bounds[*count][1] = hi;
        (*count)++;
        return;
    }
    int64_t mid = split(lo, hi);
    subtrees(lo, mid, depth - 1, bounds, count);
    subtrees(mid, hi, depth - 1, bounds, count);
}

/* The subtrees' sums added as tree_sum adds them. */
static double combine(int64_t lo, int64_t hi, int depth, const double *sums, int *next) {
    if (depth == 0 || hi - lo <= BLOCK) return sums[(*next)++];
    int64_t mid = split(lo, hi);
    double left = combine(lo, mid, depth - 1, sums, next);
    return left + combine(mid, hi, depth - 1, sums, next);
}

static double parallel_sum(const range *r) {
    int64_t bounds[1 << SPLIT_DEPTH][2];
    double sums[1 << SPLIT_DEPTH];
    int count = 0, next = 0;
    subtrees(0, r->n, SPLIT_DEPTH, bounds, &count);
    /* (called only when the reduction runs parallel: its subtrees dealt round-robin; each sum is
     * its subtree's alone, so the result does not depend on who computed which) */
    WB_CPU_PARALLEL(wb_cpu_max_threads(), {
        for (int k = wb_cpu_thread(); k < count; k += wb_cpu_team())
            sums[k] = tree_sum(r, bounds[k][0], bounds[k][1]);
    });
    return combine(0, r->n, SPLIT_DEPTH, sums, &next);
}

/* The largest element and its position; the first NaN and its position when there is one. */
static float range_max(const range *r, int64_t *pos) {
    float best = -INFINITY;
    int64_t at = 0;
    walker w;
    walker_at(r, &w, 0);
    for (int64_t i = 0; i < r->n; i++) {
        float v = load(r->x, r->dtype, w.off);
        if (v != v) {
            best = v, at = i;
            break;
        }
        if (i == 0 || v > best) best = v, at = i;
        walker_next(r, &w);
    }
    *pos = at;
    return best;
}

/* v rounded once to the output's dtype. For bf16, f64 -> f32 -> bf16 would round twice (a v just
 * past a bf16 halfway point can land on it in f32, then go the wrong way), so v goes to f32 with
 * rounding to odd (of the two floats around an inexact v, the one with an odd last bit), which
 * bf16's round to nearest even then rounds exactly as it would round v (f32 keeps 16 bits more). */
static void store(void *out, wb_cpu_dtype dt, int64_t i, double v) {
    float f = (float)v;
    if (dt == WB_CPU_F32) {
        ((float *)out)[i] = f;
        return;
    }
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((double)f != v && isfinite(f) && !(bits & 1)) f = nextafterf(f, (double)f > v ? -INFINITY : INFINITY);
    ((uint16_t *)out)[i] = wb_f32_to_bf16(f);
}

static int64_t product(int n, const int64_t *v) {
    int64_t p = 1;
    for (int d = 0; d < n; d++)
        p *= v[d];
    return p;
}

int wb_cpu_reduce_parallel(const wb_cpu_reduce_problem *p) {
    int64_t outer = product(p->outer_ndim, p->outer_shape), inner = product(p->inner_ndim, p->inner_shape);
    if (outer == 0 || inner == 0 || (double)outer * (double)inner < WB_CPU_PARALLEL_MIN) return 0;
    return outer > 1 || (p->op != WB_CPU_REDUCE_MAX && inner > BLOCK);
}

void wb_cpu_reduce(const wb_cpu_reduce_problem *p) {
    range base;
    range_init(&base, p);
    int64_t outer = product(p->outer_ndim, p->outer_shape);
    int parallel = wb_cpu_reduce_parallel(p);
    size_t item = p->dtype == WB_CPU_F32 ? sizeof(float) : sizeof(uint16_t);
    if (outer == 1 && parallel) {
        double s = parallel_sum(&base);
        store(p->out, p->dtype, 0, p->op == WB_CPU_REDUCE_MEAN ? s / (double)base.n : s);
        return;
    }
    WB_CPU_PARALLEL(parallel ? wb_cpu_max_threads() : 1, {
        int64_t lo, hi;
        wb_cpu_share(outer, &lo, &hi);
        for (int64_t o = lo; o < hi; o++) {
            int64_t off = 0, rest = o;
            for (int d = p->outer_ndim - 1; d >= 0; d--) {
                off += rest % p->outer_shape[d] * p->outer_stride[d];
                rest /= p->outer_shape[d];
            }
            range r = base;
            r.x = (const char *)p->x + off * (int64_t)item;
            if (p->op == WB_CPU_REDUCE_MAX) {
                int64_t pos;
                float v = range_max(&r, &pos);
                store(p->out, p->dtype, o, v);
                if (p->indices) p->indices[o] = (float)(pos + p->index_base);
            } else {
                double s = tree_sum(&r, 0, r.n);
                store(p->out, p->dtype, o, p->op == WB_CPU_REDUCE_MEAN ? s / (double)r.n : s);
            }
        }
    });
}
