/* profiler.c: the event recorder behind wb.profiler (see profiler.h). Recording is an append
 * into the current chunk of the store (profiler_store.c) with two clock reads per op. Device
 * tracers' records are merged in by profiler_device.c; trace_chrome.c writes the Chrome trace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler_internal.h"
#include "storage.h"

_Static_assert(sizeof(wb_event) == 64, "an event is one cache line");

static wb_prof *current;
static wb_prof_stack_fn stack_provider;

void wb_prof_set_stack_provider(wb_prof_stack_fn fn) { stack_provider = fn; }
wb_prof *wb_prof_current(void) { return current; }

/* ---- dispatcher hooks ------------------------------------------------------------------------- */

/* Opens a frame on the op stack (an op, or a runtime scope such as a graph launch); NULL past
 * MAX_DEPTH, where the depth is still counted so the matching end stays balanced. */
static frame *push_frame(wb_prof *p) {
    int d = p->depth++;
    if (d >= MAX_DEPTH) return NULL;
    frame *f = &p->stack[d];
    f->id = ++p->next_id;
    f->ninputs = 0;
    f->device_pushed = 0;
    f->side_n = 0;
    f->nflow = 0;
    f->geometry = 0;
    f->src = WB_EVENT_NONE;
    return f;
}

static void on_op_begin(void *user, const wb_op_call *c) {
    wb_prof *p = user;
    frame *f = push_frame(p);
    if (!f) return;
    /* kernels and copies -> this op; a `to` whose target is the traced device copies onto it
     * (its call names the source's device until its shape rule runs) */
    int on_device = p->device_on && (c->device == p->device->device ||
                                     (c->def->id == WB_OP_TO && c->p.to.device == p->device->device));
    if (on_device) {
        p->device->trace_push(f->id);
        f->device_pushed = 1;
    }
    if (p->recording && p->o.record_host) {
        /* side data goes to the frame now and into the event's chunk when the op ends */
        int64_t *side = f->side;
        uint32_t n = 0;
        if (p->o.record_shapes) {
            for (int i = 0; i < c->nin && i < WB_EVENT_MAX_INPUTS; i++) {
                const wb_tensor *t = c->in[i];
                int nd = t ? t->ndim : -1; /* -1: an absent optional input */
                for (int k = 0; k < nd; k++)
                    side[n++] = t->shape[k];
                f->meta[i] = (uint8_t)((nd + 1) | ((t ? (int)t->dtype : 0) << 4));
                f->ninputs++;
            }
        }
        /* the data flow (findings: which kernel's output only the next one reads): storage ids of
         * the inputs now, the output's slot filled at the end */
        int nin = c->nin < WB_EVENT_MAX_INPUTS ? c->nin : WB_EVENT_MAX_INPUTS, nflow = nin + 1;
        if (!p->o.record_shapes || f->ninputs == nin) {
            for (int i = 0; i < nflow - 1; i++)
                side[n++] = c->in[i] ? (int64_t)wb_storage_id(c->in[i]->storage) : 0;
            f->flow_out = n;
            side[n++] = 0;
            f->nflow = (uint8_t)nflow;
            /* a view's strides in and out (the view finding shows them): the input's now, the
             * output's slots filled at the end */
            const wb_tensor *in0 = c->nin > 0 ? c->in[0] : NULL;
            if (p->o.record_shapes && c->def->kind == WB_OP_KIND_VIEW && in0) {
                for (int k = 0; k < in0->ndim; k++)
                    side[n++] = in0->stride[k];
                f->geometry = n;
                side[n] = 0; /* ndim 0 until the view exists */
                n += 1 + 2 * WB_MAX_DIMS;
            }
        }
        f->side_n = n;
        if (p->o.with_stack && stack_provider) {
            char buf[256];
            stack_provider(buf, sizeof buf);
            if (buf[0]) f->src = wb_store_intern(p, buf);
        }
    }
    f->ts = wb_now_ns(); /* last, so the bookkeeping above is not billed to the op */
}

