/* wb/trace_schema.h (floor observe): the one declaration of an event's fields, as a Chrome trace
 * carries them (top level or in args) and as a Lua event table names them (p:events(),
 * wb.profiler.from_events). The trace writer (trace_chrome.c), the reader (trace_read.c), the Lua
 * event pusher and from_events (bindings/l_profiler*.c) take their keys from it, and the field
 * list of docs/profiler.md is generated from it (scripts/gen_api_docs.lua). A key written by hand
 * in those files is refused by scripts/check_layers.sh. */
#ifndef WB_TRACE_SCHEMA_H
#define WB_TRACE_SCHEMA_H

#include <stddef.h>

#include <wb/trace_record.h>

/* Where a field is: at the top of the trace's event or in its args, the same for a Lua table;
 * 0 where that side does not carry it. */
enum { WB_TP_NONE = 0, WB_TP_TOP, WB_TP_ARGS };

/* How a field is written and read. */
typedef enum wb_trace_type {
    WB_TT_STR,    /* a string (copied into the member, cut at its size) */
    WB_TT_INT,    /* an integer */
    WB_TT_NUM,    /* a number */
    WB_TT_COUNT,  /* a non-negative number; null in the trace where it was not finite */
    WB_TT_MICROS, /* a time: microseconds (ns as 3 decimals) in the trace, integer ns in Lua */
    WB_TT_BOOL,   /* true when set (absent: false) */
    WB_TT_INTS,   /* a list of integers (its count in a second member) */
    WB_TT_SHAPES, /* the inputs' shapes: a list of lists of integers, null (false in Lua) for an absent one */
    WB_TT_DTYPES, /* the inputs' dtypes: a list of names, "" (false in Lua) for an absent one */
} wb_trace_type;

/* The event kinds a field belongs to (bits of 1 << WB_EV_*); 0: metadata events and launch
 * arrows only (not events the store keeps). */
#define WB_TK(k)     (1u << (k))
#define WB_TK_ALL    0x1ffu
#define WB_TK_LAUNCH (WB_TK(WB_EV_KERNEL) | WB_TK(WB_EV_MEMCPY) | WB_TK(WB_EV_MEMSET))
#define WB_TK_COUNTS (WB_TK(WB_EV_OP) | WB_TK(WB_EV_RUNTIME) | WB_TK_LAUNCH)

/* X(ID, trace place, trace key, type, member, count member, Lua place, Lua key, kinds, doc), in
 * the order the writer puts them. */
