/* l_ops.c: the op functions of the wb table (wb.add, wb.sub, ...) and the comparisons
 * (wb.allclose, wb.max_abs_diff, wb.rel_error). Check, call the core, push. */
#include <math.h>
#include <string.h>
#include <time.h>

#include <wb/abi/act_list.h>
#include <wb/abi/arith_list.h>

#include <wb/clock.h>
#include <wb/peer.h>
#include "wb_lua.h"

static int l_max_abs_diff(lua_State *L) {
    double d;
    WB_LUA_CHECK(L, wb_max_abs_diff(wb_lua_checktensor(L, 1), wb_lua_checktensor(L, 2), &d));
    lua_pushnumber(L, d);
    return 1;
}

static int l_rel_error(lua_State *L) {
    double d;
    WB_LUA_CHECK(L, wb_rel_error(wb_lua_checktensor(L, 1), wb_lua_checktensor(L, 2), &d));
    lua_pushnumber(L, d);
    return 1;
}

static double tolerance(lua_State *L, const char *key) {
    if (lua_type(L, -1) != LUA_TNUMBER) wb_lua_raise(L, "allclose: %s must be a number, got %s", key, luaL_typename(L, -1));
    return lua_tonumber(L, -1);
}

static int l_allclose(lua_State *L) {
    static const char *const keys[] = {"rtol", "atol", NULL};
    wb_lua_checktensor(L, 1), wb_lua_checktensor(L, 2); /* type messages first; the pointers are taken below */
    double rtol = 1e-5, atol = 1e-8;
    if (!lua_isnoneornil(L, 3)) { /* before the tensors: the options' __index may release them */
        wb_lua_checktable(L, 3);
        wb_lua_checkkeys(L, 3, "allclose", keys);
        if (lua_getfield(L, 3, "rtol") != LUA_TNIL) rtol = tolerance(L, "rtol");
        if (lua_getfield(L, 3, "atol") != LUA_TNIL) atol = tolerance(L, "atol");
    }
    wb_tensor *a = wb_lua_checktensor(L, 1), *b = wb_lua_checktensor(L, 2);
    int close;
    WB_LUA_CHECK(L, wb_allclose(a, b, rtol, atol, &close));
    lua_pushboolean(L, close);
    return 1;
}

static int l_matmul(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_matmul(wb_lua_checktensor(L, 1), wb_lua_checktensor(L, 2), &out), &out);
}

static int l_addmm(lua_State *L) {
    wb_tensor *out;
    wb_tensor *bias = wb_lua_checktensor(L, 1), *a = wb_lua_checktensor(L, 2), *b = wb_lua_checktensor(L, 3);
    return wb_lua_pushresult(L, wb_addmm(bias, a, b, &out), &out);
}

/* An activation word, in the one vocabulary of wb_activation_parse ("none", "gelu", "gelu_tanh", "silu"). */
static wb_activation check_activation(lua_State *L, int idx, const char *fname) {
    if (lua_type(L, idx) != LUA_TSTRING)
        wb_lua_raise(L, "%s: activation must be a string, got %s", fname, luaL_typename(L, idx));
    wb_activation act;
    if (wb_activation_parse(lua_tostring(L, idx), &act)) wb_lua_raise(L, "%s: %s", fname, wb_error_message());
    return act;
}

/* wb.linear(x, w[, b][, {activation="gelu"|"gelu_tanh"|"silu"|"none"}]) */
static int l_linear(lua_State *L) {
    static const char *const keys[] = {"activation", NULL};
    wb_lua_checktensor(L, 1), wb_lua_checktensor(L, 2); /* type messages first; the pointers are taken below */
    int opts = 0;
    if (lua_istable(L, 3))
        opts = 3;
    else {
        if (!lua_isnoneornil(L, 3)) wb_lua_checktensor(L, 3);
        if (lua_istable(L, 4)) /* wb.linear(x, w, nil, {activation=...}) too */
            opts = 4;
        else if (!lua_isnoneornil(L, 4))
            wb_lua_raise(L, "linear: argument 4 must be an options table, got %s", luaL_typename(L, 4));
    }
    wb_activation act = WB_ACT_NONE;
    if (opts) { /* before the tensors: the options' __index may release them */
        wb_lua_checkkeys(L, opts, "linear", keys);
        if (lua_getfield(L, opts, "activation") != LUA_TNIL) act = check_activation(L, -1, "linear");
    }
    wb_tensor *x = wb_lua_checktensor(L, 1), *w = wb_lua_checktensor(L, 2), *out;
    wb_tensor *bias = opts == 3 || lua_isnoneornil(L, 3) ? NULL : wb_lua_checktensor(L, 3);
    return wb_lua_pushresult(L, wb_linear(x, w, bias, act, &out), &out);
}

