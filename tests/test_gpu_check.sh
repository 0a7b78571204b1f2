#!/bin/sh
# test_gpu_check.sh SOURCE_DIR BUILD_DIR: scripts/gpu_check.sh on a machine where cuda is not
# available must stop at once, non-zero, with the reason last, and run no test (a check that
# skips every GPU test must not pass). Skipped (77) where cuda is available.
src=$1 build=$2
out="$build/out/gpu_check_test"
rm -rf "$out"
if "$build/workbench" -e 'os.exit(wb.cuda.is_available() and 0 or 1)'; then
    echo "cuda is available here: nothing to test"
    exit 77
fi
log=$(OUT="$out" WB_GPU_BUILD="$build" sh "$src/scripts/gpu_check.sh" 2>&1)
rc=$?
echo "$log"
fail() { echo "test_gpu_check: $1"; exit 1; }
[ $rc -ne 0 ] || fail "gpu_check.sh exited 0 without a GPU"
echo "$log" | tail -3 | grep -q "^cuda .*device 'cuda' is not available: " || fail "the reason is not in the table's last lines"
[ -e "$out/test_cuda.log" ] && fail "it ran the tests although cuda is not available"
[ -s "$out/ldd_plugin.txt" ] || fail "no ldd of the plugin in \$OUT"
[ -s "$out/libs.txt" ] || fail "no libs.txt in \$OUT"
grep -q "^libcupti.so.13 " "$out/libs.txt" || fail "libs.txt does not say where libcupti.so.13 is"
echo "test_gpu_check: ok"
