-- test_linear.lua: matmul, addmm, linear, geglu_linear, gelu and geglu through the Lua API
-- against double-precision references computed here. CTest runs this file once per CPU path
-- (WB_CPU_ISA=scalar, avx2, avx512); a path this CPU cannot run exits 77 (skipped).
local lu = require("luaunit")

local want_isa = os.getenv("WB_CPU_ISA")
if want_isa and want_isa ~= "" and wb.cpu_isa() ~= want_isa then
    print("WB_CPU_ISA=" .. want_isa .. " is not supported by this CPU (running " .. wb.cpu_isa() .. "): skipped")
    os.exit(77)
end

local B = require("bounds")
local within = B.assert_within_bound

local function rows(x) return x:contiguous():tolist() end

-- a @ b (b {k, n}) and x w^T + b in double, with their f32 forward error bounds
local function mm(a, b) return B.linear(B.input(a), B.input(b:t())) end
local function lin(x, w, b, act)
    local z = B.linear(B.input(x), B.input(w), b and B.input(b) or nil)
    return act and B.act(act, z) or z
end

TestGemm = {}

function TestGemm:test_layouts_and_awkward_sizes()
    wb.manual_seed(21)
    for _, m in ipairs({1, 3, 17, 33}) do
        for _, n in ipairs({1, 17, 65}) do
            local k = 37
            local a, b = wb.randn({m, k}), wb.randn({k, n})
            local at, bt = wb.randn({k, m}), wb.randn({n, k}) -- stored transposed
            within(wb.matmul(a, b), mm(a, b), "nn")
            within(wb.matmul(a, bt:t()), mm(a, bt:t()), "tn")
            within(wb.matmul(at:t(), b), mm(at:t(), b), "nt")
            within(wb.matmul(at:t(), bt:t()), mm(at:t(), bt:t()), "tt")
        end
    end
end

function TestGemm:test_strided_operands_and_3d()
    wb.manual_seed(22)
    local big = wb.randn({40, 50})
    local a = big:narrow(1, 3, 17):narrow(2, 5, 31) -- row stride 50
    local b = wb.randn({31, 9})
    within(wb.matmul(a, b), mm(a, b), "strided")
    local x = wb.randn({2, 5, 31})
    local y = wb.matmul(x, b)
    lu.assertEquals(y.shape, {2, 5, 9})
    within(y:select(1, 2), mm(x:select(1, 2), b), "3-D batch 2")
    local xt = wb.randn({5, 2, 31}):transpose(1, 2) -- not foldable: matmul copies it first
    within(wb.matmul(xt, b):select(1, 1), mm(xt:select(1, 1), b), "3-D non-contiguous")
end

function TestGemm:test_addmm_bias_in_epilogue()
    wb.manual_seed(23)
    local a, b, bias = wb.randn({7, 13}), wb.randn({13, 19}), wb.randn({19})
    local want = lin(a, b:t(), bias)
    within(wb.addmm(bias, a, b), want, "addmm")
    within(wb.addmm(bias:view({1, 19}), a, b), want, "addmm bias {1, N}")
    local sb = wb.randn({19, 2}):select(2, 1) -- strided bias
    within(wb.addmm(sb, a, b), lin(a, b:t(), sb), "addmm strided bias")
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

