-- wb.cmd.history: `workbench history add|list|show|check|report|gc [--db PATH]`, the command
-- over wb.history (the store), wb.changepoints (where series changed) and wb.history_report.
-- Exit status: 0; 1 for check --fail-on-regression when a series' newest segment is slower by
-- more than PCT; 2 with a one-line message for bad input or a database that cannot be used
-- (locked, read-only, corrupt, newer schema) -- and for add, when a file was skipped.

local cjson = require("cjson")
local history = require("wb.history")
local changepoints = require("wb.changepoints")
local words = require("wb.words")
local environment = require("wb.environment")

local M = {}

local USAGE = [[
usage: workbench history [--db PATH] COMMAND ...
  add FILE...                 import results files (.json); the same file twice is one run
  list [--json]               the runs, newest first (and where their WB_*/OMP_* variables changed)
  show EXPERIMENT [ROW]       each row's series: date, commit, median, 95% interval, noise
  check [EXPERIMENT] [--json] [--fail-on-regression PCT] [--seed N]
                              change points per series (experiment + config + row), confirmed on
                              the runs' medians against the run-to-run noise, with the environment
                              variables that changed there;
                              a new machine is reported as "machine changed"
  report --html FILE [EXPERIMENT]   a chart per row: medians and intervals over the runs,
                              changes marked, machine changes shaded
  gc --keep N                 keep the newest N runs of every series
  --db PATH                   the database (default: $WB_HISTORY_DB, else
                              $XDG_DATA_HOME/workbench/history.db, XDG_DATA_HOME ~/.local/share)
exit status: 0; 1 when check --fail-on-regression finds a regression; 2 for bad input]]

local function fail(msg) history.fail(msg) end

local function show(v)
    if type(v) ~= "number" then return tostring(v == nil and "-" or v) end
    return string.format("%.4g", v)
end

local function out(...) io.write(...) end

