-- diff_cases.lua: what test_diff.lua and test_diff_ab.lua share: the program their timing cases
-- profile (three ranges of one small linear each, a busy loop added inside "b" on one side) and
-- two checks on a diff's result.
local lu = require("luaunit")
local M = {}

-- The diff's node with that label, or nil.
function M.node(r, label)
    for _, n in ipairs(r.nodes) do if n.label == label then return n end end
end

-- Counts the verdicts of r, a program diffed against itself, into t (judged, same, false_verdicts,
-- and per group: trials, false_groups), printing each SLOWER or FASTER: each is a false verdict. A
-- group is a top-level node with everything under it (range c, its linear, mm and kernel, host and
-- device: one set of samples judged seven times, nearly the same test) or the step's totals; it
-- is false when any of its verdicts is.
function M.count_verdicts(r, seed, t)
    t.trials, t.false_groups = t.trials or 0, t.false_groups or 0
    local groups, wrong = {}, {}
    local function see(group, j, label)
        if not j then return end
        if not groups[group] then groups[group] = true; t.trials = t.trials + 1 end
        t.judged = t.judged + 1
        if j.verdict == "SAME" then t.same = t.same + 1 end
        if j.verdict == "SLOWER" or j.verdict == "FASTER" then
            t.false_verdicts = t.false_verdicts + 1
            if not wrong[group] then wrong[group] = true; t.false_groups = t.false_groups + 1 end
            print(string.format("  seed %d: %s %s %.2fx (noise %.2f)", seed, label, j.verdict, j.ratio, j.noise or 0))
        end
    end
    see("total", r.total.host, "total (host)")
    see("total", r.total.device, "total (device)")
    for _, n in ipairs(r.nodes) do
        local top = n.path:match("^/[^/]+")
        see(top, n.host, n.label)
        see(top, n.device, n.label .. " (device)")
    end
end

-- The most false groups (of t.trials, from count_verdicts) that the diff's rule allows: each group
-- is one set of samples of a program against itself, which compare's rule calls SLOWER or FASTER
-- with probability alpha at most (its rank test's level; the minimum effect only lowers it), so
-- the count is at most Binomial(trials, alpha); the bound is the largest count that such a count
-- reaches with probability above `risk` (the chance that the test fails with the rule intact).
-- Computed, so that it follows the trials and the level: 80 groups at alpha 0.01 and risk 0.001
-- allow 5.
function M.false_group_bound(trials, alpha, risk)
    local k, tail, term = 0, 1, (1 - alpha) ^ trials -- term = P(X = k); tail = P(X >= k)
    while true do
        tail = tail - term -- now P(X >= k + 1)
        if tail <= risk then return k end
        k = k + 1
        term = term * (trials - k + 1) / k * alpha / (1 - alpha)
    end
end

-- The attribution's parts sum to the total change (to rounding).
function M.sums_exactly(a)
    local s = a.added + a.removed + a.unattributed
    for _, x in ipairs(a.rows) do s = s + x.contribution end
    lu.assertAlmostEquals(s, a.change, 1e-6 * math.max(1, math.abs(a.change)))
end

-- Spins for ns on the wall clock (a busy loop, not a sleep: the thread keeps its CPU).
function M.busy(ns)
    local t0 = wb.time_ns()
    while wb.time_ns() - t0 < ns do end
end

-- A step of three ranges "a", "b", "c" of a 64x256x256 linear each (one thread: the run-queue delay
-- the profiler samples is the calling thread's, and a pool thread waiting for a CPU would stall the
-- GEMM unseen; on a shared 2-CPU host that drifted whole sessions by 35%), `extra_ns` of busy loop
-- inside "b", and a pause of pause_ms (default 2, 0 for none) after b in both programs, outside the
-- ranges. A thread that spun through its time slice is descheduled soon after, and without the
-- pause that lands in range c; it is real, not the diff's: c ran 1.10-1.19x A's median after 2 ms
-- (quiet EPYC Zen 3 guest, no run-queue delay), ~1.0x (0.87-1.31 loaded) after 10 ms; interleaved,
-- with one busy process beside, 1.19-1.27x with no pause, 1.01-1.08x after 10 ms. pause = "spin"
-- spins through the pause instead of sleeping: a sleeping CPU lets the host idle it, and what runs
-- after the sleep then depends on what ran before (docs/profiler.md: a linear after a 10 ms sleep
-- alternated between ~320 and ~410 us; after b's loop, c ran 0.86-0.87x A's in B, shuffled).
function M.three_ranges(extra_ns, pause_ms, pause)
    pause_ms = pause_ms or 2
    wb.set_num_threads(1)
    local w = wb.randn({256, 256})
    local x = wb.randn({64, 256})
    return function()
        for _, name in ipairs({"a", "b", "c"}) do
            wb.profiler.range(name, function()
                local y = wb.linear(x, w)
                if name == "b" and extra_ns > 0 then M.busy(extra_ns) end
                return y
            end)
            if name == "b" and pause_ms > 0 then
                if pause == "spin" then M.busy(pause_ms * 1000000) else wb.sleep_ms(pause_ms) end
            end
        end
    end
end

-- prog{steps =, ranges = {{name, {ops}}}, jitter =, wait =} with ops {name, shapes, dur, kernel =
-- {fields}, kname}: the events of a constructed program; every step runs the ranges one after the
-- other; jitter(step, i, range name) perturbs each duration of a range's i-th op; wait(step, step_ns) is the step's run-queue delay
-- (its run_delay_ns); a range's extra(step) adds time inside it after its ops.
function M.prog(spec)
    local ev, id, ts = {}, 0, 1000
    local function add(e)
        e.lane = e.lane or "host"
        e.flops, e.bytes, e.args = 0, 0, e.args or {}
        e.parent, e.correlation = e.parent or 0, e.correlation or 0
        ev[#ev + 1] = e
        return e
    end
    for s = 1, spec.steps or 5 do
        local step_ts = ts
        for _, r in ipairs(spec.ranges) do
            local r_ts = ts
            ts = ts + 100
            for i, o in ipairs(r[2]) do
                id = id + 1
                local dur = math.floor(o.dur * (spec.jitter and spec.jitter(s, i, r[1]) or 1))
                local op = add({cat = "op", name = o.name, ts_ns = ts, dur_ns = dur, id = id, correlation = id,
                    shapes = o.shapes or {{4, 4}}, dtypes = {"f32"}})
                if o.kernel then
                    local kid = id + 100000
                    add({cat = "kernel", name = o.kname or "k", ts_ns = ts + 10, dur_ns = math.floor(dur / 2), id = kid,
                        parent = id, correlation = id, lane = "cpu:0 stream 0",
                        args = type(o.kernel) == "function" and o.kernel(s) or o.kernel})
                end
                ts = ts + dur + 50
            end
            ts = ts + (r.extra and r.extra(s) or 0)
            add({cat = "range", name = r[1], ts_ns = r_ts, dur_ns = ts - r_ts, id = 0})
            ts = ts + 20
        end
        add({cat = "step", name = "ProfilerStep#" .. s, ts_ns = step_ts - 10, dur_ns = ts - step_ts + 30, id = s,
            args = spec.wait and {run_delay_ns = spec.wait(s, ts - step_ts)} or nil})
        ts = ts + 100
    end
    return ev
end

-- +-4%, deterministic: the jitter of a step's i-th op
function M.saw(s, i) return 1 + 0.02 * (((s * 7 + i * 3) % 5) - 2) end

return M
