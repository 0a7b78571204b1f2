#!/bin/bash
# test_slurm.sh: submit.sh without a cluster says how to get one; then a real single-node Slurm on
# this machine, started as docs/sweeps.md says (scripts/slurm/local_cluster.sh: munged, slurmctld,
# slurmd, with a configuration generated into a temporary folder), a small mlp_sweep submitted through
# scripts/slurm/submit.sh as a 4-task job array plus its merge job, and the merged result checked
# against the same sweep run unsharded: the same points and columns, identical kernel counts,
# FLOPs and errors. Then a sweep whose tasks fail: the merge must not run and submit.sh must name
# the tasks' logs. Nothing is left running: every daemon is stopped by its pid on exit.
# Needs root (the daemons run as root) and slurm-wlm + munge (scripts/bootstrap.sh installs them);
# when they cannot start, it says why and fails.
#   tests/test_slurm.sh WORKBENCH_EXE SOURCE_DIR   (WORKBENCH_EXE: the build under test, handed to
#                                                   submit.sh as WB_EXE; the checkout's build/ is never used)
set -u
exe=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
# every submit.sh below runs the build under test, never the checkout's build/workbench (its default)
export WB_EXE="$exe"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# --- --partition and --time reach sbatch as one word each: a value with a space or a glob is
# refused (checked before anything needs Slurm or root)
log=$(mktemp) || fail "cannot create a temporary file"
for bad in "--partition a *" "--time 1:00 --wrap=id"; do
    opt=${bad%% *}
    SLURM_CONF=/nonexistent/slurm.conf "$src/scripts/slurm/submit.sh" "$opt" "${bad#* }" \
        "$src/experiments/mlp_sweep.lua" >"$log" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] && grep -qF "submit.sh: $opt '${bad#* }': expected" "$log" ||
        { cat "$log"; rm -f "$log"; fail "submit.sh $bad: exit status $rc, not refused by name"; }
done
rm -f "$log"

[ "$(id -u)" -eq 0 ] || fail "the Slurm test starts munged, slurmctld and slurmd as root: run it as root"
for tool in munged munge unmunge slurmctld slurmd sbatch squeue sinfo scontrol scancel; do
    command -v "$tool" >/dev/null 2>&1 || fail "'$tool' not found: install slurm-wlm and munge (scripts/bootstrap.sh does)"
done

