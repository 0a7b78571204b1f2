/* wb/wb.h (floor base): the public C interface of libwb (tensors, views, ops, errors, devices).
 * The core never includes Lua: bindings/ turns a failed status into a Lua error with the
 * message from wb_error_message(). Dims here are 0-based; the Lua layer converts. */
#ifndef WB_H
#define WB_H

#include <stddef.h>
#include <stdint.h>

#include <wb/abi/act_list.h>
#include <wb/abi/arith_list.h>
#include <wb/abi/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WB_MAX_DIMS 8
#define WB_OP_MAX_INPUTS 5 /* the most tensors one op reads (a generated kernel: its inputs) */

/* ---- status and errors --------------------------------------------------------------- */

typedef enum wb_status {
    WB_OK = 0,
    WB_ERR_ARGUMENT,    /* a value that makes no sense (negative size, unknown name) */
    WB_ERR_SHAPE,       /* shapes that do not fit together */
    WB_ERR_RANGE,       /* an index or view reaching outside its tensor or storage */
    WB_ERR_MEMORY,      /* an allocation refused or failed */
    WB_ERR_DEVICE,      /* a device that is not available, or tensors on different devices */
    WB_ERR_DTYPE,       /* a dtype that is unknown or not supported by this op */
    WB_ERR_UNSUPPORTED, /* a valid request this build cannot do (yet) */
} wb_status;

/* The message of the last failed call on this thread. Valid until the next failure. */
const char *wb_error_message(void);
/* Sets the thread's message (printf-style) and returns `status`, so callers can
 * `return wb_error(WB_ERR_SHAPE, "...")`. */
