-- wb.trace: traces users already have, read by the one reader (wb.profiler.load_trace): the
-- workbench's own, torch.profiler's (Kineto JSON, .json.gz, a TensorBoard folder of per-rank
-- files, the legacy array) and any Chrome trace. Says what a trace is and what it carries, so the
-- rules can run those its fields support and name the others with the reason.

local profiler = require("wb.profiler")

local M = {}

local FORMATS = {workbench = "a workbench trace", kineto = "a torch.profiler trace (Kineto JSON)",
    legacy = "a torch.profiler trace (the legacy profiler's array, no Kineto)", chrome = "a Chrome trace from another tool"}

-- A folder: "path/." opens (a FIFO or a file answers ENOTDIR at once: nothing blocks).
local function is_dir(path)
    local f = io.open(path .. "/.")
    if not f then return false end
    f:close()
    return true
end
M.is_dir = is_dir

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- The trace files in a folder (tensorboard_trace_handler writes <worker>.<step>.pt.trace.json[.gz]
-- per rank), sorted by name.
function M.files(dir)
    local p = io.popen("find " .. shell_quote(dir) .. " -maxdepth 1 -type f \\( -name '*.json' -o -name '*.json.gz' \\)" ..
        " | LC_ALL=C sort")
    local files = {}
    for line in p:lines() do files[#files + 1] = line end
    p:close()
    return files
end

-- "workbench", "kineto", "legacy" or "chrome".
function M.format(q)
    local imp = q.trace_members and q.trace_members.import
    return type(imp) == "table" and imp.format or "workbench"
end

-- The fields a trace from another tool carries, as the rules name them (nil: the workbench's
-- own, which carries every field).
function M.fields(q)
    local imp = q.trace_members and q.trace_members.import
    if type(imp) ~= "table" then return nil end
    local n = function(k) return (tonumber(imp[k]) or 0) > 0 end
    return {ops = n("ops"), kernels = n("kernels") or n("copies"), links = n("linked"), shapes = n("shapes"),
        dtypes = n("dtypes"), runtime = n("runtime"), steps = n("steps"), memory = n("memory"), python = n("python")}
end

-- The fingerprint a Kineto trace carries: the GPU, the rank and the world size.
function M.fingerprint(q)
    local m = q.trace_members or {}
    local fp = {}
    local devs = type(m.deviceProperties) == "table" and m.deviceProperties or {}
    if type(devs[1]) == "table" then fp.gpu, fp.gpus = devs[1].name, #devs end
    local d = type(m.distributedInfo) == "table" and m.distributedInfo or {}
    fp.rank, fp.world_size, fp.backend = tonumber(d.rank), tonumber(d.world_size), d.backend
    return fp
end

local function count(v) return string.format("%d", math.tointeger(tonumber(v) or 0) or 0) end

-- One line: what the trace is and what it holds.
function M.describe(q)
    local fmt = M.format(q)
    if fmt == "workbench" then return FORMATS.workbench end
    local imp = q.trace_members.import
    local parts = {}
    for _, k in ipairs({"ops", "kernels", "copies", "runtime", "steps", "ranges", "memory"}) do
        if (tonumber(imp[k]) or 0) > 0 then parts[#parts + 1] = count(imp[k]) .. " " .. k end
    end
    if (tonumber(imp.kernels) or 0) > 0 then
        parts[#parts + 1] = count(imp.linked) .. " kernels and copies linked to the op that launched them"
    end
    local fp = M.fingerprint(q)
    local where = {}
    if fp.gpu then where[#where + 1] = fp.gpu .. (fp.gpus > 1 and (" (" .. fp.gpus .. " on the host)") or "") end
    if fp.rank then where[#where + 1] = "rank " .. count(fp.rank) .. (fp.world_size and (" of " .. count(fp.world_size)) or "") end
    return string.format("%s: %s%s", FORMATS[fmt] or fmt, #parts > 0 and table.concat(parts, ", ") or "no events",
        #where > 0 and ("; " .. table.concat(where, ", ")) or "")
end

-- wb.trace.load(path[, opts]): a trace file (any format above) -> a stopped session, as
-- wb.profiler.load_trace gives it, with q.trace_format; a folder of per-rank files -> an array of
-- them, in file order (each with .path).
function M.load(path, opts)
    if type(path) ~= "string" then error("trace.load: expected a trace path (a file or a folder), got " .. type(path), 2) end
    if is_dir(path) then
        local files = M.files(path)
        if #files == 0 then error(string.format("trace.load: '%s' is a folder with no .json or .json.gz trace in it", path), 2) end
        local out = {}
        for i, f in ipairs(files) do
            local ok, q = pcall(profiler.load_trace, f, opts)
            if not ok then error("trace.load: " .. tostring(q):gsub("^load_trace: ", ""), 2) end
            q.path, q.trace_format = f, M.format(q)
            out[i] = q
        end
        return out
    end
    local ok, q = pcall(profiler.load_trace, path, opts)
    if not ok then error("trace.load: " .. tostring(q):gsub("^load_trace: ", ""), 2) end
    q.path, q.trace_format = path, M.format(q)
    return q
end

return M
