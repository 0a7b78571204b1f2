-- test_trace_limits.lua: traces from someone else are untrusted input. Small versions of the
-- hostile shapes a red team built (an over-read at a cut "\u", numbers past int64, a line of
-- hundreds of MiB inside a small .gz, members that grow without end after the events, padding,
-- deep nesting, NUL bytes, a FIFO and /dev/zero as the path) are written here, then read by
-- `workbench explain` and `workbench diff` under a 4 GiB address-space limit (in the Release build)
-- and a timeout: each must end with status 2 and one line that names the problem, in seconds. And
-- the other side of the reader's one grammar: a trace rewritten by a JSON tool (keys sorted,
-- re-indented, gzipped) reads as the original.
local lu = require("luaunit")
local scratch = require("scratch")

local EXE = scratch.exe()
local HEAD = '{"otherData": {"producer": "workbench"}, "traceEvents": [\n'
local OP = '{"ph": "X", "cat": "op", "name": "add", "pid": 0, "tid": 0, "ts": 1, "dur": 1, "args": {"id": 1}}'

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- runs `workbench ARGS` under `ulimit -v` 4 GiB and a timeout: stderr, status, CPU seconds, stdout. The
-- sanitizer build runs without the ulimit (AddressSanitizer reserves terabytes of address space
-- for its shadow), its memory bounded by the reader's limits alone. Each answer must come within
-- SECONDS of CPU time (the command's user + system time, so that other work on the machine does
-- not count): 30 in the Release build, three times that under ASan+UBSan, whose checks slow this
-- code ~2-3x (a CI run beside a busy loop on a Zen 1 EPYC took 44.8 s of wall time for the
-- 100,000-step diff there; the Release build 7.2 s of CPU time, quiet); the timeout kills at twice
-- that, in wall time.
local LIMIT = wb.build.sanitizers and "" or "ulimit -v 4194304; "
local SECONDS = wb.build.sanitizers and 90 or 30
local function hostile(args)
    local err, times = scratch.path(".err"), scratch.path(".times")
    -- the subshell's `times` prints its own and then its children's user and system time
    local out, code = scratch.run(string.format("(%stimeout %d %s %s 2>%s; s=$?; times >%s; exit $s)", LIMIT,
        2 * SECONDS, EXE, args, err, times))
    local printed = scratch.read(times)
    local um, us, sm, ss = printed:match("\n(%d+)m([%d.]+)s (%d+)m([%d.]+)s")
    lu.assertNotNil(ss, "times printed no children's line: " .. printed)
    local secs = (tonumber(um) + tonumber(sm)) * 60 + tonumber(us) + tonumber(ss)
    return scratch.read(err), code, secs, out
end

-- a file made by a shell pipeline (the big ones are made compressed, never held here)
local function made(cmd, suffix)
    local path = scratch.path(suffix)
    local out, code = scratch.run(cmd .. " > " .. sh_quote(path))
    lu.assertEquals(code, 0, out)
    return path
end

-- a good trace to diff the hostile ones against (made once)
local good
local function good_trace()
    if not good then
        good = scratch.path(".json")
        wb.profiler.profile({activities = {"cpu", "device"}}, function(q)
            for _ = 1, 2 do local _ = wb.ones({4}) + 1; q:step() end
        end):export_chrome_trace(good)
    end
    return good
end

-- Every trace of the red team's corpus (tests/fuzz/hostile_corpus.lua), through explain and
-- through diff (a good trace against it): the status and the one line the corpus names for it,
-- no traceback, in seconds; names printed with no raw terminal control. One test per trace.
local corpus = require("fuzz.hostile_corpus")
local CLEAN = {["\27"] = "a raw ESC byte", ["\7"] = "a raw BEL byte", ["\194\155"] = "a raw C1 control",
    ["\226\128\174"] = "a raw right-to-left override"}
for _, e in ipairs(corpus.TRACES) do
    _G["test_corpus_" .. e.name] = function()
        local path = corpus.write(e, scratch.dir())
        -- a copy one byte longer (diff refuses the same bytes given twice)
        local twin = e.diff_self and corpus.write(e, scratch.dir())
        if twin then
            local f = assert(io.open(twin, "ab"))
            f:write("\n")
            f:close()
        end
        for _, cmd in ipairs({"explain", "diff"}) do
            local code_is, says = table.unpack(corpus.expect(e, cmd))
            local what = string.format("%s (%s, %s)", e.what, e.name, cmd)
            local args = cmd == "explain" and sh_quote(path) or
                (sh_quote(twin or good_trace()) .. " " .. sh_quote(path))
            local err, code, secs, out = hostile(cmd .. " " .. args)
            if code_is == "0 or 2" then
                lu.assertTrue(code == 0 or code == 2, what .. ": status " .. tostring(code) .. ": " .. err)
            else
                lu.assertEquals(code, code_is, what .. ": " .. err)
            end
            if says then
                lu.assertStrContains(err, says, false, what)
                lu.assertEquals(select(2, err:gsub("\n", "")), 1, what .. ": one line: " .. err)
            end
            lu.assertNil(err:find("traceback", 1, true), what)
            lu.assertNil(err:find("internal error", 1, true), what)
            lu.assertTrue(secs < SECONDS, string.format("%s took %.1f s of CPU time (limit %d)", what, secs, SECONDS))
            if e.clean then
                for byte, name in pairs(CLEAN) do lu.assertNil((err .. out):find(byte, 1, true), what .. ": " .. name) end
                lu.assertStrContains(out, "gnp.exe", false, what .. ": the name is printed")
            end
        end
    end
