/* trace_import.c: torch.profiler's traces (Kineto JSON; the legacy profiler's bare array) and any
 * other Chrome trace, mapped onto the workbench's events one event at a time as trace_read.c
 * streams the document. Kineto: cpu_op -> op, user_annotation -> range, ProfilerStep#N -> step,
 * kernel / gpu_memcpy / gpu_memset -> device work, cuda_runtime / cuda_driver -> runtime calls
 * (the launch API), "External id" and "correlation" -> the op that launched a kernel, Input Dims /
 * Input type -> shapes and dtypes, [memory] -> memory events, python_function -> the call site of
 * the ops under it. Nesting comes from time on each thread, in the order Kineto writes events (by
 * start). It does not keep anything per event beyond the store: the maps hold one entry per op. */
#include "trace_import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyindex.h"
#include "profiler_internal.h"
#include "trace_json.h"

#define IMPORT_DEPTH   64
#define IMPORT_THREADS 1024
#define DTYPE_OTHER    15 /* in_meta's high nibble: a dtype the workbench has no name for */

const char *wb_trace_lasting(const char *s) {
    static wb_keyindex kept; /* hashed: 80,000 distinct ops load in linear time */
    if (!s || !*s) return NULL;
    int64_t id = wb_keyindex_get(&kept, s, NULL);
    return id < 0 ? NULL : kept.key[id];
}

/* int64 -> uint32, open addressing (a key's slot holds key + 1; 0 is empty), doubled at half. */
typedef struct imap {
    int64_t *key;
    uint32_t *val;
    size_t cap, n;
} imap;

static size_t imix(int64_t k, size_t cap) {
    uint64_t h = (uint64_t)k * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ h >> 29) & (cap - 1);
}

static void imap_put(imap *m, int64_t k, uint32_t v) {
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        int64_t *key = calloc(cap, sizeof *key);
        uint32_t *val = malloc(cap * sizeof *val);
        if (!key || !val) return free(key), free(val);
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                size_t s = imix(m->key[i] - 1, cap);
                while (key[s]) s = (s + 1) & (cap - 1);
                key[s] = m->key[i], val[s] = m->val[i];
            }
        free(m->key), free(m->val);
        m->key = key, m->val = val, m->cap = cap;
    }
    size_t s = imix(k, m->cap);
    while (m->key[s] && m->key[s] != k + 1) s = (s + 1) & (m->cap - 1);
    if (!m->key[s]) m->n++;
    m->key[s] = k + 1, m->val[s] = v;
}

static uint32_t imap_get(const imap *m, int64_t k) {
    if (!m->cap) return 0;
    for (size_t s = imix(k, m->cap); m->key[s]; s = (s + 1) & (m->cap - 1))
        if (m->key[s] == k + 1) return m->val[s];
    return 0;
}

/* One host thread's open events: ops (id), ranges and steps (id 0), Python frames (src). */
typedef struct open_ev {
    int64_t end;
    uint32_t op, src;
} open_ev;

typedef struct thread {
    int64_t pid, tid;
    open_ev stack[IMPORT_DEPTH];
    int depth;
    uint32_t last_op;   /* the op appended last (legacy flows start at it) */
    int64_t flow_in;    /* legacy: the flow that ended on this (device) thread last, -1: none */
} thread;

enum { F_CHROME = 0, F_LEGACY, F_KINETO };
enum { C_OPS, C_SHAPES, C_DTYPES, C_STRIDES, C_KERNELS, C_COPIES, C_RUNTIME, C_LAUNCHES, C_SYNCS, C_LINKED, C_MEMORY,
       C_STEPS, C_RANGES, C_PYTHON, C_FLOWS, C_SKIPPED, C_UNFINISHED, C_UNREAD, C_COUNT };
/* (unfinished: complete events whose "dur" is -1, which torch writes since 2.7 for an op still
 * open when profiling stopped: left out; unread: timed events of the kinds not read, B/E pairs,
 * async, counters, samples and the rest) */
static const char *const counter_names[C_COUNT] = {"ops", "shapes", "dtypes", "strides", "kernels", "copies",
    "runtime", "launches", "syncs", "linked", "memory", "steps", "ranges", "python", "flows", "skipped", "unfinished",
    "unread"};

