-- test_compile_mlp.lua: wb.compile of a gated MLP forward (gate and up linears, gelu_tanh or silu
-- times up, the down linear) runs the one-kernel MLP (wb.geglu_mlp / wb.swiglu_mlp) where
-- wb.compile_mlp's cost model says it pays (cpu: f32 at every token count, bf16 from 8 tokens on),
-- within the forward bound of the eager MLP, and keeps the dual GEMM + down linear elsewhere;
-- explain says which and why. The model's per-thread limit (MAX_TOKENS, unlimited as measured) is
-- set here to check the rule's mechanics: the words, and the guard on the thread count.
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

-- Runs fn with the model's per-thread f32 limit at `limit` tokens (or another knob of it).
local function with_limit(limit, fn, knob)
    knob = knob or "MAX_TOKENS"
    local was = cost[knob]
    cost[knob] = limit
    local ok, err = pcall(fn)
    cost[knob] = was
    if not ok then error(err, 0) end
end

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
                        lu.assertStrContains(f:explain(), "it measured a tie or better against the dual GEMM")
                        local x2 = wb.randn(shape) -- a later call follows new data
                        B.assert_within_bound(f(x2), B.mlp(m, x2), what .. ", new data")
                    end)
                end
            end
        end
    end
end

-- Where the model says it does not pay, the two kernels stay and explain says why; bf16 from 8
-- tokens on is the one kernel, within the bf16 bound.
function test_kept_as_two_kernels_where_it_does_not_pay()
    wb.manual_seed(12)
    local m = wb.nn.GeGLUMLP(32, 96, {bias = false})
    with_limit(64, function()
        with_threads(1, function()
            local f = wb.compile(function(v) return m(v) end)
            local x = wb.randn({65, 32})
            B.assert_within_bound(f(x), B.mlp(m, x), "more tokens than the model's")
            lu.assertEquals(#kernels_in_region(function() f(x) end), 2)
            lu.assertStrContains(f:explain(), "geglu_linear+linear kept, not geglu_mlp: 65 tokens on 1 " ..
                "thread: more than 64 a thread")
        end)
    end)
    -- f32 at the model's own limit (none): the one kernel at 200 tokens
    with_threads(1, function()
        local f = wb.compile(function(v) return m(v) end)
        local x = wb.randn({200, 32})
        B.assert_within_bound(f(x), B.mlp(m, x), "200 tokens")
        lu.assertEquals(#kernels_in_region(function() f(x) end), 1, f:explain())
    end)
    -- bf16: fused at every count (the pair kernels on few rows); with the model's bf16 limit at 8
    -- (the rule before the pair kernels), kept under it
    local m16 = wb.nn.GeGLUMLP(32, 96, {bias = false}):to{dtype = "bf16"}
    local m32 = wb.nn.GeGLUMLP(32, 96, {bias = false})
    for _, name in ipairs({"gate_proj", "up_proj", "down_proj"}) do m32[name].weight = m16[name].weight:to{dtype = "f32"} end
    for _, limit in ipairs({cost.BF16_MIN_TOKENS, 8}) do
        with_limit(limit, function()
            for _, tokens in ipairs({1, 3, 7, 8, 40}) do
                local f16 = wb.compile(function(v) return m16(v) end)
                local x = wb.randn({tokens, 32}):to{dtype = "bf16"}
                local y = f16(x)
                B.assert_within_bound(y, B.mlp(m32, x:to{dtype = "f32"}, {bf16 = true, inputs_rounded = true}),
                    tokens .. " tokens, bf16")
                local ks = kernels_in_region(function() f16(x) end)
                if tokens < limit then
                    lu.assertEquals(#ks, 2, f16:explain())
                    lu.assertStrContains(f16:explain(), string.format("kept, not geglu_mlp: bf16, %s: under the " ..
                        "model's limit of 8", wb.words.plural(tokens, "token")))
                else
                    lu.assertEquals(#ks, 1, f16:explain())
                    lu.assertStrContains(ks[1], "mlp")
                    lu.assertStrContains(f16:explain(), "geglu_linear+linear -> geglu_mlp")
                end
            end
        end, "BF16_MIN_TOKENS")
    end
    -- gate and up biases: the fused op takes none, so the rule does not apply (no note)
    local mb = wb.nn.GeGLUMLP(32, 96, {bias = true})
    local fb = wb.compile(function(v) return mb(v) end)
    local xb = wb.randn({3, 32})
    B.assert_within_bound(fb(xb), B.mlp(mb, xb), "gate and up biases")
    lu.assertEquals(#kernels_in_region(function() fb(xb) end), 2)
    lu.assertNotStrContains(fb:explain(), "geglu_mlp")
end

-- The plan a model chose by the thread count is not replayed on another: with the per-thread limit
-- at 64 tokens (the rule the model had before it was measured quietly), compiled at 2 threads
-- with 2 * MAX_TOKENS tokens (MAX_TOKENS a thread: the one kernel), then called on 1 thread (over
-- MAX_TOKENS a thread: the two kernels), and back. Before the guard held the thread count, the
-- 1-thread call replayed the 2-thread plan's one kernel.
function test_thread_count_is_guarded()
    with_limit(64, function()
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
    end)
    -- the measured model (no per-thread limit) does not choose by threads: one signature
    local m = wb.nn.GeGLUMLP(32, 96, {bias = false})
    local f = wb.compile(function(v) return m(v) end)
    local x = wb.randn({128, 32})
    with_threads(1, function() f(x) end)
    with_threads(2, function() f(x) end)
    lu.assertEquals(f:signatures(), 1)
end

-- The model itself: f32 and bf16 at every count (bf16 under a limit when one is set); with a per-thread
-- limit, per thread.
function test_cost_model()
    lu.assertEquals(cost.MAX_TOKENS, math.huge)
    local ok, why, threads = cost.pays(wb.zeros({1000, 4}), "geglu_mlp")
    lu.assertTrue(ok)
    lu.assertNil(threads) -- no thread count used: no guard on it
    lu.assertStrContains(why, "f32, 1000 tokens: it measured a tie or better")
    ok, why = cost.pays(wb.zeros({1, 4}, {dtype = "bf16"}), "swiglu_mlp")
    lu.assertTrue(ok)
    lu.assertStrContains(why, "bf16, 1 token: it measured a tie or better")
    -- x the pair kernels cannot read in place (odd features, strided): the two kernels under 8 tokens
    ok, why = cost.pays(wb.zeros({3, 5}, {dtype = "bf16"}), "geglu_mlp")
    lu.assertFalse(ok)
    lu.assertStrContains(why, "bf16, 3 tokens: x's rows are of odd length, so geglu_mlp would widen it where the " ..
        "linears read bf16 pairs")
    ok, why = cost.pays(wb.zeros({4, 3}, {dtype = "bf16"}):t(), "geglu_mlp")
    lu.assertFalse(ok)
    lu.assertStrContains(why, "x's rows are strided")
    lu.assertTrue((cost.pays(wb.zeros({8, 5}, {dtype = "bf16"}), "geglu_mlp")))
    with_limit(8, function()
        ok, why = cost.pays(wb.zeros({7, 4}, {dtype = "bf16"}), "swiglu_mlp")
        lu.assertFalse(ok)
        lu.assertStrContains(why, "bf16, 7 tokens: under the model's limit of 8 (BF16_MIN_TOKENS)")
        lu.assertTrue((cost.pays(wb.zeros({2, 4, 4}, {dtype = "bf16"}), "swiglu_mlp")))
    end, "BF16_MIN_TOKENS")
    with_limit(64, function()
        with_threads(1, function()
            lu.assertTrue((cost.pays(wb.zeros({64, 4}), "geglu_mlp")))
            lu.assertFalse((cost.pays(wb.zeros({65, 4}), "geglu_mlp")))
            lu.assertTrue((cost.pays(wb.zeros({2, 32, 4}), "geglu_mlp")))
        end)
        with_threads(2, function()
            if wb.get_num_threads() < 2 then return end -- a machine with one CPU
            lu.assertTrue((cost.pays(wb.zeros({128, 4}), "geglu_mlp")))
            local no, words, used = cost.pays(wb.zeros({129, 4}), "geglu_mlp")
            lu.assertFalse(no)
            lu.assertEquals(used, 2)
            lu.assertStrContains(words, "on 2 threads")
        end)
    end)
end

os.exit(lu.LuaUnit.run())
