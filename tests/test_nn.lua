-- test_nn.lua: wb.nn.Linear, wb.nn.GeGLUMLP and wb.nn.SwiGLUMLP: initialisation, the three MLP implementations
-- computing one function with 5 / 4 / 2 kernels per forward, and bad input.
local lu = require("luaunit")
local B = require("bounds")

TestLinear = {}

function TestLinear:test_shapes_and_init()
    wb.manual_seed(3)
    local lin = wb.nn.Linear(100, 7)
    lu.assertEquals(lin.weight.shape, {7, 100})
    lu.assertEquals(lin.bias.shape, {7})
    local bound = 1 / math.sqrt(100)
    for _, v in ipairs(lin.weight:flatten():tolist()) do lu.assertTrue(v >= -bound and v <= bound) end
    lu.assertTrue(wb.max_abs_diff(lin.weight, wb.zeros({1})) > bound / 2) -- not all near zero
    lu.assertEquals(#lin:parameters(), 2)
    lu.assertNil(wb.nn.Linear(4, 5, {bias = false}).bias)
    lu.assertEquals(tostring(lin), "Linear(in_features=100, out_features=7, bias=true)")
    local x = wb.randn({3, 100})
    lu.assertEquals(wb.max_abs_diff(lin(x), wb.linear(x, lin.weight, lin.bias)), 0)
    lu.assertEquals(lin:to{device = "cpu"}, lin)
end

function TestLinear:test_bad_input()
    local lin = wb.nn.Linear(8, 4)
    lu.assertErrorMsgContains("Linear(in_features=8, out_features=4, bias=true): input has 9 features, expected 8",
        function() return lin(wb.zeros({2, 9})) end)
    lu.assertErrorMsgContains("nn.Linear: in_features must be a positive integer, got 0", function() wb.nn.Linear(0, 4) end)
    lu.assertErrorMsgContains("nn.Linear: unknown option 'bais'", function() wb.nn.Linear(2, 4, {bais = false}) end)
    lu.assertErrorMsgContains("input must be a tensor, got table", function() return lin({1, 2}) end)
end

TestGeGLUMLP = {}

local function kernels_per_forward(mlp, x)
    local p = wb.profiler.profile{}
    p:start()
    wb.profiler.range("fwd", function() local _ = mlp(x) end)
    p:stop()
    local names = {}
    for _, e in ipairs(p:events()) do if e.cat == "kernel" then names[#names + 1] = e.name end end
    return names, p
end

function TestGeGLUMLP:test_three_impls_one_function()
    wb.manual_seed(4)
    for _, bias in ipairs({false, true}) do
        for _, tokens in ipairs({1, 16, 33}) do
            local mlp = wb.nn.GeGLUMLP(96, 384, {bias = bias})
            local x = wb.randn({tokens, 96})
            local out = {}
            for _, impl in ipairs({"eager", "fused", "dual"}) do
                mlp.impl = impl
                out[impl] = mlp(x)
            end
            local want = B.mlp(mlp, x)
            for impl, y in pairs(out) do
                B.assert_within_bound(y, want, string.format("GeGLUMLP %s, %d tokens, bias %s", impl, tokens, bias))
            end
            lu.assertEquals(out.dual.shape, {tokens, 96})
        end
    end
    -- and composed from matmuls and bias adds: k + 1 terms summed in another order, the same bound
    local mlp = wb.nn.GeGLUMLP(32, 64, {bias = true, impl = "dual"})
    local x = wb.randn({5, 32})
    local function lin(m, v) return wb.matmul(v, m.weight:t():contiguous()) + m.bias end
    local g, u = lin(mlp.gate_proj, x), lin(mlp.up_proj, x)
    local ref = lin(mlp.down_proj, wb.gelu(g, {approximate = "tanh"}) * u)
    local z = B.mlp(mlp, x)
    B.assert_within_bound(mlp(x), z, "GeGLUMLP dual")
    B.assert_within_bound(ref, z, "GeGLUMLP composed from matmul and add")
end

function TestGeGLUMLP:test_kernels_per_forward()
    local mlp = wb.nn.GeGLUMLP(64, 256)
    local x = wb.randn({16, 64})
    local want = {eager = 5, fused = 4, dual = 2}
    for impl, n in pairs(want) do
        mlp.impl = impl
        local names, p = kernels_per_forward(mlp, x)
        lu.assertEquals(#names, n, impl .. ": " .. table.concat(names, ", "))
        p:expect{range = "fwd", kernels = n}
    end
    mlp.impl = "dual"
    local names = kernels_per_forward(mlp, x)
    lu.assertStrContains(names[1], "wb_dual_sgemm_")
    lu.assertStrContains(names[1], "_geglu")
end

function TestGeGLUMLP:test_bad_input()
    local mlp = wb.nn.GeGLUMLP(8, 16)
    lu.assertErrorMsgContains("GeGLUMLP(dim=8, hidden=16, impl=eager, bias=false): input has 7 features, expected 8",
        function() return mlp(wb.zeros({2, 7})) end)
    lu.assertErrorMsgContains("GeGLUMLP: unknown impl 'fast' (expected eager, fused, dual or fused_mlp)",
        function() wb.nn.GeGLUMLP(8, 16, {impl = "fast"}) end)
    mlp.impl = "turbo"
    lu.assertErrorMsgContains("GeGLUMLP: unknown impl 'turbo'", function() return mlp(wb.zeros({2, 8})) end)
    lu.assertErrorMsgContains("GeGLUMLP: unknown option 'hidden_size'", function() wb.nn.GeGLUMLP(8, 16, {hidden_size = 3}) end)
    lu.assertErrorMsgContains("geglu_linear: b_gate has shape {3} but the weights have 16 output features",
        function() return wb.geglu_linear(wb.zeros({1, 8}), wb.zeros({16, 8}), wb.zeros({16, 8}), wb.zeros({3})) end)
end

TestSwiGLUMLP = {}

function TestSwiGLUMLP:test_three_impls_one_function_and_kernels()
    wb.manual_seed(5)
    for _, bias in ipairs({false, true}) do
        local mlp = wb.nn.SwiGLUMLP(96, 384, {bias = bias})
        local x = wb.randn({17, 96})
        local out = {}
        for _, impl in ipairs({"eager", "fused", "dual"}) do
            mlp.impl = impl
            out[impl] = mlp(x)
        end
        local want = B.mlp(mlp, x)
        for impl, y in pairs(out) do
            B.assert_within_bound(y, want, string.format("SwiGLUMLP %s, bias %s", impl, bias))
        end
    end
    local mlp = wb.nn.SwiGLUMLP(64, 256)
    local x = wb.randn({16, 64})
    for impl, n in pairs({eager = 5, fused = 4, dual = 2}) do
        mlp.impl = impl
        local names, p = kernels_per_forward(mlp, x)
        p:expect{range = "fwd", kernels = n}
        if impl == "dual" then lu.assertStrMatches(names[1], "wb_dual_sgemm_.*_swiglu") end
        if impl == "fused" then lu.assertStrMatches(names[3], "wb_swiglu_.*") end
    end
    mlp.impl = "dual"
    lu.assertEquals(tostring(mlp), "SwiGLUMLP(dim=64, hidden=256, impl=dual, bias=false)")
    lu.assertErrorMsgContains("SwiGLUMLP: unknown impl 'fast'", function() wb.nn.SwiGLUMLP(8, 16, {impl = "fast"}) end)
end

os.exit(lu.LuaUnit.run())
