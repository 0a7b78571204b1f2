-- fuzz_api.lua: calls every public wb function, tensor method (and indexing, t[k]) and graph/profiler method with
-- arguments drawn from a mixed pool (edge integers, floats, NaN, strings, tables, shapes,
-- tensors of every rank and layout, nil, functions), each under pcall. Seeded: the same seed
-- makes the same calls. Run under ASan+UBSan (.ci/run), where any finding ends the process.
--   workbench --sandbox --out DIR tests/fuzz/fuzz_api.lua [calls] [seed]
local calls, seed = tonumber(arg[1]) or 200000, tonumber(arg[2]) or 1
math.randomseed(seed)
wb.manual_seed(seed)
local random = math.random

-- not fuzzed: what runs for seconds by design (benchmarks, sweeps, codegen), writes files
-- (covered by their own tests) or changes the process (threads)
local SKIP = {bench = true, sweep = true, compile = true, mkdir_p = true, set_num_threads = true, results = true,
    help = true, args = true, merge = true, compare = true, report = true, nn = true, stats = true}
local SKIP_METHOD = {export_chrome_trace = true, export_stacks = true, export_memory_timeline = true, save = true}

local function tensors()
    local t = {wb.zeros({}), wb.ones({3}), wb.rand({2, 3}), wb.randn({4, 1, 2}), wb.arange(6):view({2, 3}):t(),
        wb.zeros({0, 3}), wb.ones({1}):expand({5}), wb.rand({3, 4}):narrow(2, 2, 2), wb.full({2, 2}, 0 / 0),
        wb.rand({2, 8}, {dtype = "bf16"}), wb.rand({4, 4})}
    local released = wb.ones({2})
    released:release()
    t[#t + 1] = released
    return t
end
local pool_tensors = tensors()

-- graphs for the graph methods: one with a declared input (bind, run), one with a GEMM, an
-- empty one and a released one; recapture re-runs their functions with the drawn arguments
local function graphs()
    local x, w = wb.rand({2, 3}), wb.rand({4, 3})
    local with_input = wb.graph.capture(function(a) return (a or x) * 2 + 1 end)
    with_input:input(x)
    local released = wb.graph.capture(function() return x + 1 end)
    released:release()
    return {with_input, wb.graph.capture(function() return wb.linear(x, w) end), wb.graph.capture(function() end),
        released}
end
local pool_graphs = graphs()
local GRAPH_METHODS = {"replay", "recapture", "nodes", "held_bytes", "release", "input", "bind", "run", "outputs"}

-- profilers for the profiler methods (the exports, which write files, are left out); one starts
-- from a coroutine that is collected afterwards, as issue 20's with_stack reproducer did
local function profilers()
    return {wb.profiler.profile({with_stack = true, record_shapes = true, max_events = 4096}),
        wb.profiler.profile({schedule = {wait = 1, warmup = 1, active = 2}, with_flops = true, max_events = 1024})}
end
local pool_profilers = profilers()
local PROFILER_METHODS = {"start", "step", "stop", "events", "stats", "key_averages", "table", "expect",
    "range_instances", "start_in_coroutine"}

local EDGE = {0, 1, -1, 2, 3, 7, 17, -2, 1 << 31, 1 << 32, 1 << 62, math.maxinteger, math.mininteger, 0.5, -0.0,
    1e308, -1e308, 0 / 0, math.huge, -math.huge, 2 ^ 53}
local STRINGS = {"", "f32", "bf16", "cpu", "cuda", "auto", "x", "%s%d%n", string.rep("n", 300), "sum", "cpu_total"}

local function value(depth)
    local k = random(1, depth > 1 and 8 or 11)
    if k == 1 then return nil end
    if k == 2 then return EDGE[random(#EDGE)] end
    if k == 3 then return random(-3, 6) end
    if k == 4 then return STRINGS[random(#STRINGS)] end
    if k == 5 or k == 6 then return pool_tensors[random(#pool_tensors)] end
    if k == 7 then return random() < 0.5 end
    if k == 8 then return function() return pool_tensors[random(#pool_tensors)] end end
    if k == 9 then -- a shape
        local s = {}
        for i = 1, random(0, 4) do s[i] = random() < 0.9 and random(0, 4) or EDGE[random(#EDGE)] end
        return s
    end
    if k == 10 then -- an options table
        return {dtype = STRINGS[random(1, 3)], device = STRINGS[random(4, 6)], [STRINGS[random(#STRINGS)]] = value(2)}
    end
    local t = {} -- a nested table
    for i = 1, random(0, 3) do t[i] = value(depth + 1) end
    return t
end

local targets = {}
local function collect(tbl, prefix, depth)
    local names = {}
    for k in pairs(tbl) do if type(k) == "string" then names[#names + 1] = k end end
    table.sort(names)
    for _, k in ipairs(names) do
        local v = tbl[k]
        if not SKIP[k] and k:sub(1, 1) ~= "_" then
            if type(v) == "function" then targets[#targets + 1] = {prefix .. k, v}
            elseif type(v) == "table" and depth < 2 and k ~= "options" and k ~= "build" and k ~= "Tensor" then
                collect(v, prefix .. k .. ".", depth + 1)
            end
        end
    end
end
collect(wb, "wb.", 0)
local methods = {}
for k, v in pairs(getmetatable(wb.ones({1})).__methods or {}) do
    if type(v) == "function" and not SKIP_METHOD[k] then methods[#methods + 1] = {k, v} end
end
table.sort(methods, function(a, b) return a[1] < b[1] end)
assert(#targets > 20 and #methods > 20, "found too few functions to fuzz")

local errors, t0 = 0, os.clock()
for i = 1, calls do
    local ok
    local draw = random()
    if draw < 0.01 then
        local p, m = pool_profilers[random(#pool_profilers)], PROFILER_METHODS[random(#PROFILER_METHODS)]
        if m == "start_in_coroutine" then
            ok = pcall(coroutine.wrap(function() p:start() end))
        else
            ok = pcall(p[m], random() < 0.9 and p or value(1), value(1), value(1))
        end
    elseif draw < 0.04 then
        local g, m = pool_graphs[random(#pool_graphs)], GRAPH_METHODS[random(#GRAPH_METHODS)]
        if m == "outputs" then
            ok = pcall(function() return g.outputs end)
        else
            ok = pcall(g[m], random() < 0.9 and g or value(1), value(1), value(1), value(1))
        end
    elseif draw < 0.06 then -- indexing: t[i], t[{i, j}] and anything else as a key
        local t, k = pool_tensors[random(#pool_tensors)], value(2)
        ok = pcall(function() return t[k] end)
    elseif draw < 0.45 then
        local m = methods[random(#methods)]
        ok = pcall(m[2], pool_tensors[random(#pool_tensors)], value(1), value(1), value(1))
    else
        local f = targets[random(#targets)]
        ok = pcall(f[2], value(1), value(1), value(1), value(1))
    end
    if not ok then errors = errors + 1 end
    if i % 5000 == 0 then
        pool_tensors = tensors() -- fresh ones: methods change them in place
        pool_graphs = graphs()   -- and release graphs
        pool_profilers = profilers() -- the old ones are collected, running or not
        collectgarbage()
    end
end
print(string.format("fuzz_api: %d calls (%d functions, %d methods, %d graph and %d profiler methods, seed %d): " ..
    "%d raised errors, 0 crashes, %.1f s", calls, #targets, #methods, #GRAPH_METHODS, #PROFILER_METHODS, seed, errors,
    os.clock() - t0))
