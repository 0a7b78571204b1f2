-- compile_choices.lua: wb.compile's measured kernel choices (the generated kernel or the hand-written
-- one, for a group both cover) kept on disk, so that a later process on the same machine and build
-- reuses a choice instead of timing it again: compile_choices.json in the code generation cache's
-- folder (wb.codegen.info().cache_dir), one entry per machine and build, then per choice.

-- the wb._* internals this module uses, captured at load: they are gone from `wb` under --sandbox
local I = {}
for k, v in pairs(wb) do if type(k) == "string" and k:sub(1, 1) == "_" then I[k] = v end end

local cjson = require("cjson")

local M = {FILE = "compile_choices.json"}

-- The file, or nil where there is no cache folder (--sandbox, no home): choices then stay in memory.
function M.path()
    local ok, info = pcall(wb.codegen.info)
    local dir = ok and type(info) == "table" and info.cache_dir
    return dir and dir .. "/" .. M.FILE or nil
end

-- What a measurement depends on besides the choice's own key: the machine (host, CPU model, ISA
-- path) and the build (version, commit, build type: a Debug or sanitizer build times instrumented code).
function M.machine_key()
    local build = wb.build.type .. (wb.build.sanitizers and "+sanitizers" or "")
    return table.concat({I._hostname and I._hostname() or "?", I._cpu_model and I._cpu_model() or "?", wb.cpu_isa(),
        wb.version, wb.commit or "?", build}, "|")
end

local function read(path)
    local f = path and io.open(path)
    if not f then return {} end
    local text = f:read("a")
    f:close()
    local ok, doc = pcall(cjson.decode, text or "")
    return ok and type(doc) == "table" and doc or {}
end

local function valid(c)
    return type(c) == "table" and type(c.generated) == "boolean" and type(c.gen_us) == "number" and
        type(c.hand_us) == "number" and type(c.reps) == "number" and c.reps >= 1
end

-- The choice kept for `key` on this machine and build: {generated, gen_us, hand_us, reps, path},
-- or nil (none, or an entry that is not one: a damaged file is measured over).
function M.get(key)
    local path = M.path()
    local mine = read(path)[M.machine_key()]
    local c = type(mine) == "table" and mine[key]
    if not valid(c) then return nil end
    return {generated = c.generated, gen_us = c.gen_us, hand_us = c.hand_us, reps = math.floor(c.reps), path = path}
end

-- Keeps choice c for `key`: read, merged and written whole through a temporary file renamed over
-- the old one (two processes that write at once lose one entry, which is measured again later).
-- Returns the path, or nil.
function M.put(key, c)
    local path = M.path()
    if not path then return nil end
    local doc = read(path)
    local mk = M.machine_key()
    if type(doc[mk]) ~= "table" then doc[mk] = {} end
    doc[mk][key] = {generated = c.generated, gen_us = c.gen_us, hand_us = c.hand_us, reps = c.reps}
    local tmp = string.format("%s.%d.tmp", path, math.random(1, 1 << 30))
    local f = io.open(tmp, "w")
    if not f then return nil end
    local ok = f:write(cjson.encode(doc))
    f:close()
    if not ok or not os.rename(tmp, path) then
        os.remove(tmp)
        return nil
    end
    return path
end

return M
