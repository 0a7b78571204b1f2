/* peer_openblas.c: OpenBLAS as a comparison peer for benchmarks, loaded with dlopen at first
 * use (no build dependency; absent library = a clear message). OpenBLAS reads
 * OPENBLAS_CORETYPE when it loads and silently falls back to SSE kernels on CPUs it does not
 * recognise, so when the variable is unset we set it from our own CPU detection (SKYLAKEX for
 * AVX-512, HASWELL for AVX2) before loading, and report what it chose. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wb_kernels/gemm.h>
#include <wb/peer.h>
#include "storage.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc);

static struct {
    int tried;
    void *lib;
    sgemm_fn sgemm;
    char *(*corename)(void);
    char *(*config)(void); /* optional */
    void (*set_threads)(int);
    char coretype_note[96];
} ob;

static wb_status load(void) {
    if (ob.tried) return ob.lib ? WB_OK : wb_error(WB_ERR_UNSUPPORTED, "%s", ob.coretype_note);
    ob.tried = 1;
    const char *set = getenv("OPENBLAS_CORETYPE");
    if (!set || !*set) {
        __builtin_cpu_init();
        const char *core = __builtin_cpu_supports("avx512f") ? "SKYLAKEX"
                           : __builtin_cpu_supports("avx2")  ? "HASWELL"
                                                             : NULL;
        if (core) setenv("OPENBLAS_CORETYPE", core, 0);
        snprintf(ob.coretype_note, sizeof ob.coretype_note, "OPENBLAS_CORETYPE=%s (set by workbench)",
                 core ? core : "unset");
    } else {
        snprintf(ob.coretype_note, sizeof ob.coretype_note, "OPENBLAS_CORETYPE=%s (from the environment)", set);
    }
    const char *names[] = {"libopenblas.so.0", "libopenblas.so", "libopenblasp.so.0"};
    for (int i = 0; i < 3 && !ob.lib; i++)
        ob.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (ob.lib) {
        ob.sgemm = (sgemm_fn)dlsym(ob.lib, "cblas_sgemm");
        ob.corename = (char *(*)(void))dlsym(ob.lib, "openblas_get_corename");
        ob.set_threads = (void (*)(int))dlsym(ob.lib, "openblas_set_num_threads");
        ob.config = (char *(*)(void))dlsym(ob.lib, "openblas_get_config");
    }
    if (!ob.lib || !ob.sgemm || !ob.corename || !ob.set_threads) {
        ob.lib = NULL;
        snprintf(ob.coretype_note, sizeof ob.coretype_note,
                 "OpenBLAS is not installed (apt-get install libopenblas0-pthread)");
        return wb_error(WB_ERR_UNSUPPORTED, "%s", ob.coretype_note);
    }
    return WB_OK;
}

int wb_openblas_available(void) { return load() == WB_OK; }

wb_status wb_openblas_info(const char **corename, const char **coretype_note) {
    wb_status st = load();
    if (st) return st;
    *corename = ob.corename();
    *coretype_note = ob.coretype_note;
    return WB_OK;
}

const char *wb_openblas_config(void) { return load() == WB_OK && ob.config ? ob.config() : NULL; }

wb_status wb_openblas_set_threads(int n) {
    /* OpenBLAS ignores 0 and negative counts without a word */
    if (n < 1 || n > WB_MAX_THREADS)
        return wb_error(WB_ERR_ARGUMENT, "openblas.set_num_threads: %d threads is out of range (1..%d)", n,
                        WB_MAX_THREADS);
    wb_status st = load();
    if (st) return st;
    ob.set_threads(n);
    return WB_OK;
}

/* One operand as a BLAS matrix: row-major with leading dimension, or its transpose. */
static int blas_operand(const wb_tensor *t, int *trans, int *ld) {
    if (t->stride[1] == 1 || t->shape[1] <= 1) {
        *trans = NO_TRANS, *ld = (int)(t->shape[0] > 1 ? t->stride[0] : (t->shape[1] > 1 ? t->shape[1] : 1));
        return *ld >= (t->shape[1] > 1 ? t->shape[1] : 1);
    }
    if (t->stride[0] == 1 || t->shape[0] <= 1) {
        *trans = TRANS, *ld = (int)t->stride[1];
        return *ld >= (t->shape[0] > 1 ? t->shape[0] : 1);
    }
    return 0;
}

wb_status wb_openblas_matmul(wb_tensor *a, wb_tensor *b, wb_tensor **out) {
    *out = NULL;
    wb_status st = load();
    if (st) return st;
    if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[0] || a->dtype != WB_F32 || b->dtype != WB_F32)
        return wb_error(WB_ERR_SHAPE, "openblas.matmul: expects f32 matrices [M,K] x [K,N]");
    int ta, tb, lda, ldb;
    if (!blas_operand(a, &ta, &lda) || !blas_operand(b, &tb, &ldb))
        return wb_error(WB_ERR_ARGUMENT, "openblas.matmul: operands need unit stride along one dimension");
    const int64_t shape[2] = {a->shape[0], b->shape[1]};
    if ((st = wb_tensor_empty(WB_F32, WB_DEVICE_CPU, 2, shape, out))) return st;
    int m = (int)shape[0], n = (int)shape[1], k = (int)a->shape[1];
    if (m > 0 && n > 0)
        ob.sgemm(ROW_MAJOR, ta, tb, m, n, k, 1.0f, wb_tensor_data(a), lda, wb_tensor_data(b), ldb, 0.0f,
                 wb_tensor_data(*out), n > 1 ? n : 1);
    wb_storage_bump_version((*out)->storage);
    return WB_OK;
}
