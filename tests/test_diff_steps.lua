-- test_diff_steps.lua: what diff reads from the steps before its verdicts (wb.diff_steps), on
-- constructed event streams whose answer is known: burst and busy steps left out, an uneven burst
-- over most steps checked against the quiet ones, and with torch.profiler's 3 steps a side the
-- exact test and the steps a verdict needs. Each test checks the verdicts it must give and those it must not.
local lu = require("luaunit")
local shared = require("diff_cases")
local D = require("wb.diff")
local T = require("wb.diff_text")

local prog, saw, node = shared.prog, shared.saw, shared.node
-- a list of events made a profile (wb.profiler.from_events), its model computed in C
local function model(events, o) return D.model_of(wb.profiler.from_events(events), o) end
local function diff_of(a, b, o) return D.diff(model(prog(a), o), model(prog(b), o), o) end
-- n ranges r1..rn of one 40 us op each (op1..opn)
local function ranges(n)
    local out = {}
    for i = 1, n do out[i] = {"r" .. i, {{name = "op" .. i, dur = 40000}}} end
    return out
end

-- Steps that ran slower as a whole (a burst of other work over 6 of A's 12 steps, every node 1.4x),
-- and the step right after them (what a burst leaves behind): left out, as five quiet steps remain
-- (the fewest from which the exact test reaches p < 0.01), so
-- the one range B really slowed (r3, 1.5x in every step) is SLOWER and every other node SAME, with
-- the medians of the steps that ran quietly. Judged on every step, A's medians sat in the burst:
-- every node moved "by 0.71x", and the unchanged ones were UNSURE ("common shift").
function test_a_burst_is_left_out()
    local six = ranges(6)
    local one = {}
    for i = 1, 6 do one[i] = six[i] end
    one[3] = {"r3", {{name = "op3", dur = 60000}}}
    local burst = function(s, i) return (s <= 6 and 1.4 or 1) * saw(s, i) end
    local r = diff_of({ranges = six, steps = 12, jitter = burst}, {ranges = one, steps = 12, jitter = saw})
    lu.assertEquals(r.steps.a.burst, {1, 2, 3, 4, 5, 6})
    lu.assertEquals(r.steps.a.after, {7})
    lu.assertEquals(r.steps.a.left_out, {1, 2, 3, 4, 5, 6, 7})
    lu.assertFalse(r.steps.a.checked)
    lu.assertEquals(r.steps.b.burst, {})
    lu.assertEquals(r.steps.b.left_out, {})
    local notes = table.concat(r.notes, " ")
    lu.assertStrContains(notes, "A: 7 of 12 steps left out of the verdicts: step(s) 1, 2, 3, 4, 5, 6 ran 10% or " ..
        "more slower")
    lu.assertStrContains(notes, "step(s) 7 came right after such a step")
    lu.assertEquals(node(r, "r1").host.n_a, 5)
    lu.assertTrue(node(r, "r1").host.median_a < 40000 * 1.05, node(r, "r1").host.median_a)
    for _, n in ipairs(r.nodes) do
        local want = (n.label == "r3" or n.label == "op3 (4x4)") and "SLOWER" or "SAME"
        lu.assertEquals(n.host.verdict, want, n.label)
    end
    lu.assertEquals(r.total.host.verdict, "SLOWER") -- r3's 20 us of ~240 us a step, every step
    -- the same burst with nothing changed in B: no verdict either way
    r = diff_of({ranges = six, steps = 12, jitter = burst}, {ranges = six, steps = 12, jitter = saw})
    for _, n in ipairs(r.nodes) do lu.assertEquals(n.host.verdict, "SAME", n.label) end
end

-- A burst over 10 of A's 12 steps that slows the nodes unevenly (r1-r4 1.4x, r5 and r6 2x, as a
-- busy core slows a multi-threaded GEMM more than the rest): two quiet steps cannot be judged
-- alone, so every step is kept and a verdict must also come out of the quiet ones. Against the
-- common shift (0.71x) r5, r6 and their ops still read FASTER (0.5x, rank p 0.006); on the quiet
-- steps they are the same: UNSURE, basis "burst". Nothing changed: no node is FASTER or SLOWER.
function test_an_uneven_burst_over_most_steps_makes_verdicts_unsure()
    local six = ranges(6)
    local uneven = function(s, i, name)
        local f = s > 10 and 1 or (name == "r5" or name == "r6") and 2.0 or 1.4
        return f * saw(s, i)
    end
    local r = diff_of({ranges = six, steps = 12, jitter = uneven}, {ranges = six, steps = 12, jitter = saw})
    lu.assertTrue(r.steps.a.checked)
    lu.assertEquals(r.steps.a.left_out, {})
    lu.assertStrContains(table.concat(r.notes, " "), "must also show on the quiet steps alone")
    local unsure = 0
    for _, n in ipairs(r.nodes) do
        lu.assertNotEquals(n.host.verdict, "FASTER", n.label)
        lu.assertNotEquals(n.host.verdict, "SLOWER", n.label)
        if n.host.basis == "burst" then unsure = unsure + 1 end
    end
    lu.assertEquals(unsure, 4) -- r5, r6 and their ops
    lu.assertEquals(node(r, "r5").host.basis, "burst")
