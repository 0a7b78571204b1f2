-- test_sandbox.lua: `workbench --sandbox` against hostile scripts (every escape attempt must
-- fail and leave no file behind), a legitimate script that saves results under --out, a
-- symlink planted next to the script, precompiled chunks, and --timeout.
local lu = require("luaunit")
local scratch = require("scratch")

local EXE = os.getenv("WB_EXE") or "build/workbench"

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
        'os.remove("/etc/hostname")', 'os.rename(wb.options.out, "MARKER")', 'os.tmpname()',
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

function TestSandbox:test_usage_errors()
    local out, code = sh(EXE .. " --sandbox -e 'print(1)'")
    lu.assertEquals(code, 2)
    lu.assertStrContains(out, "--sandbox runs a script file")
    out, code = sh(EXE .. " --timeout abc -e 'print(1)'")
    lu.assertEquals(code, 2)
    lu.assertStrContains(out, "--timeout abc: expected a number of seconds > 0")
end

function TestSandbox:test_timeout_stops_runaway_scripts()
    local t0 = os.time()
    local out, code = sh(EXE .. " --timeout 0.5 -e 'while true do pcall(function() while true do end end) end'")
    lu.assertNotEquals(code, 0)
    lu.assertStrContains(out, "timeout: the script ran past --timeout 0.5 s")
    lu.assertTrue(os.time() - t0 <= 4)
end

scratch.exit(lu.LuaUnit.run())
