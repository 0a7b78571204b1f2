-- test_findings_store.lua: wb.findings from groups computed in C over a session's store
-- (analyze_session): a recorded profile (two worker threads, shapes, stacks, memory), its events
-- fed back through wb.profiler.from_events, and its trace read back all give the same findings;
-- explain reads a trace's allocation share; and the findings of more than 200,000 events (once
-- left out of the table and the trace) with a Lua heap that does not grow with the events.
local lu = require("luaunit")
local scratch = require("scratch")
local F = require("wb.findings")

local EXE = scratch.exe()

-- the findings of a list of event tables, made a profile (wb.profiler.from_events)
local function analyze(events, ctx) return (F.analyze_session(wb.profiler.from_events(events):_result(), ctx)) end

-- equal values, integers and floats told apart (cjson prints them differently)
local function same(a, b, where)
    lu.assertEquals(type(b), type(a), where)
    if type(a) ~= "table" then
        lu.assertEquals(b, a, where)
        lu.assertEquals(math.type(b), math.type(a), where)
        return
    end
    for k, v in pairs(a) do same(v, b[k], where .. "." .. tostring(k)) end
    for k in pairs(b) do lu.assertNotNil(a[k], where .. "." .. tostring(k) .. " only in the second list") end
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

-- p:events() fed back as tables (from_events) keep everything the rules read
function TestFindingsGroups:test_events_fed_back_give_the_profiles_findings()
    local rules = {}
    for i, opts in ipairs({{activities = {"cpu", "device"}, record_shapes = true, with_stack = true, profile_memory = true},
        {activities = {"cpu", "device"}}, {activities = {"device"}}}) do
        local p = program(opts)
        local list = F.analyze_session(p:_result(), CTX)
        same(list, analyze(p:events(), CTX), "profile " .. i)
        for _, f in ipairs(list) do rules[f.rule] = true end
    end
    -- the cases cover the rules that read sequences and shares, not only the per-kernel sums
    for _, r in ipairs({"view", "epilogue", "layout", "fusion", "host_bound", "gaps", "roofline"}) do
        lu.assertTrue(rules[r], "no " .. r .. " finding in the cases")
    end
end

