/* mlp.c: the one-kernel gated MLP (see wb_kernels/mlp.h) around the GEMM's microkernels. For a
 * block of token rows, the dual GEMM's tiles (activation applied in registers) are stored in the
 * down GEMM's packed-A layout, one K block of the down GEMM (a hidden chunk) at a time, in a
 * per-thread buffer sized to L2; the down GEMM accumulates that chunk into the output block. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "wb_kernels/bf16.h"
#include "wb_kernels/mlp.h"
#include "wb_kernels/spans.h"

#define MAX_MR      12
#define MAX_NR      32
/* Split by tokens when every thread gets at least this many row tiles; with fewer, the weights
 * (read once per row block) dominate and threads split columns instead. */
#define MIN_TILES_PER_THREAD 4

typedef struct mlp_buffers {
    float *xa, *hidden;
    size_t xa_cap, hidden_cap;
} mlp_buffers;

/* Per-thread buffers kept across calls (as the GEMM's packing buffers), and the shared ones (the
 * token split's packed x and the column split's hidden; bf16's f32 output): one MLP runs at a time. */
static mlp_buffers thread_buffers[WB_CPU_MAX_THREADS];
static float *shared_x, *shared_hidden, *shared_out;
static size_t shared_x_cap, shared_hidden_cap, shared_out_cap;

/* The opt-in phase counts (wb_mlp_phases_count), one slot per thread. */
static int phases_on;
static wb_mlp_phases thread_phases[WB_CPU_MAX_THREADS];


void wb_mlp_phases_count(int on) {
    if (on) memset(thread_phases, 0, sizeof thread_phases);
    phases_on = on;
}

wb_mlp_phases wb_mlp_phases_read(void) {
    wb_mlp_phases sum = {0};
    for (int t = 0; t < WB_CPU_MAX_THREADS; t++) {
        const wb_mlp_phases *p = &thread_phases[t];
        sum.runs = p->runs > sum.runs ? p->runs : sum.runs;
        sum.pack_x_ns += p->pack_x_ns, sum.gated_ns += p->gated_ns, sum.down_ns += p->down_ns;
        sum.total_ns += p->total_ns;
    }
    return sum;
}

/* Everything a thread needs about the problem's packed layouts. */
typedef struct geometry {
    const wb_cpu_isa *isa;
    const wb_mlp_problem *p;
    int mr, nr, width;        /* register tile; width: hidden columns per dual tile (nr / 2) */
    int pairs;                /* k-pair ISA: K counts pair words (two bf16), the hidden is packed rounded */
    int64_t kx, kh;           /* K of the dual GEMM (x's features) and of the down GEMM (the hidden), in words */
    int64_t kc_dual, kc_down; /* K block depths of the two packed weights, in words */
    int64_t kc_cols;          /* hidden columns per down K block (2 kc_down in pairs) */
    int64_t tiles_h, tiles_n; /* dual tiles over the hidden, down tiles over the output */
    int64_t l2;               /* bytes of L2 per core, as the blocking read it */
} geometry;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* dst[kk*stride] = the kk-th 4-byte word at src, for kk < n, as bits (pair words are not floats;
 * src need not be 4-byte aligned) */
static void copy_words(float *dst, const char *src, int64_t n, int stride) {
    for (int64_t kk = 0; kk < n; kk++) memcpy(dst + kk * stride, src + 4 * kk, 4);
}

/* Packs the nrows rows of x from row0 in rt row tiles (wb_mlp_tile_rows; lanes past a tile's height
 * repeat row0: computed, never stored) for every dual K block: block pc at
 * xa[pc*rt*mr + tile*kc*mr + kk*mr + r]. */
