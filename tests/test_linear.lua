-- test_linear.lua: matmul, addmm, linear, geglu_linear, gelu and geglu through the Lua API
-- against double-precision references computed here. CTest runs this file once per CPU path
-- (WB_CPU_ISA=scalar, avx2, avx512); a path this CPU cannot run exits 77 (skipped).
local lu = require("luaunit")

local want_isa = os.getenv("WB_CPU_ISA")
if want_isa and want_isa ~= "" and wb.cpu_isa() ~= want_isa then
    print("WB_CPU_ISA=" .. want_isa .. " is not supported by this CPU (running " .. wb.cpu_isa() .. "): skipped")
    os.exit(77)
end

local function rows(x) return x:contiguous():tolist() end

-- C[i][j] = sum_p A[i][p] * B[p][j] in Lua doubles
local function ref_matmul(a, b)
    local A, B = rows(a), rows(b)
    local m, k, n = #A, #B, #B[1]
    local C = {}
    for i = 1, m do
        local row = {}
        for j = 1, n do
            local s = 0
            for p = 1, k do s = s + A[i][p] * B[p][j] end
            row[j] = s
        end
        C[i] = row
    end
    return C
end

local function gelu_tanh(x)
    local y = math.sqrt(2 / math.pi) * (x + 0.044715 * x ^ 3)
    return x / (1 + math.exp(-2 * y))
end

local function erfc(x) -- Lua has no erfc: a series/continued fraction good to 1e-13 is overkill;
    -- use the relation with the regularised gamma via numerical integration of exp(-t^2)
    local z = math.abs(x)
    local t = 1 / (1 + 0.5 * z)
    local r = t * math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
        t * (-0.82215223 + t * 0.17087277)))))))))
    return x >= 0 and r or 2 - r
end

local function gelu_erf(x) return 0.5 * x * erfc(-x / math.sqrt(2)) end

local function assert_close(got, want, tol, what)
    local g = type(got) == "table" and got or rows(got)
    for i = 1, #want do
        for j = 1, #want[i] do
            local d = math.abs(g[i][j] - want[i][j])
            if not (d <= tol * (1 + math.abs(want[i][j]))) then
                lu.fail(string.format("%s: [%d][%d] = %.9g, expected %.9g", what, i, j, g[i][j], want[i][j]))
            end
        end
    end
end

TestGemm = {}

function TestGemm:test_layouts_and_awkward_sizes()
    wb.manual_seed(21)
    for _, m in ipairs({1, 3, 17, 33}) do
        for _, n in ipairs({1, 17, 65}) do
            local k = 37
            local a, b = wb.randn({m, k}), wb.randn({k, n})
            local at, bt = wb.randn({k, m}), wb.randn({n, k}) -- stored transposed
            local want = ref_matmul(a, b)
            assert_close(wb.matmul(a, b), want, 1e-5, "nn")
            assert_close(wb.matmul(a, bt:t()), ref_matmul(a, bt:t()), 1e-5, "tn")
            assert_close(wb.matmul(at:t(), b), ref_matmul(at:t(), b), 1e-5, "nt")
            assert_close(wb.matmul(at:t(), bt:t()), ref_matmul(at:t(), bt:t()), 1e-5, "tt")
        end
    end
end

function TestGemm:test_strided_operands_and_3d()
    wb.manual_seed(22)
    local big = wb.randn({40, 50})
    local a = big:narrow(1, 3, 17):narrow(2, 5, 31) -- row stride 50
    local b = wb.randn({31, 9})
    assert_close(wb.matmul(a, b), ref_matmul(a, b), 1e-5, "strided")
    local x = wb.randn({2, 5, 31})
    local y = wb.matmul(x, b)
    lu.assertEquals(y.shape, {2, 5, 9})
    assert_close(y:select(1, 2), ref_matmul(x:select(1, 2), b), 1e-5, "3-D batch 2")
    local xt = wb.randn({5, 2, 31}):transpose(1, 2) -- not foldable: matmul copies it first
    assert_close(wb.matmul(xt, b):select(1, 1), ref_matmul(xt:select(1, 1), b), 1e-5, "3-D non-contiguous")
end

function TestGemm:test_addmm_bias_in_epilogue()
    wb.manual_seed(23)
    local a, b, bias = wb.randn({7, 13}), wb.randn({13, 19}), wb.randn({19})
    local want = ref_matmul(a, b)
    local bl = bias:tolist()
    for i = 1, 7 do for j = 1, 19 do want[i][j] = want[i][j] + bl[j] end end
    assert_close(wb.addmm(bias, a, b), want, 1e-5, "addmm")
    assert_close(wb.addmm(bias:view({1, 19}), a, b), want, 1e-5, "addmm bias {1, N}")
    local sb = wb.randn({19, 2}):select(2, 1) -- strided bias
    local want2 = ref_matmul(a, b)
    local sl = sb:tolist()
    for i = 1, 7 do for j = 1, 19 do want2[i][j] = want2[i][j] + sl[j] end end
    assert_close(wb.addmm(sb, a, b), want2, 1e-5, "addmm strided bias")
