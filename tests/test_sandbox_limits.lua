-- test_sandbox_limits.lua: issue 33's sandbox findings, each run as a hostile script would: the
-- crashes of the Lua 5.4.4 and lua-cjson shipped (nested coroutine.close, cjson's depth setters)
-- end in an error, not a signal; mkdir_p and r:save{dir=} answer the same for a path under an
-- existing file as for a missing one (no existence oracle); --sandbox-weak does not follow a
-- dangling symlink out of --out; wb._sandbox_roots refuses a negative length; a thread count
-- whose stacks do not fit under --max-memory is refused instead of ending the process.
local lu = require("luaunit")
local scratch = require("scratch")

local EXE = scratch.exe()

local function sh(cmd)
    local p = io.popen(cmd .. " 2>&1")
    local out = p:read("a")
    local _, how, code = p:close()
    return out, how, code
end

-- text run under --sandbox (or `mode`), with --out a fresh folder; returns output, how it ended
local function sandboxed(text, mode, env)
    local out_dir = scratch.dir("_out")
    local path = scratch.file(text, ".lua")
    local out, how, code = sh(string.format("%s%s %s --out '%s' '%s' '%s'", env or "", EXE, mode or "--sandbox", out_dir,
        path, out_dir))
    return out, how, code, out_dir
end

local function assert_no_signal(how, code, out)
    lu.assertEquals(how, "exit", "ended by a signal: " .. out)
    lu.assertTrue(code < 128, "ended by a signal (status " .. tostring(code) .. "): " .. out)
end

TestSandboxLimits = {}

-- Lua 5.4.4: each close runs the next coroutine's __close, which closes the one before, with no
-- count against the C stack: 100,000 levels overflowed it (SIGSEGV)
function TestSandboxLimits:test_nested_coroutine_close_is_an_error()
    local out, how, code = sandboxed([[
local coro = false
for i = 1, 100000 do
    local previous = coro
    coro = coroutine.create(function()
        local c <close> = setmetatable({}, {__close = function()
            if previous then assert(coroutine.close(previous)) end
        end})
        coroutine.yield()
    end)
    coroutine.resume(coro)
end
print("closed", coroutine.close(coro))
-- and a shallow chain still closes
local a = coroutine.create(function() local c <close> = setmetatable({}, {__close = function() end}) coroutine.yield() end)
coroutine.resume(a)
print("shallow", coroutine.close(a))
]])
    assert_no_signal(how, code, out)
    lu.assertStrContains(out, "coroutine.close: sandbox: more than 100 closes nested inside each other")
    lu.assertStrContains(out, "closed\tfalse")
    lu.assertStrContains(out, "shallow\ttrue")
end

-- lua-cjson: decode_max_depth(10^6) then a 900,000-deep document overflowed the C stack
function TestSandboxLimits:test_cjson_depth_setters_are_bounded()
    local out, how, code = sandboxed([[
local cjson = require("cjson")
print("module", pcall(cjson.decode_max_depth, 1000000))
print("encode", pcall(cjson.encode_max_depth, "1e6"))
local inst = cjson.new()
print("instance", pcall(inst.decode_max_depth, 900000))
print("allowed", pcall(cjson.decode_max_depth, 500))
print("deep", pcall(cjson.decode, string.rep("[", 900000)))
print("deep instance", pcall(inst.decode, string.rep("[", 900000)))
print("still works", cjson.encode({1, 2}), cjson.decode("[3]")[1], cjson.null ~= nil)
]])
    assert_no_signal(how, code, out)
    lu.assertStrContains(out, "cjson.decode_max_depth: sandbox: at most 1000 levels (asked for 1000000)")
    lu.assertStrContains(out, "cjson.encode_max_depth: sandbox: at most 1000 levels (asked for 1e6)")
    lu.assertStrContains(out, "instance\tfalse")
    lu.assertStrContains(out, "allowed\ttrue")
    lu.assertStrContains(out, "deep\tfalse")
    lu.assertStrContains(out, "deep instance\tfalse")
    lu.assertStrContains(out, "still works\t[1,2]\t3.0\ttrue")
end

-- the answer for a folder under an existing file was "Not a directory"; for a missing one, the
-- sandbox's refusal: whether a file exists anywhere on disk could be read from it
function TestSandboxLimits:test_mkdir_and_save_do_not_tell_whether_a_file_exists()
    local existing = scratch.file("x")
    local out, how, code = sandboxed(string.format([[
local function answer(f, path)
    local ok, a, b = pcall(f, path)
    local msg = tostring(ok and b or a):gsub("%%S*" .. path:gsub("%%p", "%%%%%%0") .. "%%S*", "PATH")
    return (msg:gsub("^.-sandbox", "sandbox"))
end
local r = wb.results("oracle")
r:add{a = 1}
local function save(dir) return r:save{dir = dir} end
print("mkdir existing", answer(wb.mkdir_p, %q))
print("mkdir missing", answer(wb.mkdir_p, %q))
print("save existing", answer(save, %q))
print("save missing", answer(save, %q))
print("inside", wb.mkdir_p(arg[1] .. "/a/b/c"))
]], existing .. "/sub", existing .. "_missing/sub", existing .. "/sub", existing .. "_missing/sub"))
    assert_no_signal(how, code, out)
    local got = {}
    for what, msg in out:gmatch("(%a+ %a+)\t([^\n]*)") do got[what] = msg end
    lu.assertStrContains(got["mkdir existing"], "sandbox: may not write PATH (writing is allowed under")
    lu.assertEquals(got["mkdir existing"], got["mkdir missing"])
    lu.assertStrContains(got["save existing"], "sandbox: may not write PATH (writing is allowed under")
    lu.assertEquals(got["save existing"], got["save missing"])
    lu.assertStrContains(out, "inside\ttrue")
end

-- without Landlock only the library's check stands: a dangling symlink inside --out was taken
-- for a new file inside it, and the write followed the link outside
function TestSandboxLimits:test_weak_sandbox_does_not_follow_a_dangling_symlink()
    local outside = scratch.path("_outside")
    local out_dir = scratch.dir("_weak_out")
    os.execute(string.format("ln -s '%s' '%s/link'", outside, out_dir))
    local script = scratch.file([[
print("open", pcall(io.open, arg[1] .. "/link", "w"))
print("mkdir", pcall(wb.mkdir_p, arg[1] .. "/link/x"))
print("fine", io.open(arg[1] .. "/fine.txt", "w") ~= nil)
]], ".lua")
    local out, how, code = sh(string.format("WB_LANDLOCK=off %s --sandbox-weak --out '%s' '%s' '%s'", EXE, out_dir,
        script, out_dir))
    assert_no_signal(how, code, out)
    lu.assertStrContains(out, "open\ttrue\tnil\tio.open: sandbox: may not write")
    lu.assertStrContains(out, "mkdir\tfalse")
    lu.assertStrContains(out, "fine\ttrue")
    lu.assertNil(io.open(outside), "wrote through the dangling symlink, outside --out")
end

-- unsandboxed only (the internals are gone under --sandbox): a __len of -1 wrote roots[-1]
function TestSandboxLimits:test_sandbox_roots_refuses_a_negative_length()
    local out, how, code = sh(EXE .. [[ -e 'local bad = setmetatable({}, {__len = function() return -1 end})
print(pcall(wb._sandbox_roots, bad, {}))
print("writes", io.open("/dev/null", "w") ~= nil)']])
    assert_no_signal(how, code, out)
    lu.assertStrContains(out, "false\tsandbox: -1 folders given: 0 to 16 are allowed")
    lu.assertStrContains(out, "writes\ttrue") -- and the sandbox was not turned on
end

-- libgomp ended the process ("Thread creation failed", status 1, past any pcall) at the first
-- parallel kernel when 1024 threads' stacks did not fit under --max-memory (256 threads of 16 MiB
-- stacks here: the cap is 256, and a machine's default stack may be smaller than 8 MiB)
function TestSandboxLimits:test_threads_that_do_not_fit_the_memory_limit_are_refused()
    if wb.build.sanitizers then -- which applies no --max-memory (ASan reserves terabytes)
        print("skipped in the sanitizer build: --max-memory is not applied there")
        return
    end
    local out, how, code = sh("WB_THREADS_ADAPT=0 OMP_STACKSIZE=16M " .. EXE .. [[ --max-memory 2G -e '
print(pcall(wb.set_num_threads, 256))
print("after", (wb.ones({1 << 22}) + 1):numel(), wb.get_num_threads())
print("fits", pcall(wb.set_num_threads, 4))']])
    assert_no_signal(how, code, out)
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "false\tset_num_threads: 256 threads need about")
    lu.assertStrContains(out, "the address-space limit (--max-memory) leaves")
    lu.assertStrContains(out, "after\t4194304")
    lu.assertStrContains(out, "fits\ttrue")
end

-- the same refusal from the command line: --threads says why and the script does not run
function TestSandboxLimits:test_threads_option_that_does_not_fit_is_an_error()
    if wb.build.sanitizers then
        print("skipped in the sanitizer build: --max-memory is not applied there")
        return
    end
    local out, how, code = sh("WB_THREADS_ADAPT=0 OMP_STACKSIZE=16M " .. EXE .. [[ --max-memory 2G --threads 256 -e '
print("ran")']])
    assert_no_signal(how, code, out)
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "workbench: --threads 256: set_num_threads: 256 threads need about")
    lu.assertNotStrContains(out, "ran")
    -- the default count (4 here) lowered to what fits, and said: 2 of 512 MiB stacks under 1 GiB
    out, how, code = sh("WB_THREADS_ADAPT=0 OMP_NUM_THREADS=4 OMP_STACKSIZE=512M " .. EXE ..
        [[ --max-memory 1G -e 'print("threads", wb.get_num_threads())']])
    assert_no_signal(how, code, out)
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "workbench: the memory limit leaves room for 2 threads' stacks: running on 2")
    lu.assertStrContains(out, "threads\t2")
end

scratch.exit(lu.LuaUnit.run())
