/* wb/profiler.h (floor observe): recording what ran. A session hooks the dispatcher and the storage allocator and
 * appends fixed-size records to a chunked store: host ops (nested, with correlation ids), kernels
 * on the device lane (each correlated to the op that launched it), memory (bytes allocated and
 * freed), ranges, steps and runtime calls. Memory is bounded by max_memory: past it the oldest
 * chunks go to a spill file (default), are dropped (ring), or recording stops; whatever is not
 * kept is counted and named. */
#ifndef WB_PROFILER_H
#define WB_PROFILER_H

#include <wb/kernel.h>
#include <wb/wb.h>

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
    uint32_t shape_off; /* record_shapes: first dim in its chunk's side data */
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
    int64_t max_events; /* events kept at most (0: no limit but memory) */
    int64_t max_memory; /* bytes of event chunks in memory */
    int policy;         /* WB_PROF_SPILL, WB_PROF_RING or WB_PROF_STOP: what happens at max_memory */
    const char *spill_dir; /* where the spill file goes (NULL: $TMPDIR, else /tmp); copied */
} wb_prof_options;

enum { WB_PROF_SPILL = 0, WB_PROF_RING, WB_PROF_STOP };
const char *wb_prof_policy_name(int policy);

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

/* Events kept (and visible: a ring hides the partial step at its start). */
size_t wb_prof_count(const wb_prof *p);
/* Reads the kept events in recording order, chunk by chunk (a spilled chunk is read back into
 * the cursor's own buffer: an event pointer is good until the next call). */
typedef struct wb_prof_cursor {
    const wb_prof *p;
    size_t chunk;       /* next sealed chunk to load; nchunks: the open one */
    const wb_event *at, *end;
    struct wb_prof_chunk *buf; /* read-back buffer, allocated at the first spilled chunk */
    int64_t visible_from;      /* ring: events that start before are hidden */
    uint64_t index;            /* events returned so far */
    int done;
    wb_status status;          /* not WB_OK when reading the spill file failed (message set) */
} wb_prof_cursor;
void wb_prof_cursor_open(wb_prof_cursor *c, const wb_prof *p);
/* The event with index `first` (0-based among visible events) comes next. */
void wb_prof_cursor_seek(wb_prof_cursor *c, uint64_t first);
const wb_event *wb_prof_cursor_next(wb_prof_cursor *c);
void wb_prof_cursor_close(wb_prof_cursor *c);
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
/* One line naming what was dropped and why ("" when nothing was). */
void wb_prof_drop_note(const wb_prof *p, char *buf, size_t len);
/* The store's state: bytes in memory, bytes spilled, the policy, and the spill error ("" none). */
typedef struct wb_prof_store_stats {
    int64_t memory_bytes, spill_bytes, max_memory;
    int policy;
    uint64_t kept;
    const char *spill_error;
} wb_prof_store_stats;
void wb_prof_store_stats_get(const wb_prof *p, wb_prof_store_stats *s);
/* The session's device kernels ran on a cuda lane (set when the device's records arrive). */
int wb_prof_has_device_lane(const wb_prof *p);
/* Display name of a lane ("host", "cpu:0 stream 0", "cuda:0 stream 13"). */
const char *wb_prof_lane_name(const wb_prof *p, int lane);
/* Why device kernels on cuda are not in this session ("" when they are, or cuda is unused). */
const char *wb_prof_device_note(const wb_prof *p);
int64_t wb_prof_peak_memory(const wb_prof *p);
/* Measured cost of recording one event, in ns (calibrated when the session starts). */
double wb_prof_event_cost_ns(const wb_prof *p);
void wb_prof_clear(wb_prof *p);
/* Chrome-trace JSON (Perfetto, chrome://tracing), streamed to `path` chunk by chunk; gzip when
 * the path ends in ".gz". */
wb_status wb_prof_export_chrome(const wb_prof *p, const char *path);
/* The same, with more events (JSON objects joined by commas) after the session's, and more
 * members ("key": value, ...) after traceEvents: the findings and what the rules read. The
 * events and bytes written are returned in *events and *bytes (either may be NULL). */
wb_status wb_prof_export_chrome_with(const wb_prof *p, const char *path, const char *extra_events,
                                     const char *extra_members, uint64_t *events, uint64_t *bytes);

/* A Chrome trace the workbench wrote (plain or .gz, laid out as the export writes it or as any
 * JSON tool rewrote it), read back in one streaming pass into a new, stopped session stored under
 * opts' max_memory and policy (trace_read.c), within the reader's limits (an event 1 MiB, the
 * other members 64 MiB, nesting 64, 256 MiB without an event; a regular file only). *lines: lines
 * read; *members: the document's members but traceEvents, as one JSON object's text (malloc'ed,
 * the caller frees it; NULL on failure). */
wb_status wb_prof_load_chrome(const char *path, const wb_prof_options *opts, wb_prof **out, uint64_t *lines,
                              char **members);

/* ---- aggregation (profiler_aggregate.c): key_averages over the records ---- */
typedef struct wb_prof_row {
    const char *name; /* interned or static; valid while the session lives */
    int kind;         /* WB_EV_* */
    char *input_shapes; /* group_by_input_shape: "[[2, 3], [3]]" (owned), else NULL */
    const char *src;    /* group_by_stack_n: the call site, else NULL */
    int64_t calls, kernels;
    int64_t self_cpu_ns, cpu_total_ns, self_device_ns, device_total_ns;
    double flops, bytes;
    int64_t spread_ns, spread_launches; /* parallel kernels: slowest minus fastest worker */
} wb_prof_row;
typedef struct wb_prof_rows {
    wb_prof_row *row;
    size_t n;
} wb_prof_rows;
/* One row per op / range / runtime name (and input shapes, call site when asked) and per
 * kernel / copy name, in the order first seen (ops and the like first, then device rows). */
wb_status wb_prof_aggregate(const wb_prof *p, int by_input_shape, int by_stack, wb_prof_rows *out);
void wb_prof_rows_free(wb_prof_rows *r);

#endif