static void pack_x(const geometry *g, int64_t row0, int64_t rt, int64_t nrows, float *xa) {
    const wb_mlp_problem *p = g->p;
    const int mr = g->mr;
    for (int64_t pc = 0; pc < g->kx; pc += g->kc_dual) {
        int64_t kc = min64(g->kc_dual, g->kx - pc);
        for (int64_t it = 0; it < rt; it++) {
            float *dst = xa + pc * rt * mr + it * kc * mr;
            int64_t rows[MAX_MR], first;
            const int height = wb_mlp_tile_rows(mr, !g->pairs, rt, nrows, it, &first);
            for (int r = 0; r < mr; r++) rows[r] = row0 + (r < height ? first + r : 0);
            if (g->pairs) { /* pair words, moved as they are (the packers only move floats) */
                const char *at[MAX_MR]; /* row r's word pc: bf16 element 2 pc */
                int aligned = 1;
                for (int r = 0; r < mr; r++) {
                    at[r] = (const char *)p->x + (rows[r] * p->rsx + 2 * pc) * 2;
                    aligned &= ((uintptr_t)at[r] & 3u) == 0;
                }
                if (aligned && g->isa->pack_rows) {
                    const float *src[MAX_MR];
                    for (int r = 0; r < mr; r++) src[r] = (const float *)(const void *)at[r];
                    g->isa->pack_rows(dst, src, mr, kc);
                } else { /* a view at an odd element, an odd row stride, or no packer */
                    for (int r = 0; r < mr; r++) copy_words(dst + r, at[r], kc, mr);
                }
            } else if (p->csx == 1 && !p->x_bf16 && g->isa->pack_rows) {
                const float *src[MAX_MR];
                for (int r = 0; r < mr; r++) src[r] = (const float *)p->x + rows[r] * p->rsx + pc;
                g->isa->pack_rows(dst, src, mr, kc);
            } else if (p->csx == 1 && p->x_bf16 && g->isa->pack_rows_bf16) {
                const uint16_t *src[MAX_MR];
                for (int r = 0; r < mr; r++) src[r] = (const uint16_t *)p->x + rows[r] * p->rsx + pc;
                g->isa->pack_rows_bf16(dst, src, mr, kc);
            } else {
                for (int r = 0; r < mr; r++)
                    for (int64_t kk = 0; kk < kc; kk++) {
                        int64_t at = rows[r] * p->rsx + (pc + kk) * p->csx;
                        dst[kk * mr + r] = p->x_bf16 ? wb_bf16_to_f32(((const uint16_t *)p->x)[at]) : ((const float *)p->x)[at];
                    }
            }
        }
    }
}

/* One dual tile (hidden columns [jt*width, +width)) of row tile `it` of a buffer of rt row tiles:
 * act(x Wg^T) * (x Wu^T), accumulated over the dual K blocks, into tile[rows x width], or with
 * `panel` into the down GEMM's packed-A sliver at tile (column c of row r at tile[c*mr + r]). */
static void gated_tile(const geometry *g, const float *xa, int64_t rt, int64_t it, int64_t jt, int rows, int prefetch,
                       const float *pf_next, int64_t pf_floats, float *tile, int panel) {
    const wb_mlp_problem *p = g->p;
    const int mr = g->mr, nr = g->nr;
    float partial[MAX_MR * MAX_NR] __attribute__((aligned(64)));
    for (int64_t pc = 0; pc < g->kx; pc += g->kc_dual) {
        int64_t kc = min64(g->kc_dual, g->kx - pc);
        int first = pc == 0, last = pc + kc >= g->kx;
        wb_gemm_tile t = {.kc = kc,
                          .a = xa + pc * rt * mr + it * kc * mr,
                          .b = p->packed_gate_up + pc * g->tiles_h * nr + jt * kc * nr,
                          .c_in = first ? NULL : partial,
                          .ldc_in = nr,
                          .prefetch_b = prefetch,
                          .pf_next = last ? pf_next : NULL,
                          .pf_floats = last ? pf_floats : 0};
        if (last) /* (into the down GEMM's packed A where `panel`: see panel_at) */
            t.c_out = tile, t.ldc_out = g->width, t.store = p->act, t.c_out_panel = panel;
        else
            t.c_out = partial, t.ldc_out = nr, t.store = WB_STORE_PLAIN;
        g->isa->ukernel(&t, rows);
    }
}

/* The floats of a next sliver's `floats` that pass `it` fetches, a `share` each (0 past the end). */
static int64_t share_of(int64_t it, int64_t share, int64_t floats) {
    return it * share < floats ? min64(share, floats - it * share) : 0;
}

/* The gate/up sliver after dual tile jt (while that tile is still in the chunk ending at column
 * c_end), which the passes over tile jt (its full row tiles) fetch into L2 a share at a time (*share floats each),
 * so that its first pass finds it there rather than in L3; NULL where the driver's rule would not
 * spread (wb_gemm_spread_pays over the chunk's slivers), or the dual K is in blocks. */
static const float *spread_share(const geometry *g, int64_t rt, int64_t rows, int64_t jt, int64_t c_end,
                                 int64_t *share) {
    const int64_t passes = wb_mlp_full_tiles(g->mr, !g->pairs, rt, rows), floats = g->kx * g->nr;
    const int64_t bytes = floats * (int64_t)sizeof(float);
    if (!wb_gemm_spread_pays(passes, bytes, g->kc_cols / g->width * bytes, g->l2) || g->kc_dual < g->kx ||
        (jt + 1) * g->width >= c_end || jt + 1 >= g->tiles_h)
        return NULL;
    *share = (floats + passes - 1) / passes;
    return g->p->packed_gate_up + (jt + 1) * floats;
}