wb_status wb_error(wb_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with "<context>: " (used when an op calls another). */
wb_status wb_error_prefix(wb_status status, const char *context);

/* ---- dtypes and devices -------------------------------------------------------------- */

typedef enum wb_dtype { /* the values of <wb/abi/types.h>, which the plugins share */
    WB_F32 = WB_ABI_F32,
    WB_BF16 = WB_ABI_BF16, /* bf16 storage; every kernel computes in f32 and rounds once (f32 accumulation) */
    WB_DTYPE_COUNT
} wb_dtype;

const char *wb_dtype_name(wb_dtype dtype);
/* Bytes per element (0 for an invalid id). Inline: every tensor access and size computation asks. */
static inline size_t wb_dtype_size(wb_dtype dtype) { return dtype == WB_F32 ? 4 : dtype == WB_BF16 ? 2 : 0; }
/* Parses "f32"/"float32"/"bf16"/"bfloat16"; unknown names fail with a message listing the valid ones. */
wb_status wb_dtype_parse(const char *name, wb_dtype *out);
/* Fails for an invalid dtype id (storage, copies and conversion work for every dtype). */
wb_status wb_dtype_check_supported(wb_dtype dtype, const char *context);

typedef enum wb_device { WB_DEVICE_CPU = 0, WB_DEVICE_CUDA, WB_DEVICE_COUNT } wb_device;

const char *wb_device_name(wb_device device);
/* Parses "cpu", "cuda", "cuda:0"; "auto" resolves to the best available device. */
wb_status wb_device_parse(const char *name, wb_device *out);
/* WB_OK when the device can run ops; otherwise the message says why not. */
wb_status wb_device_check_available(wb_device device);
int wb_device_is_available(wb_device device);
/* True once the device has been initialised in this process (cpu: always; cuda: a tensor was
 * put there), without trying to initialise it. */
int wb_device_in_use(wb_device device);
/* Bytes held by the device's caching allocator (allocated now, reserved, peak allocated); an
 * error for a device without one (the cpu) or one that is not available. */
wb_status wb_device_memory_stats(wb_device device, size_t *allocated, size_t *reserved, size_t *peak);

/* Default device and dtype used by creation functions when the caller gives none. */
wb_device wb_default_device(void);
wb_status wb_set_default_device(wb_device device);

/* ---- threads ------------------------------------------------------------------------- */

int wb_get_num_threads(void);
/* The folder of the running executable (plugins and scripts are found from it); 0 if unknown. */
int wb_executable_dir(char *buf, size_t len);
/* The host CPU's model name, e.g. "AMD EPYC". */
const char *wb_cpu_model(void);
wb_status wb_set_num_threads(int n);
/* The most threads a thread count may ask for (wb_set_num_threads, wb_openblas_set_threads): the
 * CPU kernels' cap, WB_CPU_MAX_THREADS (one cap: threads.c fails to compile if they differ). */
#define WB_MAX_THREADS 256
/* Threads the user asked for (wb_get_num_threads: what kernels use now, which is 1 while other
 * processes keep the cores busy; see threads.c). wb_threads_adapt re-decides, at most every
 * 20 ms; kernel launches call it. */
int wb_threads_requested(void);
void wb_threads_set_requested(int n);
void wb_threads_adapt(void);
int wb_threads_contended(void);
/* Turns the adaptation on or off (off: always the requested count, as WB_THREADS_ADAPT=0 does);
 * returns whether it was on. Benchmarks that compare thread counts turn it off. */
int wb_threads_set_adaptive(int on);

/* ---- storage and tensors --------------------------------------------------------------- */

/* A refcounted, 64-byte aligned buffer on one device. Views share it. */
typedef struct wb_storage wb_storage;

/* A tensor is a strided view of a storage:
 *   address of element (i_0, ..., i_{n-1}) = data(storage) + (offset + sum_k i_k * stride[k]) * itemsize
 * Treat the fields as read-only outside core/: views are made through the op functions below. */
typedef struct wb_tensor {
    wb_dtype dtype;
    wb_device device;
    int ndim;                    /* 0 for a scalar tensor (one element) */
    int64_t shape[WB_MAX_DIMS];  /* sizes, >= 0 */
    int64_t stride[WB_MAX_DIMS]; /* in elements, >= 0 */
    int64_t offset;              /* storage offset in elements */
    wb_storage *storage;         /* one reference held by this tensor */
} wb_tensor;

size_t wb_storage_nbytes(const wb_storage *s);
void *wb_storage_data(const wb_storage *s);
int wb_storage_refcount(const wb_storage *s);
/* Bumped by every write through a kernel; caches of derived data (packed weights) compare it. */
uint64_t wb_storage_version(const wb_storage *s);
void wb_storage_bump_version(wb_storage *s);

/* Bytes of storage allocated since start-up (a garbage-collected caller paces itself on it). */
uint64_t wb_storage_bytes_allocated(void);
/* Bytes of storage alive now (all devices), and an observer told of every allocation (delta > 0)
 * and free (delta < 0) with the bytes then live on that device and when (CLOCK_MONOTONIC ns)
 * the allocation or free began: it is told when it has ended. */
uint64_t wb_storage_bytes_live(void);
void wb_storage_set_observer(void (*fn)(wb_device device, int64_t delta, int64_t live_on_device, int64_t start_ns));

/* Largest single allocation allowed, in bytes (physical memory, or WB_MAX_ALLOC_BYTES). */
size_t wb_alloc_limit(void);
/* A byte count for a message: "1.5 MiB". */
void wb_format_bytes(double bytes, char *buf, size_t len);

/* A new contiguous tensor with uninitialised data (messages carry no op name: callers add it). */
wb_status wb_tensor_empty(wb_dtype dtype, wb_device device, int ndim, const int64_t *shape, wb_tensor **out);
/* A new tensor header sharing `src`'s storage with the given geometry (bounds-checked). */
wb_status wb_tensor_new_view(const wb_tensor *src, int ndim, const int64_t *shape, const int64_t *stride,
                             int64_t offset, wb_tensor **out);
void wb_tensor_free(wb_tensor *t);

int64_t wb_tensor_numel(const wb_tensor *t);
int wb_tensor_is_contiguous(const wb_tensor *t);
/* Both contiguous and of one shape (elementwise kernels then index every operand alike). */
int wb_same_geometry_contiguous(const wb_tensor *a, const wb_tensor *b);
/* Pointer to element (0, ..., 0). */
void *wb_tensor_data(const wb_tensor *t);
/* Writes "{2, 3}" into buf; returns buf. */
char *wb_shape_format(int ndim, const int64_t *shape, char *buf, size_t len);
/* Checks a shape (0..WB_MAX_DIMS dims, sizes >= 0, element count and bytes representable);
 * the message starts with "<context>: " unless context is NULL. */
wb_status wb_shape_check(int ndim, const int64_t *shape, wb_dtype dtype, const char *context);
/* Strides that read `x` as the broadcast shape (ndim, shape): 0 for new and expanded dims. */
void wb_broadcast_strides(const wb_tensor *x, int ndim, const int64_t *shape, int64_t *stride);
/* NumPy broadcasting of two shapes; fails with both shapes in the message. */
wb_status wb_shape_broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out,
                             const char *context);

