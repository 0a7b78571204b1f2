-- test_environment.lua: wb.environment: the environment variables that change measurements are
-- recorded in a results fingerprint by a real run (WB_*, OMP_*, ...; nothing else), also under
-- --sandbox, and two runs' differences are named as compare and history print them.
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")
local environment = require("wb.environment")

local EXE = scratch.exe()

-- A results file saved by another workbench process with `vars` set before it (a shell prefix,
-- "NAME=value ...") and the workbench options `options`; returns its fingerprint.
local function saved_under(vars, options)
    local dir = scratch.dir()
    local script = scratch.file([[
local r = wb.results("env", {keys = {"k"}, quiet = true})
r:add{k = 1, median_ms = 1}
r:save{} -- in --out
]], ".lua")
    local out, code = scratch.run(string.format("%s %s %s --out %s %s", vars, EXE, options or "", dir, script))
    lu.assertEquals(code, 0, out)
    return cjson.decode(scratch.read(dir .. "/env.json")).fingerprint
end

TestEnvironment = {}

function TestEnvironment:test_a_run_records_its_variables_and_no_others()
    local fp = saved_under("WB_GEMM_BLOCKING=40,24,64 OMP_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell " ..
        "NOT_WB_THING=1 WBX=2 HOME_OMP_=3")
    local vars = environment.of(fp)
    lu.assertEquals(vars.WB_GEMM_BLOCKING, "40,24,64")
    lu.assertEquals(vars.OMP_NUM_THREADS, "1")
    lu.assertEquals(vars.OPENBLAS_CORETYPE, "Haswell")
    lu.assertEquals(fp.env_WB_GEMM_BLOCKING, "40,24,64") -- a flat field of its own (a merge joins them)
    lu.assertEquals(vars.WB_DEVICE, os.getenv("WB_DEVICE")) -- inherited ones too (ctest pins cpu)
    for name in pairs(vars) do
        local family = false
        for _, p in ipairs(environment.PREFIXES) do family = family or name:sub(1, #p) == p end
        lu.assertTrue(family, "recorded outside the families: " .. name)
    end
    lu.assertNil(vars.NOT_WB_THING)
    lu.assertNil(vars.WBX)
    lu.assertNil(vars.HOME_OMP_)
    lu.assertStrContains(fp.environment, "WB_* OMP_*")
    -- a run that set none of them still says it looked, unlike an older file that recorded nothing
    lu.assertEquals(environment.of({environment = fp.environment}), {})
    lu.assertNil(environment.of({cpu = "X"}))
    -- the binding takes a list of prefixes and nothing else
    lu.assertErrorMsgContains("environment: prefix 2 is not a string", wb._environment, {"WB_", 5})
end

-- A sandboxed script cannot list the environment, but its results still record it (wb.results
-- took the binding when it loaded, before the sandbox removed wb._*).
function TestEnvironment:test_a_sandboxed_run_records_them_too()
    local fp = saved_under("WB_GEMM_BLOCKING=40,24,64", "--sandbox")
    lu.assertEquals(environment.of(fp).WB_GEMM_BLOCKING, "40,24,64")
end

-- A script cannot widen the families: environment.PREFIXES is a copy (a red-team pass had a sandboxed
-- script set it to {""} and print, then save, every variable of the process).
function TestEnvironment:test_a_script_cannot_widen_what_is_listed()
    local dir = scratch.dir()
    local script = scratch.file([[
local env = require("wb.environment")
env.PREFIXES[1] = ""
env.PREFIXES[#env.PREFIXES + 1] = "SECRET"
print("listed:", env.current().SECRET_TOKEN)
local r = wb.results("env", {keys = {"k"}, quiet = true})
r:add{k = 1, median_ms = 1}
r:save{}
]], ".lua")
    local out, code = scratch.run(string.format("SECRET_TOKEN=hunter2 %s --sandbox --out %s %s", EXE, dir, script))
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "listed:\tnil")
    lu.assertNotStrContains(scratch.read(dir .. "/env.json"), "hunter2")
end

function TestEnvironment:test_differences_are_named_both_ways()
    local a = {environment = "WB_*", env_WB_GEMM_BLOCKING = "40,24,64", env_OMP_NUM_THREADS = "1",
        env_WB_DEVICE = "cpu"}
    local b = {environment = "WB_*", env_OMP_NUM_THREADS = "2", env_WB_DEVICE = "cpu", env_WB_CPU_ISA = "avx2"}
    local d = environment.differences(a, b)
    lu.assertEquals(d, {{name = "OMP_NUM_THREADS", a = "1", b = "2"}, {name = "WB_CPU_ISA", b = "avx2"},
        {name = "WB_GEMM_BLOCKING", a = "40,24,64"}})
    lu.assertEquals(environment.joined(d, environment.versus),
        "OMP_NUM_THREADS=1 vs 2; WB_CPU_ISA unset vs avx2; WB_GEMM_BLOCKING=40,24,64 vs unset")
    lu.assertEquals(environment.joined(d, environment.change),
        "OMP_NUM_THREADS: 1 -> 2; WB_CPU_ISA: unset -> avx2; WB_GEMM_BLOCKING: 40,24,64 -> unset")
    lu.assertEquals(environment.differences(a, a), {})
    lu.assertEquals({environment.differences({cpu = "X"}, b)}, {nil, "A"})
    lu.assertEquals({environment.differences(a, {})}, {nil, "B"})
    lu.assertEquals({environment.differences({}, {})}, {nil, "either"})
    -- values from files anyone may hand over: escaped and cut, never raw escape sequences
    local long = {environment = "WB_*", ["env_WB_X\27"] = "\27[31m" .. string.rep("x", 200)}
    local shown = environment.joined(environment.differences(long, b), environment.versus)
    lu.assertStrContains(shown, "WB_X\\027=\\027[31mxxx")
    lu.assertStrContains(shown, "... (205 characters) vs unset")
    lu.assertTrue(environment.is_field("env_WB_DEVICE") and environment.is_field("environment"))
    lu.assertFalse(environment.is_field("machine_start_load1"))
end

scratch.exit(lu.LuaUnit.run())
