-- test_mlp.lua: wb.geglu_mlp / wb.swiglu_mlp, the MLP as one CPU kernel, against the forward error
-- bound of the eager MLP (tests/bounds.lua) over token counts that leave ragged row blocks, 1 and 2
-- threads, f32 and bf16, both activations, the default blocking and one that splits every K; one
-- kernel per forward; graph replay; wb.nn's fused_mlp forward; bad shapes refused by name. Run
-- once per CPU path (WB_CPU_ISA=scalar, avx2, avx512); a path this CPU cannot run exits 77 (skipped).
local lu = require("luaunit")
local B = require("bounds")

local want_isa = os.getenv("WB_CPU_ISA")
if want_isa and want_isa ~= "" and wb.cpu_isa() ~= want_isa then
    print("WB_CPU_ISA=" .. want_isa .. " is not supported by this CPU (running " .. wb.cpu_isa() .. "): skipped")
    os.exit(77)
end

local function raises(pattern, fn)
    local ok, err = pcall(fn)
    lu.assertFalse(ok, "expected an error containing: " .. pattern)
    lu.assertStrContains(tostring(err), pattern)
end

local ACTS = {geglu = {module = "GeGLUMLP", fn = wb.geglu_mlp}, swiglu = {module = "SwiGLUMLP", fn = wb.swiglu_mlp}}
-- K blocks of 20: the dual GEMM's K (k = 24) in two blocks, the hidden in chunks that do not
-- fall on the dual tiles' edges (tiles of 8 or 16 hidden columns straddle them)
local SPLIT_BLOCKING = "20,12,32"

-- One forward of the module's weights through the one-kernel op, in the module's dtype.
local function fused(act, m, x)
    return ACTS[act].fn(x, m.gate_proj.weight, m.up_proj.weight, m.down_proj.weight, m.down_proj.bias)
end

local with_threads = require("threads").with_threads

-- (a blocking forced from the environment is replaced for fn, then the rule returns)
local function with_blocking(spec, fn)
    wb.set_cpu_blocking(spec)
    local ok, err = pcall(fn)
    wb.set_cpu_blocking(nil)
    if not ok then error(err, 0) end
end

TestMlp = {}

-- The small model: every token count, both dtypes and activations, 1 and 2 threads, two blockings.
-- With 2 threads the larger token counts split token rows across the threads (the smaller ones
-- are below the size worth a fork; TestMlp:test_few_tokens_split_columns covers those).
function TestMlp:test_within_the_eager_bound()
    for act, a in pairs(ACTS) do
        wb.manual_seed(31)
        local m32 = wb.nn[a.module](24, 56, {bias = false})
        m32.down_proj.bias = wb.randn({24}) -- the down bias is the one the op takes
        local m16 = wb.nn[a.module](24, 56, {bias = false}):to{dtype = "bf16"}
        for _, name in ipairs({"gate_proj", "up_proj", "down_proj"}) do
            m16[name].weight = m32[name].weight:to{dtype = "bf16"}
        end
        m16.down_proj.bias = m32.down_proj.bias:to{dtype = "bf16"}
        -- (9, 13, 25: three row tiles with a 1-row last on the 4-, 6- and 12-row tiles: split evenly)
        for _, tokens in ipairs({1, 7, 9, 13, 16, 25, 128, 512, 1000}) do
            local x = wb.randn({tokens, 24})
            local x16 = x:to{dtype = "bf16"}
            local z32 = B.mlp(m32, x)
            local z16 = B.mlp(m32, x, {bf16 = true, inputs_rounded = true})
            for _, threads in ipairs({1, 2}) do
                for _, blocking in ipairs({"rule", SPLIT_BLOCKING}) do
                    local function check()
                        local what = string.format("%s_mlp, %d tokens, %d threads, blocking %s", act, tokens, threads, blocking)
                        B.assert_within_bound(fused(act, m32, x), z32, what .. ", f32")
                        local y16 = fused(act, m16, x16)
                        lu.assertEquals(y16.dtype, "bf16")
                        B.assert_within_bound(y16, z16, what .. ", bf16")
                    end
                    with_threads(threads, function()
                        if blocking == "rule" then check() else with_blocking(blocking, check) end
                    end)
                end
            end
        end
    end
end

