/* l_tensor.c: the Lua tensor type (wb.Tensor): lifetime (__gc, __close, release), fields,
 * methods, arithmetic metamethods and printing. Each method checks its arguments, calls the
 * core, and pushes the result; dims and indices arrive 1-based (negative from the end). */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wb_lua.h"

/* ---- shared helpers ------------------------------------------------------------------------ */

int wb_lua_error(lua_State *L) { return luaL_error(L, "%s", wb_error_message()); }

/* The tensor metatable: a registry reference (an integer key: the registry's array part, no
 * hashing) to push it, and its address to recognise it. One interpreter per process. */
static int metatable_ref = LUA_NOREF;
static const void *metatable_ptr;

/* The handle at idx if it is a tensor (released or not), else NULL. Compares metatables by
 * identity: luaL_testudata looks the type name up as a string on every call, which cost more
 * than a small op's arithmetic. */
wb_lua_tensor *wb_lua_testtensor(lua_State *L, int idx) {
    void *p = lua_touserdata(L, idx);
    if (!p || !lua_getmetatable(L, idx)) return NULL;
    int same = lua_topointer(L, -1) == metatable_ptr;
    lua_pop(L, 1);
    return same ? p : NULL;
}

static wb_lua_tensor *check_handle(lua_State *L, int idx) {
    wb_lua_tensor *h = wb_lua_testtensor(L, idx);
    if (!h) luaL_typeerror(L, idx, WB_TENSOR_TYPE);
    return h;
}

wb_tensor *wb_lua_checktensor(lua_State *L, int idx) {
    wb_lua_tensor *h = wb_lua_testtensor(L, idx);
    if (!h) {
        const char *got = luaL_typename(L, idx);
        if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) got = lua_tostring(L, -1);
        luaL_error(L, "bad argument #%d: expected a tensor, got %s", idx, got);
    }
    if (!h->t) luaL_error(L, "attempt to use a released tensor");
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
static void pace_gc(lua_State *L) {
    static uint64_t reported, major_at, major_every = MAJOR_MIN;
    uint64_t total = wb_storage_bytes_allocated();
    if (total - major_at >= major_every) {
        lua_gc(L, LUA_GCCOLLECT);
        reported = major_at = wb_storage_bytes_allocated();
        uint64_t live = wb_storage_bytes_live();
        major_every = live > MAJOR_MIN ? live : MAJOR_MIN;
    } else if (total - reported >= 256 * 1024) {
        uint64_t kib = (total - reported) / 1024;
        reported = total;
        lua_gc(L, LUA_GCSTEP, (int)(kib > 1 << 30 ? 1 << 30 : kib));
    }
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

wb_tensor *wb_lua_checkoperand(lua_State *L, int idx, const wb_tensor *like, const char *fname) {
    if (lua_type(L, idx) == LUA_TNUMBER) {
        wb_tensor *s;
        WB_LUA_CHECK(L, wb_full(like ? like->dtype : WB_F32, like ? like->device : wb_default_device(), 0, NULL,
                                lua_tonumber(L, idx), &s));
        wb_lua_pushtensor(L, s); /* owned by Lua: collected even if the op raises */
        return s;
    }
    wb_lua_tensor *h = wb_lua_testtensor(L, idx);
    if (!h) luaL_error(L, "%s: operand %d must be a tensor or a number, got %s", fname, idx, luaL_typename(L, idx));
    if (!h->t) luaL_error(L, "attempt to use a released tensor");
    return h->t;
}

int64_t wb_lua_checkint(lua_State *L, int idx, const char *fname, const char *what) {
    int ok;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok) {
        if (lua_type(L, idx) == LUA_TNUMBER)
            luaL_error(L, "%s: %s must be an integer, got %s", fname, what, lua_tostring(L, idx));
        luaL_error(L, "%s: %s must be an integer, got %s", fname, what, luaL_typename(L, idx));
    }
    return (int64_t)v;
}

