/* profiler.h: recording what ran. A session hooks the dispatcher and the storage allocator and
 * fills a preallocated event buffer: host ops (nested, with correlation ids), kernels on the
 * device lane (each correlated to the op that launched it), memory (bytes allocated and freed),
 * ranges, steps and runtime calls. A full buffer counts dropped events; nothing crashes. */
#ifndef WB_PROFILER_H
#define WB_PROFILER_H

#include "kernel.h"
#include "wb.h"

typedef enum wb_event_kind {
    WB_EV_OP = 0,
    WB_EV_KERNEL,
    WB_EV_RUNTIME,
    WB_EV_MEMORY,
    WB_EV_RANGE,
    WB_EV_STEP,
    WB_EV_MEMCPY, /* a copy on a device stream (CUPTI) */
    WB_EV_THREAD, /* one worker thread's share of a parallel cpu kernel, on its own lane */
    WB_EV_MEMSET, /* a memset on a device stream (CUPTI; cuBLASLt's split-K workspaces, ...) */
} wb_event_kind;

/* Lanes: the host thread, and one lane per device stream (the CPU device has its own, so a
 * CPU trace reads like a GPU trace). */
enum { WB_LANE_HOST = 0, WB_LANE_CPU_DEVICE = 1, WB_LANE_CUDA = 2, WB_LANE_CPU_THREAD0 = 3 };
/* Worker thread t of a parallel cpu kernel is drawn on lane WB_LANE_CPU_THREAD0 + t. */
#define WB_LANE_CPU_THREADS 64
/* Kinds as the Lua events and the trace name them ("op", "kernel", ...). */
const char *wb_event_kind_name(int kind);

/* What a device API call does (runtime events): the findings count synchronizations. */
enum { WB_API_UNKNOWN = 0, WB_API_OTHER, WB_API_LAUNCH, WB_API_OCCUPANCY, WB_API_SYNC, WB_API_GRAPH_LAUNCH };
const char *wb_event_api_name(int api);

#define WB_EVENT_MAX_INPUTS 3
#define WB_EVENT_NONE       0xffffffffu

/* One event is one 64-byte cache line: recording writes into memory that is not in cache, so
 * the line count is what recording costs. */
typedef struct wb_event {
    union {
        const char *name;             /* not kernels: static, interned, or in the session's string arena */
        const wb_kernel_kind *kernel; /* kernels and thread shares: the interned kind (kernel.h) */
    };
    int64_t ts_ns;  /* start, on the session clock (CLOCK_MONOTONIC - session start) */
    int64_t dur_ns; /* 0 for instants (memory) */
    union {
        double flops;      /* with_flops (ops), kernels */
        double live_bytes; /* memory events: bytes alive on their device after the event */
        double work;       /* thread shares: tiles or elements that thread did */
        double run_delay_ns; /* steps: the host thread's run-queue delay inside them (runnable,
                                not running: /proc/thread-self/schedstat, read at the step's
                                boundaries, never inside ranges: a read costs microseconds); -1
                                unknown (ranges) */
    };
    float bytes;        /* the fewest bytes moved (ops, kernels); memory: +allocated / -freed */
    uint32_t id;        /* ops: their correlation id; kernels: the flow id; steps: the step number */
    uint32_t link;      /* ops: the enclosing op; kernels: the op that launched them (0: none);
                           thread shares: their kernel's id */
    uint32_t src;       /* with_stack: offset of "file:line" in the string arena, or WB_EVENT_NONE */
    uint32_t shape_off; /* record_shapes: first dim in the shape arena */
    union {
        uint16_t threads; /* cpu kernels: threads used; thread shares: the thread's index */
        uint16_t cbid;    /* runtime events from a device tracer: the API's callback id */
        uint16_t device;  /* memory events: the wb_device allocated on */
    };
    uint8_t kind; /* wb_event_kind */
    uint8_t lane;
    uint8_t ninputs;                      /* shapes recorded */
    uint8_t failed;                       /* an op that returned an error */
    uint8_t in_meta[WB_EVENT_MAX_INPUTS]; /* per input: low nibble ndim + 1 (0: absent), high nibble dtype */
    uint8_t nflow; /* ops: storage ids recorded after the input dims (wb_prof_flow) */
    uint8_t api;   /* runtime events from a device tracer: WB_API_* (what the call does) */
    uint8_t geometry; /* view ops (record_shapes): strides in and out recorded (wb_prof_view_geometry) */
} wb_event;

