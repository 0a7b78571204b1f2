/* l_tensor.c: the Lua tensor type (wb.Tensor): lifetime (__gc, __close, release), fields,
 * indexing (t[i], t[{i, j}]: views), methods and printing (the arithmetic methods and
 * metamethods are l_aux.c's, registered by l_ops.c; the reductions are l_reduce.c's). Each
 * method checks its arguments, calls the core, and pushes the result; dims and indices arrive
 * 1-based (negative from the end). */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "wb_lua.h"

static void push_int_array(lua_State *L, int n, const int64_t *v) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* ---- lifetime -------------------------------------------------------------------------------- */

static int t_release(lua_State *L) {
    wb_lua_tensor *h = wb_lua_checkhandle(L, 1);
    wb_tensor_free(h->t);
    h->t = NULL;
    return 0;
}

/* ---- metadata ---------------------------------------------------------------------------------- */

/* t:size() / t:stride(): the values are copied out before the table is made (an allocation,
 * after which a finalizer may have released t). */
static int sizes_or_strides(lua_State *L, int strides, const char *fname) {
    wb_tensor *t = wb_lua_checktensor(L, 1);
    const int64_t *v = strides ? t->stride : t->shape;
    if (!lua_isnoneornil(L, 2)) {
        lua_pushinteger(L, (lua_Integer)v[wb_lua_checkdim(L, 2, t, fname)]);
        return 1;
    }
    int64_t copy[WB_MAX_DIMS];
    int n = t->ndim;
    memcpy(copy, v, sizeof(int64_t) * (size_t)n);
    push_int_array(L, n, copy);
    return 1;
}

static int t_stride(lua_State *L) { return sizes_or_strides(L, 1, "stride"); }
static int t_size(lua_State *L) { return sizes_or_strides(L, 0, "size"); }

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
    wb_lua_checkhandle(L, 1);
    int64_t dims[WB_MAX_DIMS];
    int perm[WB_MAX_DIMS], n;
    if (lua_istable(L, 2)) { /* read whole first: its __len or __index may release the tensor */
        lua_Integer len = luaL_len(L, 2);
        if (len < 0 || len > WB_MAX_DIMS)
            wb_lua_raise(L, "permute: %I dimensions given, at most %d are supported", len, WB_MAX_DIMS);
        n = (int)len;
        for (int i = 0; i < n; i++) {
            lua_geti(L, 2, i + 1);
            dims[i] = wb_lua_checkint(L, -1, "permute", "dimension");
            lua_pop(L, 1);
        }
    } else {
        n = lua_gettop(L) - 1;
        if (n > WB_MAX_DIMS) wb_lua_raise(L, "permute: %d dimensions given, at most %d are supported", n, WB_MAX_DIMS);
        for (int i = 0; i < n; i++) {
            if (lua_isnoneornil(L, i + 2)) wb_lua_raise(L, "permute: missing dimension argument");
            dims[i] = wb_lua_checkint(L, i + 2, "permute", "dimension");
        }
    }
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    for (int i = 0; i < n; i++)
        perm[i] = wb_lua_todim(L, dims[i], t, "permute");
    return wb_lua_pushresult(L, wb_permute(t, n, perm, &out), &out);
}

/* view/reshape/expand accept a table {2, 3} or sizes as arguments (2, 3). */
static int shape_args(lua_State *L, int64_t *shape, const char *fname) {
    if (lua_gettop(L) == 2) return wb_lua_checkshape(L, 2, shape, fname, "shape");
    int n = lua_gettop(L) - 1;
    if (n < 1) wb_lua_raise(L, "%s: missing shape argument", fname);
    if (n > WB_MAX_DIMS) wb_lua_raise(L, "%s: %d dimensions requested, at most %d are supported", fname, n, WB_MAX_DIMS);
    for (int i = 0; i < n; i++)
        shape[i] = wb_lua_checkint(L, i + 2, fname, "size");
    return n;
}

