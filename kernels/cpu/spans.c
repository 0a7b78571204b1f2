/* spans.c: the per-thread recorder the launcher sets for the CPU kernels (see wb_kernels/spans.h).
 * Kernels are launched from one thread at a time (the interpreter's), which sets and reads it. */
#include "wb_kernels/spans.h"

static wb_cpu_spans *active;

void wb_cpu_spans_set(wb_cpu_spans *s) { active = s; }
wb_cpu_spans *wb_cpu_spans_get(void) { return active; }
