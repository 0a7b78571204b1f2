/* dnnl_peer.c: oneDNN as a comparison peer, built as libwb_dnnl_peer.so when libdnnl-dev is
 * present and dlopen'ed by the workbench (core/cpu/peer_dnnl.c), so the workbench itself links no
 * oneDNN. It offers dnnl_sgemm, one matmul primitive per linear shape, and the gated MLP
 * (GeGLU/SwiGLU) as oneDNN would be used for it: three matmul primitives created once per shape,
 * the gate's activation and the multiply by the up projection as post-ops of the gate matmul,
 * weights reordered once into the layouts the primitives chose. Not a workbench op: no tensors,
 * no profiler; the interface is core/include/wb/abi/dnnl_peer.h. */
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wb/abi/dnnl_peer.h>

static _Thread_local char error_text[512];
static dnnl_engine_t engine;
static dnnl_stream_t stream;

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, sizeof error_text, fmt, ap);
    va_end(ap);
    return -1;
}

/* a oneDNN call that must succeed, else the function returns -1 with the call and status named */
#define TRY(call)                                                                                                      \
    do {                                                                                                               \
        dnnl_status_t st_ = (call);                                                                                    \
        if (st_ != dnnl_success) return fail("oneDNN: %s failed (%s)", #call, dnnl_status2str(st_));                   \
    } while (0)

static const char *last_error(void) { return error_text; }

static int ready(void) {
    if (stream) return 0;
    if (!engine) TRY(dnnl_engine_create(&engine, dnnl_cpu, 0));
    TRY(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    return 0;
}

static const char *version(void) {
    static char text[96];
    const dnnl_version_t *v = dnnl_version();
    const char *runtime = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
                          : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                          : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                               : "other";
    snprintf(text, sizeof text, "oneDNN %d.%d.%d (%s runtime)", v->major, v->minor, v->patch, runtime);
    return text;
}

static const char *isa(void) {
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

/* oneDNN's OpenMP runtime runs on omp_get_max_threads() of the calling thread */
static int set_threads(int n) {
    if (n < 1) return fail("oneDNN: %d threads", n);
    omp_set_num_threads(n);
    return 0;
}

static int sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float *c, int64_t ldc) {
    TRY(dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc));
    return 0;
}

/* One matmul primitive with its weights in the layout it chose. */
typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t src, weights, dst, bias, post_src; /* src/dst/post_src: handles set per call */
    char kernel[64];
} matmul;

static dnnl_data_type_t dt_of(int dtype) { return dtype == WB_DNNL_BF16 ? dnnl_bf16 : dnnl_f32; }

static void matmul_free(matmul *mm) {
    if (mm->prim) dnnl_primitive_destroy(mm->prim);
    dnnl_memory_t *mems[] = {&mm->src, &mm->weights, &mm->dst, &mm->bias, &mm->post_src};
    for (int i = 0; i < 5; i++)
        if (*mems[i]) dnnl_memory_destroy(*mems[i]);
    memset(mm, 0, sizeof *mm);
}

/* dst[m,n] = src[m,k] w^T (w given as [n,k] row-major), then the post-ops `po` (may be NULL; a
 * binary post-op's operand is [m,n] row-major); weights reordered once from w. */
