/* graph.h: capture and replay of kernel launches. Capturing runs the work once and records every
 * kernel launch (on the cpu with a copy of its context; on a device that captures its own queue,
 * cuda, as a CUDA graph); replay re-issues them with no interpreter and no dispatcher in between. Every storage
 * allocated during capture, or read or written by a captured op, is held by the graph, so its buffers stay valid for
 * replays. */
#ifndef WB_GRAPH_H
#define WB_GRAPH_H

#include "op.h"

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

#endif
