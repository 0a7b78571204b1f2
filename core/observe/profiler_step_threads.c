/* profiler_step_threads.c: the threads each step's cpu kernels ran on, for wb.diff's model
 * (profiler_groups.h: step_threads_max, _mean). The pool runs kernels on one thread while
 * other processes keep the cores busy (threads.c), and every kernel event records the threads it
 * ran on: a step whose kernels ran on fewer than the recording's fullest step ran another
 * configuration, which diff must not read as a change of the program. A kernel belongs to the
 * step whose interval holds its start. */
#include <stdlib.h>

#include <wb/profiler_groups.h>
#include "profiler_internal.h"

wb_status wb_diff_model_threads(const wb_prof *p, wb_diff_model *m) {
    size_t ns = m->nsteps;
    m->step_threads_max = calloc(ns ? ns : 1, sizeof(int32_t));
    m->step_threads_mean = calloc(ns ? ns : 1, sizeof(double));
    uint32_t *counted = calloc(ns ? ns : 1, sizeof *counted);
    if (!m->step_threads_max || !m->step_threads_mean || !counted) {
        free(counted);
        return wb_error(WB_ERR_MEMORY, "diff: out of memory for the steps' thread counts");
    }
    wb_prof_cursor c;
    wb_prof_cursor_open(&c, p);
    for (const wb_event *e; (e = wb_prof_cursor_next(&c));) {
        if (e->kind != WB_EV_KERNEL || e->threads == 0) continue;
        size_t lo = 0, hi = ns; /* the last step starting at or before the kernel */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (m->step_ts_ns[mid] <= e->ts_ns) lo = mid + 1;
            else hi = mid;
        }
        if (lo == 0 || e->ts_ns > m->step_ts_ns[lo - 1] + m->step_host_ns[lo - 1]) continue;
        size_t k = lo - 1;
        if (e->threads > m->step_threads_max[k]) m->step_threads_max[k] = e->threads;
        m->step_threads_mean[k] += e->threads;
        counted[k]++;
    }
    wb_prof_cursor_close(&c);
    for (size_t k = 0; k < ns; k++)
        if (counted[k]) m->step_threads_mean[k] /= counted[k];
    free(counted);
    return c.status;
}
