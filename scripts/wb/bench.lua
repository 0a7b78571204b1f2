-- wb.bench(fn, opts): times a function the way PERF.md asks: warm up, repeat until both a
-- number of iterations and a minimum time are reached, optionally flush the caches between
-- runs (outside the timed region), and report the median with p10/p90, not the mean.
--
--   local r = wb.bench(function() wb.linear(x, w) end, {warmup = 3, iters = 20, min_time_ms = 200})
--   print(r.median_us, r.p10_us, r.p90_us)
--
-- opts: warmup (3), iters (10, at least), min_time_ms (100), max_iters (100000),
--       flush_cache (false: when true, a 64 MiB buffer is rewritten before every run),
--       device (nil: with "cuda", every run ends with wb.synchronize("cuda") inside the timed
--       region, so a sample is the device's time for the work, not the launch time).
-- Returns {median_us, p10_us, p90_us, mean_us, min_us, max_us, iters, samples_us}.

local allowed = {warmup = true, iters = true, min_time_ms = true, max_iters = true, flush_cache = true, device = true}

local flush_buffer

local function percentile(sorted, p)
    local pos = 1 + (#sorted - 1) * p
    local lo = math.floor(pos)
    local hi = math.min(lo + 1, #sorted)
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
end

local function bench(fn, opts)
    if type(fn) ~= "function" then error("bench: expected a function, got " .. type(fn), 2) end
    opts = opts or {}
    if type(opts) ~= "table" then error("bench: options must be a table, got " .. type(opts), 2) end
    for k in pairs(opts) do
        if not allowed[k] then error("bench: unknown option '" .. tostring(k) .. "'", 2) end
    end
    local warmup = opts.warmup or 3
    local iters = opts.iters or 10
    local min_ns = (opts.min_time_ms or 100) * 1e6
    local max_iters = opts.max_iters or 100000
    if warmup < 0 or iters < 1 or min_ns < 0 or max_iters < iters then
        error("bench: need warmup >= 0, iters >= 1, min_time_ms >= 0 and max_iters >= iters", 2)
    end
    local flush = opts.flush_cache
    if flush and not flush_buffer then flush_buffer = wb.empty({16 * 1024 * 1024}) end
    local sync = opts.device == "cuda"
    if opts.device ~= nil and opts.device ~= "cuda" and opts.device ~= "cpu" then
        error("bench: device must be \"cpu\" or \"cuda\", got " .. tostring(opts.device), 2)
    end

    for _ = 1, warmup do fn() end
    if sync then wb.synchronize("cuda") end
    local samples, total = {}, 0
    while (#samples < iters or total < min_ns) and #samples < max_iters do
        if flush then flush_buffer:fill_(#samples) end
        local t0 = wb.time_ns()
        fn()
        if sync then wb.synchronize("cuda") end
        local dt = wb.time_ns() - t0
        samples[#samples + 1] = dt / 1000
        total = total + dt
    end
    local sorted = {}
    local sum = 0
    for i, v in ipairs(samples) do sorted[i] = v; sum = sum + v end
    table.sort(sorted)
    return {
        median_us = percentile(sorted, 0.5), p10_us = percentile(sorted, 0.1), p90_us = percentile(sorted, 0.9),
        mean_us = sum / #sorted, min_us = sorted[1], max_us = sorted[#sorted], iters = #sorted, samples_us = samples,
    }
end

return bench
