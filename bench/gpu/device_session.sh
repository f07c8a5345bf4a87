#!/usr/bin/env bash
# One call of the lent GPU machine, prepared: what the machine is, then bench/gpu/check.sh
# on it, then everything packed into the few files such a call brings back.
#
#   here:   scripts/make_gpu_bundle.sh             (gpu-bundle.tar.xz, ~11 MiB)
#   there:  bench/gpu/device_session.sh [--budget SECONDS] [--profile] [check.sh arguments...]
#           with gpu-bundle.tar.xz carried to the repository root and $OUT set (the device
#           tool does both: carry ["gpu-bundle.tar.xz"]).
#
# $OUT receives at most six files (the device tool brings back eight): machine.txt
# (nvidia-smi, CPU, driver), gpu_check.txt and gpu_check.json (check.sh's table), and
# logs.tar.gz (every row's log and the parallel runs' event files; the prepared data
# shards left out). --budget (default 380 s) bounds check.sh as a whole, so the call ends
# inside the device tool's limit with its files written. --profile adds, after the check,
# where a bf16 GPT-2 124M step's GPU time goes: Nsight Compute's per-kernel times of two
# steps at batch 4 (ncu_bf16.csv, ~20 s) and their summary by category
# (ncu_summary.txt, bench/gpu/ncu_summary.py); it needs ncu on the PATH or under
# /usr/local/cuda/bin.
set -uo pipefail
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:?"device_session.sh: \$OUT is not set (the device tool sets it)"}
budget=380
profile=0
while (($#)); do
  case "$1" in
    --budget) budget=$2; shift 2 ;;
    --profile) profile=1; shift ;;
    *) break ;;  # the rest goes to check.sh
  esac
done
work=/tmp/dseek-device-session
rm -rf "$work" && mkdir -p "$work/check"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc)"
  echo "glibc: $(ldd --version | head -n 1)"
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version 2>&1 | grep release)"
  # whether the machine has its own cuDNN (else the bundle's lib/cudnn, if it fit)
  echo "cudnn: $(ls /usr/local/cuda/lib64/libcudnn*.so.9 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')"
  echo "nvrtc: $(ls /usr/local/cuda/lib64/libnvrtc*.so* 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')"
  nvidia-smi 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
    --format=csv 2>&1
} >"$out/machine.txt"

bash "$repo_root/bench/gpu/check.sh" --budget "$budget" --out "$work/check" "$@"
code=$?
cp "$work/check/gpu_check.txt" "$work/check/gpu_check.json" "$out/" 2>/dev/null
tar -C "$work" --exclude='check/parallel-data' --exclude='*.bin' -czf "$out/logs.tar.gz" check
echo "device_session.sh: check.sh exit $code; logs in logs.tar.gz"

if ((profile)); then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  gpt2_train=/tmp/dseek-gpu-check/gpu-bundle/bin/gpt2_train  # where check.sh unpacked it
  if [[ ! -x $ncu || ! -x $gpt2_train ]]; then
    echo "device_session.sh: --profile needs ncu ($ncu) and the unpacked bundle ($gpt2_train)" |
      tee "$out/ncu_summary.txt"
    code=1
  else
    # shellcheck source=/dev/null
    source /tmp/dseek-gpu-check/gpu-bundle/env.sh
    # --clock-control none: the clocks as training sees them (ncu would lock them to base).
    timeout 120 "$ncu" --clock-control none --metrics gpu__time_duration.sum \
      --print-summary per-kernel --csv "$gpt2_train" --device cuda --batch 4 --steps 2 \
      --warmup 1 --precision bf16 >"$out/ncu_bf16.csv" 2>&1
    profile_code=$?
    if ((profile_code == 0)) && python3 "$repo_root/bench/gpu/ncu_summary.py" "$out/ncu_bf16.csv" \
         >"$out/ncu_summary.txt" 2>&1; then
      cat "$out/ncu_summary.txt"
    else
      echo "device_session.sh: the profile failed (ncu exit $profile_code; see ncu_bf16.csv)" |
        tee -a "$out/ncu_summary.txt"
      code=1
    fi
  fi
fi
exit $code