/* Closes the innermost frame (its correlation comes off the device tracer's stack); returns it
 * when its event is to be recorded, else NULL. */
static frame *pop_frame(wb_prof *p) {
    int d = --p->depth;
    if (d < MAX_DEPTH && p->stack[d].device_pushed && p->device_on) p->device->trace_pop();
    if (d >= MAX_DEPTH || !p->recording || !p->o.record_host) return NULL;
    return &p->stack[d];
}

/* The op enclosing frame f (0 at the top level). */
static uint32_t parent_of(const wb_prof *p, const frame *f) { return f > p->stack ? f[-1].id : 0; }

static void on_op_end(void *user, const wb_op_call *c, wb_status status) {
    int64_t now = wb_now_ns();
    wb_prof *p = user;
    frame *f = pop_frame(p);
    if (!f) return;
    int64_t *side = NULL;
    wb_event *e = f->side_n ? slot_side(p, f->side_n, &side) : slot(p);
    if (!e) return;
    uint32_t shape_off = side ? (uint32_t)(side - wb_chunk_of(e)->side) : 0;
    if (f->nflow && c->out && c->out->storage) f->side[f->flow_out] = (int64_t)wb_storage_id(c->out->storage);
    if (f->geometry && c->out) {
        int64_t *g = f->side + f->geometry;
        g[0] = c->out->ndim;
        for (int k = 0; k < c->out->ndim; k++)
            g[1 + k] = c->out->shape[k], g[1 + WB_MAX_DIMS + k] = c->out->stride[k];
    }
    if (side) memcpy(side, f->side, f->side_n * sizeof *side);
    double flops = 0, bytes = 0;
    if (p->o.with_flops && status == WB_OK) {
        flops = c->def->flops ? c->def->flops(c) : 0;
        bytes = c->def->bytes ? c->def->bytes(c) : 0;
    }
    *e = (wb_event){.name = c->def->name,
                    .ts_ns = f->ts - p->t0,
                    .dur_ns = now - f->ts,
                    .flops = flops,
                    .bytes = (float)bytes,
                    .id = f->id,
                    .link = parent_of(p, f),
                    .src = f->src,
                    .shape_off = shape_off,
                    .kind = WB_EV_OP,
                    .lane = WB_LANE_HOST,
                    .ninputs = f->ninputs,
                    .failed = status != WB_OK,
                    .in_meta = {f->meta[0], f->meta[1], f->meta[2]},
                    .nflow = f->nflow,
                    .geometry = f->geometry && c->out ? 1 : 0};
}

static void on_kernel_begin(void *user, const wb_kernel_desc *desc) {
    (void)desc;
    wb_prof *p = user;
    if (p->recording && p->o.record_device) { /* per-thread shares of a parallel kernel */
        p->spans.count = p->spans.team = 0;
        wb_cpu_spans_set(&p->spans);
    }
    p->kernel_ts = wb_now_ns();
}

/* A parallel kernel's worker threads: one event each on its own lane, linked to the kernel. */
static void record_shares(wb_prof *p, const wb_kernel_desc *desc, uint32_t kernel_id) {
    for (int t = 0; t < p->spans.count && t < WB_LANE_CPU_THREADS; t++) {
        const wb_cpu_span *sp = &p->spans.span[t];
        wb_event *e = slot(p);
        if (!e) return;
        *e = (wb_event){.kernel = desc->kind,
                        .ts_ns = sp->start_ns - p->t0,
                        .dur_ns = sp->end_ns - sp->start_ns,
                        .work = (double)sp->work,
                        .id = ++p->next_id,
                        .link = kernel_id,
                        .src = WB_EVENT_NONE,
                        .threads = (uint16_t)t,
                        .kind = WB_EV_THREAD,
                        .lane = (uint8_t)(WB_LANE_CPU_THREAD0 + t)};
    }
}

