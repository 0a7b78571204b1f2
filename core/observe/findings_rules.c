/* findings_rules.c: wb.findings' rules over the index (findings_index.h): per rule the groups
 * its sentences are made from, in the order they are written (scripts/wb/findings.lua and
 * findings_time.lua write the sentences, from these groups: the analysis is here, once). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings_index.h"
#include "keyindex.h"

static const char *dev_name(const fx_dev *k) { return k->kind ? wb_kernel_kind_name(k->kind) : k->name; }

/* ---- groups by a string key, in the order first met ----------------------------------------- */

typedef struct gkeys {
    wb_keyindex ix;
    const void *last_ptr; /* the last key looked up by pointer, and its group */
    int64_t last;
} gkeys;

/* The group of key (*fresh = 1 when new), or -1 when out of memory. */
static int64_t group_of(gkeys *g, const char *key, int *fresh) {
    *fresh = 0;
    if (key == g->last_ptr && g->last >= 0) return g->last;
    int64_t id = wb_keyindex_get(&g->ix, key, fresh);
    /* a key seen before is remembered by its pointer; a new one may be a buffer that changes */
    g->last_ptr = id >= 0 && !*fresh ? key : NULL, g->last = id >= 0 && !*fresh ? id : -1;
    return id;
}

static void gkeys_free(gkeys *g) {
    wb_keyindex_free(&g->ix);
    g->last_ptr = NULL, g->last = -1;
}

#define GROUPS(type, arr, n, cap, idx)                                                                                 \
    do {                                                                                                               \
        if ((size_t)(idx) >= (cap)) {                                                                                  \
            size_t c2_ = (cap) ? 2 * (cap) : 16;                                                                       \
            void *q_ = realloc((arr), c2_ * sizeof(type));                                                             \
            if (!q_) goto oom;                                                                                         \
            (arr) = q_, (cap) = c2_;                                                                                   \
        }                                                                                                              \
        if ((size_t)(idx) >= (n)) memset(&(arr)[idx], 0, sizeof(type)), (n) = (size_t)(idx) + 1;                       \
    } while (0)

/* dims as a list; an absent input as false */
static void set_dims(fx_out *o, wb_val *m, const char *key, const int64_t *dims, int nd) {
    if (nd < 0) {
        fx_set_bool(o, m, key, 0);
        return;
    }
    wb_val *l = fx_set_list(o, m, key);
    for (int i = 0; i < nd; i++)
        fx_push_int(o, l, dims[i]);
}

static void set_ops(fx_out *o, wb_val *m, const char *key, const uint32_t *ids, int n) {
    wb_val *l = fx_set_list(o, m, key);
    for (int i = 0; i < n; i++)
        fx_push_int(o, l, ids[i]);
}

/* ---- view, epilogue, layout, roofline, imbalance ---------------------------------------------- */

typedef struct vgroup {
    int64_t calls, host_ns, ts;
    uint32_t ops[8];
    int nops;
    uint64_t first;
} vgroup;

