-- verdict_calibration.lua: what a verdict of this workbench is worth on the machine at hand.
--
--   workbench experiments/verdict_calibration.lua [--pairs 40] [--power-pairs 20] [--series 30]
--                                                 [--results FILE] [--seed N]
--
-- diff: false verdicts over A/A pairs (one program recorded twice, 12 steps each) while a
-- background process switches a busy loop on and off (10-60 ms on, 10-60 ms off, seeded: it lands
-- on parts of recordings of ~40 ms, not on whole ones); then the power to call one range SLOWER
-- when its work grows by 5, 10 and 20%, at 3, 6 and 12 steps a side, on the machine as it is and
-- under the same load. The program is a GeGLU MLP in three ranges: "up" (the two input linears),
-- "act" (gelu and mul, repeated 20 times: the range slowed by repeating 21, 22 or 24 times),
-- "down" (the output linear).
-- history: wb.changepoints on synthetic series of 14 runs built from rows measured here (or the
-- rows of --results FILE, a results file with raw samples): each run's samples are resampled from
-- the row's own (its real spread, a 1-token row's included) and scaled by a run factor with 1%
-- run-to-run noise; A/A series have no change, the others a step of 2, 5 or 10% from run 9.
-- The bars (issue: verdicts that hold): A/A diff pairs with a false verdict <= 1 in 20; power >=
-- 90% for 20% at 6 steps; A/A history series with a change <= 1 in 30; a 10% step found at run 9 in
-- >= 95% of series of every row. Each is printed with its measured value; nothing here is tuned to
-- meet them.

local wbargs = require("wb.args")
local parser = wbargs.parser("verdict_calibration.lua", "measured error rates of diff and history verdicts")
parser:option("--pairs", "A/A pairs for diff's false-verdict rate.", "40"):convert(wbargs.int("--pairs", 1, 100000))
parser:option("--power-pairs", "Pairs per effect and step count for diff's power.", "20")
    :convert(wbargs.int("--power-pairs", 1, 100000))
parser:option("--series", "Series per row and case for history.", "30"):convert(wbargs.int("--series", 1, 100000))
parser:option("--results", "A results file whose rows (with raw samples) seed the history series.")
parser:option("--seed", "Seed of the load's pattern and of the series.", "1"):convert(wbargs.int("--seed", 0, 2 ^ 31))
local args = wbargs.parse(parser)

local stats = require("wb.stats")
local changepoints = require("wb.changepoints")
local cjson = require("cjson")

if wb.default_device() ~= "cpu" then
    io.stderr:write("verdict_calibration.lua: runs on the cpu device (this run's is " .. wb.default_device() .. ")\n")
    os.exit(2)
end

-- A seeded generator (LCG) of uniform and normal numbers, apart from math.random.
local function generator(seed)
    local state = (seed * 2654435761 + 1) % 4294967296
    local g = {}
    function g.uniform()
        state = (state * 1103515245 + 12345) % 2147483648
        return (state + 0.5) / 2147483648
    end
    function g.normal() return math.sqrt(-2 * math.log(g.uniform())) * math.cos(2 * math.pi * g.uniform()) end
    function g.int(n) return math.min(n, math.floor(g.uniform() * n) + 1) end
    return g
end

-- ---- the background load ------------------------------------------------------------------------
local exe = arg[-1]
for i = -2, -10, -1 do if arg[i] then exe = arg[i] else break end end
local load_pid
-- this process's id: the load ends itself when it is gone (killed, or stopped by a closed pipe,
-- before it could stop the load)
local self_stat = io.open("/proc/self/stat")
local self_pid = self_stat and self_stat:read("l"):match("^(%d+)")
if self_stat then self_stat:close() end
local function start_load(seed)
    -- the loop as a -e chunk (no file to leave behind), seeded so each run switches alike
    local code = string.format("local s, parent = %d, %q; local function u() s = (s * 1103515245 + 12345) %% " ..
        "2147483648; return s / 2147483648 end; while true do local f = io.open(\"/proc/\" .. parent .. \"/stat\"); " ..
        "if not f then os.exit(0) end; f:close(); local t0, on = wb.time_ns(), (10 + 50 * u()) * 1e6; " ..
        "while wb.time_ns() - t0 < on do end; wb.sleep_ms(math.floor(10 + 50 * u())) end", seed,
        self_pid or "self")
    local p = assert(io.popen(string.format("'%s' -e '%s' >/dev/null 2>&1 & echo $!", exe, code)))
    load_pid = math.tointeger(tonumber(p:read("l")))
    p:close()
    if not load_pid then error("verdict_calibration: could not start the background load", 0) end
    wb.sleep_ms(200)
