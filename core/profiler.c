/* profiler.c: the event recorder behind wb.profiler (see profiler.h) and its Chrome-trace
 * writer. Recording is an append into a preallocated buffer with two clock reads per op; the
 * export streams JSON to disk, so a large session never builds one giant string. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda.h"
#include "op.h"
#include "profiler.h"
#include "storage.h"

#define MAX_DEPTH  64
#define MAX_RANGES 64

_Static_assert(sizeof(wb_event) == 64, "an event is one cache line");

typedef struct frame {
    uint32_t id;
    int64_t ts;
    uint32_t shape_off;
    uint32_t src;
    uint8_t ninputs;
    uint8_t meta[WB_EVENT_MAX_INPUTS];
    uint8_t cuda_pushed; /* this frame's id is on CUPTI's external-correlation stack */
} frame;

struct wb_prof {
    wb_prof_options o;
    wb_event *ev;
    size_t n, cap;
    uint64_t dropped;
    int64_t *shapes;
    size_t shapes_n, shapes_cap;
    char *strings;
    size_t str_n, str_cap;
    int64_t t0;
    int running, recording;
    frame stack[MAX_DEPTH];
    int depth;
    uint32_t next_id;
    int64_t kernel_ts;
    struct {
        uint32_t name; /* in the string arena */
        int64_t ts;
    } ranges[MAX_RANGES];
    int nranges;
    int in_step;
    int64_t step_ts, step_no;
    int64_t mem_peak;
    double cost_ns;
    wb_dispatch_hooks hooks;
    const wb_dispatch_hooks *previous;
    int cuda;                  /* CUPTI is tracing for this session */
    struct launch_note *notes; /* cuda launches: the op and the work its descriptor declared */
    size_t nnotes, cap_notes;
    uint32_t cuda_stream; /* the stream the plugin's kernels ran on (for the lane name) */
    char device_note[256];
};

static wb_prof *current;
static wb_prof_stack_fn stack_provider;

void wb_prof_set_stack_provider(wb_prof_stack_fn fn) { stack_provider = fn; }
wb_prof *wb_prof_current(void) { return current; }

static inline int64_t clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The next free event, or NULL (counted as dropped) when the buffer is full. Callers fill
 * every field with one struct store. */
static inline wb_event *slot(wb_prof *p) {
    if (p->n == p->cap) {
        p->dropped++;
        return NULL;
    }
    return &p->ev[p->n++];
}

/* Copies s into the string arena; returns its offset, or WB_EVENT_NONE when full. */
static uint32_t arena_string(wb_prof *p, const char *s) {
    size_t len = strlen(s) + 1;
    if (p->str_n + len > p->str_cap) return WB_EVENT_NONE;
    memcpy(p->strings + p->str_n, s, len);
    p->str_n += len;
    return (uint32_t)(p->str_n - len);
}

static inline uint32_t enclosing_op(const wb_prof *p) {
    int d = p->depth - 1;
    return d >= 0 && d < MAX_DEPTH ? p->stack[d].id : 0;
}

/* ---- dispatcher hooks ------------------------------------------------------------------------- */

/* Opens a frame on the op stack (an op, or a runtime scope such as a graph launch); NULL past
 * MAX_DEPTH, where the depth is still counted so the matching end stays balanced. */
static frame *push_frame(wb_prof *p) {
    int d = p->depth++;
    if (d >= MAX_DEPTH) return NULL;
    frame *f = &p->stack[d];
    f->id = ++p->next_id;
    f->ninputs = 0;
    f->cuda_pushed = 0;
    f->shape_off = 0;
    f->src = WB_EVENT_NONE;
    return f;
}