static void on_kernel_end(void *user, const wb_kernel_desc *desc) {
    int64_t now = wb_now_ns();
    wb_prof *p = user;
    if (wb_cpu_spans_get() == &p->spans) wb_cpu_spans_set(NULL);
    if (!p->recording || !p->o.record_device) return;
    wb_event *e = slot(p);
    if (!e) return;
    *e = (wb_event){.kernel = desc->kind,
                    .ts_ns = p->kernel_ts - p->t0,
                    .dur_ns = now - p->kernel_ts,
                    .flops = desc->flops,
                    .bytes = (float)desc->bytes,
                    .id = ++p->next_id,
                    .link = enclosing_op(p),
                    .src = WB_EVENT_NONE,
                    /* what the kernel ran on (its team), not what its launcher offered; a kernel
                     * that keeps no record (team 0) is taken at the launcher's word */
                    .threads = (uint16_t)(p->spans.team > 0 ? p->spans.team : desc->threads),
                    .kind = WB_EV_KERNEL,
                    .lane = WB_LANE_CPU_DEVICE};
    if (p->spans.count > 1) record_shares(p, desc, e->id);
}

static void on_memory(wb_device device, int64_t delta, int64_t live_on_device, int64_t start_ns) {
    wb_prof *p = current;
    if (!p) return;
    int64_t live = (int64_t)wb_storage_bytes_live();
    if (live > p->mem_peak) p->mem_peak = live;
    if (!p->recording || !p->o.record_host || !p->o.profile_memory) return;
    wb_event *e = slot(p);
    if (!e) return;
    int64_t now = wb_now_ns();
    *e = (wb_event){.name = delta >= 0 ? "alloc" : "free",
                    .ts_ns = (start_ns > 0 && start_ns <= now ? start_ns : now) - p->t0,
                    .dur_ns = start_ns > 0 && start_ns <= now ? now - start_ns : 0, /* the call's own time */
                    .live_bytes = (double)live_on_device,
                    .bytes = (float)delta,
                    .link = enclosing_op(p),
                    .src = WB_EVENT_NONE,
                    .device = (uint16_t)device,
                    .kind = WB_EV_MEMORY,
                    .lane = WB_LANE_HOST};
}

void wb_prof_runtime(const char *name, int64_t t0_ns) {
    wb_prof *p = current;
    if (!p || !p->recording || !p->o.record_host) return;
    int64_t now = wb_now_ns();
    wb_event *e = slot(p);
    if (!e) return;
    *e = (wb_event){.name = name,
                    .ts_ns = t0_ns - p->t0,
                    .dur_ns = now - t0_ns,
                    .id = ++p->next_id,
                    .link = enclosing_op(p),
                    .src = WB_EVENT_NONE,
                    .kind = WB_EV_RUNTIME,
                    .lane = WB_LANE_HOST};
}

void wb_prof_scope_begin(void) {
    wb_prof *p = current;
    frame *f = p ? push_frame(p) : NULL;
    if (f && p->device_on) { /* a graph's kernels -> the graph launch */
        p->device->trace_push(f->id);
        f->device_pushed = 1;
    }
    if (f) f->ts = wb_now_ns();
}

void wb_prof_scope_end(const char *name) {
    wb_prof *p = current;
    if (!p || p->depth == 0) return;
    int64_t now = wb_now_ns();
    frame *f = pop_frame(p);
    if (!f) return;
    wb_event *e = slot(p);
    if (!e) return;
    *e = (wb_event){.name = name,
                    .ts_ns = f->ts - p->t0,
                    .dur_ns = now - f->ts,
                    .id = f->id,
                    .link = parent_of(p, f),
                    .src = WB_EVENT_NONE,
                    .kind = WB_EV_RUNTIME,
                    .lane = WB_LANE_HOST};
}

/* The calling thread's run-queue delay so far (ns runnable but not running), -1 when unknown. */
static int64_t run_delay_now(void) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (!f) return -1;
    unsigned long long run = 0, wait = 0;
    int n = fscanf(f, "%llu %llu", &run, &wait);
    fclose(f);
    return n == 2 ? (int64_t)wait : -1;
}