/* Where dual tile jt of row tile `it` goes in the down GEMM's packed A when it can be stored
 * there directly (the microkernel's c_out_panel store), or NULL: f32, the whole tile in [lo, hi)
 * and in one K block of the down GEMM, so that its columns are columns of one sliver, mr floats
 * apart (the buffer's layout: see scatter). The microkernel's in-register transposes replaced a
 * row-major tile and a scalar transpose of it here; the same bits, and on the Xeon model 207, 1
 * thread (best of 7 batches of 10 forwards, 768 x 3072, four pairs of builds alternated): 512
 * tokens 44.38-44.59 -> 44.10-44.29 ms (the dual tiles 29.89-30.02 -> 29.55-29.71), 128 tokens
 * 11.11-11.15 -> 11.05-11.07; the AVX2 path forced, 512 tokens 90.46-90.91 -> 89.84-89.96. */
static float *panel_at(const geometry *g, int64_t jt, int64_t lo, int64_t hi, float *buffer, int64_t buffer_c0,
                       int64_t rt, int64_t it) {
    const int64_t c_lo = jt * g->width, block0 = c_lo / g->kc_down * g->kc_down;
    if (g->pairs || c_lo < lo || c_lo + g->width > hi || c_lo + g->width > block0 + g->kc_down) return NULL;
    const int64_t kc = min64(g->kc_down, g->p->h - block0);
    return buffer + (block0 - buffer_c0) * rt * g->mr + it * kc * g->mr + (c_lo - block0) * g->mr;
}

/* Writes the tile's hidden columns in [lo, hi) into the down GEMM's packed A: the column's K
 * block q (of kc_cols columns) starts at column c0 = q*kc_cols; its row tile `it` of rt is a kc x mr
 * sliver (kc_down words) at buffer + (c0 - buffer_c0)/f*rt*mr + it*kc*mr, f = 2 in pairs (a word
 * holds two columns, rounded to bf16), else 1 (the driver's packed-A layout per block). */
static void scatter(const geometry *g, const float *tile, int rows, int64_t jt, int64_t lo, int64_t hi, float *buffer,
                    int64_t buffer_c0, int64_t rt, int64_t it) {
    const int mr = g->mr, width = g->width;
    int64_t c_lo = jt * width > lo ? jt * width : lo, c_hi = min64(jt * width + width, hi);
    if (g->pairs) { /* column col is the (col % 2) half of pair word col / 2, rounded to bf16 */
        int64_t c0 = c_lo / g->kc_cols * g->kc_cols; /* the K block (of kc_cols columns) of col */
        if (c_lo == jt * width && c_hi == c_lo + width && c_hi <= c0 + g->kc_cols && c_lo % 2 == 0 && width % 2 == 0) {
            /* the common case (the whole tile, in one block, starting a pair): whole words, a
             * pair of columns each; cachegrind at 1 bf16 token, 768 x 3072 x 768: the per-column
             * form below took the driver to 318 k instructions a forward, the dual path's 154 k */
            int64_t w0 = c0 / 2, kc = min64(g->kc_down, g->kh - w0);
            float *dst = buffer + (w0 - buffer_c0 / 2) * rt * mr + it * kc * mr + (c_lo - c0) / 2 * mr;
            for (int w = 0; w < width / 2; w++)
                for (int r = 0; r < rows; r++) {
                    const float *src = tile + r * width + 2 * w;
                    uint32_t word = (uint32_t)wb_f32_to_bf16(src[0]) | (uint32_t)wb_f32_to_bf16(src[1]) << 16;
                    memcpy(dst + w * mr + r, &word, sizeof word); /* (a word in a float buffer: no type pun) */
                }
            return;
        }
        float *block = NULL;
        for (int64_t col = c_lo; col < c_hi; col++) {
            if (!block || col >= c0 + g->kc_cols) {
                if (block) c0 += g->kc_cols;
                int64_t w0 = c0 / 2, kc = min64(g->kc_down, g->kh - w0);
                block = buffer + (w0 - buffer_c0 / 2) * rt * mr + it * kc * mr;
            }
            char *dst = (char *)(block + (col - c0) / 2 * mr); /* row r's word at dst + 4r, this half at + 2 half */
            const float *src = tile + (col - jt * width);
            const int half = (int)(col & 1);
            const uint16_t zero = 0;
            for (int r = 0; r < rows; r++) {
                uint16_t h = wb_f32_to_bf16(src[r * width]);
                memcpy(dst + 4 * r + 2 * half, &h, sizeof h);
                if (col == g->p->h - 1 && !half) /* an odd hidden: the last word's other half is zero */
                    memcpy(dst + 4 * r + 2, &zero, sizeof zero);
            }
        }
        return;
    }
    for (int64_t col = c_lo; col < c_hi; col++) {
        int64_t c0 = col / g->kc_down * g->kc_down, kc = min64(g->kc_down, g->p->h - c0);
        float *dst = buffer + (c0 - buffer_c0) * rt * mr + it * kc * mr + (col - c0) * mr;
        const float *src = tile + (col - jt * g->width);
        for (int r = 0; r < rows; r++) dst[r] = src[r * g->width];
    }
}

