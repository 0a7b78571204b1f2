/* gemm.h: the CPU GEMM engine (BLIS-style loops around one microkernel per ISA) and the
 * vectorised activations that share its math. Kernels see pointers and strides only: no
 * tensors, no profiler. C = epilogue(A·B [+ bias]); or, dual, C = gelu_tanh(A·Bg) * (A·Bu). */
#ifndef WB_CPU_GEMM_H
#define WB_CPU_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include <wb/abi/act_list.h>
#include "wb_kernels/generated.h"

/* What happens to the accumulators when a tile is stored after its last K block. */
typedef enum wb_gemm_store {
    WB_STORE_PLAIN = 0,
    WB_STORE_GELU_TANH,
    WB_STORE_GELU_ERF,
    WB_STORE_GEGLU, /* dual only: out[j] = gelu_tanh(acc[j]) * acc[j + NR/2] */
    WB_STORE_SILU,
    WB_STORE_SWIGLU, /* dual only: out[j] = silu(acc[j]) * acc[j + NR/2] */
} wb_gemm_store;

/* The elementwise activations beyond GELU (contiguous routines of each ISA, the same math as
 * the epilogues): those of the list in act_list.h, then SWIGLU, gated: y = silu(x) * u. */
typedef enum wb_cpu_act {
#define WB_CPU_ACT_ID(ID, ...) WB_CPU_##ID,
    WB_ACT_LIST(WB_CPU_ACT_ID)
#undef WB_CPU_ACT_ID
    WB_CPU_SWIGLU,
    WB_CPU_ACT_COUNT
} wb_cpu_act;

/* One microkernel call: an m x NR tile (m <= MR) over kc steps of K. */
typedef struct wb_gemm_tile {
    int64_t kc;
    const float *a;    /* packed A sliver: kc x MR (lane r of step k at a[k*MR + r]); or, lda > 0, A itself */
    const float *b;    /* packed B sliver: kc x NR */
    const float *c_in; /* partial sums to continue from, or NULL to start from bias or zero */
    int64_t ldc_in;
    const float *bias; /* NR per-column values added when c_in is NULL (NULL: none) */
    float *c_out;      /* NR columns (NR/2 for WB_STORE_GEGLU) of m rows */
    int64_t ldc_out;
    wb_gemm_store store;
    /* (gated stores only) 1: the NR/2 output columns are stored as a packed-A sliver of the
     * next GEMM, column c of row i at c_out[c*MR + i]: the one-kernel MLP's down GEMM reads the
     * hidden so, and a row-major tile would need a transpose pass. ldc_out then only spaces the
     * microkernel's early fetch of the output (rows i * ldc_out): NR/2 covers the sliver. */
    int c_out_panel;
    /* Set on the first pass over a B sliver in its block, which pulls it from memory (the
     * passes over the next row tiles find it in cache): the microkernel then prefetches B a
     * few KiB ahead, into the next tile's sliver at the end, since packed B is one stream. */
    int prefetch_b;
    /* (optional) A share of the B sliver the driver runs next, fetched into L2 a line at a time
     * over this tile's k-loop, so that the sliver's first pass finds it there instead of in L3
     * or memory. The passes over one sliver each fetch their own share (NULL, 0: none).
     * pf_ld > 0: the share is rows of B itself, NR floats each, pf_ld floats apart (pf_floats / NR
     * of them: the rows a sliver's first pass will read in place); 0: one run of pf_floats. */
    const float *pf_next;
    int64_t pf_floats;
    int64_t pf_ld;
    /* (pf_ld > 0) Where those rows will be packed, fetched alike: read into L2, each line is
     * then written there without a request to L3 (the first pass fetches it into L1 itself). */
    float *pf_write;
    /* (ISAs with first_pass_packs only) lda > 0: A is read row-major, row i's step k at
     * a[i*lda + k] (a broadcast per row and step, as from the packed sliver). The first pass of an
     * MC block over a row tile reads A itself that way and copies its rows on the way, 16 steps
     * at a time (8 in a spreading tile's chunks), into a_pack (row i at a_pack[i*a_pack_ld + k]);
     * the later passes read that copy with lda = a_pack_ld and a_pack NULL. 0: a is packed. */
    int64_t lda;
    float *a_pack;
    int64_t a_pack_ld;
    /* (the same, full MR-row tiles only) The first pass over a B sliver: ldb > 0 reads B in place, step
     * k's low NR/2 lanes at b + k*ldb and high lanes at b_hi + k*ldb (the up projection's for a
     * dual tile), and packs the sliver into b_pack (kc x NR). 0: b is packed. */
    int64_t ldb;
    const float *b_hi;
    float *b_pack;
} wb_gemm_tile;

