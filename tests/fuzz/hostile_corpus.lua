-- hostile_corpus.lua: the red team's corpus, written on demand: small versions of each hostile
-- trace shape found against the trace reader, explain and diff (a "\u" cut by the end of the file,
-- numbers past int64, a line of 96 MiB inside a small .gz, members that grow after the events,
-- padding, deep nesting, NUL bytes, a 100,000-deep chain, 80,000 distinct op names, 100,000
-- steps, names carrying terminal escapes, a FIFO and /dev/zero as the path), and the SQL that
-- plants what someone else could put into a history database (a trigger, a view, a table, a
-- schema version, values no workbench writes). Each entry says what each command must answer.
--
--   local corpus = require("fuzz.hostile_corpus")   (tests/ on LUA_PATH)
--   corpus.TRACES, corpus.write(entry, dir) -> path, corpus.seeds() -> {name = text} (the small
--   ones, for tests/fuzz/fuzz_traces.lua), corpus.PLANTS, corpus.plant(db, sql)
--
-- As a script it writes the whole corpus into a folder (the traces, and a history database with
-- one planted copy per plant) and prints each file's name, path and what the workbench must
-- answer, so the files can be fed to another build or tool by hand:
--   workbench tests/fuzz/hostile_corpus.lua DIR
local M = {}

local HEAD = '{"otherData": {"producer": "workbench"}, "traceEvents": [\n'
local OP = '{"ph": "X", "cat": "op", "name": "add", "pid": 0, "tid": 0, "ts": 1, "dur": 1, "args": {"id": 1}}'
M.HEAD, M.OP = HEAD, OP

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local BAD_EVENT = "not an event the workbench writes"
local function event(ev) return HEAD .. ev .. "\n]}" end
local FORTY = string.rep("9", 40)
local EVIL = "\27]0;owned\7\27[2J\194\155\226\128\174gnp.exe"
M.EVIL = EVIL

-- EVIL as a JSON string's text: controls as \u escapes, the rest raw UTF-8
local JSON_EVIL = EVIL:gsub("%c", function(c) return string.format("\\u%04x", c:byte()) end)

