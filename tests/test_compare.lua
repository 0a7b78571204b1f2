-- test_compare.lua: `workbench compare A.json B.json`: alignment on the config columns, verdicts
-- from raw samples (rank test plus minimum effect, above the rows' noise; symmetric), the fallback to the recorded spread
-- for older files, files that are not comparable, CI gating, and malformed input (exit 2).
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")

local EXE = scratch.exe()

local function write(doc)
    local path = scratch.path(".json")
    local f = assert(io.open(path, "w"))
    f:write(type(doc) == "string" and doc or cjson.encode(doc))
    f:close()
    return path
end

-- a may start with options: "--fail-on-slower 20 /tmp/a.json"
local function run(a, b)
    local opts, file = a:match("^(.* )(/[^ ]+)$")
    return scratch.run_split(string.format("%s compare %s'%s' '%s'", EXE, opts or "", file or a, b))
end

local function doc(rows, fp)
    return {name = "sweep", keys = {"tokens", "mode"}, columns = {"tokens", "mode", "median_ms", "p10_ms", "p90_ms",
        "gflops", "kernels"}, rows = rows, fingerprint = fp or {cpu = "X", threads = 2, commit = "abc"}}
end

-- n deterministic samples around `median` with a relative spread `rel` (a sawtooth)
local function samples(median, rel, n)
    local s = {}
    for i = 1, n or 40 do s[i] = median * (1 + rel * (((i * 7) % 11) - 5) / 5) end
    return s
end

local function row(tokens, mode, median, rel, extra)
    local s = samples(median, rel or 0.02)
    local r = {tokens = tokens, mode = mode, median_ms = median, p10_ms = median * (1 - (rel or 0.02)),
        p90_ms = median * (1 + (rel or 0.02)), gflops = 100 / median, kernels = 5, samples_ms = s}
    for k, v in pairs(extra or {}) do r[k] = v end
    return r
end

TestCompare = {}

function TestCompare:test_run_against_itself_is_all_same()
    local a = write(doc({row(1, "eager", 3), row(1, "dual", 2), row(16, "eager", 9, 0.3)}))
    local out, err, code = run(a, a)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "verdicts: 3 SAME, 0 FASTER, 0 SLOWER, 0 UNSURE")
    lu.assertStrContains(out, "structural differences: none")
    lu.assertStrContains(out, "fingerprint differences: none")
end

function TestCompare:test_slower_run_is_slower_and_the_mirror_is_faster()
    local a = write(doc({row(1, "eager", 3), row(1, "dual", 2), row(16, "eager", 9)}))
    local b = write(doc({row(1, "eager", 3.9), row(1, "dual", 2.02), row(16, "eager", 11.7)},
        {cpu = "X", threads = 2, commit = "def", command = "workbench slow.lua"}))
    local out, err, code = run(a, b)
    lu.assertEquals(code, 0, err)
    lu.assertStrMatches(out, ".*tokens=1 mode=eager[^\n]-1%.300x[^\n]- SLOWER.*")
    lu.assertStrMatches(out, ".*tokens=1 mode=dual[^\n]-1%.010x[^\n]- SAME.*")
    lu.assertStrContains(out, "verdicts: 1 SAME, 0 FASTER, 2 SLOWER, 0 UNSURE")
    lu.assertStrContains(out, "commit: abc -> def")
    lu.assertStrContains(out, "command: nil -> workbench slow.lua")
    local back = run(b, a)
    lu.assertStrMatches(back, ".*tokens=1 mode=eager[^\n]-0%.769x[^\n]- FASTER.*")
    lu.assertStrContains(back, "verdicts: 1 SAME, 2 FASTER, 0 SLOWER, 0 UNSURE")
    -- one line per row by default; every metric with --verbose
    lu.assertNotStrContains(out, "gflops")
    local p = io.popen(string.format("%s compare --verbose '%s' '%s' 2>&1", EXE, a, b))
    local verbose = p:read("a")
    p:close()
    lu.assertStrMatches(verbose, ".*gflops%s+33%.33%s+25%.64%s+0%.769x.*")
    -- CI gating
    local _, gate_err, gate = run("--fail-on-slower 20 " .. a, b)
    lu.assertEquals(gate, 1)
    lu.assertStrContains(gate_err, "30.0% slower (more than --fail-on-slower 20)")
    local _, _, lenient = run("--fail-on-slower 40 " .. a, b)
    lu.assertEquals(lenient, 0)
