#!/bin/sh
# check_layers.sh: fails when an include or a link crosses a line the house keeps:
#   core/          never includes Lua, the bindings, CUDA headers, or kernels by relative path;
#                  it reaches the CPU kernels only through their public folder (<wb_kernels/...>)
#   kernels/cpu/   never includes the core (nor Lua, nor CUDA): pointers and strides only
#   kernels/cuda/  includes nothing of the core: the plugin's ABI (wb_cuda_abi.h) is in the kernels'
#                  public folder (kernels/cuda/include/), which the core includes; no kernel target
#                  has a folder of core/ on its include path
#   bindings/      never includes CUDA headers or the plugin's files
#   the executable links no CUDA library (the plugin is dlopen'ed at first use)
#   one clock: only core/base/clock.h reads the time (wb_now_ns), in the core and the bindings
#   no `if cuda` outside the backend's own files: WB_DEVICE_CUDA appears only in the device
#                  registry, the op table's device column and the wb.cuda bindings
# Usage: scripts/check_layers.sh [BUILD_DIR]   (with BUILD_DIR, also checks the executable's links)
set -u
cd "$(dirname "$0")/.."
build=${1:-}
bad=0

# includes(FILES...): "file:line:header" for every #include, quotes or angle brackets
includes() {
    grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$@" 2>/dev/null |
        sed -E 's/^([^:]*):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]*)[>"].*/\1:\2:\3/'
}

# forbid LABEL PATTERN FILES...: every include whose header matches PATTERN is a violation
forbid() {
    label=$1 pattern=$2
    shift 2
    hits=$(includes "$@" | awk -F: -v p="$pattern" '$3 ~ p')
    if [ -n "$hits" ]; then
        echo "check_layers: $label:" >&2
        echo "$hits" | sed 's/^/  /' >&2
        bad=1
    fi
}

core=$(find core -name '*.c' -o -name '*.h')
kcpu=$(find kernels/cpu -name '*.c' -o -name '*.h' -o -name '*.inc')
kcuda=$(find kernels/cuda -name '*.c' -o -name '*.h' -o -name '*.cu')
bind=$(ls bindings/*.c bindings/*.h)

core_headers=$(find core -name '*.h' | xargs -n1 basename | sed 's/\./\\./g' | paste -sd'|' -)
forbid "core includes Lua" '^(lua|lauxlib|lualib)\.h$' $core
forbid "core includes the bindings" '^(wb_lua|repl|guard)\.h$' $core
forbid "core includes CUDA headers" '^(cuda\\.h|cuda_runtime|cublas|cupti|nvrtc)' $core
forbid "core includes by relative path" '^\.\./' $core
forbid "core includes the CUDA plugin's files" '^plugin_internal\.h$' $core
forbid "a CPU kernel includes the core" "^(\\.\\./|($core_headers)\$)" $kcpu
forbid "a CPU kernel includes Lua or CUDA" '^(lua|lauxlib|lualib|cuda\\.h|cuda_runtime|cublas|cupti)' $kcpu
forbid "the CUDA plugin includes the core" "^(\\.\\./|($core_headers)\$)" $kcuda
forbid "the bindings include CUDA headers or the plugin's files" '^(cuda\\.h|cuda_runtime|cublas|cupti|nvrtc|cuda_plugin\\.h|plugin_internal\\.h)' $bind

# `if cuda` outside the backend's own files
hits=$(grep -HnE 'WB_DEVICE_CUDA|wb_cuda_api_get|wb_cuda_check' $core $bind |
    grep -vE '^core/(cuda/|base/backend_cpu\.c|base/backend\.h)' |
    grep -vE '^core/base/wb\.h:.*typedef enum wb_device' |
    grep -vE '^core/base/device\.c:.*(\[WB_DEVICE_CUDA\] = "cuda"|cuda:0|WB_DEVICE_CUDA :|\*out = WB_DEVICE_CUDA)' |
    grep -vE '^core/ops/op_table\.c:.*\[WB_DEVICE_CUDA\] =' |
    grep -vE '^bindings/l_wb\.c:.*(WB_DEVICE_CUDA\)|cuda\.)' )
if [ -n "$hits" ]; then
    echo "check_layers: device-specific code outside the backend's files:" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi

# one clock: the core and the bindings read time through wb_now_ns (core/base/clock.h) only
hits=$(grep -HnE '(clock_gettime|gettimeofday|timespec_get)[[:space:]]*\(' $core $bind | grep -v '^core/base/clock\.h:')
if [ -n "$hits" ]; then
    echo "check_layers: a clock read outside core/base/clock.h (use wb_now_ns):" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi

# the kernels stand below the core: no kernel target has a folder of core/ on its include path
hits=$(tr '\n' ' ' <CMakeLists.txt | grep -oE 'target_include_directories\((wb_kernels_cpu|wb_cuda|wb_cuda_mock)[[:space:]][^)]*\)' |
    grep -E '[[:space:]/]core(/|[[:space:])])')
if [ -n "$hits" ]; then
    echo "check_layers: a kernel target includes a folder of the core:" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi

# the executable links no CUDA library
if [ -n "$build" ]; then
    exe="$build/workbench"
    if [ ! -x "$exe" ]; then
        echo "check_layers: $exe not found (build first)" >&2
        bad=1
    else
        needed=$(readelf -d "$exe" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
        cudalibs=$(echo "$needed" | grep -E '^lib(cuda|cudart|cublas|cublasLt|cupti|nvrtc|nvidia)')
        if [ -n "$cudalibs" ]; then
            echo "check_layers: $exe links CUDA libraries: $cudalibs" >&2
            bad=1
        fi
    fi
fi

[ "$bad" -eq 0 ] && echo "check_layers: ok (core, kernels, bindings and the executable keep their lines)"
exit "$bad"
