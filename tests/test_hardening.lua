-- test_hardening.lua: issue 20's memory-safety reproducers and bounded-work cases, each a
-- regression test (ctest runs this file in the ASan+UBSan build too, where the old crashes,
-- overflows and reads past the end were findings).
local lu = require("luaunit")

TestMemorySafety = {}

function TestMemorySafety:test_tensor_ignores_len_and_index_metamethods()
    local inner = setmetatable({}, {__len = function() return 100000 end, __index = function() return 1.0 end})
    local hostile = setmetatable({}, {__len = function() return 1 << 62 end, __index = function() return inner end})
    local t = wb.tensor(hostile) -- a table with no entries: raw length 0
    lu.assertEquals(t.shape, {0})
    lu.assertEquals(wb.tensor(setmetatable({1, 2}, {__len = function() return 1 << 40 end})):tolist(), {1, 2})
end

function TestMemorySafety:test_tensor_shape_overflow_is_an_error()
    local row = {}
    for i = 1, 1024 do row[i] = 1 end
    local t = row
    for _ = 1, 7 do -- 1024^8 elements through shared subtables
        local up = {}
        for i = 1, 1024 do up[i] = t end
        t = up
    end
    lu.assertErrorMsgContains("tensor: the nested table's shape has more elements than can be addressed", wb.tensor, t)
end

function TestMemorySafety:test_graph_released_during_its_own_recapture()
    local g, armed
    g = wb.graph.capture(function()
        if armed then g:release() end
        return wb.ones({2}) + 1
    end)
    armed = true
    lu.assertErrorMsgContains("graph.release: the graph is being captured", g.recapture, g)
    lu.assertEquals(tostring(g), "graph(released)") -- a failed recapture frees the graph, as before
end

