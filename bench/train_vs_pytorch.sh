#!/usr/bin/env bash
# Side-by-side training throughput: `dseek bench train` against its PyTorch peer
# (bench/peers/pytorch_gpt_train.py: the same GPT, AdamW, clipping, fp32 eager).
#
#   bench/train_vs_pytorch.sh [--config FILE] [--threads "1 2"] [--runs 3] [--steps 6]
#
# For each thread count, runs `runs` rounds of dseek then PyTorch, interleaved so
# machine noise hits both, prints each run's tokens/s, then a table of medians
# and the ratio dseek/pytorch. The model shape comes from the dseek config.
# Both sides run in the same environment (OPENBLAS_CORETYPE: bench/lib/common.sh); PyTorch
# also gets OMP_WAIT_POLICY=PASSIVE, its best setting at >1 thread, and
# OPENBLAS_NUM_THREADS=<threads>: torch.set_num_threads does not reach Debian's OpenBLAS
# (BLAS_INFO=generic), which would otherwise run PyTorch's matmuls on every core even in
# the "1 thread" case (measured: 2x on sgemm at 2 cores). Also prints the share of the
# measured sgemm peak the model's linear layers reach: dseek bench train's matmul_gflops
# (median over the runs) over dseek bench gemm's fp32_gflops (a 2048^3 linear layer on
# the same path and threads, best of 5, measured in every round, the best round kept). The
# output is meant to be pasted into bench/RESULTS.md. Exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

config=bench/configs/gpt-d384.toml threads="1 2" runs=3 steps=6 warmup=1
py=/usr/bin/python3
source bench/lib/common.sh
HELP_LINES=2,12 parse_train_bench_args "$@"
read -r dim layers heads context vocab batch _ < <(model_shape "$config")


echo "# dseek vs PyTorch training throughput, $(date -u '+%Y-%m-%d %H:%M UTC')"
machine_line
echo "model: $config: dim $dim, layers $layers, heads $heads, context $context, vocab $vocab, batch $batch; fp32"
echo "steps: $warmup warm-up + $steps timed per run, $runs runs per side, interleaved"
blas_line
echo "PyTorch: $("$py" -c 'import torch; print(torch.__version__)'), OMP_WAIT_POLICY=PASSIVE, OPENBLAS_NUM_THREADS=<threads>"
echo

declare -A med_d med_p med_g peak
field() { "$py" -c "import sys, json; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
for n in $threads; do
  ds=() ps=() gs=() pk=()
  for ((r = 1; r <= runs; r++)); do
    out=$("$dseek" bench train --config "$config" --threads "$n" --steps "$steps" --warmup "$warmup") \
      || { echo "dseek failed (threads $n, run $r)" >&2; exit 1; }
    ds+=("$(tps <<<"$out")")
    gs+=("$(field matmul_gflops <<<"$out")")
    out=$(OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS="$n" "$py" bench/peers/pytorch_gpt_train.py --dim "$dim" --layers "$layers" \
            --heads "$heads" --context "$context" --vocab "$vocab" --batch-size "$batch" \
            --threads "$n" --steps "$steps" --warmup "$warmup") \
      || { echo "pytorch failed (threads $n, run $r)" >&2; exit 1; }
    ps+=("$(tps <<<"$out")")
    pk+=("$("$dseek" bench gemm --threads "$n" | field fp32_gflops)")  # best round kept
    echo "threads $n run $r: dseek ${ds[-1]} tok/s, pytorch ${ps[-1]} tok/s"
  done
  med_d[$n]=$(median "${ds[@]}") med_p[$n]=$(median "${ps[@]}") med_g[$n]=$(median "${gs[@]}")
  peak[$n]=$(max "${pk[@]}")
done

echo
echo "| threads | dseek tok/s | pytorch tok/s | dseek/pytorch | model GEMM GFLOP/s | sgemm peak GFLOP/s | share of peak |"
echo "|--------:|------------:|--------------:|--------------:|-------------------:|-------------------:|--------------:|"
for n in $threads; do
  printf '| %7s | %11.1f | %13.1f | %13.2f | %18.1f | %18.1f | %13.2f |\n' "$n" "${med_d[$n]}" \
    "${med_p[$n]}" "$("$py" -c "print(${med_d[$n]} / ${med_p[$n]})")" "${med_g[$n]}" "${peak[$n]}" \
    "$("$py" -c "print(${med_g[$n]} / ${peak[$n]})")"
done