end

-- Runs whose environments differ (a forced WB_GEMM_BLOCKING made a 2.4x regression that the
-- commits were blamed for): one line names each variable, A's value first; the other fingerprint
-- differences stay where they were, without the env_ fields; a file from before environments were
-- recorded is named as such.
function TestCompare:test_environment_differences_are_named()
    local fp = {cpu = "X", threads = 2, commit = "abc", environment = "WB_* OMP_*", env_WB_DEVICE = "cpu",
        env_WB_GEMM_BLOCKING = "40,24,64", env_OMP_WAIT_POLICY = "passive"}
    local a = write(doc({row(1, "eager", 2.4)}, fp))
    local b = write(doc({row(1, "eager", 1)}, {cpu = "X", threads = 2, commit = "abc", environment = "WB_* OMP_*",
        env_WB_DEVICE = "cpu", env_OMP_WAIT_POLICY = "active"}))
    local out, err, code = run(a, b)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "\nenvironment differs: OMP_WAIT_POLICY=passive vs active; " ..
        "WB_GEMM_BLOCKING=40,24,64 vs unset\n")
    lu.assertStrContains(out, "fingerprint differences: none")
    lu.assertNotStrContains(out, "env_")
    lu.assertStrContains((run(b, a)), "WB_GEMM_BLOCKING unset vs 40,24,64")
    lu.assertStrContains((run(a, a)), "\nenvironment differences: none\n")
    local old = write(doc({row(1, "eager", 2.4)}))
    lu.assertStrContains((run(old, a)),
        "\nenvironment: not recorded in A (a results file from before the workbench recorded it)\n")
    lu.assertStrContains((run(old, old)), "environment: not recorded in either file")
end

function TestCompare:test_a_large_change_without_evidence_is_unsure()
    local a = write(doc({row(1, "eager", 3, 0.02, {samples_ms = {3, 2.9}})}))
    local b = write(doc({row(1, "eager", 4, 0.02, {samples_ms = {4, 4.1}})}))
    local out, err, code = run(a, b)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "UNSURE")
end

-- Many samples make the rank test's p tiny for any shift, but a run's samples are not independent
-- draws: a change smaller than the rows' own noise (IQR / median) is UNSURE, whatever p says; the
-- same change on quiet rows is SLOWER.
function TestCompare:test_a_change_within_the_noise_is_unsure()
    local function noisy(median, rel) return row(1, "eager", median, rel, {samples_ms = samples(median, rel, 400)}) end
    local out, err, code = run(write(doc({noisy(3, 0.4)})), write(doc({noisy(3.45, 0.4)})))
    lu.assertEquals(code, 0, err)
    lu.assertStrMatches(out, ".*tokens=1 mode=eager[^\n]-1%.150x%s+%d[^\n]-UNSURE %(within the noise, %d+%%%).*")
    local p = tonumber(out:match("1%.150x%s+([%d.e%-]+)"))
    lu.assertTrue(p and p < 1e-6, "the rank test alone would call it: p = " .. tostring(p))
    local quiet = run(write(doc({noisy(3, 0.04)})), write(doc({noisy(3.45, 0.04)})))
    lu.assertStrMatches(quiet, ".*tokens=1 mode=eager[^\n]-1%.150x[^\n]- SLOWER\n.*")
end

