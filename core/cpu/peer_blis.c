/* peer_blis.c: BLIS as a comparison peer for benchmarks, loaded with dlopen at first use (no
 * build dependency). Debian ships BLIS in one build per threading model; on 1 thread we time
 * its serial build (blis-serial, no threading overhead at all), on more its pthread build
 * (blis-pthread), each from the multiarch library folder or from WB_BLIS_DIR. A missing build
 * is one line saying which. BLIS takes row and column strides, so views need no copy. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <wb/peer.h>
#include "storage.h"

#ifndef WB_MULTIARCH_LIBDIR
#define WB_MULTIARCH_LIBDIR "/usr/lib"
#endif

/* BLIS's typed API with its 64-bit dim_t/inc_t (checked at load: bli_info_get_int_type_size) */
typedef void (*bli_sgemm_fn)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *alpha,
                             const float *a, int64_t rsa, int64_t csa, const float *b, int64_t rsb, int64_t csb,
                             const float *beta, float *c, int64_t rsc, int64_t csc);

typedef struct {
    const char *folder; /* Debian's folder for this build */
    int tried;
    void *lib;
    bli_sgemm_fn sgemm;
    void (*set_threads)(int64_t);
    char version[32], arch[32];
    char why_not[PATH_MAX + 160];
} blis_build;

static blis_build builds[2] = {{.folder = "blis-serial"}, {.folder = "blis-pthread"}};
static int threads = 1;

static wb_status load(blis_build *b) {
    if (!b->tried) {
        b->tried = 1;
        const char *dir = getenv("WB_BLIS_DIR");
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s/libblis.so.4", dir && *dir ? dir : WB_MULTIARCH_LIBDIR, b->folder);
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib && dir && *dir) { /* the variable's folder, said as such */
            snprintf(b->why_not, sizeof b->why_not, "BLIS (%s): WB_BLIS_DIR=%s has no usable %s/libblis.so.4: %s",
                     b->folder, dir, b->folder, dlerror());
            return wb_error(WB_ERR_UNSUPPORTED, "%s", b->why_not);
        }
        if (!lib) {
            snprintf(b->why_not, sizeof b->why_not, "BLIS (%s) is not installed (apt-get install libblis4-%s): %s",
                     b->folder, b->folder + 5, dlerror());
            return wb_error(WB_ERR_UNSUPPORTED, "%s", b->why_not);
        }
        b->sgemm = (bli_sgemm_fn)dlsym(lib, "bli_sgemm");
        b->set_threads = (void (*)(int64_t))dlsym(lib, "bli_thread_set_num_threads");
        char *(*version)(void) = (char *(*)(void))dlsym(lib, "bli_info_get_version_str");
        int64_t (*int_size)(void) = (int64_t(*)(void))dlsym(lib, "bli_info_get_int_type_size");
        int (*arch_id)(void) = (int (*)(void))dlsym(lib, "bli_arch_query_id");
        const char *(*arch_name)(int) = (const char *(*)(int))dlsym(lib, "bli_arch_string");
        if (!b->sgemm || !b->set_threads || !version || !int_size || !arch_id || !arch_name) {
            snprintf(b->why_not, sizeof b->why_not, "BLIS at %s lacks its typed API (bli_sgemm, bli_arch_query_id)",
                     path);
        } else if (int_size() != 64) {
            snprintf(b->why_not, sizeof b->why_not, "BLIS at %s has %lld-bit integers; this peer expects 64", path,
                     (long long)int_size());
        } else {
            snprintf(b->version, sizeof b->version, "%s", version());
            snprintf(b->arch, sizeof b->arch, "%s", arch_name(arch_id()));
            b->lib = lib;
        }
        if (!b->lib) dlclose(lib);
    }
    return b->lib ? WB_OK : wb_error(WB_ERR_UNSUPPORTED, "%s", b->why_not);
}

/* the build that runs on the thread count set */
static blis_build *current(void) { return &builds[threads > 1]; }

int wb_blis_available(void) { return load(current()) == WB_OK; }

wb_status wb_blis_info(const char **version, const char **arch, const char **build) {
    blis_build *b = current();
    wb_status st = load(b);
    if (st) return st;
    *version = b->version, *arch = b->arch, *build = b->folder;
    return WB_OK;
}

wb_status wb_blis_set_threads(int n) {
    if (n < 1 || n > WB_MAX_THREADS)
        return wb_error(WB_ERR_ARGUMENT, "blis.set_num_threads: %d threads is out of range (1..%d)", n, WB_MAX_THREADS);
    blis_build *b = &builds[n > 1];
    wb_status st = load(b);
    if (st) return st;
    threads = n;
    b->set_threads(n);
    return WB_OK;
}

wb_status wb_blis_matmul(wb_tensor *a, wb_tensor *b, wb_tensor **out) {
    *out = NULL;
    blis_build *lib = current();
    wb_status st = load(lib);
    if (st) return st;
    if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[0] || a->dtype != WB_F32 || b->dtype != WB_F32 ||
        a->device != WB_DEVICE_CPU || b->device != WB_DEVICE_CPU)
        return wb_error(WB_ERR_SHAPE, "blis.matmul: expects f32 cpu matrices [M,K] x [K,N]");
    const int64_t shape[2] = {a->shape[0], b->shape[1]};
    if ((st = wb_tensor_empty(WB_F32, WB_DEVICE_CPU, 2, shape, out))) return st;
    const float one = 1.0f, zero = 0.0f;
    /* BLIS refuses a zero stride (an expanded view): such operands are copied first */
    wb_tensor *ca = NULL, *cb = NULL;
    if (((a->stride[0] == 0 || a->stride[1] == 0) && (st = wb_contiguous(a, &ca))) ||
        ((b->stride[0] == 0 || b->stride[1] == 0) && (st = wb_contiguous(b, &cb)))) {
        wb_tensor_free(ca), wb_tensor_free(*out);
        *out = NULL;
        return st;
    }
    const wb_tensor *pa = ca ? ca : a, *pb = cb ? cb : b;
    if (shape[0] > 0 && shape[1] > 0)
        lib->sgemm(0, 0, shape[0], shape[1], a->shape[1], &one, wb_tensor_data(pa), pa->stride[0], pa->stride[1],
                   wb_tensor_data(pb), pb->stride[0], pb->stride[1], &zero, wb_tensor_data(*out), shape[1], 1);
    wb_tensor_free(ca), wb_tensor_free(cb);
    wb_storage_bump_version((*out)->storage);
    return WB_OK;
}
