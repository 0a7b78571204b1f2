/* profiler_aggregate.c: key_averages over the store's records, in C: one row per op / range /
 * runtime name (and input shapes or call site when asked) and per kernel or copy name, with
 * self and total times on the host and the device. Three passes over the chunks (spilled ones
 * read back); memory is the rows plus 8 bytes per op, never a table per event. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyindex.h"
#include "profiler_internal.h"

/* ---- rows by key ---------------------------------------------------------------------------- */

typedef struct rowset {
    wb_keyindex keys; /* "kind\x1fname\x1fshapes\x1fsrc" -> row */
    wb_prof_row *row; /* row[0 .. nrow) */
    size_t nrow, cap;
    /* (kind, name pointer) -> row, when rows are keyed by name alone */
    struct fast {
        const void *ptr;
        int kind;
        uint32_t row;
    } *fast;
    size_t nfast;
} rowset;

static int rowset_init(rowset *r) {
    memset(r, 0, sizeof *r);
    r->nfast = 4096;
    r->fast = calloc(r->nfast, sizeof *r->fast);
    return r->fast != NULL;
}

/* The row for key (created with name, kind, shapes, src); -1 when out of memory. */
static int64_t rowset_get(rowset *r, const char *key, const char *name, int kind, const char *shapes, const char *src) {
    int fresh;
    int64_t id = wb_keyindex_get(&r->keys, key, &fresh);
    if (id < 0 || !fresh) return id;
    if (!wb_grow((void **)&r->row, &r->cap, r->nrow + 1, sizeof *r->row)) return -1;
    char *sh = shapes ? strdup(shapes) : NULL;
    if (shapes && !sh) return -1;
    r->row[r->nrow++] = (wb_prof_row){.name = name, .kind = kind, .input_shapes = sh, .src = src};
    return id;
}

/* Frees the keys, and the rows unless they were handed over (row NULL). */
static void rowset_free(rowset *r) {
    if (r->row) {
        for (size_t i = 0; i < r->nrow; i++)
            free(r->row[i].input_shapes);
        free(r->row);
    }
    wb_keyindex_free(&r->keys);
    free(r->fast);
}

/* "[[2, 3], None]": the Lua table's spelling of an op's input shapes. */
static void shapes_string(const wb_prof *p, const wb_event *e, char *buf, size_t len) {
    size_t n = 0;
    buf[0] = '\0';
    if (!e->ninputs) return;
#define PUT(...) (n < len ? (n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__)) : 0)
    PUT("[");
    for (int i = 0; i < e->ninputs; i++) {
        if (i) PUT(", ");
        int nd = wb_event_ndim(e, i);
        if (nd < 0) {
            PUT("None");
            continue;
        }
        const int64_t *d = wb_prof_shape(p, e, i);
        PUT("[");
        for (int k = 0; k < nd; k++)
            PUT(k ? ", %lld" : "%lld", (long long)d[k]);
        PUT("]");
    }
    PUT("]");
#undef PUT
}

static int on_device(int kind) { return kind == WB_EV_KERNEL || kind == WB_EV_MEMCPY || kind == WB_EV_MEMSET; }

/* The row of a host event (op, range, runtime) or a device one; -1 when out of memory. */
static int64_t row_of(rowset *r, const wb_prof *p, const wb_event *e, int by_shape, int by_stack) {
    const char *src = by_stack && !on_device(e->kind) ? wb_prof_src(p, e) : NULL;
    int grouped = (by_shape && e->kind == WB_EV_OP) || src;
    const void *ptr = on_device(e->kind) ? (const void *)e->kernel : (const void *)e->name;
    if (e->kind == WB_EV_MEMCPY || e->kind == WB_EV_MEMSET) ptr = e->name;
    size_t h = (((uintptr_t)ptr >> 4) * 31 + (size_t)e->kind) & (r->nfast - 1);
    if (!grouped && r->fast[h].ptr == ptr && r->fast[h].kind == e->kind) return r->fast[h].row;
    const char *name = wb_event_name(e);
    char shapes[1024], key[2048];
    if (by_shape && e->kind == WB_EV_OP) shapes_string(p, e, shapes, sizeof shapes);
    snprintf(key, sizeof key, "%d\x1f%s\x1f%s\x1f%s", e->kind, name, by_shape && e->kind == WB_EV_OP ? shapes : "",
             src ? src : "");
    int64_t row = rowset_get(r, key, name, e->kind, by_shape && e->kind == WB_EV_OP ? shapes : NULL, src);
    if (row >= 0 && !grouped) r->fast[h] = (struct fast){ptr, e->kind, (uint32_t)row};
    return row;
}

