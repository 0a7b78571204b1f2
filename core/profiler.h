/* profiler.h: recording what ran. A session hooks the dispatcher and the storage allocator and
 * fills a preallocated event buffer: host ops (nested, with correlation ids), kernels on the
 * device lane (each correlated to the op that launched it), memory (bytes allocated and freed),
 * ranges, steps and runtime calls. A full buffer counts dropped events; nothing crashes. */
#ifndef WB_PROFILER_H
#define WB_PROFILER_H

#include "wb.h"

typedef enum wb_event_kind {
    WB_EV_OP = 0,
    WB_EV_KERNEL,
    WB_EV_RUNTIME,
    WB_EV_MEMORY,
    WB_EV_RANGE,
    WB_EV_STEP,
} wb_event_kind;

/* Lanes: the host thread, and one lane per device stream (the CPU device has its own, so a
 * CPU trace reads like a GPU trace). */
enum { WB_LANE_HOST = 0, WB_LANE_CPU_DEVICE = 1 };

#define WB_EVENT_MAX_INPUTS 3

typedef struct wb_event {
    const char *name; /* static, interned, or in the session's string arena */
    int64_t ts_ns;    /* start, on the session clock (CLOCK_MONOTONIC - session start) */
    int64_t dur_ns;   /* 0 for instants (memory) */
    uint8_t kind;     /* wb_event_kind */
    uint8_t lane;
    uint8_t ninputs;      /* shapes recorded (record_shapes) */
    uint8_t failed;       /* an op that returned an error */
    int32_t threads;      /* kernels: CPU threads used */
    uint64_t id;          /* ops: their correlation id; steps: the step number */
    uint64_t correlation; /* kernels: the id of the op that launched them; ops: own id */
    uint64_t parent;      /* ops, kernels: the enclosing op (0: none) */
    double flops, bytes;  /* with_flops (ops, kernels); memory: +allocated / -freed bytes */
    int64_t mem_total;    /* memory: bytes allocated after this event */
    const char *src;      /* with_stack: "file:line" of the Lua call site (arena) */
    int8_t in_ndim[WB_EVENT_MAX_INPUTS];
    uint8_t in_dtype[WB_EVENT_MAX_INPUTS];
    uint32_t shape_off; /* dims in the session's shape arena */
} wb_event;

typedef struct wb_prof_options {
    int record_host;   /* activities: "cpu" (host ops, ranges, runtime, memory) */
    int record_device; /* activities: "device" (kernels) */
    int record_shapes;
    int with_stack;
    int with_flops;
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
/* A runtime call (sync, graph launch, ...) that took [t0, now). */
void wb_prof_runtime(const char *name, int64_t t0_ns);
/* The running session (NULL when none). */
wb_prof *wb_prof_current(void);
int64_t wb_prof_now(const wb_prof *p);

size_t wb_prof_count(const wb_prof *p);
const wb_event *wb_prof_event(const wb_prof *p, size_t i);
const int64_t *wb_prof_shape(const wb_prof *p, const wb_event *e, int input);
uint64_t wb_prof_dropped(const wb_prof *p);
int64_t wb_prof_peak_memory(const wb_prof *p);
/* Measured cost of recording one event, in ns (calibrated when the session starts). */
double wb_prof_event_cost_ns(const wb_prof *p);
void wb_prof_clear(wb_prof *p);
/* Chrome-trace JSON (Perfetto, chrome://tracing), streamed to `path`. */
wb_status wb_prof_export_chrome(const wb_prof *p, const char *path);

#endif
