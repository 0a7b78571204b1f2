-- fusion.lua: lesson (c), a fused pointwise kernel the compiler generates (Inductor's
-- triton_poi_fused_gelu_mul) against a hand-written one (Liger's fused GeGLU / SwiGLU).
--
--   workbench experiments/fusion.lua [--tokens 16,128,512] [--hidden 3072] [--threads 1,N] [--quick]
--
-- Expectation. For act(g) * u with act = gelu_tanh (GeGLU) or silu (SwiGLU), g and u [tokens,
-- hidden] f32, three contenders compute the same function:
--   eager:        two kernels, the activation then the mul; the activation's output is written
--                 and read back: 5 tensor passes (read g, write a; read a, read u, write y)
--   hand-written: wb.geglu(g, u) / wb.swiglu(g, u), one kernel: 3 passes (read g, u; write y)
--   generated:    wb.compile(function(g, u) return wb.gelu(g, {approximate = "tanh"}) * u end,
--                 {fuse = false}): one kernel wb_poi_fused_* that the code generator wrote in C,
--                 compiled and loaded at run time: 3 passes. (fuse = false turns the pattern rules
--                 off; with them on, gelu*mul is rewritten to the hand-written geglu and nothing
--                 is generated.)
-- The generated kernel should land close to the hand-written one: generated/hand-written kernel
-- time <= 1.1x (issue 14's bar), and both fused kernels should beat eager, which moves 5/3 the
-- bytes.
-- Method. Per point (activation, tokens, threads): check each result against eager (rel. error),
-- profile a few calls per contender in a range and assert the kernel counts with p:expect (2, 1,
-- 1; the generated one named wb_poi_fused_*) and the bytes each kernel declares (5 / 3 / 3 passes).
-- Then time the three with wb.bench, interleaved (eager, generated, hand-written, eager, ...,
-- until each one's timing converges or the time limit), inside a profiler session: each call is a
-- range, and its kernel time is the sum of the kernel events in it (the CPU device runs kernels
-- synchronously; the host's dispatch is not in it). Medians and p10-p90 over the calls; a point
-- is marked unstable when a contender's kernel times have IQR/median above 10% (the machine may
-- be shared). The ratio generated/hand-written is the median of the per-rotation ratios (the two
-- calls were adjacent in time, so a drifting machine hits both).
-- If the C compiler is missing or code generation is off, the generated column is skipped.

local args = require("wb.args")
local stats = require("wb.stats")
local plural = require("wb.words").plural

local default_threads = wb.get_num_threads()
local function thread_list(s)
    local out, seen = {}, {}
    for v in (s .. ","):gmatch("([^,]*),") do
        local n = v == "N" and default_threads or math.tointeger(tonumber(v))
        if not n or n < 1 or n > 1024 then
            return nil, string.format("--threads '%s': expected whole numbers from 1 to 1024 or N (the default, %d), " ..
                "comma-separated", v, default_threads)
        end
        if not seen[n] then out[#out + 1], seen[n] = n, true end
    end
    return out
end

local parser = args.parser("fusion.lua", "Lesson (c): a generated fused pointwise kernel (wb_poi_fused_*) against " ..
    "a hand-written one (wb.geglu, wb.swiglu) and eager's two kernels.")
parser:option("--tokens", "Token counts, comma-separated (default 16,128,512; --quick: 8,64).")
    :convert(args.ints("--tokens", 1, 1 << 20))
parser:option("--hidden", "Hidden dimension (default 3072; --quick: 512).")
    :convert(args.int("--hidden", 1, 1 << 20))
parser:option("--threads", "Thread counts, comma-separated; N is the default count (" .. default_threads .. ").",
    "1,N"):convert(thread_list)
parser:option("--max-ms", "Wall-time limit of one point's interleaved timing (default 2000; --quick: 150).")
    :convert(args.int("--max-ms", 10, 600000))
parser:flag("--quick", "A fast small run (the test's).")
parser:option("--out", "Output folder (default: workbench --out, else out/fusion/<timestamp>-<pid>).")
local opts = args.parse(parser)
local out_dir = opts.out or wb.options.out or ("out/fusion/" .. os.date("%Y%m%d-%H%M%S"))
assert(wb.mkdir_p(out_dir)) -- a bad --out fails now, not after the measurements
local TOKENS = opts.tokens or (opts.quick and {8, 64} or {16, 128, 512})
local H = opts.hidden or (opts.quick and 512 or 3072)
local MAX_MS = opts.max_ms or (opts.quick and 150 or 2000)
local BAR, UNSTABLE = 1.1, 0.10

local ACTS = {
    {name = "geglu", hand = wb.geglu, hand_match = "geglu",
        eager = function(g, u) return wb.gelu(g, {approximate = "tanh"}) * u end},
    {name = "swiglu", hand = wb.swiglu, hand_match = "swiglu",
        eager = function(g, u) return wb.silu(g) * u end},
}

wb.manual_seed(wb.options.seed or 0)
print(string.format("act(g) * u, g and u [tokens, %d] f32, tokens %s, threads %s; CPU path %s", H,
    table.concat(TOKENS, ","), table.concat(opts.threads, ","), wb.cpu_isa()))

-- The generated kernel of one activation, or nil and why there is none (checked on a first call).
local codegen_off
local function generated(act, g, u)
    if codegen_off then return nil end
    local f = wb.compile(act.eager, {fuse = false})
    local _ = f(g, u)
    local ex = f:explain()
    local name = ex:match("group (wb_poi_fused_[%w_]+)")
    if not name then
        codegen_off = ex:match("code generation: off[^\n]*") or ex:match("runs eagerly: [^\n]*") or ex
        print("generated column skipped: " .. codegen_off)
        return nil
    end
    return f, name
end

-- Kernel time and bytes per call of each range (contender) in a profile, in call order. One pass
-- over the events sorted by start: the ranges do not overlap (calls run one after the other).
local function per_call(p, names)
    local ranges, kernels = {}, {}
    for _, e in ipairs(p:events()) do
        if e.cat == "range" and names[e.name] then ranges[#ranges + 1] = e
        elseif e.cat == "kernel" then kernels[#kernels + 1] = e end
    end
    table.sort(ranges, function(a, b) return a.ts_ns < b.ts_ns end)
    table.sort(kernels, function(a, b) return a.ts_ns < b.ts_ns end)
    local out, k = {}, 1
    for name in pairs(names) do out[name] = {us = {}, bytes = {}, kernels = {}} end
    for _, r in ipairs(ranges) do
        while kernels[k] and kernels[k].ts_ns < r.ts_ns do k = k + 1 end
        local ns, bytes, list = 0, 0, {}
        while kernels[k] and kernels[k].ts_ns <= r.ts_ns + r.dur_ns do
            ns, bytes, list[#list + 1] = ns + kernels[k].dur_ns, bytes + kernels[k].bytes, kernels[k].name
            k = k + 1
        end
        local o = out[r.name]
        o.us[#o.us + 1], o.bytes[#o.bytes + 1], o.kernels[#o.kernels + 1] = ns / 1e3, bytes, list
    end
    return out
end

local results = wb.results("fusion", {target_noise = UNSTABLE,
    config = {tokens = TOKENS, hidden = H, threads = opts.threads, max_ms = MAX_MS}})
local rows, points, shown = {}, {}, {}
for _, threads in ipairs(opts.threads) do
    wb.set_num_threads(threads)
    for _, act in ipairs(ACTS) do
        for _, T in ipairs(TOKENS) do
            local g, u = wb.randn({T, H}), wb.randn({T, H})
            local ref = act.eager(g, u)
            local gen, gen_name = generated(act, g, u)
            local runs = {
                {id = "eager", fn = function() return act.eager(g, u) end, kernels = 2, passes = 5},
                {id = "hand", label = "hand-written", fn = function() return act.hand(g, u) end, kernels = 1, passes = 3,
                    match = act.hand_match},
            }
            if gen then
                runs[#runs + 1] = {id = "gen", label = "generated", fn = function() return gen(g, u) end, kernels = 1,
                    passes = 3, match = "wb_poi_fused_"}
                if not shown[act.name] then -- the generated body, once per activation
                    shown[act.name] = true
                    print(string.format("\n%s: %s generated; its body:", act.name, gen_name))
                    for line in gen:source(gen_name):gmatch("[^\n]+") do
                        if line:find("^%s+vf t%d+ = ") or line:find("^void ") then print("  " .. line) end
                    end
                end
            end
            local names = {}
            for _, r in ipairs(runs) do
                r.err = wb.rel_error(r.fn(), ref)
                assert(r.err < 1e-5, string.format("fusion: %s %s at %d tokens disagrees with eager (rel. error %.2e)",
                    act.name, r.id, T, r.err))
                names[r.id] = true
            end
            -- what runs per call: the kernel counts, the generated kernel's name, the bytes
            local p = wb.profiler.profile({}, function()
                for _ = 1, 3 do
                    for _, r in ipairs(runs) do wb.profiler.range(r.id, function() local _ = r.fn() end) end
                end
            end)
            for _, r in ipairs(runs) do
                p:expect{range = r.id, kernels = r.match and {count = r.kernels, match = r.match} or r.kernels}
            end
            local pass = T * H * 4
            for id, c in pairs(per_call(p, names)) do
                for i, list in ipairs(c.kernels) do
                    if id == "gen" then
                        assert(list[1]:sub(1, 13) == "wb_poi_fused_", "fusion: the generated kernel is " .. list[1])
                    end
                    for _, r in ipairs(runs) do
                        if r.id == id then
                            assert(c.bytes[i] == r.passes * pass, string.format("fusion: %s moved %d bytes per call, " ..
                                "expected %d passes of %d", id, c.bytes[i], r.passes, pass))
                            r.names = table.concat(list, "+")
                        end
                    end
                end
            end
            -- interleaved timing inside one profiler session
            local fns = {}
            for _, r in ipairs(runs) do
                local fn = r.fn
                fns[r.id] = function() wb.profiler.push(r.id) fn() wb.profiler.pop() end
            end
            local bench
            local q = wb.profiler.profile({}, function()
                bench = wb.bench(fns, {min_time_ms = math.min(200, MAX_MS), max_time_ms = MAX_MS, target_noise = 0.03})
            end)
            local calls = per_call(q, names)
            local point = {act = act.name, tokens = T, threads = threads, unstable = false}
            for _, r in ipairs(runs) do
                local s = stats.summarize(calls[r.id].us)
                r.s, r.gbs, r.call_us = s, r.passes * pass / (s.median * 1e3), bench[r.id].median_us
                if s.noise > UNSTABLE then point.unstable = true end
                point[r.id] = r
                results:add{act = act.name, tokens = T, hidden = H, threads = threads, run = r.id, kernel = r.names,
                    kernels = r.kernels, rel_error = r.err, bytes = r.passes * pass, kernel_us = s.median,
                    p10_us = s.p10, p90_us = s.p90, noise = s.noise, gb_per_s = r.gbs, call_us = bench[r.id].median_us,
                    calls = s.n, kernel_us_samples = calls[r.id].us}
            end
            if gen then -- per rotation: the i-th generated call against the i-th hand-written one
                local ratios = {}
                local a, b = calls.gen.us, calls.hand.us
                for i = 1, math.min(#a, #b) do ratios[i] = a[i] / b[i] end
                point.ratio = stats.summarize(ratios)
            end
            local e, h = point.eager.s.median, point.hand.s.median
            point.eager_over_hand = e / h
            points[#points + 1] = point
            rows[#rows + 1] = point
        end
    end
end
wb.set_num_threads(default_threads)

print(string.format("\n%-6s %6s %3s  %-12s %-42s %4s %8s %22s %7s %8s", "act", "tokens", "thr", "run", "kernel(s)", "n",
    "rel.err", "kernel us median [p10-p90]", "GB/s", "call us"))
for _, pt in ipairs(points) do
    for _, id in ipairs({"eager", "hand", "gen"}) do
        local r = pt[id]
        if r then
            print(string.format("%-6s %6d %3d  %-12s %-42s %4d %8.1e %8.1f [%5.1f-%6.1f] %7.1f %8.1f%s", pt.act, pt.tokens,
                pt.threads, r.label or r.id, r.names, r.kernels, r.err, r.s.median, r.s.p10, r.s.p90, r.gbs,
                r.call_us, r.s.noise > UNSTABLE and "  unstable" or ""))
        end
    end
end
local paths = results:save{dir = out_dir}

-- the ratios last; a verdict only where the point is stable
local have_gen = codegen_off == nil
print(string.format("\n%-6s %6s %3s  %28s %9s  %s", "act", "tokens", "thr", "generated/hand-written", "eager/hand",
    "verdict (bar: generated <= " .. BAR .. "x)"))
local function range_of() return {lo = math.huge, hi = -math.huge, n = 0} end
local function widen(r, v) r.lo, r.hi, r.n = math.min(r.lo, v), math.max(r.hi, v), r.n + 1 end
local stable, met, unstable, unstable_met = 0, 0, 0, 0
local gen_by_threads, eager_stable, eager_all = {}, range_of(), range_of()
for _, pt in ipairs(points) do
    local verdict, ratio = "generated column skipped", "-"
    widen(eager_all, pt.eager_over_hand)
    if not pt.unstable then widen(eager_stable, pt.eager_over_hand) end
    if pt.ratio then
        local ok = pt.ratio.median <= BAR
        ratio = string.format("%.2fx [%.2f-%.2f]", pt.ratio.median, pt.ratio.p10, pt.ratio.p90)
        if pt.unstable then
            unstable, unstable_met = unstable + 1, unstable_met + (ok and 1 or 0)
            verdict = "unstable, no verdict (the median is " .. (ok and "within" or "over") .. " the bar)"
        else
            stable, met = stable + 1, met + (ok and 1 or 0)
            verdict = ok and "meets the bar" or "misses the bar"
            gen_by_threads[pt.threads] = gen_by_threads[pt.threads] or range_of()
            widen(gen_by_threads[pt.threads], pt.ratio.median)
        end
    end
    print(string.format("%-6s %6d %3d  %28s %8.2fx  %s", pt.act, pt.tokens, pt.threads, ratio, pt.eager_over_hand, verdict))
end

-- the reading, from the numbers above
print()
local sentences = {}
if have_gen then
    sentences[#sentences + 1] = string.format("The generated kernel met the %.1fx bar at %d of the %s.", BAR, met,
        plural(stable, "stable point"))
    if unstable > 0 then
        sentences[#sentences + 1] = string.format("%s unstable (a contender's kernel times have IQR/median over %d%%): " ..
            "no verdict there, though %s.", unstable == 1 and "One point was" or (unstable .. " points were"),
            math.floor(UNSTABLE * 100 + 0.5), unstable == 1 and ("its median is " .. (unstable_met == 1 and "within" or
            "over") .. " the bar") or string.format("%d of their medians are within the bar", unstable_met))
    end
    for _, threads in ipairs(opts.threads) do
        local t = gen_by_threads[threads]
        if t then
            local where = t.hi <= 1.0 and "never longer than it" or
                string.format("at most %.0f%% longer than it", math.max(1, (t.hi - 1) * 100))
            local took = t.n == 1 and string.format("%.2fx", t.lo) or string.format("%.2fx-%.2fx", t.lo, t.hi)
            sentences[#sentences + 1] = string.format("On %s, at %s, it took %s the hand-written kernel's time (%s).",
                plural(threads, "thread"), t.n == 1 and "the one stable point" or ("the " .. t.n .. " stable points"),
                took, where)
        else
            sentences[#sentences + 1] = string.format("On %s no point was stable.", plural(threads, "thread"))
        end
    end
else
    sentences[#sentences + 1] = "No generated kernel was measured (" .. tostring(codegen_off) .. ")."
end
local e = eager_stable.n > 0 and eager_stable or eager_all
sentences[#sentences + 1] = string.format("Eager's two kernels took %.2fx-%.2fx the hand-written fused kernel's time " ..
    "at the %s, against the %.2fx its bytes alone predict (5 passes over [tokens, hidden] against 3)%s.", e.lo, e.hi,
    plural(e.n, eager_stable.n > 0 and "stable point" or "point"), 5 / 3,
    e.hi < 5 / 3 and ": less everywhere, so at these sizes the kernels are not bound by memory traffic alone" or
    e.lo > 5 / 3 and ": more everywhere, so eager pays for more than its bytes" or
    ": less at some points, more at others")
local width, line = 0, {}
for word in table.concat(sentences, " "):gmatch("%S+") do -- wrapped at 100 columns
    if width > 0 and width + 1 + #word > 100 then
        print(table.concat(line, " "))
        width, line = 0, {}
    end
    line[#line + 1], width = word, width + (width > 0 and 1 or 0) + #word
end
print(table.concat(line, " "))
print("\nAll expectations held: " .. (have_gen and "eager 2 kernels, hand-written 1, generated 1 (wb_poi_fused_*), " ..
    "the bytes 5 / 3 / 3 passes" or "eager 2 kernels, hand-written 1, the bytes 5 / 3 passes (no generated kernel)") ..
    ", and the results agree with eager.")
print("Results: " .. paths.json)

-- ---- part 2: a generated GEMM epilogue --------------------------------------------------------
-- Expectation. y = sigmoid(x W^T + b) * v + r, x [tokens, D], W [H, D] (captured by the
-- function, as a module's weights are), v [tokens, H], r [H]: compiled, it is one GEMM kernel
-- whose driver applies the generated epilogue to each block of the output while it is in L2
-- (wb_sgemm_*_epi_*), so the GEMM's output never makes the round trip through memory that the
-- GEMM plus one generated pointwise kernel (the linear run eagerly, then a compiled
-- sigmoid*mul+add) pays: it should be no slower. Method as above: checked against eager, kernel counts asserted with p:expect (1 and 2),
-- kernel time per call from the kernel events, interleaved; the ratio is the median of the
-- per-rotation ratios epilogue / (GEMM + pointwise).
local D = opts.quick and 128 or 768
print(string.format("\nsigmoid(linear(x, W, b)) * v + r, x [tokens, %d], W [%d, %d] f32, tokens %s, threads %s", D, H, D,
    table.concat(TOKENS, ","), table.concat(opts.threads, ",")))
if not have_gen then
    print("epilogue part skipped: " .. tostring(codegen_off))
    return
end
local w, b, r = wb.randn({H, D}) * (1 / math.sqrt(D)), wb.randn({H}), wb.randn({H})
local function block(x, v) return wb.sigmoid(wb.linear(x, w, b)) * v + r end
local epi_points = {}
for _, threads in ipairs(opts.threads) do
    wb.set_num_threads(threads)
    for _, T in ipairs(TOKENS) do
        local x, v = wb.randn({T, D}), wb.randn({T, H})
        local fused = wb.compile(block)
        local pointwise = wb.compile(function(h, vv) return wb.sigmoid(h) * vv + r end)
        local runs = {
            {id = "epilogue", fn = function() return fused(x, v) end, kernels = 1, match = "_epi_sigmoid_mul_add_"},
            {id = "gemm+poi", fn = function() return pointwise(wb.linear(x, w, b), v) end, kernels = 2},
        }
        local ref, names = block(x, v), {}
        for _, run in ipairs(runs) do
            run.err = wb.rel_error(run.fn(), ref)
            assert(run.err < 1e-5, string.format("fusion: %s at %d tokens disagrees with eager (rel. error %.2e)", run.id,
                T, run.err))
            names[run.id] = true
        end
        local p = wb.profiler.profile({}, function()
            for _ = 1, 3 do
                for _, run in ipairs(runs) do wb.profiler.range(run.id, function() local _ = run.fn() end) end
            end
        end)
        for _, run in ipairs(runs) do
            p:expect{range = run.id, kernels = run.match and {count = run.kernels, match = run.match} or run.kernels}
        end
        local fns = {}
        for _, run in ipairs(runs) do
            local fn = run.fn
            fns[run.id] = function() wb.profiler.push(run.id) fn() wb.profiler.pop() end
        end
        local q = wb.profiler.profile({}, function()
            wb.bench(fns, {min_time_ms = math.min(200, MAX_MS), max_time_ms = MAX_MS, target_noise = 0.03})
        end)
        local calls = per_call(q, names)
        local pt = {tokens = T, threads = threads, unstable = false}
        for _, run in ipairs(runs) do
            run.s, run.names = stats.summarize(calls[run.id].us), table.concat(calls[run.id].kernels[1], "+")
            if run.s.noise > UNSTABLE then pt.unstable = true end
            pt[run.id] = run
            results:add{part = "epilogue", tokens = T, dim = D, hidden = H, threads = threads, run = run.id,
                kernel = run.names, kernels = run.kernels, rel_error = run.err, kernel_us = run.s.median,
                p10_us = run.s.p10, p90_us = run.s.p90, noise = run.s.noise, kernel_us_samples = calls[run.id].us}
        end
        local ratios, a, c = {}, calls.epilogue.us, calls["gemm+poi"].us
        for i = 1, math.min(#a, #c) do ratios[i] = a[i] / c[i] end
        pt.ratio = stats.summarize(ratios)
        -- compare's rule on the two sets of calls (rank test, 5% minimum effect, both sides' noise)
        pt.verdict = wb.compare.verdict({samples = c}, {samples = a})
        epi_points[#epi_points + 1] = pt
    end
end
wb.set_num_threads(default_threads)
results:save{dir = out_dir}
print(string.format("%6s %3s  %-9s %-58s %8s %22s", "tokens", "thr", "run", "kernel(s)", "rel.err",
    "kernel us median [p10-p90]"))
for _, pt in ipairs(epi_points) do
    for _, id in ipairs({"epilogue", "gemm+poi"}) do
        local run = pt[id]
        print(string.format("%6d %3d  %-9s %-58s %8.1e %8.1f [%6.1f-%7.1f]%s", pt.tokens, pt.threads, id, run.names,
            run.err, run.s.median, run.s.p10, run.s.p90, run.s.noise > UNSTABLE and "  unstable" or ""))
    end
end
-- The reading is compare's verdict on the epilogue's calls against the two kernels' (SAME: within
-- 5%; UNSURE: a difference the rank test or the noise does not settle); "no slower" is SAME or
-- FASTER. A median ratio a little over 1 with a spread across 1 is not "slower".
local READING = {SAME = "no slower (SAME: within 5%)", FASTER = "no slower (FASTER)", SLOWER = "slower (SLOWER)",
    UNSURE = "unsure (UNSURE: not settled by the samples)"}
print(string.format("\n%6s %3s  %32s  %s", "tokens", "thr", "epilogue / (GEMM + pointwise)", "reading (compare's rule)"))
for _, pt in ipairs(epi_points) do
    print(string.format("%6d %3d  %32s  %s%s", pt.tokens, pt.threads, string.format("%.2fx [%.2f-%.2f]", pt.ratio.median,
        pt.ratio.p10, pt.ratio.p90), READING[pt.verdict], pt.unstable and "; unstable" or ""))
end
print("All expectations held: the epilogue 1 kernel (wb_sgemm_*_epi_*), GEMM + pointwise 2, both agree with eager.")
