-- diff_cases.lua: what test_diff.lua and test_diff_ab.lua share: the program their timing cases
-- profile (three ranges of one small linear each, a busy loop added inside "b" on one side) and
-- two checks on a diff's result.
local lu = require("luaunit")
local M = {}

-- The diff's node with that label, or nil.
function M.node(r, label)
    for _, n in ipairs(r.nodes) do if n.label == label then return n end end
end

-- Counts the nodes' host and device verdicts of r into t (judged, same, false_verdicts), printing
-- each SLOWER or FASTER: for a program diffed against itself, each is a false verdict.
function M.count_verdicts(r, seed, t)
    for _, n in ipairs(r.nodes) do
        for _, j in ipairs({n.host, n.device}) do
            t.judged = t.judged + 1
            if j.verdict == "SAME" then t.same = t.same + 1 end
            if j.verdict == "SLOWER" or j.verdict == "FASTER" then
                t.false_verdicts = t.false_verdicts + 1
                print(string.format("  seed %d: %s %s %.2fx (noise %.2f)", seed, n.label, j.verdict, j.ratio, j.noise or 0))
            end
        end
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

return M
