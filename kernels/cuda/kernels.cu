// kernels.cu: our own CUDA kernels (elementwise, GELU, fused GeGLU) and their launchers.
// Kernels are extern "C" so that traces show plain names (wb_add_kernel, wb_geglu_bf16x8, ...).
// The elementwise ops of the op lists (<wb/abi/arith_list.h>, act_list.h) are written by the
// lists: each op's code, its math (the list's CUDA column), its kernel and its launch.
// Math is fp32 whatever the storage type; bf16 results are rounded once, to nearest even.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "plugin_internal.h"

namespace {

struct EwArgs {
    int ndim;
    int contiguous; // every operand contiguous over the same shape: index = offset
    int vec;        // contiguous, one dtype, 16-byte aligned, n a multiple of the width: 1 f32x4, 2 bf16x8
    int64_t n;
    int64_t shape[WB_CUDA_MAX_DIMS];
    int64_t so[WB_CUDA_MAX_DIMS], sa[WB_CUDA_MAX_DIMS], sb[WB_CUDA_MAX_DIMS];
    void *out;
    const void *a, *b;
    int dto, dta, dtb;
    float value;
};

__device__ __forceinline__ float load(const void *p, int dtype, int64_t i) {
    if (dtype == WB_CU_BF16) return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    return static_cast<const float *>(p)[i];
}

__device__ __forceinline__ void store(void *p, int dtype, int64_t i, float v) {
    if (dtype == WB_CU_BF16)
        static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
    else
        static_cast<float *>(p)[i] = v;
}

// gelu_tanh(x) = 0.5 x (1 + tanh(y)) = x / (1 + exp(-2y)), y = sqrt(2/pi) (x + 0.044715 x^3).
// The quotient form is accurate for large |x| (no 1 - 1 cancellation) and exp(-2y) = inf -> -0/+0.
__device__ __forceinline__ float gelu_tanh(float x) {
    const float k = 0.7978845608028654f;
    float y = k * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * y));
}

__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)); }

template <int OP> __device__ __forceinline__ float apply(float a, float b, float value) {
    float x = a; // the lists' unary expressions are in x, the binary ones in a and b
    (void)x, (void)b;
    switch (OP) {
    case WB_CU_EW_COPY: return a;
    case WB_CU_EW_GELU_TANH: return gelu_tanh(a);
    case WB_CU_EW_GELU_ERF: return gelu_erf(a);
#define EW_ARITH_CASE(ID, NAME, SCALAR, VEC, CUDA, ...)                                                                \
    case WB_CU_EW_##ID: return CUDA;
        WB_BINARY_LIST(EW_ARITH_CASE)
        WB_ARITH_UNARY_LIST(EW_ARITH_CASE)
#undef EW_ARITH_CASE
#define EW_ACT_CASE(ID, NAME, VEC, REF, CUDA, ...)                                                                     \
    case WB_CU_EW_##ID: return CUDA;
        WB_ACT_LIST(EW_ACT_CASE)
#undef EW_ACT_CASE
    default: return value; // FILL
    }
}

template <int OP, bool BINARY, bool READS> __device__ void ew_body(const EwArgs &e) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < e.n; i += stride) {
        int64_t oo = i, oa = i, ob = i;
        if (!e.contiguous) {
            oo = oa = ob = 0;
            int64_t rem = i;
            for (int d = e.ndim - 1; d >= 0; d--) {
                int64_t idx = rem % e.shape[d];
                rem /= e.shape[d];
                oo += idx * e.so[d];
                oa += idx * e.sa[d];
                ob += idx * e.sb[d];
            }
        }
        float a = READS ? load(e.a, e.dta, oa) : 0.0f;
        float b = BINARY ? load(e.b, e.dtb, ob) : 0.0f;
        store(e.out, e.dto, oo, apply<OP>(a, b, e.value));
    }
}

