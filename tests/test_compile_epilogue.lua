-- test_compile_epilogue.lua: wb.compile's generated GEMM epilogues: a linear/matmul followed by
-- a pointwise group on its result is one GEMM kernel whose driver applies the generated C to each
-- block of the output (op generated_gemm), within eager's forward error bound; explain, source()
-- and the trace's args say so; what cannot be an epilogue says why; bad shapes are named.
local lu = require("luaunit")
local B = require("bounds")
local scratch = require("scratch")
local kernels_of = require("compiled").kernels_in_region

local function block(x, w, b, y, r) return wb.sigmoid(wb.linear(x, w, b)) * y + r end

-- sigmoid(x W^T + b) * y + r, bounded: the GEMM's sum (bias included), the activation, the mul
-- and the add, each rounded once
local function block_bound(x, w, b, y, r)
    local full = {}
    for i = 1, x:dim() - 1 do full[i] = x.shape[i] end
    full[#full + 1] = w.shape[1]
    local z = B.act("sigmoid", B.linear(B.input(x), B.input(w), B.input(b)))
    return B.add(B.mul(z, B.input(y:expand(full))), B.input(r:expand(full)))
end

-- Before: two kernels (the GEMM with its bias, then a generated sigmoid_mul_add). The bias is added
-- in the GEMM's own store, where eager's linear adds it, and the epilogue's math is the generated
-- pointwise kernel's: the result is eager's bit for bit (it was not while the generated code added
-- the bias to the finished sum).
function test_linear_then_pointwise_is_one_gemm_kernel()
    wb.manual_seed(21)
    local f = wb.compile(block)
    -- ragged row and column tiles, a 3-D input, and epilogue operands of the full shape, a row
    -- vector and a column
    for _, case in ipairs({{x = {1, 64}, n = 48, y = {1, 48}}, {x = {7, 64}, n = 48, y = {7, 48}},
        {x = {33, 40}, n = 37, y = {37}}, {x = {2, 5, 64}, n = 48, y = {2, 5, 1}}}) do
        local x, w, b = wb.randn(case.x), wb.randn({case.n, case.x[#case.x]}), wb.randn({case.n})
        local y, r = wb.randn(case.y), wb.randn({case.n})
        local what = table.concat(case.x, "x") .. " -> " .. case.n
        local got = f(x, w, b, y, r)
        B.assert_within_bound(got, block_bound(x, w, b, y, r), "compiled " .. what)
        B.assert_within_bound(block(x, w, b, y, r), block_bound(x, w, b, y, r), "eager " .. what)
        lu.assertEquals(wb.max_abs_diff(got, block(x, w, b, y, r)), 0, "bit for bit with eager: " .. what)
        -- a new bias is bound into the replayed launch (the GEMM's bias pointer is one of its arguments)
        local b2 = wb.randn({case.n})
        lu.assertEquals(wb.max_abs_diff(f(x, w, b2, y, r), block(x, w, b2, y, r)), 0, "new bias: " .. what)
        -- a strided bias (a column of a [n, 2] tensor) is made contiguous for the GEMM's store
        local sb = wb.randn({case.n, 2}):select(2, 2)
        lu.assertEquals(wb.max_abs_diff(f(x, w, sb, y, r), block(x, w, sb, y, r)), 0, "strided bias: " .. what)
        local ks = kernels_of(function() f(x, w, b, y, r) end)
        lu.assertEquals(#ks, 1, what .. ": " .. f:explain())
        lu.assertStrMatches(ks[1].name, "wb_sgemm_[%w]+_%d+x%d+_tn_bias_epi_sigmoid_mul_add_%d+")
        lu.assertEquals(ks[1].args.ops, "linear sigmoid mul add")
        lu.assertEquals(ks[1].args.epilogue, "bias_sigmoid_mul_add")
        -- a later call follows new data
        local x2 = wb.randn(case.x)
        B.assert_within_bound(f(x2, w, b, y, r), block_bound(x2, w, b, y, r), "compiled, new input " .. what)
    end
    local ex = f:explain()
    lu.assertStrContains(ex, "linear sigmoid mul add (2 epilogue inputs; the bias added in the GEMM's store), in the " ..
        "GEMM's epilogue, applied per block in L2: one kernel reads x, the weight and 3 inputs once, writes 1")
    lu.assertStrContains(ex, "cut at: in1 argument 4; in2 argument 5; in3 argument 3; out a result of the function")
    local name = ex:match("kernels: (wb_sgemm_[%w_]+)")
    local src = f:source(name)
    lu.assertStrContains(src, "void wb_epi_sigmoid_mul_add_")
    lu.assertStrContains(src, "(const void *ctx, float *c, int64_t ldc, int64_t row0, int64_t col0")
    lu.assertStrContains(src, "linear sigmoid mul add (the GEMM's store adds the bias first) */")
    lu.assertNil(src:find("a->in[2]", 1, true), "the epilogue reads 2 inputs, never the bias")
    -- per row, pointers step by a constant stride (2-D output): no offset arithmetic in the row loop
    lu.assertStrContains(src, "const float *p0 = in0 + i * s0;")
    lu.assertEquals(f:source(ex:match("group (wb_epi_[%w_]+)")), src)
end

function test_matmul_and_activation_rules_leave_room_for_the_epilogue()
    wb.manual_seed(22)
    local x, m, y = wb.randn({9, 40}), wb.randn({40, 24}), wb.randn({9, 24})
    local f = wb.compile(function(a, k, c) return wb.gelu(wb.matmul(a, k)) * c end)
    local got = f(x, m, y)
    local z = B.mul(B.act("gelu", B.linear(B.input(x), B.input(m:t()))), B.input(y))
    B.assert_within_bound(got, z, "gelu(matmul) * y")
    local ks = kernels_of(function() f(x, m, y) end)
    lu.assertEquals(#ks, 1, f:explain())
    lu.assertStrMatches(ks[1].name, "wb_sgemm_[%w]+_%d+x%d+_nn_epi_gelu_mul_%d+") -- no bias: none in the name
    lu.assertEquals(ks[1].args.epilogue, "gelu_mul")
    -- a weight argument of another call: the plan takes m:t() again on each call
    local m2 = wb.randn({40, 24})
    B.assert_within_bound(f(x, m2, y), B.mul(B.act("gelu", B.linear(B.input(x), B.input(m2:t()))), B.input(y)),
        "new weight")
end

-- The kernel's kind says what its epilogue does, as its fields (bias, the generated ops): in the
-- live events, in the exported trace, and as `workbench diff` reads the trace back (it rebuilds
-- kinds from the fields). Before, the epilogue field said "none" for a GEMM that added a bias and
-- ran three generated ops.
function test_generated_epilogue_is_in_the_kernel_kind()
    wb.manual_seed(23)
    local f = wb.compile(block)
    local x, w, b, y, r = wb.randn({16, 32}), wb.randn({24, 32}), wb.randn({24}), wb.randn({16, 24}), wb.randn({24})
    f(x, w, b, y, r) -- compiled before the profiles: both record the same calls
    -- every pointer of the launch is rebound on replay, the weight's packing key too: an input
    -- whose pointer the launch's layout did not list would be copied into the captured buffer on
    -- each call instead, and explain would name it
    local copied = {}
    for i in f:explain():gmatch("input (%d+) is copied on each call") do copied[#copied + 1] = tonumber(i) end
    lu.assertEquals(copied, {}, f:explain())
    local traces = {}
    for i = 1, 2 do
        local p = wb.profiler.profile({activities = {"cpu", "device"}}, function() f(x, w, b, y, r) end)
        traces[i] = scratch.path(".json")
        p:export_chrome_trace(traces[i])
    end
    local doc = require("cjson").decode(scratch.read(traces[1]))
    local found
    for _, e in ipairs(doc.traceEvents) do
        if e.cat == "kernel" and e.args and e.args.ops == "linear sigmoid mul add" then found = e end
    end
    lu.assertNotNil(found, "no generated GEMM kernel in the trace")
    lu.assertEquals(found.args.epilogue, "bias_sigmoid_mul_add")
    local exe = scratch.exe()
    local out, err, code = scratch.run_split(string.format("%s diff --json '%s' '%s'", exe, traces[1], traces[2]))
    lu.assertEquals(code, 0, err)
    local paths = {}
    for _, n in ipairs(require("cjson").decode(out).nodes) do
        if n.cat == "kernel" and n.path:find("kernel op=sgemm", 1, true) then paths[#paths + 1] = n.path end
    end
    lu.assertEquals(#paths, 1, table.concat(paths, "\n"))
    lu.assertStrContains(paths[1], "kernel op=sgemm,isa=" .. wb.cpu_isa() .. ",layout=tn,epilogue=bias_sigmoid_mul_add")
end

-- What stays out of the epilogue says why; the result is still right.
function test_what_cannot_be_an_epilogue_says_why()
    local x, w, y = wb.randn({6, 32}), wb.randn({16, 32}), wb.randn({6, 16})
    local f = wb.compile(function(a, k, c)
        local h = wb.linear(a, k)
        return wb.sigmoid(h) * c, h
    end)
    local s, h = f(x, w, y)
    lu.assertEquals(wb.max_abs_diff(s, wb.sigmoid(wb.linear(x, w)) * y), 0)
    lu.assertEquals(wb.max_abs_diff(h, wb.linear(x, w)), 0)
    lu.assertStrContains(f:explain(), "not in linear's epilogue: its result is read by 2 ops")
    local xb, wb16, yb = x:to{dtype = "bf16"}, w:to{dtype = "bf16"}, y:to{dtype = "bf16"}
    local g = wb.compile(function(a, k, c) return wb.sigmoid(wb.linear(a, k)) * c end)
    -- (bf16: the generated sigmoid*mul rounds once where eager rounds twice)
    lu.assertTrue(wb.allclose(g(xb, wb16, yb), wb.sigmoid(wb.linear(xb, wb16)) * yb, {rtol = 1e-2, atol = 1e-2}))
    lu.assertStrContains(g:explain(), "not in linear's epilogue: epilogues are generated for f32 on the cpu (not yet " ..
        "bf16: its GEMM driver has no epilogue hook), so the group is a kernel of its own")
end

function test_bad_shapes_are_named()
    local f = wb.compile(block)
    local ok, err = pcall(f, wb.randn({7, 64}), wb.randn({48, 64}), wb.randn({48}), wb.randn({5, 48}), wb.randn({48}))
    lu.assertFalse(ok)
    lu.assertStrContains(err, "mul: shapes {7, 48} and {5, 48} do not broadcast")
    -- the op itself refuses an epilogue input that does not broadcast to the output, naming both
    local g = wb.compile(block)
    local x, w, b, y, r = wb.randn({7, 64}), wb.randn({48, 64}), wb.randn({48}), wb.randn({7, 48}), wb.randn({48})
    g(x, w, b, y, r)
    local k
    for _, kernel in pairs(g.kernels) do k = kernel end
    ok, err = pcall(wb.codegen.gemm, k, x, w, wb.randn({5, 48}), r, b)
    lu.assertFalse(ok)
    lu.assertStrContains(err, "generated_gemm: shapes {5, 48} and {7, 48} do not broadcast")
    ok, err = pcall(wb.codegen.gemm, k, x, w, wb.randn({2, 7, 48}), r, b)
    lu.assertStrContains(err, "epilogue input 1 of shape {2, 7, 48} does not broadcast to the output's shape {7, 48}")
    ok, err = pcall(wb.codegen.gemm, k, x, wb.randn({48, 60}), y, r, b)
    lu.assertStrContains(err, "input of shape {7, 64} does not match the weight's {48, 60}")
    ok, err = pcall(wb.codegen.gemm, k, x, w, y, r)
    lu.assertStrContains(err, "takes 3 inputs (the epilogue's, then the GEMM's bias), got 2")
    ok, err = pcall(wb.codegen.gemm, k, x, w, y, r, wb.randn({47}))
    lu.assertFalse(ok)
    lu.assertStrContains(err, "generated_gemm: the bias of shape {47} does not fit the 48 output columns (expected {48})")
    ok, err = pcall(wb.codegen.gemm, k, x, w, y, r, wb.randn({2, 48}))
    lu.assertStrContains(err, "the bias of shape {2, 48} does not fit the 48 output columns")
    ok, err = pcall(wb.codegen.build, {symbol = "wb_x", source = "", ops = "add", dtype = "f32", inputs = 1,
        bias = true})
    lu.assertFalse(ok)
    lu.assertStrContains(err, "codegen.build: bias = true is for a GEMM epilogue (epilogue = true)")
    ok, err = pcall(wb.codegen.build, {symbol = "wb_x", source = "", ops = "add", dtype = "f32", inputs = 3,
        epilogue = true, bias = true})
    lu.assertStrContains(err, "codegen.build: a GEMM epilogue takes 0 to 2 inputs besides the GEMM's bias")
    ok, err = pcall(wb.codegen.run, k, {7, 48}, y, r, b)
    lu.assertStrContains(err, "is a GEMM epilogue (wb.codegen.gemm runs it)")
end

-- A compiler that fails: the GEMM and the op run as they would without generation, and explain
-- says why (a child process: its own cache folder and compiler).
function test_failing_compiler_leaves_the_gemm_alone()
    local code = "local f = wb.compile(function(x, w, y) return wb.linear(x, w) * y end) " ..
        "local x, w, y = wb.randn({3, 8}), wb.randn({4, 8}), wb.randn({3, 4}) " ..
        "print('diff', wb.max_abs_diff(f(x, w, y), wb.linear(x, w) * y)) print(f:explain())"
    local out = io.popen("CC=/bin/false WB_CACHE_DIR=" .. scratch.path("_cache") .. " " .. scratch.exe() ..
        " -e \"" .. code .. "\" 2>&1"):read("a")
    lu.assertStrContains(out, "diff\t0.0")
    lu.assertStrContains(out, "2 kernels: linear, mul")
    lu.assertStrContains(out, "group of mul: runs eagerly: not in linear's epilogue: codegen: the C compiler failed")
end

scratch.exit(lu.LuaUnit.run())
