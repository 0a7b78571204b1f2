-- test_codegen_cuda.lua: wb.compile's generated kernels on device cuda, run on the mock plugin
-- (WB_CUDA_PLUGIN): the core writes CUDA C, the plugin "compiles" it (the mock checks the kernel's
-- declaration and runs the host build of the same kernel), the core caches the image on disk,
-- loads it and launches it on the stream. Checked: random elementwise DAGs against eager cuda,
-- the warm cache across processes, the trace's kernel name, graph replay with new inputs,
-- explain/source, a compiler failure (WB_MOCK_NVRTC_FAIL) and no NVRTC (WB_MOCK_NO_NVRTC).
local lu = require("luaunit")
local dags = require("random_dags")
local B = require("bounds")
local scratch = require("scratch")

local exe = scratch.exe()
local cache = scratch.path("_cache") -- a private cache folder, made by the first compile
local env = "WB_CACHE_DIR=" .. cache .. " "
local CUDA = {device = "cuda"}

-- the ops eager cuda has (the reference), as in test_codegen.lua's DAGs
local UNARY = {"neg", "gelu", "gelu_tanh"}
local BINARY = {"add", "sub", "mul", "div"}

local function apply(op, a, b)
    if op == "gelu" then return wb.gelu(a) end
    if op == "gelu_tanh" then return wb.gelu(a, {approximate = "tanh"}) end
    if op == "div" and type(b) == "number" then return wb.div(a, 1 + math.abs(b)) end
    if op == "div" then return wb.div(a, b * b + 1) end -- a denominator kept away from 0
    if b ~= nil then return wb[op](a, b) end
    return wb[op](a)
end

local DAGS = {rows = 24, cols = 40, max_ops = 7, binary_share = 0.6, unary = UNARY, binary = BINARY}
local function random_case(rng) return dags.case(rng, DAGS) end

local function run(prog, ninputs, ...) return dags.run(prog, ninputs, apply, ...) end

local function host(t) return t:to{device = "cpu", dtype = "f32"} end