/* Everything the driver needs from one ISA. */
typedef struct wb_cpu_isa {
    const char *name; /* "avx512", "avx2", "scalar" */
    int mr, nr;       /* register tile */
    /* cache blocking: kc in k steps (an f32, or a bf16 k-pair on a pair ISA), mc in rows (a
     * multiple of mr), nc in columns (a multiple of nr); 0: derived from this machine's caches
     * (wb_gemm_blocking_of) */
    int kc, mc, nc;
    void (*ukernel)(const wb_gemm_tile *t, int m);
    /* Contiguous activations, bit-identical to the GEMM epilogues of the same ISA. */
    void (*gelu)(const float *x, float *y, int64_t n, int erf_form);
    void (*geglu)(const float *gate, const float *up, float *y, int64_t n);
    /* y = act(x), or act(x, u) for the gated ones (u NULL otherwise), n contiguous floats. */
    void (*activation)(wb_cpu_act act, const float *x, const float *u, float *y, int64_t n);
    /* (optional) Packs `width` rows that are each contiguous along k: dst[kk*width + j] =
     * rows[j][kk]. NULL: gemm.c's scalar loops. */
    void (*pack_rows)(float *dst, const float *const *rows, int width, int64_t kc);
    /* (optional) The same for bf16 rows, widened to f32 on the way (A of a bf16 GEMM). */
    void (*pack_rows_bf16)(float *dst, const uint16_t *const *rows, int width, int64_t kc);
    /* Peak calibration: `iters` rounds of 12 independent chains of `lanes` multiply-adds (an
     * f32 FMA each; on a pair ISA a k-pair dot product: two multiply-adds per lane). */
    double (*fma_loop)(int64_t iters);
    int lanes;
    /* bf16 "pair" paths: every 32-bit slot of the packed operands holds two bf16 values that
     * are adjacent along k (k-pair packing), and the microkernel multiplies pairs (vdpbf16ps)
     * into f32 accumulators. The driver and packers move 32-bit words and need no change: a
     * problem is posed in pair space (k = K/2, strides in words). */
    int bf16_pairs;
    /* 1: the microkernel reads a row-major A and B in place and copies them on the way
     * (wb_gemm_tile.lda, .ldb: A into a row panel it then reads as it reads A, B into the packed
     * sliver), so that the driver packs them in a block's first passes. */
    int first_pass_packs;
} wb_cpu_isa;

/* Size in bytes of cpu0's data or unified cache at `level` (1, 2, 3), 0 when sysfs does not say. */
int64_t wb_cpu_cache_bytes(int level);
/* 1 where the CPU runs a 256-bit vector FMA as two 128-bit halves (AMD Zen 1 and Zen+), so the
 * AVX2 tile consumes its B sliver at half the rate (see wb_gemm_blocking_split); 0 elsewhere. */
int wb_cpu_vectors_split(void);
/* How many logical CPUs share cpu0's cache at `level` (sysfs's shared_cpu_list), 1 when it does
 * not say. */
int wb_cpu_cache_shared_by(int level);
/* How many CPUs a sysfs CPU list names ("0-7,16-23" -> 16); 0 when it is empty or malformed. */
int wb_cpu_list_count(const char *list);

/* The driver's cache blocking: K blocks of kc steps (an f32, or a bf16 k-pair on a pair ISA), MC
 * blocks of at most mc rows (a multiple of mr), NC panels of at most nc columns (a multiple of nr);
 * the driver evens the blocks out below these. l1, l2 (bytes per core) and l3_share (bytes of L3
 * per logical CPU) are the cache sizes the rule used, its defaults where sysfs does not say;
 * fixed: the ISA's own constants replaced the rule's. */
