-- gemm_bench.lua: our fp32 GEMM against OpenBLAS, measured in the same run.
--
--   workbench experiments/gemm_bench.lua [--sizes 512,1024,2048] [--threads 1,2]
--                                        [--layouts nn,nt,tn,tt] [--rounds 5] [--epilogue-size 1024]
--                                        [--tokens 1,16,128]
--
-- Expectation: with packing from arbitrary strides, all four layouts cost the same; on this
-- 2-core machine we aim at >= 0.95x OpenBLAS on 1 and 2 threads, >= 1.8x our own 1-thread
-- speed on 2 threads at n >= 1024, and bias+GELU in the epilogue at <= 1.05x a plain GEMM.
-- Method: every result is first checked against a double-precision reference (sampled
-- elements) and against OpenBLAS; contenders alternate (A B A B) over rounds; medians are
-- quoted with p10-p90; GFLOP/s are against the FMA peak measured here. Each contender starts
-- after a pause (300 ms with several threads), so the other library's spinning worker threads
-- do not steal a core. Takes about 3 minutes with the defaults.
-- Ratios last.
-- Layout letters follow BLAS (column-major) naming: "tn" is a linear layer (x times W^T).

local args = require("wb.args")
local plural = require("wb.words").plural
local parser = args.parser("gemm_bench.lua", "Our fp32 GEMM against OpenBLAS, measured in the same run: every " ..
    "size, layout and thread count, the MLP's decode-sized linears, the cost of each fused epilogue.")
parser:option("--sizes", "Square GEMM sizes, comma-separated.", "512,1024,2048"):convert(args.ints("--sizes", 1, 65536))
parser:option("--threads", "Thread counts, comma-separated.", "1,2"):convert(args.ints("--threads", 1, 1024))
parser:option("--layouts", "Layouts (BLAS letters), comma-separated.", "nn,nt,tn,tt")
    :convert(args.names("--layouts", {"nn", "nt", "tn", "tt"}))
parser:option("--rounds", "Rounds of alternating the contenders.", "5"):convert(args.int("--rounds", 1, 1000))
parser:option("--epilogue-size", "Size of the epilogue comparison's GEMM.", "1024")
    :convert(args.int("--epilogue-size", 1, 65536))
parser:option("--tokens", "Token counts of the decode-sized linears, comma-separated.", "1,16,128")
    :convert(args.ints("--tokens", 1, 65536))
local opts = args.parse(parser)
local sizes, thread_counts, layouts = opts.sizes, opts.threads, opts.layouts
local rounds, epi_n, token_counts = opts.rounds, opts.epilogue_size, opts.tokens

local have_peer = wb.openblas.available()
print("== gemm_bench ==")
print(string.format("cpu: %s; workbench path: %s; threads available: %d", wb.device_info().name, wb.cpu_isa(),
    wb.get_num_threads()))
if have_peer then
    local info = wb.openblas.info()
    print(string.format("peer: OpenBLAS core %s (%s)", info.corename, info.coretype))
    if info.corename:lower():match("prescott") or info.corename:lower():match("core2") then
        print("WARNING: OpenBLAS runs its SSE kernels here; the comparison understates it (set OPENBLAS_CORETYPE)")
    end
else
    print("peer: OpenBLAS not installed (apt-get install libopenblas0-pthread): ratios are omitted")
end

-- operands for a layout "XY": X describes B (t: B is W^T of a row-major [N,K] W), Y describes A
local function operands(n, layout)
    local lb, la = layout:sub(1, 1), layout:sub(2, 2)
    local a = la == "n" and wb.randn({n, n}) or wb.randn({n, n}):t()
    local b = lb == "n" and wb.randn({n, n}) or wb.randn({n, n}):t()
    return a, b
end