/* ---- ops (every one goes through the dispatcher, see core/ops/dispatch.c) ------------------ */

/* Views: share storage, launch nothing. */
wb_status wb_t(wb_tensor *x, wb_tensor **out);
wb_status wb_transpose(wb_tensor *x, int d1, int d2, wb_tensor **out);
wb_status wb_permute(wb_tensor *x, int ndim, const int *perm, wb_tensor **out);
wb_status wb_view(wb_tensor *x, int ndim, const int64_t *shape, wb_tensor **out); /* one -1 allowed */
wb_status wb_narrow(wb_tensor *x, int dim, int64_t start, int64_t length, wb_tensor **out);
wb_status wb_select(wb_tensor *x, int dim, int64_t index, wb_tensor **out);
wb_status wb_as_strided(wb_tensor *x, int ndim, const int64_t *shape, const int64_t *stride, int64_t offset,
                        wb_tensor **out);
wb_status wb_expand(wb_tensor *x, int ndim, const int64_t *shape, wb_tensor **out); /* -1 keeps */
wb_status wb_alias(wb_tensor *x, wb_tensor **out);                                  /* same geometry, new header */

/* Composites: a view when the strides allow it, otherwise a copy. */
wb_status wb_reshape(wb_tensor *x, int ndim, const int64_t *shape, wb_tensor **out);
wb_status wb_flatten(wb_tensor *x, int start_dim, int end_dim, wb_tensor **out);
wb_status wb_contiguous(wb_tensor *x, wb_tensor **out); /* an alias when already contiguous */

/* A copy on `device` in `dtype` (an alias when both already match). bf16 rounds to nearest even. */
wb_status wb_to(wb_tensor *x, wb_dtype dtype, wb_device device, wb_tensor **out);
/* Waits for the device's queued work (a no-op on the cpu, whose kernels run synchronously). */
wb_status wb_synchronize(wb_device device);

/* Copies. */
wb_status wb_clone(wb_tensor *x, wb_tensor **out);
wb_status wb_copy_(wb_tensor *dst, wb_tensor *src); /* src broadcast to dst's shape */
wb_status wb_fill_(wb_tensor *dst, double value);

/* Creation. */
wb_status wb_full(wb_dtype dtype, wb_device device, int ndim, const int64_t *shape, double value, wb_tensor **out);
wb_status wb_arange(wb_dtype dtype, wb_device device, int64_t n, wb_tensor **out); /* 0..n-1 */
wb_status wb_rand(wb_dtype dtype, wb_device device, int ndim, const int64_t *shape, wb_tensor **out);
wb_status wb_randn(wb_dtype dtype, wb_device device, int ndim, const int64_t *shape, wb_tensor **out);
wb_status wb_from_doubles(wb_dtype dtype, wb_device device, int ndim, const int64_t *shape, const double *values,
                          wb_tensor **out);

/* Elementwise with NumPy broadcasting. */
/* wb_add, wb_sub, wb_mul, wb_div (a op b) and wb_neg (-a): one function per op of the list they
 * are declared in, core/include/wb/abi/arith_list.h. */
#define WB_BINARY_DECLARE(ID, name, ...) wb_status wb_##name(wb_tensor *a, wb_tensor *b, wb_tensor **out);
WB_BINARY_LIST(WB_BINARY_DECLARE)
#undef WB_BINARY_DECLARE
#define WB_ARITH_UNARY_DECLARE(ID, name, ...) wb_status wb_##name(wb_tensor *a, wb_tensor **out);
WB_ARITH_UNARY_LIST(WB_ARITH_UNARY_DECLARE)
#undef WB_ARITH_UNARY_DECLARE

/* GEMM family (CPU: kernels/cpu/gemm.c). Layout letters in kernel names follow BLAS's
 * column-major convention, so a linear (x times a transposed row-major weight) shows "tn". */