#define WB_TRACE_FIELDS(X)                                                                                            \
    X(PH, WB_TP_TOP, "ph", WB_TT_STR, ph, ph, WB_TP_NONE, NULL, WB_TK_ALL,                                         \
      "Chrome's phase: X (a slice: every event), M (metadata: lane names), C (a counter: memory), s/f (a launch arrow)") \
    X(CAT, WB_TP_TOP, "cat", WB_TT_STR, cat, cat, WB_TP_TOP, "cat", WB_TK_ALL,                                        \
      "the kind: op, kernel, runtime, memory, range, step, memcpy, thread, memset")                                  \
    X(NAME, WB_TP_TOP, "name", WB_TT_STR, name, name, WB_TP_TOP, "name", WB_TK_ALL,                                   \
      "the op, the kernel's formatted name, the range, the runtime call; a step is ProfilerStep#N")                  \
    X(PID, WB_TP_TOP, "pid", WB_TT_INT, pid, pid, WB_TP_NONE, NULL, WB_TK_ALL,                                     \
      "the lane's process: 0 the host, 1 the cpu device, 2 a cuda device")                                           \
    X(TID, WB_TP_TOP, "tid", WB_TT_INT, tid, tid, WB_TP_NONE, NULL, WB_TK_ALL,                                     \
      "the lane's thread: on the cpu device 0 its stream, t its worker t-1")                                         \
    X(LANE, WB_TP_NONE, NULL, WB_TT_STR, lane, lane, WB_TP_TOP, "lane", WB_TK_ALL,                                 \
      "the lane by name (the trace's pid and tid): host, cpu:0 stream 0, cpu:0 thread N, cuda:0 stream N")          \
    X(TS, WB_TP_TOP, "ts", WB_TT_MICROS, ts, ts, WB_TP_TOP, "ts_ns", WB_TK_ALL,                                       \
      "the start on the session's clock (us with ns decimals in the trace, ns in Lua)")                              \
    X(DUR, WB_TP_TOP, "dur", WB_TT_MICROS, dur, dur, WB_TP_TOP, "dur_ns", WB_TK_ALL,                                  \
      "the duration (0 for an instant)")                                                                             \
    X(META_NAME, WB_TP_ARGS, "name", WB_TT_STR, lane, lane, WB_TP_NONE, NULL, 0,                                   \
      "a metadata event's name of a process or lane")                                                                \
    X(SORT_INDEX, WB_TP_ARGS, "sort_index", WB_TT_INT, sort_index, sort_index, WB_TP_NONE, NULL, 0,                   \
      "a metadata event's place of a process among the lanes")                                                       \
    X(FLOW_ID, WB_TP_TOP, "id", WB_TT_INT, flow_id, flow_id, WB_TP_NONE, NULL, 0,                                     \
      "a launch arrow's id (ph s from the op, f at the kernel): the kernel's id")                                    \
    X(BP, WB_TP_TOP, "bp", WB_TT_STR, bp, bp, WB_TP_NONE, NULL, 0,                                                     \
      "a launch arrow's binding point: e (the enclosing slice)")                                                     \
    X(ID, WB_TP_ARGS, "id", WB_TT_INT, id, id, WB_TP_TOP, "id", WB_TK_ALL & ~WB_TK(WB_EV_MEMORY),                     \
      "an op's correlation id, a kernel's flow id (its launch arrow), a step's number")                              \
    X(CORRELATION, WB_TP_ARGS, "correlation", WB_TT_INT, correlation, correlation, WB_TP_TOP, "correlation",          \
      WB_TK(WB_EV_OP) | WB_TK_LAUNCH, "an op: its own id; a kernel or copy: the id of the op that launched it")      \
    X(PARENT, WB_TP_ARGS, "parent", WB_TT_INT, parent, parent, WB_TP_TOP, "parent",                                   \
      WB_TK(WB_EV_OP) | WB_TK(WB_EV_RUNTIME) | WB_TK(WB_EV_MEMORY), "the enclosing op's id (absent: none)")          \
    X(KERNEL, WB_TP_ARGS, "kernel", WB_TT_INT, kernel, kernel, WB_TP_ARGS, "kernel", WB_TK(WB_EV_THREAD),             \
      "the id of the parallel kernel this worker's share belongs to")                                                \
    X(THREAD, WB_TP_ARGS, "thread", WB_TT_INT, thread, thread, WB_TP_ARGS, "thread", WB_TK(WB_EV_THREAD),             \
      "the worker's index")                                                                                          \
    X(WORK, WB_TP_ARGS, "work", WB_TT_COUNT, work, work, WB_TP_ARGS, "work", WB_TK(WB_EV_THREAD),                     \
      "the tiles or elements that worker did")                                                                       \
    X(UNIT, WB_TP_ARGS, "unit", WB_TT_STR, unit, unit, WB_TP_ARGS, "unit", WB_TK(WB_EV_THREAD),                       \
      "what work counts: tiles (a GEMM) or elements")                                                                \
    X(FLOPS, WB_TP_ARGS, "flops", WB_TT_COUNT, flops, flops, WB_TP_TOP, "flops", WB_TK_COUNTS,                        \
      "floating-point operations (with_flops for ops; kernels always); absent when 0")                               \
    X(BYTES, WB_TP_ARGS, "bytes", WB_TT_COUNT, bytes, bytes, WB_TP_TOP, "bytes", WB_TK_COUNTS | WB_TK(WB_EV_MEMORY),  \
      "the fewest bytes moved; a memory event: + allocated, - freed")                                                \
    X(ALLOCATED, WB_TP_ARGS, "allocated_bytes", WB_TT_NUM, allocated, allocated, WB_TP_ARGS, "allocated_bytes",      \
      WB_TK(WB_EV_MEMORY), "the bytes alive on the device after the event")                                          \
    X(DEVICE, WB_TP_ARGS, "device", WB_TT_STR, device, device, WB_TP_ARGS, "device", WB_TK(WB_EV_MEMORY),            \
      "the device allocated on: cpu, cuda")                                                                          \
    X(CBID, WB_TP_ARGS, "cbid", WB_TT_INT, cbid, cbid, WB_TP_ARGS, "cbid", WB_TK(WB_EV_RUNTIME),                      \
      "a device tracer's callback id of the API call (absent: none)")                                                \
    X(API, WB_TP_ARGS, "api", WB_TT_STR, api, api, WB_TP_ARGS, "api", WB_TK(WB_EV_RUNTIME),                           \
      "what the API call does: launch, occupancy, sync, graph_launch, other")                                        \
    X(THREADS, WB_TP_ARGS, "threads", WB_TT_INT, threads, threads, WB_TP_ARGS, "threads", WB_TK(WB_EV_KERNEL),        \
      "the threads the kernel ran on")                                                                               \
    X(OP, WB_TP_ARGS, "op", WB_TT_STR, op, op, WB_TP_ARGS, "op", WB_TK(WB_EV_KERNEL),                                 \
      "the kernel kind's op: sgemm, mul, geglu, ...")                                                                \
    X(OPS, WB_TP_ARGS, "ops", WB_TT_STR, ops, ops, WB_TP_ARGS, "ops", WB_TK(WB_EV_KERNEL),                            \
      "a generated kernel's group of ops (wb.compile)")                                                              \
    X(ISA, WB_TP_ARGS, "isa", WB_TT_STR, isa, isa, WB_TP_ARGS, "isa", WB_TK(WB_EV_KERNEL),                            \
      "a GEMM kind's instruction set: scalar, avx2, avx512, ...")                                                    \
    X(TILE, WB_TP_ARGS, "tile", WB_TT_STR, tile, tile, WB_TP_ARGS, "tile", WB_TK(WB_EV_KERNEL),                       \
      "a GEMM kind's register tile, MxN")                                                                            \
    X(LAYOUT, WB_TP_ARGS, "layout", WB_TT_STR, layout, layout, WB_TP_ARGS, "layout", WB_TK(WB_EV_KERNEL),             \
      "a GEMM kind's layout letters: how it walks A and B (nn, tn, ...)")                                            \
    X(EPILOGUE, WB_TP_ARGS, "epilogue", WB_TT_STR, epilogue, epilogue, WB_TP_ARGS, "epilogue", WB_TK(WB_EV_KERNEL),   \
      "what rides in the kernel's epilogue: none, bias, bias_gelu, ...")                                             \
    X(FLOW, WB_TP_ARGS, "flow", WB_TT_INTS, flow, nflow, WB_TP_ARGS, "flow", WB_TK(WB_EV_OP),                         \
      "the storage ids of the op's inputs, then its output's (0: an in-place op)")                                   \
    X(IN_STRIDE, WB_TP_ARGS, "in_stride", WB_TT_INTS, in_stride, n_in_stride, WB_TP_ARGS, "in_stride",                \
      WB_TK(WB_EV_OP), "a view op's input strides (record_shapes)")                                                  \
    X(OUT_SHAPE, WB_TP_ARGS, "out_shape", WB_TT_INTS, out_shape, n_out_shape, WB_TP_ARGS, "out_shape",                \
      WB_TK(WB_EV_OP), "a view op's output shape")                                                                   \
    X(OUT_STRIDE, WB_TP_ARGS, "out_stride", WB_TT_INTS, out_stride, n_out_stride, WB_TP_ARGS, "out_stride",           \
      WB_TK(WB_EV_OP), "a view op's output strides")                                                                 \
    X(RUN_DELAY, WB_TP_ARGS, "run_delay_ns", WB_TT_NUM, run_delay, run_delay, WB_TP_ARGS, "run_delay_ns",             \
      WB_TK(WB_EV_RANGE) | WB_TK(WB_EV_STEP), "the host thread's run-queue delay inside a step (absent: not read)")  \
    X(INPUT_SHAPES, WB_TP_ARGS, "input_shapes", WB_TT_SHAPES, dims, ndims, WB_TP_TOP, "shapes", WB_TK(WB_EV_OP),      \
      "the inputs' shapes (record_shapes)")                                                                          \
    X(INPUT_DTYPES, WB_TP_ARGS, "input_dtypes", WB_TT_DTYPES, dtype, dtype, WB_TP_TOP, "dtypes", WB_TK(WB_EV_OP),     \
      "the inputs' dtypes: f32, bf16, ...")                                                                          \
    X(SRC, WB_TP_ARGS, "src", WB_TT_STR, src, src, WB_TP_TOP, "src", WB_TK_ALL,                                       \
      "the script's call site, file:line (with_stack)")                                                              \
    X(FAILED, WB_TP_ARGS, "failed", WB_TT_BOOL, failed, failed, WB_TP_ARGS, "failed", WB_TK(WB_EV_OP),                \
      "the op returned an error")

