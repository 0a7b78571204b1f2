/* blocking.c: the GEMM's cache blocking: the rule that derives kc, mc and nc from this machine's
 * caches (and the measurements behind it), and a blocking forced in its place for every CPU path
 * (WB_GEMM_BLOCKING, wb.set_cpu_blocking): so that the tests can run each CPU's blocking, or one
 * that splits small problems into many ragged blocks, on any machine. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wb_kernels/gemm.h"

/* The blocking rule, from the loops' reuse. Each B sliver (kc x nr) is read once per row tile of
 * its MC block; a thread's A block (mc x kc, packed) once per sliver of the panel, so it lives in
 * L2; the B panel (kc x nc) once per MC block, from L3; A is packed once per panel. Two regimes:
 * - the sliver stays in L1 when kc x nr words take at most half of it at a depth of KC_L1_MIN or
 *   more: kc the deepest such multiple of 64 (up to KC_MAX), the A block an eighth of L2;
 * - otherwise the sliver streams from L2 (the next one fetched ahead while the last is in use,
 *   see the spread rule below): kc as deep as a quarter of L2 allows with MC_MIN_TILES row tiles
 *   per block (a multiple of 64 in [KC_MIN, KC_MAX]), the A block that quarter.
 * The panel takes half of the L3 share of one logical CPU, nc in [NC_MIN, NC_MAX] (packing A
 * costs ~0.5 cycles per float against nc / 16 cycles of the FMAs that use it on an AVX2 core: below
 * ~1% from 1024 columns; a panel that then exceeds L3 is read from memory once per MC block, ~2/mc
 * bytes per flop).
 * Measured on the AVX-512 Xeon (model 207: 48 KiB L1d, 2 MiB L2; blockings alternated round by
 * round in one process, 1 thread, medians of per-round ratios): the 12x32 f32 tile (slivers of
 * 128 B per k, never in half of L1 at 256 deep): kc 640, 768 and 1024 each 1.00-1.05x kc 384 at
 * n = 512-2048 and the MLP's linears (1.01-1.07x on 2 threads), so KC_MAX = 768; mc 132-192
 * alike within 1%. The 6x16 AVX2 tile (64 B per k): kc 384 (24 KiB slivers) 1.00-1.02x its old
 * constant 256 and 1.02-1.04x kc 512 or 768; at kc 384, A blocks of 174 rows 1.015x blocks of
 * 258 at 512 x 3072 x 768 (0.995x at n = 2048), hence the eighth. Balanced K blocks (n = 1024
 * as 2 x 512, 2048 as 3 x 688): 0.99-1.00x, so K blocks are not balanced. On a Zen 3 core (32
 * KiB L1d, 512 KiB L2) the rule gives the AVX2 tile kc 256, mc 60 (its constants were 256 and
 * 144; not measured there). The bf16 pair paths take the same rule in k-pairs (avx512bf16 kc 384
 * -> 768 pairs, avx2bf16 256 -> 384): the GeGLU MLP in bf16 at 1 and 6 tokens, each path against
 * its constants, 0.99-1.01x the time (medians of 4-8 alternated runs). */
/* On a CPU whose vector units are half as wide as its 256-bit registers (Zen 1: every AVX2 FMA is
 * two 128-bit halves, one per cycle), the 6x16 tile takes 12 cycles per k step, so its sliver's
 * 64 bytes per step come from L2 as easily as from L1, and a deeper K block is pure gain: the
 * output tile is loaded and stored once per K block, the microkernel's fixed cost once per call.
 * Measured on an AMD EPYC Zen 1 (family 23 model 1; 32 KiB L1d, 512 KiB L2), blockings alternated
 * in one process, best of 3 calls, medians of 7 rounds, against the rule's kc 256, mc 60: kc 384
 * 1.00-1.01x, 512 1.01-1.03x, 768 with mc 36-60 1.01-1.03x (n = 1024, and the MLP's linears at 512
 * tokens, 1 and 2 threads), kc 1024 with mc 36 1.02-1.04x (within 1% of 768 either way). So there
 * kc is KC_MAX and the A block a quarter of L2 (kc 768, mc 42, nc 1024 on that Zen 1). */
