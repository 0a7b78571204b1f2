-- wb.stats: the statistics every measurement shares: percentiles and relative noise of a set of
-- samples, the stopping rule wb.bench converges with, and the rank test workbench compare
-- decides with. Pure Lua, no clock and no workbench state, so tests can feed it fixed numbers.
--
--   local s = require("wb.stats").summarize({1.02, 0.98, 1.0, 1.3})
--   -- {n = 4, median = 1.01, p10 =, p25 =, p75 =, p90 =, iqr =, noise = iqr / median}

local M = {}

-- Percentile p (0..1) of an ascending array, interpolating linearly between ranks.
function M.percentile(sorted, p)
    if type(sorted) ~= "table" then error("stats.percentile: expected an ascending array of numbers, got " .. type(sorted), 2) end
    if type(p) ~= "number" then error("stats.percentile: p must be a number in 0..1, got " .. type(p), 2) end
    local n = #sorted
    if n == 0 then return nil end
    local pos = 1 + (n - 1) * p
    local lo = math.floor(pos)
    local hi = math.min(lo + 1, n)
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
end

local function sorted_copy(samples)
    local s = {}
    for i, v in ipairs(samples) do
        if type(v) ~= "number" or v ~= v then
            error(string.format("stats: sample %d is %s, expected a number", i, tostring(v)), 3)
        end
        s[i] = v
    end
    table.sort(s)
    return s
end

