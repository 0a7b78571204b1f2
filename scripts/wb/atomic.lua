-- wb.atomic: whole-or-nothing files for the library's writers (results, profiler exports). The
-- text goes to a temporary file beside the target, every write is checked, then fsync and
-- rename (bindings/l_files.c); a failure raises "<what>: writing '<path>' failed: <reason>"
-- and leaves an earlier file at that path as it was. Under --sandbox the path goes through
-- the same C check as io.open.
--
--   atomic.write("results", path, text)
--   local f = atomic.open("export_stacks", path); f:write(a, b); f:close()   -- in place at close
-- (open's file takes each write as it comes, so a long export keeps no copy of its text; a file
-- never closed is removed when collected, the target left as it was)

local write_file, open_file = wb._write_file, wb._open_file -- captured at load: gone from `wb` under --sandbox
local type, error, tostring, pcall = type, error, tostring, pcall

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
    self.f:write(...)
    return self
end

function File:close()
    local ok, err = self.f:commit()
    if not ok then error(tostring(err), 3) end -- the line that called close's caller (an export's user)
    return self.path
end

-- A file written as it goes, in place at close (one never closed never reaches path); a refusal
-- is raised `level` callers up (as write's).
function M.open(what, path, level)
    if type(path) ~= "string" then error(what .. ": needs a file path, got " .. type(path), (level or 1) + 1) end
    local called, f, err = pcall(open_file, path, what)
    if not called then err = f end
    if not called or not f then error(tostring(err), (level or 1) + 1) end
    return setmetatable({what = what, path = path, f = f}, File)
end

return M