int wb_lua_checkshape(lua_State *L, int idx, int64_t *shape, const char *fname, const char *what) {
    if (lua_type(L, idx) == LUA_TNUMBER) {
        shape[0] = wb_lua_checkint(L, idx, fname, what);
        return 1;
    }
    if (!lua_istable(L, idx))
        luaL_error(L, "%s: %s must be a table of sizes like {2, 3}, got %s", fname, what, luaL_typename(L, idx));
    lua_Integer n = luaL_len(L, idx);
    if (n > WB_MAX_DIMS)
        luaL_error(L, "%s: %s has %d dimensions, at most %d are supported", fname, what, (int)n, WB_MAX_DIMS);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, idx, i);
        int ok;
        lua_Integer v = lua_tointegerx(L, -1, &ok);
        if (!ok)
            luaL_error(L, "%s: %s element %d must be an integer, got %s", fname, what, (int)i,
                       lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
        shape[i - 1] = (int64_t)v;
        lua_pop(L, 1);
    }
    return (int)n;
}

int wb_lua_checkdim(lua_State *L, int idx, const wb_tensor *t, const char *fname) {
    if (lua_isnoneornil(L, idx)) luaL_error(L, "%s: missing dimension argument", fname);
    int64_t d = wb_lua_checkint(L, idx, fname, "dimension");
    if (d >= 1 && d <= t->ndim) return (int)d - 1;
    if (d <= -1 && d >= -t->ndim) return (int)(t->ndim + d);
    if (t->ndim == 0) luaL_error(L, "%s: dimension %d is out of range: the tensor has 0 dimensions", fname, (int)d);
    return luaL_error(L, "%s: dimension %d is out of range for a tensor with %d dimensions (expected 1..%d or -%d..-1)",
                      fname, (int)d, t->ndim, t->ndim, t->ndim);
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
            luaL_error(L, "%s: unknown option '%s' (expected one of: %s)", fname, key, lua_tostring(L, -1));
        }
    }
}

void wb_lua_checkopts(lua_State *L, int idx, const char *fname, wb_dtype *dtype, wb_device *device) {
    static const char *const keys[] = {"dtype", "device", NULL};
    *dtype = WB_F32;
    *device = wb_default_device();
    if (lua_isnoneornil(L, idx)) return;
    if (!lua_istable(L, idx))
        luaL_error(L, "%s: options must be a table like {dtype=\"f32\"}, got %s", fname, luaL_typename(L, idx));
    wb_lua_checkkeys(L, idx, fname, keys);
    if (lua_getfield(L, idx, "dtype") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "%s: dtype must be a string, got %s", fname, luaL_typename(L, -1));
        if (wb_dtype_parse(lua_tostring(L, -1), dtype)) luaL_error(L, "%s: %s", fname, wb_error_message());
        if (wb_dtype_check_supported(*dtype, fname)) wb_lua_error(L);
    }
    if (lua_getfield(L, idx, "device") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "%s: device must be a string, got %s", fname, luaL_typename(L, -1));
        if (wb_device_parse(lua_tostring(L, -1), device)) luaL_error(L, "%s: %s", fname, wb_error_message());
        if (wb_device_check_available(*device)) luaL_error(L, "%s: %s", fname, wb_error_message());
    }
    lua_pop(L, 2);
}

static void push_int_array(lua_State *L, int n, const int64_t *v) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* ---- lifetime -------------------------------------------------------------------------------- */

static int t_release(lua_State *L) {
    wb_lua_tensor *h = check_handle(L, 1);
    wb_tensor_free(h->t);
    h->t = NULL;
    return 0;
}

/* ---- metadata ---------------------------------------------------------------------------------- */

static int t_stride(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1);
    if (!lua_isnoneornil(L, 2)) {
        lua_pushinteger(L, (lua_Integer)t->stride[wb_lua_checkdim(L, 2, t, "stride")]);
        return 1;
    }
    push_int_array(L, t->ndim, t->stride);
    return 1;
}

static int t_size(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1);
    if (!lua_isnoneornil(L, 2)) {
        lua_pushinteger(L, (lua_Integer)t->shape[wb_lua_checkdim(L, 2, t, "size")]);
        return 1;
    }
    push_int_array(L, t->ndim, t->shape);
    return 1;
}

static int t_dim(lua_State *L) {
    lua_pushinteger(L, wb_lua_checktensor(L, 1)->ndim);
    return 1;
}

static int t_numel(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)wb_tensor_numel(wb_lua_checktensor(L, 1)));
    return 1;
}

static int t_storage_offset(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)wb_lua_checktensor(L, 1)->offset);
    return 1;
}

static int t_data_ptr(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)(intptr_t)wb_tensor_data(wb_lua_checktensor(L, 1)));
    return 1;
}