-- The events of a trace read back by the one reader.
local function trace_events(path)
    local events = {}
    for e in wb.profiler.load_trace(path):each_event() do events[#events + 1] = e end
    return events
end

-- events that are not events: an error naming the event and the field, never a guess
function TestFindingsGroups:test_from_events_names_what_is_wrong()
    local cases = {
        {{5}, "event 1: not a table"},
        {{{cat = "op", name = "a"}, {cat = "opx"}}, "event 2: cat 'opx' is not one of op, kernel"},
        {{{cat = "op", ts_ns = 1.5}}, "event 1: ts_ns must be an integer, got a fraction"},
        {{{cat = "op", dur_ns = "1"}}, "event 1: dur_ns must be an integer, got string"},
        {{{cat = "op", dur_ns = -1}}, "event 1: dur_ns is negative"},
        -- (times and shapes past what any trace holds overflowed the rules' sums and products)
        {{{cat = "op", ts_ns = math.maxinteger}}, "event 1: ts_ns is out of range (at most 2^61 ns"},
        {{{cat = "op", dur_ns = 1 << 62}}, "event 1: dur_ns is out of range"},
        {{{cat = "op", shapes = {{3, -2}}}}, "event 1: a shape has a negative dimension"},
        {{{cat = "op", shapes = {{1 << 40, 1 << 20}}}}, "event 1: a shape holds more than 2^53 elements"},
        {{{cat = "kernel", lane = "gpu"}}, "event 1: lane 'gpu' is not host, cpu:0 stream 0, cpu:0 thread N or a device stream"},
        {{{cat = "op", shapes = {{1, "a"}}}}, "event 1: a shape must be a list of at most 8 integers"},
        {{{cat = "op", name = string.rep("x", 600)}}, "event 1: name is 600 bytes, over 511"},
        {{{cat = "op", args = 3}}, "event 1: args must be a table"},
        {{{cat = "kernel", args = {flow = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}}}, "event 1: flow must be a list of at most"},
    }
    for _, c in ipairs(cases) do
        local ok, err = pcall(wb.profiler.from_events, c[1])
        lu.assertFalse(ok, c[2])
        lu.assertStrContains(tostring(err), "from_events: " .. c[2])
    end
    lu.assertErrorMsgContains("from_events needs a list of events, got string", wb.profiler.from_events, "x")
    -- an empty list: an empty profile, whose findings are none
    lu.assertEquals(analyze({}, CTX), {})
end

-- a trace read back: the same findings as its events fed back as tables
function TestFindingsGroups:test_trace_read_back_gives_its_events_findings()
    local path = scratch.path(".json.gz")
    program({activities = {"cpu", "device"}, record_shapes = true, profile_memory = true}):export_chrome_trace(path)
    local events = trace_events(path)
    local list, n, device = F.analyze_session(wb.profiler.load_trace(path):_result(), CTX)
    same(analyze(events, CTX), list, "trace")
    lu.assertEquals(n, #events)
    local k = 0
    for _, e in ipairs(events) do if e.cat == "kernel" or e.cat == "memcpy" or e.cat == "memset" then k = k + 1 end end
    lu.assertEquals(device, k)
end

-- a trace written with profile_memory carries each allocation and free as long as its call, so
-- `workbench explain` splits the gaps as p:findings() did on the profile that wrote it (the
-- allocation share once read 0% from the trace, and dispatch took it)
function TestFindingsGroups:test_explain_reads_the_allocation_share_the_profile_had()
    local p = program({activities = {"cpu", "device"}, record_shapes = true, profile_memory = true})
    local function gaps(list) -- the gaps findings' sentences (a lane's, the workers'), in order
        local t = {}
        for _, f in ipairs(list) do
            if f.rule == "gaps" then t[#t + 1] = (f.message:gsub(" %[timing unreliable: busy machine%]", "")) end
        end
        table.sort(t)
        return t
    end
    local want = gaps(p:findings())
    lu.assertEquals(#want, 2)
    -- the profile's gaps hold allocation time in one sentence at least (on a loaded machine a
    -- lane's gaps can all read as preempted, the workers' still hold their allocations)
    local allocated = 0
    for _, s in ipairs(want) do allocated = allocated + tonumber(s:match("allocation %d+%% %(([%d.]+) us%)")) end
    lu.assertTrue(allocated > 0, table.concat(want, "\n"))
    local path = scratch.path(".json")
    p:export_chrome_trace(path)
    local out, code = scratch.run(string.format("%s explain --json %s", EXE, path))
    lu.assertEquals(code, 0, out)
    lu.assertEquals(gaps(require("cjson").decode(out:match("%[.*%]"))), want)
    -- the memory events read back are the recorded ones: name, time, bytes, device
    local function memory(q)
        local t = {}
        for e in q:each_event({cat = "memory"}) do
            t[#t + 1] = {e.name, e.ts_ns, e.dur_ns, e.bytes, e.args.allocated_bytes, e.args.device}
        end
        return t
    end
    local recorded = memory(p)
    lu.assertTrue(#recorded > 10)
    lu.assertEquals(memory(wb.profiler.load_trace(path)), recorded)
    -- a trace written before the slices (the counter track only) still reads its memory, as points
    local old, slices = scratch.read(path):gsub('\n{"ph": "X", "cat": "memory",[^\n]*', "")
    lu.assertEquals(slices, #recorded)
    local points = memory(wb.profiler.load_trace(scratch.file(old, ".json")))
    lu.assertEquals(#points, #recorded)
    for i, e in ipairs(points) do
        lu.assertEquals({e[1], e[2], e[3], e[5], e[6]},
            {"memory", recorded[i][2] + recorded[i][3], 0, recorded[i][5], recorded[i][6]})
    end
end

-- a trace with one preempted launch (five launches of one GEMM, their durations set to 28, 31,
-- 4128, 29 and 30 us): the rule reads the median launch and names the outlier
function TestFindingsGroups:test_roofline_outlier_in_a_trace()
    local x, w = wb.rand({64, 256}), wb.rand({256, 256})
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    for _ = 1, 5 do local _ = wb.linear(x, w) end
    p:stop()
    local path = scratch.path(".json")
    p:export_chrome_trace(path)
    local durations, n = {28, 31, 4128, 29, 30}, 0
    local text = scratch.read(path):gsub('("cat": "kernel",[^\n]-"dur": )[%d.]+', function(head)
        n = n + 1
        return head .. durations[n]
    end)
    lu.assertEquals(n, 5)
    local edited = scratch.file(text, ".json")
    local events = trace_events(edited)
    local flops = 2 * 64 * 256 * 256
    -- the median launch (30 us) at 4% of the peak: a warning
    local ctx = {device_info = {peak_gflops = flops / 30000 * 25, dram_gbs = 1e6}, machine = {busy = false}}
    local list = F.analyze_session(wb.profiler.load_trace(edited):_result(), ctx)
    same(analyze(events, ctx), list, "trace")
    local f
    for _, x in ipairs(list) do if x.rule == "roofline" then f = x end end
    lu.assertEquals({f.severity, f.evidence.median_ns, f.evidence.outliers, f.evidence.outlier_max_ns},
        {"warn", 30000.0, 1, 4128000})
    lu.assertAlmostEquals(f.evidence.achieved, flops / 30000, 1e-9)
    lu.assertStrContains(f.message, "1 launch of 5 ran over 3x slower than the median launch of 30.0 us (4128.0 us")
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
