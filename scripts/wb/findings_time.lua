-- wb.findings_time: the findings about time (gaps between kernels and where they went, worker
-- imbalance, the roofline, a busy machine, and on cuda synchronizations and copies inside a
-- step), in sentences: the groups come from C (core/observe/findings_time.c, through
-- s:findings_groups()); thresholds live in wb.findings.THRESHOLDS.

local M = {report = {}} -- report.<rule>(groups, out, ctx, TH): the findings from the groups

local function us(ns) return string.format("%.1f us", ns / 1e3) end
local function pct(x) return string.format("%.0f%%", 100 * x) end

M.GAP_CATEGORIES = {"dispatch", "allocation", "script", "imbalance", "preempted", "other"}

local function gaps_finding(out, TH, what, cat, total, count, span, ts, evidence)
    local parts = {}
    for _, c in ipairs(M.GAP_CATEGORIES) do
        parts[#parts + 1] = string.format("%s %s (%s)", c, pct(cat[c] / total), us(cat[c]))
    end
    local share = total / span
    evidence.total_ns, evidence.gaps, evidence.span_ns, evidence.share = total, count, span, share
    evidence.categories, evidence.time_ns, evidence.ts_ns = cat, total, ts
    out[#out + 1] = {rule = "gaps", severity = share > TH.gaps_warn_share and "warn" or "info",
        message = string.format("%s idle %s between %s (%s of the %s from the first to the last, %d gap%s): %s",
            what, us(total), evidence.lane and "kernels" or "their shares of parallel kernels", pct(share), us(span),
            count, count == 1 and "" or "s", table.concat(parts, ", ")),
        evidence = evidence}
end

-- G: {lanes = {{lane, cat, total, count, span, ts}}, workers = {cat, total, count, span, ts,
-- workers} or nil, steps = {delay, span}}. The preempted share is the host thread's run-queue
-- delay inside the steps scaled by the lane's idle share, taken from the other categories in
-- proportion (where in the step it fell is not known).
function M.report.gaps(G, out, ctx, TH)
    local delay, delay_span = G.steps.delay, G.steps.span
    for _, l in ipairs(G.gaps.lanes) do
        local cat, total, span = l.cat, l.total, l.span
        if total > 0 and span > 0 then
            local before = {} -- what the host was doing, before the preempted share is carved out
            for k, v in pairs(cat) do before[k] = v end
            if delay > 0 and delay_span > 0 then -- the host thread's run-queue delay, where the lane idled
                local pre = math.min(total, delay * total / span)
                local scale = (total - pre) / total
                for _, c in ipairs(M.GAP_CATEGORIES) do cat[c] = cat[c] * scale end
                cat.preempted = pre
            end
            gaps_finding(out, TH, l.lane .. " is", cat, total, l.count, span, l.ts, {lane = l.lane, host_categories = before})
        end
    end
    local w = G.gaps.workers
    if w and w.total > 0 and w.span > 0 then
        gaps_finding(out, TH, string.format("the cpu device's %d worker threads are", w.workers), w.cat, w.total,
            w.count, w.span, w.ts, {workers = w.workers})
    end
end

-- imbalance: parallel kernels whose slowest worker ran much longer than the fastest.
function M.report.imbalance(G, out, ctx, TH)
    for _, g in ipairs(G.imbalance) do
        if g.over > 0 then
            out[#out + 1] = {rule = "imbalance", severity = "warn",
                message = string.format("%s: in %d of %d parallel launches the slowest of %d workers ran more than " ..
                    "%s longer than the fastest (worst %s vs %s); %s of worker time waited at the join", g.kernel,
                    g.over, g.launches, g.workers, pct(TH.imbalance_ratio), us(g.worst_hi), us(g.worst_lo), us(g.waited)),
                evidence = {kernel = g.kernel, launches = g.launches, imbalanced = g.over, workers = g.workers,
                    worst_ratio = g.worst, waited_ns = g.waited, time_ns = g.waited, ts_ns = g.ts}}
        end
    end
end

-- The memory level whose bandwidth binds a kernel moving `bytes` (wb.calibrate's roof_for).
local function roof_for(info, bytes)
    if info.l2_bytes and info.l2_gbs and bytes <= info.l2_bytes * (info.threads or 1) then return "L2", info.l2_gbs end
    if info.l3_bytes and info.l3_gbs and bytes <= info.l3_bytes then return "L3", info.l3_gbs end
    return "DRAM", info.dram_gbs or info.bandwidth_gbs
end

-- roofline: kernel kinds far below the roof that binds them at their arithmetic intensity, judged
-- by their median launch (one preempted launch of 4 ms among 30 us ones made the sum's rate a
-- hundredth of the kernel's); the launches slower than the median one by more than
-- roofline_outlier_ratio are named.
function M.report.roofline(G, out, ctx, TH)
    local info = ctx.device_info
    if not info or not info.peak_gflops then return end
    for _, g in ipairs(G.roofline) do
        if g.median_ns >= TH.roofline_min_ns then
            local level, bw = roof_for(info, g.bytes / g.launches)
            local intensity = g.bytes > 0 and g.flops / g.bytes or math.huge
            local roof, attainable, unit
            if g.flops > 0 and (not bw or info.peak_gflops <= intensity * bw) then
                roof, attainable, unit = "the FLOP/s peak", info.peak_gflops, "GFLOP/s"
            elseif g.flops > 0 then
                roof, attainable, unit = level .. " bandwidth", intensity * bw, "GFLOP/s"
            elseif bw then
                roof, attainable, unit = level .. " bandwidth", bw, "GB/s"
            end
            -- the median launch's rate; the sum's (what an average says) only to tell when outliers
            -- would have misled it
            local achieved, mean = g.rate, (g.flops > 0 and g.flops or g.bytes) / g.time_ns
            local outliers = g.outliers > 0 and string.format("%s of %d ran over %gx slower than the median " ..
                "launch of %s (%s: preempted or waiting, not the kernel's speed)",
                g.outliers == 1 and "1 launch" or string.format("%d launches", g.outliers), g.launches,
                TH.roofline_outlier_ratio, us(g.median_ns), g.outliers == 1 and us(g.outlier_ns) or
                string.format("the slowest %s, %s in all", us(g.outlier_max_ns), us(g.outlier_ns))) or nil
            local evidence = {kernel = g.kernel, launches = g.launches, roof = roof, intensity = intensity ~= math.huge
                and intensity or nil, achieved = achieved, attainable = attainable, unit = unit,
                fraction = roof and achieved / attainable, median_ns = g.median_ns, mean_achieved = mean,
                outliers = g.outliers, outlier_ns = g.outlier_ns, outlier_max_ns = g.outlier_max_ns,
                time_ns = g.time_ns, ts_ns = g.ts}
            if roof and attainable > 0 and achieved / attainable < TH.roofline_fraction then
                out[#out + 1] = {rule = "roofline", severity = "warn",
                    message = string.format("%s reaches %.1f %s in its median launch, %s of what %s allows %s " ..
                        "(%.1f %s)%s", g.kernel, achieved, unit, pct(achieved / attainable), roof, g.flops > 0 and
                        string.format("at its intensity of %.2f flop/byte", intensity) or "(it declares bytes only)",
                        attainable, unit, outliers and "; " .. outliers or ""),
                    evidence = evidence}
            elseif roof and attainable > 0 and outliers and mean / attainable < TH.roofline_fraction then
                -- the median launch is near its roof, the sum is not: say which launches, and why
                -- the rate is the median's
                out[#out + 1] = {rule = "roofline", severity = "info",
                    message = string.format("%s reaches %.1f %s in its median launch, %s of what %s allows; %s, " ..
                        "which would have put its average at %.1f %s", g.kernel, achieved, unit,
                        pct(achieved / attainable), roof, outliers, mean, unit),
                    evidence = evidence}
            end
        end
    end
end

-- unreliable: the machine was busy while recording (other runnable processes or steal, from
-- ctx.machine; or this thread waiting for a CPU inside the steps).
function M.report.unreliable(G, out, ctx, TH)
    local delay, span = G.steps.delay, G.steps.span
    local share = span > 0 and delay / span or 0
    local m = ctx.machine or {}
    local reasons = {}
    if m.busy then
        reasons[#reasons + 1] = string.format("%.1f other runnable processes, steal %.1f%%", m.other_runnable or 0,
            m.steal_pct or 0)
    end
    if share > TH.unreliable_run_delay_share then
        reasons[#reasons + 1] = string.format("the thread waited for a CPU %s of the recorded steps", pct(share))
    end
    if #reasons > 0 then
        out[#out + 1] = {rule = "unreliable", severity = "warn",
            message = "the machine was busy while recording (" .. table.concat(reasons, "; ") ..
                "): findings about time are marked unreliable",
            evidence = {run_delay_ns = delay, run_delay_share = share, machine = m, time_ns = math.huge, ts_ns = 0}}
    end
end

-- sync and memcpy (cuda): host synchronizations and device copies inside a step or range.
local function count_list(names)
    local parts = {}
    for name, c in pairs(names) do parts[#parts + 1] = string.format("%s x%d", name, c) end
    table.sort(parts)
    return table.concat(parts, ", ")
end

-- "4 times in 2 instances" where the window (a range, or the steps) ran more than once
local function times(h)
    return string.format("%d time%s%s", h.count, h.count == 1 and "" or "s",
        h.instances > 1 and string.format(" in %d instances", h.instances) or "")
end

function M.report.sync(G, out)
    for _, h in ipairs(G.sync) do
        out[#out + 1] = {rule = "sync", severity = "warn",
            message = string.format("%s synchronizes the host with the device %s (%s; %s waiting): each stops the " ..
                "host from queueing work ahead", h.window, times(h), count_list(h.names), us(h.time_ns)),
            evidence = {window = h.window, count = h.count, instances = h.instances, calls = h.names,
                time_ns = h.time_ns, ts_ns = h.ts}}
    end
end

function M.report.memcpy(G, out)
    for _, h in ipairs(G.memcpy) do
        out[#out + 1] = {rule = "memcpy", severity = "warn",
            message = string.format("%s copies between host and device %s (%s; %s on the device)", h.window, times(h),
                count_list(h.names), us(h.time_ns)),
            evidence = {window = h.window, count = h.count, instances = h.instances, copies = h.names,
                time_ns = h.time_ns, ts_ns = h.ts}}
    end
end

return M
