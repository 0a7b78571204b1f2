/* profiler_internal.h: the session object shared by the recorder (profiler.c), its event store
 * (profiler_store.c: chunks, spill file, ring, interned strings), the device-trace merge
 * (profiler_device.c), the aggregation (profiler_aggregate.c), the Chrome-trace writer
 * (trace_chrome.c) and reader (trace_read.c, trace_record.c), and the groups read over the store
 * (profiler_groups.c, profiler_stacks.c). Internal to libwb. */
#ifndef WB_PROFILER_INTERNAL_H
#define WB_PROFILER_INTERNAL_H

#include <wb/clock.h>

#include <stdlib.h>

#include <wb_kernels/spans.h>

#include "backend.h"
#include "op.h"
#include <wb/profiler.h>

#define MAX_DEPTH  64
#define MAX_RANGES 64

/* One chunk of the event store: fixed-size records, and the side data (dims, storage ids,
 * strides) of the events in it, so that a chunk is whole on its own: spilled to the file, read
 * back or dropped by the ring as one piece. Chunks are aligned to their size, so the chunk of an
 * event (and its side data) is found from the event's address. */
#define WB_CHUNK_BYTES  ((size_t)2 << 20)
#define WB_CHUNK_EVENTS 24575
#define WB_CHUNK_SIDE   65536
typedef struct wb_prof_chunk {
    uint32_t n;      /* events (set when the chunk is sealed or read back) */
    uint32_t side_n; /* int64s of side data used */
    char pad[56];
    wb_event ev[WB_CHUNK_EVENTS];
    int64_t side[WB_CHUNK_SIDE];
} wb_prof_chunk;

static inline const wb_prof_chunk *wb_chunk_of(const wb_event *e) {
    return (const wb_prof_chunk *)((uintptr_t)e & ~(uintptr_t)(WB_CHUNK_BYTES - 1));
}

/* Where a chunk is: in memory (mem), or in the spill file at `off` (mem NULL). */
typedef struct chunk_ref {
    wb_prof_chunk *mem;
    int64_t off;
    uint32_t n, side_n;
} chunk_ref;

/* Why events were not kept (the first cause is named; all are counted). */
enum { WB_DROP_NONE = 0, WB_DROP_MAX_EVENTS, WB_DROP_STOP, WB_DROP_RING, WB_DROP_SPILL_ERROR, WB_DROP_DEVICE };

/* The side data an op collects while it runs, copied into its event's chunk when it ends:
 * input dims, then storage ids, then (views) the input's strides and the output's geometry. */
#define FRAME_SIDE (WB_EVENT_MAX_INPUTS * WB_MAX_DIMS + WB_EVENT_MAX_INPUTS + 1 + WB_MAX_DIMS + 1 + 2 * WB_MAX_DIMS)

typedef struct frame {
    uint32_t id;
    int64_t ts;
    uint32_t side_n; /* int64s used in side */
    uint32_t src;
    uint8_t ninputs;
    uint8_t meta[WB_EVENT_MAX_INPUTS];
    uint8_t device_pushed; /* this frame's id is on the device tracer's correlation stack */
    uint8_t nflow;         /* storage ids reserved in side (inputs, then the output) */
    uint32_t flow_out;     /* side index of the output's id, filled when the op ends */
    uint32_t geometry;     /* view ops with record_shapes: side index of the output geometry
                              (ndim, shape[WB_MAX_DIMS], stride[WB_MAX_DIMS]), 0: none */
    int64_t side[FRAME_SIDE];
} frame;

struct wb_prof {
    wb_prof_options o;
    /* the store: recording appends at cur (fast path) until cur_end, the end of the current
     * chunk or of what max_events allows; then profiler_store.c takes over */
    wb_event *cur, *cur_end;
    wb_prof_chunk *open;    /* the chunk being filled (NULL before the first event) */
    chunk_ref *chunks;      /* sealed chunks, oldest first */
    size_t nchunks, cap_chunks;
    wb_prof_chunk **spare;  /* chunk memory to reuse */
    size_t nspare, cap_spare;
    size_t resident;        /* chunks in memory (open, sealed and spare) */
    uint64_t sealed_events; /* events in sealed chunks (kept ones) */
    uint64_t accepted;      /* events ever accepted (max_events counts these) */
    int spill_fd;           /* -1 until the first spill */
    int64_t spill_bytes;
    char spill_error[256];
    int full;               /* stop policy or a spill error: nothing more is recorded */
    int64_t ring_cut_ns;    /* ring: the latest start among evicted events (-1: none evicted) */
    uint64_t dropped;
    uint64_t dropped_by[WB_DROP_DEVICE + 1];
    int first_drop;         /* WB_DROP_* of the first drop */
    int64_t drop_ts, drop_step; /* the session time and step of the first drop (-1: none) */
    uint64_t drop_index;    /* events kept before the first drop */
    /* interned strings (range names, call sites): stored once, never moved */
    char **strs;
    uint32_t nstrs, cap_strs;
    uint32_t *str_slots;
    uint32_t cap_str_slots;
    char *str_block;
    size_t str_block_left;
    char **str_blocks;
    size_t nstr_blocks, cap_str_blocks;
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
    int cuda_lane;          /* a kernel record arrived from the device's tracer */
    char device_lane[48];   /* a session read back or fed: the device lane's name as given ("") */
    /* a session read back or fed: the last kernel appended, whose worker shares (thread events)
     * follow it and take its kind (their unit, tiles or elements, comes from the kind's fields) */
    uint32_t read_kernel_id;
    const wb_kernel_kind *read_kernel;
    char device_note[256];
};

