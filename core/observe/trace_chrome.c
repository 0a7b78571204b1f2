/* trace_chrome.c: a session as Chrome-trace JSON (Perfetto, chrome://tracing), streamed to disk
 * chunk by chunk from the store (spilled chunks read back one at a time), gzip'ed when the path
 * ends in ".gz": host and device lanes, counter tracks for memory, and flow arrows from each op
 * to the kernels it launched. Nothing the size of the session is built in memory. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler_internal.h"
#include <wb/trace_schema.h>
#include "trace_out.h"
#include "wb_version.h"

/* JSON string body: quotes, backslashes and control bytes escaped; valid UTF-8 kept; any
 * other byte becomes U+FFFD, so hostile names still give valid JSON. */
static void json_string(wb_out *f, const char *s) {
    wb_out_char(f, '"');
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t plain = 0; /* the common case: printable ASCII, copied whole */
    while (u[plain] >= 0x20 && u[plain] < 0x80 && u[plain] != '"' && u[plain] != '\\')
        plain++;
    wb_out_write(f, (const char *)u, plain);
    u += plain;
    while (*u) {
        unsigned char c = *u;
        if (c == '"' || c == '\\') {
            wb_out_char(f, '\\'), wb_out_char(f, (char)c), u++;
        } else if (c < 0x20) {
            wb_out_printf(f, c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : "\\u%04x", c), u++;
        } else if (c < 0x80) {
            wb_out_char(f, (char)c), u++;
        } else {
            int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
            int ok = len > 0;
            for (int i = 1; ok && i < len; i++)
                ok = (u[i] & 0xC0) == 0x80;
            if (ok && len == 3 && c == 0xE0 && u[1] < 0xA0) ok = 0;  /* overlong */
            if (ok && len == 3 && c == 0xED && u[1] >= 0xA0) ok = 0; /* surrogates */
            if (ok && len == 4 && c == 0xF0 && u[1] < 0x90) ok = 0;
            if (ok && len == 4 && c == 0xF4 && u[1] >= 0x90) ok = 0;
            if (ok) {
                wb_out_write(f, (const char *)u, (size_t)len), u += len;
            } else {
                wb_out_str(f, "\\ufffd"), u++;
            }
        }
    }
    wb_out_char(f, '"');
}

/* The key of schema field `id` (wb/trace_schema.h), after a comma unless it opens the object:
 * every key of an event comes from the schema. */
static void key_out(wb_out *f, int id, int first) {
    wb_out_str(f, first ? "\"" : ", \"");
    wb_out_str(f, wb_trace_fields[id].key);
    wb_out_str(f, "\": ");
}

static void int_out(wb_out *f, int id, int64_t v) {
    key_out(f, id, 0);
    wb_out_int(f, v);
}

/* A metadata event: a process's or lane's name, or a process's place (sort_index). */
static void meta_out(wb_out *f, const char *what, int pid, int tid, int arg, const char *name, int64_t index) {
    wb_out_str(f, "{");
    key_out(f, WB_TF_PH, 1);
    json_string(f, "M");
    key_out(f, WB_TF_NAME, 0);
    json_string(f, what);
    int_out(f, WB_TF_PID, pid);
    if (tid >= 0) int_out(f, WB_TF_TID, tid);
    wb_out_str(f, ", \"args\": {");
    key_out(f, arg, 1);
    if (name) json_string(f, name);
    else wb_out_int(f, index);
    wb_out_str(f, "}}");
}

const char *wb_event_kind_name(int kind) {
    static const char *const names[] = {"op", "kernel", "runtime", "memory", "range", "step", "memcpy", "thread", "memset"};
    return kind >= 0 && kind <= WB_EV_MEMSET ? names[kind] : "?";
}

const char *wb_event_api_name(int api) {
    static const char *const names[] = {"unknown", "other", "launch", "occupancy", "sync", "graph_launch"};
    return api >= 0 && api <= WB_API_GRAPH_LAUNCH ? names[api] : "unknown";
}

static void ints_json(wb_out *f, const int64_t *v, int n) {
    wb_out_char(f, '[');
    for (int i = 0; i < n; i++) {
        if (i) wb_out_str(f, ", ");
        wb_out_int(f, v[i]);
    }
    wb_out_char(f, ']');
}

static void dims_json(wb_out *f, int id, const int64_t *v, int n) {
    key_out(f, id, 0);
    ints_json(f, v, n);
}

