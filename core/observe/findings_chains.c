/* findings_chains.c: the findings' fusion rule over the C index (findings_index.h): chains of
 * pointwise kernels on one lane whose intermediate storage only the next one's op reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyindex.h"
#include "findings_index.h"

static wb_val *new_map(fx_out *o, wb_val *list) {
    wb_val *m = fx_add(o, list, NULL);
    m->type = WB_VAL_MAP;
    return m;
}

/* A group by name among few (windows, chains): a linear search. */
static int64_t find_name(char **names, size_t n, const char *s) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return (int64_t)i;
    return -1;
}

/* ---- fusion -------------------------------------------------------------------------------------- */

typedef struct reader {
    int64_t sid;
    int32_t op;
} reader;

static int reader_cmp(const void *a, const void *b) {
    const reader *x = a, *y = b;
    if (x->sid != y->sid) return x->sid < y->sid ? -1 : 1;
    return (x->op > y->op) - (x->op < y->op);
}

/* other is op or encloses it (64 levels) */
static int above(fx_index *ix, const fx_op *op, const fx_op *other) {
    for (int depth = 0; op && depth < 64; depth++) {
        if (op == other) return 1;
        op = op->parent ? fx_op_of(ix, op->parent) : NULL;
    }
    return 0;
}

/* The input slot (1-based) of o2 that reads o1's output when no other op reads it after o1. */
static int only_reader(fx_index *ix, const reader *rd, size_t nrd, const fx_op *o1, const fx_op *o2) {
    int64_t sid = o1->flow[o1->nflow - 1];
    if (sid == 0) return 0;
    size_t lo = 0, hi = nrd;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rd[mid].sid < sid) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = lo; i < nrd && rd[i].sid == sid; i++) {
        const fx_op *r = &ix->op[rd[i].op];
        if (r->ts > o1->ts && !above(ix, o2, r) && !above(ix, r, o2)) return 0;
    }
    for (int i = 0; i + 1 < o2->nflow; i++)
        if (o2->flow[i] == sid) return i + 1;
    return 0;
}

typedef struct chain {
    int64_t count, bytes, time_ns, ts;
    int has_bytes;
    const fx_op *first_op; /* the first link's reader, and its slot: the intermediate's shape */
    int slot;
    char *kinds;
    uint32_t kernels[8];
    int nkernels;
} chain;

