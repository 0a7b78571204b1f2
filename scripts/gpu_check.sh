#!/bin/sh
# gpu_check.sh: the one prepared run for a machine with an NVIDIA GPU (the H200 device machine).
# Builds with the CUDA plugin (or uses a carried build that has it), runs the GPU tests, the
# linear lesson on cuda and the MLP sweep at the post's sizes (batch*seq = 8192, dim 768,
# hidden 3072, bf16), then prints a short table last. Logs go to $OUT (default out/gpu_check).
# Budget: 8 minutes; every step has its own timeout (450 s in all, plus a build when nothing is
# carried) so one hang cannot eat the rest.
#
#   OUT=/tmp/gpu sh scripts/gpu_check.sh            # WB_GPU_BUILD=DIR to use another build dir
#
# On a machine without Lua (the device machines: a CUDA image, no package registry), make the
# bundle here first (scripts/gpu_bundle.sh: the built workbench, its plugin and the Lua pieces
# in .gpu/) and carry .gpu: this script then runs from it instead of building.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu_check}
BUILD=${WB_GPU_BUILD:-build}
mkdir -p "$OUT"
start=$(date +%s)
status() { printf '%-28s %s\n' "$1" "$2" >> "$OUT/summary.txt"; }
: > "$OUT/summary.txt"

if command -v nvidia-smi > /dev/null; then
    { nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } \
        > "$OUT/nvidia-smi.txt" 2>&1 || true
else
    echo "nvidia-smi not found" > "$OUT/nvidia-smi.txt"
fi
status "gpu" "$(head -1 "$OUT/nvidia-smi.txt")"

# 1. build: the carried bundle, or a build that has the plugin, else configure and build here
if [ -x .gpu/bin/workbench ] && [ -f .gpu/bin/libwb_cuda.so ]; then
    BUILD=.gpu/bin
    LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
    LUA_PATH="$PWD/.gpu/lua/?.lua;$PWD/tests/?.lua;;"
    LUA_CPATH="$PWD/.gpu/lua/?.so;;"
    WB_SCRIPTS_DIR="$PWD/scripts"
    export LD_LIBRARY_PATH LUA_PATH LUA_CPATH WB_SCRIPTS_DIR
    status "build" "carried bundle .gpu (commit $(cat .gpu/commit 2>/dev/null))"
elif [ -x "$BUILD/workbench" ] && [ -f "$BUILD/libwb_cuda.so" ]; then
    status "build" "reused $BUILD"
else
    BUILD=build-gpu
    if timeout 300 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 &&
        timeout 300 cmake --build "$BUILD" -j"$(nproc)" > "$OUT/build.log" 2>&1; then
        status "build" "ok ($BUILD)"
    else
        status "build" "FAILED (see build.log / configure.log)"
        tail -30 "$OUT/configure.log" "$OUT/build.log" 2>/dev/null
        cat "$OUT/summary.txt"
        exit 1
    fi
fi
[ -f "$BUILD/libwb_cuda.so" ] || { status "plugin" "NOT BUILT"; cat "$OUT/summary.txt"; exit 1; }
WB="$BUILD/workbench"
"$WB" -e 'print(wb.cuda.is_available() and "cuda available" or ("cuda NOT available: " .. wb.cuda.why_not()))' \
    > "$OUT/cuda.txt" 2>&1
status "cuda" "$(cat "$OUT/cuda.txt")"
"$WB" -e 'local i = wb.device_info("cuda") for k, v in pairs(i) do print(k, v) end' > "$OUT/device_info.txt" 2>&1

# 2. the GPU tests (every cuda op against the cpu, trace structure, graphs)
WB_EXE="$PWD/$WB" LUA_PATH="${LUA_PATH:-$PWD/tests/?.lua;;}" timeout 120 "$WB" tests/test_cuda.lua -o text -v \
    > "$OUT/test_cuda.log" 2>&1
rc=$?
status "tests/test_cuda.lua" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc") ($(tail -1 "$OUT/test_cuda.log"))"

# 3. the linear lesson on cuda (one tn kernel with the bias, no add), trace written
timeout 45 "$WB" --device cuda experiments/linear_anatomy.lua --out "$OUT/linear_anatomy" \
    > "$OUT/linear_anatomy.log" 2>&1
rc=$?
status "linear_anatomy (cuda)" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")"

timeout 45 "$WB" --device cuda experiments/mlp_anatomy.lua --out "$OUT/mlp_anatomy" > "$OUT/mlp_anatomy.log" 2>&1
rc=$?
status "mlp_anatomy (cuda)" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")"

# 4. the sweep at the post's sizes, bf16, and a small f32 one (decode-sized, launch-bound)
timeout 150 "$WB" --device cuda experiments/mlp_sweep.lua --tokens 8192 --dtype bf16 --rounds 3 --iters 20 \
    --trace-tokens 8192 --out "$OUT/mlp_sweep_bf16" > "$OUT/mlp_sweep_bf16.log" 2>&1
rc=$?
status "mlp_sweep bf16 8192" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")"
timeout 90 "$WB" --device cuda experiments/mlp_sweep.lua --tokens 1,16 --rounds 2 --iters 50 \
    --trace-tokens 16 --out "$OUT/mlp_sweep_f32" > "$OUT/mlp_sweep_f32.log" 2>&1
rc=$?
status "mlp_sweep f32 1,16" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")"

# 5. the short table, last
echo
echo "== facts from the tests =="
grep -E "linear kernel:|launch records:|GELU_BIAS epilogue|cuda here" "$OUT/test_cuda.log" | sed 's/^ *//' | sort -u
grep -E "^(FAILED|Ran |OK)|^[0-9]+\)" "$OUT/test_cuda.log" | head -20
echo
echo "== linear_anatomy / mlp_anatomy (cuda) =="
grep -E "All expectations|rel. error|failed" "$OUT/linear_anatomy.log" | head -5
grep -E "^(eager|fused|dual) |All expectations|failed" "$OUT/mlp_anatomy.log" | head -6
echo
echo "== mlp_sweep (tokens, mode, median ms, ..., kernels, host us, vs eager) =="
for f in "$OUT/mlp_sweep_bf16.log" "$OUT/mlp_sweep_f32.log"; do
    grep -E "^[0-9]+ +(eager|fused|dual|compiled|graph) |bf16 eager vs|disagrees|rror" "$f" | head -14
done
echo
echo "== summary ($(($(date +%s) - start)) s) =="
cat "$OUT/summary.txt"
grep -q FAILED "$OUT/summary.txt" && exit 1
exit 0
