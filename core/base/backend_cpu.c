/* backend_cpu.c: the cpu device's table (backend.h) and the backend registry. Memory for cpu
 * storages is 64-byte aligned and cached by size class; an absurd request (more than the
 * machine's memory) is refused with a message instead of being handed to an overcommitting
 * allocator that would OOM-kill the process later. Copies are memcpy; there is nothing to wait
 * for; graphs are graph.c's own launch lists. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include <wb/clock.h>
#include "storage.h"

#define WB_ALIGN 64

/* Freed buffers are kept by size class and reused: a fresh multi-megabyte buffer costs a page
 * fault and a page clear per 4 KiB on first touch, which would otherwise land in every timed op.
 * Classes are geometric (8 per power of two, <= 12.5% slack); the cache holds at most
 * CACHE_MAX bytes and is off under AddressSanitizer (it would hide use-after-free) or with
 * WB_NO_ALLOC_CACHE=1. */
#define CLASS_STEPS 8
#define CLASS_COUNT (64 * CLASS_STEPS)
#define CACHE_MAX   ((size_t)1 << 30)

#if defined(__SANITIZE_ADDRESS__)
#define WB_ALLOC_CACHE_DEFAULT 0
#else
#define WB_ALLOC_CACHE_DEFAULT 1
#endif

/* Per size class, a LIFO list threaded through the cached blocks themselves (every block is
 * at least 64 bytes), at most CACHE_PER_CLASS deep. */
#define CACHE_PER_CLASS 8192
static void *cache_head[CLASS_COUNT];
static int cache_depth[CLASS_COUNT];
static size_t cache_total;
static int cache_enabled = -1;

static int alloc_cache_on(void) {
    if (cache_enabled < 0) {
        const char *env = getenv("WB_NO_ALLOC_CACHE");
        cache_enabled = WB_ALLOC_CACHE_DEFAULT && !(env && *env && strcmp(env, "0"));
    }
    return cache_enabled;
}

/* Size class of a request and the bytes that class allocates. */
static int size_class(size_t bytes, size_t *class_bytes) {
    if (bytes <= WB_ALIGN) {
        *class_bytes = WB_ALIGN;
        return 0;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^e < bytes <= 2^(e+1) */
    size_t base = (size_t)1 << e, step = base / CLASS_STEPS;
    size_t k = (bytes - base + step - 1) / step; /* 1..CLASS_STEPS */
    *class_bytes = base + k * step;
    *class_bytes = (*class_bytes + WB_ALIGN - 1) / WB_ALIGN * WB_ALIGN;
    return e * CLASS_STEPS + (int)k - 1;
}

static void *block_take(size_t bytes, size_t *got) {
    int c = size_class(bytes, got);
    if (c >= CLASS_COUNT || !cache_head[c]) return NULL;
    void *p = cache_head[c];
    memcpy(&cache_head[c], p, sizeof(void *));
    cache_depth[c]--;
    cache_total -= *got;
    return p;
}

static void block_give(void *data, size_t bytes) {
    size_t class_bytes;
    int c = size_class(bytes, &class_bytes);
    if (alloc_cache_on() && c < CLASS_COUNT && cache_depth[c] < CACHE_PER_CLASS &&
        cache_total + class_bytes <= CACHE_MAX) {
        memcpy(data, &cache_head[c], sizeof(void *));
        cache_head[c] = data;
        cache_depth[c]++;
        cache_total += class_bytes;
        return;
    }
    free(data);
}

int wb_alloc_cache_on(void) { return alloc_cache_on(); }

static size_t alloc_limit;

size_t wb_alloc_limit(void) {
    if (alloc_limit) return alloc_limit;
    const char *env = getenv("WB_MAX_ALLOC_BYTES");
    if (env && *env) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (*end == '\0' && v > 0) return alloc_limit = (size_t)v;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) return alloc_limit = (size_t)pages * (size_t)page;
    return alloc_limit = (size_t)1 << 40;
}

static wb_status cpu_alloc(size_t nbytes, void **ptr) {
    size_t limit = wb_alloc_limit(), class_bytes;
    if (nbytes > limit) {
        char want[32], have[32];
        wb_format_bytes((double)nbytes, want, sizeof want);
        wb_format_bytes((double)limit, have, sizeof have);
        return wb_error(WB_ERR_MEMORY, "cannot allocate %s on cpu: more than the %s this machine allows", want, have);
    }
    *ptr = block_take(nbytes, &class_bytes);
    if (!*ptr) *ptr = aligned_alloc(WB_ALIGN, class_bytes); /* a multiple of the alignment */
    if (!*ptr) {
        char want[32];
        wb_format_bytes((double)nbytes, want, sizeof want);
        return wb_error(WB_ERR_MEMORY, "out of memory allocating %s on cpu", want);
    }
    return WB_OK;
}

static wb_status cpu_ok(void) { return WB_OK; }

static const wb_device_hooks *device_hooks;
void wb_device_set_hooks(const wb_device_hooks *hooks) { device_hooks = hooks; }
const wb_device_hooks *wb_device_hooks_active(void) { return device_hooks; }

/* The cpu runs kernels synchronously: nothing to wait for, but the call shows in a trace. */
static wb_status cpu_synchronize(void) {
    const wb_device_hooks *h = device_hooks;
    if (h && h->runtime) h->runtime(h->user, "synchronize", wb_now_ns());
    return WB_OK;
}
static int cpu_in_use(void) { return 1; }

static wb_status cpu_copy(void *dst, const void *src, size_t nbytes) {
    memcpy(dst, src, nbytes);
    return WB_OK;
}

const wb_backend wb_backend_cpu = {
    .device = WB_DEVICE_CPU,
    .name = "cpu",
    .check = cpu_ok,
    .in_use = cpu_in_use,
    .alloc = cpu_alloc,
    .free = block_give,
    .copy_from_host = cpu_copy,
    .copy_to_host = cpu_copy,
    .synchronize = cpu_synchronize,
};

const wb_backend *wb_backend_get(wb_device device) {
    return device == WB_DEVICE_CUDA ? &wb_backend_cuda : &wb_backend_cpu;
}

const wb_backend *wb_backend_in_use(wb_device device) {
    const wb_backend *b = wb_backend_get(device);
    return b->in_use() ? b : NULL;
}
