-- test_op_list.lua: the activations and the arithmetic ops are declared once (two lists in C, read
-- through wb._ops()) and reach every place that used to name them by hand: wb.<name>, t:<name>()
-- and the metamethod (one function), help's entries and topic line, wb.compile's tracing (as
-- functions, methods and operators) and the generated kernels' C and CUDA C; bad arguments get
-- the usual one-line errors.
local lu = require("luaunit")
local help = require("wb.help")

local function captured(x)
    local out = {}
    local saved = print
    print = function(...) out[#out + 1] = table.concat({...}, "\t") end -- luacheck: ignore
    help(x)
    print = saved -- luacheck: ignore
    return table.concat(out, "\n")
end

function test_the_list()
    local ops, names, arith = wb._ops(), {}, {}
    lu.assertTrue(#ops >= 10)
    for _, op in ipairs(ops) do
        lu.assertTrue(#op.formula > 0)
        if op.method then -- the arithmetic list: expressions in a and b, or in x
            arith[#arith + 1] = op.name .. ":" .. op.kind
            lu.assertEquals(op.arity, op.kind == "binary" and 2 or 1, op.name)
            local word = op.arity == 2 and "[ab]" or "x"
            lu.assertStrMatches(op.expr_c, ".*%f[%w_]" .. word .. "%f[^%w_].*")
            lu.assertStrMatches(op.expr_cuda, ".*%f[%w_]" .. word .. "%f[^%w_].*")
        else -- the activations come first
            lu.assertEquals(#arith, 0, op.name .. " after the arithmetic ops")
            names[#names + 1] = op.name
            lu.assertEquals(op.kind, "unary")
            lu.assertEquals(op.arity, 1)
            -- the expressions are in x, which the generator replaces with the operand
            lu.assertStrMatches(op.expr_c, ".*%f[%w_]x%f[^%w_].*")
            lu.assertStrMatches(op.expr_cuda, ".*%f[%w_]x%f[^%w_].*")
        end
    end
    lu.assertEquals({table.unpack(names, 1, 5)}, {"silu", "sigmoid", "relu", "tanh", "exp"})
    -- the binary ops, then the unary ones
    lu.assertEquals({table.unpack(arith, 1, 4)}, {"add:binary", "sub:binary", "mul:binary", "div:binary"})
    local first_unary = #arith + 1
    for i = #arith, 1, -1 do if arith[i]:match(":unary$") then first_unary = i end end
    lu.assertEquals(arith[first_unary], "neg:unary")
    for i = first_unary, #arith do lu.assertStrMatches(arith[i], ".*:unary") end
end

local function arithmetic()
    local out = {}
    for _, op in ipairs(wb._ops()) do if op.method then out[#out + 1] = op end end
    lu.assertTrue(#out >= 5, "add, sub, mul, div and neg are in wb._ops()")
    return out
end

-- The op as its Lua operator (a + b, -a), or as wb.<name> when it has none (looked up at the
-- call, so that wb.compile's tracing sees it).
local function operator(op)
    if not op.operator then return function(...) return wb[op.name](...) end end
    return load(op.arity == 2 and "return function(a, b) return a " .. op.operator .. " b end" or
        "return function(a) return " .. op.operator .. "a end")()
end

local function activations()
    local out = {}
    for _, op in ipairs(wb._ops()) do if not op.method then out[#out + 1] = op end end
    return out
end

-- Each arithmetic op is one C function under wb.<name>, t:<name> and its metamethod, and computes
-- what its Lua operator computes on numbers (values exact in f32), with numbers as operands too.
function test_arithmetic_function_method_and_operator_are_one_value()
    local a, b = wb.tensor({6, -3, 1.5}), wb.tensor({2, 4, -0.5})
    local av, bv = a:tolist(), b:tolist()
    for _, op in ipairs(arithmetic()) do
        local n = op.name
        lu.assertEquals(type(wb[n]), "function", n)
        lu.assertIs(wb.Tensor.__methods[n], wb[n], n)
        if op.metamethod then lu.assertIs(wb.Tensor[op.metamethod], wb[n], n) end
        -- (an op with no operator has its reference in test_ops.lua: here its result stands in)
        local want, f = {}, operator(op)
        if op.arity == 2 then
            for i = 1, 3 do want[i] = op.operator and f(av[i], bv[i]) or wb[n](a, b):tolist()[i] end
            lu.assertEquals(wb[n](a, b):tolist(), want, n)
            lu.assertEquals(a[n](a, b):tolist(), want, n)
            lu.assertEquals(f(a, b):tolist(), want, n)
            lu.assertEquals(wb[n](a, 2):tolist(), wb[n](a, wb.full({3}, 2)):tolist(), n)
            lu.assertEquals(wb[n](6, b):tolist(), wb[n](wb.full({3}, 6), b):tolist(), n)
        else
            for i = 1, 3 do want[i] = op.operator and f(av[i]) or wb[n](a):tolist()[i] end
            lu.assertEquals(wb[n](a):tolist(), want, n)
            lu.assertEquals(a[n](a):tolist(), want, n)
            lu.assertEquals(f(a):tolist(), want, n)
        end
    end
end

function test_function_and_method_are_one_value()
    local x = wb.tensor({0.5, -1, 3})
    for _, op in ipairs(activations()) do
        lu.assertEquals(type(wb[op.name]), "function", op.name)
        lu.assertIs(wb.Tensor.__methods[op.name], wb[op.name], op.name)
        lu.assertEquals(x[op.name](x):tolist(), wb[op.name](x):tolist(), op.name)
    end
end

function test_help_entries_and_topics()
    local topics = captured()
    for _, op in ipairs(activations()) do
        local n = op.name
        local entry = string.format("wb.%s(x) -> %s; also x:%s()", n, op.formula, n)
        lu.assertEquals(captured("wb." .. n), entry)
        lu.assertEquals(captured(wb[n]), entry) -- by value: the method is the same function
        lu.assertEquals(captured(n), string.format("t:%s() -> wb.%s(t)", n, n))
        lu.assertStrContains(topics, "wb." .. n .. " ")
    end
    -- the five that were written out by hand read as before
    lu.assertEquals(captured("wb.relu"), "wb.relu(x) -> max(x, 0) (NaN stays NaN); also x:relu()")
    lu.assertStrContains(topics, "            wb.silu wb.sigmoid wb.relu wb.tanh wb.exp ")
end

-- Each activation, called as a function and as a method between two other ops, is traced and
-- joins one generated kernel, whose f32 results equal eager's bit for bit (the same vecmath).
function test_compile_traces_and_generates_each()
    local a, b = wb.rand({3, 17}), wb.rand({3, 17})
    for _, op in ipairs(activations()) do
        local n = op.name
        local fn = function(u, v) return wb[n](u * v) + u[n](u) end
        local want = fn(a, b)
        local f = wb.compile(fn)
        local got = f(a, b)
        local ex = f:explain()
        lu.assertStrContains(ex, string.format("group wb_poi_fused_mul_%s_%s_add_0", n, n), ex)
        lu.assertEquals(wb.max_abs_diff(got, want), 0, n)
        local src = require("wb.codegen").OPS[n]("t1")
        lu.assertEquals(src, (op.expr_c:gsub("%f[%w_]x%f[^%w_]", "t1")))
    end
end

-- The CUDA C of a group holding each activation uses the list's CUDA expression (eager cuda has
-- no activation kernels, so no trace reaches it on a device: the text is what can be checked).
function test_cuda_source_uses_the_list()
    local codegen = require("wb.codegen")
    local a = wb.randn({2, 3})
    for _, op in ipairs(activations()) do
        local t1, t2 = wb.empty({2, 3}), wb.empty({2, 3})
        local g = {symbol = "wb_poi_fused_" .. op.name .. "_neg_0", ops = op.name .. " neg", inputs = {a},
            dtype = "f32", inner_broadcast = {},
            nodes = {{op = op.name, args = {a}, out = t1}, {op = "neg", args = {t1}, out = t2}}}
        local src = codegen.cuda_source(g)
        local want = op.expr_cuda:gsub("%f[%w_]x%f[^%w_]", "v0")
        lu.assertStrContains(src, "const float t1 = " .. want .. "; /* " .. op.name .. " */")
        lu.assertStrContains(codegen.source(g), "vf t1 = " .. op.expr_c:gsub("%f[%w_]x%f[^%w_]", "v0") .. ";")
    end
end

function test_bad_arguments()
    for _, op in ipairs(activations()) do
        local n = op.name
        local ok, err = pcall(wb[n])
        lu.assertFalse(ok)
        lu.assertEquals(err, n .. ": bad argument #1: expected a tensor, got no value")
        ok, err = pcall(wb[n], "x")
        lu.assertEquals(err, n .. ": bad argument #1: expected a tensor, got string")
        local x = wb.ones({2})
        x:release()
        ok, err = pcall(wb[n], x)
        lu.assertEquals(err, n .. ": attempt to use a released tensor (argument #1)")
    end
end

-- The arithmetic ops' help, derived from the list, reads as the hand-written entries did.
function test_arithmetic_help()
    local topics = captured()
    lu.assertStrContains(topics, "  ops       a+b a-b a*b a/b ")
    lu.assertStrContains(topics, " -a  wb.matmul ")
    for _, op in ipairs(arithmetic()) do
        local n = op.name
        local args = op.arity == 2 and "(a, b)" or "(a)"
        lu.assertStrContains(captured("wb." .. n), string.format("wb.%s%s -> %s", n, args, op.formula))
        lu.assertEquals(captured(wb[n]), captured("wb." .. n), n) -- by value: wb.<name> first
        lu.assertStrContains(captured(n), string.format("t:%s(%s) -> %s", n, op.arity == 2 and "b" or "", op.method))
        if not op.operator then lu.assertStrContains(topics, " wb." .. n .. " ") end
    end
    lu.assertEquals(captured("wb.add"), "wb.add(a, b) -> a + b with NumPy broadcasting (numbers allowed); also a + b")
    lu.assertEquals(captured("wb.sub"), "wb.sub(a, b) -> a - b with broadcasting; also a - b")
    lu.assertEquals(captured("wb.mul"), "wb.mul(a, b) -> a * b elementwise with broadcasting; also a * b")
    lu.assertEquals(captured("wb.div"), "wb.div(a, b) -> a / b elementwise with broadcasting; also a / b")
    lu.assertEquals(captured("wb.neg"), "wb.neg(a) -> -a")
    lu.assertEquals(captured("add"), "t:add(b) -> t + b (broadcasting; b a tensor or a number)")
    lu.assertEquals(captured("div"), "t:div(b) -> t / b elementwise (broadcasting)")
    lu.assertEquals(captured("neg"), "t:neg() -> -t")
end

-- Each arithmetic op, called as a function, a method and an operator (and a binary one with a
-- number), is traced into one generated kernel whose f32 results equal eager's bit for bit; its
-- C and CUDA C are the list's expressions with the operands put in.
function test_arithmetic_compiles_and_generates()
    local codegen = require("wb.codegen")
    local a, b = wb.rand({3, 17}), wb.rand({3, 17}) + 0.5
    for _, op in ipairs(arithmetic()) do
        local n, fn, group = op.name
        if op.arity == 2 then
            local infix = operator(op)
            fn = function(u, v) return infix(u[n](wb[n](u, v), v), 2) end
            group = string.format("wb_poi_fused_%s_%s_%s_0", n, n, n)
            local want = op.expr_c:gsub("%f[%w_]a%f[^%w_]", "t1"):gsub("%f[%w_]b%f[^%w_]", "v0")
            lu.assertEquals(codegen.OPS[n]("t1", "v0"), want)
        else
            -- (the operator on an input: Lua passes __unm its operand twice, and the trace counts
            -- both uses, so an operator on an intermediate ends a group)
            local prefix = operator(op)
            fn = function(u, v)
                local y = wb[n](prefix(u))
                return y[n](y) * v
            end
            group = string.format("wb_poi_fused_%s_%s_%s_mul_0", n, n, n)
            lu.assertEquals(codegen.OPS[n]("t1"), (op.expr_c:gsub("%f[%w_]x%f[^%w_]", "t1")))
        end
        local want = fn(a, b)
        local f = wb.compile(fn)
        local got = f(a, b)
        local ex = f:explain()
        lu.assertStrContains(ex, "group " .. group, ex)
        lu.assertEquals(wb.max_abs_diff(got, want), 0, n)
        lu.assertEquals(wb.max_abs_diff(f(b, a), fn(b, a)), 0, n)
    end
    -- the four and neg generate what they generated when they were written out in Lua
    lu.assertEquals(codegen.OPS.add("t1", "v0"), "v_add(t1, v0)")
    lu.assertEquals(codegen.OPS.div("v_set1(0x1p+1f)", "t2"), "v_div(v_set1(0x1p+1f), t2)")
    lu.assertEquals(codegen.OPS.neg("t1"), "v_mul(t1, v_set1(-1.0f))")
    local t1, t2 = wb.empty({2, 3}), wb.empty({2, 3})
    local g = {symbol = "wb_poi_fused_div_neg_0", ops = "div neg", inputs = {a, b}, dtype = "f32", inner_broadcast = {},
        nodes = {{op = "div", args = {a, b}, out = t1}, {op = "neg", args = {t1}, out = t2}}}
    local src = codegen.cuda_source(g)
    lu.assertStrContains(src, "const float t1 = (v0 / v1); /* div */")
    lu.assertStrContains(src, "const float t2 = (t1 * -1.0f); /* neg */")
end

function test_arithmetic_bad_arguments()
    for _, op in ipairs(arithmetic()) do
        local n = op.name
        local ok, err = pcall(wb[n])
        lu.assertFalse(ok)
        if op.arity == 2 then
            lu.assertEquals(err, n .. ": operand 1 must be a tensor or a number, got nil")
            ok, err = pcall(wb[n], wb.ones({2}), "x")
            lu.assertEquals(err, n .. ": operand 2 must be a tensor or a number, got string")
            ok, err = pcall(wb[n], wb.ones({2}), wb.ones({3}))
            lu.assertStrContains(err, n .. ": shapes {2} and {3} do not broadcast")
        else
            lu.assertEquals(err, n .. ": bad argument #1: expected a tensor, got no value")
        end
    end
end

os.exit(lu.LuaUnit.run())
