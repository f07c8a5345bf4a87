#!/usr/bin/env bash
# A straggler and dynamic sharding (issue 21, data.balance): a data-parallel job of 2
# hosts of the namespace test bed (scripts/hosts/testbed.sh, root only), one node per
# host, one rank and one compute thread each, host 1 held to PERCENT of one CPU (a
# cgroup: testbed.sh cpu). The same job with data.balance = "equal" (each host half the
# batch: the step waits for the slow host) and "throughput" (whole micro-batches in
# proportion to each host's measured speed, re-shared every REBALANCE steps), RUNS runs
# each, interleaved; and the peer, PyTorch DDP (gloo over the same links, the same GPT
# and data, bench/peers/pytorch_ddp_hosts_train.py), whose every rank takes an equal
# slice. Prints per setting the median over runs of node 0's median step_ms (the first
# WARMUP steps left out), tokens/s, the final loss, the last step's shares, and the
# speed-up against equal shares.
# Usage: bench/hosts_balance.sh [--runs N] [--steps N] [--percent P] [--rebalance K]
#   [--no-ddp]   (~4 min with the defaults: 3 runs, 30 steps, 25% of a CPU, K = 5)
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
source bench/lib/common.sh
runs=3 steps=30 warmup=10 percent=25 rebalance=5 ddp=1
batch=16 micro=2 dim=128 layers=4 context=64
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --percent) percent=$2; shift 2 ;;
    --rebalance) rebalance=$2; shift 2 ;;
    --no-ddp) ddp=0; shift ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
(( steps > warmup )) || { echo "--steps must be more than $warmup" >&2; exit 2; }
start_hosts_bench bb hosts-balance
cleanup() { "$testbed" down "$bed" > /dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
build/bin/dseek data prepare --input /usr/lib/python3.11 --output "$work/text" --max-bytes 3000000 > /dev/null
mapfile -t addresses < <("$testbed" up "$bed" 2 | awk '{print $2}')
"$testbed" cpu "$bed" 1 "$percent"

# One job; prints "median_step_ms final_loss shares" (shares: node 0's/node 1's sequences).
job() {  # job DIR BALANCE
  local dir=$1 balance=$2
  run_hosts_job "$dir" $((29600 + RANDOM % 300)) \
    --set model.dim="$dim" --set model.layers="$layers" --set model.heads=4 \
    --set model.context="$context" --set train.batch_size="$batch" \
    --set train.micro_batch_size="$micro" --set train.steps="$steps" \
    --set train.warmup_steps=2 --set train.eval_every=0 --set train.threads=1 \
    --set metrics.progress='"off"' --set data.balance="\"$balance\"" \
    --set data.rebalance_every="$rebalance"
  "$py" - "$dir" "$warmup" "$batch" <<'PY'
import json, statistics, sys
def steps(node):
    return [e for e in map(json.loads, open(f"{sys.argv[1]}/node-{node}/events.jsonl")) if e["event"] == "step"]
zero, one = steps(0), steps(1)
ms = [e["step_ms"] for e in zero[int(sys.argv[2]):]]
half = int(sys.argv[3]) // 2
shares = f'{zero[-1].get("batch_share", half)}/{one[-1].get("batch_share", half)}'
print(statistics.median(ms), zero[-1]["loss"], shares)
PY
}

# One PyTorch DDP job; prints "median_step_ms final_loss".
ddp_job() {  # ddp_job LOG
  local log=$1 port=$((29300 + RANDOM % 300)) pids=()
  for k in 0 1; do
    "$testbed" exec "$bed" "$k" "$py" bench/peers/pytorch_ddp_hosts_train.py --rank "$k" --world 2 \
      --master "${addresses[0]}:$port" --ifname eth0 --data "$work/text" --powersgd 0 \
      --dim "$dim" --layers "$layers" --heads 4 --context "$context" --batch-size "$batch" \
      --steps "$steps" --warmup "$warmup" > "$log.rank$k" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if [[ $failed != 0 ]]; then echo "a DDP rank failed; see $log.rank*:" >&2; tail -5 "$log".rank* >&2; exit 1; fi
  "$py" - "$log.rank0" <<'PY'
import json, sys
out = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])
print(out["step_ms_median"], out["final_loss"])
PY
}
if [[ $ddp == 1 ]] && ! "$py" -c "import torch" 2> /dev/null; then
  echo "PyTorch DDP peer: skipped (no python3-torch: scripts/install-deps.sh bench)"; ddp=0
fi

machine_line ", $(date -u +%Y-%m-%d), UCX over TCP between 2 network namespaces"
echo "job: d=$dim, $layers layers, context $context, batch $batch in micro-batches of $micro," \
     "1 thread a host, host 1 held to $percent% of one CPU, $steps steps (median step_ms of" \
     "steps $((warmup + 1))-$steps), re-shared every $rebalance steps, $runs runs a setting"
declare -A step_ms=() loss=() shares=()
settings=(equal throughput)
[[ $ddp == 1 ]] && settings+=(ddp)
for ((r = 1; r <= runs; r++)); do
  for s in "${settings[@]}"; do
    if [[ $s == ddp ]]; then
      read -r m l < <(ddp_job "$work/ddp-$r")
      step_ms[$s]+="$m " loss[$s]=$l shares[$s]="$((batch / 2))/$((batch / 2))"
    else
      read -r m l sh < <(job "$work/$s-$r" "$s")
      step_ms[$s]+="$m " loss[$s]=$l shares[$s]+="$sh "
    fi
  done
done
tokens=$((batch * context))
for s in "${settings[@]}"; do
  # shellcheck disable=SC2086
  med=$(median ${step_ms[$s]})
  # shellcheck disable=SC2086
  printf '  %-10s step %7.1f ms (runs: %s) tokens/s %7.0f  final loss %.4f  last shares %s  speed-up vs equal %.2fx\n' \
    "$s" "$med" "$(echo ${step_ms[$s]} | xargs printf '%.0f ')" "$("$py" -c "print($tokens * 1000 / $med)")" \
    "${loss[$s]}" "${shares[$s]}" "$("$py" -c "print($(median ${step_ms[equal]}) / $med)")"
done
