-- test_findings_store.lua: wb.findings from groups computed in C over a session's store
-- (analyze_session) against the findings computed in Lua from the event tables (analyze), on
-- recorded profiles (two worker threads, shapes, stacks, memory) and on traces read back; and the
-- findings of more than 200,000 events (once left out of the table and the trace) with a Lua heap
-- that does not grow with the events.
local lu = require("luaunit")
local scratch = require("scratch")
local F = require("wb.findings")

local EXE = scratch.exe()

-- equal values, integers and floats told apart (cjson prints them differently)
local function same(a, b, where)
    lu.assertEquals(type(b), type(a), where)
    if type(a) ~= "table" then
        lu.assertEquals(b, a, where)
        lu.assertEquals(math.type(b), math.type(a), where)
        return
    end
    for k, v in pairs(a) do same(v, b[k], where .. "." .. tostring(k)) end
    for k in pairs(b) do lu.assertNotNil(a[k], where .. "." .. tostring(k) .. " only in the C groups' findings") end
end

-- ranges (nested), views, composite ops, a GeGLU MLP, steps; parallel kernels with two threads
local function program(opts)
    local threads, adaptive = wb.get_num_threads(), wb.set_threads_adaptive(false)
    wb.set_num_threads(2)
    local x, w, b = wb.rand({128, 256}), wb.rand({256, 256}), wb.rand({256})
    local mlp, one = wb.nn.GeGLUMLP(256, 128, {impl = "eager"}), wb.ones({1})
    local p = wb.profiler.profile(opts)
    p:start()
    for _ = 1, 4 do
        wb.profiler.range("fwd", function()
            local y = wb.linear(x, w, b)
            local z = wb.gelu(y) * y
            wb.profiler.range("inner", function() local _ = z:t():contiguous() + 1 end)
            local _ = mlp(x)
        end)
        local _ = x + 1
        wb.profiler.range("tiny", function() for _ = 1, 20 do local _ = one + one end end) -- host-bound
        p:step()
    end
    p:stop()
    wb.set_num_threads(threads)
    wb.set_threads_adaptive(adaptive)
    return p
end

local CTX = {device_info = wb.device_info(), machine = {busy = false}, replay_ns_per_kernel = 300}

TestFindingsGroups = {}

function TestFindingsGroups:test_profiles_give_the_lua_findings()
    local rules = {}
    for i, opts in ipairs({{activities = {"cpu", "device"}, record_shapes = true, with_stack = true, profile_memory = true},
        {activities = {"cpu", "device"}}, {activities = {"device"}}}) do
        local p = program(opts)
        local lua_list = F.analyze(p:events(), CTX)
        same(lua_list, (F.analyze_session(p:_result(), CTX)), "profile " .. i)
        for _, f in ipairs(lua_list) do rules[f.rule] = true end
    end
    -- the cases cover the rules that read sequences and shares, not only the per-kernel sums
    for _, r in ipairs({"view", "epilogue", "layout", "fusion", "host_bound", "gaps", "roofline"}) do
        lu.assertTrue(rules[r], "no " .. r .. " finding in the cases")
    end
end

-- a trace read back: the same findings as the Lua rules on the events read from it (no memory)
function TestFindingsGroups:test_trace_read_back_gives_the_lua_findings()
    local path = scratch.path(".json.gz")
    program({activities = {"cpu", "device"}, record_shapes = true, profile_memory = true}):export_chrome_trace(path)
    local events = require("wb.findings_trace").read(path)
    local lua_list = F.analyze(events, CTX)
    local list, n, device = F.analyze_session(wb.profiler.load_trace(path):_result(), CTX, true)
    same(lua_list, list, "trace")
    lu.assertEquals(n, #events)
    local k = 0
    for _, e in ipairs(events) do if e.cat == "kernel" or e.cat == "memcpy" or e.cat == "memset" then k = k + 1 end end
    lu.assertEquals(device, k)
end

-- more events than the table's old limit for findings (200,000): the findings come in the table
-- and the trace, and `workbench explain` reads them, without a Lua table per event
function TestFindingsGroups:test_large_profile_findings_without_event_tables()
    local A = wb.ones({1})
    local p = wb.profiler.profile({activities = {"cpu", "device"}}, function(s)
        for _ = 1, 4 do
            for _ = 1, 26000 do local _ = A + A end
            s:step()
        end
    end)
    lu.assertTrue(p:stats().events > 200000, "events: " .. p:stats().events)
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    local list = F.analyze_session(p:_result(), CTX)
    local grew_kb = collectgarbage("count") - before
    collectgarbage("restart")
    print(string.format("the findings of %d events: %.0f KiB of Lua memory", p:stats().events, grew_kb))
    lu.assertTrue(grew_kb < 1024, string.format("the findings took %.0f KiB of Lua memory", grew_kb))
    lu.assertTrue(#list >= 2, F.format(list))
    local t = p:table()
    lu.assertStrContains(t, "Findings (top ")
    lu.assertNotStrContains(t, "left out")
    local path = scratch.path(".json.gz")
    p:export_chrome_trace(path)
    local out = scratch.run(string.format("%s explain %s", EXE, path))
    lu.assertStrContains(out, (F.format(p:findings(), 1):gsub(" %[timing unreliable: busy machine%]", "")))
end

-- past max_memory the findings' index would outgrow the store's budget: the table and the trace
-- say so (naming the sizes), and `workbench explain` computes them from the trace
function TestFindingsGroups:test_findings_left_out_past_max_memory()
    local A = wb.ones({1})
    local p = wb.profiler.profile({activities = {"cpu", "device"}, max_memory = 4 << 20, spill_dir = scratch.dir()},
        function() for _ = 1, 40000 do local _ = A + A end end)
    lu.assertStrMatches(p:table(), ".*Findings: left out of the table for 800%d%d events %(their index would take " ..
        "about 10 MiB, over max_memory 4 MiB%); p:findings%(%) or p:explain%(%) computes them.*")
    local path = scratch.path(".json")
    p:export_chrome_trace(path)
    local f = assert(io.open(path))
    local text = f:read("a")
    f:close()
    lu.assertStrContains(text, '"findings_left_out":true')
    local out, code = scratch.run(string.format("%s explain %s", EXE, path))
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "] gaps: cpu:0 stream 0 is idle")
end

scratch.exit(lu.LuaUnit.run())