end
local function stop_load()
    if load_pid then os.execute(string.format("kill %d 2>/dev/null", load_pid)) end
    load_pid = nil
end

-- ---- diff ---------------------------------------------------------------------------------------
local TOKENS, DIM, HIDDEN, REPS = 64, 512, 1024, 20 -- a step of a few ms: a recording spans several load switches
wb.manual_seed(args.seed)
local x = wb.randn({TOKENS, DIM})
local w_gate, w_up, w_down = wb.randn({HIDDEN, DIM}), wb.randn({HIDDEN, DIM}), wb.randn({DIM, HIDDEN})
local function step_of(reps)
    return function()
        local g, u, a
        wb.profiler.range("up", function() g, u = wb.linear(x, w_gate), wb.linear(x, w_up) end)
        wb.profiler.range("act", function() for _ = 1, reps do a = wb.gelu(g) * u end end)
        wb.profiler.range("down", function() return wb.linear(a, w_down) end)
    end
end

local function record(fn, steps)
    local p = wb.profiler.profile{activities = {"cpu", "device"}, record_shapes = true,
        schedule = {wait = 0, warmup = 1, active = steps}}
    p:start()
    for _ = 1, steps + 1 do fn(); p:step() end
    p:stop()
    return p
end

-- Every verdict of a diff: {label, verdict, needs_steps} for the totals and each node's host and device.
local function verdicts(r)
    local out = {}
    local function see(label, j) if j then out[#out + 1] = {label = label, j = j} end end
    see("total", r.total.host)
    see("total (device)", r.total.device)
    for _, n in ipairs(r.nodes) do see(n.label, n.host); see(n.label .. " (device)", n.device) end
    return out
end

local function discounted(r)
    local n = 0
    for _, side in ipairs({r.steps.a, r.steps.b}) do n = n + #side.left_out end
    return n
end

-- the CPU as /proc/cpuinfo names it (model name, family and model: "AMD EPYC" alone is not a CPU)
local cpu = wb.device_info("cpu").name
local info = io.open("/proc/cpuinfo")
if info then
    local text = info:read(65536) or ""
    info:close()
    local family, model = text:match("cpu family%s*:%s*(%d+)"), text:match("\nmodel%s*:%s*(%d+)")
    if family and model then cpu = string.format("%s (family %s, model %s)", cpu, family, model) end
end
print(string.format("verdict calibration on %s (%s), %d threads; seed %d", cpu, wb.cpu_isa(), wb.get_num_threads(),
    args.seed))
print("background load: one process, a busy loop switched on for 10-60 ms and off for 10-60 ms (seeded)")
local ok, err = pcall(function()
    start_load(args.seed)
    local base = step_of(REPS)
    base() -- first touch outside any recording
    local aa = {pairs = 0, false_pairs = 0, false_verdicts = 0, judged = 0, discounted = 0, examples = {}}
    local t0 = wb.time_ns()
    for i = 1, args.pairs do
        local r = wb.profiler.diff(record(base, 12), record(base, 12))
        aa.pairs = aa.pairs + 1
        aa.discounted = aa.discounted + discounted(r)
        local wrong = 0
        for _, v in ipairs(verdicts(r)) do
            aa.judged = aa.judged + 1
            if v.j.verdict == "SLOWER" or v.j.verdict == "FASTER" then
                wrong = wrong + 1
                if #aa.examples < 5 then
                    aa.examples[#aa.examples + 1] = string.format("pair %d: %s %s %.2fx", i, v.label, v.j.verdict, v.j.ratio)
                end
            end
        end
        aa.false_verdicts = aa.false_verdicts + wrong
        if wrong > 0 then aa.false_pairs = aa.false_pairs + 1 end
    end
    local aa_s = (wb.time_ns() - t0) / 1e9
    print(string.format("\ndiff, A/A: %d pairs of 12 steps each, %.0f s", aa.pairs, aa_s))
    print(string.format("  pairs with a false SLOWER/FASTER: %d of %d (%.1f%%); false verdicts %d of %d judged; " ..
        "steps left out (burst, busy, thin, after one): %d", aa.false_pairs, aa.pairs,
        100 * aa.false_pairs / aa.pairs, aa.false_verdicts, aa.judged, aa.discounted))
    for _, e in ipairs(aa.examples) do print("    " .. e) end
    -- power: on the machine as it is (the load stopped), then under the same switching load
    local function power_of(extra, nsteps)
        local slow = step_of(extra)
        local hit, unsure, needs, other = 0, 0, 0, 0
        for _ = 1, args.power_pairs do
            local r = wb.profiler.diff(record(base, nsteps), record(slow, nsteps))
            for _, n in ipairs(r.nodes) do
                if n.label == "act" and n.host then
                    if n.host.verdict == "SLOWER" then hit = hit + 1 end
                    if n.host.verdict == "UNSURE" then
                        unsure = unsure + 1
                        if n.host.needs_steps then needs = needs + 1 end
                    end
                elseif n.depth == 1 and n.host and (n.host.verdict == "SLOWER" or n.host.verdict == "FASTER") then
                    other = other + 1
                end
            end
        end
        return {hit = hit / args.power_pairs, unsure = unsure, needs = needs, other = other}
    end
    stop_load()
    local cells, power = {}, {}
    for _, extra in ipairs({{0.05, 21}, {0.10, 22}, {0.20, 24}}) do
        for _, nsteps in ipairs({3, 6, 12}) do cells[#cells + 1] = {extra = extra, steps = nsteps, quiet = power_of(extra[2], nsteps)} end
    end
    start_load(args.seed + 1)
    for _, c in ipairs(cells) do c.loaded = power_of(c.extra[2], c.steps) end
    stop_load()
    print(string.format("\ndiff, power: range \"act\" given 5/10/20%% more work (%d reps -> 21/22/24), %d pairs each, " ..
        "without and with the switching load", REPS, args.power_pairs))
    print(string.format("  %-8s %-6s %8s %12s %14s %10s", "slower", "steps", "SLOWER", "under load", "UNSURE: needs",
        "other false"))
    for _, c in ipairs(cells) do
        power[c.extra[1] .. "@" .. c.steps] = c.quiet.hit
        print(string.format("  %-8s %-6d %7.0f%% %11.0f%% %14s %10d", string.format("%.0f%%", c.extra[1] * 100), c.steps,
            100 * c.quiet.hit, 100 * c.loaded.hit, c.quiet.unsure > 0 and string.format("%d of %d", c.quiet.needs,
            c.quiet.unsure) or "-", c.quiet.other + c.loaded.other))
    end

    -- ---- history --------------------------------------------------------------------------------
    local rows = {}
    if args.results then
        local f = io.open(args.results, "rb")
        if not f then error("verdict_calibration: cannot read --results " .. args.results, 0) end
        local doc = cjson.decode(f:read("a"))
        f:close()
        for i, r in ipairs(doc.rows or {}) do
            if type(r.samples_ms) == "table" and #r.samples_ms >= 6 then
                local name = {}
                for k, v in pairs(r) do
                    if type(v) ~= "table" and not tostring(k):match("_ms$") and not tostring(k):match("verdict") then
                        name[#name + 1] = k .. "=" .. tostring(v)
                    end
                end
                table.sort(name)
                rows[#rows + 1] = {name = table.concat(name, " "):sub(1, 40), samples = r.samples_ms}
            end
        end
        print(string.format("\nhistory: rows with raw samples from %s: %d", args.results, #rows))
    else
        local mlp = wb.nn.GeGLUMLP(DIM, HIDDEN * 2, {impl = "eager"})
        for _, tokens in ipairs({1, 64}) do
            local xt = wb.randn({tokens, DIM})
            for _, mode in ipairs({"eager", "dual"}) do
                mlp.impl = mode
                local b = wb.bench(function() return mlp(xt) end, {max_time_ms = 600})
                rows[#rows + 1] = {name = string.format("tokens=%d mode=%s", tokens, mode), samples = b.samples_us}
            end
        end
        print(string.format("\nhistory: %d rows measured here (GeGLU MLP %dx%d, wb.bench 0.6 s each)", #rows, DIM, HIDDEN * 2))
    end
    if #rows == 0 then error("verdict_calibration: no rows with raw samples to build series from", 0) end
    local g = generator(args.seed + 7)
    local function series(row, step)
        local pts, n = {}, math.min(#row.samples, 2000)
        for k = 1, 14 do
            local f = math.exp(0.01 * g.normal()) * (k >= 9 and step or 1)
            local s = {}
            for j = 1, n do s[j] = row.samples[g.int(#row.samples)] * f end
            pts[k] = {median = stats.summarize(s).median, samples = s, machine = "m"}
        end
        return pts
    end
    print(string.format("  %d series of 14 runs per row and case; run-to-run noise 1%%; a step from run 9", args.series))
    print(string.format("  %-26s %7s %6s %10s %7s %7s %7s", "row", "samples", "noise", "A/A false", "2%", "5%", "10%"))
    local worst10, total_false, total_series = 1, 0, 0
    for _, row in ipairs(rows) do
        local sm = stats.summarize(row.samples)
        local cells = {}
        for ci, step in ipairs({1, 1.02, 1.05, 1.10}) do
            local good = 0
            for i = 1, args.series do
                local events = changepoints.detect(series(row, step), {seed = i})
                local changes, right = 0, false
                for _, e in ipairs(events) do
                    if e.kind == "change" then
                        changes = changes + 1
                        if e.index == 9 and e.verdict == "SLOWER" then right = true end
                    end
                end
                if step == 1 then good = good + (changes > 0 and 1 or 0) else good = good + (right and 1 or 0) end
            end
            cells[ci] = good
            if step == 1 then total_false, total_series = total_false + good, total_series + args.series end
            if step == 1.10 then worst10 = math.min(worst10, good / args.series) end
        end
        print(string.format("  %-26s %7d %5.0f%% %4d of %-3d %6.0f%% %6.0f%% %6.0f%%", row.name:sub(1, 26), #row.samples,
            sm.noise * 100, cells[1], args.series, 100 * cells[2] / args.series, 100 * cells[3] / args.series,
            100 * cells[4] / args.series))
    end

    print("\nbars:")
    local function bar(ok_, text) print(string.format("  %-4s %s", ok_ and "ok" or "MISS", text)) end
    bar(aa.false_pairs / aa.pairs <= 1 / 20, string.format("diff A/A under the switching load: %d of %d pairs with a " ..
        "false verdict (bar <= 1 in 20)", aa.false_pairs, aa.pairs))
    bar((power["0.2@6"] or 0) >= 0.9, string.format("diff power, 20%% slower at 6 steps, no load: %.0f%% (bar >= 90%%)",
        100 * (power["0.2@6"] or 0)))
    bar(total_false / total_series <= 1 / 30, string.format("history A/A: %d of %d series with a change (bar <= 1 " ..
        "in 30)", total_false, total_series))
    bar(worst10 >= 0.95, string.format("history, 10%% step found at run 9: %.0f%% in the worst row (bar >= 95%%)",
        100 * worst10))
end)
stop_load()
if not ok then
    io.stderr:write(tostring(err) .. "\n")
    os.exit(1)
end