typedef struct launch_note {
    uint32_t op, seq;
    int used;
    const wb_kernel_kind *kind;
    double flops, bytes;
} launch_note;

/* ---- the store (profiler_store.c) ---- */
/* The next event when the current chunk is full: a new chunk (spilling or dropping the oldest
 * as the policy says), or NULL (counted as dropped). `side` int64s of side data come with it. */
wb_event *wb_store_slot_slow(wb_prof *p, uint32_t side, int64_t **side_out);
/* Makes sure the next event has room without a new chunk (calibration). */
void wb_store_ensure(wb_prof *p);
void wb_store_init(wb_prof *p);
void wb_store_clear(wb_prof *p);
void wb_store_free(wb_prof *p);
/* Interns s: its index (WB_EVENT_NONE when out of memory); the string stays at wb_store_string. */
uint32_t wb_store_intern(wb_prof *p, const char *s);
static inline const char *wb_store_string(const wb_prof *p, uint32_t i) {
    return i < p->nstrs ? p->strs[i] : "?";
}
/* Counts n dropped events (why), remembering the first drop's time and step. */
void wb_store_drop(wb_prof *p, int why, uint64_t n);

/* The next free event, or NULL (counted as dropped) when it cannot be kept. Callers fill
 * every field with one struct store. */
static inline wb_event *slot(wb_prof *p) {
    if (p->cur == p->cur_end) return wb_store_slot_slow(p, 0, NULL);
    return p->cur++;
}

/* The same with n int64s of side data in the event's chunk (*side; shape_off is its index). */
static inline wb_event *slot_side(wb_prof *p, uint32_t n, int64_t **side) {
    if (p->cur == p->cur_end || p->open->side_n + n > WB_CHUNK_SIDE) return wb_store_slot_slow(p, n, side);
    *side = p->open->side + p->open->side_n;
    p->open->side_n += n;
    return p->cur++;
}

static inline uint32_t enclosing_op(const wb_prof *p) {
    int d = p->depth - 1;
    return d >= 0 && d < MAX_DEPTH ? p->stack[d].id : 0;
}

/* A set of event ids (ops linked from kernels, say) with a dense index per member: a bitmap and
 * the count of members before each word, 1/8 byte and 1/16 byte per id. */
typedef struct wb_idset {
    uint64_t *bits;
    uint32_t *before;
    size_t words;
    size_t count;
} wb_idset;
static inline int wb_idset_init(wb_idset *s, uint32_t max_id) {
    s->words = (size_t)max_id / 64 + 1;
    s->bits = calloc(s->words, sizeof *s->bits);
    s->before = malloc(s->words * sizeof *s->before);
    s->count = 0;
    return s->bits && s->before;
}
static inline void wb_idset_add(wb_idset *s, uint32_t id) {
    if (id / 64 < s->words) s->bits[id / 64] |= 1ull << (id % 64);
}
static inline int wb_idset_has(const wb_idset *s, uint32_t id) {
    return id / 64 < s->words && (s->bits[id / 64] >> (id % 64) & 1);
}
/* Counts the members (after the last add); returns how many. */
static inline size_t wb_idset_finish(wb_idset *s) {
    size_t n = 0;
    for (size_t w = 0; w < s->words; w++) {
        s->before[w] = (uint32_t)n;
        n += (size_t)__builtin_popcountll(s->bits[w]);
    }
    return s->count = n;
}
/* The dense index of a member, or -1. */
static inline int64_t wb_idset_index(const wb_idset *s, uint32_t id) {
    if (!wb_idset_has(s, id)) return -1;
    uint64_t below = s->bits[id / 64] & ((1ull << (id % 64)) - 1);
    return (int64_t)s->before[id / 64] + __builtin_popcountll(below);
}
static inline void wb_idset_free(wb_idset *s) { free(s->bits), free(s->before); }

/* Merges the device tracer's buffered records into p's events (profiler_device.c). */
void wb_prof_device_flush(wb_prof *p);
/* A kernel queued on an asynchronous device (cuda) by the running op: its flops and bytes are
 * attached to the kernel record that arrives later (the device hooks' device_launch). */
void wb_prof_device_launch(wb_prof *p, const wb_kernel_desc *desc);
/* A device with a tracer has just become usable (or a session starts while it is): a session
 * that records device activity turns its tracer on (the device hooks' device_ready). */
void wb_prof_device_ready(wb_prof *p, wb_device device);

/* Fills the model's step_threads_max/_mean from the kernel events (profiler_step_threads.c):
 * the steps' intervals are set already. */
struct wb_diff_model;
wb_status wb_diff_model_threads(const wb_prof *p, struct wb_diff_model *m);

#endif
