-- test_peers.lua: the BLIS and oneDNN comparison peers (wb.blis, wb.dnnl): their GEMMs, oneDNN's
-- linear and its gated MLPs within the forward error bound of the computation (bounds.lua), and
-- one clear line when a library or the peer module is missing. A peer this machine lacks is
-- skipped; the oneDNN peer module, once built next to the executable, must load.
local lu = require("luaunit")
local B = require("bounds")
local scratch = require("scratch")

local exe = scratch.exe()
local exe_dir = exe:match("^(.*)/[^/]*$") or "."
local function exists(path)
    local f = io.open(path)
    if f then f:close() end
    return f ~= nil
end
local dnnl_built = exists(exe_dir .. "/libwb_dnnl_peer.so")

local function mm(a, b) return B.linear(B.input(a), B.input(b:t())) end

-- every layout and awkward sizes, against the bound of an f32 dot product of length k
local function check_gemm(matmul, what)
    wb.manual_seed(31)
    for _, s in ipairs({{1, 37, 1}, {3, 37, 17}, {17, 5, 65}, {33, 129, 31}}) do
        local m, k, n = s[1], s[2], s[3]
        local a, b = wb.randn({m, k}), wb.randn({k, n})
        local at, bt = a:t():contiguous():t(), b:t():contiguous():t()
        for _, pair in ipairs({{a, b, "nn"}, {a, bt, "tn"}, {at, b, "nt"}, {at, bt, "tt"}}) do
            local out = matmul(pair[1], pair[2])
            lu.assertEquals(out.shape, {m, n})
            B.assert_within_bound(out, mm(a, b), string.format("%s %s %dx%dx%d", what, pair[3], m, k, n))
        end
    end
    -- a strided view (row stride 50) and an expanded one (stride 0)
    local big = wb.randn({40, 50})
    local a = big:narrow(1, 3, 17):narrow(2, 5, 31)
    local b = wb.randn({31, 9})
    B.assert_within_bound(matmul(a, b), mm(a, b), what .. " strided")
    local row = wb.randn({1, 31}):expand({6, 31})
    B.assert_within_bound(matmul(row, b), mm(row, b), what .. " expanded")
end

TestBlis = {}

