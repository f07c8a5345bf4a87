#!/usr/bin/env bash
# Pipeline-parallel schedules on this machine: tokens/s of GPipe, 1F1B and interleaved
# 1F1B (virtual_stages 2) at P = 2 and P = 4 stages (`dseek launch --nodes P` with
# parallel.pipeline = P, one stage per node, 1 thread each), with the bubble each stage
# measured against the schedule's theory ((p-1)/(m+p-1), (p-1)/(v*m+p-1) interleaved),
# and the single-node run of the same model and batch as the baseline.
#
#   bench/pipeline_schedules.sh [--config FILE] [--layers 8] [--micro-batches 8]
#                               [--steps 4] [--warmup 1] [--stages "2 4"] [--data DIR]
#                               [--run-timeout 600] [--keep]
#
# The model is the config's (default bench/configs/gpt-d384.toml) with --layers blocks
# (interleaved at P = 4 needs P x 2 <= layers) and its batch cut into --micro-batches.
# tokens/s: median over the steps after warm-up of node 0's step events; bubble: the
# median over those steps of the mean over stages of each stage's measured idle fraction
# (step events' "bubble": 1 - forward/backward compute time / pipeline time). The
# partition is "balanced" (measured costs). P = 4 on a 2-core machine is oversubscribed
# (4 single-threaded stages share 2 cores): the bubble then also contains time a stage
# waited for a core, and tokens/s is not a scaling figure. dseek: $DSEEK_BIN (default
# build/bin/dseek, dseek-node next to it). Exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

config=bench/configs/gpt-d384.toml layers=8 micro=8 steps=4 warmup=1 stage_list="2 4" data="" run_timeout=600 keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --micro-batches) micro=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --stages) stage_list=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
dseek=${DSEEK_BIN:-build/bin/dseek}
py=/usr/bin/python3
[[ -x $dseek ]] || { echo "dseek binary not found: $dseek (set DSEEK_BIN)" >&2; exit 1; }
t_begin=$SECONDS

source bench/lib/common.sh
read -r dim _ heads context vocab batch cfg_data < <(model_shape "$config")
data=$(prepared_data "$data" "$cfg_data")
work=$(mktemp -d "${TMPDIR:-/tmp}/pipeline_schedules.XXXXXX")
if (( keep )); then echo "run directories kept under $work" >&2; else trap 'rm -rf "$work"' EXIT; fi

# "tokens_per_s bubble bubble_theory stage_ranges" of a run (all nodes' step events).
stats() {
  "$py" - "$1" "$2" "$warmup" "$steps" <<'PY'
import json, statistics, sys, os
run, nodes, warmup, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def events(k):
    return [json.loads(l) for l in open(os.path.join(run, f"node-{k}", "events.jsonl")) if l.strip()]
ev = [events(k) for k in range(nodes)]
st = [[e for e in node if e["event"] == "step" and e["step"] > warmup] for node in ev]
if any(len(s) < steps for s in st):
    sys.exit(f"{run}: fewer than {steps} step events after warm-up")
tps = statistics.median(e["tokens_per_s"] for e in st[0])
if nodes == 1:
    print(f"{tps:.1f} - - -"); sys.exit()
per_step = [statistics.mean(st[k][i]["bubble"] for k in range(nodes)) for i in range(len(st[0]))]
plan = next(e for e in ev[0] if e["event"] == "pipeline_plan")
print(f'{tps:.1f} {statistics.median(per_step):.3f} {st[0][0]["bubble_theory"]:.3f} {plan["ranges"].replace(" ", "")}')
PY
}

run() {  # run NODES NAME SETTINGS...
  local n=$1 dir=$work/$2; shift 2
  local extra=()
  for s in "$@"; do extra+=(--set "$s"); done
  if ! "$dseek" launch --nodes "$n" --run-dir "$dir" --timeout "$run_timeout" "$config" \
         --set train.threads=1 --set train.steps=$((warmup + steps)) --set data.dir="$data" \
         --set model.layers="$layers" --set train.micro_batch_size=0 \
         --set train.eval_every=0 --set train.eval_batches=1 --set checkpoint.every_steps=0 \
         --set metrics.progress=plain --set metrics.log_every=1000 "${extra[@]}" >"$dir.log" 2>&1; then
    echo "dseek launch --nodes $n ($*) failed; the end of its log ($dir.log):" >&2
    tail -20 "$dir.log" >&2
    return 1
  fi
  stats "$dir" "$n"
}

echo "# dseek pipeline schedules, $(date -u '+%Y-%m-%d %H:%M UTC')"
machine_line ", load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "model: $config with layers=$layers: dim $dim, heads $heads, context $context, vocab $vocab; batch $batch in $micro micro-batches; fp32; 1 thread per stage; partition balanced"
echo "steps: $warmup warm-up + $steps timed; tokens/s and bubble = medians over the timed steps"
blas_line
echo
read -r base _ _ _ < <(run 1 single "train.micro_batch_size=$((batch / micro))") || exit 1
echo "| P | schedule | tok/s | vs 1 node | bubble measured | bubble theory | split |"
echo "|---:|---|---:|---:|---:|---:|---|"
printf '| 1 | (single node, %d micro-batches) | %.1f | 1.00 | - | - | - |\n' "$micro" "$base"
for P in $stage_list; do
  for schedule in gpipe 1f1b interleaved; do
    settings=("parallel.pipeline=$P" "parallel.schedule=\"$schedule\"" "parallel.micro_batches=$micro"
              "parallel.partition=\"balanced\"")
    [[ $schedule == interleaved ]] && settings+=("parallel.virtual_stages=2")
    read -r tps bubble theory split < <(run "$P" "p$P-$schedule" "${settings[@]}") || exit 1
    note=""; (( P > $(nproc) )) && note=" (oversubscribed: $P stages on $(nproc) cores)"
    printf '| %d | %s%s | %.1f | %.2f | %s | %s | %s |\n' "$P" "$schedule" "$note" "$tps" \
      "$("$py" -c "print($tps / $base)")" "$bubble" "$theory" "$split"
  done
done
echo
echo "total $((SECONDS - t_begin)) s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