/* Activations: one vocabulary for Lua, this API, kernel names and the CUDA plugin. Users write
 * "none", "gelu" (the erf form, PyTorch's default) or "gelu_tanh"; kernel names spell the form
 * out ("gelu_erf", "gelu_tanh"); "geglu" is the dual GEMM's epilogue, gelu_tanh(gate) * up. */
typedef enum wb_activation { /* the first three: the values of <wb/abi/types.h> */
    WB_ACT_NONE = WB_ABI_ACT_NONE,
    WB_ACT_GELU_TANH = WB_ABI_ACT_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    WB_ACT_GELU_ERF = WB_ABI_ACT_GELU_ERF,   /* 0.5 x (1 + erf(x / sqrt 2)), PyTorch's default GELU */
    WB_ACT_GEGLU,     /* epilogue of the dual GEMM only */
    WB_ACT_SILU,      /* x * sigmoid(x) = x / (1 + exp(-x)) */
    WB_ACT_SWIGLU,    /* epilogue of the dual GEMM only: silu(gate) * up */
    WB_ACT_COUNT
} wb_activation;
/* "none", "gelu_tanh", "gelu", "geglu", "silu", "swiglu". */
const char *wb_activation_name(wb_activation act);
/* "none", "gelu" (or "gelu_erf"), "gelu_tanh" and "silu"; anything else is an error naming the word. */
wb_status wb_activation_parse(const char *word, wb_activation *out);

wb_status wb_mm(wb_tensor *a, wb_tensor *b, wb_tensor **out);                     /* [M,K] x [K,N] */
wb_status wb_addmm(wb_tensor *bias, wb_tensor *a, wb_tensor *b, wb_tensor **out); /* bias [N] in the epilogue */
/* 2-D x 2-D, or 3-D x 2-D (leading dims folded into M). */
wb_status wb_matmul(wb_tensor *a, wb_tensor *b, wb_tensor **out);
/* y = act(x W^T + b): x [..., K], W [N, K], b [N] or NULL. Goes through t(W) then addmm or mm,
 * as PyTorch's does; W is packed once and reused while its storage is unchanged. One kernel, the
 * bias and activation in its epilogue (on cuda the erf GELU is a second kernel: cuBLASLt's GELU
 * epilogue is the tanh form). */
wb_status wb_linear(wb_tensor *x, wb_tensor *w, wb_tensor *bias, wb_activation act, wb_tensor **out);
/* gelu_tanh(x W_gate^T + b_gate) * (x W_up^T + b_up) in one kernel: the two products never
 * reach memory. The biases may be NULL. */
wb_status wb_geglu_linear(wb_tensor *x, wb_tensor *w_gate, wb_tensor *w_up, wb_tensor *b_gate, wb_tensor *b_up,
                          wb_tensor **out);
wb_status wb_gelu(wb_tensor *x, wb_activation form, wb_tensor **out);
wb_status wb_geglu(wb_tensor *gate, wb_tensor *up, wb_tensor **out); /* gelu_tanh(gate) * up, fused */
/* silu(x W_gate^T + b_gate) * (x W_up^T + b_up) in one kernel (cpu), as wb_geglu_linear. */
wb_status wb_swiglu_linear(wb_tensor *x, wb_tensor *w_gate, wb_tensor *w_up, wb_tensor *b_gate, wb_tensor *b_up,
                           wb_tensor **out);
/* The gated MLP, (gelu_tanh(x W_gate^T) * (x W_up^T)) W_down^T + b_down, b_down may be NULL:
 * one kernel on the CPU (the hidden activation never reaches memory); on cuda the dual GEMM
 * then the down linear. wb_swiglu_mlp: silu in place of gelu_tanh. */
wb_status wb_geglu_mlp(wb_tensor *x, wb_tensor *w_gate, wb_tensor *w_up, wb_tensor *w_down, wb_tensor *b_down,
                       wb_tensor **out);
wb_status wb_swiglu_mlp(wb_tensor *x, wb_tensor *w_gate, wb_tensor *w_up, wb_tensor *w_down, wb_tensor *b_down,
                        wb_tensor **out);
/* Elementwise activations, one kernel each (core/ops/activation.c): wb_silu, wb_sigmoid, wb_relu,
 * wb_tanh, wb_exp, wb_softplus, ...: one function per line of the list they are declared in,
 * core/include/wb/abi/act_list.h (its formula column says what each computes). */
