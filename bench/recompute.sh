#!/usr/bin/env bash
# What activation recompute (model.recompute) costs and saves: `dseek bench train` on a
# config's model with model.recompute = none, every:2 and every:1, interleaved round by
# round so machine noise hits every setting alike. Prints, per setting, the median step
# time over the rounds (each round's own figure is the median of its timed steps), the
# tokens/s, the activation bytes the model allocated, and both against "none".
#
#   bench/recompute.sh [--config FILE] [--threads N] [--runs 3] [--steps 5]
#
# The comparison is dseek against itself (the same binary, the same BLAS kernel): the
# peer-free question is the time recompute adds for the memory it saves. The output is
# meant to be pasted into bench/RESULTS.md. Exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

config=config/single.toml threads=0 runs=3 steps=5 warmup=1
py=/usr/bin/python3
source bench/lib/common.sh
HELP_LINES=2,12 parse_train_bench_args "$@"

settings="none every:2 every:1"
field() { "$py" -c 'import sys, json; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }

echo "# activation recompute, $(date -u '+%Y-%m-%d %H:%M UTC'); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
machine_line ", train.threads $threads (0 = all cores)"
blas_line
read -r dim layers heads context vocab batch _ < <(model_shape "$config")
echo "model: $config: dim $dim, layers $layers, heads $heads, context $context, vocab $vocab, batch $batch; fp32; $steps timed steps after $warmup warm-up, $runs rounds"
declare -A ms bytes
for ((round = 1; round <= runs; ++round)); do
  for setting in $settings; do
    out=$("$dseek" bench train --config "$config" --threads "$threads" --steps "$steps" \
          --warmup "$warmup" --set "model.recompute=\"$setting\"")
    ms[$setting]+=" $(field step_ms_median <<<"$out")"
    bytes[$setting]=$(field activation_bytes <<<"$out")
    echo "round $round, $setting: step_ms_median $(field step_ms_median <<<"$out"), activation_bytes ${bytes[$setting]}, load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
echo
echo "| model.recompute | step ms (median) | rounds (ms) | tok/s | vs none (time) | activation MiB | vs none (memory) |"
echo "|---|---:|---|---:|---:|---:|---:|"
base_ms=$(median ${ms[none]})
for setting in $settings; do
  m=$(median ${ms[$setting]})
  "$py" - "$setting" "$m" "$base_ms" "${bytes[$setting]}" "${bytes[none]}" "$batch" "$context" "${ms[$setting]}" <<'PY'
import sys
setting, m, base, b, base_b, batch, ctx, rounds = sys.argv[1:9]
m, base, b, base_b = float(m), float(base), int(b), int(base_b)
tps = int(batch) * int(ctx) / (m / 1000)
rounds = " ".join(f"{float(r):.0f}" for r in rounds.split())
print(f"| {setting} | {m:.1f} | {rounds} | {tps:.0f} | {m / base:.2f} | {b / 2**20:.1f} | {b / base_b:.2f} |")
PY
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
