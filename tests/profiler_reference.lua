-- profiler_reference.lua: key_averages computed from the event tables (p:events()), the way the
-- profiler did before the aggregation moved to C; the tests compare the two on real sessions.
local M = {}

local function shapes_string(e)
    if not e.shapes then return "" end
    local parts = {}
    for i, s in ipairs(e.shapes) do
        parts[i] = s and ("[" .. table.concat(s, ", ") .. "]") or "None"
    end
    return "[" .. table.concat(parts, ", ") .. "]"
end

-- Rows per op name (and input shapes / call site when asked) and per kernel name.
function M.key_averages(events, o)
    o = o or {}
    local by_id, child_cpu, own_kernels = {}, {}, {}
    for _, e in ipairs(events) do
        if e.cat == "op" then by_id[e.id] = e end
    end
    for _, e in ipairs(events) do
        if e.cat == "op" and e.parent ~= 0 then child_cpu[e.parent] = (child_cpu[e.parent] or 0) + e.dur_ns end
    end
    -- a range's self time excludes the top-level ops (and runtime calls) inside it
    local range_child = {}
    for _, r in ipairs(events) do
        if r.cat == "range" then
            local t0, t1, inner = r.ts_ns, r.ts_ns + r.dur_ns, 0
            for _, e in ipairs(events) do
                if (e.cat == "op" or e.cat == "runtime") and e.parent == 0 and e.ts_ns >= t0 and e.ts_ns + e.dur_ns <= t1 then
                    inner = inner + e.dur_ns
                end
            end
            range_child[r] = inner
        end
    end
    -- device time: a kernel (or a device copy: cuda's memcpy/memset) counts as self for the op
    -- that launched it and as total for every op above that one
    local dev_self, dev_total, nk = {}, {}, {}
    for _, e in ipairs(events) do
        if e.cat == "kernel" or e.cat == "memcpy" or e.cat == "memset" then
            own_kernels[#own_kernels + 1] = e
            local id = e.correlation
            dev_self[id] = (dev_self[id] or 0) + e.dur_ns
            while id and id ~= 0 do
                dev_total[id] = (dev_total[id] or 0) + e.dur_ns
                if e.cat == "kernel" then nk[id] = (nk[id] or 0) + 1 end
                id = by_id[id] and by_id[id].parent
            end
        end
    end
    local rows, index = {}, {}
    local function row(key, name, kind, extra)
        local r = index[key]
        if not r then
            r = {name = name, kind = kind, calls = 0, self_cpu_ns = 0, cpu_total_ns = 0, self_device_ns = 0,
                device_total_ns = 0, kernels = 0, flops = 0, bytes = 0, input_shapes = extra and extra.shapes,
                src = extra and extra.src}
            index[key] = r
            rows[#rows + 1] = r
        end
        return r
    end
    for _, e in ipairs(events) do
        if e.cat == "op" or e.cat == "range" or e.cat == "runtime" then
            local key, shapes, src = e.cat .. ":" .. e.name, nil, nil
            if o.group_by_input_shape and e.cat == "op" then
                shapes = shapes_string(e)
                key = key .. "|" .. shapes
            end
            if o.group_by_stack_n and e.src then
                src = e.src
                key = key .. "|" .. src
            end
            local r = row(key, e.name, e.cat, {shapes = shapes, src = src})
            r.calls = r.calls + 1
            r.cpu_total_ns = r.cpu_total_ns + e.dur_ns
            r.self_cpu_ns = r.self_cpu_ns + e.dur_ns - (e.cat == "op" and (child_cpu[e.id] or 0) or range_child[e] or 0)
            if e.cat == "op" then
                r.self_device_ns = r.self_device_ns + (dev_self[e.id] or 0)
                r.device_total_ns = r.device_total_ns + (dev_total[e.id] or 0)
                r.kernels = r.kernels + (nk[e.id] or 0)
                r.flops = r.flops + e.flops
                r.bytes = r.bytes + e.bytes
            end
        end
    end
    -- a parallel cpu kernel's worker threads: the spread between its fastest and slowest thread
    local fastest, slowest = {}, {}
    for _, e in ipairs(events) do
        if e.cat == "thread" then
            local k = e.args.kernel
            fastest[k] = math.min(fastest[k] or math.huge, e.dur_ns)
            slowest[k] = math.max(slowest[k] or 0, e.dur_ns)
        end
    end
    for _, e in ipairs(own_kernels) do
        local r = row(e.cat .. ":" .. e.name, e.name, e.cat)
        r.calls = r.calls + 1
        if e.cat == "kernel" then r.kernels = r.kernels + 1 end
        if slowest[e.id] then
            r.spread_ns = (r.spread_ns or 0) + slowest[e.id] - fastest[e.id]
            r.spread_launches = (r.spread_launches or 0) + 1
        end
        r.self_device_ns = r.self_device_ns + e.dur_ns
        r.device_total_ns = r.device_total_ns + e.dur_ns
        r.flops = r.flops + e.flops
        r.bytes = r.bytes + e.bytes
    end
    return rows
end

return M
