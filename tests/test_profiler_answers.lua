-- test_profiler_answers.lua: the profiler's C analysis on synthetic events with answers worked by
-- hand (wb.profiler.from_events): key_averages (self and total time on both sides, nested ops,
-- ranges, kernels charged up the op chain, a parallel kernel's thread spread, grouping by shapes
-- and call sites), and the instances p:range_instances and p:expect count (nested and repeated
-- ranges, kernels on a span's edges, steps, the whole trace). And the event schema: every key the
-- trace writer and p:events() put on an event is one the schema declares, for that kind of event.
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")

-- A range "fwd" [0, 1000] holding linear (id 1) [100, 500] with matmul (id 2, its child)
-- [150, 350], matmul's kernel k_gemm [160, 310] on two threads (140 and 100 ns), linear's own
-- kernel k_bias [360, 410], add [600, 700] and a runtime call [800, 850]; after the range a
-- second linear (id 4) [1200, 1300] with its k_bias [1210, 1240].
local function events()
    return {
        {cat = "range", name = "fwd", ts_ns = 0, dur_ns = 1000},
        {cat = "op", name = "linear", id = 1, ts_ns = 100, dur_ns = 400, flops = 2000, bytes = 300,
            shapes = {{4, 8}}, dtypes = {"f32"}, src = "a.lua:1"},
        {cat = "op", name = "matmul", id = 2, parent = 1, ts_ns = 150, dur_ns = 200, flops = 1000, bytes = 100},
        {cat = "kernel", name = "k_gemm", id = 10, correlation = 2, ts_ns = 160, dur_ns = 150, flops = 1000,
            bytes = 100, args = {threads = 2}},
        {cat = "thread", name = "k_gemm", lane = "cpu:0 thread 0", ts_ns = 160, dur_ns = 140, args = {kernel = 10, thread = 0}},
        {cat = "thread", name = "k_gemm", lane = "cpu:0 thread 1", ts_ns = 160, dur_ns = 100, args = {kernel = 10, thread = 1}},
        {cat = "kernel", name = "k_bias", id = 11, correlation = 1, ts_ns = 360, dur_ns = 50, bytes = 64},
        {cat = "op", name = "add", id = 3, ts_ns = 600, dur_ns = 100, flops = 10, bytes = 40},
        {cat = "runtime", name = "sync", ts_ns = 800, dur_ns = 50},
        {cat = "op", name = "linear", id = 4, ts_ns = 1200, dur_ns = 100, flops = 500, bytes = 80,
            shapes = {{2, 8}}, dtypes = {"f32"}, src = "a.lua:2"},
        {cat = "kernel", name = "k_bias", id = 12, correlation = 4, ts_ns = 1210, dur_ns = 30, bytes = 32},
    }
end

local FIELDS = {"calls", "cpu_total_ns", "self_cpu_ns", "self_device_ns", "device_total_ns", "kernels", "flops",
    "bytes"}

-- rows keyed "kind name [shapes] [src]", each as the FIELDS' values and the spread
local function rows_of(p, o)
    local t = {}
    for _, r in ipairs(p:key_averages(o)) do
        local key = r.kind .. " " .. r.name .. (r.input_shapes and r.input_shapes ~= "" and (" " .. r.input_shapes) or "") ..
            (r.src and (" " .. r.src) or "")
        local v = {}
        for i, f in ipairs(FIELDS) do v[i] = r[f] end
        v[#v + 1] = r.spread_ns or "-"
        v[#v + 1] = r.spread_launches or "-"
        lu.assertNil(t[key], "two rows for " .. key)
        t[key] = v
    end
    return t
end

TestKeyAverages = {}

function TestKeyAverages:test_rows_by_hand()
    local got = rows_of(wb.profiler.from_events(events()))
    lu.assertEquals(got, {
        --                calls  cpu   self  self_dev dev_total kernels flops bytes spread launches
        -- the range's self time leaves out the top-level ops and runtime calls inside it: 1000 - 400 - 100 - 50
        ["range fwd"] = {1, 1000, 450, 0, 0, 0, 0, 0, "-", "-"},
        -- linear's self cpu: (400 - matmul's 200) + 100; its own kernels 50 + 30, with matmul's 150 below
        ["op linear"] = {2, 500, 300, 80, 230, 3, 2500, 380, "-", "-"},
        ["op matmul"] = {1, 200, 200, 150, 150, 1, 1000, 100, "-", "-"},
        ["op add"] = {1, 100, 100, 0, 0, 0, 10, 40, "-", "-"},
        ["runtime sync"] = {1, 50, 50, 0, 0, 0, 0, 0, "-", "-"},
        -- the slowest thread minus the fastest: 140 - 100
        ["kernel k_gemm"] = {1, 0, 0, 150, 150, 1, 1000, 100, 40, 1},
        ["kernel k_bias"] = {2, 0, 0, 80, 80, 2, 0, 96, "-", "-"},
    })
end

function TestKeyAverages:test_grouped_by_shape_and_by_call_site()
    local p = wb.profiler.from_events(events())
    local shapes = rows_of(p, {group_by_input_shape = true})
    lu.assertEquals(shapes["op linear [[4, 8]]"], {1, 400, 200, 50, 200, 2, 2000, 300, "-", "-"})
    lu.assertEquals(shapes["op linear [[2, 8]]"], {1, 100, 100, 30, 30, 1, 500, 80, "-", "-"})
    lu.assertNil(shapes["op linear"])
    local sites = rows_of(p, {group_by_stack_n = 1})
    lu.assertEquals(sites["op linear a.lua:1"], {1, 400, 200, 50, 200, 2, 2000, 300, "-", "-"})
    lu.assertEquals(sites["op linear a.lua:2"], {1, 100, 100, 30, 30, 1, 500, 80, "-", "-"})
    lu.assertEquals(sites["op matmul"], {1, 200, 200, 150, 150, 1, 1000, 100, "-", "-"}) -- no call site: its own row
end

TestInstances = {}

local function names(list)
    local t = {}
    for i, e in ipairs(list) do t[i] = e.name end
    return t
end

function TestInstances:test_range_instances_by_hand()
    local ev = events()
    -- a second "fwd" [1100, 1300] after the first, and an "edge" range whose span ends exactly
    -- where k_bias starts (a kernel starting on the edge is inside) and one that ends 1 ns before
    ev[#ev + 1] = {cat = "range", name = "fwd", ts_ns = 1100, dur_ns = 200}
    ev[#ev + 1] = {cat = "range", name = "edge", ts_ns = 300, dur_ns = 60}
    ev[#ev + 1] = {cat = "range", name = "short", ts_ns = 300, dur_ns = 59}
    local p = wb.profiler.from_events(ev)
    local fwd = p:range_instances("fwd")
    lu.assertEquals(#fwd, 2)
    lu.assertEquals({fwd[1].ts_ns, fwd[1].dur_ns, fwd[1].kernel_ns, fwd[1].host_ns}, {0, 1000, 200, 800})
    lu.assertEquals(names(fwd[1].kernels), {"k_gemm", "k_bias"})
    lu.assertEquals(fwd[1].kernels[1].correlation, 2) -- whole event tables
    lu.assertEquals({fwd[2].ts_ns, fwd[2].dur_ns, fwd[2].kernel_ns, fwd[2].host_ns}, {1100, 200, 30, 170})
    lu.assertEquals(names(fwd[2].kernels), {"k_bias"})
    lu.assertEquals(names(p:range_instances("edge")[1].kernels), {"k_bias"})
    lu.assertEquals(#p:range_instances("short")[1].kernels, 0)
    lu.assertEquals(p:range_instances("absent"), {})
    lu.assertErrorMsgContains("range_instances needs a range name, got number", function() p:range_instances(3) end)
end

-- many instances (the list of them grows while it is built): each holds its own kernel
function TestInstances:test_many_instances()
    local ev = {}
    for k = 1, 200 do
        local t = k * 1000
        ev[#ev + 1] = {cat = "op", name = "add", id = k, ts_ns = t + 10, dur_ns = 50}
        ev[#ev + 1] = {cat = "kernel", name = "k" .. k, id = 1000 + k, correlation = k, ts_ns = t + 20, dur_ns = k}
        ev[#ev + 1] = {cat = "range", name = "r", ts_ns = t, dur_ns = 100}
    end
    local p = wb.profiler.from_events(ev)
    local r = p:range_instances("r")
    lu.assertEquals(#r, 200)
    for k = 1, 200 do
        lu.assertEquals({r[k].ts_ns, r[k].kernel_ns, names(r[k].kernels)[1], #r[k].kernels}, {k * 1000, k, "k" .. k, 1})
    end
    p:expect{range = "r", kernels = 1, ops = {add = 1}, no_kernel_for = {"mul"}}
end

-- nested ranges of one name: each instance counts what starts inside it, the outer one all
function TestInstances:test_nested_ranges_of_one_name()
    local ev = events()
    ev[#ev + 1] = {cat = "range", name = "fwd", ts_ns = 150, dur_ns = 200} -- inside the first fwd, around k_gemm
    local p = wb.profiler.from_events(ev)
    local fwd = p:range_instances("fwd")
    lu.assertEquals(#fwd, 2)
    lu.assertEquals({fwd[1].ts_ns, fwd[2].ts_ns}, {0, 150}) -- in start order, not in the order they ended
    lu.assertEquals(names(fwd[1].kernels), {"k_gemm", "k_bias"})
    lu.assertEquals(names(fwd[2].kernels), {"k_gemm"})
    p:expect{range = "fwd", ops = {matmul = 1}}
    local ok, err = pcall(p.expect, p, {range = "fwd", kernels = 2})
    lu.assertFalse(ok)
    lu.assertStrContains(err, "expected 2 kernels per range, saw 1 in range 2 of 2: k_gemm")
end

function TestInstances:test_expect_counts_per_instance()
    local ev = events()
    ev[#ev + 1] = {cat = "range", name = "fwd", ts_ns = 1100, dur_ns = 200}
    local p = wb.profiler.from_events(ev)
    local ok, err = pcall(p.expect, p, {range = "fwd", kernels = 2, ops = {linear = 1, matmul = 1}})
    lu.assertFalse(ok)
    lu.assertStrContains(err, "expected 2 kernels per range, saw 1 in range 2 of 2: k_bias")
    lu.assertStrContains(err, "expected 1 'matmul' op per range, saw 0 in range 2 of 2")
    lu.assertNotStrContains(err, "range 1 of 2")
    p:expect{range = "fwd", kernels = {count = 1, match = "bias"}, ops = {linear = 1}}
    -- the launching op is known by its id: matmul launched k_gemm, linear k_bias
    ok, err = pcall(p.expect, p, {range = "fwd", no_kernel_for = {"matmul", "add"}})
    lu.assertFalse(ok)
    lu.assertStrContains(err, "expected no kernel for 'matmul', but matmul launched k_gemm (range 1 of 2)")
    lu.assertNotStrContains(err, "'add'")
    lu.assertErrorMsgContains("no range named 'bwd' in the trace (ranges seen: fwd)",
        function() p:expect{range = "bwd", kernels = 1} end)
end

-- without a range: per step, or over the whole trace when there are no steps
function TestInstances:test_expect_per_step_and_over_the_trace()
    local p = wb.profiler.from_events(events())
    p:expect{kernels = 3, ops = {linear = 2, matmul = 1, add = 1}}
    local ok, err = pcall(p.expect, p, {kernels = 2})
    lu.assertFalse(ok)
    lu.assertStrContains(err, "expected 2 kernels per trace, saw 3 in trace 1 of 1")
    local ev = events()
    ev[#ev + 1] = {cat = "step", name = "ProfilerStep#1", id = 1, ts_ns = 0, dur_ns = 1100}
    ev[#ev + 1] = {cat = "step", name = "ProfilerStep#2", id = 2, ts_ns = 1100, dur_ns = 300}
    p = wb.profiler.from_events(ev)
    ok, err = pcall(p.expect, p, {kernels = 2, ops = {linear = 1}})
    lu.assertFalse(ok)
    lu.assertStrContains(err, "expected 2 kernels per step, saw 1 in step 2 of 2: k_bias")
    lu.assertNotStrContains(err, "step 1 of 2")
end

TestSchema = {}

-- {place -> {key -> field}} for the trace's and for Lua's side
local function schema()
    local trace, lua = {top = {}, args = {}}, {top = {}, args = {}}
    for _, f in ipairs(wb._trace_fields()) do
        if f.key then trace[f.trace][f.key] = f end
        if f.lua_key then lua[f.lua][f.lua_key] = f end
    end
    return trace, lua
end

local function carries(f, cat)
    if #f.kinds == 0 then return cat == nil end -- metadata and launch arrows
    for _, k in ipairs(f.kinds) do if k == cat then return true end end
    return false
end

-- a profile with every recording option, so that every kind of field is written
local function rich_profile()
    wb.manual_seed(1)
    local lin = wb.nn.Linear(16, 32, {bias = true})
    local x, a = wb.randn({8, 16}), wb.randn({256, 256})
    -- two threads, as decided (not adapted to the load): the matmul runs parallel, with thread events
    local threads, adaptive = wb.get_num_threads(), wb.set_threads_adaptive(false)
    wb.set_num_threads(2)
    local p = wb.profiler.profile({record_shapes = true, with_stack = true, with_flops = true, profile_memory = true},
        function(q)
            for _ = 1, 2 do
                wb.profiler.range("fwd", function()
                    local y = lin(x)
                    local _ = wb.gelu(y) * y
                    local _ = y:t()
                end)
                q:step()
            end
            local _ = wb.matmul(a, a)
        end)
    wb.set_num_threads(threads)
    wb.set_threads_adaptive(adaptive)
    return p
end

function TestSchema:test_the_writer_writes_only_declared_keys()
    local trace = schema()
    local p = rich_profile()
    local path = scratch.path(".json")
    p:export_chrome_trace(path)
    local doc = cjson.decode(scratch.read(path))
    local seen = {}
    for i, e in ipairs(doc.traceEvents) do
        -- the findings' instant events (cat "finding") are the findings' own (wb.findings_trace)
        if e.cat ~= "finding" then
            local cat = e.ph == "X" and e.cat or nil
            for k in pairs(e) do
                if k ~= "args" then
                    lu.assertNotNil(trace.top[k], string.format("event %d (%s): key '%s' not in the schema", i, tostring(cat), k))
                    seen[k] = true
                end
            end
            for k in pairs(e.ph ~= "C" and e.args or {}) do -- a counter's args are its series
                local f = trace.args[k]
                lu.assertNotNil(f, string.format("event %d (%s): args key '%s' not in the schema", i, tostring(cat), k))
                lu.assertTrue(carries(f, cat), string.format("event %d: %s carries args.%s, which the schema gives only to %s",
                    i, tostring(cat), k, table.concat(f.kinds, ", ")))
                seen[k] = true
            end
        end
    end
    -- the profile wrote the fields of every kind it recorded
    for _, k in ipairs({"correlation", "parent", "flow", "input_shapes", "input_dtypes", "src", "threads", "epilogue",
        "allocated_bytes", "device", "kernel", "work", "unit", "run_delay_ns", "in_stride", "sort_index", "bp"}) do
        lu.assertTrue(seen[k], "no event carried " .. k)
    end
end

function TestSchema:test_lua_events_carry_only_declared_keys()
    local _, lua = schema()
    for i, e in ipairs(rich_profile():events()) do
        for k, v in pairs(e) do
            if k == "args" then
                for a in pairs(v) do
                    local f = lua.args[a]
                    lu.assertNotNil(f, string.format("event %d (%s): args.%s not in the schema", i, e.cat, a))
                    lu.assertTrue(carries(f, e.cat), string.format("event %d: %s carries args.%s", i, e.cat, a))
                end
            else
                lu.assertNotNil(lua.top[k], string.format("event %d (%s): %s not in the schema", i, e.cat, k))
            end
        end
    end
end

-- what p:events() gives, from_events takes back: the same events, field for field
function TestSchema:test_events_round_trip_through_from_events()
    local events = rich_profile():events()
    local again = wb.profiler.from_events(events):events()
    lu.assertEquals(#again, #events)
    for i = 1, #events do lu.assertEquals(again[i], events[i], "event " .. i) end
end

scratch.exit(lu.LuaUnit.run())