-- the median of an ascending array of n >= 1 numbers (percentile 0.5's interpolation)
local function sorted_median(s)
    local n, h = #s, #s // 2
    return n % 2 == 1 and s[h + 1] or s[h] + (s[h + 1] - s[h]) * 0.5
end

-- median(samples) -> the median (as summarize's, interpolated between the middle two), or nil for
-- none: the one figure the per-step analyses of diff take, for many small arrays (100,000 steps),
-- without the other percentiles.
function M.median(samples)
    if type(samples) ~= "table" then error("stats.median: expected an array of numbers, got " .. type(samples), 2) end
    local n = #samples
    if n == 1 then
        local v = samples[1]
        if type(v) ~= "number" or v ~= v then error(string.format("stats: sample 1 is %s, expected a number", tostring(v)), 2) end
        return v
    end
    if n == 0 then return nil end
    return sorted_median(sorted_copy(samples))
end

-- summarize(samples) -> {n, median, p10, p25, p75, p90, iqr, noise, min, max, mean}; noise is
-- the interquartile range over the median (0 when the median is 0). Needs at least one sample.
function M.summarize(samples)
    if type(samples) ~= "table" then error("stats.summarize: expected an array of numbers, got " .. type(samples), 2) end
    local s = sorted_copy(samples)
    local n = #s
    if n == 0 then error("stats.summarize: no samples", 2) end
    local sum = 0
    for _, v in ipairs(s) do sum = sum + v end
    local r = {n = n, median = M.percentile(s, 0.5), p10 = M.percentile(s, 0.1), p25 = M.percentile(s, 0.25),
        p75 = M.percentile(s, 0.75), p90 = M.percentile(s, 0.9), min = s[1], max = s[n], mean = sum / n}
    r.iqr = r.p75 - r.p25
    r.noise = r.median ~= 0 and r.iqr / math.abs(r.median) or 0
    return r
end

-- ---- rounds ------------------------------------------------------------------------------------
-- A measurement taken in rounds (the contenders alternated, round after round) keeps all its
-- samples in one array and how many each round took ("counts": samples_ms_per_round). Rounds can
-- take very different numbers of samples (a slow first round 72, the others 10): statistics that
-- pool them follow the round with the most samples, so these weigh every round alike.

-- split_rounds(samples, counts) -> an array of the rounds' samples, or nil when counts (whole
-- numbers >= 1) do not divide samples exactly. counts nil: all samples are one round.
function M.split_rounds(samples, counts)
    if type(samples) ~= "table" or #samples == 0 then return nil end
    if counts == nil then return {samples} end
    if type(counts) ~= "table" or #counts == 0 then return nil end
    local out, at = {}, 0
    for r, n in ipairs(counts) do
        if math.type(n) == nil or n < 1 or n ~= math.floor(n) or at + n > #samples then return nil end
        out[r] = table.move(samples, at + 1, at + n, 1, {})
        at = at + n
    end
    return at == #samples and out or nil
end

-- by_rounds(rounds) -> {median =, rounds =, equal = {...}, noise =}: median, the median of the
-- rounds' medians (each round one vote); equal, the samples with every round weighing alike: from
-- each round the same number k of its own samples (k = the fewest any round took), evenly spaced
-- through its sorted samples, so a rank test or a spread sees each round as much as the others;
-- noise, IQR / median of those.
function M.by_rounds(rounds)
    if type(rounds) ~= "table" or #rounds == 0 then error("stats.by_rounds: expected a non-empty array of " ..
        "rounds", 2) end
    local medians, sorted, k = {}, {}, math.huge
    for i, r in ipairs(rounds) do
        if type(r) ~= "table" or #r == 0 then error(string.format("stats.by_rounds: round %d has no samples", i), 2) end
        local s = sorted_copy(r) -- once per round: diff's rounds are 100,000 steps
        sorted[i], medians[i] = s, sorted_median(s)
        k = math.min(k, #s)
    end
    local equal = {}
    for _, s in ipairs(sorted) do
        for j = 1, k do equal[#equal + 1] = s[math.floor((j - 0.5) * #s / k) + 1] end
    end
    return {median = M.summarize(medians).median, rounds = #rounds, equal = equal, noise = M.summarize(equal).noise}
end

-- ---- the stopping rule ------------------------------------------------------------------------
-- In the spirit of nvbench's stdrel criterion: take at least min_samples samples and at least
-- min_time_ms of sampled time; from then on, stop as soon as the relative noise (IQR / median of
-- every sample so far) is at most target_noise ("noise under target", converged), or when the
-- noise has stopped improving over the last plateau_checks checks ("plateau": more samples would
-- not make it trustworthy; not converged when still above target), or at max_time_ms of wall time
-- ("time limit") or max_samples ("sample limit"). Checks come at geometrically spaced counts
-- (every ~10% more samples), so the rule costs O(n log n) per check and little in total.

M.RULE_DEFAULTS = {min_samples = 10, min_time_ms = 100, max_time_ms = 2000, max_samples = 100000,
    target_noise = 0.05, plateau_checks = 6, plateau_gain = 0.05}

local Rule = {}
Rule.__index = Rule

-- stopping_rule(opts) -> rule; rule:add(sample, wall_ns[, spent_us]) -> nil (go on) or the stop
-- reason. sample is one timing in microseconds; spent_us what it took (default: sample; a batch's
-- mean per call took the whole batch), whose sum is the "sampled time"; wall_ns is the wall time
-- since sampling began (callers pass the clock; tests pass made-up numbers).
function M.stopping_rule(o)
    o = o or {}
    local self = setmetatable({samples = {}, sampled_ns = 0, checks = {}, next_check = 0}, Rule)
    for k, v in pairs(M.RULE_DEFAULTS) do self[k] = o[k] == nil and v or o[k] end
    return self
end

function Rule:noise()
    if #self.samples == 0 then return math.huge end
    return M.summarize(self.samples).noise
end

function Rule:add(sample, wall_ns, spent_us)
    local n = #self.samples + 1
    self.samples[n] = sample
    self.sampled_ns = self.sampled_ns + (spent_us or sample) * 1000
    if n >= self.max_samples then return self:finish("sample limit") end
    if wall_ns >= self.max_time_ms * 1e6 then return self:finish("time limit") end
    if n < self.min_samples or self.sampled_ns < self.min_time_ms * 1e6 or n < self.next_check then return nil end
    self.next_check = math.max(n + 1, math.floor(n * 1.1))
    local noise = self:noise()
    local checks = self.checks
    checks[#checks + 1] = {n = n, noise = noise}
    if noise <= self.target_noise then return self:finish("noise under target", noise) end
    -- A plateau: the last half of the samples (and at least plateau_checks checks) did not lower
    -- the noise by plateau_gain (relative). Measured in samples, so it means the same at 20
    -- samples as at 20000.
    local k = self.plateau_checks
    if k > 0 then
        local j = #checks - k -- the latest check at half the samples or fewer, k checks ago at least
        while j >= 1 and checks[j].n * 2 > n do j = j - 1 end
        if j >= 1 and noise > checks[j].noise * (1 - self.plateau_gain) then return self:finish("plateau", noise) end
    end
    return nil
end

function Rule:finish(reason, noise)
    self.reason = reason
    self.final_noise = noise or self:noise()
    self.converged = self.final_noise <= self.target_noise
    return reason
end

-- ---- comparing two sets of samples ------------------------------------------------------------

-- Standard normal upper tail, P(Z > z), from the complementary error function (the Chebyshev
-- fit known as erfcc in Numerical Recipes: fractional error under 1.2e-7 everywhere).
local function normal_sf(z)
    local x = z / math.sqrt(2)
    local ax = math.abs(x)
    local t = 1 / (1 + 0.5 * ax)
    local r = t * math.exp(-ax * ax - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 +
        t * 0.17087277)))))))))
    local erfc = x >= 0 and r or 2 - r
    return erfc / 2
