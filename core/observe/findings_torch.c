/* findings_torch.c: the findings' groups for traces torch.profiler wrote, over the findings' index
 * (findings_index.h). torch records no data flow and its kernels carry vendor names only, so these
 * read the op tree, aten's op names and the recorded shapes and dtypes (record_shapes=True):
 * views (no kernel, no aten::copy_ under them), copies (aten::copy_ at or under them), chains of
 * pointwise ops on one shape (a fusion chance), the GEMMs with their shapes, small kernels and
 * launches per op. scripts/wb/findings_torch.lua writes the sentences; nothing here is Lua. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings_index.h"
#include "keyindex.h"

/* ---- what an aten op is, by its name ------------------------------------------------------------ */

enum { K_VIEW = 1, K_COPY = 2, K_COPYWRAP = 4, K_POINT = 8, K_GEMM = 16 };

static const char *const VIEWS[] = {"t", "transpose", "permute", "view", "_unsafe_view", "expand", "expand_as",
    "as_strided", "reshape", "unsqueeze", "squeeze", "slice", "select", "narrow", "alias", "detach", "view_as",
    "unflatten", "flatten", "split", "chunk", "unbind", "numpy_T", "mT", "diagonal", "unfold", "movedim", "swapaxes",
    "transpose_", "t_", "unsqueeze_", "squeeze_", "lift_fresh", NULL};
/* ops that copy through an aten::copy_ under them (reshape and flatten when the input is not
 * viewable as the new shape) */
static const char *const COPY_WRAPS[] = {"contiguous", "clone", "_to_copy", "to", "reshape", "flatten", "type_as",
    "copy", NULL};
static const char *const POINTWISE[] = {"add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "abs",
    "exp", "log", "sqrt", "rsqrt", "pow", "reciprocal", "gelu", "gelu_", "silu", "silu_", "relu", "relu_", "sigmoid",
    "sigmoid_", "tanh", "tanh_", "erf", "sin", "cos", "clamp", "clamp_", "clamp_min", "maximum", "minimum", "where",
    "hardswish", "leaky_relu", "threshold", "lerp", "addcmul", "addcdiv", "square", NULL};
static const char *const GEMMS[] = {"addmm", "mm", "bmm", "baddbmm", "addbmm", "matmul", "linear",
    "_addmm_activation", NULL};

static int in_list(const char *s, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(s, *list)) return 1;
    return 0;
}

/* The kinds of an op name (0 for names that are not aten's). Names are interned in the store, so
 * a small cache by address spares the string compares for every op but the first of a name. */
typedef struct kind_cache {
    const char *name[256];
    int kind[256];
} kind_cache;

static int kind_of(kind_cache *kc, const char *name) {
    size_t h = ((uintptr_t)name >> 4) & 255;
    if (kc->name[h] == name) return kc->kind[h];
    int k = 0;
    if (!strncmp(name, "aten::", 6)) {
        const char *s = name + 6;
        k = (in_list(s, VIEWS) ? K_VIEW : 0) | (!strcmp(s, "copy_") ? K_COPY : 0) |
            (in_list(s, COPY_WRAPS) ? K_COPYWRAP : 0) | (in_list(s, POINTWISE) ? K_POINT : 0) |
            (in_list(s, GEMMS) ? K_GEMM : 0);
    }
    kc->name[h] = name, kc->kind[h] = k;
    return k;
}

/* torch's own words for the dtypes the importer keeps, and their sizes (0: unknown) */
static const char *torch_dtype(int dt) { return dt == WB_F32 ? "float" : dt == WB_BF16 ? "c10::BFloat16" : NULL; }
static int dtype_size(int dt) { return dt == WB_F32 ? 4 : dt == WB_BF16 ? 2 : 0; }

/* ---- the op tree: per op its kernels' time, what is under it, its children in start order ------- */

enum { F_COPY_BELOW = 1, F_GEMM_BELOW = 2 }; /* F_COPY_BELOW: an aten::copy_ at or under it */

