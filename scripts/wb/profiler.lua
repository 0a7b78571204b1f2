-- wb.profiler: what ran, on which lane, for how long. The recording is native (core/observe/profiler.c,
-- bindings/l_profiler.c); this module adds the session's schedule, the key_averages table and
-- expectations a script can assert.
--
--   local p = wb.profiler.profile{activities = {"cpu", "device"}, record_shapes = true,
--                                 schedule = {wait = 1, warmup = 1, active = 3}}
--   p:start()
--   for i = 1, 5 do model(x); p:step() end
--   p:stop()
--   print(p:table{sort_by = "cpu_total"})
--   p:expect{ops = {linear = 1, t = 1, addmm = 1}, kernels = 1, no_kernel_for = {"t"}}
--   p:export_chrome_trace("trace.json")   -- open in https://ui.perfetto.dev or chrome://tracing

local plural = require("wb.words").plural
local machine = require("wb.machine")
-- the native session and ranges, captured at load: wb._* are gone under --sandbox
local new_session, range_push, range_pop = wb._profiler_session, wb._profiler_push, wb._profiler_pop
local load_session, session_of_events = wb._profiler_load, wb._profiler_from_events

local M = {}

local Profiler = {}
Profiler.__index = Profiler

local OPTION_KEYS = {activities = true, schedule = true, record_shapes = true, with_stack = true,
    with_flops = true, profile_memory = true, on_trace_ready = true, max_events = true, max_memory = true,
    memory_policy = true, spill_dir = true}
local POLICIES = {spill = true, ring = true, stop = true}
local SCHEDULE_KEYS = {wait = true, warmup = true, active = true, repeat_ = true}

local function fail(msg, level) error("profiler: " .. msg, (level or 1) + 1) end

