-- test_graph.lua: CPU graph capture and replay: same results as eager, replays follow new input
-- data and writes to weights, allocations made during capture stay valid, the profiler shows the
-- graph launch and its kernels, and bad use is refused clearly.
local lu = require("luaunit")

TestGraph = {}

function TestGraph:test_replay_matches_eager_and_follows_inputs()
    wb.manual_seed(5)
    for _, impl in ipairs({"eager", "fused", "dual"}) do
        local mlp = wb.nn.GeGLUMLP(48, 160, {impl = impl, bias = true})
        local x = wb.randn({7, 48})
        local g = wb.graph.capture(function() return mlp(x) end)
        lu.assertEquals(#g:nodes(), ({eager = 5, fused = 4, dual = 2})[impl])
        lu.assertEquals(wb.max_abs_diff(g.outputs[1], mlp(x)), 0)
        for _ = 1, 3 do
            x:copy_(wb.randn({7, 48}))
            g:replay()
            lu.assertEquals(wb.max_abs_diff(g.outputs[1], mlp(x)), 0)
        end
        mlp.down_proj.weight:fill_(0.25) -- a write to a (packed) weight is seen too
        g:replay()
        lu.assertEquals(wb.max_abs_diff(g.outputs[1], mlp(x)), 0)
    end
end

function TestGraph:test_capture_owns_its_allocations()
    local a = wb.ones({1000})
    local g = wb.graph.capture(function()
        local t = a * 2      -- an intermediate Lua forgets after capture
        local u = t + 1
        return u * 1
    end)
    collectgarbage()
    collectgarbage()
    for _ = 1, 50 do local _ = wb.ones({1000}) * 7 end -- reuse freed buffers if the graph did not hold them
    a:fill_(3)
    g:replay()
    lu.assertEquals(g.outputs[1]:tolist()[1000], 7)
    lu.assertTrue(g:held_bytes() >= 3 * 4000)
end

function TestGraph:test_profiler_sees_graph_launch_and_kernels()
    local a = wb.ones({4})
    local g = wb.graph.capture(function() return (a + a) * a end)
    local p = wb.profiler.profile({}, function() g:replay() end)
    local launch, kernels, ops = nil, 0, 0
    for _, e in ipairs(p:events()) do
        if e.cat == "runtime" and e.name == "graph_launch" then launch = e end
        if e.cat == "op" then ops = ops + 1 end
    end
    lu.assertNotNil(launch)
    for _, e in ipairs(p:events()) do
        if e.cat == "kernel" then
            kernels = kernels + 1
            lu.assertEquals(e.correlation, launch.id)
        end
    end
    lu.assertEquals(kernels, 2)
    lu.assertEquals(ops, 0) -- no dispatcher in a replay
end

function TestGraph:test_bad_use()
    local g = wb.graph.capture(function() return wb.ones({2}) + 1 end)
    g:release()
    lu.assertErrorMsgContains("attempt to use a released graph", function() g:replay() end)
    lu.assertErrorMsgContains("attempt to use a released graph", function() return g.outputs end)
    lu.assertErrorMsgContains("captures do not nest", function()
        wb.graph.capture(function() wb.graph.capture(function() end) end)
    end)
    lu.assertErrorMsgContains("boom", function() wb.graph.capture(function() error("boom") end) end)
    lu.assertErrorMsgContains("result 1 of the captured function is a number, expected tensors",
        function() wb.graph.capture(function() return 1 end) end)
    lu.assertErrorMsgContains("bad argument #1", function() wb.graph.capture(42) end)
    -- a failed capture leaves no capture running
    local ok = pcall(wb.graph.capture, function() return wb.ones({2}) end)
    lu.assertTrue(ok)
end

function TestGraph:test_recapture_follows_replaced_tensors_and_new_arguments()
    local a, w = wb.ones({3}), wb.full({3}, 2)
    local g = wb.graph.capture(function(x) return x * w end, a)
    lu.assertEquals(g.outputs[1]:tolist(), {2, 2, 2})
    w = wb.full({3}, 5) -- a new tensor, not a write: replay keeps reading the captured one
    g:replay()
    lu.assertEquals(g.outputs[1]:tolist(), {2, 2, 2})
    local b = wb.full({3}, 3)
    lu.assertIs(g:recapture(b), g)
    lu.assertEquals(g.outputs[1]:tolist(), {15, 15, 15})
    lu.assertEquals(#g:nodes(), 1)
    b:fill_(1)
    g:replay()
    lu.assertEquals(g.outputs[1]:tolist(), {5, 5, 5})
    -- a failing function leaves a released graph, and says why
    local bad = wb.graph.capture(function(x) if x then error("boom") end return wb.ones({1}) end)
    local ok, err = pcall(bad.recapture, bad, true)
    lu.assertFalse(ok)
    lu.assertStrContains(err, "boom")
    lu.assertErrorMsgContains("attempt to use a released graph", function() bad:replay() end)
end

os.exit(lu.LuaUnit.run())
