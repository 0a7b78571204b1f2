/* l_calibrate.c: the raw calibration primitives for scripts/wb/calibrate.lua (wb._cpu_caches,
 * wb._read_gbs, wb._cpu_clock_mhz, wb._cpu_fma_lanes, wb._cpu_model), wb.device_info routed
 * through that module so the CPU's ceilings are calibrated until stable and cached, and
 * wb.cpu_blocking (the GEMM's cache blocking, derived from the same caches), and the one-kernel
 * MLP's and the GEMM's opt-in phase times (wb._mlp_phases, wb._gemm_phases, for the experiments). */
#include <string.h>

#include <wb/host.h>
#include "wb_lua.h"

static int l_cpu_caches(lua_State *L) {
    lua_createtable(L, 0, 3);
    for (int level = 1; level <= 3; level++) {
        int64_t b = wb_host_cache_bytes(level);
        if (b <= 0) continue;
        lua_pushinteger(L, (lua_Integer)b);
        lua_setfield(L, -2, level == 1 ? "l1" : level == 2 ? "l2" : "l3");
    }
    return 1;
}

/* wb.cpu_blocking() -> {isa = "avx512", mr = 12, nr = 32, kc = 768, mc = 168, nc = 4096, l1 = ..., l2
 * = ..., l3_share = ..., fixed = false}: the GEMM driver's register tile and cache blocking on the
 * active CPU path, and the cache sizes in bytes the rule used (sysfs's, or its defaults); fixed:
 * the path's own constants instead (the portable path); split_vectors: the CPU runs a 256-bit FMA
 * as two halves (Zen 1), so K blocks are deeper than the caches' rule alone gives; first_pass_packs:
 * a row-major A (where at most 32 B slivers pass over a row tile) and a row-major B are packed by
 * the register tiles' first passes over them (in the tiles' time), not up front (in pack_a_ns,
 * pack_b_ns of wb._gemm_phases). */
static int l_cpu_blocking(lua_State *L) {
    wb_host_blocking b = wb_host_blocking_active();
    lua_createtable(L, 0, 10);
    lua_pushstring(L, b.isa);
    lua_setfield(L, -2, "isa");
    const struct {
        const char *name;
        int64_t value;
    } fields[] = {{"mr", b.mr}, {"nr", b.nr}, {"kc", b.kc}, {"mc", b.mc},
                  {"nc", b.nc},    {"l1", b.l1},    {"l2", b.l2}, {"l3_share", b.l3_share}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        lua_pushinteger(L, (lua_Integer)fields[i].value);
        lua_setfield(L, -2, fields[i].name);
    }
    lua_pushboolean(L, b.fixed);
    lua_setfield(L, -2, "fixed");
    lua_pushboolean(L, b.split);
    lua_setfield(L, -2, "split_vectors");
    lua_pushboolean(L, b.first_pass_packs);
    lua_setfield(L, -2, "first_pass_packs");
    if (b.forced != WB_HOST_BLOCKING_RULE) {
        lua_pushstring(L, b.forced == WB_HOST_BLOCKING_SIZES ? "sizes" : "caches");
        lua_setfield(L, -2, "forced");
    }
    return 1;
}

/* wb.set_cpu_blocking("kc,mc,nc" | "caches:L1,L2,L3SHARE" | {kc=, mc=, nc=} | {l1=, l2=, l3_share=}
 * | nil): forces the GEMM's blocking on every CPU path (tests: another CPU's blocking, or small
 * ragged blocks), nil goes back to the rule. Every field is read before anything is set. */
