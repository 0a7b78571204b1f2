-- test_profiler.lua: the schedule, nesting, correlation, the table, expectations, Chrome-trace
-- validity with hostile names, dropped-event accounting, and every bad input of the issue.
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")

local function count(events, pred)
    local n = 0
    for _, e in ipairs(events) do if pred(e) then n = n + 1 end end
    return n
end

local function linear_session(opts)
    wb.manual_seed(1)
    local lin = wb.nn.Linear(32, 64, {bias = true})
    local x = wb.randn({1024, 32})
    local p = wb.profiler.profile(opts)
    p:start()
    for _ = 1, 5 do
        local _ = lin(x)
        p:step()
    end
    p:stop()
    return p
end

TestRecording = {}

function TestRecording:test_linear_lesson_done_when()
    local p = linear_session{schedule = {wait = 1, warmup = 1, active = 3}, record_shapes = true, with_flops = true}
    local ev = p:events()
    lu.assertEquals(count(ev, function(e) return e.cat == "op" and e.name == "linear" end), 3)
    lu.assertEquals(count(ev, function(e) return e.cat == "op" and e.name == "t" end), 3)
    lu.assertEquals(count(ev, function(e) return e.cat == "op" and e.name == "addmm" end), 3)
    lu.assertEquals(count(ev, function(e) return e.cat == "op" and e.name == "add" end), 0)
    lu.assertEquals(count(ev, function(e) return e.cat == "step" end), 3)
    local by_id = {}
    for _, e in ipairs(ev) do if e.cat == "op" then by_id[e.id] = e end end
    local kernels = 0
    for _, e in ipairs(ev) do
        if e.cat == "kernel" then
            kernels = kernels + 1
            lu.assertStrContains(e.name, "_tn")
            lu.assertEquals(e.flops, 2 * 1024 * 32 * 64)
            lu.assertEquals(e.lane, "cpu:0 stream 0")
            lu.assertEquals(e.args.layout, "tn")
            lu.assertEquals(e.args.epilogue, "bias")
            lu.assertEquals(e.args.isa, wb.cpu_isa())
            lu.assertStrMatches(e.args.tile, "%d+x%d+")
            lu.assertTrue(e.args.threads >= 1)
            local op = by_id[e.correlation]
            lu.assertEquals(op.name, "addmm") -- never a t op
            lu.assertTrue(e.ts_ns >= op.ts_ns and e.ts_ns + e.dur_ns <= op.ts_ns + op.dur_ns)
            -- addmm sits inside linear
            lu.assertEquals(by_id[op.parent].name, "linear")
        end
    end
    lu.assertEquals(kernels, 3)
    for _, e in ipairs(ev) do
        if e.cat == "op" and e.name == "linear" then
            lu.assertEquals(e.shapes, {{1024, 32}, {64, 32}, {64}})
            lu.assertEquals(e.dtypes, {"f32", "f32", "f32"})
        end
    end
    local t = p:table{}
    lu.assertStrContains(t, "linear")
    lu.assertStrContains(t, "addmm")
    lu.assertStrContains(t, "wb_sgemm_")
    p:expect{ops = {linear = 1, t = 1, addmm = 1, add = 0}, kernels = 1, no_kernel_for = {"t"}}
end

