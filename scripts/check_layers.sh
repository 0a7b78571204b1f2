#!/bin/sh
# check_layers.sh: fails when an include or a link crosses a line the house keeps:
#   core/          floors, bottom to top: base, ops, cpu, cuda, observe; a floor includes and
#                  calls only its own and those below it (calls read from a build's objects), and
#                  no files of core/ or kernels/ call each other in a circle
#   core/          never includes Lua, the bindings, CUDA headers, a header of the CUDA plugin's
#                  or the oneDNN peer's, or kernels by relative path; it reaches the CPU kernels
#                  only through their public folder (<wb_kernels/...>)
#   core/include/wb/      the public face: the only headers of the core the bindings include
#                  (<wb/...>); each names its floor on its first line ("(floor observe)") and
#                  includes only the C library, other public headers and the contracts
#   core/include/wb/abi/  the contracts the core owns (the op lists, the plugin's and the peer's
#                  ABI): they include only the C library and each other
#   kernels/       (cpu, cuda, dnnl) include of the core only its contracts (<wb/abi/...>), never
#                  Lua; the CPU kernels no CUDA; no kernel target has a folder of core/ on its
#                  include path but the contracts' (the wb_abi target, core/include)
#   bindings/      never includes CUDA headers or the plugin's files
#   the executable links no CUDA library (the plugin is dlopen'ed at first use)
#   declared once: one thread cap (WB_CPU_MAX_THREADS; the core's WB_MAX_THREADS asserted equal),
#                  no hand-written op case in core/cuda, OpenMP in CPU kernels only via WB_CPU_PARALLEL,
#                  an event's keys only in the event schema (core/include/wb/trace_schema.h)
#   one clock: only core/include/wb/clock.h reads the time (wb_now_ns), in the core and the bindings
#   no `if cuda` outside the backend's own files: WB_DEVICE_CUDA appears only in the device
#                  registry, the op table's device column and the wb.cuda bindings
#   scripts/wb/    the Lua library: no module requires a command (scripts/wb/cmd/, what `workbench
#                  <subcommand>` runs), and no modules require each other in a circle (a require
#                  inside a function counts: it is a circle the first call closes)
# Usage: scripts/check_layers.sh [BUILD_DIR]   (with BUILD_DIR, also checks the calls
#                                               between its objects and the executable's links)
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
kdnnl=$(find kernels/dnnl -name '*.c' -o -name '*.h')
abi=$(find core/include/wb/abi -name '*.h')
bind=$(ls bindings/*.c bindings/*.h)

# the core's headers by name, its contracts left out (a kernel includes those as <wb/abi/...>)
core_headers=$(find core -path core/include -prune -o -name '*.h' -print | xargs -n1 basename | sed 's/\./\\./g' |
    paste -sd'|' -)
plugin_headers=$(find kernels/cuda kernels/dnnl -name '*.h' | xargs -n1 basename | sed 's/\./\\./g' | paste -sd'|' -)
forbid "core includes Lua" '^(lua|lauxlib|lualib)\.h$' $core
forbid "core includes the bindings" '^(wb_lua|repl|guard)\.h$' $core
forbid "core includes CUDA headers" '^(cuda\\.h|cuda_runtime|cublas|cupti|nvrtc)' $core
forbid "core includes by relative path" '^\.\./' $core
forbid "core includes a header of the CUDA plugin's or the oneDNN peer's" "^($plugin_headers)\$" $core
forbid "a CPU kernel includes the core" "^(\\.\\./|($core_headers)\$)" $kcpu
forbid "a CPU kernel includes Lua or CUDA" '^(lua|lauxlib|lualib|cuda\\.h|cuda_runtime|cublas|cupti)' $kcpu
forbid "the CUDA plugin includes the core" "^(\\.\\./|($core_headers)\$)" $kcuda
forbid "the oneDNN peer includes the core" "^(\\.\\./|($core_headers)\$)" $kdnnl
forbid "a kernel includes Lua" '^(lua|lauxlib|lualib)\.h$' $kcuda $kdnnl
# of core/include/wb/, a kernel includes the contracts only (<wb/abi/...>), not the public face
hits=$(includes $kcpu $kcuda $kdnnl | awk -F: '$3 ~ /^wb\// && $3 !~ /^wb\/abi\/[a-z_]+\.h$/')
if [ -n "$hits" ]; then
    echo "check_layers: a kernel includes a header of the core other than its contracts (<wb/abi/...>):" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi
# the contracts stand below everything: the C library and each other only
hits=$(includes $abi | awk -F: '$3 !~ /^(std(def|int|bool|arg|io|lib)|limits|string|math)\.h$/ && $3 !~ /^wb\/abi\/[a-z_]+\.h$/')
if [ -n "$hits" ]; then
    echo "check_layers: a contract (core/include/wb/abi/) includes more than the C library and the other contracts:" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi
forbid "the bindings include CUDA headers or the plugin's files" '^(cuda\\.h|cuda_runtime|cublas|cupti|nvrtc|cuda_plugin\\.h|plugin_internal\\.h)' $bind

# The floors of core/, bottom to top: base, ops, cpu, cuda, observe (the kernels below them all).
# floor_rank PATH: 0 for the kernels, 1-5 for the floors, 9 for anything else
floor_rank() {
    case /$1 in
    */kernels/*) echo 0 ;; */core/base/*) echo 1 ;; */core/ops/*) echo 2 ;; */core/cpu/*) echo 3 ;;
    */core/cuda/*) echo 4 ;; */core/observe/*) echo 5 ;; *) echo 9 ;;
    esac
}
# a file of core/ includes headers of its own floor or below (every floor is on the include path);
# a public header <wb/X.h> counts on the floor its first line names ("(floor observe)")
public_rank() {
    case $(head -1 "$1" | grep -oE '\(floor [a-z]+\)') in
    "(floor base)") echo 1 ;; "(floor ops)") echo 2 ;; "(floor cpu)") echo 3 ;; "(floor cuda)") echo 4 ;;
    "(floor observe)") echo 5 ;; *) echo 0 ;;
    esac
}
public=$(find core/include/wb -maxdepth 1 -name '*.h')
header_ranks=$(for h in $(find core -path core/include -prune -o -name '*.h' -print); do echo "$(basename "$h") $(floor_rank "$h")"; done
    for h in $public; do echo "wb/$(basename "$h") $(public_rank "$h")"; done)
untagged=$(for h in $public; do [ "$(public_rank "$h")" = 0 ] && echo "$h"; done)
if [ -n "$untagged" ]; then
    echo "check_layers: a public header does not name its floor on its first line (\"(floor base)\", ...):" >&2
    echo "$untagged" | sed 's/^/  /' >&2
    bad=1
fi
# the bindings see the core through its public face only: no header of a floor, none of the CPU
# kernels' (the white-box C tests, tests/c/test_core.c, are listed in tests/CMakeLists.txt)
forbid "the bindings include a header of the core's floors or the CPU kernels' (not the public face <wb/...>)" \
    "^(wb_kernels/|($core_headers)\$)" $bind
# a public header includes the C library, the other public headers and the contracts only
hits=$(includes $public | awk -F: '$3 !~ /^(std(def|int|bool|arg|io|lib)|limits|string|math|time)\.h$/ && $3 !~ /^wb\/(abi\/)?[a-z_]+\.h$/')
if [ -n "$hits" ]; then
    echo "check_layers: a public header (core/include/wb/) includes a private header of the core or the kernels:" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi
file_ranks=$(for f in $core; do echo "$f $(floor_rank "$f")"; done)
hits=$(includes $core | awk -F: -v hr="$header_ranks" -v fr="$file_ranks" '
    BEGIN {
        n = split(hr, a, "\n"); for (i = 1; i <= n; i++) { split(a[i], f, " "); h[f[1]] = f[2] }
        n = split(fr, a, "\n"); for (i = 1; i <= n; i++) { split(a[i], f, " "); r[f[1]] = f[2] }
    }
    ($3 in h) && h[$3] > r[$1] {print $1 ":" $2 ": " $3}')
if [ -n "$hits" ]; then
    echo "check_layers: a floor of core/ includes a header of a floor above it:" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi

# `if cuda` outside the backend's own files
hits=$(grep -HnE 'WB_DEVICE_CUDA|wb_cuda_api_get|wb_cuda_check' $core $bind |
    grep -vE '^core/(cuda/|base/backend_cpu\.c|base/backend\.h)' |
    grep -vE '^core/include/wb/wb\.h:.*typedef enum wb_device' |
    grep -vE '^core/base/device\.c:.*(\[WB_DEVICE_CUDA\] = "cuda"|cuda:0|WB_DEVICE_CUDA :|\*out = WB_DEVICE_CUDA)' |
    grep -vE '^core/ops/op_table\.c:.*\[WB_DEVICE_CUDA\] =' |
    grep -vE '^bindings/l_wb\.c:.*(WB_DEVICE_CUDA\)|cuda\.)' )
if [ -n "$hits" ]; then
    echo "check_layers: device-specific code outside the backend's files:" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi

# declared once: the thread cap is WB_CPU_MAX_THREADS (kernels' spans.h), the core's public
# WB_MAX_THREADS equals it by a static assert (core/base/threads.c), and nothing else defines one
hits=$(grep -HnE '^[[:space:]]*#[[:space:]]*define[[:space:]]+[A-Za-z_]*MAX_THREADS([[:space:]]|$)' $core $kcpu $kcuda $bind |
    grep -vE '^(kernels/cpu/include/wb_kernels/spans\.h:[0-9]+:#define WB_CPU_MAX_THREADS |core/include/wb/wb\.h:[0-9]+:#define WB_MAX_THREADS )')
if ! grep -q '_Static_assert(WB_MAX_THREADS == WB_CPU_MAX_THREADS' core/base/threads.c; then
    hits="${hits:+$hits
}core/base/threads.c: no _Static_assert(WB_MAX_THREADS == WB_CPU_MAX_THREADS, ...)"
fi
if [ -n "$hits" ]; then
    echo "check_layers: a thread cap other than WB_CPU_MAX_THREADS (and the core's WB_MAX_THREADS tied to it):" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi

# declared once: the CUDA op codes come from the op lists' CUDA column (a case per list entry made
# by the lists' macros), never a hand-written case of one op in core/cuda
hits=$(grep -HnE 'case[[:space:]]+WB_OP_[A-Z]' $(find core/cuda -name '*.c' -o -name '*.h'))
if [ -n "$hits" ]; then
    echo "check_layers: a hand-written op case in core/cuda (the op lists' CUDA column makes them):" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi

# declared once: an event's keys, the trace's and a Lua event table's, come from the event schema
# (core/include/wb/trace_schema.h, through WB_TKEY/WB_LKEY and its table): the trace writer and
# reader (JSON keys: \"key\":) and the Lua event pusher and from_events (a table field read or
# set) spell none by hand
keys=$(grep -E '^[[:space:]]+X\(' core/include/wb/trace_schema.h | grep -oE '"[a-z_]+"' | tr -d '"' | sort -u |
    tr '\n' '|' | sed 's/|$//')
if [ -z "$keys" ]; then
    hits="core/include/wb/trace_schema.h: no fields found (X(ID, place, \"key\", ...) lines)"
else
    hits=$(grep -HnE "\\\\\"($keys)\\\\\"[[:space:]]*:" core/observe/trace_chrome.c core/observe/trace_read.c \
        core/observe/trace_record.c
        grep -HnE "(field|set(string|integer|number|boolean))\\(L,[^;]*\"($keys)\"" bindings/l_profiler.c \
        bindings/l_profiler_events.c)
fi
if [ -n "$hits" ]; then
    echo "check_layers: an event key written by hand (take it from core/include/wb/trace_schema.h: WB_TKEY, WB_LKEY):" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi

# one owner of the CPU kernels' threads: OpenMP is entered through WB_CPU_PARALLEL (spans.h) only,
# which runs one-thread work outside OpenMP (a region costs a futex wake even when serial)
hits=$(grep -HnE '#[[:space:]]*pragma[[:space:]]+omp[[:space:]]+parallel|omp_(get|set)_[a-z_]+[[:space:]]*\(|<omp\.h>' $kcpu |
    grep -v '^kernels/cpu/include/wb_kernels/spans\.h:')
if [ -n "$hits" ]; then
    echo "check_layers: OpenMP in a CPU kernel outside WB_CPU_PARALLEL (kernels/cpu/include/wb_kernels/spans.h):" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi

# one clock: the core and the bindings read time through wb_now_ns (core/include/wb/clock.h) only
hits=$(grep -HnE '(clock_gettime|gettimeofday|timespec_get)[[:space:]]*\(' $core $bind | grep -v '^core/include/wb/clock\.h:')
if [ -n "$hits" ]; then
    echo "check_layers: a clock read outside core/include/wb/clock.h (use wb_now_ns):" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi

# the kernels stand below the core: no kernel target has a folder of core/ on its include path,
# and the contracts' target (wb_abi) has core/include only
hits=$(tr '\n' ' ' <CMakeLists.txt |
    grep -oE 'target_include_directories\((wb_kernels_cpu|wb_cuda|wb_cuda_mock|wb_dnnl_peer|wb_abi)[[:space:]][^)]*\)' |
    sed -E 's/^target_include_directories\(wb_abi INTERFACE core\/include\)$//' | grep -E '[[:space:]/]core(/|[[:space:])])')
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

# Calls, from the objects of a build: a floor calls only floors below it (or itself), and no
# files of core/ or kernels/ call each other in a circle. An edge is a call: a call or jump
# relocation in code (nm alone cannot tell a call from an address). A function's or a table's
# address stored in a table or passed to a setter is not one: that is how an upward need is
# met, through a registered hook (the op table's per-device column, the backend registry, the
# dispatcher's, storage's and the devices' observers).
# callgraph OBJECTS...: "D symbol object" for every function defined, "R object symbol" for
# every call
callgraph() {
    nm -A --defined-only "$@" | awk '{n = split($1, f, ":"); if ($2 ~ /^[TW]$/) print "D", $3, f[1]}'
    readelf -rW "$@" | awk -v o="$1" '
        /^File: / {o = $2; next}
        /^Relocation section/ {sec = $3; gsub("\047", "", sec); next}
        NF >= 5 && sec ~ /^\.rela?\.text/ && $3 ~ /_(PLT32|CALL26|JUMP26)$/ {print "R", o, $5}'
}
# calls GROUP OBJECTS...: reports back edges between floors and call circles among the objects
calls() {
    group=$1
    shift
    [ $# -gt 0 ] || return 0
    ranks=$(for o in "$@"; do echo "$o $(floor_rank "$o")"; done)
    out=$(callgraph "$@" | awk -v ranks="$ranks" -v group="$group" '
        function short(o) { sub(/^.*\.dir\//, "", o); sub(/\.o$/, "", o); return o }
        BEGIN {
            n = split(ranks, r, "\n")
            for (i = 1; i <= n; i++) { split(r[i], f, " "); rank[f[1]] = f[2] }
            split("kernels base ops cpu cuda observe", names, " ")
        }
        $1 == "D" { def[$2] = $3; next }
        $1 == "R" && ($3 in def) && def[$3] != $2 {
            a = $2; b = def[$3]
            if (!((a, b) in edge)) { edge[a, b] = $3; node[a]; node[b] }
        }
        END {
            for (e in edge) {
                split(e, ab, SUBSEP); a = ab[1]; b = ab[2]
                if (rank[b] > rank[a] && rank[b] != 9)
                    printf "back %s (floor %s) calls %s of %s (floor %s)\n", short(a), names[rank[a] + 1], edge[e], short(b), names[rank[b] + 1]
                reach[a, b] = 1
            }
            for (k in node) for (i in node) if ((i, k) in reach) for (j in node) if ((k, j) in reach) reach[i, j] = 1
            for (i in node) {
                if (!((i, i) in reach) || (i in done)) continue
                line = ""
                for (j in node) if ((i, j) in reach && (j, i) in reach) { done[j]; line = line " " short(j) }
                printf "circle in %s:%s\n", group, line
            }
        }')
    back=$(echo "$out" | grep '^back ' | sed 's/^back //' | sort)
    circles=$(echo "$out" | grep '^circle ' | sed 's/^circle //')
    if [ -n "$back" ]; then
        echo "check_layers: a floor calls a floor above it (use a registered hook):" >&2
        echo "$back" | sed 's/^/  /' >&2
        bad=1
    fi
    if [ -n "$circles" ]; then
        echo "check_layers: files that call each other in a circle:" >&2
        echo "$circles" | sed 's/^/  /' >&2
        bad=1
    fi
}
# The Lua library: "module dependency" for every require("wb.X") in scripts/wb (lazy ones too).
lua_edges=$(find scripts/wb -name '*.lua' | sort | while read -r f; do
    m=$(echo "$f" | sed 's|^scripts/wb/||; s|\.lua$||; s|/|.|g')
    grep -o 'require("wb\.[A-Za-z0-9_.]*")' "$f" | sed 's/require("wb\.\(.*\)")/\1/' | sort -u |
        while read -r d; do [ "$d" != "$m" ] && echo "$m $d"; done
done)
hits=$(echo "$lua_edges" | awk '$1 !~ /^cmd\./ && $2 ~ /^cmd\./ {print "wb." $1 " requires wb." $2}')
if [ -n "$hits" ]; then
    echo "check_layers: a library module requires a command (scripts/wb/cmd/ is above the library):" >&2
    echo "$hits" | sed 's/^/  /' >&2
    bad=1
fi
circles=$(echo "$lua_edges" | awk '
    NF == 2 { adj[$1] = adj[$1] " " $2; node[$1]; node[$2] }
    function visit(u,   i, n, next_, v, j, s) {
        color[u] = 1; path[++depth] = u
        n = split(adj[u], next_, " ")
        for (i = 1; i <= n; i++) {
            v = next_[i]
            if (color[v] == 1) {
                s = "wb." v
                for (j = depth; j >= 1 && path[j] != v; j--) s = "wb." path[j] " -> " s
                print "wb." v " -> " s
            } else if (color[v] == 0) visit(v)
        }
        depth--; color[u] = 2
    }
    END { for (u in node) if (color[u] == 0) visit(u) }')
if [ -n "$circles" ]; then
    echo "check_layers: Lua modules that require each other in a circle:" >&2
    echo "$circles" | sed 's/^/  /' >&2
    bad=1
fi

if [ -n "$build" ]; then
    # the objects of a target whose source is still in the tree (a build folder keeps the objects
    # of files since moved or deleted)
    objs() {
        [ -d "$build/CMakeFiles/$1.dir" ] || return 0
        find "$build/CMakeFiles/$1.dir" -name '*.o' | sort | while read -r o; do
            src=${o#"$build/CMakeFiles/$1.dir/"}
            [ -f "${src%.o}" ] && echo "$o"
        done
    }
    core_objs=$(objs wb)
    if [ -z "$core_objs" ]; then
        echo "check_layers: no objects of libwb under $build/CMakeFiles/wb.dir (build first)" >&2
        bad=1
    fi
    calls libwb $core_objs $(objs wb_kernels_cpu)
    calls "the mock plugin" $(objs wb_cuda_mock)
    calls "the CUDA plugin" $(objs wb_cuda)
fi

[ "$bad" -eq 0 ] && echo "check_layers: ok (core, kernels, bindings, the Lua library and the executable keep their lines)"
exit "$bad"
