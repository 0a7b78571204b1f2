-- test_cuda.lua: device "cuda". Without a GPU (every CI machine): clear errors that say why,
-- the cpu fallback of --device auto, and nothing else broken. With one: every cuda op against
-- the cpu result, views on device tensors, the trace's structure (one kernel per linear, `tn` in
-- cuBLAS's name, GeGLU kernel counts) and graph replay equal to eager. GPU tests skip with the
-- reason when no GPU is present; with WB_REQUIRE_GPU=1 (scripts/gpu_check.sh) a skip is a failure.
local lu = require("luaunit")
local scratch = require("scratch")
local B = require("bounds")

local EXE = os.getenv("WB_EXE") or "workbench"
local HAVE = wb.cuda.is_available()
local WHY = wb.cuda.why_not()

local function sh(cmd)
    local f = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
    local out = f:read("a")
    f:close()
    local rc = tonumber(out:match("rc=(%d+)%s*$"))
    return out:gsub("rc=%d+%s*$", ""), rc
end

local function raises(pattern, fn)
    local ok, err = pcall(fn)
    lu.assertFalse(ok, "expected an error containing: " .. pattern)
    lu.assertStrContains(tostring(err), pattern)
end

local REQUIRE = os.getenv("WB_REQUIRE_GPU") == "1"

-- a test that cannot run here: skipped, or failed where a GPU is required
local function skip(reason)
    if REQUIRE then lu.fail("skipped where WB_REQUIRE_GPU=1 asks for every test: " .. reason) end
    lu.skip(reason)
end

local function gpu()
    if not HAVE then skip("no GPU here: " .. tostring(WHY)) end
end

-- the tests of a machine without a GPU have nothing to check on one (not a skip there)
local function no_gpu()
    if HAVE and not REQUIRE then lu.skip("a GPU is present") end
    return not HAVE
end

-- ---- without a GPU ------------------------------------------------------------------------------

TestNoGpu = {}

function TestNoGpu:test_reason_is_named()
    if not no_gpu() then return end
    lu.assertFalse(wb.cuda.is_available())
    lu.assertStrContains(WHY, "device 'cuda' is not available: ")
    -- one of the three reasons, never a bare failure
    local named = WHY:find("plugin was not built", 1, true) or WHY:find("no NVIDIA driver", 1, true) or
        WHY:find("no CUDA device", 1, true) or WHY:find("cannot be loaded", 1, true)
    lu.assertTrue(named ~= nil, WHY)
    print("\n  cuda here: " .. WHY)
end

function TestNoGpu:test_every_cuda_request_fails_clearly()
    if not no_gpu() then return end
    raises("zeros: device 'cuda' is not available", function() return wb.zeros({2}, {device = "cuda"}) end)
    raises("randn: device 'cuda' is not available", function() return wb.randn({2}, {device = "cuda"}) end)
    raises("tensor: device 'cuda' is not available", function() return wb.tensor({1, 2}, {device = "cuda"}) end)
    raises("to: device 'cuda' is not available", function() return wb.ones({2}):to{device = "cuda"} end)
    raises("synchronize: device 'cuda' is not available", function() wb.synchronize("cuda") end)
    raises("device_info: device 'cuda' is not available", function() return wb.device_info("cuda") end)
    raises("cuda.memory: device 'cuda' is not available", function() return wb.cuda.memory() end)
    raises("device 'cuda' is not available", function() return wb.nn.Linear(4, 4, {device = "cuda"}) end)
    raises("device 'cuda' is not available", function() return wb.nn.GeGLUMLP(4, 8, {device = "cuda"}) end)
    -- the cpu keeps working after every refusal, profiler and graphs included
    local x, w, b = wb.ones({2, 4}), wb.ones({3, 4}), wb.ones({3})
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    local y = wb.linear(x, w, b)
    p:stop()
    lu.assertEquals(y:tolist()[1][1], 5)
    p:expect{kernels = 1}
    local g = wb.graph.capture(function() return wb.ones({3}) * 2 end)
    g:replay()
    lu.assertEquals(g.outputs[1]:tolist(), {2, 2, 2})
end

function TestNoGpu:test_device_auto_falls_back_to_cpu()
    if not no_gpu() then return end
    local out, rc = sh(EXE .. " --device auto -e 'print(wb.default_device(), wb.zeros({1}).device)'")
    lu.assertEquals(rc, 0, out)
    lu.assertStrContains(out, "cpu\tcpu")
    out, rc = sh(EXE .. " --device cuda -e 'print(1)'")
    lu.assertEquals(rc, 1, out)
    lu.assertStrContains(out, "device 'cuda' is not available: ")
end

