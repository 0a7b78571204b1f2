-- bounds.lua: references in double precision that carry their forward error bound, for the
-- numeric tests. A result is checked against the bound of the computation that made it (the
-- standard forward error analysis, as in Higham's "Accuracy and Stability of Numerical
-- Algorithms", ch. 3), not against a tolerance scaled by its own magnitude: a dot product of
-- length k summed in f32 in any order (blocked, FMA or not) is within
--     gamma_k * sum_i |x_i * w_i|,   gamma_k = k u / (1 - k u),   u = 2^-24,
-- of the exact one, so a blocking that splits K differently still passes and a dropped K block
-- does not. Inputs rounded to bf16, outputs stored as bf16, and activations (their own ULP bound
-- from test_gemm.c's sweeps, plus their Lipschitz constant times the error of their input) add
-- their terms. A value here is {v = rows of doubles, e = rows of bounds, why = fn(i, j) -> text}.
local lu = require("luaunit")

local B = {}

B.U32 = 2 ^ -24 -- unit roundoff of f32 (round to nearest)
B.UBF16 = 2 ^ -8 -- of bf16 (8 significant bits)
B.ULP32 = 2 ^ -23 -- one ULP of a float in [1, 2), relative
B.TINY = 2 ^ -126 -- below it, ULPs are absolute (subnormals)

-- Each activation: its largest |f'| over the reals (how an input error grows) and the ULPs the
-- vectorised kernels stay within against a double reference (test_gemm.c checks 8 for the GELUs,
-- 4 for silu, sigmoid, tanh, exp and softplus). exp's derivative is itself: `relative` says so.
B.ACT = {
    none = {lip = 1, ulps = 0, f = function(x) return x end},
    gelu_tanh = {lip = 1.13, ulps = 8},
    gelu = {lip = 1.13, ulps = 8},
    silu = {lip = 1.1, ulps = 4, f = function(x) return x / (1 + math.exp(-x)) end},
    sigmoid = {lip = 0.25, ulps = 4, f = function(x) return 1 / (1 + math.exp(-x)) end},
    tanh = {lip = 1, ulps = 4, f = function(x) return (math.exp(2 * x) - 1) / (math.exp(2 * x) + 1) end},
    relu = {lip = 1, ulps = 0, f = function(x) return x > 0 and x or 0 end},
    softplus = {lip = 1, ulps = 4}, -- its slope is sigmoid's value, in (0, 1)
}

-- log1p(e) for e in [0, 1] to double precision: the series below 1e-5 (log(1 + e) would lose
-- the digits 1 + e drops), log(1 + e) above (it loses at most 1e-11 of the result there).
local function log1p(e)
    if e < 1e-5 then return e - e * e / 2 + e * e * e / 3 end
    return math.log(1 + e)
end
-- softplus(x) = log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), NaN stays NaN
B.ACT.softplus.f = function(x)
    if x ~= x then return x end
    if x > 0 then return x + log1p(math.exp(-x)) end
    return log1p(math.exp(x))
end

function B.gamma(k, u)
    u = u or B.U32
    return k * u / (1 - k * u)
end

function B.gelu_tanh(x)
    local y = math.sqrt(2 / math.pi) * (x + 0.044715 * x ^ 3)
    return x / (1 + math.exp(-2 * y))
end

-- erfc to ~1e-7 relative (Numerical Recipes' Chebyshev fit): far below the f32 bounds used here
local function erfc(x)
    local z = math.abs(x)
    local t = 1 / (1 + 0.5 * z)
    local r = t * math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
        t * (-0.82215223 + t * 0.17087277)))))))))
    return x >= 0 and r or 2 - r
end
function B.gelu(x) return 0.5 * x * erfc(-x / math.sqrt(2)) end
B.ACT.gelu_tanh.f, B.ACT.gelu.f = B.gelu_tanh, B.gelu
-- tanh and sigmoid flatten away from 0: their slope over [v - e, v + e] is largest at the point
-- nearest 0, and they cannot move by more than their range (2, 1)
local function nearest_zero(v, e) return (v - e <= 0 and v + e >= 0) and 0 or math.min(math.abs(v - e), math.abs(v + e)) end
B.ACT.tanh.carry = function(v, e)
    local t = B.ACT.tanh.f(nearest_zero(v, e))
    return math.min((1 - t * t) * e, 2)
