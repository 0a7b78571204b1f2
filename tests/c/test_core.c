/* test_core.c: C unit tests of the core (storage, views, bounds, broadcasting, the op table,
 * the generator, the pointwise kernels against naive references, the thread adaptation). No Lua here. */
#define _GNU_SOURCE /* sched_setaffinity */
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "linear.h"
#include <wb/kernel.h>
#include "op.h"
#include "pointwise.h"
#include <wb/profiler.h>
#include <wb_kernels/gemm.h>
#include <wb_kernels/pointwise.h>
#include <wb/graph.h>
#include <wb/clock.h>
#include <wb/wb.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int failures, checks;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                                   \
        }                                                                                                              \
    } while (0)

#define CHECK_OK(expr)                                                                                                 \
    do {                                                                                                               \
        checks++;                                                                                                      \
        wb_status st_ = (expr);                                                                                        \
        if (st_ != WB_OK) {                                                                                            \
            failures++;                                                                                                \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, wb_error_message());                  \
        }                                                                                                              \
    } while (0)

#define CHECK_ERR(expr, status, fragment)                                                                              \
    do {                                                                                                               \
        checks++;                                                                                                      \
        wb_status st_ = (expr);                                                                                        \
        if (st_ != (status) || !strstr(wb_error_message(), (fragment))) {                                              \
            failures++;                                                                                                \
            fprintf(stderr, "%s:%d: %s: expected status %d with '%s', got %d: %s\n", __FILE__, __LINE__, #expr,        \
                    (int)(status), (fragment), (int)st_, wb_error_message());                                          \
        }                                                                                                              \
    } while (0)

static void test_op_table(void) {
    CHECK(wb_op_table_check() == -1);
    CHECK(!strcmp(wb_op_name(WB_OP_T), "t"));
    CHECK(!strcmp(wb_op_name(WB_OP_ADD), "add"));
    CHECK(wb_op_get(WB_OP_COUNT) == NULL);
    /* the activation list: each entry's op id, name and kernel act agree, in the list's order */
    int n = wb_unary_count();
    CHECK(n >= 5 && wb_unary_get(n) == NULL && wb_unary_get(-1) == NULL);
    CHECK(!strcmp(wb_unary_get(0)->name, "silu") && !strcmp(wb_unary_get(1)->name, "sigmoid"));
    for (int i = 0; i < n; i++) {
        const wb_unary_info *u = wb_unary_get(i);
        CHECK(!strcmp(wb_op_name((wb_op_id)(WB_OP_SILU + i)), u->name));
        CHECK(wb_cpu_act_of((wb_op_id)(WB_OP_SILU + i)) == WB_CPU_SILU + i);
        CHECK(u->formula[0] && strstr(u->expr_c, "x") && strstr(u->expr_cuda, "x"));
    }
    const int64_t shape[] = {3};
    wb_tensor *x, *y = (wb_tensor *)&y;
    double v[3];
    CHECK_OK(wb_tensor_empty(WB_F32, WB_DEVICE_CPU, 1, shape, &x));
    CHECK_ERR(wb_unary(n, x, &y), WB_ERR_ARGUMENT, "no such activation");
    CHECK(y == NULL);
    CHECK_ERR(wb_unary(-1, x, &y), WB_ERR_ARGUMENT, "no such activation");
    /* wb_<name>() of every activation, made by the list: the same op as wb_unary(i) */
    typedef wb_status (*act_entry)(wb_tensor *, wb_tensor **);
#define ACT_ENTRY(ID, name, ...) wb_##name,
    static const act_entry entries[] = {WB_ACT_LIST(ACT_ENTRY)};
#undef ACT_ENTRY
    CHECK((int)(sizeof entries / sizeof entries[0]) == n);
    CHECK_OK(wb_fill_(x, -0.75));
    for (int i = 0; i < n; i++) {
        wb_tensor *a, *b;
        double va[3], vb[3];
        CHECK_OK(entries[i](x, &a));
        CHECK_OK(wb_unary(i, x, &b));
        CHECK_OK(wb_to_doubles(a, va));
        CHECK_OK(wb_to_doubles(b, vb));
        CHECK(va[0] == vb[0] && va[0] != -0.75); /* each one computes something */
        wb_tensor_free(a), wb_tensor_free(b);
    }
    CHECK_OK(wb_softplus(x, &y)); /* softplus(-0.75) = log(1 + e^-0.75) = 0.38687... */
    CHECK_OK(wb_to_doubles(y, v));
    CHECK(fabs(v[0] - 0.38687) < 1e-5);
    wb_tensor_free(y);
    CHECK_OK(wb_fill_(x, 0.0));
    CHECK_OK(wb_unary(1, x, &y)); /* sigmoid(0) = 0.5 */
    CHECK_OK(wb_to_doubles(y, v));
    CHECK(v[0] == 0.5 && v[2] == 0.5);
    wb_tensor_free(x), wb_tensor_free(y);
}

