/* storage.c: refcounted buffers on a device, allocated and freed through the device's backend
 * table (backend.h), with the counters the profiler and the Lua GC pacing read. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include <wb/clock.h>
#include "pool.h"
#include "storage.h"

static _Atomic uint64_t bytes_allocated; /* ever, for the Lua binding's GC pacing */
static _Atomic int64_t bytes_live;
static _Atomic int64_t bytes_live_on[WB_DEVICE_COUNT];
static void (*observer)(wb_device device, int64_t delta, int64_t live_on_device, int64_t start_ns);
static const wb_storage_hooks *capture;
static void (*on_free)(uint64_t id);

uint64_t wb_storage_bytes_allocated(void) { return atomic_load_explicit(&bytes_allocated, memory_order_relaxed); }
uint64_t wb_storage_bytes_live(void) { return (uint64_t)atomic_load_explicit(&bytes_live, memory_order_relaxed); }
void wb_storage_set_observer(void (*fn)(wb_device device, int64_t delta, int64_t live_on_device, int64_t start_ns)) {
    observer = fn;
}
void wb_storage_set_capture(const wb_storage_hooks *hooks) { capture = hooks; }
const wb_storage_hooks *wb_storage_capture_active(void) { return capture; }
void wb_storage_set_free_hook(void (*fn)(uint64_t id)) { on_free = fn; }

static wb_pool headers; /* see pool.h */

wb_status wb_storage_new(wb_device device, size_t nbytes, wb_storage **out) {
    *out = NULL;
    wb_status st = wb_device_check_available(device);
    if (st) return st;
    int64_t t0 = observer ? wb_now_ns() : 0; /* the profiler shows how long allocating took */
    wb_storage *s = wb_pool_take(&headers, sizeof *s);
    if (!s) return wb_error(WB_ERR_MEMORY, "out of memory allocating a storage header");
    if ((st = wb_backend_get(device)->alloc(nbytes, &s->data))) {
        wb_pool_give(&headers, s, 0);
        return st;
    }
    static atomic_uint_fast64_t next_id = 1;
    s->id = atomic_fetch_add(&next_id, 1);
    atomic_init(&s->refcount, 1);
    s->device = device;
    s->nbytes = nbytes;
    atomic_fetch_add_explicit(&bytes_allocated, nbytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&bytes_live, (int64_t)nbytes, memory_order_relaxed);
    int64_t on_device = atomic_fetch_add_explicit(&bytes_live_on[device], (int64_t)nbytes, memory_order_relaxed);
    if (observer) observer(device, (int64_t)nbytes, on_device + (int64_t)nbytes, t0);
    const wb_storage_hooks *cap = capture;
    if (cap && cap->hold) cap->hold(cap->user, s);
    *out = s;
    return WB_OK;
}

void wb_storage_retain(wb_storage *s) { atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed); }

void wb_storage_release(wb_storage *s) {
    if (!s) return;
    if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) == 1) {
        int64_t t0 = observer ? wb_now_ns() : 0;
        if (on_free) on_free(s->id);
        wb_backend_get(s->device)->free(s->data, s->nbytes);
        atomic_fetch_sub_explicit(&bytes_live, (int64_t)s->nbytes, memory_order_relaxed);
        int64_t on_device =
            atomic_fetch_sub_explicit(&bytes_live_on[s->device], (int64_t)s->nbytes, memory_order_relaxed);
        if (observer) observer(s->device, -(int64_t)s->nbytes, on_device - (int64_t)s->nbytes, t0);
        wb_pool_give(&headers, s, wb_alloc_cache_on());
    }
}

size_t wb_storage_nbytes(const wb_storage *s) { return s->nbytes; }
void *wb_storage_data(const wb_storage *s) { return s->data; }
int wb_storage_refcount(const wb_storage *s) { return atomic_load(&((wb_storage *)s)->refcount); }
uint64_t wb_storage_version(const wb_storage *s) { return s->version; }
void wb_storage_bump_version(wb_storage *s) {
    s->version++;
    const wb_storage_hooks *cap = capture;
    if (cap && cap->written) cap->written(cap->user, s);
}
uint64_t wb_storage_id(const wb_storage *s) { return s->id; }
