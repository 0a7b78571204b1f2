/* l_aux.c: what the binding files share, in the manner of lauxlib: the tensor userdata (test,
 * check, push with GC pacing), argument checks that raise clear Lua errors naming the function,
 * turning a failed core status into a Lua error, and the arithmetic functions that serve both
 * the arithmetic ops' functions (wb.add, ..., the tensor metamethods). No arithmetic of its own. */
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include <wb/clock.h>

#include "wb_lua.h"

/* ---- the name of the running function, for messages ------------------------------------------ */

/* Every error a binding raises starts with the name of the function the script called. Under
 * pcall(f, ...) or a method call Lua's own call-site name (lua_getinfo "n", what luaL_argerror
 * uses) is missing or '?', so the names come from a registry table function -> name, filled
 * once the module is built (wb_lua_name_functions). Only errors pay for the lookup. */
static const char names_key = 0;

static int raw_field(lua_State *L, int idx, const char *key) {
    idx = lua_absindex(L, idx);
    lua_pushstring(L, key);
    return lua_rawget(L, idx);
}

/* Pass p names the functions of rank p only, so that a function known by several names gets
 * its public one: t:release is "release", not "gc"; wb.mkdir_p is not wb._mkdir_p. */
static void name_functions(lua_State *L, int idx, const char *prefix, int depth, int pass) {
    idx = lua_absindex(L, idx);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &names_key);
    int names = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char *key = lua_tostring(L, -2);
            /* rank 0: public names; 1: metamethods (__tostring: "tostring"); 2: wb._* internals */
            int rank = key[0] != '_' ? 0 : key[1] == '_' ? 1 : 2;
            if (rank == 1) key += 2;
            if (lua_type(L, -1) == LUA_TFUNCTION && rank == pass) {
                lua_pushvalue(L, -1);
                if (lua_rawget(L, names) == LUA_TNIL) { /* the first name found wins: wb.add before __add */
                    lua_pushvalue(L, -2);
                    /* wb._* internals serve the library's Lua code, whose messages name the
                     * public function (passed in as `what`): "" means no name of their own */
                    if (key[0] == '_') lua_pushliteral(L, "");
                    else lua_pushfstring(L, "%s%s", prefix, key);
                    lua_rawset(L, names);
                }
                lua_pop(L, 1);
            } else if (lua_type(L, -1) == LUA_TTABLE && depth > 0) {
                /* wb.openblas.matmul is "openblas.matmul"; a metatable's method tables keep bare
                 * names; metatables (wb.Tensor) are named from the registry, as types */
                int methods = !strcmp(key, "index") || !strcmp(key, "methods");
                if (raw_field(L, -1, "__name") == LUA_TNIL) {
                    const char *sub = methods ? lua_pushstring(L, prefix) : lua_pushfstring(L, "%s%s.", prefix, key);
                    name_functions(L, -3, sub, depth - 1, pass);
                    lua_pop(L, 1);
                }
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* The registry's table function -> name, created when missing; left on the stack. */
static void push_names(lua_State *L) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &names_key) == LUA_TTABLE) return;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &names_key);
}

void wb_lua_name_function(lua_State *L, lua_CFunction f, const char *name) {
    push_names(L);
    lua_pushcfunction(L, f);
    lua_pushstring(L, name);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

void wb_lua_name_functions(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    push_names(L); /* names given first (wb_lua_name_function) are kept */
    lua_pop(L, 1);
    for (int pass = 0; pass <= 2; pass++) {
        name_functions(L, idx, "", 2, pass);
        /* then the methods of every type's metatable (luaL_newmetatable's registry entries) */
        lua_pushnil(L);
        while (lua_next(L, LUA_REGISTRYINDEX)) {
            if (lua_type(L, -2) == LUA_TSTRING && lua_istable(L, -1)) {
                if (raw_field(L, -1, "__name") == LUA_TSTRING) name_functions(L, -2, "", 1, pass);
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        }
    }
}

const char *wb_lua_fname(lua_State *L) {
    lua_Debug ar;
    const char *name = NULL;
    if (!lua_getstack(L, 0, &ar)) return NULL;
    lua_getinfo(L, "nf", &ar); /* pushes the running function */
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &names_key) == LUA_TTABLE) {
        lua_pushvalue(L, -2);
        if (lua_rawget(L, -2) == LUA_TSTRING) name = lua_tostring(L, -1); /* kept alive by the table */
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    return name ? name : ar.name;
}

int wb_lua_raise(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *msg = lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    const char *name = wb_lua_fname(L);
    size_t n = name ? strlen(name) : 0;
    luaL_where(L, 1); /* the script's file:line, as luaL_error gives */
    const char *where = lua_tostring(L, -1);
    if (n && !(strncmp(msg, name, n) == 0 && msg[n] == ':')) lua_pushfstring(L, "%s%s: %s", where, name, msg);
    else lua_pushfstring(L, "%s%s", where, msg);
    return lua_error(L);
}

int wb_lua_argerror(lua_State *L, int idx, const char *expected) {
    const char *got = luaL_typename(L, idx);
    if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) got = lua_tostring(L, -1);
    else if (lua_type(L, idx) == LUA_TNUMBER) got = lua_pushfstring(L, "the number %s", lua_tostring(L, idx));
    return wb_lua_raise(L, "bad argument #%d: expected %s, got %s", idx, expected, got);
}

