/* findings_index.h: the index the findings' rules read (findings_index.c builds it from the store
 * in two passes, findings_rules.c runs the rules on it), and the value tree's builders. The
 * index: ops by id, device events in time order (all, and per
 * lane), each op's kernels (its own and its children's), top-level ops, runtime calls, memory
 * events, worker shares per kernel, ranges and steps. Internal to libwb. */
#ifndef WB_FINDINGS_INDEX_H
#define WB_FINDINGS_INDEX_H

#include <wb/findings_groups.h>
#include "profiler_internal.h"

#define FX_MAX_FLOW 4 /* storage ids of an op: its inputs, then its output */

typedef struct fx_op {
    const char *name;
    int64_t ts, dur;
    uint64_t index; /* its event's index (read again for a group's first member) */
    uint32_t id, parent;
    int64_t flow[FX_MAX_FLOW];
    int64_t numel[WB_EVENT_MAX_INPUTS];
    int64_t gemm_out; /* output elements of a GEMM op from its shapes, -1 unknown */
    int64_t last_kernel_ts;
    /* its kernels, its own and its children's (up to 64 levels) */
    uint32_t nkernels, nonlayout; /* all; those without a GEMM layout */
    uint8_t nflow, failed, ninputs, no_work; /* no_work: 0 flops and 0 bytes declared */
    int8_t dtype[WB_EVENT_MAX_INPUTS]; /* -1: absent input */
    uint8_t itemsize; /* of its second input's dtype (else the first's), 4 when unknown */
} fx_op;

typedef struct fx_dev { /* a kernel, copy or memset */
    int64_t ts, dur;
    double flops, bytes;
    uint64_t seq;
    const wb_kernel_kind *kind; /* kernels */
    const char *name;
    uint32_t id, corr;
    uint8_t kind_ev, lane, has_fields; /* has_fields: a GEMM kind (its events carry a layout) */
} fx_dev;

typedef struct fx_span { /* runtime calls, memory events, worker shares, ranges, steps */
    int64_t ts, dur;
    uint64_t seq;
    const char *name;
    uint32_t link, id;
    double extra; /* steps: the run-queue delay (-1 none) */
    uint8_t lane, api;
} fx_span;

typedef struct fx_index {
    const wb_prof *p;
    wb_idset ids; /* op ids -> index into op */
    fx_op *op;
    size_t nop;
    fx_dev *dev; /* in time order */
    size_t ndev;
    int32_t *lane_dev; /* per lane (in the order first met) the indexes into dev, in time order */
    size_t *lane_start;
    uint8_t lane_order[256];
    int nlanes;
    int32_t *top; /* top-level ops in time order */
    size_t ntop;
    fx_span *runtime, *memory, *share, *range, *step;
    size_t nruntime, nmemory, nshare, nrange, nstep;
    fx_span *window; /* ranges, else steps, else the whole recording; in time order */
    size_t nwindow;
    int whole; /* the window is the whole recording */
    uint64_t events, device_events;
    int oom;
} fx_index;

wb_status fx_index_build(fx_index *ix, const wb_prof *p);
void fx_index_free(fx_index *ix);
/* The op with that id, or NULL. */
fx_op *fx_op_of(fx_index *ix, uint32_t id);
/* The shares of kernel id (in recording order) as [*first, *first + n) in ix->share. */
size_t fx_shares(const fx_index *ix, uint32_t kernel_id, size_t *first);
/* Reads event `index` again (its shapes, strides); NULL on a read error. c is left open: close it. */
const wb_event *fx_event_at(const fx_index *ix, uint64_t index, wb_prof_cursor *c);

/* ---- building values (an allocation failure sets *oom and returns a dummy) ---- */
typedef struct fx_out {
    int oom;
} fx_out;
wb_val *fx_add(fx_out *o, wb_val *container, const char *key); /* key NULL for a list */
void fx_set_int(fx_out *o, wb_val *m, const char *key, int64_t v);
void fx_set_num(fx_out *o, wb_val *m, const char *key, double v);
void fx_set_str(fx_out *o, wb_val *m, const char *key, const char *v);
void fx_set_bool(fx_out *o, wb_val *m, const char *key, int v);
wb_val *fx_set_list(fx_out *o, wb_val *m, const char *key);
wb_val *fx_set_map(fx_out *o, wb_val *m, const char *key);
void fx_push_int(fx_out *o, wb_val *list, int64_t v);
/* A map's value by key, or NULL. */
wb_val *fx_get(wb_val *m, const char *key);

#endif