static int t_is_contiguous(lua_State *L) {
    lua_pushboolean(L, wb_tensor_is_contiguous(wb_lua_checktensor(L, 1)));
    return 1;
}

/* ---- views ------------------------------------------------------------------------------------ */

static int t_t(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_t(wb_lua_checktensor(L, 1), &out), &out);
}

static int t_transpose(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int d1 = wb_lua_checkdim(L, 2, t, "transpose"), d2 = wb_lua_checkdim(L, 3, t, "transpose");
    return wb_lua_pushresult(L, wb_transpose(t, d1, d2, &out), &out);
}

static int t_permute(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int perm[WB_MAX_DIMS], n;
    if (lua_istable(L, 2)) {
        n = (int)luaL_len(L, 2);
        if (n > WB_MAX_DIMS) luaL_error(L, "permute: %d dimensions given, the tensor has %d", n, t->ndim);
        for (int i = 0; i < n; i++) {
            lua_geti(L, 2, i + 1);
            perm[i] = wb_lua_checkdim(L, -1, t, "permute");
            lua_pop(L, 1);
        }
    } else {
        n = lua_gettop(L) - 1;
        if (n > WB_MAX_DIMS) luaL_error(L, "permute: %d dimensions given, the tensor has %d", n, t->ndim);
        for (int i = 0; i < n; i++)
            perm[i] = wb_lua_checkdim(L, i + 2, t, "permute");
    }
    return wb_lua_pushresult(L, wb_permute(t, n, perm, &out), &out);
}

/* view/reshape/expand accept a table {2, 3} or sizes as arguments (2, 3). */
static int shape_args(lua_State *L, int64_t *shape, const char *fname) {
    if (lua_gettop(L) == 2) return wb_lua_checkshape(L, 2, shape, fname, "shape");
    int n = lua_gettop(L) - 1;
    if (n < 1) luaL_error(L, "%s: missing shape argument", fname);
    if (n > WB_MAX_DIMS) luaL_error(L, "%s: %d dimensions requested, at most %d are supported", fname, n, WB_MAX_DIMS);
    for (int i = 0; i < n; i++)
        shape[i] = wb_lua_checkint(L, i + 2, fname, "size");
    return n;
}

static int t_view(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int64_t shape[WB_MAX_DIMS];
    int n = shape_args(L, shape, "view");
    return wb_lua_pushresult(L, wb_view(t, n, shape, &out), &out);
}

static int t_reshape(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int64_t shape[WB_MAX_DIMS];
    int n = shape_args(L, shape, "reshape");
    return wb_lua_pushresult(L, wb_reshape(t, n, shape, &out), &out);
}

static int t_expand(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int64_t shape[WB_MAX_DIMS];
    int n = shape_args(L, shape, "expand");
    return wb_lua_pushresult(L, wb_expand(t, n, shape, &out), &out);
}

static int t_flatten(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int s = 0, e = t->ndim - 1;
    if (!lua_isnoneornil(L, 2)) s = wb_lua_checkdim(L, 2, t, "flatten");
    if (!lua_isnoneornil(L, 3)) e = wb_lua_checkdim(L, 3, t, "flatten");
    return wb_lua_pushresult(L, wb_flatten(t, s, e, &out), &out);
}

static int t_narrow(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int dim = wb_lua_checkdim(L, 2, t, "narrow");
    int64_t start = wb_lua_checkint(L, 3, "narrow", "start");
    int64_t len = wb_lua_checkint(L, 4, "narrow", "length");
    int64_t size = t->shape[dim];
    int64_t s0 = start < 0 ? size + start : start - 1; /* 0-based */
    if (start == 0 || s0 < 0 || s0 > size)
        luaL_error(L, "narrow: start %d is out of range for dimension %d of size %d (expected 1..%d or -%d..-1)",
                   (int)start, dim + 1, (int)size, (int)size + 1, (int)size);
    if (len < 0) luaL_error(L, "narrow: length must be >= 0, got %d", (int)len);
    if (s0 + len > size)
        luaL_error(L, "narrow: start %d with length %d runs past the end of dimension %d of size %d", (int)start,
                   (int)len, dim + 1, (int)size);
    return wb_lua_pushresult(L, wb_narrow(t, dim, s0, len, &out), &out);
}

