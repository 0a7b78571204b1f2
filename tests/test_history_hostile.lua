-- test_history_hostile.lua: history databases someone else changed are refused before use, with
-- nothing written: planted triggers and views (which would run on the workbench's own reads and
-- writes), a schema version no workbench writes, and stored values no workbench writes (an
-- infinite median, a NUL in a commit) named by run and row instead of an internal error.
local lu = require("luaunit")
local scratch = require("scratch")

local EXE = scratch.exe()
local series = require("history_series").series

local function hist(db, args)
    return scratch.run(string.format("%s history --db %s %s 2>&1", EXE, db, args))
end

-- A database of 4 runs (the first 4 files of a series), and the other files of the series.
local function database()
    local db = scratch.path(".db")
    local files = series{seed = 3, runs = 6}
    local out, code = hist(db, "add " .. table.concat(files, " ", 1, 4))
    lu.assertEquals(code, 0, out)
    return db, files
end

local function count(db, sql)
    local conn = wb._sqlite_open(db, true)
    local n = conn:query(sql)[1].n
    conn:close()
    return n
end

local function plant(db, sql)
    local conn = wb._sqlite_open(db)
    assert(conn:exec(sql))
    conn:close()
end

TestHistoryHostile = {}

-- A trigger that rewrites every median added (check would then see no regression), planted by
-- someone else: add and check refuse it by name, and the rows stay as they were.
function TestHistoryHostile:test_planted_trigger_is_refused_and_nothing_is_written()
    local db, files = database()
    plant(db, "CREATE TRIGGER keep_medians AFTER INSERT ON results BEGIN UPDATE results SET median = 1; END")
    local before = count(db, "SELECT count(*) AS n FROM results")
    local sum_before = count(db, "SELECT sum(median) AS n FROM results")
    local out, code = hist(db, "add " .. files[5])
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "holds objects the workbench did not create (trigger keep_medians on results)")
    lu.assertStrContains(out, "nothing was changed")
    lu.assertEquals(count(db, "SELECT count(*) AS n FROM results"), before)
    lu.assertEquals(count(db, "SELECT sum(median) AS n FROM results"), sum_before)
    out, code = hist(db, "check")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "trigger keep_medians on results")
    -- the same database without the trigger is used again
    plant(db, "DROP TRIGGER keep_medians")
    out, code = hist(db, "add " .. files[5])
    lu.assertEquals(code, 0, out)
    lu.assertEquals(count(db, "SELECT count(*) AS n FROM runs"), 5)
end

function TestHistoryHostile:test_views_tables_and_versions_not_the_workbenchs_are_refused()
    local db = database()
    plant(db, "CREATE VIEW recent AS SELECT * FROM runs")
    local out, code = hist(db, "list")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "view recent")
    plant(db, "DROP VIEW recent; CREATE TABLE notes(x)")
    out, code = hist(db, "list")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "table notes")
    plant(db, "DROP TABLE notes; PRAGMA user_version = -5")
    out, code = hist(db, "list")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "schema version -5, which no workbench writes")
    plant(db, "PRAGMA user_version = 2")
    out, code = hist(db, "list")
    lu.assertEquals(code, 0, out)
end

-- Values no workbench writes: one line naming the run and the row, never an internal error.
function TestHistoryHostile:test_hostile_values_name_their_run_and_row()
    local db = database()
    plant(db, "UPDATE results SET median = 9e999 WHERE run = 2 AND rowid = (SELECT min(rowid) FROM results " ..
        "WHERE run = 2)")
    for _, cmd in ipairs({"check", "show history_base", "report --html " .. scratch.path(".html")}) do
        local out, code = hist(db, cmd)
        lu.assertEquals(code, 2, cmd .. ": " .. out)
        lu.assertStrMatches(out, ".*: run 2, row [^:]+: the median is inf: the database was changed by something " ..
            "other than the workbench.*")
        lu.assertNotStrContains(out, "stack traceback")
    end
    plant(db, "UPDATE results SET median = 0.5 WHERE median > 1e308; UPDATE runs SET commit_id = 'c' || char(0) || " ..
        "'x' WHERE id = 3")
    local out, code = hist(db, "list")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "run 3: commit_id is text with a NUL byte")
    out, code = hist(db, "check")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "commit_id is text with a NUL byte")
end

scratch.exit(lu.LuaUnit.run())
