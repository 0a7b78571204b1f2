-- test_diff.lua: wb.diff on constructed event streams (alignment by path and kernel kind, the
-- replacement and kind-change rules, attribution that sums exactly, verdicts), on real profiles
-- (a program profiled twice, eager vs fused and compiled GeGLU MLP, a 2 ms busy loop in one range),
-- and `workbench diff` on traces: text, --json, --html, --fail-on-slower and bad input.
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")
local shared = require("diff_cases")
local D = require("wb.diff")
local T = require("wb.diff_text")

local EXE = scratch.exe()

-- ---- constructed event streams ---------------------------------------------------------------
-- The timing cases judge time: the sanitizer build still runs them (its memory checks see the
-- same code) but leaves the verdicts to the Release build, where times are not the sanitizer's.
local TIMED = not wb.build.sanitizers

local prog, saw = shared.prog, shared.saw

-- a list of events made a profile (wb.profiler.from_events), its model computed in C
local function model(events, o) return D.model_of(wb.profiler.from_events(events), o) end
local function diff_of(a, b, o) return D.diff(model(prog(a), o), model(prog(b), o), o) end

local node, sums_exactly = shared.node, shared.sums_exactly

local MLP = {{"mlp", {{name = "linear", dur = 20000, kernel = {op = "sgemm", isa = "avx2", layout = "tn", epilogue = "none", tile = "6x16"}},
    {name = "linear", dur = 20000, kernel = {op = "sgemm", isa = "avx2", layout = "tn", epilogue = "none", tile = "6x16"}},
    {name = "gelu", dur = 8000, kernel = {op = "gelu_tanh", epilogue = "none"}, kname = "wb_gelu"},
    {name = "mul", dur = 6000, shapes = {{4, 4}, {4, 4}}, kernel = {op = "mul", epilogue = "none"}, kname = "wb_mul"},
    {name = "linear", dur = 20000, shapes = {{4, 8}}, kernel = {op = "sgemm", isa = "avx2", layout = "tn", epilogue = "none"}}}}}

local function fused()
    local r = {MLP[1][1], {MLP[1][2][1], MLP[1][2][2], {name = "geglu", dur = 9000, shapes = {{4, 4}, {4, 4}},
        kernel = {op = "geglu", epilogue = "none"}, kname = "wb_geglu"}, MLP[1][2][5]}}
    return {r}
end