static void shapes_json(wb_out *f, const wb_prof *p, const wb_event *e) {
    wb_out_char(f, '[');
    for (int i = 0; i < e->ninputs; i++) {
        if (i) wb_out_str(f, ", ");
        if (wb_event_ndim(e, i) < 0) {
            wb_out_str(f, "null");
            continue;
        }
        ints_json(f, wb_prof_shape(p, e, i), wb_event_ndim(e, i));
    }
    wb_out_char(f, ']');
}

/* , "key": "value" */
static void field_str(wb_out *f, int id, const char *v) {
    key_out(f, id, 0);
    json_string(f, v);
}

/* JSON has no NaN or Infinity: a count that is not finite (a kernel descriptor's flops or bytes
 * from a plugin, say) is written as null, and the trace's otherData says how many were. */
static int finite_count(double v) { return isfinite(v); }

static void count_json(wb_out *f, int id, double v) {
    key_out(f, id, 0);
    if (!finite_count(v)) wb_out_str(f, "null");
    else if (fabs(v) < 9e15 && v == floor(v)) wb_out_int(f, (int64_t)v);
    else wb_out_printf(f, "%.0f", v);
}

static uint64_t non_finite_counts(const wb_event *e) {
    if (e->kind == WB_EV_MEMORY || e->kind == WB_EV_RANGE || e->kind == WB_EV_STEP) return 0; /* no counts */
    if (e->kind == WB_EV_THREAD) return !finite_count(e->work);
    if (e->flops > 0 || e->bytes > 0 || e->flops != e->flops || e->bytes != e->bytes)
        return (uint64_t)(!finite_count(e->flops) + !finite_count(e->bytes));
    return 0;
}

wb_status wb_prof_export_chrome(const wb_prof *p, const char *path) {
    return wb_prof_export_chrome_with(p, path, NULL, NULL, NULL, NULL);
}

/* The trace's header: what the session kept and dropped, and the lanes. */
static void write_header(wb_out *f, const wb_prof *p, uint64_t non_finite) {
    char note[1024];
    wb_prof_drop_note(p, note, sizeof note);
    wb_prof_store_stats st;
    wb_prof_store_stats_get(p, &st);
    wb_out_printf(f, "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"producer\": \"workbench\", \"dropped_events\": %llu, "
                  "\"non_finite_values_written_as_null\": %llu, \"events\": %zu, \"max_memory\": %lld, "
                  "\"memory_policy\": \"%s\", \"spilled_bytes\": %lld, \"dropped\": ",
                  (unsigned long long)wb_prof_dropped(p), (unsigned long long)non_finite, wb_prof_count(p),
                  (long long)st.max_memory, wb_prof_policy_name(st.policy), (long long)st.spill_bytes);
    json_string(f, note);
    /* the build that recorded it: diff lists a different build among the fingerprint differences */
    wb_out_str(f, ", \"build\": {\"version\": ");
    json_string(f, WB_VERSION);
    wb_out_str(f, ", \"commit\": ");
    json_string(f, WB_GIT_COMMIT);
    wb_out_str(f, "}}, \"traceEvents\": [\n");
    meta_out(f, "process_name", 0, -1, WB_TF_META_NAME, "host", 0);
    wb_out_str(f, ",\n");
    meta_out(f, "thread_name", 0, 0, WB_TF_META_NAME, "main thread", 0);
    wb_out_str(f, ",\n");
    meta_out(f, "process_name", 1, -1, WB_TF_META_NAME, "cpu:0 (device)", 0);
    wb_out_str(f, ",\n");
    meta_out(f, "thread_name", 1, 0, WB_TF_META_NAME, "cpu:0 stream 0", 0);
    wb_out_str(f, ",\n");
    meta_out(f, "process_sort_index", 0, -1, WB_TF_SORT_INDEX, NULL, 0);
    wb_out_str(f, ",\n");
    meta_out(f, "process_sort_index", 1, -1, WB_TF_SORT_INDEX, NULL, 1);
    if (p->device) {
        const wb_cuda_info *info = p->device->info ? p->device->info() : NULL;
        char name[320];
        snprintf(name, sizeof name, "%s:0 (%s)", p->device->name, info ? info->name : "device");
        wb_out_str(f, ",\n");
        meta_out(f, "process_name", 2, -1, WB_TF_META_NAME, name, 0);
        wb_out_str(f, ",\n");
        meta_out(f, "thread_name", 2, 0, WB_TF_META_NAME, wb_prof_lane_name(p, WB_LANE_CUDA), 0);
        wb_out_str(f, ",\n");
        meta_out(f, "process_sort_index", 2, -1, WB_TF_SORT_INDEX, NULL, 2);
    }
}

