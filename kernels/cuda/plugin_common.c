/* plugin_common.c: the plugin's policy over a device (see plugin_common.h): errors, the caching
 * allocator, capture discipline and the GEMM plan cache. Shared by the real plugin and the mock. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_common.h"

static const wbcu_device *dev;
static __thread char last_error[512];

void wbcu_set_device(const wbcu_device *d) { dev = d; }
const char *wbcu_last_error(void) { return last_error; }

int wbcu_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}

int wbcu_device_fail(int code, const char *what) {
    dev->consume_error();
    return wbcu_fail("%s failed: %s (%s, error %d)", what, dev->error_string(code), dev->error_name(code), code);
}

int wbcu_relax_begin(void) { return dev->capturing() ? dev->relax() : -1; }
void wbcu_relax_end(int previous) {
    if (previous >= 0) dev->restore_mode(previous);
}

/* ---- caching allocator ---------------------------------------------------------------- *
 * Blocks are kept by size class (8 per power of two, 512-byte granularity) on host-side free
 * lists; a miss calls the device's malloc. Freed blocks are reused only by later work on the
 * same stream, so no event is needed. A graph being captured keeps the blocks it uses, so a
 * capture can miss the cache even after a warm-up: the miss then allocates in relaxed mode (the
 * allocation is not part of the graph; the graph keeps the block), and never empties the cache or
 * synchronises, which would break the capture. */
#define CLASS_STEPS 8
#define CLASS_COUNT (64 * CLASS_STEPS)
typedef struct block {
    void *ptr;
    size_t bytes;
    struct block *next;
} block;
static block *free_lists[CLASS_COUNT];
static size_t bytes_allocated, bytes_reserved, bytes_peak;

static int size_class(size_t bytes, size_t *class_bytes) {
    if (bytes <= 512) {
        *class_bytes = 512;
        return 0;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(bytes - 1));
    size_t base = (size_t)1 << e, step = base / CLASS_STEPS;
    size_t k = (bytes - base + step - 1) / step;
    *class_bytes = (base + k * step + 511) / 512 * 512;
    return e * CLASS_STEPS + (int)k - 1;
}

static void release_cached(void) {
    for (int c = 0; c < CLASS_COUNT; c++) {
        while (free_lists[c]) {
            block *b = free_lists[c];
            free_lists[c] = b->next;
            dev->free(b->ptr);
            bytes_reserved -= b->bytes;
            free(b);
        }
    }
}

int wbcu_empty_cache(void) {
    if (!dev) return 0;
    if (dev->capturing()) return wbcu_fail("cannot empty the CUDA memory cache while a graph is being captured");
    dev->synchronize();
    release_cached();
    return 0;
}

int wbcu_alloc(void **ptr, size_t nbytes) {
    *ptr = NULL;
    size_t class_bytes;
    int c = size_class(nbytes ? nbytes : 1, &class_bytes);
    if (c < CLASS_COUNT && free_lists[c]) {
        block *b = free_lists[c];
        free_lists[c] = b->next;
        *ptr = b->ptr;
        free(b);
    } else {
        int relaxed = wbcu_relax_begin();
        int e = dev->malloc(ptr, class_bytes);
        if (e && relaxed < 0) { /* out of memory, not capturing: give the cache back and retry */
            dev->consume_error();
            dev->synchronize();
            release_cached();
            e = dev->malloc(ptr, class_bytes);
        }
        wbcu_relax_end(relaxed);
        if (e) {
            dev->consume_error();
            size_t free_b = 0, total_b = 0;
            dev->mem_info(&free_b, &total_b);
            return wbcu_fail("cudaMalloc of %zu bytes%s failed: %s (device has %zu of %zu bytes free)", class_bytes,
                             relaxed >= 0 ? " while capturing a graph" : "", dev->error_string(e), free_b, total_b);
        }
        bytes_reserved += class_bytes;
    }
    bytes_allocated += class_bytes;
    if (bytes_allocated > bytes_peak) bytes_peak = bytes_allocated;
    return 0;
}

void wbcu_free(void *ptr, size_t nbytes) {
    if (!ptr) return;
    size_t class_bytes;
    int c = size_class(nbytes ? nbytes : 1, &class_bytes);
    bytes_allocated -= class_bytes;
    block *b = malloc(sizeof *b);
    if (!b || c >= CLASS_COUNT) { /* cannot be listed: given back, but never while capturing
                                   * (cudaFree synchronises the device), where it is kept */
        free(b);
        if (dev->capturing()) return;
        dev->free(ptr);
        bytes_reserved -= class_bytes;
        return;
    }
    b->ptr = ptr;
    b->bytes = class_bytes;
    b->next = free_lists[c];
    free_lists[c] = b;
}