#define WORD         ((int64_t)sizeof(float))
#define KC_MIN       128
#define KC_L1_MIN    256
#define KC_MAX       768
#define MC_MIN_TILES 12
#define NC_MIN       1024
#define NC_MAX       4096
#define L1_UNKNOWN   ((int64_t)32 << 10) /* where sysfs does not say */
#define L2_UNKNOWN   ((int64_t)2 << 20)
#define L3_UNKNOWN   ((int64_t)2 << 20) /* per logical CPU */

/* mc from the A block's bytes, nc from half of the L3 share, both at b.kc */
static wb_gemm_blocking blocks_for_kc(wb_gemm_blocking b, int64_t a_block, int mr, int nr) {
    b.mc = a_block / (b.kc * WORD) / mr * mr;
    if (b.mc < mr) b.mc = mr;
    const int64_t nc = b.l3_share / 2 / (b.kc * WORD) / nr * nr;
    const int64_t nc_min = NC_MIN / nr * nr > nr ? NC_MIN / nr * nr : nr;
    const int64_t nc_max = NC_MAX / nr * nr > nr ? NC_MAX / nr * nr : nr;
    b.nc = nc < nc_min ? nc_min : nc > nc_max ? nc_max : nc;
    return b;
}

wb_gemm_blocking wb_gemm_blocking_rule(int mr, int nr, int64_t l1, int64_t l2, int64_t l3_share) {
    if (mr < 1) mr = 1;
    if (nr < 1) nr = 1;
    wb_gemm_blocking b = {.l1 = l1 > 0 ? l1 : L1_UNKNOWN,
                          .l2 = l2 > 0 ? l2 : L2_UNKNOWN,
                          .l3_share = l3_share > 0 ? l3_share : L3_UNKNOWN};
    int64_t kc = b.l1 / 2 / (nr * WORD) / 64 * 64, a_block;
    if (kc >= KC_L1_MIN) {
        a_block = b.l2 / 8;
    } else {
        a_block = b.l2 / 4;
        kc = a_block / (MC_MIN_TILES * mr * WORD) / 64 * 64;
    }
    b.kc = kc < KC_MIN ? KC_MIN : kc > KC_MAX ? KC_MAX : kc;
    return blocks_for_kc(b, a_block, mr, nr);
}

wb_gemm_blocking wb_gemm_blocking_split(wb_gemm_blocking b, int mr, int nr) {
    if (mr < 1) mr = 1;
    if (nr < 1) nr = 1;
    b.kc = KC_MAX;
    b = blocks_for_kc(b, b.l2 / 4, mr, nr);
    b.split = 1;
    return b;
}

/* What a forced blocking must fit: every CPU path's register tile (rows 4, 6, 12; columns 8, 16,
 * 32), and packing buffers of sane size (a thread's A block, a B panel). */
#define FORCE_ROWS      12
#define FORCE_COLS      32
#define FORCE_KC_MAX    8192
#define FORCE_MC_MAX    8192
#define FORCE_NC_MAX    65536
#define FORCE_A_BYTES   ((int64_t)64 << 20)
#define FORCE_B_BYTES   ((int64_t)256 << 20)
#define FORCE_L1_RANGE  ((int64_t)4 << 10), ((int64_t)1 << 20)
#define FORCE_L2_RANGE  ((int64_t)64 << 10), ((int64_t)256 << 20)
#define FORCE_L3_RANGE  ((int64_t)64 << 10), ((int64_t)4 << 30)

/* L1d's and L2's sizes and the L3 share of one logical CPU, read once for the process: a B packed
 * on one host thread and multiplied on another must see the same kc. WB_GEMM_BLOCKING is read
 * at the same time. */
static int64_t cache_l1, cache_l2, cache_l3_share;
static int vectors_split;
static pthread_once_t caches_once = PTHREAD_ONCE_INIT;
static wb_gemm_blocking_spec forced;
static int forced_set;
/* Bumped by every wb_gemm_blocking_force: the per-thread memo of wb_gemm_blocking_of below is
 * worked out again after it. */
static _Atomic unsigned forced_generation;
static char env_error[320];

