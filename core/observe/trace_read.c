/* trace_read.c: a Chrome trace the workbench wrote, read back into a session's store in one
 * streaming pass (plain or .gz through zlib): one event a line, parsed as it comes, kept in
 * chunks under max_memory like a recording (spilled past it). The table, the events and the
 * exports of the loaded session are then those of the recording. Traces from other tools are
 * refused: their events lack the fields the workbench writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profiler_internal.h"

/* ---- strings that kernel kinds keep for the life of the process ------------------------------- */

static const char *lasting(const char *s) {
    static struct lasting_str {
        struct lasting_str *next;
        char s[];
    } *head;
    if (!s || !*s) return NULL;
    for (struct lasting_str *l = head; l; l = l->next)
        if (!strcmp(l->s, s)) return l->s;
    size_t n = strlen(s) + 1;
    struct lasting_str *l = malloc(sizeof *l + n);
    if (!l) return NULL;
    memcpy(l->s, s, n);
    l->next = head, head = l;
    return l->s;
}

/* ---- a small JSON reader for one event object --------------------------------------------------- */

typedef struct jp {
    const char *s;
    int bad;
} jp;

static void ws(jp *j) {
    while (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r')
        j->s++;
}

static int eat(jp *j, char c) {
    ws(j);
    if (*j->s != c) return 0;
    j->s++;
    return 1;
}

/* A string into buf (escapes decoded; \u to UTF-8); 0 when it is not one. */
static int jstring(jp *j, char *buf, size_t len) {
    ws(j);
    if (*j->s != '"') return j->bad = 1, 0;
    j->s++;
    size_t n = 0;
    while (*j->s && *j->s != '"') {
        unsigned c = (unsigned char)*j->s++;
        if (c == '\\') {
            char e = *j->s++;
            if (e == 'n') c = '\n';
            else if (e == 't') c = '\t';
            else if (e == 'r') c = '\r';
            else if (e == 'b') c = '\b';
            else if (e == 'f') c = '\f';
            else if (e == 'u') {
                unsigned v = 0;
                for (int k = 0; k < 4; k++) {
                    char h = *j->s++;
                    v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 :
                                            h >= 'A' && h <= 'F' ? h - 'A' + 10 : 0);
                }
                char u[3];
                int un = v < 0x80 ? (u[0] = (char)v, 1) :
                         v < 0x800 ? (u[0] = (char)(0xC0 | v >> 6), u[1] = (char)(0x80 | (v & 63)), 2) :
                         (u[0] = (char)(0xE0 | v >> 12), u[1] = (char)(0x80 | ((v >> 6) & 63)),
                          u[2] = (char)(0x80 | (v & 63)), 3);
                for (int k = 0; k < un; k++)
                    if (n + 1 < len) buf[n++] = u[k];
                continue;
            } else if (e) c = (unsigned char)e;
            else break;
        }
        if (n + 1 < len) buf[n++] = (char)c;
    }
    if (*j->s != '"') return j->bad = 1, 0;
    j->s++;
    buf[n] = '\0';
    return 1;
}

static double jnumber(jp *j) {
    ws(j);
    char *end;
    double v = strtod(j->s, &end);
    if (end == j->s) {
        if (!strncmp(j->s, "null", 4)) return j->s += 4, 0;
        return j->bad = 1, 0;
    }
    j->s = end;
    return v;
}

/* Microseconds with up to three decimals as exact ns (what the writer prints from ns). */
static int64_t jmicros(jp *j) {
    ws(j);
    int neg = *j->s == '-';
    if (neg) j->s++;
    int64_t whole = 0, frac = 0;
    int digits = 0;
    if (*j->s < '0' || *j->s > '9') return j->bad = 1, 0;
    while (*j->s >= '0' && *j->s <= '9')
        whole = whole * 10 + (*j->s++ - '0');
    if (*j->s == '.') {
        j->s++;
        while (*j->s >= '0' && *j->s <= '9') {
            if (digits < 3) frac = frac * 10 + (*j->s - '0'), digits++;
            j->s++;
        }
    }
    for (; digits < 3; digits++)
        frac *= 10;
    int64_t ns = whole * 1000 + frac;
    return neg ? -ns : ns;
}

