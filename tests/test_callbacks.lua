-- test_callbacks.lua: the bindings' rule (bindings/wb_lua.h): every public C function and method
-- is called with hostile arguments (shape and option tables whose __len/__index release the
-- tensors, graphs and sessions of the call and collect garbage) and with a finalizer armed to do
-- the same at the binding's first allocation. ASan (the sanitizer build runs this file) sees any
-- use of a freed object; the Release build may crash or pass silently where ASan would not.
local lu = require("luaunit")
local scratch = require("scratch")

local getinfo = debug.getinfo
local function is_c(f) return type(f) == "function" and getinfo(f, "S").what == "C" end

-- victims: fresh objects for each call; kill() releases them all (each one's own way)
local function victims()
    local v = {wb.rand({4}), wb.rand({4}), wb.rand({4}), wb.rand({4})}
    v.graph = wb.graph.capture(function() return v[1] + 1 end)
    v.session = wb._profiler_session({max_events = 64})
    return v
end
local function kill(v)
    for i = 1, 4 do v[i]:release() end
    v.graph:release()
    local gc = getmetatable(v.session).__gc
    gc(v.session)
end

-- a table whose length and every field release the victims first: __len says `len`, __index
-- answers `value` (4: a valid size of the 1-d victims; 1: a valid dimension; nil: an absent option)
local function hostile(v, len, value)
    return setmetatable({}, {
        __len = function() kill(v); collectgarbage(); return len end,
        __index = function() kill(v); collectgarbage(); return value end,
    })
end

-- a finalizer that releases the victims at the first allocation after this (every allocation runs
-- a whole collection cycle until calm() restores the collector)
local function arm(v)
    collectgarbage()
    collectgarbage("stop")
    setmetatable({}, {__gc = function() kill(v) end}) -- garbage at once
    collectgarbage("incremental", 0, 100, 40)
    collectgarbage("restart")
end
local function calm()
    collectgarbage("incremental", 200, 100, 13)
    collectgarbage("generational")
end

-- what a freed tensor in a result would show: its values read (ASan) or a crash (Release)
local function touch(...)
    for i = 1, select("#", ...) do
        local r = select(i, ...)
        if getmetatable(r) == wb.Tensor then pcall(function() r:fill_(1); return r:tolist(), tostring(r) end) end
    end
end

-- "r" (a range name, a path: export_chrome_trace writes it) is a file in the scratch folder
local R = scratch.path(".json")

-- the C functions of wb (two levels: wb.openblas.matmul), the tensor's methods and metamethods,
-- the graph's and the raw profiler session's methods, each with how to find its receiver
local SKIP = {sleep_ms = true, cpu_peak_gflops = true, set_num_threads = true, mkdir_p = true,
    _mkdir_p = true, _sandbox_roots = true, _write_file = true, _open_file = true, _read_gbs = true, capture = true,
    cpu_isa = true, cpu_bf16 = true, build = true, manual_seed = true, set_threads_adaptive = true,
    start = true, device_info = true, _device_info_quick = true}
local function targets()
    local list = {}
    local function add(name, f, receiver)
        if is_c(f) and not SKIP[name:match("[%w_]+$")] then list[#list + 1] = {name, f, receiver} end
    end
    local function walk(t, prefix, depth)
        for k, f in pairs(t) do
            if type(k) == "string" then
                if type(f) == "table" and depth < 2 and k ~= "Tensor" and k ~= "build" then
                    walk(f, prefix .. k .. ".", depth + 1)
                else
                    add(prefix .. k, f, nil)
                end
            end
        end
    end
    walk(wb, "wb.", 0)
    local mt = getmetatable(wb.ones({1}))
    for k, f in pairs(mt.__methods) do add("Tensor:" .. k, f, 1) end
    for k, f in pairs(mt) do
        if k ~= "__gc" and k ~= "__close" then add("Tensor." .. k, f, 1) end
    end
    local g = wb.graph.capture(function() return wb.ones({1}) end)
    for _, k in ipairs({"replay", "nodes", "held_bytes", "input", "bind", "run", "recapture"}) do
        add("graph:" .. k, g[k], "graph")
    end
    add("graph.tostring", getmetatable(g).__tostring, "graph")
    add("graph.index", getmetatable(g).__index, "graph")
    local s = wb._profiler_session({max_events = 64})
    for k, f in pairs(getmetatable(s).__index) do add("session:" .. k, f, "session") end
    for _, t in ipairs(list) do -- the one writer writes into the scratch folder, whatever its path
        local export = t[2]
        if t[1] == "session:export_chrome_trace" then
            t[2] = function(session, path, ...) return export(session, type(path) == "table" and path or R, ...) end
        end
    end
    table.sort(list, function(a, b) return a[1] < b[1] end)
    return list
end

-- argument lists: the receiver (or a victim tensor) first, then tensors, numbers, strings and
-- one hostile table in each position in turn
local function arglists(v, receiver)
    local first = receiver and v[receiver] or v[1]
    local lists = {}
    for _, value in ipairs({4, 1, false}) do
        local h = function() return hostile(v, 1, value or nil) end
        lists[#lists + 1] = {first, h()}
        lists[#lists + 1] = {first, h(), h()}
        lists[#lists + 1] = {first, v[2], h()}
        lists[#lists + 1] = {first, v[2], v[3], h()}
        lists[#lists + 1] = {first, v[2], nil, h()}
        lists[#lists + 1] = {first, R, v[2], h()}
        lists[#lists + 1] = {first, h(), v[2]}
        lists[#lists + 1] = {first, 1, h()}
        lists[#lists + 1] = {h(), first}
    end
    return lists
end
local PLAIN = {{}, {2}, {1}, {"1"}, {"4"}, {"v2"}, {"v2", "v3"}, {1, 2}, {"R", "v2"}, {"v2", 1}, {-1, 1}, {1, 1, 4}}

TestCallbacks = {}

function TestCallbacks:test_hostile_tables_release_the_arguments()
    local list = targets()
    lu.assertTrue(#list > 60, "too few functions found: " .. #list)
    local calls = 0
    for _, target in ipairs(list) do
        for n = 1, #arglists(victims(), target[3]) do
            local v = victims()
            local args = arglists(v, target[3])[n]
            touch(select(2, pcall(target[2], table.unpack(args, 1, 4))))
            calls = calls + 1
        end
    end
    collectgarbage()
    lu.assertTrue(calls > 1000)
end

function TestCallbacks:test_finalizers_release_the_arguments()
    local calls = 0
    for _, target in ipairs(targets()) do
        for _, shape in ipairs(PLAIN) do
            local v = victims()
            local first = target[3] and v[target[3]] or v[1]
            local args = {first}
            for i, a in ipairs(shape) do
                args[i + 1] = a == "v2" and v[2] or a == "v3" and v[3] or a == "R" and R or a
            end
            arm(v)
            local results = table.pack(pcall(target[2], table.unpack(args, 1, #shape + 1)))
            calm()
            touch(table.unpack(results, 2, results.n))
            calls = calls + 1
        end
    end
    lu.assertTrue(calls > 500)
end

-- the reproducer of the issue, which crashed the Release build under --sandbox
function TestCallbacks:test_view_of_a_tensor_released_by_its_shape()
    local t = wb.zeros({4096})
    local shape = setmetatable({}, {__len = function() return 1 end,
        __index = function() t:release(); collectgarbage(); return 4096 end})
    lu.assertErrorMsgContains("attempt to use a released tensor", t.view, t, shape)
end

function TestCallbacks:test_tolist_of_a_tensor_released_by_a_finalizer()
    local v = victims()
    arm(v)
    local ok, err = pcall(v[1].tolist, v[1])
    calm()
    lu.assertFalse(ok)
    lu.assertStrContains(err, "attempt to use a released tensor")
end

scratch.exit(lu.LuaUnit.run())