static void test_storage_alignment_and_refcount(void) {
    const int64_t shape[] = {3, 5};
    wb_tensor *a, *v;
    CHECK_OK(wb_tensor_empty(WB_F32, WB_DEVICE_CPU, 2, shape, &a));
    CHECK(((uintptr_t)wb_storage_data(a->storage) & 63) == 0);
    CHECK(wb_storage_refcount(a->storage) == 1);
    CHECK(a->stride[0] == 5 && a->stride[1] == 1);
    CHECK_OK(wb_t(a, &v));
    CHECK(v->storage == a->storage && wb_storage_refcount(a->storage) == 2);
    wb_tensor_free(a); /* the view keeps the storage alive */
    CHECK(wb_storage_refcount(v->storage) == 1);
    CHECK_OK(wb_fill_(v, 2.0));
    wb_tensor_free(v);
}

static void test_alloc_limit(void) {
    const int64_t huge[] = {1000000, 1000000, 1000};
    wb_tensor *t = NULL;
    CHECK_ERR(wb_tensor_empty(WB_F32, WB_DEVICE_CPU, 3, huge, &t), WB_ERR_MEMORY, "cannot allocate");
    CHECK(t == NULL);
    const int64_t overflow[] = {INT64_MAX / 2, 4};
    CHECK_ERR(wb_tensor_empty(WB_F32, WB_DEVICE_CPU, 2, overflow, &t), WB_ERR_MEMORY, "more elements");
    const int64_t negative[] = {2, -3};
    CHECK_ERR(wb_tensor_empty(WB_F32, WB_DEVICE_CPU, 2, negative, &t), WB_ERR_SHAPE, "negative size -3");
}

static void test_views(void) {
    wb_tensor *m, *tmp, *t, *f;
    const int64_t shape[] = {3, 2};
    CHECK_OK(wb_arange(WB_F32, WB_DEVICE_CPU, 6, &tmp));
    CHECK_OK(wb_view(tmp, 2, shape, &m));
    wb_tensor_free(tmp);
    CHECK(m->stride[0] == 2 && m->stride[1] == 1);
    CHECK_OK(wb_t(m, &t));
    CHECK(t->shape[0] == 2 && t->shape[1] == 3 && t->stride[0] == 1 && t->stride[1] == 2);
    CHECK(wb_tensor_data(t) == wb_tensor_data(m));
    CHECK(!wb_tensor_is_contiguous(t));
    CHECK_OK(wb_flatten(t, 0, 1, &f));
    double v[6];
    CHECK_OK(wb_to_doubles(f, v));
    const double want[] = {0, 2, 4, 1, 3, 5};
    CHECK(!memcmp(v, want, sizeof want));
    CHECK(wb_tensor_data(f) != wb_tensor_data(m));
    wb_tensor_free(f);

    /* view of the transpose cannot be flattened without a copy */
    const int64_t six[] = {6};
    wb_tensor *bad = NULL;
    CHECK_ERR(wb_view(t, 1, six, &bad), WB_ERR_SHAPE, "view: shape {6} cannot be a view");
    CHECK(bad == NULL);

    /* narrow / select / expand / permute / as_strided */
    wb_tensor *n, *s, *e, *p, *a;
    CHECK_OK(wb_narrow(m, 0, 1, 2, &n));
    CHECK(n->offset == 2 && n->shape[0] == 2);
    CHECK_ERR(wb_narrow(m, 0, 2, 2, &bad), WB_ERR_RANGE, "past the end of dimension 1 of size 3");
    CHECK_OK(wb_select(m, 1, 1, &s));
    CHECK(s->ndim == 1 && s->shape[0] == 3 && s->stride[0] == 2 && s->offset == 1);
    CHECK_ERR(wb_select(m, 1, 2, &bad), WB_ERR_RANGE, "index 3 is out of range");
    const int64_t ex[] = {4, 3, 2};
    CHECK_OK(wb_expand(m, 3, ex, &e));
    CHECK(e->stride[0] == 0 && e->stride[1] == 2);
    const int64_t ex_bad[] = {3, 3};
    CHECK_ERR(wb_expand(m, 2, ex_bad, &bad), WB_ERR_SHAPE, "cannot be expanded");
    const int perm[] = {1, 0};
    CHECK_OK(wb_permute(m, 2, perm, &p));
    CHECK(p->stride[0] == 1 && p->stride[1] == 2);
    const int perm_bad[] = {0, 0};
    CHECK_ERR(wb_permute(m, 2, perm_bad, &bad), WB_ERR_ARGUMENT, "appears twice");
    const int64_t as_shape[] = {2, 2}, as_stride[] = {1, 1};
    CHECK_OK(wb_as_strided(m, 2, as_shape, as_stride, 3, &a)); /* reaches element 5: the last one */
    CHECK_ERR(wb_as_strided(m, 2, as_shape, as_stride, 4, &bad), WB_ERR_RANGE, "needs 7 elements");
    const int64_t neg_stride[] = {-1, 1};
    CHECK_ERR(wb_as_strided(m, 2, as_shape, neg_stride, 4, &bad), WB_ERR_RANGE, "negative stride");
    CHECK_ERR(wb_transpose(m, 0, 2, &bad), WB_ERR_RANGE, "dimension 3 is out of range");
    CHECK(bad == NULL);

    /* copy_ into an expanded (self-overlapping) destination is refused */
    CHECK_ERR(wb_copy_(e, m), WB_ERR_ARGUMENT, "several elements in one memory location");

    wb_tensor_free(n), wb_tensor_free(s), wb_tensor_free(e), wb_tensor_free(p), wb_tensor_free(a);
    wb_tensor_free(t), wb_tensor_free(m);
}