end
B.ACT.sigmoid.carry = function(v, e)
    local s = B.ACT.sigmoid.f(nearest_zero(v, e))
    return math.min(s * (1 - s) * e, 1)
end
-- the fit's own error (1.2e-7 relative to erfc) over the f32 ULPs above: one more ULP for gelu
B.ACT.gelu.ulps = 9

-- rows of a tensor (any rank: the last dim is a row), as Lua doubles
local function rows_of(t)
    if t:dim() == 0 then return {{t:item()}} end
    local c = t:to{device = "cpu", dtype = "f32"}:contiguous()
    if c:dim() == 1 then return {c:tolist()} end
    return c:reshape({-1, c.shape[c:dim()]}):tolist()
end
B.rows = rows_of

local function zeros_like(v)
    local e = {}
    for i = 1, #v do
        local r = {}
        for j = 1, #v[i] do r[j] = 0 end
        e[i] = r
    end
    return e
end

-- An exact input: the tensor's values (already rounded to its dtype), no error yet.
function B.input(t)
    local v = rows_of(t)
    return {v = v, e = zeros_like(v), why = function() return "an input" end}
end

-- z rounded to a format (an op that stores bf16, or converts its f32 input to bf16 first):
-- |fl(x) - x| <= u |x|, so the bound grows by u (|v| + e).
function B.round(z, format)
    local u = format == "bf16" and B.UBF16 or B.U32
    local e = {}
    for i = 1, #z.v do
        e[i] = {}
        for j = 1, #z.v[i] do e[i][j] = z.e[i][j] + u * (math.abs(z.v[i][j]) + z.e[i][j]) end
    end
    return {v = z.v, e = e, why = function(i, j)
        return string.format("%s, then rounded to %s (u = %.3g)", z.why(i, j), format, u)
    end}
end

-- y = x w^T (+ b): x {m, k}, w {n, k}, b {n} or nil, all bounded values; accumulated in f32
-- (u, or opts.u). Error: gamma_{k+1} (|x| |w|^T + |b|) from the sums, plus the inputs' errors
-- carried through: e_x |w|^T + |x| e_w^T + e_x e_w^T + e_b.
function B.linear(x, w, b, opts)
    local u = opts and opts.u or B.U32
    local m, n, k = #x.v, #w.v, #x.v[1]
    local g = B.gamma(k + (b and 1 or 0), u)
    local v, e, mag, carried = {}, {}, {}, {}
    for i = 1, m do
        local xi, exi = x.v[i], x.e[i]
        local vr, er, mr, cr = {}, {}, {}, {}
        for j = 1, n do
            local wj, ewj = w.v[j], w.e[j]
            local s, a, c = 0, 0, 0
            for p = 1, k do
                local xv, wv = xi[p], wj[p]
                s = s + xv * wv
                a = a + math.abs(xv * wv)
                c = c + exi[p] * math.abs(wv) + math.abs(xv) * ewj[p] + exi[p] * ewj[p]
            end
            if b then
                s = s + b.v[1][j]
                a = a + math.abs(b.v[1][j])
                c = c + b.e[1][j]
            end
            vr[j], mr[j], cr[j] = s, a, c
            er[j] = g * (a + c) + c
        end
        v[i], e[i], mag[i], carried[i] = vr, er, mr, cr
    end
    return {v = v, e = e, why = function(i, j)
        return string.format("k = %d%s: gamma_k = %.3g times sum|x*w|%s = %.6g, plus %.3g carried from the inputs",
            k, b and " (+ bias)" or "", g, b and " + |b|" or "", mag[i][j], carried[i][j])
    end}
end

-- GELUs composed from the math library (a CUDA device's tanhf/erff, 2 ULP each): 0.5 x (1 +
-- tanh(...)) cancels where tanh is near -1, so their error is ULPs of |x|, not of the result:
-- B.DEVICE_GELU_ABS_X of them (the 2-ULP tanh times the 0.5 x in front, with room for rounding).
B.DEVICE_GELU_ABS_X = 4