end

-- The other side of one grammar: what a JSON tool does to a trace changes nothing it says.
function test_a_trace_rewritten_by_a_json_tool_reads_as_the_original()
    local x, w, b = wb.randn({8, 16}), wb.randn({12, 16}), wb.randn({12})
    local p = wb.profiler.profile({activities = {"cpu", "device"}, record_shapes = true, profile_memory = true},
        function(q)
            for _ = 1, 3 do
                wb.profiler.range("fwd", function() return wb.gelu(wb.linear(x, w, b)) * 2 end)
                q:step()
            end
        end)
    local orig = scratch.path(".json")
    p:export_chrome_trace(orig)
    local py = scratch.run("python3 -c 'import json'")
    local rewritten = {}
    if select(2, scratch.run("python3 -c 'import json'")) == 0 then
        rewritten.indented = made("python3 -m json.tool " .. sh_quote(orig), ".json")
        rewritten.sorted = made("python3 -m json.tool --sort-keys --indent 1 " .. sh_quote(orig), ".json")
        rewritten.compact = made("python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1])), sys.stdout, " ..
            "separators=(\",\", \":\"))' " .. sh_quote(orig), ".json")
    else
        print("\n  python3 is missing: only the gzip rewrite is checked (" .. tostring(py) .. ")")
    end
    rewritten.gzipped = made("gzip -c " .. sh_quote(orig), ".json.gz")
    local function rows(q)
        local t = {}
        for _, r in ipairs(q:key_averages()) do t[#t + 1] = {r.name, r.calls, r.kernels, r.cpu_total_ns} end
        return t
    end
    -- the original's rules, once
    local oout = scratch.run(EXE .. " explain --json " .. sh_quote(orig))
    local ogot = {}
    for _, f in ipairs(require("cjson").decode(oout:match("%[.*%]"))) do ogot[#ogot + 1] = f.rule end
    for how, path in pairs(rewritten) do
        local q = wb.profiler.load_trace(path)
        lu.assertEquals(rows(q), rows(p), how .. ": the same table")
        lu.assertEquals(q.trace_other.producer, "workbench", how)
        lu.assertNotNil(q.trace_members.workbench, how .. ": the members beside traceEvents are kept")
        -- explain names the same rules (memory events included: the allocation share is read too)
        local out, code = scratch.run(EXE .. " explain --json " .. sh_quote(path))
        lu.assertEquals(code, 0, how .. ": " .. out)
        local got = {}
        for _, f in ipairs(require("cjson").decode(out:match("%[.*%]"))) do got[#got + 1] = f.rule end
        lu.assertEquals(got, ogot, how .. ": explain names the same rules")
        -- and a diff against the original finds nothing
        out, code = scratch.run(EXE .. " diff " .. sh_quote(orig) .. " " .. sh_quote(path))
        lu.assertEquals(code, 0, how .. ": " .. out)
        lu.assertStrContains(out, "fingerprint differences: none", false, how)
        lu.assertStrContains(out, "structural changes: none", false, how)
        lu.assertNil(out:find("SLOWER", 1, true), how)
        lu.assertNil(out:find("FASTER", 1, true), how)
    end
    lu.assertTrue(#rows(p) > 3)
end

-- Names in a trace are the writer's: an escape sequence (set the terminal's title, clear the
-- screen), a C1 control or a bidi override in one reaches no terminal raw, in explain, diff or
-- p:table(); each is shown escaped.
function test_names_with_escape_sequences_are_printed_escaped()
    local evil = "\27]0;owned\7\27[2J\194\155\226\128\174gnp.exe"
    local x, w = wb.randn({4, 8}), wb.randn({6, 8})
    local function record()
        return wb.profiler.profile({activities = {"cpu", "device"}}, function(q)
            for _ = 1, 2 do
                wb.profiler.range(evil, function() return wb.linear(x, w) end)
                q:step()
            end
        end)
    end
    local p = record()
    local a, b = scratch.path(".json"), scratch.path(".json")
    p:export_chrome_trace(a)
    record():export_chrome_trace(b)
    local function clean(text, what)
        lu.assertNil(text:find("\27", 1, true), what .. ": a raw ESC byte")
        lu.assertNil(text:find("\7", 1, true), what .. ": a raw BEL byte")
        lu.assertNil(text:find("\194\155", 1, true), what .. ": a raw C1 control")
        lu.assertNil(text:find("\226\128\174", 1, true), what .. ": a raw right-to-left override")
    end
    local tbl = wb.profiler.load_trace(a):table()
    clean(tbl, "p:table()")
    lu.assertStrContains(tbl, "\\027]0;owned\\007\\027[2J\\u{009B}\\u{202E}gnp.exe")
    clean(p:table(), "p:table() of the recording")
    local out, code = scratch.run(EXE .. " explain " .. sh_quote(a))
    lu.assertEquals(code, 0, out)
    clean(out, "explain")
    out, code = scratch.run(EXE .. " diff " .. sh_quote(a) .. " " .. sh_quote(b))
    lu.assertEquals(code, 0, out)
    clean(out, "diff")
    lu.assertStrContains(out, "\\u{202E}gnp.exe")
end

scratch.exit(lu.LuaUnit.run())