static int l_set_cpu_blocking(lua_State *L) {
    wb_host_blocking_spec spec = {0};
    char why[200];
    if (lua_isnoneornil(L, 1)) {
        wb_host_blocking_force(NULL, NULL, 0);
        return 0;
    }
    if (lua_type(L, 1) == LUA_TSTRING) {
        if (wb_host_blocking_parse(lua_tostring(L, 1), &spec, why, sizeof why))
            return wb_lua_raise(L, "set_cpu_blocking: %s", why);
    } else if (lua_type(L, 1) == LUA_TTABLE) {
        const char *names[] = {"kc", "mc", "nc", "l1", "l2", "l3_share"};
        int64_t v[6] = {0};
        for (int i = 0; i < 6; i++) {
            int type = lua_getfield(L, 1, names[i]);
            if (type != LUA_TNIL && !lua_isinteger(L, -1))
                return wb_lua_raise(L, "set_cpu_blocking: %s must be an integer, got %s", names[i], luaL_typename(L, -1));
            v[i] = type == LUA_TNIL ? 0 : (int64_t)lua_tointeger(L, -1);
            lua_pop(L, 1);
        }
        int sizes = v[0] || v[1] || v[2], caches = v[3] || v[4] || v[5];
        if (sizes == caches)
            return wb_lua_raise(L, "set_cpu_blocking: give kc, mc and nc, or l1, l2 and l3_share (not both, not neither)");
        spec = (wb_host_blocking_spec){.kc = v[0], .mc = v[1], .nc = v[2], .l1 = v[3], .l2 = v[4], .l3_share = v[5]};
        if (sizes && spec.kc <= 0)
            return wb_lua_raise(L, "set_cpu_blocking: kc must be in [1, 8192] steps of k, got %I", (lua_Integer)spec.kc);
    } else {
        return wb_lua_raise(L, "set_cpu_blocking: expected a string, a table or nil, got %s", luaL_typename(L, 1));
    }
    if (wb_host_blocking_force(&spec, why, sizeof why)) return wb_lua_raise(L, "set_cpu_blocking: %s", why);
    return 0;
}

static int l_read_gbs(lua_State *L) {
    lua_Integer threads = wb_lua_checkinteger(L, 1), bytes = wb_lua_checkinteger(L, 2), passes = wb_lua_optinteger(L, 3, 3);
    if (threads < 1 || threads > 1024) return wb_lua_raise(L, "_read_gbs: threads %d out of range", (int)threads);
    if (bytes < 4096 || bytes > ((lua_Integer)1 << 34)) return wb_lua_raise(L, "_read_gbs: %d bytes out of range", (int)bytes);
    if (passes < 1 || passes > 1000) return wb_lua_raise(L, "_read_gbs: passes out of range");
    lua_pushnumber(L, wb_cpu_measure_read_gbs((int)threads, (int64_t)bytes, (int)passes));
    return 1;
}

static int l_cpu_clock_mhz(lua_State *L) {
    lua_pushnumber(L, wb_cpu_clock_mhz());
    return 1;
}

/* A phase-count function's argument: true zeroes the counts and counts the runs that follow,
 * false stops counting, nothing reads them. 0, or raises naming `fn`. */
typedef struct phase_field {
    const char *name;
    int64_t value;
} phase_field;

static int phases_switch(lua_State *L, const char *fn, void (*count)(int)) {
    if (lua_isnoneornil(L, 1)) return 0;
    if (!lua_isboolean(L, 1)) return wb_lua_raise(L, "%s: expected true, false or nothing, got %s", fn, luaL_typename(L, 1));
    count(lua_toboolean(L, 1));
    return 0;
}

/* The counts as a table of integers, by name. */
static int push_phases(lua_State *L, const phase_field *fields, int n) {
    lua_createtable(L, 0, n);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)fields[i].value);
        lua_setfield(L, -2, fields[i].name);
    }
    return 1;
}

/* wb._mlp_phases([on]) -> {runs=, pack_x_ns=, gated_ns=, down_ns=, total_ns=}: the one-kernel
 * MLP's counts so far (wb/host.h says what each phase is). */
static int l_mlp_phases(lua_State *L) {
    phases_switch(L, "_mlp_phases", wb_host_mlp_phases_count);
    wb_host_mlp_phases ph = wb_host_mlp_phases_read();
    const phase_field fields[] = {{"runs", ph.runs},
                                  {"pack_x_ns", ph.pack_x_ns},
                                  {"gated_ns", ph.gated_ns},
                                  {"down_ns", ph.down_ns},
                                  {"total_ns", ph.total_ns}};
    return push_phases(L, fields, (int)(sizeof fields / sizeof fields[0]));
}

/* wb._gemm_phases([on]) -> {runs=, pack_a_ns=, pack_b_ns=, tiles_ns=, epilogue_ns=, total_ns=,
 * wall_ns=, wall_team_ns=}: the CPU GEMM's counts so far (wb/host.h says what each is). */
