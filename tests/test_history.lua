-- test_history.lua: `workbench history` (wb.history, wb.changepoints): change points found at the
-- right run on synthetic series made from one real results file, A/A series without false alarms,
-- a new machine reported as such, concurrent and killed writers, and every bad input named.
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")
local history = require("wb.history")

local EXE = scratch.exe()

local run = scratch.run

local function read(path)
    local f = io.open(path, "rb")
    if not f then return nil end
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

local function hist(db, args) return run(string.format("%s history --db %s %s", EXE, db, args)) end

local series = require("history_series").series

local function add_all(db, files)
    local h = history.open{path = db, write = true}
    for _, f in ipairs(files) do h:add(f) end
    h:close()
end

local function check_json(db, extra)
    local out, code = hist(db, "check --json " .. (extra or ""))
    lu.assertEquals(code, 0, out)
    return cjson.decode(out)
end

TestHistory = {}

-- A 10% step at run 9 of 14: every row reports one regression, starting at run 9.
function TestHistory:test_change_at_run_9_for_every_row()
    local db = scratch.path(".db")
    local files, nrows = series{seed = 7, at = 9}
    local out, code = hist(db, "add " .. table.concat(files, " "))
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "14 runs added")
    local res = check_json(db)
    lu.assertEquals(res.series, nrows)
    lu.assertEquals(#res.changes, nrows, cjson.encode(res.changes))
    local rows = {}
    for _, c in ipairs(res.changes) do
        lu.assertEquals({c.kind, c.index, c.date, c.commit, c.verdict}, {"regression", 9, "2026-01-09T12:00:00Z",
            "c09", "SLOWER"})
        lu.assertTrue(math.abs(c.ratio - 1.10) < 0.03, c.series .. ": ratio " .. c.ratio)
        lu.assertTrue(c.p < 0.01)
        rows[c.row] = true
    end
    local n = 0
    for _ in pairs(rows) do n = n + 1 end
    lu.assertEquals(n, nrows) -- one per row, not two in one row
    local text = hist(db, "check")
    lu.assertStrContains(text, "regression at run 9 of 14 (2026-01-09T12:00:00Z, commit c09)")
    -- CI: the newest segment is 10% slower
    local msg, fail_code = hist(db, "check --fail-on-regression 5")
    lu.assertEquals(fail_code, 1, msg)
    lu.assertStrContains(msg, "slower than the ones before (more than --fail-on-regression 5)")
    lu.assertEquals(select(2, hist(db, "check --fail-on-regression 20")), 0)
end

-- The rows of a 1-token MLP: a thousand samples a run with a wide spread (IQR / median ~40%),
-- each run's median known to ~1.5%, 1% run-to-run noise: a 10% step at run 9 is found in every
-- row, and the same series without the step shows no change. A gate on the spread of single
-- samples (compare's noise rule) called these steps UNSURE.
function TestHistory:test_step_found_under_a_wide_sample_spread()
    local db = scratch.path(".db")
    local files, nrows = series{seed = 11, at = 9, samples = 1000, sample_sd = 0.3}
    add_all(db, files)
    for seed = 1, 3 do add_all(db, (series{seed = 40 + seed, samples = 1000, sample_sd = 0.3, name = "wide_aa" .. seed})) end
    local res = check_json(db)
    lu.assertEquals(res.series, 4 * nrows)
    local found = 0
    for _, c in ipairs(res.changes) do
        lu.assertEquals({c.experiment, c.kind, c.index}, {"history_base", "regression", 9}, cjson.encode(c))
        lu.assertTrue(math.abs(c.ratio - 1.10) < 0.03, c.series .. ": ratio " .. c.ratio)
        found = found + 1
    end
    lu.assertEquals(found, nrows, cjson.encode(res.changes))
end

-- 30 seeded A/A series (no change) of 14 runs, every row of the base file each: at most one
-- false change in all of them.
function TestHistory:test_aa_series_give_at_most_one_false_change()
    local db = scratch.path(".db")
    local nseries = 0
    for seed = 1, 30 do
        local files, nrows = series{seed = 1000 + seed, name = "aa_" .. seed}
        add_all(db, files)
        nseries = nseries + nrows
    end
    local res = check_json(db)
    lu.assertEquals(res.series, nseries)
    print(string.format("A/A: %d false changes in %d series of 14 runs (30 seeded sets)", #res.changes, nseries))
    lu.assertTrue(#res.changes <= 1, cjson.encode(res.changes))
end

-- The same 10% step at run 9, but on another machine from run 9: "machine changed", never a
-- regression, and --fail-on-regression does not fail.
function TestHistory:test_machine_change_is_not_a_regression()
    local db = scratch.path(".db")
    local files, nrows = series{seed = 11, at = 9, machine_at = 9}
    add_all(db, files)
    local res = check_json(db)
    lu.assertEquals(#res.changes, nrows, cjson.encode(res.changes))
    for _, c in ipairs(res.changes) do
        lu.assertEquals({c.kind, c.index}, {"machine changed", 9})
        lu.assertStrContains(c.to, "Another CPU 9000")
    end
    local text = hist(db, "check")
    lu.assertStrContains(text, "machine changed at run 9 of 14")
    lu.assertStrContains(text, "not a regression")
    lu.assertNotStrContains(text, ": regression")
    lu.assertEquals(select(2, hist(db, "check --fail-on-regression 1")), 0)
end

-- A 2.4x step at run 9 that came with a forced WB_GEMM_BLOCKING (the runs before it recorded
-- none; runs 1-2 are older files that recorded no environment at all): check names the variable
-- beside the regression (text and --json), show marks the run where it changed, list the run.
function TestHistory:test_an_environment_change_is_named()
    -- (the runs before run 9 are this process's: a WB_GEMM_BLOCKING exported to the suite is theirs)
    lu.skipIf(os.getenv("WB_GEMM_BLOCKING"), "WB_GEMM_BLOCKING is set for the whole suite: no run records it unset")
    local db = scratch.path(".db")
    local files, nrows = series{seed = 13, at = 9, step = 2.4, env_at = 9, env = "WB_GEMM_BLOCKING=40,24,64",
        unrecorded_before = 3}
    add_all(db, files)
    local res = check_json(db)
    lu.assertEquals(#res.changes, nrows, cjson.encode(res.changes))
    for _, c in ipairs(res.changes) do
        lu.assertEquals({c.kind, c.index, c.commit}, {"regression", 9, "c09"})
        lu.assertEquals(c.environment, {{name = "WB_GEMM_BLOCKING", after = "40,24,64"}})
    end
    local text = hist(db, "check")
    local _, named = text:gsub("regression at run 9 of 14 [^\n]*\n  environment changed at that run: " ..
        "WB_GEMM_BLOCKING: unset %-> 40,24,64\n", "")
    lu.assertEquals(named, nrows, text)
    -- show: one mark per series, under run 9 (runs 1-2 recorded nothing: no mark at run 3)
    local show = hist(db, "show history_base")
    local _, marks = show:gsub("\n    environment changed: WB_GEMM_BLOCKING: unset %-> 40,24,64\n", "")
    lu.assertEquals(marks, nrows, show)
    lu.assertStrMatches(show, ".*2026%-01%-09T12:00:00Z c09 [^\n]*\n    environment changed: WB_GEMM_BLOCKING.*")
    lu.assertEquals(select(2, show:gsub("environment changed", "")), nrows)
    -- list: run 9 against run 8, newest first; --json gives each run's variables (none for runs 1-2)
    local list = hist(db, "list")
    lu.assertStrMatches(list, ".*\n +9  2026%-01%-09T12:00:00Z [^\n]*\n +environment changed since run 8: " ..
        "WB_GEMM_BLOCKING: unset %-> 40,24,64\n.*")
    lu.assertEquals(select(2, list:gsub("environment changed", "")), 1, list)
    local runs = cjson.decode((hist(db, "list --json")))
    lu.assertEquals(runs[6].id, 9)
    lu.assertEquals(runs[6].environment.WB_GEMM_BLOCKING, "40,24,64")
    lu.assertNil(runs[7].environment.WB_GEMM_BLOCKING)
    lu.assertNil(runs[14].environment)
end

-- A 10% improvement: reported as one, and never a failure for CI.
function TestHistory:test_improvement()
    local db = scratch.path(".db")
    add_all(db, (series{seed = 5, at = 9, step = 0.9}))
    local res = check_json(db)
    lu.assertTrue(#res.changes > 0)
    for _, c in ipairs(res.changes) do lu.assertEquals({c.kind, c.index}, {"improvement", 9}) end
    lu.assertEquals(select(2, hist(db, "check --fail-on-regression 1")), 0)
end

-- list, show, idempotent add, gc.
function TestHistory:test_list_show_gc()
    local db = scratch.path(".db")
    local files, nrows = series{seed = 3}
    hist(db, "add " .. table.concat(files, " "))
    local again = hist(db, "add " .. files[1])
    lu.assertStrContains(again, "already recorded (run 1)")
    local runs = cjson.decode((hist(db, "list --json")))
    lu.assertEquals(#runs, 14)
    lu.assertEquals(runs[1].date, "2026-01-14T12:00:00Z") -- newest first
    lu.assertEquals(runs[1].rows, nrows)
    local show = hist(db, "show history_base 'op=add size=16'")
    lu.assertStrContains(show, "history_base [")
    lu.assertStrContains(show, "op=add size=16")
    local _, lines = show:gsub("\n  2026%-01%-%d%dT12:00:00Z c%d%d +[%d.e-]+ ms +[%d.e-]+ %.%. [%d.e-]+ +[%d.]+%%", "")
    lu.assertEquals(lines, 14, show)
    local out, code = hist(db, "gc --keep 5")
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "9 runs removed")
    lu.assertEquals(#cjson.decode((hist(db, "list --json"))), 5)
    lu.assertEquals(select(2, hist(db, "show no_such_experiment")), 2)
end

-- A row measured in rounds is stored with the run's own figures: the median of its rounds' medians
-- (a round of 8 samples at 1 ms and two of 2 at 2 ms: 2 ms, as the sweep's table says), not the
-- pooled samples' (1 ms, the round that took the most); a newcomer found `show` differing from the
-- run's JSON.
function TestHistory:test_rounds_weigh_alike_as_in_the_run()
    local db = scratch.path(".db")
    local files = series{seed = 5, runs = 1}
    local doc = cjson.decode(read(files[1]))
    for _, r in ipairs(doc.rows) do
        r.samples_ms = {1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2}
        r.samples_ms_per_round = {8, 2, 2}
        r.median_ms = 2
    end
    write(files[1], cjson.encode(doc))
    local out, code = hist(db, "add " .. files[1])
    lu.assertEquals(code, 0, out)
    local h = history.open{path = db}
    local list = h:series{experiment = "history_base"}
    h:close()
    local seen = 0
    for _, s in ipairs(list) do
        for _, p in ipairs(s.points) do
            lu.assertEquals(p.median, 2)
            lu.assertTrue(p.lo <= 2 and p.hi >= 2)
            seen = seen + 1
        end
    end
    lu.assertTrue(seen > 0)
end

-- 8 processes adding at once (3 files each) into a new database: every run there, integrity ok.
function TestHistory:test_concurrent_writers()
    local db = scratch.path(".db")
    local files = series{seed = 21, runs = 24}
    local cmds = {}
    for p = 0, 7 do
        cmds[#cmds + 1] = string.format("%s history --db %s add %s %s %s >/dev/null 2>%s.err%d &", EXE, db,
            files[3 * p + 1], files[3 * p + 2], files[3 * p + 3], db, p)
    end
    local out, code = run(table.concat(cmds, " ") .. " wait")
    lu.assertEquals(code, 0, out)
    for p = 0, 7 do lu.assertEquals(read(db .. ".err" .. p), "", "writer " .. p) end
    lu.assertEquals(#cjson.decode((hist(db, "list --json"))), 24)
    local conn = wb._sqlite_open(db, true)
    lu.assertEquals(conn:query("PRAGMA integrity_check")[1].integrity_check, "ok")
    lu.assertEquals(conn:query("SELECT count(*) AS n FROM results")[1].n, 24 * 4)
    conn:close()
end

-- kill -9 in the middle of an insert: the database is as before that run, and consistent.
function TestHistory:test_killed_writer_leaves_the_database_consistent()
    local db = scratch.path(".db")
    local files = series{seed = 4, runs = 2}
    hist(db, "add " .. files[1])
    local marker = scratch.path(".stalled")
    local pid = run(string.format("WB_HISTORY_TEST_STALL=%s %s history --db %s add %s >/dev/null 2>&1 & echo $!",
        marker, EXE, db, files[2])):match("%d+")
    local stalled = false
    for _ = 1, 200 do
        if read(marker) then stalled = true break end
        os.execute("sleep 0.05")
    end
    lu.assertTrue(stalled, "the writer never reached its insert")
    os.execute("kill -9 " .. pid)
    os.execute(string.format("while kill -0 %s 2>/dev/null; do sleep 0.05; done", pid))
    local conn = wb._sqlite_open(db, true)
    lu.assertEquals(conn:query("PRAGMA integrity_check")[1].integrity_check, "ok")
    lu.assertEquals(conn:query("SELECT count(*) AS n FROM runs")[1].n, 1)
    lu.assertEquals(conn:query("SELECT count(*) AS n FROM results")[1].n, 4)
    conn:close()
    local out, code = hist(db, "add " .. files[2])
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "run 2 (4 rows)")
end

-- A file that is not a results file is named and skipped; the rest are imported (exit 2).
function TestHistory:test_not_a_results_file_is_skipped()
    local db = scratch.path(".db")
    local files = series{seed = 2, runs = 2}
    local trace = write(scratch.path(".json"), '{"traceEvents": []}')
    local text = write(scratch.path(".json"), "hello")
    local out, code = hist(db, string.format("add %s %s %s %s", files[1], trace, text, files[2]))
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, "skipped: " .. trace .. " is not a workbench results file")
    lu.assertStrContains(out, "skipped: " .. text .. " is not valid JSON")
    lu.assertStrContains(out, "2 runs added")
    lu.assertEquals(#cjson.decode((hist(db, "list --json"))), 2)
end

-- A database from a newer workbench: refused with both versions, nothing changed.
function TestHistory:test_newer_schema_is_refused()
    local db = scratch.path(".db")
    local files = series{seed = 2, runs = 2}
    hist(db, "add " .. files[1])
    local conn = wb._sqlite_open(db)
    assert(conn:exec("PRAGMA user_version = 99"))
    conn:close()
    local before = read(db)
    for _, args in ipairs({"list", "add " .. files[2], "check"}) do
        local out, code = hist(db, args)
        lu.assertEquals(code, 2, out)
        lu.assertStrContains(out, "has schema version 99, newer than this workbench's " .. history.SCHEMA)
    end
    lu.assertTrue(read(db) == before)
end

-- A database at schema version 1 is migrated to the current one, its runs kept.
function TestHistory:test_migration_from_version_1()
    local db = scratch.path(".db")
    local files = series{seed = 2, runs = 2}
    local h = history.open{path = db, write = true, upto = 1}
    lu.assertEquals(h.version, 1)
    h:add(files[1])
    h:close()
    local out, code = hist(db, "add " .. files[2])
    lu.assertEquals(code, 0, out)
    local conn = wb._sqlite_open(db, true)
    lu.assertEquals(conn:query("PRAGMA user_version")[1].user_version, history.SCHEMA)
    lu.assertEquals(#conn:query("SELECT name FROM sqlite_master WHERE name = 'results_by_row'"), 1)
    lu.assertEquals(conn:query("SELECT count(*) AS n FROM runs")[1].n, 2)
    conn:close()
end

-- Another process holds the write lock: a clear message after the busy timeout, exit 2, the
-- results file untouched; once the lock is gone the same add works.
function TestHistory:test_locked_database()
    local db = scratch.path(".db")
    local files = series{seed = 2, runs = 2}
    hist(db, "add " .. files[1])
    local conn = wb._sqlite_open(db)
    assert(conn:exec("BEGIN EXCLUSIVE"))
    local before = read(files[2])
    local out, code = run(string.format("WB_HISTORY_BUSY_MS=200 %s history --db %s add %s", EXE, db, files[2]))
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, db .. " is locked by another process")
    lu.assertStrContains(out, "try again later")
    lu.assertEquals(read(files[2]), before)
    assert(conn:exec("ROLLBACK"))
    conn:close()
    lu.assertEquals(select(2, hist(db, "add " .. files[2])), 0)
end

-- A database the user may not write: a clear message, exit 2. As root (who may write anything)
-- the command runs as nobody; elsewhere the file is made read-only.
function TestHistory:test_read_only_database()
    local db_dir = scratch.dir()
    local db = db_dir .. "/history.db"
    local files = series{seed = 2, runs = 2}
    hist(db, "add " .. files[1])
    local as = ""
    if run("id -u"):match("^0") then
        if select(2, run("command -v setpriv")) ~= 0 then lu.skip("root without setpriv: cannot drop the right to write") end
        as = "setpriv --reuid=65534 --regid=65534 --clear-groups "
        -- nobody must reach the files: the scratch folders are private to this user
        os.execute("chmod 755 " .. scratch.root() .. " && chmod 777 " .. db_dir .. " && chmod -R a+rX " ..
            files[2]:match("^(.*)/") .. " && chmod 644 " .. db)
    else
        os.execute("chmod 444 " .. db)
    end
    local before = read(db)
    local out, code = run(string.format("%s%s history --db %s add %s", as, EXE, db, files[2]))
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, db .. " is read-only")
    lu.assertEquals(read(db), before)
    os.execute("chmod 644 " .. db)
end

-- A corrupt database: SQLite's integrity check names the damage; the file is left as it was.
-- A file that is no database at all is named as such.
function TestHistory:test_corrupt_database()
    local db = scratch.path(".db")
    local files = series{seed = 2, runs = 2}
    hist(db, "add " .. files[1])
    local bytes = read(db)
    lu.assertTrue(#bytes >= 4 * 4096)
    -- the b-tree page header of page 3 overwritten
    local damaged = bytes:sub(1, 2 * 4096) .. string.rep("\255", 64) .. bytes:sub(2 * 4096 + 65)
    write(db, damaged)
    for _, args in ipairs({"add " .. files[2], "check"}) do
        local out, code = hist(db, args)
        lu.assertEquals(code, 2, out)
        lu.assertStrContains(out, db .. " is corrupt: PRAGMA integrity_check says: ")
        lu.assertStrContains(out, "nothing was changed")
        lu.assertTrue(read(db) == damaged)
    end
    -- someone else's SQLite database: named, not changed
    local other = scratch.path(".db")
    local conn = wb._sqlite_open(other)
    assert(conn:exec("CREATE TABLE mine(x); INSERT INTO mine VALUES (1)"))
    conn:close()
    local theirs = read(other)
    local msg, status = hist(other, "add " .. files[2])
    lu.assertEquals(status, 2, msg)
    lu.assertStrContains(msg, other .. " is a SQLite database but not a workbench history (it has 1 table and no schema version)")
    lu.assertEquals(read(other), theirs)
    local junk = write(scratch.path(".db"), string.rep("not a database\n", 400))
    local out, code = hist(junk, "add " .. files[2])
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(out, junk .. " is not a SQLite database")
    lu.assertEquals(read(junk), string.rep("not a database\n", 400))
end

-- Where the database is: --db, else $WB_HISTORY_DB, else $XDG_DATA_HOME/workbench/history.db,
-- XDG_DATA_HOME defaulting to ~/.local/share (HOME here a scratch folder, never the user's).
function TestHistory:test_default_database_path()
    local files = series{seed = 2, runs = 1}
    local data, home = scratch.dir(), scratch.dir()
    local out, code = run(string.format("env -u WB_HISTORY_DB XDG_DATA_HOME=%s %s history add %s", data, EXE, files[1]))
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "added to " .. data .. "/workbench/history.db")
    lu.assertNotNil(read(data .. "/workbench/history.db"))
    out, code = run(string.format("env -u WB_HISTORY_DB -u XDG_DATA_HOME HOME=%s %s history add %s", home, EXE, files[1]))
    lu.assertEquals(code, 0, out)
    lu.assertNotNil(read(home .. "/.local/share/workbench/history.db"))
    local other = scratch.path(".db")
    out = run(string.format("WB_HISTORY_DB=%s XDG_DATA_HOME=%s %s history add %s", other, data, EXE, files[1]))
    lu.assertStrContains(out, "1 run added to " .. other)
end

-- Bad arguments: one line each, exit 2.
function TestHistory:test_bad_arguments()
    local db = scratch.path(".db")
    for args, want in pairs({["frobnicate"] = "unknown command 'frobnicate'", [""] = "which command?",
        ["add"] = "add: which results files?", ["show"] = "show: which experiment?",
        ["report"] = "report: where?", ["gc"] = "gc: how many runs", ["gc --keep 0"] = "--keep: expected a whole number",
        ["check --fail-on-regression x"] = "--fail-on-regression takes a percentage", ["list --keep 3"] =
            "list does not take --keep", ["check --bogus"] = "unknown option --bogus", ["list"] = "no history database at"}) do
        local out, code = hist(db, args)
        lu.assertEquals(code, 2, args .. ": " .. out)
        lu.assertStrContains(out, want)
        lu.assertEquals(select(2, out:gsub("\n", "")), 1, out)
    end
    local out, code = run(EXE .. " history --db")
    lu.assertEquals(code, 2)
    lu.assertStrContains(out, "--db needs a value")
end

-- Recording as runs end: --history on a wb.sweep script, WB_HISTORY=1, workbench merge --history;
-- a shard is left to the merge; under --sandbox the run is not recorded and says why.
function TestHistory:test_recording_runs()
    local dir = scratch.dir()
    local script = write(dir .. "/tiny.lua", [[
local s = wb.sweep{name = "tiny", axes = {{"n", {1, 2}}}, measure = function(p) return {p.n, p.n * 1.1, p.n * 0.9} end}
s:run()
s:save{dir = arg[1]}
]])
    local db = dir .. "/h.db"
    local env = "WB_HISTORY_DB=" .. db .. " "
    local out, code = run(env .. EXE .. " " .. script .. " " .. dir .. "/a")
    lu.assertEquals(code, 0, out)
    lu.assertNil(read(db)) -- not asked: nothing recorded
    out = run(env .. EXE .. " " .. script .. " " .. dir .. "/b --history")
    lu.assertStrContains(out, "history: recorded as run 1 in " .. db)
    out = run(env .. "WB_HISTORY=1 " .. EXE .. " " .. script .. " " .. dir .. "/c")
    lu.assertStrContains(out, "history: recorded as run 2")
    out = run(env .. EXE .. " --sandbox-weak --out " .. dir .. "/d " .. script .. " " .. dir .. "/d --history")
    lu.assertStrContains(out, "history: not recorded: the history database is not available under --sandbox")
    -- shards: left to the merge, which records the whole run
    local shard_script = write(dir .. "/shard.lua", [[
local s = wb.sweep{name = "tiny", axes = {{"n", {1, 2}}}, shard = arg[2],
    measure = function(p) return {p.n, p.n * 1.2, p.n * 0.8} end}
s:run()
s:save{dir = arg[1]}
]])
    for i = 1, 2 do
        out = run(env .. EXE .. " " .. shard_script .. " " .. dir .. "/shards " .. i .. "/2 --history")
        lu.assertStrContains(out, "a shard is recorded when `workbench merge --history` joins the shards")
    end
    out, code = run(env .. EXE .. " merge --history " .. dir .. "/merged " .. dir .. "/shards")
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "history: recorded as run 3")
    local runs = cjson.decode((hist(db, "list --json")))
    lu.assertEquals(#runs, 3)
    -- an experiment with its own argument parser (wb.sweep.add_options) takes --history too
    local SRC = scratch.source()
    out, code = run(env .. EXE .. " " .. SRC .. "/experiments/mlp_sweep.lua --tokens 1 --modes eager --dim 16 " ..
        "--hidden 32 --rounds 1 --iters 2 --trace-tokens 1 --no-peer --history --out " .. dir .. "/mlp")
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "history: recorded as run 4")
end

scratch.exit(lu.LuaUnit.run())