end
M.normal_sf = normal_sf

-- log Gamma(x) for x > 0 (Lanczos, g = 7, 9 terms: relative error under 1e-13).
local LANCZOS = {0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
    -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7}
local function log_gamma(x)
    if x < 0.5 then return math.log(math.pi / math.abs(math.sin(math.pi * x))) - log_gamma(1 - x) end
    x = x - 1
    local a = LANCZOS[1]
    for i = 1, 8 do a = a + LANCZOS[i + 1] / (x + i) end
    local t = x + 7.5
    return 0.5 * math.log(2 * math.pi) + (x + 0.5) * math.log(t) - t + math.log(a)
end
M.log_gamma = log_gamma

-- The regularized incomplete beta function I_x(a, b), by its continued fraction (modified Lentz).
local function beta_cf(a, b, x)
    local tiny = 1e-300
    local c, d = 1, 1 - (a + b) * x / (a + 1)
    if math.abs(d) < tiny then d = tiny end
    d = 1 / d
    local h = d
    for m = 1, 300 do
        local m2 = 2 * m
        local aa = m * (b - m) * x / ((a - 1 + m2) * (a + m2))
        d = 1 + aa * d; if math.abs(d) < tiny then d = tiny end
        c = 1 + aa / c; if math.abs(c) < tiny then c = tiny end
        d = 1 / d
        h = h * d * c
        aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1 + m2))
        d = 1 + aa * d; if math.abs(d) < tiny then d = tiny end
        c = 1 + aa / c; if math.abs(c) < tiny then c = tiny end
        d = 1 / d
        local del = d * c
        h = h * del
        if math.abs(del - 1) < 1e-15 then break end
    end
    return h
end
local function beta_inc(a, b, x)
    if x <= 0 then return 0 elseif x >= 1 then return 1 end
    local bt = math.exp(log_gamma(a + b) - log_gamma(a) - log_gamma(b) + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2) then return bt * beta_cf(a, b, x) / a end
    return 1 - bt * beta_cf(b, a, 1 - x) / b
end
M.beta_inc = beta_inc

