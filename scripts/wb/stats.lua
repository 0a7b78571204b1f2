-- wb.stats: statistics of raw timing samples, the one place they are computed, so a sweep's own
-- results and a merge of its shards (which recomputes them from the raw samples) agree.
--
--   local s = require("wb.stats").summarize({1.2, 1.0, 1.1})
--   -- {n, median, p10, p25, p75, p90, iqr, noise}; noise = iqr / median

local M = {}

-- Linear interpolation between the closest ranks of sorted values (p in 0..1).
local function percentile(sorted, p)
    local pos = 1 + (#sorted - 1) * p
    local lo = math.floor(pos)
    local hi = math.min(lo + 1, #sorted)
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
end

function M.summarize(samples)
    if type(samples) ~= "table" or #samples == 0 then error("stats: summarize needs a non-empty array of numbers", 2) end
    local sorted = {}
    for i, v in ipairs(samples) do
        if type(v) ~= "number" or v ~= v then error(string.format("stats: sample %d is not a number", i), 2) end
        sorted[i] = v
    end
    table.sort(sorted)
    local s = {n = #sorted, median = percentile(sorted, 0.5), p10 = percentile(sorted, 0.1),
        p25 = percentile(sorted, 0.25), p75 = percentile(sorted, 0.75), p90 = percentile(sorted, 0.9)}
    s.iqr = s.p75 - s.p25
    s.noise = s.median ~= 0 and s.iqr / s.median or 0
    return s
end

return M
