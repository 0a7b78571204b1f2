-- wb.calibrate: the CPU's roofline ceilings, measured until stable and cached per machine.
--
-- Compute: the FMA loop of the active path (wb.cpu_peak_gflops), repeated until the best three
-- runs agree within SPREAD (at most MAX_REPEATS runs); the best is the peak. Bandwidth: reads of
-- working sets sized from the machine's caches (sysfs), so that the roofline is cache-aware:
--   L2:   half of L2 per thread;  L3: half of L3 (at most 32 MiB, at least twice the L2s);
--   DRAM: twice L3 (at least 64 MiB, at most 1 GiB)
-- each repeated the same way. A calibration measured while the machine was busy (wb.machine) is
-- flagged `under_load` and never written to the cache; a cached one measured on a quiet machine
-- is preferred. Cache: $XDG_CACHE_HOME/workbench/calibration.json (else ~/.cache/workbench/),
-- keyed by host, CPU model, ISA path and thread count, with the conditions of the measurement.
-- wb.device_info("cpu") is calibrate.device_info: the measured ceilings beside the theoretical
-- peak (FMA lanes x 2 FMA ports x 2 flops x clock x threads; the clock is the nominal one where
-- the system reports no maximum, so turbo can put the measured figure above it).

-- the wb._* internals this module uses, captured at load: they are gone from `wb` under --sandbox
local I = {}
for k, v in pairs(wb) do if type(k) == "string" and k:sub(1, 1) == "_" then I[k] = v end end

local cjson = require("cjson")
local machine = require("wb.machine")
local atomic = require("wb.atomic")

local M = {SPREAD = 0.05, MAX_REPEATS = 8, FMA_PORTS = 2}