/* The bias of down tile jd, padded to nr lanes (NULL: none). */
static const float *tile_bias(const geometry *g, int64_t jd, float *buf) {
    const wb_mlp_problem *p = g->p;
    if (!p->bias) return NULL;
    for (int j = 0; j < g->nr; j++) {
        int64_t col = jd * g->nr + j;
        buf[j] = col >= p->n                    ? 0.0f
                 : p->bias_bf16 ? wb_bf16_to_f32(((const uint16_t *)p->bias)[col])
                                : ((const float *)p->bias)[col];
    }
    return buf;
}

/* One down tile: out[rows x nr at column tile jd] (+)= hidden sliver x packed Wd^T sliver; a tile
 * past n goes through padded buffers. */
static void down_tile(const geometry *g, wb_gemm_tile t, int rows, int64_t jd) {
    const int nr = g->nr;
    int64_t cols = min64(nr, g->p->n - jd * nr);
    if (cols == nr) {
        g->isa->ukernel(&t, rows);
        return;
    }
    float tin[MAX_MR * MAX_NR], tout[MAX_MR * MAX_NR];
    if (t.c_in) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < nr; j++) tin[i * nr + j] = j < cols ? t.c_in[i * t.ldc_in + j] : 0.0f;
        t.c_in = tin, t.ldc_in = nr;
    }
    float *out = t.c_out;
    int64_t ldc = t.ldc_out;
    t.c_out = tout, t.ldc_out = nr;
    g->isa->ukernel(&t, rows);
    for (int i = 0; i < rows; i++) memcpy(out + i * ldc, tout + i * nr, sizeof(float) * (size_t)cols);
}

/* Down K block [c0, c0 + kc) for row tiles [0, rt) of a hidden buffer (block at `hidden`), output
 * tiles [jd0, jd1), rows [row0, row0 + rows) of the f32 output o (ld ldo; row0 is its first row). */
static void down_block(const geometry *g, const float *hidden, int64_t rt, int64_t rows, int64_t c0, int64_t kc,
                       int64_t jd0, int64_t jd1, float *o, int64_t ldo) {
    const int mr = g->mr, nr = g->nr;
    float bias[MAX_NR] __attribute__((aligned(64)));
    /* the passes over a sliver (its full row tiles) fetch the next one of the block into L2, a share
     * each, where the driver's rule would (wb_gemm_spread_pays), as the dual tiles do: measured on
     * the Xeon model 207 at 512 tokens, 1 thread, the down phase went from 0.99x to 0.97x the down
     * linear's time alone, in the same run */
    const int64_t passes = wb_mlp_full_tiles(mr, !g->pairs, rt, rows), floats = kc * nr;
    const int64_t bytes = floats * (int64_t)sizeof(float);
    const int64_t share =
        wb_gemm_spread_pays(passes, bytes, (jd1 - jd0) * bytes, g->l2) ? (floats + passes - 1) / passes : 0;
    for (int64_t jd = jd0; jd < jd1; jd++) {
        const float *b = c0 == 0 ? tile_bias(g, jd, bias) : NULL;
        const float *sliver = g->p->packed_down + c0 * g->tiles_n * nr + jd * kc * nr;
        const int spread = share > 0 && jd + 1 < jd1;
        for (int64_t it = 0; it < rt; it++) {
            int64_t first;
            const int r = wb_mlp_tile_rows(mr, !g->pairs, rt, rows, it, &first);
            float *c = o + first * ldo + jd * nr;
            wb_gemm_tile t = {.kc = kc,
                              .a = hidden + it * kc * mr,
                              .b = sliver,
                              .c_in = c0 == 0 ? NULL : c,
                              .ldc_in = ldo,
                              .bias = b,
                              .c_out = c,
                              .ldc_out = ldo,
                              .store = WB_STORE_PLAIN,
                              .prefetch_b = it == 0};
            if (spread && r == mr && share_of(it, share, floats) > 0) {
                t.pf_next = sliver + floats + it * share;
                t.pf_floats = share_of(it, share, floats);
            }
            down_tile(g, t, r, jd);
        }
    }
}

/* Rounds f32 rows x [col0, col1) of src (ld lds) into the bf16 output at row0. */
static void round_out(const wb_mlp_problem *p, const float *src, int64_t lds, int64_t row0, int64_t rows, int64_t col0,
                      int64_t col1) {
    uint16_t *out = (uint16_t *)p->out;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = col0; j < col1; j++) out[(row0 + i) * p->ldo + j] = wb_f32_to_bf16(src[i * lds + j]);
}