// The contiguous same-dtype case with 16-byte accesses (what the eager MLP's gelu and mul are),
// so that eager kernels move bytes as well as the fused one and the comparison stays fair.
template <int OP, bool BINARY, bool READS> __device__ void ew_vec_f32(const EwArgs &e) {
    int64_t nv = e.n / 4, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += stride) {
        float4 a = READS ? reinterpret_cast<const float4 *>(e.a)[v] : make_float4(0, 0, 0, 0);
        float4 b = BINARY ? reinterpret_cast<const float4 *>(e.b)[v] : make_float4(0, 0, 0, 0);
        reinterpret_cast<float4 *>(e.out)[v] = make_float4(apply<OP>(a.x, b.x, e.value), apply<OP>(a.y, b.y, e.value),
                                                           apply<OP>(a.z, b.z, e.value), apply<OP>(a.w, b.w, e.value));
    }
}

template <int OP, bool BINARY, bool READS> __device__ void ew_vec_bf16(const EwArgs &e) {
    int64_t nv = e.n / 8, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += stride) {
        uint4 a = READS ? reinterpret_cast<const uint4 *>(e.a)[v] : make_uint4(0, 0, 0, 0);
        uint4 b = BINARY ? reinterpret_cast<const uint4 *>(e.b)[v] : make_uint4(0, 0, 0, 0);
        const __nv_bfloat162 *a2 = reinterpret_cast<const __nv_bfloat162 *>(&a);
        const __nv_bfloat162 *b2 = reinterpret_cast<const __nv_bfloat162 *>(&b);
        uint4 o;
        __nv_bfloat162 *o2 = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float2 af = __bfloat1622float2(a2[j]), bf = __bfloat1622float2(b2[j]);
            o2[j] = __floats2bfloat162_rn(apply<OP>(af.x, bf.x, e.value), apply<OP>(af.y, bf.y, e.value));
        }
        reinterpret_cast<uint4 *>(e.out)[v] = o;
    }
}

template <int OP, bool BINARY, bool READS> __device__ void ew_dispatch(const EwArgs &e) {
    if (e.vec == 1)
        ew_vec_f32<OP, BINARY, READS>(e);
    else if (e.vec == 2)
        ew_vec_bf16<OP, BINARY, READS>(e);
    else
        ew_body<OP, BINARY, READS>(e);
}

} // namespace

#define WB_EW_KERNEL(NAME, OP, BINARY, READS)                                                                         \
    extern "C" __global__ void __launch_bounds__(256) NAME(EwArgs e) { ew_dispatch<OP, BINARY, READS>(e); }

WB_EW_KERNEL(wb_copy_kernel, WB_CU_EW_COPY, false, true)
WB_EW_KERNEL(wb_gelu_tanh_kernel, WB_CU_EW_GELU_TANH, false, true)
WB_EW_KERNEL(wb_gelu_erf_kernel, WB_CU_EW_GELU_ERF, false, true)
WB_EW_KERNEL(wb_fill_kernel, WB_CU_EW_FILL, false, false)
// wb_add_kernel, ..., wb_neg_kernel, wb_silu_kernel, ...: one per op of the lists
#define WB_EW_BINARY_KERNEL(ID, NAME, ...) WB_EW_KERNEL(wb_##NAME##_kernel, WB_CU_EW_##ID, true, true)
#define WB_EW_UNARY_KERNEL(ID, NAME, ...)  WB_EW_KERNEL(wb_##NAME##_kernel, WB_CU_EW_##ID, false, true)
WB_BINARY_LIST(WB_EW_BINARY_KERNEL)
WB_ARITH_UNARY_LIST(WB_EW_UNARY_KERNEL)
WB_ACT_LIST(WB_EW_UNARY_KERNEL)
#undef WB_EW_BINARY_KERNEL
#undef WB_EW_UNARY_KERNEL

