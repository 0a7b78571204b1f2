/* wb/abi/arith_list.h: the elementwise arithmetic ops (add, sub, mul, div, and neg), each declared once.
 * Every other place derives from these lists: the kernels' op enums, scalar loops and bf16 path;
 * the core's op ids, op-table rows and wb_<name>(); wb.<name>, t:<name>() and the tensor's
 * metamethod in Lua; wb.compile's traced names, the generated kernels' expressions and help's
 * entries (through wb._ops()); the CUDA plugin's op codes (wb/abi/cuda.h) and eager kernels
 * wb_<name>_kernel (kernels.cu, and the mock plugin's). */
#ifndef WB_ABI_ARITH_LIST_H
#define WB_ABI_ARITH_LIST_H

/* X(ID, name, SCALAR, VEC, CUDA, "operator", "metamethod", "formula", "method") per binary op,
 * in op-id order:
 *   ID          WB_CPU_<ID>, WB_BF16_<ID> and WB_OP_<ID>
 *   name        wb.<name>(a, b), t:<name>(b), wb_<name>(a, b, &out) in C, the op and kernel name
 *   SCALAR      the math on one pair of floats, a C expression in `a` and `b` (the CPU loops)
 *   VEC         the generated C kernels' math over vecmath.inc's vector type, in `a` and `b`
 *   CUDA        the math on the device (the eager cuda kernel's and the generated CUDA kernels'), a
 *               CUDA C expression in `a` and `b` (float) that is also C (the mock plugin's)
 *   operator    the Lua operator that calls the op ("+": a + b), "" for none
 *   metamethod  the tensor's metamethod for that operator ("__add"), "" for none
 *   formula     what help prints after "wb.<name>(a, b) -> "
 *   method      what help prints after "t:<name>(b) -> " */
#define WB_BINARY_LIST(X)                                                                                              \
    X(ADD, add, a + b, v_add(a, b), (a + b), "+", "__add", "a + b with NumPy broadcasting (numbers allowed)",          \
      "t + b (broadcasting; b a tensor or a number)")                                                                  \
    X(SUB, sub, a - b, v_sub(a, b), (a - b), "-", "__sub", "a - b with broadcasting", "t - b (broadcasting)")          \
    X(MUL, mul, a * b, v_mul(a, b), (a * b), "*", "__mul", "a * b elementwise with broadcasting",                      \
      "t * b elementwise (broadcasting)")                                                                              \
    X(DIV, div, a / b, v_div(a, b), (a / b), "/", "__div", "a / b elementwise with broadcasting",                      \
      "t / b elementwise (broadcasting)")                                                                              \
    /* one line per binary op, above this one */

/* The arithmetic unary ops, the same columns in `x` ("formula" after "wb.<name>(a) -> ", "method"
 * after "t:<name>() -> "). The activations (silu, ...) have their own list, act_list.h: they run
 * as the ISA's vector routines, these as plain loops. */
#define WB_ARITH_UNARY_LIST(X)                                                                                         \
    X(NEG, neg, -x, v_mul(x, v_set1(-1.0f)), (x * -1.0f), "-", "__unm", "-a", "-t")                                   \
    /* one line per unary op, above this one */

#endif