typedef struct tree {
    int64_t *ktime;                   /* device time of the kernels, copies and memsets under it */
    int32_t *first, *next, *parent;   /* children in start order; -1 none */
    uint8_t *flags, *kind;
    int32_t top_first;                /* the top-level ops in start order */
} tree;

typedef struct by_start {
    int64_t ts;
    int32_t i;
} by_start;

static int start_cmp(const void *a, const void *b) {
    const by_start *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static void tree_free(tree *t) {
    free(t->ktime), free(t->first), free(t->next), free(t->parent), free(t->flags), free(t->kind);
    memset(t, 0, sizeof *t);
}

static int tree_build(fx_index *ix, tree *t) {
    size_t n = ix->nop ? ix->nop : 1;
    memset(t, 0, sizeof *t);
    t->ktime = calloc(n, sizeof *t->ktime), t->flags = calloc(n, 1), t->kind = calloc(n, 1);
    t->first = malloc(n * sizeof *t->first), t->next = malloc(n * sizeof *t->next);
    t->parent = malloc(n * sizeof *t->parent);
    by_start *order = malloc(n * sizeof *order);
    int32_t *last = malloc(n * sizeof *last);
    if (!t->ktime || !t->flags || !t->kind || !t->first || !t->next || !t->parent || !order || !last) {
        free(order), free(last), tree_free(t);
        return 0;
    }
    kind_cache kc = {0};
    for (size_t i = 0; i < ix->nop; i++) {
        const fx_op *o = &ix->op[i];
        fx_op *p = o->parent ? fx_op_of(ix, o->parent) : NULL;
        t->parent[i] = p ? (int32_t)(p - ix->op) : -1;
        t->kind[i] = (uint8_t)kind_of(&kc, o->name);
        t->first[i] = t->next[i] = last[i] = -1;
        order[i] = (by_start){.ts = o->ts, .i = (int32_t)i};
    }
    wb_sort(order, ix->nop, sizeof *order, start_cmp);
    int32_t top_last = -1;
    t->top_first = -1;
    for (size_t k = 0; k < ix->nop; k++) {
        int32_t i = order[k].i, p = t->parent[i];
        int32_t *tail = p >= 0 ? &last[p] : &top_last;
        if (*tail < 0) *(p >= 0 ? &t->first[p] : &t->top_first) = i;
        else t->next[*tail] = i;
        *tail = i;
    }
    free(order), free(last);
    /* upwards: an aten::copy_ marks itself and every op above it, a GEMM every op above it */
    for (size_t i = 0; i < ix->nop; i++) {
        if (!(t->kind[i] & (K_COPY | K_GEMM))) continue;
        int copy = t->kind[i] & K_COPY;
        if (copy) t->flags[i] |= F_COPY_BELOW;
        for (int32_t p = t->parent[i], depth = 0; p >= 0 && depth < 64; p = t->parent[p], depth++)
            t->flags[p] |= copy ? F_COPY_BELOW : F_GEMM_BELOW;
    }
    for (size_t d = 0; d < ix->ndev; d++) {
        fx_op *o = fx_op_of(ix, ix->dev[d].corr);
        for (int32_t p = o ? (int32_t)(o - ix->op) : -1, depth = 0; p >= 0 && depth < 64; p = t->parent[p], depth++)
            t->ktime[p] += ix->dev[d].dur;
    }
    return 1;
}

/* ---- groups ------------------------------------------------------------------------------------- */

typedef struct tgroup {
    int64_t calls, host_ns, device_ns, kernels, ts, bytes, small, small_ns, launches, launch_ns;
    int has_bytes;
    int32_t first; /* the first member (its shapes are read again for the sentence) */
    const char *kernel;
} tgroup;

typedef struct groups {
    wb_keyindex keys;
    tgroup *g;
    size_t n, cap;
} groups;

/* The group of key, or NULL when out of memory. */
static tgroup *group(groups *gs, const char *key, int32_t first, int64_t ts) {
    int fresh = 0;
    int64_t k = wb_keyindex_get(&gs->keys, key, &fresh);
    if (k < 0 || !wb_grow((void **)&gs->g, &gs->cap, (size_t)k + 1, sizeof *gs->g)) return NULL;
    if (fresh) {
        gs->g[k] = (tgroup){.first = first, .ts = ts, .has_bytes = 1};
        gs->n = (size_t)k + 1;
    }
    return &gs->g[k];
}

static void groups_free(groups *gs) {
    wb_keyindex_free(&gs->keys);
    free(gs->g);
    memset(gs, 0, sizeof *gs);
}

/* The shapes and dtypes of op i's inputs, read again from its event ({dims...} or false each). */
static int put_inputs(fx_index *ix, fx_out *o, wb_val *m, int32_t i) {
    wb_prof_cursor c;
    const wb_event *e = fx_event_at(ix, ix->op[i].index, &c);
    wb_val *shapes = fx_set_list(o, m, "shapes"), *types = fx_set_list(o, m, "dtypes");
    for (int k = 0; e && k < e->ninputs; k++) {
        int nd = wb_event_ndim(e, k);
        wb_val *s = fx_add(o, shapes, NULL);
        if (nd < 0) {
            s->type = WB_VAL_BOOL, s->b = 0;
        } else {
            s->type = WB_VAL_LIST;
            const int64_t *dims = nd > 0 ? wb_prof_shape(ix->p, e, k) : NULL;
            for (int d = 0; d < nd; d++)
                fx_push_int(o, s, dims[d]);
        }
        const char *dt = nd < 0 ? NULL : torch_dtype(ix->op[i].dtype[k]);
        wb_val *t = fx_add(o, types, NULL);
        if (dt) {
            t->type = WB_VAL_STR, t->s = strdup(dt);
            if (!t->s) t->type = WB_VAL_NIL, o->oom = 1;
        } else {
            t->type = WB_VAL_BOOL, t->b = 0;
        }
    }
    wb_prof_cursor_close(&c);
    return c.status == WB_OK;
}

static wb_val *put_group(fx_out *o, wb_val *list, const char *key, const tgroup *g) {
    wb_val *m = fx_add(o, list, NULL);
    m->type = WB_VAL_MAP;
    fx_set_str(o, m, "name", key);
    fx_set_int(o, m, "calls", g->calls);
    fx_set_int(o, m, "host_ns", g->host_ns);
    fx_set_int(o, m, "device_ns", g->device_ns);
    fx_set_int(o, m, "kernels", g->kernels);
    fx_set_int(o, m, "ts", g->ts);
    if (g->has_bytes && g->bytes > 0) fx_set_int(o, m, "bytes", g->bytes);
    return m;
}

/* The input holding op i's output shape, as far as the shapes tell: the largest (broadcasting). */
static int out_input(const fx_op *op) {
    int best = -1;
    for (int k = 0; k < op->ninputs && k < WB_EVENT_MAX_INPUTS; k++)
        if (op->dtype[k] >= 0 && (best < 0 || op->numel[k] > op->numel[best])) best = k;
    return best;
}

/* The window (range or step) op i starts in, -1 outside every one: a chain never crosses steps. */
static int64_t window_of(const fx_index *ix, int64_t ts) {
    size_t lo = 0, hi = ix->nwindow;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ix->window[mid].ts <= ts) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0 || ts >= ix->window[lo - 1].ts + ix->window[lo - 1].dur) return -1;
    return (int64_t)lo - 1;
}

