/* profiler_store.c: where a session's events live. Fixed-size records in 2 MiB chunks; past
 * max_memory the oldest chunk is written to a spill file (unlinked at once, so nothing is left
 * behind by a kill -9), dropped (ring), or recording stops. Every event not kept is counted with
 * its cause. Also the interned strings (range names, call sites) and the cursor that reads the
 * chunks back in recording order. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "keyindex.h"
#include "profiler_internal.h"

_Static_assert(sizeof(wb_prof_chunk) == WB_CHUNK_BYTES, "a chunk fills its aligned block");
_Static_assert(offsetof(wb_prof_chunk, ev) % 64 == 0, "events start on a cache line");

const char *wb_prof_policy_name(int policy) {
    return policy == WB_PROF_RING ? "ring" : policy == WB_PROF_STOP ? "stop" : "spill";
}

/* ---- chunk memory: mmap'ed, aligned to its size, populated at once (no page faults billed to
 * the ops that fill it) ---------------------------------------------------------------------- */

static wb_prof_chunk *chunk_map(void) {
    size_t size = 2 * WB_CHUNK_BYTES;
    char *raw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uintptr_t at = ((uintptr_t)raw + WB_CHUNK_BYTES - 1) & ~(uintptr_t)(WB_CHUNK_BYTES - 1);
    if ((char *)at > raw) munmap(raw, (size_t)((char *)at - raw));
    char *end = raw + size, *chunk_end = (char *)at + WB_CHUNK_BYTES;
    if (end > chunk_end) munmap(chunk_end, (size_t)(end - chunk_end));
    madvise((void *)at, WB_CHUNK_BYTES, MADV_HUGEPAGE);
    memset((void *)at, 0, WB_CHUNK_BYTES); /* touch it now */
    return (wb_prof_chunk *)at;
}

static void chunk_unmap(wb_prof_chunk *c) {
    if (c) munmap(c, WB_CHUNK_BYTES);
}

/* Chunks of released sessions, kept for the next one (up to 32 MiB): a new session then records
 * into memory that is already mapped and touched, as the preallocated buffer of old was, instead
 * of taking page faults inside the ops it times. (Sessions live on the interpreter's thread.) */
#define POOL_CHUNKS 16
static wb_prof_chunk *pool[POOL_CHUNKS];
static int pooled;

static wb_prof_chunk *chunk_get(void) { return pooled ? pool[--pooled] : chunk_map(); }

static void chunk_put(wb_prof_chunk *c) {
    if (!c) return;
    if (pooled < POOL_CHUNKS)
        pool[pooled++] = c;
    else
        chunk_unmap(c);
}


void wb_store_init(wb_prof *p) {
    p->spill_fd = -1;
    p->ring_cut_ns = -1;
    p->drop_ts = p->drop_step = -1;
}

/* ---- drops --------------------------------------------------------------------------------- */

void wb_store_drop(wb_prof *p, int why, uint64_t n) {
    if (!n) return;
    if (!p->first_drop) {
        p->first_drop = why;
        p->drop_ts = wb_now_ns() - p->t0;
        p->drop_step = p->in_step ? p->step_no : -1;
        p->drop_index = p->sealed_events + (p->open ? (uint64_t)(p->cur - p->open->ev) : 0);
    }
    p->dropped += n;
    p->dropped_by[why] += n;
}

static const char *drop_cause(const wb_prof *p, int why, char *buf, size_t len) {
    switch (why) {
    case WB_DROP_MAX_EVENTS:
        snprintf(buf, len, "max_events (%lld) reached", (long long)p->o.max_events);
        break;
    case WB_DROP_STOP:
        snprintf(buf, len, "max_memory (%.0f MiB) reached with memory_policy \"stop\"",
                 (double)p->o.max_memory / 1048576);
        break;
    case WB_DROP_RING:
        snprintf(buf, len, "the oldest events left the ring (max_memory %.0f MiB, memory_policy \"ring\")",
                 (double)p->o.max_memory / 1048576);
        break;
    case WB_DROP_SPILL_ERROR: snprintf(buf, len, "the spill file failed: %s", p->spill_error); break;
    default: snprintf(buf, len, "the device tracer's buffers filled up"); break;
    }
    return buf;
}

