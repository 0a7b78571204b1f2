/* plugin_codegen.c: generated kernels in libwb_cuda.so (the ABI's codegen_* members): CUDA C from
 * the core compiled at run time by NVRTC into a cubin for this device (or PTX for the newest
 * architecture NVRTC knows, when the device is newer), loaded with cuModuleLoadData and launched
 * with cuLaunchKernel on the plugin's stream, so graphs capture it and CUPTI names it.
 *
 * NVRTC is opened with dlopen at the first codegen_init, never linked: a machine without it keeps
 * every other cuda path, and the core says why code generation is off. The driver's module calls
 * come through cudart's entry-point query, so the plugin still links no driver library. It does
 * not cache: the disk cache of images is the core's. */
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_internal.h"

/* The NVRTC calls used, resolved from the library at run time. */
static struct {
    nvrtcResult (*version)(int *, int *);
    nvrtcResult (*num_archs)(int *);
    nvrtcResult (*archs)(int *);
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*log_size)(nvrtcProgram, size_t *);
    nvrtcResult (*log)(nvrtcProgram, char *);
    nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
    nvrtcResult (*cubin)(nvrtcProgram, char *);
    nvrtcResult (*ptx_size)(nvrtcProgram, size_t *);
    nvrtcResult (*ptx)(nvrtcProgram, char *);
    nvrtcResult (*destroy)(nvrtcProgram *);
    const char *(*error_string)(nvrtcResult);
} nv;

/* The driver's module calls (cudaGetDriverEntryPointByVersion). */
static struct {
    CUresult (*load)(CUmodule *, const void *);
    CUresult (*function)(CUfunction *, CUmodule, const char *);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void **, void **);
    CUresult (*error_string)(CUresult, const char **);
} drv;

static int state; /* 0: not tried, 1: ready, -1: not available (why) */
static char why[512];
static char arch[16]; /* "sm_90" (cubin) or "compute_90" (PTX, for a device newer than NVRTC knows) */
static int cubin;     /* 1: nvrtcGetCUBIN, 0: nvrtcGetPTX */
static int nv_major, nv_minor;

static int unavailable(const char *fmt, const char *detail) {
    state = -1;
    snprintf(why, sizeof why, fmt, detail);
    return wbcu_fail("%s", why);
}

static void *open_nvrtc(void) {
    /* the soname, then the toolkit this plugin was built with (its lib64 may not be on the path) */
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so",
#ifdef WB_NVRTC_DIR
                                        WB_NVRTC_DIR "/libnvrtc.so.13",
#endif
                                        NULL};
    void *h = NULL;
    for (int i = 0; names[i] && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    return h;
}

#define RESOLVE(h, field, symbol)                                                                                      \
    do {                                                                                                               \
        *(void **)&(field) = dlsym(h, symbol);                                                                         \
        if (!(field)) return unavailable("NVRTC lacks %s", symbol);                                                    \
    } while (0)

#define DRIVER(field, symbol)                                                                                          \
    do {                                                                                                               \
        enum cudaDriverEntryPointQueryResult q_;                                                                       \
        if (cudaGetDriverEntryPointByVersion(symbol, (void **)&(field), 12000, cudaEnableDefault, &q_) !=              \
                cudaSuccess ||                                                                                         \
            q_ != cudaDriverEntryPointSuccess || !(field)) {                                                           \
            cudaGetLastError();                                                                                        \
            return unavailable("the driver does not give %s", symbol);                                                 \
        }                                                                                                              \
    } while (0)

static int load_nvrtc(void) {
    void *h = open_nvrtc();
    if (!h) return unavailable("NVRTC is not available: %s", dlerror());
    RESOLVE(h, nv.version, "nvrtcVersion");
    RESOLVE(h, nv.num_archs, "nvrtcGetNumSupportedArchs");
    RESOLVE(h, nv.archs, "nvrtcGetSupportedArchs");
    RESOLVE(h, nv.create, "nvrtcCreateProgram");
    RESOLVE(h, nv.compile, "nvrtcCompileProgram");
    RESOLVE(h, nv.log_size, "nvrtcGetProgramLogSize");
    RESOLVE(h, nv.log, "nvrtcGetProgramLog");
    RESOLVE(h, nv.cubin_size, "nvrtcGetCUBINSize");
    RESOLVE(h, nv.cubin, "nvrtcGetCUBIN");
    RESOLVE(h, nv.ptx_size, "nvrtcGetPTXSize");
    RESOLVE(h, nv.ptx, "nvrtcGetPTX");
    RESOLVE(h, nv.destroy, "nvrtcDestroyProgram");
    RESOLVE(h, nv.error_string, "nvrtcGetErrorString");
    DRIVER(drv.load, "cuModuleLoadData");
    DRIVER(drv.function, "cuModuleGetFunction");
    DRIVER(drv.launch, "cuLaunchKernel");
    DRIVER(drv.error_string, "cuGetErrorString");
    if (nv.version(&nv_major, &nv_minor) != NVRTC_SUCCESS) return unavailable("%s", "nvrtcVersion failed");
    /* the device's architecture when NVRTC knows it (a cubin); else PTX for the newest it knows,
     * which the driver compiles for the device at load */
    int want = wbcu_dev_info.cc_major * 10 + wbcu_dev_info.cc_minor, n = 0, best = 0;
    if (nv.num_archs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256) return unavailable("%s", "NVRTC lists no architecture");
    int archs[256];
    if (nv.archs(archs) != NVRTC_SUCCESS) return unavailable("%s", "nvrtcGetSupportedArchs failed");
    for (int i = 0; i < n; i++) {
        if (archs[i] == want) cubin = 1;
        if (archs[i] <= want && archs[i] > best) best = archs[i];
    }
    if (!best) {
        char d[32];
        snprintf(d, sizeof d, "%d", want);
        return unavailable("NVRTC cannot compile for compute capability %s or below", d);
    }
    snprintf(arch, sizeof arch, "%s_%d", cubin ? "sm" : "compute", cubin ? want : best);
    state = 1;
    return 0;
}

