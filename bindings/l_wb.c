/* l_wb.c: the `wb` module table: creation functions, the generator, threads, devices, and
 * lazy loading of the Lua-side submodules (wb.nn, wb.bench, ... from scripts/wb/). */
#include <stdlib.h>
#include <string.h>

#include <wb/peer.h>
#include <wb/profiler.h>
#include "wb_lua.h"
#include <wb/roofline.h>
#include "wb_version.h"

/* ---- wb.tensor(nested_table, opts) ---------------------------------------------------------- */

typedef struct nested {
    int ndim;
    int64_t shape[WB_MAX_DIMS];
    double *values;
    int64_t count;
    int64_t path[WB_MAX_DIMS]; /* 1-based position, for messages */
} nested;

static const char *path_string(lua_State *L, const nested *n, int depth) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; i < depth; i++) {
        lua_pushfstring(L, "[%d]", (int)n->path[i]);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

static void nested_fill(lua_State *L, int idx, nested *n, int depth) {
    if (depth == n->ndim) {
        if (lua_type(L, idx) != LUA_TNUMBER)
            wb_lua_raise(L, "tensor: element %s is a %s, expected a number", path_string(L, n, depth),
                       luaL_typename(L, idx));
        n->values[n->count++] = lua_tonumber(L, idx);
        return;
    }
    if (!lua_istable(L, idx))
        wb_lua_raise(L, "tensor: ragged nested table: element %s is a %s, but its siblings are tables of %d",
                   path_string(L, n, depth), luaL_typename(L, idx), (int)n->shape[depth]);
    lua_Integer len = (lua_Integer)lua_rawlen(L, idx); /* raw: __len and __index are not data */
    if (len != n->shape[depth])
        wb_lua_raise(
            L, "tensor: ragged nested table: element %s has %d entries, expected %d like the first one at that depth",
            depth ? path_string(L, n, depth) : "(top)", (int)len, (int)n->shape[depth]);
    luaL_checkstack(L, 4, "tensor");
    for (lua_Integer i = 1; i <= len; i++) {
        n->path[depth] = i;
        lua_rawgeti(L, idx, i);
        nested_fill(L, lua_gettop(L), n, depth + 1);
        lua_pop(L, 1);
    }
}

static int l_tensor(lua_State *L) {
    wb_dtype dtype;
    wb_device device;
    wb_lua_checkopts(L, 2, "tensor", &dtype, &device);
    nested n = {0};
    if (lua_type(L, 1) != LUA_TNUMBER && !lua_istable(L, 1))
        return wb_lua_raise(L, "tensor: expected a number or a nested table of numbers, got %s", luaL_typename(L, 1));
    /* The shape comes from the first element at each depth; nested_fill checks the rest. */
    lua_pushvalue(L, 1);
    while (lua_istable(L, -1)) {
        if (n.ndim == WB_MAX_DIMS) return wb_lua_raise(L, "tensor: nested deeper than %d levels", WB_MAX_DIMS);
        lua_Integer len = (lua_Integer)lua_rawlen(L, -1);
        n.shape[n.ndim++] = len;
        if (len == 0) break;
        lua_rawgeti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
    int64_t numel = 1;
    for (int i = 0; i < n.ndim; i++)
        if (__builtin_mul_overflow(numel, n.shape[i], &numel) || numel > ((int64_t)1 << 48))
            return wb_lua_raise(L, "tensor: the nested table's shape has more elements than can be addressed");
    n.values = lua_newuserdatauv(L, (size_t)(numel ? numel : 1) * sizeof(double), 0);
    nested_fill(L, 1, &n, 0);
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_from_doubles(dtype, device, n.ndim, n.shape, n.values, &out), &out);
}

/* ---- shape-based creation ------------------------------------------------------------------- */

static int l_empty(lua_State *L) {
    int64_t shape[WB_MAX_DIMS];
    int ndim = wb_lua_checkshape(L, 1, shape, "empty", "shape");
    wb_dtype dtype;
    wb_device device;
    wb_lua_checkopts(L, 2, "empty", &dtype, &device);
    wb_tensor *out;
    wb_status st = wb_tensor_empty(dtype, device, ndim, shape, &out);
    return wb_lua_pushresult(L, st ? wb_error_prefix(st, "empty") : st, &out);
}

static int full_common(lua_State *L, const char *name, int shape_idx, int opts_idx, double value) {
    int64_t shape[WB_MAX_DIMS];
    int ndim = wb_lua_checkshape(L, shape_idx, shape, name, "shape");
    wb_dtype dtype;
    wb_device device;
    wb_lua_checkopts(L, opts_idx, name, &dtype, &device);
    wb_tensor *out;
    wb_status st = wb_full(dtype, device, ndim, shape, value, &out);
    if (st) wb_error_prefix(st, name);
    return wb_lua_pushresult(L, st, &out);
}

static int l_zeros(lua_State *L) { return full_common(L, "zeros", 1, 2, 0.0); }
static int l_ones(lua_State *L) { return full_common(L, "ones", 1, 2, 1.0); }
static int l_full(lua_State *L) { return full_common(L, "full", 1, 3, wb_lua_checknumber(L, 2)); }

typedef wb_status (*random_fn)(wb_dtype, wb_device, int, const int64_t *, wb_tensor **);

static int random_common(lua_State *L, const char *name, random_fn fn) {
    int64_t shape[WB_MAX_DIMS];
    int ndim = wb_lua_checkshape(L, 1, shape, name, "shape");
    wb_dtype dtype;
    wb_device device;
    wb_lua_checkopts(L, 2, name, &dtype, &device);
    wb_tensor *out;
    return wb_lua_pushresult(L, fn(dtype, device, ndim, shape, &out), &out);
}

static int l_rand(lua_State *L) { return random_common(L, "rand", wb_rand); }
static int l_randn(lua_State *L) { return random_common(L, "randn", wb_randn); }

static int l_arange(lua_State *L) {
    int64_t n = wb_lua_checkint(L, 1, "arange", "n");
    wb_dtype dtype;
    wb_device device;
    wb_lua_checkopts(L, 2, "arange", &dtype, &device);
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_arange(dtype, device, n, &out), &out);
}

