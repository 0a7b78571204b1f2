-- wb.words: counted nouns in printed output ("1 thread", "2 threads"), and text from files anyone
-- may hand over made safe to print.
--   words.plural(n, "thread") -> "1 thread" / "2 threads";  words.plural(n, "entry", "entries")
--   words.escaped("a\27[31m") -> "a\\027[31m" (control characters as \027-style escapes, bidi marks
--       and C1 controls as \u{202E})
--   words.shown(s) -> s escaped, and cut after 80 characters ("abc... (30000000 characters)")
--   words.wrap(text, 120, "  ") -> text in lines of at most 120 columns, the later ones indented

local M = {}

function M.plural(n, word, words)
    return string.format("%s %s", tostring(n), n == 1 and word or (words or word .. "s"))
end

-- The UTF-8 characters that change how a terminal shows the text after them without being control
-- bytes: the C1 controls (U+0080-U+009F; U+009B opens an escape sequence as ESC [ does) and the
-- bidirectional formatting marks (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069: a U+202E in a
-- name shows the rest of the line reversed).
local INVISIBLE = {"\194[\128-\159]", "\216\156", "\226\128[\142\143\170-\174]", "\226\129[\166-\169]"}

-- s with its control characters (a terminal's escape sequences) as \027-style escapes and the
-- characters above as \u{202E}-style escapes, never raw; with keep_newlines, line breaks stay (a
-- message of several lines).
function M.escaped(s, keep_newlines)
    s = s:gsub("%c", function(c)
        return keep_newlines and c == "\n" and c or string.format("\\%03d", c:byte())
    end)
    for _, pattern in ipairs(INVISIBLE) do
        s = s:gsub(pattern, function(c) return string.format("\\u{%04X}", utf8.codepoint(c)) end)
    end
    return s
end

-- A value from a file, for a one-line message: escaped, and a long string cut (a 30 MB name in a
-- handed-over file would otherwise fill the terminal with one error).
function M.shown(v, max)
    if type(v) ~= "string" then return tostring(v) end
    max = max or 80
    if #v <= max then return M.escaped(v) end
    return M.escaped(v:sub(1, max)) .. string.format("... (%d characters)", #v)
end

-- text broken at spaces into lines of at most width columns (default 120), the lines after the
-- first starting with indent (the first keeps its own); a word longer than a line stays whole.
function M.wrap(text, width, indent)
    width, indent = width or 120, indent or ""
    local lines, line = {}, nil
    local lead = tostring(text):match("^%s*")
    for word in tostring(text):gmatch("%S+") do
        if not line and lead ~= "" then word = lead .. word end
        if line and #line + 1 + #word > width then
            lines[#lines + 1] = line
            line = indent .. word
        else
            line = line and line .. " " .. word or word
        end
    end
    lines[#lines + 1] = line or ""
    return table.concat(lines, "\n")
end

return M