static void on_op_begin(void *user, const wb_op_call *c) {
    wb_prof *p = user;
    frame *f = push_frame(p);
    if (!f) return;
    if (p->cuda && c->device == WB_DEVICE_CUDA) { /* kernels -> this op (`to` may end on another device) */
        wb_cuda_trace_push(f->id);
        f->cuda_pushed = 1;
    }
    if (p->recording && p->o.record_host) {
        if (p->o.record_shapes) {
            f->shape_off = (uint32_t)p->shapes_n;
            for (int i = 0; i < c->nin && i < WB_EVENT_MAX_INPUTS; i++) {
                const wb_tensor *t = c->in[i];
                int nd = t ? t->ndim : -1; /* -1: an absent optional input */
                if (p->shapes_n + (size_t)(nd > 0 ? nd : 0) > p->shapes_cap) break;
                for (int k = 0; k < nd; k++)
                    p->shapes[p->shapes_n++] = t->shape[k];
                f->meta[i] = (uint8_t)((nd + 1) | ((t ? (int)t->dtype : 0) << 4));
                f->ninputs++;
            }
        }
        if (p->o.with_stack && stack_provider) {
            char buf[256];
            stack_provider(buf, sizeof buf);
            if (buf[0]) f->src = arena_string(p, buf);
        }
    }
    f->ts = clock_ns(); /* last, so the bookkeeping above is not billed to the op */
}

static void on_op_end(void *user, const wb_op_call *c, wb_status status) {
    int64_t now = clock_ns();
    wb_prof *p = user;
    int d = --p->depth;
    if (d < MAX_DEPTH && p->stack[d].cuda_pushed) wb_cuda_trace_pop();
    if (d >= MAX_DEPTH || !p->recording || !p->o.record_host) return;
    frame *f = &p->stack[d];
    wb_event *e = slot(p);
    if (!e) return;
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
                    .link = d > 0 ? p->stack[d - 1].id : 0,
                    .src = f->src,
                    .shape_off = f->shape_off,
                    .kind = WB_EV_OP,
                    .lane = WB_LANE_HOST,
                    .ninputs = f->ninputs,
                    .failed = status != WB_OK,
                    .in_meta = {f->meta[0], f->meta[1], f->meta[2]}};
}

static void on_kernel_begin(void *user, const wb_kernel_desc *desc) {
    (void)desc;
    ((wb_prof *)user)->kernel_ts = clock_ns();
}

static void on_kernel_end(void *user, const wb_kernel_desc *desc) {
    int64_t now = clock_ns();
    wb_prof *p = user;
    if (!p->recording || !p->o.record_device) return;
    wb_event *e = slot(p);
    if (!e) return;
    *e = (wb_event){.name = desc->name,
                    .ts_ns = p->kernel_ts - p->t0,
                    .dur_ns = now - p->kernel_ts,
                    .flops = desc->flops,
                    .bytes = (float)desc->bytes,
                    .id = ++p->next_id,
                    .link = enclosing_op(p),
                    .src = WB_EVENT_NONE,
                    .threads = (uint16_t)desc->threads,
                    .kind = WB_EV_KERNEL,
                    .lane = WB_LANE_CPU_DEVICE};
}

static void on_memory(int64_t delta) {
    wb_prof *p = current;
    if (!p) return;
    int64_t live = (int64_t)wb_storage_bytes_live();
    if (live > p->mem_peak) p->mem_peak = live;
    if (!p->recording || !p->o.record_host || !p->o.profile_memory) return;
    wb_event *e = slot(p);
    if (!e) return;
    *e = (wb_event){.name = delta >= 0 ? "alloc" : "free",
                    .ts_ns = clock_ns() - p->t0,
                    .flops = (double)live,
                    .bytes = (float)delta,
                    .link = enclosing_op(p),
                    .src = WB_EVENT_NONE,
                    .kind = WB_EV_MEMORY,
                    .lane = WB_LANE_HOST};
}

void wb_prof_runtime(const char *name, int64_t t0_ns) {
    wb_prof *p = current;
    if (!p || !p->recording || !p->o.record_host) return;
    int64_t now = clock_ns();
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
    if (f && p->cuda) { /* a graph's kernels -> the graph launch */
        wb_cuda_trace_push(f->id);
        f->cuda_pushed = 1;
    }
    if (f) f->ts = clock_ns();
}

