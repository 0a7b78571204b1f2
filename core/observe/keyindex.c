/* keyindex.c: string keys to dense ids for the event store's passes (keyindex.h). */
#include "keyindex.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_key(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int rehash(wb_keyindex *x) {
    size_t ns = x->nslots ? 2 * x->nslots : 256;
    uint32_t *s = calloc(ns, sizeof *s);
    if (!s) return 0;
    for (size_t i = 0; i < x->n; i++) {
        size_t j = hash_key(x->key[i]) & (ns - 1);
        while (s[j])
            j = (j + 1) & (ns - 1);
        s[j] = (uint32_t)i + 1;
    }
    free(x->slots);
    x->slots = s, x->nslots = ns;
    return 1;
}

int64_t wb_keyindex_get(wb_keyindex *x, const char *key, int *fresh) {
    if (fresh) *fresh = 0;
    if (2 * (x->n + 1) > x->nslots && !rehash(x)) return -1;
    size_t j = hash_key(key) & (x->nslots - 1);
    for (; x->slots[j]; j = (j + 1) & (x->nslots - 1))
        if (!strcmp(x->key[x->slots[j] - 1], key)) return x->slots[j] - 1;
    char *copy = strdup(key);
    if (!copy || !wb_grow((void **)&x->key, &x->cap, x->n + 1, sizeof *x->key)) return free(copy), -1;
    x->key[x->n] = copy;
    x->slots[j] = (uint32_t)++x->n;
    if (fresh) *fresh = 1;
    return (int64_t)x->n - 1;
}

void wb_keyindex_free(wb_keyindex *x) {
    for (size_t i = 0; i < x->n; i++)
        free(x->key[i]);
    free(x->key), free(x->slots);
    memset(x, 0, sizeof *x);
}

int wb_grow(void **v, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 1;
    size_t cap2 = *cap ? *cap * 2 : 64;
    while (cap2 < need)
        cap2 *= 2;
    void *q = realloc(*v, cap2 * size);
    if (!q) return 0;
    *v = q, *cap = cap2;
    return 1;
}
