-- wb.profiler_calls: what one call of a function costs, from the profiler: the kernels it launches
-- and its host time (medians over a few profiled calls, each inside a named range), measured in
-- the same run. On the cpu the kernels run inside the call, so its host time is the range's
-- duration less its kernels'; on cuda they run asynchronously, so host time is the call's own
-- duration (launches only) and the kernels are counted over all the calls (each followed by a
-- synchronize outside the range).
--
--   wb.profiler.per_call(fn[, {calls = 5, range = "call", device = "cpu", kernels = n}])
--   -> {kernels =, host_us =, kernel_events = one call's kernel events, profile = p}
--   kernels = n: the count each call must launch, checked with p:expect (a readable error)
local M = {}

local OPTIONS = {calls = true, range = true, device = true, kernels = true}

function M.per_call(profile, fn, o)
    -- level 4: the caller of wb.profiler.per_call
    local function bad(fmt, ...) error("profiler.per_call: " .. string.format(fmt, ...), 4) end
    if type(fn) ~= "function" then bad("fn must be a function, got %s", type(fn)) end
    o = o or {}
    if type(o) ~= "table" then bad("options must be a table {calls=, range=, device=, kernels=}, got %s", type(o)) end
    for k in pairs(o) do
        if not OPTIONS[k] then bad("unknown option '%s' (expected calls, range, device, kernels)", tostring(k)) end
    end
    local calls, range = o.calls or 5, o.range or "call"
    if math.type(calls) ~= "integer" or calls < 1 then
        bad("calls must be a whole number from 1, got %s", tostring(calls))
    end
    if type(range) ~= "string" then bad("range must be a name, got %s", type(range)) end
    local cuda = o.device == "cuda"
    local p = profile({with_flops = true}, function()
        for _ = 1, calls do
            wb.profiler.range(range, fn)
            if cuda then wb.synchronize("cuda") end
        end
    end)
    if o.kernels then p:expect{range = range, kernels = o.kernels} end
    local runs = p:range_instances(range)
    local hosts = {}
    for i, r in ipairs(runs) do hosts[i] = cuda and r.dur_ns or r.host_ns end
    table.sort(hosts)
    local host_us = hosts[(#hosts + 1) // 2] / 1e3
    if cuda then
        local kernels = p:events{cat = "kernel"}
        local n = #kernels // calls
        return {kernels = n, host_us = host_us, kernel_events = {table.unpack(kernels, #kernels - n + 1)}, profile = p}
    end
    return {kernels = #runs[#runs].kernels, host_us = host_us, kernel_events = runs[1].kernels, profile = p}
end

return M