lua_Number wb_lua_checknumber(lua_State *L, int idx) {
    if (lua_type(L, idx) != LUA_TNUMBER) wb_lua_argerror(L, idx, "a number");
    return lua_tonumber(L, idx);
}

lua_Integer wb_lua_checkinteger(lua_State *L, int idx) {
    int ok;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok || lua_type(L, idx) != LUA_TNUMBER) wb_lua_argerror(L, idx, "an integer");
    return v;
}

const char *wb_lua_checkstring(lua_State *L, int idx) {
    const char *s = lua_tostring(L, idx); /* a number is converted, as lauxlib does */
    if (!s) wb_lua_argerror(L, idx, "a string");
    return s;
}

const char *wb_lua_optstring(lua_State *L, int idx, const char *dflt) {
    return lua_isnoneornil(L, idx) ? dflt : wb_lua_checkstring(L, idx);
}

lua_Integer wb_lua_optinteger(lua_State *L, int idx, lua_Integer dflt) {
    return lua_isnoneornil(L, idx) ? dflt : wb_lua_checkinteger(L, idx);
}

lua_Number wb_lua_optnumber(lua_State *L, int idx, lua_Number dflt) {
    return lua_isnoneornil(L, idx) ? dflt : wb_lua_checknumber(L, idx);
}

void wb_lua_checktable(lua_State *L, int idx) {
    if (!lua_istable(L, idx)) wb_lua_argerror(L, idx, "a table");
}

void *wb_lua_checkudata(lua_State *L, int idx, const char *type) {
    void *p = luaL_testudata(L, idx, type);
    if (!p) wb_lua_argerror(L, idx, type);
    return p;
}

int wb_lua_unfinalized(lua_State *L, lua_CFunction build) {
    int nargs = lua_gettop(L);
    /* 1 when running; 0 when the script stopped it (left so); -1 inside a finalizer, where no
     * collection step runs anyway */
    int running = lua_gc(L, LUA_GCISRUNNING) == 1;
    lua_pushcfunction(L, build);
    lua_insert(L, 1);
    if (running) lua_gc(L, LUA_GCSTOP);
    int status = lua_pcall(L, nargs, LUA_MULTRET, 0);
    if (running) lua_gc(L, LUA_GCRESTART);
    if (status != LUA_OK) return lua_error(L);
    return lua_gettop(L);
}

int wb_lua_error(lua_State *L) { return wb_lua_raise(L, "%s", wb_error_message()); }

/* The tensor metatable: a registry reference (an integer key: the registry's array part, no
 * hashing) to push it, and its address to recognise it. One interpreter per process. */
static int metatable_ref = LUA_NOREF;
static const void *metatable_ptr;

/* The handle at idx if it is a tensor (released or not), else NULL. Compares metatables by
 * identity: luaL_testudata looks the type name up as a string on every call, which cost more
 * than a small op's arithmetic. */