static int t_select(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int dim = wb_lua_checkdim(L, 2, t, "select");
    int64_t i = wb_lua_checkint(L, 3, "select", "index");
    int64_t size = t->shape[dim];
    int64_t i0 = i < 0 ? size + i : i - 1;
    if (i == 0 || i0 < 0 || i0 >= size)
        luaL_error(L, "select: index %d is out of range for dimension %d of size %d (expected 1..%d or -%d..-1)",
                   (int)i, dim + 1, (int)size, (int)size, (int)size);
    return wb_lua_pushresult(L, wb_select(t, dim, i0, &out), &out);
}

static int t_as_strided(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int64_t shape[WB_MAX_DIMS], stride[WB_MAX_DIMS];
    int n = wb_lua_checkshape(L, 2, shape, "as_strided", "shape");
    int m = wb_lua_checkshape(L, 3, stride, "as_strided", "stride");
    if (n != m) luaL_error(L, "as_strided: shape has %d dimensions but stride has %d", n, m);
    int64_t offset = lua_isnoneornil(L, 4) ? t->offset : wb_lua_checkint(L, 4, "as_strided", "offset");
    return wb_lua_pushresult(L, wb_as_strided(t, n, shape, stride, offset, &out), &out);
}

static int t_contiguous(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_contiguous(wb_lua_checktensor(L, 1), &out), &out);
}

static int t_clone(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_clone(wb_lua_checktensor(L, 1), &out), &out);
}

static int t_to(lua_State *L) {
    static const char *const keys[] = {"dtype", "device", NULL};
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    luaL_checktype(L, 2, LUA_TTABLE);
    wb_lua_checkkeys(L, 2, "to", keys);
    wb_dtype dtype = t->dtype;
    wb_device device = t->device;
    if (lua_getfield(L, 2, "dtype") != LUA_TNIL && wb_dtype_parse(luaL_checkstring(L, -1), &dtype))
        luaL_error(L, "to: %s", wb_error_message());
    if (lua_getfield(L, 2, "device") != LUA_TNIL && wb_device_parse(luaL_checkstring(L, -1), &device))
        luaL_error(L, "to: %s", wb_error_message());
    if (wb_device_check_available(device)) luaL_error(L, "to: %s", wb_error_message());
    return wb_lua_pushresult(L, wb_to(t, dtype, device, &out), &out); /* an alias when nothing changes */
}

/* ---- values -------------------------------------------------------------------------------------- */

static int t_item(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1);
    int64_t n = wb_tensor_numel(t);
    if (n != 1) luaL_error(L, "item: the tensor has %d elements, item() needs exactly 1", (int)n);
    double v;
    WB_LUA_CHECK(L, wb_to_doubles(t, &v));
    lua_pushnumber(L, v);
    return 1;
}

static void push_nested(lua_State *L, const wb_tensor *t, const double *v, int dim, int64_t *pos) {
    if (dim == t->ndim) {
        lua_pushnumber(L, v[(*pos)++]);
        return;
    }
    lua_createtable(L, (int)t->shape[dim], 0);
    for (int64_t i = 0; i < t->shape[dim]; i++) {
        push_nested(L, t, v, dim + 1, pos);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static int t_tolist(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1);
    int64_t n = wb_tensor_numel(t);
    double *v = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof(double), 0); /* freed by the GC */
    WB_LUA_CHECK(L, wb_to_doubles(t, v));
    int64_t pos = 0;
    luaL_checkstack(L, t->ndim + 4, "tolist");
    push_nested(L, t, v, 0, &pos);
    return 1;
}

static int t_fill_(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1);
    WB_LUA_CHECK(L, wb_fill_(t, luaL_checknumber(L, 2)));
    lua_settop(L, 1);
    return 1;
}

static int t_copy_(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1);
    wb_tensor *src = wb_lua_checktensor(L, 2);
    WB_LUA_CHECK(L, wb_copy_(t, src));
    lua_settop(L, 1);
    return 1;
}

/* ---- printing ------------------------------------------------------------------------------------ */

#define PRINT_MAX_ELEMENTS 256

typedef struct number_format {
    const char *fmt;
    int width;
} number_format;

