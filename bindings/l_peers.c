/* l_peers.c: wb.blis and wb.dnnl, the BLIS and oneDNN comparison peers for benchmarks
 * (core/cpu/peer_blis.c, core/cpu/peer_dnnl.c): GEMMs, a oneDNN linear and MLP made once per shape. Not ops:
 * no dispatcher, no profiler events. wb.openblas lives in l_ops.c. */
#include <string.h>

#include <wb/peer.h>
#include "wb_lua.h"

#define LINEAR_TYPE "wb.DnnlLinear"
#define MLP_TYPE    "wb.DnnlMLP"

typedef struct {
    wb_dnnl_linear *l;
    int64_t tokens, n, k;
} linear_handle;

typedef struct {
    wb_dnnl_mlp *m;
    wb_dtype dtype;
    int64_t tokens, dim;
} mlp_handle;

static int l_blis_available(lua_State *L) {
    lua_pushboolean(L, wb_blis_available());
    return 1;
}

/* wb.blis.info() -> {version=, arch=, build=} of the build the thread count set runs on */
static int l_blis_info(lua_State *L) {
    const char *version, *arch, *build;
    WB_LUA_CHECK(L, wb_blis_info(&version, &arch, &build));
    lua_createtable(L, 0, 3);
    wb_lua_setstring(L, "version", version);
    wb_lua_setstring(L, "arch", arch);
    wb_lua_setstring(L, "build", build);
    return 1;
}

static int l_blis_set_num_threads(lua_State *L) {
    int64_t n = wb_lua_checkint(L, 1, "blis.set_num_threads", "n");
    if (n < 1 || n > WB_MAX_THREADS)
        wb_lua_raise(L, "blis.set_num_threads: %I threads is out of range (1..%d)", (lua_Integer)n, WB_MAX_THREADS);
    WB_LUA_CHECK(L, wb_blis_set_threads((int)n));
    return 0;
}

static int l_blis_matmul(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_blis_matmul(wb_lua_checktensor(L, 1), wb_lua_checktensor(L, 2), &out), &out);
}

static int l_dnnl_available(lua_State *L) {
    lua_pushboolean(L, wb_dnnl_available());
    return 1;
}

/* wb.dnnl.why_not() -> the reason it is not available, or nil */
static int l_dnnl_why_not(lua_State *L) {
    const char *why = wb_dnnl_why_not();
    if (why)
        lua_pushstring(L, why);
    else
        lua_pushnil(L);
    return 1;
}

/* wb.dnnl.info() -> {version=, isa=}: the ISA its JIT kernels (dnnl_sgemm's among them) run on */
static int l_dnnl_info(lua_State *L) {
    const char *version, *isa;
    WB_LUA_CHECK(L, wb_dnnl_info(&version, &isa));
    lua_createtable(L, 0, 2);
    wb_lua_setstring(L, "version", version);
    wb_lua_setstring(L, "isa", isa);
    return 1;
}

static int l_dnnl_set_num_threads(lua_State *L) {
    int64_t n = wb_lua_checkint(L, 1, "dnnl.set_num_threads", "n");
    if (n < 1 || n > WB_MAX_THREADS)
        wb_lua_raise(L, "dnnl.set_num_threads: %I threads is out of range (1..%d)", (lua_Integer)n, WB_MAX_THREADS);
    WB_LUA_CHECK(L, wb_dnnl_set_threads((int)n));
    return 0;
}

static int l_dnnl_matmul(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_dnnl_matmul(wb_lua_checktensor(L, 1), wb_lua_checktensor(L, 2), &out), &out);
}

/* wb.dnnl.linear(w, bias|nil, tokens) -> a matmul primitive for x[tokens, K] w[N, K]^T (+ bias) */
static int l_dnnl_linear(lua_State *L) {
    int64_t tokens = wb_lua_checkint(L, 3, "dnnl.linear", "tokens");
    linear_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
    memset(h, 0, sizeof *h);
    luaL_setmetatable(L, LINEAR_TYPE);
    wb_tensor *w = wb_lua_checktensor(L, 1), *bias = lua_isnoneornil(L, 2) ? NULL : wb_lua_checktensor(L, 2);
    WB_LUA_CHECK(L, wb_dnnl_linear_new(w, bias, tokens, &h->l));
    h->tokens = tokens, h->n = w->shape[0], h->k = w->shape[1];
    return 1;
}

static linear_handle *check_linear(lua_State *L) {
    linear_handle *h = wb_lua_checkudata(L, 1, LINEAR_TYPE);
    if (!h->l) wb_lua_raise(L, "attempt to use a released oneDNN linear");
    return h;
}