static void read_caches(void) {
    cache_l1 = wb_cpu_cache_bytes(1);
    cache_l2 = wb_cpu_cache_bytes(2);
    int64_t l3 = wb_cpu_cache_bytes(3);
    cache_l3_share = l3 > 0 ? l3 / wb_cpu_cache_shared_by(3) : 0;
    vectors_split = wb_cpu_vectors_split();
    const char *env = getenv("WB_GEMM_BLOCKING");
    if (!env || !*env) return;
    char why[200];
    if (wb_gemm_blocking_parse(env, &forced, why, sizeof why) == 0)
        forced_set = 1;
    else
        snprintf(env_error, sizeof env_error, "WB_GEMM_BLOCKING=%.40s%s: %s", env, strlen(env) > 40 ? "..." : "", why);
}

/* One size: decimal digits with an optional K, M or G (binary units); -1 when malformed. */
static int64_t parse_size(const char *s, const char *end, int units) {
    int64_t v = 0;
    const char *p = s;
    if (p == end) return -1;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (v > ((int64_t)1 << 40)) return -1;
        v = v * 10 + (*p - '0');
    }
    if (p == s) return -1;
    if (units && p < end) {
        int shift = *p == 'K' || *p == 'k' ? 10 : *p == 'M' || *p == 'm' ? 20 : *p == 'G' || *p == 'g' ? 30 : -1;
        if (shift < 0) return -1;
        v <<= shift, p++;
    }
    return p == end ? v : -1;
}

static int fail(char *why, size_t len, const char *fmt, long long a, long long b) {
    if (why && len) snprintf(why, len, fmt, a, b);
    return -1;
}

static int check_spec(const wb_gemm_blocking_spec *s, char *why, size_t len) {
    if (s->kc > 0) {
        if (s->kc < 1 || s->kc > FORCE_KC_MAX) return fail(why, len, "kc must be in [1, %lld] steps of k, got %lld", FORCE_KC_MAX, s->kc);
        if (s->mc < FORCE_ROWS || s->mc > FORCE_MC_MAX || s->mc % FORCE_ROWS)
            return fail(why, len, "mc must be a multiple of %lld rows (the row tiles of every CPU path: 4, 6, 12) up to 8192, got %lld",
                        FORCE_ROWS, s->mc);
        if (s->nc < FORCE_COLS || s->nc > FORCE_NC_MAX || s->nc % FORCE_COLS)
            return fail(why, len, "nc must be a multiple of %lld columns (the column tiles of every CPU path: 8, 16, 32) up to 65536, got %lld",
                        FORCE_COLS, s->nc);
        if (s->mc * s->kc * 4 > FORCE_A_BYTES)
            return fail(why, len, "mc x kc (a thread's A block) must fit %2$lld MiB, got %1$lld floats", s->mc * s->kc,
                        FORCE_A_BYTES >> 20);
        if (s->kc * s->nc * 4 > FORCE_B_BYTES)
            return fail(why, len, "kc x nc (a B panel) must fit %2$lld MiB, got %1$lld floats", s->kc * s->nc,
                        FORCE_B_BYTES >> 20);
        return 0;
    }
    const struct {
        const char *name;
        int64_t value, lo, hi;
    } caches[] = {{"L1", s->l1, FORCE_L1_RANGE}, {"L2", s->l2, FORCE_L2_RANGE}, {"the L3 share", s->l3_share, FORCE_L3_RANGE}};
    for (int i = 0; i < 3; i++)
        if (caches[i].value < caches[i].lo || caches[i].value > caches[i].hi) {
            if (why && len)
                snprintf(why, len, "%s must be %lld KiB to %lld KiB, got %lld bytes", caches[i].name,
                         (long long)(caches[i].lo >> 10), (long long)(caches[i].hi >> 10), (long long)caches[i].value);
            return -1;
        }
    return 0;
}

