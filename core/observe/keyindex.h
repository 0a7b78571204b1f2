/* keyindex.h: string keys to dense ids (0, 1, ... in the order first seen), the one table the
 * event store's passes share (profiler_aggregate.c, profiler_groups.c, profiler_stacks.c,
 * findings_rules.c): owned copies of the keys, open addressing on an FNV-1a hash, doubled at
 * half full. And the doubling growth of the arrays those passes (and graph capture) fill. */
#ifndef WB_KEYINDEX_H
#define WB_KEYINDEX_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct wb_keyindex {
    char **key; /* key[id]: a copy, owned */
    size_t n, cap;
    uint32_t *slots; /* id + 1, 0 for an empty slot */
    size_t nslots;
} wb_keyindex;

/* The id of key; a new one (a copy of key kept, *fresh = 1 when fresh is given) when it is not
 * there yet; -1 when out of memory. */
int64_t wb_keyindex_get(wb_keyindex *x, const char *key, int *fresh);
/* Frees the keys and the table; the index is empty and usable again. */
void wb_keyindex_free(wb_keyindex *x);

/* Room for `need` elements of `size` bytes in *v (capacity *cap, doubled from 64); 0 when out of
 * memory (then *v is as it was). */
int wb_grow(void **v, size_t *cap, size_t need, size_t size);

/* qsort for arrays that may be empty (and then NULL, which qsort's contract does not allow). */
static inline void wb_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    if (n > 1) qsort(base, n, size, cmp);
}

#endif
