#!/usr/bin/env bash
# Detection and recovery times on the namespace test bed (issue 21): a data-parallel job
# of 3 hosts (scripts/hosts/testbed.sh, root only), one node per host, one rank and one
# compute thread each, the tiny model; per round and fault, at step FAULT_STEP of node 0:
#   kill         node 2's process SIGKILLed for good (the survivors go on without it)
#   hang         node 2's process SIGSTOPped (alive, silent: the heartbeat timeout)
#   cut          node 2's link taken down (tc-free: ip link down), back after 6 s
#   coordinator  node 0's process (it runs the coordinator) SIGKILLed for good; the
#                survivors move the coordinator to node 1's backup
# Printed per fault, medians over ROUNDS: detection = from the fault to the first survivor's
# node_lost (coordinator: its coordinator_failover), recovery = from the fault to the
# survivor's `recovered` event (its first step done after it), and the `recovered` event's
# own recovery_ms (from the failure the node saw). Survivor: node 0, or node 1 when node 0
# is the fault. Heartbeats at their defaults (250 ms, timeout 1500 ms), elastic.rejoin_seconds
# = 0 (no wait for the lost node), elastic.min_nodes = 2.
#
# The anchor, side by side on the same machine: torchrun's agent (elastic_launch, c10d rendezvous)
# with 3 workers on loopback training the same-sized GPT under DDP (gloo), a checkpoint
# every step (bench/peers/torchrun_elastic_train.py); one worker SIGKILLed at the same
# step: torchrun stops every worker and starts them all again; recovery = from the kill to
# the first step completed after the restart. (A hung peer under gloo waits for its
# timeout, 30 minutes by default, NCCL's watchdog 10 minutes: not measured.)
# Usage: bench/hosts_recovery.sh [--rounds N] [--steps N] [--no-torch]
#   (~3 min with the defaults: 3 rounds, 60 steps)
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
source bench/lib/common.sh
rounds=3 steps=60 fault_step=20 torch=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --no-torch) torch=0; shift ;;
    -h|--help) sed -n 2,24p "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
start_hosts_bench br hosts-recovery
cleanup() {
  for k in 0 1 2; do
    for pid in $(ip netns pids "dseek-$bed-h$k" 2>/dev/null); do kill -CONT "$pid" 2>/dev/null || true; kill -KILL "$pid" 2>/dev/null || true; done
  done
  pkill -KILL -f "torchrun_elastic_train.py --dir $work" 2>/dev/null || true
  "$testbed" down "$bed" > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
build/bin/dseek data prepare --input /usr/lib/python3.11 --output "$work/text" --max-bytes 3000000 > /dev/null
mapfile -t addresses < <("$testbed" up "$bed" 3 | awk '{print $2}')
now() { date +%s.%N; }

# The pid (in this namespace) of the dseek-node process of host K.
node_pid() {
  local pid
  for pid in $(ip netns pids "dseek-$bed-h$1"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == dseek-node ]] && { echo "$pid"; return; }
  done
}

# Waits (up to 120 s) until node 0 of run DIR has completed step S.
wait_step() {
  local dir=$1 s=$2 node=${3:-0}
  for ((i = 0; i < 1200; i++)); do
    if [[ -f $dir/node-$node/events.jsonl ]] && "$py" - "$dir/node-$node/events.jsonl" "$s" <<'PY'
import json, sys
done = [json.loads(l)["step"] for l in open(sys.argv[1]) if l.endswith("}\n") and '"event":"step"' in l]
sys.exit(0 if done and max(done) >= int(sys.argv[2]) else 1)
PY
    then return 0; fi
    sleep 0.1
  done
  echo "node $node of $dir never reached step $s" >&2; return 1
}

# One round of fault F; prints "detection_ms recovery_ms recovered_recovery_ms".
round() {  # round DIR FAULT
  local dir=$1 fault=$2 port=$((29700 + RANDOM % 200)) pids=() extra=()
  if [[ $fault == coordinator ]]; then
    extra=(--set cluster.backup_coordinators="\"1@${addresses[1]}:$((port + 1)) 2@${addresses[2]}:$((port + 2))\"")
  fi
  for k in 0 1 2; do
    DSEEK_CLUSTER_SECRET=bench-secret "$testbed" exec "$bed" "$k" build/bin/dseek-node \
      --config config/single.toml --run-dir "$dir" --node-id "$k" \
      --coordinator "${addresses[0]}:$port" --set cluster.nodes=3 \
      --set cluster.advertise_host="\"${addresses[$k]}\"" --set cluster.plaintext=true \
      --set data.dir="\"$work/text\"" --set checkpoint.every_steps=0 \
      --set model.dim=64 --set model.layers=2 --set model.heads=4 --set model.context=64 \
      --set train.batch_size=12 --set train.steps="$steps" --set train.warmup_steps=5 \
      --set train.eval_every=0 --set train.threads=1 --set metrics.progress='"off"' \
      --set elastic.rejoin_seconds=0 --set elastic.min_nodes=2 "${extra[@]}" \
      > "$dir.node$k.log" 2>&1 &
    pids+=($!)
  done
  wait_step "$dir" "$fault_step"
  local at survivor=0 victim=2
  case "$fault" in
    kill) at=$(now); kill -KILL "$(node_pid 2)" ;;
    hang) at=$(now); kill -STOP "$(node_pid 2)" ;;
    cut) at=$(now); "$testbed" cut "$bed" 2 ;;
    coordinator) survivor=1 victim=0; at=$(now); kill -KILL "$(node_pid 0)" ;;
  esac
  # The survivor trains again: a recovered event after the fault (bounded).
  for ((i = 0; i < 600; i++)); do
    grep -q '"event":"recovered"' "$dir/node-$survivor/events.jsonl" 2>/dev/null && break
    sleep 0.1
  done
  case "$fault" in
    hang) sleep 0.5; kill -KILL "$(node_pid 2)" 2>/dev/null || true ;;
    cut) sleep 5; "$testbed" heal "$bed" 2 ;;
  esac
  # The survivors finish the run; the victim (killed, or cut off and rejoining a job that
  # may have ended meanwhile) is given 15 s and then killed: its exit is not measured.
  for k in 0 1 2; do
    [[ $k == "$victim" ]] && continue
    if ! wait "${pids[$k]}"; then
      echo "node $k failed in round $dir; see $dir.node$k.log:" >&2; tail -5 "$dir.node$k.log" >&2; exit 1
    fi
  done
  for ((i = 0; i < 150; i++)); do [[ -n $(node_pid "$victim") ]] || break; sleep 0.1; done
  [[ -n $(node_pid "$victim") ]] && kill -KILL "$(node_pid "$victim")"
  wait "${pids[$victim]}" 2>/dev/null || true
  "$py" - "$dir/node-$survivor/events.jsonl" "$at" "$fault" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.endswith("}\n")]