/* The slice's opening: {"ph": "X", "cat": ..., "name": ..., "pid": ..., "tid": ..., "ts": ..., "dur": ..., "args": { */
static void slice_out(wb_out *f, const char *cat, const char *name, int step, int64_t pid, int64_t tid, int64_t ts,
                      int64_t dur) {
    wb_out_str(f, "{");
    key_out(f, WB_TF_PH, 1);
    json_string(f, "X");
    key_out(f, WB_TF_CAT, 0);
    json_string(f, cat);
    key_out(f, WB_TF_NAME, 0);
    if (step) { /* a step's name: ProfilerStep#N */
        wb_out_str(f, "\"ProfilerStep#");
        wb_out_int(f, step - 1);
        wb_out_char(f, '"');
    } else {
        json_string(f, name);
    }
    int_out(f, WB_TF_PID, pid);
    int_out(f, WB_TF_TID, tid);
    key_out(f, WB_TF_TS, 0);
    wb_out_us(f, ts);
    key_out(f, WB_TF_DUR, 0);
    wb_out_us(f, dur);
    wb_out_str(f, ", \"args\": {");
}

/* A memory event: the allocation or free as the host ran it (a slice as long as the call: the
 * gaps rule's allocation share reads it back), then a counter track of live bytes per device
 * after it. */
static void memory_out(wb_out *f, const wb_event *e) {
    const char *device = wb_device_name((wb_device)e->device);
    slice_out(f, wb_event_kind_name(WB_EV_MEMORY), wb_event_name(e), 0, 0, 0, e->ts_ns, e->dur_ns);
    key_out(f, WB_TF_BYTES, 1);
    wb_out_int(f, (int64_t)e->bytes);
    int_out(f, WB_TF_ALLOCATED, (int64_t)e->live_bytes);
    field_str(f, WB_TF_DEVICE, device);
    if (e->link) int_out(f, WB_TF_PARENT, e->link);
    wb_out_str(f, "}},\n{");
    key_out(f, WB_TF_PH, 1);
    json_string(f, "C");
    key_out(f, WB_TF_NAME, 0);
    wb_out_printf(f, "\"memory %s\"", device);
    int_out(f, WB_TF_PID, 0);
    key_out(f, WB_TF_TS, 0);
    wb_out_us(f, e->ts_ns + e->dur_ns);
    wb_out_str(f, ", \"args\": {");
    key_out(f, WB_TF_ALLOCATED, 1);
    wb_out_int(f, (int64_t)e->live_bytes);
    wb_out_str(f, "}}");
}

/* A launch arrow's end: ph s (on the host, inside the op) or f (at the kernel). */
static void arrow_out(wb_out *f, const char *ph, int64_t id, int64_t pid, int64_t ts) {
    wb_out_str(f, ",\n{");
    key_out(f, WB_TF_PH, 1);
    json_string(f, ph);
    if (ph[0] == 'f') field_str(f, WB_TF_BP, "e");
    field_str(f, WB_TF_CAT, "launch");
    field_str(f, WB_TF_NAME, "launch");
    int_out(f, WB_TF_FLOW_ID, id);
    int_out(f, WB_TF_PID, pid);
    int_out(f, WB_TF_TID, 0);
    key_out(f, WB_TF_TS, 0);
    wb_out_us(f, ts);
    wb_out_str(f, "}");
}

/* A kernel's fields: the kind's, so a reader of the trace never parses the name back. */
static void kernel_fields_out(wb_out *f, const wb_event *e) {
    wb_kernel_fields k;
    int_out(f, WB_TF_THREADS, e->threads);
    field_str(f, WB_TF_OP, e->kernel->op);
    if (e->kernel->ops) field_str(f, WB_TF_OPS, e->kernel->ops);
    if (wb_kernel_kind_fields(e->kernel, &k)) {
        field_str(f, WB_TF_ISA, k.isa);
        field_str(f, WB_TF_TILE, k.tile);
        field_str(f, WB_TF_LAYOUT, k.layout);
        field_str(f, WB_TF_EPILOGUE, k.epilogue);
    } else {
        char epi[WB_EPILOGUE_MAX];
        field_str(f, WB_TF_EPILOGUE, wb_kernel_kind_epilogue(e->kernel, epi, sizeof epi));
    }
}

