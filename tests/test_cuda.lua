-- test_cuda.lua: device "cuda" without a GPU (every CI machine): clear errors that say why, the
-- cpu fallback of --device auto, a missing or foreign plugin refused with the reason, and CUDA's
-- and cuBLASLt's rules kept by the mock plugin (each case in a process of its own on the mock).
-- The tests with a GPU are in test_cuda_gpu.lua. With a GPU these have nothing to check and
-- return (not a skip: scripts/gpu_check.sh runs both files with WB_REQUIRE_GPU=1).
local lu = require("luaunit")
local scratch = require("scratch")
local C = require("cuda_common")

local EXE, WHY = C.EXE, C.WHY
local sh, raises, skip, no_gpu = C.sh, C.raises, C.skip, C.no_gpu

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
    lu.assertStrContains(out, "WB_CUDA_PLUGIN=/nonexistent/libwb_cuda.so: No such file or directory") -- named
    local bogus = scratch.path()
    local f = io.open(bogus, "w")
    f:write("not a shared object\n")
    f:close()
    out = sh("WB_CUDA_PLUGIN=" .. bogus .. " " .. EXE .. " -e 'print(wb.cuda.why_not())'")
    os.remove(bogus)
    lu.assertStrContains(out, "the CUDA plugin cannot be loaded: ")
end

-- the mock plugin beside the executable: the rules of the real one, on host memory
local MOCK = scratch.exe():gsub("workbench$", "libwb_cuda_mock.so")

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

function TestNoGpu:test_default_device_is_auto_unless_wb_device_says()
    if not no_gpu() then return end
    -- no --device, no WB_DEVICE: auto, which is the cpu here, decided without loading the plugin
    local out, rc = sh("env -u WB_DEVICE " .. EXE .. " -e 'print(wb.options.device, wb.zeros({1}).device)'")
    lu.assertEquals(rc, 0, out)
    lu.assertStrContains(out, "cpu\tcpu")
    -- on the mock (a usable cuda), auto is cuda; WB_DEVICE=cpu and --device cpu keep the cpu
    local mock = "env -u WB_DEVICE WB_CUDA_PLUGIN=" .. MOCK .. " "
    out, rc = sh(mock .. EXE .. " -e 'print(wb.options.device, wb.zeros({1}).device)'")
    lu.assertEquals(rc, 0, out)
    lu.assertStrContains(out, "cuda\tcuda")
    out = sh(mock .. "WB_DEVICE=cpu " .. EXE .. " -e 'print(wb.options.device)'")
    lu.assertStrContains(out, "cpu")
    out = sh(mock .. "WB_DEVICE=cuda " .. EXE .. " --device cpu -e 'print(wb.options.device)'")
    lu.assertStrContains(out, "cpu")
    -- a bad WB_DEVICE is named like a bad option (status 2); cuda where it cannot run fails (1)
    out, rc = sh("WB_DEVICE=gpu0 " .. EXE .. " -e 'print(1)'")
    lu.assertEquals(rc, 2, out)
    lu.assertStrContains(out, "workbench: WB_DEVICE=gpu0: unknown device 'gpu0'")
    out, rc = sh("WB_DEVICE=cuda " .. EXE .. " -e 'print(1)'")
    lu.assertEquals(rc, 1, out)
    lu.assertStrContains(out, "workbench: WB_DEVICE=cuda: device 'cuda' is not available: ")
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
    local plugin = scratch.exe():gsub("workbench$", "libwb_cuda.so")
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
    local exe_needed = sh("objdump -p " .. scratch.exe() .. " | grep NEEDED")
    lu.assertNil(exe_needed:find("cuda", 1, true), exe_needed)
end

scratch.exit(lu.LuaUnit.run())
