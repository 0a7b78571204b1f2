-- wb.pretty: a Lua value as the REPL prints it. Tables print as values ({3, 2}, {name = "cpu",
-- threads = 2}), nested ones indented when a line would be too long; depth and size are
-- limited (what is cut says how much), a table met again on its own path prints as <cycle>,
-- and tables or userdata with __tostring (tensors) print through it.
--
--   pretty(v[, {depth = 4, items = 40, width = 100, total = 2000}]) -> string

local DEFAULTS = {depth = 4, items = 40, width = 100, total = 2000}
local SORT_LIMIT = 10000 -- keys of a larger table are shown in traversal order

local KEYWORDS = {}
for w in ("and break do else elseif end false for function goto if in local nil not or repeat return then " ..
    "true until while"):gmatch("%a+") do
    KEYWORDS[w] = true
end

local function quote(s)
    if #s > 200 then s = s:sub(1, 200) .. string.format("...(%d bytes)", #s) end
    return '"' .. s:gsub('[%c"\\]', function(c)
        local named = {['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r"}
        return named[c] or string.format("\\%d", c:byte())
    end) .. '"'
end

local function key_string(k)
    if type(k) == "string" and k:match("^[%a_][%w_]*$") and not KEYWORDS[k] then return k end
    if type(k) == "string" then return "[" .. quote(k) .. "]" end
    return "[" .. tostring(k) .. "]"
end

-- numbers first (in order), then strings, then the rest by their text
local function key_less(a, b)
    local ta, tb = type(a), type(b)
    if ta == "number" and tb == "number" then return a < b end
    if ta == "number" or tb == "number" then return ta == "number" end
    if ta == "string" and tb == "string" then return a < b end
    if ta == "string" or tb == "string" then return ta == "string" end
    return tostring(a) < tostring(b)
end

local plural = require("wb.words").plural

local function has_tostring(v)
    local mt = getmetatable(v)
    return type(mt) == "table" and rawget(mt, "__tostring") ~= nil
end

return function(value, opts)
    local o = {}
    for k, v in pairs(DEFAULTS) do o[k] = (opts and opts[k]) or v end
    local budget = o.total -- items printed in all, so a wide and deep table stays short
    local on_path = {}

    local function render(v, indent, depth)
        local t = type(v)
        if t == "string" then return quote(v) end
        if t ~= "table" or has_tostring(v) then
            local ok, s = pcall(tostring, v)
            return ok and s or ("<" .. t .. ": __tostring failed>")
        end
        if on_path[v] then return "<cycle: " .. tostring(v) .. ">" end
        -- count and collect keys with raw access (printing must not run __index or __pairs)
        local n, keys = 0, {}
        for k in next, v do
            n = n + 1
            if n <= SORT_LIMIT then keys[n] = k end
        end
        if n == 0 then return "{}" end
        if depth >= o.depth then return string.format("{...} (%s)", plural(n, "item")) end
        local len = 0
        while rawget(v, len + 1) ~= nil do len = len + 1 end
        if len >= o.items then -- a long array: its first items, in order
            keys = {}
            for i = 1, o.items do keys[i] = i end
        elseif n <= SORT_LIMIT then
            table.sort(keys, key_less)
        end
        on_path[v] = true
        local parts, positional, shown = {}, {}, 0
        for _, k in ipairs(keys) do
            if shown >= o.items or budget <= 0 then break end
            shown, budget = shown + 1, budget - 1
            local inner = render(rawget(v, k), indent .. "  ", depth + 1)
            if math.type(k) == "integer" and k >= 1 and k <= len then
                parts[#parts + 1], positional[#parts + 1] = inner, true
            else
                parts[#parts + 1] = key_string(k) .. " = " .. inner
            end
        end
        on_path[v] = nil
        if shown < n then parts[#parts + 1] = string.format("... (%s)", plural(n - shown, "more item")) end
        local one_line = "{" .. table.concat(parts, ", ") .. "}"
        if #indent + #one_line <= o.width and not one_line:find("\n") then return one_line end
        -- one field per line; runs of short array items share lines
        local lines, pad = {}, indent .. "  "
        for i, part in ipairs(parts) do
            local last = lines[#lines]
            if positional[i] and positional[i - 1] and not part:find("\n") and not last:find("\n")
                and #last + #part + 2 <= o.width then
                lines[#lines] = last .. ", " .. part
            else
                lines[#lines + 1] = pad .. part
            end
        end
        return "{\n" .. table.concat(lines, ",\n") .. "\n" .. indent .. "}"
    end

    return render(value, "", 0)
end