static int linear_forward(lua_State *L) {
    linear_handle *h = check_linear(L);
    wb_tensor *y;
    return wb_lua_pushresult(L, wb_dnnl_linear_run(h->l, h->tokens, h->n, h->k, wb_lua_checktensor(L, 2), &y), &y);
}

static int linear_kernel(lua_State *L) {
    lua_pushstring(L, wb_dnnl_linear_kernel(check_linear(L)->l));
    return 1;
}

static int linear_release(lua_State *L) {
    linear_handle *h = wb_lua_checkudata(L, 1, LINEAR_TYPE);
    wb_dnnl_linear_free(h->l);
    h->l = NULL;
    return 0;
}

/* wb.dnnl.mlp(w_gate, w_up, w_down, tokens[, "geglu"|"swiglu"]) -> the MLP for x[tokens, dim] */
static int l_dnnl_mlp(lua_State *L) {
    int64_t tokens = wb_lua_checkint(L, 4, "dnnl.mlp", "tokens");
    const char *kind = wb_lua_optstring(L, 5, "geglu");
    int swiglu = strcmp(kind, "swiglu") == 0;
    if (!swiglu && strcmp(kind, "geglu") != 0) wb_lua_raise(L, "dnnl.mlp: unknown MLP '%s' (geglu or swiglu)", kind);
    mlp_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
    memset(h, 0, sizeof *h);
    luaL_setmetatable(L, MLP_TYPE);
    wb_tensor *gate = wb_lua_checktensor(L, 1), *up = wb_lua_checktensor(L, 2), *down = wb_lua_checktensor(L, 3);
    WB_LUA_CHECK(L, wb_dnnl_mlp_new(swiglu, gate, up, down, tokens, &h->m));
    h->dtype = gate->dtype, h->tokens = tokens, h->dim = gate->shape[1];
    return 1;
}

static mlp_handle *check_mlp(lua_State *L) {
    mlp_handle *h = wb_lua_checkudata(L, 1, MLP_TYPE);
    if (!h->m) wb_lua_raise(L, "attempt to use a released oneDNN MLP");
    return h;
}

static int mlp_forward(lua_State *L) {
    mlp_handle *h = check_mlp(L);
    wb_tensor *y;
    return wb_lua_pushresult(L, wb_dnnl_mlp_run(h->m, h->dtype, h->tokens, h->dim, wb_lua_checktensor(L, 2), &y), &y);
}

static int mlp_kernels(lua_State *L) {
    lua_pushstring(L, wb_dnnl_mlp_kernels(check_mlp(L)->m));
    return 1;
}

static int mlp_release(lua_State *L) {
    mlp_handle *h = wb_lua_checkudata(L, 1, MLP_TYPE);
    wb_dnnl_mlp_free(h->m);
    h->m = NULL;
    return 0;
}

static const luaL_Reg blis[] = {
    {"available", l_blis_available}, {"info", l_blis_info}, {"set_num_threads", l_blis_set_num_threads},
    {"matmul", l_blis_matmul},       {NULL, NULL},
};

static const luaL_Reg dnnl[] = {
    {"available", l_dnnl_available},
    {"why_not", l_dnnl_why_not},
    {"info", l_dnnl_info},
    {"set_num_threads", l_dnnl_set_num_threads},
    {"matmul", l_dnnl_matmul},
    {"linear", l_dnnl_linear},
    {"mlp", l_dnnl_mlp},
    {NULL, NULL},
};

/* a handle type: forward as a method and as __call, one release for __gc/__close/release() */
static void register_type(lua_State *L, const char *type, lua_CFunction forward, lua_CFunction kernels,
                          const char *kernels_name, lua_CFunction release) {
    luaL_newmetatable(L, type);
    const luaL_Reg meta[] = {{"__call", forward}, {"__gc", release}, {"__close", release}, {NULL, NULL}};
    luaL_setfuncs(L, meta, 0);
    const luaL_Reg methods[] = {{"forward", forward}, {kernels_name, kernels}, {"release", release}, {NULL, NULL}};
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

void wb_lua_register_peers(lua_State *L) {
    register_type(L, LINEAR_TYPE, linear_forward, linear_kernel, "kernel", linear_release);
    register_type(L, MLP_TYPE, mlp_forward, mlp_kernels, "kernels", mlp_release);
    luaL_newlib(L, blis);
    lua_setfield(L, -2, "blis");
    luaL_newlib(L, dnnl);
    lua_setfield(L, -2, "dnnl");
}
