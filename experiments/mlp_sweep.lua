-- mlp_sweep.lua: the main job. A GeGLU MLP (dim 768, hidden 3072, no bias, fp32) swept over
-- token counts and execution modes, on the default device; --mlp swiglu sweeps Llama's SwiGLU MLP
-- (silu in place of gelu_tanh; cpu only, and no PyTorch peer: torch_mlp.py times GeGLU).
--
--   workbench experiments/mlp_sweep.lua [--tokens 1,16,128,512] [--modes eager,dual,...] [--dim 768]
--       [--hidden 3072] [--device cpu|cuda] [--dtype f32|bf16] [--mlp geglu|swiglu] [--shard I/N] (--help: all)
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
-- Method: check each mode against eager, then time them alternately, round after round, each
-- round followed by the peers' (PyTorch's eager forward, oneDNN's MLP, where installed), every
-- sample the mean of a batch of forwards lasting at least 2 ms (one forward from 2 ms up); a token
-- count with a row unstable (noise above 5%) or UNSURE against eager gets more rounds, up to
-- --max-rounds (10), as nvbench measures until its criterion holds. Every row gets a verdict
-- against eager by compare's rule (wb.verdict) on the medians of the rounds' medians; kernels and
-- host time per forward come from the profiler. Results (JSON, CSV), an HTML report and a
-- Perfetto trace per mode (at --trace-tokens) go under --out.
-- It is a wb.sweep (tokens x modes): --shard I/N measures one shard of the points, and
-- `workbench merge` joins the shards into the rows of the whole sweep.

local wbargs = require("wb.args")
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
parser:option("--iters", "Samples per mode per round (at least; a sample is one forward, or a batch lasting 2 ms).", "10"):convert(wbargs.int("--iters", 1, 100000))
parser:option("--rounds", "Rounds of alternating the modes.", "3"):convert(wbargs.int("--rounds", 1, 1000))
parser:option("--max-rounds", "More rounds, up to this many in all, for a token count while a row of it (a mode " ..
    "or a peer) is unstable or its verdict against eager UNSURE (default: 10, or --rounds when that is more).")
    :convert(wbargs.int("--max-rounds", 1, 1000))
parser:option("--trace-tokens", "Token count at which a Perfetto trace per mode is written.", "16")
    :convert(wbargs.int("--trace-tokens", 1, 65536))
parser:option("--out", "Output folder (default: out/mlp_sweep/<timestamp>-<pid>).")
parser:flag("--no-peer", "Do not time PyTorch even when it is installed.")
parser:flag("--no-dnnl", "Do not time oneDNN's MLP even when its peer is built.")
parser:option("--peer", "Command of the peer to time instead of experiments/peers/torch_mlp.py (same options, same JSON).")
wb.sweep.add_options(parser)
local args = wbargs.parse(parser)

local tokens_list, modes = args.tokens, args.modes
local dim, hidden, iters, rounds, trace_tokens = args.dim, args.hidden, args.iters, args.rounds, args.trace_tokens
if args.max_rounds and args.max_rounds < rounds then
    wbargs.stop(parser, string.format("--max-rounds %d is below --rounds %d (it caps the rounds in all, the extra " ..
        "ones included) (see --help)", args.max_rounds, rounds))
end
local max_rounds = args.max_rounds or math.max(10, rounds) -- 10 by default
local device = args.device or wb.default_device()
-- a machine without a usable GPU is not a bad argument: one line with the reason and status 1, as
-- the workbench's own --device cuda (docs/cli.md), not a script error's traceback
if device == "cuda" and not wb.cuda.is_available() then wbargs.stop(parser, "--device cuda: " .. wb.cuda.why_not(), 1)
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
    local why = require("wb.memory").refusal(need, string.format("dim %d, hidden %d, %s, up to %d tokens", dim, hidden,
        args.dtype, max_tokens))
    if why then wbargs.stop(parser, why .. "; try a smaller --dim, --hidden or --tokens", 1) end
end
-- Modes must agree with eager to within the dtype's rounding: bf16 rounds the intermediates of
-- eager (gelu output, product) but not those of the fused modes.
local tolerance = args.dtype == "bf16" and 2e-2 or 1e-5
local opts = {dtype = args.dtype, device = device}
-- (made where something is first written: a run refused before that leaves no empty folder)
local out_dir = args.out or wb.options.out or ("out/mlp_sweep/" .. os.date("%Y%m%d-%H%M%S"))

