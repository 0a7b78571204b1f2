/* test_gemm.c: every compiled-in ISA path the CPU can run, against a double-precision
 * reference within the computation's forward error bound: four layouts, awkward sizes (1, 3,
 * 17, 31, 33, 65, 129, a prime K), every epilogue, the dual-GEMM GeGLU against its composition,
 * packed and unpacked weights, 1 and 2 threads (1 to 4 on a small blocking); that the bound
 * catches a dropped K block and a perturbation of twice itself; and the activations' ULP error
 * over the float range. Under WB_GEMM_BLOCKING (CTest runs each CPU's blocking) with --gemm-only,
 * only the blocking-dependent parts run. */
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


static double act(wb_gemm_store s, double x) {
    return s == WB_STORE_GELU_TANH ? wb_gelu_tanh_ref(x) : s == WB_STORE_GELU_ERF ? wb_gelu_erf_ref(x) : x;
}

/* The forward error bound of one output (the analysis of tests/bounds.lua): a dot product of k
 * terms (and a bias) summed in f32 in any order is within gamma_{k+1} * sum|terms| of the exact
 * one; an activation adds its own ULPs (8 for the GELUs: test_activation_ulps) at its result
 * and multiplies its input's error by at most its largest slope (1.13 for the GELUs); the GeGLU
 * product carries both factors' errors and rounds once more. */
#define U32     0x1p-24
#define ULP32   0x1p-23
#define GELU_LIP  1.13
#define GELU_ULPS 8

static double gamma_k(int64_t k) { return (double)k * U32 / (1 - (double)k * U32); }

typedef struct bound {
    double value;         /* |got - want| may be up to this */
    double gamma, mag;    /* the dot product's gamma and sum|terms| */
    double mag_up;        /* the up projection's (dual) */
    int act;              /* an activation applied */
} bound;

static bound bound_of(int64_t k, int has_bias, double mag, double want_pre, wb_gemm_store store, int dual, double mag_up,
                      double up) {
    bound b = {.gamma = gamma_k(k + has_bias), .mag = mag, .mag_up = mag_up};
    double e = b.gamma * mag;
    if (store == WB_STORE_PLAIN && !dual) {
        b.value = e;
        return b;
    }
    b.act = 1;
    double y = act(dual ? WB_STORE_GELU_TANH : store, want_pre), carried = GELU_LIP * e;
    double e_act = carried + GELU_ULPS * ULP32 * (fabs(y) + carried) + GELU_ULPS * 0x1p-149;
    if (!dual) {
        b.value = e_act;
        return b;
    }
    double e_up = b.gamma * mag_up, prod = fabs(y) * e_up + fabs(up) * e_act + e_act * e_up;
    b.value = prod + U32 * (fabs(y * up) + prod);
    return b;
}

/* How a case is run: as it is; with A's second K block zeroed in the GEMM but not in the
 * reference (a kernel that dropped a block: the check must fail); or with the first output moved
 * by `perturb` times its bound after the GEMM (2: must fail, 0.5: must pass). */
typedef struct fault {
    int drop_block;
    double perturb;
} fault;
static fault injected;
/* run_case also runs each case with the operands packed up front (wb_gemm_first_pass_packs(0))
 * where the ISA packs by the first pass, and compares the bits (not while a plan is recorded) */
static int compare_up_front = 1;

