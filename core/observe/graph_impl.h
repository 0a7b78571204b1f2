/* graph_impl.h: the graph's insides, shared by graph.c (capture, replay) and graph_inputs.c
 * (rebinding a replay to new input buffers). Internal to libwb. */
#ifndef WB_GRAPH_IMPL_H
#define WB_GRAPH_IMPL_H

#include <wb/graph.h>

#include "backend.h"
#include "op.h"
#include "ptrset.h"
#include "storage.h"

typedef struct node {
    wb_kernel_desc desc;
    void (*fn)(void *);
    const wb_launch_layout *layout; /* static: the kernel family's row */
    void *ctx;                      /* a private copy of the launch context */
} node;

/* A data pointer of a copied context that points into an input: rebinding writes base + rel. */
typedef struct input_slot {
    char *at;        /* the pointer field inside a node's ctx */
    ptrdiff_t rel;   /* data pointers: bytes from the input's first element */
    char *offset_at; /* storage fields (a cached state's key): their element offset's field, and rel
                        in elements from the input's offset; NULL for data pointers */
} input_slot;

typedef struct graph_input {
    wb_tensor captured;   /* geometry of the tensor the graph was captured on (storage retained) */
    wb_storage *bound;    /* storage the replays read now (retained), NULL: the captured one */
    const char *base;     /* data pointer the slots hold now (relative to rel) */
    input_slot *slots;
    size_t nslots;
    char why_not[160]; /* empty: rebindable */
} graph_input;

struct wb_graph {
    node *nodes;
    size_t n, cap;
    wb_storage **held; /* retained for the graph's life */
    size_t nheld, cap_held;
    wb_storage **written; /* bumped after each replay (caches keyed on versions must see it) */
    size_t nwritten, cap_written;
    wb_ptrset held_set, written_set; /* the same storages, for membership in constant time */
    graph_input *inputs;
    int ninputs;
    int capturing, failed;
    wb_capture_hooks hooks;
    wb_storage_hooks storage_hooks;
    const wb_backend *queue; /* the device whose queue is captured (cuda), or NULL */
    int stream_capture;      /* that queue is being captured now */
    size_t cpu_nodes, device_nodes;
    void *exec; /* the device's instantiated graph (a CUDA graph) */
    char why[512];
};

/* Releases the declared inputs (their bindings) and forgets them. */
void wb_graph_inputs_clear(wb_graph *g);

#endif
