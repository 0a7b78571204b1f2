/* trace_out.h: a buffered writer for the trace exports: plain, or gzip (zlib) when the path ends
 * in ".gz"; written through an atomic file (the target appears whole or not at all). Numbers
 * are formatted by hand: printf per field is most of an export's time. */
#ifndef WB_TRACE_OUT_H
#define WB_TRACE_OUT_H

#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include <wb/atomic_file.h>

typedef struct wb_out {
    wb_atomic_file file;
    int gz;
    z_stream z;
    int failed;      /* a write or the compressor failed: the commit reports it */
    uint64_t bytes;  /* bytes written to the file (compressed when gz) */
    size_t n;
    char buf[1 << 16];
    unsigned char zbuf[1 << 16];
} wb_out;

/* Opens path for writing (gz when it ends in ".gz"); `what` names the caller in messages. */
wb_status wb_out_open(wb_out *o, const char *path, const char *what);
/* Flushes, finishes the gzip stream and commits the file (or removes it and reports why). */
wb_status wb_out_close(wb_out *o, const char *what);
void wb_out_flush(wb_out *o);
/* Gives up: nothing is left at the path. */
void wb_out_abort(wb_out *o);

static inline void wb_out_need(wb_out *o, size_t n) {
    if (o->n + n > sizeof o->buf) wb_out_flush(o);
}
void wb_out_write_slow(wb_out *o, const char *s, size_t n);
static inline void wb_out_write(wb_out *o, const char *s, size_t n) {
    if (o->n + n <= sizeof o->buf) {
        memcpy(o->buf + o->n, s, n);
        o->n += n;
    } else {
        wb_out_write_slow(o, s, n);
    }
}
/* (inlined: the length of a literal is known where it is written) */
static inline void wb_out_str(wb_out *o, const char *s) { wb_out_write(o, s, __builtin_strlen(s)); }
static inline void wb_out_char(wb_out *o, char c) {
    wb_out_need(o, 1);
    o->buf[o->n++] = c;
}
void wb_out_int(wb_out *o, int64_t v);
/* ns as microseconds with three decimals (what "%.3f" of ns / 1000 prints). */
void wb_out_us(wb_out *o, int64_t ns);
void wb_out_printf(wb_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
