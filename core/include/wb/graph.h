/* wb/graph.h (floor observe): capture and replay of kernel launches. Capturing runs the work once and records every
 * kernel launch (on the cpu with a copy of its context; on a device that captures its own queue,
 * cuda, as a CUDA graph); replay re-issues them with no interpreter and no dispatcher in between. Every storage
 * allocated during capture, or read or written by a captured op, is held by the graph, so its buffers stay valid for
 * replays. */
#ifndef WB_GRAPH_H
#define WB_GRAPH_H

#include <wb/kernel.h>
#include <wb/wb.h>

typedef struct wb_graph wb_graph;

/* True when a device in use captures its own queue (cuda: CUDA graphs): such a capture needs a
 * warm-up run of the function first, so that nothing allocates or loads inside it. */
int wb_graph_needs_warmup(void);
/* Starts recording (fails while another capture is running). */
wb_status wb_graph_begin(wb_graph **out);
/* Records g again (after its function or its tensors changed); on cuda the executable graph is
 * updated in place when the topology allows it, else instantiated again. End with wb_graph_end. */
wb_status wb_graph_recapture_begin(wb_graph *g);
/* Stops recording; the graph is ready to replay. */
void wb_graph_end(wb_graph *g);
/* Why an ended capture cannot be replayed (a cuda capture error, mixed devices), or NULL. */
const char *wb_graph_problem(const wb_graph *g);
/* Abandons a capture (after an error in the captured function). */
void wb_graph_abort(wb_graph *g);
wb_status wb_graph_replay(wb_graph *g);
void wb_graph_free(wb_graph *g);
size_t wb_graph_node_count(const wb_graph *g);
const wb_kernel_desc *wb_graph_node(const wb_graph *g, size_t i);
size_t wb_graph_held_bytes(const wb_graph *g);

/* Inputs (graph_inputs.c). Replay normally reads the buffers it was captured on; a declared
 * input can instead be pointed at another tensor of the same dtype, device, shape and strides,
 * with no copy: the data pointers into the captured tensor are rewritten in the copied launch
 * contexts. Declares t (a tensor the capture read) as input *index; *why_not (or NULL) says why
 * replays of this graph cannot be pointed elsewhere for it (its storage is written by the graph,
 * a kernel keys cached state on its storage such as a prepacked weight, a device graph). Inputs
 * are forgotten by a recapture. */
wb_status wb_graph_input_declare(wb_graph *g, const wb_tensor *t, int *index, const char **why_not);
/* Points input `index` at t's data for the replays that follow (t's storage retained until the
 * next bind). Returns 1 when bound; 0 when t cannot be bound (geometry differs, its storage is one
 * the graph writes, the input is not rebindable): the input then reads its captured tensor again,
 * and the caller copies t into it. t NULL: back to the captured tensor. */
int wb_graph_input_bind(wb_graph *g, int index, const wb_tensor *t);
int wb_graph_input_count(const wb_graph *g);
/* 1 when t has input `index`'s dtype, device and shape (what a replay's guard checks). */
int wb_graph_input_fits(const wb_graph *g, int index, const wb_tensor *t);
/* Input `index` reads t in the replays that follow: bound when it can be, else t is copied into
 * the captured tensor. Errors when t does not fit. */
wb_status wb_graph_input_set(wb_graph *g, int index, wb_tensor *t);

#endif