static int matmul_init(matmul *mm, dnnl_data_type_t dt, int64_t m, int64_t n, int64_t k, const void *w,
                       const float *bias, dnnl_post_ops_t po) {
    memset(mm, 0, sizeof *mm);
    dnnl_memory_desc_t src_md, w_any, w_user, dst_md, bias_md;
    dnnl_dims_t sd = {m, k}, wd = {k, n}, dd = {m, n}, bd = {1, n};
    TRY(dnnl_memory_desc_init_by_tag(&src_md, 2, sd, dt, dnnl_ab));
    TRY(dnnl_memory_desc_init_by_tag(&w_any, 2, wd, dt, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&w_user, 2, wd, dt, dnnl_ba)); /* w[n][k]: element (k, n) at n*k_total + k */
    TRY(dnnl_memory_desc_init_by_tag(&dst_md, 2, dd, dt, dnnl_ab));
    if (bias) TRY(dnnl_memory_desc_init_by_tag(&bias_md, 2, bd, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t desc;
    TRY(dnnl_matmul_desc_init(&desc, &src_md, &w_any, bias ? &bias_md : NULL, &dst_md));
    dnnl_primitive_attr_t attr = NULL;
    if (po) {
        TRY(dnnl_primitive_attr_create(&attr));
        dnnl_status_t st = dnnl_primitive_attr_set_post_ops(attr, po);
        if (st != dnnl_success) {
            dnnl_primitive_attr_destroy(attr);
            return fail("oneDNN: setting the post-ops failed (%s)", dnnl_status2str(st));
        }
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return fail("oneDNN has no %s matmul for [%lld,%lld]x[%lld,%lld]%s on this CPU (%s)", dnnl_dt2str(dt),
                    (long long)m, (long long)k, (long long)k, (long long)n, po ? " with post-ops" : "",
                    dnnl_status2str(st));
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(mm->kernel, sizeof mm->kernel, "%s", impl);
    /* a copy: the query's answer lives in the primitive descriptor, destroyed below */
    const dnnl_memory_desc_t *w_query = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_desc_t w_chosen = *w_query, *w_md = &w_chosen;
    int rc = 0;
    dnnl_memory_t user = NULL;
    if (dnnl_primitive_create(&mm->prim, pd) != dnnl_success ||
        dnnl_memory_create(&mm->weights, w_md, engine, DNNL_MEMORY_ALLOCATE) != dnnl_success ||
        dnnl_memory_create(&user, &w_user, engine, (void *)w) != dnnl_success ||
        dnnl_memory_create(&mm->src, &src_md, engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&mm->dst, &dst_md, engine, DNNL_MEMORY_NONE) != dnnl_success)
        rc = fail("oneDNN: creating the matmul [%lld,%lld]x[%lld,%lld] failed", (long long)m, (long long)k,
                  (long long)k, (long long)n);
    if (!rc && bias) { /* a copy: the caller's bias may go away */
        void *data = NULL;
        if (dnnl_memory_create(&mm->bias, &bias_md, engine, DNNL_MEMORY_ALLOCATE) != dnnl_success ||
            dnnl_memory_get_data_handle(mm->bias, &data) != dnnl_success || !data)
            rc = fail("oneDNN: creating the bias memory failed");
        else
            memcpy(data, bias, (size_t)n * sizeof(float));
    }
    if (!rc && po && dnnl_memory_create(&mm->post_src, &dst_md, engine, DNNL_MEMORY_NONE) != dnnl_success)
        rc = fail("oneDNN: creating the post-op operand failed");
    dnnl_primitive_desc_destroy(pd);
    if (!rc) { /* the weights, once, into the primitive's layout */
        dnnl_primitive_desc_t rpd;
        dnnl_primitive_t reorder;
        dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, mm->weights}};
        if (dnnl_reorder_primitive_desc_create(&rpd, &w_user, engine, w_md, engine, NULL) != dnnl_success)
            rc = fail("oneDNN: no reorder of the weights into the matmul's layout");
        else {
            if (dnnl_primitive_create(&reorder, rpd) != dnnl_success ||
                dnnl_primitive_execute(reorder, stream, 2, args) != dnnl_success || dnnl_stream_wait(stream))
                rc = fail("oneDNN: reordering the weights failed");
            else
                dnnl_primitive_destroy(reorder);
            dnnl_primitive_desc_destroy(rpd);
        }
    }
    if (user) dnnl_memory_destroy(user);
    if (rc) matmul_free(mm);
    return rc;
}

static int matmul_run(matmul *mm, const void *src, void *dst, void *post_src) {
    TRY(dnnl_memory_set_data_handle(mm->src, (void *)src));
    TRY(dnnl_memory_set_data_handle(mm->dst, dst));
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, mm->src}, {DNNL_ARG_WEIGHTS, mm->weights}, {DNNL_ARG_DST, mm->dst}};
    int nargs = 3;
    if (mm->bias) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mm->bias};
    if (mm->post_src) {
        TRY(dnnl_memory_set_data_handle(mm->post_src, post_src));
        /* the binary mul is the second post-op (index 1), after the activation */
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, mm->post_src};
    }
    TRY(dnnl_primitive_execute(mm->prim, stream, nargs, args));
    TRY(dnnl_stream_wait(stream));
    return 0;
}

struct wb_dnnl_linear {
    matmul mm;
};

static wb_dnnl_linear *linear_new(int64_t m, int64_t n, int64_t k, const float *w, const float *bias) {
    if (ready()) return NULL;
    wb_dnnl_linear *l = calloc(1, sizeof *l);
    if (!l) return fail("out of memory"), NULL;
    if (matmul_init(&l->mm, dnnl_f32, m, n, k, w, bias, NULL)) {
        free(l);
        return NULL;
    }
    return l;
}

static int linear_run(wb_dnnl_linear *l, const float *x, float *y) { return matmul_run(&l->mm, x, y, NULL); }
static const char *linear_kernel(const wb_dnnl_linear *l) { return l->mm.kernel; }

