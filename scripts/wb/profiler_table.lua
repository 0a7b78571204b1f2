-- wb.profiler_table: a session's events as torch.profiler's key_averages rows and table (one row
-- per op name, and input shapes or call site when asked, and one per kernel), with the
-- roofline's % of peak per kernel and the spread of a parallel kernel's worker threads.

local plural, escaped = require("wb.words").plural, require("wb.words").escaped
local calibrate = require("wb.calibrate")

local M = {}

-- The findings' rules index the events in C (core/observe/findings_index.c): measured ~127 bytes
-- per event at 2,000,001 events (peak RSS +254 MiB, 0.9 s of CPU). The table and the trace carry
-- the findings while that index fits in the session's max_memory (the store's own budget: 2.1
-- million events at the default 256 MiB); above it they say so, and p:findings() computes them.
M.FINDINGS_BYTES_PER_EVENT = 128
function M.findings_fit(st) return st.events * M.FINDINGS_BYTES_PER_EVENT <= st.max_memory end

local function fail(msg, level) error("profiler: " .. msg, (level or 1) + 1) end

-- Rows per op name (and input shapes / call site when asked) and per kernel name, aggregated in
-- C over the session's records (core/observe/profiler_aggregate.c): no table per event is built.
function M.key_averages(self, o)
    o = o or {}
    if type(o) ~= "table" then fail("key_averages: options must be a table, got " .. type(o), 3) end
    for k in pairs(o) do
        if k ~= "group_by_input_shape" and k ~= "group_by_stack_n" then
            fail(string.format("key_averages: unknown option '%s' (expected group_by_input_shape, group_by_stack_n)",
                tostring(k)), 2)
        end
    end
    local session = self.native and self:_result() or self
    return session:key_averages(o.group_by_input_shape and true or false, o.group_by_stack_n and true or false)
end

local function fmt_time(ns)
    if ns == 0 then return "0" end
    if ns >= 1e9 then return string.format("%.3fs", ns / 1e9) end
    if ns >= 1e6 then return string.format("%.3fms", ns / 1e6) end
    return string.format("%.3fus", ns / 1e3)
end

local SORT_KEYS = {self_cpu = "self_cpu_ns", cpu_total = "cpu_total_ns", self_device = "self_device_ns",
    device_total = "device_total_ns", calls = "calls", kernels = "kernels", flops = "flops", name = "name",
    -- torch.profiler's names for the same columns (cuda_* are its older spellings)
    self_cpu_time_total = "self_cpu_ns", cpu_time_total = "cpu_total_ns", self_device_time_total = "self_device_ns",
    device_time_total = "device_total_ns", self_cuda_time_total = "self_device_ns",
    cuda_time_total = "device_total_ns", count = "calls"}

