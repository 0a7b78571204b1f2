-- test_cli.lua: the command line as the README documents it, run as a user would run it.
local lu = require("luaunit")
local scratch = require("scratch")

local EXE = scratch.exe()
local EXPERIMENTS = scratch.source() .. "/experiments"

-- Runs a shell command; returns stdout, stderr and the exit code.
local function run(args, stdin, env)
    local err = scratch.path(".err")
    local cmd = (env and env .. " " or "") .. EXE .. " " .. args .. " 2>" .. err
    if stdin then cmd = "cat " .. scratch.file(stdin) .. " | " .. cmd end
    local p = io.popen(cmd)
    local out = p:read("a")
    local _, _, code = p:close()
    local f = io.open(err)
    local e = f:read("a")
    f:close()
    os.remove(err)
    return out, e, code
end

TestCli = {}

-- The mock CUDA plugin beside the executable, or nil (said) where this build has none.
local function mock_plugin()
    local mock = EXE:gsub("[^/]*$", "") .. "libwb_cuda_mock.so"
    local f = io.open(mock)
    if not f then
        print("skipped: no " .. mock)
        return nil
    end
    f:close()
    return mock
end

function TestCli:test_statement_and_stride()
    local out, _, code = run([[-e "print(wb.tensor({{1,2},{3,4}}):t():stride()[1])"]])
    lu.assertEquals(out, "1\n")
    lu.assertEquals(code, 0)
end

function TestCli:test_script_from_stdin()
    local out, _, code = run("-", "print(1+1)\n")
    lu.assertEquals(out, "2\n")
    lu.assertEquals(code, 0)
    -- with no script and stdin not a terminal, stdin is the script too
    out = run("", "print(wb ~= nil)\n")
    lu.assertEquals(out, "true\n")
end

function TestCli:test_error_exits_nonzero_with_traceback()
    local _, err, code = run([[-e 'error("x")']])
    lu.assertNotEquals(code, 0)
    lu.assertStrContains(err, "x")
    lu.assertStrContains(err, "stack traceback")
    local script = scratch.file("local function f() local t = wb.zeros({2}):view({3}) end\nf()\n")
    _, err, code = run(script)
    lu.assertEquals(code, 1)
    lu.assertStrContains(err, "view: shape {3} (3 elements) is invalid for a tensor of 2 elements")
    lu.assertStrContains(err, "in local 'f'")
    _, err, code = run(scratch.file("this is not lua"))
    lu.assertEquals(code, 1)
    lu.assertStrContains(err, "syntax error")
    _, err, code = run("/nonexistent/script.lua")
    lu.assertEquals(code, 1)
    lu.assertStrContains(err, "cannot open /nonexistent/script.lua")
end

function TestCli:test_script_sees_arg_like_lua()
    local script = scratch.file("print(arg[0], arg[1], arg[2], #arg, select('#', ...), ...)\n")
    local out = run("--seed 3 " .. script .. " --tokens 1,128 x")
    lu.assertEquals(out, script .. "\t--tokens\t1,128\t3\t3\t--tokens\t1,128\tx\n")
    out = run("--threads 1 " .. script)
    lu.assertEquals(out, script .. "\tnil\tnil\t0\t0\n")
    out = run("-e 'print(arg[-1], arg[-2])' " .. script .. " a")
    lu.assertStrContains(out, "print(arg[-1], arg[-2])\t-e\n")
end

function TestCli:test_e_is_repeatable_and_runs_before_the_script()
    local script = scratch.file("print(X + 1)\n")
    local out = run("-e X=1 -e 'X=X*10' " .. script)
    lu.assertEquals(out, "11\n")
end

function TestCli:test_options_reach_the_script()
    local out = run([[--threads 1 --seed 9 --out /tmp/wbout --device cpu -e "print(wb.get_num_threads(), wb.initial_seed(), wb.options.out, wb.options.device, wb.default_device())"]])
    lu.assertEquals(out, "1\t9\t/tmp/wbout\tcpu\tcpu\n")
    out = run([[--device=auto --threads=2 -e "print(wb.options.device, wb.get_num_threads())"]])
    lu.assertEquals(out, "cpu\t2\n")
end

