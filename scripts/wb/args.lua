-- wb.args: an experiment's command-line arguments, parsed one way (lua-argparse): `--help`
-- lists the options with their defaults; a bad argument prints one line naming it and the
-- script exits with status 2, as the workbench's own options do.
--
--   local args = require("wb.args")
--   local parser = args.parser("graph_replay.lua", "What replaying a captured graph removes.")
--   parser:option("--tokens", "Token counts, comma-separated.", "1,16"):convert(args.ints("--tokens", 1, 65536))
--   local o = args.parse(parser)      -- o.tokens == {1, 16}
--   if bad_together then args.stop(parser, "--x and --y do not go together") end   -- status 2

local argparse = require("argparse")

local M = {}

-- A parser named after the script; options show their defaults in --help.
function M.parser(name, description, epilog)
    local p = argparse(name, description, epilog)
    p:help_max_width(100)
    return p
end

-- The workbench's own options (bindings/main.c; true: takes a value). Given after the script they
-- reach the script's parser; one it does not know is then told to go before the script.
local WORKBENCH_OPTIONS = {["--threads"] = true, ["--device"] = true, ["--seed"] = true, ["--out"] = true,
    ["--timeout"] = true, ["--max-memory"] = true, ["--sandbox"] = false, ["--sandbox-weak"] = false}

local function shell_word(s)
    if s:match("^[%w@%%+=:,./_-]+$") then return s end
    return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- The command that runs what was asked with the workbench's options that the parser does not
-- know (`known`: option -> takes a value) moved before the script: build/workbench --threads 1
-- experiments/mlp_sweep.lua ... (`script` stands for the script where argv is not its arg).
local function command_moved(given, known, script)
    local before, after, i = {}, {}, 1
    while i <= #given do
        local a = given[i]
        local name = a:match("^(%-%-[%w-]+)=") or a
        if a == "--" then
            table.move(given, i, #given, #after + 1, after)
            break
        elseif known[name] and name == a and given[i + 1] then -- the script's own, with its value
            after[#after + 1], after[#after + 2], i = a, given[i + 1], i + 2
        elseif known[name] ~= nil or WORKBENCH_OPTIONS[name] == nil then
            after[#after + 1], i = a, i + 1
        elseif WORKBENCH_OPTIONS[name] and name == a and given[i + 1] then
            before[#before + 1], before[#before + 2], i = a, given[i + 1], i + 2
        else
            before[#before + 1], i = a, i + 1
        end
    end
    local words = {"workbench"}
    if given == arg and arg[0] then -- the command as typed: arg[-n] .. arg[-1] are the executable and its options
        local first = -1
        while arg[first - 1] ~= nil do first = first - 1 end
        words = {}
        for k = first, -1 do words[#words + 1] = arg[k] end
    end
    table.move(before, 1, #before, #words + 1, words)
    words[#words + 1] = given == arg and arg[0] or script
    table.move(after, 1, #after, #words + 1, words)
    for k, w in ipairs(words) do words[k] = shell_word(w) end
    return table.concat(words, " ")
end

-- Parses `argv` (default: the script's arg); on a bad argument: one line on stderr, status 2
-- (for a workbench option after the script: where it goes, with the command).
-- A negative number after an option that takes a value is that value (`--rounds -1` is
-- `--rounds=-1`, refused by the option's converter by name), not an unknown option '-1' as
-- lua-argparse would read it; after a flag, or after `--`, it is left as it is.
function M.parse(parser, argv)
    local takes_value = {}
    for _, o in ipairs(parser._options or {}) do
        for _, alias in ipairs(o._aliases or {}) do takes_value[alias] = (o._maxargs or 0) > 0 end
    end
    local given, joined, i = argv or arg, {}, 1
    while i <= #given do
        local a, nxt = given[i], given[i + 1]
        if a == "--" then
            table.move(given, i, #given, #joined + 1, joined)
            break
        end
        if takes_value[a] and type(nxt) == "string" and nxt:match("^%-%.?%d") then
            joined[#joined + 1], i = a .. "=" .. nxt, i + 2
        else
            joined[#joined + 1], i = a, i + 1
        end
    end
    local ok, result = parser:pparse(joined)
    if ok then return result end
    local unknown = tostring(result):match("^unknown option '([^']*)'")
    local line
    if unknown and WORKBENCH_OPTIONS[unknown] ~= nil then
        line = string.format("unknown option '%s' (a workbench option): put it before the script: %s", unknown,
            command_moved(given, takes_value, parser._name))
    else -- one line: lua-argparse puts its suggestion ("Did you mean '-h'?") on a second
        line = tostring(result):gsub("\nDid you mean", "; did you mean"):gsub("\n", " ") .. " (see --help)"
    end
    io.stderr:write(string.format("%s: %s\n", parser._name, line))
    io.stderr:flush()
    os.exit(2, true)
end

-- stop(parser, message[, status]): one line on stderr named after the script, then the script
-- ends with status (2, a bad argument, by default; 1: this machine cannot run what was asked),
-- instead of a script error's traceback: for what the converters cannot see (two options that do
-- not go together, a device or memory that is not there).
function M.stop(parser, message, status)
    if type(parser) ~= "table" or type(parser._name) ~= "string" then
        error("args.stop: parser must be wb.args.parser()'s parser, got " .. type(parser), 2)
    end
    if type(message) ~= "string" then error("args.stop: message must be text, got " .. type(message), 2) end
    if status ~= nil and (math.type(status) ~= "integer" or status < 1 or status > 255) then
        error("args.stop: status must be a whole number from 1 to 255, got " .. tostring(status), 2)
    end
    io.stderr:write(string.format("%s: %s\n", parser._name, message))
    io.stderr:flush()
    os.exit(status or 2, true)
end

local function bad(option, value, what)
    return nil, string.format("%s '%s': expected %s", option, value, what)
end

-- Converters for parser:option(...):convert(...); each error names the option and the value.
function M.int(option, lo, hi)
    return function(s)
        local n = math.tointeger(tonumber(s))
        if not n or n < lo or n > hi then return bad(option, s, string.format("a whole number from %d to %d", lo, hi)) end
        return n
    end
end

function M.ints(option, lo, hi)
    return function(s)
        local out = {}
        for v in (s .. ","):gmatch("([^,]*),") do
            local n = math.tointeger(tonumber(v))
            if not n or n < lo or n > hi then
                return bad(option, v, string.format("whole numbers from %d to %d, comma-separated", lo, hi))
            end
            out[#out + 1] = n
        end
        return out
    end
end

-- A comma-separated list of names from `allowed`.
function M.names(option, allowed)
    local set = {}
    for _, a in ipairs(allowed) do set[a] = true end
    return function(s)
        local out = {}
        for v in (s .. ","):gmatch("([^,]*),") do
            if not set[v] then return bad(option, v, "a comma-separated list of " .. table.concat(allowed, ", ")) end
            out[#out + 1] = v
        end
        return out
    end
end

return M