/* The shape is read before the tensor is fetched: a shape table's __len or __index may release it. */
typedef wb_status (*shape_fn)(wb_tensor *, int, const int64_t *, wb_tensor **);
static int reshaping(lua_State *L, shape_fn fn, const char *fname) {
    wb_lua_checkhandle(L, 1);
    int64_t shape[WB_MAX_DIMS];
    int n = shape_args(L, shape, fname);
    wb_tensor *out;
    return wb_lua_pushresult(L, fn(wb_lua_checktensor(L, 1), n, shape, &out), &out);
}

static int t_view(lua_State *L) { return reshaping(L, wb_view, "view"); }
static int t_reshape(lua_State *L) { return reshaping(L, wb_reshape, "reshape"); }
static int t_expand(lua_State *L) { return reshaping(L, wb_expand, "expand"); }

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
        wb_lua_raise(L, "narrow: start %I is out of range for dimension %d of size %I (expected 1..%I or -%I..-1)",
                   (lua_Integer)start, dim + 1, (lua_Integer)size, (lua_Integer)size + 1, (lua_Integer)size);
    if (len < 0) wb_lua_raise(L, "narrow: length must be >= 0, got %I", (lua_Integer)len);
    if (len > size - s0) /* s0 <= size: no overflow, whatever len is */
        wb_lua_raise(L, "narrow: start %I with length %I runs past the end of dimension %d of size %I",
                   (lua_Integer)start, (lua_Integer)len, dim + 1, (lua_Integer)size);
    return wb_lua_pushresult(L, wb_narrow(t, dim, s0, len, &out), &out);
}

static int t_select(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    int dim = wb_lua_checkdim(L, 2, t, "select");
    int64_t i = wb_lua_checkint(L, 3, "select", "index");
    int64_t size = t->shape[dim];
    int64_t i0 = i < 0 ? size + i : i - 1;
    if (i == 0 || i0 < 0 || i0 >= size)
        wb_lua_raise(L, "select: index %I is out of range for dimension %d of size %I (expected 1..%I or -%I..-1)",
                   (lua_Integer)i, dim + 1, (lua_Integer)size, (lua_Integer)size, (lua_Integer)size);
    return wb_lua_pushresult(L, wb_select(t, dim, i0, &out), &out);
}

static int t_as_strided(lua_State *L) {
    wb_lua_checkhandle(L, 1);
    int64_t shape[WB_MAX_DIMS], stride[WB_MAX_DIMS];
    int n = wb_lua_checkshape(L, 2, shape, "as_strided", "shape");
    int m = wb_lua_checkshape(L, 3, stride, "as_strided", "stride");
    if (n != m) wb_lua_raise(L, "as_strided: shape has %d dimensions but stride has %d", n, m);
    int64_t offset = lua_isnoneornil(L, 4) ? -1 : wb_lua_checkint(L, 4, "as_strided", "offset");
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    if (lua_isnoneornil(L, 4)) offset = t->offset;
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

static const char *option_string(lua_State *L, const char *key) {
    if (lua_type(L, -1) != LUA_TSTRING) wb_lua_raise(L, "to: %s must be a string, got %s", key, luaL_typename(L, -1));
    return lua_tostring(L, -1);
}

static int t_to(lua_State *L) {
    static const char *const keys[] = {"dtype", "device", NULL};
    wb_lua_checkhandle(L, 1);
    wb_lua_checktable(L, 2);
    wb_lua_checkkeys(L, 2, "to", keys);
    /* the options first (their __index may release the tensor); the tensor's own as defaults after */
    wb_dtype dtype = WB_F32;
    wb_device device = WB_DEVICE_CPU;
    int has_dtype = lua_getfield(L, 2, "dtype") != LUA_TNIL, has_device;
    if (has_dtype && wb_dtype_parse(option_string(L, "dtype"), &dtype)) wb_lua_raise(L, "to: %s", wb_error_message());
    has_device = lua_getfield(L, 2, "device") != LUA_TNIL;
    if (has_device && wb_device_parse(option_string(L, "device"), &device)) wb_lua_raise(L, "to: %s", wb_error_message());
    wb_tensor *t = wb_lua_checktensor(L, 1), *out;
    if (!has_dtype) dtype = t->dtype;
    if (!has_device) device = t->device;
    if (wb_device_check_available(device)) wb_lua_raise(L, "to: %s", wb_error_message());
    return wb_lua_pushresult(L, wb_to(t, dtype, device, &out), &out); /* an alias when nothing changes */
}

/* ---- values -------------------------------------------------------------------------------------- */

static int t_item(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1);
    int64_t n = wb_tensor_numel(t);
    if (n != 1) wb_lua_raise(L, "item: the tensor has %I elements, item() needs exactly 1", (lua_Integer)n);
    double v;
    WB_LUA_CHECK(L, wb_to_doubles(t, &v));
    lua_pushnumber(L, v);
    return 1;
}