static double run_delay_since(int64_t start) {
    int64_t now = start >= 0 ? run_delay_now() : -1;
    return now >= start && start >= 0 ? (double)(now - start) : -1;
}

/* ---- sessions ---------------------------------------------------------------------------------- */

/* MemAvailable from /proc/meminfo in bytes; 0 when unknown. */
static double available_memory_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

wb_status wb_prof_new(const wb_prof_options *opts, wb_prof **out) {
    *out = NULL;
    if (opts->max_events != 0 && (opts->max_events < 16 || opts->max_events > ((int64_t)1 << 40)))
        return wb_error(WB_ERR_ARGUMENT, "profiler: max_events must be between 16 and 2^40, got %lld",
                        (long long)opts->max_events);
    int64_t min_memory = 2 * (int64_t)WB_CHUNK_BYTES;
    if (opts->max_memory < min_memory)
        return wb_error(WB_ERR_ARGUMENT, "profiler: max_memory must be at least %lld bytes (4 MiB: two chunks), got %lld",
                        (long long)min_memory, (long long)opts->max_memory);
    if (opts->policy < WB_PROF_SPILL || opts->policy > WB_PROF_STOP)
        return wb_error(WB_ERR_ARGUMENT, "profiler: unknown memory policy %d", opts->policy);
    /* memory is taken as events come, up to max_memory: no more than half of what is available */
    double avail = available_memory_bytes();
    if (avail > 0 && (double)opts->max_memory > avail / 2)
        return wb_error(WB_ERR_MEMORY,
                        "profiler: max_memory %.2f GiB is more than half of the %.2f GiB of memory available; lower "
                        "max_memory (memory_policy \"spill\" keeps the rest on disk)",
                        (double)opts->max_memory / (1 << 30), avail / (1 << 30));
    wb_prof *p = calloc(1, sizeof *p);
    if (!p) return wb_error(WB_ERR_MEMORY, "profiler: out of memory");
    p->o = *opts;
    if (opts->spill_dir && !(p->o.spill_dir = strdup(opts->spill_dir))) {
        free(p);
        return wb_error(WB_ERR_MEMORY, "profiler: out of memory");
    }
    wb_store_init(p);
    p->t0 = wb_now_ns();
    *out = p;
    return WB_OK;
}

void wb_prof_free(wb_prof *p) {
    if (!p) return;
    if (p->running) wb_prof_stop(p);
    wb_store_free(p);
    free((char *)p->o.spill_dir), free(p->notes), free(p);
}

/* What one recorded op costs the caller: two clock reads and an append, timed on a scratch
 * copy of the real path (an op begin/end pair writes one event). */
static double calibrate(wb_prof *p) {
    enum { N = 4096 };
    wb_op_def def = {.name = "calibration"};
    wb_op_call call = {.def = &def};
    uint64_t dropped = p->dropped, dropped_by[WB_DROP_DEVICE + 1];
    int first_drop = p->first_drop;
    memcpy(dropped_by, p->dropped_by, sizeof dropped_by);
    wb_store_ensure(p); /* room for one event in the current chunk: each is taken back */
    wb_event *cur = p->cur;
    uint32_t side_n = p->open ? p->open->side_n : 0;
    uint64_t next = p->next_id;
    int64_t t0 = wb_now_ns();
    for (int i = 0; i < N; i++) {
        on_op_begin(p, &call);
        on_op_end(p, &call, WB_OK);
        p->cur = cur; /* do not keep calibration events */
        if (p->open) p->open->side_n = side_n;
    }
    double cost = (double)(wb_now_ns() - t0) / N;
    p->dropped = dropped, p->first_drop = first_drop, p->next_id = next;
    memcpy(p->dropped_by, dropped_by, sizeof dropped_by);
    return cost;
}

static void on_runtime(void *user, const char *name, int64_t t0_ns) {
    (void)user;
    wb_prof_runtime(name, t0_ns);
}
static void on_device_ready(void *user, wb_device device) { wb_prof_device_ready(user, device); }
static void on_device_launch(void *user, const wb_kernel_desc *desc) { wb_prof_device_launch(user, desc); }

