-- test_shard.lua: wb.sweep's --shard (parsing, a deterministic and balanced assignment) and
-- `workbench merge` (shards joined into the unsharded run's rows, statistics recomputed from the
-- raw samples, and every bad input named with nothing written).
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")
local sweep = require("wb.sweep")
local stats = require("wb.stats")

local EXE = scratch.exe()
local SRC = scratch.source()

local run = scratch.run

local function read_json(path)
    local f = assert(io.open(path))
    local d = cjson.decode(f:read("a"))
    f:close()
    return d
end

local function exists(path)
    local f = io.open(path)
    if f then f:close() end
    return f ~= nil
end

-- A small sweep with known samples: point k's samples are k, k+1, k+2 in round 1 and twice
-- that in round 2 (so the rounds' ratios differ), so every statistic is known wherever the point
-- ran.
local function toy(o)
    o = o or {}
    return wb.sweep{
        name = "toy", quiet = true, shard = o.shard, rounds = 2, cost = o.cost,
        axes = {{"size", o.sizes or {1, 2, 4}}, {"kind", {"a", "b"}}},
        config = {scale = o.scale or 1},
        measure = function(p, round) return {p.index * round, (p.index + 1) * round, (p.index + 2) * round} end,
        finish = function(p, row) row.work = p.size * 10 end,
        derived = {{column = "rate", num = "work", den = "median_ms"},
            {column = "vs_a", num = "median_ms", den = "median_ms", base = {kind = "a"}, interval = true}},
        constants = {peak = 5},
    }
end

local function save_shards(n, dir, o)
    for i = 1, n do
        o = o or {}
        o.shard = i .. "/" .. n
        local s = toy(o)
        s:run()
        s:save{dir = dir}
    end
end

TestShard = {}

-- A derived ratio with interval = true: the same ratio on each round's medians, their range
-- (below 6 rounds) as _lo and _hi; the samples record how they divide into rounds.
function TestShard:test_derived_interval_over_the_rounds()
    local s = toy()
    local rows = s:run()
    for _, r in ipairs(rows) do
        lu.assertEquals(r.samples_ms_per_round, {3, 3})
        if r.kind == "b" then
            -- size 1: a is point 1, b point 2: round medians a 2 and 4, b 3 and 6, so both rounds
            -- say 2/3, and so does the column (the pooled medians would say 2.5 / 4)
            local ia = r.size == 1 and 1 or r.size == 2 and 3 or 5
            local a_med, b_med = {ia + 1, 2 * (ia + 1)}, {ia + 2, 2 * (ia + 2)}
            lu.assertAlmostEquals(r.vs_a_lo, math.min(a_med[1] / b_med[1], a_med[2] / b_med[2]), 1e-12)
            lu.assertAlmostEquals(r.vs_a_hi, math.max(a_med[1] / b_med[1], a_med[2] / b_med[2]), 1e-12)
            lu.assertEquals(r.vs_a_rounds, 2)
            lu.assertAlmostEquals(r.vs_a, (a_med[1] / b_med[1] + a_med[2] / b_med[2]) / 2, 1e-12)
        else
            lu.assertEquals({r.vs_a, r.vs_a_lo, r.vs_a_hi}, {1, 1, 1})
        end
    end
    -- values that would make two points' names equal ("a=1 b=2 b=3" both ways) are refused
    lu.assertErrorMsgContains("axis 'a' value \"1 b=2\" holds a space or '='", wb.sweep, {name = "x",
        measure = function() return {1} end, axes = {{"a", {"1 b=2", "1"}}, {"b", {"3", "2 b=3"}}}})
    -- samples that do not divide as the counts say: no interval, the ratio still there
    local desc = s:description()
    local bad = {{size = 1, kind = "a", samples_ms = {1, 2, 3}, samples_ms_per_round = {2, 2}},
        {size = 1, kind = "b", samples_ms = {2, 3, 4}, samples_ms_per_round = {3}}}
    sweep.compute(bad, desc, function() return {peak = 5} end)
    lu.assertNotNil(bad[2].vs_a)
    lu.assertNil(bad[2].vs_a_lo)
end

function TestShard:test_bad_shards_are_named()
    local cases = {
        {"0/4", "--shard 0/4: shards are numbered from 1 (1/4 .. 4/4)"},
        {"5/4", "--shard 5/4: there are only 4 shards (1/4 .. 4/4)"},
        {"1/0", "--shard 1/0: the number of shards N must be at least 1"},
        {"a/b", "--shard 'a/b': expected I/N, two whole numbers with 1 <= I <= N (e.g. --shard 2/4)"},
        {"2", "--shard '2': expected I/N"},
        {"1/2/3", "--shard '1/2/3': expected I/N"},
        {"-1/4", "--shard '-1/4': expected I/N"},
    }
    for _, c in ipairs(cases) do
        local i, err = sweep.parse_shard(c[1])
        lu.assertNil(i, c[1])
        lu.assertStrContains(err, c[2])
    end
    lu.assertEquals({sweep.parse_shard("2/4")}, {2, 4})
    lu.assertEquals({sweep.parse_shard("1/1")}, {1, 1})
    -- more shards than groups of points (a point's kinds stay in one shard), or than points
    lu.assertErrorMsgContains("--shard 4/4: the sweep's 6 points make 3 groups (points that differ only in kind " ..
        "share a shard: a derived column pairs them), so at most 3 shards", toy, {shard = "4/4"})
    local function plain(shard)
        return wb.sweep{name = "plain", quiet = true, shard = shard, axes = {{"size", {1, 2}}, {"kind", {"a", "b"}}},
            measure = function() return {1} end}
    end
    lu.assertErrorMsgContains("--shard 5/4: there are only 4 shards", plain, "5/4")
    lu.assertErrorMsgContains("--shard 5/5: the sweep has 4 points, so at most 4 shards", plain, "5/5")
    lu.assertEquals(#plain("4/4").mine, 1) -- no derived column pairs them: each point may go alone
    -- a base that names no axis is refused when the sweep is declared
    lu.assertErrorMsgContains("sweep: derived 1 (c): base names 'mode', which is not an axis", wb.sweep, {name = "x",
        axes = {{"a", {1}}}, measure = function() return {1} end,
        derived = {{column = "c", num = "median_ms", den = "median_ms", base = {mode = "eager"}}}})
end

function TestShard:test_the_experiment_refuses_bad_shards_before_measuring()
    for _, c in ipairs({{"0/4", "shards are numbered from 1"}, {"5/4", "there are only 4 shards"},
        {"1/0", "must be at least 1"}, {"a/b", "expected I/N"}}) do
        local out, code = run(string.format("%s %s/experiments/mlp_sweep.lua --no-peer --shard %s", EXE, SRC, c[1]))
        lu.assertEquals(code, 2, c[1] .. ": a bad argument exits 2")
        lu.assertStrContains(out:match("^[^\n]*"), "mlp_sweep.lua: --shard " .. (c[1] == "a/b" and "'a/b'" or c[1]))
        lu.assertStrContains(out:match("^[^\n]*"), c[2])
        lu.assertNil(out:find("roofline:"), "refused before calibrating: " .. c[1])
    end
    -- more shards than token counts (a token count's modes share a shard): one line, status 2,
    -- nothing measured (the count is known once the sweep is declared, after the calibration)
    local out, code = run(string.format("%s %s/experiments/mlp_sweep.lua --no-peer --tokens 1,4 --dim 32 " ..
        "--hidden 64 --iters 2 --rounds 1 --shard 3/3 --out %s", EXE, SRC, scratch.dir()))
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "\nmlp_sweep.lua: --shard 3/3: the sweep's 12 points make 2 groups (points that " ..
        "differ only in mode share a shard: a derived column pairs them), so at most 2 shards (see --help)\n")
    lu.assertNil(out:find("traceback"), out)
    lu.assertNil(out:find("round 1"), out)
end

function TestShard:test_assignment_is_deterministic_interleaved_and_complete()
    -- without costs: round robin, so every shard gets points from all over the grid
    lu.assertEquals(sweep.assign(7, 3), {1, 2, 3, 1, 2, 3, 1})
    -- with costs: the same answer every time, each point once, loads within one point's cost
    local cost = {}
    for i = 1, 20 do cost[i] = (i * 37 % 11) + 1 end
    local a, b = sweep.assign(20, 4, cost), sweep.assign(20, 4, cost)
    lu.assertEquals(a, b)
    local load, biggest = {0, 0, 0, 0}, 0
    for i = 1, 20 do
        lu.assertTrue(a[i] >= 1 and a[i] <= 4)
        load[a[i]] = load[a[i]] + cost[i]
        biggest = math.max(biggest, cost[i])
    end
    table.sort(load)
    lu.assertTrue(load[4] - load[1] <= biggest, "loads " .. table.concat(load, ","))
    -- costliest points go to different shards (not one contiguous block)
    local heavy = {}
    for i = 1, 20 do if cost[i] == 11 then heavy[#heavy + 1] = a[i] end end
    lu.assertNotEquals(heavy[1], heavy[2])
end

function TestShard:test_shards_partition_the_points_the_same_way_each_run()
    local seen = {}
    for i = 1, 3 do
        local first, again = toy({shard = i .. "/3"}), toy({shard = i .. "/3"})
        lu.assertEquals(#first.mine, 2)
        for k, p in ipairs(first.mine) do
            lu.assertEquals(p.name, again.mine[k].name)
            lu.assertNil(seen[p.name], "point in two shards: " .. p.name)
            seen[p.name] = i
        end
    end
    local n = 0
    for _ in pairs(seen) do n = n + 1 end
    lu.assertEquals(n, 6)
    lu.assertEquals(seen["size=1 kind=a"], 1)
    lu.assertEquals(seen["size=1 kind=b"], 1) -- with its kind a: vs_a pairs them
    lu.assertEquals(seen["size=2 kind=a"], 2)
end

-- A point's modes stay in one shard (the issue: shard 1 got every eager point, shard 2 the other
-- modes, and every speedup paired two processes): with and without costs, for every shard count,
-- each size's kinds are in one shard, the shards together hold every point once, and their merge
-- has every vs_a as the unsharded run has it, without the warning about pairs across shards.
function TestShard:test_a_points_modes_stay_in_one_shard()
    local sizes = {1, 2, 4, 8, 16}
    for _, cost in ipairs({false, true}) do
        for n = 1, #sizes do
            local shard_of, count = {}, 0
            for i = 1, n do
                local s = toy{shard = i .. "/" .. n, sizes = sizes,
                    cost = cost and function(p) return p.size * (p.kind == "a" and 1 or 3) end or nil}
                for _, p in ipairs(s.mine) do
                    lu.assertNil(shard_of[p.name], "point in two shards: " .. p.name)
                    shard_of[p.name], count = i, count + 1
                end
            end
            lu.assertEquals(count, 2 * #sizes)
            for _, size in ipairs(sizes) do
                lu.assertNotNil(shard_of["size=" .. size .. " kind=a"])
                lu.assertEquals(shard_of["size=" .. size .. " kind=b"], shard_of["size=" .. size .. " kind=a"],
                    string.format("%d shards%s: size %d's kinds split", n, cost and " with costs" or "", size))
            end
        end
    end
    -- with costs the groups balance: size 16 alone, the other four together (16 * 4 against 15 * 4)
    local heavy = toy{shard = "1/2", sizes = sizes, cost = function(p) return p.size end}
    lu.assertEquals(#heavy.mine, 2)
    lu.assertEquals(heavy.mine[1].size, 16)
    local whole_dir, shard_dir, out = scratch.dir(), scratch.dir(), scratch.dir() .. "/merged"
    local whole = toy{sizes = sizes}
    whole:run()
    whole:save{dir = whole_dir}
    save_shards(3, shard_dir, {sizes = sizes})
    local text, code = run(string.format("%s merge %s %s", EXE, out, shard_dir))
    lu.assertEquals(code, 0, text)
    lu.assertStrContains(text, "merged 3 shard files of toy: 10 points")
    lu.assertNotStrContains(text, "different shards")
    local a, m = read_json(whole_dir .. "/toy.json"), read_json(out .. "/toy.json")
    for i, r in ipairs(a.rows) do
        lu.assertEquals({m.rows[i].vs_a, m.rows[i].vs_a_lo, m.rows[i].vs_a_hi}, {r.vs_a, r.vs_a_lo, r.vs_a_hi})
    end
    lu.assertNotStrContains(scratch.read(out .. "/toy.html"), "different shards")
end

-- Two shards on two machines (here: two processes with different cached calibrations, one a
-- million times faster than the other) split the points the same way: the assignment depends on
-- the sweep's definition only, so merge finds every point exactly once.
function TestShard:test_shards_with_different_calibrations_assign_alike()
    local calibrate = require("wb.calibrate")
    local key = calibrate.cache_key(1)
    local function machine(peak, gbs)
        local home = scratch.dir()
        os.execute("mkdir -p '" .. home .. "/workbench' && chmod 700 '" .. home .. "/workbench'") -- (as it makes it)
        local f = assert(io.open(home .. "/workbench/calibration.json", "w"))
        f:write(cjson.encode({[key] = {threads = 1, peak_gflops = peak, dram_gbs = gbs, l2_gbs = gbs, l3_gbs = gbs,
            l2_bytes = 1 << 20, l3_bytes = 32 << 20, under_load = false, peak_runs = 3, peak_spread = 0,
            peak_stable = true, date = "2026-01-01T00:00:00Z"}}))
        f:close()
        return home
    end
    local fast, slow = machine(1e6, 1e6), machine(1e-3, 1e-3)
    local shards, out = scratch.dir(), scratch.dir() .. "/merged"
    for i, home in ipairs({fast, slow}) do
        local text, code = run(string.format("XDG_CACHE_HOME='%s' %s --threads 1 %s/experiments/mlp_sweep.lua --no-peer " ..
            "--tokens 1,64 --modes eager,dual,fused --dim 32 --hidden 64 --iters 2 --rounds 2 --max-rounds 2 " ..
                "--trace-tokens 1 " ..
            "--shard %d/2 " ..
            "--out %s", home, EXE, SRC, i, shards))
        lu.assertEquals(code, 0, text)
        lu.assertStrContains(text, "cached calibration") -- the planted calibration was the one in use
    end
    local text, code = run(string.format("%s merge %s %s", EXE, out, shards))
    lu.assertEquals(code, 0, text)
    lu.assertStrContains(text, "merged 2 shard files of mlp_sweep: 6 points")
    -- the merged output is a whole run's: a table, the charts; a token count's modes ran in one
    -- shard, so no speedup pairs round k of one process with round k of another
    lu.assertStrMatches(text, "^ *tokens +mode +median_ms .*\n +1 +eager +[%d.]+ .*")
    lu.assertNotStrContains(text, "different shards")
    local m = read_json(out .. "/mlp_sweep.json")
    local shard_of = {}
    for _, r in ipairs(m.rows) do
        shard_of[r.tokens] = shard_of[r.tokens] or r.shard
        lu.assertEquals(r.shard, shard_of[r.tokens], r.tokens .. " " .. r.mode)
    end
    lu.assertNotEquals(shard_of[1], shard_of[64])
    -- the table fits 120 columns: the keys and the shard first, the columns that do not fit named
    for line in text:match("^(.-)\nmerged "):gmatch("[^\n]+") do lu.assertTrue(#line <= 120, line) end
    lu.assertStrMatches(text, ".*\n +1 +eager +[%d.]+ [^\n]* 1/2\n.*")
    lu.assertStrMatches(text, ".*\n%(%d+ more columns in the JSON and CSV: [%w_, ]+.*")
    local html = assert(io.open(out .. "/mlp_sweep.html")):read("a")
    lu.assertEquals(select(2, html:gsub("<figure>", "")), 3)
    lu.assertNotStrContains(html, "pair rows measured by different shards")
    lu.assertStrContains(html, "<h2>Shards</h2>")
end

-- Rounds with very unequal sample counts (eager 89/23/55): a pooled median follows the round with
-- the most samples, so the median column said "fused slower" beside a "vs eager" of 1.43x taken
-- round by round. With median_of = "rounds" both are round by round and agree.
function TestShard:test_median_of_rounds_agrees_with_the_speedup()
    local counts = {eager = {89, 23, 55}, fused = {30, 30, 30}}
    local level = {1.0, 2.0, 1.5} -- each round's speed; fused takes 0.7 of eager's time in every round
    local s = wb.sweep{
        name = "uneven", quiet = true, rounds = 3, axes = {{"mode", {"eager", "fused"}}},
        measure = function(p, round)
            local out = {}
            for i = 1, counts[p.mode][round] do out[i] = level[round] * (p.mode == "fused" and 0.7 or 1) end
            return out
        end,
        stats = {{from = "samples_ms", median = "median_ms", median_of = "rounds", p10 = "p10_ms", p90 = "p90_ms"}},
        derived = {{column = "speedup", num = "median_ms", den = "median_ms", base = {mode = "eager"}, interval = true}},
    }
    local rows = s:run()
    lu.assertEquals(rows[1].median_ms, 1.5) -- the rounds' medians 1, 2, 1.5 (pooled: 1.0)
    lu.assertAlmostEquals(rows[2].median_ms, 1.05, 1e-12)
    lu.assertAlmostEquals(rows[2].speedup, 1 / 0.7, 1e-12)
    lu.assertAlmostEquals(rows[1].median_ms / rows[2].median_ms, rows[2].speedup, 1e-12)
    lu.assertEquals(rows[1].p10_ms, 1.0) -- the spread stays that of all samples
end

function TestShard:test_merge_equals_the_unsharded_run_and_recomputes_statistics()
    local whole_dir, shard_dir, out = scratch.dir(), scratch.dir(), scratch.dir() .. "/merged"
    local whole = toy()
    whole:run()
    whole:save{dir = whole_dir}
    save_shards(3, shard_dir)
    local sh = read_json(shard_dir .. "/toy.shard-2-of-3.json")
    lu.assertEquals(#sh.rows, 2)
    lu.assertEquals({sh.rows[1].size, sh.rows[1].kind, sh.rows[2].size, sh.rows[2].kind}, {2, "a", 2, "b"})
    lu.assertNotNil(sh.rows[2].vs_a) -- its base (kind a) ran in the same shard
    local text, code = run(string.format("%s merge %s %s", EXE, out, shard_dir))
    lu.assertEquals(code, 0, text)
    lu.assertStrContains(text, "merged 3 shard files of toy: 6 points")
    lu.assertStrContains(text, "report: " .. out .. "/toy.html")
    local a, m = read_json(whole_dir .. "/toy.json"), read_json(out .. "/toy.json")
    lu.assertEquals(#m.rows, #a.rows)
    for i, ra in ipairs(a.rows) do
        local rm = m.rows[i]
        for _, k in ipairs({"size", "kind", "work", "median_ms", "p10_ms", "p90_ms", "rate", "vs_a", "vs_a_lo", "vs_a_hi",
            "vs_a_rounds"}) do
            lu.assertEquals(rm[k], ra[k], string.format("row %d %s", i, k))
        end
        lu.assertEquals(rm.samples_ms, ra.samples_ms)
        lu.assertEquals(rm.samples_ms_per_round, {3, 3})
        lu.assertEquals(rm.median_ms, stats.summarize(rm.samples_ms).median)
        lu.assertEquals(rm.shard, (i - 1) // 2 + 1 .. "/3") -- one size (both kinds) per shard
    end
    lu.assertNil(m.rows[1].hardware) -- all shards on this machine
    lu.assertEquals(m.fingerprint.merged_shards, 3)
    lu.assertEquals(#m.shards, 3)
    lu.assertEquals(m.shards[2].fingerprint.cpu, sh.fingerprint.cpu)
    lu.assertEquals(m.keys, {"size", "kind"})
    -- compare reads it as it reads an unsharded run
    local cmp, ccode = run(string.format("%s compare %s/toy.json %s/toy.json", EXE, whole_dir, out))
    lu.assertEquals(ccode, 0, cmp)
    lu.assertStrContains(cmp, "structural differences: none")
    lu.assertNil(cmp:find("only in"))
end

-- a bad merge names its problem, exits 2 and writes nothing
local function refused(inputs, expect)
    local out = scratch.dir() .. "/merged"
    local text, code = run(string.format("%s merge %s %s", EXE, out, table.concat(inputs, " ")))
    lu.assertEquals(code, 2, text)
    for _, e in ipairs(expect) do lu.assertStrContains(text, e) end
    lu.assertFalse(exists(out), "merge wrote " .. out)
end

function TestShard:test_merge_refuses_shards_of_different_sweeps()
    local d1, d2 = scratch.dir(), scratch.dir()
    save_shards(2, d1)
    save_shards(2, d2, {scale = 2})
    refused({d1 .. "/toy.shard-1-of-2.json", d2 .. "/toy.shard-2-of-2.json"},
        {"are shards of different sweeps", "config scale: 1 vs 2"})
    local d3 = scratch.dir()
    save_shards(2, d3, {sizes = {1, 2, 8}})
    refused({d1 .. "/toy.shard-1-of-2.json", d3 .. "/toy.shard-2-of-2.json"}, {"are shards of different sweeps", "axes"})
end

-- shards with other constants (names: each run's values are its own, like a peak measured on
-- its node) or other keys were merged without a word
function TestShard:test_merge_refuses_shards_with_other_constants_or_keys()
    for _, change in ipairs({
        {"constants differ (peak vs ceiling)", function(s) s.constants = {ceiling = 5} end},
        {"keys differ", function(s) s.keys = {s.keys[2], s.keys[1]} end},
    }) do
        local d = scratch.dir()
        save_shards(2, d)
        local path = d .. "/toy.shard-2-of-2.json"
        local doc = read_json(path)
        change[2](doc.sweep)
        local f = assert(io.open(path, "w"))
        f:write(cjson.encode(doc))
        f:close()
        refused({d}, {"are shards of different sweeps", change[1]})
    end
    local d = scratch.dir()
    save_shards(2, d)
    local path = d .. "/toy.shard-2-of-2.json"
    local doc = read_json(path)
    doc.sweep.constants.peak = 6 -- measured on another node: merged, each row with its own run's
    local f = assert(io.open(path, "w"))
    f:write(cjson.encode(doc))
    f:close()
    local text, code = run(string.format("%s merge %s/merged %s", EXE, d, d))
    lu.assertEquals(code, 0, text)
end

function TestShard:test_merge_names_missing_and_duplicated_points()
    local d = scratch.dir()
    save_shards(3, d)
    refused({d .. "/toy.shard-1-of-3.json", d .. "/toy.shard-3-of-3.json"},
        {"2 missing points (shard 2/3): size=2 kind=a; size=2 kind=b", "nothing written"})
    refused({d .. "/toy.shard-1-of-3.json", d .. "/toy.shard-2-of-3.json", d .. "/toy.shard-3-of-3.json",
        d .. "/toy.shard-1-of-3.json"},
        {"2 duplicated points: size=1 kind=a (in " .. d .. "/toy.shard-1-of-3.json, " .. d .. "/toy.shard-1-of-3.json)",
            "size=1 kind=b"})
end

function TestShard:test_merge_refuses_truncated_and_foreign_files()
    local d = scratch.dir()
    save_shards(2, d)
    local path = d .. "/toy.shard-2-of-2.json"
    local f = assert(io.open(path))
    local text = f:read("a")
    f:close()
    f = assert(io.open(path, "w"))
    f:write(text:sub(1, #text // 2))
    f:close()
    refused({d}, {path .. " is truncated or not valid JSON"})
    f = assert(io.open(path, "w"))
    f:close()
    refused({d}, {path .. " is empty (truncated shard file?)"})
    refused({scratch.dir()}, {"holds no shard files"})
    refused({d .. "/nonexistent.json"}, {"cannot read " .. d .. "/nonexistent.json"})
    -- an ordinary results file has no sweep description to check against
    local r = wb.results("plain")
    r:add{x = 1}
    local p = r:save{dir = d}
    refused({p.json}, {p.json .. " was not written by a wb.sweep run"})
    -- raw samples are what a merge recomputes from
    local d2 = scratch.dir()
    save_shards(2, d2)
    local doc = read_json(d2 .. "/toy.shard-1-of-2.json")
    doc.rows[1].samples_ms = nil
    f = assert(io.open(d2 .. "/toy.shard-1-of-2.json", "w"))
    f:write(cjson.encode(doc))
    f:close()
    refused({d2}, {"point size=1 kind=a has no raw samples ('samples_ms')"})
    local usage, code = run(EXE .. " merge only_out")
    lu.assertEquals(code, 2)
    lu.assertStrContains(usage, "usage: workbench merge [--history] OUT FILES|DIRS...")
end

function TestShard:test_merge_flags_shards_on_different_hardware()
    local d, out = scratch.dir(), scratch.dir() .. "/merged"
    save_shards(2, d)
    local path = d .. "/toy.shard-2-of-2.json"
    local doc = read_json(path)
    doc.fingerprint.cpu = "Other CPU 9000"
    doc.fingerprint.gpu, doc.fingerprint.cuda_driver = "Some GPU", "13.0"
    doc.rows[1].median_ms, doc.rows[1].rate = 1e6, 1e6 -- stale statistics: the merge recomputes them
    local f = assert(io.open(path, "w"))
    f:write(cjson.encode(doc))
    f:close()
    local text, code = run(string.format("%s merge %s %s", EXE, out, d))
    lu.assertEquals(code, 0, text)
    lu.assertStrContains(text, "WARNING: the shards ran on different hardware")
    lu.assertStrContains(text, "shard 2/2: CPU Other CPU 9000, GPU Some GPU, driver 13.0")
    local m = read_json(out .. "/toy.json")
    local other = m.rows[3] -- size=2 kind=a, the first row of shard 2/2 (size 2's kinds)
    lu.assertEquals({other.size, other.kind, other.shard}, {2, "a", "2/2"})
    lu.assertEquals(other.hardware, "CPU Other CPU 9000, GPU Some GPU, driver 13.0")
    lu.assertStrContains(m.rows[1].hardware, "CPU ")
    lu.assertNotEquals(m.rows[1].hardware, other.hardware)
    lu.assertStrContains(m.fingerprint.cpu, " | Other CPU 9000")
    lu.assertEquals(other.median_ms, stats.summarize(other.samples_ms).median)
    lu.assertAlmostEquals(other.rate, other.work / other.median_ms, 1e-12) -- JSON keeps 14 digits
    local h = assert(io.open(out .. "/toy.html"))
    local html = h:read("a")
    h:close()
    lu.assertStrContains(html, "the shards ran on different hardware")
    lu.assertStrContains(html, "<th>hardware</th>")
end

-- A shard file edited or written by something else: each wrong shape is named with the file and
-- the place, exits 2 and writes nothing (a shard count of 1e15 used to loop that long naming the
-- missing shards; a number for an axis or text for a fingerprint stopped inside merge.lua), and
-- control characters in names are shown escaped.
function TestShard:test_merge_refuses_hostile_shard_files()
    local cases = {
        {function(d) d.sweep.shard.count = 1e15 end, "sweep.shard must be {index=I, count=N} with 1 <= I <= N <= 6"},
        {function(d) d.sweep.shard.count = "2" end, "sweep.shard must be {index=I, count=N}"},
        {function(d) d.sweep.axes = {1, 2} end, "sweep.axes must be an array of {name=, values="},
        {function(d) d.sweep.name = "../evil" end, "sweep.name must be a plain name (letters, digits, _ -), got ../evil"},
        {function(d) d.sweep.stats = {5} end, "sweep.stats must be an array of"},
        {function(d) d.sweep.derived = {{column = "c", num = 5, den = "size"}} end, "sweep.derived must be an array of"},
        {function(d) d.fingerprint = "text" end, "fingerprint must be an object"},
        {function(d) d.fingerprint.cpu = {model = 1} end, "fingerprint.cpu must be a number, string or boolean"},
        {function(d) d.rows = {x = d.rows[1]} end, "rows must be an array of objects"},
        {function(d) d.columns = {1} end, "columns must be an array of names"},
        {function(d) d.rows[1].size = {1} end, "row 1, size: expected a number or a string"},
        {function(d) d.rows[1].samples_ms[2] = {1} end, "point size=1 kind=a, sample 2: not a number, expected a finite number"},
        {function(d) d.rows[1].kind = "a\27[31mX" end, "row 1 (size=1 kind=a\\027[31mX) is not a point of the sweep"},
        -- rounds that do not divide the samples (merge accepted them and exited 0)
        {function(d) d.rows[1].samples_ms_per_round = {1, 1} end, "rows[1].samples_ms_per_round does not divide its 6 samples (counts {1, 1})"},
        {function(d) d.rows[1].samples_ms_per_round = {0.5} end, "rows[1].samples_ms_per_round does not divide its 6 samples (counts {0.5})"},
        {function(d) d.rows[1].samples_ms_per_round = "3" end, "rows[1].samples_ms_per_round does not divide its 6 samples (counts 3)"},
    }
    for _, c in ipairs(cases) do
        local d = scratch.dir()
        save_shards(2, d)
        local path = d .. "/toy.shard-1-of-2.json"
        local doc = read_json(path)
        c[1](doc)
        local f = assert(io.open(path, "w"))
        f:write(cjson.encode(doc))
        f:close()
        refused({d}, {"workbench merge: " .. path .. ": " .. c[2]})
    end
    -- a NaN sample (cjson reads the literal) is named too, not left to the statistics
    local d = scratch.dir()
    save_shards(2, d)
    local path = d .. "/toy.shard-2-of-2.json"
    local f = assert(io.open(path))
    local text = f:read("a"):gsub('"samples_ms":%[[^,%]]*', '"samples_ms":[NaN', 1)
    f:close()
    f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
    refused({d}, {path .. ": point ", ", sample 1: nan, expected a finite number"})
end

-- The done-when of sharding: mlp_sweep --shard 1/3, 2/3, 3/3, merged, gives the unsharded rows;
-- each shard measures one token count's three modes.
function TestShard:test_mlp_sweep_shards_merge_to_the_unsharded_rows()
    local whole, shards, out = scratch.dir(), scratch.dir(), scratch.dir() .. "/merged"
    local small = "--tokens 1,3,5 --modes eager,dual,graph --dim 32 --hidden 64 --iters 2 --rounds 1 --max-rounds 1 " ..
        "--no-peer " ..
        "--trace-tokens 3"
    local text, code = run(string.format("%s --threads 1 %s/experiments/mlp_sweep.lua %s --out %s", EXE, SRC, small, whole))
    lu.assertEquals(code, 0, text)
    for i = 1, 3 do
        text, code = run(string.format("%s --threads 1 %s/experiments/mlp_sweep.lua %s --out %s --shard %d/3", EXE, SRC,
            small, shards, i))
        lu.assertEquals(code, 0, text)
        lu.assertStrMatches(text, string.format(".*shard %d/3: 3 of 9 points %%(tokens=(%%d) mode=eager, " ..
            "tokens=%%1 mode=dual, tokens=%%1 mode=graph%%).*", i))
        lu.assertTrue(exists(string.format("%s/mlp_sweep.shard-%d-of-3.json", shards, i)))
    end
    text, code = run(string.format("%s merge %s %s", EXE, out, shards))
    lu.assertEquals(code, 0, text)
    lu.assertNotStrContains(text, "different shards")
    local a, m = read_json(whole .. "/mlp_sweep.json"), read_json(out .. "/mlp_sweep.json")
    local function set(rows)
        local s = {}
        for _, r in ipairs(rows) do s[#s + 1] = string.format("%d %s %d %.17g", r.tokens, r.mode, r.kernels, r.rel_error) end
        return s
    end
    lu.assertEquals(set(m.rows), set(a.rows))
    for _, r in ipairs(m.rows) do
        lu.assertNotNil(r.speedup_vs_eager) -- recomputed across shards
        lu.assertAlmostEquals(r.gflops, r.flops / (r.median_ms * 1e6), 1e-9 * r.gflops)
    end
end

scratch.exit(lu.LuaUnit.run())