-- The text fits 120 columns (issue 47): a row whose flags do not fit carries them on the next
-- line, the verdicts' rule wraps, and a long fingerprint value (a command line) is one side a line.
function TestCompare:test_the_text_fits_120_columns()
    local long = "/some/checkout/build/workbench /some/checkout/experiments/mlp_sweep.lua --tokens 1,16,128,512 " ..
        "--dim 768 --hidden 3072 --rounds 3 --max-rounds 10 --no-peer --out out/mlp_sweep/run-"
    local a = write(doc({row(1, "eager", 3, 0.3, {unstable = true}), row(16, "fused_mlp", 9, 0.02)},
        {cpu = "X", threads = 2, commit = "abc", command = long .. "a"}))
    local b = write(doc({row(1, "eager", 3.2, 0.3, {unstable = true}), row(16, "fused_mlp", 9, 0.02)},
        {cpu = "X", threads = 2, commit = "abc", command = long .. "b"}))
    local out, err, code = run(a, b)
    lu.assertEquals(code, 0, err)
    for line in out:gmatch("[^\n]+") do
        if not line:match("^[AB]: /") then -- the files' own paths, as long as the scratch folder's
            lu.assertTrue(#line <= 120, #line .. " columns: " .. line)
        end
    end
    lu.assertStrMatches(out, ".*\ntokens=1 mode=eager [^\n]*UNSURE\n +%(A unstable, B unstable, within the " ..
        "noise, %d+%%%)\n.*")
    lu.assertStrContains(out, "\n  command:\n    A: " .. long:sub(1, 60))
    lu.assertStrContains(out, "run-a\n    B: ")
end

function TestCompare:test_older_files_fall_back_to_the_recorded_spread()
    local old = doc({{tokens = 1, mode = "eager", median_ms = 10, p10_ms = 9.9, p90_ms = 10.1},
        {tokens = 16, mode = "eager", median_ms = 20, p10_ms = 10, p90_ms = 30}})
    local new = doc({{tokens = 1, mode = "eager", median_ms = 13, p10_ms = 12.9, p90_ms = 13.1},
        {tokens = 16, mode = "eager", median_ms = 26, p10_ms = 16, p90_ms = 36}})
    local out, err, code = run(write(old), write(new))
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "A and B has no raw samples")
    lu.assertStrMatches(out, ".*tokens=1 mode=eager[^\n]-SLOWER.*")
    lu.assertStrMatches(out, ".*tokens=16 mode=eager[^\n]-UNSURE.*") -- the spreads overlap
end

function TestCompare:test_mismatched_configs_are_not_comparable()
    local base = doc({row(1, "eager", 3)})
    base.config = {dim = 768, hidden = 3072, dtype = "f32"}
    local bf16 = doc({row(1, "eager", 3)})
    bf16.config = {dim = 768, hidden = 3072, dtype = "bf16"}
    local _, err, code = run(write(base), write(bf16))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "not comparable: dtype differs (A f32, B bf16)")
    -- threads in the fingerprint: a config too, unless ignored on purpose
    local one = doc({row(1, "eager", 3)}, {cpu = "X", threads = 1, commit = "abc"})
    one.config = base.config
    _, err, code = run(write(base), write(one))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "not comparable: threads differs (A 2, B 1); pass --ignore threads")
    local out
    out, err, code = run("--ignore threads " .. write(base), write(one))
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "SAME")
    -- a config column in the rows whose values never meet
    local small = doc({row(1, "eager", 3, 0.02, {dim = 64})})
    small.columns[#small.columns + 1] = "dim"
    local big = doc({row(1, "eager", 3, 0.02, {dim = 768})})
    big.columns[#big.columns + 1] = "dim"
    _, err, code = run(write(small), write(big))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "not comparable: no row of A matches a row of B; the config columns differ: dim (A 64, B 768)")
    -- results of two different experiments
    local other = doc({row(1, "eager", 3)})
    other.name = "gemm_bench"
    _, err, code = run(write(doc({row(1, "eager", 3)})), write(other))
    lu.assertEquals(code, 2)
    lu.assertStrMatches(err, ".*not comparable: .- holds results of sweep, .- of gemm_bench.*")
    -- a name of 30 MB was echoed whole into that one line; now cut, with its length
    local huge = doc({row(1, "eager", 3)})
    huge.name = string.rep("n", 30000000)
    _, err, code = run(write(doc({row(1, "eager", 3)})), write(huge))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, string.rep("n", 80) .. "... (30000000 characters)")
    lu.assertTrue(#err < 2000, "the message is " .. #err .. " bytes long")
end

-- A config value that is a table (a shape) is compared by value, not by its address: a file
-- against itself used to be "not comparable: shape differs (A table: 0x..., B table: 0x...)".
function TestCompare:test_table_config_values_compare_by_value()
    local a = doc({row(1, "eager", 3)})
    a.config = {shape = {1, 2}}
    local b = doc({row(1, "eager", 3)})
    b.config = {shape = {1, 3}}
    local out, err, code = run(write(a), write(a))
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "verdicts: 1 SAME")
    _, err, code = run(write(a), write(b))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "not comparable: shape differs (A {1, 2}, B {1, 3})")
