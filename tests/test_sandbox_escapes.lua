-- test_sandbox_escapes.lua: the 13 escapes of issue 20's red-team pass, each run under
-- `workbench --sandbox` as a hostile script would, plus the blocked attempts reconstructed from
-- it. A script that gets through prints ESCAPED; none may, and none may leave a file outside
-- --out or in the library. (test_sandbox.lua keeps the first set of attempts.)
local lu = require("luaunit")
local scratch = require("scratch")

local EXE = scratch.exe()
local LIB = scratch.source() .. "/scripts"

local function sh(cmd)
    local p = io.popen(cmd .. " 2>&1")
    local out = p:read("a")
    local _, _, code = p:close()
    return out, code
end

local function now() return tonumber((sh("date +%s.%N"))) end

local root = scratch.path("_escapes")
local marker = root .. "_outside"
local planted = LIB .. "/wb/zz_planted.lua"

local function script(name, text)
    local f = assert(io.open(root .. "/" .. name, "w"))
    f:write(text)
    f:close()
    return root .. "/" .. name
end

-- Runs text under --sandbox (plus options); returns its output, status and seconds taken.
local function sandboxed(text, options)
    local path = script("evil.lua", text:gsub("MARKER", marker):gsub("PLANTED", planted) .. "\nprint('ESCAPED')\n")
    local t0 = now()
    local out, code = sh(string.format("%s --sandbox %s --out '%s/out' '%s'", EXE, options or "", root, path))
    return out, code, now() - t0
end

local function assert_blocked(text, options)
    local out, code = sandboxed(text, options)
    lu.assertNotEquals(code, 0, "ran to its end: " .. text .. "\n" .. out)
    lu.assertNotStrContains(out, "ESCAPED")
    lu.assertNil(io.open(marker), "created a file outside --out: " .. text)
    lu.assertNil(io.open(planted), "planted a file in the library: " .. text)
    return out
end

TestEscapes = {}

function TestEscapes:setUp() os.execute("rm -rf '" .. root .. "' '" .. marker .. "'; mkdir -p '" .. root .. "'") end

function TestEscapes:tearDown()
    os.execute("rm -rf '" .. root .. "' '" .. marker .. "'")
    os.remove(planted)
end

-- 1: redefining the globals the checks used turned every check into a no-op
function TestEscapes:test_redefined_error_does_not_disable_checks()
    local out = assert_blocked('error = function() end; print(assert(io.open("/etc/passwd")):read("a"))')
    lu.assertStrContains(out, "io.open: sandbox: may not read '/etc/passwd'")
    assert_blocked('type = function() return "number" end; ipairs = function() return function() end end\n'
        .. 'io.open("MARKER", "w"):write("x")')
    assert_blocked('assert = function(...) return ... end; pcall = function(f, ...) return true, f(...) end\n'
        .. 'io.open("MARKER", "w"):write("x")')
end

-- 2: replacing string.find planted a module into the library that a later run loaded
function TestEscapes:test_no_file_can_be_planted_in_the_library()
    assert_blocked('string.find = function() return nil end; io.open("PLANTED", "w"):write("print(1)")')
    assert_blocked('getmetatable("").__index.find = function() return nil end; io.open("PLANTED", "w"):write("x")')
    assert_blocked('string.match = function() return nil end; string.sub = function() return "" end\n'
        .. 'io.open("PLANTED", "a"):write("x")')
    assert_blocked('local f = assert(io.open(wb.options.out .. "/p.lua", "w")); f:write("x"); f:close()\n'
        .. 'assert(os.rename(wb.options.out .. "/p.lua", "PLANTED"))')
    assert_blocked('local r = wb.results("zz_planted"); r:add{a = 1}; r:save{dir = "' .. LIB .. '/wb"}')
    assert_blocked('wb.profiler.profile({}, function() end):export_chrome_trace("PLANTED")')
    assert_blocked('wb.profiler.profile({}, function() end):export_stacks("PLANTED")')
    assert_blocked('io.output("PLANTED"); io.write("x")')
    assert_blocked('assert(wb.mkdir_p("' .. LIB .. '/wb/zz_dir"))')
    lu.assertNil(io.open(LIB .. "/wb/zz_dir"))
end

-- 3, 4, 5: the native writers had no check, and the Lua one could be removed
function TestEscapes:test_native_writers_are_checked_in_c()
    local out = assert_blocked('wb._profiler_session{}:export_chrome_trace("MARKER")')
    lu.assertStrContains(out, "attempt to call a nil value")
    out = assert_blocked('local p = wb.profiler.profile({}, function() end); p.native:export_chrome_trace("MARKER")')
    lu.assertStrContains(out, "export_chrome_trace: sandbox: may not write")
    assert_blocked('wb._sandbox_check_write = nil; wb._check_path = function() end\n'
        .. 'wb.profiler.profile({}, function() end):export_chrome_trace("MARKER")')
    assert_blocked('wb.profiler.profile({profile_memory = true}, function() end):export_memory_timeline("MARKER")')
