#!/bin/sh
# test_report_browser.sh: the main job's HTML report loaded in a real browser (Debian's chromium,
# headless): it renders its three charts; the page's policy stops a script planted in it (and the
# same page without the policy runs it, so the check can fail); in every chart no two labels
# overlap and no label runs past the chart's edge (measured by the browser's layout, on a copy of
# the page with a measuring script); a screenshot is left in the build tree. Skipped (77) where
# chromium is not installed (scripts/bootstrap.sh --test installs it).
#   tests/test_report_browser.sh WORKBENCH_EXE SOURCE_DIR SCREENSHOT_DIR
set -eu
EXE=$1
SRC=$2
SHOTS=$3
BROWSER=$(command -v chromium || command -v chromium-browser || true)
[ -n "$BROWSER" ] || { echo "chromium is not installed: skipped"; exit 77; }
dir=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM
fail() { echo "FAILED: $*"; exit 1; }

# headless, offline, no profile of the user's: nothing but the file is loaded
browse() { # browse MODE FILE: MODE --dump-dom or --screenshot=PATH
    timeout 90 "$BROWSER" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --disable-extensions \
        --user-data-dir="$dir/profile" --window-size=1200,3200 "$1" "file://$2" 2>"$dir/browser.err"
}

peer="'$EXE' '$SRC/tests/fake_peer.lua'"
WB_FAKE_PEER_LOG="$dir/peer.log" "$EXE" "$SRC/experiments/mlp_sweep.lua" --tokens 1,4 --dim 32 --hidden 64 --iters 2 \
    --modes eager,fused,dual,compiled --rounds 2 --max-rounds 2 --trace-tokens 4 --peer "$peer" --out "$dir/run" >"$dir/run.log" 2>&1 ||
    { cat "$dir/run.log"; fail "mlp_sweep did not run"; }
report="$dir/run/mlp_sweep.html"

# 1. it renders: three charts, the peer's legend whole
browse --dump-dom "$report" >"$dir/dom.html" || { cat "$dir/browser.err"; fail "chromium could not load the report"; }
[ "$(grep -o '<figure>' "$dir/dom.html" | wc -l)" -eq 3 ] || fail "the rendered report does not have 3 charts"
grep -q '>PyTorch fake-1.0 (BLAS generic)</text>' "$dir/dom.html" || fail "the peer's legend is missing or cut"

# 2. the policy: a script planted in the page does not run; without the policy it does
planted="<script>document.title='SCRIPT RAN'</script><img src='http://127.0.0.1:9/x' onerror=\"document.title='SCRIPT RAN'\">"
sed "s|<h1>|$planted<h1>|" "$report" >"$dir/planted.html"
browse --dump-dom "$dir/planted.html" >"$dir/planted.dom" || fail "chromium could not load the planted page"
grep -q "<title>SCRIPT RAN</title>" "$dir/planted.dom" && fail "a script planted in the report ran despite its policy"
sed "s|<meta http-equiv='Content-Security-Policy'[^>]*>||" "$dir/planted.html" >"$dir/open.html"
browse --dump-dom "$dir/open.html" >"$dir/open.dom" || fail "chromium could not load the page without its policy"
grep -q "<title>SCRIPT RAN</title>" "$dir/open.dom" ||
    fail "the control (the planted page without its policy) did not run the script: the check above proves nothing"

# 3. the layout, measured by the browser: labels that overlap, or that run past the chart's edge; the
# results table wider than the page, or a header broken inside a word
cat >"$dir/measure.js" <<'JS'
<script>
var problems = [];
document.querySelectorAll('svg').forEach(function (svg, n) {
  var width = (svg.viewBox.baseVal && svg.viewBox.baseVal.width) || svg.width.baseVal.value, boxes = [];
  svg.querySelectorAll('text').forEach(function (t) {
    if (t.getAttribute('transform')) return; // the rotated y-axis title stands alone in its margin
    var b = t.getBBox();
    if (b.width === 0) return;
    if (b.x < 0 || b.x + b.width > width + 0.5) problems.push('chart ' + (n + 1) + ': "' + t.textContent + '" runs past the edge');
    boxes.push({t: t.textContent, x: b.x, y: b.y, w: b.width, h: b.height});
  });
  for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
    var a = boxes[i], c = boxes[j];
    if (a.x < c.x + c.w - 0.5 && c.x < a.x + a.w - 0.5 && a.y < c.y + c.h - 0.5 && c.y < a.y + a.h - 0.5)
      problems.push('chart ' + (n + 1) + ': "' + a.t + '" overlaps "' + c.t + '"');
  }
});
// the results table fits the page (no sideways scroll) and no header is broken inside a word: each
// piece of a header (its name broken only after an underscore, <wbr>) stays on one line
document.querySelectorAll('table.results').forEach(function (table) {
  var box = table.parentElement;
  if (box.scrollWidth > box.clientWidth + 1)
    problems.push('the results table is ' + box.scrollWidth + ' px wide in ' + box.clientWidth + ' px: it scrolls');
  table.querySelectorAll('th').forEach(function (th) {
    th.childNodes.forEach(function (node) {
      if (node.nodeType !== 3 || !node.textContent.trim()) return;
      var range = document.createRange();
      range.selectNodeContents(node);
      var lines = {};
      Array.prototype.forEach.call(range.getClientRects(), function (r) { if (r.width > 0) lines[Math.round(r.top)] = 1; });
      if (Object.keys(lines).length > 1 && node.textContent.trim().indexOf(' ') < 0)
        problems.push('the header "' + th.textContent + '" is broken inside "' + node.textContent + '"');
    });
  });
});
var out = document.createElement('pre');
out.id = 'layout';
out.textContent = problems.length ? problems.join('\n') : 'layout ok';
document.body.appendChild(out);
</script>
JS
{
    sed "s|<meta http-equiv='Content-Security-Policy'[^>]*>||; s|</body></html>||" "$report"
    cat "$dir/measure.js"
    echo "</body></html>"
} >"$dir/measured.html"
browse --dump-dom "$dir/measured.html" >"$dir/measured.dom" || fail "chromium could not load the measured page"
grep -q '<pre id="layout">layout ok</pre>' "$dir/measured.dom" ||
    { sed -n '/<pre id="layout">/,/<\/pre>/p' "$dir/measured.dom"; fail "labels overlap or are cut, or the table is too wide (above)"; }

# 4. a screenshot to look at
mkdir -p "$SHOTS"
browse --screenshot="$SHOTS/mlp_sweep_report.png" "$report" >/dev/null || fail "chromium could not take a screenshot"
[ -s "$SHOTS/mlp_sweep_report.png" ] || fail "the screenshot is empty"
echo "report in chromium: 3 charts, no script runs, no label overlaps or is cut; screenshot $SHOTS/mlp_sweep_report.png"
