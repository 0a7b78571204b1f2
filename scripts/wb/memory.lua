-- wb.memory: how much memory this process can still take before the machine swaps or the kernel
-- stops it, for experiments that check what they are about to allocate before they start (a
-- sweep that cannot fit would otherwise swap for minutes and be killed, its results lost).
--
--   memory.available() -> bytes, "where it was read" | nil, why
--       /proc/meminfo's MemAvailable (what the kernel can give without swapping), capped by the
--       cgroup's limit less its usage (cgroup v2 memory.max - memory.current) where one is set
--   memory.gib(bytes) -> "12.3 GiB"
--   memory.refusal(need, what) -> nil where `need` bytes fit in what is available (or it cannot be
--       read), else "WHAT needs about X GiB of memory, and Y GiB is available (where): it would
--       swap, then be stopped": the line a script prints before it stops, having allocated nothing
local M = {}

local function read_first(path)
    local f = io.open(path, "r")
    if not f then return nil end
    local text = f:read("a")
    f:close()
    return text
end

function M.available()
    local info = read_first("/proc/meminfo")
    local kb = info and tonumber(info:match("MemAvailable:%s*(%d+) kB"))
    if not kb then return nil, "no MemAvailable in /proc/meminfo" end
    local bytes, where = kb * 1024, "MemAvailable"
    local limit = tonumber((read_first("/sys/fs/cgroup/memory.max") or ""):match("^(%d+)"))
    local used = tonumber((read_first("/sys/fs/cgroup/memory.current") or ""):match("^(%d+)"))
    if limit and used and limit - used < bytes then
        bytes, where = math.max(limit - used, 0), "the cgroup's memory.max less memory.current"
    end
    return bytes, where
end

function M.gib(bytes) return string.format("%.1f GiB", bytes / 2 ^ 30) end

function M.refusal(need, what)
    if type(need) ~= "number" then error("memory.refusal: need must be a number of bytes, got " .. type(need), 2) end
    if type(what) ~= "string" then error("memory.refusal: what must be text (what needs it), got " .. type(what), 2) end
    local free, where = M.available()
    if not free or need <= free then return nil end
    return string.format("%s needs about %s of memory, and %s is available (%s): it would swap, then be stopped", what,
        M.gib(need), M.gib(free), where)
end

return M
