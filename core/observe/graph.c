/* graph.c: graphs (see graph.h). On the cpu a node is a kernel descriptor, its function and a
 * private copy of its context; replay refreshes what a context caches (a GEMM's packed weights,
 * so a write to the weight is seen) and launches the nodes in order. Held and written storages
 * are kept in hash sets beside their lists, so capture stays linear in the number of ops (a scan
 * per op made 40k ops take seconds). Rebinding inputs is in graph_inputs.c. A device whose backend
 * captures its own queue (cuda: the plugin's stream into a CUDA graph) is captured while the
 * function runs; the nodes only describe what was queued, and replay is one graph launch
 * through the backend table. A graph holds kernels of one device only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyindex.h"
#include "backend.h"
#include "graph_impl.h"
#include <wb/profiler.h>
#include "storage.h"

static wb_graph *capturing;


static void hold(wb_graph *g, wb_storage *s) {
    if (!s || wb_ptrset_has(&g->held_set, s)) return;
    if (!wb_grow((void **)&g->held, &g->cap_held, g->nheld + 1, sizeof *g->held) || wb_ptrset_add(&g->held_set, s) < 0) {
        g->failed = 1;
        return;
    }
    wb_storage_retain(s);
    g->held[g->nheld++] = s;
}

static void on_launch(void *user, const wb_kernel_desc *desc, void (*fn)(void *), const void *ctx,
                      const wb_launch_layout *layout) {
    wb_graph *g = user;
    if (!fn) { /* queued on cuda: the stream capture holds it; keep the description */
        if (!wb_grow((void **)&g->nodes, &g->cap, g->n + 1, sizeof *g->nodes)) {
            g->failed = 1;
            return;
        }
        g->nodes[g->n++] = (node){*desc, NULL, NULL, NULL};
        g->device_nodes++;
        return;
    }
    g->cpu_nodes++;
    if (!layout || !layout->size) { /* a launch that cannot be copied cannot be replayed */
        g->failed = 1;
        return;
    }
    void *copy = malloc(layout->size);
    if (!copy || !wb_grow((void **)&g->nodes, &g->cap, g->n + 1, sizeof *g->nodes)) {
        free(copy);
        g->failed = 1;
        return;
    }
    memcpy(copy, ctx, layout->size);
    g->nodes[g->n++] = (node){*desc, fn, layout, copy};
}

static void on_op_inputs(void *user, const wb_op_call *call) {
    wb_graph *g = user;
    for (int i = 0; i < call->nin; i++)
        if (call->in[i]) hold(g, call->in[i]->storage);
}

static void on_storage_new(void *user, wb_storage *s) { hold(user, s); }

static void on_storage_written(void *user, wb_storage *s) {
    wb_graph *g = user;
    hold(g, s);
    if (wb_ptrset_has(&g->written_set, s)) return;
    if (!wb_grow((void **)&g->written, &g->cap_written, g->nwritten + 1, sizeof *g->written) ||
        wb_ptrset_add(&g->written_set, s) < 0) {
        g->failed = 1;
        return;
    }
    g->written[g->nwritten++] = s;
}

int wb_graph_needs_warmup(void) {
    for (int d = 0; d < WB_DEVICE_COUNT; d++) {
        const wb_backend *b = wb_backend_in_use((wb_device)d);
        if (b && b->graph_begin) return 1;
    }
    return 0;
}

/* Starts recording into g (fresh, or emptied for a re-capture that keeps its CUDA graph). */
static wb_status start(wb_graph *g, const char *what) {
    if (capturing) return wb_error(WB_ERR_UNSUPPORTED, "%s: a capture is already running (captures do not nest)", what);
    g->hooks = (wb_capture_hooks){.user = g,
                                  .launch = on_launch,
                                  .op_inputs = on_op_inputs};
    g->storage_hooks = (wb_storage_hooks){.user = g, .hold = on_storage_new, .written = on_storage_written};
    /* a device in use that captures its own queue (cuda): capture it too (left empty by a
     * cpu-only function) */
    const wb_backend *queue = NULL;
    for (int d = 0; d < WB_DEVICE_COUNT && !queue; d++) {
        const wb_backend *b = wb_backend_in_use((wb_device)d);
        if (b && b->graph_begin) queue = b;
    }
    if (queue) {
        wb_status st = queue->graph_begin();
        if (st) return wb_error_prefix(st, what);
        if (g->exec && g->queue != queue)
            return wb_error(WB_ERR_DEVICE, "%s: the graph belongs to another device", what);
        g->queue = queue;
        g->stream_capture = 1;
    }
    g->capturing = 1;
    capturing = g;
    wb_capture_set_hooks(&g->hooks);
    wb_storage_set_capture(&g->storage_hooks);
    return WB_OK;
}

wb_status wb_graph_begin(wb_graph **out) {
    *out = NULL;
    wb_graph *g = calloc(1, sizeof *g);
    if (!g) return wb_error(WB_ERR_MEMORY, "graph.capture: out of memory");
    wb_status st = start(g, "graph.capture");
    if (st) {
        free(g);
        return st;
    }
    *out = g;
    return WB_OK;
}

