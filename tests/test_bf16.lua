-- test_bf16.lua: bf16 end to end on the cpu. Conversion is exact on the rounding cases; every
-- kernel computes in f32 and rounds once (so a bf16 op equals the f32 op on the widened inputs,
-- rounded: bit for bit); GEMMs against a double reference from the same bf16 inputs; the MLP
-- modes in bf16 against the f32 MLP with the same weights; mixed dtypes refused.
local lu = require("luaunit")
local B = require("bounds")

local function raises(pattern, fn)
    local ok, err = pcall(fn)
    lu.assertFalse(ok, "expected an error containing: " .. pattern)
    lu.assertStrContains(tostring(err), pattern)
end

-- WB_CPU_BF16 forces the bf16 GEMM path (avx512bf16, avx2bf16, emulated, widen); one this CPU
-- cannot run is skipped (exit 77), as for WB_CPU_ISA. Unset: "auto" (by rows).
local want = os.getenv("WB_CPU_BF16")
if want and want ~= "" and wb.cpu_bf16() ~= want then
    print("WB_CPU_BF16=" .. want .. " is not supported by this CPU (bf16 path: " .. wb.cpu_bf16() .. "): skipped")
    os.exit(77)
end
-- The widening path runs the f32 kernels on the widened operands, so its GEMMs equal the f32
-- ones rounded, bit for bit; the k-pair paths (and "auto", which uses one for few rows) sum in
-- another order (pairs first).
local PAIRS = wb.cpu_bf16() ~= "widen"
print("bf16 GEMM path: " .. wb.cpu_bf16())

local function widen(t) return t:to{dtype = "f32"} end
local function round(t) return t:to{dtype = "bf16"} end



TestBf16Storage = {}

function TestBf16Storage:test_round_to_nearest_even()
    local cases = {
        {1.0, 1.0}, {1.00390625, 1.0},                     -- a tie (1 + 2^-8) goes to even (1.0)
        {1.01171875, 1.015625},                            -- a tie (1 + 3*2^-8) goes to even mantissa 2
        {1.0039063692092896, 1.0078125},                   -- just above the tie rounds up
        {1.0039061307907104, 1.0},                         -- just below rounds down
        {-1.01171875, -1.015625}, {0.0, 0.0},
        {3.0e38, 0x1.c4p+127}, {1e-40, 0x1p-133},          -- large and subnormal values
        {math.huge, math.huge}, {-math.huge, -math.huge},
        {3.4028234663852886e38, math.huge},                -- FLT_MAX rounds past the largest bf16
    }
    for _, c in ipairs(cases) do
        local got = wb.tensor({c[1]}, {dtype = "bf16"}):tolist()[1]
        lu.assertEquals(got, c[2], "bf16(" .. c[1] .. ")")
    end
    local nan = wb.tensor({0 / 0}, {dtype = "bf16"}):tolist()[1]
    lu.assertTrue(nan ~= nan, "NaN stays NaN")
    -- f32 -> bf16 -> f32 through to{} and through copy_
    local x = wb.tensor({1.00390625, 1.01171875, -2.5})
    lu.assertEquals(x:to{dtype = "bf16"}:to{dtype = "f32"}:tolist(), {1.0, 1.015625, -2.5})
    local b = wb.zeros({3}, {dtype = "bf16"})
    b:copy_(x)
    lu.assertEquals(b:tolist(), {1.0, 1.015625, -2.5})
    lu.assertEquals(b.dtype, "bf16")
    lu.assertStrContains(tostring(b), "dtype=bf16")
end

function TestBf16Storage:test_views_and_copies()
    local a = wb.arange(12, {dtype = "bf16"}):view({3, 4})
    lu.assertEquals(a:t():contiguous():tolist()[2], {1, 5, 9})
    lu.assertEquals(a:narrow(2, 2, 2):clone():tolist(), {{1, 2}, {5, 6}, {9, 10}})
    a:select(1, 2):fill_(0.1)
    lu.assertEquals(a:tolist()[2][1], 0x1.9ap-4) -- 0.1 rounded to bf16
    lu.assertEquals(a:storage_offset(), 0)
    lu.assertEquals(wb.randn({5}, {dtype = "bf16"}).dtype, "bf16")
    -- the same seed gives the f32 numbers rounded
    wb.manual_seed(3)
    local f = wb.randn({64})
    wb.manual_seed(3)
    local h = wb.randn({64}, {dtype = "bf16"})
    lu.assertEquals(h:tolist(), f:to{dtype = "bf16"}:tolist())
end

TestBf16Kernels = {}

-- a bf16 op == round(f32 op(widened inputs)), bit for bit
local function same_as_rounded_f32(out16, ref32, what)
    lu.assertEquals(out16.dtype, "bf16", what)
    lu.assertEquals(wb.max_abs_diff(out16, round(ref32)), 0, what)
end

