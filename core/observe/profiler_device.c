/* profiler_device.c: merging a device tracer's records (CUPTI's, through the backend table)
 * into a session: the launches our ops declared (kind, flops, bytes) are matched to the
 * tracer's kernel records through the correlation ids pushed while each op ran. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler_internal.h"

/* ---- CUPTI records -> events ------------------------------------------------------------------- */

typedef struct rec_buf {
    wb_trace_record *r;
    size_t n, cap;
    int oom;
} rec_buf;

static void collect(void *user, const wb_trace_record *r) {
    rec_buf *b = user;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        wb_trace_record *q = realloc(b->r, cap * sizeof *q);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->r = q, b->cap = cap;
    }
    b->r[b->n++] = *r;
}

/* A kernel queued on a device by the op now running: the tracer's record will carry the name
 * and the times; the kind and work counts come from here (matched by op, in launch order). */
void wb_prof_device_launch(wb_prof *p, const wb_kernel_desc *desc) {
    if (!p || !p->device_on || !p->recording) return;
    if (p->nnotes == p->cap_notes) {
        size_t cap = p->cap_notes ? p->cap_notes * 2 : 256;
        launch_note *q = realloc(p->notes, cap * sizeof *q);
        if (!q) return;
        p->notes = q, p->cap_notes = cap;
    }
    p->notes[p->nnotes] = (launch_note){.op = enclosing_op(p),
                                        .seq = (uint32_t)p->nnotes,
                                        .kind = desc->kind,
                                        .flops = desc->flops,
                                        .bytes = desc->bytes};
    p->nnotes++;
}

