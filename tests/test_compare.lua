-- test_compare.lua: `workbench compare A.json B.json`: alignment by key columns, verdicts with a
-- noise threshold from the recorded spread, structural and fingerprint differences, and
-- malformed input (non-zero exit, clear message).
local lu = require("luaunit")
local cjson = require("cjson")

local EXE = os.getenv("WB_EXE") or "build/workbench"

local function write(doc)
    local path = os.tmpname() .. ".json"
    local f = assert(io.open(path, "w"))
    f:write(type(doc) == "string" and doc or cjson.encode(doc))
    f:close()
    return path
end

local function run(a, b)
    local err = os.tmpname()
    local p = io.popen(string.format("%s compare '%s' '%s' 2>%s", EXE, a, b, err))
    local out = p:read("a")
    local _, _, code = p:close()
    local f = io.open(err)
    local e = f:read("a")
    f:close()
    return out, e, code
end

local function doc(rows, fp)
    return {name = "sweep", keys = {"tokens", "mode"}, columns = {"tokens", "mode", "median_ms", "p10_ms", "p90_ms",
        "gflops", "kernels"}, rows = rows, fingerprint = fp or {cpu = "X", threads = 2, commit = "abc"}}
end

TestCompare = {}

function TestCompare:test_verdicts_structure_and_fingerprint()
    local a = write(doc({
        {tokens = 1, mode = "eager", median_ms = 10, p10_ms = 9.9, p90_ms = 10.1, gflops = 5, kernels = 5},
        {tokens = 1, mode = "dual", median_ms = 8, p10_ms = 7.9, p90_ms = 8.1, gflops = 6, kernels = 2},
        {tokens = 16, mode = "eager", median_ms = 20, p10_ms = 10, p90_ms = 30, gflops = 9, kernels = 5},
    }))
    local b = write(doc({
        {tokens = 1, mode = "eager", median_ms = 10.1, p10_ms = 10, p90_ms = 10.2, gflops = 4.95, kernels = 5},
        {tokens = 1, mode = "dual", median_ms = 6, p10_ms = 5.9, p90_ms = 6.1, gflops = 8, kernels = 3},
        {tokens = 16, mode = "eager", median_ms = 26, p10_ms = 16, p90_ms = 36, gflops = 7, kernels = 5},
        {tokens = 16, mode = "graph", median_ms = 19, p10_ms = 18, p90_ms = 20, gflops = 9.5, kernels = 5},
    }, {cpu = "Y", threads = 2, commit = "def"}))
    local out, err, code = run(a, b)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "rows aligned on: tokens, mode")
    lu.assertStrMatches(out, ".*tokens=1 mode=eager%s+median_ms.-same.*")
    lu.assertStrMatches(out, ".*tokens=1 mode=dual%s+median_ms.-0%.750x faster.*")
    lu.assertStrMatches(out, ".*tokens=1 mode=dual%s+gflops.-faster.*")
    -- 30% slower but inside the recorded +-50% spread: the same
    lu.assertStrMatches(out, ".*tokens=16 mode=eager%s+median_ms.-1%.300x same %(noise 50%%%).*")
    lu.assertStrContains(out, "only in B: tokens=16 mode=graph")
    lu.assertStrContains(out, "tokens=1 mode=dual: 2 kernels -> 3")
    lu.assertStrContains(out, "cpu: X -> Y")
    lu.assertStrContains(out, "commit: abc -> def")
    lu.assertNotStrContains(out, "threads:")
end

function TestCompare:test_same_file_is_all_same()
    local a = write(doc({{tokens = 1, mode = "eager", median_ms = 3, p10_ms = 2.9, p90_ms = 3.1, gflops = 1, kernels = 5}}))
    local out, _, code = run(a, a)
    lu.assertEquals(code, 0)
    lu.assertStrContains(out, "verdicts: 2 same, 0 faster, 0 slower, 0 changed")
    lu.assertStrContains(out, "structural differences: none")
    lu.assertStrContains(out, "fingerprint differences: none")
end

function TestCompare:test_malformed_input()
    local good = write(doc({}))
    local _, err, code = run("/nonexistent/a.json", good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "workbench compare: cannot read /nonexistent/a.json")
    _, err, code = run(write("{\"rows\": [1, "), good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "is not valid JSON")
    _, err, code = run(write({hello = "world"}), good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "is not a workbench results file")
    _, err, code = run(write({columns = {}, rows = {1}}), good)
    lu.assertEquals(code, 2)
    lu.assertStrContains(err, "row 1 is not an object")
    local p = io.popen(EXE .. " compare only_one.json 2>&1")
    local out = p:read("a")
    local _, _, c = p:close()
    lu.assertEquals(c, 2)
    lu.assertStrContains(out, "usage: workbench compare A.json B.json")
end

function TestCompare:test_two_runs_of_the_same_script()
    local dir = os.tmpname() .. "_runs"
    local sweep = (os.getenv("WB_SOURCE_DIR") or ".") .. "/experiments/mlp_sweep.lua"
    for _, run in ipairs({"a", "b"}) do
        local p = io.popen(string.format("%s %s --tokens 1,4 --modes eager,dual --dim 32 --hidden 64 --rounds 1 " ..
            "--iters 3 --no-peer --out %s/%s 2>&1", EXE, sweep, dir, run))
        local out = p:read("a")
        local _, _, code = p:close()
        lu.assertEquals(code, 0, out)
    end
    local out, err, code = run(dir .. "/a/mlp_sweep.json", dir .. "/b/mlp_sweep.json")
    os.execute("rm -rf '" .. dir .. "'")
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "rows aligned on: tokens, mode")
    lu.assertStrMatches(out, ".*tokens=4 mode=dual%s+median_ms.-x (%a+) %(noise.*")
    lu.assertStrContains(out, "verdicts: ")
    lu.assertStrContains(out, "structural differences: none")
end

os.exit(lu.LuaUnit.run())
