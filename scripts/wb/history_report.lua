-- wb.history_report: `workbench history report --html FILE`: one page with a chart per series
-- (the runs' medians with their 95% intervals, confirmed changes marked, the runs after a machine
-- change shaded), drawn as inline SVG by the page's own script from the data embedded in it.
-- The page fetches nothing: a Content-Security-Policy allows only its own nonce'd script and style.

local cjson = require("cjson")
local history = require("wb.history")
local atomic = require("wb.atomic")

local M = {}

local function esc(s)
    return (tostring(s):gsub("[&<>\"']", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
        ["'"] = "&#39;"}))
end

-- A nonce for the policy: 16 random bytes from the kernel, as hex.
local function nonce()
    local f = io.open("/dev/urandom", "rb")
    local bytes = f and f:read(16)
    if f then f:close() end
    if not bytes or #bytes < 16 then -- no /dev/urandom: the clock and the address of a table
        bytes = tostring(os.time()) .. tostring({}) .. tostring(os.clock())
    end
    return (bytes:gsub(".", function(c) return string.format("%02x", c:byte()) end)):sub(1, 32)
end

local STYLE = [[
body{font-family:sans-serif;margin:2em;max-width:1000px;color:#222}
figure{margin:1.5em 0;border-top:1px solid #ddd;padding-top:.5em}
figcaption{font-weight:bold;margin-bottom:.3em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#eee}
.regression{color:#b00}.improvement{color:#070}.machine{color:#555}
svg.chart text{font-size:11px;fill:#444}
]]

-- Draws every figure's chart from DATA: the x axis is the run (in date order), the y axis the
-- median time; error bars are the 95% interval of each run's median.
local SCRIPT = [[
(function () {
  var NS = "http://www.w3.org/2000/svg";
  function el(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(v) { return Number(v).toPrecision(4); }
  function list(a) { return Array.isArray(a) ? a : []; } // an empty Lua table arrives as {}
  list(DATA.series).forEach(function (s, i) {
    var holder = document.getElementById("chart-" + i);
    var W = 860, H = 230, L = 100, R = 20, T = 20, B = 30, n = s.points.length;
    var lo = Infinity, hi = -Infinity;
    s.points.forEach(function (p) {
      lo = Math.min(lo, p.lo != null ? p.lo : p.median);
      hi = Math.max(hi, p.hi != null ? p.hi : p.median);
    });
    var pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.05 || 1;
    lo -= pad; hi += pad;
    var x = function (k) { return L + (n > 1 ? k * (W - L - R) / (n - 1) : (W - L - R) / 2); };
    var y = function (v) { return T + (hi - v) * (H - T - B) / (hi - lo); };
    var svg = el("svg", {"class": "chart", width: W, height: H, viewBox: "0 0 " + W + " " + H,
                         "data-runs": n, role: "img", "aria-label": s.name}, holder);
    list(s.blocks).forEach(function (b, j) {
      if (j % 2 === 1) {
        var x0 = b.from === 0 ? L : (x(b.from - 1) + x(b.from)) / 2;
        var x1 = b.to === n - 1 ? W - R : (x(b.to) + x(b.to + 1)) / 2;
        var r = el("rect", {"class": "machine-block", x: x0, y: T, width: x1 - x0, height: H - T - B,
                            fill: "#e8e8f0"}, svg);
        el("title", {}, r).textContent = "machine: " + b.machine;
      }
    });
    el("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#999"}, svg);
    el("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999"}, svg);
    [lo + pad, hi - pad].forEach(function (v) {
      var t = el("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, svg);
      t.textContent = fmt(v) + " " + s.unit;
    });
    var t0 = el("text", {x: L, y: H - 10}, svg); t0.textContent = s.points[0].date.slice(0, 10);
    var t1 = el("text", {x: W - R, y: H - 10, "text-anchor": "end"}, svg);
    t1.textContent = s.points[n - 1].date.slice(0, 10) + " (" + n + " runs)";
    list(s.events).forEach(function (e) {
      var xe = (x(e.index - 1) + x(e.index)) / 2;
      var color = e.kind === "machine" ? "#666" : (e.verdict === "SLOWER" ? "#c00" : "#080");
      var line = el("line", {"class": "change " + (e.kind === "machine" ? "machine" : e.verdict.toLowerCase()),
                             x1: xe, y1: T - 8, x2: xe, y2: H - B, stroke: color, "stroke-dasharray": "4 3",
                             "data-run": e.index}, svg);
      el("title", {}, line).textContent = e.label;
      var lt = el("text", {x: xe + 3, y: T - 8, fill: color}, svg);
      lt.textContent = e.kind === "machine" ? "machine changed" : (e.ratio >= 1 ? "+" : "") +
        ((e.ratio - 1) * 100).toFixed(1) + "%";
    });
    var path = s.points.map(function (p, k) { return x(k) + "," + y(p.median); }).join(" ");
    el("polyline", {points: path, fill: "none", stroke: "#36c", "stroke-width": 1.5}, svg);
    s.points.forEach(function (p, k) {
      if (p.lo != null && p.hi != null)
        el("line", {"class": "interval", x1: x(k), y1: y(p.lo), x2: x(k), y2: y(p.hi), stroke: "#36c"}, svg);
      var c = el("circle", {"class": "run", cx: x(k), cy: y(p.median), r: 3.5, fill: "#36c"}, svg);
      el("title", {}, c).textContent = p.date + ", commit " + p.commit + ": median " + fmt(p.median) + " " + s.unit +
        (p.lo != null ? " (95% interval " + fmt(p.lo) + " .. " + fmt(p.hi) + ")" : "");
    });
    holder.setAttribute("data-drawn", "yes");
  });
})();
]]

-- The data the script draws: per series its points, events and machine blocks (0-based runs).
local function series_data(item)
    local s, events = item.series, item.events
    local points, blocks = {}, {}
    for k, p in ipairs(s.points) do
        points[k] = {median = p.median, lo = p.lo, hi = p.hi, date = p.date, commit = p.commit_id or "?"}
        local b = blocks[#blocks]
        if not b or b.machine ~= p.machine then
            blocks[#blocks + 1] = {from = k - 1, to = k - 1, machine = p.machine}
        else
            b.to = k - 1
        end
    end
    local ev = {}
    for i, e in ipairs(events) do
        local p = s.points[e.index]
        ev[i] = {kind = e.kind, index = e.index - 1, verdict = e.verdict, ratio = e.ratio or 1,
            label = e.kind == "machine" and string.format("machine changed at %s: %s -> %s", p.date, e.from, e.to) or
                string.format("%s at %s (commit %s): %.4g -> %.4g, ratio %.3f, p %.2g", e.verdict == "SLOWER" and
                    "regression" or "improvement", p.date, tostring(p.commit_id or "?"), e.before, e.after, e.ratio,
                    e.p or 1)}
    end
    return {name = history.series_name(s), unit = s.metric:match("_(%a+)$") or "", points = points, events = ev,
        blocks = blocks}
end

-- Writes the page for list = {{series=, events=}, ...} (wb.changepoints.detect's events).
function M.write(path, list, db_path)
    local n = nonce()
    local data, rows = {series = {}}, {}
    for i, item in ipairs(list) do
        data.series[i] = series_data(item)
        for _, e in ipairs(item.events) do
            local p = item.series.points[e.index]
            local kind = e.kind == "machine" and "machine" or (e.verdict == "SLOWER" and "regression" or "improvement")
            rows[#rows + 1] = string.format("<tr class='%s'><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
                kind, esc(data.series[i].name), kind == "machine" and "machine changed" or kind, esc(p.date),
                esc(p.commit_id or "?"), e.kind == "machine" and esc(e.from .. " -> " .. e.to) or
                    string.format("%.4g -> %.4g, ratio %.3f, p %.2g", e.before, e.after, e.ratio, e.p or 1))
        end
    end
    -- JSON inside a script element: "<" never appears raw, so no "</script>" can end it early
    local json = cjson.encode(data):gsub("<", "\\u003c")
    local h = {"<!doctype html><html><head><meta charset='utf-8'>",
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; script-src 'nonce-", n,
        "'; style-src 'nonce-", n, "'\">",
        "<title>workbench history</title><style nonce='", n, "'>", STYLE, "</style></head><body>",
        "<h1>workbench history</h1><p>", #list, " series from ", esc(db_path), ", generated ",
        os.date("!%Y-%m-%dT%H:%M:%SZ"), ". Each chart: the median of every run (in date order) with its 95% ",
        "interval; dashed lines mark changes confirmed on the runs (red slower, green faster, grey a new ",
        "machine); the runs on a different machine are shaded.</p>",
        "<noscript><p>The charts are drawn by this page's script: allow scripts to see them.</p></noscript>",
        "<h2>Changes</h2>"}
    if #rows == 0 then
        h[#h + 1] = "<p>none</p>"
    else
        h[#h + 1] = "<table><tr><th>series</th><th>change</th><th>from run of</th><th>commit</th><th>what</th></tr>"
        h[#h + 1] = table.concat(rows)
        h[#h + 1] = "</table>"
    end
    h[#h + 1] = "<h2>Series</h2>"
    for i, s in ipairs(data.series) do
        h[#h + 1] = string.format("<figure><figcaption>%s</figcaption><div class='chart-holder' id='chart-%d'></div>" ..
            "</figure>", esc(s.name), i - 1)
    end
    h[#h + 1] = "<script nonce='" .. n .. "'>var DATA = " .. json .. ";\n" .. SCRIPT .. "</script></body></html>\n"
    atomic.write("history report", path, table.concat(h))
end

return M
