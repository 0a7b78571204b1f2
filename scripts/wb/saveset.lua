-- wb.saveset: whether a results set (the .json, .csv and .html of one r:save) came from one save.
-- Each file is written whole (wb.atomic), but a process killed between two of them leaves a set
-- mixed between two saves; each save marks its files (wb.results), read back here: the HTML with
-- a comment holding the save's id, the CSV (plain CSV, no comments) by the digest of its text,
-- which the JSON records (csv_digest) beside the id.
local M = {}

-- digest(text) -> FNV-1a (64 bits) of text as 16 hex digits: enough to tell two saves' CSVs apart
-- (not a defence against anyone forging one).
function M.digest(text)
    local h = -3750763034362895579 -- 0xcbf29ce484222325 as a Lua integer
    for i = 1, #text, 4096 do
        local bytes = {text:byte(i, math.min(i + 4095, #text))}
        for _, b in ipairs(bytes) do h = (h ~ b) * 1099511628211 end -- the FNV prime 0x100000001b3
    end
    return string.format("%016x", h)
end

local function read_all(path)
    local f = io.open(path, "rb")
    if not f then return nil end
    local text = f:read("a")
    f:close()
    return text
end

-- check(json_path) -> nil when the .json, .csv and .html beside each other come from one save
-- (or the others are absent, or the JSON predates the marks), else one line naming the file from
-- another save.
function M.check(json_path)
    local base = json_path:gsub("%.json$", "")
    local text = read_all(json_path)
    if not text then return nil end
    local id = text:match('"save_id"%s*:%s*"([^"]+)"')
    if not id then return nil end -- written before saves were marked
    local digest = text:match('"csv_digest"%s*:%s*"(%x+)"')
    for _, ext in ipairs({"csv", "html"}) do
        local other = read_all(base .. "." .. ext)
        if other then
            local got
            if ext == "html" then
                got = other:match("<!%-%- save_id=(%S+) %-%->")
            elseif digest then
                got = M.digest(other) == digest and id or "its text is not the one this save wrote"
            else -- saved before the CSV became plain CSV: its last line named the save
                got = other:match("\n# save_id=([^\n]+)")
            end
            if got ~= id then
                return string.format("%s.%s is from another save (%s) than %s (%s): a save was interrupted between "
                    .. "the files", base, ext, tostring(got or "unmarked"), json_path, id)
            end
        end
    end
    return nil
end

return M
