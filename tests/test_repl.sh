#!/bin/sh
# test_repl.sh: the REPL in a real terminal (tmux): a tensor assigned and printed, an
# expression's value, tables printed as values (shape, stride, device_info, nested past the depth
# limit, self-referencing, a million items cut with a count), a bad view (message and position,
# no traceback; traceback() and traceback(true) show it), a multi-line for loop, tab completion
# of a method, a tensor field and lazily loaded modules, completion on nil, on a userdata
# without a metatable and on tables with hostile metatables, Ctrl-C on a continuation line (back
# to "> "), a profiler session lost to Ctrl-C and stopped with wb.profiler.current(), Ctrl-C of a
# long loop, the history file, Ctrl-D, a statement outgrowing --max-memory. Every check waits for
# text that only the output can contain (e.g. "ali" .. "ve1" -> alive1, or a whole line the input does not have),
# never the echoed input.
set -eu
EXE=$1
command -v tmux >/dev/null 2>&1 || { echo "tmux is not installed: skipped"; exit 77; }
S="wbrepl$$"
# Everything in one private folder: the REPL's HOME (its history file), and the sockets of the
# tmux servers. The test's own server has a socket of its own (-S), so a tmux server the user
# already runs is never joined: a session of that server would take the server's environment
# (the user's HOME, and their ~/.workbench_history). A decoy server on tmux's default socket
# (TMUX_TMPDIR points into the folder) plays the user's and must see nothing.
TEST_DIR=$(mktemp -d)
HOME=$TEST_DIR/home
TMUX_TMPDIR=$TEST_DIR
export HOME TMUX_TMPDIR
mkdir "$HOME" "$TEST_DIR/decoy-home"
unset TMUX
tmux() { command tmux -S "$TEST_DIR/test.sock" -f /dev/null "$@"; }
HOME=$TEST_DIR/decoy-home command tmux -f /dev/null new-session -d -s decoy "sleep 600" ||
    { echo "FAILED: tmux cannot start a server"; exit 1; }
trap 'tmux kill-server 2>/dev/null || true; command tmux kill-server 2>/dev/null || true; rm -rf "$TEST_DIR"' EXIT
trap 'exit 1' INT TERM
tmux new-session -d -s "$S" -x 160 -y 60 "env HOME='$HOME' $EXE"

# text is sent literally (-l: "end" must not become the End key), keys by name
send() {
    tmux send-keys -t "$S" -l "$1"
    shift
    for k in "$@"; do tmux send-keys -t "$S" "$k"; done
}
key() { tmux send-keys -t "$S" "$1"; }
screen() { tmux capture-pane -p -t "$S" -S -500; }
wait_for() {
    i=0
    while [ $i -lt 150 ]; do
        if screen | grep -qF -- "$1"; then return 0; fi
        sleep 0.1
        i=$((i + 1))
    done
    echo "FAILED: no '$1' on the screen:"
    screen
    exit 1
}

# a whole line of the screen, as an extended regular expression (optional: tenths of a second to
# wait, 150 by default)
wait_line() {
    i=0
    while [ $i -lt "${2:-150}" ]; do
        if screen | grep -qxE -- "$1"; then return 0; fi
        sleep 0.1
        i=$((i + 1))
    done
    echo "FAILED: no line '$1' on the screen:"
    screen
    exit 1
}

wait_for "REPL"
# an error inside a user's file under a folder named wb is placed there, not at the REPL's line
mkdir -p "$TEST_DIR/wb"
printf 'function bad_view() return wb.zeros{4}:view{5} end\n' >"$TEST_DIR/wb/user.lua"
send "dofile('$TEST_DIR/wb/user.lua') bad_view()" Enter
wait_line '[^ ]*wb/user\.lua:1: view: .*' # placed in the file, with no "stdin:1:" before it
send 'x = wb.arange(6):view{3,2}' Enter
send 'x' Enter
wait_for "shape={3, 2}"
send '40 + 2' Enter
wait_for "42"
send 'x:view{4}' Enter
wait_line "stdin:1: view: shape \{4\} \(4 elements\) is invalid for a tensor of 6 elements"
if screen | grep -qF "stack traceback"; then echo "FAILED: an error printed a full traceback"; screen; exit 1; fi
send 'traceback()' Enter
wait_line "stack traceback:"
wait_line "[[:space:]]+\[C\]: in method 'view'"
send 'f = function(v) return v.field end' Enter
send 'f(nil)' Enter
wait_line "stdin:1: attempt to index a nil value \(local 'v'\)"
send 'traceback(true)' Enter
wait_line "errors now print the full traceback"
send 'y = wb.arange(24):view{2, 3, 4}' Enter
send 'y:view{5}' Enter
wait_line "stdin:1: view: shape \{5\} \(5 elements\) is invalid for a tensor of 24 elements"
wait_line "[[:space:]]+stdin:1: in main chunk"
send 'traceback(false)' Enter
wait_line "errors now print their message and position"