// Fused GeGLU, vectorised: each thread loads 16 bytes of gate and 16 of up (8 bf16 or 4 f32)
// and stores 16 bytes; GELU in fp32. Rows may have their own leading dimension (the two halves
// of one [rows, 2*cols] GEMM output), which the launcher checks keeps 16-byte alignment.
extern "C" __global__ void __launch_bounds__(256)
    wb_geglu_bf16x8(const __nv_bfloat16 *gate, int64_t ld_gate, const __nv_bfloat16 *up, int64_t ld_up,
                    __nv_bfloat16 *out, int64_t rows, int64_t cols) {
    int64_t vec_per_row = cols / 8, total = rows * vec_per_row;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < total; v += stride) {
        int64_t r = v / vec_per_row, c = (v - r * vec_per_row) * 8;
        uint4 g = *reinterpret_cast<const uint4 *>(gate + r * ld_gate + c);
        uint4 u = *reinterpret_cast<const uint4 *>(up + r * ld_up + c);
        const __nv_bfloat162 *g2 = reinterpret_cast<const __nv_bfloat162 *>(&g);
        const __nv_bfloat162 *u2 = reinterpret_cast<const __nv_bfloat162 *>(&u);
        uint4 o;
        __nv_bfloat162 *o2 = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float2 gf = __bfloat1622float2(g2[j]), uf = __bfloat1622float2(u2[j]);
            o2[j] = __floats2bfloat162_rn(gelu_tanh(gf.x) * uf.x, gelu_tanh(gf.y) * uf.y);
        }
        *reinterpret_cast<uint4 *>(out + r * cols + c) = o;
    }
}

extern "C" __global__ void __launch_bounds__(256)
    wb_geglu_f32x4(const float *gate, int64_t ld_gate, const float *up, int64_t ld_up, float *out, int64_t rows,
                   int64_t cols) {
    int64_t vec_per_row = cols / 4, total = rows * vec_per_row;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < total; v += stride) {
        int64_t r = v / vec_per_row, c = (v - r * vec_per_row) * 4;
        float4 g = *reinterpret_cast<const float4 *>(gate + r * ld_gate + c);
        float4 u = *reinterpret_cast<const float4 *>(up + r * ld_up + c);
        float4 o = make_float4(gelu_tanh(g.x) * u.x, gelu_tanh(g.y) * u.y, gelu_tanh(g.z) * u.z, gelu_tanh(g.w) * u.w);
        *reinterpret_cast<float4 *>(out + r * cols + c) = o;
    }
}

// Any alignment, either dtype.
extern "C" __global__ void __launch_bounds__(256)
    wb_geglu_scalar(int dtype, const void *gate, int64_t ld_gate, const void *up, int64_t ld_up, void *out,
                    int64_t rows, int64_t cols) {
    int64_t total = rows * cols, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        int64_t r = i / cols, c = i - r * cols;
        float g = load(gate, dtype, r * ld_gate + c), u = load(up, dtype, r * ld_up + c);
        store(out, dtype, i, gelu_tanh(g) * u);
    }
}

