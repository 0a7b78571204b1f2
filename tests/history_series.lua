-- history_series.lua: synthetic series of results files for the history tests (test_history.lua,
-- test_history_report.lua), made from one real results file measured by the test itself.
local cjson = require("cjson")
local scratch = require("scratch")
local stats = require("wb.stats")

local M = {}

local function read(path)
    local f = assert(io.open(path, "rb"))
    local t = f:read("a")
    f:close()
    return t
end

local function write(path, text)
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
    return path
end

-- The real results file every synthetic series starts from: a small wb.sweep measured here
-- (element-wise ops, process CPU time), saved as any experiment saves it.
local BASE
local function base_file()
    if BASE then return BASE end
    local s = wb.sweep{name = "history_base", quiet = true,
        axes = {{"size", {16, 64}}, {"op", {"add", "mul"}}},
        measure = function(p)
            local a, b = wb.randn({p.size, p.size}), wb.randn({p.size, p.size})
            local out = {}
            for i = 1, 30 do
                local t0 = os.clock()
                for _ = 1, 100 do wb[p.op](a, b) end
                out[i] = (os.clock() - t0) * 1000 / 100
            end
            return out
        end}
    s:run()
    BASE = s:save{dir = scratch.dir()}.json
    return BASE
end

-- The fingerprint of a results file saved by another workbench process with `vars` set before it
-- (a shell prefix, "WB_GEMM_BLOCKING=40,24,64"): what a run under those variables records.
local function fingerprint_under(vars)
    local dir = scratch.dir()
    local script = scratch.file('local r = wb.results("fp", {quiet = true}); r:add{x = 1}; r:save{}', ".lua")
    local out, code = scratch.run(string.format("%s %s --out %s %s", vars, scratch.exe(), dir, script))
    assert(code == 0, out)
    return cjson.decode(read(dir .. "/fp.json")).fingerprint
end

-- A seeded generator of standard normal numbers (Box-Muller on an LCG), independent of math.random.
local function normal(seed)
    local state = seed * 2654435761 % 4294967296
    local function uniform()
        state = (state * 1103515245 + 12345) % 2147483648
        return (state + 0.5) / 2147483648
    end
    return function() return math.sqrt(-2 * math.log(uniform())) * math.cos(2 * math.pi * uniform()) end
end
M.normal = normal

-- 14 results files of one series, from the real base file: run k's samples (o.samples, 30) are
-- the base row's median scaled by a seeded run factor (1% sd) and a seeded factor per sample
-- (o.sample_sd, 2% sd: 0.3 and 1000 samples is a 1-token MLP row), then by
-- `step` from run `at` on; `machine_at`: the CPU model differs from that run on. name: another
-- experiment name (separate series); `env`, from run `env_at` on: the fingerprint of a run saved
-- under those variables (fingerprint_under); `unrecorded_before`: runs before it carry no
-- environment, as files from before it was recorded. The spread is seeded rather than the base samples' own: on a
-- busy shared machine those carry 20-60% noise (IQR / median), within which compare's rule
-- rightly confirms no 10% change, and the tests must not depend on how busy the machine is.
function M.series(o)
    local base = cjson.decode(read(base_file()))
    local z = normal(o.seed or 1)
    local dir = scratch.dir()
    local files = {}
    local forced = o.env and fingerprint_under(o.env)
    for k = 1, o.runs or 14 do
        local doc = cjson.decode(read(base_file()))
        doc.name = o.name or doc.name
        if forced and k >= o.env_at then doc.fingerprint = cjson.decode(cjson.encode(forced)) end
        if o.unrecorded_before and k < o.unrecorded_before then
            for key in pairs(doc.fingerprint) do
                if key == "environment" or key:match("^env_") then doc.fingerprint[key] = nil end
            end
        end
        doc.fingerprint.date = string.format("2026-01-%02dT12:00:00Z", k)
        doc.fingerprint.commit = string.format("c%02d", k)
        if o.machine_at and k >= o.machine_at then doc.fingerprint.cpu = "Another CPU 9000" end
        local run_factor = math.exp(0.01 * z()) * ((o.at and k >= o.at) and (o.step or 1.10) or 1)
        for i, r in ipairs(doc.rows) do
            local median = base.rows[i].median_ms
            local s = {}
            for j = 1, o.samples or 30 do s[j] = median * run_factor * math.exp((o.sample_sd or 0.02) * z()) end
            r.samples_ms = s
            r.median_ms = stats.summarize(s).median
        end
        files[k] = write(string.format("%s/run%02d.json", dir, k), cjson.encode(doc))
    end
    return files, #base.rows
end

return M
