-- wb.help: help() in the REPL. help() lists the topics; help(wb.linear), help("linear"),
-- help(x.view) or help(x) (a tensor: its summary and methods) print the documentation.

local DOCS = {
    -- creation
    ["wb.tensor"] = "wb.tensor(nested_table[, {dtype=, device=}]) -> a tensor with the table's values and shape; a number gives a 0-d tensor",
    ["wb.empty"] = "wb.empty(shape[, opts]) -> an uninitialised tensor, shape {2, 3} or a number for 1-D",
    ["wb.zeros"] = "wb.zeros(shape[, opts]) -> a tensor of zeros",
    ["wb.ones"] = "wb.ones(shape[, opts]) -> a tensor of ones",
    ["wb.full"] = "wb.full(shape, value[, opts]) -> a tensor filled with value",
    ["wb.rand"] = "wb.rand(shape[, opts]) -> uniform [0, 1) from Philox4x32-10 (same numbers whatever the thread count)",
    ["wb.randn"] = "wb.randn(shape[, opts]) -> standard normal values from Philox4x32-10",
    ["wb.arange"] = "wb.arange(n[, opts]) -> 0, 1, ..., n-1",
    ["wb.manual_seed"] = "wb.manual_seed(n): restart the generator at seed n",
    ["wb.initial_seed"] = "wb.initial_seed() -> the generator's seed",
    ["wb.help"] = "wb.help([x]) -> prints the topics, or the entry for a function, a name (\"linear\"), a tensor (its summary and methods) or a table of functions (help() in the REPL)",
    ["wb.mkdir_p"] = "wb.mkdir_p(path[, mode]) -> true, or nil, message: creates the folder and its parents, those it creates with mode (default 0777, less the umask; 448 is 0700) (under --sandbox: beneath --out only)",
    -- ops
    ["wb.matmul"] = "wb.matmul(a, b) -> a @ b for [M,K] x [K,N], or [B,M,K] x [K,N]; one GEMM kernel",
    ["wb.addmm"] = "wb.addmm(bias, a, b) -> a @ b + bias, the bias ([N]) added in the GEMM's epilogue",
    ["wb.linear"] = "wb.linear(x, w[, b][, {activation=\"gelu\"|\"gelu_tanh\"|\"silu\"|\"none\"}]) -> x @ w^T (+ b), via t(w) and addmm/mm: one kernel, bias and activation in its epilogue; w is packed once and reused",
    ["wb.gelu"] = "wb.gelu(x[, {approximate=\"none\"|\"tanh\"}]) -> GELU (default: the exact erf form, as PyTorch)",
    ["wb.geglu"] = "wb.geglu(gate, up) -> gelu_tanh(gate) * up in one pointwise kernel",
    ["wb.geglu_linear"] = "wb.geglu_linear(x, w_gate, w_up[, b_gate, b_up]) -> gelu_tanh(x w_gate^T + b_gate) * (x w_up^T + b_up) in one dual-GEMM kernel",
    ["wb.geglu_mlp"] = "wb.geglu_mlp(x, w_gate, w_up, w_down[, b_down]) -> (gelu_tanh(x w_gate^T) * (x w_up^T)) w_down^T + b_down: the whole MLP in one CPU kernel (per block of tokens the hidden activation goes from the dual GEMM's registers into the down GEMM's packed input, never to memory); bf16 runs the kernels the linears pick: the bf16 pair kernels on up to 6 rows (the hidden rounded to bf16, as the two-kernel path stores it), else f32 on weights widened once; on cuda it runs as the existing kernels (geglu_linear, then linear: 2 kernels)",
    ["wb.swiglu_mlp"] = "wb.swiglu_mlp(x, w_gate, w_up, w_down[, b_down]) -> (silu(x w_gate^T) * (x w_up^T)) w_down^T + b_down in one CPU kernel, as wb.geglu_mlp (cpu only: swiglu_linear, its cuda form, has no cuda kernel)",
    ["wb.swiglu"] = "wb.swiglu(gate, up) -> silu(gate) * up in one pointwise kernel",
    ["wb.swiglu_linear"] = "wb.swiglu_linear(x, w_gate, w_up[, b_gate, b_up]) -> silu(x w_gate^T + b_gate) * (x w_up^T + b_up) in one dual-GEMM kernel (cpu)",
    ["wb.allclose"] = "wb.allclose(a, b[, {rtol=1e-5, atol=1e-8}]) -> true when |a-b| <= atol + rtol |b| everywhere (NaN is never close)",
    ["wb.max_abs_diff"] = "wb.max_abs_diff(a, b) -> the largest |a - b|",
    ["wb.rel_error"] = "wb.rel_error(out, ref) -> ||out - ref|| / ||ref|| in double precision",
    -- machine
    ["wb.set_num_threads"] = "wb.set_num_threads(n): CPU threads for kernels",
    ["wb.get_num_threads"] = "wb.get_num_threads() -> CPU threads for kernels",
    ["wb.set_threads_adaptive"] = "wb.set_threads_adaptive(on) -> was_on: with false, kernels keep the requested thread count even while other processes keep the cores busy (benchmarks comparing thread counts); true restores dropping to one thread then",
    ["wb.cpu_bf16_pair_speed"] = "wb.cpu_bf16_pair_speed() -> the bf16 pair instruction's measured multiply-add rate over f32 FMAs (0.5: half as fast; 0: no such instruction, as on AVX2); auto uses pairs above 6 rows only where it is above 1.1",
    ["wb.devices"] = "wb.devices() -> the devices that can run ops, e.g. {\"cpu\"}",
    ["wb.device_info"] = "wb.device_info([device]) -> {device, name, isa, threads, peak_gflops, theoretical_peak_gflops, bandwidth_gbs, l2_gbs, l3_gbs, dram_gbs, under_load, calibrated, conditions}; cpu ceilings calibrated until stable and cached per machine; cuda: SM count, versions, datasheet peaks",
    ["wb.synchronize"] = "wb.synchronize([device]): wait for the device's queued kernels (the CPU runs them synchronously)",
    ["wb.default_device"] = "wb.default_device() -> the device creation functions use (--device)",
    ["wb.cpu_isa"] = "wb.cpu_isa([name]) -> the CPU kernel path in use (avx512, avx2, scalar); with a name, switch to it",
    ["wb.cpu_bf16"] = "wb.cpu_bf16([name]) -> the bf16 GEMM path: avx512bf16 (vdpbf16ps on k-pairs), avx2bf16 (k-pairs widened in registers), widen (f32 kernels), emulated (portable, for tests) or auto (by rows); with a name, switch to it",
    ["wb.cpu_blocking"] = "wb.cpu_blocking() -> {isa, mr, nr, kc, mc, nc, l1, l2, l3_share, fixed, split_vectors, " ..
        "forced}: the GEMM's register tile and cache blocking on the CPU path in use (K blocks of kc; row blocks of " ..
        "at most mc and column panels of at most nc, evened out), derived from the cache sizes in bytes it lists " ..
        "(sysfs's, or defaults); fixed: the path's own constants instead (the portable path); split_vectors: the CPU " ..
        "runs a 256-bit FMA as two halves (Zen 1), so K blocks are deeper than the caches alone give; forced: " ..
        "\"sizes\" or \"caches\" when wb.set_cpu_blocking or WB_GEMM_BLOCKING set it",
    ["wb.set_cpu_blocking"] = "wb.set_cpu_blocking(\"kc,mc,nc\" | \"caches:L1,L2,L3SHARE\" | {kc=, mc=, nc=} | " ..
        "{l1=, l2=, l3_share=} | nil): forces the GEMM's cache blocking on every CPU path (mc a multiple of 12, nc " ..
        "of 32), or the rule on another CPU's caches; nil goes back to this machine's rule. For tests: the same as " ..
        "WB_GEMM_BLOCKING; cpu_blocking().forced says which",
    ["wb.cpu_peak_gflops"] = "wb.cpu_peak_gflops([threads[, ms]]) -> measured FMA throughput of the CPU path",
    ["wb.time_ns"] = "wb.time_ns() -> monotonic wall clock in ns",
    ["wb.sleep_ms"] = "wb.sleep_ms(ms): sleep (benchmarks let other libraries' threads go idle)",
    ["wb.bench"] = "wb.bench(fn | {name=fn, ...}[, {warmup=3, iters=10, min_time_ms=100, max_time_ms=2000, target_noise=0.05, plateau_checks=6, max_iters=, flush_cache=false, device=, min_sample_us=0}]) -> {median_us, p10_us, p25_us, p75_us, p90_us, mean_us, min_us, max_us, iters, samples_us, batch, noise, converged, stop_reason, target_noise, wall_ms}; a table of functions is timed interleaved and gives one result per name",
    ["wb.results"] = "wb.results(name[, {columns=, keys=, config=, target_noise=0.05}]) -> r; r:add{...}; r:save{dir=} writes JSON, CSV and HTML with the environment fingerprint and returns their paths (without dir: into wb.options.out, and says where on stderr unless quiet=true)",
    ["wb.sweep"] = "wb.sweep{name=, axes={{\"tokens\", {1, 16}}, ...}, measure=function(point, round) -> samples_ms, rounds=, config=, shard=\"I/N\" (a point's modes, the axes a derived column's base names, stay in one shard), cost=function(point) -> number (from the sweep's definition only, never measured: every shard computes the split itself), prepare=, after_round=, finish=, stats=, derived=, constants=, columns=, out=DIR, history=, max_rounds=, again=function(rows, round) -> points to measure once more (unstable ones), report=function() -> the report's parts (for partial results)} -> s; s:run() -> rows with raw samples and statistics; s:save{dir=} writes <name>[.shard-I-of-N].json/.csv/.html (dir: else out=, else --out; and records the run in `workbench history` with --history, WB_HISTORY=1 or history=true); Ctrl-C during s:run() saves the points measured so far, marked partial, and ends with status 130; `workbench merge OUT DIRS` joins shards",
    ["wb.sweep.parse_shard"] = "wb.sweep.parse_shard(\"I/N\") -> I, N; or nil and what is wrong",
    ["wb.sweep.assign"] = "wb.sweep.assign(n, count[, costs]) -> the shard of each of n units (a sweep's groups of points): round robin, or the costliest first to the least loaded shard",
    ["wb.sweep.groups"] = "wb.sweep.groups(axes, points, paired) -> the groups of points that stay in one shard (arrays of point indices, with .name): points differing only on the paired axes (those a derived column's base names, e.g. mode) are one group",
    ["wb.sweep.point_name"] = "wb.sweep.point_name(axes, row) -> \"tokens=16 mode=dual\"",
    ["wb.sweep.compute"] = "wb.sweep.compute(rows, description, constants_of) -> rows with the statistics and derived columns recomputed from their raw samples",
    ["wb.sweep.unsettled"] = "wb.sweep.unsettled(rows, points, {by=\"tokens\", series=\"mode\", base=\"eager\", verdict=\"speedup_vs_eager_verdict\", target_noise=0.05[, noise=\"noise\"][, peers={{name=, timing=function(value) -> {samples=, per_round=} or nil}}]}) -> the points of every group (points sharing a value of `by`) with a row unstable (noise above target_noise) or UNSURE against the base row, or a peer unstable or UNSURE against it, and why (text): a sweep's again= rule",
    ["wb.sweep.add_options"] = "wb.sweep.add_options(parser): adds --shard I/N and --history to an argparse parser",
    ["wb.compile"] = "wb.compile(fn[, {max_signatures=8, fuse=true, codegen=true}]) -> a callable that traces fn per input signature, fuses (gelu+mul, dual GEMM, epilogues; fuse=false: no rules), generates a C (or CUDA C) kernel per group of elementwise ops (codegen=false: none; a hand-written geglu/swiglu only for a whole group, the faster of the two, timed), and a group on a linear/matmul's f32 cpu result into that GEMM's generated epilogue (one kernel, wb_sgemm_*_epi_*), captures and replays; f:explain() shows what it did, the bytes each group moves and why it was cut there",
    ["wb.compiled"] = "a compiled function (wb.compile(fn)): f(...) runs fn's plan for the arguments' signature (traced, fused, captured, replayed); f:explain() the ops, rules and kernels per signature; f:source(name) a generated kernel's C (CUDA C on cuda); f:signatures() how many are traced",
    ["wb.sweep.is_interrupt"] = "wb.sweep.is_interrupt(err) -> whether an error is the workbench's Ctrl-C (\"...interrupted!\")",
    ["wb.options"] = "wb.options: what the command line asked for: device, threads, seed (when given), out: wb.options.out is --out DIR, by default out/<script>/<timestamp>-<pid>, made when something is saved there",
    -- wb.args: an experiment's arguments (lua-argparse)
    ["wb.args"] = "wb.args (require(\"wb.args\")): an experiment's arguments with lua-argparse: --help lists the options with defaults, a bad one prints one line and exits 2",
    ["wb.args.parser"] = "wb.args.parser(name, description[, epilog]) -> an argparse parser named after the script",
    ["wb.args.parse"] = "wb.args.parse(parser[, argv]) -> the parsed options (argv: the script's arg); a bad argument: one line on stderr, exit status 2 (a workbench option the script does not take, like --threads 1 after the script, is told to go before it, with the command)",
    ["wb.args.stop"] = "wb.args.stop(parser, message[, status=2]): one line \"<script>: message\" on stderr, then the script ends with status (2: a bad argument; 1: this machine cannot run what was asked), not a traceback",
    ["wb.args.int"] = "wb.args.int(option, lo, hi) -> a converter for parser:option(...):convert(...): a whole number from lo to hi, e.g. parser:option(\"--tokens\", \"Tokens.\", \"16\"):convert(args.int(\"--tokens\", 1, 65536))",
    ["wb.args.ints"] = "wb.args.ints(option, lo, hi) -> a converter: comma-separated whole numbers from lo to hi, as an array",
    ["wb.args.names"] = "wb.args.names(option, allowed) -> a converter: a comma-separated list of names from the array allowed",
    ["wb.cuda.is_available"] = "wb.cuda.is_available() -> true when the CUDA plugin loads and a GPU is present",
    ["wb.cuda.why_not"] = "wb.cuda.why_not() -> nil, or why device cuda cannot run (plugin not built, no driver, no device)",
    ["wb.cuda.memory"] = "wb.cuda.memory() -> {allocated, reserved, peak} bytes of the caching allocator",
    -- reports: parts that come from profiles (require("wb.report"))
    ["wb.report.kernel_work"] = "wb.report.kernel_work(events) -> flops, bytes, ns: arrays of the events with flops, bytes and a duration (kernels), kept in a row for a roofline chart spec (flops=, bytes=, ns= name the columns)",
    ["wb.report.findings_tables"] = "wb.report.findings_tables(points, {by=\"mode\", at=\"tokens\"}) -> the report's tables of findings (wb.results' report.tables): one per value of `by`, titled \"Findings: <value>\", a row per finding {point[at], severity, rule, message}; points: {{mode=, tokens=, findings={{rule=, severity=, message=, unreliable=}}}}",
    -- modules
    ["wb.nn.Linear"] = "wb.nn.Linear(in, out[, {bias=true, dtype=, device=}]) -> a module: m(x), m.weight [out, in], m.bias, m:parameters(), m:to{}",
    ["wb.nn.SwiGLUMLP"] = "wb.nn.SwiGLUMLP(dim, hidden[, {impl=\"eager\"|\"fused\"|\"dual\"|\"fused_mlp\", bias=false, dtype=, device=}]) -> down(silu(gate(x)) * up(x)) (Llama's MLP); 5 / 4 / 2 / 1 kernels per forward (cpu); fused_mlp (wb.swiglu_mlp) needs bias=false",
    ["wb.nn.GeGLUMLP"] = "wb.nn.GeGLUMLP(dim, hidden[, {impl=\"eager\"|\"fused\"|\"dual\"|\"fused_mlp\", bias=false, dtype=, device=}]) -> down(gelu_tanh(gate(x)) * up(x)); 5 / 4 / 2 / 1 kernels per forward (fused_mlp: wb.geglu_mlp, 1 on the cpu, 2 on cuda; needs bias=false); m.impl can be switched",
    ["wb.graph.capture"] = "wb.graph.capture(fn, ...) -> g: runs fn once recording its kernel launches; g:replay() re-issues them, g.outputs are fn's results, g:nodes() the kernels, g:recapture(...) records fn again (cuda: cudaGraphExecUpdate), g:held_bytes() what it keeps alive, g:input(t) declares a captured input (-> its index), g:bind(i, t) replays on t instead (no copy), g:run(range, t1, ...) binds every input and replays inside a profiler range, g:release()",
    ["wb.profiler.profile"] = "wb.profiler.profile(opts[, fn]) -> p: p:start() p:step() p:stop() p:events() p:table{} p:key_averages{} p:expect{} p:findings() (what the profile shows: {rule, severity, message, evidence}) p:explain() (prints them) p:export_chrome_trace(path) p:export_stacks(path) (folded stacks for flamegraph.pl/speedscope) p:export_memory_timeline(path) (JSON + HTML chart; needs profile_memory) p:range_instances(name) (each instance of a range: its kernels, kernel and host time) p:each_event(filter) (events{cat=, lane=, name=, from_ns=, to_ns=, first=, limit=} builds only those); opts: activities, schedule, record_shapes, with_stack, with_flops, profile_memory, on_trace_ready, max_memory (default 256 MiB), memory_policy (\"spill\" | \"ring\" | \"stop\"), spill_dir, max_events; see also wb.profiler.load_trace",
    ["wb.profiler.per_call"] = "wb.profiler.per_call(fn[, {calls=5, range=\"call\", device=\"cpu\", kernels=n}]) -> {kernels, host_us, kernel_events, profile}: the kernels one call of fn launches and its host time (medians over calls profiled calls, each in the named range; on cuda host time is the launches' and kernels are counted over all calls); kernels=n checks every call launched n (p:expect)",
    ["wb.profiler.range"] = "wb.profiler.range(name, fn, ...) -> fn(...) inside a named range of the running profiler session",
    ["wb.profiler.diff"] = "wb.profiler.diff(pa, pb[, {min_effect=0.05, per_occurrence=false}]) -> two stopped " ..
        "profiles aligned node by node: {changes (replacements, added, removed, kernel kind changes), kernels {gone, " ..
        "new, moved}, nodes (a row per path, repeats aggregated unless per_occurrence: count_a/_b per step, " ..
        "host/device medians, ratio, verdict; a node one side lacks has only = \"A\" or \"B\" and the verdict " ..
        "\"removed\" or \"added\"), total, attribution {host, device}, build {a, b}, fingerprint, notes}; " ..
        "`workbench diff A B` on traces",
    ["wb.profiler.ab"] = "wb.profiler.ab{a = fn, b = fn, steps = 20, warmup = 1, order = \"shuffled\" | \"abba\" | \"alternate\", seed = 1, ...profile options} -> pa, pb: two programs profiled interleaved in one process, one step each in turn (blocks of A B B A and B A A B, shuffled by the seed), so that both sample the same machine; for wb.profiler.diff(pa, pb); `workbench diff --ab A.lua B.lua` on two scripts that return their step",
    ["wb.profiler.current"] = "wb.profiler.current() -> the session running now (started by p:start(), not " ..
        "stopped), or nil: wb.profiler.current():stop() stops one whose variable is lost",
    ["wb.profiler.push"] = "wb.profiler.push(name): open a named range (close it with pop)",
    ["wb.profiler.pop"] = "wb.profiler.pop(): close the innermost range",
    ["wb.profiler.load_trace"] = "wb.profiler.load_trace(path[, {max_memory=, memory_policy=, spill_dir=}]) -> p: a trace (.json or .json.gz, told by content: the workbench's, torch.profiler's Kineto JSON or legacy array, any Chrome trace) read in one streaming pass; p:table(), p:key_averages(), p:events(), p:findings(), p:export_chrome_trace() as after recording",
    ["wb.profiler.from_events"] = "wb.profiler.from_events(events) -> p: a stopped profile of a list of event tables (as p:events() returns them, or synthetic ones) through the trace reader's path: p:findings(), p:table(), wb.profiler.diff as for a recording; a field of the wrong type is an error naming the event and the field",
    ["wb.trace.load"] = "wb.trace.load(path[, load_trace options]) -> p: a trace file (the workbench's, torch.profiler's Kineto JSON, .json.gz, the legacy array, any Chrome trace) as wb.profiler.load_trace reads it, with p.trace_format (\"workbench\" | \"kineto\" | \"legacy\" | \"chrome\"); a TensorBoard folder -> an array of them, one per rank file; p:findings() -> findings, skipped (the rules the trace's fields do not support, with why); wb.profiler.diff(p, q) diffs two; see also wb.trace.describe(p), wb.trace.fingerprint(p) ({gpu, rank, world_size})",
    ["wb.openblas.matmul"] = "wb.openblas.matmul(a, b) -> OpenBLAS's sgemm on the same operands (a comparison peer)",
    ["wb.openblas.info"] = "wb.openblas.info() -> {corename, coretype}: the kernels OpenBLAS chose",
    ["wb.openblas.available"] = "wb.openblas.available() -> whether libopenblas0-pthread could be loaded (at first use) as a comparison peer",
    ["wb.openblas.set_num_threads"] = "wb.openblas.set_num_threads(n): OpenBLAS's thread count",
    -- tensor methods
    ["stride"] = "t:stride([dim]) -> the strides in elements (a table), or one",
    ["size"] = "t:size([dim]) -> the shape, or one size",
    ["dim"] = "t:dim() -> the number of dimensions",
    ["numel"] = "t:numel() -> the number of elements",
    ["storage_offset"] = "t:storage_offset() -> the offset of element 0 in its storage, in elements",
    ["data_ptr"] = "t:data_ptr() -> the address of element 0 (views share their base's memory)",
    ["is_contiguous"] = "t:is_contiguous() -> whether the elements are in row-major order without gaps",
    ["t"] = "t:t() -> the transpose of a matrix: a view (swapped strides), no copy, no kernel",
    ["transpose"] = "t:transpose(d1, d2) -> a view with two dimensions swapped",
    ["permute"] = "t:permute(d1, d2, ...) -> a view with the dimensions reordered",
    ["view"] = "t:view(shape) -> a view with a new shape (one -1 inferred); fails when the strides do not allow it",
    ["reshape"] = "t:reshape(shape) -> a view when possible, else a contiguous copy",
    ["flatten"] = "t:flatten([start, end]) -> dimensions start..end merged: a view when possible, else a copy",
    ["narrow"] = "t:narrow(dim, start, length) -> a view of a slice",
    ["select"] = "t:select(dim, i) -> a view of index i, without that dimension",
    ["as_strided"] = "t:as_strided(shape, stride[, offset]) -> a view with explicit geometry, bounds-checked against the storage",
    ["expand"] = "t:expand(shape) -> a view broadcasting size-1 dimensions (stride 0)",
    ["contiguous"] = "t:contiguous() -> t itself (re-wrapped) when contiguous, else a copy",
    ["clone"] = "t:clone() -> a contiguous copy",
    ["to"] = "t:to{device=, dtype=} -> the values on another device and/or in another dtype (an alias of t when nothing changes; f32 -> bf16 rounds to nearest even, NaN stays NaN)",
    ["item"] = "t:item() -> the value of a one-element tensor",
    ["sum"] = "t:sum([dim][, {keepdim=false}]) -> the sum over every element (0-d) or over one dim, in t's " ..
        "dtype; pairwise in f64, rounded once; a sum of nothing is 0",
    ["mean"] = "t:mean([dim][, {keepdim=false}]) -> the mean over every element (0-d) or over one dim; " ..
        "pairwise f64 sum, rounded once; empty: an error",
    ["max"] = "t:max([dim][, {keepdim=false}]) -> the largest element (0-d); with dim: values, indices " ..
        "(1-based positions along dim, f32, the first of ties); NaN wins; empty: an error",
    ["traceback"] = "traceback() (REPL) prints the full traceback of the last error (errors print their message and position); traceback(true|false): print it for every error, or not",
    ["tolist"] = "t:tolist() -> nested Lua tables of the values",
    ["fill_"] = "t:fill_(v) -> t, every element set to v",
    ["copy_"] = "t:copy_(src) -> t, with src's values (broadcast to t's shape)",
    ["release"] = "t:release(): free the tensor now; later use raises \"attempt to use a released tensor\"",
}

