-- wb.findings: what a profile shows, in sentences with numbers. Rules read the events (ops with
-- their data flow, kernels with their kind's fields: op, isa, tile, layout, epilogue), never a
-- kernel's name parsed back, and each finding says which ops, kernels and figures it rests on.
--
--   local f = require("wb.findings").analyze(events, ctx)
--   -- ctx (each optional): {device_info=, machine=, replay_ns_per_kernel=, measure_replay=fn}
--   -> {{rule=, severity="info"|"warn", message=, evidence={time_ns=, ...}}, ...} by time concerned

local words = require("wb.words")

local M = {}

-- Thresholds, each with its reason (docs/profiler.md's Findings section repeats them).
M.THRESHOLDS = {
    -- host_bound: a window whose device lane is idle more than half its span: the host, not the
    -- kernels, sets its time, so faster kernels cannot help it and replay can.
    host_bound_idle_share = 0.5,
    -- gaps: a lane idle more than a tenth of the time between its first kernel's start and its
    -- last kernel's end is worth a warning; below that the split is reported as information.
    gaps_warn_share = 0.10,
    -- imbalance: the slowest worker more than 25% longer than the fastest (a fifth of the workers'
    -- time lost waiting at the join), and by at least 5 us (below that a wake-up's jitter).
    imbalance_ratio = 0.25, imbalance_min_ns = 5000,
    -- roofline: the median launch under a quarter of the roof that binds the kernel (at its
    -- arithmetic intensity), at least 2 us long (shorter kernels are dominated by their start-up);
    -- a launch 3 times slower than the median one is an outlier, named (a preempted launch).
    roofline_fraction = 0.25, roofline_min_ns = 2000, roofline_outlier_ratio = 3,
    -- unreliable: other runnable processes, 5% steal, or the thread waiting for a CPU more than
    -- 10% of the recorded steps: times measured then are not the code's own.
    unreliable_run_delay_share = 0.10,
    -- small_kernels (torch traces): a kernel under 10 us is about as long as launching it costs
    -- the host (a few us a cudaLaunchKernel), so the GPU soon waits on the launches.
    small_kernel_ns = 10000,
    -- launches (torch traces): the ops with the most kernels, this many listed.
    launches_listed = 5,
}
local TH = M.THRESHOLDS

local function us(ns) return string.format("%.1f us", ns / 1e3) end
local function pct(x) return string.format("%.0f%%", 100 * x) end
local function shape_str(s) return s and ("[" .. table.concat(s, ", ") .. "]") or "?" end
local ITEMSIZE = {f32 = 4, bf16 = 2}


-- The kernels an op launched, itself and through its children, as a list.
local NONE = {}
function M.kernels_of(ix, id)
    local t = ix.op_kernels[id]
    if not t then return NONE end
    if t.cat then return {t} end
    return t
end

-- Sorts by ts_ns (or by key) unless already in order: a session records in time order nearly
-- always, and a check is far cheaper than a sort with a Lua comparator.
function M.sort_by_time(list, key)
    key = key or "ts_ns"
    for i = 2, #list do
        if list[i][key] < list[i - 1][key] then
            table.sort(list, function(a, b) return a[key] < b[key] end)
            return list
        end
    end
    return list
end

-- The shared indexes every rule reads: ops by id, kernels (by lane, in time order), each
-- kernel's launching op, each op's kernels (its own and its children's).
local function index(events)
    local ops, kernels, lanes, lane_order, runtime, threads, op_kernels, top_ops = {}, {}, {}, {}, {}, {}, {}, {}
    local memory = {}
    local ix = {ops = ops, kernels = kernels, lanes = lanes, lane_order = lane_order, windows = {}, runtime = runtime,
        steps = nil, memory = memory,
        threads = threads, op_kernels = op_kernels, top_ops = top_ops}
    for _, e in ipairs(events) do
        if e.cat == "op" then ops[e.id] = e end
    end
    local steps, ranges = {}, {}
    for _, e in ipairs(events) do
        local cat = e.cat
        if cat == "kernel" or cat == "memcpy" or cat == "memset" then
            kernels[#kernels + 1] = e
            local l = lanes[e.lane]
            if not l then
                l = {}
                lanes[e.lane] = l
                lane_order[#lane_order + 1] = e.lane
            end
            l[#l + 1] = e
            -- the op that launched it, and every op above that one
            local id, depth = e.correlation, 0
            local op = id and ops[id]
            while op and depth < 64 do
                -- one kernel kept as itself (most ops launch one), a list from the second on
                local t = op_kernels[id]
                if not t then op_kernels[id] = e
                elseif t.cat then op_kernels[id] = {t, e}
                else t[#t + 1] = e end
                id, depth = op.parent, depth + 1
                op = id ~= 0 and ops[id]
            end
        elseif cat == "op" then
            if e.parent == 0 then top_ops[#top_ops + 1] = e end
        elseif cat == "runtime" then
            runtime[#runtime + 1] = e
        elseif cat == "memory" then
            memory[#memory + 1] = e
        elseif cat == "thread" then
            local k = e.args and e.args.kernel
            if k then
                local t = threads[k]
                if not t then threads[k] = {e} else t[#t + 1] = e end
            end
        elseif cat == "range" then
            ranges[#ranges + 1] = e
        elseif cat == "step" then
            steps[#steps + 1] = e
        end
    end
    for _, l in pairs(ix.lanes) do M.sort_by_time(l) end
    M.sort_by_time(ix.kernels)
    M.sort_by_time(ix.top_ops)
    M.sort_by_time(memory)
    ix.steps = steps -- the run-queue delay is sampled at step boundaries
    -- the windows host_bound and the cuda rules judge: ranges, else steps, else the whole recording
    ix.windows = #ranges > 0 and ranges or steps
    if #ix.windows == 0 and #events > 0 then
        local t0, t1 = math.huge, -math.huge
        for _, e in ipairs(events) do
            if e.ts_ns < t0 then t0 = e.ts_ns end
            if e.ts_ns + (e.dur_ns or 0) > t1 then t1 = e.ts_ns + (e.dur_ns or 0) end
        end
        ix.windows = {{name = "the recording", ts_ns = t0, dur_ns = t1 - t0, cat = "trace"}}
    end
    M.sort_by_time(ix.windows)
    return ix
end

-- Each rule: collect (the groups, from the Lua index) and report (its findings, from groups:
-- these or the ones computed in C over a session's store, core/observe/findings_rules.c).
local rules, collect, report = {}, {}, {}

-- view: an op that launched no kernel and whose output shares its input's storage (the flow the
-- profiler records), or, without flow, declared 0 bytes: it only rewrote shape and strides.
function collect.view(ix)
    local groups, order = {}, {}
    local ids = {}
    for id in pairs(ix.ops) do ids[#ids + 1] = id end
    table.sort(ids) -- in id order (as in C): the groups' order and first ops do not depend on hashing
    for _, id in ipairs(ids) do
        local e = ix.ops[id]
        local flow = e.args and e.args.flow
        local shares = flow and #flow >= 2 and flow[#flow] ~= 0 and flow[#flow] == flow[1]
        if not ix.op_kernels[e.id] and not e.args.failed and (shares or (not flow and e.bytes == 0 and e.flops == 0)) then
            local g = groups[e.name]
            if not g then
                local a = e.args
                g = {name = e.name, calls = 0, host_ns = 0, shapes = e.shapes and e.shapes[1], ops = {}, ts = e.ts_ns,
                    in_stride = a.in_stride, out_shape = a.out_shape, out_stride = a.out_stride}
                groups[e.name] = g
                order[#order + 1] = g
            end
            g.calls, g.host_ns, g.ts = g.calls + 1, g.host_ns + e.dur_ns, math.min(g.ts, e.ts_ns)
            if #g.ops < 8 then g.ops[#g.ops + 1] = e.id end
        end
    end
    return order
end
function report.view(order, out, ctx)
    for _, g in ipairs(order) do
        out[#out + 1] = {rule = "view", severity = "info",
            message = string.format("%s is a view: no kernel, 0 bytes moved (%d call%s%s; %s of host time each)",
                g.name, g.calls, g.calls == 1 and "" or "s", g.shapes and (", " .. shape_str(g.shapes) ..
                (g.in_stride and (" strides " .. shape_str(g.in_stride)) or "") .. (g.out_shape and (" -> " ..
                shape_str(g.out_shape) .. " strides " .. shape_str(g.out_stride)) or "")) or "",
                us(g.host_ns / g.calls)),
            evidence = {ops = g.ops, op = g.name, calls = g.calls, input_shape = g.shapes, input_stride = g.in_stride,
                output_shape = g.out_shape, output_stride = g.out_stride, time_ns = g.host_ns, ts_ns = g.ts,
                bytes = 0, kernels = 0}}
    end
end
function rules.view(ix, out, ctx) report.view(collect.view(ix), out, ctx) end

-- Output elements of a GEMM op from its recorded input shapes (addmm(bias, a, b), linear(x, w, b),
-- mm/matmul(a, b)); nil when the shapes were not recorded.
local function gemm_out_elements(op)
    local s = op and op.shapes
    if not s then return nil end
    local function rows(t) local n = 1; for i = 1, #t - 1 do n = n * t[i] end; return n end
    if op.name == "addmm" and s[2] and s[3] then return s[2][1] * s[3][#s[3]] end
    if op.name == "linear" and s[1] and s[2] then return rows(s[1]) * s[2][1] end
    if (op.name == "mm" or op.name == "matmul") and s[1] and s[2] then return rows(s[1]) * s[2][#s[2]] end
    return nil
end

-- epilogue: GEMM kinds that apply a bias and/or an activation in their epilogue, and the check
-- that no separate add/activation kernel ran under the same op (the one that was folded away).
function collect.epilogue(ix)
    local groups, order = {}, {}
    for _, k in ipairs(ix.kernels) do
        local a = k.args or {}
        if a.layout and a.epilogue and a.epilogue ~= "none" then
            local g = groups[k.name]
            if not g then
                g = {kernel = k.name, epilogue = a.epilogue, launches = 0, time_ns = 0, extra = 0, saved = 0, ops = {},
                    ts = k.ts_ns}
                groups[k.name] = g
                order[#order + 1] = g
            end
            g.launches, g.time_ns = g.launches + 1, g.time_ns + k.dur_ns
            local op = ix.ops[k.correlation]
            local top = op
            while top and top.parent ~= 0 and ix.ops[top.parent] do top = ix.ops[top.parent] end
            -- other kernels launched under the same top-level op: a separate add would be one
            for _, other in ipairs(top and M.kernels_of(ix, top.id) or NONE) do
                if other ~= k and not (other.args or {}).layout then g.extra = g.extra + 1 end
            end
            g.op = op and op.name
            if top and #g.ops < 8 then g.ops[#g.ops + 1] = top.id end
            local n = gemm_out_elements(op) or gemm_out_elements(top)
            local item = op and op.dtypes and ITEMSIZE[op.dtypes[2] or op.dtypes[1]] or 4
            -- a separate pass per epilogue stage (the bias, the activation) reads and writes the
            -- output once more; the epilogue field lists the bias first ("bias", "bias_gelu_tanh")
            local bias = a.epilogue:sub(1, 4) == "bias"
            local stages = (bias and 1 or 0) + (a.epilogue ~= "bias" and 1 or 0)
            if n then g.saved = g.saved + 2 * n * item * stages end
        end
    end
    return order
end
function report.epilogue(order, out, ctx)
    for _, g in ipairs(order) do
        local per = g.saved > 0 and string.format("; a separate pass would have moved %d more bytes per launch",
            math.floor(g.saved / g.launches + 0.5)) or ""
        out[#out + 1] = {rule = "epilogue", severity = "info",
            message = string.format("%s applies %s in its epilogue: one kernel per %s, %s%s", g.kernel, g.epilogue,
                g.op or "op", g.extra == 0 and "no separate add or activation kernel ran" or
                    string.format("but %d other kernel%s ran beside it", g.extra, g.extra == 1 and "" or "s"), per),
            evidence = {kernel = g.kernel, epilogue = g.epilogue, launches = g.launches, separate_kernels = g.extra,
                bytes_saved = g.saved, time_ns = g.time_ns, ts_ns = g.ts, ops = g.ops}}
    end
end
function rules.epilogue(ix, out, ctx) report.epilogue(collect.epilogue(ix), out, ctx) end

-- layout: the BLAS letters of a GEMM kind, first the weight's (B) then the input's (A), in the
-- column-major convention cuBLAS names use: what each says about how the kernel walks it.
local WALK = {t = "read transposed (its reduction dimension contiguous, as a row-major [out, in] weight is stored)",
    n = "read as stored (rows of the reduction dimension apart)"}
function collect.layout(ix)
    local groups, order = {}, {}
    for _, k in ipairs(ix.kernels) do
        local a = k.args or {}
        if a.layout and a.layout ~= "" then
            local g = groups[k.name]
            if not g then
                g = {kernel = k.name, layout = a.layout, isa = a.isa, tile = a.tile, launches = 0, time_ns = 0, ts = k.ts_ns}
                groups[k.name] = g
                order[#order + 1] = g
            end
            g.launches, g.time_ns = g.launches + 1, g.time_ns + k.dur_ns
        end
    end
    return order
end
function report.layout(order, out, ctx)
    for _, g in ipairs(order) do
        local b, a = g.layout:sub(1, 1), g.layout:sub(2, 2)
        out[#out + 1] = {rule = "layout", severity = "info",
            message = string.format("%s has layout %s: B (the weight) %s; A (the input) %s", g.kernel, g.layout,
                WALK[b] or ("'" .. b .. "'"), WALK[a] or ("'" .. a .. "'")),
            evidence = {kernel = g.kernel, layout = g.layout, isa = g.isa, tile = g.tile, launches = g.launches,
                time_ns = g.time_ns, ts_ns = g.ts}}
    end
end
function rules.layout(ix, out, ctx) report.layout(collect.layout(ix), out, ctx) end

-- fusion: consecutive pointwise kernels (kinds with no GEMM layout) on one lane where the first
-- one's output storage is read by the next one's op and by no other op before it is written
-- again: one fused kernel would neither write nor read it.
local FUSER = {gelu_tanh_mul = "wb.geglu (hand-written) or wb.compile (generated)",
    gelu_erf_mul = "wb.geglu (hand-written) or wb.compile (generated)",
    silu_mul = "wb.swiglu (hand-written) or wb.compile (generated)"}
function collect.fusion(ix)
    -- readers of each storage id: ops that launched kernels themselves (views pass their input on)
    local readers = {}
    for _, e in pairs(ix.ops) do
        local flow = e.args and e.args.flow
        if flow and ix.op_kernels[e.id] then
            for i = 1, #flow - 1 do
                local id = flow[i]
                if id ~= 0 then -- one reader kept as itself; a list only for storage read twice or more
                    local r = readers[id]
                    if not r then readers[id] = e
                    elseif r.cat == "op" then readers[id] = {r, e}
                    else r[#r + 1] = e end
                end
            end
        end
    end
    local function pointwise(k) return k.cat == "kernel" and not (k.args or {}).layout end
    local function launcher(k)
        local op = ix.ops[k.correlation]
        return op and op.args.flow and op or nil
    end
    local function above(op, other) -- other is op or encloses it
        local depth = 0
        while op and depth < 64 do
            if op == other then return true end
            op, depth = ix.ops[op.parent], depth + 1
        end
        return false
    end
    -- the input slot of op2 that reads op1's output, when no other op reads that storage after op1
    local function only_reader(op1, op2)
        local flow = op1.args.flow
        local sid = flow[#flow]
        if sid == 0 then return nil end
        local rs = readers[sid]
        if rs and rs.cat == "op" then rs = {rs} end
        for _, r in ipairs(rs or {}) do
            if r.ts_ns > op1.ts_ns and not above(op2, r) and not above(r, op2) then return nil end
        end
        for i = 1, #op2.args.flow - 1 do
            if op2.args.flow[i] == sid then return i end
        end
        return nil
    end
    local groups, order = {}, {}
    for _, lane in ipairs(ix.lane_order) do
        local ks = ix.lanes[lane]
        local i = 1
        while i < #ks do
            -- a chain from ks[i]: its key (the ops' names), the bytes its intermediates would not
            -- move, the first intermediate's shape and dtype, its kernels' time
            local key, kinds, bytes, shape, dtype, time = nil, nil, 0, nil, nil, ks[i].dur_ns
            local j = i
            while j < #ks and pointwise(ks[j]) and pointwise(ks[j + 1]) do
                local o1, o2 = launcher(ks[j]), launcher(ks[j + 1])
                local slot = o1 and o2 and o1 ~= o2 and only_reader(o1, o2)
                if not slot then break end
                local sh, dt = o2.shapes and o2.shapes[slot], o2.dtypes and o2.dtypes[slot]
                if sh and bytes then
                    local n = 1
                    for _, d in ipairs(sh) do n = n * d end
                    bytes = bytes + 2 * n * (ITEMSIZE[dt] or 4) -- written once, read once
                else
                    bytes = nil -- shapes not recorded: the size is unknown
                end
                if not key then
                    key, kinds = o1.name, (ks[j].args or {}).op or "?"
                    shape, dtype = sh, dt
                end
                key = key .. " -> " .. o2.name
                kinds = kinds .. "_" .. ((ks[j + 1].args or {}).op or "?")
                time = time + ks[j + 1].dur_ns
                j = j + 1
            end
            if key then
                local g = groups[key]
                if not g then
                    g = {chain = key, kinds = kinds, count = 0, bytes = bytes, time_ns = 0,
                        inter = {{shape = shape, dtype = dtype}}, kernels = {}, ts = ks[i].ts_ns}
                    groups[key] = g
                    order[#order + 1] = g
                end
                g.count, g.time_ns = g.count + 1, g.time_ns + time
                if #g.kernels < 8 then g.kernels[#g.kernels + 1] = ks[i].id end
                i = j + 1
            else
                i = i + 1
            end
        end
    end
    return order
end
function report.fusion(order, out, ctx)
    for _, g in ipairs(order) do
        local first = g.inter[1]
        out[#out + 1] = {rule = "fusion", severity = "warn",
            message = string.format("%s could be one kernel: the %sintermediate is written by one kernel and " ..
                "read only by the next; fused, %s would not move per instance (%d instance%s, %s in these " ..
                "kernels); %s would fuse them", g.chain, first.shape and (shape_str(first.shape) .. " " ..
                (first.dtype or "") .. " ") or "", g.bytes and string.format("%d bytes", g.bytes) or
                "its bytes (record_shapes = true counts them)", g.count, g.count == 1 and "" or "s", us(g.time_ns),
                FUSER[g.kinds] or "wb.compile"),
            evidence = {chain = g.chain, bytes = g.bytes, instances = g.count, time_ns = g.time_ns, ts_ns = g.ts,
                kernels = g.kernels, intermediate_shape = first.shape, fuser = FUSER[g.kinds] or "wb.compile"}}
    end
end
function rules.fusion(ix, out, ctx) report.fusion(collect.fusion(ix), out, ctx) end

-- Busy time of `kernels` (sorted) inside [t0, t1]: the union of their spans.
local function busy_in(kernels, t0, t1, from)
    local busy, reach, n = 0, t0, 0
    local i = from or 1
    while i <= #kernels and kernels[i].ts_ns < t1 do
        local k = kernels[i]
        local a, b = math.max(k.ts_ns, reach), math.min(k.ts_ns + k.dur_ns, t1)
        if b > a then busy, reach = busy + b - a, b end
        if k.ts_ns >= t0 then n = n + 1 end
        i = i + 1
    end
    return busy, n
end

-- host_bound: per window (range, else step, else the recording), the device lanes' idle share.
function collect.host_bound(ix)
    local groups, order = {}, {}
    local ks, ops = ix.kernels, ix.top_ops
    local lo, olo = 1, 1
    for _, w in ipairs(ix.windows) do
        local t0, t1 = w.ts_ns, w.ts_ns + w.dur_ns
        while lo <= #ks and ks[lo].ts_ns + ks[lo].dur_ns < t0 and ks[lo].ts_ns < t0 do lo = lo + 1 end
        local busy, n = busy_in(ks, t0, t1, lo)
        while olo <= #ops and ops[olo].ts_ns < t0 do olo = olo + 1 end
        local nops, j = 0, olo
        while j <= #ops and ops[j].ts_ns <= t1 do nops, j = nops + 1, j + 1 end
        if n > 0 and w.dur_ns > 0 then
            local g = groups[w.name]
            if not g then
                g = {name = w.name, instances = 0, span = 0, busy = 0, kernels = 0, ops = 0, ts = w.ts_ns}
                groups[w.name] = g
                order[#order + 1] = g
            end
            g.instances, g.span, g.busy, g.kernels = g.instances + 1, g.span + w.dur_ns, g.busy + busy, g.kernels + n
            g.ops = g.ops + nops
        end
    end
    return order
end
function report.host_bound(order, out, ctx)
    for _, g in ipairs(order) do
        local idle = g.span - g.busy
        local share = idle / g.span
        if share > TH.host_bound_idle_share then
            local per_kernel_host = idle / g.kernels
            local replay = ctx.replay_ns_per_kernel or (ctx.measure_replay and ctx.measure_replay())
            local save = replay and math.max(0, idle - replay * g.kernels) / g.instances
            out[#out + 1] = {rule = "host_bound", severity = "warn",
                message = string.format("%s is host-bound: the device is idle %s of its %s span (%d instance%s, " ..
                    "%.1f kernels and %.1f ops called each); %s of host time per op called, %s per kernel launched%s",
                    g.name, pct(share), us(g.span / g.instances), g.instances, g.instances == 1 and "" or "s",
                    g.kernels / g.instances, g.ops / g.instances, g.ops > 0 and us(idle / g.ops) or "-",
                    us(per_kernel_host), save and string.format("; replay (wb.compile or wb.graph.capture) costs " ..
                        "%.2f us per kernel (measured) and would save about %s per instance", replay / 1e3, us(save))
                        or "; replay (wb.compile or wb.graph.capture) would remove most of it"),
                evidence = {window = g.name, instances = g.instances, idle_share = share, span_ns = g.span,
                    busy_ns = g.busy, kernels = g.kernels, ops = g.ops, host_ns_per_op = g.ops > 0 and idle / g.ops or nil,
                    host_ns_per_kernel = per_kernel_host,
                    replay_ns_per_kernel = replay, replay_saves_ns = save, time_ns = idle, ts_ns = g.ts}}
        end
    end
end
function rules.host_bound(ix, out, ctx) report.host_bound(collect.host_bound(ix), out, ctx) end

local time_rules = require("wb.findings_time")
local ORDER = {"view", "epilogue", "layout", "fusion", "host_bound", "gaps", "imbalance", "roofline", "unreliable",
    "sync", "memcpy"}
local TIMED = {fusion = true, host_bound = true, gaps = true, imbalance = true, roofline = true}
M.RULES = ORDER

-- The findings of `events` (p:events() or a trace read back), most time concerned first.
-- ctx: device_info (the roofline's ceilings), machine (busy, other_runnable, steal_pct),
-- replay_ns_per_kernel (host cost of a replayed kernel), dropped and dropped_note (events the
-- session did not keep: a "dropped" finding comes first); each optional.
function M.analyze(events, ctx)
    ctx = ctx or {}
    local ix = index(events)
    local out = {}
    for _, name in ipairs(ORDER) do
        local rule = rules[name] or time_rules[name]
        rule(ix, out, ctx, TH)
    end
    return M.finish(out, ctx)
end

-- What each rule reads beyond ops and their times, and what to say when a trace (another tool's:
-- ctx.fields lists what it carries) lacks it. The workbench's own traces carry everything.
local NEEDS = {
    view = {flow = "the trace has no data flow (which op's output shares its input's storage): torch.profiler does not record it"},
    epilogue = {kernel_kinds = "the trace's kernels carry vendor names only, not the fields (op, layout, epilogue) the rule reads"},
    layout = {kernel_kinds = "the trace's kernels carry vendor names only, not the fields (op, layout, epilogue) the rule reads"},
    fusion = {shapes = "the trace has no shapes; record with record_shapes=True",
        flow = "the trace has no data flow (which kernel reads which op's output): torch.profiler does not record it"},
    host_bound = {kernels = "the trace has no device kernels; record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
        links = "no kernel is linked to the op that launched it (no External id or correlation the trace's ops carry)"},
    gaps = {kernels = "the trace has no device kernels; record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"},
    imbalance = {threads = "the trace has no per-thread shares of parallel kernels (the workbench's cpu device records them)"},
    roofline = {work = "the trace has no FLOP or byte counts per kernel, nor the device's ceilings"},
    unreliable = {machine = "the trace does not record the machine's load (other runnable processes, steal)"},
    sync = {runtime = "the trace has no CUDA runtime calls (cuda_runtime events)"},
    memcpy = {kernels = "the trace has no device work (kernels, copies); record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"},
}
M.NEEDS = NEEDS

local torch_rules = require("wb.findings_torch")

-- Why `rule` cannot run on a trace carrying `fields` (nil: it can). Requirements in a fixed order.
local NEED_ORDER = {"ops", "kernels", "links", "shapes", "dtypes", "flow", "kernel_kinds", "threads", "work", "machine", "runtime"}
function M.why_skipped(rule, fields)
    if not fields then return nil end
    local needs = torch_rules.NEEDS[rule] or NEEDS[rule] -- another tool's trace: the torch forms
    for _, need in ipairs(NEED_ORDER) do
        local why = needs and needs[need]
        if why and not fields[need] then return why end
    end
    return nil
end

-- The same findings for a session (a stopped profile, or a trace read back), from the groups
-- computed in C over its store: no table per event. Also returns the counts of events and of device events read, and the
-- rules skipped ({rule, severity = "skipped", message = why}) for what ctx.fields lacks.
function M.analyze_session(session, ctx)
    ctx = ctx or {}
    local G = session:findings_groups(TH.imbalance_ratio, TH.imbalance_min_ns, TH.roofline_outlier_ratio,
        TH.small_kernel_ns)
    for _, g in ipairs(G.fusion) do g.inter = {g.first} end
    local out, skipped = {}, {}
    -- another tool's trace (ctx.fields: what it carries) gets the rules that read torch's op tree
    for _, name in ipairs(ctx.fields and torch_rules.ORDER or ORDER) do
        local why = M.why_skipped(name, ctx.fields)
        if why then skipped[#skipped + 1] = {rule = name, severity = "skipped", message = why}
        elseif ctx.fields and torch_rules.report[name] then torch_rules.report[name](G, out, ctx, TH)
        elseif report[name] then report[name](G[name], out, ctx)
        else time_rules.report[name](G, out, ctx, TH) end
    end
    return M.finish(out, ctx), G.events, G.device_events, skipped
end

-- Marks the timed findings when the machine was busy, sorts by the time concerned, and puts what
-- the session dropped first.
function M.finish(out, ctx)
    local unreliable = false
    for _, f in ipairs(out) do unreliable = unreliable or f.rule == "unreliable" end
    for i, f in ipairs(out) do
        f.order = i
        if unreliable and TIMED[f.rule] then
            f.unreliable = true
            f.message = f.message .. " [timing unreliable: busy machine]"
        end
    end
    table.sort(out, function(a, b)
        local ta, tb = a.evidence.time_ns or 0, b.evidence.time_ns or 0
        if ta ~= tb then return ta > tb end
        return a.order < b.order
    end)
    for _, f in ipairs(out) do f.order = nil end
    -- events the session did not keep: first, whatever the rules above say is about the rest
    if (tonumber(ctx.dropped) or 0) > 0 then
        table.insert(out, 1, {rule = "dropped", severity = "warn", evidence = {dropped = ctx.dropped},
            message = string.format("the findings cover only the events kept: %s", ctx.dropped_note ~= "" and
                ctx.dropped_note or (tostring(ctx.dropped) .. " events dropped"))})
    end
    return out
end

-- Lines for a terminal: "[warn] fusion: message".
function M.format(findings, limit)
    local lines = {}
    for i, f in ipairs(findings) do
        if limit and i > limit then break end
        -- names come from traces anyone may hand over: never a raw escape sequence to the terminal
        lines[#lines + 1] = words.escaped(string.format("[%s] %s: %s", f.severity, f.rule, f.message))
    end
    if #findings == 0 then lines[1] = "no findings" end
    return table.concat(lines, "\n")
end

M.rules, M.index = rules, index
return M
