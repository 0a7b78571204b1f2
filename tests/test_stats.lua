-- test_stats.lua: wb.stats (percentiles, noise, the stopping rule on injected sample streams,
-- Mann-Whitney U) and wb.bench's options and result fields. The stopping rule is fed made-up
-- samples and a made-up clock: no test here depends on how fast this machine is.
local lu = require("luaunit")
local stats = require("wb.stats")

TestStats = {}

function TestStats:test_summarize()
    local s = stats.summarize({5, 1, 4, 2, 3})
    lu.assertEquals(s.n, 5)
    lu.assertEquals(s.median, 3)
    lu.assertEquals(s.p25, 2)
    lu.assertEquals(s.p75, 4)
    lu.assertAlmostEquals(s.p10, 1.4, 1e-12)
    lu.assertAlmostEquals(s.p90, 4.6, 1e-12)
    lu.assertEquals(s.iqr, 2)
    lu.assertAlmostEquals(s.noise, 2 / 3, 1e-12)
    lu.assertEquals(stats.summarize({7}).noise, 0)
    lu.assertErrorMsgContains("no samples", stats.summarize, {})
    lu.assertErrorMsgContains("sample 2 is x", stats.summarize, {1, "x"})
end

-- Feeds `gen(i)` (microseconds) to a rule, the clock advancing by each sample plus `overhead_ns`.
local function drive(opts, gen, overhead_ns)
    local rule = stats.stopping_rule(opts)
    local wall, i = 0, 0
    repeat
        i = i + 1
        local v = gen(i)
        wall = wall + v * 1000 + (overhead_ns or 0)
        local reason = rule:add(v, wall)
    until reason or i > 1e6
    return rule
end

-- A deterministic stream with a given relative spread around 100 us (a sawtooth over 7 values).
local function spread(rel)
    return function(i) return 100 * (1 + rel * (((i * 3) % 7) - 3) / 3) end
end

