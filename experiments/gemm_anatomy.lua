-- gemm_anatomy.lua: where a CPU GEMM's time goes, next to what its register tile does alone.
--
--   workbench experiments/gemm_anatomy.lua [--sizes 512,1024,2048] [--tokens 16,128,512]
--                                          [--threads 1,2] [--rounds 5] [--dim 768] [--hidden 3072]
--
-- Expectation: a GEMM near the FMA peak spends nearly all its threads' time in the register tiles,
-- and the tiles run there as fast as the tile alone; what is missing from the peak is then
-- either outside the tiles (packing A, packing B, the epilogue, the threads' wait at the join)
-- or inside them (the operands not at hand: A from L2, a B sliver's first pass from L3 or memory).
-- Method: per row (the squares as wb.matmul, B packed on every call; the MLP's linears as
-- wb.linear, the weights packed once) and thread count, per round: the tile alone first
-- (wb._gemm_tile_gflops at the blocking's depth, one thread, operands kept in cache: the
-- microkernel's own rate), then a batch of calls of at least 100 ms with the GEMM's phase
-- counts on (wb._gemm_phases: each thread's CPU time per phase, and the team's wall time). Shares
-- are of the team's time (wall time x threads); "tiles GF/s" is the work over the threads' time
-- in the tiles, per thread, and "of alone" that over the tile alone in the same round. Medians
-- over rounds. The CPU path, its blocking and the FMA peak are printed first.
local args = require("wb.args")
local calibrate = require("wb.calibrate")
local stats = require("wb.stats")

local parser = args.parser("gemm_anatomy.lua", "Where a CPU GEMM's time goes (packing, tiles, epilogue, join), " ..
    "and its tiles against the register tile alone.")
parser:option("--sizes", "Square sizes (wb.matmul), comma-separated; 0 for none.", "512,1024,2048")
    :convert(args.ints("--sizes", 0, 16384))
parser:option("--tokens", "Token counts of the MLP's linears (wb.linear, dim -> hidden and hidden -> dim); 0 for none.",
    "16,128,512"):convert(args.ints("--tokens", 0, 65536))
parser:option("--threads", "Thread counts, comma-separated.", "1,2"):convert(args.ints("--threads", 1, 256))
parser:option("--rounds", "Rounds per row (medians over them).", "5"):convert(args.int("--rounds", 1, 1000))
parser:option("--dim", "The linears' model dimension.", "768"):convert(args.int("--dim", 1, 65536))
parser:option("--hidden", "The linears' hidden dimension.", "3072"):convert(args.int("--hidden", 1, 262144))
local opts = args.parse(parser)

local function plural(n, one) return string.format("%d %s%s", n, one, n == 1 and "" or "s") end
local median = function(t) return stats.summarize(t).median end

if wb.default_device() ~= "cpu" then
    print("gemm_anatomy: the phase counts are the CPU GEMM's; run it with --device cpu")
end
local b = wb.cpu_blocking()
print(string.format("cpu: %s; path %s, %dx%d tile; blocking kc %d, mc %d, nc %d (L1d %d KiB, L2 %d KiB, " ..
    "L3 %d KiB per CPU%s)", wb.device_info("cpu").name, b.isa, b.mr, b.nr, b.kc, b.mc, b.nc, b.l1 // 1024,
    b.l2 // 1024, b.l3_share // 1024, b.forced and ", forced" or b.split_vectors and "; deep K: 256-bit FMAs in halves" or ""))
if b.first_pass_packs then
    print("a row-major A (where at most 32 B slivers pass over it) and a matmul's row-major B are packed by " ..
        "the tiles' first pass over them: in \"tiles\", not in \"pack A\" / \"pack B\"")
end
local peaks = {}
for _, t in ipairs(opts.threads) do
    local e = calibrate.cpu(t)
    peaks[t] = e.peak_gflops
    print(string.format("FMA peak, %s: %.1f GFLOP/s (%s)", plural(t, "thread"), e.peak_gflops, e.source))
end

-- the rows: {label, flops, fn}
local rows = {}
for _, n in ipairs(opts.sizes) do
    if n > 0 then
        local a, bm = wb.randn({n, n}), wb.randn({n, n})
        rows[#rows + 1] = {label = string.format("matmul n=%d", n), flops = 2.0 * n * n * n,
            fn = function() local _ = wb.matmul(a, bm) end}
    end
end
for _, t in ipairs(opts.tokens) do
    if t > 0 then
        for _, s in ipairs({{opts.dim, opts.hidden}, {opts.hidden, opts.dim}}) do
            local x, w = wb.randn({t, s[1]}), wb.randn({s[2], s[1]})
            rows[#rows + 1] = {label = string.format("linear %d->%d t=%d", s[1], s[2], t),
                flops = 2.0 * t * s[1] * s[2], fn = function() local _ = wb.linear(x, w) end}
        end
    end
end
if #rows == 0 then error("gemm_anatomy: no rows (--sizes and --tokens are both 0)", 0) end

-- one round of a row at one thread count: the tile alone, then a batch with the counts on
local function round(row)
    local alone = wb._gemm_tile_gflops(b.kc, math.ceil(4e9 / (2 * b.mr * b.nr * b.kc))) -- ~20 ms
    for _ = 1, 2 do row.fn() end
    local t0, calls = wb.time_ns(), 0
    wb._gemm_phases(true)
    repeat
        row.fn()
        calls = calls + 1
    until calls >= 3 and wb.time_ns() - t0 >= 1e8
    local ph = wb._gemm_phases(false)
    if ph.runs ~= calls then
        error(string.format("gemm_anatomy: %s counted %d GEMMs for %d calls", row.label, ph.runs, calls), 0)
    end
    local team = ph.wall_team_ns
    local inside = ph.pack_a_ns + ph.pack_b_ns + ph.tiles_ns + ph.epilogue_ns
    return {
        ms = ph.wall_ns / calls / 1e6, alone = alone,
        pack_a = ph.pack_a_ns / team, pack_b = ph.pack_b_ns / team, tiles = ph.tiles_ns / team,
        epilogue = ph.epilogue_ns / team, other = math.max(0, ph.total_ns - inside) / team,
        join = math.max(0, team - ph.total_ns) / team,
        tiles_gflops = ph.tiles_ns > 0 and row.flops * calls / ph.tiles_ns or 0,
    }
end

print(string.format("\n%-22s %3s %8s %7s %5s %6s %6s %6s %5s %5s %5s %6s %5s %6s", "row", "thr", "ms/call", "GFLOP/s",
    "%peak", "pack A", "pack B", "tiles", "epi", "other", "join", "tiles", "of", "alone"))
print(string.format("%-22s %3s %8s %7s %5s %6s %6s %6s %5s %5s %5s %6s %5s %6s", "", "", "", "", "", "", "", "", "", "",
    "", "GF/s", "alone", "GF/s"))
for _, row in ipairs(rows) do
    for _, t in ipairs(opts.threads) do
        wb.set_num_threads(t)
        local got = {}
        for r = 1, opts.rounds do got[r] = round(row) end
        local function m(key)
            local v = {}
            for r, g in ipairs(got) do v[r] = g[key] end
            return median(v)
        end
        local ratios = {}
        for r, g in ipairs(got) do ratios[r] = g.tiles_gflops / g.alone end
        local ms = m("ms")
        local gflops = row.flops / ms / 1e6
        local pct = function(key) return string.format("%.1f%%", 100 * m(key)) end
        print(string.format("%-22s %3d %8.3f %7.1f %4.0f%% %6s %6s %6s %5s %5s %5s %6.1f %4.0f%% %6.1f", row.label, t, ms,
            gflops, 100 * gflops / peaks[t], pct("pack_a"), pct("pack_b"), pct("tiles"), pct("epilogue"), pct("other"),
            pct("join"), m("tiles_gflops"), 100 * median(ratios), m("alone")))
    end
end
print("\n" .. require("wb.words").wrap(string.format("shares: of the team's time (wall x threads), medians of %s; pack B is 0 where the " ..
    "weights were packed once (the linears); join: the fork, the wait for the slowest thread and time a thread was " ..
    "descheduled; tiles GF/s: per thread, in the tiles; of alone: that over the register tile alone at depth %d " ..
    "with its operands in cache, the same round (what is left below 100%% is the operands' misses inside the " ..
    "tiles)", plural(opts.rounds, "round"), b.kc), 120, "  "))
