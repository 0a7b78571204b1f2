-- wb.compare: `workbench compare A.json B.json` -- two results files (wb.results) side by side.
-- Rows are aligned by their key columns (the file's "keys", else its string columns); for each
-- numeric metric it prints B/A and a verdict: same, faster or slower (or higher/lower when the
-- direction is unknown), with a noise threshold taken from the spread the files recorded
-- (p10-p90 around the median, at least 3%). Then the fingerprints' differences and structural
-- differences (kernel counts). Exit status 0, or 2 with a message for unreadable input.

local cjson = require("cjson")

local M = {}

local function fail(msg) error({compare_error = msg}, 0) end

local function load(path)
    local f, err = io.open(path)
    if not f then fail(string.format("cannot read %s: %s", path, tostring(err))) end
    local text = f:read("a")
    f:close()
    local ok, doc = pcall(cjson.decode, text)
    if not ok then fail(string.format("%s is not valid JSON (%s)", path, tostring(doc))) end
    if type(doc) ~= "table" or type(doc.rows) ~= "table" or type(doc.columns) ~= "table" then
        fail(string.format("%s is not a workbench results file (expected name, columns, rows, fingerprint)", path))
    end
    for i, r in ipairs(doc.rows) do
        if type(r) ~= "table" then fail(string.format("%s: row %d is not an object", path, i)) end
    end
    return doc
end

local function key_columns(doc)
    if type(doc.keys) == "table" and #doc.keys > 0 then return doc.keys end
    local keys = {}
    for _, c in ipairs(doc.columns) do
        local all_strings = true
        for _, r in ipairs(doc.rows) do if r[c] ~= nil and type(r[c]) ~= "string" then all_strings = false end end
        if all_strings then keys[#keys + 1] = c end
    end
    return keys
end

-- JSON numbers come back as floats: show whole ones as integers
local function show(v)
    if type(v) == "number" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
    return tostring(v)
end

local function key_of(row, keys)
    local parts = {}
    for i, k in ipairs(keys) do parts[i] = k .. "=" .. show(row[k]) end
    return table.concat(parts, " ")
end

-- lower is better for times, higher for rates; nil when the name does not say
local function direction(col)
    if col:match("_ms$") or col:match("_us$") or col:match("_ns$") or col:match("time") then return "lower" end
    if col:match("gflops") or col:match("gbs") or col:match("speedup") or col:match("^vs_") or col:match("pct_peak") then
        return "higher"
    end
end

local SPREAD_COLS = {median_ms = {"p10_ms", "p90_ms"}, median_us = {"p10_us", "p90_us"}}

-- The row's relative noise: half its p10-p90 spread around the median. Every metric of the row
-- (GFLOP/s, % of peak, host time, ...) is derived from the same runs, so it gets the same threshold.
local function spread(row)
    local worst = 0
    for col, cols in pairs(SPREAD_COLS) do
        local m, lo, hi = row[col], row[cols[1]], row[cols[2]]
        if type(m) == "number" and type(lo) == "number" and type(hi) == "number" and m ~= 0 then
            worst = math.max(worst, (hi - lo) / 2 / m)
        end
    end
    return worst
end

function M.compare(path_a, path_b, out)
    out = out or io.write
    local a, b = load(path_a), load(path_b)
    local keys = key_columns(a)
    local ia, ib = {}, {}
    for _, r in ipairs(a.rows) do ia[key_of(r, keys)] = r end
    for _, r in ipairs(b.rows) do ib[key_of(r, keys)] = r end
    out(string.format("A: %s (%s, %s)\nB: %s (%s, %s)\nrows aligned on: %s\n\n", path_a, tostring(a.name),
        a.fingerprint and a.fingerprint.date or "?", path_b, tostring(b.name), b.fingerprint and b.fingerprint.date or "?",
        #keys > 0 and table.concat(keys, ", ") or "(row order)"))
    local metrics = {}
    for _, c in ipairs(a.columns) do
        local is_key = false
        for _, k in ipairs(keys) do if k == c then is_key = true end end
        if not is_key and not c:match("^p%d+_") and c ~= "kernels" then
            for _, r in ipairs(a.rows) do
                if type(r[c]) == "number" then metrics[#metrics + 1] = c; break end
            end
        end
    end
    local counts = {same = 0, faster = 0, slower = 0, changed = 0}
    out(string.format("%-32s %-16s %12s %12s %8s %s\n", "row", "metric", "A", "B", "B/A", "verdict"))
    for _, r in ipairs(a.rows) do
        local k = key_of(r, keys)
        local rb = ib[k]
        if rb then
            for _, c in ipairs(metrics) do
                local va, vb = r[c], rb[c]
                if type(va) == "number" and type(vb) == "number" then
                    local ratio = va ~= 0 and vb / va or (vb == 0 and 1 or math.huge)
                    local noise = math.max(0.03, spread(r), spread(rb))
                    local dir = direction(c)
                    local verdict
                    if math.abs(ratio - 1) <= noise then
                        verdict = "same"
                    elseif dir == "lower" then
                        verdict = ratio < 1 and "faster" or "slower"
                    elseif dir == "higher" then
                        verdict = ratio > 1 and "faster" or "slower"
                    else
                        verdict = ratio > 1 and "higher" or "lower"
                    end
                    counts[counts[verdict] and verdict or "changed"] = (counts[counts[verdict] and verdict or "changed"]) + 1
                    out(string.format("%-32s %-16s %12.4g %12.4g %7.3fx %s (noise %.0f%%)\n", k, c, va, vb, ratio,
                        verdict, noise * 100))
                end
            end
        end
    end
    local only_a, only_b = {}, {}
    for k in pairs(ia) do if not ib[k] then only_a[#only_a + 1] = k end end
    for k in pairs(ib) do if not ia[k] then only_b[#only_b + 1] = k end end
    table.sort(only_a)
    table.sort(only_b)
    if #only_a > 0 then out("\nonly in A: " .. table.concat(only_a, "; ") .. "\n") end
    if #only_b > 0 then out("only in B: " .. table.concat(only_b, "; ") .. "\n") end
    out(string.format("\nverdicts: %d same, %d faster, %d slower, %d changed\n", counts.same, counts.faster,
        counts.slower, counts.changed))
    -- structure: kernel counts per row
    local structural = {}
    for k, r in pairs(ia) do
        local rb = ib[k]
        if rb and r.kernels ~= nil and rb.kernels ~= nil and r.kernels ~= rb.kernels then
            structural[#structural + 1] = string.format("%s: %s kernels -> %s", k, show(r.kernels), show(rb.kernels))
        end
    end
    table.sort(structural)
    out("\nstructural differences: " .. (#structural > 0 and ("\n  " .. table.concat(structural, "\n  ")) or "none") .. "\n")
    -- environment
    local fa, fb, diffs = a.fingerprint or {}, b.fingerprint or {}, {}
    local seen = {}
    for k in pairs(fa) do seen[k] = true end
    for k in pairs(fb) do seen[k] = true end
    local names = {}
    for k in pairs(seen) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
        if k ~= "date" and k ~= "command" and tostring(fa[k]) ~= tostring(fb[k]) then
            diffs[#diffs + 1] = string.format("%s: %s -> %s", k, show(fa[k]), show(fb[k]))
        end
    end
    out("fingerprint differences: " .. (#diffs > 0 and ("\n  " .. table.concat(diffs, "\n  ")) or "none") .. "\n")
    return counts
end

-- Entry point for `workbench compare A.json B.json`: returns the exit status.
function M.main(args)
    if #args ~= 2 then
        io.stderr:write("usage: workbench compare A.json B.json\n")
        return 2
    end
    local ok, err = pcall(M.compare, args[1], args[2])
    if not ok then
        io.stderr:write("workbench compare: " .. (type(err) == "table" and err.compare_error or tostring(err)) .. "\n")
        return 2
    end
    return 0
end

return M
