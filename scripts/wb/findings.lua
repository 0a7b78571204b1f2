-- wb.findings: what a profile shows, in sentences with numbers. Rules read the events (ops with
-- their data flow, kernels with their kind's fields: op, isa, tile, layout, epilogue), never a
-- kernel's name parsed back, and each finding says which ops, kernels and figures it rests on.
--
--   local f = require("wb.findings").analyze_session(p:_result(), ctx)
--   -- p: a stopped profile, a loaded trace or wb.profiler.from_events(events)
--   -- ctx (each optional): {device_info=, machine=, replay_ns_per_kernel=, fields=}
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

-- Each rule's sentences, from its groups: computed in C over a session's store (the one analysis,
-- core/observe/findings_rules.c and findings_time.c; wb.profiler.from_events feeds it synthetic
-- events), read here through s:findings_groups().
local report = {}

-- view: an op that launched no kernel and whose output shares its input's storage (the flow the
-- profiler records), or, without flow, declared 0 bytes: it only rewrote shape and strides.
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

-- epilogue: GEMM kinds that apply a bias and/or an activation in their epilogue, and the check
-- that no separate add/activation kernel ran under the same op (the one that was folded away).
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

-- layout: the BLAS letters of a GEMM kind, first the weight's (B) then the input's (A), in the
-- column-major convention cuBLAS names use: what each says about how the kernel walks it.
local WALK = {t = "read transposed (its reduction dimension contiguous, as a row-major [out, in] weight is stored)",
    n = "read as stored (rows of the reduction dimension apart)"}
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

-- fusion: consecutive pointwise kernels (kinds with no GEMM layout) on one lane where the first
-- one's output storage is read by the next one's op and by no other op before it is written
-- again: one fused kernel would neither write nor read it.
local FUSER = {gelu_tanh_mul = "wb.geglu (hand-written) or wb.compile (generated)",
    gelu_erf_mul = "wb.geglu (hand-written) or wb.compile (generated)",
    silu_mul = "wb.swiglu (hand-written) or wb.compile (generated)"}
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

-- host_bound: per window (range, else step, else the recording), the device lanes' idle share.
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

local time_rules = require("wb.findings_time")
local ORDER = {"view", "epilogue", "layout", "fusion", "host_bound", "gaps", "imbalance", "roofline", "unreliable",
    "sync", "memcpy"}
local TIMED = {fusion = true, host_bound = true, gaps = true, imbalance = true, roofline = true}
M.RULES = ORDER

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

return M