/* The view rule must accept exactly what a stride-regrouping allows: check against brute force
 * (a reshape is a view iff the copy-free strides reproduce the element order). */
static void test_view_rule_against_reference(void) {
    const int64_t base_shape[] = {4, 6};
    wb_tensor *b;
    CHECK_OK(wb_arange(WB_F32, WB_DEVICE_CPU, 24, &b));
    wb_tensor *m;
    CHECK_OK(wb_view(b, 2, base_shape, &m));
    wb_tensor *t;
    CHECK_OK(wb_t(m, &t)); /* {6, 4} strides {1, 6} */
    /* Runs of t that are contiguous in memory: {6} (stride 1) and {4} (stride 6). A target is a
     * view iff it only splits or keeps those runs. */
    const int64_t targets[][3] = {{24, 0, 0}, {6, 4, 0}, {3, 2, 4}, {6, 2, 2}, {2, 3, 4}, {4, 6, 0}, {2, 12, 0}};
    const int ndims[] = {1, 2, 3, 3, 3, 2, 2};
    const int viewable[] = {0, 1, 1, 1, 1, 0, 0};
    for (int i = 0; i < 7; i++) {
        wb_tensor *v = NULL, *r = NULL;
        wb_status st = wb_view(t, ndims[i], targets[i], &v);
        CHECK((st == WB_OK) == viewable[i]);
        CHECK_OK(wb_reshape(t, ndims[i], targets[i], &r));
        double order[24], a[24], c[24]; /* a reshape keeps t's row-major element order */
        CHECK_OK(wb_to_doubles(t, order));
        CHECK_OK(wb_to_doubles(r, c));
        CHECK(!memcmp(order, c, sizeof c));
        if (v) {
            CHECK_OK(wb_to_doubles(v, a));
            CHECK(!memcmp(order, a, sizeof a));
            CHECK(wb_tensor_data(r) == wb_tensor_data(t)); /* reshape stayed a view */
        } else {
            CHECK(wb_tensor_data(r) != wb_tensor_data(t)); /* reshape had to copy */
        }
        wb_tensor_free(v), wb_tensor_free(r);
    }
    wb_tensor_free(t), wb_tensor_free(m), wb_tensor_free(b);
}