/* From copies of the values and the shape: each table made may run a finalizer that releases t. */
static void push_nested(lua_State *L, int ndim, const int64_t *shape, const double *v, int dim, int64_t *pos) {
    if (dim == ndim) {
        lua_pushnumber(L, v[(*pos)++]);
        return;
    }
    lua_createtable(L, (int)shape[dim], 0);
    for (int64_t i = 0; i < shape[dim]; i++) {
        push_nested(L, ndim, shape, v, dim + 1, pos);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static int t_tolist(lua_State *L) {
    wb_tensor *t = wb_lua_checktensor(L, 1);
    int64_t n = wb_tensor_numel(t);
    /* an empty tensor still makes one table per index before its first 0 dimension: bounded */
    double tables = 1;
    for (int d = 0; d < t->ndim && t->shape[d]; d++)
        tables *= (double)t->shape[d];
    if (n == 0 && tables > (double)(1 << 24)) {
        char count[64];
        snprintf(count, sizeof count, "%.0f", tables);
        return wb_lua_raise(L, "tolist: the empty tensor would make %s empty tables; refused", count);
    }
    /* a value is 8 bytes in the staging buffer and a 16-byte slot in its table: past the machine's
     * allocation limit, or the address-space limit the process runs under (--max-memory), Lua
     * only says "not enough memory", naming neither tolist nor the size */
    double need = (double)n * (sizeof(double) + 16), limit = (double)wb_alloc_limit();
    const char *whose = "this machine allows";
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && (double)as.rlim_cur < limit)
        limit = (double)as.rlim_cur, whose = "address space limit allows (--max-memory)";
    if (need > limit) {
        char want[32], have[32];
        wb_format_bytes(need, want, sizeof want);
        wb_format_bytes(limit, have, sizeof have);
        return wb_lua_raise(L, "tolist: the tensor has %I elements; as Lua numbers they need about %s, more than the %s "
                               "%s (narrow or select a part first)", (lua_Integer)n, want, have, whose);
    }
    int ndim = t->ndim;
    int64_t shape[WB_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)ndim);
    double *v = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof(double), 0); /* freed by the GC */
    /* fetched again: the allocation may have run a finalizer that released it */
    WB_LUA_CHECK(L, wb_to_doubles(wb_lua_checktensor(L, 1), v));
    int64_t pos = 0;
    luaL_checkstack(L, ndim + 4, "tolist");
    push_nested(L, ndim, shape, v, 0, &pos);
    return 1;
}

