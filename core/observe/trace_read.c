/* trace_read.c: a Chrome trace read into a session's store in one streaming pass (plain or gzip
 * through zlib, told apart by content): events parsed as they come, kept in chunks under
 * max_memory like a recording (spilled past it). A trace the workbench wrote gives back its
 * recording; one another tool wrote (torch.profiler's Kineto JSON, the legacy bare array, any
 * Chrome trace) goes event by event through the importer (trace_import.c), which maps its fields
 * onto the same events. The format is told from the content, never the file's name. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "keyindex.h"
#include "profiler_internal.h"
#include "trace_import.h"
#include <wb/trace_record.h>
#include <wb/trace_schema.h>
#include "trace_json.h"

/* ---- one event ------------------------------------------------------------------------------- */


/* input_shapes: [[dims], null (an absent input), ...] */
static void parse_shapes(jp *j, wb_trace_event *e) {
    if (!jp_eat(j, '[')) return (void)(j->bad = 1);
    if (jp_eat(j, ']')) return;
    do {
        jp_ws(j);
        int i = e->ninputs;
        if (!strncmp(j->s, "null", 4)) {
            j->s += 4;
            if (i < WB_EVENT_MAX_INPUTS) e->ndims[i] = -1, e->ninputs++;
        } else {
            int64_t d[WB_MAX_DIMS];
            int n = jp_ints(j, d, WB_MAX_DIMS);
            if (i < WB_EVENT_MAX_INPUTS) {
                e->ndims[i] = n, e->ninputs++;
                memcpy(e->dims[i], d, (size_t)n * sizeof *d);
            }
        }
    } while (jp_eat(j, ','));
    if (!jp_eat(j, ']')) j->bad = 1;
}

/* input_dtypes: ["f32", "" (an absent input), ...] */
static void parse_dtypes(jp *j, wb_trace_event *e) {
    char tmp[64];
    int i = 0;
    if (!jp_eat(j, '[')) return (void)(j->bad = 1);
    if (jp_eat(j, ']')) return;
    do {
        jp_string(j, tmp, sizeof tmp);
        wb_dtype dt;
        if (i < WB_EVENT_MAX_INPUTS) e->dtype[i] = tmp[0] && wb_dtype_parse(tmp, &dt) == WB_OK ? (int)dt : 0;
        i++;
    } while (jp_eat(j, ','));
    if (!jp_eat(j, ']')) j->bad = 1;
}

/* One value into the field's member, as the schema types it (wb/trace_schema.h). */
static void parse_field(jp *j, wb_trace_event *e, const wb_trace_field *f) {
    void *at = wb_trace_field_at(e, f);
    switch (f->type) {
    case WB_TT_STR: jp_string(j, at, f->size); break;
    case WB_TT_INT: *(int64_t *)at = jp_int(j); break;
    case WB_TT_NUM:
    case WB_TT_COUNT: *(double *)at = jp_number(j); break;
    case WB_TT_MICROS: *(int64_t *)at = jp_micros(j); break;
    case WB_TT_BOOL: *(int *)at = (jp_ws(j), !strncmp(j->s, "true", 4)), jp_skip(j); break;
    case WB_TT_INTS:
        *(int *)((char *)e + f->count_offset) = jp_ints(j, at, (int)(f->size / sizeof(int64_t)));
        break;
    case WB_TT_SHAPES: parse_shapes(j, e); break;
    case WB_TT_DTYPES: parse_dtypes(j, e); break;
    }
    wb_trace_field_seen(e, f);
}

/* What the reader takes: the fields of the events a store keeps, and a lane's name from its
 * metadata; launch arrows and sort indexes are for viewers (skipped, whatever their values). */
static const wb_trace_field *wanted(int place, const char *key) {
    const wb_trace_field *f = wb_trace_field_find(place, key);
    return f && (f->kinds || f == &wb_trace_fields[WB_TF_META_NAME]) ? f : NULL;
}

static void parse_args(jp *j, wb_trace_event *e) {
    char key[32];
    if (!jp_eat(j, '{')) return (void)(j->bad = 1);
    if (jp_eat(j, '}')) return;
    do {
        if (!jp_string(j, key, sizeof key) || !jp_eat(j, ':')) return (void)(j->bad = 1);
        const wb_trace_field *f = wanted(WB_TP_ARGS, key);
        if (f) parse_field(j, e, f);
        else jp_skip(j);
    } while (!j->bad && jp_eat(j, ','));
    if (!jp_eat(j, '}')) j->bad = 1;
}