static void linear_free(wb_dnnl_linear *l) {
    if (!l) return;
    matmul_free(&l->mm);
    free(l);
}

struct wb_dnnl_mlp {
    matmul up, gate, down;
    void *up_out, *hidden_out; /* [tokens, hidden] of the dtype */
    char kernels[224];
};

static void mlp_free(wb_dnnl_mlp *m) {
    if (!m) return;
    matmul_free(&m->up), matmul_free(&m->gate), matmul_free(&m->down);
    free(m->up_out), free(m->hidden_out);
    free(m);
}

static wb_dnnl_mlp *mlp_new(int kind, int dtype, int64_t tokens, int64_t dim, int64_t hidden, const void *gate,
                            const void *up, const void *down) {
    if (ready()) return NULL;
    if (kind != WB_DNNL_GEGLU && kind != WB_DNNL_SWIGLU) return fail("oneDNN MLP: unknown kind %d", kind), NULL;
    if (dtype != WB_DNNL_F32 && dtype != WB_DNNL_BF16) return fail("oneDNN MLP: unknown dtype %d", dtype), NULL;
    dnnl_data_type_t dt = dt_of(dtype);
    size_t elem = dtype == WB_DNNL_BF16 ? 2 : 4, inter = (size_t)tokens * (size_t)hidden * elem;
    wb_dnnl_mlp *m = calloc(1, sizeof *m);
    if (!m || !(m->up_out = malloc(inter ? inter : 1)) || !(m->hidden_out = malloc(inter ? inter : 1))) {
        mlp_free(m);
        return fail("out of memory for the oneDNN MLP's intermediates"), NULL;
    }
    /* gate: act(x gate^T) * up_out, both as post-ops of the gate matmul */
    dnnl_post_ops_t po;
    if (dnnl_post_ops_create(&po) != dnnl_success) {
        mlp_free(m);
        return fail("oneDNN: dnnl_post_ops_create failed"), NULL;
    }
    dnnl_memory_desc_t up_md;
    dnnl_dims_t ud = {tokens, hidden};
    int rc = dnnl_memory_desc_init_by_tag(&up_md, 2, ud, dt, dnnl_ab) != dnnl_success ||
             dnnl_post_ops_append_eltwise(po, 1.0f, kind == WB_DNNL_GEGLU ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_swish,
                                          1.0f, 0.0f) != dnnl_success ||
             dnnl_post_ops_append_binary(po, dnnl_binary_mul, &up_md) != dnnl_success;
    if (rc) fail("oneDNN: building the gate's post-ops failed");
    if (!rc) rc = matmul_init(&m->up, dt, tokens, hidden, dim, up, NULL, NULL);
    if (!rc) rc = matmul_init(&m->gate, dt, tokens, hidden, dim, gate, NULL, po);
    if (!rc) rc = matmul_init(&m->down, dt, tokens, dim, hidden, down, NULL, NULL);
    dnnl_post_ops_destroy(po);
    if (rc) {
        mlp_free(m);
        return NULL;
    }
    snprintf(m->kernels, sizeof m->kernels, "up %s, gate %s+%s+mul, down %s", m->up.kernel, m->gate.kernel,
             kind == WB_DNNL_GEGLU ? "gelu_tanh" : "swish", m->down.kernel);
    return m;
}

static int mlp_run(wb_dnnl_mlp *m, const void *x, void *y) {
    if (matmul_run(&m->up, x, m->up_out, NULL) || matmul_run(&m->gate, x, m->hidden_out, m->up_out)) return -1;
    return matmul_run(&m->down, m->hidden_out, y, NULL);
}

static const char *mlp_kernels(const wb_dnnl_mlp *m) { return m->kernels; }

__attribute__((visibility("default"))) const wb_dnnl_peer_api *wb_dnnl_peer_entry(int abi_version) {
    static const wb_dnnl_peer_api api = {
        .abi_version = WB_DNNL_PEER_ABI_VERSION,
        .last_error = last_error,
        .version = version,
        .isa = isa,
        .set_threads = set_threads,
        .sgemm = sgemm,
        .linear_new = linear_new,
        .linear_run = linear_run,
        .linear_kernel = linear_kernel,
        .linear_free = linear_free,
        .mlp_new = mlp_new,
        .mlp_run = mlp_run,
        .mlp_kernels = mlp_kernels,
        .mlp_free = mlp_free,
    };
    return abi_version == WB_DNNL_PEER_ABI_VERSION ? &api : NULL;
}
