/* l_codegen.c: wb.codegen, the C side of wb.compile's code generation (core/ops/codegen.h): build a
 * generated kernel from its source (compiled or found in the disk cache) and launch it. */
#include <string.h>

#include <wb/codegen.h>
#include "wb_lua.h"

#define KERNEL_T "wb.GeneratedKernel"

/* wb.codegen.build{symbol=, source=, ops=, dtype=, inputs=, inner_broadcast={bool...}[, device=,
 *   device_source=, epilogue=]} -> kernel, compiled (bool); or nil, message, reason ("no_compiler" | "failed").
 * epilogue = true: source defines a GEMM epilogue (wb_gemm_epilogue_fn; cpu, 0 to 3 inputs); with
 * bias = true its GEMM adds a bias in its own store (wb.codegen.gemm takes it last; then 0 to 2 inputs).
 * source is the kernel's C; on a device other than the cpu, device_source is its CUDA C (source is
 * then the host build, compiled only for a plugin that runs kernels on the host). */
/* The string field `key` of the options table at 1 (left on the stack), or a named error. */
static const char *field_string(lua_State *L, const char *key) {
    if (lua_getfield(L, 1, key) != LUA_TSTRING)
        wb_lua_raise(L, "bad argument #1: field '%s' must be a string, got %s", key, luaL_typename(L, -1));
    return lua_tostring(L, -1);
}

static int l_build(lua_State *L) {
    wb_lua_checktable(L, 1);
    if (wb_lua_sandboxed()) { /* no compiler runs; and its messages would name the cache folder (HOME) */
        lua_pushnil(L);
        lua_pushstring(L, "--sandbox: no compiler runs and no shared objects load");
        lua_pushstring(L, "no_compiler");
        return 3;
    }
    const char *symbol = field_string(L, "symbol"), *source = field_string(L, "source"), *ops = field_string(L, "ops");
    const char *dtype = field_string(L, "dtype");
    wb_device device = WB_DEVICE_CPU;
    const char *device_source = NULL;
    if (lua_getfield(L, 1, "device") != LUA_TNIL && wb_device_parse(field_string(L, "device"), &device))
        wb_lua_raise(L, "codegen.build: %s", wb_error_message());
    if (device != WB_DEVICE_CPU) device_source = field_string(L, "device_source");
    if (lua_getfield(L, 1, "inputs") != LUA_TNUMBER || !lua_isinteger(L, -1))
        wb_lua_raise(L, "bad argument #1: field 'inputs' must be an integer, got %s", luaL_typename(L, -1));
    int nin = (int)lua_tointeger(L, -1);
    int epilogue = lua_getfield(L, 1, "epilogue") != LUA_TNIL && lua_toboolean(L, -1);
    int bias = lua_getfield(L, 1, "bias") != LUA_TNIL && lua_toboolean(L, -1);
    if (bias && !epilogue) wb_lua_raise(L, "codegen.build: bias = true is for a GEMM epilogue (epilogue = true)");
    if (epilogue && (nin < 0 || nin > WB_OP_MAX_INPUTS - 2 - bias))
        wb_lua_raise(L, "codegen.build: a GEMM epilogue takes 0 to %d inputs%s", WB_OP_MAX_INPUTS - 2 - bias,
                     bias ? " besides the GEMM's bias" : "");
    if (epilogue && device != WB_DEVICE_CPU) wb_lua_raise(L, "codegen.build: GEMM epilogues are generated for the cpu only");
    if (!epilogue && (nin < 1 || nin > WB_OP_MAX_INPUTS))
        wb_lua_raise(L, "codegen.build: inputs must be 1 to %d", WB_OP_MAX_INPUTS);
    if (strncmp(symbol, "wb_", 3)) wb_lua_raise(L, "codegen.build: symbol '%s' must start with wb_", symbol);
    wb_codegen_kernel *k = lua_newuserdatauv(L, sizeof *k, 0);
    memset(k, 0, sizeof *k);
    luaL_setmetatable(L, KERNEL_T);
    k->nin = nin;
    k->gemm_epilogue = epilogue;
    k->gemm_bias = bias;
    k->dtype = !strcmp(dtype, "bf16") ? WB_BF16 : WB_F32;
    lua_getfield(L, 1, "inner_broadcast");
    for (int i = 0; i < nin && lua_istable(L, -1); i++)
        if (lua_rawgeti(L, -1, i + 1) && lua_toboolean(L, -1)) k->inner_broadcast |= 1u << i, lua_pop(L, 1);
        else lua_pop(L, 1);
    lua_pop(L, 1);
    wb_status st = device_source ? wb_codegen_build_device(device, symbol, ops, device_source, source, k)
                                 : wb_codegen_build(symbol, ops, source, k);
    if (st) {
        lua_pushnil(L);
        lua_pushstring(L, wb_error_message());
        lua_pushstring(L, st == WB_ERR_UNSUPPORTED ? "no_compiler" : "failed");
        return 3;
    }
    lua_pushboolean(L, k->compiled);
    return 2;
}

