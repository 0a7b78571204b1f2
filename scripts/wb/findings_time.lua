-- wb.findings_time: the findings about time (gaps between kernels and where they went, worker
-- imbalance, the roofline, a busy machine, and on cuda synchronizations and copies inside a
-- step). Rules take the index wb.findings builds; thresholds live in wb.findings.THRESHOLDS.

local M = {report = {}} -- report.<rule>(groups, out, ctx, TH): the findings from groups (Lua's or C's)

local function us(ns) return string.format("%.1f us", ns / 1e3) end
local function pct(x) return string.format("%.0f%%", 100 * x) end

M.GAP_CATEGORIES = {"dispatch", "allocation", "script", "imbalance", "preempted", "other"}

-- Host cover of the gaps: top-level ops split at their last kernel's start (before it: dispatch,
-- the op preparing launches; after: other), top-level runtime calls (allocation when the API is
-- an allocation, else other). Sorted, not overlapping (top-level events do not nest).
local function host_segments(ix)
    local from, to, what = {}, {}, {} -- parallel arrays: no table per segment
    local n, sorted = 0, true
    local function add(a, b, c)
        n = n + 1
        from[n], to[n], what[n] = a, b, c
        if n > 1 and a < from[n - 1] then sorted = false end
    end
    for _, op in ipairs(ix.top_ops) do
        local t0, t1 = op.ts_ns, op.ts_ns + op.dur_ns
        local ks = ix.op_kernels[op.id]
        local last = t0
        if not ks then
            last = t1
        elseif ks.cat then
            last = ks.ts_ns
        else
            for _, k in ipairs(ks) do
                if k.ts_ns > last then last = k.ts_ns end
            end
        end
        if last < t0 then last = t0 end
        if last > t1 then last = t1 end
        add(t0, last, "dispatch")
        if t1 > last then add(last, t1, "other") end
    end
    for _, r in ipairs(ix.runtime) do
        if r.parent == 0 and r.lane == "host" then add(r.ts_ns, r.ts_ns + r.dur_ns, "other") end
    end
    if not sorted then -- rare (runtime calls between ops): sort the indexes
        local idx = {}
        for i = 1, n do idx[i] = i end
        table.sort(idx, function(a, b) return from[a] < from[b] end)
        local f2, t2, w2 = {}, {}, {}
        for i, k in ipairs(idx) do f2[i], t2[i], w2[i] = from[k], to[k], what[k] end
        from, to, what = f2, t2, w2
    end
    -- allocations and frees (profile_memory: memory events last as long as the call), inside
    -- ops or outside them (a garbage collection freeing storage between two ops)
    local af, at = {}, {}
    for _, m in ipairs(ix.memory) do
        if m.dur_ns > 0 then af[#af + 1], at[#at + 1] = m.ts_ns, m.ts_ns + m.dur_ns end
    end
    return from, to, what, n, af, at
end

-- The gaps between consecutive busy spans of one lane (sorted), added into cat by what the host
-- was doing; for a worker's shares, the first part of a gap, up to the end of the parallel kernel
-- the share belonged to (join[share]), is imbalance: the worker waited for the slower ones.
-- Returns the total, the count of gaps and the lane's span.
local function split_lane(ks, segs, cat, join)
    local sf, st, sw, ns, af, at = segs[1], segs[2], segs[3], segs[4], segs[5], segs[6]
    local ap = 1
    local function alloc_between(lo, hi) -- time allocating inside [lo, hi]; lo never decreases
        while ap <= #af and at[ap] <= lo do ap = ap + 1 end
        local sum, i = 0, ap
        while i <= #af and af[i] < hi do
            local x, y = math.max(lo, af[i]), math.min(hi, at[i])
            if y > x then sum = sum + (y - x) end
            i = i + 1
        end
        return sum
    end
    local total, count, p = 0, 0, 1
    local reach = ks[1] and ks[1].ts_ns + ks[1].dur_ns or 0
    local waits_until = join and join[ks[1]] or reach
    for i = 2, #ks do
        local a, b = reach, ks[i].ts_ns
        if b > a then
            total, count = total + (b - a), count + 1
            local wait = math.max(0, math.min(b, waits_until) - a)
            cat.imbalance = cat.imbalance + wait
            a = a + wait
            while p <= ns and st[p] <= a do p = p + 1 end
            local alloc = alloc_between(a, b)
            local covered, alloc_in_ops, q = 0, 0, p
            while q <= ns and sf[q] < b do
                local lo, hi = math.max(a, sf[q]), math.min(b, st[q])
                if hi > lo then
                    local in_alloc = alloc_between(lo, hi) -- taken out of the op's category
                    cat[sw[q]] = cat[sw[q]] + (hi - lo) - in_alloc
                    covered, alloc_in_ops = covered + (hi - lo), alloc_in_ops + in_alloc
                end
                q = q + 1
            end
            cat.allocation = cat.allocation + alloc
            cat.script = cat.script + (b - a - covered) - (alloc - alloc_in_ops)
        end
        local e = ks[i].ts_ns + ks[i].dur_ns
        if e > reach then reach = e end
        waits_until = join and math.max(join[ks[i]] or e, reach) or reach
    end
    return total, count, #ks > 0 and reach - ks[1].ts_ns or 0
end

local function new_categories()
    local cat = {}
    for _, c in ipairs(M.GAP_CATEGORIES) do cat[c] = 0 end
    return cat
end

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

-- gaps: per device lane, the time between consecutive kernels, split by what the host was doing;
-- and the cpu device's worker threads together, between their shares of parallel kernels.
-- preempted: the host thread's run-queue delay inside the steps (sampled at their boundaries)
-- scaled by the lane's idle share; where in the step it fell is not known, so it is taken out
-- of the other categories in proportion.
function M.gaps(ix, out, ctx, TH)
    local segs = table.pack(host_segments(ix))
    local G = {lanes = {}}
    for _, lane in ipairs(ix.lane_order) do
        local ks = ix.lanes[lane]
        local cat = new_categories()
        local total, count, span = split_lane(ks, segs, cat, nil)
        G.lanes[#G.lanes + 1] = {lane = lane, cat = cat, total = total, count = count, span = span, ts = ks[1].ts_ns}
    end
    -- worker lanes: each share's gap to the worker's next share, its first part waiting at the join
    local workers, order, join = {}, {}, {}
    for _, k in ipairs(ix.kernels) do
        for _, sh in ipairs(ix.threads[k.id] or {}) do
            local l = workers[sh.lane]
            if not l then l = {}; workers[sh.lane] = l; order[#order + 1] = sh.lane end
            l[#l + 1] = sh
            join[sh] = k.ts_ns + k.dur_ns
        end
    end
    if #order > 0 then
        local cat, total, count, span, ts = new_categories(), 0, 0, 0, math.huge
        for _, lane in ipairs(order) do
            local t, c, s = split_lane(workers[lane], segs, cat, join)
            total, count, span, ts = total + t, count + c, span + s, math.min(ts, workers[lane][1].ts_ns)
        end
        G.workers = {cat = cat, total = total, count = count, span = span, ts = ts, workers = #order}
    end
    G.steps = M.step_delay(ix)
    M.report.gaps(G, out, ctx, TH)
end

-- The host thread's run-queue delay inside the steps, and the steps' span where it was sampled.
function M.step_delay(ix)
    local delay, span = 0, 0
    for _, w in ipairs(ix.steps) do
        local d = w.args and w.args.run_delay_ns
        if d then delay, span = delay + d, span + w.dur_ns end
    end
    return {delay = delay, span = span}
end

-- G: {lanes = {{lane, cat, total, count, span, ts}}, workers = {cat, total, count, span, ts,
-- workers} or nil, steps = {delay, span}}, from the Lua index above or computed in C.
function M.report.gaps(G, out, ctx, TH)
    local delay, delay_span = G.steps.delay, G.steps.span
    for _, l in ipairs(G.gaps and G.gaps.lanes or G.lanes) do
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
    local w = G.gaps and G.gaps.workers or G.workers
    if w and w.total > 0 and w.span > 0 then
        gaps_finding(out, TH, string.format("the cpu device's %d worker threads are", w.workers), w.cat, w.total,
            w.count, w.span, w.ts, {workers = w.workers})
    end
end

-- imbalance: parallel kernels whose slowest worker ran much longer than the fastest.
function M.imbalance(ix, out, ctx, TH)
    local groups, order = {}, {}
    for _, k in ipairs(ix.kernels) do
        local shares = ix.threads[k.id]
        if shares and #shares >= 2 then
            local lo, hi = math.huge, 0
            for _, s in ipairs(shares) do
                if s.dur_ns < lo then lo = s.dur_ns end
                if s.dur_ns > hi then hi = s.dur_ns end
            end
            local g = groups[k.name]
            if not g then
                g = {kernel = k.name, launches = 0, over = 0, waited = 0, worst = 0, worst_lo = 0, workers = #shares,
                    ts = k.ts_ns}
                groups[k.name] = g
                order[#order + 1] = g
            end
            g.launches = g.launches + 1
            if hi - lo >= TH.imbalance_min_ns and lo > 0 and (hi - lo) / lo > TH.imbalance_ratio then
                g.over = g.over + 1
                for _, s in ipairs(shares) do g.waited = g.waited + (hi - s.dur_ns) end
                if (hi - lo) / lo > g.worst then g.worst, g.worst_hi, g.worst_lo = (hi - lo) / lo, hi, lo end
            end
        end
    end
    M.report.imbalance({imbalance = order}, out, ctx, TH)
end
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

-- The median of a sorted list: the middle one, or the mean of the two (as findings_rules.c).
local function median_sorted(v)
    local n = #v
    if n % 2 == 1 then return v[(n + 1) // 2] + 0.0 end
    return (v[n // 2] + v[n // 2 + 1]) / 2
end

-- roofline: kernel kinds far below the roof that binds them at their arithmetic intensity, judged
-- by their median launch (one preempted launch of 4 ms among 30 us ones made the sum's rate a
-- hundredth of the kernel's); the launches slower than the median one by more than
-- roofline_outlier_ratio are named. The same groups as findings_rules.c computes in C.
function M.roofline(ix, out, ctx, TH)
    local info = ctx.device_info
    if not info or not info.peak_gflops then return end
    local groups, order = {}, {}
    for _, k in ipairs(ix.kernels) do
        if k.cat == "kernel" and k.dur_ns > 0 and (k.flops > 0 or k.bytes > 0) then
            local g = groups[k.name]
            if not g then
                g = {kernel = k.name, launches = 0, flops = 0, bytes = 0, time_ns = 0, ts = k.ts_ns, each = {}}
                groups[k.name] = g
                order[#order + 1] = g
            end
            g.launches, g.flops, g.bytes, g.time_ns = g.launches + 1, g.flops + k.flops, g.bytes + k.bytes,
                g.time_ns + k.dur_ns
            g.each[#g.each + 1] = k
        end
    end
    for _, g in ipairs(order) do
        local rates, durs = {}, {}
        for i, k in ipairs(g.each) do
            rates[i] = {(g.flops > 0 and k.flops or k.bytes) / k.dur_ns, k.dur_ns}
            durs[i] = k.dur_ns
        end
        table.sort(rates, function(a, b) return a[1] < b[1] end)
        table.sort(durs)
        local r = {}
        for i, x in ipairs(rates) do r[i] = x[1] end
        g.rate, g.median_ns = median_sorted(r), median_sorted(durs)
        g.outliers, g.outlier_ns, g.outlier_max_ns = 0, 0, 0
        for _, x in ipairs(rates) do
            if x[1] * TH.roofline_outlier_ratio < g.rate then
                g.outliers, g.outlier_ns = g.outliers + 1, g.outlier_ns + x[2]
                g.outlier_max_ns = math.max(g.outlier_max_ns, x[2])
            end
        end
        g.each = nil
    end
    M.report.roofline({roofline = order}, out, ctx, TH)
end
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
function M.unreliable(ix, out, ctx, TH) M.report.unreliable({steps = M.step_delay(ix)}, out, ctx, TH) end
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
local function inside_windows(ix, pick)
    local hits, n = {}, 0
    for _, w in ipairs(ix.windows) do
        if w.cat ~= "trace" then
            local t0, t1 = w.ts_ns, w.ts_ns + w.dur_ns
            for _, e in ipairs(pick) do
                if e.ts_ns >= t0 and e.ts_ns <= t1 then
                    n = n + 1
                    local h = hits[w.name]
                    if not h then
                        h = {window = w.name, count = 0, time_ns = 0, names = {}, ts = e.ts_ns}
                        hits[w.name], hits[#hits + 1] = h, h -- in the order first hit (as in C)
                    end
                    h.count, h.time_ns = h.count + 1, h.time_ns + e.dur_ns
                    h.names[e.name] = (h.names[e.name] or 0) + 1
                end
            end
        end
    end
    return hits, n
end

local function count_list(names)
    local parts = {}
    for name, c in pairs(names) do parts[#parts + 1] = string.format("%s x%d", name, c) end
    table.sort(parts)
    return table.concat(parts, ", ")
end

function M.sync(ix, out)
    local syncs = {}
    for _, r in ipairs(ix.runtime) do
        if r.args and r.args.api == "sync" then syncs[#syncs + 1] = r end
    end
    M.report.sync({sync = inside_windows(ix, syncs)}, out)
end
function M.report.sync(G, out)
    for _, h in ipairs(G.sync) do
        out[#out + 1] = {rule = "sync", severity = "warn",
            message = string.format("%s synchronizes the host with the device %d time%s (%s; %s waiting): each " ..
                "stops the host from queueing work ahead", h.window, h.count, h.count == 1 and "" or "s",
                count_list(h.names), us(h.time_ns)),
            evidence = {window = h.window, count = h.count, calls = h.names, time_ns = h.time_ns, ts_ns = h.ts}}
    end
end

function M.memcpy(ix, out)
    local copies = {}
    for _, k in ipairs(ix.kernels) do
        if k.cat == "memcpy" then copies[#copies + 1] = k end
    end
    M.report.memcpy({memcpy = inside_windows(ix, copies)}, out)
end
function M.report.memcpy(G, out)
    for _, h in ipairs(G.memcpy) do
        out[#out + 1] = {rule = "memcpy", severity = "warn",
            message = string.format("%s copies between host and device %d time%s (%s; %s on the device)", h.window,
                h.count, h.count == 1 and "" or "s", count_list(h.names), us(h.time_ns)),
            evidence = {window = h.window, count = h.count, copies = h.names, time_ns = h.time_ns, ts_ns = h.ts}}
    end
end

return M
