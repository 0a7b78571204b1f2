-- gemm_bench.lua: our GEMMs against the strongest CPU GEMM libraries at hand (OpenBLAS, BLIS,
-- oneDNN) and against the CPU's measured FMA peak, every row with its bar and a verdict.
--
--   workbench experiments/gemm_bench.lua [--sizes 512,1024,2048] [--threads 1,2] [--layouts nn,tn]
--                                        [--tokens 16,128,512] [--rounds 5] [--max-rounds 15]
--                                        [--bf16-size 1024] [--only squares,linears,dual,epilogues,bf16]
--                                        [--out DIR]
--
-- (also printed, without a bar: what each fused epilogue costs against a plain GEMM)
--
-- Expectation (the bars, on the machine at hand): fp32 GEMM >= 1.0x the best of the peers (each
-- with its best kernel for this CPU) at every square size and at the MLP's shapes (768 -> 3072 and 3072 -> 768, tokens 128
-- and 512), 1 and 2 threads; the dual GeGLU MLP at 512 tokens >= 90% of the calibrated FMA peak on
-- 1 thread; bf16 GEMM >= 1.8x own f32 where the CPU has AVX512_BF16 and >= 0.95x where it does
-- not; the one-token bf16 MLP >= 1.8x f32 (it moves half the bytes).
-- Method: every result is first checked against a double-precision reference (sampled elements)
-- and against every peer. The peers, each loaded at run time when installed: OpenBLAS (cblas_sgemm),
-- BLIS (bli_sgemm; its serial build on 1 thread, its pthread build on more), oneDNN (dnnl_sgemm
-- for the squares; for the MLP's linears a matmul primitive made once per shape, its weights
-- reordered once, as ours are packed once); the header names each one's version and the kernels
-- or ISA it chose, a linear row oneDNN's primitive. Within a row, the contenders and the thread
-- counts alternate round by round (ours and each peer on 1 thread, then on 2, ...), each timed
-- over a few calls; a round's ratio is the fastest peer's time in that round over ours, all
-- measured back to back, so a slow spell of a shared host moves them all. Figures are medians
-- over all calls; ratios are the median of the rounds' ratios, with a 95% confidence interval for that median (distribution-free, from the rounds' order
-- statistics: with 5 rounds their range). A row whose interval holds its bar after --rounds keeps
-- alternating, up to --max-rounds, so that a verdict near the bar rests on more rounds (the
-- interval narrows as they come; repeated looks make its coverage somewhat under 95%). After
-- OpenBLAS ran on several threads its workers spin for ~0.1 s: the next
-- contender starts after a pause. % of peak is against the FMA peak calibrated for this CPU,
-- path and thread count (wb.calibrate, cached per machine); the dual MLP's verdict is against the
-- peak measured beside it in each round (also printed). A verdict with "~" is not settled: the
-- interval holds the bar even after --max-rounds, or fewer than 5 rounds ran (the range of 1-4
-- ratios holds the median too rarely to settle anything). The rows, with every call's time, are saved
-- under --out (gemm_bench.json/.csv/.html): `workbench compare A.json B.json` compares two runs.
-- Takes one to three minutes with the defaults (more where verdicts are close); --only runs some
-- sections (e.g. --only dual --rounds 21: the dual MLP's verdict on 21 rounds, in 12-15 s here).
-- Layout letters follow BLAS (column-major) naming: "tn" is a linear layer (x times W^T).

local args = require("wb.args")
local plural = require("wb.words").plural
local calibrate = require("wb.calibrate")
local stats = require("wb.stats")
local parser = args.parser("gemm_bench.lua", "Our GEMMs against OpenBLAS and the measured FMA peak, in the same " ..
    "run: square sizes, the MLP's linears, the dual GeGLU MLP, bf16; every row with its bar and a verdict.")
parser:option("--sizes", "Square GEMM sizes, comma-separated.", "512,1024,2048"):convert(args.ints("--sizes", 1, 65536))
parser:option("--threads", "Thread counts, comma-separated.", "1,2"):convert(args.ints("--threads", 1, 1024))
parser:option("--layouts", "Layouts of the square GEMMs (BLAS letters), comma-separated.", "nn,tn")
    :convert(args.names("--layouts", {"nn", "nt", "tn", "tt"}))
parser:option("--tokens", "Token counts of the MLP's linears, comma-separated.", "16,128,512")
    :convert(args.ints("--tokens", 1, 65536))
parser:option("--rounds", "Rounds of alternating the contenders (at least).", "5"):convert(args.int("--rounds", 1, 1000))
parser:option("--max-rounds", "Rounds a row whose verdict is not settled keeps alternating up to (default: 15, " ..
    "or --rounds when that is more).")
    :convert(args.int("--max-rounds", 1, 1000))
parser:option("--bf16-size", "Size of the bf16-against-f32 and the epilogue GEMMs.", "1024")
    :convert(args.int("--bf16-size", 1, 65536))
local sections = {"squares", "linears", "dual", "epilogues", "bf16"}
parser:option("--only", "Sections to run, comma-separated (default: all): " .. table.concat(sections, ", ") .. ".")
    :convert(args.names("--only", sections))
parser:option("--out", "Output folder (default: out/gemm_bench/<timestamp>-<pid>).")
local opts = args.parse(parser)
local run_section = {}
for _, name in ipairs(opts.only or sections) do run_section[name] = true end
local thread_counts, rounds = opts.threads, opts.rounds
local max_rounds = opts.max_rounds or math.max(15, rounds)
if max_rounds < rounds then
    io.stderr:write(string.format("gemm_bench.lua: --max-rounds (%d) is below --rounds (%d)\n", max_rounds, rounds))
    os.exit(2)
end
local out_dir = opts.out or wb.options.out or ("out/gemm_bench/" .. os.date("%Y%m%d-%H%M%S"))
assert(wb.mkdir_p(out_dir))

-- the thread counts asked for, even while other processes keep the cores busy (the kernels
-- otherwise drop to one thread then, and "2 threads" would not mean 2)
wb.set_threads_adaptive(false)
local have_peer = wb.openblas.available()
-- the peers present, each set to every thread count asked for once (BLIS's pthread build may be
-- missing while its serial one is there: then no BLIS column at all)
local peers = {}
local function add_peer(key, name, lib)
    local ok, err = true, nil
    for _, t in ipairs(thread_counts) do
        if ok then ok, err = pcall(lib.set_num_threads, t) end -- its error says what is missing
    end
    if ok then
        peers[#peers + 1] = {key = key, name = name, set_threads = lib.set_num_threads}
    else
        print(string.format("peer %s: %s: no %s column", name, (tostring(err):gsub("^[%w_.]+: ", "")), name))
    end
end
add_peer("openblas", "OpenBLAS", wb.openblas)
add_peer("blis", "BLIS", wb.blis)
add_peer("dnnl", "oneDNN", wb.dnnl)
local have_dnnl = false
for _, p in ipairs(peers) do have_dnnl = have_dnnl or p.key == "dnnl" end
local cpuinfo = io.open("/proc/cpuinfo")
-- the bf16 bar depends on the pair instruction the path in use has (WB_CPU_ISA=avx2 stands for
-- an AVX2 CPU, bf16 included)
local has_bf16_isa = cpuinfo and cpuinfo:read("a"):find("avx512_bf16", 1, true) and wb.cpu_isa() == "avx512" or false
if cpuinfo then cpuinfo:close() end

print("== gemm_bench ==")
print(string.format("cpu: %s; workbench path: %s (bf16: %s); threads: %s", wb.device_info().name, wb.cpu_isa(),
    wb.cpu_bf16(), table.concat(thread_counts, ", ")))
local blk = wb.cpu_blocking()
local function kib(bytes)
    if not bytes then return "?" end
    return bytes >= 1 << 20 and string.format("%d MiB", bytes >> 20) or string.format("%d KiB", bytes >> 10)
end
print(string.format("blocking: %dx%d tile, kc %d, mc %d, nc %d (%s L1d %s, L2 %s, L3 %s per CPU)", blk.mr, blk.nr,
    blk.kc, blk.mc, blk.nc, blk.fixed and "fixed; caches" or "from", kib(blk.l1), kib(blk.l2), kib(blk.l3_share)))
local peer_core = "-"
if have_peer then
    local info = wb.openblas.info()
    peer_core = info.corename
    print(string.format("peer: %s, core %s (%s)", info.config or "OpenBLAS", info.corename, info.coretype))
    if info.corename:lower():match("prescott") or info.corename:lower():match("core2") then
        print("WARNING: OpenBLAS runs its SSE kernels here; the comparison understates it (set OPENBLAS_CORETYPE)")
    end
else
    print("peer: OpenBLAS not installed (apt-get install libopenblas0-pthread)")
end
if wb.blis.available() then
    local builds = {}
    for _, t in ipairs(thread_counts) do
        wb.blis.set_num_threads(t)
        local i = wb.blis.info()
        builds[#builds + 1] = string.format("%s: %s", plural(t, "thread"), i.build)
    end
    local i = wb.blis.info()
    print(string.format("peer: BLIS %s, kernels for %s (%s)", i.version, i.arch, table.concat(builds, "; ")))
end
if have_dnnl then
    local i = wb.dnnl.info()
    print(string.format("peer: %s, JIT kernels for %s (dnnl_sgemm for the squares; the linears' matmul primitives " ..
        "name theirs in their rows)", i.version, i.isa))
end
if #peers == 0 then print("no peer installed: no ratios, no verdicts against one") end
local peer_names = {} -- the configuration saved with the results: which peers, which versions
for _, p in ipairs(peers) do
    local i = p.key ~= "openblas" and wb[p.key].info()
    peer_names[#peer_names + 1] = p.key == "openblas" and "OpenBLAS " .. peer_core or
        p.key == "blis" and string.format("BLIS %s %s", i.version, i.arch) or string.format("%s %s", i.version, i.isa)
end
peer_names = table.concat(peer_names, "; ")
local peaks = {}
for _, t in ipairs(thread_counts) do
    local e = calibrate.cpu(t)
    peaks[t] = e.peak_gflops
    print(string.format("FMA peak, %s: %.1f GFLOP/s (%s%s)", plural(t, "thread"), e.peak_gflops, e.source,
        e.under_load and ", measured under load" or ""))
end

-- rel. error of sampled elements of c = a b against a double-precision dot product
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

local function quantile(t, q)
    local s = table.move(t, 1, #t, 1, {})
    table.sort(s)
    return stats.percentile(s, q)
end

-- OpenBLAS's workers spin for ~0.1 s after a multi-threaded call: the threads of its last call,
-- kept across races so that the next contender, in this race or the next, waits for them.
local last_peer_threads = 0

-- Runs contenders {name, fn, library} on every thread count, alternating round by round, for
-- --rounds rounds, then on while unsettled(res) says a verdict still needs more, up to
-- --max-rounds. Returns res[threads][name] = {samples = {...us}, per_round = {median us of each
-- round}}, res.rounds; with beside_peak, also peaks = {the FMA peak of each round, the mean of
-- one measured just before and one just after the contender's run} (wb.cpu_peak_gflops, best of
-- three 5 ms runs).
local function race(contenders, iters, beside_peak, unsettled)
    local res = {}
    for _, t in ipairs(thread_counts) do
        res[t] = {}
        for _, c in ipairs(contenders) do res[t][c[1]] = {samples = {}, per_round = {}, peaks = {}} end
    end
    for round = 1, max_rounds do
        if round > rounds and not (unsettled and unsettled(res)) then break end
        res.rounds = round
        for _, t in ipairs(thread_counts) do
            wb.set_num_threads(t)
            for _, p in ipairs(peers) do p.set_threads(t) end
            for _, c in ipairs(contenders) do
                wb.sleep_ms(last_peer_threads > 1 and 150 or 20)
                local before = beside_peak and wb.cpu_peak_gflops(t, 5)
                local r = wb.bench(c[2], {warmup = 1, iters = iters, max_iters = iters, min_time_ms = 0})
                local slot = res[t][c[1]]
                for _, v in ipairs(r.samples_us) do slot.samples[#slot.samples + 1] = v end
                slot.per_round[#slot.per_round + 1] = r.median_us
                if beside_peak then slot.peaks[#slot.peaks + 1] = (before + wb.cpu_peak_gflops(t, 5)) / 2 end
                last_peer_threads = c[3] == "openblas" and t or 0
            end
        end
    end
    return res
end

-- ratio of a over b per round (a's time / b's time: above 1 means b is faster)
local function round_ratios(a, b)
    local r = {}
    for i = 1, #a.per_round do r[i] = a.per_round[i] / b.per_round[i] end
    return r
end

local rows = {}
-- An interval settles a verdict only when it holds the median with at least this probability
-- (stats.median_ci's coverage): five rounds or more. Fewer rounds give the range of one to four
-- ratios, which holds the median 0-88% of the time; a verdict on it is not settled.
local MIN_COVERAGE = 0.9
-- Whether a value's interval holds the bar, or is too short to tell (a verdict not settled yet).
local function straddles(bar, lo, hi, coverage)
    return bar ~= nil and lo ~= nil and (lo < bar and hi >= bar or (coverage or 1) < MIN_COVERAGE)
end

-- race()'s `unsettled` for rows judged by ci(res, t) -> median, lo, hi, coverage against
-- bar_of(t) (nil: no bar on that thread count): true while any row's verdict is not settled.
local function unsettled_when(ci, bar_of)
    return function(res)
        for _, t in ipairs(thread_counts) do
            if straddles(bar_of(t), select(2, ci(res, t))) then return true end
        end
        return false
    end
end

-- The row's verdict from its value against its bar: meets (by the median) and settled (its
-- interval, of enough coverage, does not hold the bar); nil for both without a bar.
local function judge(row, value, bar, lo, hi, coverage)
    if not bar or not value then return end
    row.meets = value >= bar
    row.settled = not straddles(bar, lo, hi, coverage)
end

-- "meets" or "BELOW", "~" when not settled, "-" without a bar
local function verdict(row)
    if row.meets == nil then return "-" end
    return (row.meets and "meets" or "BELOW") .. (row.settled and "" or "~")
end

-- per round, the fastest peer's time over ours (above 1: ours is faster than every peer)
local function best_ratios(res_t)
    local r = {}
    for i, ours_us in ipairs(res_t.ours.per_round) do
        local best = math.huge
        for _, p in ipairs(peers) do best = math.min(best, res_t[p.key].per_round[i]) end
        r[i] = best / ours_us
    end
    return r
end

-- One row per thread count: ours against every peer on the same operation (peer_fns[key] = fn;
-- note: what the row says of a peer's kernel, such as oneDNN's matmul primitive's).
local function gemm_rows(kind, label, flops, ours, peer_fns, bar, iters, note)
    local contenders = {{"ours", ours, "workbench"}}
    for _, p in ipairs(peers) do contenders[#contenders + 1] = {p.key, peer_fns[p.key], p.key} end
    local function ratio_ci(res, t) return stats.median_ci(best_ratios(res[t])) end
    local res = race(contenders, iters, false, #peers > 0 and unsettled_when(ratio_ci, function() return bar end))
    for _, t in ipairs(thread_counts) do
        local o = res[t].ours
        local us = quantile(o.samples, 0.5)
        local row = {kind = kind, label = label, threads = t, us = us, gflops = flops / us / 1e3,
            p10 = flops / quantile(o.samples, 0.9) / 1e3, p90 = flops / quantile(o.samples, 0.1) / 1e3, peer = {}}
        row.pct = 100 * row.gflops / peaks[t]
        local cells, best_us = {}, math.huge
        for _, p in ipairs(peers) do
            local p_us = quantile(res[t][p.key].samples, 0.5)
            row.peer[p.key] = flops / p_us / 1e3
            if p_us < best_us then best_us, row.best_peer = p_us, p.name end
            cells[#cells + 1] = string.format("%s %.1f", p.name, row.peer[p.key])
        end
        if #peers > 0 then row.ratio, row.ratio_lo, row.ratio_hi, row.coverage = ratio_ci(res, t) end
        row.rounds = res.rounds
        row.bar = #peers > 0 and bar or nil
        judge(row, row.ratio, row.bar, row.ratio_lo, row.ratio_hi, row.coverage)
        row.samples = o.samples
        rows[#rows + 1] = row
        local ratio = ""
        if row.ratio then
            local v, lo, hi = stats.against_bar(2, row.bar, row.ratio, row.ratio_lo, row.ratio_hi)
            ratio = string.format("   %s   vs best (%s) %sx (%s-%s, %s)  %s", table.concat(cells, "  "),
                row.best_peer, v, lo, hi, plural(row.rounds, "round"), verdict(row))
        end
        print(string.format("  %-26s %-10s ours %7.1f GFLOP/s (%3.0f%% of peak)%s%s", label, plural(t, "thread"),
            row.gflops, row.pct, ratio, note and t == thread_counts[#thread_counts] and "\n    " .. note or ""))
    end
end

-- operands for a layout "XY": X describes B (t: B is W^T of a row-major [N,K] W), Y describes A
local function operands(n, layout)
    local lb, la = layout:sub(1, 1), layout:sub(2, 2)
    local a = la == "n" and wb.randn({n, n}) or wb.randn({n, n}):t()
    local b = lb == "n" and wb.randn({n, n}) or wb.randn({n, n}):t()
    return a, b
end

if run_section.squares then
    print("\n-- square GEMMs (bar: >= 1.00x the best peer)")
    for _, n in ipairs(opts.sizes) do
        for _, layout in ipairs(opts.layouts) do
            local a, b = operands(n, layout)
            local c = wb.matmul(a, b)
            local err = sampled_rel_error(c, a, b, 48)
            assert(err < 1e-4, string.format("gemm_bench: rel. error %.2e at n=%d %s: result is wrong", err, n, layout))
            for _, p in ipairs(peers) do
                local pe = wb.rel_error(c, wb[p.key].matmul(a, b))
                assert(pe < 1e-5, string.format("gemm_bench: n=%d %s disagrees with %s (%.2e)", n, layout, p.name, pe))
            end
            local flops = 2.0 * n * n * n
            gemm_rows("square", string.format("n=%d %s", n, layout), flops, function() local _ = wb.matmul(a, b) end,
                {openblas = function() local _ = wb.openblas.matmul(a, b) end,
                    blis = function() local _ = wb.blis.matmul(a, b) end,
                    dnnl = function() local _ = wb.dnnl.matmul(a, b) end}, 1.0, math.max(2, math.floor(1e9 / flops)))
        end
    end
end

if run_section.linears then
    print("\n-- the MLP's linears: x[tokens, K] W[N, K]^T, W packed once (bar at tokens >= 128: >= 1.00x the best peer)")
    for _, shape in ipairs({{768, 3072, "up"}, {3072, 768, "down"}}) do
        local k, n, name = shape[1], shape[2], shape[3]
        local w = wb.randn({n, k})
        for _, tokens in ipairs(opts.tokens) do
            local x = wb.randn({tokens, k})
            local y = wb.linear(x, w)
            local err = wb.rel_error(y, have_peer and wb.openblas.matmul(x, w:t()) or wb.matmul(x, w:t()))
            assert(err < 1e-5,
                string.format("gemm_bench: linear %d->%d at %d tokens disagrees (%.2e)", k, n, tokens, err))
            -- oneDNN as one would use it for a linear layer: a primitive for this shape, made once
            -- per thread count (a primitive runs on the threads there were when it was made)
            local prims = {}
            for _, t in ipairs(have_dnnl and thread_counts or {}) do
                wb.set_num_threads(t)
                wb.dnnl.set_num_threads(t)
                prims[t] = wb.dnnl.linear(w, nil, tokens)
            end
            local prim = prims[thread_counts[1]]
            for _, p in ipairs(peers) do
                local pe = wb.rel_error(y, p.key == "dnnl" and prim(x) or wb[p.key].matmul(x, w:t()))
                assert(pe < 1e-5, string.format("gemm_bench: linear %d->%d at %d tokens disagrees with %s (%.2e)", k,
                    n, tokens, p.name, pe))
            end
            local flops = 2.0 * tokens * k * n
            gemm_rows("mlp", string.format("%s %d->%d tokens %d", name, k, n, tokens), flops,
                function() local _ = wb.linear(x, w) end, {openblas = function() local _ = wb.openblas.matmul(x, w:t()) end,
                    blis = function() local _ = wb.blis.matmul(x, w:t()) end,
                    dnnl = function() local _ = prims[wb.get_num_threads()](x) end},
                tokens >= 128 and 1.0 or nil, math.max(2, math.floor(3e8 / flops)),
                prim and "oneDNN's matmul primitive: " .. prim:kernel())
            for _, pr in pairs(prims) do pr:release() end
        end
    end
end

if run_section.dual then
    print("\n-- dual GeGLU MLP (768/3072, impl dual), 512 tokens (bar on 1 thread: >= 90% of the FMA peak)")
    wb.manual_seed(0)
    local mlp = wb.nn.GeGLUMLP(768, 3072, {impl = "dual"})
    wb.manual_seed(0)
    local eager = wb.nn.GeGLUMLP(768, 3072, {impl = "eager"})
    local x = wb.randn({512, 768})
    local err = wb.rel_error(mlp(x), eager(x))
    assert(err < 1e-5, string.format("gemm_bench: dual MLP disagrees with eager (%.2e)", err))
    local flops = 2.0 * 512 * 768 * 3072 * 3
    -- Against the peak measured beside it as well: on a shared host the FMA rate itself moves by
    -- a third within minutes, so a calibration cached at another time can put the same run at 65%
    -- or 80%. Each round takes the MLP's rate over the FMA peak measured just before and just
    -- after it; the verdict is the median of the rounds, "~" when its interval holds the bar.
    local function pct_ci(res, t)
        local d, pr = res[t].dual, {}
        for i, round_us in ipairs(d.per_round) do pr[i] = 100 * (flops / round_us / 1e3) / d.peaks[i] end
        return stats.median_ci(pr)
    end
    local function bar_pct(t) return t == 1 and 90 or nil end
    local res = race({{"dual", function() mlp(x) end, "workbench"}}, 3, true, unsettled_when(pct_ci, bar_pct))
    for _, t in ipairs(thread_counts) do
        local d = res[t].dual
        local s = d.samples
        local us = quantile(s, 0.5)
        local row = {kind = "dual", label = "dual MLP 512 tokens", threads = t, us = us, gflops = flops / us / 1e3,
            samples = s}
        row.pct = 100 * row.gflops / peaks[t]
        row.pct_run, row.pct_run_lo, row.pct_run_hi, row.coverage = pct_ci(res, t)
        row.rounds = res.rounds
        row.bar_pct = bar_pct(t)
        judge(row, row.pct_run, row.bar_pct, row.pct_run_lo, row.pct_run_hi, row.coverage)
        rows[#rows + 1] = row
        local v, lo, hi = stats.against_bar(1, row.bar_pct, row.pct_run, row.pct_run_lo, row.pct_run_hi)
        print(string.format("  %-26s %-10s %8.2f ms   %7.1f GFLOP/s   %3.0f%% of the calibrated peak, %s%% (%s-%s, " ..
            "%s) of the peak measured beside it  %s", row.label, plural(t, "thread"), us / 1e3, row.gflops, row.pct,
            v, lo, hi, plural(row.rounds, "round"), verdict(row)))
    end
end

if run_section.epilogues then
    print("\n-- what the fused epilogues cost: linear-shaped GEMM n = " .. opts.bf16_size ..
        " with each, against plain (no bar)")
    local n = opts.bf16_size
    local x, w, bias = wb.randn({n, n}), wb.randn({n, n}), wb.randn({n})
    local variants = {
        {"plain", function() local _ = wb.linear(x, w) end, "workbench"},
        {"bias", function() local _ = wb.linear(x, w, bias) end, "workbench"},
        {"bias+gelu_tanh", function() local _ = wb.linear(x, w, bias, {activation = "gelu_tanh"}) end, "workbench"},
        {"bias+gelu_erf", function() local _ = wb.linear(x, w, bias, {activation = "gelu"}) end, "workbench"},
        {"bias+silu", function() local _ = wb.linear(x, w, bias, {activation = "silu"}) end, "workbench"},
    }
    local res = race(variants, math.max(2, math.floor(1e9 / (2.0 * n ^ 3))))
    for _, t in ipairs(thread_counts) do
        local parts = {}
        for i = 2, #variants do
            local rr = round_ratios(res[t][variants[i][1]], res[t].plain)
            parts[#parts + 1] = string.format("%s %.3fx", variants[i][1], quantile(rr, 0.5))
        end
        print(string.format("  %-10s plain %.2f ms; time against plain: %s", plural(t, "thread"),
            quantile(res[t].plain.samples, 0.5) / 1e3, table.concat(parts, ", ")))
    end
end

local pair_speed = run_section.bf16 and wb.cpu_bf16_pair_speed()
if run_section.bf16 then
    print("\n-- bf16 against f32 (the same shapes, f32 accumulation; weights packed once)")
    local n = opts.bf16_size
    local x, w = wb.randn({n, n}), wb.randn({n, n})
    local xh, wh = x:to{dtype = "bf16"}, w:to{dtype = "bf16"}
    local err = wb.rel_error(wb.linear(xh, wh):to{dtype = "f32"}, wb.linear(x, w))
    assert(err < 2e-2, string.format("gemm_bench: bf16 GEMM is off by %.2e against f32", err))
    local bar = has_bf16_isa and 1.8 or 0.95
    -- bf16's speed over f32
    local function speed_ci(res, t) return stats.median_ci(round_ratios(res[t].f32, res[t].bf16)) end
    -- one row per thread count from a race of f32 against bf16; times printed in ms or us
    local function speed_rows(label, res, bar, in_us)
        local unit, scale = in_us and "%8.1f us" or "%8.2f ms", in_us and 1 or 1e-3
        for _, t in ipairs(thread_counts) do
            local row = {kind = "bf16", label = label, threads = t, bar = bar, us = quantile(res[t].bf16.samples, 0.5),
                samples = res[t].bf16.samples, rounds = res.rounds}
            row.ratio, row.ratio_lo, row.ratio_hi, row.coverage = speed_ci(res, t)
            judge(row, row.ratio, bar, row.ratio_lo, row.ratio_hi, row.coverage)
            rows[#rows + 1] = row
            local v, lo, hi = stats.against_bar(2, bar, row.ratio, row.ratio_lo, row.ratio_hi)
            print(string.format("  %-26s %-10s f32 " .. unit .. "   bf16 " .. unit ..
                "   bf16 speed %sx f32 (%s-%s, %s)  bar %.2fx  %s", row.label, plural(t, "thread"), quantile(res[t].f32.samples, 0.5) * scale,
                quantile(res[t].bf16.samples, 0.5) * scale, v, lo, hi, plural(row.rounds, "round"), bar, verdict(row)))
        end
    end
    local res = race({{"f32", function() local _ = wb.linear(x, w) end, "workbench"},
        {"bf16", function() local _ = wb.linear(xh, wh) end, "workbench"}}, math.max(2, math.floor(1e9 / (2.0 * n ^ 3))),
        false, unsettled_when(speed_ci, function() return bar end))
    speed_rows(string.format("bf16 GEMM n=%d", n), res, bar)
    wb.manual_seed(0)
    local m32 = wb.nn.GeGLUMLP(768, 3072, {impl = "dual"})
    wb.manual_seed(0)
    local m16 = wb.nn.GeGLUMLP(768, 3072, {impl = "dual", dtype = "bf16"})
    local x1 = wb.randn({1, 768})
    local x1h = x1:to{dtype = "bf16"}
    local e1 = wb.rel_error(m16(x1h):to{dtype = "f32"}, m32(x1))
    assert(e1 < 2e-2, string.format("gemm_bench: one-token bf16 MLP is off by %.2e against f32", e1))
    local r1 = race({{"f32", function() m32(x1) end, "workbench"}, {"bf16", function() m16(x1h) end, "workbench"}},
        20, false, unsettled_when(speed_ci, function() return 1.8 end))
    speed_rows("bf16 MLP 1 token", r1, 1.8, true)
end

print(string.format("\n== results: %s, path %s, OpenBLAS core %s (GFLOP/s medians; ratio = the fastest peer's " ..
    "time / ours, median of rounds, 95%% interval) ==", wb.device_info().name, wb.cpu_isa(), peer_core))
print(string.format("%-27s %-3s %9s %15s %6s %9s %7s %7s %-9s %20s %6s %7s %s", "row", "thr", "GFLOP/s", "p10-p90",
    "%peak", "OpenBLAS", "BLIS", "oneDNN", "best peer", "ratio (interval)", "rounds", "bar", "verdict"))
local met, below = 0, 0
for _, r in ipairs(rows) do
    local bar = r.bar and string.format("%.2fx", r.bar) or r.bar_pct and string.format("%d%%", r.bar_pct) or "-"
    local ratio = "-"
    if r.ratio then
        ratio = string.format("%sx (%s-%s)", stats.against_bar(2, r.bar, r.ratio, r.ratio_lo, r.ratio_hi))
    elseif r.pct_run then
        ratio = string.format("%s%% (%s-%s)*", stats.against_bar(1, r.bar_pct, r.pct_run, r.pct_run_lo, r.pct_run_hi))
    end
    local function peer_cell(key) return r.peer and r.peer[key] and string.format("%.1f", r.peer[key]) or "-" end
    print(string.format("%-27s %-3d %9s %15s %6s %9s %7s %7s %-9s %20s %6s %7s %s", r.label, r.threads,
        r.gflops and string.format("%.1f", r.gflops) or "-",
        r.p10 and string.format("%.1f-%.1f", r.p10, r.p90) or "-", r.pct and string.format("%.0f%%", r.pct) or "-",
        peer_cell("openblas"), peer_cell("blis"), peer_cell("dnnl"), r.best_peer or "-", ratio, r.rounds or "-", bar,
        verdict(r)))
    if r.meets == true then met = met + 1 elseif r.meets == false then below = below + 1 end
end
print(string.format("\n%s, %s (~: the median's 95%% interval still holds the bar after %s, or fewer " ..
    "than 5 rounds ran; not settled on this machine now)",
    plural(met, "row meets its bar", "rows meet their bars"), plural(below, "row is below its bar", "rows are below their bars"),
    plural(max_rounds, "round")))
if run_section.dual then
    print("*: % of the FMA peak measured beside the row in each round (median, 95% interval), which its verdict is against")
end

if has_bf16_isa and pair_speed then
    print(string.format("bf16: this CPU's pair instruction (vdpbf16ps) multiplies at %.2fx the f32 FMA rate " ..
        "(measured); the 1.8x bar assumes 2x", pair_speed))
end

-- every row with its calls' times, for `workbench compare` (outcomes as booleans: a column of
-- strings would be taken for configuration)
local results = wb.results("gemm_bench", {keys = {"row", "threads"}, quiet = true,
    config = {sizes = table.concat(opts.sizes, ","), layouts = table.concat(opts.layouts, ","),
        tokens = table.concat(opts.tokens, ","), bf16_size = opts.bf16_size, peer = peer_core, peers = peer_names}})
for _, r in ipairs(rows) do
    results:add{row = r.label, threads = r.threads, median_us = r.us, samples_us = r.samples,
        p10_us = r.samples and quantile(r.samples, 0.1), p90_us = r.samples and quantile(r.samples, 0.9),
        gflops = r.gflops, pct_peak = r.pct, pct_peak_in_run = r.pct_run, openblas_gflops = r.peer and r.peer.openblas,
        blis_gflops = r.peer and r.peer.blis, dnnl_gflops = r.peer and r.peer.dnnl, ratio = r.ratio, ratio_lo = r.ratio_lo,
        ratio_hi = r.ratio_hi, rounds = r.rounds, bar = r.bar or (r.bar_pct and r.bar_pct / 100), meets_bar = r.meets,
        settled = r.settled}
end
local paths = results:save{dir = out_dir}
print(string.format("results: %s, %s, %s", paths.json, paths.csv, paths.html))
