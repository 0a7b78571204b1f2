/* plugin_common.h: the plugin's policy over a device, compiled into libwb_cuda.so over CUDA
 * (plugin.c) and into the mock over its host emulation of CUDA's rules (mock_plugin.c), so the
 * tests that run everywhere run this code: the caching allocator and what it may do while the
 * stream is captured, GEMM plans keyed on the operands' alignment, and the error path that
 * consumes the device's pending error. No CUDA header here: the device is a table. */
#ifndef WB_PLUGIN_COMMON_H
#define WB_PLUGIN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <wb/abi/cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a GEMM plan is made for. The alignments are each pointer's own (the largest power of two
 * up to 256 that divides it): cuBLASLt assumes 256 unless told, and an algorithm picked for 256
 * refuses or faults on a view that starts elsewhere. */
typedef struct wbcu_gemm_key {
    int dtype, transa, transb, activation, bias;
    uint32_t align_a, align_b, align_d;
    int64_t m, n, k, lda, ldb, ldd;
} wbcu_gemm_key;

typedef struct wbcu_plan {
    wbcu_gemm_key key;
    int used;
    uint32_t min_align[3]; /* the MIN_ALIGNMENT preferences for A, B, C = D (0: cuBLASLt's default, 256) */
    void *impl;            /* the device's descriptors and chosen algorithm */
} wbcu_plan;

/* A device as the policy needs it. Error codes are the device's own (cudaError_t); 0 is success. */
typedef struct wbcu_device {
    int (*malloc)(void **ptr, size_t bytes);
    void (*free)(void *ptr);
    void (*mem_info)(size_t *free_bytes, size_t *total_bytes);
    int (*synchronize)(void);
    int (*capturing)(void);           /* 1 while the stream is being captured */
    int (*relax)(void);               /* this thread's capture mode to relaxed; returns the previous (>= 0) */
    void (*restore_mode)(int previous);
    int (*consume_error)(void);       /* the pending error, cleared (cudaGetLastError) */
    const char *(*error_name)(int code);
    const char *(*error_string)(int code);
    int (*plan_build)(wbcu_plan *pl); /* descriptors, preferences from pl->min_align, heuristic; -1: wbcu_fail */
    void (*plan_destroy)(wbcu_plan *pl);
    int (*matmul)(const wbcu_plan *pl, const wb_cuda_gemm *g); /* -1: wbcu_fail */
} wbcu_device;

void wbcu_set_device(const wbcu_device *dev);

/* Sets the message last_error() returns; returns -1. */
int wbcu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *wbcu_last_error(void);
/* A failed device call: consumes the pending error first (CUDA keeps it until someone reads it,
 * and the next launch's check would report it as its own), then says what failed. Returns -1. */
int wbcu_device_fail(int code, const char *what);

/* While the stream is captured, calls that are not stream work (cudaMalloc, a heuristic query)
 * run in relaxed mode: thread-local mode refuses them and invalidates the capture. begin returns
 * what end restores (-1: not capturing, nothing changed). */
int wbcu_relax_begin(void);
void wbcu_relax_end(int previous);

/* The caching allocator (the ABI's alloc, free, empty_cache, memory_stats). */
int wbcu_alloc(void **ptr, size_t nbytes);
void wbcu_free(void *ptr, size_t nbytes);
int wbcu_empty_cache(void);
void wbcu_memory_stats(size_t *allocated, size_t *reserved, size_t *peak);

/* A GEMM through the plan cache (the ABI's gemm). */
int wbcu_gemm(const wb_cuda_gemm *g);

/* Generated kernels loaded so far, by image: a kernel whose image (its bytes and its name) was
 * loaded before is found again instead of loading a second module, and every loaded kernel stays
 * reachable here for the process's life (graphs may hold them). wbcu_loaded_find returns NULL
 * when the image is new; wbcu_loaded_add returns 0, or -1 when it cannot grow (the caller then
 * keeps the kernel without the registry). */
void *wbcu_loaded_find(const void *image, size_t size, const char *name);
int wbcu_loaded_add(const void *image, size_t size, const char *name, void *kernel);

#ifdef __cplusplus
}
#endif
#endif
