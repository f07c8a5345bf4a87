#!/usr/bin/env bash
# Side-by-side bf16 training throughput: `dseek bench train` with train.precision = bf16
# against PyTorch's bf16 autocast (bench/peers/pytorch_gpt_train.py --precision bf16: the
# same GPT, AdamW and clipping, forward under torch.autocast("cpu", bfloat16)), with each
# side's fp32 as the baseline, on the same threads.
#
#   bench/bf16_vs_torch.sh [--config FILE] [--threads "2"] [--runs 3] [--steps 4]
#
# For each thread count, `runs` rounds of dseek bf16, PyTorch bf16, dseek fp32 and
# PyTorch fp32, interleaved so machine noise hits all; prints each run's tokens/s, then
# a table of medians with dseek/pytorch in bf16 and each side's bf16/fp32 speed-up.
# Environment as bench/train_vs_pytorch.sh (OPENBLAS_CORETYPE: bench/lib/common.sh; PyTorch gets
# OMP_WAIT_POLICY=PASSIVE and OPENBLAS_NUM_THREADS=<threads>). The header says whether
# the CPU has AVX-512 BF16 or AMX instructions (without them neither side has a bf16 GEMM
# kernel faster than fp32, and the comparison measures the cost of the bf16 rounding,
# not bf16 speed) and which kernels dseek's matmuls ran (`dseek bench train`'s
# matmul_kernels: oneDNN's ISA and implementations). Exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

config=bench/configs/gpt-d384.toml threads="2" runs=3 steps=4 warmup=1
py=/usr/bin/python3
source bench/lib/common.sh
HELP_LINES=2,16 parse_train_bench_args "$@"
read -r dim layers heads context vocab batch _ < <(model_shape "$config")
avx512=$( (grep -o 'avx512[a-z_0-9]*' /proc/cpuinfo || true) | sort -u | tr '\n' ' ')
amx=$( (grep -o 'amx[a-z_0-9]*' /proc/cpuinfo || true) | sort -u | tr '\n' ' ')

echo "# dseek bf16 vs PyTorch bf16 autocast, $(date -u '+%Y-%m-%d %H:%M UTC')"
machine_line
echo "AVX-512 flags: ${avx512:-none}; AMX flags: ${amx:-none}"
echo "dseek matmul kernels: $("$dseek" bench train --config "$config" --threads 1 --steps 1 --warmup 0 \
  --set 'train.precision="bf16"' | "$py" -c 'import sys, json; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["matmul_kernels"])')"
echo "load: $(uptime | sed 's/.*load average/load average/')"
echo "model: $config: dim $dim, layers $layers, heads $heads, context $context, vocab $vocab, batch $batch"
echo "steps: $warmup warm-up + $steps timed per run, $runs runs per side, interleaved"
blas_line
echo "PyTorch: $("$py" -c 'import torch; print(torch.__version__)'), OMP_WAIT_POLICY=PASSIVE, OPENBLAS_NUM_THREADS=<threads>"
echo

field() { "$py" -c "import sys, json; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
run_dseek() {  # threads precision: prints tokens/s, keeps the GEMM rate in $gflops_log
  out=$("$dseek" bench train --config "$config" --threads "$1" --steps "$steps" --warmup "$warmup" \
    --set "train.precision=\"$2\"") || return 1
  field matmul_gflops <<<"$out" >"$gflops_log"
  tps <<<"$out"
}
gflops_log=$(mktemp)
trap 'rm -f "$gflops_log"' EXIT
run_torch() {  # threads precision
  OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS="$1" "$py" bench/peers/pytorch_gpt_train.py \
    --dim "$dim" --layers "$layers" --heads "$heads" --context "$context" --vocab "$vocab" \
    --batch-size "$batch" --threads "$1" --steps "$steps" --warmup "$warmup" --precision "$2" | tps
}

declare -A med
for n in $threads; do
  declare -A runs_of=()
  for ((r = 1; r <= runs; r++)); do
    line="threads $n run $r:"
    for side in dseek torch; do
      for precision in bf16 fp32; do
        value=$("run_$side" "$n" "$precision") \
          || { echo "$side $precision failed (threads $n, run $r)" >&2; exit 1; }
        runs_of[$side-$precision]+="$value "
        [[ $side == dseek ]] && runs_of[gemm-$precision]+="$(cat "$gflops_log") "
        line+=" $side $precision $value"
      done
    done
    # The GEMM peak once per round, the best round kept: a loaded moment only lowers it.
    gemm_line=$("$dseek" bench gemm --threads "$n")
    runs_of[peak-bf16]+="$(field bf16_gflops <<<"$gemm_line") "
    runs_of[peak-fp32]+="$(field fp32_gflops <<<"$gemm_line") "
    echo "$line tok/s"
  done
  for key in "${!runs_of[@]}"; do
    # shellcheck disable=SC2086
    med[$n-$key]=$(median ${runs_of[$key]})
  done
  med[$n-peak-bf16]=$(max ${runs_of[peak-bf16]})
  med[$n-peak-fp32]=$(max ${runs_of[peak-fp32]})
done

ratio() { "$py" -c "print($1 / $2)"; }
echo
echo "| threads | dseek bf16 tok/s | pytorch bf16 tok/s | dseek/pytorch bf16 | dseek bf16/fp32 | pytorch bf16/fp32 |"
echo "|--------:|-----------------:|-------------------:|-------------------:|----------------:|------------------:|"
for n in $threads; do
  printf '| %7s | %16.1f | %18.1f | %18.2f | %15.2f | %17.2f |\n' "$n" \
    "${med[$n-dseek-bf16]}" "${med[$n-torch-bf16]}" \
    "$(ratio "${med[$n-dseek-bf16]}" "${med[$n-torch-bf16]}")" \
    "$(ratio "${med[$n-dseek-bf16]}" "${med[$n-dseek-fp32]}")" \
    "$(ratio "${med[$n-torch-bf16]}" "${med[$n-torch-fp32]}")"
done
echo
echo "dseek's linear layers (medians of the runs) against dseek bench gemm's 2048^3 peak on the same threads (best of the rounds):"
echo "| threads | bf16 GEMM GFLOP/s | bf16 peak | share | fp32 GEMM GFLOP/s | fp32 peak | share |"
echo "|--------:|------------------:|----------:|------:|------------------:|----------:|------:|"
for n in $threads; do
  printf '| %7s | %17.1f | %9.1f | %5.2f | %17.1f | %9.1f | %5.2f |\n' "$n" \
    "${med[$n-gemm-bf16]}" "${med[$n-peak-bf16]}" "$(ratio "${med[$n-gemm-bf16]}" "${med[$n-peak-bf16]}")" \
    "${med[$n-gemm-fp32]}" "${med[$n-peak-fp32]}" "$(ratio "${med[$n-gemm-fp32]}" "${med[$n-peak-fp32]}")"
done
