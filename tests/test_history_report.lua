-- test_history_report.lua: `workbench history report --html` loaded in a real browser (headless
-- Debian chromium, --dump-dom): every series' chart drawn by the page's own script, one point per
-- run, the change and the machine change marked, and nothing fetched (the page's CSP allows only
-- its own nonce'd script). Exits 77 (skipped) when chromium is not installed.
local lu = require("luaunit")
local scratch = require("scratch")
local series = require("history_series").series

local EXE = scratch.exe()

local run = scratch.run

local function read(path)
    local f = assert(io.open(path, "rb"))
    local t = f:read("a")
    f:close()
    return t
end

local CHROMIUM
for _, name in ipairs({"chromium", "chromium-browser"}) do
    local path, code = run("command -v " .. name)
    if code == 0 then CHROMIUM = path:match("[^\n]+") break end
end
if not CHROMIUM then
    print("skipped: no chromium (scripts/bootstrap.sh --test installs Debian's)")
    os.exit(77)
end

-- The page as the browser left it after its scripts ran.
local function dump_dom(page)
    local profile = scratch.dir()
    local out, code = run(string.format("timeout 120 %s --headless --no-sandbox --disable-gpu --disable-quic " ..
        "--no-first-run --disable-background-networking --disable-component-update --disable-sync " ..
        "--user-data-dir=%s --dump-dom file://%s 2>%s/stderr", CHROMIUM, profile, page, profile))
    lu.assertEquals(code, 0, out .. read(profile .. "/stderr"))
    return out
end

local function count(text, pattern)
    local _, n = text:gsub(pattern, "")
    return n
end

TestHistoryReport = {}

function TestHistoryReport:test_every_chart_rendered()
    local db = scratch.path(".db")
    local step, nrows = series{seed = 7, at = 9}
    local moved = series{seed = 11, at = 9, machine_at = 9, name = "moved"}
    local out, code = run(string.format("%s history --db %s add %s %s", EXE, db, table.concat(step, " "),
        table.concat(moved, " ")))
    lu.assertEquals(code, 0, out)
    local page = scratch.path(".html")
    out, code = run(string.format("%s history --db %s report --html %s", EXE, db, page))
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, string.format("(%d charts)", 2 * nrows))
    local html = read(page)
    -- nothing to fetch: a policy that allows no source but the page's own nonce'd script and
    -- style, and no URL in the page but the SVG namespace (a name, never fetched)
    lu.assertStrMatches(html, ".*<meta http%-equiv='Content%-Security%-Policy' content=\"default%-src 'none'; " ..
        "script%-src 'nonce%-%x+'; style%-src 'nonce%-%x+'\">.*")
    lu.assertEquals(count(html, "https?://"), count(html, "http://www%.w3%.org/2000/svg"))
    lu.assertEquals(count(html, " src="), 0)
    lu.assertEquals(count(html, "<svg"), 0) -- drawn by the page's script, not written by the server

    local dom = dump_dom(page)
    lu.assertEquals(count(dom, "<svg class=\"chart\""), 2 * nrows, dom:sub(1, 2000))
    lu.assertEquals(count(dom, "data%-drawn=\"yes\""), 2 * nrows)
    -- each chart: 14 runs with their intervals; the step series a red line before run 9, the
    -- moved series a machine line there and the runs from 9 on shaded
    for chart in dom:gmatch("<svg class=\"chart\".-</svg>") do
        lu.assertEquals(count(chart, "<circle class=\"run\""), 14)
        lu.assertEquals(count(chart, "<line class=\"interval\""), 14)
        local regression = count(chart, "<line class=\"change slower\"[^>]*data%-run=\"8\"")
        local machine = count(chart, "<line class=\"change machine\"[^>]*data%-run=\"8\"")
        lu.assertEquals(regression + machine, 1, chart)
        lu.assertEquals(count(chart, "<rect class=\"machine%-block\""), machine)
    end
    lu.assertEquals(count(dom, "<line class=\"change slower\""), nrows)
    lu.assertEquals(count(dom, "<line class=\"change machine\""), nrows)

    -- the policy is enforced: the same page with the script's nonce changed draws nothing
    local blocked = scratch.path(".html")
    local f = assert(io.open(blocked, "wb"))
    f:write((html:gsub("<script nonce='%x+'>", "<script nonce='0000'>")))
    f:close()
    lu.assertEquals(count(dump_dom(blocked), "<svg class=\"chart\""), 0)
end

scratch.exit(lu.LuaUnit.run())