/* Checks C against the reference within the forward error bound of each element. */
static int run_case(const wb_cpu_isa *isa, int64_t m, int64_t n, int64_t k, int ta, int tb, int bias, int dual,
                    wb_gemm_store store, int packed, int threads) {
    float *a = malloc(sizeof(float) * (size_t)(m * k + 1)), *b = malloc(sizeof(float) * (size_t)(k * n + 1));
    float *bu = malloc(sizeof(float) * (size_t)(k * n + 1)), *bi = malloc(sizeof(float) * (size_t)(n + 1));
    float *c = malloc(sizeof(float) * (size_t)(m * n + 1));
    for (int64_t i = 0; i < m * k; i++)
        a[i] = frand();
    for (int64_t i = 0; i < k * n; i++)
        b[i] = frand(), bu[i] = frand();
    for (int64_t i = 0; i < n; i++)
        bi[i] = frand();
    for (int64_t i = 0; i < m * n; i++)
        c[i] = NAN; /* poisoned: every element must be written */
    /* ta: A stored transposed (column-major), tb: B stored transposed (as a linear's weight) */
    int64_t rsa = ta ? 1 : k, csa = ta ? m : 1, rsb = tb ? 1 : n, csb = tb ? k : 1;
    wb_gemm_problem p = {.m = m,
                         .n = n,
                         .k = k,
                         .a = a,
                         .rsa = rsa,
                         .csa = csa,
                         .b = b,
                         .rsb = rsb,
                         .csb = csb,
                         .b_up = dual ? bu : NULL,
                         .c = c,
                         .ldc = n,
                         .bias = bias && !dual ? bi : NULL,
                         .store = dual ? WB_STORE_GEGLU : store,
                         .threads = threads};
    if (dual && bias) p.bias = bi, p.bias_up = bu; /* the up bias: the first n values of bu */
    float *pk = NULL;
    if (packed) {
        pk = malloc(sizeof(float) * wb_gemm_packed_b_floats(isa, k, n, dual));
        wb_gemm_pack_b(isa, k, n, b, rsb, csb, dual ? bu : NULL, pk);
        p.packed_b = pk;
    }
    const int64_t kc = wb_gemm_blocking_of(isa).kc;
    float *a_run = NULL;
    if (injected.drop_block && k > kc) { /* the GEMM sees A without depths [kc, 2 kc) */
        a_run = malloc(sizeof(float) * (size_t)(m * k + 1));
        memcpy(a_run, a, sizeof(float) * (size_t)(m * k));
        for (int64_t i = 0; i < m; i++)
            for (int64_t q = kc; q < k && q < 2 * kc; q++)
                a_run[i * rsa + q * csa] = 0.0f;
        p.a = a_run;
    }
    int bad = wb_gemm_run(isa, &p) != 0;
    double worst = 0, got = 0, want_at = 0;
    bound at = {0};
    int64_t wi = 0, wj = 0;
    for (int64_t i = 0; i < m && !bad; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, mag = 0, su = 0, magu = 0;
            for (int64_t q = 0; q < k; q++) {
                double x = a[i * rsa + q * csa], g = b[q * rsb + j * csb], u = bu[q * rsb + j * csb];
                s += x * g, mag += fabs(x * g), su += x * u, magu += fabs(x * u);
            }
            if (bias) s += bi[j], mag += fabs(bi[j]);
            if (bias && dual) su += bu[j], magu += fabs(bu[j]);
            const double want = dual ? wb_gelu_tanh_ref(s) * su : act(store, s);
            const bound bd = bound_of(k, bias, mag, s, store, dual, magu, su);
            if (i == 0 && j == 0 && injected.perturb != 0) c[0] = (float)((double)c[0] + injected.perturb * bd.value);
            double err = fabs((double)c[i * n + j] - want), ratio = err / bd.value;
            if (!(err <= bd.value)) ratio = INFINITY; /* NaN fails too; a zero bound allows only exact */
            if (ratio >= worst) worst = ratio, got = c[i * n + j], want_at = want, at = bd, wi = i, wj = j;
        }
    bad |= worst > 1;
    checks++;
    /* packing by the first pass and up front give the same bits (c[0] perturbed: not compared) */
    float *c2 = isa->first_pass_packs && compare_up_front && injected.perturb == 0 && !bad
                    ? malloc(sizeof(float) * (size_t)(m * n + 1))
                    : NULL;
    if (c2) {
        for (int64_t i = 0; i < m * n; i++)
            c2[i] = NAN;
        wb_gemm_problem up_front = p;
        up_front.c = c2;
        wb_gemm_first_pass_packs(0);
        int bad2 = wb_gemm_run(isa, &up_front) != 0;
        wb_gemm_first_pass_packs(1);
        for (int64_t i = 0; i < m * n && !bad2; i++)
            bad2 = memcmp(&c[i], &c2[i], sizeof(float)) != 0;
        if (bad2) {
            failures++;
            fprintf(stderr, "FAIL %s m=%lld n=%lld k=%lld layout=%c%c dual=%d packed=%d threads=%d: packed by the "
                    "first pass and up front differ\n", isa->name, (long long)m, (long long)n, (long long)k,
                    tb ? 't' : 'n', ta ? 't' : 'n', dual, packed, threads);
        }
        free(c2);
    }
    if (bad && !injected.drop_block && fabs(injected.perturb) <= 1) {
        failures++;
        fprintf(stderr,
                "FAIL %s m=%lld n=%lld k=%lld layout=%c%c bias=%d dual=%d store=%d packed=%d threads=%d kc=%lld: "
                "[%lld][%lld] = %.9g, expected %.9g, |difference| %.3g > bound %.3g (gamma_%lld = %.3g times "
                "sum|x*w| = %.6g%s; up projection's sum|x*w| %.6g)\n",
                isa->name, (long long)m, (long long)n, (long long)k, tb ? 't' : 'n', ta ? 't' : 'n', bias, dual,
                (int)store, packed, threads, (long long)kc, (long long)wi, (long long)wj, got, want_at,
                fabs(got - want_at), at.value, (long long)(k + bias), at.gamma, at.mag,
                at.act ? ", through the activation: 1.13 x its input's error + 8 ULP" : "", at.mag_up);
    }
    free(a_run);
    free(a), free(b), free(bu), free(bi), free(c), free(pk);
    return !bad;
}

