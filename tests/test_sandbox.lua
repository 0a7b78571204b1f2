-- test_sandbox.lua: `workbench --sandbox` against hostile scripts (every escape attempt must
-- fail and leave no file behind), a legitimate script that saves results under --out, a
-- symlink planted next to the script, precompiled chunks, and --timeout.
local lu = require("luaunit")
local scratch = require("scratch")

local EXE = scratch.exe()

local function sh(cmd)
    local p = io.popen(cmd .. " 2>&1")
    local out = p:read("a")
    local _, _, code = p:close()
    return out, code
end

local root = scratch.path("_sandbox")
local marker = root .. "_outside" -- a file no sandboxed script may create or read

local function script(name, text)
    local f = assert(io.open(root .. "/" .. name, "w"))
    f:write(text)
    f:close()
    return root .. "/" .. name
end

TestSandbox = {}

function TestSandbox:setUp()
    os.execute("rm -rf '" .. root .. "' '" .. marker .. "'; mkdir -p '" .. root .. "'")
end

function TestSandbox:tearDown() os.execute("rm -rf '" .. root .. "' '" .. marker .. "'") end

function TestSandbox:test_every_escape_fails()
    local attempts = {
        'os.execute("touch MARKER")', 'io.popen("touch MARKER")', 'package.loadlib("libc.so.6", "system")',
        'io.open("/etc/passwd"):read("a")', 'io.open("MARKER", "w"):write("x")',
        'io.open(wb.options.out .. "/../../escape", "w"):write("x")', 'io.lines("/etc/hostname")()',
        'dofile("/etc/passwd")', 'assert(loadfile("/etc/passwd"))', 'load(string.dump(print))',
        'assert(load("\\27Lua\\84\\0\\25\\147\\13\\10\\26\\10"))', 'debug.getinfo(1)', 'require("debug")',
        'package.path = "/etc/?"; require("passwd")', 'package.cpath = "/usr/lib/x86_64-linux-gnu/lua/5.4/?.so"; require("lfs")',
        'assert(os.remove("/etc/hostname"))', 'assert(os.rename(wb.options.out, "MARKER"))', 'os.tmpname()',
        'assert(os.getenv("HOME"))', 'wb._mkdir_p("MARKER")', 'io.output("MARKER")',
        'wb.profiler.profile({}, function() end):export_chrome_trace("MARKER")',
        'wb.profiler.profile({}, function() end):export_stacks("MARKER")',
        'wb.profiler.profile({profile_memory = true}, function() end):export_memory_timeline("MARKER")',
        'require("wb.sandbox")({script = "/x", out = "/", library = "/"})',
        'assert(io.open(arg[0]:gsub("[^/]*$", "") .. "link")):read("a")',
    }
    os.execute("ln -s /etc/hostname '" .. root .. "/link'")
    for i, a in ipairs(attempts) do
        local path = script("evil" .. i .. ".lua", a:gsub("MARKER", marker) .. "\nprint('ESCAPED')\n")
        local out, code = sh(string.format("%s --sandbox --out '%s/out%d' '%s'", EXE, root, i, path))
        lu.assertNotEquals(code, 0, "attempt " .. i .. " ran to its end: " .. a)
        lu.assertNotStrContains(out, "ESCAPED")
        lu.assertNil(io.open(marker), "attempt " .. i .. " created a file outside --out")
    end
end

function TestSandbox:test_precompiled_chunks_are_refused()
    local f = assert(io.open(root .. "/bc.luac", "wb"))
    f:write(string.dump(function() print("ESCAPED") end))
    f:close()
    local out, code = sh(string.format("%s --sandbox --out '%s/o' '%s/bc.luac'", EXE, root, root))
    lu.assertNotEquals(code, 0)
    lu.assertStrContains(out, "attempt to load a binary chunk")
end