/* op b reads a's output, as the shapes say: an input of b with a's output's size and dtype */
static int same_shape(const fx_op *a, const fx_op *b) {
    int k = out_input(a);
    /* (no elements, or no shape recorded, also 0: nothing to size, and 0 == 0 is no evidence) */
    if (k < 0 || a->numel[k] <= 0) return 0;
    for (int j = 0; j < b->ninputs && j < WB_EVENT_MAX_INPUTS; j++)
        if (b->dtype[j] == a->dtype[k] && b->numel[j] == a->numel[k]) return 1;
    return 0;
}

/* Other ops allowed between two links of a chain: `gelu(gate(x)) * up(x)` runs gate's linear,
 * gelu, up's linear, then mul; the mul still reads gelu's output. */
#define FUSE_GAP 2

/* The next pointwise sibling after x (one that ran its kernels, on a GPU trace), past at most
 * FUSE_GAP others, in window w; -1 when there is none. */
static int32_t next_pointwise(fx_index *ix, const tree *t, int32_t x, int gpu, int64_t w) {
    int32_t b = t->next[x];
    for (int others = 0; b >= 0 && others <= FUSE_GAP; b = t->next[b], others++) {
        if (window_of(ix, ix->op[b].ts) != w) return -1;
        if ((t->kind[b] & K_POINT) && (!gpu || ix->op[b].nkernels)) return b;
    }
    return -1;
}

