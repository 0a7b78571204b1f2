/* gemm.c: the portable driver around the per-ISA microkernels: BLIS's five loops (NC columns,
 * KC depth, MC rows, then NR x MR register tiles), packing from arbitrary strides (on AVX-512 a
 * row-major operand by the tiles' first pass over it) so that nn/nt/tn/tt layouts all run the same
 * microkernel on packed slivers, edge tiles through small padded buffers, and one OpenMP
 * region that splits the N tiles (or the M tiles when N is narrow) across threads. */
#include <stdlib.h>
#include <string.h>

#include "wb_kernels/bf16.h"
#include "wb_kernels/gemm.h"
#include "wb_kernels/spans.h"

#define MAX_MR      12
#define MAX_NR      32
/* The dual GEMM keeps K in one block up to this depth (no partial sums to spill). */
#define DUAL_FULL_K 1024

typedef struct buffers {
    float *a, *b, *partial;
    size_t a_cap, b_cap, partial_cap;
} buffers;

/* Per-thread packing buffers, allocated once and reused (a first touch inside a timed call
 * would otherwise add page faults to it). Reachable from here, so never reported as leaks. */
static buffers thread_buffers[WB_CPU_MAX_THREADS];

/* The opt-in phase counts (wb_gemm_phases_count), one slot per thread. */
static int phases_on;
static wb_gemm_phases thread_phases[WB_CPU_MAX_THREADS];
static int64_t wall_ns, wall_team_ns;


void wb_gemm_phases_count(int on) {
    if (on) memset(thread_phases, 0, sizeof thread_phases), wall_ns = 0, wall_team_ns = 0;
    phases_on = on;
}

wb_gemm_phases wb_gemm_phases_read(void) {
    wb_gemm_phases sum = {.wall_ns = wall_ns, .wall_team_ns = wall_team_ns};
    for (int t = 0; t < WB_CPU_MAX_THREADS; t++) {
        const wb_gemm_phases *p = &thread_phases[t];
        sum.runs = p->runs > sum.runs ? p->runs : sum.runs;
        sum.pack_a_ns += p->pack_a_ns, sum.pack_b_ns += p->pack_b_ns, sum.tiles_ns += p->tiles_ns;
        sum.epilogue_ns += p->epilogue_ns, sum.total_ns += p->total_ns;
    }
    return sum;
}

float *wb_cpu_reserve(float **p, size_t *cap, size_t floats) {
    if (floats <= *cap && *p) return *p;
    free(*p);
    size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    *p = aligned_alloc(64, bytes ? bytes : 64);
    *cap = *p ? floats : 0;
    return *p;
}

static int64_t tile_width(const wb_cpu_isa *isa, int dual) { return dual ? isa->nr / 2 : isa->nr; }
/* How many tiles cover N columns (the packed-B tiles, the N split of the threads). */
static int64_t tile_count(const wb_cpu_isa *isa, int64_t n, int dual) {
    return (n + tile_width(isa, dual) - 1) / tile_width(isa, dual);
}

double wb_gemm_tile_gflops(const wb_cpu_isa *isa, int64_t kc, int64_t iters, wb_gemm_store store) {
    const int mr = isa->mr, nr = isa->nr;
    if (kc < 1) kc = 1;
    if (iters < 1) iters = 1;
    float *a = aligned_alloc(64, (size_t)(kc * mr + 16) * sizeof(float));
    float *b = aligned_alloc(64, (size_t)(kc * nr + 16) * sizeof(float));
    float *c = aligned_alloc(64, (size_t)(mr * nr) * sizeof(float));
    double gflops = -1;
    if (a && b && c) {
        /* small values, finite as f32 and as bf16 pairs alike */
        for (int64_t i = 0; i < kc * mr + 16; i++) a[i] = 1e-3f * (float)(i % 7);
        for (int64_t i = 0; i < kc * nr + 16; i++) b[i] = 1e-3f * (float)(i % 5);
        /* a gated store (GEGLU, SWIGLU) writes the NR/2 columns of a dual tile */
        const int gated = store == WB_STORE_GEGLU || store == WB_STORE_SWIGLU;
        wb_gemm_tile t = {.kc = kc, .a = a, .b = b, .c_out = c, .ldc_out = gated ? nr / 2 : nr, .store = store};
        isa->ukernel(&t, mr); /* warm */
        const int64_t t0 = wb_cpu_thread_ns();
        for (int64_t i = 0; i < iters; i++) isa->ukernel(&t, mr);
        const int64_t ns = wb_cpu_thread_ns() - t0;
        const double flops = 2.0 * mr * nr * (double)kc * (double)iters * (isa->bf16_pairs ? 2 : 1);
        gflops = ns > 0 ? flops / (double)ns : -1;
    }
    free(a), free(b), free(c);
    return gflops;
}