end

-- 6, 7, 8: existence oracles and an unchecked temporary file
function TestEscapes:test_no_oracles_or_temporary_files()
    assert_blocked('assert(wb._realpath("/etc/passwd"))')
    assert_blocked('assert(package.searchpath("passwd", "/etc/?"))')
    assert_blocked('package.path = "/etc/?"; assert(wb.passwd == nil and false)')
    assert_blocked('io.tmpfile():write("x")')
    local out = assert_blocked('for k in pairs(wb) do if k:sub(1, 1) == "_" then error("visible: " .. k) end end\n'
        .. 'error("no internals")')
    lu.assertStrContains(out, "no internals")
end

-- 9-12: --timeout 1 is hard: nothing keeps running much past it
function TestEscapes:test_timeout_cannot_be_escaped()
    local runaways = {
        coroutine = 'local co = coroutine.wrap(function() while true do pcall(function() while true do end end) end end); co()',
        gc = 'local function arm() setmetatable({}, {__gc = function() arm(); while true do end end}) end\n'
            .. 'arm(); while true do collectgarbage() end',
        pattern = 'local s = string.rep("a", 40) .. "b"; while true do s:find(string.rep("a*", 40) .. "c") end',
        fill = 'wb.zeros{1}:expand{1 << 40}:fill_(1)',
    }
    for name, text in pairs(runaways) do
        local out, code, secs = sandboxed(text, "--timeout 1")
        lu.assertNotEquals(code, 0, name)
        lu.assertNotStrContains(out, "ESCAPED")
        lu.assertTrue(secs < 3.5, name .. " ran for " .. secs .. " s under --timeout 1:\n" .. out)
    end
end

-- 13: memory was unlimited
function TestEscapes:test_memory_is_limited()
    if wb.build.sanitizers then return end -- AddressSanitizer cannot run under RLIMIT_AS (docs/cli.md)
    local out = assert_blocked('local t = wb.empty{3 * 2^30}') -- 12 GiB: over the default 8G
    lu.assertStrContains(out, "empty")
    out = assert_blocked('local t = wb.empty{2^28}', "--max-memory 512M") -- 1 GiB
    lu.assertNotStrContains(out, "ESCAPED")
    local _, code = sh(string.format("%s --max-memory 64K -e 'print(1)'", EXE))
    lu.assertEquals(code, 2)
end

-- Reconstructed blocked attempts beyond test_sandbox.lua's: none may get through.
function TestEscapes:test_more_blocked_attempts()
    local attempts = {
        'io.lines("/etc/passwd")()', 'io.input("/etc/passwd"); io.read()', 'loadfile("/etc/passwd", "t")()',
        'dofile("/etc/hostname")', 'require("passwd")', 'assert(type(package.searchers[2]("passwd")) == "function")',
        'package.loaded["wb.sandbox"]({script = "/x", out = "/", library = "/"})',
        'wb.mkdir_p("MARKER")', 'wb.mkdir_p(wb.options.out .. "/../../x/../../MARKER")',
        'assert(os.remove(arg[0]))', 'assert(os.rename(arg[0], wb.options.out .. "/stolen.lua"))',
        'io.open(arg[0], "a"):write("x")', 'io.open(arg[0], "r+"):write("x")',
        'assert(io.open("/proc/self/mem", "r+"))', 'io.open("/proc/1/environ"):read("a")',
        'local r = wb.results("x"); r:add{a = 1}; r:save{dir = "MARKER"}',
        'setmetatable(_G, {__index = function() return io.open end}); xyz("MARKER", "w"):write(1)',
        'load(string.char(27) .. "Lua")()', 'coroutine.wrap(function() io.open("MARKER", "w"):write(1) end)()',
        'local ok, f = pcall(io.open, "/etc/passwd"); assert(ok and f)',
    }
    for _, a in ipairs(attempts) do assert_blocked(a) end
end

-- Without Landlock, --sandbox is refused unless the weaker mode is asked for (and said).
function TestEscapes:test_without_landlock_sandbox_is_refused()
    local path = script("ok.lua", "print('ran')")
    local out, code = sh(string.format("WB_LANDLOCK=off %s --sandbox --out '%s/o' '%s'", EXE, root, path))
    lu.assertEquals(code, 1)
    lu.assertStrContains(out, "this kernel has no Landlock")
    lu.assertNotStrContains(out, "ran")
    out, code = sh(string.format("WB_LANDLOCK=off %s --sandbox-weak --out '%s/o' '%s'", EXE, root, path))
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "files are checked by the library only")
    lu.assertStrContains(out, "ran")