/* a chain's ops, joined by " -> ", as a list */
static void put_chain(fx_out *o, wb_val *m, const char *joined) {
    wb_val *l = fx_set_list(o, m, "chain");
    for (const char *s = joined, *arrow; s; s = arrow ? arrow + 4 : NULL) {
        arrow = strstr(s, " -> ");
        wb_val *v = fx_add(o, l, NULL);
        v->type = WB_VAL_STR, v->s = arrow ? strndup(s, (size_t)(arrow - s)) : strdup(s);
        if (!v->s) v->type = WB_VAL_NIL, o->oom = 1;
    }
}

/* fusion: chains of sibling pointwise ops (each launching its kernels on a GPU trace) where each
 * reads a tensor of the size and dtype the one before wrote, in one window */
static int fusion(fx_index *ix, const tree *t, fx_out *o, wb_val *out) {
    groups gs = {0};
    static char key[4096];
    int gpu = ix->ndev > 0;
    int32_t member[64];
    for (size_t s = 0; s <= ix->nop; s++) { /* each op's children, then the top level */
        int32_t a = s < ix->nop ? t->first[s] : t->top_first;
        while (a >= 0) {
            int n = 1, has_bytes = 1;
            int64_t bytes = 0, time = 0;
            member[0] = a;
            const fx_op *oa = &ix->op[a];
            if ((t->kind[a] & K_POINT) && (!gpu || oa->nkernels)) {
                int64_t w = window_of(ix, oa->ts);
                for (int32_t b; n < 64 && (b = next_pointwise(ix, t, member[n - 1], gpu, w)) >= 0; member[n++] = b) {
                    const fx_op *pe = &ix->op[member[n - 1]];
                    if (!same_shape(pe, &ix->op[b])) break;
                    int k = out_input(pe), size = dtype_size(pe->dtype[k]);
                    if (size) bytes += 2 * pe->numel[k] * size;
                    else has_bytes = 0;
                }
            }
            if (n == 1) {
                a = t->next[a];
                continue;
            }
            size_t kl = 0;
            for (int i = 0; i < n && kl < sizeof key; i++) {
                kl += (size_t)snprintf(key + kl, sizeof key - kl, "%s%s", i ? " -> " : "", ix->op[member[i]].name);
                time += gpu ? t->ktime[member[i]] : ix->op[member[i]].dur;
            }
            int k = out_input(oa);
            if (kl < sizeof key) snprintf(key + kl, sizeof key - kl, "|%lld|%d", (long long)oa->numel[k], oa->dtype[k]);
            tgroup *g = group(&gs, key, a, oa->ts);
            if (!g) goto oom;
            g->calls++, g->device_ns += time, g->bytes = bytes, g->has_bytes = has_bytes;
            a = t->next[member[n - 1]];
        }
    }
    for (size_t k = 0; k < gs.n; k++) {
        tgroup *g = &gs.g[k];
        wb_val *m = put_group(o, out, gs.keys.key[k], g);
        *strchr(fx_get(m, "name")->s, '|') = '\0'; /* the chain, without its shape key */
        put_chain(o, m, fx_get(m, "name")->s);
        fx_set_int(o, m, "input", out_input(&ix->op[g->first]) + 1);
        if (!put_inputs(ix, o, m, g->first)) return groups_free(&gs), 0;
    }
    groups_free(&gs);
    return 1;
oom:
    groups_free(&gs);
    o->oom = 1;
    return 1;
}

