-- wb.diff_steps: what the steps of a recording say about its samples, for wb.diff's verdicts.
--
-- A node's occurrences within one step are not independent draws: a burst of other work on the
-- machine slows the nodes of the steps it overlaps, and a rank test that counts each occurrence
-- as a sample reads one slow spell as strong evidence. So, per recording:
--   * burst steps: a step's factor is the median, over the nodes that occur in it, of the node's
--     time in that step against its median step, taken against the quiet level (the steps' 10th
--     percentile: other work slows steps, never speeds them); a step 10% or more above it ran slower
--     as a whole (the machine, not a node);
--     A step whose own time is 10% or more above the steps' quiet level (their 10th percentile)
--     is a burst step too: a burst on the core of a parallel kernel's worker slows that kernel
--     severalfold and the many small single-threaded nodes hardly, so their median misses it;
--   * busy steps: a step whose host thread waited for a CPU for 10% or more of its time (the
--     run-queue delay the profiler samples), and for more than twice the steps' median share (a
--     machine busy through every step moves all of them alike: the common shift's case);
--   * thin steps: a step whose cpu kernels ran on fewer threads, on average, than in the
--     recording's fullest step (the pool runs kernels on one thread while other processes keep
--     the cores busy: the threads each kernel event records);
--   * burst, busy and thin steps are left out, with the step after each (for a single disturbed
--     step, when too few would remain, the one after it is kept), while five or more quiet steps remain (five a side is the
--     fewest from which the exact rank test can reach p < 0.01), so that what is judged and shown
--     is what ran; with fewer, every step is kept, and a FASTER or SLOWER must show on the quiet
--     steps alone as well (their medians apart the same way), else it is UNSURE (wb.diff: basis
--     "burst"). Nothing is rescaled: a
--     burst slows the nodes of a step unevenly (a GEMM whose thread shares a core with the burst
--     2x, a single-threaded op hardly), so no one factor undoes it;
--   * the unit: with six or more steps a side each node's sample is its median time per step (one
--     per step, as independent as steps are); with fewer, every occurrence counts, so that a node
--     repeated within a step still gives the test something to read.
-- needed() says how many steps a side a verdict would take when the samples at hand cannot give one.

local stats = require("wb.stats")

local M = {BURST = 0.10, BUSY_SHARE = 0.10, MIN_STEPS = 6, MIN_QUIET = 5, MIN_NODES = 4,
    POWER_Z = 0.8416} -- 80% power

local function split_steps(n, key, nsteps)
    local s = n[key]
    if type(s) ~= "table" or #s == 0 or type(n.steps) ~= "table" then return nil end
    local out, at = {}, 0
    for k = 1, nsteps do
        local c = n.steps[k] or 0
        if c > 0 then
            if at + c > #s then return nil end
            out[k] = table.move(s, at + 1, at + c, 1, {})
            at = at + c
        end
    end
    return at == #s and out or nil
end

-- per_step(node, key, nsteps) -> {[k] = {samples of step k}} from a node's samples (key "host" or
-- "device", one per occurrence, in step order) and its occurrences per step (node.steps), or nil
-- when they do not add up.
-- Split once per node and key: plan, samples and diff read it many times.
local split = setmetatable({}, {__mode = "k"})
function M.per_step(n, key, nsteps)
    local done = split[n]
    if done and done[key] ~= nil then return done[key] or nil end
    local ps = split_steps(n, key, nsteps)
    split[n] = done or {}
    split[n][key] = ps or false
    return ps
end

