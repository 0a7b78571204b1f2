-- test_errors.lua: every bad input named in the foundation issue gives a clear Lua error that
-- names the problem (and the shapes), never a crash.
local lu = require("luaunit")

local function raises(fragment, fn, ...)
    lu.assertErrorMsgContains(fragment, fn, ...)
end

TestBadShapes = {}

function TestBadShapes:test_view_to_wrong_element_count()
    local x = wb.zeros({2, 3})
    raises("view: shape {4, 2} (8 elements) is invalid for a tensor of 6 elements", function() return x:view({4, 2}) end)
    raises("view: shape {4, -1} is invalid for a tensor of 6 elements", function() return x:view({4, -1}) end)
    raises("reshape: shape {7} (7 elements) is invalid for a tensor of 6 elements", function() return x:reshape({7}) end)
    raises("only one dimension can be -1", function() return x:view({-1, -1}) end)
end

function TestBadShapes:test_negative_and_zero_size_nonsense()
    raises("zeros: negative size -3 in dimension 2 of shape {2, -3}", function() return wb.zeros({2, -3}) end)
    raises("invalid size -2 in dimension 1", function() return wb.zeros({6}):view({-2, -3}) end)
    raises("cannot infer the -1 in shape {0, -1}", function() return wb.zeros({0, 3}):view({0, -1}) end)
    raises("arange: n must be >= 0, got -1", function() return wb.arange(-1) end)
    raises("narrow: length must be >= 0, got -1", function() return wb.zeros({3}):narrow(1, 1, -1) end)
    raises("rand: negative size -1", function() return wb.rand({-1}) end)
    raises("at most 8 are supported", function() return wb.zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}) end)
    raises("expand: size -1 is not allowed in new leading dimension 1", function() return wb.zeros({2}):expand({-1, 2}) end)
end

function TestBadShapes:test_narrow_and_select_past_the_end()
    local x = wb.zeros({3, 4})
    raises("narrow: start 3 with length 2 runs past the end of dimension 1 of size 3", function() return x:narrow(1, 3, 2) end)
    raises("narrow: start 6 is out of range for dimension 2 of size 4", function() return x:narrow(2, 6, 0) end)
    raises("narrow: start 0 is out of range", function() return x:narrow(2, 0, 1) end)
    raises("select: index 4 is out of range for dimension 1 of size 3 (expected 1..3 or -3..-1)", function() return x:select(1, 4) end)
    raises("select: index -5 is out of range for dimension 2 of size 4", function() return x:select(2, -5) end)
    raises("select: index 0 is out of range", function() return x:select(1, 0) end)
end

function TestBadShapes:test_missing_or_bad_dimension()
    local x = wb.zeros({3, 4})
    raises("transpose: missing dimension argument", function() return x:transpose(1) end)
    raises("transpose: dimension 3 is out of range for a tensor with 2 dimensions (expected 1..2 or -2..-1)",
        function() return x:transpose(1, 3) end)
    raises("select: dimension 0 is out of range", function() return x:select(0, 1) end)
    raises("permute: got 1 dimensions in the order, but the tensor has 2", function() return x:permute(1) end)
    raises("permute: dimension 1 appears twice", function() return x:permute(1, 1) end)
    raises("t: expects a tensor with at most 2 dimensions, got 3 (shape {2, 3, 4}); use transpose(d1, d2)",
        function() return wb.zeros({2, 3, 4}):t() end)
    raises("dimension 1 is out of range: the tensor has 0 dimensions", function() return wb.tensor(1):select(1, 1) end)
    raises("flatten: start dimension 2 comes after end dimension 1", function() return x:flatten(2, 1) end)
end

function TestBadShapes:test_as_strided_past_storage()
    raises("as_strided: shape {3, 3} with strides {3, 1} at offset 0 needs 9 elements but the storage has 6",
        function() return wb.arange(6):as_strided({3, 3}, {3, 1}) end)
    raises("as_strided: shape has 2 dimensions but stride has 1", function() return wb.arange(6):as_strided({3, 2}, {1}) end)
end

function TestBadShapes:test_view_of_non_contiguous()
    raises("view: shape {6} cannot be a view of a tensor of shape {2, 3} with strides {1, 2}",
        function() return wb.arange(6):view({3, 2}):t():view({6}) end)
    raises("use reshape() or contiguous() first", function() return wb.zeros({4, 4}):narrow(2, 1, 2):view({8}) end)
end

function TestBadShapes:test_broadcast_failure_shows_both_shapes()
    local a, b = wb.zeros({2, 3}), wb.zeros({4})
    raises("add: shapes {2, 3} and {4} do not broadcast (size 3 vs 4 in dimension 1 from the end)", function() return a + b end)
    raises("mul: shapes {2, 3} and {4} do not broadcast", function() return wb.mul(a, b) end)
    raises("sub: shapes {5, 3} and {2, 3} do not broadcast", function() return wb.zeros({5, 3}) - a end)
    raises("copy_: source of shape {2, 3} does not broadcast to the destination's shape {3}",
        function() return wb.zeros({3}):copy_(a) end)
    raises("expand: dimension 2 has size 3 and cannot be expanded to 4", function() return a:expand({2, 4}) end)
    raises("allclose: shapes {2, 3} and {4} do not broadcast", function() return wb.allclose(a, b) end)
    raises("copy_: the destination has several elements in one memory location",
        function() return wb.zeros({1, 3}):expand({2, 3}):copy_(a) end)
