-- mlp_sweep.lua: the main job. A GeGLU MLP (dim 768, hidden 3072, no bias, fp32) swept over
-- token counts and execution modes, on the default device; --mlp swiglu sweeps Llama's SwiGLU MLP
-- (silu in place of gelu_tanh; cpu only, and no PyTorch peer: torch_mlp.py times GeGLU).
--
--   workbench experiments/mlp_sweep.lua [--tokens 1,16,128,512] [--modes eager,fused,dual,fused_mlp,compiled,graph]
--                                       [--dim 768] [--hidden 3072] [--iters 10] [--out DIR]
--                                       [--device cpu|cuda] [--dtype f32|bf16] [--shard I/N]
--                                       [--mlp geglu|swiglu]
--
-- Modes (one set of weights for all):
--   eager     linear, linear, gelu, mul, linear: 5 kernels, each dispatched from Lua
--   fused     gelu and mul fused into one pointwise kernel: 4 kernels
--   dual      the dual-GEMM GeGLU (gate and up in one kernel, never in memory), then down: 2
--   fused_mlp the whole MLP in one kernel (wb.geglu_mlp: the hidden activation never in memory
--             either): 1 on the cpu (asserted with p:expect), the dual's 2 on cuda
--   graph     the eager forward captured once and replayed: 5 kernels, no dispatch
--   compiled  wb.compile of the eager forward, replayed: the one-kernel MLP on the cpu where the
--             cost model takes it (f32; bf16 from 8 tokens: scripts/wb/compile_mlp.lua), else
--             the fusion rules' 2 kernels
-- Expectation: all modes compute the same function (rel. error vs eager well under 1e-5);
-- fewer kernels and less dispatch help most where the GEMMs are small (few tokens); at 512
-- tokens the GEMMs dominate and the modes converge.
-- Method: check each mode against eager, then time them alternately (A B C ..., rounds over every
-- mode at every token count, then the peers); a token count whose rows are unstable (noise above
-- 5%) or whose verdicts against eager are UNSURE gets more rounds, up to --max-rounds (10), as
-- nvbench measures until its criterion holds. Every row (the peers' too) gets a verdict against
-- eager by compare's rule (wb.verdict) on the medians of the rounds' medians; kernels and host time
-- per forward come from the profiler. Results (JSON, CSV),
-- an HTML report with charts and a Perfetto trace per mode (at --trace-tokens) go under --out.
-- When python3 with torch is installed, PyTorch's eager CPU forward is timed on the same shapes
-- (experiments/peers/torch_mlp.py) after each round of ours, by the same rule as ours (at least --iters
-- forwards and 50 ms a round, its OpenMP threads told not to spin: OMP_WAIT_POLICY=passive), and
-- shown as rows beside ours. So is oneDNN's
-- (when its peer module was built, from experiments/peers/dnnl_peer.c): the same MLP as three
-- matmul primitives made once per token count, the gate's activation and the multiply by the up
-- projection as post-ops, on our weights and inputs, checked against eager like every mode; the
-- line "vs peers" gives our fastest mode against each peer (above 1: ours is faster), the footer
-- their versions, BLAS and kernels.
-- It is a wb.sweep (tokens x modes): --shard I/N measures one shard of the points, and
-- `workbench merge` joins the shards into the rows of the whole sweep.

local wbargs = require("wb.args")
local calibrate = require("wb.calibrate")
local plural = require("wb.words").plural

local parser = wbargs.parser("mlp_sweep.lua", "GeGLU (or SwiGLU) MLP forward: tokens x modes, against eager and PyTorch")
parser:option("--tokens", "Token counts, comma-separated.", "1,16,128,512"):convert(wbargs.ints("--tokens", 1, 65536))
parser:option("--modes", "Modes, comma-separated (eager, fused, dual, fused_mlp, compiled, graph).",
    "eager,fused,dual,fused_mlp,compiled,graph")
    :convert(wbargs.names("--modes", {"eager", "fused", "dual", "fused_mlp", "compiled", "graph"}))
parser:option("--dim", "Model dimension.", "768"):convert(wbargs.int("--dim", 1, 65536))
parser:option("--hidden", "Hidden dimension.", "3072"):convert(wbargs.int("--hidden", 1, 262144))
parser:option("--dtype", "Data type (f32 or bf16).", "f32"):choices({"f32", "bf16"})
parser:option("--mlp", "The gated MLP: geglu (gelu_tanh) or swiglu (silu).", "geglu"):choices({"geglu", "swiglu"})
parser:option("--device", "Device (cpu or cuda; default: the workbench's default device)."):choices({"cpu", "cuda"})
parser:option("--iters", "Timed forwards per mode per round (at least).", "10"):convert(wbargs.int("--iters", 1, 100000))
parser:option("--rounds", "Rounds of alternating the modes.", "3"):convert(wbargs.int("--rounds", 1, 1000))
parser:option("--max-rounds", "More rounds, up to this many in all, for a token count while a row of it (a mode " ..
    "or a " ..
    "peer) is unstable or its verdict against eager UNSURE (default: 10, or --rounds when that is more).")
    :convert(wbargs.int("--max-rounds", 1, 1000))
parser:option("--trace-tokens", "Token count at which a Perfetto trace per mode is written.", "16")
    :convert(wbargs.int("--trace-tokens", 1, 65536))
parser:option("--out", "Output folder (default: out/mlp_sweep/<timestamp>).")
parser:flag("--no-peer", "Do not time PyTorch even when it is installed.")
parser:flag("--no-dnnl", "Do not time oneDNN's MLP even when its peer is built.")
parser:option("--peer", "Command of the peer to time instead of experiments/peers/torch_mlp.py (same options, same JSON).")
wb.sweep.add_options(parser)
local args = wbargs.parse(parser)

local tokens_list, modes = args.tokens, args.modes
local dim, hidden, iters, rounds, trace_tokens = args.dim, args.hidden, args.iters, args.rounds, args.trace_tokens
local DEFAULT_MAX_ROUNDS = 10
if args.max_rounds and args.max_rounds < rounds then
    io.stderr:write(string.format("mlp_sweep.lua: --max-rounds %d is below --rounds %d (it caps the rounds in all, " ..
        "the extra ones included) (see --help)\n", args.max_rounds, rounds))
    os.exit(2, true)
end
local max_rounds = args.max_rounds or math.max(DEFAULT_MAX_ROUNDS, rounds)
local device = args.device or wb.default_device()
-- a machine without a usable GPU is not a bad argument: one line with the reason and status 1, as
-- the workbench's own --device cuda (docs/cli.md), not a script error's traceback
if device == "cuda" and not wb.cuda.is_available() then
    io.stderr:write("mlp_sweep.lua: --device cuda: " .. wb.cuda.why_not() .. "\n")
    os.exit(1, true)
end
local cuda = device == "cuda"
-- What the sweep holds at once on the cpu, estimated before anything is allocated: one that cannot
-- fit would swap for minutes and be stopped, its results lost. Fitted to the peak RSS measured
-- (/usr/bin/time, dim 1024, hidden 4096-16384, 1 and 512 tokens, within 4%): 12 bytes per byte of
-- one f32 weight matrix (the three weights, the dual path's [gate; up], the one-kernel MLP's and
-- the compiled forward's packed panels; 15 in bf16: the f32 copy for the accuracy line), 13 per
-- byte of [tokens, dim + hidden] f32 activations at the largest token count, and 90 MiB.
if not cuda then
    local max_tokens = math.max(table.unpack(tokens_list))
    local need = (args.dtype == "bf16" and 15 or 12) * 4.0 * dim * hidden + 13 * 4.0 * max_tokens * (dim + hidden) +
        90 * 2 ^ 20
    local memory = require("wb.memory")
    local free, where = memory.available()
    if free and need > free then
        io.stderr:write(string.format("mlp_sweep.lua: dim %d, hidden %d, %s, up to %d tokens needs about %s of memory, " ..
            "and %s is available (%s): it would swap, then be stopped; try a smaller --dim, --hidden or --tokens\n", dim,
            hidden, args.dtype, max_tokens, memory.gib(need), memory.gib(free), where))
        os.exit(1, true)
    end
end
-- Modes must agree with eager to within the dtype's rounding: bf16 rounds the intermediates of
-- eager (gelu output, product) but not those of the fused modes.
local tolerance = args.dtype == "bf16" and 2e-2 or 1e-5
local opts = {dtype = args.dtype, device = device}
local out_dir = args.out or wb.options.out or ("out/mlp_sweep/" .. os.date("%Y%m%d-%H%M%S"))
assert(wb.mkdir_p(out_dir))

local info = wb.device_info(device)
if args.dtype == "bf16" and info.peak_gflops_bf16 then info.peak_gflops = info.peak_gflops_bf16 end
local MLP = args.mlp == "swiglu" and "SwiGLU" or "GeGLU"
if MLP == "SwiGLU" and device == "cuda" then -- arguments that do not go together: one line, status 2
    io.stderr:write("mlp_sweep.lua: --mlp swiglu runs on the cpu only (no cuda kernels for silu yet)\n")
    os.exit(2, true)
end
print(string.format("mlp_sweep: " .. MLP .. " MLP dim %d hidden %d, %s on %s (%s, %s); tokens %s; modes %s", dim,
    hidden, args.dtype, device, info.name, plural(wb.get_num_threads(), "thread"), table.concat(tokens_list, ","),
    table.concat(modes, ",")))
print(require("wb.words").wrap(string.format("roofline: %.1f GFLOP/s, %.1f GB/s (%s)", info.peak_gflops,
    info.bandwidth_gbs, info.calibrated), 120, "  "))

wb.manual_seed(wb.options.seed or 0)
local mlp = wb.nn[MLP .. "MLP"](dim, hidden, {impl = "eager", dtype = args.dtype, device = device})
local mlp32 -- bf16: the same weights in f32, to show what bf16 costs in accuracy
if args.dtype == "bf16" then
    wb.manual_seed(wb.options.seed or 0)
    mlp32 = wb.nn[MLP .. "MLP"](dim, hidden, {impl = "eager", dtype = "f32", device = device})
end

-- A runner per mode for input x: a function doing one forward, and how it produced its output.
local function runners(x)
    local r = {}
    local function as(impl) return function() mlp.impl = impl; return mlp(x) end end
    r.eager, r.fused, r.dual, r.fused_mlp = as("eager"), as("fused"), as("dual"), as("fused_mlp")
    local g
    r.graph = function()
        if not g then
            mlp.impl = "eager"
            g = wb.graph.capture(function() return mlp(x) end)
        else
            g:replay()
        end
        return g.outputs[1]
    end
    local c = wb.compile(function(v) mlp.impl = "eager"; return mlp(v) end)
    r.compiled = function() return c(x) end
    return r, c
end

-- Kernels, kernel time and host time of one forward, from the profiler (medians of 5). On the
-- cpu the kernels run inside the forward, so host time = forward - kernels; on cuda they run
-- asynchronously, so host time is the forward's own duration (launches only) and the kernels
-- are counted over the five forwards (each followed by a synchronize outside the range).
-- The kernels a mode's forward must launch, where the mode promises a count (checked per forward
-- with p:expect): fused_mlp's one kernel on the cpu (on cuda it is the dual mode's kernels, which
-- cuBLASLt may split further: not counted there).
local EXPECT_KERNELS = cuda and {} or {fused_mlp = 1}
local function anatomy(fn, mode)
    local p = wb.profiler.profile({with_flops = true}, function()
        for _ = 1, 5 do
            wb.profiler.range("fwd", fn)
            if cuda then wb.synchronize("cuda") end
        end
    end)
    if EXPECT_KERNELS[mode] then p:expect{range = "fwd", kernels = EXPECT_KERNELS[mode]} end
    local runs = p:range_instances("fwd")
    local hosts = {}
    for i, r in ipairs(runs) do hosts[i] = cuda and r.dur_ns or r.host_ns end
    table.sort(hosts)
    if cuda then
        local kernels = {}
        for _, e in ipairs(p:events()) do
            if e.cat == "kernel" then kernels[#kernels + 1] = e end
        end
        local n = #kernels // 5
        return n, hosts[(#hosts + 1) // 2] / 1e3, {table.unpack(kernels, #kernels - n + 1)}, p -- the last forward's
    end
    return #runs[#runs].kernels, hosts[(#hosts + 1) // 2] / 1e3, runs[1].kernels, p
end

local rows, point_findings = {}, {}
local flops_of = function(t) return 6.0 * t * dim * hidden end
-- the bytes any forward must move: the three weights, the input and the output (intermediates
-- that stay in caches or registers are not counted): the GB/s column's numerator
local bytes_of = function(t) return (args.dtype == "bf16" and 2 or 4) * (3.0 * dim * hidden + 2.0 * t * dim) end

local inputs_of -- the input drawn for a token count (set with the inputs below)

-- One round's samples of a forward, in ms: the rule every contender is timed by (our modes and
-- oneDNN here; torch_mlp.py takes the same --rounds and --min-time-ms): at least --iters
-- forwards and 50 ms, after 2 warm-up forwards.
local MIN_TIME_MS = 50
local function time_forward(fn)
    local b = wb.bench(fn, {warmup = 2, iters = iters, min_time_ms = MIN_TIME_MS, device = device})
    local ms = {}
    for i, s in ipairs(b.samples_us) do ms[i] = s / 1e3 end
    return ms
end

-- The PyTorch peer (when installed): experiments/peers/torch_mlp.py, one run per round after ours,
-- its OpenMP threads told not to spin (wb.torch_peer); a peer's samples kept round by round.
local torch_peer = require("wb.torch_peer")
local keep = torch_peer.keep
local torch = torch_peer.new{command = args.peer, enabled = not args.no_peer and not cuda and MLP == "GeGLU",
    script = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/peers/torch_mlp.py"}
local wait_policy = torch.wait_policy
local function peer_round(peer_tokens)
    torch.round(peer_tokens, {dim = dim, hidden = hidden, threads = wb.get_num_threads(), dtype = args.dtype,
        rounds = iters, min_time_ms = MIN_TIME_MS})
end

-- The oneDNN peer (cpu, when built): per token count a wb.dnnl.mlp on our weights, checked in
-- prepare like every mode, timed after each round of ours (after PyTorch's) by time_forward, as
-- our modes are. Its primitives are made for, and run on, the thread count asked for (a primitive
-- runs on the threads there were when it was made); ours may drop to one under contention
-- (wb.set_threads_adaptive). It runs in this process on the workbench's own OpenMP runtime
-- (libgomp: one team of threads, shared), so it cannot spin against ours: the wait policy of that
-- one runtime is the process's, read from OMP_WAIT_POLICY when the workbench starts.
local dnnl = {samples = {}, per_round = {}, mlp = {}, kernels = {}, threads = wb.get_num_threads()}
if not args.no_dnnl and not cuda then
    if wb.dnnl.available() then
        local i = wb.dnnl.info()
        dnnl.label = string.format("%s (%s, %s)", i.version, i.isa, plural(dnnl.threads, "thread"))
    else
        dnnl.why_not = wb.dnnl.why_not()
    end
end
local function dnnl_round(peer_tokens)
    if not dnnl.label then return end
    wb.dnnl.set_num_threads(dnnl.threads)
    for _, t in ipairs(peer_tokens) do
        local m, x = dnnl.mlp[t], inputs_of(t)
        if m then keep(dnnl, t, time_forward(function() m(x) end)) end
    end
    wb.set_num_threads(dnnl.threads) -- the same OpenMP setting as ours: theirs again, adaptive as before
end

-- The sweep: tokens x modes. wb.sweep runs the rounds (every mode at every token count, in
-- order, then the peer's round) and, with --shard I/N, only this shard's points; the rows keep
-- the raw samples, from which the statistics and the columns derived from them are computed
-- (the same way `workbench merge` recomputes them for a sharded run).
local inputs = {} -- per token count: {run = runners, checked = true}
inputs_of = function(t) return inputs[t].x end
local traces = {} -- the report's links to the traces written
local COST_GFLOPS, COST_GBS = 100, 20 -- the model machine of the shards' cost (fixed, not measured)
local sweep, again, report_parts -- again and report_parts: below, with what they need
sweep = wb.sweep{
    name = "mlp_sweep",
    out = out_dir, -- where Ctrl-C's partial results go
    axes = {{"tokens", tokens_list}, {"mode", modes}},
    config = {dim = dim, hidden = hidden, dtype = args.dtype, device = device, iters = iters, dnnl = dnnl.label or "none",
        peer = args.peer or ((args.no_peer or cuda or MLP ~= "GeGLU") and "none" or "torch_mlp.py"), mlp = args.mlp},
    rounds = rounds,
    shard = args.shard,
    -- a point's share of the work: its roofline time (weights read, or flops) on a model machine
    -- (COST_GFLOPS, COST_GBS), at least a bench's minimum. Never this machine's calibration: every
    -- shard computes the assignment on its own, so it may depend only on the sweep's definition (a
    -- shard that calibrated 116 GFLOP/s and one that calibrated 125 split the points differently).
    cost = function(p)
        -- what must move, and the [tokens, hidden] intermediate written and read once
        local bytes = bytes_of(p.tokens) + (args.dtype == "bf16" and 2 or 4) * 2 * p.tokens * hidden
        return math.max(0.05, iters * math.max(flops_of(p.tokens) / (COST_GFLOPS * 1e9), bytes / (COST_GBS * 1e9)))
    end,
    -- First every point is checked against eager. Inputs are drawn for every token count, in
    -- order, so each shard sees the data the whole sweep would.
    prepare = function(points)
        local want = {}
        for _, p in ipairs(points) do want[p.tokens] = true end
        for _, tokens in ipairs(tokens_list) do
            local x = wb.randn({tokens, dim}, opts)
            if want[tokens] then
                local run = runners(x)
                mlp.impl = "eager"
                local ref = mlp(x):clone()
                if mlp32 then
                    print(string.format("  tokens %-5d bf16 eager vs the f32 MLP with the same weights: rel. error %.2e",
                        tokens, wb.rel_error(ref, mlp32(x:to{dtype = "f32"}))))
                end
                inputs[tokens] = {run = run, ref = ref, err = {}, x = x}
                if dnnl.label then -- oneDNN's MLP, checked against eager before any timing
                    wb.dnnl.set_num_threads(dnnl.threads)
                    local ok, m = pcall(wb.dnnl.mlp, mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight,
                        tokens, args.mlp)
                    if not ok then
                        dnnl.label, dnnl.why_not = nil, tostring(m)
                    else
                        local err = wb.rel_error(m(x), ref)
                        if err >= tolerance then
                            error(string.format("mlp_sweep: oneDNN's MLP disagrees with eager at tokens %d (rel. " ..
                                "error %.2e)", tokens, err), 0)
                        end
                        dnnl.mlp[tokens], dnnl.kernels[tokens] = m, m:kernels()
                    end
                    wb.set_num_threads(dnnl.threads)
                end
            end
        end
        for _, p in ipairs(points) do
            local input = inputs[p.tokens]
            local err = wb.rel_error(input.run[p.mode](), input.ref)
            if err >= tolerance then
                error(string.format("mlp_sweep: mode %s disagrees with eager at tokens %d (rel. error %.2e)", p.mode,
                    p.tokens, err), 0)
            end
            input.err[p.mode] = err
        end
        print(string.format("  all modes%s agree with eager (rel. error < %.0e)", dnnl.label and " and oneDNN's MLP" or
            "", tolerance))
    end,
    measure = function(p) return time_forward(inputs[p.tokens].run[p.mode]) end,
    max_rounds = max_rounds,
    -- after the --rounds: another round for each token count with a row that is unstable (a mode's
    -- or a peer's noise above 5%) or UNSURE against eager, all its modes (eager included, so the
    -- rounds stay paired) and peers; at most max_rounds in all
    again = function(so_far, round) return again(so_far, round) end,
    -- the report's parts as they stand, for partial results (Ctrl-C) too
    report = function() return report_parts() end,
    after_round = function(_, points)
        local peer_tokens, seen = {}, {}
        for _, p in ipairs(points) do
            if not seen[p.tokens] then peer_tokens[#peer_tokens + 1] = p.tokens end
            seen[p.tokens] = true
        end
        peer_round(peer_tokens)
        dnnl_round(peer_tokens)
        local also = {}
        if torch.version then also[#also + 1] = "PyTorch's" end
        if dnnl.label then also[#also + 1] = "oneDNN's" end
        return #also > 0 and " (and " .. table.concat(also, " and ") .. ")" or ""
    end,
    -- kernels and host time from the profiler, the trace, the check's error and the peer's samples
    finish = function(p, row)
        local kernels, host_us, kernel_events, prof = anatomy(inputs[p.tokens].run[p.mode], p.mode)
        row.kernels, row.host_us, row.rel_error, row.flops = kernels, host_us, inputs[p.tokens].err[p.mode], flops_of(p.tokens)
        row.bytes = bytes_of(p.tokens)
        row.torch_samples_ms, row.torch_samples_ms_per_round = torch.samples[p.tokens], torch.per_round[p.tokens]
        row.dnnl_samples_ms, row.dnnl_samples_ms_per_round = dnnl.samples[p.tokens], dnnl.per_round[p.tokens]
        row.rounds = #row.samples_ms_per_round
        -- the forward's kernels, for the roofline (drawn from the rows, so a merge draws it too)
        -- (numbers only: a column of text would be configuration to compare, which rows are aligned on)
        local kf, kb, kt = {}, {}, {}
        for _, e in ipairs(kernel_events) do
            if e.bytes > 0 and e.flops > 0 and e.dur_ns > 0 then
                kf[#kf + 1], kb[#kb + 1], kt[#kt + 1] = e.flops, e.bytes, e.dur_ns
            end
        end
        row.kernel_flops, row.kernel_bytes, row.kernel_ns = kf, kb, kt
        -- what the profile of this point shows (wb.findings), kept in the JSON beside the rows
        local kept = {}
        for i, f in ipairs(prof:findings()) do
            kept[i] = {rule = f.rule, severity = f.severity, message = f.message, unreliable = f.unreliable}
        end
        point_findings[#point_findings + 1] = {tokens = p.tokens, mode = p.mode, findings = kept}
        if p.tokens == trace_tokens then
            prof:export_chrome_trace(string.format("%s/mlp_%s_tokens%d.trace.json", out_dir, p.mode, p.tokens))
            traces[#traces + 1] = {text = string.format("Perfetto trace: %s at %d tokens", p.mode, p.tokens),
                href = string.format("mlp_%s_tokens%d.trace.json", p.mode, p.tokens)}
        end
    end,
    -- median_ms: the median of the rounds' medians (as vs eager is taken round by round; a pooled
    -- median follows whichever round took the most samples); noise: with every round weighing
    -- alike (what the verdicts read); p10-p90: of all samples. The peers' alike.
    stats = {{from = "samples_ms", median = "median_ms", median_of = "rounds", p10 = "p10_ms", p90 = "p90_ms",
        noise = "noise"},
        {from = "torch_samples_ms", median = "torch_ms", median_of = "rounds", p10 = "torch_p10_ms",
            p90 = "torch_p90_ms", noise = "torch_noise", unstable = "torch_unstable"},
        {from = "dnnl_samples_ms", median = "dnnl_ms", median_of = "rounds", p10 = "dnnl_p10_ms", p90 = "dnnl_p90_ms",
            noise = "dnnl_noise", unstable = "dnnl_unstable"}},
    derived = {
        {column = "gflops", num = "flops", den = "median_ms", scale = 1e-6},
        {column = "pct_peak", num = "gflops", den = "@peak_gflops", scale = 100},
        {column = "gbs", num = "bytes", den = "median_ms", scale = 1e-6},
        {column = "speedup_vs_eager", num = "median_ms", den = "median_ms", base = {mode = "eager"}, interval = true,
            verdict = true},
        -- the peers against eager, by the same rule (the same on every mode's row of a token count)
        {column = "torch_speedup_vs_eager", num = "median_ms", den = "torch_ms", base = {mode = "eager"},
            interval = true, verdict = true},
        {column = "dnnl_speedup_vs_eager", num = "median_ms", den = "dnnl_ms", base = {mode = "eager"},
            interval = true, verdict = true},
        -- each mode against each peer: the peer's time over the mode's, paired round by round
        {column = "vs_torch", num = "torch_ms", den = "median_ms", interval = true},
        {column = "vs_dnnl", num = "dnnl_ms", den = "median_ms", interval = true},
    },
    constants = {peak_gflops = info.peak_gflops},
    columns = {"tokens", "mode", "median_ms", "p10_ms", "p90_ms", "gflops", "pct_peak", "gbs", "kernels", "host_us",
        "rounds", "speedup_vs_eager", "speedup_vs_eager_lo", "speedup_vs_eager_hi", "speedup_vs_eager_verdict",
        "rel_error", "torch_ms", "torch_noise", "vs_torch", "dnnl_ms", "dnnl_noise", "vs_dnnl"},
}
local stats = require("wb.stats")
local verdict_rule = require("wb.verdict")
local words = require("wb.words")
local TARGET_NOISE = 0.05 -- a row above it is unstable (wb.results' target)

-- A peer's timing at a token count (wb.verdict's), or nil where it did not run.
local function peer_timing(peer, t)
    if not peer.samples[t] then return nil end
    return {samples = peer.samples[t], per_round = peer.per_round[t]}
end
local PEERS = {{peer = torch, name = "PyTorch", prefix = "torch"}, {peer = dnnl, name = "oneDNN", prefix = "dnnl"}}

-- After the --rounds (wb.sweep's again): the points of the token counts that are not settled yet
-- (a row unstable, a verdict against eager UNSURE: a mode's or a peer's), and why.
again = function(so_far)
    local by_tokens, order = {}, {}
    for _, r in ipairs(so_far) do
        if not by_tokens[r.tokens] then order[#order + 1] = r.tokens end
        by_tokens[r.tokens] = by_tokens[r.tokens] or {}
        table.insert(by_tokens[r.tokens], r)
    end
    local more, why = {}, {}
    for _, t in ipairs(order) do
        local reasons, eager = {}, nil
        for _, r in ipairs(by_tokens[t]) do
            if r.mode == "eager" then eager = r end
            if r.noise and r.noise > TARGET_NOISE then
                reasons[#reasons + 1] = string.format("%s noise %.0f%%", r.mode, r.noise * 100)
            elseif r.speedup_vs_eager_verdict == "UNSURE" then
                reasons[#reasons + 1] = r.mode .. " UNSURE"
            end
        end
        for _, pr in ipairs(PEERS) do
            local tp = peer_timing(pr.peer, t)
            if tp then
                local side = verdict_rule.side(tp)
                if side.noise > TARGET_NOISE then
                    reasons[#reasons + 1] = string.format("%s noise %.0f%%", pr.name, side.noise * 100)
                elseif eager and verdict_rule.verdict({samples = eager.samples_ms,
                    per_round = eager.samples_ms_per_round}, tp) == "UNSURE" then
                    reasons[#reasons + 1] = pr.name .. " UNSURE"
                end
            end
        end
        if #reasons > 0 then
            more[t] = true
            why[#why + 1] = string.format("tokens %d (%s%s)", t, table.concat(reasons, ", ", 1, math.min(#reasons, 3)),
                #reasons > 3 and ", ..." or "")
        end
    end
    local points = {}
    for _, p in ipairs(sweep.mine) do if more[p.tokens] then points[#points + 1] = p end end
    return points, table.concat(why, "; ")
end

-- The report: text and charts as data (wb.report draws them from the rows; a merge does the same).
-- A function, so that results cut short by Ctrl-C are drawn the same way.
local ceilings
if not cuda and info.l2_gbs then
    local e = calibrate.cpu(wb.get_num_threads())
    ceilings = {{name = "L2", gbs = info.l2_gbs, max_bytes = e.l2_bytes and e.l2_bytes * e.threads},
        {name = "L3", gbs = info.l3_gbs, max_bytes = e.l3_bytes}, {name = "DRAM", gbs = info.dram_gbs}}
else
    ceilings = {{name = "DRAM", gbs = info.bandwidth_gbs}}
end
local run_tokens = {} -- the token counts this run measured, in order (after the run)
report_parts = function()
    local peer_series = {} -- the peers' lines on the latency chart
    if torch.version then peer_series[#peer_series + 1] = {name = torch.label, y = "torch_ms"} end
    if dnnl.label then peer_series[#peer_series + 1] = {name = dnnl.label, y = "dnnl_ms"} end
    local report_spec = {
        text = {
            string.format(MLP .. " MLP forward, dim %d, hidden %d, %s on %s (%s, %s%s). %s of alternating " ..
                "modes%s; every " ..
                "mode checked against eager first; more rounds (at most %d in all) for a token count while a row of " ..
                "it is unstable or UNSURE against eager.", dim, hidden, args.dtype, device, info.name, info.isa,
                cuda and "" or ", " .. plural(wb.get_num_threads(), "thread"), plural(rounds, "round"),
                torch.version and string.format(" (%s timed after each round; its GEMMs ran on %s)", torch.label,
                    torch.blas) or "", max_rounds),
            "median_ms: the median of the rounds' medians (each round one vote, however many samples it took); " ..
                "p10_ms-p90_ms: of all the samples; rounds: how many rounds the row took; speedup_vs_eager: eager's " ..
                "median_ms over the mode's, with the same ratio taken round by round (its range, or a 95% interval " ..
                "from 6 rounds) in _lo-_hi, and the verdict against eager (SAME, FASTER, SLOWER, UNSURE) by " ..
                    "workbench " ..
                "compare's rule in speedup_vs_eager_verdict" .. (torch.version and "; torch_ms: PyTorch's " ..
                    "median of its " ..
                "rounds' medians, torch_noise its noise" or "") .. (dnnl.label and "; dnnl_ms, dnnl_noise: " ..
                    "oneDNN's, alike"
                or "") .. ".",
            "% of peak (pct_peak) is against " .. (cuda and string.format("%.1f GFLOP/s (%s)", info.peak_gflops,
                info.calibrated) or calibrate.ceiling_note(info)) .. ".",
        },
        warnings = info.under_load and {"The ceilings were MEASURED UNDER LOAD: every % of peak reads high."} or nil,
        -- the results table: what fits a page (every column is in the JSON and CSV)
        columns = {"tokens", "mode", "median_ms", "p10_ms", "p90_ms", "gflops", "pct_peak", "gbs", "kernels", "host_us",
            "rounds", "speedup_vs_eager", "speedup_vs_eager_verdict", "noise", "torch_ms", "dnnl_ms"},
        links = traces,
        charts = {
            {kind = "line", title = "Latency per forward", x_label = "tokens", y_label = "median ms", log_x = true,
                log_y = true, x = "tokens", y = "median_ms", lo = "p10_ms", hi = "p90_ms", series = "mode",
                unstable = "unstable", extra = #peer_series > 0 and peer_series or nil,
                caption = "Median time of one forward per mode (lower is better), against the number of tokens; " ..
                    "bars: " ..
                    "p10-p90 of the samples; hollow: unstable." ..
                    (torch.version and " PyTorch's eager CPU forward on the same shapes is drawn for " ..
                        "comparison." or "") ..
                    (dnnl.label and " So is oneDNN's: matmul primitives with the gate's activation and the " ..
                        "multiply as " ..
                        "post-ops, on the same weights." or "")},
            {kind = "bar", title = "Speedup against eager", y_label = "eager time / mode time", group = "tokens",
                series = "mode", value = "speedup_vs_eager", lo = "speedup_vs_eager_lo", hi = "speedup_vs_eager_hi",
                reference = 1, caption = "How much faster each mode is than eager dispatch at the same token " ..
                    "count (the " ..
                    "dashed line is eager itself); whiskers: the rounds' range, or a 95% interval from 6 " ..
                        "rounds. Fewer " ..
                    "kernels and no dispatch matter most where the GEMMs are small."},
            {kind = "roofline", title = "Kernels on the roofline", x_label = "arithmetic intensity (FLOP per byte)",
                y_label = "GFLOP/s", peak_gflops = info.peak_gflops, ceilings = ceilings, series = "mode",
                flops = "kernel_flops", bytes = "kernel_bytes", ns = "kernel_ns",
                caption = string.format("Each kernel of each mode (all token counts) at its arithmetic " ..
                    "intensity (flops per " ..
                    "byte that must move) and achieved GFLOP/s, under the roofline of this device (%s): %.1f " ..
                        "GFLOP/s " ..
                    "peak. Points near a sloped line are memory-bound (small token counts), near the flat line " ..
                    "compute-bound. %s", cuda and "datasheet rates, not measured" or info.calibrated, info.peak_gflops,
                    cuda and "The bandwidth is DRAM's: a kernel whose data stays in the caches can sit above " ..
                        "the sloped " ..
                    "line." or "On the cpu the roofline is cache-aware: L2, L3 and DRAM roofs measured on " ..
                        "working sets " ..
                    "sized from the caches; each point's tooltip judges it against the level its bytes fit in.")},
        },
    }
    if dnnl.label then
        local k = {}
        for _, t in ipairs(run_tokens) do
            if dnnl.kernels[t] then k[#k + 1] = string.format("%d tokens: %s", t, dnnl.kernels[t]) end
        end
        table.insert(report_spec.text, 2, string.format("%s timed after each round too, on the same weights and " ..
            "inputs " ..
            "(checked against eager first); dnnl_ms: the median of all its samples; its kernels: %s.", dnnl.label,
            table.concat(k, "; ")))
    end
    -- a Findings section per mode: what the profile of each point showed (wb.findings' rules)
    local finding_tables, table_of = {}, {}
    for _, pf in ipairs(point_findings) do
        local t = table_of[pf.mode]
        if not t then
            t = {title = "Findings: " .. pf.mode, header = {"tokens", "severity", "rule", "finding"}, rows = {}}
            table_of[pf.mode] = t
            finding_tables[#finding_tables + 1] = t
        end
        for _, f in ipairs(pf.findings) do
            t.rows[#t.rows + 1] = {pf.tokens, f.severity, f.rule,
                f.message .. (f.unreliable and " (the machine was busy: a figure about time is unreliable)" or "")}
        end
    end
    report_spec.tables = finding_tables

    return report_spec
end

rows = sweep:run()
local by_tokens = {}
for _, r in ipairs(rows) do
    if not by_tokens[r.tokens] then run_tokens[#run_tokens + 1] = r.tokens end
    by_tokens[r.tokens] = by_tokens[r.tokens] or {}
    table.insert(by_tokens[r.tokens], r)
end

-- % of peak above 100 means the ceiling is wrong (calibrated low, or under load): never shown
-- as an ordinary figure (marked "!"; wb.device_info's calibration says how it was measured)
local above = 0
for _, r in ipairs(rows) do if r.pct_peak > 100 then above = above + 1 end end
if above > 0 then
    print(words.wrap(string.format("note: %s above the calibrated peak (marked !): the ceiling is too low; %s",
        plural(above, "point is", "points are"), info.calibrated), 120, "  "))
end

-- the main table, the line against the peers and the footer (wb.mlp_table)
require("wb.mlp_table").print{by_tokens = by_tokens, run_tokens = run_tokens, peers = PEERS, peer_timing = peer_timing,
    info = info, cuda = cuda, flops_of = flops_of, bytes_of = bytes_of, rounds = rounds, max_rounds = max_rounds,
    torch = torch, dnnl = dnnl, wait_policy = wait_policy, target_noise = TARGET_NOISE}

local report_spec = report_parts()
local paths = sweep:save{dir = out_dir, report = report_spec, extra = {findings = point_findings}}
local traced = false
for _, t in ipairs(run_tokens) do traced = traced or t == trace_tokens end
print(string.format("\nresults: %s, %s\nreport: %s\ntraces: %s", paths.json, paths.csv, paths.html, traced and
    string.format("%s/mlp_<mode>_tokens%d.trace.json", out_dir, trace_tokens) or
    string.format("none (--trace-tokens %d is not among the token counts)", trace_tokens)))
if args.peer and not torch.version then
    print("(the --peer command printed no results: " .. args.peer .. ")")
elseif not torch.version and not args.no_peer and not cuda and MLP == "GeGLU" then
    print("(PyTorch not found: install python3-torch to time its eager CPU forward beside these figures)")
end
if dnnl.why_not then print("(no oneDNN rows: " .. dnnl.why_not .. ")") end