int wbcu_codegen_init(wb_cuda_codegen_info *out) {
    memset(out, 0, sizeof *out);
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    if (state == 0) load_nvrtc();
    if (state < 0) return wbcu_fail("%s", why);
    snprintf(out->compiler, sizeof out->compiler, "NVRTC %d.%d", nv_major, nv_minor);
    snprintf(out->arch, sizeof out->arch, "%s", arch);
    out->host_kernels = 0;
    return 0;
}

static int nv_fail(nvrtcResult r, const char *what) {
    return wbcu_fail("%s failed: %s (%d)", what, nv.error_string(r), (int)r);
}

/* The options as NVRTC takes them: the core's, split at spaces, then the architecture. */
int wbcu_codegen_compile(const char *source, const char *name, const char *options, void **image, size_t *size,
                         char *log, size_t loglen) {
    *image = NULL;
    *size = 0;
    if (loglen) log[0] = 0;
    if (state != 1) return wbcu_fail("NVRTC is not loaded (codegen_init first)");
    char opts[512], arch_opt[48];
    snprintf(opts, sizeof opts, "%s", options ? options : "");
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
    const char *argv[32];
    int argc = 0;
    for (char *save = NULL, *tok = strtok_r(opts, " ", &save); tok && argc < 31; tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc++] = arch_opt;
    char file[160];
    snprintf(file, sizeof file, "%s.cu", name);
    nvrtcProgram prog;
    nvrtcResult r = nv.create(&prog, source, file, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) return nv_fail(r, "nvrtcCreateProgram");
    r = nv.compile(prog, argc, argv);
    size_t n = 0;
    if (loglen && nv.log_size(prog, &n) == NVRTC_SUCCESS && n > 1) {
        char *full = malloc(n);
        if (full && nv.log(prog, full) == NVRTC_SUCCESS) snprintf(log, loglen, "%s", full);
        free(full);
    }
    if (r != NVRTC_SUCCESS) {
        nv.destroy(&prog);
        return nv_fail(r, "nvrtcCompileProgram");
    }
    r = cubin ? nv.cubin_size(prog, &n) : nv.ptx_size(prog, &n);
    char *img = r == NVRTC_SUCCESS ? malloc(n) : NULL;
    if (r == NVRTC_SUCCESS && !img) {
        nv.destroy(&prog);
        return wbcu_fail("out of host memory for a %zu-byte image", n);
    }
    if (r == NVRTC_SUCCESS) r = cubin ? nv.cubin(prog, img) : nv.ptx(prog, img);
    nv.destroy(&prog);
    if (r != NVRTC_SUCCESS) {
        free(img);
        return nv_fail(r, cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX");
    }
    *image = img;
    *size = n;
    return 0;
}

void wbcu_codegen_image_free(void *image) { free(image); }

static int cu_fail(CUresult r, const char *what) {
    const char *s = NULL;
    if (drv.error_string) drv.error_string(r, &s);
    return wbcu_fail("%s failed: %s (CUresult %d)", what, s ? s : "unknown error", (int)r);
}

/* Modules stay loaded for the process's life (graphs may hold their kernels); an image loaded
 * before gives its kernel again, so compiling the same function in a loop loads one module. */
int wbcu_codegen_load(const void *image, size_t size, const char *name, void (*host_fn)(const void *), void **kernel) {
    (void)host_fn;
    *kernel = NULL;
    if (state != 1) return wbcu_fail("NVRTC is not loaded (codegen_init first)");
    if ((*kernel = wbcu_loaded_find(image, size, name))) return 0;
    /* cuModuleLoadData takes PTX as NUL-terminated text: the image from NVRTC carries the NUL */
    CUmodule m;
    CUresult r = drv.load(&m, image);
    if (r != CUDA_SUCCESS) return cu_fail(r, "cuModuleLoadData");
    CUfunction f;
    if ((r = drv.function(&f, m, name)) != CUDA_SUCCESS) return cu_fail(r, "cuModuleGetFunction");
    *kernel = f;
    wbcu_loaded_add(image, size, name, f); /* without it, the next load of this image loads again */
    return 0;
}

/* One thread per element, 256 per block, the grid capped at 32 blocks per SM (the kernel's loop
 * strides over the rest). */
int wbcu_codegen_launch(void *kernel, const wb_cuda_poi_args *args) {
    if (state != 1) return wbcu_fail("NVRTC is not loaded (codegen_init first)");
    int64_t n = args->rows * args->cols;
    if (n <= 0) return 0;
    int64_t blocks = (n + 255) / 256, cap = (int64_t)(wbcu_dev_info.sm_count > 0 ? wbcu_dev_info.sm_count : 1) * 32;
    if (blocks > cap) blocks = cap;
    wb_cuda_poi_args a = *args;
    void *params[] = {&a};
    CUresult r =
        drv.launch((CUfunction)kernel, (unsigned)blocks, 1, 1, 256, 1, 1, 0, (CUstream)wbcu_stream, params, NULL);
    if (r != CUDA_SUCCESS) return cu_fail(r, "cuLaunchKernel");
    return 0;
}
