#!/usr/bin/env bash
# One row of the GPU check (bench/gpu/check.sh): a small pipeline-parallel (P = 2) or
# tensor-parallel (T = 2) job as two dseek-node processes (`dseek launch --nodes 2`, both
# on the device: on the GPU machine they share CUDA device 0), and the same job on the
# CPU backend; every step's loss of node 0 is compared, and the row fails loudly when the
# largest relative difference is above the bound or a job fails.
#
# The bound: 1e-4 relative by default. The CUDA backend computes fp32 without TF32
# (gpu/cuda_backend.cu) and its ops match the CPU's to ~1e-5 relative L2 (tests/gpu);
# over a few AdamW steps that rounding stays orders of magnitude below 1e-4 on the loss,
# while a host access that bypasses the backend (a device pointer read on the host, a
# stage's activations not copied) moves it by far more or fails the run. On the
# scrambled test device (train.device = "scrambled-cpu-for-tests", what check.sh's cpu
# mode runs) the losses are equal bit for bit.
#
# Usage: bench/gpu/parallel_device_check.sh --layout pipeline|tensor --device DEVICE
#          --bin-dir DIR --data DIR --out DIR [--steps N] [--tolerance X]
#   DEVICE: cuda or scrambled-cpu-for-tests (train.device); --data: a prepared data set
#   (dseek data prepare); --out: where both runs and their logs go.
# Prints one JSON line last: layout, device, steps, max_relative_loss_difference,
# tolerance, the median step_ms of both runs, status ok or failed (and why). Exit status:
# 0 ok, 1 failed, 2 bad arguments.
set -uo pipefail
repo_root=$(cd "$(dirname "$0")/../.." && pwd)

layout="" device="" bin_dir="" data="" out="" steps=6 tolerance=1e-4
while (($#)); do
  case "$1" in
    --layout) layout=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --tolerance) tolerance=$2; shift 2 ;;
    *) echo "parallel_device_check.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case $layout in
  pipeline) layout_set=(--set parallel.pipeline=2 --set train.micro_batch_size=2) ;;
  tensor) layout_set=(--set parallel.tensor=2) ;;
  *) echo "parallel_device_check.sh: --layout must be pipeline or tensor" >&2; exit 2 ;;
esac
if [[ -z $device || -z $bin_dir || -z $data || -z $out ]]; then
  echo "parallel_device_check.sh: --device, --bin-dir, --data and --out are required" >&2; exit 2
fi
mkdir -p "$out"

# A job small enough for a few seconds per step on two CPU threads, big enough that
# every block, both stages and both tensor ranks do real work.
run_job() {  # train.device, run directory
  DSEEK_NODE_BINARY="$bin_dir/dseek-node" "$bin_dir/dseek" launch --nodes 2 --run-dir "$2" \
    "$repo_root/config/single.toml" \
    --set "data.dir=\"$data\"" --set model.dim=128 --set model.layers=4 --set model.heads=4 \
    --set model.context=64 --set train.batch_size=8 --set "train.steps=$steps" \
    --set train.warmup_steps=2 --set train.eval_every=0 --set train.threads=1 \
    --set 'metrics.progress="plain"' --set "train.device=\"$1\"" "${layout_set[@]}" \
    >"$2.log" 2>&1
}

# Node 0's step events as "loss step_ms" lines, in step order.
steps_of() {
  grep -h '"event":"step"' "$1"/node-0/events.jsonl 2>/dev/null |
    sed -n 's/.*"step":\([0-9]*\).*"loss":\([-0-9.eE+]*\).*"step_ms":\([-0-9.eE+]*\).*/\1 \2 \3/p' |
    sort -n | cut -d' ' -f2-
}

fail() {  # reason
  printf '{"layout":"%s","device":"%s","steps":%s,"tolerance":%s,"status":"failed","reason":"%s"}\n' \
    "$layout" "$device" "$steps" "$tolerance" "$1"
  exit 1
}

device_run=$out/$layout-$device cpu_run=$out/$layout-cpu
rm -rf "$device_run" "$cpu_run"
run_job "$device" "$device_run" || fail "the $device job failed (exit $?): see $device_run.log"
run_job cpu "$cpu_run" || fail "the cpu job failed (exit $?): see $cpu_run.log"
device_steps=$(steps_of "$device_run")
cpu_steps=$(steps_of "$cpu_run")
[[ $(wc -l <<<"$device_steps") -eq $steps && $(wc -l <<<"$cpu_steps") -eq $steps ]] ||
  fail "expected $steps step events on node 0 of both runs"

paste -d' ' <(echo "$device_steps") <(echo "$cpu_steps") | awk \
  -v layout="$layout" -v device="$device" -v steps="$steps" -v tolerance="$tolerance" '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; ++i) for (j = i; j > 1 && a[j - 1] > a[j]; --j) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  {
    d = $1 - $3; if (d < 0) d = -d
    b = $3 < 0 ? -$3 : $3
    r = b > 0 ? d / b : d
    if (r > worst || NR == 1) worst = r
    if ($1 != $1 + 0 || $3 != $3 + 0) bad = 1
    dev_ms[NR] = $2; cpu_ms[NR] = $4
  }
  END {
    status = (!bad && worst <= tolerance) ? "ok" : "failed"
    printf "{\"layout\":\"%s\",\"device\":\"%s\",\"steps\":%d,\"max_relative_loss_difference\":%.3g,\"tolerance\":%s,\"device_step_ms\":%.1f,\"cpu_step_ms\":%.1f,\"status\":\"%s\"}\n",
      layout, device, steps, worst, tolerance, median(dev_ms, NR), median(cpu_ms, NR), status
    exit status == "ok" ? 0 : 1
  }'