-- GEMMs: bit for bit on the widening path (the same f32 kernel, rounded once: exact on purpose);
-- on a k-pair path (another summation order), within the bound z of the exact result (f32
-- sums of the bf16 inputs, then the bf16 store), as the f32 kernel rounded is too
local function gemm_matches(out16, ref32, z, what)
    if not PAIRS then return same_as_rounded_f32(out16, ref32, what) end
    lu.assertEquals(out16.dtype, "bf16", what)
    B.assert_within_bound(out16, z, what)
    B.assert_within_bound(round(ref32), z, what .. " (the f32 kernel, rounded)")
end

-- x w^T (+ b) of bf16 tensors, then act, stored as bf16: exact value and bound
local function lin16(x, w, b, act)
    local z = B.linear(B.input(x), B.input(w), b and B.input(b) or nil)
    return B.round(act and B.act(act, z) or z, "bf16")
end

function TestBf16Kernels:test_pointwise_round_once()
    wb.manual_seed(21)
    for _, shape in ipairs({{5}, {3, 1029}, {300, 700}}) do -- small, a partial chunk, threaded
        local a, b = round(wb.randn(shape)), round(wb.randn(shape))
        local a32, b32 = widen(a), widen(b)
        same_as_rounded_f32(a + b, a32 + b32, "add")
        same_as_rounded_f32(a - b, a32 - b32, "sub")
        same_as_rounded_f32(a * b, a32 * b32, "mul")
        same_as_rounded_f32(a / b, a32 / b32, "div")
        same_as_rounded_f32(-a, -a32, "neg")
        same_as_rounded_f32(wb.gelu(a), wb.gelu(a32), "gelu erf")
        same_as_rounded_f32(wb.gelu(a, {approximate = "tanh"}), wb.gelu(a32, {approximate = "tanh"}), "gelu tanh")
        same_as_rounded_f32(wb.geglu(a, b), wb.geglu(a32, b32), "geglu")
    end
    -- broadcasting and strided inputs take the gathering path
    local m, v = round(wb.randn({7, 9})), round(wb.randn({9}))
    same_as_rounded_f32(m + v, widen(m) + widen(v), "broadcast add")
    same_as_rounded_f32(m:t() * 2, widen(m):t() * 2, "strided mul by a scalar")
    same_as_rounded_f32(wb.gelu(m:t()), wb.gelu(widen(m):t()), "strided gelu")
    -- IEEE cases survive the round trip
    local s = wb.tensor({1, -1, 0}, {dtype = "bf16"}) / wb.tensor({0, 0, 0}, {dtype = "bf16"})
    local r = s:tolist()
    lu.assertEquals(r[1], math.huge)
    lu.assertEquals(r[2], -math.huge)
    lu.assertTrue(r[3] ~= r[3])
end

function TestBf16Kernels:test_gemm_against_double_reference_all_layouts()
    wb.manual_seed(22)
    for _, s in ipairs({{1, 17, 31}, {33, 65, 129}, {17, 3, 64}, {40, 97, 33}}) do -- 97: a prime K
        local m, k, n = s[1], s[2], s[3]
        local a, b = round(wb.randn({m, k})), round(wb.randn({k, n}))
        local at, bt = a:t():contiguous():t(), b:t():contiguous():t() -- same values, transposed storage
        for _, pair in ipairs({{a, b, "nn"}, {a, bt, "tn"}, {at, b, "nt"}, {at, bt, "tt"}}) do
            local out = wb.matmul(pair[1], pair[2])
            lu.assertEquals(out.dtype, "bf16")
            local what = string.format("%s %dx%dx%d", pair[3], m, k, n)
            local z = lin16(a, b:t())
            B.assert_within_bound(out, z, what)
            -- and bit for bit the f32 kernel on the widened operands, rounded once
            gemm_matches(out, wb.matmul(widen(pair[1]), widen(pair[2])), z, what)
        end
        local bias = round(wb.randn({n}))
        local w = b:t() -- [n, k] weight view: the linear's tn case
        local y = wb.linear(a, w, bias)
        B.assert_within_bound(y, lin16(a, w, bias), "linear bias")
        gemm_matches(y, wb.linear(widen(a), widen(w), widen(bias)), lin16(a, w, bias), "linear bias")
        for _, act in ipairs({"gelu", "gelu_tanh"}) do
            gemm_matches(wb.linear(a, w, bias, {activation = act}),
                wb.linear(widen(a), widen(w), widen(bias), {activation = act}), lin16(a, w, bias, act), "linear " .. act)
        end
        -- the dual GEMM (one bf16 store) and its composition (the two products stored as bf16
        -- before the geglu): each within its own bound of the same exact value
        local wg, wu = round(wb.randn({n, k})), round(wb.randn({n, k}))
        local function lin32(x, w_, b_) return B.linear(B.input(x), B.input(w_), B.input(b_)) end
        local dual_z = B.round(B.mul(B.act("gelu_tanh", lin32(a, wg, bias)), lin32(a, wu, bias)), "bf16")
        gemm_matches(wb.geglu_linear(a, wg, wu, bias, bias),
            wb.geglu_linear(widen(a), widen(wg), widen(wu), widen(bias), widen(bias)), dual_z, "dual")
        local composed = wb.geglu(wb.linear(a, wg, bias), wb.linear(a, wu, bias))
        B.assert_within_bound(composed, B.round(B.mul(B.act("gelu_tanh", lin16(a, wg, bias)), lin16(a, wu, bias)),
            "bf16"), "dual's composition")
    end