-- student_sf(t, df) -> P(T > t) for Student's t with df degrees of freedom (df > 0).
function M.student_sf(t, df)
    if type(t) ~= "number" or type(df) ~= "number" or not (df > 0) then
        error("stats.student_sf: expected a number t and degrees of freedom > 0", 2)
    end
    if t ~= t then return 0 / 0 end
    if t == math.huge then return 0 elseif t == -math.huge then return 1 end
    local tail = 0.5 * beta_inc(df / 2, 0.5, df / (df + t * t))
    return t >= 0 and tail or 1 - tail
end

-- The exact distribution of U for sizes m and n without ties: P(U <= u) for u = 0..m n, by the
-- recursion count(m, n, u) = count(m - 1, n, u - n) + count(m, n - 1, u); cached per (m, n).
local exact_cdf_cache = {}
local function exact_cdf(m, n)
    local key = m .. "x" .. n
    if exact_cdf_cache[key] then return exact_cdf_cache[key] end
    local prev = {} -- prev[j] = counts for (i - 1, j), indexed from u = 0
    for j = 0, n do prev[j] = {[0] = 1} end
    for i = 1, m do
        local cur = {[0] = {[0] = 1}}
        for j = 1, n do
            local c, a, b = {}, prev[j], cur[j - 1]
            for u = 0, i * j do c[u] = (a[u - j] or 0) + (b[u] or 0) end
            cur[j] = c
        end
        prev = cur
    end
    local counts, total, cdf, acc = prev[n], 0, {}, 0
    for u = 0, m * n do total = total + counts[u] end
    for u = 0, m * n do acc = acc + counts[u]; cdf[u] = acc / total end
    exact_cdf_cache[key] = cdf
    return cdf
end
M.EXACT_MAX_PRODUCT = 400 -- exact p up to 20 x 20 samples (without ties)

-- mann_whitney(a, b) -> {u_a, u_b, z, p, exact}: the two-sided Mann-Whitney U test: exact (the
-- permutation distribution of U) for small samples without ties (na nb <= EXACT_MAX_PRODUCT),
-- where the normal approximation misstates p (5 against 5 fully apart: exact 0.0079, normal
-- 0.012), else the normal approximation with tie and continuity corrections. Symmetric: swapping a
-- and b swaps u_a and u_b and keeps p. With fewer than 3 samples on a side p is 1 (no evidence).
function M.mann_whitney(a, b)
    if type(a) ~= "table" or type(b) ~= "table" then
        error(string.format("stats.mann_whitney: expected two arrays of numbers, got %s and %s", type(a), type(b)), 2)
    end
    local na, nb = #a, #b
    if na < 3 or nb < 3 then return {u_a = 0, u_b = 0, z = 0, p = 1} end
    -- ranks from the two sides sorted apart and merged (no table per sample: diff ranks 100,000
    -- steps a side); a group of equal values takes the mean of its ranks
    local sa, sb = sorted_copy(a), sorted_copy(b)
    local n = na + nb
    local rank_a, ties, pos, ia, ib = 0, 0, 0, 1, 1
    while ia <= na or ib <= nb do
        local v = (ib > nb or (ia <= na and sa[ia] <= sb[ib])) and sa[ia] or sb[ib]
        local ca, cb = 0, 0
        while ia <= na and sa[ia] == v do ca, ia = ca + 1, ia + 1 end
        while ib <= nb and sb[ib] == v do cb, ib = cb + 1, ib + 1 end
        local t = ca + cb
        rank_a = rank_a + ca * (pos + (t + 1) / 2)
        if t > 1 then ties = ties + (t * t * t - t) end
        pos = pos + t
    end
    local u_a = rank_a - na * (na + 1) / 2
    local u_b = na * nb - u_a
    local mu = na * nb / 2
    local var = na * nb / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0 then return {u_a = u_a, u_b = u_b, z = 0, p = 1} end
    local diff = math.abs(u_a - mu)
    local z = math.max(0, diff - 0.5) / math.sqrt(var)
    local p = math.min(1, 2 * normal_sf(z))
    local exact = ties == 0 and na * nb <= M.EXACT_MAX_PRODUCT
    if exact then
        local cdf, u = exact_cdf(na, nb), math.floor(u_a + 0.5)
        p = math.min(1, 2 * math.min(cdf[u], 1 - (u > 0 and cdf[u - 1] or 0)))
    end
    return {u_a = u_a, u_b = u_b, z = u_a >= mu and z or -z, p = p, exact = exact}