/* What the event is called: a kernel's formatted name, or the name recorded. */
static inline const char *wb_event_name(const wb_event *e) {
    return e->kind == WB_EV_KERNEL || e->kind == WB_EV_THREAD ? wb_kernel_kind_name(e->kernel) : e->name;
}

/* ndim of input i (-1 when the optional input was absent) and its dtype. */
static inline int wb_event_ndim(const wb_event *e, int i) { return (int)(e->in_meta[i] & 15) - 1; }
static inline int wb_event_dtype(const wb_event *e, int i) { return e->in_meta[i] >> 4; }

typedef struct wb_prof_options {
    int record_host;   /* activities: "cpu" (host ops, ranges, runtime, memory) */
    int record_device; /* activities: "device" (kernels) */
    int record_shapes;
    int with_stack;
    int with_flops;
    int profile_memory; /* an event per storage allocation and free (the peak is tracked anyway) */
    int64_t max_events; /* capacity of the event buffer */
} wb_prof_options;

typedef struct wb_prof wb_prof;

/* Supplies "file:line" of the current script call site (set by the Lua binding). */
typedef void (*wb_prof_stack_fn)(char *buf, size_t len);
void wb_prof_set_stack_provider(wb_prof_stack_fn fn);

wb_status wb_prof_new(const wb_prof_options *opts, wb_prof **out);
void wb_prof_free(wb_prof *p);
/* Starts observing (fails while another session runs: sessions do not nest). */
wb_status wb_prof_start(wb_prof *p);
void wb_prof_stop(wb_prof *p);
int wb_prof_is_running(const wb_prof *p);
/* The schedule switches recording on and off without stopping the session. */
void wb_prof_set_recording(wb_prof *p, int on);
/* Closes the current step (if any) and opens step `number`. */
void wb_prof_step(wb_prof *p, int64_t number);
void wb_prof_end_step(wb_prof *p);
/* User ranges on the host lane. */
wb_status wb_prof_range_push(wb_prof *p, const char *name);
wb_status wb_prof_range_pop(wb_prof *p);
/* A runtime call (sync, graph launch, ...) that took [t0, now). The backends report theirs
 * through the device hooks (backend.h) this session installs. */
void wb_prof_runtime(const char *name, int64_t t0_ns);
/* A runtime scope (graph launch): kernels launched inside it are correlated to it. */
void wb_prof_scope_begin(void);
void wb_prof_scope_end(const char *name);
/* The running session (NULL when none). */
wb_prof *wb_prof_current(void);

size_t wb_prof_count(const wb_prof *p);
const wb_event *wb_prof_event(const wb_prof *p, size_t i);
const int64_t *wb_prof_shape(const wb_prof *p, const wb_event *e, int input);
/* An op's data flow: the storage id (unique per process, 0: none) of each input, then of its
 * output (0 for an in-place op); *n is set to how many (0 when not recorded). Views share their
 * base's storage, so a chain of ops through a view keeps one id. */
const int64_t *wb_prof_flow(const wb_prof *p, const wb_event *e, int *n);
/* A view op's strides (record_shapes): its first input's strides (as many as that input's
 * ndim), and its output's ndim, shape and strides. Returns 0 when not recorded. */
int wb_prof_view_geometry(const wb_prof *p, const wb_event *e, const int64_t **in_stride, int *out_ndim,
                          const int64_t **out_shape, const int64_t **out_stride);
/* with_stack: the event's call site, or NULL. */
const char *wb_prof_src(const wb_prof *p, const wb_event *e);
uint64_t wb_prof_dropped(const wb_prof *p);
/* Display name of a lane ("host", "cpu:0 stream 0", "cuda:0 stream 13"). */
const char *wb_prof_lane_name(const wb_prof *p, int lane);
/* Why device kernels on cuda are not in this session ("" when they are, or cuda is unused). */
const char *wb_prof_device_note(const wb_prof *p);
int64_t wb_prof_peak_memory(const wb_prof *p);
/* Measured cost of recording one event, in ns (calibrated when the session starts). */
double wb_prof_event_cost_ns(const wb_prof *p);
void wb_prof_clear(wb_prof *p);
/* Chrome-trace JSON (Perfetto, chrome://tracing), streamed to `path`. */
wb_status wb_prof_export_chrome(const wb_prof *p, const char *path);
/* The same, with more events (JSON objects joined by commas) after the session's, and more
 * members ("key": value, ...) after traceEvents: the findings and what the rules read. */
wb_status wb_prof_export_chrome_with(const wb_prof *p, const char *path, const char *extra_events,
                                     const char *extra_members);

#endif
