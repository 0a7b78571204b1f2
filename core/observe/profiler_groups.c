/* profiler_groups.c: wb.diff's model computed over the store (profiler_groups.h). Each step gets
 * a tree: an op under the op that called it, else under the innermost range holding it; a kernel
 * under the op that launched it. A node is a path of signatures (repeats of one signature under
 * one parent are one node, or, per occurrence, told apart by their rank in time order), and every
 * node collects one sample per occurrence. Memory is ~64 bytes per host event or kernel while it
 * runs, and the nodes and their samples after; no Lua table per event. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyindex.h"
#include <wb/profiler_groups.h>
#include "profiler_internal.h"

const char *const wb_diff_field_names[5] = {"op", "isa", "layout", "epilogue", "tile"};

static int is_host(int k) { return k == WB_EV_RANGE || k == WB_EV_OP || k == WB_EV_RUNTIME; }
static int is_device(int k) { return k == WB_EV_KERNEL || k == WB_EV_MEMCPY || k == WB_EV_MEMSET; }

/* One occurrence (a host event, a kernel, or a step's root). */
typedef struct inst {
    int64_t ts, dur, device_ns;
    uint64_t seq;     /* recording order */
    const void *what; /* the name, or a kernel's kind */
    uint32_t id, link, sig;
    int32_t parent, step, rank, node;
    uint32_t child0, nchild; /* its children in kids[child0 ..] */
    uint8_t kind;
} inst;

typedef struct step_rec {
    int64_t ts, dur;
    double wait;
    uint64_t seq;
} step_rec;

#define PUSH(arr, n, cap) wb_grow((void **)&(arr), &(cap), (n) + 1, sizeof *(arr))

static uint64_t mix(uint64_t h) {
    h ^= h >> 33, h *= 0xff51afd7ed558ccdull, h ^= h >> 33;
    return h;
}

/* ---- signatures: the alignment key of an occurrence without its rank, and its label ---------- */

typedef struct sigtab {
    wb_keyindex keys;
    char **label; /* label[id] */
    size_t nlabel, cap_label;
} sigtab;

static int64_t sig_intern(sigtab *t, const char *key, const char *label) {
    int fresh;
    int64_t id = wb_keyindex_get(&t->keys, key, &fresh);
    if (id < 0 || !fresh) return id;
    if (!wb_grow((void **)&t->label, &t->cap_label, t->nlabel + 1, sizeof *t->label)) return -1;
    if (!(t->label[t->nlabel] = strdup(label))) return -1;
    t->nlabel++;
    return id;
}

static void sig_free(sigtab *t) {
    for (size_t i = 0; i < t->nlabel; i++)
        free(t->label[i]);
    free(t->label);
    wb_keyindex_free(&t->keys);
}

typedef struct buf {
    char s[4096];
    size_t n;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (b->n < sizeof b->s) {
        int w = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
        if (w > 0) b->n = b->n + (size_t)w < sizeof b->s ? b->n + (size_t)w : sizeof b->s - 1;
    }
    va_end(ap);
}

/* A kernel kind's fields as an event's args carry them (op, isa, layout, epilogue, tile). */
static void kernel_fields(const wb_kernel_kind *k, const char *out[5], wb_kernel_fields *f, char *epi, size_t len) {
    memset(out, 0, 5 * sizeof *out);
    out[0] = k->op;
    if (!k->op && !k->isa) return; /* another tool's kernel (torch's): known by its whole name */
    if (wb_kernel_kind_fields(k, f)) {
        out[1] = f->isa, out[2] = f->layout, out[3] = f->epilogue, out[4] = f->tile;
    } else {
        out[3] = wb_kernel_kind_epilogue(k, epi, len);
    }
}

/* wb.diff's signature(): "range NAME", "op NAME(4x8, -)[f32,-]", "runtime NAME", a kernel's kind
 * "kernel op=sgemm,isa=avx2,layout=tn,epilogue=none", a copy's "memcpy NAME". */