-- WB_CPU_ISA and WB_CPU_BF16 with a name that is no path: refused in one line naming the variable
-- (they were ignored, and the results file recorded the value as if it had run); a real path runs
function TestCli:test_cpu_path_variables_with_no_such_path_are_refused()
    for _, case in ipairs({{"WB_CPU_ISA=AVX2", "not a CPU path (scalar, avx2 or avx512)"},
        {"WB_CPU_ISA=avx9000", "not a CPU path (scalar, avx2 or avx512)"},
        {"WB_CPU_BF16=bogus", "not a bf16 path (auto, widen, emulated, avx2bf16 or avx512bf16)"}}) do
        local out, err, code = run([[-e "print('ran')"]], nil, case[1])
        lu.assertEquals(code, 2, case[1])
        lu.assertEquals(out, "")
        lu.assertEquals(err, "workbench: " .. case[1] .. ": " .. case[2] .. "\n")
    end
    local out, err, code = run([[-e "print(wb.cpu_isa(), wb.cpu_bf16())"]], nil,
        "WB_CPU_ISA=scalar WB_CPU_BF16=emulated")
    lu.assertEquals(code, 0, err)
    lu.assertEquals(out, "scalar\temulated\n")
end

-- OpenMP's default above the kernels' cap of 256 threads (a 384-thread Zen 5): the count a script
-- reads is one it can set back (it read 300, which set_num_threads refused)
function TestCli:test_default_threads_above_the_cap_read_as_the_cap()
    local out, err, code = run([[-e "print(wb.get_num_threads(), pcall(wb.set_num_threads, wb.get_num_threads()))"]],
        nil, "OMP_NUM_THREADS=300")
    lu.assertEquals(code, 0, err)
    lu.assertEquals(out, "256\ttrue\n")
end

-- WB_THREADS_ADAPT turns adaptation off with 0 and the words for it (only "0" did; "off" left it on)
function TestCli:test_threads_adapt_off_words()
    for _, v in ipairs({"0", "off", "OFF", "false", "no"}) do
        local out, err, code = run([[-e "print(wb.set_threads_adaptive(true))"]], nil, "WB_THREADS_ADAPT=" .. v)
        lu.assertEquals(code, 0, err)
        lu.assertEquals(out, "false\n", "WB_THREADS_ADAPT=" .. v)
    end
end

-- The default --help states is the one a script sees: out/<script>/<time>-<pid>, not nil; runs
-- started in the same second get folders of their own (they shared one, and one run's results
-- replaced the other's)
function TestCli:test_out_has_its_stated_default()
    local script = scratch.file("print(wb.options.out)\n", ".lua")
    local name = script:match("([^/]*)%.lua$")
    lu.assertStrMatches(run(script), "out/" .. name .. "/%d%d%d%d%d%d%d%d%-%d%d%d%d%d%d%-%d+\n")
    lu.assertStrMatches(run([[-e "print(wb.options.out)"]]), "out/repl/%d+%-%d+%-%d+\n")
    lu.assertStrContains(select(1, run("--help")) .. select(2, run("--help")),
        "wb.options.out (default: out/<script>/<timestamp>-<pid>)")
    local p = io.popen(string.format("for i in 1 2 3; do %s '%s' & done; wait", EXE, script))
    local seen, count = {}, 0
    for line in p:lines() do
        lu.assertNil(seen[line], "two runs share " .. line)
        seen[line], count = true, count + 1
    end
    p:close()
    lu.assertEquals(count, 3)
end

function TestCli:test_seed_makes_runs_repeat()
    local a = run([[--seed 123 -e "print(wb.randn({3}):tolist()[3])"]])
    local b = run([[--seed 123 -e "print(wb.randn({3}):tolist()[3])"]])
    local c = run([[--seed 124 -e "print(wb.randn({3}):tolist()[3])"]])
    lu.assertEquals(a, b)
    lu.assertNotEquals(a, c)
end

function TestCli:test_bad_options()
    local _, err, code
    if not wb.cuda.is_available() then -- with a GPU, --device cuda is a valid choice
        _, err, code = run("--device cuda -e 'print(1)'")
        lu.assertEquals(code, 1)
        lu.assertStrContains(err, "device 'cuda' is not available: ")
        -- auto falls back to the cpu, quietly
        local out
        out, err, code = run("--device auto -e 'print(wb.default_device())'")
        lu.assertEquals(code, 0)
        lu.assertStrContains(out, "cpu")
    end
    for _, bad in ipairs({"tpu", "gpu"}) do -- a bad option: status 2, as the README says
        _, err, code = run("--device " .. bad .. " -e 'print(1)'")
        lu.assertEquals(code, 2)
        lu.assertStrContains(err, "unknown device '" .. bad .. "'")
    end
    _, err, code = run("--threads 0 -e 'print(1)'")
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "--threads 0: expected a whole number from 1 to 256")
    _, err, code = run("--threads")
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "--threads needs a value")
    _, err, code = run("--seed -4 -e 'print(1)'")
    lu.assertEquals(code, 2)
    _, err, code = run("--frobnicate")
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "unknown option '--frobnicate'")
    _, err, code = run("-e")
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "-e needs a statement")
end