end

function TestGemm:test_zero_sizes()
    lu.assertEquals(wb.matmul(wb.zeros({0, 3}), wb.zeros({3, 4})).shape, {0, 4})
    lu.assertEquals(wb.matmul(wb.ones({2, 0}), wb.ones({0, 3})):tolist(), {{0, 0, 0}, {0, 0, 0}})
    lu.assertEquals(wb.addmm(wb.ones({3}), wb.ones({2, 0}), wb.ones({0, 3})):tolist(), {{1, 1, 1}, {1, 1, 1}})
end

function TestGemm:test_threads_give_identical_results()
    wb.manual_seed(24)
    local x, w, b = wb.randn({64, 300}), wb.randn({500, 300}), wb.randn({500})
    local n = wb.get_num_threads()
    wb.set_num_threads(1)
    local one = wb.linear(x, w, b, {activation = "gelu_tanh"})
    wb.set_num_threads(2)
    local two = wb.linear(x, w, b, {activation = "gelu_tanh"})
    wb.set_num_threads(n)
    lu.assertEquals(wb.max_abs_diff(one, two), 0)
end

function TestGemm:test_nan_and_inf_propagate()
    local a = wb.tensor({{1, 0 / 0}, {1, 1}, {math.huge, 1}})
    local y = wb.matmul(a, wb.ones({2, 2})):tolist()
    lu.assertNotEquals(y[1][1], y[1][1])
    lu.assertEquals(y[2][1], 2)
    lu.assertEquals(y[3][2], math.huge)
    local z = wb.matmul(wb.tensor({{math.huge, -math.huge}}), wb.ones({2, 1})):item()
    lu.assertNotEquals(z, z) -- inf - inf
end

TestLinear = {}

function TestLinear:test_linear_matches_reference()
    wb.manual_seed(25)
    local x, w, b = wb.randn({5, 33}), wb.randn({17, 33}), wb.randn({17})
    local want = ref_matmul(x, w:t())
    local bl = b:tolist()
    for i = 1, 5 do for j = 1, 17 do want[i][j] = want[i][j] + bl[j] end end
    assert_close(wb.linear(x, w, b), want, 1e-5, "linear")
    local wt, we = {}, {}
    for i = 1, 5 do
        wt[i], we[i] = {}, {}
        for j = 1, 17 do wt[i][j], we[i][j] = gelu_tanh(want[i][j]), gelu_erf(want[i][j]) end
    end
    assert_close(wb.linear(x, w, b, {activation = "gelu_tanh"}), wt, 1e-5, "linear gelu_tanh")
    assert_close(wb.linear(x, w, b, {activation = "gelu"}), we, 1e-5, "linear gelu (erf)")
    assert_close(wb.linear(x, w, {activation = "none"}), ref_matmul(x, w:t()), 1e-5, "linear no bias")
    -- an explicit nil bias with options after it: the options still count
    local ng = ref_matmul(x, w:t())
    for i = 1, 5 do for j = 1, 17 do ng[i][j] = gelu_erf(ng[i][j]) end end
    assert_close(wb.linear(x, w, nil, {activation = "gelu"}), ng, 1e-5, "linear nil bias, gelu")
    local x3 = wb.randn({2, 3, 33})
    local y3 = wb.linear(x3, w, b)
    lu.assertEquals(y3.shape, {2, 3, 17})
    lu.assertEquals(wb.max_abs_diff(y3:select(1, 2), wb.linear(x3:select(1, 2), w, b)), 0)
    lu.assertEquals(wb.linear(wb.randn({33}), w, b).shape, {17})
end

function TestLinear:test_packed_weights_follow_writes()
    wb.manual_seed(26)
    local x, w = wb.randn({4, 40}), wb.randn({30, 40})
    local y1 = wb.linear(x, w)
    w:copy_(w * 2) -- through copy_
    assert_close(wb.linear(x, w), rows(y1 * 2), 1e-6, "after copy_")
    w:narrow(1, 1, 10):fill_(0) -- through a view of the weight
    local y3 = rows(wb.linear(x, w))
    for i = 1, 4 do for j = 1, 10 do lu.assertEquals(y3[i][j], 0) end end
    -- a new weight at a reused address must not see the old packing
    for _ = 1, 5 do
        local w2 = wb.randn({30, 40})
        assert_close(wb.linear(x, w2), ref_matmul(x, w2:t()), 1e-5, "fresh weight")
        w2:release()
    end
end

