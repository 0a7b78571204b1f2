-- wb.compile's code generation step: replaces the fusion groups of a fused plan by generated
-- kernels, says what each group moves and why it was cut where it was, and picks between a
-- generated kernel and a hand-written one (geglu, swiglu) for a group both cover, by measuring.
--
-- Partitioning by cost: a group reads each input once and writes its output once, so the bytes
-- a plan moves are the sum over its kernels of their inputs and outputs. A group grows over every
-- elementwise producer whose result nothing else reads (codegen.groups); a cut is where a value
-- must reach memory anyway (an argument, a result of the function, a value read twice, the result
-- of an op that is not elementwise, an in-place write). A hand-written pointwise kernel never
-- splits a group (that would write and read again the values at its edges); where it covers a
-- whole group, the faster of it and the generated kernel runs, timed on the traced inputs (the
-- choice kept for the process, and on disk for later ones: wb.compile_choices).

local plural = require("wb.words").plural
local codegen = require("wb.codegen")
local disk = require("wb.compile_choices")

local G = {device_off = {}, choices = {}}

local function is_tensor(v) return type(v) == "userdata" and getmetatable(v) == wb.Tensor end
local function bytes(t) return t:numel() * (t.dtype == "bf16" and 2 or 4) end
local function shape_of(t) return table.concat(t.shape, "x") end

function G.size(b)
    if b >= 1048576 then return string.format("%.1f MiB", b / 1048576) end
    if b >= 1024 then return string.format("%.1f KiB", b / 1024) end
    return string.format("%d B", b)
end

-- Why code generation cannot run in this process, or nil (checked once).
function G.blocked()
    if G.off ~= nil then return G.off or nil end
    if wb.sandboxed then -- (and wb.codegen.build refuses in C under --sandbox, whatever a script sets)
        G.off = "--sandbox: no compiler runs and no shared objects load"
    elseif not wb.codegen then
        G.off = "this build has no code generator"
    end
    if G.off then io.stderr:write("wb.compile: code generation is off: ", G.off, "; the pattern rules still apply\n") end
    G.off = G.off or false
    return G.off or nil
end

-- Why a device cannot compile kernels now, or nil: asked once per device; the first answer is
-- said once on stderr and in every explain.
local function device_blocked(device)
    if device == "cpu" then return nil end
    if G.device_off[device] == nil then
        local ok, why = wb.codegen.compiler(device)
        G.device_off[device] = not ok and why or false
        if not ok then
            io.stderr:write("wb.compile: code generation on ", device, " is off: ", why, "; its groups run eagerly\n")
        end
    end
    return G.device_off[device] or nil
end

