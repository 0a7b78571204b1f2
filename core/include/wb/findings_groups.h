/* wb/findings_groups.h (floor observe): what wb.findings' rules read, computed in C over a session's store: per rule
 * the groups (per op name, kernel name, lane, window, chain) its sentences are made from, as a
 * small tree of values the binding turns into Lua tables. No table per event is built. */
#ifndef WB_FINDINGS_GROUPS_H
#define WB_FINDINGS_GROUPS_H

#include <wb/profiler.h>

/* A value: nil, boolean, integer, number, string, list or map (keys in insertion order). */
enum { WB_VAL_NIL = 0, WB_VAL_BOOL, WB_VAL_INT, WB_VAL_NUM, WB_VAL_STR, WB_VAL_LIST, WB_VAL_MAP };
typedef struct wb_val {
    int type;
    union {
        int b;
        int64_t i;
        double d;
        char *s;
        struct {
            struct wb_val *v;
            char **k; /* maps: the keys */
            size_t n, cap;
        } c;
    };
} wb_val;
void wb_val_free(wb_val *v);

/* The thresholds the rules compare with (wb.findings.THRESHOLDS). */
typedef struct wb_findings_th {
    double imbalance_ratio, imbalance_min_ns;
    double roofline_outlier_ratio; /* a launch this many times slower than the median one is an outlier */
    double small_kernel_ns;        /* torch traces: a kernel shorter than this is small */
} wb_findings_th;

/* The groups of every rule, as a map: view, epilogue, layout, fusion, host_bound, imbalance,
 * roofline, sync, memcpy (lists of groups), gaps ({lanes = {...}, workers = {...}}), steps
 * ({delay =, span =}), events and device_events (counts), and torch ({view, copy, gemm, fusion,
 * launches, kernel_sizes}: the rules for torch.profiler's traces, findings_torch.c). */
wb_status wb_prof_findings_groups(const wb_prof *p, const wb_findings_th *th, wb_val *out);

/* Every instance of the range named `range` (NULL: every step, or the whole trace when there are
 * none), in start order, with what started inside it (profiler_instances.c): {what = "range" |
 * "step" | "trace", instances = {{ts_ns, dur_ns, kernel_ns, kernels = {{index (1-based, in the
 * store), name, dur_ns, op (the launching op's name, absent when unknown)}}, ops = {name =
 * count}}}, ranges = the distinct range names, sorted}. */
wb_status wb_prof_instances(const wb_prof *p, const char *range, wb_val *out);

#endif
