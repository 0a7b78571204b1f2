/* op.h: the op table and the dispatcher every op goes through (internal to libwb).
 * An op is declared once in core/ops/op_table.c: its name, kind, arity, shape rule, flops and bytes
 * formulas and one implementation per device. The dispatcher is the single place where the
 * profiler and graph capture hook in (wb_dispatch_hooks, wb_capture_hooks). */
#ifndef WB_OP_H
#define WB_OP_H

#include <stddef.h>

#include <wb/abi/act_list.h>
#include <wb/abi/arith_list.h>

#include <wb/kernel.h>
#include <wb/wb.h>

/* The views (share storage, launch no kernel) and the creation ops (a new tensor from a shape and
 * the generator), each declared once: X(ID, name) gives WB_OP_<ID> and its op-table row, named
 * "name"; a view's shape rule is wb_shape_<name> (core/ops/views.c). Their Lua bindings and help
 * stay written out: each takes its own arguments. */
#define WB_VIEW_LIST(X)                                                                                                \
    X(T, t)                                                                                                            \
    X(TRANSPOSE, transpose)                                                                                            \
    X(PERMUTE, permute)                                                                                                \
    X(VIEW, view)                                                                                                      \
    X(NARROW, narrow)                                                                                                  \
    X(SELECT, select)                                                                                                  \
    X(AS_STRIDED, as_strided)                                                                                          \
    X(EXPAND, expand)                                                                                                  \
    X(ALIAS, alias)
#define WB_CREATION_LIST(X) X(ARANGE, arange) X(RAND, rand) X(RANDN, randn)

typedef enum wb_op_id {
#define WB_OP_LIST_ID(ID, ...) WB_OP_##ID,
    WB_VIEW_LIST(WB_OP_LIST_ID) /* views first: WB_OP_T is 0 */
    /* composites: call other ops */
    WB_OP_RESHAPE,
    WB_OP_FLATTEN,
    WB_OP_CONTIGUOUS,
    WB_OP_CLONE,
    /* kernels */
    WB_OP_COPY_,
    WB_OP_FILL_,
    WB_CREATION_LIST(WB_OP_LIST_ID)
#undef WB_OP_LIST_ID
    /* the arithmetic ops of <wb/abi/arith_list.h> (core/ops/pointwise.c): add, sub, mul, div, neg */
#define WB_OP_ARITH_ID(ID, ...) WB_OP_##ID,
    WB_BINARY_LIST(WB_OP_ARITH_ID)
    WB_ARITH_UNARY_LIST(WB_OP_ARITH_ID)
#undef WB_OP_ARITH_ID
    WB_OP_GELU,
    WB_OP_GEGLU,
    WB_OP_MM,
    WB_OP_ADDMM,
    WB_OP_GEGLU_LINEAR,
    /* the activations of <wb/abi/act_list.h> (core/ops/activation.c) */
#define WB_OP_ACT_ID(ID, ...) WB_OP_##ID,
    WB_ACT_LIST(WB_OP_ACT_ID)
#undef WB_OP_ACT_ID
    WB_OP_SWIGLU,
    WB_OP_SWIGLU_LINEAR,
    WB_OP_GEGLU_MLP, /* the whole gated MLP (core/ops/mlp.c) */
    WB_OP_SWIGLU_MLP,
    WB_OP_GENERATED, /* a generated pointwise kernel (core/ops/codegen.c) */
    WB_OP_GENERATED_GEMM, /* a GEMM with a generated epilogue (core/cpu/codegen_gemm.c) */
    WB_OP_TO, /* between devices and dtypes */
    /* reductions over one dim or every element (core/ops/reduce.c) */
    WB_OP_SUM,
    WB_OP_MEAN,
    WB_OP_MAX,
    /* composites over the GEMM ops */
    WB_OP_MATMUL,
    WB_OP_LINEAR,
    WB_OP_COUNT
} wb_op_id;

typedef enum wb_op_kind {
    WB_OP_KIND_VIEW,      /* returns a view; never launches a kernel */
    WB_OP_KIND_COMPOSITE, /* calls other ops through the dispatcher */
    WB_OP_KIND_KERNEL,    /* launches kernels on the device */
} wb_op_kind;

/* WB_OP_MAX_INPUTS (the most tensors an op reads) is in wb.h */

/* Typed parameters: each op reads only its own member. */
typedef union wb_op_params {
    struct {
        int d1, d2;
    } transpose;
    struct {
        int ndim;
        int perm[WB_MAX_DIMS];
    } permute;
    struct {
        int ndim;
        int64_t shape[WB_MAX_DIMS];
    } shape; /* view, reshape, expand */
    struct {
        int ndim;
        int64_t shape[WB_MAX_DIMS];
        int64_t stride[WB_MAX_DIMS];
        int64_t offset;
    } strided;
    struct {
        int dim;
        int64_t start, length;
    } narrow;
    struct {
        int dim;
        int64_t index;
    } select;
    struct {
        int start_dim, end_dim;
    } flatten;
    struct {
        double value;
    } fill;
    struct {
        uint64_t seed, offset;
    } random;
    struct {
        int64_t n;
    } arange;
    struct {
        wb_activation activation;
        int prepack;
    } gemm; /* mm, addmm, linear, gelu */
    struct {
        wb_dtype dtype;
        wb_device device;
    } to;
    struct {
        const struct wb_codegen_kernel *kernel;
    } generated;
    struct {
        int dim;            /* 0-based; -1: every element */
        int keepdim;        /* the reduced dims stay, with size 1 */
        int indices;        /* max over a dim: also make out_indices */
        int64_t index_base; /* what the first position along dim is written as (Lua: 1) */
    } reduce;
} wb_op_params;

