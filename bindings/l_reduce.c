/* l_reduce.c: the reductions as tensor methods, t:sum([dim][, {keepdim=}]), t:mean(...) and
 * t:max(...) (over a dim: the values and the 1-based indices, as torch.max(x, dim) gives them).
 * Dims are 1-based or negative from the end, as everywhere in Lua; a bad one is named with the
 * tensor's shape. The core does the work (core/ops/reduce.c). */
#include "wb_lua.h"

typedef struct reduce_args {
    int has_dim, keepdim;
    int64_t dim; /* as given, 1-based or negative */
} reduce_args;

/* (t[, dim][, opts]): reads the Lua arguments (an options table may run script code), nothing else. */
static reduce_args read_args(lua_State *L, const char *fname) {
    static const char *const keys[] = {"keepdim", NULL};
    reduce_args a = {0};
    int opts = 0;
    if (lua_istable(L, 2))
        opts = 2;
    else if (!lua_isnoneornil(L, 2)) {
        a.has_dim = 1;
        a.dim = wb_lua_checkint(L, 2, fname, "dimension");
        if (lua_istable(L, 3))
            opts = 3;
        else if (!lua_isnoneornil(L, 3))
            wb_lua_raise(L, "%s: the options must be a table {keepdim=true}, got %s", fname, luaL_typename(L, 3));
    }
    if (opts) {
        wb_lua_checkkeys(L, opts, fname, keys);
        int t = lua_getfield(L, opts, "keepdim");
        if (t != LUA_TNIL && t != LUA_TBOOLEAN)
            wb_lua_raise(L, "%s: keepdim must be a boolean, got %s", fname, luaL_typename(L, -1));
        a.keepdim = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    if (lua_gettop(L) > 3)
        wb_lua_raise(L, "%s: expects (dim, {keepdim=}) at most, got %d arguments", fname, lua_gettop(L) - 1);
    return a;
}

/* The core's 0-based dim (-1: every element), or a raise naming the dim and the shape. */
static int core_dim(lua_State *L, const reduce_args *a, const wb_tensor *t, const char *fname) {
    if (!a->has_dim) return -1;
    int n = t->ndim;
    if (a->dim >= 1 && a->dim <= n) return (int)a->dim - 1;
    if (a->dim <= -1 && a->dim >= -n) return n + (int)a->dim;
    char shape[256];
    wb_shape_format(n, t->shape, shape, sizeof shape);
    if (n == 0)
        return wb_lua_raise(L,
                            "%s: dimension %I is out of range for a tensor of shape {} (no dimensions; t:%s() "
                            "reduces over every element)",
                            fname, (lua_Integer)a->dim, fname);
    return wb_lua_raise(L, "%s: dimension %I is out of range for a tensor of shape %s (expected 1..%d or -%d..-1)",
                        fname, (lua_Integer)a->dim, shape, n, n);
}

typedef wb_status (*reduce_fn)(wb_tensor *, int, int, wb_tensor **);

static int reduction(lua_State *L, reduce_fn fn, const char *fname) {
    wb_lua_checkhandle(L, 1);
    reduce_args a = read_args(L, fname);
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int dim = core_dim(L, &a, t, fname);
    return wb_lua_pushresult(L, fn(t, dim, a.keepdim, &out), &out);
}

static int t_sum(lua_State *L) { return reduction(L, wb_sum, "sum"); }
static int t_mean(lua_State *L) { return reduction(L, wb_mean, "mean"); }

/* t:max() -> the largest value (0-d); t:max(dim) -> values, indices. */
static int t_max(lua_State *L) {
    wb_lua_checkhandle(L, 1);
    reduce_args a = read_args(L, "max");
    if (!a.has_dim) {
        wb_tensor *t = wb_lua_checktensor(L, 1), *out;
        int dim = core_dim(L, &a, t, "max");
        return wb_lua_pushresult(L, wb_max(t, dim, a.keepdim, 1, &out, NULL), &out);
    }
    /* both handles first (allocations, which may run finalizers), empty; filled after the call */
    wb_lua_pushtensor(L, NULL);
    wb_lua_pushtensor(L, NULL);
    wb_tensor *t = wb_lua_checktensor(L, 1), *values, *indices;
    int dim = core_dim(L, &a, t, "max");
    WB_LUA_CHECK(L, wb_max(t, dim, a.keepdim, 1, &values, &indices));
    wb_lua_testtensor(L, -2)->t = values;
    wb_lua_testtensor(L, -1)->t = indices;
    return 2;
}

static const luaL_Reg reductions[] = {{"sum", t_sum}, {"mean", t_mean}, {"max", t_max}, {NULL, NULL}};

void wb_lua_register_reductions(lua_State *L) {
    luaL_getmetatable(L, WB_TENSOR_TYPE);
    lua_getfield(L, -1, "__methods");
    luaL_setfuncs(L, reductions, 0);
    lua_pop(L, 2);
}
