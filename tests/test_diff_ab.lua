-- test_diff_ab.lua: wb.profiler.ab (two programs profiled interleaved in one process) and
-- `workbench diff --ab A.lua B.lua`: the order of the steps, bad arguments and scripts, and the
-- issue's timing cases on real profiles taken interleaved: a 2 ms busy loop in one range, and
-- one program profiled twice.
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")
local shared = require("diff_cases")

local EXE = scratch.exe()
-- verdicts are judged in the Release build; the sanitizer build runs the same code for its checks
local TIMED = not wb.build.sanitizers

local node, sums_exactly = shared.node, shared.sums_exactly

-- ---- the order of the steps, the profiles ----------------------------------------------------

local function logger(log, side)
    return function()
        log[#log + 1] = side
        wb.profiler.range("r", function() return wb.ones({4}) + 1 end)
    end
end

-- The order: by default blocks of A B B A and B A A B in a shuffle that its seed fixes (each side
-- runs twice in every block of four slots); "abba" and "alternate" as named.
function test_steps_run_shuffled_abba_or_alternate_and_each_profile_keeps_its_own()
    local log = {}
    local pa, pb = wb.profiler.ab{a = logger(log, "a"), b = logger(log, "b"), steps = 3, warmup = 1, order = "abba"}
    lu.assertEquals(table.concat(log), "abbaabba") -- warmup 1 + 3 steps each
    for _, p in ipairs({pa, pb}) do
        lu.assertFalse(p.started)
        local steps, ranges = {}, 0
        for _, e in ipairs(p:events()) do
            if e.cat == "step" then steps[#steps + 1] = e.id end
            if e.cat == "range" then ranges = ranges + 1 end
        end
        lu.assertEquals(steps, {1, 2, 3}) -- the warmup step (0) is not recorded
        lu.assertEquals(ranges, 3)
    end
    log = {}
    wb.profiler.ab{a = logger(log, "a"), b = logger(log, "b"), steps = 2, warmup = 0, order = "alternate"}
    lu.assertEquals(table.concat(log), "abab")
    local function shuffled(seed)
        local l = {}
        wb.profiler.ab{a = logger(l, "a"), b = logger(l, "b"), steps = 32, warmup = 0, seed = seed}
        return table.concat(l)
    end
    local s1 = shuffled(nil)
    lu.assertEquals(shuffled(1), s1) -- the default seed is 1, and a seed gives one order
    lu.assertNotEquals(shuffled(2), s1)
    local blocks = {}
    for i = 1, #s1, 4 do
        local blk = s1:sub(i, i + 3)
        lu.assertTrue(blk == "abba" or blk == "baab", blk)
        blocks[blk] = (blocks[blk] or 0) + 1
    end
    lu.assertTrue(blocks.abba >= 4 and blocks.baab >= 4, string.format("abba %s, baab %s of 16 blocks",
        tostring(blocks.abba), tostring(blocks.baab)))
    -- the sessions are stopped: another profile starts
    local p = wb.profiler.profile{}
    p:start()
    p:stop()
end

function test_diff_of_interleaved_profiles_says_so_and_aligns()
    local pa, pb = wb.profiler.ab{a = logger({}, "a"), b = logger({}, "b"), steps = 4, record_shapes = true}
    local r = wb.profiler.diff(pa, pb)
    lu.assertStrContains(r.notes[1], "A and B were profiled interleaved in one process (blocks of A B B A and B A A B " ..
        "shuffled by seed 1, 4 steps each")
    lu.assertEquals(r.a.steps, 4)
    lu.assertEquals(#r.changes, 0)
    lu.assertNotNil(node(r, "r"))
    -- exported, they are ordinary traces
    local a, b = scratch.path(".json"), scratch.path(".json")
    pa:export_chrome_trace(a)
    pb:export_chrome_trace(b)
    local out, err, code = scratch.run_split(string.format("%s diff --json '%s' '%s'", EXE, a, b))
    lu.assertEquals(code, 0, err)
    lu.assertEquals(cjson.decode(out).b.steps, 4)
end

function test_ab_refuses_bad_arguments_with_one_line()
    local f = function() end
    local cases = {
        {{}, "a must be a function (one step of program A), got nil"},
        {{a = f, b = 3}, "b must be a function (one step of program B), got number"},
        {{a = f, b = f, steps = 0}, "steps must be an integer >= 1, got 0"},
        {{a = f, b = f, warmup = 1.5}, "warmup must be an integer >= 0, got 1.5"},
        {{a = f, b = f, order = "random"}, 'order must be "shuffled", "abba" or "alternate", got random'},
        {{a = f, b = f, seed = -1}, "seed must be an integer >= 0, got -1"},
        {{a = f, b = f, schedule = {active = 2}}, "schedule is not an option here"},
        {{a = f, b = f, on_trace_ready = f}, "on_trace_ready is not an option here"},
        {{a = f, b = f, activities = {"gpu"}}, "profiler.ab: unknown activity 'gpu'"},
    }
    for _, c in ipairs(cases) do
        local ok, err = pcall(wb.profiler.ab, c[1])
        lu.assertFalse(ok, c[2])
        lu.assertStrContains(err, c[2])
        lu.assertNil(err:find("\n"), err)
    end
    lu.assertErrorMsgContains("expects a table", wb.profiler.ab, 3)
    -- a program that fails is named with its step, and no session is left running
    local n = 0
    local ok, err = pcall(wb.profiler.ab, {a = f, b = function() n = n + 1; if n == 3 then error("boom", 0) end end,
        steps = 5})
    lu.assertFalse(ok)
    lu.assertStrContains(err, "profiler.ab: program B failed in step 2: boom")
    local p = wb.profiler.profile{}
    p:start()
    -- and inside a running session, ab is refused (sessions do not nest)
    ok, err = pcall(wb.profiler.ab, {a = f, b = f})
    p:stop()
    lu.assertFalse(ok)
    lu.assertStrContains(err, "a session is already running")
end

-- ab starts each side's session once per step: a session measures its event cost when it first
-- starts, not at every start (4096 calibration records before each step's first range)
function test_a_session_started_again_keeps_its_event_cost()
    local p = wb.profiler.profile{}
    p:start()
    p:stop()
    local cost = p:stats().event_cost_ns
    lu.assertTrue(cost > 0)
    for _ = 1, 3 do
        p:start()
        wb.ones({4})
        p:stop()
        lu.assertEquals(p:stats().event_cost_ns, cost)
    end
end

-- ---- real profiles, interleaved ----------------------------------------------------------------

local three_ranges = shared.three_ranges

-- Steps per profile. With 20, on a loaded 2-CPU host (steps spread by 20-40%, IQR / median), a
-- median moves past the 5% minimum effect from sampling alone; 200 keep that under a tenth of
-- the runs (a bootstrap of the recorded samples under no change: 6% for a, 10-17% for c).
local STEPS = 200

-- What the issue asks: b SLOWER by ~2 ms per step, the attribution exact, a and c SAME. The
-- programs spin through their 10 ms pause after b (a sleep lets the host idle the CPU, and then
-- the loop really changes c: 0.86-0.87x in B, shuffled order) and run in the default shuffled
-- order (a fixed A B B A locked onto a period of two in this host's timing: a read 0.95-1.04x
-- between runs of 800 steps). Measured on an EPYC Zen 3 guest: at 200 steps a SAME in 14 of 14
-- runs alone (0.98-1.02x), c in 13 (0.99-1.04x; UNSURE once at 1.06x: B's c runs ~2% slower),
-- and both in 3 of 3 with one busy process beside; at 800 steps both SAME in 11 of 11 (a
-- 0.99-1.01x, c 1.01-1.04x). So 800 steps here (~20 s). a and c are asserted SAME or UNSURE (never
-- SLOWER or FASTER): B's c runs 1-4% slower, for real (by the program's own clock too), close
-- enough to the 5% minimum effect that asserting SAME would fail now and then; a's margin is not
-- much wider (0.95-1.04x at a fixed order). docs/profiler.md has the figures.
function test_busy_loop_in_b_interleaved_is_b_slower_by_two_ms()
    wb.manual_seed(1)
    local steps = TIMED and 800 or STEPS -- (sanitized, the verdicts are not asserted)
    local pa, pb = wb.profiler.ab{a = three_ranges(0, 10, "spin"), b = three_ranges(2000000, 10, "spin"), steps = steps}
    local r = wb.profiler.diff(pa, pb)
    local b = node(r, "b")
    local median_change = b.host.median_b - b.host.median_a
    local top = r.attribution.host[1]
    local verdicts = {}
    for _, name in ipairs({"a", "b", "c"}) do
        local n = node(r, name)
        verdicts[#verdicts + 1] = string.format("%s %s %.3fx (noise %.2f)", name, n.host.verdict, n.host.ratio, n.host.noise)
    end
    print(string.format("busy loop of 2 ms in b, interleaved, %d steps: %s; b's median %+.3f ms, contribution %+.3f ms " ..
        "per step; the step's change %+.3f ms", steps, table.concat(verdicts, ", "), median_change / 1e6,
        b.host_contribution / 1e6, top.change / 1e6))
    sums_exactly(top)
    for _, a in ipairs(r.attribution.host) do sums_exactly(a) end
    for _, a in ipairs(r.attribution.device) do sums_exactly(a) end
    lu.assertEquals(top.rows[1].label, "b")
    if not TIMED then return end
    lu.assertEquals(b.host.verdict, "SLOWER")
    -- the median occurrence is the loop longer; the mean per step (what sums) at least that: a
    -- thread descheduled while it spins on the wall clock ends its loop late, so no upper bound
    lu.assertTrue(median_change > 1.9e6 and median_change < 2.5e6, "b's median moved " .. median_change)
    lu.assertTrue(b.host_contribution > 1.8e6, "b contributes " .. b.host_contribution)
    -- a and c never get a verdict they did not earn (SLOWER or FASTER); UNSURE is an abstention,
    -- not a false verdict (SAME is printed above, not asserted: a CI run failed in this file once,
    -- on a machine other than the one measured, with its figures cut from the log)
    local busy = pa.machine and pa.machine.busy
    for _, name in ipairs({"a", "c"}) do
        local n = node(r, name)
        local what = string.format("%s %s %.3fx, noise %.2f%s", name, n.host.verdict, n.host.ratio, n.host.noise,
            busy and " (a busy machine)" or "")
        lu.assertTrue(n.host.verdict == "SAME" or n.host.verdict == "UNSURE", what)
    end
end

function test_same_program_twice_interleaved_gives_no_false_verdicts()
    local t = {judged = 0, same = 0, false_verdicts = 0}
    local pairs_n = 20
    for seed = 1, pairs_n do
        wb.manual_seed(seed)
        local f = three_ranges(0, 2)
        local r = wb.profiler.diff(wb.profiler.ab{a = f, b = f, steps = 50, warmup = 2})
        shared.count_verdicts(r, seed, t)
        for _, a in ipairs(r.attribution.host) do sums_exactly(a) end
    end
    -- none is the aim; what compare's rule allows at its level is asserted, counted in groups (a
    -- range and all under it is one set of samples judged several times: diff_cases.lua)
    local bound = shared.false_group_bound(t.trials, require("wb.compare").ALPHA, 1e-3)
    print(string.format("same program twice, interleaved, %d seeded pairs of 50 steps: %d false SLOWER/FASTER " ..
        "verdicts of %d (SAME %d), in %d of %d groups (the rule allows %d)", pairs_n, t.false_verdicts, t.judged,
        t.same, t.false_groups, t.trials, bound))
    if TIMED then
        lu.assertTrue(t.false_groups <= bound, string.format("%d false groups of %d", t.false_groups, t.trials))
    end
end

-- ---- the command line ------------------------------------------------------------------------

local function script(body) return scratch.file(body, ".lua") end
-- A script in a folder whose path is longer than Lua's chunk names (LUA_IDSIZE, 60).
local function long_script(body)
    local dir = scratch.dir("-" .. string.rep("a-long-folder-name", 5))
    local path = dir .. "/b.lua"
    local f = assert(io.open(path, "w"))
    f:write(body)
    f:close()
    return path
end

local PROGRAM = [[
local x = wb.randn({16, 32})
local w = wb.randn({%d, 32})
return function() wb.profiler.range("fwd", function() return wb.linear(x, w) end) end
]]

function test_cli_ab_diffs_two_scripts_interleaved_and_saves_the_traces()
    local a, b = script(PROGRAM:format(64)), script(PROGRAM:format(64):gsub("wb%.linear%(x, w%)", "wb.gelu(wb.linear(x, w))"))
    local dir = scratch.dir() .. "/made/by/save" -- --save makes the folder
    local out, err, code = scratch.run_split(string.format("%s diff --ab --steps 6 --json --save '%s' '%s' '%s'", EXE, dir, a, b))
    lu.assertEquals(code, 0, err)
    local doc = cjson.decode(out)
    lu.assertEquals(doc.a.steps, 6)
    lu.assertStrContains(doc.notes[1], "profiled interleaved in one process (blocks of A B B A and B A A B shuffled by " ..
        "seed 1, 6 steps each after 1 of warmup)")
    lu.assertStrContains(cjson.encode(doc.changes), "gelu")
    -- the saved traces are a diff of their own
    out, err, code = scratch.run_split(string.format("%s diff '%s/A.trace.json' '%s/B.trace.json'", EXE, dir, dir))
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "added gelu")
    out, err, code = scratch.run_split(string.format("%s diff --ab --order alternate --steps 3 --warmup 0 '%s' '%s'", EXE, a, b))
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "A B A B order, 3 steps each after 0 of warmup")
end

-- each script's setup finds the modules beside it, run from another folder (require never looks in
-- the current folder), and its own: A's common.lua is not B's
function test_cli_ab_scripts_find_their_modules_beside_them()
    local root = scratch.dir("-ab-modules")
    for _, side in ipairs({"a", "b"}) do
        os.execute(string.format("mkdir -p '%s/%s'", root, side))
        for name, text in pairs({["common.lua"] = string.format("return {n = 8, side = %q}\n", side), ["s.lua"] =
            'local c = require("common")\nio.stderr:write("setup ", c.side, "\\n")\n' ..
            "local x = wb.ones({c.n, c.n})\nreturn function() return x + x end\n"}) do
            local f = assert(io.open(string.format("%s/%s/%s", root, side, name), "w"))
            f:write(text)
            f:close()
        end
    end
    local out, err, code = scratch.run_split(string.format("cd / && %s diff --ab --steps 2 --warmup 0 '%s/a/s.lua' " ..
        "'%s/b/s.lua'", EXE, root, root))
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "add (8x8, 8x8)")
    lu.assertEquals(err, "setup a\nsetup b\n")
