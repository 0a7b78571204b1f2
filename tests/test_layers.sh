#!/bin/sh
# test_layers.sh: scripts/check_layers.sh passes on the tree and its build, and fails on each kind
# of crossing planted into a copy of them (so the check cannot pass by checking nothing): includes,
# clocks, thread caps, op cases and OpenMP in the sources, Lua requires of commands and in circles,
# calls between floors and call circles in the objects.
# Usage: tests/test_layers.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
sh "$src/scripts/check_layers.sh" "$build" || { echo "FAIL: the tree itself crosses a line"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$src" && tar cf - CMakeLists.txt core kernels bindings scripts/check_layers.sh scripts/wb) | (cd "$tmp" && tar xf -)
fails=0
caught() { # WHAT DETAIL: the check must fail on the copy as it stands
    if sh "$tmp/scripts/check_layers.sh" >"$tmp/out" 2>&1; then
        echo "FAIL: not caught: $1 ($2)"
        fails=$((fails + 1))
    else
        echo "ok: caught: $1 -> $(head -1 "$tmp/out")"
    fi
}
plant() { # FILE LINE WHAT: LINE appended to FILE, then FILE restored
    cp "$tmp/$1" "$tmp/saved"
    echo "$2" >>"$tmp/$1"
    caught "$3" "$1: $2"
    cp "$tmp/saved" "$tmp/$1"
}
edit() { # FILE SED WHAT: FILE changed by a sed expression, then restored
    cp "$tmp/$1" "$tmp/saved"
    sed -i "$2" "$tmp/$1"
    caught "$3" "$1: $2"
    cp "$tmp/saved" "$tmp/$1"
}
plant kernels/cpu/gemm.c '#include <wb/wb.h>' "a CPU kernel includes the core"
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
plant core/base/storage.c '#include "profiler_internal.h"' "a floor includes a header of a floor above it"
plant core/base/storage.c '#include <wb/profiler.h>' "a floor includes a public header of a floor above it"
plant bindings/l_wb.c '#include "backend.h"' "the bindings include a header of a floor"
plant bindings/l_calibrate.c '#include <wb_kernels/gemm.h>' "the bindings include the CPU kernels' header"
plant core/include/wb/graph.h '#include "op.h"' "a public header includes a private one"
plant kernels/cpu/gemm.c '#include <wb/graph.h>' "a kernel includes the core beyond its contracts"
plant kernels/dnnl/dnnl_peer.c '#include <wb/peer.h>' "the oneDNN peer includes the core"
plant core/base/backend.h '#include "plugin_common.h"' "core includes a header of the CUDA plugin's"
plant core/include/wb/abi/cuda.h '#include <wb/wb.h>' "a contract includes the core"
plant CMakeLists.txt 'target_include_directories(wb_abi INTERFACE core/include core/base)' "the contracts' target exposes a core floor"
plant CMakeLists.txt 'target_include_directories(wb_dnnl_peer PRIVATE core/cpu)' "the oneDNN peer's target includes a core folder"
plant kernels/cpu/gemm.c '#define MAX_THREADS 1024' "a second thread cap"
plant core/cuda/cuda_ops.c 'static int planted(int op) { switch (op) { case WB_OP_ADD: return 1; } return 0; }' "a hand-written op case in core/cuda"
plant core/observe/trace_chrome.c 'static const char *planted = ", \\"correlation\\": ";' "a trace key written by hand in the writer"
plant core/observe/trace_read.c 'static const char *planted = "{\\"run_delay_ns\\": 0}";' "a trace key written by hand in the reader"
plant bindings/l_profiler.c 'static void planted(lua_State *L) { wb_lua_setinteger(L, "ts_ns", 1); }' "a Lua event key written by hand"
plant bindings/l_profiler_events.c 'static void planted(lua_State *L) { lua_getfield(L, 1, "shapes"); }' "a from_events key written by hand"
plant kernels/cpu/activation.c '#pragma omp parallel for' "an OpenMP region outside WB_CPU_PARALLEL"
plant kernels/cpu/reduce.c 'static int planted(void) { return omp_get_max_threads(); }' "an OpenMP call outside spans.h"
edit core/include/wb/clock.h '1s/ (floor base)//' "a public header that names no floor"
plant scripts/wb/stats.lua 'local function f() return require("wb.cmd.diff") end' "a library module requires a command"
plant scripts/wb/words.lua 'local function f() return require("wb.profiler") end' "two Lua modules in a circle (a lazy require)"

# Calls: the check reads them from the build's objects, so the plants are objects compiled here
# (each with its source beside the copy of the tree, as the check only reads objects whose
# source exists) and added to a copy of the build's objects.
(cd "$build/CMakeFiles" && find wb.dir wb_kernels_cpu.dir wb_cuda_mock.dir -name '*.o' | tar cf - -T -) |
    (mkdir -p "$tmp/build/CMakeFiles" && cd "$tmp/build/CMakeFiles" && tar xf -)
ln -s "$(cd "$build" && pwd)/workbench" "$tmp/build/workbench"
sh "$tmp/scripts/check_layers.sh" "$tmp/build" >"$tmp/out" 2>&1 || { echo "FAIL: the copy of the build fails the check"; cat "$tmp/out"; exit 1; }
plant_objects() { # WHAT TARGET:FILE:CODE...
    what=$1
    shift
    planted=""
    for spec in "$@"; do
        target=${spec%%:*} rest=${spec#*:}
        file=${rest%%:*} code=${rest#*:}
        mkdir -p "$(dirname "$tmp/$file")" "$(dirname "$tmp/build/CMakeFiles/$target.dir/$file")"
        echo "$code" >"$tmp/$file"
        ${CC:-cc} -O1 -c "$tmp/$file" -o "$tmp/build/CMakeFiles/$target.dir/$file.o" || { echo "FAIL: cannot compile a plant"; exit 1; }
        planted="$planted $tmp/$file $tmp/build/CMakeFiles/$target.dir/$file.o"
    done
    if sh "$tmp/scripts/check_layers.sh" "$tmp/build" >"$tmp/out" 2>&1; then
        echo "FAIL: not caught: $what"
        fails=$((fails + 1))
    else
        echo "ok: caught: $what -> $(head -2 "$tmp/out" | tr '\n' ' ')"
    fi
    rm -f $planted
}
plant_objects "the base floor calls the profiler (a floor above it)" \
    'wb:core/base/planted.c:void wb_prof_scope_end(const char *); void wb_planted(void) { wb_prof_scope_end("x"); }'
plant_objects "two files of one floor call each other (a circle in core/)" \
    'wb:core/ops/planted_a.c:void wb_planted_b(int); void wb_planted_a(int n) { if (n) wb_planted_b(n - 1); }' \
    'wb:core/ops/planted_b.c:void wb_planted_a(int); void wb_planted_b(int n) { if (n) wb_planted_a(n - 1); }'
plant_objects "two CPU kernels call each other (a circle in kernels/)" \
    'wb_kernels_cpu:kernels/cpu/planted_a.c:void wb_planted_d(int); void wb_planted_c(int n) { if (n) wb_planted_d(n - 1); }' \
    'wb_kernels_cpu:kernels/cpu/planted_b.c:void wb_planted_c(int); void wb_planted_d(int n) { if (n) wb_planted_c(n - 1); }'
[ "$fails" -eq 0 ] && echo "test_layers: every crossing caught"
exit "$fails"
