/* kernel.c: interning kernel kinds (see kernel.h) in an open-addressing hash table that grows,
 * and the one vocabulary of activations shared by Lua, the C API, kernel names and the CUDA
 * plugin's ABI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wb/kernel.h>

/* ---- activations ---------------------------------------------------------------------------- */

/* The word users write (Lua, C API) and the word kernel names use for the same function. */
static const struct {
    const char *word, *kernel_word;
} activations[] = {
    [WB_ACT_NONE] = {"none", ""},
    [WB_ACT_GELU_TANH] = {"gelu_tanh", "gelu_tanh"},
    [WB_ACT_GELU_ERF] = {"gelu", "gelu_erf"},
    [WB_ACT_GEGLU] = {"geglu", "geglu"},
    [WB_ACT_SILU] = {"silu", "silu"},
    [WB_ACT_SWIGLU] = {"swiglu", "swiglu"},
};
_Static_assert(sizeof activations / sizeof activations[0] == WB_ACT_COUNT, "one word per activation");

const char *wb_activation_name(wb_activation act) { return (unsigned)act < WB_ACT_COUNT ? activations[act].word : "?"; }

wb_status wb_activation_parse(const char *word, wb_activation *out) {
    if (word && !strcmp(word, "gelu_erf")) word = "gelu"; /* the kernel names' spelling of the same function */
    for (int a = 0; word && a < WB_ACT_COUNT; a++)
        if (a != WB_ACT_GEGLU && a != WB_ACT_SWIGLU && !strcmp(word, activations[a].word)) { /* dual-only */
            *out = (wb_activation)a;
            return WB_OK;
        }
    return wb_error(WB_ERR_ARGUMENT, "unknown activation '%s' (expected \"gelu\", \"gelu_tanh\", \"silu\" or \"none\")",
                    word ? word : "(null)");
}

/* ---- interning ------------------------------------------------------------------------------ */

typedef struct entry {
    wb_kernel_kind kind; /* strings: external is owned, the others are static */
    uint64_t hash;
    char *name; /* formatted on first use */
} entry;

static entry **table;
static size_t capacity, count;

static uint64_t mix_str(uint64_t h, const char *s) {
    for (const unsigned char *u = (const unsigned char *)(s ? s : ""); *u; u++)
        h = (h ^ *u) * 0x100000001b3ull;  /* FNV-1a */
    return (h ^ 0xff) * 0x100000001b3ull; /* a separator, so fields do not run together */
}

static uint64_t mix_int(uint64_t h, int v) {
    for (int i = 0; i < 4; i++, v >>= 8)
        h = (h ^ (unsigned char)v) * 0x100000001b3ull;
    return h;
}

static uint64_t hash_kind(const wb_kernel_kind *k) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix_str(h, k->prefix ? k->prefix : "wb");
    h = mix_str(h, k->op);
    h = mix_str(h, k->dtype);
    h = mix_str(h, k->isa);
    h = mix_int(h, k->tile_m);
    h = mix_int(h, k->tile_n);
    h = mix_str(h, k->layout);
    h = mix_int(h, k->bias);
    h = mix_int(h, (int)k->act);
    h = mix_str(h, k->variant);
    h = mix_str(h, k->ops);
    return mix_str(h, k->external);
}

static int same_str(const char *a, const char *b) { return a == b || !strcmp(a ? a : "", b ? b : ""); }

static int same_kind(const wb_kernel_kind *a, const wb_kernel_kind *b) {
    return same_str(a->prefix ? a->prefix : "wb", b->prefix ? b->prefix : "wb") && same_str(a->op, b->op) &&
           same_str(a->dtype, b->dtype) && same_str(a->isa, b->isa) && a->tile_m == b->tile_m &&
           a->tile_n == b->tile_n && !strcmp(a->layout, b->layout) && a->bias == b->bias && a->act == b->act &&
           same_str(a->variant, b->variant) && same_str(a->external, b->external) && same_str(a->ops, b->ops);
}

static int grow(void) {
    size_t cap = capacity ? capacity * 2 : 256;
    entry **t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < capacity; i++)
        if (table[i]) {
            size_t j = table[i]->hash & (cap - 1);
            while (t[j])
                j = (j + 1) & (cap - 1);
            t[j] = table[i];
        }
    free(table);
    table = t, capacity = cap;
    return 0;
}

