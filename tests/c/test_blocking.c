/* test_blocking.c: the GEMM driver's parts that need no GEMM to check: the cache blocking rule on
 * a range of caches and on the machines this project has been measured on, the split-vector regime
 * (Zen 1), the per-thread memo of the blocking in use across forced blockings, sysfs's CPU lists,
 * and every ISA's row packer against its definition. */
#include <stdio.h>
#include <string.h>

#include <wb_kernels/gemm.h>

static int failures, checks;

/* The ISA's row packer against the definition, dst[kk * width + j] = rows[j][kk], at every width
 * from 1 to 17 and 24, 32 (the register tiles' 6, 12, 16 and 32 among them: a group of fewer than
 * 8 rows is stored whole but for its last depth) and depths around the 8-deep transposes; nothing
 * past the packed block may be written (a canary follows it). */
static void test_pack_rows(const wb_cpu_isa *isa) {
    if (!isa->pack_rows) return;
    enum { MAXW = 32, MAXK = 40, CANARY = 24 };
    static float src[MAXW][MAXK], dst[MAXW * MAXK + CANARY];
    const float *rows[MAXW];
    for (int j = 0; j < MAXW; j++) {
        rows[j] = src[j];
        for (int kk = 0; kk < MAXK; kk++)
            src[j][kk] = (float)(j * 1000 + kk);
    }
    const int widths[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 20, 24, 28, 32};
    const int64_t depths[] = {1, 7, 8, 9, 15, 16, 17, 24, 40};
    int before = failures;
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
        for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++) {
            const int width = widths[wi];
            const int64_t kc = depths[di];
            for (size_t i = 0; i < sizeof dst / sizeof dst[0]; i++)
                dst[i] = -1.0f;
            isa->pack_rows(dst, rows, width, kc);
            int bad = 0;
            for (int64_t kk = 0; kk < kc; kk++)
                for (int j = 0; j < width; j++)
                    bad += dst[kk * width + j] != src[j][kk];
            for (int64_t i = kc * width; i < kc * width + CANARY; i++)
                bad += dst[i] != -1.0f;
            checks++;
            if (bad) {
                failures++;
                fprintf(stderr, "FAIL %s pack_rows width %d depth %lld: %d words wrong or written past the block\n",
                        isa->name, width, (long long)kc, bad);
            }
        }
    printf("%-7s pack_rows: %s\n", isa->name, failures == before ? "ok" : "FAILED");
}

/* The blocking rule (gemm.c) on L1d from 16 to 128 KiB, L2 from 128 KiB to 64 MiB, for the tiles
 * in use: kc a multiple of 64 in [128, 768]; the B sliver in half of L1 with the A block in an
 * eighth of L2, or the A block in a quarter of L2 (or one tile high at the least); mc a multiple
 * of mr; nc a multiple of nr in [1024, 4096] with the panel in half of the L3 share unless at
 * the lower bound; and the values for the machines this project has been measured on. */
