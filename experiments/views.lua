-- views.lua: the view lesson. t() is a view: it moves no data and launches no kernel; it only
-- swaps two sizes and two strides. Materialising the view (flatten, contiguous) is what copies.
--
--   workbench experiments/views.lua
--
-- Expectation, as in PyTorch: M = [[0,1],[2,3],[4,5]] has shape {3,2} and strides {2,1};
-- M:t() has shape {2,3}, strides {1,2} and the same data pointer; M:t():flatten() must copy and
-- gives 0,2,4,1,3,5 (the transposed order); contiguous() copies a non-contiguous tensor and
-- returns a view (same pointer) of one that already is.

local args = require("wb.args")
args.parse(args.parser("views.lua", "The view lesson: t() swaps two sizes and two strides and shares the data; " ..
    "materialising the view (flatten, contiguous) is what copies. No options."))

local function list(t)
    local parts = {}
    for i, v in ipairs(t) do parts[i] = string.format("%g", v) end
    return "{" .. table.concat(parts, ", ") .. "}"
end

local function row(name, x)
    print(string.format("%-22s shape=%-8s stride=%-8s offset=%d  data_ptr=0x%x  contiguous=%s", name,
        list(x.shape), list(x:stride()), x:storage_offset(), x:data_ptr(), tostring(x:is_contiguous())))
end

local function check(cond, what)
    if not cond then error("expectation failed: " .. what, 2) end
    print("  ok: " .. what)
end

print("== t() is a view ==")
local M = wb.arange(6):view{3, 2}
local T = M:t()
row("M = arange(6):view{3,2}", M)
row("M:t()", T)
print(M)
print(T)
check(list(M:stride()) == "{2, 1}", "M has strides {2, 1}")
check(list(T:stride()) == "{1, 2}", "M:t() has strides {1, 2}: two strides swapped, nothing moved")
check(T:data_ptr() == M:data_ptr(), "M:t() has the same data pointer as M")
check(not T:is_contiguous(), "M:t() is not contiguous")

print("\n== writes through the view are writes to M ==")
T:narrow(1, 1, 1):fill_(-1) -- first row of the view = first column of M
row("M after T[1,:] = -1", M)
print(M)
check(list(M:flatten():tolist()) == "{-1, 1, -1, 3, -1, 5}", "the view and M share storage")
M:copy_(wb.arange(6):view{3, 2})

print("\n== flatten materialises in the view's order ==")
local F = T:flatten()
row("M:t():flatten()", F)
print("values: " .. list(F:tolist()))
check(list(F:tolist()) == "{0, 2, 4, 1, 3, 5}", "flatten of the view gives 0,2,4,1,3,5 (transposed order)")
check(F:data_ptr() ~= M:data_ptr(), "flatten of a non-contiguous view had to copy (new data pointer)")
local FM = M:flatten()
check(FM:data_ptr() == M:data_ptr(), "flatten of the contiguous M is a view (same data pointer)")

print("\n== contiguous() copies only when it must ==")
local C = T:contiguous()
row("M:t():contiguous()", C)
check(C:data_ptr() ~= M:data_ptr() and C:is_contiguous(), "contiguous() of the view copies into a new buffer")
check(list(C:stride()) == "{3, 1}", "the copy has row-major strides {3, 1}")
check(M:contiguous():data_ptr() == M:data_ptr(), "contiguous() of a contiguous tensor is the same data")

print("\n== view() refuses what only a copy can do ==")
local ok, err = pcall(function() return T:view{6} end)
print("M:t():view{6} -> " .. tostring(err))
check(not ok, "view{6} of the transposed tensor is refused; reshape{6} copies instead")
check(list(T:reshape{6}:tolist()) == "{0, 2, 4, 1, 3, 5}", "reshape{6} gives the same values as flatten")

print("\nAll expectations held: t() moved no data; flatten/contiguous/reshape of the view copied.")