-- The sanitizer build compiles Lua with ASan, which is what sees this one: when the session kept
-- the coroutine's lua_State, lua_getstack read the collected thread inside the interpreter
-- (heap-use-after-free in ldebug.c), invisible with Debian's uninstrumented liblua5.4.
function TestMemorySafety:test_profiler_with_stack_outlives_the_coroutine_that_started_it()
    local p = wb.profiler.profile({with_stack = true})
    local co = coroutine.create(function() p:start() end)
    assert(coroutine.resume(co))
    co = nil
    collectgarbage()
    collectgarbage()
    for _ = 1, 10 do local _ = wb.ones({2}) + 1 end
    p:stop()
    lu.assertTrue(#p:events() >= 10)
end

function TestMemorySafety:test_geglu_of_0d_tensors()
    local y = wb.geglu(wb.full({}, 1), wb.full({}, 2))
    lu.assertEquals(y.shape, {})
    lu.assertAlmostEquals(y:item(), 2 * 0.8413, 1e-3)
end

function TestMemorySafety:test_signed_overflows_are_errors()
    lu.assertErrorMsgContains("rand: shape {4294967296, 2147483648} has more elements than can be addressed",
        wb.rand, {1 << 32, 1 << 31})
    lu.assertErrorMsgContains("past the end of dimension 1 of size 4",
        function() return wb.zeros({4}):narrow(1, 2, math.maxinteger) end)
    lu.assertErrorMsgContains("storage offset 4611686018427387904 is past the storage's 4 elements",
        function() return wb.zeros({4}):as_strided({0}, {1}, 1 << 62) end)
    lu.assertEquals(wb.zeros({4}):as_strided({0}, {1}, 4).shape, {0}) -- the end itself is fine
end

-- Messages name the values given: they were printed through (int) casts, so a length of 2^40
-- read "length 0" and an index of 2^32 "index 0".
function TestMemorySafety:test_messages_name_64_bit_values_as_given()
    local x = wb.zeros({4})
    lu.assertErrorMsgContains("narrow: start 3 with length 1099511627776 runs past the end of dimension 1 of size 4",
        function() return x:narrow(1, 3, 1 << 40) end)
    lu.assertErrorMsgContains("narrow: start -4611686018427387904 is out of range for dimension 1 of size 4",
        function() return x:narrow(1, -(1 << 62), 2) end)
    lu.assertErrorMsgContains("narrow: length must be >= 0, got -1099511627776",
        function() return x:narrow(1, 1, -(1 << 40)) end)
    lu.assertErrorMsgContains("select: index 4294967296 is out of range for dimension 1 of size 4",
        function() return x:select(1, 1 << 32) end)
    lu.assertErrorMsgContains("size: dimension 4294967297 is out of range for a tensor with 1 dimension",
        function() return x:size((1 << 32) + 1) end)
    local big = wb.zeros({1}):expand({1 << 33})
    lu.assertErrorMsgContains("item: the tensor has 8589934592 elements, item() needs exactly 1",
        function() return big:item() end)
    lu.assertErrorMsgContains("narrow: start 8589934597 is out of range for dimension 1 of size 8589934592",
        function() return big:narrow(1, (1 << 33) + 5, 1) end)
end

function TestMemorySafety:test_thread_counts_are_checked_before_narrowing_to_int()
    local threads = wb.get_num_threads()
    lu.assertErrorMsgContains("set_num_threads: 4294967298 threads is out of range (1..256)",
        wb.set_num_threads, (1 << 32) + 2) -- was taken as 2
    lu.assertErrorMsgContains("set_num_threads: -9223372036854775808 threads is out of range (1..256)",
        wb.set_num_threads, math.mininteger) -- was reported as 0
    lu.assertEquals(wb.get_num_threads(), threads)
    if wb.openblas.available() then -- OpenBLAS itself ignores counts below 1 without a word
        lu.assertErrorMsgContains("openblas.set_num_threads: 0 threads is out of range (1..256)",
            wb.openblas.set_num_threads, 0)
        lu.assertErrorMsgContains("openblas.set_num_threads: 4294967298 threads is out of range (1..256)",
            wb.openblas.set_num_threads, (1 << 32) + 2)
    end
end

-- Found by fuzz_api (seed 20261211) under UBSan: a view reaching exactly element 2^63 - 1 made its
-- refusal compute 2^63 in 64 signed bits; and an empty shape's element count overflowed before its
-- zero dimension was reached.
function TestMemorySafety:test_a_view_reaching_int64_max_and_a_huge_empty_shape()
    local t = wb.zeros({4})
    lu.assertErrorMsgContains("shape {2} with strides {9223372036854775807} at offset 0 needs 9223372036854775808 "
        .. "elements but the storage has 4", function() return t:as_strided({2}, {9223372036854775807}, 0) end)
    lu.assertEquals(wb.empty({9223372036854775807, 2, 0}):numel(), 0)
end

TestBoundedWork = {}

function TestBoundedWork:test_printing_empty_and_huge_tensors()
    lu.assertEquals(tostring(wb.zeros({1 << 40, 0})), "tensor({}, shape={1099511627776, 0}, dtype=f32, device=cpu)")
    local s = tostring(wb.zeros({1}):expand({1 << 40}))
    lu.assertStrContains(s, "1099511627776 elements, no statistics past 2^26 elements")
    lu.assertEquals(#wb.zeros({3, 0}):tolist(), 3)
    lu.assertErrorMsgContains("tolist: the empty tensor would make 1099511627776 empty tables; refused",
        function() return wb.zeros({1 << 40, 0}):tolist() end)
    -- more values than memory: named, not Lua's bare "not enough memory"
    lu.assertErrorMsgContains("tolist: the tensor has 1099511627776 elements; as Lua numbers they need about 24.0 TiB",
        function() return wb.zeros({1}):expand({1 << 40}):tolist() end)
end

function TestBoundedWork:test_writes_into_expanded_views_are_refused()
    lu.assertErrorMsgContains("fill_: the destination has several elements in one memory location",
        function() return wb.zeros({1}):expand({1 << 40}):fill_(1) end)
end

-- memory is the bound now (max_memory): a budget over half the memory available is refused, and
-- a large max_events alone takes nothing up front (chunks come as events do)
function TestBoundedWork:test_max_memory_is_capped_by_available_memory()
    lu.assertErrorMsgContains("lower max_memory", wb.profiler.profile, {max_memory = 1 << 50})
    local p = wb.profiler.profile{max_events = 1 << 28}
    lu.assertEquals(p:stats().memory_bytes, 0)
end

function TestBoundedWork:test_table_with_long_names()
    local name = string.rep("cublasLt_sm90_xmma_gemm_", 6) -- 144 characters
    local p = wb.profiler.profile({}, function() wb.profiler.range(name, function() end) end)
    local t = p:table({})
    lu.assertStrContains(t, name)
end

-- found by fuzz_callbacks.lua (seed 20261206) under UBSan: an empty view with a stride of
-- 2^63-1 made the kernels' loop merge compute stride * size, a signed overflow
function TestMemorySafety:test_empty_view_with_a_huge_stride()
    local v = wb.zeros({4}):as_strided({0, 2}, {1, math.maxinteger})
    lu.assertEquals((v + 1).shape, {0, 2})
    lu.assertEquals(wb.exp(v).shape, {0, 2})
end

os.exit(lu.LuaUnit.run())
