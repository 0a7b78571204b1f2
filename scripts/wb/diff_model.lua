-- wb.diff_model: the model wb.diff aligns, computed in Lua from a list of events (p:events() of a
-- stopped session, or synthetic ones in the tests); wb.diff.model_of computes the same in C over a
-- session's store (core/observe/profiler_groups.c), and the tests hold the two equal. See wb.diff
-- for what a node is.

local M = {MAX_DEPTH = 256} -- the deepest nesting of ranges and ops taken (WB_DIFF_MAX_DEPTH in C)

M.HOST = {range = true, op = true, runtime = true}
M.DEVICE = {kernel = true, memcpy = true, memset = true}
M.KIND_FIELDS = {"op", "dtype", "isa", "layout", "epilogue"}
-- what a kernel of the same kind may still change: shown as a kind change, not an alignment key
-- (not `threads`: how many workers a launch got is the pool's choice at the time, not a kind)
M.DETAIL_FIELDS = {"tile"}
local HOST, DEVICE, KIND_FIELDS, DETAIL_FIELDS = M.HOST, M.DEVICE, M.KIND_FIELDS, M.DETAIL_FIELDS

local function fail(msg) error({diff_error = msg}, 0) end

-- a field's value as text (a whole float as an integer), nil for what is neither string nor number
function M.scalar(v)
    if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
    return (type(v) == "string" or type(v) == "number") and tostring(v) or nil
end
local scalar = M.scalar

-- A kernel's kind from its fields. One with none of them (a foreign or older event) is known by
-- its category and whole name: compared as a whole, never taken apart.
local function kind_key(e)
    local a, parts = e.args or {}, {}
    for _, f in ipairs(KIND_FIELDS) do
        local v = scalar(a[f])
        if v then parts[#parts + 1] = f .. "=" .. v end
    end
    if #parts == 0 then return e.cat .. " " .. e.name end
    return e.cat .. " " .. table.concat(parts, ",")
end
M.kind_key = kind_key

local function shapes_text(e)
    if type(e.shapes) ~= "table" then return "" end
    local parts = {}
    for i, s in ipairs(e.shapes) do
        if type(s) == "table" then
            local dims = {}
            for d, v in ipairs(s) do dims[d] = tostring(v) end
            parts[i] = table.concat(dims, "x")
            if #dims == 0 then parts[i] = "scalar" end
        else
            parts[i] = "-"
        end
    end
    return table.concat(parts, ", ")
end

local function dtypes_text(e)
    if type(e.dtypes) ~= "table" then return "" end
    local parts = {}
    for i, d in ipairs(e.dtypes) do parts[i] = scalar(d) or "-" end
    return table.concat(parts, ",")
end

-- (alignment key without the rank, label shown)
local function signature(e)
    if e.cat == "range" then return "range " .. e.name, e.name end
    if e.cat == "op" then
        local s = shapes_text(e)
        return "op " .. e.name .. "(" .. s .. ")[" .. dtypes_text(e) .. "]", s ~= "" and e.name .. " (" .. s .. ")" or e.name
    end
    if HOST[e.cat] then return e.cat .. " " .. e.name, e.name end
    return kind_key(e), e.name
end

local function sorted_by_time(list)
    table.sort(list, function(x, y)
        if x.ts_ns ~= y.ts_ns then return x.ts_ns < y.ts_ns end
        return x.dur_ns > y.dur_ns -- the enclosing one first
    end)
    return list
end

-- model(events[, o]) -> {nodes = {path -> node}, order = {paths}, steps = {{host_ns, device_ns,
-- ts_ns, root}}, notes = {...}}. A node: {path, parent, label, cat, depth, host = {samples},
-- device = {samples}, fields (a kernel's), kernels = {names under it}, order}. o.per_occurrence:
-- repeats apart (see above).
function M.model(events, o)
    if type(events) ~= "table" then fail("expected a list of events") end
    local per_occurrence = type(o) == "table" and o.per_occurrence
    local steps, host, device, by_id = {}, {}, {}, {}
    for _, e in ipairs(events) do
        if type(e) == "table" and type(e.ts_ns) == "number" and type(e.dur_ns) == "number" and type(e.name) == "string" then
            if e.cat == "step" then steps[#steps + 1] = e
            elseif HOST[e.cat] then host[#host + 1] = e; if e.cat ~= "range" then by_id[e.id] = e end
            elseif DEVICE[e.cat] then device[#device + 1] = e end
        end
    end
    local notes = {}
    sorted_by_time(steps)
    sorted_by_time(host)
    sorted_by_time(device)
    if #host + #device == 0 then fail("holds no ranges, ops or kernels (an empty profile)") end
    -- the step p:step() opens after the last one of a loop holds nothing: not a sample
    local function holds_something(s)
        for _, e in ipairs(host) do if e.ts_ns >= s.ts_ns and e.ts_ns < s.ts_ns + s.dur_ns then return true end end
        return false
    end
    while #steps > 1 and not holds_something(steps[#steps]) do steps[#steps] = nil end
    if #steps == 0 then
        local lo, hi = math.huge, -math.huge
        for _, e in ipairs(host) do lo = math.min(lo, e.ts_ns); hi = math.max(hi, e.ts_ns + e.dur_ns) end
        if lo == math.huge then for _, e in ipairs(device) do lo = math.min(lo, e.ts_ns); hi = math.max(hi, e.ts_ns + e.dur_ns) end end
        steps[1] = {ts_ns = lo, dur_ns = hi - lo, name = "whole trace", synthetic = true}
        notes[#notes + 1] = "no steps recorded (p:step()): the whole trace is one step"
    end
    local function step_of(ts) -- steps do not overlap: the last one starting at or before ts
        local lo, hi = 1, #steps
        while lo < hi do
            local mid = (lo + hi + 1) // 2
            if steps[mid].ts_ns <= ts then lo = mid else hi = mid - 1 end
        end
        local s = steps[lo]
        if s and ts >= s.ts_ns and ts <= s.ts_ns + s.dur_ns then return lo end
    end
    local inst, roots = {}, {}
    for i, s in ipairs(steps) do roots[i] = {e = s, children = {}, step = i, path = "", device_ns = 0} end
    local ranges = {} -- per step: a search stays within its step
    for i in ipairs(steps) do ranges[i] = {} end
    for _, e in ipairs(host) do
        local k = step_of(e.ts_ns)
        if k then
            inst[e] = {e = e, children = {}, step = k, device_ns = 0}
            if e.cat == "range" then table.insert(ranges[k], e) end
        end
    end
    local function innermost_range(e, k)
        local best
        for _, r in ipairs(ranges[k]) do
            if r ~= e and r.ts_ns <= e.ts_ns and e.ts_ns + e.dur_ns <= r.ts_ns + r.dur_ns and
                (r.dur_ns > e.dur_ns or (r.dur_ns == e.dur_ns and r.ts_ns < e.ts_ns) or
                    (r.dur_ns == e.dur_ns and r.ts_ns == e.ts_ns and r.id < e.id)) and
                (not best or r.dur_ns < best.dur_ns) then
                best = r
            end
        end
        return best and inst[best] or roots[k]
    end
    for _, e in ipairs(host) do
        local n = inst[e]
        if n then
            local p = e.cat ~= "range" and e.parent ~= 0 and by_id[e.parent] and inst[by_id[e.parent]]
            if not p or p == n then p = innermost_range(e, n.step) end
            n.parent = p
            p.children[#p.children + 1] = n
        end
    end
    for _, e in ipairs(device) do
        local launcher = by_id[e.correlation] and inst[by_id[e.correlation]]
        local p = launcher
        if not p then
            local k = step_of(e.ts_ns)
            p = k and innermost_range(e, k)
        end
        if p then
            local n = {e = e, children = {}, step = p.step, device_ns = e.dur_ns, parent = p}
            p.children[#p.children + 1] = n
            local q = p
            while q do q.device_ns = q.device_ns + e.dur_ns; q = q.parent end
        end
    end
    local nodes, order = {}, {}
    local function visit(n, depth)
        table.sort(n.children, function(x, y)
            if x.e.ts_ns ~= y.e.ts_ns then return x.e.ts_ns < y.e.ts_ns end
            return x.e.dur_ns > y.e.dur_ns
        end)
        local rank = {}
        if depth > M.MAX_DEPTH and #n.children > 0 then -- as the C model (profiler_groups.h)
            fail(string.format("diff: ranges and ops nest more than %d deep: no program's profile does; the trace " ..
                "is refused", M.MAX_DEPTH))
        end
        for _, c in ipairs(n.children) do
            local key, label = signature(c.e)
            rank[key] = (rank[key] or 0) + 1
            c.path = per_occurrence and n.path .. "/" .. key .. "#" .. rank[key] or n.path .. "/" .. key
            local node = nodes[c.path]
            if not node then
                node = {path = c.path, parent = n.path,
                    label = per_occurrence and rank[key] > 1 and label .. " #" .. rank[key] or label,
                    name = c.e.name, cat = c.e.cat, depth = depth, host = {}, device = {}, kernels = {},
                    order = #order + 1, first = c}
                if DEVICE[c.e.cat] then
                    node.kind_key = key
                    node.fields = {}
                    for _, f in ipairs(KIND_FIELDS) do node.fields[f] = scalar((c.e.args or {})[f]) end
                    for _, f in ipairs(DETAIL_FIELDS) do node.fields[f] = scalar((c.e.args or {})[f]) end
                end
                nodes[c.path] = node
                order[#order + 1] = c.path
            end
            if HOST[c.e.cat] then node.host[#node.host + 1] = c.e.dur_ns end
            node.device[#node.device + 1] = c.device_ns
            node.steps = node.steps or {}
            node.steps[c.step] = (node.steps[c.step] or 0) + 1
            visit(c, depth + 1)
        end
    end
    local out_steps = {}
    for i, r in ipairs(roots) do
        visit(r, 1)
        local wait = type(r.e.args) == "table" and tonumber(r.e.args.run_delay_ns) or 0
        out_steps[i] = {host_ns = r.e.dur_ns, device_ns = r.device_ns, ts_ns = r.e.ts_ns, root = r,
            wait_ns = (wait == wait and wait >= 0) and wait or 0}
    end
    for _, node in pairs(nodes) do -- the kernels under a node, by name, as its first occurrence ran them
        local function collect(n)
            for _, c in ipairs(n.children) do
                if DEVICE[c.e.cat] then node.kernels[#node.kernels + 1] = c.e.name end
                collect(c)
            end
        end
        if DEVICE[node.cat] then node.kernels[1] = node.name else collect(node.first) end
    end
    return {nodes = nodes, order = order, steps = out_steps, notes = notes}
end

return M
