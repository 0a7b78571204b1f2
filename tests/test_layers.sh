#!/bin/sh
# test_layers.sh: scripts/check_layers.sh passes on the tree and fails on each kind of crossing
# planted into a copy of it (so the check cannot pass by checking nothing).
# Usage: tests/test_layers.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
sh "$src/scripts/check_layers.sh" "$build" || { echo "FAIL: the tree itself crosses a line"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$src" && tar cf - CMakeLists.txt core kernels bindings scripts/check_layers.sh) | (cd "$tmp" && tar xf -)
fails=0
plant() { # FILE LINE WHAT
    cp "$tmp/$1" "$tmp/saved"
    echo "$2" >>"$tmp/$1"
    if sh "$tmp/scripts/check_layers.sh" >"$tmp/out" 2>&1; then
        echo "FAIL: not caught: $3 ($1: $2)"
        fails=$((fails + 1))
    else
        echo "ok: caught: $3 -> $(head -1 "$tmp/out")"
    fi
    cp "$tmp/saved" "$tmp/$1"
}
plant kernels/cpu/gemm.c '#include "wb.h"' "a CPU kernel includes the core"
plant kernels/cpu/include/wb_kernels/gemm.h '#include "storage.h"' "a kernel header includes the core"
plant core/observe/graph.c '#include <lua.h>' "core includes Lua"
plant core/base/storage.c '#include "wb_lua.h"' "core includes the bindings"
plant core/observe/graph.c '#include "../kernels/cpu/include/wb_kernels/gemm.h"' "core includes kernels by relative path"
plant core/observe/graph.c '#include <cuda_runtime_api.h>' "core includes a CUDA header"
plant kernels/cuda/mock_plugin.c '#include "op.h"' "the plugin includes the core"
plant bindings/l_wb.c '#include <cupti.h>' "the bindings include a CUDA header"
plant core/observe/graph.c 'static int x = WB_DEVICE_CUDA;' "an if-cuda outside the backend's files"
plant bindings/l_host.c 'static void t(struct timespec *ts) { clock_gettime(CLOCK_MONOTONIC, ts); }' "a clock read outside clock.h"
plant core/cpu/peak.c 'static void t(struct timeval *tv) { gettimeofday(tv, 0); }' "a second clock in the core"
plant CMakeLists.txt 'target_include_directories(wb_cuda_mock PRIVATE kernels/cuda core/base)' "a kernel target includes a core folder"
[ "$fails" -eq 0 ] && echo "test_layers: every crossing caught"
exit "$fails"