/* Skips any value. */
static void jskip(jp *j) {
    ws(j);
    char c = *j->s;
    if (c == '"') {
        j->s++;
        while (*j->s && *j->s != '"')
            j->s += *j->s == '\\' && j->s[1] ? 2 : 1;
        if (*j->s == '"') j->s++;
        else j->bad = 1;
    } else if (c == '{' || c == '[') {
        int depth = 0;
        do {
            if (*j->s == '"') {
                jskip(j);
                continue;
            }
            if (*j->s == '{' || *j->s == '[') depth++;
            if (*j->s == '}' || *j->s == ']') depth--;
            if (!*j->s) return (void)(j->bad = 1);
            j->s++;
        } while (depth > 0);
    } else {
        while (*j->s && *j->s != ',' && *j->s != '}' && *j->s != ']')
            j->s++;
    }
}

/* An array of integers (at most max; more are skipped): how many. */
static int jints(jp *j, int64_t *v, int max) {
    int n = 0;
    if (!eat(j, '[')) return j->bad = 1, 0;
    if (eat(j, ']')) return 0;
    do {
        double x = jnumber(j);
        if (n < max) v[n++] = (int64_t)x;
    } while (eat(j, ','));
    if (!eat(j, ']')) j->bad = 1;
    return n;
}

/* ---- one event ------------------------------------------------------------------------------- */

typedef struct parsed {
    char ph[4], cat[16], name[512], src[512], op[64], ops[256], api[32], isa[32], tile[24], layout[8],
        epilogue[WB_EPILOGUE_MAX];
    int64_t pid, tid, ts, dur;
    int64_t id, correlation, parent, threads, kernel, thread, cbid;
    double flops, bytes, work, run_delay, allocated;
    int has_flops, failed, has_run_delay;
    int ninputs, nflow, ndims[WB_EVENT_MAX_INPUTS], dtype[WB_EVENT_MAX_INPUTS];
    int n_in_stride, n_out_shape, n_out_stride, geometry;
    /* filled as far as the counts above say: not cleared between events */
    int64_t flow[WB_EVENT_MAX_INPUTS + 1], in_stride[WB_MAX_DIMS], out_shape[WB_MAX_DIMS], out_stride[WB_MAX_DIMS];
    int64_t dims[WB_EVENT_MAX_INPUTS][WB_MAX_DIMS];
} parsed;

static void parse_args(jp *j, parsed *e) {
    char key[32], tmp[64];
    if (!eat(j, '{')) return (void)(j->bad = 1);
    if (eat(j, '}')) return;
    do {
        if (!jstring(j, key, sizeof key) || !eat(j, ':')) return (void)(j->bad = 1);
        if (!strcmp(key, "id")) e->id = (int64_t)jnumber(j);
        else if (!strcmp(key, "correlation")) e->correlation = (int64_t)jnumber(j);
        else if (!strcmp(key, "parent")) e->parent = (int64_t)jnumber(j);
        else if (!strcmp(key, "flops")) e->flops = jnumber(j), e->has_flops = 1;
        else if (!strcmp(key, "bytes")) e->bytes = jnumber(j), e->has_flops = 1;
        else if (!strcmp(key, "threads")) e->threads = (int64_t)jnumber(j);
        else if (!strcmp(key, "kernel")) e->kernel = (int64_t)jnumber(j);
        else if (!strcmp(key, "thread")) e->thread = (int64_t)jnumber(j);
        else if (!strcmp(key, "work")) e->work = jnumber(j);
        else if (!strcmp(key, "cbid")) e->cbid = (int64_t)jnumber(j);
        else if (!strcmp(key, "run_delay_ns")) e->run_delay = jnumber(j), e->has_run_delay = 1;
        else if (!strcmp(key, "allocated_bytes")) e->allocated = jnumber(j);
        else if (!strcmp(key, "op")) jstring(j, e->op, sizeof e->op);
        else if (!strcmp(key, "ops")) jstring(j, e->ops, sizeof e->ops);
        else if (!strcmp(key, "api")) jstring(j, e->api, sizeof e->api);
        else if (!strcmp(key, "isa")) jstring(j, e->isa, sizeof e->isa);
        else if (!strcmp(key, "tile")) jstring(j, e->tile, sizeof e->tile);
        else if (!strcmp(key, "layout")) jstring(j, e->layout, sizeof e->layout);
        else if (!strcmp(key, "epilogue")) jstring(j, e->epilogue, sizeof e->epilogue);
        else if (!strcmp(key, "src")) jstring(j, e->src, sizeof e->src);
        else if (!strcmp(key, "failed")) e->failed = (ws(j), !strncmp(j->s, "true", 4)), jskip(j);
        else if (!strcmp(key, "flow")) e->nflow = jints(j, e->flow, WB_EVENT_MAX_INPUTS + 1);
        else if (!strcmp(key, "in_stride")) e->n_in_stride = jints(j, e->in_stride, WB_MAX_DIMS), e->geometry = 1;
        else if (!strcmp(key, "out_shape")) e->n_out_shape = jints(j, e->out_shape, WB_MAX_DIMS);
        else if (!strcmp(key, "out_stride")) e->n_out_stride = jints(j, e->out_stride, WB_MAX_DIMS);
        else if (!strcmp(key, "input_shapes")) {
            if (!eat(j, '[')) return (void)(j->bad = 1);
            if (!eat(j, ']')) {
                do {
                    ws(j);
                    int i = e->ninputs;
                    if (!strncmp(j->s, "null", 4)) {
                        j->s += 4;
                        if (i < WB_EVENT_MAX_INPUTS) e->ndims[i] = -1, e->ninputs++;
                    } else {
                        int64_t d[WB_MAX_DIMS];
                        int n = jints(j, d, WB_MAX_DIMS);
                        if (i < WB_EVENT_MAX_INPUTS) {
                            e->ndims[i] = n, e->ninputs++;
                            memcpy(e->dims[i], d, (size_t)n * sizeof *d);
                        }
                    }
                } while (eat(j, ','));
                if (!eat(j, ']')) j->bad = 1;
            }
        } else if (!strcmp(key, "input_dtypes")) {
            int i = 0;
            if (!eat(j, '[')) return (void)(j->bad = 1);
            if (!eat(j, ']')) {
                do {
                    jstring(j, tmp, sizeof tmp);
                    wb_dtype dt;
                    if (i < WB_EVENT_MAX_INPUTS) e->dtype[i] = tmp[0] && wb_dtype_parse(tmp, &dt) == WB_OK ? (int)dt : 0;
                    i++;
                } while (eat(j, ','));
                if (!eat(j, ']')) j->bad = 1;
            }
        } else jskip(j);
    } while (!j->bad && eat(j, ','));
    if (!eat(j, '}')) j->bad = 1;
}