end

-- Bursts over steps 1-9 and 11 of 12 (10 and 12 come right after one): r5 and r6 2x, the rest 1.4x.
local function burst(s, i, name)
    local f = (s == 10 or s == 12) and 1 or (name == "r5" or name == "r6") and 2.0 or 1.4
    return f * saw(s, i)
end

-- Other work only slows a step: bursts in A's steps 1-9 and 11 (10 and 12 come right after one, so
-- no quiet step is left to check against) cannot make B's r3, 3x slower in every step, look
-- slower, so r3 stays SLOWER; the same bursts in B could, and there r3 is UNSURE, basis "burst".
function test_bursts_are_checked_only_on_the_side_they_favour()
    local six = ranges(6)
    local slow = {}
    for i = 1, 6 do slow[i] = six[i] end
    slow[3] = {"r3", {{name = "op3", dur = 120000}}}
    local r = diff_of({ranges = six, steps = 12, jitter = burst}, {ranges = slow, steps = 12, jitter = saw})
    lu.assertTrue(r.steps.a.checked)
    lu.assertEquals(node(r, "r3").host.verdict, "SLOWER")
    r = diff_of({ranges = six, steps = 12, jitter = saw}, {ranges = slow, steps = 12, jitter = burst})
    lu.assertTrue(r.steps.b.checked)
    lu.assertEquals(node(r, "r3").host.verdict, "UNSURE")
    lu.assertEquals(node(r, "r3").host.basis, "burst")
end

-- The same bursts in B add at most ~0.2 ms to a step (r5 and r6 2x, the rest 1.4x); B's r3 spins
-- 20 ms more in every step. Other work adds time to a node only by adding it to the step, so
-- it cannot have made those 20 ms: r3 and the step total are SLOWER (a 20 ms busy loop read UNSURE,
-- basis "burst", in a CI run on a shared host whose small linears ran 10% slower in most steps),
-- while the nodes the bursts moved (r5, r6: +40 us) stay UNSURE.
function test_a_change_beyond_what_the_bursts_added_holds()
    local six = ranges(6)
    local spin = {}
    for i = 1, 6 do spin[i] = six[i] end
    spin[3] = {"r3", six[3][2], extra = function() return 20000000 end}
    local r = diff_of({ranges = six, steps = 12, jitter = saw}, {ranges = spin, steps = 12, jitter = burst})
    lu.assertTrue(r.steps.b.checked)
    lu.assertEquals(node(r, "r3").host.verdict, "SLOWER")
    lu.assertTrue(node(r, "r3").host.beyond_added_ns < 250000, node(r, "r3").host.beyond_added_ns)
    lu.assertEquals(r.total.host.verdict, "SLOWER")
    for _, label in ipairs({"r5", "r6"}) do
        lu.assertEquals(node(r, label).host.verdict, "UNSURE", label)
        lu.assertEquals(node(r, label).host.basis, "burst", label)
    end
    -- the other way round (the bursts in A, r3 20 ms faster in B): FASTER, beyond A's added time
    r = diff_of({ranges = spin, steps = 12, jitter = burst}, {ranges = six, steps = 12, jitter = saw})
    lu.assertTrue(r.steps.a.checked)
    lu.assertEquals(node(r, "r3").host.verdict, "FASTER")
    lu.assertEquals(node(r, "r5").host.verdict, "UNSURE")
end

