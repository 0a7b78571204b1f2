/* trace_json.h: a small JSON reader over one value's text in memory (an event object of a trace,
 * a member's text), what trace_read.c parses events with: each call skips white space first, and
 * a value that is not what was asked for marks the parse bad (j->bad) rather than stopping it, so
 * a caller checks once at the end. Never reads past the text's terminating NUL. */
#ifndef WB_TRACE_JSON_H
#define WB_TRACE_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct jp {
    const char *s; /* the next byte to read */
    int bad;
} jp;

void jp_ws(jp *j);
/* 1 and past c when the next byte is c, else 0 (not bad). */
int jp_eat(jp *j, char c);
/* A string into buf (escapes decoded; \u to UTF-8, surrogate pairs joined; cut to len - 1
 * bytes); 0 when it is not one. */
int jp_string(jp *j, char *buf, size_t len);
/* A finite number (JSON has no inf or nan; null reads as 0). */
double jp_number(jp *j);
/* An integer that fits int64_t. */
int64_t jp_int(jp *j);
/* Microseconds with up to three decimals as exact ns, within 2^61 ns. */
int64_t jp_micros(jp *j);
/* Skips any value. */
void jp_skip(jp *j);
/* An array of integers (at most max kept; more are skipped): how many were kept. */
int jp_ints(jp *j, int64_t *v, int max);

#endif