function TestSandbox:test_legitimate_script_saves_results()
    local path = script("ok.lua", [[
local helper = require("helper")          -- a module next to the script
local r = wb.results("fine")
r:add{v = helper.value(), n = (wb.ones({4}) * 2):tolist()[1]}
local p = r:save{dir = wb.options.out}
local prof = wb.profiler.profile({}, function() local _ = wb.ones({2}) + 1 end)
prof:export_chrome_trace(wb.options.out .. "/trace.json")
prof:export_stacks(wb.options.out .. "/stacks.txt")
-- folders are listed without a process (find through popen was refused): a folder of traces reads,
-- and merge names a folder without shards instead of failing on popen
wb.mkdir_p(wb.options.out .. "/traces")
prof:export_chrome_trace(wb.options.out .. "/traces/rank0.json")
local loaded = wb.trace.load(wb.options.out .. "/traces")
assert(#loaded == 1 and loaded[1].path:match("rank0%.json$"), "the folder's one trace")
-- events made by the script read as a profile too (the binding was looked up at call time: gone)
assert(#wb.profiler.from_events({{cat = "op", name = "x", dur_ns = 5}}):findings() >= 0)
wb.mkdir_p(wb.options.out .. "/shards")
local ok, e = pcall(wb.merge.merge, wb.options.out .. "/merged", {wb.options.out .. "/shards"})
assert(not ok and e.merge_error:match("holds no shard files"), tostring(type(e) == "table" and e.merge_error or e))
wb.profiler.profile({profile_memory = true}, function() end):export_memory_timeline(wb.options.out .. "/memory.json")
local f = io.open(wb.options.out .. "/note.txt", "w"); f:write("written"); f:close()
print("done " .. io.open(p.json):read("a"):sub(1, 1))
]])
    script("helper.lua", "return {value = function() return 42 end}")
    local out, code = sh(string.format("%s --sandbox --out '%s/results' '%s'", EXE, root, path))
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "done {")
    for _, name in ipairs({"fine.json", "fine.csv", "fine.html", "trace.json", "stacks.txt", "memory.json",
        "memory.html", "note.txt"}) do
        lu.assertNotNil(io.open(root .. "/results/" .. name), name)
    end
end

-- The main job under --sandbox, as the README offers it for a script from someone else: its peers
-- cannot run there (PyTorch is a process, oneDNN's library is not read), which it says, and its
-- results are saved (io.popen raised after every row was measured, and the results were lost).
function TestSandbox:test_the_main_job_runs_without_its_peers()
    local out, code = sh(string.format("%s --sandbox --out '%s/sweep' '%s/experiments/mlp_sweep.lua' --tokens 2 " ..
        "--dim 32 --hidden 64 --modes eager,fused --rounds 1 --max-rounds 1", EXE, root, scratch.source()))
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "(no PyTorch rows: it runs as a process, and no processes run under --sandbox)")
    lu.assertStrContains(out, "(no oneDNN rows: its library is not loaded under --sandbox)")
    lu.assertNotNil(io.open(root .. "/sweep/mlp_sweep.json"))
end

-- A sandboxed run reads the calibration cached before the sandbox closed (it measured the peak
-- again on every run: HOME reads as nil in there, and the cache lies outside the script's folder).
function TestSandbox:test_the_cached_calibration_is_read()
    local calibrate, cjson = require("wb.calibrate"), require("cjson")
    local cache = root .. "/cache"
    os.execute(string.format("mkdir -p '%s/workbench' && chmod 700 '%s' '%s/workbench'", cache, cache, cache))
    local f = assert(io.open(cache .. "/workbench/calibration.json", "w"))
    f:write(cjson.encode({[calibrate.cache_key(1)] = {peak_gflops = 12345.5, threads = 1, date = "planted"}}))
    f:close()
    local path = script("peak.lua", [[
local e = require("wb.calibrate").cpu(1)
print("source " .. e.source .. ", peak " .. e.peak_gflops)
]])
    local out, code = sh(string.format("env -u WB_CACHE_DIR XDG_CACHE_HOME='%s' %s --sandbox --out '%s/o' '%s'", cache,
        EXE, root, path))
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "source cache, peak 12345.5")
end

-- wb.compile under --sandbox (issue 47): no compiler runs, so code generation is off for the
-- process, said once on stderr and in explain, and the pattern rules' plan runs: gelu_tanh(a) * b
-- is still the one geglu kernel, and its result is eager's, traced and replayed.
function TestSandbox:test_compile_runs_without_generated_code()
    local path = script("compiled.lua", [[
local gelu_mul = function(a, b) return wb.gelu(a, {approximate = "tanh"}) * b end
local f = wb.compile(gelu_mul)
wb.manual_seed(7)
local a, b = wb.randn({3, 17}), wb.randn({3, 17})
local want = gelu_mul(a, b)
for i = 1, 2 do print("call " .. i, wb.max_abs_diff(f(a, b), want)) end
print(f:explain())
]])
    local out, code = sh(string.format("%s --sandbox --out '%s/o' '%s'", EXE, root, path))
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "call 1\t0.0\n")
    lu.assertStrContains(out, "call 2\t0.0\n")
    lu.assertStrContains(out, "wb.compile: code generation is off: --sandbox: no compiler runs")
    lu.assertStrContains(out, "code generation: off (--sandbox: no compiler runs and no shared objects load)")
    lu.assertStrContains(out, "2 ops traced -> 1 kernel: geglu; fused: gelu+mul -> geglu")
end