void wb_prof_drop_note(const wb_prof *p, char *buf, size_t len) {
    buf[0] = '\0';
    if (!p->dropped) return;
    char cause[320];
    if (p->first_drop == WB_DROP_RING) {
        snprintf(buf, len, "%llu events dropped: %s; the %zu kept start at a whole step", (unsigned long long)p->dropped,
                 drop_cause(p, WB_DROP_RING, cause, sizeof cause), wb_prof_count(p));
        return;
    }
    int n = snprintf(buf, len, "%llu events dropped: recording stopped after %llu events at %.3f ms",
                     (unsigned long long)p->dropped, (unsigned long long)p->drop_index, (double)p->drop_ts / 1e6);
    if (n > 0 && (size_t)n < len && p->drop_step >= 0)
        n += snprintf(buf + n, len - (size_t)n, " (step %lld)", (long long)p->drop_step);
    if (n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " because %s", drop_cause(p, p->first_drop, cause, sizeof cause));
    for (int why = WB_DROP_MAX_EVENTS; why <= WB_DROP_DEVICE && n > 0 && (size_t)n < len; why++)
        if (why != p->first_drop && p->dropped_by[why])
            n += snprintf(buf + n, len - (size_t)n, "; %llu more because %s", (unsigned long long)p->dropped_by[why],
                          drop_cause(p, why, cause, sizeof cause));
}

/* ---- the spill file -------------------------------------------------------------------------- */

static int spill_open(wb_prof *p) {
    const char *dir = p->o.spill_dir;
    if (!dir || !*dir) dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    /* no name at all: the file goes when its descriptor does (release, exit, kill -9) */
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/wb_profile_spill_XXXXXX", dir);
        fd = mkostemp(path, O_CLOEXEC);
        if (fd >= 0) unlink(path); /* named for an instant only */
    }
    if (fd < 0) {
        snprintf(p->spill_error, sizeof p->spill_error, "cannot create a spill file in %s: %s", dir, strerror(errno));
        return 0;
    }
    p->spill_fd = fd;
    return 1;
}

static int write_all(int fd, const void *buf, size_t n, int64_t off) {
    const char *b = buf;
    while (n > 0) {
        ssize_t w = pwrite(fd, b, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            return 0;
        }
        b += w, n -= (size_t)w, off += w;
    }
    return 1;
}

static int read_all(int fd, void *buf, size_t n, int64_t off) {
    char *b = buf;
    while (n > 0) {
        ssize_t r = pread(fd, b, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return 0;
        }
        b += r, n -= (size_t)r, off += r;
    }
    return 1;
}

/* Writes the oldest chunk still in memory to the file; returns its memory, or NULL (the error
 * in spill_error). */
static wb_prof_chunk *spill_oldest(wb_prof *p) {
    chunk_ref *r = NULL;
    for (size_t i = 0; i < p->nchunks && !r; i++)
        if (p->chunks[i].mem) r = &p->chunks[i];
    if (!r) return NULL;
    if (p->spill_fd < 0 && !spill_open(p)) return NULL;
    size_t ev = (size_t)r->n * sizeof(wb_event), side = (size_t)r->side_n * sizeof(int64_t);
    if (!write_all(p->spill_fd, r->mem->ev, ev, p->spill_bytes) ||
        !write_all(p->spill_fd, r->mem->side, side, p->spill_bytes + (int64_t)ev)) {
        snprintf(p->spill_error, sizeof p->spill_error, "writing %zu bytes at %lld: %s (the %llu events recorded "
                 "before are kept)", ev + side, (long long)p->spill_bytes, strerror(errno),
                 (unsigned long long)(p->sealed_events));
        return NULL;
    }
    wb_prof_chunk *mem = r->mem;
    r->off = p->spill_bytes;
    r->mem = NULL;
    p->spill_bytes += (int64_t)(ev + side);
    return mem;
}

