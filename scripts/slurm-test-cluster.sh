#!/usr/bin/env bash
# A throw-away Slurm cluster on this machine, for tests and benchmarks:
#   scripts/slurm-test-cluster.sh up      # start munged, slurmctld and one slurmd per virtual node
#   scripts/slurm-test-cluster.sh down    # stop every daemon it started, by PID file (never by name)
#   scripts/slurm-test-cluster.sh env     # print `export SLURM_CONF=...` for clients
#   scripts/slurm-test-cluster.sh rest    # also start slurmrestd (JWT auth) on a unix socket
#
# Several `slurmd -N nX` on 127.0.0.1 ports form a real Slurm 22.05 cluster with fake GPUs (gres.conf
# `AutoDetect=off`, `File=` symlinks to /dev/null), a two-rack topology.conf, a private munge socket
# and all state under $HIVE_SLURM_DIR. Nothing in /etc is modified. Needs root and Debian's
# slurmctld slurmd slurm-client munge (slurmrestd for `rest`).
#
# Environment:
#   HIVE_SLURM_DIR   state dir (default /tmp/hive-slurm)
#   HIVE_SLURM_NODES number of nodes (default 4; the first half is rack1, the rest rack2)
#   HIVE_SLURM_GPUS  fake GPUs per node (default 4)
#   HIVE_SLURM_PORT  slurmctld port (default 16817); slurmd ports are PORT+1..PORT+NODES
#   HIVE_SLURM_GPU_TYPE  GPU model (default a100)
#   HIVE_SLURM_GRES  per-index (default): one GRES type per GPU index, "<model>_g<i>", so a job can
#                    ask for exactly the GPUs hive-lab placed (docs/slurm.md); typed: "gpu:<model>:N"
set -euo pipefail
B=${HIVE_SLURM_DIR:-/tmp/hive-slurm}
NODES=${HIVE_SLURM_NODES:-4}
GPUS=${HIVE_SLURM_GPUS:-4}
PORT=${HIVE_SLURM_PORT:-16817}
MODEL=${HIVE_SLURM_GPU_TYPE:-a100}
GRES_MODE=${HIVE_SLURM_GRES:-per-index}
HOST=localhost
PIDFILES() { echo "$B/run/slurmrestd.pid $B/run/slurmctld.pid $B/run/"slurmd-*.pid "$B/munge/run/munged.pid"; }

