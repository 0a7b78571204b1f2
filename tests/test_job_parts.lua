-- test_job_parts.lua: the parts of the main job (experiments/mlp_sweep.lua) that are library API
-- now: a row's kernels for the roofline and the findings tables (wb.report), the roofs
-- (calibrate.ceilings), which points get another round (wb.sweep.unsettled), kernels and host
-- time per call (wb.profiler.per_call), a script's one-line stop (wb.args.stop) and the memory
-- refusal (wb.memory.refusal); each with its bad input.
local lu = require("luaunit")
local scratch = require("scratch")
local report = require("wb.report")
local calibrate = require("wb.calibrate")
local memory = require("wb.memory")

TestJobParts = {}

function TestJobParts:test_kernel_work_keeps_the_events_with_flops_bytes_and_time()
    local flops, bytes, ns = report.kernel_work({
        {flops = 100, bytes = 10, dur_ns = 5}, {flops = 0, bytes = 10, dur_ns = 5}, -- a copy: no flops
        {flops = 7, bytes = 0, dur_ns = 5}, {flops = 8, bytes = 4, dur_ns = 0}, {name = "no numbers"},
        {flops = 30, bytes = 3, dur_ns = 2}})
    lu.assertEquals(flops, {100, 30})
    lu.assertEquals(bytes, {10, 3})
    lu.assertEquals(ns, {5, 2})
    lu.assertErrorMsgContains("report.kernel_work: events must be an array of events, got string",
        report.kernel_work, "x")
    lu.assertErrorMsgContains("report.kernel_work: events[2] is a number, not an event", report.kernel_work, {{}, 3})
end