end

function TestBf16Kernels:test_packed_weights_follow_writes()
    local x, w = round(wb.randn({4, 32})), round(wb.randn({16, 32}))
    local y1 = wb.linear(x, w)
    w:fill_(0.5) -- a write to the bf16 weight must re-pack it
    local y2 = wb.linear(x, w)
    gemm_matches(y2, wb.linear(widen(x), widen(w)), lin16(x, w), "after write")
    lu.assertTrue(wb.max_abs_diff(y1, y2) > 0)
end

function TestBf16Kernels:test_mlp_modes_against_f32()
    for _, impl in ipairs({"eager", "fused", "dual"}) do
        wb.manual_seed(23)
        local m16 = wb.nn.GeGLUMLP(64, 192, {impl = impl, dtype = "bf16", bias = true})
        wb.manual_seed(23)
        local m32 = wb.nn.GeGLUMLP(64, 192, {impl = impl, bias = true})
        lu.assertEquals(m16.gate_proj.weight.dtype, "bf16")
        lu.assertEquals(wb.max_abs_diff(widen(m16.gate_proj.weight), widen(round(m32.gate_proj.weight))), 0)
        -- both against the f32 model's exact forward: the f32 one within its bound, the bf16 one
        -- within the bound that counts rounding x and the weights to bf16 and every bf16 store
        local x = wb.randn({9, 64})
        B.assert_within_bound(m32(x), B.mlp(m32, x), impl .. " f32")
        B.assert_within_bound(m16(round(x)), B.mlp(m32, x, {bf16 = true, inputs_rounded = true}), impl .. " bf16")
        local x16 = round(x)
        local p = wb.profiler.profile({activities = {"cpu", "device"}})
        p:start()
        wb.profiler.range("fwd", function() m16(x16) end)
        p:stop()
        p:expect{range = "fwd", kernels = ({eager = 5, fused = 4, dual = 2})[impl]}
        local g = wb.graph.capture(function() return m16(x16) end)
        lu.assertEquals(wb.max_abs_diff(g.outputs[1], m16(x16)), 0)
        x16:copy_(round(wb.randn({9, 64})))
        g:replay()
        lu.assertEquals(wb.max_abs_diff(g.outputs[1], m16(x16)), 0)
    end
end

-- "auto": the pair path (half the weight bytes) for up to 6 rows; above, pairs only where the
-- pair instruction multiplies faster than f32 FMAs, else the f32 kernels on widened operands.
-- The kernel's isa field says which ran.
function TestBf16Kernels:test_auto_picks_by_rows_and_measured_rate()
    if wb.cpu_bf16() ~= "auto" then return end
    local speed = wb.cpu_bf16_pair_speed()
    lu.assertTrue(type(speed) == "number" and speed >= 0)
    local w = round(wb.randn({96, 64}))
    local function isa_of(rows)
        local x = round(wb.randn({rows, 64}))
        local p = wb.profiler.profile({activities = {"cpu", "device"}}, function() wb.linear(x, w) end)
        for _, e in ipairs(p:events()) do if e.cat == "kernel" then return e.args.isa end end
    end
    local f32 = wb.cpu_isa()
    for _, rows in ipairs({1, 6}) do
        lu.assertStrContains(isa_of(rows), "bf16", "pairs at " .. rows .. " rows")
    end
    for _, rows in ipairs({7, 64}) do
        if speed > 1.1 then
            lu.assertStrContains(isa_of(rows), "bf16", "pairs outrun FMAs here: pairs at " .. rows .. " rows")
        else
            lu.assertEquals(isa_of(rows), f32, "widened onto the f32 kernels at " .. rows .. " rows")
        end
    end
    -- an AVX2 path stands for an AVX2 CPU: no vdpbf16ps, so no rate to measure
    if pcall(wb.cpu_isa, "avx2") then
        lu.assertEquals(wb.cpu_bf16_pair_speed(), 0)
        lu.assertEquals(isa_of(1), "avx2bf16")
        lu.assertEquals(isa_of(64), "avx2")
        wb.cpu_isa(f32)
    end
end

function TestBf16Kernels:test_mixed_dtypes_refused()
    local h, f = wb.ones({2, 2}, {dtype = "bf16"}), wb.ones({2, 2})
    raises("add: dtypes bf16 and f32 differ", function() return h + f end)
    raises("geglu: mixed dtypes bf16 and f32", function() return wb.geglu(h, f) end)
    raises("mixed dtypes f32 and bf16", function() return wb.matmul(f, h) end)
    raises("geglu_linear: mixed dtypes bf16 and f32", function() return wb.geglu_linear(h, f, f) end)
    raises("linear: mixed dtypes: input bf16, weight f32, bias f32", function() return wb.nn.Linear(2, 2)(h) end)
end

os.exit(lu.LuaUnit.run())