local info = wb.device_info(device)
if args.dtype == "bf16" and info.peak_gflops_bf16 then info.peak_gflops = info.peak_gflops_bf16 end
local MLP = args.mlp == "swiglu" and "SwiGLU" or "GeGLU"
if MLP == "SwiGLU" and cuda then -- arguments that do not go together: status 2
    wbargs.stop(parser, "--mlp swiglu runs on the cpu only (no cuda kernels for silu yet)")
end
print(require("wb.words").wrap(string.format("mlp_sweep: " .. MLP .. " MLP dim %d hidden %d, %s on %s (%s, %s); " ..
    "tokens %s; modes %s", dim, hidden, args.dtype, device, info.name, plural(wb.get_num_threads(), "thread"),
    table.concat(tokens_list, ","), table.concat(modes, ",")), 120, "  "))
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
    local g -- captured at the first call (prepare's check), replayed after
    r.graph = function()
        if g then g:replay() else mlp.impl = "eager"; g = wb.graph.capture(function() return mlp(x) end) end
        return g.outputs[1]
    end
    local c = wb.compile(function(v) mlp.impl = "eager"; return mlp(v) end)
    r.compiled = function() return c(x) end
    return r
end

-- Kernels and host time of one forward: wb.profiler.per_call (medians of 5 forwards, in a range
-- "fwd"), which checks a promised kernel count on every forward: fused_mlp's one on the cpu (on
-- cuda it runs the dual mode's kernels, which cuBLASLt may split further: not counted there).
local EXPECT_KERNELS = cuda and {} or {fused_mlp = 1}

local flops_of = function(t) return 6.0 * t * dim * hidden end
-- the bytes any forward must move: the three weights, the input and the output (intermediates
-- that stay in caches or registers are not counted): the GB/s column's numerator
local bytes_of = function(t) return (args.dtype == "bf16" and 2 or 4) * (3.0 * dim * hidden + 2.0 * t * dim) end

-- One round's samples of a forward, in ms, by the rule every contender is timed by (torch_mlp.py
-- takes the same --rounds, --min-time-ms and --min-sample-us): at least --iters samples and 50 ms,
-- after 2 warm-ups; a sample is the mean of a batch of forwards lasting at least 2 ms. A 1-token
-- forward (~0.3 ms, its weights streamed from memory) varied ~10% (IQR / median) from one call to
-- the next on 1 thread as on 2, calls independent of each other (batches of 4 halved it, of 16
-- made it ~3%): timed one call a sample, every 1-token row read "unstable".
local MIN_TIME_MS, MIN_SAMPLE_US = 50, 2000
local function time_forward(fn)
    local b = wb.bench(fn, {warmup = 2, iters = iters, min_time_ms = MIN_TIME_MS, device = device,
        min_sample_us = MIN_SAMPLE_US})
    local ms = {}
    for i, s in ipairs(b.samples_us) do ms[i] = s / 1e3 end
    return ms
end

