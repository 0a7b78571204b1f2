-- random_dags.lua: the random elementwise programs the code generation tests compile and run
-- eagerly (test_codegen.lua on the cpu, test_codegen_cuda.lua on the cuda device).
--
--   local dags = require("random_dags")
--   local shapes, prog = dags.case(rng, {rows = 40, cols = 70, max_ops = 8, binary_share = 0.5,
--                                        unary = {...}, binary = {...}})
--   local y = dags.run(prog, #shapes, apply, x1, x2, ...)
--
-- A program is 2..max_ops ops over 1-4 inputs; each op takes earlier values (inputs, results of
-- earlier ops, or a number now and then); the inputs have broadcastable shapes (dims of 1 here
-- and there, fewer dims), the first one the full [rows, cols].
local M = {}

function M.case(rng, o)
    local rows, cols = rng(1, o.rows), rng(1, o.cols)
    local ninputs, nops = rng(1, 4), rng(2, o.max_ops)
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

return M
