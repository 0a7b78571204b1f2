#!/bin/sh
# bootstrap.sh: from a fresh Debian 12 machine to a built workbench.
#   scripts/bootstrap.sh          install what is missing (apt-get), configure and build (build/)
#   scripts/bootstrap.sh --test   the same, then every test, then every test again under ASan+UBSan
# Run as root (or with sudo available) the first time, so missing packages can be installed.
set -eu
cd "$(dirname "$0")/.."

mode=build
case "${1:-}" in
    "") ;;
    --test) mode=test ;;
    *) echo "usage: scripts/bootstrap.sh [--test]" >&2; exit 2 ;;
esac

packages="gcc g++ binutils make libc6-dev cmake pkg-config liblua5.4-dev lua-unit lua-cjson libseccomp-dev libreadline-dev libopenblas0-pthread lua-argparse tmux slurm-wlm munge"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "== installing:$missing"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi

jobs=$(nproc 2>/dev/null || echo 2)

echo "== the house's lines (scripts/check_layers.sh)"
scripts/check_layers.sh

echo "== configure and build (build/, Release)"
# The CUDA plugin is built when the CUDA 13 toolkit is installed (/usr/local/cuda); say which.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWB_WERROR=ON | grep "CUDA plugin" || true
cmake --build build -j "$jobs"
scripts/check_layers.sh build >/dev/null # the executable links no CUDA library

[ "$mode" = test ] || exit 0

echo "== tests (build/)"
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DWB_SANITIZE=ON -DWB_WERROR=ON >/dev/null
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"
echo "== the API fuzzer under AddressSanitizer + UndefinedBehaviorSanitizer (200,000 seeded calls, --sandbox)"
# Debian's liblua5.4 is not instrumented: the fuzzer finds errors in the workbench's own code.
# WB_MAX_ALLOC_BYTES=64 MiB: a drawn shape of 2^31 elements is refused with its message at once,
# instead of gigabytes that ASan would map and poison (minutes of system time, nothing learned).
WB_MAX_ALLOC_BYTES=67108864 ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    build-asan/workbench --sandbox --out build-asan/fuzz-out tests/fuzz/fuzz_api.lua 200000 1
echo "== all tests passed"
