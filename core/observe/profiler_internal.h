/* profiler_internal.h: the session object shared by the recorder (profiler.c), the device-trace
 * merge (profiler_device.c) and the Chrome-trace writer (trace_chrome.c). Internal to libwb. */
#ifndef WB_PROFILER_INTERNAL_H
#define WB_PROFILER_INTERNAL_H

#include "clock.h"

#include <wb_kernels/spans.h>

#include "backend.h"
#include "op.h"
#include "profiler.h"

#define MAX_DEPTH  64
#define MAX_RANGES 64

typedef struct frame {
    uint32_t id;
    int64_t ts;
    uint32_t shape_off;
    uint32_t src;
    uint8_t ninputs;
    uint8_t meta[WB_EVENT_MAX_INPUTS];
    uint8_t device_pushed; /* this frame's id is on the device tracer's correlation stack */
    uint8_t nflow;         /* storage ids reserved in the shape arena (inputs, then the output) */
    uint32_t flow_out;     /* arena index of the output's id, filled when the op ends */
    uint32_t geometry;     /* view ops with record_shapes: arena index of the output geometry
                              (ndim, shape[WB_MAX_DIMS], stride[WB_MAX_DIMS]), 0: none */
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
    wb_cpu_spans spans; /* the running cpu kernel's per-thread shares (record_device) */
    struct {
        uint32_t name; /* in the string arena */
        int64_t ts;
    } ranges[MAX_RANGES];
    int nranges;
    int in_step;
    int64_t step_ts, step_no, step_run_delay;
    int64_t mem_peak;
    double cost_ns;
    wb_dispatch_hooks hooks;
    const wb_dispatch_hooks *previous;
    wb_device_hooks device_hooks; /* installed while the session runs (backend.h) */
    const wb_backend *device;  /* the device whose tracer this session turned on (kept after stop) */
    int device_on;             /* that tracer is on now */
    struct launch_note *notes; /* device launches: the op, the kernel kind and the work declared */
    size_t nnotes, cap_notes;
    uint32_t device_stream; /* the stream the device's kernels ran on (for the lane name) */
    char device_note[256];
};

typedef struct launch_note {
    uint32_t op, seq;
    int used;
    const wb_kernel_kind *kind;
    double flops, bytes;
} launch_note;

/* The next free event, or NULL (counted as dropped) when the buffer is full. Callers fill
 * every field with one struct store. */
static inline wb_event *slot(wb_prof *p) {
    if (p->n == p->cap) {
        p->dropped++;
        return NULL;
    }
    return &p->ev[p->n++];
}

static inline uint32_t enclosing_op(const wb_prof *p) {
    int d = p->depth - 1;
    return d >= 0 && d < MAX_DEPTH ? p->stack[d].id : 0;
}

/* Merges the device tracer's buffered records into p's events (profiler_device.c). */
void wb_prof_device_flush(wb_prof *p);
/* A kernel queued on an asynchronous device (cuda) by the running op: its flops and bytes are
 * attached to the kernel record that arrives later (the device hooks' device_launch). */
void wb_prof_device_launch(wb_prof *p, const wb_kernel_desc *desc);
/* A device with a tracer has just become usable (or a session starts while it is): a session
 * that records device activity turns its tracer on (the device hooks' device_ready). */
void wb_prof_device_ready(wb_prof *p, wb_device device);

#endif
