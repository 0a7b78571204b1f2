-- wb.nn: modules.
--
--   local lin = wb.nn.Linear(32, 64, {bias = true})   -- weight [64, 32], bias [64]
--   local y = lin(x)                                  -- wb.linear(x, lin.weight, lin.bias)
--   local mlp = wb.nn.GeGLUMLP(768, 3072, {impl = "dual"})
--   local z = mlp(x)                                  -- down(gelu_tanh(gate(x)) * up(x))

local M = {}

local Linear = {}
Linear.__index = Linear
Linear.__name = "wb.nn.Linear"

local LINEAR_OPTS = {bias = true, dtype = true, device = true}

local function check_size(v, what)
    if math.type(v) ~= "integer" or v < 1 then
        error(string.format("nn.Linear: %s must be a positive integer, got %s", what, tostring(v)), 3)
    end
end

-- PyTorch's initialisation: weight and bias uniform in [-1/sqrt(in), 1/sqrt(in)], drawn in f32
-- on the cpu and then moved and rounded, so a seed gives the same weights on every device and
-- dtype (a bf16 module is the f32 one rounded once).
function M.Linear(in_features, out_features, opts)
    check_size(in_features, "in_features")
    check_size(out_features, "out_features")
    opts = opts or {}
    if type(opts) ~= "table" then error("nn.Linear: options must be a table", 2) end
    for k in pairs(opts) do
        if not LINEAR_OPTS[k] then
            error(string.format("nn.Linear: unknown option '%s' (expected bias, dtype, device)", tostring(k)), 2)
        end
    end
    local host = {dtype = "f32", device = "cpu"}
    local target = {dtype = opts.dtype or "f32", device = opts.device or wb.default_device()}
    local bound = 1 / math.sqrt(in_features)
    local self = setmetatable({in_features = in_features, out_features = out_features}, Linear)
    self.weight = ((wb.rand({out_features, in_features}, host) * 2 - 1) * bound):to(target)
    if opts.bias ~= false then self.bias = ((wb.rand({out_features}, host) * 2 - 1) * bound):to(target) end
    return self
end

