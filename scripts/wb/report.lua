-- wb.report: small self-contained SVG charts for HTML reports (no scripts, no external files).
--   line_chart{title=, caption=, x_label=, y_label=, log_x=, log_y=,
--              series={{name=, points={{x, y[, lo, hi[, unstable]]}, ...}}}}
--       lo-hi (e.g. p10-p90) is drawn as an error bar; an unstable point is drawn hollow
--   bar_chart{title=, caption=, y_label=, groups={"1", "16"}, series={{name=, values={...}}}, reference=1}
--   roofline{title=, caption=, peak_gflops=, bandwidth_gbs= | ceilings={{name="L2", gbs=}, ...},
--            points={{name=, intensity=, gflops=[, kernel=, roof=, roof_gbs=]}}}
-- Each returns an HTML <figure> with the chart, axis titles, tooltips (<title>) on every point,
-- and a caption saying what it shows. Numbers are shown to 3 significant digits.

local M = {}

local W, H, L, R, T, B = 720, 380, 70, 170, 40, 50 -- size and margins
local COLORS = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"}

local function esc(s)
    return (tostring(s):gsub("[&<>\"]", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;"}))
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
    if v >= 1000 or v < 0.01 then return string.format("%.3g", v) end
    return string.format("%g", tonumber(string.format("%.3g", v)))
end

local function frame(o, out, xs, ys, xt, yt, log_x, log_y)
    out[#out + 1] = string.format("<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' " ..
        "font-family='sans-serif' font-size='12'><rect width='100%%' height='100%%' fill='white'/>", W, H)
    out[#out + 1] = string.format("<text x='%d' y='22' font-size='15' font-weight='bold'>%s</text>", L, esc(o.title or ""))
    for _, v in ipairs(yt) do
        local y = ys(v)
        out[#out + 1] = string.format("<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' stroke='#ddd'/>", L, W - R, y, y)
        out[#out + 1] = string.format("<text x='%d' y='%.1f' text-anchor='end'>%s</text>", L - 6, y + 4, fmt(v))
    end
    for _, v in ipairs(xt) do
        local x = xs(v)
        out[#out + 1] = string.format("<line x1='%.1f' x2='%.1f' y1='%d' y2='%d' stroke='#eee'/>", x, x, T, H - B)
        out[#out + 1] = string.format("<text x='%.1f' y='%d' text-anchor='middle'>%s</text>", x, H - B + 16, fmt(v))
    end
    out[#out + 1] = string.format("<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='#333'/>", L, T,
        W - L - R, H - T - B)
    out[#out + 1] = string.format("<text x='%d' y='%d' text-anchor='middle'>%s</text>", L + (W - L - R) // 2, H - 12,
        esc(o.x_label or "") .. (log_x and " (log)" or ""))
    out[#out + 1] = string.format("<text transform='translate(16,%d) rotate(-90)' text-anchor='middle'>%s</text>",
        T + (H - T - B) // 2, esc(o.y_label or "") .. (log_y and " (log)" or ""))
end

local function legend(out, names)
    for i, n in ipairs(names) do
        local y = T + 8 + (i - 1) * 18
        out[#out + 1] = string.format("<rect x='%d' y='%d' width='12' height='12' fill='%s'/>", W - R + 12, y,
            COLORS[(i - 1) % #COLORS + 1])
        out[#out + 1] = string.format("<text x='%d' y='%d'>%s</text>", W - R + 30, y + 10, esc(n))
    end
end

local function figure(out, caption)
    out[#out + 1] = "</svg>"
    return "<figure>" .. table.concat(out) .. "<figcaption>" .. esc(caption or "") .. "</figcaption></figure>"
end

-- every chart takes one table of options, with its series
local function check_options(o, name)
    if type(o) ~= "table" then error(string.format("report.%s: expected a table of options, got %s", name, type(o)), 3) end
    if o.series ~= nil and type(o.series) ~= "table" then
        error(string.format("report.%s: series must be an array, got %s", name, type(o.series)), 3)
    end
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
    if o.log_y then ylo, yhi = ylo / 1.3, yhi * 1.3 else ylo, yhi = math.min(0, ylo), yhi * 1.1 end
    local xs = scale(xlo, xhi, o.log_x, L + 10, W - R - 10)
    local ys = scale(ylo, yhi, o.log_y, H - B, T)
    local out = {}
    frame(o, out, xs, ys, ticks(xlo, xhi, o.log_x), ticks(ylo, yhi, o.log_y), o.log_x, o.log_y)
    local names = {}
    for i, s in ipairs(o.series) do
        names[i] = s.name
        local c = COLORS[(i - 1) % #COLORS + 1]
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
    legend(out, names)
    return figure(out, o.caption)
end

function M.bar_chart(o)
    check_options(o, "bar_chart")
    local yhi = o.reference or 0
    for _, s in ipairs(o.series) do for _, v in ipairs(s.values) do yhi = math.max(yhi, v) end end
    yhi = yhi * 1.15
    local ys = scale(0, yhi, false, H - B, T)
    local ng, ns = #o.groups, #o.series
    local gw = (W - L - R) / ng
    local bw = gw * 0.8 / ns
    local out = {}
    frame(o, out, function() return 0 end, ys, {}, ticks(0, yhi, false), false, false)
    for g, name in ipairs(o.groups) do
        out[#out + 1] = string.format("<text x='%.1f' y='%d' text-anchor='middle'>%s</text>", L + (g - 0.5) * gw,
            H - B + 16, esc(name))
        for si, s in ipairs(o.series) do
            local v = s.values[g]
            if v then
                local x = L + (g - 1) * gw + gw * 0.1 + (si - 1) * bw
                out[#out + 1] = string.format("<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'>" ..
                    "<title>%s, %s: %s</title></rect>", x, ys(v), bw - 1, ys(0) - ys(v), COLORS[(si - 1) % #COLORS + 1],
                    esc(s.name), esc(name), fmt(v))
            end
        end
    end
    if o.reference then
        local y = ys(o.reference)
        out[#out + 1] = string.format("<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' stroke='#000' stroke-dasharray='5,4'/>",
            L, W - R, y, y)
    end
    local names = {}
    for i, s in ipairs(o.series) do names[i] = s.name end
    legend(out, names)
    return figure(out, o.caption)
end

local CEILING_DASH = {"", "6,3", "2,3", "8,3,2,3"}

function M.roofline(o)
    check_options(o, "roofline")
    local ceilings = o.ceilings or {{name = "DRAM", gbs = o.bandwidth_gbs}}
    local top_bw = 0
    for _, c in ipairs(ceilings) do top_bw = math.max(top_bw, c.gbs) end
    local ilo, ihi, glo, ghi = 0.1, 100, 1, o.peak_gflops * 2
    for _, p in ipairs(o.points) do
        ilo, ihi = math.min(ilo, p.intensity / 2), math.max(ihi, p.intensity * 2)
        glo = math.min(glo, p.gflops / 2)
        ghi = math.max(ghi, p.gflops * 1.5)
    end
    local xs = scale(ilo, ihi, true, L + 10, W - R - 10)
    local ys = scale(glo, ghi, true, H - B, T)
    local out = {}
    frame(o, out, xs, ys, ticks(ilo, ihi, true), ticks(glo, ghi, true), true, true)
    for ci, c in ipairs(ceilings) do
        local ridge = o.peak_gflops / c.gbs
        local pts = {}
        for _, i in ipairs({ilo, math.max(ilo, math.min(ridge, ihi)), ihi}) do
            pts[#pts + 1] = string.format("%.1f,%.1f", xs(i), ys(math.min(o.peak_gflops, i * c.gbs)))
        end
        out[#out + 1] = string.format("<polyline fill='none' stroke='#000' stroke-width='%s' stroke-dasharray='%s' " ..
            "points='%s'><title>%s roof: %s GB/s, %s GFLOP/s peak</title></polyline>", ci == #ceilings and "2" or "1.2",
            CEILING_DASH[(ci - 1) % #CEILING_DASH + 1], table.concat(pts, " "), esc(c.name), fmt(c.gbs), fmt(o.peak_gflops))
        local lx = math.max(ilo * 1.5, math.min(ridge / 3, ihi))
        out[#out + 1] = string.format("<text x='%.1f' y='%.1f' font-size='11'>%s %s GB/s</text>", xs(lx) + 2,
            ys(math.min(o.peak_gflops, lx * c.gbs)) - 4, esc(c.name), fmt(c.gbs))
    end
    out[#out + 1] = string.format("<text x='%d' y='%.1f' font-size='11' text-anchor='end'>peak %s GFLOP/s</text>",
        W - R - 4, ys(o.peak_gflops) - 4, fmt(o.peak_gflops))
    local names, index = {}, {}
    for _, p in ipairs(o.points) do
        if not index[p.name] then names[#names + 1] = p.name; index[p.name] = #names end
        local roof = ""
        if p.roof and p.roof_gbs then
            local bound = math.min(o.peak_gflops, p.intensity * p.roof_gbs)
            roof = string.format(", %s%% of the %s roof there", fmt(100 * p.gflops / bound), p.roof)
        end
        out[#out + 1] = string.format("<circle cx='%.1f' cy='%.1f' r='4' fill='%s' fill-opacity='0.8'><title>%s%s: %s FLOP/B, " ..
            "%s GFLOP/s%s</title></circle>", xs(p.intensity), ys(math.max(p.gflops, glo)),
            COLORS[(index[p.name] - 1) % #COLORS + 1], p.kernel and (esc(p.kernel) .. " ") or "", esc(p.name),
            fmt(p.intensity), fmt(p.gflops), roof)
    end
    legend(out, names)
    return figure(out, o.caption)
end

return M