end

-- Two rows of one file with the same config cannot be paired: the last one used to win, so a
-- file against itself showed its first row 3x slower.
function TestCompare:test_rows_with_the_same_config_are_refused()
    local path = write(doc({row(1, "eager", 3), row(1, "eager", 9)}))
    local _, err, code = run(path, path)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, path .. ": rows 1 and 2 have the same config (tokens=1 mode=eager)")
end

function TestCompare:test_malformed_input()
    local good = write(doc({}))
    local _, err, code = run("/nonexistent/a.json", good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "workbench compare: cannot read /nonexistent/a.json")
    -- a folder opens for reading; its read fails: named, not an error inside compare.lua
    _, err, code = run("/tmp", good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "workbench compare: cannot read /tmp: Is a directory")
    _, err, code = run(write("{\"rows\": [1, "), good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "is not valid JSON, it looks truncated")
    _, err, code = run(write({hello = "world"}), good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "is not a workbench results file")
    _, err, code = run(write({columns = {}, rows = {1}}), good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "row 1 is not an object")
    _, err, code = run("--fail-on-slower lots " .. good, good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "--fail-on-slower takes a percentage from 0 to 1000, got lots")
    _, err, code = run("--frobnicate " .. good, good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "unknown option --frobnicate")
    local p = io.popen(EXE .. " compare only_one.json 2>&1")
    local out = p:read("a")
    local _, _, c = p:close()
    lu.assertEquals(c, 2)
    lu.assertStrContains(out, "usage: workbench compare [--json] [--verbose]")
    -- --help is an answer, not an unknown option
    p = io.popen(EXE .. " compare --help 2>&1")
    out = p:read("a")
    _, _, c = p:close()
    lu.assertEquals(c, 0)
    lu.assertStrContains(out, "usage: workbench compare [--json] [--verbose]")
    lu.assertStrContains(out, "--fail-on-slower PCT  exit with status 1")
    lu.assertNotStrContains(out, "unknown option")
end

function TestCompare:test_two_runs_of_the_same_script()
    local dir = scratch.path("_runs")
    local sweep = scratch.source() .. "/experiments/mlp_sweep.lua"
    for _, run in ipairs({"a", "b"}) do
        local p = io.popen(string.format("%s %s --tokens 1,4 --modes eager,dual --dim 32 --hidden 64 --rounds 1 --max-rounds 1 " ..
            "--iters 3 --no-peer --out %s/%s 2>&1", EXE, sweep, dir, run))
        local out = p:read("a")
        local _, _, code = p:close()
        lu.assertEquals(code, 0, out)
    end
    local out, err, code = run(dir .. "/a/mlp_sweep.json", dir .. "/b/mlp_sweep.json")
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "rows aligned on: tokens, mode")
    lu.assertStrMatches(out, ".*tokens=4 mode=dual[^\n]-x[^\n]- ([A-Z]+).*")
    lu.assertStrContains(out, "verdicts: ")
    lu.assertStrContains(out, "structural differences: none")
    lu.assertNotStrContains(out, "no raw samples")
    -- a real run against itself: every row SAME
    local self_out, self_err, self_code = run(dir .. "/a/mlp_sweep.json", dir .. "/a/mlp_sweep.json")
    lu.assertEquals(self_code, 0, self_err)
    os.execute("rm -rf '" .. dir .. "'")
    lu.assertStrContains(self_out, "verdicts: 4 SAME, 0 FASTER, 0 SLOWER, 0 UNSURE")