/* wb.codegen.run(kernel, shape, inputs...) -> tensor */
static int l_run(lua_State *L) {
    wb_codegen_kernel *k = wb_lua_checkudata(L, 1, KERNEL_T);
    int64_t shape[WB_MAX_DIMS];
    int ndim = wb_lua_checkshape(L, 2, shape, "codegen.run", "shape");
    int nin = lua_gettop(L) - 2;
    if (nin > WB_OP_MAX_INPUTS) wb_lua_raise(L, "codegen.run: %d inputs, at most %d", nin, WB_OP_MAX_INPUTS);
    wb_tensor *in[WB_OP_MAX_INPUTS], *out;
    for (int i = 0; i < nin; i++)
        in[i] = wb_lua_checktensor(L, 3 + i);
    return wb_lua_pushresult(L, wb_codegen_launch(k, nin, in, ndim, shape, &out), &out);
}

/* wb.codegen.gemm(kernel, x, w, inputs...[, bias]) -> tensor: x W^T (+ bias, for a kernel built with
 * bias = true) with the generated epilogue applied per block */
static int l_gemm(lua_State *L) {
    wb_codegen_kernel *k = wb_lua_checkudata(L, 1, KERNEL_T);
    wb_tensor *x = wb_lua_checktensor(L, 2), *w = wb_lua_checktensor(L, 3), *in[WB_OP_MAX_INPUTS], *out;
    int nin = lua_gettop(L) - 3;
    if (nin > WB_OP_MAX_INPUTS - 2) wb_lua_raise(L, "codegen.gemm: %d epilogue inputs, at most %d", nin, WB_OP_MAX_INPUTS - 2);
    for (int i = 0; i < nin; i++)
        in[i] = wb_lua_checktensor(L, 4 + i);
    return wb_lua_pushresult(L, wb_codegen_gemm_launch(k, x, w, nin, in, &out), &out);
}

static int l_prelude(lua_State *L) {
    lua_pushstring(L, wb_codegen_prelude());
    return 1;
}

/* wb.codegen.compiler(device) -> the device's compiler as one line, or nil, why */
static int l_compiler(lua_State *L) {
    wb_device device;
    if (wb_device_parse(wb_lua_checkstring(L, 1), &device)) wb_lua_raise(L, "codegen.compiler: %s", wb_error_message());
    const char *c = device == WB_DEVICE_CPU ? wb_codegen_command() : wb_codegen_device_compiler(device);
    if (!c) {
        lua_pushnil(L);
        lua_pushstring(L, wb_error_message());
        return 2;
    }
    lua_pushstring(L, c);
    return 1;
}

/* wb.codegen.info() -> {command=, cache_dir=, compiles=, hits=, device_compiles=, device_hits=}
 * (cache_dir nil under --sandbox, or when there is no cache folder) */
static int l_info(lua_State *L) {
    long compiles, hits, dcompiles, dhits;
    wb_codegen_counts(&compiles, &hits);
    wb_codegen_device_counts(&dcompiles, &dhits);
    lua_createtable(L, 0, 6);
    wb_lua_setinteger(L, "device_compiles", (lua_Integer)dcompiles);
    wb_lua_setinteger(L, "device_hits", (lua_Integer)dhits);
    wb_lua_setstring(L, "command", wb_codegen_command());
    if (!wb_lua_sandboxed()) wb_lua_setstring(L, "cache_dir", wb_codegen_cache_dir()); /* it tells HOME */
    wb_lua_setinteger(L, "compiles", (lua_Integer)compiles);
    wb_lua_setinteger(L, "hits", (lua_Integer)hits);
    return 1;
}

static int l_kernel_name(lua_State *L) {
    wb_codegen_kernel *k = wb_lua_checkudata(L, 1, KERNEL_T);
    lua_pushstring(L, wb_kernel_kind_name(k->kind));
    return 1;
}

static const luaL_Reg codegen[] = {
    {"build", l_build},      {"run", l_run},           {"gemm", l_gemm}, {"prelude", l_prelude}, {"info", l_info},
    {"name", l_kernel_name}, {"compiler", l_compiler}, {NULL, NULL},
};

void wb_lua_register_codegen(lua_State *L) {
    luaL_newmetatable(L, KERNEL_T);
    lua_pop(L, 1);
    luaL_newlib(L, codegen);
    lua_pushinteger(L, WB_OP_MAX_INPUTS); /* the most tensor inputs a generated pointwise kernel takes */
    lua_setfield(L, -2, "max_inputs");
    lua_setfield(L, -2, "codegen");
}
