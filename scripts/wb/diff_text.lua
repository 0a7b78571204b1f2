-- wb.diff_text: wb.profiler.diff(pa, pb) (two stopped profiles through wb.diff) and the result as
-- a table fitted to the terminal; the command `workbench diff` (reading traces, --json, --html)
-- is wb.cmd.diff.

local cjson = require("cjson")
local diff = require("wb.diff")
local words = require("wb.words")

local M = {}


local function clean(s) return words.escaped(tostring(s)) end

local function ns(v)
    if v == nil then return "-" end
    local a = math.abs(v)
    if a >= 1e6 then return string.format("%.2f ms", v / 1e6) end
    if a >= 1e3 then return string.format("%.1f us", v / 1e3) end
    return string.format("%.0f ns", v)
end

local function signed(v)
    if v == nil then return "-" end
    return (v >= 0 and "+" or "-") .. ns(math.abs(v))
end

local function ratio_text(j)
    if not j or not j.ratio then return "-" end
    if j.ratio == math.huge then return "new time" end
    -- two decimals below 10, fewer above: "[0.08,10.5]" fits the column where "[0.08,10.47]" would not
    local function num(v) return string.format(v < 9.995 and "%.2f" or v < 99.95 and "%.1f" or "%.0f", v) end
    local r = num(j.ratio) .. "x"
    if j.lo and j.hi then return r .. " [" .. num(j.lo) .. "," .. num(j.hi) .. "]" end
    -- too few samples for a 95% interval (judge gives none): say how few
    return r .. string.format(" n=%d", math.min(j.n_a, j.n_b))
end

local function fit(s, w)
    if #s <= w then return s .. string.rep(" ", w - #s) end
    if w <= 3 then return s:sub(1, w) end
    return s:sub(1, w - 3) .. "..."
end