static int64_t signature(sigtab *t, const wb_prof *p, const wb_event *e) {
    buf key = {.n = 0}, label = {.n = 0};
    const char *name = wb_event_name(e);
    if (e->kind == WB_EV_OP) {
        buf s = {.n = 0}, d = {.n = 0};
        for (int k = 0; k < e->ninputs; k++) {
            int nd = wb_event_ndim(e, k);
            if (k) put(&s, ", "), put(&d, ",");
            if (nd < 0) {
                put(&s, "-"), put(&d, "-");
                continue;
            }
            const int64_t *dims = wb_prof_shape(p, e, k);
            for (int i = 0; i < nd; i++)
                put(&s, "%s%lld", i ? "x" : "", (long long)dims[i]);
            if (nd == 0) put(&s, "scalar");
            put(&d, "%s", wb_dtype_name((wb_dtype)wb_event_dtype(e, k)));
        }
        put(&key, "op %s(%s)[%s]", name, s.s, d.s);
        if (s.n)
            put(&label, "%s (%s)", name, s.s);
        else
            put(&label, "%s", name);
    } else if (e->kind == WB_EV_KERNEL) {
        const char *f[5];
        wb_kernel_fields kf;
        char epi[WB_EPILOGUE_MAX];
        kernel_fields(e->kernel, f, &kf, epi, sizeof epi);
        put(&key, "kernel ");
        int parts = 0;
        for (int i = 0; i < 4; i++) /* the kind's fields (wb.diff's KIND_FIELDS; dtype is not carried) */
            if (f[i]) put(&key, "%s%s=%s", parts++ ? "," : "", wb_diff_field_names[i], f[i]);
        if (!parts) put(&key, "%s", name);
        put(&label, "%s", name);
    } else {
        put(&key, "%s %s", wb_event_kind_name(e->kind), name);
        put(&label, "%s", name);
    }
    return sig_intern(t, key.s, label.s);
}

/* ---- nodes by (parent node, signature, rank) -------------------------------------------------- */

typedef struct nodetab {
    struct nslot {
        int32_t parent, node;
        uint32_t sig, rank;
    } *slot;
    size_t nslots, n;
} nodetab;

static int32_t *node_find(nodetab *t, int32_t parent, uint32_t sig, uint32_t rank, int *found) {
    size_t j = mix(((uint64_t)(uint32_t)parent << 32) ^ ((uint64_t)sig << 12) ^ rank) & (t->nslots - 1);
    for (; t->slot[j].node >= 0; j = (j + 1) & (t->nslots - 1))
        if (t->slot[j].parent == parent && t->slot[j].sig == sig && t->slot[j].rank == rank) {
            *found = 1;
            return &t->slot[j].node;
        }
    *found = 0;
    t->slot[j].parent = parent, t->slot[j].sig = sig, t->slot[j].rank = rank;
    return &t->slot[j].node;
}

static int node_rehash(nodetab *t) {
    size_t ns = t->nslots ? t->nslots * 2 : 1024;
    struct nslot *s = malloc(ns * sizeof *s), *old = t->slot;
    if (!s) return 0;
    for (size_t j = 0; j < ns; j++)
        s[j].node = -1;
    size_t nold = t->nslots;
    t->slot = s, t->nslots = ns;
    for (size_t j = 0; j < nold; j++)
        if (old[j].node >= 0) {
            int found;
            *node_find(t, old[j].parent, old[j].sig, old[j].rank, &found) = old[j].node;
        }
    free(old);
    return 1;
}

/* ---- ids of ops and runtime calls -> their occurrence (the last recorded wins) -------------- */

typedef struct idmap {
    uint32_t *key;
    int32_t *val;
    size_t nslots;
} idmap;

static int32_t idmap_get(const idmap *m, uint32_t id) {
    for (size_t j = mix(id) & (m->nslots - 1); m->val[j] >= 0; j = (j + 1) & (m->nslots - 1))
        if (m->key[j] == id) return m->val[j];
    return -1;
}

/* ---- the model --------------------------------------------------------------------------------- */

static int inst_cmp(const void *a, const void *b) {
    const inst *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->dur != y->dur) return x->dur > y->dur ? -1 : 1; /* the enclosing one first */
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int step_cmp(const void *a, const void *b) {
    const step_rec *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->dur != y->dur) return x->dur > y->dur ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int kid_cmp(const void *a, const void *b, void *ctx) {
    const inst *in = ctx;
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    const inst *x = &in[i], *y = &in[j];
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->dur != y->dur) return x->dur > y->dur ? -1 : 1;
    return (i > j) - (i < j); /* host occurrences before kernels, each in time order: as inserted */
}