-- Where the group was cut: why each input is read from memory, and why its output is written.
local function cuts(g, by_out, live, uses, outputs, arg_of)
    local parts = {}
    for i, t in ipairs(g.inputs) do
        local p, why = by_out[t], nil
        if arg_of[t] then why = "argument " .. arg_of[t]
        elseif not p then why = "a tensor from outside the function"
        elseif not codegen.word(p) then why = p.op .. "'s result, not elementwise"
        elseif p.seg ~= g.root.seg then why = p.op .. "'s result, before an in-place write"
        elseif g.limited and g.limited[t] then
            why = string.format("%s's result: with it the kernel would take more than %d inputs", p.op, wb.codegen.max_inputs)
        else why = p.op .. "'s result, read by " .. plural(uses[t], "op") end
        parts[#parts + 1] = string.format("in%d %s", i, why)
    end
    local readers, result = {}, false
    for _, nd in ipairs(live) do
        for i = 1, nd.args.n do if nd.args[i] == g.root.out then readers[#readers + 1] = nd.op end end
    end
    for i = 1, outputs.n do result = result or outputs[i] == g.root.out end
    local out = {}
    if result then out[#out + 1] = "a result of the function" end
    if #readers > 1 then out[#out + 1] = "read by " .. plural(#readers, "op") .. " (" .. table.concat(readers, ", ") .. ")"
    elseif #readers == 1 and g.out_limited then
        out[#out + 1] = string.format("read by %s, in the next kernel: together they would take more than %d inputs",
            readers[1], wb.codegen.max_inputs)
    elseif #readers == 1 then out[#out + 1] = "read by " .. readers[1] .. ", not elementwise" end
    parts[#parts + 1] = "out " .. table.concat(out, "; ")
    return table.concat(parts, "; ")
end

-- The hand-written kernel an activation node and the mul of its result stand for.
local GATED = {gelu_tanh = "geglu", silu = "swiglu"}
local function gated(act, mul)
    local fused = GATED[codegen.word(act) or ""]
    if not fused or mul.op ~= "mul" or not is_tensor(mul.args[1]) or not is_tensor(mul.args[2]) then return nil end
    local other = mul.args[1] == act.out and mul.args[2] or mul.args[2] == act.out and mul.args[1] or nil
    if not other or other == act.out or shape_of(other) ~= shape_of(act.args[1]) or
        shape_of(mul.out) ~= shape_of(other) then
        return nil
    end
    return {fused = fused, a = act.args[1], b = other, act = act, mul = mul}
end

-- The pair when the group is exactly activation + mul; else, when it holds such a pair, a note
-- on what the hand-written kernel would cost: each operand made inside the group and its result
-- read inside it would be written and read again.
local function gated_in(g, uses)
    if #g.nodes == 2 then
        local pair = gated(g.nodes[1], g.nodes[2])
        if pair then return pair end
    end
    local inside = {}
    for _, nd in ipairs(g.nodes) do inside[nd.out] = nd end
    for _, mul in ipairs(g.nodes) do
        for k = 1, 2 do
            local act = inside[mul.args[k]]
            local pair = act and uses[act.out] == 1 and gated(act, mul)
            if pair then
                local extra = 0
                for _, t in ipairs({pair.a, pair.b, mul.out}) do
                    if inside[t] and t ~= g.root.out then extra = extra + 2 * bytes(t) end
                end
                return nil, string.format("holds %s*mul: not the hand-written %s, which would split the group " ..
                    "(at least %s more to write and read again)", codegen.word(act), pair.fused, G.size(extra))
            end
        end
    end
end

-- The GEMM whose result the group reads, when the group can be its epilogue: a linear (plain,
-- bias or not), matmul or addmm of 2-D operands, f32 on the cpu, whose result only this group
-- reads, at the group's output shape. Returns {node, acc, x, w (as [N, K]), wt (true: w is a
-- [K, N] operand, the plan takes its t() view), bias} or nil, why (for explain).
local function gemm_of(g, by_out, uses)
    for _, t in ipairs(g.inputs) do
        local p = by_out[t]
        if p and (p.op == "linear" or p.op == "matmul" or p.op == "addmm") then
            local e
            if p.op == "linear" then
                local b, o = p.args[3], p.args[4]
                if not is_tensor(b) then b, o = nil, b end
                if not (type(o) == "table" and o.activation and o.activation ~= "none") then
                    e = {x = p.args[1], w = p.args[2], bias = b}
                end
            elseif p.op == "matmul" and p.args[1]:dim() == 2 and p.args[2]:dim() == 2 then
                e = {x = p.args[1], w = p.args[2], wt = true}
            elseif p.op == "addmm" and p.args[1]:dim() == 1 then
                e = {x = p.args[2], w = p.args[3], wt = true, bias = p.args[1]}
            end
            if e then
                e.node, e.acc = p, t
                local why
                if uses[t] ~= 1 then why = "its result is read by " .. plural(uses[t], "op")
                elseif p.seg ~= g.root.seg then why = "an in-place write comes between"
                elseif t.device ~= "cpu" then
                    why = "epilogues are generated for the cpu (on " .. t.device .. " the GEMM is the library's)"
                elseif t.dtype ~= "f32" then
                    why = "epilogues are generated for f32 on the cpu (not yet " .. t.dtype .. ": its GEMM driver has " ..
                        "no epilogue hook), so the group is a kernel of its own"
                elseif shape_of(t) ~= shape_of(g.root.out) then why = "the group's output is broadcast past its result"
                elseif #g.inputs - 1 + (e.bias and 1 or 0) > 3 then
                    why = plural(#g.inputs - 1 + (e.bias and 1 or 0), "epilogue input") .. " (a GEMM epilogue takes at most 3)"
                end
                if not why then return e end
                return nil, "not in " .. p.op .. "'s epilogue: " .. why
            end
        end
    end
end

-- Builds group g as the epilogue of GEMM e: one kernel, the GEMM driver calling the generated
-- function on each block of the output. Returns the kernel, or nil and why.
local function build_epilogue(self, g, e, words)
    local eg = {nodes = g.nodes, acc = e.acc, inputs = {}, inner_broadcast = {}, dtype = "f32",
        ops = e.node.op .. " " .. g.ops}
    for _, t in ipairs(g.inputs) do if t ~= e.acc then eg.inputs[#eg.inputs + 1] = t end end
    local last = e.acc.shape[#e.acc.shape] or 1
    for i, t in ipairs(eg.inputs) do eg.inner_broadcast[i] = last > 1 and (t:dim() == 0 or t.shape[t:dim()] == 1) end
    -- the bias stays in the GEMM's own store (a vector add per register, as the unfused GEMM
    -- does); the op takes it after the epilogue's inputs
    eg.gemm_bias = e.bias ~= nil
    local short = {}
    for i = 1, math.min(#words, 4) do short[i] = words[i] == "gelu_tanh" and "gelu" or words[i] end
    eg.symbol = "wb_epi_" .. table.concat(short, "_") .. "_" .. (self.kernel_count or 0)
    local src = codegen.epilogue_source(eg)
    local k = self.kernels[src]
    local compiled, reason
    if not k then
        k, compiled, reason = wb.codegen.build{symbol = eg.symbol, source = src, ops = eg.ops, dtype = "f32",
            inputs = #eg.inputs, inner_broadcast = eg.inner_broadcast, epilogue = true, bias = eg.gemm_bias}
    end
    if not k then return nil, compiled, reason end
    self.kernels[src] = k
    self.kernel_count = (self.kernel_count or 0) + 1
    g.symbol, g.ops, g.epilogue_of, g.gemm_bias = wb.codegen.name(k), eg.ops, e.node.op, eg.gemm_bias
    g.inputs = eg.inputs
    if e.bias then g.inputs[#g.inputs + 1] = e.bias end
    self.sources[g.symbol] = src
    return k
end

-- Median time per call (us) of each contender, timed in ROUNDS alternating rounds of `reps` calls.
local ROUNDS = 7
local function measure(fns, device)
    local t0 = wb.time_ns()
    fns[1]()
    wb.synchronize(device)
    local once = math.max(wb.time_ns() - t0, 1000)
    local reps = math.max(1, math.min(1000, math.ceil(1e6 / once)))
    for _, f in ipairs(fns) do f() end -- warm
    local samples = {}
    for i = 1, #fns do samples[i] = {} end
    for r = 1, ROUNDS do
        for i, f in ipairs(fns) do
            wb.synchronize(device)
            local s = wb.time_ns()
            for _ = 1, reps do f() end
            wb.synchronize(device)
            samples[i][r] = (wb.time_ns() - s) / reps / 1e3
        end
    end
    local med = {}
    for i = 1, #fns do
        table.sort(samples[i])
        med[i] = samples[i][(ROUNDS + 1) // 2]
    end
    return med, reps
end

-- Generated kernel k or the hand-written pair.fused for a group both cover: the faster, measured
-- on the traced inputs, cached per (kernel, dtype, device, shape, threads) for the process and on
-- disk for this machine and build (a choice an earlier process measured is not timed again).
local function choose(pair, k, out, originals)
    local a, b = pair.a, pair.b
    local key = table.concat({pair.fused, a.dtype, a.device, shape_of(a), wb.get_num_threads()}, ":")
    local c = G.choices[key] or disk.get(key)
    if not c then
        local hand = originals[pair.fused]
        local wait0, t0 = disk.wait_ns(), wb.time_ns()
        local med, reps = measure({function() return wb.codegen.run(k, out.shape, a, b) end,
            function() return hand(a, b) end}, a.device)
        local share = disk.wait_share(wait0, wb.time_ns() - t0)
        c = {generated = med[1] <= med[2], gen_us = med[1], hand_us = med[2], reps = reps}
        if share and share > disk.BUSY_WAIT_SHARE then -- the machine was busy: for this process only
            c.busy = string.format("this thread waited for a CPU %.0f%% of the timing (over %.0f%%: the machine was " ..
                "busy), so the choice is kept for this process only, not on disk", 100 * share, 100 * disk.BUSY_WAIT_SHARE)
        else
            disk.put(key, c)
        end
    end
    G.choices[key] = c
    local kept = c.path and "measured by an earlier process, kept in " .. c.path .. " for this machine, build, shape, " ..
        "dtype and thread count (delete it to measure again)" or c.busy or "kept for this shape, dtype and thread count"
    return c, string.format("measured: the generated kernel %.1f us per call, the hand-written %s %.1f (medians " ..
        "of %d alternating rounds of %d calls on the traced inputs; %s)", c.gen_us, pair.fused, c.hand_us, ROUNDS, c.reps,
        kept)
end

-- Replaces each fusion group of 2 or more elementwise ops in `live` by one generated kernel (or,
-- for a group a hand-written kernel covers whole, by the faster of the two). arg_of: tensor ->
-- argument index. Returns the new plan, the groups (with symbol, or why they run eagerly), and
-- true when code generation turned out to be off for the process (the plan is then unchanged).
function G.generate(self, live, outputs, arg_of, originals)
    if G.blocked() then return live, {}, true end
    local uses = {}
    for _, nd in ipairs(live) do
        for i = 1, nd.args.n do if is_tensor(nd.args[i]) then uses[nd.args[i]] = (uses[nd.args[i]] or 0) + 1 end end
    end
    for i = 1, outputs.n do uses[outputs[i]] = (uses[outputs[i]] or 0) + 1 end
    local by_out = {}
    for _, nd in ipairs(live) do if not nd.inplace then by_out[nd.out] = nd end end
    local report, dead, plan_before = {}, {}, {}
    local groups = codegen.groups(live, uses, wb.codegen.max_inputs)
    local root_of = {}
    for _, g in ipairs(groups) do root_of[g.root.out] = g end
    for _, g in ipairs(groups) do
        for t in pairs(g.limited) do if root_of[t] then root_of[t].out_limited = true end end
    end
    for _, g in ipairs(groups) do g.cuts = cuts(g, by_out, live, uses, outputs, arg_of) end -- before any rewrite
    for _, g in ipairs(groups) do
        if #g.nodes >= 2 or (#g.nodes == 1 and gemm_of(g, by_out, uses)) then -- one op: worth it in an epilogue
            local words = {}
            for _, nd in ipairs(g.nodes) do words[#words + 1] = codegen.word(nd) end
            g.ops = table.concat(words, " ")
            local out, why = g.root.out, nil
            local dtype, device = out.dtype, out.device
            g.bytes = bytes(out)
            for _, t in ipairs(g.inputs) do g.bytes = g.bytes + bytes(t) end
            local pair
            if self.fusion then pair, g.note = gated_in(g, uses) end -- fuse = false: no hand-written kernels
            for _, t in ipairs(g.inputs) do
                if t.dtype ~= dtype then why = "mixed dtypes (" .. t.dtype .. " and " .. dtype .. ")" end
                if t.device ~= device then why = "mixed devices (" .. t.device .. " and " .. device .. ")" end
            end
            if #g.inputs > wb.codegen.max_inputs then -- groups are cut to fit; kept as the last guard
                why = string.format("%s (a generated kernel takes at most %d)", plural(#g.inputs, "input"), wb.codegen.max_inputs)
            end
            if #g.inputs == 0 then why = "no tensor inputs" end
            if not why then why = device_blocked(device) end
            local k, compiled, reason
            local gemm, not_gemm = gemm_of(g, by_out, uses)
            if gemm and not why then
                k, compiled, reason = build_epilogue(self, g, gemm, words)
                if k then
                    dead[gemm.node] = true
                    for _, nd in ipairs(g.nodes) do dead[nd] = true end
                    dead[g.root] = nil
                    local w = gemm.w
                    if gemm.wt then -- the [K, N] operand as [N, K]: a view taken on each call
                        local view = w:t()
                        plan_before[g.root] = {op = "t", args = table.pack(w), out = view, seg = g.root.seg}
                        w = view
                    end
                    g.root.op, g.root.symbol = "gemm", g.symbol
                    g.root.args = table.pack(k, gemm.x, w, table.unpack(g.inputs))
                    g.why, g.cuts = nil, cuts(g, by_out, live, uses, outputs, arg_of)
                    report[#report + 1] = g
                    goto next_group
                elseif reason == "no_compiler" then
                    G.off = compiled
                    io.stderr:write("wb.compile: code generation is off: ", compiled, "; the pattern rules still apply\n")
                    return live, {}, true
                end
                not_gemm = "not in " .. gemm.node.op .. "'s epilogue: " .. compiled
                io.stderr:write("wb.compile: ", compiled, "; the GEMM's epilogue runs as its own kernel\n")
                k, compiled, reason = nil, nil, nil
                if #g.nodes < 2 then -- one op: it runs eagerly, as any lone op does
                    g.why = not_gemm
                    report[#report + 1] = g
                    goto next_group
                end
            end
            g.gemm_note = not_gemm
            if not why then
                g.dtype = dtype
                g.inner_broadcast = {}
                local last = out.shape[#out.shape] or 1
                for i, t in ipairs(g.inputs) do
                    g.inner_broadcast[i] = last > 1 and (t:dim() == 0 or t.shape[t:dim()] == 1)
                end
                local short = {}
                for i = 1, math.min(#words, 4) do short[i] = words[i] == "gelu_tanh" and "gelu" or words[i] end
                g.symbol = "wb_poi_fused_" .. table.concat(short, "_") .. "_" .. (self.kernel_count or 0)
                local src = codegen.source(g)
                local dsrc = device ~= "cpu" and codegen.cuda_source(g) or nil
                g.key = dsrc or src
                k = self.kernels[g.key]
                if not k then
                    k, compiled, reason = wb.codegen.build{symbol = g.symbol, source = src, ops = g.ops, dtype = dtype,
                        inputs = #g.inputs, inner_broadcast = g.inner_broadcast, device = device, device_source = dsrc}
                end
                if not k and reason == "no_compiler" and device == "cpu" then
                    G.off = compiled
                    io.stderr:write("wb.compile: code generation is off: ", compiled, "; the pattern rules still apply\n")
                    return live, {}, true
                elseif not k and reason == "no_compiler" then
                    -- the device's own compiler is there (asked above); the host build it needs is not
                    G.device_off[device] = compiled
                    io.stderr:write("wb.compile: code generation on ", device, " is off: ", compiled, "; its groups run eagerly\n")
                    why = compiled
                elseif not k then
                    why = compiled
                    io.stderr:write("wb.compile: ", compiled, "; the group runs eagerly\n")
                end
            end
            local use_generated = k ~= nil
            if pair and k then
                local c
                c, g.note = choose(pair, k, out, originals)
                use_generated = c.generated
            end
            if use_generated then
                self.kernels[g.key] = k
                self.kernel_count = (self.kernel_count or 0) + 1
                g.symbol = wb.codegen.name(k)
                self.sources[g.symbol] = g.key
                for _, nd in ipairs(g.nodes) do dead[nd] = true end
                dead[g.root] = nil
                g.root.op, g.root.symbol = "run", g.symbol
                g.root.args = table.pack(k, out.shape, table.unpack(g.inputs))
            elseif pair then -- the hand-written kernel: faster, or the group cannot be generated
                g.symbol, g.hand = nil, pair.fused
                if why then g.note = "the generated kernel cannot run (" .. why .. ")" end
                dead[pair.act] = true
                g.root.op, g.root.args = pair.fused, table.pack(pair.a, pair.b)
            else
                g.symbol = nil
            end
            g.why = why
            report[#report + 1] = g
        end
        ::next_group::
    end
    local plan = {}
    for _, nd in ipairs(live) do
        if plan_before[nd] then plan[#plan + 1] = plan_before[nd] end
        if not dead[nd] then plan[#plan + 1] = nd end
    end
    return plan, report
end

-- explain's lines for one group.
function G.describe(g, out)
    local moves = string.format("moves %s: reads %s once, writes 1", G.size(g.bytes), plural(#g.inputs, "input"))
    if g.epilogue_of then
        local epi = #g.inputs - (g.gemm_bias and 1 or 0)
        out[#out + 1] = string.format("  group %s: %s (%s%s), in the GEMM's epilogue, applied per block in L2: one " ..
            "kernel reads x, the weight%s once, writes 1", g.symbol, g.ops, plural(epi, "epilogue input"),
            g.gemm_bias and "; the bias added in the GEMM's store" or "",
            #g.inputs > 0 and " and " .. plural(#g.inputs, "input") or "")
    elseif g.symbol then
        out[#out + 1] = string.format("  group %s: %s (%s), %s", g.symbol, g.ops, plural(#g.inputs, "input"), moves)
    elseif g.hand then
        out[#out + 1] = string.format("  group of %s: the hand-written %s (%s)", g.ops, g.hand, moves)
    else
        out[#out + 1] = string.format("  group of %s: runs eagerly: %s", g.ops, g.why)
    end
    out[#out + 1] = "    cut at: " .. g.cuts
    if g.note then out[#out + 1] = "    " .. g.note end
    if g.gemm_note then out[#out + 1] = "    " .. g.gemm_note end
end

-- explain's lines on code generation being off, for the process or a device.
function G.explain_off(out)
    if G.off then out[#out + 1] = "code generation: off (" .. G.off .. "); the pattern rules still apply" end
    local devices = {}
    for device, why in pairs(G.device_off) do if why then devices[#devices + 1] = device end end
    table.sort(devices)
    for _, device in ipairs(devices) do
        out[#out + 1] = "code generation on " .. device .. ": off (" .. G.device_off[device] .. "); its groups run eagerly"
    end
end

return G
