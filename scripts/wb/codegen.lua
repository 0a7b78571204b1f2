-- wb.codegen's Lua half: fusion groups of elementwise ops in a traced plan, and the source of
-- one kernel per group: C for the cpu, CUDA C for device cuda (compiled, cached and loaded by the
-- C half, core/ops/codegen.c and core/cpu/codegen_*.c; on cuda NVRTC in the plugin compiles it).
--
-- A group grows from an elementwise node through producers that are elementwise too and whose
-- result nothing else uses (so it never needs to reach memory), up to 5 tensor inputs, and never
-- across an in-place write in the plan (node.seg: the group's inputs are read where its last op
-- was, which must not be after a write the plan orders before it). Numbers
-- in the trace (x * 2) become constants in the source. Each group of 2 or more ops becomes one
-- kernel named in Inductor's style, wb_poi_fused_<ops>_<n>, that reads every input once and
-- writes the output once; the math is the hand-written kernels' own (vecmath.inc over the
-- active CPU path's vector type), so results match eager bit for bit in f32.

local M = {}

-- The elementwise ops the generator knows: C expression over the operands' vector values.
local EXPR = {
    gelu = function(a) return "v_gelu_erf(" .. a .. ")" end,
    gelu_tanh = function(a) return "v_gelu_tanh(" .. a .. ")" end,
}
-- The ops of the op lists (wb._ops(): add, sub, mul, div, neg, silu, sigmoid, ...) bring their own
-- C and CUDA C, expressions in x (a unary op) or in a and b (a binary one): each becomes its
-- operand (a whole word only: expf and fmaxf keep theirs).
local CUDA, ARITY = {}, {}
local function filled(text, a, b)
    if b == nil then return (text:gsub("%f[%w_]x%f[^%w_]", function() return a end)) end
    return (text:gsub("%f[%w_][ab]%f[^%w_]", {a = a, b = b}))
end
for _, op in ipairs(wb._ops()) do
    local c, cuda = op.expr_c, op.expr_cuda
    if op.arity == 2 then
        ARITY[op.name] = 2
        EXPR[op.name] = function(a, b) return filled(c, a, b) end
        CUDA[op.name] = function(a, b) return filled(cuda, a, b) end
    else
        EXPR[op.name] = function(a) return filled(c, a) end
        CUDA[op.name] = function(a) return filled(cuda, a) end
    end
end
M.OPS = EXPR

local function is_tensor(v) return type(v) == "userdata" and getmetatable(v) == wb.Tensor end

-- The word of a traced node: gelu splits by form (the trace keeps gelu's options table).
function M.word(nd)
    if nd.op == "gelu" then
        local o = nd.args[2]
        return type(o) == "table" and o.approximate == "tanh" and "gelu_tanh" or "gelu"
    end
    return EXPR[nd.op] and nd.op or nil
end

-- A number as the dtype would hold it (bf16: rounded to nearest even), as a C float literal.
local function constant(x, dtype)
    local bits = string.unpack("<I4", string.pack("<f", x))
    if dtype == "bf16" and (bits & 0x7fffffff) <= 0x7f800000 then
        bits = ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) << 16
        x = string.unpack("<f", string.pack("<I4", bits & 0xffffffff))
    end
    if x ~= x then return "NAN" end
    if x == math.huge then return "INFINITY" end
    if x == -math.huge then return "(-INFINITY)" end
    return string.format("%af", x)
end

local BF16 = [[
static inline float wb_bf16_f32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t wb_f32_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u) : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
]]