-- rel. error of sampled elements against a double-precision dot product
local function sampled_rel_error(c, a, b, samples)
    local n, k = c.shape[1], a.shape[2]
    local num, den = 0, 0
    for s = 1, samples do
        local r, q = 1 + (s * 7919) % n, 1 + (s * 104729) % c.shape[2]
        local ar, bc = a:select(1, r):tolist(), b:select(2, q):tolist()
        local ref = 0
        for p = 1, k do ref = ref + ar[p] * bc[p] end
        local got = c:select(1, r):select(1, q):item()
        num, den = num + (got - ref) ^ 2, den + ref ^ 2
    end
    return math.sqrt(num / den)
end

local function median(t)
    local s = {}
    for i2, v in ipairs(t) do s[i2] = v end
    table.sort(s)
    local m = #s
    return m % 2 == 1 and s[(m + 1) // 2] or (s[m // 2] + s[m // 2 + 1]) / 2, s[math.max(1, math.floor(m * 0.1 + 0.5))],
        s[math.min(m, math.ceil(m * 0.9))]
end

-- Times contenders alternately over rounds; returns {name = {median, p10, p90}} in microseconds.
local function race(contenders, iters_per_round)
    local samples = {}
    for _, c in ipairs(contenders) do samples[c[1]] = {} end
    for _ = 1, rounds do
        for _, c in ipairs(contenders) do
            wb.sleep_ms(wb.get_num_threads() > 1 and 300 or 100) -- let spinning worker threads go idle
            local r = wb.bench(c[2], {warmup = 1, iters = iters_per_round, max_iters = iters_per_round, min_time_ms = 0})
            for _, v in ipairs(r.samples_us) do table.insert(samples[c[1]], v) end
        end
    end
    local out = {}
    for name, s in pairs(samples) do out[name] = {median(s)} end
    return out
end

local rows, epi_rows, small_rows, bf16_rows = {}, {}, {}, {}
local own_gflops = {}
for _, threads in ipairs(thread_counts) do
    wb.set_num_threads(threads)
    if have_peer then wb.openblas.set_num_threads(threads) end
    local peak = wb.cpu_peak_gflops(threads)
    print(string.format("\n-- %s: measured FMA peak %.1f GFLOP/s", plural(threads, "thread"), peak))
    for _, n in ipairs(sizes) do
        for _, layout in ipairs(layouts) do
            local a, b = operands(n, layout)
            local c = wb.matmul(a, b)
            local err = sampled_rel_error(c, a, b, 48)
            assert(err < 1e-4, string.format("gemm_bench: rel. error %.2e at n=%d %s: result is wrong", err, n, layout))
            local peer_err
            if have_peer then peer_err = wb.rel_error(c, wb.openblas.matmul(a, b)) end
            local flops = 2.0 * n * n * n
            local iters = math.max(2, math.floor(2e9 / flops))
            local t = race({{"ours", function() local _ = wb.matmul(a, b) end},
                have_peer and {"openblas", function() local _ = wb.openblas.matmul(a, b) end} or nil}, iters)
            local ours = t.ours
            local row = {threads = threads, n = n, layout = layout, err = err, peer_err = peer_err,
                ms = ours[1] / 1e3, p10 = ours[2] / 1e3, p90 = ours[3] / 1e3, gflops = flops / ours[1] / 1e3}
            row.pct = 100 * row.gflops / peak
            if t.openblas then
                row.peer_ms = t.openblas[1] / 1e3
                row.peer_gflops = flops / t.openblas[1] / 1e3
                row.ratio = t.openblas[1] / ours[1]
            end
            own_gflops[threads .. ":" .. n .. ":" .. layout] = row.gflops
            rows[#rows + 1] = row
            print(string.format("  n=%-5d %s  ours %8.2f ms  %6.1f GFLOP/s (%3.0f%% of peak)%s   rel.err %.1e", n,
                layout, row.ms, row.gflops, row.pct,
                row.ratio and string.format("   openblas %8.2f ms %6.1f GFLOP/s   ratio %.2fx", row.peer_ms,
                    row.peer_gflops, row.ratio) or "", err))
        end
    end
    -- decode-sized linears (the MLP sweep's shapes): x[tokens, 768] W[3072, 768]^T, weights
    -- packed once by wb.linear; OpenBLAS multiplies the same transposed view
    for _, tokens in ipairs(token_counts) do
        local x, w = wb.randn({tokens, 768}), wb.randn({3072, 768})
        local err = wb.rel_error(wb.linear(x, w), have_peer and wb.openblas.matmul(x, w:t()) or wb.matmul(x, w:t()))
        assert(err < 1e-5, "gemm_bench: small-M linear disagrees with the reference")
        local flops = 2.0 * tokens * 768 * 3072
        local t = race({{"ours", function() local _ = wb.linear(x, w) end},
            have_peer and {"openblas", function() local _ = wb.openblas.matmul(x, w:t()) end} or nil},
            math.max(3, math.floor(3e8 / flops)))
        local r = {threads = threads, tokens = tokens, us = t.ours[1], gflops = flops / t.ours[1] / 1e3}
        if t.openblas then r.peer_us, r.ratio = t.openblas[1], t.openblas[1] / t.ours[1] end
        small_rows[#small_rows + 1] = r
        print(string.format("  linear 768->3072, tokens %-4d ours %8.1f us %6.1f GFLOP/s%s", tokens, r.us, r.gflops,
            r.ratio and string.format("   openblas %8.1f us   ratio %.2fx", r.peer_us, r.ratio) or ""))
    end
    -- epilogue cost: one linear-shaped GEMM (tn) with and without the fused epilogues
    local n = epi_n
    local x, w, bias = wb.randn({n, n}), wb.randn({n, n}), wb.randn({n})
    local variants = {
        {"plain", function() local _ = wb.linear(x, w) end},
        {"bias", function() local _ = wb.linear(x, w, bias) end},
        {"gelu_tanh", function() local _ = wb.linear(x, w, {activation = "gelu_tanh"}) end},
        {"bias+gelu_tanh", function() local _ = wb.linear(x, w, bias, {activation = "gelu_tanh"}) end},
        {"bias+gelu_erf", function() local _ = wb.linear(x, w, bias, {activation = "gelu"}) end},
    }
    local t = race(variants, math.max(2, math.floor(2e9 / (2.0 * n * n * n))))
    for _, v in ipairs(variants) do
        epi_rows[#epi_rows + 1] = {threads = threads, name = v[1], ms = t[v[1]][1] / 1e3,
            ratio = t[v[1]][1] / t.plain[1]}
    end
    -- bf16 against f32, same shape and layout (linear-shaped, weights packed once)
    local xh, wh = x:to{dtype = "bf16"}, w:to{dtype = "bf16"}
    local tb = race({{"f32", function() local _ = wb.linear(x, w) end},
        {"bf16", function() local _ = wb.linear(xh, wh) end}}, math.max(2, math.floor(2e9 / (2.0 * n * n * n))))
    bf16_rows[#bf16_rows + 1] = {threads = threads, n = n, f32_ms = tb.f32[1] / 1e3, bf16_ms = tb.bf16[1] / 1e3,
        ratio = tb.f32[1] / tb.bf16[1]}
end

print("\n== results (medians; p10-p90 in ms) ==")
print(string.format("%-3s %-5s %-3s %9s %15s %8s %6s %11s %8s %7s", "thr", "n", "lay", "ours ms", "p10-p90",
    "GFLOP/s", "%peak", "openblas ms", "GFLOP/s", "ratio"))
for _, r in ipairs(rows) do
    print(string.format("%-3d %-5d %-3s %9.2f %7.2f-%-7.2f %8.1f %5.0f%% %11s %8s %7s", r.threads, r.n, r.layout,
        r.ms, r.p10, r.p90, r.gflops, r.pct, r.peer_ms and string.format("%.2f", r.peer_ms) or "-",
        r.peer_gflops and string.format("%.1f", r.peer_gflops) or "-", r.ratio and string.format("%.2fx", r.ratio) or "-"))
end
print("\n== decode-sized linears (768 -> 3072, W packed once; OpenBLAS on x W^T) ==")
for _, r in ipairs(small_rows) do
    print(string.format("  %d thread(s)  tokens %-4d ours %8.1f us  %6.1f GFLOP/s   openblas %8s us   ratio %s", r.threads,
        r.tokens, r.us, r.gflops, r.peer_us and string.format("%.1f", r.peer_us) or "-",
        r.ratio and string.format("%.2fx", r.ratio) or "-"))
end
print("\n== epilogue cost (linear-shaped GEMM, n = " .. epi_n .. ") ==")
for _, r in ipairs(epi_rows) do
    print(string.format("  %d thread(s)  %-15s %8.2f ms   %.3fx plain", r.threads, r.name, r.ms, r.ratio))
end

print("\n== bf16 GEMM (linear-shaped, n = " .. epi_n .. "; f32 accumulation) ==")
local cpuinfo = io.open("/proc/cpuinfo")
local has_bf16 = cpuinfo and cpuinfo:read("a"):find("avx512_bf16", 1, true)
if cpuinfo then cpuinfo:close() end
local describe = {avx512bf16 = "vdpbf16ps on k-pairs", avx2bf16 = "k-pairs widened in registers",
    widen = "bf16 widened to f32 once, the f32 kernels", emulated = "k-pairs in portable C",
    auto = "k-pairs widened in AVX2 registers up to 6 rows, widened once above"}
print(string.format("  path: %s (%s); this CPU %s AVX512_BF16", wb.cpu_bf16(), describe[wb.cpu_bf16()] or "?",
    has_bf16 and "has" or "lacks"))
for _, r in ipairs(bf16_rows) do
    print(string.format("  %-10s  f32 %8.2f ms   bf16 %8.2f ms", plural(r.threads, "thread"), r.f32_ms, r.bf16_ms))
end

print("\n== ratios (the bars: >= 0.95x OpenBLAS; 2 threads >= 1.8x own 1 thread at n >= 1024; bias+gelu <= 1.05x; " ..
    "bf16 >= 1.8x f32 on 1 thread) ==")
for _, threads in ipairs(thread_counts) do
    local worst, best
    for _, r in ipairs(rows) do
        if r.threads == threads and r.ratio then
            worst = (not worst or r.ratio < worst.ratio) and r or worst
            best = (not best or r.ratio > best.ratio) and r or best
        end
    end
    if worst then
        print(string.format("  vs OpenBLAS, %s: worst %.2fx (n=%d %s), best %.2fx (n=%d %s)", plural(threads, "thread"),
            worst.ratio, worst.n, worst.layout, best.ratio, best.n, best.layout))
    end
end
for _, r in ipairs(rows) do
    if r.threads == 2 and r.n >= 1024 and own_gflops["1:" .. r.n .. ":" .. r.layout] then
        print(string.format("  own 2 threads / 1 thread, n=%d %s: %.2fx", r.n, r.layout,
            r.gflops / own_gflops["1:" .. r.n .. ":" .. r.layout]))
    end
end
for _, r in ipairs(small_rows) do
    if r.ratio then
        print(string.format("  linear 768->3072 tokens %d, %s: %.2fx OpenBLAS", r.tokens, plural(r.threads, "thread"),
            r.ratio))
    end
end
for _, r in ipairs(epi_rows) do
    if r.name == "bias+gelu_tanh" or r.name == "bias+gelu_erf" then
        print(string.format("  %s epilogue, %s: %.3fx plain GEMM", r.name, plural(r.threads, "thread"), r.ratio))
    end
end
for _, r in ipairs(bf16_rows) do
    print(string.format("  bf16 GEMM speed vs f32, n=%d, %s: %.2fx", r.n, plural(r.threads, "thread"), r.ratio))
end
