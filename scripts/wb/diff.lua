-- wb.diff: two profiles (stopped sessions, or traces read back by wb.profiler.load_trace) aligned
-- node by node: what changed in the structure, which nodes got faster or slower beyond the noise
-- (compare's rule), and where the total's change went.
--
-- A node is a range, a host op, a runtime call or a device kernel, named by its path: the ranges
-- around it, then each op as name + input shapes + dtypes, then each kernel by its kind (op,
-- dtype, isa, layout, epilogue: fields the kernel carries, never read out of its name). Repeats of
-- a signature under one parent are one node, as key_averages makes one row of them (the three
-- forwards of a loop, the two linears of a GeGLU); per occurrence (o.per_occurrence), the n-th
-- repeat is a node of its own, its rank in the path. Every occurrence, in every step, is a sample.
-- Formatting lives in wb.diff_text and wb.diff_html; this module only computes.

local stats = require("wb.stats")
local compare = require("wb.compare")
local steps = require("wb.diff_steps")

local M = {MIN_ABS_NS = 1000, -- medians closer than this are SAME (see judge)
    BEYOND_ADDED = 2} -- a change this many times what other work added to a step is not its (see held)

-- what the model's nodes are (core/observe/profiler_groups.c computes them)
local HOST = {range = true, op = true, runtime = true}
local DEVICE = {kernel = true, memcpy = true, memset = true}
local KIND_FIELDS = {"op", "dtype", "isa", "layout", "epilogue"}
-- what a kernel of the same kind may still change: shown as a kind change, not an alignment key
-- (not `threads`: how many workers a launch got is the pool's choice at the time, not a kind)
local DETAIL_FIELDS = {"tile"}

local function fail(msg) error({diff_error = msg}, 0) end
M.fail = fail

-- a field's value as text (a whole float as an integer), nil for what is neither string nor number
local function scalar(v)
    if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
    return (type(v) == "string" or type(v) == "number") and tostring(v) or nil
end

-- model_of(p[, o]) -> the model of a stopped profile, a loaded trace or a list of events made one
-- (wb.profiler.from_events): a wb.profiler object, its model computed in C over its store
-- (s:diff_model(), core/observe/profiler_groups.c): no table per event; the nodes keep their samples, and only the steps wb.diff_html draws keep their tree:
-- o.draw = N (1-based; past the last, the last; then m.drawn_step = N), "all", "none", or by
-- default the median step by host time (m.drawn_step). o.per_occurrence: the n-th repeat of a
-- signature under one parent is a node of its own (its rank in the path).
function M.model_of(p, o)
    o = o or {}
    local m, err = p:_result():diff_model({draw = o.draw, per_occurrence = o.per_occurrence and true or false})
    if not m then fail(err) end
    m.notes = {}
    if m.synthetic_step then m.notes[1] = "no steps recorded (p:step()): the whole trace is one step" end
    local open = {}
    for _, x in ipairs(m.step_tree) do
        local st = m.steps[x.step]
        if not st.root then st.root = {children = {}} end
        if x.depth == 0 then open[0] = st.root end
        local c = {path = x.path, e = {ts_ns = x.ts_ns, dur_ns = x.dur_ns, cat = x.cat}, children = {}}
        local up = open[x.depth]
        up.children[#up.children + 1] = c
        open[x.depth + 1] = c
    end
    m.step_tree, m.synthetic_step = nil, nil
    return m
end

-- The step an HTML timeline draws by default: the one whose host time is the median of the
-- steps' (the lower median, the earliest of equal ones), as the C model picks it.
function M.median_step(m)
    local d = {}
    for k, st in ipairs(m.steps) do d[k] = st.host_ns end
    table.sort(d)
    local median = d[(#d - 1) // 2 + 1]
    for k, st in ipairs(m.steps) do if st.host_ns == median then return k end end
end

-- ---- statistics -------------------------------------------------------------------------------

local function sum(t) local s = 0; for _, v in ipairs(t) do s = s + v end; return s end

-- |log| of the ratio of the medians of a sample list's two halves, in recording order (0 with
-- fewer than 4 samples: nothing to split)
local function half_drift(s)
    local n = #s
    if n < 4 then return 0 end
    local h1, h2 = {}, {}
    for i = 1, n // 2 do h1[#h1 + 1] = s[i] end
    for i = n - n // 2 + 1, n do h2[#h2 + 1] = s[i] end
    local m1, m2 = stats.median(h1), stats.median(h2)
    if m1 <= 0 or m2 <= 0 then return 0 end
    return math.abs(math.log(m1 / m2))
end

-- {median_a, median_b, ratio, lo, hi, verdict, p, basis, noise} by compare's rule, or nil when a
-- side has no samples. lo..hi bounds B/A from the two medians' 95% intervals.
local function judge(sa, sb, min_effect, common)
    if #sa == 0 or #sb == 0 then return nil end
    local ma, la, ha, ca = stats.median_ci(sa)
    local mb, lb, hb, cb = stats.median_ci(sb)
    local v, ratio, p, basis, noise = compare.verdict({median = ma, samples = sa}, {median = mb, samples = sb}, min_effect)
    -- below the clock's and the recorder's own resolution a ratio means nothing (a 100 ns
    -- transpose "4x slower" at 400 ns): SAME, whatever the ranks say
    if math.abs(mb - ma) < M.MIN_ABS_NS then v, basis = "SAME", "resolution" end
    -- the machine moves while a profile records: the change between the first and the second half
    -- of one profile's occurrences is what the same program showed with nothing changed, so a
    -- change between the profiles no larger than that is not told from it
    local drift = math.max(half_drift(sa), half_drift(sb))
    if (v == "SLOWER" or v == "FASTER") and math.abs(math.log(ratio)) <= drift then v, basis = "UNSURE", "drift" end
    -- the whole program moved by a common factor (the machine between the two recordings): a node
    -- is FASTER or SLOWER only if it still is against A scaled by that factor
    if (v == "SLOWER" or v == "FASTER") and common and common ~= 1 then
        local scaled = {}
        for i, x in ipairs(sa) do scaled[i] = x * common end
        local rel = compare.verdict({median = ma * common, samples = scaled}, {median = mb, samples = sb}, min_effect)
        if rel ~= v then v, basis = "UNSURE", "common shift" end
    end
    -- the interval only where both medians' intervals reach 95% (6 samples a side): from fewer,
    -- [min, max] covers less, and one sample a side gives an "interval" of the ratio itself
    local interval = ca >= 0.95 and cb >= 0.95
    -- no verdict from these samples although the change is above the minimum and the noise: how
    -- many samples a side would give one at this effect (wb.diff_steps.needed)
    local needs = v == "UNSURE" and basis == "samples" and steps.needed(sa, sb, compare.ALPHA) or nil
    return {median_a = ma, median_b = mb, ratio = ratio, lo = interval and ha > 0 and lb / ha or nil,
        hi = interval and la > 0 and hb / la or nil, verdict = v, p = p, basis = basis, noise = noise, n_a = #sa,
        n_b = #sb, drift = drift, needs = needs ~= math.huge and needs or nil}
end

local function label_with_kernels(node)
    if #node.kernels == 0 or DEVICE[node.cat] then return node.label end
    local seen, names = {}, {}
    for _, k in ipairs(node.kernels) do
        if not seen[k] then seen[k] = true; names[#names + 1] = k end
    end
    if #names > 3 then names = {names[1], names[2], string.format("%d more", #names - 2)} end
    return node.label .. " (" .. table.concat(names, ", ") .. ")"
end
M.label_with_kernels = label_with_kernels

local function children_of(model)
    local ch = {}
    for _, path in ipairs(model.order) do
        local n = model.nodes[path]
        ch[n.parent] = ch[n.parent] or {}
        table.insert(ch[n.parent], n)
    end
    return ch
end

-- The paths of both models in the order the table shows them: A's nodes in A's order, and each
-- node only B has under the same parent after its nearest aligned sibling before it in B (after
-- the nodes only A has there: "gelu, mul" removed, then "geglu" added); a node's subtree follows it.
local function merged_order(ma, mb)
    local ca, cb = children_of(ma), children_of(mb)
    local out = {}
    local function walk(parent)
        local later = {} -- B-only children by the aligned sibling they follow ("^": none)
        local anchor = "^"
        for _, n in ipairs(cb[parent] or {}) do
            if ma.nodes[n.path] then anchor = n.path
            else later[anchor] = later[anchor] or {}; table.insert(later[anchor], n.path) end
        end
        local pending = later["^"] or {}
        local function flush()
            for _, path in ipairs(pending) do out[#out + 1] = path; walk(path) end
            pending = {}
        end
        for _, n in ipairs(ca[parent] or {}) do
            if mb.nodes[n.path] then flush() end
            out[#out + 1] = n.path
            walk(n.path)
            if mb.nodes[n.path] then pending = later[n.path] or {} end
        end
        flush()
    end
    walk("")
    return out
end

-- Structural changes under every parent both profiles have: the unaligned children of A and of B
-- between the same two aligned neighbours replace one another ("gelu + mul -> geglu"); alone, they
-- were removed or added. Kernels of one kind whose tile differs changed kind.
local function structure(ma, mb)
    local ca, cb = children_of(ma), children_of(mb)
    local changes = {}
    local parents = {""}
    for _, path in ipairs(ma.order) do if mb.nodes[path] then parents[#parents + 1] = path end end
    for _, parent in ipairs(parents) do
        local gaps, gap_order = {}, {}
        local function group(list, other, side)
            local gap = "^"
            for _, n in ipairs(list or {}) do
                if other.nodes[n.path] then gap = n.path
                else
                    if not gaps[gap] then gaps[gap] = {a = {}, b = {}}; gap_order[#gap_order + 1] = gap end
                    table.insert(gaps[gap][side], n)
                end
            end
        end
        group(ca[parent], mb, "a")
        group(cb[parent], ma, "b")
        for _, gap in ipairs(gap_order) do
            local g = gaps[gap]
            local kind = #g.a > 0 and #g.b > 0 and "replaced" or #g.a > 0 and "removed" or "added"
            local all_kernels = true
            for _, side in ipairs({g.a, g.b}) do for _, n in ipairs(side) do all_kernels = all_kernels and DEVICE[n.cat] ~= nil end end
            if kind == "replaced" and all_kernels then kind = "kernel kind" end
            changes[#changes + 1] = {kind = kind, parent = parent, a = g.a, b = g.b,
                parent_label = parent ~= "" and ma.nodes[parent].label or nil}
        end
    end
    for _, path in ipairs(ma.order) do
        local a, b = ma.nodes[path], mb.nodes[path]
        if b and a.fields then
            local diffs = {}
            for _, f in ipairs(DETAIL_FIELDS) do
                if a.fields[f] ~= b.fields[f] then
                    diffs[#diffs + 1] = {field = f, a = a.fields[f], b = b.fields[f]}
                end
            end
            if #diffs > 0 then
                changes[#changes + 1] = {kind = "kernel kind", parent = a.parent, a = {a}, b = {b}, fields = diffs,
                    parent_label = a.parent ~= "" and ma.nodes[a.parent] and ma.nodes[a.parent].label or nil}
            end
        end
    end
    -- for a replaced kernel, the fields that differ; then plain data (no instance trees) to return
    local function plain(n)
        return {path = n.path, label = n.label, cat = n.cat, kernels = n.kernels, fields = n.fields,
            described = label_with_kernels(n)}
    end
    for _, c in ipairs(changes) do
        if c.kind == "kernel kind" and not c.fields and #c.a == 1 and #c.b == 1 then
            c.fields = {}
            for _, f in ipairs(KIND_FIELDS) do
                if c.a[1].fields[f] ~= c.b[1].fields[f] then c.fields[#c.fields + 1] = {field = f, a = c.a[1].fields[f], b = c.b[1].fields[f]} end
            end
        end
        for _, side in ipairs({"a", "b"}) do
            for i, n in ipairs(c[side]) do c[side][i] = plain(n) end
        end
    end
    return changes
end

-- Kernels per step by kind in each profile: the kinds one of them lacks, and the counts that moved.
local function census(ma, mb)
    local function count(m)
        local c, names, order = {}, {}, {}
        for _, path in ipairs(m.order) do
            local n = m.nodes[path]
            if DEVICE[n.cat] then
                local key = n.kind_key
                if not c[key] then order[#order + 1] = key; names[key] = n.name; c[key] = 0 end
                c[key] = c[key] + #n.device
            end
        end
        for k, v in pairs(c) do c[k] = v / #m.steps end
        return c, names, order
    end
    local a, na, oa = count(ma)
    local b, nb, ob = count(mb)
    local gone, new, moved = {}, {}, {}
    for _, k in ipairs(oa) do
        if not b[k] then gone[#gone + 1] = {kind = k, name = na[k], per_step = a[k]}
        elseif math.abs(a[k] - b[k]) > 1e-9 then moved[#moved + 1] = {kind = k, name = na[k], a = a[k], b = b[k]} end
    end
    for _, k in ipairs(ob) do if not a[k] then new[#new + 1] = {kind = k, name = nb[k], per_step = b[k]} end end
    return {gone = gone, new = new, moved = moved}
end

-- The change of the mean per-step time of `parent` (the step itself for "") split into its aligned
-- children's changes, the added and the removed children, and what no child covers.
local function attribute(ma, mb, parent, metric, ca, cb)
    local na, nb = #ma.steps, #mb.steps
    local total_a, total_b
    if parent == "" then
        total_a, total_b = 0, 0
        for _, s in ipairs(ma.steps) do total_a = total_a + s[metric .. "_ns"] end
        for _, s in ipairs(mb.steps) do total_b = total_b + s[metric .. "_ns"] end
    else
        total_a, total_b = sum(ma.nodes[parent][metric]), sum(mb.nodes[parent][metric])
    end
    local r = {parent = parent, metric = metric, a_per_step = total_a / na, b_per_step = total_b / nb, rows = {},
        added = 0, removed = 0}
    r.change = r.b_per_step - r.a_per_step
    local covered = 0
    for _, n in ipairs(ca[parent] or {}) do
        local other = mb.nodes[n.path]
        if other then
            local c = sum(other[metric]) / nb - sum(n[metric]) / na
            r.rows[#r.rows + 1] = {path = n.path, label = n.label, contribution = c}
            covered = covered + c
        else
            r.removed = r.removed - sum(n[metric]) / na
        end
    end
    for _, n in ipairs(cb[parent] or {}) do
        if not ma.nodes[n.path] then r.added = r.added + sum(n[metric]) / nb end
    end
    r.unattributed = r.change - covered - r.added - r.removed
    table.sort(r.rows, function(x, y) return math.abs(x.contribution) > math.abs(y.contribution) end)
    return r
end

-- A profile's fingerprint as flat "name = value" pairs, from the context the trace carries and
-- the build that recorded it ({version =, commit =}: a trace's otherData.build, or this one's).
function M.fingerprint(ctx, build)
    local fp = {}
    if type(build) == "table" and scalar(build.version) then
        fp.build = string.format("%s (commit %s)", scalar(build.version), scalar(build.commit) or "unknown")
    end
    if type(ctx) ~= "table" then return fp end
    fp.device = scalar(ctx.device)
    local info = type(ctx.device_info) == "table" and ctx.device_info or {}
    fp.machine = scalar(info.name)
    fp.isa = scalar(info.isa)
    fp.threads = scalar(info.threads)
    local m = type(ctx.machine) == "table" and ctx.machine or {}
    fp.cpus = scalar(m.cpus)
    return fp
end

local function top_names(m)
    local names, seen = {}, {}
    for _, path in ipairs(m.order) do
        local n = m.nodes[path]
        if n.depth == 1 and not seen[n.label] then seen[n.label] = true; names[#names + 1] = n.label end
    end
    if #names > 6 then names = {names[1], names[2], names[3], names[4], names[5], string.format("%d more", #names - 5)} end
    return table.concat(names, ", ")
end

-- diff(ma, mb, o) -> the whole comparison of two models (see M.model). o: min_effect (fraction),
-- fingerprint_a/_b (flat tables), name_a/_b. Raises {diff_error} when nothing aligns. r.nodes: a
-- row per node of either side in the table's order; a node only one side has carries only = "A"
-- (verdict "removed") or "B" ("added").
function M.diff(ma, mb, o)
    o = o or {}
    local aligned_top = false
    for _, path in ipairs(ma.order) do
        if ma.nodes[path].depth == 1 and mb.nodes[path] then aligned_top = true; break end
    end
    if not aligned_top then
        fail(string.format("nothing aligns: these look like different programs (A's top level: %s; B's: %s)",
            top_names(ma), top_names(mb)))
    end
    local r = {a = {name = o.name_a or "A", steps = #ma.steps}, b = {name = o.name_b or "B", steps = #mb.steps},
        notes = {}, nodes = {}, changes = structure(ma, mb), kernels = census(ma, mb)}
    for _, n in ipairs(ma.notes) do r.notes[#r.notes + 1] = "A: " .. n end
    for _, n in ipairs(mb.notes) do r.notes[#r.notes + 1] = "B: " .. n end
    if #ma.steps ~= #mb.steps then
        r.notes[#r.notes + 1] = string.format("A has %d step(s), B %d: contributions are per step (means); with fewer " ..
            "than 3 samples on a side no change is called FASTER or SLOWER", #ma.steps, #mb.steps)
    elseif #ma.steps < 3 then
        r.notes[#r.notes + 1] = string.format("%d step(s) each: nodes that occur once per step have too few samples " ..
            "for a verdict (UNSURE unless the change is under the minimum effect)", #ma.steps)
    end
    -- fingerprint differences
    local fa, fb, diffs = o.fingerprint_a or {}, o.fingerprint_b or {}, {}
    for _, k in ipairs({"device", "machine", "isa", "threads", "cpus", "build"}) do
        if fa[k] ~= fb[k] then diffs[#diffs + 1] = {field = k, a = fa[k], b = fb[k]} end
    end
    r.fingerprint = diffs
    r.build = {a = fa.build, b = fb.build} -- shown whether or not they differ
    local function median_wait(m)
        local w = {}
        for i, st in ipairs(m.steps) do w[i] = st.wait_ns end
        return stats.median(w)
    end
    -- the run-queue delay: told, not used as a gate (a spinning node that is descheduled makes
    -- its own wait, and would hide itself behind it)
    r.wait_ns = {a = median_wait(ma), b = median_wait(mb)}
    local function mean_wait(m)
        local t = 0
        for _, st in ipairs(m.steps) do t = t + st.wait_ns end
        return t / #m.steps
    end
    r.wait_ns.a_mean, r.wait_ns.b_mean = mean_wait(ma), mean_wait(mb)
    if math.max(r.wait_ns.a, r.wait_ns.b) >= M.MIN_ABS_NS then
        r.notes[#r.notes + 1] = string.format("the host thread waited for a CPU %.1f us per step in A, %.1f us in B " ..
            "(medians of the run-queue delay): the machine was busy, times include that wait",
            r.wait_ns.a / 1e3, r.wait_ns.b / 1e3)
    end
    -- the steps: bursts and busy steps left out (or checked), and the unit of a sample (wb.diff_steps)
    local function key_of(n) return HOST[n.cat] and "host" or "device" end
    local pa, pb = steps.plan(ma, key_of, M.MIN_ABS_NS), steps.plan(mb, key_of, M.MIN_ABS_NS)
    local unit = (pa.kept >= steps.MIN_STEPS and pb.kept >= steps.MIN_STEPS) and "step" or "occurrence"
    r.steps = {unit = unit}
    for side, plan in pairs({a = pa, b = pb}) do
        r.steps[side] = {burst = plan.burst, busy = plan.busy, thin = plan.thin, after = plan.after,
            after_kept = plan.after_kept, left_out = plan.left_out, checked = plan.check or false, kept = plan.kept}
    end
    for _, side in ipairs({{"A", ma, pa}, {"B", mb, pb}}) do
        local name, m, plan = side[1], side[2], side[3]
        if #plan.left_out > 0 then
            local why = {}
            if #plan.burst > 0 then why[#why + 1] = string.format("%s ran 10%% or more slower as a whole than the " ..
                "quiet steps (a burst of other work, not a node)", table.concat(plan.burst, ", ")) end
            if #plan.busy > 0 then why[#why + 1] = string.format("%s waited for a CPU for %d%% or more of the step",
                table.concat(plan.busy, ", "), math.floor(steps.BUSY_SHARE * 100)) end
            if #plan.thin > 0 then why[#why + 1] = string.format("%s ran kernels on fewer threads than the " ..
                "other steps (the pool gives way to other work)", table.concat(plan.thin, ", ")) end
            if #plan.after > 0 then why[#why + 1] = string.format("%s came right after such a step (and start with " ..
                "its after-effects: workers asleep, data out of cache)", table.concat(plan.after, ", ")) end
            r.notes[#r.notes + 1] = string.format("%s: %d of %d steps left out of the verdicts: step(s) %s",
                name, #plan.left_out, #m.steps, table.concat(why, "; step(s) "))
        end
        if plan.check then
            local disturbed = {}
            for k = 1, #m.steps do if not plan.quiet[k] then disturbed[#disturbed + 1] = k end end
            r.notes[#r.notes + 1] = string.format("%s: step(s) %s ran slower as a whole, waited for a CPU or ran " ..
                "kernels on fewer threads (other work on the machine), too many to leave out (fewer than %d quiet steps): a change must also show on " ..
                "the quiet steps alone (their medians apart the same way), or, with fewer than two of them, be more " ..
                "than twice the time other work added to any of those steps, else its verdict is UNSURE", name,
                table.concat(disturbed, ", "), steps.MIN_QUIET)
        end
    end
    if unit == "occurrence" and math.min(pa.kept, pb.kept) < steps.MIN_STEPS then
        r.notes[#r.notes + 1] = string.format("fewer than %d steps a side: every occurrence is a sample (not one " ..
            "per step), and occurrences within a step share its conditions", steps.MIN_STEPS)
    end
    -- the most threads the cpu kernels of the steps judged ran on, per side: with the same thread
    -- count asked for, a side whose kernels never reached the other's ran another configuration
    -- (the pool on one thread while other processes kept the cores busy), and no node is told
    -- FASTER or SLOWER across that
    local function most_threads(m, plan)
        local most
        for k, st in ipairs(m.steps) do
            if plan.keep[k] and st.threads_max then most = math.max(most or 0, st.threads_max) end
        end
        return most
    end
    local ta, tb = most_threads(ma, pa), most_threads(mb, pb)
    if ta and tb and ta ~= tb and fa.threads == fb.threads then
        r.threads = {a = ta, b = tb}
        r.notes[#r.notes + 1] = string.format("the kernels ran on at most %d thread(s) in A and %d in B with the same " ..
            "thread count asked for: the pool ran on fewer while other processes kept the cores busy, so the two " ..
            "recordings ran different configurations and no change is called FASTER or SLOWER (record again on a " ..
            "quiet machine)", ta, tb)
    end
    -- the factor every aligned node moved by (median of their ratios; nodes above the resolution,
    -- and at least 4 of them, else none): a machine that ran faster or slower while recording
    -- (the samples as judged: burst, busy and thin steps out)
    local logs = {}
    for _, path in ipairs(ma.order) do
        local a, b = ma.nodes[path], mb.nodes[path]
        if b then
            local key = key_of(a)
            local sa, sb = steps.samples(a, key, ma, pa, unit), steps.samples(b, key, mb, pb, unit)
            if #sa > 0 and #sb > 0 then
                local x, y = stats.median(sa), stats.median(sb)
                if x >= M.MIN_ABS_NS and y >= M.MIN_ABS_NS then logs[#logs + 1] = math.log(y / x) end
            end
        end
    end
    local common = #logs >= 4 and math.exp(stats.median(logs)) or nil
    r.common_shift = common
    if common and math.abs(math.log(common)) >= math.log(1 + (o.min_effect or compare.MIN_EFFECT)) then
        r.notes[#r.notes + 1] = string.format("the aligned nodes moved by %.2fx (the median of their ratios): the " ..
            "machine ran at another speed, or the change is everywhere; a node is FASTER or SLOWER only if it " ..
            "still is against A scaled by %.2f", common, common)
    end
    -- a verdict's needed samples a side as steps a side: per step, or per occurrence (n samples
    -- from the kept steps)
    local function needs_steps(j, plan, n)
        if j and j.needs then
            j.needs_steps = unit == "step" and j.needs or math.ceil(j.needs * plan.kept / math.max(n, 1))
        end
        return j
    end
    -- with bursts over too many steps to leave out: a FASTER or SLOWER must also show on the quiet
    -- steps alone (too few for a test of their own: at least two samples a side, their medians'
    -- ratio in the same direction and at least the minimum effect), else UNSURE. Other work only
    -- slows a step, so only the side it would favour is checked: B's disturbed steps for SLOWER,
    -- A's for FASTER (A's bursts make B look faster, not slower: a 375x slower range once read
    -- UNSURE because the fast side's 10 ms sleeps jittered)
    -- Where the quiet steps are too few to check, a change in host time also holds when it is more
    -- than BEYOND_ADDED times the most host time any disturbed step of the side it would favour
    -- took over that side's quickest step: other work adds time to a node only by adding it to the
    -- node's step, so it cannot make a 20 ms busy loop out of steps it slowed by 0.1 ms (a CI run
    -- on a shared Xeon read such a range UNSURE, basis "burst": other work on the host ran the
    -- small linears of most steps 10% slower, and fewer than two quiet steps were left).
    local least = math.log(1 + (o.min_effect or compare.MIN_EFFECT))
    local function held(j, quiet_a, quiet_b, all_a, all_b)
        local favoured = j and (j.verdict == "SLOWER" and pb.check or j.verdict == "FASTER" and pa.check)
        if favoured then
            -- every step of both disturbed alike: nothing to set apart; one quiet sample, or none on
            -- one side only, shows nothing
            local shows = #quiet_a == 0 and #quiet_b == 0
            local checkable = #quiet_a >= 2 and #quiet_b >= 2
            if checkable then
                local x, y = stats.median(quiet_a), stats.median(quiet_b)
                local l = (x > 0 and y > 0) and math.log(y / x) or 0
                shows = math.abs(l) >= least and (l > 0) == (j.verdict == "SLOWER")
            end
            if not shows and not checkable and all_a and #all_a > 0 and #all_b > 0 then
                local bound = (j.verdict == "SLOWER" and pb or pa).most_added
                local change = (stats.median(all_b) - stats.median(all_a)) * (j.verdict == "SLOWER" and 1 or -1)
                if bound and change > M.BEYOND_ADDED * math.max(bound, M.MIN_ABS_NS) then
                    shows, j.beyond_added_ns = true, bound
                end
            end
            if not shows then j.verdict, j.basis = "UNSURE", "burst" end
        end
        return j
    end
    local function configured(j)
        if j and r.threads and (j.verdict == "SLOWER" or j.verdict == "FASTER") then
            j.verdict, j.basis, j.needs, j.needs_steps = "UNSURE", "threads", nil, nil
        end
        return j
    end
    local qa, qb = pa.check and pa.quiet or nil, pb.check and pb.quiet or nil
    local function judged(a, b, key)
        local sa, sb = steps.samples(a, key, ma, pa, unit), steps.samples(b, key, mb, pb, unit)
        local j = configured(needs_steps(judge(sa, sb, o.min_effect, common), pa, math.min(#sa, #sb)))
        if not (qa or qb) then return j end
        local host = key == "host" -- the steps' added time is host time
        return held(j, steps.samples(a, key, ma, pa, unit, qa), steps.samples(b, key, mb, pb, unit, qb),
            host and sa or nil, host and sb or nil)
    end
    local function total(field)
        local sa, sb = steps.step_samples(ma, field, pa), steps.step_samples(mb, field, pb)
        local j = configured(needs_steps(judge(sa, sb, o.min_effect, common), pa, pa.kept))
        if not (qa or qb) then return j end
        local host = field == "host_ns"
        return held(j, steps.step_samples(ma, field, pa, qa), steps.step_samples(mb, field, pb, qb),
            host and sa or nil, host and sb or nil)
    end
    r.total = {host = total("host_ns"), device = total("device_ns")}
    local ca, cb = children_of(ma), children_of(mb)
    r.labels = {}
    -- one row per node of either side: aligned ones judged; one side's alone as removed or added,
    -- with its median and its time per step (the attribution's removed and added terms)
    local function alone(n, m, verdict, sign)
        local function side(s)
            if #s == 0 then return nil end
            local x = {verdict = verdict, n_a = 0, n_b = 0}
            local key = sign < 0 and "a" or "b"
            x["median_" .. key], x["n_" .. key] = stats.median(s), #s
            return x
        end
        return side(n.host), sum(n.device) > 0 and side(n.device) or nil,
            HOST[n.cat] and sign * sum(n.host) / #m.steps or nil, sign * sum(n.device) / #m.steps
    end
    for _, path in ipairs(merged_order(ma, mb)) do
        local a, b = ma.nodes[path], mb.nodes[path]
        local n = a or b
        local row = {path = path, label = n.label, cat = n.cat, depth = n.depth,
            count_a = a and #a.device / #ma.steps or 0, count_b = b and #b.device / #mb.steps or 0}
        if a and b then
            r.labels[path] = a.label
            local has_device = sum(a.device) > 0 or sum(b.device) > 0
            row.host = judged(a, b, "host")
            row.device = has_device and judged(a, b, "device") or nil
            row.host_contribution = HOST[a.cat] and (sum(b.host) / #mb.steps - sum(a.host) / #ma.steps) or nil
            row.device_contribution = sum(b.device) / #mb.steps - sum(a.device) / #ma.steps
        elseif a then
            row.only = "A"
            row.host, row.device, row.host_contribution, row.device_contribution = alone(a, ma, "removed", -1)
        else
            row.only = "B"
            row.host, row.device, row.host_contribution, row.device_contribution = alone(b, mb, "added", 1)
        end
        r.nodes[#r.nodes + 1] = row
    end
    r.attribution = {host = {attribute(ma, mb, "", "host", ca, cb)}, device = {attribute(ma, mb, "", "device", ca, cb)}}
    for _, path in ipairs(ma.order) do
        if ma.nodes[path].cat == "range" and mb.nodes[path] then
            table.insert(r.attribution.host, attribute(ma, mb, path, "host", ca, cb))
        end
    end
    return r
end

-- The largest percentage by which the total or a node is SLOWER (0 when none is).
function M.worst_slower(r)
    local worst = 0
    local function see(j) if j and j.verdict == "SLOWER" then worst = math.max(worst, (j.ratio - 1) * 100) end end
    see(r.total.host)
    see(r.total.device)
    for _, n in ipairs(r.nodes) do see(n.host); see(n.device) end
    return worst
end

return M