/* wb.diff's innermost_range: the shortest range of step k (rng[lo..hi), sorted by start) holding
 * [ts, ts + dur], other than self, and longer (or as long and earlier, or with a smaller id); of
 * equally short ones the earliest in that order. Scanned backwards from the last range starting
 * by ts: a range starting at r.ts holds the event only if it lasts at least ts + dur - r.ts, which
 * only grows going back, so the scan stops once that passes the best found (a chain of ranges
 * nested 100,000 deep costs a step or two per event, not the whole chain). */
static int32_t innermost(const inst *in, const int32_t *rng, size_t lo, size_t hi, int32_t self, int64_t ts,
                         int64_t dur, uint32_t id, int32_t root) {
    size_t a = lo, b = hi; /* the first range starting after ts */
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (in[rng[mid]].ts <= ts) a = mid + 1;
        else b = mid;
    }
    int32_t best = -1;
    for (size_t j = a; j-- > lo;) {
        const inst *r = &in[rng[j]];
        if (best >= 0 && (ts - r->ts) + dur > in[best].dur) break;
        if (rng[j] == self || ts + dur > r->ts + r->dur) continue;
        if (!(r->dur > dur || (r->dur == dur && r->ts < ts) || (r->dur == dur && r->ts == ts && r->id < id))) continue;
        if (best < 0 || r->dur <= in[best].dur) best = rng[j];
    }
    return best >= 0 ? best : root;
}

static const char *inst_name(const inst *x) {
    return x->kind == WB_EV_KERNEL ? wb_kernel_kind_name(x->what) : (const char *)x->what;
}

#define APPEND(arr, n, cap, v)                                                                                         \
    do {                                                                                                               \
        if (!wb_grow((void **)&(arr), &(cap), (n) + 1, sizeof *(arr))) goto oom;                                          \
        (arr)[(n)++] = (v);                                                                                            \
    } while (0)

/* A new node for occurrence x under parent node `pn` (-1: under a step). */
static int node_new(wb_diff_model *m, size_t *cap, const sigtab *t, const inst *x, int32_t pn, int depth) {
    if (!wb_grow((void **)&m->node, cap, m->n + 1, sizeof *m->node)) return 0;
    wb_diff_node *d = &m->node[m->n];
    memset(d, 0, sizeof *d);
    const char *parent_path = pn >= 0 ? m->node[pn].path : "", *key = t->keys.key[x->sig];
    const char *label = is_device(x->kind) ? inst_name(x) : t->label[x->sig];
    size_t np = strlen(parent_path) + strlen(key) + 16, nl = strlen(label) + 16;
    d->path = malloc(np), d->label = malloc(nl);
    if (!d->path || !d->label) return free(d->path), free(d->label), 0;
    if (x->rank) /* per occurrence */
        snprintf(d->path, np, "%s/%s#%u", parent_path, key, (unsigned)x->rank);
    else
        snprintf(d->path, np, "%s/%s", parent_path, key);
    if (x->rank > 1)
        snprintf(d->label, nl, "%s #%u", label, (unsigned)x->rank);
    else
        snprintf(d->label, nl, "%s", label);
    d->parent = pn, d->name = inst_name(x), d->kind = x->kind, d->depth = depth;
    m->n++;
    if (is_device(x->kind)) {
        if (!(d->kind_key = strdup(key))) return 0;
        if (x->kind == WB_EV_KERNEL) {
            const char *f[5];
            wb_kernel_fields kf;
            char epi[WB_EPILOGUE_MAX];
            kernel_fields(x->what, f, &kf, epi, sizeof epi);
            for (int i = 0; i < 5; i++)
                if (f[i] && !(d->fields[i] = strdup(f[i]))) return 0;
        }
    }
    return 1;
}

/* The step whose host time is the median of the steps' (the lower median; the earliest of
 * equal ones): the step an HTML timeline draws unless told which. */
static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}
static int median_step(const step_rec *steps, size_t ns, size_t *out) {
    int64_t *d = malloc(ns * sizeof *d);
    if (!d) return 0;
    for (size_t k = 0; k < ns; k++)
        d[k] = steps[k].dur;
    qsort(d, ns, sizeof *d, cmp_i64);
    int64_t median = d[(ns - 1) / 2];
    free(d);
    for (*out = 0; steps[*out].dur != median; ++*out) {}
    return 1;
}

