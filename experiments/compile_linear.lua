-- compile_linear.lua: lesson (b), what compiling a single linear removes (host dispatch) and what
-- it keeps (the device kernel).
--
--   workbench experiments/compile_linear.lua [--tokens 1] [--in 768] [--out-features 768] [--rounds 9]
--
-- Expectation: wb.compile of y = linear(x, W, b) replays the one GEMM kernel eager launches (the
-- same name: the bias in its epilogue), with no Lua and no dispatcher in front of it, and with
-- the caller's x bound into the replayed launch (its data pointer rewritten) rather than copied
-- into a graph buffer: no copy kernel. So a compiled call spends less host time than an eager
-- one, and the kernel time is the same.
-- Method: per round, 40 eager calls then 40 compiled calls (alternating two inputs, so every
-- compiled call rebinds), each in a profiler range; host time = the range minus its kernels.
-- Rounds alternate the contenders, so a noisy neighbour hits both; medians per round, then the
-- median and the range over rounds.

local args = require("wb.args")
local stats = require("wb.stats")
local parser = args.parser("compile_linear.lua", "Lesson (b): eager vs compiled single linear; the same kernel, " ..
    "less host time, no copy kernel.")
parser:option("--tokens", "Rows of x.", "1"):convert(args.int("--tokens", 1, 65536))
parser:option("--in", "Input features.", "768"):convert(args.int("--in", 1, 65536))
parser:option("--out-features", "Output features.", "768"):convert(args.int("--out-features", 1, 65536))
parser:option("--rounds", "Alternating rounds of 40 calls each.", "9"):convert(args.int("--rounds", 1, 1000))
parser:option("--out", "Output folder (default: workbench --out, else out/compile_linear/<timestamp>-<pid>).")
local opts = args.parse(parser)
local out_dir = opts.out or wb.options.out or ("out/compile_linear/" .. os.date("%Y%m%d-%H%M%S"))
assert(wb.mkdir_p(out_dir)) -- a bad --out fails now, not after the measurements
local T, K, N = opts.tokens, opts["in"], opts.out_features
local CALLS = 40

wb.manual_seed(wb.options.seed or 0)
local w, b = wb.randn({N, K}), wb.randn({N})
local xs = {wb.randn({T, K}), wb.randn({T, K})}
local function eager(x) return wb.linear(x, w, b) end
local compiled = wb.compile(eager)
print(string.format("linear x[%d, %d] W[%d, %d] + b on %s; CPU path %s, %d thread(s)", T, K, N, K, xs[1].device,
    wb.cpu_isa(), wb.get_num_threads()))

-- correct first: the compiled call computes what eager does, bit for bit (the same kernel)
for _, x in ipairs(xs) do
    local err = wb.max_abs_diff(compiled(x), eager(x))
    assert(err == 0, string.format("compile_linear: compiled disagrees with eager (max abs diff %g)", err))
end
print(compiled:explain())

-- one profile of both, to read the kernel names and assert them
local p = wb.profiler.profile({}, function()
    for i = 1, 4 do
        wb.profiler.range("eager", function() local _ = eager(xs[i % 2 + 1]) end)
        wb.profiler.range("compiled", function() local _ = compiled(xs[i % 2 + 1]) end)
    end
end)
local kernel_name
for _, r in ipairs(p:range_instances("eager")) do kernel_name = kernel_name or r.kernels[1].name end
p:expect{range = "eager", kernels = {count = 1, match = kernel_name}}
p:expect{range = "compiled", kernels = {count = 1, match = kernel_name}} -- the same kernel, and nothing else
for _, r in ipairs(p:range_instances("compiled")) do
    for _, k in ipairs(r.kernels) do
        assert(not k.name:find("copy", 1, true), "compile_linear: a copy kernel ran in a compiled call: " .. k.name)
    end
end
p:export_chrome_trace(out_dir .. "/compile_linear.trace.json")

-- host and kernel time per call, alternating rounds
local function round(name, fn)
    local q = wb.profiler.profile({}, function()
        for i = 1, CALLS do wb.profiler.range(name, function() local _ = fn(xs[i % 2 + 1]) end) end
    end)
    local host, kern = {}, {}
    for i, r in ipairs(q:range_instances(name)) do host[i], kern[i] = r.host_ns / 1e3, r.kernel_ns / 1e3 end
    return stats.summarize(host).median, stats.summarize(kern).median
end
for _ = 1, 3 do round("warm", eager) round("warm", compiled) end
local res = {eager = {host = {}, kern = {}}, compiled = {host = {}, kern = {}}}
for i = 1, opts.rounds do
    for _, c in ipairs({{"eager", eager}, {"compiled", compiled}}) do
        res[c[1]].host[i], res[c[1]].kern[i] = round(c[1], c[2])
    end
end

local results = wb.results("compile_linear", {config = {tokens = T, ["in"] = K, out_features = N}})
print(string.format("\n%-9s %-32s %18s %18s", "run", "kernel", "host us/call", "kernel us/call"))
print(string.format("%-9s %-32s %18s %18s", "", "", "median [min-max]", "median [min-max]"))
local summary = {}
for _, name in ipairs({"eager", "compiled"}) do
    local h, k = res[name].host, res[name].kern
    local hs, ks = stats.summarize(h), stats.summarize(k)
    summary[name] = hs.median
    print(string.format("%-9s %-32s %6.2f [%.2f-%.2f] %8.1f [%.1f-%.1f]", name, kernel_name, hs.median, hs.min, hs.max,
        ks.median, ks.min, ks.max))
    results:add{run = name, kernel = kernel_name, host_us = hs.median, kernel_us = ks.median, host_us_rounds = h,
        kernel_us_rounds = k}
end
local paths = results:save{dir = out_dir}

print(string.format("\nhost time per call eager/compiled: %.2fx (medians of %d rounds of %d calls; bar: compiled lower)",
    summary.eager / summary.compiled, opts.rounds, CALLS))
assert(summary.compiled < summary.eager, "compile_linear: a compiled call should spend less host time than eager")
print("All expectations held: one kernel per call in both, the same " .. kernel_name .. ", no copy kernel, and less " ..
    "host time compiled.")
print("Results: " .. paths.json .. "; trace: " .. out_dir .. "/compile_linear.trace.json")
