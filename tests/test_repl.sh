#!/bin/sh
# test_repl.sh: the REPL in a real terminal (tmux): a tensor assigned and printed, an
# expression's value, a bad view (error shown, REPL alive), a multi-line for loop, tab completion
# of a method, Ctrl-C of a long loop, the history file, Ctrl-D. Every check waits for text that
# only the output can contain (e.g. "ali" .. "ve1" -> alive1), never the echoed input.
set -eu
EXE=$1
command -v tmux >/dev/null 2>&1 || { echo "tmux is not installed: skipped"; exit 77; }
S="wbrepl$$"
HOME=$(mktemp -d)
export HOME
tmux new-session -d -s "$S" -x 160 -y 60 "$EXE"
trap 'tmux kill-session -t "$S" 2>/dev/null || true; rm -rf "$HOME"' EXIT

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

wait_for "REPL"
send 'x = wb.arange(6):view{3,2}' Enter
send 'x' Enter
wait_for "shape={3, 2}"
send '40 + 2' Enter
wait_for "42"
send 'x:view{4}' Enter
wait_for "view: shape {4} (4 elements) is invalid for a tensor of 6 elements"
send 'print("ali" .. "ve1")' Enter
wait_for "alive1"
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
echo "repl: all checks passed"