/* Drops the oldest chunk (ring); returns its memory. */
static wb_prof_chunk *evict_oldest(wb_prof *p) {
    if (!p->nchunks) return NULL;
    chunk_ref r = p->chunks[0];
    for (uint32_t i = 0; i < r.n; i++)
        if (r.mem->ev[i].ts_ns > p->ring_cut_ns) p->ring_cut_ns = r.mem->ev[i].ts_ns;
    if (!p->first_drop) {
        p->first_drop = WB_DROP_RING;
        p->drop_ts = wb_now_ns() - p->t0;
    }
    p->dropped += r.n, p->dropped_by[WB_DROP_RING] += r.n;
    p->sealed_events -= r.n;
    memmove(p->chunks, p->chunks + 1, (p->nchunks - 1) * sizeof *p->chunks);
    p->nchunks--;
    return r.mem;
}

/* ---- appending ----------------------------------------------------------------------------- */

static void seal_open(wb_prof *p) {
    if (!p->open) return;
    wb_prof_chunk *c = p->open;
    c->n = (uint32_t)(p->cur - c->ev);
    p->chunks[p->nchunks++] = (chunk_ref){.mem = c, .off = -1, .n = c->n, .side_n = c->side_n};
    p->sealed_events += c->n;
    p->open = NULL;
    p->cur = p->cur_end = NULL;
}

/* Memory for a new chunk under the budget and the policy; NULL when nothing more is recorded. */
static wb_prof_chunk *next_chunk(wb_prof *p) {
    if (p->nspare) return p->spare[--p->nspare];
    if ((int64_t)((p->resident + 1) * WB_CHUNK_BYTES) <= p->o.max_memory || p->resident < 2) {
        wb_prof_chunk *c = chunk_get();
        if (c) p->resident++;
        else snprintf(p->spill_error, sizeof p->spill_error, "out of memory for a new chunk of events");
        return c;
    }
    if (p->o.policy == WB_PROF_RING) return evict_oldest(p);
    if (p->o.policy == WB_PROF_SPILL) return spill_oldest(p);
    return NULL;
}

wb_event *wb_store_slot_slow(wb_prof *p, uint32_t side, int64_t **side_out) {
    if (p->full) goto dropped;
    uint64_t in_open = p->open ? (uint64_t)(p->cur - p->open->ev) : 0;
    if (p->o.max_events > 0 && p->accepted + in_open >= (uint64_t)p->o.max_events) {
        wb_store_drop(p, WB_DROP_MAX_EVENTS, 1);
        return NULL;
    }
    if (!p->open || p->cur == p->open->ev + WB_CHUNK_EVENTS || p->open->side_n + side > WB_CHUNK_SIDE) {
        if (!wb_grow((void **)&p->chunks, &p->cap_chunks, p->nchunks + 1, sizeof *p->chunks)) goto full;
        p->accepted += in_open;
        seal_open(p);
        wb_prof_chunk *c = next_chunk(p);
        if (!c) goto full;
        c->n = c->side_n = 0;
        p->open = c;
        p->cur = c->ev;
        in_open = 0;
    }
    /* the fast path runs to the chunk's end or to what max_events leaves */
    uint64_t room = WB_CHUNK_EVENTS - in_open;
    if (p->o.max_events > 0 && (uint64_t)p->o.max_events - p->accepted - in_open < room)
        room = (uint64_t)p->o.max_events - p->accepted - in_open;
    p->cur_end = p->cur + room;
    if (p->cur == p->cur_end) return wb_store_slot_slow(p, side, side_out);
    if (side_out) {
        *side_out = p->open->side + p->open->side_n;
        p->open->side_n += side;
    }
    return p->cur++;
full:
    p->full = 1;
    wb_store_drop(p, p->spill_error[0] ? WB_DROP_SPILL_ERROR : WB_DROP_STOP, 1);
    return NULL;
dropped:
    wb_store_drop(p, p->first_drop ? p->first_drop : WB_DROP_STOP, 1);
    return NULL;
}

void wb_store_ensure(wb_prof *p) {
    if (p->cur != p->cur_end) return;
    wb_event *e = wb_store_slot_slow(p, 0, NULL);
    if (e) p->cur--; /* not used: the room stays for the next event */
}

