-- wb.changepoints: where a series of runs changed. E-Divisive means (Matteson and James, 2014)
-- over the runs' medians, each candidate kept only if a seeded permutation test backs it, then
-- each change confirmed on the runs' own estimates (their medians with the medians' standard
-- errors) against the series' run-to-run variation, judged as the strongest split of shuffled
-- runs would be (see confirm). A change of machine cuts the series first: it is reported as
-- "machine changed", never as a regression.
--
--   local cp = require("wb.changepoints")
--   local events = cp.detect(points, {seed = 1})  -- points: {{median=, samples=, machine=}, ...}

local stats = require("wb.stats")

local M = {ALPHA = 0.05, PERMUTATIONS = 199, MIN_SIZE = 2}

-- A small seeded generator (xorshift64*), so the permutation test gives the same p everywhere
-- and leaves math.random's state alone.
local function generator(seed)
    local s = (math.tointeger(seed) or 1) ~ 0x2545F4914F6CDD1D
    if s == 0 then s = 1 end
    return function(n) -- a whole number in 1..n
        s = s ~ (s >> 12)
        s = s ~ (s << 25)
        s = s ~ (s >> 27)
        local x = (s * 0x2545F4914F6CDD1D) >> 11 -- 53 bits, non-negative
        return x % n + 1
    end
end

-- The best split of v[1..n]: the index k where a new segment starts (v[k..n]) with the largest
-- E-Divisive statistic Q = m r / (m + r) * (2 mean|x - y| - mean|x - x'| - mean|y - y'|) for the
-- m values before and r values from k on; both sides at least min_size. O(n^2) for all k at once.
local function best_split(v, min_size)
    local n = #v
    if n < 2 * min_size then return nil, 0 end
    local total = 0
    local row = {} -- row[i] = sum over j of |v_i - v_j|
    for i = 1, n do
        local s = 0
        for j = 1, n do s = s + math.abs(v[i] - v[j]) end
        row[i], total = s, total + s
    end
    total = total / 2 -- each pair once
    -- within[m]: sum over pairs inside v[1..m]; within_right[k]: inside v[k..n]
    local within, within_right = {[0] = 0}, {[n + 1] = 0}
    for m = 1, n do
        local s = 0
        for i = 1, m - 1 do s = s + math.abs(v[i] - v[m]) end
        within[m] = within[m - 1] + s
    end
    for k = n, 1, -1 do
        local s = 0
        for j = k + 1, n do s = s + math.abs(v[k] - v[j]) end
        within_right[k] = within_right[k + 1] + s
    end
    local best, best_q = nil, -math.huge
    for k = min_size + 1, n - min_size + 1 do
        local m, r = k - 1, n - k + 1
        local a, b = within[m], within_right[k]
        local cross = total - a - b
        local e = 2 * cross / (m * r) - (m > 1 and a / (m * (m - 1) / 2) or 0) - (r > 1 and b / (r * (r - 1) / 2) or 0)
        local q = m * r / (m + r) * e
        if q > best_q then best, best_q = k, q end
    end
    return best, best_q
end
M.best_split = best_split

-- p of the best split's statistic under permutations of v (the share of shuffles, plus the
-- observed order, whose best split is at least as strong).
local function permutation_p(v, q, rand, o)
    local at_least, copy = 1, {}
    for i = 1, #v do copy[i] = v[i] end
    for _ = 1, o.permutations do
        for i = #copy, 2, -1 do
            local j = rand(i)
            copy[i], copy[j] = copy[j], copy[i]
        end
        local _, qp = best_split(copy, o.min_size)
        if qp >= q - 1e-12 * math.abs(q) then at_least = at_least + 1 end
    end
    return at_least / (o.permutations + 1)
end

