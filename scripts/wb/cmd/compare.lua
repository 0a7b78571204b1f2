-- wb.cmd.compare: `workbench compare A.json B.json`: two results files of one sweep, row by row
-- (wb.compare), as text or JSON; exit status 0, 1 with --fail-on-slower when a row is slower by
-- more, 2 for bad input. bindings/main.c requires wb.cmd.<subcommand> and calls its main.

local cjson = require("cjson")
local compare = require("wb.compare")
local words = require("wb.words")

local M = {}

-- an argument shown back: control characters escaped, as everything compare prints
local function clean(v) return type(v) == "string" and words.escaped(v) or v end

local USAGE = "usage: workbench compare [--json] [--verbose] [--fail-on-slower PCT] [--min-effect PCT] " ..
    "[--ignore COL] " ..
    "A.json B.json"
local HELP = [[
  compares two results files of the same sweep, row by row: SAME, FASTER, SLOWER or UNSURE
  --json                one JSON object on stdout instead of the text (errors too: {"error": "..."})
  --verbose, -v         every metric of each row, not only its time
  --fail-on-slower PCT  exit with status 1 when a row is SLOWER by more than PCT percent
  --min-effect PCT      the smallest change called FASTER or SLOWER (default 5)
  --ignore COL          leave COL out of the check that the runs are comparable (repeatable)
  --help, -h            this text]]

local LISTS = {rows = true, only_in_a = true, only_in_b = true, structural = true, fingerprint = true,
    aligned_on = true}

-- Entry point for `workbench compare ...`: returns the exit status.
function M.main(args)
    local o, files = {ignore = {}}, {}
    for _, a in ipairs(args) do o.json = o.json or a == "--json" end
    -- an error: one line on stderr, or with --json one object on stdout; the status is the same
    local function problem(status, msg, with_usage)
        if o.json then
            io.write(cjson.encode({error = msg, status = status}), "\n")
        else
            io.stderr:write("workbench compare: ", msg, "\n", with_usage and USAGE .. "\n" or "")
        end
        return status
    end
    local i = 1
    while i <= #args do
        local a = args[i]
        if a == "--help" or a == "-h" then
            io.write(USAGE, "\n", HELP, "\n")
            return 0
        elseif a == "--json" then
            o.json = true
        elseif a == "--verbose" or a == "-v" then
            o.verbose = true
        elseif a == "--fail-on-slower" or a == "--min-effect" then
            local v = tonumber(args[i + 1])
            if not v or v < 0 or v > 1000 then
                return problem(2, string.format("%s takes a percentage from 0 to 1000, got " ..
                    "%s", a, tostring(args[i + 1])),
                    true)
            end
            if a == "--fail-on-slower" then o.fail_on_slower = v else o.min_effect = v / 100 end
            i = i + 1
        elseif a == "--ignore" then
            if not args[i + 1] then return problem(2, "--ignore takes a column name", true) end
            o.ignore[args[i + 1]] = true
            i = i + 1
        elseif a:match("^%-%-?%a") then
            return problem(2, "unknown option " .. clean(a), true)
        else
            files[#files + 1] = a
        end
        i = i + 1
    end
    if #files ~= 2 then
        if o.json then return problem(2, string.format("expected two results files, got %d", #files)) end
        io.stderr:write(USAGE .. "\n")
        return 2
    end
    if o.json then o.out = false end
    local ok, res = pcall(compare.compare, files[1], files[2], o)
    if not ok then
        return problem(2, type(res) == "table" and res.compare_error or tostring(res))
    end
    local status = 0
    local msg
    if o.fail_on_slower and res.verdicts.SLOWER > 0 and res.worst_slower_pct == cjson.null then
        status = 1
        msg = string.format("a row is slower from 0 in A (more than any --fail-on-slower, %g here)", o.fail_on_slower)
    elseif o.fail_on_slower and res.verdicts.SLOWER > 0 and res.worst_slower_pct > o.fail_on_slower then
        status = 1
        msg = string.format("a row is %.1f%% slower (more than --fail-on-slower %g)", res.worst_slower_pct,
            o.fail_on_slower)
    end
    if o.json then
        res.status, res.failure = status, msg
        -- lua-cjson writes an empty table as {}: the lists are lists however long
        io.write((cjson.encode(res):gsub('"(%a[%w_]*)":{}', function(k)
            if LISTS[k] then return '"' .. k .. '":[]' end
        end)), "\n")
    elseif msg then
        io.stderr:write("workbench compare: ", msg, "\n")
    end
    return status
end

return M
