-- fuzz_callbacks.lua: the hostile-callbacks fuzzer, beside fuzz_api.lua: calls every public wb
-- function, tensor method and graph method with arguments that run script code in the middle of
-- the call (tables whose __len and __index release pooled tensors and graphs and collect
-- garbage, then answer a random size, dimension or option) while finalizers armed before the
-- call release pooled objects whenever the binding allocates. Seeded: the same seed makes the
-- same calls. Run under ASan+UBSan, where a use of a freed object is a finding:
--   workbench --sandbox --out DIR tests/fuzz/fuzz_callbacks.lua [calls] [seed]
local calls, seed = tonumber(arg[1]) or 100000, tonumber(arg[2]) or 1
math.randomseed(seed)
wb.manual_seed(seed)
local random = math.random

-- not fuzzed, as in fuzz_api.lua: what runs for seconds, writes files or changes the process
local SKIP = {bench = true, sweep = true, compile = true, mkdir_p = true, set_num_threads = true, results = true,
    help = true, args = true, merge = true, compare = true, report = true, nn = true, stats = true,
    sleep_ms = true, cpu_peak_gflops = true, device_info = true, calibrate = true}
local SKIP_METHOD = {export_chrome_trace = true, export_stacks = true, export_memory_timeline = true, save = true}

local pool, graphs = {}, {}
-- finalizers armed by earlier calls may run while the pool is refilled: they must not release the
-- new pool then (a released x inside its own capture is the harness's error, not the library's)
local refilling = false
local function refill()
    refilling = true
    collectgarbage()
    pool = {wb.zeros({}), wb.ones({4}), wb.rand({2, 3}), wb.randn({4, 1, 2}), wb.arange(6):view({2, 3}):t(),
        wb.rand({4, 4}), wb.ones({1}):expand({4}), wb.rand({2, 8}, {dtype = "bf16"}), wb.rand({3, 4}):narrow(2, 2, 2)}
    local x = pool[3]
    graphs = {wb.graph.capture(function(a) return (a or x) * 2 + 1 end), wb.graph.capture(function() return x + 1 end)}
    graphs[1]:input(x)
    refilling = false
end
refill()

-- release a few pooled objects (a released one stays in the pool: using it must raise)
local function havoc()
    if refilling then return end
    for _ = 1, random(1, 3) do
        if random() < 0.8 then pool[random(#pool)]:release() else graphs[random(#graphs)]:release() end
    end
    if random() < 0.5 then collectgarbage() end
end

local EDGE = {0, 1, -1, 2, 3, 4, 6, -2, 1 << 31, math.maxinteger, 0.5, 0 / 0}
local STRINGS = {"f32", "bf16", "cpu", "none", "tanh", "gelu", "x", "1"}
local function plain()
    local k = random(1, 5)
    if k == 1 then return nil end
    if k == 2 then return EDGE[random(#EDGE)] end
    if k == 3 then return STRINGS[random(#STRINGS)] end
    return pool[random(#pool)]
end

-- a hostile table: its length and fields run havoc() now and then, then answer like a shape,
-- a list of dimensions or an options table would
local function hostile()
    local len, answer = random(0, 4), random(1, 3)
    local entries = {}
    for i = 1, len do entries[i] = random() < 0.8 and random(1, 4) or EDGE[random(#EDGE)] end
    return setmetatable({}, {
        __len = function()
            if random() < 0.5 then havoc() end
            return random() < 0.9 and len or EDGE[random(#EDGE)]
        end,
        __index = function(_, k)
            if random() < 0.5 then havoc() end
            if type(k) == "number" then return entries[k] end
            if answer == 1 then return nil end
            return answer == 2 and STRINGS[random(#STRINGS)] or plain()
        end,
        __gc = random() < 0.3 and havoc or nil,
    })
end

local function value()
    local k = random()
    if k < 0.35 then return hostile() end
    if k < 0.45 then return {random(1, 4), random(1, 4)} end
    return plain()
end

-- garbage with finalizers that release pooled objects when the binding allocates; now and then
-- the collector runs a whole cycle at every allocation for the call
local function arm()
    for _ = 1, random(0, 2) do setmetatable({}, {__gc = havoc}) end
    if random() < 0.05 then
        collectgarbage("incremental", 0, 100, 40)
        return true
    end
end
local function calm() collectgarbage("generational") end

local targets = {}
local function collect(tbl, prefix, depth)
    local names = {}
    for k in pairs(tbl) do if type(k) == "string" then names[#names + 1] = k end end
    table.sort(names)
    for _, k in ipairs(names) do
        local v = tbl[k]
        if not SKIP[k] and k:sub(1, 1) ~= "_" then
            if type(v) == "function" then targets[#targets + 1] = v
            elseif type(v) == "table" and depth < 2 and k ~= "options" and k ~= "build" and k ~= "Tensor" then
                collect(v, prefix .. k .. ".", depth + 1)
            end
        end
    end
end
collect(wb, "wb.", 0)
local methods, names = {}, {}
for k in pairs(getmetatable(wb.ones({1})).__methods) do if not SKIP_METHOD[k] then names[#names + 1] = k end end
table.sort(names)
for _, k in ipairs(names) do methods[#methods + 1] = getmetatable(wb.ones({1})).__methods[k] end
local GRAPH_METHODS = {"replay", "recapture", "nodes", "held_bytes", "input", "bind", "run"}
assert(#targets > 20 and #methods > 20, "found too few functions to fuzz")

local errors, t0 = 0, os.clock()
for i = 1, calls do
    local f, a1
    local draw = random()
    if draw < 0.05 then
        local g = graphs[random(#graphs)]
        f, a1 = g[GRAPH_METHODS[random(#GRAPH_METHODS)]], g
    elseif draw < 0.55 then
        f, a1 = methods[random(#methods)], pool[random(#pool)]
    else
        f, a1 = targets[random(#targets)], value()
    end
    local a2, a3, a4 = value(), value(), value()
    local tortured = arm()
    local ok, r = pcall(f, a1, a2, a3, a4)
    if tortured then calm() end
    if not ok then errors = errors + 1 end
    if ok and getmetatable(r) == wb.Tensor then pcall(r.fill_, r, 1) end -- a freed result would show here
    if i % 500 == 0 then
        refill()
        collectgarbage()
    end
end
print(string.format("fuzz_callbacks: %d calls (%d functions, %d methods, %d graph methods, seed %d): %d raised " ..
    "errors, 0 crashes, %.1f s", calls, #targets, #methods, #GRAPH_METHODS, seed, errors, os.clock() - t0))
