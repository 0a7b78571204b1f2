-- wb.sweep_shards: how wb.sweep splits its points over --shard I/N: the option's parsing, the
-- groups that stay in one shard (a point's modes) and the deterministic, cost-balanced assignment
-- of groups to shards. wb.sweep re-exports them (wb.sweep.parse_shard, .assign, .groups).
local M = {}

-- "I/N" -> I, N; or nil and a message naming the problem.
function M.parse_shard(text)
    local i, n = tostring(text):match("^%s*(%d+)%s*/%s*(%d+)%s*$")
    i, n = math.tointeger(tonumber(i)), math.tointeger(tonumber(n))
    if not i or not n then
        return nil, string.format("--shard '%s': expected I/N, two whole numbers with 1 <= I <= N (e.g. --shard 2/4)",
            tostring(text))
    end
    if n < 1 then return nil, string.format("--shard %s: the number of shards N must be at least 1", text) end
    if i < 1 then return nil, string.format("--shard %s: shards are numbered from 1 (1/%d .. %d/%d)", text, n, n, n) end
    if i > n then return nil, string.format("--shard %s: there are only %d shards (1/%d .. %d/%d)", text, n, n, n, n) end
    return i, n
end

-- Which shard (1..count) runs each of n units (a sweep's groups of points, M.groups). Without
-- costs: round robin over the units in order, so every shard gets every part of the grid
-- (interleaved, not contiguous blocks). With costs: the costliest unit first, each to the shard
-- with the least cost so far (ties: the lowest shard). Deterministic: the same units, costs and
-- count give the same assignment everywhere. Every shard computes it on its own, so a sweep's
-- cost(point) must depend on the sweep's definition only (axes, config, constants), never on
-- anything measured (a calibration differs from one process or node to the next, and two shards
-- would then both run, or both skip, a point).
function M.assign(npoints, count, cost)
    local shard_of = {}
    if not cost then
        for i = 1, npoints do shard_of[i] = (i - 1) % count + 1 end
        return shard_of
    end
    local order = {}
    for i = 1, npoints do order[i] = i end
    table.sort(order, function(a, b)
        if cost[a] ~= cost[b] then return cost[a] > cost[b] end
        return a < b
    end)
    local load = {}
    for s = 1, count do load[s] = 0 end
    for _, i in ipairs(order) do
        local best = 1
        for s = 2, count do if load[s] < load[best] then best = s end end
        shard_of[i] = best
        load[best] = load[best] + cost[i]
    end
    return shard_of
end

-- The groups of points that stay in one shard: points that differ only on the axes a derived
-- column pairs them across (its base's axes: speedup_vs_eager's `mode`) are one group, so that
-- both rows of every such ratio are measured by one process, alternating round by round (split
-- across shards, a ratio would set round k of one process against round k of another). Returns
-- the groups in the order of their first point, each an array of point indices, and the name of
-- each group (point_name(axes, point) over the other axes; "" when every axis is paired).
function M.groups(axes, points, paired, point_name)
    local kept = {}
    for _, a in ipairs(axes) do
        if not paired[a.name] then kept[#kept + 1] = a end
    end
    local groups, by_key = {}, {}
    for j, p in ipairs(points) do
        local key = point_name(kept, p)
        local g = by_key[key]
        if not g then
            g = {name = key}
            by_key[key] = g
            groups[#groups + 1] = g
        end
        g[#g + 1] = j
    end
    return groups
end

return M