/* wb.gelu(x[, {approximate="none"|"tanh"}]): PyTorch's default is the exact (erf) form. */
static int l_gelu(lua_State *L) {
    static const char *const keys[] = {"approximate", NULL};
    wb_lua_checktensor(L, 1); /* its type message first; the pointer is taken after the options */
    wb_activation form = WB_ACT_GELU_ERF;
    if (!lua_isnoneornil(L, 2)) {
        wb_lua_checktable(L, 2);
        wb_lua_checkkeys(L, 2, "gelu", keys);
        if (lua_getfield(L, 2, "approximate") != LUA_TNIL) {
            const char *v = lua_tostring(L, -1);
            if (lua_type(L, -1) == LUA_TSTRING && !strcmp(v, "tanh"))
                form = WB_ACT_GELU_TANH;
            else if (lua_type(L, -1) == LUA_TSTRING && !strcmp(v, "none"))
                form = WB_ACT_GELU_ERF;
            else
                wb_lua_raise(L, "gelu: approximate must be \"tanh\" or \"none\", got %s",
                           lua_type(L, -1) == LUA_TSTRING ? v : luaL_typename(L, -1));
        }
    }
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_gelu(wb_lua_checktensor(L, 1), form, &out), &out);
}

static int l_geglu(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_geglu(wb_lua_checktensor(L, 1), wb_lua_checktensor(L, 2), &out), &out);
}

static int l_swiglu(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_swiglu(wb_lua_checktensor(L, 1), wb_lua_checktensor(L, 2), &out), &out);
}

typedef wb_status (*dual_fn)(wb_tensor *, wb_tensor *, wb_tensor *, wb_tensor *, wb_tensor *, wb_tensor **);

/* wb.geglu_linear / wb.swiglu_linear(x, w_gate, w_up[, b_gate, b_up]) */
static int dual_linear(lua_State *L, dual_fn fn) {
    wb_tensor *out;
    wb_tensor *x = wb_lua_checktensor(L, 1), *g = wb_lua_checktensor(L, 2), *u = wb_lua_checktensor(L, 3);
    wb_tensor *bg = lua_isnoneornil(L, 4) ? NULL : wb_lua_checktensor(L, 4);
    wb_tensor *bu = lua_isnoneornil(L, 5) ? NULL : wb_lua_checktensor(L, 5);
    return wb_lua_pushresult(L, fn(x, g, u, bg, bu, &out), &out);
}

static int l_geglu_linear(lua_State *L) { return dual_linear(L, wb_geglu_linear); }
static int l_swiglu_linear(lua_State *L) { return dual_linear(L, wb_swiglu_linear); }

typedef wb_status (*mlp_fn)(wb_tensor *, wb_tensor *, wb_tensor *, wb_tensor *, wb_tensor *, wb_tensor **);

/* wb.geglu_mlp / wb.swiglu_mlp(x, w_gate, w_up, w_down[, b_down]) */
static int gated_mlp(lua_State *L, mlp_fn fn) {
    wb_tensor *out;
    wb_tensor *x = wb_lua_checktensor(L, 1), *g = wb_lua_checktensor(L, 2), *u = wb_lua_checktensor(L, 3);
    wb_tensor *d = wb_lua_checktensor(L, 4), *b = lua_isnoneornil(L, 5) ? NULL : wb_lua_checktensor(L, 5);
    return wb_lua_pushresult(L, fn(x, g, u, d, b, &out), &out);
}

static int l_geglu_mlp(lua_State *L) { return gated_mlp(L, wb_geglu_mlp); }
static int l_swiglu_mlp(lua_State *L) { return gated_mlp(L, wb_swiglu_mlp); }

/* wb.cpu_isa() -> "avx2"; wb.cpu_isa("scalar") switches the CPU kernels (tests, benchmarks). */
static int l_cpu_isa(lua_State *L) {
    if (!lua_isnoneornil(L, 1)) WB_LUA_CHECK(L, wb_cpu_isa_select(wb_lua_checkstring(L, 1)));
    lua_pushstring(L, wb_cpu_isa_name());
    return 1;
}

/* wb.cpu_bf16() -> "widen"; wb.cpu_bf16("emulated") switches the bf16 GEMM path (tests). */
static int l_cpu_bf16(lua_State *L) {
    if (!lua_isnoneornil(L, 1)) WB_LUA_CHECK(L, wb_cpu_bf16_select(wb_lua_checkstring(L, 1)));
    lua_pushstring(L, wb_cpu_bf16_name());
    return 1;
}

/* wb.cpu_bf16_pair_speed() -> 0.49: the bf16 pair instruction's multiply-add rate over f32 FMAs. */
static int l_cpu_bf16_pair_speed(lua_State *L) {
    lua_pushnumber(L, wb_cpu_bf16_pair_speed());
    return 1;
}

