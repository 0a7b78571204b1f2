/* profiler_instances.c: the instances of a named range (or the steps, or the whole trace when
 * there are none) and what ran inside each: its kernels (store index, name, the op that launched
 * them) and their time, and its ops counted per name. p:range_instances, p:expect and
 * wb.profiler.per_call read it (scripts/wb/profiler.lua). Two passes over the store: the spans,
 * the ranges' names and the ops' names by id; then each kernel and op placed in the spans that
 * hold its start. */
#include <stdlib.h>
#include <string.h>

#include "keyindex.h"
#include "findings_index.h"
#include "profiler_internal.h"

typedef struct span {
    int64_t t0, t1;
    uint64_t order; /* recording order: equal starts keep it */
    wb_val *inst;   /* its map in the output (set once the list is whole: adding moves them) */
    int64_t kernel_ns;
} span;

typedef struct op_name {
    uint32_t id;
    const char *name;
} op_name;

static int by_start(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int by_id(const void *a, const void *b) {
    uint32_t x = ((const op_name *)a)->id, y = ((const op_name *)b)->id;
    return x < y ? -1 : x > y;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static const char *op_of(const op_name *ops, size_t n, uint32_t id) {
    if (!id) return NULL;
    op_name key = {.id = id};
    const op_name *o = n ? bsearch(&key, ops, n, sizeof *ops, by_id) : NULL;
    return o ? o->name : NULL;
}

static int64_t end_of(const wb_event *e) {
    return e->dur_ns > 0 && e->ts_ns > INT64_MAX - e->dur_ns ? INT64_MAX : e->ts_ns + (e->dur_ns > 0 ? e->dur_ns : 0);
}

typedef struct scan {
    span *s;
    size_t ns, cap_s;
    op_name *ops;
    size_t nops, cap_ops;
    wb_keyindex ranges;
    uint64_t maxdur; /* the widest span's t1 - t0 */
} scan;

/* 1, 0 out of memory, or -1 when the spill file could not be read back (*st says why). */
static int first_pass(const wb_prof *p, const char *range, scan *w, wb_status *st) {
    wb_prof_cursor c;
    wb_prof_cursor_open(&c, p);
    int ok = 1;
    for (const wb_event *e; ok && (e = wb_prof_cursor_next(&c));) {
        if (e->kind == WB_EV_OP) {
            ok = wb_grow((void **)&w->ops, &w->cap_ops, w->nops + 1, sizeof *w->ops);
            if (ok) w->ops[w->nops++] = (op_name){e->id, wb_event_name(e)};
            continue;
        }
        if (e->kind == WB_EV_RANGE) ok = wb_keyindex_get(&w->ranges, wb_event_name(e), NULL) >= 0;
        int mine = range ? e->kind == WB_EV_RANGE && !strcmp(wb_event_name(e), range) : e->kind == WB_EV_STEP;
        if (!ok || !mine) continue;
        ok = wb_grow((void **)&w->s, &w->cap_s, w->ns + 1, sizeof *w->s);
        if (ok) w->s[w->ns++] = (span){.t0 = e->ts_ns, .t1 = end_of(e), .order = c.index};
    }
    wb_prof_cursor_close(&c);
    *st = c.status;
    return c.status != WB_OK ? -1 : ok;
}

/* The spans that hold ts: those starting at or before it, back to the longest span's length. */
static void place(scan *w, fx_out *o, const wb_event *e, uint64_t index) {
    size_t lo = 0, hi = w->ns; /* the first span starting after ts */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->s[mid].t0 <= e->ts_ns) lo = mid + 1;
        else hi = mid;
    }
    /* widths as unsigned: exact for any span, the whole trace's [INT64_MIN, INT64_MAX] included */
    for (size_t j = lo; j-- > 0 && (uint64_t)e->ts_ns - (uint64_t)w->s[j].t0 <= w->maxdur;) {
        span *s = &w->s[j];
        if (e->ts_ns > s->t1) continue;
        if (e->kind == WB_EV_OP) {
            wb_val *ops = fx_get(s->inst, "ops"), *n = fx_get(ops, wb_event_name(e));
            if (n) n->i++;
            else fx_set_int(o, ops, wb_event_name(e), 1);
            continue;
        }
        s->kernel_ns += e->dur_ns;
        wb_val *k = fx_add(o, fx_get(s->inst, "kernels"), NULL);
        k->type = WB_VAL_MAP;
        fx_set_int(o, k, "index", (int64_t)index);
        fx_set_str(o, k, "name", wb_event_name(e));
        fx_set_int(o, k, "dur_ns", e->dur_ns);
        fx_set_str(o, k, "op", op_of(w->ops, w->nops, e->link));
    }
}

