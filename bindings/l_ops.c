/* l_ops.c: the op functions of the wb table (wb.add, wb.sub, ...) and the comparisons
 * (wb.allclose, wb.max_abs_diff, wb.rel_error). Check, call the core, push. */
#include "wb_lua.h"

typedef wb_status (*binary_fn)(wb_tensor *, wb_tensor *, wb_tensor **);

static int binary(lua_State *L, binary_fn fn, const char *name) {
    lua_settop(L, 2);
    wb_tensor *like = NULL;
    if (luaL_testudata(L, 1, WB_TENSOR_TYPE))
        like = wb_lua_checktensor(L, 1);
    else if (luaL_testudata(L, 2, WB_TENSOR_TYPE))
        like = wb_lua_checktensor(L, 2);
    wb_tensor *a = wb_lua_checkoperand(L, 1, like, name), *b = wb_lua_checkoperand(L, 2, like, name), *out;
    return wb_lua_pushresult(L, fn(a, b, &out), &out);
}

static int l_add(lua_State *L) { return binary(L, wb_add, "add"); }
static int l_sub(lua_State *L) { return binary(L, wb_sub, "sub"); }
static int l_mul(lua_State *L) { return binary(L, wb_mul, "mul"); }
static int l_div(lua_State *L) { return binary(L, wb_div, "div"); }

static int l_neg(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_neg(wb_lua_checktensor(L, 1), &out), &out);
}

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

static int l_allclose(lua_State *L) {
    static const char *const keys[] = {"rtol", "atol", NULL};
    wb_tensor *a = wb_lua_checktensor(L, 1), *b = wb_lua_checktensor(L, 2);
    double rtol = 1e-5, atol = 1e-8;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        wb_lua_checkkeys(L, 3, "allclose", keys);
        if (lua_getfield(L, 3, "rtol") != LUA_TNIL) rtol = luaL_checknumber(L, -1);
        if (lua_getfield(L, 3, "atol") != LUA_TNIL) atol = luaL_checknumber(L, -1);
    }
    int close;
    WB_LUA_CHECK(L, wb_allclose(a, b, rtol, atol, &close));
    lua_pushboolean(L, close);
    return 1;
}

static const luaL_Reg ops[] = {
    {"add", l_add},
    {"sub", l_sub},
    {"mul", l_mul},
    {"div", l_div},
    {"neg", l_neg},
    {"max_abs_diff", l_max_abs_diff},
    {"rel_error", l_rel_error},
    {"allclose", l_allclose},
    {NULL, NULL},
};

void wb_lua_register_ops(lua_State *L) { luaL_setfuncs(L, ops, 0); }
