/* l_graph.c: the Lua type wb.Graph and wb.graph.capture(fn, ...): run fn once while recording
 * its kernel launches, then g:replay() re-issues them; g.outputs are fn's results, refreshed by
 * each replay. Check, call the core, push. */
#include <string.h>

#include <wb/graph.h>
#include <wb/profiler.h>
#include "wb_lua.h"

#define GRAPH_TYPE "wb.Graph"

typedef struct graph_handle {
    wb_graph *g;
    int capturing; /* inside its own capture: release and replay must wait */
} graph_handle;

static wb_graph *check_graph(lua_State *L) {
    graph_handle *h = wb_lua_checkudata(L, 1, GRAPH_TYPE);
    if (!h->g) wb_lua_raise(L, "attempt to use a released graph");
    if (h->capturing) wb_lua_raise(L, "the graph is being captured (use it after the capture)");
    return h->g;
}

static int g_release(lua_State *L) {
    graph_handle *h = wb_lua_checkudata(L, 1, GRAPH_TYPE);
    if (h->capturing) return wb_lua_raise(L, "graph.release: the graph is being captured (release it after the capture)");
    wb_graph_free(h->g);
    h->g = NULL;
    return 0;
}

static int g_replay(lua_State *L) {
    WB_LUA_CHECK(L, wb_graph_replay(check_graph(L)));
    lua_settop(L, 1);
    return 1;
}

/* g:nodes() -> {{name=, flops=, bytes=, threads=}, ...} in launch order; built with the
 * collector stopped (each table made could otherwise run a finalizer that releases g) */
static int g_nodes_build(lua_State *L) {
    wb_graph *g = check_graph(L);
    size_t n = wb_graph_node_count(g);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        const wb_kernel_desc *d = wb_graph_node(g, i);
        lua_createtable(L, 0, 4);
        wb_lua_setstring(L, "name", wb_kernel_kind_name(d->kind));
        wb_lua_setnumber(L, "flops", d->flops);
        wb_lua_setnumber(L, "bytes", d->bytes);
        wb_lua_setinteger(L, "threads", d->threads);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int g_nodes(lua_State *L) {
    check_graph(L);
    return wb_lua_unfinalized(L, g_nodes_build);
}

static int g_held_bytes(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)wb_graph_held_bytes(check_graph(L)));
    return 1;
}

static int g_tostring(lua_State *L) {
    graph_handle *h = wb_lua_checkudata(L, 1, GRAPH_TYPE);
    if (!h->g) {
        lua_pushstring(L, "graph(released)");
        return 1;
    }
    int n = (int)wb_graph_node_count(h->g);
    lua_pushfstring(L, "graph(%d kernel%s, %d bytes held)", n, n == 1 ? "" : "s", (int)wb_graph_held_bytes(h->g));
    return 1;
}

static int g_recapture(lua_State *L);

/* g:input(t) -> index, why_not: declares t (a tensor the capture read) as an input that later
 * replays may read from another tensor (g:bind); why_not (or nil) says why they cannot. */
static int g_input(lua_State *L) {
    wb_graph *g = check_graph(L);
    int index;
    const char *why_not;
    WB_LUA_CHECK(L, wb_graph_input_declare(g, wb_lua_checktensor(L, 2), &index, &why_not));
    lua_pushinteger(L, index + 1);
    if (why_not)
        lua_pushstring(L, why_not);
    else
        lua_pushnil(L);
    return 2;
}

/* g:bind(i, t) -> true when the replays now read t for input i with no copy; false when t does
 * not fit (another geometry, a buffer the graph writes): input i reads its captured tensor
 * again, and the caller copies t into it. g:bind(i) goes back to the captured tensor. */
static int g_bind(lua_State *L) {
    wb_graph *g = check_graph(L);
    lua_Integer i = wb_lua_checkinteger(L, 2);
    wb_tensor *t = lua_isnoneornil(L, 3) ? NULL : wb_lua_checktensor(L, 3);
    if (i < 1 || i > wb_graph_input_count(g))
        return wb_lua_raise(L, "no input %I (the graph declares %d)", i, wb_graph_input_count(g));
    lua_pushboolean(L, wb_graph_input_bind(g, (int)i - 1, t));
    return 1;
}

/* g:run(range, t1, ..., tn) -> true after replaying with input i reading t_i (bound, or copied
 * into the captured tensor when it cannot be bound), inside a profiler range named `range` (nil:
 * none); false, with nothing run, when the arguments are not one tensor per declared input with
 * its dtype, device and shape. A compiled call in one call: guard, binding, range and replay. */
static int g_run(lua_State *L) {
    check_graph(L);
    const char *range = wb_lua_optstring(L, 2, NULL); /* a number becomes a string: an allocation */
    wb_graph *g = check_graph(L);
    int n = lua_gettop(L) - 2;
    int fits = n == wb_graph_input_count(g);
    for (int i = 0; i < n && fits; i++) {
        wb_lua_tensor *h = wb_lua_testtensor(L, i + 3);
        fits = h && h->t && wb_graph_input_fits(g, i, h->t);
    }
    if (fits) {
        for (int i = 0; i < n; i++)
            WB_LUA_CHECK(L, wb_graph_input_set(g, i, wb_lua_checktensor(L, i + 3)));
        wb_prof *p = range ? wb_prof_current() : NULL;
        if (p) WB_LUA_CHECK(L, wb_prof_range_push(p, range));
        wb_status st = wb_graph_replay(g);
        if (p) wb_prof_range_pop(p);
        WB_LUA_CHECK(L, st);
    }
    lua_pushboolean(L, fits);
    return 1;
}

