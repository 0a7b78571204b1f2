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

packages="gcc g++ binutils make libc6-dev cmake pkg-config liblua5.4-dev lua-unit lua-cjson libseccomp-dev libreadline-dev libopenblas0-pthread lua-argparse tmux slurm-wlm munge libsqlite3-dev zlib1g-dev"
# the benchmarks' peers beside OpenBLAS: oneDNN (its headers build kernels/dnnl/dnnl_peer.c)
# and BLIS's serial and pthread builds (dlopen'ed; no headers needed)
packages="$packages libdnnl-dev libblis4-serial libblis4-pthread"
[ "$mode" = build ] || packages="$packages dpkg-dev" # apt-get source unpacks Lua's source with dpkg-source
[ "$mode" = build ] || packages="$packages chromium" # the reports checked in a real browser (headless)
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ -n "$missing" ]; then
    echo "== installing:$missing"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi

jobs=$(nproc 2>/dev/null || echo 2)

# fetch_lua_source DIR: Debian's lua5.4 source package (the version of the installed
# liblua5.4-dev, with Debian's patches) unpacked into DIR, through `apt-get source`; enables the
# deb-src entries of the apt sources first when apt knows no source for it. Fails when it cannot.
fetch_lua_source() {
    dir=$1
    version=$(dpkg-query -W -f='${source:Version}' liblua5.4-dev)
    [ -f "$dir/src/lapi.c" ] && [ "$(cat "$dir/.wb-version" 2>/dev/null)" = "$version" ] && return 0
    if ! apt-cache showsrc lua5.4 2>/dev/null | grep -q "^Version: $version\$"; then
        echo "== enabling deb-src in the apt sources and updating (for apt-get source lua5.4=$version)"
        # deb822 sources (Debian 12's default): "Types: deb" becomes "Types: deb deb-src"
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] && $sudo sed -i 's/^Types: deb$/Types: deb deb-src/' "$f"
        done
        # one-line sources: a deb-src line for each deb line, when the file has none yet
        f=/etc/apt/sources.list
        if [ -f "$f" ] && grep -q '^deb ' "$f" && ! grep -q '^deb-src ' "$f"; then
            sed -n 's/^deb /deb-src /p' "$f" | $sudo tee -a "$f" >/dev/null
        fi
        $sudo apt-get update -qq || return 1
    fi
    rm -rf "$dir.fetch" && mkdir -p "$dir.fetch" || return 1
    # run as root, apt says it downloads unsandboxed: true, and harmless here
    (cd "$dir.fetch" && apt-get source -qq "lua5.4=$version" 2>&1 | grep -v "unsandboxed") || true
    unpacked=$(ls -d "$dir.fetch"/lua5.4-*/ 2>/dev/null | head -n 1)
    if [ -z "$unpacked" ] || [ ! -f "$unpacked/src/lapi.c" ]; then
        rm -rf "$dir.fetch"
        return 1
    fi
    rm -rf "$dir" && mv "$unpacked" "$dir" && rm -rf "$dir.fetch" || return 1
    echo "$version" >"$dir/.wb-version"
}

# The sanitizer build (--test) compiles Lua itself with the sanitizers, from Debian's lua5.4
# source fetched into build-asan/lua-src (outside git): Debian's liblua5.4 is not instrumented,
# so AddressSanitizer could not see a freed lua_State or string that our code reads. Fetched
# first, so that CI stops early. Without it (no network, no deb-src), the sanitizer build falls
# back to the system's liblua5.4 and says so; .ci/run sets WB_REQUIRE_INSTRUMENTED_LUA=1, so CI
# fails instead of passing with that blind spot.
lua_src=""
if [ "$mode" = test ]; then
    echo "== Lua's source for the sanitizer build (apt-get source lua5.4 into build-asan/lua-src)"
    mkdir -p build-asan
    if fetch_lua_source "$PWD/build-asan/lua-src"; then
        lua_src="$PWD/build-asan/lua-src"
        echo "   Debian's lua5.4 $(cat build-asan/lua-src/.wb-version), to be compiled with ASan+UBSan into build-asan/workbench"
    else
        echo "!! could not fetch Debian's lua5.4 source (apt-get source lua5.4: network, deb-src, dpkg-dev?)" >&2
        if [ "${WB_REQUIRE_INSTRUMENTED_LUA:-0}" = 1 ]; then
            echo "!! WB_REQUIRE_INSTRUMENTED_LUA=1: stopping" >&2
            exit 1
        fi
        echo "!! the sanitizer build links the system's uninstrumented liblua5.4: AddressSanitizer sees no" >&2
        echo "!! use-after-free inside the interpreter in this run" >&2
    fi