/* Packs B tile `jt` (NR lanes) for depths [pc, pc + kc) into dst[kk * NR + lane]. Lanes past N
 * are zero. Dual tiles hold NR/2 gate columns then the same NR/2 up columns. */
static void pack_b_tile(const wb_cpu_isa *isa, int64_t n, const float *b, int64_t rsb, int64_t csb, const float *b_up,
                        int64_t jt, int64_t pc, int64_t kc, float *dst) {
    const int nr = isa->nr, dual = b_up != NULL;
    const int64_t width = tile_width(isa, dual);
    const float *lane[MAX_NR] = {0};
    for (int c = 0; c < nr; c++) {
        int64_t col = jt * width + (dual ? c % width : c);
        lane[c] = col < n ? ((dual && c >= width) ? b_up : b) + col * csb + pc * rsb : NULL;
    }
    if (!dual && csb == 1 && lane[nr - 1]) { /* row-major B, full tile: rows are contiguous */
        for (int64_t kk = 0; kk < kc; kk++)
            memcpy(dst + kk * nr, lane[0] + kk * rsb, sizeof(float) * (size_t)nr);
        return;
    }
    if (rsb == 1 && isa->pack_rows) { /* lanes contiguous along k (B = W^T): transposes */
        int full = 1;
        for (int c = 0; c < nr; c++)
            full &= lane[c] != NULL;
        if (full) {
            isa->pack_rows(dst, lane, nr, kc);
            return;
        }
    }
    for (int c = 0; c < nr; c++) { /* each lane walks its column; rsb == 1 reads contiguously */
        if (!lane[c]) {
            for (int64_t kk = 0; kk < kc; kk++)
                dst[kk * nr + c] = 0.0f;
            continue;
        }
        const float *src = lane[c];
        if (rsb == 1)
            for (int64_t kk = 0; kk < kc; kk++)
                dst[kk * nr + c] = src[kk];
        else
            for (int64_t kk = 0; kk < kc; kk++)
                dst[kk * nr + c] = src[kk * rsb];
    }
}

/* Packs rows [it * MR, ...) of A over depths [pc, pc + kc) into dst[kk * MR + r]. Rows past M
 * are left unset: the microkernel only reads the rows it was told exist. */
static void pack_a_tile(const wb_cpu_isa *isa, const wb_gemm_problem *p, int64_t it, int64_t pc, int64_t kc,
                        float *dst) {
    const int mr = isa->mr;
    int64_t row0 = it * mr, rows = p->m - row0 < mr ? p->m - row0 : mr;
    if (p->a_bf16) { /* widened on the way: a bf16 is the top half of an f32 */
        const uint16_t *a = (const uint16_t *)p->a;
        if (p->csa == 1 && isa->pack_rows_bf16) {
            const uint16_t *src[MAX_MR];
            for (int r = 0; r < mr; r++)
                src[r] = a + (row0 + (r < rows ? r : 0)) * p->rsa + pc;
            isa->pack_rows_bf16(dst, src, mr, kc);
            return;
        }
        for (int64_t r = 0; r < rows; r++) {
            const uint16_t *src = a + (row0 + r) * p->rsa + pc * p->csa;
            for (int64_t kk = 0; kk < kc; kk++)
                dst[kk * mr + r] = wb_bf16_to_f32(src[kk * p->csa]);
        }
        return;
    }
    if (p->rsa == 1 && rows == mr) { /* column-major A: MR rows are contiguous at each depth */
        for (int64_t kk = 0; kk < kc; kk++)
            memcpy(dst + kk * mr, p->a + row0 + (pc + kk) * p->csa, sizeof(float) * (size_t)mr);
        return;
    }
    /* row-major A: rows contiguous along k; one row (a decode step) is cheaper copied alone than
     * transposed with MR - 1 repeats of it */
    if (p->csa == 1 && isa->pack_rows && rows > 1) {
        const float *src[MAX_MR];
        for (int r = 0; r < mr; r++)
            src[r] = p->a + (row0 + (r < rows ? r : 0)) * p->rsa + pc;
        isa->pack_rows(dst, src, mr, kc); /* rows past M repeat row 0: computed, never stored */
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *src = p->a + (row0 + r) * p->rsa + pc * p->csa;
        if (p->csa == 1)
            for (int64_t kk = 0; kk < kc; kk++)
                dst[kk * mr + r] = src[kk];
        else
            for (int64_t kk = 0; kk < kc; kk++)
                dst[kk * mr + r] = src[kk * p->csa];
    }
}