static int parse_event(const char *line, parsed *e) {
    jp j = {.s = line};
    char key[16];
    e->ph[0] = e->cat[0] = e->name[0] = e->src[0] = e->op[0] = e->ops[0] = e->api[0] = '\0';
    e->isa[0] = e->tile[0] = e->layout[0] = e->epilogue[0] = '\0';
    memset(&e->pid, 0, offsetof(parsed, flow) - offsetof(parsed, pid));
    if (!eat(&j, '{')) return 0;
    do {
        if (!jstring(&j, key, sizeof key) || !eat(&j, ':')) return 0;
        if (!strcmp(key, "ph")) jstring(&j, e->ph, sizeof e->ph);
        else if (!strcmp(key, "cat")) jstring(&j, e->cat, sizeof e->cat);
        else if (!strcmp(key, "name")) jstring(&j, e->name, sizeof e->name);
        else if (!strcmp(key, "pid")) e->pid = (int64_t)jnumber(&j);
        else if (!strcmp(key, "tid")) e->tid = (int64_t)jnumber(&j);
        else if (!strcmp(key, "ts")) e->ts = jmicros(&j);
        else if (!strcmp(key, "dur")) e->dur = jmicros(&j);
        else if (!strcmp(key, "args")) parse_args(&j, e);
        else jskip(&j);
    } while (!j.bad && eat(&j, ','));
    return !j.bad && eat(&j, '}');
}

static int kind_of(const char *cat) {
    for (int k = 0; k <= WB_EV_MEMSET; k++)
        if (!strcmp(cat, wb_event_kind_name(k))) return k;
    return -1;
}

static int api_of(const char *name) {
    for (int a = WB_API_UNKNOWN; a <= WB_API_GRAPH_LAUNCH; a++)
        if (!strcmp(name, wb_event_api_name(a))) return a;
    return WB_API_UNKNOWN;
}

/* A kernel's kind from its args: named as the trace names it, with the fields the trace carries
 * (op, isa, tile, layout, epilogue), so the rules read the same data as on the recording. */
static const wb_kernel_kind *kind_from(const parsed *x) {
    wb_kernel_kind key = {.external = x->name, .op = lasting(x->op), .ops = lasting(x->ops), .isa = lasting(x->isa)};
    if (x->tile[0] && sscanf(x->tile, "%dx%d", &key.tile_m, &key.tile_n) != 2) key.tile_m = key.tile_n = 0;
    snprintf(key.layout, sizeof key.layout, "%.2s", x->layout);
    for (int bias = 0; bias <= 1 && x->epilogue[0]; bias++)
        for (int act = 0; act < WB_ACT_COUNT; act++) {
            wb_kernel_kind probe = {.bias = bias, .act = (wb_activation)act, .tile_m = key.tile_m, .ops = key.ops};
            char epi[WB_EPILOGUE_MAX];
            if (!strcmp(wb_kernel_kind_epilogue(&probe, epi, sizeof epi), x->epilogue)) {
                key.bias = bias, key.act = (wb_activation)act;
                bias = 2;
                break;
            }
        }
    return wb_kernel_kind_intern(&key);
}

