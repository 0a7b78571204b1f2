-- wb.words: counted nouns in printed output ("1 thread", "2 threads").
--   words.plural(n, "thread") -> "1 thread" / "2 threads";  words.plural(n, "entry", "entries")

local M = {}

function M.plural(n, word, words)
    return string.format("%s %s", tostring(n), n == 1 and word or (words or word .. "s"))
end

return M