/* An op's inputs (record_shapes), data flow and a view's geometry. */
static void op_fields_out(wb_out *f, const wb_prof *p, const wb_event *e) {
    if (e->nflow) {
        int n;
        const int64_t *ids = wb_prof_flow(p, e, &n);
        dims_json(f, WB_TF_FLOW, ids, n);
    }
    const int64_t *in_stride, *out_shape, *out_stride;
    int out_ndim;
    if (wb_prof_view_geometry(p, e, &in_stride, &out_ndim, &out_shape, &out_stride)) {
        dims_json(f, WB_TF_IN_STRIDE, in_stride, wb_event_ndim(e, 0) > 0 ? wb_event_ndim(e, 0) : 0);
        dims_json(f, WB_TF_OUT_SHAPE, out_shape, out_ndim);
        dims_json(f, WB_TF_OUT_STRIDE, out_stride, out_ndim);
    }
}

/* One event (and a kernel's flow arrow). */
static void write_event(wb_out *f, const wb_prof *p, const wb_event *e, uint64_t *named_threads, const wb_idset *linked,
                        const int64_t *op_ts) {
    /* worker threads are lanes (tids 1..) of the cpu device's process */
    int worker = e->lane >= WB_LANE_CPU_THREAD0 ? e->lane - WB_LANE_CPU_THREAD0 : -1;
    int pid = worker >= 0 ? WB_LANE_CPU_DEVICE : e->lane, tid = worker + 1;
    if (worker >= 0 && !(*named_threads >> worker & 1)) {
        *named_threads |= 1ull << worker;
        wb_out_str(f, ",\n");
        meta_out(f, "thread_name", pid, tid, WB_TF_META_NAME, wb_prof_lane_name(p, e->lane), 0);
    }
    wb_out_str(f, ",\n");
    if (e->kind == WB_EV_MEMORY) return memory_out(f, e);
    slice_out(f, wb_event_kind_name(e->kind), wb_event_name(e), e->kind == WB_EV_STEP ? (int)e->id + 1 : 0, pid, tid,
              e->ts_ns, e->dur_ns);
    key_out(f, WB_TF_ID, 1);
    wb_out_int(f, e->id);
    /* an op's own id; a kernel's or a copy's launching op */
    if (e->kind == WB_EV_OP || e->kind == WB_EV_KERNEL || e->kind == WB_EV_MEMCPY || e->kind == WB_EV_MEMSET)
        int_out(f, WB_TF_CORRELATION, e->kind == WB_EV_OP ? e->id : e->link);
    if ((e->kind == WB_EV_OP || e->kind == WB_EV_RUNTIME) && e->link) int_out(f, WB_TF_PARENT, e->link);
    if (e->kind == WB_EV_THREAD) {
        wb_kernel_fields k;
        int_out(f, WB_TF_KERNEL, e->link);
        int_out(f, WB_TF_THREAD, e->threads);
        count_json(f, WB_TF_WORK, e->work);
        field_str(f, WB_TF_UNIT, wb_kernel_kind_fields(e->kernel, &k) ? "tiles" : "elements");
    } else if (e->kind != WB_EV_RANGE && e->kind != WB_EV_STEP &&
               (e->flops > 0 || e->bytes > 0 || e->flops != e->flops || e->bytes != e->bytes)) {
        count_json(f, WB_TF_FLOPS, e->flops);
        count_json(f, WB_TF_BYTES, (double)e->bytes);
    }
    if (e->kind == WB_EV_RUNTIME && e->cbid) int_out(f, WB_TF_CBID, e->cbid);
    if (e->kind == WB_EV_RUNTIME && e->api) field_str(f, WB_TF_API, wb_event_api_name(e->api));
    if (e->kind == WB_EV_KERNEL) kernel_fields_out(f, e);
    if (e->kind == WB_EV_OP) op_fields_out(f, p, e);
    if ((e->kind == WB_EV_RANGE || e->kind == WB_EV_STEP) && e->run_delay_ns >= 0) {
        key_out(f, WB_TF_RUN_DELAY, 0);
        wb_out_printf(f, "%.0f", e->run_delay_ns);
    }
    if (e->ninputs) {
        key_out(f, WB_TF_INPUT_SHAPES, 0);
        shapes_json(f, p, e);
        key_out(f, WB_TF_INPUT_DTYPES, 0);
        wb_out_char(f, '[');
        for (int i = 0; i < e->ninputs; i++) {
            if (i) wb_out_str(f, ", ");
            json_string(f, wb_event_ndim(e, i) < 0 ? "" : wb_dtype_name((wb_dtype)wb_event_dtype(e, i)));
        }
        wb_out_char(f, ']');
    }
    if (e->src != WB_EVENT_NONE) field_str(f, WB_TF_SRC, wb_prof_src(p, e));
    if (e->failed) {
        key_out(f, WB_TF_FAILED, 0);
        wb_out_str(f, "true");
    }
    wb_out_str(f, "}}");
    if (e->kind == WB_EV_KERNEL && e->link) { /* flow arrow: the launching op -> this kernel */
        /* From inside the launching op (a cuda kernel may start after its op returned; a
         * cpu kernel runs inside it), to the kernel's start. */
        int64_t from = e->ts_ns;
        int64_t at = op_ts ? wb_idset_index(linked, e->link) : -1;
        if (at >= 0 && op_ts[at] != INT64_MIN) from = op_ts[at] + 1;
        if (from > e->ts_ns) from = e->ts_ns;
        arrow_out(f, "s", e->id, 0, from);
        arrow_out(f, "f", e->id, e->lane, e->ts_ns);
    }
}