-- Steps in which the host thread waited for a CPU for 10% or more of the step are left out, with
-- the step after each, when six or more remain: A's steps 2 and 5 ran 1.5x slower in r2 alone (a deschedule in one range,
-- which no whole-step factor sees) and say so; r2 is SAME against B without them, and SLOWER
-- when B has the same slowdown in every step.
function test_busy_steps_are_left_out()
    local three = ranges(3)
    local spiky = {three[1], {"r2", three[2][2], extra = function(s) return (s == 2 or s == 5) and 60000 or 0 end}, three[3]}
    local waits = function(s, dur) return (s == 2 or s == 5) and math.floor(0.3 * dur) or 0 end
    local r = diff_of({ranges = spiky, steps = 12, jitter = saw, wait = waits}, {ranges = three, steps = 12, jitter = saw})
    lu.assertEquals(r.steps.a.busy, {2, 5})
    lu.assertEquals(r.steps.a.after, {3, 6})
    lu.assertEquals(r.steps.a.kept, 8)
    local notes = table.concat(r.notes, " ")
    lu.assertStrContains(notes, "A: 4 of 12 steps left out of the verdicts")
    lu.assertStrContains(notes, "step(s) 2, 5 waited for a CPU")
    lu.assertEquals(r.steps.a.left_out, {2, 3, 5, 6})
    lu.assertEquals(node(r, "r2").host.n_a, 8)
    lu.assertEquals(node(r, "r2").host.verdict, "SAME")
    local slow = {three[1], {"r2", three[2][2], extra = function() return 60000 end}, three[3]}
    r = diff_of({ranges = three, steps = 12, jitter = saw, wait = waits}, {ranges = slow, steps = 12, jitter = saw})
    lu.assertEquals(node(r, "r2").host.verdict, "SLOWER")
    lu.assertEquals(node(r, "r1").host.verdict, "SAME")
end