void wb_lua_set_tensor_metatable(lua_State *L, int idx) {
    metatable_ptr = lua_topointer(L, idx);
    lua_pushvalue(L, idx);
    metatable_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

wb_lua_tensor *wb_lua_testtensor(lua_State *L, int idx) {
    void *p = lua_touserdata(L, idx);
    if (!p || !lua_getmetatable(L, idx)) return NULL;
    int same = lua_topointer(L, -1) == metatable_ptr;
    lua_pop(L, 1);
    return same ? p : NULL;
}

wb_lua_tensor *wb_lua_checkhandle(lua_State *L, int idx) {
    wb_lua_tensor *h = wb_lua_testtensor(L, idx);
    if (!h) wb_lua_argerror(L, idx, "a tensor");
    return h;
}

wb_tensor *wb_lua_checktensor(lua_State *L, int idx) {
    wb_lua_tensor *h = wb_lua_testtensor(L, idx);
    if (!h) wb_lua_argerror(L, idx, "a tensor");
    if (!h->t) wb_lua_raise(L, "attempt to use a released tensor (argument #%d)", idx);
    return h->t;
}

/* Lua sees an 8-byte userdata, not the megabytes of storage behind it, so left alone its
 * collector would let dead tensors pile up. Storage allocations are reported to it as
 * allocation debt (LUA_GCSTEP of that many KiB), the way Lua paces its own allocations.
 * In generational mode a step is a young collection, and a tensor that lives across a few ops
 * (an MLP's intermediates) gets old: only a major collection frees it, and Lua's own trigger for
 * one counts the 8-byte userdata. Until then the storage cache had nothing to hand back and every
 * big intermediate came from fresh pages (an eager 512-token MLP forward: 3074 page faults,
 * gelu and mul 3-10x slower than on warm buffers). So a major collection also runs once the
 * storage allocated since the last one exceeds what was live after it (at least 32 MiB): as
 * Lua's generational rule, in storage bytes. A collection with a small Lua heap costs ~50 us. */
#define MAJOR_MIN ((uint64_t)32 << 20)
static uint64_t gc_reported, gc_major_at, gc_major_every = MAJOR_MIN, gc_boundary_at;

static void collect_major(lua_State *L) {
    lua_gc(L, LUA_GCCOLLECT);
    gc_reported = gc_major_at = wb_storage_bytes_allocated();
    uint64_t live = wb_storage_bytes_live();
    gc_major_every = live > MAJOR_MIN ? live : MAJOR_MIN;
}

static void pace_gc(lua_State *L) {
    uint64_t total = wb_storage_bytes_allocated();
    if (total - gc_major_at >= gc_major_every) {
        collect_major(L);
    } else if (total - gc_reported >= 256 * 1024) {
        uint64_t kib = (total - gc_reported) / 1024;
        gc_reported = total;
        lua_gc(L, LUA_GCSTEP, (int)(kib > 1 << 30 ? 1 << 30 : kib));
    }
}

/* A major collection frees the ~100 dead tensors of a few steps at once and runs their
 * finalizers: ~250 us, landing in whatever op allocated when it fell due, every few steps (a
 * GeGLU range of 1 ms measured 1.00-1.06 ms in most steps and 1.25-1.34 ms in every third or
 * fourth). Between two steps of a recording the next step is not yet timed, so the collection
 * that step would meet is run here, when its allocation (taken as the last step's) would make one
 * due, and whenever BETWEEN_MIN or more was allocated since the last one: a process's first steps
 * otherwise take every buffer from fresh pages until the first collection hands some back to the
 * storage cache (the first recording of that range: 3-12 ms a step, against ~1 ms once warm).
 * Returns the nanoseconds it took (at least 1), 0 when none was due. */
#define BETWEEN_MIN ((uint64_t)4 << 20)
uint64_t wb_lua_collect_between_steps(lua_State *L) {
    uint64_t total = wb_storage_bytes_allocated();
    uint64_t since = total - gc_major_at, last_step = total - gc_boundary_at;
    uint64_t ns = 0;
    if (since >= BETWEEN_MIN || (gc_boundary_at > 0 && since + last_step >= gc_major_every)) {
        int64_t t0 = wb_now_ns();
        collect_major(L);
        ns = (uint64_t)(wb_now_ns() - t0) + 1;
    }
    gc_boundary_at = wb_storage_bytes_allocated();
    return ns;
}

void wb_lua_pushtensor(lua_State *L, wb_tensor *t) {
    pace_gc(L);
    wb_lua_tensor *h = lua_newuserdatauv(L, sizeof *h, 0);
    h->t = t;
    lua_rawgeti(L, LUA_REGISTRYINDEX, metatable_ref);
    lua_setmetatable(L, -2);
}

int wb_lua_pushresult(lua_State *L, wb_status st, wb_tensor **out) {
    if (st) return wb_lua_error(L);
    wb_lua_pushtensor(L, *out);
    return 1;
}

/* A number as an error message shows it: "nan", not printf's "-nan" for a NaN with its sign bit. */
static const char *number_text(lua_State *L, int idx) {
    lua_Number v = lua_tonumber(L, idx);
    return v != v ? "nan" : lua_tostring(L, idx);
}

int64_t wb_lua_checkint(lua_State *L, int idx, const char *fname, const char *what) {
    int ok;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok) {
        if (lua_type(L, idx) == LUA_TNUMBER)
            wb_lua_raise(L, "%s: %s must be an integer, got %s", fname, what, number_text(L, idx));
        wb_lua_raise(L, "%s: %s must be an integer, got %s", fname, what, luaL_typename(L, idx));
    }
    return (int64_t)v;
}

