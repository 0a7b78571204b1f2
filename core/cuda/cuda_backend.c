/* cuda_backend.c: device "cuda" as a backend (backend.h): loading the plugin (a MODULE opened
 * with dlopen at first use, so the executable starts without a driver), memory through the
 * plugin's caching allocator, copies, synchronize, CUPTI tracing and CUDA graphs, each a thin
 * call into the plugin's ABI (<wb/abi/cuda.h>) that turns its failures into the core's errors. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include <wb/clock.h>
#include "cuda_plugin.h"

static const wb_cuda_api *api;
static int tried;
static char why_not[PATH_MAX + 512];
static wb_cuda_info info;

/* The plugin sits next to the executable (the build tree), or where WB_CUDA_PLUGIN points. */
static void plugin_path(char *buf, size_t len) {
    const char *env = getenv("WB_CUDA_PLUGIN");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    if (wb_executable_dir(exe, sizeof exe))
        snprintf(buf, len, "%s/libwb_cuda.so", exe);
    else
        snprintf(buf, len, "libwb_cuda.so");
}

/* The first member of the plugin's layout that differs from the core's, as words; NULL when none. */
static const char *abi_difference(const wb_cuda_abi_layout *got, char *buf, size_t len) {
    static const wb_cuda_abi_layout want = WB_CUDA_ABI_LAYOUT;
    static const char *const names[] = {"wb_cuda_api",   "wb_cuda_info",   "wb_cuda_gemm",     "wb_cuda_ew",
                                        "wb_cuda_geglu", "wb_cuda_record", "wb_cuda_poi_args", "wb_cuda_codegen_info"};
    const uint32_t g[] = {got->api, got->info, got->gemm, got->ew, got->geglu, got->record, got->poi, got->codegen};
    const uint32_t w[] = {want.api, want.info, want.gemm, want.ew, want.geglu, want.record, want.poi, want.codegen};
    for (int i = 0; i < 8; i++)
        if (g[i] != w[i]) {
            snprintf(buf, len, "%s is %u bytes there, %u here", names[i], g[i], w[i]);
            return buf;
        }
    if (got->enums != want.enums) {
        snprintf(buf, len, "its enum values differ (fingerprint %08x there, %08x here)", got->enums, want.enums);
        return buf;
    }
    return NULL;
}

wb_status wb_cuda_check(void) {
    if (api) return WB_OK;
    if (!tried) {
        tried = 1;
        char path[PATH_MAX + 32];
        plugin_path(path, sizeof path);
        const char *named = getenv("WB_CUDA_PLUGIN");
        void *driver = NULL;
        if (access(path, F_OK) != 0 && named && *named) {
            snprintf(why_not, sizeof why_not, "WB_CUDA_PLUGIN=%s: %s", path, strerror(errno));
        } else if (access(path, F_OK) != 0) {
            snprintf(why_not, sizeof why_not,
                     "the CUDA plugin was not built (no %s; configure on a machine with the CUDA 13 toolkit)", path);
        } else if (!(named && *named) && !(driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL))) {
            /* No driver library, no GPU: said at once, where loading the plugin (cuBLASLt's
             * hundreds of MiB) to hear the same from cudaGetDeviceCount takes ~0.4 s. A plugin
             * named by WB_CUDA_PLUGIN (the mock) decides for itself. The driver stays loaded. */
            const char *e = dlerror();
            snprintf(why_not, sizeof why_not,
                     "no NVIDIA driver: libcuda.so.1 cannot be loaded (%s); the plugin needs a driver that supports "
                     "CUDA 13",
                     e ? e : "not found");
        } else {
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            wb_cuda_plugin_fn entry = h ? (wb_cuda_plugin_fn)dlsym(h, WB_CUDA_PLUGIN_SYMBOL) : NULL;
            const wb_cuda_api *a = entry ? entry(WB_CUDA_ABI_VERSION) : NULL;
            int why = 0;
            char diff[160];
            const char *d = a ? abi_difference(&a->layout, diff, sizeof diff) : NULL;
            if (!h)
                snprintf(why_not, sizeof why_not, "the CUDA plugin cannot be loaded: %s", dlerror());
            else if (!entry)
                snprintf(why_not, sizeof why_not, "the CUDA plugin %s exports no %s", path, WB_CUDA_PLUGIN_SYMBOL);
            else if (!a)
                snprintf(why_not, sizeof why_not,
                         "the CUDA plugin %s is from another build (ABI mismatch: it does not speak version %d)", path,
                         WB_CUDA_ABI_VERSION);
            else if (d)
                snprintf(why_not, sizeof why_not, "the CUDA plugin %s is from another build (ABI mismatch: %s)", path,
                         d);
            else if (a->init(&why) != 0)
                snprintf(why_not, sizeof why_not, "%s", a->last_error());
            else if (a->info(&info) != 0)
                snprintf(why_not, sizeof why_not, "%s", a->last_error());
            else
                api = a;
            /* A plugin that cannot run stays loaded: the CUDA libraries do not unload cleanly. */
            const wb_device_hooks *hooks = wb_device_hooks_active();
            if (api && hooks && hooks->device_ready) /* a session already recording device activity traces it too */
                hooks->device_ready(hooks->user, WB_DEVICE_CUDA);
        }
    }
    if (api) return WB_OK;
    return wb_error(WB_ERR_DEVICE, "device 'cuda' is not available: %s", why_not);
}