static void test_isa(const wb_cpu_isa *isa) {
    const int64_t sizes[] = {1, 3, 17, 31, 33, 65, 129};
    const int ns = sizeof sizes / sizeof sizes[0];
    int before = failures;
    /* all layouts x awkward m, n with a prime k */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int i = 0; i < ns; i++)
                for (int j = 0; j < ns; j++)
                    run_case(isa, sizes[i], sizes[j], 37, ta, tb, 0, 0, WB_STORE_PLAIN, 0, 1);
    /* depths across K-block boundaries (one block and a sliver of a second; three blocks, a
     * middle one among them), every epilogue, bias or not */
    const int64_t kc = wb_gemm_blocking_of(isa).kc;
    const int64_t ks[] = {0, 1, 3, 401, kc + 7, 2 * kc + 65};
    for (int q = 0; q < 6; q++)
        for (int s = WB_STORE_PLAIN; s <= WB_STORE_GELU_ERF; s++)
            for (int bias = 0; bias < 2; bias++) {
                run_case(isa, 33, 65, ks[q], 0, 1, bias, 0, (wb_gemm_store)s, 0, 1);
                run_case(isa, 17, 129, ks[q], 1, 0, bias, 0, (wb_gemm_store)s, 1, 2);
            }
    /* dual-GEMM GeGLU: edges, K split across blocks (2053 > DUAL_FULL_K), packed or not */
    const int64_t dk[] = {1, 31, 129, 2053};
    for (int q = 0; q < 4; q++)
        for (int packed = 0; packed < 2; packed++) {
            run_case(isa, 1, 33, dk[q], 0, 1, 0, 1, WB_STORE_GEGLU, packed, 1);
            run_case(isa, 31, 65, dk[q], 0, 1, 0, 1, WB_STORE_GEGLU, packed, 2);
            run_case(isa, 129, 17, dk[q], 1, 0, 0, 1, WB_STORE_GEGLU, packed, 2);
            run_case(isa, 17, 33, dk[q], 0, 1, 1, 1, WB_STORE_GEGLU, packed, 2); /* with biases */
        }
    /* dual with both operands row-major: on AVX-512 both read in place by their first passes */
    run_case(isa, 31, 65, 2053, 0, 0, 0, 1, WB_STORE_GEGLU, 0, 2);
    run_case(isa, 40, 70, 129, 0, 0, 1, 1, WB_STORE_GEGLU, 0, 1);
    /* both operands row-major where the passes over a sliver fetch the next one into L2: the
     * first pass over an A row tile then copies its rows into the row panel 8 floats at a time
     * (a reviewer's cases; on the other blockings some of them take the 16-float chunks; only
     * where the path packs by the first pass: elsewhere they repeat the cases above) */
    if (isa->first_pass_packs) {
        run_case(isa, 60, 1000, 805, 0, 0, 0, 0, WB_STORE_PLAIN, 0, 1);
        run_case(isa, 61, 1000, 1581, 0, 0, 1, 0, WB_STORE_GELU_TANH, 0, 1);
        run_case(isa, 60, 600, 1000, 0, 0, 0, 1, WB_STORE_GEGLU, 0, 1);
        run_case(isa, 400, 1000, 805, 0, 0, 0, 0, WB_STORE_PLAIN, 0, 2);
        /* one sliver in a panel (a thread's), K in blocks: the passes of a K block's last MC block
         * must not pack the next K block's sliver over the one they read */
        run_case(isa, 96, 32, 2 * kc + 65, 0, 0, 0, 0, WB_STORE_PLAIN, 0, 1);
        run_case(isa, 200, 64, 2 * kc + 65, 0, 0, 1, 0, WB_STORE_PLAIN, 0, 2);
    }
    /* bigger, threaded, both split directions */
    run_case(isa, 300, 1000, 300, 0, 1, 1, 0, WB_STORE_GELU_TANH, 1, 2);
    run_case(isa, 1000, 40, 300, 0, 0, 1, 0, WB_STORE_PLAIN, 0, 2);
    run_case(isa, 200, 700, 1300, 0, 1, 0, 1, WB_STORE_GEGLU, 1, 2);
    printf("%-7s gemm: %s\n", isa->name, failures == before ? "ok" : "FAILED");
}

