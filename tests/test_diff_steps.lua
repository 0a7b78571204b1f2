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

-- Steps that ran slower as a whole (a burst of other work over 7 of A's 12 steps, every node 1.4x):
-- left out, as five quiet steps remain (the fewest from which the exact test reaches p < 0.01), so
-- the one range B really slowed (r3, 1.5x in every step) is SLOWER and every other node SAME, with
-- the medians of the steps that ran quietly. Judged on every step, A's medians sat in the burst:
-- every node moved "by 0.71x", and the unchanged ones were UNSURE ("common shift").
function test_a_burst_is_left_out()
    local six = {}
    for i = 1, 6 do six[i] = {"r" .. i, {{name = "op" .. i, dur = 40000}}} end
    local one = {}
    for i = 1, 6 do one[i] = six[i] end
    one[3] = {"r3", {{name = "op3", dur = 60000}}}
    local burst = function(s, i) return (s <= 7 and 1.4 or 1) * saw(s, i) end
    local r = diff_of({ranges = six, steps = 12, jitter = burst}, {ranges = one, steps = 12, jitter = saw})
    lu.assertEquals(r.steps.a.burst, {1, 2, 3, 4, 5, 6, 7})
    lu.assertEquals(r.steps.a.left_out, {1, 2, 3, 4, 5, 6, 7})
    lu.assertFalse(r.steps.a.checked)
    lu.assertEquals(r.steps.b.burst, {})
    lu.assertStrContains(table.concat(r.notes, " "), "A: 7 of 12 steps left out of the verdicts: step(s) 1, 2, 3, 4, " ..
        "5, 6, 7 ran 10% or more slower")
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
    local six = {}
    for i = 1, 6 do six[i] = {"r" .. i, {{name = "op" .. i, dur = 40000}}} end
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

-- Steps in which the host thread waited for a CPU for 10% or more of the step are left out when
-- six or more remain: A's steps 2 and 5 ran 1.5x slower in r2 alone (a deschedule in one range,
-- which no whole-step factor sees) and say so; r2 is SAME against B without them, and SLOWER
-- when B has the same slowdown in every step.
function test_busy_steps_are_left_out()
    local three = {{"r1", {{name = "op1", dur = 40000}}}, {"r2", {{name = "op2", dur = 40000}}},
        {"r3", {{name = "op3", dur = 40000}}}}
    local spiky = {three[1], {"r2", three[2][2], extra = function(s) return (s == 2 or s == 5) and 60000 or 0 end}, three[3]}
    local waits = function(s, dur) return (s == 2 or s == 5) and math.floor(0.3 * dur) or 0 end
    local r = diff_of({ranges = spiky, steps = 12, jitter = saw, wait = waits}, {ranges = three, steps = 12, jitter = saw})
    lu.assertEquals(r.steps.a.busy, {2, 5})
    lu.assertEquals(r.steps.a.kept, 10)
    lu.assertStrContains(table.concat(r.notes, " "), "A: 2 of 12 steps left out of the verdicts: step(s) 2, 5 waited " ..
        "for a CPU")
    lu.assertEquals(r.steps.a.left_out, {2, 5})
    lu.assertEquals(node(r, "r2").host.n_a, 10)
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
    local three = {{"r1", {{name = "op1", dur = 40000}}}, {"r2", {{name = "op2", dur = 40000}}},
        {"r3", {{name = "op3", dur = 40000}}}}
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

os.exit(lu.LuaUnit.run())