local TOPICS = [[
workbench help: help(function) or help("name") for one entry; help(x) for a tensor.
  creation  wb.tensor wb.empty wb.zeros wb.ones wb.full wb.rand wb.randn wb.arange wb.manual_seed
  ops       ARITHMETIC  wb.matmul wb.addmm wb.linear wb.gelu wb.geglu wb.geglu_linear
            ACTIVATIONS wb.swiglu wb.swiglu_linear wb.geglu_mlp wb.swiglu_mlp
  checks    wb.allclose wb.max_abs_diff wb.rel_error
  views     t:t() t:transpose t:permute t:view t:reshape t:flatten t:narrow t:select t:as_strided t:expand
            t[i] t[{i, j}] (t:select(1, i) ...)
  reduce    t:sum t:mean t:max (every element, or one dim: t:sum(2, {keepdim=true}); t:max(dim) -> values, indices)
  modules   wb.nn.Linear wb.nn.GeGLUMLP wb.nn.SwiGLUMLP
  speed     wb.graph.capture wb.compile wb.bench wb.profiler.profile wb.results wb.sweep wb.device_info
  traces    wb.trace.load (torch.profiler's too) wb.profiler.load_trace wb.profiler.from_events wb.profiler.diff
  scripts   wb.args (wb.args.parser wb.args.parse wb.args.int wb.args.ints wb.args.names) wb.options
  machine   wb.set_num_threads wb.set_threads_adaptive wb.cpu_isa wb.cpu_bf16 wb.cpu_blocking wb.devices
            wb.set_cpu_blocking wb.synchronize
Tab completes names (x:tr<Tab>); a trailing ; silences a value; Ctrl-C stops a statement; Ctrl-D leaves.]]

-- The ops of the op lists (wb._ops(), declared once in C): their entries and their places in the
-- topic lines (the arithmetic ops by their operators: a+b, -a).
local activations, arithmetic = {}, {}
for _, op in ipairs(wb._ops()) do
    local n = op.name
    if op.method then -- arithmetic: shown by its operator where it has one
        arithmetic[#arithmetic + 1] = not op.operator and "wb." .. n or
            op.kind == "binary" and "a" .. op.operator .. "b" or op.operator .. "a"
    end
    if op.kind == "binary" then
        DOCS["wb." .. n] = string.format("wb.%s(a, b) -> %s", n, op.formula) ..
            (op.operator and string.format("; also a %s b", op.operator) or "")
        DOCS[n] = string.format("t:%s(b) -> %s", n, op.method)
    elseif op.method then -- an arithmetic unary op (neg)
        DOCS["wb." .. n] = string.format("wb.%s(a) -> %s", n, op.formula)
        DOCS[n] = string.format("t:%s() -> %s", n, op.method)
    else
        DOCS["wb." .. n] = string.format("wb.%s(x) -> %s; also x:%s()", n, op.formula, n)
        DOCS[n] = string.format("t:%s() -> wb.%s(t)", n, n)
        activations[#activations + 1] = "wb." .. n
    end
end
TOPICS = TOPICS:gsub("ACTIVATIONS", table.concat(activations, " ")):gsub("ARITHMETIC", table.concat(arithmetic, " "))

local MODULES = {"nn", "graph", "profiler", "openblas", "cuda", "sweep", "args", "report"}

-- The documented name of a function value, by searching wb, its modules and tensor methods.
local function name_of(f)
    for k, v in pairs(wb) do
        if v == f and k:sub(1, 1) ~= "_" then return "wb." .. k end
    end
    for _, m in ipairs(MODULES) do
        local t = wb[m]
        if type(t) == "table" then
            for k, v in pairs(t) do if v == f then return "wb." .. m .. "." .. k end end
        end
    end
    if wb.compile == f then return "wb.compile" end
    for k, v in pairs(wb.Tensor.__methods) do
        if v == f then return k end
    end
end

local function help(x)
    if x == nil then
        print(TOPICS)
        return
    end
    if type(x) == "string" then
        local doc = DOCS[x] or DOCS["wb." .. x]
        local shown = #x > 60 and x:sub(1, 60) .. "..." or x
        print(doc or ("no help for '" .. shown:gsub("%c", "?") .. "' (help() lists the topics)"))
        return
    end
    if type(x) == "userdata" and getmetatable(x) == wb.Tensor then
        print(tostring(x))
        local names = {}
        for k in pairs(wb.Tensor.__methods) do names[#names + 1] = k end
        table.sort(names)
        print("fields: shape, dtype, device")
        print("methods: " .. table.concat(names, ", ") .. "  (help(x.view) for one)")
        return
    end
    if type(x) == "function" then
        local name = name_of(x)
        print(name and DOCS[name] or (name and ("no help written for " .. name)) or "no help for this function")
        return
    end
    if type(x) == "table" then
        -- a compiled function, or a module that is also a constructor (wb.sweep{...}): its own entry first
        local mt = getmetatable(x)
        if type(mt) == "table" and DOCS[rawget(mt, "__name") or ""] then
            print(DOCS[mt.__name])
            return
        end
        local lines = {}
        for _, m in ipairs(MODULES) do
            if rawget(wb, m) == x and DOCS["wb." .. m] then lines[1] = DOCS["wb." .. m] end
        end
        local own = lines[1]
        for k, v in pairs(x) do
            if type(v) == "function" and not (type(k) == "string" and k:sub(1, 1) == "_") then -- _: internal
                local name = name_of(v)
                lines[#lines + 1] = name and DOCS[name] or tostring(k)
            end
        end
        table.sort(lines)
        if own then -- the module's own entry stays first
            for i, l in ipairs(lines) do if l == own then table.remove(lines, i) break end end
            table.insert(lines, 1, own)
        end
        print(#lines > 0 and table.concat(lines, "\n") or "no functions in this table")
        return
    end
    print("no help for a " .. type(x))
end

return help