/* Token split: rows [lo, hi) (a thread's share: wb_mlp_share_row), in row tiles from lo, in blocks
 * of at most block_tiles. x is packed once (into the thread's part of the shared xa); then per
 * panel of hidden columns (wb_mlp_blocking_rule: one chunk, or more where x and the output would
 * not stay in L3), per block, per hidden chunk: the gated tiles into the chunk's packed A, then the
 * down GEMM over that chunk, accumulating into the block's output rows. The panel's weights are
 * read from memory once and reused from L3 by every block. */
static void run_tokens(const geometry *g, int64_t lo, int64_t hi, int64_t block_tiles, int64_t panel, float *xa,
                       mlp_buffers *buf, float *o, int64_t ldo, wb_mlp_phases *ph) {
    const wb_mlp_problem *p = g->p;
    const int mr = g->mr;
    const int64_t tiles = (hi - lo + mr - 1) / mr;
    float tile[MAX_MR * MAX_NR / 2] __attribute__((aligned(64)));
    int64_t t = ph ? wb_cpu_thread_ns() : 0;
    for (int64_t ib = 0; ib < tiles; ib += block_tiles)
        pack_x(g, lo + ib * mr, min64(block_tiles, tiles - ib), min64(block_tiles * mr, hi - lo - ib * mr),
               xa + ib * mr * g->kx);
    WB_CPU_LAP(ph, pack_x_ns, t);
    for (int64_t p0 = 0; p0 < p->h; p0 += panel) {
        int64_t p1 = min64(p0 + panel, p->h);
        for (int64_t ib = 0; ib < tiles; ib += block_tiles) {
            int64_t rt = min64(block_tiles, tiles - ib), row0 = lo + ib * mr, rows = min64(rt * mr, hi - row0);
            const float *xb = xa + ib * mr * g->kx;
            for (int64_t c0 = p0; c0 < p1; c0 += g->kc_cols) { /* c0, kc: hidden columns */
                int64_t kc = min64(g->kc_cols, p->h - c0);
                for (int64_t jt = c0 / g->width; jt * g->width < c0 + kc; jt++) {
                    /* the passes over this sliver fetch the next one into L2 (see spread_share) */
                    int64_t share = 0;
                    const float *next = spread_share(g, rt, rows, jt, c0 + kc, &share);
                    for (int64_t it = 0; it < rt; it++) {
                        int64_t first;
                        const int r = wb_mlp_tile_rows(mr, !g->pairs, rt, rows, it, &first);
                        /* (a partial tile fetches nothing: its share would lie past the next sliver) */
                        const int64_t ahead = next && r == mr ? share_of(it, share, g->kx * g->nr) : 0;
                        float *panel = panel_at(g, jt, c0, c0 + kc, buf->hidden, c0, rt, it);
                        gated_tile(g, xb, rt, it, jt, r, it == 0, ahead ? next + it * share : NULL, ahead,
                                   panel ? panel : tile, panel != NULL);
                        if (!panel) scatter(g, tile, r, jt, c0, c0 + kc, buf->hidden, c0, rt, it);
                    }
                }
                WB_CPU_LAP(ph, gated_ns, t);
                const int64_t w0 = g->pairs ? c0 / 2 : c0; /* the down K block in words */
                down_block(g, buf->hidden, rt, rows, w0, min64(g->kc_down, g->kh - w0), 0, g->tiles_n, o + row0 * ldo,
                           ldo);
                WB_CPU_LAP(ph, down_ns, t);
            }
        }
    }
    if (p->out_bf16 && lo < hi) round_out(p, o + lo * ldo, ldo, lo, hi - lo, 0, p->n);
}

/* Column split (all tokens in one block): thread t of `team` computes its share of the dual tiles
 * into the shared hidden (every chunk), the team meets, then it runs its share of output tiles. */
