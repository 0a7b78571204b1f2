-- test_views.lua: every view shares storage, launches nothing and is bounds-checked; the view
-- lesson holds exactly as the README and PyTorch describe it.
local lu = require("luaunit")

local function M32() return wb.arange(6):view({3, 2}) end

TestLesson = {}

function TestLesson:test_t_is_a_view()
    local M = M32()
    lu.assertEquals(M.shape, {3, 2})
    lu.assertEquals(M:stride(), {2, 1})
    local T = M:t()
    lu.assertEquals(T.shape, {2, 3})
    lu.assertEquals(T:stride(), {1, 2})
    lu.assertEquals(T:data_ptr(), M:data_ptr())
    lu.assertFalse(T:is_contiguous())
end

function TestLesson:test_flatten_of_view_materialises_transposed_order()
    local M = M32()
    local F = M:t():flatten()
    lu.assertEquals(F:tolist(), {0, 2, 4, 1, 3, 5})
    lu.assertNotEquals(F:data_ptr(), M:data_ptr())
    lu.assertEquals(M:flatten():data_ptr(), M:data_ptr()) -- contiguous: a view
end

function TestLesson:test_contiguous_copies_only_when_needed()
    local M = M32()
    local C = M:t():contiguous()
    lu.assertNotEquals(C:data_ptr(), M:data_ptr())
    lu.assertEquals(C:stride(), {3, 1})
    lu.assertEquals(C:tolist(), {{0, 2, 4}, {1, 3, 5}})
    lu.assertEquals(M:contiguous():data_ptr(), M:data_ptr())
    local K = M:clone()
    lu.assertNotEquals(K:data_ptr(), M:data_ptr())
    lu.assertEquals(K:tolist(), M:tolist())
end

TestViews = {}

function TestViews:test_writes_through_views_reach_the_base()
    local M = M32()
    M:t():select(1, 2):fill_(9) -- column 2 of M
    lu.assertEquals(M:tolist(), {{0, 9}, {2, 9}, {4, 9}})
    M:narrow(1, 2, 2):copy_(wb.tensor({{-1, -2}, {-3, -4}}))
    lu.assertEquals(M:tolist(), {{0, 9}, {-1, -2}, {-3, -4}})
end

function TestViews:test_transpose_and_permute()
    local x = wb.arange(24):view({2, 3, 4})
    local y = x:transpose(1, 3)
    lu.assertEquals(y.shape, {4, 3, 2})
    lu.assertEquals(y:stride(), {1, 4, 12})
    lu.assertEquals(x:transpose(-1, -3):stride(), {1, 4, 12})
    local p = x:permute(3, 1, 2)
    lu.assertEquals(p.shape, {4, 2, 3})
    lu.assertEquals(p:stride(), {1, 12, 4})
    lu.assertEquals(x:permute({3, 1, 2}):stride(), {1, 12, 4})
    lu.assertEquals(p:data_ptr(), x:data_ptr())
    -- element [i][j][k] of the permutation is x[j][k][i]
    lu.assertEquals(p:select(1, 4):select(1, 2):select(1, 3):item(), x:select(1, 2):select(1, 3):select(1, 4):item())
end

function TestViews:test_view_and_reshape()
    local x = wb.arange(12)
    local v = x:view({3, -1})
    lu.assertEquals(v.shape, {3, 4})
    lu.assertEquals(v:data_ptr(), x:data_ptr())
    lu.assertEquals(x:view(2, 2, 3).shape, {2, 2, 3})
    -- a transposed tensor can still be split along one of its runs without a copy
    local t = v:t() -- {4, 3} strides {1, 4}
    local s = t:view({2, 2, 3})
    lu.assertEquals(s:stride(), {2, 1, 4})
    lu.assertEquals(s:data_ptr(), x:data_ptr())
    -- reshape: a view when possible, a copy otherwise; same values either way
    lu.assertEquals(t:reshape({12}):tolist(), {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11})
    lu.assertNotEquals(t:reshape({12}):data_ptr(), x:data_ptr())
    lu.assertEquals(v:reshape({12}):data_ptr(), x:data_ptr())
    lu.assertEquals(wb.zeros({0, 3}):view({3, 0}).shape, {3, 0})
