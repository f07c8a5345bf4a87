#!/usr/bin/env bash
# Where AdamW runs, and what the overlapped CPU offload (train.offload_overlap) buys:
# dseek-node trains the default job's model for a few steps with the optimizer offloaded
# (train.offload = "optimizer": its gradient_shard actors update AdamW on the CPU) with
# the overlap on and off, and with AdamW on the device (train.offload = "none": the
# trainer's own, nothing staged through the host), on the CPU backend and on the
# scrambled test device (memory the host cannot read in place: an offloaded update goes
# through host staging and back, as on a GPU), rounds interleaved so machine noise hits
# every setting alike. Prints per setting the median step time, the median time the
# forward waited for updated chunks (offload_wait_ms), and the ratio against the
# offloaded optimizer without overlap.
#
#   bench/offload_overlap.sh [--device cpu|scrambled-cpu-for-tests|cuda ...] [--runs 3]
#                            [--steps 20] [--threads 2] [--config FILE] [--data DIR]
#                            [--text DIR]
#
# --device may be given several times (default: cpu and scrambled-cpu-for-tests);
# bench/gpu/check.sh runs it with --device cuda. --data: token shards of `dseek data
# prepare`; else 3 MB of the text files under --text (default /usr/lib/python3.11) are
# prepared into a temporary directory.
# On a 2-core machine the CPU backend's forward and the gradient_shard actors share the
# same two cores, so the overlap can only hide the update where a core would otherwise
# idle; what it shows here is that the step does not get slower and where the waits
# are. The win it is built for -- the update of later blocks hidden under the device's
# compute of the early ones -- needs a device that computes while the CPU updates.
# Exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

devices=() runs=3 steps=20 threads=2 config=config/single.toml data="" text=/usr/lib/python3.11
py=/usr/bin/python3
[[ -x $py ]] || py=python3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --device) devices+=("$2"); shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    -h|--help) sed -n 2,23p "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
((${#devices[@]})) || devices=(cpu scrambled-cpu-for-tests)
bin_dir=${DSEEK_BIN_DIR:-build/bin}
for b in dseek dseek-node; do
  [[ -x $bin_dir/$b ]] || { echo "$bin_dir/$b not found (set DSEEK_BIN_DIR)" >&2; exit 1; }
done
source bench/lib/common.sh

scratch=$(mktemp -d /tmp/dseek-offload-bench.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
if [[ -z $data ]]; then
  data=$scratch/text
  "$bin_dir/dseek" data prepare --input "$text" --output "$data" \
    --max-bytes 3000000 >"$scratch/prepare.log" 2>&1 || { cat "$scratch/prepare.log" >&2; exit 1; }
fi

# "median step_ms, median offload_wait_ms" of a run's step events, the first 2 left out
# (warm-up: the first step has no update to wait for, the second pays first touches).
summary() {
  "$py" - "$1" <<'PY'
import sys, json, glob, statistics
steps = []
for path in glob.glob(sys.argv[1] + "/**/events.jsonl", recursive=True):
    for line in open(path):
        e = json.loads(line)
        if e.get("event") == "step":
            steps.append(e)
steps.sort(key=lambda e: e["step"])
timed = steps[2:] or steps
print(f'{statistics.median(e["step_ms"] for e in timed):.1f}',
      f'{statistics.median(e.get("offload_wait_ms", 0.0) for e in timed):.3f}')
PY
}

echo "# offload overlap, $(date -u '+%Y-%m-%d %H:%M UTC'); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
machine_line ", train.threads $threads (gradient_shard actors, when offloaded: as many)"
read -r dim layers heads context vocab batch _ < <(model_shape "$config")
echo "model: $config: dim $dim, layers $layers, heads $heads, context $context, vocab $vocab, batch $batch; fp32; $steps steps (first 2 untimed), $runs rounds; one dseek-node, parallel.zero = 0"
declare -A ms wait
# train.offload:train.offload_overlap (the overlap is the offloaded optimizer's only).
settings=(optimizer:true optimizer:false none:false)
for ((round = 1; round <= runs; ++round)); do
  for device in "${devices[@]}"; do
    for setting in "${settings[@]}"; do
      offload=${setting%:*} overlap=${setting#*:}
      run=$scratch/run-$device-$offload-$overlap-$round
      "$bin_dir/dseek-node" --config "$config" --run-dir "$run" \
        --set "data.dir=\"$data\"" --set "train.steps=$steps" --set "train.threads=$threads" \
        --set "train.eval_every=0" --set "train.device=\"$device\"" \
        --set "train.offload=\"$offload\"" --set "train.offload_overlap=$overlap" \
        --set 'metrics.progress="plain"' \
        >"$run.log" 2>&1 || { tail -n 20 "$run.log" >&2; exit 1; }
      read -r m w < <(summary "$run")
      ms[$device,$setting]+=" $m"
      wait[$device,$setting]+=" $w"
      echo "round $round, $device, offload=$offload, offload_overlap=$overlap: step_ms $m, offload_wait_ms $w, load $(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
echo
echo "| train.device | train.offload | offload_overlap | step ms (median) | rounds (ms) | forward wait ms (median) | vs optimizer, overlap off |"
echo "|---|---|---|---:|---|---:|---:|"
for device in "${devices[@]}"; do
  base=$(median ${ms[$device,optimizer:false]})
  for setting in "${settings[@]}"; do
    m=$(median ${ms[$device,$setting]})
    w=$(median ${wait[$device,$setting]})
    "$py" - "$device" "$setting" "$m" "$base" "$w" "${ms[$device,$setting]}" <<'PY'
import sys
device, setting, m, base, w, rounds = sys.argv[1:7]
offload, overlap = setting.split(":")
m, base, w = float(m), float(base), float(w)
rounds = " ".join(f"{float(r):.1f}" for r in rounds.split())
wait = f"{w:.2f}" if overlap == "true" else "-"
overlap = overlap if offload == "optimizer" else "-"
print(f"| {device} | {offload} | {overlap} | {m:.1f} | {rounds} | {wait} | {m / base:.3f} |")
PY
  done
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
