-- wb.sweep_rounds: which points a sweep measures once more after its --rounds (a sweep's again=):
-- the points of every group (the points sharing a value of one axis, e.g. a token count) that is
-- not settled yet: a row of it unstable (its noise above the target) or UNSURE against the base
-- row, or a peer timed at that value unstable or UNSURE against the base (wb.verdict's rule). A
-- whole group goes again, base included, so that its rows' rounds stay paired in time.
--
--   wb.sweep.unsettled(rows, points, {by = "tokens", series = "mode", base = "eager",
--       verdict = "speedup_vs_eager_verdict", target_noise = 0.05, noise = "noise",
--       peers = {{name = "PyTorch", timing = function(value) -> {samples =, per_round =} or nil}}})
--   -> the points of the unsettled groups, and why (text for the round's progress line)
local rule = require("wb.verdict")

local M = {}

local function check(rows, points, o)
    local function bad(fmt, ...) error("sweep.unsettled: " .. string.format(fmt, ...), 3) end
    if type(rows) ~= "table" then bad("rows must be an array of rows, got %s", type(rows)) end
    if type(points) ~= "table" then bad("points must be an array of points, got %s", type(points)) end
    if type(o) ~= "table" then bad("options must be a table {by=, series=, base=, verdict=, ...}, got %s", type(o)) end
    for _, k in ipairs({"by", "series", "verdict"}) do
        if type(o[k]) ~= "string" then bad("%s= must be a column name, got %s", k, type(o[k])) end
    end
    if o.base == nil then bad("base= must be the series value the verdicts are against (e.g. \"eager\")") end
    if type(o.target_noise) ~= "number" or o.target_noise <= 0 then bad("target_noise= must be a number above 0") end
    for i, pr in ipairs(o.peers or {}) do
        if type(pr) ~= "table" or type(pr.name) ~= "string" or type(pr.timing) ~= "function" then
            bad("peers[%d] must be {name=text, timing=function(value) -> timing or nil}", i)
        end
    end
end

function M.unsettled(rows, points, o)
    check(rows, points, o)
    local noise_column = o.noise or "noise"
    local groups, order = {}, {}
    for _, r in ipairs(rows) do
        local v = r[o.by]
        if not groups[v] then groups[v], order[#order + 1] = {}, v end
        table.insert(groups[v], r)
    end
    local more, why = {}, {}
    for _, v in ipairs(order) do
        local reasons, base = {}, nil
        for _, r in ipairs(groups[v]) do
            if r[o.series] == o.base then base = r end
            local noise = r[noise_column]
            if noise and noise > o.target_noise then
                reasons[#reasons + 1] = string.format("%s noise %.0f%%", tostring(r[o.series]), noise * 100)
            elseif r[o.verdict] == "UNSURE" then
                reasons[#reasons + 1] = tostring(r[o.series]) .. " UNSURE"
            end
        end
        for _, pr in ipairs(o.peers or {}) do
            local tp = pr.timing(v)
            if tp then
                local side = rule.side(tp)
                if side.noise > o.target_noise then
                    reasons[#reasons + 1] = string.format("%s noise %.0f%%", pr.name, side.noise * 100)
                elseif base and rule.verdict({samples = base.samples_ms, per_round = base.samples_ms_per_round},
                    tp) == "UNSURE" then
                    reasons[#reasons + 1] = pr.name .. " UNSURE"
                end
            end
        end
        if #reasons > 0 then
            more[v] = true
            local shown = math.type(v) == "float" and v == math.floor(v) and string.format("%d", v) or tostring(v)
            why[#why + 1] = string.format("%s %s (%s%s)", o.by, shown,
                table.concat(reasons, ", ", 1, math.min(#reasons, 3)), #reasons > 3 and ", ..." or "")
        end
    end
    local again = {}
    for _, p in ipairs(points) do if more[p[o.by]] then again[#again + 1] = p end end
    return again, table.concat(why, "; ")
end

return M
