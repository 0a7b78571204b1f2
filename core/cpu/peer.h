/* peer.h: comparison peers for benchmarks (not ops: they bypass the dispatcher on purpose). */
#ifndef WB_PEER_H
#define WB_PEER_H

#include "wb.h"

int wb_openblas_available(void);
wb_status wb_openblas_info(const char **corename, const char **coretype_note);
/* openblas_get_config(): version and build options ("OpenBLAS 0.3.21 ..."), or NULL. */
const char *wb_openblas_config(void);
wb_status wb_openblas_set_threads(int n);
wb_status wb_openblas_matmul(wb_tensor *a, wb_tensor *b, wb_tensor **out);

/* Measured FMA throughput of the active CPU path on the calling thread(s), GFLOP/s: `threads`
 * threads each run independent FMA chains for about `ms` milliseconds. */
double wb_cpu_measure_peak_gflops(int threads, double ms);

/* Read bandwidth from DRAM-sized buffers, GB/s. */
double wb_cpu_measure_bandwidth_gbs(int threads);

#endif
