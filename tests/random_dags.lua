-- random_dags.lua: the random elementwise programs the code generation tests compile and run
-- eagerly (test_codegen.lua on the cpu, test_codegen_cuda.lua on the cuda device).
--
--   local dags = require("random_dags")
--   local shapes, prog = dags.case(rng, {rows = 40, cols = 70, max_ops = 8, binary_share = 0.5,
--                                        unary = {...}, binary = {...}})
--   local y = dags.run(prog, #shapes, apply, x1, x2, ...)
--
-- A program is 2..max_ops ops over 1-4 inputs (or max_inputs); each op takes earlier values (inputs, results of
-- earlier ops, or a number now and then); the inputs have broadcastable shapes (dims of 1 here
-- and there, fewer dims), the first one the full [rows, cols].
local M = {}

-- The ops a program draws from, and how the cpu tests run each one (apply below).
M.UNARY = {"neg", "silu", "sigmoid", "relu", "tanh", "exp", "gelu", "gelu_tanh"}
M.BINARY = {"add", "sub", "mul", "div"}

-- The cpu tests' apply: exp(x) as exp(tanh(x)) (away from overflow), a / b as a / exp(tanh(b))
-- (a denominator away from 0), a / number as a / (1 + |number|).
function M.apply(op, a, b)
    if op == "gelu" then return wb.gelu(a) end
    if op == "gelu_tanh" then return wb.gelu(a, {approximate = "tanh"}) end
    if op == "div" and type(b) == "number" then return wb.div(a, 1 + math.abs(b)) end
    if op == "div" then return wb.div(a, wb.exp(wb.tanh(b))) end
    if op == "exp" then return wb.exp(wb.tanh(a)) end
    if b ~= nil then return wb[op](a, b) end
    return wb[op](a)
end

-- o.max_inputs: the most inputs a program draws (default 4)
function M.case(rng, o)
    local rows, cols = rng(1, o.rows), rng(1, o.cols)
    local ninputs, nops = rng(1, o.max_inputs or 4), rng(2, o.max_ops)
    local shapes = {}
    for i = 1, ninputs do
        local r = rng() < 0.25 and 1 or rows
        local c = rng() < 0.25 and 1 or cols
        shapes[i] = rng() < 0.2 and {c} or {r, c}
    end
    shapes[1] = {rows, cols}
    local prog = {}
    for k = 1, nops do
        local binary = rng() < o.binary_share
        local op = binary and o.binary[rng(1, #o.binary)] or o.unary[rng(1, #o.unary)]
        local a = rng(1, ninputs + k - 1)
        local b = binary and (rng() < 0.15 and (rng() * 4 - 2) or rng(1, ninputs + k - 1)) or nil
        prog[k] = {op = op, a = a, b = b}
    end
    return shapes, prog
end

-- Runs a program on its inputs with apply(op, a, b); returns the last op's value.
function M.run(prog, ninputs, apply, ...)
    local v = {...}
    for k, p in ipairs(prog) do
        local b = p.b
        if math.type(b) == "integer" then b = v[b] end
        v[ninputs + k] = apply(p.op, v[p.a], b)
    end
    return v[#v]
end

-- The exact value of a program (the ops as test_codegen's apply runs them: exp(x) as
-- exp(tanh(x)), a / b as a / exp(tanh(b)) or a / (1 + |b|) for a number) on inputs broadcast to
-- the first one's shape, with the forward error bound of an eager run (every op rounds to its
-- dtype; a generated kernel rounds less, so it is within the same bound), as a bounds value.
local B = require("bounds")

local function map(z, f)
    local v, e = {}, {}
    for i = 1, #z.v do
        v[i], e[i] = {}, {}
        for j = 1, #z.v[i] do v[i][j], e[i][j] = f(z.v[i][j], z.e[i][j]) end
    end
    return {v = v, e = e, why = z.why}
end

local function map2(a, b, f)
    local v, e = {}, {}
    for i = 1, #a.v do
        v[i], e[i] = {}, {}
        for j = 1, #a.v[i] do v[i][j], e[i][j] = f(a.v[i][j], a.e[i][j], b.v[i][j], b.e[i][j]) end
    end
    return {v = v, e = e, why = a.why}
end

-- what one op adds: its result rounded to the dtype (u) after f32 math of `ulps` ULPs
local function stored(v, carried, u, ulps)
    local own = (ulps or 0) * B.ULP32 * (math.abs(v) + carried) + (ulps or 0) * B.TINY * B.ULP32
    return carried + own + u * (math.abs(v) + carried + own)
end

local function unary(op, z, u, device)
    if op == "neg" then return map(z, function(v, e) return -v, e end) end
    if op == "relu" then return map(z, function(v, e) return v > 0 and v or 0, e end) end
    if op == "exp" then -- exp(tanh(x)): exp's error is relative to its result
        local t = unary("tanh", z, u, device)
        return map(t, function(v, e)
            local y = math.exp(v)
            return y, stored(y, y * (math.exp(e) - 1), u, 4)
        end)
    end
    local a = assert(B.ACT[op], op)
    local abs_x = device and (op == "gelu" or op == "gelu_tanh") and B.DEVICE_GELU_ABS_X or 0
    return map(z, function(v, e)
        local y = a.f(v)
        return y, stored(y, (a.carry and a.carry(v, e) or a.lip * e) + abs_x * B.ULP32 * (math.abs(v) + e), u, a.ulps)
    end)
end

local function binary(op, x, y, u, scalar, device, div_square)
    if scalar then -- a number, stored in the op's dtype
        local c = y
        local ec = u * math.abs(c)
        if op == "div" then
            local d = 1 + math.abs(c)
            return map(x, function(v, e)
                local q = v / d
                return q, stored(q, (e + math.abs(q) * ec) / (d - ec), u)
            end)
        end
        y = map(x, function() return c, ec end)
    end
    if op == "div" then -- x / exp(tanh(y)) (at least 1/e), or x / (y * y + 1) (at least 1)
        local d = div_square and map(y, function(v, e)
            local sq = v * v
            local esq = stored(sq, 2 * math.abs(v) * e + e * e, u)
            return sq + 1, stored(sq + 1, esq, u)
        end) or unary("exp", y, u, device)
        return map2(x, d, function(a, ea, b, eb)
            local q = a / b
            if eb >= b then return q, math.huge end -- the error could reach 0 in the denominator: no bound
            return q, stored(q, (ea + math.abs(q) * eb) / (b - eb), u)
        end)
    end
    return map2(x, y, function(a, ea, b, eb)
        if op == "add" then return a + b, stored(a + b, ea + eb, u) end
        if op == "sub" then return a - b, stored(a - b, ea + eb, u) end
        assert(op == "mul", op)
        return a * b, stored(a * b, math.abs(a) * eb + math.abs(b) * ea + ea * eb, u)
    end)
end

-- inputs: the tensors the program ran on (shapes broadcastable to the first's); opts.device:
-- the GELUs as a CUDA device computes them (bounds.lua's DEVICE_GELU_ABS_X); opts.div_square:
-- a / b runs as a / (b * b + 1) (test_codegen_cuda's programs)
function M.bound(prog, inputs, opts)
    local device, div_square = opts and opts.device, opts and opts.div_square
    local full = inputs[1].shape
    local u = inputs[1].dtype == "bf16" and B.UBF16 or B.U32
    local v = {}
    for i, t in ipairs(inputs) do v[i] = B.input(t:to{device = "cpu"}:expand(full)) end
    local n = #inputs
    for k, p in ipairs(prog) do
        local b = p.b
        if math.type(b) == "integer" then b = v[b] end
        if b == nil then
            v[n + k] = unary(p.op, v[p.a], u, device)
        else
            v[n + k] = binary(p.op, v[p.a], b, u, type(b) == "number", device, div_square)
        end
    end
    local z = v[#v]
    z.why = function() return "the program's eager error bound" end
    local bounded, all = 0, 0
    for i = 1, #z.e do
        for j = 1, #z.e[i] do bounded, all = bounded + (z.e[i][j] < math.huge and 1 or 0), all + 1 end
    end
    z.bounded_share = bounded / all -- elements whose bound is finite (the rest are not checked)
    return z
end

return M