typedef enum wb_gemm_blocking_forced_kind {
    WB_BLOCKING_RULE = 0,      /* the rule on this machine's caches */
    WB_BLOCKING_FORCED_SIZES,  /* kc, mc and nc forced (the dual GEMM's K is split by kc too) */
    WB_BLOCKING_FORCED_CACHES, /* the rule on forced cache sizes (another CPU's blocking) */
} wb_gemm_blocking_forced_kind;
typedef struct wb_gemm_blocking {
    int64_t kc, mc, nc;
    int64_t l1, l2, l3_share;
    int fixed;
    int split; /* the split-vector regime replaced the cache rule's kc and mc (wb_gemm_blocking_split) */
    wb_gemm_blocking_forced_kind forced;
} wb_gemm_blocking;
/* The blocking for an mr x nr tile on caches of `l1` (data) and `l2` bytes per core and `l3_share`
 * bytes of L3 per logical CPU sharing it (0: unknown). The rule and its measurements are in gemm.c. */
wb_gemm_blocking wb_gemm_blocking_rule(int mr, int nr, int64_t l1, int64_t l2, int64_t l3_share);
/* The rule's blocking `b` for an mr x nr tile of 256-bit vectors on a CPU that splits them
 * (wb_cpu_vectors_split): K blocks as deep as the rule allows at all, the A block a quarter of L2,
 * the panel half of the L3 share at that depth. */
wb_gemm_blocking wb_gemm_blocking_split(wb_gemm_blocking b, int mr, int nr);
/* What the driver uses for `isa` on this machine: a forced blocking (below) first; then the ISA's
 * own kc, mc, nc where set, the rule on this machine's caches (read once) for the others. */
wb_gemm_blocking wb_gemm_blocking_of(const wb_cpu_isa *isa);

/* A blocking forced on every CPU path in place of the rule, so that tests run every CPU's blocking
 * on any machine: either sizes (kc > 0: kc in [1, 8192] steps of k, or k-pairs on a pair ISA; mc a
 * multiple of 12 rows and nc of 32 columns, so that every path's register tile divides them), or
 * the rule on stated caches (l2 > 0: l1 data, l2 per core, l3_share per logical CPU, in bytes). */
typedef struct wb_gemm_blocking_spec {
    int64_t kc, mc, nc;
    int64_t l1, l2, l3_share;
} wb_gemm_blocking_spec;
/* Parses "kc,mc,nc" or "caches:L1,L2,L3SHARE" (sizes in bytes, or with K, M, G) into *spec; 0, or
 * -1 with the reason (what is wrong, what it must be) in why. */
int wb_gemm_blocking_parse(const char *text, wb_gemm_blocking_spec *spec, char *why, size_t why_len);
/* Forces spec on every later GEMM and packing (NULL: back to the rule); 0, or -1 with the reason.
 * Set it between GEMMs, never during one; B packed under another kc must be packed again. */
int wb_gemm_blocking_force(const wb_gemm_blocking_spec *spec, char *why, size_t why_len);
/* The forced spec (WB_GEMM_BLOCKING at start-up, or wb_gemm_blocking_force), NULL when none. */
const wb_gemm_blocking_spec *wb_gemm_blocking_forced(void);
/* "WB_GEMM_BLOCKING=...: <reason>" when the environment's value was refused (the driver then
 * uses the rule, so a program must refuse to start: the executable and the tests do), else NULL. */
const char *wb_gemm_blocking_env_error(void);

/* The ISA chosen at start-up: the best the CPU supports, or WB_CPU_ISA=avx512|avx2|scalar when
 * the CPU supports it (tests use this to force each path). */
const wb_cpu_isa *wb_cpu_isa_active(void);
/* A named ISA if compiled in and supported by this CPU, else NULL. */
const wb_cpu_isa *wb_cpu_isa_get(const char *name);
/* Switches the active ISA (for tests and benchmarks); returns 0 if unsupported. */
int wb_cpu_isa_set(const char *name);
/* What the environment's WB_CPU_ISA or WB_CPU_BF16 (`var`) asked for when it cannot be had, in
 * one line ("WB_CPU_ISA=AVX2: ..."), else NULL: *fatal 1 for a name that is no path (a program
 * must refuse to start: the path would be chosen silently), 0 for a path this CPU cannot run (the
 * run goes on on the one it can; the line says which). */