/* view, copy and gemm: per op name (and, for copies and GEMMs, input sizes and dtypes) */
enum { R_VIEW, R_COPY, R_GEMM };
static int by_name(fx_index *ix, const tree *t, fx_out *o, wb_val *out, int rule) {
    groups gs = {0};
    static char key[4096];
    int gpu = ix->ndev > 0;
    for (size_t i = 0; i < ix->nop; i++) {
        const fx_op *op = &ix->op[i];
        int kind = t->kind[i], copies = t->flags[i] & F_COPY_BELOW;
        if (rule == R_VIEW && !((kind & K_VIEW) && !op->nkernels && !copies)) continue;
        if (rule == R_GEMM && !((kind & K_GEMM) && !(t->flags[i] & F_GEMM_BELOW) && op->ninputs)) continue;
        if (rule == R_COPY) {
            /* the outermost op of a copy: aten::copy_, or an op that copies through one under it */
            int is_copy = (kind & (K_COPY | K_COPYWRAP)) && copies && (!gpu || op->nkernels);
            int32_t p = t->parent[i];
            if (!is_copy || (p >= 0 && (t->kind[p] & (K_COPY | K_COPYWRAP)) && (t->flags[p] & F_COPY_BELOW))) continue;
            size_t kl = (size_t)snprintf(key, sizeof key, "%s", op->name);
            for (int32_t c = t->first[i]; c >= 0 && kl < sizeof key;) {
                if ((t->kind[c] & (K_COPY | K_COPYWRAP)) && (t->flags[c] & F_COPY_BELOW)) {
                    kl += (size_t)snprintf(key + kl, sizeof key - kl, " -> %s", ix->op[c].name);
                    c = t->first[c];
                } else {
                    c = t->next[c];
                }
            }
        } else {
            snprintf(key, sizeof key, "%s", op->name);
        }
        if (rule != R_VIEW) {
            size_t kl = strlen(key);
            for (int k = 0; k < op->ninputs && k < WB_EVENT_MAX_INPUTS && kl < sizeof key; k++)
                kl += (size_t)snprintf(key + kl, sizeof key - kl, "|%lld:%d", (long long)op->numel[k], op->dtype[k]);
        }
        tgroup *g = group(&gs, key, (int32_t)i, op->ts);
        if (!g) goto oom;
        g->calls++, g->host_ns += op->dur, g->device_ns += t->ktime[i], g->kernels += op->nkernels;
        if (op->ts < g->ts) g->ts = op->ts;
        if (rule == R_COPY) {
            int size = op->ninputs && op->dtype[0] >= 0 ? dtype_size(op->dtype[0]) : 0;
            if (size) g->bytes += 2 * op->numel[0] * size; /* read once, written once */
            else g->has_bytes = 0;
        }
    }
    for (size_t k = 0; k < gs.n; k++) {
        wb_val *m = put_group(o, out, gs.keys.key[k], &gs.g[k]);
        char *bar = strchr(fx_get(m, "name")->s, '|');
        if (bar) *bar = '\0';
        if (rule == R_COPY) put_chain(o, m, fx_get(m, "name")->s);
        if (!put_inputs(ix, o, m, gs.g[k].first)) return groups_free(&gs), 0;
    }
    groups_free(&gs);
    return 1;
oom:
    groups_free(&gs);
    o->oom = 1;
    return 1;
}

/* launches: per launching op name (the op a kernel or launch call is linked to), its calls, launch
 * calls and their time, kernels and their time, and the kernels under small_ns among them;
 * unlinked kernels are grouped by their own name. And the totals over every kernel. */
