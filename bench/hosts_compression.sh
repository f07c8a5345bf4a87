#!/usr/bin/env bash
# Gradient compression on a link where bandwidth matters (issue 21): a data-parallel job
# of 2 hosts of the namespace test bed (scripts/hosts/testbed.sh, root only), one node
# per host, one rank and one compute thread each, every host's link limited with tc tbf
# to each RATE in turn; per rate the same job with each comm.compression of --settings
# (default none, int8, topk and topk+int8; comm.topk_fraction 5% unless --topk-fraction),
# RUNS runs each, interleaved. Prints per setting
# the median over runs of node 0's median step_ms (the first WARMUP steps left out), the
# bytes both hosts sent onto the bridge per step (counted on the veth links,
# /sys/class/net/*/statistics, not by dseek), the final loss, the validation loss after
# the last step (and its gap to uncompressed), and the speed-up against uncompressed at
# that rate. The peers: dseek itself, uncompressed; and PyTorch DDP (gloo over the same
# links, one rank a host, bench/peers/pytorch_ddp_hosts_train.py: the same GPT and data,
# a constant lr 1e-3) plain and with its PowerSGD hook (rank R, error feedback, warm
# start), in the same rounds; printed with the ratio of dseek top-k + INT8's tokens/s to
# DDP + PowerSGD's (the same global batch a step: the inverse ratio of step times).
# The control plane runs without TLS (cluster.plaintext = true): it carries no tensors.
# Usage: bench/hosts_compression.sh [--runs N] [--steps N] [--rates "1gbit 100mbit"]
#   [--batch N] [--context N]   (the global batch, default 12, and model.context, default 64)
#   [--no-ddp] [--powersgd-rank R]   (without the PyTorch peer; its PowerSGD rank, default 4)
#   [--settings "none int8 topk topk+int8"] [--topk-fraction F]   (dseek's; "none" must be one)
#   (~6 min with the defaults: 3 runs, 16 steps, d=256 x 4 layers, 3.4M parameters)
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
source bench/lib/common.sh
runs=3 steps=16 warmup=4 rates="1gbit 100mbit" batch=12 context=64 ddp=1 powersgd_rank=4 settings="none int8 topk topk+int8" topk_fraction=0.05
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --context) context=$2; shift 2 ;;
    --no-ddp) ddp=0; shift ;;
    --settings) settings=$2; shift 2 ;;
    --topk-fraction) topk_fraction=$2; shift 2 ;;
    --powersgd-rank) powersgd_rank=$2; shift 2 ;;
    -h|--help) sed -n 2,21p "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
start_hosts_bench bc hosts-compression
cleanup() { "$testbed" down "$bed" > /dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
build/bin/dseek data prepare --input /usr/lib/python3.11 --output "$work/text" --max-bytes 3000000 > /dev/null
mapfile -t addresses < <("$testbed" up "$bed" 2 | awk '{print $2}')
link_bytes() { cat "/sys/class/net/dsk${bed}v0/statistics/rx_bytes" "/sys/class/net/dsk${bed}v1/statistics/rx_bytes" | paste -sd+ | bc; }

# One job; prints "median_step_ms bytes_per_step final_loss val_loss".
job() {  # job DIR COMPRESSION
  local dir=$1 compression=$2 port=$((29600 + RANDOM % 300)) before after
  before=$(link_bytes)
  run_hosts_job "$dir" "$port" \
    --set model.dim=256 --set model.layers=4 --set model.heads=4 --set model.context="$context" \
    --set train.batch_size="$batch" --set train.steps="$steps" --set train.warmup_steps=2 \
    --set train.eval_every=0 --set train.threads=1 --set metrics.progress='"off"' \
    --set comm.compression="\"$compression\"" --set comm.topk_fraction="$topk_fraction"
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

# One PyTorch DDP job (PowerSGD rank R, 0: plain); prints "median_step_ms bytes_per_step
# final_loss val_loss".
ddp_job() {  # ddp_job LOG R
  local log=$1 rank=$2 port=$((29300 + RANDOM % 300)) before after pids=()
  before=$(link_bytes)
  for k in 0 1; do
    "$testbed" exec "$bed" "$k" "$py" bench/peers/pytorch_ddp_hosts_train.py --rank "$k" --world 2 \
      --master "${addresses[0]}:$port" --ifname eth0 --data "$work/text" --powersgd "$rank" \
      --dim 256 --layers 4 --heads 4 --context "$context" --batch-size "$batch" \
      --steps "$steps" --warmup "$warmup" > "$log.rank$k" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if [[ $failed != 0 ]]; then echo "a DDP rank failed; see $log.rank*:" >&2; tail -5 "$log".rank* >&2; exit 1; fi
  after=$(link_bytes)
  "$py" - "$log.rank0" "$((after - before))" "$steps" <<'PY'
import json, sys
out = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])
print(out["step_ms_median"], int(sys.argv[2]) / int(sys.argv[3]), out["final_loss"], out["val_loss"])
PY
}
if [[ $ddp == 1 ]] && ! "$py" -c "import torch" 2> /dev/null; then
  echo "PyTorch DDP peer: skipped (no python3-torch: scripts/install-deps.sh bench)"; ddp=0
