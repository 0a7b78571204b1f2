-- wb.diff_html: `workbench diff --html FILE`: one step of each trace drawn as a timeline, side by
-- side, each aligned node linked to its counterpart, above the text summary. A static page: no
-- script, no network (a Content-Security-Policy forbids both), every string from a trace escaped.

local atomic = require("wb.atomic")

local M = {}

local ENTITIES = {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;"}
function M.escape(s)
    return (tostring(s):gsub("[&<>\"']", ENTITIES):gsub("%c", function(c) return string.format("\\%03d", c:byte()) end))
end
local esc = M.escape

local CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'; base-uri 'none'"

local STYLE = [[
body { font: 13px sans-serif; margin: 1em; }
.sides { display: flex; gap: 1em; }
.side { flex: 1; min-width: 0; border: 1px solid #ccc; padding: 0.5em; }
.row { position: relative; height: 18px; margin: 1px 0; }
.bar { position: absolute; top: 0; height: 16px; overflow: hidden; white-space: nowrap; font-size: 11px;
       line-height: 16px; padding-left: 2px; box-sizing: border-box; border-radius: 2px; text-decoration: none;
       color: #000; min-width: 2px; }
.aligned { background: #9cc3e6; } .removed { background: #f2a3a3; } .added { background: #a8dca8; }
.kernel { background-image: repeating-linear-gradient(45deg, transparent 0 4px, rgba(255,255,255,.5) 4px 8px); }
.bar:target { outline: 3px solid #e08000; }
pre { white-space: pre-wrap; font-size: 12px; }
]]

-- The rows of one step: each node as a bar at its offset in the step, indented by depth through
-- its own row; aligned nodes link to the same path on the other side.
local function timeline(model, k, other, side, ids, scale)
    local step = model.steps[k]
    if not step or not step.root then return "<p>(no such step)</p>" end
    local rows = {}
    local t0 = step.ts_ns
    local function visit(n, depth)
        for _, c in ipairs(n.children) do
            local node = model.nodes[c.path]
            local aligned = other.nodes[c.path] ~= nil
            local cls = aligned and "aligned" or (side == "a" and "removed" or "added")
            if c.e.cat == "kernel" or c.e.cat == "memcpy" or c.e.cat == "memset" then cls = cls .. " kernel" end
            local left = math.max(0, (c.e.ts_ns - t0) / scale * 100)
            local width = math.max(0.2, c.e.dur_ns / scale * 100)
            local title = string.format("%s: %.1f us%s", node.label, c.e.dur_ns / 1e3,
                aligned and "" or (side == "a" and " (only in A)" or " (only in B)"))
            local id = ids[c.path]
            local attrs = string.format('class="bar %s" style="left:%.3f%%;width:%.3f%%" title="%s"', cls, left,
                math.min(width, 100 - math.min(left, 99.8)), esc(title))
            if aligned then -- a path occurs once in a step (ranks tell repeats apart): the ids are unique
                attrs = attrs .. string.format(' id="%s%d" href="#%s%d"', side, id, side == "a" and "b" or "a", id)
            end
            rows[#rows + 1] = string.format('<div class="row"><a %s>%s%s</a></div>', attrs,
                string.rep("&#183;", math.min(depth, 8)), esc(node.label))
            visit(c, depth + 1)
        end
    end
    visit(step.root, 0)
    return table.concat(rows, "\n")
end

-- write(path, r, ma, mb[, step]) -> path: r is wb.diff's result for the models ma and mb. Draws
-- `step` of each side (1-based), else each side's median step by host time: a typical step, not
-- the first (which often carries first-call costs). A model from the store (wb.diff.model_of)
-- holds the tree of one step only, the one it was asked for: drawn_step.
function M.write(path, r, ma, mb, step)
    local function drawn(m) return m.drawn_step or math.min(step or require("wb.diff").median_step(m), #m.steps) end
    local ka, kb = drawn(ma), drawn(mb)
    local ids, n = {}, 0
    for _, p in ipairs(ma.order) do
        if mb.nodes[p] then n = n + 1; ids[p] = n end
    end
    local sa, sb = ma.steps[ka], mb.steps[kb]
    local scale = math.max(sa and sa.host_ns or 1, sb and sb.host_ns or 1, 1)
    local text = require("wb.diff_text").format(r, 140)
    for i, line in ipairs(text) do text[i] = esc(line) end
    local page = {
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">',
        string.format('<meta http-equiv="Content-Security-Policy" content="%s">', CSP),
        "<title>workbench diff</title><style>", STYLE, "</style></head><body>",
        string.format("<h1>diff: %s vs %s</h1>", esc(r.a.name), esc(r.b.name)),
        string.format("<p>Step %d of A and step %d of B (%s), on one time scale (%.1f us across). Blue: aligned " ..
            "(click to jump to the counterpart); red: only in A; green: only in B; striped: device kernels.</p>", ka, kb,
            step and "as asked with --step" or "each side's median step by host time; --step N picks one", scale / 1e3),
        '<div class="sides"><div class="side"><h2>A: ', esc(r.a.name), "</h2>\n", timeline(ma, ka, mb, "a", ids, scale),
        '</div><div class="side"><h2>B: ', esc(r.b.name), "</h2>\n", timeline(mb, kb, ma, "b", ids, scale),
        "</div></div>\n<h2>Summary</h2><pre>", table.concat(text, "\n"), "</pre></body></html>\n"}
    atomic.write("diff --html", path, table.concat(page), 2)
    return path
end

return M
