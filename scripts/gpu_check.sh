#!/bin/sh
# gpu_check.sh: the one prepared run for a machine with an NVIDIA GPU (the H200 device machine).
# Finds the CUDA libraries the plugin needs, proves the plugin loads and sees the GPU (or stops at
# once with the reason), runs the GPU tests with every skip counted as a failure, the linear and
# MLP lessons on cuda and the MLP sweep at the post's sizes (batch*seq = 8192, dim 768, hidden
# 3072, bf16), then prints a short table last. Exit status 0 only when every step passed.
# Budget: 5 minutes in all (a deadline shared by every step, so one hang cannot eat the rest).
# Logs go to $OUT (default out/gpu_check): libs.txt (where each library was found), ldd of the
# plugin, CUPTI's version, nvidia-smi, every step's log.
#
#   OUT=/tmp/gpu sh scripts/gpu_check.sh            # WB_GPU_BUILD=DIR to use another build dir
#
# On a machine without Lua (the device machines: a CUDA image, no package registry), make the
# bundle here first (scripts/gpu_bundle.sh: the built workbench, its plugin, libcudart and
# libcupti, and the Lua pieces in .gpu/) and carry .gpu: this script then runs from it.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu_check}
BUILD=${WB_GPU_BUILD:-build}
BUDGET=${WB_GPU_BUDGET:-290}
mkdir -p "$OUT"
start=$(date +%s)
: > "$OUT/summary.txt"
status() { printf '%-28s %s\n' "$1" "$2" >> "$OUT/summary.txt"; }
left() { echo $((BUDGET - ($(date +%s) - start))); }
finish() { # the table, last; exit non-zero when any step failed or did not run
    echo
    echo "== summary ($(($(date +%s) - start)) s of $BUDGET) =="
    cat "$OUT/summary.txt"
    grep -qE "FAILED|NOT |SKIPPED" "$OUT/summary.txt" && exit 1
    exit 0
}
stop() { status "$1" "$2"; echo "gpu_check: stopping: $1: $2" >&2; finish; }
# step NAME LIMIT CMD...: runs CMD (log: $OUT/NAME.log) under min(LIMIT, time left)
step() {
    name=$1 limit=$2
    shift 2
    t=$(left)
    [ "$t" -lt "$limit" ] && limit=$t
    if [ "$limit" -lt 5 ]; then
        status "$name" "SKIPPED (out of time)"
        return 1
    fi
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    [ $rc -eq 124 ] && status "$name" "FAILED (timed out after $limit s)" && return 1
    [ $rc -ne 0 ] && status "$name" "FAILED rc=$rc" && return 1
    status "$name" "ok"
}

if command -v nvidia-smi > /dev/null; then
    { nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } \
        > "$OUT/nvidia-smi.txt" 2>&1 || true
else
    echo "nvidia-smi not found" > "$OUT/nvidia-smi.txt"
fi
status "gpu" "$(head -1 "$OUT/nvidia-smi.txt")"

# 1. the build: the carried bundle, or a build that has the plugin, else configure and build here
if [ -x .gpu/bin/workbench ] && [ -f .gpu/bin/libwb_cuda.so ]; then
    BUILD=.gpu/bin
    LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
    LUA_PATH="$PWD/.gpu/lua/?.lua;$PWD/tests/?.lua;;"
    LUA_CPATH="$PWD/.gpu/lua/?.so;;"
    WB_SCRIPTS_DIR="$PWD/scripts"
    export LD_LIBRARY_PATH LUA_PATH LUA_CPATH WB_SCRIPTS_DIR
    status "build" "carried bundle .gpu (commit $(cat .gpu/commit 2>/dev/null))"
elif [ -x "$BUILD/workbench" ] && [ -f "$BUILD/libwb_cuda.so" ]; then
    status "build" "reused $BUILD"
else
    BUILD=build-gpu
    step configure 60 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release &&
        step build 150 cmake --build "$BUILD" -j"$(nproc)" || stop "build" "FAILED (see $OUT/build.log)"
fi
[ -f "$BUILD/libwb_cuda.so" ] || stop "plugin" "NOT BUILT (no CUDA toolkit where it was built)"

