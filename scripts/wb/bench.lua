-- wb.bench(fn, opts): times a function until the measurement converges, as nvbench does:
-- warm up, then sample until at least `iters` samples and `min_time_ms` of sampled time, and from
-- there until the relative noise (IQR / median) is under `target_noise`, or it has stopped
-- improving (plateau), or `max_time_ms` of wall time has passed (wb.stats.stopping_rule).
-- Optionally flush the caches between runs (outside the timed region). Reports the median and
-- percentiles, not the mean, and says whether it converged and why it stopped.
--
--   local r = wb.bench(function() wb.linear(x, w) end, {target_noise = 0.02})
--   print(r.median_us, r.p10_us, r.p90_us, r.noise, r.converged, r.stop_reason)
--
-- Several contenders at once, interleaved (A B C A B C ...; a contender leaves the rotation when
-- its own rule stops), so that a machine whose speed drifts treats them alike:
--
--   local rs = wb.bench({eager = f1, dual = f2}, {max_time_ms = 3000})   -- rs.eager, rs.dual
--
-- opts: warmup (3), iters (10: the minimum number of samples), min_time_ms (100),
--       max_time_ms (2000: wall time; with several contenders, for all of them together),
--       max_iters (100000), target_noise (0.05), plateau_checks (6: checks without a gain of 5%
--       that count as a plateau; 0 turns plateau detection off), flush_cache (false: when true,
--       a 64 MiB buffer is rewritten before every run), device (nil: with "cuda", every run ends
--       with wb.synchronize("cuda") inside the timed region, so a sample is the device's time
--       for the work, not the launch time), min_sample_us (0: one call a sample; above, a
--       sample is the mean of a batch of calls that lasts at least this long, the batch sized
--       after the warm-up: a call much shorter than the variation between calls, as
--       a memory-bound forward of a few hundred microseconds, reads its noise in each sample;
--       a batch averages it, as Google Benchmark's iterations and timeit's loops do).
-- Returns {median_us, p10_us, p25_us, p75_us, p90_us, mean_us, min_us, max_us, iters (samples),
--          samples_us (in the order taken; per call), batch (calls per sample), noise, converged,
--          stop_reason, target_noise, wall_ms}.

local stats = require("wb.stats")

local NUMERIC = {
    -- name = {lowest, highest, integer?}
    warmup = {0, 1e6, true}, iters = {1, 1e7, true}, min_time_ms = {0, 3.6e6}, max_time_ms = {0, 3.6e6},
    max_iters = {1, 1e8, true}, target_noise = {0, 10}, plateau_checks = {0, 1000, true},
    min_sample_us = {0, 6e7},
}
local MAX_BATCH = 1000000
local OTHER = {flush_cache = "boolean", device = "string"}

local flush_buffer

local function check_options(opts)
    if opts == nil then return {} end
    if type(opts) ~= "table" then error("bench: options must be a table, got " .. type(opts), 3) end
    for k, v in pairs(opts) do
        local range = NUMERIC[k]
        if range then
            if type(v) ~= "number" or v ~= v then
                error(string.format("bench: option '%s' must be a number, got %s", k, type(v) == "number" and "nan" or type(v)), 3)
            end
            if range[3] and math.type(v) ~= "integer" and v ~= math.floor(v) then
                error(string.format("bench: option '%s' must be a whole number, got %s", k, tostring(v)), 3)
            end
            if v < range[1] or v > range[2] then
                error(string.format("bench: option '%s' must be from %s to %s, got %s", k, tostring(range[1]),
                    tostring(range[2]), tostring(v)), 3)
            end
        elseif OTHER[k] then
            if type(v) ~= OTHER[k] then
                error(string.format("bench: option '%s' must be a %s, got %s", k, OTHER[k], type(v)), 3)
            end
        else
            error("bench: unknown option '" .. tostring(k) .. "' (expected warmup, iters, min_time_ms, max_time_ms, " ..
                "max_iters, target_noise, plateau_checks, flush_cache, device, min_sample_us)", 3)
        end
    end
    if opts.max_iters and opts.max_iters < (opts.iters or 10) then
        error(string.format("bench: max_iters (%d) is below iters (%d)", opts.max_iters, opts.iters or 10), 3)
    end
    if opts.max_time_ms and opts.max_time_ms < (opts.min_time_ms or 100) then
        error(string.format("bench: max_time_ms (%s) is below min_time_ms (%s)", tostring(opts.max_time_ms),
            tostring(opts.min_time_ms or 100)), 3)
    end
    if opts.flush_cache and (opts.min_sample_us or 0) > 0 then
        error("bench: flush_cache and min_sample_us do not go together (a flushed sample is one cold call; a batch's " ..
            "later calls would find the caches warm)", 3)
    end
    if opts.device ~= nil and opts.device ~= "cuda" and opts.device ~= "cpu" then
        error("bench: device must be \"cpu\" or \"cuda\", got " .. tostring(opts.device), 3)
    end
    return opts
