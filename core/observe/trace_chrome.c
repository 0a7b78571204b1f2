/* trace_chrome.c: a session as Chrome-trace JSON (Perfetto, chrome://tracing), streamed to disk
 * so a large session never builds one giant string: host and device lanes, counter tracks for
 * memory, and flow arrows from each op to the kernels it launched. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "profiler_internal.h"

/* JSON string body: quotes, backslashes and control bytes escaped; valid UTF-8 kept; any
 * other byte becomes U+FFFD, so hostile names still give valid JSON. */
static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    while (*u) {
        unsigned char c = *u;
        if (c == '"' || c == '\\') {
            fputc('\\', f), fputc(c, f), u++;
        } else if (c < 0x20) {
            fprintf(f, c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : "\\u%04x", c), u++;
        } else if (c < 0x80) {
            fputc(c, f), u++;
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
                fwrite(u, 1, (size_t)len, f), u += len;
            } else {
                fputs("\\ufffd", f), u++;
            }
        }
    }
    fputc('"', f);
}

const char *wb_event_kind_name(int kind) {
    static const char *const names[] = {"op", "kernel", "runtime", "memory", "range", "step", "memcpy", "thread", "memset"};
    return kind >= 0 && kind <= WB_EV_MEMSET ? names[kind] : "?";
}

const char *wb_event_api_name(int api) {
    static const char *const names[] = {"unknown", "other", "launch", "occupancy", "sync", "graph_launch"};
    return api >= 0 && api <= WB_API_GRAPH_LAUNCH ? names[api] : "unknown";
}

static void dims_json(FILE *f, const char *key, const int64_t *v, int n) {
    fprintf(f, ", \"%s\": [", key);
    for (int i = 0; i < n; i++)
        fprintf(f, i ? ", %lld" : "%lld", (long long)v[i]);
    fputc(']', f);
}

static void shapes_json(FILE *f, const wb_prof *p, const wb_event *e) {
    fputc('[', f);
    const int64_t *dims = p->shapes + e->shape_off;
    for (int i = 0; i < e->ninputs; i++) {
        if (i) fputs(", ", f);
        if (wb_event_ndim(e, i) < 0) {
            fputs("null", f);
            continue;
        }
        fputc('[', f);
        for (int k = 0; k < wb_event_ndim(e, i); k++)
            fprintf(f, k ? ", %lld" : "%lld", (long long)*dims++);
        fputc(']', f);
    }
    fputc(']', f);
}

/* JSON has no NaN or Infinity: a count that is not finite (a kernel descriptor's flops or bytes
 * from a plugin, say) is written as null, and the trace's otherData says how many were. */
static int finite_count(double v) { return isfinite(v); }

static void count_json(FILE *f, const char *key, double v) {
    if (finite_count(v)) fprintf(f, ", \"%s\": %.0f", key, v);
    else fprintf(f, ", \"%s\": null", key);
}

static uint64_t non_finite_counts(const wb_prof *p) {
    uint64_t n = 0;
    for (size_t i = 0; i < p->n; i++) {
        const wb_event *e = &p->ev[i];
        if (e->kind == WB_EV_MEMORY || e->kind == WB_EV_RANGE || e->kind == WB_EV_STEP) continue; /* no counts */
        if (e->kind == WB_EV_THREAD) n += !finite_count(e->work);
        else if (e->flops > 0 || e->bytes > 0 || e->flops != e->flops || e->bytes != e->bytes)
            n += !finite_count(e->flops) + !finite_count(e->bytes);
    }
    return n;
}

wb_status wb_prof_export_chrome(const wb_prof *p, const char *path) {
    return wb_prof_export_chrome_with(p, path, NULL, NULL);
}