-- act(z): the activation's ULPs at the result plus its Lipschitz constant times z's error;
-- opts.device: a GELU computed as CUDA devices do (see B.DEVICE_GELU_ABS_X).
function B.act(name, z, opts)
    local abs_x = opts and opts.device and (name == "gelu" or name == "gelu_tanh") and B.DEVICE_GELU_ABS_X or 0
    local a = assert(B.ACT[name], "bounds.act: unknown activation " .. tostring(name))
    local v, e = {}, {}
    for i = 1, #z.v do
        v[i], e[i] = {}, {}
        for j = 1, #z.v[i] do
            local y = a.f(z.v[i][j])
            local carried = a.carry and a.carry(z.v[i][j], z.e[i][j]) or a.lip * z.e[i][j]
            v[i][j] = y
            e[i][j] = carried + a.ulps * B.ULP32 * (math.abs(y) + carried) + a.ulps * B.TINY * B.ULP32 +
                abs_x * B.ULP32 * (math.abs(z.v[i][j]) + z.e[i][j])
        end
    end
    return {v = v, e = e, why = function(i, j)
        return string.format("%s(%s) with |%s'| <= %g and %d ULP of its own", name, z.why(i, j), name, a.lip, a.ulps)
    end}
end

-- a * b elementwise (same shapes), rounded once: |a| e_b + |b| e_a + e_a e_b + u |result|.
function B.mul(a, b, opts)
    local u = opts and opts.u or B.U32
    local v, e = {}, {}
    for i = 1, #a.v do
        v[i], e[i] = {}, {}
        for j = 1, #a.v[i] do
            local av, bv, ea, eb = a.v[i][j], b.v[i][j], a.e[i][j], b.e[i][j]
            local carried = math.abs(av) * eb + math.abs(bv) * ea + ea * eb
            v[i][j] = av * bv
            e[i][j] = carried + u * (math.abs(av * bv) + carried)
        end
    end
    return {v = v, e = e, why = function(i, j)
        return string.format("(%s) * (%s)", a.why(i, j), b.why(i, j))
    end}
end

-- a - b elementwise, rounded once.
function B.sub(a, b, opts)
    local nb = {v = {}, e = b.e, why = b.why}
    for i = 1, #b.v do
        nb.v[i] = {}
        for j = 1, #b.v[i] do nb.v[i][j] = -b.v[i][j] end
    end
    return B.add(a, nb, opts)
end

-- a + b elementwise, rounded once.
function B.add(a, b, opts)
    local u = opts and opts.u or B.U32
    local v, e = {}, {}
    for i = 1, #a.v do
        v[i], e[i] = {}, {}
        for j = 1, #a.v[i] do
            local s, carried = a.v[i][j] + b.v[i][j], a.e[i][j] + b.e[i][j]
            v[i][j] = s
            e[i][j] = carried + u * (math.abs(s) + carried)
        end
    end
    return {v = v, e = e, why = function(i, j) return string.format("(%s) + (%s)", a.why(i, j), b.why(i, j)) end}
end

-- A wb.nn GeGLU or SwiGLU MLP's forward on x (tensors), the exact value and its bound:
-- down(act(gate(x)) * up(x)), act gelu_tanh (GeGLU) or silu (SwiGLU), biases where the module
-- has them. With opts.bf16 every op stores bf16 (an eager bf16 forward: the most roundings of
-- the three impls, so its bound holds for the fused and dual ones too); opts.inputs_rounded: x
-- and the weights are f32 values that the computation rounds to bf16 first (a bf16 model made
-- from an f32 one), so those roundings count too.
function B.mlp(m, x, opts)
    opts = opts or {}
    local act = opts.act or (tostring(m):find("^SwiGLU") and "silu" or "gelu_tanh")
    local function load(t)
        if not t then return nil end
        local z = B.input(t)
        return opts.inputs_rounded and B.round(z, "bf16") or z
    end
    local store = function(z) return opts.bf16 and B.round(z, "bf16") or z end
    local xz = load(x)
    local g = store(B.linear(xz, load(m.gate_proj.weight), load(m.gate_proj.bias)))
    local u = store(B.linear(xz, load(m.up_proj.weight), load(m.up_proj.bias)))
    local h = store(B.mul(B.act(act, g, opts), u))
    return store(B.linear(h, load(m.down_proj.weight), load(m.down_proj.bias)))
end

B.U64 = 2 ^ -53 -- of f64

