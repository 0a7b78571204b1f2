#!/bin/sh
# test_bootstrap.sh: `bootstrap.sh --test` runs every half (Release tests, sanitizer tests, the
# fuzzer) even when one before it fails, then fails naming each half that failed. Run on a copy of
# the script in a scratch tree, with stand-ins for apt, dpkg, cmake, ctest and the executables
# that record what ran (no build, no install).
# Usage: test_bootstrap.sh SOURCE_DIR
set -u
src=$1
root=$(mktemp -d "${TMPDIR:-/tmp}/bootstrap.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/tree/scripts" "$root/tree/tests" "$root/tree/build" "$root/tree/build-asan/lua-src/src" "$root/bin"
cp "$src/scripts/bootstrap.sh" "$root/tree/scripts/"
log=$root/ran.log
stub() { # stub NAME BODY: a command that logs its arguments, then runs BODY
    printf '#!/bin/sh\necho "%s $*" >>"%s"\n%s\n' "$1" "$log" "$2" >"$3"
    chmod +x "$3"
}
stub check_layers "exit 0" "$root/tree/scripts/check_layers.sh"
stub dpkg-query 'case "$*" in *source:Version*) echo 5.4.4-test ;; *) echo "install ok installed" ;; esac' "$root/bin/dpkg-query"
stub cmake "exit 0" "$root/bin/cmake"
# the Release tests fail, the sanitizer tests pass
stub ctest 'case "$*" in *"--test-dir build "*) exit 8 ;; esac; exit 0' "$root/bin/ctest"
stub workbench-release "echo machine: stand-in" "$root/tree/build/workbench"
stub workbench-asan 'case "$*" in *--version*) echo "stand-in" ;; esac; exit 0' "$root/tree/build-asan/workbench"
touch "$root/tree/build-asan/lua-src/src/lapi.c"
echo 5.4.4-test >"$root/tree/build-asan/lua-src/.wb-version"

out=$(PATH="$root/bin:$PATH" sh "$root/tree/scripts/bootstrap.sh" --test 2>&1)
rc=$?
fail() {
    echo "FAIL: $1" >&2
    echo "--- output:" >&2
    echo "$out" >&2
    echo "--- ran:" >&2
    cat "$log" >&2
    exit 1
}
[ "$rc" -ne 0 ] || fail "a failing Release test must fail the run (exit $rc)"
grep -q "^ctest --test-dir build-asan" "$log" || fail "the sanitizer tests did not run after the Release tests failed"
grep -q "^workbench-asan --sandbox .*fuzz_api.lua" "$log" || fail "the fuzzer did not run after the Release tests failed"
grep -q "^workbench-asan --sandbox .*fuzz_callbacks.lua" "$log" || fail "the callbacks fuzzer did not run"
grep -q "^workbench-asan --sandbox .*fuzz_traces.lua 3000 1 .*torch_kineto.json" "$log" ||
    fail "the trace fuzzer did not run on the torch seeds"
echo "$out" | grep -q "failed: release-tests" || fail "the summary does not name the Release tests"
echo "$out" | grep -q "failed:.*sanitizer-tests" && fail "the summary names the sanitizer tests, which passed"
echo "$out" | grep -q "all tests passed" && fail "it says all tests passed"
echo "ok: a failing Release test still ran the sanitizer tests and the fuzzer, exit $rc, summary named it"
