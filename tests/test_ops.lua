-- test_ops.lua: elementwise ops with broadcasting against a plain-Lua reference (awkward sizes,
-- strided and broadcast operands, the multi-threaded path), copy_, fill_ and the comparisons.
local lu = require("luaunit")

local function flat(x) return x:contiguous():flatten():tolist() end

local function numel(shape)
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    return n
end

-- Reference: NumPy broadcasting computed element by element in Lua doubles, rounded to f32.
local function reference(op, a, b)
    local sa, sb = a.shape, b.shape
    local n = math.max(#sa, #sb)
    local out = {}
    for i = 1, n do
        local x = sa[#sa - n + i] or 1
        local y = sb[#sb - n + i] or 1
        out[i] = x == 1 and y or x
    end
    local va, vb = flat(a), flat(b)
    local function index(shape, idx)
        local k, mul = 0, 1
        for d = #shape, 1, -1 do
            local i = idx[n - #shape + d]
            if shape[d] == 1 then i = 0 end
            k = k + i * mul
            mul = mul * shape[d]
        end
        return k + 1
    end
    local res, idx = {}, {}
    for d = 1, n do idx[d] = 0 end
    for e = 1, numel(out) do
        local x, y = va[index(sa, idx)], vb[index(sb, idx)]
        res[e] = string.unpack("f", string.pack("f", op(x, y)))
        for d = n, 1, -1 do
            idx[d] = idx[d] + 1
            if idx[d] < out[d] then break end
            idx[d] = 0
        end
    end
    return res, out
end

local ops = {
    add = {wb.add, function(x, y) return x + y end, function(a, b) return a + b end},
    sub = {wb.sub, function(x, y) return x - y end, function(a, b) return a - b end},
    mul = {wb.mul, function(x, y) return x * y end, function(a, b) return a * b end},
    div = {wb.div, function(x, y) return x / y end, function(a, b) return a / b end},
}

local function assert_same(got, want, what)
    lu.assertEquals(#got, #want, what)
    for i = 1, #want do
        if got[i] ~= want[i] and not (got[i] ~= got[i] and want[i] ~= want[i]) then
            lu.fail(string.format("%s: element %d is %.9g, expected %.9g", what, i, got[i], want[i]))
        end
    end
end

TestElementwise = {}

function TestElementwise:test_broadcast_shapes_against_reference()
    wb.manual_seed(11)
    local cases = {
        {{3, 17}, {3, 17}}, {{3, 17}, {17}}, {{31, 1}, {1, 33}}, {{2, 1, 5}, {3, 1}},
        {{1}, {129}}, {{}, {4, 3}}, {{17, 3}, {}}, {{0, 3}, {3}}, {{65, 1, 2}, {1, 2}},
    }
    for _, c in ipairs(cases) do
        local a = wb.randn(c[1])
        local b = wb.rand(c[2]) + 0.5 -- keep divisors away from 0
        for name, op in pairs(ops) do
            local want, shape = reference(op[2], a, b)
            for _, got in ipairs({op[1](a, b), op[3](a, b)}) do
                lu.assertEquals(got.shape, shape, name)
                assert_same(flat(got), want, name .. " " .. tostring(got))
            end
        end
    end
end

function TestElementwise:test_strided_and_expanded_operands()
    wb.manual_seed(12)
    local base = wb.randn({6, 10})
    local a = base:t():narrow(1, 2, 7) -- {7, 6}, strides {1, 10}
    local b = wb.randn({7, 1}):expand({7, 6})
    for name, op in pairs(ops) do
        local want = reference(op[2], a, b)
        assert_same(flat(op[1](a, b)), want, name)
        assert_same(flat(op[1](a:contiguous(), b:contiguous())), want, name .. " contiguous")
    end
end

function TestElementwise:test_large_parallel_path_matches_serial()
    wb.manual_seed(13)
    local a, b = wb.randn({300, 1000}), wb.randn({1000})
    local threads = wb.get_num_threads()
    wb.set_num_threads(1)
    local one = a * b + a:t():contiguous():t()
    wb.set_num_threads(2)
    local two = a * b + a:t():contiguous():t()
    wb.set_num_threads(threads)
    lu.assertEquals(wb.max_abs_diff(one, two), 0)
    -- few long rows: the inner loop is split instead
    local r = wb.randn({1, 200000})
    lu.assertEquals(wb.max_abs_diff((r + r):view({200000}), r:view({200000}) * 2), 0)
end

function TestElementwise:test_scalars_and_negation()
    local x = wb.tensor({1, 2, 4})
    lu.assertEquals((x + 1):tolist(), {2, 3, 5})
    lu.assertEquals((1 - x):tolist(), {0, -1, -3})
    lu.assertEquals((x * 0.5):tolist(), {0.5, 1, 2})
    lu.assertEquals((8 / x):tolist(), {8, 4, 2})
    lu.assertEquals((-x):tolist(), {-1, -2, -4})
    lu.assertEquals(wb.neg(x):tolist(), {-1, -2, -4})
    lu.assertEquals(x:add(x):tolist(), {2, 4, 8})
end

function TestElementwise:test_ieee_specials_propagate()
    local inf, nan = math.huge, 0 / 0
    local x = wb.tensor({1, -1, 0, inf})
    local d = (x / wb.tensor({0, 0, 0, inf})):tolist()
    lu.assertEquals(d[1], inf)
    lu.assertEquals(d[2], -inf)
    lu.assertNotEquals(d[3], d[3]) -- 0/0 is NaN
    lu.assertNotEquals(d[4], d[4]) -- inf/inf is NaN
    local s = (wb.tensor({nan, 1}) + 1):tolist()
    lu.assertNotEquals(s[1], s[1])
    lu.assertEquals(s[2], 2)
end

TestCopyFill = {}

function TestCopyFill:test_copy_broadcasts_source()
    local dst = wb.zeros({2, 3})
    dst:copy_(wb.tensor({1, 2, 3}))
    lu.assertEquals(dst:tolist(), {{1, 2, 3}, {1, 2, 3}})
    dst:t():copy_(wb.arange(6):view({3, 2}))
    lu.assertEquals(dst:tolist(), {{0, 2, 4}, {1, 3, 5}})
end

function TestCopyFill:test_copy_with_overlap_is_correct()
    local x = wb.arange(6)
    -- shift right by one inside the same storage: source and destination overlap
    x:narrow(1, 2, 5):copy_(x:narrow(1, 1, 5))
    lu.assertEquals(x:tolist(), {0, 0, 1, 2, 3, 4})
    local m = wb.arange(9):view({3, 3})
    m:copy_(m:t()) -- in-place transpose through a private copy
    lu.assertEquals(m:tolist(), {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}})
end

function TestCopyFill:test_fill_strided()
    local x = wb.zeros({4, 4})
    x:t():narrow(1, 2, 2):fill_(5)
    lu.assertEquals(x:tolist(), {{0, 5, 5, 0}, {0, 5, 5, 0}, {0, 5, 5, 0}, {0, 5, 5, 0}})
    lu.assertEquals(x:fill_(1):tolist()[1], {1, 1, 1, 1}) -- returns self
end

TestCompare = {}

function TestCompare:test_allclose_and_errors()
    local a = wb.tensor({1, 2, 3})
    local b = wb.tensor({1, 2, 3.001})
    lu.assertFalse(wb.allclose(a, b))
    lu.assertTrue(wb.allclose(a, b, {rtol = 1e-3}))
    lu.assertTrue(wb.allclose(a, b, {atol = 2e-3}))
    lu.assertAlmostEquals(wb.max_abs_diff(a, b), 0.001, 1e-6)
    lu.assertAlmostEquals(wb.rel_error(b, a), 0.001 / math.sqrt(14), 1e-7)
    lu.assertEquals(wb.rel_error(a, a), 0)
    lu.assertTrue(wb.allclose(wb.tensor({math.huge}), wb.tensor({math.huge})))
    lu.assertFalse(wb.allclose(wb.tensor({0 / 0}), wb.tensor({0 / 0})))
    lu.assertTrue(wb.allclose(wb.ones({2, 3}), wb.ones({3}))) -- broadcast
end

os.exit(lu.LuaUnit.run())