#define WB_ACT_DECLARE(ID, name, ...) wb_status wb_##name(wb_tensor *x, wb_tensor **out);
WB_ACT_LIST(WB_ACT_DECLARE)
#undef WB_ACT_DECLARE
wb_status wb_swiglu(wb_tensor *gate, wb_tensor *up, wb_tensor **out); /* silu(gate) * up, fused */
/* The same activations as data, in the order of the list they are declared in (one line each,
 * core/include/wb/abi/act_list.h): the bindings register wb.<name> and t:<name>()
 * from it, and wb._ops() hands it to wb.compile, codegen and help. */
typedef struct wb_unary_info {
    const char *name;      /* "sigmoid": the op, its kernel, wb.sigmoid and t:sigmoid() */
    const char *formula;   /* help's text after "wb.<name>(x) -> " */
    const char *expr_c;    /* the generated C kernels' math, over a vector `x` (vecmath.inc) */
    const char *expr_cuda; /* the generated CUDA kernels' math, over a float `x` */
} wb_unary_info;
int wb_unary_count(void);
const wb_unary_info *wb_unary_get(int i); /* i in 0..count-1, else NULL */
/* Activation i of the list on x: wb_sigmoid(x, out) is wb_unary(1, x, out). */
wb_status wb_unary(int i, wb_tensor *x, wb_tensor **out);
/* The CPU kernel path in use ("avx512", "avx2" or "scalar"), and a switch for tests/benchmarks. */
const char *wb_cpu_isa_name(void);
wb_status wb_cpu_isa_select(const char *name);
/* The bf16 GEMM path: "avx512bf16" (vdpbf16ps on k-pairs), "avx2bf16" (k-pairs widened in
 * registers), "emulated" (the k-pair path in portable C, for tests), "widen" (bf16 widened to
 * f32, the f32 kernels) or "auto" (by rows: see wb_kernels/gemm.h); and a switch. */
const char *wb_cpu_bf16_name(void);
/* The measured multiply-add rate of this CPU's bf16 pair instruction (vdpbf16ps) over f32 FMAs
 * (a pair dot product counts two per lane); 0 without one. Measured once per ISA (~4 ms). */
double wb_cpu_bf16_pair_speed(void);
wb_status wb_cpu_bf16_select(const char *name);

/* Reductions over one dim (0-based) or, with dim -1, over every element; keepdim keeps the
 * reduced dims with size 1, otherwise they go (every element: a 0-d result). The result has
 * x's dtype. Sums are pairwise in f64, rounded once (bound: <wb_kernels/reduce.h>); a sum of
 * nothing is 0, a mean or max of nothing is an error naming the shape. Max propagates NaN; over
 * a dim, `indices` (may be NULL) receives the positions of the maxima along it as an f32 tensor
 * (the first of ties, or the first NaN), counted from index_base (the Lua API: 1); a dim longer
 * than 2^24 is refused then. cpu only for now: cuda tensors get an error saying so. */
wb_status wb_sum(wb_tensor *x, int dim, int keepdim, wb_tensor **out);
wb_status wb_mean(wb_tensor *x, int dim, int keepdim, wb_tensor **out);
wb_status wb_max(wb_tensor *x, int dim, int keepdim, int64_t index_base, wb_tensor **values, wb_tensor **indices);

/* Reading values back (host side; these are comparisons, not ops on the device lane). */
wb_status wb_to_doubles(wb_tensor *x, double *values); /* numel values in row-major order */
wb_status wb_max_abs_diff(wb_tensor *a, wb_tensor *b, double *out);
/* ||out - ref||_2 / ||ref||_2 in double precision (||out - ref||_2 when ref is all zeros). */
wb_status wb_rel_error(wb_tensor *out, wb_tensor *ref, double *result);
/* |a - b| <= atol + rtol * |b| elementwise (broadcast); NaN is never close. */
wb_status wb_allclose(wb_tensor *a, wb_tensor *b, double rtol, double atol, int *result);

/* ---- random numbers ------------------------------------------------------------------ */

/* Counter-based (Philox4x32-10): element i of a draw depends only on (seed, offset, i), so a
 * seed gives the same numbers whatever the thread count. */
void wb_manual_seed(uint64_t seed);
uint64_t wb_initial_seed(void);

#ifdef __cplusplus
}
#endif
#endif