local function until_stable(measure)
    local vals = {}
    for _ = 1, M.MAX_REPEATS do
        vals[#vals + 1] = measure()
        table.sort(vals, function(a, b) return a > b end)
        if #vals >= 3 and vals[1] > 0 and (vals[1] - vals[3]) / vals[1] <= M.SPREAD then
            return vals[1], (vals[1] - vals[3]) / vals[1], #vals, true
        end
    end
    local spread = #vals >= 3 and vals[1] > 0 and (vals[1] - vals[3]) / vals[1] or 1
    return vals[1], spread, #vals, false
end

function M.cache_path()
    local base = os.getenv("XDG_CACHE_HOME")
    if not base or base == "" then
        local home = os.getenv("HOME")
        if not home or home == "" then return nil end
        base = home .. "/.cache"
    end
    return base .. "/workbench/calibration.json"
end

-- The cache's folder, or nil where it may not be used: it must be this user's alone (created 0700
-- where missing), the generated code's cache's rule, so that no one else can plant a calibration
-- there, or a link that the write would follow.
local refused -- why the folder was refused (said where the calibration is described)
local function private_folder(path)
    local dir = path and path:match("^(.*)/[^/]*$")
    local ok, mine, why = pcall(I._private_dir, dir)
    if ok and not mine and why then refused = tostring(why):gsub("^codegen: ", ""):gsub(";.*", "") end
    return ok and mine and dir or nil
end

local function read_cache(path)
    if not private_folder(path) then return {} end
    local ok, f = pcall(io.open, path)
    if not ok or not f then return {} end
    local text = f:read("a")
    f:close()
    local okj, doc = pcall(cjson.decode, text)
    return okj and type(doc) == "table" and doc or {}
end

-- Under --sandbox the cache can be neither found (HOME reads as nil) nor read (it lies outside the
-- script's folder), so each sandboxed run measured the peak again, and under load a low one: the
-- sandbox takes the cache's entries as they stand before it closes (M.before_sandbox), and a
-- sandboxed run reads those. Nothing is written from inside it (its load is unreadable: never cached).
local taken -- what M.before_sandbox read: {path = ..., doc = ...}

function M.before_sandbox()
    local path = M.cache_path()
    taken = {path = path, doc = read_cache(path)}
end

local function write_cache(path, doc)
    if not private_folder(path) then return false end
    -- whole or nothing, through a fresh temporary file (a link planted at the path is replaced)
    return (pcall(atomic.write, "calibration", path, cjson.encode(doc)))
end

-- A build's own entries: a Debug or sanitizer build measures its instrumented loops (an ASan
-- build's FMA peak is a fraction of the Release one), which must never stand for the machine.
local function key(threads)
    local build = wb.build.type .. (wb.build.sanitizers and "+sanitizers" or "")
    return table.concat({I._hostname(), I._cpu_model(), wb.cpu_isa(), tostring(threads), build}, "|")
end
M.cache_key = key -- the entry of the cache file that calibrate.cpu(threads) reads (tests plant one)

local function theoretical(threads)
    local mhz = I._cpu_clock_mhz()
    if not mhz or mhz <= 0 then return nil, nil end
    return I._cpu_fma_lanes() * M.FMA_PORTS * 2 * mhz / 1e3 * threads, mhz
end

-- Measure now (no cache). Returns the calibration entry.
function M.measure(threads)
    local before = machine.state(3, 20)
    local caches = I._cpu_caches()
    local l2 = caches.l2 or 1 << 20
    local l3 = caches.l3 or 32 << 20
    local sets = {
        l2 = math.max(64 << 10, l2 // 2 * threads),
        l3 = math.max(2 * l2 * threads, math.min(l3 // 2, 32 << 20)),
        dram = math.min(math.max(2 * l3, 64 << 20), 1 << 30),
    }
    local e = {threads = threads, l2_bytes = caches.l2, l3_bytes = caches.l3, sets = sets}
    e.peak_gflops, e.peak_spread, e.peak_runs, e.peak_stable = until_stable(function() return wb.cpu_peak_gflops(threads, 30) end)
    for _, level in ipairs({"l2", "l3", "dram"}) do
        local passes = level == "dram" and 2 or 3
        local best, spread, _, stable = until_stable(function() return I._read_gbs(threads, sets[level], passes) end)
        e[level .. "_gbs"], e[level .. "_spread"], e[level .. "_stable"] = best, spread, stable
    end
    local after = machine.state(3, 20)
    e.under_load = (before.busy or after.busy) and true or false
    -- /proc unreadable (as under --sandbox): no one can say the machine was quiet, so it is not cached
    e.load_unknown = not (before.readable and after.readable) or nil
    e.conditions = "start: " .. machine.describe(before) .. "; end: " .. machine.describe(after)
    e.date = os.date("!%Y-%m-%dT%H:%M:%SZ")
    e.workbench = wb.version
    return e
end

local memo = {}

-- calibrate.cpu(threads[, {force = true}]) -> entry (cached in memory and, when measured on a
-- quiet machine, in the cache file). entry.source: "cache" or "measured".
function M.cpu(threads, o)
    threads = threads or wb.get_num_threads()
    if math.type(threads) ~= "integer" or threads < 1 then
        error("calibrate.cpu: threads must be a positive integer, got " .. tostring(threads), 2)
    end
    if o ~= nil and type(o) ~= "table" then error("calibrate.cpu: options must be a table, got " .. type(o), 2) end
    local k = key(threads)
    if memo[k] and not (o and o.force) then return memo[k] end
    local path, doc
    if wb.sandboxed and taken then
        path, doc = taken.path, taken.doc
    else
        path = M.cache_path()
        doc = read_cache(path)
    end
    local cached = type(doc[k]) == "table" and doc[k] or nil
    if cached and not (o and o.force) and not cached.under_load then
        cached.source, cached.path = "cache", path
        memo[k] = cached
        return cached
    end
    local e = M.measure(threads)
    e.source = "measured"
    if e.under_load and cached and not cached.under_load then
        -- a quiet calibration beats one taken under load: keep it, say so
        cached.source, cached.path = "cache (a new calibration under load was not kept)", path
        memo[k] = cached
        return cached
    end
    if not e.under_load and not e.load_unknown and write_cache(path, (function() doc[k] = e; return doc end)()) then
        e.path = path
    end
    memo[k] = e
    return e
end

-- The ceiling a kernel moving `bytes` is judged against: the smallest level its data fits in.
function M.roof_for(entry, bytes)
    if entry.l2_bytes and bytes <= entry.l2_bytes * entry.threads then return "L2", entry.l2_gbs end
    if entry.l3_bytes and bytes <= entry.l3_bytes then return "L3", entry.l3_gbs end
    return "DRAM", entry.dram_gbs
end

-- percent(value, ceiling, what): the percentage, and a note when it is above 100 (the ceiling is
-- wrong: measured low, under load, or the kernel is judged against the wrong level).
function M.percent(value, ceiling, what)
    if not ceiling or ceiling <= 0 then return nil, "no " .. (what or "ceiling") end
    local pct = 100 * value / ceiling
    if pct > 100 then
        return pct, string.format("above the measured %s (%.0f%%): the ceiling is too low", what or "ceiling", pct)
    end
    return pct
end

-- A % of peak as a table shows it: "92%", "!" after it above 100 (the ceiling is too low), "~"
-- after it when the ceiling was measured under load (it reads high: the footer says so).
function M.pct_cell(pct, under_load)
    if not pct then return "-" end
    return string.format("%.0f%%%s", pct, pct > 100 and "!" or under_load and "~" or "")
end

-- The line under a table with such cells that says what the ceiling was, and when it was measured
-- under load, that it was (the % read high).
function M.ceiling_note(info)
    local s = string.format("%.1f GFLOP/s, %.1f GB/s", info.peak_gflops, info.bandwidth_gbs)
    if info.under_load then
        return s .. ": MEASURED UNDER LOAD (no quiet calibration cached), so every % of peak reads high (marked ~); " ..
            "calibrate on a quiet machine: wb.device_info() caches it"
    end
    return s .. " (" .. tostring(info.calibrated) .. ")"
end

-- ceilings(info) -> the roofs of a roofline chart (wb.report) from wb.device_info(): on the cpu, where
-- it was calibrated, cache-aware (L2 for the working sets that fit every thread's L2, L3, DRAM);
-- elsewhere DRAM's bandwidth only.
function M.ceilings(info)
    if type(info) ~= "table" then
        error("calibrate.ceilings: info must be wb.device_info()'s table, got " .. type(info), 2)
    end
    if info.device == "cuda" or not info.l2_gbs then return {{name = "DRAM", gbs = info.bandwidth_gbs}} end
    return {{name = "L2", gbs = info.l2_gbs, max_bytes = info.l2_bytes and info.l2_bytes * info.threads},
        {name = "L3", gbs = info.l3_gbs, max_bytes = info.l3_bytes}, {name = "DRAM", gbs = info.dram_gbs}}
end

function M.device_info(device)
    if device ~= nil and type(device) ~= "string" then
        error("device_info: device must be a string (\"cpu\", \"cuda\" or \"auto\"), got " .. type(device), 2)
    end
    if device ~= nil and device ~= "cpu" and device ~= "cuda" then return I._device_info_quick(device) end
    if device == "cuda" or (device == nil and wb.default_device() == "cuda") then return I._device_info_quick(device) end
    local threads = wb.get_num_threads()
    local e = M.cpu(threads)
    local theo, mhz = theoretical(threads)
    local desc
    if e.source == "measured" or e.source == "cache" then
        desc = string.format("%s %s: best of %d FMA runs (spread %.1f%%%s) and of cache-sized reads; %s%s", e.source ==
            "cache" and "cached calibration of" or "calibrated", e.date, e.peak_runs or 0, 100 * (e.peak_spread or 0),
            e.peak_stable and "" or ", not stable", e.under_load and "MEASURED UNDER LOAD, not cached" or
            e.load_unknown and "the machine's load unreadable" .. (wb.sandboxed and " under --sandbox" or "") ..
            ", not cached" or
            "quiet machine" .. (refused and e.source == "measured" and "; not cached: " .. refused or ""),
            e.path and (", " .. e.path) or "")
    else
        desc = e.source
    end
    return {
        device = "cpu", name = I._cpu_model(), isa = wb.cpu_isa(), threads = threads,
        peak_gflops = e.peak_gflops, bandwidth_gbs = e.dram_gbs, l2_gbs = e.l2_gbs, l3_gbs = e.l3_gbs,
        dram_gbs = e.dram_gbs, l2_bytes = e.l2_bytes, l3_bytes = e.l3_bytes,
        theoretical_peak_gflops = theo, clock_mhz = mhz, fma_lanes = I._cpu_fma_lanes(), fma_ports = M.FMA_PORTS,
        under_load = e.under_load, calibrated = desc, conditions = e.conditions,
    }
end

return M