void wb_store_clear(wb_prof *p) {
    if (p->open) {
        p->open->side_n = 0;
        p->cur = p->open->ev;
    }
    for (size_t i = 0; i < p->nchunks; i++)
        if (p->chunks[i].mem && wb_grow((void **)&p->spare, &p->cap_spare, p->nspare + 1, sizeof *p->spare))
            p->spare[p->nspare++] = p->chunks[i].mem;
        else if (p->chunks[i].mem)
            chunk_put(p->chunks[i].mem), p->resident--;
    p->nchunks = 0;
    p->sealed_events = p->accepted = 0;
    if (p->spill_fd >= 0 && ftruncate(p->spill_fd, 0) != 0) { /* a later spill writes over it */
    }
    p->spill_bytes = 0;
    p->spill_error[0] = '\0';
    p->full = 0;
    p->ring_cut_ns = -1;
    p->dropped = 0;
    memset(p->dropped_by, 0, sizeof p->dropped_by);
    p->first_drop = 0;
    p->drop_ts = p->drop_step = -1;
    p->drop_index = 0;
    /* the fast path must stop at max_events again: the next event recomputes cur_end */
    if (p->open) p->cur_end = p->cur;
}

void wb_store_free(wb_prof *p) {
    chunk_put(p->open);
    for (size_t i = 0; i < p->nchunks; i++)
        chunk_put(p->chunks[i].mem);
    for (size_t i = 0; i < p->nspare; i++)
        chunk_put(p->spare[i]);
    free(p->chunks), free(p->spare);
    if (p->spill_fd >= 0) close(p->spill_fd);
    for (size_t i = 0; i < p->nstr_blocks; i++)
        free(p->str_blocks[i]);
    free(p->str_blocks), free(p->strs), free(p->str_slots);
}

/* ---- interned strings -------------------------------------------------------------------------- */