void wbcu_memory_stats(size_t *allocated, size_t *reserved, size_t *peak) {
    *allocated = bytes_allocated;
    *reserved = bytes_reserved;
    *peak = bytes_peak;
}

/* ---- GEMM plans ------------------------------------------------------------------------ *
 * Descriptors and the heuristic's choice, cached per key: a graph capture must find everything
 * ready, and descriptor creation plus a heuristic query cost more host time than the launch. */
#define PLAN_SLOTS 512
static wbcu_plan plans[PLAN_SLOTS];

static uint64_t key_hash(const wbcu_gemm_key *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static uint32_t alignment_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 1;
    while (al < 256 && (a & al) == 0)
        al <<= 1;
    return al;
}

static void plan_destroy(wbcu_plan *pl) {
    if (pl->impl) dev->plan_destroy(pl);
    memset(pl, 0, sizeof *pl);
}

int wbcu_gemm(const wb_cuda_gemm *g) {
    if (g->bias && !wb_cuda_bias_fusable(g->bias))
        return wbcu_fail("the bias at %p is not 16-byte aligned: cuBLASLt's epilogue would fault on it (add it "
                         "with a kernel instead)",
                         g->bias);
    wbcu_gemm_key k;
    memset(&k, 0, sizeof k); /* the hash reads the padding */
    k.dtype = g->dtype;
    k.transa = g->transa;
    k.transb = g->transb;
    k.activation = g->activation;
    k.bias = g->bias != NULL;
    k.align_a = alignment_of(g->a);
    k.align_b = alignment_of(g->b);
    k.align_d = alignment_of(g->d);
    k.m = g->m;
    k.n = g->n;
    k.k = g->k;
    k.lda = g->lda;
    k.ldb = g->ldb;
    k.ldd = g->ldd;
    uint64_t h = key_hash(&k);
    wbcu_plan *pl = NULL;
    for (int probe = 0; probe < 8 && !pl; probe++) {
        wbcu_plan *c = &plans[(h + (uint64_t)probe) % PLAN_SLOTS];
        if (!c->used || !memcmp(&c->key, &k, sizeof k)) pl = c;
    }
    if (!pl) { /* every probed slot holds another plan: evict the home slot */
        pl = &plans[h % PLAN_SLOTS];
        plan_destroy(pl);
    }
    if (!pl->used) {
        memset(pl, 0, sizeof *pl);
        pl->key = k;
        pl->min_align[0] = k.align_a;
        pl->min_align[1] = k.align_b;
        pl->min_align[2] = k.align_d;
        /* made during the warm-up as a rule; a capture that still misses (another alignment)
         * queries in relaxed mode rather than invalidating the capture */
        int relaxed = wbcu_relax_begin();
        int r = dev->plan_build(pl);
        wbcu_relax_end(relaxed);
        if (r) {
            plan_destroy(pl);
            return -1;
        }
        pl->used = 1;
    }
    return dev->matmul(pl, g);
}

/* ---- generated kernels loaded ----------------------------------------------------------------- */

typedef struct loaded {
    uint64_t hash; /* FNV-1a over the image's bytes */
    size_t size;
    char name[128];
    void *kernel;
} loaded;

static loaded *loaded_kernels;
static size_t loaded_count, loaded_cap;

static uint64_t image_hash(const void *image, size_t size) {
    const unsigned char *p = image;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

void *wbcu_loaded_find(const void *image, size_t size, const char *name) {
    uint64_t h = image_hash(image, size);
    for (size_t i = 0; i < loaded_count; i++)
        if (loaded_kernels[i].hash == h && loaded_kernels[i].size == size && !strcmp(loaded_kernels[i].name, name))
            return loaded_kernels[i].kernel;
    return NULL;
}

int wbcu_loaded_add(const void *image, size_t size, const char *name, void *kernel) {
    if (strlen(name) >= sizeof loaded_kernels[0].name) return -1;
    if (loaded_count == loaded_cap) {
        size_t cap = loaded_cap ? 2 * loaded_cap : 16;
        loaded *grown = realloc(loaded_kernels, cap * sizeof *grown);
        if (!grown) return -1;
        loaded_kernels = grown, loaded_cap = cap;
    }
    loaded *l = &loaded_kernels[loaded_count++];
    l->hash = image_hash(image, size), l->size = size, l->kernel = kernel;
    snprintf(l->name, sizeof l->name, "%s", name);
    return 0;
}