function TestJobParts:test_findings_tables_one_per_mode_in_order()
    local tables = report.findings_tables({
        {tokens = 1, mode = "eager", findings = {{rule = "host_bound", severity = "warn", message = "m1"}}},
        {tokens = 1, mode = "dual", findings = {}},
        {tokens = 16, mode = "eager", findings = {{rule = "gaps", severity = "info", message = "m2", unreliable = true}}},
    }, {by = "mode", at = "tokens"})
    lu.assertEquals(#tables, 2)
    lu.assertEquals(tables[1].title, "Findings: eager")
    lu.assertEquals(tables[1].header, {"tokens", "severity", "rule", "finding"})
    lu.assertEquals(tables[1].rows, {{1, "warn", "host_bound", "m1"},
        {16, "info", "gaps", "m2 (the machine was busy: a figure about time is unreliable)"}})
    lu.assertEquals(tables[2], {title = "Findings: dual", header = {"tokens", "severity", "rule", "finding"}, rows = {}})
    lu.assertEquals(report.findings_tables({}, {by = "mode", at = "tokens"}), {})
    lu.assertErrorMsgContains("options must be {by=field, at=field}", report.findings_tables, {}, {by = "mode"})
    lu.assertErrorMsgContains("points[1] must be {mode=, tokens=, findings={...}}", report.findings_tables,
        {{mode = "eager"}}, {by = "mode", at = "tokens"})
end

function TestJobParts:test_ceilings_are_cache_aware_on_a_calibrated_cpu_only()
    local cpu = {device = "cpu", threads = 2, l2_gbs = 80, l3_gbs = 40, dram_gbs = 20, bandwidth_gbs = 20,
        l2_bytes = 1 << 20, l3_bytes = 32 << 20}
    lu.assertEquals(calibrate.ceilings(cpu), {{name = "L2", gbs = 80, max_bytes = 2 << 20},
        {name = "L3", gbs = 40, max_bytes = 32 << 20}, {name = "DRAM", gbs = 20}})
    lu.assertEquals(calibrate.ceilings({device = "cuda", bandwidth_gbs = 3000, l2_gbs = 9000}),
        {{name = "DRAM", gbs = 3000}})
    lu.assertEquals(calibrate.ceilings({device = "cpu", bandwidth_gbs = 15}), {{name = "DRAM", gbs = 15}})
    lu.assertErrorMsgContains("calibrate.ceilings: info must be wb.device_info()'s table, got nil", calibrate.ceilings)
end

-- Rows of two modes at three token counts: 1 settled, 16 with a noisy row, 128 with an UNSURE one.
local function rows_and_points()
    local rows, points = {}, {}
    local function add(tokens, mode, noise, verdict)
        rows[#rows + 1] = {tokens = tokens, mode = mode, noise = noise, speedup_vs_eager_verdict = verdict,
            samples_ms = {1, 1.01, 0.99}, samples_ms_per_round = {3}}
        points[#points + 1] = {tokens = tokens, mode = mode}
    end
    add(1, "eager", 0.01); add(1, "dual", 0.02, "FASTER")
    add(16, "eager", 0.01); add(16, "dual", 0.08, "FASTER")
    add(128, "eager", 0.01); add(128, "dual", 0.01, "UNSURE")
    return rows, points
end
local UNSETTLED = {by = "tokens", series = "mode", base = "eager", verdict = "speedup_vs_eager_verdict",
    target_noise = 0.05}

function TestJobParts:test_unsettled_gives_the_whole_group_of_an_unstable_or_unsure_row()
    local rows, points = rows_and_points()
    local again, why = wb.sweep.unsettled(rows, points, UNSETTLED)
    lu.assertEquals(again, {points[3], points[4], points[5], points[6]})
    lu.assertEquals(why, "tokens 16 (dual noise 8%); tokens 128 (dual UNSURE)")
    -- a noisy peer unsettles its token count too; more than three reasons are cut short
    local o = {peers = {{name = "Peer", timing = function(t)
        if t == 1 then return {samples = {1, 2, 3, 1, 2, 3}} end
    end}}}
    for k, v in pairs(UNSETTLED) do o[k] = v end
    again, why = wb.sweep.unsettled(rows, points, o)
    lu.assertEquals(#again, 6)
    lu.assertStrMatches(why, "tokens 1 %(Peer noise %d+%%%); tokens 16 .*")
    rows[1].noise, rows[2].noise = 0.1, 0.2
    rows[#rows + 1] = {tokens = 1, mode = "graph", noise = 0.3}
    _, why = wb.sweep.unsettled(rows, points, o)
    lu.assertStrContains(why, "tokens 1 (eager noise 10%, dual noise 20%, graph noise 30%, ...)")
    -- settled: nothing again
    again, why = wb.sweep.unsettled({rows[1]}, points, {by = "tokens", series = "mode", base = "eager",
        verdict = "v", target_noise = 0.5})
    lu.assertEquals(again, {})
    lu.assertEquals(why, "")
end

function TestJobParts:test_unsettled_bad_input()
    lu.assertErrorMsgContains("sweep.unsettled: rows must be an array of rows, got nil", wb.sweep.unsettled)
    lu.assertErrorMsgContains("sweep.unsettled: verdict= must be a column name, got nil", wb.sweep.unsettled, {}, {},
        {by = "tokens", series = "mode", base = "eager", target_noise = 0.05})
    lu.assertErrorMsgContains("target_noise= must be a number above 0", wb.sweep.unsettled, {}, {},
        {by = "tokens", series = "mode", base = "eager", verdict = "v"})
    lu.assertErrorMsgContains("peers[1] must be {name=text, timing=function(value) -> timing or nil}",
        wb.sweep.unsettled, {}, {}, {by = "tokens", series = "mode", base = "eager", verdict = "v", target_noise = 1,
            peers = {{name = "x"}}})
end

function TestJobParts:test_per_call_counts_one_call_kernels_and_checks_a_promised_count()
    local a, b = wb.ones({4, 8}), wb.ones({4, 8})
    local call = wb.profiler.per_call(function() return wb.add(a, b) end, {range = "fwd", kernels = 1})
    lu.assertEquals(call.kernels, 1)
    lu.assertEquals(#call.kernel_events, 1)
    lu.assertEquals(call.kernel_events[1].cat, "kernel")
    lu.assertTrue(call.host_us >= 0)
    lu.assertEquals(#call.profile:range_instances("fwd"), 5)
    local three = wb.profiler.per_call(function() return wb.add(wb.add(a, b), b) end, {calls = 3})
    lu.assertEquals(three.kernels, 2)
    lu.assertEquals(#three.profile:range_instances("call"), 3)
    lu.assertErrorMsgContains("kernels", wb.profiler.per_call, function() return wb.add(a, b) end, {kernels = 2})
    lu.assertErrorMsgContains("profiler.per_call: fn must be a function, got nil", wb.profiler.per_call)
    lu.assertErrorMsgContains("unknown option 'runs' (expected calls, range, device, kernels)", wb.profiler.per_call,
        function() end, {runs = 2})
    lu.assertErrorMsgContains("calls must be a whole number from 1, got 0", wb.profiler.per_call, function() end,
        {calls = 0})
end

-- A script's stop: one line named after it on stderr, the status asked (2 by default), no traceback.
function TestJobParts:test_args_stop_prints_one_line_and_exits()
    local script = scratch.file('local a = require("wb.args")\nlocal p = a.parser("s.lua", "d")\na.parse(p, {})\n' ..
        'a.stop(p, "--x and --y do not go together", tonumber(os.getenv("STATUS")))\nprint("not reached")\n', ".lua")
    for _, case in ipairs({{"", 2}, {"STATUS=1", 1}}) do
        local out, e, code = scratch.run_split(string.format("%s %s '%s'", case[1], scratch.exe(), script))
        lu.assertEquals(out, "")
        lu.assertEquals(e, "s.lua: --x and --y do not go together\n")
        lu.assertEquals(code, case[2])
    end
    local p = require("wb.args").parser("s.lua", "d")
    lu.assertErrorMsgContains("args.stop: message must be text, got nil", require("wb.args").stop, p)
    lu.assertErrorMsgContains("args.stop: status must be a whole number from 1 to 255, got 0", require("wb.args").stop,
        p, "m", 0)
    lu.assertErrorMsgContains("args.stop: parser must be wb.args.parser()'s parser", require("wb.args").stop, "p", "m")
end

function TestJobParts:test_memory_refusal_only_when_it_cannot_fit()
    lu.assertNil(memory.refusal(0, "nothing"))
    local free = memory.available()
    if free then
        lu.assertStrMatches(memory.refusal(free * 4 + 2 ^ 30, "the sweep"), "the sweep needs about [%d.]+ GiB of " ..
            "memory, and [%d.]+ GiB is available %([^)]+%): it would swap, then be stopped")
    end
    lu.assertErrorMsgContains("memory.refusal: need must be a number of bytes, got string", memory.refusal, "1", "x")
    lu.assertErrorMsgContains("memory.refusal: what must be text (what needs it), got nil", memory.refusal, 1)
end

scratch.exit(lu.LuaUnit.run())