tmp=$(mktemp -d /tmp/wb-slurm.XXXXXX) || fail "cannot create a temporary folder"
chmod 700 "$tmp"
cleanup() {
    "$src/scripts/slurm/local_cluster.sh" stop "$tmp/cluster"
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- without a cluster, submit.sh says how to get one on this machine, in one line
SLURM_CONF="$tmp/no-such.conf" "$src/scripts/slurm/submit.sh" "$src/experiments/mlp_sweep.lua" >"$tmp/none.log" 2>&1
rc=$?
cat "$tmp/none.log"
[ "$rc" -eq 2 ] || fail "submit.sh without a cluster exited with $rc, not 2"
[ "$(wc -l <"$tmp/none.log")" -eq 1 ] || fail "submit.sh without a cluster said more than one line"
grep -q "no Slurm cluster answers.*scripts/slurm/local_cluster.sh start DIR" "$tmp/none.log" ||
    fail "submit.sh without a cluster did not say how to start a local one"

# --- the documented local cluster: one node, this machine
"$src/scripts/slurm/local_cluster.sh" start "$tmp/cluster" || fail "local_cluster.sh could not start a cluster (above)"
export SLURM_CONF="$tmp/cluster/slurm.conf"

# --- the same small sweep, unsharded and as a 4-task array
# four token counts for four shards: a token count's modes stay in one shard (docs/sweeps.md)
sweep_args=(--tokens "1,3,5,7" --modes "eager,fused,dual" --dim 32 --hidden 64 --iters 2 --rounds 2 --trace-tokens 3
    --no-peer)
"$exe" --threads 1 --device cpu --out "$tmp/whole" "$src/experiments/mlp_sweep.lua" "${sweep_args[@]}" >"$tmp/whole.log" 2>&1 ||
    { cat "$tmp/whole.log"; fail "the unsharded sweep failed"; }
# the run's folder has a quote, a comma and a space in its name: submit.sh once broke on them
# (the merge job's --wrap quoting, sbatch --export's comma-separated list)
run="$tmp/it's, a run"
start=$(date +%s)
timeout 300 "$src/scripts/slurm/submit.sh" --shards 4 --cpus 1 --partition local --out "$run" --wait \
    "$src/experiments/mlp_sweep.lua" "${sweep_args[@]}" >"$tmp/submit.log" 2>&1
rc=$?
cat "$tmp/submit.log"
if [ "$rc" -ne 0 ]; then
    for f in "$run"/logs/*.log "$tmp"/cluster/slurm*.log; do echo "--- $f"; tail -n 20 "$f"; done
    fail "submit.sh --wait exited with status $rc"
fi
echo "array + merge took $(($(date +%s) - start)) s"
grep -q "^array job [0-9]* *: 4 tasks\|^array job [0-9]*: 4 tasks" "$tmp/submit.log" || fail "submit.sh did not print the array's job id"
grep -q "^merge job [0-9]*: runs after every task succeeded (afterok)" "$tmp/submit.log" || fail "submit.sh did not print the merge job's id"
grep -q "merged report: $run/merged/mlp_sweep.html" "$tmp/submit.log" || fail "submit.sh did not say where the report will be"
for i in 1 2 3 4; do
    [ -f "$run/shards/mlp_sweep.shard-$i-of-4.json" ] || fail "shard $i/4 wrote no results file"
    grep -q -- "--threads 1 --device cpu" "$run/logs/shard-$i.log" || fail "task $i did not run with --threads from SLURM_CPUS_PER_TASK"
done
[ -f "$run/merged/mlp_sweep.html" ] || fail "no merged report"
if grep -q "measured by different shards" "$run/logs/merge.log"; then
    cat "$run/logs/merge.log"
    fail "the merge found speedup pairs split across shards (a token count's modes must share a shard)"
fi

# the merged result against the unsharded one: every point, every structural field
WB_A="$tmp/whole/mlp_sweep.json" WB_B="$run/merged/mlp_sweep.json" "$exe" - <<'LUA' || fail "the merged result differs from the unsharded one (above)"
local cjson = require("cjson")
local function read(path)
    local f = assert(io.open(path))
    local d = cjson.decode(f:read("a"))
    f:close()
    return d
end
local a, b = read(os.getenv("WB_A")), read(os.getenv("WB_B"))
local problems = {}
local function check(ok, msg) if not ok then problems[#problems + 1] = msg end end
check(#a.rows == 12 and #b.rows == 12, string.format("rows: %d unsharded, %d merged (expected 12)", #a.rows, #b.rows))
check(b.fingerprint.merged_shards == 4, "the merged file does not say it joined 4 shards")
check(#b.shards == 4, "the merged file keeps " .. #(b.shards or {}) .. " shard fingerprints, not 4")
local cols = {}
for _, c in ipairs(a.columns) do cols[#cols + 1] = c end
cols[#cols + 1] = "shard"
check(table.concat(cols, ",") == table.concat(b.columns, ","), "columns: " .. table.concat(a.columns, ",") ..
    " (+shard) vs " .. table.concat(b.columns, ","))
local structural = {"tokens", "mode", "kernels", "flops", "rel_error"}
local shard_of = {}
for i, ra in ipairs(a.rows) do
    local rb = b.rows[i] or {}
    local t = rb.tokens or 0
    shard_of[t] = shard_of[t] or rb.shard
    check(rb.shard == shard_of[t], string.format("row %d: tokens=%s mode=%s ran in shard %s, its other modes in %s", i,
        tostring(rb.tokens), tostring(rb.mode), tostring(rb.shard), tostring(shard_of[t])))
    for _, k in ipairs(structural) do
        check(ra[k] == rb[k], string.format("row %d %s: %s unsharded, %s merged", i, k, tostring(ra[k]), tostring(rb[k])))
    end
    -- wb.bench runs until a minimum time too, so the counts differ; at least iters x rounds each
    check(type(rb.samples_ms) == "table" and #rb.samples_ms >= 4,
        string.format("row %d: %s raw samples merged (expected at least 2 iters x 2 rounds)", i,
            tostring(rb.samples_ms and #rb.samples_ms)))
    for _, k in ipairs({"median_ms", "p10_ms", "p90_ms", "gflops", "pct_peak", "speedup_vs_eager", "host_us"}) do
        check(type(rb[k]) == "number", string.format("row %d: merged %s is missing", i, k))
    end
    -- mlp_sweep's median: the median of the rounds' medians (samples_ms_per_round says how they divide)
    local stats = require("wb.stats")
    local per, at = {}, 0
    for r, n in ipairs(rb.samples_ms_per_round or {}) do
        per[r] = stats.summarize(table.move(rb.samples_ms, at + 1, at + n, 1, {})).median
        at = at + n
    end
    local s = stats.summarize(#per > 0 and per or {0})
    -- (to JSON's 14 digits: the samples and the median were each written that precisely)
    check(math.abs((rb.median_ms or 0) - s.median) <= 1e-12 * s.median,
        string.format("row %d: merged median %s is not the median of its rounds' medians %s", i,
            tostring(rb.median_ms), s.median))
end
if #problems > 0 then
    io.stderr:write(table.concat(problems, "\n") .. "\n")
    os.exit(1)
end
print("merged = unsharded: 12 points (a token count's modes in one shard), kernels, flops and errors identical; " ..
    "statistics from the raw samples")
LUA
"$exe" compare "$tmp/whole/mlp_sweep.json" "$run/merged/mlp_sweep.json" >"$tmp/compare.log" 2>&1 ||
    { cat "$tmp/compare.log"; fail "workbench compare refused the merged file"; }
grep -q "^structural differences: none" "$tmp/compare.log" || { cat "$tmp/compare.log"; fail "compare found structural differences"; }
grep -q "^only in" "$tmp/compare.log" && { cat "$tmp/compare.log"; fail "compare found rows in only one file"; }

# --- a failing array: every task rejects its arguments; the merge must not run
timeout 180 "$src/scripts/slurm/submit.sh" --shards 2 --partition local --out "$tmp/bad" --wait \
    "$src/experiments/mlp_sweep.lua" --modes eager,warp --no-peer >"$tmp/bad.log" 2>&1
rc=$?
cat "$tmp/bad.log"
[ "$rc" -ne 0 ] || fail "submit.sh --wait exited 0 although every task failed"
[ "$rc" -ne 124 ] || fail "the merge job of a failed array was still queued after 180 s (not cancelled)"
[ ! -e "$tmp/bad/merged" ] || fail "the merge ran although the array failed"
grep -q "shard 1/2 (exit status 2): $tmp/bad/logs/shard-1.log" "$tmp/bad.log" || fail "submit.sh did not name the failed task's log"
grep -q -e "--modes 'warp': expected" "$tmp/bad/logs/shard-1.log" || fail "the failed task's log does not say why it failed"
echo "PASS: Slurm array of 4 shards + afterok merge = the unsharded sweep; a failing array skips the merge and names its logs"