typedef enum wb_trace_field_id {
#define WB_TF_ENUM(id, ...) WB_TF_##id,
    WB_TRACE_FIELDS(WB_TF_ENUM)
#undef WB_TF_ENUM
    WB_TF_COUNT
} wb_trace_field_id;

typedef struct wb_trace_field {
    int trace;               /* WB_TP_TOP, WB_TP_ARGS or WB_TP_NONE */
    const char *key;         /* in the trace (NULL: not there) */
    wb_trace_type type;
    size_t offset, size;     /* the member of wb_trace_event, its bytes */
    size_t count_offset;     /* WB_TT_INTS: the int member holding how many */
    int lua;                 /* WB_TP_TOP, WB_TP_ARGS or WB_TP_NONE */
    const char *lua_key;     /* in a Lua event table (NULL: not there) */
    unsigned kinds;          /* WB_TK bits */
    const char *doc;
} wb_trace_field;

extern const wb_trace_field wb_trace_fields[WB_TF_COUNT];

/* The trace's key of field `id` (never NULL for a field the trace carries). */
#define WB_TKEY(id) (wb_trace_fields[WB_TF_##id].key)
/* The Lua event table's key of field `id`. */
#define WB_LKEY(id) (wb_trace_fields[WB_TF_##id].lua_key)

/* The field a trace carries at `place` (WB_TP_TOP or WB_TP_ARGS) under `key`, or NULL. */
const wb_trace_field *wb_trace_field_find(int place, const char *key);
/* Its member in x. */
static inline void *wb_trace_field_at(wb_trace_event *x, const wb_trace_field *f) { return (char *)x + f->offset; }
/* A type's name for the docs: "string", "integer", ... */
const char *wb_trace_type_name(wb_trace_type t);
/* Marks what reading f sets besides its member (the run delay's presence, a view's geometry). */
void wb_trace_field_seen(wb_trace_event *x, const wb_trace_field *f);

#endif
