-- wb.changepoints: where a series of runs changed. E-Divisive means (Matteson and James, 2014)
-- over the runs' medians, each candidate kept only if a seeded permutation test backs it, then
-- each change confirmed on the raw samples of the runs on both sides with compare's rule (rank
-- test plus a minimum effect above the noise, wb.compare.verdict). A change of machine cuts the
-- series first: it is reported as "machine changed", never as a regression.
--
--   local cp = require("wb.changepoints")
--   local events = cp.detect(points, {seed = 1})  -- points: {{median=, samples=, machine=}, ...}

local compare = require("wb.compare")
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

-- The samples (and medians) of points[from..to], pooled: what compare.verdict reads. Without raw
-- samples in every run, the runs' medians and their range stand in (compare's spread rule).
local function pooled(points, from, to)
    local all, medians, complete = {}, {}, true
    for i = from, to do
        local p = points[i]
        medians[#medians + 1] = p.median
        if type(p.samples) == "table" and #p.samples > 0 then
            table.move(p.samples, 1, #p.samples, #all + 1, all)
        else
            complete = false
        end
    end
    local m = stats.summarize(medians)
    if complete then return {median = stats.summarize(all).median, samples = all} end
    return {median = m.median, p10 = m.min, p90 = m.max}
end

-- Confirms the candidates of one machine's block on the raw samples: a candidate whose two sides
-- compare's rule calls SAME or UNSURE is dropped (the weakest first, since its neighbours' sides
-- then grow), until every one left is FASTER or SLOWER. Returns the confirmed changes.
local function confirm(points, cands, o)
    local list = {}
    for i, c in ipairs(cands) do list[i] = c end
    while true do
        local weakest, changes = nil, {}
        for i, c in ipairs(list) do
            local from = i > 1 and list[i - 1].index or 1
            local to = i < #list and list[i + 1].index - 1 or #points
            local a, b = pooled(points, from, c.index - 1), pooled(points, c.index, to)
            local verdict, ratio, p = compare.verdict(a, b, o.min_effect)
            local ch = {index = c.index, verdict = verdict, ratio = ratio, p = p, p_perm = c.p_perm,
                before = a.median, after = b.median, runs_before = c.index - from, runs_after = to - c.index + 1}
            changes[i] = ch
            if verdict ~= "SLOWER" and verdict ~= "FASTER" then
                local strength = math.abs(math.log(ratio))
                if not weakest or strength < weakest.strength then weakest = {i = i, strength = strength} end
            end
        end
        if not weakest then return changes end
        table.remove(list, weakest.i)
    end
end

-- detect(points[, o]) -> events in run order: {kind = "machine", index, from, to} where the
-- machine changes, and {kind = "change", index, verdict = "SLOWER"|"FASTER", ratio (after /
-- before), p (rank test), p_perm, before, after} for each confirmed change inside a machine's
-- runs. points: {median=, samples= (raw, optional), machine=} in date order. o: seed,
-- permutations, alpha, min_size, min_effect (compare's, default 5%).
function M.detect(points, o)
    o = o or {}
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