static void run_columns(const geometry *g, int t, int team, mlp_buffers *buf, float *hidden, float *o, int64_t ldo,
                        wb_mlp_phases *ph) {
    const wb_mlp_problem *p = g->p;
    const int mr = g->mr;
    const int64_t rt = (p->m + mr - 1) / mr;
    float tile[MAX_MR * MAX_NR / 2] __attribute__((aligned(64)));
    int64_t clock = ph ? wb_cpu_thread_ns() : 0;
    pack_x(g, 0, rt, p->m, buf->xa);
    WB_CPU_LAP(ph, pack_x_ns, clock);
    int64_t jt0 = g->tiles_h * t / team, jt1 = g->tiles_h * (t + 1) / team;
    for (int64_t jt = jt0; jt < jt1; jt++)
        for (int64_t it = 0; it < rt; it++) {
            int64_t first;
            const int r = wb_mlp_tile_rows(mr, !g->pairs, rt, p->m, it, &first);
            float *panel = panel_at(g, jt, 0, p->h, hidden, 0, rt, it);
            gated_tile(g, buf->xa, rt, it, jt, r, it == 0, NULL, 0, panel ? panel : tile, panel != NULL);
            if (!panel) scatter(g, tile, r, jt, 0, p->h, hidden, 0, rt, it);
        }
    WB_CPU_LAP(ph, gated_ns, clock);
#pragma omp barrier
    int64_t jd0 = g->tiles_n * t / team, jd1 = g->tiles_n * (t + 1) / team;
    if (ph) clock = wb_cpu_thread_ns(); /* the wait at the barrier is in none of the phases */
    for (int64_t c0 = 0; c0 < g->kh; c0 += g->kc_down) { /* in words */
        int64_t kc = min64(g->kc_down, g->kh - c0);
        down_block(g, hidden + c0 * rt * mr, rt, p->m, c0, kc, jd0, jd1, o, ldo);
    }
    WB_CPU_LAP(ph, down_ns, clock);
    if (p->out_bf16 && jd0 < jd1) round_out(p, o, ldo, 0, p->m, jd0 * g->nr, min64(jd1 * g->nr, p->n));
}

static geometry geometry_of(const wb_cpu_isa *isa, const wb_mlp_problem *p) {
    geometry g = {.isa = isa, .p = p, .mr = isa->mr, .nr = isa->nr, .width = isa->nr / 2, .pairs = p->pairs};
    g.kx = g.pairs ? (p->k + 1) / 2 : p->k;
    g.kh = g.pairs ? (p->h + 1) / 2 : p->h;
    g.kc_dual = wb_gemm_block_k(isa, g.kx, 1);
    g.kc_down = wb_gemm_block_k(isa, g.kh, 0);
    g.kc_cols = g.pairs ? 2 * g.kc_down : g.kc_down;
    g.tiles_h = (p->h + g.width - 1) / g.width;
    g.tiles_n = (p->n + g.nr - 1) / g.nr;
    g.l2 = wb_gemm_blocking_of(isa).l2;
    return g;
}

/* Equal shares of rows, not of row tiles: 128 tokens on two threads in 12-row tiles were 5 tiles |
 * 5 tiles and 8 rows (60 | 68 rows), and the team waited on the 68; now 64 | 64 rows (since run as
 * 4 tiles and two of 8 rows each: wb_mlp_tile_rows). A share's last tile is then partial more
 * often, and a partial tile costs more per row (the register tile alone on the Xeon model 207,
 * 12x32 at depth 768: 4 rows take 0.41 of a 12-row tile's time, 8 rows 0.67, 1 row 0.30). Under
 * those costs (and a 6-row AVX2 tile's, taken as a 4-row tile's for up to 4 rows) equal rows never
 * gave the slowest thread more time than equal tiles (2, 3, 4 and 8 threads, 4 row tiles a
 * thread up to 2000 rows), and matched the best split a search over the boundaries found (up to
 * 700 rows). */
int64_t wb_mlp_share_row(int64_t m, int t, int team) {
    if (team < 1 || t >= team) return m;
    return t <= 0 ? 0 : m * t / team;
}

/* A block's last two row tiles share their rows evenly where the last would hold fewer than mr / 2
 * (16 rows as 8 + 8, not 12 + 4): the register tile is slow per row below half its rows (the
 * 12x32 tile alone on the Xeon model 207, us at depth 768: 1 row 0.99, 2 1.11, 4 1.41, 6 1.70,
 * 8 2.24, 12 3.36, 0.28 a row from 6 rows on; the AVX2 6x16 tile, forced on the same Xeon: 1 row
 * 0.98, 2 1.02, 4 1.27, 6 1.62). Not with fewer than three tiles: where no pass fetched a B sliver
 * ahead, the first tile over it waits for it from L3, and a shorter one hides less of that wait
 * (16 tokens on 1 thread as 8 + 8, the same Xeon: 1.58-1.62 -> 1.83-1.90 ms a forward). Not on
 * the k-pair paths (split 0): AVX2's sums a 1- or 2-row tile's pair halves on chains of their own,
 * so its rows would round differently in a taller tile; elsewhere each row's sums are the same
 * whichever tile holds it. */
static int splits_last_two(int mr, int split, int64_t rt, int64_t last) { return split && rt >= 3 && 2 * last < mr; }

int wb_mlp_tile_rows(int mr, int split, int64_t rt, int64_t rows, int64_t it, int64_t *first) {
    const int64_t last = rows - (rt - 1) * mr;
    if (it >= rt - 2 && splits_last_two(mr, split, rt, last)) {
        const int64_t upper = (mr + last + 1) / 2;
        *first = (rt - 2) * mr + (it == rt - 2 ? 0 : upper);
        return (int)(it == rt - 2 ? upper : mr + last - upper);
    }
    *first = it * mr;
    return (int)min64(mr, rows - it * mr);
}