const wb_cuda_api *wb_cuda_api_get(void) { return wb_cuda_check() ? NULL : api; }
static int cuda_in_use(void) { return api != NULL; }

wb_status wb_cuda_plugin_error(const char *what) {
    return wb_error(WB_ERR_DEVICE, "%s: %s", what, api ? api->last_error() : why_not);
}

static wb_status cuda_alloc(size_t nbytes, void **ptr) {
    wb_status st = wb_cuda_check();
    if (st) return st;
    if (api->alloc(ptr, nbytes)) return wb_error(WB_ERR_MEMORY, "cuda: %s", api->last_error());
    return WB_OK;
}

static void cuda_free(void *ptr, size_t nbytes) {
    if (api) api->free(ptr, nbytes);
}

static void cuda_memory_stats(size_t *allocated, size_t *reserved, size_t *peak) {
    *allocated = *reserved = *peak = 0;
    if (api) api->memory_stats(allocated, reserved, peak);
}

static wb_status cuda_copy_from_host(void *dst, const void *src, size_t nbytes) {
    return api->copy(dst, src, nbytes, WB_CU_COPY_H2D) ? wb_cuda_plugin_error("copying to the device") : WB_OK;
}

static wb_status cuda_copy_to_host(void *dst, const void *src, size_t nbytes) {
    return api->copy(dst, src, nbytes, WB_CU_COPY_D2H) ? wb_cuda_plugin_error("copying from the device") : WB_OK;
}

static int cuda_tracing(void);
static void cuda_trace_pop(void);

static wb_status cuda_synchronize(void) {
    int64_t t0 = wb_now_ns();
    if (api->synchronize()) return wb_cuda_plugin_error("synchronize");
    const wb_device_hooks *h = wb_device_hooks_active();
    if (h && h->runtime && !cuda_tracing()) /* else CUPTI's record shows it */
        h->runtime(h->user, "cudaStreamSynchronize", t0);
    return WB_OK;
}

/* ---- graphs ----------------------------------------------------------------------------------- */

/* The errors carry the plugin's reason only: graph.c says which graph call failed. */
static wb_status plugin_reason(int failed) {
    return failed ? wb_error(WB_ERR_DEVICE, "%s", api ? api->last_error() : why_not) : WB_OK;
}
static wb_status cuda_graph_begin(void) { return plugin_reason(!api || api->graph_begin()); }
static wb_status cuda_graph_end(void **exec) { return plugin_reason(api->graph_end(exec)); }
static wb_status cuda_graph_launch(void *exec) { return plugin_reason(api->graph_launch(exec)); }
static void cuda_graph_destroy(void *exec) {
    if (api) api->graph_destroy(exec);
}

/* ---- tracing ------------------------------------------------------------------------------------ */

static int tracing;
static int64_t clock_offset;
/* Pushes and pops stay paired even when tracing starts inside an op (its pop has no push). */
static int pushed;

static int cuda_trace_start(void) {
    if (!api || tracing) return tracing;
    if (api->trace_start()) {
        wb_error(WB_ERR_DEVICE, "cuda tracing is off: %s", api->last_error());
        return 0;
    }
    /* The plugin hands CUPTI the profiler's CLOCK_MONOTONIC when it can (no offset, immune to
     * clock steps); else CUPTI stamps CLOCK_REALTIME: bracket one of its reads with two monotonic
     * reads and take the midpoint. */
    tracing = 1;
    clock_offset = 0;
    if (api->trace_clock() == WB_CU_CLOCK_MONOTONIC) return 1;
    uint64_t cupti = 0;
    int64_t t0 = wb_now_ns();
    api->timestamp(&cupti);
    int64_t t1 = wb_now_ns();
    clock_offset = (int64_t)cupti - (t0 + (t1 - t0) / 2);
    return 1;
}