static int launches(fx_index *ix, fx_out *o, wb_val *root, double small_ns) {
    groups gs = {0};
    int64_t kernels = 0, kernel_ns = 0, small = 0, small_ns_total = 0, ts = INT64_MAX;
    for (size_t d = 0; d < ix->ndev; d++) {
        const fx_dev *k = &ix->dev[d];
        if (k->kind_ev != WB_EV_KERNEL) continue;
        const fx_op *op = fx_op_of(ix, k->corr);
        const char *kname = k->kind ? wb_kernel_kind_name(k->kind) : "?";
        tgroup *g = group(&gs, op ? op->name : kname, op ? (int32_t)(op - ix->op) : -1, k->ts);
        if (!g) goto oom;
        int is_small = (double)k->dur < small_ns;
        g->kernels++, g->device_ns += k->dur, g->small += is_small, g->small_ns += is_small ? k->dur : 0;
        if (is_small && !g->kernel) g->kernel = kname;
        kernels++, kernel_ns += k->dur, small += is_small, small_ns_total += is_small ? k->dur : 0;
        if (k->ts < ts) ts = k->ts;
    }
    for (size_t r = 0; r < ix->nruntime; r++) {
        const fx_span *s = &ix->runtime[r];
        const fx_op *op = s->api == WB_API_LAUNCH ? fx_op_of(ix, s->link) : NULL;
        if (!op) continue;
        tgroup *g = group(&gs, op->name, (int32_t)(op - ix->op), s->ts);
        if (!g) goto oom;
        g->launches++, g->launch_ns += s->dur;
    }
    for (size_t i = 0; i < ix->nop && gs.n; i++) { /* calls of the names that launched */
        int fresh = 0;
        int64_t k = wb_keyindex_get(&gs.keys, ix->op[i].name, &fresh);
        if (k < 0) goto oom;
        if (fresh) { /* not a launching name: forget it again (the index keeps the key, unused) */
            if (!wb_grow((void **)&gs.g, &gs.cap, (size_t)k + 1, sizeof *gs.g)) goto oom;
            gs.g[k] = (tgroup){.first = -2};
            gs.n = (size_t)k + 1;
        }
        gs.g[k].calls++;
    }
    wb_val *m = fx_set_map(o, root, "kernel_sizes");
    fx_set_int(o, m, "kernels", kernels);
    fx_set_int(o, m, "time_ns", kernel_ns);
    fx_set_int(o, m, "small", small);
    fx_set_int(o, m, "small_ns", small_ns_total);
    fx_set_int(o, m, "ts", kernels ? ts : 0);
    wb_val *list = fx_set_list(o, root, "launches");
    for (size_t k = 0; k < gs.n; k++) {
        const tgroup *g = &gs.g[k];
        if (g->first == -2 || (!g->kernels && !g->launches)) continue;
        wb_val *v = put_group(o, list, gs.keys.key[k], g);
        fx_set_bool(o, v, "op", g->first >= 0);
        fx_set_int(o, v, "launches", g->launches);
        fx_set_int(o, v, "launch_ns", g->launch_ns);
        fx_set_int(o, v, "small", g->small);
        fx_set_int(o, v, "small_ns", g->small_ns);
        if (g->kernel) fx_set_str(o, v, "small_kernel", g->kernel);
    }
    groups_free(&gs);
    return 1;
oom:
    groups_free(&gs);
    o->oom = 1;
    return 1;
}

int fx_rules_torch(fx_index *ix, fx_out *o, wb_val *root, double small_kernel_ns);
int fx_rules_torch(fx_index *ix, fx_out *o, wb_val *root, double small_kernel_ns) {
    tree t;
    if (!tree_build(ix, &t)) return o->oom = 1, 1;
    wb_val *m = fx_set_map(o, root, "torch");
    int ok = by_name(ix, &t, o, fx_set_list(o, m, "view"), R_VIEW) &&
             by_name(ix, &t, o, fx_set_list(o, m, "copy"), R_COPY) &&
             by_name(ix, &t, o, fx_set_list(o, m, "gemm"), R_GEMM) && fusion(ix, &t, o, fx_set_list(o, m, "fusion")) &&
             launches(ix, o, m, small_kernel_ns);
    tree_free(&t);
    return ok;
}
