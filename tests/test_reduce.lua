-- test_reduce.lua: t:sum(), t:mean(), t:max() over every element or one dim, on f32 and bf16, on
-- every layout (contiguous, transposed, narrowed, expanded, permuted): sums and means within the
-- bound of their pairwise f64 summation (tests/bounds.lua, B.reduce_sum), maxima and their
-- indices exact; the empty, NaN and bad-argument cases; the profiler sees one op and one kernel.
local lu = require("luaunit")
local B = require("bounds")

-- A tensor of `shape` laid out as `layout`, values drawn in f32 and stored as dtype.
local function make(shape, layout, dtype)
    local opts = {dtype = dtype}
    local n = #shape
    if layout == "contiguous" or n == 0 then return wb.randn(shape, opts) end
    if layout == "transposed" then -- the dims reversed in memory
        local rev, perm = {}, {}
        for d = 1, n do rev[d], perm[d] = shape[n + 1 - d], n + 1 - d end
        return wb.randn(rev, opts):permute(perm)
    end
    if layout == "narrowed" then -- a slice of a wider tensor: a row stride past the row
        local wide = {table.unpack(shape)}
        wide[n] = wide[n] + 3
        return wb.randn(wide, opts):narrow(n, 2, shape[n])
    end
    if layout == "expanded" then -- the first dim read through stride 0
        local one = {table.unpack(shape)}
        one[1] = 1
        return wb.randn(one, opts):expand(shape)
    end
    error("unknown layout " .. layout)
end
local LAYOUTS = {"contiguous", "transposed", "narrowed", "expanded"}