struct wb_import {
    int format, bare;
    int64_t base; /* the first event's ts: times are kept from it */
    int has_base;
    thread *threads;
    size_t nthreads;
    size_t last; /* the thread of the event before */
    imap by_external, by_correlation, by_flow;
    int64_t first_stream;
    uint64_t count[C_COUNT];
    uint64_t appended; /* events put in the store */
    char why[128]; /* what was wrong with the event refused last, where the parse can tell ("" else) */
    /* device work whose launch came later in the file (Kineto writes the GPU's events first at
     * times): linked once the whole document is read (wb_import_finish) */
    struct pending {
        uint64_t index;
        int64_t external, correlation;
    } *pending;
    size_t npending, cap_pending;
};

wb_import *wb_import_new(void) {
    wb_import *im = calloc(1, sizeof *im);
    if (im) im->threads = calloc(IMPORT_THREADS, sizeof *im->threads), im->first_stream = -1;
    if (im && !im->threads) free(im), im = NULL;
    return im;
}

void wb_import_free(wb_import *im) {
    if (!im) return;
    free(im->threads);
    free(im->by_external.key), free(im->by_external.val);
    free(im->by_correlation.key), free(im->by_correlation.val);
    free(im->by_flow.key), free(im->by_flow.val);
    free(im->pending);
    free(im);
}

int wb_import_kineto_member(const char *name) {
    static const char *const kineto[] = {"schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds",
        "traceName", "cuda_runtime_version", "cuda_driver_version", "trace_id", NULL};
    for (int i = 0; kineto[i]; i++)
        if (!strcmp(name, kineto[i])) return 1;
    return 0;
}

void wb_import_bare_array(wb_import *im) { im->bare = 1; }

/* ---- one event's fields ---------------------------------------------------------------------- */

typedef struct ev_in {
    char ph[4], cat[32], name[512], pidname[32];
    int64_t pid, tid, ts, dur, flow_id;
    int has_ts, has_flow_id;
    int64_t external, correlation, stream, cbid;
    int has_external, has_correlation, has_stream;
    double mem_bytes, total_allocated;
    int device_type, has_mem;
    int ninputs, has_dims, has_types, has_strides;
    int ndims[WB_EVENT_MAX_INPUTS], dtype[WB_EVENT_MAX_INPUTS];
    int64_t dims[WB_EVENT_MAX_INPUTS][WB_MAX_DIMS];
} ev_in;

