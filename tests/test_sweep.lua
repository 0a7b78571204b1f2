-- test_sweep.lua: experiments/mlp_sweep.lua run as a user runs it: bad options get clear
-- errors, and the peer (PyTorch, here a stand-in with known samples) is timed once per round
-- and compared against the same medians the table prints.
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")

local EXE = scratch.exe()
local SRC = scratch.source()
local SWEEP = SRC .. "/experiments/mlp_sweep.lua"
-- (oneDNN's column has its own tests, in test_peers.lua: these look at PyTorch's and the sweep's)
local SMALL = "--tokens 1,4 --dim 32 --hidden 64 --iters 2 --modes eager,dual --no-dnnl"

local function sweep(args, env)
    local p = io.popen(string.format("%s %s %s %s 2>&1", env or "", EXE, SWEEP, args))
    local out = p:read("a")
    local _, _, code = p:close()
    return out, code
end

-- The rows mlp_sweep.lua saved under dir, after checking how many there are.
local function saved_rows(dir, count)
    local f = assert(io.open(dir .. "/mlp_sweep.json"))
    local data = cjson.decode(f:read("a"))
    f:close()
    lu.assertEquals(#data.rows, count)
    return data.rows
end

TestSweep = {}

function TestSweep:test_bad_options_are_named()
    local cases = {
        {"--modes eager,warp", "--modes 'warp': expected a comma-separated list of eager, fused, dual, fused_mlp, compiled, graph"},
        {"--tokens 1,0", "--tokens '0': expected whole numbers from 1 to 65536"},
        {"--tokens 1,x", "--tokens 'x': expected whole numbers from 1 to 65536"},
        {"--dim 0", "--dim '0': expected a whole number from 1 to 65536"},
        {"--iters 0", "--iters '0': expected a whole number from 1 to 100000"},
        {"--dtype f64", "argument for option '--dtype' must be one of 'f32', 'bf16'"},
        {"--device tpu", "argument for option '--device' must be one of 'cpu', 'cuda'"},
        {"--bogus 1", "unknown option '--bogus'"},
    }
    for _, c in ipairs(cases) do
        local out, code = sweep(c[1] .. " --no-peer --out " .. scratch.dir())
        lu.assertEquals(code, 2, c[1] .. ": a bad argument exits 2")
        lu.assertStrContains(out:match("^[^\n]*"), c[2]) -- the first line names the problem
    end
end

function TestSweep:test_peer_runs_once_per_round_and_its_median_is_compared()
    local dir, log = scratch.dir(), scratch.path(".log")
    local peer = string.format("'%s' '%s/tests/fake_peer.lua'", EXE, SRC)
    local out, code = sweep(SMALL .. " --rounds 2 --max-rounds 2 --trace-tokens 4 --peer \"" .. peer .. "\" " ..
        "--out " .. dir,
        "WB_FAKE_PEER_LOG=" .. log)
    lu.assertEquals(code, 0, out)
    local f = assert(io.open(log))
    local calls = {}
    for line in f:lines() do calls[#calls + 1] = line end
    f:close()
    os.remove(log)
    lu.assertEquals(#calls, 2, "one peer run per round")
    lu.assertStrContains(calls[1], "--tokens 1,4 --dim 32 --hidden 64 --threads ")
    -- timed by our modes' rule (--iters samples and 50 ms at least, a sample a batch of 2 ms), its
    -- OpenMP threads not spinning
    lu.assertStrContains(calls[1], "--dtype f32 --rounds 2 --min-time-ms 50 --min-sample-us 2000 OMP_WAIT_POLICY=passive")
    lu.assertStrContains(out, "round 2/2 done (and PyTorch's)")
    -- the footer and the report name the peer's version and BLAS; the table stays within 120 columns
    lu.assertStrContains(out, "\nPyTorch: PyTorch fake-1.0 (BLAS generic), timed after each round " ..
        "(OMP_WAIT_POLICY=passive)\n")
    for line in out:gmatch("[^\n]+") do
        -- (the lines naming files hold the scratch folder's path, as long as it is)
        if not line:find(dir, 1, true) then
            lu.assertTrue(#line <= 120, #line .. " columns: " .. line)
        end
    end
    -- the README shows the table's header line as the program prints it
    local readme = scratch.read(SRC .. "/README.md")
    local header = readme:match("\n(tokens mode [^\n]*)\n")
    lu.assertNotNil(header, "README.md shows no table header")
    lu.assertStrContains(out, "\n" .. header .. "\n")
    -- the peer is a row of the table, timed by the same rule: its rounds, its verdict against eager,
    -- and its noise flag (the samples 1, 2, 3 in every round: IQR / median 75%)
    lu.assertStrMatches(out, ".*\n4 +PyTorch +2%.000 +[%d.]+ +%S+ +[%d.]+ +%- +%- +2 +[%d.]+x " ..
        "%([%d.]+%-[%d.]+%) +%u+ " ..
        "unstable %(noise 75%%%)\n.*")
    local html = assert(io.open(dir .. "/mlp_sweep.html")):read("a")
    lu.assertStrContains(html, "PyTorch fake-1.0 (BLAS generic) timed after each round; its GEMMs ran on BLAS_INFO=generic")
    lu.assertNotStrContains(html, "Build settings") -- never the raw build string
    -- the report: three charts, the speedups' whiskers, links to the traces, one statistic said once
    lu.assertEquals(select(2, html:gsub("<figure>", "")), 3)
    lu.assertStrContains(html, "(interval ")
    lu.assertStrContains(html, "<a href='mlp_eager_tokens4.trace.json'>")
    lu.assertStrContains(html, "median_ms: the median of the rounds&#39; medians")
    for _, r in ipairs(saved_rows(dir, 4)) do
        lu.assertEquals(r.torch_ms, 2.0) -- the median of 1,2,3 twice
        lu.assertEquals(r.torch_samples_ms_per_round, {3, 3})
        lu.assertEquals(r.torch_noise, 0.75)
        lu.assertTrue(r.torch_unstable)
        lu.assertAlmostEquals(r.vs_torch, 2.0 / r.median_ms, 1e-9)
        lu.assertEquals(r.rounds, 2)
        lu.assertNotNil(r.torch_speedup_vs_eager_verdict)
        -- GB/s: the three weights, the input and the output (f32, dim 32, hidden 64)
        lu.assertEquals(r.bytes, 4 * (3 * 32 * 64 + 2 * r.tokens * 32))
        lu.assertAlmostEquals(r.gbs, r.bytes / r.median_ms * 1e-6, 1e-9)
        -- vs eager carries the rounds' own ratios (eager's round median over the mode's)
        lu.assertEquals(r.samples_ms_per_round and #r.samples_ms_per_round, 2)
        lu.assertEquals(r.speedup_vs_eager_rounds, 2)
        lu.assertTrue(r.speedup_vs_eager_lo <= r.speedup_vs_eager and r.speedup_vs_eager <= r.speedup_vs_eager_hi)
    end
    lu.assertStrContains(out, "vs eager: eager's median over the row's; in brackets the same ratio taken round " ..
        "by round")
    lu.assertStrMatches(out, ".*\ntokens +mode +median ms +GFLOP/s +%%peak +GB/s +kernels +host us +rounds +vs " ..
        "eager " ..
        "%(range%) +verdict\n.*")
    -- compare reads the main job's output as it is when the peer ran (torch_samples_ms is an array)
    local p = io.popen(string.format("%s compare '%s/mlp_sweep.json' '%s/mlp_sweep.json' 2>&1", EXE, dir, dir))
    local cmp = p:read("a")
    local _, _, ccode = p:close()
    lu.assertEquals(ccode, 0, cmp)
    lu.assertStrContains(cmp, "verdicts: 4 SAME")
    os.execute("rm -rf '" .. dir .. "'")
end

-- Ctrl-C during the rounds: one line, the rounds measured so far saved and marked partial, 130.
function TestSweep:test_ctrl_c_saves_the_points_measured_so_far()
    local dir, log = scratch.dir(), scratch.path(".log")
    local cmd = string.format("%s %s %s --rounds 1000 --no-peer --trace-tokens 4 --out %s", EXE, SWEEP, SMALL, dir)
    -- the shell waits for the second round's line, then sends SIGINT as a terminal's Ctrl-C does
    local p = io.popen(string.format([[%s >%s 2>&1 & pid=$!
i=0; until grep -q "round 2/1000 done" %s; do sleep 0.1; i=$((i+1)); [ $i -lt 600 ] || break; done
kill -INT $pid; wait $pid; echo "status=$?"]], cmd, log, log))
    local status = p:read("a")
    p:close()
    local out = assert(io.open(log)):read("a")
    os.remove(log)
    lu.assertStrContains(status, "status=130", out)
    lu.assertNotStrContains(out, "traceback")
    local last = out:match("([^\n]*)\n$")
    lu.assertStrMatches(last, "workbench: mlp_sweep: interrupted %(Ctrl%-C%) after %d+ of 1000 rounds; 4 of 4 points " ..
        "measured, saved as partial results: .*/mlp_sweep%.json %(and %.csv, %.html%)")
    lu.assertEquals(select(2, out:gsub("interrupted", "")), 1, out)
    local f = assert(io.open(dir .. "/mlp_sweep.json"))
    local doc = cjson.decode(f:read("a"))
    f:close()
    lu.assertEquals(doc.partial.rounds, 1000)
    lu.assertTrue(doc.partial.rounds_completed >= 2)
    lu.assertEquals(#doc.rows, 4)
    for _, r in ipairs(doc.rows) do
        lu.assertTrue(r.partial)
        lu.assertTrue(#r.samples_ms_per_round >= 2)
        lu.assertTrue(r.median_ms > 0)
    end
    -- merge does not take partial results for a whole run's
    local m = io.popen(string.format("%s merge %s/merged %s/mlp_sweep.json 2>&1", EXE, dir, dir))
    local merged = m:read("a")
    local _, _, mcode = m:close()
    lu.assertEquals(mcode, 2, merged)
    lu.assertStrMatches(merged, ".*mlp_sweep%.json holds partial results: its run was interrupted after %d+ of its " ..
        "1000 rounds, so it is not a whole shard; run that shard again\n$")
    -- the partial report: a banner first, and the sweep's charts drawn from the rows so far
    local html = scratch.read(dir .. "/mlp_sweep.html")
    lu.assertStrMatches(html, ".*<p class='partial' role='alert'><b>PARTIAL RESULTS</b>: interrupted %(Ctrl%-C%) " ..
        "after %d+ of 1000 rounds%..*")
    lu.assertTrue(html:find("class='partial'", 1, true) < html:find("<figure>", 1, true))
    -- latency and speedup (the roofline's kernels come from the profiles taken after the rounds)
    lu.assertEquals(select(2, html:gsub("<figure>", "")), 2)
    lu.assertStrContains(html, "Kernels on the roofline: no kernels to draw.")
    -- compare names it as partial
    local c = io.popen(string.format("%s compare %s/mlp_sweep.json %s/mlp_sweep.json 2>&1", EXE, dir, dir))
    local cmp = c:read("a")
    c:close()
    lu.assertStrMatches(cmp, ".*note: A holds partial results: interrupted %(Ctrl%-C%) after %d+ of 1000 rounds.*")
    os.execute("rm -rf '" .. dir .. "'")
end

-- Ctrl-C after the rounds, while finish runs (mlp_sweep profiles each point and writes traces
-- there): every round's samples are saved, marked partial, with the stage named; status 130.
function TestSweep:test_ctrl_c_while_finishing_saves_every_round()
    local dir, log = scratch.dir(), scratch.path(".log")
    local script = scratch.file(string.format([[
local s = wb.sweep{name = "slowfinish", rounds = 2, out = %q, axes = {{"size", {1, 2}}},
    measure = function(p, round) return {p.size * round, p.size * round + 1} end,
    finish = function(p, row)
        print("finishing " .. p.size); io.stdout:flush()
        while true do row.work = (row.work or 0) + 1 end -- until Ctrl-C
    end}
s:run()
print("not reached")
]], dir), ".lua")
    local p = io.popen(string.format([[%s %s >%s 2>&1 & pid=$!
i=0; until grep -q "finishing 1" %s; do sleep 0.1; i=$((i+1)); [ $i -lt 600 ] || break; done
kill -INT $pid; wait $pid; echo "status=$?"]], EXE, script, log, log))
    local status = p:read("a")
    p:close()
    local out = scratch.read(log)
    os.remove(log)
    lu.assertStrContains(status, "status=130", out)
    lu.assertNotStrContains(out, "traceback")
    lu.assertNotStrContains(out, "not reached")
    lu.assertStrMatches(out:match("([^\n]*)\n$"), "workbench: slowfinish: interrupted %(Ctrl%-C%) while finishing " ..
        "the rows, after 2 of 2 rounds; 2 of 2 points measured, saved as partial results: .*/slowfinish%.json " ..
        "%(and %.csv, %.html%)")
    local doc = cjson.decode(scratch.read(dir .. "/slowfinish.json"))
    lu.assertEquals(doc.partial, {rounds_completed = 2, rounds = 2,
        reason = "interrupted (Ctrl-C) while finishing the rows"})
    lu.assertEquals(#doc.rows, 2)
    for _, r in ipairs(doc.rows) do
        lu.assertTrue(r.partial)
        lu.assertEquals(#r.samples_ms_per_round, 2)
        lu.assertNil(r.work) -- finish's fields are not half-written into the saved rows
    end
    os.execute("rm -rf '" .. dir .. "'")
end

-- The peer names the BLAS it loaded ("BLAS_INFO=generic" only says torch calls libblas.so.3):
-- the column and the report say that, never the raw build string.
function TestSweep:test_the_peer_names_the_blas_it_ran_on()
    local dir, log = scratch.dir(), scratch.path(".log")
    local peer = string.format("'%s' '%s/tests/fake_peer.lua'", EXE, SRC)
    local blas = "OpenBLAS 0.3.21 (Cooperlake kernels) through libblas.so.3"
    local out, code = sweep(SMALL .. " --rounds 1 --max-rounds 1 --trace-tokens 4 --peer \"" .. peer .. "\" " ..
        "--out " .. dir,
        string.format("WB_FAKE_PEER_LOG=%s WB_FAKE_PEER_BLAS_LIBRARY='%s'", log, blas))
    os.remove(log)
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "\nPyTorch: PyTorch fake-1.0 (" .. blas .. ")")
    local html = assert(io.open(dir .. "/mlp_sweep.html")):read("a")
    lu.assertStrContains(html, "its GEMMs ran on " .. blas)
    lu.assertStrContains(html, ">PyTorch fake-1.0 (" .. blas .. ")</text>") -- the legend, whole
    lu.assertNotStrContains(html, "Build settings")
    lu.assertNotStrContains(html, "CXX_FLAGS")
    os.execute("rm -rf '" .. dir .. "'")
    -- and the peer's own finding, where python3 and Debian's libblas.so.3 (OpenBLAS) are installed
    local p = io.popen(string.format("cd '%s/experiments/peers' && python3 -c 'import ctypes; " ..
        "ctypes.CDLL(\"libblas.so.3\"); import torch_mlp; print(torch_mlp.blas_in_use())' 2>&1", SRC))
    local found = p:read("a")
    local ok = p:close()
    if ok and not found:match("^%s*$") then
        lu.assertStrMatches(found, "^OpenBLAS [%d.]+ %(%a[%w_]* kernels%) through libblas%.so%.3\n$")
    else
        print("(python3 with OpenBLAS's libblas.so.3 not found: the peer's own detection not checked: " .. found .. ")")
    end
end

function TestSweep:test_a_failing_peer_leaves_the_results_intact()
    local dir = scratch.dir()
    local out, code = sweep(SMALL .. " --rounds 1 --max-rounds 1 --trace-tokens 4 --peer false --out " .. dir)
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "(the --peer command printed no results: false)")
    lu.assertStrContains(out, "report: ")
    lu.assertNil(saved_rows(dir, 4)[1].vs_torch)
    os.execute("rm -rf '" .. dir .. "'")
end

function TestSweep:test_trace_tokens_outside_the_sweep_is_said()
    local dir = scratch.dir()
    local out, code = sweep(SMALL .. " --rounds 1 --max-rounds 1 --no-peer --out " .. dir)
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "traces: none (--trace-tokens 16 is not among the token counts)")
    os.execute("rm -rf '" .. dir .. "'")
end

-- The main table warns, under it, when a mode (all of them run eager's work with fewer kernels or
-- less host work) is measured SLOWER than eager, naming the mode, the token count and the ratio
-- with its range; a FASTER or SAME row is not named, and with none SLOWER there is no warning.
function TestSweep:test_a_mode_slower_than_eager_is_warned_about()
    local T = require("wb.mlp_table")
    local function row(mode, ms, verdict, ratio, lo, hi)
        return {tokens = 512, mode = mode, median_ms = ms, pct_peak = 50, gflops = 100, gbs = 1, kernels = 5,
            host_us = 10, rounds = 3, speedup_vs_eager = ratio, speedup_vs_eager_lo = lo, speedup_vs_eager_hi = hi,
            speedup_vs_eager_verdict = verdict, noise = 0.01, samples_ms = {ms}, samples_ms_per_round = {1}}
    end
    local function table_of(rows)
        local out, real = {}, print
        print = function(...) out[#out + 1] = table.concat({...}, "\t") end
        local ok, err = pcall(T.print, {run_tokens = {512}, peers = {}, info = {peak_gflops = 400, bandwidth_gbs = 80,
            calibrated = "calibrated"}, device = "cpu", rounds = 3, max_rounds = 10, torch = {}, dnnl = {},
            target_noise = 0.05}, {[512] = rows})
        print = real
        assert(ok, err)
        return table.concat(out, "\n"):gsub("\n  ", " ")
    end
    local text = table_of({row("eager", 10, "SAME", 1, 1, 1), row("graph", 10.8, "SLOWER", 0.926, 0.90, 0.95),
        row("dual", 8, "FASTER", 1.25, 1.2, 1.3)})
    lu.assertStrContains(text, "warning: measured SLOWER than eager")
    lu.assertStrContains(text, "graph at 512 tokens 0.93x (0.90-0.95)")
    lu.assertNotStrContains(text, "dual at 512")
    text = table_of({row("eager", 10, "SAME", 1, 1, 1), row("graph", 10.1, "SAME", 0.99, 0.97, 1.02)})
    lu.assertNotStrContains(text, "warning: measured SLOWER")
end

scratch.exit(lu.LuaUnit.run())
