-- wb.findings_trace: findings and Chrome traces. Writes what the trace carries for the rules
-- (instant events on a "findings" track, and a "workbench" member with the ceilings, the machine
-- and the replay cost); `workbench explain FILE` (wb.cmd.explain) reads them back.

local cjson = require("cjson")
local findings = require("wb.findings")

local M = {}

local FORMAT = 1 -- the "workbench" member's format

-- JSON-safe copy: no infinities or NaN (JSON has none), no functions, depth-limited.
local function plain(v, depth)
    local t = type(v)
    if t == "number" then
        if v ~= v or v == math.huge or v == -math.huge then return nil end
        return v
    elseif t == "string" or t == "boolean" then
        return v
    elseif t == "table" and (depth or 0) < 6 then
        local out = {}
        for k, x in pairs(v) do
            if type(k) == "string" or type(k) == "number" then out[k] = plain(x, (depth or 0) + 1) end
        end
        return out
    end
    return nil
end

-- The context the rules read, as the trace keeps it.
local function context_of(ctx)
    local info = ctx.device_info or {}
    return {device = ctx.device, replay_ns_per_kernel = ctx.replay_ns_per_kernel, machine = plain(ctx.machine),
        device_info = {name = info.name, isa = info.isa, threads = info.threads, peak_gflops = info.peak_gflops,
            bandwidth_gbs = info.bandwidth_gbs, l2_gbs = info.l2_gbs, l3_gbs = info.l3_gbs, dram_gbs = info.dram_gbs,
            l2_bytes = info.l2_bytes, l3_bytes = info.l3_bytes}}
end

-- (events, members) for the native writer: one instant per finding on the "findings" track (the
-- host process, thread 1000), at the time it concerns; and the "workbench" member.
function M.trace_extras(list, ctx, left_out)
    local ev = {'{"ph": "M", "name": "thread_name", "pid": 0, "tid": 1000, "args": {"name": "findings"}}'}
    local kept = {}
    for i, f in ipairs(list) do
        kept[i] = {rule = f.rule, severity = f.severity, message = f.message, unreliable = f.unreliable,
            evidence = plain(f.evidence)}
        ev[#ev + 1] = cjson.encode({ph = "i", s = "t", cat = "finding", name = f.rule, pid = 0, tid = 1000,
            ts = (f.evidence.ts_ns or 0) / 1e3, args = {severity = f.severity, message = f.message}})
    end
    -- left_out: the session's findings index did not fit in max_memory (`workbench explain` runs them)
    local member = cjson.encode({format = FORMAT, context = context_of(ctx), findings = kept,
        findings_left_out = left_out or nil})
    return table.concat(ev, ",\n"), '"workbench": ' .. member
end

-- Host time of one replayed kernel on `device`, measured: a captured graph of 16 one-element
-- adds replayed 200 times (the best of 5 rounds over the kernel count). Cached per device.
local replay_cache = {}
function M.replay_cost(device)
    if replay_cache[device] then return replay_cache[device] end
    local ok, ns = pcall(function()
        local a = wb.ones({1}, {device = device})
        local g = wb.graph.capture(function()
            local x = a
            for _ = 1, 16 do x = wb.add(x, a) end
            return x
        end)
        local best = math.huge
        for _ = 1, 5 do
            local t0 = wb.time_ns()
            for _ = 1, 200 do g:replay() end
            wb.synchronize(device)
            best = math.min(best, (wb.time_ns() - t0) / (200 * 16))
        end
        g:release()
        return best
    end)
    replay_cache[device] = ok and ns or nil
    return replay_cache[device]
end


return M
