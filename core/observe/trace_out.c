/* trace_out.c: the exports' buffered writer (trace_out.h): plain or gzip, through an atomic
 * file, with hand-made number formatting. */
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "trace_out.h"

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

wb_status wb_out_open(wb_out *o, const char *path, const char *what) {
    o->n = 0, o->failed = 0, o->bytes = 0;
    o->gz = ends_with(path, ".gz");
    if (wb_atomic_open(&o->file, path, what) != WB_OK) return WB_ERR_ARGUMENT;
    if (o->gz) {
        memset(&o->z, 0, sizeof o->z);
        /* level 1: a trace compresses about tenfold even so, and the export stays fast */
        if (deflateInit2(&o->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            wb_atomic_abort(&o->file);
            return wb_error(WB_ERR_MEMORY, "%s: cannot start the gzip compressor for %s", what, path);
        }
    }
    return WB_OK;
}

static void emit(wb_out *o, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, o->file.f) != n) o->failed = 1;
    o->bytes += n;
    wb_atomic_wrote(&o->file, n);
}

static void deflate_some(wb_out *o, const char *p, size_t n, int flush) {
    o->z.next_in = (unsigned char *)p;
    o->z.avail_in = (unsigned)n;
    int rc;
    do {
        o->z.next_out = o->zbuf;
        o->z.avail_out = sizeof o->zbuf;
        rc = deflate(&o->z, flush);
        if (rc == Z_STREAM_ERROR) {
            o->failed = 1;
            return;
        }
        emit(o, o->zbuf, sizeof o->zbuf - o->z.avail_out);
    } while (o->z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
}

void wb_out_flush(wb_out *o) {
    if (o->gz)
        deflate_some(o, o->buf, o->n, Z_NO_FLUSH);
    else
        emit(o, o->buf, o->n);
    o->n = 0;
}

void wb_out_write_slow(wb_out *o, const char *s, size_t n) {
    while (n > 0) {
        if (o->n == sizeof o->buf) wb_out_flush(o);
        size_t k = sizeof o->buf - o->n < n ? sizeof o->buf - o->n : n;
        memcpy(o->buf + o->n, s, k);
        o->n += k, s += k, n -= k;
    }
}

static const char two_digits[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                    "8081828384858687888990919293949596979899";

void wb_out_int(wb_out *o, int64_t v) {
    char tmp[24];
    int i = sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100) { /* two digits a division */
        unsigned d = (unsigned)(u % 100) * 2;
        u /= 100;
        tmp[--i] = two_digits[d + 1], tmp[--i] = two_digits[d];
    }
    if (u >= 10) {
        unsigned d = (unsigned)u * 2;
        tmp[--i] = two_digits[d + 1], tmp[--i] = two_digits[d];
    } else {
        tmp[--i] = (char)('0' + u);
    }
    if (v < 0) tmp[--i] = '-';
    wb_out_need(o, sizeof tmp);
    for (; i < (int)sizeof tmp; i++) /* a few digits: no call to memcpy */
        o->buf[o->n++] = tmp[i];
}

void wb_out_us(wb_out *o, int64_t ns) {
    uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    if (ns < 0) wb_out_char(o, '-');
    wb_out_int(o, (int64_t)(u / 1000));
    wb_out_need(o, 4);
    char *b = o->buf + o->n;
    b[0] = '.', b[1] = (char)('0' + u / 100 % 10), b[2] = (char)('0' + u / 10 % 10), b[3] = (char)('0' + u % 10);
    o->n += 4;
}

void wb_out_printf(wb_out *o, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        wb_out_write(o, tmp, (size_t)n);
        return;
    }
    wb_out_flush(o); /* longer than tmp: straight to the file's stream */
    va_start(ap, fmt);
    if (o->gz) {
        char *big = malloc((size_t)n + 1);
        if (big) vsnprintf(big, (size_t)n + 1, fmt, ap), wb_out_write(o, big, (size_t)n);
        else o->failed = 1;
        free(big);
    } else {
        if (vfprintf(o->file.f, fmt, ap) < 0) o->failed = 1;
        o->bytes += (uint64_t)n;
        wb_atomic_wrote(&o->file, (size_t)n);
    }
    va_end(ap);
}

wb_status wb_out_close(wb_out *o, const char *what) {
    wb_out_flush(o);
    if (o->gz) {
        deflate_some(o, NULL, 0, Z_FINISH);
        deflateEnd(&o->z);
    }
    if (o->failed && !ferror(o->file.f)) { /* the commit checks the stream: make it see the failure */
        wb_atomic_abort(&o->file);
        return wb_error(WB_ERR_ARGUMENT, "%s: writing %s failed", what, o->file.path);
    }
    return wb_atomic_commit(&o->file, what);
}

void wb_out_abort(wb_out *o) {
    if (o->gz) deflateEnd(&o->z);
    wb_atomic_abort(&o->file);
}