-- torch.profiler's usual active=3: a range 3x slower cannot reach p < 0.01 with 3 samples a side
-- (the exact test's smallest p is 0.1): UNSURE, saying that 5 steps a side would do (two sides
-- wholly apart: the exact test's floor); with 5 steps a side the exact test gives 2/252 = 0.0079
-- and the verdict is SLOWER (the normal approximation said 0.012: UNSURE). The unchanged ranges
-- are SAME in both.
function test_small_n_exact_test_and_steps_needed()
    local three = ranges(3)
    local slow = {three[1], {"r2", {{name = "op2", dur = 120000}}}, three[3]}
    local r = diff_of({ranges = three, steps = 3, jitter = saw}, {ranges = slow, steps = 3, jitter = saw})
    local j = node(r, "r2").host
    lu.assertEquals(j.verdict, "UNSURE")
    lu.assertEquals(j.needs_steps, 5)
    lu.assertAlmostEquals(j.p, 0.1, 1e-9)
    lu.assertEquals(node(r, "r1").host.verdict, "SAME")
    local text = table.concat(T.format(r, 120), " "):gsub("%s+", " ")
    lu.assertStrContains(text, "r2 2.99x: >= 5 steps a side")
    r = diff_of({ranges = three, steps = 5, jitter = saw}, {ranges = slow, steps = 5, jitter = saw})
    j = node(r, "r2").host
    lu.assertEquals(j.verdict, "SLOWER")
    lu.assertAlmostEquals(j.p, 2 / 252, 1e-9)
    lu.assertNil(j.needs_steps)
    lu.assertEquals(node(r, "r1").host.verdict, "SAME")
    lu.assertEquals(node(r, "r3").host.verdict, "SAME")
end


-- A burst on a parallel kernel's core slows that kernel severalfold and the small single-threaded
-- nodes hardly: A's r1 ran 4x in steps 4 and 9, the five other ranges as usual. The median of
-- the nodes' factors does not move; the step's own time (1.5x its quiet level) does: steps 4 and 9
-- are bursts, 5 and 10 follow them, all four are left out and r1 is SAME. The same 4x in every
-- step of B is no burst (every step alike) and r1 is SLOWER.
function test_a_burst_on_one_node_is_seen_by_the_step_time()
    local six = ranges(6)
    local spike = function(s, i, name) return ((s == 4 or s == 9) and name == "r1" and 4 or 1) * saw(s, i) end
    local r = diff_of({ranges = six, steps = 12, jitter = spike}, {ranges = six, steps = 12, jitter = saw})
    lu.assertEquals(r.steps.a.burst, {4, 9})
    lu.assertEquals(r.steps.a.after, {5, 10})
    lu.assertEquals(r.steps.a.kept, 8)
    for _, n in ipairs(r.nodes) do lu.assertEquals(n.host.verdict, "SAME", n.label) end
    local slow = function(s, i, name) return (name == "r1" and 4 or 1) * saw(s, i) end
    r = diff_of({ranges = six, steps = 12, jitter = saw}, {ranges = six, steps = 12, jitter = slow})
    lu.assertEquals(r.steps.b.burst, {})
    lu.assertEquals(node(r, "r1").host.verdict, "SLOWER")
    lu.assertEquals(node(r, "r2").host.verdict, "SAME")
end

-- The pool runs kernels on one thread while other processes keep the cores busy, and each kernel
-- event records the threads it ran on. A's steps 2 and 3 ran their kernels on 1 thread of 2, 2x
-- slower: thin steps, left out with step 4 after them, and nothing is FASTER. A recording whose
-- kernels all ran on 1 thread (r1's 2x slower) against one on 2, with the same thread count asked for,
-- ran another configuration: no FASTER anywhere (basis "threads") and a note says why; asked for
-- 1 and 2 threads (the fingerprints), the same recordings are FASTER: a comparison made on purpose.
function test_thin_steps_and_another_thread_count()
    local function ranges(threads_of)
        local out = {}
        for i = 1, 3 do
            out[i] = {"r" .. i, {{name = "op" .. i, dur = 40000, kname = "k" .. i,
                kernel = function(s) return {threads = threads_of(s)} end}}}
        end
        return out
    end
    local two = ranges(function() return 2 end)
    local thin = ranges(function(s) return (s == 2 or s == 3) and 1 or 2 end)
    local slow_in = function(steps) return function(s, i) return (steps[s] and 2 or 1) * saw(s, i) end end
    local r = diff_of({ranges = thin, steps = 12, jitter = slow_in({[2] = true, [3] = true})},
        {ranges = two, steps = 12, jitter = saw})
    lu.assertEquals(r.steps.a.thin, {2, 3})
    lu.assertEquals(r.steps.a.left_out, {2, 3, 4})
    lu.assertStrContains(table.concat(r.notes, " "), "step(s) 2, 3 ran kernels on fewer threads")
    lu.assertNil(r.threads)
    for _, n in ipairs(r.nodes) do lu.assertEquals((n.host or n.device).verdict, "SAME", n.label) end
    local one = ranges(function() return 1 end)
    local r1_slow = function(s, i, name) return (name == "r1" and 2 or 1) * saw(s, i) end
    local a, b = model(prog({ranges = one, steps = 12, jitter = r1_slow})), model(prog({ranges = two, steps = 12,
        jitter = saw}))
    r = D.diff(a, b)
    lu.assertEquals(r.threads, {a = 1, b = 2})
    lu.assertStrContains(table.concat(r.notes, " "), "ran different configurations")
    lu.assertEquals(node(r, "r1").host.verdict, "UNSURE")
    lu.assertEquals(node(r, "r1").host.basis, "threads")
    for _, n in ipairs(r.nodes) do
        for _, j in ipairs({n.host or {}, n.device or {}}) do lu.assertNotEquals(j.verdict, "FASTER", n.label) end
    end
    lu.assertNotEquals(r.total.host.verdict, "FASTER")
    r = D.diff(a, b, {fingerprint_a = {threads = "1"}, fingerprint_b = {threads = "2"}})
    lu.assertNil(r.threads)
    lu.assertEquals(node(r, "r1").host.verdict, "FASTER")
end

-- Six steps a side (the fewest that give a sample per step), one of A's a burst (r1-r3 1.4x): left
-- out alone, the step after it kept, as leaving both out would leave four (too few for p < 0.01):
-- five quiet steps are judged, and the range B slowed by 20% in every step (r2) is SLOWER while
-- r1 and r3 are SAME. Judged on all six (the burst kept), r2 could not reach p < 0.01.
function test_with_six_steps_a_burst_goes_and_the_step_after_it_stays()
    local three = ranges(3)
    local slow = {three[1], {"r2", {{name = "op2", dur = 48000}}}, three[3]}
    local burst = function(s, i) return (s == 2 and 1.4 or 1) * saw(s, i) end
    local r = diff_of({ranges = three, steps = 6, jitter = burst}, {ranges = slow, steps = 6, jitter = saw})
    lu.assertEquals(r.steps.a.burst, {2})
    lu.assertEquals(r.steps.a.left_out, {2})
    lu.assertEquals(r.steps.a.after_kept, {3})
    lu.assertEquals(r.steps.a.kept, 5)
    lu.assertFalse(r.steps.a.checked)
    lu.assertEquals(node(r, "r2").host.verdict, "SLOWER")
    lu.assertEquals(node(r, "r1").host.verdict, "SAME")
    lu.assertEquals(node(r, "r3").host.verdict, "SAME")
end

os.exit(lu.LuaUnit.run())
