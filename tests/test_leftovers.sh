#!/bin/sh
# test_leftovers.sh SOURCE_DIR TEST_TMPDIR: the suite left no temporary files behind. Every test
# ran with TMPDIR=TEST_TMPDIR (tests/CMakeLists.txt), so what a test made there (tests/scratch.lua,
# mktemp) and did not remove is still there when this runs, after all of them. And no test calls
# os.tmpname: it ignores TMPDIR, so this check could not see the empty /tmp/lua_XXXXXX each call
# leaves. (Scripts under test that the sandbox must refuse hold it in quotes, as text: allowed.)
src=$1 tmp=$2
status=0
if [ ! -d "$tmp" ]; then
    echo "FAIL: no $tmp: the fixture that makes it (scratch_prepare) did not run"
    exit 1
fi
if [ -n "$(ls -A "$tmp")" ]; then
    echo "FAIL: the tests left these in their TMPDIR ($tmp):"
    ls -lA "$tmp"
    status=1
fi
calls=$(grep -rnE "(^|[^'\"])os\.tmpname *\(" "$src/tests")
if [ -n "$calls" ]; then
    echo "FAIL: os.tmpname in the tests (each call leaves a /tmp/lua_XXXXXX behind): use tests/scratch.lua"
    echo "$calls"
    status=1
fi
[ $status -eq 0 ] && echo "ok: nothing left in $tmp, no os.tmpname in $src/tests"
exit $status