/* ---- generator, threads, devices ------------------------------------------------------------- */

static int l_manual_seed(lua_State *L) {
    int64_t seed = wb_lua_checkint(L, 1, "manual_seed", "seed");
    wb_manual_seed((uint64_t)seed);
    return 0;
}

static int l_initial_seed(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)wb_initial_seed());
    return 1;
}

static int l_set_num_threads(lua_State *L) {
    int64_t n = wb_lua_checkint(L, 1, "set_num_threads", "n");
    /* named as given before the narrowing to int (2^32 + 2 would become 2); the same range as the core's */
    if (n < 1 || n > WB_MAX_THREADS)
        wb_lua_raise(L, "set_num_threads: %I threads is out of range (1..%d)", (lua_Integer)n, WB_MAX_THREADS);
    WB_LUA_CHECK(L, wb_set_num_threads((int)n));
    return 0;
}

/* wb.set_threads_adaptive(false) -> was_on: kernels keep the requested thread count even while
 * other processes keep the cores busy (benchmarks comparing thread counts). */
static int l_set_threads_adaptive(lua_State *L) {
    if (!lua_isboolean(L, 1))
        wb_lua_raise(L, "set_threads_adaptive: bad argument #1 (boolean expected, got %s)", luaL_typename(L, 1));
    lua_pushboolean(L, wb_threads_set_adaptive(lua_toboolean(L, 1)));
    return 1;
}

static int l_get_num_threads(lua_State *L) {
    lua_pushinteger(L, wb_threads_requested());
    return 1;
}

static wb_device opt_device(lua_State *L, int idx, const char *fname) {
    wb_device d = wb_default_device();
    if (!lua_isnoneornil(L, idx) && wb_device_parse(wb_lua_checkstring(L, idx), &d))
        wb_lua_raise(L, "%s: %s", fname, wb_error_message());
    return d;
}

static int l_devices(lua_State *L) {
    lua_newtable(L);
    int n = 0;
    for (int d = 0; d < WB_DEVICE_COUNT; d++)
        if (wb_device_is_available((wb_device)d)) {
            lua_pushstring(L, wb_device_name((wb_device)d));
            lua_rawseti(L, -2, ++n);
        }
    return 1;
}