# 2. the libraries: cuBLASLt and CUPTI live in the toolkit's lib64 or extras/CUPTI/lib64, in
# ldconfig's cache or in Python wheels (site-packages/nvidia/...), not always where the plugin's
# RUNPATH (the build machine's toolkit) points
find_lib() {
    for root in ${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda /usr/local/cuda-13* /opt/cuda /opt/nvidia/cuda; do
        for sub in lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib extras/CUPTI/lib64 extras/CUPTI/lib; do
            [ -e "$root/$sub/$1" ] && { echo "$root/$sub"; return 0; }
        done
    done
    p=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }')
    [ -n "$p" ] && { dirname "$p"; return 0; }
    sites=$(python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
    for sp in $sites /usr/local/lib/python3*/*-packages /usr/lib/python3*/*-packages /opt/conda/lib/python3*/site-packages; do
        for d in "$sp"/nvidia/*/lib "$sp"/nvidia/*/lib64; do
            [ -e "$d/$1" ] && { echo "$d"; return 0; }
        done
    done
    return 1
}
: > "$OUT/libs.txt"
missing=""
for lib in libcudart.so.13 libcublasLt.so.13 libcupti.so.13 libcuda.so.1; do
    if [ -e ".gpu/lib/$lib" ] && [ "$BUILD" = .gpu/bin ]; then
        dir="$PWD/.gpu/lib"
    else
        dir=$(find_lib "$lib") || dir=""
    fi
    if [ -n "$dir" ]; then
        echo "$lib $dir/$lib -> $(readlink -f "$dir/$lib")" >> "$OUT/libs.txt"
        case ":${LD_LIBRARY_PATH:-}:" in *":$dir:"*) ;; *) LD_LIBRARY_PATH="$dir:${LD_LIBRARY_PATH:-}" ;; esac
    else
        echo "$lib NOT FOUND" >> "$OUT/libs.txt"
        missing="$missing $lib"
    fi
done
export LD_LIBRARY_PATH
status "libraries" "$([ -z "$missing" ] && echo "found (libs.txt)" || echo "NOT FOUND:$missing")"
ldd "$BUILD/libwb_cuda.so" > "$OUT/ldd_plugin.txt" 2>&1
grep -q "not found" "$OUT/ldd_plugin.txt" &&
    stop "plugin libraries" "NOT resolved: $(grep "not found" "$OUT/ldd_plugin.txt" | awk '{ print $1 }' | tr '\n' ' ')"
cupti=$(awk '$1 == "libcupti.so.13" { print $3 }' "$OUT/ldd_plugin.txt")
echo "libcupti: $cupti -> $(readlink -f "$cupti" 2>/dev/null)" > "$OUT/cupti_version.txt"

# 3. the plugin loads and sees the GPU, or nothing else runs
WB="$BUILD/workbench"
"$WB" -e 'if wb.cuda.is_available() then print("cuda available") else print("cuda NOT available: " .. wb.cuda.why_not()) end' \
    > "$OUT/cuda.txt" 2>&1
grep -q "^cuda available" "$OUT/cuda.txt" || stop "cuda" "$(head -3 "$OUT/cuda.txt" | tr '\n' ' ')"
status "cuda" "available"
"$WB" -e 'local i = wb.device_info("cuda") for k, v in pairs(i) do print(k, v) end' > "$OUT/device_info.txt" 2>&1
"$WB" -e 'print("CUPTI API version " .. tostring(wb.device_info("cuda").cupti_version))' >> "$OUT/cupti_version.txt" 2>&1

# 4. the GPU tests, every skip a failure (WB_REQUIRE_GPU), then the lessons and the sweeps
WB_REQUIRE_GPU=1 WB_EXE="$PWD/$WB" LUA_PATH="${LUA_PATH:-$PWD/tests/?.lua;;}" \
    step test_cuda 90 "$WB" tests/test_cuda.lua -o text -v
grep -qE ", [1-9][0-9]* skipped" "$OUT/test_cuda.log" && status "test_cuda skips" "FAILED (a test skipped)"
step linear_anatomy 30 "$WB" --device cuda experiments/linear_anatomy.lua --out "$OUT/linear_anatomy"
step mlp_anatomy 30 "$WB" --device cuda experiments/mlp_anatomy.lua --out "$OUT/mlp_anatomy"
step mlp_sweep_bf16 80 "$WB" --device cuda experiments/mlp_sweep.lua --tokens 8192 --dtype bf16 --rounds 2 \
    --iters 10 --trace-tokens 8192 --out "$OUT/mlp_sweep_bf16"
step mlp_sweep_f32 40 "$WB" --device cuda experiments/mlp_sweep.lua --tokens 1,16 --rounds 2 --iters 20 \
    --trace-tokens 16 --out "$OUT/mlp_sweep_f32"

# 5. what the logs say, then the table last
echo "== facts from the tests =="
grep -E "linear kernel:|launch records:|GELU_BIAS epilogue" "$OUT/test_cuda.log" | sed 's/^ *//' | sort -u
grep -E "^(FAILED|Ran |OK)|^[0-9]+\)" "$OUT/test_cuda.log" | head -20
echo "== lessons (cuda) =="
grep -hE "All expectations|rel. error|failed|^(eager|fused|dual) " "$OUT/linear_anatomy.log" "$OUT/mlp_anatomy.log" | head -10
echo "== mlp_sweep (tokens, mode, median ms, ..., kernels, host us, vs eager) =="
for f in "$OUT/mlp_sweep_bf16.log" "$OUT/mlp_sweep_f32.log"; do
    [ -f "$f" ] && grep -E "^[0-9]+ +(eager|fused|dual|compiled|graph) |bf16 eager vs|disagrees|rror" "$f" | head -14
done
finish
