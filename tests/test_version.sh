#!/bin/sh
# test_version.sh SOURCE_DIR EXE: the commit a build names is the checkout's at build time.
# cmake/version.cmake (which every build runs) on a scratch git repository: the header names its
# commit, is left untouched (same mtime) when nothing changed, and follows a new commit; then the
# built workbench's --version names the commit of the source it was built from (when that is a
# git checkout: a tarball names "unknown" on both sides).
src=$1 exe=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/version.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
repo=$tmp/repo out=$tmp/wb_version.h
mkdir -p "$repo/core/base" && cp "$src/core/base/version.h.in" "$repo/core/base/" || exit 1
git() { command git -C "$repo" -c user.name=t -c user.email=t@t -c commit.gpgsign=false "$@"; }
git init -q && git add -A && git commit -qm one || fail "git init/commit in $repo"
run() { cmake -DSOURCE_DIR="$repo" -DOUTPUT="$out" -DPROJECT_VERSION=9.8.7 -P "$src/cmake/version.cmake" || fail "version.cmake"; }
run
first=$(git rev-parse --short=12 HEAD)
grep -q "WB_GIT_COMMIT \"$first\"" "$out" || fail "the header does not name $first: $(cat "$out")"
grep -q 'WB_VERSION "9.8.7"' "$out" || fail "the header does not name the version: $(cat "$out")"
touch -d '2000-01-01' "$out"
run
[ "$(date -r "$out" +%Y)" = 2000 ] || fail "the header was rewritten with nothing changed (everything that includes it would recompile)"
echo two > "$repo/file" && git add file && git commit -qm two
run
second=$(git rev-parse --short=12 HEAD)
grep -q "WB_GIT_COMMIT \"$second\"" "$out" || fail "after a new commit the header still says: $(cat "$out")"
echo "ok: version.cmake names $first, keeps the header when nothing changed, then names $second"
if command git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    want=$(command git -C "$src" describe --always --dirty --abbrev=12)
    got=$("$exe" --version | sed -n 's/.*(commit \([^,]*\),.*/\1/p')
    [ "$got" = "$want" ] || fail "workbench --version names commit '$got', the source is at '$want' (a build runs the wb_version target; rebuild after a commit)"
    echo "ok: workbench --version names $got, the source's commit"
fi
