-- test_activations.lua: silu, sigmoid, relu, tanh, exp, softplus, swiglu and the silu epilogues
-- (linear, swiglu_linear) against double-precision references in Lua: awkward sizes, strided
-- inputs, special values, the threaded path, bf16, generated code, and the kernel names the
-- profiler sees.
local lu = require("luaunit")
local B = require("bounds")

local ref = {
    silu = function(x) return x / (1 + math.exp(-x)) end,
    sigmoid = function(x) return 1 / (1 + math.exp(-x)) end,
    relu = function(x) return x ~= x and x or (x > 0 and x or 0) end,
    tanh = function(x) -- math.tanh is gone from Lua 5.4
        if x ~= x then return x end
        if math.abs(x) > 20 then return x > 0 and 1 or -1 end
        local e = math.exp(2 * x)
        return (e - 1) / (e + 1)
    end,
    exp = math.exp,
    softplus = B.ACT.softplus.f,
}

-- Relative error against the reference, with an absolute floor for results near 0.
local function check(name, got, want, tol, floor)
    for i = 1, #want do
        local g, w = got[i], want[i]
        if math.abs(w) > 3.4028235677973366e38 then w = w > 0 and math.huge or -math.huge end -- past f32's range
        if w ~= w then
            lu.assertTrue(g ~= g, string.format("%s[%d]: expected NaN, got %s", name, i, g))
        elseif w == math.huge or w == -math.huge then
            lu.assertEquals(g, w, string.format("%s[%d]", name, i))
        else
            local err = math.abs(g - w) / math.max(math.abs(w), floor or 1e-30)
            if err > tol then lu.fail(string.format("%s[%d]: got %.9g, expected %.9g (rel. error %.3g > %g)", name, i, g, w, err, tol)) end
        end
    end
end

local function values(n)
    local v = {}
    for i = 1, n do v[i] = (wb.rand({1}):item() - 0.5) * 24 end
    return v
end

function test_unary_against_double_reference_awkward_sizes()
    for _, n in ipairs{1, 3, 17, 31, 33, 129, 1000} do
        local v = values(n)
        local x = wb.tensor(v)
        local xs = x:tolist() -- the f32 values
        for name, f in pairs(ref) do
            local want = {}
            for i = 1, n do want[i] = f(xs[i]) end
            -- exp and sigmoid are a few ULP; silu and tanh as well (tanh's small branch is Cephes')
            check(name .. " n=" .. n, wb[name](x):tolist(), want, 2e-6, 1e-30)
            check(name .. " method", x[name](x):tolist(), want, 2e-6, 1e-30)
        end
    end
end

function test_special_values()
    local inf, nan = math.huge, 0 / 0
    local x = wb.tensor({-inf, inf, 0, -0.0, 1e-6, -1e-6, 88, 89, -90, -104, 0.625, -0.625, 9.5, -9.5})
    local xs = x:tolist()
    for name, f in pairs(ref) do
        local want = {}
        for i = 1, #xs do want[i] = f(xs[i]) end
        if name == "silu" then want[1] = nan end -- -inf * sigmoid(-inf) = -inf * 0
        check(name .. " special", wb[name](x):tolist(), want, 2e-6, 1e-36) -- subnormal results: absolute
    end
    lu.assertTrue(wb.silu(wb.tensor({nan})):item() ~= wb.silu(wb.tensor({nan})):item())
end

function test_strided_and_threaded()
    local x = wb.randn({300, 257}):t() -- strided, and above the threading threshold
    local xc = x:contiguous()
    for name in pairs(ref) do
        lu.assertEquals(wb.max_abs_diff(wb[name](x), wb[name](xc)), 0, name)
    end
    local g, u = wb.randn({513, 129}), wb.randn({513, 129})
    local want = g:silu() * u
    lu.assertTrue(wb.rel_error(wb.swiglu(g, u), want) < 1e-6)
    lu.assertTrue(wb.rel_error(wb.swiglu(g:t():contiguous():t(), u), want) < 1e-6)
end

function test_swiglu_shapes_and_dtypes()
    local ok, err = pcall(wb.swiglu, wb.randn({3, 4}), wb.randn({4, 3}))
    lu.assertFalse(ok)
    lu.assertStrContains(err, "swiglu")
    ok, err = pcall(wb.swiglu, wb.randn({3}), wb.randn({3}, {dtype = "bf16"}))
    lu.assertFalse(ok)
    lu.assertStrContains(err, "swiglu")
end

