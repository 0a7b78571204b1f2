-- wb.saveset: whether a results set (the .json, .csv and .html of one r:save) came from one save.
-- Each file is written whole (wb.atomic), but a process killed between two of them leaves a set
-- mixed between two saves; each save marks its files with one id (wb.results), read back here.
local M = {}

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
    for _, ext in ipairs({"csv", "html"}) do
        local other = read_all(base .. "." .. ext)
        if other then
            local got = other:match(ext == "csv" and "\n# save_id=([^\n]+)" or "<!%-%- save_id=(%S+) %-%->")
            if got ~= id then
                return string.format("%s.%s is from another save (%s) than %s (%s): a save was interrupted between "
                    .. "the files", base, ext, tostring(got or "unmarked"), json_path, id)
            end
        end
    end
    return nil
end

return M
