/* test_gemm_reads.c: the GEMM reads its operands no further than their ends, and fetches ahead
 * the rows its first passes will read in place (test_in_place_fetch). Where the path reads a
 * row-major A and B in place (AVX-512's first passes), the A rows' copies into the row panel are
 * masked loads of 16 (or 8) floats: a last chunk of fewer must not read past the row, which on the
 * last row is past A. Operands that end at an unreadable page make such a read fault; the
 * products must be the bits of the same GEMM on ordinary memory. Every path this CPU can run;
 * CTest runs it on this machine's blocking and on a small ragged one (K blocks of 40). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <wb_kernels/gemm.h>

#include "test_data.h"

static int failures, checks;

/* `floats` floats that end where a page ends, an unreadable page after them: a read past their end
 * faults (the masked loads of the first passes' copies must read no lane past a row, and the
 * last row of A ends at the page). *map and *len: what to munmap. */
static float *at_page_end(size_t floats, void **map, size_t *len) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = floats * sizeof(float);
    const size_t pages = (bytes + page - 1) / page + 1;
    char *base = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    if (mprotect(base + (pages - 1) * page, page, PROT_NONE) != 0) {
        munmap(base, pages * page);
        return NULL;
    }
    *map = base, *len = pages * page;
    return (float *)(void *)(base + (pages - 1) * page - bytes);
}

/* Row-major A and B that end at an unreadable page, at depths that leave a last chunk of 1 to 15
 * floats (and none): the same bits as from ordinary memory, and no fault. */
static void test_reads_stay_within(const wb_cpu_isa *isa) {
    int before = failures;
    const int64_t ks[] = {5, 37, 48, 131}, m = 25, n = 64;
    for (int q = 0; q < 4; q++) {
        const int64_t k = ks[q];
        void *map_a = NULL, *map_b = NULL;
        size_t len_a = 0, len_b = 0;
        float *a = at_page_end((size_t)(m * k), &map_a, &len_a), *b = at_page_end((size_t)(k * n), &map_b, &len_b);
        float *a2 = malloc(sizeof(float) * (size_t)(m * k)), *b2 = malloc(sizeof(float) * (size_t)(k * n));
        float *c = malloc(sizeof(float) * (size_t)(m * n)), *c2 = malloc(sizeof(float) * (size_t)(m * n));
        if (!a || !b || !a2 || !b2 || !c || !c2) {
            printf("FAIL %s reads: no memory\n", isa->name);
            failures++;
        } else {
            for (int64_t i = 0; i < m * k; i++) a[i] = a2[i] = frand();
            for (int64_t i = 0; i < k * n; i++) b[i] = b2[i] = frand();
            wb_gemm_problem p = {.m = m, .n = n, .k = k, .a = a, .rsa = k, .csa = 1, .b = b, .rsb = n, .csb = 1,
                                 .c = c, .ldc = n, .store = WB_STORE_PLAIN, .threads = 1};
            wb_gemm_problem p2 = p;
            p2.a = a2, p2.b = b2, p2.c = c2;
            checks++;
            if (wb_gemm_run(isa, &p) != 0 || wb_gemm_run(isa, &p2) != 0 ||
                memcmp(c, c2, sizeof(float) * (size_t)(m * n)) != 0) {
                printf("FAIL %s reads at a page's end, k=%lld: not the same bits\n", isa->name, (long long)k);
                failures++;
            }
        }
        if (a) munmap(map_a, len_a);
        if (b) munmap(map_b, len_b);
        free(a2), free(b2), free(c), free(c2);
    }
    printf("%-7s reads within A and B: %s\n", isa->name, failures == before ? "ok" : "FAILED");
}

/* The passes before a sliver's first pass (which reads a row-major B in place and packs it) fetch
 * that pass's rows of B and the lines it packs them into (gemm.c's in_place_next). The microkernel
 * calls of a GEMM, recorded: every such share must be whole rows of the next first pass's sliver
 * with pf_write where those rows are packed, and the shares fetched ahead of one first pass must
 * cover its rows once each. A wrong address changes no result, so only this sees it. */
typedef struct {
    const float *b, *pf_next;
    const float *b_pack, *pf_write;
    int64_t ldb, kc, pf_floats, pf_ld;
} fetch_call;
static fetch_call *fetches;
static int nfetches, cap_fetches;
static const wb_cpu_isa *fetch_isa;

static void record_fetch(const wb_gemm_tile *t, int m) {
    if (nfetches == cap_fetches) {
        fetch_call *more = realloc(fetches, sizeof *fetches * (size_t)(cap_fetches ? 2 * cap_fetches : 4096));
        if (!more) abort();
        fetches = more, cap_fetches = cap_fetches ? 2 * cap_fetches : 4096;
    }
    fetches[nfetches++] = (fetch_call){t->b, t->pf_next, t->b_pack, t->pf_write, t->ldb, t->kc, t->pf_floats, t->pf_ld};
    fetch_isa->ukernel(t, m);
}

