/* test_gemm_epilogue.c: the GEMM driver's epilogue hook (wb_gemm_problem.epilogue, what a generated
 * GEMM epilogue plugs into): on every CPU path, 1 and 2 threads, ragged shapes, it visits each
 * element of C exactly once, after C's final value is stored, and it is called on whole blocks of
 * rows (all the rows of an MC block, walked along contiguous columns), not on single register tiles. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wb_kernels/gemm.h>

#include "test_data.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static int failures, checks;


#define MAX_CALLS 100000

typedef struct recorder {
    int64_t n;
    int *visits;   /* per element of C */
    int64_t calls; /* how many calls, and the first MAX_CALLS of them */
    int64_t row0[MAX_CALLS], rows[MAX_CALLS], cols[MAX_CALLS];
} recorder;

/* The hook under test: C = 2 C + 1 in place, counting visits (the ctx is the recorder). */
static void record(const void *ctx, float *c, int64_t ldc, int64_t row0, int64_t col0, int64_t rows, int64_t cols) {
    recorder *r = (recorder *)(uintptr_t)ctx;
    int64_t at;
#pragma omp atomic capture
    at = r->calls++;
    if (at < MAX_CALLS) r->row0[at] = row0, r->rows[at] = rows, r->cols[at] = cols;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            c[i * ldc + j] = 2.0f * c[i * ldc + j] + 1.0f;
#pragma omp atomic
            r->visits[(row0 + i) * r->n + col0 + j]++;
        }
}

static recorder rec;

/* C = A B^T (a linear: B is W^T with W [n, k] row-major), with and without the hook; the same
 * blocking and threads sum in the same order, so the hooked C must be exactly 2 C + 1. */
static void check(const wb_cpu_isa *isa, int64_t m, int64_t n, int64_t k, int threads, int one_block) {
    float *a = malloc(sizeof(float) * (size_t)(m * k)), *w = malloc(sizeof(float) * (size_t)(n * k));
    float *plain = malloc(sizeof(float) * (size_t)(m * n)), *hooked = malloc(sizeof(float) * (size_t)(m * n));
    float *bias = malloc(sizeof(float) * (size_t)n);
    rec.visits = calloc((size_t)(m * n), sizeof(int));
    rec.n = n, rec.calls = 0;
    for (int64_t i = 0; i < m * k; i++) a[i] = frand();
    for (int64_t i = 0; i < n * k; i++) w[i] = frand();
    for (int64_t j = 0; j < n; j++) bias[j] = frand();
    wb_gemm_problem p = {.m = m, .n = n, .k = k, .a = a, .rsa = k, .csa = 1, .b = w, .rsb = 1, .csb = k,
                         .c = plain, .ldc = n, .bias = bias, .store = WB_STORE_PLAIN, .threads = threads};
    int bad = wb_gemm_run(isa, &p) != 0;
    p.c = hooked, p.epilogue = record, p.epilogue_ctx = &rec;
    for (int64_t i = 0; i < m * n; i++) hooked[i] = NAN; /* poisoned: a skipped store shows */
    bad |= wb_gemm_run(isa, &p) != 0;
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < m * n; i++)
        if (rec.visits[i] != 1 || hooked[i] != 2.0f * plain[i] + 1.0f) {
            if (first < 0) first = i;
            wrong++;
        }
    /* the granularity: with all rows in one MC block, each call covers all of them */
    int64_t partial = 0;
    for (int64_t c = 0; one_block && c < rec.calls && c < MAX_CALLS; c++)
        if (rec.row0[c] != 0 || rec.rows[c] != m) partial++;
    checks++;
    if (bad || wrong || partial || rec.calls == 0) {
        failures++;
        printf("FAIL %s m=%lld n=%lld k=%lld threads=%d: %s%lld of %lld elements wrong or not visited once "
               "(first at %lld: visits %d), %lld of %lld calls not on all %lld rows (first call: rows %lld, cols %lld)\n",
               isa->name, (long long)m, (long long)n, (long long)k, threads, bad ? "run failed; " : "", (long long)wrong,
               (long long)(m * n), (long long)first, first >= 0 ? rec.visits[first] : 0, (long long)partial,
               (long long)rec.calls, (long long)m, (long long)(rec.calls ? rec.rows[0] : 0),
               (long long)(rec.calls ? rec.cols[0] : 0));
    }
    free(a), free(w), free(plain), free(hooked), free(bias), free(rec.visits);
}

int main(void) {
    const char *names[] = {"scalar", "avx2", "avx512"};
    if (wb_gemm_blocking_env_error()) {
        fprintf(stderr, "%s\n", wb_gemm_blocking_env_error());
        return 2;
    }
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    for (int i = 0; i < 3; i++) {
        const wb_cpu_isa *isa = wb_cpu_isa_get(names[i]);
        if (!isa) {
            printf("%-7s not supported by this CPU: skipped\n", names[i]);
            continue;
        }
        const wb_gemm_blocking b = wb_gemm_blocking_of(isa);
        const int before = failures;
        /* rows of one MC block, a few row tiles: each call must span all of them */
        const int64_t few = isa->mr + 3 <= b.mc ? isa->mr + 3 : b.mc;
        for (int threads = 1; threads <= 2; threads++) {
            check(isa, few, 3 * isa->nr + 5, 37, threads, 1);
            check(isa, 1, 129, 64, threads, 1);
            /* many MC blocks and panels, edge tiles in both directions, a K split */
            check(isa, 2 * b.mc + 7, b.nc + 3 * isa->nr + 9, 2 * b.kc + 13, threads, 0);
            check(isa, 33, 1000, 65, threads, 0);
        }
        printf("%-7s epilogue hook (mc %lld, nc %lld, kc %lld): %s\n", isa->name, (long long)b.mc, (long long)b.nc,
               (long long)b.kc, failures == before ? "ok" : "FAILED");
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
