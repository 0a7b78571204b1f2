/* l_profiler_events.c: wb._profiler_from_events(events): a list of event tables (the shape
 * p:events() returns) appended to a new stopped session through the trace reader's own path
 * (core/observe/trace_record.c), so that synthetic events reach the C analysis (findings, the
 * diff model, stacks) as a trace's would. A field of the wrong type is an error naming the event
 * and the field, never a guess. */
#include <stdio.h>
#include <string.h>

#include <wb/trace_record.h>
#include <wb/trace_schema.h>
#include "wb_lua.h"

wb_prof **wb_lua_new_session(lua_State *L); /* l_profiler.c: a handle on the stack, its session NULL */

static int event_error(lua_State *L, lua_Integer i, const char *what) {
    return luaL_error(L, "from_events: event %d: %s", (int)i, what);
}

/* t[key] as a string into buf (absent: ""); an error naming the field past its size */
static void str_field(lua_State *L, int t, lua_Integer i, const char *key, char *buf, size_t size) {
    buf[0] = '\0';
    if (lua_getfield(L, t, key) != LUA_TNIL) {
        size_t n;
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
        char why[96];
        if (!s) snprintf(why, sizeof why, "%s must be a string, got %s", key, luaL_typename(L, -1));
        else if (n >= size) snprintf(why, sizeof why, "%s is %zu bytes, over %zu", key, n, size - 1);
        if (!s || n >= size) event_error(L, i, why);
        memcpy(buf, s, n + 1);
    }
    lua_pop(L, 1);
}

/* t[key] as an integer (absent: dflt): a float with no fraction is taken */
static int64_t int_field(lua_State *L, int t, lua_Integer i, const char *key, int64_t dflt) {
    int64_t v = dflt;
    if (lua_getfield(L, t, key) != LUA_TNIL) {
        int ok;
        v = (int64_t)lua_tointegerx(L, -1, &ok);
        if (!ok || lua_type(L, -1) != LUA_TNUMBER) {
            char why[96];
            snprintf(why, sizeof why, "%s must be an integer, got %s", key,
                     lua_type(L, -1) == LUA_TNUMBER ? "a fraction" : luaL_typename(L, -1));
            event_error(L, i, why);
        }
    }
    lua_pop(L, 1);
    return v;
}