namespace {

const int kThreads = 256;

// Grid-stride loops: enough blocks to fill every SM (8 resident blocks of 256 threads each on
// sm_90), never more than the work needs.
unsigned grid_for(int64_t work, int sm_count) {
    int64_t need = (work + kThreads - 1) / kThreads;
    int64_t cap = (int64_t)(sm_count > 0 ? sm_count : 1) * 8;
    if (need < 1) need = 1;
    return (unsigned)(need < cap ? need : cap);
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

} // namespace

extern "C" int wbcu_launch_elementwise(const wb_cuda_ew *w, cudaStream_t stream, int sm_count) {
    if (w->ndim < 0 || w->ndim > WB_CUDA_MAX_DIMS || w->op < 0 || w->op >= WB_CU_EW_COUNT) return cudaErrorInvalidValue;
    EwArgs e;
    memset(&e, 0, sizeof e);
    e.ndim = w->ndim;
    e.n = 1;
    bool binary = WB_CU_EW_IS_BINARY(w->op), reads = w->op != WB_CU_EW_FILL;
    bool contiguous = true;
    int64_t expect = 1;
    for (int d = w->ndim - 1; d >= 0; d--) {
        e.shape[d] = w->shape[d];
        e.so[d] = w->out_stride[d];
        e.sa[d] = w->a_stride[d];
        e.sb[d] = w->b_stride[d];
        e.n *= w->shape[d];
        if (w->shape[d] != 1 && (e.so[d] != expect || (reads && e.sa[d] != expect) || (binary && e.sb[d] != expect)))
            contiguous = false;
        expect *= w->shape[d];
    }
    if (e.n == 0) return cudaSuccess;
    e.contiguous = contiguous;
    bool one_dtype = (!reads || w->a_dtype == w->out_dtype) && (!binary || w->b_dtype == w->out_dtype);
    bool aligned = aligned16(w->out) && (!reads || aligned16(w->a)) && (!binary || aligned16(w->b));
    int width = w->out_dtype == WB_CU_BF16 ? 8 : 4;
    if (contiguous && one_dtype && aligned && e.n % width == 0) e.vec = w->out_dtype == WB_CU_BF16 ? 2 : 1;
    e.out = w->out;
    e.a = w->a;
    e.b = w->b;
    e.dto = w->out_dtype;
    e.dta = w->a_dtype;
    e.dtb = w->b_dtype;
    e.value = (float)w->value;
    unsigned grid = grid_for(e.vec ? e.n / width : e.n, sm_count);
    switch (w->op) {
    case WB_CU_EW_COPY: wb_copy_kernel<<<grid, kThreads, 0, stream>>>(e); break;
    case WB_CU_EW_GELU_TANH: wb_gelu_tanh_kernel<<<grid, kThreads, 0, stream>>>(e); break;
    case WB_CU_EW_GELU_ERF: wb_gelu_erf_kernel<<<grid, kThreads, 0, stream>>>(e); break;
#define EW_LAUNCH_CASE(ID, NAME, ...)                                                                                  \
    case WB_CU_EW_##ID: wb_##NAME##_kernel<<<grid, kThreads, 0, stream>>>(e); break;
        WB_BINARY_LIST(EW_LAUNCH_CASE)
        WB_ARITH_UNARY_LIST(EW_LAUNCH_CASE)
        WB_ACT_LIST(EW_LAUNCH_CASE)
#undef EW_LAUNCH_CASE
    default: wb_fill_kernel<<<grid, kThreads, 0, stream>>>(e); break;
    }
    return (int)cudaGetLastError();
}

extern "C" int wbcu_launch_geglu(const wb_cuda_geglu *g, cudaStream_t stream, int sm_count) {
    if (g->rows == 0 || g->cols == 0) return cudaSuccess;
    int64_t vec = g->dtype == WB_CU_BF16 ? 8 : 4;
    bool vectorised = strcmp(wb_cuda_geglu_variant(g), "scalar") != 0;
    if (vectorised && g->dtype == WB_CU_BF16) {
        wb_geglu_bf16x8<<<grid_for(g->rows * g->cols / vec, sm_count), kThreads, 0, stream>>>(
            static_cast<const __nv_bfloat16 *>(g->gate), g->ld_gate, static_cast<const __nv_bfloat16 *>(g->up),
            g->ld_up, static_cast<__nv_bfloat16 *>(g->out), g->rows, g->cols);
    } else if (vectorised) {
        wb_geglu_f32x4<<<grid_for(g->rows * g->cols / vec, sm_count), kThreads, 0, stream>>>(
            static_cast<const float *>(g->gate), g->ld_gate, static_cast<const float *>(g->up), g->ld_up,
            static_cast<float *>(g->out), g->rows, g->cols);
    } else {
        wb_geglu_scalar<<<grid_for(g->rows * g->cols, sm_count), kThreads, 0, stream>>>(
            g->dtype, g->gate, g->ld_gate, g->up, g->ld_up, g->out, g->rows, g->cols);
    }
    return (int)cudaGetLastError();
}

// Kernel names from CUPTI are mangled for C++ kernels (cuBLAS's CUTLASS ones); the trace shows
// them demangled. The strings live for the life of the process, one per distinct name.
extern "C" const char *wbcu_demangle(const char *name) {
    if (!name || name[0] != '_' || name[1] != 'Z') return name;
    static std::mutex mu;
    static std::unordered_map<std::string, std::string> *cache = new std::unordered_map<std::string, std::string>();
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(name);
    if (it != cache->end()) return it->second.c_str();
    int status = 0;
    char *d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    std::string s = (status == 0 && d) ? std::string(d) : std::string(name);
    std::free(d);
    return cache->emplace(name, s).first->second.c_str();
}