wb_status wb_prof_export_chrome_with(const wb_prof *p, const char *path, const char *extra_events,
                                     const char *extra_members) {
    wb_atomic_file out;
    if (wb_atomic_open(&out, path, "export_chrome_trace") != WB_OK) return WB_ERR_ARGUMENT;
    FILE *f = out.f;
    static char buf[1 << 16];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    /* Start times of ops and runtime scopes by id, for the flow arrows (NULL: arrows start at
     * the kernel, as they would without it). */
    int64_t *op_ts = malloc(((size_t)p->next_id + 1) * sizeof *op_ts);
    if (op_ts) {
        for (uint32_t i = 0; i <= p->next_id; i++)
            op_ts[i] = -1;
        for (size_t i = 0; i < p->n; i++)
            if ((p->ev[i].kind == WB_EV_OP || p->ev[i].kind == WB_EV_RUNTIME) && p->ev[i].id <= p->next_id)
                op_ts[p->ev[i].id] = p->ev[i].ts_ns;
    }
    fputs("{\"displayTimeUnit\": \"ns\", \"otherData\": {\"producer\": \"workbench\", \"dropped_events\": ", f);
    fprintf(f, "%llu, \"non_finite_values_written_as_null\": %llu}, \"traceEvents\": [\n",
            (unsigned long long)p->dropped, (unsigned long long)non_finite_counts(p));
    fputs("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"args\": {\"name\": \"host\"}},\n"
          "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": \"main thread\"}},\n"
          "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": \"cpu:0 (device)\"}},\n"
          "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 0, \"args\": {\"name\": \"cpu:0 stream "
          "0\"}},\n"
          "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 0, \"args\": {\"sort_index\": 0}},\n"
          "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 1, \"args\": {\"sort_index\": 1}}",
          f);
    if (p->device) {
        const wb_cuda_info *info = p->device->info ? p->device->info() : NULL;
        fprintf(f,
                ",\n{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 2, \"args\": {\"name\": \"%s:0 (%s)\"}},\n"
                "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 2, \"tid\": 0, \"args\": {\"name\": \"%s\"}},\n"
                "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 2, \"args\": {\"sort_index\": 2}}",
                p->device->name, info ? info->name : "device", wb_prof_lane_name(p, WB_LANE_CUDA));
    }
    uint64_t named_threads = 0; /* worker lanes whose thread_name is written */
    for (size_t i = 0; i < p->n; i++) {
        const wb_event *e = &p->ev[i];
        /* worker threads are lanes (tids 1..) of the cpu device's process */
        int worker = e->lane >= WB_LANE_CPU_THREAD0 ? e->lane - WB_LANE_CPU_THREAD0 : -1;
        int pid = worker >= 0 ? WB_LANE_CPU_DEVICE : e->lane, tid = worker + 1;
        if (worker >= 0 && !(named_threads >> worker & 1)) {
            named_threads |= 1ull << worker;
            fprintf(
                f,
                ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                pid, tid, wb_prof_lane_name(p, e->lane));
        }
        double ts = (double)e->ts_ns / 1000.0, dur = (double)e->dur_ns / 1000.0;
        fputs(",\n", f);
        if (e->kind == WB_EV_MEMORY) { /* a counter track of live bytes per device */
            fprintf(f,
                    "{\"ph\": \"C\", \"name\": \"memory %s\", \"pid\": 0, \"ts\": %.3f, \"args\": "
                    "{\"allocated_bytes\": %lld}}",
                    wb_device_name((wb_device)e->device), ts + dur, (long long)e->live_bytes); /* after it */
            continue;
        }
        fputs("{\"ph\": \"X\", \"cat\": ", f);
        json_string(f, wb_event_kind_name(e->kind));
        fputs(", \"name\": ", f);
        if (e->kind == WB_EV_STEP) {
            fprintf(f, "\"ProfileStep#%llu\"", (unsigned long long)e->id);
        } else {
            json_string(f, wb_event_name(e));
        }
        fprintf(f, ", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {", pid, tid, ts, dur);
        fprintf(f, "\"id\": %llu", (unsigned long long)e->id);
        if (e->kind == WB_EV_OP || e->kind == WB_EV_KERNEL)
            fprintf(f, ", \"correlation\": %llu", (unsigned long long)(e->kind == WB_EV_OP ? e->id : e->link));
        if ((e->kind == WB_EV_OP || e->kind == WB_EV_RUNTIME) && e->link)
            fprintf(f, ", \"parent\": %llu", (unsigned long long)e->link);
        if (e->kind == WB_EV_THREAD) {
            wb_kernel_fields k;
            fprintf(f, ", \"kernel\": %llu, \"thread\": %d", (unsigned long long)e->link, e->threads);
            count_json(f, "work", e->work);
            fprintf(f, ", \"unit\": \"%s\"", wb_kernel_kind_fields(e->kernel, &k) ? "tiles" : "elements");
        } else if (e->kind != WB_EV_RANGE && e->kind != WB_EV_STEP &&
                   (e->flops > 0 || e->bytes > 0 || e->flops != e->flops || e->bytes != e->bytes)) {
            count_json(f, "flops", e->flops);
            count_json(f, "bytes", (double)e->bytes);
        }
        if (e->kind == WB_EV_RUNTIME && e->cbid) fprintf(f, ", \"cbid\": %d", e->cbid);
        if (e->kind == WB_EV_RUNTIME && e->api) fprintf(f, ", \"api\": \"%s\"", wb_event_api_name(e->api));
        if (e->kind == WB_EV_KERNEL) {
            wb_kernel_fields k;
            fprintf(f, ", \"threads\": %d", e->threads);
            /* the kind's fields, so a reader of the trace never parses the name back */
            fputs(", \"op\": ", f);
            json_string(f, e->kernel->op);
            if (e->kernel->ops) {
                fputs(", \"ops\": ", f);
                json_string(f, e->kernel->ops);
            }
            if (wb_kernel_kind_fields(e->kernel, &k)) {
                fprintf(f, ", \"isa\": \"%s\", \"tile\": \"%s\", \"layout\": \"%s\", \"epilogue\": \"%s\"", k.isa,
                        k.tile, k.layout, k.epilogue);
            } else {
                char epi[48];
                fprintf(f, ", \"epilogue\": \"%s\"", wb_kernel_kind_epilogue(e->kernel, epi, sizeof epi));
            }
        }
        if (e->kind == WB_EV_OP && e->nflow) {
            int n;
            const int64_t *ids = wb_prof_flow(p, e, &n);
            fputs(", \"flow\": [", f);
            for (int i = 0; i < n; i++)
                fprintf(f, i ? ", %lld" : "%lld", (long long)ids[i]);
            fputc(']', f);
        }
        const int64_t *in_stride, *out_shape, *out_stride;
        int out_ndim;
        if (e->kind == WB_EV_OP && wb_prof_view_geometry(p, e, &in_stride, &out_ndim, &out_shape, &out_stride)) {
            dims_json(f, "in_stride", in_stride, wb_event_ndim(e, 0) > 0 ? wb_event_ndim(e, 0) : 0);
            dims_json(f, "out_shape", out_shape, out_ndim);
            dims_json(f, "out_stride", out_stride, out_ndim);
        }
        if ((e->kind == WB_EV_RANGE || e->kind == WB_EV_STEP) && e->run_delay_ns >= 0)
            fprintf(f, ", \"run_delay_ns\": %.0f", e->run_delay_ns);
        if (e->ninputs) {
            fputs(", \"input_shapes\": ", f);
            shapes_json(f, p, e);
            fputs(", \"input_dtypes\": [", f);
            for (int i = 0; i < e->ninputs; i++)
                fprintf(f, i ? ", \"%s\"" : "\"%s\"", wb_event_ndim(e, i) < 0 ? "" : wb_dtype_name((wb_dtype)wb_event_dtype(e, i)));
            fputc(']', f);
        }
        if (e->src != WB_EVENT_NONE) {
            fputs(", \"src\": ", f);
            json_string(f, p->strings + e->src);
        }
        if (e->failed) fputs(", \"failed\": true", f);
        fputs("}}", f);
        if (e->kind == WB_EV_KERNEL && e->link) { /* flow arrow: the launching op -> this kernel */
            /* From inside the launching op (a cuda kernel may start after its op returned; a
             * cpu kernel runs inside it), to the kernel's start. */
            double from = ts;
            if (op_ts && e->link <= p->next_id && op_ts[e->link] >= 0) from = (double)op_ts[e->link] / 1000.0 + 0.001;
            if (from > ts) from = ts;
            fprintf(f,
                    ",\n{\"ph\": \"s\", \"cat\": \"launch\", \"name\": \"launch\", \"id\": %llu, \"pid\": 0, \"tid\": "
                    "0, \"ts\": %.3f}",
                    (unsigned long long)e->id, from);
            fprintf(f,
                    ",\n{\"ph\": \"f\", \"bp\": \"e\", \"cat\": \"launch\", \"name\": \"launch\", \"id\": %llu, "
                    "\"pid\": %d, \"tid\": 0, \"ts\": %.3f}",
                    (unsigned long long)e->id, e->lane, ts);
        }
    }
    if (extra_events && *extra_events) fprintf(f, ",\n%s", extra_events);
    fputs("\n]", f);
    if (extra_members && *extra_members) fprintf(f, ", %s", extra_members);
    fputs("}\n", f);
    free(op_ts);
    return wb_atomic_commit(&out, "export_chrome_trace");
}