size_t wb_gemm_packed_b_floats(const wb_cpu_isa *isa, int64_t k, int64_t n, int dual) {
    int64_t tiles = tile_count(isa, n, dual);
    return (size_t)(tiles * (k > 0 ? k : 1) * isa->nr);
}

/* The depth of one K block: the blocking's kc, or all of K for a dual GEMM up to DUAL_FULL_K
 * (unless the sizes are forced: a test blocking splits the dual GEMM's K too). */
static int64_t block_k(const wb_gemm_blocking *blocking, int64_t k, int dual) {
    if (dual && k <= DUAL_FULL_K && blocking->forced != WB_BLOCKING_FORCED_SIZES) return k > 0 ? k : 1;
    return blocking->kc;
}

int64_t wb_gemm_block_k(const wb_cpu_isa *isa, int64_t k, int dual) {
    const wb_gemm_blocking blocking = wb_gemm_blocking_of(isa);
    return block_k(&blocking, k, dual);
}

/* Packed B is block-major, as the driver walks it: K block by K block, and within a block tile
 * after tile (kc x NR each), so the slivers one block's pass reads are one sequential stream
 * (what the microkernel's prefetch runs ahead on). */
void wb_gemm_pack_b(const wb_cpu_isa *isa, int64_t k, int64_t n, const float *b, int64_t rsb, int64_t csb,
                    const float *b_up, float *packed) {
    int64_t tiles = tile_count(isa, n, b_up != NULL);
    const wb_gemm_blocking blocking = wb_gemm_blocking_of(isa);
    const int64_t kcb = block_k(&blocking, k, b_up != NULL);
    WB_CPU_PARALLEL(tiles * k > 65536 ? wb_cpu_max_threads() : 1, {
        int64_t lo, hi;
        wb_cpu_share(tiles, &lo, &hi);
        for (int64_t jt = lo; jt < hi; jt++)
            for (int64_t pc = 0; pc < k; pc += kcb) {
                int64_t kc = k - pc < kcb ? k - pc : kcb;
                pack_b_tile(isa, n, b, rsb, csb, b_up, jt, pc, kc, packed + pc * tiles * isa->nr + jt * kc * isa->nr);
            }
    });
}

/* A tile whose output columns run past N: compute into padded buffers, copy the valid part. */
static void edge_tile(const wb_cpu_isa *isa, wb_gemm_tile t, int rows, int64_t cols, int c_in_is_c, int64_t bias_cols) {
    float tin[MAX_MR * MAX_NR], tout[MAX_MR * MAX_NR], tbias[MAX_NR];
    const int nr = isa->nr;
    if (t.c_in && c_in_is_c) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < nr; j++)
                tin[i * nr + j] = j < cols ? t.c_in[i * t.ldc_in + j] : 0.0f;
        t.c_in = tin;
        t.ldc_in = nr;
    }
    if (t.bias) {
        for (int j = 0; j < nr; j++)
            tbias[j] = j < bias_cols ? t.bias[j] : 0.0f;
        t.bias = tbias;
    }
    float *out = t.c_out;
    int64_t ldc = t.ldc_out;
    t.c_out = tout;
    t.ldc_out = nr;
    isa->ukernel(&t, rows);
    for (int i = 0; i < rows; i++)
        memcpy(out + i * ldc, tout + i * nr, sizeof(float) * (size_t)cols);
}