wb_status wb_prof_start(wb_prof *p) {
    if (current == p) return WB_OK;
    if (current)
        return wb_error(WB_ERR_UNSUPPORTED, "profiler: a session is already running (sessions do not nest); "
                                            "stop it first with wb.profiler.current():stop()");
    p->hooks = (wb_dispatch_hooks){p, on_op_begin, on_op_end, on_kernel_begin, on_kernel_end};
    /* once per session: a session started again (wb.profiler.ab's slots, a schedule's buffers)
     * keeps its measure, and its first range does not follow 4096 calibration records */
    if (p->cost_ns <= 0) {
        int was = p->recording;
        p->recording = 1;
        p->cost_ns = calibrate(p);
        p->recording = was;
    }
    p->previous = wb_dispatch_set_hooks(&p->hooks);
    wb_storage_set_observer(on_memory);
    p->device_hooks = (wb_device_hooks){
        .user = p, .runtime = on_runtime, .device_ready = on_device_ready, .device_launch = on_device_launch};
    wb_device_set_hooks(&p->device_hooks);
    p->mem_peak = (int64_t)wb_storage_bytes_live();
    p->depth = 0;
    p->running = 1;
    current = p;
    p->device_note[0] = '\0';
    for (int d = 0; d < WB_DEVICE_COUNT; d++) /* a traceable device in use in this process: trace it */
        if (wb_backend_in_use((wb_device)d)) wb_prof_device_ready(p, (wb_device)d);
    return WB_OK;
}

const char *wb_prof_device_note(const wb_prof *p) { return p->device_note; }

const char *wb_prof_lane_name(const wb_prof *p, int lane) {
    static char buf[64];
    if (lane == WB_LANE_HOST) return "host";
    if (lane == WB_LANE_CPU_DEVICE) return "cpu:0 stream 0";
    if (lane >= WB_LANE_CPU_THREAD0) {
        snprintf(buf, sizeof buf, "cpu:0 thread %d", lane - WB_LANE_CPU_THREAD0);
        return buf;
    }
    if (!p->device && p->device_lane[0]) return p->device_lane;
    snprintf(buf, sizeof buf, "%s:0 stream %u", p->device ? p->device->name : "device", p->device_stream);
    return buf;
}

void wb_prof_stop(wb_prof *p) {
    if (!p->running) return;
    wb_prof_end_step(p);
    while (p->nranges > 0)
        wb_prof_range_pop(p);
    wb_prof_device_flush(p);
    if (p->device_on) p->device->trace_stop();
    p->device_on = 0;
    wb_dispatch_set_hooks(p->previous);
    wb_storage_set_observer(NULL);
    wb_device_set_hooks(NULL);
    p->running = 0;
    if (current == p) current = NULL;
}

int wb_prof_is_running(const wb_prof *p) { return p->running; }
void wb_prof_set_recording(wb_prof *p, int on) { p->recording = on; }

void wb_prof_end_step(wb_prof *p) {
    if (!p->in_step) return;
    wb_prof_device_flush(p); /* a step's device records belong to it (on_trace_ready reads them) */
    p->in_step = 0;
    if (!p->recording) return;
    wb_event *e = slot(p);
    if (!e) return;
    *e = (wb_event){.name = "ProfilerStep",
                    .ts_ns = p->step_ts - p->t0,
                    .dur_ns = wb_now_ns() - p->step_ts,
                    .run_delay_ns = run_delay_since(p->step_run_delay),
                    .id = (uint32_t)p->step_no,
                    .src = WB_EVENT_NONE,
                    .kind = WB_EV_STEP,
                    .lane = WB_LANE_HOST};
}

void wb_prof_step(wb_prof *p, int64_t number) {
    wb_prof_end_step(p);
    p->in_step = 1;
    p->step_no = number;
    p->step_run_delay = p->recording && p->o.record_host ? run_delay_now() : -1;
    p->step_ts = wb_now_ns();
}