static void cuda_trace_stop(void) {
    while (pushed > 0)
        cuda_trace_pop();
    if (api && tracing) api->trace_stop();
    tracing = 0;
}

static int cuda_tracing(void) { return tracing; }
static int64_t cuda_clock_offset(void) { return clock_offset; }
static void cuda_trace_push(uint32_t op_id) {
    if (!tracing) return;
    api->trace_push_correlation(op_id);
    pushed++;
}
static void cuda_trace_pop(void) {
    if (!tracing || pushed == 0) return;
    api->trace_pop_correlation();
    pushed--;
}

static wb_status cuda_trace_flush(wb_trace_record_fn fn, void *user, uint64_t *dropped) {
    if (!api) return wb_error(WB_ERR_DEVICE, "cuda is not in use");
    return api->trace_flush(fn, user, dropped) ? wb_cuda_plugin_error("cuda records lost") : WB_OK;
}

static const wb_cuda_info *cuda_info(void) { return api ? &info : NULL; }

/* ---- generated kernels (NVRTC in the plugin) ------------------------------------------------------ */

/* No FMA contraction: the generated host kernels are compiled with -ffp-contract=off, and a
 * kernel should round as they do. The plugin adds the device's architecture. */
static const char *const nvrtc_options = "--std=c++17 --fmad=false";

static wb_codegen_target target;
static int target_state; /* 0: not asked, 1: ready, -1: cannot compile (target_why) */
static char target_why[512];

static wb_status cuda_codegen_target(const wb_codegen_target **out) {
    if (!target_state) {
        wb_status st = wb_cuda_check();
        if (st) return st;
        wb_cuda_codegen_info ci;
        memset(&ci, 0, sizeof ci);
        if (!api->codegen_init) {
            target_state = -1;
            snprintf(target_why, sizeof target_why, "the CUDA plugin has no code generator");
        } else if (api->codegen_init(&ci)) {
            target_state = -1;
            snprintf(target_why, sizeof target_why, "%s", api->last_error());
        } else {
            target_state = 1;
            snprintf(target.compiler, sizeof target.compiler, "%s %s %s", ci.compiler, ci.arch, nvrtc_options);
            target.name = "NVRTC";
            target.host_kernels = ci.host_kernels;
        }
    }
    if (target_state < 0) return wb_error(WB_ERR_UNSUPPORTED, "no code generation on cuda: %s", target_why);
    *out = &target;
    return WB_OK;
}

static wb_status cuda_codegen_compile(const char *source, const char *name, void **image, size_t *size, char *log,
                                      size_t loglen) {
    if (api->codegen_compile(source, name, nvrtc_options, image, size, log, loglen))
        return wb_cuda_plugin_error("codegen");
    return WB_OK;
}

static void cuda_codegen_image_free(void *image) { api->codegen_image_free(image); }

static wb_status cuda_codegen_load(const void *image, size_t size, const char *name, void (*host_fn)(const void *),
                                   void **kernel) {
    if (api->codegen_load(image, size, name, host_fn, kernel)) return wb_cuda_plugin_error("codegen: loading a kernel");
    return WB_OK;
}

const wb_backend wb_backend_cuda = {
    .device = WB_DEVICE_CUDA,
    .name = "cuda",
    .check = wb_cuda_check,
    .in_use = cuda_in_use,
    .info = cuda_info,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .memory_stats = cuda_memory_stats,
    .copy_from_host = cuda_copy_from_host,
    .copy_to_host = cuda_copy_to_host,
    .synchronize = cuda_synchronize,
    .trace_start = cuda_trace_start,
    .trace_stop = cuda_trace_stop,
    .tracing = cuda_tracing,
    .trace_flush = cuda_trace_flush,
    .trace_push = cuda_trace_push,
    .trace_pop = cuda_trace_pop,
    .clock_offset = cuda_clock_offset,
    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
    .codegen_target = cuda_codegen_target,
    .codegen_compile = cuda_codegen_compile,
    .codegen_image_free = cuda_codegen_image_free,
    .codegen_load = cuda_codegen_load,
};