/* Packing by the first pass (wb_gemm_first_pass_packs): where the ISA's microkernel can read a
 * row-major A and B in place (AVX-512's), the first pass over a full B sliver reads it there and
 * stores its two loaded vectors into the packed sliver, and a row-major A, where few slivers pass
 * over it (PANEL_MOST_PASSES), is never packed into slivers: the first pass over a row tile reads
 * its rows in place and copies them, a chunk of 16 (or 8) floats a row at a time, into a row panel,
 * which the later passes read the same way, a broadcast per row and step. The products are the
 * same bits. The separate packing loops read A and B from L3 once more and stall on it between
 * the tiles. Measured on the Xeon model 207, 1 thread, n = 384 (a C probe, best of 30 calls): the
 * driver 0.730 ms packing both up front, 0.700 with the first passes storing each A broadcast's
 * lane 0 into the packed sliver (the previous form: 12 scalar stores per step made those passes
 * 1.5x slower), 0.680 with the row panel; the tiles alone on slivers packed beforehand, 0.658.
 * Against the previous form (old and new builds in alternated processes, best of 15-40 calls,
 * five pairs, 1 thread; then four pairs on 2 threads): squares n = 384 1.031x / 1.098x, 512 1.024x
 * / 1.046x, 768 1.011x / 1.027x, 1024 1.008x / 1.041x, 2048 1.002x / 1.004x (A packed up front in
 * both); linears x W^T (W packed once), 768 wide and 3072 deep, at 16 / 128 / 512 tokens 1.042x /
 * 0.996x / 1.003x on 1 thread, 1.009-1.013x on 2; 3072 wide (A up front in both) 0.993-1.003x.
 * The AVX2 tile (forced on the Xeon) measured its first passes 0.98-0.99x: it packs up front. */
static int first_pass_on = 1;
/* Read from a row panel, the passes over an A row tile ran 1-2.5% slower than from a packed sliver
 * where many slivers pass over it (the linears 3072 wide: 96 slivers; the panel's passes alternated
 * with packing up front in one process, nine rounds, 1 thread), and 1.8-3.8% faster where few do
 * (squares of 512 to 1024: 16 to 32 slivers); so A is packed up front where more slivers than this
 * pass over its row tiles (a thread's share of the columns, in blocks of at most nc). */
#define PANEL_MOST_PASSES 32

void wb_gemm_first_pass_packs(int on) { first_pass_on = on != 0; }
int wb_gemm_first_pass_packs_on(void) { return first_pass_on; }

/* When the passes over a B sliver fetch the next sliver ahead: from 4 passes (full row tiles in
 * an MC block, an edge tile fetches nothing; with fewer, each pass would fetch a quarter or more
 * of a sliver on top of its own first-pass prefetch), for slivers of 32 KiB or more, and when
 * the slivers of one block take more than half of L2 (read from the machine; 2 MiB assumed
 * where sysfs does not say), so that a sliver's first pass would find it in L3 or memory.
 * Measured on the AVX-512 Xeon (2 MiB L2; the change and the driver before it alternated per
 * round in one process): 96 KiB slivers of
 * 9-18 MiB panels (the dual GEMM) 1.06-1.11x, 48 KiB (the f32 tile at kc = 384, its K block
 * then) in the MLP's linears 1.02-1.05x; but 0.98x at n = 512 and 1024 on 2 threads, whose panels
 * fit L2 (hence the panel rule); on its AVX2 path 48 KiB dual slivers 1.02-1.07x, 16 KiB slivers
 * (the AVX2 tile at kc = 256 then, which the hardware prefetchers keep up with) 0.97-0.99x. */
#define SPREAD_MIN_PASSES 4
#define SPREAD_MIN_SLIVER_BYTES (32 << 10)

int wb_gemm_spread_pays(int64_t passes, int64_t sliver_bytes, int64_t block_bytes, int64_t l2) {
    return passes >= SPREAD_MIN_PASSES && sliver_bytes >= SPREAD_MIN_SLIVER_BYTES && block_bytes > l2 / 2;
}

/* The B sliver the driver runs after tile `jt` of the block [jc, jc_end) (bp: the block's first
 * sliver), or NULL: the next tile of the block; after the last, the block's first again when
 * another MC block follows; else, for prepacked B, the first sliver of the next K block (in
 * memory right after this one). *floats: its length. */
static const float *next_sliver(const wb_cpu_isa *isa, const wb_gemm_problem *p, const float *bp, int64_t tile_stride,
                                int64_t jc, int64_t jc_end, int64_t jt, int more_rows, int64_t pc, int64_t kc,
                                int64_t kcb, int64_t tiles_n, int64_t *floats) {
    *floats = kc * isa->nr;
    if (jt + 1 < jc_end) return bp + (jt + 1 - jc) * tile_stride;
    if (more_rows) return bp;
    if (!p->packed_b || pc + kc >= p->k) return NULL;
    int64_t next_kc = p->k - (pc + kc) < kcb ? p->k - (pc + kc) : kcb;
    *floats = next_kc * isa->nr;
    return p->packed_b + (pc + kc) * tiles_n * isa->nr + jc * next_kc * isa->nr;
}

