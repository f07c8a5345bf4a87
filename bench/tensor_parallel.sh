#!/usr/bin/env bash
# Tensor parallelism on this machine, whole jobs: tokens/s of T = 2 (`dseek launch
# --nodes 2` with parallel.tensor = 2, 1 thread per rank, UCX over shared memory) against
# the whole model on one node with 1 and with 2 threads: same config, same batch, same
# steps, data loading, events and evaluation included.
#
#   bench/tensor_parallel.sh [--config FILE] [--steps 4] [--warmup 1] [--repeats 3]
#                            [--data DIR] [--run-timeout 600]
#
# The model is the config's (default bench/configs/gpt-d384.toml). tokens/s: the median
# over the steps after warm-up of node 0's step events; the table gives the median over
# --repeats runs. dseek: $DSEEK_BIN (default build/bin/dseek, dseek-node next to it).
# Exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

config=bench/configs/gpt-d384.toml steps=4 warmup=1 repeats=3 data="" run_timeout=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
dseek=${DSEEK_BIN:-build/bin/dseek}
py=/usr/bin/python3
[[ -x $dseek ]] || { echo "dseek binary not found: $dseek (set DSEEK_BIN)" >&2; exit 1; }
source bench/lib/common.sh
read -r dim layers heads context vocab batch cfg_data < <(model_shape "$config")
data=$(prepared_data "$data" "$cfg_data")
work=$(mktemp -d "${TMPDIR:-/tmp}/tensor_parallel.XXXXXX")
trap 'rm -rf "$work"' EXIT

# One job of NODES nodes with THREADS threads each and more --set SETTINGS; prints node
# 0's median tokens/s over the timed steps.
run() {
  local nodes=$1 threads=$2 dir
  shift 2
  dir=$(mktemp -d -p "$work")
  local extra=()
  for s in "$@"; do extra+=(--set "$s"); done
  if ! "$dseek" launch --nodes "$nodes" --run-dir "$dir/run" --timeout "$run_timeout" "$config" \
         --set train.threads="$threads" --set train.steps=$((warmup + steps)) \
         --set data.dir="$data" --set train.eval_every=0 --set checkpoint.every_steps=0 \
         --set metrics.progress=off "${extra[@]}" >"$dir.log" 2>&1; then
    echo "dseek launch --nodes $nodes ($*) failed; the end of its log ($dir.log):" >&2
    tail -20 "$dir.log" >&2
    return 1
  fi
  "$py" - "$dir/run/node-0/events.jsonl" "$warmup" "$steps" <<'PY'
import json, statistics, sys
path, warmup, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
st = [e for e in map(json.loads, filter(str.strip, open(path))) if e["event"] == "step" and e["step"] > warmup]
if len(st) < steps:
    sys.exit(f"{path}: fewer than {steps} step events after warm-up")
print(f'{statistics.median(e["tokens_per_s"] for e in st):.1f}')
PY
}

machine_line
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $config: dim $dim, layers $layers, heads $heads, context $context, vocab $vocab; batch $batch;" \
     "$warmup warm-up + $steps timed steps; median of $repeats runs"
echo
echo "| run | nodes x threads | tok/s (median) | runs | vs 1 node, 1 thread |"
echo "|---|---|---:|---|---:|"
base=""
for spec in "1 1 whole model" "1 2 whole model" "2 1 T=2"; do
  read -r nodes threads label <<< "$spec"
  settings=()
  [[ $label == T=2 ]] && settings=(parallel.tensor=2)
  figures=()
  for ((i = 0; i < repeats; i++)); do figures+=("$(run "$nodes" "$threads" "${settings[@]}")") || exit 1; done
  m=$(median "${figures[@]}")
  [[ -z "$base" ]] && base=$m
  ratio=$("$py" -c "print(f'{$m / $base:.2f}')")
  echo "| $label | $nodes x $threads | $m | ${figures[*]} | $ratio |"
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