end

function TestViews:test_narrow_and_select()
    local x = wb.arange(20):view({4, 5})
    local n = x:narrow(2, 2, 3)
    lu.assertEquals(n.shape, {4, 3})
    lu.assertEquals(n:storage_offset(), 1)
    lu.assertEquals(n:select(1, 1):tolist(), {1, 2, 3})
    lu.assertEquals(x:narrow(1, -1, 1):tolist(), {{15, 16, 17, 18, 19}})
    lu.assertEquals(x:narrow(1, 5, 0).shape, {0, 5}) -- empty slice at the end is allowed
    local s = x:select(2, -1)
    lu.assertEquals(s.shape, {4})
    lu.assertEquals(s:tolist(), {4, 9, 14, 19})
    lu.assertEquals(s:stride(), {5})
    lu.assertEquals(x:select(1, 3):select(1, 2):dim(), 0)
end

function TestViews:test_as_strided_and_expand()
    local x = wb.arange(6)
    local w = x:as_strided({4, 3}, {1, 1}) -- sliding windows of 3
    lu.assertEquals(w:tolist(), {{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}})
    lu.assertEquals(x:as_strided({2}, {2}, 1):tolist(), {1, 3})
    local c = wb.tensor({{1}, {2}})
    local e = c:expand({2, 3})
    lu.assertEquals(e:stride(), {1, 0})
    lu.assertEquals(e:tolist(), {{1, 1, 1}, {2, 2, 2}})
    lu.assertEquals(c:expand({4, -1, 2}).shape, {4, 2, 2})
    lu.assertEquals(e:data_ptr(), c:data_ptr())
    lu.assertEquals(e:contiguous():tolist(), {{1, 1, 1}, {2, 2, 2}})
end

function TestViews:test_flatten_ranges()
    local x = wb.zeros({2, 3, 4, 5})
    lu.assertEquals(x:flatten().shape, {120})
    lu.assertEquals(x:flatten(2).shape, {2, 60})
    lu.assertEquals(x:flatten(2, 3).shape, {2, 12, 5})
    lu.assertEquals(wb.tensor(4):flatten().shape, {1})
end

function TestViews:test_views_chain_keep_one_storage()
    local x = wb.arange(24)
    local y = x:view({2, 3, 4}):permute(2, 3, 1):narrow(1, 2, 2):select(2, 3):t()
    lu.assertEquals(y:data_ptr() - x:data_ptr(), y:storage_offset() * 4)
    lu.assertEquals(y.shape, {2, 2})
    lu.assertEquals(y:tolist(), {{6, 10}, {18, 22}})
end

function TestViews:test_to_same_device_and_dtype_is_free()
    local x = wb.ones({3})
    local y = x:to({device = "cpu", dtype = "f32"})
    lu.assertEquals(y:data_ptr(), x:data_ptr())
end

-- t[i] is t:select(1, i) and t[{i, j}] selects along the first dims in turn: views, checked
-- against the shape first; string keys stay fields and methods.
TestIndexing = {}

