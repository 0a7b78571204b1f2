-- test_changepoints.lua: wb.changepoints on synthetic series whose answer is known, each checked
-- for the changes it must report and those it must not: a clean 10% step (1% run-to-run noise)
-- found at its run, in 1-token-like runs too (a thousand samples, 30% spread); no change in A/A
-- series; a single slow run (a burst) is not a change; a new machine is "machine", not a change.
local lu = require("luaunit")
local cp = require("wb.changepoints")

local normal = require("history_series").normal -- seeded, apart from math.random

-- 14 runs: run k's samples scaled by a 1% run factor, factor(k) and a per-sample spread.
local function series(seed, factor, o)
    o = o or {}
    local z, pts = normal(seed), {}
    for k = 1, o.runs or 14 do
        local f = math.exp(0.01 * z()) * factor(k)
        local s = {}
        for j = 1, o.samples or 30 do s[j] = 0.02 * f * math.exp((o.spread or 0.02) * z()) end
        table.sort(s)
        pts[k] = {median = s[(#s + 1) // 2], samples = s, machine = o.machine and o.machine(k) or "m"}
    end
    return pts
end

local function changes(events)
    local out = {}
    for _, e in ipairs(events) do if e.kind == "change" then out[#out + 1] = e end end
    return out
end

TestChangepoints = {}

function TestChangepoints:test_a_clean_step_is_found_at_its_run()
    for seed = 1, 20 do
        for _, o in ipairs({{}, {samples = 1000, spread = 0.3}}) do
            local c = changes(cp.detect(series(seed, function(k) return k >= 9 and 1.10 or 1 end, o), {seed = seed}))
            lu.assertEquals(#c, 1, string.format("seed %d, %d samples", seed, o.samples or 30))
            lu.assertEquals({c[1].index, c[1].verdict}, {9, "SLOWER"})
            -- the ratio of two segments' geometric means (8 and 6 runs): each run off by its 1% run
            -- factor and its median's own error (1.2533 spread / sqrt(n) for a normal log-spread);
            -- four standard errors of the ratio
            local per_run = math.sqrt(0.01 ^ 2 + (1.2533 * (o.spread or 0.02) / math.sqrt(o.samples or 30)) ^ 2)
            local bound = 4 * 1.10 * per_run * math.sqrt(1 / 8 + 1 / 6)
            lu.assertTrue(math.abs(c[1].ratio - 1.10) < bound, string.format("ratio %.4f, bound %.4f", c[1].ratio, bound))
            lu.assertTrue(c[1].p < cp.ALPHA_RUNS)
        end
    end
end

function TestChangepoints:test_no_change_in_aa_series()
    local false_changes = 0
    for seed = 1, 60 do
        false_changes = false_changes + #changes(cp.detect(series(100 + seed, function() return 1 end), {seed = seed}))
    end
    lu.assertTrue(false_changes <= 1, false_changes .. " false changes in 60 A/A series")
end

-- one run 30% slower (a burst while it ran) is one run, not a change: nothing after it confirms it
function TestChangepoints:test_a_single_slow_run_is_not_a_change()
    for seed = 1, 20 do
        local c = changes(cp.detect(series(200 + seed, function(k) return k == 6 and 1.3 or 1 end), {seed = seed}))
        lu.assertEquals(#c, 0, "seed " .. seed)
    end
end

-- the same 10% step on a new machine from run 9: a machine event, no change
function TestChangepoints:test_a_new_machine_is_not_a_change()
    local pts = series(7, function(k) return k >= 9 and 1.10 or 1 end, {machine = function(k) return k >= 9 and "b" or "a" end})
    local events = cp.detect(pts, {seed = 1})
    lu.assertEquals(#changes(events), 0)
    lu.assertEquals(#events, 1)
    lu.assertEquals({events[1].kind, events[1].index, events[1].from, events[1].to}, {"machine", 9, "a", "b"})
end

os.exit(lu.LuaUnit.run())
