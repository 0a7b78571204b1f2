-- test_bounds.lua: the forward error bounds the numeric tests use (tests/bounds.lua) still catch
-- real errors: an output moved by twice its bound fails, by half of it passes; a GEMM missing
-- one K block fails every case (plain, bias, activation, dual; several depths and blockings);
-- and the failure message names the element and the bound's terms.
local lu = require("luaunit")
local B = require("bounds")

-- the first element's bound, and the tensor with that element moved by factor times it
local function moved(y, z, factor)
    local r = B.rows(y)
    r[1][1] = r[1][1] + factor * z.e[1][1]
    return r
end

local function fails(fn)
    local ok, err = pcall(fn)
    return not ok, tostring(err)
end

TestBound = {}

function TestBound:test_twice_the_bound_fails_half_passes()
    wb.manual_seed(41)
    local x, w, b = wb.randn({6, 300}), wb.randn({20, 300}), wb.randn({20})
    local cases = {
        {"linear", wb.linear(x, w, b), B.linear(B.input(x), B.input(w), B.input(b))},
        {"linear gelu", wb.linear(x, w, b, {activation = "gelu"}),
            B.act("gelu", B.linear(B.input(x), B.input(w), B.input(b)))},
        {"geglu_linear", wb.geglu_linear(x, w, w * 0.5),
            B.mul(B.act("gelu_tanh", B.linear(B.input(x), B.input(w))), B.linear(B.input(x), B.input(w * 0.5)))},
    }
    for _, c in ipairs(cases) do
        local what, y, z = c[1], c[2], c[3]
        B.assert_within_bound(y, z, what) -- as computed
        for _, f in ipairs({2, -2}) do
            local failed, msg = fails(function() B.assert_within_bound(moved(y, z, f), z, what) end)
            lu.assertTrue(failed, what .. ": moved by " .. f .. " times its bound, and still within it")
            lu.assertStrContains(msg, what .. ": [1][1] = ")
            lu.assertStrContains(msg, "> bound")
            lu.assertStrContains(msg, "k = 300")
        end
        for _, f in ipairs({0.5, -0.5}) do
            B.assert_within_bound(moved(y, z, f), z, what .. " moved by " .. f .. " times its bound")
        end
    end
end

-- What a kernel that skipped depths [kc, 2 kc) would return: x with those columns zeroed.
local function without_block(x, kc)
    local k = x.shape[2]
    local dropped = x:clone()
    dropped:narrow(2, kc + 1, math.min(kc, k - kc)):fill_(0)
    return dropped
end

function TestBound:test_a_dropped_k_block_fails_every_case()
    wb.manual_seed(42)
    local blockings = {"40,24,64", "448,144,4096"}
    local caught, cases = 0, 0
    for _, blocking in ipairs(blockings) do
        wb.set_cpu_blocking(blocking)
        local kc = wb.cpu_blocking().kc
        for _, k in ipairs({kc + 7, 2 * kc + 65, 3 * kc}) do
            for _, m in ipairs({1, 17}) do
                local x, w, wu, b = wb.randn({m, k}), wb.randn({33, k}), wb.randn({33, k}), wb.randn({33})
                local X, W, WU, BB = B.input(x), B.input(w), B.input(wu), B.input(b)
                local xd = without_block(x, kc)
                local runs = {
                    {"plain", wb.linear(xd, w), B.linear(X, W)},
                    {"bias", wb.linear(xd, w, b), B.linear(X, W, BB)},
                    {"gelu", wb.linear(xd, w, b, {activation = "gelu_tanh"}), B.act("gelu_tanh", B.linear(X, W, BB))},
                    {"dual", wb.geglu_linear(xd, w, wu), B.mul(B.act("gelu_tanh", B.linear(X, W)), B.linear(X, WU))},
                }
                for _, r in ipairs(runs) do
                    cases = cases + 1
                    if B.first_outside(r[2], r[3]) then
                        caught = caught + 1
                    else
                        print(string.format("not caught: %s, blocking %s, m %d, k %d", r[1], blocking, m, k))
                    end
                end
                -- and the same GEMMs with every block: within (the bound is not just large)
                B.assert_within_bound(wb.geglu_linear(x, w, wu), runs[4][3], "dual with every block")
            end
        end
    end
    wb.set_cpu_blocking(nil)
    lu.assertEquals(caught, cases, string.format("a dropped K block caught in %d of %d cases", caught, cases))
    print(string.format("\na dropped K block caught in %d of %d cases", caught, cases))
end

function TestBound:test_bad_blocking_refused_with_its_reason()
    local function raises(frag, arg) lu.assertErrorMsgContains(frag, function() wb.set_cpu_blocking(arg) end) end
    raises("set_cpu_blocking: mc must be a multiple of 12 rows", "40,25,64")
    raises("set_cpu_blocking: nc must be a multiple of 32 columns", {kc = 40, mc = 24, nc = 65})
    raises("set_cpu_blocking: kc must be in [1, 8192] steps of k, got -3", {kc = -3, mc = 24, nc = 64})
    raises("set_cpu_blocking: '0' is not a positive integer", "0,24,64")
    raises("set_cpu_blocking: give kc, mc and nc, or l1, l2 and l3_share", {kc = 40, l2 = 1024})
    raises("set_cpu_blocking: L2 must be 64 KiB to", {l1 = 32768, l2 = 1000, l3_share = 1 << 24})
    raises("set_cpu_blocking: kc must be an integer, got string", {kc = "40", mc = 24, nc = 64})
    raises("set_cpu_blocking: expected a string, a table or nil, got number", 40)
    -- a refused value leaves the blocking as it was
    local before = wb.cpu_blocking()
    pcall(wb.set_cpu_blocking, "1,2,3")
    lu.assertEquals(wb.cpu_blocking(), before)
end

os.exit(lu.LuaUnit.run())
