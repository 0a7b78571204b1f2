/* ptrset.h: a set of pointers (open addressing, linear probing), so that graph capture asks
 * "is this storage held already?" in constant time: a capture of N ops stays linear in N. */
#ifndef WB_PTRSET_H
#define WB_PTRSET_H

#include <stddef.h>

typedef struct wb_ptrset {
    const void **slots; /* NULL: empty */
    size_t cap, n;      /* cap: a power of two, kept at least twice n */
} wb_ptrset;

int wb_ptrset_has(const wb_ptrset *s, const void *p);
/* Adds p (not NULL): 1 when added, 0 when already there, -1 out of memory. */
int wb_ptrset_add(wb_ptrset *s, const void *p);
void wb_ptrset_clear(wb_ptrset *s); /* keeps the table */
void wb_ptrset_free(wb_ptrset *s);

#endif