static int rule_view(fx_index *ix, fx_out *o, wb_val *out) {
    gkeys keys = {.last = -1};
    vgroup *g = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < ix->nop; i++) { /* in id order */
        const fx_op *e = &ix->op[i];
        int shares = e->nflow >= 2 && e->flow[e->nflow - 1] != 0 && e->flow[e->nflow - 1] == e->flow[0];
        if (e->nkernels || e->failed || !(shares || (!e->nflow && e->no_work))) continue;
        int fresh;
        int64_t k = group_of(&keys, e->name, &fresh);
        if (k < 0) goto oom;
        GROUPS(vgroup, g, n, cap, k);
        if (fresh) g[k].ts = e->ts, g[k].first = e->index;
        g[k].calls++, g[k].host_ns += e->dur;
        if (e->ts < g[k].ts) g[k].ts = e->ts;
        if (g[k].nops < 8) g[k].ops[g[k].nops++] = e->id;
    }
    for (size_t k = 0; k < n; k++) {
        wb_val *m = fx_add(o, out, NULL);
        m->type = WB_VAL_MAP;
        fx_set_str(o, m, "name", keys.ix.key[k]);
        fx_set_int(o, m, "calls", g[k].calls);
        fx_set_int(o, m, "host_ns", g[k].host_ns);
        fx_set_int(o, m, "ts", g[k].ts);
        set_ops(o, m, "ops", g[k].ops, g[k].nops);
        wb_prof_cursor c;
        const wb_event *e = fx_event_at(ix, g[k].first, &c);
        if (e && e->ninputs) set_dims(o, m, "shapes", wb_prof_shape(ix->p, e, 0), wb_event_ndim(e, 0));
        const int64_t *in_stride, *out_shape, *out_stride;
        int out_nd;
        if (e && wb_prof_view_geometry(ix->p, e, &in_stride, &out_nd, &out_shape, &out_stride)) {
            set_dims(o, m, "in_stride", in_stride, wb_event_ndim(e, 0) > 0 ? wb_event_ndim(e, 0) : 0);
            set_dims(o, m, "out_shape", out_shape, out_nd);
            set_dims(o, m, "out_stride", out_stride, out_nd);
        }
        wb_prof_cursor_close(&c);
        if (c.status != WB_OK) return gkeys_free(&keys), free(g), 0;
    }
    gkeys_free(&keys), free(g);
    return 1;
oom:
    gkeys_free(&keys), free(g);
    o->oom = 1;
    return 1;
}

typedef struct kgroup { /* per kernel name: epilogue, layout, roofline, imbalance */
    int64_t launches, time_ns, ts, extra, saved, over, workers, waited, worst_hi, worst_lo;
    double flops, bytes, worst;
    const char *op; /* epilogue: the last launch's op */
    uint32_t ops[8];
    int nops, has_hi;
    const fx_dev *first;
} kgroup;

enum { R_EPILOGUE, R_LAYOUT, R_ROOFLINE, R_IMBALANCE };

/* The roofline's launches: per kernel name the median launch's rate (flops, or bytes where a kind
 * declares no flops, per ns) and duration, and the launches slower than the median one by more
 * than th->roofline_outlier_ratio (a preempted launch averaged in made a 30 us kernel read 0.1
 * GFLOP/s), as scripts/wb/findings_time.lua's roofline() computes them from the events. */
typedef struct launch {
    size_t group;
    int64_t dur;
    double flops, bytes, rate;
} launch;

static int launch_by_group_rate(const void *a, const void *b) {
    const launch *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    return (x->rate > y->rate) - (x->rate < y->rate);
}