-- The key_averages table, whole kernel names included (never cut).
function M.table(self, o)
    o = o or {}
    if type(o) ~= "table" then fail("table: options must be a table, got " .. type(o), 3) end
    for k in pairs(o) do
        if k ~= "sort_by" and k ~= "row_limit" and k ~= "group_by_input_shape" and k ~= "group_by_stack_n" then
            fail(string.format("table: unknown option '%s' (expected sort_by, row_limit, group_by_input_shape, " ..
                "group_by_stack_n)", tostring(k)), 2)
        end
    end
    local sort_key = SORT_KEYS[o.sort_by or "cpu_total"]
    if not sort_key then
        local names = {}
        for k in pairs(SORT_KEYS) do names[#names + 1] = k end
        table.sort(names)
        fail(string.format("table: unknown sort key '%s' (expected one of: %s)", tostring(o.sort_by),
            table.concat(names, ", ")), 2)
    end
    local limit = o.row_limit or 100
    if math.type(limit) ~= "integer" or limit < 1 then fail("table: row_limit must be a positive integer", 2) end
    local rows = M.key_averages(self, {group_by_input_shape = o.group_by_input_shape, group_by_stack_n = o.group_by_stack_n})
    table.sort(rows, function(a, b)
        if sort_key == "name" then return a.name < b.name end
        if a[sort_key] ~= b[sort_key] then return a[sort_key] > b[sort_key] end
        return a.name < b.name
    end)
    local st = self:stats()
    local on_cuda = false
    if st.device_lane then
        local first = self:events{cat = "kernel", limit = 1}[1]
        on_cuda = first and first.lane or "cuda"
    end
    local info = wb.device_info(on_cuda and "cuda" or nil)
    local self_total, dev_total = 0, 0
    local function on_device(r) return r.kind == "kernel" or r.kind == "memcpy" or r.kind == "memset" end
    for _, r in ipairs(rows) do
        if not on_device(r) then self_total = self_total + r.self_cpu_ns end
        if on_device(r) then dev_total = dev_total + r.device_total_ns end
    end
    local name_w = 4
    for i, r in ipairs(rows) do
        if i > limit then break end
        name_w = math.max(name_w, #escaped(r.name)) -- a trace's names never reach the terminal raw
    end
    local show_shapes = o.group_by_input_shape
    local show_src = o.group_by_stack_n
    local show_spread = false -- worker threads were recorded for some kernel
    for _, r in ipairs(rows) do show_spread = show_spread or r.spread_launches ~= nil end
    -- names padded by hand: string.format's widths stop at 99 (cuBLASLt's names are longer)
    local function pad(name) return name .. string.rep(" ", name_w - #name) end
    local head = pad("Name") .. string.format("  %9s %10s %10s %10s %11s %12s %10s %7s %9s %8s %7s %7s",
        "Self CPU%", "Self CPU", "CPU total", "CPU avg", "Self Device", "Device total", "Device avg",
        "# Calls", "# Kernels", "GFLOP/s", "GB/s", "% peak")
    if show_spread then head = head .. string.format(" %13s", "Thread spread") end
    if show_shapes then head = head .. "  Input Shapes" end
    if show_src then head = head .. "  Source" end
    local rule = string.rep("-", #head)
    local out = {}
    if st.dropped > 0 then -- what was dropped and why, first: the rows below do not cover it
        out[#out + 1] = string.format("WARNING: %s dropped: %s", plural(st.dropped, "event was", "events were"),
            st.dropped_note:gsub("^%d+ events dropped: ", ""))
    end
    if st.device_note and st.device_note ~= "" then out[#out + 1] = "WARNING: " .. st.device_note end
    out[#out + 1] = rule
    out[#out + 1] = head
    out[#out + 1] = rule
    local above = 0 -- rows above 100% of their ceiling
    for i, r in ipairs(rows) do
        if i > limit then break end
        local time = on_device(r) and r.device_total_ns or r.cpu_total_ns
        local gflops = (r.flops > 0 and time > 0) and r.flops / time or nil
        local gbs = (r.bytes > 0 and time > 0) and r.bytes / time or nil
        local pct
        if on_device(r) and gflops then -- against the roofline at this intensity
            local attainable = info.peak_gflops
            if r.bytes > 0 then attainable = math.min(info.peak_gflops, r.flops / r.bytes * info.bandwidth_gbs) end
            pct = 100 * gflops / attainable
        elseif on_device(r) and gbs then -- no flops: against the bandwidth
            pct = 100 * gbs / info.bandwidth_gbs
        end
        local line = pad(escaped(r.name)) .. string.format("  %8.2f%% %10s %10s %10s %11s %12s %10s %7d %9d %8s %7s %7s",
            self_total > 0 and 100 * (on_device(r) and 0 or r.self_cpu_ns) / self_total or 0,
            on_device(r) and "-" or fmt_time(r.self_cpu_ns), on_device(r) and "-" or fmt_time(r.cpu_total_ns),
            on_device(r) and "-" or fmt_time(r.cpu_total_ns / r.calls), fmt_time(r.self_device_ns),
            fmt_time(r.device_total_ns), fmt_time(r.device_total_ns / r.calls), r.calls, r.kernels,
            gflops and string.format("%.1f", gflops) or "-", gbs and string.format("%.1f", gbs) or "-",
            calibrate.pct_cell(pct, info.under_load))
        if pct and pct > 100 then above = above + 1 end
        if show_spread then -- slowest minus fastest worker, averaged over the launches that had workers
            line = line .. string.format(" %13s", r.spread_launches and fmt_time(r.spread_ns / r.spread_launches) or "-")
        end
        if show_shapes then line = line .. "  " .. (r.input_shapes or "") end
        if show_src then line = line .. "  " .. escaped(r.src or "") end
        out[#out + 1] = line
    end
    out[#out + 1] = rule
    if above > 0 then -- a ceiling below a measured kernel is wrong: never shown as an ordinary figure
        out[#out + 1] = string.format("WARNING: %s above 100%% of its ceiling (marked !): the ceiling was " ..
            "measured too low (%s)", plural(above, "kernel row is", "kernel rows are"), info.calibrated or "?")
    end
    out[#out + 1] = string.format("Self CPU time total: %s", fmt_time(self_total))
    if on_cuda then
        out[#out + 1] = string.format("Self Device time total: %s (kernels on %s, timed by CUPTI; they run " ..
            "asynchronously, after the op that launched them returned)", fmt_time(dev_total), on_cuda)
    else
        out[#out + 1] = string.format("Self Device time total: %s (kernels on cpu:0 stream 0; the CPU device runs " ..
            "them on the calling thread, so they are inside their op's CPU time)", fmt_time(dev_total))
    end
    out[#out + 1] = string.format("Events: %d recorded, %d dropped; peak storage memory %.1f MiB", st.events,
        st.dropped, st.peak_memory / 1048576)
    out[#out + 1] = string.format("Event store: %.0f MiB in memory of max_memory %.0f MiB, %.1f MiB spilled to disk " ..
        "(memory_policy \"%s\")", st.memory_bytes / 1048576, st.max_memory / 1048576, st.spill_bytes / 1048576,
        st.memory_policy)
    out[#out + 1] = string.format("Profiler overhead: about %.0f ns per recorded op (measured at start), %s in all",
        st.event_cost_ns, fmt_time(st.event_cost_ns * st.events))
    if on_cuda then
        out[#out + 1] = string.format("%% peak: kernels against %s (%s): %.1f GFLOP/s fp32, %.1f GB/s (%s)", info.name,
            info.isa, info.peak_gflops, info.bandwidth_gbs, info.calibrated)
    else
        out[#out + 1] = string.format("%% peak: kernels against the roofline measured on %s (%s, %s): %s", info.name,
            info.isa, plural(info.threads, "thread"), calibrate.ceiling_note(info))
    end
    if getmetatable(self) and self.findings and not M.findings_fit(st) then
        out[#out + 1] = string.format("Findings: left out of the table for %d events (their index would take about " ..
            "%.0f MiB, over max_memory %.0f MiB); p:findings() or p:explain() computes them", st.events,
            st.events * M.FINDINGS_BYTES_PER_EVENT / 1048576, st.max_memory / 1048576)
    elseif getmetatable(self) and self.findings then -- the top three findings (wb.findings, computed in C)
        local list = self:findings()
        out[#out + 1] = string.format("Findings (top %d of %d; p:explain() prints all):", math.min(3, #list), #list)
        out[#out + 1] = require("wb.findings").format(list, 3)
    end
    return table.concat(out, "\n")
end


return M