-- Candidate change points of v (indices where a segment starts), ascending: hierarchical
-- E-Divisive, each new split tested with permutations; stops at the first one not significant.
function M.candidates(v, o)
    o = o or {}
    o.permutations, o.min_size, o.alpha = o.permutations or M.PERMUTATIONS, o.min_size or M.MIN_SIZE, o.alpha or M.ALPHA
    local rand = generator(o.seed or 1)
    local cuts = {1, #v + 1} -- segment starts, and the end
    local found = {}
    while true do
        local best -- {start, k, q, values}
        for s = 1, #cuts - 1 do
            local seg = table.move(v, cuts[s], cuts[s + 1] - 1, 1, {})
            local k, q = best_split(seg, o.min_size)
            if k and (not best or q > best.q) then best = {k = cuts[s] + k - 1, q = q, values = seg} end
        end
        if not best then break end
        local p = permutation_p(best.values, best.q, rand, o)
        if p > o.alpha then break end
        found[#found + 1] = {index = best.k, p_perm = p}
        table.insert(cuts, best.k)
        table.sort(cuts)
    end
    table.sort(found, function(a, b) return a.index < b.index end)
    return found
end

-- ---- confirming a candidate on the runs' own estimates ----------------------------------------
-- A run is one estimate: the log of its median, with that median's own uncertainty from the run's
-- raw samples (the sign test's 95% interval, as a standard error). The spread of single samples
-- says nothing about how well a run's median is known (a 1-token row takes thousands of samples
-- with IQR / median 30% and knows its median to 1%), so a change is tested against the series'
-- run-to-run variation: Student's t of the two segments' mean log medians, its variance the
-- larger of the runs' scatter about their segment means and the runs' own squared standard
-- errors (a series whose runs agree by chance still knows each run only so well). E-Divisive
-- chose the split as the strongest of several, so its p is multiplied by the number of splits
-- the segment allows (Bonferroni): a series with no change passes with probability at most
-- ALPHA_RUNS, whatever its length.

M.ALPHA_RUNS = 0.002 -- the confirmation's level
M.MIN_EFFECT = 0.02  -- smaller changes are not reported, however certain

-- The standard error of log(median) of one run from its raw samples, or nil (fewer than 6).
local function log_se(p)
    if type(p.samples) ~= "table" or #p.samples < 6 then return nil end
    local m, lo, hi, coverage = stats.median_ci(p.samples)
    if not (m and lo and lo > 0 and hi > 0) then return nil end
    return (math.log(hi) - math.log(lo)) / (2 * 1.96) * (0.95 / coverage)
end

-- One split of v (log medians; se: their standard errors, nil where unknown): runs v[1..k-1]
-- against v[k..n] -> {p, t, ratio, before, after, agree}: the p of the split's t, corrected for
-- the splits of v there are; the ratio of the segments' geometric means; the medians of their
-- runs' medians (before, after: what is shown); agree: the share of runs after the split that lie
-- past the midpoint between the two means (the change confirmed by the runs after it).
local function test_split(v, se, k, min_size)
    local n, m, r = #v, k - 1, #v - k + 1
    local m1, m2 = 0, 0
    for i = 1, m do m1 = m1 + v[i] / m end
    for i = k, n do m2 = m2 + v[i] / r end
    local ss, floor, nse = 0, 0, 0
    for i = 1, n do
        local d = v[i] - (i < k and m1 or m2)
        ss = ss + d * d
        if se[i] then floor, nse = floor + se[i] * se[i], nse + 1 end
    end
    local df = math.max(n - 2, 1)
    local var = math.max(ss / df, nse > 0 and floor / nse or 0)
    local d = m2 - m1
    local t = var > 0 and math.abs(d) / math.sqrt(var * (1 / m + 1 / r)) or (d == 0 and 0 or math.huge)
    local splits = math.max(n - 2 * min_size + 1, 1)
    local mid, far = (m1 + m2) / 2, 0
    for i = k, n do if (v[i] - mid) * d > 0 then far = far + 1 end end
    local before, after = {}, {}
    for i = 1, m do before[i] = math.exp(v[i]) end
    for i = k, n do after[#after + 1] = math.exp(v[i]) end
    return {p = math.min(1, 2 * stats.student_sf(t, df) * splits), t = t, ratio = math.exp(d),
        before = stats.summarize(before).median, after = stats.summarize(after).median, agree = far / r}
end

-- Confirms the candidates of one machine's block on the runs' estimates: a candidate is kept when
-- the test above gives p < ALPHA_RUNS between its neighbouring candidates, the change is at least
-- min_effect, and at least two thirds of the runs after it (two at least, the minimum segment)
-- lie past the midpoint; the weakest failing one is dropped first (its neighbours' sides then
-- grow) until every one left holds. Returns the confirmed changes.
local function confirm(points, cands, o)
    local list = {}
    for i, c in ipairs(cands) do list[i] = c end
    local v, se = {}, {}
    for i, p in ipairs(points) do v[i], se[i] = math.log(math.max(p.median, 1e-300)), log_se(p) end
    while true do
        local weakest, changes = nil, {}
        for i, c in ipairs(list) do
            local from = i > 1 and list[i - 1].index or 1
            local to = i < #list and list[i + 1].index - 1 or #points
            local seg, sse = table.move(v, from, to, 1, {}), {}
            for j = from, to do sse[j - from + 1] = se[j] end
            local r = test_split(seg, sse, c.index - from + 1, o.min_size)
            local holds = r.p < o.alpha_runs and math.abs(math.log(r.ratio)) >= math.log(1 + o.min_effect) and
                r.agree >= 2 / 3
            changes[i] = {index = c.index, verdict = holds and (r.ratio > 1 and "SLOWER" or "FASTER") or "UNSURE",
                ratio = r.ratio, p = r.p, t = r.t, p_perm = c.p_perm, before = r.before, after = r.after,
                runs_before = c.index - from, runs_after = to - c.index + 1}
            if not holds then
                local strength = r.t
                if not weakest or strength < weakest.strength then weakest = {i = i, strength = strength} end
            end
        end
        if not weakest then return changes end
        table.remove(list, weakest.i)
    end
end

-- detect(points[, o]) -> events in run order: {kind = "machine", index, from, to} where the
-- machine changes, and {kind = "change", index, verdict = "SLOWER"|"FASTER", ratio (after /
-- before, of the segments' geometric means), p (the confirmation's, see test_split), t, p_perm
-- (E-Divisive's), before, after (medians of the runs' medians)} for each confirmed change inside
-- a machine's runs. points: {median=, samples= (raw, optional), machine=} in date order. o: seed,
-- permutations, alpha, min_size (E-Divisive's), alpha_runs, min_effect (the confirmation's,
-- defaults M.ALPHA_RUNS and M.MIN_EFFECT).
function M.detect(points, o)
    o = o or {}
    o = {seed = o.seed, permutations = o.permutations, alpha = o.alpha, min_size = o.min_size or M.MIN_SIZE,
        alpha_runs = o.alpha_runs or M.ALPHA_RUNS, min_effect = o.min_effect or M.MIN_EFFECT}
    local events, start = {}, 1
    for i = 2, #points + 1 do
        if i > #points or points[i].machine ~= points[start].machine then
            local block = table.move(points, start, i - 1, 1, {})
            local medians = {}
            for j, p in ipairs(block) do medians[j] = math.log(math.max(p.median, 1e-300)) end
            local copt = {seed = o.seed, permutations = o.permutations, alpha = o.alpha, min_size = o.min_size}
            for _, ch in ipairs(confirm(block, M.candidates(medians, copt), o)) do
                ch.kind = "change"
                ch.index = ch.index + start - 1
                events[#events + 1] = ch
            end
            if i <= #points then
                events[#events + 1] = {kind = "machine", index = i, from = points[start].machine, to = points[i].machine}
            end
            start = i
        end
    end
    table.sort(events, function(a, b) return a.index < b.index end)
    return events
end

-- The newest segment of a series against the one before, when a confirmed change (not a machine
-- change) starts it: the event, else nil.
function M.newest_change(events, npoints)
    local last
    for _, e in ipairs(events) do last = e end
    if last and last.kind == "change" and last.index <= npoints then return last end
    return nil
end

return M
