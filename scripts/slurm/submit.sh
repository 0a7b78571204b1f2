#!/bin/sh
# submit.sh: runs a wb.sweep experiment on a Slurm cluster as a job array (one shard per task,
# scripts/slurm/sweep.sbatch) and a merge job that runs only when every task succeeded
# (--dependency=afterok); prints the job ids, the logs and where the merged report will be.
#
#   scripts/slurm/submit.sh [options] EXPERIMENT [experiment arguments...]
#     --shards N          array tasks, one shard each (default 4; at most the sweep's groups: mlp_sweep's token counts)
#     --cpus N            CPUs per task, passed to workbench as --threads (default 1)
#     --gpu               one GPU per task (--gres=gpu:1); the task runs on device cuda
#     --partition P       Slurm partition (default: the cluster's default)
#     --time T            time limit per task (Slurm's format, e.g. 30:00)
#     --out DIR           the run's folder, on a file system every node sees
#                         (default: out/<experiment>/slurm-<date>)
#     --wait              wait for the merge; exit non-zero and name the failed tasks' logs if any failed
# Runs $WB_EXE, else the checkout's build/workbench: it and the repository must be on a file system the nodes see.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

usage() {
    sed -n '6,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
fail() { echo "submit.sh: $*" >&2; exit 2; }
# one word for a shell (the merge job's --wrap): single-quoted, each ' written as '\''
shell_quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

shards=4 cpus=1 gpu=0 partition="" time_limit="" out="" wait=0
while [ $# -gt 0 ]; do
    case "$1" in
        --shards) [ $# -ge 2 ] || fail "--shards needs a value"; shards=$2; shift 2 ;;
        --cpus) [ $# -ge 2 ] || fail "--cpus needs a value"; cpus=$2; shift 2 ;;
        --gpu) gpu=1; shift ;;
        --partition) [ $# -ge 2 ] || fail "--partition needs a value"; partition=$2; shift 2 ;;
        --time) [ $# -ge 2 ] || fail "--time needs a value"; time_limit=$2; shift 2 ;;
        --out) [ $# -ge 2 ] || fail "--out needs a value"; out=$2; shift 2 ;;
        --wait) wait=1; shift ;;
        -h|--help) usage ;;
        --) shift; break ;;
        -*) fail "unknown option '$1' (run with --help)" ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || usage
case "$shards" in ''|*[!0-9]*) fail "--shards $shards: expected a whole number >= 1" ;; esac
case "$cpus" in ''|*[!0-9]*) fail "--cpus $cpus: expected a whole number >= 1" ;; esac
[ "$shards" -ge 1 ] || fail "--shards $shards: expected a whole number >= 1"
[ "$cpus" -ge 1 ] || fail "--cpus $cpus: expected a whole number >= 1"
# (each goes to sbatch as one word: a space or a glob character would add options or files)
case "$partition" in
    *[!A-Za-z0-9_.,-]*) fail "--partition '$partition': expected a partition name (letters, digits, _ . - and ,)" ;;
esac
case "$time_limit" in
    *[!A-Za-z0-9:-]*) fail "--time '$time_limit': expected a Slurm time (e.g. 30:00, 1-12:00:00 or UNLIMITED)" ;;
esac
experiment=$1
shift
[ -f "$experiment" ] || fail "no experiment script at $experiment"
experiment=$(cd "$(dirname "$experiment")" && pwd)/$(basename "$experiment")
exe=${WB_EXE:-$root/build/workbench}
[ -x "$exe" ] || fail "no workbench executable at $exe (build it with scripts/bootstrap.sh, or set WB_EXE)"
command -v sbatch >/dev/null 2>&1 || fail "sbatch not found: this needs a Slurm cluster (Debian: slurm-client)"
# a cluster that answers, or one line saying how to get one here (sbatch alone says "fatal: Could
# not establish a configuration source")
local_hint="on one machine, start one with scripts/slurm/local_cluster.sh start DIR (as root) and export SLURM_CONF=DIR/slurm.conf"
[ -z "${SLURM_CONF:-}" ] || [ -f "$SLURM_CONF" ] || fail "no Slurm cluster answers (SLURM_CONF=$SLURM_CONF: no such file): $local_hint"
if ! why=$(timeout 20 sinfo -h -o %P 2>&1 >/dev/null); then
    fail "no Slurm cluster answers ($(printf '%s' "${why:-no answer in 20 s}" | head -n 1 | sed 's/^sinfo: //')): $local_hint"