function TestNoGpu:test_plugin_missing_or_broken()
    -- WB_CUDA_PLUGIN points the loader elsewhere: a missing file and a file that is no library
    local out = sh("WB_CUDA_PLUGIN=/nonexistent/libwb_cuda.so " .. EXE .. " -e 'print(wb.cuda.why_not())'")
    lu.assertStrContains(out, "the CUDA plugin was not built (no /nonexistent/libwb_cuda.so;")
    local bogus = scratch.path()
    local f = io.open(bogus, "w")
    f:write("not a shared object\n")
    f:close()
    out = sh("WB_CUDA_PLUGIN=" .. bogus .. " " .. EXE .. " -e 'print(wb.cuda.why_not())'")
    os.remove(bogus)
    lu.assertStrContains(out, "the CUDA plugin cannot be loaded: ")
end

-- the mock plugin beside the executable: the rules of the real one, on host memory
local MOCK = (os.getenv("WB_EXE") or ""):gsub("workbench$", "libwb_cuda_mock.so")

-- runs a script in a fresh process on the mock plugin, with extra environment settings
local function on_mock(env, script)
    local path = scratch.path()
    local f = io.open(path, "w")
    f:write(script)
    f:close()
    local out, rc = sh(env .. " WB_CUDA_PLUGIN=" .. MOCK .. " " .. EXE .. " " .. path)
    os.remove(path)
    return out, rc
end

function TestNoGpu:test_abi_handshake_names_the_difference()
    -- a plugin built from another ABI header is refused with what differs, never misread
    for skew, says in pairs({version = "it does not speak version", gemm = "wb_cuda_gemm is 112 bytes there, 104 here",
        record = "wb_cuda_record is 104 bytes there, 112 here", enums = "its enum values differ",
        poi = "wb_cuda_poi_args is 472 bytes there, 464 here"}) do
        local out = on_mock("WB_MOCK_ABI_SKEW=" .. skew, "print(wb.cuda.is_available(), wb.cuda.why_not())")
        lu.assertStrContains(out, "false", false, skew .. ": " .. out)
        lu.assertStrContains(out, "is from another build (ABI mismatch: " .. says, false, skew .. ": " .. out)
    end
    local out = on_mock("", "print(wb.cuda.is_available())")
    lu.assertStrContains(out, "true")
end