static int cmp_dur(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* the median of sorted v[0..n): the middle one, or the mean of the two */
static double median_of(const double *v, size_t n) { return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; }

static int roofline_medians(fx_out *o, wb_val *groups, const double *flops_of_group, launch *l, size_t nl,
                            const wb_findings_th *th) {
    for (size_t i = 0; i < nl; i++) /* a group with flops is judged by them, else by its bytes */
        l[i].rate = (flops_of_group[l[i].group] > 0 ? l[i].flops : l[i].bytes) / (double)l[i].dur;
    qsort(l, nl, sizeof *l, launch_by_group_rate);
    double *rates = malloc((nl ? nl : 1) * sizeof *rates), *durs = malloc((nl ? nl : 1) * sizeof *durs);
    int64_t *d = malloc((nl ? nl : 1) * sizeof *d);
    if (!rates || !durs || !d) return free(rates), free(durs), free(d), 0;
    for (size_t i = 0; i < nl;) {
        size_t j = i;
        while (j < nl && l[j].group == l[i].group)
            j++;
        size_t n = j - i;
        for (size_t k = 0; k < n; k++)
            rates[k] = l[i + k].rate, d[k] = l[i + k].dur;
        qsort(d, n, sizeof *d, cmp_dur);
        for (size_t k = 0; k < n; k++)
            durs[k] = (double)d[k];
        double rate = median_of(rates, n);
        int64_t outliers = 0, worst = 0, outlier_ns = 0;
        for (size_t k = 0; k < n; k++)
            if (rates[k] * th->roofline_outlier_ratio < rate) {
                outliers++, outlier_ns += l[i + k].dur;
                if (l[i + k].dur > worst) worst = l[i + k].dur;
            }
        wb_val *m = &groups->c.v[l[i].group];
        fx_set_num(o, m, "rate", rate);
        fx_set_num(o, m, "median_ns", median_of(durs, n));
        fx_set_int(o, m, "outliers", outliers);
        fx_set_int(o, m, "outlier_ns", outlier_ns);
        fx_set_int(o, m, "outlier_max_ns", worst);
        i = j;
    }
    free(rates), free(durs), free(d);
    return 1;
}

static int rule_kernels(fx_index *ix, fx_out *o, wb_val *out, int rule, const wb_findings_th *th) {
    gkeys keys = {.last = -1};
    kgroup *g = NULL;
    launch *l = NULL;
    double *flops = NULL;
    size_t n = 0, cap = 0, nl = 0, cap_l = 0;
    for (size_t i = 0; i < ix->ndev; i++) {
        const fx_dev *k = &ix->dev[i];
        wb_kernel_fields f;
        int fields = k->has_fields && wb_kernel_kind_fields(k->kind, &f);
        size_t s0 = 0, nsh = 0;
        if (rule == R_EPILOGUE && !(fields && strcmp(f.epilogue, "none"))) continue;
        if (rule == R_LAYOUT && !(fields && f.layout[0])) continue;
        if (rule == R_ROOFLINE && !(k->kind_ev == WB_EV_KERNEL && k->dur > 0 && (k->flops > 0 || k->bytes > 0))) continue;
        if (rule == R_IMBALANCE && (nsh = fx_shares(ix, k->id, &s0)) < 2) continue;
        int fresh;
        int64_t x = group_of(&keys, dev_name(k), &fresh);
        if (x < 0) goto oom;
        GROUPS(kgroup, g, n, cap, x);
        kgroup *G = &g[x];
        if (fresh) G->ts = k->ts, G->first = k, G->workers = (int64_t)nsh;
        G->launches++, G->time_ns += k->dur, G->flops += k->flops, G->bytes += k->bytes;
        if (rule == R_ROOFLINE) {
            if (!wb_grow((void **)&l, &cap_l, nl + 1, sizeof *l)) goto oom;
            l[nl++] = (launch){.group = (size_t)x, .dur = k->dur, .flops = k->flops, .bytes = k->bytes};
        }
        if (rule == R_EPILOGUE) {
            fx_op *op = fx_op_of(ix, k->corr), *top = op;
            for (size_t guard = 0; top && top->parent && guard < ix->nop; guard++) {
                fx_op *up = fx_op_of(ix, top->parent);
                if (!up) break;
                top = up;
            }
            if (top) G->extra += top->nonlayout; /* the other kernels under the same top-level op */
            G->op = op ? op->name : NULL;
            if (top && G->nops < 8) G->ops[G->nops++] = top->id;
            int64_t elems = op && op->gemm_out >= 0 ? op->gemm_out : top && top->gemm_out >= 0 ? top->gemm_out : -1;
            int item = op ? op->itemsize : 4;
            int bias = !strncmp(f.epilogue, "bias", 4);
            int stages = (bias ? 1 : 0) + (strcmp(f.epilogue, "bias") ? 1 : 0);
            if (elems >= 0) G->saved += 2 * elems * item * stages;
        } else if (rule == R_IMBALANCE) {
            int64_t lo = INT64_MAX, hi = 0;
            for (size_t s = s0; s < s0 + nsh; s++) {
                if (ix->share[s].dur < lo) lo = ix->share[s].dur;
                if (ix->share[s].dur > hi) hi = ix->share[s].dur;
            }
            if ((double)(hi - lo) >= th->imbalance_min_ns && lo > 0 && (double)(hi - lo) / (double)lo > th->imbalance_ratio) {
                G->over++;
                for (size_t s = s0; s < s0 + nsh; s++)
                    G->waited += hi - ix->share[s].dur;
                double r = (double)(hi - lo) / (double)lo;
                if (r > G->worst) G->worst = r, G->worst_hi = hi, G->worst_lo = lo, G->has_hi = 1;
            }
        }
    }
    for (size_t x = 0; x < n; x++) {
        const kgroup *G = &g[x];
        wb_val *m = fx_add(o, out, NULL);
        m->type = WB_VAL_MAP;
        fx_set_str(o, m, "kernel", keys.ix.key[x]);
        fx_set_int(o, m, "launches", G->launches);
        fx_set_int(o, m, "ts", G->ts);
        wb_kernel_fields f;
        int fields = G->first->has_fields && wb_kernel_kind_fields(G->first->kind, &f);
        if (rule != R_IMBALANCE) fx_set_int(o, m, "time_ns", G->time_ns);
        if (rule == R_EPILOGUE && fields) {
            fx_set_str(o, m, "epilogue", f.epilogue);
            fx_set_int(o, m, "extra", G->extra);
            fx_set_int(o, m, "saved", G->saved);
            fx_set_str(o, m, "op", G->op);
            set_ops(o, m, "ops", G->ops, G->nops);
        } else if (rule == R_LAYOUT && fields) {
            fx_set_str(o, m, "layout", f.layout);
            fx_set_str(o, m, "isa", f.isa);
            fx_set_str(o, m, "tile", f.tile);
        } else if (rule == R_ROOFLINE) {
            fx_set_num(o, m, "flops", G->flops);
            fx_set_num(o, m, "bytes", G->bytes);
        } else if (rule == R_IMBALANCE) {
            fx_set_int(o, m, "over", G->over);
            fx_set_int(o, m, "workers", G->workers);
            fx_set_int(o, m, "waited", G->waited);
            if (G->has_hi) fx_set_num(o, m, "worst", G->worst);
            else fx_set_int(o, m, "worst", 0);
            if (G->has_hi) fx_set_int(o, m, "worst_hi", G->worst_hi);
            fx_set_int(o, m, "worst_lo", G->worst_lo);
        }
    }
    if (rule == R_ROOFLINE && n) {
        if (!(flops = malloc(n * sizeof *flops))) goto oom;
        for (size_t x = 0; x < n; x++)
            flops[x] = g[x].flops;
        if (!roofline_medians(o, out, flops, l, nl, th)) goto oom;
    }
    gkeys_free(&keys), free(g), free(l), free(flops);
    return 1;
oom:
    gkeys_free(&keys), free(g), free(l), free(flops);
    o->oom = 1;
    return 1;
}

int fx_rule_fusion(fx_index *ix, fx_out *o, wb_val *out);
int fx_rules_time(fx_index *ix, fx_out *o, wb_val *root);
int fx_rules_torch(fx_index *ix, fx_out *o, wb_val *root, double small_kernel_ns);

wb_status wb_prof_findings_groups(const wb_prof *p, const wb_findings_th *th, wb_val *out) {
    memset(out, 0, sizeof *out);
    fx_index ix;
    wb_status st = fx_index_build(&ix, p);
    if (st != WB_OK) return st;
    fx_out o = {0};
    out->type = WB_VAL_MAP;
    fx_set_int(&o, out, "events", (int64_t)ix.events);
    fx_set_int(&o, out, "device_events", (int64_t)ix.device_events);
    int ok = rule_view(&ix, &o, fx_set_list(&o, out, "view")) &&
             rule_kernels(&ix, &o, fx_set_list(&o, out, "epilogue"), R_EPILOGUE, th) &&
             rule_kernels(&ix, &o, fx_set_list(&o, out, "layout"), R_LAYOUT, th) &&
             fx_rule_fusion(&ix, &o, fx_set_list(&o, out, "fusion")) &&
             rule_kernels(&ix, &o, fx_set_list(&o, out, "imbalance"), R_IMBALANCE, th) &&
             rule_kernels(&ix, &o, fx_set_list(&o, out, "roofline"), R_ROOFLINE, th) && fx_rules_time(&ix, &o, out) &&
             fx_rules_torch(&ix, &o, out, th->small_kernel_ns);
    fx_index_free(&ix);
    if (!ok || o.oom) {
        wb_val_free(out);
        return ok ? wb_error(WB_ERR_MEMORY, "findings: out of memory") : WB_ERR_ARGUMENT;
    }
    return WB_OK;
}
