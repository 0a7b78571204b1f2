/* findings_time.c: the findings' rules about time over the C index (findings_index.h): host_bound
 * (the device's busy time per window), gaps (the idle time between kernels, split by what the
 * host was doing), the steps' run-queue delay, and cuda's syncs and copies inside windows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyindex.h"
#include "findings_index.h"

static const char *dev_name(const fx_dev *k) { return k->kind ? wb_kernel_kind_name(k->kind) : k->name; }

/* A window's group: a range's name, or "ProfilerStep" for every step (a range's instances are
 * one group; so are the steps, not a group and a finding per step: 700,000 of them once). */
static const char *window_name(const fx_span *w) { return w->name ? w->name : "ProfilerStep"; }

static wb_val *new_map(fx_out *o, wb_val *list) {
    wb_val *m = fx_add(o, list, NULL);
    m->type = WB_VAL_MAP;
    return m;
}

/* The map of list for the name s, keyed through ki (ids in the order the maps were added, from
 * the list's first): a new one with `key` = s when it is not there; NULL when out of memory. Many
 * windows (700,000 steps) stay linear. */
static wb_val *map_for(fx_out *o, wb_val *list, wb_keyindex *ki, const char *key, const char *s, int64_t ts) {
    int fresh = 0;
    int64_t id = wb_keyindex_get(ki, s, &fresh);
    if (id < 0) return o->oom = 1, NULL;
    if (!fresh) return &list->c.v[id];
    wb_val *m = new_map(o, list);
    fx_set_str(o, m, key, s);
    fx_set_int(o, m, "ts", ts);
    return m;
}

static void add_int(fx_out *o, wb_val *m, const char *key, int64_t d) {
    wb_val *v = fx_get(m, key);
    fx_set_int(o, m, key, (v ? v->i : 0) + d);
}

/* ---- host_bound -------------------------------------------------------------------------------- */

static void host_bound(fx_index *ix, fx_out *o, wb_val *out) {
    const fx_dev *ks = ix->dev;
    size_t nk = ix->ndev, lo = 0, olo = 0;
    wb_keyindex ki = {0};
    for (size_t w = 0; w < ix->nwindow; w++) {
        const fx_span *W = &ix->window[w];
        int64_t t0 = W->ts, t1 = W->ts + W->dur;
        while (lo < nk && ks[lo].ts + ks[lo].dur < t0 && ks[lo].ts < t0)
            lo++;
        int64_t busy = 0, reach = t0, n = 0; /* the union of the kernels' spans inside [t0, t1] */
        for (size_t i = lo; i < nk && ks[i].ts < t1; i++) {
            int64_t a = ks[i].ts > reach ? ks[i].ts : reach, b = ks[i].ts + ks[i].dur < t1 ? ks[i].ts + ks[i].dur : t1;
            if (b > a) busy += b - a, reach = b;
            if (ks[i].ts >= t0) n++;
        }
        while (olo < ix->ntop && ix->op[ix->top[olo]].ts < t0)
            olo++;
        int64_t nops = 0;
        for (size_t j = olo; j < ix->ntop && ix->op[ix->top[j]].ts <= t1; j++)
            nops++;
        if (n > 0 && W->dur > 0) {
            wb_val *g = map_for(o, out, &ki, "name", window_name(W), W->ts);
            if (!g) break;
            add_int(o, g, "instances", 1), add_int(o, g, "span", W->dur), add_int(o, g, "busy", busy);
            add_int(o, g, "kernels", n), add_int(o, g, "ops", nops);
        }
    }
    wb_keyindex_free(&ki);
}

/* ---- gaps -------------------------------------------------------------------------------------- */

enum { C_DISPATCH, C_ALLOCATION, C_SCRIPT, C_IMBALANCE, C_PREEMPTED, C_OTHER, NCAT };
static const char *const CATEGORY[NCAT] = {"dispatch", "allocation", "script", "imbalance", "preempted", "other"};

typedef struct segs {
    int64_t *from, *to;
    uint8_t *what;
    size_t n;
    int64_t *af, *at; /* allocations and frees that took time */
    size_t na;
} segs;

