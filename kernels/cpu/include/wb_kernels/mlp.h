/* mlp.h: the gated MLP as one CPU kernel: out = act(x Wg^T) * (x Wu^T) Wd^T [+ b], the hidden
 * activation produced block by block into the down GEMM's packed-A layout and consumed there,
 * never written to memory as a [tokens, hidden] matrix. Pointers and strides only. */
#ifndef WB_CPU_MLP_H
#define WB_CPU_MLP_H

#include <stdint.h>

#include "wb_kernels/gemm.h"

typedef struct wb_mlp_problem {
    int64_t m, k, h, n;     /* tokens, input features, hidden features, output features */
    const void *x;          /* x[i][p] at x[i*rsx + p*csx]: f32, or bf16 (uint16_t) when x_bf16 */
    int64_t rsx, csx;
    int x_bf16;
    /* on a k-pair ISA (isa->bf16_pairs): bf16 x with csx 1 and k even, read as pair words (any
     * alignment); the weights packed in pairs; the hidden rounded to bf16 as it is packed */
    int pairs;
    const float *packed_gate_up; /* wb_gemm_pack_b(isa, k, h, Wg^T, ..., Wu^T): the dual layout */
    const float *packed_down;    /* wb_gemm_pack_b(isa, h, n, Wd^T, ..., NULL) */
    const void *bias;            /* n values added to the output (f32, or bf16 when bias_bf16), or NULL */
    int bias_bf16;
    void *out; /* out[i][j] at out[i*ldo + j]: f32, or bf16 (rounded once from f32) when out_bf16 */
    int64_t ldo;
    int out_bf16;
    wb_gemm_store act; /* WB_STORE_GEGLU or WB_STORE_SWIGLU */
    int threads;
} wb_mlp_problem;

/* How a run splits its work (for the launch's description and the tests). */
typedef enum wb_mlp_split {
    WB_MLP_SPLIT_TOKENS,  /* each thread owns row blocks of tokens, all hidden and output columns */
    WB_MLP_SPLIT_COLUMNS, /* few tokens: threads split the hidden columns, meet, then the output columns */
} wb_mlp_split;

/* The split and thread count wb_mlp_run uses for p on isa. */
wb_mlp_split wb_mlp_plan(const wb_cpu_isa *isa, const wb_mlp_problem *p, int *threads);

/* The first of the m token rows that thread t of a team owns under the token split (m for t = team):
 * equal shares of rows, not of row tiles (mlp.c says why). */
int64_t wb_mlp_share_row(int64_t m, int t, int team);
/* The first of the mr-row tiles of the shared packed x that share t uses (its rows from its first,
 * rounded up to whole tiles): the shares' tiles never overlap, and all lie in the first
 * ceil(m / mr) + team tiles. */
int64_t wb_mlp_share_tile(int64_t m, int mr, int t, int team);

/* Row tile `it` of a block of rt tiles over `rows` rows: its height, and its first row (from the
 * block's) in *first. Tiles of mr rows, but with `split` the last two share their rows evenly where
 * the last would hold fewer than mr / 2, from three tiles on (mlp.c says why). */
int wb_mlp_tile_rows(int mr, int split, int64_t rt, int64_t rows, int64_t it, int64_t *first);
/* How many of those tiles have all mr rows (they come first). */
int64_t wb_mlp_full_tiles(int mr, int split, int64_t rt, int64_t rows);

/* The token split's blocking for a thread's `rows` tokens on caches of `l2` bytes per core and an
 * `l3_share` per logical CPU: row tiles (of mr rows) per block, and hidden columns per panel (a
 * multiple of the down GEMM's K block kc_down), for k input, n output features (mlp.c says why). */
typedef struct wb_mlp_blocking {
    int64_t block_tiles, panel;
} wb_mlp_blocking;
wb_mlp_blocking wb_mlp_blocking_rule(int mr, int64_t k, int64_t n, int64_t kc_down, int64_t rows, int64_t l2,
                                     int64_t l3_share);

/* Where a run's time goes, opt-in (experiments/mlp_fused_vs_dual.lua prints it): thread CPU
 * time in ns summed over the threads, per phase: packing x; the dual tiles (activation in
 * registers, stored into the hidden chunk); the down GEMM over the chunks; total is the
 * threads' whole time inside the kernel (the rest: the column split's barrier, bf16 rounding,
 * loop overhead). Counting reads the clock twice per phase of a block and hidden chunk. */
typedef struct wb_mlp_phases {
    int64_t runs;
    int64_t pack_x_ns, gated_ns, down_ns, total_ns;
} wb_mlp_phases;
/* on: zero the counts and count the runs that follow; off: stop counting (the counts stay). */
void wb_mlp_phases_count(int on);
wb_mlp_phases wb_mlp_phases_read(void);

/* Runs the MLP on an f32 ISA, or on a k-pair one for a problem with `pairs` set. Returns 0; -1
 * when a buffer cannot be allocated or the packed weights are missing; -2 when `pairs` does not
 * match the ISA or x does not meet its conditions (out is then incomplete). A problem with no
 * input or hidden feature needs no packed weights: out is the bias, or zero. */
int wb_mlp_run(const wb_cpu_isa *isa, const wb_mlp_problem *p);

#endif
