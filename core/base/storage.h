/* storage.h: the storage object behind wb_storage (internal to libwb). */
#ifndef WB_STORAGE_H
#define WB_STORAGE_H

#include <stdatomic.h>

#include "wb.h"

struct wb_storage {
    atomic_int refcount;
    wb_device device;
    size_t nbytes;
    void *data;       /* 64-byte aligned */
    uint64_t version; /* bumped by writes; see wb_storage_version */
    uint64_t id;      /* unique for the life of the process (addresses get reused) */
};

uint64_t wb_storage_id(const wb_storage *s);
wb_status wb_storage_new(wb_device device, size_t nbytes, wb_storage **out);
void wb_storage_retain(wb_storage *s);
void wb_storage_release(wb_storage *s);
/* Whether freed cpu blocks and headers are kept for reuse (off under ASan or with
 * WB_NO_ALLOC_CACHE=1; backend_cpu.c). */
int wb_alloc_cache_on(void);

#endif
