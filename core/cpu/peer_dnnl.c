/* peer_dnnl.c: oneDNN as a comparison peer for benchmarks: dnnl_sgemm, a matmul primitive per
 * linear shape, and the gated MLP on matmul primitives with post-ops. The oneDNN calls live in
 * the peer module libwb_dnnl_peer.so (built from experiments/peers/ when libdnnl-dev is present),
 * which this file dlopens at first use: the workbench links no oneDNN, and where the module or
 * oneDNN is missing every call fails with one line saying which. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wb/abi/dnnl_peer.h>
#include <wb/peer.h>
#include "storage.h"

static const wb_dnnl_peer_api *api;
static int tried;
static char why_not[PATH_MAX + 256];

/* The module sits next to the executable (the build tree), or where WB_DNNL_PEER points. */
static void module_path(char *buf, size_t len) {
    const char *env = getenv("WB_DNNL_PEER");
    char exe[PATH_MAX];
    if (env && *env)
        snprintf(buf, len, "%s", env);
    else if (wb_executable_dir(exe, sizeof exe))
        snprintf(buf, len, "%s/libwb_dnnl_peer.so", exe);
    else
        snprintf(buf, len, "libwb_dnnl_peer.so");
}

static wb_status load(void) {
    if (!tried) {
        tried = 1;
        char path[PATH_MAX + 32];
        module_path(path, sizeof path);
        if (access(path, F_OK) != 0) {
            snprintf(why_not, sizeof why_not, "oneDNN peer not built (no %s; install libdnnl-dev and configure again)",
                     path);
        } else {
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            wb_dnnl_peer_fn entry = h ? (wb_dnnl_peer_fn)dlsym(h, WB_DNNL_PEER_SYMBOL) : NULL;
            const wb_dnnl_peer_api *a = entry ? entry(WB_DNNL_PEER_ABI_VERSION) : NULL;
            if (!h)
                snprintf(why_not, sizeof why_not, "oneDNN peer cannot be loaded (is libdnnl2 installed?): %s",
                         dlerror());
            else if (!entry)
                snprintf(why_not, sizeof why_not, "oneDNN peer %s exports no %s", path, WB_DNNL_PEER_SYMBOL);
            else if (!a)
                snprintf(why_not, sizeof why_not, "oneDNN peer %s is from another build (it does not speak version %d)",
                         path, WB_DNNL_PEER_ABI_VERSION);
            else
                api = a;
        }
    }
    return api ? WB_OK : wb_error(WB_ERR_UNSUPPORTED, "%s", why_not);
}

int wb_dnnl_available(void) { return load() == WB_OK; }

const char *wb_dnnl_why_not(void) { return load() == WB_OK ? NULL : why_not; }

wb_status wb_dnnl_info(const char **version, const char **isa) {
    wb_status st = load();
    if (st) return st;
    *version = api->version();
    *isa = api->isa();
    return WB_OK;
}

wb_status wb_dnnl_set_threads(int n) {
    if (n < 1 || n > WB_MAX_THREADS)
        return wb_error(WB_ERR_ARGUMENT, "dnnl.set_num_threads: %d threads is out of range (1..%d)", n, WB_MAX_THREADS);
    wb_status st = load();
    if (st) return st;
    return api->set_threads(n) ? wb_error(WB_ERR_ARGUMENT, "dnnl.set_num_threads: %s", api->last_error()) : WB_OK;
}

/* One operand as a row-major matrix with its leading dimension, or its transpose ('N'/'T'). */
static int gemm_operand(const wb_tensor *t, char *trans, int64_t *ld) {
    int64_t rows = t->shape[0], cols = t->shape[1];
    if (t->stride[1] == 1 || cols <= 1) {
        *trans = 'N', *ld = rows > 1 ? t->stride[0] : (cols > 1 ? cols : 1);
        return *ld >= (cols > 1 ? cols : 1);
    }
    if (t->stride[0] == 1 || rows <= 1) {
        *trans = 'T', *ld = t->stride[1];
        return *ld >= (rows > 1 ? rows : 1);
    }
    return 0;
}