static int l_gemm_phases(lua_State *L) {
    phases_switch(L, "_gemm_phases", wb_host_gemm_phases_count);
    wb_host_gemm_phases ph = wb_host_gemm_phases_read();
    const phase_field fields[] = {{"runs", ph.runs},         {"pack_a_ns", ph.pack_a_ns},     {"pack_b_ns", ph.pack_b_ns},
                                  {"tiles_ns", ph.tiles_ns}, {"epilogue_ns", ph.epilogue_ns}, {"total_ns", ph.total_ns},
                                  {"wall_ns", ph.wall_ns},   {"wall_team_ns", ph.wall_team_ns}};
    return push_phases(L, fields, (int)(sizeof fields / sizeof fields[0]));
}

/* wb._gemm_tile_gflops(kc[, iters[, store]]) -> GFLOP/s of the active path's register tile alone,
 * one thread, stored "plain" (the default) or as a dual tile through "geglu" or "swiglu"
 * (wb/host.h). */
static int l_gemm_tile_gflops(lua_State *L) {
    static const struct {
        const char *name;
        wb_host_tile_store store;
    } stores[] = {{"plain", WB_HOST_TILE_PLAIN}, {"geglu", WB_HOST_TILE_GEGLU}, {"swiglu", WB_HOST_TILE_SWIGLU}};
    lua_Integer kc = luaL_checkinteger(L, 1), iters = luaL_optinteger(L, 2, 20000);
    if (kc < 1 || kc > 8192) return wb_lua_raise(L, "_gemm_tile_gflops: kc must be 1 to 8192, got %I", kc);
    if (iters < 1 || iters > 100000000)
        return wb_lua_raise(L, "_gemm_tile_gflops: iters must be 1 to 100000000, got %I", iters);
    const char *name = luaL_optstring(L, 3, "plain");
    size_t i = 0;
    while (i < sizeof stores / sizeof stores[0] && strcmp(stores[i].name, name) != 0) i++;
    if (i == sizeof stores / sizeof stores[0])
        return wb_lua_raise(L, "_gemm_tile_gflops: store must be \"plain\", \"geglu\" or \"swiglu\", got \"%s\"", name);
    double g = wb_host_gemm_tile_gflops((int64_t)kc, (int64_t)iters, stores[i].store);
    if (g < 0) return wb_lua_raise(L, "_gemm_tile_gflops: out of memory for a depth-%I sliver", kc);
    lua_pushnumber(L, g);
    return 1;
}

static int l_cpu_fma_lanes(lua_State *L) {
    lua_pushinteger(L, wb_cpu_fma_lanes());
    return 1;
}

static int l_cpu_model(lua_State *L) {
    lua_pushstring(L, wb_cpu_model());
    return 1;
}

/* wb.device_info(...) -> require("wb.calibrate").device_info(...) */
static int l_device_info(lua_State *L) {
    int n = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushstring(L, "wb.calibrate");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "device_info");
    lua_insert(L, 1);
    lua_pop(L, 1);
    lua_call(L, n, 1);
    return 1;
}

static const luaL_Reg calibrate[] = {
    {"_cpu_caches", l_cpu_caches},     {"_read_gbs", l_read_gbs}, {"_cpu_clock_mhz", l_cpu_clock_mhz},
    {"_cpu_fma_lanes", l_cpu_fma_lanes}, {"_cpu_model", l_cpu_model}, {"cpu_blocking", l_cpu_blocking},
    {"set_cpu_blocking", l_set_cpu_blocking}, {"_mlp_phases", l_mlp_phases}, {"_gemm_phases", l_gemm_phases},
    {"_gemm_tile_gflops", l_gemm_tile_gflops},
    {NULL, NULL},
};

void wb_lua_register_calibrate(lua_State *L) {
    luaL_setfuncs(L, calibrate, 0);
    lua_getfield(L, -1, "device_info"); /* the quick measurement stays reachable for cuda and tests */
    lua_setfield(L, -2, "_device_info_quick");
    lua_pushcfunction(L, l_device_info);
    lua_setfield(L, -2, "device_info");
}