static const segs *sort_segs;
static int seg_cmp(const void *a, const void *b) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (sort_segs->from[i] != sort_segs->from[j]) return sort_segs->from[i] < sort_segs->from[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* The host's cover of the gaps: top-level ops split at their last kernel's start (dispatch before,
 * other after), top-level host runtime calls (other); sorted by start (they nearly always are). */
static int host_segments(fx_index *ix, segs *s) {
    size_t cap = 2 * ix->ntop + ix->nruntime + 1, n = 0;
    s->from = malloc(cap * sizeof *s->from), s->to = malloc(cap * sizeof *s->to), s->what = malloc(cap);
    s->af = malloc((ix->nmemory + 1) * sizeof *s->af), s->at = malloc((ix->nmemory + 1) * sizeof *s->at);
    if (!s->from || !s->to || !s->what || !s->af || !s->at) return 0;
    int sorted = 1;
#define SEG(a, b, w)                                                                                                   \
    do {                                                                                                               \
        if (n && (a) < s->from[n - 1]) sorted = 0;                                                                     \
        s->from[n] = (a), s->to[n] = (b), s->what[n++] = (w);                                                          \
    } while (0)
    for (size_t i = 0; i < ix->ntop; i++) {
        const fx_op *op = &ix->op[ix->top[i]];
        int64_t t0 = op->ts, t1 = op->ts + op->dur;
        int64_t last = op->nkernels ? op->last_kernel_ts : t1;
        if (last < t0) last = t0;
        if (last > t1) last = t1;
        SEG(t0, last, C_DISPATCH);
        if (t1 > last) SEG(last, t1, C_OTHER);
    }
    for (size_t i = 0; i < ix->nruntime; i++) {
        const fx_span *r = &ix->runtime[i];
        if (r->link == 0 && r->lane == WB_LANE_HOST) SEG(r->ts, r->ts + r->dur, C_OTHER);
    }
#undef SEG
    s->n = n;
    if (!sorted) { /* rare (runtime calls between ops): sort through an index */
        size_t *idx = malloc(n * sizeof *idx);
        int64_t *f2 = malloc(n * sizeof *f2), *t2 = malloc(n * sizeof *t2);
        uint8_t *w2 = malloc(n ? n : 1);
        if (!idx || !f2 || !t2 || !w2) return free(idx), free(f2), free(t2), free(w2), 0;
        for (size_t i = 0; i < n; i++)
            idx[i] = i;
        sort_segs = s;
        wb_sort(idx, n, sizeof *idx, seg_cmp);
        for (size_t i = 0; i < n; i++)
            f2[i] = s->from[idx[i]], t2[i] = s->to[idx[i]], w2[i] = s->what[idx[i]];
        free(idx), free(s->from), free(s->to), free(s->what);
        s->from = f2, s->to = t2, s->what = w2;
    }
    s->na = 0;
    for (size_t i = 0; i < ix->nmemory; i++)
        if (ix->memory[i].dur > 0) s->af[s->na] = ix->memory[i].ts, s->at[s->na++] = ix->memory[i].ts + ix->memory[i].dur;
    return 1;
}

typedef struct item { /* a kernel on a device lane, or a worker's share (join: its kernel's end) */
    int64_t ts, dur, join;
} item;

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* wb.findings_time's split_lane: the gaps between consecutive busy spans of one lane, added into
 * cat by what the host was doing (a worker's wait for its kernel's end first: imbalance). */
static void split_lane(const item *ks, size_t nk, const segs *s, int64_t *cat, int join, int64_t *total_out,
                       int64_t *count_out, int64_t *span_out) {
    size_t ap = 0, p = 0;
    int64_t total = 0, count = 0;
    int64_t reach = nk ? ks[0].ts + ks[0].dur : 0;
    int64_t waits_until = join && nk ? ks[0].join : reach;
#define ALLOC_BETWEEN(lo_, hi_, out_)                                                                                  \
    do {                                                                                                               \
        while (ap < s->na && s->at[ap] <= (lo_))                                                                       \
            ap++;                                                                                                      \
        int64_t sum_ = 0;                                                                                              \
        for (size_t q_ = ap; q_ < s->na && s->af[q_] < (hi_); q_++) {                                                  \
            int64_t x_ = max64((lo_), s->af[q_]), y_ = min64((hi_), s->at[q_]);                                        \
            if (y_ > x_) sum_ += y_ - x_;                                                                              \
        }                                                                                                              \
        (out_) = sum_;                                                                                                 \
    } while (0)
    for (size_t i = 1; i < nk; i++) {
        int64_t a = reach, b = ks[i].ts;
        if (b > a) {
            total += b - a, count++;
            int64_t wait = max64(0, min64(b, waits_until) - a);
            cat[C_IMBALANCE] += wait;
            a += wait;
            while (p < s->n && s->to[p] <= a)
                p++;
            int64_t alloc, covered = 0, alloc_in_ops = 0;
            ALLOC_BETWEEN(a, b, alloc);
            for (size_t q = p; q < s->n && s->from[q] < b; q++) {
                int64_t lo = max64(a, s->from[q]), hi = min64(b, s->to[q]);
                if (hi > lo) {
                    int64_t in_alloc;
                    ALLOC_BETWEEN(lo, hi, in_alloc);
                    cat[s->what[q]] += (hi - lo) - in_alloc;
                    covered += hi - lo, alloc_in_ops += in_alloc;
                }
            }
            cat[C_ALLOCATION] += alloc;
            cat[C_SCRIPT] += (b - a - covered) - (alloc - alloc_in_ops);
        }
        int64_t e = ks[i].ts + ks[i].dur;
        if (e > reach) reach = e;
        waits_until = join ? max64(ks[i].join, reach) : reach;
    }
#undef ALLOC_BETWEEN
    *total_out = total, *count_out = count, *span_out = nk ? reach - ks[0].ts : 0;
}

static void put_gap(fx_out *o, wb_val *m, const int64_t *cat, int64_t total, int64_t count, int64_t span, int64_t ts) {
    wb_val *c = fx_set_map(o, m, "cat");
    for (int k = 0; k < NCAT; k++)
        fx_set_int(o, c, CATEGORY[k], cat[k]);
    fx_set_int(o, m, "total", total), fx_set_int(o, m, "count", count), fx_set_int(o, m, "span", span);
    fx_set_int(o, m, "ts", ts);
}

static int gaps(fx_index *ix, fx_out *o, wb_val *out) {
    segs s = {0};
    item *v = malloc((ix->ndev + ix->nshare + 1) * sizeof *v);
    /* a share counts once, with the first kernel of its id: a trace may give several kernels one
     * id (a file's own ids are not checked unique), and each would find the same shares again */
    uint8_t *taken = calloc(ix->nshare + 1, 1);
    int ok = v && taken && host_segments(ix, &s);
    wb_val *lanes = fx_set_list(o, out, "lanes");
    for (int L = 0; ok && L < ix->nlanes; L++) {
        size_t nk = ix->lane_start[L + 1] - ix->lane_start[L];
        for (size_t i = 0; i < nk; i++) {
            const fx_dev *k = &ix->dev[ix->lane_dev[ix->lane_start[L] + i]];
            v[i] = (item){k->ts, k->dur, 0};
        }
        int64_t cat[NCAT] = {0}, total, count, span;
        split_lane(v, nk, &s, cat, 0, &total, &count, &span);
        wb_val *m = fx_add(o, lanes, NULL);
        m->type = WB_VAL_MAP;
        fx_set_str(o, m, "lane", wb_prof_lane_name(ix->p, ix->lane_order[L]));
        put_gap(o, m, cat, total, count, span, nk ? v[0].ts : 0);
    }
    /* worker lanes: each share, in its kernel's time order, waits first for its kernel's end */
    uint8_t order[256];
    int nw = 0;
    int seen[256] = {0};
    for (size_t i = 0; ok && i < ix->ndev; i++) {
        size_t s0, nsh = fx_shares(ix, ix->dev[i].id, &s0);
        for (size_t j = s0; j < s0 + nsh; j++)
            if (!seen[ix->share[j].lane]) seen[ix->share[j].lane] = 1, order[nw++] = ix->share[j].lane;
    }
    if (ok && nw > 0) {
        int64_t cat[NCAT] = {0}, total = 0, count = 0, span = 0, ts = INT64_MAX;
        for (int w = 0; w < nw; w++) {
            size_t n = 0;
            for (size_t i = 0; i < ix->ndev; i++) {
                size_t s0, nsh = fx_shares(ix, ix->dev[i].id, &s0);
                for (size_t j = s0; j < s0 + nsh; j++)
                    if (ix->share[j].lane == order[w] && !taken[j]) {
                        taken[j] = 1;
                        v[n++] = (item){ix->share[j].ts, ix->share[j].dur, ix->dev[i].ts + ix->dev[i].dur};
                    }
            }
            int64_t t, c, sp;
            split_lane(v, n, &s, cat, 1, &t, &c, &sp);
            total += t, count += c, span += sp;
            if (n && v[0].ts < ts) ts = v[0].ts;
        }
        wb_val *m = fx_set_map(o, out, "workers");
        put_gap(o, m, cat, total, count, span, ts);
        fx_set_int(o, m, "workers", nw);
    }
    free(v), free(taken), free(s.from), free(s.to), free(s.what), free(s.af), free(s.at);
    if (!ok) o->oom = 1;
    return 1;
}

/* ---- syncs and copies inside windows (cuda) ------------------------------------------------------ */

typedef struct timed {
    int64_t ts, dur;
    const char *name;
} timed;

static int timed_cmp(const void *a, const void *b) {
    const timed *x = a, *y = b;
    return (x->ts > y->ts) - (x->ts < y->ts);
}

static void inside_windows(fx_index *ix, fx_out *o, wb_val *out, int copies) {
    if (ix->whole) return;
    /* the syncs (or copies), sorted by start once: each window then looks at its own */
    size_t n = copies ? ix->ndev : ix->nruntime, m = 0;
    timed *t = malloc((n ? n : 1) * sizeof *t);
    if (!t) return (void)(o->oom = 1);
    for (size_t i = 0; i < n; i++)
        if (copies ? ix->dev[i].kind_ev == WB_EV_MEMCPY : ix->runtime[i].api == WB_API_SYNC)
            t[m++] = copies ? (timed){ix->dev[i].ts, ix->dev[i].dur, dev_name(&ix->dev[i])}
                            : (timed){ix->runtime[i].ts, ix->runtime[i].dur, ix->runtime[i].name};
    wb_sort(t, m, sizeof *t, timed_cmp);
    wb_keyindex ki = {0};
    for (size_t w = 0; w < ix->nwindow && m; w++) {
        const fx_span *W = &ix->window[w];
        int64_t t0 = W->ts, t1 = W->ts + W->dur;
        size_t lo = 0, hi = m; /* the first at or after t0 */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (t[mid].ts < t0) lo = mid + 1;
            else hi = mid;
        }
        wb_val *h = NULL;
        for (size_t i = lo; i < m && t[i].ts <= t1; i++) {
            if (!h && !(h = map_for(o, out, &ki, "window", window_name(W), t[i].ts))) break;
            if (i == lo) add_int(o, h, "instances", 1);
            if (!fx_get(h, "names")) fx_set_map(o, h, "names");
            add_int(o, h, "count", 1), add_int(o, h, "time_ns", t[i].dur);
            add_int(o, fx_get(h, "names"), t[i].name, 1);
        }
    }
    wb_keyindex_free(&ki);
    free(t);
}

int fx_rules_time(fx_index *ix, fx_out *o, wb_val *root);
int fx_rules_time(fx_index *ix, fx_out *o, wb_val *root) {
    host_bound(ix, o, fx_set_list(o, root, "host_bound"));
    gaps(ix, o, fx_set_map(o, root, "gaps"));
    double delay = 0;
    int64_t span = 0;
    for (size_t i = 0; i < ix->nstep; i++)
        if (ix->step[i].extra >= 0) delay += ix->step[i].extra, span += ix->step[i].dur;
    wb_val *st = fx_set_map(o, root, "steps");
    fx_set_num(o, st, "delay", delay);
    fx_set_int(o, st, "span", span);
    inside_windows(ix, o, fx_set_list(o, root, "sync"), 0);
    inside_windows(ix, o, fx_set_list(o, root, "memcpy"), 1);
    return 1;
}