end

-- ---- a confidence interval for the median -----------------------------------------------------

-- median_ci(samples[, confidence]) -> median, lo, hi, coverage: a distribution-free confidence
-- interval for the median (the sign test's): the order statistics [x(j), x(n+1-j)] with the
-- largest j whose coverage, 1 - 2 P(Binomial(n, 1/2) < j), is at least `confidence` (default
-- 0.95). It narrows as samples are added, unlike the range. With too few samples for the
-- confidence asked (fewer than 6 at 0.95) it is the whole range, and `coverage` says what that
-- holds (0.9375 for 5). Needs at least one sample.
function M.median_ci(samples, confidence)
    if type(samples) ~= "table" then error("stats.median_ci: expected an array of numbers, got " .. type(samples), 2) end
    confidence = confidence == nil and 0.95 or confidence
    if type(confidence) ~= "number" or not (confidence > 0 and confidence < 1) then
        error("stats.median_ci: confidence must be a number in (0, 1), got " .. tostring(confidence), 2)
    end
    local s = sorted_copy(samples)
    local n = #s
    if n == 0 then error("stats.median_ci: no samples", 2) end
    -- P(B = k) for B ~ Binomial(n, 1/2) in logs (n can pass 1000, where 2^-n underflows); cdf is
    -- P(B <= j - 1), what the interval [x(j), x(n+1-j)] misses on each side
    local log_pk = -n * math.log(2)
    local cdf, j = math.exp(log_pk), 1
    while j + 1 <= (n + 1) / 2 do
        local log_next = log_pk + math.log((n - j + 1) / j) -- P(B = j) from P(B = j - 1)
        local cdf_next = cdf + math.exp(log_next)
        if 1 - 2 * cdf_next < confidence then break end
        j, log_pk, cdf = j + 1, log_next, cdf_next
    end
    return M.percentile(s, 0.5), s[j], s[n + 1 - j], 1 - 2 * cdf
end

-- against_bar(decimals, bar, value, lo, hi) -> the three as strings with `decimals` places, or
-- more (up to 4) where fewer would print a number on the other side of the bar than it is: 0.996
-- against a bar of 1.00 prints "0.996", not "1.00", so that a printed ratio and interval agree
-- with a verdict taken on the numbers (value >= bar: meets; lo < bar <= hi: not settled). bar nil:
-- `decimals` places.
function M.against_bar(decimals, bar, value, lo, hi)
    if math.type(decimals) ~= "integer" or decimals < 0 then
        error("stats.against_bar: decimals must be a non-negative integer, got " .. tostring(decimals), 2)
    end
    if bar ~= nil and type(bar) ~= "number" then error("stats.against_bar: bar must be a number or nil", 2) end
    local values = {value, lo, hi}
    for i = 1, 3 do
        if type(values[i]) ~= "number" then
            error(string.format("stats.against_bar: %s must be a number, got %s", ({"value", "lo", "hi"})[i],
                tostring(values[i])), 2)
        end
    end
    local function agrees(d)
        if bar == nil then return true end
        for i = 1, 3 do
            local x = values[i]
            local finite = x == x and x ~= math.huge and x ~= -math.huge -- inf and nan print as they are
            if finite and (tonumber(string.format("%." .. d .. "f", x)) >= bar) ~= (x >= bar) then return false end
        end
        return true
    end
    local d = decimals
    while d < math.max(decimals, 4) and not agrees(d) do d = d + 1 end
    local f = "%." .. d .. "f"
    return f:format(value), f:format(lo), f:format(hi)
end

return M
