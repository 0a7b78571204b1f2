/* l_profiler_groups.c: s:diff_model(), wb.diff's model of a stopped session computed in C
 * (core/observe/profiler_groups.c), pushed as the tables scripts/wb/diff.lua reads: the nodes
 * with one sample per occurrence, the steps, and the drawn steps' trees for the HTML timeline;
 * s:folded_stacks() (core/observe/profiler_stacks.c), s:findings_groups() (findings_*.c) and
 * s:instances() (profiler_instances.c); s:key_averages() (profiler_aggregate.c). */
#include <stdlib.h>
#include <string.h>

#include <wb/findings_groups.h>
#include <wb/profiler_groups.h>
#include "wb_lua.h"

wb_prof *wb_lua_check_session(lua_State *L); /* l_profiler.c */

static void push_samples(lua_State *L, const int64_t *v, size_t n) {
    lua_createtable(L, n < (1u << 30) ? (int)n : 0, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static void push_node(lua_State *L, const wb_diff_model *m, const wb_diff_node *d, size_t order) {
    lua_createtable(L, 0, 14);
    wb_lua_setstring(L, "path", d->path);
    wb_lua_setstring(L, "parent", d->parent >= 0 ? m->node[d->parent].path : "");
    wb_lua_setstring(L, "label", d->label);
    wb_lua_setstring(L, "name", d->name);
    wb_lua_setstring(L, "cat", wb_event_kind_name(d->kind));
    wb_lua_setinteger(L, "depth", d->depth);
    wb_lua_setinteger(L, "order", (lua_Integer)order);
    if (d->kind_key) wb_lua_setstring(L, "kind_key", d->kind_key);
    push_samples(L, d->host, d->nhost);
    lua_setfield(L, -2, "host");
    push_samples(L, d->device, d->ndevice);
    lua_setfield(L, -2, "device");
    lua_createtable(L, (int)d->nkernels, 0);
    for (size_t i = 0; i < d->nkernels; i++) {
        lua_pushstring(L, d->kernels[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "kernels");
    lua_createtable(L, 0, 0); /* occurrences per step (1-based) */
    for (size_t i = 0; i < d->nsteps; i++) {
        lua_pushinteger(L, d->step_count[i]);
        lua_rawseti(L, -2, (lua_Integer)d->step_no[i] + 1);
    }
    lua_setfield(L, -2, "steps");
    if (d->kind_key) { /* a device node's fields */
        lua_createtable(L, 0, 5);
        for (int f = 0; f < 5; f++)
            if (d->fields[f]) wb_lua_setstring(L, wb_diff_field_names[f], d->fields[f]);
        lua_setfield(L, -2, "fields");
    }
}

/* s:diff_model([{draw = N | "median" | "all" | "none", per_occurrence = bool}]) -> {nodes = {path ->
 * node}, order = {paths}, steps = {{host_ns, device_ns, ts_ns, wait_ns,
 * threads_max, threads_mean: of its cpu kernels, nil when none recorded its threads)}}, synthetic_step = bool,
 * step_tree = {{path, depth, step, ts_ns, dur_ns, cat}} (of step N, 1-based, of the median step by
 * default, of every step, or of none), drawn_step = the one step drawn (nil for "all" and "none")},
 * or nil and the message (an empty profile). */
static int diff_model_build(lua_State *L) {
    wb_diff_model_opts o = {.draw = WB_DIFF_DRAW_MEDIAN};
    /* the options first, read raw: a metamethod of the table could run any code, finalizing the
     * session included (the session is checked after them) */
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_pushliteral(L, "draw");
        lua_rawget(L, 2);
        if (lua_isinteger(L, -1)) {
            lua_Integer k = lua_tointeger(L, -1);
            if (k < 1) return luaL_error(L, "diff_model: draw = %d: steps count from 1", (int)k);
            o.draw = (int64_t)k - 1;
        } else if (!lua_isnil(L, -1)) {
            const char *v = lua_tostring(L, -1);
            if (v && !strcmp(v, "median")) o.draw = WB_DIFF_DRAW_MEDIAN;
            else if (v && !strcmp(v, "all")) o.draw = WB_DIFF_DRAW_ALL;
            else if (v && !strcmp(v, "none")) o.draw = WB_DIFF_DRAW_NONE;
            else return luaL_error(L, "diff_model: draw takes a step (from 1), \"median\", \"all\" or \"none\"");
        }
        lua_pushliteral(L, "per_occurrence");
        lua_rawget(L, 2);
        o.per_occurrence = lua_toboolean(L, -1);
        lua_pop(L, 2);
    }
    wb_prof *p = wb_lua_check_session(L);
    wb_diff_model m;
    if (wb_prof_diff_model(p, &o, &m) != WB_OK) {
        lua_pushnil(L);
        lua_pushstring(L, wb_error_message());
        return 2;
    }
    lua_createtable(L, 0, 5);
    lua_createtable(L, 0, m.n < (1u << 24) ? (int)m.n : 0); /* nodes */
    lua_createtable(L, m.n < (1u << 24) ? (int)m.n : 0, 0); /* order */
    for (size_t i = 0; i < m.n; i++) {
        lua_pushstring(L, m.node[i].path);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
        push_node(L, &m, &m.node[i], i + 1);
        lua_setfield(L, -3, m.node[i].path);
    }
    lua_setfield(L, -3, "order");
    lua_setfield(L, -2, "nodes");
    lua_createtable(L, (int)m.nsteps, 0);
    for (size_t k = 0; k < m.nsteps; k++) {
        lua_createtable(L, 0, 6);
        wb_lua_setinteger(L, "host_ns", m.step_host_ns[k]);
        wb_lua_setinteger(L, "device_ns", m.step_device_ns[k]);
        wb_lua_setinteger(L, "ts_ns", m.step_ts_ns[k]);
        wb_lua_setnumber(L, "wait_ns", m.step_wait_ns[k]);
        if (m.step_threads_max[k] > 0) {
            wb_lua_setinteger(L, "threads_max", m.step_threads_max[k]);
            wb_lua_setnumber(L, "threads_mean", m.step_threads_mean[k]);
        }
        lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    lua_setfield(L, -2, "steps");
    lua_pushboolean(L, m.synthetic_step);
    lua_setfield(L, -2, "synthetic_step");
    lua_createtable(L, m.ntree < (1u << 24) ? (int)m.ntree : 0, 0);
    for (size_t i = 0; i < m.ntree; i++) {
        const wb_diff_instance *x = &m.step_tree[i];
        lua_createtable(L, 0, 5);
        wb_lua_setstring(L, "path", m.node[x->node].path);
        wb_lua_setinteger(L, "depth", x->depth);
        wb_lua_setinteger(L, "step", (lua_Integer)x->step + 1);
        wb_lua_setinteger(L, "ts_ns", x->ts_ns);
        wb_lua_setinteger(L, "dur_ns", x->dur_ns);
        wb_lua_setstring(L, "cat", wb_event_kind_name(x->kind));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "step_tree");
    if (o.draw >= 0 || o.draw == WB_DIFF_DRAW_MEDIAN) {
        lua_pushinteger(L, (lua_Integer)m.drawn_step + 1);
        lua_setfield(L, -2, "drawn_step");
    }
    wb_diff_model_free(&m);
    return 1;
}

int wb_lua_session_diff_model(lua_State *L) {
    wb_lua_check_session(L);
    return wb_lua_unfinalized(L, diff_model_build);
}

/* s:folded_stacks() -> the folded stacks' text (one line per stack, sorted). */
int wb_lua_session_folded_stacks(lua_State *L) {
    char *text;
    size_t len;
    WB_LUA_CHECK(L, wb_prof_folded_stacks(wb_lua_check_session(L), &text, &len));
    lua_pushlstring(L, text, len); /* (a memory error here leaks the text: rare) */
    free(text);
    return 1;
}

static void push_val(lua_State *L, const wb_val *v) {
    switch (v->type) {
    case WB_VAL_BOOL: lua_pushboolean(L, v->b); break;
    case WB_VAL_INT: lua_pushinteger(L, (lua_Integer)v->i); break;
    case WB_VAL_NUM: lua_pushnumber(L, v->d); break;
    case WB_VAL_STR: lua_pushstring(L, v->s); break;
    case WB_VAL_LIST:
    case WB_VAL_MAP:
        luaL_checkstack(L, 4, "findings_groups");
        lua_createtable(L, v->type == WB_VAL_LIST ? (int)v->c.n : 0, v->type == WB_VAL_MAP ? (int)v->c.n : 0);
        for (size_t i = 0; i < v->c.n; i++) {
            push_val(L, &v->c.v[i]);
            if (v->type == WB_VAL_LIST) lua_rawseti(L, -2, (lua_Integer)i + 1);
            else lua_setfield(L, -2, v->c.k[i]);
        }
        break;
    default: lua_pushnil(L);
    }
}

/* s:findings_groups(imbalance_ratio, imbalance_min_ns, roofline_outlier_ratio, small_kernel_ns) -> per rule
 * the groups wb.findings writes its sentences from (core/observe/findings_rules.c). */
static int findings_groups_build(lua_State *L) {
    wb_prof *p = wb_lua_check_session(L);
    wb_findings_th th = {.imbalance_ratio = luaL_checknumber(L, 2), .imbalance_min_ns = luaL_checknumber(L, 3),
                         .roofline_outlier_ratio = luaL_checknumber(L, 4), .small_kernel_ns = luaL_checknumber(L, 5)};
    wb_val v;
    WB_LUA_CHECK(L, wb_prof_findings_groups(p, &th, &v));
    push_val(L, &v); /* (a memory error here leaks the groups: rare, small) */
    wb_val_free(&v);
    return 1;
}

int wb_lua_session_findings_groups(lua_State *L) {
    wb_lua_check_session(L);
    return wb_lua_unfinalized(L, findings_groups_build);
}

/* s:instances([range]) -> the instances of the range (or the steps, or the whole trace) and what
 * started inside each (core/observe/profiler_instances.c). */
static int instances_build(lua_State *L) {
    const char *range = luaL_optstring(L, 2, NULL);
    wb_prof *p = wb_lua_check_session(L);
    wb_val v;
    WB_LUA_CHECK(L, wb_prof_instances(p, range, &v));
    push_val(L, &v); /* (a memory error here leaks the instances: rare) */
    wb_val_free(&v);
    return 1;
}

int wb_lua_session_instances(lua_State *L) {
    wb_lua_check_session(L);
    return wb_lua_unfinalized(L, instances_build);
}

/* s:key_averages(by_input_shape, by_stack) -> the rows aggregated in C (profiler_aggregate.c). */
static int key_averages_build(lua_State *L) {
    wb_prof *p = wb_lua_check_session(L);
    wb_prof_rows rows;
    WB_LUA_CHECK(L, wb_prof_aggregate(p, lua_toboolean(L, 2), lua_toboolean(L, 3), &rows));
    lua_createtable(L, rows.n < (1u << 24) ? (int)rows.n : 0, 0);
    for (size_t i = 0; i < rows.n; i++) {
        const wb_prof_row *r = &rows.row[i];
        lua_createtable(L, 0, 16);
        wb_lua_setstring(L, "name", r->name);
        wb_lua_setstring(L, "kind", wb_event_kind_name(r->kind));
        wb_lua_setinteger(L, "calls", r->calls);
        wb_lua_setinteger(L, "self_cpu_ns", r->self_cpu_ns);
        wb_lua_setinteger(L, "cpu_total_ns", r->cpu_total_ns);
        wb_lua_setinteger(L, "self_device_ns", r->self_device_ns);
        wb_lua_setinteger(L, "device_total_ns", r->device_total_ns);
        wb_lua_setinteger(L, "kernels", r->kernels);
        wb_lua_setnumber(L, "flops", r->flops);
        wb_lua_setnumber(L, "bytes", r->bytes);
        if (r->input_shapes) wb_lua_setstring(L, "input_shapes", r->input_shapes);
        if (r->src) wb_lua_setstring(L, "src", r->src);
        if (r->spread_launches) {
            wb_lua_setinteger(L, "spread_ns", r->spread_ns);
            wb_lua_setinteger(L, "spread_launches", r->spread_launches);
        }
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    wb_prof_rows_free(&rows);
    return 1;
}

int wb_lua_session_key_averages(lua_State *L) {
    wb_lua_check_session(L);
    return wb_lua_unfinalized(L, key_averages_build);
}

/* The methods' bodies by name, for the errors they raise (wb_lua_name_function). */
void wb_lua_name_session_groups(lua_State *L);
void wb_lua_name_session_groups(lua_State *L) {
    wb_lua_name_function(L, key_averages_build, "key_averages");
    wb_lua_name_function(L, instances_build, "instances");
}