static int t_fill_(lua_State *L) {
    wb_lua_checkhandle(L, 1);
    double value = wb_lua_checknumber(L, 2);
    WB_LUA_CHECK(L, wb_fill_(wb_lua_checktensor(L, 1), value));
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

/* From copies of the values and the shape: the buffer grows by allocating (finalizers may run). */
static void add_values(luaL_Buffer *b, int ndim, const int64_t *shape, const double *v, int dim, int64_t *pos,
                       number_format f, int indent) {
    char buf[64];
    if (dim == ndim) {
        int w = snprintf(buf, sizeof buf, f.fmt, v[*pos]);
        for (int pad = w; pad < f.width; pad++)
            luaL_addchar(b, ' ');
        luaL_addstring(b, buf);
        (*pos)++;
        return;
    }
    luaL_addchar(b, '{');
    for (int64_t i = 0; i < shape[dim]; i++) {
        if (i > 0) {
            luaL_addchar(b, ',');
            if (dim == ndim - 1)
                luaL_addchar(b, ' ');
            else {
                for (int k = dim; k < ndim - 1; k++)
                    luaL_addchar(b, '\n');
                for (int k = 0; k < indent + dim + 1; k++)
                    luaL_addchar(b, ' ');
            }
        }
        add_values(b, ndim, shape, v, dim + 1, pos, f, indent);
    }
    luaL_addchar(b, '}');
}

static int t_tostring(lua_State *L) {
    wb_lua_tensor *h = wb_lua_checkhandle(L, 1);
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
    if (n == 0) { /* no values, however large the other dimensions: no loop over them */
        lua_pushfstring(L, "tensor({}, shape=%s, dtype=%s, device=%s)", shape, wb_dtype_name(t->dtype),
                        wb_device_name(t->device));
        return 1;
    }
    /* statistics read every element: past 2^26 (an expanded view can be far larger than its
     * memory) the summary skips them */
    double *v = n <= ((int64_t)1 << 26) ? malloc((size_t)n * sizeof(double)) : NULL;
    if (n <= PRINT_MAX_ELEMENTS) {
        if (!v || wb_to_doubles(t, v)) {
            free(v);
            return wb_lua_raise(L, "tostring: cannot read the tensor's values");
        }
        int ndim = t->ndim;
        int64_t dims[WB_MAX_DIMS];
        memcpy(dims, t->shape, sizeof(int64_t) * (size_t)ndim);
        const char *dtype = wb_dtype_name(t->dtype), *device = wb_device_name(t->device); /* static names */
        luaL_addstring(&b, "tensor(");
        int64_t pos = 0;
        add_values(&b, ndim, dims, v, 0, &pos, choose_format(v, n), 7);
        luaL_addstring(&b, ", shape=");
        luaL_addstring(&b, shape);
        luaL_addstring(&b, ", dtype=");
        luaL_addstring(&b, dtype);
        luaL_addstring(&b, ", device=");
        luaL_addstring(&b, device);
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
    if (n > ((int64_t)1 << 26))
        snprintf(stats, sizeof stats, "no statistics past 2^26 elements");
    else
        snprintf(stats, sizeof stats, "min=%.4g, max=%.4g, mean=%.4g%s", lo, hi,
                 n > nan ? sum / (double)(n - nan) : NAN, nan ? ", has NaN" : "");
    lua_pushfstring(L, "tensor(shape=%s, stride=%s, dtype=%s, device=%s, %I elements, %s%s)", shape,
                    wb_shape_format(t->ndim, t->stride, stride, sizeof stride), wb_dtype_name(t->dtype),
                    wb_device_name(t->device), (lua_Integer)n, stats, wb_tensor_is_contiguous(t) ? "" : ", non-contiguous");
    return 1;
}

/* ---- fields and indexing --------------------------------------------------------------------------- */

/* t[i] (an integer) or t[{i, j, ...}]: a view, as t:select(1, i) then select(1, j) on that: each
 * index removes the first dimension left; 1-based, negative from the end. Every index is
 * checked (against the shape, named in the message) before any view is made. */
static int index_view(lua_State *L) {
    int64_t idx[WB_MAX_DIMS];
    int n = 1;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        idx[0] = wb_lua_checkint(L, 2, "index", "an index");
    } else { /* read whole first: the table's __len or __index may release the tensor */
        lua_Integer len = luaL_len(L, 2);
        if (len < 1 || len > WB_MAX_DIMS)
            return wb_lua_raise(L, "index: t[{...}] takes 1 to %d indices, got %I", WB_MAX_DIMS, len);
        n = (int)len;
        for (int k = 0; k < n; k++) {
            lua_geti(L, 2, k + 1);
            idx[k] = wb_lua_checkint(L, -1, "index", "an index");
            lua_pop(L, 1);
        }
    }
    wb_tensor *t = wb_lua_checktensor(L, 1);
    char shape[256];
    wb_shape_format(t->ndim, t->shape, shape, sizeof shape);
    if (n > t->ndim)
        return wb_lua_raise(L, "index: %d ind%s for a tensor of shape %s (%d dimension%s)%s", n, n == 1 ? "ex" : "ices",
                            shape, t->ndim, t->ndim == 1 ? "" : "s", t->ndim == 0 ? "; t:item() reads its value" : "");
    for (int k = 0; k < n; k++) {
        int64_t size = t->shape[k], i = idx[k];
        int64_t i0 = i < 0 ? size + i : i - 1;
        if (i == 0 || i0 < 0 || i0 >= size)
            return wb_lua_raise(L,
                                "index: index %I is out of range for dimension %d of size %I in a tensor of shape "
                                "%s (expected 1..%I or -%I..-1)",
                                (lua_Integer)i, k + 1, (lua_Integer)size, shape, (lua_Integer)size, (lua_Integer)size);
        idx[k] = i0;
    }
    wb_tensor *view = t, *next;
    for (int k = 0; k < n; k++) {
        wb_status st = wb_select(view, 0, idx[k], &next);
        if (view != t) wb_tensor_free(view);
        if (st) return wb_lua_error(L);
        view = next;
    }
    wb_lua_pushtensor(L, view);
    return 1;
}

static int t_index(lua_State *L) {
    if (lua_type(L, 2) == LUA_TNUMBER || lua_type(L, 2) == LUA_TTABLE) return index_view(L);
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *k = lua_tostring(L, 2);
        lua_pushvalue(L, 2);
        if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1; /* a method */
        lua_pop(L, 1);
        wb_tensor *t = wb_lua_checktensor(L, 1);
        if (!strcmp(k, "shape")) { /* copied first: making the table may run a finalizer that releases t */
            int64_t shape[WB_MAX_DIMS];
            int n = t->ndim;
            memcpy(shape, t->shape, sizeof(int64_t) * (size_t)n);
            push_int_array(L, n, shape);
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
    return wb_lua_raise(L, "tensor has no field or method '%s'",
                      lua_tostring(L, 2) ? lua_tostring(L, 2) : luaL_typename(L, 2));
}

static int t_newindex(lua_State *L) {
    if (lua_type(L, 2) == LUA_TNUMBER || lua_type(L, 2) == LUA_TTABLE)
        return wb_lua_raise(L, "tensor elements are not assigned through t[i] = v: t[i]:fill_(v) or "
                               "t[i]:copy_(src) writes into the view");
    return wb_lua_raise(L, "tensor fields are read-only (tried to set '%s')",
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
    /* and the ops of the op lists (add, ..., neg, silu, ...): wb_lua_register_ops adds them */
    {NULL, NULL},
};

/* the arithmetic ones (__add, ..., __unm) come with their ops from wb_lua_register_ops */
static const luaL_Reg metamethods[] = {
    {"__gc", t_release}, {"__close", t_release}, {"__tostring", t_tostring}, {"__newindex", t_newindex}, {NULL, NULL},
};

int wb_lua_open_tensor(lua_State *L) {
    luaL_newmetatable(L, WB_TENSOR_TYPE); /* sets __name = "wb.Tensor" */
    wb_lua_set_tensor_metatable(L, -1);
    luaL_setfuncs(L, metamethods, 0);
    luaL_newlib(L, methods);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__methods"); /* for completion and help */
    static const char *const fields[] = {"shape", "dtype", "device"}; /* what t_index answers */
    lua_createtable(L, 3, 0);
    for (int i = 0; i < 3; i++) {
        lua_pushstring(L, fields[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -3, "__fields"); /* for completion */
    lua_pushcclosure(L, t_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    return 0;
}