function TestRecording:test_schedule_and_trace_ready()
    local ready = {}
    local p = linear_session{schedule = {wait = 1, warmup = 1, active = 2, repeat_ = 1},
        on_trace_ready = function(prof) ready[#ready + 1] = #prof:events() end}
    -- 5 steps: wait, warmup, active, active, then nothing (repeat_ = 1)
    lu.assertEquals(#ready, 1)
    lu.assertEquals(count(p:events(), function(e) return e.cat == "step" end), 2)
    lu.assertEquals(count(p:events(), function(e) return e.cat == "op" and e.name == "linear" end), 2)
    -- repeating cycles: trace ready after each active block
    ready = {}
    wb.manual_seed(1)
    local x, w = wb.randn({4, 8}), wb.randn({8, 8})
    local q = wb.profiler.profile{schedule = {wait = 0, warmup = 0, active = 1},
        on_trace_ready = function(prof) ready[#ready + 1] = count(prof:events(), function(e) return e.cat == "op" end) end}
    q:start()
    for _ = 1, 3 do local _ = wb.linear(x, w); q:step() end
    q:stop()
    lu.assertEquals(ready, {3, 3, 3}) -- linear, t, mm in each single-step cycle
end

-- torch.profiler keeps its last trace when stopped part-way through a later cycle
function TestRecording:test_schedule_stopped_mid_cycle_keeps_the_previous_cycle()
    wb.manual_seed(1)
    local x, w = wb.randn({4, 8}), wb.randn({8, 8})
    local function run(stop_after, sched)
        local ready = {}
        local p = wb.profiler.profile{schedule = sched,
            on_trace_ready = function(prof) ready[#ready + 1] = #prof:events() end}
        p:start()
        for i = 1, stop_after do
            -- cycle 1 does linears, later cycles adds: the table tells which cycle it shows
            wb.profiler.range("body", function()
                if i <= 3 then local _ = wb.linear(x, w) else local _ = x + x end
            end)
            p:step()
        end
        p:stop()
        return p, ready
    end
    -- cycle = wait 1, warmup 1, active 1: steps 1-3 are cycle 1; stop in step 5 (cycle 2's warmup)
    -- and in step 6 (inside cycle 2's active step, before its step() closed it)
    for _, stop_after in ipairs({4, 5}) do
        local p, ready = run(stop_after, {wait = 1, warmup = 1, active = 1})
        lu.assertEquals(#ready, 1)
        local t = p:table{sort_by = "count"}
        lu.assertStrContains(t, "linear")
        lu.assertNotStrContains(t, "\nadd ")
        lu.assertEquals(count(p:events(), function(e) return e.cat == "op" and e.name == "linear" end), 1)
        lu.assertEquals(count(p:events(), function(e) return e.cat == "op" and e.name == "add" end), 0)
        lu.assertEquals(count(p:events(), function(e) return e.cat == "step" end), 1)
        p:expect{range = "body", ops = {linear = 1, add = 0}, kernels = 1}
        local path = scratch.path()
        p:export_chrome_trace(path)
        local f = assert(io.open(path))
        local trace = cjson.decode(f:read("a"))
        f:close()
        os.remove(path)
        local names = {}
        for _, e in ipairs(trace.traceEvents) do names[e.name] = true end
        lu.assertTrue(names.linear)
        lu.assertNil(names.add)
    end
    -- with no wait, the next cycle starts recording right away: still the completed one
    local p = run(5, {wait = 0, warmup = 0, active = 3})
    lu.assertEquals(count(p:events(), function(e) return e.cat == "op" and e.name == "linear" end), 3)
    lu.assertEquals(count(p:events(), function(e) return e.cat == "op" and e.name == "add" end), 0)
    -- a second completed cycle replaces the first (and so on, in the two buffers)
    p = run(9, {wait = 0, warmup = 0, active = 3})
    lu.assertEquals(count(p:events(), function(e) return e.cat == "op" and e.name == "add" end), 3)
    lu.assertEquals(count(p:events(), function(e) return e.cat == "op" and e.name == "linear" end), 0)
    -- stopped inside the first cycle's active block: what it recorded so far, as before
    p = run(2, {wait = 0, warmup = 0, active = 3})
    lu.assertEquals(count(p:events(), function(e) return e.cat == "op" and e.name == "linear" end), 2)
end

function TestRecording:test_table_takes_torch_sort_keys()
    local p = linear_session{}
    local function first_row(key)
        local t = p:table{sort_by = key}
        local lines = {}
        for l in t:gmatch("[^\n]+") do lines[#lines + 1] = l end
        return lines[3]:match("^(%S+)")
    end
    for torch_key, own in pairs({self_cpu_time_total = "self_cpu", cpu_time_total = "cpu_total",
        self_device_time_total = "self_device", device_time_total = "device_total", count = "calls",
        self_cuda_time_total = "self_device", cuda_time_total = "device_total"}) do
        lu.assertEquals(first_row(torch_key), first_row(own), torch_key)
    end
    -- device time: the GEMM kernel (or the op that launched it) comes first, never t
    lu.assertNotEquals(first_row("device_time_total"), "t")
    local err = select(2, pcall(p.table, p, {sort_by = "gpu_time"}))
    lu.assertStrContains(err, "device_time_total")
end

function TestRecording:test_without_schedule_everything_is_recorded()
    local p = wb.profiler.profile({profile_memory = true}, function()
        local a = wb.ones({3})
        local _ = a + a
        wb.profiler.range("outer", function()
            wb.profiler.push("inner")
            local _ = a * a
            wb.profiler.pop()
        end)
        wb.synchronize()
    end)
    local ev = p:events()
    lu.assertEquals(count(ev, function(e) return e.cat == "op" and e.name == "add" end), 1)
    lu.assertEquals(count(ev, function(e) return e.cat == "range" end), 2)
    lu.assertEquals(count(ev, function(e) return e.cat == "runtime" and e.name == "synchronize" end), 1)
    lu.assertTrue(count(ev, function(e) return e.cat == "memory" and e.name == "alloc" end) >= 2)
    p:expect{range = "inner", ops = {mul = 1}, kernels = 1}
    local inner = p:range_instances("inner")
    lu.assertEquals(#inner, 1)
    lu.assertEquals(#inner[1].kernels, 1)
    lu.assertEquals(inner[1].host_ns, inner[1].dur_ns - inner[1].kernel_ns)
    lu.assertEquals(#p:range_instances("outer")[1].kernels, 1)
    local q = wb.profiler.profile({}, function() local _ = wb.ones({3}) * 2 end)
    lu.assertEquals(count(q:events(), function(e) return e.cat == "memory" end), 0) -- opt-in, as in PyTorch
    lu.assertTrue(q:stats().peak_memory > 0)
end

function TestRecording:test_activities_filter()
    local p = linear_session{activities = {"device"}}
    lu.assertEquals(count(p:events(), function(e) return e.cat == "op" end), 0)
    lu.assertEquals(count(p:events(), function(e) return e.cat == "kernel" end), 5)
    p = linear_session{activities = {"cpu"}}
    lu.assertEquals(count(p:events(), function(e) return e.cat == "kernel" end), 0)
end

function TestRecording:test_with_stack_points_at_the_script()
    local p = wb.profiler.profile({with_stack = true}, function()
        local a = wb.ones({2})
        local _ = a + a
    end)
    for _, e in ipairs(p:events()) do
        if e.cat == "op" then lu.assertStrContains(e.src, "test_profiler.lua:") end
    end
    lu.assertStrContains(p:table{group_by_stack_n = 1}, "test_profiler.lua:")
end

-- The library's frames are skipped by where the library is (its folder, resolved), not by a
-- "/wb/" anywhere in the path: a user's script under a folder named wb (or a checkout under one)
-- is the call site, also when it calls the library (wb.nn) that calls the ops.
function TestRecording:test_with_stack_in_a_folder_named_wb()
    local dir = scratch.dir() .. "/wb"
    os.execute("mkdir -p '" .. dir .. "/wb'")
    local script = scratch.file([[
local lin = wb.nn.Linear(4, 4)
local p = wb.profiler.profile({with_stack = true}, function()
    local a = wb.ones({2, 4})
    local _ = lin(a + a)
end)
for _, e in ipairs(p:events()) do
    if e.cat == "op" then print(e.name, e.src) end
end
]])
    local path = dir .. "/wb/user.lua"
    assert(os.rename(script, path))
    local exe = scratch.exe()
    local pipe = io.popen(string.format("'%s' '%s' 2>&1", exe, path))
    local out = pipe:read("a")
    pipe:close()
    local ops = 0
    for name, src in out:gmatch("(%S+)\t(%S+)\n") do
        ops = ops + 1
        lu.assertStrContains(src, "wb/user.lua:", name .. " is attributed to the user's script: " .. out)
    end
    lu.assertTrue(ops >= 3, out) -- add, linear and the linear's own ops
    lu.assertNotStrContains(out, "nil")
end

function TestRecording:test_dropped_events_are_counted_and_reported()
    local p = wb.profiler.profile({max_events = 16}, function()
        local a = wb.ones({1})
        for _ = 1, 50 do local _ = a + a end
    end)
    local st = p:stats()
    lu.assertEquals(st.events, 16)
    lu.assertTrue(st.dropped > 0)
    lu.assertStrContains(p:table{}, "events were dropped")
    local path = scratch.path()
    p:export_chrome_trace(path)
    local f = io.open(path)
    local doc = cjson.decode(f:read("a"))
    f:close()
    lu.assertEquals(doc.otherData.dropped_events, st.dropped)
end

-- A parallel cpu kernel shows each worker thread's share on its own lane: the shares of a
-- 2-thread GEMM lie inside the kernel's span and together cover it; the table shows the spread
-- between the fastest and the slowest thread; the Chrome trace names the lanes.
function TestRecording:test_per_thread_lanes_of_a_2_thread_gemm()
    local before = wb.get_num_threads()
    wb.set_num_threads(2)
    local adaptive = wb.set_threads_adaptive(false) -- two threads, even on a busy machine
    local a, b = wb.randn({256, 512}), wb.randn({512, 512})
    -- together the shares cover the kernel's span, up to the driver's setup before the fork and
    -- the join after it: on a loaded machine a thread can lose its core there for milliseconds,
    -- so the best of a few kernels is judged (each one's shares are checked in full)
    local p, best, best_dur = nil, -1, 0
    for _ = 1, 5 do
        p = wb.profiler.profile({activities = {"cpu", "device"}})
        p:start()
        wb.matmul(a, b)
        p:stop()
        local kernel, shares = nil, {}
        for _, e in ipairs(p:events()) do
            if e.cat == "kernel" then kernel = e end
            if e.cat == "thread" then shares[#shares + 1] = e end
        end
        lu.assertNotNil(kernel)
        lu.assertEquals(#shares, 2, "one share per worker thread")
        local t0, t1, lo, hi, work = kernel.ts_ns, kernel.ts_ns + kernel.dur_ns, math.huge, 0, 0
        for i, e in ipairs(shares) do
            lu.assertEquals(e.name, kernel.name)
            lu.assertEquals(e.args.kernel, kernel.id)
            lu.assertEquals(e.args.thread, i - 1)
            lu.assertEquals(e.lane, "cpu:0 thread " .. (i - 1))
            lu.assertEquals(e.args.unit, "tiles")
            lu.assertTrue(e.ts_ns >= t0 and e.ts_ns + e.dur_ns <= t1, "a share lies inside its kernel's span")
            lo, hi, work = math.min(lo, e.ts_ns), math.max(hi, e.ts_ns + e.dur_ns), work + e.args.work
        end
        lu.assertTrue(work > 0)
        if (hi - lo) / kernel.dur_ns > best then best, best_dur = (hi - lo) / kernel.dur_ns, kernel.dur_ns end
        if best >= 0.5 then break end
    end
    wb.set_num_threads(before)
    wb.set_threads_adaptive(adaptive)
    lu.assertTrue(best >= 0.5, string.format("shares span %.0f%% of %d ns at best", 100 * best, best_dur))
    lu.assertStrContains(p:table(), "Thread spread")
    local path = scratch.path()
    p:export_chrome_trace(path)
    local f = assert(io.open(path))
    local doc = cjson.decode(f:read("a"))
    f:close()
    os.remove(path)
    local lanes, slices = {}, 0
    for _, ev in ipairs(doc.traceEvents) do
        if ev.ph == "M" and ev.name == "thread_name" and ev.pid == 1 then lanes[ev.args.name] = ev.tid end
        if ev.ph == "X" and ev.cat == "thread" then
            slices = slices + 1
            lu.assertEquals(ev.pid, 1, "worker lanes belong to the cpu device")
        end
    end
    lu.assertEquals(slices, 2)
    lu.assertEquals(lanes["cpu:0 thread 0"], 1)
    lu.assertEquals(lanes["cpu:0 thread 1"], 2)
    -- a 1-thread kernel has no shares to show
    wb.set_num_threads(1)
    p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    wb.matmul(a, b)
    p:stop()
    wb.set_num_threads(before)
    for _, e in ipairs(p:events()) do lu.assertNotEquals(e.cat, "thread") end
end

-- A kernel above 100% of its ceiling means the ceiling is wrong: the table marks it and says so.
function TestRecording:test_table_flags_kernels_above_their_ceiling()
    local x, w = wb.randn({64, 256}), wb.randn({256, 256})
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    local y = wb.linear(x, w)
    p:stop()
    local real = wb.device_info
    wb.device_info = function()
        return {name = "a test CPU", isa = "none", threads = 1, peak_gflops = 1e-3, bandwidth_gbs = 1e-3,
            calibrated = "a ceiling the test set too low"}
    end
    local ok, out = pcall(p.table, p)
    wb.device_info = real
    assert(ok, out)
    lu.assertStrContains(out, "%!")
    lu.assertStrContains(out, "above 100% of its ceiling (marked !): the ceiling was measured too low " ..
        "(a ceiling the test set too low)")
end

TestTrace = {}

function TestTrace:test_json_is_valid_with_hostile_names()
    local names = {'quote " here', "back\\slash", "new\nline\ttab\r", "ctrl\1\31", "utf8 é ✓ 😀",
        "bad \255\254 bytes", "truncated \226\130", "overlong \192\175", "{\"json\": [1]}"}
    local p = wb.profiler.profile({record_shapes = true}, function()
        for _, n in ipairs(names) do
            wb.profiler.range(n, function() local _ = wb.ones({2}) + 1 end)
        end
    end)
    local path = scratch.path()
    p:export_chrome_trace(path)
    local f = io.open(path)
    local ok, doc = pcall(cjson.decode, f:read("a"))
    f:close()
    lu.assertTrue(ok, "trace is not valid JSON: " .. tostring(doc))
    local seen = {}
    for _, e in ipairs(doc.traceEvents) do
        if e.cat == "range" then seen[e.name] = true end
    end
    for _, n in ipairs({'quote " here', "back\\slash", "new\nline\ttab\r", "ctrl\1\31", "utf8 é ✓ 😀",
        "{\"json\": [1]}"}) do
        lu.assertTrue(seen[n], "range name lost: " .. n)
    end
    lu.assertTrue(seen["bad \u{FFFD}\u{FFFD} bytes"])
    -- lanes: a process per device, kernels on their own; flows from ops to kernels
    local pids, flows = {}, 0
    for _, e in ipairs(doc.traceEvents) do
        if e.cat == "kernel" then pids[e.pid] = true end
        if e.ph == "s" or e.ph == "f" then flows = flows + 1 end
    end
    lu.assertEquals(pids, {[1] = true})
    lu.assertTrue(flows > 0)
    os.remove(path)
end

-- A kernel event records the threads the kernel ran on, not the ones its launcher offered: a GEMM
-- too small to fork ran on one of the two offered, a large one on two (one share event each)
function test_kernel_events_record_the_threads_that_ran()
    local threads, adaptive = wb.get_num_threads(), wb.set_threads_adaptive(false)
    wb.set_num_threads(2)
    local small, large = wb.ones({2, 2}), wb.randn({256, 256})
    local p = wb.profiler.profile({activities = {"cpu", "device"}}, function()
        local _ = wb.matmul(small, small)
        local _ = wb.matmul(large, large)
    end)
    wb.set_num_threads(threads)
    wb.set_threads_adaptive(adaptive)
    local got = {}
    for _, e in ipairs(p:events({cat = "kernel"})) do
        if e.name:find("gemm", 1, true) then
            local shares = 0
            for _, t in ipairs(p:events({cat = "thread"})) do if t.args.kernel == e.id then shares = shares + 1 end end
            got[#got + 1] = {e.args.threads, shares}
        end
    end
    lu.assertEquals(got, {{1, 0}, {2, 2}})
end

TestExports = {}

function TestExports:test_stacks_of_a_profiled_mlp_line_by_line()
    wb.manual_seed(3)
    local mlp = wb.nn.GeGLUMLP(64, 128, {impl = "eager"})
    local x = wb.randn({4, 64})
    local p = wb.profiler.profile({with_stack = true}, function()
        for _ = 1, 3 do local _ = mlp(x) end
    end)
    local path = scratch.path()
    lu.assertEquals(p:export_stacks(path), path)
    local kernels, ops, total, sites = 0, {}, 0, {}
    local n = 0
    for line in io.lines(path) do
        n = n + 1
        local stack, weight = line:match("^(.+) (%d+)$")
        lu.assertNotNil(stack, "not 'frames weight': " .. line)
        total = total + tonumber(weight)
        lu.assertTrue(tonumber(weight) >= 1)
        local frames = {}
        for f in (stack .. ";"):gmatch("([^;]*);") do
            lu.assertNotEquals(f, "", "an empty frame in " .. line)
            frames[#frames + 1] = f
        end
        -- the call site first: this file, the line of mlp(x)
        lu.assertStrMatches(frames[1], ".*test_profiler%.lua:%d+")
        sites[frames[1]] = true
        lu.assertTrue(#frames >= 2 and #frames <= 4, line)
        local op = frames[2]
        lu.assertTrue(({linear = true, gelu = true, mul = true})[op], "outermost op " .. op)
        ops[op] = true
        local last = frames[#frames]
        if last:match("^wb_") then
            kernels = kernels + 1
            if op == "linear" then lu.assertEquals(frames[3], "mm") end -- linear -> mm -> the GEMM kernel
            lu.assertStrContains(last, op == "linear" and "_tn" or "")
        end
    end
    lu.assertTrue(n >= 5)
    lu.assertEquals(ops, {linear = true, gelu = true, mul = true})
    lu.assertEquals(kernels, 3) -- one stack per distinct kernel: the GEMM, gelu, mul
    lu.assertEquals(next(sites, next(sites)), nil) -- one call site
    -- the weights add up to the ops' time: kernels are inside their op on the CPU device
    local op_ns = 0
    for _, e in ipairs(p:events()) do
        if e.cat == "op" and e.parent == 0 then op_ns = op_ns + e.dur_ns end
    end
    lu.assertTrue(math.abs(total - op_ns) <= n, string.format("stacks %d ns, top-level ops %d ns", total, op_ns))
    os.remove(path)
    -- without with_stack, stacks start at the op
    local q = wb.profiler.profile({}, function() local _ = mlp(x) end)
    q:export_stacks(path)
    for line in io.lines(path) do lu.assertStrMatches(line, "^[%w_]+[;%w_]* %d+$") end
    os.remove(path)
end

function TestExports:test_memory_timeline_json_and_chart()
    collectgarbage() -- earlier tests' tensors are freed before, not during, the session
    collectgarbage()
    local p = wb.profiler.profile({profile_memory = true}, function()
        local a = wb.ones({1024})
        local b = a + a
        a, b = nil, nil
        collectgarbage()
        collectgarbage()
    end)
    local path = scratch.path(".json")
    local json_path, html_path = p:export_memory_timeline(path)
    lu.assertEquals(json_path, path)
    lu.assertEquals(html_path, path:gsub("%.json$", ".html"))
    local f = assert(io.open(path))
    local doc = cjson.decode(f:read("a"))
    f:close()
    lu.assertEquals(doc.unit, "bytes")
    lu.assertEquals(#doc.devices, 1)
    local cpu = doc.devices[1]
    lu.assertEquals(cpu.device, "cpu")
    local base = cpu.points[1][2]
    local levels = {}
    for i, pt in ipairs(cpu.points) do
        if i > 1 then lu.assertTrue(pt[1] >= cpu.points[i - 1][1]) end
        levels[#levels + 1] = pt[2] - base
    end
    lu.assertEquals(levels[2], 4096) -- ones: 1024 floats
    lu.assertEquals(levels[3], 8192) -- a + a
    lu.assertEquals(cpu.peak_bytes - base, 8192)
    lu.assertEquals(levels[#levels], 0) -- both freed
    local h = assert(io.open(html_path))
    local html = h:read("a")
    h:close()
    lu.assertStrContains(html, "<svg")
    lu.assertStrContains(html, "http-equiv='Content-Security-Policy'") -- it runs no script either
    lu.assertStrContains(html, "Allocated memory over time")
    os.remove(path)
    os.remove(html_path)
end

function TestExports:test_bad_paths_and_options()
    local p = wb.profiler.profile({}, function() local _ = wb.ones({2}) + 1 end)
    lu.assertErrorMsgContains("export_stacks: cannot open '/nonexistent/dir/s.txt' for writing: No such file or directory",
        function() p:export_stacks("/nonexistent/dir/s.txt") end)
    lu.assertErrorMsgContains("export_stacks needs a file path", function() p:export_stacks() end)
    lu.assertErrorMsgContains("export_memory_timeline needs a session recorded with profile_memory = true",
        function() p:export_memory_timeline(scratch.path()) end)
    local m = wb.profiler.profile({profile_memory = true}, function() local _ = wb.ones({2}) + 1 end)
    lu.assertErrorMsgContains("export_memory_timeline: cannot open '/nonexistent/dir/m.json' for writing: " ..
        "No such file or directory", function() m:export_memory_timeline("/nonexistent/dir/m.json") end)
    lu.assertErrorMsgContains("export_memory_timeline needs a file path", function() m:export_memory_timeline(3) end)
end

TestBadInput = {}

function TestBadInput:test_options()
    local function raises(frag, fn) lu.assertErrorMsgContains(frag, fn) end
    raises("schedule.wait must be an integer >= 0, got -1",
        function() wb.profiler.profile{schedule = {wait = -1, active = 1}} end)
    raises("schedule.active must be an integer >= 1, got 0",
        function() wb.profiler.profile{schedule = {active = 0}} end)
    raises("schedule.repeat_ must be an integer >= 0", function() wb.profiler.profile{schedule = {repeat_ = 1.5}} end)
    raises("unknown schedule field 'activ'", function() wb.profiler.profile{schedule = {activ = 1}} end)
    raises("unknown activity 'gpu'", function() wb.profiler.profile{activities = {"cpu", "gpu"}} end)
    raises("unknown option 'record_shape'", function() wb.profiler.profile{record_shape = true} end)
    raises("on_trace_ready must be a function", function() wb.profiler.profile{on_trace_ready = 1} end)
    raises("max_events must be an integer >= 16, got 3", function() wb.profiler.profile{max_events = 3} end)
    raises("max_events must be an integer >= 16, got 4.6116860184274e+18", function()
        wb.profiler.profile{max_events = 2 ^ 62}
    end)
end

function TestBadInput:test_table_and_trace_errors()
    local p = linear_session{}
    lu.assertErrorMsgContains("table: unknown sort key 'gpu_time'", function() return p:table{sort_by = "gpu_time"} end)
    lu.assertErrorMsgContains("table: unknown option 'rows'", function() return p:table{rows = 3} end)
    lu.assertErrorMsgContains("export_chrome_trace: cannot open '/nonexistent/dir/t.json' for writing",
        function() p:export_chrome_trace("/nonexistent/dir/t.json") end)
    lu.assertErrorMsgContains("pop() without a matching push()", function()
        local q = wb.profiler.profile{}
        q:start()
        local ok, err = pcall(wb.profiler.pop)
        q:stop()
        if not ok then error(err) end
    end)
end

function TestBadInput:test_expect_fields_and_failures()
    local p = linear_session{schedule = {wait = 1, warmup = 1, active = 3}}
    lu.assertErrorMsgContains("expect: unknown field 'kernel' (expected range, kernels, ops, no_kernel_for)",
        function() p:expect{kernel = 1} end)
    lu.assertErrorMsgContains("expect: no range named 'mlp_fwd' in the trace (ranges seen: none)",
        function() p:expect{range = "mlp_fwd", kernels = 5} end)
    local ok, err = pcall(p.expect, p, {kernels = 5, ops = {add = 1}})
    lu.assertFalse(ok)
    lu.assertStrContains(err, "expected 5 kernels per step, saw 1 in step 1 of 3: wb_sgemm_")
    lu.assertStrContains(err, "expected 1 'add' op per step, saw 0 in step 1 of 3")
    ok, err = pcall(p.expect, p, {kernels = {count = 1, match = "_nn"}}) -- counted nouns agree with the count
    lu.assertStrContains(err, "expected 1 kernel matching '_nn' per step, saw 0 in step 1 of 3")
    ok, err = pcall(p.expect, p, {no_kernel_for = {"addmm"}})
    lu.assertStrContains(err, "expected no kernel for 'addmm', but addmm launched wb_sgemm_")
end

-- A refused export names the script's line, not the library's (export_chrome_trace's message
-- used to start with profiler.lua:206, and under --sandbox every atomic save's with atomic.lua).
function TestExports:test_a_refused_export_names_the_callers_line()
    local p = wb.profiler.profile{}
    p:start()
    local _ = wb.ones({2}) + 1
    p:stop()
    local ok, err = pcall(function() p:export_chrome_trace("/nonexistent/dir/trace.json") end)
    lu.assertFalse(ok)
    lu.assertStrMatches(err, "^[^:]*test_profiler%.lua:%d+: export_chrome_trace: cannot open '/nonexistent/dir/trace%.json'.*")
    ok, err = pcall(function() p:export_stacks("/nonexistent/dir/stacks.txt") end)
    lu.assertStrMatches(err, "^[^:]*test_profiler%.lua:%d+: export_stacks: cannot open.*")
end

scratch.exit(lu.LuaUnit.run())