-- Calls a native method and returns what it returns; an error it raises is raised again at the
-- caller of the method that called this (the user's line): called directly from here, the C
-- side's luaL_error would name this file's line. (Called through pcall it adds no position.)
local function native(level, method, obj, ...)
    local r = table.pack(pcall(method, obj, ...))
    if not r[1] then error(r[2], level + 1) end
    return table.unpack(r, 2, r.n)
end

local function check_count(v, name, min)
    if math.type(v) ~= "integer" or v < min then
        fail(string.format("schedule.%s must be an integer >= %d, got %s", name, min, tostring(v)), 4)
    end
end

-- wb.profiler.profile(opts[, fn]): a session. With fn, runs fn(p) between start and stop.
function M.profile(opts, fn)
    opts = opts or {}
    if type(opts) ~= "table" then fail("options must be a table, got " .. type(opts), 2) end
    for k in pairs(opts) do
        if not OPTION_KEYS[k] then
            fail(string.format("unknown option '%s' (expected activities, schedule, record_shapes, with_stack, " ..
                "with_flops, profile_memory, on_trace_ready, max_events, max_memory, memory_policy, spill_dir)", tostring(k)), 2)
        end
    end
    local host, device = true, true
    if opts.activities ~= nil then
        if type(opts.activities) ~= "table" or #opts.activities == 0 then
            fail('activities must be a list like {"cpu", "device"}', 2)
        end
        host, device = false, false
        for _, a in ipairs(opts.activities) do
            if a == "cpu" then host = true
            elseif a == "device" or a == "cuda" then device = true
            else fail(string.format('unknown activity \'%s\' (expected "cpu" or "device")', tostring(a)), 2) end
        end
    end
    local sched
    if opts.schedule ~= nil then
        if type(opts.schedule) ~= "table" then fail("schedule must be a table {wait=, warmup=, active=, repeat_=}", 2) end
        for k in pairs(opts.schedule) do
            if not SCHEDULE_KEYS[k] then
                fail(string.format("unknown schedule field '%s' (expected wait, warmup, active, repeat_)", tostring(k)), 2)
            end
        end
        sched = {wait = opts.schedule.wait or 0, warmup = opts.schedule.warmup or 0,
            active = opts.schedule.active or 1, repeat_ = opts.schedule.repeat_ or 0}
        check_count(sched.wait, "wait", 0)
        check_count(sched.warmup, "warmup", 0)
        check_count(sched.active, "active", 1)
        check_count(sched.repeat_, "repeat_", 0)
    end
    if opts.on_trace_ready ~= nil and type(opts.on_trace_ready) ~= "function" then
        fail("on_trace_ready must be a function", 2)
    end
    -- memory is the bound (max_memory, then the policy); max_events is an optional cap on top
    local max_events = opts.max_events
    if max_events ~= nil and (math.type(max_events) ~= "integer" or max_events < 16) then
        fail(string.format("max_events must be an integer >= 16, got %s", tostring(max_events)), 2)
    end
    local max_memory = opts.max_memory or (256 << 20)
    if math.type(max_memory) ~= "integer" or max_memory < (4 << 20) then
        fail(string.format("max_memory must be an integer number of bytes >= 4 MiB (4194304), got %s",
            tostring(max_memory)), 2)
    end
    local policy = opts.memory_policy or "spill"
    if not POLICIES[policy] then
        fail(string.format('memory_policy must be "spill", "ring" or "stop", got %s', tostring(policy)), 2)
    end
    if opts.spill_dir ~= nil and type(opts.spill_dir) ~= "string" then
        fail("spill_dir must be a folder path, got " .. type(opts.spill_dir), 2)
    end
    local native_opts = {record_host = host, record_device = device,
        record_shapes = opts.record_shapes and true or false, with_stack = opts.with_stack and true or false,
        with_flops = opts.with_flops and true or false, profile_memory = opts.profile_memory and true or false,
        max_events = max_events, max_memory = max_memory, memory_policy = policy, spill_dir = opts.spill_dir}
    -- native: the session recording now; done: the one holding the last completed active block
    -- of a schedule while the next cycle records (two buffers, used in turn)
    local ok, session = pcall(new_session, native_opts)
    if not ok then error(session, 2) end
    local p = setmetatable({native = session, native_opts = native_opts, done = nil,
        schedule = sched, on_trace_ready = opts.on_trace_ready, step_num = 0, cycles_done = 0, cycles_kept = 0,
        started = false, opts = opts}, Profiler)
    if fn then
        if type(fn) ~= "function" then fail("the second argument must be a function", 2) end
        p:start()
        local ok, err = pcall(fn, p)
        p:stop()
        if not ok then error(err, 0) end
    end
    return p
end

-- "none" (not recording), "warmup" (recording, discarded) or "active" for step s.
function Profiler:_phase(s)
    local sc = self.schedule
    if not sc then return "active" end
    local cycle = sc.wait + sc.warmup + sc.active
    if sc.repeat_ > 0 and s >= cycle * sc.repeat_ then return "none" end
    local pos = s % cycle
    if pos < sc.wait then return "none" end
    if pos < sc.wait + sc.warmup then return "warmup" end
    return "active"
end

-- Range names open on the running session, innermost last (a session switch reopens them).
local open_ranges = {}

-- A new cycle records into the other buffer, so the completed block stays readable until the
-- next one completes (torch.profiler keeps its last trace the same way).
function Profiler:_switch_buffers()
    local old = self.native
    old:stop()
    local fresh = self.spare or new_session(self.native_opts)
    self.spare = nil
    fresh:clear()
    fresh:start()
    for _, name in ipairs(open_ranges) do fresh:push(name) end
    self.native, self.done = fresh, old
end

function Profiler:_enter_step()
    local phase, sc = self:_phase(self.step_num), self.schedule
    if sc and phase ~= "none" then
        -- a cycle records into an empty buffer; its warmup events are dropped when active begins
        local pos = self.step_num % (sc.wait + sc.warmup + sc.active)
        if pos == sc.wait and self.cycles_done > self.cycles_kept then
            if self.done then self.spare = self.done end
            self:_switch_buffers()
            self.cycles_kept = self.cycles_done
        elseif pos == sc.wait or (sc.warmup > 0 and pos == sc.wait + sc.warmup) then
            self.native:clear()
        end
    end
    self.native:set_recording(phase ~= "none")
    self.native:step(self.step_num)
end

-- true when step s is the last active step of its cycle
function Profiler:_cycle_ends(s)
    local sc = self.schedule
    if not sc or self:_phase(s) ~= "active" then return false end
    local cycle = sc.wait + sc.warmup + sc.active
    return s % cycle == cycle - 1
end

-- The session started with p:start() and not stopped yet (sessions do not nest), kept here so that
-- one whose variable is lost (a REPL chunk interrupted after p:start(), then `p` made anew) can
-- still be stopped: wb.profiler.current():stop(). Kept, it is no longer stopped by the collector.
local running = nil

-- "file:line at hh:mm:ss", the line of the first caller outside this file (profile(opts, fn)
-- starts too), or "hh:mm:ss" alone when there is none (the REPL calls `return p:start()`: a tail
-- call, which leaves no frame of the caller) or no debug library (--sandbox loads this module
-- after taking it away).
local getinfo = debug and debug.getinfo
local HERE = getinfo and getinfo(1, "S").source
local function started_where()
    local now = os.date("%H:%M:%S")
    for level = 3, getinfo and 20 or 0 do
        local info = getinfo(level, "Sl")
        if not info then break end
        if info.source ~= HERE and info.currentline > 0 then
            return string.format("%s:%d at %s", info.short_src, info.currentline, now)
        end
    end
    return now
end

-- Start and stop return nothing: in the REPL a returned session would print all its fields.
function Profiler:start()
    if self.started then fail("start(): this session is already running", 2) end
    if running and running ~= self and running.started then
        fail(string.format("start(): a session is already running (started at %s; sessions do not nest); " ..
            "stop it with wb.profiler.current():stop()", running.started_at), 2)
    end
    self.machine_start = machine.snapshot()
    native(2, self.native.start, self.native)
    self.started, self.started_at, running = true, started_where(), self
    self:_enter_step()
end

-- wb.profiler.current() -> the session running now (started with p:start(), not stopped), or nil.
function M.current()
    if running and not running.started then running = nil end
    return running
end

function Profiler:step()
    if not self.started then fail("step() before start()", 2) end
    self.native:end_step()
    local finished = self.step_num
    self.step_num = self.step_num + 1
    if self:_cycle_ends(finished) then
        self.native:set_recording(false)
        self.cycles_done = self.cycles_done + 1
        if self.on_trace_ready then self.on_trace_ready(self) end
    end
    self:_enter_step()
end

function Profiler:stop()
    if not self.started then return end
    local active = self:_phase(self.step_num) == "active"
    self.native:stop()
    if running == self then running = nil end
    -- a spill file that could not be written stopped the recording: loud, the events so far kept
    local spill_error = self.native:stats().spill_error
    if spill_error ~= "" and not self.spill_reported then
        self.spill_reported = true
        self.started = false
        fail("recording stopped: " .. spill_error, 2)
    end
    self.machine = machine.between(self.machine_start, machine.snapshot())
    self.findings_cache, self.findings_ctx = nil, nil
    self.started = false
    -- a session without a schedule (or stopped inside its first active block) is ready when it
    -- stops; stopped part-way through a later cycle, it keeps the last completed block (_result)
    if self.on_trace_ready and active and (not self.schedule or self.cycles_done == 0) then
        self.on_trace_ready(self)
    end
end

-- What the views read: once a later cycle has begun recording, the last completed active block
-- (in `done`); otherwise what the recording buffer holds.
function Profiler:_result()
    if self.done and self.cycles_done > 0 and self.cycles_done == self.cycles_kept then return self.done end
    return self.native
end

-- p:events([filter]) -> array of event tables; filter = {cat=, lane=, name=, from_ns=, to_ns=,
-- first=, limit=}: tables are built only for the events kept (a second result: the index to
-- continue from, when limit stopped it).
function Profiler:events(filter)
    if filter ~= nil and type(filter) ~= "table" then fail("events: the filter must be a table, got " .. type(filter), 2) end
    return native(2, self:_result().events, self:_result(), filter)
end

-- for e in p:each_event([filter]) do ... end: the events one at a time, tables built in batches.
function Profiler:each_event(filter)
    if filter ~= nil and type(filter) ~= "table" then fail("each_event: the filter must be a table, got " .. type(filter), 2) end
    local f = {}
    for k, v in pairs(filter or {}) do f[k] = v end
    f.limit = 4096
    local session, batch, i, next_first = self:_result(), {}, 0, f.first or 1
    return function()
        i = i + 1
        if i > #batch then
            if not next_first then return nil end
            f.first = next_first
            batch, next_first = native(2, session.events, session, f)
            i = 1
        end
        return batch[i]
    end
end
function Profiler:stats() return self:_result():stats() end

-- The trace carries the findings (instant events on a "findings" track) and what the rules read
-- beyond the events (the ceilings, the machine, the replay cost: "workbench" member), so
-- `workbench explain` finds the same on another machine.
function Profiler:export_chrome_trace(path)
    if type(path) ~= "string" then fail("export_chrome_trace needs a file path", 2) end
    local session = self:_result()
    -- the findings, while their index fits in max_memory (wb.profiler_table.findings_fit); above
    -- it the trace says so and `workbench explain` on it computes them
    local left_out = not require("wb.profiler_table").findings_fit(session:stats())
    local extra_events, members = require("wb.findings_trace").trace_extras(left_out and {} or self:findings(),
        self:_findings_context(), left_out)
    -- a refused path names the user's line
    local n, bytes = native(2, session.export_chrome_trace, session, path, extra_events, members)
    self.last_export = {path = path, events = n, bytes = bytes}
    io.stderr:write(string.format("export_chrome_trace: %s, %.1f MiB (%.0f bytes per event) -> %s\n",
        plural(n, "event"), bytes / 1048576, n > 0 and bytes / n or 0, path))
    return path
end

-- ---- findings (wb.findings) -------------------------------------------------------------

-- What the rules read besides the events: the device's ceilings, the machine while recording,
-- the measured host cost of a replayed kernel (only measured when some window is host-bound).
function Profiler:_findings_context()
    if self.findings_ctx then return self.findings_ctx end
    local on_cuda = self:stats().device_lane
    local fields = self.trace_members and require("wb.trace_info").fields(self)
    if fields then -- another tool's trace: not this machine's ceilings; the rules its fields allow
        self.findings_ctx = {device = on_cuda and "cuda" or "cpu", fields = fields}
        return self.findings_ctx
    end
    local ok, info = pcall(wb.device_info, on_cuda and "cuda" or "cpu")
    local ctx = {device = on_cuda and "cuda" or "cpu", device_info = ok and info or nil, machine = self.machine}
    ctx.measure_replay = function()
        ctx.replay_ns_per_kernel = require("wb.findings_trace").replay_cost(ctx.device)
        return ctx.replay_ns_per_kernel
    end
    if not self.started then self.findings_ctx = ctx end
    return ctx
end

-- p:findings() -> {{rule=, severity=, message=, evidence=}, ...}, most time concerned first; and
-- the rules skipped for fields the trace lacks ({rule, severity = "skipped", message = why}).
function Profiler:findings()
    if self.findings_cache and not self.started then return self.findings_cache, self.findings_skipped end
    local ctx = self:_findings_context()
    ctx.dropped, ctx.dropped_note = self:stats().dropped, self:stats().dropped_note
    -- from groups computed in C over the store: no table per event (wb.findings.analyze_session)
    local f, _, _, skipped = require("wb.findings").analyze_session(self:_result(), ctx)
    if not self.started then self.findings_cache, self.findings_skipped = f, skipped end
    return f, skipped
end

-- p:explain(): prints the findings, one per line; returns them.
function Profiler:explain()
    local f = self:findings()
    print(require("wb.findings").format(f))
    return f
end

-- Folded stacks (flamegraph.pl, speedscope): "call site;op;kernel <ns>" per line.
function Profiler:export_stacks(path)
    -- computed in C over the store (core/observe/profiler_stacks.c): no table per event
    local session = self:_result()
    return require("wb.profiler_export").export_stacks(function() return session:folded_stacks() end, path)
end

-- Allocated bytes over time per device: JSON at path, an HTML chart beside it.
function Profiler:export_memory_timeline(path)
    -- the memory events only, in batches: tables for the others are never built
    return require("wb.profiler_export").export_memory_timeline(function() return self:each_event{cat = "memory"} end,
        path, self.opts.profile_memory)
end

-- ---- key_averages and the table (wb.profiler_table) ---------------------------------------

function Profiler:key_averages(o) return require("wb.profiler_table").key_averages(self, o) end
function Profiler:table(o) return require("wb.profiler_table").table(self, o) end

-- Every instance of the range `name`, in start order: {ts_ns, dur_ns, kernels = {events},
-- kernel_ns = their total, host_ns = dur_ns - kernel_ns} (kernels whose start lies in the span).
-- What a forward costs the host and the device, measured in the same run. The instances are
-- found in C (core/observe/profiler_instances.c); only their kernels' tables are built here.
function Profiler:range_instances(name)
    if type(name) ~= "string" then fail("range_instances needs a range name, got " .. type(name), 2) end
    local session, out = self:_result(), {}
    for i, inst in ipairs(native(2, session.instances, session, name).instances) do
        local kernels = {}
        if #inst.kernels > 0 then -- the same kernels, in store order: from the first, by start
            kernels = native(2, session.events, session, {cat = "kernel", first = inst.kernels[1].index,
                limit = #inst.kernels, from_ns = inst.ts_ns, to_ns = inst.ts_ns + inst.dur_ns + 1})
        end
        out[i] = {ts_ns = inst.ts_ns, dur_ns = inst.dur_ns, kernels = kernels, kernel_ns = inst.kernel_ns,
            host_ns = inst.dur_ns - inst.kernel_ns}
    end
    return out
end

-- ---- expectations ---------------------------------------------------------------------------

local EXPECT_KEYS = {range = true, kernels = true, ops = true, no_kernel_for = true}

-- p:expect{range=, kernels=, ops={name=count}, no_kernel_for={...}}: counts per instance of the
-- range (or per recorded step without one, or over the whole trace); raises a readable diff.
function Profiler:expect(spec)
    if type(spec) ~= "table" then fail("expect needs a table", 2) end
    for k in pairs(spec) do
        if not EXPECT_KEYS[k] then
            fail(string.format("expect: unknown field '%s' (expected range, kernels, ops, no_kernel_for)", tostring(k)), 2)
        end
    end
    local kernel_count, kernel_match
    if spec.kernels ~= nil then
        if math.type(spec.kernels) == "integer" then
            kernel_count = spec.kernels
        elseif type(spec.kernels) == "table" then
            for k in pairs(spec.kernels) do
                if k ~= "count" and k ~= "match" then fail("expect: kernels = {count=, match=}, unknown '" .. tostring(k) .. "'", 2) end
            end
            kernel_count, kernel_match = spec.kernels.count, spec.kernels.match
            if math.type(kernel_count) ~= "integer" then fail("expect: kernels.count must be an integer", 2) end
        else
            fail("expect: kernels must be an integer or {count=, match=}", 2)
        end
    end
    if spec.ops ~= nil and type(spec.ops) ~= "table" then fail("expect: ops must be a table {name = count}", 2) end
    for name, n in pairs(spec.ops or {}) do
        if math.type(n) ~= "integer" then fail(string.format("expect: ops.%s must be an integer", tostring(name)), 2) end
    end
    if spec.no_kernel_for ~= nil and type(spec.no_kernel_for) ~= "table" then
        fail("expect: no_kernel_for must be a list of op names", 2)
    end

    -- the instances and what started inside each are found in C (profiler_instances.c)
    local session = self:_result()
    local found = native(2, session.instances, session, spec.range)
    local instances, what = found.instances, found.what
    if spec.range and #instances == 0 then
        fail(string.format("expect: no range named '%s' in the trace (ranges seen: %s)", spec.range,
            #found.ranges > 0 and table.concat(found.ranges, ", ") or "none"), 2)
    end

    local problems = {}
    for idx, inst in ipairs(instances) do
        local kernels = {}
        for _, k in ipairs(inst.kernels) do
            if not kernel_match or k.name:find(kernel_match, 1, true) then kernels[#kernels + 1] = k.name end
        end
        local label = string.format("%s %d of %d", what, idx, #instances)
        if kernel_count and #kernels ~= kernel_count then
            problems[#problems + 1] = string.format("expected %s%s per %s, saw %d in %s: %s",
                plural(kernel_count, "kernel"), kernel_match and (" matching '" .. kernel_match .. "'") or "", what, #kernels, label,
                #kernels > 0 and table.concat(kernels, ", ") or "none")
        end
        local names = {}
        for name in pairs(spec.ops or {}) do names[#names + 1] = name end
        table.sort(names)
        for _, name in ipairs(names) do
            local want, got = spec.ops[name], inst.ops[name] or 0
            if got ~= want then
                problems[#problems + 1] = string.format("expected %s per %s, saw %d in %s",
                    plural(want, "'" .. name .. "' op"), what, got, label)
            end
        end
        for _, opname in ipairs(spec.no_kernel_for or {}) do
            for _, k in ipairs(inst.kernels) do
                if k.op == opname then
                    problems[#problems + 1] = string.format("expected no kernel for '%s', but %s launched %s (%s)",
                        opname, opname, k.name, label)
                end
            end
        end
    end
    if #problems > 0 then
        error("profiler expectation failed:\n  " .. table.concat(problems, "\n  "), 2)
    end
    return true
end

-- p.start() (a dot for a colon) or a method called on something else says so, instead of
-- indexing a number; a tail call, so the levels of the methods' own errors stay the caller's
for name, method in pairs(Profiler) do
    if type(method) == "function" and name:sub(1, 1) ~= "_" then
        Profiler[name] = function(self, ...)
            if getmetatable(self) ~= Profiler then
                fail(string.format("%s: call it on a profiler as p:%s(...), got %s", name, name, type(self)), 2)
            end
            return method(self, ...)
        end
    end
end

-- ---- ranges ---------------------------------------------------------------------------------

function M.push(name)
    if type(name) ~= "string" then fail("push needs a range name", 2) end
    range_push(name)
    open_ranges[#open_ranges + 1] = name
end

function M.pop()
    range_pop()
    open_ranges[#open_ranges] = nil
end

-- wb.profiler.diff(pa, pb[, {min_effect =}]): two stopped profiles aligned node by node (wb.diff):
-- structural changes, verdicts per node, and where the change per step went; a table.
function M.diff(pa, pb, o) return require("wb.diff_text").profiles(pa, pb, o) end

-- wb.profiler.ab{a = fn, b = fn, steps = N[, warmup =, order = "shuffled"|"abba"|"alternate", seed =, profile options]}
-- -> pa, pb: two programs profiled interleaved in one process (wb.profiler_ab), for diff.
function M.ab(o) return require("wb.profiler_ab").run(M.profile, o) end

-- wb.profiler.per_call(fn[, {calls =, range =, device =, kernels =}]): the kernels and host time of
-- one call of fn, medians of a few profiled calls (wb.profiler_calls)
function M.per_call(fn, o) return require("wb.profiler_calls").per_call(M.profile, fn, o) end

-- wb.profiler.load_trace(path[, {max_memory=, memory_policy=, spill_dir=}]): a Chrome trace (.json
-- or .json.gz; the workbench's, torch.profiler's or another tool's: wb.trace), read back in one streaming pass into a stopped profile:
-- p:table(), p:key_averages(), p:events(), p:findings(), p:export_chrome_trace() as after recording.
function M.load_trace(path, o)
    if type(path) ~= "string" then fail("load_trace needs a trace path", 2) end
    o = o or {}
    if type(o) ~= "table" then fail("load_trace: options must be a table, got " .. type(o), 2) end
    for k in pairs(o) do
        if k ~= "max_memory" and k ~= "memory_policy" and k ~= "spill_dir" then
            fail(string.format("load_trace: unknown option '%s' (expected max_memory, memory_policy, spill_dir)",
                tostring(k)), 2)
        end
    end
    if o.memory_policy ~= nil and not POLICIES[o.memory_policy] then
        fail(string.format('load_trace: memory_policy must be "spill", "ring" or "stop", got %s', tostring(o.memory_policy)), 2)
    end
    local ok, session, lines, rest = pcall(load_session, path, o)
    if not ok then error(session, 2) end
    -- what the trace says beyond its events: otherData and the other members, as the reader kept them
    local okm, doc = pcall(require("cjson").decode, rest)
    if not okm or type(doc) ~= "table" then
        fail(string.format("load_trace: '%s': the members beside traceEvents are not JSON (%s)", path,
            tostring(doc):gsub("^.-: ", "")), 2)
    end
    local other = type(doc.otherData) == "table" and doc.otherData or {}
    doc.otherData = nil
    local members = doc
    return setmetatable({native = session, native_opts = o, started = false, opts = {}, step_num = 0,
        cycles_done = 0, cycles_kept = 0, loaded_from = path, trace_lines = lines, trace_other = other,
        trace_members = members}, Profiler)
end

-- wb.profiler.from_events(events): a stopped profile holding a list of event tables (the shape
-- p:events() returns; synthetic ones in tests), appended through the trace reader's path, so the
-- findings, the table and the diff model are computed in C over them as over a trace.
function M.from_events(events)
    if type(events) ~= "table" then fail("from_events needs a list of events, got " .. type(events), 2) end
    local ok, session = pcall(session_of_events, events)
    if not ok then error(session, 2) end
    return setmetatable({native = session, native_opts = {}, started = false, opts = {}, step_num = 0,
        cycles_done = 0, cycles_kept = 0, trace_other = {}, trace_members = {}}, Profiler)
end

-- wb.profiler.range(name, fn, ...): fn(...) inside a named range; returns fn's results.
function M.range(name, fn, ...)
    if type(name) ~= "string" then fail("range needs a name", 2) end
    if type(fn) ~= "function" then fail("range needs a function", 2) end
    M.push(name)
    local results = table.pack(pcall(fn, ...))
    M.pop()
    if not results[1] then error(results[2], 0) end
    return table.unpack(results, 2, results.n)
end

return M