wb_status wb_dnnl_matmul(wb_tensor *a, wb_tensor *b, wb_tensor **out) {
    *out = NULL;
    wb_status st = load();
    if (st) return st;
    if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[0] || a->dtype != WB_F32 || b->dtype != WB_F32 ||
        a->device != WB_DEVICE_CPU || b->device != WB_DEVICE_CPU)
        return wb_error(WB_ERR_SHAPE, "dnnl.matmul: expects f32 cpu matrices [M,K] x [K,N]");
    /* an operand that is no BLAS matrix (an expanded view, stride 0) is copied first */
    char ta = 'N', tb = 'N';
    int64_t lda = 1, ldb = 1;
    wb_tensor *ca = NULL, *cb = NULL;
    if ((!gemm_operand(a, &ta, &lda) && (st = wb_contiguous(a, &ca))) ||
        (!gemm_operand(b, &tb, &ldb) && (st = wb_contiguous(b, &cb)))) {
        wb_tensor_free(ca);
        return st;
    }
    if (ca) gemm_operand(a = ca, &ta, &lda);
    if (cb) gemm_operand(b = cb, &tb, &ldb);
    const int64_t shape[2] = {a->shape[0], b->shape[1]};
    if ((st = wb_tensor_empty(WB_F32, WB_DEVICE_CPU, 2, shape, out))) {
        wb_tensor_free(ca), wb_tensor_free(cb);
        return st;
    }
    if (shape[0] > 0 && shape[1] > 0 &&
        api->sgemm(ta, tb, shape[0], shape[1], a->shape[1], wb_tensor_data(a), lda, wb_tensor_data(b), ldb,
                   wb_tensor_data(*out), shape[1])) {
        st = wb_error(WB_ERR_ARGUMENT, "dnnl.matmul: %s", api->last_error());
        wb_tensor_free(*out);
        *out = NULL;
    }
    wb_tensor_free(ca), wb_tensor_free(cb);
    if (*out) wb_storage_bump_version((*out)->storage);
    return st;
}

static int contiguous_matrix(const wb_tensor *t, wb_dtype dtype) {
    return t->ndim == 2 && t->dtype == dtype && t->device == WB_DEVICE_CPU && wb_tensor_is_contiguous(t) &&
           t->shape[0] > 0 && t->shape[1] > 0;
}

wb_status wb_dnnl_linear_new(wb_tensor *w, wb_tensor *bias, int64_t tokens, wb_dnnl_linear **out) {
    *out = NULL;
    wb_status st = load();
    if (st) return st;
    if (!contiguous_matrix(w, WB_F32))
        return wb_error(WB_ERR_SHAPE, "dnnl.linear: the weight must be a contiguous f32 cpu matrix [N,K]");
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0] || bias->dtype != WB_F32 ||
                 bias->device != WB_DEVICE_CPU || !wb_tensor_is_contiguous(bias)))
        return wb_error(WB_ERR_SHAPE, "dnnl.linear: the bias must be a contiguous f32 vector of %lld",
                        (long long)w->shape[0]);
    if (tokens < 1) return wb_error(WB_ERR_ARGUMENT, "dnnl.linear: %lld tokens (at least 1)", (long long)tokens);
    *out = api->linear_new(tokens, w->shape[0], w->shape[1], wb_tensor_data(w), bias ? wb_tensor_data(bias) : NULL);
    return *out ? WB_OK : wb_error(WB_ERR_UNSUPPORTED, "dnnl.linear: %s", api->last_error());
}

/* The primitive is made for one shape: x must be [tokens, K] as at creation. */
wb_status wb_dnnl_linear_run(wb_dnnl_linear *l, int64_t tokens, int64_t n, int64_t k, wb_tensor *x, wb_tensor **y) {
    *y = NULL;
    if (!contiguous_matrix(x, WB_F32) || x->shape[0] != tokens || x->shape[1] != k)
        return wb_error(WB_ERR_SHAPE, "dnnl.linear: made for a contiguous f32 input [%lld,%lld]", (long long)tokens,
                        (long long)k);
    const int64_t shape[2] = {tokens, n};
    wb_status st = wb_tensor_empty(WB_F32, WB_DEVICE_CPU, 2, shape, y);
    if (st) return st;
    if (api->linear_run(l, wb_tensor_data(x), wb_tensor_data(*y))) {
        wb_tensor_free(*y);
        *y = NULL;
        return wb_error(WB_ERR_ARGUMENT, "dnnl.linear: %s", api->last_error());
    }
    wb_storage_bump_version((*y)->storage);
    return WB_OK;
}