/* Appends the parsed event to the store; 0 when it is not one the workbench writes. */
static int append(wb_prof *p, const parsed *x) {
    int kind = kind_of(x->cat);
    int memory = !strcmp(x->ph, "C") && !strncmp(x->name, "memory ", 7);
    if (memory) kind = WB_EV_MEMORY;
    else if (strcmp(x->ph, "X") || kind < 0) return 1; /* metadata, flow arrows, findings: not events */
    int64_t side_buf[FRAME_SIDE];
    uint32_t n = 0;
    uint8_t meta[WB_EVENT_MAX_INPUTS] = {0};
    for (int i = 0; i < x->ninputs; i++) {
        for (int k = 0; k < x->ndims[i]; k++)
            side_buf[n++] = x->dims[i][k];
        meta[i] = (uint8_t)((x->ndims[i] + 1) | (x->dtype[i] << 4));
    }
    for (int i = 0; i < x->nflow; i++)
        side_buf[n++] = x->flow[i];
    int geometry = x->geometry && x->nflow && x->ninputs;
    if (geometry) {
        for (int k = 0; k < x->n_in_stride; k++)
            side_buf[n++] = x->in_stride[k];
        side_buf[n] = x->n_out_shape;
        for (int k = 0; k < WB_MAX_DIMS; k++) {
            side_buf[n + 1 + k] = k < x->n_out_shape ? x->out_shape[k] : 0;
            side_buf[n + 1 + WB_MAX_DIMS + k] = k < x->n_out_stride ? x->out_stride[k] : 0;
        }
        n += 1 + 2 * WB_MAX_DIMS;
    }
    int64_t *side = NULL;
    wb_event *e = n ? slot_side(p, n, &side) : slot(p);
    if (!e) return 1; /* counted as dropped by the store */
    if (side) memcpy(side, side_buf, n * sizeof *side);
    /* lanes: pid 0 host, pid 1 the cpu device (tid 0) and its workers (tid t: worker t-1), pid 2 cuda */
    int lane = x->pid == 0 ? WB_LANE_HOST : x->pid == 2 ? WB_LANE_CUDA :
               x->tid > 0 ? WB_LANE_CPU_THREAD0 + (int)x->tid - 1 : WB_LANE_CPU_DEVICE;
    if (lane > 255) lane = 255;
    wb_event ev = {.ts_ns = x->ts, .dur_ns = x->dur, .src = WB_EVENT_NONE, .kind = (uint8_t)kind, .lane = (uint8_t)lane};
    if (memory) {
        ev.ts_ns = x->ts, ev.dur_ns = 0;
        ev.name = "memory"; /* the trace keeps the bytes live after it, not the call */
        ev.live_bytes = x->allocated;
        wb_device d = WB_DEVICE_CPU;
        wb_device_parse(x->name + 7, &d);
        ev.device = (uint16_t)d;
    } else if (kind == WB_EV_KERNEL || kind == WB_EV_THREAD) {
        ev.kernel = kind_from(x);
    } else if (kind == WB_EV_STEP) {
        ev.name = "ProfileStep";
    } else {
        ev.name = wb_store_string(p, wb_store_intern(p, x->name));
    }
    ev.id = (uint32_t)x->id;
    ev.link = (uint32_t)(kind == WB_EV_KERNEL ? x->correlation : kind == WB_EV_THREAD ? x->kernel : x->parent);
    if (kind == WB_EV_STEP) { /* "ProfileStep#N" */
        const char *hash = strchr(x->name, '#');
        ev.id = hash ? (uint32_t)strtoul(hash + 1, NULL, 10) : 0;
    }
    if (kind == WB_EV_THREAD) ev.work = x->work, ev.threads = (uint16_t)x->thread;
    else if (kind == WB_EV_RANGE || kind == WB_EV_STEP) ev.run_delay_ns = x->has_run_delay ? x->run_delay : -1;
    else if (!memory) ev.flops = x->flops;
    if (!memory) ev.bytes = (float)x->bytes;
    if (kind == WB_EV_KERNEL) ev.threads = (uint16_t)x->threads;
    if (kind == WB_EV_RUNTIME) ev.cbid = (uint16_t)x->cbid, ev.api = (uint8_t)api_of(x->api);
    if (x->src[0]) ev.src = wb_store_intern(p, x->src);
    ev.shape_off = side ? (uint32_t)(side - wb_chunk_of(e)->side) : 0;
    ev.ninputs = (uint8_t)x->ninputs;
    memcpy(ev.in_meta, meta, sizeof meta);
    ev.nflow = (uint8_t)x->nflow;
    ev.geometry = (uint8_t)geometry;
    ev.failed = (uint8_t)x->failed;
    *e = ev;
    if (ev.id > p->next_id && kind != WB_EV_STEP) p->next_id = ev.id;
    if (lane == WB_LANE_CUDA && kind == WB_EV_KERNEL) p->cuda_lane = 1;
    return 1;
}

