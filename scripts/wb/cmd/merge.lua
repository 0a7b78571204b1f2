-- wb.cmd.merge: `workbench merge [--history] OUT FILES|DIRS...`: the shards of one wb.sweep run
-- joined into one results file (wb.merge); exit status 0, or 2 with one line.
-- bindings/main.c requires wb.cmd.<subcommand> and calls its main.

local merge = require("wb.merge")
local words = require("wb.words")

local M = {}

-- Entry point for `workbench merge OUT FILES|DIRS...`: returns the exit status.
function M.main(args)
    local history_flag, rest = false, {}
    for _, a in ipairs(args) do
        if a == "--history" then history_flag = true else rest[#rest + 1] = a end
    end
    args = rest
    if #args < 2 then
        io.stderr:write("usage: workbench merge [--history] OUT FILES|DIRS...\n" ..
            "  joins the shards (<name>.shard-I-of-N.json) of one wb.sweep run into OUT/<name>.json, .csv, .html\n" ..
            "  --history (or WB_HISTORY=1): record the merged run in the results history (workbench history)\n")
        return 2
    end
    local inputs = {}
    for i = 2, #args do inputs[#inputs + 1] = args[i] end
    local ok, paths = pcall(merge.merge, args[1], inputs)
    if not ok then
        local msg = type(paths) == "table" and paths.merge_error or tostring(paths)
        -- names and values come from files anyone may hand over: control characters (a terminal's
        -- escape sequences) are shown as \027-style escapes, as workbench compare does
        msg = words.escaped(msg, true)
        io.stderr:write("workbench merge: " .. msg .. "\n")
        return 2
    end
    print(string.format("results: %s, %s\nreport: %s", paths.json, paths.csv, paths.html))
    local history = require("wb.history")
    if (history_flag or os.getenv("WB_HISTORY") == "1") and not history.record(paths.json) then return 2 end
    return 0
end

return M
