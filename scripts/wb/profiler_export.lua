-- wb.profiler_export: folded stacks (flamegraph.pl, speedscope; computed in C) and the memory
-- timeline (JSON and an HTML chart). The Chrome trace is written natively; these follow its rules for paths and --sandbox.

local cjson = require("cjson")
local report = require("wb.report")
local atomic = require("wb.atomic")

local M = {}

-- A file written as it goes and put in place at close (wb.atomic), with export_chrome_trace's
-- checks and messages; a refusal names the line that called the export.
local function open_for_writing(what, path)
    if type(path) ~= "string" then error(string.format("profiler: %s needs a file path", what), 3) end
    return atomic.open(what, path, 2) -- a tail call: level 2 of open is the export's caller's line
end


-- Folded stacks, one line per distinct stack: "call site;op;inner op;kernel <ns>" (flamegraph.pl,
-- speedscope), computed in C over a session's store (core/observe/profiler_stacks.c): source()
-- returns the text (a session's folded_stacks()).
function M.export_stacks(source, path)
    local f = open_for_writing("export_stacks", path)
    local ok, text = pcall(source)
    if not ok then error(text, 2) end -- nothing in place: the file is put there at close
    f:write(text)
    f:close()
    return path
end

-- Allocated bytes over time per device, from memory events (profile_memory): the first point is
-- (0, the bytes live on that device before its first event), then (ts_ns, live bytes) after each.
local function device_of(e) return e.args.device or "cpu" end
local function first_level(e) return e.args.allocated_bytes - math.floor(e.bytes) end

-- {{device =, points = {{ts_ns, bytes}, ...}, peak_bytes =}, ...} from a list of events.
function M.memory_timeline(events)
    local devices, out = {}, {}
    for _, e in ipairs(events) do
        if e.cat == "memory" then
            local d = devices[device_of(e)]
            if not d then
                d = {device = device_of(e), points = {{0, first_level(e)}}, peak_bytes = 0}
                devices[d.device], out[#out + 1] = d, d
            end
            d.points[#d.points + 1] = {e.ts_ns, e.args.allocated_bytes}
            d.peak_bytes = math.max(d.peak_bytes, e.args.allocated_bytes)
        end
    end
    return out
end

-- The chart draws at most this many points per device: past it, each bucket of events gives its
-- lowest and highest level, in time order (the JSON keeps every point).
M.CHART_POINTS = 4000

local function html_page(timeline, json_name)
    local series, thinned = {}, false
    for _, d in ipairs(timeline) do
        local pts, prev = {}, nil
        for _, p in ipairs(d.chart) do -- a step function: the level holds until the next event
            if prev then pts[#pts + 1] = {p[1] / 1e6, prev / 1048576} end
            pts[#pts + 1] = {p[1] / 1e6, p[2] / 1048576}
            prev = p[2]
        end
        thinned = thinned or #d.chart < d.events + 1
        series[#series + 1] = {name = d.device, points = pts}
    end
    local chart = #series > 0 and report.line_chart{title = "Allocated memory over time",
        caption = "Bytes of tensor storage allocated on each device after every allocation and free " ..
            "the profiler recorded (profile_memory = true)" .. (thinned and string.format("; drawn from at most " ..
            "%d points per device, each bucket of events as its lowest and highest level", M.CHART_POINTS) or "") ..
            "; the data is in " .. json_name .. ".",
        x_label = "time since the session started (ms)", y_label = "allocated (MiB)", series = series}
        or "<p>No memory events were recorded: profile with profile_memory = true.</p>"
    local rows = {}
    for _, d in ipairs(timeline) do
        rows[#rows + 1] = string.format("<tr><td>%s</td><td>%.1f MiB</td><td>%d</td></tr>", report.escape(d.device),
            d.peak_bytes / 1048576, d.events)
    end
    return report.page_head("memory timeline") .. "\n" ..
        "<h1>Memory timeline</h1>\n" .. chart .. "\n<table><tr><th>device</th><th>peak allocated</th>" ..
        "<th>events</th></tr>" .. table.concat(rows) .. "</table>\n</body></html>\n"
end

-- Writes the timeline as JSON at `path` and its chart beside it (`path` without .json, plus .html).
-- `each()` returns an iterator over the memory events (p:each_event): one pass counts each device's
-- events and peak, then one pass per device writes its points as they come, so no table per event
-- is kept (the events are built in batches and dropped).
function M.export_memory_timeline(each, path, profile_memory)
    if type(path) ~= "string" then error("profiler: export_memory_timeline needs a file path", 2) end
    if not profile_memory then
        error("profiler: export_memory_timeline needs a session recorded with profile_memory = true", 2)
    end
    local html_path = path:gsub("%.json$", "") .. ".html"
    local timeline, by_device = {}, {}
    for e in each() do
        local d = by_device[device_of(e)]
        if not d then
            d = {device = device_of(e), first = first_level(e), peak_bytes = 0, events = 0}
            by_device[d.device], timeline[#timeline + 1] = d, d
        end
        d.events = d.events + 1
        d.peak_bytes = math.max(d.peak_bytes, e.args.allocated_bytes)
    end
    local f = open_for_writing("export_memory_timeline", path)
    local h = open_for_writing("export_memory_timeline", html_path)
    f:write('{"unit": "bytes", "time_unit": "ns", "devices": [')
    for i, d in ipairs(timeline) do
        f:write(i > 1 and ", " or "", "{", cjson.encode("device"), ": ", cjson.encode(d.device), ', "peak_bytes": ',
            string.format("%.17g", d.peak_bytes), ', "points": [[0, ', string.format("%.17g", d.first), "]")
        d.chart = {{0, d.first}}
        local per = math.max(1, math.ceil(d.events / (M.CHART_POINTS // 2)))
        local lo, hi, n = nil, nil, 0
        local function flush()
            if not lo then return end
            local a, b = lo, hi
            if b[1] < a[1] then a, b = b, a end
            d.chart[#d.chart + 1] = a
            if b ~= a then d.chart[#d.chart + 1] = b end
            lo, hi, n = nil, nil, 0
        end
        for e in each() do
            if device_of(e) == d.device then
                local ts, live = e.ts_ns, e.args.allocated_bytes
                f:write(", [", string.format("%.17g", ts), ", ", string.format("%.17g", live), "]")
                if per == 1 then
                    d.chart[#d.chart + 1] = {ts, live}
                else
                    local pt = {ts, live}
                    if not lo or live < lo[2] then lo = pt end
                    if not hi or live > hi[2] then hi = pt end
                    n = n + 1
                    if n == per then flush() end
                end
            end
        end
        flush()
        f:write("]}")
    end
    f:write("]}\n")
    f:close()
    h:write(html_page(timeline, path:match("[^/]*$")))
    h:close()
    return path, html_path
end

return M