static number_format choose_format(const double *v, int64_t n) {
    int integral = 1;
    double maxabs = 0, minabs = DBL_MAX;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        double a = fabs(v[i]);
        if (a != floor(a)) integral = 0;
        if (a > maxabs) maxabs = a;
        if (a > 0 && a < minabs) minabs = a;
    }
    number_format f;
    if (integral && maxabs < 1e9)
        f.fmt = "%.0f";
    else if (maxabs >= 1e5 || (minabs < 1e-4 && minabs != DBL_MAX))
        f.fmt = "%.4e";
    else
        f.fmt = "%.4f";
    f.width = 0;
    for (int64_t i = 0; i < n; i++) {
        char buf[64];
        int w = snprintf(buf, sizeof buf, f.fmt, v[i]);
        if (w > f.width) f.width = w;
    }
    return f;
}

static void add_values(luaL_Buffer *b, const wb_tensor *t, const double *v, int dim, int64_t *pos, number_format f,
                       int indent) {
    char buf[64];
    if (dim == t->ndim) {
        int w = snprintf(buf, sizeof buf, f.fmt, v[*pos]);
        for (int pad = w; pad < f.width; pad++)
            luaL_addchar(b, ' ');
        luaL_addstring(b, buf);
        (*pos)++;
        return;
    }
    luaL_addchar(b, '{');
    for (int64_t i = 0; i < t->shape[dim]; i++) {
        if (i > 0) {
            luaL_addchar(b, ',');
            if (dim == t->ndim - 1)
                luaL_addchar(b, ' ');
            else {
                for (int k = dim; k < t->ndim - 1; k++)
                    luaL_addchar(b, '\n');
                for (int k = 0; k < indent + dim + 1; k++)
                    luaL_addchar(b, ' ');
            }
        }
        add_values(b, t, v, dim + 1, pos, f, indent);
    }
    luaL_addchar(b, '}');
}

static int t_tostring(lua_State *L) {
    wb_lua_tensor *h = check_handle(L, 1);
    if (!h->t) {
        lua_pushstring(L, "tensor(released)");
        return 1;
    }
    wb_tensor *t = h->t;
    char shape[256], stride[256];
    wb_shape_format(t->ndim, t->shape, shape, sizeof shape);
    int64_t n = wb_tensor_numel(t);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    double *v = malloc((size_t)(n ? n : 1) * sizeof(double));
    if (n <= PRINT_MAX_ELEMENTS) {
        if (!v || wb_to_doubles(t, v)) {
            free(v);
            return luaL_error(L, "tostring: cannot read the tensor's values");
        }
        luaL_addstring(&b, "tensor(");
        int64_t pos = 0;
        add_values(&b, t, v, 0, &pos, choose_format(v, n), 7);
        luaL_addstring(&b, ", shape=");
        luaL_addstring(&b, shape);
        luaL_addstring(&b, ", dtype=");
        luaL_addstring(&b, wb_dtype_name(t->dtype));
        luaL_addstring(&b, ", device=");
        luaL_addstring(&b, wb_device_name(t->device));
        luaL_addstring(&b, ")");
        free(v);
        luaL_pushresult(&b);
        return 1;
    }
    /* Large: a summary with statistics instead of values. */
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    int64_t nan = 0;
    if (v && !wb_to_doubles(t, v)) {
        for (int64_t i = 0; i < n; i++) {
            if (isnan(v[i])) {
                nan++;
                continue;
            }
            if (v[i] < lo) lo = v[i];
            if (v[i] > hi) hi = v[i];
            sum += v[i];
        }
    }
    free(v);
    char stats[256];
    snprintf(stats, sizeof stats, "min=%.4g, max=%.4g, mean=%.4g%s", lo, hi, n > nan ? sum / (double)(n - nan) : NAN,
             nan ? ", has NaN" : "");
    lua_pushfstring(L, "tensor(shape=%s, stride=%s, dtype=%s, device=%s, %d elements, %s%s)", shape,
                    wb_shape_format(t->ndim, t->stride, stride, sizeof stride), wb_dtype_name(t->dtype),
                    wb_device_name(t->device), (int)n, stats, wb_tensor_is_contiguous(t) ? "" : ", non-contiguous");
    return 1;
}

/* ---- arithmetic --------------------------------------------------------------------------------- */