-- The mock keeps cuBLASLt's and CUDA's rules: these run everywhere and catch what would break on a GPU.
function TestNoGpu:test_mock_rules_under_aligned_operands()
    -- views that start off cuBLASLt's default 256-byte alignment (4 and 2 bytes in), and a bias
    -- 4 bytes in: refused or, for the bias, a sticky fault unless the plugin says otherwise
    local out, rc = on_mock("", [[
local B = require("bounds")
local function bound(x, w, b) -- x w^T (+ b) of the values as given, stored in their dtype
    local store = function(z) return B.round(z, x.dtype) end
    local z = store(B.linear(B.input(x), B.input(w)))
    -- an under-aligned bias is added by a kernel of its own, after the GEMM's output is stored
    return b and store(B.add(z, B.input(b:view({1, b.shape[1]}):expand(z.v[1] and {#z.v, #z.v[1]})))) or z
end
for _, dt in ipairs({"f32", "bf16"}) do
    local x, w, b = wb.randn({9, 33}, {dtype = dt}), wb.randn({6, 32}, {dtype = dt}), wb.randn({7}, {dtype = dt})
    local dx, dw, db = x:to{device = "cuda"}, w:to{device = "cuda"}, b:to{device = "cuda"}
    local xs, dxs = x:narrow(2, 2, 32), dx:narrow(2, 2, 32)
    local got = wb.linear(dxs, dw, db:narrow(1, 2, 6)):to{device = "cpu", dtype = "f32"}
    local ref = wb.linear(xs:to{dtype = "f32"}, w:to{dtype = "f32"}, b:narrow(1, 2, 6):to{dtype = "f32"})
    print(dt, "linear outside its bound at", B.first_outside(got, bound(xs, w, b:narrow(1, 2, 6))))
    local y = wb.matmul(dxs:narrow(1, 2, 8), dw:t()):to{device = "cpu", dtype = "f32"}
    print(dt, "matmul outside its bound at", B.first_outside(y, bound(xs:narrow(1, 2, 8), w)))
end
print("after", (wb.ones({4}, {device = "cuda"}) * 2):to{device = "cpu"}:tolist()[4])
]])
    lu.assertEquals(rc, 0, out)
    local checked = 0
    for where in out:gmatch("outside its bound at\t([^\n]*)") do
        lu.assertEquals(where, "nil", out)
        checked = checked + 1
    end
    lu.assertEquals(checked, 4, out)
    lu.assertStrContains(out, "after\t2")
end

function TestNoGpu:test_mock_rules_allocation_while_capturing()
    -- matmul on an expanded input makes a temporary (a contiguous copy) that is freed at once;
    -- in the warm-up the next op's output reuses its block, but a capture keeps the blocks it
    -- used, so the capture misses the allocator's cache: cudaMalloc must then run in relaxed
    -- capture mode, or CUDA refuses it and the capture breaks
    local out, rc = on_mock("", [[
local w = wb.randn({16, 8}, {device = "cuda"})
local x = wb.randn({1, 16}, {device = "cuda"})
local f = function() return wb.matmul(x:expand({4, 16}), w) * 2 end
local g1 = wb.graph.capture(f)
local g2 = wb.graph.capture(f)
g1:replay() g2:replay()
-- both replays within the bound of 2 (x w) (doubling is exact), and equal (the same kernels)
local B = require("bounds")
local z = B.linear(B.input(x:expand({4, 16})), B.input(w:t()))
for i = 1, #z.v do for j = 1, #z.v[i] do z.v[i][j], z.e[i][j] = 2 * z.v[i][j], 2 * z.e[i][j] end end
print("replays", B.first_outside(g2.outputs[1], z), B.first_outside(g1.outputs[1], z),
    wb.max_abs_diff(g1.outputs[1]:to{device = "cpu"}, g2.outputs[1]:to{device = "cpu"}))
]])
    lu.assertEquals(rc, 0, out)
    lu.assertStrContains(out, "replays\tnil\tnil\t0.0\n")
end

function TestNoGpu:test_mock_rules_failed_call_leaves_no_stale_error()
    -- a copy to the host inside a captured function fails (CUDA refuses it while capturing); the
    -- next kernel launch must not report that old error as its own
    local out, rc = on_mock("", [[
local x = wb.ones({4}, {device = "cuda"})
local ok, err = pcall(wb.graph.capture, function() return (x * 3):to{device = "cpu"} end)
print("capture", ok, err)
print("next launch", (x + x):to{device = "cpu"}:tolist()[1])
]])
    lu.assertEquals(rc, 0, out)
    lu.assertStrContains(out, "capture\tfalse")
    lu.assertStrContains(out, "operation not permitted when stream is capturing")
    lu.assertStrContains(out, "next launch\t2")
end

function TestNoGpu:test_mock_zero_timestamps_are_left_out()
    -- CUPTI gives 0 when it could not collect a time: no event may land at a negative time
    local out, rc = on_mock("WB_MOCK_ZERO_TIMESTAMPS=1", [[
local x = wb.ones({8, 8}, {device = "cuda"})
local p = wb.profiler.profile({activities = {"cpu", "device"}})
p:start()
wb.profiler.range("r", function() local y = wb.matmul(x, x) + x wb.synchronize("cuda") end)
p:stop()
local neg, kernels = 0, 0
for _, e in ipairs(p:events()) do
    if e.ts_ns < 0 then neg = neg + 1 end
    if e.cat == "kernel" then kernels = kernels + 1 end
end
print("negative", neg, "kernels", kernels, "note", p:stats().device_note)
]])
    lu.assertEquals(rc, 0, out)
    lu.assertStrContains(out, "negative\t0\tkernels\t0")
    lu.assertStrContains(out, "2 device records had no timestamps")
end

function TestNoGpu:test_memsets_are_memsets_not_copies()
    -- cuBLASLt's split-K algorithms zero a workspace before their kernel: a memset record is a
    -- "memset" event (device time of the op that launched it), never a copy
    local out, rc = on_mock("WB_MOCK_GEMM_MEMSET=1", [[
local x = wb.ones({8, 8}, {device = "cuda"})
local p = wb.profiler.profile({activities = {"cpu", "device"}})
p:start()
local y = wb.matmul(x, x)
wb.synchronize("cuda")
p:stop()
for _, e in ipairs(p:events()) do
    if e.name == "Memset" then print("memset event", e.cat, e.lane:sub(1, 4), e.bytes) end
end
print(p:table())
]])
    lu.assertEquals(rc, 0, out)
    lu.assertStrContains(out, "memset event\tmemset\tcuda\t4096")
    lu.assertNotStrContains(out, "memset event\tmemcpy")
    lu.assertNotNil(out:match("\nMemset%s"), "a row of its own in the table: " .. out)
end

function TestNoGpu:test_mock_trace_start_failure_is_reported()
    local out, rc = on_mock("WB_MOCK_TRACE_START_FAIL=1", [[
local x = wb.ones({8, 8}, {device = "cuda"})
local p = wb.profiler.profile({activities = {"cpu", "device"}})
p:start()
local y = wb.matmul(x, x)
wb.synchronize("cuda")
p:stop()
local ops = 0
for _, e in ipairs(p:events()) do if e.cat == "op" then ops = ops + 1 end end
print("ops", ops, "note", p:stats().device_note)
]])
    lu.assertEquals(rc, 0, out)
    lu.assertStrContains(out, "cuda tracing is off: mock: cuptiActivityEnable failed")
    lu.assertNotNil(out:match("ops\t[1-9]"), out)
end

function TestNoGpu:test_plugin_links_no_driver_and_references_the_libraries()
    local plugin = (os.getenv("WB_EXE") or ""):gsub("workbench$", "libwb_cuda.so")
    local f = io.open(plugin, "rb")
    if not f then skip("the CUDA plugin is not built in this build (" .. plugin .. ")") end
    f:close()
    local needed = sh("objdump -p " .. plugin .. " | grep NEEDED")
    lu.assertStrContains(needed, "libcudart.so")
    lu.assertStrContains(needed, "libcublasLt.so")
    lu.assertStrContains(needed, "libcupti.so")
    lu.assertNil(needed:find("libcuda.so", 1, true), "the plugin must not link the driver (stub): " .. needed)
    local undef = sh("nm -D --undefined-only " .. plugin)
    for _, sym in ipairs({"cublasLtMatmul", "cublasLtMatmulAlgoGetHeuristic", "cudaStreamBeginCapture",
        "cudaStreamEndCapture", "cudaGraphInstantiate", "cudaGraphExecUpdate", "cudaGraphLaunch",
        "cuptiActivityEnable", "cuptiActivityFlushAll", "cuptiActivityPushExternalCorrelationId"}) do
        lu.assertStrContains(undef, sym)
    end
    -- and the executable links no CUDA library at all
    local exe_needed = sh("objdump -p " .. os.getenv("WB_EXE") .. " | grep NEEDED")
    lu.assertNil(exe_needed:find("cuda", 1, true), exe_needed)
end

-- ---- with a GPU -------------------------------------------------------------------------------------

TestGpu = {}

-- A device result within the forward error bound z (tests/bounds.lua) of the exact value, which
-- the cpu's result is within too. GELUs on the device are composed from the math library:
-- B.act(..., {device = true}) adds their cancellation term.
local function within(got, z, what) B.assert_within_bound(got:to{device = "cpu", dtype = "f32"}, z, what) end
local function input(t) return B.input(t:to{device = "cpu"}) end
local function lin(x, w, bias, act)
    local z = B.linear(input(x), input(w), bias and input(bias) or nil)
    return act and B.act(act, z, {device = true}) or z
end
-- Same kernels on the same data (a replay, the same op twice): bit for bit, on purpose.
local function same(a, b, what)
    lu.assertEquals(wb.max_abs_diff(a:to{device = "cpu"}, b:to{device = "cpu"}), 0, what)
end
-- a program of test_codegen's kind on cpu copies of the inputs (random_dags.lua's bound)
local dags = require("random_dags")
local function program(prog, inputs) return dags.bound(prog, inputs, {device = true}) end

function TestGpu:test_transfers_and_views()
    gpu()
    for _, dt in ipairs({"f32", "bf16"}) do
        local h = wb.randn({6, 10}, {dtype = dt})
        local d = h:to{device = "cuda"}
        lu.assertEquals(d.device, "cuda")
        lu.assertEquals(d:to{device = "cpu"}:tolist(), h:tolist())
        lu.assertEquals(d:t():contiguous():to{device = "cpu"}:tolist(), h:t():contiguous():tolist())
        lu.assertEquals(d:narrow(2, 3, 4):to{device = "cpu"}:tolist(), h:narrow(2, 3, 4):tolist())
        lu.assertEquals(d:t():stride(), {1, 10}) -- a view on the device: no copy
        lu.assertEquals(d:t():data_ptr(), d:data_ptr())
    end
    lu.assertEquals(wb.ones({3}, {device = "cuda", dtype = "bf16"}):to{dtype = "f32"}:tolist(), {1, 1, 1})
end

function TestGpu:test_pointwise_match_cpu()
    gpu()
    local a, b = wb.randn({33, 17}), wb.randn({17})
    local da, db = a:to{device = "cuda"}, b:to{device = "cuda"}
    -- one op each: within one rounding (and a GELU's ULPs) of the exact value
    for _, op in ipairs({"add", "sub", "mul"}) do
        within(wb[op](da, db), program({{op = op, a = 1, b = 2}}, {a, b}), op)
    end
    local q = B.input(a / b) -- the cpu's quotient, one rounding from the exact one
    within(da / db, B.round(q, "f32"), "div")
    same(-da, -a, "neg: exact")
    within(wb.gelu(da, {approximate = "tanh"}), program({{op = "gelu_tanh", a = 1}}, {a}), "gelu tanh")
    within(wb.gelu(da), program({{op = "gelu", a = 1}}, {a}), "gelu erf")
    local geglu = {{op = "mul", a = 1, b = 2.0}, {op = "gelu_tanh", a = 1}, {op = "mul", a = 3, b = 2}}
    within(wb.geglu(da, da * 2), program(geglu, {a}), "geglu (scalar path: 17 columns)")
    local g, u = wb.randn({8, 64}), wb.randn({8, 64})
    local glu = {{op = "gelu_tanh", a = 1}, {op = "mul", a = 3, b = 2}}
    within(wb.geglu(g:to{device = "cuda"}, u:to{device = "cuda"}), program(glu, {g, u}), "geglu f32x4")
    local g16, u16 = g:to{dtype = "bf16"}, u:to{dtype = "bf16"}
    within(wb.geglu(g16:to{device = "cuda"}, u16:to{device = "cuda"}), program(glu, {g16, u16}), "geglu bf16x8")
    -- contiguous same-dtype operands take the 16-byte kernels (f32x4, bf16x8)
    for _, dt in ipairs({"f32", "bf16"}) do
        local x, y = wb.randn({64, 128}, {dtype = dt}), wb.randn({64, 128}, {dtype = dt})
        local dx, dy = x:to{device = "cuda"}, y:to{device = "cuda"}
        within(dx + dy, program({{op = "add", a = 1, b = 2}}, {x, y}), dt .. " add (vector)")
        within(dx * dy, program({{op = "mul", a = 1, b = 2}}, {x, y}), dt .. " mul (vector)")
        within(wb.gelu(dx, {approximate = "tanh"}), program({{op = "gelu_tanh", a = 1}}, {x}), dt .. " gelu (vector)")
        same(dx:clone(), x, dt .. " copy (vector): exact")
        same(wb.full({64, 128}, 0.5, {device = "cuda", dtype = dt}), wb.full({64, 128}, 0.5, {dtype = dt}),
            dt .. " fill (vector): exact")
    end
end

function TestGpu:test_gemm_layouts_and_epilogues()
    gpu()
    wb.manual_seed(11)
    for _, s in ipairs({{1, 3, 17}, {33, 65, 129}, {128, 96, 64}}) do
        local m, k, n = s[1], s[2], s[3]
        local a, b = wb.randn({m, k}), wb.randn({k, n})
        local da, db = a:to{device = "cuda"}, b:to{device = "cuda"}
        local ab = lin(a, b:t())
        within(wb.matmul(da, db), ab, "nn")
        within(wb.matmul(da, db:t():contiguous():t()), ab, "tn")
        within(wb.matmul(da:t():contiguous():t(), db), ab, "nt")
        local w, bias = wb.randn({n, k}), wb.randn({n})
        local dw, dbias = w:to{device = "cuda"}, bias:to{device = "cuda"}
        within(wb.linear(da, dw, dbias), lin(a, w, bias), "linear bias")
        within(wb.linear(da, dw, dbias, {activation = "gelu"}), lin(a, w, bias, "gelu"), "linear gelu (erf)")
        local tanh_err = wb.rel_error(wb.linear(da, dw, dbias, {activation = "gelu_tanh"}):to{device = "cpu"},
            wb.linear(a, w, bias, {activation = "gelu_tanh"}))
        local erf_err = wb.rel_error(wb.linear(da, dw, dbias, {activation = "gelu_tanh"}):to{device = "cpu"},
            wb.linear(a, w, bias, {activation = "gelu"}))
        print(string.format("\n  cuBLASLt GELU_BIAS epilogue vs tanh form: %.2g, vs erf form: %.2g", tanh_err, erf_err))
        -- the epilogue stands for activation = "gelu_tanh": it must be nearer the tanh form than the erf one
        -- (a question of which formula, not a tolerance: the two forms differ by up to 4.7e-4)
        lu.assertTrue(tanh_err < erf_err and tanh_err < 1e-3,
            string.format("the GELU epilogue is expected to be the tanh form (vs tanh %.2g, vs erf %.2g)", tanh_err,
                erf_err))
        -- bf16 against a reference from the same bf16-rounded inputs
        local a16, w16 = a:to{dtype = "bf16"}, w:to{dtype = "bf16"}
        within(wb.linear(a16:to{device = "cuda"}, w16:to{device = "cuda"}), B.round(lin(a16, w16), "bf16"), "bf16 linear")
    end
end

function TestGpu:test_trace_one_kernel_per_linear_with_tn()
    gpu()
    local x, w, b = wb.randn({64, 128}, {device = "cuda"}), wb.randn({256, 128}, {device = "cuda"}),
        wb.randn({256}, {device = "cuda"})
    wb.linear(x, w, b) -- warm: plans and modules
    wb.synchronize("cuda")
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    wb.profiler.range("lin", function()
        wb.linear(x, w, b)
        wb.synchronize("cuda")
    end)
    p:stop()
    p:expect{range = "lin", ops = {linear = 1, t = 1, addmm = 1}, kernels = 1, no_kernel_for = {"t"}}
    local names, launches = {}, {}
    for _, e in ipairs(p:events()) do
        if e.cat == "kernel" then
            names[#names + 1] = e.name
            lu.assertStrContains(e.lane, "cuda:0 stream")
            lu.assertTrue(e.correlation > 0, "the kernel is correlated to its op")
        elseif e.cat == "runtime" and e.name:find("aunch") then
            launches[#launches + 1] = e.name .. " (cbid " .. tostring(e.args and e.args.cbid) .. ")"
        end
    end
    print("\n  linear kernel: " .. table.concat(names, ", ") .. "\n  launch records: " .. table.concat(launches, ", "))
    -- of the driver API (cuBLASLt launches through it), launches only: no internal calls on the host lane
    for _, e in ipairs(p:events()) do
        if e.cat == "runtime" then
            local expected = e.name:find("aunch") or e.name:find("ynchronize") or e.name:find("^sync wait")
            lu.assertTrue(expected ~= nil, "on the host lane: " .. e.name)
        end
    end
    lu.assertStrContains(names[1]:lower(), "tn")
end

function TestGpu:test_mlp_modes_kernels_and_graphs()
    gpu()
    wb.manual_seed(2)
    local ref_mlp = wb.nn.GeGLUMLP(96, 256, {impl = "eager"}) -- the same seed gives the same weights below
    local x = wb.randn({64, 96})
    local ref = B.mlp(ref_mlp, x, {device = true})
    -- on cuda, dual is one GEMM on [W_gate; W_up] + the fused GeGLU kernel, then down: 3 kernels
    for impl, count in pairs({eager = 5, fused = 4, dual = 3}) do
        wb.manual_seed(2)
        local mlp = wb.nn.GeGLUMLP(96, 256, {impl = impl, device = "cuda"})
        local dx = x:to{device = "cuda"}
        within(mlp(dx), ref, impl)
        wb.synchronize("cuda")
        local p = wb.profiler.profile({activities = {"cpu", "device"}})
        p:start()
        wb.profiler.range("mlp", function()
            mlp(dx)
            wb.synchronize("cuda")
        end)
        p:stop()
        p:expect{range = "mlp", kernels = count}
        -- graph replay equals eager and follows new input data
        local g = wb.graph.capture(function() return mlp(dx) end)
        lu.assertEquals(#g:nodes(), count)
        g:replay()
        same(g.outputs[1], mlp(dx), impl .. " replay: the same kernels")
        dx:copy_(wb.randn({64, 96}, {device = "cuda"}))
        g:replay()
        same(g.outputs[1], mlp(dx), impl .. " replay after new input: the same kernels")
    end
end

function TestGpu:test_recapture_compile_and_trace_kinds()
    gpu()
    local a, w = wb.ones({8}, {device = "cuda"}), wb.full({8}, 2, {device = "cuda"})
    local g = wb.graph.capture(function(x) return x * w end, a)
    lu.assertEquals(g.outputs[1]:to{device = "cpu"}:tolist()[1], 2) -- capture ran it once
    w = wb.full({8}, 5, {device = "cuda"})
    g:recapture(a) -- into the same executable graph (cudaGraphExecUpdate)
    lu.assertEquals(g.outputs[1]:to{device = "cpu"}:tolist()[1], 5)
    a:fill_(3)
    g:replay()
    lu.assertEquals(g.outputs[1]:to{device = "cpu"}:tolist()[1], 15)
    -- wb.compile on cuda: fused, captured, replayed; the same function as eager
    wb.manual_seed(4)
    local mlp = wb.nn.GeGLUMLP(32, 64, {device = "cuda"})
    local f = wb.compile(function(x) return mlp(x) end)
    local x = wb.randn({5, 32}, {device = "cuda"})
    within(f(x), B.mlp(mlp, x, {device = true}), "compiled")
    x:copy_(wb.randn({5, 32}, {device = "cuda"}))
    within(f(x), B.mlp(mlp, x, {device = true}), "compiled, new input")
    -- the trace: copies as memcpy events, API calls with their callback ids, kernels linked
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    local y = (x * 2):to{device = "cpu"}
    p:stop()
    lu.assertEquals(y.device, "cpu")
    local kinds = {}
    for _, e in ipairs(p:events()) do
        kinds[e.cat] = (kinds[e.cat] or 0) + 1
        if e.cat == "runtime" and e.args.cbid then lu.assertTrue(e.args.cbid > 0) end
    end
    lu.assertTrue((kinds.memcpy or 0) >= 1, "a device-to-host copy shows as a memcpy event")
    local tbl = p:table{}
    lu.assertStrContains(tbl, "Memcpy DtoH") -- its own device-time row
    local to_row = tbl:match("\nto +[^\n]*")
    lu.assertNotNil(to_row, tbl)
    lu.assertTrue((kinds.kernel or 0) >= 1)
    local m = wb.cuda.memory()
    lu.assertTrue(m.allocated > 0 and m.peak >= m.allocated)
end

-- wb.compile's generated kernels on cuda (NVRTC on a GPU, the host build on the mock): a group
-- becomes one kernel named after it, inside the captured graph, equal to eager within the math
-- library's ulps (the GPU's expf/erff against the eager kernels' own), f32 and bf16, broadcast
-- and strided inputs, a second call with new values.
function TestGpu:test_codegen_generated_kernel_matches_eager()
    gpu()
    local compiler, why = wb.codegen.compiler("cuda")
    if not compiler then
        if REQUIRE then lu.fail("code generation on cuda is off where a GPU is required: " .. tostring(why)) end
        lu.skip("code generation on cuda is off: " .. tostring(why))
    end
    print("\n  codegen on cuda: " .. compiler)
    for _, dt in ipairs({"f32", "bf16"}) do
        local O = {device = "cuda", dtype = dt}
        local fn = function(g, u, b) return wb.gelu(g, {approximate = "tanh"}) * u + b * 0.5 - wb.gelu(u) end
        local f = wb.compile(fn, {fuse = false})
        local g, u, b = wb.randn({37, 129}, O), wb.randn({129, 37}, O):t(), wb.randn({129}, O)
        -- gelu_tanh(g) * u + b * 0.5 - gelu(u), as a program over g, u, b
        local prog = {{op = "gelu_tanh", a = 1}, {op = "mul", a = 4, b = 2}, {op = "mul", a = 3, b = 0.5},
            {op = "add", a = 5, b = 6}, {op = "gelu", a = 2}, {op = "sub", a = 7, b = 8}}
        within(f(g, u, b), program(prog, {g, u, b}), "generated " .. dt)
        within(fn(g, u, b), program(prog, {g, u, b}), "eager " .. dt)
        local ex = f:explain()
        lu.assertStrContains(ex, "group wb_poi_fused_gelu_mul_mul_add_0: gelu_tanh mul mul add gelu sub (3 inputs)")
        g = wb.randn({37, 129}, O)
        local p = wb.profiler.profile({activities = {"cpu", "device"}})
        p:start()
        local y = f(g, u, b)
        wb.synchronize("cuda")
        p:stop()
        within(y, program(prog, {g, u, b}), "generated " .. dt .. ", new input")
        local named = 0
        for _, e in ipairs(p:events()) do
            if e.cat == "kernel" and e.name == "wb_poi_fused_gelu_mul_mul_add_0" then named = named + 1 end
        end
        lu.assertEquals(named, 1, "the generated kernel in the trace under its name")
    end
end

function TestGpu:test_copies_linked_to_their_to_op()
    gpu()
    local h, d = wb.ones({4}), wb.ones({4}, {device = "cuda"})
    wb.synchronize("cuda")
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    local x = h:to{device = "cuda"}
    local y = d:to{device = "cpu"}
    p:stop()
    local to_ops, copies = {}, {}
    for _, e in ipairs(p:events()) do
        if e.cat == "op" and e.name == "to" then to_ops[#to_ops + 1] = e.id end
        if e.cat == "memcpy" then copies[e.name] = e.correlation end
    end
    lu.assertEquals(#to_ops, 2)
    lu.assertEquals(copies["Memcpy HtoD"], to_ops[1], "the host-to-device copy links to its `to`")
    lu.assertEquals(copies["Memcpy DtoH"], to_ops[2], "the device-to-host copy links to its `to`")
end

function TestGpu:test_profiler_started_before_cuda_sees_its_kernels()
    gpu()
    -- a fresh process whose session starts before the first cuda tensor (CUPTI starts then)
    local script = scratch.path()
    local f = io.open(script, "w")
    f:write([[
local p = wb.profiler.profile({activities = {"cpu", "device"}})
p:start()
local x, w = wb.ones({4, 8}, {device = "cuda"}), wb.ones({3, 8}, {device = "cuda"})
local y = wb.linear(x, w)
wb.synchronize("cuda")
p:stop()
local gemm = 0
for _, e in ipairs(p:events()) do
    if e.cat == "kernel" and e.correlation > 0 then gemm = gemm + 1 end
end
print("kernels linked to ops: " .. gemm, p:stats().device_note)
]])
    f:close()
    local plugin = os.getenv("WB_CUDA_PLUGIN")
    local out, rc = sh((plugin and ("WB_CUDA_PLUGIN=" .. plugin .. " ") or "") .. EXE .. " " .. script)
    os.remove(script)
    lu.assertEquals(rc, 0, out)
    local n = tonumber(out:match("kernels linked to ops: (%d+)"))
    lu.assertTrue(n and n >= 3, out) -- two fills and the GEMM
end

-- the memory timeline keeps one line per device: a cuda tensor moves the cuda line only
function TestGpu:test_memory_timeline_per_device()
    gpu()
    collectgarbage()
    collectgarbage()
    local p = wb.profiler.profile({profile_memory = true}, function()
        local a = wb.ones({256})                      -- 1 KiB on the cpu
        local b = a:to{device = "cuda"}               -- 1 KiB on cuda
        local c = b + b                               -- 1 KiB more on cuda
        wb.synchronize("cuda")
        a, b, c = nil, nil, nil
        collectgarbage()
        collectgarbage()
    end)
    local by_device = {}
    for _, d in ipairs(require("wb.profiler_export").memory_timeline(p:events())) do by_device[d.device] = d end
    lu.assertNotNil(by_device.cpu)
    lu.assertNotNil(by_device.cuda)
    local function levels(d)
        local out, base = {}, d.points[1][2]
        for i = 2, #d.points do out[#out + 1] = d.points[i][2] - base end
        return out, base
    end
    local cuda_levels, cuda_base = levels(by_device.cuda)
    lu.assertEquals(cuda_levels, {1024, 2048, 1024, 0})
    lu.assertEquals(by_device.cuda.peak_bytes - cuda_base, 2048)
    local cpu_levels = levels(by_device.cpu)
    lu.assertEquals(cpu_levels[1], 1024)
    lu.assertEquals(cpu_levels[#cpu_levels], 0)
    for _, l in ipairs(cpu_levels) do lu.assertTrue(l <= 1024, "the cuda tensors counted on the cpu line") end
    -- the Chrome trace has a counter track per device
    local path = scratch.path()
    p:export_chrome_trace(path)
    local text = assert(io.open(path)):read("a")
    os.remove(path)
    lu.assertStrContains(text, '"name": "memory cpu"')
    lu.assertStrContains(text, '"name": "memory cuda"')
end

function TestGpu:test_awkward_shapes_and_strides()
    gpu()
    wb.manual_seed(31)
    local function both(t) return t, t:to{device = "cuda"} end
    -- 3-D input through linear and matmul (leading dims folded), a transposed weight view,
    -- a strided bias, a narrowed input, empty and K = 0 products
    local x, dx = both(wb.randn({2, 3, 17}))
    local w, dw = both(wb.randn({5, 17}))
    local b, db = both(wb.randn({10}))
    within(wb.linear(dx, dw, db:narrow(1, 1, 5)), lin(x, w, b:narrow(1, 1, 5)), "3-D linear, narrowed bias")
    within(wb.matmul(dx, dw:t()), lin(x, w), "3-D matmul with a transposed view")
    local wt, dwt = both(wb.randn({17, 5}))
    within(wb.linear(dx, dwt:t()), lin(x, wt:t()), "weight given as a transposed view")
    local big, dbig = both(wb.randn({9, 40}))
    within(wb.matmul(dbig:narrow(2, 3, 17), dw:t()), lin(big:narrow(2, 3, 17), w), "narrowed rows")
    within(wb.matmul(dbig:t():narrow(1, 2, 17):t(), dw:t()), lin(big:t():narrow(1, 2, 17):t(), w), "column-major input")
    local e = wb.matmul(wb.zeros({0, 4}, {device = "cuda"}), wb.zeros({4, 3}, {device = "cuda"}))
    lu.assertEquals(e.shape, {0, 3})
    local k0 = wb.addmm(db:narrow(1, 1, 3), wb.zeros({2, 0}, {device = "cuda"}), wb.zeros({0, 3}, {device = "cuda"}))
    same(k0, b:narrow(1, 1, 3):view({1, 3}) + wb.zeros({2, 3}), "K = 0: the bias alone, exact")
    -- odd hidden sizes take the scalar GeGLU kernel, in both dtypes, with biases
    for _, dt in ipairs({"f32", "bf16"}) do
        local xx = wb.randn({3, 12}):to{dtype = dt}
        local wg, wu = wb.randn({7, 12}):to{dtype = dt}, wb.randn({7, 12}):to{dtype = dt}
        local bg, bu = wb.randn({7}):to{dtype = dt}, wb.randn({7}):to{dtype = dt}
        -- on cuda: one GEMM on [W_gate; W_up], its output stored in dt, then the GeGLU kernel
        local store = function(z) return dt == "bf16" and B.round(z, "bf16") or z end
        local want = store(B.mul(B.act("gelu_tanh", store(lin(xx, wg, bg)), {device = true}), store(lin(xx, wu, bu))))
        local got = wb.geglu_linear(xx:to{device = "cuda"}, wg:to{device = "cuda"}, wu:to{device = "cuda"},
            bg:to{device = "cuda"}, bu:to{device = "cuda"})
        within(got, want, dt .. " geglu_linear, hidden 7, biases")
    end
    -- a broadcast add and a dtype conversion on the device
    local m, dm = both(wb.randn({4, 1, 6}))
    local v, dv = both(wb.randn({5, 1}))
    same(dm + dv, m + v, "broadcast add to {4, 5, 6}: one correctly rounded add on both")
    same(dm:to{dtype = "bf16"}:to{dtype = "f32"}, m:to{dtype = "bf16"}:to{dtype = "f32"}, "bf16 round trip: exact")
end

scratch.exit(lu.LuaUnit.run())