/* The bound still catches real errors: a GEMM that dropped a K block fails every case (plain,
 * with an epilogue, dual; packed or not; depths of one block and a sliver, two blocks and a
 * part, three blocks), an output moved by twice its bound fails, by half of it passes. */
static void test_bound_catches(const wb_cpu_isa *isa) {
    int before = failures;
    const int64_t kc = wb_gemm_blocking_of(isa).kc;
    const int64_t ks[] = {kc + 7, 2 * kc + 65, 3 * kc};
    int cases = 0, caught = 0;
    injected = (fault){.drop_block = 1};
    for (int q = 0; q < 3; q++)
        for (int dual = 0; dual < 2; dual++)
            for (int packed = 0; packed < 2; packed++) {
                wb_gemm_store store = dual ? WB_STORE_GEGLU : q == 1 ? WB_STORE_GELU_ERF : WB_STORE_PLAIN;
                cases++;
                caught += !run_case(isa, 17, 33, ks[q], 0, 1, q == 2, dual, store, packed, 1);
            }
    int twice_fails = 0, half_passes = 1;
    for (int dual = 0; dual < 2; dual++) {
        wb_gemm_store store = dual ? WB_STORE_GEGLU : WB_STORE_GELU_TANH;
        injected = (fault){.perturb = 2};
        twice_fails += !run_case(isa, 5, 40, 301, 0, 1, 1, dual, store, 0, 1);
        injected = (fault){.perturb = -2};
        twice_fails += !run_case(isa, 5, 40, 301, 0, 1, 1, dual, store, 0, 1);
        injected = (fault){.perturb = 0.5};
        half_passes &= run_case(isa, 5, 40, 301, 0, 1, 1, dual, store, 0, 1); /* a failure counts itself */
        injected = (fault){.perturb = -0.5};
        half_passes &= run_case(isa, 5, 40, 301, 0, 1, 1, dual, store, 0, 1);
    }
    injected = (fault){0};
    checks += 2;
    if (caught != cases) {
        failures++;
        fprintf(stderr, "FAIL %s bound: a dropped K block (kc = %lld) passed %d of %d cases\n", isa->name, (long long)kc,
                cases - caught, cases);
    }
    if (twice_fails != 4) {
        failures++;
        fprintf(stderr, "FAIL %s bound: an output moved by twice its bound passed (%d of 4 caught)\n", isa->name,
                twice_fails);
    }
    printf("%-7s bound: a dropped K block caught in %d of %d cases, twice the bound caught %d of 4, half of it "
           "passed: %s\n", isa->name, caught, cases, twice_fails, failures == before && half_passes ? "ok" : "FAILED");
}