-- The plan for one recording (a wb.diff model): {keep = {[k] = bool} (the steps judged), quiet =
-- {[k] = bool} (steps neither burst, busy nor thin), check = true when the quiet steps were too
-- few to judge alone (every step kept: a verdict must hold on the quiet ones too), burst, busy,
-- thin, left_out (step lists), factor = {[k] = the step's factor against the quiet level},
-- most_added = the most host time a disturbed step took over the quickest step, ns (at least what
-- other work added to it; with 3 steps or more), kept = count}.
-- key_of(node) -> the sample key judged for that node; min_abs: nodes whose median step is below
-- it (the clock's resolution) do not vote on a step's factor.
function M.plan(m, key_of, min_abs)
    local nsteps = #m.steps
    local logs = {}
    for _, path in ipairs(m.order) do
        local n = m.nodes[path]
        local ps = M.per_step(n, key_of(n), nsteps)
        if ps then
            local med, all = {}, {}
            for k, v in pairs(ps) do med[k] = stats.median(v); all[#all + 1] = med[k] end
            local mid = #all >= 3 and stats.median(all) or 0
            if mid >= min_abs then
                for k, x in pairs(med) do
                    if x > 0 then logs[k] = logs[k] or {}; table.insert(logs[k], math.log(x / mid)) end
                end
            end
        end
    end
    local p = {factor = {}, keep = {}, quiet = {}, burst = {}, busy = {}, thin = {}, after = {}, after_kept = {},
        left_out = {}, kept = nsteps}
    local raw, voted = {}, {}
    for k = 1, nsteps do
        local l = logs[k]
        if l and #l >= M.MIN_NODES then raw[k] = math.exp(stats.median(l)); voted[#voted + 1] = raw[k] end
    end
    -- other work only ever slows a step: the quiet level is the steps' 10th percentile, not their
    -- median (a burst over most of a recording would be the median)
    local level = #voted >= 3 and stats.summarize(voted).p10 or 1
    -- the step as a whole against its quiet level too: a burst that slows the parallel kernels
    -- (a worker thread sharing its core) and hardly the many small single-threaded nodes moves
    -- the median of the nodes little and the step's time a lot
    local totals = {}
    for k, st in ipairs(m.steps) do totals[k] = st.host_ns end
    local total_level = nsteps >= 3 and stats.summarize(totals).p10 or 0
    -- thin steps: the thread pool runs kernels on one thread while other processes keep the cores
    -- busy (wb.set_num_threads); a step whose cpu kernels ran on fewer threads on average than in
    -- the recording's fullest step ran another configuration
    local full = 0
    for _, st in ipairs(m.steps) do full = math.max(full, st.threads_mean or 0) end
    -- a busy step waited for a CPU for BUSY_SHARE of it or more, and more than twice the steps'
    -- median share: a machine busy through every step is the common shift's, not a step's
    local shares = {}
    for k, st in ipairs(m.steps) do shares[k] = st.host_ns > 0 and (st.wait_ns or 0) / st.host_ns or 0 end
    local usual = nsteps > 0 and stats.median(shares) or 0
    for k = 1, nsteps do
        p.factor[k], p.keep[k], p.quiet[k] = raw[k] and raw[k] / level or 1, true, true
        if total_level > 0 and m.steps[k].host_ns / total_level > p.factor[k] then
            p.factor[k] = m.steps[k].host_ns / total_level
        end
        if p.factor[k] >= 1 + M.BURST then p.burst[#p.burst + 1] = k; p.quiet[k] = false end
        if shares[k] >= M.BUSY_SHARE and shares[k] > 2 * usual then p.busy[#p.busy + 1] = k; p.quiet[k] = false end
        local mean = m.steps[k].threads_mean
        if mean and mean < full - 1e-9 then p.thin[#p.thin + 1] = k; p.quiet[k] = false end
    end
    -- what a burst leaves behind: the step after a disturbed one starts with the pool's workers
    -- gone to sleep and its data out of cache (measured under a switching load: the first range of
    -- such steps 13-15% slower than in the recording's other quiet steps)
    local undisturbed = 0 -- steps neither burst, busy nor thin
    for k = 1, nsteps do
        if p.quiet[k] then undisturbed = undisturbed + 1 end
        if k > 1 and p.quiet[k] and not p.quiet[k - 1] then p.after[#p.after + 1] = k end
    end
    -- what is left out: every disturbed step and the step after each, while MIN_QUIET remain; else,
    -- for one disturbed step in an otherwise quiet recording (six steps, say), that step alone,
    -- keeping the one after it (one step fewer to judge weighs more than one after-effect; under a
    -- switching load, with several, keeping them made "up" read 0.88x in 3 of 40 A/A pairs); else
    -- none, and a verdict must hold on the quiet steps too
    if undisturbed == nsteps - 1 and undisturbed - #p.after < M.MIN_QUIET and undisturbed >= M.MIN_QUIET then
        p.after_kept, p.after = p.after, {}
    end
    for _, k in ipairs(p.after) do p.quiet[k] = false end
    if nsteps >= 3 then
        local quickest, most = math.huge, 0
        for _, t in ipairs(totals) do quickest = math.min(quickest, t) end
        for k = 1, nsteps do
            if not p.quiet[k] then most = math.max(most, totals[k] - quickest) end
        end
        p.most_added = most
    end
    local n_quiet = undisturbed - #p.after
    if n_quiet < nsteps and n_quiet >= M.MIN_QUIET then
        for k = 1, nsteps do
            if not p.quiet[k] then p.keep[k] = false; p.left_out[#p.left_out + 1] = k end
        end
        p.kept = n_quiet
    elseif n_quiet < nsteps then
        p.check = true
    end
    return p
end

-- samples(node, key, m, plan, unit[, only]) -> the samples a verdict reads: per step judged
-- (plan.keep, or the steps of `only`), the node's median time in it (unit "step") or each
-- occurrence (unit "occurrence"). A node whose samples do not split by step gives them as recorded.
function M.samples(n, key, m, plan, unit, only)
    local ps = M.per_step(n, key, #m.steps)
    if not ps then return n[key] or {} end
    local use = only or plan.keep
    local out = {}
    for k = 1, #m.steps do
        local v = ps[k]
        if v and use[k] then
            if unit == "step" then
                out[#out + 1] = stats.median(v)
            else
                for _, x in ipairs(v) do out[#out + 1] = x end
            end
        end
    end
    return out
end

-- The steps of a model as samples of one metric ("host_ns", "device_ns"), under the plan (or only
-- the steps of `only`).
function M.step_samples(m, field, plan, only)
    local use = only or plan.keep
    local out = {}
    for k, st in ipairs(m.steps) do
        if use[k] then out[#out + 1] = st[field] end
    end
    return out
end

local function binomial(n, k)
    local c = 1
    for i = 1, k do c = c * (n - k + i) / i end
    return c
end

-- The z a two-sided test at level alpha needs (bisection on the normal tail).
local function z_for(alpha)
    local lo, hi = 0, 10
    for _ = 1, 60 do
        local mid = (lo + hi) / 2
        if 2 * stats.normal_sf(mid) > alpha then lo = mid else hi = mid end
    end
    return hi
end

-- needed(sa, sb, alpha) -> the samples a side at which the rank test would reach alpha at the
-- effect these samples show: never fewer than the exact test's floor (the smallest n with 2 /
-- C(2n, n) < alpha: 5 at 0.01; 3 against 3 cannot go below p = 0.1); for two sides apart by more
-- than their spread, that floor; else Noether's size for the observed P(A < B) at 80% power.
function M.needed(sa, sb, alpha)
    local floor = 1
    while 2 / binomial(2 * floor, floor) >= alpha do floor = floor + 1 end
    if #sa == 0 or #sb == 0 then return floor end
    local a, b = stats.summarize(sa), stats.summarize(sb)
    local lo, hi = a, b
    if b.median < a.median then lo, hi = b, a end
    local spread = math.max(a.iqr, b.iqr)
    if lo.max < hi.min and hi.min - lo.max > spread then return floor end
    local u = 0
    for _, x in ipairs(sa) do
        for _, y in ipairs(sb) do u = u + (x < y and 1 or x == y and 0.5 or 0) end
    end
    local d = math.abs(u / (#sa * #sb) - 0.5)
    if d < 1e-9 then return math.huge end
    local n = math.ceil((z_for(alpha) + M.POWER_Z) ^ 2 / (6 * d * d))
    return math.max(floor, n)
end

return M
