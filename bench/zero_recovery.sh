#!/usr/bin/env bash
# What the ZeRO peer replica (elastic.shard_replica: each node keeps its ring
# neighbour's optimizer shard, dist/stage_memory_sync.hpp) buys and costs, on
# one config run both ways: `dseek launch --nodes N` of config/single.toml with
# parallel.zero = 1 (or --zero 2), a checkpoint every `every` steps written synchronously,
# and node 1 killed at step `kill` (restarted by the launcher, it rejoins).
#
#   bench/zero_recovery.sh [--nodes 2] [--zero 1] [--steps 40] [--every 10] [--kill 22]
#                          [--rounds 2] [--data DIR] [--dir DIR]
#
# Per run (rounds interleaved: replica on, off, on, ...):
#  - recovery_ms of every node's `recovered` event (from the failure the node saw to its
#    first completed step after it) and its source: peer (memory) or disk;
#  - back_ms: from the kill to node 0's completion of step kill + 1, the first step no
#    node had done before (so a disk recovery's steps done again are counted);
#  - the step time: the median over the steps of node 0 of the time between two step
#    events (so the replica's exchange, which runs between steps, is counted), the steps
#    around the kill left out;
#  - the peer_replica event after the last step: bytes received per step, and the mean
#    time of the exchange over the steps after the recovery.
# --kill 0 runs the same job without the fault (the step time alone).
# Exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

nodes=2 zero=1 steps=40 every=10 kill=22 rounds=2 data="" dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --zero) zero=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --kill) kill=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
launcher=${DSEEK_BIN:-build/bin/dseek}
[[ -x $launcher ]] || { echo "dseek binary not found: $launcher (set DSEEK_BIN)" >&2; exit 1; }
export DSEEK_NODE_BINARY=${DSEEK_NODE_BINARY:-$(dirname "$launcher")/dseek-node}
work=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/dseek-zero-recovery.XXXXXX")}
mkdir -p "$work"
trap '[[ -z $dir ]] && rm -rf "$work"' EXIT
data_set=()
[[ -n $data ]] && data_set=(--set data.dir="\"$data\"")
fault=()
((kill > 0)) && fault=(--set "faults=[{kind = \"kill\", node = 1, step = $kill}]")

what="node 1 killed at step $kill"
((kill > 0)) || what="no fault"
echo "# ZeRO $zero recovery: config/single.toml on $nodes nodes, $steps steps, sync checkpoint every $every, $what, $rounds rounds, $(nproc) cores"

run() {  # replica(true|false) round -> one summary line
  local replica=$1 round=$2 run_dir="$work/$1-$2"
  "$launcher" launch --nodes "$nodes" --run-dir "$run_dir" config/single.toml \
    --set train.steps="$steps" --set train.eval_every=0 --set metrics.progress='"off"' \
    --set parallel.zero="$zero" --set elastic.shard_replica="$replica" \
    --set checkpoint.every_steps="$every" --set checkpoint.async=false \
    "${fault[@]}" "${data_set[@]}" \
    >"$run_dir.log" 2>&1 || { echo "run $replica/$round failed:" >&2; tail -30 "$run_dir.log" >&2; exit 1; }
  /usr/bin/python3 - "$run_dir" "$nodes" "$kill" <<'PY'
import json, statistics, sys, pathlib
run, nodes, kill = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def events(node):
    return [json.loads(l) for l in open(run / f"node-{node}" / "events.jsonl") if l.strip()]
rec, sources = [], set()
for n in range(nodes):
    for e in events(n):
        if e["event"] == "recovered":
            rec.append(e["recovery_ms"]); sources.add(e["source"])
ev0 = events(0)
steps = [e for e in ev0 if e["event"] == "step"]
gaps = [b["ts"] - a["ts"] for a, b in zip(steps, steps[1:])
        if b["step"] == a["step"] + 1 and not (kill - 1 <= a["step"] <= kill + 2)]
rep = [e for e in ev0 if e["event"] == "peer_replica"]
back_ms = 0
if kill > 0:
    kill_ts = [e["ts"] for e in events(1) if e["event"] == "fault_injected" and e["kind"] == "kill"][0]
    back_ms = 1000 * ([e["ts"] for e in steps if e["step"] == kill + 1 and e["ts"] > kill_ts][0] - kill_ts)
print(statistics.median(rec) if rec else 0, max(rec) if rec else 0, "/".join(sorted(sources)) or "-",
      1000 * statistics.median(gaps), rep[-1]["replica_bytes"] if rep else 0,
      rep[-1]["mean_exchange_ms"] if rep else 0, back_ms)
PY
  rm -rf "$run_dir/checkpoints"
}

declare -A results
for ((r = 1; r <= rounds; r++)); do
  for replica in true false; do
    line=$(run "$replica" "$r")
    results[$replica]+="$line"$'\n'
    echo "round $r shard_replica=$replica: recovery_ms(median max) source step_ms(median) replica_bytes mean_exchange_ms back_ms = $line"
  done
done

/usr/bin/python3 - "${results[true]}" "${results[false]}" <<'PY'
import statistics, sys
def parse(text):
    return [l.split() for l in text.strip().splitlines()]
print()
print("| elastic.shard_replica | source | recovery_ms (median over nodes, median of rounds) | worst | kill to step kill+1 done, ms | step ms (median) | replica bytes / step | exchange ms (mean) |")
print("|---|---|---|---|---|---|---|---|")
for name, rows in zip(["true", "false"], map(parse, sys.argv[1:3])):
    med = statistics.median(float(r[0]) for r in rows)
    worst = max(float(r[1]) for r in rows)
    step = statistics.median(float(r[3]) for r in rows)
    back = statistics.median(float(r[6]) for r in rows)
    exchange = statistics.median(float(r[5]) for r in rows)
    print(f"| {name} | {rows[0][2]} | {med:.0f} | {worst:.0f} | {back:.0f} | {step:.1f} | {int(float(rows[0][4]))} | {exchange:.1f} |")
PY
