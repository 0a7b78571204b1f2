-- wb.history: every results file kept in one SQLite database (bindings/l_history.c), so that a
-- row's timings can be followed over weeks of commits. This file is the store: where the
-- database lives, its schema and migrations, importing results files, reading series, gc.
-- Change points: wb.changepoints; the HTML report: wb.history_report; the command: wb.cmd.history.
--
-- A run is one results file (its bytes' digest makes a second import of the same file a no-op);
-- a series is experiment + run-wide config + row, cut wherever the machine (CPU model, ISA, GPU,
-- build type) changes; the environment variables a run recorded (wb.environment) do not cut it:
-- they are what `check` names beside a change that coincides with them. Each insert is one
-- transaction: a killed process leaves the database as it was before that run. WAL and a busy
-- timeout let several processes add at once.

local cjson = require("cjson")
local compare = require("wb.compare")
local stats = require("wb.stats")
local words = require("wb.words")
local environment = require("wb.environment")
local sqlite_open, mkdir_p = wb._sqlite_open, wb.mkdir_p -- captured at load: wb._* are gone under --sandbox

local M = {}

local function fail(msg) error({history_error = msg}, 0) end
M.fail = fail

-- Schema versions: MIGRATIONS[k] takes a database from version k-1 to k (PRAGMA user_version).
local MIGRATIONS = {
    [[
    CREATE TABLE runs(
        id INTEGER PRIMARY KEY,
        digest TEXT NOT NULL UNIQUE,  -- FNV-1a 64 of the file's bytes: the same file twice is one run
        experiment TEXT NOT NULL,     -- the results' name
        config TEXT NOT NULL,         -- the run-wide configuration as compare checks it (no seed)
        machine TEXT NOT NULL,        -- CPU model, ISA, GPU, build type: a change cuts a series
        date TEXT NOT NULL,           -- ISO 8601, UTC (the fingerprint's; the latest of a merge's)
        commit_id TEXT, host TEXT,
        fingerprint TEXT NOT NULL,    -- JSON, as the file had it
        sweep TEXT,                   -- JSON: the wb.sweep description, when there is one
        source TEXT, added TEXT NOT NULL);
    CREATE TABLE results(
        run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        row TEXT NOT NULL,            -- the row's name as compare aligns it ("tokens=16 mode=dual")
        metric TEXT NOT NULL,         -- median_ms or median_us
        median REAL NOT NULL, lo REAL, hi REAL, noise REAL, n INTEGER,
        samples TEXT,                 -- JSON array of the raw samples (NULL for older files)
        data TEXT NOT NULL,           -- JSON: the row's other columns
        PRIMARY KEY(run, row));
    ]],
    [[
    CREATE INDEX runs_by_series ON runs(experiment, config, date);
    CREATE INDEX results_by_row ON results(row);
    ]],
}
M.SCHEMA = #MIGRATIONS

-- The database's path: --db, else $WB_HISTORY_DB, else $XDG_DATA_HOME/workbench/history.db
-- ($XDG_DATA_HOME defaults to ~/.local/share).
function M.default_path()
    local env = os.getenv("WB_HISTORY_DB")
    if env and env ~= "" then return env end
    local data = os.getenv("XDG_DATA_HOME")
    if not data or data == "" then
        local home = os.getenv("HOME")
        if not home or home == "" then fail("no database given: set --db, WB_HISTORY_DB, XDG_DATA_HOME or HOME") end
        data = home .. "/.local/share"
    end
    return data .. "/workbench/history.db"
end

local function exists(path)
    local f = io.open(path, "rb")
    if f then f:close() end
    return f ~= nil
end

-- What SQLite's failure means for this database, in one line.
local function explain(path, what, msg, code)
    if code == "busy" or code == "locked" then
        return string.format("%s is locked by another process (%s; waited %s ms): try again later", path, msg,
            tostring(M.busy_ms()))
    elseif code == "readonly" or code == "perm" then
        return string.format("%s is read-only (%s): nothing was recorded", path, msg)
    elseif code == "notadb" then
        return string.format("%s is not a SQLite database (%s); nothing was changed: move it aside to start a new one",
            path, msg)
    elseif code == "cantopen" then
        return string.format("cannot open %s (%s): is its folder there and writable?", path, msg)
    end
    return string.format("%s: %s: %s", path, what, msg)
end

function M.busy_ms()
    local v = math.tointeger(tonumber(os.getenv("WB_HISTORY_BUSY_MS") or ""))
    return v and v >= 0 and v or 10000
end

local DB = {}
DB.__index = DB

-- db:must(method, sql, ...): the statement's result, or a one-line error naming the database.
-- A corrupt database is named with SQLite's integrity check.
function DB:must(method, sql, ...)
    local a, b, code = self.conn[method](self.conn, sql, ...)
    if a == nil then
        if code == "corrupt" then self:corrupt() end
        fail(explain(self.path, "database error", b, code))
    end
    return a, b
end

-- Raises naming what PRAGMA integrity_check found (its first lines); nothing is written.
function DB:corrupt(found)
    if not found then
        local rows = self.conn:query("PRAGMA integrity_check(5)")
        found = {}
        for _, r in ipairs(rows or {}) do found[#found + 1] = r.integrity_check end
    end
    local lines = {} -- its lines, without the "*** in database main ***" heading
    for _, text in ipairs(found) do
        for line in tostring(text):gmatch("[^\n]+") do
            if not line:match("^%*%*%* in database") then lines[#lines + 1] = line end
        end
    end
    if #lines == 0 then lines = {"the file cannot be read as a database"} end
    fail(string.format("%s is corrupt: PRAGMA integrity_check says: %s; nothing was changed (restore it from a " ..
        "copy, or move it aside to start a new one)", self.path, table.concat(lines, "; ")))
end

function DB:close() self.conn:close() end

-- Puts the database in WAL mode. Switching takes the file's exclusive lock, and SQLite answers
-- busy at once there rather than waiting on its busy timeout (8 processes creating one database
-- on a loaded machine: one writer in 150 rounds was refused), so the switch is retried here for
-- the busy time. A database already in WAL mode needs no lock to say so.
function DB:wal()
    local deadline = wb.time_ns() + M.busy_ms() * 1e6
    while true do
        local rows, msg, code = self.conn:query("PRAGMA journal_mode = WAL")
        if rows and rows[1] and rows[1].journal_mode == "wal" then return end
        if rows == nil and code ~= "busy" and code ~= "locked" then
            fail(explain(self.path, "cannot switch to WAL mode", msg, code))
        end
        if wb.time_ns() >= deadline then
            fail(explain(self.path, "cannot switch to WAL mode", msg or ("journal mode stays " ..
                tostring(rows and rows[1] and rows[1].journal_mode)), code or "busy"))
        end
        wb.sleep_ms(5)
    end
end

-- Runs fn(db) in one write transaction (BEGIN IMMEDIATE: the write lock first, so two writers
-- queue on the busy timeout instead of failing halfway); rolled back if fn raises.
function DB:transaction(fn)
    self:must("exec", "BEGIN IMMEDIATE")
    local res = table.pack(pcall(fn, self))
    if not res[1] then
        self.conn:exec("ROLLBACK")
        error(res[2], 0)
    end
    self:must("exec", "COMMIT")
    return table.unpack(res, 2, res.n)
end

local function migrate(db, upto)
    for v = db.version + 1, upto do
        db:transaction(function()
            local now = db:must("query", "PRAGMA user_version")[1].user_version
            if now >= v then return end -- another process got there first
            db:must("exec", MIGRATIONS[v])
            db:must("exec", "PRAGMA user_version = " .. v)
        end)
    end
    db.version = db:must("query", "PRAGMA user_version")[1].user_version
end

-- The objects of the schema the workbench creates, by version: its tables, its indexes and the
-- indexes SQLite makes for their keys.
local OBJECTS = {
    {["table runs"] = true, ["table results"] = true, ["index sqlite_autoindex_runs_1"] = true,
        ["index sqlite_autoindex_results_1"] = true},
    {["index runs_by_series"] = true, ["index results_by_row"] = true},
}

-- The objects of db's schema that its version's schema does not hold ("trigger keep_medians on
-- results"), in name order: anything there is someone else's, and a trigger or a view would run
-- on the workbench's own statements.
function M.foreign_objects(db)
    local known = {}
    for v = 1, math.min(db.version, #OBJECTS) do for k in pairs(OBJECTS[v]) do known[k] = true end end
    local out = {}
    for _, o in ipairs(db:must("query", "SELECT type, name, tbl_name FROM sqlite_master ORDER BY name")) do
        if not known[o.type .. " " .. o.name] then
            out[#out + 1] = string.format("%s %s%s", o.type, words.shown(o.name),
                (o.type == "trigger" or o.type == "index") and (" on " .. words.shown(o.tbl_name)) or "")
        end
    end
    return out
end

-- M.open{path=, write=, upto=} -> db, checked (PRAGMA quick_check). write: create the file (and
-- its folder) if missing, in WAL mode. A database from a newer workbench is refused.
-- upto: migrate only to that version (tests of the migrations).
function M.open(o)
    o = o or {}
    if not sqlite_open then fail("the history database is not available under --sandbox") end
    local path = o.path or M.default_path()
    if not o.write and not exists(path) then
        fail(string.format("no history database at %s (record runs with: workbench history add FILE...)", path))
    end
    if o.write and not exists(path) then
        local dir = path:match("^(.*)/[^/]*$")
        if dir and dir ~= "" then
            local ok, err = mkdir_p(dir)
            if not ok then fail("cannot create the history database's folder: " .. tostring(err)) end
        end
    end
    local conn, msg, code = sqlite_open(path, false, M.busy_ms())
    if not conn then fail(explain(path, "cannot open", msg, code)) end
    local db = setmetatable({conn = conn, path = path}, DB)
    -- functions named in a schema (a planted view's or default's) run only where the schema is
    -- trusted: never here
    db:must("exec", "PRAGMA trusted_schema = OFF")
    -- the version and the tables read in one snapshot: another process creating the database
    -- commits both at once, and reading them apart once saw its tables without their version
    -- (a new history refused as someone else's, in test_concurrent_writers)
    -- (the objects too: a writer migrating between two reads once showed version 1 with version
    -- 2's indexes, refused as someone else's)
    db:must("exec", "BEGIN")
    db.version = db:must("query", "PRAGMA user_version")[1].user_version
    local tables = db:must("query", "SELECT count(*) AS n FROM sqlite_master")[1].n
    local foreign = db.version > 0 and db.version <= M.SCHEMA and M.foreign_objects(db) or {}
    db:must("exec", "COMMIT")
    if db.version > M.SCHEMA then
        conn:close()
        fail(string.format("%s has schema version %d, newer than this workbench's %d: refusing to use it (use the " ..
            "workbench that wrote it, or a newer one)", path, db.version, M.SCHEMA))
    end
    if db.version < 0 then
        conn:close()
        fail(string.format("%s has schema version %d, which no workbench writes: refusing to use it", path, db.version))
    end
    if db.version > 0 then
        if #foreign > 0 then
            conn:close()
            fail(string.format("%s holds objects the workbench did not create (%s): refusing to read or write it, " ..
                "nothing was changed (a trigger or view would run on this workbench's own reads and writes)", path,
                table.concat(foreign, ", ")))
        end
    end
    -- every page read once: a damaged database is named before anything reads a wrong answer
    -- from it or writes into it (a second or so for a database of 100 MB)
    local check = db:must("query", "PRAGMA quick_check(5)")
    if #check ~= 1 or check[1].quick_check ~= "ok" then
        local found = {}
        for _, r in ipairs(check) do found[#found + 1] = r.quick_check end
        db:corrupt(found)
    end
    db:must("exec", "PRAGMA foreign_keys = ON")
    local want = math.min(o.upto or M.SCHEMA, M.SCHEMA)
    if db.version == 0 then
        if tables > 0 then -- someone else's database: never add tables to it
            conn:close()
            fail(string.format("%s is a SQLite database but not a workbench history (it has %s and no schema " ..
                "version): refusing to change it", path, words.plural(tables, "table")))
        end
        if not o.write then
            conn:close()
            fail(string.format("%s holds no history yet (record runs with: workbench history add FILE...)", path))
        end
    end
    if o.write then
        db:wal()
        -- in WAL mode NORMAL syncs at checkpoints, not at every commit: a killed process or a
        -- crash still leaves whole transactions only; a power cut may lose the last few runs
        db:must("exec", "PRAGMA synchronous = NORMAL")
    end
    if db.version < want then migrate(db, want) end
    return db
end

-- ---- importing a results file -------------------------------------------------------------------

-- FNV-1a, 64 bits, of a string, as 16 hex digits (Lua's integers wrap as the hash needs).
local function digest(text)
    local h = -3750763034362895579 -- 0xcbf29ce484222325
    for i = 1, #text do h = (h ~ text:byte(i)) * 1099511628211 end
    return string.format("%016x", h)
end

-- The machine a run measured on, as one text: what makes timings of two runs incomparable.
function M.machine_of(fp)
    fp = fp or {}
    local parts = {"cpu " .. tostring(fp.cpu or "?"), "isa " .. tostring(fp.isa or "?")}
    if fp.gpu then parts[#parts + 1] = "gpu " .. tostring(fp.gpu) end
    parts[#parts + 1] = "build " .. tostring(fp.build or "?")
    return table.concat(parts, ", ")
end

-- The run-wide configuration as one text, keys sorted ("device=cpu dim=64 threads=2").
local function config_text(doc)
    local c, keys = compare.run_config(doc), {}
    for k in pairs(c) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for i, k in ipairs(keys) do parts[i] = k .. "=" .. compare.show(c[k]) end
    return table.concat(parts, " ")
end

-- A merged file's date is the shards' dates joined by " | ": the latest stands for the run.
local function run_date(fp)
    local latest
    for d in (tostring(fp.date or "") .. " | "):gmatch("(.-) | ") do
        if d ~= "" and (not latest or d > latest) then latest = d end
    end
    return latest or "?"
end

local function read_all(path)
    local f, err = io.open(path, "rb")
    if not f then fail("cannot read " .. tostring(err)) end -- io.open's message names the file
    local text, rerr = f:read("a")
    f:close()
    if not text then fail(string.format("cannot read %s: %s", path, tostring(rerr))) end
    return text
end

-- The rows of a checked results document as the store keeps them; a row without a time metric
-- (median_ms or median_us) is not a series.
local function rows_of(doc, path)
    local names, out, seen = compare.row_names(doc), {}, {}
    for i, r in ipairs(doc.rows) do
        local t = compare.timing(r)
        if t then
            local name = names[i]
            if seen[name] then
                fail(string.format("%s: rows %d and %d have the same config (%s): they cannot be told apart", path,
                    seen[name], i, name == "" and "no config columns" or name))
            end
            seen[name] = i
            local rec = {row = name, metric = t.metric, median = t.median} -- no samples: no interval
            if t.samples then
                -- the run's own figures: the median of its rounds' medians and the noise of the
                -- samples with every round weighing alike (a sweep's table and JSON; pooled samples
                -- follow the round that took the most), the interval from those samples
                local by = stats.by_rounds(stats.split_rounds(t.samples, t.per_round) or {t.samples})
                local _, lo, hi = stats.median_ci(by.equal)
                rec.median, rec.lo, rec.hi, rec.noise, rec.n = by.median, math.min(lo, by.median),
                    math.max(hi, by.median), by.noise, #t.samples
                rec.samples = cjson.encode(t.samples)
            end
            local data = {}
            for k, v in pairs(r) do if type(v) ~= "table" then data[k] = v end end
            rec.data = cjson.encode(data)
            out[#out + 1] = rec
        end
    end
    return out
end

-- db:add(path) -> "added", run id, rows | "present", run id: one results file, in one transaction.
-- A file that is not a results file raises {history_error=} naming it, before anything is written.
function DB:add(path)
    -- the file's own problems are marked `skip`: the command names the file and goes on
    local ok, text, doc, rows = pcall(function()
        local text = read_all(path)
        local ok, doc = pcall(compare.load, path)
        if not ok then fail(type(doc) == "table" and doc.compare_error or tostring(doc)) end
        if type(doc.name) ~= "string" or doc.name == "" then fail(path .. ": the results have no name") end
        local rows = rows_of(doc, path)
        if #rows == 0 then fail(path .. ": no row has a time (median_ms or median_us): nothing to follow") end
        return text, doc, rows
    end)
    if not ok then
        error({history_error = type(text) == "table" and text.history_error or tostring(text), skip = true}, 0)
    end
    local fp = doc.fingerprint or {}
    local key = digest(text)
    local stall = os.getenv("WB_HISTORY_TEST_STALL") -- tests: a marker file, then a pause mid-insert
    return self:transaction(function()
        local present = self:must("query", "SELECT id FROM runs WHERE digest = ?", key)[1]
        if present then return "present", present.id end
        local _, id = self:must("run", "INSERT INTO runs(digest, experiment, config, machine, date, commit_id, host, " ..
            "fingerprint, sweep, source, added) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", key, doc.name,
            config_text(doc), M.machine_of(fp), run_date(fp), fp.commit and tostring(fp.commit) or nil,
            fp.host and tostring(fp.host) or nil, cjson.encode(fp), doc.sweep and cjson.encode(doc.sweep) or nil,
            path, os.date("!%Y-%m-%dT%H:%M:%SZ"))
        for i, r in ipairs(rows) do
            self:must("run", "INSERT INTO results(run, row, metric, median, lo, hi, noise, n, samples, data) " ..
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", id, r.row, r.metric, r.median, r.lo, r.hi, r.noise, r.n,
                r.samples, r.data)
            if stall and i == 1 then -- the test kills the process here, inside the transaction
                local f = assert(io.open(stall, "w"))
                f:close()
                for _ = 1, 300 do os.execute("sleep 0.1") end
            end
        end
        return "added", id, #rows
    end)
end

-- ---- reading ------------------------------------------------------------------------------------

-- The environment variables a run recorded (wb.environment.of its fingerprint), or nil; cache:
-- run id -> the variables (false: none recorded), so each run's fingerprint is decoded once.
local function environment_of(cache, id, fingerprint)
    if cache[id] == nil then
        local ok, fp = pcall(cjson.decode, fingerprint or "")
        cache[id] = ok and environment.of(fp) or false
    end
    return cache[id] or nil
end

-- A stored row with a value no workbench writes: one line naming the run and the row.
local function bad_row(db, p, field, what)
    fail(string.format("%s: run %s%s: %s is %s: the database was changed by something other than the " ..
        "workbench (restore a copy, or delete that run with sqlite3)", db.path, tostring(p.run or p.id),
        p.row and (", row " .. words.shown(tostring(p.row))) or "", field, what))
end

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

-- Checks one stored point as db:series reads it (or a run as db:runs does: no median): a finite,
-- non-negative median, finite bounds, and no NUL bytes in the texts that are printed (one would
-- end a C string: the text shown would not be the text stored).
function M.check_point(db, p)
    if p.median ~= nil or p.row ~= nil then
        if not finite(p.median) or p.median < 0 then bad_row(db, p, "the median", tostring(p.median)) end
    end
    for _, k in ipairs({"lo", "hi", "noise"}) do
        if p[k] ~= nil and not finite(p[k]) then bad_row(db, p, k, tostring(p[k])) end
    end
    for _, k in ipairs({"row", "experiment", "config", "machine", "date", "commit_id", "metric", "host", "source"}) do
        local v = p[k]
        if v ~= nil and (type(v) ~= "string" or v:find("%z")) then
            bad_row(db, p, k, type(v) ~= "string" and ("a " .. type(v)) or "text with a NUL byte")
        end
    end
end

-- db:runs() -> every run, newest first: {id, experiment, config, machine, date, commit_id, host,
-- source, rows, environment (the variables it recorded, wb.environment; nil for older runs)}
function DB:runs()
    local runs = self:must("query", "SELECT r.id, r.experiment, r.config, r.machine, r.date, r.commit_id, r.host, " ..
        "r.source, r.fingerprint, (SELECT count(*) FROM results x WHERE x.run = r.id) AS rows FROM runs r " ..
        "ORDER BY r.date DESC, r.id DESC")
    local cache = {}
    for _, r in ipairs(runs) do
        M.check_point(self, r)
        r.environment, r.fingerprint = environment_of(cache, r.id, r.fingerprint), nil
    end
    return runs
end

-- db:series{experiment=, row=, samples=} -> the series, each {experiment, config, row, metric,
-- points = {{run, date, commit, machine, environment, median, lo, hi, noise, n, samples}, ...}}
-- in date order (environment: as in db:runs); samples = true decodes the raw samples too.
function DB:series(o)
    o = o or {}
    local list = self:must("query", "SELECT r.id AS run, r.experiment, r.config, r.machine, r.date, r.commit_id, " ..
        "r.fingerprint, x.row, x.metric, x.median, x.lo, x.hi, x.noise, x.n" .. (o.samples and ", x.samples" or "") ..
        " FROM results x JOIN runs r ON r.id = x.run WHERE (?1 IS NULL OR r.experiment = ?1) AND " ..
        "(?2 IS NULL OR x.row = ?2) ORDER BY r.experiment, r.config, x.row, x.metric, r.date, r.id",
        o.experiment, o.row)
    local out, current, cache = {}, nil, {}
    for _, p in ipairs(list) do
        if not current or current.experiment ~= p.experiment or current.config ~= p.config or current.row ~= p.row or
            current.metric ~= p.metric then
            current = {experiment = p.experiment, config = p.config, row = p.row, metric = p.metric, points = {}}
            out[#out + 1] = current
        end
        M.check_point(self, p)
        if p.samples then
            local ok, v = pcall(cjson.decode, p.samples)
            if not ok or type(v) ~= "table" then bad_row(self, p, "samples", "not a JSON list of numbers") end
            p.samples = v
        end
        p.environment, p.fingerprint = environment_of(cache, p.run, p.fingerprint), nil
        current.points[#current.points + 1] = p
    end
    return out
end

-- A series' name as printed: experiment [config] row.
function M.series_name(s)
    return string.format("%s [%s] %s", s.experiment, s.config, s.row ~= "" and s.row or "(one row)")
end

-- db:gc(keep) -> results removed, runs removed: keeps the newest `keep` runs of every series; a
-- run left with no rows goes too. One transaction.
function DB:gc(keep)
    return self:transaction(function()
        local removed = self:must("run", "DELETE FROM results WHERE rowid IN (SELECT id FROM (SELECT x.rowid AS id, " ..
            "row_number() OVER (PARTITION BY r.experiment, r.config, x.row, x.metric ORDER BY r.date DESC, r.id DESC) " ..
            "AS k FROM results x JOIN runs r ON r.id = x.run) WHERE k > ?)", keep)
        local runs = self:must("run", "DELETE FROM runs WHERE id NOT IN (SELECT run FROM results)")
        return removed, runs
    end)
end

-- ---- recording a run as it is saved (wb.sweep --history, WB_HISTORY=1, workbench merge) --------

-- Whether this run asked for its results to be recorded: --history among the script's
-- arguments (or passed as `flag`), or WB_HISTORY=1.
function M.wanted(flag)
    if flag then return true end
    if os.getenv("WB_HISTORY") == "1" then return true end
    if type(arg) == "table" then
        for i = 1, #arg do if arg[i] == "--history" then return true end end
    end
    return false
end

-- M.record(json_path[, say]) -> true, or false and the reason (already written to stderr): the
-- results file is saved whatever happens here, and the message says how to add it later.
function M.record(json_path, say)
    say = say or print
    local ok, err = pcall(function()
        local db = M.open{write = true}
        local status, id = db:add(json_path)
        say(string.format("history: %s as run %d in %s", status == "added" and "recorded" or "already recorded", id,
            db.path))
        db:close()
    end)
    if ok then return true end
    local msg = type(err) == "table" and err.history_error or tostring(err)
    io.stderr:write(string.format("history: not recorded: %s\n  (the results are saved: workbench history add %s)\n",
        msg, json_path))
    return false, msg
end

return M
