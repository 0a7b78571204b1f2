-- wb.nn: modules. Linear for now (the GeGLU MLP comes with the MLP sweep).
--
--   local lin = wb.nn.Linear(32, 64, {bias = true})   -- weight [64, 32], bias [64]
--   local y = lin(x)                                  -- wb.linear(x, lin.weight, lin.bias)

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

-- PyTorch's initialisation: weight and bias uniform in [-1/sqrt(in), 1/sqrt(in)].
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
    local t = {dtype = opts.dtype, device = opts.device}
    local bound = 1 / math.sqrt(in_features)
    local self = setmetatable({in_features = in_features, out_features = out_features}, Linear)
    self.weight = (wb.rand({out_features, in_features}, t) * 2 - 1) * bound
    if opts.bias ~= false then self.bias = (wb.rand({out_features}, t) * 2 - 1) * bound end
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

return M