/* Threads: a blocking small enough that every GEMM here has several panels, K blocks and MC
 * blocks, so the threads' shares divide unevenly, on 1 to 4 threads (more than this machine's
 * cores is fine: only the results are checked), both split directions, the dual GEMM's partial
 * sums across K blocks. Every case does at least the 4e6 flops below which the driver runs one
 * thread. */
static void test_threads(const wb_cpu_isa *isa) {
    const wb_gemm_blocking_spec *env = wb_gemm_blocking_forced(), small = {.kc = 40, .mc = 36, .nc = 64};
    wb_gemm_blocking_spec saved = env ? *env : (wb_gemm_blocking_spec){0};
    wb_gemm_blocking_force(&small, NULL, 0);
    int before = failures;
#ifdef _OPENMP
    int saved_threads = omp_get_max_threads();
    omp_set_num_threads(4);
#endif
    for (int th = 1; th <= 4; th++)
        for (int packed = 0; packed < 2; packed++) {
            run_case(isa, 100, 333, 130, 0, 1, 1, 0, WB_STORE_GELU_TANH, packed, th); /* N split */
            run_case(isa, 61, 333, 130, 1, 0, 0, 0, WB_STORE_PLAIN, packed, th);
            run_case(isa, 3, 1000, 700, 0, 1, 1, 0, WB_STORE_PLAIN, packed, th); /* one row tile */
            run_case(isa, 100, 40, 600, 0, 1, 0, 0, WB_STORE_PLAIN, packed, th); /* M split */
            run_case(isa, 29, 100, 1100, 0, 1, 1, 1, WB_STORE_GEGLU, packed, th); /* dual, K split */
        }
#ifdef _OPENMP
    omp_set_num_threads(saved_threads);
#endif
    wb_gemm_blocking_force(env ? &saved : NULL, NULL, 0);
    printf("%-7s threads: %s\n", isa->name, failures == before ? "ok" : "FAILED");
}

/* The next-sliver prefetch plan: the microkernel calls of one GEMM, recorded. Over the passes
 * of one B sliver (consecutive calls on the same packed B), the shares fetched ahead must tile
 * exactly the sliver the driver runs next; they must be there when the sliver has 4 passes of
 * full row tiles or more, is 32 KiB or more, the block's slivers take more than half of L2 and its
 * successor is the next tile in memory or the next K block's first, and absent otherwise
 * (gemm.c's rule). The recording ISA fixes nc at 4096 columns, so that N stays in one panel. */
#define MAX_CALLS 100000
static struct call {
    const float *b, *next;
    int64_t b_floats, next_floats;
    int rows;
} calls[MAX_CALLS];
static int ncalls;
static const wb_cpu_isa *recorded_isa;

static void record_ukernel(const wb_gemm_tile *t, int m) {
    if (ncalls < MAX_CALLS)
        calls[ncalls++] = (struct call){t->b, t->pf_next, t->kc * recorded_isa->nr, t->pf_floats, m};
    recorded_isa->ukernel(t, m);
}