/* device_info("cuda"): what the driver reports, and the roofline's ceilings from it. */
static int push_cuda_info(lua_State *L, const wb_cuda_info *ci) {
    wb_roofline r;
    wb_roofline_from_info(ci, &r);
    lua_newtable(L);
    wb_lua_setstring(L, "device", "cuda");
    wb_lua_setstring(L, "name", ci->name);
    lua_pushfstring(L, "sm_%d%d", ci->cc_major, ci->cc_minor);
    lua_setfield(L, -2, "isa");
    wb_lua_setinteger(L, "sm_count", ci->sm_count);
    wb_lua_setinteger(L, "memory_bytes", (lua_Integer)ci->total_mem);
    wb_lua_setnumber(L, "peak_gflops", r.gflops);
    wb_lua_setnumber(L, "peak_gflops_bf16", r.gflops_bf16);
    wb_lua_setnumber(L, "bandwidth_gbs", r.gbs);
    lua_pushfstring(L, "%d.%d", ci->runtime_version / 1000, (ci->runtime_version % 1000) / 10);
    lua_setfield(L, -2, "cuda_runtime");
    lua_pushfstring(L, "%d.%d", ci->driver_version / 1000, (ci->driver_version % 1000) / 10);
    lua_setfield(L, -2, "cuda_driver");
    wb_lua_setinteger(L, "cublaslt", (lua_Integer)ci->cublaslt_version);
    wb_lua_setinteger(L, "cupti_api", ci->cupti_version);
    wb_lua_setstring(L, "calibrated", r.how);
    return 1;
}

/* wb.device_info([device]): name, threads, and the roofline's two ceilings (roofline.h). */
static int l_device_info(lua_State *L) {
    wb_device d = opt_device(L, 1, "device_info");
    if (wb_device_check_available(d)) wb_lua_raise(L, "device_info: %s", wb_error_message());
    const wb_cuda_info *ci = wb_device_accelerator_info(d);
    if (ci) return push_cuda_info(L, ci);
    int threads = wb_get_num_threads();
    wb_roofline r;
    wb_roofline_cpu(threads, &r);
    lua_newtable(L);
    wb_lua_setstring(L, "device", wb_device_name(d));
    wb_lua_setstring(L, "name", wb_cpu_model());
    wb_lua_setstring(L, "isa", wb_cpu_isa_name());
    wb_lua_setinteger(L, "threads", threads);
    wb_lua_setnumber(L, "peak_gflops", r.gflops);
    wb_lua_setnumber(L, "bandwidth_gbs", r.gbs);
    wb_lua_setstring(L, "calibrated", r.how);
    return 1;
}

static int l_synchronize(lua_State *L) {
    wb_device d = opt_device(L, 1, "synchronize");
    if (wb_synchronize(d)) wb_lua_raise(L, "synchronize: %s", wb_error_message());
    return 0;
}

static int l_cuda_is_available(lua_State *L) {
    lua_pushboolean(L, wb_device_is_available(WB_DEVICE_CUDA));
    return 1;
}

/* wb.cuda.why_not() -> nil when cuda is available, else the reason (plugin / driver / device). */
static int l_cuda_why_not(lua_State *L) {
    if (wb_device_check_available(WB_DEVICE_CUDA) == WB_OK) return 0;
    lua_pushstring(L, wb_error_message());
    return 1;
}

/* wb.cuda.memory() -> {allocated, reserved, peak} bytes of the caching allocator. */
static int l_cuda_memory(lua_State *L) {
    size_t a, r, p;
    if (wb_device_memory_stats(WB_DEVICE_CUDA, &a, &r, &p)) return wb_lua_raise(L, "cuda.memory: %s", wb_error_message());
    lua_createtable(L, 0, 3);
    wb_lua_setinteger(L, "allocated", (lua_Integer)a);
    wb_lua_setinteger(L, "reserved", (lua_Integer)r);
    wb_lua_setinteger(L, "peak", (lua_Integer)p);
    return 1;
}

static int l_default_device(lua_State *L) {
    lua_pushstring(L, wb_device_name(wb_default_device()));
    return 1;
}

