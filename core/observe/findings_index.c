/* findings_index.c: the findings' index built from the store in two passes (op ids, then every
 * event into compact records: ~140 bytes per op, ~64 per device event or span), and the value
 * tree the rules' groups are returned in. See findings_index.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyindex.h"
#include "findings_index.h"

/* ---- values --------------------------------------------------------------------------------- */

static wb_val dummy;

wb_val *fx_add(fx_out *o, wb_val *c, const char *key) {
    if (c->c.n == c->c.cap) {
        size_t cap = c->c.cap ? 2 * c->c.cap : 8;
        wb_val *v = realloc(c->c.v, cap * sizeof *v);
        if (v) c->c.v = v;
        char **k = c->type == WB_VAL_MAP ? realloc(c->c.k, cap * sizeof *k) : NULL;
        if (k) c->c.k = k;
        if (!v || (c->type == WB_VAL_MAP && !k)) {
            o->oom = 1;
            memset(&dummy, 0, sizeof dummy);
            return &dummy;
        }
        c->c.cap = cap;
    }
    if (c->type == WB_VAL_MAP) {
        char *k = strdup(key ? key : "");
        if (!k) {
            o->oom = 1;
            memset(&dummy, 0, sizeof dummy);
            return &dummy;
        }
        c->c.k[c->c.n] = k;
    }
    wb_val *v = &c->c.v[c->c.n++];
    memset(v, 0, sizeof *v);
    return v;
}

wb_val *fx_get(wb_val *m, const char *key) {
    for (size_t i = 0; i < m->c.n; i++)
        if (!strcmp(m->c.k[i], key)) return &m->c.v[i];
    return NULL;
}

/* The existing value under key (a map's field set twice is replaced), or a new one. */
static wb_val *slot_of(fx_out *o, wb_val *m, const char *key) {
    wb_val *v = key ? fx_get(m, key) : NULL;
    if (v) {
        wb_val_free(v);
        return v;
    }
    return fx_add(o, m, key);
}

void fx_set_int(fx_out *o, wb_val *m, const char *key, int64_t x) {
    wb_val *v = slot_of(o, m, key);
    v->type = WB_VAL_INT, v->i = x;
}
void fx_set_num(fx_out *o, wb_val *m, const char *key, double x) {
    wb_val *v = slot_of(o, m, key);
    v->type = WB_VAL_NUM, v->d = x;
}
void fx_set_bool(fx_out *o, wb_val *m, const char *key, int x) {
    wb_val *v = slot_of(o, m, key);
    v->type = WB_VAL_BOOL, v->b = x;
}
void fx_set_str(fx_out *o, wb_val *m, const char *key, const char *x) {
    if (!x) return;
    wb_val *v = slot_of(o, m, key);
    if (v == &dummy) return;
    if (!(v->s = strdup(x))) o->oom = 1;
    else v->type = WB_VAL_STR;
}
wb_val *fx_set_list(fx_out *o, wb_val *m, const char *key) {
    wb_val *v = slot_of(o, m, key);
    v->type = WB_VAL_LIST;
    return v;
}
wb_val *fx_set_map(fx_out *o, wb_val *m, const char *key) {
    wb_val *v = slot_of(o, m, key);
    v->type = WB_VAL_MAP;
    return v;
}
void fx_push_int(fx_out *o, wb_val *list, int64_t x) {
    wb_val *v = fx_add(o, list, NULL);
    v->type = WB_VAL_INT, v->i = x;
}

void wb_val_free(wb_val *v) {
    if (v->type == WB_VAL_STR) free(v->s);
    if (v->type == WB_VAL_LIST || v->type == WB_VAL_MAP) {
        for (size_t i = 0; i < v->c.n; i++) {
            wb_val_free(&v->c.v[i]);
            if (v->type == WB_VAL_MAP) free(v->c.k[i]);
        }
        free(v->c.v), free(v->c.k);
    }
    memset(v, 0, sizeof *v);
}

/* ---- the index ------------------------------------------------------------------------------- */

#define APPEND(arr, n, cap, val)                                                                                       \
    do {                                                                                                               \
        if ((n) == (cap)) {                                                                                            \
            size_t c2_ = (cap) ? 2 * (cap) : 256;                                                                      \
            void *q_ = realloc((arr), c2_ * sizeof *(arr));                                                            \
            if (!q_) goto oom;                                                                                         \
            (arr) = q_, (cap) = c2_;                                                                                   \
        }                                                                                                              \
        (arr)[(n)++] = (val);                                                                                          \
    } while (0)

