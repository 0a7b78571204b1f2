-- contention.lua: do the CPU kernels' threads survive a busy machine?
--
--   workbench experiments/contention.lua [--threads N] [--competitors N] [--tokens 16,128]
--                                        [--modes dual,eager] [--dim 768] [--hidden 3072]
--                                        [--max-time-ms 3000]
--
-- Expectation. With N threads on N cores and nothing else running, N threads beat 1 thread
-- (the bar: under 0.9x; on a machine that others share, their load can take that away, and the
-- machine's state is printed at each stage to show it).
-- With N other CPU-bound processes running (started here, stopped at the end), every core is
-- shared: N threads cannot be much faster than 1, but they must not be much slower either (the
-- bar: at most 1.2x the 1-thread time). A thread pool that spins for a core that is busy
-- elsewhere, or a barrier that waits for a thread the scheduler has put aside, breaks it by
-- large factors.
-- Method: the GeGLU MLP forward (dual and eager, f32) at each token count, 1 thread and N threads
-- timed interleaved by wb.bench (A B A B ...), first on the machine as it is, then with the
-- competitors running (busy loops in child shells whose process ids are kept and killed).

local wbargs = require("wb.args")

local parser = wbargs.parser("contention.lua", "MLP forward at 1 and N threads, with and without N busy competitors")
parser:option("--threads", "Threads for the parallel runs (default: the workbench's thread count).")
    :convert(wbargs.int("--threads", 2, 1024))
parser:option("--competitors", "Busy processes to start (default: as many as threads).")
    :convert(wbargs.int("--competitors", 1, 1024))
parser:option("--tokens", "Token counts, comma-separated.", "16,128"):convert(wbargs.ints("--tokens", 1, 65536))
parser:option("--modes", "MLP modes, comma-separated (dual, eager, fused).", "dual,eager")
    :convert(wbargs.names("--modes", {"dual", "eager", "fused"}))
parser:option("--dim", "Model dimension.", "768"):convert(wbargs.int("--dim", 1, 65536))
parser:option("--hidden", "Hidden dimension.", "3072"):convert(wbargs.int("--hidden", 1, 262144))
parser:option("--max-time-ms", "Time limit of each 1-vs-N measurement.", "3000")
    :convert(wbargs.int("--max-time-ms", 200, 600000))
local args = wbargs.parse(parser)

-- not a bad argument but a setting this run cannot compare with: one line, status 2 as well
local function bad(msg)
    io.stderr:write("contention.lua: " .. msg .. "\n")
    os.exit(2)
end

local threads = args.threads or wb.get_num_threads()
if threads < 2 then bad("needs at least 2 threads to compare with 1 (this workbench runs " .. threads .. "; pass --threads)") end
local competitors = args.competitors or threads
local tokens_list, modes, dim, hidden, max_time = args.tokens, args.modes, args.dim, args.hidden, args.max_time_ms
if wb.default_device() ~= "cpu" then bad("runs on the cpu device (this run's default device is " .. wb.default_device() .. ")") end

local machine = require("wb.machine")

-- Competitors: `sh -c 'while :; do :; done'` children; their pids are read back so that exactly
-- those processes are stopped, whatever happens in between.
local pids = {}
local function start_competitors(n)
    for _ = 1, n do
        local p = assert(io.popen("sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!"))
        local pid = math.tointeger(tonumber(p:read("l")))
        p:close()
        if not pid then error("contention: could not start a competitor", 0) end
        pids[#pids + 1] = pid
    end
    wb.sleep_ms(300) -- let the scheduler see them running
end
local function stop_competitors()
    for _, pid in ipairs(pids) do os.execute(string.format("kill %d 2>/dev/null", pid)) end
    pids = {}
end

wb.manual_seed(wb.options.seed or 0)
local mlp = wb.nn.GeGLUMLP(dim, hidden, {impl = "eager"})
local start = machine.state()
print(string.format("contention: GeGLU MLP dim %d hidden %d f32, %s (%s); 1 vs %d threads, %d competitors",
    dim, hidden, wb.device_info("cpu").name, wb.cpu_isa(), threads, competitors))
local warning = machine.warning(start)
if warning then print(warning) end

local rows = {}
local function measure(condition)
    for _, tokens in ipairs(tokens_list) do
        local x = wb.randn({tokens, dim})
        for _, mode in ipairs(modes) do
            mlp.impl = mode
            local rs = wb.bench({
                [1] = function() wb.set_num_threads(1); mlp(x) end,
                [2] = function() wb.set_num_threads(threads); mlp(x) end,
            }, {warmup = 2, iters = 10, min_time_ms = 200, max_time_ms = max_time, target_noise = 0.03})
            local row = {condition = condition, tokens = tokens, mode = mode, one = rs[1], many = rs[2],
                ratio = rs[2].median_us / rs[1].median_us}
            rows[#rows + 1] = row
            print(string.format("  %-15s tokens %-4d %-6s 1 thread %8.3f ms (noise %3.0f%%)  %d threads %8.3f ms " ..
                "(noise %3.0f%%)  N/1 %.2fx", condition, tokens, mode, rs[1].median_us / 1e3, rs[1].noise * 100,
                threads, rs[2].median_us / 1e3, rs[2].noise * 100, row.ratio))
        end
    end
end

local ok_run, err = pcall(function()
    print("without competitors: " .. machine.describe(machine.state()))
    measure("no competitors")
    start_competitors(competitors)
    local busy = machine.state()
    print(string.format("with %d competitors: %s", competitors, machine.describe(busy)))
    measure(string.format("%d competitors", competitors))
end)
stop_competitors()
wb.set_num_threads(threads)
if not ok_run then error(err, 0) end

print(string.format("\n%-16s %6s %-6s %10s %10s %8s  %s", "condition", "tokens", "mode", "1 thr ms", threads .. " thr ms",
    "N/1", "bar"))
local failed = 0
for _, r in ipairs(rows) do
    local busy = r.condition ~= "no competitors"
    local pass = busy and r.ratio <= 1.2 or (not busy and r.ratio < 0.9)
    if not pass then failed = failed + 1 end
    print(string.format("%-16s %6d %-6s %10.3f %10.3f %7.2fx  %s %s", r.condition, r.tokens, r.mode, r.one.median_us / 1e3,
        r.many.median_us / 1e3, r.ratio, busy and "<= 1.2x" or "< 0.9x", pass and "ok" or "MISSED"))
end
print("machine at end: " .. machine.describe(machine.state()))
print(string.format("%d of %d points meet their bar", #rows - failed, #rows))