typedef struct wb_op_def wb_op_def;

/* One call of an op: filled by the public wrapper, completed by the dispatcher. */
typedef struct wb_op_call {
    const wb_op_def *def;
    wb_tensor *in[WB_OP_MAX_INPUTS];
    int nin;
    wb_op_params p;
    /* Output geometry for ops that allocate one (kernel ops producing a new tensor). */
    wb_dtype out_dtype;
    wb_device device;
    int out_ndim;
    int64_t out_shape[WB_MAX_DIMS];
    /* View geometry, set by the shape rule of view ops. */
    int64_t out_stride[WB_MAX_DIMS];
    int64_t out_offset;
    wb_tensor *out; /* the result (NULL for in-place ops) */
    /* max over a dim with p.reduce.indices: the positions of the maxima, f32, out's shape;
     * allocated by the op's implementation (the dispatcher allocates `out` only) */
    wb_tensor *out_indices;
} wb_op_call;

typedef wb_status (*wb_op_shape_fn)(wb_op_call *call);    /* validate; set out_* fields */
typedef double (*wb_op_count_fn)(const wb_op_call *call); /* flops or minimum bytes */
typedef wb_status (*wb_op_impl_fn)(wb_op_call *call);

struct wb_op_def {
    wb_op_id id;
    const char *name;
    wb_op_kind kind;
    int arity;                           /* tensor inputs */
    int optional;                        /* trailing inputs that may be NULL (linear's bias) */
    int allocates_output;                /* dispatcher allocates call->out from out_* before impl */
    wb_op_shape_fn shape;                /* shape rule (validation); required */
    wb_op_count_fn flops;                /* (optional) NULL means 0 */
    wb_op_count_fn bytes;                /* (optional) NULL means 0 */
    wb_op_impl_fn impl[WB_DEVICE_COUNT]; /* NULL: not implemented on that device */
};

const wb_op_def *wb_op_get(wb_op_id id);
const char *wb_op_name(wb_op_id id);
/* The first op whose table entry is incomplete or out of place, or -1 (for the tests). */
int wb_op_table_check(void);

/* Runs one op: checks arity, devices and the shape rule, allocates the output, calls the
 * device implementation, and reports to the hooks. On failure nothing is leaked. */
wb_status wb_dispatch(wb_op_id id, wb_op_call *call);

/* wb_dispatch, then *out = the call's output (NULL on failure): the public wrappers' pattern. */
wb_status wb_dispatch_out(wb_op_id id, wb_op_call *call, wb_tensor **out);


/* How a launch context is laid out, for graph capture: its size (capture keeps a copy), an
 * optional `refresh` that re-resolves cached state in a copied context before a replay (a GEMM's
 * packed weights), the byte offsets of its data pointers (replay points them at new input
 * buffers: core/observe/graph_inputs.c), and of the storages its cached state is keyed on, each
 * with its int64_t element offset (a prepacked weight: rebinding moves the key to the new
 * storage, and refresh packs that one). One static const row per kernel family, declared beside
 * its struct. */
#define WB_LAUNCH_MAX_POINTERS 8
#define WB_LAUNCH_MAX_STORAGES 3
typedef struct wb_launch_storage {
    size_t storage, offset; /* a wb_storage * field and its int64_t element offset */
} wb_launch_storage;
typedef struct wb_launch_layout {
    size_t size;
    void (*refresh)(void *ctx); /* (optional) */
    int npointers;
    size_t pointers[WB_LAUNCH_MAX_POINTERS];
    int nstorages;
    wb_launch_storage storages[WB_LAUNCH_MAX_STORAGES];
} wb_launch_layout;

/* The description of a launch by call c (NULL: none): the kind interned from *key, the work
 * counts from the op table's formulas. */
wb_kernel_desc wb_kernel_desc_for(const wb_op_call *c, const wb_kernel_kind *key, int threads);

/* Launches `fn(ctx)` on the device described by `desc` (the CPU runs it synchronously). `ctx`
 * must be self-contained (layout->size bytes, no pointers into memory that dies with the op except
 * storage buffers, every data pointer listed in layout->pointers) so graph capture can keep a
 * copy and re-issue it on the same or rebound inputs. */
void wb_kernel_launch(const wb_kernel_desc *desc, void (*fn)(void *ctx), void *ctx, const wb_launch_layout *layout);

/* Graph capture observes launches, op inputs, new storages and storage writes (core/observe/graph.c). */
typedef struct wb_capture_hooks {
    void *user;
    /* fn and ctx NULL: queued on a device that captures its own queue (cuda) */
    void (*launch)(void *user, const wb_kernel_desc *desc, void (*fn)(void *), const void *ctx,
                   const wb_launch_layout *layout);
    void (*op_inputs)(void *user, const wb_op_call *call);
} wb_capture_hooks;
void wb_capture_set_hooks(const wb_capture_hooks *hooks);
const wb_capture_hooks *wb_capture_hooks_active(void);

/* Observers of the dispatcher (profiler, graph capture). All members optional. */
typedef struct wb_dispatch_hooks {
    void *user;
    void (*op_begin)(void *user, const wb_op_call *call);
    void (*op_end)(void *user, const wb_op_call *call, wb_status status);
    void (*kernel_begin)(void *user, const wb_kernel_desc *desc);
    void (*kernel_end)(void *user, const wb_kernel_desc *desc);
} wb_dispatch_hooks;

/* Installs hooks (NULL removes them); returns the previous ones. */
const wb_dispatch_hooks *wb_dispatch_set_hooks(const wb_dispatch_hooks *hooks);

#endif