static int parse_event(const char *line, wb_trace_event *e) {
    jp j = {.s = line};
    char key[16];
    wb_trace_event_clear(e);
    if (!jp_eat(&j, '{')) return 0;
    do {
        if (!jp_string(&j, key, sizeof key) || !jp_eat(&j, ':')) return 0;
        const wb_trace_field *f = wanted(WB_TP_TOP, key);
        if (f) parse_field(&j, e, f);
        else if (!strcmp(key, "args")) parse_args(&j, e);
        else jp_skip(&j);
    } while (!j.bad && jp_eat(&j, ','));
    /* times, counts and sizes the workbench never writes negative (bytes are, for a free: a memory
     * event's bytes are signed); a count it does not know is written null, read as NaN, and passes */
    return !j.bad && jp_eat(&j, '}') && e->dur >= 0 && !(e->flops < 0) && !(e->work < 0) &&
           !(e->run_delay < 0) && (!(e->bytes < 0) || !strcmp(e->cat, wb_event_kind_name(WB_EV_MEMORY)));
}

/* ---- the document, streamed ------------------------------------------------------------------ */

/* What a trace may make the reader hold or do, whoever wrote it (docs/profiler.md, "Reading a
 * trace back"): one event, the members beside traceEvents together, the nesting of a value, and
 * the bytes read (inflated) since the last event, so that a file of padding, an endless value or
 * a bomb of zeros ends in a one-line error, not in memory or time without bound. */
#define TRACE_MAX_EVENT ((size_t)1 << 20)
#define TRACE_MAX_MEMBERS ((size_t)64 << 20)
#define TRACE_MAX_DEPTH 64
#define TRACE_MAX_IDLE ((uint64_t)256 << 20)
/* What a refusal says the workbench reads. */
#define TRACE_READS                                                                                                   \
    "the workbench reads Chrome traces, .json or .json.gz: its own, torch.profiler's (Kineto JSON, a TensorBoard "    \
    "trace folder, the legacy array) and any other tool's"

typedef struct src {
    gzFile g;
    size_t at, n;
    uint64_t line, since_event;
    int eof, nul, idle;
    unsigned char buf[1 << 16];
} src;

/* The next byte without taking it, or -1 at the end; a NUL byte ends the document, marked. */
static int peek_byte(src *r) {
    if (r->at == r->n) {
        if (r->eof) return -1;
        int got = gzread(r->g, r->buf, sizeof r->buf);
        if (got <= 0) return r->eof = 1, -1;
        r->at = 0, r->n = (size_t)got;
    }
    int c = r->buf[r->at];
    if (c == 0) return r->nul = r->eof = 1, r->at = r->n, -1;
    return c;
}

/* The next byte, taken; too many bytes since the last event end the document too, marked. */
static int next_byte(src *r) {
    int c = peek_byte(r);
    if (c < 0) return -1;
    if (++r->since_event > TRACE_MAX_IDLE) return r->idle = r->eof = 1, r->at = r->n, -1;
    r->at++;
    if (c == '\n') r->line++;
    return c;
}

static int skip_ws(src *r) {
    int c;
    while ((c = peek_byte(r)) == ' ' || c == '\t' || c == '\n' || c == '\r')
        next_byte(r);
    return c;
}

typedef struct text {
    char *s;
    size_t n, cap, max;
} text;

static int put(text *t, int c) {
    if (t->n + 2 > t->cap) {
        if (t->n + 2 > t->max) return 0;
        size_t cap = t->cap ? t->cap * 2 : 4096;
        if (cap > t->max) cap = t->max;
        char *q = realloc(t->s, cap);
        if (!q) return 0;
        t->s = q, t->cap = cap;
    }
    t->s[t->n++] = (char)c;
    t->s[t->n] = '\0';
    return 1;
}

static int puts_(text *t, const char *s) {
    for (; *s; s++)
        if (!put(t, *s)) return 0;
    return 1;
}

enum { COPY_OK, COPY_END, COPY_SYNTAX, COPY_LONG, COPY_DEEP };

/* The rest of a string whose opening quote was copied: escapes kept, raw control bytes refused. */
static int copy_string_rest(src *r, text *t) {
    for (;;) {
        int c = next_byte(r);
        if (c < 0) return COPY_END;
        if (c < 0x20) return COPY_SYNTAX;
        if (!put(t, c)) return COPY_LONG;
        if (c == '"') return COPY_OK;
        if (c == '\\') {
            if ((c = next_byte(r)) < 0) return COPY_END;
            if (c < 0x20) return COPY_SYNTAX;
            if (!put(t, c)) return COPY_LONG;
        }
    }
}