-- `text` as lines of at most `width` columns, broken at spaces (its leading spaces kept); the
-- lines after the first start with `indent` (a word longer than a line is cut with "...")
local function wrap(text, width, indent)
    indent = indent or ""
    local lines, line = {}, nil
    local lead, rest = text:match("^(%s*)(.*)$")
    for word in rest:gmatch("%S+") do
        if not line and #lines == 0 then word = lead .. word end
        local room = width - (#lines > 0 and #indent or 0)
        if line and #line + 1 + #word <= room then line = line .. " " .. word
        else
            if line then lines[#lines + 1] = (#lines > 0 and indent or "") .. line end
            line = #word <= width - #indent and word or fit(word, width - #indent)
        end
    end
    if line then lines[#lines + 1] = (#lines > 0 and indent or "") .. line end
    return lines
end
M.wrap = wrap

local function change_line(c)
    local function side(list)
        local parts = {}
        for i, n in ipairs(list) do parts[i] = n.described end
        return table.concat(parts, " + ")
    end
    local where = c.parent_label and (c.parent_label .. ": ") or ""
    if c.kind == "replaced" then return where .. side(c.a) .. " -> " .. side(c.b) end
    if c.kind == "removed" then return where .. "removed " .. side(c.a) end
    if c.kind == "added" then return where .. "added " .. side(c.b) end
    local fields = {}
    for i, f in ipairs(c.fields or {}) do fields[i] = string.format("%s %s -> %s", f.field, f.a or "-", f.b or "-") end
    return string.format("%skernel kind changed: %s -> %s (%s)", where, side(c.a), side(c.b), table.concat(fields, ", "))
end
M.change_line = change_line

-- occurrences per step: "3", "2.5", or "3->2" where the sides differ (a removed node: its A count)
local function count_text(n)
    local function g(v) return string.format("%.3g", v) end
    if n.only == "A" then return g(n.count_a) end
    if n.only == "B" then return g(n.count_b) end
    if math.abs(n.count_a - n.count_b) > 1e-9 then return g(n.count_a) .. "->" .. g(n.count_b) end
    return g(n.count_a)
end

-- The table's columns after the node's: heading, width, and the cell of a row (n: a node of
-- r.nodes, or the total's {host =, device =, contribution =}).
-- The attribution's added and removed terms are itemised: this many nodes each, largest first.
local ALONE_LISTED = 5

-- The rows only one side has, by the path of their parent (the step's own: ""), from the table's
-- rows, which come in tree order (a node's subtree right after it) with their depth.
local function alone_children(r)
    local by, stack = {}, {}
    for _, n in ipairs(r.nodes) do
        stack[n.depth] = n.path
        local parent = n.depth > 1 and stack[n.depth - 1] or ""
        if n.only then
            by[parent] = by[parent] or {}
            table.insert(by[parent], n)
        end
    end
    return by
end

local COLUMNS = {
    {"count", 5, function(n) return n.count_a and count_text(n) end},
    {"host A", 8, function(n) return n.host and n.host.median_a and ns(n.host.median_a) end},
    {"host B", 8, function(n) return n.host and n.host.median_b and ns(n.host.median_b) end},
    {"B/A [95%]", 17, function(n) return n.host and n.host.ratio and ratio_text(n.host) end},
    {"host", 7, function(n) return n.host and n.host.verdict end},
    {"dev A", 8, function(n) return n.device and n.device.median_a and ns(n.device.median_a) end},
    {"dev B", 8, function(n) return n.device and n.device.median_b and ns(n.device.median_b) end},
    {"dev", 7, function(n) return n.device and n.device.verdict end},
    {"contrib", 9, function(n) return signed(n.contribution or n.host_contribution or n.device_contribution) end},
}

-- The result as lines of text, `width` columns wide at most (the node column takes what is left;
-- under 100 columns the table is wider than asked: 92 columns with a 16-column name).
function M.format(r, width)
    width = math.max(width or 120, 60)
    local out = {}
    local function add(s) out[#out + 1] = clean(s) end
    local function para(s, indent)
        for _, l in ipairs(wrap(clean(s), width, indent or "  ")) do out[#out + 1] = l end
    end
    para(string.format("A: %s (%s); B: %s (%s)", r.a.name, words.plural(r.a.steps, "step"), r.b.name,
        words.plural(r.b.steps, "step")))
    local build = r.build or {}
    if build.a == build.b then para("build: " .. (build.a or "unknown (the traces do not say)") .. ", both")
    else para(string.format("build: A %s, B %s", build.a or "unknown", build.b or "unknown")) end
    if #r.fingerprint > 0 then
        add("fingerprint differences:")
        for _, f in ipairs(r.fingerprint) do
            para(string.format("  %s: %s -> %s", f.field, f.a or "?", f.b or "?"), "    ")
        end
    else
        add("fingerprint differences: none")
    end
    for _, n in ipairs(r.notes) do para("note: " .. n) end
    add(#r.changes > 0 and "structural changes:" or "structural changes: none")
    for _, c in ipairs(r.changes) do para("  " .. change_line(c), "    ") end
    local k = r.kernels
    local function list(t, f)
        local parts = {}
        for i, x in ipairs(t) do parts[i] = f(x) end
        return table.concat(parts, ", ")
    end
    local function per_step(x) return string.format("%s (%g per step)", x.name, x.per_step) end
    if #k.gone > 0 then para("kernels gone: " .. list(k.gone, per_step)) end
    if #k.new > 0 then para("kernels new: " .. list(k.new, per_step)) end
    if #k.moved > 0 then
        para("kernel counts changed: " .. list(k.moved, function(x)
            return string.format("%s %g -> %g per step", x.name, x.a, x.b)
        end))
    end
    add("")
    -- the node table, in the order A ran them (B's own nodes after their aligned neighbour):
    -- fixed columns, the name column takes what is left
    local cols, fixed = {}, 0
    for i, c in ipairs(COLUMNS) do cols[i] = c; fixed = fixed + c[2] + 1 end
    if width - fixed < 24 then -- narrow: B/A without its interval, so that the names keep some room
        cols[4] = {"B/A", 7, function(n) return n.host and n.host.ratio and (ratio_text(n.host):match("^%S+")) end}
        fixed = fixed - 10
    end
    local name_w = math.max(16, width - fixed)
    para("count: occurrences per step; host, dev: medians per occurrence (dev: the device time under a node), B/A " ..
        "with its 95% interval (n=K: too few samples for one), verdicts; contrib: the change of time per step. " ..
        "Nodes only A has are removed, only B added.", "")
    local function row(name, n)
        local cells = {fit(name, name_w)}
        for _, c in ipairs(cols) do
            cells[#cells + 1] = string.format("%" .. c[2] .. "s", (fit(c[3](n) or "-", c[2]):gsub("%s+$", "")))
        end
        return table.concat(cells, " ")
    end
    local head = {fit("node", name_w)}
    for _, c in ipairs(cols) do head[#head + 1] = string.format("%" .. c[2] .. "s", c[1]) end
    add(table.concat(head, " "))
    add(row("total (per step)", {host = r.total.host, device = r.total.device,
        contribution = r.attribution.host[1].change}))
    for _, n in ipairs(r.nodes) do
        local mark = n.only == "A" and "- " or n.only == "B" and "+ " or ""
        add(row(string.rep(" ", math.min(n.depth - 1, 8)) .. mark .. n.label, n))
    end
    add("")
    -- the verdicts the samples could not reach: how many steps would
    local short = {}
    local function see(label, j)
        if j and j.needs_steps then short[#short + 1] = {label = label, j = j} end
    end
    see("total (host)", r.total.host)
    see("total (device)", r.total.device)
    for _, n in ipairs(r.nodes) do see(n.label, n.host); see(n.label .. " (device)", n.device) end
    if #short > 0 then
        table.sort(short, function(x, y) return math.abs(math.log(x.j.ratio)) > math.abs(math.log(y.j.ratio)) end)
        local parts = {}
        for i, x in ipairs(short) do
            if i > 6 then parts[#parts + 1] = string.format("%d more", #short - 6); break end
            parts[#parts + 1] = string.format("%s %.2fx: >= %d steps a side", x.label, x.j.ratio, x.j.needs_steps)
        end
        local na, nb = short[1].j.n_a, short[1].j.n_b
        local c = 1 -- C(na + nb, na): the smallest two-sided exact p is 2 / c
        for i = 1, na do c = c * (nb + i) / i end
        para(string.format("UNSURE with too few samples (%d and %d a side: the exact rank test's smallest p is %.2g, " ..
            "and only for two sides wholly apart): at the effect and overlap seen, a verdict needs %s; record " ..
            "that many active steps (torch.profiler: schedule(active=N))", na, nb, math.min(1, 2 / c),
            table.concat(parts, "; ")))
        add("")
    end
    -- attribution: the change of the mean per step, split exactly; the added and removed terms
    -- itemised by node (the table's rows only one side has, under the parent attributed)
    local alone = alone_children(r)
    for _, metric in ipairs({"host", "device"}) do
        for i, a in ipairs(r.attribution[metric]) do
            if i == 1 or #a.rows > 0 then
                local where = a.parent == "" and "the step" or r.labels[a.parent]
                local aligned = 0
                for _, x in ipairs(a.rows) do aligned = aligned + x.contribution end
                para(string.format("%s time of %s, mean per step %s -> %s: %s = aligned %s, added %s, removed %s, " ..
                    "unattributed %s", metric, where, ns(a.a_per_step), ns(a.b_per_step), signed(a.change), signed(aligned),
                    signed(a.added), signed(a.removed), signed(a.unattributed)))
                for j, x in ipairs(a.rows) do
                    if j > 8 then add(string.format("  ... %d more", #a.rows - 8)); break end
                    add(fit(string.format("  %12s  %s", signed(x.contribution), x.label), width):gsub("%s+$", ""))
                end
                for _, only in ipairs({"B", "A"}) do
                    local list = {}
                    for _, n in ipairs(alone[a.parent] or {}) do
                        local c = n.only == only and n[metric .. "_contribution"]
                        if c and c ~= 0 then list[#list + 1] = {label = n.label, contribution = c} end
                    end
                    table.sort(list, function(x, y) return math.abs(x.contribution) > math.abs(y.contribution) end)
                    for j, x in ipairs(list) do
                        if j > ALONE_LISTED then
                            add(string.format("  ... %d more %s", #list - ALONE_LISTED, only == "B" and "added" or "removed"))
                            break
                        end
                        add(fit(string.format("  %12s  %s %s", signed(x.contribution), only == "B" and "+" or "-", x.label),
                            width):gsub("%s+$", ""))
                    end
                end
            end
        end
    end
    local compare = require("wb.compare")
    local unit = r.steps and r.steps.unit == "step" and "one sample per node and step (its median in the step)" or
        "every occurrence a sample"
    para(string.format("verdicts by compare's rule: rank test (exact for small samples) p < %g and a change of at " ..
        "least %g%%, above both sides' noise (IQR / median); %s", compare.ALPHA,
        (r.min_effect or compare.MIN_EFFECT) * 100, unit))
    return out
end

-- JSON-safe copy: no infinities or NaN.
local function plain(v)
    if type(v) == "number" then
        if v ~= v or v == math.huge or v == -math.huge then return nil end
        return v
    end
    if type(v) ~= "table" then return v end
    local out = {}
    for k, x in pairs(v) do out[k] = plain(x) end
    return out
end
M.plain = plain

-- The build that recorded a profile: a loaded trace's (its otherData), else this executable's.
function M.build_of(p)
    if p.loaded_from then return type(p.trace_other) == "table" and p.trace_other.build or nil end
    return {version = wb.version, commit = wb.commit}
end

-- Two profiles from wb.profiler.ab: how they were taken.
function M.interleaved_note(p)
    local i = p.interleaved
    local order = i.order == "abba" and "A B B A order" or i.order == "alternate" and "A B A B order" or
        string.format("blocks of A B B A and B A A B shuffled by seed %d", i.seed or 1)
    return string.format("A and B were profiled interleaved in one process (%s, %d steps each after %d of " ..
        "warmup): both saw the same machine", order, i.steps, i.warmup)
end

-- wb.profiler.diff(pa, pb[, o]): two stopped profiles -> the comparison as a table.
function M.profiles(pa, pb, o)
    o = o or {}
    local function check(p, which)
        if type(p) ~= "table" or not p.native or type(p._result) ~= "function" then
            error(string.format("profiler.diff: %s must be a profiler (wb.profiler.profile), got %s", which, type(p)), 3)
        end
        if p.started then error(string.format("profiler.diff: %s is still recording: call p:stop() first", which), 3) end
    end
    check(pa, "the first argument")
    check(pb, "the second argument")
    if rawequal(pa, pb) then error("profiler.diff: the same profile given twice: nothing to compare", 2) end
    local mo = {draw = "none", per_occurrence = o.per_occurrence}
    local ok, r = pcall(function()
        local ma, mb = diff.model_of(pa, mo), diff.model_of(pb, mo)
        return diff.diff(ma, mb, {min_effect = o.min_effect, name_a = "A", name_b = "B",
            fingerprint_a = diff.fingerprint(pa:_findings_context(), M.build_of(pa)),
            fingerprint_b = diff.fingerprint(pb:_findings_context(), M.build_of(pb))}), ma, mb
    end)
    if not ok then error("profiler.diff: " .. (type(r) == "table" and r.diff_error or tostring(r)), 2) end
    if pa.interleaved and pb.interleaved then table.insert(r.notes, 1, M.interleaved_note(pa)) end
    return r
end


return M