fi

echo "== the house's lines (scripts/check_layers.sh)"
scripts/check_layers.sh

echo "== configure and build (build/, Release)"
# The CUDA plugin is built when the CUDA 13 toolkit is installed (/usr/local/cuda); say which.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWB_WERROR=ON | grep "CUDA plugin" || true
cmake --build build -j "$jobs"
scripts/check_layers.sh build >/dev/null # the executable links no CUDA library

[ "$mode" = test ] || exit 0

# Every half runs even when one before it failed (a failing Release test must not hide what the
# sanitizers would say); the run fails at the end, naming each half that failed.
failed=""
echo "== tests (build/)"
# what they run on, once at the top: CPU, the kernel paths exercised, the blocking
build/workbench tests/machine.lua | sed 's/^/   /' || failed="$failed machine-summary"
ctest --test-dir build --output-on-failure -j "$jobs" || failed="$failed release-tests"

echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
# the Release run's test cache: calibrated ceilings and compiled generated kernels are reused
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DWB_SANITIZE=ON -DWB_WERROR=ON -DWB_LUA_SOURCE_DIR="$lua_src" \
    -DWB_TEST_CACHE_DIR="$PWD/build/test-cache" >/dev/null
cmake --build build-asan -j "$jobs"
echo "   $(build-asan/workbench --version)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" || failed="$failed sanitizer-tests"
echo "== the API fuzzer under AddressSanitizer + UndefinedBehaviorSanitizer (200,000 seeded calls, --sandbox)"
# With Lua compiled into build-asan/workbench (above), it also sees the workbench misusing the
# interpreter's memory (and LUA_USE_APICHECK its stack).
# WB_MAX_ALLOC_BYTES=64 MiB: a drawn shape of 2^31 elements is refused with its message at once,
# instead of gigabytes that ASan would map and poison (minutes of system time, nothing learned).
WB_MAX_ALLOC_BYTES=67108864 ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    build-asan/workbench --sandbox --out build-asan/fuzz-out tests/fuzz/fuzz_api.lua 200000 1 || failed="$failed fuzzer"
echo "== the hostile-callbacks fuzzer under AddressSanitizer + UndefinedBehaviorSanitizer (100,000 seeded calls, --sandbox)"
# random finalizers and metatables (__len, __index that release objects) on every argument
WB_MAX_ALLOC_BYTES=67108864 ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    build-asan/workbench --sandbox --out build-asan/fuzz-out tests/fuzz/fuzz_callbacks.lua 100000 1 ||
    failed="$failed callbacks-fuzzer"
echo "== the trace fuzzer under AddressSanitizer + UndefinedBehaviorSanitizer (3,000 seeded mutated traces, --sandbox)"
# seeds: the red team's hostile traces (tests/fuzz/hostile_corpus.lua), a recording, and torch.profiler's
# Kineto JSON and legacy array as tests/torch_traces.lua generates them (written here: the sandboxed
# fuzzer reads only its own folder and --out)
mkdir -p build-asan/fuzz-out
LUA_PATH="tests/?.lua;;" build/workbench -e 'local t = require("torch_traces")
t.write("build-asan/fuzz-out/torch_kineto.json", t.kineto{steps = 2, memory = true, python = true})
t.write("build-asan/fuzz-out/torch_legacy.json", t.legacy{steps = 2})' || failed="$failed trace-fuzzer-seeds"
WB_MAX_ALLOC_BYTES=67108864 ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    build-asan/workbench --sandbox --out build-asan/fuzz-out tests/fuzz/fuzz_traces.lua 3000 1 \
    build-asan/fuzz-out/torch_kineto.json build-asan/fuzz-out/torch_legacy.json || failed="$failed trace-fuzzer"
if [ -n "$failed" ]; then
    echo "!! failed:$failed (each half's own summary is above)" >&2
    exit 1
fi
echo "== all tests passed"