function Linear:__call(x)
    if type(x) ~= "userdata" then error("nn.Linear: input must be a tensor, got " .. type(x), 2) end
    local shape = x.shape
    if shape[#shape] ~= self.in_features then
        error(string.format("%s: input has %s features, expected %d", tostring(self), tostring(shape[#shape]),
            self.in_features), 2)
    end
    return wb.linear(x, self.weight, self.bias)
end

function Linear:parameters()
    return self.bias and {self.weight, self.bias} or {self.weight}
end

function Linear:to(opts)
    self.weight = self.weight:to(opts)
    if self.bias then self.bias = self.bias:to(opts) end
    return self
end

function Linear:__tostring()
    return string.format("Linear(in_features=%d, out_features=%d, bias=%s)", self.in_features, self.out_features,
        tostring(self.bias ~= nil))
end

-- ---- GeGLUMLP, SwiGLUMLP ---------------------------------------------------------------------

-- down_proj(act(gate_proj(x)) * up_proj(x)): GeGLU (act = gelu_tanh, as in a transformer's
-- GeGLU feed-forward layer) or SwiGLU (act = silu, Llama's MLP). Three implementations of the same
-- function, to compare:
--   eager: linear, linear, act, mul, linear       (5 kernels; the [tokens, hidden] activation
--                                                  and the gate/up products travel through memory)
--   fused: linear, linear, geglu|swiglu, linear   (4 kernels: act and mul in one pass)
--   dual:  geglu_linear|swiglu_linear, linear     (2 kernels: gate and up never reach memory)
--   fused_mlp: geglu_mlp|swiglu_mlp               (1 kernel on the cpu: nor does the hidden
--                                                  activation; on cuda the dual's 2 kernels);
--                                                  the down bias only: refused with bias = true
local IMPLS = {eager = true, fused = true, dual = true, fused_mlp = true}
local MLP_OPTS = {impl = true, bias = true, dtype = true, device = true}

-- What differs between the two gated MLPs: the activation, the fused kernel, the dual GEMM.
local GATES = {
    GeGLUMLP = {act = function(g) return wb.gelu(g, {approximate = "tanh"}) end, fused = "geglu", dual = "geglu_linear",
        mlp = "geglu_mlp"},
    SwiGLUMLP = {act = function(g) return wb.silu(g) end, fused = "swiglu", dual = "swiglu_linear", mlp = "swiglu_mlp"},
}

local function gated_mlp(name)
    local gate = GATES[name]
    local class = {__name = "wb.nn." .. name}
    class.__index = class

    local function check_impl(impl, level)
        if not IMPLS[impl] then
            error(string.format("%s: unknown impl '%s' (expected eager, fused, dual or fused_mlp)", name, tostring(impl)),
                level + 1)
        end
    end

    -- the one-kernel MLP adds the down projection's bias only
    local function check_fused_mlp(self, level)
        if self.impl == "fused_mlp" and (self.gate_proj.bias or self.up_proj.bias) then
            error(string.format("%s: impl fused_mlp takes no gate or up bias (build it with bias = false, or use impl " ..
                "dual)", name), level + 1)
        end
    end

    M[name] = function(dim, hidden, opts)
        if math.type(dim) ~= "integer" or dim < 1 then error(name .. ": dim must be a positive integer", 2) end
        if math.type(hidden) ~= "integer" or hidden < 1 then error(name .. ": hidden must be a positive integer", 2) end
        opts = opts or {}
        if type(opts) ~= "table" then error(name .. ": options must be a table", 2) end
        for k in pairs(opts) do
            if not MLP_OPTS[k] then
                error(string.format("%s: unknown option '%s' (expected impl, bias, dtype, device)", name, tostring(k)), 2)
            end
        end
        local impl = opts.impl or "eager"
        check_impl(impl, 2)
        local lin_opts = {bias = opts.bias == true, dtype = opts.dtype, device = opts.device}
        local self = setmetatable({dim = dim, hidden = hidden, impl = impl, gate_proj = M.Linear(dim, hidden, lin_opts),
            up_proj = M.Linear(dim, hidden, lin_opts), down_proj = M.Linear(hidden, dim, lin_opts)}, class)
        check_fused_mlp(self, 2)
        return self
    end

    function class:__call(x)
        if type(x) ~= "userdata" then error(name .. ": input must be a tensor, got " .. type(x), 2) end
        local shape = x.shape
        if shape[#shape] ~= self.dim then
            error(string.format("%s: input has %s features, expected %d", tostring(self), tostring(shape[#shape]), self.dim), 2)
        end
        check_impl(self.impl, 2)
        local g, u = self.gate_proj, self.up_proj
        if self.impl == "fused_mlp" then
            check_fused_mlp(self, 2)
            local d = self.down_proj
            return wb[gate.mlp](x, g.weight, u.weight, d.weight, d.bias)
        end
        local h
        if self.impl == "dual" then
            h = wb[gate.dual](x, g.weight, u.weight, g.bias, u.bias)
        else
            local gx, ux = g(x), u(x) -- gate then up: the order the kernels appear in a trace
            if self.impl == "fused" then
                h = wb[gate.fused](gx, ux)
            else
                h = gate.act(gx) * ux
            end
        end
        return self.down_proj(h)
    end

    function class:parameters()
        local out = {}
        for _, m in ipairs({self.gate_proj, self.up_proj, self.down_proj}) do
            for _, p in ipairs(m:parameters()) do out[#out + 1] = p end
        end
        return out
    end

    function class:to(opts)
        self.gate_proj:to(opts)
        self.up_proj:to(opts)
        self.down_proj:to(opts)
        return self
    end

    function class:__tostring()
        return string.format("%s(dim=%d, hidden=%d, impl=%s, bias=%s)", name, self.dim, self.hidden, self.impl,
            tostring(self.gate_proj.bias ~= nil))
    end
end

gated_mlp("GeGLUMLP")
gated_mlp("SwiGLUMLP")

return M