function TestLinear:test_geglu_linear_equals_composition()
    wb.manual_seed(27)
    for _, s in ipairs({{1, 31, 17}, {16, 64, 96}, {33, 129, 65}, {3, 1100, 40}}) do
        local m, k, h = s[1], s[2], s[3]
        local x, wg, wu = wb.randn({m, k}), wb.randn({h, k}) * 0.2, wb.randn({h, k}) * 0.2
        local fused = wb.geglu_linear(x, wg, wu)
        local composed = wb.geglu(wb.linear(x, wg), wb.linear(x, wu))
        local g, u = ref_matmul(x, wg:t()), ref_matmul(x, wu:t())
        local want = {}
        for i = 1, m do
            want[i] = {}
            for j = 1, h do want[i][j] = gelu_tanh(g[i][j]) * u[i][j] end
        end
        assert_close(fused, want, 2e-5, "geglu_linear")
        lu.assertTrue(wb.rel_error(fused, composed) < 1e-5)
    end
    local x3 = wb.randn({2, 4, 31})
    lu.assertEquals(wb.geglu_linear(x3, wb.randn({8, 31}), wb.randn({8, 31})).shape, {2, 4, 8})
end

TestActivations = {}

function TestActivations:test_gelu_forms()
    local xs = {}
    for i = 0, 200 do xs[#xs + 1] = -12 + 24 * i / 200 end
    local x = wb.tensor(xs)
    xs = x:tolist() -- the reference must see the float-rounded inputs
    local t, e = wb.gelu(x, {approximate = "tanh"}):tolist(), wb.gelu(x):tolist()
    for i, v in ipairs(xs) do
        local wt, we = gelu_tanh(v), gelu_erf(v)
        lu.assertTrue(math.abs(t[i] - wt) <= 1e-6 * math.abs(wt) + 1e-30, "tanh at " .. v)
        lu.assertTrue(math.abs(e[i] - we) <= 1e-6 * math.abs(we) + 1e-30, "erf at " .. v)
    end
    -- the two forms differ by up to ~4.7e-4: each matches its own formula, not the other's
    local d = wb.max_abs_diff(wb.gelu(x, {approximate = "tanh"}), wb.gelu(x))
    lu.assertTrue(d > 1e-4 and d < 1e-3)
    -- strided input and the fused geglu
    local m = wb.randn({6, 10})
    lu.assertEquals(wb.max_abs_diff(wb.gelu(m:t()), wb.gelu(m:t():contiguous())), 0)
    lu.assertEquals(wb.max_abs_diff(wb.geglu(m, m), wb.gelu(m, {approximate = "tanh"}) * m), 0)
    lu.assertEquals(wb.max_abs_diff(wb.geglu(m:t(), m:t()), wb.geglu(m, m):t()), 0)
end

function TestActivations:test_specials()
    local y = wb.gelu(wb.tensor({0 / 0, math.huge, 0, 30, -30}), {approximate = "tanh"}):tolist()
    lu.assertNotEquals(y[1], y[1])
    lu.assertEquals(y[2], math.huge)
    lu.assertEquals(y[3], 0)
    lu.assertEquals(y[4], 30)
    lu.assertEquals(y[5], 0)
end

TestBadInput = {}

function TestBadInput:test_messages()
    local function raises(frag, fn) lu.assertErrorMsgContains(frag, fn) end
    raises("matmul: shapes {2, 3} and {4, 5} cannot be multiplied (3 columns vs 4 rows)",
        function() return wb.matmul(wb.zeros({2, 3}), wb.zeros({4, 5})) end)
    raises("matmul: supports 2-D x 2-D and 3-D x 2-D, got shapes {3} and {3, 2}",
        function() return wb.matmul(wb.zeros({3}), wb.zeros({3, 2})) end)
    raises("linear: input has 32 features but weight expects 64",
        function() return wb.linear(wb.zeros({4, 32}), wb.zeros({10, 64})) end)
    raises("linear: bias has shape {9} but the weight has 10 output features",
        function() return wb.linear(wb.zeros({4, 64}), wb.zeros({10, 64}), wb.zeros({9})) end)
    raises("linear: weight must be 2-D [out_features, in_features], got shape {10, 64, 1}",
        function() return wb.linear(wb.zeros({4, 64}), wb.zeros({10, 64, 1})) end)
    raises("addmm: bias of shape {5} does not fit the 4 output columns",
        function() return wb.addmm(wb.zeros({5}), wb.zeros({2, 3}), wb.zeros({3, 4})) end)
    raises("geglu_linear: w_gate is {8, 16} but w_up is {8, 15}",
        function() return wb.geglu_linear(wb.zeros({2, 16}), wb.zeros({8, 16}), wb.zeros({8, 15})) end)
    raises("geglu_linear: input has 12 features but the weights expect 16",
        function() return wb.geglu_linear(wb.zeros({2, 12}), wb.zeros({8, 16}), wb.zeros({8, 16})) end)
    raises("geglu: gate {2, 3} and up {3, 2} must have the same shape",
        function() return wb.geglu(wb.zeros({2, 3}), wb.zeros({3, 2})) end)
    raises("linear: unknown activation 'relu'",
        function() return wb.linear(wb.zeros({1, 2}), wb.zeros({2, 2}), {activation = "relu"}) end)
    raises("gelu: approximate must be \"tanh\" or \"none\", got fast",
        function() return wb.gelu(wb.zeros({2}), {approximate = "fast"}) end)
    raises("cpu isa 'neon' is not available", function() return wb.cpu_isa("neon") end)
end

os.exit(lu.LuaUnit.run())