-- The opt-in phase counts (wb._gemm_phases, printed by experiments/gemm_anatomy.lua): off, a GEMM
-- counts nothing; on, each GEMM counts one run; B is packed by a matmul and not by a linear (its
-- weights packed once, before); the phases fit in the threads' total, which fits in the team's wall time;
-- the register tile alone gives a positive rate; bad arguments are named. A and B are column-major
-- views, which every path packs up front; a row-major A, where the path packs by the first pass
-- (wb.cpu_blocking().first_pass_packs), counts no packing of A unless more than 32 slivers pass over it.
function TestGemm:test_phase_counts()
    local a, b, w = wb.randn({200, 150}):t(), wb.randn({300, 200}):t(), wb.randn({300, 200})
    local before = wb._gemm_phases(false)
    local _ = wb.matmul(a, b)
    lu.assertEquals(wb._gemm_phases(), before, "counted while off")
    local prev = wb.get_num_threads()
    for _, threads in ipairs({1, 2}) do
        wb.set_num_threads(threads)
        lu.assertEquals(wb._gemm_phases(true).runs, 0, "on zeroes the counts")
        for _ = 1, 3 do _ = wb.matmul(a, b) end
        local ph = wb._gemm_phases(false)
        lu.assertEquals(ph.runs, 3)
        for _, k in ipairs({"pack_a_ns", "pack_b_ns", "tiles_ns", "wall_ns"}) do
            lu.assertTrue(ph[k] > 0, k .. " on " .. threads .. " threads")
        end
        lu.assertTrue(ph.pack_a_ns + ph.pack_b_ns + ph.tiles_ns + ph.epilogue_ns <= ph.total_ns)
        -- a thread's CPU time never passes the wall time it was held for (1 us of clock slack a run)
        lu.assertTrue(ph.total_ns <= ph.wall_team_ns + 3 * 1000 * threads, string.format("%d > %d", ph.total_ns,
            ph.wall_team_ns))
        lu.assertTrue(ph.wall_ns <= ph.wall_team_ns)
        _ = wb.linear(wb.randn({64, 200}), w) -- its weights packed at the first call, outside the GEMM
        wb._gemm_phases(true)
        _ = wb.linear(wb.randn({64, 200}), w)
        ph = wb._gemm_phases(false)
        lu.assertEquals(ph.runs, 1)
        lu.assertEquals(ph.pack_b_ns, 0, "a linear's weights were packed once")
        wb._gemm_phases(true)
        _ = wb.matmul(wb.randn({150, 200}), wb.randn({200, 300}))
        ph = wb._gemm_phases(false)
        lu.assertEquals(ph.pack_a_ns == 0, wb.cpu_blocking().first_pass_packs, "pack_a_ns of a row-major A")
        if threads == 1 then -- 33 slivers of B: A packed up front where a column block holds them all
            local bl = wb.cpu_blocking()
            wb._gemm_phases(true)
            _ = wb.matmul(wb.randn({150, 200}), wb.randn({200, 33 * bl.nr}))
            ph = wb._gemm_phases(false)
            lu.assertEquals(ph.pack_a_ns == 0, bl.first_pass_packs and bl.nc // bl.nr <= 32,
                "pack_a_ns of a row-major A under 33 slivers, nc " .. bl.nc)
        end
    end
    wb.set_num_threads(prev)
    lu.assertTrue(wb._gemm_tile_gflops(64, 100) > 0)
    -- a dual tile through its activation: the same multiply-adds and the activation's work on top
    for _, store in ipairs({"plain", "geglu", "swiglu"}) do
        lu.assertTrue(wb._gemm_tile_gflops(64, 100, store) > 0, store)
    end
    lu.assertErrorMsgContains('_gemm_tile_gflops: store must be "plain", "geglu" or "swiglu", got "relu"',
        wb._gemm_tile_gflops, 64, 100, "relu")
    lu.assertErrorMsgContains("_gemm_phases: expected true, false or nothing, got string", wb._gemm_phases, "on")
    lu.assertErrorMsgContains("_gemm_tile_gflops: kc must be 1 to 8192, got 0", wb._gemm_tile_gflops, 0)
    lu.assertErrorMsgContains("_gemm_tile_gflops: iters must be 1 to 100000000, got 0", wb._gemm_tile_gflops, 64, 0)
end

TestLinear = {}

function TestLinear:test_linear_matches_reference()
    wb.manual_seed(25)
    local x, w, b = wb.randn({5, 33}), wb.randn({17, 33}), wb.randn({17})
    within(wb.linear(x, w, b), lin(x, w, b), "linear")
    within(wb.linear(x, w, b, {activation = "gelu_tanh"}), lin(x, w, b, "gelu_tanh"), "linear gelu_tanh")
    within(wb.linear(x, w, b, {activation = "gelu"}), lin(x, w, b, "gelu"), "linear gelu (erf)")
    within(wb.linear(x, w, {activation = "none"}), lin(x, w), "linear no bias")
    -- an explicit nil bias with options after it: the options still count
    within(wb.linear(x, w, nil, {activation = "gelu"}), lin(x, w, nil, "gelu"), "linear nil bias, gelu")
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
    -- doubling is exact: the same sums, bit for bit
    lu.assertEquals(wb.max_abs_diff(wb.linear(x, w), y1 * 2), 0, "after copy_")
    w:narrow(1, 1, 10):fill_(0) -- through a view of the weight
    local y3 = rows(wb.linear(x, w))
    for i = 1, 4 do for j = 1, 10 do lu.assertEquals(y3[i][j], 0) end end
    -- a new weight at a reused address must not see the old packing
    for _ = 1, 5 do
        local w2 = wb.randn({30, 40})
        within(wb.linear(x, w2), lin(x, w2), "fresh weight")
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
        local want = B.mul(lin(x, wg, nil, "gelu_tanh"), lin(x, wu))
        within(fused, want, "geglu_linear")
        within(composed, want, "geglu of two linears")
    end
    local x3 = wb.randn({2, 4, 31})
    lu.assertEquals(wb.geglu_linear(x3, wb.randn({8, 31}), wb.randn({8, 31})).shape, {2, 4, 8})
end

TestActivations = {}

function TestActivations:test_gelu_forms()
    local xs = {}
    for i = 0, 200 do xs[#xs + 1] = -12 + 24 * i / 200 end
    local x = wb.tensor(xs) -- the reference sees the float-rounded inputs
    within(wb.gelu(x, {approximate = "tanh"}), B.act("gelu_tanh", B.input(x)), "gelu tanh")
    within(wb.gelu(x), B.act("gelu", B.input(x)), "gelu erf")
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
