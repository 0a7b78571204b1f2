-- test_profiler_store.lua: the profiler's event store at scale: max_memory with its policies
-- (spill, ring, stop), nothing dropped silently, the spill file gone on release and on kill -9, a
-- failed spill write as a clear error, events built only for what is asked, and .json.gz traces.
-- (key_averages' answers on synthetic events: test_profiler_answers.lua.)
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")

local SMALL = 4 << 20 -- the least max_memory: two chunks of 24,575 events

-- n eager adds of 1-element tensors (an op and its kernel: two events each)
local A = wb.ones({1})
local function adds(n)
    for _ = 1, n do local _ = A + A end
end

local function count_by_cat(events)
    local c = {}
    for _, e in ipairs(events) do c[e.cat] = (c[e.cat] or 0) + 1 end
    return c
end

local function trace_doc(path)
    local f = assert(io.open(path, "rb"))
    local doc = cjson.decode(f:read("a"))
    f:close()
    return doc
end

TestSpill = {}

-- past max_memory the oldest chunks go to the spill file and come back for every reader
function TestSpill:test_spilled_events_all_come_back()
    local p = wb.profiler.profile({max_memory = SMALL, spill_dir = scratch.dir()}, function() adds(40000) end)
    local st = p:stats()
    lu.assertEquals(st.dropped, 0)
    lu.assertEquals(st.events, 80001) -- and the step that stop() closes
    lu.assertTrue(st.spill_bytes >= 30000 * 64, "spilled " .. st.spill_bytes)
    lu.assertTrue(st.memory_bytes <= SMALL)
    local c = count_by_cat(p:events())
    lu.assertEquals(c.op, 40000)
    lu.assertEquals(c.kernel, 40000)
    local calls = {}
    for _, r in ipairs(p:key_averages()) do calls[r.kind .. ":" .. r.name] = r.calls end
    lu.assertEquals(calls["op:add"], 40000)
    local path = scratch.path(".json")
    p:export_chrome_trace(path)
    local x = 0
    for _, e in ipairs(trace_doc(path).traceEvents) do if e.ph == "X" then x = x + 1 end end
    lu.assertEquals(x, 80001)
    lu.assertStrContains(p:table(), "spilled to disk (memory_policy \"spill\")")
end

-- the file has no name while it exists: nothing in its folder, and it is gone with the session
function TestSpill:test_spill_file_has_no_name_and_goes_with_the_session()
    local dir = scratch.dir()
    local p = wb.profiler.profile{max_memory = SMALL, spill_dir = dir}
    p:start()
    adds(40000)
    p:stop()
    lu.assertTrue(p:stats().spill_bytes > 0)
    lu.assertEquals(scratch.run("ls -A " .. dir), "")
    local function open_in_dir()
        local out = scratch.run("ls -l /proc/$PPID/fd") -- the shell's parent: this process
        return out:find(dir, 1, true) ~= nil
    end
    lu.assertTrue(open_in_dir(), "the spill file should be open")
    p = nil
    collectgarbage()
    collectgarbage()
    lu.assertFalse(open_in_dir(), "the spill file outlived its session")
end

-- kill -9 while spilling: nothing is left behind in the spill folder
function TestSpill:test_kill_9_leaves_no_spill_file()
    local dir = scratch.dir()
    local script = scratch.file(string.format([[
        local p = wb.profiler.profile{max_memory = 4 << 20, spill_dir = %q}
        p:start()
        local a = wb.ones({1})
        for _ = 1, 40000 do local _ = a + a end
        assert(p:stats().spill_bytes > 0, "no spill")
        io.stdout:write("spilling\n")
        io.stdout:flush()
        os.execute("kill -9 $PPID")
    ]], dir), ".lua")
    local out = scratch.run(scratch.exe() .. " " .. script)
    lu.assertStrContains(out, "spilling")
    lu.assertEquals(scratch.run("ls -A " .. dir), "")
end

-- a write that fails (here: the file size limit, as a full disk would) stops the recording with
-- a clear error; what was recorded before is kept
function TestSpill:test_failed_spill_write_is_a_clear_error_and_keeps_the_events()
    local dir = scratch.dir()
    local script = scratch.file(string.format([[
        local p = wb.profiler.profile{max_memory = 4 << 20, spill_dir = %q}
        p:start()
        local a = wb.ones({1})
        for _ = 1, 60000 do local _ = a + a end
        local ok, err = pcall(p.stop, p)
        print("stop:", ok, err)
        local st = p:stats()
        print(string.format("kept %%d dropped %%d", st.events, st.dropped))
        print(p:table():match("WARNING[^\n]*"))
    ]], dir), ".lua")
    -- 2048 blocks: under one spilled chunk; the signal ignored so that write() fails instead
    local out = scratch.run("ulimit -f 2048; trap '' XFSZ; " .. scratch.exe() .. " " .. script)
    lu.assertStrContains(out, "stop:\tfalse")
    lu.assertStrContains(out, "recording stopped: writing")
    lu.assertStrContains(out, "File too large")
    local kept, dropped = out:match("kept (%d+) dropped (%d+)")
    lu.assertTrue(tonumber(kept) >= 24575, out)
    lu.assertEquals(tonumber(kept) + tonumber(dropped), 120003) -- the adds, ones() (an op and a kernel), the step
    lu.assertStrContains(out, "because the spill file failed")
end

TestRing = {}

-- ring keeps the newest steps whole: consecutive, ending with the last, each with all its ops
function TestRing:test_ring_keeps_whole_newest_steps()
    local a = wb.ones({1})
    local p = wb.profiler.profile{max_memory = SMALL, memory_policy = "ring"}
    p:start()
    for _ = 1, 100 do
        for _ = 1, 1000 do local _ = a + a end
        p:step()
    end
    p:stop()
    local ev = p:events()
    local steps = {}
    for _, e in ipairs(ev) do
        if e.cat == "step" then steps[#steps + 1] = e end
    end
    table.sort(steps, function(x, y) return x.ts_ns < y.ts_ns end)
    lu.assertTrue(#steps >= 10 and #steps < 101, "steps kept: " .. #steps)
    lu.assertEquals(steps[#steps].name, "ProfilerStep#100") -- the empty one closed by stop()
    for i = 2, #steps do
        lu.assertEquals(steps[i].name, "ProfilerStep#" .. (tonumber(steps[1].name:match("%d+")) + i - 1))
    end
    for i = 1, #steps - 1 do
        local s, n = steps[i], 0
        for _, e in ipairs(ev) do
            if e.cat == "op" and e.ts_ns >= s.ts_ns and e.ts_ns <= s.ts_ns + s.dur_ns then n = n + 1 end
        end
        lu.assertEquals(n, 1000, s.name)
    end
    for _, e in ipairs(ev) do lu.assertTrue(e.ts_ns >= steps[1].ts_ns, "an event before the first kept step") end
    local st = p:stats()
    lu.assertEquals(st.events, #ev)
    lu.assertEquals(st.events + st.dropped, 100 * 2001 + 1)
    lu.assertStrContains(st.dropped_note, "left the ring")
    lu.assertStrContains(p:table(), "WARNING: " .. st.dropped .. " events were dropped")
end

TestStop = {}

-- stop says where it stopped: the event count, the time and the step, in the table, the stats,
-- the trace's metadata and the findings
function TestStop:test_stop_names_where_it_stopped()
    local a = wb.ones({1})
    local p = wb.profiler.profile{max_memory = SMALL, memory_policy = "stop"}
    p:start()
    for _ = 1, 30 do
        for _ = 1, 1000 do local _ = a + a end
        p:step()
    end
    p:stop()
    local st = p:stats()
    lu.assertEquals(st.events, 2 * 24575)
    lu.assertEquals(st.events + st.dropped, 30 * 2001 + 1)
    lu.assertStrMatches(st.dropped_note, "%d+ events dropped: recording stopped after 49150 events at [%d.]+ ms " ..
        "%(step 24%) because max_memory %(4 MiB%) reached with memory_policy \"stop\"")
    lu.assertStrContains(p:table(), "recording stopped after 49150 events")
    local path = scratch.path(".json")
    p:export_chrome_trace(path)
    local doc = trace_doc(path)
    lu.assertEquals(doc.otherData.dropped_events, st.dropped)
    lu.assertEquals(doc.otherData.dropped, st.dropped_note)
    local f = p:findings()
    lu.assertEquals(f[1].rule, "dropped")
    lu.assertStrContains(f[1].message, "recording stopped after 49150 events")
end

TestEvents = {}

-- filters and batches: tables only for what is asked, and the same events as the whole list
function TestEvents:test_filters_and_the_iterator()
    local p = wb.profiler.profile({}, function()
        wb.profiler.range("r", function() adds(10) end)
        adds(5)
    end)
    local all = p:events()
    lu.assertEquals(#all, 32) -- 15 ops, 15 kernels, the range and the step
    lu.assertEquals(#p:events{cat = "kernel"}, 15)
    lu.assertEquals(#p:events{name = "add"}, 15)
    lu.assertEquals(#p:events{lane = "cpu:0 stream 0"}, 15)
    local r = p:events{cat = "range"}[1]
    lu.assertEquals(#p:events{cat = "op", from_ns = r.ts_ns, to_ns = r.ts_ns + r.dur_ns}, 10)
    local page, next_first = p:events{limit = 4, first = 3}
    lu.assertEquals(#page, 4)
    lu.assertEquals(page[1].id, all[3].id)
    lu.assertEquals(next_first, 7)
    local n = 0
    for e in p:each_event() do
        n = n + 1
        lu.assertEquals(e.id, all[n].id)
    end
    lu.assertEquals(n, 32)
    n = 0
    for e in p:each_event{cat = "op"} do n = n + 1; lu.assertEquals(e.cat, "op") end
    lu.assertEquals(n, 15)
end

function TestEvents:test_bad_filters()
    local p = wb.profiler.profile({}, function() adds(2) end)
    lu.assertErrorMsgContains("events: unknown cat 'kernels'", p.events, p, {cat = "kernels"})
    lu.assertErrorMsgContains("events: filter.limit must be >= 1, got 0", p.events, p, {limit = 0})
    lu.assertErrorMsgContains("events: filter.first must be >= 1, got 0", p.events, p, {first = 0})
    lu.assertErrorMsgContains("events: the filter must be a table, got string", p.events, p, "op")
    lu.assertErrorMsgContains("events: filter.lane must be a string, got number", p.events, p, {lane = 1})
end

function TestEvents:test_bad_memory_options()
    lu.assertErrorMsgContains('memory_policy must be "spill", "ring" or "stop", got drop', wb.profiler.profile,
        {memory_policy = "drop"})
    lu.assertErrorMsgContains("max_memory must be an integer number of bytes >= 4 MiB", wb.profiler.profile,
        {max_memory = 1000})
    lu.assertErrorMsgContains("spill_dir must be a folder path, got number", wb.profiler.profile, {spill_dir = 3})
    -- a spill folder that does not exist: the first spill fails loudly at stop, events kept
    local p = wb.profiler.profile{max_memory = SMALL, spill_dir = "/nonexistent/spill"}
    p:start()
    adds(40000)
    local ok, err = pcall(p.stop, p)
    lu.assertFalse(ok)
    lu.assertStrContains(err, "recording stopped: cannot create a spill file in /nonexistent/spill")
    lu.assertEquals(p:stats().events, 2 * 24575)
end

TestAggregate = {}

-- the table no longer builds a Lua table per event: its Lua memory does not grow with them
function TestAggregate:test_table_builds_no_event_tables()
    local p = wb.profiler.profile({}, function() adds(100000) end)
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    local t = p:table()
    local grew_kb = collectgarbage("count") - before
    collectgarbage("restart")
    lu.assertStrContains(t, "200001 recorded")
    lu.assertTrue(grew_kb < 4096, string.format("p:table() took %.0f KiB of Lua memory for 200001 events", grew_kb))
end

TestGzip = {}

-- .json.gz: gzip's own reader opens it, and the events are those of the plain trace
function TestGzip:test_gz_trace_is_the_plain_trace_compressed()
    local p = wb.profiler.profile({}, function() adds(3000) end)
    local plain, gz = scratch.path(".json"), scratch.path(".json.gz")
    p:export_chrome_trace(plain)
    p:export_chrome_trace(gz)
    local out, code = scratch.run("gzip -dc " .. gz .. " | cmp - " .. plain)
    lu.assertEquals(code, 0, out)
    local f = assert(io.open(gz, "rb"))
    lu.assertEquals(f:read(2), "\31\139") -- the gzip magic
    f:close()
end

TestLoad = {}

local function rows_text(rows)
    local t = {}
    for _, r in ipairs(rows) do
        t[#t + 1] = string.format("%s|%s|%s|%s %d %d %d %d %d %d %.0f %.0f %s %s", r.kind, r.name,
            tostring(r.input_shapes), tostring(r.src), r.calls, r.self_cpu_ns, r.cpu_total_ns, r.self_device_ns,
            r.device_total_ns, r.kernels, r.flops, r.bytes, tostring(r.spread_ns), tostring(r.spread_launches))
    end
    table.sort(t)
    return table.concat(t, "\n")
end

-- a trace read back (streaming, .json.gz here) gives the same table and the same events
function TestLoad:test_trace_read_back_gives_the_same_table()
    wb.manual_seed(2)
    local lin = wb.nn.Linear(64, 96, {bias = true})
    local x, big = wb.randn({64, 64}), wb.randn({256, 256})
    local p = wb.profiler.profile({record_shapes = true, with_stack = true, with_flops = true}, function(q)
        for _ = 1, 3 do
            wb.profiler.range("forward", function()
                local _ = lin(x)
                wb.profiler.range("inner", function() local _ = wb.matmul(big, big) end)
            end)
            q:step()
        end
    end)
    local path = scratch.path(".json.gz")
    p:export_chrome_trace(path)
    local q = wb.profiler.load_trace(path, {max_memory = SMALL})
    for _, o in ipairs({{}, {group_by_input_shape = true, group_by_stack_n = 1}}) do
        lu.assertEquals(rows_text(q:key_averages(o)), rows_text(p:key_averages(o)))
    end
    local a, b = p:events(), q:events()
    lu.assertEquals(#b, #a)
    for i, e in ipairs(a) do
        for _, k in ipairs({"name", "cat", "ts_ns", "dur_ns", "lane", "id", "correlation", "parent", "flops", "bytes",
            "src"}) do
            lu.assertEquals(b[i][k], e[k], string.format("event %d %s", i, k))
        end
        lu.assertEquals(b[i].shapes, e.shapes)
        lu.assertEquals(b[i].args.flow, e.args.flow)
    end
end

-- many events: the reader's counts are the recording's (spilled on both sides)
function TestLoad:test_counts_come_back_from_a_large_gz_trace()
    local p = wb.profiler.profile({max_memory = SMALL}, function() adds(60000) end)
    local path = scratch.path(".json.gz")
    p:export_chrome_trace(path)
    local q = wb.profiler.load_trace(path, {max_memory = SMALL})
    lu.assertEquals(q:stats().events, p:stats().events)
    lu.assertTrue(q:stats().spill_bytes > 0)
    lu.assertEquals(rows_text(q:key_averages()), rows_text(p:key_averages()))
end

-- workbench explain reads a .json.gz trace in the streaming pass: the findings of the profile
function TestLoad:test_explain_reads_a_gz_trace()
    wb.manual_seed(4)
    local mlp = wb.nn.GeGLUMLP(64, 128, {impl = "eager"})
    local x = wb.randn({8, 64})
    local p = wb.profiler.profile({record_shapes = true, with_flops = true}, function(q)
        for _ = 1, 3 do local _ = mlp(x); q:step() end
    end)
    local path = scratch.path(".json.gz")
    p:export_chrome_trace(path)
    local f = assert(io.open(path, "rb"))
    lu.assertEquals(f:read(2), "\31\139") -- gzip indeed
    f:close()
    local out, code = scratch.run(scratch.exe() .. " explain " .. path .. " --json")
    lu.assertEquals(code, 0, out)
    local want, got = {}, {}
    for _, f in ipairs(p:findings()) do want[f.rule] = true end
    for _, f in ipairs(cjson.decode(out:match("%[.*%]"))) do got[f.rule] = true end
    lu.assertTrue(want.fusion, "the eager GeGLU MLP has a fusion finding")
    lu.assertEquals(got, want)
end

function TestLoad:test_bad_traces_are_refused_in_one_line()
    lu.assertErrorMsgContains("load_trace: cannot open '/nonexistent/t.json'", wb.profiler.load_trace, "/nonexistent/t.json")
    lu.assertErrorMsgContains("is empty, not a trace", wb.profiler.load_trace, scratch.file("", ".json"))
    -- another tool's trace is read (its complete events as ranges); one with the workbench's event
    -- kinds but no producer was edited, and is refused
    local other = wb.profiler.load_trace(scratch.file('{"traceEvents": [\n{"ph": "X", "name": "a", "ts": 1, "dur": 1}\n]}\n', ".json"))
    lu.assertEquals(other:events()[1].cat, "range")
    lu.assertErrorMsgContains("has the workbench's event kinds but no otherData.producer", wb.profiler.load_trace,
        scratch.file('{"traceEvents": [\n{"ph": "X", "cat": "op", "name": "a", "pid": 0, "tid": 0, "ts": 1, "dur": 1}\n]}\n', ".json"))
    local p = wb.profiler.profile({}, function() adds(3) end)
    local good = scratch.path(".json")
    p:export_chrome_trace(good)
    local f = assert(io.open(good))
    local text = f:read("a")
    f:close()
    local broken = scratch.file(text:gsub('\n{"ph": "X", "cat": "op"', '\n{"ph": "X", "cat": "op", "ts": }', 1), ".json")
    lu.assertErrorMsgContains("not an event the workbench writes", wb.profiler.load_trace, broken)
    -- cut at a line's end, every line whole: still a truncated trace, not a shorter profile
    -- (lua_test_diff's half-trace case, in the sanitizer build's run, was read as 4 steps of 8)
    local lines = {}
    for line in text:gmatch("[^\n]*\n") do lines[#lines + 1] = line end
    lu.assertTrue(#lines > 6, tostring(#lines))
    for _, keep in ipairs({2, #lines // 2, #lines - 1}) do
        local cut = scratch.file(table.concat(lines, "", 1, keep), ".json")
        lu.assertErrorMsgContains("is truncated", wb.profiler.load_trace, cut)
    end
    lu.assertErrorMsgContains("load_trace: unknown option 'policy'", wb.profiler.load_trace, good, {policy = "ring"})
    lu.assertErrorMsgContains("load_trace needs a trace path", wb.profiler.load_trace, 3)
end

TestStacks = {}

local function stacks_of(p)
    local path = scratch.path(".folded")
    p:export_stacks(path)
    return scratch.read(path)
end

-- the folded stacks of a constructed stream, worked out by hand: a call site, an op inside an op,
-- the CPU device's kernel inside its op (its time is not the op's own), a device copy on cuda
-- (outside its op's time), a runtime call
function TestStacks:test_folded_stacks_of_a_constructed_stream()
    local p = wb.profiler.from_events({
        {cat = "op", name = "linear", ts_ns = 0, dur_ns = 1000, id = 1, src = "s.lua:3"},
        {cat = "op", name = "addmm", ts_ns = 100, dur_ns = 800, id = 2, parent = 1},
        {cat = "kernel", name = "k_gemm", ts_ns = 200, dur_ns = 500, id = 3, correlation = 2, lane = "cpu:0 stream 0"},
        {cat = "op", name = "to", ts_ns = 2000, dur_ns = 300, id = 4},
        {cat = "runtime", name = "cudaMemcpyAsync", ts_ns = 2050, dur_ns = 100, id = 5, parent = 4},
        {cat = "memcpy", name = "Memcpy HtoD", ts_ns = 2400, dur_ns = 250, id = 6, correlation = 4, lane = "cuda:0 stream 7"},
    })
    lu.assertEquals(stacks_of(p), table.concat({
        "s.lua:3;linear 200",          -- 1000 less addmm's 800
        "s.lua:3;linear;addmm 300",    -- 800 less its kernel's 500 (the cpu device runs it inside)
        "s.lua:3;linear;addmm;k_gemm 500",
        "to 200",                      -- 300 less the runtime call's 100; the copy ran on the device
        "to;Memcpy HtoD 250",
        "to;cudaMemcpyAsync 100",
    }, "\n") .. "\n")
end

-- a recording's stacks (nested ops, a composite MLP, ranges, call sites, the CPU device's kernels
-- inside their ops; a spilled session too) are those of its events fed back (from_events)
function TestStacks:test_folded_stacks_of_recordings_and_their_events()
    local x, w, b = wb.rand({16, 32}), wb.rand({48, 32}), wb.rand({48})
    local mlp = wb.nn.GeGLUMLP(32, 48, {impl = "eager"})
    for _, opts in ipairs({{with_stack = true}, {}, {activities = {"cpu"}}, {max_memory = SMALL, spill_dir = scratch.dir()}}) do
        local p = wb.profiler.profile(opts, function()
            for _ = 1, 3 do
                wb.profiler.range("fwd", function() local _ = wb.gelu(wb.linear(x, w, b)):t():contiguous() end)
                local _ = mlp(x)
            end
            if opts.max_memory then adds(30000) end
        end)
        local text = stacks_of(p)
        lu.assertTrue(select(2, text:gsub("\n", "")) >= 3, text)
        lu.assertEquals(stacks_of(wb.profiler.from_events(p:events())), text)
    end
end

-- and builds no table per event: its Lua memory does not grow with them
function TestStacks:test_folded_stacks_build_no_event_tables()
    local p = wb.profiler.profile({}, function() adds(100000) end)
    local path = scratch.path(".folded")
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    p:export_stacks(path)
    local grew_kb = collectgarbage("count") - before
    collectgarbage("restart")
    lu.assertEquals(p:stats().events, 200001)
    lu.assertTrue(grew_kb < 1024, string.format("export_stacks took %.0f KiB of Lua memory for 200001 events", grew_kb))
end

TestMemoryTimeline = {}

-- every point in the JSON (the same as from the event list), at most CHART_POINTS per device in
-- the chart, and the memory events never all held as tables at once: the export's peak Lua heap
-- against what the same events take as one list
function TestMemoryTimeline:test_export_streams_the_memory_events()
    local p = wb.profiler.profile({profile_memory = true}, function() adds(40000) end)
    local n = 0
    for _ in p:each_event{cat = "memory"} do n = n + 1 end
    lu.assertTrue(n > 40000, n .. " memory events")
    local X = require("wb.profiler_export")
    local path = scratch.path(".json")
    collectgarbage()
    collectgarbage()
    local base, peak = collectgarbage("count"), 0
    local function each()
        local it, seen = p:each_event{cat = "memory"}, 0
        return function()
            seen = seen + 1
            if seen % 500 == 0 then peak = math.max(peak, collectgarbage("count") - base) end
            return it()
        end
    end
    local _, html_path = X.export_memory_timeline(each, path, true)
    collectgarbage()
    collectgarbage()
    local before = collectgarbage("count")
    local all = p:events{cat = "memory"}
    local list_kb = collectgarbage("count") - before
    lu.assertTrue(peak < list_kb / 4, string.format("the export held %.0f KiB, the list takes %.0f KiB", peak, list_kb))
    local cpu = trace_doc(path).devices[1]
    local ref = X.memory_timeline(all)[1]
    lu.assertEquals(#cpu.points, n + 1)
    lu.assertEquals(cpu.points, ref.points)
    lu.assertEquals(cpu.peak_bytes, ref.peak_bytes)
    local f = assert(io.open(html_path))
    local html = f:read("a")
    f:close()
    lu.assertStrContains(html, string.format("drawn from at most %d points per device", X.CHART_POINTS))
    lu.assertStrContains(html, "<td>" .. n .. "</td>")
    local _, circles = html:gsub("<circle", "")
    lu.assertTrue(circles <= 2 * X.CHART_POINTS + 10, circles .. " circles drawn")
end

scratch.exit(lu.LuaUnit.run())