/* Copies one JSON value's bytes into t, white space outside strings dropped; checks its
 * strings and nesting, not its grammar (parse_event and cjson do that). */
static int copy_value(src *r, text *t) {
    int c = skip_ws(r);
    if (c < 0) return COPY_END;
    next_byte(r);
    if (!put(t, c)) return COPY_LONG;
    if (c == '"') return copy_string_rest(r, t);
    if (c == '{' || c == '[') {
        for (int depth = 1; depth > 0;) {
            if ((c = next_byte(r)) < 0) return COPY_END;
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
            if (!put(t, c)) return COPY_LONG;
            if (c == '"') {
                int why = copy_string_rest(r, t);
                if (why != COPY_OK) return why;
            } else if (c == '{' || c == '[') {
                if (++depth > TRACE_MAX_DEPTH) return COPY_DEEP;
            } else if (c == '}' || c == ']')
                depth--;
        }
        return COPY_OK;
    }
    if (c == '}' || c == ']' || c == ',' || c == ':') return COPY_SYNTAX;
    while ((c = peek_byte(r)) > 0 && !strchr(",]}: \t\r\n", c)) { /* a number, true, false or null */
        next_byte(r);
        if (!put(t, c)) return COPY_LONG;
    }
    return COPY_OK;
}

/* otherData's "producer", read from the member's text ("producer": "workbench" at its top). */
static int produced_by_workbench(const char *other) {
    jp j = {.s = other};
    char key[32], val[32];
    if (!jp_eat(&j, '{') || jp_eat(&j, '}')) return 0;
    do {
        if (!jp_string(&j, key, sizeof key) || !jp_eat(&j, ':')) return 0;
        if (!strcmp(key, "producer")) return jp_string(&j, val, sizeof val) && !strcmp(val, "workbench");
        jp_skip(&j);
    } while (!j.bad && jp_eat(&j, ','));
    return 0;
}

static wb_status trace_error(const char *path, uint64_t line, const char *what) {
    return wb_error(WB_ERR_ARGUMENT, "load_trace: '%s', line %llu: %s", path, (unsigned long long)line + 1, what);
}

/* Why a value could not be copied, said of `what`. */
static wb_status copy_error(const char *path, const src *r, int why, const char *what) {
    char msg[240];
    if (r->idle)
        snprintf(msg, sizeof msg, "256 MiB read without an event: not a trace the workbench wrote (padding?)");
    else if (r->nul)
        snprintf(msg, sizeof msg, "a NUL byte: the file is not JSON text");
    else
        snprintf(msg, sizeof msg, "%s %s", what,
                 why == COPY_LONG   ? "is longer than the reader takes (1 MiB an event, 64 MiB for the members "
                                      "beside traceEvents)"
                 : why == COPY_DEEP ? "nests deeper than 64 levels"
                 : why == COPY_END  ? "is cut short: the trace is truncated (the file ends inside it)"
                                    : "is not JSON (a bracket, string or control character out of place)");
    return trace_error(path, r->line, msg);
}

/* Whose events these are: told by the members before traceEvents (otherData's producer, Kineto's
 * schemaVersion ...), else by the first event that is not metadata. */
enum { MODE_UNKNOWN, MODE_WORKBENCH, MODE_FOREIGN };
typedef struct doc {
    int mode, memory_slices;
    wb_import *im;
} doc;

static int mode_of(const char *text, wb_trace_event *x) {
    if (!parse_event(text, x)) return MODE_FOREIGN; /* a string pid, say: not the workbench's */
    if (!strcmp(x->ph, "M") || !x->ph[0]) return MODE_UNKNOWN;
    if (!strcmp(x->ph, "C") && !strncmp(x->name, "memory ", 7)) return MODE_WORKBENCH;
    return wb_trace_kind_of(x->cat) >= 0 && x->pid >= 0 && x->pid <= 2 ? MODE_WORKBENCH : MODE_FOREIGN;
}