function test_bf16_rounds_the_f32_result_once()
    local x = wb.randn({37, 5})
    local xb = x:to{dtype = "bf16"}
    for name in pairs(ref) do
        local want = wb[name](xb:to{dtype = "f32"}):to{dtype = "bf16"}:to{dtype = "f32"}
        lu.assertEquals(wb.max_abs_diff(wb[name](xb):to{dtype = "f32"}, want), 0, name)
    end
    local ub = wb.randn({37, 5}, {dtype = "bf16"})
    local want = wb.swiglu(xb:to{dtype = "f32"}, ub:to{dtype = "f32"}):to{dtype = "bf16"}:to{dtype = "f32"}
    lu.assertEquals(wb.max_abs_diff(wb.swiglu(xb, ub):to{dtype = "f32"}, want), 0)
end

function test_silu_epilogue_of_linear_and_the_dual_gemm()
    for _, s in ipairs{{1, 17, 33}, {5, 31, 129}, {33, 64, 3}} do
        local m, k, n = s[1], s[2], s[3]
        local x, w, wu, b = wb.randn({m, k}), wb.randn({n, k}), wb.randn({n, k}), wb.randn({n})
        local y = wb.linear(x, w, b, {activation = "silu"})
        lu.assertTrue(wb.rel_error(y, wb.silu(wb.linear(x, w, b))) < 1e-5)
        local d = wb.swiglu_linear(x, w, wu)
        lu.assertTrue(wb.rel_error(d, wb.swiglu(wb.linear(x, w), wb.linear(x, wu))) < 1e-5)
        local db = wb.swiglu_linear(x, w, wu, b, b)
        lu.assertTrue(wb.rel_error(db, wb.swiglu(wb.linear(x, w, b), wb.linear(x, wu, b))) < 1e-5)
    end
end

-- softplus eager (f32, bf16) and in a generated kernel within the forward error bound of its
-- computation (bounds.lua: 4 ULP of its own, slope below 1), over [-40, 40] where both branches,
-- the subnormal-free tail (exp(x) alone below -16.7) and x + tiny above 16 are all exercised.
function test_softplus_within_its_forward_error_bound()
    local x, y = wb.rand({9, 131}) * 80 - 40, wb.randn({9, 131})
    B.assert_within_bound(wb.softplus(x), B.act("softplus", B.input(x)), "softplus f32")
    local xb = x:to{dtype = "bf16"}
    B.assert_within_bound(xb:softplus(), B.round(B.act("softplus", B.input(xb)), "bf16"), "softplus bf16")
    local fn = function(a, b) return wb.softplus(a * b) + a end
    for _, dtype in ipairs({"f32", "bf16"}) do
        local a, b = x:to{dtype = dtype}, y:to{dtype = dtype}
        local o = dtype == "bf16" and {u = B.UBF16} or nil
        -- the eager program's bound (every op rounded): the generated kernel rounds less
        local s = B.act("softplus", B.mul(B.input(a), B.input(b), o))
        local z = B.add(dtype == "bf16" and B.round(s, "bf16") or s, B.input(a), o)
        local f = wb.compile(fn)
        local got = f(a, b)
        lu.assertStrContains(f:explain(), "group wb_poi_fused_mul_softplus_add_0")
        B.assert_within_bound(fn(a, b), z, "softplus eager chain " .. dtype)
        B.assert_within_bound(got, z, "softplus generated " .. dtype)
    end
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    wb.softplus(x)
    wb.softplus(xb)
    p:stop()
    local names = {}
    for _, e in ipairs(p:events()) do if e.cat == "kernel" then names[#names + 1] = e.name end end
    lu.assertStrMatches(names[1], "wb_softplus_.*")
    lu.assertStrMatches(names[2], "wb_softplus_bf16_.*")
end

function test_kernel_names_spell_the_epilogue()
    local x, w = wb.randn({4, 8}), wb.randn({16, 8})
    local p = wb.profiler.profile({activities = {"cpu", "device"}})
    p:start()
    wb.linear(x, w, {activation = "silu"})
    wb.swiglu_linear(x, w, w)
    wb.silu(x)
    wb.swiglu(x, x)
    p:stop()
    local names = {}
    for _, e in ipairs(p:events()) do if e.cat == "kernel" then names[#names + 1] = e.name end end
    lu.assertStrMatches(names[1], "wb_sgemm_.*_silu")
    lu.assertStrMatches(names[2], "wb_dual_sgemm_.*_swiglu")
    lu.assertStrMatches(names[3], "wb_silu_.*")
    lu.assertStrMatches(names[4], "wb_swiglu_.*")
    local ok, err = pcall(wb.linear, x, w, {activation = "swiglu"})
    lu.assertFalse(ok)
    lu.assertStrContains(err, "silu")
end

os.exit(lu.LuaUnit.run())
