/* test_panel_store.c: the microkernel's gated store into a packed-A sliver (wb_gemm_tile's
 * c_out_panel, what the one-kernel MLP's dual tiles write the hidden through): on every CPU path,
 * GeGLU and SwiGLU, every row count 1..MR, the sliver holds exactly the row-major store's values,
 * bit for bit, column c of row i at c_out[c*MR + i], and nothing of the rows a partial tile lacks,
 * nor past the sliver, is written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wb_kernels/gemm.h>

#define MAX_MR 12
#define MAX_NR 32
#define KC     37
#define SENTINEL -12345.0f
#define GUARD    64 /* floats past the sliver that must stay unwritten */

static int failures, checks;

/* Inputs large enough that GELU's tails (and its negative branch) are reached. */
static float value(unsigned i) { return (float)((i * 2654435761u) % 2001u) / 1000.0f - 1.0f; }

static void check(const wb_cpu_isa *isa, wb_gemm_store store, int m) {
    const int mr = isa->mr, nr = isa->nr, width = nr / 2;
    float a[KC * MAX_MR], b[KC * MAX_NR], rows[MAX_MR * MAX_NR / 2], panel[MAX_MR * MAX_NR / 2 + GUARD];
    for (int i = 0; i < KC * mr; i++) a[i] = value((unsigned)i) * 1.5f;
    for (int i = 0; i < KC * nr; i++) b[i] = value((unsigned)i + 7777u);
    for (int i = 0; i < mr * width; i++) rows[i] = SENTINEL;
    for (int i = 0; i < mr * width + GUARD; i++) panel[i] = SENTINEL;
    wb_gemm_tile t = {.kc = KC, .a = a, .b = b, .c_out = rows, .ldc_out = width, .store = store};
    isa->ukernel(&t, m);
    t.c_out = panel, t.c_out_panel = 1; /* (ldc_out = width: the output fetch covers the sliver) */
    isa->ukernel(&t, m);
    int wrong = 0;
    for (int i = 0; i < mr; i++)
        for (int c = 0; c < width; c++) {
            const float want = i < m ? rows[i * width + c] : SENTINEL, got = panel[c * mr + i];
            checks++;
            if (memcmp(&want, &got, sizeof want) != 0) {
                if (wrong++ < 3)
                    fprintf(stderr, "%s %s m=%d: row %d column %d: panel %.9g, row-major store %.9g%s\n", isa->name,
                            store == WB_STORE_GEGLU ? "geglu" : "swiglu", m, i, c, (double)got, (double)want,
                            i < m ? "" : " (a row the tile does not have: must stay unwritten)");
            }
        }
    for (int i = mr * width; i < mr * width + GUARD; i++) {
        checks++;
        if (panel[i] != SENTINEL && wrong++ < 3)
            fprintf(stderr, "%s m=%d: float %d written, past the %d-float sliver\n", isa->name, m, i, mr * width);
    }
    failures += wrong;
}

int main(void) {
    const char *names[] = {"scalar", "avx2", "avx512"};
    for (int n = 0; n < 3; n++) {
        const wb_cpu_isa *isa = wb_cpu_isa_get(names[n]);
        if (!isa) {
            printf("%-7s not supported by this CPU: skipped\n", names[n]);
            continue;
        }
        if (isa->mr > MAX_MR || isa->nr > MAX_NR) {
            fprintf(stderr, "%s: a %dx%d tile is larger than this test's buffers\n", isa->name, isa->mr, isa->nr);
            return 1;
        }
        const int before = failures;
        for (int m = 1; m <= isa->mr; m++) {
            check(isa, WB_STORE_GEGLU, m);
            check(isa, WB_STORE_SWIGLU, m);
        }
        printf("%-7s panel store (%dx%d tile): %s\n", isa->name, isa->mr, isa->nr / 2,
               failures == before ? "ok" : "FAILED");
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
