/* device.c: dtype and device names, availability, defaults and the thread count.
 * Availability comes from each device's backend table (backend.h): the CUDA device is a plugin
 * loaded at first use (cuda_backend.c); when it cannot run, every cuda request fails here with a
 * message that says why, and the executable still starts anywhere. */
#define _GNU_SOURCE /* pthread_getattr_default_np */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include <wb/wb.h>

static const char *const dtype_names[WB_DTYPE_COUNT] = {
    [WB_F32] = "f32",
    [WB_BF16] = "bf16",
};
_Static_assert(sizeof dtype_names / sizeof dtype_names[0] == WB_DTYPE_COUNT, "dtype table");
_Static_assert(WB_DTYPE_COUNT == 2, "a new dtype needs its size in wb_dtype_size (wb.h)");

const char *wb_dtype_name(wb_dtype dtype) { return (unsigned)dtype < WB_DTYPE_COUNT ? dtype_names[dtype] : "?"; }

wb_status wb_dtype_parse(const char *name, wb_dtype *out) {
    if (!strcmp(name, "f32") || !strcmp(name, "float32") || !strcmp(name, "float")) {
        *out = WB_F32;
        return WB_OK;
    }
    if (!strcmp(name, "bf16") || !strcmp(name, "bfloat16")) {
        *out = WB_BF16;
        return WB_OK;
    }
    return wb_error(WB_ERR_DTYPE, "unknown dtype '%s' (expected \"f32\" or \"bf16\")", name);
}

/* Every device computes every dtype (bf16 on the cpu: f32 math, one rounding), so this is the one
 * dtype check ops make. */
wb_status wb_dtype_check_supported(wb_dtype dtype, const char *context) {
    if (dtype == WB_F32 || dtype == WB_BF16) return WB_OK;
    return wb_error(WB_ERR_DTYPE, "%s: invalid dtype id %d", context, (int)dtype);
}

static const char *const device_names[WB_DEVICE_COUNT] = {
    [WB_DEVICE_CPU] = "cpu",
    [WB_DEVICE_CUDA] = "cuda",
};

const char *wb_device_name(wb_device device) { return (unsigned)device < WB_DEVICE_COUNT ? device_names[device] : "?"; }

wb_status wb_device_parse(const char *name, wb_device *out) {
    if (!strcmp(name, "cpu")) {
        *out = WB_DEVICE_CPU;
        return WB_OK;
    }
    if (!strcmp(name, "cuda") || !strcmp(name, "cuda:0")) {
        *out = WB_DEVICE_CUDA;
        return WB_OK;
    }
    if (!strcmp(name, "auto")) {
        *out = wb_device_is_available(WB_DEVICE_CUDA) ? WB_DEVICE_CUDA : WB_DEVICE_CPU;
        return WB_OK;
    }
    return wb_error(WB_ERR_DEVICE, "unknown device '%s' (expected \"cpu\", \"cuda\" or \"auto\")", name);
}

wb_status wb_device_memory_stats(wb_device device, size_t *allocated, size_t *reserved, size_t *peak) {
    wb_status st = wb_device_check_available(device);
    if (st) return st;
    const wb_backend *b = wb_backend_get(device);
    if (!b->memory_stats) return wb_error(WB_ERR_DEVICE, "%s has no caching allocator to report", b->name);
    b->memory_stats(allocated, reserved, peak);
    return WB_OK;
}

wb_status wb_device_check_available(wb_device device) {
    if ((unsigned)device >= WB_DEVICE_COUNT) return wb_error(WB_ERR_DEVICE, "invalid device id %d", (int)device);
    return wb_backend_get(device)->check();
}

int wb_device_is_available(wb_device device) {
    if ((unsigned)device >= WB_DEVICE_COUNT) return 0;
    char saved[512]; /* asking must not overwrite the caller's pending error message */
    snprintf(saved, sizeof saved, "%s", wb_error_message());
    int ok = wb_backend_get(device)->check() == WB_OK;
    if (!ok) wb_error(WB_OK, "%s", saved);
    return ok;
}