const char *wb_dnnl_linear_kernel(const wb_dnnl_linear *l) { return api->linear_kernel(l); }
void wb_dnnl_linear_free(wb_dnnl_linear *l) {
    if (l) api->linear_free(l);
}

wb_status wb_dnnl_mlp_new(int swiglu, wb_tensor *gate, wb_tensor *up, wb_tensor *down, int64_t tokens,
                          wb_dnnl_mlp **out) {
    *out = NULL;
    wb_status st = load();
    if (st) return st;
    wb_dtype dt = gate->dtype;
    if (dt != WB_F32 && dt != WB_BF16) return wb_error(WB_ERR_DTYPE, "dnnl.mlp: f32 or bf16 weights only");
    if (!contiguous_matrix(gate, dt) || !contiguous_matrix(up, dt) || !contiguous_matrix(down, dt))
        return wb_error(WB_ERR_SHAPE, "dnnl.mlp: the weights must be contiguous cpu matrices of one dtype");
    int64_t hidden = gate->shape[0], dim = gate->shape[1];
    if (up->shape[0] != hidden || up->shape[1] != dim || down->shape[0] != dim || down->shape[1] != hidden)
        return wb_error(WB_ERR_SHAPE,
                        "dnnl.mlp: gate [%lld,%lld] needs up [%lld,%lld] and down [%lld,%lld], got up [%lld,%lld] "
                        "and down [%lld,%lld]",
                        (long long)hidden, (long long)dim, (long long)hidden, (long long)dim, (long long)dim,
                        (long long)hidden, (long long)up->shape[0], (long long)up->shape[1], (long long)down->shape[0],
                        (long long)down->shape[1]);
    if (tokens < 1) return wb_error(WB_ERR_ARGUMENT, "dnnl.mlp: %lld tokens (at least 1)", (long long)tokens);
    *out = api->mlp_new(swiglu ? WB_DNNL_SWIGLU : WB_DNNL_GEGLU, dt == WB_BF16 ? WB_DNNL_BF16 : WB_DNNL_F32, tokens,
                        dim, hidden, wb_tensor_data(gate), wb_tensor_data(up), wb_tensor_data(down));
    return *out ? WB_OK : wb_error(WB_ERR_UNSUPPORTED, "dnnl.mlp: %s", api->last_error());
}

wb_status wb_dnnl_mlp_run(wb_dnnl_mlp *m, wb_dtype dt, int64_t tokens, int64_t dim, wb_tensor *x, wb_tensor **y) {
    *y = NULL;
    if (!contiguous_matrix(x, dt) || x->shape[0] != tokens || x->shape[1] != dim)
        return wb_error(WB_ERR_SHAPE, "dnnl.mlp: made for a contiguous %s input [%lld,%lld]",
                        dt == WB_BF16 ? "bf16" : "f32", (long long)tokens, (long long)dim);
    const int64_t shape[2] = {tokens, dim};
    wb_status st = wb_tensor_empty(dt, WB_DEVICE_CPU, 2, shape, y);
    if (st) return st;
    if (api->mlp_run(m, wb_tensor_data(x), wb_tensor_data(*y))) {
        wb_tensor_free(*y);
        *y = NULL;
        return wb_error(WB_ERR_ARGUMENT, "dnnl.mlp: %s", api->last_error());
    }
    wb_storage_bump_version((*y)->storage);
    return WB_OK;
}

const char *wb_dnnl_mlp_kernels(const wb_dnnl_mlp *m) { return api->mlp_kernels(m); }
void wb_dnnl_mlp_free(wb_dnnl_mlp *m) {
    if (m) api->mlp_free(m);
}
