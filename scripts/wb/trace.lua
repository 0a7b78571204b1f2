-- wb.trace: traces users already have, read by the one reader (wb.profiler.load_trace): the
-- workbench's own, torch.profiler's (Kineto JSON, .json.gz, a TensorBoard folder of per-rank
-- files, the legacy array) and any Chrome trace. Says what a trace is and what it carries, so the
-- rules can run those its fields support and name the others with the reason.

local profiler = require("wb.profiler")

local M = {}


-- A folder: "path/." opens (a FIFO or a file answers ENOTDIR at once: nothing blocks).
local function is_dir(path)
    local f = io.open(path .. "/.")
    if not f then return false end
    f:close()
    return true
end
M.is_dir = is_dir

local list_files = wb._files -- captured at load: wb._* are gone under --sandbox

-- The trace files in a folder (tensorboard_trace_handler writes <worker>.<step>.pt.trace.json[.gz]
-- per rank), sorted by name.
function M.files(dir)
    local names, err = list_files(dir)
    if not names then error("trace.load: " .. err, 0) end
    local files = {}
    for _, name in ipairs(names) do
        if name:match("%.json$") or name:match("%.json%.gz$") then files[#files + 1] = dir .. "/" .. name end
    end
    return files
end

local info = require("wb.trace_info")
M.format, M.fields, M.fingerprint, M.describe = info.format, info.fields, info.fingerprint, info.describe

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
            q.path, q.trace_format = f, info.format(q)
            out[i] = q
        end
        return out
    end
    local ok, q = pcall(profiler.load_trace, path, opts)
    if not ok then error("trace.load: " .. tostring(q):gsub("^load_trace: ", ""), 2) end
    q.path, q.trace_format = path, info.format(q)
    return q
end

return M
