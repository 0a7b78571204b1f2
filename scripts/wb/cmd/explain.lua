-- wb.cmd.explain: `workbench explain TRACE [--json]`: the findings of a trace (the workbench's,
-- torch.profiler's or any Chrome trace: wb.trace), or of each trace of a TensorBoard folder, read
-- by the one reader (wb.profiler.load_trace) with the rules of wb.findings.
-- bindings/main.c requires wb.cmd.<subcommand> and calls its main: returns the exit status.

local cjson = require("cjson")
local findings = require("wb.findings")
local profiler = require("wb.profiler")
local words = require("wb.words")

local M = {}

local USAGE = "usage: workbench explain TRACE [--json]: a .json or .json.gz trace, or a folder of them (one per rank)"

-- One trace's findings: (lines, or the JSON list) and nil, or nil and the one-line refusal.
local function explain_one(path, as_json)
    local trace = require("wb.trace")
    -- read into a store by the one reader, the rules' groups computed in C (memory events included)
    local okq, q = pcall(profiler.load_trace, path)
    if not okq then return nil, (tostring(q):gsub("^load_trace: ", "")) end
    local meta = type(q.trace_members.workbench) == "table" and q.trace_members.workbench or nil
    local other = q.trace_other
    local fields = trace.fields(q)
    local c = meta and type(meta.context) == "table" and meta.context or {}
    local ctx = {device = c.device, device_info = type(c.device_info) == "table" and c.device_info or nil,
        machine = type(c.machine) == "table" and c.machine or nil, replay_ns_per_kernel = tonumber(c.replay_ns_per_kernel),
        dropped = type(other) == "table" and math.tointeger(other.dropped_events) or nil,
        dropped_note = type(other) == "table" and type(other.dropped) == "string" and other.dropped or "", fields = fields}
    local okf, list, nevents, device_events, skipped = pcall(findings.analyze_session, q:_result(), ctx)
    if nevents == 0 then
        local imp = q.trace_members and q.trace_members.import
        local unread = type(imp) == "table" and ((tonumber(imp.unread) or 0) + (tonumber(imp.unfinished) or 0)) > 0
        return nil, string.format("'%s' holds no events%s (%s)", path, unread and " the workbench reads" or "",
            fields and trace.describe(q) or "an empty profile")
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
function M.main(args)
    local path, as_json
    local function refuse(msg)
        if as_json then print(cjson.encode({error = "explain: " .. msg, path = path})) end
        if not as_json then io.stderr:write("explain: " .. words.escaped(msg) .. "\n") end
        return 2
    end
    for _, a in ipairs(args) do
        if a == "--help" or a == "-h" then print(USAGE); return 0 end
        if a == "--json" then as_json = true end
    end
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
