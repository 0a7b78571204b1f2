#!/bin/sh
# test_diff_browser.sh: `workbench diff --html` loaded in a real browser (Debian's chromium,
# headless): every step of both sides is drawn under a time axis whose labels do not overlap; each
# bar's text is its node's whole label (no depth marks eating it), ellipsized by the browser where
# the bar is narrower and whole in its title; no bar runs past the canvas; removed and added nodes
# are drawn; the page's policy stops a planted script (and the page without it runs it, so the check
# can fail); a screenshot is left in the build tree. Skipped (77) without chromium.
#   tests/test_diff_browser.sh WORKBENCH_EXE SCREENSHOT_DIR
set -eu
EXE=$1
SHOTS=$2
BROWSER=$(command -v chromium || command -v chromium-browser || true)
[ -n "$BROWSER" ] || { echo "chromium is not installed: skipped"; exit 77; }
dir=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM
fail() { echo "FAILED: $*"; exit 1; }

browse() { # browse MODE FILE: MODE --dump-dom or --screenshot=PATH
    timeout 90 "$BROWSER" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --disable-extensions \
        --user-data-dir="$dir/profile" --window-size=1300,1000 "$1" "file://$2" 2>"$dir/browser.err"
}

# eager against fused GeGLU MLP, 4 steps of two forwards, one range with a name longer than the canvas
cat >"$dir/traces.lua" <<'LUA'
local out, steps = arg[1], 4
-- (wider than the canvas whatever the range's time: a preempted x + x once made a short name fit)
local long = string.rep("a_range_whose_name_is_far_longer_than_its_bar_is_wide_", 5)
for _, impl in ipairs({"eager", "fused"}) do
    local mlp, x = wb.nn.GeGLUMLP(32, 64, {impl = impl}), wb.randn({8, 32})
    local p = wb.profiler.profile{activities = {"cpu", "device"}, record_shapes = true}
    p:start()
    for _ = 1, steps do
        for _ = 1, 2 do wb.profiler.range("mlp_fwd", function() return mlp(x) end) end
        wb.profiler.range(long, function() return x + x end)
        p:step()
    end
    p:stop()
    p:export_chrome_trace(out .. "/" .. impl .. ".json")
end
LUA
"$EXE" "$dir/traces.lua" "$dir" >"$dir/traces.log" 2>&1 ||
    { cat "$dir/traces.log"; fail "the traces were not written"; }
"$EXE" diff --html "$dir/diff.html" "$dir/eager.json" "$dir/fused.json" >"$dir/diff.txt" 2>&1 ||
    { cat "$dir/diff.txt"; fail "workbench diff --html failed"; }
page="$dir/diff.html"

# 1. the layout, measured by the browser on a copy of the page with a measuring script
cat >"$dir/measure.js" <<'JS'
<script>
var problems = [], canvas = document.querySelector('.canvas').getBoundingClientRect();
var steps = document.querySelectorAll('.step').length;
if (steps !== 8) problems.push(steps + ' step marks, not 8 (4 steps a side)');
var ticks = Array.prototype.map.call(document.querySelectorAll('.tick span'),
                                     function (t) { return t.getBoundingClientRect(); });
if (ticks.length < 3) problems.push('the time axis has ' + ticks.length + ' ticks');
for (var i = 1; i < ticks.length; i++)
  if (ticks[i].left < ticks[i - 1].right) problems.push('tick labels ' + i + ' overlap');
var cut = 0, classes = {};
document.querySelectorAll('a.bar').forEach(function (a) {
  var r = a.getBoundingClientRect(), name = a.title.replace(/: [0-9.]+ us, step [0-9]+.*$/, '');
  a.className.split(' ').forEach(function (c) { classes[c] = true; });
  if (a.textContent !== name) problems.push('bar text "' + a.textContent + '" is not its label "' + name + '"');
  if (getComputedStyle(a).textOverflow !== 'ellipsis') problems.push('"' + name + '" is cut without an ellipsis');
  if (r.right > canvas.right + 0.5) problems.push('"' + name + '" runs past the canvas');
  if (a.scrollWidth > a.clientWidth) cut++;
});
if (!classes.removed || !classes.added) problems.push('no removed or no added bar');
var long = document.querySelector('a.bar[title^="a_range_whose_name"]');
if (!long || long.scrollWidth <= long.clientWidth)
  problems.push('the long name was not ellipsized (the check would prove nothing)');
var out = document.createElement('pre');
out.id = 'layout';
out.textContent = problems.length ? problems.join('\n') : 'layout ok, ' + cut + ' labels ellipsized';
document.body.appendChild(out);
</script>
JS
{
    sed 's|<meta http-equiv="Content-Security-Policy"[^>]*>||; s|</body></html>||' "$page"
    cat "$dir/measure.js"
    echo "</body></html>"
} >"$dir/measured.html"
browse --dump-dom "$dir/measured.html" >"$dir/measured.dom" ||
    { cat "$dir/browser.err"; fail "chromium could not load the page"; }
grep -q '<pre id="layout">layout ok' "$dir/measured.dom" ||
    { sed -n '/<pre id="layout">/,/<\/pre>/p' "$dir/measured.dom"; fail "the timeline's layout (above)"; }

# 2. the policy: a script planted in the page does not run; without the policy it does
planted="<script>document.title='SCRIPT RAN'</script>"
sed "s|<h1>|$planted<h1>|" "$page" >"$dir/planted.html"
browse --dump-dom "$dir/planted.html" >"$dir/planted.dom" || fail "chromium could not load the planted page"
grep -q "<title>SCRIPT RAN</title>" "$dir/planted.dom" && fail "a script planted in the page ran despite its policy"
sed 's|<meta http-equiv="Content-Security-Policy"[^>]*>||' "$dir/planted.html" >"$dir/open.html"
browse --dump-dom "$dir/open.html" >"$dir/open.dom" || fail "chromium could not load the page without its policy"
grep -q "<title>SCRIPT RAN</title>" "$dir/open.dom" ||
    fail "the control (the planted page without its policy) did not run the script: the check above proves nothing"

# 3. a screenshot to look at
mkdir -p "$SHOTS"
browse --screenshot="$SHOTS/diff.png" "$page" >/dev/null || fail "chromium could not take a screenshot"
[ -s "$SHOTS/diff.png" ] || fail "the screenshot is empty"
layout=$(sed -n 's|.*<pre id="layout">\([^<]*\)</pre>.*|\1|p' "$dir/measured.dom")
echo "diff --html in chromium: $layout; no script runs; screenshot $SHOTS/diff.png"