int64_t wb_mlp_full_tiles(int mr, int split, int64_t rt, int64_t rows) {
    const int64_t last = rows - (rt - 1) * mr;
    return rt < 1 ? 0 : last == mr ? rt : splits_last_two(mr, split, rt, last) ? rt - 2 : rt - 1;
}

/* Share t packs from tile lo / mr + t on: the shares before it take at most that many tiles, as
 * each rounds its rows up to whole tiles once (tests/c/test_mlp_blocking.c checks it). */
int64_t wb_mlp_share_tile(int64_t m, int mr, int t, int team) {
    return wb_mlp_share_row(m, t, team) / (mr > 0 ? mr : 1) + (t < team ? t : team);
}

wb_mlp_split wb_mlp_plan(const wb_cpu_isa *isa, const wb_mlp_problem *p, int *threads) {
    int nt = p->threads < 1 ? 1 : p->threads > WB_CPU_MAX_THREADS ? WB_CPU_MAX_THREADS : p->threads;
    if (nt > wb_cpu_max_threads()) nt = wb_cpu_max_threads(); /* the core lowers it while the cores are busy */
    /* not worth a fork: the work of a 4 MFLOP GEMM */
    if (2.0 * (double)p->m * (double)p->h * (double)(2 * p->k + p->n) < 4e6) nt = 1;
    const int64_t row_tiles = (p->m + isa->mr - 1) / isa->mr;
    if (nt == 1 || row_tiles >= (int64_t)MIN_TILES_PER_THREAD * nt) {
        if (nt > row_tiles) nt = (int)(row_tiles > 0 ? row_tiles : 1);
        *threads = nt;
        return WB_MLP_SPLIT_TOKENS;
    }
    *threads = nt;
    return WB_MLP_SPLIT_COLUMNS;
}

/* The token split's blocking (see wb_kernels/mlp.h).
 * Blocks: the block's packed x (k floats a row), hidden chunk (kc_down) and f32 output rows (n)
 * in three quarters of L2, leaving the rest to the weight slivers streaming through; blocks
 * evened out over the thread's share.
 * Panels: a block re-reads its packed x and its output rows from L3 for every chunk whatever the
 * panel (the down GEMM's weights of one chunk, kc_down x n, overflow L2 between two chunks), so
 * the panel only sets how far apart two blocks' reads of the same weights are: one chunk (gate, up
 * and down: 2k + n floats a column) is the shortest. That holds while the x and output rows of
 * the thread's tokens (k + n floats a row, re-read once per chunk) fit half of this CPU's share of
 * L3; past that they would come from memory once per chunk, so the panel takes the chunks whose
 * weights fill that half instead (at least one chunk). Measured on a Zen 3 (512 KiB L2, 16 MiB L3
 * share; 768 x 3072 x 768, 1 thread, alternated against the dual GEMM + down GEMM in one process):
 * one chunk in place of three (6.75 MiB of weights) took the fused MLP from 0.88-0.93x the dual's
 * speed to 0.995-1.09x at 128 tokens and 0.98-1.00x at 512 (medians of three runs each); two later
 * runs of experiments/mlp_fused_vs_dual.lua: 0.98-1.00x at 128, 0.96-1.02x at 512 and 1000. */
wb_mlp_blocking wb_mlp_blocking_rule(int mr, int64_t k, int64_t n, int64_t kc_down, int64_t rows, int64_t l2,
                                     int64_t l3_share) {
    const int64_t word = (int64_t)sizeof(float);
    wb_mlp_blocking b;
    if (mr < 1) mr = 1;
    if (kc_down < 1) kc_down = 1;
    int64_t most = l2 * 3 / 4 / (word * mr * (k + kc_down + n));
    if (most < 1) most = 1;
    int64_t share = (rows + mr - 1) / mr;
    int64_t blocks = share > 0 ? (share + most - 1) / most : 1;
    b.block_tiles = share > 0 ? (share + blocks - 1) / blocks : most;
    const int64_t half = l3_share / 2;
    if (word * rows * (k + n) <= half) {
        b.panel = kc_down;
    } else {
        int64_t chunks = half / (word * (2 * k + n)) / kc_down;
        b.panel = (chunks > 1 ? chunks : 1) * kc_down;
    }
    return b;
}

/* Output = bias (or zero) where there is no hidden or no input feature to sum over. */
static void run_empty(const wb_mlp_problem *p) {
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            float v = !p->bias ? 0.0f : p->bias_bf16 ? wb_bf16_to_f32(((const uint16_t *)p->bias)[j]) : ((const float *)p->bias)[j];
            if (p->out_bf16)
                ((uint16_t *)p->out)[i * p->ldo + j] = wb_f32_to_bf16(v);
            else
                ((float *)p->out)[i * p->ldo + j] = v;
        }
}

