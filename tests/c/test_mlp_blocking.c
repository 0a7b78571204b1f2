/* test_mlp_blocking.c: the fused MLP's token-split blocking rule (kernels/cpu/mlp.c): blocks whose
 * packed x, hidden chunk and output rows fit three quarters of L2, evened out; panels of one
 * hidden chunk while a thread's x and output rows fit half of its L3 share, else the chunks whose
 * weights fill that half; on the caches of the CPUs this project has been measured on. And the
 * token split's shares (wb_mlp_share_row): equal rows, not equal row tiles; a block's row tiles
 * (wb_mlp_tile_rows). */
#include <stdio.h>

#include <wb_kernels/mlp.h>

static int failures, checks;

static void expect(const char *what, int mr, int64_t k, int64_t n, int64_t kc, int64_t rows, int64_t l2, int64_t l3,
                   int64_t want_tiles, int64_t want_panel) {
    wb_mlp_blocking b = wb_mlp_blocking_rule(mr, k, n, kc, rows, l2, l3);
    checks++;
    if (b.block_tiles != want_tiles || b.panel != want_panel) {
        failures++;
        fprintf(stderr, "FAIL %s: %lld rows: block %lld tiles, panel %lld columns; want %lld, %lld\n", what,
                (long long)rows, (long long)b.block_tiles, (long long)b.panel, (long long)want_tiles,
                (long long)want_panel);
    }
}

/* Thread t's share of m rows among team threads: [first, last). */
static void expect_shares(int64_t m, int team, const int64_t *want_first) {
    checks++;
    int64_t prev = 0;
    for (int t = 0; t <= team; t++) {
        int64_t row = wb_mlp_share_row(m, t, team);
        int ok = row >= prev && (t < team || row == m) && (t > 0 || row == 0);
        /* equal shares: each within a row of m / team */
        if (t > 0) ok &= (row - prev) * team > m - team && (row - prev) * team < m + team;
        if (want_first && t < team) ok &= row == want_first[t];
        if (!ok) {
            failures++;
            fprintf(stderr, "FAIL shares of %lld rows among %d: thread %d starts at row %lld (the one before at %lld)\n",
                    (long long)m, team, t, (long long)row, (long long)prev);
            return;
        }
        prev = row;
    }
    /* each share's packed-x tiles lie before the next share's, all within ceil(m / mr) + team */
    for (int mr = 1; mr <= 12; mr++) {
        const int64_t row_tiles = (m + mr - 1) / mr;
        for (int t = 0; t < team; t++) {
            const int64_t rows = wb_mlp_share_row(m, t + 1, team) - wb_mlp_share_row(m, t, team);
            const int64_t end = wb_mlp_share_tile(m, mr, t, team) + (rows + mr - 1) / mr;
            const int64_t next = t + 1 < team ? wb_mlp_share_tile(m, mr, t + 1, team) : row_tiles + team;
            if (end > next) {
                failures++;
                fprintf(stderr, "FAIL %lld rows among %d, %d-row tiles: share %d's packed x ends at tile %lld, past %lld\n",
                        (long long)m, team, mr, t, (long long)end, (long long)next);
                return;
            }
        }
    }
}

/* A block's row tiles (wb_mlp_tile_rows): they cover its rows once and in order, each 1..mr rows;
 * the full ones come first and wb_mlp_full_tiles counts them; the last two split evenly exactly
 * where asked (split, three tiles or more, the last under mr / 2), else every tile is mr rows but
 * the last. */
static void expect_tiles(int mr, int split, int64_t rows) {
    const int64_t rt = (rows + mr - 1) / mr, last = rows - (rt - 1) * mr;
    const int even = split && rt >= 3 && 2 * last < mr;
    int64_t next = 0, full = 0;
    int heights[3] = {0, 0, 0}, ok = 1;
    for (int64_t it = 0; it < rt; it++) {
        int64_t first = -1;
        const int h = wb_mlp_tile_rows(mr, split, rt, rows, it, &first);
        ok &= first == next && h >= 1 && h <= mr;
        if (h == mr) ok &= full++ == it; /* full tiles first */
        if (!even) ok &= h == (it + 1 < rt ? mr : last);
        if (it >= rt - 2) heights[it + 2 - rt] = h;
        next = first + h;
    }
    ok &= next == rows && full == wb_mlp_full_tiles(mr, split, rt, rows);
    if (even)
        ok &= heights[0] + heights[1] == mr + last && heights[0] - heights[1] >= 0 && heights[0] - heights[1] <= 1;
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL %lld rows in %d-row tiles (split %d): tiles end at row %lld, %lld full (%lld counted)\n",
                (long long)rows, mr, split, (long long)next, (long long)full,
                (long long)wb_mlp_full_tiles(mr, split, rt, rows));
    }
}