/* ---- ranges: their self time leaves out the top-level ops and runtime calls inside them ---- */

typedef struct span {
    int64_t start, end;
    uint32_t row;
    int32_t parent; /* the enclosing range (ranges nest: push/pop), -1 */
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end;
}

static void spans_nest(span *s, size_t n) {
    if (!n) return; /* s is NULL then */
    qsort(s, n, sizeof *s, span_cmp);
    int32_t top = -1;
    for (size_t i = 0; i < n; i++) {
        while (top >= 0 && s[top].end < s[i].start)
            top = s[top].parent;
        s[i].parent = top;
        top = (int32_t)i;
    }
}

/* Every range holding [ts, ts + dur] whole: the innermost that starts before ts, and those
 * around it. */
static void spans_credit(const span *s, size_t n, const wb_event *e, wb_prof_row *rows) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s[mid].start <= e->ts_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (int32_t j = (int32_t)lo - 1; j >= 0; j = s[j].parent)
        if (s[j].end >= e->ts_ns + e->dur_ns) rows[s[j].row].self_cpu_ns -= e->dur_ns;
}

/* ---- the passes ----------------------------------------------------------------------------- */

#define FOR_EACH_EVENT(p, c, e)                                                                                        \
    for (wb_prof_cursor_open(&(c), (p)), (e) = wb_prof_cursor_next(&(c)); (e); (e) = wb_prof_cursor_next(&(c)))