/* Checks the plan of one GEMM; returns how many first passes had their rows fetched ahead, -1 if wrong. */
static int check_in_place_fetch(const wb_cpu_isa *isa, int64_t m, int64_t n, int64_t k) {
    wb_cpu_isa rec = *isa;
    rec.ukernel = record_fetch, fetch_isa = isa, nfetches = 0;
    const int64_t nr = isa->nr;
    float *a = calloc((size_t)(m * k), sizeof(float)), *b = calloc((size_t)(k * n), sizeof(float));
    float *c = calloc((size_t)(m * n), sizeof(float));
    wb_gemm_problem p = {.m = m, .n = n, .k = k, .a = a, .rsa = k, .csa = 1, .b = b, .rsb = n, .csb = 1, .c = c,
                         .ldc = n, .store = WB_STORE_PLAIN, .threads = 1};
    int ok = a && b && c && wb_gemm_run(&rec, &p) == 0, fetched = 0;
    for (int f = 0; f < nfetches && ok; f++) { /* each first pass, and the shares since the one before */
        const fetch_call *first = &fetches[f];
        if (first->ldb <= 0) continue;
        int64_t rows_seen = 0, any = 0;
        char seen[8192] = {0};
        if (first->kc > (int64_t)sizeof seen) ok = 0;
        for (int i = f - 1; i >= 0 && ok; i--) { /* back to the first pass before, whose share is the first */
            const fetch_call *s = &fetches[i];
            if (s->pf_ld <= 0 || s->pf_floats <= 0) {
                if (s->ldb > 0) break;
                continue;
            }
            const int64_t off = s->pf_next - first->b, rows = s->pf_floats / nr;
            if (s->pf_floats % nr || s->pf_ld != first->ldb || off < 0 || off % s->pf_ld ||
                off / s->pf_ld + rows > first->kc || s->pf_write != first->b_pack + off / s->pf_ld * nr) {
                ok = 0;
                break;
            }
            for (int64_t r = off / s->pf_ld; r < off / s->pf_ld + rows; r++)
                rows_seen += !seen[r]++, ok &= seen[r] == 1;
            any = 1;
            if (s->ldb > 0) break;
        }
        if (any && rows_seen != first->kc) ok = 0; /* (a first pass's own share goes to the next one) */
        fetched += any != 0;
    }
    for (int i = 0; i < nfetches && ok; i++) /* and no in-place share that no first pass follows */
        if (fetches[i].pf_ld > 0 && fetches[i].pf_floats > 0) {
            int f = i + 1;
            while (f < nfetches && fetches[f].ldb <= 0) f++;
            ok = f < nfetches;
        }
    free(a), free(b), free(c);
    checks++;
    if (!ok) {
        printf("FAIL %s in-place fetch plan m=%lld n=%lld k=%lld: a share is not rows of the next first pass, or "
               "misses or repeats one\n", isa->name, (long long)m, (long long)n, (long long)k);
        failures++;
        return -1;
    }
    return fetched;
}

static void test_in_place_fetch(const wb_cpu_isa *isa) {
    if (!isa->first_pass_packs) return;
    int before = failures;
    /* one MC block and one K block; several of each (rows 4000 bytes apart: not on a line). Fetched
     * ahead where an MC block has 4 full row tiles or more (not under the ragged blocking's 2). */
    const int64_t shapes[][3] = {{60, 1024, 300}, {400, 1000, 805}, {61, 1000, 1581}};
    const int expect = wb_gemm_blocking_of(isa).mc / isa->mr >= 4;
    for (int q = 0; q < 3; q++)
        if (check_in_place_fetch(isa, shapes[q][0], shapes[q][1], shapes[q][2]) == 0 && expect) {
            printf("FAIL %s in-place fetch plan: nothing fetched ahead at m=%lld\n", isa->name,
                   (long long)shapes[q][0]);
            failures++;
        }
    printf("%-7s rows of B in place fetched ahead: %s\n", isa->name, failures == before ? "ok" : "FAILED");
}

int main(void) {
    const char *names[] = {"scalar", "avx2", "avx512"};
    if (wb_gemm_blocking_env_error()) {
        fprintf(stderr, "%s\n", wb_gemm_blocking_env_error());
        return 2;
    }
    for (int i = 0; i < 3; i++) {
        const wb_cpu_isa *isa = wb_cpu_isa_get(names[i]);
        if (!isa) {
            printf("%-7s not supported by this CPU: skipped\n", names[i]);
            continue;
        }
        test_reads_stay_within(isa);
        test_in_place_fetch(isa);
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
