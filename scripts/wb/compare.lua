-- wb.compare: `workbench compare [--verbose] [--fail-on-slower PCT] [--ignore COL] A.json B.json`:
-- two results files (wb.results) of the same sweep, row by row.
--
-- Rows are aligned on every config column: the file's keys, every column holding strings or
-- booleans, and the usual configuration names (tokens, dim, hidden, threads, ...); the run-wide
-- config the file recorded and the fingerprint's device and threads must match too, else the
-- files are "not comparable" and the difference is named (--ignore COL drops a column from
-- that check, e.g. to compare --threads 1 with --threads 2 on purpose).
-- Each row gets one verdict from its time metric: SAME, FASTER, SLOWER or UNSURE, by wb.verdict's
-- rule (the one mlp_sweep's table uses too): the medians shown are each row's median of its
-- rounds' medians (rounds weigh alike, however many samples each took), the ratio B/A is of those,
-- and the verdict is taken on them: a rank test on the samples with rounds weighing alike, a
-- minimum effect, above both rows' noise. Files without raw samples (older results) fall back to
-- the recorded p10-p90 spread, and the output says so; a file holding partial results (a run
-- stopped by Ctrl-C) is named as such. --json prints one JSON object instead of the text (errors
-- too, as {"error": ...}).
-- Exit status: 0; 1 when --fail-on-slower PCT and a row is SLOWER by more than PCT percent;
-- 2 with a message for unreadable input or files that are not comparable.

local cjson = require("cjson")
local stats = require("wb.stats")
local words = require("wb.words")
local environment = require("wb.environment")
local rule = require("wb.verdict")

local M = {ALPHA = rule.ALPHA, MIN_EFFECT = rule.MIN_EFFECT}

local function fail(msg) error({compare_error = msg}, 0) end
local validate -- defined below, with what it needs

-- What compare prints comes from files anyone may hand over: control characters (a terminal's
-- escape sequences) are shown as \027-style escapes, never written raw.
local function clean(v)
    if type(v) ~= "string" then return v end
    return words.escaped(v)
end

local function clean_strings(v)
    if type(v) ~= "table" then return clean(v) end
    local out = {}
    for k, x in pairs(v) do out[clean(k)] = clean_strings(x) end
    return out
end

local function kind(v)
    if v == cjson.null then return "null" end
    if type(v) == "table" then return next(v) == nil and "an empty array or object" or #v > 0 and "an array" or "an object" end
    if type(v) == "string" then return string.format("the string %q", #v > 40 and v:sub(1, 40) .. "..." or v) end
    return type(v) == "number" and tostring(v) or "a " .. type(v)
end

-- An array (keys 1..n, no holes), not an object.
local function is_array(t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n == #t
end

local function is_time_column(c)
    return type(c) == "string" and (c:match("^median_") or c:match("^p%d+_") or c:match("^samples_")) ~= nil
end

-- The document's shape and every number: finite (JSON has no NaN or Infinity; 1e400 decodes to
-- infinity), numbers not stored as strings where a column holds numbers, names that are strings.
-- Any problem ends compare with one line naming the file and the place.
validate = function(doc, path)
    local function bad(fmt, ...) fail(clean(path) .. ": " .. string.format(fmt, ...)) end
    if doc.name ~= nil and type(doc.name) ~= "string" then bad("name must be a string, got %s", kind(doc.name)) end
    if not is_array(doc.columns) then bad("columns must be an array of names, got %s", kind(doc.columns)) end
    for i, c in ipairs(doc.columns) do
        if type(c) ~= "string" then bad("column %d must be a name (a string), got %s", i, kind(c)) end
    end
    if not is_array(doc.rows) then bad("rows must be an array of objects, got an object") end
    for _, field in ipairs({"fingerprint", "config", "keys"}) do
        if doc[field] == cjson.null then doc[field] = nil end
        local v = doc[field]
        if v ~= nil and type(v) ~= "table" then bad("%s must be an object, got %s", field, kind(v)) end
    end
    if type(doc.keys) == "table" then
        for i, k in ipairs(doc.keys) do
            if type(k) ~= "string" then bad("keys[%d] must be a column name, got %s", i, kind(k)) end
        end
    end
    local numeric = {} -- columns that hold a number in some row
    for i, r in ipairs(doc.rows) do
        if type(r) ~= "table" or (next(r) ~= nil and #r > 0) then bad("row %d is not an object", i) end
        for c, v in pairs(r) do
            if type(c) ~= "string" then bad("row %d has a column named %s, expected a string", i, kind(c)) end
            if type(v) == "number" then
                if v ~= v or v == math.huge or v == -math.huge then
                    bad("row %d, %s: %s is not a finite number", i, clean(c), tostring(v))
                end
                numeric[c] = numeric[c] or i
            elseif type(v) == "table" then
                -- an array of numbers is raw samples whatever its name (a peer's torch_samples_ms,
                -- a sweep's samples_ms_per_round); anything else in a cell is not a results value
                if not is_array(v) then bad("row %d, %s: %s where a single value or an array of numbers belongs", i,
                    clean(c), kind(v)) end
                for j, x in pairs(v) do
                    if type(j) ~= "number" or type(x) ~= "number" or x ~= x or x == math.huge or x == -math.huge then
                        bad("row %d, %s[%s]: %s, expected a finite number", i, clean(c), tostring(j), kind(x))
                    end
                end
            elseif type(v) == "string" and is_time_column(c) then
                bad("row %d, %s: %s, expected a number (a number stored as a string is not compared)", i, clean(c), kind(v))
            end
        end
    end
    for i, r in ipairs(doc.rows) do
        for c, v in pairs(r) do
            if type(v) == "string" and numeric[c] and tonumber(v) then
                bad("row %d, %s: %s, but row %d holds a number there (a number stored as a string is not compared)", i,
                    clean(c), kind(v), numeric[c])
            end
        end
    end
    for _, field in ipairs({"fingerprint", "config"}) do
        if type(doc[field]) == "table" then
            for k, v in pairs(doc[field]) do
                if type(v) == "number" and (v ~= v or v == math.huge or v == -math.huge) then
                    bad("%s.%s: %s is not a finite number", field, clean(tostring(k)), tostring(v))
                end
            end
        end
    end
end

local function load(path)
    local f, err = io.open(path)
    if not f then fail(string.format("cannot read %s: %s", path, tostring(err))) end
    local text, rerr = f:read("a") -- a folder opens, but its read fails (EISDIR)
    f:close()
    if not text then fail(string.format("cannot read %s: %s", path, tostring(rerr))) end
    local ok, doc = pcall(cjson.decode, text)
    if not ok then
        local truncated = text:match("^%s*$") or not text:match("[}%]]%s*$")
        fail(string.format("%s is not valid JSON%s (%s)", path, truncated and ", it looks truncated" or "", tostring(doc)))
    end
    if type(doc) ~= "table" or type(doc.rows) ~= "table" or type(doc.columns) ~= "table" then
        fail(string.format("%s is not a workbench results file (expected name, columns, rows, fingerprint)", path))
    end
    validate(doc, path)
    local mixed = require("wb.saveset").check(path)
    if mixed then io.stderr:write("compare: warning: " .. mixed .. "; the JSON is what is read\n") end
    doc = clean_strings(doc)
    doc.path = path
    return doc
end
-- M.load(path) -> the checked document (control characters escaped), or raises {compare_error=}
-- naming the problem: workbench history imports what compare would read.
M.load = load

-- JSON numbers come back as floats: show whole ones as integers
local function show(v)
    if v == cjson.null then return "null" end
    if type(v) == "table" then -- a config value such as a shape: by value, keys sorted, not by address
        local keys = {}
        for k in pairs(v) do keys[#keys + 1] = k end
        table.sort(keys, function(x, y) return tostring(x) < tostring(y) end)
        local parts = {}
        for i, k in ipairs(keys) do parts[i] = (#v == #keys and "" or tostring(k) .. "=") .. show(v[k]) end
        return "{" .. table.concat(parts, ", ") .. "}"
    end
    if type(v) == "number" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
    if type(v) == "number" then return string.format("%.4g", v) end
    return tostring(v)
end
M.show = show -- a value as compare prints it (whole numbers without ".0", tables with sorted keys)

local CONFIG_NAMES = {tokens = true, mode = true, dtype = true, dim = true, hidden = true, threads = true, device = true,
    m = true, n = true, k = true, batch = true, impl = true, isa = true, shape = true, layout = true, size = true,
    path = true, op = true, kernel = true, layer = true}

-- A config column: a key of the file, a usual configuration name, or a column of strings.
-- (Booleans such as `unstable`, arrays of raw samples and a sweep's <column>_verdict are outcomes,
-- not configuration.)
-- Where a row was measured, not what: a merged file's shard column.
local PROVENANCE = {shard = true}

local function is_config(doc, c)
    if PROVENANCE[c] then return false end
    if type(c) == "string" and c:match("_verdict$") then return false end -- an outcome (a sweep's verdict column)
    if CONFIG_NAMES[c] then return true end
    if type(doc.keys) == "table" then for _, k in ipairs(doc.keys) do if k == c then return true end end end
    local any = false
    for _, r in ipairs(doc.rows) do
        local v = r[c]
        if v ~= nil and type(v) ~= "string" then return false end
        any = any or v ~= nil
    end
    return any
end

local function is_metric(doc, c)
    if is_config(doc, c) then return false end
    for _, r in ipairs(doc.rows) do
        local v = r[c]
        if v ~= nil and type(v) ~= "number" then return false end
    end
    return true
end

local function config_columns(a, b, ignore)
    local keys, seen = {}, {}
    for _, doc in ipairs({a, b}) do
        for _, c in ipairs(doc.columns) do
            if not seen[c] and not ignore[c] and is_config(doc, c) then
                seen[c] = true
                keys[#keys + 1] = c
            end
        end
    end
    return keys
end

local function key_of(row, keys)
    local parts = {}
    for _, k in ipairs(keys) do if row[k] ~= nil then parts[#parts + 1] = k .. "=" .. show(row[k]) end end
    return table.concat(parts, " ")
end

-- The row's time metric, its samples (raw or nil), how they divide into rounds (a sweep's
-- <samples>_per_round, or nil) and its recorded spread (M.timing).
local TIME_COLUMNS = {{"median_ms", "samples_ms", "p10_ms", "p90_ms"}, {"median_us", "samples_us", "p10_us", "p90_us"}}
local function timing(row)
    for _, t in ipairs(TIME_COLUMNS) do
        if type(row[t[1]]) == "number" then
            local s = row[t[2]]
            if type(s) ~= "table" or #s == 0 then s = nil end
            local per = row[t[2] .. "_per_round"]
            return {metric = t[1], median = row[t[1]], samples = s, per_round = type(per) == "table" and per or nil,
                p10 = row[t[3]], p90 = row[t[4]]}
        end
    end
end
M.timing = timing

-- M.row_names(doc) -> each row's name as compare aligns rows ("tokens=16 mode=dual"), in order.
function M.row_names(doc)
    local keys, names = config_columns(doc, doc, {}), {}
    for i, r in ipairs(doc.rows) do names[i] = key_of(r, keys) end
    return names
end

-- verdict(ta, tb[, min_effect][, o]) -> verdict, ratio (B/A), p, basis, noise, shown: wb.verdict's
-- rule (see there), the one every verdict of the workbench is taken by.
M.verdict = rule.verdict

local function describe_values(doc, col)
    local vals, seen = {}, {}
    for _, r in ipairs(doc.rows) do
        local v = show(r[col])
        if r[col] ~= nil and not seen[v] then
            seen[v] = true
            vals[#vals + 1] = v
        end
    end
    table.sort(vals)
    return #vals > 0 and table.concat(vals, ",") or "(none)"
end

-- Run-wide configuration: the recorded config table plus the fingerprint's device and threads.
local function run_config(doc)
    local c = {}
    local recorded = type(doc.config) == "table" and doc.config or
        (type(doc.sweep) == "table" and type(doc.sweep.config) == "table" and doc.sweep.config) or {}
    for k, v in pairs(recorded) do if k ~= "seed" then c[k] = v end end -- the seed draws data, not timings
    local fp = doc.fingerprint or {}
    if c.device == nil then c.device = fp.device end
    if c.threads == nil then c.threads = fp.threads end
    return c
end
M.run_config = run_config

local function check_comparable(a, b, ignore)
    if a.name ~= b.name then
        fail(string.format("not comparable: %s holds results of %s, %s of %s", a.path, words.shown(a.name), b.path,
            words.shown(b.name)))
    end
    local ca, cb = run_config(a), run_config(b)
    local names, seen = {}, {}
    for _, t in ipairs({ca, cb}) do
        for k in pairs(t) do if not seen[k] then seen[k] = true; names[#names + 1] = k end end
    end
    table.sort(names)
    for _, k in ipairs(names) do
        if not ignore[k] and show(ca[k]) ~= show(cb[k]) then
            fail(string.format("not comparable: %s differs (A %s, B %s); pass --ignore %s to compare anyway", k,
                show(ca[k]), show(cb[k]), k))
        end
    end
end

-- The environment variables the two runs disagree on, in one line (a forced WB_GEMM_BLOCKING
-- explains a 2.4x change that the commits do not).
local function environment_line(fa, fb)
    local diffs, missing = environment.differences(fa, fb)
    if not diffs then
        return string.format("environment: not recorded in %s (a results file from before the workbench recorded it)",
            missing == "either" and "either file" or missing)
    end
    if #diffs == 0 then return "environment differences: none" end
    return "environment differs: " .. environment.joined(diffs, environment.versus)
end


-- What a file's partial results are, in words ("interrupted (Ctrl-C) after 2 of 3 rounds"), or nil
-- when it holds a whole run. A run stopped by Ctrl-C saves `partial` = {rounds_completed =,
-- rounds =, reason =} and marks each row partial = true.
function M.partial_words(doc)
    local p = doc.partial
    local rows = false
    for _, r in ipairs(doc.rows or {}) do rows = rows or r.partial == true end
    if (p == nil or p == cjson.null) and not rows then return nil end
    if type(p) ~= "table" then return "partial results (its rows are marked partial)" end
    local function whole(v) return type(v) == "number" and string.format("%d", math.floor(v)) or "?" end
    return string.format("partial results: %s after %s of %s rounds", type(p.reason) == "string" and p.reason or
        "stopped", whole(p.rounds_completed), whole(p.rounds))
end

-- compare(path_a, path_b, o) -> the comparison as a table (what --json prints; the text is drawn
-- from it); o.out receives the text (o.out = false: none). Raises {compare_error =} on bad input.
function M.compare(path_a, path_b, o)
    o = o or {}
    local out = o.out == nil and io.write or o.out or function() end
    local ignore = o.ignore or {}
    local a, b = load(path_a), load(path_b)
    check_comparable(a, b, ignore)
    local keys = config_columns(a, b, ignore)
    -- two rows of one file with the same config cannot be paired: the last one used to win, so a
    -- file compared with itself could show a row 5x slower
    local function index(doc)
        local rows, at = {}, {}
        for i, r in ipairs(doc.rows) do
            local k = key_of(r, keys)
            if at[k] then
                fail(string.format("%s: rows %d and %d have the same config (%s); no column tells them apart, so " ..
                    "they cannot be paired%s", doc.path, at[k], i, k == "" and "no config columns" or k,
                    next(ignore) and " (an --ignore'd column may have)" or ""))
            end
            rows[k], at[k] = r, i
        end
        return rows
    end
    local ia, ib = index(a), index(b)
    local pairs_ = {}
    for _, r in ipairs(a.rows) do
        local k = key_of(r, keys)
        if ib[k] then pairs_[#pairs_ + 1] = {k, r, ib[k]} end
    end
    if #pairs_ == 0 and #a.rows > 0 and #b.rows > 0 then
        local diffs = {}
        for _, c in ipairs(keys) do
            local va, vb = describe_values(a, c), describe_values(b, c)
            if va ~= vb then diffs[#diffs + 1] = string.format("%s (A %s, B %s)", c, va, vb) end
        end
        fail("not comparable: no row of A matches a row of B; the config columns differ: " ..
            (#diffs > 0 and table.concat(diffs, "; ") or table.concat(keys, ", ")))
    end
    local min_effect = o.min_effect or M.MIN_EFFECT
    local res = {a = {path = clean(path_a), name = a.name, date = a.fingerprint and a.fingerprint.date or nil,
        partial = M.partial_words(a)}, b = {path = clean(path_b), name = b.name, date = b.fingerprint and
        b.fingerprint.date or nil, partial = M.partial_words(b)}, aligned_on = keys, min_effect = min_effect,
        alpha = M.ALPHA, rows = {}, only_in_a = {}, only_in_b = {}, structural = {}, fingerprint = {}}
    out(string.format("A: %s (%s, %s)\nB: %s (%s, %s)\nrows aligned on: %s\n", res.a.path, words.shown(a.name),
        show(res.a.date or "?"), res.b.path, words.shown(b.name), show(res.b.date or "?"),
        #keys > 0 and table.concat(keys, ", ") or "(row order)"))
    for _, side in ipairs({"a", "b"}) do
        if res[side].partial then
            out(string.format("note: %s holds %s: its rows may have fewer rounds than a whole run's\n", side:upper(),
                res[side].partial))
        end
    end
    local missing = {}
    for _, doc in ipairs({a, b}) do
        local n = 0
        for _, r in ipairs(doc.rows) do local t = timing(r); if t and not t.samples then n = n + 1 end end
        if n > 0 then missing[#missing + 1] = doc == a and "A" or "B" end
    end
    res.basis = #missing == 0 and "samples" or "spread"
    if #missing > 0 then
        out(string.format("note: %s has no raw samples (older results): verdicts from the recorded p10-p90 spread, " ..
            "without a rank test\n", table.concat(missing, " and ")))
    end
    out("\n")
    local counts = {SAME = 0, FASTER = 0, SLOWER = 0, UNSURE = 0}
    local worst_slower = 0
    local width = 8
    for _, pr in ipairs(pairs_) do width = math.max(width, #pr[1]) end
    -- padded by hand: string.format's widths stop at 99, and a row's name can be longer
    local function pad(text) return text .. string.rep(" ", width - #text) end
    out(pad("row") .. string.format(" %12s %12s %8s %8s  %s\n", "A", "B", "B/A", "p", "verdict"))
    for _, pr in ipairs(pairs_) do
        local k, ra, rb = pr[1], pr[2], pr[3]
        local ta, tb = timing(ra), timing(rb)
        if ta and tb and ta.metric == tb.metric then
            local v, ratio, p, basis, noise, shown = M.verdict(ta, tb, min_effect)
            counts[v] = counts[v] + 1
            -- a median of 0 in A (an elided copy, a time below the timer's step) has no ratio: null
            -- in JSON, "from 0" here; slower from 0 is slower by more than any percentage (both 0:
            -- the verdict's ratio is 1, so a NaN does not come here)
            local finite = ratio == ratio and ratio ~= math.huge and ratio ~= -math.huge
            if v == "SLOWER" then worst_slower = math.max(worst_slower, finite and (ratio - 1) * 100 or math.huge) end
            local flags = {}
            if ra.unstable == true then flags[#flags + 1] = "A unstable" end
            if rb.unstable == true then flags[#flags + 1] = "B unstable" end
            if basis == "noise" then flags[#flags + 1] = string.format("within the noise, %.0f%%", noise * 100) end
            local unit = ta.metric:match("_(%a+)$")
            res.rows[#res.rows + 1] = {row = k, metric = ta.metric, a = shown.a, b = shown.b,
                ratio = finite and ratio or cjson.null, p = p,
                verdict = v, basis = basis, noise = noise, rounds_a = shown.rounds_a, rounds_b = shown.rounds_b,
                unstable_a = ra.unstable == true, unstable_b = rb.unstable == true}
            local line = pad(k) .. string.format(" %12s %12s %8s %8s  %s", show(shown.a) .. " " .. unit,
                show(shown.b), finite and string.format("%.3fx", ratio) or "from 0",
                p and string.format("%.2g", p) or "-", v)
            local said = #flags > 0 and "(" .. table.concat(flags, ", ") .. ")" or ""
            -- at most 120 columns: the flags go on the next line, under the verdict, when they do not fit
            if #line + 1 + #said > 120 then
                local indent = string.rep(" ", math.min(width + 49, 80))
                line = line .. "\n" .. words.wrap(indent .. said, 120, indent)
            elseif said ~= "" then
                line = line .. " " .. said
            end
            out(line .. "\n")
            if o.verbose then
                for _, c in ipairs(a.columns) do
                    local va, vb = ra[c], rb[c]
                    if c ~= ta.metric and type(va) == "number" and type(vb) == "number" and is_metric(a, c) then
                        out(pad("") .. string.format("   %-16s %12s %12s %7.3fx\n", c, show(va), show(vb),
                            va ~= 0 and vb / va or 0))
                    end
                end
            end
        else
            res.rows[#res.rows + 1] = {row = k, verdict = cjson.null}
            out(pad(k) .. " (no time metric to compare)\n")
        end
    end
    for k in pairs(ia) do if not ib[k] then res.only_in_a[#res.only_in_a + 1] = k end end
    for k in pairs(ib) do if not ia[k] then res.only_in_b[#res.only_in_b + 1] = k end end
    table.sort(res.only_in_a)
    table.sort(res.only_in_b)
    if #res.only_in_a > 0 then out("\nonly in A: " .. table.concat(res.only_in_a, "; ") .. "\n") end
    if #res.only_in_b > 0 then out("only in B: " .. table.concat(res.only_in_b, "; ") .. "\n") end
    local effect = min_effect * 100
    out("\n" .. words.wrap(string.format("verdicts: %d SAME, %d FASTER, %d SLOWER, %d UNSURE (%s)", counts.SAME,
        counts.FASTER, counts.SLOWER, counts.UNSURE, #missing == 0 and rule.rule_text(min_effect) or
            string.format("p10-p90 spreads apart and a change of at least %g%%", effect)), 120, "  ") .. "\n")
    if #missing == 0 then
        out("A and B: each row's median of its rounds' medians (every round one vote); B/A is their ratio\n")
    end
    for _, pr in ipairs(pairs_) do
        local ra, rb = pr[2], pr[3]
        if ra.kernels ~= nil and rb.kernels ~= nil and ra.kernels ~= rb.kernels then
            res.structural[#res.structural + 1] = {row = pr[1], a = ra.kernels, b = rb.kernels,
                text = string.format("%s: %s kernels -> %s", pr[1], show(ra.kernels), show(rb.kernels))}
        end
    end
    local structural = {}
    for i, d in ipairs(res.structural) do structural[i] = d.text end
    out("structural differences: " .. (#structural > 0 and ("\n  " .. table.concat(structural, "\n  ")) or "none") .. "\n")
    local fa, fb, diffs = a.fingerprint or {}, b.fingerprint or {}, {}
    local names, seen = {}, {}
    for _, t in ipairs({fa, fb}) do for k in pairs(t) do if not seen[k] then seen[k] = true; names[#names + 1] = k end end end
    table.sort(names)
    for _, k in ipairs(names) do
        if k ~= "date" and not k:match("_date$") and not environment.is_field(k) and show(fa[k]) ~= show(fb[k]) then
            local line = string.format("%s: %s -> %s", k, show(fa[k]), show(fb[k]))
            if #line > 118 then -- long values (a command line) one side a line, wrapped at 120 columns
                line = string.format("%s:\n    A: %s\n    B: %s", k, words.wrap(show(fa[k]), 114, "       "),
                    words.wrap(show(fb[k]), 114, "       "))
            end
            diffs[#diffs + 1] = line
            res.fingerprint[#res.fingerprint + 1] = {key = k, a = fa[k] == nil and cjson.null or fa[k],
                b = fb[k] == nil and cjson.null or fb[k]}
        end
    end
    out("fingerprint differences: " .. (#diffs > 0 and ("\n  " .. table.concat(diffs, "\n  ")) or "none") .. "\n")
    out(environment_line(fa, fb), "\n")
    do
        local diffs = environment.differences(fa, fb)
        res.environment = diffs or cjson.null
    end
    res.verdicts = counts
    res.worst_slower_pct = worst_slower == math.huge and cjson.null or worst_slower -- (null: slower from 0)
    return res
end


return M