int wb_lua_checkshape(lua_State *L, int idx, int64_t *shape, const char *fname, const char *what) {
    if (lua_type(L, idx) == LUA_TNUMBER) {
        shape[0] = wb_lua_checkint(L, idx, fname, what);
        return 1;
    }
    if (!lua_istable(L, idx))
        wb_lua_raise(L, "%s: %s must be a table of sizes like {2, 3}, got %s", fname, what, luaL_typename(L, idx));
    lua_Integer n = luaL_len(L, idx);
    if (n > WB_MAX_DIMS)
        wb_lua_raise(L, "%s: %s has %d dimensions, at most %d are supported", fname, what, (int)n, WB_MAX_DIMS);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, idx, i);
        int ok;
        lua_Integer v = lua_tointegerx(L, -1, &ok);
        if (!ok)
            wb_lua_raise(L, "%s: %s element %d must be an integer, got %s", fname, what, (int)i,
                       lua_type(L, -1) == LUA_TNUMBER ? number_text(L, -1) : luaL_typename(L, -1));
        shape[i - 1] = (int64_t)v;
        lua_pop(L, 1);
    }
    return (int)n;
}

int wb_lua_todim(lua_State *L, int64_t d, const wb_tensor *t, const char *fname) {
    if (d >= 1 && d <= t->ndim) return (int)d - 1;
    if (d <= -1 && d >= -t->ndim) return (int)(t->ndim + d);
    if (t->ndim == 0)
        wb_lua_raise(L, "%s: dimension %I is out of range: the tensor has 0 dimensions", fname, (lua_Integer)d);
    return wb_lua_raise(L, "%s: dimension %I is out of range for a tensor with %d dimension%s (expected 1..%d or -%d..-1)",
                      fname, (lua_Integer)d, t->ndim, t->ndim == 1 ? "" : "s", t->ndim, t->ndim);
}

int wb_lua_checkdim(lua_State *L, int idx, const wb_tensor *t, const char *fname) {
    if (lua_isnoneornil(L, idx)) wb_lua_raise(L, "%s: missing dimension argument", fname);
    return wb_lua_todim(L, wb_lua_checkint(L, idx, fname, "dimension"), t, fname);
}

void wb_lua_checkkeys(lua_State *L, int idx, const char *fname, const char *const *allowed) {
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        int ok = 0;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (const char *const *a = allowed; *a; a++)
                if (!strcmp(*a, lua_tostring(L, -1))) ok = 1;
        if (!ok) {
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            for (const char *const *a = allowed; *a; a++) {
                if (a != allowed) luaL_addstring(&b, ", ");
                luaL_addstring(&b, *a);
            }
            luaL_pushresult(&b);
            const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2);
            wb_lua_raise(L, "%s: unknown option '%s' (expected one of: %s)", fname, key, lua_tostring(L, -1));
        }
    }
}

void wb_lua_checkopts(lua_State *L, int idx, const char *fname, wb_dtype *dtype, wb_device *device) {
    static const char *const keys[] = {"dtype", "device", NULL};
    *dtype = WB_F32;
    *device = wb_default_device();
    if (lua_isnoneornil(L, idx)) return;
    if (!lua_istable(L, idx))
        wb_lua_raise(L, "%s: options must be a table like {dtype=\"f32\"}, got %s", fname, luaL_typename(L, idx));
    wb_lua_checkkeys(L, idx, fname, keys);
    if (lua_getfield(L, idx, "dtype") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING)
            wb_lua_raise(L, "%s: dtype must be a string, got %s", fname, luaL_typename(L, -1));
        if (wb_dtype_parse(lua_tostring(L, -1), dtype)) wb_lua_raise(L, "%s: %s", fname, wb_error_message());
        if (wb_dtype_check_supported(*dtype, fname)) wb_lua_error(L);
    }
    if (lua_getfield(L, idx, "device") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING)
            wb_lua_raise(L, "%s: device must be a string, got %s", fname, luaL_typename(L, -1));
        if (wb_device_parse(lua_tostring(L, -1), device)) wb_lua_raise(L, "%s: %s", fname, wb_error_message());
        if (wb_device_check_available(*device)) wb_lua_raise(L, "%s: %s", fname, wb_error_message());
    }
    lua_pop(L, 2);
}