static void test_broadcast_kernel_against_naive(void) {
    /* out[i][j][k] = a[i][0][k] op b[j][k] over awkward sizes */
    const int I = 3, J = 17, K = 33;
    float *a = malloc(sizeof(float) * I * K), *b = malloc(sizeof(float) * J * K);
    float *out = malloc(sizeof(float) * I * J * K);
    for (int i = 0; i < I * K; i++)
        a[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < J * K; i++)
        b[i] = (float)(i % 5) + 0.5f;
    const int64_t shape[] = {I, J, K};
    const int64_t os[] = {J * K, K, 1}, as[] = {K, 0, 1}, bs[] = {0, K, 1};
    for (int op = WB_CPU_ADD; op <= WB_CPU_DIV; op++) {
        wb_cpu_binary_f32((wb_cpu_binary_op)op, 3, shape, out, os, a, as, b, bs);
        int bad = 0;
        for (int i = 0; i < I; i++)
            for (int j = 0; j < J; j++)
                for (int k = 0; k < K; k++) {
                    float x = a[i * K + k], y = b[j * K + k], r;
                    r = op == WB_CPU_ADD ? x + y : op == WB_CPU_SUB ? x - y : op == WB_CPU_MUL ? x * y : x / y;
                    if (out[(i * J + j) * K + k] != r) bad++;
                }
        CHECK(bad == 0);
    }
    free(a), free(b), free(out);
}

static void test_philox_known_answer(void) {
    /* Random123's known-answer test for philox4x32_10 with counter 0 and key 0. */
    uint32_t r[4];
    wb_philox4x32_10(0, 0, r);
    CHECK(r[0] == 0x6627e8d5u && r[1] == 0xe169c58du && r[2] == 0xbc57ac4cu && r[3] == 0x9b00dbd8u);
}

static void test_random_stats(void) {
    const int64_t shape[] = {200000};
    wb_tensor *u, *n;
    wb_manual_seed(7);
    CHECK_OK(wb_rand(WB_F32, WB_DEVICE_CPU, 1, shape, &u));
    CHECK_OK(wb_randn(WB_F32, WB_DEVICE_CPU, 1, shape, &n));
    const float *pu = wb_tensor_data(u), *pn = wb_tensor_data(n);
    double su = 0, sn = 0, sn2 = 0, lo = 1, hi = 0;
    for (int i = 0; i < 200000; i++) {
        su += pu[i];
        lo = fmin(lo, pu[i]), hi = fmax(hi, pu[i]);
        sn += pn[i], sn2 += (double)pn[i] * pn[i];
    }
    CHECK(lo >= 0 && hi < 1);
    CHECK(fabs(su / 200000 - 0.5) < 0.01);
    CHECK(fabs(sn / 200000) < 0.01);
    CHECK(fabs(sn2 / 200000 - 1.0) < 0.02);
    /* The same seed gives the same numbers. */
    wb_tensor *u2;
    wb_manual_seed(7);
    CHECK_OK(wb_rand(WB_F32, WB_DEVICE_CPU, 1, shape, &u2));
    CHECK(!memcmp(wb_tensor_data(u2), pu, 200000 * sizeof(float)));
    wb_tensor_free(u), wb_tensor_free(n), wb_tensor_free(u2);
}

static void test_comparisons(void) {
    const int64_t shape[] = {4};
    const double va[] = {1, 2, 3, 4}, vb[] = {1, 2, 3, 4.5}, vnan[] = {1, NAN, 3, 4};
    wb_tensor *a, *b, *c;
    CHECK_OK(wb_from_doubles(WB_F32, WB_DEVICE_CPU, 1, shape, va, &a));
    CHECK_OK(wb_from_doubles(WB_F32, WB_DEVICE_CPU, 1, shape, vb, &b));
    CHECK_OK(wb_from_doubles(WB_F32, WB_DEVICE_CPU, 1, shape, vnan, &c));
    double d;
    int close;
    CHECK_OK(wb_max_abs_diff(a, b, &d));
    CHECK(d == 0.5);
    CHECK_OK(wb_rel_error(b, a, &d));
    CHECK(fabs(d - 0.5 / sqrt(30.0)) < 1e-12);
    CHECK_OK(wb_allclose(a, b, 0, 0.49, &close));
    CHECK(!close);
    CHECK_OK(wb_allclose(a, b, 0, 0.5, &close));
    CHECK(close);
    CHECK_OK(wb_allclose(a, c, 1, 1, &close));
    CHECK(!close);
    CHECK_OK(wb_max_abs_diff(a, c, &d));
    CHECK(isnan(d));
    wb_tensor_free(a), wb_tensor_free(b), wb_tensor_free(c);
}