int wb_mlp_run(const wb_cpu_isa *isa, const wb_mlp_problem *p) {
    if (p->m <= 0 || p->n <= 0) return 0;
    if (p->k <= 0 || p->h <= 0) {
        run_empty(p);
        return 0;
    }
    if (!p->packed_gate_up || !p->packed_down) return -1;
    /* a pair ISA reads x as whole pair words along its rows */
    if (p->pairs != !!isa->bf16_pairs || (p->pairs && (!p->x_bf16 || p->csx != 1 || p->k % 2))) return -2;
    const geometry g = geometry_of(isa, p);
    int nt;
    const wb_mlp_split split = wb_mlp_plan(isa, p, &nt);
    const int64_t row_tiles = (p->m + g.mr - 1) / g.mr;
    /* every buffer reserved before the threads start: none can fail between the barrier's sides */
    const int tokens = split == WB_MLP_SPLIT_TOKENS;
    const wb_gemm_blocking caches = wb_gemm_blocking_of(isa);
    const int64_t most_rows = (p->m + nt - 1) / nt; /* the largest share (wb_mlp_share_row's equal rows) */
    const wb_mlp_blocking bl = wb_mlp_blocking_rule(g.mr, g.kx, p->n, g.kc_down, (most_rows + g.mr - 1) / g.mr * g.mr,
                                                    caches.l2, caches.l3_share);
    const int64_t block_tiles = tokens ? bl.block_tiles : row_tiles;
    for (int t = 0; t < nt; t++) {
        mlp_buffers *b = &thread_buffers[t];
        if (tokens && !wb_cpu_reserve(&b->hidden, &b->hidden_cap, (size_t)(block_tiles * g.mr * g.kc_down))) return -1;
        if (!tokens && !wb_cpu_reserve(&b->xa, &b->xa_cap, (size_t)(row_tiles * g.mr * g.kx))) return -1;
    }
    float *xa = NULL, *hidden = NULL, *o = (float *)p->out;
    int64_t ldo = p->ldo;
    /* thread t packs its share's tiles from wb_mlp_share_tile on: all within row_tiles + nt */
    if (tokens && !(xa = wb_cpu_reserve(&shared_x, &shared_x_cap, (size_t)((row_tiles + nt) * g.mr * g.kx)))) return -1;
    if (!tokens && !(hidden = wb_cpu_reserve(&shared_hidden, &shared_hidden_cap, (size_t)(row_tiles * g.mr * g.kh))))
        return -1;
    if (p->out_bf16) {
        if (!(o = wb_cpu_reserve(&shared_out, &shared_out_cap, (size_t)(p->m * p->n)))) return -1;
        ldo = p->n;
    }
    /* hidden columns per panel. In pairs the rule counts chunks of kc_down words as if each were
     * that many columns (its 2k + n words a column: 2k is right for gate and up in pair words, n
     * counts the down weights at 4 bytes where they take 2): a chunk is 2 kc_down columns, so half
     * as many of them (at least one) keep the panel's weights within the rule's bytes */
    const int64_t chunks = bl.panel / g.kc_down;
    const int64_t panel = !tokens ? p->h : g.pairs ? (chunks / 2 > 1 ? chunks / 2 : 1) * g.kc_cols : bl.panel;
    wb_cpu_spans *spans = wb_cpu_spans_open(split == WB_MLP_SPLIT_TOKENS ? "rows" : "column tiles");
    const int counting = phases_on;
    WB_CPU_PARALLEL(nt, {
        int t = wb_cpu_thread(), team = wb_cpu_team();
        int64_t t0 = wb_cpu_span_start(spans);
        wb_mlp_phases *ph = counting ? &thread_phases[t] : NULL;
        int64_t start = ph ? wb_cpu_thread_ns() : 0;
        if (split == WB_MLP_SPLIT_TOKENS) {
            const int64_t lo = wb_mlp_share_row(p->m, t, team), hi = wb_mlp_share_row(p->m, t + 1, team);
            float *xa_t = xa + wb_mlp_share_tile(p->m, g.mr, t, team) * g.mr * g.kx;
            run_tokens(&g, lo, hi, block_tiles, panel, xa_t, &thread_buffers[t], o, ldo, ph);
            wb_cpu_span_done(spans, t0, hi - lo);
        } else {
            run_columns(&g, t, team, &thread_buffers[t], hidden, o, ldo, ph);
            wb_cpu_span_done(spans, t0, g.tiles_n * (t + 1) / team - g.tiles_n * t / team);
        }
        if (ph) ph->runs++;
        WB_CPU_LAP(ph, total_ns, start);
    });
    return 0;
}