/* The elements of the event list, each parsed and appended; r stands after the '['. */
static wb_status read_events(const char *path, src *r, wb_prof *p, text *ev, doc *d) {
    int c = skip_ws(r);
    if (c == ']') return next_byte(r), WB_OK;
    for (;;) {
        ev->n = 0;
        skip_ws(r); /* (the line is the event's, not the comma's before it) */
        uint64_t line = r->line;
        int why = copy_value(r, ev);
        if (why != COPY_OK) return copy_error(path, r, why, "an event");
        wb_trace_event x;
        if (ev->s[0] != '{') return trace_error(path, line, "the event list holds something that is not an event object");
        if (d->mode == MODE_UNKNOWN) d->mode = mode_of(ev->s, &x);
        int ok = d->mode == MODE_WORKBENCH ? parse_event(ev->s, &x) && wb_trace_event_append(p, &x, &d->memory_slices)
                 : d->mode == MODE_FOREIGN ? wb_import_event(d->im, p, ev->s)
                                           : 1; /* metadata before the first event that tells */
        const char *reason = !ok && d->mode == MODE_FOREIGN ? wb_import_why(d->im) : NULL;
        if (reason) return trace_error(path, line, reason);
        if (!ok)
            return trace_error(path, line, d->mode == MODE_WORKBENCH
                                               ? "not an event the workbench writes (a field of the wrong type, a bad "
                                                 "\\u escape or a number out of range)"
                                               : "not an event the workbench writes, nor one torch.profiler writes (a "
                                                 "field of the wrong type, a bad \\u escape or a number out of range)");
        r->since_event = 0;
        c = skip_ws(r);
        next_byte(r);
        if (c == ']') return WB_OK;
        if (c != ',')
            return c < 0 ? copy_error(path, r, COPY_END, "the event list")
                         : trace_error(path, r->line, "the event list has no comma between two events");
    }
}

/* The document's members after its '{': traceEvents read into p, otherData kept in *other, the
 * others appended to *members as "name":value. */
static wb_status read_members(const char *path, src *r, wb_prof *p, text *members, text *other, int *has_events,
                              doc *d) {
    text ev = {.max = TRACE_MAX_EVENT}, key = {.max = 256};
    wb_status st = WB_OK;
    if (skip_ws(r) == '}') return next_byte(r), WB_OK;
    for (;;) {
        char name[256];
        key.n = 0;
        int why = skip_ws(r) == '"' ? copy_value(r, &key) : COPY_SYNTAX;
        jp kj = {.s = key.s};
        if (why != COPY_OK || !jp_string(&kj, name, sizeof name)) {
            st = copy_error(path, r, why == COPY_LONG ? COPY_SYNTAX : why, "a member's name");
            break;
        }
        if (skip_ws(r) != ':') {
            st = trace_error(path, r->line, "a member of the document has no ':' after its name");
            break;
        }
        next_byte(r);
        if (!strcmp(name, "traceEvents")) {
            if (skip_ws(r) != '[') {
                st = trace_error(path, r->line, "traceEvents is not a list");
                break;
            }
            next_byte(r);
            if ((st = read_events(path, r, p, &ev, d)) != WB_OK) break;
            *has_events = 1;
        } else if (!strcmp(name, "otherData")) {
            other->n = 0;
            if ((why = copy_value(r, other)) != COPY_OK) {
                st = copy_error(path, r, why, "otherData");
                break;
            }
            if (d->mode == MODE_UNKNOWN && produced_by_workbench(other->s)) d->mode = MODE_WORKBENCH;
        } else if (!(members->n > 1 && !put(members, ',')) && puts_(members, key.s) && put(members, ':')) {
            if (d->mode == MODE_UNKNOWN && wb_import_kineto_member(name)) d->mode = MODE_FOREIGN;
            if ((why = copy_value(r, members)) != COPY_OK) {
                st = copy_error(path, r, why, "a member beside traceEvents");
                break;
            }
        } else {
            st = copy_error(path, r, COPY_LONG, "the members beside traceEvents");
            break;
        }
        int c = skip_ws(r);
        next_byte(r);
        if (c == '}') break;
        if (c != ',') {
            st = c < 0 ? copy_error(path, r, COPY_END, "the document")
                       : trace_error(path, r->line, "the document has no comma between two members");
            break;
        }
    }
    free(ev.s), free(key.s);
    return st;
}