wb_status wb_prof_range_push(wb_prof *p, const char *name) {
    if (p->nranges == MAX_RANGES)
        return wb_error(WB_ERR_RANGE, "profiler: more than %d nested ranges (missing pop?)", MAX_RANGES);
    p->ranges[p->nranges].name = wb_store_intern(p, name);
    p->ranges[p->nranges++].ts = wb_now_ns();
    return WB_OK;
}

wb_status wb_prof_range_pop(wb_prof *p) {
    if (p->nranges == 0) return wb_error(WB_ERR_RANGE, "profiler: pop() without a matching push()");
    int64_t now = wb_now_ns();
    p->nranges--;
    if (!p->recording || !p->o.record_host) return WB_OK;
    wb_event *e = slot(p);
    if (!e) return WB_OK;
    uint32_t name = p->ranges[p->nranges].name;
    *e = (wb_event){.name = wb_store_string(p, name),
                    .ts_ns = p->ranges[p->nranges].ts - p->t0,
                    .dur_ns = now - p->ranges[p->nranges].ts,
                    .run_delay_ns = -1, /* not sampled: a range may be as short as one call */
                    .id = ++p->next_id,
                    .src = WB_EVENT_NONE,
                    .kind = WB_EV_RANGE,
                    .lane = WB_LANE_HOST};
    return WB_OK;
}

/* What a ring hides (the partial step at its start) is dropped too. */
uint64_t wb_prof_dropped(const wb_prof *p) {
    if (p->ring_cut_ns < 0) return p->dropped;
    wb_prof_store_stats s;
    wb_prof_store_stats_get(p, &s);
    return p->dropped + (s.kept - wb_prof_count(p));
}
int wb_prof_has_device_lane(const wb_prof *p) { return p->cuda_lane; }
int64_t wb_prof_peak_memory(const wb_prof *p) { return p->mem_peak; }
double wb_prof_event_cost_ns(const wb_prof *p) { return p->cost_ns; }

/* Side data sits in the event's own chunk (in memory, or the cursor's read-back buffer). */
const int64_t *wb_prof_shape(const wb_prof *p, const wb_event *e, int input) {
    (void)p;
    size_t off = e->shape_off;
    for (int i = 0; i < input; i++)
        off += (size_t)(wb_event_ndim(e, i) > 0 ? wb_event_ndim(e, i) : 0);
    return wb_chunk_of(e)->side + off;
}

const int64_t *wb_prof_flow(const wb_prof *p, const wb_event *e, int *n) {
    (void)p;
    *n = e->kind == WB_EV_OP ? e->nflow : 0;
    if (!*n) return NULL;
    size_t off = e->shape_off;
    for (int i = 0; i < e->ninputs; i++)
        off += (size_t)(wb_event_ndim(e, i) > 0 ? wb_event_ndim(e, i) : 0);
    return wb_chunk_of(e)->side + off;
}

int wb_prof_view_geometry(const wb_prof *p, const wb_event *e, const int64_t **in_stride, int *out_ndim,
                          const int64_t **out_shape, const int64_t **out_stride) {
    int n;
    const int64_t *flow = wb_prof_flow(p, e, &n);
    if (!flow || !e->geometry || e->ninputs < 1) return 0;
    *in_stride = flow + n;
    const int64_t *g = *in_stride + (wb_event_ndim(e, 0) > 0 ? wb_event_ndim(e, 0) : 0);
    *out_ndim = (int)g[0];
    *out_shape = g + 1;
    *out_stride = g + 1 + WB_MAX_DIMS;
    return 1;
}

const char *wb_prof_src(const wb_prof *p, const wb_event *e) {
    return e->src == WB_EVENT_NONE ? NULL : wb_store_string(p, e->src);
}

/* Interned strings stay (open ranges hold their names; a name is stored once anyway). */
void wb_prof_clear(wb_prof *p) { wb_store_clear(p); }