fi

machine_line ", $(date -u +%Y-%m-%d), UCX over TCP between 2 network namespaces"
echo "job: d=256, 4 layers, context $context, batch $batch ($((batch / 2)) a host), 1 thread a host, $steps steps" \
     "(median step_ms of steps $((warmup + 1))-$steps), $runs runs a setting"
# One printed setting S against its baseline B (none, or ddp for the PyTorch rows).
row() {  # row S B
  local s=$1 base med b
  # shellcheck disable=SC2086
  base=$(median ${step_ms[$2]}) med=$(median ${step_ms[$s]}) b=$(median ${bytes[$s]})
  # shellcheck disable=SC2086
  printf '  %-13s step %8.1f ms (runs: %s) link bytes/step %10.0f  final loss %.4f  val_loss %.4f (%+.1f%% vs %s)  speed-up vs %s %.2fx\n' \
    "$s" "$med" "$(echo ${step_ms[$s]} | xargs printf '%.0f ')" "$b" "${loss[$s]}" "${val[$s]}" \
    "$("$py" -c "print(100 * (${val[$s]} / ${val[$2]} - 1))")" "$2" "$2" "$("$py" -c "print($base / $med)")"
}

read -r -a settings <<< "$settings"
[[ " ${settings[*]} " == *" none "* ]] || { echo "--settings must include none" >&2; exit 2; }
peers=()
[[ $ddp == 1 ]] && peers=(ddp ddp+powersgd)
for rate in $rates; do
  "$testbed" rate "$bed" 0 "$rate"
  "$testbed" rate "$bed" 1 "$rate"
  declare -A step_ms=() bytes=() loss=() val=()
  for ((r = 1; r <= runs; r++)); do
    for s in "${settings[@]}"; do
      read -r m b l v < <(job "$work/$rate-$s-$r" "$s")
      step_ms[$s]+="$m " bytes[$s]+="$b " loss[$s]=$l val[$s]=$v
    done
    for p in "${peers[@]}"; do
      read -r m b l v < <(ddp_job "$work/$rate-$p-$r" "$([[ $p == ddp ]] && echo 0 || echo "$powersgd_rank")")
      step_ms[$p]+="$m " bytes[$p]+="$b " loss[$p]=$l val[$p]=$v
    done
  done
  echo "link $rate (tbf on both hosts' egress):"
  for s in "${settings[@]}"; do row "$s" none; done
  for p in "${peers[@]}"; do row "$p" ddp; done
  if [[ ${#peers[@]} -gt 0 ]]; then
    # shellcheck disable=SC2086
    [[ -n ${step_ms[topk+int8]:-} ]] &&
      echo "  dseek topk+int8 tokens/s / DDP+PowerSGD tokens/s: $("$py" -c "print(round($(median ${step_ms[ddp+powersgd]}) / $(median ${step_ms[topk+int8]}), 2))")x"
  fi
  unset step_ms bytes loss val
done