-- --device auto picks cuda when a plugin loads and reports a device: the mock plugin does
function TestCli:test_device_auto_with_the_mock_plugin()
    local mock = mock_plugin()
    if not mock then return end
    local out, err, code = run("--device auto -e 'print(wb.default_device(), wb.options.device)'", nil,
        "WB_CUDA_PLUGIN=" .. mock)
    lu.assertEquals(code, 0, err)
    lu.assertEquals(out, "cuda\tcuda\n")
    out, err, code = run("--device auto -e 'print(wb.default_device())'", nil, "WB_CUDA_PLUGIN=/nonexistent/plugin.so")
    lu.assertEquals(code, 0, err)
    lu.assertEquals(out, "cpu\n")
end

-- A script's own --device cuda on a machine that cannot run it (a plugin that is not there stands
-- for one here, GPU or not) is one line with the reason and status 1, as the workbench's own.
function TestCli:test_script_device_cuda_without_a_gpu_is_one_line()
    local no_plugin = "WB_CUDA_PLUGIN=/nonexistent/plugin.so"
    local _, err, code = run(EXPERIMENTS .. "/mlp_sweep.lua --device cuda", nil, no_plugin)
    lu.assertEquals(code, 1, err)
    lu.assertStrMatches(err, "mlp_sweep%.lua: %-%-device cuda: device 'cuda' is not available: [^\n]+\n")
    -- where cuda runs (the mock plugin), a mode it has no kernels for is a bad argument: one line, 2
    local mock = mock_plugin()
    if not mock then return end
    _, err, code = run(EXPERIMENTS .. "/mlp_sweep.lua --device cuda --mlp swiglu --tokens 1", nil,
        "WB_CUDA_PLUGIN=" .. mock)
    lu.assertEquals(code, 2, err)
    lu.assertEquals(err, "mlp_sweep.lua: --mlp swiglu runs on the cpu only (no cuda kernels for silu yet)\n")
end

-- A sweep that cannot fit in memory is refused before anything is allocated or written: with the
-- estimate and what is available, in well under 5 s (it used to swap for two minutes and be killed)
function TestCli:test_mlp_sweep_that_cannot_fit_is_refused_with_an_estimate()
    local out = scratch.path("-bomb")
    local t0 = wb.time_ns()
    local _, err, code = run(EXPERIMENTS .. "/mlp_sweep.lua --dim 65536 --hidden 262144 --no-peer --out " .. out)
    lu.assertTrue((wb.time_ns() - t0) / 1e9 < 5, "took more than 5 s")
    lu.assertEquals(code, 1, err)
    lu.assertStrMatches(err, "mlp_sweep%.lua: dim 65536, hidden 262144, f32, up to 512 tokens needs about [%d.]+ GiB " ..
        "of memory, and [%d.]+ GiB is available %([^)]+%): it would swap, then be stopped; try a smaller %-%-dim, " ..
        "%-%-hidden or %-%-tokens\n")
    local need = tonumber(err:match("needs about ([%d.]+) GiB"))
    lu.assertTrue(need > 768 and need < 800, err) -- 12 x 64 GiB of weights, and the activations
    lu.assertNil(io.open(out), "nothing written: " .. out)
end

