#!/usr/bin/env bash
# Gradient compression on a link where bandwidth matters (issue 21): a data-parallel job
# of 2 hosts of the namespace test bed (scripts/hosts/testbed.sh, root only), one node
# per host, one rank and one compute thread each, every host's link limited with tc tbf
# to each RATE in turn; per rate the same job with comm.compression = none, topk
# (comm.topk_fraction 5%) and topk+int8, RUNS runs each, interleaved. Prints per setting
# the median over runs of node 0's median step_ms (the first WARMUP steps left out), the
# bytes both hosts sent onto the bridge per step (counted on the veth links,
# /sys/class/net/*/statistics, not by dseek), the final loss, the validation loss after
# the last step (and its gap to uncompressed), and the speed-up against uncompressed at
# that rate. The peer here is dseek itself, uncompressed.
# The control plane runs without TLS (cluster.plaintext = true): it carries no tensors.
# Usage: bench/hosts_compression.sh [--runs N] [--steps N] [--rates "1gbit 100mbit"]
#   [--batch N] [--context N]   (the global batch, default 12, and model.context, default 64)
#   (~4 min with the defaults: 3 runs, 16 steps, d=256 x 4 layers, 3.4M parameters)
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
source bench/lib/common.sh
runs=3 steps=16 warmup=4 rates="1gbit 100mbit" batch=12 context=64
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --context) context=$2; shift 2 ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) == 0 ]] || { echo "needs root (the test bed makes network namespaces)" >&2; exit 77; }
testbed=scripts/hosts/testbed.sh
"$testbed" check
bed="bc$(( $$ % 10000 ))"
work=$(mktemp -d /tmp/dseek-hosts-compression.XXXXXX)
cleanup() { "$testbed" down "$bed" > /dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
build/bin/dseek data prepare --input /usr/lib/python3.11 --output "$work/text" --max-bytes 3000000 > /dev/null
mapfile -t addresses < <("$testbed" up "$bed" 2 | awk '{print $2}')
link_bytes() { cat "/sys/class/net/dsk${bed}v0/statistics/rx_bytes" "/sys/class/net/dsk${bed}v1/statistics/rx_bytes" | paste -sd+ | bc; }

# One job; prints "median_step_ms bytes_per_step final_loss val_loss".
job() {  # job DIR COMPRESSION
  local dir=$1 compression=$2 port=$((29600 + RANDOM % 300)) before after
  before=$(link_bytes)
  local pids=()
  for k in 0 1; do
    DSEEK_CLUSTER_SECRET=bench-secret "$testbed" exec "$bed" "$k" build/bin/dseek-node \
      --config config/single.toml --run-dir "$dir" --node-id "$k" \
      --coordinator "${addresses[0]}:$port" --set cluster.nodes=2 \
      --set cluster.advertise_host="\"${addresses[$k]}\"" --set cluster.plaintext=true \
      --set data.dir="\"$work/text\"" --set checkpoint.every_steps=0 \
      --set model.dim=256 --set model.layers=4 --set model.heads=4 --set model.context="$context" \
      --set train.batch_size="$batch" --set train.steps="$steps" --set train.warmup_steps=2 \
      --set train.eval_every=0 --set train.threads=1 --set metrics.progress='"off"' \
      --set comm.compression="\"$compression\"" --set comm.topk_fraction=0.05 \
      > "$dir.node$k.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if [[ $failed != 0 ]]; then echo "a node failed; see $dir.node*.log:" >&2; tail -5 "$dir".node*.log >&2; exit 1; fi
  after=$(link_bytes)
  "$py" - "$dir/node-0/events.jsonl" "$warmup" "$((after - before))" "$steps" <<'PY'
import json, statistics, sys
events = [json.loads(l) for l in open(sys.argv[1])]
steps = [e for e in events if e["event"] == "step"]
ms = [e["step_ms"] for e in steps[int(sys.argv[2]):]]
done = [e for e in events if e["event"] == "train_done"]
val = done[-1].get("val_loss", -1) if done else -1  # the final evaluation (eval_every = 0)
print(statistics.median(ms), int(sys.argv[3]) / int(sys.argv[4]), steps[-1]["loss"], val)
PY
}

machine_line ", $(date -u +%Y-%m-%d), UCX over TCP between 2 network namespaces"
echo "job: d=256, 4 layers, context $context, batch $batch ($((batch / 2)) a host), 1 thread a host, $steps steps" \
     "(median step_ms of steps $((warmup + 1))-$steps), $runs runs a setting"
settings=(none topk topk+int8)
for rate in $rates; do
  "$testbed" rate "$bed" 0 "$rate"
  "$testbed" rate "$bed" 1 "$rate"
  declare -A step_ms=() bytes=() loss=() val=()
  for ((r = 1; r <= runs; r++)); do
    for s in "${settings[@]}"; do
      read -r m b l v < <(job "$work/$rate-$s-$r" "$s")
      step_ms[$s]+="$m " bytes[$s]+="$b " loss[$s]=$l val[$s]=$v
    done
  done
  # shellcheck disable=SC2086
  base=$(median ${step_ms[none]})
  echo "link $rate (tbf on both hosts' egress):"
  for s in "${settings[@]}"; do
    # shellcheck disable=SC2086
    med=$(median ${step_ms[$s]}) b=$(median ${bytes[$s]})
    printf '  %-10s step %8.1f ms (runs: %s) link bytes/step %10.0f  final loss %.4f  val_loss %.4f (%+.1f%% vs none)  speed-up vs none %.2fx\n' \
      "$s" "$med" "$(echo ${step_ms[$s]} | xargs printf '%.0f ')" "$b" "${loss[$s]}" "${val[$s]}" \
      "$("$py" -c "print(100 * (${val[$s]} / ${val[none]} - 1))")" "$("$py" -c "print($base / $med)")"
  done
  unset step_ms bytes loss val
done