end

-- Rounds of very unequal sizes, one slow (A's first round: 72 samples at twice the time, then
-- two rounds of 10): the medians shown, the ratio and the verdict come from one statistic (each
-- row's median of its rounds' medians, rounds weighing alike), so on every row, in the text and
-- in --json, B/A is the ratio of the medians printed and the verdict points the ratio's way.
-- (The pooled median of A, 72 slow samples of 92, used to call a 3% slower row 0.57x FASTER.)
local function rounds_row(tokens, mode, levels, counts)
    local s = {}
    for r, n in ipairs(counts) do
        for i = 1, n do s[#s + 1] = levels[r] * (1 + 0.01 * (((i * 7) % 11) - 5) / 5) end
    end
    local sum = require("wb.stats").summarize(s)
    return {tokens = tokens, mode = mode, median_ms = sum.median, p10_ms = sum.p10, p90_ms = sum.p90, kernels = 5,
        samples_ms = s, samples_ms_per_round = counts}
end

function TestCompare:test_unequal_rounds_one_slow_agree_on_every_row()
    local slow = {72, 10, 10}
    local a = doc({rounds_row(128, "eager", {10.6, 5.281, 5.29}, slow), rounds_row(128, "dual", {4.4, 4, 4}, slow),
        rounds_row(1, "eager", {1.1, 1, 1}, slow), rounds_row(16, "eager", {6, 3, 3}, slow)})
    local b = doc({rounds_row(128, "eager", {5.44, 5.441, 5.45}, {10, 10, 10}),
        rounds_row(128, "dual", {3.0, 3.01, 2.99}, {10, 10, 10}),
        rounds_row(1, "eager", {1.5, 1.51, 1.49}, {10, 10, 10}),
        rounds_row(16, "eager", {3.6, 3.0, 3.3}, {10, 10, 12})})
    local pa, pb = write(a), write(b)
    local out, err, code = run(pa, pb)
    lu.assertEquals(code, 0, err)
    local js, jerr, jcode = scratch.run_split(string.format("%s compare --json '%s' '%s'", EXE, pa, pb))
    lu.assertEquals(jcode, 0, jerr)
    local j = cjson.decode(js)
    lu.assertEquals(#j.rows, 4)
    local want = {["tokens=128 mode=eager"] = "SAME", ["tokens=128 mode=dual"] = "FASTER",
        ["tokens=1 mode=eager"] = "SLOWER", ["tokens=16 mode=eager"] = "UNSURE"}
    local stats = require("wb.stats")
    for _, r in ipairs(j.rows) do
        -- the statistic: each side's median of its rounds' medians
        local ra, rb
        for _, x in ipairs(a.rows) do if "tokens=" .. x.tokens .. " mode=" .. x.mode == r.row then ra = x end end
        for _, x in ipairs(b.rows) do if "tokens=" .. x.tokens .. " mode=" .. x.mode == r.row then rb = x end end
        local function of(x)
            local per = {}
            for k, part in ipairs(stats.split_rounds(x.samples_ms, x.samples_ms_per_round)) do
                per[k] = stats.summarize(part).median
            end
            return stats.summarize(per).median
        end
        lu.assertAlmostEquals(r.a, of(ra), 1e-12, r.row)
        lu.assertAlmostEquals(r.b, of(rb), 1e-12, r.row)
        lu.assertAlmostEquals(r.ratio, r.b / r.a, 1e-12, r.row)
        lu.assertEquals(r.rounds_a, 3)
        lu.assertEquals(r.verdict, want[r.row], r.row)
        -- the verdict agrees with the ratio shown
        if r.verdict == "FASTER" then lu.assertTrue(r.ratio < 1 / 1.05, r.row) end
        if r.verdict == "SLOWER" then lu.assertTrue(r.ratio > 1.05, r.row) end
        if r.verdict == "SAME" then lu.assertTrue(math.abs(math.log(r.ratio)) < math.log(1.05), r.row) end
        -- the text prints the same medians, ratio and verdict
        local line = out:match("\n(" .. r.row:gsub("%p", "%%%0") .. " [^\n]*)")
        lu.assertNotNil(line, r.row)
        local ma, mb, ratio, verdict = line:match("^%S+ %S+%s+(%S+) ms%s+(%S+)%s+(%S+)x%s+%S+%s+(%u+)")
        lu.assertAlmostEquals(tonumber(ma), r.a, r.a * 1e-3, line)
        lu.assertAlmostEquals(tonumber(mb), r.b, r.b * 1e-3, line)
        lu.assertEquals(ratio, string.format("%.3f", r.ratio), line)
        lu.assertAlmostEquals(tonumber(ratio), tonumber(mb) / tonumber(ma), 2e-3, line)
        lu.assertEquals(verdict, r.verdict, line)
    end
    -- the issue's row: A 5.29 (its first round 10.6 ms, 72 samples), B 5.441: 1.03x, SAME, not FASTER
    lu.assertStrMatches(out, ".*\ntokens=128 mode=eager +5%.2%d+ ms +5%.4%d+ +1%.0[23]%dx +%S+ +SAME.*")
    lu.assertStrMatches(out, ".*\ntokens=16 mode=eager [^\n]*UNSURE %(within the noise, %d+%%%).*")
    lu.assertStrContains(out, "each row's median of its rounds' medians")
    lu.assertStrContains(j.a.path, pa)
    lu.assertEquals(j.verdicts, {SAME = 1, FASTER = 1, SLOWER = 1, UNSURE = 1})
end

-- --json: one object on stdout (errors too), the same exit statuses; empty lists stay lists
function TestCompare:test_json_output_and_errors()
    local a = write(doc({row(1, "eager", 3), row(16, "eager", 9)}))
    local b = write(doc({row(1, "eager", 3.6), row(16, "eager", 9)}))
    local out, err, code = scratch.run_split(string.format("%s compare --json '%s' '%s'", EXE, a, b))
    lu.assertEquals(code, 0, err)
    lu.assertEquals(err, "")
    local j = cjson.decode(out)
    lu.assertEquals(j.aligned_on, {"tokens", "mode"})
    lu.assertEquals(j.rows[1].verdict, "SLOWER")
    lu.assertEquals(j.rows[2].verdict, "SAME")
    lu.assertStrContains(out, '"only_in_a":[]')
    lu.assertEquals(j.status, 0)
    out, err, code = scratch.run_split(string.format("%s compare --json --fail-on-slower 5 '%s' '%s'", EXE, a, b))
    lu.assertEquals(code, 1, err)
    j = cjson.decode(out)
    lu.assertEquals(j.status, 1)
    lu.assertStrContains(j.failure, "a row is 20.0% slower (more than --fail-on-slower 5)")
    for _, case in ipairs({{"'" .. a .. "' /nonexistent/b.json", "cannot read /nonexistent/b.json"},
        {"--bogus '" .. a .. "' '" .. b .. "'", "unknown option --bogus"}, {"'" .. a .. "'", "expected two " ..
            "results files"}}) do
        out, err, code = scratch.run_split(string.format("%s compare %s --json", EXE, case[1]))
        lu.assertEquals(code, 2, out .. err)
        lu.assertEquals(err, "")
        j = cjson.decode(out)
        lu.assertStrContains(j.error, case[2])
        lu.assertEquals(j.status, 2)
    end
end

-- A file a Ctrl-C left partial is named as such, in the text and in --json
function TestCompare:test_partial_files_are_named()
    local d = doc({row(1, "eager", 3, 0.02, {partial = true})})
    d.partial = {rounds_completed = 2, rounds = 3, reason = "interrupted (Ctrl-C)"}
    local a, b = write(d), write(doc({row(1, "eager", 3)}))
    local out, err, code = run(a, b)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "note: A holds partial results: interrupted (Ctrl-C) after 2 of 3 rounds")
    lu.assertNotStrContains(out, "note: B holds")
    local js = scratch.run_split(string.format("%s compare --json '%s' '%s'", EXE, b, a))
    local j = cjson.decode(js)
    lu.assertNil(j.a.partial)
    lu.assertEquals(j.b.partial, "partial results: interrupted (Ctrl-C) after 2 of 3 rounds")
end

-- A median of 0 in A (an elided copy, a time below the timer's step) has no ratio: "from 0" in the
-- text, null in --json (which must still be JSON), and slower from 0 fails any --fail-on-slower
function TestCompare:test_a_zero_median_has_no_ratio()
    local a = write(doc({row(1, "elided", 0, 0, {gflops = 0}), row(1, "eager", 3)}))
    local b = write(doc({row(1, "elided", 0.5), row(1, "eager", 3)}))
    local out, err, code = run(a, b)
    lu.assertEquals(code, 0, err)
    lu.assertStrMatches(out, ".*\ntokens=1 mode=elided +0 ms +0%.5 +from 0 +[%d.e-]+ +SLOWER\n.*")
    lu.assertNotStrContains(out, "inf")
    local js, jerr, jcode = scratch.run_split(string.format("%s compare --json --fail-on-slower 50 '%s' '%s'", EXE,
        a, b))
    lu.assertEquals(jcode, 1, jerr)
    local j = cjson.decode(js)
    lu.assertEquals(j.rows[1].ratio, cjson.null)
    lu.assertEquals(j.rows[1].verdict, "SLOWER")
    lu.assertEquals(j.rows[2].ratio, 1)
    lu.assertEquals(j.worst_slower_pct, cjson.null)
    lu.assertStrContains(j.failure, "a row is slower from 0 in A (more than any --fail-on-slower, 50 here)")
    -- both 0: the same
    out, err, code = run(a, a)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "verdicts: 2 SAME")
end

-- Input anyone may hand over: every problem is exit 2 with one line naming the file and the
-- place, never a verdict from a NaN, never an internal Lua error, never a raw escape sequence.
TestCompareValidates = {}

-- the JSON text of a good file with `from` replaced by `to` (NaN and Infinity cannot be encoded)
local function edited(from, to)
    local text = cjson.encode(doc({row(1, "eager", 3), row(16, "eager", 9)}))
    local patched, n = text:gsub(from, to, 1)
    assert(n == 1, "the pattern " .. from .. " is not in the document")
    return write(patched)
end

local function refused(a, b, fragment)
    local out, err, code = run(a, b)
    lu.assertEquals(code, 2, out .. err)
    lu.assertStrContains(err, fragment)
    lu.assertEquals(select(2, err:gsub("\n", "")), 1, "one line: " .. err)
    lu.assertStrContains(err, a) -- names the file
    lu.assertNotStrContains(err, "compare.lua")
    return err
end

function TestCompareValidates:test_numbers_must_be_finite()
    local good = write(doc({row(1, "eager", 3), row(16, "eager", 9)}))
    refused(edited('"median_ms":3', '"median_ms":NaN'), good, "row 1, median_ms: nan is not a finite number")
    refused(edited('"median_ms":3', '"median_ms":Infinity'), good, "row 1, median_ms: inf is not a finite number")
    refused(edited('"median_ms":9', '"median_ms":1e400'), good, "row 2, median_ms: inf is not a finite number")
    refused(edited('"gflops":[%d.e+-]+', '"gflops":-1e999'), good, "row 1, gflops: -inf is not a finite number")
    refused(edited('"samples_ms":%[[%d.e+-]+', '"samples_ms":[NaN'), good, "row 1, samples_ms[1]: nan, expected a finite number")
    refused(edited('"threads":2', '"threads":1e400'), good, "fingerprint.threads: inf is not a finite number")
end

function TestCompareValidates:test_numbers_stored_as_strings_are_named()
    local good = write(doc({row(1, "eager", 3), row(16, "eager", 9)}))
    refused(edited('"median_ms":3', '"median_ms":"3"'), good,
        'row 1, median_ms: the string "3", expected a number (a number stored as a string is not compared)')
    refused(edited('"kernels":5', '"kernels":"5"'), good,
        'row 1, kernels: the string "5", but row 2 holds a number there (a number stored as a string is not compared)')
end

function TestCompareValidates:test_the_document_shape()
    local good = write(doc({row(1, "eager", 3)}))
    local rows_object = doc({})
    rows_object.rows = {first = row(1, "eager", 3), second = row(16, "eager", 9)}
    refused(write(rows_object), good, "rows must be an array of objects, got an object")
    refused(write({name = "sweep", columns = {"tokens", 7, {}}, rows = {}}), good, "column 2 must be a name (a string), got 7")
    refused(write({name = "sweep", columns = {tokens = 1}, rows = {}}), good, "columns must be an array of names, got an object")
    refused(write({name = {1}, columns = {}, rows = {}}), good, "name must be a string, got an array")
    refused(write({name = "sweep", columns = {}, rows = {}, fingerprint = "x"}), good, 'fingerprint must be an object, got the string "x"')
    refused(write({name = "sweep", columns = {}, rows = {}, keys = {"tokens", 3}}), good, "keys[2] must be a column name, got 3")
    refused(write(doc({row(1, {"eager"}, 3)})), good, 'row 1, mode[1]: the string "eager", expected a finite number')
    refused(write(doc({row(1, {kind = "eager"}, 3)})), good,
        "row 1, mode: an object where a single value or an array of numbers belongs")
    refused(write(doc({row(1, "eager", 3), {1, 2}})), good, "row 2 is not an object")
    -- the second file is checked as well, and named
    local _, err, code = run(good, write(doc({row(1, "eager", 3, nil, {p10_ms = "fast"})})))
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, 'p10_ms: the string "fast", expected a number')
end

