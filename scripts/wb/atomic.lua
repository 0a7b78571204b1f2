-- wb.atomic: whole-or-nothing files for the library's writers (results, profiler exports). The
-- text goes to a temporary file beside the target, every write is checked, then fsync and
-- rename (bindings/l_files.c); a failure raises "<what>: writing '<path>' failed: <reason>"
-- and leaves an earlier file at that path as it was. Under --sandbox the path goes through
-- the same C check as io.open.
--
--   atomic.write("results", path, text)
--   local f = atomic.open("export_stacks", path); f:write(a, b); f:close()   -- written at close

local write_file = wb._write_file -- captured at load: gone from `wb` under --sandbox
local concat, type, error, tostring = table.concat, type, error, tostring

local M = {}

function M.write(what, path, text, level)
    if type(path) ~= "string" then error(what .. ": needs a file path, got " .. type(path), (level or 1) + 1) end
    -- through pcall: the sandbox's refusal (raised in C) then carries no position of this file,
    -- and is raised again at the caller's line like any other failure
    local called, ok, err = pcall(write_file, path, text, what)
    if not called then err = ok end
    if not called or not ok then error(tostring(err), (level or 1) + 1) end
    return path
end

local File = {}
File.__index = File

function File:write(...)
    local parts = self.parts
    for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
    return self
end

function File:close() return M.write(self.what, self.path, concat(self.parts), 2) end

-- A file that is written when closed (a file never closed is never written).
function M.open(what, path)
    if type(path) ~= "string" then error(what .. ": needs a file path, got " .. type(path), 2) end
    return setmetatable({what = what, path = path, parts = {}}, File)
end

return M