wb_status wb_prof_aggregate(const wb_prof *p, int by_shape, int by_stack, wb_prof_rows *out) {
    out->row = NULL, out->n = 0;
    rowset host, dev;
    wb_idset ops;
    uint32_t *op_row = NULL, *op_parent = NULL;
    span *spans = NULL;
    size_t nspans = 0, cap_spans = 0;
    wb_status st = WB_OK;
    wb_prof_cursor c;
    const wb_event *e;
    int ok = rowset_init(&host) & rowset_init(&dev) & wb_idset_init(&ops, p->next_id);
    if (!ok) goto oom;
    /* 1: which ids are ops */
    FOR_EACH_EVENT(p, c, e) if (e->kind == WB_EV_OP) wb_idset_add(&ops, e->id);
    wb_prof_cursor_close(&c);
    if ((st = c.status) != WB_OK) goto done;
    size_t nops = wb_idset_finish(&ops);
    op_row = malloc((nops ? nops : 1) * sizeof *op_row);
    op_parent = malloc((nops ? nops : 1) * sizeof *op_parent);
    if (!op_row || !op_parent) goto oom;
    /* 2: rows and what each event adds to its own row */
    uint32_t spread_kernel = 0;
    int64_t spread_row = -1, fastest = 0, slowest = 0;
    FOR_EACH_EVENT(p, c, e) {
        if (e->kind == WB_EV_THREAD) { /* a worker's share of the kernel just before it */
            if (e->link == spread_kernel && spread_row >= 0) {
                if (slowest < 0 || e->dur_ns < fastest) fastest = e->dur_ns;
                if (slowest < 0 || e->dur_ns > slowest) slowest = e->dur_ns;
            }
            continue;
        }
        if (spread_row >= 0 && slowest >= 0) {
            dev.row[spread_row].spread_ns += slowest - fastest;
            dev.row[spread_row].spread_launches++;
        }
        spread_row = -1;
        if (e->kind == WB_EV_OP || e->kind == WB_EV_RANGE || e->kind == WB_EV_RUNTIME) {
            int64_t r = row_of(&host, p, e, by_shape, by_stack);
            if (r < 0) goto oom;
            wb_prof_row *row = &host.row[r];
            row->calls++;
            row->cpu_total_ns += e->dur_ns;
            row->self_cpu_ns += e->dur_ns;
            if (e->kind == WB_EV_OP) {
                int64_t at = wb_idset_index(&ops, e->id);
                if (at >= 0) op_row[at] = (uint32_t)r, op_parent[at] = e->link;
                row->flops += e->flops;
                row->bytes += e->bytes;
            }
            if (e->kind == WB_EV_RANGE) {
                if (nspans == cap_spans) {
                    size_t cap = cap_spans ? cap_spans * 2 : 64;
                    span *q = realloc(spans, cap * sizeof *q);
                    if (!q) goto oom;
                    spans = q, cap_spans = cap;
                }
                spans[nspans++] = (span){e->ts_ns, e->ts_ns + e->dur_ns, (uint32_t)r, -1};
            }
        } else if (on_device(e->kind)) {
            int64_t r = row_of(&dev, p, e, 0, 0);
            if (r < 0) goto oom;
            wb_prof_row *row = &dev.row[r];
            row->calls++;
            row->kernels += e->kind == WB_EV_KERNEL;
            row->self_device_ns += e->dur_ns;
            row->device_total_ns += e->dur_ns;
            row->flops += e->flops;
            row->bytes += e->bytes;
            if (e->kind == WB_EV_KERNEL) spread_row = r, spread_kernel = e->id, slowest = -1;
        }
    }
    if (spread_row >= 0 && slowest >= 0) {
        dev.row[spread_row].spread_ns += slowest - fastest;
        dev.row[spread_row].spread_launches++;
    }
    wb_prof_cursor_close(&c);
    if ((st = c.status) != WB_OK) goto done;
    spans_nest(spans, nspans);
    /* 3: what an event takes from or gives to the rows of the ops around it */
    FOR_EACH_EVENT(p, c, e) {
        if (e->kind == WB_EV_OP && e->link) { /* a child's time is not its parent's self time */
            int64_t at = wb_idset_index(&ops, e->link);
            if (at >= 0) host.row[op_row[at]].self_cpu_ns -= e->dur_ns;
        }
        if ((e->kind == WB_EV_OP || e->kind == WB_EV_RUNTIME) && !e->link && nspans)
            spans_credit(spans, nspans, e, host.row);
        if (on_device(e->kind)) { /* self for the launching op, total for it and every op above */
            uint32_t id = e->link;
            int64_t at = wb_idset_index(&ops, id);
            if (at >= 0) host.row[op_row[at]].self_device_ns += e->dur_ns;
            while (at >= 0) {
                wb_prof_row *row = &host.row[op_row[at]];
                row->device_total_ns += e->dur_ns;
                row->kernels += e->kind == WB_EV_KERNEL;
                uint32_t up = op_parent[at];
                if (!up || up >= id) break; /* a parent opens (and takes its id) before its children */
                id = up;
                at = wb_idset_index(&ops, id);
            }
        }
    }
    wb_prof_cursor_close(&c);
    if ((st = c.status) != WB_OK) goto done;
    /* host rows first, then device rows */
    out->row = malloc((host.nrow + dev.nrow + 1) * sizeof *out->row);
    if (!out->row) goto oom;
    if (host.nrow) memcpy(out->row, host.row, host.nrow * sizeof *out->row); /* (row is NULL when there are none) */
    if (dev.nrow) memcpy(out->row + host.nrow, dev.row, dev.nrow * sizeof *out->row);
    out->n = host.nrow + dev.nrow;
    free(host.row), free(dev.row);
    host.row = dev.row = NULL; /* handed over */
    goto done;
oom:
    st = wb_error(WB_ERR_MEMORY, "profiler: out of memory aggregating the events");
done:
    rowset_free(&host), rowset_free(&dev);
    wb_idset_free(&ops);
    free(op_row), free(op_parent), free(spans);
    return st;
}

void wb_prof_rows_free(wb_prof_rows *r) {
    for (size_t i = 0; r->row && i < r->n; i++)
        free(r->row[i].input_shapes);
    free(r->row);
    r->row = NULL, r->n = 0;
}