/* wb.<name> for a missing field loads scripts/wb/<name>.lua through require, so wb.nn works
 * without an explicit require; unknown names stay nil. */
/* wb.<name> loads scripts/wb/<name>.lua on first use. package.searchpath, require and the
 * library's folder are captured when wb opens (upvalues): a script that replaces them, or
 * changes package.path, cannot turn this into a probe of other folders. */
static int l_module_index(lua_State *L) {
    if (lua_type(L, 2) != LUA_TSTRING) return 0;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushfstring(L, "wb.%s", lua_tostring(L, 2));
    lua_pushvalue(L, lua_upvalueindex(3));
    lua_call(L, 2, 1);
    if (lua_isnil(L, -1)) return 1;
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_pushfstring(L, "wb.%s", lua_tostring(L, 2));
    lua_call(L, 1, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, -2);
    lua_rawset(L, 1);
    return 1;
}

static const luaL_Reg creation[] = {
    {"tensor", l_tensor}, {"empty", l_empty}, {"zeros", l_zeros},   {"ones", l_ones}, {"full", l_full},
    {"rand", l_rand},     {"randn", l_randn}, {"arange", l_arange}, {NULL, NULL},
};

static const luaL_Reg misc[] = {
    {"manual_seed", l_manual_seed},
    {"initial_seed", l_initial_seed},
    {"set_num_threads", l_set_num_threads},
    {"set_threads_adaptive", l_set_threads_adaptive},
    {"get_num_threads", l_get_num_threads},
    {"devices", l_devices},
    {"device_info", l_device_info},
    {"synchronize", l_synchronize},
    {"default_device", l_default_device},
    {NULL, NULL},
};

void wb_lua_register_creation(lua_State *L) { luaL_setfuncs(L, creation, 0); }

int luaopen_wb(lua_State *L) {
    wb_lua_open_tensor(L);
    luaL_newlib(L, misc);
    wb_lua_register_creation(L);
    wb_lua_register_ops(L);
    wb_lua_register_reductions(L);
    wb_lua_register_profiler(L);
    wb_lua_register_profiler_events(L);
    wb_lua_register_graph(L);
    wb_lua_register_codegen(L);
    wb_lua_register_host(L);
    wb_lua_register_calibrate(L);
    wb_lua_register_files(L);
    wb_lua_register_history(L);
    wb_lua_register_peers(L);
    lua_newtable(L); /* wb.cuda */
    lua_pushcfunction(L, l_cuda_is_available);
    lua_setfield(L, -2, "is_available");
    lua_pushcfunction(L, l_cuda_why_not);
    lua_setfield(L, -2, "why_not");
    lua_pushcfunction(L, l_cuda_memory);
    lua_setfield(L, -2, "memory");
    lua_setfield(L, -2, "cuda");
    wb_lua_setstring(L, "version", WB_VERSION);
    wb_lua_setstring(L, "commit", WB_GIT_COMMIT);
    lua_createtable(L, 0, 3); /* wb.build: how this executable was built */
    wb_lua_setstring(L, "type", WB_BUILD_TYPE);
#ifdef WB_SANITIZE_BUILD
    lua_pushboolean(L, 1);
#else
    lua_pushboolean(L, 0);
#endif
    lua_setfield(L, -2, "sanitizers");
#ifdef WB_LUA_BUILT_HERE
    lua_pushboolean(L, 1); /* Lua compiled into the executable with its flags (scripts/cmake/lua_from_source.cmake) */
#else
    lua_pushboolean(L, 0); /* the system's liblua5.4 */
#endif
    lua_setfield(L, -2, "lua_built_here");
    lua_setfield(L, -2, "build");
    luaL_getmetatable(L, WB_TENSOR_TYPE);
    lua_setfield(L, -2, "Tensor");
    lua_newtable(L); /* metatable: lazy submodules */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchpath");
    lua_getglobal(L, "require");
    lua_getfield(L, -3, "wb_scripts_dir");
    const char *dir = lua_tostring(L, -1);
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua", dir ? dir : ".", dir ? dir : ".");
    lua_remove(L, -2);
    lua_pushcclosure(L, l_module_index, 3);
    lua_remove(L, -2); /* package */
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    wb_lua_name_functions(L, -1);
    return 1;
}
