/* trace_record.c: one event of a trace (trace_record.h) into a session's store, its kernel kind
 * interned from the fields it carries. */
#include <stdio.h>
#include <string.h>

#include "keyindex.h"
#include "profiler_internal.h"
#include "trace_import.h"
#include <wb/trace_record.h>

void wb_trace_event_clear(wb_trace_event *e) {
    e->ph[0] = e->cat[0] = e->name[0] = e->src[0] = e->op[0] = e->ops[0] = e->api[0] = '\0';
    e->isa[0] = e->tile[0] = e->layout[0] = e->epilogue[0] = e->device[0] = e->lane[0] = e->unit[0] = e->bp[0] = '\0';
    memset(&e->pid, 0, offsetof(wb_trace_event, flow) - offsetof(wb_trace_event, pid));
}

int wb_trace_kind_of(const char *cat) {
    for (int k = 0; k <= WB_EV_MEMSET; k++)
        if (!strcmp(cat, wb_event_kind_name(k))) return k;
    return -1;
}

static int api_of(const char *name) {
    for (int a = WB_API_UNKNOWN; a <= WB_API_GRAPH_LAUNCH; a++)
        if (!strcmp(name, wb_event_api_name(a))) return a;
    return WB_API_UNKNOWN;
}

/* A kernel's kind from its args: named as the trace names it, with the fields the trace carries
 * (op, isa, tile, layout, epilogue), so the rules read the same data as on the recording. */
static const wb_kernel_kind *kind_from(const wb_trace_event *x) {
    wb_kernel_kind key = {.external = x->name, .op = wb_trace_lasting(x->op), .ops = wb_trace_lasting(x->ops),
                           .isa = wb_trace_lasting(x->isa)};
    if (x->tile[0] && sscanf(x->tile, "%dx%d", &key.tile_m, &key.tile_n) != 2) key.tile_m = key.tile_n = 0;
    snprintf(key.layout, sizeof key.layout, "%.2s", x->layout);
    for (int bias = 0; bias <= 1 && x->epilogue[0]; bias++)
        for (int act = 0; act < WB_ACT_COUNT; act++) {
            wb_kernel_kind probe = {.bias = bias, .act = (wb_activation)act, .tile_m = key.tile_m, .ops = key.ops};
            char epi[WB_EPILOGUE_MAX];
            if (!strcmp(wb_kernel_kind_epilogue(&probe, epi, sizeof epi), x->epilogue)) {
                key.bias = bias, key.act = (wb_activation)act;
                bias = 2;
                break;
            }
        }
    return wb_kernel_kind_intern(&key);
}

