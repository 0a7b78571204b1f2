/* trace_json.c: the small JSON reader of trace_json.h. */
#include "trace_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void jp_ws(jp *j) {
    while (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r')
        j->s++;
}

int jp_eat(jp *j, char c) {
    jp_ws(j);
    if (*j->s != c) return 0;
    j->s++;
    return 1;
}

/* Four hex digits of a \u escape; marks the parse bad when they are not. */
static unsigned jp_hex4(jp *j) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char h = *j->s;
        int d = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (d < 0) return j->bad = 1, 0; /* a NUL among them stops here too */
        v = v * 16 + (unsigned)d;
        j->s++;
    }
    return v;
}

/* A string into buf (escapes decoded; \u to UTF-8, surrogate pairs joined); 0 when it is not one. */
int jp_string(jp *j, char *buf, size_t len) {
    jp_ws(j);
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
                unsigned v = jp_hex4(j);
                if (v >= 0xD800 && v <= 0xDBFF && j->s[0] == '\\' && j->s[1] == 'u') { /* a surrogate pair */
                    const char *at = j->s;
                    j->s += 2;
                    unsigned lo = jp_hex4(j);
                    if (lo >= 0xDC00 && lo <= 0xDFFF) v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                    else j->s = at;
                }
                if (j->bad) return 0;
                if (v >= 0xD800 && v <= 0xDFFF) v = 0xFFFD; /* a lone surrogate: the replacement character */
                char u[4];
                int un = v < 0x80 ? (u[0] = (char)v, 1) :
                         v < 0x800 ? (u[0] = (char)(0xC0 | v >> 6), u[1] = (char)(0x80 | (v & 63)), 2) :
                         v < 0x10000 ? (u[0] = (char)(0xE0 | v >> 12), u[1] = (char)(0x80 | ((v >> 6) & 63)),
                                        u[2] = (char)(0x80 | (v & 63)), 3) :
                         (u[0] = (char)(0xF0 | v >> 18), u[1] = (char)(0x80 | ((v >> 12) & 63)),
                          u[2] = (char)(0x80 | ((v >> 6) & 63)), u[3] = (char)(0x80 | (v & 63)), 4);
                for (int k = 0; k < un; k++)
                    if (n + 1 < len) buf[n++] = u[k];
                continue;
            } else if (e == '"' || e == '\\' || e == '/') c = (unsigned char)e;
            else return j->bad = 1, 0; /* an escape JSON does not have, or the string's end */
        }
        if (n + 1 < len) buf[n++] = (char)c;
    }
    if (*j->s != '"') return j->bad = 1, 0;
    j->s++;
    buf[n] = '\0';
    return 1;
}

/* A finite number (JSON has no inf or nan; null reads as 0). */
double jp_number(jp *j) {
    jp_ws(j);
    if (!strncmp(j->s, "null", 4)) return j->s += 4, 0;
    if (*j->s != '-' && (*j->s < '0' || *j->s > '9')) return j->bad = 1, 0; /* strtod would take "inf", "0x1p3" */
    char *end;
    double v = strtod(j->s, &end);
    if (end == j->s || !isfinite(v)) return j->bad = 1, 0;
    j->s = end;
    return v;
}

/* An integer that fits int64_t (a double out of its range would be undefined to convert). */
int64_t jp_int(jp *j) {
    double v = jp_number(j);
    if (!(v > -9.2e18 && v < 9.2e18)) return j->bad = 1, 0;
    return (int64_t)v;
}

/* Microseconds with up to three decimals as exact ns (what the writer prints from ns); more
 * digits than 2^61 ns (73 years) make the parse bad, so a time plus a duration cannot overflow. */
int64_t jp_micros(jp *j) {
    jp_ws(j);
    int neg = *j->s == '-';
    if (neg) j->s++;
    int64_t whole = 0, frac = 0;
    int digits = 0;
    if (*j->s < '0' || *j->s > '9') return j->bad = 1, 0;
    while (*j->s >= '0' && *j->s <= '9') {
        whole = whole * 10 + (*j->s++ - '0');
        if (whole > ((int64_t)1 << 61) / 1000) return j->bad = 1, 0; /* 73 years: sums of two stay in range */
    }
    if (*j->s == '.') {
        j->s++;
        while (*j->s >= '0' && *j->s <= '9') {
            if (digits < 3) frac = frac * 10 + (*j->s - '0'), digits++;
            j->s++;
        }
    }
    if (*j->s == 'e' || *j->s == 'E') return j->bad = 1, 0; /* the writer never uses exponents for times */
    for (; digits < 3; digits++)
        frac *= 10;
    int64_t ns = whole * 1000 + frac;
    return neg ? -ns : ns;
}

/* Skips any value. */
void jp_skip(jp *j) {
    jp_ws(j);
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
                jp_skip(j);
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
int jp_ints(jp *j, int64_t *v, int max) {
    int n = 0;
    if (!jp_eat(j, '[')) return j->bad = 1, 0;
    if (jp_eat(j, ']')) return 0;
    do {
        int64_t x = jp_int(j);
        if (n < max) v[n++] = x;
    } while (jp_eat(j, ','));
    if (!jp_eat(j, ']')) j->bad = 1;
    return n;
}