int fx_rule_fusion(fx_index *ix, fx_out *o, wb_val *out);
int fx_rule_fusion(fx_index *ix, fx_out *o, wb_val *out) {
    reader *rd = NULL;
    size_t nrd = 0, cap = 0;
    char **names = NULL;
    chain *g = NULL;
    size_t n = 0, gcap = 0;
    for (size_t i = 0; i < ix->nop; i++) {
        const fx_op *e = &ix->op[i];
        if (!e->nflow || !e->nkernels) continue;
        for (int k = 0; k + 1 < e->nflow; k++) {
            if (!e->flow[k]) continue;
            if (nrd == cap) {
                cap = cap ? 2 * cap : 256;
                reader *q = realloc(rd, cap * sizeof *q);
                if (!q) goto oom;
                rd = q;
            }
            rd[nrd++] = (reader){.sid = e->flow[k], .op = (int32_t)i};
        }
    }
    wb_sort(rd, nrd, sizeof *rd, reader_cmp);
    static char key[8192], kinds[8192];
    for (int L = 0; L < ix->nlanes; L++) {
        const int32_t *ks = ix->lane_dev + ix->lane_start[L];
        size_t nk = ix->lane_start[L + 1] - ix->lane_start[L];
        size_t i = 0;
        while (i + 1 < nk) {
            size_t j = i;
            int has_key = 0, has_bytes = 1, slot0 = 0;
            const fx_op *op0 = NULL;
            int64_t bytes = 0, time = ix->dev[ks[i]].dur;
            while (j + 1 < nk) {
                const fx_dev *a = &ix->dev[ks[j]], *b = &ix->dev[ks[j + 1]];
                if (a->kind_ev != WB_EV_KERNEL || a->has_fields || b->kind_ev != WB_EV_KERNEL || b->has_fields) break;
                fx_op *o1 = fx_op_of(ix, a->corr), *o2 = fx_op_of(ix, b->corr);
                if (o1 && !o1->nflow) o1 = NULL;
                if (o2 && !o2->nflow) o2 = NULL;
                int slot = o1 && o2 && o1 != o2 ? only_reader(ix, rd, nrd, o1, o2) : 0;
                if (!slot) break;
                /* the intermediate: o2's input `slot` (a list when recorded, false when absent) */
                int is_list = o2->ninputs >= slot && o2->dtype[slot - 1] >= 0;
                if (is_list && has_bytes) {
                    const char *dt = wb_dtype_name((wb_dtype)o2->dtype[slot - 1]);
                    bytes += 2 * o2->numel[slot - 1] * (dt && !strcmp(dt, "bf16") ? 2 : 4);
                } else {
                    has_bytes = 0;
                }
                if (!has_key) {
                    snprintf(key, sizeof key, "%s", o1->name);
                    snprintf(kinds, sizeof kinds, "%s", a->kind->op ? a->kind->op : "?");
                    op0 = o2, slot0 = slot, has_key = 1;
                }
                size_t kl = strlen(key), nl = strlen(kinds);
                snprintf(key + kl, sizeof key - kl, " -> %s", o2->name);
                snprintf(kinds + nl, sizeof kinds - nl, "_%s", b->kind->op ? b->kind->op : "?");
                time += b->dur;
                j++;
            }
            if (!has_key) {
                i++;
                continue;
            }
            int64_t x = find_name(names, n, key);
            if (x < 0) {
                if (n == gcap) {
                    gcap = gcap ? 2 * gcap : 16;
                    chain *q = realloc(g, gcap * sizeof *q);
                    char **nq = realloc(names, gcap * sizeof *nq);
                    if (q) g = q;
                    if (nq) names = nq;
                    if (!q || !nq) goto oom;
                }
                x = (int64_t)n;
                g[x] = (chain){.bytes = bytes, .has_bytes = has_bytes, .first_op = op0, .slot = slot0,
                               .ts = ix->dev[ks[i]].ts, .kinds = strdup(kinds)};
                names[x] = strdup(key);
                n++;
                if (!g[x].kinds || !names[x]) goto oom;
            }
            g[x].count++, g[x].time_ns += time;
            if (g[x].nkernels < 8) g[x].kernels[g[x].nkernels++] = ix->dev[ks[i]].id;
            i = j + 1;
        }
    }
    for (size_t x = 0; x < n; x++) {
        wb_val *m = new_map(o, out);
        fx_set_str(o, m, "chain", names[x]);
        fx_set_str(o, m, "kinds", g[x].kinds);
        fx_set_int(o, m, "count", g[x].count);
        if (g[x].has_bytes) fx_set_int(o, m, "bytes", g[x].bytes);
        fx_set_int(o, m, "time_ns", g[x].time_ns);
        fx_set_int(o, m, "ts", g[x].ts);
        wb_val *kl = fx_set_list(o, m, "kernels");
        for (int k = 0; k < g[x].nkernels; k++)
            fx_push_int(o, kl, g[x].kernels[k]);
        /* the first intermediate's shape and dtype (read again from its reader's event) */
        const fx_op *r = g[x].first_op;
        wb_val *first = fx_set_map(o, m, "first");
        if (r->ninputs >= g[x].slot) {
            int s = g[x].slot - 1;
            if (r->dtype[s] < 0) {
                fx_set_bool(o, first, "shape", 0), fx_set_bool(o, first, "dtype", 0);
            } else {
                wb_prof_cursor c;
                const wb_event *e = fx_event_at(ix, r->index, &c);
                if (e) {
                    wb_val *l = fx_set_list(o, first, "shape");
                    const int64_t *dims = wb_prof_shape(ix->p, e, s);
                    for (int d = 0; d < wb_event_ndim(e, s); d++)
                        fx_push_int(o, l, dims[d]);
                }
                wb_prof_cursor_close(&c);
                fx_set_str(o, first, "dtype", wb_dtype_name((wb_dtype)r->dtype[s]));
            }
        }
    }
    for (size_t x = 0; x < n; x++)
        free(names[x]), free(g[x].kinds);
    free(rd), free(names), free(g);
    return 1;
oom:
    for (size_t x = 0; x < n; x++)
        free(names[x]), free(g[x].kinds);
    free(rd), free(names), free(g);
    o->oom = 1;
    return 1;
}
