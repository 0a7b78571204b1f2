-- wb.words: counted nouns in printed output ("1 thread", "2 threads"), and text from files anyone
-- may hand over made safe to print.
--   words.plural(n, "thread") -> "1 thread" / "2 threads";  words.plural(n, "entry", "entries")
--   words.escaped("a\27[31m") -> "a\\027[31m" (control characters as \027-style escapes)

local M = {}

function M.plural(n, word, words)
    return string.format("%s %s", tostring(n), n == 1 and word or (words or word .. "s"))
end

-- s with its control characters (a terminal's escape sequences) as \027-style escapes, never raw;
-- with keep_newlines, line breaks stay (a message of several lines).
function M.escaped(s, keep_newlines)
    return (s:gsub("%c", function(c)
        return keep_newlines and c == "\n" and c or string.format("\\%03d", c:byte())
    end))
end

return M