static double num_field(lua_State *L, int t, lua_Integer i, const char *key, int *present) {
    double v = 0;
    int type = lua_getfield(L, t, key);
    if (type != LUA_TNIL && type != LUA_TNUMBER) {
        char why[96];
        snprintf(why, sizeof why, "%s must be a number, got %s", key, luaL_typename(L, -1));
        event_error(L, i, why);
    }
    if (present) *present = type == LUA_TNUMBER;
    if (type == LUA_TNUMBER) v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* the list of integers at idx into v (at most max); returns the count */
static int ints_at(lua_State *L, int idx, lua_Integer i, const char *key, int64_t *v, int max) {
    char why[96];
    snprintf(why, sizeof why, "%s must be a list of at most %d integers", key, max);
    if (!lua_istable(L, idx)) event_error(L, i, why);
    lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
    if (len > max) event_error(L, i, why);
    for (int n = 0; n < (int)len; n++) {
        int ok;
        lua_rawgeti(L, idx, n + 1);
        v[n] = (int64_t)lua_tointegerx(L, -1, &ok);
        if (!ok) event_error(L, i, why);
        lua_pop(L, 1);
    }
    return (int)len;
}

/* t[key], a list of integers, into v (absent: 0) */
static int ints_field(lua_State *L, int t, lua_Integer i, const char *key, int64_t *v, int max) {
    int n = lua_getfield(L, t, key) != LUA_TNIL ? ints_at(L, lua_gettop(L), i, key, v, max) : 0;
    lua_pop(L, 1);
    return n;
}

/* The lane as p:events() names it: "host", "cpu:0 stream 0", "cpu:0 thread N" (worker N), or a
 * cuda stream ("cuda:0 stream 7"); absent: the host for host events, the cpu device otherwise. */
static void lane_of(lua_State *L, int t, lua_Integer i, wb_trace_event *x) {
    char lane[sizeof x->lane];
    str_field(L, t, i, WB_LKEY(LANE), lane, sizeof lane);
    int kind = wb_trace_kind_of(x->cat), worker;
    const char *thread = strstr(lane, " thread ");
    if (!lane[0]) x->pid = kind == WB_EV_KERNEL || kind == WB_EV_MEMCPY || kind == WB_EV_MEMSET ? 1 : 0;
    else if (!strcmp(lane, "host")) x->pid = 0;
    else if (!strncmp(lane, "cpu", 3) && strstr(lane, " stream ")) x->pid = 1;
    else if (!strncmp(lane, "cpu", 3) && thread && sscanf(thread, " thread %d", &worker) == 1 && worker >= 0 &&
             worker < 254)
        x->pid = 1, x->tid = worker + 1;
    else if (strstr(lane, " stream ")) x->pid = 2, memcpy(x->lane, lane, sizeof lane);
    else {
        char why[192];
        snprintf(why, sizeof why, "lane '%s' is not host, cpu:0 stream 0, cpu:0 thread N or a device stream", lane);
        event_error(L, i, why);
    }
}

/* shapes = {{dims}, false (an absent input), ...}, dtypes = {"f32", false, ...} */
static void inputs_of(lua_State *L, int t, lua_Integer i, wb_trace_event *x) {
    if (lua_getfield(L, t, WB_LKEY(INPUT_SHAPES)) == LUA_TTABLE) {
        int n = (int)lua_rawlen(L, -1);
        if (n > WB_EVENT_MAX_INPUTS) event_error(L, i, "more input shapes than an event holds");
        for (int k = 0; k < n; k++) {
            lua_rawgeti(L, -1, k + 1);
            x->ndims[k] = lua_istable(L, -1) ? ints_at(L, lua_gettop(L), i, "a shape", x->dims[k], WB_MAX_DIMS) : -1;
            lua_pop(L, 1);
        }
        x->ninputs = n;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, t, WB_LKEY(INPUT_DTYPES)) == LUA_TTABLE) {
        for (int k = 0; k < x->ninputs; k++) {
            lua_rawgeti(L, -1, k + 1);
            wb_dtype dt;
            const char *s = lua_tostring(L, -1);
            x->dtype[k] = s && wb_dtype_parse(s, &dt) == WB_OK ? (int)dt : 0;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

/* One field from the table at t (the event, or its args), as the schema types it. */
static void field_of(lua_State *L, int t, lua_Integer i, wb_trace_event *x, const wb_trace_field *f) {
    void *at = wb_trace_field_at(x, f);
    switch (f->type) {
    case WB_TT_STR: str_field(L, t, i, f->lua_key, at, f->size); break;
    case WB_TT_INT:
    case WB_TT_MICROS: *(int64_t *)at = int_field(L, t, i, f->lua_key, 0); break;
    case WB_TT_NUM:
    case WB_TT_COUNT: {
        int present;
        *(double *)at = num_field(L, t, i, f->lua_key, &present);
        if (!present) return;
        break;
    }
    case WB_TT_BOOL:
        lua_getfield(L, t, f->lua_key);
        *(int *)at = lua_toboolean(L, -1);
        lua_pop(L, 1);
        return;
    case WB_TT_INTS:
        if (lua_getfield(L, t, f->lua_key) == LUA_TNIL) return (void)lua_pop(L, 1);
        lua_pop(L, 1);
        *(int *)((char *)x + f->count_offset) = ints_field(L, t, i, f->lua_key, at, (int)(f->size / sizeof(int64_t)));
        break;
    case WB_TT_SHAPES: inputs_of(L, t, i, x); return; /* the dtypes with them */
    case WB_TT_DTYPES: return;
    }
    wb_trace_field_seen(x, f);
}

static void record_of(lua_State *L, int t, lua_Integer i, wb_trace_event *x) {
    wb_trace_event_clear(x);
    str_field(L, t, i, WB_LKEY(CAT), x->cat, sizeof x->cat);
    if (wb_trace_kind_of(x->cat) < 0) {
        char why[128];
        snprintf(why, sizeof why, "cat '%s' is not one of op, kernel, runtime, memory, range, step, memcpy, thread, "
                                  "memset", x->cat);
        event_error(L, i, why);
    }
    strcpy(x->ph, "X");
    int args = 0;
    if (lua_getfield(L, t, "args") == LUA_TTABLE) args = lua_gettop(L);
    else if (!lua_isnil(L, -1)) event_error(L, i, "args must be a table");
    /* every field the schema gives a Lua key, from the event or its args; the lane by its name */
    for (int k = 0; k < WB_TF_COUNT; k++) {
        const wb_trace_field *f = &wb_trace_fields[k];
        if (k == WB_TF_CAT || k == WB_TF_LANE || !f->lua_key) continue;
        if (f->lua == WB_TP_TOP) field_of(L, t, i, x, f);
        else if (args) field_of(L, args, i, x, f);
    }
    lua_pop(L, 1);
    lane_of(L, t, i, x);
    if (x->dur < 0) event_error(L, i, "dur_ns is negative");
    /* the bounds a trace file's times have (trace_json.c's jp_micros): sums of two stay in range */
    const int64_t most = (int64_t)1 << 61;
    if (x->ts < -most || x->ts > most)
        event_error(L, i, "ts_ns is out of range (at most 2^61 ns, 73 years, either way)");
    if (x->dur > most) event_error(L, i, "dur_ns is out of range (at most 2^61 ns, 73 years)");
    for (int k = 0; k < x->ninputs; k++) {
        double count = 1;
        for (int d = 0; d < x->ndims[k]; d++) {
            if (x->dims[k][d] < 0) event_error(L, i, "a shape has a negative dimension");
            count *= (double)x->dims[k][d];
        }
        if (count > 0x1p53) event_error(L, i, "a shape holds more than 2^53 elements");
    }
}

/* wb._profiler_from_events(events) -> a stopped session holding them */
static int l_from_events(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    wb_prof **p = wb_lua_new_session(L); /* freed by its finalizer if an event is refused */
    wb_prof_options o = {.record_host = 1, .record_device = 1, .max_memory = (int64_t)256 << 20,
                         .policy = WB_PROF_SPILL};
    WB_LUA_CHECK(L, wb_prof_new(&o, p));
    static wb_trace_event x; /* 13 KiB: not on the stack; the interpreter is one thread */
    int slices = 0;
    lua_Integer n = luaL_len(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, 1, i) != LUA_TTABLE) event_error(L, i, "not a table");
        record_of(L, lua_gettop(L), i, &x);
        if (!wb_trace_event_append(*p, &x, &slices)) event_error(L, i, "not an event the workbench records");
        lua_pop(L, 1);
    }
    return 1;
}

/* wb._trace_fields() -> the event schema (wb/trace_schema.h), one table per field in the
 * writer's order: {trace = "top" | "args" | nil, key, type, lua = "top" | "args" | nil, lua_key,
 * kinds = {"op", ...}, doc}; scripts/gen_api_docs.lua writes docs/profiler.md's list from it. */
static int l_trace_fields(lua_State *L) {
    static const char *const place[] = {NULL, "top", "args"};
    lua_createtable(L, WB_TF_COUNT, 0);
    for (int k = 0; k < WB_TF_COUNT; k++) {
        const wb_trace_field *f = &wb_trace_fields[k];
        lua_createtable(L, 0, 7);
        if (f->trace) wb_lua_setstring(L, "trace", place[f->trace]);
        if (f->key) wb_lua_setstring(L, "key", f->key);
        wb_lua_setstring(L, "type", wb_trace_type_name(f->type));
        if (f->lua) wb_lua_setstring(L, "lua", place[f->lua]);
        if (f->lua_key) wb_lua_setstring(L, "lua_key", f->lua_key);
        lua_createtable(L, 0, 0);
        int n = 0;
        for (int kind = 0; kind <= WB_EV_MEMSET; kind++) {
            if (!(f->kinds >> kind & 1)) continue;
            lua_pushstring(L, wb_event_kind_name(kind));
            lua_rawseti(L, -2, ++n);
        }
        lua_setfield(L, -2, "kinds");
        wb_lua_setstring(L, "doc", f->doc);
        lua_rawseti(L, -2, k + 1);
    }
    return 1;
}

void wb_lua_register_profiler_events(lua_State *L) {
    lua_pushcfunction(L, l_from_events);
    lua_setfield(L, -2, "_profiler_from_events");
    lua_pushcfunction(L, l_trace_fields);
    lua_setfield(L, -2, "_trace_fields");
}