# tables print as values
send 'y.shape' Enter
wait_line "\{2, 3, 4\}"
send 'y:stride()' Enter
wait_line "\{12, 4, 1\}"
send 'wb.device_info()' Enter
wait_line '  device = "cpu",' 1200 # the first call calibrates the ceilings (slow in the sanitizer build)
send 'd = {1, {2, {3, {4, {5, {6}}}}}}' Enter
send 'd' Enter
wait_line "\{1, \{2, \{3, \{4, \{\.\.\.\} \(2 items\)\}\}\}\}"
send 's = {n = 1}; s.me = s' Enter
send 's' Enter
wait_line "\{me = <cycle: table: 0x[0-9a-f]+>, n = 1\}"
send 'big = {}; for i = 1, 1000000 do big[i] = i end' Enter
send 'big' Enter
wait_line "  \.\.\. \(999960 more items\)"

# completion: a tensor field, modules loaded at first use, nothing to complete on nil or a bare userdata
send 'print("S" .. #y.sh' Tab
send ')' Enter
wait_for "S3"
send 'print(wb.nn.Lin' Tab
send ' == nil and "no" or "lin" .. "ear")' Enter
wait_for "linear"
send 'print(wb.compi' Tab
send ' == nil and "no" or "com" .. "pile")' Enter
wait_for "compile"
send 'print(wb.prof' Tab
send '.profile == nil and "no" or "prof" .. "iler")' Enter
wait_for "profiler"
send 'n = nil; u = io.tmpfile(); debug.setmetatable(u, nil)' Enter
send 'n.' Tab Tab
send 'x' Enter
send 'u.' Tab Tab
send 'x' Enter
send 'u:' Tab Tab
send 'x()' Enter
# ... and on tables whose metatable's own metatable answers __index with an error, or a loop
# (completion read the metatable's fields through it: the REPL died of a Lua panic, or hung)
send 'h = setmetatable({}, setmetatable({}, {__index = function() error("boom") end}))' Enter
send 'h.' Tab Tab
send 'x' Enter
send 'l = setmetatable({}, setmetatable({}, {__index = function() while true do end end}))' Enter
send 'l.' Tab Tab
send 'x' Enter
send 'pk = package; package = setmetatable({}, {__index = function() error("boom") end})' Enter
send 'wb.pro' Tab Tab
send 'x' Enter
send 'package = pk' Enter
send 'print("ali" .. "ve0")' Enter
wait_for "alive0"

# Ctrl-C on a continuation line drops the chunk and the prompt is "> " again
send 'for i = 1, 2 do' Enter
wait_line ">> ?"
key C-c
send 'print("ctrl" .. "c")' Enter
wait_for "ctrlc"
wait_line '> print\("ctrl" \.\. "c"\)'
send 'print("ali" .. "ve1")' Enter
wait_for "alive1"

# A profiler session lost to Ctrl-C: p:start() prints nothing, a chunk is interrupted, p is made
# anew; its start names the running one and the way out, which works (no collectgarbage)
send 'p = wb.profiler.profile{}' Enter
send 'p:start()' Enter
send 'for i = 1, 2 do' Enter
wait_line ">> ?"
key C-c
send 'p = wb.profiler.profile{}' Enter
send 'p:start()' Enter
running='profiler: start\(\): a session is already running \(started at [0-9:]{8}; sessions do not nest\); '
wait_line "${running}stop it with wb\.profiler\.current\(\):stop\(\)"
send 'wb.profiler.current():stop()' Enter
send 'p:start()' Enter
send 'p:stop()' Enter
send 'print("prof" .. "iler " .. tostring(wb.profiler.current()))' Enter
wait_for "profiler nil"
if screen | grep -qE "native|step_num|cycles_done"; then
    echo "FAILED: start() or stop() printed the session"
    screen
    exit 1
fi
send 'for i = 1, 2 do' Enter
send 'print("loop" .. i * 10)' Enter
send 'end' Enter
wait_for "loop20"
send 'print("T" .. x:transp' Tab
send '(1, 2):stride()[2])' Enter
wait_for "T2"
send 'y = 1;' Enter
send 'print("silent" .. y)' Enter
wait_for "silent1"
send 'while true do end' Enter
sleep 0.5
key C-c
wait_for "interrupted!"
send 'print("ali" .. "ve2")' Enter
wait_for "alive2"
key C-d
i=0
while tmux has-session -t "$S" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
    [ $i -lt 50 ] || { echo "FAILED: Ctrl-D did not leave the REPL"; screen; exit 1; }
done
grep -qF 'print("ali" .. "ve1")' "$HOME/.workbench_history" || { echo "FAILED: no history file"; exit 1; }
[ ! -e "$TEST_DIR/decoy-home/.workbench_history" ] || { echo "FAILED: the REPL wrote another server's HOME"; exit 1; }
command tmux has-session -t decoy 2>/dev/null || { echo "FAILED: the decoy server is gone"; exit 1; }

# A statement that outgrows --max-memory: the REPL names the limit and goes on (not in the
# sanitizer build, which does not apply --max-memory)
if ! "$EXE" --version | grep -qF "ASan"; then
    tmux new-session -d -s "$S" -x 160 -y 60 "env HOME='$HOME' $EXE --max-memory 256M"
    wait_for "REPL"
    send 'local t = {} for i = 1, 1e9 do t[i] = i end' Enter
    wait_for "address space limit of 256 MiB (--max-memory"
    send 'print("ali" .. "ve3")' Enter
    wait_for "alive3"
    tmux kill-session -t "$S"
fi
echo "repl: all checks passed"