/* pid and tid: a number, or a string (its hash; "CPU functions" and the like kept by name). */
static int64_t id_value(jp *j, char *name, size_t len) {
    jp_ws(j);
    if (*j->s == '"') {
        char s[128];
        jp_string(j, s, sizeof s);
        if (name && len) {
            size_t n = strnlen(s, len - 1);
            memcpy(name, s, n), name[n] = '\0';
        }
        uint64_t h = 1469598103934665603ull;
        for (const char *c = s; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        return (int64_t)(h >> 2) | ((int64_t)1 << 61); /* apart from every numeric id */
    }
    return (int64_t)jp_number(j);
}

static int dtype_of(const char *type) {
    if (!strcmp(type, "float")) return WB_F32;
    if (!strcmp(type, "c10::BFloat16")) return WB_BF16;
    return DTYPE_OTHER;
}

/* "Input Dims": one entry per input, a flat list for a tensor; nested lists (tensor lists) and
 * nulls are inputs without a shape. Only the first WB_EVENT_MAX_INPUTS are kept. */
static void parse_dims(jp *j, ev_in *e) {
    if (!jp_eat(j, '[')) return (void)(j->bad = 1);
    e->has_dims = 1;
    if (jp_eat(j, ']')) return;
    int i = 0;
    do {
        jp_ws(j);
        const char *at = j->s;
        int n = -1;
        int64_t d[WB_MAX_DIMS];
        if (*at == '[') {
            jp_eat(j, '[');
            int nested = jp_eat(j, '[');
            j->s = at;
            if (nested) jp_skip(j);
            else n = jp_ints(j, d, WB_MAX_DIMS);
            /* a shape no tensor can have (a negative size, more than 2^53 elements): none */
            double count = 1;
            for (int q = 0; q < n; q++)
                count *= d[q] < 0 ? -1.0 : (double)d[q];
            if (count < 0 || count > 0x1p53) n = -1;
        } else jp_skip(j);
        if (i < WB_EVENT_MAX_INPUTS) {
            e->ndims[i] = n;
            if (n > 0) memcpy(e->dims[i], d, (size_t)n * sizeof *d);
        }
        i++;
    } while (!j->bad && jp_eat(j, ','));
    e->ninputs = i < WB_EVENT_MAX_INPUTS ? i : WB_EVENT_MAX_INPUTS;
    if (!jp_eat(j, ']')) j->bad = 1;
}

static void parse_types(jp *j, ev_in *e) {
    char t[64];
    if (!jp_eat(j, '[')) return (void)(j->bad = 1);
    e->has_types = 1;
    if (jp_eat(j, ']')) return;
    int i = 0;
    do {
        jp_ws(j);
        if (*j->s == '"') jp_string(j, t, sizeof t);
        else t[0] = '\0', jp_skip(j);
        if (i < WB_EVENT_MAX_INPUTS) e->dtype[i] = !t[0] || !strcmp(t, "Scalar") ? -1 : dtype_of(t);
        i++;
    } while (!j->bad && jp_eat(j, ','));
    if (!jp_eat(j, ']')) j->bad = 1;
}

static void parse_args(jp *j, ev_in *e) {
    char key[32];
    if (!jp_eat(j, '{')) return (void)(j->bad = 1);
    if (jp_eat(j, '}')) return;
    do {
        if (!jp_string(j, key, sizeof key) || !jp_eat(j, ':')) return (void)(j->bad = 1);
        jp_ws(j);
        int num = *j->s == '-' || (*j->s >= '0' && *j->s <= '9');
        if (!strcmp(key, "External id") && num) e->external = jp_int(j), e->has_external = 1;
        else if (!strcmp(key, "correlation") && num) e->correlation = jp_int(j), e->has_correlation = 1;
        else if (!strcmp(key, "stream") && num) e->stream = jp_int(j), e->has_stream = 1;
        else if (!strcmp(key, "cbid") && num) e->cbid = jp_int(j);
        else if (!strcmp(key, "Bytes") && num) e->mem_bytes = jp_number(j), e->has_mem = 1;
        else if (!strcmp(key, "Total Allocated") && num) e->total_allocated = jp_number(j);
        else if (!strcmp(key, "Device Type") && num) e->device_type = (int)jp_int(j);
        else if (!strcmp(key, "Input Dims")) parse_dims(j, e);
        else if (!strcmp(key, "Input type")) parse_types(j, e);
        else if (!strcmp(key, "Input Strides")) e->has_strides = 1, jp_skip(j);
        else jp_skip(j);
    } while (!j->bad && jp_eat(j, ','));
    if (!jp_eat(j, '}')) j->bad = 1;
}

static int parse(const char *text, ev_in *e) {
    jp j = {.s = text};
    char key[16];
    memset(e, 0, offsetof(ev_in, dims));
    if (!jp_eat(&j, '{')) return 0;
    if (jp_eat(&j, '}')) return 1;
    do {
        if (!jp_string(&j, key, sizeof key) || !jp_eat(&j, ':')) return 0;
        jp_ws(&j);
        if (!strcmp(key, "ph")) jp_string(&j, e->ph, sizeof e->ph);
        else if (!strcmp(key, "cat") && *j.s == '"') jp_string(&j, e->cat, sizeof e->cat);
        else if (!strcmp(key, "name") && *j.s == '"') jp_string(&j, e->name, sizeof e->name);
        else if (!strcmp(key, "pid")) e->pid = id_value(&j, e->pidname, sizeof e->pidname);
        else if (!strcmp(key, "tid")) e->tid = id_value(&j, NULL, 0);
        else if (!strcmp(key, "ts")) e->ts = jp_micros(&j), e->has_ts = 1;
        else if (!strcmp(key, "dur")) e->dur = jp_micros(&j);
        else if (!strcmp(key, "id")) e->flow_id = id_value(&j, NULL, 0), e->has_flow_id = 1;
        else if (!strcmp(key, "args")) parse_args(&j, e);
        else jp_skip(&j);
    } while (!j.bad && jp_eat(&j, ','));
    return !j.bad && jp_eat(&j, '}');
}

/* ---- mapping ----------------------------------------------------------------------------------- */

static thread *thread_of(wb_import *im, int64_t pid, int64_t tid) {
    size_t last = im->last;
    if (last < im->nthreads && im->threads[last].pid == pid && im->threads[last].tid == tid) return &im->threads[last];
    for (size_t i = 0; i < im->nthreads; i++)
        if (im->threads[i].pid == pid && im->threads[i].tid == tid) return &im->threads[im->last = i];
    size_t i = im->nthreads < IMPORT_THREADS ? im->nthreads++ : IMPORT_THREADS - 1; /* the rest share one */
    im->threads[i] = (thread){.pid = pid, .tid = tid, .flow_in = -1};
    return &im->threads[im->last = i];
}

/* Closes what ended by ts; the innermost open op and Python frame. */
static void enclosing(thread *t, int64_t ts, uint32_t *op, uint32_t *src) {
    while (t->depth > 0 && t->stack[t->depth - 1].end <= ts) t->depth--;
    *op = 0, *src = WB_EVENT_NONE;
    for (int d = t->depth - 1; d >= 0 && (!*op || *src == WB_EVENT_NONE); d--) {
        if (!*op && t->stack[d].op) *op = t->stack[d].op;
        if (*src == WB_EVENT_NONE && t->stack[d].src != WB_EVENT_NONE) *src = t->stack[d].src;
    }
}

static void open_event(thread *t, int64_t end, uint32_t op, uint32_t src) {
    if (t->depth < IMPORT_DEPTH) t->stack[t->depth++] = (open_ev){.end = end, .op = op, .src = src};
}

static int api_of(const char *name) {
    if (strstr(name, "Synchronize")) return WB_API_SYNC;
    if (strstr(name, "GraphLaunch")) return WB_API_GRAPH_LAUNCH;
    if (strstr(name, "LaunchKernel") || strstr(name, "LaunchCooperativeKernel")) return WB_API_LAUNCH;
    if (strstr(name, "Occupancy")) return WB_API_OCCUPANCY;
    return WB_API_OTHER;
}

/* "path/model.py(12): forward" -> "path/model.py:12", the workbench's call-site form. */
static uint32_t frame_src(wb_prof *p, const char *name) {
    char buf[512];
    const char *open = strchr(name, '(');
    int line = 0;
    if (open && sscanf(open, "(%d)", &line) == 1) snprintf(buf, sizeof buf, "%.*s:%d", (int)(open - name), name, line);
    else snprintf(buf, sizeof buf, "%s", name);
    return wb_store_intern(p, buf);
}

static int is_cat(const ev_in *e, const char *a, const char *b) {
    return !strcasecmp(e->cat, a) || (b && !strcasecmp(e->cat, b));
}

/* Appends one event; its shapes go to the side data. */
static void put(wb_prof *p, wb_import *im, wb_event ev, const ev_in *x) {
    int64_t side_buf[WB_EVENT_MAX_INPUTS * WB_MAX_DIMS];
    uint32_t n = 0;
    uint8_t meta[WB_EVENT_MAX_INPUTS] = {0};
    int ninputs = ev.kind == WB_EV_OP && x->has_dims ? x->ninputs : 0;
    for (int i = 0; i < ninputs; i++) {
        int nd = x->ndims[i], dt = x->has_types && i < WB_EVENT_MAX_INPUTS ? x->dtype[i] : DTYPE_OTHER;
        if (dt < 0) nd = -1;
        for (int k = 0; k < nd; k++) side_buf[n++] = x->dims[i][k];
        meta[i] = (uint8_t)((nd + 1) | ((dt < 0 ? 0 : dt) << 4));
    }
    int64_t *side = NULL;
    wb_event *e = n ? slot_side(p, n, &side) : slot(p);
    if (!e) return; /* counted as dropped by the store */
    if (side) memcpy(side, side_buf, n * sizeof *side);
    ev.shape_off = side ? (uint32_t)(side - wb_chunk_of(e)->side) : 0;
    ev.ninputs = (uint8_t)ninputs;
    memcpy(ev.in_meta, meta, sizeof meta);
    *e = ev;
    im->appended++;
}

int wb_import_event(wb_import *im, wb_prof *p, const char *json) {
    ev_in x;
    im->why[0] = 0;
    if (!parse(json, &x)) return 0;
    int complete = !strcmp(x.ph, "X"), instant = !strcmp(x.ph, "i") || !strcmp(x.ph, "I");
    if (complete && x.dur < 0) { /* (other kinds have no duration: theirs is not read) */
        if (x.dur == -1000) return im->count[C_UNFINISHED]++, 1;
        snprintf(im->why, sizeof im->why, "a complete event whose \"dur\" is negative (-%lld.%03lld us; -1 alone is "
                 "read: an op still open)", (long long)(-x.dur / 1000), (long long)(-x.dur % 1000));
        return 0;
    }
    if (!complete) x.dur = 0; /* (read below as the event's end) */
    int legacy_cpu = !strcmp(x.pidname, "CPU functions"), legacy_dev = !strcmp(x.pidname, "CUDA functions");
    if (legacy_cpu || legacy_dev) im->format = im->format == F_KINETO ? F_KINETO : F_LEGACY;
    if (!x.has_ts || (!complete && !instant && strcmp(x.ph, "s") && strcmp(x.ph, "f"))) { /* metadata, or unread */
        im->count[C_UNREAD] += x.has_ts && x.ph[0] && strcmp(x.ph, "M");
        return 1;
    }
    if (!im->has_base && (complete || instant)) im->base = x.ts, im->has_base = 1;
    int64_t ts = x.ts - im->base;
    thread *t = thread_of(im, x.pid, x.tid);
    wb_event ev = {.ts_ns = ts, .dur_ns = x.dur, .src = WB_EVENT_NONE, .lane = WB_LANE_HOST};
    uint32_t op, src;

    if (!strcmp(x.ph, "s") || !strcmp(x.ph, "f")) { /* flow arrows: Kineto's ac2g, the legacy cpu_to_cuda */
        im->count[C_FLOWS]++;
        if (!x.has_flow_id) return 1;
        if (x.ph[0] == 's') imap_put(&im->by_flow, x.flow_id, t->last_op);
        else t->flow_in = x.flow_id;
        return 1;
    }
    int kineto_device = is_cat(&x, "kernel", NULL) || is_cat(&x, "gpu_memcpy", "memcpy") ||
                        is_cat(&x, "gpu_memset", "memset");
    if (kineto_device || (legacy_dev && complete)) { /* device work on its stream */
        uint32_t link = x.has_external ? imap_get(&im->by_external, x.external) : 0;
        if (!link && x.has_correlation) link = imap_get(&im->by_correlation, x.correlation);
        if (!link && legacy_dev && t->flow_in >= 0) link = imap_get(&im->by_flow, t->flow_in);
        ev.kind = is_cat(&x, "gpu_memcpy", "memcpy") ? WB_EV_MEMCPY : is_cat(&x, "gpu_memset", "memset") ? WB_EV_MEMSET
                                                                                                       : WB_EV_KERNEL;
        ev.lane = WB_LANE_CUDA, ev.id = ++p->next_id, ev.link = link;
        if (ev.kind == WB_EV_KERNEL) {
            wb_kernel_kind key = {.external = wb_trace_lasting(x.name[0] ? x.name : "kernel")};
            ev.kernel = wb_kernel_kind_intern(&key);
            im->count[C_KERNELS]++;
        } else {
            ev.name = wb_store_string(p, wb_store_intern(p, x.name));
            im->count[C_COPIES]++;
        }
        if (!p->cuda_lane) {
            p->device_stream = (uint32_t)(im->first_stream = x.has_stream ? x.stream : x.tid);
            /* torch names its GPUs cuda:N (ROCm's too) */
            snprintf(p->device_lane, sizeof p->device_lane, "cuda:0 stream %u", p->device_stream);
        }
        p->cuda_lane = 1;
        im->count[C_LINKED] += link != 0;
        if (!link && (x.has_external || x.has_correlation) &&
            wb_grow((void **)&im->pending, &im->cap_pending, im->npending + 1, sizeof *im->pending))
            im->pending[im->npending++] = (struct pending){.index = im->appended, .external = x.has_external ? x.external : -1,
                                                           .correlation = x.has_correlation ? x.correlation : -1};
        if (kineto_device) im->format = F_KINETO;
        put(p, im, ev, &x);
        return 1;
    }
    if (instant) { /* Kineto's [memory]; other instants are marks, not events */
        if (!strcmp(x.name, "[memory]") && x.has_mem) {
            ev.kind = WB_EV_MEMORY, ev.name = "memory", ev.live_bytes = x.total_allocated, ev.bytes = (float)x.mem_bytes;
            wb_device d = WB_DEVICE_CPU;
            wb_device_parse(x.device_type == 1 ? "cuda" : "cpu", &d); /* Kineto's DeviceType: 0 CPU, 1 CUDA */
            ev.device = (uint16_t)d;
            im->count[C_MEMORY]++, im->format = F_KINETO;
            put(p, im, ev, &x);
        }
        return 1;
    }
    enclosing(t, ts, &op, &src);
    int64_t end = ts + x.dur;
    if (is_cat(&x, "python_function", "python function")) { /* the script's frames: call sites, not events */
        open_event(t, end, 0, frame_src(p, x.name));
        im->count[C_PYTHON]++, im->format = F_KINETO;
        return 1;
    }
    if (!strncmp(x.name, "ProfilerStep#", 13)) {
        ev.kind = WB_EV_STEP, ev.id = (uint32_t)strtoul(x.name + 13, NULL, 10), ev.run_delay_ns = -1;
        open_event(t, end, 0, WB_EVENT_NONE);
        im->count[C_STEPS]++;
        put(p, im, ev, &x);
        return 1;
    }
    int is_op = is_cat(&x, "cpu_op", "operator") || (legacy_cpu && !x.cat[0]);
    int is_runtime = is_cat(&x, "cuda_runtime", "runtime") || is_cat(&x, "cuda_driver", NULL);
    if (is_cat(&x, "cpu_op", "operator") || is_runtime || is_cat(&x, "user_annotation", NULL)) im->format = F_KINETO;
    if (is_runtime) {
        ev.kind = WB_EV_RUNTIME, ev.id = ++p->next_id, ev.link = op, ev.api = (uint8_t)api_of(x.name);
        ev.cbid = (uint16_t)x.cbid;
        ev.name = wb_store_string(p, wb_store_intern(p, x.name));
        if (x.has_correlation && op) imap_put(&im->by_correlation, x.correlation, op);
        im->count[C_RUNTIME]++;
        im->count[C_LAUNCHES] += ev.api == WB_API_LAUNCH, im->count[C_SYNCS] += ev.api == WB_API_SYNC;
        put(p, im, ev, &x);
        return 1;
    }
    if (!is_op && x.cat[0] && (is_cat(&x, "gpu_user_annotation", NULL) || is_cat(&x, "cuda_sync", NULL) ||
                               is_cat(&x, "Trace", NULL) || is_cat(&x, "ac2g", NULL) ||
                               is_cat(&x, "cuda_profiler_range", NULL) || is_cat(&x, "overhead", NULL))) {
        im->count[C_SKIPPED]++; /* device-side annotations, the profiler's own spans */
        return 1;
    }
    ev.name = wb_store_string(p, wb_store_intern(p, x.name));
    ev.src = src;
    if (is_op) {
        ev.kind = WB_EV_OP, ev.id = ++p->next_id, ev.link = op;
        if (x.has_external) imap_put(&im->by_external, x.external, ev.id);
        t->last_op = ev.id;
        open_event(t, end, ev.id, WB_EVENT_NONE);
        im->count[C_OPS]++;
        im->count[C_SHAPES] += x.has_dims, im->count[C_DTYPES] += x.has_types, im->count[C_STRIDES] += x.has_strides;
    } else { /* user annotations, and any other trace's complete events */
        ev.kind = WB_EV_RANGE, ev.run_delay_ns = -1;
        open_event(t, end, 0, WB_EVENT_NONE);
        im->count[C_RANGES]++;
    }
    put(p, im, ev, &x);
    return 1;
}

void wb_import_finish(wb_import *im, wb_prof *p) {
    if (!im->npending || wb_prof_dropped(p)) return; /* a ring dropped events: indices moved */
    wb_prof_cursor c;
    wb_prof_cursor_open(&c, p);
    size_t k = 0;
    for (const wb_event *e; k < im->npending && (e = wb_prof_cursor_next(&c));) {
        if (c.index - 1 != im->pending[k].index) continue;
        const struct pending *q = &im->pending[k++];
        uint32_t link = q->external >= 0 ? imap_get(&im->by_external, q->external) : 0;
        if (!link && q->correlation >= 0) link = imap_get(&im->by_correlation, q->correlation);
        /* a chunk read back from the spill file is a copy: its events keep no link */
        if (link && (c.buf == NULL || wb_chunk_of(e) != c.buf)) ((wb_event *)e)->link = link, im->count[C_LINKED]++;
    }
    wb_prof_cursor_close(&c);
}

const char *wb_import_why(const wb_import *im) { return im->why[0] ? im->why : NULL; }

char *wb_import_summary(const wb_import *im) {
    static const char *const formats[] = {"chrome", "legacy", "kineto"};
    size_t cap = 1024;
    char *s = malloc(cap);
    if (!s) return NULL;
    int n = snprintf(s, cap, "{\"format\": \"%s\", \"bare_array\": %s, \"stream\": %lld", formats[im->format],
                     im->bare ? "true" : "false", (long long)im->first_stream);
    for (int c = 0; c < C_COUNT; c++)
        n += snprintf(s + n, cap - (size_t)n, ", \"%s\": %llu", counter_names[c], (unsigned long long)im->count[c]);
    snprintf(s + n, cap - (size_t)n, "}");
    return s;
}