-- The peers (wb.mlp_peers), timed after each round of ours: PyTorch's eager forward and oneDNN's MLP.
local torch_enabled = not args.no_peer and not cuda and MLP == "GeGLU"
local peers = require("wb.mlp_peers").new{command = args.peer, torch = torch_enabled, dnnl = not args.no_dnnl and
    not cuda, script = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/peers/torch_mlp.py"}
local torch, dnnl = peers.torch, peers.dnnl

-- The job as the table, the report and the rounds read it.
local job = {mlp = MLP, dim = dim, hidden = hidden, dtype = args.dtype, device = device, info = info,
    threads = wb.get_num_threads(), rounds = rounds, max_rounds = max_rounds, torch = torch, dnnl = dnnl,
    peers = peers.list, flops_of = flops_of, bytes_of = bytes_of, target_noise = 0.05, -- above it: unstable
    run_tokens = {}, traces = {}, point_findings = {}} -- the token counts measured, the report's links, the findings
local inputs = {} -- per token count: {run = runners, ref = eager's output, err = per mode, x = the input}
local COST_GFLOPS, COST_GBS = 100, 20 -- the model machine of the shards' cost (fixed, not measured)
-- The report: text, charts and findings as data (wb.mlp_report; wb.results draws them from the
-- rows, as a merge does), as they stand when asked: results cut short by Ctrl-C are drawn alike.
local function report_parts() return require("wb.mlp_report").spec(job) end
-- The sweep: tokens x modes. wb.sweep runs the rounds (every mode at every token count, in order,
-- then the peers' round) and, with --shard I/N, only this shard's points; the rows keep the raw
-- samples, from which the statistics and the derived columns are computed (as a merge does).
local sweep
sweep = wb.sweep{
    name = "mlp_sweep",
    out = out_dir, -- where Ctrl-C's partial results go
    axes = {{"tokens", tokens_list}, {"mode", modes}},
    config = {dim = dim, hidden = hidden, dtype = args.dtype, device = device, iters = iters, dnnl = dnnl.label or "none",
        peer = args.peer or (torch_enabled and "torch_mlp.py" or "none"), mlp = args.mlp},
    rounds = rounds,
    shard = args.shard,
    -- a point's share of the work: its roofline time (what must move, and the [tokens, hidden]
    -- intermediate written and read once; or flops) on a model machine, at least a bench's minimum.
    -- Never this machine's calibration: every shard computes the split on its own, from the sweep's
    -- definition only (shards that calibrated 116 and 125 GFLOP/s split the points differently).
    cost = function(p)
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
                peers.prepare(tokens, mlp, x, ref, tolerance, args.mlp) -- oneDNN's, checked before any timing
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
    again = function(so_far)
        return wb.sweep.unsettled(so_far, sweep.mine, {by = "tokens", series = "mode", base = "eager",
            verdict = "speedup_vs_eager_verdict", target_noise = job.target_noise, peers = job.peers})
    end,
    report = report_parts, -- the report's parts as they stand, for partial results (Ctrl-C) too
    after_round = function(_, points) -- the peers' round at this round's token counts
        return peers.round(points, {dim = dim, hidden = hidden, threads = wb.get_num_threads(), dtype = args.dtype,
            rounds = iters, min_time_ms = MIN_TIME_MS, min_sample_us = MIN_SAMPLE_US}, function(t) return inputs[t].x end, time_forward)
    end,
    -- kernels and host time from the profiler, the trace, the check's error and the peer's samples
    finish = function(p, row)
        local call = wb.profiler.per_call(inputs[p.tokens].run[p.mode], {range = "fwd", device = device,
            kernels = EXPECT_KERNELS[p.mode]})
        row.kernels, row.host_us, row.rel_error, row.flops = call.kernels, call.host_us, inputs[p.tokens].err[p.mode],
            flops_of(p.tokens)
        row.bytes = bytes_of(p.tokens)
        row.torch_samples_ms, row.torch_samples_ms_per_round = torch.samples[p.tokens], torch.per_round[p.tokens]
        row.dnnl_samples_ms, row.dnnl_samples_ms_per_round = dnnl.samples[p.tokens], dnnl.per_round[p.tokens]
        row.rounds = #row.samples_ms_per_round
        -- the forward's kernels for the roofline, drawn from the rows (so a merge draws it too): numbers
        -- only (a column of text would be configuration to compare, which rows are aligned on)
        row.kernel_flops, row.kernel_bytes, row.kernel_ns = require("wb.report").kernel_work(call.kernel_events)
        -- what the profile of this point shows (wb.findings), kept in the JSON beside the rows
        local kept = {}
        for i, f in ipairs(call.profile:findings()) do
            kept[i] = {rule = f.rule, severity = f.severity, message = f.message, unreliable = f.unreliable}
        end
        table.insert(job.point_findings, {tokens = p.tokens, mode = p.mode, findings = kept})
        if p.tokens == trace_tokens then
            local file = string.format("mlp_%s_tokens%d.trace.json", p.mode, p.tokens)
            assert(wb.mkdir_p(out_dir))
            call.profile:export_chrome_trace(out_dir .. "/" .. file)
            job.traces[#job.traces + 1] = {text = string.format("Perfetto trace: %s at %d tokens", p.mode, p.tokens),
                href = file}
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

local rows = sweep:run()
local by_tokens = {}
for _, r in ipairs(rows) do
    if not by_tokens[r.tokens] then job.run_tokens[#job.run_tokens + 1] = r.tokens end
    by_tokens[r.tokens] = by_tokens[r.tokens] or {}
    table.insert(by_tokens[r.tokens], r)
end
require("wb.mlp_table").print(job, by_tokens) -- the main table, the line against the peers, the footer

local paths = sweep:save{dir = out_dir, report = report_parts(), extra = {findings = job.point_findings}}
print(string.format("\nresults: %s, %s\nreport: %s\ntraces: %s", paths.json, paths.csv, paths.html, #job.traces > 0 and
    string.format("%s/mlp_<mode>_tokens%d.trace.json", out_dir, trace_tokens) or
    string.format("none (--trace-tokens %d is not among the token counts)", trace_tokens)))
for _, line in ipairs(peers.notes()) do print(line) end
