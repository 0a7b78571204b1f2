/* wb/trace_record.h (floor observe): one event as a trace writes it (the Chrome event's ph, cat, name, pid/tid lane,
 * times and its args), between the JSON reader (trace_read.c) or a list of Lua tables
 * (wb.profiler.from_events) and a session's store: both append through
 * wb_trace_event_append, so a synthetic event reaches the analysis as a trace's would. */
#ifndef WB_TRACE_RECORD_H
#define WB_TRACE_RECORD_H

#include <stdint.h>

#include <wb/profiler.h>

/* The fields as wb/trace_schema.h declares them. Times are ns; lanes as the writer puts them:
 * pid 0 host, pid 1 the cpu device (tid 0) and its workers (tid t: worker t-1), pid 2 the cuda
 * device. */
typedef struct wb_trace_event {
    char ph[4], cat[16], name[512], src[512], op[64], ops[256], api[32], isa[32], tile[24], layout[8],
        epilogue[WB_EPILOGUE_MAX], device[16], lane[48], unit[12], bp[4];
    int64_t pid, tid, ts, dur;
    int64_t id, correlation, parent, threads, kernel, thread, cbid, flow_id, sort_index;
    double flops, bytes, work, run_delay, allocated;
    int failed, has_run_delay;
    int ninputs, nflow, ndims[WB_EVENT_MAX_INPUTS], dtype[WB_EVENT_MAX_INPUTS];
    int n_in_stride, n_out_shape, n_out_stride, geometry;
    /* filled as far as the counts above say: not cleared between events */
    int64_t flow[WB_EVENT_MAX_INPUTS + 1], in_stride[WB_MAX_DIMS], out_shape[WB_MAX_DIMS], out_stride[WB_MAX_DIMS];
    int64_t dims[WB_EVENT_MAX_INPUTS][WB_MAX_DIMS];
} wb_trace_event;

/* Clears the strings and the scalars (the arrays are read only as far as their counts say). */
void wb_trace_event_clear(wb_trace_event *x);
/* The event kind a category names ("op", "kernel", ...), -1 for none. */
int wb_trace_kind_of(const char *cat);
/* Appends x to p's store; 0 when it is not an event the workbench writes. A memory event is a
 * slice (cat "memory") or, in traces written before those, a point of the "memory <device>"
 * counter, read only while no slice has come (*slices, 0 at the start of a document). */
int wb_trace_event_append(wb_prof *p, const wb_trace_event *x, int *slices);

#endif