-- Panels of several hidden chunks: where a thread's x and output rows overflow half its L3 share,
-- the token split's panel takes the chunks whose weights fill that half instead of one chunk (here
-- a 160 KiB share: chunks of 128 hidden columns, panels of 2 chunks over 300, 1000 tokens).
function TestMlp:test_panels_of_several_chunks()
    wb.manual_seed(35)
    local m = wb.nn.GeGLUMLP(24, 300, {bias = false})
    m.down_proj.bias = wb.randn({24})
    local x = wb.randn({1000, 24})
    local z = B.mlp(m, x)
    for _, threads in ipairs({1, 2}) do
        with_threads(threads, function()
            with_blocking("caches:16K,64K,160K", function()
                B.assert_within_bound(fused("geglu", m, x), z, string.format("panels of 2 chunks, %d threads", threads))
            end)
        end)
    end
end

-- Few tokens on 2 threads: the threads split the hidden columns, meet, then split the output
-- columns. Each model is just large enough to be worth the fork at its token count.
function TestMlp:test_few_tokens_split_columns()
    local cases = {{tokens = 1, dim = 384, hidden = 1800}, {tokens = 7, dim = 160, hidden = 600},
        {tokens = 16, dim = 96, hidden = 448}, {tokens = 25, dim = 96, hidden = 448}}
    for i, c in ipairs(cases) do
        local act = i % 2 == 1 and "geglu" or "swiglu"
        wb.manual_seed(40 + i)
        local m = wb.nn[ACTS[act].module](c.dim, c.hidden, {bias = false})
        m.down_proj.bias = wb.randn({c.dim})
        local x = wb.randn({c.tokens, c.dim})
        local z = B.mlp(m, x)
        with_threads(2, function()
            local p = wb.profiler.profile({activities = {"cpu", "device"}})
            p:start()
            local y = fused(act, m, x)
            p:stop()
            B.assert_within_bound(y, z, string.format("%s_mlp, %d tokens, 2 threads", act, c.tokens))
            local kernels = {}
            for _, e in ipairs(p:events()) do if e.cat == "kernel" then kernels[#kernels + 1] = e end end
            lu.assertEquals(#kernels, 1)
            if wb.get_num_threads() >= 2 then lu.assertEquals(kernels[1].args.threads, 2, "the fork was not taken") end
            -- and in bf16 (the weights rounded once; x rounded too)
            local m16 = wb.nn[ACTS[act].module](c.dim, c.hidden, {bias = false})
            for _, name in ipairs({"gate_proj", "up_proj", "down_proj"}) do
                m16[name].weight = m[name].weight:to{dtype = "bf16"}
            end
            m16.down_proj.bias = m.down_proj.bias:to{dtype = "bf16"}
            if c.tokens == 1 then
                B.assert_within_bound(fused(act, m16, x:to{dtype = "bf16"}), B.mlp(m, x, {bf16 = true, inputs_rounded = true}),
                    act .. "_mlp bf16, 1 token, 2 threads")
            end
        end)
    end
end

-- The token split gives each thread an equal share of rows, not of row tiles, so a share starts and
-- ends inside a register tile (128 tokens on 2 threads: 64 | 64 rows, 4 tiles of 12 and two of 8
-- each; 151 on 3: 50 | 50 | 51): each thread packs its rows into its own part of the shared packed
-- x and stores only its rows. Models just large enough to fork at these counts; f32 and bf16.
function TestMlp:test_token_split_shares_rows()
    local cases = {{tokens = 128, threads = 2}, {tokens = 131, threads = 2}, {tokens = 151, threads = 3}}
    for i, c in ipairs(cases) do
        local act = i % 2 == 1 and "geglu" or "swiglu"
        wb.manual_seed(60 + i)
        local m = wb.nn[ACTS[act].module](64, 136, {bias = false})
        m.down_proj.bias = wb.randn({64})
        local m16 = wb.nn[ACTS[act].module](64, 136, {bias = false})
        for _, name in ipairs({"gate_proj", "up_proj", "down_proj"}) do
            m16[name].weight = m[name].weight:to{dtype = "bf16"}
        end
        m16.down_proj.bias = m.down_proj.bias:to{dtype = "bf16"}
        local x = wb.randn({c.tokens, 64})
        local what = string.format("%s_mlp, %d tokens, %d threads", act, c.tokens, c.threads)
        with_threads(c.threads, function()
            local p = wb.profiler.profile({activities = {"cpu", "device"}})
            p:start()
            local y = fused(act, m, x)
            p:stop()
            B.assert_within_bound(y, B.mlp(m, x), what .. ", f32")
            local y16 = fused(act, m16, x:to{dtype = "bf16"})
            B.assert_within_bound(y16, B.mlp(m, x, {bf16 = true, inputs_rounded = true}), what .. ", bf16")
            local kernels = {}
            for _, e in ipairs(p:events()) do if e.cat == "kernel" then kernels[#kernels + 1] = e end end
            lu.assertEquals(#kernels, 1)
            if wb.get_num_threads() >= c.threads then
                lu.assertEquals(kernels[1].args.threads, c.threads, what .. ": the fork was not taken")
            end
        end)
    end
end

-- bf16 on few rows: the one kernel runs the k-pair microkernels the linears pick there (they read
-- the packed weights as bf16, half the bytes of widened ones) and rounds the hidden to bf16 as it
-- packs it, as the dual path stores it: the same kernels in the same order, so the result is the
-- dual GEMM + down GEMM's bit for bit (and within the bf16 bound). Each pair path this CPU has
-- (the default's, and "emulated", which every CPU runs and which has no row packer), the default
-- blocking and one of 18-word K blocks (the dual K split, hidden tiles across a block's edge);
-- an odd hidden pads its last pair; x at an odd element or with an odd row stride is read a word
-- at a time; x with an odd feature count or strided features takes the f32 path. Before, every
-- bf16 MLP ran the f32 path: at 1 token 0.24x the dual path's speed.
function TestMlp:test_bf16_few_rows_run_the_pair_kernels()
    local function kernels_of(fn)
        local p = wb.profiler.profile({activities = {"cpu", "device"}})
        p:start()
        local y = fn()
        p:stop()
        local ks = {}
        for _, e in ipairs(p:events()) do if e.cat == "kernel" then ks[#ks + 1] = e end end
        return y, ks
    end
    local cases = {{dim = 24, hidden = 57, tokens = 1}, {dim = 48, hidden = 64, tokens = 5}, {dim = 24, hidden = 3, tokens = 2},
        {dim = 48, hidden = 57, tokens = 3, at_odd_element = true}, {dim = 48, hidden = 40, tokens = 4, odd_row_stride = true},
        {dim = 25, hidden = 56, tokens = 3, f32_path = "an odd feature count"},
        {dim = 48, hidden = 40, tokens = 4, strided = true, f32_path = "strided features"}}
    local was = wb.cpu_bf16()
    local paths = {"emulated"}
    if was ~= "widen" then table.insert(paths, 1, was) end
    local ok, err = pcall(function() for _, path in ipairs(paths) do
        wb.cpu_bf16(path)
        for _, blocking in ipairs({false, "18,12,32"}) do
            for i, c in ipairs(cases) do
                local act = i % 2 == 1 and "geglu" or "swiglu"
                wb.manual_seed(60 + i)
                local m = wb.nn[ACTS[act].module](c.dim, c.hidden, {bias = false})
                m.down_proj.bias = wb.randn({c.dim})
                local m16 = wb.nn[ACTS[act].module](c.dim, c.hidden, {bias = false})
                for _, name in ipairs({"gate_proj", "up_proj", "down_proj"}) do m16[name].weight = m[name].weight:to{dtype = "bf16"} end
                m16.down_proj.bias = m.down_proj.bias:to{dtype = "bf16"}
                local x16 -- (a conversion is contiguous: views are taken of the bf16 tensor)
                if c.strided then
                    x16 = wb.randn({c.dim, c.tokens}):to{dtype = "bf16"}:t()
                elseif c.at_odd_element then -- 2 bytes past a 4-byte boundary
                    x16 = wb.randn({c.tokens * c.dim + 1}):to{dtype = "bf16"}:narrow(1, 2, c.tokens * c.dim):view({c.tokens, c.dim})
                elseif c.odd_row_stride then -- rows c.dim + 1 apart
                    x16 = wb.randn({c.tokens, c.dim + 1}):to{dtype = "bf16"}:narrow(2, 1, c.dim)
                else
                    x16 = wb.randn({c.tokens, c.dim}):to{dtype = "bf16"}
                end
                local x = x16:to{dtype = "f32"}
                local what = string.format("%s_mlp bf16 (%s path%s), %s, %d -> %d -> %d", act, path,
                    blocking and ", blocking " .. blocking or "", wb.words.plural(c.tokens, "token"), c.dim, c.hidden, c.dim)
                with_threads(1, function()
                    local function run()
                        local y, ks = kernels_of(function() return fused(act, m16, x16) end)
                        local ref, dual = kernels_of(function()
                            return wb.linear(wb[act .. "_linear"](x16, m16.gate_proj.weight, m16.up_proj.weight),
                                m16.down_proj.weight, m16.down_proj.bias)
                        end)
                        lu.assertEquals(#ks, 1, what)
                        B.assert_within_bound(y, B.mlp(m, x, {bf16 = true, inputs_rounded = true}), what)
                        if c.f32_path then
                            lu.assertEquals(ks[1].args.isa, wb.cpu_isa(), what .. ": " .. c.f32_path .. " takes the f32 path")
                        else
                            lu.assertEquals(ks[1].args.isa, dual[1].args.isa, what .. ": the linears' pair path")
                            lu.assertNotEquals(ks[1].args.isa, wb.cpu_isa(), what)
                            lu.assertEquals(wb.max_abs_diff(y, ref), 0, what .. ": bit for bit with the dual path")
                        end
                    end
                    if blocking then with_blocking(blocking, run) else run() end
                end)
            end
        end
    end end)
    wb.cpu_bf16(was) -- (the path is the process's: put back before any failure is raised)
    if not ok then error(err, 0) end
end

function TestMlp:test_one_kernel_named_by_its_fields()
    local m = wb.nn.SwiGLUMLP(32, 80, {bias = false})
    m.down_proj.bias = wb.randn({32})
    local x = wb.randn({9, 32})
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    wb.profiler.range("fwd", function() fused("swiglu", m, x) end)
    p:stop()
    p:expect{range = "fwd", kernels = 1, ops = {swiglu_mlp = 1}}
    for _, e in ipairs(p:events()) do
        if e.cat == "kernel" then
            lu.assertStrMatches(e.name, "wb_mlp_" .. wb.cpu_isa() .. "_%d+x%d+_tn_bias_swiglu")
            lu.assertEquals(e.flops, 2 * 9 * 80 * (2 * 32 + 32))
            lu.assertEquals(e.args.op, "mlp")
        end
    end
end

-- Odd geometry: x as a transposed view and as 3-D, input and output features that differ, a
-- hidden of one, no token, no hidden (the output is then the bias).
function TestMlp:test_views_and_edges()
    wb.manual_seed(5)
    local wg, wu, wd, b = wb.randn({37, 19}), wb.randn({37, 19}), wb.randn({11, 37}), wb.randn({11})
    local mod = {gate_proj = {weight = wg}, up_proj = {weight = wu}, down_proj = {weight = wd, bias = b}}
    local xt = wb.randn({19, 13}):t() -- {13, 19}, unit stride along the tokens
    B.assert_within_bound(wb.geglu_mlp(xt, wg, wu, wd, b), B.mlp(mod, xt, {act = "gelu_tanh"}), "transposed x")
    local x3 = wb.randn({2, 5, 19})
    local y3 = wb.swiglu_mlp(x3, wg, wu, wd, b)
    lu.assertEquals(y3.shape, {2, 5, 11})
    B.assert_within_bound(y3:reshape({10, 11}), B.mlp(mod, x3:reshape({10, 19}), {act = "silu"}), "3-D x")
    local one = {gate_proj = {weight = wg:narrow(1, 1, 1)}, up_proj = {weight = wu:narrow(1, 1, 1)},
        down_proj = {weight = wd:narrow(2, 1, 1)}}
    B.assert_within_bound(wb.geglu_mlp(xt, one.gate_proj.weight, one.up_proj.weight, one.down_proj.weight),
        B.mlp(one, xt, {act = "gelu_tanh"}), "hidden 1, w_down a strided view")
    lu.assertEquals(wb.geglu_mlp(wb.randn({0, 19}), wg, wu, wd, b).shape, {0, 11})
    local y0 = wb.geglu_mlp(wb.randn({3, 19}), wb.randn({0, 19}), wb.randn({0, 19}), wb.randn({11, 0}), b)
    lu.assertEquals(wb.max_abs_diff(y0, b:reshape({1, 11}):expand({3, 11}):contiguous()), 0)
end

function TestMlp:test_graph_replay_follows_new_inputs_and_weights()
    local m = wb.nn.GeGLUMLP(24, 64, {bias = false})
    local x = wb.randn({10, 24})
    local g = wb.graph.capture(function() return fused("geglu", m, x) end)
    x:copy_(wb.randn({10, 24}))
    m.down_proj.weight:copy_(wb.randn({24, 64})) -- a write to a weight must re-pack it
    g:replay()
    B.assert_within_bound(g.outputs[1], B.mlp(m, x), "replayed after new x and w_down")
    g:release()
    -- bf16 on 2 rows (the pair kernels where the CPU has them: x read in place as pair words)
    local m16 = wb.nn.GeGLUMLP(24, 64, {bias = false}):to{dtype = "bf16"}
    local x16 = wb.randn({2, 24}, {dtype = "bf16"})
    local g16 = wb.graph.capture(function() return fused("geglu", m16, x16) end)
    x16:copy_(wb.randn({2, 24}, {dtype = "bf16"}))
    m16.down_proj.weight:copy_(wb.randn({24, 64}, {dtype = "bf16"}))
    g16:replay()
    lu.assertEquals(wb.max_abs_diff(g16.outputs[1], fused("geglu", m16, x16)), 0, "bf16 replayed after new x and w_down")
    g16:release()
end

function TestMlp:test_nn_fused_mlp_forward()
    for act, a in pairs(ACTS) do
        local m = wb.nn[a.module](32, 96, {impl = "fused_mlp"})
        lu.assertEquals(tostring(m), a.module .. "(dim=32, hidden=96, impl=fused_mlp, bias=false)")
        local x = wb.randn({17, 32})
        local p = wb.profiler.profile({activities = {"cpu", "device"}})
        p:start()
        local y
        wb.profiler.range("fwd", function() y = m(x) end)
        p:stop()
        p:expect{range = "fwd", kernels = 1}
        B.assert_within_bound(y, B.mlp(m, x), act .. " module, fused_mlp")
        raises(a.module .. ": impl fused_mlp takes no gate or up bias (build it with bias = false, or use impl dual)",
            function() wb.nn[a.module](8, 16, {impl = "fused_mlp", bias = true}) end)
        local biased = wb.nn[a.module](8, 16, {bias = true})
        biased.impl = "fused_mlp"
        raises("impl fused_mlp takes no gate or up bias", function() return biased(wb.randn({2, 8})) end)
    end
end

-- The opt-in phase counts (wb._mlp_phases, printed by experiments/mlp_fused_vs_dual.lua): off, a
-- run counts nothing; on, each run counts once per thread slot's maximum, every phase within the
-- total; the token split and the column split both fill them; a bad argument is named.
function TestMlp:test_phase_counts()
    wb.manual_seed(50)
    local m = wb.nn.GeGLUMLP(96, 448, {bias = false})
    local x = wb.randn({16, 96})
    local before = wb._mlp_phases(false)
    fused("geglu", m, x):release()
    lu.assertEquals(wb._mlp_phases(), before, "counted while off")
    for _, threads in ipairs({1, 2}) do
        with_threads(threads, function()
            lu.assertEquals(wb._mlp_phases(true).runs, 0, "on zeroes the counts")
            for _ = 1, 3 do fused("geglu", m, x):release() end
            local ph = wb._mlp_phases(false)
            lu.assertEquals(ph.runs, 3)
            for _, k in ipairs({"pack_x_ns", "gated_ns", "down_ns"}) do
                lu.assertTrue(ph[k] > 0, k .. " on " .. threads .. " threads")
            end
            lu.assertTrue(ph.pack_x_ns + ph.gated_ns + ph.down_ns <= ph.total_ns)
        end)
    end
    raises("_mlp_phases: expected true, false or nothing, got string", function() return wb._mlp_phases("on") end)
end

function TestMlp:test_bad_shapes_are_named()
    local x, wg, wu, wd = wb.zeros({4, 16}), wb.zeros({40, 16}), wb.zeros({40, 16}), wb.zeros({16, 40})
    raises("geglu_mlp: x has 12 features but w_gate and w_up expect 16",
        function() return wb.geglu_mlp(wb.zeros({4, 12}), wg, wu, wd) end)
    raises("swiglu_mlp: w_gate is {40, 16} but w_up is {40, 15}: both must be [hidden, in_features]",
        function() return wb.swiglu_mlp(x, wg, wb.zeros({40, 15}), wd) end)
    raises("geglu_mlp: w_down is {16, 41} but must be [out_features, 40] (the hidden size of w_gate {40, 16})",
        function() return wb.geglu_mlp(x, wg, wu, wb.zeros({16, 41})) end)
    raises("geglu_mlp: w_down is {640} but must be [out_features, 40]",
        function() return wb.geglu_mlp(x, wg, wu, wb.zeros({640})) end)
    raises("geglu_mlp: w_gate must be 2-D [hidden, in_features], got shape {40, 16, 1}",
        function() return wb.geglu_mlp(x, wb.zeros({40, 16, 1}), wu, wd) end)
    raises("geglu_mlp: b_down has shape {17} but w_down has 16 output features",
        function() return wb.geglu_mlp(x, wg, wu, wd, wb.zeros({17})) end)
    raises("geglu_mlp: w_up is bf16 but x is f32 (convert one with :to{dtype=...})",
        function() return wb.geglu_mlp(x, wg, wu:to{dtype = "bf16"}, wd) end)
    raises("geglu_mlp: x must have at least 1 dimension, got a scalar",
        function() return wb.geglu_mlp(wb.tensor(1.0), wg, wu, wd) end)
    raises("geglu_mlp: bad argument #4", function() return wb.geglu_mlp(x, wg, wu) end)
end

os.exit(lu.LuaUnit.run())