/* Reads a line of any length into *buf; 0 at the end. */
static int read_line(gzFile g, char **buf, size_t *cap) {
    size_t n = 0;
    for (;;) {
        if (*cap - n < 2) {
            size_t c = *cap ? *cap * 2 : 1 << 16;
            char *q = realloc(*buf, c);
            if (!q) return 0;
            *buf = q, *cap = c;
        }
        if (!gzgets(g, *buf + n, (int)(*cap - n))) return n > 0;
        n += strlen(*buf + n);
        if (n > 0 && (*buf)[n - 1] == '\n') return 1;
    }
}

/* Appends s to the growing string *buf. */
static int keep(char **buf, size_t *n, const char *s) {
    size_t len = strlen(s);
    char *q = realloc(*buf, *n + len + 1);
    if (!q) return 0;
    memcpy(q + *n, s, len + 1);
    *buf = q, *n += len;
    return 1;
}

wb_status wb_prof_load_chrome(const char *path, const wb_prof_options *opts, wb_prof **out, uint64_t *lines_out,
                              char **header, char **tail) {
    *out = NULL;
    *header = *tail = NULL;
    size_t header_n = 0, tail_n = 0;
    gzFile g = gzopen(path, "rb"); /* a plain file reads through as it is */
    if (!g) return wb_error(WB_ERR_ARGUMENT, "load_trace: cannot open '%s'", path);
    gzbuffer(g, 1 << 17);
    wb_prof *p;
    wb_status st = wb_prof_new(opts, &p);
    if (st != WB_OK) return gzclose(g), st;
    char *line = NULL;
    size_t cap = 0;
    uint64_t lineno = 0;
    int workbench = 0;
    while (read_line(g, &line, &cap)) {
        lineno++;
        if (lineno == 1) {
            /* the writer's own layout: otherData on the first line, which opens traceEvents;
             * then one event a line (a trace rewritten by another tool is not read here) */
            size_t n = strlen(line);
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                n--;
            workbench = strstr(line, "\"producer\": \"workbench\"") != NULL && n >= 16 &&
                        !strncmp(line + n - 16, "\"traceEvents\": [", 16);
            if (!workbench) break;
            if (!keep(header, &header_n, line)) break;
            continue;
        }
        if (tail_n || line[0] == ']') { /* the closing lines: the members after traceEvents */
            if (!keep(tail, &tail_n, line)) break;
            continue;
        }
        if (strncmp(line, "{\"ph\"", 5)) continue;
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ',' || line[n - 1] == '\r'))
            line[--n] = '\0';
        parsed x;
        if (!parse_event(line, &x) || !append(p, &x)) {
            st = wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' line %llu is not an event the workbench writes", path,
                          (unsigned long long)lineno);
            break;
        }
    }
    int gz_err;
    const char *zmsg = gzerror(g, &gz_err);
    if (st == WB_OK && gz_err != Z_OK && gz_err != Z_STREAM_END)
        st = wb_error(WB_ERR_ARGUMENT, "load_trace: reading '%s' failed: %s", path, zmsg);
    if (st == WB_OK && lineno == 0) st = wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' is empty, not a trace", path);
    if (st == WB_OK && !workbench)
        st = wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' was not written by the workbench's export (its first line "
                                       "has no otherData.producer = \"workbench\" opening traceEvents)", path);
    if (st == WB_OK) { /* the export ends with the lines that close traceEvents and the document */
        size_t n = tail_n;
        while (n > 0 && (*tail)[n - 1] && strchr(" \t\r\n", (*tail)[n - 1]))
            n--;
        if (n == 0 || (*tail)[n - 1] != '}')
            st = wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' is truncated: it ends before traceEvents and the "
                                           "document are closed (an export cut short?)", path);
    }
    free(line);
    gzclose(g);
    if (st != WB_OK) {
        wb_prof_free(p);
        free(*header), free(*tail);
        *header = *tail = NULL;
        return st;
    }
    if (lines_out) *lines_out = lineno;
    *out = p;
    return WB_OK;
}