end

TestBadNames = {}

function TestBadNames:test_unknown_dtype_or_device()
    raises("zeros: unknown dtype 'f64' (expected \"f32\" or \"bf16\")", function() return wb.zeros({2}, {dtype = "f64"}) end)
    raises("rand: unknown device 'tpu' (expected \"cpu\", \"cuda\" or \"auto\")", function() return wb.rand({2}, {device = "tpu"}) end)
    if not wb.cuda.is_available() then
        raises("ones: device 'cuda' is not available: ", function() return wb.ones({2}, {device = "cuda"}) end)
        raises("to: device 'cuda' is not available", function() return wb.ones({2}):to({device = "cuda"}) end)
    end
    -- mixed dtypes are refused, naming both (tests/test_bf16.lua has the rest)
    local h = wb.ones({2}, {dtype = "bf16"})
    raises("add: dtypes bf16 and f32 differ", function() return h + wb.ones({2}) end)
    raises("mixed dtypes f32 and bf16", function() return wb.matmul(wb.ones({2, 2}), wb.ones({2, 2}, {dtype = "bf16"})) end)
    raises("linear: mixed dtypes: input f32, weight f32, bias bf16",
        function() return wb.linear(wb.ones({1, 2}), wb.ones({3, 2}), wb.ones({3}, {dtype = "bf16"})) end)
    raises("zeros: unknown option 'dtpye' (expected one of: dtype, device)", function() return wb.zeros({2}, {dtpye = "f32"}) end)
    raises("allclose: unknown option 'tol'", function() return wb.allclose(wb.ones({1}), wb.ones({1}), {tol = 1}) end)
    raises("synchronize: unknown device 'gpu'", function() wb.synchronize("gpu") end)
end

function TestBadNames:test_ragged_nested_tables()
    raises("tensor: ragged nested table: element [2] has 1 entries, expected 2", function() return wb.tensor({{1, 2}, {3}}) end)
    raises("tensor: ragged nested table: element [2] is a number, but its siblings are tables of 2",
        function() return wb.tensor({{1, 2}, 3}) end)
    raises("tensor: element [1][2] is a table, expected a number", function() return wb.tensor({{1, {2}}, {3, 4}}) end)
    raises("tensor: element [2] is a string, expected a number", function() return wb.tensor({1, "x"}) end)
    raises("tensor: expected a number or a nested table of numbers, got string", function() return wb.tensor("1") end)
end

function TestBadNames:test_wrong_argument_types()
    local x = wb.zeros({2, 3})
    raises("zeros: shape must be a table of sizes like {2, 3}, got string", function() return wb.zeros("2x3") end)
    raises("zeros: shape element 2 must be an integer, got 2.5", function() return wb.zeros({2, 2.5}) end)
    -- (a NaN reads "nan" whichever its sign bit: printf wrote "-nan" for 0/0)
    raises("zeros: shape element 1 must be an integer, got nan", function() return wb.zeros({0 / 0}) end)
    raises("zeros: shape must be an integer, got nan", function() return wb.zeros(-(0 / 0)) end)
    raises("view: shape element 1 must be an integer, got boolean", function() return x:view({true}) end)
    raises("narrow: start must be an integer, got no value", function() return x:narrow(1) end)
    raises("transpose: dimension must be an integer, got 1.5", function() return x:transpose(1.5, 2) end)
    raises("add: operand 2 must be a tensor or a number, got string", function() return x + "1" end)
    raises("bad argument #1: expected a tensor, got table", function() return wb.rel_error({}, x) end)
    raises("zeros: options must be a table", function() return wb.zeros({2}, "f32") end)
    raises("tensor has no field or method 'shap'", function() return x.shap end)
    raises("tensor fields are read-only", function() x.shape = {6} end)
    raises("item: the tensor has 6 elements, item() needs exactly 1", function() return x:item() end)
    raises("manual_seed: seed must be an integer", function() wb.manual_seed("x") end)
end

function TestBadNames:test_absurd_allocations_are_refused()
    raises("empty: cannot allocate 3.6 TiB on cpu: more than the", function() return wb.empty({1e6, 1e6}) end)
    raises("zeros: cannot allocate", function() return wb.zeros({1 << 40}) end)
    raises("has more elements than can be addressed", function() return wb.zeros({1 << 62, 1 << 62}) end)
    raises("cannot allocate", function() return wb.randn({1 << 20, 1 << 20}) end)
    raises("cannot allocate", function() return wb.zeros({1}):expand({1 << 40}):contiguous() end)
end

function TestBadNames:test_use_after_release()
    local x = wb.ones({2})
    local v = x:view({2, 1})
    x:release()
    raises("attempt to use a released tensor", function() return x:t() end)
    raises("attempt to use a released tensor", function() return v + x end)
    raises("attempt to use a released tensor", function() return x:copy_(v) end)
    raises("attempt to use a released tensor", function() return v:copy_(x) end)
    lu.assertEquals(v:tolist(), {{1}, {1}}) -- the view still owns the storage
end

os.exit(lu.LuaUnit.run())
