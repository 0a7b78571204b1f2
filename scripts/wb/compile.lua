-- wb.compile(fn[, opts]): trace, fuse, capture, replay.
--
--   local fast = wb.compile(function(x) return mlp(x) end)
--   local y = fast(x)          -- first call per input signature: trace, fuse, capture
--   local y2 = fast(x2)        -- same signature: the replay reads x2 where it read x, no copy
--
-- Tracing runs fn eagerly while recording the ops it calls (linear, matmul, addmm, gelu, geglu,
-- geglu_linear, add, mul) and which tensors flow between them. Fusion rules rewrite that op
-- graph:
--   mul(gelu_tanh(a), b)                    -> geglu(a, b)              (one pointwise kernel;
--                                              with code generation on, only before a dual GEMM:
--                                              else wb.compile_generate decides, by bytes and time)
--   geglu(linear(x, Wg[, bg]), linear(x, Wu[, bu]))
--                                           -> geglu_linear(x, Wg, Wu[, bg, bu])  (dual GEMM)
--   linear(geglu_linear(x, Wg, Wu), Wd[, b]) -> geglu_mlp(x, Wg, Wu, Wd[, b])  (one kernel; where
--                                              wb.compile_mlp's cost model says it pays, and
--                                              explain says why or why not; swiglu alike)
--   add(matmul(x, W), b) / add(linear(x, W), b), b of shape [N]
--                                           -> addmm / linear with the bias in the epilogue
--   gelu(linear(x, W[, b]))                 -> linear(x, W[, b], {activation = ...})
--                                              (with code generation on, not when an elementwise
--                                              op reads it next: the GEMM's generated epilogue
--                                              takes it with what follows)
-- (an intermediate is fused away only when nothing else uses it). The rewritten plan is
-- captured with wb.graph.capture and replayed on later calls. Guards: the signature is the
-- shapes, dtypes and devices of the tensor arguments and the values of the others, and the
-- thread count where a cost model chose the plan by it (wb.compile_mlp); a new
-- signature is traced again, up to opts.max_signatures (8), then the call fails with a message.
-- A later call's tensor arguments are bound into the replayed launches (their data pointers
-- rewritten, no copy kernel) when they have the traced strides and are not buffers the graph
-- writes (a weight the GEMM prepacks too: its packing follows the bound tensor); otherwise (a
-- transposed view, an output passed back in, cuda) they are copied into the graph's private
-- input buffers, and explain says why.
-- Outputs are the graph's buffers, rewritten by the next call (clone() to keep one). The
-- profiler shows each call as a "compiled region" range.

local plural = require("wb.words").plural
local M = {}

local Compiled = {}
Compiled.__index = Compiled
Compiled.__name = "wb.compiled" -- help(f) finds its entry by this name

local generate = require("wb.compile_generate")
local codegen_word = require("wb.codegen").word
local mlp_cost = require("wb.compile_mlp")

-- The ops of the op lists (wb._ops(), declared once in C: add, ..., neg, silu, ...) are traced as
-- functions, methods and metamethods (__add, ..., __unm); binary ones take numbers (x * 2).
local LISTED, METAMETHODS, BINARY = {}, {}, {}
for i, op in ipairs(wb._ops()) do
    LISTED[i] = op.name
    if op.metamethod then METAMETHODS[op.metamethod] = op.name end
    if op.kind == "binary" then BINARY[op.name] = true end