fx_op *fx_op_of(fx_index *ix, uint32_t id) {
    int64_t i = wb_idset_index(&ix->ids, id);
    return i >= 0 ? &ix->op[i] : NULL;
}

static int dev_cmp(const void *a, const void *b) {
    const fx_dev *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}
static int span_cmp(const void *a, const void *b) {
    const fx_span *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}
static int share_cmp(const void *a, const void *b) {
    const fx_span *x = a, *y = b;
    if (x->link != y->link) return x->link < y->link ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}
static const fx_index *top_ix;
static int top_cmp(const void *a, const void *b) {
    const fx_op *x = &top_ix->op[*(const int32_t *)a], *y = &top_ix->op[*(const int32_t *)b];
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

size_t fx_shares(const fx_index *ix, uint32_t kernel_id, size_t *first) {
    size_t lo = 0, hi = ix->nshare;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ix->share[mid].link < kernel_id) lo = mid + 1;
        else hi = mid;
    }
    size_t end = lo;
    while (end < ix->nshare && ix->share[end].link == kernel_id)
        end++;
    *first = lo;
    return end - lo;
}

const wb_event *fx_event_at(const fx_index *ix, uint64_t index, wb_prof_cursor *c) {
    wb_prof_cursor_open(c, ix->p);
    wb_prof_cursor_seek(c, index);
    return wb_prof_cursor_next(c);
}

