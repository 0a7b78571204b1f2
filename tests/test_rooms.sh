#!/bin/sh
# test_rooms.sh SOURCE_DIR: no source file of the repository is over 600 lines (a room of one
# concern; the README and docs are prose, not rooms). Checks a planted 601-line file first, so
# the count cannot pass by reading nothing.
src=$1
limit=600
# rooms DIR: "lines path" for every source file under DIR over the limit
rooms() {
    (cd "$1" && find CMakeLists.txt core kernels bindings scripts tests experiments -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.inc' -o -name '*.in' -o -name '*.lua' \
        -o -name '*.sh' -o -name '*.cmake' -o -name '*.py' -o -name 'CMakeLists.txt' \) 2>/dev/null |
        xargs wc -l | awk -v limit="$limit" '$2 != "total" && $1 > limit')
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/core"
awk 'BEGIN { for (i = 0; i <= 600; i++) print "/* line */" }' >"$tmp/core/planted.c"
if [ -z "$(rooms "$tmp")" ]; then
    echo "FAIL: a planted file of 601 lines was not seen"
    exit 1
fi
over=$(rooms "$src")
if [ -n "$over" ]; then
    echo "FAIL: source files over $limit lines (split them by concern):"
    echo "$over" | sed 's/^ */  /'
    exit 1
fi
echo "test_rooms: every source file is at most $limit lines"
