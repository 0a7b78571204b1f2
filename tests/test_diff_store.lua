-- test_diff_store.lua: wb.diff's model computed in C over a session's store (s:diff_model()):
-- recorded profiles and traces read back give the model of their events fed back as tables
-- (wb.profiler.from_events); and wb.profiler.diff on profiles of more than 200,000 events with a
-- Lua heap that does not grow with the events.
local lu = require("luaunit")
local scratch = require("scratch")
local D = require("wb.diff")

-- a program with ranges (nested, one of them twice), views, composite ops, parallel kernels, memory events, steps
local function program(steps, opts)
    local x, w, b = wb.rand({64, 96}), wb.rand({128, 96}), wb.rand({128})
    local p = wb.profiler.profile(opts)
    p:start()
    for _ = 1, steps do
        wb.profiler.range("fwd", function()
            local y = wb.linear(x, w, b)
            local z = wb.gelu(y) * y
            for _ = 1, 2 do wb.profiler.range("inner", function() local _ = z:t():contiguous() + 1 end) end
        end)
        local _ = x + 1
        p:step()
    end
    p:stop()
    return p
end

-- a model without its step trees (compared apart) and the index of the step it draws
local function comparable(m)
    for _, n in pairs(m.nodes) do n.first = nil end
    for _, s in ipairs(m.steps) do s.root = nil end
    m.drawn_step = nil
    return m
end

-- a step's tree as (path, depth, ts, dur, cat) lines
local function tree_lines(root)
    local out = {}
    local function visit(n, depth)
        for _, c in ipairs(n.children) do
            out[#out + 1] = string.format("%s %d %d %d %s", c.path, depth, c.e.ts_ns, c.e.dur_ns, c.e.cat)
            visit(c, depth + 1)
        end
    end
    visit(root, 0)
    return out
end

-- The profile's model against the model of its events fed back as tables (wb.profiler.from_events):
-- per occurrence with every step's tree, and aggregated with the median step's (the one diff
-- --html draws).
local function assert_same_model(p, no_repeats)
    local fed = wb.profiler.from_events(p:events())
    local each = D.model_of(fed, {per_occurrence = true, draw = "all"})
    local all = D.model_of(p, {per_occurrence = true, draw = "all"})
    lu.assertNil(all.drawn_step)
    for k, st in ipairs(each.steps) do
        lu.assertEquals(tree_lines(all.steps[k].root), tree_lines(st.root), "step " .. k)
    end
    lu.assertEquals(comparable(all), comparable(each))
    local ranked = false
    for path in pairs(all.nodes) do ranked = ranked or path:find("#2", 1, true) ~= nil end
    lu.assertEquals(ranked, not no_repeats, "repeats told apart per occurrence")
    -- a model for the table alone keeps no tree
    for _, st in ipairs(D.model_of(p, {draw = "none"}).steps) do lu.assertNil(st.root) end
    local fed_model, native = D.model_of(fed), D.model_of(p)
    for path in pairs(native.nodes) do lu.assertNil(path:find("#%d"), path) end -- repeats aggregated
    -- the model keeps the median step's tree, the same one on both
    lu.assertEquals(native.drawn_step, D.median_step(native))
    lu.assertEquals(fed_model.drawn_step, native.drawn_step)
    lu.assertEquals(tree_lines(native.steps[native.drawn_step].root), tree_lines(fed_model.steps[native.drawn_step].root))
    lu.assertEquals(comparable(native), comparable(fed_model))
    -- integers stay integers (cjson and the formats print them so)
    for path, n in pairs(fed_model.nodes) do
        for i, v in ipairs(n.host) do lu.assertEquals(math.type(native.nodes[path].host[i]), math.type(v)) end
        for i, v in ipairs(n.device) do lu.assertEquals(math.type(native.nodes[path].device[i]), math.type(v)) end
    end
    return native
end

TestDiffModel = {}

function TestDiffModel:test_recorded_profiles_give_their_events_model()
    for _, opts in ipairs({{activities = {"cpu", "device"}, record_shapes = true, with_stack = true, profile_memory = true},
        {activities = {"cpu", "device"}}, {activities = {"cpu"}}}) do
        local m = assert_same_model(program(5, opts))
        lu.assertTrue(#m.order >= 10, "nodes: " .. #m.order)
    end
end

-- a trace without its step (a session always closes one at stop: cut out of the trace here)
function TestDiffModel:test_no_steps_one_synthetic_step()
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    local a = wb.rand({4, 4})
    wb.profiler.range("r", function() local _ = a + a end)
    p:stop()
    local path, cut = scratch.path(".json"), scratch.path(".json")
    p:export_chrome_trace(path)
    local f = assert(io.open(path))
    local text = f:read("a"):gsub('[^\n]*"cat": "step"[^\n]*\n', "")
    f:close()
    f = assert(io.open(cut, "w"))
    f:write(text)
    f:close()
    local m = assert_same_model(wb.profiler.load_trace(cut), true)
    lu.assertEquals(m.notes, {"no steps recorded (p:step()): the whole trace is one step"})
end

function TestDiffModel:test_loaded_trace_gives_its_events_model()
    local path = scratch.path(".json.gz")
    program(4, {activities = {"cpu", "device"}, record_shapes = true}):export_chrome_trace(path)
    assert_same_model(wb.profiler.load_trace(path))
end

function TestDiffModel:test_empty_profile_is_a_clear_error()
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    p:stop()
    local ok, err = pcall(D.model_of, p)
    lu.assertFalse(ok)
    lu.assertEquals(err.diff_error, "holds no ranges, ops or kernels (an empty profile)")
end

-- more events than the findings' limit in the table (200,000): the models hold samples per
-- node, not a table per event (which took ~600 bytes each: 120 MiB here)
function TestDiffModel:test_large_profiles_without_event_tables()
    local A = wb.ones({1})
    local function run()
        return wb.profiler.profile({activities = {"cpu", "device"}}, function(p)
            for _ = 1, 40 do
                for _ = 1, 2600 do local _ = A + A end
                p:step()
            end
        end)
    end
    local pa, pb = run(), run()
    lu.assertTrue(pa:stats().events > 200000, "events: " .. pa:stats().events)
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    local ma = D.model_of(pa, {per_occurrence = true})
    local grew_kb = collectgarbage("count") - before
    collectgarbage("restart")
    print(string.format("the model of %d events: %.0f KiB of Lua memory", pa:stats().events, grew_kb))
    -- per occurrence: 2 samples per occurrence (host and device time) and 2600 nodes of each kind
    -- per step (the heavier model; aggregated, the same samples in 2 nodes)
    lu.assertTrue(grew_kb < 24 * 1024, string.format("the model took %.0f KiB of Lua memory for %d events", grew_kb,
        pa:stats().events))
    lu.assertEquals(#ma.steps, 40)
    local r = wb.profiler.diff(pa, pb, {per_occurrence = true})
    lu.assertEquals(r.a.steps, 40)
    lu.assertTrue(#r.nodes >= 5200, "aligned nodes: " .. #r.nodes)
    -- by default a row per path: the add and its kernel, 2600 times a step each
    r = wb.profiler.diff(pa, pb)
    lu.assertEquals(#r.nodes, 2)
    for _, n in ipairs(r.nodes) do
        lu.assertEquals({n.count_a, n.count_b, #D.model_of(pa).nodes[n.path].device}, {2600, 2600, 2600 * 40}, n.label)
    end
end

scratch.exit(lu.LuaUnit.run())
