/* spans.h: how a CPU kernel runs over threads (WB_CPU_PARALLEL, below), and what each worker
 * thread of a parallel kernel did (start, end, work done), for the profiler's per-thread lanes. Off unless the launcher hands a recorder in (one test per thread
 * per kernel); the kernels never know who reads it. Each worker writes only its own slot. */
#ifndef WB_KERNELS_SPANS_H
#define WB_KERNELS_SPANS_H

#include <stdint.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define WB_CPU_MAX_SPANS 64
/* Below this many elements a kernel runs on the calling thread only. */
#define WB_CPU_PARALLEL_MIN 65536
/* The most threads a CPU kernel runs on (the GEMM's and the MLP's per-thread buffers are sized by
 * it): the one cap, which the core's WB_MAX_THREADS equals (checked where the core sets it). */
#define WB_CPU_MAX_THREADS 256

typedef struct wb_cpu_span {
    int64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
    int64_t work;             /* what the thread did, in the kernel's unit (tiles or elements) */
} wb_cpu_span;

typedef struct wb_cpu_spans {
    int count;        /* threads that ran the kernel (slots filled: 0 .. count-1) */
    int team;         /* threads that ran it, past the slots too (0: the kernel kept no record) */
    const char *unit; /* "tiles", "elements" */
    wb_cpu_span span[WB_CPU_MAX_SPANS];
} wb_cpu_spans;

/* The recorder for the next kernels the calling thread launches (NULL: none). */
void wb_cpu_spans_set(wb_cpu_spans *s);
wb_cpu_spans *wb_cpu_spans_get(void);

static inline int64_t wb_cpu_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The calling thread's CPU time: what the kernels' opt-in phase counts add up (a thread that is
 * descheduled does not count). */
static inline int64_t wb_cpu_thread_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Adds the thread CPU time since `since` to (ph)->field and restarts `since`; nothing when ph is
 * NULL (counting is off). */
#define WB_CPU_LAP(ph, field, since)                                                                                   \
    do {                                                                                                               \
        if (ph) {                                                                                                      \
            int64_t now_ = wb_cpu_thread_ns();                                                                         \
            (ph)->field += now_ - (since);                                                                             \
            (since) = now_;                                                                                            \
        }                                                                                                              \
    } while (0)

/* The calling worker's index in its team, and the team's size. */
static inline int wb_cpu_thread(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int wb_cpu_team(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Opens a parallel kernel's record, counted in `unit` (before the parallel region). */
static inline wb_cpu_spans *wb_cpu_spans_open(const char *unit) {
    wb_cpu_spans *s = wb_cpu_spans_get();
    if (s) s->count = 0, s->team = 0, s->unit = unit;
    return s;
}

/* Inside the region: the calling worker started at t0 and did `work` units, done now. Threads
 * past the slots are not kept. */
static inline void wb_cpu_span_done(wb_cpu_spans *s, int64_t t0, int64_t work) {
    int t = wb_cpu_thread();
    if (!s || t >= WB_CPU_MAX_SPANS) return;
    s->span[t] = (wb_cpu_span){.start_ns = t0, .end_ns = wb_cpu_clock_ns(), .work = work};
    if (t == 0) s->team = wb_cpu_team(), s->count = s->team < WB_CPU_MAX_SPANS ? s->team : WB_CPU_MAX_SPANS;
}

/* A worker's start time when recording, else 0 (no clock read). */
static inline int64_t wb_cpu_span_start(const wb_cpu_spans *s) { return s ? wb_cpu_clock_ns() : 0; }

/* ---- running a kernel over threads ----
 * A kernel that would run on one thread must not enter OpenMP at all: libgomp's region costs a
 * futex wake even under if (0) or num_threads(1), measured at 2-3 us per kernel on a 2-vCPU VM
 * (a 256-element relu took 2.7 us, 0.26 us without), which made every small kernel look as long
 * as its host dispatch. So kernels say how many threads they want and WB_CPU_PARALLEL runs the
 * block in a region only for more than one; inside, wb_cpu_thread() and wb_cpu_team() hold both
 * ways (0 and 1 outside a region), and wb_cpu_share splits the work as schedule(static) would. */

/* The threads a parallel kernel runs on (what the core set; 1 without OpenMP). */
static inline int wb_cpu_max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* The threads a kernel of `work` elements runs on: all of them from WB_CPU_PARALLEL_MIN up. */
static inline int wb_cpu_threads_for(int64_t work) { return work >= WB_CPU_PARALLEL_MIN ? wb_cpu_max_threads() : 1; }

/* The calling worker's share [*lo, *hi) of n items, split evenly over its team. */
static inline void wb_cpu_share(int64_t n, int64_t *lo, int64_t *hi) {
    int t = wb_cpu_thread(), team = wb_cpu_team();
    *lo = n * t / team, *hi = n * (t + 1) / team;
}

/* Runs the block (the variadic arguments: commas allowed) on `nt` threads, or in the caller. */
#ifdef _OPENMP
#define WB_CPU_PARALLEL(nt, ...)                                                                                       \
    do {                                                                                                               \
        const int wb_cpu_nt_ = (nt);                                                                                   \
        if (wb_cpu_nt_ > 1) {                                                                                          \
            _Pragma("omp parallel num_threads(wb_cpu_nt_)") { __VA_ARGS__ }                                            \
        } else {                                                                                                       \
            __VA_ARGS__                                                                                                \
        }                                                                                                              \
    } while (0)
#else
#define WB_CPU_PARALLEL(nt, ...)                                                                                       \
    do {                                                                                                               \
        (void)(nt);                                                                                                    \
        __VA_ARGS__                                                                                                    \
    } while (0)
#endif

#endif