/* The nodes and held storages of the previous capture go; the instantiated CUDA graph stays,
 * so wb_graph_end can update it in place (cudaGraphExecUpdate) instead of instantiating anew. */
wb_status wb_graph_recapture_begin(wb_graph *g) {
    if (g->capturing) return wb_error(WB_ERR_ARGUMENT, "graph.recapture: the graph is being captured");
    if (capturing) return wb_error(WB_ERR_UNSUPPORTED, "graph.recapture: a capture is already running");
    for (size_t i = 0; i < g->n; i++)
        free(g->nodes[i].ctx);
    for (size_t i = 0; i < g->nheld; i++)
        wb_storage_release(g->held[i]);
    wb_graph_inputs_clear(g); /* their slots pointed into the freed contexts: declare them again */
    wb_ptrset_clear(&g->held_set), wb_ptrset_clear(&g->written_set);
    g->n = g->nheld = g->nwritten = g->cpu_nodes = g->device_nodes = 0;
    g->failed = 0;
    g->why[0] = '\0';
    return start(g, "graph.recapture");
}

static void end_capture(wb_graph *g, int run_once) {
    if (!g->capturing) return;
    g->capturing = 0;
    capturing = NULL;
    wb_capture_set_hooks(NULL);
    wb_storage_set_capture(NULL);
    if (g->stream_capture) {
        g->stream_capture = 0;
        if (g->queue->graph_end(&g->exec)) {
            g->failed = 2;
            snprintf(g->why, sizeof g->why, "%s", wb_error_message());
        }
    }
    if (g->device_nodes && !g->queue) {
        g->failed = 2;
        snprintf(g->why, sizeof g->why,
                 "the device was first used inside the capture; run the function once before capturing it");
    } else if (g->cpu_nodes && g->device_nodes) {
        g->failed = 2;
        snprintf(g->why, sizeof g->why, "the function launched kernels on both cpu and %s; a graph holds one device",
                 g->queue->name);
    }
    /* A stream capture records without running: run the graph once, so that (as on the cpu)
     * capturing runs the function and g.outputs hold its results. */
    if (run_once && g->device_nodes && !g->failed && g->queue->graph_launch(g->exec)) {
        g->failed = 2;
        snprintf(g->why, sizeof g->why, "%s", wb_error_message());
    }
}

void wb_graph_end(wb_graph *g) { end_capture(g, 1); }

const char *wb_graph_problem(const wb_graph *g) { return g->failed == 2 ? g->why : NULL; }

void wb_graph_abort(wb_graph *g) {
    end_capture(g, 0);
    wb_graph_free(g);
}

wb_status wb_graph_replay(wb_graph *g) {
    if (g->capturing) return wb_error(WB_ERR_ARGUMENT, "graph.replay: the graph is still being captured");
    if (capturing) return wb_error(WB_ERR_UNSUPPORTED, "graph.replay: cannot replay while another capture runs");
    if (g->failed == 2) return wb_error(WB_ERR_DEVICE, "graph.replay: the capture failed: %s", g->why);
    if (g->failed) return wb_error(WB_ERR_MEMORY, "graph.replay: the capture was incomplete (out of memory)");
    wb_prof_scope_begin();
    if (g->device_nodes) {
        wb_status st = g->queue->graph_launch(g->exec);
        if (st) {
            wb_error_prefix(st, "graph.replay");
            wb_prof_scope_end("graph_launch");
            return st;
        }
    }
    for (size_t i = 0; i < g->n && !g->device_nodes; i++) {
        node *nd = &g->nodes[i];
        if (nd->layout->refresh) nd->layout->refresh(nd->ctx);
        wb_kernel_launch(&nd->desc, nd->fn, nd->ctx, nd->layout);
    }
    for (size_t i = 0; i < g->nwritten; i++)
        g->written[i]->version++;
    wb_prof_scope_end("graph_launch");
    return WB_OK;
}

void wb_graph_free(wb_graph *g) {
    if (!g) return;
    if (g->capturing) end_capture(g, 0);
    if (g->exec && g->queue) g->queue->graph_destroy(g->exec);
    for (size_t i = 0; i < g->n; i++)
        free(g->nodes[i].ctx);
    for (size_t i = 0; i < g->nheld; i++)
        wb_storage_release(g->held[i]);
    wb_graph_inputs_clear(g);
    wb_ptrset_free(&g->held_set), wb_ptrset_free(&g->written_set);
    free(g->inputs), free(g->nodes), free(g->held), free(g->written), free(g);
}

size_t wb_graph_node_count(const wb_graph *g) { return g->n; }
const wb_kernel_desc *wb_graph_node(const wb_graph *g, size_t i) { return i < g->n ? &g->nodes[i].desc : NULL; }

size_t wb_graph_held_bytes(const wb_graph *g) {
    size_t total = 0;
    for (size_t i = 0; i < g->nheld; i++)
        total += wb_storage_nbytes(g->held[i]);
    return total;
}