/* Reads the session once: fails with the cursor's status. */
#define FOR_EACH_EVENT(p, c, e)                                                                                        \
    for (wb_prof_cursor_open(&(c), (p)), (e) = wb_prof_cursor_next(&(c)); (e); (e) = wb_prof_cursor_next(&(c)))

wb_status wb_prof_export_chrome_with(const wb_prof *p, const char *path, const char *extra_events,
                                     const char *extra_members, uint64_t *events, uint64_t *bytes) {
    /* Pass 1: the ops that kernels link to (the flow arrows start inside them) and the counts
     * the header needs. Pass 2: those ops' start times. Pass 3: the trace. */
    wb_prof_cursor c;
    const wb_event *e;
    wb_idset linked;
    uint64_t non_finite = 0;
    int have_set = wb_idset_init(&linked, p->next_id);
    FOR_EACH_EVENT(p, c, e) {
        non_finite += non_finite_counts(e);
        if (have_set && e->kind == WB_EV_KERNEL && e->link) wb_idset_add(&linked, e->link);
    }
    wb_prof_cursor_close(&c);
    if (c.status != WB_OK) return wb_idset_free(&linked), c.status;
    int64_t *op_ts = NULL;
    if (have_set && wb_idset_finish(&linked) > 0 && (op_ts = malloc(linked.count * sizeof *op_ts))) {
        for (size_t i = 0; i < linked.count; i++)
            op_ts[i] = INT64_MIN;
        FOR_EACH_EVENT(p, c, e) {
            int64_t at = (e->kind == WB_EV_OP || e->kind == WB_EV_RUNTIME) ? wb_idset_index(&linked, e->id) : -1;
            if (at >= 0) op_ts[at] = e->ts_ns;
        }
        wb_prof_cursor_close(&c);
        if (c.status != WB_OK) return wb_idset_free(&linked), free(op_ts), c.status;
    }
    wb_out *f = malloc(sizeof *f);
    if (!f || wb_out_open(f, path, "export_chrome_trace") != WB_OK) {
        wb_status st = f ? WB_ERR_ARGUMENT : wb_error(WB_ERR_MEMORY, "export_chrome_trace: out of memory");
        free(f), free(op_ts), wb_idset_free(&linked);
        return st;
    }
    write_header(f, p, non_finite);
    uint64_t named_threads = 0, n = 0; /* worker lanes whose thread_name is written */
    FOR_EACH_EVENT(p, c, e) {
        write_event(f, p, e, &named_threads, &linked, op_ts);
        n++;
    }
    wb_prof_cursor_close(&c);
    free(op_ts), wb_idset_free(&linked);
    if (c.status != WB_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", wb_error_message());
        wb_out_abort(f); /* a partial trace is not left behind */
        free(f);
        return wb_error(WB_ERR_ARGUMENT, "export_chrome_trace: %s", why);
    }
    if (extra_events && *extra_events) {
        wb_out_str(f, ",\n");
        wb_out_str(f, extra_events);
    }
    wb_out_str(f, "\n]");
    if (extra_members && *extra_members) {
        wb_out_str(f, ", ");
        wb_out_str(f, extra_members);
    }
    wb_out_str(f, "}\n");
    wb_status st = wb_out_close(f, "export_chrome_trace");
    if (events) *events = n;
    if (bytes) *bytes = f->bytes;
    free(f);
    return st;
}