function TestBlis:test_gemm_within_bound_serial_and_pthread()
    lu.skipIf(not wb.blis.available(), "BLIS is not installed")
    for _, threads in ipairs({1, 2}) do
        wb.blis.set_num_threads(threads)
        local info = wb.blis.info()
        lu.assertEquals(info.build, threads == 1 and "blis-serial" or "blis-pthread")
        lu.assertStrMatches(info.version, "%d+%.%d+.*")
        lu.assertTrue(#info.arch > 0)
        check_gemm(wb.blis.matmul, "blis " .. info.build)
    end
    wb.blis.set_num_threads(1)
end

function TestBlis:test_bad_input()
    lu.skipIf(not wb.blis.available(), "BLIS is not installed")
    lu.assertErrorMsgContains("blis.matmul: expects f32 cpu matrices [M,K] x [K,N]",
        function() wb.blis.matmul(wb.zeros({2, 3}), wb.zeros({4, 2})) end)
    lu.assertErrorMsgContains("blis.set_num_threads: 0 threads is out of range", function() wb.blis.set_num_threads(0) end)
end

TestDnnl = {}

function TestDnnl:test_built_module_loads()
    lu.skipIf(not dnnl_built, "the oneDNN peer was not built (no libdnnl-dev)")
    lu.assertTrue(wb.dnnl.available(), tostring(wb.dnnl.why_not()))
    lu.assertNil(wb.dnnl.why_not())
    local info = wb.dnnl.info()
    lu.assertStrMatches(info.version, "oneDNN %d+%.%d+%.%d+ %(.* runtime%)")
    lu.assertTrue(#info.isa > 0)
end

function TestDnnl:test_sgemm_within_bound()
    lu.skipIf(not wb.dnnl.available(), "oneDNN peer not available")
    check_gemm(wb.dnnl.matmul, "dnnl_sgemm")
end

function TestDnnl:test_linear_primitive_with_bias()
    lu.skipIf(not wb.dnnl.available(), "oneDNN peer not available")
    wb.manual_seed(32)
    for _, s in ipairs({{1, 37, 19}, {17, 64, 33}, {33, 129, 65}}) do
        local tokens, k, n = s[1], s[2], s[3]
        local w, bias, x = wb.randn({n, k}), wb.randn({n}), wb.randn({tokens, k})
        for _, b in ipairs({bias, false}) do
            local l = wb.dnnl.linear(w, b or nil, tokens)
            lu.assertTrue(#l:kernel() > 0)
            B.assert_within_bound(l(x), B.linear(B.input(x), B.input(w), b and B.input(b) or nil),
                string.format("dnnl linear %dx%dx%d%s", tokens, k, n, b and " bias" or ""))
            -- the weights were copied: writing ours afterwards changes nothing there
            local before = l(x)
            w:fill_(0.25)
            lu.assertEquals(wb.max_abs_diff(l:forward(x), before), 0)
            l:release()
            lu.assertErrorMsgContains("attempt to use a released oneDNN linear", function() l(x) end)
            w = wb.randn({n, k})
        end
    end
end

function TestDnnl:test_mlps_within_bound_of_eager()
    lu.skipIf(not wb.dnnl.available(), "oneDNN peer not available")
    for _, kind in ipairs({"geglu", "swiglu"}) do
        wb.manual_seed(33)
        local m = wb.nn[kind == "geglu" and "GeGLUMLP" or "SwiGLUMLP"](96, 384, {impl = "eager"})
        for _, tokens in ipairs({1, 16, 33}) do
            local x = wb.randn({tokens, 96})
            local d = wb.dnnl.mlp(m.gate_proj.weight, m.up_proj.weight, m.down_proj.weight, tokens, kind)
            lu.assertStrContains(d:kernels(), kind == "geglu" and "gelu_tanh+mul" or "swish+mul")
            local what = string.format("dnnl %s %d tokens", kind, tokens)
            B.assert_within_bound(d(x), B.mlp(m, x), what)
            -- and the eager forward within its own: the two differ by at most both bounds
            B.assert_within_bound(m(x), B.mlp(m, x), what .. " (eager)")
            d:release()
        end
    end
end

function TestDnnl:test_mlp_bf16_or_a_clear_refusal()
    lu.skipIf(not wb.dnnl.available(), "oneDNN peer not available")
    wb.manual_seed(34)
    local m32 = wb.nn.GeGLUMLP(64, 192, {impl = "eager"})
    local function bf(t) return t:to{dtype = "bf16"} end
    local x = wb.randn({9, 64})
    local ok, d = pcall(wb.dnnl.mlp, bf(m32.gate_proj.weight), bf(m32.up_proj.weight), bf(m32.down_proj.weight), 9)
    if not ok then -- oneDNN 2.6 has bf16 matmuls only where the CPU has AVX-512
        lu.assertStrMatches(tostring(d), "dnnl%.mlp: oneDNN has no bf16 matmul .* on this CPU %(.*%)")
        return
    end
    B.assert_within_bound(d(bf(x)):to{dtype = "f32"}, B.mlp(m32, x, {bf16 = true, inputs_rounded = true}), "dnnl bf16")
end

function TestDnnl:test_bad_input()
    lu.skipIf(not wb.dnnl.available(), "oneDNN peer not available")
    local g, u, d = wb.randn({32, 16}), wb.randn({32, 16}), wb.randn({16, 32})
    lu.assertErrorMsgContains("dnnl.mlp: gate [32,16] needs up [32,16] and down [16,32], got up [32,16] and down [32,16]",
        function() wb.dnnl.mlp(g, u, u, 4) end)
    lu.assertErrorMsgContains("dnnl.mlp: unknown MLP 'reglu' (geglu or swiglu)", function() wb.dnnl.mlp(g, u, d, 4, "reglu") end)
    lu.assertErrorMsgContains("dnnl.mlp: 0 tokens (at least 1)", function() wb.dnnl.mlp(g, u, d, 0) end)
    local mlp = wb.dnnl.mlp(g, u, d, 4)
    lu.assertErrorMsgContains("dnnl.mlp: made for a contiguous f32 input [4,16]", function() mlp(wb.randn({5, 16})) end)
    lu.assertErrorMsgContains("dnnl.mlp: made for a contiguous f32 input [4,16]", function() mlp(wb.randn({16, 4}):t()) end)
    lu.assertErrorMsgContains("dnnl.linear: the weight must be a contiguous f32 cpu matrix [N,K]",
        function() wb.dnnl.linear(g:t(), nil, 3) end)
    lu.assertErrorMsgContains("dnnl.linear: the bias must be a contiguous f32 vector of 32",
        function() wb.dnnl.linear(g, wb.zeros({31}), 3) end)
    lu.assertErrorMsgContains("dnnl.matmul: expects f32 cpu matrices [M,K] x [K,N]",
        function() wb.dnnl.matmul(g, g) end)
end

TestMissing = {}

-- A child workbench whose loader looks where nothing is: one line naming what is missing, no
-- traceback from C, and the peers' availability false.
local function child(env, stmt)
    return scratch.run(string.format("%s '%s' -e '%s'", env, exe, stmt))
end

function TestMissing:test_dnnl_module_missing()
    local out, code = child("WB_DNNL_PEER=/nonexistent/libwb_dnnl_peer.so",
        "print(wb.dnnl.available(), wb.dnnl.why_not())")
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "false\toneDNN peer not built (no /nonexistent/libwb_dnnl_peer.so; install " ..
        "libdnnl-dev and configure again)")
    out, code = child("WB_DNNL_PEER=/nonexistent/libwb_dnnl_peer.so", "wb.dnnl.matmul(wb.zeros({2, 2}), wb.zeros({2, 2}))")
    lu.assertNotEquals(code, 0)
    lu.assertStrContains(out, "dnnl.matmul: oneDNN peer not built (no /nonexistent/libwb_dnnl_peer.so;")
end

function TestMissing:test_dnnl_module_not_loadable()
    local junk = scratch.file("not a shared object", ".so")
    local out = child("WB_DNNL_PEER=" .. junk, "print(wb.dnnl.why_not())")
    lu.assertStrContains(out, "oneDNN peer cannot be loaded (is libdnnl2 installed?): " .. junk)
end

function TestMissing:test_blis_missing()
    local out, code = child("WB_BLIS_DIR=/nonexistent", "print(wb.blis.available()); wb.blis.matmul(wb.zeros({2, 2}), wb.zeros({2, 2}))")
    lu.assertNotEquals(code, 0)
    lu.assertStrContains(out, "false\n")
    lu.assertStrContains(out, "blis.matmul: BLIS (blis-serial): WB_BLIS_DIR=/nonexistent has no usable " ..
        "blis-serial/libblis.so.4: /nonexistent/blis-serial/libblis.so.4")
    out = child("WB_BLIS_DIR=/nonexistent", "wb.blis.set_num_threads(2)")
    lu.assertStrContains(out, "blis.set_num_threads: BLIS (blis-pthread): WB_BLIS_DIR=/nonexistent has no usable " ..
        "blis-pthread/libblis.so.4")
end

-- gemm_bench at a toy size: a column per peer present, with its version and kernels named in
-- the header; a peer missing is one line and no column, and the run goes on without it.
local function gemm_bench(env)
    local cmd = string.format("%s '%s' '%s/experiments/gemm_bench.lua' --only squares --sizes 32 --threads 1 " ..
        "--layouts nn --rounds 1 --max-rounds 1 --out '%s'", env, exe, scratch.source(),
        scratch.path("-gemm_bench"))
    local out, code = scratch.run(cmd)
    lu.assertEquals(code, 0, out)
    return out
end

function TestMissing:test_gemm_bench_columns_and_missing_peers()
    local out = gemm_bench("")
    lu.assertStrContains(out, "best peer")
    if wb.blis.available() then lu.assertStrMatches(out, ".*peer: BLIS [%d.]+, kernels for %S+ %(1 thread: blis%-serial%).*") end
    if wb.dnnl.available() then lu.assertStrMatches(out, ".*peer: oneDNN [%d.]+ %(.- runtime%), JIT kernels for %S+ .*") end
    out = gemm_bench("WB_DNNL_PEER=/nonexistent/libwb_dnnl_peer.so WB_BLIS_DIR=/nonexistent")
    lu.assertStrContains(out, "peer oneDNN: oneDNN peer not built (no /nonexistent/libwb_dnnl_peer.so; install " ..
        "libdnnl-dev and configure again): no oneDNN column\n")
    lu.assertStrContains(out, "peer BLIS: BLIS (blis-serial): WB_BLIS_DIR=/nonexistent has no usable ")
    lu.assertNotStrContains(out, "peer: BLIS")
    lu.assertNotStrContains(out, "oneDNN 2")
end

-- mlp_sweep at toy sizes: oneDNN's MLP checked against eager and timed at every token count by the
-- rule our modes are timed by (rounds of at least --iters forwards), a row of the table with its
-- verdict and noise, a "vs oneDNN" ratio in every mode's row, its kernels named in the footer;
-- without the module, one line saying why.
local function mlp_sweep(env, extra)
    local dir = scratch.path("-mlp_sweep")
    local cmd = string.format("%s '%s' --threads 1 '%s/experiments/mlp_sweep.lua' --tokens 1,5 --dim 32 --hidden 64 " ..
        "--modes eager,dual --rounds 2 --max-rounds 2 --iters 2 --trace-tokens 5 --no-peer --out '%s' %s", env, exe,
        scratch.source(), dir, extra or "")
    local out, code = scratch.run(cmd)
    lu.assertEquals(code, 0, out)
    local f = assert(io.open(dir .. "/mlp_sweep.json"))
    local doc = require("cjson").decode(f:read("a"))
    f:close()
    return out, doc.rows
end

function TestMissing:test_mlp_sweep_vs_onednn()
    lu.skipIf(not wb.dnnl.available(), "oneDNN peer not available")
    for _, kind in ipairs({"geglu", "swiglu"}) do
        local out, rows = mlp_sweep("", "--mlp " .. kind)
        lu.assertStrContains(out, "all modes and oneDNN's MLP agree with eager")
        lu.assertStrMatches(out, ".*\noneDNN: oneDNN [%d.]+ %(.- runtime%) %(%S+, 1 thread%), in this process.*")
        lu.assertStrMatches(out, ".*\n5 +oneDNN +[%d.]+ .* 2 +[%d.]+x %([%d.]+%-[%d.]+%) +%u+.*")
        lu.assertStrContains(out, kind == "geglu" and "gelu_tanh+mul" or "swish+mul")
        lu.assertEquals(#rows, 4)
        for _, r in ipairs(rows) do
            lu.assertTrue(type(r.vs_dnnl) == "number" and r.vs_dnnl > 0, r.mode .. " at " .. r.tokens)
            lu.assertEquals(#r.dnnl_samples_ms_per_round, 2, "two rounds")
            local n = 0
            for _, c in ipairs(r.dnnl_samples_ms_per_round) do
                lu.assertTrue(c >= 2, "at least --iters forwards a round")
                n = n + c
            end
            lu.assertEquals(#r.dnnl_samples_ms, n)
            lu.assertTrue(type(r.dnnl_noise) == "number" and type(r.dnnl_unstable) == "boolean")
            lu.assertNotNil(r.dnnl_speedup_vs_eager_verdict)
        end
    end
    local out, rows = mlp_sweep("", "--no-dnnl")
    lu.assertNotStrContains(out, "oneDNN's MLP")
    lu.assertNil(rows[1].vs_dnnl)
end

function TestMissing:test_mlp_sweep_without_onednn()
    local out, rows = mlp_sweep("WB_DNNL_PEER=/nonexistent/libwb_dnnl_peer.so")
    lu.assertStrContains(out, "(no oneDNN rows: oneDNN peer not built (no /nonexistent/libwb_dnnl_peer.so; install " ..
        "libdnnl-dev and configure again))\n")
    lu.assertNil(rows[1].vs_dnnl)
end

scratch.exit(lu.LuaUnit.run())
