/* pool.h: a free list of fixed-size headers (internal). An eager op allocates a tensor header
 * and a storage header per result, and glibc's malloc/free of small blocks cost more than the
 * op's arithmetic for small tensors. Only the interpreter thread creates and frees them. */
#ifndef WB_POOL_H
#define WB_POOL_H

#include <stdlib.h>
#include <string.h>

#define WB_POOL_MAX 16384

typedef struct wb_pool {
    void *items[WB_POOL_MAX];
    int n;
} wb_pool;

/* A zeroed header of `size` bytes (from the list, else calloc), or NULL. */
static inline void *wb_pool_take(wb_pool *p, size_t size) {
    if (p->n > 0) {
        void *h = p->items[--p->n];
        memset(h, 0, size);
        return h;
    }
    return calloc(1, size);
}

/* Keeps h for reuse when `keep` and there is room, else frees it. */
static inline void wb_pool_give(wb_pool *p, void *h, int keep) {
    if (keep && p->n < WB_POOL_MAX)
        p->items[p->n++] = h;
    else
        free(h);
}

#endif