const char *wb_cpu_env_error(const char *var, int *fatal);
/* The k-pair path a bf16 GEMM with `rows` rows of A uses, or NULL: widen bf16 to f32 and run the
 * f32 path. By default the pair path ("avx512bf16": vdpbf16ps on CPUs with AVX512_BF16, else
 * "avx2bf16": k-pairs widened in registers) for up to 6 rows, where reading the weights
 * dominates and pairs halve their bytes, and above that only where the pair instruction
 * multiplies faster than f32 FMAs (measured once on this core; vdpbf16ps runs at half the FMA
 * rate on some AVX512_BF16 cores); otherwise widening. WB_CPU_BF16 (or wb_cpu_isa_bf16_set)
 * forces one: "avx512bf16", "avx2bf16", "emulated" (portable, for tests), "widen", or "auto". */
const wb_cpu_isa *wb_cpu_isa_bf16(int64_t rows);
/* "avx512bf16", "avx2bf16", "emulated", "widen" when one path is forced or the only one; "auto"
 * when the choice depends on the rows. */
/* The default pair path of this CPU and active ISA (NULL: none; avx512bf16 only on the AVX-512
 * path), and the measured multiply-add rate of its pair instruction (vdpbf16ps) over f32 FMAs'
 * (a pair dot product counts two per lane; 0 when there is no such instruction: avx2bf16 widens
 * in registers and multiplies with f32 FMAs). */
const wb_cpu_isa *wb_cpu_isa_bf16_pairs(void);
double wb_cpu_isa_bf16_pair_speed(void);
const char *wb_cpu_isa_bf16_name(void);
int wb_cpu_isa_bf16_set(const char *name); /* returns 0 if unsupported on this CPU */

typedef struct wb_gemm_problem {
    int64_t m, n, k;
    const float *a; /* A[i][p] = a[i*rsa + p*csa] */
    int64_t rsa, csa;
    const float *b; /* B[p][j] = b[p*rsb + j*csb] (the gate weights for dual) */
    int64_t rsb, csb;
    const float *b_up; /* dual: the up weights, same strides as b; NULL for a plain GEMM */
    float *c;          /* C[i][j] = c[i*ldc + j] */
    int64_t ldc;
    const float *bias;     /* n values or NULL (plain only) */
    wb_gemm_store store;   /* PLAIN, GELU_TANH or GELU_ERF; GEGLU for dual */
    const float *packed_b; /* optional: B packed once by wb_gemm_pack_b (for this isa, k, n) */
    int threads;
    const float *bias_up;   /* dual only: n values added to A·B_up (bias is then the gate's), or NULL */
    const float *dual_bias; /* internal: the two dual biases interleaved per tile (set by wb_gemm_run) */
    int a_bf16;             /* A holds bf16 (a points at uint16_t; strides in elements), widened while packed */
    /* (optional, plain f32 only) Called on each block of C right after the last K block of its
     * tiles is stored, by the thread that computed them, while the block is in L2: the rows of
     * one MC block times a run of column tiles (as many as keep it and the B slivers read
     * meanwhile within half of L2), so that each call walks its rows along contiguous columns
     * and the epilogue's other inputs stream. A generated epilogue (wb_kernels/generated.h) with
     * epilogue_ctx as its context. NULL: none. */
    wb_gemm_epilogue_fn epilogue;
    const void *epilogue_ctx;
} wb_gemm_problem;

/* A buffer that grows and is never shrunk: *p when it holds `floats` already, else a new
 * 64-byte aligned one (the old one freed); NULL, with *cap 0, when it cannot be allocated. The
 * kernels keep their packing and scratch buffers this way: a fresh buffer of a few MiB per call
 * is mapped anew and page-faulted on first touch. */
float *wb_cpu_reserve(float **p, size_t *cap, size_t floats);

