-- wb.diff_html: `workbench diff --html FILE`: the steps of both traces drawn as timelines on one
-- time axis, A above B, each aligned node linked to its counterpart, above the text summary. A
-- static page: no script, no network (a Content-Security-Policy forbids both), every string from a
-- trace escaped.

local atomic = require("wb.atomic")

local M = {MAX_BARS = 20000} -- a side's bars at most: past that the page is too heavy to scroll

local ENTITIES = {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;"}
function M.escape(s)
    return (tostring(s):gsub("[&<>\"']", ENTITIES):gsub("%c", function(c) return string.format("\\%03d", c:byte()) end))
end
local esc = M.escape

local CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'; base-uri 'none'"

local ROW = 18 -- px per nesting level
local STYLE = [[
body { font: 13px sans-serif; margin: 1em; }
.scroll { overflow-x: auto; border: 1px solid #ccc; }
.canvas { position: relative; padding: 0 0 0.5em 0; }
.canvas h2 { position: sticky; left: 0; display: inline-block; margin: 0.6em 0.5em 0.2em; font-size: 14px; }
.axis { position: relative; height: 20px; border-bottom: 1px solid #888; }
.tick { position: absolute; bottom: 0; height: 6px; border-left: 1px solid #888; }
.tick span { position: absolute; bottom: 7px; left: 2px; font-size: 11px; color: #444; white-space: nowrap; }
.lane { position: relative; border-top: 1px dotted #bbb; }
.step { position: absolute; top: 0; bottom: 0; border-left: 1px dashed #999; font-size: 10px; color: #666;
        padding-left: 2px; white-space: nowrap; overflow: hidden; }
.bar { position: absolute; display: block; height: 16px; overflow: hidden; white-space: nowrap;
       text-overflow: ellipsis; font-size: 11px; line-height: 16px; padding: 0 1px; box-sizing: border-box;
       border-radius: 2px; text-decoration: none; color: #000; min-width: 2px; }
.aligned { background: #9cc3e6; } .removed { background: #f2a3a3; } .added { background: #a8dca8; }
.kernel { background-image: repeating-linear-gradient(45deg, transparent 0 4px, rgba(255,255,255,.5) 4px 8px); }
.bar:target { outline: 3px solid #e08000; }
pre { white-space: pre-wrap; font-size: 12px; }
]]

local function ns_text(v)
    if v >= 1e6 then return string.format("%.4g ms", v / 1e6) end
    if v >= 1e3 then return string.format("%.4g us", v / 1e3) end
    return string.format("%.4g ns", v)
end

-- The steps of a model that are drawn: `step` alone when asked (or the one a model from the store
-- kept), else every step that has its tree, up to MAX_BARS bars -> list of step indices, and
-- whether some were left out.
local function drawn_steps(m, step)
    if step or m.drawn_step then
        local k = math.min(step or m.drawn_step, #m.steps)
        return {k}, false
    end
    local list, bars = {}, 0
    local function count(n) local c = #n.children; for _, x in ipairs(n.children) do c = c + count(x) end; return c end
    for k, st in ipairs(m.steps) do
        if st.root then
            local c = count(st.root)
            if #list > 0 and bars + c > M.MAX_BARS then return list, true end
            bars = bars + c
            list[#list + 1] = k
        end
    end
    return list, false
end

-- The time a side's drawn steps cover, from the first one's start.
local function span_of(m, steps)
    local t0 = m.steps[steps[1]].ts_ns
    local last = m.steps[steps[#steps]]
    return t0, math.max(last.ts_ns + last.host_ns - t0, 1)
end

-- Ticks every 1, 2 or 5 x 10^k ns, about one per 120 px of a canvas `px` wide.
local function axis(scale, px)
    local want = scale / math.max(px / 120, 1)
    local step = 10 ^ math.floor(math.log(want, 10))
    for _, f in ipairs({1, 2, 5, 10}) do
        if step * f >= want then step = step * f; break end
    end
    local out = {'<div class="axis">'}
    for t = 0, scale, step do
        out[#out + 1] = string.format('<div class="tick" style="left:%.1fpx"><span>%s</span></div>', t / scale * px,
            t == 0 and "0" or ns_text(t))
    end
    out[#out + 1] = "</div>"
    return table.concat(out)
end

-- One side's lane on a canvas `px` wide: its steps' boundaries and every occurrence as a bar, one
-- row per nesting level (a flame chart), at least 2 px wide and inside the canvas; aligned nodes
-- link to the same occurrence (by count) of the path on the other side (drawn_other: how many of
-- each path the other side draws).
local function lane(model, steps, other, side, ids, scale, drawn_other, px)
    local t0 = model.steps[steps[1]].ts_ns
    local bars, deepest, seen = {}, 0, {}
    for _, k in ipairs(steps) do
        local st = model.steps[k]
        bars[#bars + 1] = string.format('<div class="step" style="left:%.1fpx">step %d</div>',
            (st.ts_ns - t0) / scale * px, k)
        local function visit(n, depth)
            for _, c in ipairs(n.children) do
                local node = model.nodes[c.path]
                local aligned = other.nodes[c.path] ~= nil
                local cls = aligned and "aligned" or (side == "a" and "removed" or "added")
                if c.e.cat == "kernel" or c.e.cat == "memcpy" or c.e.cat == "memset" then cls = cls .. " kernel" end
                local width = math.min(math.max(2, c.e.dur_ns / scale * px), px)
                local left = math.min(math.max(0, (c.e.ts_ns - t0) / scale * px), px - width)
                local title = string.format("%s: %.1f us, step %d%s", node.label, c.e.dur_ns / 1e3, k,
                    aligned and "" or (side == "a" and " (only in A)" or " (only in B)"))
                local attrs = string.format('class="bar %s" style="left:%.1fpx;width:%.1fpx;top:%dpx" title="%s"', cls,
                    left, width, (depth + 1) * ROW, esc(title))
                if aligned then -- the i-th drawn occurrence of a path links to the other side's i-th (or first)
                    local i = (seen[c.path] or 0) + 1
                    seen[c.path] = i
                    local j = i <= (drawn_other[c.path] or 0) and i or 1
                    attrs = attrs .. string.format(' id="%s%d_%d" href="#%s%d_%d"', side, ids[c.path], i,
                        side == "a" and "b" or "a", ids[c.path], j)
                end
                bars[#bars + 1] = string.format("<a %s>%s</a>", attrs, esc(node.label))
                deepest = math.max(deepest, depth + 1)
                visit(c, depth + 1)
            end
        end
        if st.root then visit(st.root, 0) end
    end
    return string.format('<div class="lane" style="height:%dpx">%s</div>', (deepest + 1) * ROW + 2,
        table.concat(bars, "\n"))
end

-- How many times each path is drawn on a side.
local function drawn_counts(model, steps)
    local c = {}
    local function visit(n)
        for _, x in ipairs(n.children) do c[x.path] = (c[x.path] or 0) + 1; visit(x) end
    end
    for _, k in ipairs(steps) do if model.steps[k].root then visit(model.steps[k].root) end end
    return c
end

-- write(path, r, ma, mb[, step]) -> path: r is wb.diff's result for the models ma and mb. Draws
-- every step of each side that its model keeps a tree of (wb.diff.model_of with draw = "all"), or `step` (1-based) of each alone, on one time axis: the longer side's span
-- fills the canvas, which grows with the steps drawn and scrolls sideways.
function M.write(path, r, ma, mb, step)
    local sa, cut_a = drawn_steps(ma, step)
    local sb, cut_b = drawn_steps(mb, step)
    for _, x in ipairs({{ma, sa, "A"}, {mb, sb, "B"}}) do
        if not x[1].steps[x[2][1]] or not x[1].steps[x[2][1]].root then
            error(string.format("%s's model keeps no step's tree to draw", x[3]), 2)
        end
    end
    local ids, n = {}, 0
    for _, p in ipairs(ma.order) do
        if mb.nodes[p] then n = n + 1; ids[p] = n end
    end
    local _, span_a = span_of(ma, sa)
    local _, span_b = span_of(mb, sb)
    local scale = math.max(span_a, span_b)
    local px = math.min(math.max(1100, 400 * math.max(#sa, #sb)), 60000)
    local text = require("wb.diff_text").format(r, 120)
    for i, line in ipairs(text) do text[i] = esc(line) end
    local function which(steps, m, cut)
        if #steps == 1 then return string.format("step %d of %d", steps[1], #m.steps) end
        return string.format("steps %d-%d of %d%s", steps[1], steps[#steps], #m.steps, cut and
            string.format(" (a side draws %d bars at most; --step N draws one)", M.MAX_BARS) or "")
    end
    local page = {
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">',
        string.format('<meta http-equiv="Content-Security-Policy" content="%s">', CSP),
        "<title>workbench diff</title><style>", STYLE, "</style></head><body>",
        string.format("<h1>diff: %s vs %s</h1>", esc(r.a.name), esc(r.b.name)),
        string.format("<p>A: %s; B: %s (%s), on one time axis (%s across, from each side's first step drawn). Each " ..
            "row is a nesting level. Blue: aligned (click to jump to the counterpart); red: only in A; green: only " ..
            "in B; striped: device kernels. A bar's title gives its whole name and time.</p>", which(sa, ma, cut_a),
            which(sb, mb, cut_b), step and "as asked with --step" or "every step; --step N draws one", ns_text(scale)),
        string.format('<div class="scroll"><div class="canvas" style="width:%dpx">', px), axis(scale, px),
        "<h2>A: ", esc(r.a.name), "</h2>\n", lane(ma, sa, mb, "a", ids, scale, drawn_counts(mb, sb), px),
        "\n<h2>B: ", esc(r.b.name), "</h2>\n", lane(mb, sb, ma, "b", ids, scale, drawn_counts(ma, sa), px),
        "</div></div>\n<h2>Summary</h2><pre>", table.concat(text, "\n"), "</pre></body></html>\n"}
    atomic.write("diff --html", path, table.concat(page), 2)
    return path
end

return M
