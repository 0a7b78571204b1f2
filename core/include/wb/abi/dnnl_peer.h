/* wb/abi/dnnl_peer.h: the C interface between libwb (core/cpu/peer_dnnl.c) and the oneDNN peer
 * libwb_dnnl_peer.so (kernels/dnnl/dnnl_peer.c), a comparison peer for benchmarks only.
 *
 * The peer links oneDNN; libwb dlopens the peer, so the workbench links no oneDNN and starts
 * where it is absent. The peer knows nothing of tensors: it takes raw row-major pointers and
 * leading dimensions; the core owns shapes, dtypes and error prefixes.
 * Every function returning int returns 0 on success; on failure, last_error() says why. */
#ifndef WB_DNNL_PEER_ABI_H
#define WB_DNNL_PEER_ABI_H

#include <stdint.h>

#include <wb/abi/types.h>

#define WB_DNNL_PEER_ABI_VERSION 1
#define WB_DNNL_PEER_SYMBOL      "wb_dnnl_peer_entry"

/* Element types (wb/abi/types.h, as wb_dtype's). */
enum { WB_DNNL_F32 = WB_ABI_F32, WB_DNNL_BF16 = WB_ABI_BF16 };

/* The MLP's gate activation (a post-op of the gate projection). */
enum { WB_DNNL_GEGLU = 0 /* gelu_tanh */, WB_DNNL_SWIGLU = 1 /* swish, alpha 1 (silu) */ };

typedef struct wb_dnnl_linear wb_dnnl_linear; /* one matmul primitive, weights reordered once */
typedef struct wb_dnnl_mlp wb_dnnl_mlp;       /* three matmul primitives with post-ops */

typedef struct {
    int abi_version;
    const char *(*last_error)(void);
    /* "oneDNN 2.6.3 (OpenMP runtime)" */
    const char *(*version)(void);
    /* the ISA oneDNN dispatches its JIT kernels on ("avx2", "avx512_core", ...) */
    const char *(*isa)(void);
    int (*set_threads)(int n);
    /* c[m,n] = a[m,k] b[k,n], row-major, through dnnl_sgemm; trans_a/trans_b: 'N' or 'T' */
    int (*sgemm)(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float *c, int64_t ldc);
    /* y[m,n] = x[m,k] w[n,k]^T (+ bias[n] when given): a matmul primitive for this shape, with the
     * weights copied into the layout it chose; the primitive's implementation name via kernel() */
    wb_dnnl_linear *(*linear_new)(int64_t m, int64_t n, int64_t k, const float *w, const float *bias);
    int (*linear_run)(wb_dnnl_linear *l, const float *x, float *y);
    const char *(*linear_kernel)(const wb_dnnl_linear *l);
    void (*linear_free)(wb_dnnl_linear *l);
    /* y[t,dim] = down(act(x gate^T) * (x up^T)): gate/up [hidden,dim], down [dim,hidden],
     * row-major, of dtype (WB_DNNL_F32 or _BF16) like x and y */
    wb_dnnl_mlp *(*mlp_new)(int kind, int dtype, int64_t tokens, int64_t dim, int64_t hidden, const void *gate,
                            const void *up, const void *down);
    int (*mlp_run)(wb_dnnl_mlp *m, const void *x, void *y);
    /* the three primitives' implementation names, "up brg:avx2, gate brg:avx2, down brg:avx2" */
    const char *(*mlp_kernels)(const wb_dnnl_mlp *m);
    void (*mlp_free)(wb_dnnl_mlp *m);
} wb_dnnl_peer_api;

typedef const wb_dnnl_peer_api *(*wb_dnnl_peer_fn)(int abi_version);

#endif