/* Returns how many slivers had their successor fetched ahead; -1 when the plan is wrong. */
static int check_prefetch_plan(const wb_cpu_isa *isa, int64_t m, int64_t n, int64_t k, int dual, int packed) {
    wb_cpu_isa rec = *isa;
    rec.ukernel = record_ukernel;
    rec.nc = 4096;
    recorded_isa = isa;
    ncalls = 0;
    uint64_t saved = rng;
    compare_up_front = 0;
    int ok = run_case(&rec, m, n, k, 0, 1, 0, dual, dual ? WB_STORE_GEGLU : WB_STORE_PLAIN, packed, 1);
    compare_up_front = 1;
    rng = saved;
    int covered = 0;
    const int64_t width = dual ? isa->nr / 2 : isa->nr, block_tiles = (n + width - 1) / width;
    const int64_t l2 = wb_gemm_blocking_of(isa).l2; /* sysfs's, or the driver's default */
    for (int i = 0; i < ncalls && ok;) {
        int j = i;
        while (j < ncalls && calls[j].b == calls[i].b) j++; /* the passes [i, j) over one sliver */
        const float *want = j < ncalls ? calls[j].b : NULL, *at = NULL;
        int64_t got = 0;
        int full = 0;
        for (int q = i; q < j && ok; q++) {
            full += calls[q].rows == isa->mr;
            if (!calls[q].next || !calls[q].next_floats) continue;
            if (calls[q].rows != isa->mr) ok = 0; /* an edge tile fetches nothing */
            if (!at) at = calls[q].next;
            if (calls[q].next != at) ok = 0; /* shares in order, no gap, no overlap */
            at += calls[q].next_floats, got += calls[q].next_floats;
        }
        int64_t sliver = calls[i].b_floats * (int64_t)sizeof(float);
        int eligible = full >= 4 && sliver >= (32 << 10) && block_tiles * sliver > l2 / 2;
        if (got) {
            covered++;
            if (!eligible || !want || at - got != want || got != calls[j].b_floats) ok = 0;
        } else if (eligible && packed && want == calls[i].b + calls[i].b_floats) {
            ok = 0; /* the next tile in memory (also across a prepacked K block), and not fetched */
        } else if (eligible && !packed && want == calls[i].b + calls[i].b_floats && j < ncalls &&
                   calls[j].b_floats == calls[i].b_floats) {
            ok = 0; /* the next tile of the block, and not fetched */
        }
        i = j;
    }
    checks++;
    if (!ok || ncalls >= MAX_CALLS) {
        failures++;
        fprintf(stderr, "FAIL %s prefetch plan m=%lld n=%lld k=%lld dual=%d packed=%d: the shares fetched ahead do "
                        "not follow the rule\n", isa->name, (long long)m, (long long)n, (long long)k, dual, packed);
        return -1;
    }
    return covered;
}

