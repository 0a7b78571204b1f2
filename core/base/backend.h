/* backend.h: one table of functions per device (internal to libwb; the model is ggml's
 * ggml_backend_i). Storage, devices, graphs, the profiler and the bindings reach a device only
 * through its table: no `if cuda` outside the backends' own files (backend_cpu.c, core/cuda/).
 * Members marked (optional) may be NULL; callers ask before they call. Ops reach devices
 * through the op table's per-device column (op.h), not through this table.
 *
 * The CUDA plugin's ABI is the core's own contract (core/include/wb/abi/cuda.h): the plugin includes it. */
#ifndef WB_BACKEND_H
#define WB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include <wb/abi/cuda.h>
#include <wb/wb.h>

/* A record of device activity as the device's tracer hands it over (CUPTI's, flattened). */
typedef wb_cuda_record wb_trace_record;
typedef void (*wb_trace_record_fn)(void *user, const wb_trace_record *rec);

/* What a device compiles generated kernels with (codegen_target). */
typedef struct wb_codegen_target {
    char compiler[256]; /* compiler, architecture and options as one line: the cache key's part, and for messages */
    const char *name;   /* the compiler's short name for messages ("NVRTC") */
    int host_kernels;   /* 1: the device runs the host build of each kernel (the mock plugin) */
} wb_codegen_target;

typedef struct wb_backend {
    wb_device device;
    const char *name;

    /* WB_OK when the device can run now; else an error saying why (tried once, then cached). */
    wb_status (*check)(void);
    /* 1 when the device has been loaded and is usable, without trying to load it. */
    int (*in_use)(void);
    /* (optional) what the device is (accelerators; NULL until in use). */
    const wb_cuda_info *(*info)(void);

    /* Memory for storages: 64-byte aligned (or the device's own alignment, which is larger). */
    wb_status (*alloc)(size_t nbytes, void **ptr);
    void (*free)(void *ptr, size_t nbytes);
    /* (optional) bytes held by the device's caching allocator. */
    void (*memory_stats)(size_t *allocated, size_t *reserved, size_t *peak);
    /* Contiguous bytes between host memory and this device's memory; return when done. */
    wb_status (*copy_from_host)(void *dst, const void *src, size_t nbytes);
    wb_status (*copy_to_host)(void *dst, const void *src, size_t nbytes);
    /* Waits until the device's queued work is done. */
    wb_status (*synchronize)(void);

    /* (optional, all or none) Tracing of device activity. start: 1 when tracing, 0 when not (the
     * error message says why); flush: every buffered record through fn, after a synchronize;
     * push/pop: the op whose launches follow (correlation); clock_offset: the tracer's clock
     * minus CLOCK_MONOTONIC, in ns. */
    int (*trace_start)(void);
    void (*trace_stop)(void);
    int (*tracing)(void);
    wb_status (*trace_flush)(wb_trace_record_fn fn, void *user, uint64_t *dropped);
    void (*trace_push)(uint32_t op_id);
    void (*trace_pop)(void);
    int64_t (*clock_offset)(void);

    /* (optional, all or none) Graphs captured from the device's queue: begin, then end (*exec
     * NULL: instantiate; else update in place), launch and destroy. Without them, graph.c keeps
     * the launches itself and re-issues them (the cpu). */
    wb_status (*graph_begin)(void);
    wb_status (*graph_end)(void **exec);
    wb_status (*graph_launch)(void *exec);
    void (*graph_destroy)(void *exec);

    /* (optional, all or none) Generated kernels compiled for the device (core/cpu/codegen_cache.c
     * keeps the disk cache; the launch is the op "generated" in the op table's device column).
     * target: WB_ERR_UNSUPPORTED when the device cannot compile now (the message says why; asked
     * once). compile: source -> an image (released with image_free); on failure the compiler's
     * log in log. load: the image's kernel `name` (host_fn: the host build, for host_kernels). */
    wb_status (*codegen_target)(const wb_codegen_target **out);
    wb_status (*codegen_compile)(const char *source, const char *name, void **image, size_t *size, char *log,
                                 size_t loglen);
    void (*codegen_image_free)(void *image);
    wb_status (*codegen_load)(const void *image, size_t size, const char *name, void (*host_fn)(const void *args),
                              void **kernel);
} wb_backend;

/* The table of a device (never NULL for a valid device id; its calls fail with the reason when
 * the device cannot run). */
const wb_backend *wb_backend_get(wb_device device);
/* The table when the device is loaded and usable now, else NULL; never tries to load it. */
const wb_backend *wb_backend_in_use(wb_device device);

/* Observers of the devices (all members optional), installed by the profiler while a session
 * runs. The backends and the cuda ops stand below the profiler, so they report through these
 * instead of calling it. */
struct wb_kernel_desc;
typedef struct wb_device_hooks {
    void *user;
    /* a runtime call (synchronize, ...) that took [t0_ns, now) on the host */
    void (*runtime)(void *user, const char *name, int64_t t0_ns);
    /* a device with a tracer has just become usable: a session tracing devices turns it on */
    void (*device_ready)(void *user, wb_device device);
    /* a kernel queued on a device whose own tracer times it (its kind and work counts) */
    void (*device_launch)(void *user, const struct wb_kernel_desc *desc);
} wb_device_hooks;
/* Installs hooks (NULL removes them). */
void wb_device_set_hooks(const wb_device_hooks *hooks);
/* The installed hooks, or NULL. */
const wb_device_hooks *wb_device_hooks_active(void);

extern const wb_backend wb_backend_cpu;
extern const wb_backend wb_backend_cuda;

#endif