static const wb_kernel_kind unknown = {.op = "unknown", .variant = "kernel"};

const wb_kernel_kind *wb_kernel_kind_intern(const wb_kernel_kind *key) {
    uint64_t h = hash_kind(key);
    if (capacity) {
        for (size_t j = h & (capacity - 1); table[j]; j = (j + 1) & (capacity - 1))
            if (table[j]->hash == h && same_kind(&table[j]->kind, key)) return &table[j]->kind;
    }
    if ((count + 1) * 2 > capacity && grow()) return &unknown;
    entry *e = calloc(1, sizeof *e);
    if (!e) return &unknown;
    e->kind = *key;
    e->hash = h;
    if (key->external && !(e->kind.external = strdup(key->external))) {
        free(e);
        return &unknown;
    }
    size_t j = h & (capacity - 1);
    while (table[j])
        j = (j + 1) & (capacity - 1);
    table[j] = e;
    count++;
    return &e->kind;
}

size_t wb_kernel_kind_count(void) { return count; }

static void append(char *buf, size_t len, size_t *n, const char *part) {
    if (!part || !*part || *n >= len) return;
    int w = snprintf(buf + *n, len - *n, "%s%s", *n ? "_" : "", part);
    if (w > 0) *n += (size_t)w;
}

const char *wb_kernel_kind_epilogue(const wb_kernel_kind *k, char *buf, size_t len) {
    const char *act = (unsigned)k->act < WB_ACT_COUNT ? activations[k->act].kernel_word : "";
    /* a generated GEMM epilogue: the group's ops after the GEMM's own */
    const char *gen = k->tile_m > 0 && k->ops ? strchr(k->ops, ' ') : NULL;
    if (len == 0) return buf;
    if (!k->bias && !*act && !gen) {
        snprintf(buf, len, "none");
        return buf;
    }
    size_t n = 0;
    buf[0] = '\0';
    append(buf, len, &n, k->bias ? "bias" : "");
    append(buf, len, &n, act);
    size_t from = n;
    append(buf, len, &n, gen ? gen + 1 : NULL);
    for (size_t i = from; i < n && i < len; i++) /* "sigmoid mul add" -> "sigmoid_mul_add" */
        if (buf[i] == ' ') buf[i] = '_';
    return buf;
}

int wb_kernel_kind_fields(const wb_kernel_kind *k, wb_kernel_fields *out) {
    if (k->tile_m <= 0 && !k->layout[0]) return 0;
    out->isa = k->isa ? k->isa : (k->prefix ? k->prefix : "");
    out->layout = k->layout;
    if (k->tile_m > 0)
        snprintf(out->tile, sizeof out->tile, "%dx%d", k->tile_m, k->tile_n);
    else
        out->tile[0] = '\0';
    wb_kernel_kind_epilogue(k, out->epilogue, sizeof out->epilogue);
    return 1;
}

const char *wb_kernel_kind_name(const wb_kernel_kind *k) {
    if (k->external) return k->external;
    if (k == &unknown) return "wb_unknown_kernel";
    entry *e = (entry *)((char *)k - offsetof(entry, kind));
    if (e->name) return e->name;
    char buf[256], tile[32] = "", epi[64] = "";
    size_t n = 0;
    if (k->tile_m > 0) snprintf(tile, sizeof tile, "%dx%d", k->tile_m, k->tile_n);
    if (k->bias || k->act != WB_ACT_NONE) { /* a generated epilogue's ops are in its variant */
        wb_kernel_kind hand = *k;
        hand.ops = NULL;
        wb_kernel_kind_epilogue(&hand, epi, sizeof epi);
    }
    buf[0] = 0;
    append(buf, sizeof buf, &n, k->prefix ? k->prefix : "wb");
    append(buf, sizeof buf, &n, k->op);
    append(buf, sizeof buf, &n, k->dtype);
    append(buf, sizeof buf, &n, k->isa);
    append(buf, sizeof buf, &n, tile);
    append(buf, sizeof buf, &n, k->layout);
    append(buf, sizeof buf, &n, epi);
    append(buf, sizeof buf, &n, k->variant);
    e->name = strdup(buf);
    return e->name ? e->name : "wb_unknown_kernel";
}