-- What one series' points and events say, for check's lines and its --json.
local function change_record(s, e)
    local p = s.points[e.index]
    local rec = {series = history.series_name(s), experiment = s.experiment, config = s.config, row = s.row,
        metric = s.metric, kind = e.kind == "machine" and "machine changed" or
            (e.verdict == "SLOWER" and "regression" or "improvement"),
        run = p.run, date = p.date, commit = p.commit_id, index = e.index, runs = #s.points}
    if e.kind == "machine" then
        rec.from, rec.to = e.from, e.to
        rec.before, rec.after = s.points[e.index - 1].median, p.median
        rec.ratio = rec.before > 0 and rec.after / rec.before or nil
    else
        rec.before, rec.after, rec.ratio, rec.p, rec.p_permutation = e.before, e.after, e.ratio, e.p, e.p_perm
        rec.verdict = e.verdict
    end
    -- the environment variables that changed at that run (a forced WB_GEMM_BLOCKING, not the commit)
    local changed = e.index > 1 and environment.differ(s.points[e.index - 1].environment, p.environment)
    if changed and #changed > 0 then
        rec.environment = {}
        for i, d in ipairs(changed) do rec.environment[i] = {name = d.name, before = d.a, after = d.b} end
    end
    return rec
end

-- "<lead>NAME: a -> b; ...\n" for two runs' variables (lead: "  environment changed: "), or ""
-- when they agree or either run did not record them.
local function environment_note(before, after, lead)
    local changed = environment.differ(before, after)
    if not changed or #changed == 0 then return "" end
    return lead .. environment.joined(changed, environment.change) .. "\n"
end

local function cmd_check(db, o)
    local series = db:series{experiment = o.experiment, samples = true}
    if #series == 0 then fail(o.experiment and ("no runs of " .. o.experiment .. " in " .. db.path) or
        ("no runs in " .. db.path)) end
    local records, worst = {}, nil
    for _, s in ipairs(series) do
        local events = changepoints.detect(s.points, {seed = o.seed})
        for _, e in ipairs(events) do records[#records + 1] = change_record(s, e) end
        local newest = changepoints.newest_change(events, #s.points)
        if newest and newest.verdict == "SLOWER" and (not worst or newest.ratio > worst.ratio) then
            worst = {ratio = newest.ratio, series = history.series_name(s)}
        end
    end
    if o.json then
        -- lua-cjson writes an empty table as {}: the list is an array, even when empty
        out(string.format('{"series":%d,"changes":%s}\n', #series, #records > 0 and cjson.encode(records) or "[]"))
    else
        out(string.format("%s, %s\n", words.plural(#series, "series", "series"), words.plural(#records, "change")))
        for _, r in ipairs(records) do
            local where = string.format("run %d of %d (%s, commit %s)", r.index, r.runs, r.date, tostring(r.commit or "?"))
            if r.kind == "machine changed" then
                out(string.format("%s: machine changed at %s: %s -> %s (%s -> %s %s, not a regression)\n", r.series,
                    where, r.from, r.to, show(r.before), show(r.after), r.metric:match("_(%a+)$")))
            else
                out(string.format("%s: %s at %s: %s -> %s %s, ratio %.3f, p %s\n", r.series, r.kind, where,
                    show(r.before), show(r.after), r.metric:match("_(%a+)$"), r.ratio,
                    r.p and string.format("%.2g", r.p) or "-"))
            end
            if r.environment then
                local changed = {}
                for i, d in ipairs(r.environment) do changed[i] = {name = d.name, a = d.before, b = d.after} end
                out(string.format("  environment changed at that run: %s\n", environment.joined(changed,
                    environment.change)))
            end
        end
    end
    if o.fail_on and worst and (worst.ratio - 1) * 100 > o.fail_on then
        io.stderr:write(string.format("workbench history: %s: the newest runs are %.1f%% slower than the ones " ..
            "before (more than --fail-on-regression %g)\n", worst.series, (worst.ratio - 1) * 100, o.fail_on))
        return 1
    end
    return 0
end

local function cmd_add(db, files)
    local skipped, added = 0, 0
    for _, path in ipairs(files) do
        local ok, status, id, nrows = pcall(db.add, db, path)
        if ok then
            if status == "added" then added = added + 1 end
            out(string.format("%s: %s\n", path, status == "added" and string.format("run %d (%s)", id,
                words.plural(nrows, "row")) or string.format("already recorded (run %d)", id)))
        elseif type(status) == "table" and status.skip then
            skipped = skipped + 1 -- this file's problem: named, skipped, the rest imported
            io.stderr:write("workbench history: skipped: " .. words.escaped(status.history_error) .. "\n")
        else
            error(status, 0) -- the database's problem: stop
        end
    end
    out(string.format("%s added to %s%s\n", words.plural(added, "run"), db.path,
        skipped > 0 and string.format(" (%d file%s skipped)", skipped, skipped > 1 and "s" or "") or ""))
    return skipped > 0 and 2 or 0
end

local function cmd_list(db, o)
    local runs = db:runs()
    if o.json then
        out(#runs > 0 and cjson.encode(runs) or "[]", "\n")
        return 0
    end
    out(string.format("%s in %s\n", words.plural(#runs, "run"), db.path))
    for i, r in ipairs(runs) do
        out(string.format("%5d  %s  %-20s  commit %-14s %s  [%s]  %s\n", r.id, r.date, r.experiment,
            tostring(r.commit_id or "?"), words.plural(r.rows, "row"), r.config, r.machine))
        -- against the run of the same experiment and config before it (runs are newest first)
        for j = i + 1, #runs do
            local older = runs[j]
            if older.experiment == r.experiment and older.config == r.config then
                out(environment_note(older.environment, r.environment,
                    string.format("%7senvironment changed since run %d: ", "", older.id)))
                break
            end
        end
    end
    return 0
end

local function cmd_show(db, o)
    local series = db:series{experiment = o.experiment, row = o.row}
    if #series == 0 then
        fail(string.format("no runs of %s%s in %s", o.experiment, o.row and (" with the row '" .. o.row .. "'") or "",
            db.path))
    end
    for i, s in ipairs(series) do
        out(i > 1 and "\n" or "", history.series_name(s), "\n")
        out(string.format("  %-20s %-14s %12s %25s %7s  %s\n", "date", "commit", "median", "95% interval", "noise",
            "machine"))
        local unit = s.metric:match("_(%a+)$")
        for k, p in ipairs(s.points) do
            out(string.format("  %-20s %-14s %9s %s %25s %6s%%  %s\n", p.date, tostring(p.commit_id or "?"),
                show(p.median), unit, p.lo and string.format("%s .. %s", show(p.lo), show(p.hi)) or "-",
                p.noise and string.format("%.1f", p.noise * 100) or "-", p.machine))
            if k > 1 then
                out(environment_note(s.points[k - 1].environment, p.environment, "    environment changed: "))
            end
        end
    end
    return 0
end

local function cmd_report(db, o)
    local series = db:series{experiment = o.experiment, samples = true}
    if #series == 0 then fail("no runs to report in " .. db.path) end
    local list = {}
    for i, s in ipairs(series) do list[i] = {series = s, events = changepoints.detect(s.points, {seed = o.seed})} end
    require("wb.history_report").write(o.html, list, db.path)
    out(string.format("report: %s (%s)\n", o.html, words.plural(#series, "chart")))
    return 0
end

local function cmd_gc(db, o)
    local removed, runs = db:gc(o.keep)
    out(string.format("gc: kept the newest %d runs of every series: %s and %s removed\n", o.keep,
        words.plural(removed, "row result"), words.plural(runs, "run")))
    return 0
end

local COMMANDS = {add = true, list = true, show = true, check = true, report = true, gc = true}

-- The arguments: --db anywhere, the command, its options and its positional arguments.
local function parse(args)
    local o, pos = {}, {}
    local i = 1
    local function value(name)
        local v = args[i + 1]
        if v == nil then fail(name .. " needs a value") end
        i = i + 1
        return v
    end
    while i <= #args do
        local a = args[i]
        if a == "--help" or a == "-h" then
            o.help = true
        elseif a == "--db" then
            o.db = value(a)
            if o.db == "" then fail("--db: expected a file name, got an empty value") end
        elseif a == "--json" then
            o.json = true
        elseif a == "--html" then
            o.html = value(a)
        elseif a == "--seed" then
            o.seed = math.tointeger(tonumber(value(a)))
            if not o.seed or o.seed < 0 then fail("--seed: expected a whole number >= 0, got " .. args[i]) end
        elseif a == "--keep" then
            o.keep = math.tointeger(tonumber(value(a)))
            if not o.keep or o.keep < 1 then fail("--keep: expected a whole number >= 1, got " .. args[i]) end
        elseif a == "--fail-on-regression" then
            o.fail_on = tonumber(value(a))
            if not o.fail_on or o.fail_on < 0 or o.fail_on > 1000 then
                fail("--fail-on-regression takes a percentage from 0 to 1000, got " .. args[i])
            end
        elseif a:match("^%-%-?%a") then
            fail("unknown option " .. a)
        elseif not o.command then
            if not COMMANDS[a] then fail("unknown command '" .. a .. "' (add, list, show, check, report, gc)") end
            o.command = a
        else
            pos[#pos + 1] = a
        end
        i = i + 1
    end
    return o, pos
end

local function run(args)
    local o, pos = parse(args)
    if o.help then
        out(USAGE, "\n")
        return 0
    end
    if not o.command then fail("which command? (add, list, show, check, report, gc; --help)") end
    local c = o.command
    local allowed = {add = {}, list = {json = true}, show = {}, check = {json = true, fail_on = true, seed = true},
        report = {html = true, seed = true}, gc = {keep = true}}
    for _, k in ipairs({"json", "html", "seed", "keep", "fail_on"}) do
        if o[k] ~= nil and not allowed[c][k] then
            fail(string.format("%s does not take --%s", c, (k:gsub("_", "-")):gsub("fail%-on", "fail-on-regression")))
        end
    end
    local npos = {add = math.huge, list = 0, show = 2, check = 1, report = 1, gc = 0}
    if #pos > npos[c] then fail(string.format("%s: unexpected argument '%s'", c, pos[npos[c] + 1])) end
    if c == "add" and #pos == 0 then fail("add: which results files? (workbench history add FILE...)") end
    if c == "show" and #pos == 0 then fail("show: which experiment? (workbench history show EXPERIMENT [ROW])") end
    if c == "report" and not o.html then fail("report: where? (workbench history report --html FILE)") end
    if c == "gc" and not o.keep then fail("gc: how many runs per series? (workbench history gc --keep N)") end
    o.experiment, o.row = pos[1], pos[2]
    local db = history.open{path = o.db, write = c == "add" or c == "gc"}
    local ok, status = pcall(function()
        if c == "add" then return cmd_add(db, pos) end
        if c == "list" then return cmd_list(db, o) end
        if c == "show" then return cmd_show(db, o) end
        if c == "check" then return cmd_check(db, o) end
        if c == "report" then return cmd_report(db, o) end
        return cmd_gc(db, o)
    end)
    db:close()
    if not ok then error(status, 0) end
    return status
end

-- Entry point for `workbench history ...`: returns the exit status.
function M.main(args)
    local ok, status = pcall(run, args)
    if ok then return status end
    local msg = type(status) == "table" and status.history_error or tostring(status)
    io.stderr:write("workbench history: " .. words.escaped(msg) .. "\n")
    return 2
end

return M