/* ---- arithmetic --------------------------------------------------------------------------------- */

/* A number operand becomes a 0-d tensor like the tensor operand, pushed into its slot (owned by
 * Lua: collected even if the op raises). Made before either tensor pointer is taken: pushing it
 * allocates, and the collector may then run a finalizer that releases the other operand. */
static void number_operand(lua_State *L, int idx, wb_dtype dtype, wb_device device) {
    wb_tensor *s;
    WB_LUA_CHECK(L, wb_full(dtype, device, 0, NULL, lua_tonumber(L, idx), &s));
    wb_lua_pushtensor(L, s);
    lua_replace(L, idx);
}

static wb_tensor *operand(lua_State *L, int idx, const char *fname) {
    wb_lua_tensor *h = wb_lua_testtensor(L, idx);
    if (!h) wb_lua_raise(L, "%s: operand %d must be a tensor or a number, got %s", fname, idx, luaL_typename(L, idx));
    if (!h->t) wb_lua_raise(L, "attempt to use a released tensor (operand %d)", idx);
    return h->t;
}

int wb_lua_binary(lua_State *L, wb_lua_binary_fn fn, const char *name) {
    if (lua_gettop(L) != 2) lua_settop(L, 2); /* settop is not free in 5.4; the common call has 2 */
    wb_lua_tensor *h1 = wb_lua_testtensor(L, 1), *h2 = wb_lua_testtensor(L, 2);
    wb_tensor *out;
    if (h1 && h2 && h1->t && h2->t) return wb_lua_pushresult(L, fn(h1->t, h2->t, &out), &out); /* the common case */
    /* numbers take the dtype and device of the tensor operand (wb.add(1, 2) has none: defaults) */
    wb_dtype dtype = WB_F32;
    wb_device device = wb_default_device();
    if (h1 || h2) {
        const wb_tensor *like = h1 ? wb_lua_checktensor(L, 1) : wb_lua_checktensor(L, 2);
        dtype = like->dtype, device = like->device; /* values: the pointer is not kept */
    }
    for (int i = 1; i <= 2; i++)
        if (lua_type(L, i) != LUA_TNUMBER) operand(L, i, name); /* a bad operand raises before anything is made */
    for (int i = 1; i <= 2; i++)
        if (lua_type(L, i) == LUA_TNUMBER) number_operand(L, i, dtype, device);
    wb_tensor *a = operand(L, 1, name), *b = operand(L, 2, name);
    return wb_lua_pushresult(L, fn(a, b, &out), &out);
}

/* One function per op of the list, here beside wb_lua_binary so that it inlines (this is the
 * path of every a + b). */
#define BINARY_FUNCTION(ID, name, ...)                                                                                 \
    int wb_lua_##name(lua_State *L) { return wb_lua_binary(L, wb_##name, #name); }
WB_BINARY_LIST(BINARY_FUNCTION)
#undef BINARY_FUNCTION

static int unary(lua_State *L, wb_status (*fn)(wb_tensor *, wb_tensor **)) {
    wb_tensor *out;
    return wb_lua_pushresult(L, fn(wb_lua_checktensor(L, 1), &out), &out);
}

#define UNARY_FUNCTION(ID, name, ...)                                                                                  \
    int wb_lua_##name(lua_State *L) { return unary(L, wb_##name); }
WB_ARITH_UNARY_LIST(UNARY_FUNCTION)
#undef UNARY_FUNCTION

void wb_lua_setstring(lua_State *L, const char *key, const char *v) {
    lua_pushstring(L, v);
    lua_setfield(L, -2, key);
}

void wb_lua_setnumber(lua_State *L, const char *key, lua_Number v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, key);
}

void wb_lua_setinteger(lua_State *L, const char *key, lua_Integer v) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, key);
}