/* a * b, held at INT64_MAX where it would overflow (a file's shapes are not bounded by memory) */
static int64_t mul_sat(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static int64_t rows_of(const int64_t *d, int nd) { /* all dims but the last */
    int64_t n = 1;
    for (int i = 0; i < nd - 1; i++)
        n = mul_sat(n, d[i]);
    return n;
}

/* wb.findings' gemm_out_elements: addmm(bias, a, b), linear(x, w, b), mm/matmul(a, b). */
static int64_t gemm_out(const wb_prof *p, const wb_event *e) {
    const char *n = e->name;
    int nd[3] = {-1, -1, -1};
    for (int i = 0; i < e->ninputs && i < 3; i++)
        nd[i] = wb_event_ndim(e, i);
    if (!strcmp(n, "addmm") && nd[1] > 0 && nd[2] > 0)
        return mul_sat(wb_prof_shape(p, e, 1)[0], wb_prof_shape(p, e, 2)[nd[2] - 1]);
    if (!strcmp(n, "linear") && nd[0] >= 0 && nd[1] > 0)
        return mul_sat(rows_of(wb_prof_shape(p, e, 0), nd[0]), wb_prof_shape(p, e, 1)[0]);
    if ((!strcmp(n, "mm") || !strcmp(n, "matmul")) && nd[0] >= 0 && nd[1] > 0)
        return mul_sat(rows_of(wb_prof_shape(p, e, 0), nd[0]), wb_prof_shape(p, e, 1)[nd[1] - 1]);
    return -1;
}

static int itemsize_of(const char *dtype) { return dtype && !strcmp(dtype, "bf16") ? 2 : 4; }

wb_status fx_index_build(fx_index *ix, const wb_prof *p) {
    memset(ix, 0, sizeof *ix);
    ix->p = p;
    size_t cap_dev = 0, cap_top = 0, cap_rt = 0, cap_mem = 0, cap_sh = 0, cap_rg = 0, cap_st = 0;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    wb_prof_cursor c;
    const wb_event *e;
    wb_status st = WB_OK;
    if (!wb_idset_init(&ix->ids, p->next_id)) goto oom;
    size_t count_of[WB_EV_MEMSET + 1] = {0}, tops = 0; /* each list allocated once, at its size */
    for (wb_prof_cursor_open(&c, p); (e = wb_prof_cursor_next(&c));) {
        if (e->kind <= WB_EV_MEMSET) count_of[e->kind]++;
        if (e->kind == WB_EV_OP) wb_idset_add(&ix->ids, e->id), tops += e->link == 0;
    }
    wb_prof_cursor_close(&c);
    if ((st = c.status) != WB_OK) return st;
    ix->nop = wb_idset_finish(&ix->ids);
    if (!(ix->op = calloc(ix->nop ? ix->nop : 1, sizeof *ix->op))) goto oom;
#define PRESIZE(arr, cap, n)                                                                                           \
    if ((n) && !((arr) = malloc((n) * sizeof *(arr)))) goto oom;                                                       \
    (cap) = (n)
    PRESIZE(ix->dev, cap_dev, count_of[WB_EV_KERNEL] + count_of[WB_EV_MEMCPY] + count_of[WB_EV_MEMSET]);
    PRESIZE(ix->top, cap_top, tops);
    PRESIZE(ix->runtime, cap_rt, count_of[WB_EV_RUNTIME]);
    PRESIZE(ix->memory, cap_mem, count_of[WB_EV_MEMORY]);
    PRESIZE(ix->share, cap_sh, count_of[WB_EV_THREAD]);
    PRESIZE(ix->range, cap_rg, count_of[WB_EV_RANGE]);
    PRESIZE(ix->step, cap_st, count_of[WB_EV_STEP]);
#undef PRESIZE
    uint64_t seq = 0;
    for (wb_prof_cursor_open(&c, p); (e = wb_prof_cursor_next(&c)); seq++) {
        ix->events++;
        if (e->ts_ns < t0) t0 = e->ts_ns;
        if (e->ts_ns + e->dur_ns > t1) t1 = e->ts_ns + e->dur_ns;
        fx_span s = {.ts = e->ts_ns, .dur = e->dur_ns, .seq = seq, .link = e->link, .id = e->id, .lane = e->lane,
                     .extra = -1};
        switch (e->kind) {
        case WB_EV_OP: {
            fx_op *o = &ix->op[wb_idset_index(&ix->ids, e->id)];
            *o = (fx_op){.name = e->name, .ts = e->ts_ns, .dur = e->dur_ns, .no_work = e->flops == 0 && e->bytes == 0,
                         .index = seq, .id = e->id, .parent = e->link, .failed = e->failed, .ninputs = e->ninputs,
                         .gemm_out = -1, .itemsize = 4};
            int nflow = 0;
            const int64_t *flow = e->nflow ? wb_prof_flow(p, e, &nflow) : NULL;
            o->nflow = (uint8_t)(nflow < FX_MAX_FLOW ? nflow : FX_MAX_FLOW);
            for (int i = 0; i < o->nflow; i++)
                o->flow[i] = flow[i];
            for (int k = 0; k < WB_EVENT_MAX_INPUTS; k++) {
                int nd = k < e->ninputs ? wb_event_ndim(e, k) : -1;
                o->dtype[k] = nd < 0 ? -1 : (int8_t)wb_event_dtype(e, k);
                o->numel[k] = nd < 0 ? 0 : 1;
                const int64_t *dims = nd > 0 ? wb_prof_shape(p, e, k) : NULL;
                for (int d = 0; d < nd; d++)
                    o->numel[k] = mul_sat(o->numel[k], dims[d]);
            }
            if (e->ninputs) {
                o->gemm_out = gemm_out(p, e);
                /* dtypes[2] or dtypes[1]: the second input's when it is there */
                int k = e->ninputs >= 2 && o->dtype[1] >= 0 ? 1 : 0;
                o->itemsize = o->dtype[k] >= 0 ? (uint8_t)itemsize_of(wb_dtype_name((wb_dtype)o->dtype[k])) : 4;
            }
            if (e->link == 0) {
                int32_t i = (int32_t)(o - ix->op);
                APPEND(ix->top, ix->ntop, cap_top, i);
            }
            break;
        }
        case WB_EV_KERNEL:
        case WB_EV_MEMCPY:
        case WB_EV_MEMSET: {
            wb_kernel_fields f;
            fx_dev d = {.ts = e->ts_ns, .dur = e->dur_ns, .flops = e->flops,
                        .bytes = e->bytes, .seq = seq, .id = e->id, .corr = e->link, .kind_ev = e->kind, .lane = e->lane,
                        .kind = e->kind == WB_EV_KERNEL ? e->kernel : NULL,
                        .name = e->kind == WB_EV_KERNEL ? NULL : e->name,
                        .has_fields = e->kind == WB_EV_KERNEL && wb_kernel_kind_fields(e->kernel, &f)};
            APPEND(ix->dev, ix->ndev, cap_dev, d);
            ix->device_events++;
            break;
        }
        case WB_EV_RUNTIME:
            s.name = e->name, s.api = e->api;
            APPEND(ix->runtime, ix->nruntime, cap_rt, s);
            break;
        case WB_EV_MEMORY:
            APPEND(ix->memory, ix->nmemory, cap_mem, s);
            break;
        case WB_EV_THREAD:
            APPEND(ix->share, ix->nshare, cap_sh, s);
            break;
        case WB_EV_RANGE:
            s.name = e->name;
            APPEND(ix->range, ix->nrange, cap_rg, s);
            break;
        case WB_EV_STEP:
            s.extra = e->run_delay_ns;
            APPEND(ix->step, ix->nstep, cap_st, s);
            break;
        }
    }
    wb_prof_cursor_close(&c);
    if ((st = c.status) != WB_OK) goto done;
    /* time order (stable: a session records in time order nearly always) */
    wb_sort(ix->dev, ix->ndev, sizeof *ix->dev, dev_cmp);
    wb_sort(ix->memory, ix->nmemory, sizeof *ix->memory, span_cmp);
    wb_sort(ix->share, ix->nshare, sizeof *ix->share, share_cmp);
    top_ix = ix;
    wb_sort(ix->top, ix->ntop, sizeof *ix->top, top_cmp);
    /* lanes in the order their first event was recorded, each in time order */
    uint64_t first_seq[256];
    int64_t count[256] = {0};
    for (int l = 0; l < 256; l++)
        first_seq[l] = UINT64_MAX;
    for (size_t i = 0; i < ix->ndev; i++) {
        count[ix->dev[i].lane]++;
        if (ix->dev[i].seq < first_seq[ix->dev[i].lane]) first_seq[ix->dev[i].lane] = ix->dev[i].seq;
    }
    for (;;) {
        int best = -1;
        for (int l = 0; l < 256; l++)
            if (count[l] && first_seq[l] != UINT64_MAX && (best < 0 || first_seq[l] < first_seq[best])) best = l;
        if (best < 0) break;
        ix->lane_order[ix->nlanes++] = (uint8_t)best;
        first_seq[best] = UINT64_MAX;
    }
    ix->lane_start = calloc((size_t)ix->nlanes + 1, sizeof *ix->lane_start);
    ix->lane_dev = malloc((ix->ndev ? ix->ndev : 1) * sizeof *ix->lane_dev);
    if (!ix->lane_start || !ix->lane_dev) goto oom;
    size_t at = 0;
    for (int k = 0; k < ix->nlanes; k++) {
        ix->lane_start[k] = at;
        for (size_t i = 0; i < ix->ndev; i++)
            if (ix->dev[i].lane == ix->lane_order[k]) ix->lane_dev[at++] = (int32_t)i;
    }
    ix->lane_start[ix->nlanes] = at;
    /* each op's kernels: the launching op's and every op above it (64 levels) */
    for (size_t i = 0; i < ix->ndev; i++) {
        const fx_dev *k = &ix->dev[i];
        fx_op *o = fx_op_of(ix, k->corr);
        for (int depth = 0; o && depth < 64; depth++) {
            if (o->nkernels == 0 || k->ts > o->last_kernel_ts) o->last_kernel_ts = k->ts;
            o->nkernels++;
            if (!k->has_fields) o->nonlayout++;
            o = o->parent ? fx_op_of(ix, o->parent) : NULL;
        }
    }
    /* the windows: ranges, else steps, else the whole recording */
    fx_span *w = ix->nrange ? ix->range : ix->step;
    ix->nwindow = ix->nrange ? ix->nrange : ix->nstep;
    if (ix->nwindow) {
        if (!(ix->window = malloc(ix->nwindow * sizeof *ix->window))) goto oom;
        memcpy(ix->window, w, ix->nwindow * sizeof *w);
    } else if (ix->events) {
        if (!(ix->window = malloc(sizeof *ix->window))) goto oom;
        ix->window[0] = (fx_span){.ts = t0, .dur = t1 - t0, .name = "the recording", .extra = -1};
        ix->nwindow = 1, ix->whole = 1;
    }
    wb_sort(ix->window, ix->nwindow, sizeof *ix->window, span_cmp);
    goto done;
oom:
    st = wb_error(WB_ERR_MEMORY, "findings: out of memory indexing the events");
done:
    if (st != WB_OK) fx_index_free(ix);
    return st;
}

void fx_index_free(fx_index *ix) {
    wb_idset_free(&ix->ids);
    free(ix->op), free(ix->dev), free(ix->lane_dev), free(ix->lane_start), free(ix->top), free(ix->runtime);
    free(ix->memory), free(ix->share), free(ix->range), free(ix->step), free(ix->window);
    memset(ix, 0, sizeof *ix);
}
