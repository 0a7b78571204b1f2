-- test_compile_replay.lua: dispatch-free replay (a compiled function's tensor arguments are bound
-- into the replayed launches, no copy kernel), a prepacked weight bound too (its packing follows
-- the caller's tensor and its writes), the cases that must still copy (other strides, a buffer the
-- graph writes), tensor methods traced like wb.* functions, and
-- graph capture that stays linear in the number of ops.
local lu = require("luaunit")

local function kernel_names(fn)
    local p = wb.profiler.profile({}, fn)
    local names = {}
    for _, e in ipairs(p:events()) do
        if e.cat == "kernel" then names[#names + 1] = e.name end
    end
    return table.concat(names, " ")
end

TestCompileReplay = {}

function TestCompileReplay:test_inputs_are_bound_not_copied()
    wb.manual_seed(21)
    local w, b = wb.randn({24, 40}), wb.randn({24})
    local fast = wb.compile(function(x) return wb.linear(x, w, b) end)
    local _ = fast(wb.randn({6, 40}))
    for _ = 1, 3 do
        local x = wb.randn({6, 40})
        local names = kernel_names(function() local _ = fast(x) end)
        lu.assertNotStrContains(names, "copy")
        lu.assertStrContains(names, "sgemm")
        lu.assertEquals(wb.max_abs_diff(fast(x), wb.linear(x, w, b)), 0)
    end
    -- a view at an offset inside a bigger tensor, same strides: bound at its offset
    local big = wb.randn({20, 40})
    local rows = big:narrow(1, 9, 6)
    lu.assertNotStrContains(kernel_names(function() local _ = fast(rows) end), "copy")
    lu.assertEquals(wb.max_abs_diff(fast(rows), wb.linear(rows, w, b)), 0)
    -- other strides (a transposed view): copied into the graph's buffer, still right
    local xt = wb.randn({40, 6}):t()
    lu.assertStrContains(kernel_names(function() local _ = fast(xt) end), "copy")
    lu.assertEquals(wb.max_abs_diff(fast(xt), wb.linear(xt, w, b)), 0)
    -- and back to a bound input after the copy
    local x = wb.randn({6, 40})
    lu.assertEquals(wb.max_abs_diff(fast(x), wb.linear(x, w, b)), 0)
end

function TestCompileReplay:test_bound_input_outlives_the_caller()
    local fast = wb.compile(function(x) return x * 2 + 1 end)
    local _ = fast(wb.ones({64}))
    do
        local tmp = wb.full({64}, 3)
        lu.assertEquals(fast(tmp):tolist()[64], 7)
        tmp:release() -- the graph keeps its storage until the next call binds another
    end
    collectgarbage()
    for _ = 1, 20 do local _ = wb.full({64}, 100) end
    lu.assertEquals(fast(wb.full({64}, 5)):tolist()[1], 11)
end

function TestCompileReplay:test_cases_that_copy()
    wb.manual_seed(22)
    -- an output passed back in: the graph writes it, so it is copied first (else read while written)
    local sq = wb.compile(function(x) return x * x + 0 end)
    local r = sq(wb.full({8}, 2))
    lu.assertEquals(sq(r):tolist()[1], 16)
end

-- A weight argument that the GEMM prepacks (the packing cache is keyed on its storage and write
-- version): bound like any input, the launch's key moved to the caller's storage, so a call runs
-- the GEMM alone (no copy of the weight) and packs a new weight once. The result follows the
-- weight passed, another one, a view at an offset inside a bigger tensor, and a write into it
-- between calls (its version moves: packed again); the weight it was traced with, passed again,
-- is its own again. The same for the one-kernel MLP's three weights.
function TestCompileReplay:test_a_prepacked_weight_is_bound()
    wb.manual_seed(22)
    local lin = wb.compile(function(x, w) return wb.linear(x, w) end)
    local x, w1, w2 = wb.randn({4, 16}), wb.randn({8, 16}), wb.randn({8, 16})
    local _ = lin(x, w1)
    lu.assertNotStrContains(lin:explain(), "copied on each call")
    lu.assertEquals(kernel_names(function() local _ = lin(x, w2) end):gsub("%s", ""):match("copy"), nil)
    lu.assertEquals(wb.max_abs_diff(lin(x, w2), wb.linear(x, w2)), 0)
    lu.assertEquals(wb.max_abs_diff(lin(x, w1), wb.linear(x, w1)), 0)
    local big = wb.randn({20, 16})
    local rows = big:narrow(1, 5, 8)
    lu.assertEquals(wb.max_abs_diff(lin(x, rows), wb.linear(x, rows)), 0)
    w2:copy_(wb.randn({8, 16}))
    lu.assertEquals(wb.max_abs_diff(lin(x, w2), wb.linear(x, w2)), 0)
    big:fill_(0.5)
    lu.assertEquals(wb.max_abs_diff(lin(x, rows), wb.linear(x, rows)), 0)
    lu.assertEquals(wb.max_abs_diff(lin(x, w1), wb.linear(x, w1)), 0)
    -- the fused MLP: gate, up and down weights bound, one kernel a call
    local mlp = wb.compile(function(x, g, u, d) return wb.geglu_mlp(x, g, u, d) end)
    local function weights() return wb.randn({32, 16}), wb.randn({32, 16}), wb.randn({16, 32}) end
    local g1, u1, d1 = weights()
    local g2, u2, d2 = weights()
    local _ = mlp(x, g1, u1, d1)
    lu.assertNotStrContains(mlp:explain(), "copied on each call")
    lu.assertEquals(kernel_names(function() local _ = mlp(x, g2, u2, d2) end):match("copy"), nil)
    local want = wb.geglu_mlp(x, g2, u2, d2)
    lu.assertEquals(wb.max_abs_diff(mlp(x, g2, u2, d2), want), 0)
    u2:fill_(0.25)
    lu.assertEquals(wb.max_abs_diff(mlp(x, g2, u2, d2), wb.geglu_mlp(x, g2, u2, d2)), 0)
    lu.assertEquals(wb.max_abs_diff(mlp(x, g1, u1, d1), wb.geglu_mlp(x, g1, u1, d1)), 0)
end

function TestCompileReplay:test_graph_input_api()
    local x = wb.ones({5})
    local g = wb.graph.capture(function() return x * 3 end)
    local i, why = g:input(x)
    lu.assertEquals(i, 1)
    lu.assertNil(why)
    lu.assertTrue(g:bind(1, wb.full({5}, 2)))
    g:replay()
    lu.assertEquals(g.outputs[1]:tolist()[5], 6)
    lu.assertFalse(g:bind(1, wb.ones({6}))) -- another shape: back to the captured tensor
    g:replay()
    lu.assertEquals(g.outputs[1]:tolist()[5], 3)
    lu.assertFalse(g:bind(1, g.outputs[1])) -- a buffer the graph writes
    lu.assertErrorMsgContains("graph.bind: no input 2 (the graph declares 1)", function() g:bind(2, x) end)
    -- a tensor the graph writes into cannot be pointed elsewhere
    local y = wb.zeros({4})
    local h = wb.graph.capture(function() y:fill_(1) return y + 1 end)
    local _, why2 = h:input(y)
    lu.assertEquals(why2, "the graph writes into it")
    lu.assertFalse(h:bind(1, wb.zeros({4})))
end

function TestCompileReplay:test_tensor_methods_are_traced()
    wb.manual_seed(23)
    local w = wb.randn({8, 16})
    local f = wb.compile(function(x, y)
        local h = x:silu():mul(y):add(x:neg():exp())
        return wb.linear(h:view({2, 2, 16}):reshape({4, 16}), w):t():contiguous()
    end)
    local function ref(x, y) return wb.linear(wb.silu(x) * y + wb.exp(-x), w):t():contiguous() end
    local _ = f(wb.randn({4, 16}), wb.randn({4, 16}))
    for _ = 1, 3 do
        local x, y = wb.randn({4, 16}), wb.randn({4, 16})
        lu.assertTrue(wb.rel_error(f(x, y), ref(x, y)) < 1e-6)
    end
    -- the library's methods are restored after tracing, even when the function fails
    local silu = wb.Tensor.__methods.silu
    pcall(wb.compile(function(x) x:silu() error("inside") end), wb.ones({2}))
    lu.assertEquals(wb.Tensor.__methods.silu, silu)
end

-- Capture once scanned every held storage per op: quadratic, 20k ops took ~40x their eager time
-- here (0.9 s). Linear, it is a few times eager (it keeps a copy of every launch and holds every
-- buffer). Best of 3 of each, and a generous bound, so a noisy host does not fail it.
function TestCompileReplay:test_capture_is_linear_in_ops()
    local n = 20000
    local function seconds(capture)
        local best = math.huge
        for _ = 1, 3 do
            local a = wb.ones({1})
            local function chain()
                local x = a
                for _ = 1, n do x = x + 1 end
                return x
            end
            collectgarbage()
            local t0 = os.clock()
            local g = capture and wb.graph.capture(chain) or chain()
            best = math.min(best, os.clock() - t0)
            if capture then
                lu.assertEquals(g.outputs[1]:item(), n + 1)
                g:release()
            end
        end
        return best
    end
    local eager, captured = seconds(false), seconds(true)
    lu.assertTrue(captured / eager < 12, string.format("%d ops: eager %.3f s, capture %.3f s (%.1fx)", n, eager,
        captured, captured / eager))
end

os.exit(lu.LuaUnit.run())
