/* mock_internal.h: what the files of the mock plugin share (see mock_plugin.c), bottom to top:
 * its CUDA state and rules of failure (mock_state.c), its CUPTI (mock_trace.c), its stream and
 * reference kernels (mock_stream.c), its graphs (mock_graph.c) and its NVRTC (mock_codegen.c);
 * mock_plugin.c fills the ABI's table with them. */
#ifndef WB_MOCK_INTERNAL_H
#define WB_MOCK_INTERNAL_H

#include <stdint.h>

#include "plugin_common.h"

/* ---- state (mock_state.c) ---- */

/* CUDA's error numbers for the rules kept here. */
enum {
    MOCK_ERR_MEMORY = 2,
    MOCK_ERR_MISALIGNED = 716,
    MOCK_ERR_CAPTURE_UNSUPPORTED = 900,
    MOCK_ERR_CAPTURE_INVALIDATED = 901,
};
const char *mock_err_name(int e);
const char *mock_err_string(int e);

extern int mock_pending, mock_sticky; /* cudaGetLastError's error; a fault that ends every later call */
extern int mock_capturing, mock_relaxed, mock_invalidated; /* the stream's capture and its mode */
/* The plugin's last error, formatted; returns -1. */
int mock_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A call CUDA refuses while capturing in thread-local mode: it fails and invalidates the capture
 * (returns the error, or 0 when the call may go on). */
int mock_refused_in_capture(const char *what);
/* The sticky fault, reported for `what` (or 0 when there is none). */
int mock_stuck(const char *what);
/* CLOCK_MONOTONIC, as CUPTI stamps with the plugin's timestamp callback. */
uint64_t mock_now_ns(void);

/* ---- trace (mock_trace.c) ---- */

void mock_record(const wb_cuda_record *r);
/* An API call: its runtime record, and the external id of the op that made it. */
uint32_t mock_api_call(int kind, const char *name, int cbid, int api_kind, uint64_t t0);
/* A kernel name kept for the records' life. */
const char *mock_intern(const char *s);
int mock_trace_start(void);
int mock_trace_flush(wb_cuda_record_fn fn, void *user, uint64_t *dropped);
void mock_trace_stop(void);
void mock_push(uint64_t id);
void mock_pop(void);
int mock_timestamp(uint64_t *ns);
int mock_trace_clock(void);

/* ---- stream (mock_stream.c) ---- */

/* A loaded generated kernel: its name and the host build that runs it. */
typedef struct gen_kernel {
    char name[128];
    void (*host_fn)(const void *args);
} gen_kernel;

typedef enum { OP_GEMM, OP_EW, OP_GEGLU, OP_GEN } op_kind;
typedef struct op {
    op_kind kind;
    union {
        wb_cuda_gemm g;
        wb_cuda_ew e;
        wb_cuda_geglu q;
        struct {
            const gen_kernel *k;
            wb_cuda_poi_args a; /* by value, as cuLaunchKernel copies its parameters */
        } p;
    } u;
} op;

typedef struct mock_graph {
    op *ops;
    int n;
} mock_graph;
extern mock_graph mock_capture; /* the ops recorded by the capture running now */

/* Runs an op as the "device" would, with its kernel record (correlated to `corr`). */
void mock_execute(const op *o, uint32_t corr, uint32_t graph_id);
/* Runs an op now, or records it while capturing. */
int mock_submit(const op *o);
/* `kernel<<<...>>>; return cudaGetLastError();`: an error nobody consumed is reported here. */
int mock_launch(const op *o, const char *what);
int dev_plan_build(wbcu_plan *pl);
void dev_plan_destroy(wbcu_plan *pl);
int dev_matmul(const wbcu_plan *pl, const wb_cuda_gemm *g);
int mock_elementwise(const wb_cuda_ew *e);
int mock_geglu(const wb_cuda_geglu *q);

/* ---- graphs (mock_graph.c) ---- */

int mock_graph_begin(void);
int mock_graph_end(void **exec);
int mock_graph_launch(void *exec);
void mock_graph_destroy(void *exec);

/* ---- generated kernels (mock_codegen.c) ---- */

int mock_codegen_init(wb_cuda_codegen_info *out);
int mock_codegen_compile(const char *source, const char *name, const char *options, void **image, size_t *size,
                         char *log, size_t loglen);
void mock_codegen_image_free(void *image);
int mock_codegen_load(const void *image, size_t size, const char *name, void (*host_fn)(const void *), void **kernel);
int mock_codegen_launch(void *kernel, const wb_cuda_poi_args *args);

#endif
