/* test_gemm_reads.c: the GEMM reads its operands no further than their ends. Where the path reads a
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
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
