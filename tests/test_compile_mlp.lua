-- test_compile_mlp.lua: wb.compile of a gated MLP forward (gate and up linears, gelu_tanh or silu
-- times up, the down linear) runs the one-kernel MLP (wb.geglu_mlp / wb.swiglu_mlp) where
-- wb.compile_mlp's cost model says it pays (cpu, f32, few tokens a thread), within the forward
-- bound of the eager MLP, and keeps the dual GEMM + down linear elsewhere; explain says which and why.
local lu = require("luaunit")
local B = require("bounds")
local cost = require("wb.compile_mlp")

-- the names of the kernels inside the compiled region of one call of fn
local function kernels_in_region(fn)
    local names = {}
    for _, e in ipairs(require("compiled").kernels_in_region(fn)) do names[#names + 1] = e.name end
    return names
end

local with_threads = require("threads").with_threads

local MODULES = {GeGLUMLP = {dual = "geglu_linear", mlp = "geglu_mlp"}, SwiGLUMLP = {dual = "swiglu_linear", mlp = "swiglu_mlp"}}

-- Before: two kernels (the dual GEMM, then the down GEMM) at every token count.
function test_few_tokens_run_the_one_kernel_mlp()
    wb.manual_seed(11)
    for name, spec in pairs(MODULES) do
        for _, codegen in ipairs({true, false}) do
            for _, down_bias in ipairs({false, true}) do
                local m = wb.nn[name](48, 200, {bias = false})
                if down_bias then m.down_proj.bias = wb.randn({48}) end
                for _, shape in ipairs({{1, 48}, {7, 48}, {2, 5, 48}}) do
                    with_threads(1, function()
                        local what = string.format("%s %s codegen %s, down bias %s", name, table.concat(shape, "x"),
                            tostring(codegen), tostring(down_bias))
                        local f = wb.compile(function(v) return m(v) end, {codegen = codegen})
                        local x = wb.randn(shape)
                        B.assert_within_bound(f(x), B.mlp(m, x), what)
                        local ks = kernels_in_region(function() f(x) end)
                        lu.assertEquals(#ks, 1, what .. ": " .. f:explain())
                        lu.assertStrContains(ks[1], "mlp", what)
                        lu.assertStrContains(f:explain(), spec.dual .. "+linear -> " .. spec.mlp)
                        lu.assertStrContains(f:explain(), "at most " .. cost.MAX_TOKENS .. " a thread")
                        local x2 = wb.randn(shape) -- a later call follows new data
                        B.assert_within_bound(f(x2), B.mlp(m, x2), what .. ", new data")
                    end)
                end
            end
        end
    end
end

-- Where the model says it does not pay, the two kernels stay and explain says why.
function test_kept_as_two_kernels_where_it_does_not_pay()
    wb.manual_seed(12)
    local m = wb.nn.GeGLUMLP(32, 96, {bias = false})
    local many = cost.MAX_TOKENS + 1
    with_threads(1, function()
        local f = wb.compile(function(v) return m(v) end)
        local x = wb.randn({many, 32})
        B.assert_within_bound(f(x), B.mlp(m, x), "more tokens than the model's")
        lu.assertEquals(#kernels_in_region(function() f(x) end), 2)
        lu.assertStrContains(f:explain(), string.format("geglu_linear+linear kept, not geglu_mlp: %d tokens on 1 " ..
            "thread: more than %d a thread", many, cost.MAX_TOKENS))
    end)
    -- bf16: kept (the fused kernel widens bf16 weights; not measured against the dual's bf16 path)
    local m16 = wb.nn.GeGLUMLP(32, 96, {bias = false}):to{dtype = "bf16"}
    local f16 = wb.compile(function(v) return m16(v) end)
    local x16 = wb.randn({3, 32}):to{dtype = "bf16"}
    f16(x16)
    lu.assertEquals(#kernels_in_region(function() f16(x16) end), 2)
    lu.assertStrContains(f16:explain(), "kept, not geglu_mlp: bf16 x")
    -- gate and up biases: the fused op takes none, so the rule does not apply (no note)
    local mb = wb.nn.GeGLUMLP(32, 96, {bias = true})
    local fb = wb.compile(function(v) return mb(v) end)
    local xb = wb.randn({3, 32})
    B.assert_within_bound(fb(xb), B.mlp(mb, xb), "gate and up biases")
    lu.assertEquals(#kernels_in_region(function() fb(xb) end), 2)
    lu.assertNotStrContains(fb:explain(), "geglu_mlp")
end

-- The plan the model chose for one thread count is not replayed on another: compiled at 2 threads
-- with 2 * MAX_TOKENS tokens (MAX_TOKENS a thread: the one kernel), then called on 1 thread (over
-- MAX_TOKENS a thread: the two kernels), and back. Before the guard held the thread count, the
-- 1-thread call replayed the 2-thread plan's one kernel.
function test_thread_count_is_guarded()
    wb.manual_seed(13)
    local m = wb.nn.GeGLUMLP(32, 96, {bias = false})
    local x = wb.randn({2 * cost.MAX_TOKENS, 32})
    local f = wb.compile(function(v) return m(v) end)
    local function kernels_on(threads)
        local ks
        with_threads(threads, function()
            B.assert_within_bound(f(x), B.mlp(m, x), threads .. " threads")
            ks = kernels_in_region(function() f(x) end)
        end)
        return ks
    end
    local one = kernels_on(1)
    lu.assertEquals(#one, 2, f:explain())
    with_threads(2, function()
        if wb.get_num_threads() < 2 then lu.skip("a machine with one CPU") end
    end)
    local two = kernels_on(2)
    lu.assertEquals(#two, 1, f:explain())
    lu.assertStrContains(two[1], "mlp")
    lu.assertEquals(#kernels_on(1), 2, f:explain()) -- the 1-thread entry again, not the last one
    lu.assertEquals(f:signatures(), 2)
    lu.assertStrContains(f:explain(), "threads:1]")
    lu.assertStrContains(f:explain(), "threads:2]")
    -- a plan no cost model chose by threads keeps one signature whatever the count
    local g = wb.compile(function(v) return wb.gelu(v) * 2 end)
    with_threads(1, function() g(x) end)
    with_threads(2, function() g(x) end)
    lu.assertEquals(g:signatures(), 1)
end

-- The model itself: per thread, cpu f32 only, and its words.
function test_cost_model()
    with_threads(1, function()
        lu.assertTrue((cost.pays(wb.zeros({cost.MAX_TOKENS, 4}), "geglu_mlp")))
        lu.assertFalse((cost.pays(wb.zeros({cost.MAX_TOKENS + 1, 4}), "geglu_mlp")))
        lu.assertTrue((cost.pays(wb.zeros({2, cost.MAX_TOKENS // 2, 4}), "geglu_mlp")))
        local ok, why = cost.pays(wb.zeros({2, 4}, {dtype = "bf16"}), "swiglu_mlp")
        lu.assertFalse(ok)
        lu.assertStrContains(why, "bf16 x: swiglu_mlp widens bf16 weights")
    end)
    with_threads(2, function()
        if wb.get_num_threads() < 2 then return end -- a machine with one CPU
        lu.assertTrue((cost.pays(wb.zeros({2 * cost.MAX_TOKENS, 4}), "geglu_mlp")))
        local ok, why = cost.pays(wb.zeros({2 * cost.MAX_TOKENS + 1, 4}), "geglu_mlp")
        lu.assertFalse(ok)
        lu.assertStrContains(why, "on 2 threads")
    end)
end

os.exit(lu.LuaUnit.run())
