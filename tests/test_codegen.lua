-- test_codegen.lua: wb.compile's generated pointwise kernels: a seeded property test of random
-- elementwise DAGs (compiled vs eager), the warm disk cache across processes, explain/source,
-- the trace's kernel args, and the bad inputs (compiler failure, corrupt cache entry, codegen off).
local lu = require("luaunit")
local dags = require("random_dags")
local B = require("bounds")
local scratch = require("scratch")

local exe = scratch.exe()
-- a private cache folder (the first compile makes it), so the test sees its own compiles (and
-- children inherit it)
local cache = scratch.path("_cache")
local setenv_prefix = "WB_CACHE_DIR=" .. cache .. " "

local apply = dags.apply
local DAGS = {rows = 40, cols = 70, max_ops = 8, binary_share = 0.5, unary = dags.UNARY, binary = dags.BINARY}
local function random_case(rng) return dags.case(rng, DAGS) end

local function run(prog, ninputs, ...) return dags.run(prog, ninputs, apply, ...) end

-- WB_CODEGEN_DTYPES=f32 or bf16 runs one half (CTest runs the halves as two tests, on two
-- cores: each compiles its 130 kernels); the programs are the same either way.
function test_random_dags_compiled_equal_eager()
    local seed = tonumber(os.getenv("WB_CODEGEN_SEED") or "14")
    math.randomseed(seed)
    local rng = math.random
    local wanted = {}
    for d in (os.getenv("WB_CODEGEN_DTYPES") or "f32,bf16"):gmatch("[^,]+") do wanted[d] = true end
    local cases, generated, by_dtype, bounded = 0, 0, {}, {}
    for _, dtype in ipairs({"f32", "bf16"}) do
        if wanted[dtype] then by_dtype[dtype], bounded[dtype] = 0, 0 end
        for case = 1, 130 do
            local shapes, prog = random_case(rng)
            if not wanted[dtype] then goto next_case end
            local inputs = {}
            for i, s in ipairs(shapes) do inputs[i] = wb.randn(s, {dtype = dtype}) end
            local want = run(prog, #shapes, table.unpack(inputs))
            local fast = wb.compile(function(...) return run(prog, #shapes, ...) end)
            local got = fast(table.unpack(inputs))
            local ex = fast:explain()
            if ex:find("group wb_poi_fused_") then generated, by_dtype[dtype] = generated + 1, by_dtype[dtype] + 1 end
            -- a kernel that does not compile runs eagerly and would still agree: that must fail here
            if ex:find("compiler failed", 1, true) then lu.fail(string.format("seed %d case %d (%s):\n%s", seed, case, dtype, ex)) end
            -- both within the eager program's forward error bound of the exact value (the kernel
            -- rounds once where eager rounds every op, so the eager bound holds for it too)
            local z = dags.bound(prog, inputs)
            bounded[dtype] = bounded[dtype] + z.bounded_share
            for name, y in pairs({eager = want, compiled = got}) do
                local i, j, g, w, e = B.first_outside(y:expand(shapes[1]), z)
                if i then
                    lu.fail(string.format("seed %d case %d (%s), %s: [%d][%d] = %.9g, expected %.9g, |difference| %.3g > "
                        .. "bound %.3g\n%s", seed, case, dtype, name, i, j, g, w, math.abs(g - w), e, ex))
                end
            end
            cases = cases + 1
            ::next_case::
        end
    end
    local halves = 0
    for _ in pairs(by_dtype) do halves = halves + 1 end
    lu.assertTrue(halves > 0, "WB_CODEGEN_DTYPES names neither f32 nor bf16")
    lu.assertTrue(cases >= 130 * halves)
    -- a bound is infinite only where an error could reach a denominator's value (long bf16
    -- chains): nearly every element is checked
    for dtype, b in pairs(bounded) do
        print(string.format("\nelements with a finite bound, %s: %.2f%%", dtype, b / 1.3))
        lu.assertTrue(b / 130 > (dtype == "f32" and 0.99 or 0.9), "too few elements bounded")
    end
    lu.assertTrue(generated >= 40 * halves, string.format("only %d of %d cases generated a kernel", generated, cases))
    for dtype, n in pairs(by_dtype) do
        lu.assertTrue(n >= 30, string.format("only %d %s cases generated a kernel", n, dtype))
    end
end

local function child(code)
    local f = assert(io.popen(setenv_prefix .. exe .. " -e '" .. code .. "' 2>&1"))
    local out = f:read("a")
    f:close()
    return out
end

function test_warm_cache_second_process_does_not_compile()
    local code = 'local f = wb.compile(function(a, b) return wb.tanh(a) * b + 1 end) ' ..
        'f(wb.randn({3, 40}), wb.randn({3, 40})) local i = wb.codegen.info() print("counts", i.compiles, i.hits)'
    local first, second = child(code), child(code)
    lu.assertStrContains(first, "counts\t1")
    lu.assertStrContains(second, "counts\t0\t1")
end

function test_corrupt_cache_entry_is_rebuilt()
    local code = 'local f = wb.compile(function(a) return wb.tanh(a) * a end) ' ..
        'local x = wb.randn({2, 9}) local y = f(x) local i = wb.codegen.info() ' ..
        'print("counts", i.compiles, i.hits, wb.max_abs_diff(y, wb.tanh(x) * x))'
    lu.assertStrContains(child(code), "counts\t1\t0\t0.0")
    for so in io.popen("ls " .. cache .. "/*.so"):lines() do
        local f = io.open(so, "w")
        f:write("not an object")
        f:close()
    end
    lu.assertStrContains(child(code), "counts\t1\t0\t0.0")
end

function test_explain_source_and_trace_args()
    local f = wb.compile(function(g, u) return wb.gelu(g, {approximate = "tanh"}) * u end, {fuse = false})
    local g, u = wb.randn({4, 33}), wb.randn({4, 33})
    f(g, u)
    local ex = f:explain()
    lu.assertStrContains(ex, "group wb_poi_fused_gelu_mul_0: gelu_tanh mul")
    local src = f:source("wb_poi_fused_gelu_mul_0")
    lu.assertStrContains(src, "void wb_poi_fused_gelu_mul_0(const wb_poi_args *a)")
    lu.assertStrContains(src, "v_gelu_tanh")
    lu.assertErrorMsgContains("no generated kernel named 'nope'", function() f:source("nope") end)
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    f(g, u)
    p:stop()
    local found
    for _, e in ipairs(p:events()) do
        if e.cat == "kernel" and e.name == "wb_poi_fused_gelu_mul_0" then found = e end
    end
    lu.assertNotNil(found)
    lu.assertEquals(found.args.ops, "gelu_tanh mul")
    -- with the pattern rules on, gelu*mul is the hand-written geglu; codegen=false keeps that path
    local r = wb.compile(function(a, b) return wb.gelu(a, {approximate = "tanh"}) * b end, {codegen = false})
    r(g, u)
    lu.assertStrContains(r:explain(), "code generation: off (compile option codegen = false)")
    lu.assertStrContains(r:explain(), "geglu")
end

function test_compiler_failure_runs_eagerly_with_the_message()
    local out = child('local f = wb.compile(function(a) return wb.exp(a) + a end) local x = wb.randn({2, 5}) ' ..
        'print("diff", wb.max_abs_diff(f(x), wb.exp(x) + x)) print(f:explain())'):gsub("CC=%S+ ", "")
    lu.assertStrContains(out, "diff\t0.0")
    local bad = io.popen("CC=/bin/false " .. setenv_prefix .. exe .. " -e 'local f = wb.compile(function(a) return wb.exp(a) * a end) " ..
        "local x = wb.randn({2, 6}) print(\"diff\", wb.max_abs_diff(f(x), wb.exp(x) * x)) print(f:explain())' 2>&1"):read("a")
    lu.assertStrContains(bad, "diff\t0.0")
    lu.assertStrContains(bad, "runs eagerly: codegen: the C compiler failed on " .. cache)
    local none = io.popen("CC=/nonexistent/cc " .. setenv_prefix .. exe .. " -e 'local f = wb.compile(function(a) return wb.exp(a) * a + 3 end) " ..
        "local x = wb.randn({2, 7}) print(\"diff\", wb.max_abs_diff(f(x), wb.exp(x) * x + 3)) print(f:explain())' 2>&1"):read("a")
    lu.assertStrContains(none, "diff\t0.0")
    lu.assertStrContains(none, "code generation is off: no C compiler")
end

scratch.exit(lu.LuaUnit.run())
