-- profiler_overhead.lua: what recording costs (the bars we hold it to: <= 150 ns per recorded
-- event, and <= 5% on an MLP forward at tokens 16).
--
--   workbench experiments/profiler_overhead.lua [--rounds 11]
--
-- Method: (1) blocks of 1-element adds, timed with and without a running session in adjacent
-- pairs (the order alternating, the collector stopped inside a block); the median difference per
-- add divided by the events each add records (op, kernel) is the cost per event. (2) An eager GeGLU MLP forward (dim 768, hidden
-- 3072, tokens 16: linear, linear, gelu_tanh, mul, linear) with and without a session; until
-- experiments/mlp_sweep.lua exists this stands in for "profiling the MLP sweep at tokens 16".

local args = require("wb.args")
local plural = require("wb.words").plural
local parser = args.parser("profiler_overhead.lua", "What recording costs: ns per recorded event on a loop of " ..
    "1-element adds, and the slowdown of an eager GeGLU MLP forward at 16 tokens.")
parser:option("--rounds", "Rounds of alternating with and without a session.", "11"):convert(args.int("--rounds", 1, 1000))
local rounds = args.parse(parser).rounds

local function median(t)
    local s = {table.unpack(t)}
    table.sort(s)
    return s[(#s + 1) // 2]
end

-- (1) per-event cost. A 1-element add costs a few microseconds and the recording a few hundred
-- nanoseconds, so the two loops are compared block against adjacent block: each round times one
-- block without a session and one with (in alternating order, so a drift of the machine counts
-- against both), with the collector stopped inside the blocks and run between them (the adds'
-- garbage would otherwise be swept inside whichever block came next). The cost per event is the
-- median of the rounds' differences, with their quartiles.
local a = wb.ones({1})
local N = 2000
local function adds()
    collectgarbage()
    collectgarbage("stop")
    local t0 = wb.time_ns()
    for _ = 1, N do local _ = a + a end
    local ns = (wb.time_ns() - t0) / N
    collectgarbage("restart")
    return ns
end
local function recorded_adds()
    local p = wb.profiler.profile{max_events = 8 * N}
    p:start()
    local ns = adds()
    p:stop()
    return ns, p:stats().events / N
end
adds()
recorded_adds()
local off, on, diff, per_add_events = {}, {}, {}, 0
for r = 1, rounds * 20 do
    local o, w
    if r % 2 == 1 then
        o = adds()
        w, per_add_events = recorded_adds()
    else
        w, per_add_events = recorded_adds()
        o = adds()
    end
    off[#off + 1], on[#on + 1], diff[#diff + 1] = o, w, w - o
end
local function quantile(t, q)
    local s = {table.unpack(t)}
    table.sort(s)
    return s[math.max(1, math.min(#s, math.floor(q * (#s - 1) + 1.5)))]
end
local add_off, add_on = median(off), median(on)
local per_event = median(diff) / per_add_events
local per_event_q1, per_event_q3 = quantile(diff, 0.25) / per_add_events, quantile(diff, 0.75) / per_add_events

-- (2) an eager GeGLU MLP forward at tokens 16
wb.manual_seed(0)
local dim, hidden, tokens = 768, 3072, 16
local wg, wu, wd = wb.randn({hidden, dim}) * 0.02, wb.randn({hidden, dim}) * 0.02, wb.randn({dim, hidden}) * 0.02
local x = wb.randn({tokens, dim})
local function mlp()
    local g = wb.linear(x, wg)
    local u = wb.linear(x, wu)
    return wb.linear(wb.gelu(g, {approximate = "tanh"}) * u, wd)
end
local function time_mlp(iters)
    local t0 = wb.time_ns()
    for _ = 1, iters do local _ = mlp() end
    return (wb.time_ns() - t0) / iters
end
time_mlp(20)
local m_off, m_on, mlp_events = {}, {}, 0
for _ = 1, rounds do
    m_off[#m_off + 1] = time_mlp(40)
    local p = wb.profiler.profile{record_shapes = true, with_flops = true}
    p:start()
    m_on[#m_on + 1] = time_mlp(40)
    p:stop()
    mlp_events = p:stats().events / 40
end
local mlp_off, mlp_on = median(m_off), median(m_on)

print("== profiler overhead ==")
print(string.format("1-element add: %.0f ns without a session, %.0f ns with one (medians of %d blocks of %d); " ..
    "%.2f events recorded per add", add_off, add_on, #diff, N, per_add_events))
print(string.format("GeGLU MLP forward (dim %d, hidden %d, tokens %d, eager, %s): %.1f us without, %.1f us " ..
    "with record_shapes + with_flops; %.1f events per forward", dim, hidden, tokens, plural(wb.get_num_threads(), "thread"),
    mlp_off / 1e3, mlp_on / 1e3, mlp_events))
print("\n== ratios (bars: <= 150 ns per event; <= 5% slower) ==")
print(string.format("  cost per recorded event: %.0f ns (quartiles of the %d paired blocks: %.0f .. %.0f ns)", per_event,
    #diff, per_event_q1, per_event_q3))
print(string.format("  MLP forward with the profiler: %.3fx (%+.1f%%)", mlp_on / mlp_off, 100 * (mlp_on / mlp_off - 1)))
