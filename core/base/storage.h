/* storage.h: the storage object behind wb_storage (internal to libwb). */
#ifndef WB_STORAGE_H
#define WB_STORAGE_H

#include <stdatomic.h>

#include <wb/wb.h>

struct wb_storage {
    atomic_int refcount;
    wb_device device;
    size_t nbytes;
    void *data;       /* 64-byte aligned */
    uint64_t version; /* bumped by writes; see wb_storage_version */
    uint64_t id;      /* unique for the life of the process (addresses get reused) */
};

/* Observers of storages for graph capture (all members optional): capture holds the storages a
 * captured kernel allocates or reads from a cache, and learns which ones it writes. Storage is
 * below graph capture, so capture registers here instead of being called from here. */
typedef struct wb_storage_hooks {
    void *user;
    void (*hold)(void *user, wb_storage *s);    /* allocated during capture, or to be kept alive */
    void (*written)(void *user, wb_storage *s); /* written by a captured kernel */
} wb_storage_hooks;
/* Installs capture's hooks (NULL removes them); the installed ones, or NULL. */
void wb_storage_set_capture(const wb_storage_hooks *hooks);
const wb_storage_hooks *wb_storage_capture_active(void);
/* A function told the id of every storage being freed (one: the prepacked weights' cache, which
 * drops what it packed from it). */
void wb_storage_set_free_hook(void (*fn)(uint64_t id));

uint64_t wb_storage_id(const wb_storage *s);
wb_status wb_storage_new(wb_device device, size_t nbytes, wb_storage **out);
void wb_storage_retain(wb_storage *s);
void wb_storage_release(wb_storage *s);
/* Whether freed cpu blocks and headers are kept for reuse (off under ASan or with
 * WB_NO_ALLOC_CACHE=1; backend_cpu.c). */
int wb_alloc_cache_on(void);

#endif