-- an op and the kernel it launched (the cpu device's lane, pid 1), as the workbench writes them
local function op_kernel(name, ts, id)
    return string.format('{"ph": "X", "cat": "op", "name": "%s", "pid": 0, "tid": 0, "ts": %d, "dur": 4, ' ..
        '"args": {"id": %d, "correlation": %d}},\n{"ph": "X", "cat": "kernel", "name": "wb_add_generic", "pid": 1, ' ..
        '"tid": 0, "ts": %d, "dur": 1, "args": {"id": %d, "correlation": %d, "op": "add"}}', name, ts, id, id, ts + 2,
        id + 1000000000, id)
end

-- n events made by f(i) (a string), one per line, as a trace
local function events(n, f)
    local t = {}
    for i = 1, n do t[i] = f(i) end
    return HEAD .. table.concat(t, ",\n") .. "\n]}\n"
end

-- Each trace: name, text (made here) or shell (a pipeline printing it: the big ones are made
-- compressed, never held in memory) or path (one that exists) or special ("fifo", "folder");
-- suffix; and per command {status, what the one line says} (status 0: read; says: nil).
-- `both` stands for the same answer from explain and diff (diff of a good trace against it, or of
-- a copy of the trace, a newline longer, where diff_self: a trace that reads).
M.TRACES = {
    {name = "cut_u", what = 'a \\u escape cut by the end of the file',
        text = HEAD .. '{"ph": "X", "cat": "op", "name": "a\\u', both = {2, "truncated"}},
    {name = "u_two_digits", what = "a \\u escape with two hex digits",
        text = event('{"ph": "X", "cat": "op", "name": "a\\u12"}'), both = {2, BAD_EVENT}},
    {name = "bad_escape", what = "an escape JSON does not have",
        text = event('{"ph": "X", "cat": "op", "name": "a\\q"}'), both = {2, BAD_EVENT}},
    {name = "raw_newline", what = "a raw newline inside a string",
        text = event('{"ph": "X", "cat": "op", "name": "a\nb"}'), both = {2, "is not JSON"}},
    {name = "ts_40_digits", what = "a 40-digit ts",
        text = event('{"ph": "X", "cat": "op", "name": "a", "ts": ' .. FORTY .. ', "dur": 1}'), both = {2, BAD_EVENT}},
    {name = "dur_huge", what = "a dur of 9e300",
        text = event('{"ph": "X", "cat": "op", "name": "a", "ts": 1, "dur": 9e300}'), both = {2, BAD_EVENT}},
    {name = "dur_negative", what = "a negative dur",
        text = event('{"ph": "X", "cat": "op", "name": "a", "ts": 1, "dur": -5}'), both = {2, BAD_EVENT}},
    {name = "id_past_int64", what = "an id past int64",
        text = event('{"ph": "X", "cat": "op", "name": "a", "ts": 1, "dur": 1, "args": {"id": 1e30}}'),
        both = {2, BAD_EVENT}},
    {name = "tid_past_int64", what = "a tid past int64",
        text = event('{"ph": "X", "cat": "op", "name": "a", "pid": 1, "tid": -1e300, "ts": 1, "dur": 1}'),
        both = {2, BAD_EVENT}},
    {name = "flops_negative", what = "a negative flops count (found by the trace fuzzer: the table did arithmetic on it)",
        text = event('{"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 0, "ts": 1, "dur": 1, "args": ' ..
            '{"flops": -1, "bytes": 8}}'), both = {2, BAD_EVENT}},
    {name = "bytes_negative", what = "a kernel moving negative bytes (only a memory event's bytes are signed)",
        text = event('{"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 0, "ts": 1, "dur": 1, "args": ' ..
            '{"flops": 8, "bytes": -8}}'), both = {2, BAD_EVENT}},
    {name = "inf_number", what = "inf as a number",
        text = event('{"ph": "X", "cat": "op", "name": "a", "ts": 1, "dur": 1, "args": {"flops": inf}}'),
        both = {2, BAD_EVENT}},
    {name = "nested_100_lists", what = "100 nested lists inside an event",
        text = event('{"ph": "X", "cat": "op", "name": "a", "args": {"x": ' .. string.rep("[", 100) ..
            string.rep("]", 100) .. '}}'), both = {2, "nests deeper than 64 levels"}},
    {name = "nul_byte", what = "a NUL byte between two events",
        text = HEAD .. OP .. '\0,\n' .. OP .. '\n]}', both = {2, "a NUL byte"}},
    {name = "two_documents", what = "a second document after the first",
        text = HEAD .. OP .. '\n]}\n{}', both = {2, "more follows the document"}},
    -- one line of 96 MiB inside a .gz of a few hundred KiB: the event limit (1 MiB) ends it
    {name = "line_96mib", what = "a 96 MiB line in a .gz", suffix = ".json.gz",
        shell = string.format("{ printf '%%s' %s; head -c 100663296 /dev/zero | tr '\\0' a; printf '\"}]}'; } " ..
            "| gzip -1", sh_quote(HEAD .. '{"ph": "X", "cat": "op", "name": "')),
        both = {2, "an event is longer than the reader takes"}},
    -- 80 MiB of members after the event list (the members' limit is 64 MiB)
    {name = "tail_80mib", what = "80 MiB of members after the events", suffix = ".json.gz",
        shell = string.format("{ printf '%%s' %s; head -c 83886080 /dev/zero | tr '\\0' b; printf '\"}'; } " ..
            "| gzip -1", sh_quote(HEAD .. OP .. '\n], "junk": "')), both = {2, "longer than the reader takes"}},
    -- 300 MiB of spaces after an event: 256 MiB without an event end the read
    {name = "padding_300mib", what = "300 MiB of padding", suffix = ".json.gz",
        shell = string.format("{ printf '%%s' %s; head -c 314572800 /dev/zero | tr '\\0' ' '; printf ']}'; } " ..
            "| gzip -1", sh_quote(HEAD .. OP)), both = {2, "256 MiB read without an event"}},
    -- ranges each inside the one before, 100,000 deep: diff refuses the model past 256 levels,
    -- explain answers (a finding or a refusal), both in seconds
    {name = "chain_100000", what = "ranges nested 100,000 deep",
        text_fn = function()
            local n = 100000
            return events(n, function(i)
                return string.format('{"ph": "X", "cat": "range", "name": "r%d", "pid": 0, "tid": 0, "ts": %d, ' ..
                    '"dur": %d}', (i - 1) % 7, 999 + i, 2 * (n - i + 1) + 10)
            end)
        end,
        explain = {"0 or 2"}, diff = {2, "ranges and ops nest more than 256 deep"}},
    -- 80,000 distinct op names, each with its kernel (kinds interned in a list took 20.8 s to
    -- read): explain reads them; diff against another program reads both and finds nothing in
    -- common (a diff of two such traces judges 80,000 nodes: linear, ~0.4 ms each, not a test)
    {name = "ops_80000", what = "80,000 distinct op names",
        text_fn = function()
            return events(80000, function(i) return op_kernel("op" .. i, 10 * i, i) end)
        end, explain = {0}, diff = {2, "nothing aligns"}},
    -- 100,000 steps of one op each (one finding per step took minutes at 700,000)
    {name = "steps_100000", what = "100,000 steps",
        text_fn = function()
            return events(100000, function(i)
                return string.format('{"ph": "X", "cat": "step", "name": "ProfilerStep#%d", "pid": 0, "tid": 0, ' ..
                    '"ts": %d, "dur": 8, "args": {"id": %d}},\n', i - 1, 10 * i, 2 * i) ..
                    op_kernel("add", 10 * i + 2, 2 * i + 1)
            end)
        end, both = {0}, diff_self = true},
    -- names that would set the terminal's title, clear the screen, reverse the text: read (status
    -- 0), printed escaped (no raw ESC, BEL, C1 or bidi override in the output)
    {name = "escape_names", what = "op and range names holding terminal escapes",
        text = events(1, function()
            return string.format('{"ph": "X", "cat": "range", "name": "%s", "pid": 0, "tid": 0, "ts": 1, ' ..
                '"dur": 20, "args": {"id": 1}},\n', JSON_EVIL) .. op_kernel(JSON_EVIL, 2, 2)
        end), both = {0}, clean = true, diff_self = true},
    {name = "dev_zero", what = "/dev/zero as the path", path = "/dev/zero", both = {2, "is not a regular file"}},
    {name = "fifo", what = "a FIFO nobody writes", special = "fifo", both = {2, "is not a regular file"}},
    {name = "folder", what = "a folder", special = "folder", explain = {2, "folder"}, diff = {2, "folder"}},
}

-- what `cmd` ("explain" or "diff") must answer for entry e: {status or "0 or 2", says}
function M.expect(e, cmd) return e[cmd] or e.both end

-- Writes entry e into dir (made by the caller); returns its path. Shell and special entries need
-- a shell (not under --sandbox).
local serial = 0
function M.write(e, dir)
    if e.path then return e.path end
    serial = serial + 1
    local path = string.format("%s/%02d_%s%s", dir, serial, e.name, e.suffix or ".json")
    if e.special == "folder" then
        path = path:gsub("%.json$", "")
        assert(os.execute("mkdir -p " .. sh_quote(path)), "mkdir " .. path)
    elseif e.special == "fifo" then
        assert(os.execute("mkfifo " .. sh_quote(path)), "mkfifo " .. path)
    elseif e.shell then
        assert(os.execute("(" .. e.shell .. ") > " .. sh_quote(path)), e.name)
    else
        local f = assert(io.open(path, "wb"))
        f:write(e.text or e.text_fn())
        f:close()
    end
    return path
end

-- The small text entries, {name = text}: what the trace fuzzer starts its mutations from.
function M.seeds()
    local t = {}
    for _, e in ipairs(M.TRACES) do
        if e.text and #e.text < 65536 then t[e.name] = e.text end
    end
    return t
end

-- What someone else could plant in a history database: the SQL, what the workbench says, and the
-- history commands that must refuse it (a planted object stops every command, add included; a
-- stored value no workbench writes stops those that read it).
M.PLANTS = {
    trigger = {sql = "CREATE TRIGGER keep_medians AFTER INSERT ON results BEGIN UPDATE results SET median = 1; END",
        says = "holds objects the workbench did not create (trigger keep_medians on results)",
        commands = {"check", "list", "add"}},
    view = {sql = "CREATE VIEW recent AS SELECT * FROM runs", says = "view recent", commands = {"check", "list", "add"}},
    table = {sql = "CREATE TABLE notes(x)", says = "table notes", commands = {"check", "list", "add"}},
    version = {sql = "PRAGMA user_version = -5", says = "schema version -5, which no workbench writes",
        commands = {"check", "list", "add"}},
    inf_median = {sql = "UPDATE results SET median = 9e999 WHERE run = 2 AND rowid = (SELECT min(rowid) FROM " ..
        "results WHERE run = 2)", says = "the median is inf: the database was changed by something other than the workbench",
        commands = {"check", "show corpus"}},
    nul_commit = {sql = "UPDATE runs SET commit_id = 'c' || char(0) || 'x' WHERE id = 3",
        says = "commit_id is text with a NUL byte", commands = {"check", "list"}},
}

function M.plant(db, sql)
    local conn = wb._sqlite_open(db)
    assert(conn:exec(sql))
    conn:close()
end

-- Writes a history database of 4 runs (results files saved here, added by `exe history add`), and
-- one copy of it per plant with that plant in it, into dir: {clean = path, [plant name] = path}.
function M.databases(dir, exe)
    local files = {}
    for k = 1, 4 do
        local r = wb.results("corpus", {quiet = true})
        for _, n in ipairs({16, 64}) do
            local s = {}
            for j = 1, 10 do s[j] = n * (1 + 0.01 * j) * (1 + 0.02 * k) end
            r:add{size = n, samples_ms = s, median_ms = s[5]}
        end
        files[k] = r:save{dir = string.format("%s/run%d", dir, k), quiet = true}.json
    end
    local dbs = {clean = dir .. "/clean.db"}
    local add = string.format("%s history --db %s add %s 2>&1", exe, sh_quote(dbs.clean), table.concat(files, " "))
    local p = assert(io.popen(add))
    local out = p:read("a")
    assert(p:close(), add .. ": " .. out)
    local names = {}
    for name in pairs(M.PLANTS) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
        dbs[name] = string.format("%s/%s.db", dir, name)
        assert(os.execute(string.format("cp %s %s", sh_quote(dbs.clean), sh_quote(dbs[name]))))
        M.plant(dbs[name], M.PLANTS[name].sql)
    end
    return dbs
end

-- ---- as a script ----
if arg and arg[0] and arg[0]:match("hostile_corpus%.lua$") then
    local dir = arg[1]
    if not dir then
        io.stderr:write("usage: workbench tests/fuzz/hostile_corpus.lua DIR (writes the hostile traces there)\n")
        os.exit(2)
    end
    assert(os.execute("mkdir -p " .. sh_quote(dir)))
    for _, e in ipairs(M.TRACES) do
        local path = M.write(e, dir)
        local x, d = M.expect(e, "explain"), M.expect(e, "diff")
        print(string.format("%-16s %s\n    explain: %s%s; diff%s: %s%s", e.name, path, x[1],
            x[2] and (", " .. x[2]) or "", e.diff_self and " (against a copy)" or "", d[1], d[2] and (", " .. d[2]) or ""))
    end
    local dbs = M.databases(dir, arg[-1] or "workbench")
    print(string.format("%-16s %s\n    a history database of 4 runs, untouched", "clean", dbs.clean))
    for name, plant in pairs(M.PLANTS) do
        print(string.format("%-16s %s\n    history %s: 2, %s", name, dbs[name], table.concat(plant.commands, ", "),
            plant.says))
    end
end

return M
