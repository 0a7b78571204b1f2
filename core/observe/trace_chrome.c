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

static void dims_json(wb_out *f, const char *key, const int64_t *v, int n) {
    wb_out_str(f, ", \"");
    wb_out_str(f, key);
    wb_out_str(f, "\": ");
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

/* , "key": "value" (both plain: names of fields the workbench writes) */
static void field_str(wb_out *f, const char *key, const char *v) {
    wb_out_str(f, ", \"");
    wb_out_str(f, key);
    wb_out_str(f, "\": ");
    json_string(f, v);
}

/* JSON has no NaN or Infinity: a count that is not finite (a kernel descriptor's flops or bytes
 * from a plugin, say) is written as null, and the trace's otherData says how many were. */
static int finite_count(double v) { return isfinite(v); }

static void count_json(wb_out *f, const char *key, double v) {
    if (!finite_count(v)) {
        wb_out_printf(f, ", \"%s\": null", key);
    } else if (fabs(v) < 9e15 && v == floor(v)) {
        wb_out_str(f, ", \"");
        wb_out_str(f, key);
        wb_out_str(f, "\": ");
        wb_out_int(f, (int64_t)v);
    } else {
        wb_out_printf(f, ", \"%s\": %.0f", key, v);
    }
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
    wb_out_str(f, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"args\": {\"name\": \"host\"}},\n"
                  "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": \"main thread\"}},\n"
                  "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": \"cpu:0 (device)\"}},\n"
                  "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 0, \"args\": {\"name\": \"cpu:0 stream "
                  "0\"}},\n"
                  "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 0, \"args\": {\"sort_index\": 0}},\n"
                  "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 1, \"args\": {\"sort_index\": 1}}");
    if (p->device) {
        const wb_cuda_info *info = p->device->info ? p->device->info() : NULL;
        wb_out_printf(f,
                      ",\n{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 2, \"args\": {\"name\": \"%s:0 (%s)\"}},\n"
                      "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 2, \"tid\": 0, \"args\": {\"name\": \"%s\"}},\n"
                      "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 2, \"args\": {\"sort_index\": 2}}",
                      p->device->name, info ? info->name : "device", wb_prof_lane_name(p, WB_LANE_CUDA));
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
        wb_out_printf(f, ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                      pid, tid, wb_prof_lane_name(p, e->lane));
    }
    wb_out_str(f, ",\n");
    if (e->kind == WB_EV_MEMORY) {
        /* the allocation or free as the host ran it (a slice as long as the call: the gaps rule's
         * allocation share reads it back), then a counter track of live bytes per device after it */
        wb_out_str(f, "{\"ph\": \"X\", \"cat\": \"memory\", \"name\": ");
        json_string(f, wb_event_name(e));
        wb_out_str(f, ", \"pid\": 0, \"tid\": 0, \"ts\": ");
        wb_out_us(f, e->ts_ns);
        wb_out_str(f, ", \"dur\": ");
        wb_out_us(f, e->dur_ns);
        wb_out_str(f, ", \"args\": {\"bytes\": ");
        wb_out_int(f, (int64_t)e->bytes);
        wb_out_str(f, ", \"allocated_bytes\": ");
        wb_out_int(f, (int64_t)e->live_bytes);
        wb_out_str(f, ", \"device\": ");
        json_string(f, wb_device_name((wb_device)e->device));
        if (e->link) {
            wb_out_str(f, ", \"parent\": ");
            wb_out_int(f, e->link);
        }
        wb_out_str(f, "}},\n");
        wb_out_printf(f, "{\"ph\": \"C\", \"name\": \"memory %s\", \"pid\": 0, \"ts\": ",
                      wb_device_name((wb_device)e->device));
        wb_out_us(f, e->ts_ns + e->dur_ns);
        wb_out_str(f, ", \"args\": {\"allocated_bytes\": ");
        wb_out_int(f, (int64_t)e->live_bytes);
        wb_out_str(f, "}}");
        return;
    }
    wb_out_str(f, "{\"ph\": \"X\", \"cat\": ");
    json_string(f, wb_event_kind_name(e->kind));
    wb_out_str(f, ", \"name\": ");
    if (e->kind == WB_EV_STEP) {
        wb_out_str(f, "\"ProfilerStep#");
        wb_out_int(f, e->id);
        wb_out_char(f, '"');
    } else {
        json_string(f, wb_event_name(e));
    }
    wb_out_str(f, ", \"pid\": ");
    wb_out_int(f, pid);
    wb_out_str(f, ", \"tid\": ");
    wb_out_int(f, tid);
    wb_out_str(f, ", \"ts\": ");
    wb_out_us(f, e->ts_ns);
    wb_out_str(f, ", \"dur\": ");
    wb_out_us(f, e->dur_ns);
    wb_out_str(f, ", \"args\": {\"id\": ");
    wb_out_int(f, e->id);
    /* an op's own id; a kernel's or a copy's launching op */
    if (e->kind == WB_EV_OP || e->kind == WB_EV_KERNEL || e->kind == WB_EV_MEMCPY || e->kind == WB_EV_MEMSET) {
        wb_out_str(f, ", \"correlation\": ");
        wb_out_int(f, e->kind == WB_EV_OP ? e->id : e->link);
    }
    if ((e->kind == WB_EV_OP || e->kind == WB_EV_RUNTIME) && e->link) {
        wb_out_str(f, ", \"parent\": ");
        wb_out_int(f, e->link);
    }
    if (e->kind == WB_EV_THREAD) {
        wb_kernel_fields k;
        wb_out_printf(f, ", \"kernel\": %llu, \"thread\": %d", (unsigned long long)e->link, e->threads);
        count_json(f, "work", e->work);
        wb_out_printf(f, ", \"unit\": \"%s\"", wb_kernel_kind_fields(e->kernel, &k) ? "tiles" : "elements");
    } else if (e->kind != WB_EV_RANGE && e->kind != WB_EV_STEP &&
               (e->flops > 0 || e->bytes > 0 || e->flops != e->flops || e->bytes != e->bytes)) {
        count_json(f, "flops", e->flops);
        count_json(f, "bytes", (double)e->bytes);
    }
    if (e->kind == WB_EV_RUNTIME && e->cbid) wb_out_printf(f, ", \"cbid\": %d", e->cbid);
    if (e->kind == WB_EV_RUNTIME && e->api) wb_out_printf(f, ", \"api\": \"%s\"", wb_event_api_name(e->api));
    if (e->kind == WB_EV_KERNEL) {
        wb_kernel_fields k;
        wb_out_str(f, ", \"threads\": ");
        wb_out_int(f, e->threads);
        /* the kind's fields, so a reader of the trace never parses the name back */
        wb_out_str(f, ", \"op\": ");
        json_string(f, e->kernel->op);
        if (e->kernel->ops) {
            wb_out_str(f, ", \"ops\": ");
            json_string(f, e->kernel->ops);
        }
        if (wb_kernel_kind_fields(e->kernel, &k)) {
            field_str(f, "isa", k.isa);
            field_str(f, "tile", k.tile);
            field_str(f, "layout", k.layout);
            field_str(f, "epilogue", k.epilogue);
        } else {
            char epi[WB_EPILOGUE_MAX];
            field_str(f, "epilogue", wb_kernel_kind_epilogue(e->kernel, epi, sizeof epi));
        }
    }
    if (e->kind == WB_EV_OP && e->nflow) {
        int n;
        const int64_t *ids = wb_prof_flow(p, e, &n);
        wb_out_str(f, ", \"flow\": ");
        ints_json(f, ids, n);
    }
    const int64_t *in_stride, *out_shape, *out_stride;
    int out_ndim;
    if (e->kind == WB_EV_OP && wb_prof_view_geometry(p, e, &in_stride, &out_ndim, &out_shape, &out_stride)) {
        dims_json(f, "in_stride", in_stride, wb_event_ndim(e, 0) > 0 ? wb_event_ndim(e, 0) : 0);
        dims_json(f, "out_shape", out_shape, out_ndim);
        dims_json(f, "out_stride", out_stride, out_ndim);
    }
    if ((e->kind == WB_EV_RANGE || e->kind == WB_EV_STEP) && e->run_delay_ns >= 0)
        wb_out_printf(f, ", \"run_delay_ns\": %.0f", e->run_delay_ns);
    if (e->ninputs) {
        wb_out_str(f, ", \"input_shapes\": ");
        shapes_json(f, p, e);
        wb_out_str(f, ", \"input_dtypes\": [");
        for (int i = 0; i < e->ninputs; i++)
            wb_out_printf(f, i ? ", \"%s\"" : "\"%s\"",
                          wb_event_ndim(e, i) < 0 ? "" : wb_dtype_name((wb_dtype)wb_event_dtype(e, i)));
        wb_out_char(f, ']');
    }
    if (e->src != WB_EVENT_NONE) {
        wb_out_str(f, ", \"src\": ");
        json_string(f, wb_prof_src(p, e));
    }
    if (e->failed) wb_out_str(f, ", \"failed\": true");
    wb_out_str(f, "}}");
    if (e->kind == WB_EV_KERNEL && e->link) { /* flow arrow: the launching op -> this kernel */
        /* From inside the launching op (a cuda kernel may start after its op returned; a
         * cpu kernel runs inside it), to the kernel's start. */
        int64_t from = e->ts_ns;
        int64_t at = op_ts ? wb_idset_index(linked, e->link) : -1;
        if (at >= 0 && op_ts[at] != INT64_MIN) from = op_ts[at] + 1;
        if (from > e->ts_ns) from = e->ts_ns;
        wb_out_str(f, ",\n{\"ph\": \"s\", \"cat\": \"launch\", \"name\": \"launch\", \"id\": ");
        wb_out_int(f, e->id);
        wb_out_str(f, ", \"pid\": 0, \"tid\": 0, \"ts\": ");
        wb_out_us(f, from);
        wb_out_str(f, "},\n{\"ph\": \"f\", \"bp\": \"e\", \"cat\": \"launch\", \"name\": \"launch\", \"id\": ");
        wb_out_int(f, e->id);
        wb_out_str(f, ", \"pid\": ");
        wb_out_int(f, e->lane);
        wb_out_str(f, ", \"tid\": 0, \"ts\": ");
        wb_out_us(f, e->ts_ns);
        wb_out_str(f, "}");
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