end

local function rule_of(opts)
    return stats.stopping_rule{min_samples = opts.iters, min_time_ms = opts.min_time_ms,
        max_time_ms = opts.max_time_ms, max_samples = opts.max_iters, target_noise = opts.target_noise,
        plateau_checks = opts.plateau_checks}
end

local function result_of(rule, t_start, batch)
    local s = stats.summarize(rule.samples)
    return {
        median_us = s.median, p10_us = s.p10, p25_us = s.p25, p75_us = s.p75, p90_us = s.p90, mean_us = s.mean,
        min_us = s.min, max_us = s.max, iters = s.n, samples_us = rule.samples, batch = batch, noise = s.noise,
        converged = rule.converged, stop_reason = rule.reason, target_noise = rule.target_noise,
        wall_ms = (wb.time_ns() - t_start) / 1e6,
    }
end

-- The calls a sample takes to last min_us: batches timed as they grow (each scaled by what the last
-- took, as Google Benchmark sizes its iterations) until one lasts that long, then enough calls at
-- the fastest per-call time seen: a slow call while sizing (a page fault, the other thread
-- descheduled) would otherwise leave every sample of the round short.
local function batch_size(fn, sync, min_us)
    local n, fastest = 1, math.huge
    while true do
        local t0 = wb.time_ns()
        for _ = 1, n do fn() end
        if sync then wb.synchronize("cuda") end
        local us = (wb.time_ns() - t0) / 1000
        fastest = math.min(fastest, math.max(us, 1e-3) / n)
        if us >= min_us or n >= MAX_BATCH then break end
        n = math.min(MAX_BATCH, math.max(n + 1, math.ceil(min_us / fastest)))
    end
    return math.min(MAX_BATCH, math.max(n, math.ceil(min_us / fastest)))
end

-- contenders: array of {name, fn}; returns results by name, timed in rotation.
local function run(contenders, opts)
    local flush = opts.flush_cache
    if flush and not flush_buffer then flush_buffer = wb.empty({16 * 1024 * 1024}) end
    local sync = opts.device == "cuda"
    local min_sample_us = opts.min_sample_us or 0
    for _, c in ipairs(contenders) do
        for _ = 1, opts.warmup or 3 do c.fn() end
        c.batch = min_sample_us > 0 and batch_size(c.fn, sync, min_sample_us) or 1
        c.rule = rule_of(opts)
    end
    if sync then wb.synchronize("cuda") end
    local t_start = wb.time_ns()
    local active = #contenders
    local count = 0
    while active > 0 do
        for _, c in ipairs(contenders) do
            if not c.rule.reason then
                if flush then
                    count = count + 1
                    flush_buffer:fill_(count)
                end
                local t0 = wb.time_ns()
                for _ = 1, c.batch do c.fn() end
                if sync then wb.synchronize("cuda") end
                local t1 = wb.time_ns()
                if c.rule:add((t1 - t0) / 1000 / c.batch, t1 - t_start, (t1 - t0) / 1000) then active = active - 1 end
            end
        end
    end
    local out = {}
    for _, c in ipairs(contenders) do out[c.name] = result_of(c.rule, t_start, c.batch) end
    return out
end

local function bench(fn, opts)
    opts = check_options(opts)
    if type(fn) == "function" then return run({{name = 1, fn = fn}}, opts)[1] end
    if type(fn) ~= "table" then error("bench: expected a function or a table of functions, got " .. type(fn), 2) end
    local contenders = {}
    for k, f in pairs(fn) do
        if type(f) ~= "function" then
            error(string.format("bench: contender '%s' is a %s, expected a function", tostring(k), type(f)), 2)
        end
        contenders[#contenders + 1] = {name = k, fn = f}
    end
    if #contenders == 0 then error("bench: the table of contenders is empty", 2) end
    table.sort(contenders, function(a, b)
        if type(a.name) == type(b.name) then return a.name < b.name end
        return type(a.name) == "number"
    end)
    return run(contenders, opts)
end

return bench