int wb_device_in_use(wb_device device) {
    return (unsigned)device < WB_DEVICE_COUNT && wb_backend_in_use(device) != NULL;
}

static wb_device default_device = WB_DEVICE_CPU;

wb_device wb_default_device(void) { return default_device; }

wb_status wb_set_default_device(wb_device device) {
    wb_status st = wb_device_check_available(device);
    if (st) return st;
    default_device = device;
    return WB_OK;
}

int wb_get_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

#ifdef _OPENMP
/* The stack size of a worker thread: OMP_STACKSIZE / GOMP_STACKSIZE (kilobytes unless suffixed
 * B, K, M or G), else the threads' default (RLIMIT_STACK's, as glibc takes it). */
static double worker_stack_bytes(void) {
    const char *env = getenv("OMP_STACKSIZE");
    if (!env || !*env) env = getenv("GOMP_STACKSIZE");
    if (env && *env) {
        char *end;
        double v = strtod(env, &end), unit = 1024;
        while (*end == ' ')
            end++;
        if (*end == 'B' || *end == 'b') unit = 1;
        else if (*end == 'M' || *end == 'm') unit = 1024.0 * 1024;
        else if (*end == 'G' || *end == 'g') unit = 1024.0 * 1024 * 1024;
        if (v > 0) return v * unit;
    }
    pthread_attr_t attr;
    size_t size = 0;
    if (pthread_getattr_default_np(&attr) == 0) {
        pthread_attr_getstacksize(&attr, &size);
        pthread_attr_destroy(&attr);
    }
    return size ? (double)size : 8.0 * 1024 * 1024;
}

/* libgomp ends the process when it cannot create a worker ("Thread creation failed"), with no
 * error to catch: under an address-space limit (--max-memory, --sandbox's 8G) a team whose
 * stacks do not fit in what is left is refused here, while it can still be said. */
static wb_status check_thread_room(int n) {
    struct rlimit as;
    if (n <= 1 || getrlimit(RLIMIT_AS, &as) || as.rlim_cur == RLIM_INFINITY) return WB_OK;
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    double used = (double)pages * (double)sysconf(_SC_PAGESIZE), left = (double)as.rlim_cur - used;
    double need = (double)(n - 1) * (worker_stack_bytes() + 64.0 * 1024) + 64.0 * 1024 * 1024; /* and some room */
    if (need <= left) return WB_OK;
    char want[32], have[32];
    wb_format_bytes(need, want, sizeof want);
    wb_format_bytes(left > 0 ? left : 0, have, sizeof have);
    return wb_error(WB_ERR_MEMORY,
                    "set_num_threads: %d threads need about %s of address space for their stacks; the address-space "
                    "limit (--max-memory) leaves %s",
                    n, want, have);
}
#endif

wb_status wb_set_num_threads(int n) {
    if (n < 1 || n > WB_MAX_THREADS)
        return wb_error(WB_ERR_ARGUMENT, "set_num_threads: %d threads is out of range (1..%d)", n, WB_MAX_THREADS);
#ifdef _OPENMP
    wb_status st = check_thread_room(n);
    if (st) return st;
    wb_threads_set_requested(n);
    return WB_OK;
#else
    if (n == 1) return WB_OK;
    return wb_error(WB_ERR_UNSUPPORTED, "set_num_threads: this build has no OpenMP; only 1 thread");
#endif
}

int wb_executable_dir(char *buf, size_t len) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return 0;
    *slash = '\0';
    return snprintf(buf, len, "%s", exe) < (int)len;
}

/* The CPU model string from /proc/cpuinfo ("unknown" elsewhere), read once. */
const char *wb_cpu_model(void) {
    static char model[128];
    if (model[0]) return model;
    snprintf(model, sizeof model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return model;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        char *colon = strchr(line, ':');
        if (!colon) break;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(model, sizeof model, "%s", colon);
        break;
    }
    fclose(f);
    return model;
}
