-- test_op_list.lua: the activations are declared once (a list in C, read through wb._ops()) and
-- reach every place that used to name them by hand: wb.<name> and t:<name>() (one function),
-- help's entries and topic line, wb.compile's tracing (as functions and as methods) and the
-- generated kernels' C; bad arguments get the usual one-line errors.
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
    local ops, names = wb._ops(), {}
    lu.assertTrue(#ops >= 5)
    for i, op in ipairs(ops) do
        names[i] = op.name
        lu.assertEquals(op.kind, "unary")
        lu.assertEquals(op.arity, 1)
        lu.assertTrue(#op.formula > 0)
        -- the expressions are in x, which the generator replaces with the operand
        lu.assertStrMatches(op.expr_c, ".*%f[%w_]x%f[^%w_].*")
        lu.assertStrMatches(op.expr_cuda, ".*%f[%w_]x%f[^%w_].*")
    end
    lu.assertEquals({table.unpack(names, 1, 5)}, {"silu", "sigmoid", "relu", "tanh", "exp"})
end

function test_function_and_method_are_one_value()
    local x = wb.tensor({0.5, -1, 3})
    for _, op in ipairs(wb._ops()) do
        lu.assertEquals(type(wb[op.name]), "function", op.name)
        lu.assertIs(wb.Tensor.__methods[op.name], wb[op.name], op.name)
        lu.assertEquals(x[op.name](x):tolist(), wb[op.name](x):tolist(), op.name)
    end
end

function test_help_entries_and_topics()
    local topics = captured()
    for _, op in ipairs(wb._ops()) do
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
    for _, op in ipairs(wb._ops()) do
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
    for _, op in ipairs(wb._ops()) do
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
    for _, op in ipairs(wb._ops()) do
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

os.exit(lu.LuaUnit.run())