-- Any array of numbers is samples, whatever its name: the main job's rows carry the peer's
-- torch_samples_ms and samples_ms_per_round beside samples_ms.
function TestCompareValidates:test_arrays_of_numbers_in_any_column_are_read()
    local a = write(doc({row(1, "eager", 3, nil, {torch_samples_ms = {1, 2, 3}, samples_ms_per_round = {20, 20}}),
        row(16, "eager", 9, nil, {torch_samples_ms = {4, 5}})}))
    local out, err, code = run(a, a)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "verdicts: 2 SAME, 0 FASTER, 0 SLOWER, 0 UNSURE")
    refused(write(doc({row(1, "eager", 3, nil, {torch_samples_ms = {1, "2"}})})), a,
        'row 1, torch_samples_ms[2]: the string "2", expected a finite number')
end

-- A row's name longer than string.format's 99-character width used to stop compare with a Lua error.
function TestCompareValidates:test_a_long_row_name_is_printed_whole()
    local long = string.rep("x", 120)
    local a = write(doc({row(1, long, 3)}))
    local out, err, code = run("--verbose " .. a, a)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "mode=" .. long .. "  ")
end

function TestCompareValidates:test_control_characters_are_escaped_in_what_it_prints()
    local a = write(doc({row(1, "eager\27[2J\27]0;owned\7", 3)}, {cpu = "X\27[31m", threads = 2, commit = "abc"}))
    local b = write(doc({row(1, "eager\27[2J\27]0;owned\7", 3)}, {cpu = "Y\r", threads = 2, commit = "abc"}))
    local out, err, code = run(a, b)
    lu.assertEquals(code, 0, err)
    lu.assertNotStrContains(out, "\27")
    lu.assertNotStrContains(out, "\7")
    lu.assertNotStrContains(out, "\r")
    lu.assertStrContains(out, "mode=eager\\027[2J\\027]0;owned\\007")
    lu.assertStrContains(out, "cpu: X\\027[31m -> Y\\013")
    -- and in its messages
    local c = write({name = "a\27[31mb", columns = {}, rows = {}})
    _, err, code = run(c, a)
    lu.assertEquals(code, 2)
    lu.assertNotStrContains(err, "\27")
    lu.assertStrContains(err, "a\\027[31mb")
end

scratch.exit(lu.LuaUnit.run())