wb_status wb_prof_diff_model(const wb_prof *p, const wb_diff_model_opts *opts, wb_diff_model *m) {
    memset(m, 0, sizeof *m);
    const wb_diff_model_opts defaults = {.draw = WB_DIFF_DRAW_MEDIAN};
    if (!opts) opts = &defaults;
    int64_t draw = opts->draw;
    inst *host = NULL, *dev = NULL, *in = NULL;
    step_rec *steps = NULL;
    size_t nh = 0, nd = 0, ns = 0, cap_h = 0, cap_d = 0, cap_s = 0, cap_nodes = 0;
    sigtab sigs = {0};
    nodetab nodes = {0};
    idmap ids = {0};
    int32_t *rng = NULL, *kids = NULL, *stack = NULL, *rank_gen = NULL;
    uint32_t *rank_cnt = NULL;
    int32_t *first = NULL; /* each node's first occurrence */
    size_t *rlo = NULL, *rhi = NULL, nfirst = 0, cap_first = 0, cap_tree = 0;
    wb_status st = WB_OK;
    wb_prof_cursor c;
    uint64_t seq = 0;
    size_t path_bytes = 0;
    /* 1: host events, kernels and steps, with their signatures */
    wb_prof_cursor_open(&c, p);
    for (const wb_event *e; (e = wb_prof_cursor_next(&c)); seq++) {
        if (e->kind == WB_EV_STEP) {
            step_rec s = {.ts = e->ts_ns, .dur = e->dur_ns, .wait = e->run_delay_ns >= 0 ? e->run_delay_ns : 0,
                          .seq = seq};
            APPEND(steps, ns, cap_s, s);
            continue;
        }
        if (!is_host(e->kind) && !is_device(e->kind)) continue;
        int64_t sig = signature(&sigs, p, e);
        if (sig < 0) goto oom;
        inst x = {.ts = e->ts_ns, .dur = e->dur_ns, .seq = seq, .id = e->id, .link = e->link, .sig = (uint32_t)sig,
                  .parent = -1, .step = -1, .kind = e->kind,
                  .what = e->kind == WB_EV_KERNEL ? (const void *)e->kernel : (const void *)e->name};
        if (is_host(e->kind))
            APPEND(host, nh, cap_h, x);
        else
            APPEND(dev, nd, cap_d, x);
    }
    wb_prof_cursor_close(&c);
    if ((st = c.status) != WB_OK) goto done;
    if (nh + nd == 0) {
        st = wb_error(WB_ERR_ARGUMENT, "holds no ranges, ops or kernels (an empty profile)");
        goto done;
    }
    if (nh + nd + ns + 1 > (size_t)INT32_MAX) {
        st = wb_error(WB_ERR_MEMORY, "diff: %zu events are more than one model holds", nh + nd);
        goto done;
    }
    wb_sort(host, nh, sizeof *host, inst_cmp);
    wb_sort(dev, nd, sizeof *dev, inst_cmp);
    wb_sort(steps, ns, sizeof *steps, step_cmp);
    /* the step p:step() opens after the last one of a loop holds nothing: not a sample */
    while (ns > 1) {
        const step_rec *s = &steps[ns - 1];
        size_t lo = 0, hi = nh;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (host[mid].ts < s->ts) lo = mid + 1;
            else hi = mid;
        }
        if (lo < nh && host[lo].ts < s->ts + s->dur) break;
        ns--;
    }
    if (ns == 0) { /* the whole trace is one step */
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        const inst *from = nh ? host : dev;
        for (size_t i = 0, n = nh ? nh : nd; i < n; i++) {
            if (from[i].ts < lo) lo = from[i].ts;
            if (from[i].ts + from[i].dur > hi) hi = from[i].ts + from[i].dur;
        }
        step_rec s = {.ts = lo, .dur = hi - lo};
        APPEND(steps, ns, cap_s, s);
        m->synthetic_step = 1;
    }
    if (draw >= 0) m->drawn_step = (size_t)draw < ns ? (size_t)draw : ns - 1;
    else if (draw == WB_DIFF_DRAW_MEDIAN && !median_step(steps, ns, &m->drawn_step)) goto oom;
    /* 2: one array: host occurrences, kernels, then one root per step */
    size_t n = nh + nd + ns;
    if (!(in = malloc(n * sizeof *in))) goto oom;
    if (nh) memcpy(in, host, nh * sizeof *in);
    if (nd) memcpy(in + nh, dev, nd * sizeof *in);
    free(host), free(dev), host = dev = NULL;
    for (size_t k = 0; k < ns; k++)
        in[nh + nd + k] = (inst){.ts = steps[k].ts, .dur = steps[k].dur, .parent = -1, .step = (int32_t)k, .kind = 255};
