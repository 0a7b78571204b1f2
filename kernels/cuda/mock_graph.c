/* mock_graph.c: the mock plugin's CUDA graphs (see mock_plugin.c): stream capture records the
 * ops instead of running them (a call CUDA refuses while capturing invalidates the capture), the
 * end instantiates them or updates a graph of the same topology in place, and a launch runs them
 * under one cudaGraphLaunch record. */
#include <stdlib.h>

#include "mock_internal.h"

int mock_graph_begin(void) {
    if (mock_stuck("cudaStreamBeginCapture")) return -1;
    if (mock_capturing) return mock_fail("mock: a capture is already running");
    mock_capturing = 1;
    mock_invalidated = 0;
    mock_capture.ops = NULL;
    mock_capture.n = 0;
    return 0;
}

static int graph_ids;

int mock_graph_end(void **exec) {
    if (!mock_capturing) return mock_fail("mock: no capture to end");
    mock_capturing = 0;
    if (mock_invalidated) {
        free(mock_capture.ops);
        mock_pending = MOCK_ERR_CAPTURE_INVALIDATED;
        return wbcu_device_fail(mock_pending, "cudaStreamEndCapture (was an unsupported call made while capturing?)");
    }
    mock_graph *g = *exec;
    if (g) { /* update in place: the mock's topology check is the op count and kinds */
        int same = g->n == mock_capture.n;
        for (int i = 0; same && i < g->n; i++)
            same = g->ops[i].kind == mock_capture.ops[i].kind;
        if (same) {
            free(g->ops);
            g->ops = mock_capture.ops;
            return 0;
        }
        free(g->ops);
        free(g);
    }
    g = malloc(sizeof *g);
    if (!g) return mock_fail("mock: out of memory instantiating a graph");
    *g = mock_capture;
    *exec = g;
    graph_ids++;
    return 0;
}

int mock_graph_launch(void *exec) {
    mock_graph *g = exec;
    if (mock_stuck("cudaGraphLaunch")) return -1;
    uint32_t corr = mock_api_call(WB_CU_REC_RUNTIME, "cudaGraphLaunch", 311, WB_CU_API_GRAPH_LAUNCH, mock_now_ns());
    for (int i = 0; i < g->n; i++)
        mock_execute(&g->ops[i], corr, (uint32_t)graph_ids);
    return 0;
}

void mock_graph_destroy(void *exec) {
    mock_graph *g = exec;
    if (!g) return;
    free(g->ops);
    free(g);
}
