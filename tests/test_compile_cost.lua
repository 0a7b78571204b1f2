-- test_compile_cost.lua: wb.compile partitions elementwise ops by the bytes they move: a
-- hand-written kernel (swiglu, geglu) never splits a larger group, and where it covers a whole
-- group the faster of it and the generated kernel runs (measured, cached); explain says what
-- each group moves and why it was cut where it was.
local lu = require("luaunit")
local B = require("bounds")
local dags = require("random_dags")
local scratch = require("scratch")
local cjson = require("cjson")
local choices = require("wb.compile_choices")

local kernels_of = require("compiled").kernels_in_region

local function chain(a, b, c) return wb.sigmoid(a * 2 + b) * wb.silu(c) - a / 3 end
-- the same program for random_dags' bound: inputs 1..3, then ops 4..10 (a number divisor d
-- stands for 1 + |d|, as there)
local CHAIN = {{op = "mul", a = 1, b = 2.0}, {op = "add", a = 4, b = 2}, {op = "sigmoid", a = 5},
    {op = "silu", a = 3}, {op = "mul", a = 6, b = 7}, {op = "div", a = 1, b = 2.0}, {op = "sub", a = 8, b = 9}}

-- Before: three kernels (a generated group, the hand-written swiglu that split it, another group).
function test_chain_split_by_swiglu_is_one_generated_kernel()
    wb.manual_seed(3)
    for _, shape in ipairs({{7, 33}, {64, 256}}) do
        local a, b, c = wb.randn(shape), wb.randn(shape), wb.randn(shape)
        local f = wb.compile(chain)
        local got = f(a, b, c)
        local want = chain(a, b, c)
        B.assert_within_bound(got, dags.bound(CHAIN, {a, b, c}), "compiled chain")
        lu.assertTrue(wb.max_abs_diff(got, want) <= 1e-6, "compiled vs eager: " .. wb.max_abs_diff(got, want))
        local ks = kernels_of(function() f(a, b, c) end)
        lu.assertEquals(#ks, 1, f:explain())
        lu.assertStrMatches(ks[1].name, "wb_poi_fused_mul_add_sigmoid_silu_%d+")
        lu.assertEquals(ks[1].args.ops, "mul add sigmoid silu mul div sub")
        local ex = f:explain()
        local bytes = 4 * a:numel() * 4 -- three inputs read once, one output written once
        lu.assertStrContains(ex, string.format("(3 inputs), moves %s: reads 3 inputs once, writes 1",
            bytes >= 1048576 and string.format("%.1f MiB", bytes / 1048576) or string.format("%.1f KiB", bytes / 1024)))
        lu.assertStrContains(ex, "cut at: in1 argument 1; in2 argument 2; in3 argument 3; out a result of the function")
        lu.assertStrContains(ex, "holds silu*mul: not the hand-written swiglu, which would split the group")
    end
end

function test_explain_names_each_cut()
    local a, b = wb.randn({5, 40}), wb.randn({5, 40})
    local f = wb.compile(function(x, y)
        local t = wb.tanh(x) * y
        return wb.sigmoid(t) + 1, wb.relu(t) - 2
    end)
    local s, r = f(a, b)
    local t = wb.tanh(a) * b
    lu.assertEquals(wb.max_abs_diff(s, wb.sigmoid(t) + 1), 0)
    lu.assertEquals(wb.max_abs_diff(r, wb.relu(t) - 2), 0)
    local ex = f:explain()
    -- t is read twice: it must reach memory, so its group ends there and two groups start from it
    lu.assertStrContains(ex, "tanh mul (2 inputs)")
    lu.assertStrContains(ex, "cut at: in1 argument 1; in2 argument 2; out read by 2 ops (sigmoid, relu)")
    lu.assertStrContains(ex, "sigmoid add (1 input), moves 1.6 KiB: reads 1 input once, writes 1\n" ..
        "    cut at: in1 mul's result, read by 2 ops; out a result of the function")
    -- a view is not elementwise: the group after it starts at its result
    local g = wb.compile(function(x) return wb.exp(x:t()) * 2 end)
    g(a)
    lu.assertStrContains(g:explain(), "cut at: in1 t's result, not elementwise")
end

-- More inputs than a generated kernel takes (wb.codegen.max_inputs, 5): the group is cut where the
-- next producer would not fit, into generated kernels, not run as eager ops. Before: 7 inputs,
-- one group refused whole, 9 eager kernels.
local function seven(a, b, c, d, e, f, g) return ((wb.sigmoid(a * 2 + b) * c - d) * e + f / 3) * g end
local SEVEN = {{op = "mul", a = 1, b = 2.0}, {op = "add", a = 8, b = 2}, {op = "sigmoid", a = 9}, {op = "mul", a = 10, b = 3},
    {op = "sub", a = 11, b = 4}, {op = "mul", a = 12, b = 5}, {op = "div", a = 6, b = 2.0}, {op = "add", a = 13, b = 14},
    {op = "mul", a = 15, b = 7}}

function test_a_group_of_more_inputs_than_a_kernel_takes_is_cut_into_generated_kernels()
    lu.assertEquals(wb.codegen.max_inputs, 5)
    wb.manual_seed(5)
    for _, shape in ipairs({{3, 17}, {64, 128}}) do
        local x = {}
        for i = 1, 7 do x[i] = wb.randn(shape) end
        local f = wb.compile(seven)
        local got = f(table.unpack(x))
        B.assert_within_bound(got, dags.bound(SEVEN, x), "compiled seven-input chain")
        lu.assertTrue(wb.max_abs_diff(got, seven(table.unpack(x))) <= 1e-6)
        local ex = f:explain()
        local ks = kernels_of(function() f(table.unpack(x)) end)
        lu.assertEquals(#ks, 2, ex)
        for _, k in ipairs(ks) do lu.assertStrMatches(k.name, "wb_poi_fused_.*") end
        lu.assertStrContains(ex, "mul add sigmoid mul (3 inputs)")
        lu.assertStrContains(ex, "sub mul div add mul (5 inputs)")
        lu.assertStrContains(ex, "out read by sub, in the next kernel: together they would take more than 5 inputs")
        lu.assertStrContains(ex, "in1 mul's result: with it the kernel would take more than 5 inputs")
        lu.assertNotStrContains(ex, "takes at most")
    end
end

-- A random program over 6-9 inputs that reads each once: two chains of ops (each binary op takes
-- the next input, a unary op now and then), joined by a last binary op; in random_dags' form.
local function wide_case(rng)
    local n, rows, cols = rng(6, 9), rng(1, 24), rng(1, 40)
    local shapes = {{rows, cols}}
    for i = 2, n do shapes[i] = rng() < 0.2 and {1, cols} or rng() < 0.2 and {cols} or {rows, cols} end
    local prog = {}
    local function add(op, a, b)
        prog[#prog + 1] = {op = op, a = a, b = b}
        return n + #prog
    end
    local function chain(first, last)
        local v = first
        for i = first + 1, last do
            if rng() < 0.4 then v = add(dags.UNARY[rng(1, #dags.UNARY)], v) end
            local op = dags.BINARY[rng(1, #dags.BINARY)]
            if rng() < 0.5 and op ~= "div" then v = add(op, i, v) else v = add(op, v, i) end
        end
        return v
    end
    local k = rng(1, n - 1)
    local left, right = chain(1, k), chain(k + 1, n)
    add(dags.BINARY[rng(1, 3)], left, right)
    return shapes, prog
end

-- Random programs over 6-9 inputs: every group fits a kernel (none runs eagerly for its
-- inputs), and the compiled result is within the eager program's bound.
function test_random_wide_programs_are_cut_to_fit()
    math.randomseed(21)
    local cut, groups = 0, 0
    for case = 1, 12 do -- each case compiles 2-4 kernels (~2 s each on a loaded 2-core host)
        local shapes, prog = wide_case(math.random)
        local inputs = {}
        for i, sh in ipairs(shapes) do inputs[i] = wb.randn(sh) end
        local f = wb.compile(function(...) return dags.run(prog, #shapes, dags.apply, ...) end)
        local got = f(table.unpack(inputs))
        local ex = f:explain()
        lu.assertNotStrContains(ex, "takes at most", "case " .. case)
        for n in ex:gmatch("%((%d+) inputs?%), moves") do
            lu.assertTrue(tonumber(n) <= 5, string.format("case %d: a group of %s inputs\n%s", case, n, ex))
            groups = groups + 1
        end
        if ex:find("more than 5 inputs", 1, true) then cut = cut + 1 end
        local z = dags.bound(prog, inputs)
        local i, j, g, w, e = B.first_outside(got:expand(shapes[1]), z)
        if i then
            lu.fail(string.format("case %d: [%d][%d] = %.9g, expected %.9g, |difference| %.3g > bound %.3g\n%s", case, i, j,
                g, w, math.abs(g - w), e, ex))
        end
    end
    print(string.format("\nwide programs: %d of 12 cut for their inputs, %d generated groups", cut, groups))
    lu.assertTrue(cut >= 6, "too few programs needed a cut: " .. cut)
end

-- A pair the hand-written kernel covers whole: whichever of the two measured faster runs, and
-- explain gives both times; the choice is kept for the shape (a second compile reuses it).
function test_gated_pair_picks_the_faster_kernel_measured()
    for _, case in ipairs({{name = "geglu", fn = function(g, u) return wb.gelu(g, {approximate = "tanh"}) * u end},
        {name = "swiglu", fn = function(g, u) return wb.silu(g) * u end}}) do
        local g, u = wb.randn({16, 512}), wb.randn({16, 512})
        local f = wb.compile(case.fn)
        local got = f(g, u)
        lu.assertEquals(wb.max_abs_diff(got, case.fn(g, u)), 0)
        local ex = f:explain()
        local gen, hand = ex:match("measured: the generated kernel ([%d.]+) us per call, the hand%-written " ..
            case.name .. " ([%d.]+) %(medians of 7 alternating rounds")
        lu.assertNotNil(gen, ex)
        local ks = kernels_of(function() f(g, u) end)
        lu.assertEquals(#ks, 1, ex)
        -- explain prints one decimal: equal there, the choice went by the unrounded medians, either way
        local generated = ks[1].name:match("^wb_poi_fused_") ~= nil
        if tonumber(gen) ~= tonumber(hand) then lu.assertEquals(generated, tonumber(gen) < tonumber(hand), ex) end
        if generated then
            lu.assertStrMatches(ks[1].name, "wb_poi_fused_.*")
            lu.assertStrContains(ex, "group wb_poi_fused_")
        else
            lu.assertStrMatches(ks[1].name, "wb_" .. case.name .. "_.*")
            lu.assertStrContains(ex, "group of " .. (case.name == "geglu" and "gelu_tanh" or "silu") ..
                " mul: the hand-written " .. case.name)
        end
        -- cached: a new function on the same shape reports the same measurement
        local f2 = wb.compile(case.fn)
        f2(g, u)
        lu.assertStrContains(f2:explain(), string.format("generated kernel %s us per call, the hand-written %s %s",
            gen, case.name, hand))
        -- fuse = false: no hand-written kernel, the generated one, and nothing measured
        local f3 = wb.compile(case.fn, {fuse = false})
        f3(g, u)
        lu.assertStrContains(f3:explain(), "group wb_poi_fused_")
        lu.assertNotStrContains(f3:explain(), "measured")
    end
end

-- The choice is kept on disk (the code generation cache's folder): a later process on this
-- machine and build takes it instead of timing again (a planted entry decides the kernel, and
-- explain says where it came from); a damaged file is measured over and written anew.
function test_a_measured_choice_is_kept_for_later_processes()
    local cache = scratch.path("_choices")
    local path = cache .. "/" .. choices.FILE
    local code = "local f = wb.compile(function(g, u) return wb.gelu(g, {approximate = 'tanh'}) * u end) " ..
        "local g, u = wb.randn({8, 256}), wb.randn({8, 256}) f(g, u) " ..
        "local p = wb.profiler.profile({activities = {'cpu', 'device'}}, function() f(g, u) end) " ..
        "for _, e in ipairs(p:events()) do if e.cat == 'kernel' then print('kernel', e.name) end end print(f:explain())"
    local function child(wait_share)
        return io.popen("WB_COMPILE_WAIT_SHARE=" .. (wait_share or "0") .. " WB_CACHE_DIR=" .. cache .. " " ..
            scratch.exe() .. " --threads 1 -e \"" .. code .. "\" 2>&1"):read("a")
    end
    local function entries()
        local f = io.open(path)
        lu.assertNotNil(f, "no " .. path)
        local doc = cjson.decode(f:read("a"))
        f:close()
        return doc, doc[choices.machine_key()]
    end
    local key = "geglu:f32:cpu:8x256:1"
    -- timed while this thread waited for a CPU over 5% of the time (forced): not kept on disk
    local busy = child("0.5")
    lu.assertStrContains(busy, "measured: the generated kernel")
    lu.assertStrContains(busy, "this thread waited for a CPU 50% of the timing (over 5%: the machine was busy), so the " ..
        "choice is kept for this process only, not on disk)")
    lu.assertNil(io.open(path), "a choice timed on a busy machine was written to " .. path)
    local bad = child("lots")
    lu.assertStrContains(bad, "WB_COMPILE_WAIT_SHARE='lots': expected a share of the timing from 0 to 1")
    local first = child()
    lu.assertStrContains(first, "measured: the generated kernel")
    lu.assertNotStrContains(first, "earlier process")
    local doc, mine = entries()
    lu.assertNotNil(mine and mine[key], first)
    -- the opposite of what was measured, with times that say so
    local planted = not mine[key].generated
    mine[key] = {generated = planted, gen_us = planted and 1.5 or 999.5, hand_us = planted and 999.5 or 1.5, reps = 3}
    local f = assert(io.open(path, "w"))
    f:write(cjson.encode(doc))
    f:close()
    local second = child()
    lu.assertStrContains(second, string.format("the generated kernel %.1f us per call, the hand-written geglu %.1f " ..
        "(medians of 7 alternating rounds of 3 calls on the traced inputs; measured by an earlier process, kept in %s",
        mine[key].gen_us, mine[key].hand_us, path))
    lu.assertStrContains(second, planted and "kernel\twb_poi_fused_" or "kernel\twb_geglu_")
    -- damaged: measured again, and the file is whole again
    f = assert(io.open(path, "w"))
    f:write("{\"not json")
    f:close()
    local third = child()
    lu.assertStrContains(third, "measured: the generated kernel")
    lu.assertNotStrContains(third, "earlier process")
    local _, again = entries()
    lu.assertNotNil(again and again[key], third)
end

-- Shapes that do not broadcast: the op's one-line message, naming both shapes, at the caller's line.
function test_shapes_that_do_not_broadcast_are_named()
    local f = wb.compile(function(a, b) return wb.sigmoid(a) * b end)
    local ok, err = pcall(f, wb.randn({3, 4}), wb.randn({5, 4}))
    lu.assertFalse(ok)
    lu.assertStrContains(err, "mul: shapes {3, 4} and {5, 4} do not broadcast")
    lu.assertStrContains(err, "test_compile_cost.lua:")
    lu.assertNotStrContains(err, "compile.lua")
end

scratch.exit(lu.LuaUnit.run())
