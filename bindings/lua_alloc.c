/* lua_alloc.c: the interpreter's allocator (see wb_lua_alloc in guard.h). */
#include <stdlib.h>
#include <string.h>

#include "guard.h"

/* The interpreter's allocator: small blocks (userdata headers, closures, short strings: what
 * an eager op allocates and the collector frees) come from per-size free lists instead of
 * malloc/free, which were a tenth of a 1-element op's instructions. Off under AddressSanitizer,
 * where it would hide use-after-free. */
#if !defined(__SANITIZE_ADDRESS__)
#define SMALL_STEP    16
#define SMALL_CLASSES 8    /* up to 128 bytes */
#define SMALL_KEEP    8192 /* per class: at most 8 MiB kept in all */
static void *small_free[SMALL_CLASSES];
static int small_count[SMALL_CLASSES];
#endif

void *wb_lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    (void)ud;
#if !defined(__SANITIZE_ADDRESS__)
    /* osize is the block's size only when ptr is set (else it encodes the object's type) */
    size_t oc = ptr && osize && osize <= SMALL_STEP * SMALL_CLASSES ? (osize - 1) / SMALL_STEP : (size_t)-1;
    size_t nc = nsize && nsize <= SMALL_STEP * SMALL_CLASSES ? (nsize - 1) / SMALL_STEP : (size_t)-1;
    if (ptr && oc == nc && nc != (size_t)-1) return ptr; /* same class: nothing to do */
    void *out = NULL;
    if (nsize) {
        if (nc != (size_t)-1 && small_free[nc]) {
            out = small_free[nc];
            memcpy(&small_free[nc], out, sizeof(void *));
            small_count[nc]--;
        } else if (nc != (size_t)-1) {
            out = malloc((nc + 1) * SMALL_STEP);
        } else if (ptr && oc == (size_t)-1) {
            return realloc(ptr, nsize); /* large to large */
        } else {
            out = malloc(nsize);
        }
        if (!out) return ptr && nsize <= osize ? ptr : NULL; /* Lua counts on shrinking never failing */
        if (ptr) memcpy(out, ptr, osize < nsize ? osize : nsize);
    }
    if (ptr) {
        if (oc != (size_t)-1 && small_count[oc] < SMALL_KEEP) {
            memcpy(ptr, &small_free[oc], sizeof(void *));
            small_free[oc] = ptr;
            small_count[oc]++;
        } else {
            free(ptr);
        }
    }
    return out;
#else
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
#endif
}