function TestStats:test_quiet_stream_converges_after_the_minimums()
    local r = drive({min_samples = 10, min_time_ms = 5, target_noise = 0.05}, spread(0.01))
    lu.assertEquals(r.reason, "noise under target")
    lu.assertTrue(r.converged)
    -- 5 ms of 100 us samples: 50 samples before the first check may stop it
    lu.assertEquals(#r.samples, 50)
    lu.assertTrue(r.final_noise <= 0.05)
end

function TestStats:test_minimum_samples_hold_even_when_time_is_reached()
    local r = drive({min_samples = 30, min_time_ms = 0, target_noise = 0.05}, function() return 1000 end)
    lu.assertEquals(r.reason, "noise under target")
    lu.assertEquals(#r.samples, 30)
end

function TestStats:test_noisy_stream_that_stops_improving_is_a_plateau()
    -- +-60% spread that never shrinks: noise stays ~0.6, above target
    local r = drive({min_samples = 10, min_time_ms = 1, target_noise = 0.05, max_time_ms = 1e6}, spread(0.6))
    lu.assertEquals(r.reason, "plateau")
    lu.assertFalse(r.converged)
    lu.assertTrue(r.final_noise > 0.05)
    lu.assertTrue(#r.samples < 1000, "a plateau stops early, got " .. #r.samples)
end

function TestStats:test_time_limit()
    -- plateau detection off: only the time limit can stop a noisy stream
    local r = drive({min_samples = 10, min_time_ms = 1, target_noise = 0.01, plateau_checks = 0, max_time_ms = 50},
        spread(0.6))
    lu.assertEquals(r.reason, "time limit")
    lu.assertFalse(r.converged)
    lu.assertEquals(#r.samples, 500) -- 50 ms of 100 us samples (the sawtooth averages 100 us per 7)
end

function TestStats:test_time_limit_counts_wall_time_not_only_samples()
    -- 1 us samples with 99 us of overhead each (a cache flush, say): the wall clock decides
    local r = drive({min_samples = 10, min_time_ms = 1, target_noise = 0.01, plateau_checks = 0, max_time_ms = 10},
        function(i) return 1 + (i % 2) end, 99000)
    lu.assertEquals(r.reason, "time limit")
    lu.assertTrue(#r.samples <= 100)
end

function TestStats:test_sample_limit()
    local r = drive({min_samples = 5, min_time_ms = 0, target_noise = 0.001, plateau_checks = 0, max_samples = 40},
        spread(0.5))
    lu.assertEquals(r.reason, "sample limit")
    lu.assertEquals(#r.samples, 40)
end

function TestStats:test_outliers_under_a_quarter_do_not_stop_convergence()
    -- every fifth sample three times slower (a neighbour's burst): the IQR ignores them
    local quiet = spread(0.01)
    local r = drive({min_samples = 10, min_time_ms = 1, target_noise = 0.05, max_time_ms = 1e6},
        function(i) return i % 5 == 0 and 300 or quiet(i) end)
    lu.assertEquals(r.reason, "noise under target")
    lu.assertTrue(r.converged)
end

function TestStats:test_plateau_needs_half_the_samples_without_gain()
    -- a noisy stream checked after every sample at first: a plateau is declared only once the
    -- last half of the samples brought nothing, never after a few checks in a row
    local r = drive({min_samples = 10, min_time_ms = 0, target_noise = 0.05, max_time_ms = 1e6}, spread(0.6))
    lu.assertEquals(r.reason, "plateau")
    lu.assertTrue(#r.samples >= 20, "stopped at " .. #r.samples)
end

function TestStats:test_mann_whitney()
    local a, b, c = {}, {}, {}
    for i = 1, 20 do
        a[i] = 100 + (i * 7) % 11
        b[i] = 120 + (i * 5) % 11 -- clearly larger
        c[i] = 100 + (i * 3) % 11 -- same distribution as a, other order
    end
    local ab, ba = stats.mann_whitney(a, b), stats.mann_whitney(b, a)
    lu.assertTrue(ab.p < 1e-6, "p = " .. ab.p)
    lu.assertAlmostEquals(ab.p, ba.p, 1e-12) -- symmetric
    lu.assertEquals(ab.u_a, ba.u_b)
    lu.assertTrue(ab.z < 0 and ba.z > 0)
    lu.assertTrue(stats.mann_whitney(a, c).p > 0.5)
    lu.assertEquals(stats.mann_whitney(a, a).p, 1)
    lu.assertEquals(stats.mann_whitney({1, 2}, {3, 4}).p, 1) -- too few samples: no evidence
    -- a textbook case: U = 3 for these, two-sided exact p = 0.0556; normal approximation ~0.06
    local t = stats.mann_whitney({1, 2, 3, 8, 9}, {4, 5, 6, 7, 10, 11, 12})
    lu.assertEquals(math.min(t.u_a, t.u_b), 8)
    lu.assertTrue(t.p > 0.05 and t.p < 0.2, "p = " .. t.p)
end

-- The ranks come from the two sides sorted apart and merged (diff ranks 100,000 steps a side):
-- U and the tie correction equal the textbook's (one pooled array, a group of equal values taking
-- its mean rank) on draws with many ties; median() equals summarize's median.
function TestStats:test_merged_ranks_equal_pooled_ranks()
    local function pooled(a, b)
        local all = {}
        for _, v in ipairs(a) do all[#all + 1] = {v, 1} end
        for _, v in ipairs(b) do all[#all + 1] = {v, 2} end
        table.sort(all, function(x, y) return x[1] < y[1] end)
        local rank_a, ties, i = 0, 0, 1
        while i <= #all do
            local j = i
            while j < #all and all[j + 1][1] == all[i][1] do j = j + 1 end
            local t = j - i + 1
            if t > 1 then ties = ties + (t * t * t - t) end
            for k = i, j do if all[k][2] == 1 then rank_a = rank_a + (i + j) / 2 end end
            i = j + 1
        end
        return rank_a - #a * (#a + 1) / 2, ties
    end
    local seed = 12345
    local function draw(n) -- few distinct values: many ties
        local out = {}
        for i = 1, n do seed = (seed * 1103515245 + 12345) % 2147483648; out[i] = seed % 7 end
        return out
    end
    for trial = 1, 200 do
        local a, b = draw(3 + trial % 17), draw(3 + (trial * 7) % 23)
        local u = pooled(a, b)
        lu.assertEquals(stats.mann_whitney(a, b).u_a, u, "trial " .. trial)
        lu.assertEquals(stats.median(a), stats.summarize(a).median, "trial " .. trial)
    end
    lu.assertNil(stats.median({}))
    lu.assertEquals(stats.median({4}), 4)
    lu.assertEquals(stats.median({4, 1}), 2.5)
    lu.assertErrorMsgContains("sample 2 is ", stats.median, {1, 0 / 0, 3}) -- "nan" or "-nan"
end

function TestStats:test_median_ci()
    local function ranks(n, confidence)
        local t = {}
        for i = 1, n do t[i] = (i * 37) % n + 1 end -- 1..n in a scrambled order
        return {select(2, stats.median_ci(t, confidence))}
    end
    -- the sign test's textbook ranks at 95%: n = 25 -> 8th and 18th, n = 100 -> 40th and 61st
    lu.assertEquals({ranks(25)[1], ranks(25)[2]}, {8, 18})
    lu.assertEquals({ranks(100)[1], ranks(100)[2]}, {40, 61})
    lu.assertAlmostEquals(ranks(25)[3], 0.95671, 1e-5)
    -- five samples: the range, holding 93.75%; the interval narrows as samples come
    lu.assertEquals(ranks(5), {1, 5, 0.9375})
    local w5, w15, w45 = ranks(5), ranks(15), ranks(45)
    lu.assertTrue((w15[2] - w15[1]) / 15 < (w5[2] - w5[1]) / 5 and (w45[2] - w45[1]) / 45 < (w15[2] - w15[1]) / 15)
    -- a lower confidence, a narrower interval; the coverage always at least what was asked when
    -- there are enough samples
    lu.assertTrue(ranks(25, 0.8)[2] - ranks(25, 0.8)[1] < 10)
    for n = 6, 60 do lu.assertTrue(ranks(n)[3] >= 0.95, "n = " .. n) end
    local m = stats.median_ci({3, 1, 2})
    lu.assertEquals(m, 2)
    lu.assertEquals({select(2, stats.median_ci({7}))}, {7, 7, 0})
    local many = {}
    for i = 1, 3000 do many[i] = i end
    local _, lo, hi, coverage = stats.median_ci(many) -- 2^-3000 underflows a double; its log does not
    lu.assertEquals({lo, hi}, {1446, 1555}) -- about 1500.5 -/+ 1.96 sqrt(3000) / 2
    lu.assertTrue(coverage >= 0.95 and coverage < 0.96)
    -- bad input names the problem
    lu.assertErrorMsgContains("no samples", stats.median_ci, {})
    lu.assertErrorMsgContains("sample 2 is", stats.median_ci, {1, 0 / 0})
    lu.assertErrorMsgContains("confidence must be a number in (0, 1), got 1.5", stats.median_ci, {1, 2}, 1.5)
    lu.assertErrorMsgContains("expected an array of numbers, got string", stats.median_ci, "1,2")
    lu.assertErrorMsgContains("sample 2 is x", stats.median_ci, {1, "x"})
    for _, c in ipairs({0, 1, 0 / 0, "0.9", -0.5}) do
        lu.assertErrorMsgContains("confidence must be a number in (0, 1)", stats.median_ci, {1, 2}, c)
    end
end

function TestStats:test_against_bar()
    -- places added only while a printed number would cross the bar
    lu.assertEquals({stats.against_bar(2, 1.0, 0.996, 0.951, 1.021)}, {"0.996", "0.951", "1.021"})
    lu.assertEquals({stats.against_bar(2, 1.0, 1.021, 0.951, 0.999)}, {"1.021", "0.951", "0.999"})
    lu.assertEquals({stats.against_bar(2, 1.0, 1.04, 0.97, 1.12)}, {"1.04", "0.97", "1.12"})
    lu.assertEquals({stats.against_bar(1, 90, 89.96, 89.1, 90.4)}, {"89.96", "89.10", "90.40"})
    lu.assertEquals({stats.against_bar(1, 90, 89.6, 88.2, 90.3)}, {"89.6", "88.2", "90.3"})
    lu.assertEquals({stats.against_bar(2, nil, 0.996, 0.951, 1.021)}, {"1.00", "0.95", "1.02"})
    -- on the bar itself nothing is added; at most 4 places however close
    lu.assertEquals({stats.against_bar(2, 1.8, 1.8, 1.8, 1.8)}, {"1.80", "1.80", "1.80"})
    lu.assertEquals(stats.against_bar(2, 1.0, 0.9999999, 0.9, 1.1), "1.0000")
    lu.assertEquals(stats.against_bar(0, 90, 89.7, 80, 95), "89.7")
    -- a zero time or denominator: inf and nan print as themselves, beside finite ends that still agree
    lu.assertEquals({stats.against_bar(2, 1.0, math.huge, 0.996, math.huge)}, {"inf", "0.996", "inf"})
    lu.assertEquals({stats.against_bar(2, 1.0, 0 / 0, 0.9, 1.1)}, {string.format("%.2f", 0 / 0), "0.90", "1.10"})
    lu.assertErrorMsgContains("decimals must be a non-negative integer, got 1.5", stats.against_bar, 1.5, 1, 1, 1, 1)
    lu.assertErrorMsgContains("bar must be a number or nil", stats.against_bar, 2, "1", 1, 1, 1)
    lu.assertErrorMsgContains("hi must be a number, got nil", stats.against_bar, 2, 1, 1, 1)
end

function TestStats:test_normal_tail()
    lu.assertAlmostEquals(stats.normal_sf(0), 0.5, 1e-7)
    lu.assertAlmostEquals(stats.normal_sf(1.959964), 0.025, 1e-6)
    lu.assertAlmostEquals(stats.normal_sf(-1.959964), 0.975, 1e-6)
end

TestBench = {}

function TestBench:test_result_fields()
    local n = 0
    local r = wb.bench(function() n = n + 1 end, {warmup = 2, iters = 12, min_time_ms = 0, max_time_ms = 200})
    lu.assertEquals(#r.samples_us, r.iters)
    lu.assertEquals(n, r.iters + 2)
    lu.assertTrue(r.iters >= 12)
    for _, k in ipairs({"median_us", "p10_us", "p25_us", "p75_us", "p90_us", "mean_us", "min_us", "max_us", "noise",
        "wall_ms", "target_noise"}) do
        lu.assertEquals(type(r[k]), "number", k)
    end
    lu.assertTrue(r.p10_us <= r.p25_us and r.p25_us <= r.median_us and r.median_us <= r.p75_us and r.p75_us <= r.p90_us)
    lu.assertEquals(type(r.converged), "boolean")
    lu.assertStrMatches(r.stop_reason, "^[%a ]+$")
    lu.assertEquals(r.converged, r.noise <= r.target_noise)
end

function TestBench:test_fixed_count_with_max_iters()
    local r = wb.bench(function() end, {warmup = 0, iters = 7, max_iters = 7, min_time_ms = 0})
    lu.assertEquals(r.iters, 7)
    lu.assertEquals(r.stop_reason, "sample limit")
end

function TestBench:test_contenders_are_interleaved()
    local order = {}
    local rs = wb.bench({a = function() order[#order + 1] = "a" end, b = function() order[#order + 1] = "b" end},
        {warmup = 0, iters = 5, max_iters = 5, min_time_ms = 0})
    lu.assertEquals(table.concat(order), "ababababab")
    lu.assertEquals(rs.a.iters, 5)
    lu.assertEquals(rs.b.iters, 5)
end

-- min_sample_us: a sample is the mean of a batch lasting that long, sized after the warm-up; the
-- sampled time counts whole batches
function TestBench:test_batches_last_min_sample_us()
    local calls = 0
    local function busy() -- at least 100 us a call
        calls = calls + 1
        local t0 = wb.time_ns()
        while wb.time_ns() - t0 < 100000 do end
    end
    local r = wb.bench(busy, {warmup = 1, iters = 5, min_time_ms = 20, max_time_ms = 2000, min_sample_us = 1000,
        target_noise = 10})
    -- no call is under 100 us, so 10 calls last 1 ms: the batch needs no more (fewer if calls ran slow)
    lu.assertTrue(r.batch >= 2 and r.batch <= 10, tostring(r.batch))
    lu.assertTrue(r.median_us >= 100 and r.median_us < 1000, tostring(r.median_us)) -- per call, not per batch
    lu.assertTrue(calls >= 1 + r.batch * r.iters, string.format("%d calls, %d x %d", calls, r.batch, r.iters))
    -- 20 ms of sampled time is ~20 batches of 1 ms (counting the samples, ~100 us each, would take ~200)
    lu.assertTrue(r.iters >= 5 and r.iters <= 40, tostring(r.iters))
    lu.assertEquals(wb.bench(function() end, {warmup = 0, iters = 3, max_iters = 3, min_time_ms = 0}).batch, 1)
end

function TestStats:test_sampled_time_counts_what_a_sample_spent()
    local rule = stats.stopping_rule{min_samples = 1, min_time_ms = 1, target_noise = 1}
    lu.assertNil(rule:add(10, 0)) -- 10 us of the 1 ms
    lu.assertEquals(rule:add(10, 0, 1000), "noise under target") -- a batch mean of 10 us that took 1 ms
end

function TestBench:test_bad_options()
    local f = function() end
    lu.assertErrorMsgContains("option 'iters' must be a number, got string", wb.bench, f, {iters = "10"})
    lu.assertErrorMsgContains("option 'iters' must be from 1 to", wb.bench, f, {iters = 0})
    lu.assertErrorMsgContains("option 'warmup' must be a whole number, got 1.5", wb.bench, f, {warmup = 1.5})
    lu.assertErrorMsgContains("option 'target_noise' must be from 0 to", wb.bench, f, {target_noise = -0.1})
    lu.assertErrorMsgContains("option 'max_time_ms' must be a number, got nan", wb.bench, f, {max_time_ms = 0 / 0})
    lu.assertErrorMsgContains("option 'flush_cache' must be a boolean, got number", wb.bench, f, {flush_cache = 1})
    lu.assertErrorMsgContains("max_time_ms (10) is below min_time_ms (100)", wb.bench, f, {max_time_ms = 10})
    lu.assertErrorMsgContains("max_iters (5) is below iters (10)", wb.bench, f, {max_iters = 5})
    lu.assertErrorMsgContains("unknown option 'itres'", wb.bench, f, {itres = 3})
    lu.assertErrorMsgContains("options must be a table, got number", wb.bench, f, 3)
    lu.assertErrorMsgContains("expected a function or a table of functions, got nil", wb.bench, nil)
    lu.assertErrorMsgContains("contender 'x' is a number", wb.bench, {x = 1})
    lu.assertErrorMsgContains("device must be", wb.bench, f, {device = "tpu"})
    lu.assertErrorMsgContains("option 'min_sample_us' must be from 0 to", wb.bench, f, {min_sample_us = -1})
    lu.assertErrorMsgContains("flush_cache and min_sample_us do not go together", wb.bench, f,
        {flush_cache = true, min_sample_us = 100})
end

-- Student's t tail against printed tables (two-sided 5% and 1% points) and the normal limit.
function TestStats:test_student_t_tail()
    local stats = require("wb.stats")
    for _, c in ipairs({{12.706, 1, 0.025}, {2.228, 10, 0.025}, {3.169, 10, 0.005}, {2.845, 20, 0.005},
        {1.960, 1e7, 0.025}, {0, 7, 0.5}}) do
        lu.assertAlmostEquals(stats.student_sf(c[1], c[2]), c[3], 2e-5, string.format("t %g df %g", c[1], c[2]))
    end
    lu.assertAlmostEquals(stats.student_sf(-2.228, 10), 0.975, 2e-5)
    lu.assertEquals(stats.student_sf(math.huge, 3), 0)
    lu.assertAlmostEquals(math.exp(stats.log_gamma(6)), 120, 1e-9)
    lu.assertAlmostEquals(math.exp(stats.log_gamma(0.5)), math.sqrt(math.pi), 1e-12)
    lu.assertErrorMsgContains("degrees of freedom > 0", stats.student_sf, 1, 0)
end

-- The rank test is exact for small samples without ties: 5 against 5 wholly apart is 2 / C(10, 5)
-- (the normal approximation gave 0.012), 3 against 3 is 0.1 at best; ties use the approximation.
function TestStats:test_mann_whitney_exact_for_small_samples()
    local stats = require("wb.stats")
    local r = stats.mann_whitney({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10})
    lu.assertTrue(r.exact)
    lu.assertAlmostEquals(r.p, 2 / 252, 1e-12)
    lu.assertTrue(r.z < 0) -- A's ranks below B's
    lu.assertAlmostEquals(stats.mann_whitney({4, 5, 6}, {1, 2, 3}).p, 0.1, 1e-12)
    lu.assertAlmostEquals(stats.mann_whitney({1, 3, 5, 7}, {2, 4, 6, 8}).p, 48 / 70, 1e-12)
    local tied = stats.mann_whitney({1, 2, 2, 4, 5}, {6, 7, 8, 9, 10})
    lu.assertFalse(tied.exact)
    local a, b = {}, {}
    for i = 1, 30 do a[i], b[i] = i, i + 0.5 end
    lu.assertFalse(stats.mann_whitney(a, b).exact) -- 900 > EXACT_MAX_PRODUCT
end

os.exit(lu.LuaUnit.run())
