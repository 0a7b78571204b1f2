-- wb.verdict: the one rule that says whether B is the SAME as A, FASTER, SLOWER, or UNSURE, from
-- their timings. `workbench compare` (two files), mlp_sweep's main table (each mode and peer against
-- eager), diff and history all call it, so a verdict means the same wherever it is printed.
-- It does not read files or print: callers pass timings and show what it returns.
--
--   local v = require("wb.verdict")
--   local verdict, ratio, p, basis, noise, shown = v.verdict(ta, tb)
--   -- ta, tb: {samples = {...}, per_round = {counts} or nil, median =, p10 =, p90 =}
--
-- One statistic throughout: each side's median of its rounds' medians (all its samples are one
-- round when per_round is absent), so every round weighs alike however many samples it took; the
-- ratio B/A is of those two medians, and `shown` returns them, so that what a caller prints beside
-- the verdict is what the verdict was taken on. The evidence: a two-sided Mann-Whitney U test on
-- the samples with every round weighing alike (stats.by_rounds), p < ALPHA, in the ratio's
-- direction; a change of at least MIN_EFFECT; a change larger than both sides' noise (IQR /
-- median of those samples): a run's samples are not independent draws (a shared host's slow
-- spell spans many of them), so p alone on hundreds of samples overstates the evidence. With an
-- interval for B/A from rounds paired in time (o.interval, as mlp_sweep has against eager), a
-- change is FASTER or SLOWER only when the interval lies on one side of 1. Effects are taken on
-- the log of the ratio, so A vs B mirrors B vs A. Without raw samples (older files): the
-- recorded medians and p10-p90 spreads, which must not overlap.
local stats = require("wb.stats")

local M = {ALPHA = 0.01, MIN_EFFECT = 0.05}

-- The statistic of one side: {median =, rounds =, equal =, noise =}, or nil without samples.
local function side(t)
    if type(t.samples) ~= "table" or #t.samples == 0 then return nil end
    local rounds = stats.split_rounds(t.samples, t.per_round) or {t.samples}
    return stats.by_rounds(rounds)
end
M.side = side

-- verdict(ta, tb[, min_effect][, o]) -> verdict, ratio (B/A), p (or nil), basis, noise, shown.
-- basis: "samples" (the test decided), "noise" (the change is within the rows' noise),
-- "interval" (the paired interval o.interval = {lo, hi} for B/A straddles 1), "spread" (no raw
-- samples: the recorded p10-p90). noise: the larger of the two sides' (nil without samples).
-- shown = {a =, b =, rounds_a =, rounds_b =}: the two medians the ratio is of, and their rounds.
function M.verdict(ta, tb, min_effect, o)
    min_effect = min_effect or M.MIN_EFFECT
    o = o or {}
    local sa, sb = side(ta), side(tb)
    local both = sa ~= nil and sb ~= nil
    local ma, mb = ta.median, tb.median
    if both then ma, mb = sa.median, sb.median end
    local shown = {a = ma, b = mb, rounds_a = both and sa.rounds or nil, rounds_b = both and sb.rounds or nil}
    local ratio = ma > 0 and mb / ma or (mb == ma and 1 or math.huge)
    local effect = math.abs(math.log(ratio))
    local small = effect < math.log(1 + min_effect)
    local direction = ratio < 1 and "FASTER" or "SLOWER"
    if both then
        local noise = math.max(sa.noise, sb.noise)
        local test = stats.mann_whitney(sa.equal, sb.equal)
        local p = test.p
        if small then return "SAME", ratio, p, "samples", noise, shown end
        if effect < math.log(1 + noise) then return "UNSURE", ratio, p, "noise", noise, shown end
        local iv = o.interval
        if iv and iv[1] and iv[2] and iv[1] <= 1 and iv[2] >= 1 then
            return "UNSURE", ratio, p, "interval", noise, shown
        end
        -- the test's direction (A's ranks above B's: B faster) must be the ratio's: a rank test and
        -- a ratio of medians can point opposite ways on skewed samples
        local agrees = (test.z > 0) == (ratio < 1)
        return (p < M.ALPHA and agrees) and direction or "UNSURE", ratio, p, "samples", noise, shown
    end
    -- no raw samples: the recorded p10-p90 ranges
    if small then return "SAME", ratio, nil, "spread", nil, shown end
    local function spread(t) return type(t.p10) == "number" and type(t.p90) == "number" end
    if spread(ta) and spread(tb) then
        local apart = ta.p90 < tb.p10 or tb.p90 < ta.p10
        return apart and direction or "UNSURE", ratio, nil, "spread", nil, shown
    end
    return "UNSURE", ratio, nil, "spread", nil, shown
end

-- The rule in one line, for a table's footer.
function M.rule_text(min_effect)
    return string.format("a change of at least %g%%, above both sides' noise (IQR / median), rank test p < %g " ..
        "in its " ..
        "direction, rounds weighing alike", (min_effect or M.MIN_EFFECT) * 100, M.ALPHA)
end

return M