/* wb.sleep_ms(ms): lets other libraries' spinning worker threads go idle between benchmark
 * contenders (OpenBLAS's spin for ~0.1 s after a call and would steal a core from the next one). */
static int l_sleep_ms(lua_State *L) {
    double ms = wb_lua_checknumber(L, 1);
    if (!(ms >= 0 && ms <= 60000)) wb_lua_raise(L, "sleep_ms: %f is out of range (0..60000)", ms);
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000.0) * 1e6)};
    nanosleep(&ts, NULL);
    return 0;
}

static int l_time_ns(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)wb_now_ns());
    return 1;
}

/* wb.cpu_peak_gflops([threads[, ms]]): measured FMA throughput of the active CPU path. */
static int l_cpu_peak_gflops(lua_State *L) {
    lua_Integer threads = wb_lua_optinteger(L, 1, 1);
    double ms = wb_lua_optnumber(L, 2, 100);
    if (threads < 1 || threads > 1024) wb_lua_raise(L, "cpu_peak_gflops: threads must be 1..1024, got %I", threads);
    if (!(ms > 0 && ms <= 10000)) wb_lua_raise(L, "cpu_peak_gflops: ms must be in (0, 10000], got %f", ms);
    lua_pushnumber(L, wb_cpu_measure_peak_gflops((int)threads, ms));
    return 1;
}

static int l_openblas_available(lua_State *L) {
    lua_pushboolean(L, wb_openblas_available());
    return 1;
}

static int l_openblas_info(lua_State *L) {
    const char *core, *note;
    WB_LUA_CHECK(L, wb_openblas_info(&core, &note));
    lua_createtable(L, 0, 3);
    wb_lua_setstring(L, "corename", core);
    wb_lua_setstring(L, "coretype", note);
    if (wb_openblas_config()) wb_lua_setstring(L, "config", wb_openblas_config());
    return 1;
}

static int l_openblas_set_num_threads(lua_State *L) {
    int64_t n = wb_lua_checkint(L, 1, "openblas.set_num_threads", "n");
    /* named as given before the narrowing to int (2^32 + 2 would become 2); the core checks the range */
    if (n < 1 || n > WB_MAX_THREADS)
        wb_lua_raise(L, "openblas.set_num_threads: %I threads is out of range (1..%d)", (lua_Integer)n, WB_MAX_THREADS);
    WB_LUA_CHECK(L, wb_openblas_set_threads((int)n));
    return 0;
}

static int l_openblas_matmul(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_openblas_matmul(wb_lua_checktensor(L, 1), wb_lua_checktensor(L, 2), &out), &out);
}

static const luaL_Reg openblas[] = {
    {"available", l_openblas_available},
    {"info", l_openblas_info},
    {"set_num_threads", l_openblas_set_num_threads},
    {"matmul", l_openblas_matmul},
    {NULL, NULL},
};

/* wb.<name>(x) and t:<name>() for each activation of the list: a C function each, its index a
 * constant (a closure's upvalue cost 60 instructions a call: lua_tointegerx), written by the list. */
