/* l_profiler.c: the Lua type wb.ProfilerSession, the native half of wb.profiler (the schedule,
 * tables and expectations live in scripts/wb/profiler.lua). Check, call the core, push. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <wb/profiler.h>
#include <wb/trace_schema.h>
#include "wb_lua.h"

#define SESSION_TYPE "wb.ProfilerSession"

typedef struct session_handle {
    wb_prof *p;
    uint64_t collections, collection_ns; /* major collections run between steps, and their time */
} session_handle;

static lua_State *stack_state; /* the interpreter whose call sites with_stack reports */
static char library_dir[PATH_MAX]; /* the library's scripts/wb, resolved; "" when unknown */

/* Whether a chunk ("@path" for a file) was loaded from the library's own folder: its folder,
 * resolved, is library_dir exactly (not any path with a /wb/ in it: a user's scripts under a wb/
 * folder, or a checkout under one, are the user's). Remembers the chunks it has seen, by name. */
static int in_library(const char *source) {
    enum { SEEN = 64 };
    static struct {
        char *source;
        int inside;
    } seen[SEEN];
    static unsigned next;
    if (!library_dir[0] || source[0] != '@') return 0;
    for (int i = 0; i < SEEN; i++)
        if (seen[i].source && !strcmp(seen[i].source, source)) return seen[i].inside;
    char dir[PATH_MAX], resolved[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", source + 1);
    char *slash = strrchr(dir, '/');
    int inside = 0;
    if (slash) {
        *slash = '\0';
        inside = realpath(dir[0] ? dir : "/", resolved) && !strcmp(resolved, library_dir);
    }
    char *copy = strdup(source);
    if (copy) {
        free(seen[next % SEEN].source);
        seen[next % SEEN].source = copy;
        seen[next % SEEN].inside = inside;
        next++;
    }
    return inside;
}

/* "file:line" of the innermost Lua frame outside the library's own scripts. */
static void lua_call_site(char *buf, size_t len) {
    lua_Debug ar;
    buf[0] = '\0';
    for (int level = 1; lua_getstack(stack_state, level, &ar); level++) {
        lua_getinfo(stack_state, "Sl", &ar);
        if (ar.currentline <= 0 || in_library(ar.source)) continue;
        snprintf(buf, len, "%s:%d", ar.short_src, ar.currentline);
        return;
    }
}

/* library_dir from package.wb_scripts_dir (main.c sets it beside package.path), read from the
 * loaded-modules table, which a script's `package = nil` does not reach. Once per process. */
static void find_library_dir(lua_State *L) {
    static int found;
    char dir[PATH_MAX];
    if (found) return;
    found = 1;
    library_dir[0] = '\0';
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "package");
    int pushed = 2;
    if (lua_istable(L, -1)) {
        pushed++;
        if (lua_getfield(L, -1, "wb_scripts_dir") == LUA_TSTRING &&
            snprintf(dir, sizeof dir, "%s/wb", lua_tostring(L, -1)) < (int)sizeof dir && !realpath(dir, library_dir))
            library_dir[0] = '\0';
    }
    lua_pop(L, pushed);
}

int wb_lua_in_library(lua_State *L, const char *source) {
    find_library_dir(L);
    return in_library(source);
}

static wb_prof *check_session(lua_State *L) {
    session_handle *h = wb_lua_checkudata(L, 1, SESSION_TYPE);
    if (!h->p) wb_lua_raise(L, "attempt to use a freed profiler session");
    return h->p;
}

/* For the session's methods in other files (l_profiler_groups.c). */
wb_prof *wb_lua_check_session(lua_State *L);
wb_prof *wb_lua_check_session(lua_State *L) { return check_session(L); }
int wb_lua_session_diff_model(lua_State *L);
/* A new handle on the stack (its session NULL until set through the pointer returned), for
 * l_profiler_events.c: the finalizer frees whatever session it holds. */
wb_prof **wb_lua_new_session(lua_State *L);
wb_prof **wb_lua_new_session(lua_State *L) {
    session_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
    *h = (session_handle){0};
    luaL_setmetatable(L, SESSION_TYPE);
    return &h->p;
}
int wb_lua_session_folded_stacks(lua_State *L);
int wb_lua_session_findings_groups(lua_State *L);
int wb_lua_session_instances(lua_State *L);
int wb_lua_session_key_averages(lua_State *L);
void wb_lua_name_session_groups(lua_State *L);

