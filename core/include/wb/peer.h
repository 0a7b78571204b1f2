/* wb/peer.h (floor cpu): comparison peers for benchmarks (not ops: they bypass the dispatcher on purpose). */
#ifndef WB_PEER_H
#define WB_PEER_H

#include <wb/wb.h>

int wb_openblas_available(void);
wb_status wb_openblas_info(const char **corename, const char **coretype_note);
/* openblas_get_config(): version and build options ("OpenBLAS 0.3.21 ..."), or NULL. */
const char *wb_openblas_config(void);
wb_status wb_openblas_set_threads(int n);
wb_status wb_openblas_matmul(wb_tensor *a, wb_tensor *b, wb_tensor **out);

/* BLIS (peer_blis.c): its serial build on 1 thread, its pthread build on more. */
int wb_blis_available(void);
wb_status wb_blis_info(const char **version, const char **arch, const char **build);
wb_status wb_blis_set_threads(int n);
wb_status wb_blis_matmul(wb_tensor *a, wb_tensor *b, wb_tensor **out);

/* oneDNN (peer_dnnl.c), through the peer module libwb_dnnl_peer.so. A linear and an MLP are
 * primitives made for one token count (and the weights' shapes), weights copied at creation. */
typedef struct wb_dnnl_linear wb_dnnl_linear;
typedef struct wb_dnnl_mlp wb_dnnl_mlp;
int wb_dnnl_available(void);
const char *wb_dnnl_why_not(void); /* NULL when available */
wb_status wb_dnnl_info(const char **version, const char **isa);
wb_status wb_dnnl_set_threads(int n);
wb_status wb_dnnl_matmul(wb_tensor *a, wb_tensor *b, wb_tensor **out); /* dnnl_sgemm */
wb_status wb_dnnl_linear_new(wb_tensor *w, wb_tensor *bias, int64_t tokens, wb_dnnl_linear **out);
wb_status wb_dnnl_linear_run(wb_dnnl_linear *l, int64_t tokens, int64_t n, int64_t k, wb_tensor *x, wb_tensor **y);
const char *wb_dnnl_linear_kernel(const wb_dnnl_linear *l);
void wb_dnnl_linear_free(wb_dnnl_linear *l);
wb_status wb_dnnl_mlp_new(int swiglu, wb_tensor *gate, wb_tensor *up, wb_tensor *down, int64_t tokens,
                          wb_dnnl_mlp **out);
wb_status wb_dnnl_mlp_run(wb_dnnl_mlp *m, wb_dtype dt, int64_t tokens, int64_t dim, wb_tensor *x, wb_tensor **y);
const char *wb_dnnl_mlp_kernels(const wb_dnnl_mlp *m);
void wb_dnnl_mlp_free(wb_dnnl_mlp *m);

/* Measured FMA throughput of the active CPU path on the calling thread(s), GFLOP/s: `threads`
 * threads each run independent FMA chains for about `ms` milliseconds. */
double wb_cpu_measure_peak_gflops(int threads, double ms);

/* Read bandwidth from DRAM-sized buffers, GB/s. */
double wb_cpu_measure_bandwidth_gbs(int threads);

#endif