-- Every module of the library loads under --sandbox: one that reads the wb._* internals when it
-- loads must be loaded by the sandbox before they go (wb.compile read wb._ops() too late).
function TestSandbox:test_every_library_module_loads()
    local modules = {}
    local ls = io.popen("ls '" .. (os.getenv("WB_SOURCE_DIR") or ".") .. "/scripts/wb'")
    for name in ls:lines() do
        local m = name:match("^(.+)%.lua$")
        if m and m ~= "sandbox" then modules[#modules + 1] = m end
    end
    ls:close()
    lu.assertTrue(#modules > 30, "found " .. #modules .. " modules")
    local path = script("modules.lua", [[
for _, m in ipairs(arg) do
    local ok, err = pcall(require, "wb." .. m)
    print(ok and "loaded " .. m or "failed " .. m .. ": " .. tostring(err))
end
]])
    local command = string.format("%s --sandbox --out '%s/o' '%s' %s", EXE, root, path, table.concat(modules, " "))
    local out, code = sh(command)
    lu.assertEquals(code, 0, out)
    lu.assertNotStrContains(out, "failed ")
    for _, m in ipairs(modules) do lu.assertStrContains(out, "loaded " .. m .. "\n") end
end

-- A refused path gets standard Lua's answer for a file it cannot open (issue 47): io.open,
-- os.remove and os.rename answer nil, message, EACCES (13), loadfile nil, message; io.lines,
-- dofile, io.input and io.output raise. The answer is the same for a file that exists outside
-- the allowed folders, a folder that does, and a path that does not (no existence oracle).
function TestSandbox:test_refused_paths_answer_as_standard_lua()
    local outside = root .. "_other" -- beside the script's folder: outside every allowed one
    os.execute("rm -rf '" .. outside .. "'; mkdir -p '" .. outside .. "/folder'")
    local f = assert(io.open(outside .. "/file.txt", "w"))
    f:write("kept")
    f:close()
    local path = script("standard.lua", [[
local mine = wb.options.out .. "/mine.txt"
assert(io.open(mine, "w")):close()
local function answer(fn, ...)
    local r = table.pack(pcall(fn, ...))
    for i = 1, r.n do r[i] = tostring(r[i]) end
    return table.concat(r, " | ", 1, r.n)
end
local cases = {
    {"io.open", function(p) return io.open(p) end}, {"io.open w", function(p) return io.open(p, "w") end},
    {"io.open beneath", function(p) return io.open(p .. "/x", "a+") end}, {"os.remove", os.remove},
    {"os.rename from", function(p) return os.rename(p, wb.options.out .. "/moved") end},
    {"os.rename to", function(p) return os.rename(mine, p) end}, {"loadfile", loadfile},
    {"io.lines", io.lines}, {"dofile", dofile}, {"io.input", io.input}, {"io.output", io.output},
}
for _, c in ipairs(cases) do
    for i = 1, #arg do
        local shown = answer(c[2], arg[i]):gsub(arg[i]:gsub("%p", "%%%0"), "PATH")
        print(c[1] .. " #" .. i .. " = " .. shown)
    end
end
print("inside = " .. answer(io.open, wb.options.out .. "/absent"))
]])
    local out, code = sh(string.format("%s --sandbox --out '%s/o' '%s' '%s/file.txt' '%s/folder' '%s/absent'", EXE,
        root, path, outside, outside, outside))
    local kept = io.open(outside .. "/file.txt")
    local text = kept and kept:read("a")
    if kept then kept:close() end
    os.execute("rm -rf '" .. outside .. "'")
    lu.assertEquals(code, 0, out)
    local answers = {}
    for name, i, shown in out:gmatch("([%w. ]+) #(%d) = ([^\n]*)") do
        answers[name] = answers[name] or {}
        answers[name][tonumber(i)] = shown
    end
    local NIL_MESSAGE_EACCES = "^true | nil | %s: sandbox: may not %s 'PATH[/x]*' %%(.+%%) | 13$"
    local expected = {
        ["io.open"] = NIL_MESSAGE_EACCES:format("io.open", "read"),
        ["io.open w"] = NIL_MESSAGE_EACCES:format("io.open", "write"),
        ["io.open beneath"] = NIL_MESSAGE_EACCES:format("io.open", "write"),
        ["os.remove"] = NIL_MESSAGE_EACCES:format("os.remove", "write"),
        ["os.rename from"] = NIL_MESSAGE_EACCES:format("os.rename", "write"),
        ["os.rename to"] = NIL_MESSAGE_EACCES:format("os.rename", "write"),
        ["loadfile"] = "^true | nil | loadfile: sandbox: may not read 'PATH' %(.+%)$",
        ["io.lines"] = "^false | [^|]*io.lines: sandbox: may not read 'PATH' %(.+%)$",
        ["dofile"] = "^false | [^|]*dofile: sandbox: may not read 'PATH' %(.+%)$",
        ["io.input"] = "^false | [^|]*io.input: sandbox: may not read 'PATH' %(.+%)$",
        ["io.output"] = "^false | [^|]*io.output: sandbox: may not write 'PATH' %(.+%)$",
    }
    for name, pattern in pairs(expected) do
        local a = answers[name] or {}
        lu.assertStrMatches(a[1] or "missing", pattern, nil, nil, name .. ":\n" .. out)
        lu.assertEquals(a[2], a[1], name .. ": a folder outside answers unlike a file")
        lu.assertEquals(a[3], a[1], name .. ": a missing path answers unlike a file")
    end
    lu.assertStrMatches(out:match("inside = ([^\n]*)") or "missing",
        "^true | nil | .*absent: No such file or directory | 2$")
    lu.assertEquals(text, "kept", "the file outside was changed, moved or removed")
end

-- A function the sandbox takes away raises, naming itself and the sandbox (not "attempt to call
-- a nil value"); os.execute() without a command answers standard Lua's "is there a shell?": false.
function TestSandbox:test_removed_functions_say_so()
    local path = script("removed.lua", [[
local calls = {os_execute = 'os.execute("true")', io_popen = 'io.popen("true")', io_tmpfile = 'io.tmpfile()',
    os_tmpname = 'os.tmpname()', string_dump = 'string.dump(print)',
    package_loadlib = 'package.loadlib("libc.so.6", "system")',
    package_searchpath = 'package.searchpath("x", "./?.lua")'}
for name, call in pairs(calls) do
    -- not a tail call, so that the message names the line
    local fn = load("local r = " .. call .. "; return r", "=removed.lua")
    print(name:gsub("_", ".", 1) .. " = " .. tostring(select(2, pcall(fn))))
end
print("shell = " .. tostring(os.execute()))
]])
    local out, code = sh(string.format("%s --sandbox --out '%s/o' '%s'", EXE, root, path))
    lu.assertEquals(code, 0, out)
    lu.assertNotStrContains(out, "nil value")
    for _, name in ipairs({"os.execute", "io.popen", "io.tmpfile", "os.tmpname", "string.dump", "package.loadlib",
        "package.searchpath"}) do
        local quoted = name:gsub("%p", "%%%0")
        local shown = out:match(quoted .. " = ([^\n]*)") or "missing"
        lu.assertStrMatches(shown, ".*removed%.lua:%d+: " .. quoted .. ": sandbox: .*%-%-sandbox.*", nil, nil, name)
    end
    lu.assertStrContains(out, "shell = false\n")
end

function TestSandbox:test_usage_errors()
    local out, code = sh(EXE .. " --sandbox -e 'print(1)'")
    lu.assertEquals(code, 2)
    lu.assertStrContains(out, "--sandbox runs a script file")
    out, code = sh(EXE .. " --timeout abc -e 'print(1)'")
    lu.assertEquals(code, 2)
    lu.assertStrContains(out, "--timeout abc: expected a number of seconds > 0")
end

-- A script named through /dev/stdin would have made its folder, /dev, readable: refused, piped or
-- redirected from a file; the file itself runs.
function TestSandbox:test_a_script_through_dev_stdin_is_refused()
    local probe = script("probe.lua",
        'print("ran", io.open("/dev/null") == nil, io.open("' .. root .. '/probe.lua") ~= nil)')
    local out, code = sh(string.format("cat '%s' | %s --sandbox --out '%s/out' /dev/stdin", probe, EXE, root))
    lu.assertEquals(code, 2, out)
    lu.assertEquals(out, "workbench: --sandbox runs a script file: /dev/stdin is not a regular file (a pipe, a " ..
        "device or a folder); save the script to a file and give its path\n")
    out, code = sh(string.format("%s --sandbox --out '%s/out' /dev/stdin < '%s'", EXE, root, probe))
    lu.assertEquals(code, 2, out)
    lu.assertEquals(out, "workbench: --sandbox runs a script file: /dev/stdin lies in /dev or /proc, whose folder " ..
        "the script would read; save the script to a file and give its path\n")
    out, code = sh(string.format("%s --sandbox --out '%s/out' '%s'", EXE, root, probe))
    lu.assertEquals(code, 0, out)
    lu.assertEquals(out, "ran\ttrue\ttrue\n")
end

function TestSandbox:test_timeout_stops_runaway_scripts()
    local t0 = os.time()
    local out, code = sh(EXE .. " --timeout 0.5 -e 'while true do pcall(function() while true do end end) end'")
    lu.assertNotEquals(code, 0)
    lu.assertStrContains(out, "timeout: the script ran past --timeout 0.5 s")
    lu.assertTrue(os.time() - t0 <= 4)
end

scratch.exit(lu.LuaUnit.run())