/* Where B is read in place by each full sliver's first pass (first_b; not dual), that pass
 * finds B's rows, and the lines of the packed sliver it writes (last written a GEMM ago), in L3
 * or memory. On the AVX-512 Xeon (model 207) those passes took 2.3-2.9x as long as the others at
 * n = 512 (rdtsc around each tile of a driver-like loop: 4% of the GEMM); one such tile alone,
 * kc = 512 and B rows 2 KiB apart, TSC ticks per step: 11 with both hot, 26-27 with both in L3,
 * 15 (20) with B hot and the packed lines fetched into L1 (L2) beforehand. So the passes over
 * the previous sliver fetch both into L2, each its share (pf_ld, pf_write), and the first pass
 * fetches its packed lines into L1 a few steps ahead (PFW_STEPS): the n = 512 GEMM 1.010-1.017x
 * (medians of alternated pairs, 1 thread, four runs), other sizes and the linears within noise
 * of 1.00x. This runs for slivers of any size (where the passes are SPREAD_MIN_PASSES or more),
 * not under the packed slivers' spread rule: B in place is never in L2 in time. Which sliver: in
 * the first MC block (where first passes run), the next full sliver of the block; in the last MC
 * block of a K block, the block's first sliver of the next K block. NULL where there is none.
 * *floats: the rows' floats (that K block's depth x NR). */
static const float *in_place_next(const wb_gemm_problem *p, int64_t width, int64_t jc, int64_t jc_end, int64_t jt,
                                  int first_rows, int last_rows, int64_t pc, int64_t kc, int64_t kcb,
                                  int64_t *floats) {
    if (first_rows && jt + 1 < jc_end && (jt + 2) * width <= p->n) {
        *floats = kc * width;
        return p->b + (jt + 1) * width + pc * p->rsb;
    }
    if (last_rows && jt + 1 == jc_end && pc + kc < p->k && (jc + 1) * width <= p->n) {
        *floats = (p->k - (pc + kc) < kcb ? p->k - (pc + kc) : kcb) * width;
        return p->b + jc * width + (pc + kc) * p->rsb;
    }
    return NULL;
}

/* The epilogue (a generated one: wb_kernels/generated.h) runs on blocks of C: the rows of an MC
 * block times a run of column tiles, called when the run's last tile is stored. The run is as long
 * as keeps the block, and the B slivers that pass through L2 while its tiles are computed, within
 * this part of L2 (at least one tile), so the block is read back from L2; each call walks its rows
 * along contiguous columns, so the epilogue's other inputs stream (hardware prefetchers follow a
 * row; they did not follow one line per row, rows a whole output row apart, when it was called on
 * each register tile: that cost the GEMM more than the separate pointwise kernel takes). */
#define EPILOGUE_L2_PART 2

/* The size of `count` items split into the fewest blocks of at most `most` items, evened out. */
static int64_t balanced(int64_t count, int64_t most) {
    if (count <= 0) return most;
    if (count <= most) return count; /* one block (and no division: a tiny GEMM's common case) */
    int64_t blocks = (count + most - 1) / most;
    return (count + blocks - 1) / blocks;
}

/* One thread's share: N tiles [jt0, jt1) x M tiles [it0, it1), under `blocking` (worked out once
 * per GEMM, before the threads start). Returns 0, or -1 when a buffer cannot be allocated. */