end

function test_cli_ab_bad_input_one_line_status_2()
    local good = script(PROGRAM:format(64))
    local cases = {
        {"--ab '" .. good .. "'", "expected two scripts, got 1"},
        {"--ab '" .. good .. "' '" .. scratch.path(".lua") .. "'", "(B): cannot open it"},
        {"--ab '" .. scratch.dir() .. "' '" .. good .. "'", "(A): is a folder, not a script"},
        {"--ab '" .. good .. "' '" .. script("return 42") .. "'", "(B): must return the function to profile (one step of the program), got number"},
        {"--ab '" .. good .. "' '" .. script("return function(") .. "'", "(B): line 1:"},
        -- a path longer than Lua's 60-character chunk names (it shortens them to "...tail"): the
        -- CI's checkout under /check/... was, and the line number was lost
        {"--ab '" .. good .. "' '" .. long_script("\nreturn function(") .. "'", "(B): line 2: <name> or '...' expected near <eof>"},
        {"--ab '" .. script("error('no data here', 0)") .. "' '" .. good .. "'", "(A): its setup failed: no data here"},
        {"--ab '" .. good .. "' '" .. script("return function() error('bad step', 0) end") .. "'",
            "program B failed in step 0: bad step"},
        {"--ab --steps 0 '" .. good .. "' '" .. good .. "'", "--steps takes a whole number from 1, got 0"},
        {"--ab --warmup x '" .. good .. "' '" .. good .. "'", "--warmup takes a whole number from 0, got x"},
        {"--ab --order random '" .. good .. "' '" .. good .. "'", "--order takes shuffled, abba or alternate, got random"},
        {"--steps 5 '" .. good .. "' '" .. good .. "'", "--steps, --warmup, --order, --save and --sandbox go with --ab"},
        {"--sandbox '" .. good .. "' '" .. good .. "'", "--steps, --warmup, --order, --save and --sandbox go with --ab"},
        -- a folder that cannot be made is refused before either script runs
        {"--ab --save '" .. good .. "/sub' '" .. good .. "' '" .. script("print('ran') return function() end") ..
            "'", "--save " .. good .. "/sub: "},
    }
    for _, c in ipairs(cases) do
        local out, err, code = scratch.run_split(string.format("%s diff %s", EXE, c[1]))
        lu.assertEquals(code, 2, c[2] .. ": " .. out .. err)
        lu.assertStrContains(err, c[2])
        lu.assertNotStrContains(out, "ran")
        local lines = select(2, err:gsub("\n", ""))
        -- usage errors add the usage lines; the others are one line (and --save's export report)
        if not err:find("usage:", 1, true) and not err:find("export_chrome_trace", 1, true) then lu.assertEquals(lines, 1, err) end
        lu.assertNil(err:find("traceback", 1, true), err)
    end
end

-- --sandbox: both scripts run as a sandboxed script would (files read only in their folders and
-- the library, written only under --save, no processes), whichever way it is asked for; without
-- it they run as the user's own scripts do.
function test_cli_ab_sandbox_confines_both_scripts()
    local probe = [[
local f = io.open("/etc/passwd")
print("passwd " .. (f and "read" or "refused"))
local ok = pcall(os.execute, "true")
print("execute " .. (ok and "ran" or "refused"))
local x = wb.randn({8, 16})
return function() wb.profiler.range("fwd", function() return x:sum() end) end
]]
    local a, b = script(probe), script(probe)
    for _, form in ipairs({"diff --ab --sandbox", "--sandbox diff --ab"}) do
        local save = scratch.dir()
        local out, err, code = scratch.run_split(string.format("%s %s --steps 3 --save '%s' '%s' '%s'", EXE, form, save,
            a, b))
        lu.assertEquals(code, 0, form .. ": " .. out .. err)
        lu.assertEquals(select(2, out:gsub("passwd refused", "")), 2, out)
        lu.assertEquals(select(2, out:gsub("execute refused", "")), 2, out)
        lu.assertNotStrContains(out, "passwd read")
        lu.assertStrContains(out, "A: " .. a)
        lu.assertNotNil(scratch.read(save .. "/A.trace.json"), "the traces are written under --save")
    end
    -- unsandboxed, the same scripts read the file (the sandbox made the difference above)
    local out = scratch.run_split(string.format("%s diff --ab --steps 3 '%s' '%s'", EXE, a, b))
    lu.assertStrContains(out, "passwd read")
    -- a script that needs the file fails its setup under the sandbox: status 2, one line
    local needy = script('assert(io.open("/etc/passwd"))\nreturn function() end')
    local _, err, code = scratch.run_split(string.format("%s diff --ab --sandbox --steps 3 --save '%s' '%s' '%s'", EXE,
        scratch.dir(), needy, a))
    lu.assertEquals(code, 2, err)
    lu.assertStrContains(err, "(A): its setup failed:")
    lu.assertStrContains(err, "/etc/passwd")
    -- another subcommand is not run sandboxed: refused, not run as it is
    _, err, code = scratch.run_split(string.format("%s --sandbox explain '%s'", EXE, a))
    lu.assertEquals(code, 2, err)
    lu.assertStrContains(err, "--sandbox runs a script (or diff --ab's two scripts), not explain")
end

scratch.exit(lu.LuaUnit.run())