wb_status wb_prof_instances(const wb_prof *p, const char *range, wb_val *out) {
    memset(out, 0, sizeof *out);
    scan w = {0};
    wb_status st = WB_OK;
    int ok = first_pass(p, range, &w, &st);
    if (ok < 0) {
        free(w.s), free(w.ops), wb_keyindex_free(&w.ranges);
        return st; /* the spill file's read: the cursor set the message */
    }
    fx_out o = {.oom = !ok};
    out->type = WB_VAL_MAP;
    const char *what = range ? "range" : "step";
    if (!range && w.ns == 0 && !o.oom && wb_grow((void **)&w.s, &w.cap_s, 1, sizeof *w.s)) {
        w.s[w.ns++] = (span){.t0 = INT64_MIN, .t1 = INT64_MAX}; /* no steps: the whole trace */
        what = "trace";
    }
    fx_set_str(&o, out, "what", what);
    wb_sort(w.s, w.ns, sizeof *w.s, by_start);
    wb_sort(w.ops, w.nops, sizeof *w.ops, by_id);
    wb_val *list = fx_set_list(&o, out, "instances");
    for (size_t i = 0; i < w.ns && !o.oom; i++) {
        span *s = &w.s[i];
        uint64_t width = (uint64_t)s->t1 - (uint64_t)s->t0;
        int64_t d = width > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)width;
        if (width > w.maxdur) w.maxdur = width;
        s->inst = fx_add(&o, list, NULL);
        s->inst->type = WB_VAL_MAP;
        fx_set_int(&o, s->inst, "ts_ns", s->t0);
        fx_set_int(&o, s->inst, "dur_ns", d);
        fx_set_list(&o, s->inst, "kernels");
        fx_set_map(&o, s->inst, "ops");
    }
    for (size_t i = 0; i < w.ns && !o.oom; i++) /* the list has its last size: its elements stay put */
        w.s[i].inst = &list->c.v[i];
    if (!o.oom && w.ns) {
        wb_prof_cursor c;
        wb_prof_cursor_open(&c, p);
        for (const wb_event *e; !o.oom && (e = wb_prof_cursor_next(&c));)
            if (e->kind == WB_EV_KERNEL || e->kind == WB_EV_OP) place(&w, &o, e, c.index);
        wb_prof_cursor_close(&c);
        if ((st = c.status) != WB_OK) ok = -1;
        for (size_t i = 0; i < w.ns && !o.oom; i++)
            fx_set_int(&o, w.s[i].inst, "kernel_ns", w.s[i].kernel_ns);
    }
    /* the ranges' names, sorted: what an error about a missing range lists */
    char **names = w.ranges.n ? malloc(w.ranges.n * sizeof *names) : NULL;
    wb_val *seen = fx_set_list(&o, out, "ranges");
    if (w.ranges.n && !names) o.oom = 1;
    if (names) {
        memcpy(names, w.ranges.key, w.ranges.n * sizeof *names);
        wb_sort(names, w.ranges.n, sizeof *names, cmp_str);
        for (size_t i = 0; i < w.ranges.n; i++) {
            wb_val *v = fx_add(&o, seen, NULL);
            if ((v->s = strdup(names[i]))) v->type = WB_VAL_STR;
            else o.oom = 1;
        }
        free(names);
    }
    free(w.s), free(w.ops), wb_keyindex_free(&w.ranges);
    if (ok < 0 || o.oom) {
        wb_val_free(out);
        return ok < 0 ? st : wb_error(WB_ERR_MEMORY, "range instances: out of memory");
    }
    return WB_OK;
}