static void test_prefetch_plan(const wb_cpu_isa *isa) {
    int before = failures;
    /* enough row tiles per block to spread the fetch, and panels of 3.5 MiB */
    int big[4] = {check_prefetch_plan(isa, 60, 3000, 300, 0, 0), check_prefetch_plan(isa, 60, 3000, 300, 0, 1),
                  check_prefetch_plan(isa, 60, 1500, 300, 1, 1), check_prefetch_plan(isa, 100, 1500, 400, 1, 0)};
    /* on AVX-512 with its slivers of 32 KiB or more, some must be covered (unless L2 is over
     * 7 MiB, when no panel here takes half of it) */
    const int64_t l2 = wb_gemm_blocking_of(isa).l2;
    const int expect = !strcmp(isa->name, "avx512") && l2 <= (7 << 20) &&
                       wb_gemm_blocking_of(isa).kc * isa->nr * (int64_t)sizeof(float) >= (32 << 10);
    /* more than one K block: the last sliver of a block fetches the next block's first when B
     * is prepacked (and the next tile of the block otherwise) */
    const int64_t two_blocks = wb_gemm_blocking_of(isa).kc + 263;
    if (check_prefetch_plan(isa, 60, 3000, two_blocks, 0, 1) == 0 && expect) {
        failures++;
        fprintf(stderr, "FAIL %s prefetch plan: two K blocks fetched nothing ahead\n", isa->name);
    }
    check_prefetch_plan(isa, 60, 3000, two_blocks, 0, 0);
    /* 4 full row tiles and an edge tile: the edge fetches nothing, the full ones share it all */
    check_prefetch_plan(isa, 4 * isa->mr + 1, 3000, 300, 0, 1);
    /* panels under half of a 2 MiB L2: nothing fetched ahead there (each sliver is checked
     * against the rule, so a smaller L2 that spreads them passes too) */
    check_prefetch_plan(isa, 200, 300, 700, 0, 1);
    check_prefetch_plan(isa, 200, 100, 700, 1, 0);
    for (int i = 0; i < 4; i++)
        if (big[i] == 0 && expect) {
            failures++;
            fprintf(stderr, "FAIL %s prefetch plan: case %d fetched nothing ahead\n", isa->name, i);
        }
    /* at the pass threshold: 4 row tiles fetch ahead (on AVX-512), 3 do not */
    if (check_prefetch_plan(isa, 4 * isa->mr, 3000, 300, 0, 1) == 0 && expect) {
        failures++;
        fprintf(stderr, "FAIL %s prefetch plan: 4 passes fetched nothing ahead\n", isa->name);
    }
    check_prefetch_plan(isa, 3 * isa->mr, 3000, 300, 0, 1);
    /* one or two row tiles: nothing is fetched ahead (each pass would fetch a large share) */
    if (check_prefetch_plan(isa, 2, 3000, 300, 0, 1) > 0 || check_prefetch_plan(isa, isa->mr + 1, 3000, 300, 0, 1) > 0) {
        failures++;
        fprintf(stderr, "FAIL %s prefetch plan: a GEMM of one or two row tiles fetched ahead\n", isa->name);
    }
    printf("%-7s prefetch plan: %s\n", isa->name, failures == before ? "ok" : "FAILED");
}

/* ULP distance between two floats (the order of their bit patterns). */
static double ulps(float got, double want) {
    float w = (float)want;
    if (isnan(w) || isnan(got)) return isnan(w) && isnan(got) ? 0 : INFINITY;
    if (w == got) return 0;
    int32_t ig, iw;
    memcpy(&ig, &got, 4), memcpy(&iw, &w, 4);
    if (ig < 0) ig = INT32_MIN - ig;
    if (iw < 0) iw = INT32_MIN - iw;
    return fabs((double)ig - (double)iw);
}

/* The sanitizer build checks the activations' memory, not their ULPs (the Release build does):
 * --sparse-ulps takes every 29th point of the dense sweeps (the vector loops and their tails run
 * the same), which takes its c_gemm from minutes to seconds. */
static int ulp_stride = 1;

/* The activation tests' common points into x (room for 130,112): dense in [-20, 20], where the
 * functions bend, and 64 values in every binade of either sign from 2^-40 to 2^38. Returns the
 * count. */
static int activation_points(float *x) {
    int n = 0;
    for (int i = 0; i < 120000; i += ulp_stride)
        x[n++] = -20.0f + 40.0f * (float)i / 120000.0f;
    for (int e = -40; e <= 38; e++)
        for (int s = -1; s <= 1; s += 2)
            for (int j = 0; j < 64; j++)
                x[n++] = (float)s * ldexpf(1.0f + (float)j / 64.0f, e);
    return n;
}

static void test_activation_ulps(const wb_cpu_isa *isa) {
    enum { N = 200000 };
    static float x[N], y[N];
    int n = activation_points(x);
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, 3.4e38f, -3.4e38f, -13.0f};
    for (int i = 0; i < 10; i++)
        x[n++] = specials[i];
    for (int form = 0; form < 2; form++) {
        isa->gelu(x, y, n, form);
        double worst = 0, where = 0;
        for (int i = 0; i < n; i++) {
            double want = form ? wb_gelu_erf_ref(x[i]) : wb_gelu_tanh_ref(x[i]);
            if (isinf(x[i]) && x[i] < 0) want = NAN; /* -inf * 0 in both formulas */
            double u = ulps(y[i], want);
            if (u > worst) worst = u, where = x[i];
        }
        checks++;
        int ok = worst <= 8;
        if (!ok) failures++;
        printf("%-7s gelu_%s: max %.0f ULP (at x = %.9g) over %d points%s\n", isa->name, form ? "erf " : "tanh", worst,
               where, n, ok ? "" : "  FAILED (limit 8)");
    }
}

