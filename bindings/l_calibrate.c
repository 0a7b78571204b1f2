/* l_calibrate.c: the raw calibration primitives for scripts/wb/calibrate.lua (wb._cpu_caches,
 * wb._read_gbs, wb._cpu_clock_mhz, wb._cpu_fma_lanes, wb._cpu_model), and wb.device_info routed
 * through that module so the CPU's ceilings are calibrated until stable and cached. */
#include "calibrate.h"
#include "wb_lua.h"

static int l_cpu_caches(lua_State *L) {
    lua_createtable(L, 0, 3);
    for (int level = 1; level <= 3; level++) {
        int64_t b = wb_cpu_cache_bytes(level);
        if (b <= 0) continue;
        lua_pushinteger(L, (lua_Integer)b);
        lua_setfield(L, -2, level == 1 ? "l1" : level == 2 ? "l2" : "l3");
    }
    return 1;
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
    {"_cpu_fma_lanes", l_cpu_fma_lanes}, {"_cpu_model", l_cpu_model}, {NULL, NULL},
};

void wb_lua_register_calibrate(lua_State *L) {
    luaL_setfuncs(L, calibrate, 0);
    lua_getfield(L, -1, "device_info"); /* the quick measurement stays reachable for cuda and tests */
    lua_setfield(L, -2, "_device_info_quick");
    lua_pushcfunction(L, l_device_info);
    lua_setfield(L, -2, "device_info");
}