function TestIndexing:test_integer_keys_are_views_of_rows()
    local x = wb.arange(6):view({2, 3})
    local row = x[2]
    lu.assertEquals(row.shape, {3})
    lu.assertEquals(row:tolist(), {3, 4, 5})
    lu.assertEquals(row:storage_offset(), 3)
    lu.assertEquals(row:data_ptr(), x:data_ptr() + 3 * 4)
    lu.assertEquals(x[-1]:tolist(), {3, 4, 5})
    lu.assertEquals(x[-2]:tolist(), x:select(1, 1):tolist())
    row:fill_(9) -- writes reach the base
    lu.assertEquals(x:tolist(), {{0, 1, 2}, {9, 9, 9}})
    lu.assertEquals(x:t()[3]:tolist(), {2, 9}) -- a view of a view
    lu.assertEquals(x:t()[3]:stride(), {3})
    local e = x[{2, 3}]
    lu.assertEquals(e.shape, {})
    lu.assertEquals(e:item(), 9)
    lu.assertEquals(x[{1, -1}]:item(), 2)
    lu.assertEquals(x[{1}]:tolist(), {0, 1, 2})
    lu.assertEquals(wb.arange(24):view({2, 3, 4})[{2, 3}]:tolist(), {20, 21, 22, 23})
    -- string keys: fields and methods as before
    lu.assertEquals(x.shape, {2, 3})
    lu.assertEquals(x[1]:sum():item(), 3)
    -- no kernel: a profile of indexing shows select ops only
    local p = wb.profiler.profile{}
    p:start()
    local _ = x[1], x[{2, 2}]
    p:stop()
    p:expect{ops = {select = 3}, kernels = 0}
end

function TestIndexing:test_bad_indices_are_one_line_errors()
    local x = wb.zeros({2, 3})
    local cases = {
        {function() return x[3] end, "index: index 3 is out of range for dimension 1 of size 2 in a tensor of shape " ..
            "{2, 3} (expected 1..2 or -2..-1)"},
        {function() return x[0] end, "index: index 0 is out of range for dimension 1 of size 2"},
        {function() return x[{1, 4}] end, "index: index 4 is out of range for dimension 2 of size 3 in a tensor of " ..
            "shape {2, 3}"},
        {function() return x[{1, 2, 3}] end, "index: 3 indices for a tensor of shape {2, 3} (2 dimensions)"},
        {function() return wb.full({}, 1)[1] end, "index: 1 index for a tensor of shape {} (0 dimensions); t:item() " ..
            "reads its value"},
        {function() return x[1.5] end, "index: an index must be an integer, got 1.5"},
        {function() return x[{}] end, "index: t[{...}] takes 1 to 8 indices, got 0"},
        {function() return x[{1, "a"}] end, "index: an index must be an integer, got string"},
        {function() return x[true] end, "index: tensor has no field or method 'boolean'"},
        {function() return x.nosuch end, "index: tensor has no field or method 'nosuch'"},
        {function() x[1] = 5 end, "newindex: tensor elements are not assigned through t[i] = v: t[i]:fill_(v) or " ..
            "t[i]:copy_(src) writes into the view"},
    }
    for _, c in ipairs(cases) do
        local ok, err = pcall(c[1])
        lu.assertFalse(ok, c[2])
        lu.assertStrContains(err, c[2])
        lu.assertNil(err:find("\n"), err)
    end
    local r = wb.zeros({2})
    r:release()
    lu.assertErrorMsgContains("released tensor", function() return r[1] end)
end

TestBounds = {}

function TestBounds:test_as_strided_cannot_reach_past_storage()
    local x = wb.arange(6)
    lu.assertErrorMsgContains("needs 7 elements but the storage has 6", function() return x:as_strided({2, 3}, {3, 1}, 1) end)
    lu.assertErrorMsgContains("negative stride", function() return x:as_strided({2}, {-1}, 3) end)
    lu.assertErrorMsgContains("storage offset -1 is negative", function() return x:as_strided({1}, {1}, -1) end)
    -- a view of a narrowed tensor may still reach the whole storage (as in PyTorch), not past it
    lu.assertEquals(x:narrow(1, 1, 2):as_strided({6}, {1}, 0):tolist(), {0, 1, 2, 3, 4, 5})
    lu.assertErrorMsgContains("strides reach past any storage", function()
        return x:as_strided({3, 3}, {math.maxinteger // 2, math.maxinteger // 2}, 0)
    end)
end

os.exit(lu.LuaUnit.run())