down() {
  # Read every PID first (slurmd removes its PID file on SIGTERM before it has exited), keep only
  # live processes that are still the daemon we started (PIDs can be reused), TERM them, then KILL.
  [ -d "$B" ] || return 0
  local f pid pids=()
  for f in $(PIDFILES); do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [[ "$pid" =~ ^[0-9]+$ ]] && grep -qE 'slurm|munge' "/proc/$pid/comm" 2>/dev/null && pids+=("$pid")
  done
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  for _ in $(seq 1 50); do
    local alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] && alive+=("$pid"); done
    [ ${#alive[@]} = 0 ] && break
    sleep 0.1
  done
  for pid in "${alive[@]}"; do
    echo "slurm-test-cluster: pid $pid still alive after SIGTERM, killing" >&2
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -f $(PIDFILES)
  return 0
}

up() {
  [ "$(id -u)" = 0 ] || { echo "slurm-test-cluster: needs root (slurmd runs jobs as their users)" >&2; exit 2; }
  for b in slurmctld slurmd sbatch munged; do
    command -v $b >/dev/null || { echo "slurm-test-cluster: $b missing (apt-get install slurmctld slurmd slurm-client munge)" >&2; exit 2; }
  done
  down   # a previous run under the same dir
  rm -rf "$B/state" "$B/spool" "$B/etc"
  mkdir -p "$B"/{etc,state,log,run,fakedev,rest} "$B"/munge/{run,log,lib}
  for n in $(seq 1 "$NODES"); do mkdir -p "$B/spool/n$n"; done   # slurmd does not create them

  # munge on a private socket; munged wants o+x on the parent and its own files
  [ -f "$B/munge/munge.key" ] || dd if=/dev/urandom bs=1 count=128 of="$B/munge/munge.key" 2>/dev/null
  chown -R munge:munge "$B/munge"; chmod 711 "$B/munge"; chmod 700 "$B/munge/log" "$B/munge/lib"
  chmod 755 "$B/munge/run"; chmod 600 "$B/munge/munge.key"
  runuser -u munge -- /usr/sbin/munged --socket="$B/munge/run/munge.sock" --key-file="$B/munge/munge.key" \
    --log-file="$B/munge/log/munged.log" --pid-file="$B/munge/run/munged.pid" \
    --seed-file="$B/munge/lib/munged.seed" --force

  # fake GPUs: symlinks to /dev/null pass slurmd's "character device" check
  for i in $(seq 0 $((GPUS - 1))); do ln -sfn /dev/null "$B/fakedev/nvidia$i"; done
  # JWT key for slurmrestd acting for users (AuthAltTypes)
  [ -f "$B/etc/jwt_hs256.key" ] || dd if=/dev/urandom of="$B/etc/jwt_hs256.key" bs=32 count=1 2>/dev/null
  chmod 600 "$B/etc/jwt_hs256.key"

  local JWT_LINES=""   # slurmrestd acting for users needs Debian's slurm-wlm-jwt-plugin
  ls /usr/lib/*/slurm-wlm/auth_jwt.so >/dev/null 2>&1 && JWT_LINES="AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$B/etc/jwt_hs256.key"
  cat > "$B/etc/slurm.conf" <<CONF
ClusterName=hivelab
SlurmctldHost=$HOST
SlurmctldPort=$PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$B/munge/run/munge.sock
$JWT_LINES
StateSaveLocation=$B/state
SlurmdSpoolDir=$B/spool/%n
SlurmctldPidFile=$B/run/slurmctld.pid
SlurmdPidFile=$B/run/slurmd-%n.pid
SlurmctldLogFile=$B/log/slurmctld.log
SlurmdLogFile=$B/log/slurmd-%n.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu
TopologyPlugin=topology/tree
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=300
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
KillWait=3
InactiveLimit=0
CONF
  local gres_node gres_conf=""
  if [ "$GRES_MODE" = per-index ]; then
    gres_node=$(for i in $(seq 0 $((GPUS - 1))); do printf 'gpu:%s_g%s:1,' "$MODEL" "$i"; done); gres_node=${gres_node%,}
    for i in $(seq 0 $((GPUS - 1))); do
      gres_conf+="NodeName=n[1-$NODES] Name=gpu Type=${MODEL}_g$i File=$B/fakedev/nvidia$i"$'\n'
    done
  else
    gres_node="gpu:$MODEL:$GPUS"
    gres_conf="NodeName=n[1-$NODES] Name=gpu Type=$MODEL File=$B/fakedev/nvidia[0-$((GPUS - 1))]"$'\n'
  fi
  for n in $(seq 1 "$NODES"); do
    echo "NodeName=n$n NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((PORT + n)) CPUs=8 RealMemory=16000 Gres=$gres_node Features=$MODEL State=UNKNOWN" >> "$B/etc/slurm.conf"
  done
  cat >> "$B/etc/slurm.conf" <<CONF
PartitionName=low  Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP PriorityTier=1  PreemptMode=REQUEUE
PartitionName=high Nodes=n[1-$NODES] Default=NO  MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
CONF
  printf 'AutoDetect=off\n%s' "$gres_conf" > "$B/etc/gres.conf"
  local half=$((NODES / 2))
  [ "$half" -ge 1 ] || half=1
  {
    echo "SwitchName=rack1 Nodes=n[1-$half]"
    [ "$NODES" -gt "$half" ] && echo "SwitchName=rack2 Nodes=n[$((half + 1))-$NODES]" && echo "SwitchName=spine Switches=rack[1-2]"
  } > "$B/etc/topology.conf"
  echo "export SLURM_CONF=$B/etc/slurm.conf" > "$B/env"

  export SLURM_CONF=$B/etc/slurm.conf
  slurmctld -c                                             # -c: empty state, no stale INVAL reasons
  sleep 0.3
  kill -0 "$(cat "$B/run/slurmctld.pid" 2>/dev/null)" 2>/dev/null || {
    echo "slurm-test-cluster: slurmctld did not start:" >&2; tail -5 "$B/log/slurmctld.log" >&2; down; exit 1; }
  for n in $(seq 1 "$NODES"); do slurmd -N "n$n"; done
  for _ in $(seq 1 150); do
    [ "$(timeout 5 sinfo -h -N -p low -o %t 2>/dev/null | grep -c '^idle')" = "$NODES" ] && { echo "slurm-test-cluster: $NODES nodes idle ($B)"; return 0; }
    sleep 0.2
  done
  echo "slurm-test-cluster: nodes did not become idle" >&2; timeout 5 sinfo -R >&2 || true
  tail -20 "$B/log/slurmctld.log" >&2 || true
  down; exit 1
}

rest() {
  # slurmrestd refuses root and drops privileges before binding, so its socket dir belongs to nobody.
  command -v slurmrestd >/dev/null || { echo "slurm-test-cluster: slurmrestd missing" >&2; exit 2; }
  chown nobody:nogroup "$B/rest"; rm -f "$B/rest/rest.sock"
  export SLURM_CONF=$B/etc/slurm.conf
  ( setsid setpriv --reuid=nobody --regid=nogroup --clear-groups env SLURM_CONF="$SLURM_CONF" SLURM_JWT=daemon \
      slurmrestd -a rest_auth/jwt -s openapi/v0.0.38 "unix:$B/rest/rest.sock" \
      > "$B/log/slurmrestd.log" 2>&1 & echo $! > "$B/run/slurmrestd.pid" )
  for _ in $(seq 1 50); do [ -S "$B/rest/rest.sock" ] && { echo "slurm-test-cluster: slurmrestd on unix:$B/rest/rest.sock"; return 0; }; sleep 0.1; done
  echo "slurm-test-cluster: slurmrestd did not start" >&2; cat "$B/log/slurmrestd.log" >&2; exit 1
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  rest) rest ;;
  env) echo "export SLURM_CONF=$B/etc/slurm.conf" ;;
  *) echo "usage: $0 up|down|rest|env" >&2; exit 2 ;;
esac