static void test_blocking_rule(void) {
    int before = failures;
    const int tiles[][2] = {{12, 32}, {6, 16}, {4, 8}, {1, 1}};
    for (int t = 0; t < 4; t++)
        for (int64_t l1 = 16 << 10; l1 <= (128 << 10); l1 *= 2)
            for (int64_t l2 = 128 << 10; l2 <= ((int64_t)64 << 20); l2 *= 2)
                for (int64_t l3 = 0; l3 <= ((int64_t)256 << 20); l3 = l3 ? l3 * 8 : 1 << 20) {
                    const int mr = tiles[t][0], nr = tiles[t][1];
                    wb_gemm_blocking b = wb_gemm_blocking_rule(mr, nr, l1, l2, l3);
                    int64_t a_block = b.mc * b.kc * 4, panel = b.kc * b.nc * 4, sliver = b.kc * nr * 4;
                    int ok = b.kc % 64 == 0 && b.kc >= 128 && b.kc <= 768 && b.mc % mr == 0 && b.mc >= mr &&
                             ((sliver <= l1 / 2 && a_block <= l2 / 8) || a_block <= l2 / 4 || b.mc == mr) &&
                             b.nc % nr == 0 && b.nc <= 4096 && b.nc >= (1024 / nr * nr > nr ? 1024 / nr * nr : nr) &&
                             (panel <= (l3 ? l3 : 2 << 20) / 2 || b.nc <= 1024);
                    checks++;
                    if (!ok) {
                        failures++;
                        fprintf(stderr, "FAIL blocking rule %dx%d l1=%lld l2=%lld l3=%lld: kc %lld mc %lld nc %lld\n",
                                mr, nr, (long long)l1, (long long)l2, (long long)l3, (long long)b.kc, (long long)b.mc,
                                (long long)b.nc);
                    }
                }
    /* the AVX-512 Xeon (48 KiB L1d, 2 MiB L2, 260 MiB L3 over 2 CPUs), its AVX2 path, and a Zen 3
     * core (32 KiB, 512 KiB, 32 MiB over 16 CPUs) */
    const struct {
        int mr, nr;
        int64_t l1, l2, l3, kc, mc, nc;
    } known[] = {{12, 32, 48 << 10, 2 << 20, 130 << 20, 768, 168, 4096},
                 {6, 16, 48 << 10, 2 << 20, 130 << 20, 384, 168, 4096},
                 {6, 16, 32 << 10, 512 << 10, 2 << 20, 256, 60, 1024}};
    for (int i = 0; i < 3; i++) {
        wb_gemm_blocking b = wb_gemm_blocking_rule(known[i].mr, known[i].nr, known[i].l1, known[i].l2, known[i].l3);
        checks++;
        if (b.kc != known[i].kc || b.mc != known[i].mc || b.nc != known[i].nc) {
            failures++;
            fprintf(stderr, "FAIL blocking rule %dx%d l2=%lld: kc %lld mc %lld nc %lld, want %lld %lld %lld\n",
                    known[i].mr, known[i].nr, (long long)known[i].l2, (long long)b.kc, (long long)b.mc, (long long)b.nc,
                    (long long)known[i].kc, (long long)known[i].mc, (long long)known[i].nc);
        }
    }
    /* an ISA's own fields win; the rule reports the caches it used, defaults where none said */
    const wb_cpu_isa *scalar = wb_cpu_isa_get("scalar");
    wb_gemm_blocking sb = wb_gemm_blocking_of(scalar), none = wb_gemm_blocking_rule(6, 16, 0, -1, 0);
    checks++;
    if (sb.kc != scalar->kc || sb.mc != scalar->mc || sb.nc != scalar->nc || !sb.fixed || none.fixed ||
        none.l1 != 32 << 10 || none.l2 != 2 << 20 || none.l3_share != 2 << 20) {
        failures++;
        fprintf(stderr, "FAIL blocking of the scalar ISA, or the rule's defaults\n");
    }
    /* the split-vector regime (Zen 1): K as deep as the rule allows, the A block a quarter of L2; on
     * this machine the 256-bit paths take it exactly where the CPU splits its vectors */
    const wb_gemm_blocking zen1 =
        wb_gemm_blocking_split(wb_gemm_blocking_rule(6, 16, 32 << 10, 512 << 10, 4 << 20), 6, 16);
    checks++;
    if (zen1.kc != 768 || zen1.mc != 42 || zen1.nc != 1024 || !zen1.split) {
        failures++;
        fprintf(stderr, "FAIL split-vector blocking: kc %lld mc %lld nc %lld, want 768 42 1024\n", (long long)zen1.kc,
                (long long)zen1.mc, (long long)zen1.nc);
    }
    const wb_cpu_isa *avx2 = wb_cpu_isa_get("avx2");
    if (avx2 && !wb_gemm_blocking_forced()) {
        checks++;
        if (wb_gemm_blocking_of(avx2).split != wb_cpu_vectors_split()) {
            failures++;
            fprintf(stderr, "FAIL the avx2 path's blocking: split %d, the CPU %d\n", wb_gemm_blocking_of(avx2).split,
                    wb_cpu_vectors_split());
        }
    }
    /* wb_gemm_blocking_of keeps what it worked out per thread and ISA: forcing sizes or caches,
     * and releasing them, must each be seen by the next call, for every ISA (asked before and
     * after, so that each has a memo to invalidate) */
    const wb_gemm_blocking_spec *env = wb_gemm_blocking_forced(), sizes = {.kc = 40, .mc = 36, .nc = 64},
                                cachesz = {.l1 = 16 << 10, .l2 = 256 << 10, .l3_share = 1 << 20};
    const wb_gemm_blocking_spec saved = env ? *env : (wb_gemm_blocking_spec){0};
    const char *memo_isas[] = {"scalar", "avx2", "avx512"};
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < sizeof memo_isas / sizeof memo_isas[0]; i++) {
            const wb_cpu_isa *isa = wb_cpu_isa_get(memo_isas[i]);
            if (!isa) continue;
            wb_gemm_blocking_force(NULL, NULL, 0);
            const wb_gemm_blocking rule = wb_gemm_blocking_of(isa), again = wb_gemm_blocking_of(isa);
            wb_gemm_blocking_force(&sizes, NULL, 0);
            const wb_gemm_blocking forced_sizes = wb_gemm_blocking_of(isa);
            wb_gemm_blocking_force(&cachesz, NULL, 0);
            const wb_gemm_blocking forced_caches = wb_gemm_blocking_of(isa),
                                   want = wb_gemm_blocking_rule(isa->mr, isa->nr, cachesz.l1, cachesz.l2,
                                                                cachesz.l3_share);
            wb_gemm_blocking_force(NULL, NULL, 0);
            const wb_gemm_blocking released = wb_gemm_blocking_of(isa);
            checks++;
            if (rule.forced != WB_BLOCKING_RULE || again.kc != rule.kc || again.mc != rule.mc || again.nc != rule.nc ||
                forced_sizes.kc != 40 || forced_sizes.mc != 36 || forced_sizes.nc != 64 ||
                forced_sizes.forced != WB_BLOCKING_FORCED_SIZES || forced_caches.forced != WB_BLOCKING_FORCED_CACHES ||
                forced_caches.l2 != 256 << 10 || (!isa->kc && forced_caches.kc != want.kc) ||
                released.forced != WB_BLOCKING_RULE || released.kc != rule.kc || released.mc != rule.mc ||
                released.nc != rule.nc) {
                failures++;
                fprintf(stderr, "FAIL %s: the blocking's memo missed a force or a release (round %d)\n", isa->name,
                        round);
            }
        }
    wb_gemm_blocking_force(env ? &saved : NULL, NULL, 0);
    /* sysfs's CPU lists (shared_cpu_list) */
    const struct {
        const char *list;
        int count;
    } lists[] = {{"0-7,16-23\n", 16}, {"0\n", 1}, {"0-1", 2}, {"3,5,9-10", 4}, {"", 0},
                 {"3-1", 0},          {"x", 0},   {"0-", 0},  {"1,,2", 0},     {"0-3 junk", 0}};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        checks++;
        if (wb_cpu_list_count(lists[i].list) != lists[i].count) {
            failures++;
            fprintf(stderr, "FAIL cpu list \"%s\": %d CPUs, want %d\n", lists[i].list, wb_cpu_list_count(lists[i].list),
                    lists[i].count);
        }
    }
    printf("blocking rule: %s\n", failures == before ? "ok" : "FAILED");
}

int main(void) {
    const char *names[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        const wb_cpu_isa *isa = wb_cpu_isa_get(names[i]);
        if (isa) test_pack_rows(isa);
    }
    test_blocking_rule();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