#define ROOT(k) ((int32_t)(nh + nd + (size_t)(k)))
    /* the step holding ts: the last starting at or before it, if it has not ended */
#define STEP_OF(t, out)                                                                                                \
    do {                                                                                                               \
        size_t lo_ = 0, hi_ = ns;                                                                                      \
        while (lo_ < hi_) {                                                                                            \
            size_t mid_ = (lo_ + hi_) / 2;                                                                             \
            if (steps[mid_].ts <= (t)) lo_ = mid_ + 1;                                                                 \
            else hi_ = mid_;                                                                                           \
        }                                                                                                              \
        (out) = lo_ > 0 && (t) <= steps[lo_ - 1].ts + steps[lo_ - 1].dur ? (int32_t)lo_ - 1 : -1;                     \
    } while (0)
    rlo = calloc(ns, sizeof *rlo), rhi = calloc(ns, sizeof *rhi);
    if (!rlo || !rhi || !(rng = malloc((nh ? nh : 1) * sizeof *rng))) goto oom;
    size_t nr = 0;
    for (size_t i = 0; i < nh; i++) { /* host occurrences are in time order: steps come in order */
        STEP_OF(in[i].ts, in[i].step);
        if (in[i].step >= 0 && in[i].kind == WB_EV_RANGE) {
            if (rhi[in[i].step] == 0) rlo[in[i].step] = nr;
            rng[nr++] = (int32_t)i;
            rhi[in[i].step] = nr;
        }
    }
    ids.nslots = 1024;
    while (ids.nslots < 2 * nh)
        ids.nslots *= 2;
    ids.key = malloc(ids.nslots * sizeof *ids.key), ids.val = malloc(ids.nslots * sizeof *ids.val);
    if (!ids.key || !ids.val) goto oom;
    for (size_t j = 0; j < ids.nslots; j++)
        ids.val[j] = -1;
    for (size_t i = 0; i < nh; i++) {
        if (in[i].kind == WB_EV_RANGE) continue;
        size_t j = mix(in[i].id) & (ids.nslots - 1);
        while (ids.val[j] >= 0 && ids.key[j] != in[i].id)
            j = (j + 1) & (ids.nslots - 1);
        if (ids.val[j] < 0 || in[ids.val[j]].seq < in[i].seq) ids.key[j] = in[i].id, ids.val[j] = (int32_t)i;
    }
    /* 3: parents: the calling op, else the innermost range, else the step */
    for (size_t i = 0; i < nh; i++) {
        inst *x = &in[i];
        if (x->step < 0) continue;
        int32_t pi = -1;
        if (x->kind != WB_EV_RANGE && x->link) {
            pi = idmap_get(&ids, x->link);
            if (pi >= 0 && in[pi].step < 0) pi = -1;
        }
        if (pi < 0 || pi == (int32_t)i)
            pi = innermost(in, rng, rlo[x->step], rhi[x->step], (int32_t)i, x->ts, x->dur, x->id, ROOT(x->step));
        x->parent = pi;
    }
    for (size_t i = nh; i < nh + nd; i++) { /* a kernel: under its launching op, else by its time */
        inst *x = &in[i];
        int32_t pi = idmap_get(&ids, x->link);
        if (pi >= 0 && in[pi].step < 0) pi = -1;
        if (pi < 0) {
            int32_t k;
            STEP_OF(x->ts, k);
            if (k >= 0) pi = innermost(in, rng, rlo[k], rhi[k], -1, x->ts, x->dur, x->id, ROOT(k));
        }
        if (pi < 0) continue;
        x->parent = pi, x->step = in[pi].step, x->device_ns = x->dur;
        for (size_t guard = 0; pi >= 0 && guard < n; guard++, pi = in[pi].parent)
            in[pi].device_ns += x->dur;
    }
    /* 4: children lists (as inserted, then in time order) and their ranks per signature */
    if (!(kids = malloc(n * sizeof *kids))) goto oom;
    for (size_t i = 0; i < nh + nd; i++)
        if (in[i].parent >= 0) in[in[i].parent].nchild++;
    uint32_t at = 0;
    for (size_t i = 0; i < n; i++)
        in[i].child0 = at, at += in[i].nchild, in[i].nchild = 0;
    for (size_t i = 0; i < nh + nd; i++)
        if (in[i].parent >= 0) {
            inst *q = &in[in[i].parent];
            kids[q->child0 + q->nchild++] = (int32_t)i;
        }
    rank_gen = malloc((sigs.keys.n ? sigs.keys.n : 1) * sizeof *rank_gen);
    rank_cnt = malloc((sigs.keys.n ? sigs.keys.n : 1) * sizeof *rank_cnt);
    if (!rank_gen || !rank_cnt) goto oom;
    for (size_t s = 0; s < sigs.keys.n; s++)
        rank_gen[s] = -1;
    for (size_t i = 0; i < n; i++) {
        if (in[i].nchild > 1) qsort_r(kids + in[i].child0, in[i].nchild, sizeof *kids, kid_cmp, in);
        for (uint32_t j = 0; j < in[i].nchild; j++) {
            inst *ch = &in[kids[in[i].child0 + j]];
            if (rank_gen[ch->sig] != (int32_t)i) rank_gen[ch->sig] = (int32_t)i, rank_cnt[ch->sig] = 0;
            ++rank_cnt[ch->sig];
            ch->rank = opts->per_occurrence ? (int32_t)rank_cnt[ch->sig] : 0;
        }
    }
    /* 5: depth first from each step's root: nodes in the order first met, a sample per occurrence */
    if (!node_rehash(&nodes) || !(stack = malloc((n + 1) * sizeof *stack))) goto oom;
    for (size_t k = 0; k < ns; k++) {
        size_t sp = 0;
        int keep = draw == WB_DIFF_DRAW_ALL || ((draw >= 0 || draw == WB_DIFF_DRAW_MEDIAN) && k == m->drawn_step);
        in[ROOT(k)].node = -1;
        stack[sp++] = ROOT(k);
        while (sp) {
            int32_t i = stack[--sp];
            inst *x = &in[i];
            int depth = 0;
            if (x->kind != 255) { /* not the root: its node, and its samples */
                const inst *q = &in[x->parent];
                int32_t pn = q->kind == 255 ? -1 : q->node;
                depth = pn >= 0 ? m->node[pn].depth + 1 : 1;
                if (2 * (nodes.n + 1) > nodes.nslots && !node_rehash(&nodes)) goto oom;
                int found;
                int32_t *slot = node_find(&nodes, pn, x->sig, (uint32_t)x->rank, &found);
                if (!found) {
                    /* a node's path is its parent's and a segment: bounded in depth and in all, so
                     * a hostile nesting (a 100,000-deep chain of ops) is refused, not quadratic */
                    if (depth > WB_DIFF_MAX_DEPTH) {
                        st = wb_error(WB_ERR_ARGUMENT, "diff: ranges and ops nest more than %d deep (step %zu): no "
                                      "program's profile does; the trace is refused", WB_DIFF_MAX_DEPTH, k + 1);
                        goto done;
                    }
                    size_t seg = strlen(sigs.keys.key[x->sig]) + 16;
                    path_bytes += (pn >= 0 ? strlen(m->node[pn].path) : 0) + seg;
                    if (path_bytes > WB_DIFF_MAX_PATH_BYTES) {
                        st = wb_error(WB_ERR_ARGUMENT, "diff: the nodes' paths (each its parents' names and its own) "
                                      "pass %d MiB at node %zu: nesting this deep and wide is refused",
                                      WB_DIFF_MAX_PATH_BYTES >> 20, m->n + 1);
                        goto done;
                    }
                    *slot = (int32_t)m->n, nodes.n++;
                    if (!node_new(m, &cap_nodes, &sigs, x, pn, depth)) goto oom;
                    APPEND(first, nfirst, cap_first, i);
                }
                x->node = *slot;
                wb_diff_node *d = &m->node[x->node];
                if (is_host(x->kind)) APPEND(d->host, d->nhost, d->cap_host, x->dur);
                APPEND(d->device, d->ndevice, d->cap_device, x->device_ns);
                if (d->nsteps && d->step_no[d->nsteps - 1] == x->step) {
                    d->step_count[d->nsteps - 1]++;
                } else {
                    size_t cap = d->cap_steps;
                    if (!wb_grow((void **)&d->step_no, &cap, d->nsteps + 1, sizeof *d->step_no) ||
                        !wb_grow((void **)&d->step_count, &d->cap_steps, d->nsteps + 1, sizeof *d->step_count))
                        goto oom;
                    d->step_no[d->nsteps] = x->step, d->step_count[d->nsteps++] = 1;
                }
                if (keep) {
                    wb_diff_instance di = {.node = x->node, .depth = depth - 1, .step = (int32_t)k, .ts_ns = x->ts,
                                           .dur_ns = x->dur, .kind = x->kind};
                    APPEND(m->step_tree, m->ntree, cap_tree, di);
                }
            }
            for (uint32_t j = x->nchild; j-- > 0;) /* pushed last first: visited in time order */
                stack[sp++] = kids[x->child0 + j];
        }
    }
    /* 6: the kernels under each node's first occurrence, in time order */
    {
        for (size_t d = 0; d < m->n; d++) {
            wb_diff_node *nd_ = &m->node[d];
            size_t cap = 0;
            int32_t f = first[d];
            if (is_device(nd_->kind)) {
                APPEND(nd_->kernels, nd_->nkernels, cap, nd_->name);
                continue;
            }
            size_t sp = 0;
            for (uint32_t j = in[f].nchild; j-- > 0;)
                stack[sp++] = kids[in[f].child0 + j];
            while (sp) {
                int32_t i = stack[--sp];
                if (is_device(in[i].kind)) APPEND(nd_->kernels, nd_->nkernels, cap, inst_name(&in[i]));
                for (uint32_t j = in[i].nchild; j-- > 0;)
                    stack[sp++] = kids[in[i].child0 + j];
            }
        }
    }
    m->nsteps = ns;
    m->step_host_ns = malloc(ns * sizeof(int64_t)), m->step_device_ns = malloc(ns * sizeof(int64_t));
    m->step_ts_ns = malloc(ns * sizeof(int64_t)), m->step_wait_ns = malloc(ns * sizeof(double));
    if (!m->step_host_ns || !m->step_device_ns || !m->step_ts_ns || !m->step_wait_ns) goto oom;
    for (size_t k = 0; k < ns; k++) {
        m->step_host_ns[k] = steps[k].dur, m->step_ts_ns[k] = steps[k].ts;
        m->step_device_ns[k] = in[ROOT(k)].device_ns;
        m->step_wait_ns[k] = steps[k].wait;
    }
    st = wb_diff_model_threads(p, m);
    goto done;
oom:
    st = wb_error(WB_ERR_MEMORY, "diff: out of memory building the model of %zu events", nh + nd);
done:
    if (st != WB_OK) wb_diff_model_free(m);
    free(host), free(dev), free(in), free(steps), free(rng), free(kids), free(stack), free(rank_gen), free(rank_cnt);
    free(rlo), free(rhi), free(first), free(nodes.slot), free(ids.key), free(ids.val);
    sig_free(&sigs);
    return st;
}

void wb_diff_model_free(wb_diff_model *m) {
    for (size_t i = 0; m->node && i < m->n; i++) {
        wb_diff_node *d = &m->node[i];
        free(d->path), free(d->label), free(d->kind_key), free(d->host), free(d->device);
        free(d->step_no), free(d->step_count), free(d->kernels);
        for (int f = 0; f < 5; f++)
            free(d->fields[f]);
    }
    free(m->node), free(m->step_host_ns), free(m->step_device_ns), free(m->step_ts_ns), free(m->step_wait_ns);
    free(m->step_threads_max), free(m->step_threads_mean), free(m->step_tree);
    memset(m, 0, sizeof *m);
}
