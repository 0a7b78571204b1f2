-- wb.report: self-contained HTML reports: SVG charts, escaped text, and a Content-Security-Policy
-- that lets the page run no script and fetch nothing (a shared script's strings are data, never HTML).
--   line_chart{title=, caption=, x_label=, y_label=, log_x=, log_y=,
--              series={{name=, points={{x, y[, lo, hi[, unstable]]}, ...}}}}
--       lo-hi (e.g. p10-p90) is drawn as an error bar; an unstable point is drawn hollow
--   bar_chart{title=, caption=, y_label=, groups={"1", "16"}, reference=1,
--             series={{name=, values={...}[, lo={...}, hi={...}]}}}   lo-hi: whiskers (an interval)
--   roofline{title=, caption=, peak_gflops=, bandwidth_gbs= | ceilings={{name="L2", gbs=[, max_bytes=]}, ...},
--            points={{name=, intensity=, gflops=[, kernel=, bytes=, roof=, roof_gbs=]}}}
--   render(spec, rows): one of them drawn from results rows by a spec that is data (saved with the
--       results, so `workbench merge` draws the merged rows' charts); page_head(title): the page's head
--   kernel_work(events), findings_tables(points, {by=, at=}): a report's parts from profiles (below)
-- Each chart returns an HTML <figure> with axis titles, tooltips (<title>) on every point, a legend
-- under the plot (never cut) and a caption. Numbers are shown to 3 significant digits.

local M = {}

local W, PLOT_H, L, R, T, B = 760, 330, 70, 24, 40, 50 -- width, plot height and margins
local LEGEND_ROW = 18
local COLORS = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"}

-- No script from anywhere, nothing fetched (images only as data: URIs), inline styles only.
M.CSP = "default-src 'none'; script-src 'none'; connect-src 'none'; img-src data:; style-src 'unsafe-inline'; " ..
    "base-uri 'none'; form-action 'none'"

function M.escape(s)
    return (tostring(s):gsub("[&<>\"']", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
        ["'"] = "&#39;"}))
end
local esc = M.escape

-- The page's start: the policy first, then the title (escaped) and the house's style.
function M.page_head(title)
    return "<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='Content-Security-Policy' content=\"" ..
        M.CSP .. "\"><title>" .. esc(title) .. "</title><style>body{font-family:sans-serif;margin:2em;max-width:1100px}" ..
        "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}" ..
        "th{background:#eee}td:first-child,th:first-child{text-align:left}" ..
        ".wide{overflow-x:auto;max-width:100%}.fp td{text-align:left;overflow-wrap:anywhere;max-width:700px}" ..
        "figure{margin:2em 0}figcaption{color:#444;max-width:900px}.warn{color:#a40}" ..
        ".partial{background:#fff3cd;border:2px solid #a40;padding:.6em 1em}" ..
        "table.results th{word-break:keep-all;overflow-wrap:normal;hyphens:none}" ..
        "tr.unstable td{background:#fde8d8}svg{max-width:100%;height:auto}</style></head><body>"
end

local function scale(lo, hi, log, a, b)
    if log then lo, hi = math.log(lo, 10), math.log(hi, 10) end
    if hi == lo then hi = lo + 1 end
    return function(v)
        if log then v = math.log(v, 10) end
        return a + (v - lo) / (hi - lo) * (b - a)
    end
end

local function ticks(lo, hi, log)
    local t = {}
    if log then
        for e = math.floor(math.log(lo, 10)), math.ceil(math.log(hi, 10)) do
            for _, m in ipairs({1, 2, 5}) do
                local v = m * 10 ^ e
                if v >= lo * 0.999 and v <= hi * 1.001 then t[#t + 1] = v end
            end
        end
    else
        local step = 10 ^ math.floor(math.log((hi - lo) / 4, 10))
        for _, m in ipairs({1, 2, 5, 10}) do
            if (hi - lo) / (step * m) <= 6 then step = step * m; break end
        end
        for v = math.ceil(lo / step) * step, hi + step * 1e-9, step do t[#t + 1] = v end
    end
    return t
end

local function fmt(v)
    if v ~= 0 and (math.abs(v) >= 1000 or math.abs(v) < 0.01) then return string.format("%.3g", v) end
    return string.format("%g", tonumber(string.format("%.3g", v)))
end
M.fmt = fmt

-- The legend's entries laid out in rows under the plot: {x, y} per entry, and the rows used.
-- Widths are estimated (7 px a character at 12 px sans-serif, which is generous), so no name is cut.
local function legend_layout(entries)
    local at, x, row = {}, L, 0
    for i, e in ipairs(entries) do
        local w = 34 + 7 * #e.name
        if x > L and x + w > W - R then x, row = L, row + 1 end
        at[i] = {x, row}
        x = x + w + 14
    end
    return at, #entries > 0 and row + 1 or 0
end

local function open_svg(out, legend_rows)
    local h = T + PLOT_H + B + (legend_rows > 0 and 14 or 0) + legend_rows * LEGEND_ROW
    out[#out + 1] = string.format("<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' viewBox='0 0 %d %d' " ..
        "font-family='sans-serif' font-size='12'><rect width='100%%' height='100%%' fill='white'/>", W, h, W, h)
end

local function frame(o, out, xs, ys, xt, yt, log_x, log_y)
    out[#out + 1] = string.format("<text x='%d' y='22' font-size='15' font-weight='bold'>%s</text>", L, esc(o.title or ""))
    for _, v in ipairs(yt) do
        local y = ys(v)
        out[#out + 1] = string.format("<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' stroke='#ddd'/>", L, W - R, y, y)
        out[#out + 1] = string.format("<text x='%d' y='%.1f' text-anchor='end'>%s</text>", L - 6, y + 4, fmt(v))
    end
    for _, v in ipairs(xt) do
        local x = xs(v)
        out[#out + 1] = string.format("<line x1='%.1f' x2='%.1f' y1='%d' y2='%d' stroke='#eee'/>", x, x, T, T + PLOT_H)
        out[#out + 1] = string.format("<text x='%.1f' y='%d' text-anchor='middle'>%s</text>", x, T + PLOT_H + 16, fmt(v))
    end
    out[#out + 1] = string.format("<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='#333'/>", L, T,
        W - L - R, PLOT_H)
    out[#out + 1] = string.format("<text x='%d' y='%d' text-anchor='middle'>%s</text>", L + (W - L - R) // 2,
        T + PLOT_H + 36, esc(o.x_label or "") .. (log_x and " (log)" or ""))
    out[#out + 1] = string.format("<text transform='translate(16,%d) rotate(-90)' text-anchor='middle'>%s</text>",
        T + PLOT_H // 2, esc(o.y_label or "") .. (log_y and " (log)" or ""))
end

-- entries: {name=, color=} (a box) or {name=, dash=} (a line with that dash pattern)
local function legend(out, entries)
    local at = legend_layout(entries)
    for i, e in ipairs(entries) do
        local x, y = at[i][1], T + PLOT_H + B + 14 + (at[i][2]) * LEGEND_ROW
        if e.dash then
            out[#out + 1] = string.format("<line x1='%d' x2='%d' y1='%d' y2='%d' stroke='#000' stroke-width='1.5' " ..
                "stroke-dasharray='%s'/>", x, x + 24, y - 4, y - 4, e.dash)
        else
            out[#out + 1] = string.format("<rect x='%d' y='%d' width='12' height='12' fill='%s'/>", x, y - 10, e.color)
        end
        out[#out + 1] = string.format("<text x='%d' y='%d'>%s</text>", x + (e.dash and 30 or 18), y, esc(e.name))
    end
end

local function figure(out, caption)
    out[#out + 1] = "</svg>"
    return "<figure>" .. table.concat(out) .. "<figcaption>" .. esc(caption or "") .. "</figcaption></figure>"
end

local function color(i) return COLORS[(i - 1) % #COLORS + 1] end

-- every chart takes one table of options, with its series
local function check_options(o, name)
    if type(o) ~= "table" then error(string.format("report.%s: expected a table of options, got %s", name, type(o)), 3) end
    if o.series ~= nil and type(o.series) ~= "table" then
        error(string.format("report.%s: series must be an array, got %s", name, type(o.series)), 3)
    end
end

local function boxes(series)
    local entries = {}
    for i, s in ipairs(series) do entries[i] = {name = tostring(s.name), color = color(i)} end
    return entries
end

function M.line_chart(o)
    check_options(o, "line_chart")
    local xlo, xhi, ylo, yhi = math.huge, -math.huge, math.huge, -math.huge
    for _, s in ipairs(o.series) do
        for _, p in ipairs(s.points) do
            xlo, xhi = math.min(xlo, p[1]), math.max(xhi, p[1])
            ylo, yhi = math.min(ylo, p[3] or p[2]), math.max(yhi, p[4] or p[2])
        end
    end
    if xlo > xhi then xlo, xhi, ylo, yhi = 1, 10, 1, 10 end -- no points: an empty frame
    if o.log_y then ylo, yhi = ylo / 1.3, yhi * 1.3 else ylo, yhi = math.min(0, ylo), yhi * 1.1 end
    local xs = scale(xlo, xhi, o.log_x, L + 10, W - R - 10)
    local ys = scale(ylo, yhi, o.log_y, T + PLOT_H, T)
    local entries = boxes(o.series)
    local out = {}
    open_svg(out, select(2, legend_layout(entries)))
    frame(o, out, xs, ys, ticks(xlo, xhi, o.log_x), ticks(ylo, yhi, o.log_y), o.log_x, o.log_y)
    for i, s in ipairs(o.series) do
        local c = color(i)
        local pts = {}
        for _, p in ipairs(s.points) do pts[#pts + 1] = string.format("%.1f,%.1f", xs(p[1]), ys(p[2])) end
        out[#out + 1] = string.format("<polyline fill='none' stroke='%s' stroke-width='2' points='%s'/>", c,
            table.concat(pts, " "))
        for _, p in ipairs(s.points) do
            local range = ""
            if p[3] and p[4] then
                out[#out + 1] = string.format("<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='%s' stroke-width='1.5'/>",
                    xs(p[1]), xs(p[1]), ys(p[3]), ys(p[4]), c)
                range = string.format(" (p10-p90 %s-%s)", fmt(p[3]), fmt(p[4]))
            end
            out[#out + 1] = string.format("<circle cx='%.1f' cy='%.1f' r='3.5' fill='%s' stroke='%s'><title>%s: %s, %s%s%s</title></circle>",
                xs(p[1]), ys(p[2]), p[5] and "white" or c, c, esc(s.name), fmt(p[1]), fmt(p[2]), range,
                p[5] and ", unstable (noise above target)" or "")
        end
    end
    legend(out, entries)
    return figure(out, o.caption)
end

function M.bar_chart(o)
    check_options(o, "bar_chart")
    local yhi = o.reference or 0
    for _, s in ipairs(o.series) do
        for g = 1, #o.groups do
            local v = (s.hi and s.hi[g]) or s.values[g]
            if v then yhi = math.max(yhi, v) end
        end
    end
    yhi = yhi > 0 and yhi * 1.15 or 1
    local ys = scale(0, yhi, false, T + PLOT_H, T)
    local ng, ns = #o.groups, math.max(1, #o.series)
    local gw = (W - L - R) / math.max(1, ng)
    local bw = gw * 0.8 / ns
    local entries = boxes(o.series)
    local out = {}
    open_svg(out, select(2, legend_layout(entries)))
    frame(o, out, function() return 0 end, ys, {}, ticks(0, yhi, false), false, false)
    for g, name in ipairs(o.groups) do
        out[#out + 1] = string.format("<text x='%.1f' y='%d' text-anchor='middle'>%s</text>", L + (g - 0.5) * gw,
            T + PLOT_H + 16, esc(name))
        for si, s in ipairs(o.series) do
            local v = s.values[g]
            if v then
                local x = L + (g - 1) * gw + gw * 0.1 + (si - 1) * bw
                local lo, hi = s.lo and s.lo[g], s.hi and s.hi[g]
                local interval = lo and hi and string.format(" (interval %s-%s)", fmt(lo), fmt(hi)) or ""
                out[#out + 1] = string.format("<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'>" ..
                    "<title>%s, %s: %s%s</title></rect>", x, ys(v), bw - 1, ys(0) - ys(v), color(si), esc(s.name),
                    esc(name), fmt(v), interval)
                if lo and hi then -- the whisker: the interval, capped at both ends
                    local cx, cap = x + (bw - 1) / 2, math.min(6, bw / 4)
                    out[#out + 1] = string.format("<path d='M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f' stroke='#222' " ..
                        "stroke-width='1.3' fill='none'/>", cx, ys(lo), ys(hi), cx - cap, ys(lo), cx + cap, cx - cap,
                        ys(hi), cx + cap)
                end
            end
        end
    end
    if o.reference then
        local y = ys(o.reference)
        out[#out + 1] = string.format("<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' stroke='#000' stroke-dasharray='5,4'/>",
            L, W - R, y, y)
    end
    legend(out, entries)
    return figure(out, o.caption)
end

local CEILING_DASH = {"1,0", "6,3", "2,3", "8,3,2,3"}

-- The ceiling a kernel moving `bytes` is judged against: the first (smallest) whose max_bytes holds them.
local function ceiling_for(ceilings, bytes)
    for _, c in ipairs(ceilings) do
        if not c.max_bytes or (bytes and bytes <= c.max_bytes) then return c end
    end
    return ceilings[#ceilings]
end

function M.roofline(o)
    check_options(o, "roofline")
    local ceilings = o.ceilings or {{name = "DRAM", gbs = o.bandwidth_gbs}}
    local ilo, ihi, glo, ghi = 0.1, 100, 1, o.peak_gflops * 2
    for _, p in ipairs(o.points) do
        ilo, ihi = math.min(ilo, p.intensity / 2), math.max(ihi, p.intensity * 2)
        glo = math.min(glo, p.gflops / 2)
        ghi = math.max(ghi, p.gflops * 1.5)
    end
    local xs = scale(ilo, ihi, true, L + 10, W - R - 10)
    local ys = scale(glo, ghi, true, T + PLOT_H, T)
    -- the ceilings' names go in the legend, with their dash: written on the plot they overlapped
    local names, index, entries = {}, {}, {}
    for _, p in ipairs(o.points) do
        if not index[p.name] then names[#names + 1] = p.name; index[p.name] = #names end
    end
    for i, n in ipairs(names) do entries[i] = {name = tostring(n), color = color(i)} end
    for ci, c in ipairs(ceilings) do
        entries[#entries + 1] = {name = string.format("%s roof %s GB/s", c.name, fmt(c.gbs)),
            dash = CEILING_DASH[(ci - 1) % #CEILING_DASH + 1]}
    end
    local out = {}
    open_svg(out, select(2, legend_layout(entries)))
    frame(o, out, xs, ys, ticks(ilo, ihi, true), ticks(glo, ghi, true), true, true)
    for ci, c in ipairs(ceilings) do
        local ridge = o.peak_gflops / c.gbs
        local pts = {}
        for _, i in ipairs({ilo, math.max(ilo, math.min(ridge, ihi)), ihi}) do
            pts[#pts + 1] = string.format("%.1f,%.1f", xs(i), ys(math.min(o.peak_gflops, i * c.gbs)))
        end
        out[#out + 1] = string.format("<polyline fill='none' stroke='#000' stroke-width='1.5' stroke-dasharray='%s' " ..
            "points='%s'><title>%s roof: %s GB/s, %s GFLOP/s peak</title></polyline>",
            CEILING_DASH[(ci - 1) % #CEILING_DASH + 1], table.concat(pts, " "), esc(c.name), fmt(c.gbs), fmt(o.peak_gflops))
    end
    out[#out + 1] = string.format("<text x='%d' y='%.1f' font-size='11' text-anchor='end'>peak %s GFLOP/s</text>",
        W - R - 4, ys(o.peak_gflops) - 4, fmt(o.peak_gflops))
    for _, p in ipairs(o.points) do
        local roof, roof_name, roof_gbs = "", p.roof, p.roof_gbs
        if not roof_gbs and p.bytes and o.ceilings then
            local c = ceiling_for(ceilings, p.bytes)
            roof_name, roof_gbs = c.name, c.gbs
        end
        if roof_name and roof_gbs then
            local bound = math.min(o.peak_gflops, p.intensity * roof_gbs)
            roof = string.format(", %s%% of the %s roof there", fmt(100 * p.gflops / bound), roof_name)
        end
        out[#out + 1] = string.format("<circle cx='%.1f' cy='%.1f' r='4' fill='%s' fill-opacity='0.8'><title>%s%s: %s FLOP/B, " ..
            "%s GFLOP/s%s</title></circle>", xs(p.intensity), ys(math.max(p.gflops, glo)), color(index[p.name]),
            p.kernel and (esc(p.kernel) .. " ") or "", esc(p.name), fmt(p.intensity), fmt(p.gflops), esc(roof))
    end
    legend(out, entries)
    return figure(out, o.caption)
end

-- ---- charts as data: drawn from results rows (the spec is saved with them) ----

local KINDS = {line = {"x", "y"}, bar = {"group", "value"}, roofline = {"flops", "bytes", "ns"}}
local COLUMN_FIELDS = {"x", "y", "lo", "hi", "series", "unstable", "group", "value", "flops", "bytes", "ns", "names"}
local TEXT_FIELDS = {"title", "caption", "x_label", "y_label"}

-- Checks a chart spec; returns nil, or what is wrong with it.
function M.check_spec(spec)
    if type(spec) ~= "table" then return "a chart must be a table {kind=, ...}" end
    local need = KINDS[spec.kind]
    if not need then return "kind must be line, bar or roofline, got " .. tostring(spec.kind) end
    for _, f in ipairs(need) do
        if type(spec[f]) ~= "string" then return string.format("a %s chart needs %s= (a column name)", spec.kind, f) end
    end
    for _, f in ipairs(COLUMN_FIELDS) do
        if spec[f] ~= nil and type(spec[f]) ~= "string" then return f .. " must be a column name" end
    end
    for _, f in ipairs(TEXT_FIELDS) do
        if spec[f] ~= nil and type(spec[f]) ~= "string" then return f .. " must be text" end
    end
    if spec.kind == "roofline" then
        if type(spec.peak_gflops) ~= "number" or spec.peak_gflops <= 0 then return "a roofline needs peak_gflops > 0" end
        if type(spec.ceilings) ~= "table" or #spec.ceilings == 0 then return "a roofline needs ceilings={{name=, gbs=}, ...}" end
        for _, c in ipairs(spec.ceilings) do
            if type(c) ~= "table" or type(c.name) ~= "string" or type(c.gbs) ~= "number" or c.gbs <= 0 or
                (c.max_bytes ~= nil and type(c.max_bytes) ~= "number") then
                return "each ceiling must be {name=text, gbs=number > 0[, max_bytes=number]}"
            end
        end
    end
    for _, e in ipairs(type(spec.extra) == "table" and spec.extra or {}) do
        if type(e) ~= "table" or type(e.name) ~= "string" or type(e.y) ~= "string" then
            return "extra series must be {name=text, y=column}"
        end
    end
    return nil
end

local function num(v) return type(v) == "number" and v == v and v > -math.huge and v < math.huge and v or nil end

local function distinct(rows, column)
    local out, seen = {}, {}
    for _, r in ipairs(rows) do
        local v = r[column]
        if v ~= nil and type(v) ~= "table" and not seen[tostring(v)] then seen[tostring(v)] = true; out[#out + 1] = v end
    end
    return out
end

-- render(spec, rows) -> a <figure>, or a paragraph saying why there is nothing to draw
function M.render(spec, rows)
    local bad = M.check_spec(spec)
    if bad then error("report: " .. bad, 2) end
    local o = {title = spec.title, caption = spec.caption, x_label = spec.x_label, y_label = spec.y_label,
        log_x = spec.log_x == true, log_y = spec.log_y == true, reference = num(spec.reference)}
    local groups = spec.series and distinct(rows, spec.series) or {"all"}
    local function of(r, g) return not spec.series or tostring(r[spec.series]) == tostring(g) end
    if spec.kind == "line" then
        o.series = {}
        for _, g in ipairs(groups) do
            local pts = {}
            for _, r in ipairs(rows) do
                local x, y = num(r[spec.x]), num(r[spec.y])
                if of(r, g) and x and y and (not o.log_x or x > 0) and (not o.log_y or y > 0) then
                    local lo, hi = spec.lo and num(r[spec.lo]), spec.hi and num(r[spec.hi])
                    pts[#pts + 1] = {x, y, lo, hi, spec.unstable and r[spec.unstable] == true}
                end
            end
            table.sort(pts, function(a, b) return a[1] < b[1] end)
            if #pts > 0 then o.series[#o.series + 1] = {name = tostring(g), points = pts} end
        end
        for _, e in ipairs(spec.extra or {}) do -- a column shared by the rows of one x (a peer's median)
            local pts, seen = {}, {}
            for _, r in ipairs(rows) do
                local x, y = num(r[spec.x]), num(r[e.y])
                if x and y and not seen[x] then seen[x] = true; pts[#pts + 1] = {x, y} end
            end
            table.sort(pts, function(a, b) return a[1] < b[1] end)
            if #pts > 0 then o.series[#o.series + 1] = {name = e.name, points = pts} end
        end
        if #o.series == 0 then return "<p>" .. esc(spec.title or "chart") .. ": no points to draw.</p>" end
        return M.line_chart(o)
    elseif spec.kind == "bar" then
        local gs = distinct(rows, spec.group)
        table.sort(gs, function(a, b)
            if type(a) == "number" and type(b) == "number" then return a < b end
            return tostring(a) < tostring(b)
        end)
        o.groups, o.series = {}, {}
        local at = {}
        for i, g in ipairs(gs) do o.groups[i], at[tostring(g)] = tostring(g), i end
        for _, g in ipairs(groups) do
            local s = {name = tostring(g), values = {}, lo = {}, hi = {}}
            for _, r in ipairs(rows) do
                local i = r[spec.group] ~= nil and at[tostring(r[spec.group])]
                if of(r, g) and i then
                    s.values[i] = num(r[spec.value])
                    s.lo[i], s.hi[i] = spec.lo and num(r[spec.lo]), spec.hi and num(r[spec.hi])
                end
            end
            o.series[#o.series + 1] = s
        end
        return M.bar_chart(o)
    end
    -- roofline: each row's kernels (arrays of flops, bytes and ns; names, space-separated)
    o.peak_gflops, o.ceilings, o.points = spec.peak_gflops, spec.ceilings, {}
    o.bandwidth_gbs = spec.ceilings[#spec.ceilings].gbs
    for _, r in ipairs(rows) do
        local f, b, t = r[spec.flops], r[spec.bytes], r[spec.ns]
        local names = {}
        for n in tostring(spec.names and r[spec.names] or ""):gmatch("%S+") do names[#names + 1] = n end
        if type(f) == "table" and type(b) == "table" and type(t) == "table" then
            for i = 1, #f do
                local fi, bi, ti = num(f[i]), num(b[i]), num(t[i])
                if fi and bi and ti and fi > 0 and bi > 0 and ti > 0 then
                    o.points[#o.points + 1] = {name = spec.series and tostring(r[spec.series]) or "kernels",
                        kernel = names[i], intensity = fi / bi, gflops = fi / ti, bytes = bi}
                end
            end
        end
    end
    if #o.points == 0 then return "<p>" .. esc(spec.title or "roofline") .. ": no kernels to draw.</p>" end
    return M.roofline(o)
end


-- ---- the parts of a report that come from profiles ----

-- kernel_work(events) -> flops, bytes, ns: three arrays, one entry per event with flops, bytes and a
-- duration (kernels), as a row keeps them for a roofline spec (flops=, bytes=, ns= name the columns)
function M.kernel_work(events)
    if type(events) ~= "table" then
        error("report.kernel_work: events must be an array of events, got " .. type(events), 2)
    end
    local flops, bytes, ns = {}, {}, {}
    for i, e in ipairs(events) do
        if type(e) ~= "table" then
            error(string.format("report.kernel_work: events[%d] is a %s, not an event", i, type(e)), 2)
        end
        if num(e.bytes) and num(e.flops) and num(e.dur_ns) and e.bytes > 0 and e.flops > 0 and e.dur_ns > 0 then
            flops[#flops + 1], bytes[#bytes + 1], ns[#ns + 1] = e.flops, e.bytes, e.dur_ns
        end
    end
    return flops, bytes, ns
end

-- findings_tables(points, {by=, at=}) -> the report's tables of findings (results' report.tables): one
-- per value of the field `by` (in the order they first come), titled "Findings: <value>", a row per
-- finding: the point's `at`, severity, rule, message (with a note where a figure about time is
-- unreliable). points: {{[by]=, [at]=, findings={{rule=, severity=, message=, unreliable=}, ...}}, ...}
function M.findings_tables(points, o)
    local function bad(fmt, ...) error("report.findings_tables: " .. string.format(fmt, ...), 3) end
    if type(points) ~= "table" then bad("points must be an array of {findings=, ...}, got %s", type(points)) end
    if type(o) ~= "table" or type(o.by) ~= "string" or type(o.at) ~= "string" then
        bad("options must be {by=field, at=field} (e.g. {by=\"mode\", at=\"tokens\"})")
    end
    local tables, table_of = {}, {}
    for i, p in ipairs(points) do
        if type(p) ~= "table" or type(p.findings) ~= "table" or p[o.by] == nil then
            bad("points[%d] must be {%s=, %s=, findings={...}}", i, o.by, o.at)
        end
        local key = tostring(p[o.by])
        local t = table_of[key]
        if not t then
            t = {title = "Findings: " .. key, header = {o.at, "severity", "rule", "finding"}, rows = {}}
            table_of[key], tables[#tables + 1] = t, t
        end
        for _, f in ipairs(p.findings) do
            local note = f.unreliable and " (the machine was busy: a figure about time is unreliable)" or ""
            t.rows[#t.rows + 1] = {p[o.at], f.severity, f.rule, tostring(f.message) .. note}
        end
    end
    return tables
end

return M
