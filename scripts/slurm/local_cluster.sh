#!/bin/bash
# local_cluster.sh: a one-node Slurm cluster on this machine, for running scripts/slurm/submit.sh
# where there is no cluster (and for its test): munged with a key of its own, slurmctld and slurmd
# with a configuration generated into DIR (ports free on 127.0.0.1, this machine's CPUs, half its
# memory, one partition `local`). Runs as root (the daemons do); needs slurm-wlm and munge.
#
#   scripts/slurm/local_cluster.sh start DIR    # then: export SLURM_CONF=DIR/slurm.conf
#   scripts/slurm/local_cluster.sh stop DIR     # stops the daemons by their pid files, cancels jobs
set -u
fail() {
    echo "local_cluster.sh: $*" >&2
    exit 1
}
[ $# -eq 2 ] && { [ "$1" = start ] || [ "$1" = stop ]; } || fail "usage: local_cluster.sh start|stop DIR"
dir=$2

show_logs() {
    for f in munged.log slurmctld.log slurmd.log; do
        [ -f "$dir/$f" ] && { echo "--- $dir/$f (last lines)"; tail -n 15 "$dir/$f"; } >&2
    done
}

stop() {
    if [ -f "$dir/slurm.conf" ] && [ -f "$dir/slurmctld.pid" ]; then
        SLURM_CONF="$dir/slurm.conf" scancel --quiet --partition=local 2>/dev/null
    fi
    for f in slurmd slurmctld munged; do
        [ -f "$dir/$f.pid" ] && kill "$(cat "$dir/$f.pid")" 2>/dev/null
    done
    # wait (bounded) until they are gone, then make sure
    for _ in $(seq 1 50); do
        alive=""
        for f in slurmd slurmctld munged; do
            [ -f "$dir/$f.pid" ] && kill -0 "$(cat "$dir/$f.pid")" 2>/dev/null && alive=1
        done
        [ -z "$alive" ] && break
        sleep 0.2
    done
    for f in slurmd slurmctld munged; do
        [ -f "$dir/$f.pid" ] && kill -9 "$(cat "$dir/$f.pid")" 2>/dev/null
        rm -f "$dir/$f.pid"
    done
    return 0
}
if [ "$1" = stop ]; then
    stop
    exit 0
fi

[ "$(id -u)" -eq 0 ] || fail "the daemons (munged, slurmctld, slurmd) run as root: run it as root"
for tool in munged munge unmunge slurmctld slurmd sinfo scancel; do
    command -v "$tool" >/dev/null 2>&1 || fail "'$tool' not found: install slurm-wlm and munge (scripts/bootstrap.sh does)"
done
mkdir -p "$dir" || fail "cannot create $dir"
dir=$(cd "$dir" && pwd)
chmod 700 "$dir"
[ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null &&
    fail "a cluster from $dir is already running (local_cluster.sh stop $dir first)"
trap 'stop' INT TERM # a start cut short leaves nothing running

# a free TCP port (nothing answers on it), from a range that depends on this process
free_port() {
    local p=$1
    while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
    echo "$p"
}

# --- munged, with its own key and socket in DIR
dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$dir/munge.key"
munged --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" >"$dir/munged.out" 2>&1 ||
    { cat "$dir/munged.out" >&2; show_logs; stop; fail "munged did not start (output above)"; }
munge -n -S "$dir/munge.socket" | unmunge -S "$dir/munge.socket" >/dev/null 2>&1 ||
    { show_logs; stop; fail "munged started but a credential does not round-trip through $dir/munge.socket"; }

# --- slurm.conf for one node: this machine
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)
base=$((20000 + $$ % 20000))
ctld_port=$(free_port "$base")
slurmd_port=$(free_port $((ctld_port + 1)))
mkdir -p "$dir/state" "$dir/spool"
cat >"$dir/slurm.conf" <<CONF
ClusterName=wblocal
SlurmctldHost=$host
SlurmctldAddr=127.0.0.1
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerType=sched/backfill
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -i >"$dir/slurmctld.out" 2>&1 || { cat "$dir/slurmctld.out" >&2; show_logs; stop; fail "slurmctld did not start"; }
slurmd >"$dir/slurmd.out" 2>&1 || { cat "$dir/slurmd.out" >&2; show_logs; stop; fail "slurmd did not start"; }
state=""
for _ in $(seq 1 60); do
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null)
    [ "$state" = idle ] && break
    sleep 1
done
[ "$state" = idle ] || { show_logs; stop; fail "the node did not become idle within 60 s (state: '${state:-none}')"; }
echo "slurm up: node $host ($cpus CPUs), partition local, ports $ctld_port/$slurmd_port"
echo "export SLURM_CONF=$dir/slurm.conf   # then scripts/slurm/submit.sh ...; stop: local_cluster.sh stop $dir"
