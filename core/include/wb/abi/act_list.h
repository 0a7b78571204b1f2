/* wb/abi/act_list.h: the elementwise activations, each declared once. Every other place derives from
 * this list: the kernels' wb_cpu_act enum, vector dispatch and double reference; the core's op
 * ids, op-table rows, bf16 path and wb_<name>(); the CUDA plugin's op codes (wb/abi/cuda.h) and
 * eager kernels wb_<name>_kernel (kernels.cu, and the mock plugin's); wb.<name> and t:<name>() in
 * Lua, wb.compile's traced names, the generated kernels' expressions and help's entries (through
 * wb._ops()). Adding an activation: its line here and, for VEC, its vector routine (vecmath.inc). */
#ifndef WB_ABI_ACT_LIST_H
#define WB_ABI_ACT_LIST_H

/* X(ID, name, VEC, REF, CUDA, "formula") per activation, in op-id order:
 *   ID       WB_CPU_<ID> and WB_OP_<ID>
 *   name     wb.<name>(x), t:<name>(), the op and kernel name
 *   VEC      the math over vecmath.inc's vector type, a C expression in `x` (vf); the generated
 *            kernels use its text with x replaced by the operand
 *   REF      the double-precision reference, a C expression in `x` (double): the tests' truth
 *   CUDA     the math on the device: the eager cuda kernel's and the generated CUDA kernels', a
 *            CUDA C expression in `x` (float) over the math library only (the mock plugin
 *            compiles the same text as C)
 *   formula  what help prints after "wb.<name>(x) -> " */
#define WB_ACT_LIST(X)                                                                                                 \
    X(SILU, silu, v_silu(x), x / (1.0 + exp(-x)), (x / (1.0f + expf(-x))), "x * sigmoid(x) = x / (1 + exp(-x))")       \
    X(SIGMOID, sigmoid, v_sigmoid(x), 1.0 / (1.0 + exp(-x)), (1.0f / (1.0f + expf(-x))), "1 / (1 + exp(-x))")          \
    X(RELU, relu, v_max_nan(v_set1(0.0f), x), x != x ? x : x > 0 ? x : 0.0, (x != x ? x : x > 0.0f ? x : 0.0f),        \
      "max(x, 0) (NaN stays NaN)")                                                                                     \
    X(TANH, tanh, v_tanh(x), tanh(x), tanhf(x), "tanh(x)")                                                             \
    X(EXP, exp, v_exp(x), exp(x), expf(x), "exp(x)")                                                                   \
    X(SOFTPLUS, softplus, v_softplus(x), x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)),                                   \
      (fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)))), "log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))")                    \
    /* one line per activation, above this one */

#endif
