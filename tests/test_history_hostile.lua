-- test_history_hostile.lua: history databases someone else changed are refused before use, with
-- nothing written: planted triggers and views (which would run on the workbench's own reads and
-- writes), a schema version no workbench writes, and stored values no workbench writes (an
-- infinite median, a NUL in a commit) named by run and row instead of an internal error.
local lu = require("luaunit")
local scratch = require("scratch")

local EXE = scratch.exe()
local series = require("history_series").series
local PLANTS = require("fuzz.hostile_corpus").PLANTS -- the red team's corpus: what is planted, what is said

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

local plant = require("fuzz.hostile_corpus").plant

TestHistoryHostile = {}

-- A trigger that rewrites every median added (check would then see no regression), planted by
-- someone else: add and check refuse it by name, and the rows stay as they were.
function TestHistoryHostile:test_planted_trigger_is_refused_and_nothing_is_written()
    local db, files = database()
    plant(db, PLANTS.trigger.sql)
    local before = count(db, "SELECT count(*) AS n FROM results")
    local sum_before = count(db, "SELECT sum(median) AS n FROM results")
    local out, code = hist(db, "add " .. files[5])
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, PLANTS.trigger.says)
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
    plant(db, PLANTS.view.sql)
    local out, code = hist(db, "list")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, PLANTS.view.says)
    plant(db, "DROP VIEW recent; " .. PLANTS.table.sql)
    out, code = hist(db, "list")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, PLANTS.table.says)
    plant(db, "DROP TABLE notes; " .. PLANTS.version.sql)
    out, code = hist(db, "list")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, PLANTS.version.says)
    plant(db, "PRAGMA user_version = 2")
    out, code = hist(db, "list")
    lu.assertEquals(code, 0, out)
end

-- Values no workbench writes: one line naming the run and the row, never an internal error.
function TestHistoryHostile:test_hostile_values_name_their_run_and_row()
    local db = database()
    plant(db, PLANTS.inf_median.sql)
    for _, cmd in ipairs({"check", "show history_base", "report --html " .. scratch.path(".html")}) do
        local out, code = hist(db, cmd)
        lu.assertEquals(code, 2, cmd .. ": " .. out)
        lu.assertStrMatches(out, ".*: run 2, row [^:]+: " .. PLANTS.inf_median.says .. ".*")
        lu.assertNotStrContains(out, "stack traceback")
    end
    plant(db, "UPDATE results SET median = 0.5 WHERE median > 1e308; " .. PLANTS.nul_commit.sql)
    local out, code = hist(db, "list")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "run 3: " .. PLANTS.nul_commit.says)
    out, code = hist(db, "check")
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "commit_id is text with a NUL byte")
end

-- The corpus's databases (tests/fuzz/hostile_corpus.lua writes one per plant): each refused by
-- the commands it names, with its one line, and left as it was; the untouched copy reads.
function TestHistoryHostile:test_every_planted_database_of_the_corpus_is_refused()
    local corpus = require("fuzz.hostile_corpus")
    local dbs = corpus.databases(scratch.dir(), EXE)
    local out, code = hist(dbs.clean, "check")
    lu.assertEquals(code, 0, out)
    local extra = series{seed = 4, runs = 1}[1]
    for name, plant in pairs(PLANTS) do
        local before = scratch.read(dbs[name])
        for _, cmd in ipairs(plant.commands) do
            cmd = cmd == "add" and ("add " .. extra) or cmd
            out, code = hist(dbs[name], cmd)
            lu.assertEquals(code, 2, name .. ", " .. cmd .. ": " .. out)
            lu.assertStrContains(out, plant.says, false, name .. ", " .. cmd)
            lu.assertNotStrContains(out, "stack traceback")
        end
        lu.assertTrue(scratch.read(dbs[name]) == before, name .. ": the database was changed")
    end
end

scratch.exit(lu.LuaUnit.run())
