#!/usr/bin/env bash
# Long-context training throughput on the CPU: `dseek bench train` (tiled attention:
# runtime/backend/cpu_attention.cpp keeps one logsumexp per row, memory grows with T)
# against its PyTorch peer (bench/peers/pytorch_gpt_train.py) at several contexts, fp32,
# one sequence per step, on the same threads.
#
#   bench/long_context_vs_torch.sh [--config FILE] [--threads "2"] [--runs 3] [--steps 2]
#                                  [--contexts "1024 4096"]
#
# The peer's attention: torch's fused scaled_dot_product_attention where the installed
# torch has it (2.0 and later; its CPU kernel is flash-style), else the manual
# softmax(q k^T) v, which materializes T x T per head (Debian's torch 1.13 has no SDPA:
# the header says which ran). Runs alternate dseek / PyTorch, each side first in every
# other round; prints each run's tokens/s and peak RSS, then a table of medians with
# dseek/pytorch. Exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

config=bench/configs/gpt-d384.toml threads="2" runs=3 steps=2 warmup=1 contexts="1024 4096"
py=/usr/bin/python3
source bench/lib/common.sh
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --contexts) contexts=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
HELP_LINES=2,15 parse_train_bench_args "${args[@]+"${args[@]}"}"
read -r dim layers heads _ vocab _ _ < <(model_shape "$config")
attention=$("$py" -c 'import torch.nn.functional as F; print("sdpa" if hasattr(F, "scaled_dot_product_attention") else "manual")')

echo "# dseek vs PyTorch at long contexts, $(date -u '+%Y-%m-%d %H:%M UTC')"
machine_line
echo "model: $config: dim $dim, layers $layers, heads $heads, vocab $vocab; 1 sequence per step; fp32"
echo "steps: $warmup warm-up + $steps timed per run, $runs runs per side, alternating first"
blas_line
echo "PyTorch: $("$py" -c 'import torch; print(torch.__version__)'), attention $attention, OMP_WAIT_POLICY=PASSIVE"
echo "load: $(uptime | sed 's/.*load average/load average/')"
echo

rss_log=$(mktemp)
trap 'rm -f "$rss_log"' EXIT
run_dseek() {  # threads context
  /usr/bin/time -f %M -o "$rss_log" "$dseek" bench train --config "$config" --threads "$1" \
    --steps "$steps" --warmup "$warmup" --set "model.context=$2" --set "train.batch_size=1" | tps
}
run_torch() {  # threads context
  OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS="$1" /usr/bin/time -f %M -o "$rss_log" \
    "$py" bench/peers/pytorch_gpt_train.py --dim "$dim" --layers "$layers" --heads "$heads" \
    --context "$2" --vocab "$vocab" --batch-size 1 --threads "$1" --steps "$steps" \
    --warmup "$warmup" --attention "$attention" | tps
}

declare -A med rss
for n in $threads; do
  for T in $contexts; do
    declare -A runs_of=()
    for ((r = 1; r <= runs; r++)); do
      order="dseek torch"
      (( r % 2 == 0 )) && order="torch dseek"
      line="threads $n context $T run $r:"
      for side in $order; do
        value=$("run_$side" "$n" "$T") || { echo "$side failed (threads $n, context $T)" >&2; exit 1; }
        runs_of[$side]+="$value "
        rss[$n-$T-$side]=$(( $(cat "$rss_log") / 1024 ))
        line+=" $side $value tok/s (${rss[$n-$T-$side]} MiB)"
      done
      echo "$line"
    done
    for side in dseek torch; do
      # shellcheck disable=SC2086
      med[$n-$T-$side]=$(median ${runs_of[$side]})
    done
  done
done

echo
echo "| threads | context | dseek tok/s | pytorch tok/s | dseek/pytorch | dseek peak RSS MiB | pytorch peak RSS MiB |"
echo "|--------:|--------:|------------:|--------------:|--------------:|-------------------:|---------------------:|"
for n in $threads; do
  for T in $contexts; do
    printf '| %7s | %7s | %11.1f | %13.1f | %13.2f | %18s | %20s |\n' "$n" "$T" \
      "${med[$n-$T-dseek]}" "${med[$n-$T-torch]}" \
      "$("$py" -c "print(${med[$n-$T-dseek]} / ${med[$n-$T-torch]})")" \
      "${rss[$n-$T-dseek]}" "${rss[$n-$T-torch]}"
  done
done
