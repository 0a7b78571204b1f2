-- wb.trace_info: what a loaded trace is and what it carries (its format, the fields the rules
-- need, the fingerprint a Kineto trace holds), from the session alone: wb.profiler's findings and
-- wb.trace both read it, and it reads neither.

local M = {}

local FORMATS = {workbench = "a workbench trace", kineto = "a torch.profiler trace (Kineto JSON)",
    legacy = "a torch.profiler trace (the legacy profiler's array, no Kineto)", chrome = "a Chrome trace from another tool"}

-- "workbench", "kineto", "legacy" or "chrome".
function M.format(q)
    local imp = q.trace_members and q.trace_members.import
    return type(imp) == "table" and imp.format or "workbench"
end

-- The fields a trace from another tool carries, as the rules name them (nil: the workbench's
-- own, which carries every field).
function M.fields(q)
    local imp = q.trace_members and q.trace_members.import
    if type(imp) ~= "table" then return nil end
    local n = function(k) return (tonumber(imp[k]) or 0) > 0 end
    return {ops = n("ops"), kernels = n("kernels") or n("copies"), links = n("linked"), shapes = n("shapes"),
        dtypes = n("dtypes"), runtime = n("runtime"), steps = n("steps"), memory = n("memory"), python = n("python")}
end

-- The fingerprint a Kineto trace carries: the GPU, the rank and the world size.
function M.fingerprint(q)
    local m = q.trace_members or {}
    local fp = {}
    local devs = type(m.deviceProperties) == "table" and m.deviceProperties or {}
    if type(devs[1]) == "table" then fp.gpu, fp.gpus = devs[1].name, #devs end
    local d = type(m.distributedInfo) == "table" and m.distributedInfo or {}
    -- (a rank is a whole number from 0, a world size from 1: others, 1e30 or 0, are not told)
    local function whole(v, least)
        local n = math.tointeger(tonumber(v))
        return n and n >= least and n or nil
    end
    fp.rank, fp.world_size, fp.backend = whole(d.rank, 0), whole(d.world_size, 1), d.backend
    return fp
end

local function count(v) return string.format("%d", math.tointeger(tonumber(v) or 0) or 0) end

-- One line: what the trace is and what it holds.
function M.describe(q)
    local fmt = M.format(q)
    if fmt == "workbench" then return FORMATS.workbench end
    local imp = q.trace_members.import
    local parts = {}
    for _, k in ipairs({"ops", "kernels", "copies", "runtime", "steps", "ranges", "memory"}) do
        if (tonumber(imp[k]) or 0) > 0 then parts[#parts + 1] = count(imp[k]) .. " " .. k end
    end
    if (tonumber(imp.kernels) or 0) > 0 then
        parts[#parts + 1] = count(imp.linked) .. " kernels and copies linked to the op that launched them"
    end
    local function events(n) return count(n) .. (tonumber(n) == 1 and " event" or " events") end
    if (tonumber(imp.unfinished) or 0) > 0 then -- torch writes "dur": -1 for an op open when profiling stopped
        parts[#parts + 1] = events(imp.unfinished) .. " still open when profiling stopped (\"dur\": -1), left out"
    end
    if (tonumber(imp.unread) or 0) > 0 then
        parts[#parts + 1] = events(imp.unread) .. " of kinds not read (B/E pairs, async, counters, samples, ...)"
    end
    local fp = M.fingerprint(q)
    local where = {}
    if fp.gpu then where[#where + 1] = fp.gpu .. (fp.gpus > 1 and (" (" .. fp.gpus .. " on the host)") or "") end
    if fp.rank then where[#where + 1] = "rank " .. count(fp.rank) .. (fp.world_size and (" of " .. count(fp.world_size)) or "") end
    return string.format("%s: %s%s", FORMATS[fmt] or fmt, #parts > 0 and table.concat(parts, ", ") or "no events",
        #where > 0 and ("; " .. table.concat(where, ", ")) or "")
end

return M
