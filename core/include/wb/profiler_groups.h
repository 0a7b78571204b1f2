/* wb/profiler_groups.h (floor observe): groups computed in C over a session's store, so that no Lua table per event
 * is built: the aligned nodes `wb.diff` compares (profiler_groups.c: every range, op, runtime call
 * and kernel of every step named by its path, one sample per occurrence) and the folded stacks
 * (profiler_stacks.c). */
#ifndef WB_PROFILER_GROUPS_H
#define WB_PROFILER_GROUPS_H

#include <wb/profiler.h>

/* One aligned node: what wb.diff's model() calls a node (scripts/wb/diff.lua). */
/* The deepest nesting a diff model takes (ranges and ops inside each other under a step), and
 * the bytes all its nodes' paths may hold: past either, the model is refused with a message. */
#define WB_DIFF_MAX_DEPTH 256
#define WB_DIFF_MAX_PATH_BYTES (256 << 20)

typedef struct wb_diff_node {
    char *path;       /* "/range mlp/op linear(4x8)[f32]/kernel op=sgemm,..."; per occurrence "/range mlp#1/..." */
    int32_t parent;   /* the parent node's index, -1 under a step */
    char *label;      /* "linear (4x8)"; per occurrence "#2" appended from a signature's second sibling on */
    char *kind_key;   /* device nodes: the kernel kind (the path's key without its rank), else NULL */
    const char *name; /* its first occurrence's name (valid while the session lives) */
    int kind;         /* WB_EV_* */
    int depth;        /* 1 under a step */
    int64_t *host, *device; /* per occurrence: host duration (ranges, ops, runtime), device time under it */
    size_t nhost, ndevice, cap_host, cap_device;
    int32_t *step_no, *step_count; /* occurrences per step (0-based step index), in step order */
    size_t nsteps, cap_steps;
    const char **kernels; /* names of the device events under its first occurrence, in time order */
    size_t nkernels;
    char *fields[5]; /* device nodes: op, isa, layout, epilogue, tile (NULL: absent) */
} wb_diff_node;

/* One occurrence in the drawn steps' trees (in depth-first order), for the HTML timeline. */
typedef struct wb_diff_instance {
    int32_t node, depth, step; /* depth 0 under the step; step 0-based */
    int64_t ts_ns, dur_ns;
    int kind;
} wb_diff_instance;

typedef struct wb_diff_model {
    wb_diff_node *node; /* in the order first met */
    size_t n;
    int64_t *step_host_ns, *step_device_ns, *step_ts_ns;
    double *step_wait_ns; /* the run-queue delay recorded with the step (0: none) */
    int32_t *step_threads_max; /* the most threads the step's cpu kernels ran on (0: none recorded) */
    double *step_threads_mean; /* and their mean over those kernels */
    size_t nsteps;
    int synthetic_step; /* no step recorded: the whole trace is one */
    wb_diff_instance *step_tree; /* the occurrences of the drawn steps, step by step */
    size_t ntree, drawn_step;    /* drawn_step: the one step drawn (0-based), when one is */
} wb_diff_model;

extern const char *const wb_diff_field_names[5];

/* Which steps' trees a model keeps (opts.draw), besides a step's index (0-based; past the last:
 * the last): the median step by host time (the lower median, the earliest of equal ones), every
 * step, or none (a model for the table only). */
enum { WB_DIFF_DRAW_MEDIAN = -1, WB_DIFF_DRAW_ALL = -2, WB_DIFF_DRAW_NONE = -3 };

typedef struct wb_diff_model_opts {
    int64_t draw;
    /* 0 (key_averages' way): every repeat of a signature under one parent is one node, its
     * occurrences its samples; 1: the n-th repeat is a node of its own ("#n" in path and label) */
    int per_occurrence;
} wb_diff_model_opts;

/* The model of a stopped session (recorded, or a trace read back); opts NULL: the median step's
 * tree, repeats aggregated. WB_ERR_ARGUMENT with the message "holds no ranges, ops or kernels (an
 * empty profile)" when there is nothing to align. */
wb_status wb_prof_diff_model(const wb_prof *p, const wb_diff_model_opts *opts, wb_diff_model *out);
void wb_diff_model_free(wb_diff_model *m);

/* Folded stacks, one line per distinct stack ("call site;op;inner op;kernel <ns>\n"), sorted, as
 * malloc'ed text in *out (the caller frees it; "" when no stack weighs 1 ns). */
wb_status wb_prof_folded_stacks(const wb_prof *p, char **out, size_t *len);

#endif
