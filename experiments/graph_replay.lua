-- graph_replay.lua: what replaying a captured graph removes (host dispatch) and what it does
-- not (device work).
--
--   workbench experiments/graph_replay.lua [--tokens 1,16]
--
-- Expectation: replay re-issues the recorded kernel launches with no Lua and no dispatcher in
-- between, so a forward's host time (wall time minus kernel time) shrinks to almost nothing,
-- while the kernels -- the same ones, on the same buffers -- take the same time as in eager.
-- Method: a GeGLU MLP (dim 768, hidden 3072) per mode, eager vs replay, alternating; wall time
-- from wb.bench, kernel time from the profiler; then the extreme case of a chain of 1000 tiny
-- adds, where dispatch is all there is.

local args = require("wb.args")
local parser = args.parser("graph_replay.lua", "What replaying a captured graph removes (host dispatch) and what " ..
    "it does not (device work): a GeGLU MLP eager vs replayed, then a chain of 1000 tiny adds.")
parser:option("--tokens", "Token counts, comma-separated.", "1,16"):convert(args.ints("--tokens", 1, 65536))
local token_list = args.parse(parser).tokens

-- Wall, kernel and host time of one forward, measured in the same runs: each of 20 forwards in
-- a profiler range; medians. On the cpu the kernels run inside the forward: host = the range's
-- duration minus the kernels inside it (so machine noise does not land in the difference). On
-- cuda they run after their launches: each forward is followed by a synchronize outside its
-- range, host = the range's duration (launching), and a forward's kernels are those that start
-- between its range and the next one. The profiler's own cost (~0.1 us per recorded event, more
-- events in eager) is inside the host figure.
local DEVICE = wb.default_device()
local cuda = DEVICE == "cuda"
local function measure(fn)
    for _ = 1, 3 do fn() end
    if cuda then wb.synchronize("cuda") end
    local p = wb.profiler.profile({}, function()
        for _ = 1, 20 do
            wb.profiler.range("fwd", fn)
            if cuda then wb.synchronize("cuda") end
        end
    end)
    local runs = p:range_instances("fwd")
    if cuda then
        local kernels = {}
        for _, e in ipairs(p:events()) do
            if e.cat == "kernel" then kernels[#kernels + 1] = e end
        end
        for i, r in ipairs(runs) do
            local stop = runs[i + 1] and runs[i + 1].ts_ns or math.maxinteger
            r.kernels, r.kernel_ns, r.host_ns = {}, 0, r.dur_ns
            for _, e in ipairs(kernels) do
                if e.ts_ns >= r.ts_ns and e.ts_ns < stop then
                    r.kernels[#r.kernels + 1] = e
                    r.kernel_ns = r.kernel_ns + e.dur_ns
                end
            end
        end
    end
    local walls, kerns, hosts = {}, {}, {}
    for i, r in ipairs(runs) do walls[i], kerns[i], hosts[i] = r.dur_ns, r.kernel_ns, r.host_ns end
    local function med(t) table.sort(t) return t[(#t + 1) // 2] / 1e3 end
    return {wall = med(walls), kern = med(kerns), host = med(hosts), n = #runs[#runs].kernels}
end

local function wall_us(fn)
    return wb.bench(fn, {warmup = 3, iters = 20, min_time_ms = 200, device = DEVICE}).median_us
end

wb.manual_seed(0)
print(string.format("%-6s %-6s %-7s %8s %11s %11s %12s %14s", "tokens", "mode", "run", "kernels", "wall us",
    "kernel us", "host us", "host us/kernel"))
local summary = {}
for _, tokens in ipairs(token_list) do
    for _, mode in ipairs({"eager", "fused", "dual"}) do
        local mlp = wb.nn.GeGLUMLP(768, 3072, {impl = mode})
        local x = wb.randn({tokens, 768})
        local g = wb.graph.capture(function() return mlp(x) end)
        local err = wb.rel_error(g.outputs[1], mlp(x))
        assert(err == 0, "graph_replay: the replay disagrees with eager")
        local runs = {{"eager", function() local _ = mlp(x) end}, {"replay", function() g:replay() end}}
        local res = {}
        for _, r in ipairs(runs) do
            local m = measure(r[2])
            res[r[1]] = m
            print(string.format("%-6d %-6s %-7s %8d %11.1f %11.1f %12.2f %14.3f", tokens, mode, r[1], m.n, m.wall,
                m.kern, m.host, m.host / m.n))
        end
        summary[#summary + 1] = {tokens = tokens, mode = mode, eager = res.eager, replay = res.replay}
    end
end

-- the extreme case: dispatch is all there is
local a = wb.ones({1})
local N = 1000
local function chain() local y = a; for _ = 1, N do y = y + a end; return y end
local g = wb.graph.capture(chain)
local eager_ns = wall_us(chain) * 1e3 / N
local replay_ns = wall_us(function() g:replay() end) * 1e3 / N

print(string.format("\nchain of %d 1-element adds: eager %.0f ns per op, replay %.1f ns per kernel (kernel included)",
    N, eager_ns, replay_ns))

-- a tiny GEMM (1x8 @ 8x16: 128 multiply-adds) replayed on one thread: what a kernel too small for
-- threads costs, wall clock and as the profiler's kernel time (runs inline: no pool wake-up)
local tiny_ns, tiny_kernel_ns = 0, 0
if DEVICE == "cpu" then
    local threads = wb.get_num_threads()
    wb.set_num_threads(1)
    local tx, tw = wb.randn({1, 8}), wb.randn({16, 8})
    local tg = wb.graph.capture(function() for _ = 1, N do local _ = wb.linear(tx, tw) end end)
    tiny_ns = wall_us(function() tg:replay() end) * 1e3 / N
    local p = wb.profiler.profile({activities = {"cpu", "device"}}, function() tg:replay() end)
    local kernels = {}
    for _, e in ipairs(p:events()) do if e.cat == "kernel" then kernels[#kernels + 1] = e.dur_ns end end
    tiny_kernel_ns = require("wb.stats").median(kernels)
    wb.set_num_threads(threads)
    print(string.format("chain of %d tiny GEMMs (1x8 @ 8x16, 1 thread): replay %.0f ns per kernel; the profiler's " ..
        "kernel time %.0f ns (median)", N, tiny_ns, tiny_kernel_ns))
end
print("\n== ratios ==")
for _, s in ipairs(summary) do
    print(string.format("  tokens %-3d %-5s host time eager/replay %6.1fx; kernel time replay/eager %.2f", s.tokens,
        s.mode, s.eager.host / math.max(s.replay.host, 1e-3), s.replay.kern / s.eager.kern))
    assert(s.replay.host < s.eager.host, "graph_replay: a replay should spend less host time than eager dispatch")
end
print(string.format("  replay host cost per tiny kernel: %.1f ns (bar <= 50 ns); eager dispatch per 1-element add: " ..
    "%.0f ns (bar <= 500 ns)", replay_ns, eager_ns))
if DEVICE == "cpu" then
    print(string.format("  replayed tiny GEMM, 1 thread: %.0f ns per kernel (bar <= 300 ns)", tiny_ns))
end
