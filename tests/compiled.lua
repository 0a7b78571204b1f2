-- compiled.lua: what a wb.compile test reads back from a profile: the kernels that ran inside the
-- last "compiled region" range of one call.
local lu = require("luaunit")
local M = {}

-- Profiles fn (cpu and device activity) and returns the kernel events inside the last compiled
-- region, in time order, and that region's event; fails the test when fn ran no compiled region.
function M.kernels_in_region(fn)
    local p = wb.profiler.profile({activities = {"cpu", "device"}}, fn)
    local region, ks = nil, {}
    for _, e in ipairs(p:events()) do
        if e.cat == "range" and e.name == "compiled region" then region = e end
    end
    lu.assertNotNil(region, "no compiled region in the trace")
    for _, e in ipairs(p:events()) do
        if e.cat == "kernel" and e.ts_ns >= region.ts_ns and e.ts_ns <= region.ts_ns + region.dur_ns then ks[#ks + 1] = e end
    end
    return ks, region
end

return M