end

-- the profiler's spill_dir (and load_trace's) is a path like any other: refused before use, with
-- one message whether the folder outside exists, is missing or is a file (the spill's own errors,
-- Permission denied / No such file / Not a directory, told a script which)
function TestEscapes:test_spill_dir_is_checked_without_an_oracle()
    local said = {}
    for _, dir in ipairs({"/etc", "/nonexistent_wb_dir", "/etc/passwd"}) do
        local out = assert_blocked(string.format('local p = wb.profiler.profile({spill_dir = "%s", max_memory = 4 << 20, ' ..
            'memory_policy = "spill"}); p:start(); for _ = 1, 40000 do local _ = wb.ones({1}) end; p:stop()', dir))
        lu.assertStrContains(out, "profiler: spill_dir: sandbox: may not write '" .. dir .. "'")
        said[#said + 1] = (out:match("sandbox: [^\n]*"):gsub(dir, "DIR", 1, true))
    end
    lu.assertEquals(said[2], said[1])
    lu.assertEquals(said[3], said[1])
    local out = assert_blocked('wb.profiler.load_trace(wb.options.out .. "/x.json", {spill_dir = "/etc"})')
    lu.assertStrContains(out, "load_trace: spill_dir: sandbox: may not write '/etc'")
end

-- a cjson.lua (or wb/pretty.lua) beside the script or in the current folder was what the library
-- loaded (Lua's default path ends in ./?.lua, and its searcher runs before the C one): before
-- --sandbox closed, and in every command. Now require looks in the library, the system's folders
-- and the script's own folder, never the current one; the library's C module is loaded first.
function TestEscapes:test_modules_planted_beside_the_script_or_in_the_folder_are_not_the_library()
    local plant = string.format('io.open("%s", "w"):write("ran"); os.execute("true"); return {encode = ' ..
        'function() return "PLANTED" end}', marker)
    script("cjson.lua", plant)
    os.execute("mkdir -p '" .. root .. "/wb'")
    script("wb/pretty.lua", plant)
    script("helper.lua", "return {answer = 42}")
    local path = script("theirs.lua", 'print(require("cjson").encode({1}), require("helper").answer, ' ..
        'require("wb.pretty")({2}))')
    local out, code = sh(string.format("cd '%s' && %s --sandbox --out '%s/out' theirs.lua", root, EXE, root))
    lu.assertEquals(code, 0, out)
    lu.assertEquals(out, "[1]\t42\t{2}\n")
    out, code = sh(string.format("cd '%s' && %s '%s'", root, EXE, path))
    lu.assertEquals(code, 0, out)
    lu.assertEquals(out, "[1]\t42\t{2}\n")
    -- the commands and -e, run in that folder: the library's modules, and nothing from the folder
    out, code = sh(string.format("cd '%s' && %s -e 'print(require(\"cjson\").encode({3}), pcall(require, \"helper\"))'",
        root, EXE))
    lu.assertEquals(code, 0, out)
    lu.assertStrMatches(out, "%[3%]\tfalse\tmodule 'helper' not found.*")
    out, code = sh(string.format("cd '%s' && %s compare missing.json missing.json", root, EXE))
    lu.assertEquals(code, 2, out)
    -- where the C module does not load (LUA_CPATH without it), the one beside the script is not it
    out, code = sh(string.format("cd '%s' && LUA_CPATH='/nonexistent/?.so' %s --sandbox --out '%s/out' theirs.lua",
        root, EXE, root))
    lu.assertNotEquals(code, 0, out)
    lu.assertStrContains(out, "module 'cjson' (the library's JSON, lua-cjson) cannot be loaded")
    -- a folder whose name holds ; or ? is not searched (its name would split into other entries)
    os.execute(string.format("mkdir -p '%s/a;b' '%s/b' && cp '%s/helper.lua' '%s/b/'", root, root, root, root))
    local odd = script("a;b/odd.lua", 'print(pcall(require, "helper"))')
    out, code = sh(string.format("cd '%s' && %s '%s'", root, EXE, odd))
    lu.assertEquals(code, 0, out)
    lu.assertStrMatches(out, "false\tmodule 'helper' not found.*")
    lu.assertNil(io.open(marker), "a planted module ran")
end

scratch.exit(lu.LuaUnit.run())
