-- test_cuda_gpu.lua: device "cuda" with a GPU (or the mock plugin in its place, as CTest runs it
-- everywhere): every cuda op against the cpu result, views on device tensors, the trace's
-- structure (one kernel per linear, `tn` in cuBLAS's name, GeGLU kernel counts), graph replay
-- equal to eager and wb.compile's generated kernels. The tests skip with the reason when no GPU
-- is present; with WB_REQUIRE_GPU=1 (scripts/gpu_check.sh) a skip is a failure. The tests
-- without a GPU are in test_cuda.lua.
local lu = require("luaunit")
local scratch = require("scratch")
local B = require("bounds")
local C = require("cuda_common")

local EXE, REQUIRE = C.EXE, C.REQUIRE
local sh, gpu = C.sh, C.gpu

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
    -- every activation of the list (act_list.h) runs the plugin's kernel of its line (the list's
    -- CUDA column, one kernel named after it), a few ULPs from the cpu's in f32 and one bf16
    -- rounding from it in bf16
    local acts = 0
    for _, op in ipairs(wb._ops()) do
        if not op.method then
            acts = acts + 1
            for _, c in ipairs({{"f32", 2e-6}, {"bf16", 8e-3}}) do
                local x = a:to{device = "cpu", dtype = c[1]}
                local dx = x:to{device = "cuda"}
                local p = wb.profiler.profile({activities = {"cpu", "device"}}, function()
                    wb.profiler.range("act", function() return wb[op.name](dx) end)
                    wb.synchronize("cuda")
                end)
                local names = {}
                for _, e in ipairs(p:events()) do if e.cat == "kernel" then names[#names + 1] = e.name end end
                lu.assertEquals(#names, 1, op.name .. " " .. c[1] .. ": " .. table.concat(names, ", "))
                lu.assertStrContains(names[1], op.name)
                local got = wb[op.name](dx):to{device = "cpu", dtype = "f32"}:tolist()
                local want = wb[op.name](x):to{dtype = "f32"}:tolist()
                for i = 1, #want do
                    for j = 1, #want[i] do
                        local g, w = got[i][j], want[i][j]
                        lu.assertTrue(math.abs(g - w) <= c[2] * math.max(math.abs(w), 1e-6), string.format(
                            "%s %s [%d][%d]: device %.9g, cpu %.9g", op.name, c[1], i, j, g, w))
                    end
                end
            end
        end
    end
    lu.assertTrue(acts >= 6, "silu, sigmoid, relu, tanh, exp and softplus at least")
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
    -- of the driver API (cuBLASLt launches through it), launches only, and none of the runtime's
    -- queries (cuBLASLt calls cudaGetDevice on every matmul): no internal calls on the host lane
    local unexpected = {}
    for _, e in ipairs(p:events()) do
        if e.cat == "runtime" and not (e.name:find("aunch") or e.name:find("ynchronize") or e.name:find("^sync wait")) then
            unexpected[#unexpected + 1] = e.name
        end
    end
    lu.assertEquals(unexpected, {}, "on the host lane: " .. table.concat(unexpected, ", "))
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