-- The CPU reductions' summation (kernels/cpu/include/wb_kernels/reduce.h): pairwise in f64 over
-- blocks of 256 elements, each summed by 4 interleaved accumulators added as a tree of depth 2,
-- so an element of a sum of n passes through at most h(n) f64 additions.
B.REDUCE_BLOCK, B.REDUCE_LANES = 256, 4
function B.reduce_depth(n)
    if n <= 1 then return 0 end
    local blocks = math.ceil(n / B.REDUCE_BLOCK)
    return math.ceil(math.min(n, B.REDUCE_BLOCK) / B.REDUCE_LANES) + 2 + math.ceil(math.log(blocks, 2) - 1e-9)
end

-- Neumaier's compensated sum of a list of doubles (the reference) and sum |x_i|: within
-- 2 u |s| + 4 n u^2 sum |x_i| (u = 2^-53) of the exact sum (Higham, 4.3), returned third.
local function compensated(list)
    local s, c, mag = 0, 0, 0
    for _, x in ipairs(list) do
        local t = s + x
        if math.abs(s) >= math.abs(x) then c = c + ((s - t) + x) else c = c + ((x - t) + s) end
        s, mag = t, mag + math.abs(x)
    end
    s = s + c
    return s, mag, 2 * B.U64 * math.abs(s) + 4 * #list * B.U64 * B.U64 * mag
end

-- The sums (or, with opts.mean, the means) of lists of exact values as the CPU reductions make
-- them, stored in opts.format ("f32" or "bf16", one rounding either way), one row: gamma_h(n)
-- (f64) * sum |x| from the tree, the division of a mean (one f64 rounding), the store's
-- rounding, and the reference's own error.
function B.reduce_sum(lists, opts)
    opts = opts or {}
    local v, e, why = {}, {}, {}
    for k, list in ipairs(lists) do
        local n = #list
        local s, mag, ref = compensated(list)
        local h = B.reduce_depth(n)
        local err = B.gamma(h, B.U64) * mag
        if opts.mean then
            s, mag, err, ref = s / n, mag / n, err / n, ref / n
            err = err + B.U64 * (math.abs(s) + err)
        end
        err = err + (opts.format == "bf16" and B.UBF16 or B.U32) * (math.abs(s) + err)
        v[k], e[k] = s, err + ref
        why[k] = string.format("n = %d, h = %d: gamma_h = %.3g (f64) times sum|x| = %.6g, then stored as %s", n, h,
            B.gamma(h, B.U64), mag, opts.format or "f32")
    end
    return {v = {v}, e = {e}, why = function(_, j) return why[j] end}
end

-- Two results of computations bounded by z1 and z2 differ by at most the sum of the bounds.
function B.both(z1, z2)
    local e = {}
    for i = 1, #z1.v do
        e[i] = {}
        for j = 1, #z1.v[i] do e[i][j] = z1.e[i][j] + z2.e[i][j] end
    end
    return {v = z1.v, e = e, why = function(i, j)
        return string.format("the sum of two bounds: [%s] and [%s]", z1.why(i, j), z2.why(i, j))
    end}
end

-- The first element of got (a tensor or rows) outside z's bound: i, j, got, want, bound; nil
-- when every element is within (a NaN never is).
function B.first_outside(got, z)
    local g = type(got) == "table" and got or rows_of(got)
    if #g ~= #z.v then return 0, 0, #g, #z.v, 0 end
    for i = 1, #z.v do
        if #g[i] ~= #z.v[i] then return i, 0, #g[i], #z.v[i], 0 end
        for j = 1, #z.v[i] do
            local d = math.abs(g[i][j] - z.v[i][j])
            if not (d <= z.e[i][j]) then return i, j, g[i][j], z.v[i][j], z.e[i][j] end
        end
    end
    return nil
end

-- Fails the test when an element of got is outside its bound, naming the element, the
-- difference and the bound's terms.
function B.assert_within_bound(got, z, what)
    local i, j, g, want, bound = B.first_outside(got, z)
    if not i then return end
    if j == 0 then lu.fail(string.format("%s: %d rows or columns, expected %d", what, g, want)) end
    lu.fail(string.format("%s: [%d][%d] = %.9g, expected %.9g: |difference| %.3g > bound %.3g (%s)", what, i, j, g,
        want, math.abs(g - want), bound, z.why(i, j)))
end

return B
