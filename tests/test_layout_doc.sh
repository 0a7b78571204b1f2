#!/bin/sh
# test_layout_doc.sh [SOURCE_DIR]: docs/layout.md names every source file of core/, kernels/,
# bindings/, scripts/, experiments/, cmake/ and tests/ (by its base name, as a whole name: mlp.c is not
# named by launch_mlp.c). The files are the checkout's (git ls-files), or what find sees where
# there is no checkout. Checks a planted copy of the page first (one file's name removed), so
# the check cannot pass by reading nothing. SOURCE_DIR defaults to this script's repository.
set -eu
src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
doc=$src/docs/layout.md
dirs="core kernels bindings scripts experiments cmake tests"
if [ ! -f "$doc" ]; then
    echo "FAIL: $doc not found" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_layout_doc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# the files, relative to src: git's list where src is the top of a checkout, else find's (no
# build outputs, no hidden files)
top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null || true)
if [ -n "$top" ] && [ "$(cd "$top" && pwd -P)" = "$(cd "$src" && pwd -P)" ]; then
    # shellcheck disable=SC2086 # $dirs: one word per folder
    git -C "$src" ls-files -- $dirs >"$tmp/files"
else
    # shellcheck disable=SC2086
    (cd "$src" && find $dirs \( -name '.*' -o -name 'build*' -o -name CMakeFiles -o -name __pycache__ \) \
        -prune -o -type f ! -name '*.o' ! -name '*.so' ! -name '*.a' ! -name '*.pyc' ! -name '*~' -print \
        2>/dev/null | LC_ALL=C sort) >"$tmp/files"
fi
if [ ! -s "$tmp/files" ]; then
    echo "FAIL: no files found under $dirs in $src" >&2
    exit 1
fi

# missing DOC: each listed path whose base name DOC does not name, one per line
missing() {
    while IFS= read -r f; do
        name=${f##*/}
        re=$(printf '%s\n' "$name" | sed 's/[].[\*^$+?(){}|]/\\&/g')
        # whole name: no name character before it, none after it (a '.' only as punctuation)
        grep -Eq "(^|[^A-Za-z0-9_])$re([^A-Za-z0-9_.]|\\.([^A-Za-z0-9_]|\$)|\$)" "$1" ||
            printf '%s\n' "$f"
    done <"$tmp/files"
}

# The plant: a copy of the page without one file's name must be caught.
plant=core/observe/trace_record.c
grep -qx "$plant" "$tmp/files" || plant=$(head -n 1 "$tmp/files")
plant_name=${plant##*/}
plant_re=$(printf '%s\n' "$plant_name" | sed 's/[].[\*^$+?(){}|/]/\\&/g')
sed "s/$plant_re//g" "$doc" >"$tmp/layout.md"
if ! missing "$tmp/layout.md" | grep -qx "$plant"; then
    echo "FAIL: a copy of docs/layout.md without '$plant_name' was not caught" >&2
    exit 1
fi

missing "$doc" >"$tmp/missing"
if [ -s "$tmp/missing" ]; then
    cat "$tmp/missing" >&2
    echo "FAIL: $(wc -l <"$tmp/missing" | tr -d ' ') file(s) above not named in docs/layout.md:" \
        "name it in docs/layout.md (its folder's list, a few words on its job)" >&2
    exit 1
fi
echo "ok: docs/layout.md names all $(wc -l <"$tmp/files" | tr -d ' ') files of $dirs (a planted omission of $plant_name was caught)"
