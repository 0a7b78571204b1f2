-- test_api_docs.lua: docs/api.md's per-function reference is what scripts/gen_api_docs.lua writes
-- from help()'s text, docs/profiler.md's list of an event's fields what it writes from the event
-- schema, and the generator says clearly what is wrong with a page it cannot use.
local lu = require("luaunit")
local scratch = require("scratch")

local SOURCE = scratch.source()
local EXE = scratch.exe()
local GEN = SOURCE .. "/scripts/gen_api_docs.lua"

local read = scratch.read

local function gen(args)
    return scratch.run(string.format("'%s' '%s' %s", EXE, GEN, args))
end

TestApiDocs = {}

function TestApiDocs:test_page_is_current()
    local out, code = gen("--check")
    lu.assertEquals(code, 0, out .. "\ndocs/api.md is stale: run build/workbench scripts/gen_api_docs.lua")
    lu.assertStrContains(out, "is current")
end

-- Every entry of help() is in the page, word for word (wrapped), in a section of its own kind.
function TestApiDocs:test_page_holds_help_entries()
    local page = read(SOURCE .. "/docs/api.md"):gsub("\n    ", " ")
    lu.assertStrContains(page, "wb.linear(x, w[, b][, {activation=")
    lu.assertStrContains(page, "t:to{device=, dtype=} -> the values on another device")
    lu.assertStrContains(page, "### wb.profiler\n")
    lu.assertStrContains(page, "### Tensor methods")
end

function TestApiDocs:test_stale_page_found_and_rewritten()
    local page = read(SOURCE .. "/docs/api.md")
    -- an entry of the generated part changed, as when help.lua's text changes and the page does not
    local cut = assert(page:find("<!-- begin: generated", 1, true))
    local stale = page:sub(1, cut - 1) .. page:sub(cut):gsub("wb%.linear%(x, w", "wb.linear(OLD, w", 1)
    local path = scratch.file(stale, ".md")
    local out, code = gen("--check " .. path)
    lu.assertEquals(code, 1, out)
    lu.assertStrContains(out, "is stale")
    lu.assertEquals(read(path), stale) -- --check writes nothing
    out, code = gen(path)
    lu.assertEquals(code, 0, out)
    lu.assertEquals(read(path), page)
end

-- The field list: a row per schema field, and a stale row found and rewritten like the reference's.
function TestApiDocs:test_trace_fields_listed_and_kept_current()
    local page = read(SOURCE .. "/docs/profiler.md")
    lu.assertStrContains(page, "| `correlation` (args) | `correlation` | integer | op, kernel, memcpy, memset |")
    lu.assertStrContains(page, "| `ts` | `ts_ns` | time | all |")
    for _, f in ipairs(wb._trace_fields()) do
        lu.assertStrContains(page, (f.doc:gsub("|", "\\|")), false, "no row for " .. tostring(f.key or f.lua_key))
    end
    local stale = page:gsub("| `correlation` %(args%)", "| `corr` (args)", 1)
    local path = scratch.file(stale, ".md")
    local out, code = gen("--check " .. path)
    lu.assertEquals(code, 1, out)
    lu.assertStrContains(out, "is stale")
    out, code = gen(path)
    lu.assertEquals(code, 0, out)
    lu.assertEquals(read(path), page)
end

function TestApiDocs:test_bad_input_one_line()
    local cases = {
        {"--check " .. scratch.file("# a page without the markers\n", ".md"), "has no '<!%-%- begin: generated"},
        {"--check " .. scratch.path("-missing.md"), "cannot read .*missing%.md"},
        {"--frobnicate", "unknown option '%-%-frobnicate'"},
        {"a.md b.md", "one PATH at most"},
    }
    for _, c in ipairs(cases) do
        local out, code = gen(c[1])
        lu.assertEquals(code, 2, c[1] .. ": " .. out)
        lu.assertStrMatches(out, "gen_api_docs: [^\n]*" .. c[2] .. "[^\n]*\n")
    end
end

scratch.exit(lu.LuaUnit.run())