function test_random_dags_on_cuda_equal_eager()
    local seed = tonumber(os.getenv("WB_CODEGEN_SEED") or "14")
    math.randomseed(seed)
    local rng = math.random
    local generated = {f32 = 0, bf16 = 0}
    for _, dtype in ipairs({"f32", "bf16"}) do
        for case = 1, 30 do
            local shapes, prog = random_case(rng)
            local inputs = {}
            for i, s in ipairs(shapes) do inputs[i] = wb.randn(s, {dtype = dtype, device = "cuda"}) end
            local want = run(prog, #shapes, table.unpack(inputs))
            local fast = wb.compile(function(...) return run(prog, #shapes, ...) end)
            local got = fast(table.unpack(inputs))
            lu.assertEquals(got.device, "cuda")
            local ex = fast:explain()
            if ex:find("group wb_poi_fused_") then generated[dtype] = generated[dtype] + 1 end
            if ex:find("failed", 1, true) then lu.fail(string.format("seed %d case %d (%s):\n%s", seed, case, dtype, ex)) end
            -- eager and compiled within the eager program's forward error bound (a device's GELUs
            -- with their cancellation term), then again on new values (the captured graph replayed)
            for call = 1, 2 do
                if call == 2 then
                    for i, s in ipairs(shapes) do inputs[i] = wb.randn(s, {dtype = dtype, device = "cuda"}) end
                    want, got = run(prog, #shapes, table.unpack(inputs)), fast(table.unpack(inputs))
                end
                local z = dags.bound(prog, inputs, {device = true, div_square = true})
                for name, y in pairs({eager = want, compiled = got}) do
                    local i, j, g, w, e = B.first_outside(host(y):expand(shapes[1]), z)
                    if i then
                        lu.fail(string.format("seed %d case %d (%s), %s, call %d: [%d][%d] = %.9g, expected %.9g, "
                            .. "|difference| %.3g > bound %.3g\n%s", seed, case, dtype, name, call, i, j, g, w,
                            math.abs(g - w), e, ex))
                    end
                end
            end
        end
    end
    for dtype, n in pairs(generated) do
        lu.assertTrue(n >= 10, string.format("only %d %s cases generated a kernel", n, dtype))
    end
end

function test_explain_source_trace_and_graph()
    local f = wb.compile(function(g, u) return wb.gelu(g, {approximate = "tanh"}) * u + 1 end, {fuse = false})
    local g, u = wb.randn({4, 33}, CUDA), wb.randn({33}, CUDA)
    f(g, u)
    local ex = f:explain()
    lu.assertStrContains(ex, "group wb_poi_fused_gelu_mul_add_0: gelu_tanh mul add (2 inputs)")
    local src = f:source("wb_poi_fused_gelu_mul_add_0")
    lu.assertStrContains(src, 'extern "C" __global__ void wb_poi_fused_gelu_mul_add_0(wb_cuda_poi_args a)')
    lu.assertStrContains(src, "wb_gelu_tanh(v0)")
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    local y = f(g, u)
    p:stop()
    local kernels = {}
    for _, e in ipairs(p:events()) do
        if e.cat == "kernel" then kernels[e.name] = (kernels[e.name] or 0) + 1 end
    end
    lu.assertEquals(kernels.wb_poi_fused_gelu_mul_add_0, 1)
    -- the host build's gelu is the cpu's vector math, the mock's eager gelu libm's: both within
    -- the bound of gelu_tanh(g) * u + 1
    local prog = {{op = "gelu_tanh", a = 1}, {op = "mul", a = 3, b = 2}, {op = "add", a = 4, b = 1.0}}
    B.assert_within_bound(host(y), dags.bound(prog, {g, u}, {device = true}), "generated")
    B.assert_within_bound(host(wb.gelu(g, {approximate = "tanh"}) * u + 1), dags.bound(prog, {g, u}, {device = true}),
        "eager")
    -- the compiled call is a replay of the captured CUDA graph: the kernel came from its launch
    lu.assertEquals(kernels.wb_poi_fused_gelu_mul_add_0, 1)
    local launches = 0
    for _, e in ipairs(p:events()) do
        if e.cat == "runtime" and e.name == "cudaGraphLaunch" then launches = launches + 1 end
    end
    lu.assertEquals(launches, 1)
    local g2 = wb.randn({4, 33}, CUDA)
    B.assert_within_bound(host(f(g2, u)), dags.bound(prog, {g2, u}, {device = true}), "generated, new input")
end

function test_inplace_on_an_intermediate_on_cuda()
    local fn = function(x, y)
        local b = x * 2
        local p = wb.neg(b) * y -- read before the write: its kernel stays before it
        b:fill_(1)
        b:narrow(2, 1, 3):copy_(y:narrow(2, 2, 3))
        return p + 1, b * x + y
    end
    local f = wb.compile(fn)
    for _ = 1, 3 do
        local x, y = wb.randn({3, 9}, CUDA), wb.randn({3, 9}, CUDA)
        local want, got = {fn(x, y)}, {f(x, y)}
        -- -(2x) * y + 1 and 1 * x + y (y's first three columns copied into b): a rounding or two
        local z1 = dags.bound({{op = "mul", a = 1, b = 2.0}, {op = "neg", a = 3}, {op = "mul", a = 4, b = 2},
            {op = "add", a = 5, b = 1.0}}, {x, y})
        B.assert_within_bound(host(got[1]), z1, "compiled p + 1: " .. f:explain())
        B.assert_within_bound(host(want[1]), z1, "eager p + 1")
        lu.assertEquals(wb.max_abs_diff(host(got[2]), host(want[2])), 0, "b * x + y: one rounding each, the same")
    end
    lu.assertStrContains(f:explain(), "wb_poi_fused_neg_mul_0, fill_, narrow, narrow, copy_")
end

local function child(prefix, code)
    local f = assert(io.popen(prefix .. env .. exe .. " -e '" .. code .. "' 2>&1"))
    local out = f:read("a")
    f:close()
    return out
end

function test_warm_cache_second_process_does_not_compile()
    local code = 'local f = wb.compile(function(a, b) return wb.neg(a) * b + 1 end) ' ..
        'local a, b = wb.randn({3, 40}, {device = "cuda"}), wb.randn({3, 40}, {device = "cuda"}) ' ..
        'print("diff", wb.max_abs_diff(f(a, b):to{device = "cpu"}, (wb.neg(a) * b + 1):to{device = "cpu"})) ' ..
        'local i = wb.codegen.info() print("counts", i.device_compiles, i.device_hits)'
    local first, second = child("", code), child("", code)
    lu.assertStrContains(first, "diff\t0.0")
    lu.assertStrContains(first, "counts\t1\t0")
    lu.assertStrContains(second, "diff\t0.0")
    lu.assertStrContains(second, "counts\t0\t1")
    -- a corrupt image is rebuilt
    for img in io.popen("ls " .. cache .. "/*.cubin"):lines() do
        local fh = io.open(img, "w")
        fh:write("not an image")
        fh:close()
    end
    lu.assertStrContains(child("", code), "counts\t1\t0")
end

function test_compiler_failure_runs_eagerly_with_the_first_error_line()
    local out = child("WB_MOCK_NVRTC_FAIL=1 ", 'local f = wb.compile(function(a) return wb.neg(a) * a end) ' ..
        'local x = wb.randn({2, 6}, {device = "cuda"}) ' ..
        'print("diff", wb.max_abs_diff(f(x):to{device = "cpu"}, (wb.neg(x) * x):to{device = "cpu"})) print(f:explain())')
    lu.assertStrContains(out, "diff\t0.0")
    lu.assertStrContains(out, "runs eagerly: codegen: NVRTC failed on " .. cache)
    lu.assertStrContains(out, 'error: identifier "wb_mock_undefined" is undefined')
end

function test_no_nvrtc_turns_cuda_codegen_off_and_says_why_once()
    local out = child("WB_MOCK_NO_NVRTC=1 ", 'local f = wb.compile(function(a) return wb.neg(a) * a end) ' ..
        'local g = wb.compile(function(a) return wb.neg(a) + a end) ' ..
        'local x = wb.randn({2, 6}, {device = "cuda"}) ' ..
        'print("diff", wb.max_abs_diff(f(x):to{device = "cpu"}, (wb.neg(x) * x):to{device = "cpu"})) g(x) ' ..
        'local c = wb.compile(function(a) return wb.neg(a) * a end) c(wb.randn({2, 6})) ' ..
        'print(f:explain()) print(c:explain())')
    lu.assertStrContains(out, "diff\t0.0")
    local _, said = out:gsub("code generation on cuda is off: ", "")
    lu.assertEquals(said, 1, out)
    lu.assertStrContains(out, "code generation on cuda: off (no code generation on cuda: NVRTC is not available: " ..
        "libnvrtc.so.13: cannot open shared object file (mock: WB_MOCK_NO_NVRTC)); its groups run eagerly")
    lu.assertStrContains(out, "group of neg mul: runs eagerly: no code generation on cuda: NVRTC is not available")
    -- the cpu keeps its generated kernels
    lu.assertStrContains(out, "group wb_poi_fused_neg_mul_")
end

scratch.exit(lu.LuaUnit.run())
