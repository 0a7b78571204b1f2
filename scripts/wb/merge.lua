-- wb.merge: `workbench merge OUT FILES|DIRS...` -- joins the shards of one wb.sweep run (files
-- <name>.shard-I-of-N.json, or folders holding them) into one results file and HTML report under
-- OUT, as an unsharded run would have written them, so `workbench compare` reads it the same way.
-- It checks that the shards come from one sweep (name, axes, config, points), that every point is
-- there exactly once, recomputes every statistic and derived column from the raw samples (wb.sweep's
-- compute), keeps each shard's fingerprint and flags shards measured on different hardware.
-- On any problem it names it and writes nothing (exit status 2). With --history (or WB_HISTORY=1)
-- the merged run is recorded in the results history (wb.history); exit status 2 if it cannot be.

local cjson = require("cjson")
local sweep = require("wb.sweep")
local results = require("wb.results")
local words = require("wb.words")

local M = {}

local function fail(msg) error({merge_error = msg}, 0) end
local check -- defined below, with what it needs

-- A canonical text of a JSON value (sorted keys), to compare two shards' descriptions.
local function canon(v)
    if type(v) ~= "table" then
        if type(v) == "number" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
        return type(v) == "string" and string.format("%q", v) or tostring(v)
    end
    if #v > 0 or next(v) == nil then
        local parts = {}
        for i, x in ipairs(v) do parts[i] = canon(x) end
        return "[" .. table.concat(parts, ",") .. "]"
    end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    local parts = {}
    for i, k in ipairs(keys) do parts[i] = k .. ":" .. canon(v[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
end

-- A folder opens for reading but its first read fails with EISDIR.
local function is_dir(path)
    local f = io.open(path)
    if not f then return false end
    local _, _, code = f:read(1)
    f:close()
    return code == 21
end

local list_files = wb._files -- captured at load: wb._* are gone under --sandbox

-- The shard files in a folder: <name>.shard-I-of-N.json, sorted.
local function shard_files(dir)
    local names, err = list_files(dir)
    if not names then fail(err) end
    local files = {}
    for _, name in ipairs(names) do
        if name:match("%.shard%-.*%-of%-.*%.json$") then files[#files + 1] = dir .. "/" .. name end
    end
    return files
end

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

local function array_of(v, want)
    if type(v) ~= "table" then return false end
    local n = 0
    for _ in pairs(v) do n = n + 1 end
    if n ~= #v then return false end
    for _, x in ipairs(v) do if not want(x) then return false end end
    return true
end

local function is_string(v) return type(v) == "string" end
local function whole(v) return type(v) == "number" and math.tointeger(v) ~= nil end
local function is_scalar(v) return type(v) == "string" or type(v) == "boolean" or finite(v) end

-- The parts of a shard file the merge reads, each the shape wb.sweep writes: a file edited or
-- written by something else is refused naming the place, before anything reads a wrong shape
-- (a shard count of 1e15 looped that long naming the missing shards; an axis given as a number
-- or a fingerprint given as text stopped with an error inside merge.lua).
check = function(doc, path)
    local function bad(fmt, ...) fail(path .. ": " .. string.format(fmt, ...)) end
    local s = doc.sweep
    if type(s.name) ~= "string" or not s.name:match("^[%w_%-]+$") then
        bad("sweep.name must be a plain name (letters, digits, _ -), got %s", words.shown(s.name))
    end
    if #s.axes == 0 or not array_of(s.axes, function(a)
        return type(a) == "table" and is_string(a.name) and array_of(a.values, function(v)
            return is_string(v) or finite(v) end) and #a.values > 0 end) then
        bad("sweep.axes must be an array of {name=, values={numbers or strings}}")
    end
    if not array_of(s.points, is_string) then bad("sweep.points must be an array of point names") end
    if not array_of(s.stats, function(x)
        if type(x) ~= "table" or not is_string(x.from) then return false end
        for k, v in pairs(x) do if not is_string(k) or not is_string(v) then return false end end
        return true end) then
        bad("sweep.stats must be an array of {from=column, statistic=column, ...}")
    end
    if not array_of(s.derived, function(d)
        return type(d) == "table" and is_string(d.column) and is_string(d.num) and is_string(d.den) and
            (d.scale == nil or finite(d.scale)) and (d.base == nil or type(d.base) == "table") and
            (d.interval == nil or type(d.interval) == "boolean") end) then
        bad("sweep.derived must be an array of {column=, num=, den=[, scale=][, base=][, interval=]}")
    end
    if s.constants ~= nil and type(s.constants) ~= "table" then bad("sweep.constants must be an object") end
    for k, v in pairs(s.config) do
        if not is_string(k) or not is_scalar(v) then bad("sweep.config.%s must be a number, string or boolean", tostring(k)) end
    end
    local sh = s.shard
    if sh ~= nil then
        local n = #s.points
        if type(sh) ~= "table" or not whole(sh.count) or not whole(sh.index) or sh.count < 1 or
            sh.count > math.max(n, 1) or sh.index < 1 or sh.index > sh.count then
            bad("sweep.shard must be {index=I, count=N} with 1 <= I <= N <= %d (the points)", n)
        end
        if sh.assignment ~= nil and not (array_of(sh.assignment, function(x)
            return whole(x) and x >= 1 and x <= sh.count end) and #sh.assignment == n) then
            bad("sweep.shard.assignment must give each of the %d points a shard from 1 to %d", n, sh.count)
        end
    end
    if not array_of(doc.columns, is_string) then bad("columns must be an array of names") end
    if not array_of(doc.rows, function(r) return type(r) == "table" end) then bad("rows must be an array of objects") end
    -- a row's rounds (<from>_per_round: how many of its samples each round took) must divide its
    -- samples: whole counts of at least 1 summing to them (the statistics are recomputed by round)
    local stats = require("wb.stats")
    for i, r in ipairs(doc.rows) do
        for _, x in ipairs(s.stats) do
            local counts = r[x.from .. "_per_round"]
            if counts ~= nil then
                local samples = r[x.from]
                local n = type(samples) == "table" and #samples or 0
                -- (samples that are no numbers are named further on, sample by sample)
                if array_of(samples, finite) and not (array_of(counts, whole) and stats.split_rounds(samples, counts)) then
                    local shown = {}
                    for k = 1, math.min(type(counts) == "table" and #counts or 0, 8) do
                        shown[k] = finite(counts[k]) and string.format("%.17g", counts[k]) or words.shown(counts[k])
                    end
                    bad("rows[%d].%s_per_round does not divide its %d samples (counts %s): whole counts of at least " ..
                        "1 that sum to them", i, x.from, n, array_of(counts, function() return true end) and
                        ("{" .. table.concat(shown, ", ") .. (#counts > 8 and ", ..." or "") .. "}") or
                        words.shown(counts))
                end
            end
        end
    end
    if doc.fingerprint ~= nil then
        if type(doc.fingerprint) ~= "table" then bad("fingerprint must be an object") end
        for k, v in pairs(doc.fingerprint) do
            if not is_string(k) or not is_scalar(v) then
                bad("fingerprint.%s must be a number, string or boolean", tostring(k))
            end
        end
    end
end

local function load(path)
    local f, err = io.open(path)
    if not f then fail(string.format("cannot read %s: %s", path, tostring(err))) end
    local text = f:read("a")
    f:close()
    if text == "" then fail(string.format("%s is empty (truncated shard file?)", path)) end
    local ok, doc = pcall(cjson.decode, text)
    if not ok then fail(string.format("%s is truncated or not valid JSON (%s)", path, tostring(doc))) end
    if type(doc) ~= "table" or type(doc.rows) ~= "table" or type(doc.columns) ~= "table" then
        fail(string.format("%s is not a workbench results file (expected name, columns, rows, fingerprint)", path))
    end
    local s = doc.sweep
    if type(s) ~= "table" or type(s.axes) ~= "table" or type(s.points) ~= "table" or type(s.config) ~= "table" or
        type(s.stats) ~= "table" or type(s.derived) ~= "table" or type(s.samples) ~= "string" then
        fail(string.format("%s was not written by a wb.sweep run (no complete 'sweep' section)", path))
    end
    check(doc, path)
    local mixed = require("wb.saveset").check(path)
    if mixed then io.stderr:write("merge: warning: " .. mixed .. "; the JSON is what is read\n") end
    return doc
end

-- What two shards must share to be parts of one sweep, and where they differ.
local function differences(a, b)
    local out = {}
    if a.name ~= b.name then out[#out + 1] = string.format("name %s vs %s", words.shown(a.name), words.shown(b.name)) end
    local names = {}
    for k in pairs(a.config) do names[k] = true end
    for k in pairs(b.config) do names[k] = true end
    local sorted = {}
    for k in pairs(names) do sorted[#sorted + 1] = k end
    table.sort(sorted)
    for _, k in ipairs(sorted) do
        if canon(a.config[k]) ~= canon(b.config[k]) then
            out[#out + 1] = string.format("config %s: %s vs %s", k, canon(a.config[k]), canon(b.config[k]))
        end
    end
    if canon(a.axes) ~= canon(b.axes) then out[#out + 1] = "axes: " .. canon(a.axes) .. " vs " .. canon(b.axes) end
    if canon(a.points) ~= canon(b.points) then out[#out + 1] = "points differ" end
    for _, k in ipairs({"samples", "stats", "derived", "keys"}) do
        if canon(a[k]) ~= canon(b[k]) then out[#out + 1] = k .. " differ" end
    end
    -- the constants' values are each run's own (a peak measured on its node, applied to its own
    -- rows); their names are the sweep's
    local function names(t)
        local list = {}
        for k in pairs(t or {}) do list[#list + 1] = tostring(k) end
        table.sort(list)
        return table.concat(list, ", ")
    end
    if names(a.constants) ~= names(b.constants) then
        out[#out + 1] = string.format("constants differ (%s vs %s)", names(a.constants), names(b.constants))
    end
    return out
end

-- The hardware a shard measured on: what makes two shards' timings incomparable.
local function hardware(fp)
    fp = fp or {}
    local parts = {"CPU " .. tostring(fp.cpu or "?")}
    if fp.gpu then parts[#parts + 1] = "GPU " .. tostring(fp.gpu) end
    if fp.cuda_driver then parts[#parts + 1] = "driver " .. tostring(fp.cuda_driver) end
    return table.concat(parts, ", ")
end

-- Merges the shard files (or folders) in inputs into out; returns the paths written.
function M.merge(out_dir, inputs, say)
    say = say or print
    local files = {}
    for _, path in ipairs(inputs) do
        if is_dir(path) then
            local found = shard_files(path)
            if #found == 0 then fail(string.format("%s holds no shard files (<name>.shard-I-of-N.json)", path)) end
            for _, x in ipairs(found) do files[#files + 1] = x end
        else
            files[#files + 1] = path
        end
    end
    local docs = {}
    for i, path in ipairs(files) do
        docs[i] = load(path)
        local part = docs[i].partial
        if part ~= nil and part ~= cjson.null then -- a run stopped by Ctrl-C: fewer rounds than the others
            -- JSON gives whole numbers back as floats: said as whole rounds ("2 of 3", never "2.0 of 3.0")
            local function whole(v) return math.type(v) and v == math.floor(v) and string.format("%d", v) or "?" end
            local done, asked = type(part) == "table" and whole(part.rounds_completed) or "?",
                type(part) == "table" and whole(part.rounds) or "?"
            fail(string.format("%s holds partial results: its run was interrupted after %s of its %s rounds, so " ..
                "it is " ..
                "not a whole shard; run that shard again", files[i], done, asked))
        end
    end
    local ref = docs[1].sweep
    for i = 2, #docs do
        local d = differences(ref, docs[i].sweep)
        if #d > 0 then
            fail(string.format("%s and %s are shards of different sweeps: %s", files[1], files[i], table.concat(d, "; ")))
        end
    end

    -- every point exactly once
    local where, rows = {}, {}
    local known = {}
    for _, name in ipairs(ref.points) do known[name] = true end
    for i, doc in ipairs(docs) do
        for j, r in ipairs(doc.rows) do
            if type(r) ~= "table" then fail(string.format("%s: row %d is not an object", files[i], j)) end
            for _, a in ipairs(ref.axes) do
                if r[a.name] == nil then fail(string.format("%s: row %d has no '%s'", files[i], j, a.name)) end
                if not is_string(r[a.name]) and not finite(r[a.name]) then
                    fail(string.format("%s: row %d, %s: expected a number or a string", files[i], j, a.name))
                end
            end
            local name = sweep.point_name(ref.axes, r)
            if not known[name] then fail(string.format("%s: row %d (%s) is not a point of the sweep", files[i], j, name)) end
            local s = r[ref.samples]
            if type(s) ~= "table" or #s == 0 then
                fail(string.format("%s: point %s has no raw samples ('%s'): cannot recompute its statistics", files[i],
                    name, ref.samples))
            end
            for k, v in ipairs(s) do
                if not finite(v) then
                    fail(string.format("%s: point %s, sample %d: %s, expected a finite number", files[i], name, k,
                        type(v) == "number" and tostring(v) or "not a number"))
                end
            end
            where[name] = where[name] or {}
            table.insert(where[name], files[i])
            r._doc = i
            rows[name] = r
        end
    end
    local missing, duplicated = {}, {}
    for _, name in ipairs(ref.points) do
        local w = where[name]
        if not w then
            missing[#missing + 1] = name
        elseif #w > 1 then
            duplicated[#duplicated + 1] = string.format("%s (in %s)", name, table.concat(w, ", "))
        end
    end
    if #missing > 0 or #duplicated > 0 then
        local msg = {}
        if #missing > 0 then
            -- which shard should have measured them, when the shards say
            local hint = ""
            local sh = ref.shard
            if sh and type(sh.assignment) == "table" then
                local need = {}
                for k, name in ipairs(ref.points) do
                    if not where[name] then need[sh.assignment[k]] = true end
                end
                local list = {}
                for s = 1, sh.count do if need[s] then list[#list + 1] = string.format("%d/%d", s, sh.count) end end
                hint = " (shard " .. table.concat(list, ", ") .. ")"
            end
            msg[#msg + 1] = string.format("%d missing point%s%s: %s", #missing, #missing > 1 and "s" or "", hint,
                table.concat(missing, "; "))
        end
        if #duplicated > 0 then
            msg[#msg + 1] = string.format("%d duplicated point%s: %s", #duplicated, #duplicated > 1 and "s" or "",
                table.concat(duplicated, "; "))
        end
        fail(table.concat(msg, "\n") .. "\nnothing written")
    end

    -- recompute from the raw samples: the statistics and derived columns are dropped first
    local computed = {}
    for _, spec in ipairs(ref.stats) do
        for k, column in pairs(spec) do if k ~= "from" and k ~= "median_of" then computed[column] = true end end
    end
    for _, d in ipairs(ref.derived) do computed[d.column] = true end
    local shard_label, hw = {}, {}
    for i, doc in ipairs(docs) do
        local sh = doc.sweep.shard
        shard_label[i] = sh and string.format("%d/%d", sh.index, sh.count) or "whole"
        hw[i] = hardware(doc.fingerprint)
    end
    local distinct = {}
    for i = 1, #docs do distinct[hw[i]] = true end
    local mixed = next(distinct, next(distinct)) ~= nil
    local merged = {}
    for _, name in ipairs(ref.points) do
        local r = rows[name]
        local row = {}
        for k, v in pairs(r) do
            if not computed[k] and k ~= "_doc" then row[k] = v end
        end
        row.shard = shard_label[r._doc]
        if mixed then row.hardware = hw[r._doc] end
        row._doc = r._doc
        merged[#merged + 1] = row
    end
    sweep.compute(merged, ref, function(row) return docs[row._doc].sweep.constants or {} end)

    -- the fingerprint: the shards' values, joined where they differ; each shard's kept whole
    local fp, shards = {}, {}
    for i, doc in ipairs(docs) do
        shards[i] = {file = files[i], shard = shard_label[i], fingerprint = doc.fingerprint, points = #doc.rows}
        for k, v in pairs(doc.fingerprint or {}) do
            local text = tostring(v)
            if fp[k] == nil then
                fp[k] = v
            elseif tostring(fp[k]) ~= text and not (" | " .. tostring(fp[k]) .. " | "):find(" | " .. text .. " | ", 1, true) then
                fp[k] = tostring(fp[k]) .. " | " .. text
            end
        end
    end
    fp.merged_shards = #docs

    local keys = {}
    for i, a in ipairs(ref.axes) do keys[i] = a.name end
    local columns = {}
    for i, c in ipairs(docs[1].columns) do columns[i] = c end
    columns[#columns + 1] = "shard"
    if mixed then columns[#columns + 1] = "hardware" end
    -- quiet, and no machine state of its own: the merging machine's load says nothing about the
    -- measurements (each shard's is in its fingerprint), so no busy warning on stderr or in the report
    local res = results(ref.name, {keys = keys, columns = columns, quiet = true, machine_start = {readable = false}})
    for _, row in ipairs(merged) do
        row._doc = nil
        res:add(row)
    end
    -- the report: the first shard's charts drawn from the merged rows, and what the merge knows
    local rep = type(docs[1].report) == "table" and docs[1].report or {}
    local merged_report = {charts = rep.charts, links = rep.links, text = {}, warnings = {}, tables = {},
        columns = rep.columns}
    for _, t in ipairs(rep.text or {}) do merged_report.text[#merged_report.text + 1] = t end
    table.insert(merged_report.text, 1, string.format("Merged from %d shard files of the sweep %s (%d points); every " ..
        "statistic recomputed from the raw samples.", #docs, ref.name, #ref.points))
    if mixed then
        merged_report.warnings[1] = "Warning: the shards ran on different hardware; timings of rows from different " ..
            "shards are not comparable (column hardware)."
    end
    local across = M.paired_across_shards(merged, ref)
    if #across > 0 then
        merged_report.warnings[#merged_report.warnings + 1] = "Warning: " .. across.summary
    end
    local shard_rows = {}
    for i, s in ipairs(shards) do
        local f = s.fingerprint or {}
        shard_rows[i] = {s.shard, s.points, hw[i], f.host or "?", f.date or "?", f.commit or "?", s.file}
    end
    merged_report.tables[1] = {title = "Shards", header = {"shard", "points", "hardware", "host", "date", "commit", "file"},
        rows = shard_rows}
    local desc = {}
    for k, v in pairs(ref) do desc[k] = v end
    desc.shard = nil
    -- per-point data a sweep kept beside its rows (mlp_sweep's findings): the shards' lists joined
    local findings
    for i, doc in ipairs(docs) do
        if type(doc.findings) == "table" then
            findings = findings or {}
            for _, f in ipairs(doc.findings) do
                if type(f) == "table" then
                    f.shard = shard_label[i]
                    findings[#findings + 1] = f
                end
            end
        end
    end
    local paths = res:save{dir = out_dir, file = ref.name, fingerprint = fp, report = merged_report,
        extra = {sweep = desc, shards = shards, findings = findings}}
    say(M.text_table(columns, merged, keys))
    say(string.format("merged %d shard file%s of %s: %d points", #docs, #docs > 1 and "s" or "", ref.name, #merged))
    if mixed then
        say("WARNING: the shards ran on different hardware (column 'hardware'):")
        for i = 1, #docs do say(string.format("  shard %s: %s", shard_label[i], hw[i])) end
    end
    if #across > 0 then
        say("WARNING: " .. across.summary)
        for _, line in ipairs(across) do say("  " .. line) end
    end
    return paths, merged
end

-- The derived columns whose two rows (a row and its base, e.g. a mode and eager at the same
-- tokens) ran in different shards: their ratios pair round k of one process with round k of
-- another (another node, perhaps), measured at different times, so they carry the difference
-- between the shards too. Returns one line per such row and, in .summary, what that means.
function M.paired_across_shards(rows, desc)
    local by_name = {}
    for _, r in ipairs(rows) do by_name[sweep.point_name(desc.axes, r)] = r end
    local lines, columns = {}, {}
    for _, d in ipairs(desc.derived) do
        if d.base then
            for _, r in ipairs(rows) do
                local other = {}
                for _, a in ipairs(desc.axes) do other[a.name] = r[a.name] end
                for k, v in pairs(d.base) do other[k] = v end
                local b = by_name[sweep.point_name(desc.axes, other)]
                if b and b ~= r and b.shard ~= r.shard and r[d.column] ~= nil then
                    lines[#lines + 1] = string.format("%s of %s (shard %s) against %s (shard %s)", d.column,
                        sweep.point_name(desc.axes, r), r.shard, sweep.point_name(desc.axes, b), b.shard)
                    columns[d.column] = (columns[d.column] or 0) + 1
                end
            end
        end
    end
    if #lines > 0 then
        local parts = {}
        for c, n in pairs(columns) do parts[#parts + 1] = string.format("%d %s", n, c) end
        table.sort(parts)
        lines.summary = string.format("%s pair%s rows measured by different shards (different processes, perhaps " ..
            "nodes, not alternated in time): read them as comparisons across runs, not within one", table.concat(parts,
            ", "), #lines == 1 and "s" or "")
    end
    return lines
end

-- The merged rows as text, one line each, within 120 columns: the columns that hold one value
-- (numbers to 4 digits), the keys and the shard first, then the others in their order while they
-- fit; a last line names those left out (every column is in the JSON and CSV).
local WIDTH = 120
function M.text_table(columns, rows, keys)
    local scalar = {}
    for _, c in ipairs(columns) do
        for _, r in ipairs(rows) do scalar[c] = scalar[c] or (r[c] ~= nil and type(r[c]) ~= "table") end
    end
    local cells, width = {}, {}
    for _, c in ipairs(columns) do
        if scalar[c] then
            width[c] = #c
            cells[c] = {}
            for i, r in ipairs(rows) do
                local v = r[c]
                local text = v == nil and "-" or math.type(v) == "integer" and tostring(v) or type(v) == "number" and
                    string.format("%.4g", v) or words.escaped(tostring(v), true)
                if #text > 24 then text = text:sub(1, 21) .. "..." end -- kernel names: in the JSON whole
                cells[c][i], width[c] = text, math.max(width[c], #text)
            end
        end
    end
    local first = {}
    for _, k in ipairs(keys or {}) do first[k] = true end
    first.shard, first.hardware = true, true
    local shown, left, used = {}, {}, -2
    local function take(c)
        if used + 2 + width[c] <= WIDTH or #shown == 0 then
            shown[#shown + 1], used = c, used + 2 + width[c]
        else
            left[#left + 1] = c
        end
    end
    for _, c in ipairs(columns) do if scalar[c] and first[c] then take(c) end end
    for _, c in ipairs(columns) do if scalar[c] and not first[c] then take(c) end end
    -- back in the file's order, the shard (provenance) last
    local at = {}
    for i, c in ipairs(columns) do at[c] = i end
    table.sort(shown, function(a, b)
        if (a == "shard") ~= (b == "shard") then return b == "shard" end
        return at[a] < at[b]
    end)
    local function line(vals)
        local out = {}
        for j, v in ipairs(vals) do out[j] = string.rep(" ", width[shown[j]] - #v) .. v end
        return table.concat(out, "  ")
    end
    local out = {line(shown)}
    for i = 1, #rows do
        local vals = {}
        for j, c in ipairs(shown) do vals[j] = cells[c][i] end
        out[#out + 1] = line(vals)
    end
    if #left > 0 then
        out[#out + 1] = words.wrap(string.format("(%d more columns in the JSON and CSV: %s)", #left,
            table.concat(left, ", ")), WIDTH, "  ")
    end
    return table.concat(out, "\n")
end

return M