-- A workbench option given after the script reaches the script's parser: one that does not know it
-- says where it goes, with the command that does it (the script's own options kept after it).
function TestCli:test_workbench_option_after_the_script_says_where_it_goes()
    local sweep = EXPERIMENTS .. "/mlp_sweep.lua"
    local _, err, code = run("--seed 3 " .. sweep .. " --tokens 1 --threads 2 --dim 64")
    lu.assertEquals(code, 2, err)
    lu.assertStrMatches(err, "mlp_sweep%.lua: unknown option '%-%-threads' %(a workbench option%): " ..
        "put it before the script: [^\n]*workbench'? %-%-seed 3 %-%-threads 2 '?[^\n ]*mlp_sweep%.lua'? " ..
        "%-%-tokens 1 %-%-dim 64\n")
    _, err, code = run(sweep .. " --sandbox")
    lu.assertEquals(code, 2, err)
    lu.assertStrContains(err, "unknown option '--sandbox' (a workbench option): put it before the script: ")
    lu.assertStrMatches(err, "[^\n]* %-%-sandbox '?[^\n ]*mlp_sweep%.lua'?\n")
    -- an option the script has is its own (fusion's --threads), a misspelt one gets argparse's answer
    _, err, code = run(EXPERIMENTS .. "/fusion.lua --threads 0")
    lu.assertEquals(code, 2, err)
    lu.assertNotStrContains(err, "workbench option")
    _, err, code = run(sweep .. " --threds 1")
    lu.assertEquals(code, 2, err)
    lu.assertEquals(err, "mlp_sweep.lua: unknown option '--threds' (see --help)\n")
end

-- Scripts whose argument errors do not go through wb.args yet, and why.
local NOT_YET_WB_ARGS = {}

-- Every experiment parses its arguments one way: --help lists its options, a bad argument is
-- one line naming it and status 2.
function TestCli:test_every_experiment_answers_help_and_refuses_bad_arguments()
    local dir = EXPERIMENTS
    local p = io.popen("ls " .. dir .. "/*.lua")
    local scripts = {}
    for path in p:lines() do scripts[#scripts + 1] = path end
    p:close()
    lu.assertTrue(#scripts >= 8, "experiments found: " .. #scripts)
    for _, path in ipairs(scripts) do
        local name = path:match("[^/]*$")
        local src = assert(io.open(path)):read("a")
        lu.assertNotNil(src:find('require("wb.args")', 1, true) or src:find('require("argparse")', 1, true),
            name .. " does not parse its arguments with lua-argparse (wb.args)")
        local out, err, code = run(path .. " --help")
        lu.assertEquals(code, 0, name .. " --help: " .. err)
        lu.assertStrContains(out, "Usage: " .. name, false, name)
        lu.assertStrContains(out, "-h, --help", false, name)
        -- every option the script declares is listed
        for opt in src:gmatch('parser:option%("(%-%-[%w-]+)"') do lu.assertStrContains(out, opt, false, name) end
        for opt in src:gmatch('parser:flag%("(%-%-[%w-]+)"') do lu.assertStrContains(out, opt, false, name) end
        out, err, code = run(path .. " --no-such-option 1")
        if NOT_YET_WB_ARGS[name] then -- refuses it, but as a script error (status 1, a traceback)
            lu.assertNotEquals(code, 0, name)
            lu.assertStrContains(err, "unknown option '--no-such-option'")
        else
            lu.assertEquals(code, 2, name .. " exited " .. tostring(code) .. " on a bad argument: " .. err)
            lu.assertEquals(out, "", name)
            lu.assertStrMatches(err, "[^\n]*unknown option '%-%-no%-such%-option'[^\n]*\n", nil, nil, name)
        end
    end
end

-- A script's arguments are pushed as `...`: 22 of them (mlp_sweep's shard test) overflowed the
-- 20 stack slots a C function is promised (LUA_USE_APICHECK in the sanitizer build's Lua), 300
-- wrote past the end of the stack (a crash in the Release build).
function TestCli:test_many_script_arguments()
    local script = scratch.file('print(select("#", ...), #arg, (...), select(300, ...), arg[300])')
    local words = {}
    for i = 1, 300 do words[i] = tostring(i) end
    local out, err, code = run(script .. " " .. table.concat(words, " "))
    lu.assertEquals(code, 0, err)
    lu.assertEquals(out, "300\t300\t1\t300\t300\n")
end

function TestCli:test_version_and_help()
    local out, _, code = run("--version")
    lu.assertEquals(code, 0)
    -- and where Lua comes from: the system's library, or its source built into this executable
    -- (the sanitizer build: with the sanitizers)
    local origin = not wb.build.lua_built_here and ", system library"
        or wb.build.sanitizers and " built from source with ASan%+UBSan" or " built from source"
    lu.assertStrMatches(out, "workbench %d+%.%d+%.%d+ %(commit [^,]+, Lua 5%.4%.?%d*" .. origin .. "%)\n")
    out, _, code = run("--help")
    lu.assertEquals(code, 0)
    for _, opt in ipairs({"-e STMT", "-i", "--device", "--threads", "--out", "--seed", "--version"}) do
        lu.assertStrContains(out, opt)
    end
end

function TestCli:test_repl_survives_errors()
    -- -i after the statements enters the REPL; stdin feeds it lines
    local out, err, code = run("-e 'x = 2' -i",
        "x + 1\nwb.zeros({2}):view({3})\nfor i = 1, 2 do\n  print(i)\nend\nreturn x * 10\nx = = 1\nprint(x)\n")
    lu.assertEquals(code, 0)
    lu.assertEquals(out, "3\n1\n2\n20\n2\n")
    lu.assertStrContains(err, "view: shape {3} (3 elements) is invalid for a tensor of 2 elements")
    lu.assertStrContains(err, "unexpected symbol near '='")
end

function TestCli:test_lua_libraries_available()
    local out = run([[-e "print(require('cjson').encode({1}), require('luaunit') ~= nil, require('wb') == wb)"]])
    lu.assertEquals(out, "[1]\ttrue\ttrue\n")
end

-- Runs gemm_bench with `options` into a scratch folder; returns its output and the rows it saved.
local function gemm_bench(options)
    local dir = scratch.path("-gemm_bench")
    local out, err, code = run(EXPERIMENTS .. "/gemm_bench.lua " .. options .. " --out " .. dir)
    lu.assertEquals(code, 0, err)
    local f = assert(io.open(dir .. "/gemm_bench.json"))
    local doc = require("cjson").decode(f:read("a"))
    f:close()
    os.execute("rm -rf '" .. dir .. "'")
    return out, doc.rows or doc
end

-- gemm_bench at toy sizes: every row alternates --rounds rounds, a row with a bar whose verdict
-- is not settled (3 rounds never settle one) goes on up to --max-rounds and no further, rows
-- without a bar stop at --rounds; the saved rows say so. A bad option names itself.
function TestCli:test_gemm_bench_rounds_follow_the_verdicts()
    local out, rows = gemm_bench("--sizes 96 --tokens 16,128 --threads 1 --layouts nn --rounds 2 --max-rounds 3 " ..
        "--bf16-size 64")
    lu.assertStrContains(out, "blocking: ")
    lu.assertStrContains(out, "95% interval")
    lu.assertTrue(#rows >= 6, "rows saved: " .. #rows)
    for _, r in ipairs(rows) do
        lu.assertTrue(r.rounds == 2 or r.rounds == 3, r.row .. ": " .. tostring(r.rounds) .. " rounds")
        local has_bar = r.bar ~= nil and r.bar ~= require("cjson").null
        if not has_bar then lu.assertEquals(r.rounds, 2, r.row) end
        if r.settled == false then lu.assertEquals(r.rounds, 3, r.row .. " stopped unsettled before --max-rounds") end
        -- the range of fewer than 5 ratios holds the median too rarely to settle a verdict
        if has_bar then lu.assertFalse(r.settled, r.row .. " settled on 3 rounds") end
    end
    local _, e2, c2 = run(EXPERIMENTS .. "/gemm_bench.lua --max-rounds 0")
    lu.assertNotEquals(c2, 0)
    lu.assertStrContains(e2, "--max-rounds")
    local _, e3, c3 = run(EXPERIMENTS .. "/gemm_bench.lua --rounds 5 --max-rounds 3")
    lu.assertNotEquals(c3, 0)
    lu.assertStrContains(e3, "--max-rounds (3) is below --rounds (5)")
    -- a negative number is the option's value, refused by name in one line (not "unknown option '-1'")
    local _, e4, c4 = run(EXPERIMENTS .. "/gemm_bench.lua --rounds -1")
    lu.assertEquals(c4, 2)
    lu.assertEquals(e4, "gemm_bench.lua: --rounds '-1': expected a whole number from 1 to 1000 (see --help)\n")
    -- after a flag it is not a value: argparse's unknown option, its suggestion on the same line
    local _, e5, c5 = run(EXPERIMENTS .. "/fusion.lua --quick -1")
    lu.assertEquals(c5, 2)
    lu.assertEquals(e5, "fusion.lua: unknown option '-1'; did you mean '-h'? (see --help)\n")
end

-- --only runs the sections it names and no other (their rows alone are printed and saved); a
-- section it does not know is refused, by name.
function TestCli:test_gemm_bench_only_runs_the_sections_named()
    local out, rows = gemm_bench("--only squares,epilogues --sizes 64 --threads 1 --layouts nn,tn --rounds 1 " ..
        "--max-rounds 1 --bf16-size 64")
    lu.assertStrContains(out, "-- square GEMMs")
    lu.assertStrContains(out, "-- what the fused epilogues cost")
    for _, absent in ipairs({"-- the MLP's linears", "-- dual GeGLU MLP", "-- bf16 against f32", "vdpbf16ps"}) do
        lu.assertNotStrContains(out, absent)
    end
    local labels = {}
    for _, r in ipairs(rows) do labels[#labels + 1] = r.row end
    table.sort(labels)
    lu.assertEquals(labels, {"n=64 nn", "n=64 tn"})
    -- --rounds above the default --max-rounds (15) raises it: --only dual --rounds 21 is docs/cpu-kernels.md's example
    local _, more = gemm_bench("--only squares --sizes 32 --threads 1 --layouts nn --rounds 16")
    lu.assertEquals(more[1].rounds, 16)
    local _, e2, c2 = run(EXPERIMENTS .. "/gemm_bench.lua --only dual,gemv")
    lu.assertEquals(c2, 2)
    lu.assertStrContains(e2, "--only 'gemv'")
    lu.assertStrContains(e2, "squares, linears, dual, epilogues, bf16")
end

-- --out naming a file: wb.mkdir_p fails on it (it said true), so the experiments stop before
-- measuring, naming the path, instead of failing to save after a run of minutes.
function TestCli:test_out_that_is_a_file_fails_before_measuring()
    local file = scratch.file("not a folder\n")
    local out, err, code = run([[-e "print(wb.mkdir_p(']] .. file .. [['))"]])
    lu.assertEquals(code, 0, err)
    lu.assertEquals(out, "nil\tcannot create " .. file .. ": Not a directory\n")
    out = run([[-e "print(wb.mkdir_p(']] .. file .. [[/sub'))"]])
    lu.assertEquals(out, "nil\tcannot create " .. file .. ": Not a directory\n")
    out = run([[-e "print(wb.mkdir_p(string.rep('d', 5000)))"]])
    lu.assertStrMatches(out, "nil\tcannot create d+: File name too long\n")
    for _, script in ipairs({"gemm_bench.lua", "fusion.lua --quick", "compile_linear.lua --in 8 --out-features 8"}) do
        out, err, code = run(EXPERIMENTS .. "/" .. script .. " --out " .. file)
        lu.assertEquals(code, 1, script)
        lu.assertStrContains(err, "cannot create " .. file .. ": Not a directory")
        lu.assertEquals(out, "", script .. " measured before checking --out")
    end
end

-- tolist measures what it would need against the tighter of the machine's memory and the
-- address space the process may use (--max-memory), and names which one it ran into.
function TestCli:test_tolist_names_the_max_memory_limit()
    if wb.build.sanitizers then return end -- --max-memory is not applied there
    local out, err, code = run([[--max-memory 1G -e "print(pcall(function() ]] ..
        [[return wb.zeros({1}):expand({1 << 28}):tolist() end))"]])
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "tolist: the tensor has 268435456 elements; as Lua numbers they need about 6.0 GiB, " ..
        "more than the 1.0 GiB address space limit allows (--max-memory)")
end

-- The interpreter running out under --max-memory: Lua's bare "not enough memory" (no traceback,
-- no location) now says which limit it ran into.
function TestCli:test_interpreter_out_of_memory_names_the_limit()
    if wb.build.sanitizers then return end -- --max-memory is not applied there
    local _, err, code = run([[--max-memory 16M -e "local t = {} for i = 1, 1e8 do t[i] = i end"]])
    lu.assertEquals(code, 1)
    lu.assertStrContains(err, "workbench: not enough memory: the interpreter could not allocate within the " ..
        "address space limit of 16 MiB (--max-memory")
end

function TestCli:test_empty_out_is_refused()
    local script = scratch.file("print(1)\n", ".lua")
    for _, args in ipairs({[[--out "" -e "print(1)"]], [[--out= -e "print(1)"]], [[--sandbox --out "" ]] .. script}) do
        local out, err, code = run(args)
        lu.assertEquals(code, 2, args)
        lu.assertEquals(out, "", args)
        lu.assertStrContains(err, "workbench: --out: expected a folder, got an empty value")
    end
end

-- Runs a script in the background and sends it a SIGINT (a terminal's Ctrl-C) 0.3 s after its
-- output first shows the next of `marks` ("ready", "caught", ...; "": 0.3 s after the last signal);
-- returns its output and exit status (137: still running 20 s after the last).
local function interrupted(text, marks, options)
    local path, log = scratch.file(text, ".lua"), scratch.path(".log")
    local waits = {}
    for i, mark in ipairs(marks) do
        local seen = select(2, table.concat(marks, "\n", 1, i):gsub(mark, "")) -- its count so far
        waits[i] = (mark == "" and "" or string.format('i=0; until [ "$(grep -c %q %s)" -ge %d ]; do sleep 0.05; ' ..
            "i=$((i+1)); [ $i -lt 600 ] || break; done; ", mark, log, seen)) .. "sleep 0.3; kill -INT $pid 2>/dev/null"
    end
    local p = io.popen(string.format([[%s %s %s >%s 2>&1 & pid=$!
%s
(sleep 20; kill -KILL $pid) >/dev/null 2>&1 & killer=$!
wait $pid; echo "status=$?"; kill $killer 2>/dev/null]], EXE, options or "", path, log, table.concat(waits, "\n")))
    local status = p:read("a")
    p:close()
    local out = scratch.read(log)
    os.remove(log)
    return out, tonumber(status:match("status=(%d+)"))
end

-- Ctrl-C stops a loop that runs in a coroutine (the hook is the coroutine's too), a top-level loop
-- says the designed line, and no pcall keeps a script running past the second Ctrl-C, in the main
-- thread or a coroutine, sandboxed or not (so this test needs Landlock, as test_sandbox does); the
-- third ends even a long C call, where no hook runs.
function TestCli:test_ctrl_c_stops_any_script()
    local out, code = interrupted('print("ready"); io.stdout:flush()\n' ..
        'coroutine.wrap(function() while true do end end)()\nprint("not reached")', {"ready"})
    lu.assertEquals(code, 130, out)
    lu.assertEquals(out, "ready\nworkbench: interrupted (Ctrl-C)\n")
    out, code = interrupted('print("ready"); io.stdout:flush()\nlocal x = 0 while true do x = x + 1 end', {"ready"})
    lu.assertEquals(code, 130, out)
    lu.assertEquals(out, "ready\nworkbench: interrupted (Ctrl-C)\n")
    -- the first Ctrl-C can be caught (a sweep saves what it measured), the second cannot
    local loop = 'while true do\n    local ok, err = pcall(function() while true do end end)\n' ..
        '    print("caught: " .. tostring(err)); io.stdout:flush()\nend'
    local swallows = {'print("ready"); io.stdout:flush()\n' .. loop,
        'print("ready"); io.stdout:flush()\ncoroutine.wrap(function()\n' .. loop .. '\nend)()'}
    for _, text in ipairs(swallows) do
        for _, options in ipairs({"", "--sandbox --out " .. scratch.dir()}) do
            out, code = interrupted(text, {"ready", "caught"}, options)
            lu.assertEquals(code, 130, options .. ": " .. out)
            lu.assertEquals(select(2, out:gsub("caught: [^\n]*interrupted!\n", "")), 1, out)
            lu.assertStrContains(out, "workbench: interrupted (Ctrl-C)\n")
        end
    end
    -- (a pattern that backtracks for ever: one call into C)
    out, code = interrupted('print("ready"); io.stdout:flush()\n' ..
        'local s = string.rep("a", 40) .. "b"; s:find(string.rep("a*", 40) .. "c")', {"ready", "", ""})
    lu.assertEquals(code, 130, out)
    lu.assertEquals(out, "ready\nworkbench: interrupted (Ctrl-C, a third time): exiting\n")
end

scratch.exit(lu.LuaUnit.run())