fi

name=$(basename "$experiment" .lua)
[ -n "$out" ] || out="out/$name/slurm-$(date +%Y%m%d-%H%M%S)"
case "$out" in *"
"*) fail "--out: a folder name with a line break is not supported" ;; esac
mkdir -p "$out/logs" "$out/status" "$out/shards"
out=$(cd "$out" && pwd)
# Slurm reads %-patterns in --output (a literal % is %%); the variables travel in the environment
# (--export=ALL), since --export's own list splits values at commas
logs=$(printf '%s' "$out/logs" | sed 's/%/%%/g')

set -- "$experiment" "$@"
common=""
[ -n "$partition" ] && common="$common --partition=$partition"
[ -n "$time_limit" ] && common="$common --time=$time_limit"
gres=""
[ "$gpu" -eq 1 ] && gres="--gres=gpu:1"

# shellcheck disable=SC2086 # common and gres are lists of options
array=$(WB_EXE=$exe WB_RUN_DIR=$out sbatch --parsable $common $gres --array="1-$shards" --cpus-per-task="$cpus" \
    --output="$logs/shard-%a.log" --export=ALL "$here/sweep.sbatch" "$@") || fail "sbatch of the array failed (above)"
array=${array%%;*}
# The merge runs only when every task ended with status 0; if one fails, Slurm cancels it
# (--kill-on-invalid-dep) instead of leaving it pending forever.
# shellcheck disable=SC2086
merge=$(sbatch --parsable $common --job-name=wb-merge --dependency="afterok:$array" --kill-on-invalid-dep=yes \
    --output="$logs/merge.log" --wrap="$(shell_quote "$exe") merge $(shell_quote "$out/merged") $(shell_quote "$out/shards")") ||
    fail "sbatch of the merge job failed (above); the array $array is submitted: scancel $array to stop it"
merge=${merge%%;*}

cat <<MSG
array job $array: $shards tasks of $name, one shard each (--cpus $cpus${gres:+, $gres})
  task logs:   $out/logs/shard-<I>.log (I = 1..$shards); shard results under $out/shards
merge job $merge: runs after every task succeeded (afterok); if a task fails it is cancelled:
  read that task's log above (its exit status is in $out/status/shard-<I>.rc)
  merge log:   $out/logs/merge.log
merged report: $out/merged/$name.html (results: $out/merged/$name.json)
MSG
[ "$wait" -eq 1 ] || exit 0

# --wait: follow the merge job until it leaves the queue, then say how it ended.
while squeue -h -j "$merge" -o %T 2>/dev/null | grep -q .; do sleep 2; done
if [ -f "$out/merged/$name.json" ]; then
    echo "merged: $out/merged/$name.json"
    exit 0
fi
failed=""
i=1
while [ "$i" -le "$shards" ]; do
    rc=$(cat "$out/status/shard-$i.rc" 2>/dev/null || echo "none")
    [ "$rc" = 0 ] || failed="$failed
  shard $i/$shards (exit status $rc): $out/logs/shard-$i.log"
    i=$((i + 1))
done
if [ -n "$failed" ]; then
    echo "submit.sh: the merge did not run: these array tasks failed (their logs):$failed" >&2
else
    echo "submit.sh: every task succeeded but the merge failed: $out/logs/merge.log" >&2
fi
exit 1