at, fault = float(sys.argv[2]), sys.argv[3]
def first(pred):
    return next((e for e in events if e["ts"] >= at and pred(e)), None)
if fault == "coordinator":
    seen = first(lambda e: e["event"] == "membership" and e.get("kind") == "coordinator_failover")
else:
    seen = first(lambda e: e["event"] == "node_lost")
recovered = first(lambda e: e["event"] == "recovered")
if seen is None or recovered is None:
    sys.exit(f"{sys.argv[1]}: no {'failover' if fault == 'coordinator' else 'node_lost'} or "
             "recovered event after the fault")
print(f"{(seen['ts'] - at) * 1000:.0f} {(recovered['ts'] - at) * 1000:.0f} "
      f"{recovered.get('recovery_ms', 0):.0f}")
PY
}

# The anchor: torchrun, one worker killed; prints the recovery in ms.
torch_round() {  # torch_round DIR
  local dir=$1 port=$((29900 + RANDOM % 90))
  mkdir -p "$dir"
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE \
    "$py" bench/peers/torchrun_elastic_train.py --launch 3 --port "$port" --max-restarts 3 \
      --dir "$dir" --steps "$steps" --dim 64 --layers 2 --heads 4 --context 64 --batch-size 12 \
      > "$dir.log" 2>&1 &
  local agent=$! at
  for ((i = 0; i < 1200; i++)); do
    [[ -f $dir/steps.jsonl ]] && [[ $(wc -l < "$dir/steps.jsonl") -ge $fault_step ]] && break
    sleep 0.1
  done
  local worker
  worker=$(pgrep -f "torchrun_elastic_train.py --dir $dir" | while read -r p; do
             [[ $(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -c '^LOCAL_RANK=2$') == 1 ]] && echo "$p"
           done | head -1)
  [[ -n $worker ]] || { echo "no torchrun worker of local rank 2 found" >&2; exit 1; }
  at=$(now)
  kill -KILL "$worker"
  wait "$agent" || { echo "torchrun failed; see $dir.log:" >&2; tail -5 "$dir.log" >&2; exit 1; }
  "$py" - "$dir/steps.jsonl" "$at" <<'PY'
import json, sys
at = float(sys.argv[2])
after = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["ts"] >= at]
restarted = [s for s in after if s["restart"] > 0]
if not restarted:
    sys.exit("torchrun: no step after the restart")
print(f"{(restarted[0]['ts'] - at) * 1000:.0f}")
PY
}

machine_line ", $(date -u +%Y-%m-%d), 3 network namespaces, UCX over TCP"
echo "job: d=64, 2 layers, context 64, batch 12 (4 a host), 1 thread a host, $steps steps," \
     "fault at step $fault_step, $rounds rounds a fault"
printf '%-12s %-28s %-28s %-24s\n' fault "detection ms (runs)" "recovery ms (runs)" "recovered.recovery_ms"
for fault in kill hang cut coordinator; do
  det="" rec="" own=""
  for ((r = 1; r <= rounds; r++)); do
    read -r d c o < <(round "$work/$fault-$r" "$fault")
    det+="$d " rec+="$c " own+="$o "
  done
  # shellcheck disable=SC2086
  printf '%-12s %-28s %-28s %-24s\n' "$fault" "$(median $det) ($det)" "$(median $rec) ($rec)" "$(median $own) ($own)"
  # shellcheck disable=SC2086
  [[ $fault == kill ]] && kill_recovery=$(median $rec)
done
if [[ $torch == 1 ]]; then
  if ! "$py" -c "import torch" 2> /dev/null; then
    echo "torchrun anchor: skipped (no python3-torch: scripts/install-deps.sh bench)"
  else
    rec=""
    for ((r = 1; r <= rounds; r++)); do rec+="$(torch_round "$work/torch-$r") "; done
    # shellcheck disable=SC2086
    torch_recovery=$(median $rec)
    printf '%-12s %-28s %-28s\n' "torchrun" "(a worker killed)" "$torch_recovery ($rec)"
    echo "a killed worker: torchrun's recovery / dseek's = $("$py" -c "print(round($torch_recovery / $kill_recovery, 1))")x" \
         "(dseek's survivors go on from memory; torchrun restarts every worker from the checkpoint)"
  fi
fi
