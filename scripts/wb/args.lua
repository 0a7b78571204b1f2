-- wb.args: an experiment's command-line arguments, parsed one way (lua-argparse): `--help`
-- lists the options with their defaults; a bad argument prints one line naming it and the
-- script exits with status 2, as the workbench's own options do.
--
--   local args = require("wb.args")
--   local parser = args.parser("graph_replay.lua", "What replaying a captured graph removes.")
--   parser:option("--tokens", "Token counts, comma-separated.", "1,16"):convert(args.ints("--tokens", 1, 65536))
--   local o = args.parse(parser)      -- o.tokens == {1, 16}

local argparse = require("argparse")

local M = {}

-- A parser named after the script; options show their defaults in --help.
function M.parser(name, description, epilog)
    local p = argparse(name, description, epilog)
    p:help_max_width(100)
    return p
end

-- Parses `argv` (default: the script's arg); on a bad argument: one line on stderr, status 2.
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
    -- one line: lua-argparse puts its suggestion ("Did you mean '-h'?") on a second
    local line = tostring(result):gsub("\nDid you mean", "; did you mean"):gsub("\n", " ")
    io.stderr:write(string.format("%s: %s (see --help)\n", parser._name, line))
    io.stderr:flush()
    os.exit(2, true)
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