static int run_share(const wb_cpu_isa *isa, const wb_gemm_problem *p, int64_t jt0, int64_t jt1, int64_t it0,
                     int64_t it1, const wb_gemm_blocking *bl, buffers *buf, wb_gemm_phases *ph) {
    const int mr = isa->mr, nr = isa->nr, dual = p->b_up != NULL;
    const int64_t width = tile_width(isa, dual), k = p->k, l2 = bl->l2;
    const int64_t kcb = block_k(bl, k, dual), tiles_n = tile_count(isa, p->n, dual);
    /* panels and MC blocks of equal size (in tiles), none above the blocking's: 43 row tiles
     * with mc = 14 tiles run as 11 + 11 + 11 + 10, not 14 + 14 + 14 + 1 */
    const int64_t nc_tiles = balanced(jt1 - jt0, bl->nc / nr > 0 ? bl->nc / nr : 1);
    const int64_t mc_tiles = balanced(it1 - it0, bl->mc / mr > 0 ? bl->mc / mr : 1);
    if (jt0 >= jt1 || it0 >= it1) return 0;
    /* the epilogue's run of column tiles: C's rows of an MC block and the B slivers read meanwhile */
    const int64_t block_rows = (mc_tiles < it1 - it0 ? mc_tiles : it1 - it0) * mr, depth = k < kcb ? k : kcb;
    int64_t epi_tiles = l2 / EPILOGUE_L2_PART / ((block_rows + depth) * nr * (int64_t)sizeof(float));
    if (epi_tiles < 1) epi_tiles = 1;
    /* A row-major (f32) A, where at most PANEL_MOST_PASSES slivers pass over a row tile, is copied
     * into a row panel by the first pass over each row tile, which reads it in place; a row-major
     * B's full slivers are packed by their first pass (a full row tile of the first MC block).
     * See first_pass_on. */
    const int first_a = first_pass_on && isa->first_pass_packs && !p->a_bf16 && p->csa == 1 && p->rsa > 0 &&
                        nc_tiles <= PANEL_MOST_PASSES;
    const int first_b = first_pass_on && isa->first_pass_packs && !p->packed_b && p->csb == 1 && p->rsb > 0 &&
                        (it0 + 1) * mr <= p->m;
    /* a row panel's rows (first_a): an odd number of cache lines, at least one more than a block's
     * depth, so that twelve rows fall in twelve L1 sets whatever kc is (64 sets; K = 1008 made
     * rows of 64 lines, all in one set) */
    const int64_t a_lines = (kcb + 15) / 16 + 1, a_ld = first_a ? 16 * (a_lines | 1) : 0;
    if (!wb_cpu_reserve(&buf->a, &buf->a_cap, (size_t)(mc_tiles * mr * (first_a ? a_ld : kcb)))) return -1;
    if (!p->packed_b && !wb_cpu_reserve(&buf->b, &buf->b_cap, (size_t)(nc_tiles * nr * kcb))) return -1;
    /* Dual with K split: partial sums of the full NR-wide tiles live here between K blocks. */
    const int64_t sld = (jt1 - jt0) * nr, srows = (it1 - it0) * mr;
    if (dual && kcb < k && !wb_cpu_reserve(&buf->partial, &buf->partial_cap, (size_t)(sld * srows))) return -1;
    int64_t clock = ph ? wb_cpu_thread_ns() : 0;

    for (int64_t jc = jt0; jc < jt1; jc += nc_tiles) {
        int64_t jc_end = jc + nc_tiles < jt1 ? jc + nc_tiles : jt1;
        for (int64_t pc = 0; pc == 0 || pc < k; pc += kcb) {
            int64_t kc = k - pc < kcb ? k - pc : kcb;
            int first = pc == 0, last = pc + kc >= k;
            const float *bp;
            int64_t tile_stride;
            if (p->packed_b) {
                bp = p->packed_b + pc * tiles_n * nr + jc * kc * nr;
                tile_stride = kc * nr;
            } else {
                for (int64_t jt = jc; jt < jc_end; jt++)
                    if (!first_b || (jt + 1) * width > p->n) /* edge slivers (zero lanes past N) here */
                        pack_b_tile(isa, p->n, p->b, p->rsb, p->csb, p->b_up, jt, pc, kc, buf->b + (jt - jc) * kc * nr);
                bp = buf->b;
                tile_stride = kc * nr;
                WB_CPU_LAP(ph, pack_b_ns, clock);
            }
            for (int64_t ic = it0; ic < it1; ic += mc_tiles) {
                int64_t ic_end = ic + mc_tiles < it1 ? ic + mc_tiles : it1;
                if (!first_a) {
                    for (int64_t it = ic; it < ic_end; it++)
                        pack_a_tile(isa, p, it, pc, kc, buf->a + (it - ic) * kc * mr);
                    WB_CPU_LAP(ph, pack_a_ns, clock);
                }
                /* the passes over a sliver that can fetch ahead: its full row tiles (the
                 * microkernel's edge-row instances do not); whether they do, for the whole block */
                const int64_t passes = ic_end - ic - (ic_end * mr > p->m ? 1 : 0);
                const int64_t sliver_bytes = kc * nr * (int64_t)sizeof(float);
                const int spread = wb_gemm_spread_pays(passes, sliver_bytes, (jc_end - jc) * sliver_bytes, l2);
                int64_t epi_jt = jc;
                for (int64_t jt = jc; jt < jc_end; jt++) {
                    int64_t col0 = jt * width, cols = p->n - col0 < width ? p->n - col0 : width;
                    /* each pass over this sliver fetches its share of the next one into L2; where the
                     * next one's first pass reads B in place, the rows it reads and the lines it packs
                     * them into (in_place_next) */
                    int64_t next_floats = 0, share = 0, next_ld = 0;
                    const float *next = NULL;
                    float *next_pack = NULL;
                    if (first_b && !dual && passes >= SPREAD_MIN_PASSES)
                        next = in_place_next(p, width, jc, jc_end, jt, ic == it0, ic_end == it1, pc, kc, kcb,
                                             &next_floats);
                    if (next) { /* whole rows in each share */
                        next_ld = p->rsb, share = (next_floats / nr + passes - 1) / passes * nr;
                        next_pack = jt + 1 < jc_end ? buf->b + (jt + 1 - jc) * tile_stride : buf->b;
                    } else if (spread) {
                        next = next_sliver(isa, p, bp, tile_stride, jc, jc_end, jt, ic_end < it1, pc, kc, kcb, tiles_n,
                                           &next_floats);
                        if (next) share = (next_floats + passes - 1) / passes;
                    }
                    for (int64_t it = ic; it < ic_end; it++) {
                        int64_t row0 = it * mr;
                        int rows = (int)(p->m - row0 < mr ? p->m - row0 : mr);
                        wb_gemm_tile t = {.kc = kc,
                                          .a = buf->a + (it - ic) * kc * mr,
                                          .b = bp + (jt - jc) * tile_stride,
                                          .store = WB_STORE_PLAIN,
                                          .prefetch_b = it == ic};
                        if (first_a && jt == jc) { /* read in place, copied into the row panel */
                            t.a_pack = buf->a + (it - ic) * mr * a_ld, t.a_pack_ld = a_ld;
                            t.a = p->a + row0 * p->rsa + pc, t.lda = p->rsa;
                        } else if (first_a) { /* the row panel */
                            t.a = buf->a + (it - ic) * mr * a_ld, t.lda = a_ld;
                        }
                        if (first_b && ic == it0 && it == ic && cols == width) {
                            t.b_pack = buf->b + (jt - jc) * tile_stride;
                            t.b = p->b + col0 + pc * p->rsb, t.ldb = p->rsb;
                            t.b_hi = dual ? p->b_up + col0 + pc * p->rsb : t.b + nr / 2;
                        }
                        const int64_t done = (it - ic) * share;
                        if (next && rows == mr && done < next_floats) { /* (no pointer past the sliver) */
                            t.pf_next = next + (next_ld ? done / nr * next_ld : done);
                            t.pf_floats = next_floats - done < share ? next_floats - done : share;
                            t.pf_ld = next_ld;
                            if (next_ld) t.pf_write = next_pack + done;
                        }
                        float *c = p->c + row0 * p->ldc + col0;
                        int c_in_is_c = 0, out_is_c = 1;
                        if (!dual) {
                            t.c_in = first ? NULL : c, t.ldc_in = p->ldc, c_in_is_c = 1;
                            t.bias = first && p->bias ? p->bias + col0 : NULL;
                            t.c_out = c, t.ldc_out = p->ldc;
                            t.store = last ? p->store : WB_STORE_PLAIN;
                        } else {
                            float *s = buf->partial ? buf->partial + (row0 - it0 * mr) * sld + (jt - jt0) * nr : NULL;
                            t.c_in = first ? NULL : s, t.ldc_in = sld;
                            t.bias = first && p->dual_bias ? p->dual_bias + jt * nr : NULL; /* padded: all NR */
                            if (last)
                                t.c_out = c, t.ldc_out = p->ldc, t.store = p->store; /* GEGLU or SWIGLU */
                            else
                                t.c_out = s, t.ldc_out = sld, out_is_c = 0;
                        }
                        if (cols < width && out_is_c) /* only C is narrower than a tile */
                            edge_tile(isa, t, rows, cols, c_in_is_c, dual ? nr : cols);
                        else
                            isa->ukernel(&t, rows);
                    }
                    if (last && !dual && p->epilogue && (jt + 1 - epi_jt == epi_tiles || jt + 1 == jc_end)) {
                        /* the run's block, just stored: rows of this MC block, columns [epi_jt, jt] */
                        int64_t r0 = ic * mr, r1 = ic_end * mr < p->m ? ic_end * mr : p->m;
                        int64_t c0 = epi_jt * width, c1 = (jt + 1) * width < p->n ? (jt + 1) * width : p->n;
                        WB_CPU_LAP(ph, tiles_ns, clock);
                        p->epilogue(p->epilogue_ctx, p->c + r0 * p->ldc + c0, p->ldc, r0, c0, r1 - r0, c1 - c0);
                        WB_CPU_LAP(ph, epilogue_ns, clock);
                        epi_jt = jt + 1;
                    }
                }
                WB_CPU_LAP(ph, tiles_ns, clock);
            }
        }
    }
    return 0;
}