/* silu, sigmoid, tanh, exp and softplus against wb_act_ref: the GELU points, plus 200k points where
 * exp, sigmoid, silu and softplus round into the subnormals or underflow to 0 (x in [-110, -80]) and every
 * float in [88.72, 88.73), around where exp overflows: these are rounded by a separate scaling
 * step. */
static void test_act_ulps(const wb_cpu_isa *isa) {
    enum { N = 400000 };
    static float x[N], y[N];
    int n = activation_points(x);
    for (int i = 0; i < 200000; i += ulp_stride)
        x[n++] = -110.0f + 30.0f * (float)i / 200000.0f;
    for (float v = 88.72f; v < 88.73f; v = nextafterf(v, INFINITY))
        x[n++] = v;
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, 3.4e38f, -3.4e38f, 100.0f};
    for (int i = 0; i < 10; i++)
        x[n++] = specials[i];
    const wb_cpu_act acts[] = {WB_CPU_SILU, WB_CPU_SIGMOID, WB_CPU_TANH, WB_CPU_EXP, WB_CPU_SOFTPLUS};
    const char *names[] = {"silu", "sigmoid", "tanh", "exp", "softplus"};
    for (int a = 0; a < 5; a++) {
        isa->activation(acts[a], x, NULL, y, n);
        double worst = 0, where = 0;
        for (int i = 0; i < n; i++) {
            double want = wb_act_ref(acts[a], x[i], 0.0);
            if (acts[a] == WB_CPU_SILU && isinf(x[i]) && x[i] < 0) want = NAN; /* -inf * 0 */
            double u = ulps(y[i], want);
            if (u > worst) worst = u, where = x[i];
        }
        checks++;
        int ok = worst <= 4;
        if (!ok) failures++;
        printf("%-7s %-9s: max %.0f ULP (at x = %.9g) over %d points%s\n", isa->name, names[a], worst, where, n,
               ok ? "" : "  FAILED (limit 4)");
    }
}

int main(int argc, char **argv) {
    const char *names[] = {"scalar", "avx2", "avx512"};
    const int gemm_only = argc > 1 && !strcmp(argv[1], "--gemm-only");
    if (argc > 1 && !strcmp(argv[1], "--sparse-ulps")) ulp_stride = 29;
    if (wb_gemm_blocking_env_error()) {
        fprintf(stderr, "%s\n", wb_gemm_blocking_env_error());
        return 2;
    }
    const wb_gemm_blocking_spec *forced = wb_gemm_blocking_forced();
    if (forced && forced->kc > 0)
        printf("blocking forced: kc %lld, mc %lld, nc %lld\n", (long long)forced->kc, (long long)forced->mc,
               (long long)forced->nc);
    else if (forced)
        printf("blocking forced: the rule on L1 %lld KiB, L2 %lld KiB, L3 share %lld KiB\n", (long long)forced->l1 >> 10,
               (long long)forced->l2 >> 10, (long long)forced->l3_share >> 10);
    for (int i = 0; i < 3; i++) {
        const wb_cpu_isa *isa = wb_cpu_isa_get(names[i]);
        if (!isa) {
            printf("%-7s not supported by this CPU: skipped\n", names[i]);
            continue;
        }
        wb_gemm_blocking b = wb_gemm_blocking_of(isa);
        printf("%-7s blocking: kc %lld, mc %lld, nc %lld\n", isa->name, (long long)b.kc, (long long)b.mc, (long long)b.nc);
        test_isa(isa);
        test_bound_catches(isa);
        if (gemm_only) continue;
        test_prefetch_plan(isa);
        test_threads(isa);
        test_activation_ulps(isa);
        test_act_ulps(isa);
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