-- The reduced elements of each result, in the results' row-major order (lists of doubles).
local function lists_of(x, dim)
    if not dim then return {x:reshape({-1}):tolist()} end
    local perm = {}
    for d = 1, x:dim() do if d ~= dim then perm[#perm + 1] = d end end
    perm[#perm + 1] = dim
    return x:permute(perm):contiguous():reshape({-1, x.shape[dim]}):tolist()
end

local function flat(y)
    if y:dim() == 0 then return {{y:item()}} end
    return {y:to{dtype = "f32"}:reshape({-1}):tolist()}
end

local function shape_without(shape, dim, keepdim)
    local out = {}
    for d = 1, #shape do
        if d == dim or not dim then
            if keepdim then out[#out + 1] = 1 end
        else
            out[#out + 1] = shape[d]
        end
    end
    return out
end

-- The exact max of a list (the first NaN, else the largest, the first of ties) and its position.
local function max_of(list)
    local best, at = list[1], 1
    for i, v in ipairs(list) do
        if v ~= v then return v, i end
        if v > best then best, at = v, i end
    end
    return best, at
end

local SHAPES = {{1}, {3}, {17}, {1000}, {3, 17}, {31, 33}, {129, 3}, {2, 257}, {3, 5, 17}, {4, 1, 33}}

TestReduce = {}

function TestReduce:setUp() wb.manual_seed(47) end

function TestReduce:test_sum_and_mean_within_their_bound()
    for _, dtype in ipairs({"f32", "bf16"}) do
        for _, shape in ipairs(SHAPES) do
            for _, layout in ipairs(LAYOUTS) do
                local x = make(shape, layout, dtype)
                local dims = {false}
                for d = 1, #shape do dims[#dims + 1] = d end
                for _, dim in ipairs(dims) do
                    local lists = lists_of(x, dim or nil)
                    for _, op in ipairs({"sum", "mean"}) do
                        local what = string.format("%s %s %s %s dim %s", op, dtype, layout,
                            table.concat(shape, "x"), tostring(dim))
                        local y = dim and x[op](x, dim) or x[op](x)
                        lu.assertEquals(y.shape, shape_without(shape, dim or nil, false), what)
                        lu.assertEquals(y.dtype, dtype, what)
                        B.assert_within_bound(flat(y), B.reduce_sum(lists, {mean = op == "mean", format = dtype}), what)
                    end
                end
            end
        end
    end
end

-- What f32 accumulation cannot do: big terms that cancel around small ones. Exact here (f64),
-- and the bound says so: a sum kept in f32 (1e8 + 1 rounds to 1e8) reads 0, not 2000.
function TestReduce:test_cancellation_is_not_lost()
    local pattern = {}
    for i = 1, 4000 do pattern[i] = ({1e8, 1, -1e8, 1})[(i - 1) % 4 + 1] end
    local x = wb.tensor(pattern)
    local z = B.reduce_sum({x:tolist()})
    B.assert_within_bound(flat(x:sum()), z, "sum")
    lu.assertEquals(x:sum():item(), 2000)
    lu.assertEquals(x:view({1000, 4}):sum(2):tolist()[1], 2)
    lu.assertEquals(x:view({1000, 4}):t():sum(1):tolist()[1000], 2)
    lu.assertEquals(x:mean():item(), 0.5)
end

-- A bf16 result is rounded once: 1 + 2^-8 + 2^-30 lies just past the halfway point between the
-- bf16 neighbours 1 and 1 + 2^-7, so it rounds up; rounded to f32 first it would land on the
-- halfway point itself, which rounds to even (1).
function TestReduce:test_bf16_results_round_once()
    local x = wb.tensor({1, 2 ^ -8, 2 ^ -30}, {dtype = "bf16"})
    lu.assertEquals(x:tolist(), {1, 2 ^ -8, 2 ^ -30}) -- exact in bf16
    lu.assertEquals(x:sum():item(), 1 + 2 ^ -7)
    lu.assertEquals((-x):sum():item(), -(1 + 2 ^ -7))
    lu.assertEquals(wb.tensor({1, 2 ^ -8}, {dtype = "bf16"}):sum():item(), 1) -- a true tie: to even
end

-- Large enough for the threads (65536 elements and more): the subtrees are summed in parallel
-- and added in the serial tree's order, so one thread and two give the same bits.
function TestReduce:test_large_sums_within_bound_and_alike_on_any_thread_count()
    local was = wb.set_threads_adaptive(false)
    local threads = wb.get_num_threads()
    local ok, err = pcall(function()
        for _, dtype in ipairs({"f32", "bf16"}) do
            local x = wb.randn({70007}, {dtype = dtype}) + 3
            local lists = lists_of(x)
            local got = {}
            for _, n in ipairs({1, 2}) do
                wb.set_num_threads(n)
                got[n] = {x:sum():item(), x:mean():item(), x:view({7, 10001}):sum(2):tolist()}
                B.assert_within_bound(flat(x:sum()), B.reduce_sum(lists, {format = dtype}), dtype .. " sum")
                B.assert_within_bound(flat(x:mean()), B.reduce_sum(lists, {mean = true, format = dtype}),
                    dtype .. " mean")
                B.assert_within_bound(flat(x:view({7, 10001}):sum(2)),
                    B.reduce_sum(lists_of(x:view({7, 10001}), 2), {format = dtype}), dtype .. " rows")
            end
            lu.assertEquals(got[1], got[2], dtype)
        end
    end)
    wb.set_num_threads(threads)
    wb.set_threads_adaptive(was)
    if not ok then error(err, 0) end
end

function TestReduce:test_max_values_and_indices_exact()
    for _, dtype in ipairs({"f32", "bf16"}) do
        for _, shape in ipairs(SHAPES) do
            for _, layout in ipairs(LAYOUTS) do
                local x = make(shape, layout, dtype)
                local what = string.format("max %s %s %s", dtype, layout, table.concat(shape, "x"))
                lu.assertEquals(x:max():item(), (max_of(lists_of(x)[1])), what)
                for dim = 1, #shape do
                    local values, indices = x:max(dim)
                    local want_v, want_i = {}, {}
                    for k, list in ipairs(lists_of(x, dim)) do want_v[k], want_i[k] = max_of(list) end
                    lu.assertEquals(values.shape, shape_without(shape, dim, false), what)
                    lu.assertEquals(indices.shape, values.shape, what)
                    lu.assertEquals(values.dtype, dtype, what)
                    lu.assertEquals(indices.dtype, "f32", what)
                    lu.assertEquals(flat(values)[1], want_v, what .. " dim " .. dim)
                    lu.assertEquals(flat(indices)[1], want_i, what .. " dim " .. dim)
                    -- negative dims count from the end
                    local v2, i2 = x:max(dim - #shape - 1)
                    lu.assertEquals(flat(v2), flat(values))
                    lu.assertEquals(flat(i2), flat(indices))
                end
            end
        end
    end
end

function TestReduce:test_max_ties_nan_and_infinities()
    local x = wb.tensor({{1, 5, 5, 2}, {-math.huge, -math.huge, -math.huge, -math.huge}, {3, 0 / 0, 9, 0 / 0}})
    local v, i = x:max(2)
    local vals = v:tolist()
    lu.assertEquals(vals[1], 5)
    lu.assertEquals(vals[2], -math.huge)
    lu.assertTrue(vals[3] ~= vals[3], "a NaN in the row is the row's max")
    lu.assertEquals(i:tolist(), {2, 1, 2}) -- the first of ties; the first NaN
    lu.assertTrue(x:max():item() ~= x:max():item(), "a NaN anywhere is the max")
    lu.assertTrue(x:sum():item() ~= x:sum():item(), "NaN sums to NaN")
    lu.assertEquals(x:max(1):tolist()[1], 3)
    lu.assertEquals(1 / wb.tensor({-0.0, 0.0}):max():item(), -math.huge) -- equal: the first stays
    lu.assertEquals(1 / wb.tensor({0.0, -0.0}):max():item(), math.huge)
end

function TestReduce:test_keepdim()
    local x = wb.randn({3, 4, 5})
    lu.assertEquals(x:sum({keepdim = true}).shape, {1, 1, 1})
    lu.assertEquals(x:sum(2, {keepdim = true}).shape, {3, 1, 5})
    lu.assertEquals(x:mean(-1, {keepdim = true}).shape, {3, 4, 1})
    local v, i = x:max(1, {keepdim = true})
    lu.assertEquals(v.shape, {1, 4, 5})
    lu.assertEquals(i.shape, {1, 4, 5})
    lu.assertEquals(x:max({keepdim = true}).shape, {1, 1, 1})
    lu.assertEquals(x:sum(2, {keepdim = true}):view({3, 5}):tolist(), x:sum(2):tolist())
    lu.assertEquals(x:sum(2, {keepdim = false}).shape, {3, 5})
end

function TestReduce:test_zero_dim_and_empty_tensors()
    local s = wb.full({}, 2.5)
    lu.assertEquals(s:sum():item(), 2.5)
    lu.assertEquals(s:mean():item(), 2.5)
    lu.assertEquals(s:max():item(), 2.5)
    lu.assertEquals(s:sum().shape, {})
    -- a sum of nothing is 0; a sum over a non-empty dim of an empty tensor is empty
    lu.assertEquals(wb.zeros({0, 3}):sum():item(), 0)
    lu.assertEquals(wb.zeros({0, 3}):sum(1):tolist(), {0, 0, 0})
    lu.assertEquals(wb.zeros({0, 3}):sum(2).shape, {0})
    lu.assertEquals(wb.zeros({0, 3}):max(2).shape, {0}) -- nothing to take a max of: no error
    lu.assertEquals(wb.zeros({0, 3}, {dtype = "bf16"}):sum(1, {keepdim = true}).shape, {1, 3})
    -- a mean or max of nothing names the shape
    lu.assertErrorMsgContains("mean: the tensor of shape {0, 3} is empty: no mean",
        function() return wb.zeros({0, 3}):mean() end)
    lu.assertErrorMsgContains("max: the tensor of shape {0} is empty: no max", function() return wb.zeros({0}):max() end)
    lu.assertErrorMsgContains("max: dimension 1 of the tensor of shape {0, 3} is empty (size 0): no max",
        function() return wb.zeros({0, 3}):max(1) end)
    lu.assertErrorMsgContains("mean: dimension 2 of the tensor of shape {2, 0} is empty (size 0): no mean",
        function() return wb.zeros({2, 0}):mean(-1) end)
end

-- Each bad argument: one line, naming the function, the argument and (for dims) the shape.
function TestReduce:test_bad_arguments()
    local x = wb.zeros({2, 3})
    local cases = {
        {function() return x:sum(3) end,
            "sum: dimension 3 is out of range for a tensor of shape {2, 3} (expected 1..2 or -2..-1)"},
        {function() return x:mean(-3) end,
            "mean: dimension -3 is out of range for a tensor of shape {2, 3} (expected 1..2 or -2..-1)"},
        {function() return x:max(0) end,
            "max: dimension 0 is out of range for a tensor of shape {2, 3} (expected 1..2 or -2..-1)"},
        {function() return wb.full({}, 1):sum(1) end,
            "sum: dimension 1 is out of range for a tensor of shape {} (no dimensions; t:sum() reduces over " ..
            "every element)"},
        {function() return x:sum(1.5) end, "sum: dimension must be an integer, got 1.5"},
        {function() return x:sum("a") end, "sum: dimension must be an integer, got string"},
        {function() return x:sum(1, true) end, "sum: the options must be a table {keepdim=true}, got boolean"},
        {function() return x:sum{keep = true} end, "sum: unknown option 'keep'"},
        {function() return x:mean(1, {keepdim = 1}) end, "mean: keepdim must be a boolean, got number"},
        {function() return x:max(1, {}, 3) end, "max: expects (dim, {keepdim=}) at most, got 3 arguments"},
        {function() return x.sum(5) end, "sum: bad argument #1"},
    }
    for _, c in ipairs(cases) do
        local ok, err = pcall(c[1])
        lu.assertFalse(ok, c[2])
        lu.assertStrContains(err, c[2])
        lu.assertNil(err:find("\n"), err)
    end
    local r = wb.zeros({2})
    r:release()
    lu.assertErrorMsgContains("released tensor", function() return r:sum() end)
end

-- One op and one kernel each, as the other ops: the profiler's table and expect see them.
function TestReduce:test_the_profiler_sees_them_as_ops()
    local x = wb.randn({64, 32})
    local xb = x:to{dtype = "bf16"}
    local p = wb.profiler.profile{}
    p:start()
    local _ = x:sum(2)
    _ = x:mean()
    local _, _ = x:max(1)
    _ = xb:t():sum(1)
    p:stop()
    p:expect{ops = {sum = 2, mean = 1, max = 1}, kernels = 4}
    local kernels = {}
    for _, e in ipairs(p:events{cat = "kernel"}) do kernels[#kernels + 1] = e.name end
    lu.assertEquals(kernels, {"wb_sum_generic_contig", "wb_mean_generic_contig", "wb_max_generic_strided",
        "wb_sum_bf16_generic_strided"})
    local flops = {}
    for _, e in ipairs(p:events{cat = "kernel"}) do flops[#flops + 1] = e.flops end
    lu.assertEquals(flops, {2048, 2048, 2048, 2048}) -- one add or compare per element
end

function TestReduce:test_not_on_cuda_yet()
    if not wb.cuda.is_available() then
        lu.skip("no cuda device (the mock plugin's run, lua_test_cuda_mock, checks the message)")
    end
    local x = wb.ones({4}, {device = "cuda"})
    for _, op in ipairs({"sum", "mean", "max"}) do
        lu.assertErrorMsgContains(op .. ": not on cuda yet", function() return x[op](x) end)
    end
end

os.exit(lu.LuaUnit.run())
