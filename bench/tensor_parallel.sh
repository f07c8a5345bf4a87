#!/usr/bin/env bash
# Tensor parallelism on this machine: tokens/s of T = 2 ranks (two dseek_tp_rank
# processes, 1 thread each, UCX over shared memory) against the whole model in one
# process on 1 and on 2 threads, same model, same batch, same steps.
#
#   bench/tensor_parallel.sh [--dim 256] [--layers 4] [--heads 4] [--context 128]
#                            [--vocab 256] [--batch 8] [--steps 6] [--repeats 3]
#
# Each run times steps 2..N (the first pays for page faults and UCX connections) and
# prints tokens/s; a T = 2 run's figure is rank 0's. The table gives the median over
# --repeats runs. This is a synthetic-batch training loop (tests/tensor/tp_rank_main.cpp:
# forward, backward, AdamW; no data loading, no events): it measures the model split and
# its all-reduces, not a whole job. The program: $TP_RANK (default build/bin/dseek_tp_rank).
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
source bench/lib/common.sh

dim=256 layers=4 heads=4 context=128 vocab=256 batch=8 steps=6 repeats=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dim|--layers|--heads|--context|--vocab|--batch|--steps|--repeats)
      declare "${1#--}=$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
tp_rank=${TP_RANK:-build/bin/dseek_tp_rank}
shape=(--dim "$dim" --layers "$layers" --heads "$heads" --context "$context" --vocab "$vocab"
       --batch "$batch" --steps "$steps")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One run of `ranks` processes with `threads` threads each; prints rank 0's tokens/s.
run() {
  local ranks=$1 threads=$2 dir
  dir=$(mktemp -d -p "$work")
  mkdir -p "$dir/rendezvous"
  local pids=()
  for ((r = 0; r < ranks; r++)); do
    timeout 600 "$tp_rank" --rank "$r" --size "$ranks" --bootstrap "file:$dir/rendezvous" \
      --out "$dir" --threads "$threads" "${shape[@]}" > "$dir/out-$r.txt" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  sed -n 's/^rank 0: tokens_per_s //p' "$dir/out-0.txt"
}

machine_line
blas_line
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: dim $dim, layers $layers, heads $heads, context $context, vocab $vocab; batch $batch;" \
     "$steps steps (steps 2..$steps timed); median of $repeats runs"
echo
echo "| run | processes x threads | tok/s (median) | runs | vs 1 process, 1 thread |"
echo "|---|---|---:|---|---:|"
base=""
for spec in "1 1 whole model" "1 2 whole model" "2 1 T=2"; do
  read -r ranks threads label <<< "$spec"
  figures=()
  for ((i = 0; i < repeats; i++)); do figures+=("$(run "$ranks" "$threads")"); done
  m=$(median "${figures[@]}")
  [[ -z "$base" ]] && base=$m
  ratio=$("$py" -c "print(f'{$m / $base:.2f}')")
  echo "| $label | $ranks x $threads | $m | ${figures[*]} | $ratio |"
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