static const luaL_Reg graph_methods[] = {
    {"replay", g_replay},         {"recapture", g_recapture}, {"nodes", g_nodes},
    {"held_bytes", g_held_bytes}, {"release", g_release},     {"input", g_input},
    {"bind", g_bind},             {"run", g_run},             {NULL, NULL},
};

/* g.outputs and the methods. (luaL_error: the message names the field, not this metamethod.) */
static int g_index(lua_State *L) {
    const char *k = lua_tostring(L, 2);
    if (k && !strcmp(k, "outputs")) {
        graph_handle *h = wb_lua_checkudata(L, 1, GRAPH_TYPE);
        if (!h->g) return luaL_error(L, "graph.outputs: attempt to use a released graph");
        if (h->capturing) return luaL_error(L, "graph.outputs: the graph is being captured (use it after the capture)");
        lua_getiuservalue(L, 1, 1);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    if (lua_isnil(L, -1)) return luaL_error(L, "graph has no field or method '%s'", k ? k : luaL_typename(L, 2));
    return 1;
}

/* Runs the function at index 2 with the arguments above it under capture into the graph at
 * index 1 (new, or re-captured), and stores its results as g.outputs. */
static int capture_into(lua_State *L, graph_handle *h, int recapture) {
    int nargs = lua_gettop(L) - 2;
    if (wb_graph_needs_warmup()) {
        /* Device graphs (CUDA's) need a warm-up run first: cuBLASLt plans and kernel modules are made
         * and the caching allocator holds the blocks, so nothing allocates or syncs inside
         * the capture. */
        lua_pushvalue(L, 2);
        for (int i = 1; i <= nargs; i++)
            lua_pushvalue(L, 2 + i);
        h->capturing = 1;
        int warm = lua_pcall(L, nargs, 0, 0);
        h->capturing = 0;
        if (warm != LUA_OK) {
            if (recapture) { /* as when the capture itself fails: the graph is gone */
                wb_graph_free(h->g);
                h->g = NULL;
            }
            return lua_error(L);
        }
        h->capturing = 1; /* a finalizer that runs now may not release the graph */
        lua_gc(L, LUA_GCCOLLECT); /* the warm-up's tensors go back to the allocator's cache now */
        h->capturing = 0;
    }
    if (recapture)
        WB_LUA_CHECK(L, wb_graph_recapture_begin(h->g));
    else
        WB_LUA_CHECK(L, wb_graph_begin(&h->g));
    h->capturing = 1;
    int status = lua_pcall(L, nargs, LUA_MULTRET, 0);
    h->capturing = 0;
    if (status != LUA_OK) {
        wb_graph_abort(h->g);
        h->g = NULL;
        return lua_error(L); /* the captured function's error, unchanged */
    }
    wb_graph_end(h->g);
    const char *what = recapture ? "graph.recapture" : "graph.capture";
    if (wb_graph_problem(h->g)) return wb_lua_raise(L, "%s: %s", what, wb_graph_problem(h->g));
    int nres = lua_gettop(L) - 1;
    lua_createtable(L, nres, 0); /* outputs */
    for (int i = 1; i <= nres; i++) {
        if (!lua_isnil(L, i + 1) && !wb_lua_testtensor(L, i + 1))
            return wb_lua_raise(L, "%s: result %d of the captured function is a %s, expected tensors", what, i,
                              luaL_typename(L, i + 1));
        lua_pushvalue(L, i + 1);
        lua_rawseti(L, -2, i);
    }
    lua_setiuservalue(L, 1, 1);
    lua_settop(L, 1);
    return 1;
}

/* wb.graph.capture(fn, ...) */
static int l_capture(lua_State *L) {
    if (lua_type(L, 1) != LUA_TFUNCTION) wb_lua_argerror(L, 1, "a function");
    graph_handle *h = lua_newuserdatauv(L, sizeof *h, 2);
    h->g = NULL;
    h->capturing = 0;
    luaL_setmetatable(L, GRAPH_TYPE);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 2); /* the function, for recapture */
    lua_insert(L, 1);            /* graph, fn, args... */
    return capture_into(L, h, 0);
}

/* g:recapture(...): runs the captured function again (with these arguments) and records it
 * into the same graph: use it after the function's tensors were replaced (not merely written:
 * writes are seen by replay). On cuda the executable graph is updated in place. */
static int g_recapture(lua_State *L) {
    check_graph(L);
    graph_handle *h = lua_touserdata(L, 1);
    lua_getiuservalue(L, 1, 2);
    lua_insert(L, 2); /* graph, fn, args... */
    return capture_into(L, h, 1);
}

void wb_lua_register_graph(lua_State *L) {
    luaL_newmetatable(L, GRAPH_TYPE);
    lua_pushcfunction(L, g_release);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, g_release);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, g_tostring);
    lua_setfield(L, -2, "__tostring");
    luaL_newlib(L, graph_methods);
    /* the methods sit behind a function (g_index), out of reach of wb_lua_name_functions: named
     * here, as "graph.replay" (the names the core's messages use), so that g:replay() on a
     * released graph says "graph.replay: attempt to use a released graph" */
    for (const luaL_Reg *m = graph_methods; m->name; m++) {
        lua_pushfstring(L, "graph.%s", m->name);
        wb_lua_name_function(L, m->func, lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    wb_lua_name_function(L, g_tostring, "graph.tostring");
    wb_lua_name_function(L, g_nodes_build, "graph.nodes");
    lua_pushcclosure(L, g_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_newtable(L); /* wb.graph */
    lua_pushcfunction(L, l_capture);
    lua_setfield(L, -2, "capture");
    lua_setfield(L, -2, "graph");
}