int wb_trace_event_append(wb_prof *p, const wb_trace_event *x, int *slices) {
    int kind = wb_trace_kind_of(x->cat);
    int counter = !strcmp(x->ph, "C") && !strncmp(x->name, "memory ", 7);
    if (counter && *slices) return 1;
    /* the device lane's name: its thread_name in a trace, the lane given to from_events */
    int named = strcmp(x->ph, "M") || !strcmp(x->name, "thread_name");
    if (x->pid == 2 && x->tid == 0 && x->lane[0] && !p->device_lane[0] && named)
        snprintf(p->device_lane, sizeof p->device_lane, "%s", x->lane);
    if (counter) kind = WB_EV_MEMORY;
    else if (strcmp(x->ph, "X") || kind < 0) return 1; /* metadata, flow arrows, findings: not events */
    if (kind == WB_EV_MEMORY && !counter) *slices = 1;
    int64_t side_buf[FRAME_SIDE];
    uint32_t n = 0;
    uint8_t meta[WB_EVENT_MAX_INPUTS] = {0};
    for (int i = 0; i < x->ninputs; i++) {
        for (int k = 0; k < x->ndims[i]; k++)
            side_buf[n++] = x->dims[i][k];
        meta[i] = (uint8_t)((x->ndims[i] + 1) | (x->dtype[i] << 4));
    }
    for (int i = 0; i < x->nflow; i++)
        side_buf[n++] = x->flow[i];
    int geometry = x->geometry && x->nflow && x->ninputs;
    if (geometry) {
        for (int k = 0; k < x->n_in_stride; k++)
            side_buf[n++] = x->in_stride[k];
        side_buf[n] = x->n_out_shape;
        for (int k = 0; k < WB_MAX_DIMS; k++) {
            side_buf[n + 1 + k] = k < x->n_out_shape ? x->out_shape[k] : 0;
            side_buf[n + 1 + WB_MAX_DIMS + k] = k < x->n_out_stride ? x->out_stride[k] : 0;
        }
        n += 1 + 2 * WB_MAX_DIMS;
    }
    int64_t *side = NULL;
    wb_event *e = n ? slot_side(p, n, &side) : slot(p);
    if (!e) return 1; /* counted as dropped by the store */
    if (side) memcpy(side, side_buf, n * sizeof *side);
    /* lanes: pid 0 host, pid 1 the cpu device (tid 0) and its workers (tid t: worker t-1), pid 2 cuda */
    int lane = x->pid == 0 ? WB_LANE_HOST : x->pid == 2 ? WB_LANE_CUDA :
               x->tid > 255 ? 255 : x->tid > 0 ? WB_LANE_CPU_THREAD0 + (int)x->tid - 1 : WB_LANE_CPU_DEVICE;
    if (lane > 255) lane = 255;
    wb_event ev = {.ts_ns = x->ts, .dur_ns = x->dur, .src = WB_EVENT_NONE, .kind = (uint8_t)kind, .lane = (uint8_t)lane};
    if (kind == WB_EV_MEMORY) {
        ev.name = counter ? "memory" : wb_store_string(p, wb_store_intern(p, x->name));
        ev.live_bytes = x->allocated;
        wb_device d = WB_DEVICE_CPU;
        wb_device_parse(counter ? x->name + 7 : x->device, &d);
        ev.device = (uint16_t)d;
    } else if (kind == WB_EV_KERNEL) {
        ev.kernel = kind_from(x);
        p->read_kernel_id = (uint32_t)x->id, p->read_kernel = ev.kernel;
    } else if (kind == WB_EV_THREAD) { /* a share of the kernel just read: that kernel's kind */
        int ours = p->read_kernel && p->read_kernel_id == (uint32_t)x->kernel &&
                   !strcmp(wb_kernel_kind_name(p->read_kernel), x->name);
        ev.kernel = ours ? p->read_kernel : kind_from(x);
    } else if (kind == WB_EV_STEP) {
        ev.name = "ProfilerStep";
    } else {
        ev.name = wb_store_string(p, wb_store_intern(p, x->name));
    }
    ev.id = (uint32_t)x->id;
    int launched = kind == WB_EV_KERNEL || kind == WB_EV_MEMCPY || kind == WB_EV_MEMSET;
    ev.link = (uint32_t)(launched ? x->correlation : kind == WB_EV_THREAD ? x->kernel : x->parent);
    if (kind == WB_EV_STEP) { /* "ProfilerStep#N" */
        const char *hash = strchr(x->name, '#');
        ev.id = hash ? (uint32_t)strtoul(hash + 1, NULL, 10) : 0;
    }
    if (kind == WB_EV_THREAD) ev.work = x->work, ev.threads = (uint16_t)x->thread;
    else if (kind == WB_EV_RANGE || kind == WB_EV_STEP) ev.run_delay_ns = x->has_run_delay ? x->run_delay : -1;
    else if (kind != WB_EV_MEMORY) ev.flops = x->flops;
    ev.bytes = (float)x->bytes;
    if (kind == WB_EV_KERNEL) ev.threads = (uint16_t)x->threads;
    if (kind == WB_EV_RUNTIME) ev.cbid = (uint16_t)x->cbid, ev.api = (uint8_t)api_of(x->api);
    if (x->src[0]) ev.src = wb_store_intern(p, x->src);
    ev.shape_off = side ? (uint32_t)(side - wb_chunk_of(e)->side) : 0;
    ev.ninputs = (uint8_t)x->ninputs;
    memcpy(ev.in_meta, meta, sizeof meta);
    ev.nflow = (uint8_t)x->nflow;
    ev.geometry = (uint8_t)geometry;
    ev.failed = (uint8_t)x->failed;
    *e = ev;
    if (ev.id > p->next_id && kind != WB_EV_STEP) p->next_id = ev.id;
    if (lane == WB_LANE_CUDA && kind == WB_EV_KERNEL) p->cuda_lane = 1;
    return 1;
}