/* Floats needed to hold B (and B_up) packed for `isa` over the whole K. */
size_t wb_gemm_packed_b_floats(const wb_cpu_isa *isa, int64_t k, int64_t n, int dual);
/* The depth of the K blocks of B packed by wb_gemm_pack_b (what a caller walking packed B needs). */
int64_t wb_gemm_block_k(const wb_cpu_isa *isa, int64_t k, int dual);
/* Packs B (and B_up when non-NULL) for reuse across calls. */
void wb_gemm_pack_b(const wb_cpu_isa *isa, int64_t k, int64_t n, const float *b, int64_t rsb, int64_t csb,
                    const float *b_up, float *packed);
/* Returns 0, or -1 when a packing buffer could not be allocated (C is then incomplete). */
int wb_gemm_run(const wb_cpu_isa *isa, const wb_gemm_problem *p);
/* 1 (the default): on an ISA with first_pass_packs, a row-major A (where at most 32 B slivers pass
 * over it) and a row-major B that is not packed already are packed by the first pass of the tiles
 * that read them; 0: packed up front, as on the other ISAs. The same products either way, bit for
 * bit (for tests and experiments). */
void wb_gemm_first_pass_packs(int on);
int wb_gemm_first_pass_packs_on(void);
/* Whether the `passes` (full row tiles) over each B sliver of `sliver_bytes` should each fetch a
 * share of the next sliver into L2, where a block's slivers take `block_bytes` and L2 is `l2`
 * bytes: from 4 passes, for slivers of 32 KiB or more, when the block's slivers take more than half
 * of L2 (gemm.c says what it measured). The GEMM driver's rule; the one-kernel MLP's too. */
int wb_gemm_spread_pays(int64_t passes, int64_t sliver_bytes, int64_t block_bytes, int64_t l2);

/* Where a GEMM's time goes, counted only when asked (the clock is read at each phase's end, a few
 * times per B sliver of an MC block): each thread's CPU time packing A and B, in the register
 * tiles (the microkernel, edge tiles included) and in the generated epilogue, and its whole time
 * in the GEMM (total: the rest is loop and buffer overhead); wall_team_ns adds, per run, the
 * calling thread's wall time from before the threads fork to after they join times the team: what
 * the team was held for, so wall_team_ns - total_ns is the fork, the join's wait for the slowest
 * thread, and time a thread was descheduled; wall_ns is that wall time alone (a small GEMM runs on
 * fewer threads than asked). Sums over the threads and the runs counted. */
typedef struct wb_gemm_phases {
    int64_t runs;
    int64_t pack_a_ns, pack_b_ns, tiles_ns, epilogue_ns, total_ns, wall_ns, wall_team_ns;
} wb_gemm_phases;
/* on: zero the counts and count the runs that follow; off: stop counting (the counts stay). */
void wb_gemm_phases_count(int on);
wb_gemm_phases wb_gemm_phases_read(void);
/* The register tile alone: the ISA's microkernel on one packed A and B sliver of depth kc (kept
 * in cache by the repetition), full tiles stored by `store` (PLAIN; a dual tile's GEGLU or SWIGLU:
 * the activation in the store, what it adds to a tile), `iters` calls; GFLOP/s of the calling
 * thread's CPU time (the GEMM's multiply-adds only), or -1 when the buffers cannot be allocated.
 * What the tiles of a GEMM would reach if their operands were always at hand (on a pair ISA kc
 * counts pairs: 2 multiply-adds). */
double wb_gemm_tile_gflops(const wb_cpu_isa *isa, int64_t kc, int64_t iters, wb_gemm_store store);

/* y = gelu(x) (erf_form: the erf GELU, else the tanh form), or y = gelu_tanh(x) * u when u is
 * given, over n contiguous floats with the ISA's vectorised routines, in chunks split across
 * threads when n is large. */
void wb_cpu_activation_run(const wb_cpu_isa *isa, const float *x, const float *u, float *y, int64_t n, int erf_form);

/* wb_cpu_activation_run for the activations of wb_cpu_act. */
void wb_cpu_act_run(const wb_cpu_isa *isa, wb_cpu_act act, const float *x, const float *u, float *y, int64_t n);

/* The scalar reference activations in double precision (the tests' ground truth). */
double wb_gelu_tanh_ref(double x);
double wb_gelu_erf_ref(double x);
/* act(x[, u]) in double precision. */
double wb_act_ref(wb_cpu_act act, double x, double u);

#endif
