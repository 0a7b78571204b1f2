/* storage.c: refcounted, 64-byte aligned buffers, and the allocation limit.
 * An absurd request (more than the machine's memory) is refused with a message instead of
 * being handed to an overcommitting allocator that would OOM-kill the process later. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "linear_ops.h"
#include "storage.h"

#define WB_ALIGN 64

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

wb_status wb_storage_new(wb_device device, size_t nbytes, wb_storage **out) {
    *out = NULL;
    wb_status st = wb_device_check_available(device);
    if (st) return st;
    size_t limit = wb_alloc_limit();
    if (nbytes > limit) {
        char want[32], have[32];
        wb_format_bytes((double)nbytes, want, sizeof want);
        wb_format_bytes((double)limit, have, sizeof have);
        return wb_error(WB_ERR_MEMORY, "cannot allocate %s on %s: more than the %s this machine allows", want,
                        wb_device_name(device), have);
    }
    wb_storage *s = calloc(1, sizeof *s);
    if (!s) return wb_error(WB_ERR_MEMORY, "out of memory allocating a storage header");
    /* aligned_alloc needs a size that is a multiple of the alignment; never 0 bytes. */
    size_t padded = (nbytes + WB_ALIGN - 1) / WB_ALIGN * WB_ALIGN;
    if (padded == 0) padded = WB_ALIGN;
    s->data = aligned_alloc(WB_ALIGN, padded);
    if (!s->data) {
        free(s);
        char want[32];
        wb_format_bytes((double)nbytes, want, sizeof want);
        return wb_error(WB_ERR_MEMORY, "out of memory allocating %s on %s", want, wb_device_name(device));
    }
    static atomic_uint_fast64_t next_id = 1;
    s->id = atomic_fetch_add(&next_id, 1);
    atomic_init(&s->refcount, 1);
    s->device = device;
    s->nbytes = nbytes;
    *out = s;
    return WB_OK;
}

void wb_storage_retain(wb_storage *s) { atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed); }

void wb_storage_release(wb_storage *s) {
    if (!s) return;
    if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) == 1) {
        wb_prepack_forget(s->id);
        free(s->data);
        free(s);
    }
}

size_t wb_storage_nbytes(const wb_storage *s) { return s->nbytes; }
void *wb_storage_data(const wb_storage *s) { return s->data; }
int wb_storage_refcount(const wb_storage *s) { return atomic_load(&((wb_storage *)s)->refcount); }
uint64_t wb_storage_version(const wb_storage *s) { return s->version; }
void wb_storage_bump_version(wb_storage *s) { s->version++; }
uint64_t wb_storage_id(const wb_storage *s) { return s->id; }