static int hook_ops, hook_kernels;
static char hook_trace[1024]; /* "op:linear op:t op:addmm kernel:wb_sgemm_..." */

static void count_op(void *user, const wb_op_call *call) {
    (void)user;
    hook_ops++;
    size_t n = strlen(hook_trace);
    snprintf(hook_trace + n, sizeof hook_trace - n, "op:%s ", call->def->name);
}

static void count_kernel(void *user, const wb_kernel_desc *desc) {
    (void)user;
    hook_kernels++;
    size_t n = strlen(hook_trace);
    snprintf(hook_trace + n, sizeof hook_trace - n, "kernel:%s ", wb_kernel_kind_name(desc->kind));
}

/* The linear lesson at the dispatcher: linear -> t (no kernel) -> addmm, one kernel named
 * ..._tn_bias, flops 2*M*N*K; with an activation still one kernel; the dual GeGLU one kernel. */
static void test_linear_is_one_kernel(void) {
    wb_dispatch_hooks hooks = {NULL, count_op, NULL, count_kernel, NULL};
    const int64_t xs[] = {1024, 32}, ws[] = {64, 32}, bs[] = {64};
    wb_tensor *x, *w, *b, *y = NULL, *u, *g = NULL;
    CHECK_OK(wb_randn(WB_F32, WB_DEVICE_CPU, 2, xs, &x));
    CHECK_OK(wb_randn(WB_F32, WB_DEVICE_CPU, 2, ws, &w));
    CHECK_OK(wb_randn(WB_F32, WB_DEVICE_CPU, 1, bs, &b));
    CHECK_OK(wb_randn(WB_F32, WB_DEVICE_CPU, 2, ws, &u));
    const wb_dispatch_hooks *old = wb_dispatch_set_hooks(&hooks);
    hook_ops = hook_kernels = 0, hook_trace[0] = 0;
    CHECK_OK(wb_linear(x, w, b, WB_ACT_NONE, &y));
    CHECK(hook_ops == 3 && hook_kernels == 1);
    CHECK(!strncmp(hook_trace, "op:linear op:t op:addmm kernel:wb_sgemm_", 40));
    CHECK(strstr(hook_trace, "_tn_bias ") != NULL);
    wb_tensor_free(y);
    hook_ops = hook_kernels = 0, hook_trace[0] = 0;
    CHECK_OK(wb_linear(x, w, b, WB_ACT_GELU_TANH, &y));
    CHECK(hook_kernels == 1 && strstr(hook_trace, "_tn_bias_gelu_tanh ") != NULL);
    wb_tensor_free(y);
    hook_ops = hook_kernels = 0, hook_trace[0] = 0;
    CHECK_OK(wb_linear(x, w, NULL, WB_ACT_NONE, &y));
    CHECK(!strncmp(hook_trace, "op:linear op:t op:mm kernel:wb_sgemm_", 37) && strstr(hook_trace, "_tn ") != NULL);
    hook_ops = hook_kernels = 0, hook_trace[0] = 0;
    CHECK_OK(wb_geglu_linear(x, w, u, NULL, NULL, &g));
    CHECK(hook_kernels == 1 && strstr(hook_trace, "kernel:wb_dual_sgemm_") && strstr(hook_trace, "_tn_geglu "));
    wb_dispatch_set_hooks(old);
    if (!(hook_kernels == 1)) fprintf(stderr, "trace: %s\n", hook_trace);
    wb_tensor_free(x), wb_tensor_free(w), wb_tensor_free(b), wb_tensor_free(y), wb_tensor_free(u), wb_tensor_free(g);
}