int main(void) {
    const int64_t K = 1 << 10, M = 1 << 20;
    /* 16 rows in 12-row tiles run as 12 + 4 alone, 8 + 8 never (two tiles); 64 as 12 x 4 + 8 + 8 */
    int64_t first;
    checks++;
    if (wb_mlp_tile_rows(12, 1, 2, 16, 1, &first) != 4 || first != 12 ||
        wb_mlp_tile_rows(12, 1, 6, 64, 4, &first) != 8 || first != 48 ||
        wb_mlp_tile_rows(12, 1, 6, 64, 5, &first) != 8 || first != 56 ||
        wb_mlp_tile_rows(12, 0, 6, 64, 5, &first) != 4 || first != 60)
        failures++, fprintf(stderr, "FAIL 16 and 64 rows in 12-row tiles\n");
    for (int mr = 1; mr <= 12; mr++)
        for (int64_t rows = 1; rows <= 300; rows++) expect_tiles(mr, 1, rows), expect_tiles(mr, 0, rows);
    /* Zen 3 (AVX2 6x16, kc 256; 512 KiB L2, 16 MiB L3 share), the GeGLU MLP 768 x 3072 x 768: at
     * most 9 row tiles of 6 per block (9 x 24 x 1792 B = 378 KiB), evened out; one chunk per panel
     * up to 1365 tokens (x and output 6 KiB a row in 8 MiB), then 3 chunks (9 KiB a hidden column) */
    expect("zen3 1 token", 6, 768, 768, 256, 1, 512 * K, 16 * M, 1, 256);
    expect("zen3 128 tokens", 6, 768, 768, 256, 128, 512 * K, 16 * M, 8, 256);
    expect("zen3 512 tokens", 6, 768, 768, 256, 512, 512 * K, 16 * M, 9, 256);
    expect("zen3 1000 tokens", 6, 768, 768, 256, 1000, 512 * K, 16 * M, 9, 256);
    expect("zen3 1365 tokens", 6, 768, 768, 256, 1365, 512 * K, 16 * M, 9, 256);
    expect("zen3 1366 tokens", 6, 768, 768, 256, 1366, 512 * K, 16 * M, 9, 768);
    expect("zen3 4096 tokens", 6, 768, 768, 256, 4096, 512 * K, 16 * M, 9, 768);
    /* the Xeon model 207's AVX-512 path (12x32, kc 768; 2 MiB L2, 65 MiB L3 share) */
    expect("xeon207 512 tokens", 12, 768, 768, 768, 512, 2 * M, 65 * M, 11, 768);
    expect("xeon207 16384 tokens", 12, 768, 768, 768, 16384, 2 * M, 65 * M, 14, 3072);
    /* a block never below one tile, a panel never below one chunk */
    expect("tiny caches", 6, 4096, 4096, 256, 600, 64 * K, 64 * K, 1, 256);
    /* the token split's shares: 128 tokens on 2 threads as 64 | 64 rows (not 5 | 6 tiles of 12: 60 | 68) */
    expect_shares(128, 2, (const int64_t[]){0, 64});
    expect_shares(512, 2, (const int64_t[]){0, 256});
    expect_shares(1000, 2, (const int64_t[]){0, 500});
    expect_shares(131, 2, (const int64_t[]){0, 65});
    expect_shares(100, 3, (const int64_t[]){0, 33, 66});
    expect_shares(7, 4, NULL);
    for (int64_t m = 1; m <= 300; m++)
        for (int team = 1; team <= 8; team++) expect_shares(m, team, NULL);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