-- The body's lines, appended to `lines`: one vector value t<k> per node of g, its operands the
-- inputs' v<i>, earlier nodes' t<k>, the names already in name_of, or constants of dtype.
local function body_lines(g, idx, lines, name_of, dtype)
    local function operand(v)
        if is_tensor(v) then return name_of[v] or ("v" .. (idx[v] - 1)) end
        return "v_set1(" .. constant(v, dtype) .. ")"
    end
    for k, nd in ipairs(g.nodes) do
        local word = M.word(nd)
        local a = operand(nd.args[1])
        local e = ARITY[word] and EXPR[word](a, operand(nd.args[2])) or EXPR[word](a)
        lines[#lines + 1] = string.format("    vf t%d = %s; /* %s */", k, e, word)
        name_of[nd.out] = "t" .. k
    end
    return lines, name_of
end

-- The source of one group's kernel. g: {symbol, nodes (in order), inputs (tensors), dtype,
-- inner_broadcast[i]}; the body is a function of the inputs' vector values.
function M.source(g)
    local idx = {}
    for i, t in ipairs(g.inputs) do idx[t] = i end
    local lines = body_lines(g, idx, {}, {}, g.dtype)
    local params = {}
    for i = 1, #g.inputs do params[i] = "vf v" .. (i - 1) end
    local T = g.dtype == "bf16" and "uint16_t" or "float"
    local load = g.dtype == "bf16" and "wb_bf16_f32" or ""
    local store = g.dtype == "bf16" and "wb_f32_bf16" or ""
    local out = {wb.codegen.prelude(), g.dtype == "bf16" and BF16 or "",
        string.format("/* %s: %s */", g.symbol, g.ops),
        "static inline vf body(" .. table.concat(params, ", ") .. ") {", table.concat(lines, "\n"),
        "    return t" .. #g.nodes .. ";", "}", "",
        "#define CH 16384",
        "/* task t: row t / chunks, its CH columns from (t % chunks) * CH */",
        "static inline void task(const wb_poi_args *a, int64_t chunks, int64_t t) {",
        "    {",
        "        int64_t r = t / chunks, c0 = (t % chunks) * CH, c1 = c0 + CH < a->cols ? c0 + CH : a->cols, j = c0;",
        string.format("        %s *o = (%s *)a->out + r * a->cols;", T, T)}
    local args_main, args_tail, tail_fill = {}, {}, {}
    for i = 1, #g.inputs do
        local p, b = "p" .. (i - 1), "b" .. (i - 1)
        out[#out + 1] = string.format("        const %s *%s = (const %s *)a->in[%d] + wb_poi_offset(a, %d, r);", T, p, T,
            i - 1, i - 1)
        local at = g.inner_broadcast[i] and "0" or "j"
        if g.inner_broadcast[i] then
            args_main[i] = string.format("v_set1(%s(%s[0]))", load, p)
        elseif g.dtype == "bf16" then
            args_main[i] = string.format("wb_load_bf16(%s + j)", p)
        else
            args_main[i] = string.format("v_load(%s + j)", p)
        end
        tail_fill[i] = string.format("%s[k - j] = %s(%s[%s]);", b, load, p, at == "j" and "k" or "0")
        args_tail[i] = "v_load(" .. b .. ")"
    end
    if g.dtype == "bf16" then
        -- after the bf16 conversions (out[2]) that it calls
        table.insert(out, 3, [[
static inline vf wb_load_bf16(const uint16_t *p) {
    float b[VEC];
    for (int i = 0; i < VEC; i++) b[i] = wb_bf16_f32(p[i]);
    return v_load(b);
}]])
    end
    local bufs = {}
    for i = 1, #g.inputs do bufs[i] = "b" .. (i - 1) .. "[VEC] = {0}" end
    local store_main = g.dtype == "bf16" and
        "{ float y[VEC]; v_store(y, body(%s)); for (int i = 0; i < VEC; i++) o[j + i] = wb_f32_bf16(y[i]); }" or
        "v_store(o + j, body(%s));"
    table.insert(out, "        for (; j + VEC <= c1; j += VEC) " .. string.format(store_main, table.concat(args_main, ", ")))
    table.insert(out, "        if (j < c1) { /* the tail through padded buffers: the same arithmetic */")
    table.insert(out, "            float " .. table.concat(bufs, ", ") .. ", y[VEC];")
    table.insert(out, "            for (int64_t k = j; k < c1; k++) { " .. table.concat(tail_fill, " ") .. " }")
    table.insert(out, "            v_store(y, body(" .. table.concat(args_tail, ", ") .. "));")
    table.insert(out, "            for (int64_t k = j; k < c1; k++) o[k] = " .. store .. "(y[k - j]);")
    table.insert(out, "        }")
    table.insert(out, "    }")
    table.insert(out, "}")
    -- small groups run in the caller, outside OpenMP: a region costs a futex wake even under
    -- if (0), microseconds against a small kernel's work (wb_kernels/spans.h, WB_CPU_PARALLEL)
    table.insert(out, "")
    table.insert(out, "void " .. g.symbol .. "(const wb_poi_args *a) {")
    table.insert(out, "    const int64_t chunks = (a->cols + CH - 1) / CH, tasks = a->rows * chunks;")
    table.insert(out, "    if (a->rows * a->cols < a->parallel_min) {")
    table.insert(out, "        for (int64_t t = 0; t < tasks; t++) task(a, chunks, t);")
    table.insert(out, "        return;")
    table.insert(out, "    }")
    table.insert(out, "#pragma omp parallel for schedule(static)")
    table.insert(out, "    for (int64_t t = 0; t < tasks; t++) task(a, chunks, t);")
    table.insert(out, "}")
    return table.concat(out, "\n") .. "\n"