/* Packed weights are reused while the weight is unchanged and never after it is written. */
static void test_prepack_follows_writes(void) {
    const int64_t xs[] = {3, 40}, ws[] = {50, 40};
    wb_tensor *x, *w, *y1, *y2, *y3, *ref;
    CHECK_OK(wb_randn(WB_F32, WB_DEVICE_CPU, 2, xs, &x));
    CHECK_OK(wb_randn(WB_F32, WB_DEVICE_CPU, 2, ws, &w));
    int before;
    wb_prepack_bytes(&before);
    CHECK_OK(wb_linear(x, w, NULL, WB_ACT_NONE, &y1));
    int after;
    wb_prepack_bytes(&after);
    CHECK(after == before + 1);
    CHECK_OK(wb_linear(x, w, NULL, WB_ACT_NONE, &y2)); /* a hit: no new entry */
    wb_prepack_bytes(&after);
    CHECK(after == before + 1);
    double d;
    CHECK_OK(wb_max_abs_diff(y1, y2, &d));
    CHECK(d == 0);
    CHECK_OK(wb_fill_(w, 0.5)); /* a write: the packing must not be reused */
    CHECK_OK(wb_linear(x, w, NULL, WB_ACT_NONE, &y3));
    wb_tensor *wt;
    CHECK_OK(wb_t(w, &wt));
    CHECK_OK(wb_mm(x, wt, &ref));
    CHECK_OK(wb_max_abs_diff(y3, ref, &d));
    CHECK(d == 0);
    wb_tensor_free(wt), wb_tensor_free(w); /* freeing the storage drops its entry */
    wb_prepack_bytes(&after);
    CHECK(after == before);
    wb_tensor_free(x), wb_tensor_free(y1), wb_tensor_free(y2), wb_tensor_free(y3), wb_tensor_free(ref);
}

/* A view records an op and launches no kernel; an add launches exactly one. */
static void test_dispatch_hooks(void) {
    wb_dispatch_hooks hooks = {NULL, count_op, NULL, count_kernel, NULL};
    const int64_t shape[] = {2, 3};
    wb_tensor *x, *t, *y;
    CHECK_OK(wb_full(WB_F32, WB_DEVICE_CPU, 2, shape, 1.0, &x));
    const wb_dispatch_hooks *old = wb_dispatch_set_hooks(&hooks);
    CHECK_OK(wb_t(x, &t));
    CHECK(hook_ops == 1 && hook_kernels == 0);
    CHECK_OK(wb_add(x, x, &y));
    CHECK(hook_ops == 2 && hook_kernels == 1);
    wb_dispatch_set_hooks(old);
    wb_tensor_free(x), wb_tensor_free(t), wb_tensor_free(y);
}

static void no_work(void *ctx) { (void)ctx; }

/* A kernel whose descriptor counts are not finite (a plugin's, say) still gives a trace that is
 * valid JSON: null in their place, and the count in otherData. */
static void test_trace_with_non_finite_counts(void) {
    wb_prof_options o = {.record_host = 1, .record_device = 1, .max_events = 1024, .max_memory = 4 << 20};
    wb_prof *p;
    CHECK_OK(wb_prof_new(&o, &p));
    CHECK_OK(wb_prof_start(p));
    wb_prof_set_recording(p, 1);
    wb_kernel_kind key = {.op = "nonfinite", .isa = "scalar"};
    wb_kernel_desc desc = {.kind = wb_kernel_kind_intern(&key), .flops = INFINITY, .bytes = NAN, .threads = 1};
    static const wb_launch_layout no_ctx = {.size = 0};
    wb_kernel_launch(&desc, no_work, NULL, &no_ctx);
    desc.flops = -INFINITY, desc.bytes = 4096;
    wb_kernel_launch(&desc, no_work, NULL, &no_ctx);
    wb_prof_stop(p);
    char path[] = "/tmp/wb_trace_nonfinite_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(wb_prof_export_chrome(p, path));
    FILE *f = fopen(path, "r");
    char text[1 << 14] = {0};
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    unlink(path);
    CHECK(n > 0);
    CHECK(strstr(text, "\"flops\": null, \"bytes\": null") != NULL);
    CHECK(strstr(text, "\"flops\": null, \"bytes\": 4096") != NULL);
    CHECK(strstr(text, "\"non_finite_values_written_as_null\": 3") != NULL);
    CHECK(strstr(text, "inf") == NULL && strstr(text, "nan") == NULL);
    wb_prof_free(p);
}

/* A graph captured while the pool ran on one thread (threads.c lowers OpenMP's count so while
 * other processes keep the cores busy) replays on the count asked for once they are free: the
 * GEMM's launch keeps the requested count and the kernel lowers it when it runs. Before, a replay
 * stayed on the capture's one thread (a 256x512x512 GEMM replayed in 706-863 us against 363-416
 * us on two, AMD EPYC Zen 5). */
