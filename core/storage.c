/* storage.c: refcounted, 64-byte aligned buffers, and the allocation limit.
 * An absurd request (more than the machine's memory) is refused with a message instead of
 * being handed to an overcommitting allocator that would OOM-kill the process later. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda.h"
#include "linear_ops.h"
#include "op.h"
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

static size_t alloc_limit;
static _Atomic uint64_t bytes_allocated; /* ever, for the Lua binding's GC pacing */
static _Atomic int64_t bytes_live;
static void (*observer)(int64_t delta);

uint64_t wb_storage_bytes_allocated(void) { return atomic_load_explicit(&bytes_allocated, memory_order_relaxed); }
uint64_t wb_storage_bytes_live(void) { return (uint64_t)atomic_load_explicit(&bytes_live, memory_order_relaxed); }
void wb_storage_set_observer(void (*fn)(int64_t delta)) { observer = fn; }

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

void wb_format_bytes(double bytes, char *buf, size_t len) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 6) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f B", bytes);
    else
        snprintf(buf, len, "%.1f %s", bytes, units[u]);
}

/* Storage headers come from a free list: an eager op allocates one per result, and glibc's
 * malloc/free of small blocks cost more than the op's arithmetic for small tensors. Only the
 * interpreter thread creates and frees tensors. */
#define HEADER_POOL 16384
static wb_storage *storage_pool[HEADER_POOL];
static int storage_pool_n;

static wb_storage *storage_header_new(void) {
    if (storage_pool_n > 0) {
        wb_storage *s = storage_pool[--storage_pool_n];
        memset(s, 0, sizeof *s);
        return s;
    }
    return calloc(1, sizeof(wb_storage));
}

static void storage_header_free(wb_storage *s) {
    if (storage_pool_n < HEADER_POOL && alloc_cache_on())
        storage_pool[storage_pool_n++] = s;
    else
        free(s);
}

wb_status wb_storage_new(wb_device device, size_t nbytes, wb_storage **out) {
    *out = NULL;
    wb_status st = wb_device_check_available(device);
    if (st) return st;
    size_t limit = wb_alloc_limit();
    if (device == WB_DEVICE_CPU && nbytes > limit) {
        char want[32], have[32];
        wb_format_bytes((double)nbytes, want, sizeof want);
        wb_format_bytes((double)limit, have, sizeof have);
        return wb_error(WB_ERR_MEMORY, "cannot allocate %s on %s: more than the %s this machine allows", want,
                        wb_device_name(device), have);
    }
    wb_storage *s = storage_header_new();
    if (!s) return wb_error(WB_ERR_MEMORY, "out of memory allocating a storage header");
    size_t class_bytes;
    if (device == WB_DEVICE_CUDA) { /* the plugin's caching allocator */
        if ((st = wb_cuda_alloc(nbytes, &s->data))) {
            storage_header_free(s);
            return st;
        }
    } else {
        s->data = block_take(nbytes, &class_bytes);
        if (!s->data) s->data = aligned_alloc(WB_ALIGN, class_bytes); /* a multiple of the alignment */
    }
    if (!s->data) {
        storage_header_free(s);
        char want[32];
        wb_format_bytes((double)nbytes, want, sizeof want);
        return wb_error(WB_ERR_MEMORY, "out of memory allocating %s on %s", want, wb_device_name(device));
    }
    static atomic_uint_fast64_t next_id = 1;
    s->id = atomic_fetch_add(&next_id, 1);
    atomic_init(&s->refcount, 1);
    s->device = device;
    s->nbytes = nbytes;
    atomic_fetch_add_explicit(&bytes_allocated, nbytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&bytes_live, (int64_t)nbytes, memory_order_relaxed);
    if (observer) observer((int64_t)nbytes);
    const wb_capture_hooks *cap = wb_capture_hooks_active();
    if (cap && cap->storage_new) cap->storage_new(cap->user, s);
    *out = s;
    return WB_OK;
}

void wb_storage_retain(wb_storage *s) { atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed); }

void wb_storage_release(wb_storage *s) {
    if (!s) return;
    if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) == 1) {
        wb_prepack_forget(s->id);
        if (s->device == WB_DEVICE_CUDA)
            wb_cuda_free(s->data, s->nbytes);
        else
            block_give(s->data, s->nbytes);
        atomic_fetch_sub_explicit(&bytes_live, (int64_t)s->nbytes, memory_order_relaxed);
        if (observer) observer(-(int64_t)s->nbytes);
        storage_header_free(s);
    }
}

size_t wb_storage_nbytes(const wb_storage *s) { return s->nbytes; }
void *wb_storage_data(const wb_storage *s) { return s->data; }
int wb_storage_refcount(const wb_storage *s) { return atomic_load(&((wb_storage *)s)->refcount); }
uint64_t wb_storage_version(const wb_storage *s) { return s->version; }
void wb_storage_bump_version(wb_storage *s) {
    s->version++;
    const wb_capture_hooks *cap = wb_capture_hooks_active();
    if (cap && cap->storage_written) cap->storage_written(cap->user, s);
}
uint64_t wb_storage_id(const wb_storage *s) { return s->id; }
