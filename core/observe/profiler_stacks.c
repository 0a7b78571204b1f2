/* profiler_stacks.c: folded stacks (flamegraph.pl, speedscope) computed over the store: one line
 * per distinct stack, "call site;op;inner op;kernel <ns>", sorted. Three passes over the chunks
 * (spilled ones read back); memory is ~40 bytes per op or runtime call and the distinct stacks,
 * never a table per event. The weights: an op's self time on the host (minus the CPU device's
 * kernels, which run inside their op on the calling thread), a kernel's or a copy's duration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyindex.h"
#include <wb/profiler_groups.h>
#include "profiler_internal.h"

#define FOR_EACH_EVENT(p, c, e)                                                                                        \
    for (wb_prof_cursor_open(&(c), (p)), (e) = wb_prof_cursor_next(&(c)); (e); (e) = wb_prof_cursor_next(&(c)))

typedef struct caller {
    const char *name, *src;
    uint32_t parent;  /* the enclosing op's id (0: none) */
    int32_t stack;    /* its stack's index in the table, -1 until asked */
    int64_t self;
} caller;

/* Stacks by their text (ids from the key index), each with its weight. */
typedef struct stacks {
    wb_keyindex keys;
    int64_t *weight; /* weight[id] */
    size_t cap;
} stacks;

static int64_t stack_of(stacks *t, const char *key) {
    int fresh;
    int64_t id = wb_keyindex_get(&t->keys, key, &fresh);
    if (id < 0 || !fresh) return id;
    if (!wb_grow((void **)&t->weight, &t->cap, (size_t)id + 1, sizeof *t->weight)) return -1;
    t->weight[id] = 0;
    return id;
}

/* A frame may hold anything but the separator and line breaks (the weight follows the last space). */
static size_t put_frame(char *buf, size_t at, size_t len, const char *name, int sep) {
    if (sep && at + 1 < len) buf[at++] = ';';
    for (; *name && at + 1 < len; name++)
        buf[at++] = *name == ';' ? ':' : (*name == '\r' || *name == '\n') ? ' ' : *name;
    buf[at < len ? at : len - 1] = '\0';
    return at;
}

typedef struct walk {
    const wb_idset *ids;
    caller *c;
    stacks *t;
} walk;

/* The stack of caller i: the outermost call site seen, then its ops from the outermost down. */
static int64_t caller_stack(walk *w, int64_t i) {
    if (w->c[i].stack >= 0) return w->c[i].stack;
    enum { DEPTH = 256 };
    int64_t chain[DEPTH];
    int n = 0;
    const char *site = NULL;
    for (int64_t at = i; at >= 0 && n < DEPTH;) {
        for (int k = 0; k < n; k++)
            if (chain[k] == at) goto walked; /* a loop (a crafted trace): stop where it closes */
        chain[n++] = at;
        if (w->c[at].src) site = w->c[at].src;
        at = w->c[at].parent ? wb_idset_index(w->ids, w->c[at].parent) : -1;
    }
walked:;
    static char buf[16384];
    size_t len = 0;
    buf[0] = '\0';
    if (site) len = put_frame(buf, len, sizeof buf, site, 0);
    for (int k = n - 1; k >= 0; k--)
        len = put_frame(buf, len, sizeof buf, w->c[chain[k]].name ? w->c[chain[k]].name : "?", site || k < n - 1);
    int64_t s = stack_of(w->t, buf);
    if (s >= 0) w->c[i].stack = (int32_t)s;
    return s;
}

