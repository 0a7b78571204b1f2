/* ptrset.c: see ptrset.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptrset.h"

static size_t slot_of(const void *p, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing: high bits mix best */
    return (size_t)(h >> 32) & (cap - 1);
}

int wb_ptrset_has(const wb_ptrset *s, const void *p) {
    if (!s->n) return 0;
    for (size_t i = slot_of(p, s->cap);; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i] == p) return 1;
        if (!s->slots[i]) return 0;
    }
}

static int grow(wb_ptrset *s) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    const void **slots = calloc(cap, sizeof *slots);
    if (!slots) return 0;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->slots[i]) continue;
        size_t j = slot_of(s->slots[i], cap);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = s->slots[i];
    }
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
    return 1;
}

int wb_ptrset_add(wb_ptrset *s, const void *p) {
    if (wb_ptrset_has(s, p)) return 0;
    if (2 * (s->n + 1) > s->cap && !grow(s)) return -1;
    size_t i = slot_of(p, s->cap);
    while (s->slots[i])
        i = (i + 1) & (s->cap - 1);
    s->slots[i] = p;
    s->n++;
    return 1;
}

void wb_ptrset_clear(wb_ptrset *s) {
    if (s->slots) memset(s->slots, 0, s->cap * sizeof *s->slots);
    s->n = 0;
}

void wb_ptrset_free(wb_ptrset *s) {
    free(s->slots);
    *s = (wb_ptrset){0};
}