void wb_prof_scope_end(const char *name) {
    wb_prof *p = current;
    if (!p || p->depth == 0) return;
    int64_t now = clock_ns();
    int d = --p->depth;
    if (d < MAX_DEPTH && p->stack[d].cuda_pushed) wb_cuda_trace_pop();
    if (d >= MAX_DEPTH || !p->recording || !p->o.record_host) return;
    frame *f = &p->stack[d];
    wb_event *e = slot(p);
    if (!e) return;
    *e = (wb_event){.name = name,
                    .ts_ns = f->ts - p->t0,
                    .dur_ns = now - f->ts,
                    .id = f->id,
                    .link = d > 0 ? p->stack[d - 1].id : 0,
                    .src = WB_EVENT_NONE,
                    .kind = WB_EV_RUNTIME,
                    .lane = WB_LANE_HOST};
}

/* ---- sessions ---------------------------------------------------------------------------------- */

wb_status wb_prof_new(const wb_prof_options *opts, wb_prof **out) {
    *out = NULL;
    if (opts->max_events < 16 || opts->max_events > ((int64_t)1 << 28))
        return wb_error(WB_ERR_ARGUMENT, "profiler: max_events must be between 16 and 2^28, got %lld",
                        (long long)opts->max_events);
    wb_prof *p = calloc(1, sizeof *p);
    if (!p) return wb_error(WB_ERR_MEMORY, "profiler: out of memory");
    p->o = *opts;
    p->cap = (size_t)opts->max_events;
    p->ev = aligned_alloc(64, p->cap * sizeof(wb_event));
    p->shapes_cap = p->cap * 4;
    p->shapes = malloc(p->shapes_cap * sizeof(int64_t));
    p->str_cap = p->cap * 16 + 4096;
    p->strings = malloc(p->str_cap);
    if (!p->ev || !p->shapes || !p->strings) {
        wb_prof_free(p);
        return wb_error(WB_ERR_MEMORY, "profiler: cannot allocate a buffer for %lld events",
                        (long long)opts->max_events);
    }
    /* Touch the buffer now: page faults during recording would be billed to the ops. */
    memset(p->ev, 0, p->cap * sizeof(wb_event));
    p->t0 = clock_ns();
    *out = p;
    return WB_OK;
}

void wb_prof_free(wb_prof *p) {
    if (!p) return;
    if (p->running) wb_prof_stop(p);
    free(p->ev), free(p->shapes), free(p->strings), free(p->notes), free(p);
}

/* What one recorded op costs the caller: two clock reads and an append, timed on a scratch
 * copy of the real path (an op begin/end pair writes one event). */
static double calibrate(wb_prof *p) {
    enum { N = 4096 };
    wb_op_def def = {.name = "calibration"};
    wb_op_call call = {.def = &def};
    size_t n = p->n, dropped = p->dropped;
    uint64_t next = p->next_id;
    int64_t t0 = clock_ns();
    for (int i = 0; i < N; i++) {
        on_op_begin(p, &call);
        on_op_end(p, &call, WB_OK);
        if (p->n > n) p->n = n; /* do not keep calibration events */
    }
    double cost = (double)(clock_ns() - t0) / N;
    p->n = n, p->dropped = dropped, p->next_id = next;
    return cost;
}

wb_status wb_prof_start(wb_prof *p) {
    if (current == p) return WB_OK;
    if (current)
        return wb_error(WB_ERR_UNSUPPORTED, "profiler: a session is already running (sessions do not nest; "
                                            "stop the other one first)");
    p->hooks = (wb_dispatch_hooks){p, on_op_begin, on_op_end, on_kernel_begin, on_kernel_end};
    int was = p->recording;
    p->recording = 1;
    p->cost_ns = calibrate(p);
    p->recording = was;
    p->previous = wb_dispatch_set_hooks(&p->hooks);
    wb_storage_set_observer(on_memory);
    p->mem_peak = (int64_t)wb_storage_bytes_live();
    p->depth = 0;
    p->running = 1;
    current = p;
    p->device_note[0] = '\0';
    if (wb_cuda_info_get()) wb_prof_cuda_ready(); /* cuda in use in this process: trace it */
    return WB_OK;
}

