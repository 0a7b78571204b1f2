-- wb.environment: the environment variables that change what a run measures (the workbench's own
-- WB_*, the thread runtimes' and BLAS libraries' switches, the GPU's), recorded in a results
-- fingerprint, and the differences between two runs' as compare and history name them.
--
--   environment.record(fp)           -- fp.env_WB_GEMM_BLOCKING = "40,24,64", ..., fp.environment
--   environment.of(fp)               -- {WB_GEMM_BLOCKING = "40,24,64", ...}, or nil: not recorded
--   environment.differences(fa, fb)  -- {{name=, a=, b=}, ...} (nil: unset), sorted by name
--   environment.differ(va, vb)       -- the same from two runs' variables (M.of)
--   environment.versus(d)            -- "WB_GEMM_BLOCKING=40,24,64 vs unset" (compare: A vs B)
--   environment.change(d)            -- "WB_GEMM_BLOCKING: unset -> 40,24,64" (history: before -> after)
--
-- A fingerprint holds flat values (a merge joins them shard by shard), so each variable is a
-- field of its own, env_<NAME>; `environment` names the families looked at, so that a run that
-- set none of them is told from an older run that recorded nothing.

local words = require("wb.words")
local list = wb._environment -- captured at load: wb._* are gone under --sandbox

local M = {}

-- Names starting with these are recorded: every WB_* the run had (a forced WB_GEMM_BLOCKING or
-- WB_CPU_ISA changes the kernels), the OpenMP runtimes' (threads, wait policy, binding), the BLAS
-- and oneDNN switches the peers read (OPENBLAS_CORETYPE picks OpenBLAS's kernels), and the GPU's.
-- The list read is this file's own: M.PREFIXES is a copy to read, so that a script (one run under
-- --sandbox too) cannot widen what is listed to every variable of the process (a token, a key).
local PREFIXES = {"WB_", "OMP_", "GOMP_", "KMP_", "OPENBLAS_", "GOTO_", "BLIS_", "MKL_", "DNNL_", "ONEDNN_",
    "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUBLAS_", "CUBLASLT_"}
M.PREFIXES = table.move(PREFIXES, 1, #PREFIXES, 1, {})

local FIELD = "env_"

-- The recorded variables of this process: {NAME = value}.
function M.current()
    if not list then error("environment: wb._environment is not available (loaded after the sandbox?)", 2) end
    return list(table.move(PREFIXES, 1, #PREFIXES, 1, {}))
end

-- Adds this process's variables to a fingerprint (env_<NAME> = value, environment = the families).
function M.record(fp)
    local families = {}
    for i, p in ipairs(PREFIXES) do families[i] = p:sub(-1) == "_" and p .. "*" or p end
    fp.environment = table.concat(families, " ")
    for name, value in pairs(M.current()) do fp[FIELD .. name] = value end
    return fp
end

-- Whether a fingerprint field is one of the environment's (compare lists the others on their own).
function M.is_field(key)
    return key == "environment" or (type(key) == "string" and key:sub(1, #FIELD) == FIELD)
end

-- The variables a fingerprint recorded, {NAME = value}, or nil when it recorded none (a run from
-- before they were recorded: nothing can be said about its environment).
function M.of(fp)
    if type(fp) ~= "table" or fp.environment == nil then return nil end
    local vars = {}
    for k, v in pairs(fp) do
        if type(k) == "string" and #k > #FIELD and k:sub(1, #FIELD) == FIELD then
            vars[k:sub(#FIELD + 1)] = tostring(v)
        end
    end
    return vars
end

-- The variables two runs disagree on, {{name=, a=, b=}, ...} sorted by name (a or b nil: unset
-- there), from the runs' variables (M.of); or nil and which side did not record them ("A", "B"
-- or "either").
function M.differ(a, b)
    if not a or not b then return nil, (not a and not b) and "either" or (not a and "A" or "B") end
    local names, seen = {}, {}
    for _, t in ipairs({a, b}) do
        for k in pairs(t) do
            if not seen[k] then seen[k], names[#names + 1] = true, k end
        end
    end
    table.sort(names)
    local out = {}
    for _, k in ipairs(names) do
        if a[k] ~= b[k] then out[#out + 1] = {name = k, a = a[k], b = b[k]} end
    end
    return out
end

-- M.differ of two fingerprints.
function M.differences(fa, fb) return M.differ(M.of(fa), M.of(fb)) end

local function value(v) return v == nil and "unset" or words.shown(v) end

-- "NAME=a vs b" ("NAME unset vs b" where A did not set it): A's value first, as compare reads.
function M.versus(d)
    return string.format("%s%s vs %s", words.escaped(d.name), d.a == nil and " unset" or "=" .. words.shown(d.a),
        value(d.b))
end

-- "NAME: a -> b": what changed from one run to the next, as history reads.
function M.change(d) return string.format("%s: %s -> %s", words.escaped(d.name), value(d.a), value(d.b)) end

-- A list of differences as one text, with `how` (M.versus or M.change) for each, "; " between.
function M.joined(diffs, how)
    local parts = {}
    for i, d in ipairs(diffs) do parts[i] = how(d) end
    return table.concat(parts, "; ")
end

return M