static uint32_t hash_string(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int rehash(wb_prof *p) {
    uint32_t cap = p->cap_str_slots ? p->cap_str_slots * 2 : 256;
    uint32_t *slots = malloc(cap * sizeof *slots);
    if (!slots) return 0;
    memset(slots, 0xff, cap * sizeof *slots);
    for (uint32_t i = 0; i < p->nstrs; i++) {
        uint32_t j = hash_string(p->strs[i]) & (cap - 1);
        while (slots[j] != WB_EVENT_NONE)
            j = (j + 1) & (cap - 1);
        slots[j] = i;
    }
    free(p->str_slots);
    p->str_slots = slots, p->cap_str_slots = cap;
    return 1;
}

uint32_t wb_store_intern(wb_prof *p, const char *s) {
    if (2 * (p->nstrs + 1) > p->cap_str_slots && !rehash(p)) return WB_EVENT_NONE;
    uint32_t j = hash_string(s) & (p->cap_str_slots - 1);
    for (; p->str_slots[j] != WB_EVENT_NONE; j = (j + 1) & (p->cap_str_slots - 1))
        if (!strcmp(p->strs[p->str_slots[j]], s)) return p->str_slots[j];
    size_t len = strlen(s) + 1;
    if (len > p->str_block_left) {
        size_t size = len > 65536 ? len : 65536;
        if (!wb_grow((void **)&p->str_blocks, &p->cap_str_blocks, p->nstr_blocks + 1, sizeof *p->str_blocks))
            return WB_EVENT_NONE;
        char *b = malloc(size);
        if (!b) return WB_EVENT_NONE;
        p->str_blocks[p->nstr_blocks++] = b;
        p->str_block = b, p->str_block_left = size;
    }
    size_t cap = p->cap_strs;
    if (!wb_grow((void **)&p->strs, &cap, p->nstrs + 1, sizeof *p->strs)) return WB_EVENT_NONE;
    p->cap_strs = (uint32_t)cap;
    char *copy = p->str_block;
    memcpy(copy, s, len);
    p->str_block += len, p->str_block_left -= len;
    p->strs[p->nstrs] = copy;
    p->str_slots[j] = p->nstrs;
    return p->nstrs++;
}

/* ---- reading ----------------------------------------------------------------------------------- */

/* Ring: after an eviction, the events kept start at the first step that began after every
 * evicted event (a step cut in two is hidden whole); without steps, after the cut. */
static int64_t visible_from(const wb_prof *p) {
    if (p->ring_cut_ns < 0) return INT64_MIN;
    int64_t first_step = INT64_MAX;
    int steps = 0;
    wb_prof_cursor c = {.p = p, .status = WB_OK, .visible_from = INT64_MIN};
    for (const wb_event *e; (e = wb_prof_cursor_next(&c));)
        if (e->kind == WB_EV_STEP) {
            steps = 1;
            if (e->ts_ns > p->ring_cut_ns && e->ts_ns < first_step) first_step = e->ts_ns;
        }
    wb_prof_cursor_close(&c);
    return steps ? first_step : p->ring_cut_ns + 1;
}

void wb_prof_cursor_open(wb_prof_cursor *c, const wb_prof *p) {
    *c = (wb_prof_cursor){.p = p, .status = WB_OK, .visible_from = INT64_MIN};
    if (p->ring_cut_ns >= 0) c->visible_from = visible_from(p);
}

/* Loads the next chunk; 0 at the end or on a read error. */
static int cursor_load(wb_prof_cursor *c) {
    const wb_prof *p = c->p;
    if (c->chunk > p->nchunks) return 0;
    if (c->chunk == p->nchunks) { /* the open chunk */
        c->chunk++;
        if (!p->open) return 0;
        c->at = p->open->ev, c->end = p->cur;
        return 1;
    }
    const chunk_ref *r = &p->chunks[c->chunk++];
    if (r->mem) {
        c->at = r->mem->ev, c->end = r->mem->ev + r->n;
        return 1;
    }
    if (!c->buf && !(c->buf = chunk_get())) {
        c->status = wb_error(WB_ERR_MEMORY, "profiler: out of memory reading the spill file back");
        return 0;
    }
    size_t ev = (size_t)r->n * sizeof(wb_event);
    if (!read_all(p->spill_fd, c->buf->ev, ev, r->off) ||
        !read_all(p->spill_fd, c->buf->side, (size_t)r->side_n * sizeof(int64_t), r->off + (int64_t)ev)) {
        c->status = wb_error(WB_ERR_ARGUMENT, "profiler: reading the spill file back failed: %s", strerror(errno));
        return 0;
    }
    c->buf->n = r->n, c->buf->side_n = r->side_n;
    c->at = c->buf->ev, c->end = c->buf->ev + r->n;
    return 1;
}

const wb_event *wb_prof_cursor_next(wb_prof_cursor *c) {
    for (;;) {
        while (c->at == c->end) {
            if (c->done || !cursor_load(c)) {
                c->done = 1;
                return NULL;
            }
        }
        const wb_event *e = c->at++;
        if (e->ts_ns < c->visible_from) continue;
        c->index++;
        return e;
    }
}

void wb_prof_cursor_seek(wb_prof_cursor *c, uint64_t first) {
    const wb_prof *p = c->p;
    if (c->visible_from == INT64_MIN) { /* every event visible: skip whole chunks without reading them */
        uint64_t skipped = 0;
        size_t i = 0;
        while (i < p->nchunks && skipped + p->chunks[i].n <= first)
            skipped += p->chunks[i++].n;
        c->chunk = i, c->at = c->end = NULL, c->index = skipped;
    }
    while (c->index < first && wb_prof_cursor_next(c)) {
    }
}

void wb_prof_cursor_close(wb_prof_cursor *c) {
    chunk_put(c->buf);
    c->buf = NULL;
}

size_t wb_prof_count(const wb_prof *p) {
    uint64_t n = p->sealed_events + (p->open ? (uint64_t)(p->cur - p->open->ev) : 0);
    if (p->ring_cut_ns < 0) return (size_t)n;
    wb_prof_cursor c;
    wb_prof_cursor_open(&c, p);
    size_t visible = 0;
    while (wb_prof_cursor_next(&c))
        visible++;
    wb_prof_cursor_close(&c);
    return visible;
}

void wb_prof_store_stats_get(const wb_prof *p, wb_prof_store_stats *s) {
    *s = (wb_prof_store_stats){.memory_bytes = (int64_t)(p->resident * WB_CHUNK_BYTES),
                               .spill_bytes = p->spill_bytes,
                               .max_memory = p->o.max_memory,
                               .policy = p->o.policy,
                               .kept = p->sealed_events + (p->open ? (uint64_t)(p->cur - p->open->ev) : 0),
                               .spill_error = p->spill_error};
}
