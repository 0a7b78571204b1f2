-- test_pretty.lua: how the REPL prints values (wb.pretty): arrays and records, nesting past the
-- depth limit, self-references, large tables cut with a count, keys that need brackets, strings
-- escaped, __tostring honoured and no other metamethod run.
local lu = require("luaunit")
local pretty = require("wb.pretty")

TestPretty = {}

function TestPretty:test_arrays_records_and_nesting()
    lu.assertEquals(pretty({3, 2}), "{3, 2}")
    lu.assertEquals(pretty({}), "{}")
    lu.assertEquals(pretty(wb.arange(24):view{2, 3, 4}:stride()), "{12, 4, 1}")
    lu.assertEquals(pretty({b = 2, a = "x", 10, 20}), '{10, 20, a = "x", b = 2}')
    lu.assertEquals(pretty({1, {2, {3, {4, {5, {6}}}}}}), "{1, {2, {3, {4, {...} (2 items)}}}}")
    lu.assertEquals(pretty({1, {2, {3}}}, {depth = 1}), "{1, {...} (2 items)}")
    lu.assertEquals(pretty({{x = 1}}, {depth = 1}), "{{...} (1 item)}")
    lu.assertEquals(pretty({["end"] = 1, ["a b"] = 2, [0] = 3, [true] = 4}), '{[0] = 3, ["a b"] = 2, ["end"] = 1, [true] = 4}')
    lu.assertEquals(pretty({'say "hi"\n'}), '{"say \\"hi\\"\\n"}')
    -- too long for a line: one field per line, indented
    local info = pretty(wb.device_info())
    lu.assertStrContains(info, '\n  device = "cpu",\n')
    lu.assertStrMatches(info, "^{\n.*\n}$")
end

function TestPretty:test_cycles_and_shared_tables()
    local s = {n = 1}
    s.me = s
    lu.assertStrMatches(pretty(s), "{me = <cycle: table: 0x%x+>, n = 1}")
    local shared = {1}
    lu.assertEquals(pretty({shared, shared}), "{{1}, {1}}") -- seen twice, not a cycle
    local a, b = {}, {}
    a.b, b.a = b, a
    lu.assertStrMatches(pretty(a), "{b = {a = <cycle: table: 0x%x+>}}")
end

function TestPretty:test_large_tables_are_cut_with_a_count()
    local big = {}
    for i = 1, 1000000 do big[i] = i end
    local s = pretty(big)
    lu.assertStrContains(s, "... (999960 more items)")
    lu.assertStrContains(s, "\n  1, 2, 3, ")
    local hash = {}
    for i = 1, 50000 do hash["k" .. i] = i end
    lu.assertStrContains(pretty(hash), "... (49960 more items)")
    -- the work is counted, not timed: only the items shown are rendered, and a table too large to
    -- sort is not sorted (its keys' __tostring would run ~n log n times in the comparisons)
    local calls = 0
    local counted = {__tostring = function() calls = calls + 1; return "c" end}
    local values = {}
    for i = 1, 100000 do values[i] = setmetatable({}, counted) end
    lu.assertStrContains(pretty(values), "... (99960 more items)")
    lu.assertEquals(calls, 40)
    local keyed = {}
    for i = 1, 20000 do keyed[setmetatable({}, counted)] = i end
    calls = 0
    lu.assertStrContains(pretty(keyed), "... (19960 more items)")
    lu.assertEquals(calls, 40)
    -- wide and deep: the total budget keeps it short
    local wide = {}
    for i = 1, 40 do
        wide[i] = {}
        for j = 1, 40 do wide[i][j] = {j} end
    end
    lu.assertTrue(#pretty(wide) < 40000)
    lu.assertStrContains(pretty({1, 2, 3}, {items = 2}), "... (1 more item)")
end

function TestPretty:test_metamethods()
    lu.assertEquals(pretty(setmetatable({}, {__tostring = function() return "custom" end})), "custom")
    local touched = false
    local t = setmetatable({1}, {__index = function() touched = true end, __pairs = function() touched = true end,
        __len = function() touched = true; return 9 end})
    lu.assertEquals(pretty(t), "{1}")
    lu.assertFalse(touched)
    lu.assertStrContains(pretty({wb.ones({2})}), "tensor(")
    lu.assertEquals(pretty("a\tb"), '"a\\tb"')
    lu.assertEquals(pretty(42), "42")
end

os.exit(lu.LuaUnit.run())