end
local function with_listed(before, after)
    local names = table.move(LISTED, 1, #LISTED, #before + 1, table.move(before, 1, #before, 1, {}))
    return table.move(after, 1, #after, #names + 1, names)
end
local TRACED = with_listed({"linear", "matmul", "addmm", "gelu", "geglu", "geglu_linear"},
    {"swiglu", "swiglu_linear", "geglu_mlp", "swiglu_mlp"})
-- Tensor methods are traced too (x:silu() is wb.silu(x)); the views and copies among them are
-- recorded as nodes of their own, so a view of an input is taken again from the input on each
-- call instead of being frozen at trace time.
local METHODS = with_listed({}, {"t", "transpose", "permute", "view", "reshape", "flatten", "narrow", "select", "expand",
    "as_strided", "contiguous", "clone"})
-- The in-place methods: recorded as nodes that write their first argument's buffer (node.inplace),
-- replayed in order on the replay's tensor, so a later read of it (or of a view of it) sees the
-- written values. A write splits the plan into segments (node.seg): no fusion rule and no
-- generated group joins ops across one, so nothing is read later than the plan says. A write into
-- an argument (or a view of one) is refused: the replay writes the graph's private copy of it.
local INPLACE = {"fill_", "copy_"}

local function is_tensor(v) return type(v) == "userdata" and getmetatable(v) == wb.Tensor end

local function signature(args, n)
    local parts = {}
    for i = 1, n do
        local v = args[i]
        if is_tensor(v) then
            parts[i] = string.format("%s:%s:{%s}", v.dtype, v.device, table.concat(v.shape, ","))
        else
            parts[i] = type(v) .. ":" .. tostring(v)
        end
    end
    return table.concat(parts, " | ")
end

-- ---- tracing ----------------------------------------------------------------------------------

-- Runs fn(...) with the traced functions, tensor methods and metamethods recording into `nodes`.
-- Each node: {op =, args = {...}, out = tensor}; args keep tensors (identity) and plain values.
-- Returns the nodes, fn's results and the original functions by op name.
local function storage_base(t) return t:data_ptr() - t:storage_offset() * (t.dtype == "bf16" and 2 or 4) end

local function trace(fn, args, n)
    local nodes, seg = {}, 0
    local saved, mt, saved_mt, methods, saved_methods = {}, wb.Tensor, {}, wb.Tensor.__methods, {}
    local function recorder(name, orig)
        return function(...)
            -- an op's error (shapes that do not broadcast) names the caller's line, as eagerly
            local ok, out = pcall(orig, ...)
            if not ok then error(type(out) == "string" and out:gsub("^[^\n]-compile%.lua:%d+: ", "") or out, 2) end
            nodes[#nodes + 1] = {op = name, args = table.pack(...), out = out, seg = seg}
            return out
        end
    end
    local argument_of = {} -- storage base -> argument index
    for i = 1, n do
        if is_tensor(args[i]) then argument_of[storage_base(args[i])] = argument_of[storage_base(args[i])] or i end
    end
    local function inplace_recorder(name, orig)
        return function(dst, ...)
            local i = is_tensor(dst) and argument_of[storage_base(dst)]
            if i then
                error(string.format("wb.compile: in-place %s on an input is not supported (argument %d, or a view " ..
                    "of it, would be written; a compiled call writes the graph's own copy of its arguments, not " ..
                    "the caller's tensor): clone the argument inside the function, or call it eagerly", name, i), 2)
            end
            local out = orig(dst, ...)
            seg = seg + 1
            nodes[#nodes + 1] = {op = name, args = table.pack(dst, ...), out = out, seg = seg, inplace = true}
            seg = seg + 1
            return out
        end
    end
    for _, name in ipairs(TRACED) do
        saved[name] = wb[name]
        wb[name] = recorder(name, saved[name])
    end
    for mm, name in pairs(METAMETHODS) do
        saved_mt[mm] = mt[mm]
        mt[mm] = recorder(name, saved[name])
    end
    for _, name in ipairs(METHODS) do
        saved_methods[name] = methods[name]
        methods[name] = recorder(name, saved[name] or methods[name])
    end
    for _, name in ipairs(INPLACE) do
        saved_methods[name] = methods[name]
        methods[name] = inplace_recorder(name, methods[name])
    end
    local results = table.pack(pcall(fn, table.unpack(args, 1, n)))
    for _, name in ipairs(TRACED) do wb[name] = saved[name] end
    for mm in pairs(METAMETHODS) do mt[mm] = saved_mt[mm] end
    for _, name in ipairs(INPLACE) do
        methods[name] = saved_methods[name]
        saved[name] = saved_methods[name]
    end
    for _, name in ipairs(METHODS) do
        methods[name] = saved_methods[name]
        saved[name] = saved[name] or saved_methods[name]
    end
    if not results[1] then error(results[2], 0) end
    return nodes, table.pack(table.unpack(results, 2, results.n)), saved
end

-- ---- fusion -----------------------------------------------------------------------------------

local function uses_of(nodes, outputs)
    local uses = {}
    local function count(v)
        if is_tensor(v) then uses[v] = (uses[v] or 0) + 1 end
        if type(v) == "table" and v.of then count(v.of) end
    end
    for _, nd in ipairs(nodes) do
        if not nd.dead then
            for i = 1, nd.args.n do count(nd.args[i]) end
        end
    end
    for i = 1, outputs.n do count(outputs[i]) end
    return uses
end

-- tensor -> the node that made it (an in-place write returns its destination: not a producer)
local function producer_map(nodes)
    local by_out = {}
    for _, nd in ipairs(nodes) do
        if not nd.dead and not nd.inplace then by_out[nd.out] = nd end
    end
    return by_out
end

local function gelu_form(nd) -- "tanh" | "none" from a traced gelu call's options
    local o = nd.args[2]
    return type(o) == "table" and o.approximate or "none"
end

local function linear_parts(nd) -- x, w, b, opts of a traced linear call
    local a3 = nd.args[3]
    if is_tensor(a3) then return nd.args[1], nd.args[2], a3, nd.args[4] end
    return nd.args[1], nd.args[2], nil, a3
end

local function plain_linear(nd)
    if nd.op ~= "linear" then return false end
    local _, _, _, o = linear_parts(nd)
    return o == nil or o.activation == nil or o.activation == "none"
end

-- A weight seen transposed in the plan: W^T of a matmul's [K, N] operand, made at run time by a
-- t() view (no data moves, no kernel).
local Transposed = {}
local function transposed(w) return setmetatable({of = w}, Transposed) end

-- The rules, most valuable first: a later rule never blocks an earlier one (gelu goes into a
-- GeGLU before it would go into a GEMM epilogue). Each returns true when it rewrote something.
local rules = {}

-- Tries fn(nd, producer, other) on every live `op` node with two tensor operands, once with each
-- operand as the one a producer made (other: the remaining operand); true when fn rewrote.
local function each_binary(nodes, prod, op, fn)
    for _, nd in ipairs(nodes) do
        if not nd.dead and nd.op == op and is_tensor(nd.args[1]) and is_tensor(nd.args[2]) then
            for k = 1, 2 do
                local made = prod[nd.args[k]]
                if made and made.seg == nd.seg and fn(nd, made, nd.args[3 - k]) then return true end
            end
        end
    end
end

-- The gated activations: the activation's traced op (and form), the fused kernel, the dual GEMM.
local GATED = {geglu = {act = "gelu", form = "tanh", dual = "geglu_linear", mlp = "geglu_mlp"},
    swiglu = {act = "silu", dual = "swiglu_linear", mlp = "swiglu_mlp"}}

-- The two linears of a dual GEMM: plain, used once, in the segment `seg`, sharing their input.
local function dual_candidate(lg, lu, uses, seg)
    if not (lg and lu and lg ~= lu and plain_linear(lg) and plain_linear(lu) and uses[lg.out] == 1 and
        uses[lu.out] == 1 and lg.seg == seg and lu.seg == seg) then
        return false
    end
    return linear_parts(lg) == linear_parts(lu)
end

-- With code generation on (opts.defer_gated), gelu*mul stays two ops for the generator unless it
-- feeds a dual GEMM: the generator fuses it with its neighbours, or picks the hand-written
-- kernel by measuring where that covers the pair's whole group (wb.compile_generate).
rules[1] = function(nodes, uses, prod, applied, opts) -- mul(gelu_tanh(a), b) -> geglu(a, b); silu -> swiglu
    return each_binary(nodes, prod, "mul", function(nd, g, other)
        for fused, spec in pairs(GATED) do
            if g.op == spec.act and (not spec.form or gelu_form(g) == spec.form) and uses[g.out] == 1 and
                table.concat(g.args[1].shape, ",") == table.concat(other.shape, ",") and
                (not opts.defer_gated or dual_candidate(prod[g.args[1]], prod[other], uses, nd.seg)) then
                nd.op, nd.args, g.dead = fused, table.pack(g.args[1], other), true
                applied[#applied + 1] = spec.act .. "+mul -> " .. fused
                return true
            end
        end
    end)
end

rules[2] = function(nodes, uses, prod, applied) -- geglu(linear(x, Wg), linear(x, Wu)) -> dual GEMM
    for _, nd in ipairs(nodes) do
        if not nd.dead and GATED[nd.op] then
            local lg, lu = prod[nd.args[1]], prod[nd.args[2]]
            if dual_candidate(lg, lu, uses, nd.seg) then
                local xg, wg, bg = linear_parts(lg)
                local _, wu, bu = linear_parts(lu)
                local dual = GATED[nd.op].dual
                applied[#applied + 1] = "linear+linear+" .. nd.op .. " -> " .. dual
                nd.op, nd.args = dual, table.pack(xg, wg, wu, bg, bu)
                lg.dead, lu.dead = true, true
                return true
            end
        end
    end
end

rules[3] = function(nodes, uses, prod, applied) -- bias add after a GEMM -> epilogue
    return each_binary(nodes, prod, "add", function(nd, m, b)
        if uses[m.out] ~= 1 or b:dim() ~= 1 then return false end
        if m.op == "matmul" and m.args[1]:dim() == 2 and m.args[2]:dim() == 2 and b.shape[1] == m.args[2].shape[2] then
            nd.op, nd.args, m.dead = "addmm", table.pack(b, m.args[1], m.args[2]), true
            applied[#applied + 1] = "matmul+add -> addmm (bias in the epilogue)"
            return true
        elseif plain_linear(m) and select(3, linear_parts(m)) == nil and b.shape[1] == m.args[2].shape[1] then
            nd.op, nd.args, m.dead = "linear", table.pack(m.args[1], m.args[2], b), true
            applied[#applied + 1] = "linear+add -> linear with bias"
            return true
        end
    end)
end

-- With code generation on, an activation that an elementwise op reads next stays for the
-- generator, which puts the GEMM, the activation and what follows into one generated epilogue.
local function read_by_elementwise(nodes, nd)
    for _, c in ipairs(nodes) do
        if not c.dead and c.seg == nd.seg and codegen_word(c) then
            for i = 1, c.args.n do if c.args[i] == nd.out then return true end end
        end
    end
    return false
end

rules[4] = function(nodes, uses, prod, applied, opts) -- gelu(GEMM) or silu(GEMM) -> activation in the epilogue
    for _, nd in ipairs(nodes) do
        if not nd.dead and (nd.op == "gelu" or nd.op == "silu") and
            not (opts.defer_gated and uses[nd.out] == 1 and read_by_elementwise(nodes, nd)) then
            local l = prod[nd.args[1]]
            if l and uses[l.out] == 1 and l.seg == nd.seg then
                local act = nd.op == "silu" and "silu" or gelu_form(nd) == "tanh" and "gelu_tanh" or "gelu"
                local x, w, b
                if plain_linear(l) then
                    x, w, b = linear_parts(l)
                elseif (l.op == "addmm" or l.op == "matmul") and l.args[#l.args == 3 and 2 or 1]:dim() == 2 then
                    if l.op == "addmm" then b, x, w = l.args[1], l.args[2], transposed(l.args[3])
                    else x, w = l.args[1], transposed(l.args[2]) end
                    if b and b:dim() ~= 1 then x = nil end
                end
                if x then
                    applied[#applied + 1] = l.op .. "+" .. nd.op .. " -> linear with " .. act .. " epilogue"
                    nd.op = "linear"
                    nd.args = b and table.pack(x, w, b, {activation = act}) or table.pack(x, w, {activation = act})
                    l.dead = true
                    return true
                end
            end
        end
    end
end

-- linear(dual GEMM with no gate or up bias, Wd[, b]) -> the one-kernel MLP, where wb.compile_mlp's
-- cost model says it pays; where it does not, opts.notes says why (once per down linear). The
-- thread count the model's answer used goes to opts.depends.threads (the entry's guard).
rules[5] = function(nodes, uses, prod, applied, opts)
    for _, nd in ipairs(nodes) do
        local h, wd, b = linear_parts(nd)
        local d = plain_linear(nd) and not nd.dead and not opts.weighed[nd] and prod[h]
        local spec
        for _, s in pairs(GATED) do if d and d.op == s.dual then spec = s end end
        if spec and uses[d.out] == 1 and d.seg == nd.seg and d.args[4] == nil and d.args[5] == nil then
            local pays, why, threads = mlp_cost.pays(d.args[1], spec.mlp)
            opts.weighed[nd] = true
            if threads then opts.depends.threads = threads end
            if pays then
                applied[#applied + 1] = string.format("%s+linear -> %s (%s)", spec.dual, spec.mlp, why)
                nd.op, nd.args, d.dead = spec.mlp, table.pack(d.args[1], d.args[2], d.args[3], wd, b), true
                return true
            end
            opts.notes[#opts.notes + 1] = string.format("%s+linear kept, not %s: %s", spec.dual, spec.mlp, why)
        end
    end
end

-- Applies the rules until none fires; returns the names of the rewrites, in order.
local function fuse(nodes, outputs, opts)
    local applied = {}
    opts.notes, opts.weighed, opts.depends = opts.notes or {}, opts.weighed or {}, opts.depends or {}
    local again = true
    while again do
        again = false
        for _, rule in ipairs(rules) do
            if rule(nodes, uses_of(nodes, outputs), producer_map(nodes), applied, opts) then
                again = true
                break
            end
        end
    end
    return applied
end

-- ---- compiled callable --------------------------------------------------------------------------

function M.compile(fn, opts)
    if type(fn) ~= "function" then error("compile: expected a function, got " .. type(fn), 2) end
    opts = opts or {}
    for k in pairs(opts) do
        if k ~= "max_signatures" and k ~= "fuse" and k ~= "codegen" then
            error(string.format("compile: unknown option '%s' (expected max_signatures, fuse, codegen)", tostring(k)), 2)
        end
    end
    local max_sig = opts.max_signatures or 8
    if math.type(max_sig) ~= "integer" or max_sig < 1 then error("compile: max_signatures must be a positive integer", 2) end
    return setmetatable({fn = fn, entries = {}, order = {}, max_signatures = max_sig, fusion = opts.fuse ~= false,
        codegen = opts.codegen ~= false, kernels = {}, sources = {}, threaded = {}}, Compiled)
end

-- Builds the entry for one signature: trace on the caller's arguments, fuse, then capture the
-- fused plan on private copies of the tensor arguments (the graph's fixed input buffers).
function Compiled:_build(args, n)
    local nodes, outputs, originals = trace(self.fn, args, n)
    for i = 1, outputs.n do
        if not is_tensor(outputs[i]) then
            error(string.format("compile: result %d of the compiled function is a %s, expected tensors", i,
                type(outputs[i])), 3)
        end
    end
    local generating = self.codegen and not generate.blocked()
    local notes, weighed, depends = {}, {}, {}
    local applied = self.fusion and
        fuse(nodes, outputs, {defer_gated = generating, notes = notes, weighed = weighed, depends = depends}) or {}
    local statics, remap = {}, {}
    for i = 1, n do
        if is_tensor(args[i]) then
            statics[i] = args[i]:clone()
            remap[args[i]] = statics[i]
        end
    end
    local arg_of = {}
    for i = n, 1, -1 do if is_tensor(args[i]) then arg_of[args[i]] = i end end
    local function alive()
        local live = {}
        for _, nd in ipairs(nodes) do if not nd.dead then live[#live + 1] = nd end end
        return live
    end
    local live, generated, off = alive(), {}, nil
    if generating then live, generated, off = generate.generate(self, live, outputs, arg_of, originals) end
    if off and self.fusion then -- no generator after all: the pattern rules the generator deferred
        for _, f in ipairs(fuse(nodes, outputs, {notes = notes, weighed = weighed, depends = depends})) do
            applied[#applied + 1] = f
        end
        live = alive()
    end
    -- A number operand of a binary op is a 0-d tensor of the other operand's dtype and device;
    -- eagerly the binding fills a new one on every call (one kernel). The plan makes it once
    -- here, before the capture, so a call replays no fill for it.
    local constants = {}
    for _, nd in ipairs(live) do
        if BINARY[nd.op] and nd.args.n == 2 then
            local like = is_tensor(nd.args[1]) and nd.args[1] or is_tensor(nd.args[2]) and nd.args[2]
            for i = 1, 2 do
                if like and type(nd.args[i]) == "number" then
                    nd.args[i] = wb.full({}, nd.args[i], {dtype = like.dtype, device = like.device})
                    constants[#constants + 1] = nd.args[i]
                end
            end
        end
    end
    local function run_plan()
        local env = {}
        local function value(v)
            if is_tensor(v) then return env[v] or remap[v] or v end
            if getmetatable(v) == Transposed then return value(v.of):t() end
            return v
        end
        for _, nd in ipairs(live) do
            local a = {}
            for i = 1, nd.args.n do a[i] = value(nd.args[i]) end
            env[nd.out] = (originals[nd.op] or wb.codegen[nd.op])(table.unpack(a, 1, nd.args.n))
        end
        local out = {}
        for i = 1, outputs.n do out[i] = value(outputs[i]) end
        return table.unpack(out, 1, outputs.n)
    end
    local graph = wb.graph.capture(run_plan)
    -- the statics become the graph's inputs: later calls point the replay at the caller's tensors
    -- (no copy) where the graph allows it, and copy into the statics where it does not
    local inputs, copied = {}, {}
    for i = 1, n do
        if statics[i] then inputs[i], copied[i] = graph:input(statics[i]) end
    end
    local names = {}
    for _, nd in ipairs(live) do names[#names + 1] = nd.symbol or nd.op end
    -- a GEMM with a generated epilogue is named by the GEMM (wb_sgemm_..._epi_<ops>_<n>): source()
    -- finds the epilogue's C by that name too
    for _, k in ipairs(graph:nodes()) do
        local epi = k.name:match("_(epi_[%w_]+)$")
        if epi and self.sources["wb_" .. epi] then self.sources[k.name] = self.sources["wb_" .. epi] end
    end
    return {graph = graph, statics = statics, inputs = inputs, copied = copied, n = n, ops = names, fusions = applied,
        traced_ops = #nodes, generated = generated, constants = constants, notes = notes, threads = depends.threads}
end

-- The guard of the entry used last, checked without building the signature string: every tensor
-- argument binds into its graph (bind checks dtype, device, shape and strides: the signature and
-- more) and every other argument is the same value. True when the replay may run as it is.
local function same_call(e, n, ...)
    if e.n ~= n then return false end
    local graph, inputs, values, bind = e.graph, e.inputs, e.values, e.bind
    for i = 1, n do
        local v, slot = select(i, ...), inputs[i]
        if slot then
            if not (is_tensor(v) and bind(graph, slot, v)) then return false end
        elseif values[i] ~= v or math.type(values[i]) ~= math.type(v) then
            return false
        end
    end
    return true
end

-- An entry whose plan a cost model chose for the thread count of its trace (entry.threads) is
-- kept under its signature and that count: a call on another count traces again (a signature of
-- its own), as a call with new shapes does.
local function with_threads(sig, threads) return string.format("%s | threads:%d", sig, threads) end

-- The entry for these arguments (traced and captured on first sight), its inputs bound or copied.
function Compiled:_entry(n, ...)
    local args = table.pack(...)
    local base = signature(args, n)
    local sig = self.threaded[base] and with_threads(base, wb.get_num_threads()) or base
    local entry = self.entries[sig]
    if not entry then
        if #self.order >= self.max_signatures then
            error(string.format("compile: guard failure: the arguments (%s) match none of the %d compiled signatures, " ..
                "and the re-trace limit (max_signatures = %d) is reached; compiled: %s", sig, #self.order,
                self.max_signatures, table.concat(self.order, "; ")), 3)
        end
        entry = self:_build(args, n)
        if entry.threads and not self.threaded[base] then
            self.threaded[base] = true
            sig = with_threads(base, entry.threads)
        end
        entry.values, entry.bind, entry.replay = {}, entry.graph.bind, entry.graph.replay
        entry.run, entry.outputs, entry.tensors_only = entry.graph.run, entry.graph.outputs, true
        for i = 1, n do
            if not is_tensor(args[i]) then entry.values[i], entry.tensors_only = args[i], false end
        end
        self.entries[sig] = entry
        self.order[#self.order + 1] = sig
    else
        local graph = entry.graph
        for i = 1, n do
            local s = entry.statics[i]
            if s and not entry.bind(graph, entry.inputs[i], args[i]) then s:copy_(args[i]) end
        end
    end
    return entry
end

function Compiled:__call(...)
    local entry = self.last
    -- (the last entry only while the thread count its plan was chosen for holds)
    if entry and entry.threads and entry.threads ~= wb.get_num_threads() then entry = nil end
    -- the common case, all arguments tensors of the last signature: guard, binding, the profiler
    -- range and the replay in one C call
    if not (entry and entry.tensors_only and entry.run(entry.graph, "compiled region", ...)) then
        local n = select("#", ...)
        if not (entry and not entry.tensors_only and same_call(entry, n, ...)) then
            entry = self:_entry(n, ...)
            self.last = entry
        end
        wb.profiler.push("compiled region")
        local ok, err = pcall(entry.replay, entry.graph)
        wb.profiler.pop()
        if not ok then error(err, 2) end
    end
    local out = entry.outputs
    return table.unpack(out, 1, #out)
end

-- What was compiled: per signature, the ops of the fused plan, the rules applied, and the
-- fusion groups (generated kernel names, or why a group runs eagerly).
function Compiled:explain()
    local out = {}
    if not self.codegen then
        out[#out + 1] = "code generation: off (compile option codegen = false)"
    else
        generate.explain_off(out)
    end
    for _, sig in ipairs(self.order) do
        local e = self.entries[sig]
        out[#out + 1] = string.format("[%s] %s traced -> %s: %s%s", sig, plural(e.traced_ops, "op"),
            plural(#e.graph:nodes(), "kernel"), table.concat(e.ops, ", "),
            #e.fusions > 0 and ("; fused: " .. table.concat(e.fusions, "; ")) or "")
        local kernels = {}
        for _, k in ipairs(e.graph:nodes()) do kernels[#kernels + 1] = k.name end
        out[#out + 1] = "  kernels: " .. table.concat(kernels, ", ")
        for _, note in ipairs(e.notes) do out[#out + 1] = "  " .. note end
        for i = 1, e.n do
            if e.copied[i] then out[#out + 1] = string.format("  input %d is copied on each call: %s", i, e.copied[i]) end
        end
        for _, g in ipairs(e.generated) do generate.describe(g, out) end
    end
    return table.concat(out, "\n")
end

-- The source of a generated kernel, by name (as explain and the profiler show it): C on the cpu,
-- CUDA C on cuda.
function Compiled:source(name)
    local src = self.sources[name]
    if not src then
        local names = {}
        for k in pairs(self.sources) do names[#names + 1] = k end
        table.sort(names)
        error(string.format("compile: no generated kernel named '%s' (generated: %s)", tostring(name),
            #names > 0 and table.concat(names, ", ") or "none"), 2)
    end
    return src
end

function Compiled:signatures() return #self.order end

return M.compile
