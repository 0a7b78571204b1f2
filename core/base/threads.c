/* threads.c: how many threads the CPU kernels use right now. The user asks for N (--threads,
 * wb.set_num_threads); the kernels run on N while the cores are ours, and on one while other
 * processes keep them busy: a parallel kernel whose threads wait for cores the scheduler has
 * given elsewhere (spinning at its barrier, or woken late) ran 2-7x slower than on one thread.
 *
 * The signal is the calling thread's own run-queue delay (/proc/thread-self/schedstat: time it
 * was runnable but not running), over windows of WINDOW_NS: on an idle machine it stays near 0
 * whatever our own threads do; when other processes compete for the cores it grows, and then
 * the kernels run on one thread. Back to N only after three quiet windows in a row and when the
 * machine's runnable count (/proc/loadavg, read while our workers sleep) leaves N cores free:
 * a scheduler can let one thread run alone for a while on a machine that is still busy.
 * WB_THREADS_ADAPT=0 (off, false, no) turns this off (always N), for comparisons. Linux only; elsewhere
 * always N. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <wb_kernels/spans.h>

#include <wb/clock.h>
#include <wb/wb.h>

_Static_assert(WB_MAX_THREADS == WB_CPU_MAX_THREADS, "one thread cap: the core's is the CPU kernels'");

#define WINDOW_NS 20000000    /* re-decide every 20 ms of wall time */
#define BUSY_WAIT_SHARE 0.10  /* runnable-but-waiting over 10% of the window: cores are contended */
#define QUIET_WAIT_SHARE 0.03 /* back to N under 3%, */
#define QUIET_WINDOWS 3       /* three windows in a row: a scheduler that lets one thread run alone
                               * for a window while the others are busy is not a quiet machine */

static int requested = 0; /* 0: not set yet (the OpenMP default) */
static int effective = 0;
static int enabled = -1;  /* -1: not read from the environment yet */
static int64_t window_start, wait_start;
static int contended, quiet_windows;

static int64_t own_wait_ns(void) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (!f) return -1;
    unsigned long long run = 0, wait = 0;
    int n = fscanf(f, "%llu %llu", &run, &wait);
    fclose(f);
    return n == 2 ? (int64_t)wait : -1;
}

/* Runnable tasks on the machine besides this thread (/proc/loadavg's fourth field), read only
 * while we run on one thread, when our own workers are asleep and do not count. */
static int others_running(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return 0;
    int running = 1, total = 0;
    double a, b, c;
    int n = fscanf(f, "%lf %lf %lf %d/%d", &a, &b, &c, &running, &total);
    fclose(f);
    return n == 5 && running > 1 ? running - 1 : 0;
}

static int ncpu(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void apply(int n) {
    if (n == effective) return;
    effective = n;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
}

void wb_threads_set_requested(int n) {
    /* nothing was decided while one thread was asked for (wb_threads_adapt): start afresh, as a
     * process does, rather than from what the cores did before that */
    if (requested == 1 && n > 1) contended = 0, quiet_windows = 0, window_start = 0;
    requested = n;
    effective = 0;
    apply(contended && enabled == 1 ? 1 : n);
}

int wb_threads_requested(void) {
#ifdef _OPENMP
    if (!requested) { /* before the first change: OpenMP's default, within the kernels' cap (a 384-thread
                       * machine's default was a count set_num_threads then refused to restore) */
        requested = omp_get_max_threads();
        if (requested > WB_MAX_THREADS) requested = WB_MAX_THREADS;
    }
    return requested;
#else
    return 1;
#endif
}

int wb_threads_contended(void) { return contended; }

/* Whether adaptation is on: WB_THREADS_ADAPT (unless set since), and only where schedstat exists. */
static int adaptive(void) {
    if (enabled < 0) {
        const char *e = getenv("WB_THREADS_ADAPT");
        enabled = !(e && (!strcmp(e, "0") || !strcasecmp(e, "off") || !strcasecmp(e, "false") || !strcasecmp(e, "no")));
        if (enabled && own_wait_ns() < 0) enabled = 0; /* no schedstat here: always N */
    }
    return enabled;
}

int wb_threads_set_adaptive(int on) {
    int was = adaptive();
    enabled = on && own_wait_ns() >= 0 ? 1 : 0;
    if (!enabled) contended = 0, quiet_windows = 0;
    apply(contended ? 1 : wb_threads_requested());
    return was;
}

void wb_threads_adapt(void) {
    if (!adaptive()) return;
    /* One thread asked for: one thread runs whatever the cores do, so there is nothing to decide
     * and no clock to read (the replayed 1x8 @ 8x16 linear of experiments/graph_replay.lua: 125 ->
     * 100 ns a kernel on an Intel Xeon model 207). Asking for more threads starts the windows
     * afresh (wb_threads_set_requested). */
    if (wb_threads_requested() == 1) return;
    int64_t now = wb_now_ns();
    if (now - window_start < WINDOW_NS) return;
    int64_t wait = own_wait_ns();
    /* a window much longer than WINDOW_NS was mostly idle time (no kernels): start a new one */
    if (window_start && wait >= 0 && now - window_start < 5 * WINDOW_NS) {
        double share = (double)(wait - wait_start) / (double)(now - window_start);
        if (share > BUSY_WAIT_SHARE) {
            contended = 1;
            quiet_windows = 0;
        } else if (contended && share < QUIET_WAIT_SHARE && ++quiet_windows >= QUIET_WINDOWS &&
                   others_running() + wb_threads_requested() <= ncpu()) {
            contended = 0;
        }
    }
    window_start = now;
    wait_start = wait;
    int n = wb_threads_requested();
    apply(contended ? 1 : n);
}