wb_status wb_prof_load_chrome(const char *path, const wb_prof_options *opts, wb_prof **out, uint64_t *lines_out,
                              char **members_out) {
    *out = NULL;
    *members_out = NULL;
    /* a regular file only: a FIFO would block the open, a device (/dev/zero) never end */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return wb_error(WB_ERR_ARGUMENT, "load_trace: cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' is not a regular file (a folder, FIFO or device): a "
                                         "trace is a .json or .json.gz file", path);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    src *r = calloc(1, sizeof *r);
    gzFile g = r ? gzdopen(fd, "rb") : NULL; /* a plain file reads through as it is */
    if (!g) {
        free(r);
        close(fd);
        return wb_error(WB_ERR_MEMORY, "load_trace: out of memory opening '%s'", path);
    }
    r->g = g;
    gzbuffer(g, 1 << 17);
    wb_prof *p;
    wb_status st = wb_prof_new(opts, &p);
    if (st != WB_OK) return gzclose(g), free(r), st;
    text members = {.max = TRACE_MAX_MEMBERS}, other = {.max = TRACE_MAX_MEMBERS};
    int has_events = 0;
    doc d = {.mode = MODE_UNKNOWN, .im = wb_import_new()};
    if (!d.im) st = wb_error(WB_ERR_MEMORY, "load_trace: out of memory opening '%s'", path);
    put(&members, '{');
    int c = skip_ws(r);
    if (st == WB_OK && c == '{') {
        next_byte(r);
        st = read_members(path, r, p, &members, &other, &has_events, &d);
    } else if (st == WB_OK && c == '[') { /* the bare array: the legacy profiler's, or any tool's */
        next_byte(r);
        d.mode = MODE_FOREIGN, has_events = 1;
        wb_import_bare_array(d.im);
        text ev = {.max = TRACE_MAX_EVENT};
        st = read_events(path, r, p, &ev, &d);
        free(ev.s);
    }
    if (st == WB_OK && (c == '{' || c == '[') && skip_ws(r) >= 0)
        st = trace_error(path, r->line, "more follows the document's end (two documents, or padding)");
    if (st == WB_OK && (r->nul || r->idle)) st = copy_error(path, r, COPY_END, "the document");
    int gz_err;
    const char *zmsg = gzerror(g, &gz_err);
    int mine = other.n && produced_by_workbench(other.s);
    if (gz_err != Z_OK && gz_err != Z_STREAM_END && gz_err != Z_BUF_ERROR)
        st = wb_error(WB_ERR_ARGUMENT, "load_trace: reading '%s' failed: %s (a gzip file cut short or damaged)", path,
                      zmsg);
    else if (st == WB_OK && gz_err == Z_BUF_ERROR) /* the text parsed whole, the gzip stream did not end */
        st = wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' is a gzip file cut short: it ends before its gzip stream does "
                                       "(the checksum or more is missing), so the trace cannot be trusted whole", path);
    else if (st == WB_OK && c < 0)
        st = wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' is empty, not a trace (" TRACE_READS ")", path);
    else if (st == WB_OK && c != '{' && c != '[' && strchr("\"-0123456789tfn", c))
        st = wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' is JSON but not a trace: a bare value, not an object holding "
                                       "traceEvents nor a list of events (" TRACE_READS ")", path);
    else if (st == WB_OK && c != '{' && c != '[')
        st = wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' is not JSON text (it starts with %s): not a trace (" TRACE_READS
                                       ")", path, c >= 0x20 && c < 0x7f ? (char[]){'\'', (char)c, '\'', 0} : "a binary byte");
    else if (st == WB_OK && !has_events)
        st = wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' is JSON but not a trace: an object with no traceEvents list ("
                                       TRACE_READS ")", path);
    else if (st == WB_OK && d.mode == MODE_WORKBENCH && !mine)
        st = wb_error(WB_ERR_ARGUMENT, "load_trace: '%s' has the workbench's event kinds but no otherData.producer = "
                                       "\"workbench\": an edited trace, not one the workbench wrote", path);
    /* otherData goes back with the other members; a foreign trace's with what the importer found */
    if (st == WB_OK && d.mode == MODE_FOREIGN) wb_import_finish(d.im, p);
    char *summary = !mine && st == WB_OK ? wb_import_summary(d.im) : NULL;
    if (st == WB_OK && !mine && !summary) st = wb_error(WB_ERR_MEMORY, "load_trace: out of memory reading '%s'", path);
    if (st == WB_OK && other.n && !((members.n == 1 || put(&members, ',')) && puts_(&members, "\"otherData\":") &&
                                    puts_(&members, other.s)))
        st = copy_error(path, r, COPY_LONG, "the members beside traceEvents");
    if (st == WB_OK && summary && !((members.n == 1 || put(&members, ',')) && puts_(&members, "\"import\":") &&
                                    puts_(&members, summary)))
        st = copy_error(path, r, COPY_LONG, "the members beside traceEvents");
    if (st == WB_OK && !put(&members, '}')) st = copy_error(path, r, COPY_LONG, "the members beside traceEvents");
    free(summary);
    wb_import_free(d.im);
    uint64_t lines = r->line + 1;
    gzclose(g);
    free(r), free(other.s);
    if (st != WB_OK) {
        wb_prof_free(p);
        free(members.s);
        return st;
    }
    if (lines_out) *lines_out = lines;
    *members_out = members.s;
    *out = p;
    return WB_OK;
}