function test_repeated_ops_align_by_rank_and_replacement_is_named()
    local r = diff_of({ranges = MLP, jitter = saw}, {ranges = fused(), jitter = saw}, {per_occurrence = true})
    lu.assertEquals(#r.changes, 1)
    local line = T.change_line(r.changes[1])
    lu.assertEquals(line, "mlp: gelu (4x4) (wb_gelu) + mul (4x4, 4x4) (wb_mul) -> geglu (4x4, 4x4) (wb_geglu)")
    lu.assertNotNil(node(r, "linear (4x4)"))
    lu.assertNotNil(node(r, "linear (4x4) #2")) -- the second call with the same signature
    lu.assertNotNil(node(r, "linear (4x8)"))   -- after the replaced ops, still aligned
    lu.assertEquals(#r.kernels.gone, 2)
    lu.assertEquals(r.kernels.new[1].name, "wb_geglu")
    for _, n in ipairs(r.nodes) do -- the range itself did get faster: only the aligned ops are the same
        if n.label ~= "mlp" and not n.only then
            lu.assertEquals(n.host and n.host.verdict or "SAME", "SAME", n.label)
        end
    end
end

-- The changed nodes are rows of the table: the removed ones where A ran them, the added ones after
-- them, each with its kernel, its median and its time per step (the attribution's terms).
function test_removed_and_added_nodes_are_rows()
    local r = diff_of({ranges = MLP, jitter = saw}, {ranges = fused(), jitter = saw})
    local rows = {}
    for _, n in ipairs(r.nodes) do rows[#rows + 1] = string.format("%d %s %s", n.depth, n.only or "=", n.label) end
    lu.assertEquals(rows, {"1 = mlp", "2 = linear (4x4)", "3 = k", "2 A gelu (4x4)", "3 A wb_gelu",
        "2 A mul (4x4, 4x4)", "3 A wb_mul", "2 B geglu (4x4, 4x4)", "3 B wb_geglu", "2 = linear (4x8)", "3 = k"})
    local gelu, geglu = node(r, "gelu (4x4)"), node(r, "geglu (4x4, 4x4)")
    lu.assertEquals({gelu.host.verdict, gelu.device.verdict, gelu.count_a, gelu.count_b}, {"removed", "removed", 1, 0})
    lu.assertEquals(geglu.host.verdict, "added")
    lu.assertTrue(gelu.host.median_a > 7000 and gelu.host.median_a < 9000, gelu.host.median_a)
    lu.assertNil(gelu.host.median_b)
    -- their times per step are the attribution's removed and added terms
    local mlp = r.attribution.host[2]
    lu.assertEquals(r.labels[mlp.parent], "mlp")
    lu.assertAlmostEquals(gelu.host_contribution + node(r, "mul (4x4, 4x4)").host_contribution, mlp.removed, 1e-6)
    lu.assertAlmostEquals(geglu.host_contribution, mlp.added, 1e-6)
    local text = table.concat(T.format(r, 120), "\n")
    lu.assertStrMatches(text, ".*\n %- gelu %(4x4%) +1 +[%d.]+ us +%- +%- +removed .*")
    lu.assertStrMatches(text, ".*\n  %+ wb_geglu +1 +%- +%- +%- +%- +%- +[%d.]+ us +added .*")
    -- what cannot fail a row: a verdict for a node one side lacks
    lu.assertEquals(D.worst_slower(r), D.worst_slower({total = r.total, nodes = {}}))
end

-- Repeats of a path (three forwards a step, two linears of one signature) are one row with their
-- count, as key_averages makes them; per occurrence each is its own.
function test_repeats_are_one_row_with_their_count()
    local three = {}
    for i = 1, 3 do three[i] = MLP[1] end
    local r = diff_of({ranges = three, jitter = saw}, {ranges = three, jitter = saw})
    local rows = {}
    for _, n in ipairs(r.nodes) do rows[#rows + 1] = string.format("%s x%g", n.label, n.count_a) end
    lu.assertEquals(rows, {"mlp x3", "linear (4x4) x6", "k x6", "gelu (4x4) x3", "wb_gelu x3", "mul (4x4, 4x4) x3",
        "wb_mul x3", "linear (4x8) x3", "k x3"})
    lu.assertEquals(node(r, "mlp").host.n_a, 15) -- 5 steps of 3
    local each = diff_of({ranges = three, jitter = saw}, {ranges = three, jitter = saw}, {per_occurrence = true})
    lu.assertEquals(#each.nodes, 3 * 11)
    lu.assertNotNil(node(each, "mlp #3"))
    lu.assertEquals(node(each, "mlp #3").host.n_a, 5)
end

function test_a_copy_kernel_gone_is_named()
    local with_copy = {{"mlp", {{name = "contiguous", dur = 5000, kernel = {op = "copy", epilogue = "none"}, kname = "wb_copy"},
        MLP[1][2][1]}}}
    local r = diff_of({ranges = with_copy}, {ranges = {{"mlp", {MLP[1][2][1]}}}})
    lu.assertEquals(r.kernels.gone, {{kind = "kernel op=copy,epilogue=none", name = "wb_copy", per_step = 1}})
    lu.assertEquals(T.change_line(r.changes[1]), "mlp: removed contiguous (4x4) (wb_copy)")
    lu.assertStrContains(table.concat(T.format(r, 100), "\n"), "kernels gone: wb_copy (1 per step)")
end

function test_kernels_align_by_kind_fields_not_by_name()
    local b = {{"mlp", {}}}
    for i, o in ipairs(MLP[1][2]) do b[1][2][i] = setmetatable({kname = "renamed_" .. i}, {__index = o}) end
    local r = diff_of({ranges = MLP}, {ranges = b})
    lu.assertEquals(#r.changes, 0) -- new names, the same kinds: nothing changed
    -- the same name with another isa is a kind change, with the field named
    local c = {{"mlp", {}}}
    for i, o in ipairs(MLP[1][2]) do c[1][2][i] = o end
    c[1][2][1] = {name = "linear", dur = 20000, kernel = {op = "sgemm", isa = "avx512", layout = "tn", epilogue = "none", tile = "6x16"}}
    c[1][2][2] = {name = "linear", dur = 20000, kernel = {op = "sgemm", isa = "avx2", layout = "tn", epilogue = "none", tile = "8x8"}}
    -- how many workers a launch got is not its kind
    local d = {{"mlp", {}}}
    for i, o in ipairs(MLP[1][2]) do d[1][2][i] = o end
    d[1][2][1] = {name = "linear", dur = 20000, kernel = {op = "sgemm", isa = "avx2", layout = "tn", epilogue = "none",
        tile = "6x16", threads = 2}}
    lu.assertEquals(#diff_of({ranges = MLP}, {ranges = d}).changes, 0)
    r = diff_of({ranges = MLP}, {ranges = c}, {per_occurrence = true})
    local lines = {}
    for _, ch in ipairs(r.changes) do lines[#lines + 1] = T.change_line(ch) end
    table.sort(lines)
    lu.assertEquals(lines, {"linear (4x4) #2: kernel kind changed: k -> k (tile 6x16 -> 8x8)",
        "linear (4x4): kernel kind changed: k -> k (isa avx2 -> avx512)"})
end

function test_attribution_sums_exactly_and_names_the_slower_range()
    local three = {{"a", {{name = "x", dur = 30000}}}, {"b", {{name = "y", dur = 30000}}}, {"c", {{name = "z", dur = 30000}}}}
    local slow = {three[1], {"b", three[2][2], extra = function() return 2000000 end}, three[3]}
    local r = diff_of({ranges = three, steps = 8, jitter = saw}, {ranges = slow, steps = 8, jitter = saw})
    lu.assertEquals(node(r, "b").host.verdict, "SLOWER")
    lu.assertEquals(node(r, "a").host.verdict, "SAME")
    lu.assertEquals(node(r, "c").host.verdict, "SAME")
    local top = r.attribution.host[1]
    lu.assertEquals(top.rows[1].label, "b")
    lu.assertAlmostEquals(top.rows[1].contribution, 2000000, 1)
    sums_exactly(top)
    for _, a in ipairs(r.attribution.host) do sums_exactly(a) end
    for _, a in ipairs(r.attribution.device) do sums_exactly(a) end
    -- added and removed nodes land in their own terms
    local more = {three[1], three[2], {"d", {{name = "w", dur = 5000}}}}
    r = diff_of({ranges = three}, {ranges = more})
    top = r.attribution.host[1]
    lu.assertAlmostEquals(top.added, 5000 + 100 + 50, 1e-9)   -- d's range: its op, the gaps inside it
    lu.assertAlmostEquals(top.removed, -(30000 + 150), 1e-9) -- c's range
    sums_exactly(top)
end

function test_a_common_shift_is_not_a_node_verdict()
    local six = {}
    for i = 1, 6 do six[i] = {"r" .. i, {{name = "op" .. i, dur = 40000}}} end
    local slow_all = function(s, i) return 1.5 * saw(s, i) end
    -- every node 1.5x: the machine (or everything); no node is called SLOWER, and it is said
    local r = diff_of({ranges = six, steps = 10, jitter = saw}, {ranges = six, steps = 10, jitter = slow_all})
    for _, n in ipairs(r.nodes) do lu.assertEquals(n.host.verdict, "UNSURE", n.label) end
    lu.assertAlmostEquals(r.common_shift, 1.5, 0.05)
    lu.assertStrContains(table.concat(r.notes, " "), "the aligned nodes moved by 1.50x")
    -- one range 1.5x, the rest as they were: that range alone is SLOWER
    local one = {}
    for i = 1, 6 do one[i] = six[i] end
    one[3] = {"r3", {{name = "op3", dur = 60000}}}
    r = diff_of({ranges = six, steps = 10, jitter = saw}, {ranges = one, steps = 10, jitter = saw})
    for _, n in ipairs(r.nodes) do
        lu.assertEquals(n.host.verdict, (n.label == "r3" or n.label == "op3 (4x4)") and "SLOWER" or "SAME", n.label)
    end
end

function test_nothing_aligns_names_both_top_levels()
    local ok, err = pcall(diff_of, {ranges = MLP}, {ranges = {{"train", {{name = "x", dur = 10}}}}})
    lu.assertFalse(ok)
    lu.assertStrContains(err.diff_error, "nothing aligns")
    lu.assertStrContains(err.diff_error, "A's top level: mlp")
    lu.assertStrContains(err.diff_error, "B's: train")
end

function test_one_step_against_many_states_the_limit()
    local r = diff_of({ranges = MLP, steps = 1}, {ranges = MLP, steps = 6, jitter = saw})
    local text = table.concat(T.format(r, 120), "\n")
    lu.assertStrContains(text, "A has 1 step(s), B 6")
    for _, n in ipairs(r.nodes) do lu.assertNotEquals(n.host and n.host.verdict, "SLOWER") end
end

-- ---- real profiles ---------------------------------------------------------------------------
local function profile(fn, steps, seed)
    wb.manual_seed(seed or 0)
    local p = wb.profiler.profile{activities = {"cpu", "device"}, record_shapes = true,
        schedule = {wait = 0, warmup = 1, active = steps or 10}}
    p:start()
    for _ = 1, (steps or 10) + 1 do fn(); p:step() end
    p:stop()
    return p
end

local function mlp_program(impl)
    local mlp = wb.nn.GeGLUMLP(64, 256, {impl = impl == "compiled" and "eager" or impl})
    local x = wb.randn({16, 64})
    local f = impl == "compiled" and wb.compile(function(v) return mlp(v) end) or function(v) return mlp(v) end
    return function() wb.profiler.range("mlp", function() return f(x) end) end
end

local busy, three_ranges = shared.busy, shared.three_ranges

function test_same_program_twice_gives_no_false_verdicts()
    local t = {judged = 0, same = 0, false_verdicts = 0}
    for seed = 1, 20 do
        local f = three_ranges(0)
        local r = wb.profiler.diff(profile(f, 20, seed), profile(f, 20, seed))
        shared.count_verdicts(r, seed, t)
        for _, a in ipairs(r.attribution.host) do sums_exactly(a) end
    end
    -- The aim is none. A bound on the verdicts (2% of them, before) failed on a busy machine: 16
    -- of 460, where one range's samples moved 1.4x in one session of a pair, and range c, its
    -- linear, mm and kernel, host and device, all said so: seven verdicts of one set of samples.
    -- So the groups are counted (a top-level range and all under it, or the totals), against what
    -- compare's rule allows at its level (count_verdicts, false_group_bound: 5 of 80). On a loaded
    -- 2-core host beside a spinning process: 0 to 7 verdicts in 0 to 2 groups a run (8 runs); with
    -- the common-shift and half-drift gates off, 17 verdicts in 6 groups (failed) and 7 in 2.
    local bound = shared.false_group_bound(t.trials, require("wb.compare").ALPHA, 1e-3)
    print(string.format("same program twice, 20 seeded pairs: %d false SLOWER/FASTER verdicts of %d, in %d of %d " ..
        "groups (the rule allows %d)", t.false_verdicts, t.judged, t.false_groups, t.trials, bound))
    if TIMED then
        lu.assertTrue(t.false_groups <= bound, string.format("%d false groups of %d (at most %d at alpha %g)",
            t.false_groups, t.trials, bound, require("wb.compare").ALPHA))
    end
end

function test_the_false_group_bound_is_the_binomial_tail()
    -- P(Binomial(80, 0.01) >= 6) = 1.6e-4 <= 1e-3 < P(>= 5) = 1.3e-3: at most 5
    lu.assertEquals(shared.false_group_bound(80, 0.01, 1e-3), 5)
    lu.assertEquals(shared.false_group_bound(80, 0.01, 0.5), 1) -- P(>= 1) = 0.55, P(>= 2) = 0.19
    -- a fair coin 10 times: 10 heads has probability 2^-10 = 9.8e-4, excluded at 1e-3, not at 1e-4
    lu.assertEquals(shared.false_group_bound(10, 0.5, 1e-3), 9)
    lu.assertEquals(shared.false_group_bound(10, 0.5, 1e-4), 10)
end

function test_busy_loop_in_one_range_is_slower_by_two_ms_per_step()
    local r = wb.profiler.diff(profile(three_ranges(0, 10), 20), profile(three_ranges(2000000, 10), 20))
    local b = node(r, "b")
    if not TIMED then return end
    lu.assertEquals(b.host.verdict, "SLOWER", string.format("b %.2fx, basis %s, noise %.2f, half drift %.2f, common " ..
        "shift %s", b.host.ratio, b.host.basis, b.host.noise or 0, b.host.drift, tostring(r.common_shift)))
    -- the median occurrence is 2 ms longer; the mean per step (what sums exactly) more on a busy
    -- host, where a thread spinning through its time slice is descheduled and ends its loop late
    local median_change = b.host.median_b - b.host.median_a
    -- at least the loop. No upper bound: on a shared host a thread descheduled while it spins ends
    -- the loop late (+3 to +25 ms per step seen here with other tests running), which the printed
    -- run-queue delay shows
    lu.assertTrue(median_change > 1.9e6, "b's median moved " .. median_change)
    lu.assertTrue(b.host_contribution > 1.8e6, "b contributes " .. b.host_contribution)
    -- a and c: their verdicts are printed, not asserted. Range c in B follows B's 2 ms spin and
    -- can really run slower there (after a 2 ms pause its median was 1.10-1.19x A's in six quiet
    -- 40-step runs on an EPYC Zen 3 guest, with no run-queue delay: an after-effect of the spin,
    -- SLOWER in 3 of 30 loaded runs); and on a loaded host their medians wobble past the 5%
    -- minimum effect, so they read UNSURE as often as SAME. What the diff owes is the attribution: b's change, not theirs, is the step's change. Medians, as a
    -- mean takes in whatever deschedule a loaded host gave one step (c's mean moved 0.29 ms with
    -- two busy loops beside on 2 CPUs).
    local others = {}
    for _, name in ipairs({"a", "c"}) do
        local n = node(r, name)
        others[#others + 1] = string.format("%s %s %.2fx", name, n.host.verdict, n.host.ratio)
        local moved = n.host.median_b - n.host.median_a
        lu.assertTrue(math.abs(moved) < median_change / 5, string.format("%s's median moved %.3f ms, b's %.3f ms",
            name, moved / 1e6, median_change / 1e6))
    end
    local top = r.attribution.host[1]
    lu.assertEquals(top.rows[1].label, "b")
    sums_exactly(top)
    print(string.format("  waits per step (mean): A %.3f ms, B %.3f ms; contribution minus the wait's growth %.3f ms",
        r.wait_ns.a_mean / 1e6, r.wait_ns.b_mean / 1e6, (b.host_contribution - (r.wait_ns.b_mean - r.wait_ns.a_mean)) / 1e6))
    print(string.format("busy loop of 2 ms in b: b %s, median %+.3f ms, contribution %+.3f ms per step; %s; step " ..
        "total change %+.3f ms", b.host.verdict, median_change / 1e6, b.host_contribution / 1e6, table.concat(others, ", "),
        top.change / 1e6))
end

function test_eager_fused_and_compiled_mlp()
    local eager = profile(mlp_program("eager"), 4)
    local r = wb.profiler.diff(eager, profile(mlp_program("fused"), 4))
    local lines = {}
    for _, c in ipairs(r.changes) do lines[#lines + 1] = T.change_line(c) end
    lu.assertEquals(#lines, 1)
    lu.assertStrMatches(lines[1], "mlp: gelu %(16x256%) %(wb_gelu_tanh_%w+%) %+ mul %(16x256, 16x256%) " ..
        "%(wb_mul_[%w_]+%) %-> geglu %(16x256, 16x256%) %(wb_geglu_%w+%)")
    r = wb.profiler.diff(eager, profile(mlp_program("compiled"), 4))
    local gone = {}
    for _, k in ipairs(r.kernels.gone) do gone[#gone + 1] = k.name end
    local text = table.concat(T.format(r, 120), "\n")
    -- the dual GEMM, or the one-kernel MLP where wb.compile's cost model takes it (16 tokens: the
    -- GEMMs are gone too)
    local one = require("wb.compile_mlp").pays(wb.zeros({16, 64}), "geglu_mlp")
    lu.assertStrContains(text, one and "kernels gone: wb_sgemm_" or "kernels gone: wb_gelu_tanh_")
    lu.assertStrContains(table.concat(gone, " "), "wb_gelu_tanh_")
    lu.assertStrContains(table.concat(gone, " "), "wb_mul_")
    lu.assertStrContains(text, one and "kernels new: wb_mlp_" or "kernels new: wb_dual_sgemm")
end

function test_layout_change_is_a_kernel_kind_change()
    local x, w = wb.randn({16, 64}), wb.randn({128, 64})
    local wt = w:t():contiguous():t() -- the same shape, column-major
    local r = wb.profiler.diff(profile(function() wb.linear(x, w) end, 3), profile(function() wb.linear(x, wt) end, 3))
    lu.assertEquals(#r.changes, 1)
    lu.assertStrMatches(T.change_line(r.changes[1]), "mm %(16x64, 64x128%): kernel kind changed: .* %(layout tn %-> nn%)")
end

function test_profiler_diff_refuses_bad_arguments()
    local p = profile(three_ranges(0), 3)
    lu.assertErrorMsgContains("the same profile given twice", wb.profiler.diff, p, p)
    lu.assertErrorMsgContains("must be a profiler", wb.profiler.diff, p, 3)
end

-- ---- the command line ------------------------------------------------------------------------
local function run(args)
    return scratch.run_split(string.format("%s diff %s", EXE, args))
end

local function trace(fn, steps)
    local path = scratch.path(".json")
    profile(fn, steps or 5):export_chrome_trace(path)
    return path
end

-- The whole text of a file the test wrote (a trace, a page).
local read_all = scratch.read

local traces -- made once: {eager, fused, slow, other, one}
local function get_traces()
    if traces then return traces end
    local weird = function() wb.profiler.range("<script>alert(1)</script>", function() wb.ones({4}) end) end
    -- slow: a 20 ms loop in b, so that b's ratio (~100x) stands above the spread of a loaded
    -- host's samples (the verdict is UNSURE while the effect is within IQR / median: with 2 ms, a
    -- CI run's 8 steps once left b unjudged)
    traces = {eager = trace(mlp_program("eager")), fused = trace(mlp_program("fused")), fast = trace(three_ranges(0, 10), 8),
        slow = trace(three_ranges(20000000, 10), 8), weird = trace(weird), one = trace(three_ranges(0), 1)}
    return traces
end

function test_cli_text_json_html()
    local t = get_traces()
    local out, err, code = run(string.format("--width 100 '%s' '%s'", t.eager, t.fused))
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "fingerprint differences: none")
    lu.assertStrMatches(out, ".*structural changes:\n  mlp: gelu .* %+ mul .* %->%s+geglu%s.*")
    for line in out:gmatch("[^\n]+") do
        if line:match("^ *mlp ") then lu.assertTrue(#line <= 100, line) end
    end
    -- the default width (no $COLUMNS): 120 columns, the header whole, the replaced ops as rows,
    -- no interval from too few samples (5 steps a side: "n=5")
    out, err, code = scratch.run_split(string.format("env -u COLUMNS %s diff '%s' '%s'", EXE, t.eager, t.fused))
    lu.assertEquals(code, 0, err)
    for line in out:gmatch("[^\n]+") do lu.assertTrue(#line <= 120, line) end
    lu.assertStrMatches(out, ".*\nnode +count +host A +host B +B/A %[95%%%] +host +dev A +dev B +dev +contrib\n.*")
    lu.assertStrMatches(out, ".*\n %- gelu %(16x256%) +1 .* removed .*\n  %- wb_gelu_tanh_%w+ +1 .*")
    lu.assertStrMatches(out, ".*\n %+ geglu %(16x256, 16x256%) +1 .* added .*")
    lu.assertStrMatches(out, ".*\nmlp +1 .* n=5 .*")
    lu.assertNil(out:find("%[(%d+%.%d+),%1%]"), out)
    -- compact: the table, the attribution with the added and removed nodes named, and a few notes
    -- (a loaded host adds notes on bursts and on steps too few)
    lu.assertEquals(select(2, out:gsub("\n", "")) < 80, true, out)
    out, err, code = run(string.format("--json '%s' '%s'", t.fast, t.slow))
    lu.assertEquals(code, 0, err)
    local doc = cjson.decode(out)
    lu.assertEquals(doc.a.steps, 8)
    lu.assertEquals(doc.attribution.host[1].rows[1].label, "b")
    local html = scratch.path(".html")
    out, err, code = run(string.format("--html '%s' '%s' '%s'", html, t.weird, t.weird:gsub("%.json$", ".json")))
    lu.assertEquals(code, 2) -- the same file twice
    lu.assertStrContains(err, "the same trace given twice")
    out, err, code = run(string.format("--html '%s' '%s' '%s'", html, t.fast, t.weird))
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(err, "nothing aligns")
    lu.assertStrContains(err, "<script>alert(1)</script>")
    local weird2 = trace(function() wb.profiler.range("<script>alert(1)</script>", function() wb.ones({4}) end) end, 4)
    out, err, code = run(string.format("--html '%s' '%s' '%s'", html, t.weird, weird2))
    lu.assertEquals(code, 0, err)
    local page = read_all(html)
    lu.assertStrContains(page, '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'')
    lu.assertNil(page:find("<script", 1, true))
    lu.assertStrContains(page, "&lt;script&gt;alert(1)&lt;/script&gt;")
    lu.assertNil(page:find("https?://"))
    lu.assertStrContains(page, 'id="a1_1" href="#b1_1"')
    lu.assertStrContains(page, 'id="b1_1" href="#a1_1"')
end

function test_cli_html_draws_every_step_or_the_one_asked()
    -- steps of 2, 30 and 12 ms: the median step by host time is the third, unless a deschedule
    -- inside a loop (they spin on the wall clock) stretched one past another, as a busy machine did
    -- to the first: the median of the steps as recorded, then
    local ms = {2, 30, 12}
    lu.assertEquals(D.median_step({steps = {{host_ns = 2e6}, {host_ns = 30e6}, {host_ns = 12e6}}}), 3)
    lu.assertEquals(D.median_step({steps = {{host_ns = 5e6}, {host_ns = 5e6}, {host_ns = 1e6}, {host_ns = 9e6}}}), 1)
    local function stepped()
        local p = wb.profiler.profile{activities = {"cpu", "device"}}
        p:start()
        for _, m in ipairs(ms) do wb.profiler.range("r", function() wb.ones({4}); busy(m * 1000000) end); p:step() end
        p:stop()
        local path = scratch.path(".json")
        p:export_chrome_trace(path)
        return p, path
    end
    local p, a = stepped()
    local _, b = stepped()
    local median = D.median_step(D.model_of(p, {draw = "none"}))
    lu.assertEquals(D.model_of(p).drawn_step, median) -- the model keeps the median step's tree
    lu.assertEquals(D.model_of(p, {draw = 2}).drawn_step, 2)
    local function page(extra)
        local html = scratch.path(".html")
        local _, err, code = run(string.format("%s --html '%s' '%s' '%s'", extra, html, a, b))
        lu.assertEquals(code, 0, err)
        return read_all(html)
    end
    -- the range r's bars of a page: step -> its time in us (the loop spins at least its ms; a busy
    -- machine may stretch it, not shorten it)
    local function r_bars(text)
        local us, steps = {}, {}
        for t, k in text:gmatch('title="r: ([%d.]+) us, step (%d+)"[^>]*>r</a>') do
            steps[#steps + 1] = tonumber(k)
            us[tonumber(k)] = tonumber(t)
        end
        return us, steps
    end
    -- every step, on one time axis (ticks), each bar's whole label in its text and its title
    local text = page("")
    lu.assertStrContains(text, "A: steps 1-3 of 3; B: steps 1-3 of 3 (every step")
    local bars = r_bars(text)
    for k, m in ipairs(ms) do
        lu.assertTrue(bars[k] and bars[k] >= m * 1000, string.format("step %d: r took %s us", k, tostring(bars[k])))
        lu.assertStrContains(text, string.format('">step %d</div>', k))
    end
    lu.assertEquals(select(2, text:gsub('class="step"', "")), 6)
    lu.assertTrue(select(2, text:gsub('class="tick"', "")) >= 5, "ticks on the time axis")
    lu.assertStrMatches(text, '.*<span>[%d.]+ ms</span>.*')
    lu.assertNil(text:find("&#183;", 1, true)) -- no depth dots eating the label
    text = page("--step 2")
    lu.assertStrContains(text, "A: step 2 of 3; B: step 2 of 3 (as asked with --step)")
    local steps
    bars, steps = r_bars(text)
    lu.assertEquals(steps, {2, 2}) -- step 2 alone, on both sides
    lu.assertTrue(bars[2] >= 30000, "step 2: r took " .. bars[2] .. " us")
    local _, err, code = run(string.format("--step 4 --html '%s' '%s' '%s'", scratch.path(".html"), a, b))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "--step 4: A has 3 step(s)")
    _, err, code = run(string.format("--step 2 '%s' '%s'", a, b))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "--step says which step --html draws")
    _, err, code = run(string.format("--step 0 --html x.html '%s' '%s'", a, b))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "--step takes a whole number from 1, got 0")
end

function test_cli_fingerprint_names_a_different_build()
    local t = get_traces()
    local text = read_all(t.fast)
    -- the trace names the build that recorded it
    local other = cjson.decode(text:match("^[^\n]*") .. "]}").otherData
    lu.assertEquals(other.build, {version = wb.version, commit = wb.commit})
    local from = string.format('"commit": "%s"', wb.commit)
    local i, j = text:find(from, 1, true)
    local other_build = scratch.file(text:sub(1, i - 1) .. '"commit": "0123456789ab"' .. text:sub(j + 1), ".json")
    local out, err, code = run(string.format("'%s' '%s'", t.fast, other_build))
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, string.format("fingerprint differences:\n  build: %s (commit %s) -> %s (commit 0123456789ab)",
        wb.version, wb.commit, wb.version))
    out = run(string.format("--json '%s' '%s'", t.fast, other_build))
    lu.assertEquals(cjson.decode(out).fingerprint[1].field, "build")
    -- one build: no difference, traces or profiles
    out = run(string.format("'%s' '%s'", t.fast, t.slow))
    lu.assertStrContains(out, "fingerprint differences: none")
    local f3 = three_ranges(0)
    lu.assertEquals(wb.profiler.diff(profile(f3, 3), profile(f3, 3)).fingerprint, {})
end

function test_cli_fail_on_slower()
    local t = get_traces()
    -- the status agrees with the verdicts the same diff prints (whatever the machine did), and
    -- on the Release build the 20 ms loop is SLOWER by more than 50%
    local out, err, code = run(string.format("--json --fail-on-slower 50 '%s' '%s'", t.fast, t.slow))
    local doc = cjson.decode(out)
    local worst = D.worst_slower(doc)
    lu.assertEquals(code, worst > 50 and 1 or 0, err)
    local b
    for _, n in ipairs(doc.nodes) do if n.label == "b" then b = n end end
    if TIMED then
        lu.assertEquals(b.host.verdict, "SLOWER", string.format("b %.2fx, basis %s, noise %.2f, drift %.2f",
            b.host.ratio, b.host.basis, b.host.noise or 0, b.host.drift))
        lu.assertEquals(code, 1)
        lu.assertStrContains(err, "more than --fail-on-slower 50")
    end
    -- the other way round b is FASTER: 0 unless a or c was judged SLOWER by more than 50%
    out, err, code = run(string.format("--json --fail-on-slower 50 '%s' '%s'", t.slow, t.fast))
    worst = D.worst_slower(cjson.decode(out))
    lu.assertEquals(code, worst > 50 and 1 or 0, err)
    if TIMED then lu.assertTrue(worst < 50, "reversed: worst SLOWER " .. worst .. "%") end
    _, err, code = run(string.format("--fail-on-slower 100000 '%s' '%s'", t.fast, t.slow))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "--fail-on-slower takes a number")
end

function test_cli_bad_input_one_line_status_2()
    local t = get_traces()
    local text = read_all(t.fast)
    local cases = {
        {scratch.file(text:sub(1, #text // 2), ".json"), "truncated"},
        {scratch.file('{"traceEvents": []}', ".json"), "empty profile"}, -- another tool's trace, with no events
        {scratch.file('{"rows": []}', ".json"), "is JSON but not a trace"},
        {scratch.path(".json"), "cannot open"},
        {scratch.dir(), "a folder"},
        {scratch.file('{"traceEvents": [], "otherData": {"producer": "workbench"}}', ".json"), "empty profile"},
    }
    for _, c in ipairs(cases) do
        local out, err, code = run(string.format("'%s' '%s'", t.fast, c[1]))
        lu.assertEquals(code, 2, c[2] .. ": " .. out .. err)
        lu.assertStrContains(err, c[2])
        lu.assertEquals(select(2, err:gsub("\n", "")), 1, err) -- one line
        lu.assertNil(err:find("traceback", 1, true))
    end
    local _, err, code = run(string.format("'%s'", t.fast))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "expected two traces")
    _, err, code = run(string.format("--bogus '%s' '%s'", t.fast, t.slow))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "unknown option --bogus")
    -- one step against many: a diff, the limit stated
    local out
    out, err, code = run(string.format("'%s' '%s'", t.one, t.fast))
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "note: A has 1 step(s), B 8")
end

scratch.exit(lu.LuaUnit.run())