static int bool_field(lua_State *L, int idx, const char *key, int dflt) {
    int t = lua_getfield(L, idx, key);
    int v = t == LUA_TNIL ? dflt : lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* wb._profiler_session{record_host=, record_device=, record_shapes=, with_stack=, with_flops=,
 * profile_memory=, max_events=, max_memory=, memory_policy=, spill_dir=} */
static int l_session_new(lua_State *L) {
    wb_lua_checktable(L, 1);
    wb_prof_options o = {.record_host = bool_field(L, 1, "record_host", 1),
                         .record_device = bool_field(L, 1, "record_device", 1),
                         .record_shapes = bool_field(L, 1, "record_shapes", 0),
                         .with_stack = bool_field(L, 1, "with_stack", 0),
                         .with_flops = bool_field(L, 1, "with_flops", 0),
                         .profile_memory = bool_field(L, 1, "profile_memory", 0),
                         .max_events = 0,
                         .max_memory = (int64_t)256 << 20,
                         .policy = WB_PROF_SPILL};
    if (lua_getfield(L, 1, "max_events") != LUA_TNIL) o.max_events = wb_lua_checkint(L, -1, "profiler", "max_events");
    lua_pop(L, 1);
    if (lua_getfield(L, 1, "max_memory") != LUA_TNIL) o.max_memory = wb_lua_checkint(L, -1, "profiler", "max_memory");
    lua_pop(L, 1);
    if (lua_getfield(L, 1, "memory_policy") != LUA_TNIL) {
        const char *policy = lua_tostring(L, -1);
        if (policy && !strcmp(policy, "ring"))
            o.policy = WB_PROF_RING;
        else if (policy && !strcmp(policy, "stop"))
            o.policy = WB_PROF_STOP;
        else if (!policy || strcmp(policy, "spill"))
            return wb_lua_raise(L, "profiler: memory_policy must be \"spill\", \"ring\" or \"stop\", got %s",
                                policy ? policy : luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    if (lua_getfield(L, 1, "spill_dir") != LUA_TNIL) { /* copied by wb_prof_new */
        o.spill_dir = lua_tostring(L, -1);
        /* under --sandbox, checked before use: the spill's own errors would tell a script whether a
         * path outside the allowed folders exists and what it is */
        if (o.spill_dir) wb_lua_check_path(L, o.spill_dir, 1, "profiler: spill_dir");
    }
    WB_LUA_CHECK(L, wb_prof_new(&o, wb_lua_new_session(L)));
    return 1;
}


static int s_gc(lua_State *L) {
    session_handle *h = wb_lua_checkudata(L, 1, SESSION_TYPE);
    wb_prof_free(h->p);
    h->p = NULL;
    return 0;
}

static int s_start(lua_State *L) {
    /* the main thread, never the caller's: a coroutine that starts the session may be collected
     * while it records, and its lua_State with it. (Call sites inside coroutines show where the
     * main thread resumed them.) */
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    stack_state = lua_tothread(L, -1);
    lua_pop(L, 1);
    find_library_dir(L);
    wb_prof_set_stack_provider(lua_call_site);
    WB_LUA_CHECK(L, wb_prof_start(check_session(L)));
    return 0;
}

static int s_stop(lua_State *L) {
    wb_prof_stop(check_session(L));
    return 0;
}

static int s_running(lua_State *L) {
    lua_pushboolean(L, wb_prof_is_running(check_session(L)));
    return 1;
}

static int s_set_recording(lua_State *L) {
    wb_prof_set_recording(check_session(L), lua_toboolean(L, 2));
    return 0;
}

static int s_step(lua_State *L) {
    wb_prof_step(check_session(L), wb_lua_checkint(L, 2, "step", "number"));
    return 0;
}

/* Ends the step; the collector's major collection that the next step would meet runs now,
 * between the steps, timed in neither (wb_lua_collect_between_steps) and counted in stats(). */
static int s_end_step(lua_State *L) {
    wb_prof_end_step(check_session(L));
    session_handle *h = wb_lua_checkudata(L, 1, SESSION_TYPE);
    uint64_t ns = wb_lua_collect_between_steps(L);
    if (ns > 0) {
        h->collections++;
        h->collection_ns += ns;
    }
    return 0;
}

static int s_push(lua_State *L) {
    check_session(L);
    const char *name = wb_lua_checkstring(L, 2); /* a number becomes a string: an allocation */
    WB_LUA_CHECK(L, wb_prof_range_push(check_session(L), name));
    return 0;
}

static int s_pop(lua_State *L) {
    WB_LUA_CHECK(L, wb_prof_range_pop(check_session(L)));
    return 0;
}

static int s_clear(lua_State *L) {
    wb_prof_clear(check_session(L));
    return 0;
}

static int s_export(lua_State *L) {
    const char *path = wb_lua_checkstring(L, 2);
    wb_lua_check_path(L, path, 1, "export_chrome_trace");
    const char *extra_events = luaL_optstring(L, 3, NULL), *extra_members = luaL_optstring(L, 4, NULL);
    uint64_t events = 0, bytes = 0;
    WB_LUA_CHECK(L, wb_prof_export_chrome_with(check_session(L), path, extra_events, extra_members, &events, &bytes));
    lua_pushinteger(L, (lua_Integer)events);
    lua_pushinteger(L, (lua_Integer)bytes);
    return 2;
}

/* s:stats() and s:events() read the session while they make tables: built with the collector
 * stopped, so that no finalizer frees or clears the session meanwhile */
static int s_stats_build(lua_State *L) {
    wb_prof *p = check_session(L);
    lua_createtable(L, 0, 12);
    wb_prof_store_stats st;
    wb_prof_store_stats_get(p, &st);
    char note[1024];
    wb_prof_drop_note(p, note, sizeof note);
    wb_lua_setinteger(L, "events", (lua_Integer)wb_prof_count(p));
    wb_lua_setinteger(L, "dropped", (lua_Integer)wb_prof_dropped(p));
    wb_lua_setstring(L, "dropped_note", note);
    wb_lua_setinteger(L, "memory_bytes", st.memory_bytes);
    wb_lua_setinteger(L, "spill_bytes", st.spill_bytes);
    wb_lua_setinteger(L, "max_memory", st.max_memory);
    wb_lua_setstring(L, "memory_policy", wb_prof_policy_name(st.policy));
    wb_lua_setstring(L, "spill_error", st.spill_error);
    lua_pushboolean(L, wb_prof_has_device_lane(p));
    lua_setfield(L, -2, "device_lane");
    wb_lua_setinteger(L, "peak_memory", (lua_Integer)wb_prof_peak_memory(p));
    wb_lua_setnumber(L, "event_cost_ns", wb_prof_event_cost_ns(p));
    wb_lua_setstring(L, "device_note", wb_prof_device_note(p));
    session_handle *h = wb_lua_checkudata(L, 1, SESSION_TYPE);
    wb_lua_setinteger(L, "collections_between_steps", (lua_Integer)h->collections);
    wb_lua_setinteger(L, "collection_ns", (lua_Integer)h->collection_ns);
    return 1;
}

static int s_stats(lua_State *L) {
    check_session(L);
    return wb_lua_unfinalized(L, s_stats_build);
}

static void push_dims(lua_State *L, const int64_t *v, int n) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* One event as a table (the shape docs/profiler.md documents). */
static void push_event(lua_State *L, const wb_prof *p, const wb_event *e) {
    lua_createtable(L, 0, 12);
    if (e->kind == WB_EV_STEP)
        lua_pushfstring(L, "ProfilerStep#%d", (int)e->id);
    else
        lua_pushstring(L, wb_event_name(e));
    lua_setfield(L, -2, WB_LKEY(NAME));
    wb_lua_setstring(L, WB_LKEY(CAT), wb_event_kind_name(e->kind));
    wb_lua_setinteger(L, WB_LKEY(TS), e->ts_ns);
    wb_lua_setinteger(L, WB_LKEY(DUR), e->dur_ns);
    wb_lua_setstring(L, WB_LKEY(LANE), wb_prof_lane_name(p, e->lane));
    wb_lua_setinteger(L, WB_LKEY(ID), (lua_Integer)e->id);
    /* correlation: an op's own id, a kernel's launching op; parent: the enclosing op */
    wb_lua_setinteger(L, WB_LKEY(CORRELATION), (lua_Integer)(e->kind == WB_EV_OP ? e->id : e->link));
    wb_lua_setinteger(L, WB_LKEY(PARENT), (lua_Integer)e->link);
    wb_lua_setnumber(L, WB_LKEY(FLOPS), e->kind == WB_EV_MEMORY || e->kind == WB_EV_THREAD || e->kind == WB_EV_RANGE ||
                                         e->kind == WB_EV_STEP
                                     ? 0
                                     : e->flops);
    wb_lua_setnumber(L, WB_LKEY(BYTES), (double)e->bytes);
    if (wb_prof_src(p, e)) {
        wb_lua_setstring(L, WB_LKEY(SRC), wb_prof_src(p, e));
    }
    if (e->ninputs) {
        lua_createtable(L, e->ninputs, 0); /* shapes */
        lua_createtable(L, e->ninputs, 0); /* dtypes */
        for (int k = 0; k < e->ninputs; k++) {
            if (wb_event_ndim(e, k) < 0) {
                lua_pushboolean(L, 0); /* an absent optional input */
                lua_rawseti(L, -3, k + 1);
                lua_pushboolean(L, 0);
                lua_rawseti(L, -2, k + 1);
                continue;
            }
            const int64_t *dims = wb_prof_shape(p, e, k);
            lua_createtable(L, wb_event_ndim(e, k), 0);
            for (int d = 0; d < wb_event_ndim(e, k); d++) {
                lua_pushinteger(L, (lua_Integer)dims[d]);
                lua_rawseti(L, -2, d + 1);
            }
            lua_rawseti(L, -3, k + 1);
            lua_pushstring(L, wb_dtype_name((wb_dtype)wb_event_dtype(e, k)));
            lua_rawseti(L, -2, k + 1);
        }
        lua_setfield(L, -3, WB_LKEY(INPUT_DTYPES));
        lua_setfield(L, -2, WB_LKEY(INPUT_SHAPES));
    }
    lua_createtable(L, 0, 3); /* args */
    if (e->kind == WB_EV_KERNEL) {
        wb_lua_setinteger(L, WB_LKEY(THREADS), e->threads);
        if (e->kernel->ops) wb_lua_setstring(L, WB_LKEY(OPS), e->kernel->ops); /* a generated kernel's group */
        if (e->kernel->op) wb_lua_setstring(L, WB_LKEY(OP), e->kernel->op); /* the kind's op: "sgemm", "mul" */
        wb_kernel_fields k;
        if (wb_kernel_kind_fields(e->kernel, &k)) {
            wb_lua_setstring(L, WB_LKEY(ISA), k.isa);
            wb_lua_setstring(L, WB_LKEY(TILE), k.tile);
            wb_lua_setstring(L, WB_LKEY(LAYOUT), k.layout);
            wb_lua_setstring(L, WB_LKEY(EPILOGUE), k.epilogue);
        } else {
            char epi[WB_EPILOGUE_MAX];
            wb_lua_setstring(L, WB_LKEY(EPILOGUE), wb_kernel_kind_epilogue(e->kernel, epi, sizeof epi));
        }
    }
    if (e->kind == WB_EV_OP && e->nflow) { /* storage ids: the inputs', then the output's */
        int nflow;
        const int64_t *ids = wb_prof_flow(p, e, &nflow);
        lua_createtable(L, nflow, 0);
        for (int i = 0; i < nflow; i++) {
            lua_pushinteger(L, (lua_Integer)ids[i]);
            lua_rawseti(L, -2, i + 1);
        }
        lua_setfield(L, -2, WB_LKEY(FLOW));
    }
    const int64_t *in_stride, *out_shape, *out_stride;
    int out_ndim;
    if (e->kind == WB_EV_OP && wb_prof_view_geometry(p, e, &in_stride, &out_ndim, &out_shape, &out_stride)) {
        push_dims(L, in_stride, wb_event_ndim(e, 0) > 0 ? wb_event_ndim(e, 0) : 0);
        lua_setfield(L, -2, WB_LKEY(IN_STRIDE));
        push_dims(L, out_shape, out_ndim);
        lua_setfield(L, -2, WB_LKEY(OUT_SHAPE));
        push_dims(L, out_stride, out_ndim);
        lua_setfield(L, -2, WB_LKEY(OUT_STRIDE));
    }
    if ((e->kind == WB_EV_RANGE || e->kind == WB_EV_STEP) && e->run_delay_ns >= 0)
        wb_lua_setnumber(L, WB_LKEY(RUN_DELAY), e->run_delay_ns);
    if (e->kind == WB_EV_THREAD) { /* a worker's share of the kernel whose id is `kernel` */
        wb_kernel_fields k;
        wb_lua_setinteger(L, WB_LKEY(KERNEL), (lua_Integer)e->link);
        wb_lua_setinteger(L, WB_LKEY(THREAD), e->threads);
        wb_lua_setnumber(L, WB_LKEY(WORK), e->work);
        wb_lua_setstring(L, WB_LKEY(UNIT), wb_kernel_kind_fields(e->kernel, &k) ? "tiles" : "elements");
    }
    if (e->kind == WB_EV_MEMORY) { /* bytes live on that device after the event */
        wb_lua_setinteger(L, WB_LKEY(ALLOCATED), (lua_Integer)e->live_bytes);
        wb_lua_setstring(L, WB_LKEY(DEVICE), wb_device_name((wb_device)e->device));
    }
    if (e->kind == WB_EV_RUNTIME && e->cbid) { /* a device API record */
        wb_lua_setinteger(L, WB_LKEY(CBID), e->cbid);
    }
    if (e->kind == WB_EV_RUNTIME && e->api) wb_lua_setstring(L, WB_LKEY(API), wb_event_api_name(e->api));
    if (e->failed) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, WB_LKEY(FAILED));
    }
    lua_setfield(L, -2, "args");
}

/* What s:events(filter) keeps: a category, a lane, a name, a start in [from_ns, to_ns). */
typedef struct event_filter {
    int kind; /* -1: any */
    const char *lane, *name;
    int64_t from_ns, to_ns;
} event_filter;

static int filter_keeps(const wb_prof *p, const event_filter *f, const wb_event *e) {
    if (f->kind >= 0 && e->kind != f->kind) return 0;
    if (e->ts_ns < f->from_ns || e->ts_ns >= f->to_ns) return 0;
    if (f->lane && strcmp(wb_prof_lane_name(p, e->lane), f->lane)) return 0;
    if (f->name && (e->kind == WB_EV_STEP || strcmp(wb_event_name(e), f->name))) return 0;
    return 1;
}

/* The value stays on the stack, which keeps the string alive: a filter's __index may return one
 * that nothing else holds. */
static const char *string_field(lua_State *L, int idx, const char *key) {
    int t = lua_getfield(L, idx, key);
    const char *v = t == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (t != LUA_TNIL && t != LUA_TSTRING) wb_lua_raise(L, "events: filter.%s must be a string, got %s", key, lua_typename(L, t));
    return v;
}

static int64_t int_field(lua_State *L, int idx, const char *key, int64_t dflt) {
    int64_t v = dflt;
    if (lua_getfield(L, idx, key) != LUA_TNIL) v = wb_lua_checkint(L, -1, "events", key);
    lua_pop(L, 1);
    return v;
}

/* s:events([filter]) -> array of event tables, and the index to continue from (nil at the end).
 * filter = {cat=, lane=, name=, from_ns=, to_ns=, first= (1-based index among all events),
 * limit= (tables built at most)}: tables are built only for the events kept. */
static int s_events_build(lua_State *L) {
    check_session(L);
    event_filter f = {.kind = -1, .from_ns = INT64_MIN, .to_ns = INT64_MAX};
    int64_t first = 1, limit = INT64_MAX;
    if (!lua_isnoneornil(L, 2)) {
        wb_lua_checktable(L, 2);
        const char *cat = string_field(L, 2, WB_LKEY(CAT));
        if (cat) {
            for (int k = 0; k <= WB_EV_MEMSET && f.kind < 0; k++)
                if (!strcmp(cat, wb_event_kind_name(k))) f.kind = k;
            if (f.kind < 0)
                return wb_lua_raise(L, "events: unknown cat '%s' (expected op, kernel, runtime, memory, range, step, "
                                       "memcpy, thread or memset)", cat);
        }
        f.lane = string_field(L, 2, WB_LKEY(LANE));
        f.name = string_field(L, 2, WB_LKEY(NAME));
        f.from_ns = int_field(L, 2, "from_ns", INT64_MIN);
        f.to_ns = int_field(L, 2, "to_ns", INT64_MAX);
        first = int_field(L, 2, "first", 1);
        limit = int_field(L, 2, "limit", INT64_MAX);
        if (first < 1) return wb_lua_raise(L, "events: filter.first must be >= 1, got %I", (lua_Integer)first);
        if (limit < 1) return wb_lua_raise(L, "events: filter.limit must be >= 1, got %I", (lua_Integer)limit);
    }
    /* fetched after the filter is read: its __index may have released the session (the bindings'
     * rule, wb_lua.h; lua_test_callbacks caught the use after free under ASan) */
    wb_prof *p = check_session(L);
    size_t total = wb_prof_count(p);
    lua_createtable(L, limit < (int64_t)total && limit < (1 << 24) ? (int)limit : (int)(total < (1u << 24) ? total : 1u << 24), 0);
    wb_prof_cursor c;
    wb_prof_cursor_open(&c, p);
    wb_prof_cursor_seek(&c, (uint64_t)first - 1);
    lua_Integer n = 0, next = 0;
    for (const wb_event *e; (e = wb_prof_cursor_next(&c));) {
        if (!filter_keeps(p, &f, e)) continue;
        if (n == limit) {
            next = (lua_Integer)c.index; /* this event's 1-based index */
            break;
        }
        push_event(L, p, e);
        lua_rawseti(L, -2, ++n);
    }
    wb_prof_cursor_close(&c);
    if (c.status != WB_OK) return wb_lua_error(L);
    if (next) lua_pushinteger(L, next);
    else lua_pushnil(L);
    return 2;
}

static int s_events(lua_State *L) {
    check_session(L);
    return wb_lua_unfinalized(L, s_events_build);
}

static const luaL_Reg session_methods[] = {
    {"start", s_start},     {"stop", s_stop},
    {"running", s_running}, {"set_recording", s_set_recording},
    {"step", s_step},       {"end_step", s_end_step},
    {"push", s_push},       {"pop", s_pop},
    {"clear", s_clear},     {"export_chrome_trace", s_export},
    {"stats", s_stats},     {"events", s_events},
    {"key_averages", wb_lua_session_key_averages}, {"diff_model", wb_lua_session_diff_model},
    {"folded_stacks", wb_lua_session_folded_stacks}, {"findings_groups", wb_lua_session_findings_groups},
    {"instances", wb_lua_session_instances},
    {NULL, NULL},
};

/* wb._profiler_load(path, {max_memory=, memory_policy=, spill_dir=}) -> a stopped session holding
 * the trace's events, the lines read, and the document's other members as one JSON object. */
static int l_load(lua_State *L) {
    const char *path = wb_lua_checkstring(L, 1);
    wb_lua_check_path(L, path, 0, "load_trace");
    wb_lua_checktable(L, 2);
    wb_prof_options o = {.record_host = 1, .record_device = 1, .max_memory = (int64_t)256 << 20,
                         .policy = WB_PROF_SPILL};
    if (lua_getfield(L, 2, "max_memory") != LUA_TNIL) o.max_memory = wb_lua_checkint(L, -1, "load_trace", "max_memory");
    lua_pop(L, 1);
    if (lua_getfield(L, 2, "memory_policy") != LUA_TNIL) {
        const char *policy = lua_tostring(L, -1);
        o.policy = policy && !strcmp(policy, "ring") ? WB_PROF_RING : policy && !strcmp(policy, "stop") ? WB_PROF_STOP : WB_PROF_SPILL;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, 2, "spill_dir") != LUA_TNIL) {
        o.spill_dir = lua_tostring(L, -1);
        if (o.spill_dir) wb_lua_check_path(L, o.spill_dir, 1, "load_trace: spill_dir");
    }
    wb_prof **p = wb_lua_new_session(L);
    uint64_t lines = 0;
    char *members;
    WB_LUA_CHECK(L, wb_prof_load_chrome(path, &o, p, &lines, &members));
    lua_pushinteger(L, (lua_Integer)lines);
    lua_pushstring(L, members ? members : "{}"); /* (a memory error here leaks the string: rare) */
    free(members);
    return 3;
}