end

-- The source of a GEMM epilogue (f32, cpu): g as for M.source, plus g.acc (the GEMM's result, a
-- tensor the group reads) and g.gemm_bias (true: the GEMM adds its bias in its own store, before
-- this runs; only said in a comment, which keeps the source, the kernels' cache key, distinct).
-- A wb_gemm_epilogue_fn (wb_kernels/generated.h): the driver calls it on each block of C it has
-- just stored (rows of an MC block times a run of column tiles, in L2), which it rewrites in place
-- row by row, each row's columns contiguous. Per row only the vector loop runs: the rows' input
-- pointers step by a constant stride when the output has one outer dimension (the 2-D case),
-- and the columns past the last whole vector (only the last run of a ragged N has any) are done
-- for all rows after it, so no call or spill between rows makes the compiler set the math's
-- constants up again for each row (measured under cachegrind: that, and the bias, made the
-- epilogue cost more instructions than the separate pointwise kernel).
function M.epilogue_source(g)
    local idx = {}
    for i, t in ipairs(g.inputs) do idx[t] = i end
    local lines = body_lines(g, idx, {}, {[g.acc] = "acc"}, "f32")
    local params, main, tail, fill, bufs = {"vf acc"}, {"v_load(o + j)"}, {"v_load(bacc)"}, {"bacc[k - j] = o[k];"},
        {"bacc[VEC] = {0}"}
    local steps, bases, stepped, offset = {}, {}, {}, {}
    for i = 1, #g.inputs do
        local p, b = "p" .. (i - 1), "b" .. (i - 1)
        params[#params + 1] = "vf v" .. (i - 1)
        main[#main + 1] = g.inner_broadcast[i] and string.format("v_set1(%s[0])", p) or string.format("v_load(%s + j)", p)
        tail[#tail + 1] = "v_load(" .. b .. ")"
        fill[#fill + 1] = string.format("%s[k - j] = %s[%s];", b, p, g.inner_broadcast[i] and "0" or "k")
        bufs[#bufs + 1] = b .. "[VEC] = {0}"
        local at = g.inner_broadcast[i] and "" or " + col0"
        steps[i] = string.format("s%d = a->stride[%d][0]", i - 1, i - 1)
        bases[i] = string.format("        const float *in%d = (const float *)a->in[%d] + row0 * s%d%s;", i - 1, i - 1,
            i - 1, at)
        stepped[i] = string.format("            const float *%s = in%d + i * s%d;", p, i - 1, i - 1)
        offset[i] = string.format("%%s    const float *%s = (const float *)a->in[%d] + wb_poi_offset(a, %d, row0 + i)%s;",
            p, i - 1, i - 1, at)
    end
    local function each(list, indent)
        local t = {}
        for i, l in ipairs(list) do t[i] = l:format(indent) end
        return t
    end
    local vector_loop = "for (int64_t j = 0; j < whole; j += VEC) v_store(o + j, body(" .. table.concat(main, ", ") .. "));"
    local out = {wb.codegen.prelude(), string.format("/* %s: %s%s */", g.symbol, g.ops,
        g.gemm_bias and " (the GEMM's store adds the bias first)" or ""),
        "static inline vf body(" .. table.concat(params, ", ") .. ") {", table.concat(lines, "\n"),
        "    return t" .. #g.nodes .. ";", "}", "",
        "void " .. g.symbol .. "(const void *ctx, float *c, int64_t ldc, int64_t row0, int64_t col0, int64_t rows, " ..
            "int64_t cols) {",
        "    const wb_poi_args *a = ctx;",
        "    const int64_t whole = cols / VEC * VEC;",
        "    (void)col0;",
        "    if (a->outer <= 1) {"}
    local function add(list) table.move(list, 1, #list, #out + 1, out) end
    if #g.inputs > 0 then out[#out + 1] = "        const int64_t " .. table.concat(steps, ", ") .. ";" end
    add(bases)
    add({"        for (int64_t i = 0; i < rows; i++) {", "            float *o = c + i * ldc;"})
    add(stepped)
    add({"            " .. vector_loop, "        }", "    } else {",
        "        for (int64_t i = 0; i < rows; i++) {", "            float *o = c + i * ldc;"})
    add(each(offset, "        "))
    add({"            " .. vector_loop, "        }", "    }",
        "    for (int64_t i = 0; whole < cols && i < rows; i++) { /* the tail through padded buffers: the same arithmetic */",
        "        float *o = c + i * ldc;"})
    add(each(offset, "    "))
    add({"        const int64_t j = whole;",
        "        float " .. table.concat(bufs, ", ") .. ", y[VEC];",
        "        for (int64_t k = j; k < cols; k++) { " .. table.concat(fill, " ") .. " }",
        "        v_store(y, body(" .. table.concat(tail, ", ") .. "));",
        "        for (int64_t k = j; k < cols; k++) o[k] = y[k - j];",
        "    }", "}"})
    return table.concat(out, "\n") .. "\n"
end

-- ---- CUDA C ----------------------------------------------------------------------------------------

-- The GELUs as CUDA C over float values (the math of the hand-written .cu kernels; no fast-math
-- intrinsics); the listed ops came with the op lists above.
CUDA.gelu = function(a) return "wb_gelu_erf(" .. a .. ")" end
CUDA.gelu_tanh = function(a) return "wb_gelu_tanh(" .. a .. ")" end

-- What every CUDA kernel starts with: no headers (NVRTC has none of the system's), the argument
-- struct laid out as the plugin ABI's wb_cuda_poi_args (asserted), the math, bf16 conversions.
local CUDA_PRELUDE = [[
typedef long long i64;
typedef unsigned short u16;
typedef unsigned int u32;
#define NAN __int_as_float(0x7fffffff)
#define INFINITY __int_as_float(0x7f800000)
/* = wb_cuda_poi_args (core/include/wb/abi/cuda.h) */
struct wb_cuda_poi_args {
    i64 rows, cols;
    int outer;
    i64 shape[8];
    i64 stride[5][8];
    const void *in[5];
    void *out;
    i64 parallel_min;
};
static_assert(sizeof(wb_cuda_poi_args) == 464, "wb_cuda_poi_args changed");
__device__ __forceinline__ float wb_gelu_tanh(float x) {
    float y = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * y));
}
__device__ __forceinline__ float wb_gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)); }
__device__ __forceinline__ float wb_bf16_f32(u16 h) { return __uint_as_float((u32)h << 16); }
__device__ __forceinline__ u16 wb_f32_bf16(float f) {
    u32 u = __float_as_uint(f);
    return (u & 0x7fffffffu) > 0x7f800000u ? (u16)((u >> 16) | 0x40u) : (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
]]

-- The CUDA C of one group's kernel (g as for M.source): one thread per output element in a
-- grid-stride loop; element e is row r = e / cols, column c; input i is read at its row offset
-- (the outer index unravelled against its strides, as wb_poi_offset does on the host) plus c, or
-- plus 0 when it is broadcast along cols.
function M.cuda_source(g)
    local idx = {}
    for i, t in ipairs(g.inputs) do idx[t] = i end
    local name_of = {}
    local function operand(v)
        if is_tensor(v) then return name_of[v] or ("v" .. (idx[v] - 1)) end
        return constant(v, g.dtype)
    end
    local T = g.dtype == "bf16" and "u16" or "float"
    local load = g.dtype == "bf16" and "wb_bf16_f32" or ""
    local n = #g.inputs
    local out = {CUDA_PRELUDE, string.format("/* %s: %s */", g.symbol, g.ops),
        string.format('extern "C" __global__ void %s(wb_cuda_poi_args a) {', g.symbol),
        "    const i64 n = a.rows * a.cols, step = (i64)gridDim.x * blockDim.x;",
        "    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {",
        "        i64 r = e / a.cols, c = e - r * a.cols, rem = r;"}
    local offs = {}
    for i = 1, n do offs[i] = "o" .. (i - 1) .. " = 0" end
    out[#out + 1] = "        i64 " .. table.concat(offs, ", ") .. ";"
    out[#out + 1] = "        for (int d = a.outer - 1; d >= 0; d--) {"
    out[#out + 1] = "            i64 q = rem % a.shape[d];"
    out[#out + 1] = "            rem /= a.shape[d];"
    for i = 1, n do
        out[#out + 1] = string.format("            o%d += q * a.stride[%d][d];", i - 1, i - 1)
    end
    out[#out + 1] = "        }"
    for i = 1, n do
        out[#out + 1] = string.format("        const float v%d = %s(((const %s *)a.in[%d])[o%d%s]);", i - 1, load, T,
            i - 1, i - 1, g.inner_broadcast[i] and "" or " + c")
    end
    for k, nd in ipairs(g.nodes) do
        local word = M.word(nd)
        local a = operand(nd.args[1])
        local e = ARITY[word] and CUDA[word](a, operand(nd.args[2])) or CUDA[word](a)
        out[#out + 1] = string.format("        const float t%d = %s; /* %s */", k, e, word)
        name_of[nd.out] = "t" .. k
    end
    out[#out + 1] = string.format("        ((%s *)a.out)[e] = %s(t%d);", T, g.dtype == "bf16" and "wb_f32_bf16" or "",
        #g.nodes)
    out[#out + 1] = "    }"
    out[#out + 1] = "}"
    return table.concat(out, "\n") .. "\n"
end

-- Fusion groups over the live nodes of a plan. uses: tensor -> number of uses (outputs count);
-- max_inputs: the most distinct tensor inputs a generated kernel takes (wb.codegen.max_inputs).
-- Returns the groups, each {nodes = {...} in plan order, root = node, inputs = {...}, limited =
-- {tensor = true}: the inputs whose producer would have joined but for max_inputs}.
--
-- A group grows from its last op backwards over every elementwise producer used only there. A
-- producer joins with all it can bring along (its own producers, recursively) when the group
-- stays within max_inputs; else alone when that fits; else not at all: its result is written
-- once and read once, and it roots a group of its own. So a chain of more inputs than a kernel
-- takes becomes several generated kernels, not eager ops.
function M.groups(live, uses, max_inputs)
    max_inputs = max_inputs or math.huge
    local group_of, groups = {}, {}
    local by_out = {}
    for _, nd in ipairs(live) do
        if not nd.inplace then by_out[nd.out] = nd end
    end
    for k = #live, 1, -1 do -- consumers first: a group grows from its last op backwards
        local nd = live[k]
        if M.word(nd) and not group_of[nd] then
            local g = {nodes = {}, root = nd, set = {}, limited = {}}
            local function joins(p) -- p may join: elementwise, used only here, not yet in a group
                return p and M.word(p) and not group_of[p] and not g.set[p] and uses[p.out] == 1 and p.seg == nd.seg
            end
            -- the distinct inputs of the group's nodes plus `extra` (a set of nodes)
            local function inputs_with(extra)
                local seen, n = {}, 0
                local function scan(m)
                    for i = 1, (ARITY[M.word(m)] or 1) do
                        local v = m.args[i]
                        local p = is_tensor(v) and by_out[v]
                        if is_tensor(v) and not (p and (g.set[p] or extra[p])) and not seen[v] then
                            seen[v] = true
                            n = n + 1
                        end
                    end
                end
                for m in pairs(g.set) do scan(m) end
                for m in pairs(extra) do scan(m) end
                return n
            end
            -- p and every producer that could join below it
            local function closure(p, into)
                into[p] = true
                for i = 1, (ARITY[M.word(p)] or 1) do
                    local v = p.args[i]
                    local q = is_tensor(v) and by_out[v]
                    if joins(q) and not into[q] then closure(q, into) end
                end
                return into
            end
            local function absorb(n)
                for i = 1, (ARITY[M.word(n)] or 1) do
                    local v = n.args[i]
                    local p = is_tensor(v) and by_out[v]
                    if joins(p) then
                        local all = closure(p, {})
                        if inputs_with(all) <= max_inputs then
                            for m in pairs(all) do g.set[m], group_of[m] = true, g end
                        elseif inputs_with({[p] = true}) <= max_inputs then
                            g.set[p], group_of[p] = true, g
                            absorb(p)
                        else
                            g.limited[v] = true
                        end
                    end
                end
            end
            g.set[nd] = true
            group_of[nd] = g
            absorb(nd)
            groups[#groups + 1] = g
        end
    end
    -- a group that consumes another's result keeps the root of the other as an input
    local out = {}
    for k = #groups, 1, -1 do -- in plan order
        local g = groups[k]
        for _, nd in ipairs(live) do if g.set[nd] then g.nodes[#g.nodes + 1] = nd end end
        local seen, inputs = {}, {}
        for _, nd in ipairs(g.nodes) do
            for i = 1, (ARITY[M.word(nd)] or 1) do
                local v = nd.args[i]
                if is_tensor(v) and not (by_out[v] and g.set[by_out[v]]) and not seen[v] then
                    seen[v] = true
                    inputs[#inputs + 1] = v
                end
            end
        end
        g.inputs = inputs
        out[#out + 1] = g
    end
    return out
end

return M
