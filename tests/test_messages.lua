-- test_messages.lua: every error a public function raises on bad arguments starts with that
-- function's name ("view: bad argument #1: expected a tensor, got nil"), never "to '?'", never an
-- internal Lua error from the library's own code ("attempt to index a number value").
local lu = require("luaunit")

-- The bad arguments every function is called with (up to three of them).
local function bad_arguments()
    local released = wb.ones({2})
    released:release()
    return {{}, {nil}, {5}, {"x"}, {{}}, {released}, {0 / 0}, {true, false}, {1.5, -1},
        {wb.ones({2}), "x"}, {wb.ones({2}), {}, 5}, {wb.ones({2}), wb.ones({3})}, {wb.ones({2}), released},
        {function() end}}
end

-- The message without the "file:line: " that error() puts in front of it.
local function bare(msg) return (tostring(msg):gsub("^[^\n:]+:%d+: ", "")) end

local INTERNAL = {"attempt to index", "attempt to call", "attempt to perform", "attempt to get length",
    "attempt to compare", "attempt to concatenate", "for iterator", "to '?'", "bad argument #%-"}

-- Calls fn with each bad argument list (self first for methods); returns the number of errors
-- checked and the ones that do not start with one of the accepted prefixes.
local function check(fn, prefixes, self_first)
    local checked, wrong = 0, {}
    for _, args in ipairs(bad_arguments()) do
        local ok, msg
        if self_first then
            ok, msg = pcall(fn, self_first, table.unpack(args, 1, 3))
        else
            ok, msg = pcall(fn, table.unpack(args, 1, 3))
        end
        if not ok then
            checked = checked + 1
            local m, named = bare(msg), false
            for _, p in ipairs(prefixes) do
                if m:sub(1, #p + 1) == p .. ":" or m:sub(1, #p + 1) == p .. " " then named = true end
            end
            for _, bad in ipairs(INTERNAL) do
                if m:find(bad, 1, true) then named = false end
            end
            if not named then wrong[#wrong + 1] = prefixes[1] .. " -> " .. tostring(msg) end
        end
    end
    return checked, wrong
end

-- what runs for seconds by design or changes the process for every later test
local SKIP = {set_num_threads = true, mkdir_p = true, sleep_ms = true, cpu_peak_gflops = true, ["openblas.set_num_threads"] = true}

-- Every C function of wb (two levels deep: wb.openblas.matmul is "openblas.matmul").
local function c_functions()
    local out = {}
    local function walk(tbl, prefix, depth)
        for k, v in pairs(tbl) do
            if type(k) == "string" and k:sub(1, 1) ~= "_" then
                if type(v) == "function" and debug.getinfo(v, "S").what == "C" then
                    out[#out + 1] = {prefix .. k, v, k}
                elseif type(v) == "table" and depth > 0 and getmetatable(v) == nil and k ~= "build" then
                    walk(v, prefix .. k .. ".", depth - 1)
                end
            end
        end
    end
    walk(wb, "", 1)
    table.sort(out, function(a, b) return a[1] < b[1] end)
    return out
end

TestMessages = {}

function TestMessages:test_every_c_function_names_itself()
    local checked, all_wrong, functions = 0, {}, 0
    for _, f in ipairs(c_functions()) do
        if not SKIP[f[1]] then
            functions = functions + 1
            local n, wrong = check(f[2], {f[1], f[3]})
            checked = checked + n
            for _, w in ipairs(wrong) do all_wrong[#all_wrong + 1] = w end
        end
    end
    lu.assertEquals(all_wrong, {})
    lu.assertTrue(functions > 40, "found only " .. functions .. " C functions")
    lu.assertTrue(checked > 300, "only " .. checked .. " errors checked")
end

function TestMessages:test_every_tensor_method_names_itself()
    local methods = getmetatable(wb.ones({1})).__methods
    local checked, all_wrong, count = 0, {}, 0
    for name, fn in pairs(methods) do
        count = count + 1
        for _, self_ in ipairs({false, wb.ones({2, 3})}) do -- a bad self (from bad_arguments) or a good one
            local n, wrong = check(fn, {name}, self_ or nil)
            checked = checked + n
            for _, w in ipairs(wrong) do all_wrong[#all_wrong + 1] = w end
        end
    end
    table.sort(all_wrong)
    lu.assertEquals(all_wrong, {})
    lu.assertTrue(count > 30 and checked > 500, count .. " methods, " .. checked .. " errors checked")
end

function TestMessages:test_the_native_profiler_session_names_its_methods()
    local session = wb._profiler_session({})
    local checked, all_wrong = 0, {}
    for name, fn in pairs(getmetatable(session).__index) do
        if type(fn) == "function" then
            local n, wrong = check(fn, {name})
            checked = checked + n
            for _, w in ipairs(wrong) do all_wrong[#all_wrong + 1] = w end
        end
    end
    lu.assertEquals(all_wrong, {})
    lu.assertTrue(checked > 20)
end

function TestMessages:test_the_graph_names_its_methods()
    local function graph() return wb.graph.capture(function() return wb.ones({2}) + 1 end) end
    local released = graph()
    released:release()
    local checked, all_wrong = 0, {}
    for _, name in ipairs({"replay", "recapture", "nodes", "held_bytes", "release", "input", "bind", "run"}) do
        -- a bad self (from bad_arguments), a good graph, a released one
        for _, self_ in ipairs({false, "good", released}) do
            local n, wrong = check(released[name], {"graph." .. name}, self_ == "good" and graph() or self_ or nil)
            checked = checked + n
            for _, w in ipairs(wrong) do all_wrong[#all_wrong + 1] = w end
        end
    end
    lu.assertEquals(all_wrong, {})
    lu.assertTrue(checked > 150, checked .. " errors checked")
    lu.assertEquals(bare(select(2, pcall(released.replay, released))), "graph.replay: attempt to use a released graph")
    lu.assertEquals(bare(select(2, pcall(function() return released.outputs end))),
        "graph.outputs: attempt to use a released graph")
    lu.assertEquals(bare(select(2, pcall(wb.graph.capture, nil))),
        "graph.capture: bad argument #1: expected a function, got nil")
    lu.assertEquals(bare(select(2, pcall(graph().bind, graph(), 2))), "graph.bind: no input 2 (the graph declares 0)")
end

function TestMessages:test_the_examples_of_the_issue()
    lu.assertErrorMsgEquals("view: bad argument #1: expected a tensor, got nil",
        function() error(select(2, pcall(getmetatable(wb.ones({1})).__methods.view, nil)), 0) end)
    lu.assertErrorMsgEquals("t: attempt to use a released tensor (argument #1)", function()
        local x = wb.ones({2})
        x:release()
        error(select(2, pcall(x.t, x)), 0)
    end)
    -- under pcall Lua itself knows no name ('?'); the names come from the module
    local ok, msg = pcall(wb.full, {2}, "x")
    lu.assertFalse(ok)
    lu.assertEquals(msg, "full: bad argument #2: expected a number, got string")
    ok, msg = pcall(wb.openblas.matmul, wb.ones({2, 2}), nil)
    lu.assertEquals(msg, "openblas.matmul: bad argument #2: expected a tensor, got nil")
    ok, msg = pcall(wb.cpu_isa, {})
    lu.assertEquals(msg, "cpu_isa: bad argument #1: expected a string, got table")
end

-- The library's Lua functions check their arguments: name, prefix expected, call.
local LUA_CALLS = {
    {"results", function() return wb.results(5) end},
    {"results", function() return wb.results("x", 5) end},
    {"results: add", function() return wb.results("x"):add(5) end},
    {"results: add", function() return wb.results("x").add(5) end},
    {"results: save", function() return wb.results("x"):save(5) end},
    {"bench", function() return wb.bench(5) end},
    {"bench", function() return wb.bench(function() end, 5) end},
    {"nn.Linear", function() return wb.nn.Linear("a") end},
    {"nn.Linear", function() return wb.nn.Linear(2, 3)(5) end},
    {"GeGLUMLP", function() return wb.nn.GeGLUMLP("a") end},
    {"SwiGLUMLP", function() return wb.nn.SwiGLUMLP({}) end},
    {"profiler", function() return wb.profiler.profile(5) end},
    {"profiler: range", function() return wb.profiler.range(5) end},
    {"profiler: push", function() return wb.profiler.push(5) end},
    {"profiler: start", function() return wb.profiler.profile({}).start(5) end},
    {"profiler: stop", function() return wb.profiler.profile({}).stop({}) end},
    {"profiler: table", function() return wb.profiler.profile({}):table(5) end},
    {"profiler: key_averages", function() return wb.profiler.profile({}):key_averages(5) end},
    {"profiler: expect", function() return wb.profiler.profile({}):expect(5) end},
    {"profiler: export_chrome_trace", function() return wb.profiler.profile({}):export_chrome_trace(5) end},
    {"stats.summarize", function() return wb.stats.summarize(5) end},
    {"stats.mann_whitney", function() return wb.stats.mann_whitney(5) end},
    {"stats.percentile", function() return wb.stats.percentile(5) end},
    {"report.line_chart", function() return wb.report.line_chart(5) end},
    {"report.bar_chart", function() return wb.report.bar_chart(5) end},
    {"report.roofline", function() return wb.report.roofline({series = 5}) end},
    {"device_info", function() return wb.device_info(true) end},
    {"sweep", function() return wb.sweep(5) end},
    {"calibrate.cpu", function() return wb.calibrate.cpu("x") end},
    {"mkdir_p", function() return wb.mkdir_p({}) end},
}

function TestMessages:test_the_library_lua_functions_check_their_arguments()
    local wrong = {}
    for _, c in ipairs(LUA_CALLS) do
        local ok, msg = pcall(c[2])
        local m = bare(msg)
        if ok or m:sub(1, #c[1] + 1) ~= c[1] .. ":" and m:sub(1, #c[1] + 1) ~= c[1] .. " " then
            wrong[#wrong + 1] = c[1] .. " -> " .. tostring(msg)
        end
        for _, bad in ipairs(INTERNAL) do
            if m:find(bad, 1, true) then wrong[#wrong + 1] = c[1] .. " (internal) -> " .. tostring(msg) end
        end
    end
    lu.assertEquals(wrong, {})
end

-- wb.words.wrap: the footers of the main job's table fit 120 columns this way
function TestMessages:test_wrap_fits_the_width_and_keeps_words_whole()
    local words = require("wb.words")
    local text = "  " .. string.rep("alpha beta gamma delta ", 20) .. string.rep("x", 130)
    local out = words.wrap(text, 40, "    ")
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    lu.assertStrMatches(lines[1], "^  alpha beta .*")
    for i, l in ipairs(lines) do
        if i > 1 then lu.assertStrMatches(l, "^    %S.*") end
        if not l:find("xxx", 1, true) then lu.assertTrue(#l <= 40, l) end
    end
    lu.assertEquals(lines[#lines], "    " .. string.rep("x", 130)) -- a word longer than a line stays whole
    lu.assertEquals((out:gsub("%s+", " ")), (text:gsub("%s+", " ")))
    lu.assertEquals(words.wrap("short", 40), "short")
end

os.exit(lu.LuaUnit.run())