int wb_gemm_run(const wb_cpu_isa *isa, const wb_gemm_problem *problem) {
    const int dual = problem->b_up != NULL;
    if (problem->m <= 0 || problem->n <= 0) return 0;
    const int64_t width = tile_width(isa, dual);
    const int64_t tn = tile_count(isa, problem->n, dual), tm = (problem->m + isa->mr - 1) / isa->mr;
    wb_gemm_problem local = *problem;
    const wb_gemm_problem *p = &local;
    float *interleaved = NULL;
    if (dual && (problem->bias || problem->bias_up)) {
        /* the dual tile's lanes are [gate | up]: give each tile its two biases the same way */
        interleaved = malloc(sizeof(float) * (size_t)(tn * isa->nr));
        if (!interleaved) return -1;
        for (int64_t jt = 0; jt < tn; jt++)
            for (int64_t c = 0; c < width; c++) {
                int64_t col = jt * width + c;
                interleaved[jt * isa->nr + c] = col < p->n && problem->bias ? problem->bias[col] : 0.0f;
                interleaved[jt * isa->nr + width + c] = col < p->n && problem->bias_up ? problem->bias_up[col] : 0.0f;
            }
        local.dual_bias = interleaved;
    }
    const wb_gemm_blocking blocking = wb_gemm_blocking_of(isa);
    int nt = p->threads < 1 ? 1 : p->threads > WB_CPU_MAX_THREADS ? WB_CPU_MAX_THREADS : p->threads;
    /* not worth a fork (a pair ISA's k counts pairs: two multiply-adds each) */
    if (2.0 * (double)p->m * (double)p->n * (double)p->k * (isa->bf16_pairs ? 2 : 1) < 4e6) nt = 1;
    if (nt > wb_cpu_max_threads()) nt = wb_cpu_max_threads(); /* the core lowers it while the cores are busy */
    int split_n = tn >= 2 * nt || tn >= tm;
    int64_t tiles = split_n ? tn : tm;
    if (nt > tiles) nt = (int)tiles;
    wb_cpu_spans *spans = wb_cpu_spans_open(split_n ? "column tiles" : "row tiles");
    /* only the team's slots are zeroed: clearing all WB_CPU_MAX_THREADS took half of this
     * function's time in a tiny GEMM */
    int failed_by[WB_CPU_MAX_THREADS], team = 1; /* team: the threads that ran, when counting */
    for (int t = 0; t < nt; t++) failed_by[t] = 0;
    const int counting = phases_on;
    const int64_t wall0 = counting ? wb_cpu_clock_ns() : 0;
    WB_CPU_PARALLEL(nt, {
        int t = wb_cpu_thread();
        int64_t t0 = wb_cpu_span_start(spans), lo, hi;
        wb_gemm_phases *ph = counting ? &thread_phases[t] : NULL;
        int64_t start = ph ? wb_cpu_thread_ns() : 0;
        wb_cpu_share(tiles, &lo, &hi);
        if (split_n)
            failed_by[t] = run_share(isa, p, lo, hi, 0, tm, &blocking, &thread_buffers[t], ph);
        else
            failed_by[t] = run_share(isa, p, 0, tn, lo, hi, &blocking, &thread_buffers[t], ph);
        wb_cpu_span_done(spans, t0, hi - lo);
        if (ph) ph->runs++;
        if (ph && t == 0) team = wb_cpu_team();
        WB_CPU_LAP(ph, total_ns, start);
    });
    if (counting) {
        const int64_t wall = wb_cpu_clock_ns() - wall0;
        wall_ns += wall, wall_team_ns += wall * team;
    }
    free(interleaved);
    for (int t = 0; t < nt; t++)
        if (failed_by[t]) return -1;
    return 0;
}
