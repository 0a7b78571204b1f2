-- wb.findings_trace: findings and Chrome traces. Writes what the trace carries for the rules
-- (instant events on a "findings" track, and a "workbench" member with the ceilings, the machine
-- and the replay cost), reads a trace the workbench wrote back into events, and serves
-- `workbench explain FILE`.

local cjson = require("cjson")
local findings = require("wb.findings")
local words = require("wb.words")

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

-- ---- reading a trace back ------------------------------------------------------------------

local function bad(msg) error({explain = msg}, 0) end

-- A trace the workbench wrote (.json or .json.gz, as the export laid it out or as any JSON tool
-- rewrote it), read in one streaming pass by the one reader (wb.profiler.load_trace, within its
-- limits) -> (events shaped like p:events(), the memory counters left out; the "workbench" member;
-- otherData). Raises {explain = "one line"} for what cannot be read.
function M.read(path)
    local ok, q = pcall(require("wb.profiler").load_trace, path)
    if not ok then bad((tostring(q):gsub("^load_trace: ", ""))) end
    local events = {}
    for e in q:each_event() do
        if e.cat ~= "memory" then events[#events + 1] = e end
    end
    local meta = type(q.trace_members.workbench) == "table" and q.trace_members.workbench or nil
    return events, meta, q.trace_other
end

local USAGE = "usage: workbench explain TRACE [--json]: a .json or .json.gz trace, or a folder of them (one per rank)"

-- One trace's findings: (lines, or the JSON list) and nil, or nil and the one-line refusal.
local function explain_one(path, as_json)
    local trace = require("wb.trace")
    -- read into a store by the one reader, the rules' groups computed in C (memory events included)
    local okq, q = pcall(require("wb.profiler").load_trace, path)
    if not okq then return nil, (tostring(q):gsub("^load_trace: ", "")) end
    local meta = type(q.trace_members.workbench) == "table" and q.trace_members.workbench or nil
    local other = q.trace_other
    local fields = trace.fields(q)
    local c = meta and type(meta.context) == "table" and meta.context or {}
    local ctx = {device = c.device, device_info = type(c.device_info) == "table" and c.device_info or nil,
        machine = type(c.machine) == "table" and c.machine or nil, replay_ns_per_kernel = tonumber(c.replay_ns_per_kernel),
        dropped = type(other) == "table" and math.tointeger(other.dropped_events) or nil,
        dropped_note = type(other) == "table" and type(other.dropped) == "string" and other.dropped or "", fields = fields}
    local okf, list, nevents, device_events, skipped = pcall(findings.analyze_session, q:_result(), ctx, true)
    if nevents == 0 then
        return nil, string.format("'%s' holds no events (%s)", path, fields and trace.describe(q) or "an empty profile")
    end
    if device_events == 0 and not fields then
        return nil, string.format("'%s' has no device events (kernels): record with activities {\"cpu\", \"device\"}", path)
    end
    if not okf then
        return nil, string.format("'%s' has events the rules cannot read (%s)", path, tostring(list):gsub("^.-:%d+: ", ""))
    end
    if as_json then
        local kept = {}
        for i, f in ipairs(list) do kept[i] = {rule = f.rule, severity = f.severity, message = f.message} end
        for _, f in ipairs(skipped or {}) do kept[#kept + 1] = f end
        return kept
    end
    local lines = {}
    if fields then lines[1] = words.escaped(trace.describe(q)) end
    lines[#lines + 1] = findings.format(list)
    for _, f in ipairs(skipped or {}) do lines[#lines + 1] = string.format("[skipped] %s: %s", f.rule, f.message) end
    return lines
end

-- `workbench explain TRACE [--json]`: the findings of a trace (or of each trace in a folder);
-- status 0, or 2 with one line (under --json, a JSON object {"error": ...} on stdout).
function M.explain_main(args)
    local path, as_json
    local function refuse(msg)
        if as_json then print(cjson.encode({error = "explain: " .. msg, path = path})) end
        if not as_json then io.stderr:write("explain: " .. words.escaped(msg) .. "\n") end
        return 2
    end
    for _, a in ipairs(args) do if a == "--json" then as_json = true end end
    for _, a in ipairs(args) do
        if a == "--json" then -- taken above
        elseif a:sub(1, 2) == "--" then return refuse(string.format("unknown option '%s' (%s)", a, USAGE))
        elseif path then return refuse("one trace at a time (" .. USAGE .. ")")
        else path = a end
    end
    if not path then return refuse("no trace given (" .. USAGE .. ")") end
    local trace = require("wb.trace")
    if not trace.is_dir(path) then
        local out, err = explain_one(path, as_json)
        if not out then return refuse(err) end
        print(as_json and (#out > 0 and cjson.encode(out) or "[]") or table.concat(out, "\n"))
        return 0
    end
    -- a TensorBoard folder (tensorboard_trace_handler): one trace per rank, each explained
    local files = trace.files(path)
    if #files == 0 then return refuse(string.format("'%s' is a folder with no .json or .json.gz trace in it", path)) end
    local all = {}
    for i, f in ipairs(files) do
        local out, err = explain_one(f, as_json)
        if not out then return refuse(err) end
        if as_json then all[i] = {trace = f, findings = out}
        else print((i > 1 and "\n" or "") .. "== " .. words.escaped(f) .. "\n" .. table.concat(out, "\n")) end
    end
    if as_json then print(cjson.encode(all)) end
    return 0
end

return M