static int by_key(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

wb_status wb_prof_folded_stacks(const wb_prof *p, char **out, size_t *out_len) {
    *out = NULL, *out_len = 0;
    wb_idset ids;
    caller *c = NULL;
    stacks t = {0};
    char **keys = NULL;
    wb_status st = WB_OK;
    wb_prof_cursor cur;
    const wb_event *e;
    if (!wb_idset_init(&ids, p->next_id)) goto oom;
    /* 1: the ids of ops and runtime calls */
    FOR_EACH_EVENT(p, cur, e) if (e->kind == WB_EV_OP || e->kind == WB_EV_RUNTIME) wb_idset_add(&ids, e->id);
    wb_prof_cursor_close(&cur);
    if ((st = cur.status) != WB_OK) goto done;
    size_t n = wb_idset_finish(&ids);
    if (!(c = calloc(n ? n : 1, sizeof *c))) goto oom;
    for (size_t i = 0; i < n; i++)
        c[i].stack = -1;
    /* 2: each caller's name, parent, call site and self time */
    FOR_EACH_EVENT(p, cur, e) {
        if (e->kind == WB_EV_OP || e->kind == WB_EV_RUNTIME) {
            int64_t i = wb_idset_index(&ids, e->id), up = e->link ? wb_idset_index(&ids, e->link) : -1;
            c[i].name = wb_event_name(e), c[i].src = wb_prof_src(p, e), c[i].parent = e->link;
            c[i].self += e->dur_ns;
            if (up >= 0 && up != i) c[up].self -= e->dur_ns;
        } else if ((e->kind == WB_EV_KERNEL || e->kind == WB_EV_MEMCPY || e->kind == WB_EV_MEMSET) &&
                   !strncmp(wb_prof_lane_name(p, e->lane), "cpu:", 4)) {
            int64_t at = wb_idset_index(&ids, e->link); /* the CPU device's kernel ran inside its op */
            if (at >= 0) c[at].self -= e->dur_ns;
        }
    }
    wb_prof_cursor_close(&cur);
    if ((st = cur.status) != WB_OK) goto done;
    /* 3: the device's time under its launcher's stack, then each caller's self time */
    walk w = {.ids = &ids, .c = c, .t = &t};
    static char buf[16384];
    FOR_EACH_EVENT(p, cur, e) {
        if (e->kind != WB_EV_KERNEL && e->kind != WB_EV_MEMCPY && e->kind != WB_EV_MEMSET) continue;
        int64_t at = wb_idset_index(&ids, e->link);
        size_t len = 0;
        buf[0] = '\0';
        if (at >= 0) {
            int64_t s = caller_stack(&w, at);
            if (s < 0) break;
            len = strlen(t.keys.key[s]);
            memcpy(buf, t.keys.key[s], len + 1);
        }
        put_frame(buf, len, sizeof buf, wb_event_name(e), at >= 0);
        int64_t k = stack_of(&t, buf);
        if (k < 0) break;
        t.weight[k] += e->dur_ns;
    }
    wb_prof_cursor_close(&cur);
    if ((st = cur.status) != WB_OK) goto done;
    if (e) goto oom; /* left early */
    for (size_t i = 0; i < n; i++) {
        int64_t s = caller_stack(&w, (int64_t)i);
        if (s < 0) goto oom;
        t.weight[s] += c[i].self;
    }
    /* the stacks that weigh at least 1 ns, sorted, one a line */
    if (!(keys = malloc((t.keys.n ? t.keys.n : 1) * sizeof *keys))) goto oom;
    size_t nk = 0, bytes = 1;
    for (size_t i = 0; i < t.keys.n; i++)
        if (t.weight[i] >= 1) {
            keys[nk++] = t.keys.key[i];
            bytes += strlen(t.keys.key[i]) + 24;
            t.weight[i] = -t.weight[i] - 1; /* marked kept: found again by its key below */
        }
    wb_sort(keys, nk, sizeof *keys, by_key);
    char *text = malloc(bytes);
    if (!text) goto oom;
    size_t len = 0;
    for (size_t i = 0; i < nk; i++) {
        int64_t s = stack_of(&t, keys[i]);
        len += (size_t)snprintf(text + len, bytes - len, "%s %lld\n", keys[i], (long long)(-t.weight[s] - 1));
    }
    text[len] = '\0';
    *out = text, *out_len = len;
    goto done;
oom:
    st = wb_error(WB_ERR_MEMORY, "export_stacks: out of memory");
done:
    wb_idset_free(&ids);
    wb_keyindex_free(&t.keys);
    free(t.weight), free(c), free(keys);
    return st;
}