enum {
#define ACT_INDEX(ID, ...) ACT_##ID,
    WB_ACT_LIST(ACT_INDEX)
#undef ACT_INDEX
    ACT_COUNT
};
#define ACT_FUNCTION(ID, NAME, ...)                                                                                    \
    static int l_act_##NAME(lua_State *L) {                                                                            \
        wb_tensor *out;                                                                                                \
        return wb_lua_pushresult(L, wb_unary(ACT_##ID, wb_lua_checktensor(L, 1), &out), &out);                         \
    }
WB_ACT_LIST(ACT_FUNCTION)
#undef ACT_FUNCTION
#define ACT_ENTRY(ID, NAME, ...) l_act_##NAME,
static const lua_CFunction act_functions[ACT_COUNT] = {WB_ACT_LIST(ACT_ENTRY)};
#undef ACT_ENTRY

/* The arithmetic ops of <wb/abi/arith_list.h> as data: their Lua functions (l_aux.c) and
 * what wb._ops() tells wb.compile, wb.codegen and help; the expressions are the list's own text. */
typedef struct arith_info {
    const char *name, *expr_c, *expr_cuda, *op, *metamethod, *formula, *method;
    int arity;
    lua_CFunction fn;
} arith_info;
#define BINARY_INFO(ID, NAME, SCALAR, VEC, CUDA, OP, META, FORMULA, METHOD)                                            \
    {#NAME, #VEC, #CUDA, OP, META, FORMULA, METHOD, 2, wb_lua_##NAME},
#define UNARY_INFO(ID, NAME, SCALAR, VEC, CUDA, OP, META, FORMULA, METHOD)                                             \
    {#NAME, #VEC, #CUDA, OP, META, FORMULA, METHOD, 1, wb_lua_##NAME},
static const arith_info arith[] = {WB_BINARY_LIST(BINARY_INFO) WB_ARITH_UNARY_LIST(UNARY_INFO)};
#undef BINARY_INFO
#undef UNARY_INFO
enum { ARITH_COUNT = sizeof arith / sizeof arith[0] };

/* wb._ops() -> the op lists as wb.compile, wb.codegen and wb.help read them (each op declared
 * once, in C): first the activations, {name=, kind="unary", arity=1, formula=, expr_c=,
 * expr_cuda=}; then the arithmetic ops, {name=, kind="binary"|"unary", arity=2|1, formula=,
 * method=, operator=, metamethod=, expr_c=, expr_cuda=} (operator and metamethod when the op
 * has one; the expressions in a and b, or in x). */
static int l_ops_list(lua_State *L) {
    int n = wb_unary_count();
    lua_createtable(L, n + ARITH_COUNT, 0);
    for (int i = 0; i < n; i++) {
        const wb_unary_info *u = wb_unary_get(i);
        lua_createtable(L, 0, 6);
        wb_lua_setstring(L, "name", u->name);
        wb_lua_setstring(L, "kind", "unary");
        wb_lua_setinteger(L, "arity", 1);
        wb_lua_setstring(L, "formula", u->formula);
        wb_lua_setstring(L, "expr_c", u->expr_c);
        wb_lua_setstring(L, "expr_cuda", u->expr_cuda);
        lua_rawseti(L, -2, i + 1);
    }
    for (int i = 0; i < ARITH_COUNT; i++) {
        const arith_info *a = &arith[i];
        lua_createtable(L, 0, 9);
        wb_lua_setstring(L, "name", a->name);
        wb_lua_setstring(L, "kind", a->arity == 2 ? "binary" : "unary");
        wb_lua_setinteger(L, "arity", a->arity);
        wb_lua_setstring(L, "formula", a->formula);
        wb_lua_setstring(L, "method", a->method);
        if (*a->op) wb_lua_setstring(L, "operator", a->op);
        if (*a->metamethod) wb_lua_setstring(L, "metamethod", a->metamethod);
        wb_lua_setstring(L, "expr_c", a->expr_c);
        wb_lua_setstring(L, "expr_cuda", a->expr_cuda);
        lua_rawseti(L, -2, n + i + 1);
    }
    return 1;
}

static const luaL_Reg ops[] = {
    {"time_ns", l_time_ns},
    {"sleep_ms", l_sleep_ms},
    {"cpu_peak_gflops", l_cpu_peak_gflops},
    {"matmul", l_matmul},
    {"addmm", l_addmm},
    {"linear", l_linear},
    {"gelu", l_gelu},
    {"geglu", l_geglu},
    {"geglu_linear", l_geglu_linear},
    {"swiglu", l_swiglu},
    {"swiglu_linear", l_swiglu_linear},
    {"_ops", l_ops_list},
    {"geglu_mlp", l_geglu_mlp},
    {"swiglu_mlp", l_swiglu_mlp},
    {"cpu_isa", l_cpu_isa},
    {"cpu_bf16", l_cpu_bf16},
    {"cpu_bf16_pair_speed", l_cpu_bf16_pair_speed},
    {"max_abs_diff", l_max_abs_diff},
    {"rel_error", l_rel_error},
    {"allclose", l_allclose},
    {NULL, NULL},
};

void wb_lua_register_ops(lua_State *L) {
    luaL_setfuncs(L, ops, 0);
    /* the activations, one function each under its name in wb and in the tensor's methods (one
     * value: help(x.sigmoid) finds wb.sigmoid); the core's list is the same list */
    int wbt = lua_absindex(L, -1);
    luaL_getmetatable(L, WB_TENSOR_TYPE);
    lua_getfield(L, -1, "__methods");
    for (int i = 0; i < ACT_COUNT && i < wb_unary_count(); i++) {
        lua_pushcfunction(L, act_functions[i]);
        lua_setfield(L, -2, wb_unary_get(i)->name);
        lua_pushcfunction(L, act_functions[i]);
        lua_setfield(L, wbt, wb_unary_get(i)->name);
    }
    /* the arithmetic ops: one function each as wb.<name>, t:<name>() and the tensor's metamethod */
    for (int i = 0; i < ARITH_COUNT; i++) {
        lua_pushcfunction(L, arith[i].fn);
        lua_setfield(L, -2, arith[i].name);
        lua_pushcfunction(L, arith[i].fn);
        lua_setfield(L, wbt, arith[i].name);
        if (*arith[i].metamethod) {
            lua_pushcfunction(L, arith[i].fn);
            lua_setfield(L, -3, arith[i].metamethod);
        }
    }
    lua_pop(L, 2);
    luaL_newlib(L, openblas); /* wb.openblas: a comparison peer for benchmarks */
    lua_setfield(L, -2, "openblas");
}