/* wb._profiler_current_push(name) / pop(): ranges on the running session, if any. */
static int l_range_push(lua_State *L) {
    const char *name = wb_lua_checkstring(L, 1);
    wb_prof *p = wb_prof_current();
    if (p) WB_LUA_CHECK(L, wb_prof_range_push(p, name));
    return 0;
}

static int l_range_pop(lua_State *L) {
    wb_prof *p = wb_prof_current();
    if (p) WB_LUA_CHECK(L, wb_prof_range_pop(p));
    return 0;
}

static const luaL_Reg functions[] = {
    {"_profiler_session", l_session_new},
    {"_profiler_push", l_range_push},
    {"_profiler_pop", l_range_pop},
    {"_profiler_load", l_load},
    {NULL, NULL},
};

void wb_lua_register_profiler(lua_State *L) {
    luaL_newmetatable(L, SESSION_TYPE);
    lua_pushcfunction(L, s_gc);
    lua_setfield(L, -2, "__gc");
    luaL_newlib(L, session_methods);
    lua_setfield(L, -2, "__index");
    wb_lua_name_function(L, s_stats_build, "stats");
    wb_lua_name_function(L, s_events_build, "events");
    wb_lua_name_session_groups(L);
    lua_pop(L, 1);
    luaL_setfuncs(L, functions, 0);
}
