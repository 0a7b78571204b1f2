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

-- Whether a timing was taken on a busy machine: the share of its wall time that this thread spent
-- runnable but waiting for a CPU (its run-queue delay, /proc/thread-self/schedstat, as the
-- thread-count rule in core/base/threads.c reads it). Over BUSY_WAIT_SHARE the two contenders'
-- times may hold unequal waits, so the choice is not kept for later processes (it stands for this
-- one). WB_COMPILE_WAIT_SHARE=<0..1> replaces the measured share (tests; comparisons).
M.BUSY_WAIT_SHARE = 0.05

local io_open = io.open -- taken when the module loads (--sandbox takes io.open away later)

-- The thread's run-queue delay so far (ns), or nil where it cannot be read.
function M.wait_ns()
    local ok, f = pcall(io_open, "/proc/thread-self/schedstat")
    if not ok or not f then return nil end
    local text = f:read("a")
    f:close()
    return tonumber(text and text:match("^%d+%s+(%d+)"))
end

-- The share of wall_ns spent waiting since wait0 (M.wait_ns() at the start), as measured or as
-- forced by WB_COMPILE_WAIT_SHARE; nil when unknown. Raises on a forced value that is not one.
function M.wait_share(wait0, wall_ns)
    local forced = os.getenv("WB_COMPILE_WAIT_SHARE")
    if forced and forced ~= "" then
        local v = tonumber(forced)
        if not v or v < 0 or v > 1 then
            error(string.format("WB_COMPILE_WAIT_SHARE='%s': expected a share of the timing from 0 to 1", forced), 0)
        end
        return v
    end
    local wait1 = wait0 and M.wait_ns()
    if not wait1 or wall_ns <= 0 then return nil end
    return math.max(0, wait1 - wait0) / wall_ns
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