static int note_cmp(const void *a, const void *b) {
    const launch_note *x = a, *y = b;
    if (x->op != y->op) return x->op < y->op ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static launch_note *note_for(wb_prof *p, uint32_t op) {
    size_t lo = 0, hi = p->nnotes;
    while (lo < hi) { /* first note of op */
        size_t mid = (lo + hi) / 2;
        if (p->notes[mid].op < op)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < p->nnotes && p->notes[i].op == op; i++)
        if (!p->notes[i].used) {
            p->notes[i].used = 1;
            return &p->notes[i];
        }
    return NULL;
}

typedef struct corr_pair {
    uint32_t correlation;
    uint32_t external;
} corr_pair;

static int corr_cmp(const void *a, const void *b) {
    uint32_t x = ((const corr_pair *)a)->correlation, y = ((const corr_pair *)b)->correlation;
    return x < y ? -1 : x > y;
}

/* The kind of a device kernel record: the device's own name, with the fields of the kind our
 * launch declared (op, layout, epilogue) when the record is matched to it. */
static const wb_kernel_kind *record_kind(const wb_trace_record *r, const launch_note *note) {
    wb_kernel_kind key = note && note->kind ? *note->kind : (wb_kernel_kind){0};
    key.external = r->name ? r->name : "?";
    return wb_kernel_kind_intern(&key);
}
/* The runtime API calls that only read state (the device, an attribute, the last error, whether a
 * stream captures): bookkeeping of the libraries on top, not work or waiting, so not on the host
 * lane. A name is CUPTI's, with its version suffix (cudaGetDevice_v3020). */
static int runtime_query(const char *name) {
    static const char *const prefix[] = {"cudaGetDevice",       "cudaSetDevice",          "cudaGetLastError",
                                         "cudaPeekAtLastError", "cudaDeviceGetAttribute", "cudaFuncGetAttributes",
                                         "cudaPointerGetAttributes", "cudaStreamIsCapturing", "cudaStreamGetCaptureInfo",
                                         "cudaDriverGetVersion",    "cudaRuntimeGetVersion", "cudaGetDriverEntryPoint",
                                         "cudaThreadExchangeStreamCaptureMode"};
    if (!name) return 0;
    for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
        if (strncmp(name, prefix[i], strlen(prefix[i])) == 0) return 1;
    return 0;
}


/* Collects what the device's tracer buffered and appends it: kernels and copies on the device
 * lane, API calls (launches, synchronize, graph launch) on the host lane, each linked to the op
 * that caused it through the external correlation id pushed in on_op_begin. */
void wb_prof_device_flush(wb_prof *p) {
    if (!p->device_on) return;
    rec_buf b = {0};
    uint64_t dropped = 0;
    if (p->device->trace_flush(collect, &b, &dropped)) {
        snprintf(p->device_note, sizeof p->device_note, "%s", wb_error_message());
        free(b.r);
        return;
    }
    if (!p->recording) b.n = 0; /* drained, not kept: the schedule is not recording this step */
    wb_store_drop(p, WB_DROP_DEVICE, dropped + (b.oom ? 1 : 0));
    size_t npairs = 0;
    corr_pair *pairs = malloc((b.n ? b.n : 1) * sizeof *pairs);
    for (size_t i = 0; pairs && i < b.n; i++)
        if (b.r[i].kind == WB_CU_REC_EXTERNAL)
            pairs[npairs++] = (corr_pair){b.r[i].correlation, (uint32_t)b.r[i].external_id};
    if (pairs) qsort(pairs, npairs, sizeof *pairs, corr_cmp);
    if (p->nnotes) qsort(p->notes, p->nnotes, sizeof *p->notes, note_cmp);
    int64_t off = p->device->clock_offset();
    size_t untimed = 0;
    for (size_t i = 0; i < b.n; i++) {
        const wb_trace_record *r = &b.r[i];
        if (r->kind == WB_CU_REC_EXTERNAL) continue;
        /* the driver calls cuBLASLt makes for itself (context queries, attribute reads) would
         * crowd the host lane: of the driver API, launches only */
        if (r->kind == WB_CU_REC_DRIVER && r->api_kind != WB_CU_API_LAUNCH && r->api_kind != WB_CU_API_GRAPH_LAUNCH)
            continue;
        /* nor the runtime's own queries (cuBLASLt asks cudaGetDevice on every matmul, seen on an H200) */
        if (r->kind == WB_CU_REC_RUNTIME && r->api_kind == WB_CU_API_OTHER && runtime_query(r->name)) continue;
        /* 0: CUPTI could not collect the time; such a record would land before the session */
        if (r->start_ns == 0 || r->end_ns < r->start_ns) {
            untimed++;
            continue;
        }
        corr_pair key = {r->correlation, 0}, *hit = pairs ? bsearch(&key, pairs, npairs, sizeof key, corr_cmp) : NULL;
        /* API calls and the host's waits for the device (synchronization records) are host-side */
        int host = r->kind == WB_CU_REC_RUNTIME || r->kind == WB_CU_REC_DRIVER || r->kind == WB_CU_REC_SYNC;
        if (host ? !p->o.record_host : !p->o.record_device) continue;
        wb_event *e = slot(p);
        if (!e) break;
        launch_note *note = NULL;
        if (r->kind == WB_CU_REC_KERNEL) {
            p->device_stream = r->stream;
            p->cuda_lane = 1;
            if (hit) note = note_for(p, hit->external);
        }
        *e = (wb_event){.name = r->name, /* kernels: replaced by their kind below */
                        .ts_ns = (int64_t)r->start_ns - off - p->t0,
                        .dur_ns = (int64_t)(r->end_ns - r->start_ns),
                        .flops = note ? note->flops : 0,
                        .bytes = note ? (float)note->bytes : (float)r->bytes,
                        .id = ++p->next_id,
                        .link = hit ? hit->external : 0,
                        .src = WB_EVENT_NONE,
                        .cbid = host ? (uint16_t)r->cbid : 0,
                        /* the plugin's WB_CU_API_* shifted by one (0: not an API call); a
                           synchronization record is a sync whatever its API */
                        .api = r->kind == WB_CU_REC_SYNC ? WB_API_SYNC : host ? (uint8_t)(r->api_kind + 1) : 0,
                        .kind = host                          ? WB_EV_RUNTIME
                                : r->kind == WB_CU_REC_KERNEL ? WB_EV_KERNEL
                                : r->kind == WB_CU_REC_MEMSET ? WB_EV_MEMSET
                                                              : WB_EV_MEMCPY,
                        .lane = host ? WB_LANE_HOST : WB_LANE_CUDA};
        if (e->kind == WB_EV_KERNEL) e->kernel = record_kind(r, note);
    }
    if (untimed)
        snprintf(p->device_note, sizeof p->device_note,
                 "%zu device record%s had no timestamps (the tracer could not collect them) and %s left out",
                 untimed, untimed == 1 ? "" : "s", untimed == 1 ? "is" : "are");
    free(pairs);
    free(b.r);
    p->nnotes = 0;
}

void wb_prof_device_ready(wb_prof *p, wb_device device) {
    const wb_backend *b = wb_backend_get(device);
    if (!p || p->device_on || !p->o.record_device || !b->trace_start) return;
    char saved[512]; /* whatever error the caller is reporting stays its own */
    snprintf(saved, sizeof saved, "%s", wb_error_message());
    p->device = b;
    p->device_on = b->trace_start();
    if (!p->device_on) snprintf(p->device_note, sizeof p->device_note, "%s", wb_error_message());
    wb_error(WB_OK, "%s", saved);
}
