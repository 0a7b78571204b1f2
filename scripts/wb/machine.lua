-- wb.machine: the state of the machine a measurement ran on: load average, other runnable
-- processes, CPU steal time (virtual machines), frequency governor. Results record it at the
-- start and end of a run; a busy machine gets a one-line warning before the figures.
--
--   local m = require("wb.machine")
--   local s = m.state()          -- {load1, cpus, other_runnable, steal_pct, governor, ...}
--   print(m.describe(s)); local w = m.warning(s); if w then print(w) end
--
-- Everything comes from /proc and /sys; what cannot be read (another OS, --sandbox) is left out
-- and `readable` says so. state() samples for about 100 ms (sleeping: our own threads are idle).

local M = {}

local io_open = io.open -- taken when the module loads

local function read(path)
    local ok, f = pcall(io_open, path) -- under --sandbox, io.open refuses /proc: the state is unreadable
    if not ok or not f then return nil end
    local s = f:read("a")
    f:close()
    return s
end

local function cpu_times(stat)
    local t = {}
    for v in stat:match("^cpu%s+([^\n]*)"):gmatch("%d+") do t[#t + 1] = tonumber(v) end
    local total = 0
    for _, v in ipairs(t) do total = total + v end
    return total, t[8] or 0 -- user nice system idle iowait irq softirq steal ...
end

-- Busy when others run on at least half the CPUs (at least one), or steal takes 5% or more.
M.BUSY_RUNNABLE_SHARE, M.BUSY_STEAL_PCT = 0.5, 5

-- A snapshot without sleeping (the profiler takes one when it starts and one when it stops).
function M.snapshot()
    local stat = read("/proc/stat")
    if not stat or not stat:match("^cpu") then return nil end
    local total, steal = cpu_times(stat)
    local cpus = 0
    for _ in stat:gmatch("\ncpu%d+") do cpus = cpus + 1 end
    return {total = total, steal = steal, cpus = cpus,
        running = math.max(0, (tonumber(stat:match("procs_running%s+(%d+)")) or 1) - 1)}
end

-- The machine between two snapshots: steal over the interval, other runnable processes at both
-- ends (the mean), busy by state()'s rule; nil when either snapshot is missing.
function M.between(a, b)
    if not a or not b then return nil end
    local s = {cpus = b.cpus, other_runnable = (a.running + b.running) / 2,
        steal_pct = b.total > a.total and 100 * (b.steal - a.steal) / (b.total - a.total) or 0}
    s.busy = s.other_runnable >= math.max(1, s.cpus * M.BUSY_RUNNABLE_SHARE) * 0.75 or s.steal_pct >= M.BUSY_STEAL_PCT
    return s
end

function M.state(samples, interval_ms)
    samples, interval_ms = samples or 5, interval_ms or 25
    local s = {}
    local first = read("/proc/stat")
    if not first or not first:match("^cpu") then return {readable = false} end
    local cpus = 0
    for _ in first:gmatch("\ncpu%d+") do cpus = cpus + 1 end
    local total0, steal0 = cpu_times(first)
    local running = 0
    local last = first
    for i = 1, samples do
        if i > 1 or samples == 1 then wb.sleep_ms(interval_ms) end
        last = read("/proc/stat") or last
        -- procs_running counts this process's reading thread too
        running = running + math.max(0, (tonumber(last:match("procs_running%s+(%d+)")) or 1) - 1)
    end
    local total1, steal1 = cpu_times(last)
    s.readable = true
    s.cpus = cpus
    s.other_runnable = running / samples
    s.steal_pct = total1 > total0 and 100 * (steal1 - steal0) / (total1 - total0) or 0
    local la = read("/proc/loadavg")
    if la then
        local a, b, c = la:match("^(%S+)%s+(%S+)%s+(%S+)")
        s.load1, s.load5, s.load15 = tonumber(a), tonumber(b), tonumber(c)
    end
    local gov = read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    s.governor = gov and gov:match("^%s*(.-)%s*$") or "unreadable"
    s.date = os.date("!%Y-%m-%dT%H:%M:%SZ")
    s.busy = s.other_runnable >= math.max(1, cpus * M.BUSY_RUNNABLE_SHARE) * 0.75 or s.steal_pct >= M.BUSY_STEAL_PCT
    return s
end

function M.describe(s)
    if not s or not s.readable then return "machine state unreadable" end
    return string.format("load %.2f %.2f %.2f on %d CPUs, %.1f other runnable, steal %.1f%%, governor %s%s",
        s.load1 or -1, s.load5 or -1, s.load15 or -1, s.cpus, s.other_runnable, s.steal_pct, s.governor,
        s.busy and " (busy)" or "")
end

-- One line, or nil when the machine looks quiet.
function M.warning(s)
    if not s or not s.readable or not s.busy then return nil end
    return string.format("warning: busy machine (%.1f other runnable on %d CPUs, steal %.1f%%): timings will be noisy, " ..
        "thread scaling distorted", s.other_runnable, s.cpus, s.steal_pct)
end

-- Flat fields for a results fingerprint: prefix_load1, prefix_other_runnable, ...
function M.flatten(s, prefix, into)
    into = into or {}
    if not s or not s.readable then
        into[prefix .. "state"] = "unreadable"
        return into
    end
    for _, k in ipairs({"load1", "load5", "load15", "cpus", "other_runnable", "steal_pct", "governor", "busy", "date"}) do
        local v = s[k]
        if type(v) == "number" and math.type(v) == "float" then v = tonumber(string.format("%.3g", v)) end
        into[prefix .. k] = v
    end
    return into
end

return M