void wb_prof_cuda_ready(void) {
    wb_prof *p = current;
    if (!p || p->cuda || !p->o.record_device) return;
    char saved[512]; /* whatever error the caller is reporting stays its own */
    snprintf(saved, sizeof saved, "%s", wb_error_message());
    p->cuda = wb_cuda_trace_start();
    if (!p->cuda) snprintf(p->device_note, sizeof p->device_note, "%s", wb_error_message());
    wb_error(WB_OK, "%s", saved);
}

/* ---- CUPTI records -> events ------------------------------------------------------------------- */

typedef struct rec_buf {
    wb_cuda_record *r;
    size_t n, cap;
    int oom;
} rec_buf;

static void collect(void *user, const wb_cuda_record *r) {
    rec_buf *b = user;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        wb_cuda_record *q = realloc(b->r, cap * sizeof *q);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->r = q, b->cap = cap;
    }
    b->r[b->n++] = *r;
}

typedef struct launch_note {
    uint32_t op, seq;
    int used;
    double flops, bytes;
} launch_note;

/* A kernel queued on cuda by the op now running: CUPTI's record will carry the name and the
 * times; the work counts come from here (matched by op, in launch order). */
void wb_prof_device_launch(const wb_kernel_desc *desc) {
    wb_prof *p = current;
    if (!p || !p->cuda || !p->recording) return;
    if (p->nnotes == p->cap_notes) {
        size_t cap = p->cap_notes ? p->cap_notes * 2 : 256;
        launch_note *q = realloc(p->notes, cap * sizeof *q);
        if (!q) return;
        p->notes = q, p->cap_notes = cap;
    }
    p->notes[p->nnotes] = (launch_note){enclosing_op(p), (uint32_t)p->nnotes, 0, desc->flops, desc->bytes};
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

/* Collects what CUPTI buffered and appends it: kernels and copies on the cuda lane, API calls
 * (launches, synchronize, graph launch) on the host lane, each linked to the op that caused it
 * through the external correlation id pushed in on_op_begin. */
static void cuda_flush(wb_prof *p) {
    const wb_cuda_api *api = p->cuda ? wb_cuda_api_get() : NULL;
    if (!api) return;
    rec_buf b = {0};
    uint64_t dropped = 0;
    if (api->trace_flush(collect, &b, &dropped)) {
        snprintf(p->device_note, sizeof p->device_note, "cuda records lost: %s", api->last_error());
        free(b.r);
        return;
    }
    if (!p->recording) b.n = 0; /* drained, not kept: the schedule is not recording this step */
    p->dropped += dropped + (b.oom ? 1 : 0);
    size_t npairs = 0;
    corr_pair *pairs = malloc((b.n ? b.n : 1) * sizeof *pairs);
    for (size_t i = 0; pairs && i < b.n; i++)
        if (b.r[i].kind == WB_CU_REC_EXTERNAL)
            pairs[npairs++] = (corr_pair){b.r[i].correlation, (uint32_t)b.r[i].external_id};
    if (pairs) qsort(pairs, npairs, sizeof *pairs, corr_cmp);
    if (p->nnotes) qsort(p->notes, p->nnotes, sizeof *p->notes, note_cmp);
    int64_t off = wb_cuda_clock_offset();
    for (size_t i = 0; i < b.n; i++) {
        const wb_cuda_record *r = &b.r[i];
        if (r->kind == WB_CU_REC_EXTERNAL) continue;
        corr_pair key = {r->correlation, 0}, *hit = pairs ? bsearch(&key, pairs, npairs, sizeof key, corr_cmp) : NULL;
        /* API calls and the host's waits for the device (synchronization records) are host-side */
        int host = r->kind == WB_CU_REC_RUNTIME || r->kind == WB_CU_REC_DRIVER || r->kind == WB_CU_REC_SYNC;
        if (host ? !p->o.record_host : !p->o.record_device) continue;
        wb_event *e = slot(p);
        if (!e) break;
        launch_note *note = NULL;
        if (r->kind == WB_CU_REC_KERNEL) {
            p->cuda_stream = r->stream;
            if (hit) note = note_for(p, hit->external);
        }
        *e = (wb_event){.name = r->name,
                        .ts_ns = (int64_t)r->start_ns - off - p->t0,
                        .dur_ns = (int64_t)(r->end_ns - r->start_ns),
                        .flops = note ? note->flops : 0,
                        .bytes = note ? (float)note->bytes : (float)r->bytes,
                        .id = ++p->next_id,
                        .link = hit ? hit->external : 0,
                        .src = WB_EVENT_NONE,
                        .threads = host ? (uint16_t)r->cbid : 0,
                        .kind = host                          ? WB_EV_RUNTIME
                                : r->kind == WB_CU_REC_KERNEL ? WB_EV_KERNEL
                                                              : WB_EV_MEMCPY,
                        .lane = host ? WB_LANE_HOST : WB_LANE_CUDA};
    }
    free(pairs);
    free(b.r);
    p->nnotes = 0;
}

const char *wb_prof_device_note(const wb_prof *p) { return p->device_note; }

const char *wb_prof_lane_name(const wb_prof *p, int lane) {
    static char buf[64];
    if (lane == WB_LANE_HOST) return "host";
    if (lane == WB_LANE_CPU_DEVICE) return "cpu:0 stream 0";
    snprintf(buf, sizeof buf, "cuda:0 stream %u", p->cuda_stream);
    return buf;
}

void wb_prof_stop(wb_prof *p) {
    if (!p->running) return;
    wb_prof_end_step(p);
    while (p->nranges > 0)
        wb_prof_range_pop(p);
    cuda_flush(p);
    if (p->cuda) wb_cuda_trace_stop();
    p->cuda = 0;
    wb_dispatch_set_hooks(p->previous);
    wb_storage_set_observer(NULL);
    p->running = 0;
    if (current == p) current = NULL;
}

int wb_prof_is_running(const wb_prof *p) { return p->running; }
void wb_prof_set_recording(wb_prof *p, int on) { p->recording = on; }

void wb_prof_end_step(wb_prof *p) {
    if (!p->in_step) return;
    cuda_flush(p); /* a step's device records belong to it (on_trace_ready reads them) */
    p->in_step = 0;
    if (!p->recording) return;
    wb_event *e = slot(p);
    if (!e) return;
    *e = (wb_event){.name = "ProfileStep",
                    .ts_ns = p->step_ts - p->t0,
                    .dur_ns = clock_ns() - p->step_ts,
                    .id = (uint32_t)p->step_no,
                    .src = WB_EVENT_NONE,
                    .kind = WB_EV_STEP,
                    .lane = WB_LANE_HOST};
}

void wb_prof_step(wb_prof *p, int64_t number) {
    wb_prof_end_step(p);
    p->in_step = 1;
    p->step_no = number;
    p->step_ts = clock_ns();
}

wb_status wb_prof_range_push(wb_prof *p, const char *name) {
    if (p->nranges == MAX_RANGES)
        return wb_error(WB_ERR_RANGE, "profiler: more than %d nested ranges (missing pop?)", MAX_RANGES);
    p->ranges[p->nranges].name = arena_string(p, name);
    p->ranges[p->nranges++].ts = clock_ns();
    return WB_OK;
}

wb_status wb_prof_range_pop(wb_prof *p) {
    if (p->nranges == 0) return wb_error(WB_ERR_RANGE, "profiler: pop() without a matching push()");
    int64_t now = clock_ns();
    p->nranges--;
    if (!p->recording || !p->o.record_host) return WB_OK;
    wb_event *e = slot(p);
    if (!e) return WB_OK;
    uint32_t name = p->ranges[p->nranges].name;
    *e = (wb_event){.name = name == WB_EVENT_NONE ? "?" : p->strings + name,
                    .ts_ns = p->ranges[p->nranges].ts - p->t0,
                    .dur_ns = now - p->ranges[p->nranges].ts,
                    .id = ++p->next_id,
                    .src = WB_EVENT_NONE,
                    .kind = WB_EV_RANGE,
                    .lane = WB_LANE_HOST};
    return WB_OK;
}

size_t wb_prof_count(const wb_prof *p) { return p->n; }
const wb_event *wb_prof_event(const wb_prof *p, size_t i) { return i < p->n ? &p->ev[i] : NULL; }
uint64_t wb_prof_dropped(const wb_prof *p) { return p->dropped; }
int64_t wb_prof_peak_memory(const wb_prof *p) { return p->mem_peak; }
double wb_prof_event_cost_ns(const wb_prof *p) { return p->cost_ns; }

const int64_t *wb_prof_shape(const wb_prof *p, const wb_event *e, int input) {
    size_t off = e->shape_off;
    for (int i = 0; i < input; i++)
        off += (size_t)(wb_event_ndim(e, i) > 0 ? wb_event_ndim(e, i) : 0);
    return p->shapes + off;
}

const char *wb_prof_src(const wb_prof *p, const wb_event *e) {
    return e->src == WB_EVENT_NONE ? NULL : p->strings + e->src;
}

void wb_prof_clear(wb_prof *p) {
    p->n = 0;
    p->dropped = 0;
    p->shapes_n = 0;
    /* strings of open ranges must survive: keep the arena when ranges are open */
    if (p->nranges == 0) p->str_n = 0;
}

/* ---- kernel names ------------------------------------------------------------------------ */

static int is_tile(const char *s, size_t n) { /* "6x16" */
    size_t i = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    if (i == 0 || i >= n || s[i] != 'x') return 0;
    size_t j = ++i;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    return i == n && i > j;
}

void wb_kernel_name_decode(const char *name, wb_kernel_launch_info *out) {
    memset(out, 0, sizeof *out);
    if (!name || strncmp(name, "wb_", 3)) return;
    const char *parts[16];
    size_t lens[16];
    int n = 0;
    for (const char *s = name + 3; *s && n < 16;) {
        const char *e = strchr(s, '_');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        parts[n] = s, lens[n++] = len;
        s += len + (e ? 1 : 0);
        if (!e) break;
    }
    int tile = -1;
    for (int i = 1; i < n; i++)
        if (is_tile(parts[i], lens[i])) tile = i;
    if (tile < 0) return; /* pointwise kernels: wb_<op>_<isa> */
    /* op = parts before the isa (the part just before the tile) */
    size_t op_len = (size_t)(parts[tile - 1] - parts[0]) - (tile > 1 ? 1 : 0);
    if (tile == 1) op_len = 0;
    snprintf(out->op, sizeof out->op, "%.*s", (int)op_len, parts[0]);
    snprintf(out->isa, sizeof out->isa, "%.*s", (int)lens[tile - 1], parts[tile - 1]);
    snprintf(out->tile, sizeof out->tile, "%.*s", (int)lens[tile], parts[tile]);
    if (tile + 1 < n) snprintf(out->layout, sizeof out->layout, "%.*s", (int)lens[tile + 1], parts[tile + 1]);
    if (tile + 2 < n) snprintf(out->epilogue, sizeof out->epilogue, "%s", parts[tile + 2]);
}

/* ---- Chrome trace --------------------------------------------------------------------------- */

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
    static const char *const names[] = {"op", "kernel", "runtime", "memory", "range", "step", "memcpy"};
    return kind >= 0 && kind <= WB_EV_MEMCPY ? names[kind] : "?";
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

wb_status wb_prof_export_chrome(const wb_prof *p, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f)
        return wb_error(WB_ERR_ARGUMENT, "export_chrome_trace: cannot open '%s' for writing: %s", path,
                        strerror(errno));
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
    fprintf(f, "%llu}, \"traceEvents\": [\n", (unsigned long long)p->dropped);
    fputs("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"args\": {\"name\": \"host\"}},\n"
          "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": \"main thread\"}},\n"
          "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": \"cpu:0 (device)\"}},\n"
          "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 0, \"args\": {\"name\": \"cpu:0 stream "
          "0\"}},\n"
          "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 0, \"args\": {\"sort_index\": 0}},\n"
          "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 1, \"args\": {\"sort_index\": 1}}",
          f);
    if (p->cuda_stream || wb_cuda_info_get()) {
        fprintf(f,
                ",\n{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 2, \"args\": {\"name\": \"cuda:0 (%s)\"}},\n"
                "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 2, \"tid\": 0, \"args\": {\"name\": \"%s\"}},\n"
                "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": 2, \"args\": {\"sort_index\": 2}}",
                wb_cuda_info_get() ? wb_cuda_info_get()->name : "device", wb_prof_lane_name(p, WB_LANE_CUDA));
    }
    for (size_t i = 0; i < p->n; i++) {
        const wb_event *e = &p->ev[i];
        int pid = e->lane;
        double ts = (double)e->ts_ns / 1000.0, dur = (double)e->dur_ns / 1000.0;
        fputs(",\n", f);
        if (e->kind == WB_EV_MEMORY) { /* a counter track of live bytes */
            fprintf(f,
                    "{\"ph\": \"C\", \"name\": \"memory\", \"pid\": 0, \"ts\": %.3f, \"args\": {\"allocated_bytes\": "
                    "%lld}}",
                    ts, (long long)e->flops);
            continue;
        }
        fputs("{\"ph\": \"X\", \"cat\": ", f);
        json_string(f, wb_event_kind_name(e->kind));
        fputs(", \"name\": ", f);
        if (e->kind == WB_EV_STEP) {
            fprintf(f, "\"ProfileStep#%llu\"", (unsigned long long)e->id);
        } else {
            json_string(f, e->name);
        }
        fprintf(f, ", \"pid\": %d, \"tid\": 0, \"ts\": %.3f, \"dur\": %.3f, \"args\": {", pid, ts, dur);
        fprintf(f, "\"id\": %llu", (unsigned long long)e->id);
        if (e->kind == WB_EV_OP || e->kind == WB_EV_KERNEL)
            fprintf(f, ", \"correlation\": %llu", (unsigned long long)(e->kind == WB_EV_OP ? e->id : e->link));
        if (e->flops > 0 || e->bytes > 0) fprintf(f, ", \"flops\": %.0f, \"bytes\": %.0f", e->flops, (double)e->bytes);
        if (e->kind == WB_EV_RUNTIME && e->threads) fprintf(f, ", \"cbid\": %d", e->threads);
        if (e->kind == WB_EV_KERNEL) {
            wb_kernel_launch_info k;
            wb_kernel_name_decode(e->name, &k);
            fprintf(f, ", \"threads\": %d", e->threads);
            if (k.tile[0])
                fprintf(f, ", \"isa\": \"%s\", \"tile\": \"%s\", \"layout\": \"%s\", \"epilogue\": \"%s\"", k.isa,
                        k.tile, k.layout, k.epilogue[0] ? k.epilogue : "none");
        }
        if (e->ninputs) {
            fputs(", \"input_shapes\": ", f);
            shapes_json(f, p, e);
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
    fputs("\n]}\n", f);
    free(op_ts);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return wb_error(WB_ERR_ARGUMENT, "export_chrome_trace: writing '%s' failed: %s", path, strerror(errno));
    return WB_OK;
}