int wb_lua_binary(lua_State *L, wb_lua_binary_fn fn, const char *name) {
    if (lua_gettop(L) != 2) lua_settop(L, 2); /* settop is not free in 5.4; the common call has 2 */
    wb_lua_tensor *h1 = wb_lua_testtensor(L, 1), *h2 = wb_lua_testtensor(L, 2);
    wb_tensor *out;
    if (h1 && h2 && h1->t && h2->t) return wb_lua_pushresult(L, fn(h1->t, h2->t, &out), &out); /* the common case */
    /* numbers take the dtype and device of the tensor operand (wb.add(1, 2) has none: defaults) */
    wb_tensor *like = h1 ? wb_lua_checktensor(L, 1) : h2 ? wb_lua_checktensor(L, 2) : NULL;
    wb_tensor *a = wb_lua_checkoperand(L, 1, like, name), *b = wb_lua_checkoperand(L, 2, like, name);
    return wb_lua_pushresult(L, fn(a, b, &out), &out);
}

static int t_add(lua_State *L) { return wb_lua_binary(L, wb_add, "add"); }
static int t_sub(lua_State *L) { return wb_lua_binary(L, wb_sub, "sub"); }
static int t_mul(lua_State *L) { return wb_lua_binary(L, wb_mul, "mul"); }
static int t_div(lua_State *L) { return wb_lua_binary(L, wb_div, "div"); }

static int t_unm(lua_State *L) {
    wb_tensor *out;
    return wb_lua_pushresult(L, wb_neg(wb_lua_checktensor(L, 1), &out), &out);
}

/* ---- fields ------------------------------------------------------------------------------------- */

static int t_index(lua_State *L) {
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *k = lua_tostring(L, 2);
        lua_pushvalue(L, 2);
        if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1; /* a method */
        lua_pop(L, 1);
        wb_tensor *t = wb_lua_checktensor(L, 1);
        if (!strcmp(k, "shape")) {
            push_int_array(L, t->ndim, t->shape);
            return 1;
        }
        if (!strcmp(k, "dtype")) {
            lua_pushstring(L, wb_dtype_name(t->dtype));
            return 1;
        }
        if (!strcmp(k, "device")) {
            lua_pushstring(L, wb_device_name(t->device));
            return 1;
        }
    }
    return luaL_error(L, "tensor has no field or method '%s'",
                      lua_tostring(L, 2) ? lua_tostring(L, 2) : luaL_typename(L, 2));
}

static int t_newindex(lua_State *L) {
    return luaL_error(L, "tensor fields are read-only (tried to set '%s')",
                      lua_tostring(L, 2) ? lua_tostring(L, 2) : luaL_typename(L, 2));
}

static const luaL_Reg methods[] = {
    {"stride", t_stride},
    {"size", t_size},
    {"dim", t_dim},
    {"numel", t_numel},
    {"storage_offset", t_storage_offset},
    {"data_ptr", t_data_ptr},
    {"is_contiguous", t_is_contiguous},
    {"t", t_t},
    {"transpose", t_transpose},
    {"permute", t_permute},
    {"view", t_view},
    {"reshape", t_reshape},
    {"flatten", t_flatten},
    {"narrow", t_narrow},
    {"select", t_select},
    {"as_strided", t_as_strided},
    {"expand", t_expand},
    {"contiguous", t_contiguous},
    {"clone", t_clone},
    {"to", t_to},
    {"item", t_item},
    {"tolist", t_tolist},
    {"fill_", t_fill_},
    {"copy_", t_copy_},
    {"release", t_release},
    {"add", t_add},
    {"sub", t_sub},
    {"mul", t_mul},
    {"div", t_div},
    {"neg", t_unm},
    {NULL, NULL},
};

static const luaL_Reg metamethods[] = {
    {"__gc", t_release},        {"__close", t_release}, {"__tostring", t_tostring}, {"__add", t_add},
    {"__sub", t_sub},           {"__mul", t_mul},       {"__div", t_div},           {"__unm", t_unm},
    {"__newindex", t_newindex}, {NULL, NULL},
};

int wb_lua_open_tensor(lua_State *L) {
    luaL_newmetatable(L, WB_TENSOR_TYPE); /* sets __name = "wb.Tensor" */
    metatable_ptr = lua_topointer(L, -1);
    lua_pushvalue(L, -1);
    metatable_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    luaL_setfuncs(L, metamethods, 0);
    luaL_newlib(L, methods);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__methods"); /* for completion and help */
    lua_pushcclosure(L, t_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    return 0;
}