int wb_gemm_blocking_parse(const char *text, wb_gemm_blocking_spec *spec, char *why, size_t len) {
    static const char form[] = "the form is kc,mc,nc (e.g. 256,72,1024) or caches:L1,L2,L3SHARE (e.g. caches:32K,512K,16M)";
    memset(spec, 0, sizeof *spec);
    if (!text) {
        if (why && len) snprintf(why, len, "no text");
        return -1;
    }
    int caches = !strncmp(text, "caches:", 7);
    const char *p = caches ? text + 7 : text;
    int64_t v[3];
    for (int i = 0; i < 3; i++) {
        const char *end = strchr(p, ',');
        if (i == 2) end = p + strlen(p);
        if (!end) {
            if (why && len) snprintf(why, len, "three values expected: %s", form);
            return -1;
        }
        v[i] = parse_size(p, end, caches);
        if (v[i] <= 0) {
            if (why && len)
                snprintf(why, len, "'%.*s' is not a positive %s: %s", (int)(end - p > 20 ? 20 : end - p), p,
                         caches ? "size" : "integer", form);
            return -1;
        }
        p = end + 1;
    }
    if (caches)
        spec->l1 = v[0], spec->l2 = v[1], spec->l3_share = v[2];
    else
        spec->kc = v[0], spec->mc = v[1], spec->nc = v[2];
    return check_spec(spec, why, len);
}

int wb_gemm_blocking_force(const wb_gemm_blocking_spec *spec, char *why, size_t len) {
    pthread_once(&caches_once, read_caches);
    if (!spec) {
        forced_set = 0;
        forced_generation++;
        return 0;
    }
    if (check_spec(spec, why, len)) return -1;
    forced = *spec;
    forced_set = 1;
    forced_generation++;
    return 0;
}

const wb_gemm_blocking_spec *wb_gemm_blocking_forced(void) {
    pthread_once(&caches_once, read_caches);
    return forced_set ? &forced : NULL;
}

const char *wb_gemm_blocking_env_error(void) {
    pthread_once(&caches_once, read_caches);
    return env_error[0] ? env_error : NULL;
}

static wb_gemm_blocking blocking_of(const wb_cpu_isa *isa) {
    if (forced_set && forced.kc > 0) {
        wb_gemm_blocking b = wb_gemm_blocking_rule(isa->mr, isa->nr, cache_l1, cache_l2, cache_l3_share);
        b.kc = forced.kc, b.mc = forced.mc, b.nc = forced.nc, b.forced = WB_BLOCKING_FORCED_SIZES;
        return b;
    }
    if (forced_set) { /* the rule on the stated caches, the ISA's own constants still win */
        wb_gemm_blocking b = wb_gemm_blocking_rule(isa->mr, isa->nr, forced.l1, forced.l2, forced.l3_share);
        b.forced = WB_BLOCKING_FORCED_CACHES;
        if (isa->kc > 0) b.kc = isa->kc, b.fixed = 1;
        if (isa->mc > 0) b.mc = isa->mc, b.fixed = 1;
        if (isa->nc > 0) b.nc = isa->nc, b.fixed = 1;
        return b;
    }
    wb_gemm_blocking b = wb_gemm_blocking_rule(isa->mr, isa->nr, cache_l1, cache_l2, cache_l3_share);
    if (isa->lanes == 8 && vectors_split) b = wb_gemm_blocking_split(b, isa->mr, isa->nr); /* 256-bit paths */
    if (isa->kc > 0) b.kc = isa->kc, b.fixed = 1;
    if (isa->mc > 0) b.mc = isa->mc, b.fixed = 1;
    if (isa->nc > 0) b.nc = isa->nc, b.fixed = 1;
    return b;
}

/* The rule's dozen 64-bit divisions cost a tiny GEMM more than its multiply-adds (a replayed 1x8
 * @ 8x16 linear asks twice: its packed weight's key, then the driver; 34% of its 411 ns on a
 * Zen 1 EPYC), so each thread keeps the blockings it worked out, one per ISA, until a blocking
 * is forced or released. */
#define MEMO_ISAS 8
wb_gemm_blocking wb_gemm_blocking_of(const wb_cpu_isa *isa) {
    static _Thread_local struct {
        const wb_cpu_isa *isa;
        unsigned generation;
        wb_gemm_blocking blocking;
    } memo[MEMO_ISAS];
    static _Thread_local int memo_next;
    pthread_once(&caches_once, read_caches);
    const unsigned generation = forced_generation;
    for (int i = 0; i < MEMO_ISAS; i++)
        if (memo[i].isa == isa && memo[i].generation == generation) return memo[i].blocking;
    const wb_gemm_blocking b = blocking_of(isa);
    const int slot = memo_next;
    memo_next = (memo_next + 1) % MEMO_ISAS;
    memo[slot].isa = isa, memo[slot].generation = generation, memo[slot].blocking = b;
    return b;
}