static void test_graph_replays_on_the_threads_free_now(void) {
#ifdef _OPENMP
    int was_adaptive = wb_threads_set_adaptive(0), was = wb_threads_requested();
    CHECK_OK(wb_set_num_threads(2));
    omp_set_num_threads(1); /* what threads.c does while the cores are busy */
    const int64_t xs[] = {256, 512}, ws[] = {512, 512};
    wb_tensor *x, *w, *y = NULL;
    CHECK_OK(wb_randn(WB_F32, WB_DEVICE_CPU, 2, xs, &x));
    CHECK_OK(wb_randn(WB_F32, WB_DEVICE_CPU, 2, ws, &w));
    wb_graph *g = NULL;
    CHECK_OK(wb_graph_begin(&g));
    CHECK_OK(wb_linear(x, w, NULL, WB_ACT_NONE, &y));
    wb_graph_end(g);
    omp_set_num_threads(2); /* the cores are free again */
    wb_prof_options o = {.record_host = 1, .record_device = 1, .max_events = 1024, .max_memory = 4 << 20};
    wb_prof *p;
    CHECK_OK(wb_prof_new(&o, &p));
    CHECK_OK(wb_prof_start(p));
    wb_prof_set_recording(p, 1);
    CHECK_OK(wb_graph_replay(g));
    wb_prof_stop(p);
    int kernels = 0, threads = 0;
    wb_prof_cursor c;
    wb_prof_cursor_open(&c, p);
    for (const wb_event *e; (e = wb_prof_cursor_next(&c));)
        if (e->kind == WB_EV_KERNEL) kernels++, threads = e->threads;
    wb_prof_cursor_close(&c);
    CHECK(kernels == 1 && threads == 2);
    if (threads != 2) fprintf(stderr, "replayed GEMM ran on %d thread(s), 2 asked for\n", threads);
    wb_prof_free(p);
    wb_graph_free(g);
    wb_tensor_free(x), wb_tensor_free(w), wb_tensor_free(y);
    CHECK_OK(wb_set_num_threads(was));
    wb_threads_set_adaptive(was_adaptive);
#endif
}

/* The thread adaptation (threads.c) on a CPU shared with a busy process: the calling thread,
 * pinned with a spinning child to one CPU, waits for it about half of each window, so the pool
 * drops to one thread; asking for one thread and then two again starts afresh, as nothing is
 * decided while one is asked for. Skipped where schedstat or CPU pinning is not available. */
static void test_threads_adapt_to_a_shared_cpu(void) {
#if defined(__linux__) && defined(_OPENMP)
    cpu_set_t was_set, one;
    if (access("/proc/thread-self/schedstat", R_OK) != 0 || sched_getaffinity(0, sizeof was_set, &was_set) != 0) {
        printf("thread adaptation: no schedstat or affinity here, skipped\n");
        return;
    }
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &was_set)) {
            CPU_SET(c, &one);
            break;
        }
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        printf("thread adaptation: cannot pin to one CPU here, skipped\n");
        return;
    }
    pid_t child = fork();
    if (child == 0)
        for (;;) {} /* shares the pinned CPU */
    if (child < 0) {
        sched_setaffinity(0, sizeof was_set, &was_set);
        printf("thread adaptation: cannot fork here, skipped\n");
        return;
    }
    int was_adaptive = wb_threads_set_adaptive(1), was = wb_threads_requested();
    CHECK_OK(wb_set_num_threads(2));
    const int64_t t0 = wb_now_ns();
    while (!wb_threads_contended() && wb_now_ns() - t0 < 2000000000) {
        for (int64_t t1 = wb_now_ns(); wb_now_ns() - t1 < 1000000;) {} /* 1 ms of work, then a kernel's check */
        wb_threads_adapt();
    }
    CHECK(wb_threads_contended() && wb_get_num_threads() == 1);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK_OK(wb_set_num_threads(1));
    CHECK_OK(wb_set_num_threads(2));
    CHECK(!wb_threads_contended() && wb_get_num_threads() == 2);
    sched_setaffinity(0, sizeof was_set, &was_set);
    CHECK_OK(wb_set_num_threads(was));
    wb_threads_set_adaptive(was_adaptive);
#endif
}

int main(void) {
    test_op_table();
    test_storage_alignment_and_refcount();
    test_alloc_limit();
    test_views();
    test_view_rule_against_reference();
    test_broadcast_kernel_against_naive();
    test_philox_known_answer();
    test_random_stats();
    test_comparisons();
    test_dispatch_hooks();
    test_linear_is_one_kernel();
    test_prepack_follows_writes();
    test_trace_with_non_finite_counts();
    test_graph_replays_on_the_threads_free_now();
    test_threads_adapt_to_a_shared_cpu();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
